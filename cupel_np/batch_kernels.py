"""Kernels that serve every variant of a sweep at once."""

from __future__ import annotations

import numpy as np

from ._jit import jit


@jit
def variant_scores(base, term_off, term_col, term_w):
    """All variants' composite scores from the shared base-score matrix ``base[m, K]``.

    Variant ``v`` is the terms ``term_off[v]:term_off[v+1]`` (column, normalised weight) in the
    variant's own order; each row is summed left to right exactly as the spec's
    CompositeScorer does (``acc = acc + score * weight``), never as a BLAS product, so equal
    inputs give bit-equal scores and ties survive."""
    m = base.shape[0]
    n_var = term_off.shape[0] - 1
    out = np.empty((n_var, m), dtype=np.float64)
    for v in range(n_var):
        a = term_off[v]
        b = term_off[v + 1]
        for i in range(m):
            acc = 0.0
            for t in range(a, b):
                acc = acc + base[i, term_col[t]] * term_w[t]
            out[v, i] = acc
    return out


@jit
def duplicate_groups(content_id, offsets):
    """Groups of equal content inside each segment (only groups of 2 or more). Returns
    ``(members, group_offsets)``: members of a group are positions in ascending order."""
    n = content_id.shape[0]
    members = np.empty(n, dtype=np.int64)
    goff = np.zeros(n + 1, dtype=np.int64)
    n_mem = 0
    n_grp = 0
    for s in range(offsets.shape[0] - 1):
        lo = offsets[s]
        hi = offsets[s + 1]
        if hi - lo <= 1:
            continue
        order = np.argsort(content_id[lo:hi], kind="mergesort") + lo
        m = hi - lo
        j = 0
        while j < m:
            k = j
            while k + 1 < m and content_id[order[k + 1]] == content_id[order[j]]:
                k += 1
            if k > j:
                for q in range(j, k + 1):
                    members[n_mem] = order[q]
                    n_mem += 1
                n_grp += 1
                goff[n_grp] = n_mem
            j = k + 1
    return members[:n_mem], goff[: n_grp + 1]


@jit
def duplicate_winners(members, goff, score):
    """Per group the member that survives deduplication: the highest score, the lowest
    position on ties (members are in ascending position order)."""
    winner = np.empty(members.shape[0], dtype=np.int64)
    for g in range(goff.shape[0] - 1):
        a = goff[g]
        b = goff[g + 1]
        best = members[a]
        for q in range(a + 1, b):
            if score[members[q]] > score[best]:
                best = members[q]
        for q in range(a, b):
            winner[q] = best
    return winner
