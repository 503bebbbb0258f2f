"""The plan of a Dask run (``cupel_np.dask``): a Parquet source or a Dask DataFrame as
partitions of whole item sets. Every row carries its input row number (``ROW``); the rows are
shuffled on the set key only when some set lies in more than one partition (``_spans``); a
task's frame is put back in input order and becomes its ``ItemTable`` (``partition_table``).
"""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa

from cupel_np.engine.scorers.custom import check_schema_columns, column_scorers
from cupel_np.errors import InvalidConfigError, InvalidInputTypeError
from cupel_np.model.datasets import RowSource

#: the column carrying each row's input row number through the shuffle
ROW = "__cupel_row__"


def require_dask() -> None:
    """Raise ``InvalidConfigError`` naming the missing package when Dask is not installed."""
    try:
        import dask  # noqa: F401
        import dask.dataframe  # noqa: F401
        import distributed  # noqa: F401
    except ImportError as e:  # pragma: no cover - the extra is part of [test]
        raise InvalidConfigError(
            f'cupel_np.dask needs Dask ({e.name} is not installed): pip install "cupel-np[dask]"'
        ) from None


def _read_piece_frame(piece, schema: pa.Schema, base: str | None, columns: list[str] | None = None):
    """One piece as a pandas frame of Arrow-backed columns (lossless for list and map
    columns), with its rows' input row numbers in ``__cupel_row__``."""
    import pandas as pd

    from cupel_np.model.datasets import read_piece

    t = read_piece(piece, schema, base)
    if columns is not None:
        t = t.select(columns)
    t = t.append_column(ROW, pa.array(np.arange(piece.first_row, piece.first_row + t.num_rows, dtype=np.int64)))
    return t.to_pandas(types_mapper=pd.ArrowDtype)


def _piece_keys(piece, schema: pa.Schema, base: str | None, set_column: str):
    """The distinct set keys of one piece (reads the set column only)."""
    from cupel_np.model.datasets import read_piece

    t = read_piece(piece, pa.schema([schema.field(set_column)]), base)
    return t.column(set_column).unique()


def _frame_stats(df, set_column: str):
    """(row count, distinct set keys) of one input partition."""
    keys = pa.Array.from_pandas(df[set_column]).unique() if len(df) else pa.array([])
    return len(df), keys


def _number_rows(df, first_row: int):
    df = df.copy()
    df[ROW] = np.arange(first_row, first_row + len(df), dtype=np.int64)
    return df


def partition_table(df, set_column: str, rows_from=None):
    """``(ItemTable, input rows)`` of one partition's frame: its rows put back in input order
    (so ties break inside every set as in process, whatever the shuffle did), the row numbers
    as an Arrow array. ``rows_from``: the Parquet source's ``RowSource``."""
    from cupel_np.model.items import ItemTable

    t = pa.Table.from_pandas(df, preserve_index=False)
    rows = t.column(ROW).combine_chunks()
    r = rows.to_numpy(zero_copy_only=False)
    if r.size > 1 and not (r[1:] > r[:-1]).all():  # original order inside every set
        order = np.argsort(r, kind="stable")
        t = t.take(pa.array(order))
        rows = pa.array(r[order])
    t = t.drop_columns([ROW])
    source = rows_from.taken(rows.to_numpy(zero_copy_only=False)) if rows_from is not None else None
    return ItemTable.from_arrow(t, set_column=set_column, source=source), rows


def _spans(key_arrays: list) -> bool:
    """True when some key occurs in more than one partition."""
    import pyarrow.compute as pc

    arrays = [a for a in key_arrays if len(a)]
    if len(arrays) < 2:
        return False
    allk = (
        pa.chunked_array(arrays, type=arrays[0].type)
        if len({a.type for a in arrays}) == 1
        else pa.chunked_array([a.cast(pa.string()) for a in arrays])
    )
    return len(pc.unique(allk)) < len(allk)


def _frame_of(source, set_column: str, npartitions: int | None, client):
    """(dask DataFrame with ROW, per-partition key arrays) for a path source or a dask DataFrame."""
    import dask.dataframe as dd
    import pandas as pd

    from cupel_np.model.datasets import partition_base, pieces

    if isinstance(source, dd.DataFrame):
        if set_column not in source.columns:
            raise InvalidConfigError(
                f"set column {set_column!r} not found (columns: {', '.join(map(str, source.columns))})"
            )
        if npartitions is not None and npartitions != source.npartitions:
            source = source.repartition(npartitions=npartitions)
        parts = source.to_delayed()
        stats = client.gather(client.compute([_delayed(_frame_stats)(p, set_column) for p in parts]))
        lengths = [n for n, _ in stats]
        keys = [k for _, k in stats]
        firsts = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)
        numbered = [_delayed(_number_rows)(p, int(f)) for p, f in zip(parts, firsts)]
        meta = source._meta.assign(**{ROW: pd.Series([], dtype=np.int64)})
        ddf = dd.from_delayed(numbered, meta=meta, verify_meta=False)
        return ddf, keys
    if isinstance(source, (str, os.PathLike, list, tuple)):
        ps, schema = pieces(source, npartitions)
        if set_column not in schema.names:
            raise InvalidConfigError(
                f"set column {set_column!r} not found in {source} (columns: {', '.join(schema.names)})"
            )
        base = partition_base(source)
        meta = schema.empty_table().append_column(ROW, pa.array([], pa.int64())).to_pandas(types_mapper=pd.ArrowDtype)
        ddf = dd.from_map(
            _read_piece_frame,
            ps,
            schema=schema,
            base=base,
            meta=meta,
            divisions=[None] * (len(ps) + 1),
            enforce_metadata=False,
        )
        keys = client.gather(client.map(_piece_keys, ps, schema=schema, base=base, set_column=set_column, pure=False))
        return ddf, keys
    raise InvalidInputTypeError(
        f"source must be a Parquet path, directory, list of files or a dask DataFrame, got {type(source).__name__}"
    )


def whole_set_partitions(source, set_column: str, client, *, npartitions: int | None = None, variants=(), columns=()):
    """``(delayed partitions, shuffled, rows_from)``: ``source``'s partitions, each holding
    whole item sets and its rows' input row numbers (shuffled on the set key only when some set
    lies in more than one), and the Parquet source's ``RowSource`` (None for a DataFrame). A
    column scorer's column of the variants ``vs`` must exist and be numeric: checked here, on
    the schema, before any task, as are the ``columns`` (e.g. a label column)."""
    require_dask()
    vs = list(variants)
    from cupel_np.io._workers import share_storage_options

    share_storage_options(client)  # before the first task reads a URL
    ddf, keys = _frame_of(source, set_column, npartitions, client)
    have = [str(c) for c in ddf.columns if c != ROW]
    for c in columns:
        if c not in have:
            raise InvalidConfigError(f"column {c!r} not found in the items (columns: {', '.join(have)})")
    wanted = column_scorers(v.policy.scorer for v in vs)
    if wanted:
        check_schema_columns(pa.Schema.from_pandas(ddf._meta, preserve_index=False), wanted, "the items")
    shuffled = _spans(keys)
    del keys
    if shuffled:
        ddf = ddf.shuffle(on=set_column, npartitions=ddf.npartitions, shuffle_method="tasks")
    rows_from = RowSource(source) if isinstance(source, (str, os.PathLike, list, tuple)) else None
    return ddf.to_delayed(), shuffled, rows_from


def _delayed(fn):
    import dask

    return dask.delayed(fn, pure=True)
