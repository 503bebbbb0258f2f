"""The project's single jit spelling.

Every kernel is compiled ``nopython`` (object mode can never be reached: numba.njit raises
instead of falling back), ``nogil`` and ``cache=True`` so the compile cost is paid once per
machine. No ``fastmath``: results must agree with the spec to 1e-9 and NaN ordering matters.
``NUMBA_DISABLE_JIT=1`` runs the same functions as plain Python (the test suite uses it).
"""

from __future__ import annotations

import numba

JIT_OPTIONS = {"nogil": True, "cache": True, "fastmath": False}


def jit(fn):
    """Decorate a kernel: nopython, nogil, cached, no fastmath."""
    return numba.njit(**JIT_OPTIONS)(fn)
