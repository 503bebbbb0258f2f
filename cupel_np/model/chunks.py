"""Streamed chunks of whole item sets, read from a ``pyarrow.dataset`` in input order: the
chunks ``io.sweep_parquet`` and ``cupel-np check`` sweep one at a time.

The rows are read in batches of at most ``READ_BATCH_ROWS`` rows (and never more than a chunk),
within a row group too, through ``pyarrow.parquet.ParquetFile.iter_batches``: a file written
with pyarrow's defaults has row groups of 1,048,576 rows, and reading whole row groups made a
chunk a whole row group whatever the memory limit. (``Fragment.to_batches`` decodes a whole
row group before it slices it into batches; ``iter_batches`` does not.)
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

__all__ = ["READ_BATCH_ROWS", "dataset_batches", "whole_set_chunks"]

#: the most rows read at once by a streamed run (a batch; a smaller chunk reads batches of its
#: own size): 65,536 rows of the benchmark corpus are ~3 MiB of Arrow data
READ_BATCH_ROWS = 65_536


def dataset_batches(
    d: ds.FileSystemDataset, batch_rows: int, columns: list[str] | None = None
) -> Iterator[tuple[pa.Table, int]]:
    """Every row of ``d`` in input order (its files in order, row groups in file order), as
    tables of at most ``batch_rows`` rows in the dataset schema (only ``columns`` when given):
    a column a file lacks is null there, a hive partition column holds the file's value. Yields
    ``(table, rows read so far)``."""
    schema = d.schema if columns is None else pa.schema([d.schema.field(c) for c in columns])
    read = 0
    for frag in d.get_fragments():
        keys = ds.get_partition_keys(frag.partition_expression)
        with frag.filesystem.open_input_file(frag.path) as f:
            pf = pq.ParquetFile(f)
            present = [n for n in schema.names if n in set(pf.schema_arrow.names)]
            if present:
                batches = (pa.Table.from_batches([b]) for b in pf.iter_batches(batch_size=batch_rows, columns=present))
            else:  # no column of the file is read: rows of nulls / partition values only
                n = pf.metadata.num_rows
                batches = (pa.table({"_": pa.nulls(min(batch_rows, n - lo))}) for lo in range(0, n, batch_rows))
            for t in batches:
                read += t.num_rows
                yield conform(t, schema, keys), read


def conform(t: pa.Table, schema: pa.Schema, keys: dict) -> pa.Table:
    """``t`` (columns of one file) in ``schema``: cast, partition values filled, nulls elsewhere."""
    cols = []
    names = set(t.column_names)
    for f in schema:
        if f.name in names:
            cols.append(t.column(f.name).cast(f.type))
        elif f.name in keys:
            cols.append(pa.array([keys[f.name]] * t.num_rows).cast(f.type))
        else:
            cols.append(pa.nulls(t.num_rows, f.type))
    return pa.Table.from_arrays(cols, schema=schema)


def _last_other(parts: list[pa.Table], set_column: str) -> tuple[int, int] | None:
    """Where the trailing set of ``parts`` (tables in order) starts: (part, row), or None when
    every row holds the last row's set."""
    last = parts[-1].column(set_column)[-1]
    for i in range(len(parts) - 1, -1, -1):
        other = _differs(parts[i].column(set_column), last)
        if other.size:
            return i, int(other[-1]) + 1
    return None


def _differs(keys: pa.ChunkedArray, key: pa.Scalar) -> np.ndarray:
    """Rows whose key is not ``key`` (a null key differs from every key, itself included)."""
    ne = pc.not_equal(keys, key) if key.is_valid else pc.is_valid(keys)
    return np.flatnonzero(pc.fill_null(ne, True).to_numpy(zero_copy_only=False))


def whole_set_chunks(
    d: ds.FileSystemDataset, set_column: str, chunk_rows: int, n_groups: int, *, batch_rows: int | None = None
) -> Iterator[tuple[pa.Table, int]]:
    """Chunks of whole item sets in input order, each at most ``chunk_rows`` rows; a set longer
    than that is a chunk of its own. Read in batches of at most ``batch_rows`` rows (default
    ``min(READ_BATCH_ROWS, chunk_rows)``) within row groups too, so at most one chunk and one
    batch are held; the trailing set of a full chunk (which may continue in the next batch) is
    carried into the next chunk. Yields ``(chunk, row groups read completely so far)`` of the
    ``n_groups`` row groups."""
    if n_groups == 0:  # an empty dataset still gets (empty) outputs
        yield d.to_table(), 0
        return
    chunk_rows = max(int(chunk_rows), 1)
    batch_rows = min(READ_BATCH_ROWS, chunk_rows) if batch_rows is None else max(int(batch_rows), 1)
    ends = np.cumsum(
        [f.metadata.row_group(g).num_rows for f in d.get_fragments() for g in range(f.metadata.num_row_groups)]
    )
    buf: list[pa.Table] = []  # the chunk being filled
    held = 0
    done = 0
    yielded = False
    long_set = False  # buf is one set longer than a chunk, read on to its end
    for t, read in dataset_batches(d, batch_rows):
        done = int(np.searchsorted(ends, read, side="right"))
        while t.num_rows:
            if held < chunk_rows:  # fill the chunk up to chunk_rows
                take = min(chunk_rows - held, t.num_rows)
                buf.append(t.slice(0, take))
                t, held = t.slice(take), held + take
                continue
            cut = None if long_set else _last_other(buf, set_column)
            if cut is not None:  # full: emit up to the trailing set, carry that set on
                i, r = cut
                head = [*buf[:i], buf[i].slice(0, r)]
                buf = [buf[i].slice(r), *buf[i + 1 :]]
                held = sum(p.num_rows for p in buf)
                yield pa.concat_tables(head), done
                yielded = True
                continue
            # one set longer than a chunk: read on to its end, then it is a chunk of its own
            long_set = True
            other = _differs(t.column(set_column), buf[-1].column(set_column)[-1])
            j = int(other[0]) if other.size else t.num_rows
            buf.append(t.slice(0, j))
            t = t.slice(j)
            if t.num_rows:
                yield pa.concat_tables(buf), done
                yielded = True
                buf, held, long_set = [], 0, False
    if buf or not yielded:
        yield (pa.concat_tables(buf) if buf else d.schema.empty_table()), len(ends)
