"""Packed sort keys: the greedy slicer's exact order (density key ascending, then score
descending with NaN last, then position) by one sort of distinct uint64 keys (``sortkeys.sort_keys``) - a
candidate's density key with its low bits replaced by its index, so keys that share their high
bits sort by index - and a repair of the runs that share the high bits, which reads only
compact arrays (the candidates' full keys and scores, gathered in position order). Cheaper
than an argsort of the keys: a sort of 64-bit values moves half the data of an argsort, and no
array of the segment's length is read at random. Used by slicers/greedy.py for the compared
prefix candidates and the walk beyond the frontier."""

from __future__ import annotations

import numpy as np

from cupel_np._jit import jit, jit_inner
from cupel_np.engine.sortkeys import desc_bits, score_cmp, stable_argsort

#: runs up to this long are ordered by insertion sort (longer ones by two stable sorts)
RUN_INSERTION_MAX = 48

#: the fewest low bits :func:`pack_bits` gives a candidate's position (tests raise it: more
#: candidates then share their high key bits, and the repair of such runs is exercised)
PACK_BITS_MIN = 1


def offsets_dtype(k):
    """The dtype of :func:`_rank_packed`'s scratch ``r`` for ``k`` candidates: int32 (half
    the cache lines of its random writes: measured ~0.25 ms less of a 1M-row chronological
    variant at a 90% budget) unless an offset below ``k`` does not fit."""
    return np.int32 if k <= np.iinfo(np.int32).max else np.int64


def pack_bits(n):
    """Low bits that hold a position below ``n`` in a packed (density key, position) sort key."""
    return max(PACK_BITS_MIN, int(n - 1).bit_length())


@jit
def _pack_keys(kb, cand, score, tok, bits):
    """Packed sort keys of the candidates ``cand`` (as ``greedy._prefix_ranks_marked``'s: the
    high bits of the density key ``kb``, the index into ``cand`` in the low ``bits`` bits),
    and their keys, scores and tokens (gathered in position order: the walk then reads
    them at random from compact arrays)."""
    k = cand.shape[0]
    hi_mask = ~((np.uint64(1) << np.uint64(bits)) - np.uint64(1))
    pk = np.empty(k, dtype=np.uint64)
    kc = np.empty(k, dtype=np.uint64)
    sc = np.empty(k, dtype=np.float64)
    tc = np.empty(k, dtype=np.int64)
    for q in range(k):
        p = cand[q]
        key = kb[p]
        kc[q] = key
        pk[q] = (key & hi_mask) | np.uint64(q)
        sc[q] = score[p]
        tc[q] = tok[p]
    return pk, kc, sc, tc


@jit
def _walk_packed(pk, cand, kc, sc, tc, bits, remaining, rank, n_out):
    """The greedy walk over the candidates ``cand`` (ascending positions; ``kc`` their density
    keys, ``sc`` their scores, ``tc`` their tokens) in exact order, from ``n_out`` with ``remaining`` tokens:
    ``pk`` is their packed keys (:func:`_pack_keys`) sorted, runs of shared high bits
    reordered as in :func:`_rank_packed`."""
    k = pk.shape[0]
    sh = np.uint64(bits)
    low = (np.uint64(1) << sh) - np.uint64(1)
    qs = np.empty(k, dtype=np.int64)
    j = 0
    while j < k:
        h = pk[j] >> sh
        e = j + 1
        while e < k and pk[e] >> sh == h:
            e += 1
        for u in range(e - j):
            qs[u] = np.int64(pk[j + u] & low)
        if e - j > 1:
            _order_run(qs[: e - j], kc, sc)
        for u in range(e - j):
            q = qs[u]
            t = tc[q]
            if t == 0:
                rank[cand[q]] = n_out
                n_out += 1
            elif t <= remaining:
                rank[cand[q]] = n_out
                n_out += 1
                remaining -= t
        j = e
    return remaining, n_out


@jit
def _rank_packed(pk, pos, kp, sp, bits, rank, r0, r):
    """Ranks ``r0, r0 + 1, ...`` in exact density order for the candidates ``pos`` (positions,
    ascending; ``kp`` their density keys, ``sp`` their scores) of the packed keys ``pk``
    (``greedy._prefix_ranks_marked``; sorted ascending: by their density keys' high bits, then
    position). A run of keys that share the high bits is reordered by (full density key,
    score descending with NaN last, position): the spec's total order. The ranks' offsets
    from ``r0`` are scattered into the compact scratch ``r`` (as long as ``pk``, of
    :func:`offsets_dtype`: it stays in cache) first, then the ranks written to ``rank`` in
    position order. The runs read their scores from ``sp``
    (compact, written by the prefix pass): gathered from the segment's scores instead, a
    run's few loads miss the cache (measured 0.7 ms more of a 1M-row variant at a 25% or 90%
    budget, where the prefix holds a few thousand runs)."""
    k = pk.shape[0]
    sh = np.uint64(bits)
    low = (np.uint64(1) << sh) - np.uint64(1)
    qs = np.empty(k, dtype=np.int64)  # run scratch: pages never written cost nothing
    j = 0
    while j < k:
        h = pk[j] >> sh
        if j + 1 == k or pk[j + 1] >> sh != h:  # the common case: high bits of its own
            r[np.int64(pk[j] & low)] = j
            j += 1
            continue
        e = j + 2
        while e < k and pk[e] >> sh == h:
            e += 1
        n_run = e - j
        for u in range(n_run):
            qs[u] = np.int64(pk[j + u] & low)
        if n_run == 2:  # the common run: two candidates
            if not _q_before(kp, sp, qs[0], qs[1]):
                qs[0], qs[1] = qs[1], qs[0]
        else:
            _order_run(qs[:n_run], kp, sp)
        for u in range(n_run):
            r[qs[u]] = j + u
        j = e
    for q in range(k):
        rank[pos[q]] = r0 + r[q]


@jit_inner
def _q_before(kp, sp, a, b):
    """Candidate ``a`` precedes ``b`` (indices into ``kp``/``sp``, in position order): full
    density key, then score (descending, NaN last), then position."""
    if kp[a] != kp[b]:
        return kp[a] < kp[b]
    cmp = score_cmp(sp[a], sp[b])
    if cmp != 0:
        return cmp < 0
    return a < b


@jit
def _order_run(qs, kp, sp):
    """Order the run ``qs`` (indices into ``kp``/``sp``, ascending: position order) by (full
    density key, score descending with NaN last, position), in place."""
    n_run = qs.shape[0]
    ordered = True
    for u in range(1, n_run):
        if not _q_before(kp, sp, qs[u - 1], qs[u]):
            ordered = False
            break
    if ordered:  # e.g. equal densities and scores: already in position order
        return
    if n_run <= RUN_INSERTION_MAX:
        for u in range(1, n_run):
            x = qs[u]
            w = u - 1
            while w >= 0 and not _q_before(kp, sp, qs[w], x):
                qs[w + 1] = qs[w]
                w -= 1
            qs[w + 1] = x
        return
    # two stable sorts of the position-ordered run: by score, then by full key (only when
    # the run holds several keys: a long run is usually one key, e.g. zero-token candidates)
    o = stable_argsort(desc_bits(sp[qs]))
    k0 = kp[qs[0]]
    one_key = True
    for u in range(1, n_run):
        if kp[qs[u]] != k0:
            one_key = False
            break
    if one_key:
        tmp = qs[o]
    else:
        o2 = stable_argsort(kp[qs[o]])
        tmp = qs[o[o2]]
    for u in range(n_run):
        qs[u] = tmp[u]
