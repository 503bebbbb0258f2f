"""Slicer specs as data (greedy, knapsack, quota, count quota, count-constrained knapsack) and
the dict reader of each: a slicer's options sit directly in the policy's ``[config]`` table."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from cupel_np.errors import InvalidConfigError, InvalidInputTypeError
from cupel_np.model.fields import (
    require_int,
    require_keys,
    require_mapping,
    require_nonblank,
    require_number,
    require_str,
    require_tables,
    suggestion,
)
from cupel_np.text import ascii_fold


# ----------------------------------------------------------------------------- slicers
@dataclass(frozen=True)
class GreedySlice:
    """The greedy slicer: items by score density (score per token), taken while they fit the
    target (tokens)."""

    name = "greedy"

    def to_dict(self) -> dict[str, Any]:
        """``{"slicer": "greedy"}``, the slicer's policy-file form (``slicer_from_dict`` reads
        it back)."""
        return {"slicer": "greedy"}


@dataclass(frozen=True)
class KnapsackSlice:
    """The 0/1 knapsack slicer: the best total score within the target, token counts rounded to
    ``bucket_size`` tokens (an integer > 0, else ``InvalidConfigError``). Raises
    ``TableTooLargeError`` at run time when the DP table would pass the cell limit."""

    bucket_size: int = 100
    name = "knapsack"

    def __post_init__(self):
        b = require_int("knapsack bucket_size", self.bucket_size, integral_float=True)
        if b <= 0:
            raise InvalidConfigError(f"knapsack bucket_size must be > 0, got {b}")
        object.__setattr__(self, "bucket_size", b)

    def to_dict(self) -> dict[str, Any]:
        """``{"slicer": "knapsack", "bucket_size": ...}``, the slicer's policy-file form."""
        return {"slicer": "knapsack", "bucket_size": self.bucket_size}


@dataclass(frozen=True)
class QuotaEntry:
    """A quota of one ``kind``: ``require`` and ``cap`` are percentages (0..100) of the target
    tokens; ``InvalidConfigError`` outside that range or for ``require > cap``."""

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
    """The quota slicer: splits the target tokens among kinds by their ``QuotaEntry``
    percentages and runs ``inner`` (greedy or knapsack) on each kind's share."""

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
        """The slicer's policy-file form: ``{"slicer": "quota", "inner_slicer": name, "quotas":
        [...]}`` (and ``bucket_size`` for a knapsack inner slicer)."""
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
        """The slicer's policy-file form: ``{"slicer": "count_quota", "inner_slicer": ...,
        "scarcity_behavior": ..., "entries": [...]}``."""
        return {
            "slicer": "count_quota",
            # greedy by name; any other inner slicer as its own slicer table
            "inner_slicer": "greedy" if isinstance(self.inner, GreedySlice) else self.inner.to_dict(),
            "scarcity_behavior": self.scarcity_behavior,
            "entries": [_entry_dict(e) for e in self.entries],
        }


@dataclass(frozen=True)
class CountConstrainedKnapsackSlice:
    """The knapsack slicer with per-kind item counts: each ``CountQuotaEntry``'s
    ``require_count`` items are taken first, ``cap_count`` bounds a kind, the rest is a knapsack
    (``bucket_size`` tokens). ``scarcity_behavior``: "degrade" (record a shortfall) or "throw"
    (``ScarcityError``)."""

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
        """The slicer's policy-file form: ``{"slicer": "count_constrained_knapsack", "entries":
        [...], "bucket_size": ..., "scarcity_behavior": ...}``."""
        return {
            "slicer": "count_constrained_knapsack",
            "bucket_size": self.bucket_size,
            "scarcity_behavior": self.scarcity_behavior,
            "entries": [_entry_dict(e) for e in self.entries],
        }


Slicer = GreedySlice | KnapsackSlice | QuotaSlice | CountQuotaSlice | CountConstrainedKnapsackSlice


# ----------------------------------------------------------------------------- dict shapes
SlicerParser = Callable[[Mapping[str, Any], str], "Slicer"]

_SLICER_PARSERS: dict[str, tuple[frozenset[str], SlicerParser]] = {}


def slicer_dict_parser(name: str, keys: tuple[str, ...] = ()) -> Callable[[SlicerParser], SlicerParser]:
    """Register the dict reader of slicer ``name``; ``keys`` are its options, which sit in the
    policy table itself (``bucket_size``, ``quotas``...)."""

    def register(fn: SlicerParser) -> SlicerParser:
        _SLICER_PARSERS[name] = (frozenset(keys), fn)
        return fn

    return register


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
    for i, q in enumerate(require_tables("entries", d.get("entries") or [], "count quota")):
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
    for i, q in enumerate(require_tables("quotas", d.get("quotas") or [], "quota")):
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


def slicer_option_keys() -> frozenset[str]:
    """Every option key some slicer reads from a policy table (``bucket_size``, ``quotas``...)."""
    return frozenset(k for keys, _ in _SLICER_PARSERS.values() for k in keys)


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
