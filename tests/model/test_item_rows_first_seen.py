"""The frequency scorer's tag ids of items no selection has seen (``tag_ids.looked_up_tag_ids``,
the look-ups of all their tags in one call) against the Arrow path's folded tag ids, and against
the ids kept on items seen before."""

import numpy as np
import pytest

import cupel_np as c
from cupel_np.model import tag_ids
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
    again = _first_seen(_items(TAGS[::order], prefix="d")).frequency_tags  # new items, every tag known
    assert np.array_equal(again[0], off) and np.array_equal(again[1], ids)


@pytest.mark.parametrize("tag_lists", [[], [()], [(), ()], [("solo-tag",)], [(), ("solo-tag",), ()], [("a-new-one",)]])
def test_no_tag_or_one_tag(tag_lists):
    items = _items(tag_lists, prefix="o")
    off, ids, n_ids = (
        _first_seen(items).frequency_tags if items else tag_ids.looked_up_tag_ids([], np.zeros(1, np.int64))
    )
    arrow_off = c.ItemTable.from_items(items).tag_offsets if items else np.zeros(1, np.int64)
    assert np.array_equal(off, arrow_off) and ids.dtype == np.int64
    assert ids.shape == (sum(map(len, tag_lists)),) and (ids.shape[0] == 0 or ids[0] < n_ids)


def test_first_seen_ids_equal_the_ids_kept_on_seen_items():
    items = _items(TAGS, prefix="k")
    first = _first_seen(items).frequency_tags
    ItemRows.from_items(items, cold_min=0)  # seen: records
    kept = ItemRows.from_items(items, cold_min=0)
    assert kept._seen
    off, ids, n_ids = kept.frequency_tags  # ids kept on the items
    assert np.array_equal(off, first[0]) and np.array_equal(ids, first[1]) and n_ids == first[2]


def test_a_new_tag_starts_the_full_maps_again(monkeypatch):
    generation = tag_ids._generation[0]
    monkeypatch.setattr(tag_ids, "_GID_KEPT", 1)  # full: a new tag starts the maps again
    fresh = [("zeta-new",), ("Zeta-New", "alpha"), ("alpha", "Alpha")]
    off, ids, n_ids = _first_seen(_items(fresh, prefix="n")).frequency_tags
    assert tag_ids._generation[0] == generation + 1
    assert ids.tolist() == [0, 0, 1, 1, 1] and n_ids == 2  # numbered again, in row order
    assert off.tolist() == [0, 1, 3, 5]
