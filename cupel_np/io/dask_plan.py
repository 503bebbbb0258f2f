"""The plan of a Dask run (``cupel_np.dask``): a Parquet source or a Dask DataFrame as
partitions of whole item sets. Every row carries its input row number (``ROW``); the rows are
shuffled on the set key only when some set lies in more than one partition (``_spans``); a
task's frame is put back in input order and becomes its ``ItemTable`` (``partition_table``).
"""

from __future__ import annotations

import os
from collections.abc import Callable

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


def _frame_of(source, set_column: str, npartitions: int | None, client, check=None):
    """(dask DataFrame with ROW, per-partition key arrays) for a path source or a dask DataFrame.
    ``check(schema or None, names, where)`` runs on the driver once the columns are known, before
    any task (a DataFrame's Arrow schema is not known exactly: None)."""
    import dask.dataframe as dd
    import pandas as pd

    from cupel_np.model.datasets import describe_source, partition_base, pieces

    if isinstance(source, dd.DataFrame):
        if set_column not in source.columns:
            raise InvalidConfigError(
                f"set column {set_column!r} not found (columns: {', '.join(map(str, source.columns))})"
            )
        if check is not None:
            check(None, [str(c) for c in source.columns], "the dask DataFrame")
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
        if check is not None:
            check(schema, list(schema.names), describe_source(source))
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


def _group_type_ok(t: pa.DataType) -> bool:
    """A type ``groups`` reads (``engine.groups.group_values``): strings, integers or null,
    possibly dictionary-encoded."""
    if pa.types.is_dictionary(t):
        t = t.value_type
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_integer(t) or pa.types.is_null(t)


def _check_columns(vs: list, columns) -> Callable[[pa.Schema | None, list[str], str], None]:
    """The driver's check of the columns the run reads by name (see ``_frame_of``): every
    ``columns`` entry (e.g. a label column) and every variant's ``groups`` column must exist;
    a group column must hold strings or integers. The error names the column, the variant and
    the source, before any task runs."""

    def check(schema: pa.Schema | None, names: list[str], where: str) -> None:
        have = [n for n in names if n != ROW]
        for c in columns:
            if c not in have:
                raise InvalidConfigError(f"column {c!r} not found in the items (columns: {', '.join(have)})")
        for v in vs:
            col = v.policy.groups
            if col is None:
                continue
            if col not in have:
                raise InvalidConfigError(
                    f"groups: variant {v.label!r} groups by column {col!r}, which {where} does not have "
                    f"(columns: {', '.join(have)}); the importers write 'tool_group'"
                )
            if schema is not None and not _group_type_ok(schema.field(col).type):
                raise InvalidInputTypeError(
                    f"groups: column {col!r} of {where} must hold strings or integers, got Arrow type "
                    f"{schema.field(col).type}"
                )

    return check


def whole_set_partitions(
    source,
    set_column: str,
    client,
    *,
    npartitions: int | None = None,
    variants=(),
    columns=(),
    before_tasks=None,
):
    """``(delayed partitions, shuffled, rows_from)``: ``source``'s partitions, each holding
    whole item sets and its rows' input row numbers (shuffled on the set key only when some set
    lies in more than one), and the Parquet source's ``RowSource`` (None for a DataFrame). On
    the driver, before any task: the ``columns`` (e.g. a label column) and each variant's
    ``groups`` column must exist (``_check_columns``), then ``before_tasks()`` runs (the
    caller's first tasks, e.g. the warm-ups); a column scorer's column of the variants must
    exist and be numeric (checked on the schema before the run's tasks)."""
    require_dask()
    vs = list(variants)
    from cupel_np.io._workers import share_storage_options

    checks = _check_columns(vs, columns)

    def check(schema, names, where):
        checks(schema, names, where)
        if before_tasks is not None:
            before_tasks()

    share_storage_options(client)  # before the first task reads a URL
    ddf, keys = _frame_of(source, set_column, npartitions, client, check)
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
