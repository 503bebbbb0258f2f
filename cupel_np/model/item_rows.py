"""``ItemRows``: the ItemTable of one set of ContextItems, with its columns read straight from
the items and no Arrow table unless something asks for one.

One selection on a service's request (``Pipeline.run`` on a list of ContextItems) reads a
handful of columns: tokens, pinned flags, content and kind ids, and whatever its scorers and
placer need (timestamps, priorities, hints, tag ids). Building the Arrow table of every field
first costs more than the whole selection, so here each column is made from the items'
attributes, in the same dtypes and with the same ids the Arrow path gives (dictionary ids in
order of first occurrence, timestamps in UTC microseconds), and only when first read. The Arrow
table (metadata, extra columns, a report's strings) is built on first use, the long way.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from functools import cached_property
from itertools import repeat
from operator import attrgetter

import numpy as np
import pyarrow as pa

from cupel_np.model.fields import TOKEN_LIMIT
from cupel_np.model.items import ContextItem, ItemTable
from cupel_np.text import ascii_fold

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)
_NO_EXTRA = pa.table({})
_ONE_SET = np.zeros(2, dtype=np.int64)
#: the attributes the engine reads, fetched in one pass over the items (one visit to each
#: item's attribute dict: on thousands of items, one pass per column cost cache misses)
_FIELDS = attrgetter("tokens", "pinned", "content", "kind", "timestamp", "priority", "future_relevance_hint")


def _ids(values: Sequence) -> tuple[np.ndarray, dict]:
    """Dictionary ids in order of first occurrence (what ``pyarrow.compute.dictionary_encode``
    gives) and the value -> id map."""
    index = {v: i for i, v in enumerate(dict.fromkeys(values))}
    if len(index) == len(values):  # all distinct: ids in row order
        return np.arange(len(values), dtype=np.int64), index
    return np.fromiter(map(index.__getitem__, values), dtype=np.int64, count=len(values)), index


def _distinct_ids(values: Sequence) -> np.ndarray:
    """``_ids(values)[0]`` without the map (a set is the cheaper check that all differ)."""
    if len(set(values)) == len(values):
        return np.arange(len(values), dtype=np.int64)
    return _ids(values)[0]


def _all_valid(n: int) -> np.ndarray:
    return np.ones(n, dtype=np.bool_)


def _optional(values: Sequence, dtype) -> tuple[np.ndarray, np.ndarray]:
    """(values with None as 0, valid flags) as the Arrow path decodes a nullable column."""
    if None not in values:
        return np.array(values, dtype=dtype), _all_valid(len(values))
    valid = np.array([v is not None for v in values], dtype=np.bool_)
    return np.array([0 if v is None else v for v in values], dtype=dtype), valid


class ItemRows(ItemTable):
    """The single-set ItemTable of a list of valid ContextItems (``ItemRows.from_items``
    builds it; ``Pipeline`` runs on it): columns read from the items when first used, the Arrow table only on demand.
    Every column equals the one the Arrow path decodes (``tests/model/test_item_rows.py``)."""

    columns_from_metadata = True
    set_column = None
    timestamp_unit = "us"
    units_per_second = 1e6
    _extra = _NO_EXTRA

    def __init__(self, items: list[ContextItem], fields: list[tuple]):  # noqa: D107 - see the class
        n = len(items)
        self._items = items
        self._rows = items
        self.n = n
        self.set_keys = [None]
        self._cache = {}
        self._set_index = None
        tokens, pinned, content, kind, self._ts, self._prio, self._hints = fields
        self.tokens = np.array(tokens, dtype=np.int64)
        self.pinned = np.array(pinned, dtype=np.bool_)
        self.content_id = _distinct_ids(content)
        raw, raw_index = _ids(kind)
        fold: dict[str, int] = {}
        lut = np.array([fold.setdefault(ascii_fold(k), len(fold)) for k in raw_index], dtype=np.int64)
        self.kind_id = lut[raw] if n else raw
        self.kind_vocab = list(fold)
        self._kind_index = fold

    @classmethod
    def from_items(cls, items, set_column: str | None = None) -> ItemTable:
        """An ``ItemRows`` for a list or tuple of ContextItems (one set) whose token counts sum
        far below the limit; ``ItemTable.from_items`` (the Arrow path and its checks) for
        anything else."""
        if set_column is None and isinstance(items, (list, tuple)):
            kept = list(items)
            if all(map(isinstance, kept, repeat(ContextItem))):
                fields = list(zip(*map(_FIELDS, kept))) if kept else [()] * 7
                if sum(map(abs, fields[0])) < TOKEN_LIMIT / 2:  # else the loader's check runs and says so
                    return cls(kept, fields)
        return ItemTable.from_items(items, set_column)

    @cached_property
    def offsets(self) -> np.ndarray:  # type: ignore[override]
        """``[0, n]``: one set."""
        off = _ONE_SET.copy()
        off[1] = self.n
        return off

    @cached_property
    def input_row(self) -> np.ndarray:  # type: ignore[override]
        """Row ``i`` is input row ``i``."""
        return np.arange(self.n, dtype=np.int64)

    def rows(self, rows: np.ndarray) -> list[ContextItem]:
        """``[self.row(r) for r in rows]``: the items themselves (row ``i`` is item ``i``)."""
        idx = np.asarray(rows)
        if idx.dtype == np.bool_:
            return super().rows(idx)
        items = self._rows
        return [items[i] for i in idx.tolist()]

    # -- what the Arrow path would hold, built the long way on first use -----------------
    @cached_property
    def _arrow(self) -> ItemTable:
        return ItemTable.from_items(self._rows)

    @cached_property
    def table(self) -> pa.Table:
        """The Arrow table of the items (built on first use)."""
        return self._arrow.table

    @cached_property
    def content(self) -> pa.Array:
        """The content strings as an Arrow array (built on first use)."""
        return self._arrow.content

    # -- columns from the items' attributes ------------------------------------------------
    @cached_property
    def _timestamps(self) -> tuple[np.ndarray, np.ndarray]:
        ts = self._ts
        # exact integer microseconds since the epoch (the items hold UTC datetimes)
        if None not in ts:
            return np.fromiter([(t - _EPOCH) // _US for t in ts], dtype=np.int64, count=len(ts)), _all_valid(len(ts))
        valid = np.array([t is not None for t in ts], dtype=np.bool_)
        us = np.array([0 if t is None else (t - _EPOCH) // _US for t in ts], dtype=np.int64)
        return us, valid

    @cached_property
    def _priority(self):
        return _optional(self._prio, np.int64)

    @cached_property
    def _original_tokens(self):
        return _optional([it.original_tokens for it in self._rows], np.int64)

    @cached_property
    def _hint(self):
        return _optional(self._hints, np.float64)

    @cached_property
    def tag_offsets(self) -> np.ndarray:
        off = np.zeros(self.n + 1, dtype=np.int64)
        np.cumsum([len(it.tags) for it in self._rows], out=off[1:])
        return off

    @cached_property
    def _flat_tags(self) -> list[str]:
        return [t for it in self._rows for t in it.tags]

    @cached_property
    def _raw_tags(self):
        ids, index = _ids(self._flat_tags)
        return ids, pa.array(list(index), type=pa.string())

    @cached_property
    def tag_vocab(self) -> list[str]:
        return self._raw_tags[1].to_pylist()

    @cached_property
    def _fold_tags(self):
        ids, index = _ids([ascii_fold(t) for t in self._flat_tags])
        return ids, len(index)
