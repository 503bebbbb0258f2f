"""The seven upstream presets (Wollax.Cupel ``CupelPresets``), written in the .NET
``Wollax.Cupel.Json`` shape exactly as upstream declares them.

The .NET shape itself is read and written by ``cupel_np.model.dotnet`` (``policy_from_dotnet``,
in ``cupel_np.model.policy`` because it builds a ``Policy``, and ``policy_to_dotnet``; both
re-exported here, where ``cupel_np`` exports them from).
"""

from __future__ import annotations

from cupel_np.errors import InvalidConfigError
from cupel_np.model.dotnet import policy_to_dotnet
from cupel_np.model.fields import suggestion
from cupel_np.model.policy import Policy, policy_from_dotnet

__all__ = ["PRESETS", "preset", "policy_from_dotnet", "policy_to_dotnet"]


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
        "Chat",
        "Conversational chat \u2014 favors recent messages with kind-based secondary scoring.",
        [("recency", 3), ("kind", 1)],
    ),
    "code_review": _preset(
        "CodeReview",
        "Code review \u2014 balances kind and priority with secondary recency.",
        [("kind", 2), ("priority", 2), ("recency", 1)],
    ),
    "rag": _preset(
        "Rag",
        "Retrieval-augmented generation \u2014 reflexive relevance with U-shaped placement.",
        [("reflexive", 3), ("kind", 1)],
        placer="uShaped",
    ),
    "document_qa": _preset(
        "DocumentQa",
        "Document QA \u2014 kind and reflexive scoring with knapsack selection and U-shaped placement.",
        [("kind", 2), ("reflexive", 2), ("priority", 1)],
        slicer="knapsack",
        placer="uShaped",
        bucket=100,
    ),
    "tool_use": _preset(
        "ToolUse",
        "Tool use \u2014 kind and recency with secondary priority.",
        [("kind", 2), ("recency", 2), ("priority", 1)],
    ),
    "long_running": _preset(
        "LongRunning",
        "Long-running conversations \u2014 recency-dominant with frequency and kind.",
        [("recency", 3), ("frequency", 1), ("kind", 1)],
    ),
    "debugging": _preset(
        "Debugging",
        "Debugging \u2014 priority-dominant with kind and recency.",
        [("priority", 3), ("kind", 2), ("recency", 1)],
    ),
}


def preset(name: str) -> Policy:
    """A preset by name (case-insensitive; '-' and '_' and PascalCase accepted)."""
    key = "".join(ch for ch in name.lower() if ch.isalnum())
    for k, p in PRESETS.items():
        if k.replace("_", "") == key:
            return p
    raise InvalidConfigError(f"unknown preset {name!r}{suggestion(name, PRESETS)}; presets: {', '.join(PRESETS)}")
