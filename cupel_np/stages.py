"""Numba kernels for the non-scoring pipeline stages: deduplicate, sort, and the final
place stage (merge, overflow, placer) together with every inclusion/exclusion reason.

All of them walk item-set segments themselves. Row indices are positions in the ItemTable's
grouped row order.
"""

from __future__ import annotations

import numpy as np

from ._jit import jit
from .sortkeys import desc_bits, int_keys, radix_argsort, stable_argsort  # noqa: F401 (radix_argsort: re-exported)

# reason codes (stored in the int8 reason matrix)
R_SCORED = 0
R_PINNED = 1
R_ZERO_TOKEN = 2
R_BUDGET_EXCEEDED = 10
R_SCORED_TOO_LOW = 11
R_DEDUPLICATED = 12
R_QUOTA_CAP_EXCEEDED = 13
R_QUOTA_REQUIRE_DISPLACED = 14
R_NEGATIVE_TOKENS = 15
R_PINNED_OVERRIDE = 16
R_FILTERED = 17
R_COUNT_CAP_EXCEEDED = 18

ERR_OVERFLOW = 2

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
#: chronological placement filters the shared timestamp order when a segment keeps more than
#: this many items (and at least 1/32 of its timestamped rows); smaller ones sort their own
CHRONO_FILTER_MIN = 16


@jit
def _chronological_all(pin_rows, plo, n_pin, cand_rows, clo, chi, rank, m, ts_valid,
                       ts_order, ts_sorted, a, b, lstpos, position):
    """``_chronological_filter`` when every merged item is kept in merged order (no
    truncation): input position = pinned index, or ``n_pin + rank`` for a sliced item."""
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
    for q in range(n_pin):
        lstpos[pin_rows[plo + q]] = -1
    for p in range(clo, chi):
        if rank[p] >= 0:
            lstpos[cand_rows[p]] = -1


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
def _chronological_filter(mrow, lst, n_keep, n_pin, cand_rows, clo, chi, rank, ts_valid,
                          ts_order, ts_sorted, a, b, lstpos, mark, position):
    """Chronological placement of the kept items ``lst`` (merged indices, in placer input
    order) by filtering the segment's shared timestamp order: timestamped items by timestamp
    (ties by input order), then the others in input order. Writes ``position[row]``.

    Per-row work runs in row order (the candidates) or in timestamp order (the shared order);
    only ``lstpos`` (-1 on entry and exit) and ``position`` are addressed by row."""
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
    n_rows, tokens, kind, ts, ts_valid,
    pin_rows, pin_offsets,
    cand_rows, cand_score, cand_offsets, rank,
    eff_targets, budget_targets, budget_reserves,
    overflow, placer, count_caps, cap_of_kind,
    included, reason, detail_a, detail_b, position, seq,
    use_ts_order, ts_order, ts_sorted, ts_offsets, lstpos, chrono_min, radix_min,
):
    """Merge pinned and sliced items per segment, apply the overflow strategy, run the placer
    and write every row's inclusion/exclusion reason (``detail_a``/``detail_b``: the cap and
    the count of a CountCapExceeded row; the other reasons' fields are rebuilt on demand). Returns per segment ``(err, err_a,
    sliced_tokens, kept_tokens)`` (``ERR_OVERFLOW`` with the merged token count when the
    strategy is throw; the tokens the slicer selected; the tokens of the included rows).

    ``ts_order[ts_offsets[s]:ts_offsets[s+1]]`` holds segment ``s``'s timestamped rows sorted
    by timestamp (shared by every variant; ties in any order). Chronological placement of a
    segment that keeps many of its rows filters that order instead of sorting, then repairs
    runs of equal timestamps to the placer's input order. ``lstpos`` is per-row scratch, -1
    on entry and on exit."""
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
        for p in range(clo, chi):
            if rank[p] >= 0:
                n_sel += 1
        m = n_pin + n_sel
        sliced_tokens = 0
        if count_caps:
            for p in range(clo, chi):
                kind_count[kind[cand_rows[p]]] = 0
        for p in range(clo, chi):
            if rank[p] >= 0:
                sliced_tokens += tokens[cand_rows[p]]
                if count_caps:
                    kind_count[kind[cand_rows[p]]] += 1
        # slice-stage exclusions
        eff_target = eff_targets[s]
        for p in range(clo, chi):
            if rank[p] >= 0:
                continue
            row = cand_rows[p]
            t = tokens[row]
            included[row] = False
            seq[row] = 2 * n_rows + p
            k = kind[row]
            if pinned_tokens > 0 and t > eff_target and t <= budget_targets[s] - budget_reserves[s]:
                reason[row] = R_PINNED_OVERRIDE
            elif count_caps and cap_of_kind[k] >= 0 and kind_count[k] >= cap_of_kind[k] and t <= eff_target:
                reason[row] = R_COUNT_CAP_EXCEEDED
                detail_a[row] = cap_of_kind[k]
                detail_b[row] = kind_count[k]
            else:
                reason[row] = R_BUDGET_EXCEEDED
        merged_tokens = pinned_tokens + sliced_tokens
        target = budget_targets[s]
        sliced_out[s] = sliced_tokens
        kept_out[s] = merged_tokens
        if merged_tokens > target and overflow == OVERFLOW_THROW:
            err[s] = ERR_OVERFLOW
            err_a[s] = merged_tokens
            kept_out[s] = 0
            continue
        truncating = merged_tokens > target and overflow == OVERFLOW_TRUNCATE
        if (not truncating and placer == PLACER_CHRONOLOGICAL and use_ts_order and m > chrono_min
                and m * 32 >= ts_offsets[s + 1] - ts_offsets[s]):
            # every merged item is kept, in merged order: no merged arrays needed
            _chronological_all(pin_rows, plo, n_pin, cand_rows, clo, chi, rank, m, ts_valid,
                               ts_order, ts_sorted, ts_offsets[s], ts_offsets[s + 1], lstpos, position)
            for q in range(plo, phi):
                row = pin_rows[q]
                included[row] = True
                seq[row] = -1
                reason[row] = R_PINNED
            for p in range(clo, chi):
                if rank[p] >= 0:
                    row = cand_rows[p]
                    included[row] = True
                    seq[row] = -1
                    reason[row] = R_ZERO_TOKEN if tokens[row] == 0 else R_SCORED
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
        if placer == PLACER_CHRONOLOGICAL and use_ts_order and n_keep * 32 >= ts_offsets[s + 1] - ts_offsets[s] and n_keep > chrono_min:
            _chronological_filter(mrow, lst, n_keep, n_pin, cand_rows, clo, chi, rank, ts_valid,
                                  ts_order, ts_sorted, ts_offsets[s], ts_offsets[s + 1], lstpos,
                                  keep_idx[:m], position)
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
                seq[row] = -1
                reason[row] = R_PINNED
        for p in range(clo, chi):
            r = rank[p]
            if r >= 0 and keep[n_pin + r]:
                row = cand_rows[p]
                included[row] = True
                seq[row] = -1
                reason[row] = R_ZERO_TOKEN if tokens[row] == 0 else R_SCORED
        if not placed_done:
            for j in range(n_keep):
                position[mrow[placed[j]]] = j
    return err, err_a, sliced_out, kept_out


def place_segments(n_rows, tokens, kind, ts, ts_valid, pin_rows, pin_offsets, cand_rows, cand_score,
                   cand_offsets, rank, eff_targets, budget_targets, budget_reserves, overflow, placer,
                   count_caps, cap_of_kind, included, reason, detail_a, detail_b,
                   position, seq, ts_order=None, ts_sorted=None, ts_offsets=None, lstpos=None):
    """Place stage over every segment (see ``_place_segments``). ``ts_order``/``ts_sorted``/``ts_offsets``
    (from ``timestamp_order``) and the ``lstpos`` scratch are built here when not given."""
    use_ts_order = ts_order is not None
    if not use_ts_order:  # every segment sorts its own kept items
        ts_order, ts_offsets = np.zeros(0, np.int64), np.zeros(pin_offsets.shape[0], np.int64)
        ts_sorted = np.zeros(0, dtype=ts.dtype)
    if lstpos is None:
        lstpos = np.full(n_rows, -1, dtype=np.int64)
    return _place_segments(
        n_rows, tokens, kind, ts, ts_valid, pin_rows, pin_offsets, cand_rows, cand_score,
        cand_offsets, rank, eff_targets, budget_targets, budget_reserves, overflow, placer,
        count_caps, cap_of_kind, included, reason, detail_a, detail_b,
        position, seq, use_ts_order, ts_order, ts_sorted, ts_offsets, lstpos,
        CHRONO_FILTER_MIN, RADIX_MIN)

