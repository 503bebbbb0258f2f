"""The frequency scorer's tag ids of items no selection has seen (``item_rows.looked_up_tag_ids``:
one look-up per item's tuple of tags, the offsets read from where each tuple's ids end) against
the Arrow path's folded tag ids, and against the ids kept on items seen before."""

import numpy as np
import pytest

import cupel_np as c
from cupel_np.model import item_rows
from cupel_np.model.item_rows import ItemRows

#: duplicates, ASCII case variants (one folded tag), non-ASCII ones (folded apart), blanks
TAGS = [
    ("alpha", "Alpha"),
    (),
    ("ALPHA", "beta", "ALPHA"),
    ("déjà", "DÉJÀ"),
    ("Déjà",),
    ("", " ", ""),
    (),
    ("beta",),
    ("x-1", "X-1", "y"),
]


def _items(tag_lists, prefix="c"):
    return [c.ContextItem(f"{prefix}{i}", 1 + i, tags=t) for i, t in enumerate(tag_lists)]


def _same_partition(off_a, ids_a, off_b, ids_b) -> bool:
    """Equal offsets, and ids equal exactly where the other's are."""
    if not np.array_equal(off_a, off_b) or ids_a.shape != ids_b.shape:
        return False
    pairs = set(zip(ids_a.tolist(), ids_b.tolist()))
    return len(pairs) == len({a for a, _ in pairs}) == len({b for _, b in pairs})


def _first_seen(items) -> ItemRows:
    table = ItemRows.from_items(items, cold_min=0)  # new items of any number: column by column
    assert table._rec is None and not table._seen
    return table


@pytest.mark.parametrize("order", [1, -1])
def test_first_seen_tag_ids_name_the_folded_tags(order):
    items = _items(TAGS[::order])
    arrow = c.ItemTable.from_items(items)
    off, ids, n_ids = _first_seen(items).frequency_tags
    assert off.dtype == ids.dtype == np.int64
    assert 0 <= ids.min() and ids.max() < n_ids
    assert _same_partition(off, ids, arrow.tag_offsets, arrow.tag_fold_id)
    again = _first_seen(_items(TAGS[::order], prefix="d")).frequency_tags  # new items, the tuples known
    assert np.array_equal(again[0], off) and np.array_equal(again[1], ids)


def test_first_seen_offsets_equal_the_table_tag_offsets_whichever_is_read_first():
    items = _items(TAGS)
    by_tags = _first_seen(items)
    off, _, _ = by_tags.frequency_tags
    assert by_tags.tag_offsets is off
    by_offsets = _first_seen(_items(TAGS, prefix="e"))
    first = by_offsets.tag_offsets  # read from the lengths
    assert np.array_equal(by_offsets.frequency_tags[0], first)
    assert np.array_equal(first, c.ItemTable.from_items(items).tag_offsets)


def test_an_empty_list_and_items_without_tags():
    off, ids, n_ids = item_rows.looked_up_tag_ids([])
    assert off.tolist() == [0] and ids.shape == (0,) and n_ids == 0
    off, ids, n_ids = _first_seen(_items([(), (), ()])).frequency_tags
    assert off.tolist() == [0, 0, 0, 0] and ids.shape == (0,) and n_ids == 0


def test_first_seen_ids_equal_the_ids_kept_on_seen_items():
    items = _items(TAGS, prefix="k")
    first = _first_seen(items).frequency_tags
    ItemRows.from_items(items, cold_min=0)  # seen: records
    kept = ItemRows.from_items(items, cold_min=0)
    assert kept._seen
    off, ids, n_ids = kept.frequency_tags  # ids kept on the items
    assert np.array_equal(off, first[0]) and np.array_equal(ids, first[1]) and n_ids == first[2]


def test_the_tuples_start_again_with_the_maps(monkeypatch):
    assert _first_seen(_items(TAGS, prefix="m")).frequency_tags[2] >= 2
    assert ("alpha", "Alpha") in item_rows._TUPLE_IDS
    generation = item_rows._generation[0]
    monkeypatch.setattr(item_rows, "_GID_KEPT", 1)  # full: a new tuple starts the maps again
    fresh = [("zeta-new",), ("Zeta-New", "alpha"), ("alpha", "Alpha")]
    off, ids, n_ids = _first_seen(_items(fresh, prefix="n")).frequency_tags
    assert item_rows._generation[0] == generation + 1
    assert set(item_rows._TUPLE_IDS) == {(), *fresh}  # the old tuples' ids are gone with their maps
    assert ids.tolist() == [0, 0, 1, 1, 1] and n_ids == 2  # numbered again, in row order
    assert off.tolist() == [0, 1, 3, 5]


def test_a_full_tuple_map_starts_again(monkeypatch):
    assert _first_seen(_items([("kept-before",)], prefix="b")).frequency_tags[1].shape == (1,)
    assert ("kept-before",) in item_rows._TUPLE_IDS
    monkeypatch.setattr(item_rows, "_TUPLES_KEPT", 2)
    arrow = c.ItemTable.from_items(_items(TAGS))
    for prefix in ("f", "g"):  # the map started again, then every tuple found
        off, ids, _ = _first_seen(_items(TAGS, prefix=prefix)).frequency_tags
        assert _same_partition(off, ids, arrow.tag_offsets, arrow.tag_fold_id)
        assert set(item_rows._TUPLE_IDS) == {(), *TAGS}


class _ListTags(c.ContextItem):
    """A subclass whose tags read as a list (no tuple to look up)."""

    def __getattribute__(self, name):
        v = super().__getattribute__(name)
        return list(v) if name == "tags" else v


def test_tags_that_are_no_tuple_are_looked_up_as_tuples():
    items = [_ListTags(f"s{i}", 1, tags=t) for i, t in enumerate(TAGS)]
    off, ids, _ = _first_seen(items).frequency_tags
    arrow = c.ItemTable.from_items(_items(TAGS))
    assert _same_partition(off, ids, arrow.tag_offsets, arrow.tag_fold_id)
