"""The project's single jit spelling, and the boundary rules that keep cold start cheap.

Every kernel is compiled ``nopython`` (object mode can never be reached: numba.njit raises
instead of falling back), ``nogil`` and ``cache=True`` so the compile cost is paid once per
machine; the one kernel that writes memory Python objects are made of holds the GIL instead
(:func:`jit_with_gil`). No ``fastmath``: results must agree with the spec to 1e-9 and NaN ordering matters.
``NUMBA_DISABLE_JIT=1`` runs the same functions as plain Python (the test suite uses it).

Compile cost (a cold ``cupel-np demo`` is almost all compilation) grows with every distinct
specialization, and Numba specializes on more than the dtype:

* an int32 and an int64 array, a read-only (Arrow-backed or cached) and a writable array, a
  C-contiguous and a strided one are different types: each compiles the kernel again. Public
  wrappers pass kernel inputs through :func:`as_input` (one dtype, C order, read-only view;
  zero-copy when the array is already right) so a kernel sees one type per argument.
* a constant passed from one kernel to another (``f(x, 0)``, and even a variable that starts
  as ``k = 0`` while type inference is still iterating) is typed ``Literal[int](0)`` and would
  compile ``f`` a second time next to its ``int64`` version. :func:`jit` makes every project
  kernel type its arguments without literal values when called from another kernel, so a
  kernel compiles once per argument *type*.
* NumPy functions inside kernels compile their own implementations: ``np.partition`` pulls
  in ``np.unique``, ``np.sort`` and a quicksort (seconds, cold), and every dtype and ``kind``
  of ``np.argsort``/``np.sort`` is another one. Kernels sort with
  :func:`cupel_np.engine.sortkeys.stable_argsort` (uint64 keys: ``desc_bits``, ``int_keys``) or ``radix_argsort``, never a NumPy sort; a short written-out loop is often
  both cheaper to compile and faster.
* Every kernel is compiled without Numba's C-ABI (cfunc) wrapper (``JIT_OPTIONS``): only
  the CPython wrapper and the native function are ever called. A kernel that only other
  kernels call is declared with :func:`jit_inner`, which drops the CPython wrapper too (its
  argument unboxing is lowered and optimized per argument: ~0.1 s of a cold compile for a
  15-argument kernel); calling one from Python raises :class:`TypeError`.
* Slice assignment from an array (``a[i:j] = b``) compiles a shape-mismatch error path that
  formats its message with Numba's string implementation (over a second, once per process):
  kernels copy ranges with an element loop instead.

:func:`specializations` lists what has been compiled in this process (the cold-start
benchmark prints it) so a duplicate shows up as a kernel with two signatures.
"""

from __future__ import annotations

import numba
import numpy as np
from numba.core import types as nbtypes

#: ``no_cfunc_wrapper``: Numba otherwise also lowers, optimizes and emits a C-ABI wrapper of
#: every kernel (for ``dispatcher.cfunc``/ctypes use, which nothing here makes); Python calls
#: go through the CPython wrapper and kernel-to-kernel calls through the native function, so
#: dropping it changes nothing but compile time (a cold ``cupel-np demo``: about 1.4 s CPU
#: less of ~20 s; no effect on a kernel's code or on cached kernels' load time)
JIT_OPTIONS = {"nogil": True, "cache": True, "fastmath": False, "no_cfunc_wrapper": True}

#: every dispatcher made by :func:`jit`, in definition order
KERNELS: list = []


def jit(fn):
    """Decorate a kernel: nopython, nogil, cached, no fastmath."""
    d = numba.njit(**JIT_OPTIONS)(fn)
    if hasattr(d, "get_call_template"):  # absent under NUMBA_DISABLE_JIT=1
        _type_calls_without_literals(d)
    KERNELS.append(d)
    return d


def jit_with_gil(fn):
    """:func:`jit` holding the GIL while it runs (``nogil`` off): for a kernel that writes
    memory Python objects are made of (``model.object_take``: a list's item pointers), which no
    other thread, and no collection in one, may see half written."""
    d = numba.njit(**{**JIT_OPTIONS, "nogil": False})(fn)
    if hasattr(d, "get_call_template"):  # absent under NUMBA_DISABLE_JIT=1
        _type_calls_without_literals(d)
    KERNELS.append(d)
    return d


def jit_inner(fn):
    """Decorate a kernel that only other kernels call, never Python code: :func:`jit`
    without Numba's CPython wrapper (the code that unboxes Python arguments, builds the
    result object and is lowered, optimized and emitted in every compile). Calling it from
    Python raises :class:`TypeError` (Numba would jump through the missing wrapper and
    crash); under ``NUMBA_DISABLE_JIT=1`` it is the plain Python function like every kernel.
    A test that calls one directly goes through a jitted trampoline."""
    d = numba.njit(**JIT_OPTIONS, no_cpython_wrapper=True)(fn)
    if hasattr(d, "get_call_template"):  # absent under NUMBA_DISABLE_JIT=1
        _type_calls_without_literals(d)
        d.__class__ = _inner_class(type(d))
    KERNELS.append(d)
    return d


_INNER_CLASSES: dict = {}


def _inner_class(cls):
    """``cls`` (Numba's dispatcher class) with a ``__call__`` that refuses Python calls; a
    kernel's calls to it are typed and lowered by Numba and never go through ``__call__``."""
    if cls not in _INNER_CLASSES:

        def __call__(self, *args, **kwargs):
            raise TypeError(
                f"{self.py_func.__module__}.{self.py_func.__qualname__} is compiled without a CPython "
                "wrapper (_jit.jit_inner): only other kernels may call it"
            )

        _INNER_CLASSES[cls] = type(f"Inner{cls.__name__}", (cls,), {"__call__": __call__, "__module__": __name__})
    return _INNER_CLASSES[cls]


def _type_calls_without_literals(d) -> None:
    """When another kernel calls ``d``, Numba asks ``d.get_call_template(arg_types, ...)`` and
    compiles ``d`` for exactly those types, literal constants included. Strip the literal
    values first (``Literal[int](0)`` -> ``int64``): one specialization serves every call."""
    resolve = d.get_call_template

    def get_call_template(args, kws):
        return resolve(tuple(nbtypes.unliteral(a) for a in args), {k: nbtypes.unliteral(v) for k, v in kws.items()})

    d.get_call_template = get_call_template


def filled(shape, value, dtype) -> np.ndarray:
    """``np.full(shape, value, dtype)`` without its Python wrapper (``empty`` and ``fill``: ~0.35
    against ~0.75 us; a single selection makes several)."""
    a = np.empty(shape, dtype=dtype)
    a.fill(value)
    return a


def as_input(a, dtype) -> np.ndarray:
    """``a`` as a C-contiguous array of ``dtype``, returned as a read-only view, for a kernel
    argument the kernel only reads. Zero-copy when ``a`` already has that dtype and layout
    (read-only or not), so every caller hands the kernel the same Numba type."""
    a = np.ascontiguousarray(a, dtype=dtype)
    if a.flags.writeable:
        a = a.view()
        a.setflags(write=False)
    return a


def specializations() -> dict[str, list[str]]:
    """``module.function -> [signature, ...]`` for every project kernel compiled (or loaded
    from the cache) in this process."""
    out = {}
    for d in KERNELS:
        sigs = [str(s) for s in getattr(d, "signatures", ())]
        if sigs:
            out[f"{d.py_func.__module__}.{d.py_func.__qualname__}"] = sigs
    return out
