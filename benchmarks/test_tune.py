"""Policy search cost (run once, prints its numbers):

    PYTHONPATH=$PWD .venv/bin/python -m pytest benchmarks/test_tune.py -s

On a generated labelled corpus of 100,000 items (2,500 sets of 40, ``trust_corpus``):

1. ``tune`` with 512 trials in batches of 128 against the same 512 variants run as plain
   ``cupel_np.sweep`` calls of 128 variants (the overhead of asking, telling and scoring the
   outcomes): the ratio must stay at or below 1.2;
2. the peak resident memory of that search (a fresh process, ``ru_maxrss``) and of loading the
   corpus alone;
3. the cost per variant of one batch of 64, 128, 256, 512 and 1,024 variants (``tune`` with
   ``trials = batch_size``), which should stay flat.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import cupel_np as c
from cupel_np.tune import tune
from cupel_np.tune.synthetic import trust_corpus

ROOT = Path(__file__).resolve().parents[1]
N_SETS, PER_SET = 2_500, 40
BUDGET = 2000
SPACE = {
    "scorers": {
        "max": 3,
        "recency": {"weight": [0.1, 3.0]},
        "kind": {"weight": [0.1, 3.0]},
        "priority": {"weight": [0.1, 3.0]},
        "reflexive": {"weight": [0.1, 3.0]},
        "metadata_trust": {"weight": [0.1, 3.0]},
    },
    "slicers": {"greedy": {}, "knapsack": {"bucket_size": [20, 200]}},
}


@pytest.fixture(scope="module")
def corpus():
    return trust_corpus(N_SETS, PER_SET, seed=1)


def _tune(corpus, trials, batch):
    return tune(
        corpus, SPACE, BUDGET, label_column="relevant", set_column="session_id", trials=trials, batch_size=batch, seed=0
    )


def test_tune_vs_plain_sweeps(corpus):
    _tune(corpus, 8, 8)  # compile every kernel first
    t0 = time.perf_counter()
    r = _tune(corpus, 512, 128)
    t_tune = time.perf_counter() - t0
    table = c.ItemTable(corpus, set_column="session_id")
    rows = [x for x in r.leaderboard.to_pylist() if x["state"] == "ok"]
    variants = [
        (x["label"], c.Policy.from_dict(json.loads(x["policy"])), c.ContextBudget(x["max_tokens"], x["target_tokens"]))
        for x in rows
    ]
    t0 = time.perf_counter()
    for i in range(0, len(variants), 128):
        c.sweep(table, None, variants[i : i + 128], on_error="collect")
    t_plain = time.perf_counter() - t0
    # the plain sweeps start from an ItemTable; tune builds one from the Arrow table: count it
    t0 = time.perf_counter()
    c.ItemTable(corpus, set_column="session_id")
    t_plain += time.perf_counter() - t0
    ratio = t_tune / t_plain
    print(
        f"\n512 trials / {N_SETS * PER_SET:,} items: tune {t_tune:.2f}s, the same {len(variants)} variants as plain "
        f"sweeps {t_plain:.2f}s, ratio {ratio:.2f}"
    )
    assert ratio <= 1.2


def _peak(code: str) -> int:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return int(out.stdout.strip().splitlines()[-1])


def test_peak_memory():
    head = (
        "import resource; from cupel_np.tune import tune; from cupel_np.tune.synthetic import trust_corpus; "
        f"t = trust_corpus({N_SETS}, {PER_SET}, seed=1); "
    )
    tail = "; print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
    base = _peak(head + "import cupel_np as c; c.ItemTable(t, set_column='session_id')" + tail)
    run = head + (
        f"tune(t, {SPACE!r}, {BUDGET}, label_column='relevant', set_column='session_id', trials=512, batch_size=128)"
    )
    peak = _peak(run + tail)
    print(f"\npeak RSS: corpus loaded {base / 1024:.0f} MB; 512-trial search in batches of 128 {peak / 1024:.0f} MB")


def test_per_variant_cost_is_flat(corpus):
    _tune(corpus, 8, 8)
    per = {}
    for v in (64, 128, 256, 512, 1024):
        t0 = time.perf_counter()
        _tune(corpus, v, v)
        per[v] = (time.perf_counter() - t0) / v
    print("\nper-variant cost of one batch: " + ", ".join(f"{v}: {1e3 * s:.2f} ms" for v, s in per.items()))
    assert max(per.values()) <= 2.0 * min(per.values())
