"""Order-preserving integer sort keys.

``ordered_bits`` maps float64 to uint64 so that integer order is float order (-0.0 and 0.0
share one key, as they compare equal). ``desc_bits`` is the spec's "score descending, NaN
lowest" as an ascending uint64 key: NaN sorts after every number, -inf included (a float key
cannot say that: negating -inf gives the same +inf a NaN would be mapped to)."""

from __future__ import annotations

import numpy as np

from ._jit import jit

_SIGN = np.uint64(1) << np.uint64(63)
NAN_LAST = np.uint64(0xFFFFFFFFFFFFFFFF)


@jit
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


@jit
def _to_ordered(u):
    """Float64 bit patterns (as uint64, in place) to order-preserving keys."""
    for i in range(u.shape[0]):
        b = u[i]
        u[i] = ~b if b & _SIGN else b | _SIGN


@jit
def ordered_bits(x):
    """Order-preserving uint64 keys of float64 values (no NaN); -0.0 and 0.0 share one key."""
    y = np.empty(x.shape[0], dtype=np.float64)
    for i in range(x.shape[0]):
        y[i] = x[i] + 0.0  # -0.0 + 0.0 == +0.0
    u = y.view(np.uint64)
    _to_ordered(u)
    return u


@jit
def desc_bits(x):
    """Ascending uint64 key for 'descending, NaN lowest' (NaN after -inf)."""
    n = x.shape[0]
    y = np.empty(n, dtype=np.float64)
    for i in range(n):
        y[i] = 0.0 - x[i]  # 0.0 - 0.0 == 0.0 - -0.0 == +0.0
    u = y.view(np.uint64)
    _to_ordered(u)
    for i in range(n):
        if x[i] != x[i]:
            u[i] = NAN_LAST
    return u


@jit
def radix_argsort(key):
    """Stable argsort of uint64 keys (LSD radix, 16-bit digits; a digit that every key
    shares is skipped). Equal keys keep their input order."""
    n = key.shape[0]
    nb = 65536
    mask = np.uint64(nb - 1)
    cnt = np.zeros((4, nb), dtype=np.int64)
    for i in range(n):
        k = key[i]
        for d in range(4):
            cnt[d, (k >> np.uint64(16 * d)) & mask] += 1
    idx = np.arange(n)
    tmp = np.empty(n, dtype=np.int64)
    k1 = key.copy()
    k2 = np.empty(n, dtype=np.uint64)
    for d in range(4):
        sh = np.uint64(16 * d)
        if cnt[d, (k1[0] >> sh) & mask] == n:
            continue
        total = 0
        for b in range(nb):
            c = cnt[d, b]
            cnt[d, b] = total
            total += c
        for i in range(n):
            k = k1[i]
            b = (k >> sh) & mask
            j = cnt[d, b]
            cnt[d, b] = j + 1
            k2[j] = k
            tmp[j] = idx[i]
        k1, k2 = k2, k1
        idx, tmp = tmp, idx
    return idx


#: runs this short are sorted by insertion before the merge passes of :func:`stable_argsort`
INSERTION_RUN = 16


@jit
def int_keys(x):
    """Order-preserving uint64 keys of int64 values (the sign bit flipped), a new array."""
    u = x.copy().view(np.uint64)
    for i in range(u.shape[0]):
        u[i] ^= _SIGN
    return u


@jit
def stable_argsort(key):
    """Stable argsort of uint64 keys: insertion-sorted runs, then bottom-up merges.

    The one comparison sort the kernels use (instead of ``np.argsort``/``np.sort`` variants,
    each of which compiles its own implementation per dtype and kind, seconds when cold);
    large inputs go to :func:`radix_argsort` at the caller's threshold."""
    n = key.shape[0]
    idx = np.arange(n)
    k = key.copy()
    for lo in range(0, n, INSERTION_RUN):
        hi = min(lo + INSERTION_RUN, n)
        for i in range(lo + 1, hi):
            x = k[i]
            r = idx[i]
            j = i - 1
            while j >= lo and k[j] > x:
                k[j + 1] = k[j]
                idx[j + 1] = idx[j]
                j -= 1
            k[j + 1] = x
            idx[j + 1] = r
    if n <= INSERTION_RUN:
        return idx
    k2 = np.empty(n, dtype=np.uint64)
    i2 = np.empty(n, dtype=np.int64)
    width = INSERTION_RUN
    while width < n:
        for lo in range(0, n, 2 * width):
            mid = min(lo + width, n)
            hi = min(lo + 2 * width, n)
            a = lo
            b = mid
            o = lo
            while a < mid and b < hi:
                if k[b] < k[a]:
                    k2[o] = k[b]
                    i2[o] = idx[b]
                    b += 1
                else:
                    k2[o] = k[a]
                    i2[o] = idx[a]
                    a += 1
                o += 1
            while a < mid:
                k2[o] = k[a]
                i2[o] = idx[a]
                a += 1
                o += 1
            while b < hi:
                k2[o] = k[b]
                i2[o] = idx[b]
                b += 1
                o += 1
        k, k2 = k2, k
        idx, i2 = i2, idx
        width *= 2
    return idx
