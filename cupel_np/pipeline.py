"""The single-policy stage runner over a whole ItemTable (every item set at once), and the
object-style ``Pipeline`` API on top of it.

Stages: Classify -> Score -> Deduplicate -> Sort -> Slice -> Place. Each stage is one
vectorized NumPy step or one segmented Numba kernel call; there is no Python loop per item set.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from .batch import KNAPSACK_MAX_CELLS, Classified, SweepRun, Variant, _slicer_args, classify, run_sweep, segment_sums
from .budget import ContextBudget
from .errors import CupelError, InvalidInputTypeError
from .items import ContextItem, ItemTable
from .policy import Policy
from .scorers import ScoreContext

def as_table(items) -> ItemTable:
    if isinstance(items, ItemTable):
        return items
    if isinstance(items, (list, tuple)):
        return ItemTable.from_items(items)
    raise InvalidInputTypeError(
        f"items must be an ItemTable or a sequence of ContextItems, got {type(items).__name__}"
    )


def _check_budget(budget) -> ContextBudget:
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
        return self.sweep.errors[self.v].get(segment)

    @cached_property
    def shortfalls(self) -> list:
        sf = self.sweep.shortfalls[self.v]
        return [sf.get(s, []) for s in range(self.table.n_sets)]

    def shortfalls_of(self, segment: int) -> list:
        return self.sweep.shortfalls[self.v].get(segment, [])

    @property
    def position(self) -> np.ndarray:
        return self.sweep.position_for(self.v)

    def raise_first_error(self) -> None:
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
        table, [Variant("", policy, budget)], max_cells=max_cells,
        classified=classified, score_context=score_context, threads=threads,
    )
    return PolicyRun(sweep, 0)


def _set_label(table: ItemTable, s: int) -> str:
    if table.set_column is None:
        return ""
    return f"set {table.set_keys[s]!r}: "


class Pipeline:
    """A policy plus a budget-independent runner. The budget is always passed explicitly."""

    def __init__(self, policy: Policy):
        if not isinstance(policy, Policy):
            raise InvalidInputTypeError(f"Pipeline needs a Policy, got {type(policy).__name__}")
        self.policy = policy

    def __repr__(self) -> str:
        return f"Pipeline({self.policy!r})"

    def _run_single(self, items, budget, policy, threads=None) -> PolicyRun:
        table = as_table(items)
        budget = _check_budget(budget)
        if table.n_sets != 1:
            raise CupelError(
                f"this table holds {table.n_sets} item sets; Pipeline runs one set at a time "
                "(select one, or use cupel_np.sweep for many sets)"
            )
        run = run_policy(table, budget, policy, threads=threads)
        run.raise_first_error()
        return run

    def run(self, items, budget: ContextBudget) -> list[ContextItem]:
        """The selected items in placed order."""
        return [inc.item for inc in self.dry_run(items, budget).included]

    def dry_run(self, items, budget: ContextBudget, *, threads: int | None = None):
        """A full SelectionReport for one item set (``threads`` as in ``sweep``)."""
        from .report import SelectionReport

        return SelectionReport(self._run_single(items, budget, self.policy, threads), 0)

    def dry_run_with_policy(self, items, budget: ContextBudget, policy: Policy):
        """Like ``dry_run`` but with another policy's scorer, slicer, placer and flags."""
        from .report import SelectionReport

        if not isinstance(policy, Policy):
            raise InvalidInputTypeError(f"policy must be a Policy, got {type(policy).__name__}")
        return SelectionReport(self._run_single(items, budget, policy), 0)

    def policy_sensitivity(self, items, budget: ContextBudget, variants, *, on_error: str = "raise"):
        """Compare ``variants`` over ``items`` (the .NET extension method's shape)."""
        from .sensitivity import policy_sensitivity

        return policy_sensitivity(items, budget, variants, on_error=on_error)
