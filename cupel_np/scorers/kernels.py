"""Numba kernels for the scorers. Each walks item-set segments itself (``offsets[s]`` to
``offsets[s+1]``), sees only arrays and scalars, and reproduces the spec's arithmetic order so
scores agree with the pseudocode (to the bit where the spec's operations are reproduced).
"""

from __future__ import annotations

import numpy as np

from .._jit import jit


@jit
def rank_scores(values, valid, offsets):
    """RecencyScorer / PriorityScorer: rank = number of valid peers with a strictly smaller
    value, score = rank / (count - 1); a lone valid item scores 1.0, a null one 0.0.

    O(n log n) per segment via a stable sort instead of the spec's O(n^2) double loop."""
    n = values.shape[0]
    out = np.zeros(n, dtype=np.float64)
    for s in range(offsets.shape[0] - 1):
        lo = offsets[s]
        hi = offsets[s + 1]
        count = 0
        for i in range(lo, hi):
            if valid[i]:
                count += 1
        if count == 0:
            continue
        idx = np.empty(count, dtype=np.int64)
        vals = np.empty(count, dtype=values.dtype)
        k = 0
        for i in range(lo, hi):
            if valid[i]:
                idx[k] = i
                vals[k] = values[i]
                k += 1
        if count == 1:
            out[idx[0]] = 1.0
            continue
        # equal values share a rank, so the sort need not be stable
        order = np.argsort(vals, kind="quicksort")
        denom = np.float64(count - 1)
        rank = 0
        for j in range(count):
            if j == 0 or vals[order[j]] != vals[order[j - 1]]:
                rank = j
            out[idx[order[j]]] = np.float64(rank) / denom
    return out


@jit
def tag_scores(tag_offsets, tag_ids, weight_of_tag, total_weight):
    """TagScorer: sum of the configured weights of each tag occurrence (item tag order),
    divided by the total configured weight, capped at 1.0."""
    n = tag_offsets.shape[0] - 1
    out = np.zeros(n, dtype=np.float64)
    if total_weight == 0.0:
        return out
    for i in range(n):
        a = tag_offsets[i]
        b = tag_offsets[i + 1]
        if a == b:
            continue
        matched = 0.0
        for j in range(a, b):
            t = tag_ids[j]
            if t >= 0:
                w = weight_of_tag[t]
                if w >= 0.0:  # negative marks "tag not configured"
                    matched += w
        v = matched / total_weight
        out[i] = v if v < 1.0 else 1.0
    return out


@jit
def _popcount64(x):
    x = x - ((x >> np.uint64(1)) & np.uint64(0x5555555555555555))
    x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return (x * np.uint64(0x0101010101010101)) >> np.uint64(56)


@jit
def frequency_scores(tag_offsets, tag_ids, n_tags, offsets):
    """FrequencyScorer: share of the other items in the segment that have at least one
    (case-folded) tag in common with the item.

    Per segment an inverted index (tag -> items) is built. For an item, the peers sharing a
    tag form the union of its tags' posting lists; that union always contains the item itself
    (when it has a tag), so matches = |union| - 1. Frequent tags (posting list longer than
    words-per-bitset) are held as bitsets and OR-ed; rare ones are marked item by item. Cost per
    item is O(tags x segment/64) at worst, never the spec's O(n^2 * t^2)."""
    n = tag_offsets.shape[0] - 1
    out = np.zeros(n, dtype=np.float64)
    for s in range(offsets.shape[0] - 1):
        lo = offsets[s]
        hi = offsets[s + 1]
        m = hi - lo
        if m <= 1:
            continue
        # posting lists for the segment, CSR by tag id (only tags that occur here matter)
        counts = np.zeros(n_tags + 1, dtype=np.int64)
        for i in range(lo, hi):
            for j in range(tag_offsets[i], tag_offsets[i + 1]):
                counts[tag_ids[j] + 1] += 1
        start = np.cumsum(counts)
        fill = start[:-1].copy()
        post = np.empty(start[-1], dtype=np.int64)
        last_seen = np.full(n_tags, -1, dtype=np.int64)
        for i in range(lo, hi):
            for j in range(tag_offsets[i], tag_offsets[i + 1]):
                t = tag_ids[j]
                if last_seen[t] != i:  # a tag repeated on one item is posted once
                    last_seen[t] = i
                    post[fill[t]] = i - lo
                    fill[t] += 1
        words = (m + 63) // 64
        dense_slot = np.full(n_tags, -1, dtype=np.int64)
        n_dense = 0
        for t in range(n_tags):
            if fill[t] - start[t] > words:
                dense_slot[t] = n_dense
                n_dense += 1
        bits = np.zeros((n_dense, words), dtype=np.uint64)
        for t in range(n_tags):
            d = dense_slot[t]
            if d >= 0:
                for p in range(start[t], fill[t]):
                    q = post[p]
                    bits[d, q >> 6] |= np.uint64(1) << np.uint64(q & 63)
        work = np.zeros(words, dtype=np.uint64)
        stamp = np.full(m, -1, dtype=np.int64)
        denom = np.float64(m - 1)
        for i in range(lo, hi):
            a = tag_offsets[i]
            b = tag_offsets[i + 1]
            if a == b:
                continue
            has_dense = False
            for j in range(a, b):
                if dense_slot[tag_ids[j]] >= 0:
                    has_dense = True
                    break
            if has_dense:
                work[:] = 0
                for j in range(a, b):
                    d = dense_slot[tag_ids[j]]
                    if d >= 0:
                        for w in range(words):
                            work[w] |= bits[d, w]
                for j in range(a, b):
                    t = tag_ids[j]
                    if dense_slot[t] < 0:
                        for p in range(start[t], fill[t]):
                            q = post[p]
                            work[q >> 6] |= np.uint64(1) << np.uint64(q & 63)
                total = 0
                for w in range(words):
                    total += _popcount64(work[w])
            else:
                total = 0
                for j in range(a, b):
                    t = tag_ids[j]
                    for p in range(start[t], fill[t]):
                        q = post[p]
                        if stamp[q] != i:
                            stamp[q] = i
                            total += 1
            out[i] = np.float64(total - 1) / denom
    return out


@jit
def weighted_sum(columns, weights):
    """CompositeScorer: per row ``result = 0.0; result += score_k * w_k`` for k in order.
    Deliberately a loop, not a BLAS product: identical rows must round identically."""
    n = columns.shape[0]
    k = columns.shape[1]
    out = np.empty(n, dtype=np.float64)
    for i in range(n):
        acc = 0.0
        for j in range(k):
            acc = acc + columns[i, j] * weights[j]
        out[i] = acc
    return out


@jit
def scaled_scores(raw, offsets):
    """ScaledScorer: min-max normalisation per segment; all-equal (or NaN-only) -> 0.5."""
    n = raw.shape[0]
    out = np.empty(n, dtype=np.float64)
    for s in range(offsets.shape[0] - 1):
        lo = offsets[s]
        hi = offsets[s + 1]
        mn = np.inf
        mx = -np.inf
        for i in range(lo, hi):
            v = raw[i]
            if v < mn:
                mn = v
            if v > mx:
                mx = v
        if mx == mn or not (mx > mn):
            for i in range(lo, hi):
                out[i] = 0.5
        else:
            span = mx - mn
            for i in range(lo, hi):
                out[i] = (raw[i] - mn) / span
    return out


@jit
def decay_scores(ts, valid, reference, units_per_second, curve, half_life, window_ages, window_scores, null_score):
    """DecayScorer. ``curve``: 0 exponential, 1 step, 2 window. Ages are clamped at zero
    before the curve (future-dated items are maximally fresh)."""
    n = ts.shape[0]
    out = np.empty(n, dtype=np.float64)
    for i in range(n):
        if not valid[i]:
            out[i] = null_score
            continue
        delta = reference - ts[i]
        if delta < 0:
            delta = 0
        age = np.float64(delta) / units_per_second
        if curve == 0:
            out[i] = 2.0 ** (-age / half_life)
        elif curve == 1:
            k = window_ages.shape[0]
            v = window_scores[k - 1]
            for j in range(k):
                if window_ages[j] > age:
                    v = window_scores[j]
                    break
            out[i] = v
        else:
            out[i] = 1.0 if age < window_ages[0] else 0.0
    return out
