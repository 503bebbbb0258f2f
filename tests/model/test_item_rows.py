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
    items = _as_items(dicts)
    rows, arrow = ItemRows.from_items(items), c.ItemTable.from_items(items)
    assert type(rows) is ItemRows and type(arrow) is c.ItemTable
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
)
def test_a_selection_equals_the_arrow_paths(dicts, target, scorer, slicer, placer, overflow, dedup):
    items = _as_items(dicts)
    policy = c.Policy(scorer, slicer=slicer, placer=placer, overflow_strategy=overflow, deduplication=dedup)
    budget = c.ContextBudget(max_tokens=target + 20, target_tokens=target)
    pipe = c.Pipeline(policy)
    got = _outcome(pipe, items, budget)
    want = _outcome(pipe, c.ItemTable.from_items(items), budget)
    assert got == want
    if isinstance(got[0], list):
        assert [id(i) for i in pipe.run(items, budget)] == [i for i, _, _ in got[0]]
