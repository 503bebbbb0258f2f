"""A search space file takes the shapes ``../shared/conformance/EXTENSIONS.md`` defines for a
budget, a slicer and a scorer entry, where they mean something in a space (fixed values): a
budget's ``reserved_slots`` and ``estimation_safety_margin_percent``, a quota slicer's
``quotas`` and a count quota's ``entries`` as the lists of tables a policy file has, and the
``kind`` / ``tag`` scorers' ``weights`` / ``tag_weights`` lists. Each was refused (or misread
as choices) before."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from cupel_np.errors import InvalidConfigError
from cupel_np.model.policy import Policy
from cupel_np.tuning.space import SearchSpace, _LowTrial

BUDGET = {"max_tokens": 1000, "output_reserve": 200}


def _sampled(space: dict):
    sp = SearchSpace.from_dict(space)
    trial = _LowTrial()
    return Policy.from_dict(sp.config(trial)), sp.budget(trial)


def test_budget_reserved_slots_and_safety_margin(tmp_path):
    space = tmp_path / "space.toml"
    space.write_text(
        "[budget]\nmax_tokens = 1000\noutput_reserve = 200\nreserved_slots = { Memory = 50, ToolOutput = 20 }\n"
        "estimation_safety_margin_percent = 10.0\n[scorers.priority]\n",
        encoding="utf-8",
    )
    sp = SearchSpace.from_file(space)
    b = sp.budget(_LowTrial())
    assert (b.max_tokens, b.target_tokens) == (1000, 800)
    assert dict(b.reserved_slots) == {"Memory": 50, "ToolOutput": 20}
    assert b.estimation_safety_margin_percent == 10.0


def test_budget_extension_values_are_checked_when_the_space_is_read():
    bad = {"budget": dict(BUDGET, estimation_safety_margin_percent=150.0), "scorers": {"priority": {}}}
    with pytest.raises(InvalidConfigError, match="estimation_safety_margin_percent"):
        SearchSpace.from_dict(bad)
    bad = {"budget": dict(BUDGET, reserved_slots={"Memory": -1}), "scorers": {"priority": {}}}
    with pytest.raises(InvalidConfigError, match="reserved_slots"):
        SearchSpace.from_dict(bad)


@pytest.mark.parametrize(
    "slicer",
    [
        {
            "slicer": "quota",
            "inner_slicer": "knapsack",
            "bucket_size": 50,
            "quotas": [{"kind": "Message", "require": 10.0, "cap": 60.0}, {"kind": "ToolOutput", "cap": 50.0}],
        },
        {
            "slicer": "quota",
            "quotas": [{"kind": "Message", "require": 10.0, "cap": 60.0}],
        },
        {
            "slicer": "count_quota",
            "inner_slicer": "greedy",
            "scarcity_behavior": "degrade",
            "entries": [{"kind": "ToolOutput", "require_count": 1, "cap_count": 3}],
        },
        {
            "slicer": "count_constrained_knapsack",
            "bucket_size": 100,
            "entries": [{"kind": "ToolOutput", "require_count": 1, "cap_count": 3}, {"kind": "Memory", "cap_count": 2}],
        },
    ],
    ids=["quota", "one-quota", "count_quota", "count_constrained_knapsack"],
)
def test_quota_and_entry_lists_are_the_policy_file_s_lists(slicer):
    opts = {k: v for k, v in slicer.items() if k != "slicer"}
    pol, _b = _sampled({"budget": BUDGET, "scorers": {"priority": {}}, "slicers": {slicer["slicer"]: opts}})
    assert pol.slicer == Policy.from_dict(dict(slicer, scorers=[{"type": "priority"}])).slicer


def test_quota_lists_can_still_be_searched_as_choices():
    a = [{"kind": "Message", "cap": 60.0}]
    b = [{"kind": "Message", "cap": 30.0}]
    sp = SearchSpace.from_dict(
        {"budget": BUDGET, "scorers": {"priority": {}}, "slicers": {"quota": {"quotas": {"choices": [a, b]}}}}
    )
    pol = Policy.from_dict(sp.config(_LowTrial()))
    assert pol.slicer == Policy.from_dict({"slicer": "quota", "quotas": a, "scorers": [{"type": "priority"}]}).slicer


@pytest.mark.parametrize(
    ("type_name", "key", "entries"),
    [
        ("kind", "weights", [{"kind": "Message", "weight": 0.5}, {"kind": "ToolOutput", "weight": 1.0}]),
        ("tag", "tag_weights", [{"tag": "a", "weight": 0.5}, {"tag": "b", "weight": 1.0}]),
    ],
)
def test_kind_and_tag_weight_lists(tmp_path, type_name, key, entries):
    space = {"budget": BUDGET, "scorers": {type_name: {"weight": 1.0, key: entries}}}
    pol, _b = _sampled(space)
    assert pol.scorer == Policy.from_dict({"scorers": [{"type": type_name, key: entries}]}).scorer
    dup = {"budget": BUDGET, "scorers": {type_name: {key: [*entries, entries[0]]}}}
    with pytest.raises(InvalidConfigError, match=f"scorers.{type_name}.{key}"):
        SearchSpace.from_dict(dup)
    bad = {"budget": BUDGET, "scorers": {type_name: {key: [dict(entries[0], wieght=1.0)]}}}
    with pytest.raises(InvalidConfigError, match="wieght"):
        SearchSpace.from_dict(bad)


@pytest.mark.parametrize(
    ("table", "where"),
    [
        ({"recency": {"wieght": [0.1, 1.0]}}, "scorers.recency"),
        ({"fresh": {"type": "recency", "optinal": False}}, "scorers.fresh"),
        (
            {"decay": {"curve": {"type": "window", "max_age_secs": 60.0}, "refrence_time": "2025-01-01T00:00:00Z"}},
            "scorers.decay",
        ),
    ],
)
def test_a_misspelt_scorer_option_is_named_where_the_space_has_it(table, where):
    """A typo in a scorer table was reported against the sampled policy (``search space gives
    an invalid policy: scorers[0]: unknown key 'wieght'``), not the space table holding it."""
    bad = sorted(set(next(iter(table.values()))) - {"type", "curve"})[0]
    with pytest.raises(InvalidConfigError, match=rf"^{where}: unknown key '{bad}' \(did you mean"):
        SearchSpace.from_dict({"budget": BUDGET, "scorers": table})


def test_a_search_over_a_decay_scorer_with_a_reference_time(tmp_path):
    """A space's decay scorer carries a date-time (``reference_time``): the search keyed and
    stored its policies as JSON, which a date-time broke (``TypeError: Object of type datetime
    is not JSON serializable``); the best policy files read back to the same policy."""
    from cupel_np import tune
    from cupel_np.tuning import write_tune
    from cupel_np.tuning.synthetic import trust_corpus

    decay = {
        "weight": [0.1, 1.0],
        "optional": False,
        "reference_time": datetime(2025, 1, 1, 12, 0, tzinfo=UTC),
        "curve": {"type": "step", "windows": [{"max_age_secs": 3600.0, "score": 0.9}]},
    }
    space = {"budget": {"max_tokens": 1500}, "scorers": {"decay": decay, "priority": {}}}
    items = trust_corpus(n_sets=12, items_per_set=8, seed=2)
    found = tune(items, space, label_column="relevant", set_column="session_id", trials=4, batch_size=4, n_boot=20)
    label, pol, _b = found.best[0]
    assert "decay" in [s.type_name for s, _w in pol.scorer.entries]
    paths = write_tune(found, tmp_path / "out")
    assert Policy.from_file(paths["best-1"]) == pol
