"""Numba kernels for the slicers.

:func:`slice_segments` runs the configured slicer over every item set (segment) of the
score-sorted candidate arrays, one driver kernel per slicer; the per-slicer pieces are small
serial helpers that work on an index list of candidate positions, so quota and count-quota
slicers reuse greedy and knapsack unchanged.

Output: ``rank[p]`` is the position of sorted candidate ``p`` in its segment's slicer output
(-1 when not selected). The output order matters downstream (placer tie-breaks).
"""

from __future__ import annotations

import numpy as np

from cupel_np._jit import jit
from cupel_np.engine.sortkeys import desc_bits, int_keys, radix_argsort, stable_argsort

#: greedy partitions at least this long are ordered by the radix sort
RADIX_PICK = 4096

MAX_FLOAT = np.finfo(np.float64).max
I64_MAX = np.int64(np.iinfo(np.int64).max)
I64_LIMIT = 9.223372036854775808e18  # 2^63: the first float64 that does not fit in an int64

MODE_GREEDY = 0
MODE_KNAPSACK = 1
MODE_QUOTA = 2
MODE_COUNT = 3

ERR_NONE = 0
ERR_SCARCITY = 3
ERR_TABLE_TOO_LARGE = 4
ERR_NEEDS_SPLIT = 5  # internal to slice_segments: the segment goes to the exact-DP kernel


@jit
def greedy_pick(tok, score, cand, target, out, n_out):
    """GreedySlice over the candidate positions ``cand`` (in sorted order). Appends the
    selected positions to ``out[n_out:]`` in density order; returns the new length."""
    k = cand.shape[0]
    if k == 0 or target <= 0:
        return n_out
    dens = np.empty(k, dtype=np.float64)
    for j in range(k):
        t = tok[cand[j]]
        if t == 0:
            dens[j] = MAX_FLOAT
        else:
            dens[j] = score[cand[j]] / np.float64(t)
    # density descending (NaN lowest), ties in candidate order: a stable sort
    key = desc_bits(dens)
    order = radix_argsort(key) if k >= RADIX_PICK else stable_argsort(key)
    remaining = target
    for j in range(k):
        p = cand[order[j]]
        t = tok[p]
        if t == 0:
            out[n_out] = p
            n_out += 1
        elif t <= remaining:
            out[n_out] = p
            n_out += 1
            remaining -= t
    return n_out


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


@jit
def knapsack_value(s):
    """max(0, floor(s * 10000)) as Rust's saturating f64 -> i64 cast: NaN -> 0, anything at
    or above 2^63 -> i64::MAX; exact for every representable value."""
    v = np.floor(s * 10000.0)
    if v != v or v <= 0.0:
        return np.int64(0)
    if v >= I64_LIMIT:
        return I64_MAX
    return np.int64(v)


@jit
def _dp_int64(dw, dv, capacity, keep, row_words):
    """The DP on int64 rows (the sum of all values fits an int64, so no cell overflows).

    Each row has PAD cells of i64::MIN before cell 0, so the word holding ``w = w_i`` is a
    whole word like the others (below ``w_i`` the item adds to i64::MIN and never wins).
    ``reach`` is the total weight of the items taken so far and ``total`` their total value:
    every cell at or above ``reach`` holds ``total`` (all of them fit), so for item ``i`` the
    cells at or above ``reach + w_i`` become ``total + v_i`` with their keep bit set, exactly
    what the DP computes there, and only the cells below are computed."""
    pw = row_words * 64
    old = np.zeros(PAD + pw, dtype=np.int64)
    new = np.zeros(PAD + pw, dtype=np.int64)
    old[:PAD] = I64_MIN
    new[:PAD] = I64_MIN
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


@jit
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


@jit
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


@jit
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


@jit
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


#: :func:`_knapsack_pick_int64`'s capacity result when the values need the split-row DP
NEEDS_SPLIT = I64_MIN


@jit
def _knapsack_pick_int64(tok, score, cand, target, bucket, max_cells, out, n_out):
    """:func:`knapsack_pick` without the split-row DP (so a policy whose values never sum
    past an int64 never compiles it): returns capacity ``NEEDS_SPLIT`` instead of running
    it (``out`` may then hold zero-token items: the caller runs the segment again)."""
    n_out, n_c, cap, items, dw, dv, fits_int64 = _knapsack_items(
        tok, score, cand, target, bucket, max_cells, out, n_out
    )
    if cap <= 0:
        return n_out, n_c, cap
    if not fits_int64:
        return n_out, n_c, NEEDS_SPLIT
    row_words = cap // 64 + 1
    keep = np.zeros(items.shape[0] * row_words, dtype=np.uint64)
    _dp_int64(dw, dv, cap, keep, row_words)
    return _knapsack_take(keep, items, dw, cap, row_words, out, n_out), n_c, cap


@jit
def _inner_pick(use_knapsack, tok, score, cand, target, bucket, max_cells, out, n_out):
    if use_knapsack:
        return knapsack_pick(tok, score, cand, target, bucket, max_cells, out, n_out)
    return greedy_pick(tok, score, cand, target, out, n_out), 0, 0


@jit
def _quota_segment(
    tok,
    score,
    kind,
    lo,
    hi,
    target,
    use_knapsack,
    bucket,
    max_cells,
    kind_rank,
    q_has,
    q_req,
    q_cap,
    q_req_all,
    out,
    n_out,
    mass,
    cnt,
    found,
    kbud,
):
    """QuotaSlice for one segment (percent require/cap per kind, inner greedy/knapsack)."""
    n_out, n_c, cap = _quota_segment_inner(
        tok,
        score,
        kind,
        lo,
        hi,
        target,
        use_knapsack,
        bucket,
        max_cells,
        kind_rank,
        q_has,
        q_req,
        q_cap,
        q_req_all,
        out,
        n_out,
        mass,
        cnt,
        found,
        kbud,
    )
    for p in range(lo, hi):
        mass[kind[p]] = 0
        cnt[kind[p]] = 0
    return n_out, n_c, cap


@jit
def kind_budgets(tok, kind, lo, hi, target, kind_rank, q_has, q_req, q_cap, q_req_all, mass, cnt, found, kb):
    """The spec's QuotaSlice budget of every kind present in candidates ``lo..hi``: fills
    ``found[:present]`` with those kinds in partition order (ASCII-lowercased name, as
    ``kind_rank``), ``kb[kind]`` with each one's token budget, ``mass``/``cnt`` (zero on entry)
    with their tokens and counts; returns ``present``. The caller zeroes ``mass``/``cnt`` at the
    ``found`` kinds afterwards. The one implementation both quota paths use."""
    present = 0
    for p in range(lo, hi):
        k = kind[p]
        if cnt[k] == 0:
            found[present] = k
            present += 1
        mass[k] += tok[p]
        cnt[k] += 1
    tgt = np.float64(target)
    total_required = 0
    for e in range(q_req_all.shape[0]):
        total_required += np.int64(np.floor(q_req_all[e] / 100.0 * tgt))
    unassigned = target - total_required
    if unassigned < 0:
        unassigned = 0
    if present <= 32:  # insertion sort by kind_rank (stable: ties in first-seen order)
        for j in range(1, present):
            x = found[j]
            w = j - 1
            while w >= 0 and kind_rank[found[w]] > kind_rank[x]:
                found[w + 1] = found[w]
                w -= 1
            found[w + 1] = x
    else:  # many kinds in one set: never quadratic
        ranks = np.empty(present, dtype=np.int64)
        for j in range(present):
            ranks[j] = kind_rank[found[j]]
        o = stable_argsort(int_keys(ranks))
        kinds = np.empty(present, dtype=np.int64)
        for j in range(present):
            kinds[j] = found[o[j]]
        for j in range(present):
            found[j] = kinds[j]
    total_mass = 0
    for j in range(present):
        kk = found[j]
        req, cap = _req_cap(kk, q_has, q_req, q_cap, target, tgt)
        if cap > req:
            total_mass += mass[kk]
    for j in range(present):
        kk = found[j]
        req, cap = _req_cap(kk, q_has, q_req, q_cap, target, tgt)
        proportional = 0
        if total_mass > 0 and cap > req:
            proportional = np.int64(np.floor(np.float64(unassigned) * np.float64(mass[kk]) / np.float64(total_mass)))
        b = req + proportional
        kb[kk] = cap if b > cap else b
    return present


@jit
def _req_cap(kk, q_has, q_req, q_cap, target, tgt):
    if q_has[kk]:
        return np.int64(np.floor(q_req[kk] / 100.0 * tgt)), np.int64(np.floor(q_cap[kk] / 100.0 * tgt))
    return np.int64(0), np.int64(target)


@jit
def _quota_segment_inner(
    tok,
    score,
    kind,
    lo,
    hi,
    target,
    use_knapsack,
    bucket,
    max_cells,
    kind_rank,
    q_has,
    q_req,
    q_cap,
    q_req_all,
    out,
    n_out,
    mass,
    cnt,
    found,
    kbud,
):
    # mass / cnt / found / kbud are per-call scratch arrays indexed by kind (mass and cnt zero
    # on entry, zeroed again by the caller): the cost per segment is its own size, not the
    # table's kind vocabulary
    present = kind_budgets(tok, kind, lo, hi, target, kind_rank, q_has, q_req, q_cap, q_req_all, mass, cnt, found, kbud)
    for j in range(present):
        kk = found[j]
        kb = kbud[kk]
        if kb <= 0:
            continue
        cand = np.empty(cnt[kk], dtype=np.int64)
        c = 0
        for p in range(lo, hi):
            if kind[p] == kk:
                cand[c] = p
                c += 1
        n_out, n_c, cap = _inner_pick(use_knapsack, tok, score, cand, kb, bucket, max_cells, out, n_out)
        if cap < 0:
            return n_out, n_c, cap
    return n_out, 0, 0


@jit
def _slice_greedy(tok, score, offsets, targets, rank):
    """GreedySlice over every segment of the score-sorted candidates (the sweep itself takes
    slicers/greedy.py; this serves single score-sorted lists, e.g. the conformance runner)."""
    for s in range(offsets.shape[0] - 1):
        lo = offsets[s]
        hi = offsets[s + 1]
        if hi - lo == 0 or targets[s] <= 0:
            continue
        # the positions lo..hi-1 by a loop: np.arange(lo, hi) would compile an implementation
        # that nothing else on a cold start needs
        cand = np.empty(hi - lo, dtype=np.int64)
        for j in range(hi - lo):
            cand[j] = lo + j
        out = np.empty(hi - lo, dtype=np.int64)
        n_out = greedy_pick(tok, score, cand, targets[s], out, 0)
        for j in range(n_out):
            rank[out[j]] = j


@jit
def _slice_knapsack(tok, score, offsets, targets, bucket, max_cells, rank, err, err_a, err_b):
    """KnapsackSlice over every segment of the score-sorted candidates, with the int64 DP;
    a segment whose values need the split-row DP gets ``err = ERR_NEEDS_SPLIT`` and no ranks
    (see :func:`_slice_knapsack_split`)."""
    for s in range(offsets.shape[0] - 1):
        lo = offsets[s]
        hi = offsets[s + 1]
        if hi - lo == 0 or targets[s] <= 0:
            continue
        cand = np.empty(hi - lo, dtype=np.int64)
        for j in range(hi - lo):  # lo..hi-1 (see _slice_greedy)
            cand[j] = lo + j
        out = np.empty(hi - lo, dtype=np.int64)
        n_out, n_c, cap = _knapsack_pick_int64(tok, score, cand, targets[s], bucket, max_cells, out, 0)
        if cap == NEEDS_SPLIT:
            err[s] = ERR_NEEDS_SPLIT
            continue
        if cap < 0:
            err[s] = ERR_TABLE_TOO_LARGE
            err_a[s] = n_c
            err_b[s] = -cap
            continue
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


@jit
def _slice_quota(
    tok,
    score,
    kind,
    offsets,
    targets,
    use_knapsack,
    bucket,
    max_cells,
    kind_rank,
    q_has,
    q_req,
    q_cap,
    q_req_all,
    rank,
    err,
    err_a,
    err_b,
):
    """QuotaSlice over every segment of the score-sorted candidates (the sweep takes
    slicers/quota.py when the inner slicer is greedy)."""
    n_kinds = kind_rank.shape[0]
    # per-call scratch indexed by kind; every segment leaves it zeroed
    mass = np.zeros(n_kinds, dtype=np.int64)
    cnt = np.zeros(n_kinds, dtype=np.int64)
    found = np.empty(n_kinds, dtype=np.int64)
    kbud = np.empty(n_kinds, dtype=np.int64)
    for s in range(offsets.shape[0] - 1):
        lo = offsets[s]
        hi = offsets[s + 1]
        target = targets[s]
        if hi - lo == 0 or target <= 0:
            continue
        out = np.empty(hi - lo, dtype=np.int64)
        n_out, n_c, cap = _quota_segment(
            tok,
            score,
            kind,
            lo,
            hi,
            target,
            use_knapsack,
            bucket,
            max_cells,
            kind_rank,
            q_has,
            q_req,
            q_cap,
            q_req_all,
            out,
            0,
            mass,
            cnt,
            found,
            kbud,
        )
        if cap < 0:
            err[s] = ERR_TABLE_TOO_LARGE
            err_a[s] = n_c
            err_b[s] = -cap
            continue
        for j in range(n_out):
            rank[out[j]] = j


@jit
def _slice_count(
    tok,
    score,
    kind,
    offsets,
    targets,
    use_knapsack,
    bucket,
    max_cells,
    e_kind,
    e_require,
    cap_of_kind,
    throw_on_scarcity,
    resort_inner,
    rank,
    err,
    err_a,
    err_b,
    satisfied,
    cap_dropped,
):
    """CountQuotaSlice / CountConstrainedKnapsackSlice over every segment of the score-sorted
    candidates."""
    n_seg = offsets.shape[0] - 1
    n_entries = e_kind.shape[0]
    # per-call scratch indexed by kind; reset per segment for what the segment can touch
    count = np.zeros(cap_of_kind.shape[0], dtype=np.int64)
    for s in range(n_seg):
        lo = offsets[s]
        hi = offsets[s + 1]
        target = targets[s]
        m = hi - lo
        if m == 0 or target <= 0:
            continue
        out = np.empty(m, dtype=np.int64)
        n_out = 0
        committed = np.zeros(m, dtype=np.bool_)
        for p in range(lo, hi):
            count[kind[p]] = 0
        for e in range(n_entries):
            if e_kind[e] >= 0:
                count[e_kind[e]] = 0
        prealloc = 0
        failed = False
        for e in range(n_entries):
            need = e_require[e]
            if need <= 0:
                continue
            kk = e_kind[e]
            got = 0
            if kk >= 0:
                for p in range(lo, hi):
                    if got >= need:
                        break
                    if kind[p] == kk:
                        out[n_out] = p
                        n_out += 1
                        committed[p - lo] = True
                        prealloc += tok[p]
                        got += 1
                count[kk] = got
            if got < need:
                if throw_on_scarcity:
                    err[s] = ERR_SCARCITY
                    err_a[s] = e
                    err_b[s] = got
                    failed = True
                    break
                satisfied[s, e] = got
        if failed:
            continue
        residual_target = target - prealloc
        if residual_target > 0:
            n_res = m - np.sum(committed)
            cand = np.empty(n_res, dtype=np.int64)
            c = 0
            for p in range(lo, hi):
                if not committed[p - lo]:
                    cand[c] = p
                    c += 1
            inner = np.empty(n_res, dtype=np.int64)
            n_in, n_c, cap = _inner_pick(use_knapsack, tok, score, cand, residual_target, bucket, max_cells, inner, 0)
            if cap < 0:
                err[s] = ERR_TABLE_TOO_LARGE
                err_a[s] = n_c
                err_b[s] = -cap
                continue
            inner = inner[:n_in]
            if resort_inner and n_in > 1:
                inner = inner[stable_argsort(desc_bits(score[inner]))]
            for j in range(n_in):
                p = inner[j]
                kk = kind[p]
                cap_k = cap_of_kind[kk]
                if cap_k >= 0 and count[kk] >= cap_k:
                    cap_dropped[s] += 1
                    continue
                out[n_out] = p
                n_out += 1
                count[kk] += 1
        for j in range(n_out):
            rank[out[j]] = j


def slice_segments(
    mode,
    tok,
    score,
    kind,
    offsets,
    targets,
    use_knapsack,
    bucket,
    max_cells,
    kind_rank,
    q_has,
    q_req,
    q_cap,
    q_req_all,
    e_kind,
    e_require,
    cap_of_kind,
    throw_on_scarcity,
    resort_inner,
):
    """Run one slicer over every segment of the sorted candidate arrays.

    Returns ``(rank, err, err_a, err_b, satisfied, cap_dropped)``: ``rank`` per position,
    per-segment error code and details, per segment and count entry the satisfied count when
    it fell short (-1 otherwise), and per segment the phase-2 picks dropped by count caps.

    One kernel per slicer mode: a policy compiles only its own slicer's code (a cold start
    that never runs a quota or count slicer does not compile them)."""
    n = tok.shape[0]
    n_seg = offsets.shape[0] - 1
    rank = np.full(n, -1, dtype=np.int64)
    err = np.zeros(n_seg, dtype=np.int8)
    err_a = np.zeros(n_seg, dtype=np.int64)
    err_b = np.zeros(n_seg, dtype=np.int64)
    satisfied = np.full((n_seg, e_kind.shape[0]), -1, dtype=np.int64)
    cap_dropped = np.zeros(n_seg, dtype=np.int64)
    if mode == MODE_GREEDY:
        _slice_greedy(tok, score, offsets, targets, rank)
    elif mode == MODE_KNAPSACK:
        _slice_knapsack(tok, score, offsets, targets, bucket, max_cells, rank, err, err_a, err_b)
        split = np.flatnonzero(err == ERR_NEEDS_SPLIT)
        if split.size:
            _slice_knapsack_split(tok, score, offsets, targets, bucket, max_cells, split, rank, err, err_a, err_b)
    elif mode == MODE_QUOTA:
        _slice_quota(
            tok,
            score,
            kind,
            offsets,
            targets,
            use_knapsack,
            bucket,
            max_cells,
            kind_rank,
            q_has,
            q_req,
            q_cap,
            q_req_all,
            rank,
            err,
            err_a,
            err_b,
        )
    else:
        _slice_count(
            tok,
            score,
            kind,
            offsets,
            targets,
            use_knapsack,
            bucket,
            max_cells,
            e_kind,
            e_require,
            cap_of_kind,
            throw_on_scarcity,
            resort_inner,
            rank,
            err,
            err_a,
            err_b,
            satisfied,
            cap_dropped,
        )
    return rank, err, err_a, err_b, satisfied, cap_dropped
