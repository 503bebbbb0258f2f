"""The sweep's fast paths against the naive oracle (tests/naive.py).

The fast paths normally switch on for big sets only (greedy's chunked density walk from
``BIG_GREEDY`` candidates, the u-shaped radix sort from ``RADIX_MIN`` kept items, the
chronological filter of the shared timestamp order above ``CHRONO_FILTER_MIN`` kept items).
Their thresholds choose the path, never the answer, so these tests lower them to zero and
run the oracle's generated pipelines through every path; the kernels are also compared
directly on arrays with ties, -0.0, NaN and infinities, and on sets large enough to take
the paths with the default thresholds."""

import contextlib
import dataclasses
import sys
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import naive  # noqa: E402
import strategies as S  # noqa: E402

import cupel_np as c  # noqa: E402
from cupel_np.engine import placers, stages, u_order  # noqa: E402
from cupel_np.engine.slicers import greedy  # noqa: E402
from cupel_np.engine.sortkeys import desc_bits, int_keys, stable_argsort  # noqa: E402

SETTINGS = settings(
    max_examples=120,
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# values with many exact ties: equal densities and scores, both zeros, NaN, infinities
TIE_VALUES = [0.0, -0.0, 0.5, 0.25, 1.0, 2.0, -1.0, np.nan, np.inf, -np.inf, 1e-300, 1e300]


@contextlib.contextmanager
def fast_paths_everywhere(min_chunk=1):
    names = ("BIG_GREEDY", "MIN_CHUNK"), ("RADIX_MIN", "CHRONO_FILTER_MIN", "U_SORT_MIN")
    saved = [getattr(greedy, n) for n in names[0]], [getattr(placers, n) for n in names[1]]
    small = stages.SMALL_PLACE
    for n, v in zip(names[0], (1, min_chunk)):
        setattr(greedy, n, v)
    for n, v in zip(names[1], (0, 0, 0)):
        setattr(placers, n, v)
    stages.SMALL_PLACE = 0  # no list sorted in the place kernel: bitmaps and _place_order
    try:
        yield
    finally:
        for n, v in zip(names[0], saved[0]):
            setattr(greedy, n, v)
        for n, v in zip(names[1], saved[1]):
            setattr(placers, n, v)
        stages.SMALL_PLACE = small


def naive_greedy(tokens, scores, target):
    """The spec's greedy over candidates given in row order: positions in output order."""
    order = sorted(range(len(scores)), key=lambda i: naive._score_desc_key(scores[i]) + (i,))
    scored = [({"content": f"c{i}", "tokens": int(tokens[i])}, float(scores[i])) for i in order]
    picked = naive.slice_items(scored, target, {"slicer": "greedy"})[0]
    return [order[p] for p in picked]


def engine_greedy(tokens, scores, target, **kw):
    n = len(tokens)
    rank = np.full(n, -1, dtype=np.int64)
    greedy.greedy_segments(
        np.asarray(tokens, np.int64), np.asarray(scores, np.float64), np.array([0, n]), np.array([target]), rank, **kw
    )
    sel = np.flatnonzero(rank >= 0)
    return list(sel[np.argsort(rank[sel])])


# --------------------------------------------------------------------------- greedy kernel
@SETTINGS
@given(
    st.lists(st.tuples(st.integers(0, 40), st.sampled_from(TIE_VALUES)), max_size=120),
    st.integers(0, 600),
    st.sampled_from([1, 2, 3, 16]),
)
def test_greedy_chunked_walk_matches_spec(pairs, target, min_chunk):
    tokens = [t for t, _ in pairs]
    scores = [s for _, s in pairs]
    want = naive_greedy(tokens, scores, target)
    assert engine_greedy(tokens, scores, target, big=1, min_chunk=min_chunk) == want
    assert engine_greedy(tokens, scores, target, big=10**9) == want


@SETTINGS
@given(
    st.lists(st.tuples(st.integers(0, 40), st.sampled_from(TIE_VALUES)), min_size=1, max_size=120),
    st.integers(1, 600),
    st.sampled_from([1, 2, 16]),
)
def test_unordered_prefix_then_complete_ranks(pairs, target, min_chunk):
    """The big path's fitting prefix left unordered (``prefix=``): the same selection, prefix
    ranks in index order below every later rank, later ranks exact; ``complete_ranks`` then
    gives the exact ranks."""
    tok = np.array([t for t, _ in pairs], dtype=np.int64)
    score = np.array([x for _, x in pairs], dtype=np.float64)
    n = tok.shape[0]
    exact = np.full(n, -1, dtype=np.int64)
    greedy.greedy_segments(tok, score, np.array([0, n]), np.array([target]), exact, big=10**9)
    lazy = np.full(n, -1, dtype=np.int64)
    pre = np.zeros(1, dtype=np.int64)
    greedy.greedy_segments(
        tok, score, np.array([0, n]), np.array([target]), lazy, big=1, min_chunk=min_chunk, prefix=pre
    )
    n_pre = int(pre[0])
    assert ((lazy >= 0) == (exact >= 0)).all()
    sel = np.flatnonzero(lazy >= 0)
    assert sorted(lazy[sel]) == list(range(sel.size))
    in_pre = sel[lazy[sel] < n_pre]
    assert list(lazy[in_pre]) == list(range(n_pre))  # index order
    assert sorted(exact[in_pre]) == list(range(n_pre))  # the prefix of the exact order
    rest = sel[lazy[sel] >= n_pre]
    assert (lazy[rest] == exact[rest]).all()
    greedy.complete_ranks(tok, score, lazy, n_pre)
    assert (lazy == exact).all()
    # compared=: the unmarked prefix first in index order, then the marked ones in exact order
    marked = np.array([(i * 7 + t) % 3 == 0 for i, t in enumerate(tok)], dtype=np.bool_)
    part = np.full(n, -1, dtype=np.int64)
    pre2 = np.zeros(1, dtype=np.int64)
    greedy.greedy_segments(
        tok, score, np.array([0, n]), np.array([target]), part, big=1, min_chunk=min_chunk, prefix=pre2, compared=marked
    )
    assert pre2[0] == n_pre and ((part >= 0) == (exact >= 0)).all()
    # the big path writes every rank of its segment (``fresh_ranks`` leaves it unwritten)
    dirty = np.full(n, 12345, dtype=np.int64)
    greedy.greedy_segments(
        tok,
        score,
        np.array([0, n]),
        np.array([target]),
        dirty,
        big=1,
        min_chunk=min_chunk,
        prefix=pre2,
        compared=marked,
    )
    assert (dirty == part).all()
    unmarked_pre = [p for p in in_pre if not marked[p]]
    marked_pre = sorted((p for p in in_pre if marked[p]), key=lambda p: exact[p])
    assert list(part[unmarked_pre]) == list(range(len(unmarked_pre)))
    assert list(part[marked_pre]) == list(range(len(unmarked_pre), n_pre))
    assert (part[rest] == exact[rest]).all()


def test_one_key_is_the_key_of_a_pinned_score():
    assert u_order._ONE_KEY == desc_bits(np.ones(1))[0]


def _prefix_items(n, seed):
    """Many equal scores, densities and timestamps, zero tokens and pinned items."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        d = {
            "content": f"c{i}",
            "tokens": int(rng.choice([0, 1, 2, 3, 4, 8])),
            "kind": ["Message", "Document", "Note"][i % 3],
        }
        if rng.random() < 0.6:
            d["timestamp"] = datetime.fromtimestamp(1_700_000_000 + int(rng.integers(0, 25)), UTC)
        if rng.random() < 0.8:
            d["future_relevance_hint"] = float(rng.choice([0.0, 0.25, 0.5, 1.0]))
        if rng.random() < 0.03:
            d["pinned"] = True
        out.append(d)
    return out


@pytest.mark.parametrize("placer", ["chronological", "u_shaped"])
@pytest.mark.parametrize("overflow", ["throw", "truncate", "proceed"])
@pytest.mark.parametrize(
    "seed, frac, coarse",
    [(0, 0.2, False), (1, 0.5, False), (2, 0.8, False), (3, 1.0, False), (4, 0.6, True), (5, 0.95, True)],
)
def test_unordered_greedy_prefix_matches_naive(placer, overflow, seed, frac, coarse):
    """The big-set greedy path leaves its fitting prefix unordered and each placer orders only
    what it compares (u-shaped: equal scores, pinned items' 1.0 included; chronological:
    untimestamped and equal-timestamp items). Forced on a few hundred items full of ties;
    ``coarse``: 15 distinct scores, so runs of equal scores are long (sorted, not inserted)."""
    items = _prefix_items(900 if coarse else 300, seed)
    total = sum(d["tokens"] for d in items)
    budget = {"max_tokens": total + 10, "target_tokens": int(total * frac)}
    scorers = [{"type": "reflexive", "weight": 1.0}, {"type": "kind", "weight": 0.5}]
    if not coarse:
        scorers.append({"type": "recency", "weight": 0.25})
    config = {"scorers": scorers, "slicer": "greedy", "placer": placer, "overflow_strategy": overflow}
    with fast_paths_everywhere(min_chunk=2):
        got = _engine(items, budget, config)
    assert got == _naive(items, budget, config)


@pytest.mark.parametrize("seed, target", [(0, 64_000), (1, 5_000), (2, 30_000_000), (3, 1), (4, 2_500_000)])
def test_greedy_big_set_default_thresholds(seed, target):
    """A set over BIG_GREEDY with the default first chunk: coarse scores (many equal keys),
    zero tokens, NaN and -0.0 scores."""
    rng = np.random.default_rng(seed)
    n = greedy.BIG_GREEDY + 3000
    tokens = np.floor(np.exp(rng.uniform(0, np.log(2000), n))).astype(np.int64)
    tokens[rng.random(n) < 0.01] = 0
    scores = np.round(rng.random(n), 2)
    scores[rng.random(n) < 0.01] = np.nan
    scores[rng.random(n) < 0.02] = -0.0
    assert engine_greedy(tokens, scores, target) == naive_greedy(tokens, scores, target)


def _medium_sets(rng, sizes, coarse):
    """Candidates of sets of ``sizes`` (one array each of tokens and scores) with many equal
    densities when ``coarse``: zero tokens, NaN, -0.0 and infinite scores among them."""
    n = sum(sizes)
    tokens = np.floor(np.exp(rng.uniform(0, np.log(2000), n))).astype(np.int64)
    tokens[rng.random(n) < 0.02] = 0
    scores = rng.choice(np.array(TIE_VALUES), n) if coarse else rng.random(n)
    scores[rng.random(n) < 0.02] = -0.0
    return tokens, scores, np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)


@pytest.mark.parametrize("sizes", [(193,), (700,), (5000,), (150, 700, 2500, 400), (640, 639, 641)])
@pytest.mark.parametrize("coarse", [False, True])
@pytest.mark.parametrize("frac", [0.0, 0.01, 0.25, 0.9, 1.5])
def test_medium_sets_rank_alike_by_the_packed_sort_and_the_merge_sort(monkeypatch, sizes, coarse, frac):
    """``PACKED_MIN`` picks the path of a set below ``BIG_GREEDY`` (one sort of packed keys, or
    the kernel's stable merge sort), never the ranks: every set's ranks are equal both ways
    and the spec's (the naive oracle's order) with the default threshold."""
    rng = np.random.default_rng(len(sizes) * 1000 + sizes[0])
    tokens, scores, offsets = _medium_sets(rng, sizes, coarse)
    targets = (np.add.reduceat(tokens, offsets[:-1]) * frac).astype(np.int64)

    def ranks(packed_min):
        monkeypatch.setattr(greedy, "PACKED_MIN", packed_min)
        rank = np.full(tokens.shape[0], -1, dtype=np.int64)
        greedy.greedy_segments(tokens, scores, offsets, targets, rank)
        return rank

    default = ranks(greedy.PACKED_MIN)
    assert np.array_equal(ranks(1), default) and np.array_equal(ranks(10**9), default)
    for s in range(len(sizes)):
        lo, hi = offsets[s], offsets[s + 1]
        r = default[lo:hi]
        sel = np.flatnonzero(r >= 0)
        assert list(sel[np.argsort(r[sel])]) == naive_greedy(tokens[lo:hi], scores[lo:hi], int(targets[s]))


def test_fresh_ranks_unwritten_only_where_the_big_path_writes_all():
    big = greedy.BIG_GREEDY
    assert greedy.fresh_ranks(np.array([0, big]), np.array([5])).shape == (big,)
    for off, targets in (([0, big], [0]), ([0, 10, 10 + big], [5, 5]), ([0, 10], [5])):
        rank = greedy.fresh_ranks(np.array(off), np.array(targets))
        assert rank.shape == (off[-1],) and (rank == -1).all()


def test_included_positions_is_the_masked_gather():
    from cupel_np.engine.batch_kernels import included_positions

    rng = np.random.default_rng(3)
    for n in (0, 1, 7, 1000):
        pos = rng.integers(-1, n + 1, n).astype(np.int32)
        inc = rng.random(n) < 0.6
        got = included_positions(pos, inc)
        assert got.dtype == np.int32 and np.array_equal(got, pos[inc])


@SETTINGS
@given(st.lists(st.sampled_from(TIE_VALUES), max_size=200), st.lists(st.sampled_from(TIE_VALUES), max_size=200))
def test_repair_runs_gives_the_total_order(keys, scores):
    n = min(len(keys), len(scores))
    keyd = np.array([np.inf if k != k else k for k in keys[:n]], dtype=np.float64)
    score = np.array(scores[:n], dtype=np.float64)
    order = np.argsort(keyd)  # unstable
    greedy.repair_runs(order, keyd[order], score)
    want = sorted(range(n), key=lambda i: (keyd[i], naive._score_desc_key(score[i]), i))
    assert list(order) == want


# --------------------------------------------------------------------------- radix sort
@SETTINGS
@given(st.lists(st.sampled_from(TIE_VALUES) | st.floats(allow_nan=True), max_size=300))
def test_radix_argsort_is_the_spec_descending_order(xs):
    """Score descending, NaN lowest (below -inf), ties in input order."""
    got = stages.radix_argsort(desc_bits(np.array(xs, dtype=np.float64)))
    assert list(got) == sorted(range(len(xs)), key=lambda i: naive._score_desc_key(xs[i]) + (i,))


@SETTINGS
@given(st.lists(st.floats(allow_nan=False), min_size=2, max_size=50))
def test_density_bits_preserve_float_order(xs):
    """One token each: the keys ascend as the scores descend; equal scores (-0.0 and 0.0
    too) share a key."""
    b = greedy.density_bits(np.ones(len(xs), dtype=np.int64), np.array(xs, dtype=np.float64))
    for i in range(len(xs) - 1):
        assert (xs[i] > xs[i + 1]) == (b[i] < b[i + 1]) and (xs[i] == xs[i + 1]) == (b[i] == b[i + 1])


def test_radix_argsort_empty():
    """No key is read when there are none (the compiled kernel read key[0] out of bounds; the
    plain-Python function, which u-shaped placement runs under NUMBA_DISABLE_JIT, raised)."""
    for f in (stages.radix_argsort, getattr(stages.radix_argsort, "py_func", stages.radix_argsort)):
        got = f(np.zeros(0, dtype=np.uint64))
        assert got.dtype == np.int64 and got.shape == (0,)


def test_radix_argsort_large_with_ties():
    rng = np.random.default_rng(9)
    x = np.round(rng.normal(size=200_000), 3)
    x[rng.random(x.size) < 0.1] = -0.0
    x[rng.random(x.size) < 0.1] = 0.0
    x[rng.random(x.size) < 0.01] = np.nan
    x[rng.random(x.size) < 0.01] = -np.inf
    key = desc_bits(x)
    assert (stages.radix_argsort(key) == np.argsort(key, kind="stable")).all()
    assert (key[np.isnan(x)] > key[x == -np.inf].max()).all()


@SETTINGS
@given(st.lists(st.floats(), min_size=0, max_size=80))
def test_stable_argsort_is_the_spec_descending_order(xs):
    """The kernels' one comparison sort: insertion runs of 16 then merges, ties in input order."""
    got = stable_argsort(desc_bits(np.array(xs, dtype=np.float64)))
    assert list(got) == sorted(range(len(xs)), key=lambda i: naive._score_desc_key(xs[i]) + (i,))


@pytest.mark.parametrize("n", [0, 1, 16, 17, 33, 1000, 5003])
def test_stable_argsort_and_int_keys_with_ties(n):
    rng = np.random.default_rng(n)
    for hi in (3, 2**64 - 1):
        k = rng.integers(0, hi, n, dtype=np.uint64)
        assert (stable_argsort(k) == np.argsort(k, kind="stable")).all()
    x = rng.integers(-2, 2, n) * (2**62) + rng.integers(0, 3, n)  # signed, ties, int64 minimum
    assert (stable_argsort(int_keys(x)) == np.argsort(x, kind="stable")).all()


# --------------------------------------------------------------------------- whole pipeline
def _naive(items, budget, config):
    try:
        rep = naive.run_pipeline(items, budget, config)
    except naive.NaiveError as err:
        return ("error", err.code)
    return ("ok", [r for r, _, _ in rep["included"]], [(r, reason, dict(f)) for r, _, reason, f in rep["excluded"]])


def _engine(items, budget, config):
    try:
        report = c.Pipeline(c.Policy.from_dict(config)).dry_run(
            [c.ContextItem(**d) for d in items], c.ContextBudget(**budget)
        )
    except c.CupelError as err:
        return ("error", err.code)
    inc = [int(r) for r in report.input_rows(report.included_rows)]
    exc = [
        (int(r), e.reason.reason, dataclasses.asdict(e.reason))
        for r, e in zip(report.input_rows(report.excluded_rows), report.excluded)
    ]
    return ("ok", inc, exc)


@SETTINGS
@given(S.pipeline_cases())
def test_pipeline_on_fast_paths_matches_naive(case):
    """Every slicer, placer and overflow strategy with every fast path forced on."""
    items, budget, config = case
    want = _naive(items, budget, config)
    with fast_paths_everywhere():
        got = _engine(items, budget, config)
    assert got == want


def _big_items(n, seed, *, coarse_ts):
    rng = np.random.default_rng(seed)
    kinds = ["Message", "Document", "ToolOutput"]
    out = []
    for i in range(n):
        d = {"content": f"item {i}", "tokens": int(rng.integers(0, 60)), "kind": kinds[i % 3]}
        if rng.random() < 0.7:
            # coarse timestamps: many equal-timestamp runs for the filter's repair
            sec = int(rng.integers(0, 50 if coarse_ts else 10**8))
            d["timestamp"] = datetime.fromtimestamp(1_700_000_000 + sec, UTC)
        if rng.random() < 0.8:
            d["future_relevance_hint"] = float(np.round(rng.random(), 1))
        if rng.random() < 0.01:
            d["pinned"] = True
            d["tokens"] = 1
        out.append(d)
    return out


@pytest.mark.parametrize("placer", ["chronological", "u_shaped"])
@pytest.mark.parametrize("frac", [0.05, 0.9])
def test_big_set_default_thresholds_match_naive(placer, frac):
    """A set big enough for the radix sort and the timestamp filter at default thresholds
    (linear scorers only, so the oracle stays fast)."""
    items = _big_items(6000, 3, coarse_ts=True)
    total = sum(d["tokens"] for d in items)
    budget = {"max_tokens": total, "target_tokens": int(total * frac)}
    config = {
        "scorers": [{"type": "reflexive", "weight": 1.0}, {"type": "kind", "weight": 0.5}],
        "slicer": "greedy",
        "placer": placer,
        "overflow_strategy": "truncate",
    }
    assert _engine(items, budget, config) == _naive(items, budget, config)


def test_count_quota_truncation_through_the_general_filter():
    """Count quotas that overfill the target with truncate: the chronological filter's
    general (truncating) form."""
    items = _big_items(400, 5, coarse_ts=True)
    budget = {"max_tokens": 100_000, "target_tokens": 300}
    config = {
        "scorers": [{"type": "reflexive", "weight": 1.0}],
        "slicer": "count_quota",
        "entries": [{"kind": "Message", "require_count": 60, "cap_count": 80}],
        "placer": "chronological",
        "overflow_strategy": "truncate",
    }
    with fast_paths_everywhere():
        got = _engine(items, budget, config)
    assert got == _naive(items, budget, config)
    assert got[0] == "ok" and any(reason == "BudgetExceeded" for _, reason, _ in got[2])


def test_quota_big_partitions_match_naive():
    """Quota partitions above RADIX_PICK candidates: the inner greedy's radix sort."""
    items = _big_items(3 * greedy.RADIX_PICK + 600, 4, coarse_ts=False)
    total = sum(d["tokens"] for d in items)
    budget = {"max_tokens": total, "target_tokens": total // 2}
    config = {
        "scorers": [{"type": "reflexive", "weight": 1.0}, {"type": "kind", "weight": 0.5}],
        "slicer": "quota",
        "inner_slicer": "greedy",
        "placer": "u_shaped",
        "quotas": [{"kind": "Message", "require": 10.0, "cap": 40.0}],
    }
    got = _engine(items, budget, config)
    assert got[0] == "ok" and len(got[1]) > greedy.RADIX_PICK
    assert got == _naive(items, budget, config)


@pytest.mark.parametrize("placer", ["chronological", "u_shaped"])
def test_long_runs_of_equal_timestamps_and_scores(placer):
    """Thousands of items with one timestamp and one score: the long-run repairs (a sort per
    run, never an insertion sort over the run) keep the spec's order."""
    ts = datetime.fromtimestamp(1_700_000_000, UTC)
    rng = np.random.default_rng(2)
    items = [
        {"content": f"c{i}", "tokens": int(rng.integers(1, 40)), "timestamp": ts, "future_relevance_hint": 0.5}
        for i in range(6000)
    ]
    total = sum(d["tokens"] for d in items)
    budget = {"max_tokens": total, "target_tokens": total // 2}
    config = {"scorers": [{"type": "reflexive", "weight": 1.0}], "slicer": "greedy", "placer": placer}
    got = _engine(items, budget, config)
    assert got[0] == "ok" and len(got[1]) > 2000
    assert got == _naive(items, budget, config)


def test_big_segment_score_sort_with_ties():
    """The quota/knapsack score sort of a big set: quicksort + repair == the spec's stable
    descending order (NaN lowest, -0.0 == 0.0), across long and short runs of equal scores."""
    rng = np.random.default_rng(4)
    n = stages.BIG_SEGMENT + 7000
    score = np.round(rng.random(n), 2)
    score[rng.random(n) < 0.05] = -0.0
    score[rng.random(n) < 0.02] = np.nan
    score[rng.random(n) < 0.01] = -np.inf
    score[: n // 3] = 0.5  # one run of ~24,000 equal scores
    got = stages.sort_segments(score, np.array([0, 100, n]))
    for lo, hi in ((0, 100), (100, n)):
        want = sorted(range(lo, hi), key=lambda i: naive._score_desc_key(float(score[i])) + (i,))
        assert list(got[lo:hi]) == want


@pytest.mark.parametrize("n_terms", [0, 1, 2, 3, 4, 5, 8, 9])
def test_variant_scores_sum_terms_left_to_right(n_terms):
    """Every variant's score is ``((0.0 + x0*w0) + x1*w1) + ...`` in its own term order, to the
    bit (-0.0 columns and negative weights included), over more rows than one block."""
    from cupel_np.engine.batch_kernels import SCORE_BLOCK, variant_scores

    rng = np.random.default_rng(n_terms)
    m, k = 2 * SCORE_BLOCK + 37, 5
    base = rng.random((m, k))
    base[rng.random((m, k)) < 0.1] = -0.0
    term_off = np.array([0, n_terms, 2 * n_terms], dtype=np.int64)
    term_col = rng.integers(0, k, 2 * n_terms).astype(np.int64)
    term_w = rng.uniform(-1.0, 1.0, 2 * n_terms)
    got = variant_scores(base, term_off, term_col, term_w, np.full((2, m), np.nan))
    for v in range(2):
        want = np.zeros(m)
        for t in range(term_off[v], term_off[v + 1]):
            want = want + base[:, term_col[t]] * term_w[t]
        assert np.array_equal(got[v].view(np.uint64), want.view(np.uint64))
