"""Sweep grid labels: every dimension that varies is named, and labels stay short otherwise
(issue 7, defect 3)."""

import numpy as np
import pytest

import cupel_np as c

B = c.ContextBudget


def _labels(grid):
    return [label for label, _, _ in grid.variants()]


@pytest.fixture(scope="module")
def items():
    return [c.ContextItem(f"item {i}", 10 + i, kind="Tool" if i % 2 else "Message") for i in range(6)]


def _sweeps(items, grid):
    """The grid runs as a sweep (no "label used twice") and every variant keeps every row."""
    res = c.sweep(items, B(1000, 800), grid)
    assert res.labels == _labels(grid)
    assert res.included.shape == (len(items), len(grid))
    return res


def test_budgets_differing_only_in_output_reserve(items):
    grid = c.Sweep(["chat"], budgets=[B(1000, 800), B(1000, 800, output_reserve=100)])
    assert _labels(grid) == ["chat|1000/800 reserve=0", "chat|1000/800 reserve=100"]
    _sweeps(items, grid)


def test_budgets_differing_only_in_reserved_slots(items):
    grid = c.Sweep(["chat"], budgets=[B(1000, 800), B(1000, 800, reserved_slots={"Tool": 5, "Message": 2})])
    assert _labels(grid) == ["chat|1000/800 slots=none", "chat|1000/800 slots=Message:2+Tool:5"]
    _sweeps(items, grid)


def test_budgets_differing_only_in_margin(items):
    grid = c.Sweep(
        ["chat"],
        budgets=[
            B(1000, 800, estimation_safety_margin_percent=5.0),
            B(1000, 800, estimation_safety_margin_percent=5.5),
        ],
    )
    assert _labels(grid) == ["chat|1000/800 margin=5.0%", "chat|1000/800 margin=5.5%"]
    _sweeps(items, grid)


def test_budget_labels_name_only_the_fields_that_vary(items):
    grid = c.Sweep(
        ["chat"],
        budgets=[
            B(1000, 800, output_reserve=10, estimation_safety_margin_percent=1.0),
            B(1000, 800, output_reserve=20, estimation_safety_margin_percent=1.0),
            B(2000, 800, output_reserve=10, estimation_safety_margin_percent=1.0),
        ],
    )
    assert _labels(grid) == ["chat|1000/800 reserve=10", "chat|1000/800 reserve=20", "chat|2000/800 reserve=10"]
    _sweeps(items, grid)


def test_budget_labels_stay_short_when_max_and_target_tell_them_apart():
    grid = c.Sweep(["chat"], budgets=[B(8000, 6000, 1000), B(4000, 3000, 500)])
    assert _labels(grid) == ["chat|8000/6000", "chat|4000/3000"]


def test_two_slicers_of_one_type_with_different_options(items):
    q = [{"slicer": "quota", "quotas": [{"kind": "Message", "require": r, "cap": 60.0}]} for r in (10.0, 20.0)]
    grid = c.Sweep(["chat"], slicers=q + ["greedy"])
    assert _labels(grid) == [
        "chat|quota(inner_slicer=greedy,quotas=[kind=Message,require=10.0,cap=60.0])",
        "chat|quota(inner_slicer=greedy,quotas=[kind=Message,require=20.0,cap=60.0])",
        "chat|greedy",
    ]
    _sweeps(items, grid)


def test_count_quota_slicers_differing_in_scarcity(items):
    cq = [
        {
            "slicer": "count_quota",
            "entries": [{"kind": "Tool", "require_count": 1, "cap_count": 2}],
            "scarcity_behavior": s,
        }
        for s in ("degrade", "throw")
    ]
    labels = _labels(c.Sweep(["chat"], slicers=cq))
    assert len(set(labels)) == 2 and "scarcity_behavior=degrade" in labels[0] and "scarcity_behavior=throw" in labels[1]
    _sweeps(items, c.Sweep(["chat"], slicers=cq))


def test_slicer_labels_stay_short_when_names_differ():
    grid = c.Sweep(["chat"], slicers=["greedy", c.KnapsackSlice(50), c.KnapsackSlice(100)])
    assert _labels(grid) == ["chat|greedy", "chat|knapsack(50)", "chat|knapsack(100)"]


def test_weights_equal_at_six_digits(items):
    grid = c.Sweep(["chat"], weights=[{"kind": 1.0000001}, {"kind": 1.0000002}])
    assert _labels(grid) == ["chat|kind=1.0000001", "chat|kind=1.0000002"]
    _sweeps(items, grid)


def test_two_policies_with_one_name(items):
    a = c.Policy.from_dict({"name": "mine", "scorers": [{"type": "priority"}]})
    b = c.Policy.from_dict({"name": "mine", "scorers": [{"type": "reflexive"}]})
    grid = c.Sweep([a, b], budgets=[B(100, 80)])
    assert _labels(grid) == ["mine", "mine#2"]
    _sweeps(items, grid)


@pytest.mark.parametrize(
    "kw, dim",
    [
        ({"budgets": [B(100, 80), B(100, 80)]}, "budgets"),
        ({"slicers": ["greedy", {"slicer": "greedy"}]}, "slicers"),
        ({"placers": ["u_shaped", "u_shaped"]}, "placers"),
        ({"weights": [{"kind": 2}, {"kind": 2.0}]}, "weights"),
    ],
)
def test_a_value_given_twice_is_an_error_naming_the_dimension(kw, dim):
    with pytest.raises(c.InvalidConfigError, match=rf"^Sweep {dim}\[1\] repeats {dim}\[0\]"):
        c.Sweep(["chat"], **kw)


def test_full_grid_labels_are_unique(items):
    grid = c.Sweep(
        ["chat", "rag"],
        weights=[{"kind": 1}, {"kind": 5}],
        slicers=["greedy", c.KnapsackSlice(50)],
        placers=["chronological", "u_shaped"],
        budgets=[B(1000, 800), B(1000, 800, output_reserve=50)],
    )
    labels = _labels(grid)
    assert len(labels) == 32 == len(set(labels))
    assert "rag|kind=5|knapsack(50)|u_shaped|1000/800 reserve=50" in labels
    _sweeps(items, grid)


def test_sweep_takes_preset_names_as_sweep_and_budget_curves_do():
    """Issue 26: c.sweep(table, budget, ["chat", "rag"]) refused names that Sweep accepts."""
    table = c.ItemTable.from_items(
        [dict(content=f"m{i}", tokens=10 + i, set=f"s{i % 2}", priority=i) for i in range(8)], set_column="set"
    )
    budget = c.ContextBudget(100, 30)
    by_name = c.sweep(table, budget, ["chat", "rag"])
    by_pair = c.sweep(table, budget, [("chat", c.preset("chat")), ("rag", c.preset("rag"))])
    assert by_name.labels == by_pair.labels == ["chat", "rag"]
    np.testing.assert_array_equal(by_name.included, by_pair.included)
    with pytest.raises(c.InvalidConfigError, match="chta"):
        c.sweep(table, budget, ["chta", "rag"])
