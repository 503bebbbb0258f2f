"""``packed._order_run``'s long runs (past ``RUN_INSERTION_MAX``): a run of one density key is
ordered by score alone (descending, NaN last, -0.0 tying 0.0, then position), a run of several
keys by (key, score, position); checked against a plain Python sort of the same triples,
including runs whose keys differ only in their last entry."""

import math

import numpy as np
import pytest

from cupel_np.engine.slicers import packed

SCORES = np.array([0.0, -0.0, 0.5, 1.0, 2.0, -1.0, np.nan, np.inf, -np.inf, 1e-300, 3.0])


def _reference(qs, kp, sp):
    # (key ascending, score descending with NaN last and -0.0 == 0.0, position ascending);
    # qs holds indices in position order, so the index is the position
    def key(q):
        s = sp[q]
        nan = math.isnan(s)
        return (int(kp[q]), nan, 0.0 if nan else -s, q)

    return sorted(qs.tolist(), key=key)


def _run(rng, n_run, n_keys, last_differs):
    kp = np.full(n_run, 7 << 40, dtype=np.uint64)
    if n_keys > 1:
        kp += rng.integers(0, n_keys, n_run).astype(np.uint64)
    if last_differs:
        kp[:] = 7 << 40
        kp[-1] = (7 << 40) + 1 if rng.random() < 0.5 else (7 << 40) - 1
    sp = np.where(rng.random(n_run) < 0.6, rng.choice(SCORES, n_run), rng.random(n_run))
    return np.arange(n_run, dtype=np.int64), kp, sp.astype(np.float64)


@pytest.mark.parametrize("n_keys,last_differs", [(1, False), (3, False), (1, True)])
def test_long_runs_match_reference_order(n_keys, last_differs):
    rng = np.random.default_rng(11 + n_keys + 5 * last_differs)
    for n_run in (packed.RUN_INSERTION_MAX + 1, 200, 3000):
        qs, kp, sp = _run(rng, n_run, n_keys, last_differs)
        want = _reference(qs, kp, sp)
        got = qs.copy()
        packed._order_run(got, kp, sp)
        assert got.tolist() == want
        assert sorted(got.tolist()) == list(range(n_run))  # a permutation of the run


def test_long_one_key_run_keeps_position_order_among_ties():
    n_run = 500
    kp = np.full(n_run, 3, dtype=np.uint64)
    sp = np.tile(np.array([1.0, np.nan, -0.0, 0.0, 1.0]), n_run // 5)
    qs = np.arange(n_run, dtype=np.int64)  # position order
    packed._order_run(qs, kp, sp)
    ones = [q for q in range(n_run) if sp[q] == 1.0]
    zeros = [q for q in range(n_run) if sp[q] == 0.0]  # -0.0 and 0.0 tie: position order
    nans = [q for q in range(n_run) if math.isnan(sp[q])]
    assert qs.tolist() == ones + zeros + nans
