"""The decay scorer's curves (exponential, window and step), each a frozen, validated spec, and
the reader of a decay scorer's ``curve`` table (EXTENSIONS.md)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cupel_np.errors import InvalidConfigError
from cupel_np.model.fields import require_keys, require_number, require_str, require_tables
from cupel_np.text import ascii_fold


@dataclass(frozen=True)
class ExponentialCurve:
    """A decay curve halving the score every ``half_life_secs`` seconds of the item's age (``2
    ** (-age / half_life)``). Raises ``InvalidConfigError`` unless ``half_life_secs`` is finite
    and > 0."""

    half_life_secs: float

    def __post_init__(self):
        v = require_number("decay curve half_life_secs", self.half_life_secs)
        if not (v > 0.0) or not math.isfinite(v):
            raise InvalidConfigError(f"decay curve half_life_secs must be > 0 and finite, got {v!r}")
        object.__setattr__(self, "half_life_secs", v)

    def to_dict(self) -> dict[str, Any]:
        """``{"type": "exponential", "half_life_secs": ...}``, the curve's policy-file form."""
        return {"type": "exponential", "half_life_secs": self.half_life_secs}


@dataclass(frozen=True)
class WindowCurve:
    """A decay curve scoring items younger than ``max_age_secs`` seconds 1 and the rest 0.
    Raises ``InvalidConfigError`` unless ``max_age_secs`` is finite and > 0."""

    max_age_secs: float

    def __post_init__(self):
        v = require_number("decay curve max_age_secs", self.max_age_secs)
        if not (v > 0.0) or not math.isfinite(v):
            raise InvalidConfigError(f"decay curve max_age_secs must be > 0, got {v!r}")
        object.__setattr__(self, "max_age_secs", v)

    def to_dict(self) -> dict[str, Any]:
        """``{"type": "window", "max_age_secs": ...}``, the curve's policy-file form."""
        return {"type": "window", "max_age_secs": self.max_age_secs}


@dataclass(frozen=True)
class StepCurve:
    """A decay curve of age windows: ``windows`` are ``(max_age_secs, score)`` pairs in order;
    an item takes the score of the first window whose ``max_age_secs`` is above its age
    (seconds), or the last window's score when it is older than all. Raises
    ``InvalidConfigError`` for no windows or a window age that is not finite and > 0."""

    windows: tuple[tuple[float, float], ...]

    def __post_init__(self):
        if not self.windows:
            raise InvalidConfigError("decay step curve needs at least one window")
        clean = []
        for i, (age, score) in enumerate(self.windows):
            age = require_number(f"decay step window {i} max_age_secs", age)
            score = require_number(f"decay step window {i} score", score)
            if not (age > 0.0) or not math.isfinite(age):
                raise InvalidConfigError(f"decay step window {i} max_age_secs must be > 0, got {age!r}")
            clean.append((age, score))
        object.__setattr__(self, "windows", tuple(clean))

    def to_dict(self) -> dict[str, Any]:
        """``{"type": "step", "windows": [{"max_age_secs": ..., "score": ...}, ...]}``, the
        curve's policy-file form."""
        return {"type": "step", "windows": [{"max_age_secs": a, "score": s} for a, s in self.windows]}


_CURVE_KEYS = {"exponential": ("half_life_secs",), "window": ("max_age_secs",), "step": ("windows",)}


def curve_from_dict(c: Mapping, where: str) -> ExponentialCurve | StepCurve | WindowCurve:
    ct = ascii_fold(require_str(f"{where}.type", c.get("type", "")))
    if ct not in _CURVE_KEYS:
        raise InvalidConfigError(
            f"{where}: unknown decay curve type {c.get('type')!r}; expected exponential, step or window"
        )
    require_keys(where, c, ("type", *_CURVE_KEYS[ct]), what=f"for curve type {ct!r}")
    # the curves check their own arguments (type and range), naming the field
    if ct == "exponential":
        half_life: Any = c.get("half_life_secs")
        return ExponentialCurve(half_life)
    if ct == "window":
        max_age: Any = c.get("max_age_secs")
        return WindowCurve(max_age)
    windows: list[Any] = []
    for i, w in enumerate(require_tables(f"{where}.windows", c.get("windows") or [], "window")):
        require_keys(f"{where}.windows[{i}]", w, ("max_age_secs", "score"))
        windows.append((w.get("max_age_secs"), w.get("score")))
    return StepCurve(tuple(windows))
