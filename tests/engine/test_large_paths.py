"""Code paths that only large sets reach (the property tests use small sets): greedy's
density-prefix selection, NumPy's sort for big segments, the rank scorers' quicksort, the
frequency scorer's bitsets, and duplicate grouping. Each is compared with the naive oracle or
a brute-force formula on a few thousand items.

The property tests below run whole pipelines on big generated shapes (tests/strategies.py,
"Big shapes") against the oracle: sets of hundreds to 66,000 items, hundreds of sets in one
table, tokens near 2^62, scores near the float64 limits, knapsack tables at ``max_cells``.
The default run draws a few examples of each; CUPEL_NP_SOAK=1 draws many."""

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import naive  # noqa: E402
import strategies as S  # noqa: E402
import test_properties as P  # noqa: E402

from cupel_np import ContextBudget, ItemTable, Policy  # noqa: E402
from cupel_np.analysis.pipeline import run_policy  # noqa: E402
from cupel_np.analysis.selection import SelectionReport  # noqa: E402
from cupel_np.engine import stages  # noqa: E402
from cupel_np.engine.batch_kernels import duplicate_groups  # noqa: E402
from cupel_np.engine.scorers import kernels as sck  # noqa: E402
from cupel_np.engine.scorers import ranks as rk  # noqa: E402
from cupel_np.engine.slicers.greedy import greedy_segments  # noqa: E402
from cupel_np.errors import TableTooLargeError  # noqa: E402


def _naive_greedy(tokens, scores, target):
    # the spec's input is the score-sorted list; naive returns positions in that list
    order = sorted(range(len(scores)), key=lambda i: naive._score_desc_key(scores[i]) + (i,))
    scored = [({"content": f"c{i}", "tokens": int(tokens[i])}, float(scores[i])) for i in order]
    picked = naive.slice_items(scored, target, {"slicer": "greedy"})[0]
    return [order[p] for p in picked]


@pytest.mark.parametrize(
    "seed, n, target",
    [
        (0, 20_000, 64_000),
        (1, 30_000, 5_000),
        (2, 12_000, 2_000_000),
        (3, 25_000, 1),
        (4, 300, 30_000),
        (5, 193, 9_000),
    ],
)
def test_greedy_prefix_selection_matches_spec(seed, n, target):
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, 2000, n)
    tokens[rng.random(n) < 0.01] = 0  # zero-token items
    scores = np.round(rng.random(n), 2)  # coarse scores: many equal densities and scores
    scores[rng.random(n) < 0.01] = np.nan
    rank = np.full(n, -1, dtype=np.int64)
    greedy_segments(tokens, scores, np.array([0, n]), np.array([target]), rank)
    got = list(np.flatnonzero(rank >= 0)[np.argsort(rank[rank >= 0])])
    assert got == _naive_greedy(tokens, scores, target)


def test_greedy_segments_many_sets_match_one_set_each():
    rng = np.random.default_rng(5)
    sizes = [5000, 1, 0, 7000]
    off = np.concatenate([[0], np.cumsum(sizes)])
    tokens = rng.integers(1, 300, off[-1])
    scores = rng.random(off[-1])
    targets = np.array([3000, 10, 50, 0])
    rank = np.full(off[-1], -1, dtype=np.int64)
    greedy_segments(tokens, scores, off, targets, rank)
    for s in range(len(sizes)):
        lo, hi = off[s], off[s + 1]
        one = np.full(hi - lo, -1, dtype=np.int64)
        greedy_segments(tokens[lo:hi], scores[lo:hi], np.array([0, hi - lo]), targets[s : s + 1], one)
        assert (rank[lo:hi] == one).all()


def test_big_segment_sort_is_stable_descending_nan_last():
    rng = np.random.default_rng(3)
    n = stages.BIG_SEGMENT + 5000
    score = np.round(rng.random(n), 3)
    score[::97] = np.nan
    small = 300
    off = np.array([0, small, n])
    order = stages.sort_segments(score, off)
    for lo, hi in ((0, small), (small, n)):
        want = sorted(range(lo, hi), key=lambda i: (np.isnan(score[i]), -np.nan_to_num(score[i]), i))
        assert list(order[lo:hi]) == want


def test_rank_scores_quicksort_matches_strict_rank_formula():
    rng = np.random.default_rng(4)
    n = 50_000
    vals = rng.integers(0, 300, n)
    valid = rng.random(n) < 0.8
    got = rk.rank_scores(vals, valid, np.array([0, n]))
    v = np.sort(vals[valid])
    rank = np.searchsorted(v, vals, side="left")
    want = np.where(valid, rank / (valid.sum() - 1), 0.0)
    assert np.array_equal(got, want)


def _strict_ranks(vals, valid, off):
    out = np.zeros(vals.shape[0])
    for lo, hi in zip(off[:-1], off[1:], strict=True):
        v, ok = vals[lo:hi], valid[lo:hi]
        if ok.sum() == 1:
            out[lo:hi][ok] = 1.0
        elif ok.sum() > 1:
            rank = np.searchsorted(np.sort(v[ok]), v, side="left")
            out[lo:hi] = np.where(ok, rank / np.float64(ok.sum() - 1), 0.0)
    return out


@pytest.mark.parametrize(
    "span",
    [
        "counting",  # a span of at most twice the values: ranks by counting
        "radix",  # timestamp-like: the radix sort of the keys minus the smallest
        "full",  # int64 extremes: every digit of the radix sort
    ],
)
def test_rank_scores_linear_paths_match_strict_rank_formula(span):
    rng = np.random.default_rng(5)
    n = 3 * rk.RANK_RADIX_MIN
    vals = {
        "counting": rng.integers(-50, 2 * n - 50, n),
        "radix": 1_700_000_000_000_000 + rng.integers(0, 10**12, n),
        "full": rng.integers(np.iinfo(np.int64).min, np.iinfo(np.int64).max, n, endpoint=True),
    }[span]
    vals[::97] = vals[5]  # runs of equal values
    valid = rng.random(n) < 0.8
    off = np.array([0, 7, n // 2, n])  # a small segment (merge sort) between two linear ones
    got = rk.rank_scores(vals, valid, off)
    assert np.array_equal(got, _strict_ranks(vals, valid, off))


def test_frequency_bitset_path_matches_naive():
    rng = np.random.default_rng(6)
    n = 1500  # 24 words per bitset: tags with more than 24 items take the bitset path
    vocab = ["a", "A", "b", "c", "d"] + [f"t{i}" for i in range(200)]
    items = []
    for i in range(n):
        k = int(rng.integers(0, 4))
        items.append(
            {
                "content": f"x{i}",
                "tokens": 1,
                "tags": [vocab[min(int(rng.zipf(1.5)) - 1, len(vocab) - 1)] for _ in range(k)],
            }
        )
    flat = [naive.ascii_fold(t) for it in items for t in it["tags"]]
    ids = {t: j for j, t in enumerate(dict.fromkeys(flat))}
    offs = np.concatenate([[0], np.cumsum([len(it["tags"]) for it in items])])
    got = sck.frequency_scores(offs, np.array([ids[t] for t in flat], dtype=np.int64), len(ids), np.array([0, n]))
    want = naive.score_items(items, {"type": "frequency"})
    assert np.allclose(got, want, atol=1e-12, rtol=0)


def test_duplicate_groups_match_brute_force():
    rng = np.random.default_rng(8)
    n = 5000
    cid = rng.integers(0, 3000, n)
    off = np.array([0, 1000, 1000, 3500, n])
    members, goff = duplicate_groups(cid, off)
    got = sorted(tuple(members[goff[g] : goff[g + 1]]) for g in range(len(goff) - 1))
    want = []
    for s in range(len(off) - 1):
        by = {}
        for p in range(off[s], off[s + 1]):
            by.setdefault(cid[p], []).append(p)
        want += [tuple(v) for v in by.values() if len(v) > 1]
    assert got == sorted(want)


# ---------------------------------------------------------------------------
# Whole pipelines on big generated shapes against the oracle
# ---------------------------------------------------------------------------


def _settings(default, soak):
    return settings(
        max_examples=S.examples(default, soak),
        deadline=None,
        database=None,
        print_blob=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


# (default examples, soak examples) per shape: the big ones cost seconds per example
SHAPE_EXAMPLES = {
    "hundreds": (4, 150),
    "greedy_prefix": (1, 15),
    "full_sort": (2, 20),
    "big_segment": (1, 5),
    "huge_tokens": (25, 800),
    "extreme_scores": (6, 200),
}


def _shape_test(shape):
    @_settings(*SHAPE_EXAMPLES[shape])
    @given(case=S.big_pipeline_cases(shape))
    def check(case):
        """A big shape (strategies.big_pipeline_cases) gives the oracle's outcome."""
        items, budget, config = case
        want = P.naive_outcome(items, budget, config)
        got, _report = P.engine_outcome(items, budget, config, table=ItemTable.from_items(items))
        event(f"{config.get('slicer', 'greedy')}: {want[0] if want[0] == 'ok' else want[1]}")
        if want[0] == "ok":
            event(f"included {'none' if not want[1]['included'] else 'some'}")
        P.assert_same_outcome(got, want)

    return check


for _shape in S.BIG_SHAPES:  # one test per shape: test_big_hundreds_matches_naive, ...
    globals()[f"test_big_{_shape}_matches_naive"] = _shape_test(_shape)


@_settings(6, 200)
@given(case=S.many_set_cases())
def test_many_sets_in_one_table_match_naive(case):
    rows, keys, budget, config = case
    policy = Policy.from_dict(config)
    table = ItemTable.from_items([dict(d, conv=k) for d, k in zip(rows, keys)], set_column="conv")
    run = run_policy(table, ContextBudget(**budget), policy)
    by_key = {}
    for row, key in enumerate(keys):
        by_key.setdefault(key, []).append(row)
    assert list(table.set_keys) == list(by_key)  # sets in order of first appearance
    for seg, key in enumerate(table.set_keys):
        set_rows = by_key[key]
        want = P.naive_outcome([rows[r] for r in set_rows], budget, config)
        if run.error[seg] is not None:
            got = ("error", run.error[seg].code)
        else:
            got = ("ok", P.normalize_report(SelectionReport(run, seg), {r: k for k, r in enumerate(set_rows)}))
        P.assert_same_outcome(got, want)


_CELLS = re.compile(
    r"knapsack table of (\d+) candidates x (\d+) capacity cells needs (\d+) cells "
    r"\(keep bits plus value rows\) over the limit of (\d+) cells"
)


@_settings(60, 1500)
@given(case=S.knapsack_limit_cases(), limit=st.one_of(st.integers(0, 400), st.integers(32_000, 120_000)))
def test_knapsack_table_limit_is_exact(case, limit):
    """With a small ``max_cells`` a knapsack set either gives the oracle's answer or fails with
    TableTooLargeError naming a table of more than ``max_cells`` cells; at exactly that many
    cells it runs and gives the oracle's answer."""
    items, budget, config = case
    want = P.naive_outcome(items, budget, config)
    table = ItemTable.from_items(items)
    b, policy = ContextBudget(**budget), Policy.from_dict(config)
    run = run_policy(table, b, policy, max_cells=limit)
    err = run.error[0]
    event("table too large" if isinstance(err, TableTooLargeError) else "table fits")
    if isinstance(err, TableTooLargeError):
        m = _CELLS.search(str(err))
        assert m, str(err)
        candidates, width, cells, said_limit = (int(g) for g in m.groups())
        # the limit counts keep bits and value rows: (n + 256) x 64 x (capacity // 64 + 2)
        assert cells == (candidates + 256) * 64 * ((width - 1) // 64 + 2), str(err)
        assert said_limit == limit and cells > limit, str(err)
        run = run_policy(table, b, policy, max_cells=cells)
        err = run.error[0]
        assert not isinstance(err, TableTooLargeError), str(err)
    got = ("error", err.code) if err is not None else ("ok", P.normalize_report(SelectionReport(run, 0)))
    P.assert_same_outcome(got, want)


# ---------------------------------------------------------------------------
# Bounds checking (.ci/run runs the property tests with NUMBA_BOUNDSCHECK=1)
# ---------------------------------------------------------------------------

_OUT_OF_RANGE = """
import numpy as np
from cupel_np.engine.slicers.greedy import greedy_segments
rank = np.full(4, -1, dtype=np.int64)
try:
    greedy_segments(np.ones(4, dtype=np.int64), np.ones(4), np.array([0, 1000]), np.array([10]), rank)
except IndexError:
    print("IndexError")
"""


def test_boundscheck_turns_out_of_range_reads_into_errors(tmp_path):
    """Offsets past the arrays make a kernel index out of range: with NUMBA_BOUNDSCHECK=1 that
    is an IndexError. In the CI pass with bounds checking this runs in-process, so it fails if
    the kernels came unchecked from Numba's cache (its key ignores NUMBA_BOUNDSCHECK)."""
    if os.environ.get("NUMBA_BOUNDSCHECK") == "1":
        rank = np.full(4, -1, dtype=np.int64)
        with pytest.raises(IndexError):
            greedy_segments(np.ones(4, dtype=np.int64), np.ones(4), np.array([0, 1000]), np.array([10]), rank)
        return
    env = dict(os.environ, NUMBA_BOUNDSCHECK="1", NUMBA_CACHE_DIR=str(tmp_path))
    env.pop("NUMBA_DISABLE_JIT", None)
    r = subprocess.run([sys.executable, "-c", _OUT_OF_RANGE], capture_output=True, text=True, env=env, timeout=600)
    assert (r.returncode, r.stdout) == (0, "IndexError\n"), r.stderr[-2000:]


@pytest.mark.parametrize("every", [True, False])
def test_recency_from_the_timestamp_order_equals_rank_scores(every):
    """The sweep reads a RecencyScorer column from the shared timestamp order: the same scores
    as ``rank_scores`` over the scoreable rows (coarse timestamps: many ties; several sets,
    one with a lone timestamp, one with none)."""
    from cupel_np.engine import placers

    rng = np.random.default_rng(8)
    n = 3000
    offsets = np.array([0, 1, 4, 900, 2000, 2001, n], dtype=np.int64)
    ts = rng.integers(-(10**6), 10**6, n) // 10**5 * 10**5
    valid = rng.random(n) < 0.7
    valid[0:1] = True
    valid[1:4] = [False, True, False]
    valid[2000] = False
    rows = np.arange(n) if every else np.flatnonzero(rng.random(n) < 0.8)
    sc_off = np.searchsorted(rows, offsets).astype(np.int64)
    order, ts_sorted, ts_off, *_ = placers.timestamp_order(ts, valid, offsets)
    sc_pos = np.full(n, -1, dtype=np.int64)
    sc_pos[rows] = np.arange(rows.shape[0])
    got = rk.rank_scores_from_order(order, ts_sorted, ts_off, sc_pos, every, rows.shape[0])
    want = rk.rank_scores(np.ascontiguousarray(ts[rows]), np.ascontiguousarray(valid[rows]), sc_off)
    assert np.array_equal(got, want)
