"""The shared timestamp order's per-row codes and runs (``placers.timestamp_ranks``) are built
only where a set may be placed on bitmaps (more than ``SMALL_PLACE`` items): a sweep of small
sets does not compile them, and places the same."""

import numpy as np

from cupel_np.data import sample_path
from cupel_np.engine import placers, stages, sweep_shared
from cupel_np.model.items import ItemTable


def _order_args(rng, sizes):
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    n = int(offsets[-1])
    ts = rng.integers(0, 50, n).astype(np.int64)  # many equal timestamps: runs to find
    valid = rng.random(n) < 0.8
    return ts, valid, offsets


def test_order_without_ranks_is_the_same_order():
    rng = np.random.default_rng(3)
    ts, valid, offsets = _order_args(rng, rng.integers(0, 40, 50))
    full = placers.timestamp_order(ts, valid, offsets)
    bare = placers.timestamp_order(ts, valid, offsets, ranks=False)
    for a, b in zip(full[:3], bare[:3], strict=True):
        assert np.array_equal(a, b)
    assert bare[3:] == (None, None, None)
    assert all(isinstance(a, np.ndarray) for a in full[3:])


def test_sweep_of_small_sets_builds_no_ranks():
    """The sample's sets (at most ``SMALL_PLACE`` items): the order for recency, no ranks;
    the same sets as one long set: the ranks too."""
    table = ItemTable.from_parquet(sample_path(), set_column="session_id")
    assert int(np.diff(table.offsets).max()) <= stages.SMALL_PLACE
    rows = np.arange(table.n, dtype=np.int64)
    ts, _ = sweep_shared._timestamps(table, rows, False, need_order=True)
    assert ts is not None and ts.code is None and ts.runs is None and ts.run_offsets is None
    one = ItemTable.from_parquet(sample_path())
    ts, _ = sweep_shared._timestamps(one, rows, False, need_order=True)
    assert ts is not None and ts.code is not None and ts.runs is not None
