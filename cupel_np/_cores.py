"""The cores this process may use: one place for the engine's thread pool
(``engine.parallel``) and the command line's start-up (``cli.early``, which must not import the
engine); and what the CPU is, where NumPy's sort is slow on it (``engine.sortkeys.sort_keys``,
``model.item_rows``). Standard library only (NumPy's CPU features are read when asked)."""

from __future__ import annotations

import os


def available_cores() -> int:
    """The cores this process may use (its CPU affinity; the machine's count where there is none)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


#: ``CUPEL_NP_SORT``: ``numpy`` (NumPy's sort always), ``radix`` (``engine.sortkeys.radix_sort`` for
#: every big sort) or ``auto`` (the default: :func:`simd_sort_is_slow` decides)
SORT_ENV = "CUPEL_NP_SORT"
_SORT_CHOICE: list[bool] = []  # [whether big sorts go to radix_sort], once decided


def simd_sort_is_slow(features: dict, vendor: str, family: int | None) -> bool:
    """Whether NumPy's quicksort is its AVX-512 one (x86-simd-sort, dispatched where NumPy found
    ``X86_V4``, ``AVX512_SKX`` before NumPy 2.3) on an AMD family 19h CPU (Zen 4, the one AMD
    family with AVX-512 before Zen 5): that sort's partition step stores with the memory form of
    VPCOMPRESSQ, which Zen 4 runs as microcode (AMD's optimization guide for Zen 4 says to avoid
    it). Measured on a Zen 4 (EPYC, family 25 model 17): 800,000 uint64 keys sort in ~40 ms
    there against ~8-11 ms with NumPy's AVX2 sort (``NPY_DISABLE_CPU_FEATURES=X86_V4``) and
    ~10-15 ms by ``engine.sortkeys.radix_sort`` (docs/performance.md)."""
    avx512 = bool(features.get("X86_V4") or features.get("AVX512_SKX"))
    return avx512 and vendor == "AuthenticAMD" and family == 0x19


def cpu_of(text: str) -> tuple[str, int | None]:
    """A CPU's vendor id and family from ``/proc/cpuinfo`` (``vendor_id : AuthenticAMD``,
    ``cpu family : 25``) or ``platform.processor()`` on Windows ("AMD64 Family 25 Model 17
    Stepping 1, AuthenticAMD"); ``("", None)`` where the text says neither."""
    import re

    vendor = re.search(r"\b(AuthenticAMD|GenuineIntel)\b", text)
    family = re.search(r"(?:cpu family\s*:\s*|Family )(\d+)", text)
    return (vendor.group(1) if vendor else ""), (int(family.group(1)) if family else None)


def _this_cpu() -> tuple[str, int | None]:
    """:func:`cpu_of` this machine (the first CPU of ``/proc/cpuinfo``, else ``platform.processor()``)."""
    import platform

    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            return cpu_of(f.read(4096))
    except OSError:
        return cpu_of(platform.processor() or "")


def numpy_cpu_features() -> dict:
    """The CPU features NumPy found and dispatches on (name -> bool)."""
    import importlib

    try:
        umath = importlib.import_module("numpy._core._multiarray_umath")
    except ImportError:  # (NumPy 1.x)
        umath = importlib.import_module("numpy.core._multiarray_umath")
    return dict(umath.__cpu_features__)


def radix_sort_chosen() -> bool:
    """Whether big sorts of packed keys go to ``engine.sortkeys.radix_sort`` (decided once: ``CUPEL_NP_SORT``, else :func:`simd_sort_is_slow` of this CPU)."""
    if not _SORT_CHOICE:
        choice = os.environ.get(SORT_ENV, "auto").strip().lower() or "auto"
        if choice not in ("auto", "numpy", "radix"):
            from cupel_np.errors import InvalidConfigError

            raise InvalidConfigError(f"{SORT_ENV} must be auto, numpy or radix, got {choice!r}")
        if choice == "auto":
            _SORT_CHOICE.append(simd_sort_is_slow(numpy_cpu_features(), *_this_cpu()))
        else:
            _SORT_CHOICE.append(choice == "radix")
    return _SORT_CHOICE[0]
