"""Every scorer over one 200,000-item set with a Zipf tag vocabulary (issue: 'in seconds,
not hours'). Warm timings: the first call per scorer compiles (cached on disk)."""

from datetime import datetime, timezone

import numpy as np
import pytest

import cupel_np as c
from cupel_np.pipeline import classify
from cupel_np.scorers import ScoreContext

SCORERS = {
    "recency": c.RecencyScorer(),
    "priority": c.PriorityScorer(),
    "kind": c.KindScorer(),
    "tag": c.TagScorer((("tag0", 1.0), ("tag1", 2.0), ("TAG3", 0.5))),
    "frequency": c.FrequencyScorer(),
    "reflexive": c.ReflexiveScorer(),
    "scaled": c.ScaledScorer(c.PriorityScorer()),
    "composite": c.CompositeScorer(((c.RecencyScorer(), 2.0), (c.KindScorer(), 1.0), (c.ReflexiveScorer(), 1.0))),
    "metadata_trust": c.MetadataTrustScorer(0.5),
    "metadata_key": c.MetadataKeyScorer("cupel:trust", "0.9", 1.5),
    "decay": c.DecayScorer(datetime(2026, 1, 1, tzinfo=timezone.utc), c.ExponentialCurve(86400.0)),
}


@pytest.mark.parametrize("name", list(SCORERS))
def test_score_200k(benchmark, table_200k, name):
    cls = classify(table_200k)
    scorer = SCORERS[name]
    ScoreContext(table_200k, cls.sc_rows, cls.sc_offsets).score(scorer)  # warm-up / compile

    def run():
        return ScoreContext(table_200k, cls.sc_rows, cls.sc_offsets).score(scorer)

    out = benchmark.pedantic(run, rounds=3, iterations=1)
    assert out.shape == (len(cls.sc_rows),) and np.isfinite(out).all()


@pytest.mark.parametrize("slicer", [c.GreedySlice(), c.KnapsackSlice(100)], ids=["greedy", "knapsack"])
def test_pipeline_200k(benchmark, table_200k, slicer):
    policy = c.Policy(c.PRESETS["chat"].scorer, slicer=slicer)
    budget = c.ContextBudget(128_000, 64_000)
    c.run_policy(table_200k, budget, policy)

    run = benchmark.pedantic(lambda: c.run_policy(table_200k, budget, policy), rounds=3, iterations=1)
    assert run.included.any()
