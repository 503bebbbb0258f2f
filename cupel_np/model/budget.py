"""ContextBudget: the validated token budget, and the spec's effective-budget formula."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from cupel_np.errors import InvalidConfigError
from cupel_np.model.fields import require_keys, require_mapping, require_number, require_token_count
from cupel_np.text import ascii_fold, is_blank


def require_budget_int(name: str, value) -> int:
    """``ContextBudget.<name>`` as an integer token count within ±2**62 (also used for the
    budget simulation's integer arguments); raises ``InvalidConfigError`` /
    ``InvalidInputTypeError`` naming ``ContextBudget.<name>``. Not ``model.fields.require_int``
    (which takes the full field name and options)."""
    return require_token_count(f"ContextBudget.{name}", value)


#: the older name of ``require_budget_int`` (kept for code written against it)
require_int = require_budget_int


#: the keys of a budget table (``ContextBudget.from_dict``, grid files' ``[[budgets]]``)
BUDGET_KEYS = (
    "max_tokens",
    "target_tokens",
    "output_reserve",
    "reserved_slots",
    "estimation_safety_margin_percent",
)


@dataclass(frozen=True)
class ContextBudget:
    """Token budget for one selection run.

    ``max_tokens`` is the hard ceiling (the model's window), ``target_tokens`` the slicer's soft
    goal, ``output_reserve`` tokens kept for the answer, ``reserved_slots`` per-kind reservations
    (subtracted from the effective budget, as the spec says), and
    ``estimation_safety_margin_percent`` a multiplicative reduction applied last.
    """

    max_tokens: int
    target_tokens: int
    output_reserve: int = 0
    reserved_slots: Mapping[str, int] | None = None
    estimation_safety_margin_percent: float = 0.0
    _reserved_total: int = field(init=False, repr=False, compare=False, default=0)

    def __post_init__(self) -> None:
        max_tokens = require_budget_int("max_tokens", self.max_tokens)
        target = require_budget_int("target_tokens", self.target_tokens)
        reserve = require_budget_int("output_reserve", self.output_reserve)
        if max_tokens < 0:
            raise InvalidConfigError(f"ContextBudget.max_tokens must be >= 0, got {max_tokens}")
        if target < 0:
            raise InvalidConfigError(f"ContextBudget.target_tokens must be >= 0, got {target}")
        if target > max_tokens:
            raise InvalidConfigError(f"ContextBudget.target_tokens ({target}) must be <= max_tokens ({max_tokens})")
        if reserve < 0:
            raise InvalidConfigError(f"ContextBudget.output_reserve must be >= 0, got {reserve}")
        if reserve > max_tokens:
            raise InvalidConfigError(f"ContextBudget.output_reserve ({reserve}) must be <= max_tokens ({max_tokens})")
        margin = require_number("ContextBudget.estimation_safety_margin_percent", self.estimation_safety_margin_percent)
        if not (0.0 <= margin <= 100.0):
            raise InvalidConfigError(
                f"ContextBudget.estimation_safety_margin_percent must be in [0.0, 100.0], got {margin!r}"
            )
        slots: dict[str, int] = {}
        raw_slots = require_mapping(
            "ContextBudget.reserved_slots", self.reserved_slots or {}, "a mapping of kind -> count"
        )
        seen: dict[str, str] = {}
        for kind, count in raw_slots.items():
            if not isinstance(kind, str) or is_blank(kind):
                raise InvalidConfigError(f"ContextBudget.reserved_slots has an empty or non-string kind: {kind!r}")
            count = require_budget_int(f"reserved_slots[{kind!r}]", count)
            if count < 0:
                raise InvalidConfigError(f"ContextBudget.reserved_slots[{kind!r}] must be >= 0, got {count}")
            folded = ascii_fold(kind)
            if folded in seen:
                raise InvalidConfigError(
                    f"ContextBudget.reserved_slots names kind {kind!r} twice "
                    f"(kinds compare case-insensitively; also given as {seen[folded]!r})"
                )
            seen[folded] = kind
            slots[kind] = count
        total = sum(slots.values())
        if total >= 2**62:
            raise InvalidConfigError(
                f"ContextBudget.reserved_slots add up to {total}, past 2**62 (budget sums must fit in 64-bit integers)"
            )
        object.__setattr__(self, "max_tokens", max_tokens)
        object.__setattr__(self, "target_tokens", target)
        object.__setattr__(self, "output_reserve", reserve)
        object.__setattr__(self, "estimation_safety_margin_percent", margin)
        object.__setattr__(self, "reserved_slots", MappingProxyType(slots))
        object.__setattr__(self, "_reserved_total", total)

    def __hash__(self) -> int:
        return hash(
            (
                self.max_tokens,
                self.target_tokens,
                self.output_reserve,
                tuple(sorted((self.reserved_slots or {}).items())),
                self.estimation_safety_margin_percent,
            )
        )

    def __eq__(self, other) -> bool:
        if not isinstance(other, ContextBudget):
            return NotImplemented
        return (
            self.max_tokens == other.max_tokens
            and self.target_tokens == other.target_tokens
            and self.output_reserve == other.output_reserve
            and dict(self.reserved_slots or {}) == dict(other.reserved_slots or {})
            and self.estimation_safety_margin_percent == other.estimation_safety_margin_percent
        )

    @property
    def reserved_tokens(self) -> int:
        """The ``reserved_slots`` values summed over kinds (an integer within 2**62)."""
        return self._reserved_total

    def effective(self, pinned_tokens: int) -> tuple[int, int]:
        """``(effective_max, effective_target)`` for the slicer, per the spec's formula."""
        return effective_budget(
            self.max_tokens,
            self.target_tokens,
            self.output_reserve,
            self._reserved_total,
            self.estimation_safety_margin_percent,
            pinned_tokens,
        )

    def to_dict(self) -> dict:
        """The budget as its dict (policy/grid file) form: the ``BUDGET_KEYS``, tokens as
        integers."""
        return {
            "max_tokens": self.max_tokens,
            "target_tokens": self.target_tokens,
            "output_reserve": self.output_reserve,
            "reserved_slots": dict(self.reserved_slots or {}),
            "estimation_safety_margin_percent": self.estimation_safety_margin_percent,
        }

    @classmethod
    def from_dict(cls, d: Mapping) -> ContextBudget:
        """From a budget table (``ContextBudget``'s field names); an unknown key is an error."""
        require_mapping("budget", d)
        require_keys("budget", d, BUDGET_KEYS)
        missing = [k for k in ("max_tokens", "target_tokens") if k not in d]
        if missing:
            raise InvalidConfigError(f"budget is missing required field(s): {', '.join(missing)}")
        return cls(**d)


def effective_budget(
    max_tokens: int,
    target_tokens: int,
    output_reserve: int,
    reserved_tokens: int,
    margin_percent: float,
    pinned_tokens: int,
) -> tuple[int, int]:
    """The spec's COMPUTE-EFFECTIVE-BUDGET (reserved slots and safety margin included)."""
    eff_max = max(0, max_tokens - output_reserve - pinned_tokens - reserved_tokens)
    eff_target = max(0, target_tokens - pinned_tokens - reserved_tokens)
    eff_target = min(eff_target, eff_max)
    if margin_percent > 0:
        multiplier = 1.0 - margin_percent / 100.0
        eff_max = math.floor(eff_max * multiplier)
        eff_target = math.floor(eff_target * multiplier)
        eff_target = min(eff_target, eff_max)
    return int(eff_max), int(eff_target)
