"""Policies as data: validated, immutable, hashable scorer / slicer / placer specs.

``Policy.from_dict`` takes a pipeline conformance vector's ``[config]`` table (see
EXTENSIONS.md); ``to_dict`` writes the same shape back. ``Policy.from_json_file`` /
``from_toml_file`` load files, and ``Policy.from_dotnet_json`` reads the .NET
``Wollax.Cupel.Json`` policy shape.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from cupel_np._files import StrPath
from cupel_np._fs import as_path
from cupel_np.errors import InvalidConfigError, InvalidInputTypeError
from cupel_np.model.fields import (
    require_bool,
    require_int,
    require_keys,
    require_mapping,
    require_nonblank,
    require_number,
    require_str,
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
        raise NotImplementedError


@dataclass(frozen=True)
class RecencyScorer(Scorer):
    type_name = "recency"

    def to_dict(self) -> dict[str, Any]:
        return {"type": "recency"}


@dataclass(frozen=True)
class PriorityScorer(Scorer):
    type_name = "priority"

    def to_dict(self) -> dict[str, Any]:
        return {"type": "priority"}


@dataclass(frozen=True)
class ReflexiveScorer(Scorer):
    type_name = "reflexive"

    def to_dict(self) -> dict[str, Any]:
        return {"type": "reflexive"}


@dataclass(frozen=True)
class FrequencyScorer(Scorer):
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
class ExponentialCurve:
    half_life_secs: float

    def __post_init__(self):
        v = require_number("decay curve half_life_secs", self.half_life_secs)
        if not (v > 0.0) or not math.isfinite(v):
            raise InvalidConfigError(f"decay curve half_life_secs must be > 0 and finite, got {v!r}")
        object.__setattr__(self, "half_life_secs", v)

    def to_dict(self) -> dict[str, Any]:
        return {"type": "exponential", "half_life_secs": self.half_life_secs}


@dataclass(frozen=True)
class WindowCurve:
    max_age_secs: float

    def __post_init__(self):
        v = require_number("decay curve max_age_secs", self.max_age_secs)
        if not (v > 0.0) or not math.isfinite(v):
            raise InvalidConfigError(f"decay curve max_age_secs must be > 0, got {v!r}")
        object.__setattr__(self, "max_age_secs", v)

    def to_dict(self) -> dict[str, Any]:
        return {"type": "window", "max_age_secs": self.max_age_secs}


@dataclass(frozen=True)
class StepCurve:
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
        return {"type": "step", "windows": [{"max_age_secs": a, "score": s} for a, s in self.windows]}


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


# ----------------------------------------------------------------------------- slicers
@dataclass(frozen=True)
class GreedySlice:
    name = "greedy"

    def to_dict(self) -> dict[str, Any]:
        return {"slicer": "greedy"}


@dataclass(frozen=True)
class KnapsackSlice:
    bucket_size: int = 100
    name = "knapsack"

    def __post_init__(self):
        b = require_int("knapsack bucket_size", self.bucket_size, integral_float=True)
        if b <= 0:
            raise InvalidConfigError(f"knapsack bucket_size must be > 0, got {b}")
        object.__setattr__(self, "bucket_size", b)

    def to_dict(self) -> dict[str, Any]:
        return {"slicer": "knapsack", "bucket_size": self.bucket_size}


@dataclass(frozen=True)
class QuotaEntry:
    kind: str
    require: float = 0.0
    cap: float = 100.0

    def __post_init__(self):
        require_nonblank("quota kind", self.kind)
        r = require_number(f"quota require for {self.kind!r}", self.require)
        c = require_number(f"quota cap for {self.kind!r}", self.cap)
        for name, v in (("require", r), ("cap", c)):
            if not (0.0 <= v <= 100.0):
                raise InvalidConfigError(f"quota {name} for {self.kind!r} must be in [0.0, 100.0], got {v!r}")
        if r > c:
            raise InvalidConfigError(f"quota require ({r}) must be <= cap ({c}) for kind {self.kind!r}")
        object.__setattr__(self, "require", r)
        object.__setattr__(self, "cap", c)


def _no_duplicate_kinds(what: str, kinds) -> None:
    seen: dict[str, str] = {}
    for k in kinds:
        f = ascii_fold(k)
        if f in seen:
            raise InvalidConfigError(
                f"{what} names kind {k!r} twice (kinds compare case-insensitively; also given as {seen[f]!r})"
            )
        seen[f] = k


@dataclass(frozen=True)
class QuotaSlice:
    quotas: tuple[QuotaEntry, ...] = ()
    inner: GreedySlice | KnapsackSlice = field(default_factory=GreedySlice)
    name = "quota"

    def __post_init__(self):
        qs = tuple(self.quotas)
        for q in qs:
            if not isinstance(q, QuotaEntry):
                raise InvalidInputTypeError(f"quota entries must be QuotaEntry, got {q!r}")
        _no_duplicate_kinds("quota", [q.kind for q in qs])
        total = 0.0
        for q in qs:
            total += q.require
        if total > 100.0:
            raise InvalidConfigError(f"sum of quota require percentages ({total}) must not exceed 100.0")
        if not isinstance(self.inner, (GreedySlice, KnapsackSlice)):
            raise InvalidConfigError(
                f"quota inner_slicer must be greedy or knapsack, got {getattr(self.inner, 'name', self.inner)!r}"
            )
        object.__setattr__(self, "quotas", qs)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "slicer": "quota",
            "inner_slicer": self.inner.name,
            "quotas": [{"kind": q.kind, "require": q.require, "cap": q.cap} for q in self.quotas],
        }
        if isinstance(self.inner, KnapsackSlice):
            d["bucket_size"] = self.inner.bucket_size
        return d


@dataclass(frozen=True)
class CountQuotaEntry:
    """``cap_count`` None means "no cap" for that kind."""

    kind: str
    require_count: int = 0
    cap_count: int | None = None

    def __post_init__(self):
        require_nonblank("count quota kind", self.kind)
        r = require_int(f"require_count for {self.kind!r}", self.require_count, integral_float=True)
        if self.cap_count is None:
            if r < 0:
                raise InvalidConfigError(f"require_count for {self.kind!r} must be >= 0, got {r}")
            object.__setattr__(self, "require_count", r)
            return
        c = require_int(f"cap_count for {self.kind!r}", self.cap_count, integral_float=True)
        if r < 0 or c < 0:
            raise InvalidConfigError(f"require_count/cap_count for {self.kind!r} must be >= 0, got {r}/{c}")
        if c == 0 and r > 0:
            raise InvalidConfigError(
                f"kind {self.kind!r}: cap_count is 0 but require_count is {r}; it can never be satisfied"
            )
        if r > c:
            raise InvalidConfigError(f"kind {self.kind!r}: require_count ({r}) must be <= cap_count ({c})")
        object.__setattr__(self, "require_count", r)
        object.__setattr__(self, "cap_count", c)


_SCARCITY = ("degrade", "throw")


def _entry_dict(e: CountQuotaEntry) -> dict:
    d = {"kind": e.kind, "require_count": e.require_count}
    if e.cap_count is not None:
        d["cap_count"] = e.cap_count
    return d


@dataclass(frozen=True)
class CountQuotaSlice:
    """A decorator slicer (spec: slicers/count-quota.md): count requirements and caps per kind
    around ``inner``, any slicer but ``KnapsackSlice`` (greedy, quota, a nested count quota,
    count_constrained_knapsack)."""

    entries: tuple[CountQuotaEntry, ...] = ()
    inner: Any = field(default_factory=GreedySlice)
    scarcity_behavior: str = "degrade"
    name = "count_quota"

    def __post_init__(self):
        es = tuple(self.entries)
        _no_duplicate_kinds("count quota entries", [e.kind for e in es])
        if isinstance(self.inner, KnapsackSlice):
            # the spec's guard, at construction: CountQuotaSlice wraps any slicer but KnapsackSlice
            raise InvalidConfigError(
                "count_quota does not support a knapsack inner slicer (KnapsackSlice: the spec's knapsack "
                "guard); use greedy or quota inside it, or the count_constrained_knapsack slicer"
            )
        if not isinstance(self.inner, (GreedySlice, QuotaSlice, CountQuotaSlice, CountConstrainedKnapsackSlice)):
            raise InvalidConfigError(f"count_quota inner_slicer must be a slicer spec, got {self.inner!r}")
        sb = require_str("scarcity_behavior", self.scarcity_behavior).lower()
        if sb not in _SCARCITY:
            raise InvalidConfigError(f"scarcity_behavior must be 'degrade' or 'throw', got {self.scarcity_behavior!r}")
        object.__setattr__(self, "entries", es)
        object.__setattr__(self, "scarcity_behavior", sb)

    def to_dict(self) -> dict[str, Any]:
        return {
            "slicer": "count_quota",
            # greedy by name; any other inner slicer as its own slicer table
            "inner_slicer": "greedy" if isinstance(self.inner, GreedySlice) else self.inner.to_dict(),
            "scarcity_behavior": self.scarcity_behavior,
            "entries": [_entry_dict(e) for e in self.entries],
        }


@dataclass(frozen=True)
class CountConstrainedKnapsackSlice:
    entries: tuple[CountQuotaEntry, ...] = ()
    bucket_size: int = 100
    scarcity_behavior: str = "degrade"
    name = "count_constrained_knapsack"

    def __post_init__(self):
        es = tuple(self.entries)
        _no_duplicate_kinds("count quota entries", [e.kind for e in es])
        KnapsackSlice(self.bucket_size)
        sb = require_str("scarcity_behavior", self.scarcity_behavior).lower()
        if sb not in _SCARCITY:
            raise InvalidConfigError(f"scarcity_behavior must be 'degrade' or 'throw', got {self.scarcity_behavior!r}")
        object.__setattr__(self, "entries", es)
        object.__setattr__(self, "scarcity_behavior", sb)

    def to_dict(self) -> dict[str, Any]:
        return {
            "slicer": "count_constrained_knapsack",
            "bucket_size": self.bucket_size,
            "scarcity_behavior": self.scarcity_behavior,
            "entries": [_entry_dict(e) for e in self.entries],
        }


Slicer = GreedySlice | KnapsackSlice | QuotaSlice | CountQuotaSlice | CountConstrainedKnapsackSlice

PLACERS = ("chronological", "u_shaped")
OVERFLOW_STRATEGIES = ("throw", "truncate", "proceed")


def _placer_name(v) -> str:
    s = require_str("placer", v)
    norm = ascii_fold(s).replace("-", "_")
    if norm == "ushaped":
        norm = "u_shaped"
    if norm not in PLACERS:
        raise InvalidConfigError(f"unknown placer {s!r}; expected one of: chronological, u_shaped")
    return norm


# ----------------------------------------------------------------------------- policy
@dataclass(frozen=True)
class Policy:
    """A complete selection policy. The budget is never part of it."""

    scorer: Scorer
    slicer: Slicer = field(default_factory=GreedySlice)
    placer: str = "chronological"
    deduplication: bool = True
    overflow_strategy: str = "throw"
    name: str | None = None
    description: str | None = None

    def __post_init__(self):
        if not isinstance(self.scorer, Scorer):
            raise InvalidInputTypeError(f"Policy.scorer must be a scorer spec, got {self.scorer!r}")
        if not isinstance(
            self.slicer, (GreedySlice, KnapsackSlice, QuotaSlice, CountQuotaSlice, CountConstrainedKnapsackSlice)
        ):
            raise InvalidInputTypeError(f"Policy.slicer must be a slicer spec, got {self.slicer!r}")
        object.__setattr__(self, "placer", _placer_name(self.placer))
        object.__setattr__(self, "deduplication", require_bool("Policy.deduplication", self.deduplication))
        ov = ascii_fold(require_str("overflow_strategy", self.overflow_strategy))
        if ov not in OVERFLOW_STRATEGIES:
            raise InvalidConfigError(
                f"unknown overflow_strategy {self.overflow_strategy!r}; expected throw, truncate or proceed"
            )
        object.__setattr__(self, "overflow_strategy", ov)
        for k in ("name", "description"):
            v = getattr(self, k)
            if v is not None:
                require_str(f"Policy.{k}", v)

    # -- dict / file round trips --------------------------------------------------------
    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Policy:
        """From a pipeline vector's ``[config]`` table (EXTENSIONS.md) + name/description. A key
        no reader knows, at any depth, is an error naming it and where it is."""
        return policy_from_dict(d)

    def to_dict(self) -> dict[str, Any]:
        sc = self.scorer
        if isinstance(sc, CompositeScorer):
            scorers = [dict(s.to_dict(), weight=w) for s, w in sc.entries]
        else:
            scorers = [dict(sc.to_dict(), weight=1.0)]
        d: dict[str, Any] = dict(self.slicer.to_dict())
        d.update(
            placer=self.placer,
            deduplication=self.deduplication,
            overflow_strategy=self.overflow_strategy,
            scorers=scorers,
        )
        if self.name is not None:
            d["name"] = self.name
        if self.description is not None:
            d["description"] = self.description
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), default=json_default, indent=2)

    @classmethod
    def from_json(cls, text: str) -> Policy:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise InvalidConfigError(f"malformed policy JSON: {e}") from None
        if is_dotnet_shape(data):
            return cls.from_dotnet_json(data)
        return cls.from_dict(data)

    @classmethod
    def from_toml(cls, text: str) -> Policy:
        import tomli

        try:
            data = tomli.loads(text)
        except tomli.TOMLDecodeError as e:
            raise InvalidConfigError(f"malformed policy TOML: {e}") from None
        if "config" in data and "scorers" not in data:
            require_keys("policy TOML", data, ("config", "name", "description"))
            data = dict(require_mapping("[config]", data["config"]), **{k: v for k, v in data.items() if k != "config"})
        return cls.from_dict(data)

    @classmethod
    def from_file(cls, path: StrPath) -> Policy:
        p = as_path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as e:
            raise InvalidConfigError(f"cannot read policy file {str(p)!r}: {e.strerror}") from None
        try:
            if p.suffix.lower() == ".toml":
                return cls.from_toml(text)
            return cls.from_json(text)
        except InvalidConfigError as e:
            raise InvalidConfigError(f"{p}: {e}") from None

    @classmethod
    def from_dotnet_json(cls, data: Mapping[str, Any]) -> Policy:
        return policy_from_dotnet(data)


def json_default(o):
    if isinstance(o, datetime):
        return o.isoformat()
    raise TypeError(f"not JSON serializable: {o!r}")


# ----------------------------------------------------------------------------- dict shapes
# Every table a policy is read from is checked against the keys its reader knows: a reader
# declares them (``scorer_dict_parser(type, keys)`` for a scorer type, ``slicer_dict_parser``
# for a slicer), so a new spec's reader gets the unknown-key check by declaring its keys.

#: keys a scorer table may hold whatever its type (``weight`` in a list of scorers)
SCORER_COMMON_KEYS = frozenset({"type", "weight"})
#: keys of a policy table besides its slicer's options. ``bucket_size`` is one of them: the
#: conformance format lists it among the flat [config] options with a default of 100 for every
#: slicer (upstream's vectors and grids carry it beside slicers that do not read it)
POLICY_KEYS = frozenset(
    {"scorers", "slicer", "placer", "deduplication", "overflow_strategy", "name", "description", "bucket_size"}
)

ScorerParser = Callable[[Mapping[str, Any], str], Scorer]
SlicerParser = Callable[[Mapping[str, Any], str], "Slicer"]

_SCORER_PARSERS: dict[str, tuple[frozenset[str], ScorerParser]] = {}
_SLICER_PARSERS: dict[str, tuple[frozenset[str], SlicerParser]] = {}


def scorer_dict_parser(type_name: str, keys: tuple[str, ...] = ()) -> Callable[[ScorerParser], ScorerParser]:
    """Register the dict reader of scorer type ``type_name``. ``keys`` are the options its table
    may carry besides ``type`` and ``weight``: ``scorer_from_dict`` refuses any other key (naming
    it, where it is and the closest known key) before the reader runs. The reader is called as
    ``reader(table, where)``, ``where`` naming the table in messages (``scorers[1]``)."""

    def register(fn: ScorerParser) -> ScorerParser:
        _SCORER_PARSERS[type_name] = (frozenset(keys), fn)
        return fn

    return register


def slicer_dict_parser(name: str, keys: tuple[str, ...] = ()) -> Callable[[SlicerParser], SlicerParser]:
    """Register the dict reader of slicer ``name``; ``keys`` are its options, which sit in the
    policy table itself (``bucket_size``, ``quotas``...)."""

    def register(fn: SlicerParser) -> SlicerParser:
        _SLICER_PARSERS[name] = (frozenset(keys), fn)
        return fn

    return register


#: scorer types defined outside this module: normalized type name -> parser(entry, where).
#: ``model/custom_scorers.py`` installs "column" and every ``register_scorer`` name.
EXTRA_SCORER_TYPES: dict[str, Any] = {}


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


def _tables(where: str, v, what: str) -> list[Mapping]:
    """A list of tables (``[[...]]`` in TOML), each checked to be one."""
    if not isinstance(v, (list, tuple)):
        raise InvalidInputTypeError(f"{where} must be a list of {what} tables, got {type(v).__name__} {v!r}")
    for i, t in enumerate(v):
        require_mapping(f"{where}[{i}]", t)
    return list(v)


def _weight_pairs(where: str, ws, name_key: str) -> tuple[tuple[Any, Any], ...]:
    """``{name: weight}`` or ``[{<name_key>: name, weight: w}, ...]`` as (name, weight) pairs."""
    if isinstance(ws, Mapping):
        return tuple(ws.items())
    pairs = []
    for i, w in enumerate(_tables(where, ws, f"{name_key}/weight")):
        require_keys(f"{where}[{i}]", w, (name_key, "weight"))
        pairs.append((w.get(name_key), w.get("weight")))
    return tuple(pairs)


def _composite_from_list(entries, where: str) -> CompositeScorer:
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
    return (*_SCORER_PARSERS, *(k for k in EXTRA_SCORER_TYPES if k not in _SCORER_PARSERS and k != "function"))


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
    if t not in _SCORER_PARSERS and t in EXTRA_SCORER_TYPES:
        # a registered name (model/custom_scorers.py): its options go to its factory, never
        # the (meaningless) weight of an inner entry
        if not weighted:
            e = {k: v for k, v in e.items() if k != "weight"}
        return EXTRA_SCORER_TYPES[t](e, where)
    if t not in _SCORER_PARSERS:
        known = known_scorer_types()
        raise InvalidConfigError(
            f"{where}: unknown scorer type {e.get('type')!r}{suggestion(t, known)}; expected one of: {', '.join(known)}"
        )
    keys, parse = _SCORER_PARSERS[t]
    allowed = keys | SCORER_COMMON_KEYS
    require_keys(where, e, allowed, what=f"for scorer type {t!r}")
    try:
        return parse(e, where)
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
    ws = e.get("weights")
    if ws is None:
        # no custom map: the defaults, unless use_default_weights = false (empty map)
        use_default = require_bool(f"{where}.use_default_weights", e.get("use_default_weights", True))
        return KindScorer(None if use_default else ())
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
    return _composite_from_list(e.get(key), f"{where}.{key}")


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
        _curve_from_dict(c, f"{where}.curve"),
        e.get("null_timestamp_score", 0.5),
    )


_CURVE_KEYS = {"exponential": ("half_life_secs",), "window": ("max_age_secs",), "step": ("windows",)}


def _curve_from_dict(c: Mapping, where: str) -> ExponentialCurve | StepCurve | WindowCurve:
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
    for i, w in enumerate(_tables(f"{where}.windows", c.get("windows") or [], "window")):
        require_keys(f"{where}.windows[{i}]", w, ("max_age_secs", "score"))
        windows.append((w.get("max_age_secs"), w.get("score")))
    return StepCurve(tuple(windows))


@scorer_dict_parser("metadata_key", ("key", "value", "boost"))
def _metadata_key(e: Mapping, where: str) -> Scorer:
    for k in ("key", "value", "boost"):
        if k not in e:
            raise InvalidConfigError(f"{where}: metadata_key scorer needs {k!r}")
    return MetadataKeyScorer(e["key"], e["value"], e["boost"])


#: the scorer types the dict form knows (registered above, in this order)
SCORER_TYPES = tuple(_SCORER_PARSERS)


def slicer_from_dict(d: Mapping[str, Any], where: str = "slicer", *, extra_keys: Collection[str] = ()) -> Slicer:
    """The slicer of a ``[config]`` table (its options sit directly in the table). A key that is
    neither ``slicer``, one of this slicer's options nor in ``extra_keys`` (the policy's own
    keys when ``d`` is a whole policy table) is an error."""
    require_mapping(where, d)
    raw = d.get("slicer", "greedy")
    extra_keys = {"bucket_size", *extra_keys}
    name = ascii_fold(require_str(f"{where}: 'slicer'", raw)).replace("-", "_")
    if name not in _SLICER_PARSERS:
        raise InvalidConfigError(
            f"unknown slicer {raw!r}{suggestion(name, _SLICER_PARSERS)}; expected one of: {', '.join(_SLICER_PARSERS)}"
        )
    keys, parse = _SLICER_PARSERS[name]
    require_keys(where, d, keys | {"slicer"} | set(extra_keys), what=f"for slicer {name!r}")
    return parse(d, where)


def _inner_slicer(d: Mapping, allowed: tuple[str, ...]) -> GreedySlice | KnapsackSlice:
    """The ``inner_slicer`` of a quota slicer (``bucket_size`` sizes a knapsack inner)."""
    name = ascii_fold(require_str("inner_slicer", d.get("inner_slicer", "greedy")))
    if name not in allowed:
        raise InvalidConfigError(f"unknown inner_slicer {d.get('inner_slicer')!r}; expected {' or '.join(allowed)}")
    if name == "knapsack":
        return KnapsackSlice(d.get("bucket_size", 100))
    return GreedySlice()


def _count_entries(d: Mapping) -> tuple[CountQuotaEntry, ...]:
    es = []
    for i, q in enumerate(_tables("entries", d.get("entries") or [], "count quota")):
        if "kind" not in q:
            raise InvalidConfigError(f"entries[{i}] must be a table with a 'kind'")
        require_keys(f"entries[{i}]", q, ("kind", "require_count", "cap_count"))
        es.append(CountQuotaEntry(q["kind"], q.get("require_count", 0), q.get("cap_count")))
    return tuple(es)


@slicer_dict_parser("greedy")
def _greedy(d: Mapping, where: str) -> Slicer:
    return GreedySlice()


@slicer_dict_parser("knapsack", ("bucket_size",))
def _knapsack(d: Mapping, where: str) -> Slicer:
    return KnapsackSlice(d.get("bucket_size", 100))


@slicer_dict_parser("quota", ("quotas", "inner_slicer", "bucket_size"))
def _quota(d: Mapping, where: str) -> Slicer:
    qs = []
    for i, q in enumerate(_tables("quotas", d.get("quotas") or [], "quota")):
        if "kind" not in q:
            raise InvalidConfigError(f"quotas[{i}] must be a table with a 'kind'")
        require_keys(f"quotas[{i}]", q, ("kind", "require", "cap"))
        qs.append(QuotaEntry(q["kind"], q.get("require", 0.0), q.get("cap", 100.0)))
    return QuotaSlice(tuple(qs), _inner_slicer(d, ("greedy", "knapsack")))


@slicer_dict_parser("count_quota", ("entries", "inner_slicer", "scarcity_behavior", "bucket_size", "quotas"))
def _count_quota(d: Mapping, where: str) -> Slicer:
    if "quotas" in d and ascii_fold(str(d.get("inner_slicer", ""))) != "quota":
        raise InvalidConfigError(f"{where}: 'quotas' belongs to a count_quota only with inner_slicer = 'quota'")
    return CountQuotaSlice(
        _count_entries(d), count_quota_inner_from_dict(d, where), d.get("scarcity_behavior", "degrade")
    )


@slicer_dict_parser("count_constrained_knapsack", ("entries", "bucket_size", "scarcity_behavior", "inner_slicer"))
def _count_constrained_knapsack(d: Mapping, where: str) -> Slicer:
    # upstream's vectors name the hardwired inner slicer; any other inner slicer is an error
    inner = ascii_fold(require_str("inner_slicer", d.get("inner_slicer", "knapsack")))
    if inner != "knapsack":
        raise InvalidConfigError(
            f"count_constrained_knapsack always slices with knapsack; inner_slicer {d.get('inner_slicer')!r} "
            "is not supported (use count_quota for a greedy inner slicer)"
        )
    return CountConstrainedKnapsackSlice(
        _count_entries(d), d.get("bucket_size", 100), d.get("scarcity_behavior", "degrade")
    )


#: the slicer names the dict form knows
SLICER_TYPES = tuple(_SLICER_PARSERS)


def policy_from_dict(d: Mapping[str, Any], where: str = "policy config") -> Policy:
    """A Policy from a pipeline vector's ``[config]`` table (EXTENSIONS.md) + name/description;
    every key is checked (``scorers[1]: unknown key 'wieght' ... (did you mean 'weight'?)``)."""
    if not isinstance(d, Mapping):
        raise InvalidInputTypeError(f"{where} must be a table/dict, got {type(d).__name__}")
    slicer = slicer_from_dict(d, where, extra_keys=POLICY_KEYS)
    scorers = d.get("scorers")
    if not scorers:
        raise InvalidConfigError(f"{where} needs a non-empty 'scorers' list")
    if not isinstance(scorers, list):
        raise InvalidInputTypeError(f"'scorers' must be a list of scorer tables, got {type(scorers).__name__}")
    if len(scorers) == 1:
        scorer = scorer_from_dict(scorers[0], "scorers[0]")
        # one scorer is used alone (its weight is ignored), but a weight that no list would
        # accept is refused here too, as it is with two scorers
        require_weight("scorers[0].weight", scorers[0].get("weight", 1.0), positive=True)
    else:
        scorer = _composite_from_list(scorers, "scorers")
    return Policy(
        scorer=scorer,
        slicer=slicer,
        placer=d.get("placer", "chronological"),
        deduplication=d.get("deduplication", True),
        overflow_strategy=d.get("overflow_strategy", "throw"),
        name=d.get("name"),
        description=d.get("description"),
    )


def count_quota_inner_from_dict(d: Mapping[str, Any], where: str = "slicer") -> Slicer:
    """A count_quota table's ``inner_slicer``: a name - ``greedy``, ``knapsack`` (refused by
    the spec's guard, in CountQuotaSlice) or ``quota`` (whose ``quotas`` sit in the same table,
    inner greedy) - or a full slicer table of its own (any slicer, nested count quotas included)."""
    inner = d.get("inner_slicer", "greedy")
    if isinstance(inner, Mapping):
        return slicer_from_dict(inner, f"{where}.inner_slicer")
    n = ascii_fold(require_str("inner_slicer", inner)).replace("-", "_")
    if n == "quota":
        return slicer_from_dict({"slicer": "quota", "quotas": d.get("quotas") or []}, where)
    if n == "knapsack":
        return KnapsackSlice(d.get("bucket_size", 100))
    if n != "greedy":
        raise InvalidConfigError(
            f"unknown inner_slicer {inner!r}{suggestion(n, ('greedy', 'quota'))} for count_quota; "
            "expected greedy, quota or a slicer table"
        )
    return GreedySlice()


# ----------------------------------------------------------------------------- .NET JSON shape
# The .NET ``Wollax.Cupel.Json`` policy object (camelCase; enum values as camelCase strings
# or their ordinals). ``Policy.from_json`` recognises it, so its reader lives with Policy.
# Its keys are those of upstream's CupelPolicy / ScorerEntry / QuotaEntry JSON properties.
DOTNET_POLICY_KEYS = frozenset(
    {
        "scorers",
        "slicerType",
        "placerType",
        "deduplicationEnabled",
        "overflowStrategy",
        "knapsackBucketSize",
        "streamBatchSize",
        "quotas",
        "name",
        "description",
    }
)
_DOTNET_SCORER_KEYS = frozenset({"type", "weight", "kindWeights", "tagWeights", "innerScorer"})
_DOTNET_QUOTA_KEYS = frozenset({"kind", "minPercent", "maxPercent"})
_DOTNET_SCORERS = {
    "recency": RecencyScorer,
    "priority": PriorityScorer,
    "kind": KindScorer,
    "tag": TagScorer,
    "frequency": FrequencyScorer,
    "reflexive": ReflexiveScorer,
    "scaled": ScaledScorer,
}
_DOTNET_SCORER_ORDER = list(_DOTNET_SCORERS)
_DOTNET_SLICERS = ["greedy", "knapsack", "stream"]
_DOTNET_PLACERS = ["chronological", "uShaped"]
_DOTNET_OVERFLOW = ["throw", "truncate", "proceed"]


def is_dotnet_shape(data: Any) -> bool:
    """Whether a policy object is in the .NET shape: a key only that shape has, at the top or
    in a scorer or quota entry."""
    if not isinstance(data, Mapping):
        return False
    slicer_keys = {k for keys, _ in _SLICER_PARSERS.values() for k in keys}  # e.g. "quotas": both shapes
    if any(k in data for k in DOTNET_POLICY_KEYS - POLICY_KEYS - slicer_keys):
        return True
    entries = [e for k in ("scorers", "quotas") if isinstance(data.get(k), list) for e in data[k]]
    only_dotnet = (_DOTNET_SCORER_KEYS | _DOTNET_QUOTA_KEYS) - {"type", "weight", "kind"}
    return any(isinstance(e, Mapping) and any(k in e for k in only_dotnet) for e in entries)


def _dotnet_enum(where: str, v, names: list[str]) -> str:
    """An enum value: its camelCase name, as .NET writes it, or its ordinal."""
    if isinstance(v, bool):
        raise InvalidInputTypeError(f"{where} must be a string, got {v!r}")
    if isinstance(v, int):
        if 0 <= v < len(names):
            return names[v]
        raise InvalidConfigError(f"{where}: unknown value {v}; expected one of {', '.join(names)}")
    if isinstance(v, str):
        s = v.strip()
        if s.isdigit() and int(s) < len(names):
            return names[int(s)]
        if s in names:
            return s
        raise InvalidConfigError(
            f"{where}: unknown value {v!r}{suggestion(s, names)}; expected one of {', '.join(names)} "
            "(camelCase, as .NET writes them)"
        )
    raise InvalidInputTypeError(f"{where} must be a string, got {type(v).__name__} {v!r}")


def _dotnet_weight(where: str, e: Mapping) -> float:
    return require_weight(f"{where}.weight", e.get("weight", 0), positive=True)


def _dotnet_scorer(where: str, e: Any) -> Scorer:
    require_mapping(where, e, "an object")
    extra = e.get("type")
    name = ascii_fold(extra).replace("-", "_") if isinstance(extra, str) else None
    if name is not None and name not in SCORER_TYPES and (name in _SCORER_PARSERS or name in EXTRA_SCORER_TYPES):
        # a type defined outside this module (column, a registered name): read as in the dict form
        return scorer_from_dict(e, where)
    require_keys(where, e, _DOTNET_SCORER_KEYS)
    t = _dotnet_enum(f"{where}.type", e.get("type", 0), _DOTNET_SCORER_ORDER)
    inner = e.get("innerScorer")
    if t == "scaled":
        if inner is None:
            raise InvalidConfigError(f"{where}: innerScorer must be specified when type is scaled")
        _dotnet_weight(f"{where}.innerScorer", require_mapping(f"{where}.innerScorer", inner, "an object"))
        return ScaledScorer(_dotnet_scorer(f"{where}.innerScorer", inner))
    if inner is not None:
        raise InvalidConfigError(f"{where}: innerScorer is only valid for type scaled")
    for key, owner in (("kindWeights", "kind"), ("tagWeights", "tag")):
        if e.get(key) is not None and t != owner:
            raise InvalidConfigError(f"{where}: {key} is only valid for type {owner}")
    if t == "kind":
        kw = e.get("kindWeights")
        if kw is None:
            return KindScorer(None)
        return KindScorer(tuple(require_mapping(f"{where}.kindWeights", kw, "an object of kind -> weight").items()))
    if t == "tag":
        tw = e.get("tagWeights")
        if tw is None:
            raise InvalidConfigError(f"{where}: tagWeights must be specified when type is tag")
        return TagScorer(tuple(require_mapping(f"{where}.tagWeights", tw, "an object of tag -> weight").items()))
    return _DOTNET_SCORERS[t]()


def _dotnet_slicer(d: Mapping) -> Slicer:
    slicer_type = _dotnet_enum("slicerType", d.get("slicerType", "greedy"), _DOTNET_SLICERS)
    bucket = d.get("knapsackBucketSize")
    if bucket is not None and slicer_type != "knapsack":
        raise InvalidConfigError("knapsackBucketSize can only be specified when slicerType is knapsack")
    if d.get("streamBatchSize") is not None and slicer_type != "stream":
        raise InvalidConfigError("streamBatchSize can only be specified when slicerType is stream")
    if slicer_type == "stream":
        raise InvalidConfigError("slicerType 'stream' is asynchronous and not supported by cupel_np; use greedy")
    base = KnapsackSlice(100 if bucket is None else bucket) if slicer_type == "knapsack" else GreedySlice()
    quotas = d.get("quotas") or []
    if not quotas:
        return base
    qs = []
    for i, q in enumerate(_tables("quotas", quotas, "quota")):
        require_keys(f"quotas[{i}]", q, _DOTNET_QUOTA_KEYS)
        if not q.get("kind"):
            raise InvalidConfigError(f"quotas[{i}] needs a 'kind'")
        lo, hi = q.get("minPercent"), q.get("maxPercent")
        if lo is None and hi is None:
            raise InvalidConfigError(f"quotas[{i}]: at least one of minPercent or maxPercent must be specified")
        qs.append(QuotaEntry(q["kind"], 0.0 if lo is None else lo, 100.0 if hi is None else hi))
    return QuotaSlice(tuple(qs), base)


def policy_from_dotnet(d: Mapping[str, Any]) -> Policy:
    """Read a policy written by .NET ``CupelJsonSerializer`` (or by hand in that shape). Keys
    are upstream's JSON property names; any other key is an error."""
    if not isinstance(d, Mapping):
        raise InvalidInputTypeError(f".NET policy must be a JSON object, got {type(d).__name__}")
    require_keys(".NET policy", d, DOTNET_POLICY_KEYS)
    scorers = d.get("scorers")
    if scorers is None:
        raise InvalidConfigError("scorers: value cannot be null")
    if not isinstance(scorers, list) or not scorers:
        raise InvalidConfigError("scorers must contain at least one entry")
    entries = tuple(
        (_dotnet_scorer(f"scorers[{i}]", e), _dotnet_weight(f"scorers[{i}]", e)) for i, e in enumerate(scorers)
    )
    # .NET always builds a weighted composite over the policy's scorers
    scorer = entries[0][0] if len(entries) == 1 else CompositeScorer(entries)
    placer = _dotnet_enum("placerType", d.get("placerType", "chronological"), _DOTNET_PLACERS)
    return Policy(
        scorer=scorer,
        slicer=_dotnet_slicer(d),
        placer="u_shaped" if placer == "uShaped" else "chronological",
        deduplication=d.get("deduplicationEnabled", True),
        overflow_strategy=_dotnet_enum("overflowStrategy", d.get("overflowStrategy", "throw"), _DOTNET_OVERFLOW),
        name=d.get("name"),
        description=d.get("description"),
    )


def policy_to_dotnet(policy: Policy) -> dict[str, Any]:
    """The .NET JSON shape of ``policy`` (raises for what .NET cannot express)."""

    def entry(s: Scorer, w: float) -> dict:
        if isinstance(s, KindScorer):
            d = {"type": "kind", "weight": w}
            if s.weights is not None:
                d["kindWeights"] = dict(s.weights)
            return d
        if isinstance(s, TagScorer):
            return {"type": "tag", "weight": w, "tagWeights": dict(s.tag_weights)}
        if isinstance(s, ScaledScorer):
            return {"type": "scaled", "weight": w, "innerScorer": entry(s.inner, 1.0)}
        if type(s) in (RecencyScorer, PriorityScorer, FrequencyScorer, ReflexiveScorer):
            return {"type": s.type_name, "weight": w}
        if hasattr(s, "dotnet_entry"):  # column and registered scorers (model/custom_scorers.py)
            return s.dotnet_entry(w)
        raise InvalidConfigError(f"scorer type {s.type_name!r} cannot be written in the .NET policy shape")

    sc = policy.scorer
    pairs = sc.entries if isinstance(sc, CompositeScorer) else ((sc, 1.0),)
    out: dict[str, Any] = {"scorers": [entry(s, w) for s, w in pairs]}
    sl = policy.slicer
    quotas = None
    if isinstance(sl, QuotaSlice):
        quotas = [{"kind": q.kind, "minPercent": q.require, "maxPercent": q.cap} for q in sl.quotas]
        sl = sl.inner
    if isinstance(sl, KnapsackSlice):
        out["slicerType"] = "knapsack"
    elif isinstance(sl, GreedySlice):
        out["slicerType"] = "greedy"
    else:
        raise InvalidConfigError(f"slicer {sl.name!r} cannot be written in the .NET policy shape")
    out["placerType"] = "uShaped" if policy.placer == "u_shaped" else "chronological"
    out["deduplicationEnabled"] = policy.deduplication
    out["overflowStrategy"] = policy.overflow_strategy
    if isinstance(sl, KnapsackSlice):
        out["knapsackBucketSize"] = sl.bucket_size
    if quotas:
        out["quotas"] = quotas
    if policy.name is not None:
        out["name"] = policy.name
    if policy.description is not None:
        out["description"] = policy.description
    return out
