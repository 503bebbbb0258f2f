"""Numba kernels for the scorers. Each walks item-set segments itself (``offsets[s]`` to
``offsets[s+1]``), sees only arrays and scalars, and reproduces the spec's arithmetic order so
scores agree with the pseudocode (to the bit where the spec's operations are reproduced).
"""

from __future__ import annotations

import numpy as np

from cupel_np._jit import jit, jit_inner


@jit
def tag_scores(tag_offsets, tag_ids, weight_of_tag, total_weight):
    """TagScorer: sum of the configured weights of each tag occurrence (item tag order),
    divided by the total configured weight, capped at 1.0."""
    n = tag_offsets.shape[0] - 1
    out = np.empty(n, dtype=np.float64)  # np.empty and a loop, not np.zeros (see cupel_np._jit)
    for i in range(n):
        out[i] = 0.0
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


#: a segment whose items each carry at most this many distinct tags may be scored by subset
#: counts (``frequency_scores``: 2**k - k - 1 counted subsets an item of k tags; from four
#: tags the counts' table outgrows the cache first)
SUBSET_MAX_TAGS = 3
#: ... when the posting-list walk would visit more than this many entries per counted subset
#: (estimated from the lists' lengths; measured: lists of ~15 walked 0.74 ms, counted 0.27 for
#: 5,000 items; lists of ~1-4 cost the same either way)
SUBSET_WALK_RATIO = 3

#: cost of walking one posting-list entry with the stamp array, in bitset words OR-ed and
#: counted (random access vs vectorized streaming; measured on the 200k Zipf benchmark)
STAMP_COST = 8


@jit_inner
def _union_sizes_by_subsets(uoff, utag, start, m, t_bits, n_sub, sub_key, sub_mask, sub_at, out, lo, denom):
    """``frequency_scores``' subset counts for one segment of ``m`` items (their distinct local
    tags ``utag[uoff[r]:uoff[r + 1]]``, ascending, at most ``SUBSET_MAX_TAGS``; posting-list
    lengths from ``start``): count every subset of two tags or more (``sub_key``: an open
    table, a key at ``2 * slot`` and its count after it, all 0 on entry and on exit), then write
    ``out[lo + r]`` from each item's union size, the signed sum of its tags' list lengths and
    its subsets' counts. ``sub_at`` (``n_sub`` long): each item's subsets' slots, in item order,
    ``-1 - slot`` for a subset of even size."""
    c = 0
    for r in range(m):
        a = uoff[r]
        kr = uoff[r + 1] - a
        for mask in range(3, 1 << kr):
            if mask & (mask - 1) == 0:  # one tag: its posting list's length
                continue
            key = 0
            size = 0
            for j in range(kr):
                if (mask >> j) & 1:
                    key |= (utag[a + j] + 1) << (t_bits * size)  # ascending tags: one key a set
                    size += 1
            # a 31-bit fold times a 32-bit odd constant: below 2**63, so no product wraps
            # (valid as plain Python); the middle bits pick the slot
            h = ((key ^ (key >> 29) ^ (key >> 47)) & 0x7FFFFFFF) * 0x9E3779B1
            slot = (h >> 24) & sub_mask
            while sub_key[2 * slot] != 0 and sub_key[2 * slot] != key:
                slot = (slot + 1) & sub_mask
            if sub_key[2 * slot] == 0:
                sub_key[2 * slot] = key
                sub_key[2 * slot + 1] = 0
            sub_key[2 * slot + 1] += 1
            sub_at[c] = slot if size % 2 == 1 else -1 - slot
            c += 1
    c = 0
    for r in range(m):
        a = uoff[r]
        b = uoff[r + 1]
        if a == b:
            continue
        total = 0
        for p in range(a, b):
            t = utag[p]
            total += start[t + 1] - start[t]
        n_s = (1 << (b - a)) - (b - a) - 1
        for x in range(c, c + n_s):
            z = sub_at[x]
            total += sub_key[2 * z + 1] if z >= 0 else -sub_key[-1 - 2 * z]
        c += n_s
        out[r + lo] = np.float64(total - 1) / denom
    for x in range(n_sub):
        z = sub_at[x]
        sub_key[2 * z if z >= 0 else -2 - 2 * z] = 0


@jit
def frequency_scores(tag_offsets, tag_ids, n_tags, offsets):
    """FrequencyScorer: share of the other items in the segment that have at least one
    (case-folded) tag in common with the item.

    Cost is linear in the items and tag occurrences, never in the table's tag vocabulary:
    each segment remaps the tags it touches to local ids 0..L-1 through one per-call scratch
    array (``n_tags`` long, reset only at the entries the segment set) and builds posting lists
    (local tag -> items, each item posted once per tag). For an item, the peers sharing a tag
    are the union of its tags' posting lists, which contains the item itself, so
    matches = |union| - 1. The union is the largest list ``t*`` plus the items of the other
    lists that do not carry ``t*``: an item with one distinct tag costs O(1), and a common tag
    is never walked per item. The other lists are walked with a stamp array (each peer counted
    once); only when that walk would cost more than OR-ing bitsets (posting lists longer than
    words-per-bitset are also held as bitsets) is the union formed and counted by words, and
    then once per distinct tag set (items' distinct tags are kept sorted; a hash table keyed by
    them remembers each union's size: 200k items carrying 2 of 64 common tags cost 0.02 s
    instead of 0.15 s). A segment whose items carry at most ``SUBSET_MAX_TAGS`` distinct tags
    each, with posting lists long enough that the walk would cost more, takes the union's size
    by inclusion-exclusion over counts of every subset of two or more tags instead (linear in
    the items; the same integers, so the same scores)."""
    n = tag_offsets.shape[0] - 1
    out = np.empty(n, dtype=np.float64)  # np.empty and a loop, not np.zeros (see cupel_np._jit)
    for i in range(n):
        out[i] = 0.0
    n_seg = offsets.shape[0] - 1
    max_m = 0
    max_occ = 0
    for s in range(n_seg):
        m = offsets[s + 1] - offsets[s]
        occ = tag_offsets[offsets[s + 1]] - tag_offsets[offsets[s]]
        if m > max_m:
            max_m = m
        if occ > max_occ:
            max_occ = occ
    if max_m <= 1 or max_occ == 0:
        return out
    local = np.empty(n_tags, dtype=np.int64)  # global tag -> local id (reset per segment)
    for i in range(n_tags):
        local[i] = -1
    touched = np.empty(max_occ, dtype=np.int64)  # local id -> global tag
    start = np.empty(max_occ + 1, dtype=np.int64)  # CSR of posting lists by local id
    fill = np.empty(max_occ, dtype=np.int64)
    last_seen = np.empty(max_occ, dtype=np.int64)  # global item index: never stale
    for i in range(max_occ):
        last_seen[i] = -1
    post = np.empty(max_occ, dtype=np.int64)  # segment-relative items
    dense_slot = np.empty(max_occ, dtype=np.int64)
    uoff = np.empty(max_m + 1, dtype=np.int64)  # each item's distinct local tags, CSR
    utag = np.empty(max_occ, dtype=np.int64)
    stamp = np.empty(max_m, dtype=np.int64)
    for i in range(max_m):
        stamp[i] = -1
    # memo of bitset unions by the item's tag set: open addressing, reset per segment
    cap_max = 1
    while cap_max < 2 * max_m:
        cap_max *= 2
    memo_item = np.empty(cap_max, dtype=np.int64)
    for i in range(cap_max):
        memo_item[i] = -1
    memo_total = np.empty(cap_max, dtype=np.int64)
    memo_used = np.empty(max_m, dtype=np.int64)
    sub_key = np.empty(0, dtype=np.int64)  # subset counts (grown to a segment's need)
    sub_at = np.empty(0, dtype=np.int64)
    for s in range(n_seg):
        lo = offsets[s]
        hi = offsets[s + 1]
        m = hi - lo
        if m <= 1 or tag_offsets[hi] == tag_offsets[lo]:
            continue
        # local ids, distinct tags per item, posting-list lengths
        n_local = 0
        k = 0
        for i in range(lo, hi):
            uoff[i - lo] = k
            for j in range(tag_offsets[i], tag_offsets[i + 1]):
                g = tag_ids[j]
                t = local[g]
                if t < 0:
                    t = n_local
                    local[g] = t
                    touched[t] = g
                    start[t + 1] = 0
                    n_local += 1
                if last_seen[t] != i:  # a tag repeated on one item counts once
                    last_seen[t] = i
                    utag[k] = t
                    k += 1
                    start[t + 1] += 1
            for x in range(uoff[i - lo] + 1, k):  # sorted, so equal tag sets compare equal
                t = utag[x]
                y = x - 1
                while y >= uoff[i - lo] and utag[y] > t:
                    utag[y + 1] = utag[y]
                    y -= 1
                utag[y + 1] = t
        uoff[m] = k
        start[0] = 0
        for t in range(n_local):
            start[t + 1] += start[t]
            fill[t] = start[t]
        for t in range(n_local):
            local[touched[t]] = -1
        denom = np.float64(m - 1)
        # every item of at most SUBSET_MAX_TAGS distinct tags: the union's size by
        # inclusion-exclusion, |U| = sum over the non-empty subsets S of the item's tags of
        # (-1)^(|S|+1) N(S), N(S) the items carrying all of S (a posting list's length for
        # one tag; a count per subset of two or more, each item adding one to every such
        # subset of its tags). Linear in the items, where walking posting lists grows with
        # their lengths (one set of 5,000 items of 0-3 tags from 500: 0.27 ms against 0.74;
        # 20,000: 1.3 against 8.9)
        max_k = 0
        n_sub = 0
        other = 0  # the tags of items of two or more, their first aside: the lists walked
        for r in range(m):
            kr = uoff[r + 1] - uoff[r]
            if kr > max_k:
                max_k = kr
            if kr >= 2:
                n_sub += (1 << kr) - kr - 1 if kr <= SUBSET_MAX_TAGS else 0
                other += kr - 1
        t_bits = 1
        while (1 << t_bits) <= n_local:  # a tag's id + 1 in t_bits bits
            t_bits += 1
        use_subsets = max_k <= SUBSET_MAX_TAGS and t_bits * max_k <= 63 and n_sub > 0
        if use_subsets:
            # the walk's visits, estimated: a walked list's expected length (weighted by the
            # lists' own lengths: an item carries a long list more often) per list walked
            sq = 0
            for t in range(n_local):
                sq += (start[t + 1] - start[t]) * (start[t + 1] - start[t])
            # (in floats: the products pass int64 on a segment of millions)
            use_subsets = np.float64(other) * np.float64(sq) > SUBSET_WALK_RATIO * np.float64(n_sub) * np.float64(k)
        if use_subsets:
            sub_cap = 4
            while sub_cap < 2 * n_sub:
                sub_cap *= 2
            if 2 * sub_cap > sub_key.shape[0]:  # a subset's key at 2 * slot, its count after it
                sub_key = np.empty(2 * sub_cap, dtype=np.int64)
                for x in range(2 * sub_cap):
                    sub_key[x] = 0
            if n_sub > sub_at.shape[0]:
                sub_at = np.empty(n_sub, dtype=np.int64)
            _union_sizes_by_subsets(uoff, utag, start, m, t_bits, n_sub, sub_key, sub_cap - 1, sub_at, out, lo, denom)
            continue
        for r in range(m):
            for p in range(uoff[r], uoff[r + 1]):
                t = utag[p]
                post[fill[t]] = r
                fill[t] += 1
        words = (m + 63) // 64
        n_dense = 0
        for t in range(n_local):
            if start[t + 1] - start[t] > words:
                dense_slot[t] = n_dense
                n_dense += 1
            else:
                dense_slot[t] = -1
        bits = np.empty(n_dense * words, dtype=np.uint64)  # list d's word w at d * words + w
        for w in range(n_dense * words):
            bits[w] = 0
        if n_dense > 0:
            for t in range(n_local):
                d = dense_slot[t]
                if d >= 0:
                    for p in range(start[t], start[t + 1]):
                        q = post[p]
                        bits[d * words + (q >> 6)] |= np.uint64(1) << np.uint64(q & 63)
        work = np.empty(words if n_dense > 0 else 0, dtype=np.uint64)
        cap = 1
        while cap < 2 * m:
            cap *= 2
        n_used = 0
        for r in range(m):
            a = uoff[r]
            b = uoff[r + 1]
            if a == b:
                continue
            # t*: the item's tag with the longest posting list
            best = utag[a]
            for p in range(a + 1, b):
                t = utag[p]
                if start[t + 1] - start[t] > start[best + 1] - start[best]:
                    best = t
            total = start[best + 1] - start[best]
            if b - a > 1:
                rest = 0
                n_other_dense = 0
                for p in range(a, b):
                    t = utag[p]
                    if t != best:
                        rest += start[t + 1] - start[t]
                        if dense_slot[t] >= 0:
                            n_other_dense += 1
                db = dense_slot[best]
                if db >= 0 and STAMP_COST * rest > words * (n_other_dense + 2):
                    # bitsets pay: OR the dense lists, set the sparse ones, count by words;
                    # items with the same tag set share the answer (memo by sorted tags)
                    h = 0  # polynomial hash mod 2^31 - 1: never overflows int64 (valid plain Python)
                    for p in range(a, b):
                        h = (h * 1000003 + utag[p] + 1) % 2147483647
                    slot = h & (cap - 1)
                    hit = -1
                    while memo_item[slot] >= 0:
                        r2 = memo_item[slot]
                        if uoff[r2 + 1] - uoff[r2] == b - a:
                            same = True
                            for p in range(b - a):
                                if utag[uoff[r2] + p] != utag[a + p]:
                                    same = False
                                    break
                            if same:
                                hit = slot
                                break
                        slot = (slot + 1) & (cap - 1)
                    if hit >= 0:
                        out[r + lo] = np.float64(memo_total[hit] - 1) / denom
                        continue
                    for w in range(words):
                        work[w] = bits[db * words + w]
                    for p in range(a, b):
                        t = utag[p]
                        if t == best:
                            continue
                        d = dense_slot[t]
                        if d >= 0:
                            for w in range(words):
                                work[w] |= bits[d * words + w]
                        else:
                            for e in range(start[t], start[t + 1]):
                                q = post[e]
                                work[q >> 6] |= np.uint64(1) << np.uint64(q & 63)
                    total = 0
                    for w in range(words):
                        # popcount, written out (a helper kernel is one more compile when
                        # cold); byte sums by shifts, not a wrapping multiply: also valid as
                        # plain (NumPy) Python
                        bw = work[w]
                        bw = bw - ((bw >> np.uint64(1)) & np.uint64(0x5555555555555555))
                        bw = (bw & np.uint64(0x3333333333333333)) + (
                            (bw >> np.uint64(2)) & np.uint64(0x3333333333333333)
                        )
                        bw = (bw + (bw >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
                        bw = bw + (bw >> np.uint64(8))
                        bw = bw + (bw >> np.uint64(16))
                        bw = bw + (bw >> np.uint64(32))
                        total += np.int64(bw & np.uint64(0x7F))
                    memo_item[slot] = r
                    memo_total[slot] = total
                    memo_used[n_used] = slot
                    n_used += 1
                else:
                    # peers of the other lists that do not carry t*, each counted once
                    for p in range(a, b):
                        t = utag[p]
                        if t == best:
                            continue
                        for e in range(start[t], start[t + 1]):
                            q = post[e]
                            if stamp[q] == r + lo:
                                continue
                            stamp[q] = r + lo
                            if db >= 0:
                                has_best = (bits[db * words + (q >> 6)] >> np.uint64(q & 63)) & np.uint64(1)
                                if has_best == 0:
                                    total += 1
                            else:
                                has = False
                                for f in range(uoff[q], uoff[q + 1]):
                                    if utag[f] == best:
                                        has = True
                                        break
                                if not has:
                                    total += 1
            out[r + lo] = np.float64(total - 1) / denom
        for x in range(n_used):
            memo_item[memo_used[x]] = -1
    return out


#: a table whose sets all have at most this many items is scored by
#: :func:`frequency_scores_small` (an item set fits one 64-bit word)
SMALL_SET = 64


@jit
def frequency_scores_small(tag_offsets, tag_ids, n_tags, offsets):
    """FrequencyScorer when no set has more than ``SMALL_SET`` items (a corpus of sessions):
    the same counts as :func:`frequency_scores`, so the same scores, from a kernel a tenth of
    its size (a cold first run compiles only this one). Each (case-folded) tag the set touches
    gets one 64-bit word with a bit per item carrying it; an item's peers sharing a tag are the
    bits of the OR of its tags' words, the item itself included, so matches = popcount - 1."""
    n = tag_offsets.shape[0] - 1
    out = np.empty(n, dtype=np.float64)
    for i in range(n):
        out[i] = 0.0
    n_seg = offsets.shape[0] - 1
    max_occ = 0
    for s in range(n_seg):
        occ = tag_offsets[offsets[s + 1]] - tag_offsets[offsets[s]]
        if occ > max_occ:
            max_occ = occ
    local = np.empty(n_tags, dtype=np.int64)  # global tag -> local id (reset per segment)
    for g in range(n_tags):
        local[g] = -1
    touched = np.empty(max_occ, dtype=np.int64)  # local id -> global tag
    word = np.empty(max_occ, dtype=np.uint64)  # local id -> its items' bits
    for s in range(n_seg):
        lo = offsets[s]
        hi = offsets[s + 1]
        m = hi - lo
        if m <= 1 or tag_offsets[hi] == tag_offsets[lo]:
            continue
        n_local = 0
        for i in range(lo, hi):
            bit = np.uint64(1) << np.uint64(i - lo)
            for j in range(tag_offsets[i], tag_offsets[i + 1]):
                g = tag_ids[j]
                t = local[g]
                if t < 0:
                    t = n_local
                    local[g] = t
                    touched[t] = g
                    word[t] = np.uint64(0)
                    n_local += 1
                word[t] |= bit
        denom = np.float64(m - 1)
        for i in range(lo, hi):
            a = tag_offsets[i]
            b = tag_offsets[i + 1]
            if a == b:
                continue
            bw = np.uint64(0)
            for j in range(a, b):
                bw |= word[local[tag_ids[j]]]
            # popcount, written out as in frequency_scores
            bw = bw - ((bw >> np.uint64(1)) & np.uint64(0x5555555555555555))
            bw = (bw & np.uint64(0x3333333333333333)) + ((bw >> np.uint64(2)) & np.uint64(0x3333333333333333))
            bw = (bw + (bw >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
            bw = bw + (bw >> np.uint64(8))
            bw = bw + (bw >> np.uint64(16))
            bw = bw + (bw >> np.uint64(32))
            total = np.int64(bw & np.uint64(0x7F))
            out[i] = np.float64(total - 1) / denom
        for t in range(n_local):
            local[touched[t]] = -1
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
