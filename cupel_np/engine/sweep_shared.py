"""Phase 1 of a sweep (:func:`prepare_sweep`): what every policy variant shares and only reads,
computed once before the variants run (``engine.batch`` runs them).

Classification is the caller's (``sweep_run.classify``); here, as independent tasks on the
engine's one pool: each distinct base scorer column (``ScoreContext``), the shared timestamp
order (and a RecencyScorer column read from it), the group plans a variant names, the
duplicate-content groups and the gathers every variant reads, frozen in :class:`SweepShared`.
Each task writes only its own output, so the result does not depend on the thread count.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from cupel_np.engine import groups as grp
from cupel_np.engine import place_stage, placers, stages
from cupel_np.engine.batch_kernels import duplicate_groups
from cupel_np.engine.parallel import run_tasks
from cupel_np.engine.scorers import ScoreContext
from cupel_np.engine.scorers.ranks import RANK_RADIX_MIN, rank_scores_from_order
from cupel_np.engine.slicers import greedy_inside
from cupel_np.engine.sweep_run import Classified, ScorePlan
from cupel_np.model.grid import Variant
from cupel_np.model.items import ItemTable
from cupel_np.model.scorers import CompositeScorer, RecencyScorer, Scorer


def _score_terms(variants: Sequence[Variant]) -> tuple[list[Scorer], np.ndarray, np.ndarray, np.ndarray]:
    """Distinct base scorers (in order of first use) and each variant's (column, normalised
    weight) terms."""
    cols: dict[Scorer, int] = {}
    term_off = [0]
    term_col: list[int] = []
    term_w: list[float] = []
    for var in variants:
        sc = var.policy.scorer
        pairs = (
            list(zip((s for s, _ in sc.entries), sc.normalized_weights()))
            if isinstance(sc, CompositeScorer)
            else [(sc, 1.0)]
        )
        for child, w in pairs:
            if child not in cols:
                cols[child] = len(cols)
            term_col.append(cols[child])
            term_w.append(w)
        term_off.append(len(term_col))
    return (
        list(cols),
        np.array(term_off, dtype=np.int64),
        np.array(term_col, dtype=np.int64),
        np.array(term_w, dtype=np.float64),
    )


def _scoreable(col: np.ndarray, sc_rows: np.ndarray) -> np.ndarray:
    """``col[sc_rows]``; the column itself (no copy) when every row is scoreable and it is
    already a writable C-contiguous int64 array (the kernels' argument type)."""
    if sc_rows.shape[0] == col.shape[0] and col.dtype == np.int64 and col.flags.c_contiguous and col.flags.writeable:
        return col
    return col[sc_rows]


#: scoreable rows from which the shared base scores are column-major (``variant_scores`` then
#: reads each weighted column contiguously, vectorized: ~1.2 ms less per variant of 1M rows).
#: Below it they stay row-major, the layout the single-selection driver (``engine.small``)
#: builds: the sets both drivers run on compile one ``variant_scores`` specialization.
COLUMN_MAJOR_MIN = 65536


def _no_state() -> None:
    return None


@dataclass(frozen=True)
class SweepShared:
    """What a sweep computes once, before its variants, and every variant only reads."""

    table: ItemTable
    classified: Classified
    plan: ScorePlan
    max_cells: int  #: the knapsack DP size limit (``KNAPSACK_MAX_CELLS``)
    dup_members: np.ndarray  #: scoreable positions grouped by content (``duplicate_groups``)
    dup_offsets: np.ndarray  #: the groups' offsets into ``dup_members``
    neg_rows: np.ndarray  #: rows with negative tokens
    all_sc: np.ndarray  #: every scoreable position (the candidates when nothing is deduplicated)
    sc_tok: np.ndarray  #: int64 tokens per scoreable position
    sc_kind: np.ndarray  #: int64 kind id per scoreable position
    #: ``placers.timestamp_order`` (None when no variant places chronologically)
    ts_order: place_stage.TimestampOrder | None
    #: per scoreable position, ``placers.chrono_compared`` (when a chronological variant is greedy
    #: or a quota over greedy)
    chrono_compared: np.ndarray | None
    #: the units of every group column a variant names (``groups.group_plan``)
    group_plans: dict[str, grp.GroupPlan] = field(default_factory=dict)
    #: what one variant computes of the candidates that the sweep's later variants over the same
    #: candidates reuse (``SlicerArgs.shared_kind_groups``); each key written once
    memo: dict = field(default_factory=dict, compare=False, repr=False)


def _timestamps(
    table: ItemTable, sc_rows: np.ndarray, greedy_chrono: bool, need_order: bool = False
) -> tuple[place_stage.TimestampOrder | None, np.ndarray | None]:
    """The shared timestamp order and, when a greedy variant places chronologically, the rows
    that placement compares (the greedy slicer orders them), each only where something reads
    it: the order where a set has more items than ``placers.CHRONO_FILTER_MIN`` (chronological
    placement filters it only for a set keeping more than that many; else every set sorts its
    own, as it would) or ``need_order``; the rows where a set has ``BIG_GREEDY`` items or more
    (only the greedy's big path reads them). ``None`` for what is not built: a sweep of small
    sets neither builds nor compiles what it would not read."""
    from cupel_np.engine.slicers import greedy

    largest = int(np.max(np.diff(table.offsets))) if table.offsets.shape[0] > 1 else 0
    if largest <= placers.CHRONO_FILTER_MIN and not need_order:
        return None, None
    # the per-row codes and runs only where a set may be placed on bitmaps (more items than
    # SMALL_PLACE, ``place_stage._has_long``): a sweep of small sets does not compile them
    ranks = largest > stages.SMALL_PLACE
    ts = place_stage.TimestampOrder(
        *placers.timestamp_order(table.timestamp, table.timestamp_valid, table.offsets, ranks=ranks)
    )
    read = greedy_chrono and largest >= greedy.BIG_GREEDY
    compared = placers.chrono_compared(table.timestamp_valid, ts.order, ts.sorted, sc_rows) if read else None
    return ts, compared


def _timestamps_and_recency(
    table: ItemTable, sc_rows: np.ndarray, greedy_chrono: bool, base: np.ndarray, j: int
) -> tuple[place_stage.TimestampOrder | None, np.ndarray | None]:
    """:func:`_timestamps`, and when ``j >= 0`` the RecencyScorer column ``base[:, j]`` from
    the timestamp order it builds (the ranks by one walk of it instead of a sort of their own)."""
    ts, compared = _timestamps(table, sc_rows, greedy_chrono, need_order=j >= 0)
    if j >= 0:
        assert ts is not None
        identity = sc_rows.shape[0] == table.n  # the scoreable rows (ascending) are every row
        sc_pos = _NO_POS
        if not identity:
            sc_pos = np.full(table.n, -1, dtype=np.int64)
            sc_pos[sc_rows] = np.arange(sc_rows.shape[0])
        base[:, j] = rank_scores_from_order(ts.order, ts.sorted, ts.offsets, sc_pos, identity, sc_rows.shape[0])
    return ts, compared


_NO_POS = np.zeros(0, dtype=np.int64)


def _score_column(ctx: ScoreContext, scorer: Scorer, base: np.ndarray, j: int) -> None:
    ctx.score_into(scorer, base[:, j])


def _duplicates(table: ItemTable, sc_rows: np.ndarray, sc_off: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return duplicate_groups(_scoreable(table.content_id, sc_rows), sc_off)  # (the groups only read the ids)


def _gathers(table: ItemTable, cls: Classified) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Negative-token rows, every scoreable position, and the scoreable rows' tokens and kinds."""
    sc_rows = cls.sc_rows
    return (
        np.flatnonzero(cls.negative),
        np.arange(sc_rows.shape[0]),
        _scoreable(table.tokens, sc_rows),
        _scoreable(table.kind_id, sc_rows),
    )


def _run_all(tasks: Sequence[Callable[[], Any]], threads: int) -> list[Any]:
    """Run independent tasks on the engine's pool; their results, in task order."""
    results: list[Any] = [None] * len(tasks)

    def run(i: int, _state: None) -> None:
        results[i] = tasks[i]()

    run_tasks(len(tasks), threads, _no_state, run)
    return results


def prepare_sweep(
    table: ItemTable,
    variants: Sequence[Variant],
    cls: Classified,
    score_context: ScoreContext | None,
    threads: int,
    max_cells: int,
) -> SweepShared:
    """Everything that does not depend on the variant, as independent tasks on the pool: the
    shared timestamp order (with a RecencyScorer column read from it, when there is one), each
    other distinct base score column (one column of ``base``), the duplicate-content groups
    and the gathers every variant reads. Each task writes only its
    own output, so the result does not depend on the thread count. The score context lives
    only as long as this call: ``base`` holds every column the variants need."""
    sc_rows, sc_off = cls.sc_rows, cls.sc_offsets
    ctx = score_context or ScoreContext(table, sc_rows, sc_off)
    children, term_off, term_col, term_w = _score_terms(variants)
    # column-major from COLUMN_MAJOR_MIN rows: a variant reads each column it weights as one
    # contiguous stream (``variant_scores``), and each task writes its column contiguously
    shape = (sc_rows.shape[0], len(children))
    if sc_rows.shape[0] >= COLUMN_MAJOR_MIN:
        base = np.empty(shape, dtype=np.float64, order="F")
    else:
        base = np.empty(shape, dtype=np.float64)
    chrono = [var for var in variants if var.policy.placer == "chronological"]
    tasks: list[Callable[[], Any]] = []
    # with a timestamp order to build anyway, a RecencyScorer column is read from it where a set
    # is big enough for its own ranking to cost (a run of small sets never compiles that walk)
    big = sc_off.shape[0] > 1 and int(np.max(np.diff(sc_off))) >= RANK_RADIX_MIN
    recency = next((j for j, ch in enumerate(children) if type(ch) is RecencyScorer), -1) if chrono and big else -1
    if chrono:  # first: the longest task
        greedy_chrono = any(greedy_inside(v.policy.slicer) for v in chrono)
        tasks.append(partial(_timestamps_and_recency, table, sc_rows, greedy_chrono, base, recency))
    tasks += [partial(_score_column, ctx, child, base, j) for j, child in enumerate(children) if j != recency]
    group_cols = list(dict.fromkeys(v.policy.groups for v in variants if v.policy.groups is not None))
    tasks += [partial(grp.group_plan, table, col, sc_rows, sc_off) for col in group_cols]
    tasks.append(partial(_duplicates, table, sc_rows, sc_off))
    tasks.append(partial(_gathers, table, cls))
    results = _run_all(tasks, threads)
    ts_order, compared = results[0] if chrono else (None, None)
    (dup_members, dup_offsets), (neg_rows, all_sc, sc_tok, sc_kind) = results[-2], results[-1]
    plans = {
        col: grp.with_duplicates(plan, dup_members, dup_offsets)
        for col, plan in zip(group_cols, results[-2 - len(group_cols) : -2], strict=True)
    }
    return SweepShared(
        table=table,
        classified=cls,
        plan=ScorePlan(base, term_off, term_col, term_w),
        max_cells=max_cells,
        dup_members=dup_members,
        dup_offsets=dup_offsets,
        neg_rows=neg_rows,
        all_sc=all_sc,
        sc_tok=sc_tok,
        sc_kind=sc_kind,
        ts_order=ts_order,
        chrono_compared=compared,
        group_plans=plans,
    )
