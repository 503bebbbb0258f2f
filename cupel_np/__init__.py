"""cupel_np: the Cupel context-selection specification as a vectorized NumPy/Numba engine."""

from cupel_np._version import __version__
from cupel_np.analysis.budget_sim import (
    BudgetCurves,
    NonMonotonicSlicerError,
    budget_curves,
    budget_ladder,
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
from cupel_np.errors import (
    BudgetOverflowError,
    CupelError,
    CupelWarning,
    InvalidConfigError,
    InvalidInputTypeError,
    MemoryLimitError,
    PinnedExceedsBudgetError,
    ScarcityError,
    TableTooLargeError,
    TooFewVariantsError,
    TraceCollectorWarning,
)
from cupel_np.model.budget import ContextBudget
from cupel_np.model.curves import ExponentialCurve, StepCurve, WindowCurve
from cupel_np.model.grid import Sweep
from cupel_np.model.items import ContextItem, ItemTable
from cupel_np.model.policy import Policy
from cupel_np.model.presets import PRESETS, policy_from_dotnet, policy_to_dotnet, preset
from cupel_np.model.scorers import (
    ColumnScorer,
    CompositeScorer,
    DecayScorer,
    FrequencyScorer,
    FunctionScorer,
    KindScorer,
    MetadataKeyScorer,
    MetadataTrustScorer,
    PriorityScorer,
    RecencyScorer,
    ReflexiveScorer,
    ScaledScorer,
    TagScorer,
    register_scorer,
)
from cupel_np.model.slicers import (
    CountConstrainedKnapsackSlice,
    CountQuotaEntry,
    CountQuotaSlice,
    GreedySlice,
    KnapsackSlice,
    QuotaEntry,
    QuotaSlice,
)
from cupel_np.tuning.search import tune  # the function; the package is cupel_np.tuning

__all__ = [
    "__version__",
    "budget_curves",
    "budget_ladder",
    "BudgetCurves",
    "BudgetExceeded",
    "BudgetOverflowError",
    "ColumnScorer",
    "CompositeScorer",
    "ContextBudget",
    "ContextItem",
    "CountCapExceeded",
    "CountConstrainedKnapsackSlice",
    "CountQuotaEntry",
    "CountQuotaSlice",
    "CountRequirementShortfall",
    "CupelError",
    "DecayScorer",
    "Deduplicated",
    "DiagnosticTraceCollector",
    "ExcludedItem",
    "ExclusionReason",
    "ExponentialCurve",
    "Filtered",
    "FrequencyScorer",
    "FunctionScorer",
    "GreedySlice",
    "IncludedItem",
    "InclusionReason",
    "InvalidConfigError",
    "InvalidInputTypeError",
    "ItemStatus",
    "ItemTable",
    "KindScorer",
    "KnapsackSlice",
    "MetadataKeyScorer",
    "MetadataTrustScorer",
    "min_budgets",
    "NegativeTokens",
    "NonMonotonicSlicerError",
    "NullTraceCollector",
    "OverflowEvent",
    "PinnedExceedsBudgetError",
    "PinnedOverride",
    "Pipeline",
    "PipelineStage",
    "Policy",
    "policy_from_dotnet",
    "policy_sensitivity",
    "policy_sensitivity_from_pipelines",
    "policy_to_dotnet",
    "PolicySensitivityDiffEntry",
    "PolicySensitivityReport",
    "preset",
    "PRESETS",
    "PriorityScorer",
    "QuotaCapExceeded",
    "QuotaEntry",
    "QuotaRequireDisplaced",
    "QuotaSlice",
    "RecencyScorer",
    "ReflexiveScorer",
    "register_scorer",
    "run_policy",
    "ScaledScorer",
    "ScarcityError",
    "ScoredTooLow",
    "SelectionReport",
    "StepCurve",
    "sweep",
    "Sweep",
    "SweepResult",
    "TableTooLargeError",
    "TagScorer",
    "TooFewVariantsError",
    "TraceCollectorWarning",
    "CupelWarning",
    "MemoryLimitError",
    "TraceDetailLevel",
    "TraceEvent",
    "tune",
    "WindowCurve",
]


def __getattr__(name: str):
    """``cupel_np.io`` after a plain ``import cupel_np``, imported on first use (so importing
    the package does not pay for the I/O wing)."""
    if name == "io":
        import importlib

        return importlib.import_module("cupel_np.io")
    raise AttributeError(f"module 'cupel_np' has no attribute {name!r}")
