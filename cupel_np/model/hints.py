"""Type aliases for what the public API accepts (for annotations; nothing here runs)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias

from cupel_np._files import PathOrPaths, StrPath
from cupel_np.model.budget import ContextBudget
from cupel_np.model.grid import PolicySource, Sweep, Variant
from cupel_np.model.items import ContextItem, ItemTable
from cupel_np.model.policy import Policy

#: an item table, or the items of one set
Items: TypeAlias = ItemTable | Sequence[ContextItem]
#: a policy, or an object carrying one (a ``Pipeline``)
PolicyLike: TypeAlias = Policy | PolicySource
#: ``(label, policy)``, or ``(label, policy, budget)`` where a per-variant budget is allowed
VariantSpec: TypeAlias = Variant | tuple[str, PolicyLike] | tuple[str, PolicyLike, ContextBudget | None]
#: what sweeps accept as their variants
Variants: TypeAlias = Sweep | Sequence[VariantSpec]
#: an item set's key (None for a table without a set column)
SetKey: TypeAlias = object

__all__ = ["Items", "PathOrPaths", "PolicyLike", "SetKey", "StrPath", "VariantSpec", "Variants"]
