"""Corpus checks against the sweep they check (issue 20; ratios measured in one process).

    .venv/bin/python -m pytest benchmarks/test_checks.py -s

100,000 sets x 50 items x 8 variants (the 7 presets and chat at a second budget): the time
of one corpus check over every (variant, set) against the sweep's own time (target: at most
0.2x), plus a typical checks file of five checks and every pattern on its own (reported).
CUPEL_BENCH_SMALL=1 runs 10,000 sets instead.
"""

import os
import time

import numpy as np
import pyarrow as pa
from conftest import make_table

import cupel_np as c
from cupel_np.testing import col, should

N_SETS = 10_000 if os.environ.get("CUPEL_BENCH_SMALL") == "1" else 100_000


def corpus(n_sets: int, per_set: int = 50) -> c.ItemTable:
    base = make_table(n_sets * per_set, seed=20)
    sid = np.repeat(np.arange(n_sets), per_set)
    return c.ItemTable.from_arrow(base.table.append_column("sid", pa.array(sid)), set_column="sid")


def variants():
    budget = c.ContextBudget(max_tokens=20_000, target_tokens=16_000, output_reserve=1_000)
    out = [(name, c.preset(name), budget) for name in c.PRESETS]
    out.append(("chat-small", c.preset("chat"), c.ContextBudget(max_tokens=8_000, target_tokens=6_000)))
    return out


PATTERNS = [
    ("include_item_with_kind", ("SystemPrompt",)),
    ("include_item_matching", (col("kind") == "ToolOutput",)),
    ("include_exactly_n_items_with_kind", ("SystemPrompt", 1)),
    ("exclude_item_with_reason", ("BudgetExceeded",)),
    ("exclude_item_matching_with_reason", (col("tokens") > 1000, "BudgetExceeded")),
    ("exclude_item_with_budget_details", (col("kind") == "Document", 1500, 10)),
    ("have_no_exclusions_for_kind", ("SystemPrompt",)),
    ("have_at_least_n_exclusions", (1,)),
    ("excluded_items_are_sorted_by_score_descending", ()),
    ("have_budget_utilization_above", (0.5,)),
    ("have_kind_coverage_count", (3,)),
    ("place_item_at_edge", (col("kind") == "SystemPrompt",)),
    ("place_top_n_scored_at_edges", (2,)),
]
TYPICAL = [PATTERNS[0], PATTERNS[6], PATTERNS[9], PATTERNS[1], PATTERNS[10]]


def _time(f) -> float:
    t0 = time.perf_counter()
    f()
    return time.perf_counter() - t0


def _run(res, checks):
    ch = should(res).every_set(collect=True)
    for name, args in checks:
        getattr(ch, name)(*args)
    return ch


def test_corpus_check_costs_at_most_a_fifth_of_the_sweep():
    table = corpus(N_SETS)
    vs = variants()
    warm = c.sweep(corpus(200), None, vs)
    _run(warm, PATTERNS)  # compile / warm everything first
    t_sweep = _time(lambda: c.sweep(table, None, vs))
    res = c.sweep(table, None, vs)
    one = min(_time(lambda: _run(res, PATTERNS[:1])) for _ in range(3))
    typical = min(_time(lambda: _run(res, TYPICAL)) for _ in range(2))
    each = {name: _time(lambda n=name, a=args: _run(res, [(n, a)])) for name, args in PATTERNS}
    print(
        f"\n{N_SETS:,} sets x 50 items x {len(vs)} variants ({table.n * len(vs):,} (row, variant) cells): "
        f"sweep {t_sweep:.2f}s; one check (include_item_with_kind) {one:.3f}s = {one / t_sweep:.3f}x; "
        f"five typical checks {typical:.3f}s = {typical / t_sweep:.3f}x"
    )
    for name, t in each.items():
        print(f"  {name:<48} {t:7.3f}s  {t / t_sweep:.3f}x")
    assert one <= 0.2 * t_sweep
    assert typical <= 0.2 * t_sweep
