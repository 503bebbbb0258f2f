"""The knapsack DP (KnapsackSlice, QuotaSlice with an inner knapsack,
CountConstrainedKnapsackSlice) against the naive oracle at every value magnitude, and its
memory limit (issue 7, defects 1 and 2).

Each item's value is Rust's saturating cast of floor(score * 10000), so one value fits an
int64; a sum of values may not, and the spec compares sums with unbounded integers."""

import dataclasses
import math
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import naive  # noqa: E402

import cupel_np as c  # noqa: E402
from cupel_np import ContextBudget, ContextItem, ItemTable, Pipeline, Policy, TableTooLargeError  # noqa: E402
from cupel_np.analysis.pipeline import run_policy  # noqa: E402
from cupel_np.engine.batch import KNAPSACK_MAX_CELLS  # noqa: E402
from cupel_np.engine.slicers import knapsack as sk  # noqa: E402
from cupel_np.engine.slicers import slicer_args  # noqa: E402
from cupel_np.model.slicers import slicer_from_dict  # noqa: E402

I64_MAX = 2**63 - 1
# the largest score whose value floor(score * 10000) is still below 2^63 (no per-item saturation)
TOP_SCORE = 922337203685477.5


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------


def _naive(items, budget, config):
    try:
        rep = naive.run_pipeline(items, budget, config)
    except naive.NaiveError as err:
        return ("error", err.code)
    return (
        "ok",
        [r for r, _, _ in rep["included"]],
        [(r, reason, dict(fields)) for r, _, reason, fields in rep["excluded"]],
    )


def _engine(items, budget, config):
    try:
        report = Pipeline(Policy.from_dict(config)).dry_run([ContextItem(**d) for d in items], ContextBudget(**budget))
    except c.CupelError as err:
        return ("error", err.code)
    inc = [int(r) for r in report.input_rows(report.included_rows)]
    exc = [
        (int(r), e.reason.reason, dataclasses.asdict(e.reason))
        for r, e in zip(report.input_rows(report.excluded_rows), report.excluded)
    ]
    return ("ok", inc, exc)


def _same_as_naive(items, budget, config):
    got = _engine(items, budget, config)
    assert got == _naive(items, budget, config)
    return got


def _kernel_pick(tokens, scores, target, bucket, max_cells=KNAPSACK_MAX_CELLS):
    """knapsack_pick over positions 0..n-1; returns (picked positions in output order, n, cap)."""
    tok = np.asarray(tokens, dtype=np.int64)
    out = np.empty(len(tok), dtype=np.int64)
    n_out, n, cap = sk.knapsack_pick(
        tok,
        np.asarray(scores, dtype=np.float64),
        np.arange(len(tok), dtype=np.int64),
        target,
        bucket,
        max_cells,
        out,
        0,
    )
    return [int(p) for p in out[:n_out]], n, cap


def _naive_pick(tokens, scores, target, bucket):
    scored = [({"content": f"c{i}", "tokens": int(t)}, float(s)) for i, (t, s) in enumerate(zip(tokens, scores))]
    return naive.slice_items(scored, target, {"slicer": "knapsack", "bucket_size": bucket})[0]


# ---------------------------------------------------------------------------
# Defect 1: sums of values beyond int64
# ---------------------------------------------------------------------------


def test_issue_example_kind_weight_1e15_includes_both():
    # issue 7: both 10-token items fit a 100-token target; the saturating DP kept one and
    # reported the other BudgetExceeded(item_tokens=10, available_tokens=90)
    items = [{"content": "a", "tokens": 10, "kind": "Huge"}, {"content": "b", "tokens": 10, "kind": "Huge"}]
    config = {"scorers": [{"type": "kind", "weights": {"Huge": 1e15}}], "slicer": "knapsack", "bucket_size": 1}
    got = _same_as_naive(items, {"max_tokens": 100, "target_tokens": 100}, config)
    assert sorted(got[1]) == [0, 1] and got[2] == []


def test_metadata_key_boost_values_beyond_int64():
    # three boosted items fit exactly; any two of them already sum past 2^63, so a DP that
    # saturates sees the third as no gain and leaves it out
    items = [{"content": f"g{k}", "tokens": 25, "metadata": {"tier": "gold"}} for k in range(3)]
    items.append({"content": "plain", "tokens": 5})
    config = {
        "scorers": [{"type": "metadata_key", "key": "tier", "value": "gold", "boost": 6e14}],
        "slicer": "knapsack",
        "bucket_size": 1,
    }
    got = _same_as_naive(items, {"max_tokens": 75, "target_tokens": 75}, config)
    assert sorted(got[1]) == [0, 1, 2]


def test_decay_step_scores_beyond_int64():
    ref = datetime(2026, 1, 1, tzinfo=UTC)
    ages = [10, 10, 5000, 5000, 5000]
    items = [
        {"content": f"i{k}", "tokens": t, "timestamp": ref - timedelta(seconds=a)}
        for k, (t, a) in enumerate(zip([50, 50, 34, 33, 33], ages))
    ]
    curve = {
        "type": "step",
        "windows": [{"max_age_secs": 60.0, "score": 9.0e14}, {"max_age_secs": 1e9, "score": 6.1e14}],
    }
    config = {
        "scorers": [{"type": "decay", "reference_time": ref, "curve": curve}],
        "slicer": "knapsack",
        "bucket_size": 1,
    }
    # two fresh items (2 x 9e18) against three older ones (3 x 6.1e18): the three win
    got = _same_as_naive(items, {"max_tokens": 100, "target_tokens": 100}, config)
    assert sorted(got[1]) == [2, 3, 4]


def test_saturated_values_still_add_up():
    # per-item values saturate at i64::MAX (Rust's cast), but their sums do not
    picked, _, _ = _kernel_pick([10, 10, 10], [math.inf, 1e300, math.inf], 20, 1)
    assert picked == [1, 0]  # the spec's reconstruction order
    assert _naive_pick([10, 10, 10], [math.inf, math.inf, math.inf], 20, 1) == [1, 0]


def test_finite_values_past_int64_saturate_like_inf():
    # A (2e15) and B, C (1e15) all scale past 2^63 and saturate to i64::MAX, as Rust's cast
    # does: B + C (two saturated values) beats A alone, in the engine and in the oracle
    items = [
        {"content": "A", "tokens": 20, "kind": "Big"},
        {"content": "B", "tokens": 10, "kind": "Half"},
        {"content": "C", "tokens": 10, "kind": "Half"},
    ]
    config = {
        "scorers": [{"type": "kind", "weights": {"Big": 2e15, "Half": 1e15}}],
        "slicer": "knapsack",
        "bucket_size": 1,
    }
    got = _same_as_naive(items, {"max_tokens": 20, "target_tokens": 20}, config)
    assert sorted(got[1]) == [1, 2]


@pytest.mark.parametrize("score", [0.5, 4.0e14, TOP_SCORE, math.inf])
def test_equal_value_ties_break_like_the_spec(score):
    # equal values and weights: a later item replaces an earlier one only when strictly
    # better, so the spec keeps the earliest items, reported last-first
    tokens = [10] * 5
    picked, _, _ = _kernel_pick(tokens, [score] * 5, 30, 1)
    assert picked == [2, 1, 0]
    assert picked == _naive_pick(tokens, [score] * 5, 30, 1)


def test_equal_sums_of_different_sets_beyond_int64():
    # a + b == c exactly, with every sum above 2^63: the first-found set is kept
    a = 5e14
    scores = [a, a, 2 * a, 1e-4]
    tokens = [10, 10, 10, 10]
    picked, _, _ = _kernel_pick(tokens, scores, 20, 1)
    assert picked == _naive_pick(tokens, scores, 20, 1)


# ---------------------------------------------------------------------------
# Defect 2: memory bounded by the limit
# ---------------------------------------------------------------------------


def _cells(n, capacity):
    return (n + sk.KNAPSACK_ROW_CELLS) * 64 * (capacity // 64 + 2)


def _knapsack_run(n, target, bucket, max_cells, slicer=None):
    items = [ContextItem(f"x{i}", 1 + i % 3, kind="K") for i in range(n)]
    policy = Policy(c.KindScorer((("K", 1.0),)), slicer=slicer or c.KnapsackSlice(bucket))
    return run_policy(ItemTable.from_items(items), ContextBudget(target, target), policy, max_cells=max_cells)


@pytest.mark.parametrize("n, capacity", [(4, 127), (1, 63), (300, 1000)])
def test_limit_is_exact_at_the_boundary(n, capacity):
    need = _cells(n, capacity)
    assert sk.knapsack_fits(n, capacity, need)
    assert not sk.knapsack_fits(n, capacity, need - 1)
    assert _knapsack_run(n, capacity, 1, need).error[0] is None
    err = _knapsack_run(n, capacity, 1, need - 1).error[0]
    assert isinstance(err, TableTooLargeError)
    assert str(err) == (
        f"knapsack table of {n} candidates x {capacity + 1} capacity cells needs {need} cells "
        f"(keep bits plus value rows) over the limit of {need - 1} cells; "
        "raise bucket_size or lower the target"
    )


def test_one_candidate_counts_its_value_rows():
    # the old limit counted candidates x capacity only: 1 x 1000 <= 10,000, yet the value rows
    # alone are 8 x 1001 bytes
    err = _knapsack_run(1, 1000, 1, 10_000).error[0]
    assert isinstance(err, TableTooLargeError) and "1 candidates x 1001 capacity cells" in str(err)


@pytest.mark.parametrize("target", [2**26, 2**32 - 1, 2**62 - 1])
def test_default_limit_refuses_one_huge_row(target):
    # one candidate at bucket 1: at 2^32 the value rows alone would be 32 GiB
    picked, n, cap = _kernel_pick([1], [0.5], target, 1)
    assert picked == [] and n == 1 and cap == -target
    err = _knapsack_run(1, target, 1, KNAPSACK_MAX_CELLS).error[0]
    assert isinstance(err, TableTooLargeError) and f"x {target + 1} capacity cells" in str(err)


def test_default_limit_admits_its_largest_single_row():
    # the largest capacity one candidate may have under the default limit (16.7M cells)
    cap = (KNAPSACK_MAX_CELLS // 64 // (1 + sk.KNAPSACK_ROW_CELLS) - 1) * 64 - 1
    assert sk.knapsack_fits(1, cap, KNAPSACK_MAX_CELLS)
    assert not sk.knapsack_fits(1, cap + 1, KNAPSACK_MAX_CELLS)
    assert _kernel_pick([3], [0.5], cap, 1)[0] == [0]


def test_limit_never_overflows():
    for n, cap, m in [(2**62, 2**62, 2**62), (1, 2**63 - 1, 2**63 - 1), (2**40, 2**20, 2**63 - 1), (1, 1, 63)]:
        assert sk.knapsack_fits(n, cap, m) == (_cells(n, cap) <= m)


PEAK_SCRIPT = """
import resource, sys
import numpy as np
from cupel_np.engine.slicers import knapsack as sk
n, cap, limit = (int(a) for a in sys.argv[1:])
tok = np.ones(n, dtype=np.int64)
score = np.full(n, np.inf)  # every value i64::MAX: the sum needs the split (4-row) DP
cand = np.arange(n, dtype=np.int64)
out = np.empty(n, dtype=np.int64)
sk.knapsack_pick(tok, score, cand, 100, 1, limit, out, 0)  # compile / load, small
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
got = sk.knapsack_pick(tok, score, cand, cap, 1, limit, out, 0)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(got[2], after - before)
"""


def test_peak_memory_stays_within_the_limit():
    # the largest DP the default limit admits for two candidates, in the exact (split) mode:
    # the process grows by at most max_cells / 8 bytes (plus allocator slack)
    n = 2
    cap = (KNAPSACK_MAX_CELLS // 64 // (n + sk.KNAPSACK_ROW_CELLS) - 1) * 64 - 1
    out = subprocess.run(
        [sys.executable, "-c", PEAK_SCRIPT, str(n), str(cap), str(KNAPSACK_MAX_CELLS)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert int(out[0]) == cap  # it ran
    assert int(out[1]) <= KNAPSACK_MAX_CELLS // 8 + 16 * 2**20


@pytest.mark.parametrize(
    "slicer",
    [
        c.QuotaSlice((c.QuotaEntry("K", 0.0, 100.0),), inner=c.KnapsackSlice(1)),
        c.CountConstrainedKnapsackSlice((c.CountQuotaEntry("K", 1, 10),), bucket_size=1),
    ],
)
def test_limit_applies_inside_quota_and_count_slicers(slicer):
    err = _knapsack_run(5, 1000, 1, 10_000, slicer=slicer).error[0]
    assert isinstance(err, TableTooLargeError)
    assert _knapsack_run(5, 1000, 1, KNAPSACK_MAX_CELLS, slicer=slicer).error[0] is None


# ---------------------------------------------------------------------------
# Property: engine slicers == naive slicers at every magnitude
# ---------------------------------------------------------------------------

# scores whose values are small, near 2^62 and near 2^63 (sums of two or more overflow
# int64), equal to each other, or saturated
SCORES = st.one_of(
    st.floats(0.0, 1.0),
    st.floats(TOP_SCORE / 2, TOP_SCORE),
    # past TOP_SCORE each value saturates at i64::MAX (Rust's cast), in the engine and the oracle
    st.floats(TOP_SCORE, 1e300),
    st.sampled_from([TOP_SCORE, TOP_SCORE / 2, 4.6e14, 3.0e14, 1e14, 0.0, 1e-5, math.inf, 1e15, 2e15, 1.8e308]),
)


@st.composite
def slicer_cases(draw):
    n = draw(st.integers(1, 8))
    tokens = draw(st.lists(st.integers(0, 60), min_size=n, max_size=n))
    scores = draw(st.lists(SCORES, min_size=n, max_size=n))
    kinds = draw(st.lists(st.sampled_from(["A", "B", "c"]), min_size=n, max_size=n))
    target = draw(st.integers(0, 200))
    bucket = draw(st.sampled_from([1, 3, 10]))
    which = draw(st.sampled_from(["knapsack", "quota", "count_constrained_knapsack"]))
    config = {"slicer": which, "bucket_size": bucket}
    if which == "quota":
        config["inner_slicer"] = "knapsack"
        config["quotas"] = [
            {"kind": "A", "require": draw(st.sampled_from([0.0, 20.0])), "cap": 60.0},
            {"kind": "b", "require": 0.0, "cap": draw(st.sampled_from([30.0, 100.0]))},
        ]
    elif which == "count_constrained_knapsack":
        config["entries"] = [{"kind": "A", "require_count": draw(st.integers(0, 2)), "cap_count": 3}]
    return tokens, scores, kinds, target, config


def _engine_slice(tokens, scores, kinds, target, config):
    """slice_segments over one score-sorted set; positions in output order."""
    table = ItemTable.from_items([ContextItem(f"c{i}", t, kind=k) for i, (t, k) in enumerate(zip(tokens, kinds))])
    rank, err, *_ = slicer_args(slicer_from_dict(config), table).run(
        table.tokens,
        np.asarray(scores, dtype=np.float64),
        table.kind_id,
        np.array([0, table.n], dtype=np.int64),
        np.array([target], dtype=np.int64),
        KNAPSACK_MAX_CELLS,
    )
    assert err[0] == 0
    return [int(p) for p in np.argsort(rank) if rank[p] >= 0]


@settings(
    max_examples=int(os.environ.get("CUPEL_PROPERTY_EXAMPLES", "120")),
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(slicer_cases())
def test_knapsack_slicers_match_naive_at_every_magnitude(case):
    tokens, scores, kinds, target, config = case
    # the slicers see the score-sorted list (descending, stable)
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    tokens = [tokens[i] for i in order]
    scores = [scores[i] for i in order]
    kinds = [kinds[i] for i in order]
    scored = [
        ({"content": f"c{i}", "tokens": t, "kind": k}, s) for i, (t, s, k) in enumerate(zip(tokens, scores, kinds))
    ]
    want = naive.slice_items(scored, target, config, max_tokens=target)[0]
    assert _engine_slice(tokens, scores, kinds, target, config) == want


@pytest.mark.parametrize("scale", [1.0, 1e15])
def test_many_words_and_items_match_naive(scale):
    # 200 candidates over 2,000 capacity cells (32 keep words per row): the vectorized whole
    # words, the cells every item fits, and (scale 1e15) the split rows on a bigger table
    rng = np.random.default_rng(7)
    tokens = np.floor(np.exp(rng.uniform(0.0, np.log(200.0), 200))).astype(np.int64)
    tokens[::37] = 0
    scores = np.round(rng.random(200), 3) * scale  # coarse: many equal values
    order = sorted(range(200), key=lambda i: (-scores[i], i))
    tokens, scores = tokens[order], scores[order]
    target = int(tokens.sum()) // 4
    picked, _, _ = _kernel_pick(tokens, scores, target, 2)
    assert picked == _naive_pick(tokens, scores, target, 2)
