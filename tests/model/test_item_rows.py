"""``ItemRows`` (the table ``Pipeline`` builds from a list of ContextItems, column by column
from the items, with no Arrow table) against the Arrow path (``ItemTable.from_items``):
every column the engine reads is the same array, and every selection is the same, for every
scorer, slicer and placer."""

from datetime import UTC, datetime

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import item_lists

import cupel_np as c
from cupel_np.model import item_rows, tag_ids
from cupel_np.model.item_rows import ItemRows

COLUMNS = (
    "tokens pinned content_id kind_id timestamp timestamp_valid priority priority_valid hint hint_valid "
    "original_tokens_col original_tokens_valid tag_offsets tag_raw_id tag_fold_id offsets input_row"
).split()


def _as_items(dicts):
    return [c.ContextItem(**{k: v for k, v in d.items() if v is not None or k in ("content", "tokens")}) for d in dicts]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(item_lists(max_size=14))
def test_every_column_equals_the_arrow_paths(dicts):
    arrow = c.ItemTable.from_items(_as_items(dicts))
    # new items read column by column (as a list of at least COLD_MIN items is), or few
    # enough to get their records at once
    for cold_min, sightings in (
        (0, [(False, False), (True, False), (True, True)]),
        (10**9, [(True, False), (True, True)]),
    ):
        items = _as_items(dicts)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(item_rows, "COLD_MIN", cold_min)
            # first seen, seen once, then records read
            for sighting, (has_records, seen) in enumerate(sightings):
                rows = ItemRows.from_items(items)
                assert type(rows) is ItemRows and type(arrow) is c.ItemTable
                if items:  # (an empty list has every record it needs)
                    assert ((rows._rec is not None), rows._seen) == (has_records, seen), (cold_min, sighting)
                _same_columns(rows, arrow, items)


def _same_columns(rows, arrow, items):
    for name in COLUMNS:
        a, b = getattr(rows, name), getattr(arrow, name)
        nan = a.dtype.kind == "f"
        assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=nan), name
    for name in ("kind_vocab", "tag_vocab", "n_raw_tags", "n_fold_tags", "n", "n_sets", "set_keys", "set_column"):
        assert getattr(rows, name) == getattr(arrow, name), name
    assert (rows.timestamp_unit, rows.units_per_second) == (arrow.timestamp_unit, arrow.units_per_second)
    for tag in ("a", "B", "zz"):
        assert rows.tag_id_for(tag) == arrow.tag_id_for(tag)
    for kind in ("message", "Document", "nope"):
        assert rows.kind_ids_for(kind) == arrow.kind_ids_for(kind)
    assert rows.table.schema.equals(arrow.table.schema)  # the Arrow table, built on demand
    for name in rows.table.column_names:  # (NaN hints compare unequal in Table.equals)
        a, b = (str(t.table.column(name).to_pylist()) for t in (rows, arrow))
        assert a == b, name
    assert rows.content.equals(arrow.content) and rows.kind.equals(arrow.kind)
    assert rows.metadata_values("k").equals(arrow.metadata_values("k"))
    assert all(rows.row(i) is items[i] for i in range(len(items)))


def test_a_token_sum_near_the_limit_takes_the_checked_path():
    assert type(ItemRows.from_items([c.ContextItem("a", 1)])) is ItemRows
    assert type(ItemRows.from_items([{"content": "a", "tokens": 1}])) is c.ItemTable  # dicts: the long way
    half = c.ItemTable.from_items.__globals__["TOKEN_LIMIT"] // 2
    with pytest.raises(c.CupelError, match="add up past"):  # the loader's check ran
        ItemRows.from_items([c.ContextItem("a", half), c.ContextItem("b", half)])


_T0 = datetime(2024, 1, 1, tzinfo=UTC)
_Q = (c.QuotaEntry("Message", require=10, cap=60), c.QuotaEntry("document", require=5, cap=50))
_CQ = (c.CountQuotaEntry("Message", require_count=1, cap_count=3), c.CountQuotaEntry("Tool", require_count=1))
SCORERS = [
    c.CompositeScorer(((c.RecencyScorer(), 2.0), (c.PriorityScorer(), 1.0), (c.KindScorer(), 1.0))),
    c.CompositeScorer(((c.ReflexiveScorer(), 1.0), (c.FrequencyScorer(), 1.0))),
    c.TagScorer((("a", 1.0), ("B", 2.0))),
    c.ScaledScorer(c.PriorityScorer()),
    c.MetadataTrustScorer(),
    c.MetadataKeyScorer("k", "v", 2.0),
    c.DecayScorer(_T0, c.ExponentialCurve(3600.0)),
]
SLICERS = [
    c.GreedySlice(),
    c.KnapsackSlice(5),
    c.QuotaSlice(_Q, c.GreedySlice()),
    c.QuotaSlice(_Q, c.KnapsackSlice(5)),
    c.CountQuotaSlice(_CQ),
    c.CountQuotaSlice(_CQ, c.QuotaSlice(_Q, c.GreedySlice())),
    c.CountConstrainedKnapsackSlice(_CQ, 5),
]


def _outcome(pipe, items, budget):
    try:
        r = pipe.dry_run(items, budget)
    except c.CupelError as e:
        return type(e).__name__, str(e)
    inc = [(id(i.item), repr(i.score), i.reason) for i in r.included]
    exc = [(id(e.item), repr(e.score), e.reason) for e in r.excluded]
    return inc, exc, [s.__dict__ for s in r.count_requirement_shortfalls], r.effective_target_tokens


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    item_lists(max_size=14, min_size=1),
    st.integers(0, 80),
    st.sampled_from(SCORERS),
    st.sampled_from(SLICERS),
    st.sampled_from(["chronological", "u_shaped"]),
    st.sampled_from(["throw", "truncate", "proceed"]),
    st.booleans(),
    st.booleans(),
)
def test_a_selection_equals_the_arrow_paths(dicts, target, scorer, slicer, placer, overflow, dedup, cold):
    items = _as_items(dicts)
    policy = c.Policy(scorer, slicer=slicer, placer=placer, overflow_strategy=overflow, deduplication=dedup)
    budget = c.ContextBudget(max_tokens=target + 20, target_tokens=target)
    pipe = c.Pipeline(policy)
    with pytest.MonkeyPatch.context() as mp:  # ``cold``: new items read column by column, as many are
        mp.setattr(item_rows, "COLD_MIN", 0 if cold else item_rows.COLD_MIN)
        got = _outcome(pipe, items, budget)
    want = _outcome(pipe, c.ItemTable.from_items(items), budget)
    assert got == want
    if isinstance(got[0], list):
        assert [id(i) for i in pipe.run(items, budget)] == [i for i, _, _ in got[0]]


def _same_partition(off_a, ids_a, off_b, ids_b) -> bool:
    """Two CSR id lists name the same tags: equal offsets, and ids equal exactly where the
    other's are (a bijection between the numberings)."""
    if not np.array_equal(off_a, off_b) or ids_a.shape != ids_b.shape:
        return False
    pairs = set(zip(ids_a.tolist(), ids_b.tolist()))
    return len(pairs) == len({a for a, _ in pairs}) == len({b for _, b in pairs})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(item_lists(max_size=14))
def test_the_frequency_tags_kept_on_the_items_name_the_folded_tags(dicts):
    arrow = c.ItemTable.from_items(_as_items(dicts))
    for cold_min in (0, 10**9):  # read column by column when new, or records at once
        items = _as_items(dicts)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(item_rows, "COLD_MIN", cold_min)
            for _ in range(4):  # looked up while new (or seen once), then kept on the items, then read back
                off, ids, n_ids = ItemRows.from_items(items).frequency_tags
                assert ids.dtype == np.int64 and (ids.shape[0] == 0 or 0 <= ids.min() <= ids.max() < n_ids)
                assert _same_partition(off, ids, arrow.tag_offsets, arrow.tag_fold_id)


def test_the_frequency_tags_start_again_when_the_maps_are_full(monkeypatch):
    def make(tag_lists):
        return [c.ContextItem(f"c{i}", 1, tags=t) for i, t in enumerate(tag_lists)]

    old = make([("Alpha", "b"), ("ALPHA",), ("c",)])
    monkeypatch.setattr(item_rows, "COLD_MIN", 0)  # new items: marked, records the second time, tag ids the third
    ItemRows.from_items(old)
    ItemRows.from_items(old)
    assert ItemRows.from_items(old).frequency_tags[2] >= 3  # alpha, b, c (and the ids before them)
    key = tag_ids._tag_key[0]
    monkeypatch.setattr(tag_ids, "_GID_KEPT", 1)  # full: the next new item starts the maps again
    fresh = make([("alpha",), ("B", "d")])
    ItemRows.from_items(fresh)
    ItemRows.from_items(fresh)
    assert ItemRows.from_items(fresh).frequency_tags[2] == 3  # alpha, b, d: numbered again
    assert tag_ids._tag_key[0] != key and all(key in vars(it) for it in old)
    mixed = old + fresh  # the old items' ids are worked out again under the new key
    off, ids, _ = ItemRows.from_items(mixed).frequency_tags
    arrow = c.ItemTable.from_items(mixed)
    assert _same_partition(off, ids, arrow.tag_offsets, arrow.tag_fold_id)
    assert ids.tolist()[0] == ids.tolist()[2] == ids.tolist()[4]  # Alpha, ALPHA, alpha


@pytest.mark.parametrize("n_new", [1, 3, 4, 20])
def test_a_next_turn_keeps_tag_ids_on_its_few_new_items(n_new):
    """A list whose items a selection has seen but for a few new ones (a conversation's next
    turn: at most one in ``_FEW_NEW``) counts as seen: the frequency scorer's ids are read from
    the items and kept on the new ones. With more new items they are looked up and kept on
    none. The ids name the folded tags either way."""
    tags = [("Alpha", "b"), ("ALPHA",), ("c",), (), ("B", "d")]
    seen = [c.ContextItem(f"c{i}", 1, tags=tags[i % 5]) for i in range(24)]
    for _ in range(3):  # records, then tag ids kept on the items
        _ = ItemRows.from_items(seen).frequency_tags
    key = tag_ids._tag_key[0]
    assert all(key in vars(it) for it in seen)
    new = [c.ContextItem(f"n{i}", 1, tags=tags[(i + 1) % 5]) for i in range(n_new)]
    listed = seen + new
    rows = ItemRows.from_items(listed)
    few = n_new * item_rows._FEW_NEW <= len(listed)
    assert rows._seen == few
    off, ids, _ = rows.frequency_tags
    arrow = c.ItemTable.from_items(listed)
    assert _same_partition(off, ids, arrow.tag_offsets, arrow.tag_fold_id)
    assert all((key in vars(it)) == few for it in new)
    assert all(getattr(it, item_rows.ROW_KEY) for it in listed)  # every item has its record now


def test_far_apart_ids_are_renumbered_for_the_kernels_scratch(monkeypatch):
    items = [c.ContextItem("x", 1, tags=("far-tag-one",)), c.ContextItem("y", 1, tags=("Far-Tag-One", "q"))]
    monkeypatch.setitem(tag_ids._RAW_GID, "far-tag-one", 10**7)  # as after many distinct tags
    monkeypatch.setitem(tag_ids._RAW_GID, "Far-Tag-One", 10**7)
    monkeypatch.setattr(item_rows, "COLD_MIN", 0)  # new items: marked, records the second time, tag ids the third
    ItemRows.from_items(items)
    ItemRows.from_items(items)
    off, ids, n_ids = ItemRows.from_items(items).frequency_tags
    assert n_ids == 2 and ids.tolist()[0] == ids.tolist()[1] != ids.tolist()[2] and off.tolist() == [0, 1, 3]


def test_finer_than_microsecond_timestamps_read_as_the_arrow_path_reads_them():
    """A pandas Timestamp keeps nanoseconds (its difference from the epoch is a pandas
    Timedelta, not a timedelta): on every sighting the timestamp column is the Arrow path's,
    after 1970 and before it."""
    pd = pytest.importorskip("pandas")
    stamps = [pd.Timestamp("2024-01-01 00:00:00.0000015Z"), None, pd.Timestamp("1969-12-31 23:59:59.9999995Z")]
    arrow = c.ItemTable.from_items([c.ContextItem(f"c{i}", 1, timestamp=t) for i, t in enumerate(stamps)])
    assert arrow.timestamp.tolist() == [1704067200000001, 0, -1]
    for cold_min in (0, 10**9):  # column by column when new, or records at once
        items = [c.ContextItem(f"c{i}", 1, timestamp=t) for i, t in enumerate(stamps)]
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(item_rows, "COLD_MIN", cold_min)
            for _ in range(3):
                rows = ItemRows.from_items(items)
                assert np.array_equal(rows.timestamp, arrow.timestamp)
                assert np.array_equal(rows.timestamp_valid, arrow.timestamp_valid)


@pytest.mark.parametrize("n", [2, 3, 500, item_rows._BUCKETS_MIN - 1, item_rows._BUCKETS_MIN, 5000])
def test_hashes_differ_finds_any_repeated_hash(n):
    """The content-hash check (a sort, or buckets by low bits from ``_BUCKETS_MIN``): random
    hashes differ; one repeated at any two places does not; hashes that all share their low
    bits (every one in one bucket) are still told apart; a strided view (a record field)."""
    rng = np.random.default_rng(n)
    h = rng.integers(-(2**63), 2**63 - 1, n)
    assert item_rows._hashes_differ(h)
    for i, j in ((0, 1), (0, n - 1), (n - 1, n // 3)):
        dup = h.copy()
        dup[j] = dup[i]
        assert not item_rows._hashes_differ(dup), (i, j)
    shared = (h >> 24) << 24  # the low 24 bits the same for every hash
    assert item_rows._hashes_differ(shared) == (np.unique(shared).shape[0] == n)
    shared[-1] = shared[0]
    assert not item_rows._hashes_differ(shared)
    rec = np.zeros(n, dtype=[("a", np.int32), ("h", np.int64)])
    rec["h"] = h
    assert item_rows._hashes_differ(rec["h"])
    rec["h"][1] = rec["h"][0]
    assert not item_rows._hashes_differ(rec["h"])


def test_a_long_list_with_repeated_contents_deduplicates_as_the_arrow_path():
    """Over ``_BUCKETS_MIN`` items held in records (seen before), a few contents repeated:
    the records' hash check finds them, and the selection equals the Arrow path's."""
    t0 = datetime(2026, 1, 1, tzinfo=UTC).timestamp()
    items = [
        c.ContextItem(
            content=f"c{i % 1490}",
            tokens=1 + i % 7,
            kind="message",
            timestamp=datetime.fromtimestamp(t0 + i, UTC),
            priority=i % 5,
        )
        for i in range(1500)
    ]
    assert item_rows.ItemRows.from_items(items)._rec is None  # new: marked, then held in records
    rows = item_rows.ItemRows.from_items(items)
    assert rows._rec is not None and not rows.contents_distinct
    policy = c.Policy(c.CompositeScorer(((c.RecencyScorer(), 1.0), (c.PriorityScorer(), 1.0))), deduplication=True)
    budget = c.ContextBudget(max_tokens=3000, target_tokens=2500)
    pipe = c.Pipeline(policy)
    got = _outcome(pipe, items, budget)
    assert got == _outcome(pipe, c.ItemTable.from_items(items), budget)
    assert sum(e[2].reason == "Deduplicated" for e in got[1]) == 10, got[1][:3]
