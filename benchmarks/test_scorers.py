"""Every scorer (a) over one 200,000-item set with a Zipf tag vocabulary, and (b) over a
corpus of many small sets (2-50 items) with a large, mostly unique tag vocabulary at
N = 32k, 320k (and 3.2M with CUPEL_BENCH_BIG=1) items: time per item must stay roughly
constant as N grows (issue 8: every scorer linear in items).

    .venv/bin/python -m pytest benchmarks/test_scorers.py -s --benchmark-columns=median,min,max

Warm timings: the first call per scorer compiles (cached on disk). ``test_corpus_linearity``
prints the per-item table, all sizes timed in one process.
"""

import functools
import os
import time
from datetime import UTC, datetime

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import cupel_np as c
from cupel_np.engine.scorers import ScoreContext
from cupel_np.engine.sweep_run import classify

BIG = os.environ.get("CUPEL_BENCH_BIG") == "1"
CORPUS_SIZES = [32_000, 320_000] + ([3_200_000] if BIG else [])

SCORERS = {
    "recency": c.RecencyScorer(),
    "priority": c.PriorityScorer(),
    "kind": c.KindScorer(),
    "tag": c.TagScorer((("tag0", 1.0), ("tag1", 2.0), ("TAG3", 0.5))),
    "frequency": c.FrequencyScorer(),
    "reflexive": c.ReflexiveScorer(),
    "scaled": c.ScaledScorer(c.PriorityScorer()),
    "composite": c.CompositeScorer(((c.RecencyScorer(), 2.0), (c.KindScorer(), 1.0), (c.ReflexiveScorer(), 1.0))),
    "metadata_trust": c.MetadataTrustScorer(0.5),
    "metadata_key": c.MetadataKeyScorer("cupel:trust", "0.9", 1.5),
    "decay": c.DecayScorer(datetime(2026, 1, 1, tzinfo=UTC), c.ExponentialCurve(86400.0)),
}


def make_corpus(n: int, seed: int = 11) -> c.ItemTable:
    """Many small sets (2-50 items each) over ``n`` items. Tokens log-uniform on 1-2000 with
    1% zero, 70% timestamped, 50% with a priority, 80% with a hint, a third with trust
    metadata, 0-3 tags per item from a vocabulary of ~n/2 tags (mostly unique per set, a few
    hundred shared ones, mixed case)."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(2, 51, n // 2 + 2)
    sizes = sizes[: int(np.searchsorted(np.cumsum(sizes), n)) + 1]
    sizes[-1] -= int(sizes.sum()) - n
    sizes = sizes[sizes > 0]
    set_id = np.repeat(np.arange(len(sizes)), sizes)
    k = rng.integers(0, 4, n)
    n_occ = int(k.sum())
    n_vocab = max(n // 2, 1000)
    tag_num = np.where(rng.random(n_occ) < 0.1, rng.integers(0, 300, n_occ), rng.integers(0, n_vocab, n_occ))
    prefix = pa.array(np.where(rng.random(n_occ) < 0.2, "T", "t"))
    flat = pc.binary_join_element_wise(prefix, pa.array(tag_num).cast(pa.string()), "")
    offsets = np.concatenate([[0], np.cumsum(k)]).astype(np.int32)
    tokens = np.exp(rng.uniform(0.0, np.log(2000.0), n)).astype(np.int64)
    tokens[rng.random(n) < 0.01] = 0
    kinds = np.array(["Message", "message", "Document", "ToolOutput", "Memory", "SystemPrompt"])
    trust = np.array(["0.1", "0.5", "0.9", "high", "1.5"])
    has = rng.random(n) < 0.33
    md_off = np.concatenate([[0], np.cumsum(has)]).astype(np.int32)
    md = pa.MapArray.from_arrays(
        pa.array(md_off),
        pa.array(["cupel:trust"]).take(pa.array(np.zeros(int(has.sum()), dtype=np.int64))),
        pa.array(trust).take(pa.array(rng.integers(0, 5, int(has.sum())))),
    )
    ts = (1_700_000_000_000_000 + rng.integers(0, 10**12, n)).astype("datetime64[us]")
    return c.ItemTable.from_arrow(
        pa.table(
            {
                "set": set_id,
                "content": pc.binary_join_element_wise("item ", pa.array(np.arange(n)).cast(pa.string()), ""),
                "tokens": tokens,
                "kind": pa.array(kinds).take(pa.array(rng.integers(0, len(kinds), n))),
                "priority": pa.array(rng.integers(0, 100, n), mask=rng.random(n) < 0.5),
                "tags": pa.ListArray.from_arrays(pa.array(offsets), flat),
                "metadata": md,
                "timestamp": pa.array(ts, pa.timestamp("us", tz="UTC"), mask=rng.random(n) < 0.3),
                "future_relevance_hint": pa.array(rng.uniform(0.0, 1.0, n), mask=rng.random(n) < 0.2),
            }
        ),
        set_column="set",
    )


_CORPORA: dict[int, tuple] = {}


def corpus(n: int):
    if n not in _CORPORA:
        table = make_corpus(n)
        _CORPORA[n] = (table, classify(table))
    return _CORPORA[n]


def _score_fresh(table, cls, scorer):
    """A fresh ScoreContext: no score column or tag gather cached from an earlier call (the
    table's own string encodings are built once per table, at its first use)."""
    return ScoreContext(table, cls.sc_rows, cls.sc_offsets).score(scorer)


@pytest.mark.parametrize("name", list(SCORERS))
def test_score_200k(benchmark, table_200k, name):
    cls = classify(table_200k)
    scorer = SCORERS[name]
    _score_fresh(table_200k, cls, scorer)  # warm-up / compile

    out = benchmark.pedantic(lambda: _score_fresh(table_200k, cls, scorer), rounds=3, iterations=1)
    assert out.shape == (len(cls.sc_rows),) and np.isfinite(out).all()


@pytest.mark.parametrize("n", CORPUS_SIZES)
@pytest.mark.parametrize("name", list(SCORERS))
def test_score_corpus(benchmark, name, n):
    table, cls = corpus(n)
    scorer = SCORERS[name]
    _score_fresh(table, cls, scorer)
    out = benchmark.pedantic(lambda: _score_fresh(table, cls, scorer), rounds=3, iterations=1)
    assert out.shape == (len(cls.sc_rows),) and np.isfinite(out).all()


def _median(f, clock, rounds=5):
    ts = []
    for _ in range(rounds):
        t0 = clock()
        f()
        ts.append(clock() - t0)
    return float(np.median(ts))


def test_corpus_linearity():
    """Per-item time of every scorer at each corpus size, in one process; a scorer is linear
    when its per-item time stays roughly constant.

    The check uses the thread's CPU time (every scorer runs on the calling thread): on a
    loaded machine a 1 ms call usually runs inside one time slice while a 100 ms call is
    preempted many times, so wall-clock per-item time grows with N even for a linear loop.
    Wall-clock medians are printed beside it. Fails if the largest size costs more than 4x CPU
    per item what the smallest does: the smallest corpus fits in cache and the largest does not
    (up to ~2.5x per item for plain NumPy passes), while a cost in sets x vocabulary or in
    items^2 grows 10x per item for each 10x in N."""
    cpu, wall = {}, {}
    for n in CORPUS_SIZES:
        table, cls = corpus(n)
        for name, scorer in SCORERS.items():
            _score_fresh(table, cls, scorer)
            run = functools.partial(_score_fresh, table, cls, scorer)
            cpu[name, n] = _median(run, time.thread_time) / n * 1e9
            wall[name, n] = _median(run, time.perf_counter) / n * 1e9
    sizes = "".join(f"{n:>11,d}" for n in CORPUS_SIZES)
    print(f"\n{'ns/item':<16}{'CPU:':<5}{sizes}  {'wall:':<6}{sizes}  CPU last/first")
    bad = []
    for name in SCORERS:
        row = [cpu[name, n] for n in CORPUS_SIZES]
        ratio = row[-1] / row[0]
        print(
            f"{name:<16}{'':<5}"
            + "".join(f"{v:11.1f}" for v in row)
            + f"  {'':<6}"
            + "".join(f"{wall[name, n]:11.1f}" for n in CORPUS_SIZES)
            + f"  {ratio:.2f}"
        )
        if ratio > 4.0:
            bad.append((name, ratio))
    assert not bad, bad
