"""cupel_np: the Cupel context-selection specification as a vectorized NumPy/Numba engine."""

from .budget import ContextBudget
from .budget_sim import (
    BudgetCurves,
    NonMonotonicSlicerError,
    budget_curves,
    budget_ladder,
    min_budgets,
)
from .errors import (
    BudgetOverflowError,
    CupelError,
    InvalidConfigError,
    InvalidInputTypeError,
    PinnedExceedsBudgetError,
    ScarcityError,
    TableTooLargeError,
    TooFewVariantsError,
)
from .dotnet import PRESETS, preset, policy_from_dotnet, policy_to_dotnet
from .grid import Sweep
from .items import ContextItem, ItemTable
from .pipeline import Pipeline, policy_sensitivity_from_pipelines, run_policy
from .policy import (
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
from .report import (
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
from .sensitivity import (
    ItemStatus,
    PolicySensitivityDiffEntry,
    PolicySensitivityReport,
    SweepResult,
    policy_sensitivity,
    sweep,
)

__version__ = "0.1.0"
