"""A generated labelled corpus whose hidden relevance rule favours a signal no preset reads.

Each set (``session_id``) holds items of mixed kinds, token counts, timestamps, priorities and
relevance hints, none of which says anything about relevance. Every item carries a
``cupel:trust`` metadata value ``trust`` (uniform in [0, 1]) and the label

    relevant = trust + 0.1 * N(0, 1) > 0.75

so about a quarter of the items matter, and only a policy that weights ``metadata_trust``
(which no preset uses) can find them. Used by the policy-search tests, the benchmark and the
docs to show that ``tune`` finds what the presets miss.
"""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pyarrow as pa

__all__ = ["mix_corpus", "trust_corpus"]

_KINDS = np.array(["Message", "ToolOutput", "Document", "Memory"])


def trust_corpus(n_sets: int = 200, items_per_set: int = 40, seed: int = 0) -> pa.Table:
    """``n_sets`` sets of ``items_per_set`` items (the module docstring's hidden rule), as an
    Arrow table with the items columns plus ``session_id``, ``trust`` and ``relevant``."""
    rng = np.random.default_rng(seed)
    n = n_sets * items_per_set
    sets = np.repeat(np.arange(n_sets), items_per_set)
    trust = np.round(rng.random(n), 4)
    relevant = trust + 0.1 * rng.normal(size=n) > 0.75
    tokens = np.clip(np.round(np.exp(rng.normal(5.5, 0.8, n))), 10, 4000).astype(np.int64)
    base = int(datetime(2026, 11, 1, tzinfo=UTC).timestamp() * 1e6)
    ts = base + rng.integers(0, 7 * 24 * 3600, n) * 1_000_000
    trust_s = np.char.mod("%.4f", trust)
    metadata = pa.MapArray.from_arrays(
        pa.array(np.arange(0, n + 1, dtype=np.int32)),
        pa.array(np.full(n, "cupel:trust", dtype=object), pa.string()),
        pa.array(trust_s.astype(object), pa.string()),
    )
    return pa.table(
        {
            "session_id": pa.array(np.char.mod("s%05d", sets).astype(object), pa.string()),
            "content": pa.array([f"item {i}" for i in range(n)], pa.string()),
            "tokens": pa.array(tokens),
            "kind": pa.array(_KINDS[rng.integers(0, len(_KINDS), n)].astype(object), pa.string()),
            "timestamp": pa.array(ts, pa.timestamp("us", tz="UTC")),
            "priority": pa.array(rng.integers(0, 10, n)),
            "future_relevance_hint": pa.array(np.round(rng.random(n), 3)),
            "metadata": metadata,
            "trust": pa.array(trust),
            "relevant": pa.array(relevant),
        }
    )


def mix_corpus(n_sets: int = 80, items_per_set: int = 30, seed: int = 0) -> pa.Table:
    """Sets whose relevance follows a MIX of two columns and that carry no timestamps:

        relevant = 0.5 * similarity + 0.5 * position + 0.05 * N(0, 1) > 0.72

    with ``similarity`` and ``position`` independent and uniform in [0, 1], so neither column
    alone finds what their mix finds, and recency (no timestamps: one value for every item) can
    only fall back to the input order. Used by the search tests and docs on several signals."""
    rng = np.random.default_rng(seed)
    n = n_sets * items_per_set
    sets = np.repeat(np.arange(n_sets), items_per_set)
    sim = np.round(rng.random(n), 4)
    pos = np.round(rng.random(n), 4)
    relevant = 0.5 * sim + 0.5 * pos + 0.05 * rng.normal(size=n) > 0.72
    tokens = np.clip(np.round(np.exp(rng.normal(4.8, 0.5, n))), 10, 1000).astype(np.int64)
    return pa.table(
        {
            "session_id": pa.array(np.char.mod("m%05d", sets).astype(object), pa.string()),
            "content": pa.array([f"passage {i}" for i in range(n)], pa.string()),
            "tokens": pa.array(tokens),
            "kind": pa.array(np.full(n, "Document", dtype=object), pa.string()),
            "similarity": pa.array(sim),
            "position": pa.array(pos),
            "relevant": pa.array(relevant),
        }
    )
