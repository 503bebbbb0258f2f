"""Streamed chunks (``model/chunks.py``): whole item sets, at most the computed row count, read
in batches within row groups (issue 27.8: a file written with pyarrow's default 1,048,576-row
groups was swept a whole row group at a time whatever ``--memory-limit`` said). The peak RSS of
such a run is measured in ``benchmarks/test_memory.py``."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cupel_np.model.chunks import READ_BATCH_ROWS, dataset_batches, whole_set_chunks
from cupel_np.model.datasets import (
    CHUNK_FIXED_BYTES,
    chunk_rows_for,
    estimate_in_memory_peak,
    open_dataset,
    set_runs,
    uncompressed_bytes,
)

MI = 2**20


def _groups(d) -> int:
    return sum(f.metadata.num_row_groups for f in d.get_fragments())


def _check_whole_sets(chunks: list[pa.Table], keys: np.ndarray, chunk_rows: int) -> None:
    """The chunks are the input in order, no set is cut, and a chunk over ``chunk_rows`` rows
    is one set."""
    got = np.concatenate([c.column("s").to_numpy() for c in chunks])
    assert np.array_equal(got, keys)
    seen: set = set()
    for c in chunks:
        ks = np.unique(c.column("s").to_numpy())
        assert not seen & set(ks.tolist()), "a set was cut between two chunks"
        seen |= set(ks.tolist())
        assert c.num_rows <= chunk_rows or len(ks) == 1, (c.num_rows, chunk_rows)


@pytest.fixture(scope="module")
def big_groups(tmp_path_factory):
    """1.1M rows in sets of 50 with pyarrow's default row groups (1,048,576 rows and the rest),
    short contents: ~1 MiB on disk."""
    n = 1_100_000
    r = np.arange(n)
    t = pa.table(
        {
            "s": (r // 50).astype(np.int32),
            "content": pa.array(["x"] * 4, pa.string()).take(pa.array(r % 4)),
            "tokens": np.ones(n, dtype=np.int32),
        }
    )
    path = tmp_path_factory.mktemp("big") / "items.parquet"
    pq.write_table(t, path, compression="zstd")
    assert pq.read_metadata(path).row_group(0).num_rows == 1_048_576
    return path, (r // 50).astype(np.int32)


@pytest.mark.parametrize("limit_mib", [300, 1024])
def test_chunks_of_a_file_with_million_row_groups_stay_within_the_limit(big_groups, limit_mib):
    path, keys = big_groups
    d = open_dataset(path)
    limit = limit_mib * MI
    rows = chunk_rows_for(d, limit, n_variants=4)
    assert 1 < rows < 1_048_576  # the memory limit, not the row group, sizes a chunk
    chunks = [c for c, _ in whole_set_chunks(d, "s", rows, _groups(d))]
    assert len(chunks) > 1
    _check_whole_sets(chunks, keys, rows)
    # every chunk (its sweep, and the raw batch read past it) is estimated to fit the limit
    raw = uncompressed_bytes(d) / len(keys)
    biggest = max(c.num_rows for c in chunks)
    assert biggest <= rows
    assert CHUNK_FIXED_BYTES + estimate_in_memory_peak(d, biggest, n_variants=4) + biggest * raw <= limit


def test_batches_are_read_within_row_groups(big_groups):
    path, keys = big_groups
    d = open_dataset(path)
    sizes, ends = [], []
    for t, read in dataset_batches(d, READ_BATCH_ROWS):
        sizes.append(t.num_rows)
        ends.append(read)
    assert max(sizes) <= READ_BATCH_ROWS and sum(sizes) == len(keys) and ends[-1] == len(keys)
    run_keys, lengths = set_runs(d, "s")  # the set layout pass reads in batches too
    assert len(run_keys) == len(keys) // 50 and set(lengths.tolist()) == {50}


def test_progress_counts_row_groups_read(big_groups):
    path, _ = big_groups
    d = open_dataset(path)
    done = [g for _, g in whole_set_chunks(d, "s", 200_000, 2)]
    assert done == sorted(done) and done[0] == 0 and done[-1] == 2


@pytest.mark.parametrize("seed", range(6))
def test_sets_spanning_batches_stay_whole(tmp_path, seed):
    """Random set lengths, row groups, batch and chunk sizes: a set spanning batches and row
    groups is carried whole; a set longer than a chunk is a chunk of its own."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 40, 60)
    lengths[rng.integers(0, 60)] = 150  # one set longer than any chunk below
    keys = np.repeat(np.arange(len(lengths)), lengths).astype(np.int64)
    t = pa.table({"s": keys, "content": pa.array([str(k) for k in keys]), "tokens": np.ones(len(keys), np.int64)})
    path = tmp_path / "a.parquet"
    pq.write_table(t, path, row_group_size=int(rng.integers(5, 200)))
    d = open_dataset(path)
    chunk_rows = int(rng.integers(1, 120))
    batch_rows = int(rng.integers(1, 60))
    chunks = [c for c, _ in whole_set_chunks(d, "s", chunk_rows, _groups(d), batch_rows=batch_rows)]
    _check_whole_sets(chunks, keys, chunk_rows)
    assert pa.concat_tables(chunks).equals(t.cast(d.schema))


def test_batches_fill_missing_columns_and_partition_values(tmp_path):
    """A directory of hive partitions whose files differ in columns: every batch in the
    dataset schema, in input order."""
    for part, extra in (("a", True), ("b", False)):
        p = tmp_path / f"src={part}"
        p.mkdir()
        cols = {"s": np.repeat(np.arange(10), 5), "content": ["c"] * 50, "tokens": np.arange(50)}
        if extra:
            cols["kind"] = ["Message"] * 50
        pq.write_table(pa.table(cols), p / "f.parquet", row_group_size=17)
    d = open_dataset(tmp_path)
    got = pa.concat_tables([t for t, _ in dataset_batches(d, 7)])
    assert got.equals(d.to_table())
    only = pa.concat_tables([t for t, _ in dataset_batches(d, 7, columns=["src"])])
    assert only.column("src").to_pylist() == ["a"] * 50 + ["b"] * 50
