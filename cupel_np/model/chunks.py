"""Streamed chunks of whole item sets, read from a ``pyarrow.dataset`` in input order: the
chunks ``io.sweep_parquet`` and ``cupel-np check`` sweep one at a time."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

__all__ = ["whole_set_chunks"]


def _row_groups(d: ds.FileSystemDataset):
    """Every row group of the dataset in input order, as tables in the dataset schema."""
    for frag in d.get_fragments():
        for rg in frag.split_by_row_group():
            yield rg.to_table(schema=d.schema)


def whole_set_chunks(d, set_column: str, chunk_rows: int, n_groups: int):
    """Whole row groups, at least ``chunk_rows`` rows; the trailing set of a chunk (which may
    continue in the next row group) is carried into the next chunk."""
    if n_groups == 0:  # an empty dataset still gets (empty) outputs
        yield d.to_table(), 0
        return
    carry = None
    for g, t in enumerate(_row_groups(d)):
        buf = t if carry is None else pa.concat_tables([carry, t])
        carry = None
        if g == n_groups - 1:
            yield buf, g + 1
            return
        if buf.num_rows < chunk_rows:
            carry = buf
            continue
        keys = buf.column(set_column)
        other = np.flatnonzero(pc.not_equal(keys, keys[-1]).to_numpy(zero_copy_only=False))
        if other.size == 0:  # one set so far: keep reading
            carry = buf
            continue
        cut = int(other[-1]) + 1
        yield buf.slice(0, cut), g + 1
        carry = buf.slice(cut)
