"""The place stage's Python side: the argument groups of ``stages._place_segments`` (what it
reads of the table, the segments, the slicer's candidates and the policy, and what it writes),
the ordering it needs first (what the placer compares of each unordered greedy prefix,
:func:`_finish_ranks`; u-shaped's score order) and :func:`place_segments`, which calls the
kernel and, only where a run needs them, the kernels for equal timestamps and truncation.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from cupel_np._jit import filled
from cupel_np.engine import placers, stages
from cupel_np.engine.chrono_bits import _chrono_ties
from cupel_np.engine.placers import (
    PLACER_CHRONOLOGICAL,
    PLACER_U_SHAPED,
    _place_truncated,
    timestamp_ranks,
)
from cupel_np.engine.slicers.greedy import complete_ranks, order_positions
from cupel_np.engine.stages import OVERFLOW_TRUNCATE, _place_segments
from cupel_np.engine.u_order import _sliced_score_order


def _finish_ranks(
    tokens,
    pin_rows,
    pin_offsets,
    cand_score,
    cand_tok,
    cand_offsets,
    rank,
    ranges,
    budget_targets,
    overflow,
    placer,
    prefix_compared,
):
    """Order what the placer compares of each unordered range of ranks (``ranges``: ``(r_off,
    r_lo, r_hi)``, see ``Candidates.prefix_ranges``): nothing for u-shaped (its score order
    repairs ties itself) nor for chronological when the slicer already ordered the compared
    items (``prefix_compared``), every rank otherwise or when the segment truncates. Returns
    the ranges u-shaped still needs (same form), None when none is left."""

    def complete(tok, score, rank, r_lo, r_hi):
        # exact ranks inside one segment's ranges (the arrays are the segment's)
        if r_lo.shape[0] == 1 and r_lo[0] == 0:  # one greedy prefix
            complete_ranks(tok, score, rank, int(r_hi[0]))
            return
        pos = np.flatnonzero(rank >= 0)
        r = rank[pos]
        g = np.searchsorted(r_lo, r, side="right") - 1  # the range starting at or before each rank
        inside = (g >= 0) & (r < r_hi[np.maximum(g, 0)])
        pos, g = pos[inside], g[inside]
        for i in range(r_lo.shape[0]):
            part = pos[g == i]
            if part.shape[0] > 1:
                rank[order_positions(tok, score, part)] = r_lo[i] + np.arange(part.shape[0])

    r_off, r_lo, r_hi = ranges
    left = np.zeros(r_lo.shape[0], dtype=np.bool_)
    for s in np.flatnonzero(np.diff(r_off) > 0):
        lo, hi = int(cand_offsets[s]), int(cand_offsets[s + 1])
        a, b = int(r_off[s]), int(r_off[s + 1])
        tok, sc, rk = cand_tok[lo:hi], cand_score[lo:hi], rank[lo:hi]
        if overflow == OVERFLOW_TRUNCATE:  # the kernel's `truncating`, decided the same way
            pinned = int(tokens[pin_rows[pin_offsets[s] : pin_offsets[s + 1]]].sum())
            if pinned + int(tok[rk >= 0].sum()) > budget_targets[s]:
                complete(tok, sc, rk, r_lo[a:b], r_hi[a:b])
                continue
        if placer == PLACER_U_SHAPED:
            left[a:b] = True
        elif not (placer == PLACER_CHRONOLOGICAL and prefix_compared):
            complete(tok, sc, rk, r_lo[a:b], r_hi[a:b])
    if not left.any():
        return None
    kept = np.concatenate(([0], np.cumsum(left)))
    return kept[r_off], r_lo[left], r_hi[left]


class PlaceRows(NamedTuple):
    """The table's columns the place stage reads, per row in grouped row order."""

    tokens: np.ndarray  #: int64 tokens
    kind: np.ndarray  #: int64 kind id
    ts: np.ndarray  #: int64 timestamp (the table's unit)
    ts_valid: np.ndarray  #: bool: the row has a timestamp


class PlaceSegments(NamedTuple):
    """Per segment (item set): its pinned rows and its targets."""

    pin_rows: np.ndarray  #: the non-negative pinned rows, grouped by segment (input order)
    pin_offsets: np.ndarray  #: int64 [n_seg + 1] into ``pin_rows``
    eff_targets: np.ndarray  #: the spec's effective target (what the slicer was given)
    budget_targets: np.ndarray  #: the budget's target_tokens (the overflow target)
    budget_reserves: np.ndarray  #: the budget's output_reserve (PinnedOverride: ``target - reserve``)


class Candidates(NamedTuple):
    """The slice stage's output, per candidate: what the place stage reads."""

    cand_rows: np.ndarray  #: table row per candidate (per set, in the slicer's input order)
    cand_score: np.ndarray  #: score per candidate
    cand_offsets: np.ndarray  #: the sets' offsets into the candidates, int64 [n_seg + 1]
    rank: np.ndarray  #: per candidate: its place in the slicer's output, -1 when not selected
    #: greedy (``greedy_segments(prefix=...)``): per set, the length of its unordered prefix:
    #: the first ``rank_prefix[s]`` ranks are in index order, and only what the placer compares
    #: of them is ordered here (``_finish_ranks``)
    rank_prefix: np.ndarray | None = None
    cand_tok: np.ndarray | None = None  #: tokens per candidate (gathered from the rows when None)
    #: the slicer already ordered what chronological placement compares
    #: (``greedy_segments(compared=placers.chrono_compared(...))``)
    prefix_compared: bool = False
    #: in place of ``rank_prefix``, for a slicer whose output holds several greedy prefixes
    #: (a quota: one per kind; a count quota: after the committed items): ``(r_off, r_lo,
    #: r_hi)``, set ``s``'s unordered ranges of ranks ``[r_lo[i], r_hi[i])`` for ``i`` in
    #: ``r_off[s]:r_off[s + 1]`` (ascending, disjoint; each ranked in index order, its true order
    #: (density, score, index) as greedy's); ordered here as ``rank_prefix`` is
    prefix_ranges: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None


class PlacePolicy(NamedTuple):
    """What the variant's policy tells the place stage."""

    overflow: int  #: ``OVERFLOW_THROW`` / ``OVERFLOW_TRUNCATE`` / ``OVERFLOW_PROCEED``
    placer: int  #: ``PLACER_CHRONOLOGICAL`` / ``PLACER_U_SHAPED``
    count_caps: bool  #: the slicer has count caps (CountCapExceeded reasons are written)
    cap_of_kind: np.ndarray  #: int64 per kind id, its count cap (-1 none); read only with ``count_caps``


class TimestampOrder(NamedTuple):
    """Every segment's timestamped rows sorted by timestamp, shared by every variant
    (``placers.timestamp_order``), and what placement reads of it (``placers.timestamp_ranks``;
    ``place_segments`` computes them when None)."""

    order: np.ndarray  #: the rows, segment by segment (``order[offsets[s]:offsets[s+1]]``)
    sorted: np.ndarray  #: their timestamps in that order
    offsets: np.ndarray  #: int64 [n_seg + 1] into ``order``
    code: np.ndarray | None = None  #: per row ``2 * (index in order) + tied``, -1 untimestamped
    runs: np.ndarray | None = None  #: the runs of equal timestamps, spans of ``order``
    run_offsets: np.ndarray | None = None  #: int64 [n_seg + 1] into the runs


class PlaceOutputs(NamedTuple):
    """The arrays the place stage writes, per row (only the rows of the merged segments)."""

    included: np.ndarray  #: bool: the row is in the context (False on entry: only True is written)
    reason: np.ndarray  #: int8 reason code (``engine.reasons``)
    detail_a: np.ndarray  #: a CountCapExceeded row's cap (with ``count_caps``; may be empty otherwise)
    detail_b: np.ndarray  #: and its count
    position: np.ndarray  #: the placed position of an included row (other rows': undefined)
    #: written only for the rows truncation drops (see ``_place_segments``; may be empty when
    #: the overflow strategy is not truncate)
    seq: np.ndarray


def _order_for_placer(tokens, pin_rows, pin_offsets, cand: Candidates, budget_targets, policy: PlacePolicy):
    """Order what the placer compares of each unordered greedy prefix (``_finish_ranks``) and,
    for u-shaped placement, the selected items' score order (``_sliced_score_order``):
    ``(u_at, u_pin)``, empty for chronological placement."""
    cand_tok, placer = cand.cand_tok, policy.placer
    ranges = cand.prefix_ranges
    # greedy: its prefix [0, rank_prefix[s]) where longer than 1 (``np.count_nonzero``, one C
    # call: ``.any()`` goes through NumPy's Python wrapper)
    prefix = cand.rank_prefix
    has = prefix > 1 if ranges is None and prefix is not None else None
    if prefix is not None and has is not None and np.count_nonzero(has):
        r_off = np.concatenate(([0], np.cumsum(has))).astype(np.int64)
        ranges = r_off, np.zeros(int(r_off[-1]), dtype=np.int64), prefix[has].astype(np.int64)
    if ranges is not None and ranges[1].shape[0] == 0:
        ranges = None
    if cand_tok is None and ranges is not None:
        cand_tok = tokens[cand.cand_rows]
    left = None
    if ranges is not None:
        left = _finish_ranks(
            tokens,
            pin_rows,
            pin_offsets,
            cand.cand_score,
            cand_tok,
            cand.cand_offsets,
            cand.rank,
            ranges,
            budget_targets,
            policy.overflow,
            placer,
            cand.prefix_compared,
        )
    if placer == PLACER_U_SHAPED:
        return _sliced_score_order(
            cand.rank, cand.cand_score, cand_tok, cand.cand_offsets, pin_offsets, placers.U_SORT_MIN, left
        )
    # (int32: u-shaped's ``u_at`` type, so the place kernel has one specialization for both)
    return np.zeros(0, np.int32), filled(pin_offsets.shape[0] - 1, -1, np.int64)


_EMPTY = np.zeros(0, np.int64)


def _has_long(pin_offsets, cand_offsets) -> bool:
    """Whether a segment may keep more than ``stages.SMALL_PLACE`` items (pinned and
    candidates): only then may ``_place_segments`` place one on bitmaps, from ``u_at`` or with
    ``placers._place_order`` (it decides per segment); else it sorts every kept list itself,
    and its specialization for None in their arguments (and in ``cap_of_kind`` without count
    caps) compiles none of them."""
    if int(pin_offsets[-1]) + int(cand_offsets[-1]) <= stages.SMALL_PLACE:  # every segment together
        return False  # (a single selection's set: no NumPy calls)
    sizes = np.diff(pin_offsets) + np.diff(cand_offsets)
    return bool(sizes.shape[0] > 0 and int(sizes.max()) > stages.SMALL_PLACE)


def _timestamp_args(ts_order: TimestampOrder | None, bitmaps: bool, ts_dtype, n_off: int, n_rows: int):
    """``_place_segments``'s shared-order arguments: ``ts_order``'s arrays (empty ones, every
    offset 0, without it), with its per-row codes and runs only when a segment may be placed on
    bitmaps (``bitmaps``; computed here when not given), else None and empty (the kernel's
    specialization without the bitmap path)."""
    if ts_order is None:  # every segment sorts its own kept items
        off = np.zeros(n_off, np.int64)
        return _EMPTY, np.zeros(0, dtype=ts_dtype), off, None, _EMPTY, off
    ts_rows, ts_sorted, ts_offsets, ts_code, ts_runs, ts_run_off = ts_order
    if not bitmaps:
        return ts_rows, ts_sorted, ts_offsets, None, _EMPTY, ts_offsets
    if ts_code is None or ts_runs is None or ts_run_off is None:
        ts_code, ts_runs, ts_run_off = timestamp_ranks(ts_rows, ts_sorted, ts_offsets, n_rows)
    return ts_rows, ts_sorted, ts_offsets, ts_code, ts_runs, ts_run_off


def place_segments(
    rows: PlaceRows,
    segments: PlaceSegments,
    cand: Candidates,
    policy: PlacePolicy,
    out: PlaceOutputs,
    ts_order: TimestampOrder | None = None,
    lstpos: np.ndarray | None = None,
):
    """Place stage over every segment (see ``_place_segments``, whose argument groups these
    are): merge, overflow, placer and every row's reason, written into ``out``. ``ts_order``
    (from ``placers.timestamp_order``): without it every segment sorts its own kept items.
    ``lstpos``: per-row scratch, -1 on entry and exit (built here when not given).

    Returns per segment ``(err, err_a, sliced_tokens, kept_tokens)``, then the
    CountCapExceeded rows, their caps and counts ``(cc_rows, cc_cap, cc_count)`` (see
    ``_place_segments``)."""
    n_rows = rows.tokens.shape[0]
    pin_rows, pin_offsets = segments.pin_rows, segments.pin_offsets
    u_at, u_pin = _order_for_placer(rows.tokens, pin_rows, pin_offsets, cand, segments.budget_targets, policy)
    # (a segment placed from ``u_at`` is longer, but for U_SORT_MIN set below SMALL_PLACE)
    # (``np.count_nonzero``, one C call: ``.any()`` goes through NumPy's Python wrapper)
    long = _has_long(pin_offsets, cand.cand_offsets) or (
        policy.placer == PLACER_U_SHAPED and int(np.count_nonzero(u_pin >= 0)) > 0
    )
    use_ts_order = ts_order is not None
    ts_rows, ts_sorted, ts_offsets, ts_code, ts_runs, ts_run_off = _timestamp_args(
        ts_order, long and policy.placer == PLACER_CHRONOLOGICAL, rows.ts.dtype, pin_offsets.shape[0], n_rows
    )
    if lstpos is None:
        lstpos = filled(n_rows, -1, np.int32)  # (the sweep's scratch type: one specialization)
    err, err_a, sliced, kept, trunc, ties, key_at, cc_rows, cc_cap, cc_count = _place_segments(
        rows.tokens,
        rows.kind,
        rows.ts,
        rows.ts_valid,
        pin_rows,
        pin_offsets,
        cand.cand_rows,
        cand.cand_score,
        cand.cand_offsets,
        cand.rank,
        segments.eff_targets,
        segments.budget_targets,
        segments.budget_reserves,
        policy.overflow,
        policy.placer,
        policy.count_caps,
        policy.cap_of_kind if policy.count_caps or long else None,
        out.included,
        out.reason,
        out.detail_a,
        out.detail_b,
        out.position,
        ts_rows,
        ts_sorted,
        ts_offsets,
        ts_code,
        ts_runs,
        ts_run_off,
        lstpos,
        placers.CHRONO_FILTER_MIN,
        stages.SMALL_PLACE,
        placers.RADIX_MIN if long else None,
        u_at if long else None,
        u_pin,
    )
    if np.count_nonzero(ties):  # a kernel of its own: a run without equal timestamps never compiles it
        _chrono_ties(np.flatnonzero(ties), ts_rows, ts_runs, ts_run_off, out.included, key_at, out.position)
    if np.count_nonzero(trunc):  # a kernel of its own: a run that never truncates never compiles it
        _place_truncated(
            np.flatnonzero(trunc),
            n_rows,
            rows.tokens,
            rows.ts,
            rows.ts_valid,
            pin_rows,
            pin_offsets,
            cand.cand_rows,
            cand.cand_score,
            cand.cand_offsets,
            cand.rank,
            segments.budget_targets,
            policy.placer,
            out.included,
            out.reason,
            out.position,
            out.seq,
            use_ts_order,
            ts_rows,
            ts_sorted,
            ts_offsets,
            lstpos,
            placers.CHRONO_FILTER_MIN,
            placers.RADIX_MIN,
            kept,
        )
    return err, err_a, sliced, kept, (cc_rows, cc_cap, cc_count)
