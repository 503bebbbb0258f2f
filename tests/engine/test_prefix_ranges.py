"""Quota and count quota slicers that leave greedy's fitting prefixes unordered
(``unordered=``, ``place_stage.Candidates.prefix_ranges``): a quota has one unordered range of ranks
per kind, a count quota one after its committed items. Against the exact ranks: the same
selection, every rank outside the ranges exact, each range holding exactly the candidates the
exact ranks put there, in index order. Then whole u-shaped sweeps at the default thresholds
(every kind's partition on greedy's big-set path, long runs of equal scores) against the same
sweeps with every rank exact, and the per-sweep memo of a quota's kind groups."""

import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from test_count_paths import _args as count_args  # noqa: E402
from test_count_paths import entry_lists  # noqa: E402
from test_fast_paths import SETTINGS, TIE_VALUES, fast_paths_everywhere  # noqa: E402
from test_quota_paths import KIND_RANK, _quota_arrays, quota_sets  # noqa: E402

import cupel_np as c  # noqa: E402
import cupel_np.engine.slicers as sk  # noqa: E402
from cupel_np.engine.reasons import R_COUNT_CAP_EXCEEDED  # noqa: E402
from cupel_np.engine.slicers.quota import kind_groups, quota_greedy_segments  # noqa: E402


def check_ranges(exact, got, ranges, offsets):
    """``got`` (ranks with unordered ranges ``ranges``) against ``exact`` (every rank exact)."""
    assert ((got >= 0) == (exact >= 0)).all()
    r_off, r_lo, r_hi = ranges
    assert r_off.shape[0] == len(offsets)
    for s, (lo, hi) in enumerate(zip(offsets[:-1], offsets[1:])):
        g, e = got[lo:hi], exact[lo:hi]
        inside = np.zeros(hi - lo, dtype=bool)
        prev = -1
        for a, b in zip(r_lo[r_off[s] : r_off[s + 1]], r_hi[r_off[s] : r_off[s + 1]]):
            assert prev <= a and b - a > 1  # ascending, disjoint, longer than 1
            prev = b
            held = np.flatnonzero((e >= a) & (e < b))
            assert np.array_equal(held, np.flatnonzero((g >= a) & (g < b)))  # the same candidates
            assert np.array_equal(g[held], np.arange(a, b))  # ranked in index order
            inside[held] = True
        assert np.array_equal(g[~inside], e[~inside])  # every other rank exact


def _quota_ranks(tok, score, kind, offsets, targets, quotas, **kw):
    rank = np.full(tok.shape[0], -1, dtype=np.int64)
    ranges = quota_greedy_segments(tok, score, kind, offsets, targets, (KIND_RANK, *_quota_arrays(quotas)), rank, **kw)
    return rank, ranges


def _arrays(sets, targets):
    tok = np.array([t for rows in sets for t, _, _ in rows], dtype=np.int64)
    score = np.array([x for rows in sets for _, x, _ in rows], dtype=np.float64)
    kind = np.array([k for rows in sets for _, _, k in rows], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum([len(rows) for rows in sets])]).astype(np.int64)
    return tok, score, kind, offsets, np.array(targets[: len(sets)], dtype=np.int64)


rows_sets = st.lists(
    st.lists(st.tuples(st.integers(0, 40), st.sampled_from(TIE_VALUES), st.integers(0, 3)), max_size=90),
    min_size=1,
    max_size=4,
)


@SETTINGS
@given(rows_sets, st.lists(st.integers(-5, 900), min_size=4, max_size=4), quota_sets, st.sampled_from([1, 2, 16]))
def test_quota_prefix_ranges(sets, targets, quotas, min_chunk):
    """Every kind partition on greedy's big-set path (``big=1``): one range per kind with a
    fitting prefix longer than 1; the kind groups handed in give the same answer."""
    tok, score, kind, offsets, targets = _arrays(sets, targets)
    exact, none = _quota_ranks(tok, score, kind, offsets, targets, quotas, big=1, min_chunk=min_chunk)
    assert none is None
    got, ranges = _quota_ranks(tok, score, kind, offsets, targets, quotas, big=1, min_chunk=min_chunk, unordered=True)
    check_ranges(exact, got, ranges, offsets)
    g = kind_groups(tok, kind, offsets, KIND_RANK)
    again, ranges2 = _quota_ranks(
        tok, score, kind, offsets, targets, quotas, big=1, min_chunk=min_chunk, unordered=True, groups=g
    )
    assert np.array_equal(again, got) and all(np.array_equal(x, y) for x, y in zip(ranges, ranges2))


@SETTINGS
@given(rows_sets, st.lists(st.integers(-5, 900), min_size=4, max_size=4), entry_lists, st.sampled_from([1, 3]))
def test_count_prefix_range(sets, targets, entries, min_chunk):
    """One range per set, after the committed items: what phase 3 keeps of the prefix."""
    tok, score, kind, offsets, targets = _arrays(sets, targets)
    args = count_args(entries, False)
    with fast_paths_everywhere(min_chunk):
        exact, *rest = args.run(tok, score, kind, offsets, targets, 1 << 30, unsorted=True)
        (got, *rest2), ranges = args.run_rows(tok, score, kind, offsets, targets, 1 << 30, unordered=True)
    for x, y in zip(rest, rest2, strict=True):
        assert np.array_equal(x, y)
    assert ranges is not None and np.diff(ranges[0]).max(initial=0) <= 1
    check_ranges(exact, got, ranges, offsets)


def _table(n, seed, **extra):
    """One set: 4 kinds of ~n/4 rows (each over greedy's BIG_GREEDY), few distinct scores and
    tokens (long runs of equal scores and densities inside every kind's prefix), zero-token
    and negative-score rows, some untimestamped and pinned."""
    rng = np.random.default_rng(seed)
    ts = (1_700_000_000 + rng.integers(0, 50, n)) * 1_000_000
    return c.ItemTable.from_arrow(
        pa.table(
            {
                "content": pa.array([f"i{i}" for i in range(n)]),
                "tokens": rng.choice(np.array([0, 1, 2, 3, 5, 8]), n),
                "kind": pa.array(np.array(["Message", "Document", "Note", "Memory"])[rng.integers(0, 4, n)]),
                "timestamp": pa.array(
                    ts.astype("datetime64[us]"), pa.timestamp("us", tz="UTC"), mask=rng.random(n) < 0.3
                ),
                "signal": rng.choice(np.array([-1.0, -0.0, 0.0, 0.5, 1.0, 2.0]), n),
                "pinned": pa.array(rng.random(n) < 0.001),
                **extra,
            }
        )
    )


@pytest.mark.parametrize("overflow", ["throw", "truncate"])
def test_u_shaped_sweeps_equal_the_exact_ranks(monkeypatch, overflow):
    """Whole sweeps at the default thresholds, quota and count quota, u-shaped: the same
    matrices as with every rank exact (``run_rows`` forced to order every prefix)."""
    t = _table(4 * 36_000, 3)
    total = int(t.tokens.sum())
    slicers = [
        c.QuotaSlice(
            (c.QuotaEntry("Message", require=10, cap=60), c.QuotaEntry("Note", require=5, cap=40)), c.GreedySlice()
        ),
        c.CountQuotaSlice(
            (
                c.CountQuotaEntry("Message", require_count=10, cap_count=9000),
                c.CountQuotaEntry("Note", require_count=5),
            ),
            c.GreedySlice(),
        ),
    ]
    scorers = [c.ColumnScorer("signal"), c.CompositeScorer(((c.ColumnScorer("signal"), 1.0), (c.KindScorer(), 0.5)))]
    variants = [
        (f"v{i}{j}", c.Policy(sc, slicer=sl, placer="u_shaped", overflow_strategy=overflow))
        for i, sl in enumerate(slicers)
        for j, sc in enumerate(scorers)
    ]

    def run(frac):
        r = c.sweep(t, c.ContextBudget(int(total * frac * 1.01) + 10, int(total * frac)), variants, threads=1)
        return [np.asarray(x).copy() for x in (r.included, r.positions, r.reasons)]

    exact_rows = sk.SlicerArgs.run_rows
    seen = []

    def spy(self, *a, **kw):
        out = exact_rows(self, *a, **kw)
        seen.append(0 if out[1] is None else len(out[1][1]))
        return out

    monkeypatch.setattr(sk.SlicerArgs, "run_rows", spy)
    fracs = (0.05, 0.5, 0.95)
    got = [run(f) for f in fracs]
    assert min(seen) >= 1 and max(seen) >= 4  # every sweep left prefixes unordered (a quota: per kind)

    def ordered(self, *a, **kw):
        kw["unordered"] = False
        return exact_rows(self, *a, **kw)

    monkeypatch.setattr(sk.SlicerArgs, "run_rows", ordered)
    for g, f in zip(got, fracs):
        for x, y in zip(g, run(f), strict=True):
            assert np.array_equal(x, y)


def test_a_sweep_builds_the_quota_kind_groups_once_and_not_for_its_units(monkeypatch):
    """Every quota variant of a sweep over the same candidates reads one ``kind_groups`` (kept
    in ``SweepShared.memo``), with the same matrices as building it per variant; a grouped
    variant's units are other candidates and never read the rows' groups."""
    t = _table(6_000, 3, unit=np.arange(6_000) // 2)
    total = int(t.tokens.sum())
    quota = c.QuotaSlice(
        (c.QuotaEntry("Message", require=10, cap=60), c.QuotaEntry("Note", require=5, cap=40)), c.GreedySlice()
    )
    scorers = [c.ColumnScorer("signal"), c.CompositeScorer(((c.ColumnScorer("signal"), 1.0), (c.KindScorer(), 0.5)))]
    variants = [(f"v{j}", c.Policy(sc, slicer=quota)) for j, sc in enumerate(scorers)]
    variants.append(("units", c.Policy(scorers[0], slicer=quota, groups="unit")))
    budget = c.ContextBudget(total // 2 + 10, total // 2)
    built = []
    exact_groups = sk.kind_groups

    def counted(*a, **kw):
        built.append(a[0].shape[0])
        return exact_groups(*a, **kw)

    monkeypatch.setattr(sk, "kind_groups", counted)
    got = c.sweep(t, budget, variants, threads=1)
    free = ~t.pinned  # pinned rows are no candidates
    units = np.unique((np.arange(t.n) // 2)[free]).shape[0]
    # the rows' groups once for both ungrouped variants; the grouped one its units' own
    assert built == [int(free.sum()), units]

    monkeypatch.setattr(sk.SlicerArgs, "shared_kind_groups", lambda self, *a, **kw: None)
    want = c.sweep(t, budget, variants, threads=1)
    for x, y in ((got.included, want.included), (got.positions, want.positions), (got.reasons, want.reasons)):
        assert np.array_equal(np.asarray(x), np.asarray(y))


def test_a_sweep_builds_the_count_kind_positions_once_and_not_for_its_units(monkeypatch):
    """Every count quota variant of a sweep over the same candidates reads one
    ``count_big.kind_positions`` (kept in ``SweepShared.memo``; greedy's big path forced, which
    reads it), with the same matrices as building it per variant; a grouped variant's units
    build their own."""
    t = _table(6_000, 4, unit=np.arange(6_000) // 2)
    total = int(t.tokens.sum())
    count_quota = c.CountQuotaSlice(
        (c.CountQuotaEntry("Message", require_count=10, cap_count=300), c.CountQuotaEntry("Note", require_count=5)),
        c.GreedySlice(),
    )
    scorers = [c.ColumnScorer("signal"), c.CompositeScorer(((c.ColumnScorer("signal"), 1.0), (c.KindScorer(), 0.5)))]
    variants = [(f"v{j}", c.Policy(sc, slicer=count_quota)) for j, sc in enumerate(scorers)]
    variants.append(("units", c.Policy(scorers[0], slicer=count_quota, groups="unit")))
    budget = c.ContextBudget(total // 2 + 10, total // 2)
    built = []
    exact_positions = sk.kind_positions

    def counted(*a, **kw):
        built.append(a[0].shape[0])
        return exact_positions(*a, **kw)

    monkeypatch.setattr(sk, "kind_positions", counted)
    with fast_paths_everywhere():
        got = c.sweep(t, budget, variants, threads=1)
    free = ~t.pinned  # pinned rows are no candidates
    units = np.unique((np.arange(t.n) // 2)[free]).shape[0]
    assert built == [int(free.sum()), units]
    assert (np.asarray(got.reasons) == R_COUNT_CAP_EXCEEDED).any()  # the cap binds

    monkeypatch.setattr(sk.SlicerArgs, "shared_kind_positions", lambda self, *a, **kw: None)
    with fast_paths_everywhere():
        want = c.sweep(t, budget, variants, threads=1)
    for x, y in ((got.included, want.included), (got.positions, want.positions), (got.reasons, want.reasons)):
        assert np.array_equal(np.asarray(x), np.asarray(y))
