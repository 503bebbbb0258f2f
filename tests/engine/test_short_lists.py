"""The place kernel's short lists (``stages.SMALL_PLACE`` kept items or fewer, sorted in the
kernel by insertion, or filtered from the shared timestamp order) against the paths that place
longer ones (``placers._place_order``, the bitmaps), forced by ``SMALL_PLACE = 0``: the same
positions, inclusions and reasons. Scores with NaN, -0.0, infinities and ties; coarse
timestamps, untimestamped and pinned rows; both placers, with and without the shared order."""

import numpy as np
import pytest

from cupel_np.engine import place_stage, stages
from cupel_np.engine.placers import timestamp_order

SCORES = np.array([np.nan, -0.0, 0.0, np.inf, -np.inf, 0.5, 0.5, 1.0, 2.0, -1.0])


def _case(seed):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(0, 70, int(rng.integers(1, 25)))
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    n = int(offsets[-1])
    ts = rng.integers(0, 4, n).astype(np.int64)
    valid = rng.random(n) < 0.75
    pinned = rng.random(n) < 0.06
    pin_rows, pin_off, cand_rows, cand_off, rank = [], [0], [], [0], []
    for s in range(sizes.shape[0]):
        rows = np.arange(offsets[s], offsets[s + 1])
        cands = rng.permutation(rows[~pinned[rows]])
        sel = rng.random(cands.shape[0]) < rng.uniform(0.1, 1.0)
        rk = np.full(cands.shape[0], -1, dtype=np.int64)
        rk[sel] = rng.permutation(int(sel.sum()))
        pin_rows.append(rows[pinned[rows]])
        pin_off.append(pin_off[-1] + int(pinned[rows].sum()))
        cand_rows.append(cands)
        cand_off.append(cand_off[-1] + cands.shape[0])
        rank.append(rk)
    cat = lambda xs: np.concatenate(xs).astype(np.int64)  # noqa: E731
    cr = cat(cand_rows)
    score = SCORES[rng.integers(0, SCORES.shape[0], cr.shape[0])]
    return n, offsets, ts, valid, cat(pin_rows), np.array(pin_off, np.int64), cr, score, np.array(cand_off), cat(rank)


def _place(case, placer, shared):
    n, offsets, ts, valid, pin_rows, pin_off, cand_rows, score, cand_off, rank = case
    n_seg = offsets.shape[0] - 1
    big = np.full(n_seg, 2**60, dtype=np.int64)
    out = place_stage.PlaceOutputs(
        np.zeros(n, np.bool_), np.zeros(n, np.int8), np.zeros(0, np.int64), np.zeros(0, np.int64),
        np.full(n, -1, np.int64), np.zeros(0, np.int64),
    )  # fmt: skip
    tokens = (np.arange(n) % 5).astype(np.int64)  # zero-token rows among them
    place_stage.place_segments(
        place_stage.PlaceRows(tokens, np.zeros(n, np.int64), ts, valid),
        place_stage.PlaceSegments(pin_rows, pin_off, big, big, np.zeros(n_seg, np.int64)),
        place_stage.Candidates(cand_rows, score, cand_off.astype(np.int64), rank.copy()),
        place_stage.PlacePolicy(stages.OVERFLOW_PROCEED, placer, False, np.full(1, -1, np.int64)),
        out,
        place_stage.TimestampOrder(*timestamp_order(ts, valid, offsets)) if shared else None,
    )
    return out.included, out.reason, np.where(out.included, out.position, -1)


@pytest.mark.parametrize(
    "placer, shared",
    [(stages.PLACER_U_SHAPED, False), (stages.PLACER_CHRONOLOGICAL, False), (stages.PLACER_CHRONOLOGICAL, True)],
)
def test_short_lists_place_as_the_long_paths(monkeypatch, placer, shared):
    for seed in range(10):
        case = _case(seed)
        short = _place(case, placer, shared)
        with monkeypatch.context() as m:
            m.setattr(stages, "SMALL_PLACE", 0)  # every list to _place_order or the bitmaps
            long = _place(case, placer, shared)
        assert int(short[0].sum()) > 0, seed
        for got, want in zip(short, long, strict=True):
            assert np.array_equal(got, want), seed
