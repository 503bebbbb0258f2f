"""CountQuotaSlice over any inner slicer the spec allows, and PinnedOverride under truncation
(issue 18): upstream's composition test, the knapsack guard, engine = oracle on nested
configurations, bit-identical results for any thread count."""

from __future__ import annotations

import dataclasses

import naive
import numpy as np
import pytest

import cupel_np as c
from cupel_np.errors import InvalidConfigError, ScarcityError


def _items(specs):
    return [c.ContextItem(content=n, tokens=t, kind=k, future_relevance_hint=h) for n, t, k, h in specs]


TOOLS_AND_MESSAGES = [
    ("tool-1", 100, "ToolOutput", 0.9),
    ("tool-2", 100, "ToolOutput", 0.7),
    ("tool-3", 100, "ToolOutput", 0.5),
    ("msg-1", 100, "Message", 0.8),
    ("msg-2", 100, "Message", 0.6),
]


def test_count_quota_over_quota_upstream_composition():
    """The Rust crate's count_quota_composition_quota_slice_inner: the count cap binds inside
    a percentage quota that would admit every ToolOutput item."""
    inner = c.QuotaSlice((c.QuotaEntry("ToolOutput", 10.0, 60.0),))
    slicer = c.CountQuotaSlice((c.CountQuotaEntry("ToolOutput", 1, 2),), inner)
    report = c.Pipeline(c.Policy(c.ReflexiveScorer(), slicer=slicer)).dry_run(
        _items(TOOLS_AND_MESSAGES), c.ContextBudget(600, 600)
    )
    tools = [i for i in report.included if i.item.kind == "ToolOutput"]
    assert len(tools) == 2
    assert [(e.item.content, e.reason) for e in report.excluded] == [("tool-3", c.CountCapExceeded("ToolOutput", 2, 2))]


def test_knapsack_inside_count_quota_is_refused_at_construction():
    with pytest.raises(InvalidConfigError, match="KnapsackSlice"):
        c.CountQuotaSlice((), c.KnapsackSlice(10))
    for inner in ("knapsack", {"slicer": "knapsack", "bucket_size": 5}):
        with pytest.raises(InvalidConfigError, match="KnapsackSlice"):
            c.Policy.from_dict({"slicer": "count_quota", "inner_slicer": inner, "scorers": [{"type": "reflexive"}]})
    # a quota over knapsack is not a KnapsackSlice: allowed
    ok = c.CountQuotaSlice((), c.QuotaSlice((), c.KnapsackSlice(10)))
    assert ok.to_dict()["inner_slicer"]["inner_slicer"] == "knapsack"


NESTED = [
    {"slicer": "count_quota", "inner_slicer": "quota", "quotas": [{"kind": "Message", "require": 30.0, "cap": 50.0}]},
    {
        "slicer": "count_quota",
        "inner_slicer": {
            "slicer": "quota",
            "inner_slicer": "knapsack",
            "bucket_size": 10,
            "quotas": [{"kind": "ToolOutput", "require": 20.0, "cap": 40.0}],
        },
    },
    {
        "slicer": "count_quota",
        "inner_slicer": {"slicer": "count_quota", "entries": [{"kind": "Message", "require_count": 3, "cap_count": 3}]},
    },
    {
        "slicer": "count_quota",
        "inner_slicer": {
            "slicer": "count_constrained_knapsack",
            "bucket_size": 5,
            "entries": [{"kind": "Message", "require_count": 1, "cap_count": 1}],
        },
    },
]


def _rows(seed, n=14):
    rng = np.random.default_rng(seed)
    kinds = ["ToolOutput", "Message", "Document"]
    return [
        {
            "content": f"item-{i % 11}",
            "tokens": int(rng.integers(0, 90)),
            "kind": kinds[int(rng.integers(0, 3))],
            "future_relevance_hint": float(rng.choice([0.1, 0.4, 0.4, 0.9, rng.random()])),
            "pinned": bool(rng.random() < 0.1),
        }
        for i in range(n)
    ]


def _engine(rows, budget, config):
    try:
        rep = c.Pipeline(c.Policy.from_dict(config)).dry_run(
            [c.ContextItem(**d) for d in rows], c.ContextBudget(**budget)
        )
    except c.CupelError as e:
        return ("error", e.code)
    rows_inc = rep.input_rows(rep.included_rows)
    rows_exc = rep.input_rows(rep.excluded_rows)
    return (
        "ok",
        [(int(r), i.reason.value) for r, i in zip(rows_inc, rep.included)],
        [(int(r), e.reason.reason, dataclasses.asdict(e.reason)) for r, e in zip(rows_exc, rep.excluded)],
        [(s.kind, s.required_count, s.satisfied_count) for s in rep.count_requirement_shortfalls],
    )


def _naive(rows, budget, config):
    try:
        rep = naive.run_pipeline(rows, budget, config)
    except naive.NaiveError as e:
        return ("error", e.code)
    return (
        "ok",
        [(row, reason) for row, _score, reason in rep["included"]],
        [(row, reason, dict(fields)) for row, _score, reason, fields in rep["excluded"]],
        [tuple(s) for s in rep["shortfalls"]],
    )


@pytest.mark.parametrize("nested", range(len(NESTED)))
@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("overflow", ["throw", "truncate", "proceed"])
def test_nested_count_quota_matches_the_oracle(nested, seed, overflow):
    config = dict(
        NESTED[nested],
        entries=[
            {"kind": "ToolOutput", "require_count": 2, "cap_count": 3},
            {"kind": "Document", "require_count": 1, "cap_count": 1},
        ],
        scorers=[{"type": "reflexive", "weight": 2.0}, {"type": "kind", "weight": 1.0}],
        overflow_strategy=overflow,
        deduplication=seed % 2 == 0,
    )
    rows = _rows(seed)
    for target in (0, 60, 180, 400):
        budget = {"max_tokens": max(target, 200), "target_tokens": target}
        got, want = _engine(rows, budget, config), _naive(rows, budget, config)
        assert got == want, (target, got, want)


def test_inner_count_quota_scarcity_names_the_inner_kind():
    config = {
        "slicer": "count_quota",
        "entries": [{"kind": "ToolOutput", "require_count": 1}],
        "inner_slicer": {
            "slicer": "count_quota",
            "scarcity_behavior": "throw",
            "entries": [{"kind": "Memory", "require_count": 1}],
        },
        "scorers": [{"type": "reflexive"}],
    }
    rows = [{"content": n, "tokens": t, "kind": k, "future_relevance_hint": h} for n, t, k, h in TOOLS_AND_MESSAGES]
    with pytest.raises(ScarcityError, match="'Memory'"):
        c.Pipeline(c.Policy.from_dict(config)).dry_run(_items(TOOLS_AND_MESSAGES), c.ContextBudget(600, 600))
    assert _naive(rows, {"max_tokens": 600, "target_tokens": 600}, config) == ("error", "scarcity")


@pytest.mark.parametrize("nested", range(len(NESTED)))
def test_nested_results_do_not_depend_on_threads(nested):
    rng = np.random.default_rng(3)
    rows = [dict(d, set=f"s{int(rng.integers(0, 9))}") for d in _rows(5, 120)]
    table = c.ItemTable.from_items(rows, set_column="set")
    config = dict(NESTED[nested], entries=[{"kind": "ToolOutput", "require_count": 2, "cap_count": 2}])
    variants = [(f"t{t}", c.Policy.from_dict(dict(config, scorers=[{"type": "reflexive"}]))) for t in (100, 200)]
    runs = [c.sweep(table, c.ContextBudget(300, 250), variants, on_error="collect", threads=t) for t in (1, 2)]
    np.testing.assert_array_equal(runs[0].included, runs[1].included)
    np.testing.assert_array_equal(runs[0].reasons, runs[1].reasons)
    np.testing.assert_array_equal(runs[0].positions, runs[1].positions)


# --------------------------------------------------------------------------- PinnedOverride
ISSUE_EXAMPLE = [
    c.ContextItem(content="pinned-system", tokens=60, kind="SystemPrompt", pinned=True),
    c.ContextItem(content="forced-tool", tokens=60, kind="ToolOutput", future_relevance_hint=0.8),
]
FORCING = c.CountQuotaSlice((c.CountQuotaEntry("ToolOutput", 1),))


def test_truncation_for_pinned_items_is_pinned_override():
    policy = c.Policy(c.ReflexiveScorer(), slicer=FORCING, overflow_strategy="truncate")
    report = c.Pipeline(policy).dry_run(ISSUE_EXAMPLE, c.ContextBudget(max_tokens=200, target_tokens=100))
    assert [i.item.content for i in report.included] == ["pinned-system"]
    assert [(e.item.content, e.reason) for e in report.excluded] == [("forced-tool", c.PinnedOverride("pinned-system"))]
    assert c.sweep(ISSUE_EXAMPLE, c.ContextBudget(200, 100), [("v", policy)]).reasons[1, 0] == 20


def test_truncation_without_pinned_items_stays_budget_exceeded():
    items = [
        c.ContextItem(content="forced-a", tokens=60, kind="ToolOutput", future_relevance_hint=0.9),
        c.ContextItem(content="forced-b", tokens=60, kind="ToolOutput", future_relevance_hint=0.8),
    ]
    slicer = c.CountQuotaSlice((c.CountQuotaEntry("ToolOutput", 2),))
    policy = c.Policy(c.ReflexiveScorer(), slicer=slicer, overflow_strategy="truncate")
    report = c.Pipeline(policy).dry_run(items, c.ContextBudget(max_tokens=200, target_tokens=100))
    assert [(e.item.content, e.reason) for e in report.excluded] == [("forced-b", c.BudgetExceeded(60, 40))]
