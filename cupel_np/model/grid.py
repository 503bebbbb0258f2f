"""``Sweep``: build a variant list from a grid (policies x weights x slicers x placers x
budgets) with readable labels."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cupel_np.errors import InvalidConfigError, InvalidInputTypeError
from cupel_np.model.budget import ContextBudget
from cupel_np.model.fields import suggestion
from cupel_np.model.policy import Policy
from cupel_np.model.presets import preset
from cupel_np.model.scorers import CompositeScorer
from cupel_np.model.slicers import KnapsackSlice, Slicer, slicer_from_dict


def _slicer_label(sl) -> str:
    if isinstance(sl, KnapsackSlice):
        return f"knapsack({sl.bucket_size})"
    return sl.name


def _fmt(v) -> str:
    """Compact, exact rendering of a config value for a label."""
    if isinstance(v, Mapping):
        return ",".join(f"{k}={_fmt(x)}" for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return "[" + ";".join(_fmt(x) for x in v) + "]"
    if isinstance(v, float):
        return repr(v)
    return str(v)


def _slicer_label_full(sl) -> str:
    """Every option of a slicer (used when two slicers of a grid share a short label)."""
    opts = {k: v for k, v in sl.to_dict().items() if k != "slicer"}
    return f"{sl.name}({_fmt(opts)})" if opts else sl.name


def _weights_label(w: Mapping[str, float]) -> str:
    return ",".join(f"{k}={v:g}" for k, v in w.items())


def _weights_label_full(w: Mapping[str, float]) -> str:
    return ",".join(f"{k}={float(v)!r}" for k, v in w.items())


def _budget_label(b: ContextBudget) -> str:
    return f"{b.max_tokens}/{b.target_tokens}"


_BUDGET_EXTRAS = (
    ("reserve", lambda b: str(b.output_reserve)),
    ("slots", lambda b: "+".join(f"{k}:{v}" for k, v in sorted(b.reserved_slots.items())) or "none"),
    ("margin", lambda b: f"{b.estimation_safety_margin_percent!r}%"),
)


def _budget_labels(budgets: Sequence[ContextBudget]) -> list[str]:
    """``max/target``, plus each other field that takes more than one value in the grid."""
    labels = [_budget_label(b) for b in budgets]
    if len(set(labels)) == len(labels):
        return labels
    for name, get in _BUDGET_EXTRAS:
        values = [get(b) for b in budgets]
        if len(set(values)) > 1:
            labels = [f"{lab} {name}={v}" for lab, v in zip(labels, values)]
    return labels


def _dimension_labels(dim: str, values: list, short, full) -> list[str]:
    """Labels for one grid dimension: the short form when it tells every value apart, else the
    full form. A value given twice is an error naming the dimension (its variants would be
    identical and their labels equal)."""
    for j, v in enumerate(values):
        for i in range(j):
            if values[i] == v:
                raise InvalidConfigError(f"Sweep {dim}[{j}] repeats {dim}[{i}] ({v!r}); give each value once")
    labels = [short(v) for v in values]
    if len(set(labels)) < len(labels):
        labels = [full(v) for v in values]
    return labels


def _as_slicer(x, where: str = "slicer"):
    if isinstance(x, str):
        return slicer_from_dict({"slicer": x}, where)
    if isinstance(x, Mapping):
        return slicer_from_dict(x, where)
    if dataclasses.is_dataclass(x) and hasattr(x, "name"):
        return x
    raise InvalidInputTypeError(f"a slicer must be a name, a config table or a slicer spec, got {x!r}")


class VariantGrid:
    """A grid of variants (also importable as ``Sweep``, its older name; ``cupel_np.sweep`` is
    the function that runs variants over item sets).

    ``policies``: preset names, Policies, or a mapping label -> Policy. ``weights``: mappings
    scorer type -> weight, applied to each policy's composite scorer entries of that type.
    ``slicers`` / ``placers`` / ``budgets``: values to try. A dimension left out keeps each
    policy's own setting (and the sweep's default budget). Labels name every dimension that
    takes more than one value, joined with ``|``: short forms (``knapsack(50)``,
    ``8000/6000``) when they tell the values apart, otherwise every option (a slicer's full
    configuration; a budget's reserve / slots / margin, whichever vary). A value given twice in
    one dimension is an error."""

    def __init__(
        self,
        policies: Mapping[str, Policy] | Sequence[str | Policy] | str | Policy,
        *,
        weights: Sequence[Mapping[str, float]] | None = None,
        slicers: Sequence[Slicer | str | Mapping[str, Any]] | None = None,
        placers: Sequence[str] | None = None,
        budgets: Sequence[ContextBudget] | None = None,
        groups: Sequence[str | bool | None] | None = None,
    ):
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
        self.slicers = [_as_slicer(s, f"slicers[{i}]") for i, s in enumerate(slicers)] if slicers else [None]
        self.placers = list(placers) if placers else [None]
        # groups (docs/tool-pairs.md): a column name, or None / False / "" for "every item alone"
        self.groups = [_as_groups(g, f"groups[{i}]") for i, g in enumerate(groups)] if groups else [_KEEP]
        if groups and len(set(self.groups)) < len(self.groups):
            raise InvalidConfigError(f"groups: a value is given twice ({list(groups)!r})")
        for b in budgets or ():
            if not isinstance(b, ContextBudget):
                raise InvalidInputTypeError(f"budgets must be ContextBudgets, got {b!r}")
        self.budgets = list(budgets) if budgets else [None]
        self._policy_labels = _unique_policy_labels([label for label, _ in pols])
        self._weight_labels = (
            _dimension_labels("weights", self.weights, _weights_label, _weights_label_full) if weights else [""]
        )
        self._slicer_labels = (
            _dimension_labels("slicers", self.slicers, _slicer_label, _slicer_label_full) if slicers else [""]
        )
        self._placer_labels = _dimension_labels("placers", self.placers, str, str) if placers else [""]
        self._group_labels = [f"groups={g}" if g else "no groups" for g in self.groups]
        self._budget_labels = [""]
        if budgets:
            _dimension_labels("budgets", self.budgets, _budget_label, _budget_label)  # repeats
            self._budget_labels = _budget_labels(budgets)

    def __len__(self) -> int:
        return (
            len(self.policies)
            * len(self.weights)
            * len(self.slicers)
            * len(self.placers)
            * len(self.groups)
            * len(self.budgets)
        )

    def __iter__(self) -> Iterator[tuple[str, Policy, ContextBudget | None]]:
        return iter(self.variants())

    def variants(self) -> list[tuple[str, Policy, ContextBudget | None]]:
        """Every ``(label, Policy, budget or None)`` of the grid, in the order of its dimensions
        (policies, weights, slicers, placers, budgets); None keeps the sweep's default
        budget."""
        out = []
        for (pi, (_, pol)), (wi, w), (si, sl), (ci, pc), (gi, g), (bi, b) in itertools.product(
            enumerate(self.policies),
            enumerate(self.weights),
            enumerate(self.slicers),
            enumerate(self.placers),
            enumerate(self.groups),
            enumerate(self.budgets),
        ):
            parts = [self._policy_labels[pi]]
            p = pol
            if w is not None:
                p = _reweight(p, w, self.policies[pi][0])
                if len(self.weights) > 1:
                    parts.append(self._weight_labels[wi])
            if sl is not None:
                p = dataclasses.replace(p, slicer=sl)
                if len(self.slicers) > 1:
                    parts.append(self._slicer_labels[si])
            if pc is not None:
                p = dataclasses.replace(p, placer=pc)
                if len(self.placers) > 1:
                    parts.append(self._placer_labels[ci])
            if g is not _KEEP:
                p = dataclasses.replace(p, groups=g)
                if len(self.groups) > 1:
                    parts.append(self._group_labels[gi])
            if b is not None and len(self.budgets) > 1:
                parts.append(self._budget_labels[bi])
            out.append(("|".join(parts), p, b))
        return out


#: the groups dimension left out: each policy keeps its own ``groups``
_KEEP: Any = object()


def _as_groups(g: Any, where: str) -> str | None:
    if g is None or g is False or g == "":
        return None
    if isinstance(g, str) and g.strip():
        return g
    raise InvalidConfigError(f'{where}: a group column name, or none/false/"" for no groups, got {g!r}')


#: the older name of ``VariantGrid`` (kept: code and docs written against it still work)
Sweep = VariantGrid


def _unique_policy_labels(labels: list[str]) -> list[str]:
    """Policy labels, with ``#2``, ``#3``... appended to repeats (two Policies with one name)."""
    seen: dict[str, int] = {}
    out = []
    for lab in labels:
        seen[lab] = seen.get(lab, 0) + 1
        out.append(lab if seen[lab] == 1 else f"{lab}#{seen[lab]}")
    return out


def _reweight(policy: Policy, weights: Mapping[str, float], label: str) -> Policy:
    sc = policy.scorer
    entries = list(sc.entries) if isinstance(sc, CompositeScorer) else [(sc, 1.0)]
    types = {s.type_name for s, _ in entries}
    unknown = set(weights) - types
    if unknown:
        first = sorted(unknown)[0]
        raise InvalidConfigError(
            f"policy {label!r} has no {', '.join(sorted(unknown))} scorer to reweight"
            f"{suggestion(first, types)} (its scorers: {', '.join(sorted(types))})"
        )
    new = tuple((s, float(weights.get(s.type_name, w))) for s, w in entries)
    return dataclasses.replace(policy, scorer=CompositeScorer(new) if len(new) > 1 else new[0][0])


@dataclass(frozen=True)
class Variant:
    """One column of a sweep: a label, the policy and the budget it runs with."""

    label: str
    policy: Policy
    budget: ContextBudget


class PolicySource:
    """Anything that carries a ``policy`` to run: sensitivity variants accept these (a
    ``Pipeline``) as well as bare Policies."""

    policy: Policy


def as_variants(variants, budget, *, allow_budget: bool) -> list[Variant]:
    """Normalise what sweeps accept (a Sweep, preset names, or (label, Policy | Pipeline[,
    budget]) pairs) into Variants with unique, non-empty labels; ``budget`` fills in a missing
    one. A preset name stands for ``(name, preset(name))``, as in ``Sweep`` and
    ``budget_curves``."""
    if isinstance(variants, Sweep):
        variants = variants.variants()
    if isinstance(variants, (str, bytes)) or not isinstance(variants, Sequence):
        raise InvalidInputTypeError(
            f"variants must be a sequence of (label, Policy | Pipeline) pairs, got {type(variants).__name__}"
        )
    out: list[Variant] = []
    seen: set[str] = set()
    for i, v in enumerate(variants):
        if isinstance(v, Variant):
            label, pol, bud = v.label, v.policy, v.budget
        elif isinstance(v, str):
            label, pol, bud = v, preset(v), budget
        else:
            if not isinstance(v, (tuple, list)) or len(v) not in (2, 3):
                raise InvalidInputTypeError(
                    f"variant {i} must be a preset name, a (label, Policy | Pipeline) pair"
                    + (" or a (label, policy, budget) triple" if allow_budget else "")
                    + f", got {v!r}"
                )
            if len(v) == 3 and not allow_budget:
                raise InvalidInputTypeError(
                    f"variant {i}: per-variant budgets belong to cupel_np.sweep; "
                    "policy_sensitivity takes one explicit budget"
                )
            label, pol = v[0], v[1]
            bud = v[2] if len(v) == 3 and v[2] is not None else budget
        if not isinstance(label, str):
            raise InvalidInputTypeError(f"variant {i}: label must be a string, got {label!r}")
        if not label.strip():
            raise InvalidConfigError(f"variant {i}: label must not be empty")
        if label in seen:
            raise InvalidConfigError(f"variant {i}: label {label!r} is used twice; labels must be unique")
        seen.add(label)
        if isinstance(pol, PolicySource):  # a Pipeline
            pol = pol.policy
        if not isinstance(pol, Policy):
            raise InvalidInputTypeError(f"variant {label!r}: expected a Policy or a Pipeline, got {type(pol).__name__}")
        if not isinstance(bud, ContextBudget):
            raise InvalidInputTypeError(f"variant {label!r}: budget must be a ContextBudget, got {type(bud).__name__}")
        out.append(Variant(label, pol, bud))
    return out


def check_on_error(on_error: str) -> None:
    if on_error not in ("raise", "collect"):
        raise InvalidConfigError(f"on_error must be 'raise' or 'collect', got {on_error!r}")
