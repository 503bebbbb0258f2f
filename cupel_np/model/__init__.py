"""What the user hands in, as validated data: items (``items.py``) and their column checks
(``columns.py``), budgets, scorer specs (``scorers.py``, with the one registry of scorer type
names; ``plugins.py`` enters the user's own names in it), slicer specs (``slicers.py``), ``Policy`` and its dict shape (``policy.py``), the .NET
policy shape (``dotnet.py``), presets and grids of variants (``grid.py``)."""

from cupel_np.model.budget import ContextBudget
from cupel_np.model.curves import ExponentialCurve, StepCurve, WindowCurve
from cupel_np.model.dotnet import policy_to_dotnet
from cupel_np.model.grid import Sweep, VariantGrid
from cupel_np.model.items import ContextItem, ItemTable
from cupel_np.model.plugins import register_scorer, unregister_scorer
from cupel_np.model.policy import Policy, policy_from_dotnet
from cupel_np.model.presets import PRESETS, preset
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

# Grouped by source file.
__all__ = [
    # budget.py
    "ContextBudget",
    # curves.py
    "ExponentialCurve",
    "StepCurve",
    "WindowCurve",
    # dotnet.py
    "policy_to_dotnet",
    # grid.py
    "Sweep",
    "VariantGrid",
    # items.py
    "ContextItem",
    "ItemTable",
    # policy.py
    "Policy",
    "policy_from_dotnet",
    # presets.py
    "PRESETS",
    "preset",
    # scorers.py
    "ColumnScorer",
    "CompositeScorer",
    "DecayScorer",
    "FrequencyScorer",
    "FunctionScorer",
    "KindScorer",
    "MetadataKeyScorer",
    "MetadataTrustScorer",
    "PriorityScorer",
    "RecencyScorer",
    "ReflexiveScorer",
    "ScaledScorer",
    "TagScorer",
    # plugins.py
    "register_scorer",
    "unregister_scorer",
    # slicers.py
    "CountConstrainedKnapsackSlice",
    "CountQuotaEntry",
    "CountQuotaSlice",
    "GreedySlice",
    "KnapsackSlice",
    "QuotaEntry",
    "QuotaSlice",
]
