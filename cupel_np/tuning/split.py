"""The search / held-out split of item sets: a stable hash of the set key, the same in every
process and on every machine (used by the in-process search and by its Dask tasks)."""

from __future__ import annotations

import hashlib

import numpy as np

from cupel_np.errors import InvalidConfigError

__all__ = ["heldout_sets"]


def heldout_sets(set_keys, holdout: float) -> np.ndarray:
    """Which sets are held out: the first 8 bytes of ``blake2b(str(key))`` read as an unsigned
    big-endian integer, divided by 2**64, below ``holdout``. Stable across processes, runs and
    machines (Python's ``hash()`` is salted per process)."""
    if not 0 <= holdout < 1:
        raise InvalidConfigError(f"holdout must be in [0, 1), got {holdout!r}")
    u = np.array(
        [int.from_bytes(hashlib.blake2b(str(k).encode("utf-8"), digest_size=8).digest(), "big") for k in set_keys],
        dtype=np.float64,
    )
    return u / 2.0**64 < holdout
