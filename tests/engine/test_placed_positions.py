"""The included rows' placed positions are compacted three ways by table size (``batch._record``:
a masked gather, NumPy's ``compress``, the ``included_positions`` kernel): the same sweep
through each gives the same positions."""

import numpy as np
import pytest

import cupel_np as c
from cupel_np.cli.warmup import demo_grid
from cupel_np.data import sample_path
from cupel_np.engine import batch


@pytest.fixture(scope="module")
def table():
    return c.ItemTable.from_parquet(sample_path(), set_column="session_id")


def _positions(table):
    r = c.sweep(table, None, demo_grid(), on_error="collect", threads=1)
    return r.included.copy(), r.positions.copy()


def test_every_compaction_gives_the_same_positions(table, monkeypatch):
    assert batch._COMPRESS_MIN <= table.n < batch._COMPACT_MIN  # the sample takes ``compress``
    inc, pos = _positions(table)
    assert inc.any()
    monkeypatch.setattr(batch, "_COMPACT_MIN", 0)  # the kernel
    k_inc, k_pos = _positions(table)
    monkeypatch.setattr(batch, "_COMPACT_MIN", 10**9)
    monkeypatch.setattr(batch, "_COMPRESS_MIN", 10**9)  # the masked gather
    m_inc, m_pos = _positions(table)
    for other_inc, other_pos in ((k_inc, k_pos), (m_inc, m_pos)):
        assert np.array_equal(inc, other_inc)
        assert np.array_equal(pos[inc], other_pos[other_inc])
