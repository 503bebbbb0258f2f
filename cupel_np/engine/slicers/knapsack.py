"""KnapsackSlice: the exact 0/1 knapsack DP over one segment's candidates (int64 rows, or
split rows when the values sum past an int64), and the drivers over every segment."""

from __future__ import annotations

import numpy as np

from cupel_np._jit import jit, jit_inner
from cupel_np.engine.slicers.codes import ERR_NEEDS_SPLIT, ERR_TABLE_TOO_LARGE

I64_MAX = np.int64(np.iinfo(np.int64).max)
I64_LIMIT = 9.223372036854775808e18  # 2^63: the first float64 that does not fit in an int64


# Knapsack DP. Values are exact at any magnitude: each item's value is Rust's saturating
# f64 -> i64 cast of floor(score * 10000), so one value fits an int64, but a sum of them may
# not. When the sum of all values fits an int64 (the usual case) the DP runs on int64 rows;
# otherwise it runs on split rows ``hi * 2^62 + lo`` (0 <= lo < 2^62), which hold any sum of
# up to 2^62 values exactly. Both DPs use two rows (old -> new, then swap) so the inner loop is
# a contiguous max over a shifted slice that the compiler vectorizes, and write the keep bits
# 64 cells per word. Ties break as in the spec: an item is kept only when it is strictly better.

LIMB_BITS = 62
I64_MIN = np.int64(np.iinfo(np.int64).min)
PAD = 64  # cells of i64::MIN before cell 0 of every DP row
LIMB_MASK = np.int64((1 << LIMB_BITS) - 1)

#: Memory the knapsack DP may allocate, counted in keep-table cells (bits):
#: ``(n + KNAPSACK_ROW_CELLS) * 64 * (capacity // 64 + 2)``. Per candidate a keep row of
#: ``64 * (capacity // 64 + 1)`` bits; the value rows (PAD + 64 * (capacity // 64 + 1) cells
#: each) charged at the exact mode's four int64 rows = 256 bits per cell.
KNAPSACK_ROW_CELLS = 256


@jit
def knapsack_fits(n, capacity, max_cells):
    """Whether the DP for ``n`` candidates and ``capacity`` stays within ``max_cells`` bits
    (exact integer test, no overflow for any int64 inputs)."""
    words = capacity // 64 + 2  # a row's words, plus the pad (see KNAPSACK_ROW_CELLS)
    if max_cells < 64 or words > max_cells // 64:
        return False
    return n + KNAPSACK_ROW_CELLS <= (max_cells // 64) // words


@jit_inner
def knapsack_value(s):
    """max(0, floor(s * 10000)) as Rust's saturating f64 -> i64 cast: NaN -> 0, anything at
    or above 2^63 -> i64::MAX; exact for every representable value."""
    v = np.floor(s * 10000.0)
    if v != v or v <= 0.0:
        return np.int64(0)
    if v >= I64_LIMIT:
        return I64_MAX
    return np.int64(v)


@jit_inner
def _dp_int64(dw, dv, capacity, keep, row_words):
    """The DP on int64 rows (the sum of all values fits an int64, so no cell overflows).

    Each row has PAD cells of i64::MIN before cell 0, so the word holding ``w = w_i`` is a
    whole word like the others (below ``w_i`` the item adds to i64::MIN and never wins).
    ``reach`` is the total weight of the items taken so far and ``total`` their total value:
    every cell at or above ``reach`` holds ``total`` (all of them fit), so for item ``i`` the
    cells at or above ``reach + w_i`` become ``total + v_i`` with their keep bit set, exactly
    what the DP computes there, and only the cells below are computed."""
    pw = row_words * 64
    old = np.empty(PAD + pw, dtype=np.int64)  # np.empty and loops: see cupel_np._jit
    new = np.empty(PAD + pw, dtype=np.int64)
    for q in range(PAD + pw):
        old[q] = I64_MIN if q < PAD else 0
        new[q] = old[q]
    reach = 0
    total = 0
    for i in range(dw.shape[0]):
        wi = dw[i]
        vi = dv[i]
        if wi > capacity or vi == 0:
            continue  # nothing can be strictly better with this item: its keep row stays 0
        reach = min(reach + wi, pw)
        total += vi
        k0 = wi >> 6
        k2 = max(k0 + 1, (reach + 63) >> 6)
        base = i * row_words
        for q in range(PAD, PAD + k0 * 64):  # whole words below w_i (a loop: see _jit)
            new[q] = old[q]
        # words k0 .. k2-1: slices from 0 so the indices are provably non-negative (no
        # wraparound select, which would turn the loads into gathers)
        o_sh = old[PAD + k0 * 64 - wi :]
        oo = old[PAD + k0 * 64 :]
        nn = new[PAD + k0 * 64 :]
        kp = keep[base + k0 : base + k2]
        for kk in range(k2 - k0):
            bits = np.uint64(0)
            for j in range(64):
                x = kk * 64 + j
                c = o_sh[x] + vi
                o = oo[x]
                nn[x] = max(c, o)
                bits |= np.uint64(c > o) << np.uint64(j)
            kp[kk] = bits
        # whole words at or above reach: every item so far fits
        new[PAD + k2 * 64 :] = total
        keep[base + k2 : base + row_words] = ~np.uint64(0)
        old, new = new, old


@jit_inner
def _split_words(sh_h, sh_l, oo_h, oo_l, nn_h, nn_l, kp, vh, vl):
    """Whole keep words of one split-row DP step (kept out of line: inlined into the item
    loop this loop stays scalar, ~10x slower)."""
    for kk in range(kp.shape[0]):
        bits = np.uint64(0)
        for j in range(64):
            x = kk * 64 + j
            cl = sh_l[x] + vl
            ch = sh_h[x] + vh + (cl >> LIMB_BITS)
            cl &= LIMB_MASK
            oh = oo_h[x]
            ol = oo_l[x]
            g = (ch > oh) | ((ch == oh) & (cl > ol))
            nn_h[x] = ch if g else oh
            nn_l[x] = cl if g else ol
            bits |= np.uint64(g) << np.uint64(j)
        kp[kk] = bits


@jit_inner
def _dp_split(dw, v_hi, v_lo, capacity, keep, row_words):
    """The DP on split rows ``hi * 2^62 + lo``: exact for any sum of values. The pad cells
    hold hi = i64::MIN, lo = 0 (see :func:`_dp_int64`)."""
    pw = row_words * 64
    old_h = np.zeros(PAD + pw, dtype=np.int64)
    old_l = np.zeros(PAD + pw, dtype=np.int64)
    new_h = np.zeros(PAD + pw, dtype=np.int64)
    new_l = np.zeros(PAD + pw, dtype=np.int64)
    old_h[:PAD] = I64_MIN
    new_h[:PAD] = I64_MIN
    for i in range(dw.shape[0]):
        wi = dw[i]
        vh = v_hi[i]
        vl = v_lo[i]
        if wi > capacity or (vh == 0 and vl == 0):
            continue
        k0 = wi >> 6
        base = i * row_words
        for q in range(PAD, PAD + k0 * 64):
            new_h[q] = old_h[q]
            new_l[q] = old_l[q]
        a = PAD + k0 * 64 - wi
        b = PAD + k0 * 64
        _split_words(
            old_h[a:], old_l[a:], old_h[b:], old_l[b:], new_h[b:], new_l[b:], keep[base + k0 : base + row_words], vh, vl
        )
        old_h, new_h = new_h, old_h
        old_l, new_l = new_l, old_l


@jit_inner
def _knapsack_items(tok, score, cand, target, bucket, max_cells, out, n_out):
    """The part of :func:`knapsack_pick` before the DP: appends the zero-token items and
    builds the DP items. Returns ``(n_out, n_c, cap, items, dw, dv, fits_int64)``; ``cap <= 0``
    means no DP is run and ``(n_out, n_c, cap)`` is the pick's result, ``fits_int64`` that the
    sum of all values fits an int64 (the int64 DP is exact)."""
    none = np.empty(0, dtype=np.int64)
    k = cand.shape[0]
    if k == 0 or target <= 0:
        return n_out, 0, 0, none, none, none, True
    n = 0
    for j in range(k):
        t = tok[cand[j]]
        if t == 0:
            out[n_out] = cand[j]
            n_out += 1
        elif t > 0:
            n += 1
    if n == 0:
        return n_out, 0, 0, none, none, none, True
    capacity = target // bucket
    if capacity == 0:
        return n_out, n, 0, none, none, none, True
    if not knapsack_fits(n, capacity, max_cells):
        return n_out, n, -capacity, none, none, none, True
    items = np.empty(n, dtype=np.int64)
    dw = np.empty(n, dtype=np.int64)
    dv = np.empty(n, dtype=np.int64)
    c = 0
    sum_hi = 0  # exact sum of all values as sum_hi * 2^62 + sum_lo
    sum_lo = 0
    for j in range(k):
        p = cand[j]
        t = tok[p]
        if t > 0:
            items[c] = p
            # ceil(t / bucket) without forming t + bucket - 1 (which can overflow)
            dw[c] = t // bucket + (1 if t % bucket != 0 else 0)
            v = knapsack_value(score[p])
            dv[c] = v
            sum_lo += v & LIMB_MASK
            sum_hi += (v >> LIMB_BITS) + (sum_lo >> LIMB_BITS)
            sum_lo &= LIMB_MASK
            c += 1
    # sum_hi <= 1: the sum is at most 2^63 - 1, so no DP cell can overflow an int64
    return n_out, n, capacity, items, dw, dv, sum_hi <= 1


@jit_inner
def _knapsack_take(keep, items, dw, capacity, row_words, out, n_out):
    """The DP's reconstruction: appends the kept items (last item first) to ``out``."""
    rem = capacity
    for i in range(items.shape[0] - 1, -1, -1):
        if (keep[i * row_words + (rem >> 6)] >> np.uint64(rem & 63)) & np.uint64(1):
            out[n_out] = items[i]
            n_out += 1
            rem -= dw[i]
    return n_out


@jit
def knapsack_pick(tok, score, cand, target, bucket, max_cells, out, n_out):
    """KnapsackSlice over ``cand``: zero-token items first, then the 0/1 DP solution in
    reconstruction order, exactly as the spec computes it with unbounded integers.
    Returns ``(n_out, n_candidates, capacity)``; ``capacity < 0`` means the DP would need more
    than ``max_cells`` cells of memory (see :func:`knapsack_fits`; nothing appended beyond the
    zero-token items)."""
    n_out, n_c, cap, items, dw, dv, fits_int64 = _knapsack_items(
        tok, score, cand, target, bucket, max_cells, out, n_out
    )
    if cap <= 0:
        return n_out, n_c, cap
    n = items.shape[0]
    row_words = cap // 64 + 1
    keep = np.zeros(n * row_words, dtype=np.uint64)
    if fits_int64:
        _dp_int64(dw, dv, cap, keep, row_words)
    else:
        v_hi = np.empty(n, dtype=np.int64)
        v_lo = np.empty(n, dtype=np.int64)
        for i in range(n):
            v_hi[i] = dv[i] >> LIMB_BITS
            v_lo[i] = dv[i] & LIMB_MASK
        _dp_split(dw, v_hi, v_lo, cap, keep, row_words)
    return _knapsack_take(keep, items, dw, cap, row_words, out, n_out), n_c, cap


@jit
def _slice_knapsack(tok, score, offsets, targets, bucket, max_cells, rank, err, err_a, err_b):
    """KnapsackSlice over every segment of the score-sorted candidates, with the int64 DP
    (:func:`knapsack_pick` without the split-row DP, written out here: one kernel less to
    compile and link); a segment whose values need the split-row DP gets
    ``err = ERR_NEEDS_SPLIT`` and no ranks (see :func:`_slice_knapsack_split`)."""
    for s in range(offsets.shape[0] - 1):
        lo = offsets[s]
        hi = offsets[s + 1]
        if hi - lo == 0 or targets[s] <= 0:
            continue
        cand = np.empty(hi - lo, dtype=np.int64)
        for j in range(hi - lo):  # lo..hi-1 (see _slice_greedy)
            cand[j] = lo + j
        out = np.empty(hi - lo, dtype=np.int64)
        n_out, n_c, cap, items, dw, dv, fits_int64 = _knapsack_items(
            tok, score, cand, targets[s], bucket, max_cells, out, 0
        )
        if cap < 0:
            err[s] = ERR_TABLE_TOO_LARGE
            err_a[s] = n_c
            err_b[s] = -cap
            continue
        if cap > 0:  # else no DP: the zero-token items are the answer
            if not fits_int64:
                err[s] = ERR_NEEDS_SPLIT  # out may hold zero-token items: the split kernel redoes s
                continue
            row_words = cap // 64 + 1
            keep = np.empty(items.shape[0] * row_words, dtype=np.uint64)
            for q in range(keep.shape[0]):
                keep[q] = 0
            _dp_int64(dw, dv, cap, keep, row_words)
            n_out = _knapsack_take(keep, items, dw, cap, row_words, out, n_out)
        for j in range(n_out):
            rank[out[j]] = j


@jit
def _slice_knapsack_split(tok, score, offsets, targets, bucket, max_cells, segs, rank, err, err_a, err_b):
    """KnapsackSlice over the segments ``segs`` with the exact DP at any magnitude (values
    summing past an int64 are rare: only this kernel compiles the split-row DP)."""
    for u in range(segs.shape[0]):
        s = segs[u]
        lo = offsets[s]
        hi = offsets[s + 1]
        cand = np.empty(hi - lo, dtype=np.int64)
        for j in range(hi - lo):
            cand[j] = lo + j
        out = np.empty(hi - lo, dtype=np.int64)
        n_out, n_c, cap = knapsack_pick(tok, score, cand, targets[s], bucket, max_cells, out, 0)
        err[s] = 0
        if cap < 0:
            err[s] = ERR_TABLE_TOO_LARGE
            err_a[s] = n_c
            err_b[s] = -cap
            continue
        for j in range(n_out):
            rank[out[j]] = j
