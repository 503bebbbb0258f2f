"""The .NET ``Wollax.Cupel.Json`` policy shape (camelCase keys; enum values as camelCase strings
or their ordinals): read into a ``Policy``'s fields and written back."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from cupel_np.errors import InvalidConfigError, InvalidInputTypeError
from cupel_np.model.fields import require_keys, require_mapping, require_tables, require_weight, suggestion
from cupel_np.model.scorers import (
    CompositeScorer,
    FrequencyScorer,
    KindScorer,
    PriorityScorer,
    RecencyScorer,
    ReflexiveScorer,
    ScaledScorer,
    Scorer,
    TagScorer,
    scorer_from_dict,
    scorer_type,
)
from cupel_np.model.slicers import GreedySlice, KnapsackSlice, QuotaEntry, QuotaSlice, Slicer
from cupel_np.text import ascii_fold


class PolicyFields(Protocol):
    """What ``policy_to_dotnet`` reads of a ``Policy`` (policy.py builds Policies from this
    module's reader, so this module does not import it)."""

    scorer: Scorer
    slicer: Slicer
    placer: str
    deduplication: bool
    overflow_strategy: str
    name: str | None
    description: str | None
    groups: str | None


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
        "groups",  # a cupel_np extension (docs/tool-pairs.md)
    }
)
DOTNET_SCORER_KEYS = frozenset({"type", "weight", "kindWeights", "tagWeights", "innerScorer"})
DOTNET_QUOTA_KEYS = frozenset({"kind", "minPercent", "maxPercent"})
_ENTRY_KEYS = frozenset({"type", "weight"})
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
    known = scorer_type(name) if name is not None else None
    if known is not None and name not in _DOTNET_SCORERS:
        # a type the .NET shape has not (decay, metadata_trust, metadata_key, composite, column,
        # a registered name): its EXTENSIONS.md scorer entry, read as in the dict form
        return scorer_from_dict(e, where)
    extra = set(e) - DOTNET_SCORER_KEYS
    if (
        known is not None
        and known.keys is not None
        and extra
        and extra <= known.keys
        and set(e) <= _ENTRY_KEYS | known.keys
    ):
        # a .NET type with its EXTENSIONS.md options (kind's weights / use_default_weights, tag's
        # tag_weights, scaled's inner / inner_scorer) and none of .NET's: the dict form's entry
        return scorer_from_dict(e, where)
    require_keys(where, e, DOTNET_SCORER_KEYS)
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
    for i, q in enumerate(require_tables("quotas", quotas, "quota")):
        require_keys(f"quotas[{i}]", q, DOTNET_QUOTA_KEYS)
        if not q.get("kind"):
            raise InvalidConfigError(f"quotas[{i}] needs a 'kind'")
        lo, hi = q.get("minPercent"), q.get("maxPercent")
        if lo is None and hi is None:
            raise InvalidConfigError(f"quotas[{i}]: at least one of minPercent or maxPercent must be specified")
        qs.append(QuotaEntry(q["kind"], 0.0 if lo is None else lo, 100.0 if hi is None else hi))
    return QuotaSlice(tuple(qs), base)


def dotnet_policy_fields(d: Mapping[str, Any]) -> dict[str, Any]:
    """The ``Policy`` fields of a policy written by .NET ``CupelJsonSerializer`` (or by hand in that
    shape). Keys are upstream's JSON property names; any other key is an error."""
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
    return dict(
        scorer=scorer,
        slicer=_dotnet_slicer(d),
        placer="u_shaped" if placer == "uShaped" else "chronological",
        deduplication=d.get("deduplicationEnabled", True),
        overflow_strategy=_dotnet_enum("overflowStrategy", d.get("overflowStrategy", "throw"), _DOTNET_OVERFLOW),
        name=d.get("name"),
        description=d.get("description"),
        groups=d.get("groups"),  # a cupel_np extension (docs/tool-pairs.md)
    )


def policy_to_dotnet(policy: PolicyFields) -> dict[str, Any]:
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
        if hasattr(s, "dotnet_entry"):  # column (model/scorers.py) and registered scorers (model/plugins.py)
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
    if policy.groups is not None:
        out["groups"] = policy.groups
    return out
