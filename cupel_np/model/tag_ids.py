"""The frequency scorer's tag ids for one set of ContextItems (``item_rows.ItemRows.frequency_tags``):
process-wide ids of the ASCII-folded tags, kept on the items a selection has seen, or looked up
for a request whose items are new."""

from __future__ import annotations

import threading
from array import array
from itertools import chain
from operator import attrgetter, itemgetter

import numpy as np

from cupel_np.model.items import ContextItem
from cupel_np.text import ascii_fold

#: The frequency scorer's tag ids for the small path (``ItemRows.frequency_tags``): each
#: ASCII-folded tag gets a process-wide id the first time any item carries it, and an item
#: keeps its tags' ids packed (int64, native order) in its ``__dict__`` under ``_tag_key[0]``.
#: The scorer only compares ids (equal folded tags, equal ids), so any numbering gives the same
#: scores. After ``_GID_KEPT`` distinct exact tags the maps start again under a new key (the
#: ids an item kept under the old key are never read again).
_RAW_GID: dict[str, int] = {}  #: exact tag -> the id of its folding
_FOLD_GID: dict[str, int] = {}  #: folded tag -> id
_GID_KEPT = 1 << 20
_tag_key = ["_cupel_np_tags_0"]
_generation = [0]
_TAG_LOCK = threading.Lock()  #: held while ids are assigned (and the maps started again)


def _restart_if_full() -> None:
    """Start the maps again (under a new key) once they hold ``_GID_KEPT`` tags. Call with
    ``_TAG_LOCK`` held."""
    if len(_RAW_GID) >= _GID_KEPT:
        _RAW_GID.clear()
        _FOLD_GID.clear()
        _generation[0] += 1
        _tag_key[0] = f"_cupel_np_tags_{_generation[0]}"


def _gids(flat: list[str]) -> list[int]:
    """The process-wide id of each of the tags ``flat``: one dict look-up per tag, a tag never
    seen gets its folding's id (a new one for a new folding). Call with ``_TAG_LOCK`` held
    when the list holds a tag not in ``_RAW_GID``."""
    gids: list = list(map(_RAW_GID.get, flat))  # ints once the Nones are filled
    if None in gids:
        for j, g in enumerate(gids):
            if g is None:
                t = flat[j]
                g = _RAW_GID.get(t)
                if g is None:
                    g = _RAW_GID[t] = _FOLD_GID.setdefault(ascii_fold(t), len(_FOLD_GID))
                gids[j] = g
    return gids


def _keep_tag_ids(items: list[ContextItem], key: str) -> None:
    """Give each of ``items`` without one its tags' process-wide ids (each tag folded), packed,
    under ``key``: one dict look-up per tag occurrence, one slice per item. Call with
    ``_TAG_LOCK`` held."""
    new = [it for it in items if key not in it.__dict__]
    tags = [it.tags for it in new]
    packed = array("q", _gids(list(chain.from_iterable(tags)))).tobytes()
    pos = 0
    for it, t in zip(new, tags):
        end = pos + 8 * len(t)
        it.__dict__[key] = packed[pos:end]
        pos = end


_MAX = np.maximum.reduce


def _compact(off: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """``(off, ids, n_ids)`` with every id below ``n_ids``, renumbered when the process-wide
    ids are too far apart for the kernel's scratch (``n_ids`` long)."""
    if ids.shape[0] == 0:
        return off, ids, 0
    top = int(_MAX(ids)) + 1  # (the ufunc's reduce: ``.max()`` goes through NumPy's Python wrapper)
    if top <= 8 * ids.shape[0] + 1024:  # the kernel's scratch is n_ids long: small enough
        return off, ids, top
    uniq, local = np.unique(ids, return_inverse=True)
    return off, local.astype(np.int64, copy=False), int(uniq.shape[0])


def tag_ids(items: list[ContextItem], off: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """``(off, ids, n_ids)``: CSR (``off``, the tag offsets) of the items' folded tags as ids below ``n_ids``,
    equal exactly where the folded tags are equal (the frequency scorer's input; not the
    table's ``tag_fold_id`` numbering, which is by first occurrence). An item seen before
    reads one attribute; nothing is folded or looked up per call."""
    key = _tag_key[0]
    try:
        joined = b"".join(map(attrgetter(key), items))
    except AttributeError:
        with _TAG_LOCK:
            _restart_if_full()
            key = _tag_key[0]
            _keep_tag_ids(items, key)
            joined = b"".join(map(attrgetter(key), items))
    return _compact(off, np.frombuffer(joined, dtype=np.int64))


def look_up_all(source, keys: list):
    """``[source[k] for k in keys]``, in one C call where there are several (an itemgetter of
    several keys gives a tuple of their values)."""
    if len(keys) > 1:
        return itemgetter(*keys)(source)
    return [source[k] for k in keys]


def looked_up_tag_ids(tags: list[tuple[str, ...]], off: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """``tag_ids`` of items that keep none: the same process-wide ids, looked up per tag
    (one dict look-up per tag occurrence, nothing kept on the items)."""
    generation = _generation[0]
    flat = list(chain.from_iterable(tags))
    try:  # every tag seen before: the look-ups in one C call (an itemgetter of several gives a tuple)
        ids = np.fromiter(look_up_all(_RAW_GID, flat), dtype=np.int64, count=len(flat))
    except KeyError:
        ids = None
    # a tag never seen is assigned under the lock; so are all when the maps started again
    # meanwhile (ids of two generations may be equal for different tags)
    if ids is None or _generation[0] != generation:
        with _TAG_LOCK:
            _restart_if_full()
            ids = np.array(_gids(flat), dtype=np.int64)
    return _compact(off, ids)
