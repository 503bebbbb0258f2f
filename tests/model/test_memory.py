"""Resident bytes per input row of an ItemTable: measured (every NumPy array and Arrow buffer
the table holds, each buffer once), so the layout cannot silently grow back."""

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from cupel_np import ItemTable
from cupel_np.data import sample_path
from cupel_np.model.datasets import (
    CHUNK_FIXED_BYTES,
    PER_VARIANT_BYTES,
    chunk_rows_for,
    estimate_in_memory_peak,
    open_dataset,
)

#: the issue's target for the sample schema with ~40-character contents
TARGET_BYTES_PER_ROW = 150


def _sample_40(reps: int = 4) -> pa.Table:
    """The sample corpus (every column of the items schema, tags and metadata included),
    repeated, with unique contents of exactly 40 characters."""
    t = pq.read_table(sample_path())
    t = pa.concat_tables([t] * reps)
    rows = pa.array(np.arange(t.num_rows)).cast(pa.string())
    c = pc.binary_join_element_wise(rows, t.column("content").combine_chunks(), " ")
    c = pc.utf8_rpad(pc.utf8_slice_codeunits(c, 0, 40), 40, ".")
    return t.set_column(t.schema.get_field_index("content"), "content", c)


def test_item_table_bytes_per_row_on_the_sample_schema():
    t = _sample_40()
    assert set(pc.unique(pc.utf8_length(t.column("content"))).to_pylist()) == {40}
    it = ItemTable.from_arrow(t, set_column="session_id")
    per_row = sum(it.resident_bytes().values()) / it.n
    assert per_row <= TARGET_BYTES_PER_ROW, (per_row, it.resident_bytes())
    # the content alone is 44 bytes a row (40 + the offset): the measure is not vacuous
    assert per_row > 44


def test_resident_bytes_counts_shared_buffers_once_and_lazy_columns_when_decoded():
    it = ItemTable.from_arrow(_sample_40(1), set_column="session_id")
    before = sum(it.resident_bytes().values())
    # tokens: one buffer, seen by NumPy and by the table
    assert it.table.column("tokens").chunk(0).buffers()[1].address == it.tokens.__array_interface__["data"][0]
    assert "tokens" not in {k for k, v in it.resident_bytes().items() if v}  # counted with the table
    _ = it.timestamp, it.tag_offsets  # decoded on first use
    after = sum(it.resident_bytes().values())
    assert after - before >= 8 * it.n + 8 * it.n  # int64 timestamps and tag offsets now held


def test_dictionary_held_columns_read_back_as_given():
    t = _sample_40(1)
    it = ItemTable.from_arrow(t, set_column="session_id")
    order = pa.array(it.input_row)
    for name in ("kind", "source", "tags", "metadata"):
        assert getattr(it, name).equals(t.column(name).combine_chunks().take(order)), name
    r = int(np.flatnonzero(it.input_row == 17)[0])
    row = it.row(r)
    src = t.slice(17, 1).to_pylist()[0]
    assert (row.kind, row.source, list(row.tags), dict(row.metadata)) == (
        src["kind"],
        src["source"],
        src["tags"],
        dict(src["metadata"]),
    )
    sub = it.subset(src["session_id"])
    assert sub.kind.to_pylist() == [
        x for x, s in zip(t.column("kind").to_pylist(), t.column("session_id").to_pylist()) if s == src["session_id"]
    ]


def test_the_in_memory_estimate_scales_with_rows(tmp_path):
    t = _sample_40(1)
    pq.write_table(t, tmp_path / "a.parquet")
    d = open_dataset(tmp_path / "a.parquet")
    whole = estimate_in_memory_peak(d)
    assert whole > 0 and estimate_in_memory_peak(d, t.num_rows // 2) == pytest.approx(whole / 2, rel=0.01)


def test_the_in_memory_estimate_grows_with_the_variants_and_chunks_shrink(tmp_path):
    t = _sample_40(1)
    pq.write_table(t, tmp_path / "a.parquet", row_group_size=10)
    d = open_dataset(tmp_path / "a.parquet")
    peaks = [estimate_in_memory_peak(d, n_variants=v) for v in (0, 4, 16, 64)]
    assert peaks == sorted(peaks) and len(set(peaks)) == 4
    # the same bytes for each further variant and row
    assert peaks[3] - peaks[2] == pytest.approx(4 * (peaks[2] - peaks[1]), rel=1e-6)  # 48 vs 12 more variants
    assert peaks[3] - peaks[1] == pytest.approx(60 * t.num_rows * PER_VARIANT_BYTES, rel=1e-6)
    limit = CHUNK_FIXED_BYTES + peaks[0] // 10  # a chunk holds a fraction of the rows whatever the variant count
    rows = [chunk_rows_for(d, limit, n_variants=v) for v in (0, 4, 16, 64)]
    assert rows == sorted(rows, reverse=True) and len(set(rows)) == 4
    # a chunk is whole sets of at most that many rows (read within row groups)
    for r, v in zip(rows, (0, 4, 16, 64)):
        assert CHUNK_FIXED_BYTES + estimate_in_memory_peak(d, r, n_variants=v) <= limit
