"""Policies in the .NET ``Wollax.Cupel.Json`` shape, and the seven upstream presets.

The .NET shape (camelCase; enum values as camelCase strings)::

    {"scorers": [{"type": "recency", "weight": 2},
                 {"type": "kind", "weight": 1.5, "kindWeights": {"Message": 0.8}},
                 {"type": "tag", "weight": 1, "tagWeights": {"important": 2}},
                 {"type": "scaled", "weight": 1, "innerScorer": {"type": "priority", "weight": 1}}],
     "slicerType": "knapsack", "placerType": "uShaped", "deduplicationEnabled": false,
     "overflowStrategy": "truncate", "knapsackBucketSize": 50,
     "quotas": [{"kind": "Message", "minPercent": 10, "maxPercent": 60}],
     "name": "...", "description": "..."}

Representable scorers are recency, priority, kind, tag, frequency, reflexive and scaled;
unknown properties are ignored (as the .NET reader does).
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from .errors import InvalidConfigError, InvalidInputTypeError
from .policy import (
    CompositeScorer,
    FrequencyScorer,
    GreedySlice,
    KindScorer,
    KnapsackSlice,
    Policy,
    PriorityScorer,
    QuotaEntry,
    QuotaSlice,
    RecencyScorer,
    ReflexiveScorer,
    ScaledScorer,
    Scorer,
    TagScorer,
)

_SCORER_TYPES = {
    "recency": RecencyScorer,
    "priority": PriorityScorer,
    "kind": KindScorer,
    "tag": TagScorer,
    "frequency": FrequencyScorer,
    "reflexive": ReflexiveScorer,
    "scaled": ScaledScorer,
}
_SCORER_ORDER = list(_SCORER_TYPES)
_SLICERS = ["greedy", "knapsack", "stream"]
_PLACERS = ["chronological", "uShaped"]
_OVERFLOW = ["throw", "truncate", "proceed"]


def _enum(where: str, v, names: list[str]) -> str:
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


def _weight(where: str, e: Mapping) -> float:
    w = e.get("weight", 0)
    if isinstance(w, bool) or not isinstance(w, (int, float)):
        raise InvalidInputTypeError(f"{where}.weight must be a number, got {w!r}")
    w = float(w)
    if not math.isfinite(w) or w <= 0:
        raise InvalidConfigError(f"{where}.weight must be positive and finite, got {w!r}")
    return w


def _scorer(where: str, e: Any) -> Scorer:
    if not isinstance(e, Mapping):
        raise InvalidInputTypeError(f"{where} must be an object, got {type(e).__name__}")
    t = _enum(f"{where}.type", e.get("type", 0), _SCORER_ORDER)
    inner = e.get("innerScorer")
    if t == "scaled":
        if inner is None:
            raise InvalidConfigError(f"{where}: innerScorer must be specified when type is scaled")
        _weight(f"{where}.innerScorer", inner)
        return ScaledScorer(_scorer(f"{where}.innerScorer", inner))
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
    return _SCORER_TYPES[t]()


def policy_from_dotnet(d: Mapping[str, Any]) -> Policy:
    """Read a policy written by .NET ``CupelJsonSerializer`` (or by hand in that shape)."""
    if not isinstance(d, Mapping):
        raise InvalidInputTypeError(f".NET policy must be a JSON object, got {type(d).__name__}")
    scorers = d.get("scorers")
    if scorers is None:
        raise InvalidConfigError("scorers: value cannot be null")
    if not isinstance(scorers, list) or not scorers:
        raise InvalidConfigError("scorers must contain at least one entry")
    entries = tuple((_scorer(f"scorers[{i}]", e), _weight(f"scorers[{i}]", e)) for i, e in enumerate(scorers))
    # .NET always builds a weighted composite over the policy's scorers
    scorer = entries[0][0] if len(entries) == 1 else CompositeScorer(entries)
    slicer_type = _enum("slicerType", d.get("slicerType", "greedy"), _SLICERS)
    bucket = d.get("knapsackBucketSize")
    if bucket is not None and slicer_type != "knapsack":
        raise InvalidConfigError("knapsackBucketSize can only be specified when slicerType is knapsack")
    if slicer_type == "stream":
        raise InvalidConfigError(
            "slicerType 'stream' is asynchronous and not supported by cupel_np; use greedy"
        )
    base = KnapsackSlice(100 if bucket is None else bucket) if slicer_type == "knapsack" else GreedySlice()
    quotas = d.get("quotas") or []
    slicer = base
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
        placer="u_shaped" if _enum("placerType", d.get("placerType", "chronological"), _PLACERS) == "uShaped" else "chronological",
        deduplication=d.get("deduplicationEnabled", True),
        overflow_strategy=_enum("overflowStrategy", d.get("overflowStrategy", "throw"), _OVERFLOW),
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


def _preset(name, desc, scorers, slicer="greedy", placer="chronological", bucket=None):
    d = {
        "scorers": [{"type": t, "weight": w} for t, w in scorers],
        "slicerType": slicer,
        "placerType": placer,
        "deduplicationEnabled": True,
        "overflowStrategy": "throw",
        "name": name,
        "description": desc,
    }
    if bucket is not None:
        d["knapsackBucketSize"] = bucket
    return policy_from_dotnet(d)


#: The upstream presets (Wollax.Cupel ``CupelPresets``), keyed by snake_case name.
PRESETS: dict[str, Policy] = {
    "chat": _preset(
        "Chat", "Conversational chat \u2014 favors recent messages with kind-based secondary scoring.",
        [("recency", 3), ("kind", 1)]),
    "code_review": _preset(
        "CodeReview", "Code review \u2014 balances kind and priority with secondary recency.",
        [("kind", 2), ("priority", 2), ("recency", 1)]),
    "rag": _preset(
        "Rag", "Retrieval-augmented generation \u2014 reflexive relevance with U-shaped placement.",
        [("reflexive", 3), ("kind", 1)], placer="uShaped"),
    "document_qa": _preset(
        "DocumentQa",
        "Document QA \u2014 kind and reflexive scoring with knapsack selection and U-shaped placement.",
        [("kind", 2), ("reflexive", 2), ("priority", 1)], slicer="knapsack", placer="uShaped", bucket=100),
    "tool_use": _preset(
        "ToolUse", "Tool use \u2014 kind and recency with secondary priority.",
        [("kind", 2), ("recency", 2), ("priority", 1)]),
    "long_running": _preset(
        "LongRunning", "Long-running conversations \u2014 recency-dominant with frequency and kind.",
        [("recency", 3), ("frequency", 1), ("kind", 1)]),
    "debugging": _preset(
        "Debugging", "Debugging \u2014 priority-dominant with kind and recency.",
        [("priority", 3), ("kind", 2), ("recency", 1)]),
}


def preset(name: str) -> Policy:
    """A preset by name (case-insensitive; '-' and '_' and PascalCase accepted)."""
    key = "".join(ch for ch in name.lower() if ch.isalnum())
    for k, p in PRESETS.items():
        if k.replace("_", "") == key:
            return p
    raise InvalidConfigError(f"unknown preset {name!r}; presets: {', '.join(PRESETS)}")
