"""ContextItem (an immutable record) and ItemTable (the columnar store kernels run on)."""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from types import FrameType, MappingProxyType
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cupel_np._files import PathOrPaths
from cupel_np.errors import InvalidConfigError, InvalidInputTypeError
from cupel_np.model._readers import one_line, read_items_table
from cupel_np.model.datasets import RowSource
from cupel_np.model.fields import (
    TOKEN_LIMIT,
    require_bool,
    require_int,
    require_keys,
    require_mapping,
    require_nonblank,
    require_number,
    require_str,
    require_token_count,
)
from cupel_np.text import WHITE_SPACE_CLASS, ascii_fold, parse_rust_f64

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

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


def _encodable(field_name: str, s: str) -> None:
    """Strings must be valid Unicode text (UTF-8 encodable): a lone surrogate is not."""
    try:
        s.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InvalidConfigError(
            f"ContextItem.{field_name} is not valid Unicode text: lone surrogate "
            f"{s[e.start]!r} at character {e.start} (value {s[:40]!r})"
        ) from None


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
        require_str("ContextItem.content", self.content)
        if self.content == "":
            raise InvalidConfigError("ContextItem.content must be a non-empty string")
        _encodable("content", self.content)
        tokens = require_int("ContextItem.tokens", self.tokens, suffix=f" (content {self.content[:40]!r})")
        set_(self, "tokens", require_token_count("ContextItem.tokens", tokens))
        for name in ("kind", "source"):
            _encodable(name, require_nonblank(f"ContextItem.{name}", getattr(self, name)))
        for name in ("priority", "original_tokens"):
            v = getattr(self, name)
            if v is not None:
                v = require_int(f"ContextItem.{name}", v, optional=True)
                if not -(2**63) <= v < 2**63:
                    raise InvalidConfigError(f"ContextItem.{name} must fit in 64 bits, got {v}")
                set_(self, name, v)
        tags = self.tags
        if isinstance(tags, str) or not isinstance(tags, Iterable):
            raise InvalidInputTypeError(f"ContextItem.tags must be a sequence of strings, got {type(tags).__name__}")
        tags = tuple(tags)
        for t in tags:
            if not isinstance(t, str):
                raise InvalidInputTypeError(f"ContextItem.tags must contain strings, got {type(t).__name__} {t!r}")
            _encodable("tags", t)
        set_(self, "tags", tags)
        md = require_mapping(
            "ContextItem.metadata", self.metadata if self.metadata is not None else {}, "a mapping of str -> str"
        )
        for k, v in md.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise InvalidInputTypeError(
                    f"ContextItem.metadata must map strings to strings, got {k!r}: {v!r} ({type(v).__name__})"
                )
            _encodable("metadata", k)
            _encodable("metadata", v)
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
            set_(self, "timestamp", ts.astimezone(UTC))
        h = self.future_relevance_hint
        if h is not None:
            set_(self, "future_relevance_hint", require_number("ContextItem.future_relevance_hint", h, optional=True))
        set_(self, "pinned", require_bool("ContextItem.pinned", self.pinned))

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
SET_COLUMN = "__cupel_set__"
#: token counts and budgets stay below this so every sum fits in int64
_TOKEN_LIMIT = float(TOKEN_LIMIT)


class ItemTable:
    """Columnar item store. Rows are held grouped by item set (stable: input order is kept
    inside a set); ``input_row`` maps every stored row back to its input row and ``offsets``
    delimits the sets. Strings are encoded once: exact content ids, ASCII-folded kind and tag
    ids (the original strings are kept for output)."""

    #: True for tables built from ContextItems / dicts: a ColumnScorer reads ``metadata[column]``
    columns_from_metadata = False
    #: the ContextItems a table was built from (``from_items`` of ContextItems), by input row:
    #: ``row`` returns them instead of decoding the columns again (a small set's report is
    #: mostly that)
    _items: list[ContextItem] | None = None

    def __init__(
        self,
        table: pa.Table,
        set_column: str | None = None,
        *,
        source: RowSource | None = None,
        _canonical: bool = False,
    ):
        """``source``: where the rows were read from (``model.datasets.RowSource``), so an
        input error names the file and the row in that file. ``_canonical`` (``from_items``
        only): ``table`` is already in ITEM_SCHEMA and every check passes, so none is run."""
        # columns beyond the item fields (e.g. a similarity signal a ColumnScorer reads): kept
        # as given, in input order, and gathered only when a scorer asks (``extra_column``)
        self._extra = _extra_columns(table, set_column)
        if not (_canonical and set_column is None):
            table = _normalize(table, set_column, source)
        n = table.num_rows
        if set_column is not None:
            keys = table.column(SET_COLUMN).combine_chunks()
            enc = pc.dictionary_encode(keys)
            codes = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
            order = np.argsort(codes, kind="stable")
            counts = np.bincount(codes, minlength=len(enc.dictionary))
            self.set_keys = enc.dictionary.to_pylist()
            self.input_row = order.astype(np.int64)
            # the key column is now offsets + set_keys: keep no per-row copy of it
            table = table.drop_columns([SET_COLUMN]).take(pa.array(order))
        else:
            counts = np.array([n], dtype=np.int64)
            self.set_keys = [None]
            self.input_row = np.arange(n, dtype=np.int64)
        self.set_column = set_column
        self.offsets = np.zeros(len(counts) + 1, dtype=np.int64)
        np.cumsum(counts, out=self.offsets[1:])
        # one chunk per column, so the decoded views below share the table's buffers
        self.table = pa.Table.from_arrays([_one(c) for c in table.columns], names=table.column_names)
        self.n = n
        self._encode()
        self._cache: dict = {}
        self._set_index: dict | None = None

    # -- columns beyond the item fields (custom scorers) ----------------------------------
    @property
    def extra_columns(self) -> list[str]:
        """Names of the input's columns beyond the item fields (and the set column)."""
        return self._extra.column_names

    def extra_column(self, name: str) -> pa.Array:
        """Extra column ``name`` in grouped row order (KeyError when the input had none)."""
        ck = ("extra", name)
        if ck not in self._cache:
            if name not in self._extra.column_names:
                raise KeyError(name)
            col = _one(self._extra.column(name))
            if self.set_column is not None:
                col = col.take(pa.array(self.input_row))
            self._cache[ck] = col
        return self._cache[ck]

    def _renamed(self, set_column: str) -> ItemTable:
        self.set_column = set_column
        return self

    # -- construction -------------------------------------------------------------------
    @classmethod
    def from_items(cls, items: Iterable[ContextItem | Mapping], set_column: str | None = None) -> ItemTable:
        """From ContextItems or dicts with ContextItem's field names (plus the set column)."""
        sets: list = []
        kept: list[ContextItem] = []
        given = True  # every row was a ContextItem (the caller holds them: keeping them is free)
        for i, it in enumerate(items):
            if isinstance(it, ContextItem):
                item = it
                if set_column is not None:
                    raise InvalidConfigError("set_column needs dict rows carrying the set key; ContextItems have none")
            elif isinstance(it, Mapping):
                given = False
                d = dict(it)
                if set_column is not None:
                    if set_column not in d:
                        raise InvalidConfigError(f"row {i}: missing set column {set_column!r}")
                    # a set column may also be an item field (e.g. "kind"): then it stays one
                    sets.append(d[set_column] if set_column in ITEM_FIELDS else d.pop(set_column))
                require_keys(f"row {i}", d, ITEM_FIELDS)
                try:
                    item = ContextItem(**{k: v for k, v in d.items() if v is not None or k in ("content", "tokens")})
                except TypeError as e:
                    if isinstance(e, InvalidInputTypeError):
                        raise type(e)(f"row {i}: {e}") from None
                    raise InvalidConfigError(f"row {i}: {e}") from None
                except InvalidConfigError as e:
                    raise InvalidConfigError(f"row {i}: {e}") from None
            else:
                raise InvalidInputTypeError(f"row {i}: expected a ContextItem or a dict, got {type(it).__name__}")
            kept.append(item)
        cols: dict[str, list] = {f: [getattr(it, f) for it in kept] for f in ITEM_FIELDS}
        cols["metadata"] = [list(md.items()) for md in cols["metadata"]]
        arrays = [pa.array(cols[f.name], type=f.type) for f in ITEM_SCHEMA]
        names = list(ITEM_SCHEMA.names)
        if set_column is not None:
            try:
                arrays.append(pa.array(sets))
            except (pa.ArrowInvalid, pa.ArrowTypeError, UnicodeEncodeError) as e:
                raise InvalidConfigError(
                    f"set column {set_column!r}: keys of mixed or unsupported types ({one_line(e)})"
                ) from None
            names.append(set_column if set_column not in ITEM_FIELDS else "__set_key__")
            if set_column in ITEM_FIELDS:
                out = cls(pa.Table.from_arrays(arrays, names=names), set_column="__set_key__")._renamed(set_column)
                out.columns_from_metadata = True
                return out
        # ContextItems are valid one by one, and the columns above are ITEM_SCHEMA's: the
        # loader's checks (``check_items``) would only recast them, except the sum of the
        # token counts, which must stay far below 2**63 to skip them (else they run and say so)
        canonical = set_column is None and sum(abs(t) for t in cols["tokens"]) < _TOKEN_LIMIT / 2
        out = cls(pa.Table.from_arrays(arrays, names=names), set_column=set_column, _canonical=canonical)
        out.columns_from_metadata = True
        # rows made here from dicts are not kept: a big table would hold them all twice
        out._items = kept if given else None
        return out

    @classmethod
    def from_arrow(cls, data: Any, set_column: str | None = None, *, source: RowSource | None = None) -> ItemTable:
        """From anything ``pyarrow.table()`` accepts (Arrow tables, pandas / polars frames,
        dicts of columns) with snake_case ContextItem column names. pandas' and polars' own
        column types are accepted: categorical strings, string views, nullable integers as
        float64 (NaN is null), metadata as dicts (a struct) or as key/value lists. ``source``:
        the Parquet rows the data came from (errors then name the file and its row)."""
        if not isinstance(data, pa.Table):
            try:
                data = pa.table(data)
            except Exception as e:  # pyarrow raises several types here
                raise InvalidInputTypeError(f"cannot read items as an Arrow table: {e}") from None
        return cls(data, set_column=set_column, source=source)

    @classmethod
    def from_parquet(
        cls,
        path: PathOrPaths,
        set_column: str | None = None,
        *,
        filter: pc.Expression | None = None,
    ) -> ItemTable:
        """From a Parquet file, a directory of them (hive partition columns are ordinary
        columns, usable as the set column or in ``filter``, a ``pyarrow.compute``
        expression), a glob pattern or a list of files; rows in file order. An input error
        names the file (the part file of a dataset), the column, the row in that file and the
        value."""
        return cls(read_items_table(path, filter=filter), set_column=set_column, source=RowSource(path, filter))

    # -- encoding -----------------------------------------------------------------------
    def _encode(self) -> None:
        """What every sweep reads, decoded now; the rest on first use (below). Arrow columns
        are the table's own buffers, and ``tokens`` is one buffer shared by the table and
        NumPy (see ``resident_bytes``)."""
        t = self.table
        self.content = _one(t.column("content"))
        self.content_id = pc.dictionary_encode(self.content).indices.to_numpy(zero_copy_only=False).astype(np.int64)
        self.tokens = _one(t.column("tokens")).to_numpy(zero_copy_only=False).astype(np.int64)
        # the table's tokens column becomes a zero-copy view of the (writable) NumPy array
        self.table = t = t.set_column(t.schema.get_field_index("tokens"), "tokens", pa.array(self.tokens))
        # repetitive strings are held dictionary-encoded (int32 codes + the distinct values);
        # ``kind``, ``source``, ``tags`` and ``metadata`` decode them when read
        for name in ("kind", "source", "tags", "metadata"):
            t = t.set_column(t.schema.get_field_index(name), name, _dict_encoded(_one(t.column(name))))
        self.table = t
        kd = _one(t.column("kind"))
        kenc = pc.dictionary_encode(pc.ascii_lower(kd.dictionary))
        self.kind_id = kenc.indices.take(kd.indices).to_numpy(zero_copy_only=False).astype(np.int64)
        self.kind_vocab: list[str] = kenc.dictionary.to_pylist()
        self._kind_index = {k: i for i, k in enumerate(self.kind_vocab)}
        ts_type = t.schema.field("timestamp").type
        self.timestamp_unit = ts_type.unit
        self.units_per_second = {"s": 1.0, "ms": 1e3, "us": 1e6, "ns": 1e9}[ts_type.unit]
        self.pinned = _one(t.column("pinned")).to_numpy(zero_copy_only=False).astype(np.bool_)

    @cached_property
    def _timestamps(self) -> tuple[np.ndarray, np.ndarray]:
        ts = _one(self.table.column("timestamp"))
        valid = ts.is_valid().to_numpy(zero_copy_only=False)
        return ts.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64), valid

    @property
    def timestamp(self) -> np.ndarray:
        """Timestamps in ``timestamp_unit`` (0 where null), int64; decoded on first use."""
        return self._timestamps[0]

    @property
    def timestamp_valid(self) -> np.ndarray:
        return self._timestamps[1]

    @cached_property
    def kind(self) -> pa.Array:
        """The kind strings as given, decoded on first use (reports read them row by row;
        a sweep reads ``kind_id`` only)."""
        return _plain(_one(self.table.column("kind")))

    @cached_property
    def source(self) -> pa.Array:
        """The source strings as given, decoded on first use."""
        return _plain(_one(self.table.column("source")))

    @property
    def tags(self) -> pa.Array:
        """list<string> per row (decoded on each read; the tag scorers read the ids, decoded
        once)."""
        return _plain(_one(self.table.column("tags")))

    @property
    def metadata(self) -> pa.Array:
        """map<string, string> per row (decoded on each read)."""
        return _plain(_one(self.table.column("metadata")))

    @cached_property
    def tag_offsets(self) -> np.ndarray:
        offs = _one(self.table.column("tags")).offsets.to_numpy(zero_copy_only=False).astype(np.int64)
        return offs - offs[0]

    def resident_bytes(self) -> dict[str, int]:
        """Bytes this table holds, by attribute: NumPy arrays and Arrow buffers, each buffer
        counted once however many attributes share it (columns decoded lazily count only once
        decoded). ``sum(...) / n`` is the resident bytes per input row."""
        seen: dict = {}
        out: dict[str, int] = {}

        def add(x) -> None:
            if isinstance(x, np.ndarray):
                base = x
                while isinstance(base.base, np.ndarray):
                    base = base.base
                seen.setdefault(base.__array_interface__["data"][0], base.nbytes)
            elif isinstance(x, pa.ChunkedArray):
                for ch in x.chunks:
                    add(ch)
            elif isinstance(x, pa.Array):
                for buf in x.buffers():
                    if buf is not None:
                        seen.setdefault(buf.address, buf.size)
            elif isinstance(x, pa.Table):
                for col in x.columns:
                    add(col)
            elif isinstance(x, (tuple, list)) and x and all(isinstance(v, (np.ndarray, pa.Array)) for v in x):
                for v in x:
                    add(v)

        for name, value in list(vars(self).items()) + [(f"cache{k}", v) for k, v in self._cache.items()]:
            before = sum(seen.values())
            add(value)
            if isinstance(value, list) and len(value) and not isinstance(value[0], (np.ndarray, pa.Array)):
                out[name] = sys.getsizeof(value) + sum(sys.getsizeof(v) for v in value)  # set keys, vocabularies
            else:
                out[name] = sum(seen.values()) - before
        return out

    # -- columns encoded on first use (a sweep that never reads them never pays for them) --
    @cached_property
    def _priority(self):
        return _int_values(self.table.column("priority"))

    @property
    def priority(self) -> np.ndarray:
        return self._priority[0]

    @property
    def priority_valid(self) -> np.ndarray:
        return self._priority[1]

    @cached_property
    def _original_tokens(self):
        return _int_values(self.table.column("original_tokens"))

    @property
    def original_tokens_col(self) -> np.ndarray:
        return self._original_tokens[0]

    @property
    def original_tokens_valid(self) -> np.ndarray:
        return self._original_tokens[1]

    @cached_property
    def _hint(self):
        hint = self.table.column("future_relevance_hint").combine_chunks()
        return (
            hint.fill_null(0.0).to_numpy(zero_copy_only=False).astype(np.float64),
            hint.is_valid().to_numpy(zero_copy_only=False),
        )

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
        """Row ``i`` (grouped order) as a ContextItem (for a table built by ``from_items``,
        the very item it was built from)."""
        i = int(i)
        if self._items is not None:
            return self._items[int(self.input_row[i])]
        ts = None
        if self.timestamp_valid[i]:
            ts = _to_datetime(int(self.timestamp[i]), self.timestamp_unit)
        col = self.table.column
        md = _plain(_one(col("metadata")).slice(i, 1))[0].as_py() or []
        return ContextItem(
            content=self.content[i].as_py(),
            tokens=int(self.tokens[i]),
            kind=_one(col("kind"))[i].as_py(),
            source=_one(col("source"))[i].as_py(),
            priority=int(self.priority[i]) if self.priority_valid[i] else None,
            tags=tuple(_plain(_one(col("tags")).slice(i, 1))[0].as_py() or ()),
            metadata=dict(md),
            timestamp=ts,
            future_relevance_hint=float(self.hint[i]) if self.hint_valid[i] else None,
            pinned=bool(self.pinned[i]),
            original_tokens=int(self.original_tokens_col[i]) if self.original_tokens_valid[i] else None,
        )

    def segment_of(self, key: object) -> int:
        if self.set_column is None:
            if key is not None:
                raise InvalidConfigError("this ItemTable has no set column; use set key None")
            return 0
        if self._set_index is None:
            self._set_index = {k: i for i, k in enumerate(self.set_keys)}
        try:
            return self._set_index[key]
        except (KeyError, TypeError):
            raise InvalidConfigError(f"no item set with key {key!r} in set column {self.set_column!r}") from None

    def subset(self, key: object) -> ItemTable:
        """One item set as its own single-set ItemTable (rows in input order)."""
        seg = self.segment_of(key)
        lo, hi = int(self.offsets[seg]), int(self.offsets[seg + 1])
        part = self.table.slice(lo, hi - lo)
        part = pa.Table.from_arrays([_plain(_one(c)) for c in part.columns], names=part.column_names)
        if SET_COLUMN in part.column_names:
            part = part.drop_columns([SET_COLUMN])
        for name in self.extra_columns:
            if name not in part.column_names:
                part = part.append_column(name, self.extra_column(name).slice(lo, hi - lo))
        return ItemTable(part)

    @property
    def n_sets(self) -> int:
        return len(self.set_keys)

    def __len__(self) -> int:
        return self.n

    def __repr__(self) -> str:
        return f"ItemTable(rows={self.n}, sets={self.n_sets}, set_column={self.set_column!r})"


def _extra_columns(table, set_column: str | None) -> pa.Table:
    """The columns of ``table`` that are neither item fields nor the set column (the first of
    repeated names); an empty table when ``table`` is not an Arrow table (the check reports it)."""
    if not isinstance(table, pa.Table):
        return pa.table({})
    skip = set(ITEM_FIELDS) | {SET_COLUMN, "__set_key__"} | ({set_column} if set_column is not None else set())
    keep, seen = [], set()
    for i, nm in enumerate(table.column_names):
        if nm not in skip and nm not in seen:
            seen.add(nm)
            keep.append(i)
    return table.select(keep)


def _to_datetime(v: int, unit: str) -> datetime:
    from datetime import timedelta

    if unit == "ns":
        return _EPOCH + timedelta(microseconds=v // 1000)
    mult = {"s": 1_000_000, "ms": 1000, "us": 1}[unit]
    return _EPOCH + timedelta(microseconds=v * mult)


def _int_values(col) -> tuple[np.ndarray, np.ndarray]:
    arr = col.combine_chunks()
    valid = arr.is_valid().to_numpy(zero_copy_only=False)
    vals = arr.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    return vals, valid


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

    @staticmethod
    def _site() -> tuple:
        """Where in ``check_items`` a problem is reported (its call lines, and the column the
        checks loop is at): messages are listed in this order, so a streamed check lists them
        in the order of the whole-table check whichever chunk found them first."""
        lines: list[int] = []
        f: FrameType | None = sys._getframe(2)
        col_i = -1
        while f is not None and f.f_code.co_name != "check_items":
            lines.append(f.f_lineno)
            col = f.f_locals.get("name")
            if isinstance(col, str) and col in ITEM_FIELDS:
                col_i = ITEM_FIELDS.index(col)
            f = f.f_back
        if f is None:
            return (0,)
        return (f.f_lineno, col_i, *reversed(lines))

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

    def table(self, message: str, cls=InvalidConfigError) -> None:
        """A problem of the table as a whole (a missing or repeated column, a column type)."""
        message = one_line(message)
        if not self.collect:
            raise cls(message if self.source is None else f"{self.source.description}: {message}")
        self.reported += 1
        self._entries.setdefault(("table", message), (self._site(), [message]))

    def rows(self, where: str, what: str, mask, values=None, cls=InvalidConfigError) -> bool:
        """Rows where ``mask`` holds have problem ``what``; ``values(row)`` gives a row's value
        (row local to this chunk). Returns whether there were any."""
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
            self._entries[key] = (self._site(), [where, what, [], 0])
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


def _dict_encoded(col: pa.Array) -> pa.Array:
    """A string column, or the strings inside a list / map column, dictionary-encoded."""
    if pa.types.is_string(col.type):
        return pc.dictionary_encode(col)
    if col.null_count:  # the checked table has none; keep any as they are
        return col
    if pa.types.is_map(col.type):
        return pa.MapArray.from_arrays(col.offsets, pc.dictionary_encode(col.keys), pc.dictionary_encode(col.items))
    if pa.types.is_list(col.type) or pa.types.is_large_list(col.type):
        return type(col).from_arrays(col.offsets, pc.dictionary_encode(col.values))
    return col


def _plain(col: pa.Array) -> pa.Array:
    """The inverse of ``_dict_encoded``."""
    t = col.type
    if pa.types.is_dictionary(t):
        return col.dictionary_decode()
    if pa.types.is_map(t) and pa.types.is_dictionary(t.key_type):
        return pa.MapArray.from_arrays(col.offsets, col.keys.dictionary_decode(), col.items.dictionary_decode())
    if (pa.types.is_list(t) or pa.types.is_large_list(t)) and pa.types.is_dictionary(t.value_type):
        return type(col).from_arrays(col.offsets, col.values.dictionary_decode())
    return col


def _one(col) -> pa.Array:
    """A column as one Arrow array, without a copy when it already is one chunk."""
    if isinstance(col, pa.ChunkedArray):
        return col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
    return col


def _np(arr) -> np.ndarray:
    return arr.to_numpy(zero_copy_only=False)


def _py(arr):
    return lambda r: arr[r].as_py()


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
        problems.rows(where, "invalid UTF-8", bad, lambda r: raw[r])
    else:
        problems.rows(where, "invalid UTF-8", mask_rows(bad))
    return bad


def _without_views(col: pa.Array) -> pa.Array:
    """``string_view`` / ``binary_view`` as their large (offset) types: Arrow's take and
    dictionary kernels do not handle views (Polars hands them over)."""
    if pa.types.is_string_view(col.type):
        return col.cast(pa.large_string())
    if pa.types.is_binary_view(col.type):
        return col.cast(pa.large_binary())
    return col


def _decoded(col: pa.Array) -> pa.Array:
    """A dictionary array decoded (Polars Categorical / Enum, pandas category); other arrays as
    they are. Decoding is a take from the dictionary, with views made takeable first."""
    if not pa.types.is_dictionary(col.type):
        return col
    return _without_views(_decoded(col.dictionary)).take(col.indices)


def _is_stringish(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)


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
            f"column {name!r} must be a string column (UTF-8 string or binary), got {typ}", InvalidInputTypeError
        )
        return None
    if binary:
        col = col.cast(pa.large_binary()).view(pa.large_string())  # same layout; checked next
    col = _nulled(_without_views(col), _utf8_check(col, where, problems))
    try:
        return col.cast(pa.string())
    except pa.ArrowException as e:  # e.g. more than 2 GiB of text in one column
        problems.table(f"column {name!r} cannot be read as string: {e}")
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
            problems.rows(where, "does not fit in a 64-bit signed integer", big, _py(col))
            col = _nulled(col, big)
        return col.cast(pa.int64())
    if pa.types.is_floating(typ):
        col = col.cast(pa.float64())
        col = pc.if_else(pc.is_nan(col), pa.nulls(len(col), pa.float64()), col)  # pandas' null
        whole = pc.and_(pc.is_finite(col), pc.equal(pc.floor(col), col))
        fits = pc.and_(pc.greater_equal(col, -(2.0**63)), pc.less(col, 2.0**63))
        bad = _np(pc.fill_null(pc.invert(pc.and_(whole, fits)), False))
        what = "is not a whole number that fits in 64 bits (an integer column)"
        problems.rows(where, what, bad, _py(col), cls=InvalidInputTypeError)
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
            problems.rows(where, "is not an integer that fits in 64 bits", bad, lambda r: str(vals[r]))
            return _nulled(col, bad).cast(pa.int64())
    problems.table(
        f"column {name!r} must be an integer column (or whole numbers as floats or decimals), got {typ}",
        InvalidInputTypeError,
    )
    return None


def _float_col(name: str, col: pa.Array, problems: Problems):
    typ = col.type
    if pa.types.is_null(typ):
        return pa.nulls(len(col), pa.float64())
    if pa.types.is_floating(typ) or pa.types.is_integer(typ) or pa.types.is_decimal(typ):
        return col.cast(pa.float64(), safe=False)  # nearest double, like float() on the value
    problems.table(f"column {name!r} must be a float column, got {typ}", InvalidInputTypeError)
    return None


def _bool_col(name: str, col: pa.Array, problems: Problems):
    typ = col.type
    if pa.types.is_null(typ) or pa.types.is_boolean(typ):
        return col.cast(pa.bool_())
    problems.table(f"column {name!r} must be a boolean column, got {typ}", InvalidInputTypeError)
    return None


def _timestamp_col(name: str, col: pa.Array, problems: Problems):
    """Any unit and zone (a zone-less timestamp is UTC); held as microseconds since the epoch,
    UTC, within Python datetime's years 1-9999 (sub-microsecond parts are dropped)."""
    typ = col.type
    target = pa.timestamp("us", tz="UTC")
    if pa.types.is_null(typ):
        return pa.nulls(len(col), target)
    if not pa.types.is_timestamp(typ):
        problems.table(f"column {name!r} must be an Arrow timestamp (UTC), got {typ}", InvalidInputTypeError)
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
        f"column {name!r}", f"is outside years 1-9999 (raw {typ.unit} value)", _np(out_of_range), _py(raw)
    ):
        return None
    try:
        return col.cast(target, safe=False)  # in range: only sub-microsecond digits are dropped
    except pa.ArrowException as e:  # e.g. an unknown time zone name
        problems.table(f"column {name!r} cannot be read as {target}: {e}", InvalidInputTypeError)
        return None


def _string_child_type(t: pa.DataType) -> bool:
    if pa.types.is_dictionary(t):
        t = t.value_type
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t) or pa.types.is_null(t)


def _is_listy(t: pa.DataType) -> bool:
    return (
        pa.types.is_list(t)
        or pa.types.is_large_list(t)
        or pa.types.is_fixed_size_list(t)
        or pa.types.is_list_view(t)
        or pa.types.is_large_list_view(t)
    )


def _list_parts(col: pa.Array) -> tuple[np.ndarray, pa.Array]:
    """(int64 offsets, logical values) of any list-like array (null lists are empty): pyarrow
    26 casts list_view -> list into an invalid array, so lists are rebuilt from these."""
    sizes = _np(pc.list_value_length(col).fill_null(0)).astype(np.int64)
    offsets = np.zeros(len(col) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    return offsets, col.flatten()


def _tags_col(name: str, col: pa.Array, problems: Problems, n: int):
    typ = col.type
    target = pa.list_(pa.string())
    if pa.types.is_null(typ):
        return pa.nulls(len(col), target)
    if not _is_listy(typ) or not _string_child_type(typ.value_type):
        problems.table(f"column {name!r} must be list<string>, got {typ}", InvalidInputTypeError)
        return None
    try:
        if not pa.types.is_list(typ) or not pa.types.is_string(typ.value_type):
            # rebuild as a plain list array from the logical values (Categorical tags decoded)
            offsets, values = _list_parts(col)
            values = _without_views(_decoded(values))
            col = pa.LargeListArray.from_arrays(pa.array(offsets), values, mask=col.is_null())
        col = col.cast(target)
    except pa.ArrowException as e:
        problems.table(f"column {name!r} cannot be read as {target}: {e}", InvalidInputTypeError)
        return None
    # null list -> empty list
    if col.null_count:
        col = pc.if_else(col.is_null(), pa.scalar([], type=target), col)
    offs = _np(col.offsets).astype(np.int64)
    values = col.values.slice(offs[0], offs[-1] - offs[0]) if n else col.values.slice(0, 0)
    rows = lambda m: _rows_of_children(offs, m, n)  # noqa: E731
    ok = _utf8_check(values, f"column {name!r}", problems, rows) is None
    if values.null_count and problems.rows(f"column {name!r}", "a tag is null", rows(_np(values.is_null())), None):
        ok = False
    return col if ok else None


def _plain_strings(arr: pa.Array) -> pa.Array:
    """Any string-like array (dictionary, view, large, all-null) as plain ``string``."""
    arr = _without_views(_decoded(arr))
    return arr.cast(pa.string())


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
            problems.table(f"{where} must be map<string, string>, got {col.type}", InvalidInputTypeError)
            return None
        if entries.null_count and problems.rows(
            where, "a metadata entry is null", _rows_of_children(offsets, _np(entries.is_null()), n)
        ):
            return None
        keys, items = entries.field("key"), entries.field("value")
    elif _is_listy(et) and _string_child_type(et.value_type):
        sizes = _np(pc.list_value_length(entries).fill_null(0))
        bad = (sizes != 2) | _np(entries.is_null())
        if problems.rows(where, "a metadata entry is not a [key, value] pair", _rows_of_children(offsets, bad, n)):
            return None
        flat = entries.flatten()
        keys, items = flat.take(pa.array(np.arange(0, len(flat), 2))), flat.take(pa.array(np.arange(1, len(flat), 2)))
    else:
        problems.table(f"{where} must be map<string, string>, got {col.type}", InvalidInputTypeError)
        return None
    if keys.null_count and problems.rows(
        where, "a metadata key is null", _rows_of_children(offsets, _np(keys.is_null()), n)
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
        problems.table(f"column {name!r} must be map<string, string>, got {typ}", InvalidInputTypeError)
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
        problems.table(f"column {name!r} cannot be read as {target}: {e}", InvalidInputTypeError)
        return None
    offs = _np(col.offsets).astype(np.int64)
    keys = col.keys.slice(offs[0], offs[-1] - offs[0])
    items = col.items.slice(offs[0], offs[-1] - offs[0])
    rows = lambda m: _rows_of_children(offs, m, n)  # noqa: E731
    ok = _utf8_check(keys, f"column {name!r}", problems, rows) is None
    ok = _utf8_check(items, f"column {name!r}", problems, rows) is None and ok
    if items.null_count and problems.rows(
        f"column {name!r}", "a metadata value is null (values must be strings)", rows(_np(items.is_null())), None
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
        problems.table(f"{where} must hold strings or integers, got {typ}", InvalidInputTypeError)
        return None
    if problems.rows(where, "null (every row needs a set key)", nulls):
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
            "names must be unique"
        )
    for req in ("content", "tokens"):
        if req not in names:
            problems.table(f"items table has no {req!r} column (columns: {', '.join(names)})")
    if set_column is not None and set_column not in names:
        problems.table(f"set column {set_column!r} not found (columns: {', '.join(names)})")
    return repeated


def _check_rows(cols: dict, nulls: dict, n: int, problems: Problems) -> None:
    """The row checks over the read columns. Null checks use the column as given (``nulls``),
    so a value a reader already refused (and read as null) is not reported twice, and every
    check runs whatever another found: the same problems whole or in chunks."""
    content = cols.get("content")
    if content is not None and n:
        problems.rows("column 'content'", "null", nulls["content"])
        empty = pc.fill_null(pc.equal(pc.utf8_length(content), 0), False)
        problems.rows("column 'content'", "empty string", _np(empty))
    tokens = cols.get("tokens")
    if tokens is not None and n:
        problems.rows("column 'tokens'", "null", nulls["tokens"])
        mag = np.abs(_np(tokens.fill_null(0)).astype(np.float64))
        running = problems.running_tokens + np.cumsum(mag)  # carried across streamed chunks
        problems.running_tokens = float(running[-1])
        problems.rows(
            "column 'tokens'",
            f"the token counts add up past {_TOKEN_LIMIT:.3g} (sums must fit in 64-bit integers)",
            running >= _TOKEN_LIMIT,
            _py(tokens),
        )
    for name in ("kind", "source"):
        col = cols.get(name)
        if col is not None and n:
            blank = pc.fill_null(pc.match_substring_regex(col, f"^[{WHITE_SPACE_CLASS}]*$"), False)
            problems.rows(f"column {name!r}", "empty or whitespace-only", _np(blank), _py(col))


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
    repeated = _check_names(names, set_column, problems)
    cols: dict[str, pa.Array | None] = {}
    nulls: dict[str, np.ndarray] = {}
    for f in ITEM_SCHEMA:
        name = f.name
        if name not in names or name in repeated:
            continue
        col = _column(table, name)
        nulls[name] = _np(col.is_null())
        if name == "tags":
            cols[name] = _tags_col(name, col, problems, n)
        elif name == "metadata":
            cols[name] = _metadata_col(name, col, problems, n)
        else:
            cols[name] = _READERS[name](name, col, problems)
    _check_rows(cols, nulls, n, problems)
    keys = None
    if set_column is not None and set_column in names and set_column not in repeated:
        keys = _set_key_col(set_column, _column(table, set_column), problems, n)
    if problems.reported > before or any(cols.get(k) is None for k in cols):
        return None
    if "content" not in cols or "tokens" not in cols or (set_column is not None and keys is None):
        return None
    return _canonical(cols, keys, n, set_column)


def _normalize(table: pa.Table, set_column: str | None, source: RowSource | None = None) -> pa.Table:
    """The loader's check: raises the first problem (file, column, row and value)."""
    return check_items(table, set_column, Problems(collect=False, source=source))
