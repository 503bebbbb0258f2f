"""Numba kernels for the slicers.

One driver, :func:`slice_segments`, walks every item set (segment) of the score-sorted
candidate arrays and applies the configured slicer; the per-slicer pieces are small serial
helpers that work on an index list of candidate positions, so quota and count-quota slicers
reuse greedy and knapsack unchanged.

Output: ``rank[p]`` is the position of sorted candidate ``p`` in its segment's slicer output
(-1 when not selected). The output order matters downstream (placer tie-breaks).
"""

from __future__ import annotations

import numpy as np

from .._jit import jit
from ..sortkeys import desc_bits, radix_argsort

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


@jit
def _desc_key(x):
    """Sort key for 'descending, NaN lowest' with a stable ascending sort."""
    out = np.empty(x.shape[0], dtype=np.float64)
    for i in range(x.shape[0]):
        v = x[i]
        out[i] = np.inf if v != v else -v
    return out


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
    order = radix_argsort(key) if k >= RADIX_PICK else np.argsort(key, kind="mergesort")
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


@jit
def knapsack_pick(tok, score, cand, target, bucket, max_cells, out, n_out):
    """KnapsackSlice over ``cand``: zero-token items first, then the 0/1 DP solution in
    reconstruction order. The keep table is packed 8 cells per byte.
    Returns ``(n_out, n_candidates, capacity)``; ``capacity < 0`` means the table would exceed
    ``max_cells`` (nothing appended beyond the zero-token items)."""
    k = cand.shape[0]
    if k == 0 or target <= 0:
        return n_out, 0, 0
    n = 0
    for j in range(k):
        t = tok[cand[j]]
        if t == 0:
            out[n_out] = cand[j]
            n_out += 1
        elif t > 0:
            n += 1
    if n == 0:
        return n_out, 0, 0
    capacity = target // bucket
    if capacity == 0:
        return n_out, n, 0
    if np.float64(capacity) * np.float64(n) > np.float64(max_cells):
        return n_out, n, -capacity
    items = np.empty(n, dtype=np.int64)
    dw = np.empty(n, dtype=np.int64)
    dv = np.empty(n, dtype=np.int64)
    c = 0
    value_sum = 0.0
    for j in range(k):
        p = cand[j]
        t = tok[p]
        if t > 0:
            items[c] = p
            dw[c] = (t + bucket - 1) // bucket
            # value = max(0, floor(score * 10000)) as i64 (Rust's saturating cast: NaN -> 0,
            # anything >= 2^63 -> i64::MAX); exact for every representable value
            v = np.floor(score[p] * 10000.0)
            if v != v or v <= 0.0:
                dv[c] = 0
            elif v >= I64_LIMIT:
                dv[c] = I64_MAX
            else:
                dv[c] = np.int64(v)
            value_sum += np.float64(dv[c])
            c += 1
    width = capacity + 1
    row_bytes = (width + 7) // 8
    keep = np.zeros(n * row_bytes, dtype=np.uint8)
    dp = np.zeros(width, dtype=np.int64)
    # No DP cell can exceed the sum of all values; only when that sum could overflow int64
    # does the DP need saturating additions (then sums beyond i64::MAX compare as equal).
    saturate = value_sum >= 9.0e18
    for i in range(n):
        w_i = dw[i]
        v_i = dv[i]
        base = i * row_bytes
        w = capacity
        if saturate:
            room = I64_MAX - v_i
            while w >= w_i:
                prev = dp[w - w_i]
                with_item = I64_MAX if prev > room else prev + v_i
                if with_item > dp[w]:
                    dp[w] = with_item
                    keep[base + (w >> 3)] |= np.uint8(1 << (w & 7))
                w -= 1
        else:
            while w >= w_i:
                with_item = dp[w - w_i] + v_i
                if with_item > dp[w]:
                    dp[w] = with_item
                    keep[base + (w >> 3)] |= np.uint8(1 << (w & 7))
                w -= 1
    rem = capacity
    for i in range(n - 1, -1, -1):
        if keep[i * row_bytes + (rem >> 3)] & np.uint8(1 << (rem & 7)):
            out[n_out] = items[i]
            n_out += 1
            rem -= dw[i]
    return n_out, n, capacity


@jit
def _inner_pick(use_knapsack, tok, score, cand, target, bucket, max_cells, out, n_out):
    if use_knapsack:
        return knapsack_pick(tok, score, cand, target, bucket, max_cells, out, n_out)
    return greedy_pick(tok, score, cand, target, out, n_out), 0, 0


@jit
def _quota_segment(tok, score, kind, lo, hi, target, use_knapsack, bucket, max_cells,
                   kind_rank, q_has, q_req, q_cap, q_req_all, out, n_out, mass, cnt):
    """QuotaSlice for one segment (percent require/cap per kind, inner greedy/knapsack)."""
    n_out, n_c, cap = _quota_segment_inner(tok, score, kind, lo, hi, target, use_knapsack, bucket,
                                           max_cells, kind_rank, q_has, q_req, q_cap, q_req_all,
                                           out, n_out, mass, cnt)
    for p in range(lo, hi):
        mass[kind[p]] = 0
        cnt[kind[p]] = 0
    return n_out, n_c, cap


@jit
def _quota_segment_inner(tok, score, kind, lo, hi, target, use_knapsack, bucket, max_cells,
                         kind_rank, q_has, q_req, q_cap, q_req_all, out, n_out, mass, cnt):
    # mass / cnt are per-call scratch arrays (all zero on entry, zeroed again on exit): the
    # cost per segment is its own size, not the table's kind vocabulary
    found = np.empty(hi - lo, dtype=np.int64)
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
    # partitions in the order of their ASCII-lowercased kind names
    kinds = found[:present].copy()
    ranks = np.empty(present, dtype=np.int64)
    for j in range(present):
        ranks[j] = kind_rank[kinds[j]]
    kinds = kinds[np.argsort(ranks, kind="mergesort")]
    req_t = np.zeros(present, dtype=np.int64)
    cap_t = np.zeros(present, dtype=np.int64)
    total_mass = 0
    for j in range(present):
        kk = kinds[j]
        if q_has[kk]:
            req_t[j] = np.int64(np.floor(q_req[kk] / 100.0 * tgt))
            cap_t[j] = np.int64(np.floor(q_cap[kk] / 100.0 * tgt))
        else:
            req_t[j] = 0
            cap_t[j] = target
        if cap_t[j] > req_t[j]:
            total_mass += mass[kk]
    for j in range(present):
        kk = kinds[j]
        proportional = 0
        if total_mass > 0 and cap_t[j] > req_t[j]:
            proportional = np.int64(
                np.floor(np.float64(unassigned) * np.float64(mass[kk]) / np.float64(total_mass))
            )
        kb = req_t[j] + proportional
        if kb > cap_t[j]:
            kb = cap_t[j]
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
def slice_segments(mode, tok, score, kind, offsets, targets, use_knapsack, bucket, max_cells,
                   kind_rank, q_has, q_req, q_cap, q_req_all,
                   e_kind, e_require, cap_of_kind, throw_on_scarcity, resort_inner):
    """Run one slicer over every segment of the sorted candidate arrays.

    Returns ``(rank, err, err_a, err_b, satisfied, cap_dropped)``: ``rank`` per position,
    per-segment error code and details, per segment and count entry the satisfied count when
    it fell short (-1 otherwise), and per segment the phase-2 picks dropped by count caps."""
    n = tok.shape[0]
    n_seg = offsets.shape[0] - 1
    rank = np.full(n, -1, dtype=np.int64)
    err = np.zeros(n_seg, dtype=np.int8)
    err_a = np.zeros(n_seg, dtype=np.int64)
    err_b = np.zeros(n_seg, dtype=np.int64)
    n_entries = e_kind.shape[0]
    satisfied = np.full((n_seg, n_entries), -1, dtype=np.int64)
    cap_dropped = np.zeros(n_seg, dtype=np.int64)
    n_kinds = cap_of_kind.shape[0]
    # per-call scratch indexed by kind; every segment leaves it zeroed
    mass = np.zeros(n_kinds, dtype=np.int64)
    cnt = np.zeros(n_kinds, dtype=np.int64)
    count = np.zeros(n_kinds, dtype=np.int64)
    for s in range(n_seg):
        lo = offsets[s]
        hi = offsets[s + 1]
        target = targets[s]
        m = hi - lo
        if m == 0 or target <= 0:
            continue
        out = np.empty(m, dtype=np.int64)
        n_out = 0
        if mode == MODE_GREEDY or mode == MODE_KNAPSACK:
            cand = np.arange(lo, hi)
            n_out, n_c, cap = _inner_pick(mode == MODE_KNAPSACK, tok, score, cand, target,
                                          bucket, max_cells, out, 0)
            if cap < 0:
                err[s] = ERR_TABLE_TOO_LARGE
                err_a[s] = n_c
                err_b[s] = -cap
                continue
        elif mode == MODE_QUOTA:
            n_out, n_c, cap = _quota_segment(tok, score, kind, lo, hi, target, use_knapsack,
                                             bucket, max_cells, kind_rank, q_has, q_req, q_cap,
                                             q_req_all, out, 0, mass, cnt)
            if cap < 0:
                err[s] = ERR_TABLE_TOO_LARGE
                err_a[s] = n_c
                err_b[s] = -cap
                continue
        else:
            committed = np.zeros(m, dtype=np.bool_)
            for p in range(lo, hi):  # reset only what this segment can touch
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
                n_out = 0
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
                n_in, n_c, cap = _inner_pick(use_knapsack, tok, score, cand, residual_target,
                                             bucket, max_cells, inner, 0)
                if cap < 0:
                    err[s] = ERR_TABLE_TOO_LARGE
                    err_a[s] = n_c
                    err_b[s] = -cap
                    continue
                inner = inner[:n_in]
                if resort_inner and n_in > 1:
                    inner = inner[np.argsort(desc_bits(score[inner]), kind="mergesort")]
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
    return rank, err, err_a, err_b, satisfied, cap_dropped
