"""The place stage's CountCapExceeded list (``stages._place_segments`` returns the rows with
their caps and counts; ``batch._record`` keeps it without reading the reasons of every row)
against what the reasons and the kinds say: the rows of that reason in row order, the cap
of each row's kind, and the count of its set's selected candidates of that kind. Many sets,
pinned rows, candidates in row order (count quota over greedy) and in score order (count
constrained knapsack), both placers, every overflow strategy."""

import numpy as np
import pyarrow as pa
import pytest

import cupel_np as c
from cupel_np.engine.batch import run_sweep
from cupel_np.engine.reasons import R_COUNT_CAP_EXCEEDED, R_PINNED
from cupel_np.model.grid import Variant

KINDS = ["Message", "Document", "Note", "Memory"]
CAPS = {"Message": 3, "Note": 2}


def _table(seed: int) -> c.ItemTable:
    rng = np.random.default_rng(seed)
    n = 900
    ts = (1_700_000_000_000_000 + rng.integers(0, 50, n) * 10**9).astype("datetime64[us]")
    return c.ItemTable.from_arrow(
        pa.table(
            {
                "content": [f"item {i}" for i in range(n)],
                "tokens": rng.integers(0, 60, n),
                "kind": pa.array([KINDS[k] for k in rng.integers(0, len(KINDS), n)]),
                "timestamp": pa.array(ts, pa.timestamp("us", tz="UTC"), mask=rng.random(n) < 0.3),
                "pinned": rng.random(n) < 0.02,
                "sid": np.sort(rng.integers(0, 30, n)),
            }
        ),
        set_column="sid",
    )


def _slicer(name: str):
    entries = tuple(c.CountQuotaEntry(k, require_count=1, cap_count=cap) for k, cap in CAPS.items())
    if name == "count_quota":
        return c.CountQuotaSlice(entries, c.GreedySlice())
    return c.CountConstrainedKnapsackSlice(entries, bucket_size=10)


@pytest.mark.parametrize("slicer", ["count_quota", "count_knapsack"])
@pytest.mark.parametrize("placer", ["chronological", "u_shaped"])
@pytest.mark.parametrize("overflow", ["throw", "truncate", "proceed"])
def test_count_cap_list_matches_the_reasons(slicer, placer, overflow):
    table = _table(7)
    policy = c.Policy(c.ReflexiveScorer(), slicer=_slicer(slicer), placer=placer, overflow_strategy=overflow)
    variants = [Variant(f"v{t}", policy, c.ContextBudget(2 * t, t)) for t in (40, 150, 400)]
    out = run_sweep(table, variants, threads=1)
    kinds = np.array([k.capitalize() for k in table.kind_vocab], dtype=object)[table.kind_id]  # (folded)
    set_of = np.searchsorted(table.offsets, np.arange(table.n), side="right") - 1
    seen = 0
    for v in range(len(variants)):
        rows, cap, count = out.count_cap[v]
        assert np.array_equal(rows, np.flatnonzero(out.reason[v] == R_COUNT_CAP_EXCEEDED))
        assert [CAPS[k] for k in kinds[rows]] == cap.tolist()
        if overflow != "proceed":
            continue  # truncation and throw change what is included, not what was selected
        placed = out.included[v] & (out.reason[v] != R_PINNED)  # the selected candidates
        for r, n in zip(rows.tolist(), count.tolist()):
            same = placed & (kinds == kinds[r]) & (set_of == set_of[r])
            assert n == int(same.sum()) >= CAPS[kinds[r]]
        seen += rows.shape[0]
    assert overflow != "proceed" or seen > 0
