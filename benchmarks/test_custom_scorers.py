"""Custom scorer overhead (issue 18): a 1M-item sweep of 16 weight variants whose composite
includes a ColumnScorer, against the same sweep with the ReflexiveScorer in its place (same
values: the column is the hint column). Both are timed in one process, alternating, median of
three; target ratio <= 1.1.

    .venv/bin/python -m pytest benchmarks/test_custom_scorers.py -s
"""

import time

import numpy as np
import pyarrow as pa
import pytest
from conftest import make_table

import cupel_np as c

TARGET = 1.1


def _variants(signal, v: int = 16, seed: int = 1):
    rng = np.random.default_rng(seed)
    base = (c.RecencyScorer(), c.PriorityScorer(), c.KindScorer(), signal)
    return [(f"v{i}", c.Policy(c.CompositeScorer(tuple(zip(base, rng.uniform(0.1, 1.0, 4)))))) for i in range(v)]


@pytest.fixture(scope="module")
def table_1m() -> pa.Table:
    t = make_table(1_000_000)
    # the signal column: the hint as the reflexive scorer sees it (clipped into [0, 1])
    hint = np.clip(t.table.column("future_relevance_hint").to_numpy(), 0.0, 1.0)
    arrow = t.table.append_column("similarity", pa.array(hint))
    arrow = arrow.set_column(
        arrow.schema.get_field_index("future_relevance_hint"), "future_relevance_hint", pa.array(hint)
    )
    return arrow


def test_column_scorer_overhead_1m_16_variants(table_1m):
    budget = c.ContextBudget(200_000, 64_000)
    runs = {
        "reflexive": _variants(c.ReflexiveScorer()),
        "column": _variants(c.ColumnScorer("similarity")),
    }
    results = {}
    for name, vs in runs.items():  # warm up (JIT, caches) and check the answers agree
        results[name] = c.sweep(c.ItemTable.from_arrow(table_1m), budget, vs)
    np.testing.assert_array_equal(results["column"].included, results["reflexive"].included)
    del results
    times = {name: [] for name in runs}
    for _ in range(3):
        for name, vs in runs.items():
            # a fresh table each round: the column scorer's values are not cached across sweeps
            table = c.ItemTable.from_arrow(table_1m)
            t0 = time.perf_counter()
            c.sweep(table, budget, vs)
            times[name].append(time.perf_counter() - t0)
    med = {name: float(np.median(ts)) for name, ts in times.items()}
    ratio = med["column"] / med["reflexive"]
    print(f"\nreflexive {med['reflexive']:.3f}s  column {med['column']:.3f}s  ratio {ratio:.3f} (target <= {TARGET})")
    assert ratio <= TARGET
