"""cupel_np: the Cupel context-selection specification as a vectorized NumPy/Numba engine."""

from cupel_np.model.budget import ContextBudget
from cupel_np.analysis.budget_sim import (
    BudgetCurves,
    NonMonotonicSlicerError,
    budget_curves,
    budget_ladder,
    min_budgets,
)
from cupel_np._version import __version__
from cupel_np.errors import (
    BudgetOverflowError,
    CupelError,
    InvalidConfigError,
    InvalidInputTypeError,
    PinnedExceedsBudgetError,
    ScarcityError,
    TableTooLargeError,
    TooFewVariantsError,
)
from cupel_np.model.presets import PRESETS, preset, policy_from_dotnet, policy_to_dotnet
from cupel_np.model.grid import Sweep
from cupel_np.model.items import ContextItem, ItemTable
from cupel_np.analysis.pipeline import Pipeline, policy_sensitivity_from_pipelines, run_policy
from cupel_np.model.policy import (
    CompositeScorer,
    CountConstrainedKnapsackSlice,
    CountQuotaEntry,
    CountQuotaSlice,
    DecayScorer,
    ExponentialCurve,
    FrequencyScorer,
    GreedySlice,
    KindScorer,
    KnapsackSlice,
    MetadataKeyScorer,
    MetadataTrustScorer,
    Policy,
    PriorityScorer,
    QuotaEntry,
    QuotaSlice,
    RecencyScorer,
    ReflexiveScorer,
    ScaledScorer,
    StepCurve,
    TagScorer,
    WindowCurve,
)
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
