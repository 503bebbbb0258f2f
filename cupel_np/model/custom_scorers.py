"""The user's own signals as scorers: a numeric column (``ColumnScorer``), a vectorized function
(``FunctionScorer``) and scorers registered by name (``register_scorer``).

All three are plain scorer specs: they compose inside ``CompositeScorer`` and ``ScaledScorer``,
sit in ``Sweep`` grids and are computed once per distinct scorer per run (the engine's
``ScoreContext`` caches by the spec, as for every built-in base scorer). Policy data names
them like any other scorer::

    {"type": "column", "column": "similarity", "default": 0.0}
    {"type": "my_registered_name", ...the factory's keyword options}

The parsers here are registered into ``policy.EXTRA_SCORER_TYPES`` when this module is
imported (``cupel_np`` imports it), so ``Policy.from_dict`` / files / grids / the .NET shape
all read them without ``policy.py`` importing this module.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cupel_np.errors import InvalidConfigError, InvalidInputTypeError
from cupel_np.model import policy as _policy
from cupel_np.model.fields import require_number
from cupel_np.model.policy import Scorer
from cupel_np.text import ascii_fold

#: the keys a column scorer table may carry ("weight" is the composite entry's)
COLUMN_SCORER_KEYS = ("column", "default")
#: keys every registered scorer table may carry besides its factory's options
REGISTERED_SCORER_KEYS = ("type", "weight")


@dataclass(frozen=True)
class ColumnScorer(Scorer):
    """The score is the value of the numeric column ``column`` of the items table.

    Tables (Parquet, Arrow, pandas, polars) keep every column beyond the item fields, so a
    policy may name any integer, floating or decimal column (or a numeric item field such as
    ``priority``); for tables built from
    ``ContextItem`` objects (which have no extra columns) the value is ``metadata[column]``
    parsed with Rust's f64 grammar. A null value or a missing metadata key scores
    ``default``; NaN and +/-inf are passed through unchanged (the spec's NaN ordering and
    IEEE arithmetic apply downstream). An absent or non-numeric column is an error naming the
    column, raised before any variant runs."""

    column: str = ""
    default: float = 0.0

    def __post_init__(self):
        if not isinstance(self.column, str) or not self.column:
            raise InvalidConfigError(f"column scorer needs a non-empty column name, got {self.column!r}")
        d = require_number(f"column scorer {self.column!r} default", self.default)
        if not math.isfinite(d):
            raise InvalidConfigError(f"column scorer {self.column!r} default must be finite, got {d!r}")
        object.__setattr__(self, "default", d)

    @property
    def type_name(self) -> str:  # type: ignore[override]
        """``column:<name>``: the key a ``Sweep`` weight mapping uses for this scorer."""
        return f"column:{self.column}"

    def to_dict(self) -> dict:
        return {"type": "column", "column": self.column, "default": self.default}

    def dotnet_entry(self, weight: float) -> dict:
        """This scorer in the .NET policy shape (the same keys, camelCase needs none)."""
        return dict(self.to_dict(), weight=weight)


@dataclass(frozen=True)
class FunctionScorer(Scorer):
    """A vectorized user scorer: ``fn(columns, offsets) -> one float per row``.

    ``columns`` is a read-only mapping of column name -> array over the scoreable rows, grouped
    by item set (see :class:`cupel_np.engine.scorers.ScorerInput`); ``offsets`` (int64, read
    only) delimits the sets, so relative per-set scorers can be written. The result must be a
    1-D array (or sequence) of one real number per row (integer or floating dtype; it is cast
    to float64); NaN and +/-inf are passed through like a column scorer's values. ``fn`` is
    called once per distinct scorer per run, whatever the thread count and however many
    variants use it. Two FunctionScorers are the same scorer when ``fn`` and ``name`` are."""

    fn: Callable[..., Any] = field(default=None)  # type: ignore[assignment]
    name: str = ""
    #: (registered name, options) when built from policy data by a registered factory
    source: tuple | None = field(default=None, compare=False)

    def __post_init__(self):
        if not callable(self.fn):
            raise InvalidInputTypeError(f"FunctionScorer fn must be callable, got {self.fn!r}")
        name = self.name or getattr(self.fn, "__name__", "")
        if not isinstance(name, str) or not name:
            raise InvalidConfigError("FunctionScorer needs a name (name=...)")
        object.__setattr__(self, "name", name)

    @property
    def type_name(self) -> str:  # type: ignore[override]
        """The scorer's name (its key in a ``Sweep`` weight mapping)."""
        return self.name

    def to_dict(self) -> dict:
        if self.source is not None:
            reg, opts = self.source
            return dict(json.loads(opts), type=reg)
        # code cannot be written as data: this form is descriptive (register_scorer to load it)
        return {"type": "function", "name": self.name}

    def dotnet_entry(self, weight: float) -> dict:
        """A registered scorer in the .NET policy shape; an unregistered one cannot be written."""
        if self.source is None:
            raise InvalidConfigError(
                f"function scorer {self.name!r} is not registered: register_scorer it to write it as policy data"
            )
        return dict(self.to_dict(), weight=weight)


# ----------------------------------------------------------------------------- registry
_REGISTRY: dict[str, Callable[..., Scorer]] = {}
_MADE: dict[tuple[str, str], Scorer] = {}
_LOCK = threading.Lock()


def _norm(name: str) -> str:
    return ascii_fold(name).replace("-", "_")


def register_scorer(name: str, factory: Callable[..., Scorer]) -> None:
    """Make ``{"type": name, ...options}`` usable in policy data, files, grids and the .NET
    shape: ``factory(**options)`` builds the scorer (a FunctionScorer, a ColumnScorer, a
    composite...). Names compare like built-in type names (ASCII case-insensitive, ``-`` =
    ``_``) and may not shadow a built-in type; registering a name again replaces its factory.
    The same options always give the same scorer object, so every policy naming it shares one
    computed column."""
    if not isinstance(name, str) or not name.strip():
        raise InvalidConfigError(f"register_scorer needs a non-empty name, got {name!r}")
    if not callable(factory):
        raise InvalidInputTypeError(f"register_scorer({name!r}) factory must be callable, got {factory!r}")
    key = _norm(name)
    if key in _policy.SCORER_TYPES or key in ("column", "function"):
        raise InvalidConfigError(f"register_scorer: {name!r} is a built-in scorer type; choose another name")
    with _LOCK:
        _REGISTRY[key] = factory
        for k in [k for k in _MADE if k[0] == key]:
            del _MADE[k]
        _policy.EXTRA_SCORER_TYPES[key] = _registered_from_dict


def registered_scorers() -> list[str]:
    """The registered scorer names (normalized), in registration order."""
    return list(_REGISTRY)


def unregister_scorer(name: str) -> None:
    """Forget a registered name (tests and plugins that reload)."""
    key = _norm(name)
    with _LOCK:
        _REGISTRY.pop(key, None)
        _policy.EXTRA_SCORER_TYPES.pop(key, None)
        for k in [k for k in _MADE if k[0] == key]:
            del _MADE[k]


# ----------------------------------------------------------------------------- parsing
def column_scorer_from_dict(e: Mapping[str, Any], where: str) -> ColumnScorer:
    """``{"type": "column", "column": name, "default": x}``; ``scorer_from_dict`` has checked the
    keys (COLUMN_SCORER_KEYS, plus ``weight`` where the entry is weighted)."""
    if "column" not in e:
        raise InvalidConfigError(f"{where}: column scorer needs 'column' (the items column to read)")
    col = e["column"]
    if not isinstance(col, str):
        raise InvalidInputTypeError(f"{where}.column must be a string, got {type(col).__name__} {col!r}")
    return ColumnScorer(col, e.get("default", 0.0))


def _registered_from_dict(e: Mapping[str, Any], where: str) -> Scorer:
    """A registered name's table: every key but ``type`` / ``weight`` is a factory option."""
    key = _norm(str(e.get("type")))
    factory = _REGISTRY.get(key)
    if factory is None:  # pragma: no cover - the parser is only installed for registered names
        raise InvalidConfigError(f"{where}: scorer type {e.get('type')!r} is not registered")
    opts = {k: v for k, v in e.items() if k not in REGISTERED_SCORER_KEYS}
    try:
        okey = json.dumps(opts, sort_keys=True, default=str)
    except (TypeError, ValueError):
        raise InvalidConfigError(f"{where}: options of scorer {key!r} must be plain data") from None
    with _LOCK:
        made = _MADE.get((key, okey))
    if made is not None:
        return made
    try:
        made = factory(**opts)
    except TypeError as err:
        raise InvalidConfigError(f"{where}: registered scorer {key!r} rejected its options {opts!r}: {err}") from None
    if not isinstance(made, Scorer):
        raise InvalidInputTypeError(f"{where}: the factory of scorer {key!r} returned {made!r}, not a scorer spec")
    if isinstance(made, FunctionScorer) and made.source is None:
        object.__setattr__(made, "source", (key, okey))
    with _LOCK:
        return _MADE.setdefault((key, okey), made)


def _function_from_dict(e: Mapping[str, Any], where: str) -> Scorer:
    raise InvalidConfigError(
        f"{where}: a function scorer is code, not data; register it with register_scorer(name, factory) "
        f"and name it by that name (registered: {', '.join(_REGISTRY) or 'none'})"
    )


_policy.scorer_dict_parser("column", COLUMN_SCORER_KEYS)(column_scorer_from_dict)
_policy.EXTRA_SCORER_TYPES["function"] = _function_from_dict


def iter_scorers(scorer: Scorer):
    """``scorer`` and every scorer inside it (composite children, scaled inners), depth first."""
    stack = [scorer]
    while stack:
        s = stack.pop()
        yield s
        if isinstance(s, _policy.CompositeScorer):
            stack.extend(c for c, _ in reversed(s.entries))
        elif isinstance(s, _policy.ScaledScorer):
            stack.append(s.inner)


def load_plugins(modules) -> None:
    """Import each plugin (a module name, or a path to a ``.py`` file) so the scorers it
    registers with ``register_scorer`` can be named in policy data; errors name the plugin.
    A file is imported as a module named after it, with its directory put on ``sys.path``
    (so worker processes a cluster starts afterwards can import it too)."""
    import importlib
    import sys
    from pathlib import Path

    for spec in modules or ():
        name = spec
        if spec.endswith(".py") or "/" in spec or "\\" in spec:
            path = Path(spec).resolve()
            if not path.is_file():
                raise InvalidConfigError(f"plugin file not found: {spec}")
            if str(path.parent) not in sys.path:
                sys.path.insert(0, str(path.parent))
            name = path.stem
        try:
            importlib.import_module(name)
        except ImportError as e:
            raise InvalidConfigError(f"plugin {spec!r} cannot be imported: {e}") from None
