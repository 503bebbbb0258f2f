"""Sensitivity sweeps at scale (issue targets; ratios are measured in one process).

    .venv/bin/python -m pytest benchmarks/test_sweep.py -s --benchmark-columns=median,min,max

Set CUPEL_BENCH_BIG=1 for the 5M-item corpus/memory cases (several GB of RAM, minutes).
"""

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from conftest import make_table

import cupel_np as c

BIG = os.environ.get("CUPEL_BENCH_BIG") == "1"
BASE = [c.RecencyScorer(), c.PriorityScorer(), c.KindScorer(), c.ReflexiveScorer()]


def weight_variants(v: int, seed: int = 1, slicer=None):
    rng = np.random.default_rng(seed)
    out = []
    for i in range(v):
        pol = c.Policy(c.CompositeScorer(tuple(zip(BASE, rng.uniform(0.1, 1.0, 4)))), slicer=slicer or c.GreedySlice())
        out.append((f"v{i}", pol))
    return out


def _median(f, rounds=3):
    ts = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


@pytest.fixture(scope="module")
def table_1m():
    return make_table(1_000_000)


def test_sweep_1m_16_variants_vs_16_argsorts(benchmark, table_1m):
    vs = weight_variants(16)
    budget = c.ContextBudget(200_000, 64_000)
    x = np.random.default_rng(0).random(1_000_000)
    c.sweep(table_1m, budget, vs[:2]).diffs_table()  # compile
    ref = _median(lambda: [np.argsort(x, kind="stable") for _ in range(16)])
    res = benchmark.pedantic(lambda: c.sweep(table_1m, budget, vs).diffs_table(), rounds=3, iterations=1)
    ratio = benchmark.stats.stats.median / ref
    benchmark.extra_info.update(argsorts_median_s=ref, ratio=ratio, swing_rows=res.num_rows)
    print(
        f"\nsweep 1M x 16 -> diffs_table: {benchmark.stats.stats.median:.3f}s; 16 argsorts {ref:.3f}s; ratio {ratio:.2f}"
    )
    assert ratio <= 2.0


def test_policy_sensitivity_reads_are_lazy(benchmark, table_1m):
    vs = weight_variants(16)
    budget = c.ContextBudget(200_000, 64_000)
    c.policy_sensitivity(table_1m, budget, vs[:2])
    run_only = _median(lambda: c.sweep(table_1m, budget, vs))

    def go():
        rep = c.policy_sensitivity(table_1m, budget, vs)
        return len(rep.diffs), rep.diffs[0], rep.variants[3][1].total_candidates

    n, first, _ = benchmark.pedantic(go, rounds=3, iterations=1)
    ratio = benchmark.stats.stats.median / run_only
    rep = c.policy_sensitivity(table_1m, budget, vs)
    t0 = time.perf_counter()
    rep.diffs[len(rep.diffs) // 2]
    one_entry = time.perf_counter() - t0
    print(
        f"\npolicy_sensitivity 1M x 16 + len/one entry: {benchmark.stats.stats.median:.3f}s "
        f"({ratio:.2f}x the sweep alone); {n} swinging; one more entry {one_entry * 1e6:.0f} us"
    )
    assert ratio <= 1.25 and one_entry < 0.01


@pytest.mark.parametrize("n", [1_000, 10_000, 100_000, 1_000_000] + ([10_000_000] if BIG else []))
def test_growth_with_n(benchmark, n):
    t = make_table(n)
    vs = weight_variants(8)
    budget = c.ContextBudget(2 * 64_000, 64_000)
    c.sweep(t, budget, vs[:2])
    benchmark.pedantic(lambda: c.sweep(t, budget, vs).diffs_table(), rounds=3, iterations=1)
    per = benchmark.stats.stats.median / (n * 8) * 1e9
    benchmark.extra_info["ns_per_item_variant"] = per
    print(f"\nN={n:>9,} V=8: {benchmark.stats.stats.median:.4f}s = {per:.1f} ns per item-variant")


@pytest.mark.parametrize("v", [2, 4, 8, 16, 32, 64])
def test_growth_with_v(benchmark, table_1m, v):
    vs = weight_variants(v)
    budget = c.ContextBudget(200_000, 64_000)
    c.sweep(table_1m, budget, vs[:2])
    benchmark.pedantic(lambda: c.sweep(table_1m, budget, vs).diffs_table(), rounds=2, iterations=1)
    print(f"\nN=1M V={v}: {benchmark.stats.stats.median:.3f}s = {benchmark.stats.stats.median / v:.3f}s per variant")


def test_knapsack_throughput(benchmark):
    t = make_table(100_000)
    vs = weight_variants(2, slicer=c.KnapsackSlice(100))
    budget = c.ContextBudget(128_000, 64_000)  # capacity 640 buckets
    c.sweep(t, budget, vs[:1])
    benchmark.pedantic(lambda: c.sweep(t, budget, vs), rounds=2, iterations=1)
    per_variant = benchmark.stats.stats.median / 2
    cells = 100_000 * 641
    print(
        f"\nknapsack 100k items, target 64k, bucket 100: {per_variant:.3f}s per variant "
        f"= {100_000 / per_variant:,.0f} items/s, {cells / per_variant / 1e6:,.0f}M DP cells/s"
    )


def _corpus_vs_single(v=8):
    n = 5_000_000
    base = make_table(n)
    single = base
    sid = np.repeat(np.arange(n // 50), 50)
    corpus = c.ItemTable.from_arrow(base.table.append_column("sid", pa.array(sid)), set_column="sid")
    vs = weight_variants(v)
    c.sweep(
        c.ItemTable.from_arrow(corpus.table.slice(0, 5000), set_column="sid"), c.ContextBudget(20_000, 8_000), vs[:2]
    )
    t_single = _median(lambda: c.sweep(single, c.ContextBudget(2_000_000, 64_000), vs).diffs_table(), 2)
    t_corpus = _median(lambda: c.sweep(corpus, c.ContextBudget(20_000, 8_000), vs).diffs_table(), 2)
    return t_single, t_corpus


@pytest.mark.skipif(not BIG, reason="set CUPEL_BENCH_BIG=1 (5M items, several GB)")
def test_corpus_100k_sets_x_50_vs_one_5m_set():
    t_single, t_corpus = _corpus_vs_single()
    ratio = t_corpus / t_single
    print(f"\n5M items V=8: one set {t_single:.2f}s, 100k sets x 50 {t_corpus:.2f}s, per-item ratio {ratio:.2f}")
    assert ratio <= 1.5


MEM_SCRIPT = """
import resource, sys, tracemalloc
sys.path.insert(0, {bench!r})
from conftest import make_table
from test_sweep import weight_variants
import cupel_np as c
t = make_table(5_000_000)
table_rss = int(open("/proc/self/statm").read().split()[1]) * 4096
tracemalloc.start()
res = c.sweep(t, c.ContextBudget(2_000_000, 64_000), weight_variants(16))
res.diffs_table()
sweep_peak = tracemalloc.get_traced_memory()[1]
print(table_rss / 1e9, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, sweep_peak / 1e9)
"""


@pytest.mark.skipif(not BIG, reason="set CUPEL_BENCH_BIG=1 (5M items, several GB)")
def test_peak_memory_5m_x_16():
    out = subprocess.run(
        [sys.executable, "-c", MEM_SCRIPT.format(bench=str(Path(__file__).parent))],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    table_gb, peak_gb, sweep_gb = (float(x) for x in out)
    per = sweep_gb * 1e9 / (5_000_000 * 16)
    print(
        f"\n5M x 16: process peak RSS {peak_gb:.2f} GB; items table {table_gb:.2f} GB resident; "
        f"the sweep's own peak (NumPy, tracemalloc) {sweep_gb:.2f} GB = {per:.1f} bytes per item per variant"
    )
    assert peak_gb < 3.0
