"""Policies as data: validated, immutable, hashable scorer / slicer / placer specs.

``Policy.from_dict`` takes a pipeline conformance vector's ``[config]`` table (see
EXTENSIONS.md); ``to_dict`` writes the same shape back. ``Policy.from_json_file`` /
``from_toml_file`` load files, and ``Policy.from_dotnet_json`` reads the .NET
``Wollax.Cupel.Json`` policy shape.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cupel_np._files import StrPath
from cupel_np.errors import InvalidConfigError, InvalidInputTypeError
from cupel_np.text import ascii_fold, is_blank

DEFAULT_KIND_WEIGHTS = (
    ("SystemPrompt", 1.0),
    ("Memory", 0.8),
    ("ToolOutput", 0.6),
    ("Document", 0.4),
    ("Message", 0.2),
)


def _num(where: str, v, *, allow_int=True) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise InvalidInputTypeError(f"{where} must be a number, got {type(v).__name__} {v!r}")
    return float(v)


def _int(where: str, v) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        if isinstance(v, float) and v.is_integer():
            return int(v)
        raise InvalidInputTypeError(f"{where} must be an integer, got {type(v).__name__} {v!r}")
    return int(v)


def _str(where: str, v) -> str:
    if not isinstance(v, str):
        raise InvalidInputTypeError(f"{where} must be a string, got {type(v).__name__} {v!r}")
    return v


def _kind(where: str, v) -> str:
    v = _str(where, v)
    if is_blank(v):
        raise InvalidConfigError(f"{where} must not be empty or whitespace-only, got {v!r}")
    return v


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
            k = _kind("kind weight kind", k)
            w = _num(f"kind weight for {k!r}", w)
            if w < 0.0:
                raise InvalidConfigError(f"kind weight for {k!r} must be non-negative, got {w!r}")
            if not math.isfinite(w):
                raise InvalidConfigError(f"kind weight for {k!r} must be finite, got {w!r}")
            clean.append((k, w))
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
            k = _str("tag weight tag", k)
            w = _num(f"tag weight for {k!r}", w)
            if w < 0.0:
                raise InvalidConfigError(f"tag weight for {k!r} must be non-negative, got {w!r}")
            if not math.isfinite(w):
                raise InvalidConfigError(f"tag weight for {k!r} must be finite, got {w!r}")
            clean.append((k, w))
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
            w = _num(f"composite child {i} ({s.type_name}) weight", w)
            if not math.isfinite(w):
                raise InvalidConfigError(f"composite child {i} ({s.type_name}) weight must be finite, got {w!r}")
            if w <= 0.0:
                raise InvalidConfigError(f"composite child {i} ({s.type_name}) weight must be positive, got {w!r}")
            clean.append((s, w))
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
        v = _num("metadata_trust default_score", self.default_score)
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
        _str("metadata_key key", self.key)
        _str("metadata_key value", self.value)
        b = _num("metadata_key boost", self.boost)
        if not math.isfinite(b):
            raise InvalidConfigError(f"metadata_key boost must be finite, got {b!r}")
        if b <= 0.0:
            raise InvalidConfigError(f"metadata_key boost must be > 0.0, got {b!r}")
        object.__setattr__(self, "boost", b)

    def to_dict(self) -> dict[str, Any]:
        return {"type": "metadata_key", "key": self.key, "value": self.value, "boost": self.boost}


@dataclass(frozen=True)
class ExponentialCurve:
    half_life_secs: float

    def __post_init__(self):
        v = _num("decay curve half_life_secs", self.half_life_secs)
        if not (v > 0.0) or not math.isfinite(v):
            raise InvalidConfigError(f"decay curve half_life_secs must be > 0 and finite, got {v!r}")
        object.__setattr__(self, "half_life_secs", v)

    def to_dict(self) -> dict[str, Any]:
        return {"type": "exponential", "half_life_secs": self.half_life_secs}


@dataclass(frozen=True)
class WindowCurve:
    max_age_secs: float

    def __post_init__(self):
        v = _num("decay curve max_age_secs", self.max_age_secs)
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
            age = _num(f"decay step window {i} max_age_secs", age)
            score = _num(f"decay step window {i} score", score)
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
        v = _num("decay null_timestamp_score", self.null_timestamp_score)
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
        b = _int("knapsack bucket_size", self.bucket_size)
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
        _kind("quota kind", self.kind)
        r = _num(f"quota require for {self.kind!r}", self.require)
        c = _num(f"quota cap for {self.kind!r}", self.cap)
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
        _kind("count quota kind", self.kind)
        r = _int(f"require_count for {self.kind!r}", self.require_count)
        if self.cap_count is None:
            if r < 0:
                raise InvalidConfigError(f"require_count for {self.kind!r} must be >= 0, got {r}")
            object.__setattr__(self, "require_count", r)
            return
        c = _int(f"cap_count for {self.kind!r}", self.cap_count)
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
        sb = _str("scarcity_behavior", self.scarcity_behavior).lower()
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
        sb = _str("scarcity_behavior", self.scarcity_behavior).lower()
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
    s = _str("placer", v)
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
        if not isinstance(self.deduplication, bool):
            raise InvalidInputTypeError(f"Policy.deduplication must be a bool, got {self.deduplication!r}")
        ov = ascii_fold(_str("overflow_strategy", self.overflow_strategy))
        if ov not in OVERFLOW_STRATEGIES:
            raise InvalidConfigError(
                f"unknown overflow_strategy {self.overflow_strategy!r}; expected throw, truncate or proceed"
            )
        object.__setattr__(self, "overflow_strategy", ov)
        for k in ("name", "description"):
            v = getattr(self, k)
            if v is not None:
                _str(f"Policy.{k}", v)

    # -- dict / file round trips --------------------------------------------------------
    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Policy:
        """From a pipeline vector's ``[config]`` table (EXTENSIONS.md) + name/description."""
        if not isinstance(d, Mapping):
            raise InvalidInputTypeError(f"policy config must be a table/dict, got {type(d).__name__}")
        scorers = d.get("scorers")
        if not scorers:
            raise InvalidConfigError("policy config needs a non-empty 'scorers' list")
        if not isinstance(scorers, list):
            raise InvalidInputTypeError(f"'scorers' must be a list of scorer tables, got {type(scorers).__name__}")
        if len(scorers) == 1:
            scorer = scorer_from_dict(scorers[0], "scorers[0]")
        else:
            scorer = _composite_from_list(scorers, "scorers")
        return cls(
            scorer=scorer,
            slicer=slicer_from_dict(d),
            placer=d.get("placer", "chronological"),
            deduplication=d.get("deduplication", True),
            overflow_strategy=d.get("overflow_strategy", "throw"),
            name=d.get("name"),
            description=d.get("description"),
        )

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
        if isinstance(data, Mapping) and ("slicerType" in data or "placerType" in data or _looks_dotnet(data)):
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
            data = dict(data["config"], **{k: v for k, v in data.items() if k in ("name", "description")})
        return cls.from_dict(data)

    @classmethod
    def from_file(cls, path: StrPath) -> Policy:
        p = Path(path)
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


def _looks_dotnet(data: Mapping) -> bool:
    sc = data.get("scorers")
    return (
        bool(sc)
        and isinstance(sc, list)
        and isinstance(sc[0], Mapping)
        and (
            "kindWeights" in sc[0]
            or "tagWeights" in sc[0]
            or "innerScorer" in sc[0]
            or "deduplicationEnabled" in data
            or "overflowStrategy" in data
        )
    )


def json_default(o):
    if isinstance(o, datetime):
        return o.isoformat()
    raise TypeError(f"not JSON serializable: {o!r}")


SCORER_TYPES = (
    "recency",
    "priority",
    "kind",
    "tag",
    "frequency",
    "reflexive",
    "composite",
    "scaled",
    "metadata_trust",
    "decay",
    "metadata_key",
)


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


def _composite_from_list(entries, where: str) -> CompositeScorer:
    if not isinstance(entries, list) or not entries:
        raise InvalidConfigError(f"{where} must be a non-empty list of scorer tables")
    pairs = []
    for i, e in enumerate(entries):
        if not isinstance(e, Mapping):
            raise InvalidInputTypeError(f"{where}[{i}] must be a table, got {type(e).__name__}")
        pairs.append((scorer_from_dict(e, f"{where}[{i}]"), _num(f"{where}[{i}].weight", e.get("weight", 1.0))))
    return CompositeScorer(tuple(pairs))


def scorer_from_dict(e: Mapping[str, Any], where: str = "scorer") -> Scorer:
    """One scorer entry in the EXTENSIONS.md form (``type`` plus that scorer's options)."""
    if not isinstance(e, Mapping):
        raise InvalidInputTypeError(f"{where} must be a table, got {type(e).__name__}")
    t = e.get("type")
    if t is None:
        raise InvalidConfigError(f"{where} has no 'type'")
    t = ascii_fold(_str(f"{where}.type", t)).replace("-", "_")
    try:
        if t == "recency":
            return RecencyScorer()
        if t == "priority":
            return PriorityScorer()
        if t == "reflexive":
            return ReflexiveScorer()
        if t == "frequency":
            return FrequencyScorer()
        if t == "kind":
            ws = e.get("weights")
            if ws is None:
                # no custom map: the defaults, unless use_default_weights = false (empty map)
                return KindScorer(None if e.get("use_default_weights", True) is not False else ())
            if isinstance(ws, Mapping):
                return KindScorer(tuple(ws.items()))
            return KindScorer(tuple((w.get("kind"), w.get("weight")) for w in ws))
        if t == "tag":
            ws = e.get("tag_weights", [])
            if isinstance(ws, Mapping):
                return TagScorer(tuple(ws.items()))
            return TagScorer(tuple((w.get("tag"), w.get("weight")) for w in ws))
        if t == "composite":
            children = e.get("scorers", e.get("children"))
            return _composite_from_list(children, f"{where}.scorers")
        if t == "scaled":
            if "inner" in e:
                return ScaledScorer(scorer_from_dict(e["inner"], f"{where}.inner"))
            inner = e.get("inner_scorer")
            if inner is None:
                raise InvalidConfigError(f"{where}: scaled scorer needs 'inner_scorer' or 'inner'")
            if isinstance(inner, Mapping):
                return ScaledScorer(scorer_from_dict(inner, f"{where}.inner_scorer"))
            return ScaledScorer(scorer_from_dict({"type": inner}, f"{where}.inner_scorer"))
        if t == "metadata_trust":
            return MetadataTrustScorer(e.get("default_score", 0.5))
        if t == "metadata_key":
            for k in ("key", "value", "boost"):
                if k not in e:
                    raise InvalidConfigError(f"{where}: metadata_key scorer needs {k!r}")
            return MetadataKeyScorer(e["key"], e["value"], e["boost"])
        if t == "decay":
            if "reference_time" not in e:
                raise InvalidConfigError(f"{where}: decay scorer needs an explicit 'reference_time'")
            c = e.get("curve")
            if not isinstance(c, Mapping):
                raise InvalidConfigError(f"{where}: decay scorer needs a 'curve' table")
            ct = ascii_fold(_str(f"{where}.curve.type", c.get("type", "")))
            curve: ExponentialCurve | WindowCurve | StepCurve
            if ct == "exponential":  # the curves check their own arguments
                half_life: Any = c.get("half_life_secs")
                curve = ExponentialCurve(half_life)
            elif ct == "window":
                max_age: Any = c.get("max_age_secs")
                curve = WindowCurve(max_age)
            elif ct == "step":
                ws = c.get("windows") or []
                curve = StepCurve(tuple((w.get("max_age_secs"), w.get("score")) for w in ws))
            else:
                raise InvalidConfigError(
                    f"{where}: unknown decay curve type {c.get('type')!r}; expected exponential, step or window"
                )
            return DecayScorer(
                _as_datetime(f"{where}.reference_time", e["reference_time"]),
                curve,
                e.get("null_timestamp_score", 0.5),
            )
    except InvalidConfigError as err:
        msg = str(err)
        if not msg.startswith(where):
            raise InvalidConfigError(f"{where}: {msg}") from None
        raise
    if t in EXTRA_SCORER_TYPES:
        return EXTRA_SCORER_TYPES[t](e, where)
    raise InvalidConfigError(
        f"{where}: unknown scorer type {e.get('type')!r}; expected one of: "
        f"{', '.join(SCORER_TYPES + tuple(k for k in EXTRA_SCORER_TYPES if k != 'function'))}"
    )


SLICER_TYPES = ("greedy", "knapsack", "quota", "count_quota", "count_constrained_knapsack")


def _simple_slicer(name: str, d: Mapping) -> GreedySlice | KnapsackSlice:
    n = ascii_fold(name)
    if n == "greedy":
        return GreedySlice()
    if n == "knapsack":
        return KnapsackSlice(d.get("bucket_size", 100))
    raise InvalidConfigError(f"unknown inner_slicer {name!r}; expected greedy or knapsack")


def slicer_from_dict(d: Mapping[str, Any]) -> Slicer:
    """The slicer of a ``[config]`` table (its options sit directly in the table)."""
    name = ascii_fold(_str("slicer", d.get("slicer", "greedy"))).replace("-", "_")
    if name == "greedy":
        return GreedySlice()
    if name == "knapsack":
        return KnapsackSlice(d.get("bucket_size", 100))
    if name == "quota":
        qs = []
        for i, q in enumerate(d.get("quotas") or []):
            if not isinstance(q, Mapping) or "kind" not in q:
                raise InvalidConfigError(f"quotas[{i}] must be a table with a 'kind'")
            qs.append(QuotaEntry(q["kind"], q.get("require", 0.0), q.get("cap", 100.0)))
        return QuotaSlice(tuple(qs), _simple_slicer(_str("inner_slicer", d.get("inner_slicer", "greedy")), d))
    if name in ("count_quota", "count_constrained_knapsack"):
        es = []
        for i, q in enumerate(d.get("entries") or []):
            if not isinstance(q, Mapping) or "kind" not in q:
                raise InvalidConfigError(f"entries[{i}] must be a table with a 'kind'")
            es.append(CountQuotaEntry(q["kind"], q.get("require_count", 0), q.get("cap_count")))
        sb = d.get("scarcity_behavior", "degrade")
        if name == "count_quota":
            return CountQuotaSlice(tuple(es), count_quota_inner_from_dict(d), sb)
        return CountConstrainedKnapsackSlice(tuple(es), d.get("bucket_size", 100), sb)
    raise InvalidConfigError(f"unknown slicer {d.get('slicer')!r}; expected one of: {', '.join(SLICER_TYPES)}")


def count_quota_inner_from_dict(d: Mapping[str, Any]) -> Slicer:
    """A count_quota table's ``inner_slicer``: a name - ``greedy``, ``knapsack`` (refused by
    the spec's guard) or ``quota`` (whose ``quotas`` sit in the same table, inner greedy) - or
    a full slicer table of its own (any slicer, nested count quotas included)."""
    inner = d.get("inner_slicer", "greedy")
    if isinstance(inner, Mapping):
        try:
            return slicer_from_dict(inner)
        except InvalidConfigError as err:
            raise InvalidConfigError(f"inner_slicer: {err}") from None
    n = ascii_fold(_str("inner_slicer", inner)).replace("-", "_")
    if n == "quota":
        return slicer_from_dict({k: v for k, v in d.items() if k in ("quotas",)} | {"slicer": "quota"})
    if n not in ("greedy", "knapsack"):
        raise InvalidConfigError(
            f"unknown inner_slicer {inner!r} for count_quota; expected greedy, quota or a slicer table"
        )
    return _simple_slicer(n, d)


# ----------------------------------------------------------------------------- .NET JSON shape
# The .NET ``Wollax.Cupel.Json`` policy object (camelCase; enum values as camelCase strings
# or their ordinals). ``Policy.from_json`` recognises it, so its reader lives with Policy.
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


def _dotnet_enum(where: str, v, names: list[str]) -> str:
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
            f"{where}: unknown value {v!r}; expected one of {', '.join(names)} (camelCase, as .NET writes them)"
        )
    raise InvalidInputTypeError(f"{where} must be a string, got {type(v).__name__} {v!r}")


def _dotnet_weight(where: str, e: Mapping) -> float:
    w = e.get("weight", 0)
    if isinstance(w, bool) or not isinstance(w, (int, float)):
        raise InvalidInputTypeError(f"{where}.weight must be a number, got {w!r}")
    w = float(w)
    if not math.isfinite(w) or w <= 0:
        raise InvalidConfigError(f"{where}.weight must be positive and finite, got {w!r}")
    return w


def _dotnet_scorer(where: str, e: Any) -> Scorer:
    if not isinstance(e, Mapping):
        raise InvalidInputTypeError(f"{where} must be an object, got {type(e).__name__}")
    extra = e.get("type")
    if isinstance(extra, str) and ascii_fold(extra).replace("-", "_") in EXTRA_SCORER_TYPES:
        # a column scorer or a registered name: the same keys as the dict form (plus weight)
        return scorer_from_dict(e, where)
    t = _dotnet_enum(f"{where}.type", e.get("type", 0), _DOTNET_SCORER_ORDER)
    inner = e.get("innerScorer")
    if t == "scaled":
        if inner is None:
            raise InvalidConfigError(f"{where}: innerScorer must be specified when type is scaled")
        _dotnet_weight(f"{where}.innerScorer", inner)
        return ScaledScorer(_dotnet_scorer(f"{where}.innerScorer", inner))
    if inner is not None:
        raise InvalidConfigError(f"{where}: innerScorer is only valid for type scaled")
    if t == "kind":
        kw = e.get("kindWeights")
        if kw is None:
            return KindScorer(None)
        if not isinstance(kw, Mapping):
            raise InvalidInputTypeError(f"{where}.kindWeights must be an object of kind -> weight")
        return KindScorer(tuple(kw.items()))
    if t == "tag":
        tw = e.get("tagWeights")
        if tw is None:
            raise InvalidConfigError(f"{where}: tagWeights must be specified when type is tag")
        if not isinstance(tw, Mapping):
            raise InvalidInputTypeError(f"{where}.tagWeights must be an object of tag -> weight")
        return TagScorer(tuple(tw.items()))
    return _DOTNET_SCORERS[t]()


def policy_from_dotnet(d: Mapping[str, Any]) -> Policy:
    """Read a policy written by .NET ``CupelJsonSerializer`` (or by hand in that shape)."""
    if not isinstance(d, Mapping):
        raise InvalidInputTypeError(f".NET policy must be a JSON object, got {type(d).__name__}")
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
    slicer_type = _dotnet_enum("slicerType", d.get("slicerType", "greedy"), _DOTNET_SLICERS)
    bucket = d.get("knapsackBucketSize")
    if bucket is not None and slicer_type != "knapsack":
        raise InvalidConfigError("knapsackBucketSize can only be specified when slicerType is knapsack")
    if slicer_type == "stream":
        raise InvalidConfigError("slicerType 'stream' is asynchronous and not supported by cupel_np; use greedy")
    base = KnapsackSlice(100 if bucket is None else bucket) if slicer_type == "knapsack" else GreedySlice()
    quotas = d.get("quotas") or []
    slicer: Slicer = base
    if quotas:
        qs = []
        for i, q in enumerate(quotas):
            if not isinstance(q, Mapping) or not q.get("kind"):
                raise InvalidConfigError(f"quotas[{i}] needs a 'kind'")
            lo, hi = q.get("minPercent"), q.get("maxPercent")
            if lo is None and hi is None:
                raise InvalidConfigError(f"quotas[{i}]: at least one of minPercent or maxPercent must be specified")
            qs.append(QuotaEntry(q["kind"], 0.0 if lo is None else lo, 100.0 if hi is None else hi))
        slicer = QuotaSlice(tuple(qs), base)
    return Policy(
        scorer=scorer,
        slicer=slicer,
        placer="u_shaped"
        if _dotnet_enum("placerType", d.get("placerType", "chronological"), _DOTNET_PLACERS) == "uShaped"
        else "chronological",
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
