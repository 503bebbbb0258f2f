"""One policy over one small item set (``Pipeline.run`` / ``dry_run`` on a service's request).

The batch engine (``batch.run_sweep``) is built for V variants over N rows of many sets: it
plans its shared phase as tasks for the thread pool, regroups every variant's scorer terms,
and computes per-set offsets with cumulative sums. On 50 items that bookkeeping costs more
than the kernels. :func:`run_one` runs the same stages on the calling thread:

* the policy's part of the plan (its distinct base scorers and their weighted terms, and
  whether it names a column scorer) is built once per policy (:class:`PolicyPlan`, kept by
  ``Pipeline``), not per call;
* the classify stage is the one-set form (no segment sums);
* the shared phase (timestamp order, base score columns, group units, duplicate groups,
  gathers) runs its steps directly, without the pool's task objects;
* then ``batch.run_variant`` runs the variant: the same deduplicate, slice and place calls,
  on the same kernels, as a sweep. The result is the same ``SweepRun`` the batch engine
  writes, bit for bit (``tests/engine/test_small_path.py`` compares them).

No kernel of its own: nothing here adds compile time.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from cupel_np.engine import groups as grp
from cupel_np.engine.batch import (
    KNAPSACK_MAX_CELLS,
    SweepShared,
    _duplicates,
    _score_terms,
    _scoreable,
    _Scratch,
    _timestamps,
    run_variant,
)
from cupel_np.engine.runner import PolicyRun
from cupel_np.engine.scorers import ScoreContext, _evaluate, check_scorer_columns
from cupel_np.engine.slicers import greedy_inside
from cupel_np.engine.sweep_run import Classified, ScorePlan, SweepRun
from cupel_np.model.budget import ContextBudget
from cupel_np.model.grid import Variant
from cupel_np.model.items import ItemTable
from cupel_np.model.policy import Policy
from cupel_np.model.scorers import ColumnScorer, Scorer, iter_scorers

__all__ = ["SMALL_SET", "PolicyPlan", "classify_one", "run_one"]

#: ``Pipeline`` runs a set of up to this many items with :func:`run_one` whatever the thread
#: count (on 5,000 items it took less CPU and less wall time than the batch engine on two
#: threads, measured on the loaded 2-core development machine); a bigger set with more than
#: one thread goes to the batch engine, whose shared phase runs on the pool
SMALL_SET = 10_000


@dataclass(frozen=True)
class PolicyPlan:
    """What one policy's runs share whatever the items: its distinct base scorers (a
    composite's children, or the scorer itself) with the variant's terms over them
    (``batch._score_terms`` for one variant), and whether a column scorer needs its column
    checked on each table."""

    policy: Policy
    children: tuple[Scorer, ...]
    term_off: np.ndarray
    term_col: np.ndarray
    term_w: np.ndarray
    has_columns: bool
    chrono: bool  #: chronological placement (the shared timestamp order is needed)
    greedy_chrono: bool  #: ... by a greedy slicer or a quota over greedy

    @classmethod
    def of(cls, policy: Policy) -> PolicyPlan:
        """The plan of ``policy`` (build once, reuse for every run)."""
        children, term_off, term_col, term_w = _score_terms([Variant("", policy, ContextBudget(0, 0))])
        chrono = policy.placer == "chronological"
        return cls(
            policy,
            tuple(children),
            term_off,
            term_col,
            term_w,
            any(isinstance(s, ColumnScorer) for s in iter_scorers(policy.scorer)),
            chrono,
            chrono and greedy_inside(policy.slicer),
        )


def _two(a: int, b: int) -> np.ndarray:
    out = np.empty(2, dtype=np.int64)
    out[0] = a
    out[1] = b
    return out


def classify_one(table: ItemTable) -> Classified:
    """``sweep_run.classify`` for a table of one set (the same arrays, without segment sums)."""
    tokens = table.tokens
    neg = tokens < 0
    pin = table.pinned & ~neg
    pin_rows = np.flatnonzero(pin)
    sc_rows = np.flatnonzero(~(neg | pin))
    n_pin = pin_rows.shape[0]
    first = np.full(1, -1, dtype=np.int64)
    if n_pin:
        first[0] = pin_rows[0]
    pinned_tokens = np.zeros(1, dtype=np.int64)
    pinned_tokens[0] = tokens[pin_rows].sum(dtype=np.int64)
    return Classified(neg, pin, sc_rows, _two(0, sc_rows.shape[0]), pin_rows, _two(0, n_pin), pinned_tokens, first)


def _shared(table: ItemTable, plan: PolicyPlan, cls: Classified, max_cells: int) -> SweepShared:
    """``batch.prepare_sweep`` for one variant on the calling thread: the same steps, in the
    same order, each writing its own output."""
    sc_rows, sc_off = cls.sc_rows, cls.sc_offsets
    ctx = ScoreContext(table, sc_rows, sc_off)
    ts_order, compared = _timestamps(table, sc_rows, plan.greedy_chrono) if plan.chrono else (None, None)
    base = np.empty((sc_rows.shape[0], len(plan.children)), dtype=np.float64)
    for j, child in enumerate(plan.children):  # distinct: no need for the context's cache and locks
        base[:, j] = _evaluate(child, ctx)
    col = plan.policy.groups
    group = grp.group_plan(table, col, sc_rows, sc_off) if col is not None else None
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
        neg_rows=np.flatnonzero(cls.negative),
        all_sc=np.arange(sc_rows.shape[0]),
        sc_tok=_scoreable(table.tokens, sc_rows),
        sc_kind=_scoreable(table.kind_id, sc_rows),
        ts_order=ts_order,
        chrono_compared=compared,
        group_plans=plans,
    )


def run_one(
    table: ItemTable, budget: ContextBudget, plan: PolicyPlan, *, max_cells: int = KNAPSACK_MAX_CELLS
) -> PolicyRun:
    """``runner.run_policy(table, budget, plan.policy)`` for a table of one item set, on the
    calling thread: the same result (per-set failures recorded, not raised)."""
    if table.n_sets != 1:
        raise ValueError(f"run_one runs one item set, the table holds {table.n_sets}")
    if plan.has_columns:
        check_scorer_columns(table, (plan.policy.scorer,))
    t_start = time.time_ns()
    cls = classify_one(table)
    t_cls = time.time_ns()
    shared = _shared(table, plan, cls, max_cells)
    out = SweepRun(table, [Variant("", plan.policy, budget)], cls, shared.plan)
    out.prep_ns[:] = (t_start, t_cls, time.time_ns())
    run_variant(shared, out, 0, _Scratch(table.n, cls.sc_rows.shape[0]))
    return PolicyRun(out, 0)
