"""Prove the naive oracle (tests/naive.py) right against every conformance vector.

The vectors live outside the repository, in <workspace>/shared/conformance.
They are TOML 1.1 (optional seconds in date-times), so they are read with
``tomli``, not the standard library's ``tomllib``.
"""

import math
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import tomli

sys.path.insert(0, str(Path(__file__).resolve().parent))

import naive  # noqa: E402
from conftest import missing_conformance  # noqa: E402
from naive import NaiveError  # noqa: E402

CONFORMANCE_DIR = Path(__file__).resolve().parents[2] / "shared" / "conformance"
DEFAULT_EPSILON = 1e-9

# Exclusion-reason fields a pipeline vector may state next to exclusion_reason.
EXCLUSION_FIELDS = (
    "item_tokens",
    "available_tokens",
    "deduplicated_against",
    "tokens",
    "displaced_by",
    "kind",
    "cap",
    "count",
)


def _vector_files():
    if not CONFORMANCE_DIR.is_dir():
        return []
    return sorted(CONFORMANCE_DIR.rglob("*.toml"))


VECTOR_FILES = _vector_files()


def _vector_id(path):
    return str(path.relative_to(CONFORMANCE_DIR)) if path is not None else "no-vectors"


def _load(path):
    with open(path, "rb") as handle:
        return tomli.load(handle)


# ---------------------------------------------------------------------------
# Vector -> oracle input conversion
# ---------------------------------------------------------------------------


def _item_from_vector(raw):
    """A vector [[items]] / [[scored_items]] table -> naive item dict."""
    item = {
        "content": raw["content"],
        "tokens": raw.get("tokens", 0),
    }
    for key in ("kind", "source", "priority", "tags", "metadata", "timestamp", "pinned"):
        if key in raw:
            item[key] = raw[key]
    if "futureRelevanceHint" in raw:
        item["future_relevance_hint"] = raw["futureRelevanceHint"]
    elif "future_relevance_hint" in raw:
        item["future_relevance_hint"] = raw["future_relevance_hint"]
    return item


def _expected_error(vector):
    """The error code a vector expects, or None."""
    expected = vector.get("expected")
    if isinstance(expected, dict) and "error" in expected:
        return expected["error"]
    if vector.get("test", {}).get("expect_construction_error"):
        return "invalid_config"
    return None


def _close(actual, expected, epsilon):
    return abs(actual - expected) < epsilon or (math.isinf(expected) and actual == expected)


# ---------------------------------------------------------------------------
# Stage runners
# ---------------------------------------------------------------------------


def _check_scoring(vector):
    test = vector["test"]
    scorer_entry = dict(vector.get("config", {}))
    scorer_entry["type"] = test["scorer"]
    items = [_item_from_vector(raw) for raw in vector.get("items", [])]

    error = _expected_error(vector)
    if error is not None:
        with pytest.raises(NaiveError) as info:
            naive.score_items(items, scorer_entry)
        assert info.value.code == error
        return

    scores = naive.score_items(items, scorer_entry)
    epsilon = vector.get("tolerance", {}).get("score_epsilon", DEFAULT_EPSILON)
    expected = vector.get("expected", [])
    assert len(expected) == len(items)
    for position, want in enumerate(expected):
        assert items[position]["content"] == want["content"]
        assert _close(scores[position], want["score_approx"], epsilon), (
            want["content"],
            scores[position],
            want["score_approx"],
        )


def _check_slicing(vector):
    test = vector["test"]
    config = dict(vector.get("config", {}))
    config["slicer"] = test["slicer"]
    target = vector["budget"]["target_tokens"]
    scored = [(_item_from_vector(raw), raw["score"]) for raw in vector.get("scored_items", [])]

    error = _expected_error(vector)
    if error is not None:
        with pytest.raises(NaiveError) as info:
            naive.slice_items(scored, target, config, max_tokens=target)
        assert info.value.code == error
        return

    detail = naive.slice_items_detailed(scored, target, config, max_tokens=target)
    selected, shortfalls = naive.slice_items(scored, target, config, max_tokens=target)
    assert selected == detail["selected"]
    assert shortfalls == detail["shortfalls"]
    assert len(set(selected)) == len(selected), "slicer returned an item twice"

    expected = vector["expected"]
    got_contents = sorted(scored[p][0]["content"] for p in selected)
    assert got_contents == sorted(expected["selected_contents"])
    if "shortfall_count" in expected:
        assert len(shortfalls) == expected["shortfall_count"]
    if "cap_excluded_count" in expected:
        assert detail["cap_excluded_count"] == expected["cap_excluded_count"]


def _check_placing(vector):
    test = vector["test"]
    merged = [(_item_from_vector(raw), raw["score"]) for raw in vector.get("items", [])]

    error = _expected_error(vector)
    if error is not None:
        with pytest.raises(NaiveError) as info:
            naive.place(merged, test["placer"])
        assert info.value.code == error
        return

    order = naive.place(merged, test["placer"])
    assert sorted(order) == list(range(len(merged)))
    got = [merged[p][0]["content"] for p in order]
    assert got == vector["expected"]["ordered_contents"]


def _budget_from_vector(raw):
    budget = {
        "max_tokens": raw["max_tokens"],
        "target_tokens": raw["target_tokens"],
        "output_reserve": raw.get("output_reserve", 0),
    }
    if "reserved_slots" in raw:
        budget["reserved_slots"] = raw["reserved_slots"]
    if "estimation_safety_margin_percent" in raw:
        budget["estimation_safety_margin_percent"] = raw["estimation_safety_margin_percent"]
    return budget


def _check_report_invariants(items, report):
    rows_seen = [row for row, _s, _r in report["included"]]
    rows_seen += [row for row, _s, _r, _f in report["excluded"]]
    assert sorted(rows_seen) == list(range(len(items))), "every row exactly once"
    assert report["placed"] == [row for row, _s, _r in report["included"]]
    assert report["total_candidates"] == len(items)
    assert report["total_tokens_considered"] == sum(item["tokens"] for item in items)
    excluded_scores = [score for _row, score, _r, _f in report["excluded"]]
    assert excluded_scores == sorted(excluded_scores, reverse=True)


def _check_pipeline(vector):
    items = [_item_from_vector(raw) for raw in vector.get("items", [])]
    budget = _budget_from_vector(vector["budget"])
    config = vector.get("config", {})

    error = _expected_error(vector)
    if error is not None:
        with pytest.raises(NaiveError) as info:
            naive.run_pipeline(items, budget, config)
        assert info.value.code == error
        return

    report = naive.run_pipeline(items, budget, config)
    _check_report_invariants(items, report)

    contents = [items[row]["content"] for row in report["placed"]]
    expected_output = [entry["content"] for entry in vector.get("expected_output", [])]
    assert contents == expected_output

    diagnostics = vector.get("expected", {}).get("diagnostics")
    if diagnostics is None:
        return
    epsilon = vector.get("tolerance", {}).get("score_epsilon", DEFAULT_EPSILON)

    summary = diagnostics.get("summary", {})
    if "total_candidates" in summary:
        assert report["total_candidates"] == summary["total_candidates"]
    if "total_tokens_considered" in summary:
        assert report["total_tokens_considered"] == summary["total_tokens_considered"]

    want_included = diagnostics.get("included", [])
    assert len(report["included"]) == len(want_included)
    for (row, score, reason), want in zip(report["included"], want_included):
        assert items[row]["content"] == want["content"]
        if "score_approx" in want:
            assert _close(score, want["score_approx"], epsilon), (want, score)
        if "inclusion_reason" in want:
            assert reason == want["inclusion_reason"]

    want_excluded = diagnostics.get("excluded", [])
    assert len(report["excluded"]) == len(want_excluded)
    for (row, score, reason, fields), want in zip(report["excluded"], want_excluded):
        assert items[row]["content"] == want["content"]
        if "score_approx" in want:
            assert _close(score, want["score_approx"], epsilon), (want, score)
        if "exclusion_reason" in want:
            assert reason == want["exclusion_reason"]
        for field in EXCLUSION_FIELDS:
            if field in want:
                assert fields.get(field) == want[field], (field, fields, want)


def _check_sensitivity(vector):
    """EXTENSIONS.md section 2, evaluated by running the naive pipeline per variant."""
    items = [_item_from_vector(raw) for raw in vector.get("items", [])]
    budget = _budget_from_vector(vector["budget"])
    variants = vector.get("variants", [])

    error = _expected_error(vector)
    if error == "too_few_variants":
        assert len(variants) < 2
        return
    if error is not None:
        with pytest.raises(NaiveError) as info:
            for variant in variants:
                naive.run_pipeline(items, budget, variant["config"])
        assert info.value.code == error
        return

    statuses = {}  # content -> {label: status}
    got_variants = []
    for variant in variants:
        report = naive.run_pipeline(items, budget, variant["config"])
        included = [items[row]["content"] for row, _s, _r in report["included"]]
        got_variants.append({"label": variant["label"], "included": included})
        for item in items:
            status = "Included" if item["content"] in included else "Excluded"
            statuses.setdefault(item["content"], {})[variant["label"]] = status

    expected = vector.get("expected", {})
    if "variants" in expected:
        assert got_variants == [{"label": v["label"], "included": list(v["included"])} for v in expected["variants"]]
    if "diffs" in expected:
        got_diffs = {content: by_label for content, by_label in statuses.items() if len(set(by_label.values())) > 1}
        want_diffs = {
            diff["content"]: {s["label"]: s["status"] for s in diff["statuses"]} for diff in expected["diffs"]
        }
        assert got_diffs == want_diffs


STAGE_CHECKS = {
    "scoring": _check_scoring,
    "slicing": _check_slicing,
    "placing": _check_placing,
    "pipeline": _check_pipeline,
    "sensitivity": _check_sensitivity,
}


@pytest.mark.parametrize("vector_path", VECTOR_FILES or [None], ids=_vector_id)
def test_conformance_vector(vector_path):
    if vector_path is None:
        missing_conformance(CONFORMANCE_DIR)
    vector = _load(vector_path)
    stage = vector["test"]["stage"]
    if stage not in STAGE_CHECKS:
        pytest.fail(f"unknown stage {stage!r} in {vector_path}")
    STAGE_CHECKS[stage](vector)


def test_vectors_cover_every_stage():
    if not VECTOR_FILES:
        missing_conformance(CONFORMANCE_DIR)
    stages = {_load(path)["test"]["stage"] for path in VECTOR_FILES}
    assert {"scoring", "slicing", "placing", "pipeline"} <= stages


# ---------------------------------------------------------------------------
# Hand-computed checks of rules the upstream vectors do not reach.
# ---------------------------------------------------------------------------


def _hinted(content, tokens, hint, **extra):
    item = {"content": content, "tokens": tokens, "future_relevance_hint": hint}
    item.update(extra)
    return item


REFLEXIVE = {"scorers": [{"type": "reflexive", "weight": 1.0}]}


def _run(items, budget, **config):
    merged = dict(REFLEXIVE)
    merged.update(config)
    return naive.run_pipeline(items, budget, merged)


def test_pinned_exceeds_budget_compares_with_max_minus_reserve():
    items = [{"content": "p", "tokens": 90, "pinned": True}]
    with pytest.raises(NaiveError) as info:
        _run(items, {"max_tokens": 100, "target_tokens": 50, "output_reserve": 20})
    assert info.value.code == "pinned_exceeds_budget"
    # 80 <= 100 - 20 passes Classify; 80 > target 50 then overflows at Place.
    items = [{"content": "p", "tokens": 80, "pinned": True}]
    with pytest.raises(NaiveError) as info:
        _run(items, {"max_tokens": 100, "target_tokens": 50, "output_reserve": 20})
    assert info.value.code == "overflow"


COUNT_TWO_TOOLS = {
    "slicer": "count_quota",
    "entries": [{"kind": "tool", "require_count": 2, "cap_count": 2}],
}


def test_count_phase1_overflow_throw_and_truncate():
    items = [_hinted("a", 80, 0.9, kind="tool"), _hinted("b", 80, 0.5, kind="tool")]
    budget = {"max_tokens": 1000, "target_tokens": 100}
    with pytest.raises(NaiveError) as info:
        _run(items, budget, **COUNT_TWO_TOOLS)
    assert info.value.code == "overflow"

    report = _run(items, budget, overflow_strategy="truncate", **COUNT_TWO_TOOLS)
    assert report["placed"] == [0]
    assert report["excluded"] == [(1, 0.5, "BudgetExceeded", {"item_tokens": 80, "available_tokens": 20})]

    report = _run(items, budget, overflow_strategy="proceed", **COUNT_TWO_TOOLS)
    assert report["placed"] == [0, 1]
    assert report["excluded"] == []


def test_count_cap_exceeded_reason_and_shortfalls():
    items = [
        _hinted("t1", 10, 0.9, kind="Tool"),
        _hinted("t2", 10, 0.7, kind="tool"),
        _hinted("t3", 10, 0.5, kind="TOOL"),
        _hinted("m1", 10, 0.4),
    ]
    config = {
        "slicer": "count_quota",
        "entries": [
            {"kind": "tool", "require_count": 0, "cap_count": 1},
            {"kind": "Memory", "require_count": 2, "cap_count": 3},
        ],
    }
    report = _run(items, {"max_tokens": 1000, "target_tokens": 1000}, **config)
    assert report["placed"] == [0, 3]
    assert report["shortfalls"] == [("Memory", 2, 0)]
    assert report["excluded"] == [
        (1, 0.7, "CountCapExceeded", {"kind": "tool", "cap": 1, "count": 1}),
        (2, 0.5, "CountCapExceeded", {"kind": "TOOL", "cap": 1, "count": 1}),
    ]
    config["scarcity_behavior"] = "throw"
    with pytest.raises(NaiveError) as info:
        _run(items, {"max_tokens": 1000, "target_tokens": 1000}, **config)
    assert info.value.code == "scarcity"


def test_effective_budget_margin_and_reserved_slots():
    items = [_hinted(f"i{k}", 120, 0.9 - k / 10) for k in range(4)]
    plain = _run(items, {"max_tokens": 1000, "target_tokens": 500})
    assert sorted(plain["placed"]) == [0, 1, 2, 3]
    for budget in (
        {"max_tokens": 1000, "target_tokens": 500, "estimation_safety_margin_percent": 10.0},
        {"max_tokens": 1000, "target_tokens": 500, "reserved_slots": {"Message": 50}},
    ):
        report = _run(items, budget)
        assert sorted(report["placed"]) == [0, 1, 2]
        assert report["excluded"] == [
            (3, pytest.approx(0.6), "BudgetExceeded", {"item_tokens": 120, "available_tokens": 90})
        ]


def test_inclusion_reasons_and_u_shape_with_pinned():
    items = [
        _hinted("z", 0, 0.1),
        {"content": "p", "tokens": 10, "pinned": True},
        _hinted("x", 10, 0.8),
        _hinted("n", -3, 0.9),
    ]
    report = _run(items, {"max_tokens": 100, "target_tokens": 100}, placer="u-shaped")
    # merged = [p(1.0), z(0.1), x(0.8)] in slicer order: z first (zero tokens)
    # ranks: p, x, z -> [p, z, x]
    assert report["placed"] == [1, 0, 2]
    assert report["included"] == [(1, 1.0, "Pinned"), (0, 0.1, "ZeroToken"), (2, 0.8, "Scored")]
    assert report["excluded"] == [(3, 0.0, "NegativeTokens", {"tokens": -3})]
    assert report["total_tokens_considered"] == 17


def test_knapsack_output_order_and_quota_kind_order():
    scored = [
        ({"content": "a", "tokens": 100}, 0.9),
        ({"content": "z", "tokens": 0}, 0.1),
        ({"content": "b", "tokens": 100}, 0.8),
    ]
    # zero-token items first, then reconstruction order (last candidate first)
    assert naive.slice_items(scored, 200, {"slicer": "knapsack"}) == ([1, 2, 0], [])

    scored = [
        ({"content": "m", "tokens": 10, "kind": "message"}, 0.9),
        ({"content": "d", "tokens": 10, "kind": "Document"}, 0.8),
        ({"content": "M", "tokens": 10, "kind": "MESSAGE"}, 0.7),
    ]
    # partitions "document" < "message"; each keeps input order
    assert naive.slice_items(scored, 100, {"slicer": "quota"}) == ([1, 0, 2], [])


def test_deduplication_tie_keeps_lower_index():
    items = [_hinted("same", 10, 0.5), _hinted("same", 10, 0.5), _hinted("other", 10, 0.2)]
    report = _run(items, {"max_tokens": 100, "target_tokens": 100})
    assert sorted(report["placed"]) == [0, 2]
    assert report["excluded"] == [(1, 0.5, "Deduplicated", {"deduplicated_against": "same"})]
    report = _run(items, {"max_tokens": 100, "target_tokens": 100}, deduplication=False)
    assert sorted(report["placed"]) == [0, 1, 2]


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("0.25", 0.25),
        ("+.5", 0.5),
        ("5.", 1.0),
        ("-0.1", 0.0),
        ("1e-1", 0.1),
        ("1E-1", 0.1),
        (" 0.5", 0.3),
        ("0.5 ", 0.3),
        ("1_0", 0.3),
        ("0x1p-1", 0.3),
        ("inf", 0.3),
        ("-Infinity", 0.3),
        ("NaN", 0.3),
        ("", 0.3),
        (".", 0.3),
        ("e5", 0.3),
        ("1e", 0.3),
        ("\u0665", 0.3),
        ("1e400", 0.3),
    ],
)
def test_metadata_trust_parsing(raw, expected):
    items = [{"content": "c", "tokens": 1, "metadata": {"cupel:trust": raw}}]
    scores = naive.score_items(items, {"type": "metadata_trust", "default_score": 0.3})
    assert scores == [pytest.approx(expected)]


def test_decay_curves_and_scaled_inner_table():
    now = datetime(2025, 1, 1, 12, tzinfo=UTC)
    items = [
        {"content": "a", "tokens": 1, "timestamp": now - timedelta(hours=1)},
        {"content": "b", "tokens": 1, "timestamp": now - timedelta(hours=3)},
        {"content": "c", "tokens": 1},
    ]
    step = {"type": "step", "windows": [{"max_age_secs": 3600, "score": 0.9}, {"max_age_secs": 7200, "score": 0.4}]}
    decay = {"type": "decay", "reference_time": now, "curve": step, "null_timestamp_score": 0.1}
    assert naive.score_items(items, decay) == [0.4, 0.4, 0.1]
    decay["curve"] = {"type": "exponential", "half_life_secs": 3600}
    assert naive.score_items(items, decay) == [0.5, 0.125, 0.1]
    scaled = {"type": "scaled", "inner": decay}
    assert naive.score_items(items, scaled) == [1.0, pytest.approx(0.025 / 0.4), 0.0]


_NOW = datetime(2025, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    "scorer",
    [
        {"type": "nope"},
        {"type": "composite", "scorers": []},
        {"type": "composite", "scorers": [{"type": "recency", "weight": 0.0}]},
        {"type": "composite", "scorers": [{"type": "recency", "weight": -1.0}]},
        {"type": "composite", "scorers": [{"type": "recency", "weight": math.inf}]},
        {"type": "composite", "children": [{"type": "recency", "weight": math.nan}]},
        {"type": "kind", "weights": [{"kind": "Message", "weight": -0.1}]},
        {"type": "kind", "weights": [{"kind": "Message", "weight": math.inf}]},
        {"type": "tag", "tag_weights": [{"tag": "x", "weight": -1.0}]},
        {"type": "tag", "tag_weights": [{"tag": "x", "weight": math.nan}]},
        {"type": "metadata_key", "key": "k", "value": "v", "boost": 0.0},
        {"type": "metadata_key", "key": "k", "value": "v", "boost": math.inf},
        {"type": "metadata_trust", "default_score": 1.5},
        {"type": "metadata_trust", "default_score": -0.1},
        {"type": "decay", "reference_time": _NOW, "curve": {"type": "exponential", "half_life_secs": 0.0}},
        {"type": "decay", "reference_time": _NOW, "curve": {"type": "window", "max_age_secs": -1}},
        {"type": "decay", "reference_time": _NOW, "curve": {"type": "step", "windows": []}},
        {
            "type": "decay",
            "reference_time": _NOW,
            "curve": {"type": "step", "windows": [{"max_age_secs": 0, "score": 1.0}]},
        },
        {"type": "decay", "reference_time": _NOW, "curve": {"type": "linear"}},
        {
            "type": "decay",
            "reference_time": _NOW,
            "null_timestamp_score": 1.1,
            "curve": {"type": "window", "max_age_secs": 60},
        },
        {"type": "scaled", "inner_scorer": "nope"},
    ],
)
def test_invalid_scorer_config(scorer):
    with pytest.raises(NaiveError) as info:
        naive.score_items([], scorer)
    assert info.value.code == "invalid_config"


@pytest.mark.parametrize(
    "config",
    [
        {"slicer": "nope"},
        {"slicer": "knapsack", "bucket_size": 0},
        {"slicer": "count_constrained_knapsack", "bucket_size": -5},
        {"slicer": "quota", "quotas": [{"kind": "A", "require": -1.0, "cap": 50.0}]},
        {"slicer": "quota", "quotas": [{"kind": "A", "require": 10.0, "cap": 100.5}]},
        {"slicer": "quota", "quotas": [{"kind": "A", "require": 60.0, "cap": 50.0}]},
        {
            "slicer": "quota",
            "quotas": [{"kind": "A", "require": 60.0, "cap": 60.0}, {"kind": "B", "require": 50.0, "cap": 60.0}],
        },
        {
            "slicer": "quota",
            "quotas": [{"kind": "A", "require": 1.0, "cap": 2.0}, {"kind": "a", "require": 1.0, "cap": 2.0}],
        },
        {"slicer": "count_quota", "entries": [{"kind": "A", "require_count": 3, "cap_count": 2}]},
        {"slicer": "count_quota", "entries": [{"kind": "A", "require_count": 1, "cap_count": 0}]},
        {"slicer": "count_quota", "inner_slicer": "knapsack", "entries": []},
        {"slicer": "count_quota", "entries": [], "scarcity_behavior": "panic"},
    ],
)
def test_invalid_slicer_config(config):
    with pytest.raises(NaiveError) as info:
        naive.slice_items([], 100, config)
    assert info.value.code == "invalid_config"


@pytest.mark.parametrize(
    "budget, config",
    [
        ({"max_tokens": -1, "target_tokens": 0}, {}),
        ({"max_tokens": 10, "target_tokens": -1}, {}),
        ({"max_tokens": 10, "target_tokens": 11}, {}),
        ({"max_tokens": 10, "target_tokens": 5, "output_reserve": -1}, {}),
        ({"max_tokens": 10, "target_tokens": 5, "output_reserve": 11}, {}),
        ({"max_tokens": 10, "target_tokens": 5, "estimation_safety_margin_percent": 100.5}, {}),
        ({"max_tokens": 10, "target_tokens": 5, "estimation_safety_margin_percent": -0.5}, {}),
        ({"max_tokens": 10, "target_tokens": 5, "reserved_slots": {"Message": -1}}, {}),
        ({"max_tokens": 10, "target_tokens": 5}, {"placer": "sideways"}),
        ({"max_tokens": 10, "target_tokens": 5}, {"overflow_strategy": "explode"}),
        ({"max_tokens": 10, "target_tokens": 5}, {"scorers": []}),
        (
            {"max_tokens": 10, "target_tokens": 5},
            {"scorers": [{"type": "recency", "weight": 1.0}, {"type": "kind", "weight": 0.0}]},
        ),
    ],
)
def test_invalid_pipeline_config(budget, config):
    merged = dict(REFLEXIVE)
    merged.update(config)
    with pytest.raises(NaiveError) as info:
        naive.run_pipeline([_hinted("a", 1, 0.5)], budget, merged)
    assert info.value.code == "invalid_config"


def test_count_entry_without_cap_count_has_no_cap():
    # README "Differences from upstream" 6: cap_count may be left out ("no cap")
    items = [_hinted(c, 10, h, kind="tool") for c, h in (("a", 0.9), ("b", 0.8), ("c", 0.7))]
    budget = {"max_tokens": 100, "target_tokens": 100}
    report = _run(items, budget, slicer="count_quota", entries=[{"kind": "tool", "require_count": 1}])
    assert [row for row, _s, _r in report["included"]] == [0, 1, 2]
    # with a cap of 1 the two phase-2 picks are CountCapExceeded
    report = _run(items, budget, slicer="count_quota", entries=[{"kind": "tool", "require_count": 1, "cap_count": 1}])
    assert [row for row, _s, _r in report["included"]] == [0]
    assert [(row, reason) for row, _s, reason, _f in report["excluded"]] == [
        (1, "CountCapExceeded"),
        (2, "CountCapExceeded"),
    ]
    with pytest.raises(NaiveError) as info:
        _run(items, budget, slicer="count_quota", entries=[{"kind": "tool", "require_count": 2, "cap_count": 1}])
    assert info.value.code == "invalid_config"


def test_sensitivity_oracle_one_status_per_content():
    # "dup" is included under "prio" (first copy) and "hint" (second copy): no swing;
    # "other" swings; a failing variant is collected and left out of the diff
    items = [
        {"content": "dup", "tokens": 40, "priority": 10, "future_relevance_hint": 0.0},
        {"content": "other", "tokens": 40, "priority": 5, "future_relevance_hint": 0.5},
        {"content": "dup", "tokens": 40, "priority": 1, "future_relevance_hint": 1.0},
        {"content": "solo", "tokens": 40, "priority": 7, "future_relevance_hint": 0.1},
    ]
    budget = {"max_tokens": 100, "target_tokens": 80}
    variants = [
        ("prio", budget, {"scorers": [{"type": "priority"}], "deduplication": False}),
        ("hint", budget, {"scorers": [{"type": "reflexive"}], "deduplication": False}),
        (
            "tiny",
            {"max_tokens": 100, "target_tokens": 10},
            {
                "scorers": [{"type": "reflexive"}],
                "slicer": "count_quota",
                "scarcity_behavior": "throw",
                "entries": [{"kind": "Message", "require_count": 5}],
            },
        ),
    ]
    (s,) = naive.policy_sensitivity(items, variants)
    assert [label for label, _r in s["ok"]] == ["prio", "hint"]
    assert s["failed"] == [("tiny", "scarcity")]
    assert s["status"]["dup"] == {"prio": "Included", "hint": "Included"}
    assert s["diffs"] == [
        ("other", [("prio", "Excluded"), ("hint", "Included")]),
        ("solo", [("prio", "Included"), ("hint", "Excluded")]),
    ]
    # two sets, keyed per row, in order of first appearance
    out = naive.policy_sensitivity(items, variants[:2], set_keys=["y", "x", "y", "x"])
    assert [(s["key"], s["rows"]) for s in out] == [("y", [0, 2]), ("x", [1, 3])]
