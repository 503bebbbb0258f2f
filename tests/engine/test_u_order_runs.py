"""Runs of one score in ``u_order`` (``_one_score_run``, the shortcut that orders a run of
one score inside one unordered range by tokens, then rank, without densities), against a
plain sort by (score key, slicer output order): at and around the shortcut's limits (scores
near ``2**-900`` and ``2**1000``, tokens near ``TOK_LIMIT``), with ranges ranked in index
order or not, runs that straddle two ranges or stick out of one, short and long runs, and the
pinned items' place inside a run scored 1.0."""

import numpy as np
import pytest

from cupel_np.engine import u_order
from tests.engine.test_u_shaped_order import reference as _reference  # the same plain sort


def _check(score, tok, rank, ranges, n_pin):
    n = score.shape[0]
    arg = np.array([0, len(ranges)]), np.array([a for a, _ in ranges]), np.array([b for _, b in ranges])
    u_at, u_pin = u_order._sliced_score_order(rank, score, tok, np.array([0, n]), np.array([0, n_pin]), 0, arg)
    at, first_pin = _reference(rank, score, tok, ranges, n_pin)
    assert u_pin[0] == first_pin
    assert {p: int(u_at[p]) for p in at} == at


def _case(rng, n, values, tok_pool, in_index_order, cuts):
    """``n`` candidates, every one selected, scored from ``values`` (long runs of ties);
    ranks cut into ``cuts`` blocks, each an unordered range (ranked in index order unless
    ``in_index_order`` is False)."""
    score = rng.choice(np.array(values, dtype=np.float64), n)
    tok = rng.choice(np.array(tok_pool, dtype=np.int64), n)
    perm = rng.permutation(n)
    rank = np.full(n, -1, dtype=np.int64)
    ranges = []
    for a, b in zip(cuts[:-1], cuts[1:]):
        who = perm[a:b]
        ranges.append((a, b))
        rank[np.sort(who) if in_index_order else who] = np.arange(a, b)
    return score, tok, rank, ranges


LIMIT = u_order.TOK_LIMIT
SCORE_SETS = [
    [0.25, 0.5, 0.75],
    [2.0**-900, np.nextafter(2.0**-900, 1.0), 2.0**-1000, 2.0**-1070],  # at and below the floor
    [2.0**1000, np.nextafter(2.0**1000, 0.0), 2.0**999],  # at and below the ceiling
    [1.0, 2.0, 0.5],  # the pinned items go into the run scored 1.0
    [0.0, -0.5, np.nan, np.inf, 0.3],  # not positive, not finite: the general path
]
TOKEN_POOLS = [
    list(range(40)),
    [0, 1, LIMIT - 2, LIMIT - 1],
    [0, 1, LIMIT - 1, LIMIT, LIMIT + 1],  # at the limit: the general path
]


@pytest.mark.parametrize("values", SCORE_SETS)
@pytest.mark.parametrize("tok_pool", TOKEN_POOLS)
@pytest.mark.parametrize("n", [40, 900])  # runs below and above RUN_RADIX_MIN
def test_one_score_runs_are_in_the_sorted_order(values, tok_pool, n):
    rng = np.random.default_rng(n + len(values) + len(tok_pool))
    for in_index_order in (True, False):
        for cuts in ([0, n], [0, n // 3, n], [0, n - 2]):  # one range; two; one range and 2 exact ranks
            score, tok, rank, ranges = _case(rng, n, values, tok_pool, in_index_order, cuts)
            if cuts[-1] < n:  # the last candidates ranked after the range, one by one
                rest = np.flatnonzero(rank < 0)
                rank[rest] = cuts[-1] + np.arange(rest.shape[0])
            _check(score, tok, rank, ranges, 2)


def test_runs_without_ranges_are_in_rank_order():
    """No unordered range: a run of one score is in rank order (the shortcut does not apply)."""
    rng = np.random.default_rng(7)
    n = 700
    score = rng.choice(np.array([0.5, 1.0, 0.25]), n)
    tok = rng.integers(0, 50, n)
    rank = rng.permutation(n)
    u_at, u_pin = u_order._sliced_score_order(rank, score, tok, np.array([0, n]), np.array([0, 1]), 0, None)
    at, first_pin = _reference(rank, score, tok, [], 1)
    assert u_pin[0] == first_pin
    assert {p: int(u_at[p]) for p in at} == at


def test_positions_are_int32_below_two_to_the_31():
    """``u_at`` is int32 (its scattered writes touch half the memory) unless a set could
    hold 2**31 places; a run with nothing placed returns an int32 empty array too (the place
    kernel sees one type)."""
    assert u_order._u_at_dtype(2**31 - 1) is np.int32
    assert u_order._u_at_dtype(2**31) is np.int64
    n = 50
    score = np.linspace(0.1, 0.9, n)
    tok = np.ones(n, dtype=np.int64)
    rank = np.arange(n)
    u_at, _ = u_order._sliced_score_order(rank, score, tok, np.array([0, n]), np.array([0, 0]), 0, None)
    assert u_at.dtype == np.int32
    none, u_pin = u_order._sliced_score_order(rank, score, tok, np.array([0, n]), np.array([0, 0]), n + 1, None)
    assert none.dtype == np.int32 and none.shape == (0,) and u_pin[0] == -1
