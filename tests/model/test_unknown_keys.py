"""Issue 17.1: a typo never silently changes a policy. Every reader of a policy (dicts, TOML /
JSON policy files, policies files, grid files, the .NET shape) refuses a key it does not know,
naming the key and where it is, with a suggestion when a known key is close."""

from __future__ import annotations

import json

import pytest

from cupel_np.cli import main
from cupel_np.errors import InvalidConfigError
from cupel_np.model.budget import ContextBudget
from cupel_np.model.dotnet import policy_to_dotnet
from cupel_np.model.files import load_grid_file, load_policies_file
from cupel_np.model.grid import Sweep
from cupel_np.model.policy import Policy, policy_from_dotnet
from cupel_np.model.presets import PRESETS, preset
from cupel_np.model.scorers import scorer_dict_parser, scorer_from_dict
from cupel_np.model.slicers import KnapsackSlice

ISSUE_REPRO = {
    "slicer": "knapsack",
    "bucketsize": 5,
    "scorers": [{"type": "kind", "wieght": 5}],
    "placr": "u_shaped",
    "dedup": False,
}


def _recency(**extra) -> dict:
    return {"type": "recency", "weight": 1.0, **extra}


def test_issue_repro_is_an_error_naming_the_key():
    with pytest.raises(InvalidConfigError) as err:
        Policy.from_dict(ISSUE_REPRO)
    assert str(err.value).startswith(
        "policy config: unknown keys 'bucketsize' (did you mean 'bucket_size'?), 'placr' (did you mean 'placer'?), "
        "'dedup' (did you mean 'deduplication'?) for slicer 'knapsack'; known keys: "
    )
    fixed = {"slicer": "knapsack", "bucket_size": 5, "scorers": ISSUE_REPRO["scorers"]}
    with pytest.raises(InvalidConfigError, match=r"scorers\[0\]: unknown key 'wieght'.*did you mean 'weight'"):
        Policy.from_dict(fixed)


@pytest.mark.parametrize(
    "config, match",
    [
        ({"scorers": [_recency()], "placr": "u_shaped"}, r"unknown key 'placr'.*did you mean 'placer'"),
        ({"scorers": [_recency()], "dedup": False}, r"unknown key 'dedup'"),
        ({"scorers": [_recency()], "deduplicaton": False}, r"did you mean 'deduplication'"),
        ({"scorers": [_recency()], "slicer": "greedy", "quotas": []}, r"'quotas' for slicer 'greedy'"),
        ({"scorers": [_recency()], "slicer": "knapsack", "entries": []}, r"'entries' for slicer 'knapsack'"),
        (
            {"scorers": [_recency(), {"type": "kind", "weight": 1, "weigths": [{"kind": "A", "weight": 1}]}]},
            r"scorers\[1\]: unknown key 'weigths'.*did you mean 'weights'",
        ),
        (
            {"scorers": [{"type": "kind", "weights": [{"kind": "A", "wieght": 2}]}]},
            r"scorers\[0\]\.weights\[0\]: unknown key 'wieght'",
        ),
        (
            {"scorers": [{"type": "tag", "tag_weights": [{"tga": "a", "weight": 2}]}]},
            r"scorers\[0\]\.tag_weights\[0\]: unknown key 'tga'",
        ),
        (
            {"scorers": [{"type": "composite", "scorers": [_recency(), {"type": "priority", "wight": 2}]}]},
            r"scorers\[0\]\.scorers\[1\]: unknown key 'wight'",
        ),
        (
            {"scorers": [{"type": "scaled", "inner": {"type": "metadata_trust", "default_scor": 0.2}}]},
            r"scorers\[0\]\.inner: unknown key 'default_scor'.*did you mean 'default_score'",
        ),
        (
            {"scorers": [{"type": "scaled", "inner": {"type": "recency", "weight": 2, "wieght": 2}}]},
            r"scorers\[0\]\.inner: unknown key 'wieght'",
        ),
        (
            {
                "scorers": [
                    {
                        "type": "decay",
                        "reference_time": "2026-01-01T00:00:00Z",
                        "curve": {"type": "exponential", "half_life": 60},
                    }
                ]
            },
            r"scorers\[0\]\.curve: unknown key 'half_life'.*did you mean 'half_life_secs'",
        ),
        (
            {
                "scorers": [
                    {
                        "type": "decay",
                        "reference_time": "2026-01-01T00:00:00Z",
                        "curve": {"type": "step", "windows": [{"max_age_secs": 5, "scor": 1}]},
                    }
                ]
            },
            r"curve\.windows\[0\]: unknown key 'scor'",
        ),
        (
            {"scorers": [_recency()], "slicer": "quota", "quotas": [{"kind": "A", "requre": 10}]},
            r"quotas\[0\]: unknown key 'requre'.*did you mean 'require'",
        ),
        (
            {"scorers": [_recency()], "slicer": "count_quota", "entries": [{"kind": "A", "cap": 2}]},
            r"entries\[0\]: unknown key 'cap'.*did you mean 'cap_count'",
        ),
        (
            {"scorers": [_recency()], "slicer": "count_constrained_knapsack", "inner_slicer": "greedy"},
            r"always slices with knapsack",
        ),
        ({"scorers": [{"type": "recnecy"}]}, r"unknown scorer type 'recnecy'.*did you mean 'recency'"),
        ({"scorers": [_recency()], "slicer": "knapsak"}, r"unknown slicer 'knapsak'.*did you mean 'knapsack'"),
    ],
)
def test_unknown_keys_everywhere_in_a_config(config, match):
    with pytest.raises(InvalidConfigError, match=match):
        Policy.from_dict(config)


def test_bucket_size_is_a_flat_config_option():
    # EXTENSIONS.md: bucket_size sits in [config] with a default of 100, whatever the slicer
    assert Policy.from_dict({"scorers": [_recency()], "slicer": "greedy", "bucket_size": 5}).slicer.name == "greedy"


def test_every_preset_and_dict_round_trip_still_loads():
    # what to_dict writes is exactly what from_dict accepts (no key of ours is refused)
    for name in PRESETS:
        p = preset(name)
        assert Policy.from_dict(p.to_dict()) == p
        assert Policy.from_json(p.to_json()) == p


def test_a_new_scorer_type_gets_the_check_by_declaring_its_keys():
    from cupel_np.model.scorers import _SCORERS, RecencyScorer

    @scorer_dict_parser("test_only_recency", ("half",))
    def _parse(e, where):
        return RecencyScorer()

    try:
        assert isinstance(scorer_from_dict({"type": "test_only_recency", "half": 1}), RecencyScorer)
        with pytest.raises(InvalidConfigError, match=r"unknown key 'hlaf'.*did you mean 'half'"):
            scorer_from_dict({"type": "test_only_recency", "hlaf": 1})
    finally:
        del _SCORERS["test_only_recency"]
    with pytest.raises(InvalidConfigError, match=r"unknown scorer type 'test_only_recency'"):
        scorer_from_dict({"type": "test_only_recency"})


def test_policy_toml_and_json_files(tmp_path):
    toml = tmp_path / "p.toml"
    toml.write_text(
        'name = "x"\n[config]\nslicer = "greedy"\nplacr = "u_shaped"\n[[config.scorers]]\ntype = "recency"\n'
    )
    with pytest.raises(InvalidConfigError, match=rf"{toml}: policy config: unknown key 'placr'"):
        Policy.from_file(toml)
    toml.write_text('nmae = "x"\n[config]\n[[config.scorers]]\ntype = "recency"\n')
    with pytest.raises(InvalidConfigError, match=r"unknown key 'nmae'.*did you mean 'name'"):
        Policy.from_file(toml)
    js = tmp_path / "p.json"
    js.write_text(json.dumps(ISSUE_REPRO))
    with pytest.raises(InvalidConfigError, match=r"unknown keys 'bucketsize'"):
        Policy.from_file(js)


def test_budget_dict_refuses_unknown_keys():
    with pytest.raises(InvalidConfigError, match=r"unknown key 'output_reserv'.*did you mean 'output_reserve'"):
        ContextBudget.from_dict({"max_tokens": 100, "target_tokens": 50, "output_reserv": 10})
    assert ContextBudget.from_dict(ContextBudget(100, 50, 10).to_dict()) == ContextBudget(100, 50, 10)


# ----------------------------------------------------------------------------- .NET shape
DOTNET_FULL = {
    "scorers": [
        {"type": "recency", "weight": 2},
        {"type": "kind", "weight": 1.5, "kindWeights": {"Message": 0.8}},
        {"type": "tag", "weight": 1, "tagWeights": {"a": 2}},
        {"type": "scaled", "weight": 2, "innerScorer": {"type": "recency", "weight": 1}},
    ],
    "slicerType": "knapsack",
    "placerType": "uShaped",
    "deduplicationEnabled": False,
    "overflowStrategy": "truncate",
    "knapsackBucketSize": 50,
    "quotas": [{"kind": "Message", "minPercent": 10, "maxPercent": 60}],
    "name": "n",
    "description": "d",
}


def test_dotnet_shape_with_every_upstream_key_loads():
    p = policy_from_dotnet(DOTNET_FULL)
    assert p.slicer.inner == KnapsackSlice(50) and p.placer == "u_shaped"
    assert policy_from_dotnet(policy_to_dotnet(p)) == p


@pytest.mark.parametrize(
    "change, match",
    [
        ({"slicertype": "knapsack"}, r"\.NET policy: unknown key 'slicertype'.*did you mean 'slicerType'"),
        ({"someFutureField": 1}, r"unknown key 'someFutureField'"),
        ({"scorers": [{"type": "recency", "weight": 1, "wieght": 2}]}, r"scorers\[0\]: unknown key 'wieght'"),
        (
            {"scorers": [{"type": "scaled", "weight": 1, "innerScorer": {"type": "recency", "weight": 1, "x": 1}}]},
            r"scorers\[0\]\.innerScorer: unknown key 'x'",
        ),
        ({"quotas": [{"kind": "Message", "minPrecent": 10}]}, r"quotas\[0\]: unknown key 'minPrecent'"),
        ({"slicerType": "knapsak"}, r"unknown value 'knapsak'.*did you mean 'knapsack'"),
        ({"slicerType": "greedy", "knapsackBucketSize": None, "streamBatchSize": 4}, r"streamBatchSize can only"),
        ({"scorers": [{"type": "recency", "weight": 1, "tagWeights": {"a": 1}}]}, r"tagWeights is only valid"),
    ],
)
def test_dotnet_shape_refuses_unknown_keys_and_values(change, match):
    with pytest.raises(InvalidConfigError, match=match):
        Policy.from_json(json.dumps({**DOTNET_FULL, **change}))


def test_dotnet_unknown_slicer_type_key_does_not_fall_back_to_greedy():
    # a .NET object whose only .NET-only key is misspelt used to load as a greedy dict policy
    doc = {"scorers": [{"type": "recency", "weight": 1}], "slicertype": "knapsack", "knapsackBucketSize": 7}
    with pytest.raises(InvalidConfigError, match=r"unknown key 'slicertype'"):
        Policy.from_json(json.dumps(doc))


# ----------------------------------------------------------------------------- files
def test_policies_file(tmp_path):
    f = tmp_path / "pols.toml"
    f.write_text(
        '[[variants]]\nlabel = "a"\npreset = "chat"\n'
        '[[variants]]\nlabel = "b"\n[variants.config]\nslicer = "knapsack"\nbukcet_size = 5\n'
        '[[variants.config.scorers]]\ntype = "recency"\n'
    )
    with pytest.raises(InvalidConfigError, match=r"variants\[1\] \('b'\): .*unknown key 'bukcet_size'"):
        load_policies_file(f)
    f.write_text('[[variants]]\nlabel = "a"\npreset = "chat"\nplacer = "u_shaped"\n')
    with pytest.raises(InvalidConfigError, match=r"variants\[0\] \('a'\): entry: unknown key 'placer' beside"):
        load_policies_file(f)
    f.write_text('varaints = 1\n[[variants]]\nlabel = "a"\npreset = "chat"\n')
    with pytest.raises(InvalidConfigError, match=r"unknown key 'varaints'"):
        load_policies_file(f)
    j = tmp_path / "pols.json"
    j.write_text(json.dumps({"variants": [{"label": "net", **DOTNET_FULL, "placerTyp": "uShaped"}]}))
    with pytest.raises(InvalidConfigError, match=r"unknown key 'placerTyp'.*did you mean 'placerType'"):
        load_policies_file(j)
    j.write_text(json.dumps({"variants": [{"label": "net", **DOTNET_FULL}], "inline": None}))
    with pytest.raises(InvalidConfigError, match=r"unknown key 'inline'"):
        load_policies_file(j)
    j.write_text(json.dumps({"variants": [{"label": "net", **DOTNET_FULL}]}))
    assert load_policies_file(j)[0][1] == policy_from_dotnet(DOTNET_FULL)


GRID = """
presets = ["chat"]
slicers = ["greedy", {{slicer = "knapsack", {slicer_key} = 10}}]
[[policies]]
label = "mine"
[policies.config]
{policy_key} = "u_shaped"
[[policies.config.scorers]]
type = "recency"
[[budgets]]
max_tokens = 1000
{budget_key} = 800
"""


@pytest.mark.parametrize(
    "keys, match",
    [
        (("bucket_size", "placer", "target_tokens"), None),
        (("bucket_sise", "placer", "target_tokens"), r"slicers\[1\]: unknown key 'bucket_sise'"),
        (("bucket_size", "placr", "target_tokens"), r"policies\[0\] \('mine'\): policy config: unknown key 'placr'"),
        (("bucket_size", "placer", "target_token"), r"budgets\[0\]: budget: unknown key 'target_token'"),
    ],
)
def test_grid_file(tmp_path, keys, match):
    f = tmp_path / "grid.toml"
    f.write_text(GRID.format(slicer_key=keys[0], policy_key=keys[1], budget_key=keys[2]))
    if match is None:
        grid, _ = load_grid_file(f)
        assert isinstance(grid, Sweep) and len(grid) == 4
    else:
        with pytest.raises(InvalidConfigError, match=match):
            load_grid_file(f)


def test_grid_file_top_level_typo_suggests(tmp_path):
    f = tmp_path / "grid.toml"
    f.write_text(
        "placres = []\n" + GRID.format(slicer_key="bucket_size", policy_key="placer", budget_key="target_tokens")
    )
    with pytest.raises(InvalidConfigError, match=r"unknown key 'placres' \(did you mean 'placers'\?\) in a grid file"):
        load_grid_file(f)


def test_cli_reports_the_typo(tmp_path, capsys):
    f = tmp_path / "p.json"
    f.write_text(json.dumps(ISSUE_REPRO))
    rc = main(
        ["run", "data/sample_sessions.parquet", "--policy", str(f), "--max-tokens", "1000", "--target-tokens", "800"]
    )
    assert rc == 2
    assert "unknown keys 'bucketsize'" in capsys.readouterr().err


def test_item_dicts_suggest_the_field():
    from cupel_np.model.items import ItemTable

    with pytest.raises(InvalidConfigError, match=r"^row 1: unknown key 'tokns' \(did you mean 'tokens'\?\)"):
        ItemTable.from_items([{"content": "a", "tokens": 1}, {"content": "b", "tokns": 2}])


def test_sweep_weights_suggest_the_scorer_type():
    with pytest.raises(InvalidConfigError, match=r"no recnecy scorer to reweight \(did you mean 'recency'\?\)"):
        Sweep(["chat"], weights={"recnecy": 2.0}).variants()


def test_dotnet_inner_scorer_that_is_not_an_object():
    doc = {"scorers": [{"type": "scaled", "weight": 1, "innerScorer": "recency"}]}
    with pytest.raises(TypeError, match=r"scorers\[0\]\.innerScorer must be an object, got str 'recency'"):
        policy_from_dotnet(doc)


def test_policies_file_recognises_every_dotnet_key(tmp_path):
    # only overflowStrategy / knapsackBucketSize mark this as .NET: it used to load as a dict
    # policy with the default (greedy) slicer, both keys ignored
    j = tmp_path / "pols.json"
    doc = {"scorers": [{"type": "recency", "weight": 1}], "knapsackBucketSize": 50, "overflowStrategy": "truncate"}
    j.write_text(json.dumps({"net": doc}))
    with pytest.raises(
        InvalidConfigError, match=r"knapsackBucketSize can only be specified when slicerType is knapsack"
    ):
        load_policies_file(j)
    j.write_text(json.dumps({"net": dict(doc, slicerType="knapsack")}))
    ((label, policy),) = load_policies_file(j)
    assert policy.slicer == KnapsackSlice(50) and policy.overflow_strategy == "truncate"


def test_dict_form_quota_policy_is_not_taken_for_the_dotnet_shape():
    """'quotas' is a key of both shapes: a dict-form quota policy (with a column scorer from
    model/scorers.py, as in a policies file) must be read as the dict form."""
    from cupel_np.model.policy import is_dotnet_shape

    d = {
        "slicer": "quota",
        "quotas": [{"kind": "Document", "require": 20.0, "cap": 60.0}],
        "overflow_strategy": "proceed",
        "scorers": [{"type": "column", "column": "s", "weight": 1.0}],
    }
    assert not is_dotnet_shape(d)
    import cupel_np as c

    assert c.Policy.from_dict(d).slicer.quotas[0].kind == "Document"
    assert is_dotnet_shape({"scorers": [], "quotas": [{"kind": "Document", "minPercent": 10}]})
