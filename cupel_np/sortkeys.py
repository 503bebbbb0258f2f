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
def bits_of(v):
    """``ordered_bits`` of one float64 (no NaN)."""
    v = v + 0.0  # -0.0 + 0.0 == +0.0
    b = np.array([v]).view(np.uint64)[0]
    return ~b if b & _SIGN else b | _SIGN


@jit
def desc_bit(v):
    """Ascending key of ``v`` for 'descending, NaN lowest'."""
    if v != v:
        return NAN_LAST
    return bits_of(-v)


@jit
def ordered_bits(x):
    n = x.shape[0]
    out = np.empty(n, dtype=np.uint64)
    for i in range(n):
        out[i] = bits_of(x[i])
    return out


@jit
def desc_bits(x):
    n = x.shape[0]
    out = np.empty(n, dtype=np.uint64)
    for i in range(n):
        out[i] = desc_bit(x[i])
    return out


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
