"""``ScoreContext.every`` / ``at``: a sweep whose scoreable rows are every row in order reads the
table's columns as they are instead of gathering them (``scorers._evaluate``). The scores are
the gathered ones bit for bit, the table's columns are left as they were, and rows that are not
``0 .. n - 1`` in order (a subset, a permutation, a repeated row) still gather."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

import cupel_np as c
from cupel_np.engine.scorers import ScoreContext, _evaluate

HINTS = [None, 0.0, -0.0, 1.0, 0.5, 1.0000001, -0.25, 7.0, float("inf"), float("-inf"), float("nan")]
T0 = datetime(2026, 1, 1, tzinfo=UTC)
SCORERS = [
    c.RecencyScorer(),
    c.PriorityScorer(),
    c.ReflexiveScorer(),
    c.KindScorer(),
    c.DecayScorer(T0 + timedelta(hours=5), c.ExponentialCurve(3600.0)),
]


def _items(n: int, pinned: tuple[int, ...] = ()) -> list[c.ContextItem]:
    rng = np.random.default_rng(n)
    return [
        c.ContextItem(
            f"item {i}",
            int(rng.integers(1, 50)),
            kind=["Message", "Document", "ToolOutput"][i % 3],
            priority=None if i % 4 == 0 else int(rng.integers(0, 5)),
            timestamp=None if i % 5 == 0 else T0 + timedelta(minutes=int(rng.integers(0, 300))),
            future_relevance_hint=HINTS[i % len(HINTS)],
            pinned=i in pinned,
        )
        for i in range(n)
    ]


def _context(table, rows, every=None) -> ScoreContext:
    ctx = ScoreContext(table, rows, np.array([0, rows.shape[0]], dtype=np.int64))
    if every is not None:
        ctx._every = every
    return ctx


@pytest.mark.parametrize("n", [0, 1, 7, 40])
def test_every_row_reads_the_columns_and_scores_alike(n):
    table = c.ItemTable.from_items(_items(n))
    rows = np.arange(n, dtype=np.int64)
    before = {k: getattr(table, k).copy() for k in ("hint", "timestamp", "priority", "kind_id")}
    for scorer in SCORERS:
        ctx = _context(table, rows)
        got = _evaluate(scorer, ctx)
        assert ctx.every
        want = _evaluate(scorer, _context(table, rows, every=False))  # every column gathered
        assert got.dtype == np.float64 and got.tobytes() == want.tobytes(), scorer
    for k, v in before.items():  # the reflexive clip wrote into a copy
        assert getattr(table, k).tobytes() == v.tobytes(), k


def test_rows_that_are_not_every_row_in_order_gather():
    table = c.ItemTable.from_items(_items(12))
    hint = table.hint
    for rows in (np.arange(1, 12), np.arange(11, -1, -1), np.array([0, 0, *range(2, 12)]), np.arange(11)):
        ctx = _context(table, rows.astype(np.int64))
        assert not ctx.every
        assert ctx.at(hint).tobytes() == hint[rows].tobytes()
    ctx = _context(table, np.arange(12, dtype=np.int64))
    assert ctx.every and ctx.at(hint) is hint


@pytest.mark.parametrize("pinned", [(), (3, 17)])
def test_sweeps_are_the_same_with_and_without_reading_the_columns(monkeypatch, pinned):
    """A whole sweep (two sets, four variants): included rows, placed positions and scores
    equal with the shortcut and with every column gathered (pinned rows: no shortcut)."""
    items = _items(40, pinned)
    table = c.ItemTable.from_arrow(
        c.ItemTable.from_items(items).table.append_column("sid", [[i // 20 for i in range(40)]]), set_column="sid"
    )
    budget = c.ContextBudget(max_tokens=500, target_tokens=300)
    variants = [
        (f"v{i}", c.Policy(c.CompositeScorer(tuple(zip(SCORERS, w))), slicer=c.GreedySlice(), placer=p))
        for i, (w, p) in enumerate(
            [((1, 2, 1, 1, 1), "chronological"), ((3, 1, 2, 1, 2), "u_shaped"), ((1, 1, 1, 3, 1), "chronological")]
        )
    ]
    runs = {}
    for every in (None, False):
        if every is False:
            monkeypatch.setattr(ScoreContext, "every", property(lambda self: False))
        run = c.sweep(table, budget, variants, threads=1).run
        runs[every] = (run.included.copy(), run.position.copy(), np.stack([run.scores_for(v) for v in range(3)]))
    for a, b in zip(runs[None], runs[False]):
        assert a.tobytes() == b.tobytes()
    assert runs[None][0].any() and not runs[None][0].all()  # a budget that keeps some and not all


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("n", [0, 1, 7, 40])
def test_score_into_writes_the_scores_of_score(n, order):
    """``ScoreContext.score_into`` (a sweep's base columns): every scorer's column bit for bit
    ``score``'s, into a strided column (a small sweep's row-major matrix) or a contiguous one;
    a ReflexiveScorer or KindScorer written directly is not kept, one already kept is copied;
    the table's columns unchanged. The reflexive scores are the spec's: the hint clipped to
    [0, 1], 0 where it is null, infinite or NaN."""
    items = _items(n)
    table = c.ItemTable.from_items(items)
    rows = np.arange(n, dtype=np.int64)
    before = {k: getattr(table, k).copy() for k in ("hint", "kind_id")}
    for every in (None, False):
        base = np.full((n, len(SCORERS) + 1), 7.0, order=order)
        ctx = _context(table, rows, every)
        for j, scorer in enumerate(SCORERS):
            ctx.score_into(scorer, base[:, j])
        direct = {type(s) for s in SCORERS if s in ctx._cache}
        assert c.ReflexiveScorer not in direct and c.KindScorer not in direct
        want_ctx = _context(table, rows, every)
        for j, scorer in enumerate(SCORERS):
            assert base[:, j].tobytes() == want_ctx.score(scorer).tobytes(), scorer
        assert (base[:, -1] == 7.0).all()  # nothing written beside the columns asked for
        ctx.score(c.ReflexiveScorer())  # kept now: copied from the kept column
        base[:, 0] = 7.0
        ctx.score_into(c.ReflexiveScorer(), base[:, 0])
        assert base[:, 0].tobytes() == want_ctx.score(c.ReflexiveScorer()).tobytes()
    hints = [it.future_relevance_hint for it in items]
    oracle = [0.0 if h is None or not np.isfinite(h) else min(max(h, 0.0), 1.0) for h in hints]
    assert base[:, 0].tolist() == oracle
    for k, col in before.items():
        assert getattr(table, k).tobytes() == col.tobytes(), k
