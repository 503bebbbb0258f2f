"""Rank kernels of the rank-based scorers (priority, and recency where it ranks timestamps):
each valid value's rank among its segment's valid values, ties sharing the lowest rank, turned
into the spec's rank score. Each kernel walks item-set segments itself (``offsets[s]`` to
``offsets[s+1]``) and picks its way by segment length: an insertion sort for short sets, a
counting pass for a narrow span, a radix or packed sort for long segments, a merge sort else.
"""

from __future__ import annotations

import numpy as np

from cupel_np._jit import jit, jit_inner
from cupel_np.engine.sortkeys import _SIGN, bit_length, pack_valid, sort_keys, sort_pairs, valid_bounds

#: valid values per segment from which ranks come from a counting or radix pass instead of
#: ``sort_pairs`` (a merge sort: ~20 passes over a 1M-value segment)
RANK_RADIX_MIN = 4096


@jit_inner
def _rank_counting(key, row, count, span, out):
    """Ranks of a segment's ``count`` valid keys ``key`` (offset to ``0 .. span``, a small
    span) at rows ``row``: a histogram of the keys and its running sum give each value the
    count of smaller ones."""
    below = np.empty(span + 1, dtype=np.int64)
    for b in range(span + 1):
        below[b] = 0
    for j in range(count):
        below[key[j]] += 1
    acc = 0
    for b in range(span + 1):
        c = below[b]
        below[b] = acc
        acc += c
    denom = np.float64(count - 1)
    for j in range(count):
        out[row[j]] = np.float64(below[key[j]]) / denom


#: bits per digit of :func:`_radix_pairs` (256 buckets: the scatter's write streams stay in
#: cache; measured on 700k timestamps: 8 bits 28 ms, 11 bits 31 ms, 16 bits 37 ms)
RADIX_BITS = 8


@jit_inner
def _radix_pairs(key, row, key2, row2, count, span):
    """Sort ``key[:count]`` (keys offset to ``0 .. span``) ascending, carrying ``row``: LSD
    radix on ``RADIX_BITS``-bit digits, only the digits ``span`` has. Sorted result in
    ``key``/``row``."""
    nb = 1 << RADIX_BITS
    mask = np.uint64(nb - 1)
    n_dig = 1
    while n_dig * RADIX_BITS < 64 and (span >> np.uint64(RADIX_BITS * n_dig)) != 0:
        n_dig += 1
    cnt = np.empty(n_dig * nb, dtype=np.int64)
    for b in range(n_dig * nb):
        cnt[b] = 0
    for i in range(count):
        k = key[i]
        for d in range(n_dig):
            cnt[d * nb + np.int64((k >> np.uint64(RADIX_BITS * d)) & mask)] += 1
    sk, sr, dk, dr = key, row, key2, row2
    for d in range(n_dig):
        base = d * nb
        sh = np.uint64(RADIX_BITS * d)
        acc = 0
        for b in range(base, base + nb):
            c = cnt[b]
            cnt[b] = acc
            acc += c
        for i in range(count):
            k = sk[i]
            b = base + np.int64((k >> sh) & mask)
            j = cnt[b]
            cnt[b] = j + 1
            dk[j] = k
            dr[j] = sr[i]
        sk, sr, dk, dr = dk, dr, sk, sr
    if n_dig % 2 == 1:
        for i in range(count):
            key[i] = key2[i]
            row[i] = row2[i]


def rank_scores(values, valid, offsets):
    """RecencyScorer / PriorityScorer: rank = number of valid peers with a strictly smaller
    value, score = rank / (count - 1); a lone valid item scores 1.0, a null one 0.0.

    O(n log n) per segment instead of the spec's O(n^2) double loop (:func:`_rank_sorted`); a
    segment of at least ``RANK_RADIX_MIN`` valid values in linear time (:func:`_rank_linear`,
    a kernel of its own: a run of small sets, such as the demo, never compiles it); sets all
    of at most ``RANK_SHORT`` rows by :func:`_rank_short` alone (the same ranks)."""
    n_seg = offsets.shape[0] - 1
    if n_seg == 1:  # one set (a single selection): no NumPy call
        longest = int(offsets[1] - offsets[0])
    else:
        longest = int(np.max(offsets[1:] - offsets[:-1])) if n_seg > 1 else 0
    if longest <= RANK_SHORT:
        return _rank_short(values, valid, offsets, longest)
    big = longest >= RANK_RADIX_MIN
    out = _rank_sorted(values, valid, offsets, big)
    if big:
        todo, kmins = _rank_linear(values, valid, offsets, out)
        for s in todo.tolist():  # (a few big segments at most)
            lo, hi = int(offsets[s]), int(offsets[s + 1])
            ib = int(hi - lo - 1).bit_length()
            pk = pack_valid(values, valid, lo, hi, kmins[s], ib)
            sort_keys(pk, ib)  # distinct uint64 keys, in place
            _ranks_of_packed(pk, ib, lo, out)
    return out


#: segments of at most this many rows are ranked by :func:`_rank_short` (a run of small sets,
#: the demo's, compiles neither ``sort_pairs`` nor the counting path under the ranks)
RANK_SHORT = 64


@jit
def _rank_short(values, valid, offsets, longest):
    """:func:`rank_scores` of segments of at most ``longest`` rows: each segment's valid
    values sorted by insertion (with their rows), then every run of equal values gets the
    index of its first over ``count - 1``: the ranks of :func:`_rank_sorted` (a rank does not
    depend on the order of equal values)."""
    n = values.shape[0]
    out = np.empty(n, dtype=np.float64)
    for i in range(n):
        out[i] = 0.0
    key = np.empty(longest, dtype=np.uint64)
    row = np.empty(longest, dtype=np.int64)
    for s in range(offsets.shape[0] - 1):
        count = 0
        for i in range(offsets[s], offsets[s + 1]):
            if not valid[i]:
                continue
            v = np.uint64(values[i]) ^ _SIGN  # (the order-preserving keys of ``_valid_keys``)
            j = count
            while j > 0 and key[j - 1] > v:
                key[j] = key[j - 1]
                row[j] = row[j - 1]
                j -= 1
            key[j] = v
            row[j] = i
            count += 1
        if count == 1:
            out[row[0]] = 1.0
        elif count > 1:
            _ranks_of_sorted(key, row, count, out)
    return out


@jit_inner
def _valid_keys(values, valid, lo, hi, key, row):
    """The valid values of rows ``lo:hi`` as order-preserving uint64 keys (the sign bit
    flipped, as ``sortkeys.int_keys``) in ``key``, their rows in ``row``; returns their count."""
    count = 0
    for i in range(lo, hi):  # branch-free: every row written, valid ones kept
        key[count] = np.uint64(values[i]) ^ _SIGN
        row[count] = i
        count += 1 if valid[i] else 0
    return count


@jit_inner
def _ranks_of_sorted(key, row, count, out):
    """Scores of ``count`` keys sorted ascending (rows ``row``): each row gets the index of
    its run of equal keys over ``count - 1``."""
    denom = np.float64(count - 1)
    rank = 0
    for j in range(count):
        if j > 0 and key[j] != key[j - 1]:
            rank = j
        out[row[j]] = np.float64(rank) / denom


@jit_inner
def _pair_scratch(offsets):
    """Key and row buffers (and their sort's second pair) for the largest segment."""
    max_m = 0
    for s in range(offsets.shape[0] - 1):
        if offsets[s + 1] - offsets[s] > max_m:
            max_m = offsets[s + 1] - offsets[s]
    return (
        np.empty(max_m, dtype=np.uint64),
        np.empty(max_m, dtype=np.int64),
        np.empty(max_m, dtype=np.uint64),
        np.empty(max_m, dtype=np.int64),
    )


@jit_inner
def _key_bounds(key, count):
    """The smallest and the largest of ``key[:count]`` (``count >= 1``)."""
    kmin = key[0]
    kmax = key[0]
    for j in range(count):
        if key[j] < kmin:
            kmin = key[j]
        if key[j] > kmax:
            kmax = key[j]
    return kmin, kmax


@jit
def _rank_sorted(values, valid, offsets, skip_big):
    """:func:`rank_scores` by sorting each segment's valid (value, row) pairs in scratch
    buffers allocated once per call (written out rather than ``np.argsort``: NumPy's sorts
    cost seconds to compile cold; the keys are uint64 so ``sort_pairs`` compiles once, for the
    keys every other caller uses); a segment whose values span at most twice their number
    (priorities) is ranked by counting instead (``_rank_counting``, the same ranks: 259
    priorities of a 500-item request in ~1 us against ~4.5 by sorting). With ``skip_big``, a
    segment of at least ``RANK_RADIX_MIN`` valid values is left for :func:`_rank_linear`."""
    n = values.shape[0]
    out = np.empty(n, dtype=np.float64)  # np.empty and a loop, not np.zeros (see cupel_np._jit)
    for i in range(n):
        out[i] = 0.0
    n_seg = offsets.shape[0] - 1
    key, row, key2, row2 = _pair_scratch(offsets)
    for s in range(n_seg):
        lo, hi = offsets[s], offsets[s + 1]
        if skip_big and hi - lo >= RANK_RADIX_MIN:  # counted without writing its keys (inline:
            c = 0  # an inner kernel here would be one more compile for every small set)
            for i in range(lo, hi):
                c += 1 if valid[i] else 0
            if c >= RANK_RADIX_MIN:
                continue  # left for _rank_linear
        count = _valid_keys(values, valid, lo, hi, key, row)
        if count == 0:
            continue
        if count == 1:
            out[row[0]] = 1.0
            continue
        kmin, kmax = _key_bounds(key, count)
        if kmax - kmin <= np.uint64(2 * count):  # a small span (priorities): count, no sort
            for j in range(count):
                key[j] -= kmin
            _rank_counting(key, row, count, np.int64(kmax - kmin), out)
            continue
        sort_pairs(key, row, key2, row2, count)
        _ranks_of_sorted(key, row, count, out)
    return out


@jit
def _rank_linear(values, valid, offsets, out):
    """:func:`rank_scores` of the segments of at least ``RANK_RADIX_MIN`` valid values, in
    linear time, into ``out``: by counting when the values span at most twice their number
    (priorities); else, when the span's bits and those of a position in the segment fit in
    64, the segment is left for one NumPy sort of packed keys (``sortkeys.pack_valid``: 700k
    timestamps spread over 2**40 us in ~10 ms against 27 by the radix sort); else by a radix
    sort of the keys minus the smallest (only the digits the span has). Returns the segments
    left for the packed sort and every segment's smallest key."""
    n_seg = offsets.shape[0] - 1
    key, row, key2, row2 = _pair_scratch(offsets)
    todo = np.empty(n_seg, dtype=np.int64)
    kmins = np.zeros(n_seg, dtype=np.uint64)
    n_todo = 0
    for s in range(n_seg):
        lo, hi = offsets[s], offsets[s + 1]
        count, kmin, kmax = valid_bounds(values, valid, lo, hi)
        if count < RANK_RADIX_MIN:
            continue
        span = kmax - kmin
        if span > np.uint64(2 * count) and bit_length(span) + bit_length(hi - lo - 1) <= 64:
            todo[n_todo] = s
            kmins[s] = kmin
            n_todo += 1
            continue
        _valid_keys(values, valid, lo, hi, key, row)
        for j in range(count):
            key[j] -= kmin
        if span <= np.uint64(2 * count):
            _rank_counting(key, row, count, np.int64(span), out)
            continue
        _radix_pairs(key, row, key2, row2, count, span)
        _ranks_of_sorted(key, row, count, out)
    return todo[:n_todo], kmins


@jit
def _ranks_of_packed(pk, ib, lo, out):
    """:func:`_ranks_of_sorted` of the packed keys ``pk`` of ``sortkeys.pack_valid``, sorted: each
    row (``lo`` + the key's low ``ib`` bits) gets the index of its run of equal values over
    the count less one."""
    count = pk.shape[0]
    sh = np.uint64(ib)
    low = (np.uint64(1) << sh) - np.uint64(1)
    denom = np.float64(count - 1)
    rank = 0
    prev = pk[0] >> sh
    for j in range(count):
        v = pk[j] >> sh
        if v != prev:
            rank = j
            prev = v
        out[lo + np.int64(pk[j] & low)] = np.float64(rank) / denom


@jit
def rank_scores_from_order(order, ts_sorted, ts_offsets, sc_pos, identity, m):
    """:func:`rank_scores` of the timestamps from an existing per-segment timestamp order
    (``placers.timestamp_order``: each segment's timestamped rows sorted by timestamp, ties in
    any order, ``ts_sorted`` their timestamps): one walk instead of a sort. Scores for the
    ``m`` scoreable positions: row ``r`` is position ``sc_pos[r]`` (-1: not scoreable, not
    counted), or ``r`` itself when ``identity`` (every row scoreable, ``sc_pos`` unread). The
    segments are the table's sets, so a row's valid peers are the same as ``rank_scores``'."""
    out = np.empty(m, dtype=np.float64)  # np.empty and a loop, not np.zeros (see cupel_np._jit)
    for i in range(m):
        out[i] = 0.0
    for s in range(ts_offsets.shape[0] - 1):
        lo = ts_offsets[s]
        hi = ts_offsets[s + 1]
        count = 0
        last = -1
        for j in range(lo, hi):
            p = order[j] if identity else sc_pos[order[j]]
            if p >= 0:
                count += 1
                last = p
        if count == 0:
            continue
        if count == 1:
            out[last] = 1.0
            continue
        denom = np.float64(count - 1)
        seen = 0
        rank = 0
        for j in range(lo, hi):
            if j == lo or ts_sorted[j] != ts_sorted[j - 1]:
                rank = seen  # a new value: every scoreable row before it is smaller
            p = order[j] if identity else sc_pos[order[j]]
            if p >= 0:
                out[p] = np.float64(rank) / denom
                seen += 1
    return out
