"""Chronological placement on bitmaps (``engine/chrono_bits.py``, the fast path of
``stages._place_segments``) against an order computed here: timestamped kept items by
(timestamp, input position), then the untimestamped ones by input position. Many segments
of one table, coarse timestamps (long runs of equal ones), pinned rows, candidates in row
order or not; the shared timestamp order's per-row codes given, or computed by the stage."""

import numpy as np
import pytest

from cupel_np.engine import place_stage, placers, stages
from cupel_np.engine.placers import timestamp_order, timestamp_ranks


def _case(seed, coarse, shuffled):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(0, 120, int(rng.integers(1, 30)))
    sizes[rng.integers(0, sizes.shape[0])] = 700  # one segment with runs longer than 32
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    n = int(offsets[-1])
    ts = rng.integers(0, 6 if coarse else 10**12, n).astype(np.int64)
    valid = rng.random(n) < 0.7
    pinned = rng.random(n) < 0.05
    return (n, offsets, ts, valid, *segment_lists(rng, offsets, pinned, shuffled=shuffled))


def segment_lists(rng, offsets, pinned, *, sel_frac=None, shuffled=False, permute_pins=True):
    """Per segment its pinned rows (in any input order with ``permute_pins``) and its other rows
    as candidates (shuffled or in row order), a ``sel_frac`` of them selected (a random
    fraction in 0.2-1.0 by default) and ranked at random: ``(pin_rows, pin_off), (cand_rows,
    cand_off, rank)``."""
    pin_rows, pin_off, cand_rows, cand_off, rank = [], [0], [], [0], []
    for s in range(offsets.shape[0] - 1):
        rows = np.arange(offsets[s], offsets[s + 1])
        pins = rows[pinned[rows]]
        if permute_pins:
            pins = rng.permutation(pins)
        cands = rows[~pinned[rows]]
        if shuffled:
            cands = rng.permutation(cands)
        sel = rng.random(cands.shape[0]) < (rng.uniform(0.2, 1.0) if sel_frac is None else sel_frac)
        rk = np.full(cands.shape[0], -1, dtype=np.int64)
        rk[sel] = rng.permutation(int(sel.sum()))
        pin_rows.append(pins)
        pin_off.append(pin_off[-1] + pins.shape[0])
        cand_rows.append(cands)
        cand_off.append(cand_off[-1] + cands.shape[0])
        rank.append(rk)
    cat = lambda xs: np.concatenate(xs).astype(np.int64)  # noqa: E731
    return (cat(pin_rows), np.array(pin_off, dtype=np.int64)), (
        cat(cand_rows),
        np.array(cand_off, dtype=np.int64),
        cat(rank),
    )


def _expected(n, offsets, ts, valid, pins, cands):
    """Per row, its place: per segment, the kept items by (timestamped first, timestamp,
    input position), input position = pinned index, or the pinned count + rank."""
    (pin_rows, pin_off), (cand_rows, cand_off, rank) = pins, cands
    want = np.full(n, -1, dtype=np.int64)
    for s in range(offsets.shape[0] - 1):
        pr = pin_rows[pin_off[s] : pin_off[s + 1]]
        cr, rk = cand_rows[cand_off[s] : cand_off[s + 1]], rank[cand_off[s] : cand_off[s + 1]]
        rows = np.concatenate([pr, cr[rk >= 0]])
        inpos = np.concatenate([np.arange(pr.shape[0]), pr.shape[0] + rk[rk >= 0]])
        order = np.lexsort((inpos, np.where(valid[rows], ts[rows], 0), ~valid[rows]))
        want[rows[order]] = np.arange(rows.shape[0])
    return want


def _place(n, offsets, ts, valid, pins, cands, ts_order):
    (pin_rows, pin_off), (cand_rows, cand_off, rank) = pins, cands
    n_seg = offsets.shape[0] - 1
    big = np.full(n_seg, 2**60, dtype=np.int64)
    out = place_stage.PlaceOutputs(
        np.zeros(n, np.bool_), np.zeros(n, np.int8), np.zeros(0, np.int64), np.zeros(0, np.int64),
        np.full(n, -1, np.int64), np.zeros(0, np.int64),
    )  # fmt: skip
    place_stage.place_segments(
        place_stage.PlaceRows(np.ones(n, np.int64), np.zeros(n, np.int64), ts, valid),
        place_stage.PlaceSegments(pin_rows, pin_off, big, big, np.zeros(n_seg, np.int64)),
        place_stage.Candidates(cand_rows, np.ones(cand_rows.shape[0]), cand_off, rank),
        place_stage.PlacePolicy(stages.OVERFLOW_PROCEED, stages.PLACER_CHRONOLOGICAL, False, np.full(1, -1, np.int64)),
        out,
        ts_order,
    )
    return np.where(out.included, out.position, -1)


@pytest.mark.parametrize("coarse", [True, False])
@pytest.mark.parametrize("shuffled", [False, True])
def test_bitmap_placement_matches_the_order(monkeypatch, coarse, shuffled):
    # the shared order wherever it may go (on bitmaps past SMALL_PLACE kept items)
    monkeypatch.setattr(placers, "CHRONO_FILTER_MIN", 0)
    for seed in range(12):
        n, offsets, ts, valid, pins, cands = _case(seed, coarse, shuffled)
        want = _expected(n, offsets, ts, valid, pins, cands)
        shared = timestamp_order(ts, valid, offsets)
        assert len(shared) == 6
        got = _place(n, offsets, ts, valid, pins, cands, place_stage.TimestampOrder(*shared))
        assert np.array_equal(got, want), seed
        # without the per-row codes the stage computes them; without the order every segment
        # sorts its own kept items
        lazy = _place(n, offsets, ts, valid, pins, cands, place_stage.TimestampOrder(*shared[:3]))
        assert np.array_equal(lazy, want), seed
        assert np.array_equal(_place(n, offsets, ts, valid, pins, cands, None), want), seed


def test_timestamp_ranks_codes_and_runs():
    rng = np.random.default_rng(4)
    for _ in range(40):
        n = int(rng.integers(0, 300))
        offsets = np.concatenate([[0], np.sort(rng.integers(0, n + 1, int(rng.integers(0, 8)))), [n]])
        offsets = offsets.astype(np.int64)
        ts = rng.integers(0, 5, n).astype(np.int64)
        valid = rng.random(n) < 0.7
        order, ts_sorted, off, code, runs, run_off = timestamp_order(ts, valid, offsets)
        assert np.array_equal(code[~valid], np.full(int((~valid).sum()), -1))
        assert np.array_equal(code[order] >> 1, np.arange(order.shape[0]))
        spans = runs.reshape(-1, 2)
        tied = np.zeros(order.shape[0], dtype=np.bool_)
        for s in range(offsets.shape[0] - 1):
            a, b = off[s], off[s + 1]
            seg_ts = ts_sorted[a:b]
            starts = np.flatnonzero(np.concatenate([[True], seg_ts[1:] != seg_ts[:-1]])) + a
            ends = np.concatenate([starts[1:], [b]])
            long = ends - starts > 1
            want = np.stack([starts[long], ends[long]], axis=1) if b > a else np.zeros((0, 2), np.int64)
            assert np.array_equal(spans[run_off[s] : run_off[s + 1]], want)
            for lo, hi in want:
                tied[lo:hi] = True
        assert np.array_equal(code[order] & 1, tied.astype(np.int64))
        assert np.array_equal(timestamp_ranks(order, ts_sorted, off, n)[0], code)


@pytest.mark.parametrize("spread", ["small", "wide", "full"])
def test_timestamp_order_sorts_each_segment(spread):
    # keys that pack (segment, timestamp, index), (segment, timestamp) only, or neither (the
    # full int64 range: timestamps replaced by their ranks)
    rng = np.random.default_rng(7)
    for _ in range(30):
        n = int(rng.integers(0, 400))
        offsets = np.concatenate([[0], np.sort(rng.integers(0, n + 1, int(rng.integers(0, 6)))), [n]])
        offsets = offsets.astype(np.int64)
        if spread == "small":
            ts = rng.integers(-3, 3, n)
        elif spread == "wide":
            ts = rng.integers(-(2**61), 2**61, n)
        else:
            ts = rng.choice(np.array([-(2**63), -1, 0, 2**63 - 1], dtype=np.int64), n)
        ts = ts.astype(np.int64)
        valid = rng.random(n) < 0.8
        order, ts_sorted, off, *_ = timestamp_order(ts, valid, offsets)
        assert order.dtype == np.int64 and ts_sorted.dtype == np.int64
        assert np.array_equal(ts_sorted, ts[order])
        rows = np.flatnonzero(valid)
        assert np.array_equal(off, np.searchsorted(rows, offsets))
        for s in range(offsets.shape[0] - 1):
            seg = order[off[s] : off[s + 1]]
            assert np.array_equal(np.sort(seg), rows[(rows >= offsets[s]) & (rows < offsets[s + 1])])
            assert (ts[seg][1:] >= ts[seg][:-1]).all()


@pytest.mark.parametrize("overflow", [stages.OVERFLOW_THROW, stages.OVERFLOW_PROCEED])
def test_a_set_that_throws_keeps_nothing(monkeypatch, overflow):
    # long segments go through the bitmap passes, which mark rows included before the
    # overflow is known: a set that throws must end with none included and its selected
    # rows' reasons as they were; the others placed as without the throwing sets
    monkeypatch.setattr(placers, "CHRONO_FILTER_MIN", 0)
    for seed in range(6):
        n, offsets, ts, valid, (pin_rows, pin_off), (cand_rows, cand_off, rank) = _case(seed, False, False)
        n_seg = offsets.shape[0] - 1
        targets = np.where(np.arange(n_seg) % 2 == 0, 0, 2**60).astype(np.int64)
        shared = place_stage.TimestampOrder(*timestamp_order(ts, valid, offsets))
        out = place_stage.PlaceOutputs(
            np.zeros(n, np.bool_), np.full(n, -1, np.int8), np.zeros(0, np.int64), np.zeros(0, np.int64),
            np.full(n, -1, np.int64), np.zeros(0, np.int64),
        )  # fmt: skip
        err, *_ = place_stage.place_segments(
            place_stage.PlaceRows(np.ones(n, np.int64), np.zeros(n, np.int64), ts, valid),
            place_stage.PlaceSegments(pin_rows, pin_off, targets, targets, np.zeros(n_seg, np.int64)),
            place_stage.Candidates(cand_rows, np.ones(cand_rows.shape[0]), cand_off, rank),
            place_stage.PlacePolicy(overflow, stages.PLACER_CHRONOLOGICAL, False, np.full(1, -1, np.int64)),
            out,
            shared,
        )
        want = _expected(n, offsets, ts, valid, (pin_rows, pin_off), (cand_rows, cand_off, rank))
        seg = np.searchsorted(offsets, np.arange(n), side="right") - 1
        merged = np.array(
            [pin_off[s + 1] - pin_off[s] + int((rank[cand_off[s] : cand_off[s + 1]] >= 0).sum()) for s in range(n_seg)]
        )
        throws = (targets < merged) & (overflow == stages.OVERFLOW_THROW)
        assert np.array_equal(err != 0, throws), seed
        lost = throws[seg]
        assert not out.included[lost].any(), seed
        selected = np.zeros(n, np.bool_)
        selected[cand_rows[rank >= 0]] = True
        assert (out.reason[lost & selected] == -1).all(), seed
        assert np.array_equal(np.where(out.included, out.position, -1)[~lost], want[~lost]), seed
