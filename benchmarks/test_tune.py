"""Policy search cost (run once, prints its numbers):

    PYTHONPATH=$PWD .venv/bin/python -m pytest benchmarks/test_tune.py -s

On a generated labelled corpus of 100,000 items (2,500 sets of 40, ``trust_corpus``):

1. ``tune`` with 512 trials in batches of 128 against the same 512 variants run as plain
   ``cupel_np.sweep`` calls of 128 variants, five interleaved runs each: the ratio of the
   medians must stay at or below 1.2. tune sweeps each distinct policy once (a repeated one
   takes the first's metrics), so it is also timed against plain sweeps of only the distinct
   policies, batch by batch as tune met them: that ratio is the cost of asking, telling and
   scoring the outcomes (printed);
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
from cupel_np.tuning import tune
from cupel_np.tuning.synthetic import trust_corpus

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


def _plain(corpus, batches) -> tuple[float, float]:
    """The variants as plain sweeps, one per batch (from the Arrow table, as tune starts):
    (wall, CPU of the process) seconds."""
    t0, c0 = time.perf_counter(), time.process_time()
    table = c.ItemTable(corpus, set_column="session_id")
    for batch in batches:
        if batch:
            c.sweep(table, None, batch, on_error="collect")
    return time.perf_counter() - t0, time.process_time() - c0


def _batches(leaderboard, size: int = 128):
    """The trials' variants per batch of ``size``: all of them, and only those whose policy
    (name aside) and budget no earlier trial had (what tune sweeps)."""
    every: list[list] = []
    distinct: list[list] = []
    seen = set()
    for x in leaderboard.to_pylist():
        if x["state"] != "ok":
            continue
        d = json.loads(x["policy"])
        var = (x["label"], c.Policy.from_dict(d), c.ContextBudget(x["max_tokens"], x["target_tokens"]))
        if x["trial"] % size == 0 or not every:
            every.append([])
            distinct.append([])
        every[-1].append(var)
        d.pop("name")
        key = (json.dumps(d, sort_keys=True), x["max_tokens"], x["target_tokens"])
        if key not in seen:
            seen.add(key)
            distinct[-1].append(var)
    return every, distinct


def test_tune_vs_plain_sweeps(corpus):
    """Interleaved runs, the ratios of the medians (the machine is shared: its load varies).
    Against the same 512 variants as plain sweeps of 128 (the target), and against plain
    sweeps of only the distinct policies tune sweeps (the cost of asking, telling and
    scoring, whatever the share of repeated policies)."""
    import statistics

    _tune(corpus, 8, 8)  # compile every kernel first
    t_tune, t_plain, t_distinct = [], [], []
    cpu: dict[str, list[float]] = {"tune": [], "plain": [], "distinct": []}
    for _ in range(5):
        t0, c0 = time.perf_counter(), time.process_time()
        r = _tune(corpus, 512, 128)
        t_tune.append(time.perf_counter() - t0)
        cpu["tune"].append(time.process_time() - c0)
        every, distinct = _batches(r.leaderboard)
        for name, batches, wall in (("plain", every, t_plain), ("distinct", distinct, t_distinct)):
            w, u = _plain(corpus, batches)
            wall.append(w)
            cpu[name].append(u)
    med = statistics.median
    ratio = med(t_tune) / med(t_plain)
    n_all, n_distinct = sum(map(len, every)), sum(map(len, distinct))
    print(
        f"\n512 trials / {N_SETS * PER_SET:,} items: tune median {med(t_tune):.2f}s "
        f"(runs {', '.join(f'{t:.2f}' for t in t_tune)}); the same {n_all} variants as plain sweeps "
        f"median {med(t_plain):.2f}s (runs {', '.join(f'{t:.2f}' for t in t_plain)}), ratio {ratio:.2f}; "
        f"its {n_distinct} distinct policies as plain sweeps median {med(t_distinct):.2f}s "
        f"(runs {', '.join(f'{t:.2f}' for t in t_distinct)}), ratio {med(t_tune) / med(t_distinct):.2f}; "
        f"CPU medians tune {med(cpu['tune']):.2f}s, plain {med(cpu['plain']):.2f}s "
        f"(ratio {med(cpu['tune']) / med(cpu['plain']):.2f}), distinct {med(cpu['distinct']):.2f}s "
        f"(ratio {med(cpu['tune']) / med(cpu['distinct']):.2f})"
    )
    assert ratio <= 1.2


def _peak(code: str) -> list[int]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return [int(x) for x in out.stdout.strip().splitlines()[-1].split()]


def test_peak_memory():
    """Peak RSS of a fresh process (corpus loaded; then the 512-trial search), and the peak of
    the memory NumPy and Python allocate during the search alone (tracemalloc)."""
    head = (
        "import resource, tracemalloc; import cupel_np as c; from cupel_np.tuning import tune; "
        "from cupel_np.tuning.synthetic import trust_corpus; "
        f"t = trust_corpus({N_SETS}, {PER_SET}, seed=1); c.ItemTable(t, set_column='session_id'); "
    )
    rss = "resource.getrusage(resource.RUSAGE_SELF).ru_maxrss"
    run = (
        f"r0 = {rss}; tracemalloc.start(); "
        f"tune(t, {SPACE!r}, {BUDGET}, label_column='relevant', set_column='session_id', trials=512, batch_size=128); "
        f"print(r0, {rss}, tracemalloc.get_traced_memory()[1] // 1024)"
    )
    before, after, traced = _peak(head + run)
    print(
        f"\npeak RSS: corpus loaded {before / 1024:.0f} MB, after a 512-trial search in batches of 128 "
        f"{after / 1024:.0f} MB; the search's own allocations peak at {traced / 1024:.0f} MB"
    )


def test_per_variant_cost_is_flat(corpus):
    """One batch of V trials (ask, one sweep, outcome metrics, tell), per variant."""
    from cupel_np.tuning import search

    spent = []
    inner = search._run_trials

    def timed(*a, **k):
        t0 = time.perf_counter()
        out = inner(*a, **k)
        spent.append(time.perf_counter() - t0)
        return out

    search._run_trials = timed
    try:
        _tune(corpus, 8, 8)
        per = {}
        for v in (64, 128, 256, 512, 1024):
            _tune(corpus, v, v)
            per[v] = spent[-1] / v
    finally:
        search._run_trials = inner
    print("\nper-variant cost of one batch: " + ", ".join(f"{v}: {1e3 * s:.2f} ms" for v, s in per.items()))
    assert max(per.values()) <= 1.5 * min(per.values())
