"""The multi-variant plan: every policy variant of a sweep over every item set of a table,
written as one row of ``[V, N]`` result matrices.

Shared across variants: classification (it depends only on tokens and pinned flags), each
distinct base scorer column (``ScoreContext``), the duplicate-content groups, and the first
pinned row of each set. Per variant: one kernel call per stage over all sets. A single policy
run (``Pipeline.dry_run``) is simply a sweep with one variant.

``run_sweep`` in phases, on the engine's one thread pool:

1. :func:`sweep_shared.prepare_sweep` - what every variant reads, as independent tasks; returns the frozen
   :class:`sweep_shared.SweepShared`.
2. :func:`run_variant` per variant (each worker with its own :class:`_Scratch`): scores, then
   ``_deduplicate``, ``_slice_greedy`` / ``_slice_sorted`` (with :class:`SlicerArgs`) and
   ``_place``, which ends in ``_record``: each writes only that variant's rows of the
   :class:`SweepRun`, so the result is the same for any thread count.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np

from cupel_np import _malloc
from cupel_np._cores import radix_sort_chosen
from cupel_np._jit import filled
from cupel_np.engine import groups as grp
from cupel_np.engine import place_stage, placers, stages
from cupel_np.engine.batch_kernels import duplicate_winners, included_positions
from cupel_np.engine.parallel import run_tasks, threads_for
from cupel_np.engine.reasons import R_COUNT_CAP_EXCEEDED, R_DEDUPLICATED, R_NEGATIVE_TOKENS
from cupel_np.engine.scorers import ScoreContext, check_scorer_columns
from cupel_np.engine.slicers import SlicerArgs, nested, row_order, slicer_args
from cupel_np.engine.slicers.codes import ERR_SCARCITY
from cupel_np.engine.slicers.greedy import GreedyScratch, fresh_ranks, greedy_segments
from cupel_np.engine.slicers.knapsack import KNAPSACK_ROW_CELLS
from cupel_np.engine.sweep_run import (
    Classified,
    SweepRun,
    _offsets,
    _one_variant,
    classify,
    effective_targets,
    segment_sums,
)
from cupel_np.engine.sweep_shared import SweepShared, prepare_sweep
from cupel_np.errors import (
    BudgetOverflowError,
    CupelError,
    PinnedExceedsBudgetError,
    ScarcityError,
    TableTooLargeError,
)
from cupel_np.model.grid import Variant
from cupel_np.model.items import ItemTable
from cupel_np.model.slicers import (
    CountConstrainedKnapsackSlice,
    CountQuotaSlice,
    GreedySlice,
)

#: Most memory one knapsack DP may allocate, in keep-table cells (bits): 2^32 cells = 512 MiB.
#: A DP of n candidates and capacity C needs (n + 256) x 64 x (C // 64 + 2) cells: its keep
#: table (one bit per candidate and capacity cell, rows padded to 64-bit words) plus its value
#: rows (charged at 256 bits per capacity cell); see ``slicers.knapsack.knapsack_fits``.
KNAPSACK_MAX_CELLS = 4_294_967_296


def _set_label(table: ItemTable, s: int) -> str:
    return "" if table.set_column is None else f"set {table.set_keys[s]!r}: "


# --- phase 1 (``sweep_shared.prepare_sweep``) is what every variant shares ---------------------


# --- phase 2: one variant -----------------------------------------------------------------------


#: the empty rows (and values) of a variant's sparse details when it has none: every variant
#: shares it, as ``sweep_run._NOT_RUN`` (empty: nothing to write; writable, so a kernel that
#: reads it needs no read-only specialization)
_NONE = np.zeros(0, dtype=np.int64)


def _no_clock() -> int:
    """The stage time of a run that keeps none (``run_variant(report=False)``)."""
    return 0


class _Scratch:
    """One worker's buffers, reused by every variant it runs. The truncation marks and the
    count-cap details are allocated on first use; ``empty`` stands for an output a variant
    does not write."""

    def __init__(self, n: int, m: int):
        self.n = n
        self.position = np.zeros(n, dtype=np.int32)
        self.lstpos = filled(n, -1, np.int32)
        self.scores = np.empty(m, dtype=np.float64)
        self.empty = np.zeros(0, dtype=np.int64)
        self._seq: np.ndarray | None = None
        self._details: tuple[np.ndarray, np.ndarray] | None = None
        self._unit_scores: np.ndarray | None = None
        self._greedy: GreedyScratch | None = None

    def seq(self) -> np.ndarray:
        """Per-row truncation marks (only truncation writes them), all -1."""
        if self._seq is None:
            self._seq = np.empty(self.n, dtype=np.int64)
        self._seq[:] = -1
        return self._seq

    def unit_scores(self) -> np.ndarray:
        """Per unit its score (groups only; at least as long as the scoreable rows)."""
        if self._unit_scores is None:
            self._unit_scores = np.empty(self.scores.shape[0], dtype=np.float64)
        return self._unit_scores

    def greedy(self) -> GreedyScratch:
        """The greedy slicer's buffers for a big set, kept for this worker's next variants
        (fresh arrays of a 1M-row set cost ~1,400 page faults, 1-3 ms, per variant)."""
        if self._greedy is None:
            self._greedy = GreedyScratch()
        return self._greedy

    def details(self) -> tuple[np.ndarray, np.ndarray]:
        """Per-row CountCapExceeded (cap, count) (count slicers only)."""
        if self._details is None:
            self._details = (np.zeros(self.n, dtype=np.int64), np.zeros(self.n, dtype=np.int64))
        return self._details


def _pinned_error(table: ItemTable, pinned_tokens: np.ndarray, avail: int, label: str, s: int) -> CupelError:
    return PinnedExceedsBudgetError(
        f"{label}{_set_label(table, s)}pinned items require {int(pinned_tokens[s])} tokens, "
        f"but only {avail} are available (max_tokens - output_reserve)"
    )


def _slice_error(
    table: ItemTable,
    err: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    entries: Sequence[Any],
    label: str,
    name: str,
    max_cells: int,
    s: int,
) -> CupelError:
    if err[s] == ERR_SCARCITY:
        e = entries[int(a[s])]
        return ScarcityError(
            f"{label}{_set_label(table, s)}{name}: kind {e.kind!r} requires "
            f"{e.require_count} items but only {int(b[s])} candidates are available"
        )
    n_c, cap = int(a[s]), int(b[s])
    need = (n_c + KNAPSACK_ROW_CELLS) * 64 * (cap // 64 + 2)
    return TableTooLargeError(
        f"{label}{_set_label(table, s)}knapsack table of {n_c} candidates x "
        f"{cap + 1} capacity cells needs {need} cells (keep bits plus value rows) "
        f"over the limit of {max_cells} cells; raise bucket_size or lower the target"
    )


def _overflow_error(table: ItemTable, merged: np.ndarray, target: int, label: str, s: int) -> CupelError:
    return BudgetOverflowError(
        f"{label}{_set_label(table, s)}selected items require {int(merged[s])} tokens, "
        f"exceeding the target budget of {target} (overflow_strategy = 'throw')"
    )


def _shortfalls(satisfied: np.ndarray, entries: Sequence[Any], s: int) -> list[tuple[str, int, int]]:
    return [
        (entries[e].kind, entries[e].require_count, int(satisfied[s, e]))
        for e in np.flatnonzero(satisfied[s] >= 0).tolist()
    ]


def _deduplicate(sh: SweepShared, out: SweepRun, v: int, sc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Deduplicate: the surviving scoreable positions and their set offsets. Records each
    loser's reason and winner."""
    cls = sh.classified
    if not (out.variants[v].policy.deduplication and sh.dup_members.size):
        out.dedup_winner[v] = (_NONE, _NONE)
        return sh.all_sc, cls.sc_offsets
    members = sh.dup_members
    winners = duplicate_winners(members, sh.dup_offsets, sc)
    lose = winners != members
    losers, lwin = members[lose], winners[lose]
    o = np.argsort(losers)
    losers, lwin = losers[o], lwin[o]
    keep = np.ones(cls.sc_rows.shape[0], dtype=np.bool_)
    keep[losers] = False
    surv = np.flatnonzero(keep)
    surv_off = _offsets(segment_sums(keep.astype(np.int64), cls.sc_offsets))
    lrows = cls.sc_rows[losers]
    out.reason[v][lrows] = R_DEDUPLICATED
    out.dedup_winner[v] = (lrows, cls.sc_rows[lwin])
    return surv, surv_off


#: candidates from which ``_slice_greedy`` keeps its buffers for the sweep's next variants
_SCRATCH_MIN = 32768


def _slice_greedy(
    sh: SweepShared,
    w: _Scratch,
    placer: str,
    sc: np.ndarray,
    surv: np.ndarray,
    surv_off: np.ndarray,
    targets: np.ndarray,
) -> place_stage.Candidates:
    """GreedySlice: no score sort (see slicers/greedy.py). A big set's fitting prefix stays
    unordered: the placer orders what it compares (chronological: the slicer orders the rows
    marked by the shared ``chrono_compared``)."""
    sc_rows = sh.classified.sc_rows
    every = surv.shape[0] == sc_rows.shape[0]  # no deduplication loser: the scoreable rows, in order
    cand_score = sc if every else sc[surv]
    cand_tok = sh.sc_tok if every else sh.sc_tok[surv]
    rank = fresh_ranks(surv_off, targets)
    rank_prefix = np.zeros(sh.table.n_sets, dtype=np.int64)
    compared = None
    if placer == "chronological" and sh.chrono_compared is not None:
        compared = sh.chrono_compared if every else sh.chrono_compared[surv]
    scratch = w.greedy() if surv.shape[0] >= _SCRATCH_MIN else None
    greedy_segments(
        cand_tok, cand_score, surv_off, targets, rank, prefix=rank_prefix, compared=compared, scratch=scratch
    )
    cand_rows = sc_rows if every else sc_rows[surv]
    return place_stage.Candidates(cand_rows, cand_score, surv_off, rank, rank_prefix, cand_tok, compared is not None)


def _slice_sorted(
    sh: SweepShared,
    out: SweepRun,
    v: int,
    args: SlicerArgs,
    sc: np.ndarray,
    surv: np.ndarray,
    surv_off: np.ndarray,
    targets: np.ndarray,
    label: str,
) -> place_stage.Candidates:
    """Every other slicer: sort the survivors by score (a quota or count quota slicer with an
    inner greedy needs no sort either, ``slicers.row_order``), slice, and record the
    variant's count-cap drops, shortfalls and per-set slicer errors."""
    sc_rows = sh.classified.sc_rows
    slicer = out.variants[v].policy.slicer
    unsorted = row_order(slicer)
    order = None if unsorted else stages.sort_segments(sc[surv], surv_off)
    cand = surv if order is None else surv[order]
    identity = unsorted and cand.shape[0] == sc_rows.shape[0]  # the scoreable rows, in order
    cand_score = sc if identity else sc[cand]
    tok = sh.sc_tok if identity else sh.sc_tok[cand]
    kind = sh.sc_kind if identity else sh.sc_kind[cand]
    compared = None  # chronological placement without truncation compares only these ranks
    ranges = None  # u-shaped placement: the greedy prefixes left unordered
    if nested.is_nested(slicer):  # a count quota around a slicer other than greedy
        rank, err, err_a, err_b, satisfied, cap_dropped = nested.slice_nested(
            slicer, sh.table, slicer_args, tok, cand_score, kind, surv_off, targets, sh.max_cells
        )
    elif unsorted:
        pol = out.variants[v].policy
        if pol.placer == "chronological" and pol.overflow_strategy != "truncate":
            if sh.chrono_compared is not None:
                compared = sh.chrono_compared if identity else sh.chrono_compared[cand]
        # the scoreable rows in order: a quota's kind groups and a count quota's kind positions
        # are every variant's (computed once)
        groups = args.shared_kind_groups(sh.memo, tok, kind, surv_off, compared) if identity else None
        positions = args.shared_kind_positions(sh.memo, kind) if identity else None
        (rank, err, err_a, err_b, satisfied, cap_dropped), ranges = args.run_rows(
            tok,
            cand_score,
            kind,
            surv_off,
            targets,
            sh.max_cells,
            compared=compared,
            unordered=pol.placer == "u_shaped",
            groups=groups,
            positions=positions,
        )
    else:
        rank, err, err_a, err_b, satisfied, cap_dropped = args.run(
            tok, cand_score, kind, surv_off, targets, sh.max_cells
        )
    out.cap_dropped[v] = cap_dropped
    entries = nested.count_entries(slicer)  # the slicer's own, then a nested slicer's
    if len(entries):
        out.shortfalls[v].add(np.flatnonzero((satisfied >= 0).any(axis=1)), partial(_shortfalls, satisfied, entries))
    if err.any():
        error = partial(_slice_error, sh.table, err, err_a, err_b, entries, label, slicer.name, sh.max_cells)
        out.errors[v].add(np.flatnonzero(err), error)
    if order is not None and out.variants[v].policy.placer == "chronological":
        # chronological placement reads each candidate's row: hand the candidates over in row
        # order (the ranks carry the slicer's order), so its reads are sequential, not random
        rank_in_rows = np.empty_like(rank)
        rank_in_rows[order] = rank
        every = surv.shape[0] == sc_rows.shape[0]
        return place_stage.Candidates(
            sc_rows if every else sc_rows[surv], sc if every else sc[surv], surv_off, rank_in_rows, None, None, False
        )
    return place_stage.Candidates(
        sc_rows if identity else sc_rows[cand],
        cand_score,
        surv_off,
        rank,
        None,
        None if ranges is None else tok,
        compared is not None,
        ranges,
    )


_OVERFLOW = {"throw": stages.OVERFLOW_THROW, "truncate": stages.OVERFLOW_TRUNCATE, "proceed": stages.OVERFLOW_PROCEED}


def _place(
    sh: SweepShared,
    out: SweepRun,
    v: int,
    args: SlicerArgs,
    cut: place_stage.Candidates,
    eff: np.ndarray,
    w: _Scratch,
    label: str,
    plan: grp.GroupPlan | None = None,
    report: bool = True,
) -> None:
    """Place: merge pinned and sliced rows, apply the overflow strategy, run the placer and
    write every row's reason into the variant's rows of the result matrices (``report``
    False: no report reads this run, so the per-set budget figures, truncation order and
    count-cap details are not kept, ``run_variant``). With ``plan``
    (groups) the candidates are units: their first members carry the units' tokens, and
    ``groups.expand`` gives every member its unit's outcome and place."""
    table, cls, var = sh.table, sh.classified, out.variants[v]
    pol, bud = var.policy, var.budget
    truncate = pol.overflow_strategy == "truncate"
    seq = w.seq() if truncate else w.empty
    count_caps = isinstance(pol.slicer, (CountQuotaSlice, CountConstrainedKnapsackSlice))
    # the kernel returns the CountCapExceeded rows with their caps and counts; groups give
    # every member its unit's, so they need them per row (then read back by reason)
    per_row = count_caps and plan is not None
    detail_a, detail_b = w.details() if per_row else (w.empty, w.empty)
    n_sets = table.n_sets
    chrono = pol.placer == "chronological"
    if n_sets == 1:  # one set (a service's selection): a one-element array costs a third of np.full
        targets, reserves = np.array((bud.target_tokens,), np.int64), np.array((bud.output_reserve,), np.int64)
    else:
        targets, reserves = np.full(n_sets, bud.target_tokens, np.int64), np.full(n_sets, bud.output_reserve, np.int64)
    # only chronological placement reads the timestamps: u-shaped gets empty stand-ins (an
    # ItemRows of new items would convert every item's timestamp to build the column)
    ts, ts_valid = (table.timestamp, table.timestamp_valid) if chrono else (w.empty, np.zeros(0, np.bool_))
    ts_order = sh.ts_order
    later = sh.memo.get("ts_order_later") if chrono and ts_order is None else None  # (``small._shared``)
    # (a set of at most SMALL_PLACE rows keeps at most that many: no count needed)
    if later is not None and table.n > max(placers.CHRONO_FILTER_MIN, stages.SMALL_PLACE):
        # one set's timestamp order, built only where the place kernels read it: a set keeping
        # more than SMALL_PLACE items and at least 1/32 of its timestamped rows (it keeps at
        # most its pinned rows and its selected candidates); else the kernel sorts its own.
        # The kernel would filter the order for more than CHRONO_FILTER_MIN kept items, but a
        # kept list of up to SMALL_PLACE sorts by insertion in less time than the order's
        # NumPy steps take (~4 us of a 50-item request keeping 40); sweeps share one order
        kept = cls.pin_rows.shape[0] + np.count_nonzero(cut.rank >= 0)
        if kept > max(placers.CHRONO_FILTER_MIN, stages.SMALL_PLACE) and kept * 32 >= np.count_nonzero(ts_valid):
            ts_order = later()
    err, err_a, sliced_tok, kept_tok, cc = place_stage.place_segments(
        place_stage.PlaceRows(table.tokens if plan is None else plan.row_tokens, table.kind_id, ts, ts_valid),
        place_stage.PlaceSegments(
            cls.pin_rows,
            cls.pin_offsets,
            eff,
            targets,
            reserves,
        ),
        cut,
        place_stage.PlacePolicy(
            _OVERFLOW[pol.overflow_strategy],
            stages.PLACER_CHRONOLOGICAL if chrono else stages.PLACER_U_SHAPED,
            count_caps,
            args.cap_of_kind,
        ),
        place_stage.PlaceOutputs(out.included[v], out.reason[v], detail_a, detail_b, w.position, seq),
        ts_order,
        w.lstpos,
    )
    if plan is not None:
        grp.expand(plan, table.offsets, out.included[v], out.reason[v], w.position, seq, detail_a, detail_b)
    if np.count_nonzero(err):
        out.errors[v].add(np.flatnonzero(err), partial(_overflow_error, table, err_a, bud.target_tokens, label))
    if not report:  # the placed positions only (``Pipeline.run`` reads those and the errors)
        _record(out, v, w.position, None, None)
        return
    out.avail_slice[v] = eff - sliced_tok
    out.avail_place[v] = bud.target_tokens - kept_tok
    _record(
        out,
        v,
        w.position,
        seq if truncate else None,
        (detail_a, detail_b) if per_row else None,
        cc if count_caps and not per_row else None,
    )


#: rows from which ``_record`` compacts the placed positions with NumPy's ``compress`` (below
#: it a masked gather: fewer microseconds on a few thousand rows), and from which with the
#: ``included_positions`` kernel (below it ``compress`` costs at most ~10 us more a variant,
#: and a sweep of fewer rows, such as the demo's, does not compile the kernel)
_COMPRESS_MIN = 4096
_COMPACT_MIN = 32768


def _record(
    out: SweepRun,
    v: int,
    position: np.ndarray,
    seq: np.ndarray | None,
    details: tuple[np.ndarray, np.ndarray] | None,
    cc: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> None:
    """Keep what the worker's scratch holds for variant ``v``: truncated rows in drop order,
    CountCapExceeded details (per row in ``details``, read at the rows of that reason; or
    ``cc``, the place stage's list of those rows, their caps and counts), the included rows'
    positions."""
    n = out.table.n
    reason = out.reason[v]
    if seq is not None:
        trunc = np.flatnonzero(seq >= 3 * n)
        reason[trunc] = stages.truncation_reasons(trunc, out.table.offsets, out.classified.pin_offsets)
        out.trunc_order[v] = (trunc, seq[trunc] - 3 * n)
    else:
        out.trunc_order[v] = (_NONE, _NONE)
    if details is not None:
        rows = np.flatnonzero(reason == R_COUNT_CAP_EXCEEDED)
        out.count_cap[v] = (rows, details[0][rows].copy(), details[1][rows].copy())
    elif cc is not None:  # in candidate order (row order per set when the candidates are)
        rows, cap, count = cc
        if rows.shape[0] > 1 and not (rows[1:] > rows[:-1]).all():
            o = np.argsort(rows)
            rows, cap, count = rows[o], cap[o], count[o]
        out.count_cap[v] = (rows.copy(), cap.copy(), count.copy())  # (views of bigger buffers)
    else:
        out.count_cap[v] = (_NONE, _NONE, _NONE)
    inc = out.included[v]
    # the kernel for big tables (NumPy's masked gather is slow there), NumPy's below (a kernel
    # call costs more than a few thousand rows); the same positions either way
    if n >= _COMPACT_MIN:
        out.placed_pos[v] = included_positions(position, inc)
    else:
        out.placed_pos[v] = position.compress(inc) if n >= _COMPRESS_MIN else position[inc]


def _unit_space(sh: SweepShared, plan: grp.GroupPlan) -> SweepShared:
    """``sh`` with the units as its scoreable positions (``groups.GroupPlan``): each unit one
    candidate at its first member's row, with the unit's tokens and its first member's kind."""
    return dataclasses.replace(
        sh,
        classified=dataclasses.replace(sh.classified, sc_rows=plan.u_rows, sc_offsets=plan.u_off),
        dup_members=plan.dup_members,
        dup_offsets=plan.dup_offsets,
        all_sc=plan.u_all,
        sc_tok=plan.u_tok,
        sc_kind=plan.u_kind,
        chrono_compared=None,
        memo={},  # computed of the rows, not of the units
    )


def run_variant(
    sh: SweepShared, out: SweepRun, v: int, w: _Scratch, args: SlicerArgs | None = None, report: bool = True
) -> None:
    """Variant ``v`` over every set: its scores, the pinned-budget check, then deduplicate,
    slice and place, each writing only variant ``v``'s rows of ``out``. ``args``: the
    slicer's ``slicer_args`` for this table when the caller keeps them (``small.PolicyPlan``).
    ``report``: a report reads this run; without one (``Pipeline.run``: the included rows, their
    placed positions and the errors) what only reports read is not written: the stage times
    (``stage_ns`` stay 0), the per-set budget figures, the truncation order and count-cap
    details (``_place``)."""
    now = time.time_ns if report else _no_clock
    stamp = out.stage_ns[v]
    stamp[0] = now()
    var = out.variants[v]
    label = f"variant {var.label!r}: " if var.label else ""
    errors = out.errors[v]
    sc = _one_variant(*sh.plan, v, out=w.scores)
    stamp[1] = now()
    avail = var.budget.max_tokens - var.budget.output_reserve
    pinned_tokens = sh.classified.pinned_tokens
    over = pinned_tokens > avail
    if np.count_nonzero(over):  # (one C call: ``.any()`` goes through NumPy's Python wrapper)
        errors.add(np.flatnonzero(over), partial(_pinned_error, sh.table, pinned_tokens, avail, label))
    if sh.neg_rows.shape[0]:
        out.reason[v][sh.neg_rows] = R_NEGATIVE_TOKENS
    plan = sh.group_plans[var.policy.groups] if var.policy.groups is not None else None
    if plan is not None:  # unit space: deduplicate among units of one, slice one row per unit
        out.group_plan[v] = plan
        sc = grp.unit_scores(plan, sc, w.unit_scores())
        sh = _unit_space(sh, plan)
    surv, surv_off = _deduplicate(sh, out, v, sc)
    stamp[2] = now()
    eff = effective_targets(var.budget, pinned_tokens)
    if report:
        out.effective_target[v] = eff
    run_targets = eff.copy()
    if errors:
        run_targets[errors.sets()] = 0
    if args is None:
        args = slicer_args(var.policy.slicer, sh.table)
    if isinstance(var.policy.slicer, GreedySlice):
        cut = _slice_greedy(sh, w, var.policy.placer, sc, surv, surv_off, run_targets)
    else:
        cut = _slice_sorted(sh, out, v, args, sc, surv, surv_off, run_targets, label)
    stamp[3] = now()
    _place(sh, out, v, args, cut, eff, w, label, plan, report)
    stamp[4] = now()


# --- the sweep ----------------------------------------------------------------------------------


class _Progress:
    """Reports finished variants to ``callback(done, total)`` (workers finish concurrently)."""

    def __init__(self, callback: Callable[[int, int], None] | None, total: int):
        self.callback = callback
        self.total = total
        self.done = 0
        self.lock = threading.Lock()

    def step(self) -> None:
        if self.callback is not None:
            with self.lock:
                self.done += 1
                self.callback(self.done, self.total)


def run_sweep(
    table: ItemTable,
    variants: Sequence[Variant],
    *,
    max_cells: int = KNAPSACK_MAX_CELLS,
    progress: Callable[[int, int], None] | None = None,
    classified: Classified | None = None,
    score_context: ScoreContext | None = None,
    threads: int | None = None,
) -> SweepRun:
    """Run every variant over every set. Per-(variant, set) failures are recorded in
    ``SweepRun.errors[v][s]``; the caller decides whether they raise. Variants run on
    ``threads`` workers (see ``parallel.resolve_threads``); the result does not depend on it.

    Two phases on the one pool: :func:`prepare_sweep` (what every variant shares), then
    :func:`run_variant` per variant, each worker with its own scratch buffers."""
    if score_context is None:  # a custom scorer's column must exist and be numeric: say so first
        check_scorer_columns(table, (var.policy.scorer for var in variants))
    threads = threads_for(threads, table.n * len(variants))
    radix_sort_chosen()  # (CUPEL_NP_SORT checked on every sweep, not only one with a big sort)
    if table.n >= _malloc.BIG_ROWS:  # its arrays reused, not faulted in afresh by history
        _malloc.tune_once()
    t_start = time.time_ns()
    cls = classified or classify(table)
    t_cls = time.time_ns()
    shared = prepare_sweep(table, variants, cls, score_context, threads, max_cells)
    out = SweepRun(table, variants, cls, shared.plan)
    if cls.sc_rows.shape[0] == table.n:  # the groups over the scoreable rows are the table's
        out.content_groups = (shared.dup_members, shared.dup_offsets)
    out.prep_ns[:] = (t_start, t_cls, time.time_ns())
    done = _Progress(progress, len(variants))

    def task(v: int, w: _Scratch) -> None:
        run_variant(shared, out, v, w)
        done.step()

    run_tasks(len(variants), threads, partial(_Scratch, table.n, cls.sc_rows.shape[0]), task)
    return out
