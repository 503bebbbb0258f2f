"""``Sweep``: build a variant list from a grid (policies x weights x slicers x placers x
budgets) with readable labels."""

from __future__ import annotations

import dataclasses
import itertools
from typing import Iterable, Iterator, Mapping, Sequence

from .budget import ContextBudget
from .errors import InvalidConfigError, InvalidInputTypeError
from .policy import (
    CompositeScorer,
    GreedySlice,
    KnapsackSlice,
    Policy,
    slicer_from_dict,
)


def _slicer_label(sl) -> str:
    if isinstance(sl, KnapsackSlice):
        return f"knapsack({sl.bucket_size})"
    return sl.name


def _as_slicer(x):
    if isinstance(x, str):
        return slicer_from_dict({"slicer": x})
    if isinstance(x, Mapping):
        return slicer_from_dict(x)
    if dataclasses.is_dataclass(x) and hasattr(x, "name"):
        return x
    raise InvalidInputTypeError(f"a slicer must be a name, a config table or a slicer spec, got {x!r}")


class Sweep:
    """A grid of variants.

    ``policies``: preset names, Policies, or a mapping label -> Policy. ``weights``: mappings
    scorer type -> weight, applied to each policy's composite scorer entries of that type.
    ``slicers`` / ``placers`` / ``budgets``: values to try. A dimension left out keeps each
    policy's own setting (and the sweep's default budget). Labels name every dimension that
    takes more than one value, joined with ``|``."""

    def __init__(self, policies, *, weights: Sequence[Mapping[str, float]] | None = None,
                 slicers: Sequence | None = None, placers: Sequence[str] | None = None,
                 budgets: Sequence[ContextBudget] | None = None):
        from .dotnet import preset

        if isinstance(policies, Mapping):
            pols = list(policies.items())
        else:
            if isinstance(policies, (str, Policy)):
                policies = [policies]
            pols = []
            for p in policies:
                if isinstance(p, str):
                    pols.append((p, preset(p)))
                elif isinstance(p, Policy):
                    pols.append((p.name or f"policy{len(pols)}", p))
                else:
                    raise InvalidInputTypeError(f"policies must be preset names or Policies, got {p!r}")
        if not pols:
            raise InvalidConfigError("Sweep needs at least one policy")
        for label, p in pols:
            if not isinstance(p, Policy):
                raise InvalidInputTypeError(f"policy {label!r} is not a Policy: {p!r}")
        self.policies = pols
        if isinstance(weights, Mapping):
            weights = [weights]
        for w in weights or ():
            if not isinstance(w, Mapping):
                raise InvalidInputTypeError(f"weights must be mappings of scorer type -> weight, got {w!r}")
            for k, x in w.items():
                if isinstance(x, bool) or not isinstance(x, (int, float)):
                    raise InvalidInputTypeError(f"weight for {k!r} must be a number, got {x!r}")
        self.weights = [dict(w) for w in weights] if weights else [None]
        self.slicers = [_as_slicer(s) for s in slicers] if slicers else [None]
        self.placers = list(placers) if placers else [None]
        for b in budgets or ():
            if not isinstance(b, ContextBudget):
                raise InvalidInputTypeError(f"budgets must be ContextBudgets, got {b!r}")
        self.budgets = list(budgets) if budgets else [None]

    def __len__(self) -> int:
        return len(self.policies) * len(self.weights) * len(self.slicers) * len(self.placers) * len(self.budgets)

    def __iter__(self) -> Iterator[tuple[str, Policy, ContextBudget | None]]:
        return iter(self.variants())

    def variants(self) -> list[tuple[str, Policy, ContextBudget | None]]:
        out = []
        for (pl, pol), w, sl, pc, b in itertools.product(
                self.policies, self.weights, self.slicers, self.placers, self.budgets):
            parts = [pl]
            p = pol
            if w is not None:
                p = _reweight(p, w, pl)
                if len(self.weights) > 1:
                    parts.append(",".join(f"{k}={v:g}" for k, v in w.items()))
            if sl is not None:
                p = dataclasses.replace(p, slicer=sl)
                if len(self.slicers) > 1:
                    parts.append(_slicer_label(sl))
            if pc is not None:
                p = dataclasses.replace(p, placer=pc)
                if len(self.placers) > 1:
                    parts.append(p.placer)
            if b is not None and len(self.budgets) > 1:
                parts.append(f"{b.max_tokens}/{b.target_tokens}")
            out.append(("|".join(parts), p, b))
        return out


def _reweight(policy: Policy, weights: Mapping[str, float], label: str) -> Policy:
    sc = policy.scorer
    entries = list(sc.entries) if isinstance(sc, CompositeScorer) else [(sc, 1.0)]
    types = {s.type_name for s, _ in entries}
    unknown = set(weights) - types
    if unknown:
        raise InvalidConfigError(
            f"policy {label!r} has no {', '.join(sorted(unknown))} scorer to reweight "
            f"(its scorers: {', '.join(sorted(types))})"
        )
    new = tuple((s, float(weights.get(s.type_name, w))) for s, w in entries)
    return dataclasses.replace(policy, scorer=CompositeScorer(new) if len(new) > 1 else new[0][0])
