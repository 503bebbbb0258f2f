"""The place kernel has one specialization for both placers: chronological placement hands it
the same empty ``u_at`` type u-shaped placement fills (int32), so a process that places long
sets both ways compiles ``_place_segments`` once more at most for ``None`` (short sets), not
once per placer (a cold start's seconds)."""

from datetime import UTC, datetime, timedelta

import numpy as np

import cupel_np as c
from cupel_np.engine import stages

_T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _u_at_types() -> set[str]:
    return {str(sig[-2]) for sig in stages._place_segments.signatures}


def test_both_placers_share_the_place_kernels_u_at_type():
    rng = np.random.default_rng(3)
    n = 400  # a set keeping well over ``stages.SMALL_PLACE`` items: the long-segment path
    items = [
        c.ContextItem(
            content=f"item {i}",
            tokens=int(rng.integers(1, 50)),
            timestamp=None if i % 5 == 0 else _T0 + timedelta(seconds=int(rng.integers(0, 10_000))),
            priority=int(rng.integers(0, 5)),
        )
        for i in range(n)
    ]
    total = sum(it.tokens for it in items)
    budget = c.ContextBudget(max_tokens=total, target_tokens=total // 2)
    table = c.ItemTable.from_items(items)
    for placer in ("chronological", "u_shaped"):
        pol = c.Policy(c.CompositeScorer(((c.RecencyScorer(), 1.0), (c.PriorityScorer(), 1.0))), placer=placer)
        run = c.sweep(table, budget, [("v", pol)], threads=1)
        assert run.included.sum() > stages.SMALL_PLACE
    arrays = {t for t in _u_at_types() if t != "none"}
    assert arrays and all("int32" in t for t in arrays), _u_at_types()
