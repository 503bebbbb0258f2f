"""``ItemRows`` on lists as long as a service's requests (``test_item_rows.py`` covers short
ones): read column by column while new (the sampled marks of ``item_rows._records``), records
the second time, the kinds' ids from the records, and ``rows`` through an object array; every
column the Arrow path's on every sighting."""

import random
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

import cupel_np as c
from cupel_np.model import item_rows
from cupel_np.model.item_rows import ItemRows

COLUMNS = (
    "tokens pinned content_id kind_id timestamp timestamp_valid priority priority_valid hint hint_valid "
    "tag_offsets tag_fold_id"
).split()
KINDS = ["Message", "message", "MESSAGE", "Document", "ToolOutput", "toolOutput", "Memory", "Z\u00e9"]
_T0 = datetime(2024, 1, 1, tzinfo=UTC)


def _items(n: int, seed: int, kinds=KINDS) -> list[c.ContextItem]:
    rng = random.Random(seed)
    return [
        c.ContextItem(
            f"c{rng.randrange(n)}" if seed % 2 else f"c{i}",
            rng.randrange(-2, 400),
            kind=rng.choice(kinds),
            priority=None if rng.random() < 0.3 else rng.randrange(-(2**40), 2**40),
            tags=tuple(rng.sample(["a", "A", "b", "Tag", "tAG", "z"], rng.randrange(0, 4))),
            timestamp=None if rng.random() < 0.2 else _T0 + timedelta(microseconds=rng.randrange(-(10**12), 10**12)),
            future_relevance_hint=None if rng.random() < 0.2 else rng.choice([rng.random(), float("nan"), 2.0, -1.0]),
            pinned=rng.random() < 0.03,
        )
        for i in range(n)
    ]


def _same_columns(rows: ItemRows, arrow: c.ItemTable) -> None:
    for name in COLUMNS:
        a, b = getattr(rows, name), getattr(arrow, name)
        nan = a.dtype.kind == "f"
        assert a.dtype == b.dtype and np.array_equal(a, b, equal_nan=nan), name
    assert rows.kind_vocab == arrow.kind_vocab
    for kind in ("message", "Document", "TOOLOUTPUT", "nope"):
        assert rows.kind_ids_for(kind) == arrow.kind_ids_for(kind)


@pytest.mark.parametrize("n, seed", [(300, 1), (600, 2), (1500, 3)])
def test_a_long_list_reads_as_the_arrow_path_on_every_sighting(n, seed):
    items = _items(n, seed)
    arrow = c.ItemTable.from_items(items)
    # new: column by column; seen once: records made; then records read (and tag ids kept)
    for has_records, seen in ((False, False), (True, False), (True, True), (True, True)):
        rows = ItemRows.from_items(items)
        assert (rows._rec is not None, rows._seen) == (has_records, seen)
        _same_columns(rows, arrow)
        # (from 1,024 rows taken through an object array of the items)
        take = np.concatenate([np.arange(n - 1, -1, -1), [0, 0, n - 1]])
        got, want = rows.rows(take), [items[i] for i in take.tolist()]
        assert type(got) is list and len(got) == len(want) and all(a is b for a, b in zip(got, want))


def test_a_new_sampled_item_keeps_a_seen_list_on_the_columns():
    items = _items(400, 4)
    ItemRows.from_items(items)  # marked (a sample)
    marked = [i for i, it in enumerate(items) if getattr(it, item_rows.ROW_KEY) is not None]
    assert marked == list(range(0, 400, item_rows._MARK_STRIDE))
    new = _items(400, 5)
    mixed = [new[0]] + items[1:]  # the first (sampled) item new, no item with a record
    rows = ItemRows.from_items(mixed)
    assert rows._rec is None
    _same_columns(rows, c.ItemTable.from_items(mixed))
    rows = ItemRows.from_items(mixed)  # every sampled item seen now: records for all
    assert rows._rec is not None
    _same_columns(rows, c.ItemTable.from_items(mixed))


def test_kinds_past_the_kept_ids_are_read_from_the_items(monkeypatch):
    monkeypatch.setattr(item_rows, "_KIND_GIDS_KEPT", len(item_rows._KIND_GID))  # no new id given
    items = _items(300, 6, kinds=["Message", "brand-new-Kind", "BRAND-NEW-kind"])
    arrow = c.ItemTable.from_items(items)
    for _ in range(3):
        rows = ItemRows.from_items(items)
        _same_columns(rows, arrow)
    assert rows._rec is not None and (rows._rec["kind"] == -1).any()


def test_far_apart_kind_ids_are_numbered_without_a_long_table(monkeypatch):
    item_rows._kind_gid("Message")  # a low id
    pad = [f"pad{i}" for i in range(20_000)]  # as after many distinct kinds
    monkeypatch.setattr(item_rows, "_GID_KIND", item_rows._GID_KIND + pad)
    monkeypatch.setattr(item_rows, "_FOLD_KIND_GID", dict(item_rows._FOLD_KIND_GID))
    monkeypatch.setattr(item_rows, "_KIND_GID", item_rows._KindIds(item_rows._KIND_GID))
    items = _items(300, 7, kinds=["Message", "far-Kind", "FAR-kind", "other"])
    arrow = c.ItemTable.from_items(items)
    for _ in range(3):
        rows = ItemRows.from_items(items)
        _same_columns(rows, arrow)
    assert int(rows._rec["kind"].max()) >= 20_000


def test_records_hold_the_fields_and_the_kind_ids_from_a_long_list():
    items = _items(300, 8)
    assert item_rows._records(items) == (None, 300)  # new: marked
    rec, made = item_rows._records(items)  # seen once: records made
    assert made == 300 and rec.dtype == item_rows._RECORD and rec.dtype.itemsize == 60
    assert item_rows._records(items)[1] == 0  # every record held
    assert rec["tokens"].tolist() == [it.tokens for it in items]
    assert [item_rows._GID_KIND[g] for g in rec["kind"].tolist()] == [it.kind.lower() for it in items]
    few = _items(50, 9)  # a short list: records at once, no kind ids (its kinds read from the items)
    rec, made = item_rows._records(few)
    assert made == 50 and (rec["kind"] == -1).all()
    _same_columns(ItemRows.from_items(few), c.ItemTable.from_items(few))


def test_a_policy_reading_no_timestamps_reads_a_short_new_list_column_by_column():
    """``PolicyPlan.cold_min``: 0 for a policy whose placer and scorers read no timestamps
    (a short list of new items is read from the attributes, records the second time), the
    default (records at once) for one that reads them; the selection is the same either way."""
    from cupel_np.engine.small import PolicyPlan

    quiet = c.Policy(c.CompositeScorer(((c.KindScorer(), 1.0), (c.ReflexiveScorer(), 1.0))), placer="u_shaped")
    timed = [c.Policy(c.ReflexiveScorer(), placer="chronological"), c.Policy(c.RecencyScorer(), placer="u_shaped")]
    assert PolicyPlan.of(quiet).cold_min == 0
    assert [PolicyPlan.of(p).cold_min for p in timed] == [None, None]
    budget = c.ContextBudget(max_tokens=3000, target_tokens=2000)
    want = c.Pipeline(quiet).run(c.ItemTable.from_items(_items(40, 6)), budget)
    items = _items(40, 6)
    for sighting in range(3):
        got = c.Pipeline(quiet).run(items, budget)
        assert [it.content for it in got] == [it.content for it in want]
        with_records = sum(bool(getattr(it, item_rows.ROW_KEY, None)) for it in items)
        assert with_records == (0 if sighting == 0 else 40), sighting
    items = _items(40, 6)
    c.Pipeline(timed[0]).run(items, budget)  # records at once
    assert all(getattr(it, item_rows.ROW_KEY, None) for it in items)


@pytest.mark.parametrize("at", [0, -1])
def test_a_seen_list_with_a_foreign_object_is_still_refused_by_row(at):
    """Items that all hold records skip the type check (only ContextItems get one); an object
    that answers every attribute (a Mock: not bytes) or none (a string) still takes the
    checked path, which names its row."""
    from unittest import mock

    items = _items(300, 8)
    for _ in range(3):  # records made, then read
        ItemRows.from_items(items)
    assert ItemRows.from_items(items)._seen
    for bad in (mock.Mock(), "text"):
        listed = [bad, *items] if at == 0 else [*items, bad]
        with pytest.raises(c.InvalidInputTypeError, match=f"row {0 if at == 0 else 300}: expected a ContextItem"):
            ItemRows.from_items(listed)


def test_a_table_for_run_holds_the_callers_list_and_a_reports_a_copy():
    items = _items(300, 9)
    assert ItemRows.from_items(items, copy=False)._rows is items
    kept = ItemRows.from_items(items)._rows
    assert kept is not items and kept == items
    assert type(ItemRows.from_items(tuple(items), copy=False)._rows) is list


@pytest.mark.parametrize("n", [50, 300])
def test_items_whose_record_slot_was_never_set_read_as_new_ones(n):
    """A new item holds None in its record slot; one built without ``__post_init__`` (a
    subclass that skips it) holds nothing there at all, and reads the same."""
    items = _items(n, 10)
    for it in items[::3]:
        object.__delattr__(it, item_rows.ROW_KEY)
    arrow = c.ItemTable.from_items(items)
    for _ in range(3):  # new, seen once, records
        _same_columns(ItemRows.from_items(items), arrow)
    assert all(getattr(it, item_rows.ROW_KEY) for it in items)


@pytest.mark.parametrize("n", [50, 300])
@pytest.mark.parametrize("at", [0, -1, "middle"])
def test_a_seen_list_with_a_new_item_reads_as_the_arrow_path(n, at):
    """A conversation's next turn: items that hold records plus one new item (at the end, at
    the start, or inside). ``_held_records`` answers None without joining when the first or
    the last item holds none; the new item gets its record, the columns equal the Arrow
    path's, and the list after that holds every record."""
    items = _items(n, 11)
    for _ in range(2):  # new (a long list: marked), then records
        ItemRows.from_items(items)
    assert all(getattr(it, item_rows.ROW_KEY) for it in items)
    (new,) = _items(1, 12)
    listed = [new, *items] if at == 0 else [*items, new] if at == -1 else [*items[:7], new, *items[7:]]
    assert item_rows._held_records(listed) is None
    first = ItemRows.from_items(listed)
    _same_columns(first, c.ItemTable.from_items(listed))
    assert getattr(new, item_rows.ROW_KEY)  # made at once: beside items with records
    again = ItemRows.from_items(listed)
    assert again._seen and len(item_rows._held_records(listed)) == item_rows._RECORD.itemsize * (n + 1)
    _same_columns(again, c.ItemTable.from_items(listed))
