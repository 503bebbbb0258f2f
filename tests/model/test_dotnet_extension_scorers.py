"""A .NET-shaped policy (``Wollax.Cupel.Json``) reads every scorer entry
``../shared/conformance/EXTENSIONS.md`` defines, as the dict form does: the types .NET has not
(decay, metadata_trust, metadata_key, composite with ``scorers`` or ``children``) and a .NET
type with its EXTENSIONS.md options instead of .NET's (kind ``weights`` /
``use_default_weights``, tag ``tag_weights``, scaled ``inner`` / ``inner_scorer``). They were
refused ("unknown key", "unknown value 'decay'"); a misspelt .NET key still is."""

from __future__ import annotations

import json

import pytest

from cupel_np.errors import InvalidConfigError
from cupel_np.model.policy import Policy

REF = "2025-01-01T12:00:00Z"
ENTRIES = {
    "decay exponential": {
        "type": "decay",
        "reference_time": REF,
        "null_timestamp_score": 0.5,
        "curve": {"type": "exponential", "half_life_secs": 86400.0},
    },
    "decay window": {"type": "decay", "reference_time": REF, "curve": {"type": "window", "max_age_secs": 21600.0}},
    "decay step": {
        "type": "decay",
        "reference_time": REF,
        "curve": {"type": "step", "windows": [{"max_age_secs": 3600.0, "score": 0.9}]},
    },
    "metadata_trust": {"type": "metadata_trust", "default_score": 0.3},
    "metadata_key": {"type": "metadata_key", "key": "cupel:priority", "value": "high", "boost": 1.5},
    "composite scorers": {"type": "composite", "scorers": [{"type": "recency", "weight": 1.0}]},
    "composite children": {"type": "composite", "children": [{"type": "priority", "weight": 2.0}]},
    "kind weights": {"type": "kind", "weights": [{"kind": "Message", "weight": 0.5}]},
    "kind use_default_weights": {"type": "kind", "use_default_weights": True},
    "tag tag_weights": {"type": "tag", "tag_weights": [{"tag": "a", "weight": 1.0}]},
    "scaled inner_scorer": {"type": "scaled", "inner_scorer": "priority"},
    "scaled inner": {"type": "scaled", "inner": {"type": "tag", "tag_weights": [{"tag": "a", "weight": 1.0}]}},
}


@pytest.mark.parametrize("entry", list(ENTRIES.values()), ids=list(ENTRIES))
def test_extension_scorer_entries_in_a_dotnet_policy(entry):
    entry = dict(entry, weight=2.0)
    doc = {"scorers": [entry, {"type": "recency", "weight": 1}], "slicerType": "greedy", "placerType": "uShaped"}
    got = Policy.from_json(json.dumps(doc))
    want = Policy.from_dict({"scorers": [entry, {"type": "recency", "weight": 1}], "placer": "u_shaped"})
    assert got == want
    inner = {"scorers": [{"type": "scaled", "weight": 1, "innerScorer": entry}], "slicerType": "greedy"}
    assert Policy.from_json(json.dumps(inner)).scorer.inner == want.scorer.entries[0][0]


@pytest.mark.parametrize(
    ("entry", "match"),
    [
        ({"type": "kind", "weight": 1, "kindWeight": {"Message": 1}}, r"unknown key 'kindWeight'"),
        ({"type": "kind", "weight": 1, "weights": [], "kindWeights": {"A": 1}}, r"unknown key 'weights'"),
        (
            {"type": "decay", "weight": 1, "curve": {"type": "window", "max_age_secs": 1.0}, "refrence_time": REF},
            "refrence_time",
        ),
        ({"type": "Recency", "weight": 1}, r"unknown value 'Recency'"),
    ],
)
def test_a_misspelt_or_mixed_entry_is_still_refused(entry, match):
    with pytest.raises(InvalidConfigError, match=match):
        Policy.from_json(json.dumps({"scorers": [entry], "slicerType": "greedy"}))
