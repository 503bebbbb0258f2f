"""What issue 19's observability costs a sweep (run once, briefly):

    .venv/bin/python -m pytest benchmarks/test_analytics_cost.py -s

* the variants_table analytics columns (budget_utilization, kind_diversity,
  timestamp_coverage, tokens_over_budget) add at most 5% to a 1M x 16 sweep with
  variants_table(), for one set and for 10,000 sets;
* with tracing off (opentelemetry installed, no SDK provider) the sweep's span hook costs
  microseconds.
"""

import time

import numpy as np
import pytest
from conftest import make_table
from matrix_data import matrix_arrow

import cupel_np as c
from cupel_np.analysis import otel
from cupel_np.analysis.analytics import set_of_rows, sweep_columns
from cupel_np.engine.sweep_run import segment_sums

BASE = [c.RecencyScorer(), c.PriorityScorer(), c.KindScorer(), c.ReflexiveScorer()]


def _variants(v: int):
    rng = np.random.default_rng(1)
    return [(f"v{i}", c.Policy(c.CompositeScorer(tuple(zip(BASE, rng.uniform(0.1, 1.0, 4)))))) for i in range(v)]


def _median(f, rounds=3):
    ts = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


def _count_and_tokens_only(run, seg):
    """What variants_table computed per variant before the analytics columns."""
    t = run.table
    for v in range(run.n_variants):
        inc = run.included[v]
        np.bincount(seg[inc], minlength=t.n_sets)
        segment_sums(np.where(inc, t.tokens, 0), t.offsets)


@pytest.mark.parametrize("n_sets", [1, 10_000])
def test_analytics_columns_add_at_most_5_percent(n_sets):
    n = 1_000_000
    table = make_table(n) if n_sets == 1 else c.ItemTable.from_arrow(matrix_arrow(n, n_sets=n_sets), set_column="sid")
    vs = _variants(16)
    budget = c.ContextBudget(200_000, 64_000) if n_sets == 1 else c.ContextBudget(20_000, 12_000)
    c.sweep(table, budget, vs[:2]).variants_table()  # compile
    res = c.sweep(table, budget, vs)
    total = _median(lambda: c.sweep(table, budget, vs).variants_table())
    seg = set_of_rows(table)
    full = _median(lambda: sweep_columns(res.run, seg))
    base = _median(lambda: _count_and_tokens_only(res.run, seg))
    added = (full - base) / total
    print(
        f"\n1M x 16, {n_sets} set(s): sweep + variants_table {total:.3f}s; analytics columns add "
        f"{full - base:.4f}s = {added:.1%}"
    )
    assert added <= 0.05


def test_tracing_off_costs_microseconds():
    table = make_table(10_000)
    res = c.sweep(table, c.ContextBudget(200_000, 64_000), _variants(4))
    k = 1000
    t0 = time.perf_counter()
    for _ in range(k):
        otel.emit_sweep(res, 0, 1, 1)
    per = (time.perf_counter() - t0) / k
    print(f"\ntracing off: the sweep span hook takes {per * 1e6:.1f} us per sweep")
    assert per < 1e-3
