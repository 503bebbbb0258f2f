"""Numba kernels for the non-scoring pipeline stages: deduplicate, sort, and the final
place stage (merge, overflow, placer) together with every inclusion/exclusion reason.

All of them walk item-set segments themselves. Row indices are positions in the ItemTable's
grouped row order.
"""

from __future__ import annotations

import numpy as np

from cupel_np._jit import jit

# reason codes (stored in the int8 reason matrix): one home, cupel_np.engine.reasons
from cupel_np.engine.reasons import (  # noqa: E402
    R_BUDGET_EXCEEDED,
    R_COUNT_CAP_EXCEEDED,
    R_PINNED,
    R_PINNED_OVERRIDE,
    R_SCORED,
    R_TRUNCATED,
    R_TRUNCATED_PINNED,
    R_ZERO_TOKEN,
)
from cupel_np.engine.slicers.greedy import complete_ranks, density_key
from cupel_np.engine.sortkeys import desc_bits, int_keys, ordered_bits, radix_argsort, stable_argsort  # noqa: F401 (radix_argsort: re-exported)

ERR_OVERFLOW = 2


def truncation_reasons(rows: np.ndarray, offsets: np.ndarray, pin_offsets: np.ndarray) -> np.ndarray:
    """The reason code of each row truncation dropped (grouped-order ``rows``): PinnedOverride
    when the row's set has a pinned item (the pinned items were kept first and took the
    budget), else BudgetExceeded."""
    has_pin = np.diff(pin_offsets) > 0
    seg = np.searchsorted(offsets, rows, side="right") - 1
    return np.where(has_pin[seg], R_TRUNCATED_PINNED, R_TRUNCATED).astype(np.int8)


PLACER_CHRONOLOGICAL = 0
PLACER_U_SHAPED = 1

OVERFLOW_THROW = 0
OVERFLOW_TRUNCATE = 1
OVERFLOW_PROCEED = 2


#: segments at least this long are sorted by NumPy's (much faster) stable sort instead of
#: inside the kernel; a corpus of small sets never leaves the kernel
BIG_SEGMENT = 65536


@jit
def _sort_small_segments(score, offsets, out):
    for s in range(offsets.shape[0] - 1):
        lo = offsets[s]
        hi = offsets[s + 1]
        if hi - lo == 0 or hi - lo >= BIG_SEGMENT:
            continue
        order = stable_argsort(desc_bits(score[lo:hi]))
        for j in range(hi - lo):
            out[lo + j] = order[j] + lo


@jit
def _index_order_runs(order, key):
    """``order`` sorted by ``key`` with ties in any order: each run of equal keys back to
    ascending index order (short runs by insertion, long ones by a sort). In place."""
    n = order.shape[0]
    i = 0
    while i < n:
        j = i + 1
        while j < n and key[j] == key[i]:
            j += 1
        if 1 < j - i <= 32:
            for u in range(i + 1, j):
                x = order[u]
                w = u - 1
                while w >= i and order[w] > x:
                    order[w + 1] = order[w]
                    w -= 1
                order[w + 1] = x
        elif j - i > 32:
            seg = order[i:j].copy()
            o = stable_argsort(int_keys(seg))
            for u in range(j - i):  # element loops, not slice assignment (see _jit)
                order[i + u] = seg[o[u]]
        i = j


def sort_segments(score, offsets):
    """Stable per-segment order by score descending (NaN lowest); returns positions."""
    out = np.empty(score.shape[0], dtype=np.int64)
    _sort_small_segments(score, offsets, out)
    sizes = np.diff(offsets)
    for s in np.flatnonzero(sizes >= BIG_SEGMENT):
        lo, hi = int(offsets[s]), int(offsets[s + 1])
        key = desc_bits(score[lo:hi])
        o = np.argsort(key)  # unstable SIMD quicksort, then equal-key runs back to index order
        _index_order_runs(o, key[o])
        out[lo:hi] = o + lo
    return out


#: kept lists at least this long are ordered by the radix sort in u-shaped placement
RADIX_MIN = 4096
#: u-shaped placement of a segment whose slicer selected at least this many items orders them
#: outside the kernel: NumPy's SIMD quicksort of the score keys, then every run of equal scores
#: repaired to slicer-output order (``_sliced_score_order``)
U_SORT_MIN = 32768
#: chronological placement filters the shared timestamp order when a segment keeps more than
#: this many items (and at least 1/32 of its timestamped rows); smaller ones sort their own
CHRONO_FILTER_MIN = 16


@jit
def _chronological_all(
    pin_rows, plo, n_pin, cand_rows, clo, chi, rank, m, ts_valid, ts_order, ts_sorted, a, b, lstpos, position
):
    """``_chronological_filter`` when every merged item is kept in merged order (no
    truncation): input position = pinned index, or ``n_pin + rank`` for a sliced item.
    Leaves ``lstpos`` set for the kept rows: the caller resets it.

    Arguments (one segment of ``_place_segments``'s arrays, see there)
        pinned : ``pin_rows[plo:plo + n_pin]``
        candidates : ``cand_rows[clo:chi]`` with their ``rank`` (-1: not selected); ``m``
            merged items in all
        per row : ``ts_valid``
        shared order : ``ts_order[a:b]`` / ``ts_sorted[a:b]``, the segment's timestamped rows
        scratch : ``lstpos`` (per row)
        output : ``position`` (per row)"""
    for q in range(n_pin):
        lstpos[pin_rows[plo + q]] = q
    for p in range(clo, chi):
        r = rank[p]
        if r >= 0:
            lstpos[cand_rows[p]] = n_pin + r
    out_row = np.empty(m, dtype=np.int64)
    out_key = np.empty(m, dtype=np.int64)
    c = _ts_scan(ts_order, ts_sorted, a, b, lstpos, out_row, out_key)
    other = out_key  # reused: input position -> row of an untimestamped item (-1 otherwise)
    for j in range(c, m):
        other[j] = -1
    for j in range(c):
        other[j] = -1
    for q in range(n_pin):
        row = pin_rows[plo + q]
        if not ts_valid[row]:
            other[q] = row
    for p in range(clo, chi):
        r = rank[p]
        if r >= 0 and not ts_valid[cand_rows[p]]:
            other[n_pin + r] = cand_rows[p]
    for j in range(m):
        if other[j] >= 0:
            out_row[c] = other[j]
            c += 1
    for j in range(m):
        position[out_row[j]] = j
    # the caller resets lstpos (to -1) in its pass over the kept rows


@jit
def _u_shaped_all(pin_rows, plo, n_pin, cand_rows, clo, chi, rank, m, u_rank, u_key, ua, ub, one_key, position):
    """U-shaped placement when every merged item is kept: the sliced items come ordered
    (``u_rank[ua:ub]``, score desc then rank, keys ``u_key``); the pinned items (score 1.0)
    go before the first sliced item whose score is not above 1.0. Item ``j`` of that order
    is placed at ``j // 2`` (even ``j``) or ``m - 1 - j // 2`` (odd ``j``).

    Arguments (one segment of ``_place_segments``'s arrays, see there)
        pinned : ``pin_rows[plo:plo + n_pin]``
        candidates : ``cand_rows[clo:chi]`` with their ``rank``; ``m`` merged items in all
        u-shaped order : ``u_rank[ua:ub]`` and ``u_key[ua:ub]``; ``one_key``
        output : ``position`` (per row)"""
    row_of = np.empty(ub - ua, dtype=np.int64)  # sliced row by rank
    for p in range(clo, chi):
        r = rank[p]
        if r >= 0:
            row_of[r] = cand_rows[p]
    j = 0
    pin_done = n_pin == 0
    for u in range(ua, ub):
        if not pin_done and u_key[u] >= one_key:
            for q in range(n_pin):
                position[pin_rows[plo + q]] = j // 2 if j % 2 == 0 else m - 1 - j // 2
                j += 1
            pin_done = True
        position[row_of[u_rank[u]]] = j // 2 if j % 2 == 0 else m - 1 - j // 2
        j += 1
    if not pin_done:
        for q in range(n_pin):
            position[pin_rows[plo + q]] = j // 2 if j % 2 == 0 else m - 1 - j // 2
            j += 1


@jit
def _ts_scan(ts_order, ts_sorted, a, b, lstpos, out_row, out_key):
    """Kept rows (``lstpos >= 0``) of the shared timestamp order; runs of equal timestamps
    ordered by input position. Returns the count written to ``out_row``/``out_key``."""
    c = 0
    out_t = np.empty(out_row.shape[0], dtype=ts_sorted.dtype)
    for i in range(a, b):
        row = ts_order[i]
        p = lstpos[row]
        if p >= 0:
            out_row[c] = row
            out_key[c] = p
            out_t[c] = ts_sorted[i]
            c += 1
    _repair_pairs(out_row, out_key, out_t, c)
    return c


@jit
def _repair_pairs(rows, key, grp, n):
    """Within each run of equal ``grp`` values, order (rows, key) pairs by ``key`` (distinct
    values). Short runs by insertion, long runs by a sort: never quadratic."""
    i = 0
    while i < n:
        j = i + 1
        while j < n and grp[j] == grp[i]:
            j += 1
        if 1 < j - i <= 32:
            for u in range(i + 1, j):
                x = key[u]
                r = rows[u]
                w = u - 1
                while w >= i and key[w] > x:
                    key[w + 1] = key[w]
                    rows[w + 1] = rows[w]
                    w -= 1
                key[w + 1] = x
                rows[w + 1] = r
        elif j - i > 32:
            o = stable_argsort(int_keys(key[i:j]))
            kk = key[i:j][o]
            rr = rows[i:j][o]
            for u in range(j - i):
                key[i + u] = kk[u]
                rows[i + u] = rr[u]
        i = j


@jit
def _chronological_filter(
    mrow, lst, n_keep, n_pin, cand_rows, clo, chi, rank, ts_valid, ts_order, ts_sorted, a, b, lstpos, mark, position
):
    """Chronological placement of the kept items ``lst`` (merged indices, in placer input
    order) by filtering the segment's shared timestamp order: timestamped items by timestamp
    (ties by input order), then the others in input order. Writes ``position[row]``.

    Per-row work runs in row order (the candidates) or in timestamp order (the shared order);
    only ``lstpos`` (-1 on entry and exit) and ``position`` are addressed by row.

    Arguments (one segment of ``_place_segments``'s arrays, see there)
        merged list : ``mrow`` (row per merged index; the first ``n_pin`` pinned) and the kept
            ``lst[:n_keep]``
        candidates : ``cand_rows[clo:chi]`` with their ``rank``
        per row : ``ts_valid``
        shared order : ``ts_order[a:b]`` / ``ts_sorted[a:b]``, the segment's timestamped rows
        scratch : ``lstpos`` (per row), ``mark`` (per merged index)
        output : ``position`` (per row)"""
    m = mark.shape[0]
    inv = mark  # merged index -> input-order position (-1 when dropped)
    for q in range(m):
        inv[q] = -1
    for j in range(n_keep):
        inv[lst[j]] = j
    for q in range(n_pin):
        lstpos[mrow[q]] = inv[q]
    for p in range(clo, chi):
        r = rank[p]
        if r >= 0:
            lstpos[cand_rows[p]] = inv[n_pin + r]
    out_row = np.empty(n_keep, dtype=np.int64)
    out_key = np.empty(n_keep, dtype=np.int64)
    c = _ts_scan(ts_order, ts_sorted, a, b, lstpos, out_row, out_key)
    # the others, in input order: mark their input positions, then scan
    for j in range(n_keep):
        inv[j] = -1
    for q in range(n_pin):
        row = mrow[q]
        if lstpos[row] >= 0 and not ts_valid[row]:
            inv[lstpos[row]] = row
    for p in range(clo, chi):
        if rank[p] >= 0:
            row = cand_rows[p]
            if lstpos[row] >= 0 and not ts_valid[row]:
                inv[lstpos[row]] = row
    for j in range(n_keep):
        if inv[j] >= 0:
            out_row[c] = inv[j]
            c += 1
    for j in range(n_keep):
        position[out_row[j]] = j
    for q in range(n_pin):
        lstpos[mrow[q]] = -1
    for p in range(clo, chi):
        if rank[p] >= 0:
            lstpos[cand_rows[p]] = -1


@jit
def _keys_by_rank(rank, cand_score, cand_tok, lo, hi):
    """Score keys (``desc_bits``: descending, NaN lowest) of the items the slicer selected in
    ``[lo, hi)``, indexed by their rank; with their scores and tokens, also by rank."""
    n = 0
    for p in range(lo, hi):
        if rank[p] >= 0:
            n += 1
    sc = np.empty(n, dtype=np.float64)
    tk = np.empty(n, dtype=np.int64)
    for p in range(lo, hi):
        r = rank[p]
        if r >= 0:
            sc[r] = cand_score[p]
            tk[r] = cand_tok[p]
    return desc_bits(sc), sc, tk


@jit
def _rank_order_runs(o, key, sc, tk, n_pre):
    """``o`` (ranks) orders ``key`` with ties in any order: put every run of equal keys in
    slicer-output order, in place, and return the keys in ``o`` order. Ranks below ``n_pre``
    (the unordered greedy prefix, ranked in index order) precede the others and are ordered by
    density descending (NaN last: key ``0.0 - density``, NaN as +inf), then rank; the others by
    rank."""
    n = o.shape[0]
    ks = np.empty(n, dtype=np.uint64)
    for i in range(n):
        ks[i] = key[o[i]]
    top = np.uint64(0xFFFFFFFFFFFFFFFF)  # after every prefix key (ordered bits of +inf are lower)
    i = 0
    while i < n:
        j = i + 1
        while j < n and ks[j] == ks[i]:
            j += 1
        if 1 < j - i <= 32:  # insertion sort by (class, density key, rank), in place
            for u in range(i + 1, j):
                x = o[u]
                dx = 0.0
                if x < n_pre:
                    dx = density_key(tk[x], sc[x])
                w = u - 1
                while w >= i:
                    z = o[w]
                    if (z < n_pre) != (x < n_pre):
                        if z < n_pre:  # the prefix first
                            break
                    elif x < n_pre:
                        dz = density_key(tk[z], sc[z])
                        if dz < dx or (dz == dx and z < x):
                            break
                    elif z < x:
                        break
                    o[w + 1] = z
                    w -= 1
                o[w + 1] = x
        elif j - i > 32:
            run = o[i:j].copy()
            run = run[stable_argsort(int_keys(run))]
            if run[0] < n_pre:  # prefix ranks in the run: then by density (stable)
                y = np.empty(j - i, dtype=np.float64)
                for u in range(j - i):
                    r = run[u]
                    y[u] = np.inf if r >= n_pre else density_key(tk[r], sc[r])
                kk = ordered_bits(y)
                for u in range(j - i):
                    if run[u] >= n_pre:
                        kk[u] = top
                run = run[stable_argsort(kk)]
            for u in range(j - i):
                o[i + u] = run[u]
        i = j
    return ks


def _sliced_score_order(rank, cand_score, cand_tok, cand_offsets, min_sel, prefix):
    """Per segment with at least ``min_sel`` selected items, or an unordered greedy prefix
    (``prefix[s] > 0``): the ranks of its selected items in (score descending with NaN lowest,
    slicer output) order - u-shaped placement's order of the sliced items - sorted by NumPy's
    SIMD quicksort plus a repair of equal-score runs. Returns ``(u_rank, u_key, u_off)``:
    segment ``s`` owns ``u_rank[u_off[s]:u_off[s+1]]`` (empty: the kernel sorts the segment
    itself) and ``u_key`` holds the matching sorted keys."""
    n_seg = cand_offsets.shape[0] - 1
    u_off = np.zeros(n_seg + 1, dtype=np.int64)
    parts_rank, parts_key = [], []
    sizes = np.diff(cand_offsets)
    big = sizes >= max(min_sel, 1)
    if prefix is not None:
        big |= prefix > 0
    for s in np.flatnonzero(big):  # a few big sets at most
        n_pre = 0 if prefix is None else int(prefix[s])
        key, sc, tk = _keys_by_rank(rank, cand_score, cand_tok, int(cand_offsets[s]), int(cand_offsets[s + 1]))
        if (key.shape[0] < min_sel and n_pre == 0) or key.shape[0] == 0:
            continue
        o = np.argsort(key)  # unstable SIMD quicksort; ties repaired below
        parts_key.append(_rank_order_runs(o, key, sc, tk, n_pre))
        parts_rank.append(o)
        u_off[s + 1] = o.shape[0]
    np.cumsum(u_off, out=u_off)
    if not parts_rank:
        return np.zeros(0, np.int64), np.zeros(0, np.uint64), u_off
    if len(parts_rank) == 1:
        return parts_rank[0], parts_key[0], u_off
    return np.concatenate(parts_rank), np.concatenate(parts_key), u_off


@jit
def _mark_tied(ts_order, ts_sorted, a, b, flag):
    """``flag[row] = True`` for every row of the shared timestamp order ``[a, b)`` whose
    timestamp another row of the segment shares."""
    for i in range(a, b - 1):
        if ts_sorted[i] == ts_sorted[i + 1]:
            flag[ts_order[i]] = True
            flag[ts_order[i + 1]] = True


def chrono_compared(ts_valid, ts_order, ts_sorted, rows):
    """Per row of ``rows``: whether chronological placement may compare it with another item
    by input order - untimestamped, or sharing its timestamp with another row (of the whole
    table, a superset of its set's: marking more rows only orders more). For
    ``greedy_segments(compared=...)``."""
    flag = np.zeros(ts_valid.shape[0], dtype=np.bool_)
    _mark_tied(ts_order, ts_sorted, 0, ts_order.shape[0], flag)
    return flag[rows] | ~ts_valid[rows]


def _finish_ranks(
    tokens,
    pin_rows,
    pin_offsets,
    cand_score,
    cand_tok,
    cand_offsets,
    rank,
    prefix,
    budget_targets,
    overflow,
    placer,
    prefix_compared,
):
    """Order what the placer compares of each unordered greedy prefix (``prefix[s]`` ranks in
    index order, see ``greedy.greedy_segments``): nothing for u-shaped (its score order
    repairs ties itself) nor for chronological when the slicer already ordered the compared
    items (``prefix_compared``), every rank otherwise or when the segment truncates. Returns
    the prefix lengths u-shaped still needs."""
    left = np.zeros_like(prefix)
    for s in np.flatnonzero(prefix > 1):
        lo, hi = int(cand_offsets[s]), int(cand_offsets[s + 1])
        n_pre = int(prefix[s])
        tok, sc, rk = cand_tok[lo:hi], cand_score[lo:hi], rank[lo:hi]
        if overflow == OVERFLOW_TRUNCATE:  # the kernel's `truncating`, decided the same way
            pinned = int(tokens[pin_rows[pin_offsets[s] : pin_offsets[s + 1]]].sum())
            if pinned + int(tok[rk >= 0].sum()) > budget_targets[s]:
                complete_ranks(tok, sc, rk, n_pre)
                continue
        if placer == PLACER_U_SHAPED:
            left[s] = n_pre
        elif not (placer == PLACER_CHRONOLOGICAL and prefix_compared):
            complete_ranks(tok, sc, rk, n_pre)
    return left


def timestamp_order(ts, ts_valid, offsets):
    """Every segment's timestamped rows sorted by timestamp (shared by all variants), their
    timestamps in that order, and the segment offsets. Equal timestamps of a segment come in
    no particular order (placement repairs them to its input order).

    One NumPy quicksort (SIMD, releases the GIL) of a (segment, timestamp) key packed in a
    uint64; when the two do not fit in 64 bits the timestamps are replaced by their ranks."""
    rows = np.flatnonzero(ts_valid)
    n_seg = offsets.shape[0] - 1
    off = np.searchsorted(rows, offsets).astype(np.int64)
    tv = ts[rows]
    if n_seg == 1 or rows.shape[0] < 2:
        order = rows[np.argsort(tv)]
    else:
        lo = int(tv.min())
        t_bits = (int(tv.max()) - lo).bit_length()
        if t_bits + (n_seg - 1).bit_length() <= 64:
            low = tv.view(np.uint64) - np.uint64(lo % 2**64)  # ts - lo, exact modulo 2**64
        else:
            low = np.empty(rows.shape[0], dtype=np.uint64)
            low[np.argsort(tv)] = np.arange(rows.shape[0], dtype=np.uint64)
            t_bits = (rows.shape[0] - 1).bit_length()
        seg_key = np.arange(n_seg, dtype=np.uint64) << np.uint64(t_bits)
        key = np.repeat(seg_key, np.diff(off))
        key |= low
        order = rows[np.argsort(key)]
    order = order.astype(np.int64)
    return order, ts[order], off


@jit
def _place_segments(
    n_rows,
    tokens,
    kind,
    ts,
    ts_valid,
    pin_rows,
    pin_offsets,
    cand_rows,
    cand_score,
    cand_offsets,
    rank,
    eff_targets,
    budget_targets,
    budget_reserves,
    overflow,
    placer,
    count_caps,
    cap_of_kind,
    included,
    reason,
    detail_a,
    detail_b,
    position,
    seq,
    use_ts_order,
    ts_order,
    ts_sorted,
    ts_offsets,
    lstpos,
    chrono_min,
    radix_min,
    u_rank,
    u_key,
    u_off,
    one_key,
):
    """Merge pinned and sliced items per segment (item set), apply the overflow strategy, run
    the placer and write every row's inclusion/exclusion reason.

    Parameters, by what they are indexed by (row: the table's grouped row order; segment:
    item set; candidate: the slicer's input, segment by segment):

    Per row of the table (read only)
        n_rows : the number of rows, N (truncation marks start at ``3 * n_rows``)
        tokens : int64 tokens per row
        kind : int64 kind id per row
        ts, ts_valid : int64 timestamp per row (the table's unit) and whether it has one
    Per segment (read only)
        pin_rows, pin_offsets : the non-negative pinned rows, grouped by segment
            (``pin_rows[pin_offsets[s]:pin_offsets[s+1]]``, input order)
        eff_targets : the spec's effective target (what the slicer was given)
        budget_targets, budget_reserves : the budget's target_tokens and output_reserve (the
            overflow target, and the PinnedOverride limit ``target - reserve``)
    Per candidate (the slice stage's output; segment ``s`` is ``cand_offsets[s]:cand_offsets[s+1]``)
        cand_rows : table row of each candidate
        cand_score : its score
        cand_offsets : per segment, int64 [n_seg + 1]
        rank : its place in the slicer's output, -1 when not selected
    Per variant (its policy)
        overflow : ``OVERFLOW_THROW`` / ``OVERFLOW_TRUNCATE`` / ``OVERFLOW_PROCEED``
        placer : ``PLACER_CHRONOLOGICAL`` / ``PLACER_U_SHAPED``
        count_caps : the slicer has count caps (CountCapExceeded reasons are written)
        cap_of_kind : int64 per kind id, its count cap (-1 none); read only with ``count_caps``
    Shared by every variant (``timestamp_order``; read only)
        use_ts_order : whether the next three hold the shared order (else empty: every
            segment sorts its own kept items)
        ts_order, ts_sorted, ts_offsets : every segment's timestamped rows sorted by timestamp
            (``ts_order[ts_offsets[s]:ts_offsets[s+1]]``, ties in any order) and their
            timestamps in that order. Chronological placement of a segment that keeps many of
            its rows filters that order instead of sorting, then repairs runs of equal
            timestamps to the placer's input order.
    Per variant, prepared by the wrapper (``_sliced_score_order``; u-shaped only, else empty)
        u_rank, u_key, u_off : ``u_rank[u_off[s]:u_off[s+1]]`` (when not empty) holds the ranks
            of segment ``s``'s selected items in u-shaped order (score desc, rank), their score
            keys in ``u_key``. It serves the segment when nothing is truncated; a truncating
            segment sorts its kept items itself.
    Tuning constants (choose the path, never the answer)
        chrono_min : ``CHRONO_FILTER_MIN``
        radix_min : ``RADIX_MIN``
        one_key : ``_ONE_KEY``, the u-shaped order key of a pinned item's score 1.0
    Scratch
        lstpos : per row, -1 on entry and on exit
    Outputs (per row; only the rows of the merged segments are written)
        included : bool, the row is in the context
        reason : int8 reason code (``engine.reasons``)
        detail_a, detail_b : the cap and the count of a CountCapExceeded row (with
            ``count_caps``; may be empty otherwise); other reasons' fields are rebuilt on demand
        position : the placed position of an included row
        seq : written only for the rows truncation drops (``3 * n_rows`` + drop order); the
            caller reads it only then, after setting it to -1 (it may pass an empty array when
            the overflow strategy is not truncate)

    Returns
        per segment ``(err, err_a, sliced_tokens, kept_tokens)``: ``ERR_OVERFLOW`` with the
        merged token count when the strategy is throw; the tokens the slicer selected; the
        tokens of the included rows.
    """
    n_seg = pin_offsets.shape[0] - 1
    err = np.zeros(n_seg, dtype=np.int8)
    err_a = np.zeros(n_seg, dtype=np.int64)
    sliced_out = np.zeros(n_seg, dtype=np.int64)  # per segment: tokens the slicer selected
    kept_out = np.zeros(n_seg, dtype=np.int64)  # per segment: tokens of the included rows
    n_kinds = cap_of_kind.shape[0] if count_caps else 1
    kind_count = np.zeros(n_kinds, dtype=np.int64)  # scratch, reset per segment
    drop_seq = 3 * n_rows
    for s in range(n_seg):
        plo = pin_offsets[s]
        phi = pin_offsets[s + 1]
        clo = cand_offsets[s]
        chi = cand_offsets[s + 1]
        n_pin = phi - plo
        n_sel = 0
        pinned_tokens = 0
        for q in range(plo, phi):
            pinned_tokens += tokens[pin_rows[q]]
        sliced_tokens = 0
        eff_target = eff_targets[s]
        override_max = budget_targets[s] - budget_reserves[s]
        if count_caps:  # the exclusions need every kind's final count: two passes
            for p in range(clo, chi):
                kind_count[kind[cand_rows[p]]] = 0
            for p in range(clo, chi):
                if rank[p] >= 0:
                    n_sel += 1
                    sliced_tokens += tokens[cand_rows[p]]
                    kind_count[kind[cand_rows[p]]] += 1
        # slice-stage exclusions (counted and summed in the same pass without count caps)
        for p in range(clo, chi):
            row = cand_rows[p]
            t = tokens[row]
            if rank[p] >= 0:
                if not count_caps:
                    n_sel += 1
                    sliced_tokens += t
                continue
            included[row] = False
            k = kind[row]
            if pinned_tokens > 0 and t > eff_target and t <= override_max:
                reason[row] = R_PINNED_OVERRIDE
            elif count_caps and cap_of_kind[k] >= 0 and kind_count[k] >= cap_of_kind[k] and t <= eff_target:
                reason[row] = R_COUNT_CAP_EXCEEDED
                detail_a[row] = cap_of_kind[k]
                detail_b[row] = kind_count[k]
            else:
                reason[row] = R_BUDGET_EXCEEDED
        m = n_pin + n_sel
        merged_tokens = pinned_tokens + sliced_tokens
        target = budget_targets[s]
        sliced_out[s] = sliced_tokens
        kept_out[s] = merged_tokens
        if merged_tokens > target and overflow == OVERFLOW_THROW:
            err[s] = ERR_OVERFLOW
            err_a[s] = merged_tokens
            kept_out[s] = 0
            continue
        # _finish_ranks makes this same decision before the kernel (a truncating segment gets
        # exact ranks): the two conditions must stay identical
        truncating = merged_tokens > target and overflow == OVERFLOW_TRUNCATE
        fast_chrono = (
            placer == PLACER_CHRONOLOGICAL
            and use_ts_order
            and m > chrono_min
            and m * 32 >= ts_offsets[s + 1] - ts_offsets[s]
        )
        fast_u = placer == PLACER_U_SHAPED and u_off[s + 1] > u_off[s]
        if not truncating and (fast_chrono or fast_u):
            # every merged item is kept, in merged order: no merged arrays needed
            if fast_chrono:
                _chronological_all(
                    pin_rows,
                    plo,
                    n_pin,
                    cand_rows,
                    clo,
                    chi,
                    rank,
                    m,
                    ts_valid,
                    ts_order,
                    ts_sorted,
                    ts_offsets[s],
                    ts_offsets[s + 1],
                    lstpos,
                    position,
                )
            else:
                _u_shaped_all(
                    pin_rows,
                    plo,
                    n_pin,
                    cand_rows,
                    clo,
                    chi,
                    rank,
                    m,
                    u_rank,
                    u_key,
                    u_off[s],
                    u_off[s + 1],
                    one_key,
                    position,
                )
            for q in range(plo, phi):
                row = pin_rows[q]
                included[row] = True
                reason[row] = R_PINNED
                if fast_chrono:
                    lstpos[row] = -1  # _chronological_all's scratch, back to -1
            for p in range(clo, chi):
                if rank[p] >= 0:
                    row = cand_rows[p]
                    included[row] = True
                    reason[row] = R_ZERO_TOKEN if tokens[row] == 0 else R_SCORED
                    if fast_chrono:
                        lstpos[row] = -1
            continue
        # merged list: pinned (input order, score 1.0) then the slicer output in its order
        mrow = np.empty(m, dtype=np.int64)
        mscore = np.empty(m, dtype=np.float64)
        mpin = np.zeros(m, dtype=np.bool_)
        for q in range(n_pin):
            mrow[q] = pin_rows[plo + q]
            mscore[q] = 1.0
            mpin[q] = True
        for p in range(clo, chi):
            r = rank[p]
            if r >= 0:
                mrow[n_pin + r] = cand_rows[p]
                mscore[n_pin + r] = cand_score[p]
        keep = np.ones(m, dtype=np.bool_)
        keep_idx = np.empty(m, dtype=np.int64)
        order = np.arange(m)
        if merged_tokens > target:
            if overflow == OVERFLOW_TRUNCATE:
                # pinned first (they already are), then the sliced items by score descending
                if n_sel > 1:
                    tail = stable_argsort(desc_bits(mscore[n_pin:]))
                    for u in range(m - n_pin):
                        order[n_pin + u] = tail[u] + n_pin
                current = 0
                for j in range(m):
                    q = order[j]
                    t = tokens[mrow[q]]
                    if mpin[q] or current + t <= target:
                        current += t
                    else:
                        keep[q] = False
                kept_tokens = current
                kept_out[s] = kept_tokens
                for j in range(m):
                    q = order[j]
                    if not keep[q]:
                        row = mrow[q]
                        included[row] = False
                        reason[row] = R_BUDGET_EXCEEDED
                        seq[row] = drop_seq
                        drop_seq += 1
        # the placer sees the kept items in `order` sequence
        n_keep = 0
        for j in range(m):
            if keep[order[j]]:
                n_keep += 1
        lst = np.empty(n_keep, dtype=np.int64)
        c = 0
        for j in range(m):
            if keep[order[j]]:
                lst[c] = order[j]
                c += 1
        placed = np.empty(n_keep, dtype=np.int64)
        placed_done = False
        if (
            placer == PLACER_CHRONOLOGICAL
            and use_ts_order
            and n_keep * 32 >= ts_offsets[s + 1] - ts_offsets[s]
            and n_keep > chrono_min
        ):
            _chronological_filter(
                mrow,
                lst,
                n_keep,
                n_pin,
                cand_rows,
                clo,
                chi,
                rank,
                ts_valid,
                ts_order,
                ts_sorted,
                ts_offsets[s],
                ts_offsets[s + 1],
                lstpos,
                keep_idx[:m],
                position,
            )
            placed_done = True
        elif placer == PLACER_CHRONOLOGICAL:
            n_ts = 0
            for j in range(n_keep):
                if ts_valid[mrow[lst[j]]]:
                    n_ts += 1
            with_ts = np.empty(n_ts, dtype=np.int64)
            keys = np.empty(n_ts, dtype=ts.dtype)
            c = 0
            for j in range(n_keep):
                if ts_valid[mrow[lst[j]]]:
                    with_ts[c] = j
                    keys[c] = ts[mrow[lst[j]]]
                    c += 1
            ordr = stable_argsort(int_keys(keys))
            for j in range(n_ts):
                placed[j] = lst[with_ts[ordr[j]]]
            c = n_ts
            for j in range(n_keep):
                if not ts_valid[mrow[lst[j]]]:
                    placed[c] = lst[j]
                    c += 1
        else:
            sc = np.empty(n_keep, dtype=np.float64)
            for j in range(n_keep):
                sc[j] = mscore[lst[j]]
            if n_keep >= radix_min:
                ordr = radix_argsort(desc_bits(sc))
            else:
                ordr = stable_argsort(desc_bits(sc))
            left = 0
            right = n_keep - 1
            for j in range(n_keep):
                if j % 2 == 0:
                    placed[left] = lst[ordr[j]]
                    left += 1
                else:
                    placed[right] = lst[ordr[j]]
                    right -= 1
        # row-ordered writes for the kept items (sequential in rows), then positions
        for q in range(n_pin):
            if keep[q]:
                row = mrow[q]
                included[row] = True
                reason[row] = R_PINNED
        for p in range(clo, chi):
            r = rank[p]
            if r >= 0 and keep[n_pin + r]:
                row = cand_rows[p]
                included[row] = True
                reason[row] = R_ZERO_TOKEN if tokens[row] == 0 else R_SCORED
        if not placed_done:
            for j in range(n_keep):
                position[mrow[placed[j]]] = j
    return err, err_a, sliced_out, kept_out


def _order_for_placer(
    tokens,
    pin_rows,
    pin_offsets,
    cand_rows,
    cand_score,
    cand_tok,
    cand_offsets,
    rank,
    rank_prefix,
    budget_targets,
    overflow,
    placer,
    prefix_compared,
):
    """Order what the placer compares of each unordered greedy prefix (``_finish_ranks``) and,
    for u-shaped placement, the selected items' score order (``_sliced_score_order``):
    ``(u_rank, u_key, u_off)``, empty for chronological placement."""
    if cand_tok is None and (placer == PLACER_U_SHAPED or rank_prefix is not None):
        cand_tok = tokens[cand_rows]
    left = None
    if rank_prefix is not None and (rank_prefix > 1).any():
        left = _finish_ranks(
            tokens,
            pin_rows,
            pin_offsets,
            cand_score,
            cand_tok,
            cand_offsets,
            rank,
            rank_prefix,
            budget_targets,
            overflow,
            placer,
            prefix_compared,
        )
    if placer == PLACER_U_SHAPED:
        return _sliced_score_order(rank, cand_score, cand_tok, cand_offsets, U_SORT_MIN, left)
    return np.zeros(0, np.int64), np.zeros(0, np.uint64), np.zeros(pin_offsets.shape[0], np.int64)


def place_segments(
    n_rows,
    tokens,
    kind,
    ts,
    ts_valid,
    pin_rows,
    pin_offsets,
    cand_rows,
    cand_score,
    cand_offsets,
    rank,
    eff_targets,
    budget_targets,
    budget_reserves,
    overflow,
    placer,
    count_caps,
    cap_of_kind,
    included,
    reason,
    detail_a,
    detail_b,
    position,
    seq,
    ts_order=None,
    ts_sorted=None,
    ts_offsets=None,
    lstpos=None,
    rank_prefix=None,
    cand_tok=None,
    prefix_compared=False,
):
    """Place stage over every segment (see ``_place_segments``). ``ts_order``/``ts_sorted``/``ts_offsets``
    (from ``timestamp_order``) and the ``lstpos`` scratch are built here when not given.

    ``rank_prefix`` (per segment, from ``greedy_segments(prefix=...)``): the first
    ``rank_prefix[s]`` ranks of segment ``s`` are an unordered greedy prefix (index order);
    only what the placer compares of it is ordered here (``_finish_ranks``); with
    ``prefix_compared`` the slicer already ordered what chronological placement compares
    (``greedy_segments(compared=chrono_compared(...))``). ``cand_tok``: the candidates'
    tokens (gathered from ``tokens`` when not given)."""
    use_ts_order = ts_order is not None
    if not use_ts_order:  # every segment sorts its own kept items
        ts_order, ts_offsets = np.zeros(0, np.int64), np.zeros(pin_offsets.shape[0], np.int64)
        ts_sorted = np.zeros(0, dtype=ts.dtype)
    if lstpos is None:
        lstpos = np.full(n_rows, -1, dtype=np.int64)
    u_rank, u_key, u_off = _order_for_placer(
        tokens,
        pin_rows,
        pin_offsets,
        cand_rows,
        cand_score,
        cand_tok,
        cand_offsets,
        rank,
        rank_prefix,
        budget_targets,
        overflow,
        placer,
        prefix_compared,
    )
    return _place_segments(
        n_rows,
        tokens,
        kind,
        ts,
        ts_valid,
        pin_rows,
        pin_offsets,
        cand_rows,
        cand_score,
        cand_offsets,
        rank,
        eff_targets,
        budget_targets,
        budget_reserves,
        overflow,
        placer,
        count_caps,
        cap_of_kind,
        included,
        reason,
        detail_a,
        detail_b,
        position,
        seq,
        use_ts_order,
        ts_order,
        ts_sorted,
        ts_offsets,
        lstpos,
        CHRONO_FILTER_MIN,
        RADIX_MIN,
        u_rank,
        u_key,
        u_off,
        _ONE_KEY,
    )


#: the u-shaped order key (``desc_bits``) of a pinned item's score 1.0: the bits of -1.0
#: (0xBFF0...), negative, so inverted (tests/test_fast_paths.py checks it against desc_bits)
_ONE_KEY = np.uint64(0xBFF0000000000000 ^ 0xFFFFFFFFFFFFFFFF)
