"""Policy specs: validation at construction, round trips, .NET JSON shape, presets."""

import json
from datetime import UTC, datetime

import pytest

import cupel_np as c
from cupel_np.errors import CupelError, InvalidConfigError, InvalidInputTypeError

FULL = {
    "slicer": "count_quota",
    "inner_slicer": "greedy",
    "scarcity_behavior": "throw",
    "entries": [{"kind": "ToolOutput", "require_count": 1, "cap_count": 3}],
    "placer": "u_shaped",
    "deduplication": False,
    "overflow_strategy": "truncate",
    "name": "full",
    "description": "every scorer",
    "scorers": [
        {"type": "recency", "weight": 1.0},
        {"type": "kind", "weight": 2.0, "weights": [{"kind": "Memory", "weight": 3.0}]},
        {"type": "tag", "weight": 1.0, "tag_weights": [{"tag": "db", "weight": 2.0}]},
        {"type": "scaled", "weight": 1.0, "inner": {"type": "priority"}},
        {
            "type": "composite",
            "weight": 1.0,
            "scorers": [{"type": "frequency", "weight": 1.0}, {"type": "reflexive", "weight": 3.0}],
        },
        {"type": "metadata_trust", "weight": 1.0, "default_score": 0.25},
        {"type": "metadata_key", "weight": 1.0, "key": "k", "value": "v", "boost": 1.5},
        {
            "type": "decay",
            "weight": 1.0,
            "reference_time": datetime(2025, 1, 1, tzinfo=UTC),
            "null_timestamp_score": 0.1,
            "curve": {
                "type": "step",
                "windows": [{"max_age_secs": 60.0, "score": 1.0}, {"max_age_secs": 3600.0, "score": 0.2}],
            },
        },
    ],
}


def test_round_trip_and_hashable():
    p = c.Policy.from_dict(FULL)
    assert c.Policy.from_dict(p.to_dict()) == p
    assert hash(c.Policy.from_dict(FULL)) == hash(p)
    assert {p: 1}[c.Policy.from_dict(FULL)] == 1
    assert c.Policy.from_json(p.to_json()) == p


def test_toml_file(tmp_path):
    f = tmp_path / "p.toml"
    f.write_text(
        'name = "t"\n[config]\nslicer = "knapsack"\nbucket_size = 10\n'
        '[[config.scorers]]\ntype = "reflexive"\nweight = 1.0\n'
    )
    p = c.Policy.from_file(f)
    assert p.slicer == c.KnapsackSlice(10) and p.name == "t"
    bad = tmp_path / "bad.toml"
    bad.write_text("[config\n")
    with pytest.raises(InvalidConfigError, match="bad.toml.*malformed policy TOML"):
        c.Policy.from_file(bad)
    with pytest.raises(InvalidConfigError, match="cannot read policy file"):
        c.Policy.from_file(tmp_path / "missing.json")


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda d: d["scorers"][0].update(weight=0.0), r"weight must be positive"),
        (lambda d: d["scorers"][0].update(weight=float("inf")), r"weight must be finite"),
        (lambda d: d["scorers"][1]["weights"][0].update(weight=-1.0), r"kind weight for 'Memory' must be non-negative"),
        (
            lambda d: d["scorers"][2]["tag_weights"][0].update(weight=float("nan")),
            r"tag weight for 'db' must be finite",
        ),
        (lambda d: d["scorers"][6].update(boost=0.0), r"boost must be positive"),
        (lambda d: d["scorers"][5].update(default_score=1.5), r"default_score must be in"),
        (lambda d: d["scorers"][7].update(null_timestamp_score=-0.1), r"null_timestamp_score"),
        (
            lambda d: d["scorers"][7]["curve"]["windows"][0].update(max_age_secs=0.0),
            r"window 0 max_age_secs must be > 0",
        ),
        (lambda d: d["scorers"][0].update(type="bogus"), r"unknown scorer type 'bogus'"),
        (lambda d: d.update(slicer="nope"), r"unknown slicer 'nope'"),
        (lambda d: d.update(placer="sideways"), r"unknown placer 'sideways'"),
        (lambda d: d.update(overflow_strategy="explode"), r"unknown overflow_strategy"),
        (lambda d: d.update(inner_slicer="knapsack"), r"does not support a knapsack inner"),
        (
            lambda d: d["entries"].append({"kind": "tooloutput", "require_count": 0, "cap_count": 1}),
            r"names kind 'tooloutput' twice",
        ),
        (lambda d: d["entries"][0].update(require_count=4), r"require_count \(4\) must be <= cap_count \(3\)"),
        (lambda d: d.update(scorers=[]), r"non-empty 'scorers'"),
    ],
)
def test_bad_configs_fail_at_construction_naming_the_field(mutate, match):
    d = json.loads(json.dumps(FULL, default=str))
    d["scorers"][7]["reference_time"] = FULL["scorers"][7]["reference_time"]
    mutate(d)
    with pytest.raises(InvalidConfigError, match=match) as ei:
        c.Policy.from_dict(d)
    assert isinstance(ei.value, ValueError) and isinstance(ei.value, CupelError)


def test_wrong_types_are_type_errors():
    with pytest.raises(InvalidInputTypeError) as ei:
        c.Policy.from_dict({"scorers": [{"type": "recency", "weight": "heavy"}, {"type": "kind"}]})
    assert isinstance(ei.value, TypeError)
    with pytest.raises(InvalidInputTypeError, match="knapsack bucket_size must be an integer, got str '100'"):
        c.KnapsackSlice("100")


def test_quota_validation():
    with pytest.raises(InvalidConfigError, match="sum of quota require"):
        c.QuotaSlice((c.QuotaEntry("a", 60, 100), c.QuotaEntry("b", 50, 100)))
    with pytest.raises(InvalidConfigError, match=r"require \(50.0\) must be <= cap \(10.0\)"):
        c.QuotaEntry("a", 50, 10)
    with pytest.raises(InvalidConfigError, match=r"in \[0.0, 100.0\]"):
        c.QuotaEntry("a", 0, 101)


DOTNET = (
    '{"scorers":[{"type":"recency","weight":2},{"type":"kind","weight":1.5,'
    '"kindWeights":{"Message":0.8,"Document":1.2}},{"type":"tag","weight":1,'
    '"tagWeights":{"important":2,"low":0.5}},{"type":"scaled","weight":2,"innerScorer":'
    '{"type":"recency","weight":1}}],"slicerType":"knapsack","placerType":"uShaped",'
    '"deduplicationEnabled":false,"overflowStrategy":"truncate","knapsackBucketSize":50,'
    '"quotas":[{"kind":"Message","minPercent":10,"maxPercent":60},{"kind":"Document",'
    '"maxPercent":40}],"name":"Full Test Policy","description":"A policy with all options"}'
)


def test_dotnet_json_loads_unchanged():
    p = c.Policy.from_json(DOTNET)
    assert p.placer == "u_shaped" and p.deduplication is False and p.overflow_strategy == "truncate"
    assert p.slicer == c.QuotaSlice(
        (c.QuotaEntry("Message", 10, 60), c.QuotaEntry("Document", 0, 40)), c.KnapsackSlice(50)
    )
    kinds = [s for s, _ in p.scorer.entries]
    assert kinds[1] == c.KindScorer((("Message", 0.8), ("Document", 1.2)))
    assert kinds[3] == c.ScaledScorer(c.RecencyScorer())
    assert [w for _, w in p.scorer.entries] == [2.0, 1.5, 1.0, 2.0]
    assert c.policy_from_dotnet(c.policy_to_dotnet(p)) == p


@pytest.mark.parametrize(
    "doc, match",
    [
        ('{"scorers":[{"type":"Recency","weight":1}],"slicerType":"greedy"}', "unknown value 'Recency'"),
        ('{"scorers":[{"type":"tag","weight":1}],"slicerType":"greedy"}', "tagWeights must be specified"),
        (
            '{"scorers":[{"type":"recency","weight":1}],"slicerType":"greedy","knapsackBucketSize":5}',
            "only be specified",
        ),
        (
            '{"scorers":[{"type":"recency","weight":0}],"placerType":"chronological"}',
            r"scorers\[0\]\.weight must be positive",
        ),
        ('{"scorers":[],"slicerType":"greedy"}', "at least one"),
        ('{"scorers": [', "malformed policy JSON"),
    ],
)
def test_dotnet_json_errors(doc, match):
    with pytest.raises(InvalidConfigError, match=match):
        c.Policy.from_json(doc)


def test_presets_match_upstream():
    assert set(c.PRESETS) == {"chat", "code_review", "rag", "document_qa", "tool_use", "long_running", "debugging"}
    qa = c.preset("document-qa")
    assert qa is c.preset("DocumentQa")
    assert qa.slicer == c.KnapsackSlice(100) and qa.placer == "u_shaped"
    assert [(s.type_name, w) for s, w in qa.scorer.entries] == [("kind", 2.0), ("reflexive", 2.0), ("priority", 1.0)]
    lr = c.preset("long_running")
    assert [(s.type_name, w) for s, w in lr.scorer.entries] == [("recency", 3.0), ("frequency", 1.0), ("kind", 1.0)]
    for p in c.PRESETS.values():
        assert p.deduplication and p.overflow_strategy == "throw"
    with pytest.raises(InvalidConfigError, match="unknown preset 'nope'"):
        c.preset("nope")


@pytest.mark.parametrize("weight", [-1, 0, 0.0, float("nan"), float("inf"), -float("inf")])
@pytest.mark.parametrize("n_scorers", [1, 2])
def test_an_invalid_weight_is_refused_with_one_scorer_as_with_two(weight, n_scorers):
    """Issue 26: one scorer used to turn weight -1 / 0 / NaN / inf into 1.0 silently, while the
    same weight in a list of two was refused."""
    with pytest.raises(c.InvalidConfigError, match="weight must be"):
        c.Policy.from_dict({"scorers": [{"type": "priority", "weight": weight}] * n_scorers})


def test_a_scaled_inner_entry_with_a_weight_is_the_same_policy_as_without():
    """Issue 26: the inner entry's weight (EXTENSIONS.md, .NET's ScorerEntry) is accepted by the
    dict/TOML path and ignored."""
    with_w = c.Policy.from_dict(
        {"scorers": [{"type": "scaled", "weight": 1, "inner": {"type": "priority", "weight": 2}}]}
    )
    without = c.Policy.from_dict({"scorers": [{"type": "scaled", "inner_scorer": "priority"}]})
    assert with_w.scorer == without.scorer
