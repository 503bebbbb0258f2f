"""The items table's columns: their names, canonical schema and checks (``check_items``), which
read a table given in any accepted type into that schema, naming column, row and value."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cupel_np.errors import InvalidConfigError, InvalidInputTypeError
from cupel_np.model._arrays import (
    _decoded,
    _is_listy,
    _is_stringish,
    _list_parts,
    _np,
    _plain_strings,
    _py,
    _string_child_type,
    _without_views,
)
from cupel_np.model._readers import one_line
from cupel_np.model.datasets import RowSource
from cupel_np.model.fields import TOKEN_LIMIT, suggestion
from cupel_np.text import WHITE_SPACE_CLASS

ITEM_FIELDS = (
    "content",
    "tokens",
    "kind",
    "source",
    "priority",
    "tags",
    "metadata",
    "timestamp",
    "future_relevance_hint",
    "pinned",
    "original_tokens",
)

ITEM_SCHEMA = pa.schema(
    [
        pa.field("content", pa.string(), nullable=False),
        pa.field("tokens", pa.int64(), nullable=False),
        pa.field("kind", pa.string()),
        pa.field("source", pa.string()),
        pa.field("priority", pa.int64()),
        pa.field("tags", pa.list_(pa.string())),
        pa.field("metadata", pa.map_(pa.string(), pa.string())),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("future_relevance_hint", pa.float64()),
        pa.field("pinned", pa.bool_()),
        pa.field("original_tokens", pa.int64()),
    ]
)


#: internal name of the set-key column (a set column may also be an item column, e.g. "kind")
SET_COLUMN = "__cupel_set__"
#: token counts and budgets stay below this so every sum fits in int64
_TOKEN_LIMIT = float(TOKEN_LIMIT)


# ------------------------------------------------------------------------ checking items
# One pass checks an items table and casts it to the canonical schema. The loader runs it in
# "raise" mode (the first problem raises, naming column, row and value); ``io.validate_items``
# runs it in "collect" mode (every problem, several rows each). Same checks, same order.

_OPTIONAL_DEFAULTS = {"kind": "Message", "source": "Chat"}
_INT64_MAX = 2**63 - 1
#: Python datetime's range in microseconds since the epoch (reports build datetimes)
_US_MIN = -62_135_596_800_000_000  # 0001-01-01T00:00:00Z
_US_MAX = 253_402_300_799_999_999  # 9999-12-31T23:59:59.999999Z
_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}


# The order problems are listed in: check_items' step (tags and metadata are read first, as
# they always have been), the column, then the check, in this order.
_NAMES, _TAGS, _METADATA, _READ, _ROWS, _SET_KEY = range(6)
_READ_STEP = {"tags": _TAGS, "metadata": _METADATA}
_CHECKS = (
    *("repeated column", "missing column", "missing set column"),
    *("string type", "list type", "struct field type", "pairs type", "entry null", "not a pair", "key null"),
    *("map type", "cast", "utf8", "string cast", "tag null", "value null"),
    *("int range", "int whole", "int decimal", "int type", "float type", "bool type"),
    *("timestamp type", "timestamp range", "timestamp cast", "set key type", "set key null"),
    *("content null", "content empty", "tokens null", "tokens sum", "blank"),
)


def _show(v) -> str:
    r = repr(v)
    return r if len(r) <= 60 else r[:57] + "..."


class Problems:
    """Where the checks report. ``collect=False``: raise the first problem (one line: column,
    row, value). ``collect=True``: keep every problem, listing up to ``max_rows`` rows each.
    A streamed check runs chunk by chunk on one ``Problems``: ``row_offset`` makes the rows
    global, the same problem in several chunks stays one message (its rows merged), and
    ``running_tokens`` carries the token sum across chunks."""

    def __init__(self, collect: bool, max_rows: int = 5, source: RowSource | None = None):
        self.collect = collect
        self.source = source
        self.max_rows = max_rows
        self.row_offset = 0
        self.running_tokens = 0.0
        self.reported = 0
        # key -> (site, [message] or [where, what, listed, count])
        self._entries: dict[tuple, tuple[tuple[int, ...], list[Any]]] = {}
        self._at = (0, -1)

    def at(self, step: int, column: int = -1) -> None:
        """Set where ``check_items`` is: its step and the column (index in ITEM_FIELDS) it reads."""
        self._at = (step, column)

    def _site(self, check: str) -> tuple[int, ...]:
        """A message's place in the listing: step, column, then its check's rank in ``_CHECKS``, so
        a streamed check lists them in the order of the whole-table check whichever chunk found
        them first."""
        return (*self._at, _CHECKS.index(check))

    @property
    def messages(self) -> list[str]:
        out = []
        for _, e in sorted(self._entries.values(), key=lambda se: se[0]):
            if len(e) == 1:
                out.append(e[0])
                continue
            where, what, listed, count = e
            more = f" and {count - self.max_rows} more" if count > self.max_rows else ""
            out.append(f"{where}: {what} at row{'s' if count > 1 else ''} {', '.join(listed)}{more}")
        return out

    def table(self, message: str, cls=InvalidConfigError, *, check: str) -> None:
        """A problem of the table as a whole (a missing or repeated column, a column type)."""
        message = one_line(message)
        if not self.collect:
            raise cls(message if self.source is None else f"{self.source.description}: {message}")
        self.reported += 1
        self._entries.setdefault(("table", message), (self._site(check), [message]))

    def rows(self, where: str, what: str, mask, values=None, cls=InvalidConfigError, *, check: str) -> bool:
        """Rows where ``mask`` holds have problem ``what`` (a ``check`` of ``_CHECKS``); ``values(row)``
        gives a row's value (row local to this chunk). Returns whether there were any."""
        idx = np.flatnonzero(np.asarray(mask))
        if idx.size == 0:
            return False
        off = self.row_offset
        if not self.collect:
            r = int(idx[0])
            shown = f" (value {_show(values(r))})" if values is not None else ""
            if self.source is None:
                raise cls(f"{where}, row {r + off}: {what}{shown}")
            file, local = self.source.locate(r + off)
            raise cls(f"{file}: {where}, row {local}: {what}{shown}")
        self.reported += 1
        key = ("rows", where, what)
        if key not in self._entries:
            self._entries[key] = (self._site(check), [where, what, [], 0])
        e = self._entries[key][1]
        room = self.max_rows - len(e[2])
        e[2].extend(
            f"{self._row_name(int(r) + off)} ({_show(values(int(r)))})"
            if values is not None
            else self._row_name(int(r) + off)
            for r in idx[: max(room, 0)]
        )
        e[3] += int(idx.size)
        return True

    def _row_name(self, row: int) -> str:
        """A row as a listed problem names it: its number, and its file when the rows come
        from several files (the number is then the row within that file)."""
        if self.source is None or not self.source.many_files:
            return str(row)
        file, local = self.source.locate(row)
        return f"{local} of {file}"


def _rows_of_children(offsets: np.ndarray, child_mask: np.ndarray, n: int) -> np.ndarray:
    """Row mask of a list / map column from a mask over its flattened children."""
    mask = np.zeros(n, dtype=bool)
    pos = np.flatnonzero(child_mask)
    if pos.size:
        mask[np.searchsorted(offsets[1:] - offsets[0], pos, side="right")] = True
    return mask


def _utf8_check(col: pa.Array, where: str, problems: Problems, mask_rows=None) -> np.ndarray | None:
    """Invalid UTF-8 in a string array (Arrow does not validate what Parquet or buffers hand
    it): reported, and returned as a mask over ``col`` (None when all is valid). ``mask_rows``
    maps a child mask to row numbers for list / map children."""
    try:
        col.validate(full=True)
        return None
    except pa.ArrowInvalid:
        pass
    raw = col.cast(pa.large_binary()).to_pylist()
    bad = np.zeros(len(raw), dtype=bool)
    for i, v in enumerate(raw):  # error path only
        if v is not None:
            try:
                v.decode("utf-8")
            except UnicodeDecodeError:
                bad[i] = True
    if mask_rows is None:
        problems.rows(where, "invalid UTF-8", bad, lambda r: raw[r], check="utf8")
    else:
        problems.rows(where, "invalid UTF-8", mask_rows(bad), check="utf8")
    return bad


def _nulled(col: pa.Array, bad: np.ndarray | None) -> pa.Array:
    """``col`` with the ``bad`` rows (already reported) set to null, so the checks after this
    one still run on every other row, the same whether the table is checked whole or in chunks."""
    if bad is None or not bad.any():
        return col
    return pc.if_else(pa.array(bad), pa.nulls(len(col), col.type), col)


def _string_col(name: str, col: pa.Array, problems: Problems):
    typ = col.type
    where = f"column {name!r}"
    if pa.types.is_null(typ):
        return pa.nulls(len(col), pa.string())
    binary = pa.types.is_binary(typ) or pa.types.is_large_binary(typ) or pa.types.is_binary_view(typ)
    if not (_is_stringish(typ) or binary):
        problems.table(
            f"column {name!r} must be a string column (UTF-8 string or binary), got {typ}",
            InvalidInputTypeError,
            check="string type",
        )
        return None
    if binary:
        col = col.cast(pa.large_binary()).view(pa.large_string())  # same layout; checked next
    col = _nulled(_without_views(col), _utf8_check(col, where, problems))
    try:
        return col.cast(pa.string())
    except pa.ArrowException as e:  # e.g. more than 2 GiB of text in one column
        problems.table(f"column {name!r} cannot be read as string: {e}", check="string cast")
        return None


def _int_col(name: str, col: pa.Array, problems: Problems, where: str | None = None):
    """An integer column as int64. Also integral floats (pandas holds a nullable integer
    column as float64, NaN for null) and integral decimals; a value that is not a whole number
    within 64 bits is reported (and read as null, so later checks still see the other rows)."""
    typ = col.type
    where = where or f"column {name!r}"
    if pa.types.is_null(typ):
        return pa.nulls(len(col), pa.int64())
    if pa.types.is_integer(typ):
        if typ == pa.uint64():
            big = _np(pc.fill_null(pc.greater(col, pa.scalar(_INT64_MAX, pa.uint64())), False))
            problems.rows(where, "does not fit in a 64-bit signed integer", big, _py(col), check="int range")
            col = _nulled(col, big)
        return col.cast(pa.int64())
    if pa.types.is_floating(typ):
        col = col.cast(pa.float64())
        col = pc.if_else(pc.is_nan(col), pa.nulls(len(col), pa.float64()), col)  # pandas' null
        whole = pc.and_(pc.is_finite(col), pc.equal(pc.floor(col), col))
        fits = pc.and_(pc.greater_equal(col, -(2.0**63)), pc.less(col, 2.0**63))
        bad = _np(pc.fill_null(pc.invert(pc.and_(whole, fits)), False))
        what = "is not a whole number that fits in 64 bits (an integer column)"
        problems.rows(where, what, bad, _py(col), cls=InvalidInputTypeError, check="int whole")
        return _nulled(col, bad).cast(pa.int64())
    if pa.types.is_decimal(typ):
        try:
            return col.cast(pa.int64())
        except pa.ArrowInvalid:
            vals = col.to_pylist()  # error path only
            bad = np.array(
                [v is not None and (v != v.to_integral_value() or not -(2**63) <= v <= _INT64_MAX) for v in vals],
                dtype=bool,
            )
            problems.rows(
                where, "is not an integer that fits in 64 bits", bad, lambda r: str(vals[r]), check="int decimal"
            )
            return _nulled(col, bad).cast(pa.int64())
    problems.table(
        f"column {name!r} must be an integer column (or whole numbers as floats or decimals), got {typ}",
        InvalidInputTypeError,
        check="int type",
    )
    return None


def _float_col(name: str, col: pa.Array, problems: Problems):
    typ = col.type
    if pa.types.is_null(typ):
        return pa.nulls(len(col), pa.float64())
    if pa.types.is_floating(typ) or pa.types.is_integer(typ) or pa.types.is_decimal(typ):
        return col.cast(pa.float64(), safe=False)  # nearest double, like float() on the value
    problems.table(f"column {name!r} must be a float column, got {typ}", InvalidInputTypeError, check="float type")
    return None


def _bool_col(name: str, col: pa.Array, problems: Problems):
    typ = col.type
    if pa.types.is_null(typ) or pa.types.is_boolean(typ):
        return col.cast(pa.bool_())
    problems.table(f"column {name!r} must be a boolean column, got {typ}", InvalidInputTypeError, check="bool type")
    return None


def _timestamp_col(name: str, col: pa.Array, problems: Problems):
    """Any unit and zone (a zone-less timestamp is UTC); held as microseconds since the epoch,
    UTC, within Python datetime's years 1-9999 (sub-microsecond parts are dropped)."""
    typ = col.type
    target = pa.timestamp("us", tz="UTC")
    if pa.types.is_null(typ):
        return pa.nulls(len(col), target)
    if not pa.types.is_timestamp(typ):
        problems.table(
            f"column {name!r} must be an Arrow timestamp (UTC), got {typ}",
            InvalidInputTypeError,
            check="timestamp type",
        )
        return None
    per = _PER_SECOND[typ.unit]
    raw = col.view(pa.int64()) if col.offset == 0 else col.cast(pa.int64())
    lo = -(-_US_MIN * per // 1_000_000)  # ceil: the earliest value in range, in this unit
    hi = _US_MAX * per // 1_000_000
    lo, hi = max(lo, -(2**63)), min(hi, _INT64_MAX)  # nanoseconds: all of int64 is in range
    out_of_range = pc.fill_null(
        pc.or_(pc.less(raw, pa.scalar(lo, pa.int64())), pc.greater(raw, pa.scalar(hi, pa.int64()))), False
    )
    if problems.rows(
        f"column {name!r}",
        f"is outside years 1-9999 (raw {typ.unit} value)",
        _np(out_of_range),
        _py(raw),
        check="timestamp range",
    ):
        return None
    try:
        return col.cast(target, safe=False)  # in range: only sub-microsecond digits are dropped
    except pa.ArrowException as e:  # e.g. an unknown time zone name
        problems.table(
            f"column {name!r} cannot be read as {target}: {e}", InvalidInputTypeError, check="timestamp cast"
        )
        return None


def _tags_col(name: str, col: pa.Array, problems: Problems, n: int):
    typ = col.type
    target = pa.list_(pa.string())
    if pa.types.is_null(typ):
        return pa.nulls(len(col), target)
    if not _is_listy(typ) or not _string_child_type(typ.value_type):
        problems.table(f"column {name!r} must be list<string>, got {typ}", InvalidInputTypeError, check="list type")
        return None
    try:
        if not pa.types.is_list(typ) or not pa.types.is_string(typ.value_type):
            # rebuild as a plain list array from the logical values (Categorical tags decoded)
            offsets, values = _list_parts(col)
            values = _without_views(_decoded(values))
            col = pa.LargeListArray.from_arrays(pa.array(offsets), values, mask=col.is_null())
        col = col.cast(target)
    except pa.ArrowException as e:
        problems.table(f"column {name!r} cannot be read as {target}: {e}", InvalidInputTypeError, check="cast")
        return None
    # null list -> empty list
    if col.null_count:
        col = pc.if_else(col.is_null(), pa.scalar([], type=target), col)
    offs = _np(col.offsets).astype(np.int64)
    values = col.values.slice(offs[0], offs[-1] - offs[0]) if n else col.values.slice(0, 0)
    rows = lambda m: _rows_of_children(offs, m, n)  # noqa: E731
    ok = _utf8_check(values, f"column {name!r}", problems, rows) is None
    if values.null_count and problems.rows(
        f"column {name!r}", "a tag is null", rows(_np(values.is_null())), None, check="tag null"
    ):
        ok = False
    return col if ok else None


def _struct_as_map(name: str, col: pa.StructArray, problems: Problems):
    """Metadata given as Python dicts arrives as a struct (one field per key seen anywhere in
    the column): a row's entries are its non-null fields, in field order."""
    typ = col.type
    fields = [typ.field(i) for i in range(typ.num_fields)]
    for f in fields:
        if not (_string_child_type(f.type) or pa.types.is_null(f.type)):
            problems.table(
                f"column {name!r} (a struct of metadata keys): field {f.name!r} must hold strings "
                f"(metadata maps strings to strings), got {f.type}",
                InvalidInputTypeError,
                check="struct field type",
            )
            return None
    n = len(col)
    children = [_plain_strings(c) for c in col.flatten()]  # parent nulls folded in
    present = np.zeros((n, len(fields)), dtype=bool)
    for j, c in enumerate(children):
        present[:, j] = _np(c.is_valid())
    rows, which = np.nonzero(present)  # row-major: by row, then field order
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(present.sum(axis=1), out=offsets[1:])
    keys = pa.array([f.name for f in fields], pa.string()).take(pa.array(which))
    values = pa.concat_arrays(children) if children else pa.array([], pa.string())
    items = values.take(pa.array(which.astype(np.int64) * n + rows))
    return pa.MapArray.from_arrays(pa.array(offsets), keys, items)


def _pairs_as_map(name: str, col: pa.Array, problems: Problems, n: int):
    """Metadata as a list of key/value entries per row: ``list<struct<key, value>>`` (a map's
    own layout) or ``list<list<string>>`` of ``[key, value]`` pairs (what pandas hands back
    for a map column)."""
    where = f"column {name!r}"
    offsets, entries = _list_parts(col)
    et = entries.type
    if pa.types.is_struct(et) and {et.field(i).name for i in range(et.num_fields)} == {"key", "value"}:
        if not (_string_child_type(et.field("key").type) and _string_child_type(et.field("value").type)):
            problems.table(
                f"{where} must be map<string, string>, got {col.type}", InvalidInputTypeError, check="pairs type"
            )
            return None
        if entries.null_count and problems.rows(
            where, "a metadata entry is null", _rows_of_children(offsets, _np(entries.is_null()), n), check="entry null"
        ):
            return None
        keys, items = entries.field("key"), entries.field("value")
    elif _is_listy(et) and _string_child_type(et.value_type):
        sizes = _np(pc.list_value_length(entries).fill_null(0))
        bad = (sizes != 2) | _np(entries.is_null())
        if problems.rows(
            where, "a metadata entry is not a [key, value] pair", _rows_of_children(offsets, bad, n), check="not a pair"
        ):
            return None
        flat = entries.flatten()
        keys, items = flat.take(pa.array(np.arange(0, len(flat), 2))), flat.take(pa.array(np.arange(1, len(flat), 2)))
    else:
        problems.table(
            f"{where} must be map<string, string>, got {col.type}", InvalidInputTypeError, check="pairs type"
        )
        return None
    if keys.null_count and problems.rows(
        where, "a metadata key is null", _rows_of_children(offsets, _np(keys.is_null()), n), check="key null"
    ):
        return None
    return pa.MapArray.from_arrays(
        pa.array(offsets.astype(np.int32)), _plain_strings(keys), _plain_strings(items), mask=col.is_null()
    )


def _as_map(name: str, col: pa.Array, problems: Problems, n: int):
    """The metadata column as map<string, string> before its checks: from a map with any
    string-like keys and values, a struct (Python dicts), or a list of key/value entries."""
    typ = col.type
    if pa.types.is_struct(typ):
        return _struct_as_map(name, col, problems)
    if _is_listy(typ):
        return _pairs_as_map(name, col, problems, n)
    if not pa.types.is_map(typ) or not (_string_child_type(typ.key_type) and _string_child_type(typ.item_type)):
        problems.table(
            f"column {name!r} must be map<string, string>, got {typ}", InvalidInputTypeError, check="map type"
        )
        return None
    plain = pa.types.is_string(typ.key_type) and pa.types.is_string(typ.item_type)
    if plain or col.offset != 0:
        return col
    return pa.MapArray.from_arrays(col.offsets, _plain_strings(col.keys), _plain_strings(col.items), mask=col.is_null())


def _metadata_col(name: str, col: pa.Array, problems: Problems, n: int):
    target = pa.map_(pa.string(), pa.string())
    if pa.types.is_null(col.type):
        return pa.nulls(len(col), target)
    col = _as_map(name, col, problems, n)
    if col is None:
        return None
    try:
        col = col.cast(target)
    except pa.ArrowException as e:
        problems.table(f"column {name!r} cannot be read as {target}: {e}", InvalidInputTypeError, check="cast")
        return None
    offs = _np(col.offsets).astype(np.int64)
    keys = col.keys.slice(offs[0], offs[-1] - offs[0])
    items = col.items.slice(offs[0], offs[-1] - offs[0])
    rows = lambda m: _rows_of_children(offs, m, n)  # noqa: E731
    ok = _utf8_check(keys, f"column {name!r}", problems, rows) is None
    ok = _utf8_check(items, f"column {name!r}", problems, rows) is None and ok
    if items.null_count and problems.rows(
        f"column {name!r}",
        "a metadata value is null (values must be strings)",
        rows(_np(items.is_null())),
        None,
        check="value null",
    ):
        ok = False
    return col if ok else None


def _set_key_col(set_column: str, col: pa.Array, problems: Problems, n: int):
    where = f"set column {set_column!r}"
    typ = col.type
    if pa.types.is_null(typ) and n == 0:
        return pa.array([], pa.string())
    nulls = _np(col.is_null())
    if pa.types.is_null(typ):
        col = pa.nulls(n, pa.string())
    elif _is_stringish(typ):
        col = _without_views(col)
        col = _nulled(col, _utf8_check(col, where, problems)).cast(pa.string())
    elif pa.types.is_integer(typ):
        col = _int_col(set_column, col, problems, where)  # int64 keys (reports and outputs use them)
    else:
        problems.table(f"{where} must hold strings or integers, got {typ}", InvalidInputTypeError, check="set key type")
        return None
    if problems.rows(where, "null (every row needs a set key)", nulls, check="set key null"):
        return None
    return col


def _column(table: pa.Table, name: str) -> pa.Array:
    """A column as one array, dictionary-encoded columns (Polars Categorical / Enum, pandas
    category) decoded."""
    return _decoded(table.column(name).combine_chunks())


_READERS = {
    "content": _string_col,
    "kind": _string_col,
    "source": _string_col,
    "tokens": _int_col,
    "priority": _int_col,
    "original_tokens": _int_col,
    "future_relevance_hint": _float_col,
    "pinned": _bool_col,
    "timestamp": _timestamp_col,
}


def _check_names(names: list[str], set_column: str | None, problems: Problems) -> set[str]:
    """Missing and repeated columns; returns the repeated names (their columns are not read)."""
    wanted = set(ITEM_FIELDS) | ({set_column} if set_column is not None else set())
    repeated = {nm for nm in names if nm in wanted and names.count(nm) > 1}
    for nm in sorted(repeated):
        problems.table(
            f"items table has {names.count(nm)} columns named {nm!r} (columns: {', '.join(names)}); "
            "names must be unique",
            check="repeated column",
        )
    for req in ("content", "tokens"):
        if req not in names:
            problems.table(f"items table has no {req!r} column (columns: {', '.join(names)})", check="missing column")
    if set_column is not None and set_column not in names:
        problems.table(
            f"set column {set_column!r} not found{suggestion(set_column, names)} (columns: {', '.join(names)})",
            check="missing set column",
        )
    return repeated


def _check_rows(cols: dict, nulls: dict, n: int, problems: Problems) -> None:
    """The row checks over the read columns. Null checks use the column as given (``nulls``),
    so a value a reader already refused (and read as null) is not reported twice, and every
    check runs whatever another found: the same problems whole or in chunks."""
    content = cols.get("content")
    if content is not None and n:
        problems.at(_ROWS, 0)
        problems.rows("column 'content'", "null", nulls["content"], check="content null")
        empty = pc.fill_null(pc.equal(pc.utf8_length(content), 0), False)
        problems.rows("column 'content'", "empty string", _np(empty), check="content empty")
    tokens = cols.get("tokens")
    if tokens is not None and n:
        problems.at(_ROWS, 1)
        problems.rows("column 'tokens'", "null", nulls["tokens"], check="tokens null")
        mag = np.abs(_np(tokens.fill_null(0)).astype(np.float64))
        running = problems.running_tokens + np.cumsum(mag)  # carried across streamed chunks
        problems.running_tokens = float(running[-1])
        problems.rows(
            "column 'tokens'",
            f"the token counts add up past {_TOKEN_LIMIT:.3g} (sums must fit in 64-bit integers)",
            running >= _TOKEN_LIMIT,
            _py(tokens),
            check="tokens sum",
        )
    for name in ("kind", "source"):
        col = cols.get(name)
        if col is not None and n:
            problems.at(_ROWS, ITEM_FIELDS.index(name))
            blank = pc.fill_null(pc.match_substring_regex(col, f"^[{WHITE_SPACE_CLASS}]*$"), False)
            problems.rows(f"column {name!r}", "empty or whitespace-only", _np(blank), _py(col), check="blank")


def _canonical(cols: dict, keys, n: int, set_column: str | None) -> pa.Table:
    """The checked columns in ITEM_SCHEMA (defaults for the missing ones) plus the set key."""
    arrays = []
    for f in ITEM_SCHEMA:
        col = cols.get(f.name)
        if f.name in _OPTIONAL_DEFAULTS:
            fill = pa.scalar(_OPTIONAL_DEFAULTS[f.name], pa.string())
            col = pa.repeat(fill, n) if col is None else col.fill_null(fill)
        elif f.name == "pinned":
            col = pa.array(np.zeros(n, dtype=bool)) if col is None else col.fill_null(False)
        elif f.name in ("tags", "metadata") and col is None:
            empty = pa.array(np.zeros(n + 1, dtype=np.int32))
            col = (
                pa.ListArray.from_arrays(empty, pa.array([], pa.string()))
                if f.name == "tags"
                else pa.MapArray.from_arrays(empty, pa.array([], pa.string()), pa.array([], pa.string()))
            )
        elif f.name == "metadata" and col is not None and col.null_count:
            col = pc.if_else(col.is_null(), pa.scalar([], type=f.type), col)
        elif col is None:
            col = pa.nulls(n, f.type)
        arrays.append(col)
    out_names = list(ITEM_FIELDS)
    if set_column is not None:
        arrays.append(keys)
        out_names.append(SET_COLUMN)
    return pa.Table.from_arrays(arrays, names=out_names)


def check_items(table: pa.Table, set_column: str | None, problems: Problems) -> pa.Table | None:
    """Check an items table and cast it to the canonical schema (ITEM_SCHEMA, timestamps in
    microseconds, plus the set-key column). Every problem goes to ``problems``; returns None
    when there were any."""
    before = problems.reported
    names = table.column_names
    n = table.num_rows
    problems.at(_NAMES)
    repeated = _check_names(names, set_column, problems)
    cols: dict[str, pa.Array | None] = {}
    nulls: dict[str, np.ndarray] = {}
    for f in ITEM_SCHEMA:
        name = f.name
        if name not in names or name in repeated:
            continue
        col = _column(table, name)
        nulls[name] = _np(col.is_null())
        problems.at(_READ_STEP.get(name, _READ), ITEM_FIELDS.index(name))
        if name == "tags":
            cols[name] = _tags_col(name, col, problems, n)
        elif name == "metadata":
            cols[name] = _metadata_col(name, col, problems, n)
        else:
            cols[name] = _READERS[name](name, col, problems)
    _check_rows(cols, nulls, n, problems)
    keys = None
    if set_column is not None and set_column in names and set_column not in repeated:
        problems.at(_SET_KEY)
        keys = _set_key_col(set_column, _column(table, set_column), problems, n)
    if problems.reported > before or any(cols.get(k) is None for k in cols):
        return None
    if "content" not in cols or "tokens" not in cols or (set_column is not None and keys is None):
        return None
    return _canonical(cols, keys, n, set_column)


def _normalize(table: pa.Table, set_column: str | None, source: RowSource | None = None) -> pa.Table:
    """The loader's check: raises the first problem (file, column, row and value)."""
    return check_items(table, set_column, Problems(collect=False, source=source))
