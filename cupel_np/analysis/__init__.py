"""What the matrices mean: selection reports, policy sensitivity and sweeps, budget simulation,
and the Pipeline that runs one policy over one item set."""

from cupel_np.analysis.budget_sim import (
    BudgetCurves,
    budget_curves,
    budget_ladder,
    find_min_budget_for,
    get_marginal_items,
    min_budgets,
)
from cupel_np.analysis.pipeline import Pipeline, policy_sensitivity_from_pipelines, run_policy
from cupel_np.analysis.selection import (
    BudgetExceeded,
    CountCapExceeded,
    CountRequirementShortfall,
    Deduplicated,
    ExcludedItem,
    ExclusionReason,
    Filtered,
    IncludedItem,
    InclusionReason,
    NegativeTokens,
    PinnedOverride,
    QuotaCapExceeded,
    QuotaRequireDisplaced,
    ScoredTooLow,
    SelectionReport,
)
from cupel_np.analysis.sensitivity import (
    ItemStatus,
    PolicySensitivityDiffEntry,
    PolicySensitivityReport,
    SweepResult,
    policy_sensitivity,
    sweep,
)
from cupel_np.analysis.trace import (
    DiagnosticTraceCollector,
    NullTraceCollector,
    OverflowEvent,
    PipelineStage,
    TraceDetailLevel,
    TraceEvent,
)

# Grouped by source file.
__all__ = [
    # budget_sim.py
    "BudgetCurves",
    "budget_curves",
    "budget_ladder",
    "find_min_budget_for",
    "get_marginal_items",
    "min_budgets",
    # pipeline.py
    "Pipeline",
    "policy_sensitivity_from_pipelines",
    "run_policy",
    # selection.py
    "BudgetExceeded",
    "CountCapExceeded",
    "CountRequirementShortfall",
    "Deduplicated",
    "ExcludedItem",
    "ExclusionReason",
    "Filtered",
    "IncludedItem",
    "InclusionReason",
    "NegativeTokens",
    "PinnedOverride",
    "QuotaCapExceeded",
    "QuotaRequireDisplaced",
    "ScoredTooLow",
    "SelectionReport",
    # sensitivity.py
    "ItemStatus",
    "PolicySensitivityDiffEntry",
    "PolicySensitivityReport",
    "SweepResult",
    "policy_sensitivity",
    "sweep",
    # trace.py
    "DiagnosticTraceCollector",
    "NullTraceCollector",
    "OverflowEvent",
    "PipelineStage",
    "TraceDetailLevel",
    "TraceEvent",
]
