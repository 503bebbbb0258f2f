"""The sort stage's short-set kernel (``stages._sort_short_segments``, taken when every set
has at most ``SHORT_SEGMENT`` rows) against the spec's stable order and the general kernel."""

import sys
from pathlib import Path

import numpy as np

from cupel_np.engine import stages

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import naive  # noqa: E402

SPECIAL = np.array([np.nan, -np.nan, 0.0, -0.0, np.inf, -np.inf, 1.0, 0.5, -1.0, 2.0])


def _segments(rng, n_seg, longest):
    sizes = rng.integers(0, longest + 1, n_seg)
    return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)


def test_short_sets_take_the_short_kernel_in_spec_order():
    """Stable, score descending, NaN lowest, -0.0 tied with 0.0, NaN with NaN: each set's
    positions as the spec orders them, through ``sort_segments``'s short path."""
    rng = np.random.default_rng(7)
    off = _segments(rng, 60, stages.SHORT_SEGMENT)
    assert int(np.diff(off).max()) <= stages.SHORT_SEGMENT
    score = rng.choice(SPECIAL, int(off[-1]))
    got = stages.sort_segments(score, off)
    for s in range(off.shape[0] - 1):
        lo, hi = int(off[s]), int(off[s + 1])
        want = sorted(range(lo, hi), key=lambda i: naive._score_desc_key(float(score[i])) + (i,))
        assert list(got[lo:hi]) == want


def test_short_kernel_equals_the_general_kernel():
    """The same positions as ``_sort_small_segments`` (``stable_argsort`` of ``desc_bits``)
    on sets of 0 to ``SHORT_SEGMENT`` rows: special values, few distinct values, distinct."""
    rng = np.random.default_rng(11)
    for trial in range(300):
        off = _segments(rng, int(rng.integers(1, 30)), stages.SHORT_SEGMENT)
        n = int(off[-1])
        kind = trial % 3
        if kind == 0:
            score = rng.choice(SPECIAL, n)
        elif kind == 1:
            score = rng.integers(0, 4, n).astype(np.float64)
        else:
            score = rng.random(n)
        short = np.empty(n, np.int64)
        general = np.empty(n, np.int64)
        stages._sort_short_segments(score, off, short)
        stages._sort_small_segments(score, off, general)
        assert np.array_equal(short, general)
