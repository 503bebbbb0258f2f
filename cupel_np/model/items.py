"""ContextItem (an immutable record) and ItemTable (the columnar store kernels run on)."""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from functools import cached_property
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cupel_np._files import PathOrPaths
from cupel_np.errors import InvalidConfigError, InvalidInputTypeError
from cupel_np.model._arrays import _dict_encoded, _one, _plain
from cupel_np.model._readers import one_line, read_items_table
from cupel_np.model.columns import ITEM_FIELDS, ITEM_SCHEMA, SET_COLUMN, _normalize
from cupel_np.model.datasets import RowSource
from cupel_np.model.decoded_rows import decoded_rows
from cupel_np.model.fields import (
    TOKEN_LIMIT,
    require_bool,
    require_keys,
    require_number,
)
from cupel_np.model.item_checks import (
    I64_MAX,
    I64_MIN,
    NO_METADATA,
    check_content,
    check_i64,
    check_label,
    check_metadata,
    check_tags,
    check_timestamp,
    check_tokens,
)
from cupel_np.text import ascii_fold, parse_rust_f64

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _restore(cls, kwargs: dict):
    """An unpickled item (``ContextItem.__reduce__``): the constructor called with the fields,
    a subclass's own fields included."""
    return cls(**kwargs)


#: The slot where a selection keeps an item's packed numeric record (``model.item_rows``;
#: the name carries the record's layout version; None until a selection has seen the item).
#: A slot is read at a fixed offset in the item: the ``__dict__`` look-up it replaced cost
#: ~1.5x as much per item, ~90 us of a 5,000-item selection.
RECORD_SLOT = "_cupel_np_row_v5"


@dataclass(frozen=True, eq=False)
class ContextItem:
    """One piece of context. Immutable; validated at construction.

    ``timestamp`` must be timezone-aware (it is converted to UTC); ``metadata`` maps strings to
    strings and is preserved untouched."""

    # the fields stay in the instance ``__dict__``; one slot holds the record a selection keeps
    __slots__ = (RECORD_SLOT, "__dict__", "__weakref__")

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
        # Each field has a fast path for the usual value (content: an exact, non-empty ASCII
        # str; kind and source: one starting with printable ASCII other than a space; an int
        # in range; a UTC timestamp; a tuple of ASCII tags; no metadata) that accepts only what
        # the full check (``item_checks``) accepts, with the same stored value; anything else
        # takes the full check, whose errors name the field. A service builds its items per
        # request: the checks were ~5 of ~6.3 us an item (tests/model/test_item_checks.py
        # holds the constructor to the full checks run in this order).
        set_ = object.__setattr__
        content = self.content
        if not (type(content) is str and content and content.isascii()):
            check_content(content)
        tokens = self.tokens
        if not (type(tokens) is int and -TOKEN_LIMIT < tokens < TOKEN_LIMIT):
            set_(self, "tokens", check_tokens(tokens, content))
        kind, source = self.kind, self.source
        if not (type(kind) is str and "!" <= kind[:1] <= "~" and kind.isascii()):
            check_label("kind", kind)
        if not (type(source) is str and "!" <= source[:1] <= "~" and source.isascii()):
            check_label("source", source)
        v = self.priority
        if v is not None and not (type(v) is int and I64_MIN <= v <= I64_MAX):
            set_(self, "priority", check_i64("priority", v))
        v = self.original_tokens
        if v is not None and not (type(v) is int and I64_MIN <= v <= I64_MAX):
            set_(self, "original_tokens", check_i64("original_tokens", v))
        tags = self.tags
        if type(tags) is not tuple or not all(type(t) is str and t.isascii() for t in tags):
            set_(self, "tags", check_tags(tags))
        md = self.metadata
        if type(md) is dict and not md:  # (an empty view over a dict no one holds: shared)
            set_(self, "metadata", NO_METADATA)
        else:
            set_(self, "metadata", check_metadata(md))
        ts = self.timestamp
        if ts is not None and not (type(ts) is datetime and ts.tzinfo is UTC):
            set_(self, "timestamp", check_timestamp(ts))
        h = self.future_relevance_hint
        if h is not None and type(h) is not float:
            set_(self, "future_relevance_hint", require_number("ContextItem.future_relevance_hint", h, optional=True))
        if type(self.pinned) is not bool:
            set_(self, "pinned", require_bool("ContextItem.pinned", self.pinned))
        # no record yet: a slot left unset raises on every read, and a selection's look-up
        # of new items would pay an exception per item
        set_(self, RECORD_SLOT, None)

    def __reduce__(self):
        """Pickle (and ``copy.deepcopy``) as the constructor call with the item's fields:
        ``metadata`` as a plain dict (a mappingproxy cannot be pickled), validated again on
        load. What a selection kept on the item (``model.item_rows``: its packed record and tag
        ids, which are this process's) is left behind; the loaded item makes its own."""
        kwargs = {f.name: getattr(self, f.name) for f in fields(self) if f.init}
        kwargs["metadata"] = dict(kwargs["metadata"])
        return (_restore, (type(self), kwargs))

    def __copy__(self) -> ContextItem:
        """The same fields (and whatever a selection kept on the item), not validated again."""
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        object.__setattr__(new, RECORD_SLOT, getattr(self, RECORD_SLOT, None))
        return new

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
        """The item as a plain dict (the spec's item fields; ``timestamp`` a ``datetime`` or
        None, ``tokens`` an int)."""
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


def _field_lists(items: list[ContextItem]) -> dict[str, list]:
    """Each of ``ITEM_FIELDS``' values over the items, a list per field. Comprehensions naming
    each field: CPython specialises their reads, ``getattr(it, name)`` looks each one up
    (5,000 items: ~1.0 ms against ~2.3 for the eleven fields)."""
    return {
        "content": [it.content for it in items],
        "tokens": [it.tokens for it in items],
        "kind": [it.kind for it in items],
        "source": [it.source for it in items],
        "priority": [it.priority for it in items],
        "tags": [it.tags for it in items],
        "metadata": [it.metadata for it in items],
        "timestamp": [it.timestamp for it in items],
        "future_relevance_hint": [it.future_relevance_hint for it in items],
        "pinned": [it.pinned for it in items],
        "original_tokens": [it.original_tokens for it in items],
    }


if tuple(_field_lists([])) != ITEM_FIELDS:  # pragma: no cover - a field added to one, not the other
    raise ImportError("items._field_lists does not list ITEM_FIELDS in order")


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
        cols = _field_lists(kept)
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
        canonical = set_column is None and sum(abs(t) for t in cols["tokens"]) < TOKEN_LIMIT / 2
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
        """Per row, whether ``timestamp`` holds a value (False where the column is null),
        bool."""
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
        """The ``priority`` column as int64 (0 where null; see ``priority_valid``); decoded on
        first use."""
        return self._priority[0]

    @property
    def priority_valid(self) -> np.ndarray:
        """Per row, whether ``priority`` holds a value, bool."""
        return self._priority[1]

    @cached_property
    def _original_tokens(self):
        return _int_values(self.table.column("original_tokens"))

    @property
    def original_tokens_col(self) -> np.ndarray:
        """The ``original_tokens`` column as int64 token counts (0 where null; see
        ``original_tokens_valid``)."""
        return self._original_tokens[0]

    @property
    def original_tokens_valid(self) -> np.ndarray:
        """Per row, whether ``original_tokens_col`` holds a value, bool."""
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
        """The ``future_relevance_hint`` column as float64 (0.0 where null; see
        ``hint_valid``)."""
        return self._hint[0]

    @property
    def hint_valid(self) -> np.ndarray:
        """Per row, whether ``hint`` holds a value, bool."""
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
        """The number of distinct exact (case-sensitive) tags in the table (the size of
        ``tag_vocab``)."""
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
        """The number of distinct ASCII-folded tags in the table."""
        return self._fold_tags[1]

    # -- lookups used by the scorers ----------------------------------------------------
    def kind_ids_for(self, kind: str) -> int:
        """The folded-kind id of ``kind`` in this table, -1 if no row has it."""
        return self._kind_index.get(ascii_fold(kind), -1)

    def tag_id_for(self, tag: str) -> int:
        """The exact (case-sensitive) tag id of ``tag`` in this table (an index into
        ``tag_vocab``), or -1 if no row has it."""
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
        return decoded_rows(self, np.array([i], dtype=np.int64), ContextItem)[0]

    def rows(self, rows: np.ndarray) -> list[ContextItem]:
        """``[self.row(r) for r in rows]``: one vectorized lookup when the table holds the
        ContextItems it was built from, else each column decoded once for all the rows.
        ``rows`` may also be a boolean mask over every row (the rows where it is set)."""
        idx = np.asarray(rows)
        if idx.dtype == np.bool_:
            if idx.shape != (self.n,):
                raise IndexError(
                    f"a boolean mask of rows must have one entry per row ({self.n}), got shape {idx.shape}"
                )
            rows = np.flatnonzero(idx)
        if self._items is None:
            return decoded_rows(self, rows, ContextItem)
        items = self._items
        return [items[i] for i in self.input_row[rows].tolist()]

    def placed_items(self, order: np.ndarray, k: int) -> list[ContextItem]:
        """``self.rows(order[:k])``, where ``order`` is a permutation of the rows
        (``sweep_run.placed_permutation``; ``ItemRows`` reorders a copy of its list)."""
        return self.rows(order[:k])

    def segment_of(self, key: object) -> int:
        """The index of the item set ``key`` in the table's set order (``key`` None for a table
        without a set column). Raises ``InvalidConfigError`` for an unknown key, naming the set
        column."""
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
        """The number of item sets in the table (1 without a set column)."""
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


def _int_values(col) -> tuple[np.ndarray, np.ndarray]:
    arr = col.combine_chunks()
    valid = arr.is_valid().to_numpy(zero_copy_only=False)
    vals = arr.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    return vals, valid
