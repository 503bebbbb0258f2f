"""The project's jit decorator (cupel_np/_jit.py)."""

import numpy as np

from cupel_np._jit import jit


@jit
def _inner(a, k):
    return a[k] + k


@jit
def _outer(a, j):
    return _inner(a, 0) + _inner(a, 1) + _inner(a, j)


def test_a_kernel_called_with_constants_compiles_once():
    """Kernel-to-kernel calls with literal constants (0, 1) and a variable reuse one
    specialization: ``_jit`` strips literal types through Numba's ``get_call_template``, an
    internal hook. A Numba release that changes it shows here as several signatures (each
    costs a compile on a cold start) or as an error."""
    assert _outer(np.arange(3, dtype=np.int64), 2) == (0 + 0) + (1 + 1) + (2 + 2)
    assert len(_inner.signatures) == 1
    assert "Literal" not in str(_inner.signatures[0])
