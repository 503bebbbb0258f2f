"""``sortkeys.sort_keys``: NumPy's sort, or the package's radix sort where NumPy's AVX-512 sort
is slow (AMD Zen 4). The radix sort must give NumPy's order for every packed key array the
engine sorts, and a whole sweep must not change with the choice: these tests force it
(``radix_everywhere``: every sort, however short) and compare with NumPy's."""

import sys

import numpy as np
import pyarrow as pa
import pytest

import cupel_np as c
from cupel_np import _cores
from cupel_np.engine import sortkeys
from cupel_np.engine.sortkeys import radix_sort


def _packed(rng, n, low, high_bits):
    """``n`` keys: ``high_bits`` random bits above the position in the low ``low`` bits."""
    high = rng.integers(0, 1 << high_bits, n, dtype=np.uint64) if high_bits else np.zeros(n, np.uint64)
    return (high << np.uint64(low)) | np.arange(n, dtype=np.uint64)


@pytest.mark.parametrize("n", [0, 1, 2, 3, 17, 1000, 5000, sortkeys._WIDE_MIN - 1, sortkeys._WIDE_MIN, 70_000])
@pytest.mark.parametrize("high_bits", [0, 1, 5, 16, 17, 33, 44])
def test_radix_sort_is_numpys_order_for_packed_keys(n, high_bits):
    rng = np.random.default_rng(n * 100 + high_bits)
    low = max(1, int(n).bit_length())
    keys = _packed(rng, n, low, min(high_bits, 64 - low))
    want = np.sort(keys)
    radix_sort(keys, np.empty_like(keys), low)
    assert np.array_equal(keys, want)


def test_radix_sort_of_clustered_and_extreme_keys():
    """Keys like the engine's: a few distinct high parts (score keys sharing their exponent),
    the top bit set on some (NaN's key), every bit set on one."""
    rng = np.random.default_rng(7)
    n, low = 50_000, 16
    high = rng.choice(np.array([0x3FF0_0000_0000, 0x3FE8_0000_0001, 0xFFFF_FFFF_FFFF, 0x8000_0000_0000], np.uint64), n)
    keys = (high << np.uint64(low)) | np.arange(n, dtype=np.uint64)
    keys[-1] = ~np.uint64(0)  # position n - 1 in the low bits is below 2**16 - 1: its high part holds the rest
    want = np.sort(keys)
    radix_sort(keys, np.empty_like(keys), low)
    assert np.array_equal(keys, want)


def test_radix_sort_of_plain_values():
    """``low = 0``: any uint64 values, duplicates included (an LSD sort of every varying bit),
    in narrow digits and in wide ones."""
    rng = np.random.default_rng(3)
    for n in (5000, 40_000):
        for keys in (rng.integers(0, 2**64 - 1, n, dtype=np.uint64), rng.integers(0, 5, n).astype(np.uint64)):
            want = np.sort(keys)
            radix_sort(keys, np.empty_like(keys), 0)
            assert np.array_equal(keys, want)


@pytest.fixture
def radix_everywhere(monkeypatch):
    """Every ``sort_keys`` call goes to the radix sort (counted per caller)."""
    calls: dict[str, int] = {}
    real = sortkeys.radix_sort

    class Counting:
        def __call__(self, keys, tmp, low):
            caller = sys._getframe(2).f_code.co_name
            calls[caller] = calls.get(caller, 0) + 1
            return real(keys, tmp, low)

    monkeypatch.setattr(_cores, "_SORT_CHOICE", [True])
    monkeypatch.setattr(sortkeys, "RADIX_SORT_MIN", 2)
    monkeypatch.setattr(sortkeys, "RADIX_ARGSORT_MIN", 2)
    monkeypatch.setattr(sortkeys, "radix_sort", Counting())
    return calls


def _table(n: int, seed: int) -> c.ItemTable:
    """One set over greedy's big path: 4 kinds, timestamps (recency ranks), priorities
    (priority ranks) with gaps, few distinct tokens and scores (long runs of equal keys)."""
    rng = np.random.default_rng(seed)
    ts = (1_700_000_000 + rng.integers(0, 10**7, n)) * 1_000_000
    return c.ItemTable.from_arrow(
        pa.table(
            {
                "content": pa.array([f"i{i}" for i in range(n)]),
                "tokens": rng.choice(np.array([0, 1, 2, 3, 5, 8, 40]), n),
                "kind": pa.array(np.array(["Message", "Document", "Note", "Memory"])[rng.integers(0, 4, n)]),
                "timestamp": pa.array(
                    ts.astype("datetime64[us]"), pa.timestamp("us", tz="UTC"), mask=rng.random(n) < 0.3
                ),
                "priority": pa.array(rng.integers(-50, 10**6, n), mask=rng.random(n) < 0.5),
                "pinned": pa.array(rng.random(n) < 0.0005),
            }
        )
    )


def _variants(slicer, placer):
    weights = [(0.4, 0.3, 0.2, 0.1), (0.1, 0.1, 0.7, 0.1), (0.25, 0.25, 0.25, 0.25)]
    out = []
    for i, w in enumerate(weights):
        scorer = c.CompositeScorer(
            (
                (c.RecencyScorer(), w[0]),
                (c.PriorityScorer(), w[1]),
                (c.KindScorer(), w[2]),
                (c.ReflexiveScorer(), w[3]),
            )
        )
        out.append((f"v{i}", c.Policy(scorer, slicer=slicer, placer=placer)))
    return out


SLICERS = {
    "greedy": c.GreedySlice(),
    "quota": c.QuotaSlice(
        (c.QuotaEntry("Message", require=10, cap=60), c.QuotaEntry("Document", require=5, cap=40)), c.GreedySlice()
    ),
    "count_quota": c.CountQuotaSlice(
        (
            c.CountQuotaEntry("Message", require_count=10, cap_count=4000),
            c.CountQuotaEntry("Document", require_count=5),
        ),
        c.GreedySlice(),
    ),
}


def _outputs(t, budget, variants):
    run = c.sweep(t, budget, variants, threads=1).run
    return [
        (v, run.included[v].copy(), run.reason[v].copy(), run.placed_pos[v].copy(), run.scores_at(v, np.arange(t.n)))
        for v in range(len(variants))
    ]


@pytest.mark.parametrize("slicer", list(SLICERS))
def test_sweeps_equal_numpys_sort(radix_everywhere, slicer):
    """Whole sweeps (both placers, four budgets, three variants) with every packed sort done
    by the radix sort equal the ones with NumPy's sort; the sorts the sweep reached are those
    of the timestamp order, the rank scorers, greedy's packed walk and prefix and u-shaped
    placement (and for a count quota its own prefix)."""
    t = _table(40_000, 5)
    total = int(t.tokens.sum())
    for placer in ("chronological", "u_shaped"):
        vs = _variants(SLICERS[slicer], placer)
        for frac in (0.001, 0.1, 0.5, 0.95):
            budget = c.ContextBudget(total, max(1, int(total * frac)))
            got = _outputs(t, budget, vs)
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(_cores, "_SORT_CHOICE", [False])
                want = _outputs(t, budget, vs)
            for g, w in zip(got, want, strict=True):
                for a, b in zip(g[1:], w[1:], strict=True):
                    assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), (slicer, placer, frac, g[0])
    reached = set(radix_everywhere)
    assert {"sorted_by_timestamp", "rank_scores", "_sliced_score_order"} <= reached, reached
    assert reached & {"_walk_chunks", "_greedy_big", "_count_big"}, reached


@pytest.mark.parametrize(
    "n",
    [
        500,
        sortkeys.RADIX_SORT_MIN - 1,
        sortkeys.RADIX_SORT_MIN,
        5000,
        sortkeys._WIDE_MIN - 1,
        sortkeys._WIDE_MIN,
        20_000,
    ],
)
def test_sort_keys_sends_each_size_to_its_sort(monkeypatch, n):
    """Where NumPy's quicksort is slow: short arrays stay with it, long ones take the radix
    kernel (narrow digits below ``_WIDE_MIN`` keys, 16-bit ones from there); each gives
    NumPy's order."""
    rng = np.random.default_rng(n)
    low = int(n - 1).bit_length()
    keys = _packed(rng, n, low, 40)
    want = np.sort(keys)
    kernel_calls = []
    real = sortkeys.radix_sort
    monkeypatch.setattr(sortkeys, "radix_sort", lambda k, t, lo: kernel_calls.append(k.shape[0]) or real(k, t, lo))
    monkeypatch.setattr(_cores, "_SORT_CHOICE", [True])
    sortkeys.sort_keys(keys, low)
    assert np.array_equal(keys, want)
    assert kernel_calls == ([n] if n >= sortkeys.RADIX_SORT_MIN else [])


def test_argsorts_of_big_segments_equal_numpys(monkeypatch):
    """The stable argsorts that take ``radix_argsort`` where NumPy's quicksort is slow
    (``stages.sort_segments`` over a segment of ``BIG_SEGMENT`` rows or more, greedy's
    ``order_positions``) give the order of NumPy's quicksort plus the tie repair: scores with
    long runs of ties, NaN, -0.0 and infinities, two segments."""
    from cupel_np.engine import stages
    from cupel_np.engine.slicers import greedy

    rng = np.random.default_rng(11)
    n = stages.BIG_SEGMENT + 5_000
    score = rng.choice(np.array([0.0, -0.0, 0.5, 1.0, np.nan, np.inf, -np.inf, 0.25]), n)
    score = np.where(rng.random(n) < 0.3, rng.random(n), score)
    offsets = np.array([0, stages.BIG_SEGMENT + 100, n])
    tok = rng.choice(np.array([0, 1, 2, 5]), n).astype(np.int64)
    pos = np.flatnonzero(rng.random(n) < 0.9)

    def both():
        return stages.sort_segments(score, offsets), greedy.order_positions(tok, score, pos)

    monkeypatch.setattr(_cores, "_SORT_CHOICE", [False])
    want = both()
    calls = []
    real = stages.radix_argsort

    def counted(key):
        calls.append(key.shape[0])
        return real(key)

    monkeypatch.setattr(stages, "radix_argsort", counted)
    monkeypatch.setattr(greedy, "radix_argsort", counted)
    monkeypatch.setattr(_cores, "_SORT_CHOICE", [True])
    got = both()
    assert sorted(calls) == [pos.shape[0], stages.BIG_SEGMENT + 100]  # both went to the kernel
    for g, w in zip(got, want, strict=True):
        assert np.array_equal(g, w)
