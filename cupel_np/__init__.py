"""cupel_np: the Cupel context-selection specification as a vectorized NumPy/Numba engine.

Every public name is imported on first use (``cupel_np.Policy``, ``from cupel_np import
Policy``): ``import cupel_np`` alone imports nothing else, so the ``cupel-np`` command starts
its compile child before it pays for the library (~0.5 s), and a program that needs one
corner of it imports only that corner."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from cupel_np._version import __version__

if TYPE_CHECKING:  # what the names are, for type checkers; at run time :data:`_EXPORTS` imports them
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

#: public name -> the module that defines it (imported on the name's first use)
_EXPORTS: dict[str, str] = {
    "BudgetCurves": "cupel_np.analysis.budget_sim",
    "budget_curves": "cupel_np.analysis.budget_sim",
    "budget_ladder": "cupel_np.analysis.budget_sim",
    "min_budgets": "cupel_np.analysis.budget_sim",
    "Pipeline": "cupel_np.analysis.pipeline",
    "policy_sensitivity_from_pipelines": "cupel_np.analysis.pipeline",
    "run_policy": "cupel_np.analysis.pipeline",
    "BudgetExceeded": "cupel_np.analysis.selection",
    "CountCapExceeded": "cupel_np.analysis.selection",
    "CountRequirementShortfall": "cupel_np.analysis.selection",
    "Deduplicated": "cupel_np.analysis.selection",
    "ExcludedItem": "cupel_np.analysis.selection",
    "ExclusionReason": "cupel_np.analysis.selection",
    "Filtered": "cupel_np.analysis.selection",
    "IncludedItem": "cupel_np.analysis.selection",
    "InclusionReason": "cupel_np.analysis.selection",
    "NegativeTokens": "cupel_np.analysis.selection",
    "PinnedOverride": "cupel_np.analysis.selection",
    "QuotaCapExceeded": "cupel_np.analysis.selection",
    "QuotaRequireDisplaced": "cupel_np.analysis.selection",
    "ScoredTooLow": "cupel_np.analysis.selection",
    "SelectionReport": "cupel_np.analysis.selection",
    "ItemStatus": "cupel_np.analysis.sensitivity",
    "PolicySensitivityDiffEntry": "cupel_np.analysis.sensitivity",
    "PolicySensitivityReport": "cupel_np.analysis.sensitivity",
    "SweepResult": "cupel_np.analysis.sensitivity",
    "policy_sensitivity": "cupel_np.analysis.sensitivity",
    "sweep": "cupel_np.analysis.sensitivity",
    "DiagnosticTraceCollector": "cupel_np.analysis.trace",
    "NullTraceCollector": "cupel_np.analysis.trace",
    "OverflowEvent": "cupel_np.analysis.trace",
    "PipelineStage": "cupel_np.analysis.trace",
    "TraceDetailLevel": "cupel_np.analysis.trace",
    "TraceEvent": "cupel_np.analysis.trace",
    "ApiUsageError": "cupel_np.errors",
    "BadTranscriptError": "cupel_np.errors",
    "BudgetOverflowError": "cupel_np.errors",
    "CorpusAssertionError": "cupel_np.errors",
    "CorruptManifestError": "cupel_np.errors",
    "CupelError": "cupel_np.errors",
    "CupelWarning": "cupel_np.errors",
    "EmptyImportError": "cupel_np.errors",
    "InvalidConfigError": "cupel_np.errors",
    "InvalidInputTypeError": "cupel_np.errors",
    "MemoryLimitError": "cupel_np.errors",
    "NonMonotonicSlicerError": "cupel_np.errors",
    "OutputExistsError": "cupel_np.errors",
    "PinnedExceedsBudgetError": "cupel_np.errors",
    "ScarcityError": "cupel_np.errors",
    "SelectionReportAssertionError": "cupel_np.errors",
    "SnapshotMismatchError": "cupel_np.errors",
    "StorageError": "cupel_np.errors",
    "TableTooLargeError": "cupel_np.errors",
    "TooFewVariantsError": "cupel_np.errors",
    "TraceCollectorWarning": "cupel_np.errors",
    "ContextBudget": "cupel_np.model.budget",
    "ExponentialCurve": "cupel_np.model.curves",
    "StepCurve": "cupel_np.model.curves",
    "WindowCurve": "cupel_np.model.curves",
    "Sweep": "cupel_np.model.grid",
    "VariantGrid": "cupel_np.model.grid",
    "ContextItem": "cupel_np.model.items",
    "ItemTable": "cupel_np.model.items",
    "register_scorer": "cupel_np.model.plugins",
    "Policy": "cupel_np.model.policy",
    "PRESETS": "cupel_np.model.presets",
    "policy_from_dotnet": "cupel_np.model.presets",
    "policy_to_dotnet": "cupel_np.model.presets",
    "preset": "cupel_np.model.presets",
    "ColumnScorer": "cupel_np.model.scorers",
    "CompositeScorer": "cupel_np.model.scorers",
    "DecayScorer": "cupel_np.model.scorers",
    "FrequencyScorer": "cupel_np.model.scorers",
    "FunctionScorer": "cupel_np.model.scorers",
    "KindScorer": "cupel_np.model.scorers",
    "MetadataKeyScorer": "cupel_np.model.scorers",
    "MetadataTrustScorer": "cupel_np.model.scorers",
    "PriorityScorer": "cupel_np.model.scorers",
    "RecencyScorer": "cupel_np.model.scorers",
    "ReflexiveScorer": "cupel_np.model.scorers",
    "ScaledScorer": "cupel_np.model.scorers",
    "TagScorer": "cupel_np.model.scorers",
    "CountConstrainedKnapsackSlice": "cupel_np.model.slicers",
    "CountQuotaEntry": "cupel_np.model.slicers",
    "CountQuotaSlice": "cupel_np.model.slicers",
    "GreedySlice": "cupel_np.model.slicers",
    "KnapsackSlice": "cupel_np.model.slicers",
    "QuotaEntry": "cupel_np.model.slicers",
    "QuotaSlice": "cupel_np.model.slicers",
    "col": "cupel_np.testing",
    "match_snapshot": "cupel_np.testing",
    "should": "cupel_np.testing",
    "tune": "cupel_np.tuning.search",
}

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


def __getattr__(name: str) -> Any:
    """A public name (:data:`_EXPORTS`), imported from its module on first use and kept; or a
    subpackage or module (``cupel_np.io``, ``cupel_np.model``...) after a plain ``import cupel_np``."""
    module = _EXPORTS.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value  # the next use is a plain attribute
        return value
    if not name.startswith("__"):
        try:
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise  # the module exists, but something it imports does not
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
