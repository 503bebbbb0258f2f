"""glibc's malloc thresholds, set once before the first sweep over a big set (standard library only).

glibc serves a block above its mmap threshold (128 KiB at start) with fresh pages from the
kernel, each faulted in on first touch and returned at ``free``; freeing such a block raises the
threshold to that block's size (at most 32 MiB on 64-bit) and the trim threshold to twice that,
so later blocks of that size are reused from the heap without faults. A sweep's per-variant
arrays (1-16 MiB on a 1M-row set) therefore cost page faults or not depending on which blocks
the process happened to free before: the same 1M x 16 count-quota cell measured 0.44 or 0.54 of
its floor with the same code, by the cells run before it (docs/performance.md). Setting both
thresholds to the values glibc's own rule ends at (32 MiB and 64 MiB) makes a sweep's cost
independent of that history. Nothing is done where the process is not on glibc (musl, macOS,
Windows), where ``CUPEL_NP_MALLOC_TUNE=0``, or where the user set malloc's thresholds through
``GLIBC_TUNABLES`` or ``MALLOC_MMAP_THRESHOLD_`` / ``MALLOC_TRIM_THRESHOLD_``."""

from __future__ import annotations

import os
import threading

#: glibc's largest dynamic mmap threshold on 64-bit (``DEFAULT_MMAP_THRESHOLD_MAX``)
MMAP_THRESHOLD = 32 << 20
#: the trim threshold glibc's dynamic rule pairs with it (twice the mmap threshold)
TRIM_THRESHOLD = 2 * MMAP_THRESHOLD
#: the rows from which a sweep sets the thresholds (smaller sets allocate below 128 KiB per array)
BIG_ROWS = 65536

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's malloc.h parameter numbers
_state: list[bool] = []  # [whether the thresholds were set], once decided
_lock = threading.Lock()


def tune_once() -> bool:
    """Set the thresholds the first time (thread-safe); whether they were set."""
    if not _state:
        with _lock:
            if not _state:
                _state.append(_tune(os.environ))
    return _state[0]


def _tune(env) -> bool:
    if env.get("CUPEL_NP_MALLOC_TUNE", "1") == "0":
        return False
    if "glibc.malloc." in env.get("GLIBC_TUNABLES", "") or any(
        k in env for k in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")
    ):
        return False  # the user's own malloc settings
    import ctypes  # (here: most runs never sweep a big set, and the import costs milliseconds)

    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018 - glibc only: musl and others lack it
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):  # no C library by that name, or not glibc
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
