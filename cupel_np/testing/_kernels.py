"""The one kernel corpus checks use: the top-n-at-the-edges count per set, in one pass over
each set's included rows (the NumPy form needs a pass per distinct top score and several
gathers; this is the pattern whose cost matters at corpus scale)."""

from __future__ import annotations

import numpy as np

from cupel_np._jit import as_input, jit


@jit
def _top_n_fail_kernel(key, off, pos, n, out):
    best = np.empty(max(n, 1), dtype=np.float64)
    for s in range(off.shape[0] - 1):
        lo, hi = off[s], off[s + 1]
        c = hi - lo
        if c < n:
            out[s] = n - c
            continue
        # the n smallest keys, kept sorted by insertion (n is small)
        k = 0
        for i in range(lo, hi):
            x = key[i]
            if k < n:
                j = k
                k += 1
            elif x < best[n - 1]:
                j = n - 1
            else:
                continue
            while j > 0 and best[j - 1] > x:
                best[j] = best[j - 1]
                j -= 1
            best[j] = x
        t = best[n - 1]
        m = 0
        e_gt = 0
        e_eq = 0
        for i in range(lo, hi):
            p = pos[i]
            edge = p < (n + 1) // 2 or p >= c - n // 2
            if key[i] < t:
                m += 1
                if edge:
                    e_gt += 1
            elif key[i] == t and edge:
                e_eq += 1
        out[s] = n - (e_gt + min(e_eq, n - m))


def top_n_fail_counts(key: np.ndarray, off: np.ndarray, pos: np.ndarray, n: int) -> np.ndarray:
    """Per set (included rows grouped by ``off``, sort key ``key`` = -score with NaN as inf,
    placed positions ``pos``): how many of the first ``n`` edge positions do not hold a top-n
    item, ties at the n-th score interchangeable; ``n - count`` for a set with fewer than ``n``
    included items. ``n`` >= 1."""
    out = np.zeros(off.shape[0] - 1, dtype=np.int64)
    _top_n_fail_kernel(as_input(key, np.float64), as_input(off, np.int64), as_input(pos, np.int64), int(n), out)
    return out
