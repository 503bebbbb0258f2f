"""``rank_scores`` of sets of at most ``RANK_SHORT`` rows (``_rank_short``: an insertion sort
per set) against the general kernel ``_rank_sorted``, bit for bit."""

import numpy as np

from cupel_np.engine.scorers import ranks as rk

I64_MIN, I64_MAX = np.iinfo(np.int64).min, np.iinfo(np.int64).max


def test_short_sets_rank_as_the_general_kernel():
    rng = np.random.default_rng(5)
    for trial in range(400):
        n_seg = int(rng.integers(1, 20))
        sizes = rng.integers(0, rk.RANK_SHORT + 1, n_seg)
        if trial % 5 == 0:
            sizes[:] = rng.integers(0, 3, n_seg)  # empty sets and lone items
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        n = int(offsets[-1])
        kind = trial % 3
        if kind == 0:
            values = rng.integers(0, 5, n)  # priorities: the counting path of the general kernel
        elif kind == 1:
            values = rng.integers(-(10**15), 10**15, n)  # timestamps: its sort path
        else:
            values = rng.choice(np.array([I64_MIN, I64_MAX, 0, -1, 1]), n)
        values = np.ascontiguousarray(values, dtype=np.int64)
        valid = rng.random(n) < (0.3 if trial % 2 else 0.95)
        got = rk.rank_scores(values, valid, offsets)
        want = rk._rank_sorted(values, valid, offsets, False)
        assert got.tobytes() == want.tobytes()
