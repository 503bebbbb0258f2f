"""The big greedy path's ordering of the compared prefix candidates by packed (density key high
bits, index) sort keys, and its reused buffers: the ranks must equal the exact order's whatever
the split between key bits and index bits (``PACK_BITS_MIN`` forces runs of shared high bits,
up to every candidate in one run) and whatever a reused ``GreedyScratch`` held before."""

import numpy as np
import pytest

from cupel_np.engine.slicers import greedy, packed

# many exact ties: equal densities with equal and unequal scores, zeros of both signs, NaN,
# infinities, negative scores
TIE_SCORES = np.array([0.0, -0.0, 0.5, 0.25, 1.0, 2.0, -1.0, np.nan, np.inf, -np.inf, 1e-300, 3.0, 0.75])


def _case(seed, n):
    rng = np.random.default_rng(seed)
    tok = rng.choice(np.array([0, 1, 2, 3, 4, 6, 8, 12], dtype=np.int64), n)
    score = np.where(rng.random(n) < 0.7, rng.choice(TIE_SCORES, n), rng.random(n))
    marked = rng.random(n) < 0.4
    return tok, score.astype(np.float64), marked


def _exact(tok, score, target):
    n = tok.shape[0]
    rank = np.full(n, -1, dtype=np.int64)
    greedy.greedy_segments(tok, score, np.array([0, n]), np.array([target]), rank, big=10**9)
    return rank


@pytest.fixture
def pack_bits_min():
    saved = packed.PACK_BITS_MIN
    yield
    packed.PACK_BITS_MIN = saved


@pytest.mark.parametrize("bits_min", [1, 12, 40, 63])
def test_marked_prefix_ranks_match_exact_order(pack_bits_min, bits_min):
    packed.PACK_BITS_MIN = bits_min
    scratch = greedy.GreedyScratch()
    for seed, n in ((1, 3000), (2, 700), (3, 3000), (4, 50)):  # reused buffers, larger and smaller
        tok, score, marked = _case(seed, n)
        total = int(tok.sum())
        for target in (1, total // 50, total // 4, total - 1, total + 5):
            exact = _exact(tok, score, target)
            got = np.full(n, 777, dtype=np.int64)  # the big path writes every rank
            pre = np.zeros(1, dtype=np.int64)
            greedy.greedy_segments(
                tok,
                score,
                np.array([0, n]),
                np.array([target]),
                got,
                big=1,
                min_chunk=4,
                prefix=pre,
                compared=marked,
                scratch=scratch,
            )
            n_pre = int(pre[0])
            assert ((got >= 0) == (exact >= 0)).all()
            in_pre = np.flatnonzero((got >= 0) & (got < n_pre))
            assert sorted(exact[in_pre]) == list(range(n_pre))  # the prefix of the exact order
            unmarked = in_pre[~marked[in_pre]]
            assert list(got[unmarked]) == list(range(unmarked.size))  # index order first
            m_pre = in_pre[marked[in_pre]]
            m_pre = m_pre[np.argsort(exact[m_pre])]
            assert list(got[m_pre]) == list(range(unmarked.size, n_pre))  # then the exact order
            rest = np.flatnonzero(got >= n_pre)
            assert (got[rest] == exact[rest]).all()


def test_scratch_hands_out_reused_buffers():
    s = greedy.GreedyScratch()
    a = s.get("x", 100, np.int64)
    b = s.get("x", 60, np.int64)
    assert b.shape == (60,) and np.shares_memory(a, b) and b.flags.c_contiguous
    c = s.get("x", 200, np.int64)
    assert c.shape == (200,) and not np.shares_memory(a, c)
    assert s.get("x", 10, np.uint64).dtype == np.uint64


def test_pack_bits_hold_every_position(pack_bits_min):
    packed.PACK_BITS_MIN = 1
    assert [packed.pack_bits(n) for n in (1, 2, 3, 4, 5, 1 << 20, (1 << 20) + 1)] == [1, 1, 2, 2, 3, 20, 21]


def test_rank_offsets_wide_when_int32_cannot_hold_them(monkeypatch):
    # int32 offsets while they fit, int64 past; the kernel gives the same ranks with either
    assert packed.offsets_dtype(2**31 - 1) == np.int32 and packed.offsets_dtype(2**31) == np.int64
    tok, score, marked = _case(5, 2000)
    target = int(tok.sum()) // 3
    ranks = []
    for dtype in (np.int32, np.int64):
        monkeypatch.setattr(greedy, "offsets_dtype", lambda k, dtype=dtype: dtype)
        got = np.full(tok.shape[0], 777, dtype=np.int64)
        pre = np.zeros(1, dtype=np.int64)
        greedy.greedy_segments(
            tok, score, np.array([0, tok.shape[0]]), np.array([target]), got, big=1, prefix=pre, compared=marked
        )
        ranks.append(got)
    assert (ranks[0] == ranks[1]).all() and (ranks[0] >= int(pre[0])).any()
