"""The chronological bitmap passes (``place_fast._select_pass`` / ``_chrono_pass``) on long
segments most of whose candidates are selected: the ZeroToken reason written after the pass
from ``_select_pass``'s list, the candidates' rows read or taken as consecutive, and the
tied rows' input positions stored for none, few (a branch) or many tied rows (a store per
candidate). Every placement and reason is compared with the same stage without the shared
timestamp order (each segment sorts its own kept items: no bitmaps), and the places with an
order computed here."""

import numpy as np
import pytest

from cupel_np.engine import place_stage, placers, stages
from cupel_np.engine.placers import timestamp_order
from cupel_np.engine.reasons import R_BUDGET_EXCEEDED, R_SCORED, R_ZERO_TOKEN
from tests.engine.test_chrono_bits import _expected as _expected_places  # the same plain sort
from tests.engine.test_chrono_bits import segment_lists


def _case(seed, ties, pinned_frac):
    """Segments of 300-900 rows (long: placed on bitmaps), ~80% of the candidates selected,
    ~10% of the rows of zero tokens; ``ties``: "none" (distinct timestamps), "few" (a handful
    of equal pairs per segment) or "many" (six distinct timestamps)."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(300, 900, int(rng.integers(1, 4)))
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    n = int(offsets[-1])
    if ties == "many":
        ts = rng.integers(0, 6, n)
    else:
        ts = rng.permutation(n * 10)[:n]  # distinct
        if ties == "few":
            for s in range(sizes.shape[0]):
                lo, hi = int(offsets[s]), int(offsets[s + 1])
                a = rng.integers(lo, hi, 3)
                b = rng.integers(lo, hi, 3)
                ts[a] = ts[b]
    ts = ts.astype(np.int64)
    valid = rng.random(n) < 0.7
    tokens = np.where(rng.random(n) < 0.1, 0, rng.integers(1, 50, n)).astype(np.int64)
    pinned = rng.random(n) < pinned_frac
    pins, cands = segment_lists(rng, offsets, pinned, sel_frac=0.8, permute_pins=False)
    return n, offsets, ts, valid, tokens, pins, cands


def _place(n, offsets, ts, valid, tokens, pins, cands, ts_order):
    (pin_rows, pin_off), (cand_rows, cand_off, rank) = pins, cands
    n_seg = offsets.shape[0] - 1
    big = np.full(n_seg, 2**60, dtype=np.int64)
    out = place_stage.PlaceOutputs(
        np.zeros(n, np.bool_), np.full(n, -1, np.int8), np.zeros(0, np.int64), np.zeros(0, np.int64),
        np.full(n, -1, np.int64), np.zeros(0, np.int64),
    )  # fmt: skip
    place_stage.place_segments(
        place_stage.PlaceRows(tokens, np.zeros(n, np.int64), ts, valid),
        place_stage.PlaceSegments(pin_rows, pin_off, big, big, np.zeros(n_seg, np.int64)),
        place_stage.Candidates(cand_rows, np.ones(cand_rows.shape[0]), cand_off, rank),
        place_stage.PlacePolicy(stages.OVERFLOW_PROCEED, stages.PLACER_CHRONOLOGICAL, False, np.full(1, -1, np.int64)),
        out,
        ts_order,
    )
    return out


@pytest.mark.parametrize("ties", ["none", "few", "many"])
@pytest.mark.parametrize("pinned_frac", [0.0, 0.05])
def test_bitmap_pass_places_and_reasons(monkeypatch, ties, pinned_frac):
    # no pinned rows: every segment's candidates are consecutive rows (not read again);
    # pinned rows interleaved: they are not
    monkeypatch.setattr(placers, "CHRONO_FILTER_MIN", 0)
    for seed in range(6):
        n, offsets, ts, valid, tokens, pins, cands = _case(seed, ties, pinned_frac)
        shared = place_stage.TimestampOrder(*timestamp_order(ts, valid, offsets))
        if ties == "few":
            assert shared.runs is not None and shared.runs.shape[0] > 0, seed  # some tied rows
        fast = _place(n, offsets, ts, valid, tokens, pins, cands, shared)
        slow = _place(n, offsets, ts, valid, tokens, pins, cands, None)
        assert np.array_equal(fast.included, slow.included), seed
        assert np.array_equal(fast.reason, slow.reason), seed
        inc = fast.included
        assert np.array_equal(fast.position[inc], slow.position[inc]), seed
        want = _expected_places(n, offsets, ts, valid, pins, cands)
        assert np.array_equal(np.where(inc, fast.position, -1), want), seed
        cand_rows, _, rank = cands
        sel = cand_rows[rank >= 0]
        assert inc[sel].all(), seed
        want_reason = np.where(tokens[sel] == 0, R_ZERO_TOKEN, R_SCORED)
        assert np.array_equal(fast.reason[sel], want_reason), seed
        assert (tokens[sel] == 0).any(), seed  # the ZeroToken rows were exercised
        assert (fast.reason[cand_rows[rank < 0]] == R_BUDGET_EXCEEDED).all(), seed
