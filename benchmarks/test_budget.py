"""Budget simulation at scale (issue 10; ratios are measured in one process).

    .venv/bin/python -m pytest benchmarks/test_budget.py -s

* ``budget_curves``: 3 presets x a 16-step ladder (4,000 .. 200,000, geometric) against one
  ``cupel_np.sweep`` of the same 48 (policy, budget) variants (target: within 1.2x);
* ``min_budgets``: every row's ``find_min_budget_for`` against one single-variant sweep of the
  same table (the cost of the O(log ceiling) probe calls in units of one sweep).

Default sizes: 10,000 sets x 50 items for the curves and 1,000 sets x 50 for min_budgets.
CUPEL_BENCH_BIG=1 runs the issue's sizes: 100,000 sets x 50 (5M items; several GB of RAM) and
10,000 sets x 50 for min_budgets (minutes).
"""

import os
import time

import numpy as np
import pyarrow as pa
from conftest import make_table

import cupel_np as c

BIG = os.environ.get("CUPEL_BENCH_BIG") == "1"
PRESETS = ["chat", "rag", "code_review"]


def corpus(n_sets: int, per_set: int = 50) -> c.ItemTable:
    base = make_table(n_sets * per_set, seed=11)
    sid = np.repeat(np.arange(n_sets), per_set)
    return c.ItemTable.from_arrow(base.table.append_column("sid", pa.array(sid)), set_column="sid")


def _median(f, rounds=3):
    ts = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts)), ts


def test_budget_curves_vs_one_sweep():
    n_sets = 100_000 if BIG else 10_000
    table = corpus(n_sets)
    ladder = c.budget_ladder(4_000, 200_000, 16, output_reserve=1_000)
    variants = [(p, c.preset(p)) for p in PRESETS]
    flat = [(f"{p}@{b.max_tokens}", pol, b) for p, pol in variants for b in ladder]
    warm = corpus(200)
    c.budget_curves(warm, variants, ladder)
    c.sweep(warm, None, flat)
    rounds = 2 if BIG else 3
    t_sweep, ts_sweep = _median(lambda: c.sweep(table, None, flat), rounds)
    t_curves, ts_curves = _median(lambda: c.budget_curves(table, variants, ladder), rounds)
    ratio = t_curves / t_sweep
    print(
        f"\n{n_sets:,} sets x 50 items, 3 presets x 16 budgets = 48 columns: budget_curves "
        f"{t_curves:.2f}s (runs {', '.join(f'{t:.2f}' for t in ts_curves)}), one sweep of the 48 variants "
        f"{t_sweep:.2f}s (runs {', '.join(f'{t:.2f}' for t in ts_sweep)}); ratio {ratio:.2f}"
    )
    assert ratio <= 1.2


def test_min_budgets_vs_one_sweep():
    n_sets = 10_000 if BIG else 1_000
    table = corpus(n_sets)
    policy = c.preset("chat")
    ceiling = 200_000
    c.min_budgets(corpus(20), policy, ceiling)  # compile
    t_sweep, _ = _median(lambda: c.sweep(table, c.ContextBudget(ceiling, ceiling), [("chat", policy)]))
    stats = {}
    t0 = time.perf_counter()
    res = c.min_budgets(table, policy, ceiling, stats=stats)
    t_min = time.perf_counter() - t0
    found = res.column("min_budget").is_valid().to_numpy(zero_copy_only=False).sum()
    # the per-row alternative: Pipeline.find_min_budget_for (one dry run per probe) on one set
    one = table.subset(table.set_keys[0])
    pipe = c.Pipeline(policy)
    t0 = time.perf_counter()
    per_row = [pipe.find_min_budget_for(one, r, ceiling) for r in range(one.n)]
    t_rows = (time.perf_counter() - t0) / one.n
    assert per_row == res.column("min_budget").to_pylist()[: one.n]
    print(
        f"\nmin_budgets over {n_sets:,} sets x 50 items (ceiling {ceiling:,}): {t_min:.2f}s = "
        f"{t_min / t_sweep:.0f}x one single-variant sweep ({t_sweep:.3f}s); {stats['steps']} probe steps, {stats['engine_calls']} engine "
        f"calls over {stats['probe_rows']:,} probe rows ({stats['probe_rows'] / table.n:.0f} per input row); "
        f"{found:,} of {table.n:,} rows selectable; find_min_budget_for row by row: {t_rows * 1e3:.1f} ms "
        f"per row = {t_rows * table.n:.0f}s for all rows ({t_rows * table.n / t_min:.0f}x min_budgets)"
    )
    assert stats["steps"] <= ceiling.bit_length() + 2
