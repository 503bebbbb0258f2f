"""The object-style ``Pipeline`` API (upstream's ``CupelPipeline``): a policy plus a
budget-independent runner over one item set. The runner itself is ``cupel_np.engine.runner``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cached_property

from cupel_np.analysis import budget_sim
from cupel_np.analysis import trace as trace_mod
from cupel_np.analysis.selection import SelectionReport
from cupel_np.analysis.sensitivity import PolicySensitivityReport, policy_sensitivity
from cupel_np.analysis.trace import NULL_COLLECTOR, DiagnosticTraceCollector, OverflowEvent, TraceCollector
from cupel_np.engine.parallel import threads_for
from cupel_np.engine.runner import PolicyRun, as_table, check_budget, run_policy
from cupel_np.engine.small import SMALL_SET, PolicyPlan, run_sweep_one
from cupel_np.engine.sweep_run import SweepRun, classify, placed_permutation
from cupel_np.errors import CupelError, InvalidInputTypeError
from cupel_np.model.budget import ContextBudget
from cupel_np.model.grid import PolicySource
from cupel_np.model.hints import Items, Variants
from cupel_np.model.item_rows import ItemRows
from cupel_np.model.items import ContextItem
from cupel_np.model.policy import Policy

#: re-exported: the runner's names were importable from here before it had its own module
__all__ = ["Pipeline", "PolicyRun", "as_table", "classify", "policy_sensitivity_from_pipelines", "run_policy"]


class Pipeline(PolicySource):
    """A policy plus a budget-independent runner. The budget is always passed explicitly."""

    def __init__(self, policy: Policy, *, on_overflow: Callable[[OverflowEvent], None] | None = None):
        if not isinstance(policy, Policy):
            raise InvalidInputTypeError(f"Pipeline needs a Policy, got {type(policy).__name__}")
        if on_overflow is not None and not callable(on_overflow):
            raise InvalidInputTypeError(f"on_overflow must be callable, got {type(on_overflow).__name__}")
        self.policy = policy
        self._plan_of: PolicyPlan | None = None
        #: called with the OverflowEvent of every run that overflows under the proceed strategy
        self.on_overflow = on_overflow

    def __repr__(self) -> str:
        return f"Pipeline({self.policy!r})"

    def _plan(self, policy: Policy) -> PolicyPlan:
        """The policy's plan, built once per policy object (``self.policy`` may be replaced)."""
        plan = self._plan_of
        if plan is None or plan.policy is not policy:
            plan = PolicyPlan.of(policy)
            if policy is self.policy:
                self._plan_of = plan
        return plan

    def _run_single(self, items, budget, policy, threads=None) -> PolicyRun:
        run = PolicyRun(self._sweep_single(items, budget, policy, threads), 0)
        run.raise_first_error()
        return run

    def _sweep_single(self, items, budget, policy, threads=None, clock: bool = True) -> SweepRun:
        """The SweepRun of ``policy`` over ``items`` (one set), its errors not raised.
        ``clock``: a report reads the run (its stage times, budget figures and details,
        ``small.run_sweep_one``); ``run`` without a collector needs none of them, nor a copy
        of the list (the table does not outlive the call)."""
        plan = self._plan(policy)
        # (a list of items: the plan says when its new items are read column by column)
        table = (
            ItemRows.from_items(items, cold_min=plan.cold_min, copy=clock)
            if isinstance(items, (list, tuple))
            else as_table(items)
        )
        budget = check_budget(budget)
        if table.n_sets != 1:
            raise CupelError(
                f"this table holds {table.n_sets} item sets; Pipeline runs one set at a time "
                "(select one, or use cupel_np.sweep for many sets)"
            )
        if table.n <= SMALL_SET or threads_for(threads, table.n) == 1:  # the small-set driver
            return run_sweep_one(table, budget, plan, clock=clock)
        return run_policy(table, budget, policy, threads=threads).sweep

    def run(self, items: Items, budget: ContextBudget, *, trace: TraceCollector | None = None) -> list[ContextItem]:
        """The selected items in placed order (``trace`` as in ``dry_run``; none by default)."""
        if (trace is None or trace is NULL_COLLECTOR) and self.on_overflow is None:
            # no one to tell: the included rows in placed order, and nothing a report reads
            # (no PolicyRun, no stage clock)
            sweep = self._sweep_single(items, budget, self.policy, clock=False)
            errors = sweep.errors[0]
            if errors:
                raise errors[min(errors)]
            # (the one set's positions as kept: ``placed_order`` without its per-set look-ups,
            # ~5 us of a 500-item run; in row order the items are taken by the mask)
            included = sweep.included[0]
            order, k, in_order = placed_permutation(included, sweep.placed_pos[0])
            return sweep.table.rows(included) if in_order else sweep.table.placed_items(order, k)
        report = self._report(items, budget, self.policy, None, trace or NULL_COLLECTOR)
        # the items of ``report.included``, without their scores and reasons
        return report._run.table.rows(report.included_rows)

    def dry_run(
        self, items: Items, budget: ContextBudget, *, threads: int | None = None, trace: TraceCollector | None = None
    ) -> SelectionReport:
        """A full SelectionReport for one item set (``threads`` as in ``sweep``).

        ``trace``: a TraceCollector that receives this run's events (item events first, then
        one stage event per stage); by default a stage-level DiagnosticTraceCollector, so
        ``report.events`` holds the five stage events. ``report.events`` holds what a
        buffering collector recorded during this run ([] for other collectors)."""
        return self._report(items, budget, self.policy, threads, trace)

    def dry_run_with_policy(
        self, items: Items, budget: ContextBudget, policy: Policy, *, trace: TraceCollector | None = None
    ) -> SelectionReport:
        """Like ``dry_run`` but with another policy's scorer, slicer, placer and flags."""
        if not isinstance(policy, Policy):
            raise InvalidInputTypeError(f"policy must be a Policy, got {type(policy).__name__}")
        return self._report(items, budget, policy, None, trace)

    def _report(self, items, budget, policy, threads, trace) -> SelectionReport:
        if trace is None:  # the default stage-level collector: its five events built when read
            return self._quiet_report(items, budget, policy, threads, _StageEventsReport)
        if trace is NULL_COLLECTOR:
            return self._quiet_report(items, budget, policy, threads, SelectionReport)
        collector = trace
        if not isinstance(collector, TraceCollector):
            raise InvalidInputTypeError(
                f"trace must be a TraceCollector (is_enabled, record_stage_event, record_item_event), "
                f"got {type(collector).__name__}"
            )
        run = self._run_single(items, budget, policy, threads)
        report = SelectionReport(run, 0)
        guarded = trace_mod.GuardedCollector(collector)
        overflow = report.overflow
        if overflow is not None:
            if self.on_overflow is not None:
                self.on_overflow(overflow)
            if guarded.is_enabled:
                guarded.call("record_overflow_event", overflow)
        if guarded.is_enabled:
            buffer = getattr(collector, "events", None)
            before = len(buffer) if isinstance(buffer, list) else 0
            snaps = trace_mod.snapshots(run.sweep, 0, 0)
            trace_mod.record_run(report, policy, run.budget, guarded, snaps)
            if isinstance(buffer, list):
                report._events = buffer[before:]
            guarded.call("on_pipeline_completed", report, run.budget, snaps)
        return report

    def _quiet_report(self, items, budget, policy, threads, kind: type[SelectionReport]) -> SelectionReport:
        """A run whose collector no one else sees (none, or the default one): only
        ``on_overflow`` is called; the default collector's events are the report's to build."""
        run = self._run_single(items, budget, policy, threads)
        report = kind(run, 0)
        if self.on_overflow is not None:
            overflow = report.overflow
            if overflow is not None:
                self.on_overflow(overflow)
        return report

    def policy_sensitivity(
        self,
        items: Items,
        budget: ContextBudget,
        variants: Variants,
        *,
        on_error: str = "raise",
        threads: int | None = None,
    ) -> PolicySensitivityReport:
        """Compare ``variants`` over ``items`` (the .NET extension method's shape)."""
        return policy_sensitivity(items, budget, variants, on_error=on_error, threads=threads)

    # -- budget simulation (spec: analytics/budget-simulation.md; see budget_sim.py) ---------
    def get_marginal_items(self, items: Items, budget: ContextBudget, slack_tokens: int) -> list[ContextItem]:
        """Items included at ``budget`` but excluded at ``budget`` reduced by ``slack_tokens``."""
        return budget_sim.get_marginal_items(self.policy, items, budget, slack_tokens)

    def find_min_budget_for(self, items: Items, target_item: ContextItem, search_ceiling: int) -> int | None:
        """The smallest budget in ``[target_item.tokens, search_ceiling]`` the spec's binary
        search finds that includes ``target_item`` (None when it finds none)."""
        return budget_sim.find_min_budget_for(self.policy, items, target_item, search_ceiling)


class _StageEventsReport(SelectionReport):
    """The report of a ``dry_run`` with the default collector (a stage-level
    DiagnosticTraceCollector that no one else sees): its five stage events are recorded the
    first time ``events`` is read, from the timings and reasons the run kept."""

    @cached_property
    def _events(self) -> list:  # type: ignore[override]
        run = self._run
        collector = DiagnosticTraceCollector()
        trace_mod.record_run(self, run.policy, run.budget, collector, trace_mod.snapshots(run.sweep, 0, 0))
        return collector.events


def policy_sensitivity_from_pipelines(
    items: Items,
    budget: ContextBudget,
    variants: Sequence[tuple[str, Pipeline]],
    *,
    on_error: str = "raise",
    threads: int | None = None,
) -> PolicySensitivityReport:
    """``policy_sensitivity`` with ``(label, Pipeline)`` variants (upstream parity)."""
    for i, v in enumerate(variants):
        if isinstance(v, (tuple, list)) and len(v) == 2 and not isinstance(v[1], Pipeline):
            raise InvalidInputTypeError(f"variant {i}: expected a Pipeline, got {type(v[1]).__name__}")
    return policy_sensitivity(items, budget, variants, on_error=on_error, threads=threads)
