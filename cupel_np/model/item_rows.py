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

import struct
import threading
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from functools import cached_property
from itertools import chain, compress, count, repeat
from operator import attrgetter, countOf

import numpy as np
import pyarrow as pa

from cupel_np.model.fields import TOKEN_LIMIT
from cupel_np.model.items import RECORD_SLOT, ContextItem, ItemTable
from cupel_np.model.object_take import first_of_permutation, take_objects
from cupel_np.model.tag_ids import look_up_all, looked_up_tag_ids, tag_ids
from cupel_np.text import ascii_fold

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)
_NO_EXTRA = pa.table({})
_ONE_SET = np.zeros(2, dtype=np.int64)

#: Where an item keeps its numeric record (below; ``ContextItem``'s slot): a ContextItem is
#: immutable, so the record, made from its fields the first time a selection reads it, stays
#: right for the item's life (``copy.copy`` carries it along with the same fields;
#: ``dataclasses.replace`` builds a new item, without one).
ROW_KEY = RECORD_SLOT
#: the record: tokens, timestamp (UTC microseconds since the epoch, 0 when None), priority
#: (0 when None), future_relevance_hint (0.0 when None), the number of tags, the process-wide
#: id of the folded kind (``_kind_gid``; -1 once the kind ids are all given), the content's
#: ``hash`` (this process's: records are never pickled), then pinned and the three "has a
#: value" flags; 60 bytes, native byte order, no padding
_PACK = struct.Struct("=qqqdqqq????").pack
_RECORD = np.dtype(
    {
        "names": [
            "tokens",
            "timestamp",
            "priority",
            "hint",
            "n_tags",
            "kind",
            "content_hash",
            "pinned",
            "timestamp_valid",
            "priority_valid",
            "hint_valid",
        ],
        "formats": ["i8", "i8", "i8", "f8", "i8", "i8", "i8", "?", "?", "?", "?"],
        "offsets": [0, 8, 16, 24, 32, 40, 48, 56, 57, 58, 59],
        "itemsize": 60,
    }
)
# Per-item reads are comprehensions, not ``map(attrgetter(..))``: CPython specialises their reads
# (5,000 items on 3.11: 71 us against 155 for the record slot, 88 against 163 for tokens)


def _held(items) -> list:
    """Each item's record slot (``ROW_KEY``: the comprehension names it; checked below)."""
    return [it._cupel_np_row_v5 for it in items]


if ROW_KEY != "_cupel_np_row_v5":  # pragma: no cover - a new record layout renames the slot
    raise ImportError(f"item_rows._held reads _cupel_np_row_v5, the record slot is {ROW_KEY}")
#: writes an item's record slot (the item is frozen: its own ``__setattr__`` refuses)
_SET = object.__setattr__
_ACCUMULATE = np.add.accumulate
_MAX = np.maximum.reduce
_MIN = np.minimum.reduce
_NUMERIC = attrgetter("tokens", "pinned", "timestamp", "priority", "future_relevance_hint", "tags", "content")


#: what an item a selection has seen once holds under ``ROW_KEY`` (no record yet: falsy; a
#: new item holds None)
_SEEN_ONCE = b""
#: the fewest new items read column by column from their attributes: below, Arrow's and
#: NumPy's per-call costs exceed what the records cost, and the items get theirs at once
COLD_MIN = 256
#: a list with at most one item in this many new to selections counts as seen before: the
#: frequency scorer keeps tag ids on its new items (``ItemRows.frequency_tags``)
_FEW_NEW = 8
#: a list of at least ``COLD_MIN`` new items marks every this-many-th item as seen once (not
#: each: marking is a dict write per item, ~8% of a first selection of 500 items)
_MARK_STRIDE = 8


def _records(
    items: list[ContextItem], cold_min: int | None = None, *, joined: bytes | None = None, read: bool = False
) -> tuple[np.ndarray | None, int]:
    """Every item's numeric record (``_RECORD``), read-only, and how many of them were made
    now (0: every item had its record already); ``(None, len(items))`` for a list of items no
    selection has read before (each is marked as seen once, and the table reads the columns it
    needs from the attributes).

    A record costs more to make (a packed struct per item, its timestamp converted on its
    own) than the columns a selection reads, so it is made the second time a selection sees
    the item: a request whose items were all built for it makes none, and a selection over
    items it has seen twice reads one attribute per item and converts nothing. Fewer than
    ``COLD_MIN`` new items get their records at once (``cold_min``: the caller's threshold
    instead, see ``ItemRows.from_items``). Whether a long list was seen before is read from a
    sample of its items (``_MARK_STRIDE``): the records are the same either way, only when
    they are made differs. ``read``: the caller read the records the items hold (``joined``,
    ``_held_records``), so they are not read again."""
    cold = COLD_MIN if cold_min is None else cold_min
    buf = joined if read else _held_records(items)
    if buf is None:  # an item no selection has seen
        if len(items) >= cold:
            # every ``_MARK_STRIDE``-th item stands for the list: what each held, then each
            # marked (frozen: the item's __setattr__ refuses; object's does not). A list whose
            # sampled items were all seen before gets its records; one with a new sampled
            # item and none with a record (new, or seen once) needs none
            sample = items[::_MARK_STRIDE]
            held = list(map(getattr, sample, repeat(ROW_KEY), repeat(None)))
            if None in held and not any(held):
                for it, h in zip(sample, held):
                    if h is None:
                        _SET(it, ROW_KEY, _SEEN_ONCE)
                return None, len(items)
    elif len(buf) == _RECORD.itemsize * len(items):
        return np.frombuffer(buf, dtype=_RECORD), 0
    short = len(items) < cold  # few: no kind ids (their string path costs as little there)
    # records for those without (new, seen once, or beside items with records: a conversation's
    # next turn), found in what the items hold; the list of records is then joined as it is
    try:
        recs: list = _held(items)
    except AttributeError:  # an item whose slot was never set (a subclass that skips __post_init__)
        recs = [getattr(it, ROW_KEY, None) for it in items]
    missing = [i for i, r in enumerate(recs) if not r]
    for i in missing:
        it = items[i]
        tokens, pinned, ts, prio, hint, tags, content = _NUMERIC(it)  # (inline: a call per item costs 10%)
        recs[i] = rec = _PACK(
            tokens,
            0 if ts is None else (ts - _EPOCH) // _US,
            0 if prio is None else prio,
            0.0 if hint is None else hint,
            len(tags),
            -1 if short else _KIND_GID[it.kind],  # (given on a miss: ``_KindIds.__missing__``)
            hash(content),
            pinned,
            ts is not None,
            prio is not None,
            hint is not None,
        )
        _SET(it, ROW_KEY, rec)
    return np.frombuffer(b"".join(recs), dtype=_RECORD), len(missing)


def _held_records(items: Sequence[object]) -> bytes | None:
    """The records the items hold, joined; None when an item holds none (new to selections)
    or is no ContextItem (it has no such attribute, or one that is not bytes). The first and
    the last item are looked at first: a list of new items, or one with a new item at its end
    (a conversation's next turn), is answered without a pass over every item (``join``
    reads them all before it finds the None: ~140-600 us of a first selection of 5,000)."""
    if items and not (getattr(items[0], ROW_KEY, None) and getattr(items[-1], ROW_KEY, None)):
        return None  # (an empty record, seen once, holds no bytes: the caller makes records then)
    try:
        return b"".join(_held(items))
    except (AttributeError, TypeError):
        return None


def _arrow_values(arr: pa.Array, dtype) -> tuple[np.ndarray, np.ndarray]:
    """An Arrow array of 8-byte values (built here, so at offset 0) as NumPy: the values, 0
    where null (a writable copy), and whether each is valid."""
    n = len(arr)
    bits, data = arr.buffers()
    values = np.frombuffer(data, dtype=dtype, count=n)
    if bits is None:  # no null
        return values.copy(), np.ones(n, dtype=np.bool_)
    valid = np.unpackbits(np.frombuffer(bits, dtype=np.uint8), count=n, bitorder="little").view(np.bool_)
    return np.where(valid, values, 0), valid


#: the most values ``_optional_values`` converts in Python: below, Arrow's and NumPy's
#: per-call costs (~6 us for ``pa.array`` and ``_arrow_values``) exceed a pass per value
#: (50 priorities: 3.8 us against 6.5; 128: 8.1 against 7.8; 500: 29 against 13)
_PY_VALUES_MAX = 100


def _optional_values(values: list, arrow_type: pa.DataType, dtype, zero) -> tuple[np.ndarray, np.ndarray]:
    """``_arrow_values(pa.array(values, type=arrow_type), dtype)`` for a list of numbers or
    None (the items' priorities or hints, each checked on the item): the values, ``zero``
    where None, and whether each is one. A short list is converted in Python (the same
    conversions: an int to int64, a float or int to float64)."""
    if len(values) > _PY_VALUES_MAX:
        return _arrow_values(pa.array(values, type=arrow_type), dtype)
    return (
        np.array([zero if v is None else v for v in values], dtype=dtype),
        np.array([v is not None for v in values], dtype=np.bool_),
    )


def _timestamps_of(items: list[ContextItem]) -> tuple[np.ndarray, np.ndarray]:
    """The items' timestamps in UTC microseconds since the epoch (0 when None) and whether
    each has one: the records' values (``_records``) for a whole list at once. The differences
    from the epoch are exact timedeltas, which Arrow converts to integer microseconds in one
    call (a Python floor division per item costs ~4x more)."""
    deltas = [None if (t := it.timestamp) is None else t - _EPOCH for it in items]
    if not deltas:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.bool_)
    if set(map(type, deltas)) <= _PLAIN_DELTAS:  # not a subclass's finer timedeltas
        return _arrow_values(pa.array(deltas, type=pa.duration("us")), np.int64)
    valid = np.array([d is not None for d in deltas], dtype=np.bool_)
    return np.array([0 if d is None else d // _US for d in deltas], dtype=np.int64), valid


_PLAIN_DELTAS = {timedelta, type(None)}


def _column(rec: np.ndarray, name: str) -> np.ndarray:
    """One field of the records as its own (contiguous, writable) array."""
    return np.ascontiguousarray(rec[name])


def _ids(values: Sequence) -> tuple[np.ndarray, dict]:
    """Dictionary ids in order of first occurrence (what ``pyarrow.compute.dictionary_encode``
    gives) and the value -> id map."""
    index = {v: i for i, v in enumerate(dict.fromkeys(values))}
    if len(index) == len(values):  # all distinct: ids in row order
        return np.arange(len(values), dtype=np.int64), index
    return np.fromiter(map(index.__getitem__, values), dtype=np.int64, count=len(values)), index


def _folded(raw: np.ndarray, index: dict) -> tuple[np.ndarray, dict]:
    """Ids of the ASCII-folded values, in order of first occurrence, from the exact values'
    ids (``_ids``): each distinct value folded once. The exact values' first occurrences come
    in row order, so the folded ones do too (``pc.dictionary_encode(pc.ascii_lower(...))``)."""
    joined = "".join(index)
    if joined.isascii() and joined.lower() == joined:  # no value has an 'A'-'Z': folding changes none
        return raw, index
    fold: dict[str, int] = {}
    lut = np.array([fold.setdefault(ascii_fold(v), len(fold)) for v in index], dtype=np.int64)
    return (lut[raw] if raw.shape[0] else raw), fold


def _distinct_ids(items: list[ContextItem], hashes: np.ndarray | None = None) -> tuple[np.ndarray, bool]:
    """``_ids`` of the items' contents without the map (a set is the cheaper check that all
    differ, read straight from the items), and whether all differ. ``hashes``: the contents'
    hashes (the records'): when they all differ, so do the contents (equal strings hash
    alike), and no content is read (500 items: a sort, ~6-9 us, against a set, 15-30)."""
    n = len(items)
    if hashes is not None and n > 1 and _hashes_differ(hashes):
        return np.arange(n, dtype=np.int64), True
    contents = [it.content for it in items]
    if len(set(contents)) == n:
        return np.arange(n, dtype=np.int64), True
    return _ids(contents)[0], False


#: the fewest hashes ``_hashes_differ`` checks by buckets instead of a sort
_BUCKETS_MIN = 1024


def _hashes_differ(hashes: np.ndarray) -> bool:
    """Whether the int64 ``hashes`` all differ. A short array is sorted; a long one is put in
    buckets by its low bits (at least four buckets a hash), and only the hashes that share a
    bucket are sorted and compared: no sort of the whole array, whose cost on fresh values is
    mostly mispredicted branches (5,000 string hashes: ~50 us, against 46 for NumPy's AVX2
    quicksort, 150 for its AVX-512 one on AMD Zen 4 and 185 for its stable sort; 20,000:
    ~180 against 200, 590 and 860). Python's string hashes are uniform, so a few hundred of
    5,000 share a bucket."""
    n = hashes.shape[0]
    if n >= _BUCKETS_MIN:
        bits = (4 * n - 1).bit_length()
        bucket = hashes & ((1 << bits) - 1)
        hashes = hashes[np.bincount(bucket, minlength=1 << bits)[bucket] > 1]
        if hashes.shape[0] < 2:
            return True
    h = np.sort(hashes)
    return np.count_nonzero(h[1:] == h[:-1]) == 0


#: distinct kinds (in order of first occurrence) -> their folded ids and the folded map:
#: a service's requests mostly carry the same few kinds
_KIND_FOLDS: dict[tuple[str, ...], tuple[np.ndarray, dict]] = {}
_KIND_FOLDS_KEPT = 256


#: The kinds' process-wide ids (kept in the records of items seen in lists of at least
#: ``COLD_MIN``; a record made in a shorter list holds -1): each ASCII-folded kind gets one the
#: first time a record holds it, equal kinds once folded share it. Ids are never given again
#: or taken back; after ``_KIND_GIDS_KEPT`` distinct exact kinds a new one's record holds -1.
#: A table with an item whose record holds -1 reads its kinds from the items.


class _KindIds(dict):
    """exact kind -> the id of its folding; a missing kind is given one (``_kind_gid``)."""

    def __missing__(self, kind: str) -> int:
        return _kind_gid(kind)


_KIND_GID: dict[str, int] = _KindIds()
_FOLD_KIND_GID: dict[str, int] = {}  #: folded kind -> id
_GID_KIND: list[str] = []  #: id -> folded kind
_KIND_GIDS_KEPT = 1 << 16
_KIND_LOCK = threading.Lock()


def _kind_gid(kind: str) -> int:
    """The process-wide id of ``kind``'s folding (given now if new), or -1 when
    ``_KIND_GIDS_KEPT`` kinds have theirs."""
    with _KIND_LOCK:
        gid = _KIND_GID.get(kind)
        if gid is None:
            if len(_KIND_GID) >= _KIND_GIDS_KEPT:
                return -1
            folded = ascii_fold(kind)
            gid = _FOLD_KIND_GID.get(folded)
            if gid is None:
                gid = len(_GID_KIND)
                _GID_KIND.append(folded)  # (before the maps name it: a reader finds it)
                _FOLD_KIND_GID[folded] = gid
            _KIND_GID[kind] = gid
        return gid


#: the fewest records whose kinds' first rows ``_kind_ids_of_records`` finds with NumPy
#: (5,000 rows: ~22 us against ~130 for a dict of every row's id; 50 rows: 9.5 against 5.6)
_KIND_FIRST_MIN = 256


def _kind_ids_of_records(gids: np.ndarray) -> tuple[np.ndarray, dict] | None:
    """``_kind_ids`` of items from their records' kind ids: the distinct ids in order of
    first occurrence, numbered from 0 (NumPy gathers instead of a dict look-up per item);
    None when an item's record holds no id (-1)."""
    n = gids.shape[0]
    if n == 0 or gids[0] < 0:  # (the usual -1: records made in a short list)
        return None
    if n >= _KIND_FIRST_MIN:  # each id's first row by a NumPy minimum, not a dict insert per row
        gids = np.ascontiguousarray(gids)
        if gids.min() < 0:
            return None
        top = int(gids.max()) + 1
        if top <= 4 * n + 64:
            first = np.full(top, n, dtype=np.int64)
            np.minimum.at(first, gids, np.arange(n, dtype=np.int64))
            present = np.flatnonzero(first < n)
            return _kind_ids_from(gids, present[np.argsort(first[present], kind="stable")].tolist(), top)
    ids = gids.tolist()
    order = list(dict.fromkeys(ids))
    if -1 in order:
        return None
    top = max(order) + 1
    if top > 4 * n + 64:  # ids far apart: a dict look-up per item, not a long table
        fold = dict(zip([_GID_KIND[g] for g in order], range(len(order))))
        return np.fromiter(map(dict(zip(order, range(len(order)))).__getitem__, ids), dtype=np.int64, count=n), fold
    return _kind_ids_from(gids, order, top)


def _kind_ids_from(gids: np.ndarray, order: list[int], top: int) -> tuple[np.ndarray, dict]:
    """``_kind_ids_of_records`` given the distinct ids in order of first occurrence (``order``,
    each below ``top``)."""
    n = gids.shape[0]
    vocab = [_GID_KIND[g] for g in order]
    fold = dict(zip(vocab, range(len(vocab))))
    if len(order) <= 1:
        return np.zeros(n, dtype=np.int64), fold
    lut = np.empty(top, dtype=np.int64)
    lut[order] = np.arange(len(order), dtype=np.int64)
    return lut[gids], fold


def _kind_ids(items: list[ContextItem]) -> tuple[np.ndarray, dict]:
    """``_folded(*_ids(kinds))`` of the items' kinds, the folding of each set of distinct kinds
    done once. One pass over the items: each kind's first row (``dict.setdefault``), then the
    rows' ids by NumPy gathers (no list of kinds, no second look-up per item)."""
    first_row: dict[str, int] = {}
    n = len(items)
    first = np.fromiter(map(first_row.setdefault, [it.kind for it in items], count()), dtype=np.int64, count=n)
    key = tuple(first_row)
    hit = _KIND_FOLDS.get(key)
    if hit is None:
        if len(_KIND_FOLDS) >= _KIND_FOLDS_KEPT:
            _KIND_FOLDS.clear()
        lut, fold = _folded(np.arange(len(key), dtype=np.int64), dict(zip(key, range(len(key)))))
        hit = _KIND_FOLDS[key] = (lut, fold)
    lut, fold = hit
    if len(key) == 1:
        return np.zeros(n, dtype=np.int64), fold
    at_first = np.empty(n, dtype=np.int64)  # per first row, its kind's folded id
    at_first[list(first_row.values())] = lut
    return at_first[first], fold


def _tokens_of(items: list[ContextItem]) -> np.ndarray:
    """The items' token counts as int64 (``fromiter`` of a list: less than of a generator)."""
    return np.fromiter([it.tokens for it in items], dtype=np.int64, count=len(items))


def _small_sum(tokens: np.ndarray) -> bool:
    """Whether the token counts' absolute values add up to less than ``TOKEN_LIMIT / 2``
    (exactly: each is under 2**62, so a sum in int64 could wrap)."""
    n = tokens.shape[0]
    if n == 0:
        return True
    top = max(int(_MAX(tokens)), -int(_MIN(tokens)))  # (the ufuncs' reduce: no NumPy wrapper)
    if top * n < TOKEN_LIMIT // 2:
        return True
    return sum(map(abs, tokens.tolist())) < TOKEN_LIMIT / 2


#: the fewest rows ``ItemRows.rows`` takes with ``object_take.take_objects`` (4,000 of 5,000
#: items in ~26 us against ~99 by ``tolist`` and an itemgetter; in a run, 400 of 500 cost ~2 us
#: more than the itemgetter), and ``placed_items`` with ``first_of_permutation`` (in a run, 400
#: of 500 ~2.5 us less than the itemgetter, 160 of 200 ~3 more)
_OBJECT_TAKE_MIN = 1024
_PERMUTE_MIN = 256


class ItemRows(ItemTable):
    """The single-set ItemTable of a list of valid ContextItems (``ItemRows.from_items``
    builds it; ``Pipeline`` runs on it): columns read from the items when first used, the Arrow table only on demand.
    Every column equals the one the Arrow path decodes (``tests/model/test_item_rows.py``)."""

    columns_from_metadata = True
    set_column = None
    timestamp_unit = "us"
    units_per_second = 1e6
    _extra = _NO_EXTRA

    def __init__(
        self, items: list[ContextItem], rec: np.ndarray | None, seen: bool = True, tokens: np.ndarray | None = None
    ):  # noqa: D107 - see the class
        n = len(items)
        self._items = items
        self._rows = items
        self.n = n
        self.set_keys = [None]
        self._cache = {}
        self._set_index = None
        #: the items' records (``_records``), or None: then each column is read from the items
        self._rec = rec
        #: selections have seen these items before: each had its record, but for at most one
        #: in ``_FEW_NEW`` (a conversation's next turn)
        self._seen = seen
        if rec is None:
            self.tokens = _tokens_of(items) if tokens is None else tokens
            pinned = [it.pinned for it in items]
            self.pinned = np.array(pinned, dtype=np.bool_) if True in pinned else np.zeros(n, np.bool_)
        else:
            self.tokens = _column(rec, "tokens")
            self.pinned = _column(rec, "pinned")
        #: every content differs (no duplicate groups to look for)
        self.content_id, self.contents_distinct = _distinct_ids(items, None if rec is None else rec["content_hash"])
        kinds = None if rec is None else _kind_ids_of_records(rec["kind"])
        self.kind_id, fold = _kind_ids(items) if kinds is None else kinds
        self.kind_vocab = list(fold)
        self._kind_index = fold

    @classmethod
    def from_items(
        cls, items, set_column: str | None = None, *, cold_min: int | None = None, copy: bool = True
    ) -> ItemTable:
        """An ``ItemRows`` for a list or tuple of ContextItems (one set) whose token counts sum
        far below the limit; ``ItemTable.from_items`` (the Arrow path and its checks) for
        anything else. ``cold_min``: the fewest new items read column by column (``_records``;
        ``COLD_MIN`` by default), a choice of speed only: every column is the same either way.
        ``copy`` False: the table may hold the caller's list itself (``Pipeline.run``, whose
        table does not outlive the call); by default it holds a copy, so a report read later
        sees the items as they were passed."""
        if set_column is None and isinstance(items, (list, tuple)):
            kept = items if type(items) is list and not copy else list(items)
            joined = _held_records(kept)
            if joined is not None and len(joined) == _RECORD.itemsize * len(kept):
                # every item holds its whole record, which only a ContextItem is given (below,
                # after the type check): no item needs checking again
                held = np.frombuffer(joined, dtype=_RECORD)
                if _small_sum(held["tokens"]):
                    return cls(kept, held, True)
            # (every item's type ContextItem: counted in C by identity, a set of types costs more)
            elif countOf(map(type, kept), ContextItem) == len(kept) or all(isinstance(it, ContextItem) for it in kept):
                rec, made = _records(kept, cold_min, joined=joined, read=True)
                if rec is None:  # items new to selections: columns from their attributes
                    tokens = _tokens_of(kept)
                    if _small_sum(tokens):
                        return cls(kept, None, False, tokens)
                elif _small_sum(rec["tokens"]):  # else the loader's check runs and says so
                    return cls(kept, rec, made * _FEW_NEW <= len(kept))
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
            if idx.shape == (self.n,):  # the items where the mask is set, in one C pass
                return list(compress(self._rows, idx.tobytes()))
            return super().rows(idx)
        if idx.shape[0] >= _OBJECT_TAKE_MIN:  # a few C calls, no Python int per row taken
            return take_objects(self._rows, idx)
        return list(look_up_all(self._rows, idx.tolist()))

    def placed_items(self, order: np.ndarray, k: int) -> list[ContextItem]:
        """``self.rows(order[:k])`` for a permutation ``order`` of the rows: a copy of the
        list, reordered and cut (``object_take.first_of_permutation``: no reference taken
        per item kept) from ``_PERMUTE_MIN`` rows."""
        if k >= _PERMUTE_MIN:
            return first_of_permutation(self._rows, order, k)
        return self.rows(order[:k])

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
        if self._rec is None:
            return _timestamps_of(self._rows)
        return _column(self._rec, "timestamp"), _column(self._rec, "timestamp_valid")

    @cached_property
    def _priority(self):
        if self._rec is None:
            return _optional_values([it.priority for it in self._rows], pa.int64(), np.int64, 0)
        return _column(self._rec, "priority"), _column(self._rec, "priority_valid")

    @cached_property
    def _original_tokens(self):
        values = [it.original_tokens for it in self._rows]
        if None not in values:
            return np.array(values, dtype=np.int64), np.ones(len(values), dtype=np.bool_)
        valid = np.array([v is not None for v in values], dtype=np.bool_)
        return np.array([0 if v is None else v for v in values], dtype=np.int64), valid

    @cached_property
    def _hint(self):
        if self._rec is None:
            return _optional_values([it.future_relevance_hint for it in self._rows], pa.float64(), np.float64, 0.0)
        return _column(self._rec, "hint"), _column(self._rec, "hint_valid")

    @cached_property
    def _item_tags(self) -> list[tuple[str, ...]]:
        return [it.tags for it in self._rows]

    @cached_property
    def tag_offsets(self) -> np.ndarray:
        off = np.zeros(self.n + 1, dtype=np.int64)
        # (the ufunc's accumulate: ``np.cumsum`` of the records' strided field costs ~2.3 us
        # of a 50-item call through NumPy's wrapper, this ~0.9)
        if self._rec is None:
            _ACCUMULATE(np.fromiter(map(len, self._item_tags), dtype=np.int64, count=self.n), out=off[1:])
        else:
            _ACCUMULATE(self._rec["n_tags"], out=off[1:])
        return off

    @cached_property
    def _tag_ids(self) -> tuple[np.ndarray, dict]:
        return _ids(list(chain.from_iterable(self._item_tags)))

    @cached_property
    def _raw_tags(self):
        ids, index = self._tag_ids
        return ids, pa.array(list(index), type=pa.string())

    @cached_property
    def tag_vocab(self) -> list[str]:
        return list(self._tag_ids[1])

    @cached_property
    def _fold_tags(self):
        ids, fold = _folded(*self._tag_ids)
        return ids, len(fold)

    @cached_property
    def frequency_tags(self) -> tuple[np.ndarray, np.ndarray, int]:
        """The frequency scorer's input: on items a selection has seen before (each had its
        record, but for at most one in ``_FEW_NEW``), ``tag_ids``, ids kept on the items, so
        nothing is folded or looked up but the few new items' tags (whose ids are kept then);
        on a list with more new items, the same process-wide ids looked up per tag and not kept
        (``looked_up_tag_ids``), as keeping ids costs more than looking them up once (a
        request whose items are all new)."""
        if self._seen:
            return tag_ids(self._rows, self.tag_offsets)
        return looked_up_tag_ids(self._item_tags, self.tag_offsets)
