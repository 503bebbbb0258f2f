"""A checks file's variant in the .NET ``Wollax.Cupel.Json`` shape is recognised by any key
only that shape has, as policies files recognise it (``is_dotnet_shape``). The checks reader
looked for three keys only (``slicerType``, ``placerType``, ``deduplicationEnabled``), so a
.NET variant carrying, say, ``overflowStrategy`` or percent ``quotas`` alone was refused as
"unknown key(s) 'overflowStrategy', 'scorers'"."""

from __future__ import annotations

import pytest

from cupel_np.errors import InvalidConfigError
from cupel_np.model.policy import Policy
from cupel_np.testing.checks import parse_checks

BUDGET = {"max_tokens": 100, "target_tokens": 80}
CHECK = [{"assert": "have_at_least_n_exclusions", "n": 0}]
SCORERS = [{"type": "recency", "weight": 1}]


def _variant_policy(entry: dict) -> Policy:
    cf = parse_checks({"budget": BUDGET, "variants": [dict(entry, label="a")], "check": CHECK})
    return cf.variants[0][1]


@pytest.mark.parametrize(
    "extra",
    [
        {"overflowStrategy": "truncate"},
        {"quotas": [{"kind": "Message", "minPercent": 10}]},
        {"scorers": [{"type": "kind", "weight": 1, "kindWeights": {"Message": 0.5}}]},
        {"slicerType": "knapsack", "knapsackBucketSize": 50},
    ],
)
def test_a_dotnet_variant_is_read_as_the_dotnet_shape(extra):
    doc = {"scorers": SCORERS, **extra}
    assert _variant_policy(doc) == Policy.from_dotnet_json(doc)


def test_a_variant_with_a_budget_beside_dotnet_keys_keeps_its_budget():
    cf = parse_checks(
        {
            "budget": BUDGET,
            "variants": [
                {
                    "label": "a",
                    "scorers": SCORERS,
                    "overflowStrategy": "truncate",
                    "budget": {"max_tokens": 50, "target_tokens": 40},
                }
            ],
            "check": CHECK,
        }
    )
    assert cf.variants[0][2].max_tokens == 50 and cf.variants[0][1].overflow_strategy == "truncate"


def test_a_misspelt_key_is_still_named():
    with pytest.raises(InvalidConfigError, match=r"variants\[0\]: unknown key\(s\) 'preset_'"):
        _variant_policy({"preset_": "chat"})
