"""Custom scorers over an item table: a numeric column (``ColumnScorer``) and a user function
(``FunctionScorer``).

Column values: a column of the table (an extra column kept from the input, or a numeric item
field such as ``priority``); for tables built from ContextItems (which have no extra columns)
``metadata[column]`` parsed with Rust's f64 grammar. Null values, NaN and missing metadata keys
score the scorer's ``default`` (one rule on every input path: pandas stores a missing float as
NaN and Arrow, polars and Parquet keep NaN apart from null); +/-inf pass through. ``check_scorer_columns`` raises for an
absent or non-numeric column before any variant runs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cupel_np.errors import InvalidConfigError, InvalidInputTypeError
from cupel_np.model.columns import ITEM_FIELDS
from cupel_np.model.scorers import ColumnScorer, FunctionScorer, iter_scorers
from cupel_np.text import parse_rust_f64


def is_numeric_type(t: pa.DataType) -> bool:
    """Integer, floating or decimal (bool is not numeric here)."""
    if pa.types.is_dictionary(t):
        t = t.value_type
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)


def _as_float(col: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(float64 values with NaN at nulls, valid mask) of a numeric Arrow array."""
    if pa.types.is_dictionary(col.type):
        col = col.dictionary_decode()
    f = pc.cast(col, pa.float64(), safe=False)
    valid = f.is_valid().to_numpy(zero_copy_only=False)
    vals = f.fill_null(math.nan).to_numpy(zero_copy_only=False).astype(np.float64, copy=True)
    return vals, np.asarray(valid, dtype=np.bool_)


def _source_column(table, column: str) -> pa.Array | None:
    """The table column a column scorer reads (grouped order), or None (read metadata)."""
    extra = getattr(table, "extra_columns", ())
    if column in extra:
        return table.extra_column(column)
    if column in ITEM_FIELDS:
        return table.table.column(column).combine_chunks()
    return None


def column_values(table, column: str) -> tuple[np.ndarray, np.ndarray]:
    """Per row (grouped order): (value as float64, has a value: neither null nor NaN). Raises
    naming the column when
    the table has no such column (nor metadata key) or its values are not numbers."""
    cache = table._cache
    ck = ("column_scorer", column)
    if ck in cache:
        return cache[ck]
    col = _source_column(table, column)
    if col is None and not getattr(table, "columns_from_metadata", False):
        raise InvalidConfigError(
            f"column scorer: the items have no column {column!r} "
            f"(columns: {', '.join(list(ITEM_FIELDS) + list(table.extra_columns))})"
        )
    if col is not None:
        if not is_numeric_type(col.type):
            raise InvalidInputTypeError(
                f"column scorer: column {column!r} is not numeric (Arrow type {col.type}); "
                "it must hold integers, floats or decimals"
            )
        vals, ok = _as_float(col)
    else:
        vals, ok = _metadata_values(table, column)
    out = vals, ok & ~np.isnan(vals)  # NaN is a missing value, as null is: it scores the default
    cache[ck] = out
    return out


def _metadata_values(table, column: str) -> tuple[np.ndarray, np.ndarray]:
    vals = table.metadata_values(column)
    if table.n == 0 or vals.null_count == len(vals):
        raise InvalidConfigError(
            f"column scorer: no item has a metadata key {column!r} (items given as ContextItems "
            "carry a column scorer's values in metadata)"
        )
    enc = pc.dictionary_encode(vals)
    distinct = enc.dictionary.to_pylist()
    parsed = [parse_rust_f64(v) for v in distinct]
    bad = [v for v, p in zip(distinct, parsed, strict=True) if p is None]
    if bad:
        raise InvalidInputTypeError(
            f"column scorer: metadata key {column!r} holds values that are not numbers "
            f"(Rust f64 grammar), e.g. {bad[0]!r}" + (f" and {len(bad) - 1} more" if len(bad) > 1 else "")
        )
    lut = np.array(parsed + [math.nan], dtype=np.float64)
    ok_lut = np.array([True] * len(parsed) + [False])
    idx = enc.indices.fill_null(len(parsed)).to_numpy(zero_copy_only=False).astype(np.int64)
    return lut[idx], ok_lut[idx]


def column_scores(table, rows: np.ndarray, scorer: ColumnScorer) -> np.ndarray:
    """The column scorer's score per scoreable row (a fresh array)."""
    vals, ok = column_values(table, scorer.column)
    out = vals[rows]
    out[~ok[rows]] = scorer.default
    return out


def check_scorer_columns(table, scorers: Iterable) -> None:
    """Raise (naming the column) for every column scorer in ``scorers`` (scorer specs, nested
    ones included) whose column ``table`` lacks or holds non-numeric values. Cheap to repeat:
    the values read are cached on the table for the run that follows."""
    for column in dict.fromkeys(s.column for s in column_scorers(scorers)):
        column_values(table, column)


def column_scorers(scorers: Iterable) -> list[ColumnScorer]:
    """Every column scorer in ``scorers`` (nested ones included), in order."""
    return [s for top in scorers for s in iter_scorers(top) if isinstance(s, ColumnScorer)]


def check_schema_columns(schema: pa.Schema, scorers: Iterable, where: str = "items") -> None:
    """The column scorers' check against a schema (streamed and Dask inputs, before reading):
    every named column must exist and be numeric."""
    names = schema.names
    for s in column_scorers(scorers):
        if s.column not in names:
            raise InvalidConfigError(f"column scorer: no column {s.column!r} in {where} (columns: {', '.join(names)})")
        t = schema.field(s.column).type
        if not is_numeric_type(t):
            raise InvalidInputTypeError(
                f"column scorer: column {s.column!r} of {where} is not numeric (type {t}); "
                "it must hold integers, floats or decimals"
            )


# ----------------------------------------------------------------------------- FunctionScorer
class ScorerInput(Mapping):
    """What a FunctionScorer's ``fn`` receives as ``columns``: a read-only mapping of column
    name -> array over the scoreable rows in grouped order (the rows ``offsets`` delimits).

    Numbers are NumPy arrays (read only): ``tokens`` (int64), ``pinned`` (bool), and float64
    with NaN at nulls for ``priority``, ``future_relevance_hint``, ``original_tokens`` and every
    numeric extra column. The rest are Arrow arrays: ``content``, ``kind``, ``source``,
    ``tags``, ``metadata``, ``timestamp`` and non-numeric extra columns. Arrays are built on
    first access."""

    def __init__(self, table, rows: np.ndarray):
        self._table = table
        self._rows = rows
        self._names = list(ITEM_FIELDS) + [c for c in getattr(table, "extra_columns", ()) if c not in ITEM_FIELDS]
        self._got: dict[str, object] = {}

    def __getitem__(self, name: str):
        if name not in self._got:
            if name not in self._names:
                raise KeyError(name)
            self._got[name] = self._read(name)
        return self._got[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def _read(self, name: str):
        t, rows = self._table, self._rows
        if name == "tokens":
            a = t.tokens[rows]
        elif name == "pinned":
            a = t.pinned[rows]
        elif name in ("content", "kind", "source", "tags", "metadata"):  # decoded strings
            return getattr(t, name).take(pa.array(rows, type=pa.int64()))
        else:
            col = _source_column(t, name)
            assert col is not None  # every name of self._names is a column of the table
            if is_numeric_type(col.type):
                a = _as_float(col)[0][rows]
            else:
                return col.take(pa.array(rows, type=pa.int64()))
        a.setflags(write=False)
        return a


def function_scores(table, rows: np.ndarray, offsets: np.ndarray, scorer: FunctionScorer) -> np.ndarray:
    """Call the scorer's ``fn`` once over every scoreable row and check what it returned."""
    off = np.array(offsets, dtype=np.int64)
    off.setflags(write=False)
    m = int(rows.shape[0])
    columns = ScorerInput(table, rows)
    try:
        got = scorer.fn(columns, off)
    except KeyError as e:
        missing = e.args[0] if len(e.args) == 1 else None
        if not isinstance(missing, str) or missing in columns:
            raise
        from cupel_np.model.fields import suggestion

        names = list(columns)
        raise InvalidConfigError(
            f"function scorer {scorer.name!r} reads column {missing!r}, which the items do not have"
            f"{suggestion(missing, names)}; columns: {', '.join(names)}"
        ) from None
    try:
        out = np.asarray(got)
    except Exception as e:  # noqa: BLE001 - anything np.asarray refuses is the user's type error
        raise InvalidInputTypeError(f"function scorer {scorer.name!r} returned {type(got).__name__}: {e}") from None
    if out.dtype.kind not in "fiu":
        raise InvalidInputTypeError(
            f"function scorer {scorer.name!r} returned dtype {out.dtype}; expected one float64 per row "
            "(integer and floating dtypes are accepted and cast)"
        )
    if out.ndim != 1 or out.shape[0] != m:
        raise InvalidConfigError(
            f"function scorer {scorer.name!r} returned shape {out.shape}; expected ({m},): one score per "
            "scoreable row (the rows of the columns it was given)"
        )
    return out.astype(np.float64, copy=True)
