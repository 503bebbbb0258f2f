"""duplicate_groups finds the same groups whether the ids seen twice come from NumPy's
bincount (small inputs) or the one-byte-count kernel ``seen_twice`` (large ones)."""

import numpy as np
import pytest

from cupel_np.engine import batch_kernels as bk


def _groups(content_id, offsets, kernel_from):
    saved = bk.SEEN_TWICE_MIN
    bk.SEEN_TWICE_MIN = kernel_from
    try:
        return bk.duplicate_groups(content_id, offsets)
    finally:
        bk.SEEN_TWICE_MIN = saved


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_kernel_and_numpy_paths_agree(seed):
    rng = np.random.default_rng(seed)
    n = 3000
    cases = [
        rng.integers(0, n // 4, n),  # many repeats, groups of every size
        np.arange(n)[rng.permutation(n)],  # distinct: no group at all
        np.where(rng.random(n) < 0.02, 7, np.arange(n) + 8),  # one id repeated, the rest distinct
        np.full(n, 5),  # one id everywhere
    ]
    offsets = np.array([0, 1, 1000, 1001, 2500, n], dtype=np.int64)  # groups never cross a segment
    for cid in cases:
        cid = cid.astype(np.int64)
        want = _groups(cid, offsets, 10**12)
        got = _groups(cid, offsets, 2)
        assert got[0].dtype == want[0].dtype and got[1].dtype == want[1].dtype
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


def test_seen_twice_positions():
    cid = np.array([4, 1, 4, 0, 2, 1, 4, 3], dtype=np.int64)
    assert bk.seen_twice(cid, 5).tolist() == [0, 1, 2, 5, 6]
    assert bk.seen_twice(np.array([2, 0, 1], dtype=np.int64), 3).tolist() == []
