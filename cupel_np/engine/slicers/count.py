"""CountQuotaSlice and CountConstrainedKnapsackSlice around an inner greedy or knapsack, over
every segment of the score-sorted candidates in one kernel (other inner slicers:
slicers/nested.py)."""

from __future__ import annotations

import numpy as np

from cupel_np._jit import jit
from cupel_np.engine.slicers.codes import ERR_SCARCITY, ERR_TABLE_TOO_LARGE
from cupel_np.engine.slicers.quota import _inner_pick
from cupel_np.engine.sortkeys import desc_bits, stable_argsort


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
    candidates.

    Parameters (the fields of ``SlicerArgs`` unpacked by ``slicers.slice_segments``; one
    flat list so that the kernel compiles for one signature)

    Per candidate, score-sorted, segment by segment (read only)
        tok, score, kind : int64 tokens, float64 score, int64 kind id
    Per segment (read only)
        offsets : int64 [n_seg + 1] into the candidates
        targets : int64 token target
    The inner slicer
        use_knapsack : a knapsack (CountConstrainedKnapsackSlice) rather than greedy
        bucket, max_cells : the knapsack's bucket size and DP limit
        resort_inner : re-sort the inner picks by score (count-constrained knapsack)
    The count entries
        e_kind, e_require : per entry, its kind id (-1 when absent) and require_count
        cap_of_kind : int64 per kind id, its cap_count (-1 none)
        throw_on_scarcity : scarcity_behavior "throw" (else the shortfall is recorded)
    Outputs
        rank : per candidate, its place in its segment's output (-1 on entry)
        err, err_a, err_b : per segment, ``ERR_SCARCITY`` (entry, count found) or
            ``ERR_TABLE_TOO_LARGE`` (the knapsack's candidates and capacity)
        satisfied : per segment and entry, the count found when it fell short (-1 on entry)
        cap_dropped : per segment, the phase-2 picks dropped by count caps
    """
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
