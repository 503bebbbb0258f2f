"""The single-policy stage runner over a whole ItemTable (every item set at once).

Stages: Classify -> Score -> Deduplicate -> Sort -> Slice -> Place. Each stage is one
vectorized NumPy step or one segmented Numba kernel call; there is no Python loop per item set.
``Pipeline`` (cupel_np.analysis.pipeline) and the sensitivity sweep (cupel_np.analysis.sensitivity) both run on it.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from cupel_np.engine.batch import KNAPSACK_MAX_CELLS, run_sweep
from cupel_np.engine.scorers import ScoreContext
from cupel_np.engine.sweep_run import Classified, SweepRun
from cupel_np.errors import InvalidInputTypeError
from cupel_np.model.budget import ContextBudget
from cupel_np.model.grid import Variant
from cupel_np.model.item_rows import ItemRows
from cupel_np.model.items import ItemTable
from cupel_np.model.policy import Policy


def as_table(items) -> ItemTable:
    if isinstance(items, ItemTable):
        return items
    if isinstance(items, (list, tuple)):
        return ItemRows.from_items(items)
    raise InvalidInputTypeError(f"items must be an ItemTable or a sequence of ContextItems, got {type(items).__name__}")


def check_budget(budget) -> ContextBudget:
    if not isinstance(budget, ContextBudget):
        raise InvalidInputTypeError(f"budget must be a ContextBudget, got {type(budget).__name__}")
    return budget


class PolicyRun:
    """One policy over every item set of a table: a one-variant view of a SweepRun.

    ``included``, ``score``, ``reason`` and ``position`` are per-row columns (grouped row
    order); ``error[s]`` / ``shortfalls[s]`` are per set."""

    def __init__(self, sweep: SweepRun, v: int = 0):
        self.sweep = sweep
        self.v = v
        var = sweep.variants[v]
        self.table = sweep.table
        self.policy = var.policy
        self.budget = var.budget
        self.label = var.label
        self.included = sweep.included[v]
        self.reason = sweep.reason[v]
        self.effective_target = sweep.effective_target[v]
        self.cap_dropped = sweep.cap_dropped[v]

    # per-row columns and per-set lists are built on access: reading one set's report must
    # not cost O(rows) or O(sets)
    @cached_property
    def score(self) -> np.ndarray:
        return self.sweep.scores_for(self.v)

    def scores_at(self, rows: np.ndarray) -> np.ndarray:
        """Report scores of ``rows`` only."""
        return self.sweep.scores_at(self.v, rows)

    @cached_property
    def error(self) -> list:
        errs = self.sweep.errors[self.v]
        return [errs.get(s) for s in range(self.table.n_sets)]

    def error_of(self, segment: int):
        """The error one item set (``segment``, its row in the table's set order) raised under
        this policy, or None."""
        return self.sweep.errors[self.v].get(segment)

    @cached_property
    def shortfalls(self) -> list:
        sf = self.sweep.shortfalls[self.v]
        return [sf.get(s, []) for s in range(self.table.n_sets)]

    def shortfalls_of(self, segment: int) -> list:
        """The count-quota shortfalls of one item set (``segment``): ``(kind, required,
        satisfied)`` tuples, item counts."""
        return self.sweep.shortfalls[self.v].get(segment, [])

    @property
    def position(self) -> np.ndarray:
        """Each item's place in its set's output context (-1 where excluded), in table row
        order."""
        return self.sweep.position_for(self.v)

    def raise_first_error(self) -> None:
        """Raise the error of the first item set that failed (a ``CupelError``); do nothing when
        none did."""
        errs = self.sweep.errors[self.v]
        if errs:
            raise errs[min(errs)]


def run_policy(
    table: ItemTable,
    budget: ContextBudget,
    policy: Policy,
    *,
    classified: Classified | None = None,
    score_context: ScoreContext | None = None,
    max_cells: int = KNAPSACK_MAX_CELLS,
    threads: int | None = None,
) -> PolicyRun:
    """Run one policy over every item set of ``table``. Per-set failures are recorded in
    ``PolicyRun.error`` (callers decide whether to raise). ``threads`` as in ``sweep``."""
    sweep = run_sweep(
        table,
        [Variant("", policy, budget)],
        max_cells=max_cells,
        classified=classified,
        score_context=score_context,
        threads=threads,
    )
    return PolicyRun(sweep, 0)
