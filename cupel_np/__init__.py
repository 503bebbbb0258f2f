"""cupel_np: the Cupel context-selection specification as a vectorized NumPy/Numba engine."""

from cupel_np._version import __version__
from cupel_np.analysis.budget_sim import (
    BudgetCurves,
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
    ApiUsageError,
    BadTranscriptError,
    BudgetOverflowError,
    CorpusAssertionError,
    CorruptManifestError,
    CupelError,
    CupelWarning,
    EmptyImportError,
    InvalidConfigError,
    InvalidInputTypeError,
    MemoryLimitError,
    NonMonotonicSlicerError,
    OutputExistsError,
    PinnedExceedsBudgetError,
    ScarcityError,
    SelectionReportAssertionError,
    SnapshotMismatchError,
    StorageError,
    TableTooLargeError,
    TooFewVariantsError,
    TraceCollectorWarning,
)
from cupel_np.model.budget import ContextBudget
from cupel_np.model.curves import ExponentialCurve, StepCurve, WindowCurve
from cupel_np.model.grid import Sweep, VariantGrid
from cupel_np.model.items import ContextItem, ItemTable
from cupel_np.model.plugins import register_scorer
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
from cupel_np.testing import col, match_snapshot, should
from cupel_np.tuning.search import tune  # the function; the package is cupel_np.tuning

# Grouped by topic; each group lists its names by kind (classes, then functions).
__all__ = [
    "__version__",
    # items and budget
    "ContextBudget",
    "ContextItem",
    "ItemTable",
    # scorers
    "ColumnScorer",
    "CompositeScorer",
    "DecayScorer",
    "ExponentialCurve",
    "FrequencyScorer",
    "FunctionScorer",
    "KindScorer",
    "MetadataKeyScorer",
    "MetadataTrustScorer",
    "PriorityScorer",
    "RecencyScorer",
    "ReflexiveScorer",
    "ScaledScorer",
    "StepCurve",
    "TagScorer",
    "WindowCurve",
    "register_scorer",
    # slicers
    "CountConstrainedKnapsackSlice",
    "CountQuotaEntry",
    "CountQuotaSlice",
    "GreedySlice",
    "KnapsackSlice",
    "QuotaEntry",
    "QuotaSlice",
    # presets (and policies in other shapes)
    "PRESETS",
    "Policy",
    "policy_from_dotnet",
    "policy_to_dotnet",
    "preset",
    # running one policy
    "Pipeline",
    "run_policy",
    # reports and reasons
    "BudgetExceeded",
    "CountCapExceeded",
    "CountRequirementShortfall",
    "Deduplicated",
    "ExcludedItem",
    "ExclusionReason",
    "Filtered",
    "IncludedItem",
    "InclusionReason",
    "ItemStatus",
    "NegativeTokens",
    "PinnedOverride",
    "QuotaCapExceeded",
    "QuotaRequireDisplaced",
    "ScoredTooLow",
    "SelectionReport",
    # sweeps and analysis
    "BudgetCurves",
    "PolicySensitivityDiffEntry",
    "PolicySensitivityReport",
    "Sweep",  # the older name of VariantGrid
    "SweepResult",
    "VariantGrid",
    "budget_curves",
    "budget_ladder",
    "min_budgets",
    "policy_sensitivity",
    "policy_sensitivity_from_pipelines",
    "sweep",
    "tune",
    # trace
    "DiagnosticTraceCollector",
    "NullTraceCollector",
    "OverflowEvent",
    "PipelineStage",
    "TraceDetailLevel",
    "TraceEvent",
    # testing (the Cupel.Testing vocabulary; more in cupel_np.testing)
    "col",
    "match_snapshot",
    "should",
    # errors and warnings (all of them live in cupel_np.errors)
    "ApiUsageError",
    "BadTranscriptError",
    "CorruptManifestError",
    "EmptyImportError",
    "StorageError",
    "BudgetOverflowError",
    "CorpusAssertionError",
    "CupelError",
    "CupelWarning",
    "InvalidConfigError",
    "InvalidInputTypeError",
    "MemoryLimitError",
    "NonMonotonicSlicerError",
    "OutputExistsError",
    "PinnedExceedsBudgetError",
    "ScarcityError",
    "SelectionReportAssertionError",
    "SnapshotMismatchError",
    "TableTooLargeError",
    "TooFewVariantsError",
    "TraceCollectorWarning",
]


def __getattr__(name: str):
    """``cupel_np.io`` after a plain ``import cupel_np``, imported on first use (so importing
    the package does not pay for the I/O wing)."""
    if name == "io":
        import importlib

        return importlib.import_module("cupel_np.io")
    raise AttributeError(f"module 'cupel_np' has no attribute {name!r}")
