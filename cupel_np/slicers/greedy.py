"""GreedySlice without a full sort.

The spec sorts the score-sorted candidates by density (score / tokens) and fills the budget
in that order. The order is the lexicographic key (density desc, score desc, index asc): the
score-sorted position is exactly (score desc, index asc), so the pipeline's score sort is not
needed for greedy at all. And only a prefix of the density order can matter: once the remaining
budget is smaller than every not-yet-visited candidate's token count, nothing later can be
selected. ``greedy_segments`` therefore selects a density threshold with a linear-time
partition, sorts only the candidates at or above it, scans them, and widens the prefix (x8)
only when some item beyond it could still fit. Result: O(n) per segment plus the sort of a
prefix that is usually a few thousand items, with output identical to the spec's.
"""

from __future__ import annotations

import numpy as np

from .._jit import jit
from .kernels import MAX_FLOAT, _desc_key

FULL_SORT_BELOW = 4096


@jit
def _lex_order(keyd, keys, idx):
    """Positions of ``idx`` ordered by (keyd, keys, idx) ascending (all stable sorts)."""
    o = np.argsort(keys[idx], kind="mergesort")
    o2 = np.argsort(keyd[idx[o]], kind="mergesort")
    return idx[o[o2]]


@jit
def greedy_segments(tok, score, offsets, targets, rank):
    """GreedySlice per segment over candidates in input (row) order. Writes ``rank[p]`` =
    position in the slicer output (density order), -1 when not selected."""
    for s in range(offsets.shape[0] - 1):
        lo = offsets[s]
        hi = offsets[s + 1]
        k = hi - lo
        target = targets[s]
        if k == 0 or target <= 0:
            continue
        keyd = np.empty(k, dtype=np.float64)  # density descending, NaN last
        for j in range(k):
            t = tok[lo + j]
            d = MAX_FLOAT if t == 0 else score[lo + j] / np.float64(t)
            keyd[j] = np.inf if d != d else -d
        keys = _desc_key(score[lo:hi])
        limit = 16384
        while True:
            if k <= FULL_SORT_BELOW or limit >= k:
                prefix = _lex_order(keyd, keys, np.arange(k))
                complete = True
            else:
                thr = np.partition(keyd, limit)[limit]
                n_in = 0
                for j in range(k):
                    if keyd[j] <= thr:
                        n_in += 1
                idx = np.empty(n_in, dtype=np.int64)
                c = 0
                min_out = np.iinfo(np.int64).max
                for j in range(k):
                    if keyd[j] <= thr:
                        idx[c] = j
                        c += 1
                    elif tok[lo + j] < min_out:
                        min_out = tok[lo + j]
                prefix = _lex_order(keyd, keys, idx)
                complete = False
            remaining = target
            n_out = 0
            for j in range(prefix.shape[0]):
                q = prefix[j]
                t = tok[lo + q]
                if t == 0:
                    rank[lo + q] = n_out
                    n_out += 1
                elif t <= remaining:
                    rank[lo + q] = n_out
                    n_out += 1
                    remaining -= t
            if complete or min_out > remaining:
                break
            for j in range(prefix.shape[0]):  # undo and widen the prefix
                rank[lo + prefix[j]] = -1
            limit *= 8
