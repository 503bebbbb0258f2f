"""The project's jit decorator (cupel_np/_jit.py)."""

import numpy as np

from cupel_np import _jit


def test_a_kernel_called_with_constants_compiles_once(monkeypatch):
    """Kernel-to-kernel calls with literal constants (0, 1) and a variable reuse one
    specialization: ``_jit`` strips literal types through Numba's ``get_call_template``, an
    internal hook. A Numba release that changes it shows here as several signatures (each
    costs a compile on a cold start) or as an error. Compiled fresh (no cache: a cached caller
    never compiles its callee in this process)."""
    monkeypatch.setitem(_jit.JIT_OPTIONS, "cache", False)
    monkeypatch.setattr(_jit, "KERNELS", [])

    def inner_py(a, k):
        return a[k] + k

    inner = _jit.jit(inner_py)

    def outer_py(a, j):
        return inner(a, 0) + inner(a, 1) + inner(a, j)

    outer = _jit.jit(outer_py)
    assert outer(np.arange(3, dtype=np.int64), 2) == (0 + 0) + (1 + 1) + (2 + 2)
    assert len(inner.signatures) == 1
    assert "Literal" not in str(inner.signatures[0])


def test_an_inner_kernel_runs_from_kernels_and_refuses_python(monkeypatch):
    """``jit_inner`` drops Numba's CPython wrapper: kernels call it as usual, and a call from
    Python raises TypeError (without the guard Numba would jump through the missing wrapper
    and crash the interpreter)."""
    import pytest

    monkeypatch.setitem(_jit.JIT_OPTIONS, "cache", False)
    monkeypatch.setattr(_jit, "KERNELS", [])

    def inner_py(a, k):
        return a[k] * 2

    inner = _jit.jit_inner(inner_py)

    def outer_py(a):
        return inner(a, 0) + inner(a, 2)

    outer = _jit.jit(outer_py)
    assert outer(np.arange(3, dtype=np.int64)) == 0 + 4
    assert len(inner.signatures) == 1
    with pytest.raises(TypeError, match="only other kernels may call it"):
        inner(np.arange(3, dtype=np.int64), 1)
    assert _jit.KERNELS == [inner, outer]
