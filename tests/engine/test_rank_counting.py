"""``rank_scores`` below ``RANK_RADIX_MIN``: a segment whose valid values span at most twice
their number (priorities) is ranked by counting, any other by sorting; both give the strict
rank formula (valid peers with a smaller value over ``count - 1``), bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from cupel_np.engine.scorers import ranks as rk

I64_MIN, I64_MAX = np.iinfo(np.int64).min, np.iinfo(np.int64).max


def _strict(values: np.ndarray, valid: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """The spec's double loop per segment."""
    out = np.zeros(values.shape[0])
    for s in range(offsets.shape[0] - 1):
        rows = [int(r) for r in range(offsets[s], offsets[s + 1]) if valid[r]]
        if len(rows) == 1:
            out[rows[0]] = 1.0
        for r in rows if len(rows) > 1 else ():
            below = sum(1 for p in rows if values[p] < values[r])
            out[r] = np.float64(below) / np.float64(len(rows) - 1)
    return out


def _span_ratio(values: np.ndarray, valid: np.ndarray, lo: int, hi: int) -> float:
    v = values[lo:hi][valid[lo:hi]]
    return (int(v.max()) - int(v.min())) / len(v) if len(v) > 1 else 0.0


@pytest.mark.parametrize("seed", range(6))
def test_small_and_wide_spans_match_the_strict_formula(seed):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(0, 90, 12)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    n = int(offsets[-1])
    values = np.empty(n, dtype=np.int64)
    kinds = []
    for s in range(sizes.shape[0]):
        lo, hi, m = int(offsets[s]), int(offsets[s + 1]), int(sizes[s])
        kind = s % 4
        kinds.append(kind)
        if kind == 0:  # priorities: a few values, many ties (counted)
            values[lo:hi] = rng.integers(-3, 4, m)
        elif kind == 1:  # near the bottom of int64, span up to 2 x the count (counted)
            values[lo:hi] = I64_MIN + rng.integers(0, 2 * m + 1, m)
        elif kind == 2:  # the two extremes (sorted: the span is the whole range)
            values[lo:hi] = np.where(rng.random(m) < 0.5, I64_MIN, I64_MAX)
        else:  # timestamps (sorted)
            values[lo:hi] = rng.integers(1_700_000_000_000_000, 1_800_000_000_000_000, m)
    valid = rng.random(n) < 0.8
    got = rk.rank_scores(values, valid, offsets)
    assert got.tobytes() == _strict(values, valid, offsets).tobytes()
    # both paths ran: some segment counted (span <= 2 x count), some sorted
    ratios = [_span_ratio(values, valid, int(offsets[s]), int(offsets[s + 1])) for s in range(sizes.shape[0])]
    counted = [k for k, r, m in zip(kinds, ratios, sizes) if m > 1 and r <= 2]
    assert counted and any(r > 2 for r in ratios)


def test_span_exactly_twice_the_count_and_one_more():
    """The boundary: a span of 2 x count is counted, 2 x count + 1 sorted; equal answers."""
    for extra in (0, 1):
        values = np.array([5, 5, 5 + 2 * 4 + extra, 6], dtype=np.int64)
        valid = np.ones(4, dtype=np.bool_)
        offsets = np.array([0, 4], dtype=np.int64)
        got = rk.rank_scores(values, valid, offsets)
        assert got.tolist() == [0.0, 0.0, 1.0, 2 / 3]


def test_lone_and_null_values():
    values = np.array([7, 3, 3, 9, 1], dtype=np.int64)
    valid = np.array([False, True, False, False, False])
    offsets = np.array([0, 2, 5], dtype=np.int64)
    assert rk.rank_scores(values, valid, offsets).tolist() == [0.0, 1.0, 0.0, 0.0, 0.0]
