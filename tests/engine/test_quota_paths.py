"""QuotaSlice with an inner greedy without the score sort (slicers/quota.py) against the naive
oracle (tests/naive.py): the kernel on arrays with many ties, -0.0, NaN and infinities over
several sets (with greedy's big-set path forced on by its keywords and off), whole pipelines
with every fast path forced on, and sets whose kind partitions take greedy's big-set path at
the default thresholds."""

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import naive  # noqa: E402
import strategies as S  # noqa: E402
from test_fast_paths import SETTINGS, TIE_VALUES, _engine, _naive, fast_paths_everywhere  # noqa: E402

import cupel_np.engine.slicers as sk  # noqa: E402
from cupel_np.engine.slicers import greedy  # noqa: E402
from cupel_np.engine.slicers.quota import quota_greedy_segments  # noqa: E402

#: kind names as written (ASCII-lowercased order b < c < d < e) and each kind id's rank in that
#: order; id 4 is the ItemTable's spare kind slot (rank 0, never an item's kind)
KIND_NAMES = ["c", "B", "e", "D"]
KIND_RANK = np.array([1, 0, 3, 2, 0], dtype=np.int64)


def _quota_arrays(quotas):
    """``quotas``: {kind id: (require %, cap %)} -> the kernel's quota arrays."""
    n_kinds = KIND_RANK.shape[0]
    q_has = np.zeros(n_kinds, dtype=np.bool_)
    q_req = np.zeros(n_kinds, dtype=np.float64)
    q_cap = np.full(n_kinds, 100.0)
    for k, (req, cap) in quotas.items():
        q_has[k], q_req[k], q_cap[k] = True, req, cap
    q_req_all = np.array([req for req, _ in quotas.values()], dtype=np.float64)
    return q_has, q_req, q_cap, q_req_all


def naive_quota(tokens, scores, kinds, target, quotas):
    """The spec's QuotaSlice(inner greedy) over one set given in row order: rows in output
    order."""
    order = sorted(range(len(scores)), key=lambda i: naive._score_desc_key(scores[i]) + (i,))
    scored = [
        ({"content": f"c{i}", "tokens": int(tokens[i]), "kind": KIND_NAMES[kinds[i]]}, float(scores[i])) for i in order
    ]
    folded = {naive.ascii_fold(KIND_NAMES[k]): v for k, v in quotas.items()}
    picked = naive.quota_slice(scored, list(range(len(scored))), target, folded, "greedy", 100)
    return [order[p] for p in picked]


def engine_quota(tokens, scores, kinds, offsets, targets, quotas, **kw):
    """Rows of every set in output order (one list per set)."""
    n = len(tokens)
    rank = np.full(n, -1, dtype=np.int64)
    quota_greedy_segments(
        np.asarray(tokens, np.int64),
        np.asarray(scores, np.float64),
        np.asarray(kinds, np.int64),
        np.asarray(offsets, np.int64),
        np.asarray(targets, np.int64),
        (KIND_RANK, *_quota_arrays(quotas)),
        rank,
        **kw,
    )
    out = []
    for s in range(len(offsets) - 1):
        sel = np.arange(offsets[s], offsets[s + 1])
        sel = sel[rank[sel] >= 0]
        assert sorted(rank[sel]) == list(range(len(sel)))  # ranks 0.. per set, no gaps
        out.append([int(p) - offsets[s] for p in sel[np.argsort(rank[sel])]])
    return out


quota_sets = st.dictionaries(
    st.integers(0, 3),
    st.tuples(st.sampled_from([0.0, 10.0, 25.0, 33.3]), st.sampled_from([0.0, 20.0, 50.0, 100.0])),
    max_size=3,
).map(lambda d: {k: (r, max(r, c)) for k, (r, c) in d.items()})


@SETTINGS
@given(
    st.lists(
        st.lists(st.tuples(st.integers(0, 40), st.sampled_from(TIE_VALUES), st.integers(0, 3)), max_size=60),
        min_size=1,
        max_size=4,
    ),
    st.lists(st.integers(-5, 600), min_size=4, max_size=4),
    quota_sets,
    st.sampled_from([1, 2, 3, 16]),
)
def test_quota_greedy_kernel_matches_spec(sets, targets, quotas, min_chunk):
    tokens = [t for rows in sets for t, _, _ in rows]
    scores = [s for rows in sets for _, s, _ in rows]
    kinds = [k for rows in sets for _, _, k in rows]
    offsets = np.concatenate([[0], np.cumsum([len(rows) for rows in sets])])
    targets = targets[: len(sets)]
    want = [
        naive_quota(tokens[lo:hi], scores[lo:hi], kinds[lo:hi], t, quotas)
        for lo, hi, t in zip(offsets[:-1], offsets[1:], targets)
    ]
    assert engine_quota(tokens, scores, kinds, offsets, targets, quotas, big=1, min_chunk=min_chunk) == want
    assert engine_quota(tokens, scores, kinds, offsets, targets, quotas, big=10**9) == want


@SETTINGS
@given(S.focused_cases("quota"))
def test_quota_pipeline_on_fast_paths_matches_naive(case):
    """Whole quota pipelines (inner greedy or knapsack) with every fast path forced on."""
    items, budget, config = case
    want = _naive(items, budget, config)
    with fast_paths_everywhere():
        got = _engine(items, budget, config)
    assert got == want


@pytest.mark.parametrize("seed, frac", [(0, 0.25), (1, 0.02), (2, 0.9)])
def test_quota_big_partitions_default_thresholds(seed, frac):
    """Kind partitions over BIG_GREEDY candidates at the default thresholds (greedy's chunked
    density walk per partition), two sets, coarse scores, zero tokens, NaN and -0.0."""
    rng = np.random.default_rng(seed)
    sizes = [3 * greedy.BIG_GREEDY + 3000, 500]
    n = sum(sizes)
    tokens = np.floor(np.exp(rng.uniform(0, np.log(2000), n))).astype(np.int64)
    tokens[rng.random(n) < 0.01] = 0
    scores = np.round(rng.random(n), 2)
    scores[rng.random(n) < 0.01] = np.nan
    scores[rng.random(n) < 0.02] = -0.0
    kinds = rng.integers(0, 4, n)
    kinds[: sizes[0] // 2] = 1  # one kind holds most of the big set
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    targets = [int(tokens[: sizes[0]].sum() * frac), int(tokens[sizes[0] :].sum() * frac)]
    quotas = {1: (10.0, 60.0), 3: (5.0, 40.0)}
    got = engine_quota(tokens, scores, kinds, offsets, targets, quotas)
    assert len(got[0]) > greedy.BIG_GREEDY // 10
    for s, (lo, hi) in enumerate(zip(offsets[:-1], offsets[1:])):
        assert got[s] == naive_quota(
            tokens[lo:hi].tolist(), scores[lo:hi].tolist(), kinds[lo:hi].tolist(), targets[s], quotas
        )


@SETTINGS
@given(
    st.lists(st.tuples(st.integers(0, 40), st.sampled_from(TIE_VALUES), st.integers(0, 3)), max_size=80),
    st.integers(0, 600),
    quota_sets,
)
def test_quota_greedy_kernel_equals_sorted_kernel(rows, target, quotas):
    """The unsorted path and ``slice_segments`` over the score-sorted candidates (the path
    quota with an inner knapsack and the conformance runner take) select the same rows in the
    same order."""
    tokens = np.array([t for t, _, _ in rows], dtype=np.int64)
    scores = np.array([s for _, s, _ in rows], dtype=np.float64)
    kinds = np.array([k for _, _, k in rows], dtype=np.int64)
    n = len(rows)
    order = np.array(sorted(range(n), key=lambda i: naive._score_desc_key(scores[i]) + (i,)), dtype=np.int64)
    args = sk.SlicerArgs(
        sk.MODE_QUOTA,
        False,
        100,
        KIND_RANK,
        *_quota_arrays(quotas),
        np.zeros(0, np.int64),
        np.zeros(0, np.int64),
        np.full(KIND_RANK.shape[0], -1, np.int64),
        False,
        False,
    )
    rank, err, *_ = sk.slice_segments(
        args, tokens[order], scores[order], kinds[order], np.array([0, n]), np.array([target]), 1 << 30
    )
    sel = np.flatnonzero(rank >= 0)
    want = [int(order[p]) for p in sel[np.argsort(rank[sel])]]
    assert engine_quota(tokens, scores, kinds, [0, n], [target], quotas) == [want]


def test_knapsack_driver_sends_only_huge_value_sets_to_the_split_dp():
    """slice_segments' knapsack driver runs the int64 DP and hands a set whose values sum
    past an int64 to the exact (split-row) kernel: every set, whichever DP it needs, gives
    what it gives alone and what the oracle gives."""
    rng = np.random.default_rng(3)
    sizes = [30, 25, 0, 40, 12]
    scales = [1.0, 1e15, 1.0, 3e14, 1e300]  # sets 1, 3 and 4 sum past 2^63 (values of 1e19+)
    tokens = rng.integers(0, 60, sum(sizes))
    scores = np.concatenate([np.round(rng.random(m), 2) * sc for m, sc in zip(sizes, scales)])
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    targets = np.array([400, 300, 10, 500, 0])
    no = np.zeros(0, np.int64)

    def run(tok, sc, off, tgt):
        n_k = KIND_RANK.shape[0]
        args = sk.SlicerArgs(
            sk.MODE_KNAPSACK,
            False,
            7,
            KIND_RANK,
            np.zeros(n_k, np.bool_),
            np.zeros(n_k),
            np.zeros(n_k),
            np.zeros(0),
            no,
            no,
            np.full(n_k, -1, np.int64),
            False,
            False,
        )
        rank, err, *_ = sk.slice_segments(args, tok, sc, np.zeros(tok.shape[0], np.int64), off, tgt, 1 << 30)
        assert not err.any()
        return rank

    rank = run(tokens, scores, offsets, targets)
    for s in range(len(sizes)):
        lo, hi = offsets[s], offsets[s + 1]
        alone = run(tokens[lo:hi], scores[lo:hi], np.array([0, hi - lo]), targets[s : s + 1])
        assert (rank[lo:hi] == alone).all()
        # the oracle takes the list as given (the driver's input is score-sorted already)
        scored = [({"content": f"c{i}", "tokens": int(tokens[lo + i])}, float(scores[lo + i])) for i in range(hi - lo)]
        want = naive.slice_items(scored, int(targets[s]), {"slicer": "knapsack", "bucket_size": 7})[0]
        sel = np.flatnonzero(alone >= 0)
        assert [int(p) for p in sel[np.argsort(alone[sel])]] == list(want)


@pytest.mark.parametrize("inner", ["greedy", "knapsack"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_quota_with_many_kinds_in_one_set(inner, seed):
    """More than 32 kinds in one set orders the partitions by a sort instead of insertion
    (quota.kind_budgets); both quota paths against the oracle."""
    rng = np.random.default_rng(seed)
    names = [("K" if i % 3 == 0 else "k") + f"{int(v):03d}" for i, v in enumerate(rng.permutation(60)[:45])]
    items = [
        {
            "content": f"c{i}",
            "tokens": int(rng.integers(0, 40)),
            "kind": names[int(rng.integers(0, 45))],
            "priority": int(rng.integers(0, 5)),
        }
        for i in range(300)
    ]
    quotas = [
        {"kind": names[0], "require": 10.0, "cap": 30.0},
        {"kind": names[7], "require": 5.0},
        {"kind": names[20].swapcase(), "require": 2.0, "cap": 4.0},
    ]
    for target in (50, 900, 4000):
        config = {
            "scorers": [{"type": "priority", "weight": 1.0}],
            "slicer": "quota",
            "quotas": quotas,
            "inner_slicer": inner,
            "bucket_size": 7,
        }
        budget = {"max_tokens": 20_000, "target_tokens": target}
        assert _engine(items, budget, config) == _naive(items, budget, config)


@SETTINGS
@given(
    st.lists(
        st.lists(
            st.tuples(st.integers(0, 40), st.sampled_from(TIE_VALUES), st.integers(0, 3), st.booleans()), max_size=60
        ),
        min_size=1,
        max_size=4,
    ),
    st.lists(st.integers(-5, 600), min_size=4, max_size=4),
    quota_sets,
    st.sampled_from([1, 2, 16]),
)
def test_quota_greedy_kernel_with_compared_marks(sets, targets, quotas, min_chunk):
    """With ``compared`` marks (chronological placement), each kind's fitting prefix stays
    unordered apart from the marked candidates: the same selection, ranks 0.. per set, and the
    marked candidates in the spec's output order relative to each other."""
    tokens = [t for rows in sets for t, _, _, _ in rows]
    scores = [s for rows in sets for _, s, _, _ in rows]
    kinds = [k for rows in sets for _, _, k, _ in rows]
    marks = np.array([m for rows in sets for _, _, _, m in rows], dtype=np.bool_)
    offsets = np.concatenate([[0], np.cumsum([len(rows) for rows in sets])])
    targets = targets[: len(sets)]
    for big in (1, 10**9):
        got = engine_quota(
            tokens, scores, kinds, offsets, targets, quotas, big=big, min_chunk=min_chunk, compared=marks
        )
        for s, (lo, hi, t) in enumerate(zip(offsets[:-1], offsets[1:], targets)):
            want = naive_quota(tokens[lo:hi], scores[lo:hi], kinds[lo:hi], t, quotas)
            assert sorted(got[s]) == sorted(want)
            m = marks[lo:hi]
            assert [p for p in got[s] if m[p]] == [p for p in want if m[p]]


# -- targets beyond float64's integers -------------------------------------------------------
#: above 2**53 and rounding down as a float64 (to ...704832); with HUGE_MASS tokens of the one
#: kind among the candidates, the split's float quotient rounds up past it (to ...705088)
HUGE_TARGET = 2262488131819704833
HUGE_MASS = 3232125902599577899


def _huge_items():
    from datetime import UTC, datetime

    import cupel_np as c

    # timestamped, so recency gives the two small ones positive values; "huge" fits no budget
    return [
        c.ContextItem(name, tok, timestamp=datetime(2025, 1, day, tzinfo=UTC))
        for name, tok, day in (("zero", 0, 1), ("one", 5, 2), ("two", 7, 3))
    ] + [c.ContextItem("huge", HUGE_MASS)]


def _huge_run(slicer, items):
    import cupel_np as c

    policy = c.Policy(c.RecencyScorer(), slicer=slicer, placer="chronological")
    report = c.Pipeline(policy).dry_run(items, c.ContextBudget(HUGE_TARGET, HUGE_TARGET))
    return [i.item.content for i in report.included]


def test_quota_sub_budget_of_a_kind_without_quota_is_capped_as_the_spec_casts_it():
    """The spec makes a kind's sub-budget with ``maxTokens = floor(cap / 100.0 * target)``
    (cap 100 for a kind without a quota), and the Rust crate caps the kind's target at it: here
    ...704832, one token below the target. A knapsack whose bucket is the whole target then
    gets capacity 0 and keeps only zero-token items; capped by the split's exact target alone,
    the kind kept its whole target and the knapsack one item. Found by the huge-tokens property
    test against tests/naive.py."""
    import cupel_np as c

    items = _huge_items()
    assert _huge_run(c.QuotaSlice((), c.KnapsackSlice(HUGE_TARGET)), items) == ["zero"]
    # a quota on another kind leaves "Message" without one of its own
    other = (c.QuotaEntry("Document", require=0, cap=50),)
    assert _huge_run(c.QuotaSlice(other, c.KnapsackSlice(HUGE_TARGET)), items) == ["zero"]
    # the knapsack alone gets the exact target: capacity 1, the most recent item
    assert _huge_run(c.KnapsackSlice(HUGE_TARGET), items) == ["zero", "two"]
    want = naive.run_pipeline(
        [{"content": i.content, "tokens": i.tokens, "timestamp": i.timestamp} for i in items],
        {"max_tokens": HUGE_TARGET, "target_tokens": HUGE_TARGET},
        {
            "slicer": "quota",
            "quotas": [],
            "inner_slicer": "knapsack",
            "bucket_size": HUGE_TARGET,
            "scorers": [{"type": "recency"}],
        },
    )
    assert [items[r].content for r in want["placed"]] == ["zero"]


def test_quota_percentages_saturate_like_rusts_cast():
    """``floor(100 / 100.0 * target)`` for a target within 512 of 2**63 is 2**63 as a float64:
    Rust's ``as i64`` saturates it; an unchecked conversion gave -2**63 (a negative cap, so
    the kind got no budget)."""
    from cupel_np.engine.slicers.quota import budget_split

    target = 2**63 - 1
    kb = np.zeros(2, dtype=np.int64)
    found = np.array([0, 1], dtype=np.int64)
    mass = np.array([10, 30], dtype=np.int64)
    q_has = np.array([True, False])
    q_req = np.array([0.0, 0.0])
    q_cap = np.array([100.0, 100.0])
    budget_split(found, 2, mass, target, q_has, q_req, q_cap, np.array([0.0]), kb)
    # both kinds share the whole target by their masses (1/4 and 3/4), none negative
    assert kb[0] > 2**60 and kb[1] > 2**62, kb
    assert kb[0] <= target and kb[1] <= target
