"""The placer kernels and the orders they read: chronological and u-shaped placement of one
segment's kept items (called by ``stages._place_segments``) and the shared timestamp order
(:func:`timestamp_order`); u-shaped placement's score order of the sliced items is
``u_order``'s.
"""

from __future__ import annotations

import numpy as np

from cupel_np._jit import jit, jit_inner
from cupel_np.engine.reasons import R_BUDGET_EXCEEDED, R_PINNED, R_SCORED, R_ZERO_TOKEN
from cupel_np.engine.sortkeys import _SIGN, desc_bits, int_keys, radix_argsort, sort_keys, sort_pairs, stable_argsort

PLACER_CHRONOLOGICAL = 0
PLACER_U_SHAPED = 1

#: kept lists at least this long are ordered by the radix sort in u-shaped placement
RADIX_MIN = 4096
#: u-shaped placement of a segment whose slicer selected at least this many items orders them
#: outside the kernel: one sort (``sortkeys.sort_keys``) of keys that pack each score key's high bits with
#: the candidate's index, then every run that shares the high bits repaired to (score,
#: slicer-output) order (``_sliced_score_order``). The kernel's own sorts mispredict a branch
#: per comparison: one set of 5,000 items placed u-shaped, ~1,000 us a dry_run at 1,024 against
#: ~1,200 at 32,768 (2,000 items ~555 against ~615; 500 level); the 1M-row matrix cells level
U_SORT_MIN = 1024
#: chronological placement filters the shared timestamp order when a segment keeps more than
#: this many items (and at least 1/32 of its timestamped rows); smaller ones sort their own
CHRONO_FILTER_MIN = 16


@jit_inner
def _u_shaped_all(pin_rows, plo, n_pin, cand_rows, clo, chi, rank, u_at, n_before, m, position):
    """U-shaped placement when every merged item is kept: ``u_at`` holds every selected
    candidate's position (``_sliced_score_order``), the pinned items take places
    ``n_before, n_before + 1, ...`` of the u-shaped order (place ``j`` is position ``j // 2``
    for even ``j``, ``m - 1 - j // 2`` for odd ``j``).

    Arguments (one segment of ``_place_segments``'s arrays, see there)
        pinned : ``pin_rows[plo:plo + n_pin]``
        candidates : ``cand_rows[clo:chi]`` with their ``rank`` and ``u_at``; ``m`` merged
            items in all
        output : ``position`` (per row)"""
    for q in range(n_pin):
        j = n_before + q
        position[pin_rows[plo + q]] = j // 2 if j % 2 == 0 else m - 1 - j // 2
    for p in range(clo, chi):
        if rank[p] >= 0:
            position[cand_rows[p]] = u_at[p]


@jit_inner
def _ts_scan(ts_order, ts_sorted, a, b, lstpos, out_row, out_key):
    """Kept rows (``lstpos >= 0``) of the shared timestamp order; runs of equal timestamps
    ordered by input position. Returns the count written to ``out_row``/``out_key``. For
    ``_chronological_filter`` (truncation)."""
    c = 0
    out_t = np.empty(out_row.shape[0], dtype=np.int64)  # timestamps are int64
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


@jit_inner
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
            # stable_argsort(int_keys(key[i:j])) written out around sort_pairs: two levels of
            # linked kernels fewer on the place kernel's longest chain of nested compiles
            m = j - i
            uk = np.empty(m, dtype=np.uint64)
            o = np.empty(m, dtype=np.int64)
            for u in range(m):
                uk[u] = np.uint64(key[i + u]) ^ _SIGN
                o[u] = u
            sort_pairs(uk, o, np.empty(m, dtype=np.uint64), np.empty(m, dtype=np.int64), m)
            kk = np.empty(m, dtype=np.int64)
            rr = np.empty(m, dtype=np.int64)
            for u in range(m):
                kk[u] = key[i + o[u]]
                rr[u] = rows[i + o[u]]
            for u in range(m):
                key[i + u] = kk[u]
                rows[i + u] = rr[u]
        i = j


@jit_inner
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


#: the u-shaped order key (``desc_bits``) of a pinned item's score 1.0: the bits of -1.0
#: (0xBFF0...), negative, so inverted (tests/engine/test_fast_paths.py checks it against desc_bits)
@jit
def _mark_tied(ts_order, ts_sorted, a, b, flag):
    """``flag[row] = True`` for every row of the shared timestamp order ``[a, b)`` whose
    timestamp another row of the segment shares."""
    for i in range(a, b - 1):
        if ts_sorted[i] == ts_sorted[i + 1]:
            flag[ts_order[i]] = True
            flag[ts_order[i + 1]] = True


@jit
def timestamp_ranks(ts_order, ts_sorted, ts_offsets, n_rows):
    """What chronological placement reads of the shared timestamp order (``timestamp_order``)
    per row and per segment, computed once for every variant: ``(code, runs, run_offsets)``.

    ``code[row]``: ``2 * i + tied`` for the row at index ``i`` of the shared order (``tied``:
    another row of its segment has its timestamp), -1 for an untimestamped row. ``runs``: the
    segments' runs of equal timestamps as spans of the shared order (run ``r`` is
    ``runs[2 * r]:runs[2 * r + 1]``, segment by segment, at least two rows each), segment
    ``s``'s runs ``run_offsets[s]:run_offsets[s + 1]``."""
    n_seg = ts_offsets.shape[0] - 1
    code = np.empty(n_rows, dtype=np.int64)
    for row in range(n_rows):
        code[row] = -1
    n_runs = 0
    for s in range(n_seg):
        for i in range(ts_offsets[s] + 1, ts_offsets[s + 1]):
            if ts_sorted[i] == ts_sorted[i - 1] and (i - 1 == ts_offsets[s] or ts_sorted[i - 2] != ts_sorted[i - 1]):
                n_runs += 1
    runs = np.empty(2 * n_runs, dtype=np.int64)
    run_offsets = np.empty(n_seg + 1, dtype=np.int64)
    r = 0
    for s in range(n_seg):
        run_offsets[s] = r
        a = ts_offsets[s]
        b = ts_offsets[s + 1]
        i = a
        while i < b:
            j = i + 1
            while j < b and ts_sorted[j] == ts_sorted[i]:
                j += 1
            tied = 1 if j - i > 1 else 0
            for u in range(i, j):
                code[ts_order[u]] = 2 * u + tied
            if tied:
                runs[2 * r] = i
                runs[2 * r + 1] = j
                r += 1
            i = j
    run_offsets[n_seg] = r
    return code, runs, run_offsets


def chrono_compared(ts_valid, ts_order, ts_sorted, rows):
    """Per row of ``rows``: whether chronological placement may compare it with another item
    by input order - untimestamped, or sharing its timestamp with another row (of the whole
    table, a superset of its set's: marking more rows only orders more). For
    ``greedy_segments(compared=...)``."""
    flag = np.zeros(ts_valid.shape[0], dtype=np.bool_)
    _mark_tied(ts_order, ts_sorted, 0, ts_order.shape[0], flag)
    return flag[rows] | ~ts_valid[rows]


def timestamp_order(ts, ts_valid, offsets, ranks: bool = True):
    """Every segment's timestamped rows sorted by timestamp (shared by all variants), their
    timestamps in that order, and the segment offsets; then what placement reads of that
    order (``timestamp_ranks``: each row's index in it, the runs of equal timestamps), or
    three None without ``ranks`` (no set is long enough to be placed on bitmaps: a sweep of
    small sets does not compile ``timestamp_ranks``). Equal
    timestamps of a segment come in no particular order (placement repairs them to its input
    order).

    One sort (``sortkeys.sort_keys``: NumPy's releases the GIL, the radix kernel is nogil) of a
    (segment, timestamp) key packed in a uint64; when the two do not fit in 64 bits the timestamps are replaced by their ranks. With the
    index in the low bits as well (when that fits) the keys are sorted themselves, not
    argsorted (a third of the time), and the sorted timestamps are read back from them."""
    rows = np.flatnonzero(ts_valid)
    off = np.searchsorted(rows, offsets).astype(np.int64)
    order, ts_sorted = sorted_by_timestamp(rows, ts[rows], off)
    return (order, ts_sorted, off, *_ranks(order, ts_sorted, off, ts.shape[0], ranks))


def sorted_by_timestamp(rows: np.ndarray, tv: np.ndarray, off: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``timestamp_order``'s sort: the timestamped ``rows`` (ascending, grouped by segment:
    ``off``, offsets into ``rows``) sorted by (segment, timestamp), and their timestamps in
    that order (``tv``: the rows' timestamps, a new array of the caller's). Where the row's
    index fits in the packed key beside them, equal timestamps come in row order; else (spans
    of over 2**(64 - index bits) timestamp units) the keys are argsorted stably, which keeps
    that order too unless segment and timestamp need more than 64 bits themselves (the
    timestamps replaced by their ranks: ties in no particular order)."""
    n = rows.shape[0]
    n_seg = off.shape[0] - 1
    if n < 2:
        return rows.astype(np.int64), tv
    lo = int(tv.min())
    t_bits = (int(tv.max()) - lo).bit_length()
    seg_bits = (n_seg - 1).bit_length()
    exact = t_bits + seg_bits <= 64
    if exact:
        key = tv.view(np.uint64) - np.uint64(lo % 2**64)  # ts - lo, exact modulo 2**64
    else:
        key = np.empty(n, dtype=np.uint64)
        key[np.argsort(tv)] = np.arange(n, dtype=np.uint64)
        t_bits = (n - 1).bit_length()
    if n_seg > 1:
        seg_key = np.arange(n_seg, dtype=np.uint64) << np.uint64(t_bits)
        key |= np.repeat(seg_key, np.diff(off))
    i_bits = (n - 1).bit_length()
    if t_bits + seg_bits + i_bits <= 64:
        key <<= np.uint64(i_bits)
        key |= np.arange(n, dtype=np.uint64)
        sort_keys(key, i_bits)
        pos = (key & np.uint64((1 << i_bits) - 1)).astype(np.int64)
        if exact:  # ts - lo back from the key's timestamp bits, then + lo (modulo 2**64)
            key >>= np.uint64(i_bits)
            key &= np.uint64((1 << t_bits) - 1)
            key += np.uint64(lo % 2**64)
            return rows[pos], key.view(np.int64)
    else:
        pos = np.argsort(key, kind="stable")
    return rows[pos].astype(np.int64), tv[pos]


def _ranks(order, ts_sorted, off, n_rows: int, ranks: bool):
    """``timestamp_ranks`` of the order when ``ranks``, else three None."""
    return timestamp_ranks(order, ts_sorted, off, n_rows) if ranks else (None, None, None)


@jit_inner
def _place_order(mrow, mscore, lst, ts, ts_valid, placer, radix_min):
    """The placer's order of the kept merged items ``lst`` (merged indices, in placer input
    order; ``mrow``/``mscore`` their rows and scores) when no shared order serves it.
    Chronological: the timestamped items by timestamp (a stable sort: ties keep input order),
    then the others in input order. U-shaped: by score descending (stable, NaN lowest), dealt
    alternately to the front and the back. Returns ``placed``: merged index per position."""
    n_keep = lst.shape[0]
    placed = np.empty(n_keep, dtype=np.int64)
    if placer == PLACER_CHRONOLOGICAL:
        n_ts = 0
        for j in range(n_keep):
            if ts_valid[mrow[lst[j]]]:
                n_ts += 1
        with_ts = np.empty(n_ts, dtype=np.int64)
        keys = np.empty(n_ts, dtype=np.int64)  # timestamps are int64
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
        return placed
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
    return placed


@jit
def _place_truncated(
    segs,
    n_rows,
    tokens,
    ts,
    ts_valid,
    pin_rows,
    pin_offsets,
    cand_rows,
    cand_score,
    cand_offsets,
    rank,
    budget_targets,
    placer,
    included,
    reason,
    position,
    seq,
    use_ts_order,
    ts_order,
    ts_sorted,
    ts_offsets,
    lstpos,
    chrono_min,
    radix_min,
    kept_out,
):
    """The sets ``segs`` (ascending) that ``stages._place_segments`` left to truncation (the
    strategy is truncate and the merged tokens exceed the target): keep the pinned items, then
    the sliced items by score descending while they fit; write the dropped rows' reasons and
    ``seq`` (``3 * n_rows`` + drop order), place the kept items and write their reasons, and
    ``kept_out[s]``. A kernel of its own, called only when a set truncates, so a run that never
    truncates does not compile it (nor ``_chronological_filter``). The arguments are
    ``_place_segments``'s, see there."""
    drop_seq = 3 * n_rows
    for u in range(segs.shape[0]):
        s = segs[u]
        plo = pin_offsets[s]
        clo = cand_offsets[s]
        chi = cand_offsets[s + 1]
        n_pin = pin_offsets[s + 1] - plo
        n_sel = 0
        for p in range(clo, chi):
            if rank[p] >= 0:
                n_sel += 1
        m = n_pin + n_sel
        target = budget_targets[s]
        # merged list: pinned (input order, score 1.0) then the slicer output in its order
        mrow = np.empty(m, dtype=np.int64)
        mscore = np.empty(m, dtype=np.float64)
        keep = np.empty(m, dtype=np.bool_)
        order = np.empty(m, dtype=np.int64)
        for q in range(m):
            keep[q] = True
            order[q] = q
        for q in range(n_pin):
            mrow[q] = pin_rows[plo + q]
            mscore[q] = 1.0
        for p in range(clo, chi):
            r = rank[p]
            if r >= 0:
                mrow[n_pin + r] = cand_rows[p]
                mscore[n_pin + r] = cand_score[p]
        # pinned first (they already are), then the sliced items by score descending
        if n_sel > 1:
            tail = stable_argsort(desc_bits(mscore[n_pin:]))
            for j in range(m - n_pin):
                order[n_pin + j] = tail[j] + n_pin
        current = 0
        for j in range(m):
            q = order[j]
            t = tokens[mrow[q]]
            if q < n_pin or current + t <= target:
                current += t
            else:
                keep[q] = False
        kept_out[s] = current
        n_keep = 0
        for j in range(m):
            q = order[j]
            if keep[q]:
                n_keep += 1
            else:
                row = mrow[q]
                included[row] = False
                reason[row] = R_BUDGET_EXCEEDED
                seq[row] = drop_seq
                drop_seq += 1
        # the placer sees the kept items in `order` sequence
        lst = np.empty(n_keep, dtype=np.int64)
        c = 0
        for j in range(m):
            if keep[order[j]]:
                lst[c] = order[j]
                c += 1
        if (
            placer == PLACER_CHRONOLOGICAL
            and use_ts_order
            and n_keep * 32 >= ts_offsets[s + 1] - ts_offsets[s]
            and n_keep > chrono_min
        ):
            mark = np.empty(m, dtype=np.int64)
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
                mark,
                position,
            )
        else:
            placed = _place_order(mrow, mscore, lst, ts, ts_valid, placer, radix_min)
            for j in range(n_keep):
                position[mrow[placed[j]]] = j
        # row-ordered writes for the kept items (sequential in rows)
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
