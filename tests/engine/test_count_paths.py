"""CountQuotaSlice with an inner greedy without the score sort (``count.count_greedy_slice``,
the sweep's path) against the score-sorted kernel (``slice_segments``, the path the
conformance runner takes and the naive-oracle tests pin down): the same selection, order,
shortfalls, scarcity errors and cap drops, on arrays with many ties, -0.0, NaN and
infinities over several sets, with greedy's big-set path forced on and off, and with the
fitting prefix left unordered apart from the compared candidates."""

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import naive  # noqa: E402
from test_fast_paths import SETTINGS, TIE_VALUES, fast_paths_everywhere  # noqa: E402

import cupel_np.engine.slicers as sk  # noqa: E402
from cupel_np.engine.slicers import count  # noqa: E402

N_KINDS = 5  # kind ids 0..3 used by candidates, 4 the table's spare slot


def _args(entries, throw):
    """``entries``: [(kind id or -1, require_count, cap_count or None)]."""
    cap_of_kind = np.full(N_KINDS, -1, np.int64)
    for k, _, cap in entries:
        if k >= 0 and cap is not None:
            cap_of_kind[k] = cap
    return sk.SlicerArgs(
        sk.MODE_COUNT,
        False,
        100,
        np.arange(N_KINDS, dtype=np.int64),
        np.zeros(N_KINDS, np.bool_),
        np.zeros(N_KINDS),
        np.full(N_KINDS, 100.0),
        np.zeros(0),
        np.array([k for k, _, _ in entries], dtype=np.int64),
        np.array([r for _, r, _ in entries], dtype=np.int64),
        cap_of_kind,
        throw,
        False,
    )


def _sorted_path(args, tok, score, kind, offsets, targets):
    """``slice_segments`` over each set's score-sorted candidates; ranks mapped back to rows."""
    order = np.concatenate(
        [
            np.array(sorted(range(lo, hi), key=lambda i: naive._score_desc_key(score[i]) + (i,)), dtype=np.int64)
            for lo, hi in zip(offsets[:-1], offsets[1:])
        ]
        + [np.zeros(0, np.int64)]
    )
    rank, *rest = args.run(tok[order], score[order], kind[order], offsets, targets, 1 << 30)
    by_row = np.full(tok.shape[0], -1, dtype=np.int64)
    by_row[order] = rank
    return (by_row, *rest)


def _check(args, tok, score, kind, offsets, targets, compared):
    want = _sorted_path(args, tok, score, kind, offsets, targets)
    got = args.run(tok, score, kind, offsets, targets, 1 << 30, unsorted=True)
    for g, w in zip(got, want, strict=True):
        assert (g == w).all()
    part = args.run(tok, score, kind, offsets, targets, 1 << 30, unsorted=True, compared=compared)
    for g, w in zip(part[1:], want[1:], strict=True):
        assert (g == w).all()
    rank, exact = part[0], want[0]
    assert ((rank >= 0) == (exact >= 0)).all()
    for lo, hi in zip(offsets[:-1], offsets[1:]):
        sel = np.arange(lo, hi)[rank[lo:hi] >= 0]
        assert sorted(rank[sel]) == list(range(sel.size))  # ranks 0.. per set, no gaps
        marked = sel[compared[sel]]  # the compared candidates keep their exact relative order
        assert list(marked[np.argsort(rank[marked])]) == list(marked[np.argsort(exact[marked])])


entry_lists = st.lists(
    st.tuples(st.integers(-1, 3), st.integers(0, 6), st.one_of(st.none(), st.integers(0, 8))),
    max_size=3,
    unique_by=lambda e: e[0],
).map(lambda es: [(k, r, None if c is None else max(c, r)) for k, r, c in es])


@SETTINGS
@given(
    st.lists(
        st.lists(st.tuples(st.integers(0, 40), st.sampled_from(TIE_VALUES), st.integers(0, 3)), max_size=60),
        min_size=1,
        max_size=4,
    ),
    st.lists(st.integers(-5, 600), min_size=4, max_size=4),
    entry_lists,
    st.booleans(),
    st.sampled_from([None, 1, 3]),
)
def test_count_greedy_row_order_equals_sorted_kernel(sets, targets, entries, throw, min_chunk):
    tok = np.array([t for rows in sets for t, _, _ in rows], dtype=np.int64)
    score = np.array([x for rows in sets for _, x, _ in rows], dtype=np.float64)
    kind = np.array([k for rows in sets for _, _, k in rows], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum([len(rows) for rows in sets])]).astype(np.int64)
    targets = np.array(targets[: len(sets)], dtype=np.int64)
    compared = np.array([(i * 7 + int(t)) % 3 == 0 for i, t in enumerate(tok)], dtype=np.bool_)
    args = _args(entries, throw)
    if min_chunk is None:  # default thresholds: every set takes greedy's small path
        _check(args, tok, score, kind, offsets, targets, compared)
    else:
        with fast_paths_everywhere(min_chunk):
            _check(args, tok, score, kind, offsets, targets, compared)


@pytest.mark.parametrize("need", [3, count.TOP_BUFFER, count.TOP_BUFFER + 1, 400])
@pytest.mark.parametrize("big", [False, True])
def test_top_of_kind_buffer_and_sort(need, big):
    """An entry's top candidates by the insertion buffer (``need <= TOP_BUFFER``) and by
    sorting the kind (more), with long runs of equal scores, NaN and -0.0; a binding cap."""
    rng = np.random.default_rng(need)
    n = 3000
    tok = rng.integers(0, 30, n).astype(np.int64)
    score = np.round(rng.random(n), 1)
    score[rng.random(n) < 0.05] = np.nan
    score[rng.random(n) < 0.05] = -0.0
    kind = rng.integers(0, 4, n).astype(np.int64)
    offsets = np.array([0, 1000, n], dtype=np.int64)
    targets = np.array([int(tok[:1000].sum() // 3), int(tok[1000:].sum() // 2)], dtype=np.int64)
    args = _args([(1, need, need + 150), (2, 5, None)], False)
    compared = rng.random(n) < 0.3
    if big:
        with fast_paths_everywhere(7):
            _check(args, tok, score, kind, offsets, targets, compared)
    else:
        _check(args, tok, score, kind, offsets, targets, compared)


@pytest.mark.parametrize("big", [False, True])
def test_stand_ins_near_the_token_limit(big):
    """Phase 2 runs over every candidate with the committed ones' tokens replaced by more than
    the remaining budget; where those stand-ins would take a set's tokens past
    ``count.TOKEN_LIMIT`` (a target near 2**62) the set's phase 2 runs over a residual copy
    instead (``count._solo_greedy``). Both kinds of set in one call, with a binding cap; with
    greedy's big path forced, every set takes ``count_big._count_big`` (no stand-ins) instead."""
    rng = np.random.default_rng(5)
    n = 900
    tok = rng.integers(0, 30, n).astype(np.int64)
    score = np.round(rng.random(n), 2)
    kind = rng.integers(0, 4, n).astype(np.int64)
    offsets = np.array([0, 300, 600, n], dtype=np.int64)
    targets = np.array([count.TOKEN_LIMIT - 10, int(tok[300:600].sum() // 3), count.TOKEN_LIMIT // 3], dtype=np.int64)
    args = _args([(1, 4, 20), (2, 3, None)], False)
    compared = rng.random(n) < 0.3
    _, _, _, _, solo = count._count_commit(
        tok,
        score,
        kind,
        offsets,
        targets,
        args.e_kind,
        args.e_require,
        N_KINDS,
        False,
        np.zeros((3, 2), np.int64),
        np.zeros(3, np.int8),
        np.zeros(3, np.int64),
        np.zeros(3, np.int64),
        np.full((3, 2), -1, np.int64),
    )
    assert solo.tolist() == [True, False, True]
    if big:
        with fast_paths_everywhere(7):
            _check(args, tok, score, kind, offsets, targets, compared)
    else:
        _check(args, tok, score, kind, offsets, targets, compared)


def _check_ranges(args, tok, score, kind, offsets, targets):
    """``run_rows(unordered=True)``: the exact selection and ranks, except that each set's
    range of ranks (its fitting prefix's kept picks) holds the same candidates in any order."""
    want = _sorted_path(args, tok, score, kind, offsets, targets)
    got, (r_off, r_lo, r_hi) = args.run_rows(tok, score, kind, offsets, targets, 1 << 30, unordered=True)
    for g, w in zip(got[1:], want[1:], strict=True):
        assert (g == w).all()
    rank, exact = got[0], want[0]
    assert ((rank >= 0) == (exact >= 0)).all()
    for s, (lo, hi) in enumerate(zip(offsets[:-1], offsets[1:])):
        r, x = rank[lo:hi], exact[lo:hi]
        free = np.zeros(hi - lo, dtype=np.bool_)
        for a, b in zip(r_lo[r_off[s] : r_off[s + 1]], r_hi[r_off[s] : r_off[s + 1]]):
            inside = (r >= a) & (r < b)
            assert (inside == ((x >= a) & (x < b))).all()  # the same candidates
            free |= inside
        assert (r[~free] == x[~free]).all()


@pytest.mark.parametrize("frac", [0.0, 0.01, 0.3, 0.95, 2.0])
def test_big_set_folds_phase_3_into_the_greedy(frac):
    """A set on greedy's big path at the default thresholds (``count_big._count_big``: caps
    enforced inside greedy's passes) beside small sets, against the score-sorted kernel:
    a binding cap, a cap every phase-2 pick of its kind is over (require = cap, past
    ``TOP_BUFFER``), an uncapped entry; targets from below the committed tokens to more than
    every token; exact ranks, the compared candidates' order, the unordered prefix ranges."""
    rng = np.random.default_rng(31)
    n_big = count.greedy.BIG_GREEDY + 7000
    n = n_big + 300
    tok = rng.integers(0, 60, n).astype(np.int64)
    score = np.round(rng.random(n), 2)
    score[rng.random(n) < 0.02] = np.nan
    score[rng.random(n) < 0.02] = -0.0
    kind = rng.integers(0, 4, n).astype(np.int64)
    offsets = np.array([0, 200, 200 + n_big, n_big + 200, n], dtype=np.int64)
    sums = [int(tok[lo:hi].sum()) for lo, hi in zip(offsets[:-1], offsets[1:])]
    targets = np.array([max(1, int(x * frac)) for x in sums], dtype=np.int64)
    if frac == 0.0:
        targets[1] = 40  # below the committed candidates' tokens: no phase 2
    args = _args([(1, 5, 900), (2, count.TOP_BUFFER + 6, count.TOP_BUFFER + 6), (3, 2, None)], False)
    compared = rng.random(n) < 0.2
    _check(args, tok, score, kind, offsets, targets, compared)
    _check_ranges(args, tok, score, kind, offsets, targets)


@pytest.mark.parametrize("throw", [False, True])
def test_big_set_scarcity(throw):
    """A big set whose entry cannot be met: recorded as a shortfall, or the set's scarcity
    error (it commits nothing), as the score-sorted kernel does."""
    rng = np.random.default_rng(32)
    n = count.greedy.BIG_GREEDY + 100
    tok = rng.integers(1, 40, n).astype(np.int64)
    score = np.round(rng.random(n), 3)
    kind = np.where(rng.random(n) < 0.001, 3, rng.integers(0, 3, n)).astype(np.int64)
    offsets = np.array([0, n], dtype=np.int64)
    targets = np.array([int(tok.sum() // 4)], dtype=np.int64)
    args = _args([(0, 3, 4000), (3, int((kind == 3).sum()) + 1, None)], throw)
    _check(args, tok, score, kind, offsets, targets, rng.random(n) < 0.2)
