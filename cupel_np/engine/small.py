"""One policy over one small item set (``Pipeline.run`` / ``dry_run`` on a service's request).

The batch engine (``batch.run_sweep``) is built for V variants over N rows of many sets: it
plans its shared phase as tasks for the thread pool, regroups every variant's scorer terms,
and computes per-set offsets with cumulative sums. On 50 items that bookkeeping costs more
than the kernels. :func:`run_one` runs the same stages on the calling thread:

* the policy's part of the plan (its distinct base scorers and their weighted terms, and
  whether it names a column scorer) is built once per policy (:class:`PolicyPlan`, kept by
  ``Pipeline``), not per call;
* the classify stage is the one-set form (no segment sums);
* the shared phase (base score columns, group units, duplicate groups, gathers) runs its
  steps directly, without the pool's task objects; the timestamp order of a set below
  ``BIG_GREEDY`` rows without groups is left to the place stage (``batch._place``), which
  builds it only when the set keeps enough items for the place kernels to read it;
* then ``batch.run_variant`` runs the variant: the same deduplicate, slice and place calls,
  on the same kernels, as a sweep. The result is the same ``SweepRun`` the batch engine
  writes, bit for bit (``tests/engine/test_small_path.py`` compares them).

No kernel of its own: nothing here adds compile time.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from cupel_np._cores import radix_sort_chosen
from cupel_np._jit import as_input
from cupel_np.engine import groups as grp
from cupel_np.engine import place_stage, placers
from cupel_np.engine.batch import KNAPSACK_MAX_CELLS, _Scratch, run_variant
from cupel_np.engine.placers import _mark_tied
from cupel_np.engine.runner import PolicyRun
from cupel_np.engine.scorers import ScoreContext, _evaluate, check_scorer_columns, kernels, ranks
from cupel_np.engine.slicers import SlicerArgs, greedy_inside, slicer_args
from cupel_np.engine.slicers.greedy import BIG_GREEDY
from cupel_np.engine.sweep_run import Classified, ScorePlan, SweepRun
from cupel_np.engine.sweep_shared import SweepShared, _duplicates, _score_terms, _scoreable
from cupel_np.model.budget import ContextBudget
from cupel_np.model.grid import Variant
from cupel_np.model.items import ItemTable
from cupel_np.model.policy import Policy
from cupel_np.model.scorers import (
    ColumnScorer,
    DecayScorer,
    FrequencyScorer,
    FunctionScorer,
    KindScorer,
    PriorityScorer,
    RecencyScorer,
    ReflexiveScorer,
    Scorer,
    iter_scorers,
)

__all__ = ["SMALL_SET", "PolicyPlan", "classify_one", "run_one", "run_sweep_one"]

#: ``Pipeline`` runs a set of up to this many items with :func:`run_one` whatever the thread
#: count (on 5,000 items it took less CPU and less wall time than the batch engine on two
#: threads, measured on the loaded 2-core development machine); a bigger set with more than
#: one thread goes to the batch engine, whose shared phase runs on the pool
SMALL_SET = 10_000
#: ``SweepShared.memo`` key of the timestamp order ``_shared`` leaves for ``batch._place`` to
#: build where placement reads it (a function of no argument; the key is spelled out there)
TS_ORDER_LATER = "ts_order_later"
#: the fewest items from which a chronological policy's RecencyScorer ranks the timestamps
#: by the order placement reads (``_shared``); below, a set may keep too few for placement
#: to read it, and a sort of the few timestamps costs less than building the order
RECENCY_FROM_ORDER_MIN = 256
_NO_POS = np.zeros(0, dtype=np.int64)
#: kind vocabularies a PolicyPlan keeps the slicer arrays of (then it starts again)
_ARGS_KEPT = 64
I64, B1 = np.int64, np.bool_
#: the ufunc ``np.clip`` ends in for a float array (``numpy._core.umath.clip``, private: where
#: a NumPy lacks it, ``np.clip`` itself, the same values through its Python wrapper)
_CLIP = getattr(getattr(getattr(np, "_core", None), "umath", None), "clip", np.clip)


@dataclass(frozen=True)
class PolicyPlan:
    """What one policy's runs share whatever the items: its distinct base scorers (a
    composite's children, or the scorer itself) with the variant's terms over them
    (``sweep_shared._score_terms`` for one variant), and whether a column scorer needs its column
    checked on each table."""

    policy: Policy
    children: tuple[Scorer, ...]
    term_off: np.ndarray
    term_col: np.ndarray
    term_w: np.ndarray
    has_columns: bool
    chrono: bool  #: chronological placement (the shared timestamp order is needed)
    greedy_chrono: bool  #: ... by a greedy slicer or a quota over greedy
    #: ``ItemRows.from_items``'s ``cold_min`` for this policy: 0 (new items of any number read
    #: column by column, their records made the second time) when neither its placer nor a
    #: scorer it names reads timestamps; else None (the default ``COLD_MIN``: converting a
    #: short list's timestamps costs about what making its records does, which the next
    #: sighting then reads). Speed only: the columns are the same either way
    cold_min: int | None
    #: the column of ``children`` that is a RecencyScorer, -1 for none (a chronological
    #: policy's big enough set ranks it from the timestamp order placement reads, ``_shared``)
    recency_col: int
    #: the slicer's kernel arrays (``slicers.slicer_args``) per kind vocabulary: they depend on
    #: the table only through it, and a service's requests mostly share one
    _args: dict = field(default_factory=dict, compare=False, repr=False)
    _luts: dict = field(default_factory=dict, compare=False, repr=False)  #: kind scorer weights (``kind_lut``)

    def kind_lut(self, scorer: KindScorer, table: ItemTable) -> np.ndarray:
        """``scorers._evaluate``'s weight per kind id of ``table`` (plus the 0.0 it appends)
        for one of the plan's kind scorers, built once per kind vocabulary."""
        key = (scorer, tuple(table.kind_vocab))
        lut = self._luts.get(key)
        if lut is None:
            if len(self._luts) >= _ARGS_KEPT:
                self._luts.clear()
            w = scorer.effective_weights()
            lut = self._luts[key] = np.array([w.get(k, 0.0) for k in table.kind_vocab] + [0.0], dtype=np.float64)
        return lut

    def slicer_args(self, table: ItemTable) -> SlicerArgs:
        """``slicers.slicer_args(policy.slicer, table)``, built once per kind vocabulary (the
        kernels only read these arrays)."""
        key = tuple(table.kind_vocab)
        args = self._args.get(key)
        if args is None:
            if len(self._args) >= _ARGS_KEPT:
                self._args.clear()
            args = self._args[key] = slicer_args(self.policy.slicer, table)
        return args

    @classmethod
    def of(cls, policy: Policy) -> PolicyPlan:
        """The plan of ``policy`` (build once, reuse for every run)."""
        children, term_off, term_col, term_w = _score_terms([Variant("", policy, ContextBudget(0, 0))])
        chrono = policy.placer == "chronological"
        timed = chrono or any(isinstance(s, _READS_TIMESTAMPS) for s in iter_scorers(policy.scorer))
        return cls(
            policy,
            tuple(children),
            term_off,
            term_col,
            term_w,
            any(isinstance(s, ColumnScorer) for s in iter_scorers(policy.scorer)),
            chrono,
            chrono and greedy_inside(policy.slicer),
            None if timed else 0,
            next((j for j, s in enumerate(children) if isinstance(s, RecencyScorer)), -1),
        )


#: scorers that read timestamps, or may (a function or column scorer reads what it likes)
_READS_TIMESTAMPS = (RecencyScorer, DecayScorer, FunctionScorer, ColumnScorer)


def _two(a: int, b: int) -> np.ndarray:
    out = np.empty(2, dtype=np.int64)
    out[0] = a
    out[1] = b
    return out


def classify_one(table: ItemTable) -> Classified:
    """``sweep_run.classify`` for a table of one set (the same arrays, without segment sums)."""
    tokens = table.tokens
    n = tokens.shape[0]
    neg = tokens < 0
    first = np.array((-1,), dtype=np.int64)
    pinned_tokens = np.zeros(1, dtype=np.int64)
    # (count_nonzero: one C call, where ``.any()`` goes through NumPy's Python wrapper)
    if not (np.count_nonzero(table.pinned) or np.count_nonzero(neg)):  # the usual request: every item scoreable
        return Classified(
            neg,
            np.zeros(n, dtype=np.bool_),
            np.arange(n),
            _two(0, n),
            np.zeros(0, np.int64),
            _two(0, 0),
            pinned_tokens,
            first,
        )
    pin = table.pinned & ~neg
    pin_rows = pin.nonzero()[0]
    sc_rows = (~(neg | pin)).nonzero()[0]
    n_pin = pin_rows.shape[0]
    if n_pin:
        first[0] = pin_rows[0]
    pinned_tokens[0] = tokens[pin_rows].sum(dtype=np.int64)
    return Classified(neg, pin, sc_rows, _two(0, sc_rows.shape[0]), pin_rows, _two(0, n_pin), pinned_tokens, first)


#: the fewest timestamped rows ``_timestamp_order`` may sort by packed keys
TS_PACKED_MIN = 512


def _timestamp_order(table: ItemTable) -> place_stage.TimestampOrder | None:
    """``placers.timestamp_order`` for one set: its timestamped rows sorted by timestamp, None
    for a set of at most ``placers.CHRONO_FILTER_MIN`` items (placement never reads it there).
    Equal timestamps in row order either way. Timestamps mostly come in order (a session's
    messages), which NumPy's stable sort (timsort) passes in near-linear time: 5,000 in order
    ~4 us, with one in ten swapped with its neighbour ~15. In no order (retrieved documents'
    dates) timsort's branches mispredict (5,000: ~210 us), and a set of ``TS_PACKED_MIN`` rows
    or more whose timestamps descend at more than one step in eight takes the sweep's sort of
    packed (timestamp, row) keys instead (~77 us: ``placers.sorted_by_timestamp``)."""
    ts, valid = table.timestamp, table.timestamp_valid
    if valid.shape[0] <= placers.CHRONO_FILTER_MIN:
        return None
    rows = valid.nonzero()[0]
    tv = ts[rows]
    m = rows.shape[0]
    off = _two(0, m)
    if m >= TS_PACKED_MIN and np.count_nonzero(tv[1:] < tv[:-1]) > m >> 3:
        order, ts_sorted = placers.sorted_by_timestamp(rows, tv, off)
        return place_stage.TimestampOrder(order, ts_sorted, off)
    order = rows[tv.argsort(kind="stable")]
    return place_stage.TimestampOrder(order, ts[order], off)


def _timestamps(
    table: ItemTable, sc_rows: np.ndarray, greedy_chrono: bool
) -> tuple[place_stage.TimestampOrder | None, np.ndarray | None]:
    """``sweep_shared._timestamps`` (``placers.timestamp_order`` and ``chrono_compared``) for one
    set: the same sort, the same tie-marking kernel, each only where it is read (the order
    for a set of more than ``placers.CHRONO_FILTER_MIN`` items, the compared rows for one of
    ``BIG_GREEDY`` or more)."""
    from cupel_np.engine.slicers import greedy

    ts_order = _timestamp_order(table)
    compared = None
    n = table.n
    if ts_order is not None and greedy_chrono and n >= greedy.BIG_GREEDY:
        valid = table.timestamp_valid
        flag = np.zeros(n, dtype=np.bool_)
        _mark_tied(ts_order.order, ts_order.sorted, 0, ts_order.order.shape[0], flag)
        compared = flag | ~valid if sc_rows.shape[0] == n else flag[sc_rows] | ~valid[sc_rows]
    return ts_order, compared


def _score(child: Scorer, table: ItemTable, ctx: ScoreContext, plan: PolicyPlan, every: bool) -> np.ndarray:
    """``scorers._evaluate(child, ctx)``; a recency or priority scorer over every row reads
    the table's columns without gathering them, a kind scorer's weight per kind id is the
    plan's (``PolicyPlan.kind_lut``). The same kernels on the same values."""
    if isinstance(child, KindScorer):
        rows = ctx.rows
        if rows.shape[0] == 0:
            return np.zeros(0)
        return plan.kind_lut(child, table)[table.kind_id if every else table.kind_id[rows]]
    if every and isinstance(child, RecencyScorer):
        return ranks.rank_scores(
            as_input(table.timestamp, I64), as_input(table.timestamp_valid, B1), as_input(ctx.offsets, I64)
        )
    if every and isinstance(child, PriorityScorer):
        return ranks.rank_scores(
            as_input(table.priority, I64), as_input(table.priority_valid, B1), as_input(ctx.offsets, I64)
        )
    if every and isinstance(child, ReflexiveScorer):  # ``_evaluate``'s clip and mask, without the gathers
        hint = table.hint
        ok = table.hint_valid & np.isfinite(hint)  # before clipping, which makes an infinity finite
        # (new arrays: the table's column stays as it is; the clip ufunc ``np.clip`` calls for
        # a float column, without its Python wrapper, and 0.0 where not ok: ~1.5 of 3.7 us)
        return np.where(ok, _CLIP(hint, 0.0, 1.0), 0.0)
    if every and isinstance(child, FrequencyScorer):  # the table's own tag CSR (``ScoreContext._tag_csr``)
        seg = as_input(ctx.offsets, I64)
        small = int(seg[1] - seg[0]) <= kernels.SMALL_SET
        kernel = kernels.frequency_scores_small if small else kernels.frequency_scores
        tags = getattr(table, "frequency_tags", None)  # ItemRows: ids kept on the items (same scores)
        off, ids, n_ids = tags if tags is not None else (table.tag_offsets, table.tag_fold_id, table.n_fold_tags)
        return kernel(as_input(off, I64), as_input(ids, I64), int(n_ids), seg)
    return _evaluate(child, ctx)


def _shared(table: ItemTable, plan: PolicyPlan, cls: Classified, max_cells: int) -> SweepShared:
    """``sweep_shared.prepare_sweep`` for one variant on the calling thread: the same steps, in the
    same order, each writing its own output."""
    sc_rows, sc_off = cls.sc_rows, cls.sc_offsets
    ctx = ScoreContext(table, sc_rows, sc_off)
    ts_order, compared, memo = None, None, {}
    every = sc_rows.shape[0] == table.n  # the scoreable rows (ascending) are every row
    recency = plan.recency_col if every and table.n >= RECENCY_FROM_ORDER_MIN else -1
    if plan.chrono and table.n < BIG_GREEDY and plan.policy.groups is None:
        if recency >= 0:
            # the order now: the recency ranks by one walk of it (instead of a sort of their
            # own), and placement reads it (a set this big keeps more than CHRONO_FILTER_MIN)
            ts_order = _timestamp_order(table)
        else:
            # no compared rows to build (a set below BIG_GREEDY), and the order is read only
            # when the set keeps more than SMALL_PLACE items: ``batch._place`` builds it then
            # (a 50-item request builds none: the kernel sorts what it keeps)
            memo[TS_ORDER_LATER] = partial(_timestamp_order, table)
    elif plan.chrono:
        ts_order, compared = _timestamps(table, sc_rows, plan.greedy_chrono)
    base = np.empty((sc_rows.shape[0], len(plan.children)), dtype=np.float64)
    for j, child in enumerate(plan.children):  # distinct: no need for the context's cache and locks
        if j == recency and ts_order is not None:  # (``sweep_shared._timestamps_and_recency``)
            base[:, j] = ranks.rank_scores_from_order(
                ts_order.order, ts_order.sorted, ts_order.offsets, _NO_POS, True, sc_rows.shape[0]
            )
        else:
            base[:, j] = _score(child, table, ctx, plan, every)
    col = plan.policy.groups
    group = grp.group_plan(table, col, sc_rows, sc_off) if col is not None else None
    if getattr(table, "contents_distinct", False):  # what duplicate_groups finds: no group
        dup_members, dup_offsets = np.zeros(0, dtype=np.int64), np.zeros(1, dtype=np.int64)
    else:
        dup_members, dup_offsets = _duplicates(table, sc_rows, sc_off)
    plans: dict[str, grp.GroupPlan] = {}
    if col is not None and group is not None:
        plans[col] = grp.with_duplicates(group, dup_members, dup_offsets)
    return SweepShared(
        table=table,
        classified=cls,
        plan=ScorePlan(base, plan.term_off, plan.term_col, plan.term_w),
        max_cells=max_cells,
        dup_members=dup_members,
        dup_offsets=dup_offsets,
        neg_rows=cls.negative.nonzero()[0],
        all_sc=np.arange(sc_rows.shape[0]),
        sc_tok=_scoreable(table.tokens, sc_rows),
        sc_kind=_scoreable(table.kind_id, sc_rows),
        ts_order=ts_order,
        chrono_compared=compared,
        group_plans=plans,
        memo=memo,
    )


def run_sweep_one(
    table: ItemTable,
    budget: ContextBudget,
    plan: PolicyPlan,
    *,
    max_cells: int = KNAPSACK_MAX_CELLS,
    clock: bool = True,
) -> SweepRun:
    """``run_one``'s SweepRun. ``clock``: a report reads it: stamp the shared phase's and the
    stages' times (``prep_ns``, ``stage_ns``, read by a report's stage events and spans) and
    keep what only a report reads (``batch.run_variant``'s ``report``); without it
    (``Pipeline.run``: the included rows in placed order and the errors) the times stay 0."""
    if table.n_sets != 1:
        raise ValueError(f"run_one runs one item set, the table holds {table.n_sets}")
    radix_sort_chosen()  # (CUPEL_NP_SORT checked on every selection, as ``batch.run_sweep`` does)
    if plan.has_columns:
        check_scorer_columns(table, (plan.policy.scorer,))
    t_start = time.time_ns() if clock else 0
    cls = classify_one(table)
    t_cls = time.time_ns() if clock else 0
    shared = _shared(table, plan, cls, max_cells)
    out = SweepRun(table, [Variant("", plan.policy, budget)], cls, shared.plan)
    if clock:
        out.prep_ns[:] = (t_start, t_cls, time.time_ns())
    run_variant(shared, out, 0, _Scratch(table.n, cls.sc_rows.shape[0]), plan.slicer_args(table), report=clock)
    return out


def run_one(
    table: ItemTable, budget: ContextBudget, plan: PolicyPlan, *, max_cells: int = KNAPSACK_MAX_CELLS
) -> PolicyRun:
    """``runner.run_policy(table, budget, plan.policy)`` for a table of one item set, on the
    calling thread: the same result (per-set failures recorded, not raised)."""
    return PolicyRun(run_sweep_one(table, budget, plan, max_cells=max_cells), 0)
