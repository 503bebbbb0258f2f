"""The cores this process may use: one place for the engine's thread pool
(``engine.parallel``) and the command line's start-up (``cli.early``, which must not import the
engine). Standard library only."""

from __future__ import annotations

import os


def available_cores() -> int:
    """The cores this process may use (its CPU affinity; the machine's count where there is none)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)
