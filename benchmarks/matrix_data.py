"""Synthetic inputs for the benchmark matrix (issue 8): tokens log-uniform on 1-2000 with 1%
zero, 70% of items timestamped, 50% with a priority, 0-3 tags from a vocabulary, hints for
80%, six kinds."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import cupel_np as c

BASE = (c.RecencyScorer(), c.PriorityScorer(), c.KindScorer(), c.ReflexiveScorer())
KINDS = np.array(["Message", "Document", "ToolOutput", "Memory", "SystemPrompt", "Note"])


def matrix_arrow(n: int, *, n_sets: int = 1, seed: int = 11, n_tags: int = 500) -> pa.Table:
    rng = np.random.default_rng(seed)
    tokens = np.floor(np.exp(rng.uniform(0.0, np.log(2001.0), n))).astype(np.int64)
    tokens = np.clip(tokens, 1, 2000)
    tokens[rng.random(n) < 0.01] = 0
    k = rng.integers(0, 4, n)
    vocab = np.array([f"tag{i}" for i in range(n_tags)])
    flat = rng.integers(0, n_tags, int(k.sum()))
    offsets = np.concatenate([[0], np.cumsum(k)]).astype(np.int32)
    tags = pa.ListArray.from_arrays(pa.array(offsets), pa.array(vocab).take(pa.array(flat)))
    ts = (1_700_000_000_000_000 + rng.integers(0, 10**12, n)).astype("datetime64[us]")
    cols = {
        "content": pc.binary_join_element_wise("item ", pa.array(np.arange(n)).cast(pa.string()), ""),
        "tokens": tokens,
        "kind": pa.array(KINDS).take(pa.array(rng.integers(0, len(KINDS), n))),
        "priority": pa.array(rng.integers(0, 100, n), mask=rng.random(n) < 0.5),
        "tags": tags,
        "timestamp": pa.array(ts, pa.timestamp("us", tz="UTC"), mask=rng.random(n) >= 0.7),
        "future_relevance_hint": pa.array(rng.random(n), mask=rng.random(n) >= 0.8),
    }
    if n_sets > 1:
        cols["sid"] = np.repeat(np.arange(n_sets), -(-n // n_sets))[:n]
    return pa.table(cols)


def matrix_table(n: int, *, n_sets: int = 1, seed: int = 11) -> c.ItemTable:
    t = matrix_arrow(n, n_sets=n_sets, seed=seed)
    return c.ItemTable.from_arrow(t, set_column="sid" if n_sets > 1 else None)


def total_tokens(table: c.ItemTable) -> int:
    return int(table.tokens.sum())


def variants(v: int, *, slicer=None, placer: str = "chronological", seed: int = 1):
    """``v`` composite-weight variants of recency/priority/kind/reflexive."""
    rng = np.random.default_rng(seed)
    slicer = slicer or c.GreedySlice()
    return [
        (f"v{i}", c.Policy(c.CompositeScorer(tuple(zip(BASE, rng.uniform(0.1, 1.0, 4)))), slicer=slicer, placer=placer))
        for i in range(v)
    ]


def quota_slicer():
    return c.QuotaSlice(
        (c.QuotaEntry("Message", require=10, cap=60), c.QuotaEntry("Document", require=5, cap=40)), c.GreedySlice()
    )


def count_quota_slicer(n: int):
    """Count quota (inner greedy): at least 10 Messages and 5 Documents, at most 5% of the
    items Messages (the cap binds at every budget above a few percent)."""
    return c.CountQuotaSlice(
        (
            c.CountQuotaEntry("Message", require_count=10, cap_count=max(10, n // 20)),
            c.CountQuotaEntry("Document", require_count=5),
        ),
        c.GreedySlice(),
    )
