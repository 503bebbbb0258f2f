"""Kernels that serve every variant of a sweep at once, and the bit helpers of the place
kernel and the count quota (a set of positions as one bit each, ranked by popcount)."""

from __future__ import annotations

import numpy as np

from cupel_np._jit import as_input, jit, jit_inner

#: rows per block of :func:`variant_scores` (a block of a few base columns stays in L1/L2)
SCORE_BLOCK = 512


@jit
def variant_scores(base, term_off, term_col, term_w, out):
    """All variants' composite scores from the shared base-score matrix ``base[m, K]``, written
    to ``out[V, m]`` (a caller's reused buffer: a fresh array per variant would cost page
    faults at corpus sizes).

    Variant ``v`` is the terms ``term_off[v]:term_off[v+1]`` (column, normalised weight) in the
    variant's own order; each row is summed left to right exactly as the spec's
    CompositeScorer does (``acc = acc + score * weight``, from ``acc = 0.0``), never as a BLAS
    product, so equal inputs give bit-equal scores and ties survive."""
    m = base.shape[0]
    n_var = term_off.shape[0] - 1
    for v in range(n_var):
        a = term_off[v]
        b = term_off[v + 1]
        if a == b:
            for i in range(m):
                out[v, i] = 0.0
            continue
        # up to four terms per pass over a block of rows, their columns and weights held in
        # locals and the additions written out: independent rows, no loop over terms inside
        # (twice as fast as a term at a time); a block of ``base`` stays in cache while the
        # passes of a variant with more terms go over it
        for lo in range(0, m, SCORE_BLOCK):
            hi = min(lo + SCORE_BLOCK, m)
            for t in range(a, b, 4):
                k = min(4, b - t)
                c0 = term_col[t]
                w0 = term_w[t]
                c1 = term_col[t + 1] if k > 1 else c0
                w1 = term_w[t + 1] if k > 1 else w0
                c2 = term_col[t + 2] if k > 2 else c0
                w2 = term_w[t + 2] if k > 2 else w0
                c3 = term_col[t + 3] if k > 3 else c0
                w3 = term_w[t + 3] if k > 3 else w0
                first = t == a
                if k == 4:
                    for i in range(lo, hi):
                        acc = 0.0 if first else out[v, i]
                        out[v, i] = (((acc + base[i, c0] * w0) + base[i, c1] * w1) + base[i, c2] * w2) + base[
                            i, c3
                        ] * w3
                elif k == 3:
                    for i in range(lo, hi):
                        acc = 0.0 if first else out[v, i]
                        out[v, i] = ((acc + base[i, c0] * w0) + base[i, c1] * w1) + base[i, c2] * w2
                elif k == 2:
                    for i in range(lo, hi):
                        acc = 0.0 if first else out[v, i]
                        out[v, i] = (acc + base[i, c0] * w0) + base[i, c1] * w1
                else:
                    for i in range(lo, hi):
                        acc = 0.0 if first else out[v, i]
                        out[v, i] = acc + base[i, c0] * w0
    return out


@jit
def included_positions(position, included):
    """``position[included]`` (int32 placed positions of the included rows, in row order) by a
    branch-free compaction: a row is written always and kept when included."""
    n = included.shape[0]
    k = 0
    for i in range(n):
        k += 1 if included[i] else 0
    out = np.empty(k + 1, dtype=np.int32)  # one spare slot: the last row is written either way
    k = 0
    for i in range(n):
        out[k] = position[i]
        k += 1 if included[i] else 0
    return out[:k]


@jit
def placed_rows(included, placed_pos):
    """Every row of one item set once (``included``: per row): the included rows in placed
    order, from their placed positions (``placed_pos``: per included row, in row order;
    ``0 .. k-1`` each once), then the other rows ascending; the included rows scattered to
    their positions in the same walk that lists the others (~5 us for 5,000 rows, ~1.3 for
    500, where ``np.flatnonzero`` and a checked scatter took ~19 and ~5; a stable argsort of the
    positions ~52 and ~5). One more entry at the end says whether the placed order is row order
    (1; a session's messages placed chronologically) or not (0). Positions that are not such
    (out of range, taken twice, or not one per included row) give an empty array instead (the
    caller sorts). The first ``k`` entries are ``run``'s and a report's included rows; the
    whole is a permutation of the rows (``object_take.first_of_permutation`` relies on it)."""
    k = placed_pos.shape[0]
    n = included.shape[0]
    out = np.empty(n + 1, dtype=np.int64)
    if k > n:  # (more positions than rows: never a placement, and ``out`` has n + 1 slots)
        return out[:0]
    for p in range(k):
        out[p] = -1
    in_order = 1
    j = 0
    e = k  # the next slot of the rows not included
    for i in range(n):
        if included[i]:
            if j == k:
                return out[:0]
            p = placed_pos[j]
            if p < 0 or p >= k or out[p] >= 0:
                return out[:0]
            out[p] = i
            if p != j:
                in_order = 0
            j += 1
        else:
            if e == n:  # (more rows not included than n - k: fewer included than positions)
                return out[:0]
            out[e] = i
            e += 1
    if j != k:
        return out[:0]
    out[n] = in_order
    return out


#: positions from which :func:`duplicate_groups` finds the ids seen twice by :func:`seen_twice`
#: (NumPy's bincount and gather below: a kernel call costs more, and a small run compiles none)
SEEN_TWICE_MIN = 65536


@jit
def seen_twice(content_id, n_ids):
    """The positions (ascending) whose id (``0 <= id < n_ids``) occurs at least twice: a
    saturating one-byte count per id (a table of ``n_ids`` bytes, where ``np.bincount``
    allocates and gathers eight), and no second pass when no id repeats (distinct contents,
    the usual case)."""
    n = content_id.shape[0]
    seen = np.zeros(n_ids, dtype=np.uint8)
    repeats = 0
    for i in range(n):
        c = content_id[i]
        v = seen[c]
        repeats |= v
        seen[c] = 2 if v else 1  # saturating: 2 once seen twice
    if repeats == 0:
        return np.zeros(0, dtype=np.int64)
    k = 0
    for i in range(n):
        k += 1 if seen[content_id[i]] >= 2 else 0
    out = np.empty(k, dtype=np.int64)
    k = 0
    for i in range(n):
        if seen[content_id[i]] >= 2:
            out[k] = i
            k += 1
    return out


def duplicate_groups(content_id: np.ndarray, offsets: np.ndarray):
    """Groups of equal content inside each segment (only groups of 2 or more). Returns
    ``(members, group_offsets)``: members of a group are positions in ascending order.

    Content ids are global, so only ids seen twice anywhere can form a group; those few
    positions are grouped with one stable lexsort (usually none at all)."""
    n = content_id.shape[0]
    empty = np.zeros(0, dtype=np.int64), np.zeros(1, dtype=np.int64)
    if n < 2:
        return empty
    if n >= SEEN_TWICE_MIN:
        cand = seen_twice(as_input(content_id, np.int64), int(content_id.max()) + 1)
    else:
        counts = np.bincount(content_id)
        cand = np.flatnonzero(counts[content_id] >= 2)
    if cand.size == 0:
        return empty
    seg = np.searchsorted(offsets, cand, side="right") - 1
    ids = content_id[cand]
    order = np.lexsort((cand, ids, seg))
    cand, ids, seg = cand[order], ids[order], seg[order]
    new = np.ones(cand.size, dtype=np.bool_)
    new[1:] = (ids[1:] != ids[:-1]) | (seg[1:] != seg[:-1])
    start = np.flatnonzero(new)
    size = np.diff(np.append(start, cand.size))
    keep = np.repeat(size >= 2, size)
    members = cand[keep]
    sizes = size[size >= 2]
    goff = np.zeros(sizes.size + 1, dtype=np.int64)
    np.cumsum(sizes, out=goff[1:])
    return members.astype(np.int64), goff


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


BIT1 = np.uint64(1)
_M1 = np.uint64(0x5555555555555555)
_M2 = np.uint64(0x3333333333333333)
_M4 = np.uint64(0x0F0F0F0F0F0F0F0F)


@jit_inner
def popcount(x):
    """The set bits of a uint64 (SWAR). The bytes' counts are summed by shifts and adds, not
    by a multiply that wraps: with the JIT off (plain NumPy scalars) a wrapping multiply
    warns of an overflow."""
    x = x - ((x >> BIT1) & _M1)
    x = (x & _M2) + ((x >> np.uint64(2)) & _M2)
    x = (x + (x >> np.uint64(4))) & _M4
    x = x + (x >> np.uint64(8))
    x = x + (x >> np.uint64(16))
    x = x + (x >> np.uint64(32))
    return np.int64(x & np.uint64(0x7F))
