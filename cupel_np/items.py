"""ContextItem (an immutable record) and ItemTable (the columnar store kernels run on)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from datetime import datetime, timezone
from types import MappingProxyType
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .errors import InvalidConfigError, InvalidInputTypeError
from .text import WHITE_SPACE_CLASS, ascii_fold, is_blank, parse_rust_f64

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)

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


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


@dataclass(frozen=True, eq=False)
class ContextItem:
    """One piece of context. Immutable; validated at construction.

    ``timestamp`` must be timezone-aware (it is converted to UTC); ``metadata`` maps strings to
    strings and is preserved untouched."""

    content: str
    tokens: int
    kind: str = "Message"
    source: str = "Chat"
    priority: int | None = None
    tags: tuple[str, ...] = ()
    metadata: Mapping[str, str] = field(default_factory=dict)
    timestamp: datetime | None = None
    future_relevance_hint: float | None = None
    pinned: bool = False
    original_tokens: int | None = None

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        if not isinstance(self.content, str):
            raise InvalidInputTypeError(
                f"ContextItem.content must be a string, got {type(self.content).__name__}"
            )
        if self.content == "":
            raise InvalidConfigError("ContextItem.content must be a non-empty string")
        if not _is_int(self.tokens):
            raise InvalidInputTypeError(
                f"ContextItem.tokens must be an integer, got {type(self.tokens).__name__} "
                f"{self.tokens!r} (content {self.content[:40]!r})"
            )
        set_(self, "tokens", int(self.tokens))
        if abs(self.tokens) >= _TOKEN_LIMIT:
            raise InvalidConfigError(f"ContextItem.tokens must be within ±2**62, got {self.tokens}")
        for name in ("kind", "source"):
            v = getattr(self, name)
            if not isinstance(v, str):
                raise InvalidInputTypeError(
                    f"ContextItem.{name} must be a string, got {type(v).__name__} {v!r}"
                )
            if is_blank(v):
                raise InvalidConfigError(
                    f"ContextItem.{name} must not be empty or whitespace-only, got {v!r}"
                )
        for name in ("priority", "original_tokens"):
            v = getattr(self, name)
            if v is not None:
                if not _is_int(v):
                    raise InvalidInputTypeError(
                        f"ContextItem.{name} must be an integer or None, got "
                        f"{type(v).__name__} {v!r}"
                    )
                if not -(2**63) <= int(v) < 2**63:
                    raise InvalidConfigError(f"ContextItem.{name} must fit in 64 bits, got {v}")
                set_(self, name, int(v))
        tags = self.tags
        if isinstance(tags, str) or not isinstance(tags, Iterable):
            raise InvalidInputTypeError(
                f"ContextItem.tags must be a sequence of strings, got {type(tags).__name__}"
            )
        tags = tuple(tags)
        for t in tags:
            if not isinstance(t, str):
                raise InvalidInputTypeError(
                    f"ContextItem.tags must contain strings, got {type(t).__name__} {t!r}"
                )
        set_(self, "tags", tags)
        md = self.metadata if self.metadata is not None else {}
        if not isinstance(md, Mapping):
            raise InvalidInputTypeError(
                f"ContextItem.metadata must be a mapping of str -> str, got {type(md).__name__}"
            )
        for k, v in md.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise InvalidInputTypeError(
                    "ContextItem.metadata must map strings to strings, got "
                    f"{k!r}: {v!r} ({type(v).__name__})"
                )
        set_(self, "metadata", MappingProxyType(dict(md)))
        ts = self.timestamp
        if ts is not None:
            if not isinstance(ts, datetime):
                raise InvalidInputTypeError(
                    f"ContextItem.timestamp must be a datetime or None, got {type(ts).__name__}"
                )
            if ts.tzinfo is None or ts.utcoffset() is None:
                raise InvalidConfigError(
                    f"ContextItem.timestamp must be timezone-aware (UTC semantics), got naive "
                    f"{ts.isoformat()}; use datetime(..., tzinfo=timezone.utc)"
                )
            set_(self, "timestamp", ts.astimezone(timezone.utc))
        h = self.future_relevance_hint
        if h is not None:
            if isinstance(h, bool) or not isinstance(h, (int, float, np.floating, np.integer)):
                raise InvalidInputTypeError(
                    "ContextItem.future_relevance_hint must be a float or None, got "
                    f"{type(h).__name__} {h!r}"
                )
            set_(self, "future_relevance_hint", float(h))
        if not isinstance(self.pinned, (bool, np.bool_)):
            raise InvalidInputTypeError(
                f"ContextItem.pinned must be a bool, got {type(self.pinned).__name__}"
            )
        set_(self, "pinned", bool(self.pinned))

    def _key(self):
        return (
            self.content,
            self.tokens,
            self.kind,
            self.source,
            self.priority,
            self.tags,
            tuple(sorted(self.metadata.items())),
            self.timestamp,
            self.future_relevance_hint,
            self.pinned,
            self.original_tokens,
        )

    def __eq__(self, other) -> bool:
        if not isinstance(other, ContextItem):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def to_dict(self) -> dict[str, Any]:
        return {
            "content": self.content,
            "tokens": self.tokens,
            "kind": self.kind,
            "source": self.source,
            "priority": self.priority,
            "tags": list(self.tags),
            "metadata": dict(self.metadata),
            "timestamp": self.timestamp,
            "future_relevance_hint": self.future_relevance_hint,
            "pinned": self.pinned,
            "original_tokens": self.original_tokens,
        }


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
_SET = "__cupel_set__"
#: token counts and budgets stay below this so every sum fits in int64
_TOKEN_LIMIT = 2.0**62


def _first_true(mask: np.ndarray) -> int:
    idx = np.flatnonzero(mask)
    return int(idx[0]) if idx.size else -1


class ItemTable:
    """Columnar item store. Rows are held grouped by item set (stable: input order is kept
    inside a set); ``input_row`` maps every stored row back to its input row and ``offsets``
    delimits the sets. Strings are encoded once: exact content ids, ASCII-folded kind and tag
    ids (the original strings are kept for output)."""

    def __init__(self, table: pa.Table, set_column: str | None = None):
        table = _normalize(table, set_column)
        n = table.num_rows
        if set_column is not None:
            keys = table.column(_SET).combine_chunks()
            if keys.null_count:
                row = _first_true(keys.is_null().to_numpy(zero_copy_only=False))
                raise InvalidConfigError(
                    f"set column {set_column!r} is null at row {row}; every row needs a set key"
                )
            enc = pc.dictionary_encode(keys)
            codes = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
            order = np.argsort(codes, kind="stable")
            counts = np.bincount(codes, minlength=len(enc.dictionary))
            self.set_keys = enc.dictionary.to_pylist()
            self.input_row = order.astype(np.int64)
            table = table.take(pa.array(order))
        else:
            counts = np.array([n], dtype=np.int64)
            self.set_keys = [None]
            self.input_row = np.arange(n, dtype=np.int64)
        self.set_column = set_column
        self.offsets = np.zeros(len(counts) + 1, dtype=np.int64)
        np.cumsum(counts, out=self.offsets[1:])
        self.table = table
        self.n = n
        self._encode()
        self._cache: dict = {}
        self._set_index: dict | None = None

    def _renamed(self, set_column: str) -> "ItemTable":
        self.set_column = set_column
        return self

    # -- construction -------------------------------------------------------------------
    @classmethod
    def from_items(cls, items: Iterable[ContextItem | Mapping], set_column: str | None = None) -> "ItemTable":
        """From ContextItems or dicts with ContextItem's field names (plus the set column)."""
        cols: dict[str, list] = {f: [] for f in ITEM_FIELDS}
        sets: list = []
        for i, it in enumerate(items):
            if isinstance(it, ContextItem):
                item = it
                if set_column is not None:
                    raise InvalidConfigError(
                        "set_column needs dict rows carrying the set key; ContextItems have none"
                    )
            elif isinstance(it, Mapping):
                d = dict(it)
                if set_column is not None:
                    if set_column not in d:
                        raise InvalidConfigError(f"row {i}: missing set column {set_column!r}")
                    # a set column may also be an item field (e.g. "kind"): then it stays one
                    sets.append(d[set_column] if set_column in ITEM_FIELDS else d.pop(set_column))
                unknown = set(d) - set(ITEM_FIELDS)
                if unknown:
                    raise InvalidConfigError(
                        f"row {i}: unknown item field(s) {sorted(unknown)}; "
                        f"known fields: {', '.join(ITEM_FIELDS)}"
                    )
                try:
                    item = ContextItem(**{k: v for k, v in d.items() if v is not None or k in ("content", "tokens")})
                except TypeError as e:
                    if isinstance(e, InvalidInputTypeError):
                        raise type(e)(f"row {i}: {e}") from None
                    raise InvalidConfigError(f"row {i}: {e}") from None
                except InvalidConfigError as e:
                    raise InvalidConfigError(f"row {i}: {e}") from None
            else:
                raise InvalidInputTypeError(
                    f"row {i}: expected a ContextItem or a dict, got {type(it).__name__}"
                )
            cols["content"].append(item.content)
            cols["tokens"].append(item.tokens)
            cols["kind"].append(item.kind)
            cols["source"].append(item.source)
            cols["priority"].append(item.priority)
            cols["tags"].append(list(item.tags))
            cols["metadata"].append(list(item.metadata.items()))
            cols["timestamp"].append(item.timestamp)
            cols["future_relevance_hint"].append(item.future_relevance_hint)
            cols["pinned"].append(item.pinned)
            cols["original_tokens"].append(item.original_tokens)
        arrays = [pa.array(cols[f.name], type=f.type) for f in ITEM_SCHEMA]
        names = list(ITEM_SCHEMA.names)
        if set_column is not None:
            try:
                arrays.append(pa.array(sets))
            except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
                raise InvalidConfigError(f"set column {set_column!r}: keys of mixed or unsupported types ({e})") from None
            names.append(set_column if set_column not in ITEM_FIELDS else "__set_key__")
            if set_column in ITEM_FIELDS:
                return cls(pa.Table.from_arrays(arrays, names=names), set_column="__set_key__")._renamed(set_column)
        return cls(pa.Table.from_arrays(arrays, names=names), set_column=set_column)

    @classmethod
    def from_arrow(cls, data, set_column: str | None = None) -> "ItemTable":
        """From anything ``pyarrow.table()`` accepts (Arrow tables, pandas / polars frames,
        dicts of columns) with snake_case ContextItem column names."""
        if not isinstance(data, pa.Table):
            try:
                data = pa.table(data)
            except Exception as e:  # pyarrow raises several types here
                raise InvalidInputTypeError(f"cannot read items as an Arrow table: {e}") from None
        return cls(data, set_column=set_column)

    @classmethod
    def from_parquet(cls, path, set_column: str | None = None) -> "ItemTable":
        from .io import read_items_table

        return cls(read_items_table(path), set_column=set_column)

    # -- encoding -----------------------------------------------------------------------
    def _encode(self) -> None:
        t = self.table
        self.content = t.column("content").combine_chunks()
        self.content_id = (
            pc.dictionary_encode(self.content).indices.to_numpy(zero_copy_only=False).astype(np.int64)
        )
        self.tokens = t.column("tokens").combine_chunks().to_numpy(zero_copy_only=False).astype(np.int64)
        self.kind = t.column("kind").combine_chunks()
        self.source = t.column("source").combine_chunks()
        kenc = pc.dictionary_encode(pc.ascii_lower(self.kind))
        self.kind_id = kenc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        self.kind_vocab: list[str] = kenc.dictionary.to_pylist()
        self._kind_index = {k: i for i, k in enumerate(self.kind_vocab)}
        ts = t.column("timestamp").combine_chunks()
        self.timestamp_unit = ts.type.unit
        self.units_per_second = {"s": 1.0, "ms": 1e3, "us": 1e6, "ns": 1e9}[ts.type.unit]
        self.timestamp_valid = ts.is_valid().to_numpy(zero_copy_only=False)
        self.timestamp = ts.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        self.pinned = t.column("pinned").combine_chunks().to_numpy(zero_copy_only=False).astype(np.bool_)
        tags = t.column("tags").combine_chunks()
        self.tags = tags
        offs = tags.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
        self.tag_offsets = offs - offs[0]
        self.metadata = t.column("metadata").combine_chunks()

    # -- columns encoded on first use (a sweep that never reads them never pays for them) --
    @cached_property
    def _priority(self):
        return _int_col(self.table.column("priority"))

    @property
    def priority(self) -> np.ndarray:
        return self._priority[0]

    @property
    def priority_valid(self) -> np.ndarray:
        return self._priority[1]

    @cached_property
    def _original_tokens(self):
        return _int_col(self.table.column("original_tokens"))

    @property
    def original_tokens_col(self) -> np.ndarray:
        return self._original_tokens[0]

    @property
    def original_tokens_valid(self) -> np.ndarray:
        return self._original_tokens[1]

    @cached_property
    def _hint(self):
        hint = self.table.column("future_relevance_hint").combine_chunks()
        return (hint.fill_null(0.0).to_numpy(zero_copy_only=False).astype(np.float64),
                hint.is_valid().to_numpy(zero_copy_only=False))

    @property
    def hint(self) -> np.ndarray:
        return self._hint[0]

    @property
    def hint_valid(self) -> np.ndarray:
        return self._hint[1]

    @cached_property
    def _raw_tags(self):
        raw = pc.dictionary_encode(self.tags.flatten())
        return raw.indices.to_numpy(zero_copy_only=False).astype(np.int64), raw.dictionary

    @property
    def tag_raw_id(self) -> np.ndarray:
        """Exact (case-sensitive) tag ids, CSR by ``tag_offsets``."""
        return self._raw_tags[0]

    @cached_property
    def tag_vocab(self) -> list[str]:
        return self._raw_tags[1].to_pylist()

    @property
    def n_raw_tags(self) -> int:
        return len(self._raw_tags[1])

    @cached_property
    def _fold_tags(self):
        fold = pc.dictionary_encode(pc.ascii_lower(self.tags.flatten()))
        return fold.indices.to_numpy(zero_copy_only=False).astype(np.int64), len(fold.dictionary)

    @property
    def tag_fold_id(self) -> np.ndarray:
        """ASCII-folded tag ids, CSR by ``tag_offsets``."""
        return self._fold_tags[0]

    @property
    def n_fold_tags(self) -> int:
        return self._fold_tags[1]

    # -- lookups used by the scorers ----------------------------------------------------
    def kind_ids_for(self, kind: str) -> int:
        """The folded-kind id of ``kind`` in this table, -1 if no row has it."""
        return self._kind_index.get(ascii_fold(kind), -1)

    def tag_id_for(self, tag: str) -> int:
        # a scan in Arrow, not a Python dict over the whole vocabulary (O(V) Python per table)
        return pc.index(self._raw_tags[1], tag).as_py()

    def metadata_values(self, key: str) -> pa.Array:
        """Per row the metadata value at ``key`` (null where absent)."""
        ck = ("md", key)
        if ck not in self._cache:
            md = self.metadata
            if len(md) == 0:
                self._cache[ck] = pa.nulls(0, pa.string())
            else:
                self._cache[ck] = pc.map_lookup(md, pa.scalar(key, pa.string()), "last")
        return self._cache[ck]

    def trust_values(self) -> tuple[np.ndarray, np.ndarray]:
        """``cupel:trust`` parsed the way Rust parses f64: (value, ok) per row."""
        ck = ("trust",)
        if ck not in self._cache:
            vals = self.metadata_values("cupel:trust")
            enc = pc.dictionary_encode(vals)
            parsed = [parse_rust_f64(s) for s in enc.dictionary.to_pylist()]
            lut = np.array([math.nan if v is None else v for v in parsed] + [math.nan], dtype=np.float64)
            ok_lut = np.array([v is not None and math.isfinite(v) for v in parsed] + [False])
            idx = enc.indices.fill_null(len(parsed)).to_numpy(zero_copy_only=False).astype(np.int64)
            self._cache[ck] = (lut[idx], ok_lut[idx])
        return self._cache[ck]

    # -- rows back out --------------------------------------------------------------------
    def row(self, i: int) -> ContextItem:
        """Row ``i`` (grouped order) as a ContextItem."""
        i = int(i)
        ts = None
        if self.timestamp_valid[i]:
            ts = _to_datetime(int(self.timestamp[i]), self.timestamp_unit)
        md = self.metadata[i].as_py() or []
        return ContextItem(
            content=self.content[i].as_py(),
            tokens=int(self.tokens[i]),
            kind=self.kind[i].as_py(),
            source=self.source[i].as_py(),
            priority=int(self.priority[i]) if self.priority_valid[i] else None,
            tags=tuple(self.tags[i].as_py() or ()),
            metadata=dict(md),
            timestamp=ts,
            future_relevance_hint=float(self.hint[i]) if self.hint_valid[i] else None,
            pinned=bool(self.pinned[i]),
            original_tokens=int(self.original_tokens_col[i]) if self.original_tokens_valid[i] else None,
        )

    def segment_of(self, key) -> int:
        if self.set_column is None:
            if key is not None:
                raise InvalidConfigError("this ItemTable has no set column; use set key None")
            return 0
        if self._set_index is None:
            self._set_index = {k: i for i, k in enumerate(self.set_keys)}
        try:
            return self._set_index[key]
        except (KeyError, TypeError):
            raise InvalidConfigError(
                f"no item set with key {key!r} in set column {self.set_column!r}"
            ) from None

    def subset(self, key) -> "ItemTable":
        """One item set as its own single-set ItemTable (rows in input order)."""
        seg = self.segment_of(key)
        lo, hi = int(self.offsets[seg]), int(self.offsets[seg + 1])
        part = self.table.slice(lo, hi - lo)
        if _SET in part.column_names:
            part = part.drop_columns([_SET])
        return ItemTable(part)

    @property
    def n_sets(self) -> int:
        return len(self.set_keys)

    def __len__(self) -> int:
        return self.n

    def __repr__(self) -> str:
        return f"ItemTable(rows={self.n}, sets={self.n_sets}, set_column={self.set_column!r})"


def _to_datetime(v: int, unit: str) -> datetime:
    from datetime import timedelta

    if unit == "ns":
        return _EPOCH + timedelta(microseconds=v // 1000)
    mult = {"s": 1_000_000, "ms": 1000, "us": 1}[unit]
    return _EPOCH + timedelta(microseconds=v * mult)


def _int_col(col) -> tuple[np.ndarray, np.ndarray]:
    arr = col.combine_chunks()
    valid = arr.is_valid().to_numpy(zero_copy_only=False)
    vals = arr.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    return vals, valid


_OPTIONAL_DEFAULTS = {
    "kind": ("Message", pa.string()),
    "source": ("Chat", pa.string()),
}


def _bad_row(mask, what: str, column: str, values=None):
    row = _first_true(np.asarray(mask))
    shown = ""
    if values is not None and row >= 0:
        shown = f" (value {values[row].as_py()!r})"
    raise InvalidConfigError(f"column {column!r}, row {row}: {what}{shown}")


def _normalize(table: pa.Table, set_column: str | None) -> pa.Table:
    """Validate an items table and cast it to the canonical schema (ITEM_SCHEMA plus the set
    column). Errors name the column, the first bad row and its value."""
    names = set(table.column_names)
    for req in ("content", "tokens"):
        if req not in names:
            raise InvalidConfigError(
                f"items table has no {req!r} column (columns: {', '.join(table.column_names)})"
            )
    if set_column is not None and set_column not in names:
        raise InvalidConfigError(
            f"set column {set_column!r} not found (columns: {', '.join(table.column_names)})"
        )
    n = table.num_rows
    out = []
    for f in ITEM_SCHEMA:
        name = f.name
        if name not in names:
            if name in _OPTIONAL_DEFAULTS:
                default, typ = _OPTIONAL_DEFAULTS[name]
                out.append(pa.array([default] * n, type=typ) if n else pa.array([], type=typ))
            elif name == "pinned":
                out.append(pa.array(np.zeros(n, dtype=bool)))
            elif name == "tags":
                out.append(pa.array([[]] * n, type=f.type) if n else pa.array([], type=f.type))
            elif name == "metadata":
                out.append(pa.array([[]] * n, type=f.type) if n else pa.array([], type=f.type))
            else:
                out.append(pa.nulls(n, f.type))
            continue
        col = table.column(name).combine_chunks()
        out.append(_cast_column(name, col, f.type))
    arrays = out
    content, tokens = arrays[0], arrays[1]
    if content.null_count:
        _bad_row(content.is_null().to_numpy(zero_copy_only=False), "content is null", "content")
    if n:
        empty = pc.equal(pc.utf8_length(content), 0).to_numpy(zero_copy_only=False)
        if empty.any():
            _bad_row(empty, "content must be a non-empty string", "content")
    if tokens.null_count:
        _bad_row(tokens.is_null().to_numpy(zero_copy_only=False), "tokens is null", "tokens")
    for idx, name in ((2, "kind"), (3, "source")):
        col = arrays[idx]
        if col.null_count:
            col = col.fill_null(_OPTIONAL_DEFAULTS[name][0])
            arrays[idx] = col
        if n:
            blank = pc.match_substring_regex(col, f"^[{WHITE_SPACE_CLASS}]*$").to_numpy(zero_copy_only=False)
            if blank.any():
                _bad_row(blank, f"{name} must not be empty or whitespace-only", name, col)
    if arrays[9].null_count:  # pinned
        arrays[9] = arrays[9].fill_null(False)
    if arrays[5].null_count:  # tags: null list -> empty
        arrays[5] = pc.if_else(arrays[5].is_null(), pa.scalar([], type=arrays[5].type), arrays[5])
    if n and arrays[5].flatten().null_count:
        lengths = pc.list_value_length(arrays[5]).to_numpy(zero_copy_only=False)
        flat_null = arrays[5].flatten().is_null().to_numpy(zero_copy_only=False)
        pos = _first_true(flat_null)
        row = int(np.searchsorted(np.cumsum(lengths), pos, side="right"))
        raise InvalidConfigError(f"column 'tags', row {row}: a tag is null")
    schema_fields = list(ITEM_SCHEMA)
    schema_fields[7] = pa.field("timestamp", arrays[7].type)
    names_out = [f.name for f in ITEM_SCHEMA]
    if set_column is not None:
        keys = table.column(set_column).combine_chunks()
        if pa.types.is_dictionary(keys.type):
            keys = keys.cast(keys.type.value_type)
        if pa.types.is_nested(keys.type) or pa.types.is_null(keys.type) and n:
            raise InvalidInputTypeError(
                f"set column {set_column!r} must hold scalar keys (strings or integers), got {keys.type}"
            )
        arrays.append(keys)
        names_out.append(_SET)
    md = arrays[6]
    if n and md.items.null_count:
        offs = md.offsets.to_numpy(zero_copy_only=False)
        pos = _first_true(md.items.is_null().to_numpy(zero_copy_only=False))
        row = int(np.searchsorted(offs[1:] - offs[0], pos, side="right"))
        raise InvalidConfigError(f"column 'metadata', row {row}: a metadata value is null (values must be strings)")
    big = np.abs(arrays[1].to_numpy(zero_copy_only=False).astype(np.float64))
    if n and big.sum() >= _TOKEN_LIMIT:
        row = _first_true(np.cumsum(big) >= _TOKEN_LIMIT)
        raise InvalidConfigError(
            f"column 'tokens': the token counts add up past {_TOKEN_LIMIT:.3g} by row {row} "
            "(sums must fit in 64-bit integers)"
        )
    return pa.Table.from_arrays(arrays, names=names_out)


def _cast_column(name: str, col: pa.Array, target: pa.DataType) -> pa.Array:
    typ = col.type
    if pa.types.is_dictionary(typ):
        col = col.cast(typ.value_type)
        typ = col.type
    try:
        if name == "timestamp":
            if pa.types.is_timestamp(typ):
                unit = "ns" if typ.unit == "ns" else "us"
                return col.cast(pa.timestamp(unit, tz="UTC"))
            if pa.types.is_null(typ):
                return pa.nulls(len(col), pa.timestamp("us", tz="UTC"))
            raise InvalidInputTypeError(
                f"column 'timestamp' must be an Arrow timestamp (UTC), got {typ}"
            )
        if name in ("tokens", "priority", "original_tokens"):
            if not (pa.types.is_integer(typ) or pa.types.is_null(typ)):
                raise InvalidInputTypeError(f"column {name!r} must be an integer column, got {typ}")
            return col.cast(pa.int64())
        if name in ("content", "kind", "source"):
            if not (pa.types.is_string(typ) or pa.types.is_large_string(typ) or pa.types.is_null(typ)
                    or pa.types.is_string_view(typ)):
                raise InvalidInputTypeError(f"column {name!r} must be a string column, got {typ}")
            return col.cast(pa.string())
        if name == "future_relevance_hint":
            if not (pa.types.is_floating(typ) or pa.types.is_integer(typ) or pa.types.is_null(typ)):
                raise InvalidInputTypeError(f"column {name!r} must be a float column, got {typ}")
            return col.cast(pa.float64())
        if name == "pinned":
            if not (pa.types.is_boolean(typ) or pa.types.is_null(typ)):
                raise InvalidInputTypeError(f"column 'pinned' must be a boolean column, got {typ}")
            return col.cast(pa.bool_())
        if name == "tags":
            if pa.types.is_null(typ):
                return pa.nulls(len(col), target)
            if not (pa.types.is_list(typ) or pa.types.is_large_list(typ)) or not (
                pa.types.is_string(typ.value_type) or pa.types.is_large_string(typ.value_type)
                or pa.types.is_null(typ.value_type)
            ):
                raise InvalidInputTypeError(f"column 'tags' must be list<string>, got {typ}")
            return col.cast(target)
        if name == "metadata":
            if pa.types.is_null(typ):
                return pa.nulls(len(col), target)
            if not pa.types.is_map(typ):
                raise InvalidInputTypeError(f"column 'metadata' must be map<string, string>, got {typ}")
            return col.cast(target)
    except pa.ArrowInvalid as e:
        raise InvalidInputTypeError(f"column {name!r} cannot be read as {target}: {e}") from None
    return col.cast(target)
