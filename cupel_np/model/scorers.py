"""Scorer specs as data: the built-in scorers, the user's own (a column, a vectorized function,
a name registered with ``register_scorer``), the dict reader of each, and the one registry of
scorer type names that policy data, files, grids and the .NET shape read through.

Policy data names every scorer the same way::

    {"type": "recency"}
    {"type": "column", "column": "similarity", "default": 0.0}
    {"type": "my_registered_name", ...the factory's keyword options}
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from cupel_np.errors import InvalidConfigError, InvalidInputTypeError
from cupel_np.model.curves import ExponentialCurve, StepCurve, WindowCurve, curve_from_dict
from cupel_np.model.fields import (
    require_bool,
    require_keys,
    require_mapping,
    require_nonblank,
    require_number,
    require_str,
    require_tables,
    require_weight,
    suggestion,
)
from cupel_np.text import ascii_fold

DEFAULT_KIND_WEIGHTS = (
    ("SystemPrompt", 1.0),
    ("Memory", 0.8),
    ("ToolOutput", 0.6),
    ("Document", 0.4),
    ("Message", 0.2),
)


# ----------------------------------------------------------------------------- scorers
class Scorer:
    """Base of the scorer specs (immutable, hashable dataclasses)."""

    type_name = ""

    def to_dict(self) -> dict[str, Any]:
        """The scorer as its policy-file table: ``{"type": type_name, ...options}``
        (``scorer_from_dict`` reads it back)."""
        raise NotImplementedError


@dataclass(frozen=True)
class RecencyScorer(Scorer):
    """Scores by timestamp rank within the item set: rank / (count - 1) over the items with a
    timestamp (newest 1.0, a lone one 1.0); no timestamp scores 0.0."""

    type_name = "recency"

    def to_dict(self) -> dict[str, Any]:
        return {"type": "recency"}


@dataclass(frozen=True)
class PriorityScorer(Scorer):
    """Scores by ``priority`` rank within the item set, as ``RecencyScorer`` ranks timestamps
    (highest 1.0); no priority scores 0.0."""

    type_name = "priority"

    def to_dict(self) -> dict[str, Any]:
        return {"type": "priority"}


@dataclass(frozen=True)
class ReflexiveScorer(Scorer):
    """Scores each item by its own ``future_relevance_hint``, clipped to [0, 1]; a missing or
    non-finite hint scores 0.0."""

    type_name = "reflexive"

    def to_dict(self) -> dict[str, Any]:
        return {"type": "reflexive"}


@dataclass(frozen=True)
class FrequencyScorer(Scorer):
    """Scores each item by the share (0..1) of the other items in its set that have at least one
    tag in common with it (tags compared ASCII-case-insensitively)."""

    type_name = "frequency"

    def to_dict(self) -> dict[str, Any]:
        return {"type": "frequency"}


@dataclass(frozen=True)
class KindScorer(Scorer):
    """Kind lookup, ASCII-case-insensitive. ``weights`` None = the spec's default map.
    A kind given twice (in any case) keeps its last weight."""

    weights: tuple[tuple[str, float], ...] | None = None
    type_name = "kind"

    def __post_init__(self):
        if self.weights is None:
            return
        items = self.weights.items() if isinstance(self.weights, Mapping) else self.weights
        clean = []
        for pair in items:
            k, w = pair
            k = require_nonblank("kind weight kind", k)
            clean.append((k, require_weight(f"kind weight for {k!r}", w)))
        object.__setattr__(self, "weights", tuple(clean))

    def effective_weights(self) -> dict[str, float]:
        """folded kind -> weight (last one wins)."""
        src = DEFAULT_KIND_WEIGHTS if self.weights is None else self.weights
        return {ascii_fold(k): w for k, w in src}

    def to_dict(self) -> dict[str, Any]:
        if self.weights is None:
            return {"type": "kind", "use_default_weights": True}
        return {"type": "kind", "weights": [{"kind": k, "weight": w} for k, w in self.weights]}


@dataclass(frozen=True)
class TagScorer(Scorer):
    """Weighted tag match (case-sensitive lookup, as the spec's default comparer)."""

    tag_weights: tuple[tuple[str, float], ...] = ()
    type_name = "tag"

    def __post_init__(self):
        items = self.tag_weights.items() if isinstance(self.tag_weights, Mapping) else self.tag_weights
        clean = []
        for k, w in items:
            k = require_str("tag weight tag", k)
            clean.append((k, require_weight(f"tag weight for {k!r}", w)))
        object.__setattr__(self, "tag_weights", tuple(clean))

    def effective_weights(self) -> tuple[dict[str, float], float]:
        """``(tag -> weight, total weight)``: the configured weights (last one wins per tag) and
        their sum, the score's divisor."""
        d: dict[str, float] = {}
        for k, w in self.tag_weights:
            d[k] = w
        total = 0.0
        for w in d.values():
            total += w
        return d, total

    def to_dict(self) -> dict[str, Any]:
        return {"type": "tag", "tag_weights": [{"tag": k, "weight": w} for k, w in self.tag_weights]}


@dataclass(frozen=True)
class CompositeScorer(Scorer):
    """Weighted average of child scorers; weights must be positive and finite."""

    entries: tuple[tuple[Scorer, float], ...] = ()
    type_name = "composite"

    def __post_init__(self):
        if not self.entries:
            raise InvalidConfigError("composite scorer needs at least one child scorer")
        clean = []
        for i, pair in enumerate(self.entries):
            s, w = pair
            if not isinstance(s, Scorer):
                raise InvalidInputTypeError(f"composite child {i} is not a scorer: {s!r}")
            clean.append((s, require_weight(f"composite child {i} ({s.type_name}) weight", w, positive=True)))
        object.__setattr__(self, "entries", tuple(clean))

    def normalized_weights(self) -> tuple[float, ...]:
        """The child weights divided by their sum (they add up to 1)."""
        total = 0.0
        for _, w in self.entries:
            total += w
        return tuple(w / total for _, w in self.entries)

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "composite",
            "scorers": [dict(s.to_dict(), weight=w) for s, w in self.entries],
        }


@dataclass(frozen=True)
class ScaledScorer(Scorer):
    """Min-max normalisation of ``inner`` over the item set."""

    inner: Scorer = field(default_factory=RecencyScorer)
    type_name = "scaled"

    def __post_init__(self):
        if not isinstance(self.inner, Scorer):
            raise InvalidInputTypeError(f"scaled scorer inner must be a scorer, got {self.inner!r}")

    def to_dict(self) -> dict[str, Any]:
        return {"type": "scaled", "inner": self.inner.to_dict()}


@dataclass(frozen=True)
class MetadataTrustScorer(Scorer):
    """Scores each item by its ``cupel:trust`` metadata value, clipped to [0, 1];
    ``default_score`` (in [0, 1], else ``InvalidConfigError``) where the value is missing or not
    a number."""

    default_score: float = 0.5
    type_name = "metadata_trust"

    def __post_init__(self):
        v = require_number("metadata_trust default_score", self.default_score)
        if not (0.0 <= v <= 1.0):
            raise InvalidConfigError(f"metadata_trust default_score must be in [0.0, 1.0], got {v!r}")
        object.__setattr__(self, "default_score", v)

    def to_dict(self) -> dict[str, Any]:
        return {"type": "metadata_trust", "default_score": self.default_score}


@dataclass(frozen=True)
class MetadataKeyScorer(Scorer):
    """Scores ``boost`` (> 0, else ``InvalidConfigError``) for items whose metadata ``key``
    equals ``value`` and 1.0 for the rest."""

    key: str = ""
    value: str = ""
    boost: float = 1.0
    type_name = "metadata_key"

    def __post_init__(self):
        require_str("metadata_key key", self.key)
        require_str("metadata_key value", self.value)
        object.__setattr__(self, "boost", require_weight("metadata_key boost", self.boost, positive=True))

    def to_dict(self) -> dict[str, Any]:
        return {"type": "metadata_key", "key": self.key, "value": self.value, "boost": self.boost}


@dataclass(frozen=True)
class DecayScorer(Scorer):
    """Time decay against an explicit ``reference_time`` (never an implicit clock)."""

    reference_time: datetime
    curve: ExponentialCurve | StepCurve | WindowCurve
    null_timestamp_score: float = 0.5
    type_name = "decay"

    def __post_init__(self):
        rt = self.reference_time
        if not isinstance(rt, datetime):
            raise InvalidInputTypeError(f"decay reference_time must be a datetime, got {rt!r}")
        if rt.tzinfo is None or rt.utcoffset() is None:
            raise InvalidConfigError(f"decay reference_time must be timezone-aware, got {rt.isoformat()}")
        object.__setattr__(self, "reference_time", rt.astimezone(UTC))
        if not isinstance(self.curve, (ExponentialCurve, StepCurve, WindowCurve)):
            raise InvalidInputTypeError(f"decay curve must be a curve spec, got {self.curve!r}")
        v = require_number("decay null_timestamp_score", self.null_timestamp_score)
        if not (0.0 <= v <= 1.0):
            raise InvalidConfigError(f"decay null_timestamp_score must be in [0.0, 1.0], got {v!r}")
        object.__setattr__(self, "null_timestamp_score", v)

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "decay",
            "reference_time": self.reference_time,
            "null_timestamp_score": self.null_timestamp_score,
            "curve": self.curve.to_dict(),
        }


#: the keys a column scorer table may carry ("weight" is the composite entry's)
COLUMN_SCORER_KEYS = ("column", "default")


@dataclass(frozen=True)
class ColumnScorer(Scorer):
    """The score is the value of the numeric column ``column`` of the items table.

    Tables (Parquet, Arrow, pandas, polars) keep every column beyond the item fields, so a
    policy may name any integer, floating or decimal column (or a numeric item field such as
    ``priority``); for tables built from
    ``ContextItem`` objects (which have no extra columns) the value is ``metadata[column]``
    parsed with Rust's f64 grammar. A null, a NaN or a missing metadata key scores
    ``default`` on every input path; +/-inf are passed through (IEEE arithmetic downstream). An absent or non-numeric column is an error naming the
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
    to float64); NaN and +/-inf are passed through. ``fn`` is
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


# ----------------------------------------------------------------------------- dict shapes
# Every table a policy is read from is checked against the keys its reader knows: a reader
# declares them (``scorer_dict_parser(type, keys)`` for a scorer type, ``slicer_dict_parser``
# for a slicer), so a new spec's reader gets the unknown-key check by declaring its keys.


#: keys a scorer table may hold whatever its type (``weight`` in a list of scorers)
SCORER_COMMON_KEYS = frozenset({"type", "weight"})

ScorerParser = Callable[[Mapping[str, Any], str], Scorer]


@dataclass(frozen=True)
class ScorerType:
    """One scorer type policy data can name: its reader, called as ``parse(table, where)``, and
    ``keys``, the options its table may carry besides ``type`` and ``weight`` (None: any key, each
    an option of a registered ``factory``)."""

    parse: ScorerParser
    keys: frozenset[str] | None = frozenset()
    factory: Callable[..., Scorer] | None = None


#: the one registry of scorer type names (normalized: ASCII lower case, ``_`` for ``-``), in
#: declaration order: the spec's types and ``column`` / ``function`` (declared in this module
#: by ``scorer_dict_parser``), then each name given to ``register_scorer``
_SCORERS: dict[str, ScorerType] = {}


def scorer_dict_parser(type_name: str, keys: tuple[str, ...] | None = ()) -> Callable[[ScorerParser], ScorerParser]:
    """Declare the dict reader of scorer type ``type_name``. ``keys`` are the options its table
    may carry besides ``type`` and ``weight``: ``scorer_from_dict`` refuses any other key (naming
    it, where it is and the closest known key) before the reader runs. The reader is called as
    ``reader(table, where)``, ``where`` naming the table in messages (``scorers[1]``)."""

    def register(fn: ScorerParser) -> ScorerParser:
        _SCORERS[type_name] = ScorerType(fn, None if keys is None else frozenset(keys))
        return fn

    return register


def scorer_type(name: str) -> ScorerType | None:
    """The registry entry of a normalized scorer type name (None when no scorer has it)."""
    return _SCORERS.get(name)


def _as_datetime(where: str, v) -> datetime:
    if isinstance(v, datetime):
        # a date-time without an offset (TOML local date-time) is read as UTC
        return v if v.tzinfo is not None else v.replace(tzinfo=UTC)
    if isinstance(v, str):
        try:
            dt = datetime.fromisoformat(v.replace("Z", "+00:00"))
        except ValueError:
            raise InvalidConfigError(f"{where} is not an ISO-8601 date-time: {v!r}") from None
        return dt if dt.tzinfo is not None else dt.replace(tzinfo=UTC)
    raise InvalidInputTypeError(f"{where} must be a date-time, got {type(v).__name__} {v!r}")


def _weight_pairs(where: str, ws, name_key: str) -> tuple[tuple[Any, Any], ...]:
    """``{name: weight}`` or ``[{<name_key>: name, weight: w}, ...]`` as (name, weight) pairs."""
    if isinstance(ws, Mapping):
        return tuple(ws.items())
    pairs = []
    for i, w in enumerate(require_tables(where, ws, f"{name_key}/weight")):
        require_keys(f"{where}[{i}]", w, (name_key, "weight"))
        pairs.append((w.get(name_key), w.get("weight")))
    return tuple(pairs)


def composite_from_list(entries, where: str) -> CompositeScorer:
    if not isinstance(entries, list) or not entries:
        raise InvalidConfigError(f"{where} must be a non-empty list of scorer tables")
    pairs = []
    for i, e in enumerate(entries):
        require_mapping(f"{where}[{i}]", e)
        pairs.append(
            (scorer_from_dict(e, f"{where}[{i}]"), require_number(f"{where}[{i}].weight", e.get("weight", 1.0)))
        )
    return CompositeScorer(tuple(pairs))


def known_scorer_types() -> tuple[str, ...]:
    """Every scorer type policy data can name now: the built-in ones, ``column`` and each name
    registered with ``register_scorer`` (a ``function`` scorer is code, never data)."""
    return tuple(k for k in _SCORERS if k != "function")


def scorer_from_dict(e: Mapping[str, Any], where: str = "scorer", *, weighted: bool = True) -> Scorer:
    """One scorer entry in the EXTENSIONS.md form (``type`` plus that scorer's options). A key
    its type does not know is an error. ``weighted=False`` reads an inner entry (a wrapper's
    ``inner``): EXTENSIONS.md makes it "a full scorer entry" and .NET's ``ScorerEntry`` gives
    every entry a weight, so ``weight`` is accepted there, checked as every weight is (a finite
    number > 0), and ignored: a wrapper scores with its inner scorer alone."""
    require_mapping(where, e)
    t = e.get("type")
    if t is None:
        raise InvalidConfigError(f"{where} has no 'type'")
    t = ascii_fold(require_str(f"{where}.type", t)).replace("-", "_")
    if not weighted and "weight" in e:
        require_weight(f"{where}.weight", e["weight"], positive=True)
    entry = _SCORERS.get(t)
    if entry is None:
        known = known_scorer_types()
        raise InvalidConfigError(
            f"{where}: unknown scorer type {e.get('type')!r}{suggestion(t, known)}; expected one of: {', '.join(known)}"
        )
    if entry.keys is None:
        # a registered name (or ``function``): its options go to its factory, never the
        # (meaningless) weight of an inner entry
        if not weighted:
            e = {k: v for k, v in e.items() if k != "weight"}
        return entry.parse(e, where)
    require_keys(where, e, entry.keys | SCORER_COMMON_KEYS, what=f"for scorer type {t!r}")
    try:
        return entry.parse(e, where)
    except InvalidConfigError as err:
        msg = str(err)
        if not msg.startswith(where):
            raise type(err)(f"{where}: {msg}") from None
        raise


@scorer_dict_parser("recency")
def _recency(e: Mapping, where: str) -> Scorer:
    return RecencyScorer()


@scorer_dict_parser("priority")
def _priority(e: Mapping, where: str) -> Scorer:
    return PriorityScorer()


@scorer_dict_parser("kind", ("weights", "use_default_weights"))
def _kind_scorer(e: Mapping, where: str) -> Scorer:
    # upstream's reading (its conformance runner; the format's "when true, use default weight
    # map"): the defaults when use_default_weights is true, even beside a weights list, or when
    # no weights list is given (false alone names no map); an empty map is ``weights = []``
    use_default = require_bool(f"{where}.use_default_weights", e.get("use_default_weights", False))
    ws = e.get("weights")
    if use_default or ws is None:
        return KindScorer(None)
    return KindScorer(_weight_pairs(f"{where}.weights", ws, "kind"))


@scorer_dict_parser("tag", ("tag_weights",))
def _tag_scorer(e: Mapping, where: str) -> Scorer:
    return TagScorer(_weight_pairs(f"{where}.tag_weights", e.get("tag_weights", []), "tag"))


@scorer_dict_parser("frequency")
def _frequency(e: Mapping, where: str) -> Scorer:
    return FrequencyScorer()


@scorer_dict_parser("reflexive")
def _reflexive(e: Mapping, where: str) -> Scorer:
    return ReflexiveScorer()


@scorer_dict_parser("composite", ("scorers", "children"))
def _composite(e: Mapping, where: str) -> Scorer:
    if "scorers" in e and "children" in e:
        raise InvalidConfigError(f"{where}: give the child scorers as 'scorers' or 'children', not both")
    key = "scorers" if "scorers" in e else "children"
    return composite_from_list(e.get(key), f"{where}.{key}")


@scorer_dict_parser("scaled", ("inner", "inner_scorer"))
def _scaled(e: Mapping, where: str) -> Scorer:
    if "inner" in e and "inner_scorer" in e:
        raise InvalidConfigError(f"{where}: give the inner scorer as 'inner' or 'inner_scorer', not both")
    if "inner" in e:
        return ScaledScorer(scorer_from_dict(e["inner"], f"{where}.inner", weighted=False))
    inner = e.get("inner_scorer")
    if inner is None:
        raise InvalidConfigError(f"{where}: scaled scorer needs 'inner_scorer' or 'inner'")
    if isinstance(inner, Mapping):
        return ScaledScorer(scorer_from_dict(inner, f"{where}.inner_scorer", weighted=False))
    return ScaledScorer(scorer_from_dict({"type": inner}, f"{where}.inner_scorer", weighted=False))


@scorer_dict_parser("metadata_trust", ("default_score",))
def _metadata_trust(e: Mapping, where: str) -> Scorer:
    return MetadataTrustScorer(e.get("default_score", 0.5))


@scorer_dict_parser("decay", ("reference_time", "curve", "null_timestamp_score"))
def _decay(e: Mapping, where: str) -> Scorer:
    if "reference_time" not in e:
        raise InvalidConfigError(f"{where}: decay scorer needs an explicit 'reference_time'")
    c = e.get("curve")
    if not isinstance(c, Mapping):
        raise InvalidConfigError(f"{where}: decay scorer needs a 'curve' table")
    return DecayScorer(
        _as_datetime(f"{where}.reference_time", e["reference_time"]),
        curve_from_dict(c, f"{where}.curve"),
        e.get("null_timestamp_score", 0.5),
    )


@scorer_dict_parser("metadata_key", ("key", "value", "boost"))
def _metadata_key(e: Mapping, where: str) -> Scorer:
    for k in ("key", "value", "boost"):
        if k not in e:
            raise InvalidConfigError(f"{where}: metadata_key scorer needs {k!r}")
    return MetadataKeyScorer(e["key"], e["value"], e["boost"])


#: the spec's scorer types the dict form knows (declared above, in this order)
SCORER_TYPES = tuple(_SCORERS)


@scorer_dict_parser("column", COLUMN_SCORER_KEYS)
def column_scorer_from_dict(e: Mapping[str, Any], where: str) -> ColumnScorer:
    """``{"type": "column", "column": name, "default": x}``; ``scorer_from_dict`` has checked the
    keys (COLUMN_SCORER_KEYS, plus ``weight`` where the entry is weighted)."""
    if "column" not in e:
        raise InvalidConfigError(f"{where}: column scorer needs 'column' (the items column to read)")
    col = e["column"]
    if not isinstance(col, str):
        raise InvalidInputTypeError(f"{where}.column must be a string, got {type(col).__name__} {col!r}")
    return ColumnScorer(col, e.get("default", 0.0))


@scorer_dict_parser("function", None)
def _function_from_dict(e: Mapping[str, Any], where: str) -> Scorer:
    raise InvalidConfigError(
        f"{where}: a function scorer is code, not data; register it with register_scorer(name, factory) "
        f"and name it by that name (registered: {', '.join(registered_scorers()) or 'none'})"
    )


def registered_scorers() -> list[str]:
    """The registered scorer names (normalized), in registration order."""
    return [k for k, t in _SCORERS.items() if t.factory is not None]


def iter_scorers(scorer: Scorer):
    """``scorer`` and every scorer inside it (composite children, scaled inners), depth first."""
    stack = [scorer]
    while stack:
        s = stack.pop()
        yield s
        if isinstance(s, CompositeScorer):
            stack.extend(c for c, _ in reversed(s.entries))
        elif isinstance(s, ScaledScorer):
            stack.append(s.inner)
