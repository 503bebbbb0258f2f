"""Field validators shared by the model (items, budget, scorer / slicer specs, policy files).

Each takes ``where`` (how the message names the field: ``ContextBudget.max_tokens``,
``scorers[0].weight``) and the value, returns the value in its canonical Python type, and
raises ``InvalidInputTypeError`` for a value of the wrong type or ``InvalidConfigError`` for
one out of range, with one message shape: ``<where> must be <what>, got <type> <value>``.

``require_keys`` is the check every dict / TOML / JSON reader runs on each table it reads: a
key the reader does not know is an error naming the key and the table, with a "did you mean"
suggestion when a known key is close (a typo must never silently change a policy).
"""

from __future__ import annotations

import contextlib
import contextvars
import difflib
import math
from collections.abc import Collection, Iterable, Iterator, Mapping
from typing import Any

import numpy as np

from cupel_np.errors import InvalidConfigError, InvalidInputTypeError
from cupel_np.text import is_blank

#: token counts and budgets stay below this so every sum fits in int64
TOKEN_LIMIT = 2**62


def describe(v: Any) -> str:
    """``<type> <repr>`` of a rejected value, as every message here shows it."""
    return f"{type(v).__name__} {v!r}"


def wrong_type(where: str, what: str, v: Any) -> InvalidInputTypeError:
    """The error for a value of the wrong type (to raise)."""
    return InvalidInputTypeError(f"{where} must be {what}, got {describe(v)}")


def is_int(v: Any) -> bool:
    """A Python or NumPy integer, not a bool."""
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def require_int(where: str, v: Any, *, integral_float: bool = False, optional: bool = False, suffix: str = "") -> int:
    """An integer (not a bool). ``integral_float``: also accept a float with no fractional
    part (JSON and TOML readers write ``5.0`` for 5). ``optional``: the message says None is
    allowed too (the caller handles None). ``suffix`` is appended to the message."""
    if is_int(v):
        return int(v)
    if integral_float and isinstance(v, float) and v.is_integer():
        return int(v)
    what = "an integer or None" if optional else "an integer"
    raise InvalidInputTypeError(f"{where} must be {what}, got {describe(v)}{suffix}")


def require_token_count(where: str, v: Any) -> int:
    """An integer within ±2**62 (so sums of them fit in 64 bits)."""
    n = require_int(where, v)
    if abs(n) >= TOKEN_LIMIT:
        raise InvalidConfigError(f"{where} must be greater than -2**62 and less than 2**62, got {n}")
    return n


def require_number(where: str, v: Any, *, optional: bool = False) -> float:
    """An int or float (not a bool), as a float. ``optional``: the message says None is allowed
    too (the caller handles None)."""
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise wrong_type(where, "a number or None" if optional else "a number", v)
    return float(v)


def require_weight(where: str, v: Any, *, positive: bool = False) -> float:
    """A finite number >= 0 (``positive``: > 0), as a float: weights and boosts."""
    w = require_number(where, v)
    if not math.isfinite(w):
        raise InvalidConfigError(f"{where} must be finite, got {w!r}")
    if positive and w <= 0.0:
        raise InvalidConfigError(f"{where} must be positive, got {w!r}")
    if w < 0.0:
        raise InvalidConfigError(f"{where} must be non-negative, got {w!r}")
    return w


def require_str(where: str, v: Any) -> str:
    if not isinstance(v, str):
        raise wrong_type(where, "a string", v)
    return v


def require_nonblank(where: str, v: Any) -> str:
    """A string that is not empty or whitespace-only (kinds, sources)."""
    v = require_str(where, v)
    if is_blank(v):
        raise InvalidConfigError(f"{where} must not be empty or whitespace-only, got {v!r}")
    return v


def require_bool(where: str, v: Any) -> bool:
    if not isinstance(v, (bool, np.bool_)):
        raise wrong_type(where, "a bool", v)
    return bool(v)


def require_mapping(where: str, v: Any, what: str = "a table") -> Mapping:
    if not isinstance(v, Mapping):
        raise wrong_type(where, what, v)
    return v


def suggestion(key: str, known: Iterable[str]) -> str:
    """`` (did you mean 'weight'?)`` when a known key is close to ``key`` (by spelling, by case
    and underscores, or as the one known key it is a prefix of), else ``""``."""
    key, names = str(key), [str(k) for k in known]
    close = difflib.get_close_matches(key, names, n=1, cutoff=0.6)
    if not close:
        squash = {k.lower().replace("_", "").replace("-", ""): k for k in names}
        hit = squash.get(key.lower().replace("_", "").replace("-", ""))
        close = [hit] if hit else []
    if not close and len(key) >= 3:
        prefixed = [k for k in names if k.lower().startswith(key.lower())]
        close = prefixed if len(prefixed) == 1 else []
    return f" (did you mean {close[0]!r}?)" if close else ""


#: set while reading data whose format says unknown keys are ignored (conformance vectors:
#: EXTENSIONS.md "unknown keys must be ignored, never rejected"); see ``unknown_keys_ignored``
_IGNORE_UNKNOWN_KEYS: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "cupel_np_ignore_unknown_keys", default=False
)


@contextlib.contextmanager
def unknown_keys_ignored() -> Iterator[None]:
    """Within the block ``require_keys`` lets unknown keys pass (they are then never read).
    Only for formats that promise it, such as conformance vectors; policy files, grids and
    checks files stay strict, where a typo must never silently change a policy."""
    token = _IGNORE_UNKNOWN_KEYS.set(True)
    try:
        yield
    finally:
        _IGNORE_UNKNOWN_KEYS.reset(token)


def require_keys(where: str, d: Mapping, allowed: Collection[str], *, what: str = "") -> None:
    """Every key of ``d`` is in ``allowed``, else an error naming the unknown keys, where they
    are, and the closest known key of each. ``what`` says whose keys these are in the message
    (``for slicer 'greedy'``). Inside ``unknown_keys_ignored()`` unknown keys pass."""
    unknown = [key for key in d if key not in allowed]
    if not unknown or _IGNORE_UNKNOWN_KEYS.get():
        return
    known = ", ".join(sorted(allowed)) if allowed else "none"
    of = f" {what}" if what else ""
    listed = ", ".join(f"{k!r}{suggestion(k, allowed)}" for k in unknown)
    raise InvalidConfigError(f"{where}: unknown key{'s' if len(unknown) > 1 else ''} {listed}{of}; known keys: {known}")


def require_tables(where: str, v, what: str) -> list[Mapping]:
    """A list of tables (``[[...]]`` in TOML), each checked to be one."""
    if not isinstance(v, (list, tuple)):
        raise InvalidInputTypeError(f"{where} must be a list of {what} tables, got {type(v).__name__} {v!r}")
    for i, t in enumerate(v):
        require_mapping(f"{where}[{i}]", t)
    return list(v)
