"""The small driver's ReflexiveScorer column (``engine.small._score``: the clip ufunc and
``np.where``) equals ``scorers._evaluate``'s (``np.clip`` and a masked write) bit for bit, for
hints at and beyond the clip bounds, signed zeros, infinities, NaN and None."""

from __future__ import annotations

import numpy as np

import cupel_np as c
from cupel_np.engine.scorers import ScoreContext, _evaluate
from cupel_np.engine.small import PolicyPlan, _score, classify_one
from cupel_np.model.item_rows import ItemRows

HINTS = [None, 0.0, -0.0, 1.0, 0.5, 1e-300, -1e-300, 1.0000001, -0.25, 7.0, float("inf"), float("-inf"), float("nan")]


def test_small_reflexive_column_equals_evaluate():
    items = [c.ContextItem(f"item {i}", 10 + i, future_relevance_hint=h) for i, h in enumerate(HINTS * 3)]
    scorer = c.ReflexiveScorer()
    plan = PolicyPlan.of(c.Policy(scorer, slicer=c.GreedySlice(), placer="u_shaped"))
    for table in (ItemRows.from_items(items), c.ItemTable.from_items(items)):
        cls = classify_one(table)
        ctx = ScoreContext(table, cls.sc_rows, cls.sc_offsets)
        before = table.hint.copy()
        got = _score(scorer, table, ctx, plan, True)
        want = _evaluate(scorer, ctx)
        assert got.dtype == np.float64 and got.tobytes() == want.tobytes()
        assert table.hint.tobytes() == before.tobytes()  # the table's column is left as it was
    assert sorted(set(got.tolist())) == [0.0, 1e-300, 0.5, 1.0]
