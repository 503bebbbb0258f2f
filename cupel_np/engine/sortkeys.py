"""Order-preserving integer sort keys.

Float64 bit patterns become uint64 keys whose integer order is float order (-0.0 and 0.0
share one key, as they compare equal): greedy's ``density_bits`` writes that loop out.
``desc_bits`` is the spec's "score descending, NaN
lowest" as an ascending uint64 key: NaN sorts after every number, -inf included (a float key
cannot say that: negating -inf gives the same +inf a NaN would be mapped to)."""

from __future__ import annotations

import numpy as np

from cupel_np._cores import radix_sort_chosen
from cupel_np._jit import jit, jit_inner

_SIGN = np.uint64(1) << np.uint64(63)
NAN_LAST = np.uint64(0xFFFFFFFFFFFFFFFF)


@jit_inner
def score_cmp(a, b):
    """-1 when score ``a`` comes first in 'descending, NaN lowest' order, 1 when ``b`` does,
    0 when they tie (-0.0 ties 0.0; NaN ties NaN)."""
    if a != a:
        return 0 if b != b else 1
    if b != b:
        return -1
    if a > b:
        return -1
    if a < b:
        return 1
    return 0


# Float64 bit patterns (as uint64) become order-preserving keys by ``~b if b & _SIGN else
# b | _SIGN``; the loop is written out in each key function (here and greedy.density_bits)
# rather than shared through a helper kernel: every kernel is a separate compile (~0.05 s
# each when cold, for a 3-line loop).


@jit
def desc_bits(x):
    """Ascending uint64 key for 'descending, NaN lowest' (NaN after -inf)."""
    n = x.shape[0]
    y = np.empty(n, dtype=np.float64)
    for i in range(n):
        y[i] = 0.0 - x[i]  # 0.0 - 0.0 == 0.0 - -0.0 == +0.0
    u = y.view(np.uint64)
    for i in range(n):
        b = u[i]
        if x[i] != x[i]:
            u[i] = NAN_LAST
        else:
            u[i] = ~b if b & _SIGN else b | _SIGN
    return u


@jit
def radix_argsort(key):
    """Stable argsort of uint64 keys (LSD radix, 16-bit digits; a digit that every key
    shares is skipped). Equal keys keep their input order."""
    n = key.shape[0]
    if n == 0:
        return np.empty(0, dtype=np.int64)
    nb = 65536
    mask = np.uint64(nb - 1)
    cnt = np.empty(4 * nb, dtype=np.int64)  # digit d's counts at d * nb (1-d: no 2-d np.empty)
    for b in range(4 * nb):
        cnt[b] = 0
    for i in range(n):
        k = key[i]
        for d in range(4):
            cnt[np.uint64(d * nb) + ((k >> np.uint64(16 * d)) & mask)] += 1  # uint64: no wraparound test
    idx = np.empty(n, dtype=np.int64)
    for i in range(n):
        idx[i] = i
    tmp = np.empty(n, dtype=np.int64)
    k1 = key.copy()
    k2 = np.empty(n, dtype=np.uint64)
    for d in range(4):
        sh = np.uint64(16 * d)
        base = np.uint64(d * nb)
        if cnt[base + ((k1[0] >> sh) & mask)] == n:
            continue
        total = 0
        for b in range(d * nb, (d + 1) * nb):
            c = cnt[b]
            cnt[b] = total
            total += c
        for i in range(n):
            k = k1[i]
            b = base + ((k >> sh) & mask)
            j = cnt[b]
            cnt[b] = j + 1
            k2[j] = k
            tmp[j] = idx[i]
        k1, k2 = k2, k1
        idx, tmp = tmp, idx
    return idx


#: runs this short are sorted by insertion before the merge passes of :func:`stable_argsort`
INSERTION_RUN = 16


@jit
def int_keys(x):
    """Order-preserving uint64 keys of int64 values (the sign bit flipped), a new array.
    One element loop: no ``copy``/``view`` implementations to compile for int64 arrays."""
    u = np.empty(x.shape[0], dtype=np.uint64)
    for i in range(x.shape[0]):
        u[i] = np.uint64(x[i]) ^ _SIGN
    return u


@jit_inner
def sort_pairs(key, row, key2, row2, count):
    """Sort ``key[:count]`` ascending and stably in place, carrying ``row`` along: insertion
    sort on runs of ``INSERTION_RUN``, then bottom-up merges through ``key2``/``row2`` (scratch
    of at least ``count`` entries; untouched when ``count <= INSERTION_RUN``). The one
    comparison sort of the kernels: ``np.argsort``/``np.sort`` variants each compile their own
    implementation per dtype and kind (seconds when cold)."""
    run = INSERTION_RUN
    for start in range(0, count, run):
        end = min(start + run, count)
        for i in range(start + 1, end):
            k = key[i]
            r = row[i]
            j = i - 1
            while j >= start and key[j] > k:
                key[j + 1] = key[j]
                row[j + 1] = row[j]
                j -= 1
            key[j + 1] = k
            row[j + 1] = r
    width = run
    flipped = False
    while width < count:
        if flipped:
            sk, sr, dk, dr = key2, row2, key, row
        else:
            sk, sr, dk, dr = key, row, key2, row2
        for left in range(0, count, 2 * width):
            mid = min(left + width, count)
            right = min(left + 2 * width, count)
            i = left
            j = mid
            k = left
            while i < mid and j < right:
                if sk[j] < sk[i]:
                    dk[k] = sk[j]
                    dr[k] = sr[j]
                    j += 1
                else:
                    dk[k] = sk[i]
                    dr[k] = sr[i]
                    i += 1
                k += 1
            while i < mid:
                dk[k] = sk[i]
                dr[k] = sr[i]
                i += 1
                k += 1
            while j < right:
                dk[k] = sk[j]
                dr[k] = sr[j]
                j += 1
                k += 1
        flipped = not flipped
        width *= 2
    if flipped:
        for i in range(count):
            key[i] = key2[i]
            row[i] = row2[i]


@jit
def stable_argsort(key):
    """Stable argsort of uint64 keys (``desc_bits``, ``int_keys``, greedy's ``density_bits``) by
    :func:`sort_pairs`; large inputs go to :func:`radix_argsort` at the caller's threshold."""
    n = key.shape[0]
    idx = np.empty(n, dtype=np.int64)
    for i in range(n):
        idx[i] = i
    k = key.copy()
    m = n if n > INSERTION_RUN else 0  # the merge scratch is needed past one run only
    sort_pairs(k, idx, np.empty(m, dtype=np.uint64), np.empty(m, dtype=np.int64), n)
    return idx


@jit_inner
def valid_bounds(values, valid, lo, hi):
    """The count of the valid values of rows ``lo:hi`` and the smallest and largest of their
    order-preserving keys (as ``scorers.ranks._valid_keys``'; ``(0, 2**64 - 1, 0)`` when none), in one
    reading pass: no keys written."""
    count = 0
    kmin = ~np.uint64(0)
    kmax = np.uint64(0)
    for i in range(lo, hi):
        ok = valid[i]
        k = np.uint64(values[i]) ^ _SIGN
        kmin = min(kmin, k) if ok else kmin
        kmax = max(kmax, k) if ok else kmax
        count += 1 if ok else 0
    return count, kmin, kmax


@jit_inner
def bit_length(x):
    """The bits of a non-negative integer (0 for 0)."""
    x = np.uint64(x)
    b = 0
    while x != np.uint64(0):
        x >>= np.uint64(1)
        b += 1
    return b


@jit
def pack_valid(values, valid, lo, hi, kmin, ib):
    """The valid values of rows ``lo:hi`` as packed keys: the order-preserving key minus
    ``kmin`` (the smallest) above ``ib`` bits that hold the row's position in the segment -
    distinct keys that sort by (value, row). Branch-free: every row written, valid ones kept."""
    pk = np.empty(hi - lo, dtype=np.uint64)
    sh = np.uint64(ib)
    c = 0
    for i in range(lo, hi):
        ok = valid[i]
        k = np.uint64(values[i]) ^ _SIGN if ok else kmin  # (a null row's key would wrap)
        pk[c] = ((k - kmin) << sh) | np.uint64(i - lo)
        c += 1 if ok else 0
    return pk[:c]


#: where NumPy's quicksort is the slow one (``_cores.radix_sort_chosen``), :func:`sort_keys`
#: hands arrays of at least this many keys to :func:`radix_sort`. Measured on a Zen 4 with a
#: fresh array each call (random packed keys, us; the same array sorted again and again
#: lets the branch predictor learn it: NumPy's stable sort of 5,000 keys then takes 57 us,
#: with fresh keys 175): 1,024 keys quicksort 12-17 / stable 27-32 / radix 13-21; 2,048:
#: 32-45 / 61-72 / 23-36; 5,000: 103-144 / 173-198 / 58-79; 32,768: 1,040-1,434 / 1,408-1,651
#: / 334-465. NumPy's stable sort is never the cheapest of the three.
RADIX_SORT_MIN = 1 << 11
#: the fewest keys :func:`radix_for` hands to the radix argsort there (the big stable argsorts)
RADIX_ARGSORT_MIN = 1 << 15
#: the widest digit (bits) of one :func:`radix_sort` pass: 2**16 counters per digit, for
#: arrays of at least ``_WIDE_MIN`` keys; shorter ones take digits of at most
#: ``_NARROW_WIDTH`` bits (clearing and summing 65,536 counters a pass costs more than the
#: pass saved: 5,000 keys of 40 varying bits, 77-119 us in three 14-bit passes, 58-79 in four
#: of 10 bits; 16,384 keys cost about the same either way)
_RADIX_WIDTH = 16
_NARROW_WIDTH = 11
_WIDE_MIN = 1 << 14


@jit
def radix_sort(key, tmp, low):
    """Sort uint64 ``key`` ascending in place, given keys whose low ``low`` bits ascend along
    the array (the packed keys of this package: a position in the low bits, each once): an LSD
    radix sort, stable, of the bits above ``low`` is then the whole order. Only the bits that
    vary among the keys are digits (as few passes of at most 16 bits as they need, 11 for an
    array shorter than ``_WIDE_MIN``; none when every key shares its high bits). ``tmp``:
    scratch of the same length."""
    n = key.shape[0]
    x_and = ~np.uint64(0)
    x_or = np.uint64(0)
    for i in range(n):
        x_and &= key[i]
        x_or |= key[i]
    var = (x_and ^ x_or) >> np.uint64(low)
    top = 0  # the varying high bits: ``low .. low + top``
    while top < 64 - low and (var >> np.uint64(top)) != np.uint64(0):
        top += 1
    if top == 0:
        return
    width = _RADIX_WIDTH if n >= _WIDE_MIN else _NARROW_WIDTH
    n_pass = (top + width - 1) // width
    w = (top + n_pass - 1) // n_pass
    nb = 1 << w
    mask = np.uint64(nb - 1)
    cnt = np.zeros(n_pass * nb, dtype=np.int64)  # pass d's counters at d * nb
    for i in range(n):
        k = key[i] >> np.uint64(low)
        for d in range(n_pass):
            cnt[d * nb + np.int64((k >> np.uint64(w * d)) & mask)] += 1
    src = key
    dst = tmp
    for d in range(n_pass):
        sh = np.uint64(low + w * d)
        base = d * nb
        total = 0
        for j in range(base, base + nb):
            c = cnt[j]
            cnt[j] = total
            total += c
        for i in range(n):
            k = src[i]
            j = base + np.int64((k >> sh) & mask)
            p = cnt[j]
            cnt[j] = p + 1
            dst[p] = k
        src, dst = dst, src
    if n_pass % 2 == 1:  # the order is in ``tmp``
        for i in range(n):
            key[i] = tmp[i]


def radix_for(n: int) -> bool:
    """Whether a sort of ``n`` keys goes to this module's radix kernels instead of NumPy's
    quicksort: a big one, where that quicksort is slow (``_cores.radix_sort_chosen``)."""
    return n >= RADIX_ARGSORT_MIN and radix_sort_chosen()


def sort_keys(keys: np.ndarray, low: int) -> None:
    """Sort packed uint64 keys ascending in place, given that their low ``low`` bits ascend
    along the array (a position each, as every packed key here holds): NumPy's SIMD sort, or
    where that sort is slow (``_cores.simd_sort_is_slow``; ``CUPEL_NP_SORT``) :func:`radix_sort`
    for an array of ``RADIX_SORT_MIN`` keys or more. The same order every way (a sort of
    values, not of positions)."""
    if keys.shape[0] >= RADIX_SORT_MIN and radix_sort_chosen():
        radix_sort(keys, np.empty_like(keys), low)
    else:
        keys.sort()
