"""Same answers on any number of threads and for any split of the item sets.

Variants run concurrently on the engine's one thread pool; each writes only its own rows.
These tests compare every result matrix, error, detail list and output table for threads =
1, 2 and 4, and compare one corpus run with runs over chunks of its sets."""

import dataclasses
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import cupel_np as c  # noqa: E402
from cupel_np.engine import parallel  # noqa: E402
from cupel_np.errors import InvalidConfigError  # noqa: E402


def _load_matrix_data():
    """The benchmark's data generator, loaded from its file under a name of its own: putting
    benchmarks/ on sys.path would shadow test modules of the same name (benchmarks/test_dask.py)
    for every process that inherits the path, Dask's worker processes included."""
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "matrix_data.py"
    spec = importlib.util.spec_from_file_location("cupel_np_bench_matrix_data", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


matrix_arrow = _load_matrix_data().matrix_arrow


@pytest.fixture(autouse=True)
def _always_on_the_pool(monkeypatch):
    """Small sweeps run on the calling thread (``parallel.INLINE_WORK``); here every sweep
    goes to the pool, so 2 and 4 threads really run concurrently."""
    monkeypatch.setattr(parallel, "INLINE_WORK", 0)


N_SETS = 60
BUDGET = c.ContextBudget(30_000, 4_000)


def _corpus(n=3000, n_sets=N_SETS, seed=3):
    t = matrix_arrow(n, n_sets=n_sets, seed=seed)
    # duplicate contents (deduplication groups) and pinned rows
    content = t["content"].to_pylist()
    for i in range(0, n, 37):
        content[i] = content[i - 1] if i else content[i]
    pinned = np.zeros(n, dtype=bool)
    pinned[::97] = True
    t = t.set_column(t.schema.get_field_index("content"), "content", pa.array(content))
    return t.append_column("pinned", pa.array(pinned))


def _variants():
    w = [c.RecencyScorer(), c.PriorityScorer(), c.KindScorer(), c.ReflexiveScorer()]
    comp = lambda ws: c.CompositeScorer(tuple(zip(w, ws)))  # noqa: E731
    quota = c.QuotaSlice((c.QuotaEntry("Message", require=20, cap=50),), c.GreedySlice())
    count = c.CountQuotaSlice((c.CountQuotaEntry("Document", require_count=4, cap_count=6),), scarcity_behavior="throw")
    return [
        ("greedy-chrono", c.Policy(comp([1, 1, 1, 1])), BUDGET),
        ("greedy-u", c.Policy(comp([0.3, 1, 0.2, 1]), placer="u_shaped"), BUDGET),
        ("quota", c.Policy(comp([1, 0.5, 1, 0.1]), slicer=quota), BUDGET),
        ("knapsack", c.Policy(comp([1, 1, 0.1, 1]), slicer=c.KnapsackSlice(50)), BUDGET),
        ("count-throw", c.Policy(comp([0.2, 1, 1, 1]), slicer=count, overflow_strategy="truncate"), BUDGET),
        (
            "overflow-throw",
            c.Policy(comp([1, 1, 1, 1]), slicer=count, overflow_strategy="throw"),
            c.ContextBudget(30_000, 600),
        ),
        ("tiny", c.Policy(comp([1, 0.01, 0.01, 1])), c.ContextBudget(30_000, 50)),
        ("all-in", c.Policy(comp([0.5, 0.5, 0.5, 0.5]), placer="u_shaped"), c.ContextBudget(10**9, 10**8)),
    ]


def _snapshot(res):
    run = res.run
    v = run.n_variants
    return {
        "included": run.included.copy(),
        "reason": run.reason.copy(),
        "position": run.position.copy(),
        "scores": run.scores.copy(),
        "effective_target": run.effective_target.copy(),
        "avail_slice": run.avail_slice.copy(),
        "avail_place": run.avail_place.copy(),
        "cap_dropped": run.cap_dropped.copy(),
        "errors": [sorted((s, type(e).__name__, str(e)) for s, e in run.errors[i].items()) for i in range(v)],
        "shortfalls": [sorted(run.shortfalls[i].items()) for i in range(v)],
        "dedup": [tuple(map(np.copy, run.dedup_winner[i])) for i in range(v)],
        "trunc": [tuple(map(np.copy, run.trunc_order[i])) for i in range(v)],
        "count_cap": [tuple(map(np.copy, run.count_cap[i])) for i in range(v)],
        "diffs": res.diffs_table(),
        "items": res.items_table(),
        "variants": res.variants_table(),
    }


def _assert_same(a, b):
    assert a.keys() == b.keys()
    for k in a:
        x, y = a[k], b[k]
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), k
            if x.dtype.kind == "f":  # bit-identical, not just equal
                assert np.array_equal(x.view(np.int64), y.view(np.int64)), k
        elif isinstance(x, pa.Table):
            assert x.equals(y), k
        elif k in ("dedup", "trunc", "count_cap"):
            for p, q in zip(x, y):
                assert all(np.array_equal(u, w) for u, w in zip(p, q)), k
        else:
            assert x == y, k


@pytest.fixture(scope="module")
def corpus():
    return c.ItemTable.from_arrow(_corpus(), set_column="sid")


def test_results_identical_for_1_2_4_threads(corpus):
    base = _snapshot(c.sweep(corpus, None, _variants(), on_error="collect", threads=1))
    assert any(base["errors"]), "the variants should include failing (variant, set) cells"
    assert base["included"].any() and not base["included"].all()
    for th in (2, 4):
        _assert_same(base, _snapshot(c.sweep(corpus, None, _variants(), on_error="collect", threads=th)))


def test_groups_identical_for_1_2_4_threads():
    """Every variant again with atomic groups (issue 29): runs of 2-4 rows of a set share a
    ``tool_group`` key, about a third of the rows, pinned and duplicated rows among them."""
    t = _corpus()
    sid = t["sid"].to_numpy()
    rng = np.random.default_rng(4)
    key: list[str | None] = [None] * t.num_rows
    i = 0
    while i < t.num_rows:
        n = int(rng.integers(2, 5))
        if rng.random() < 0.15 and i + n <= t.num_rows and sid[i] == sid[i + n - 1]:
            key[i : i + n] = [f"g{i}"] * n
            i += n
        else:
            i += 1
    assert 0.25 < sum(k is not None for k in key) / t.num_rows < 0.5
    table = c.ItemTable.from_arrow(t.append_column("tool_group", pa.array(key, pa.string())), set_column="sid")
    grouped = [(label + "+groups", dataclasses.replace(p, groups="tool_group"), b) for label, p, b in _variants()]
    base = _snapshot(c.sweep(table, None, grouped, on_error="collect", threads=1))
    assert base["included"].any() and not base["included"].all()
    assert any(base["errors"]) and any(t[0].size for t in base["trunc"]) and any(t[0].size for t in base["count_cap"])
    for th in (2, 4):
        _assert_same(base, _snapshot(c.sweep(table, None, grouped, on_error="collect", threads=th)))


def test_one_big_set_identical_for_1_2_4_threads():
    """One set big enough for the chunked greedy walk, the radix sort and the timestamp filter."""
    t = c.ItemTable.from_arrow(matrix_arrow(40_000, seed=8))
    total = int(t.tokens.sum())
    vs = [
        (
            f"v{i}",
            c.Policy(
                c.CompositeScorer(((c.RecencyScorer(), 1.0 + i), (c.ReflexiveScorer(), 1.0))),
                placer=("u_shaped" if i % 2 else "chronological"),
            ),
            c.ContextBudget(total, total * f // 100),
        )
        for i, f in enumerate([1, 25, 50, 90])
    ]
    base = _snapshot(c.sweep(t, None, vs, threads=1))
    for th in (2, 4):
        _assert_same(base, _snapshot(c.sweep(t, None, vs, threads=th)))


@pytest.mark.parametrize("chunks", [2, 7])
def test_chunks_of_sets_give_the_same_rows(corpus, chunks):
    """One corpus run == runs over chunks of its sets (rows compared per input row)."""
    arrow = _corpus()
    whole = c.sweep(corpus, None, _variants(), on_error="collect", threads=2)
    sid = arrow["sid"].to_numpy()
    bounds = np.linspace(0, N_SETS, chunks + 1).astype(int)
    n_err = 0
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        rows = np.flatnonzero((sid >= lo) & (sid < hi))
        part = c.ItemTable.from_arrow(arrow.take(pa.array(rows)), set_column="sid")
        res = c.sweep(part, None, _variants(), on_error="collect", threads=1)
        n_err += sum(len(e) for e in res.errors.values())
        for name in ("included", "reasons", "positions"):
            assert np.array_equal(getattr(res, name), getattr(whole, name)[rows]), name
        assert np.array_equal(res.scores.view(np.int64), whole.scores[rows].view(np.int64))
        for lab in whole.labels:
            want = {k: str(e) for k, e in whole.errors.get(lab, {}).items() if lo <= k < hi}
            assert {k: str(e) for k, e in res.errors.get(lab, {}).items()} == want
    assert n_err == sum(len(e) for e in whole.errors.values()) > 0


def test_threads_argument_and_environment(monkeypatch, corpus):
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(InvalidConfigError, match="threads"):
            c.sweep(corpus, BUDGET, _variants()[:2], threads=bad)
    monkeypatch.setenv(parallel.ENV, "zero")
    with pytest.raises(InvalidConfigError, match=parallel.ENV):
        c.sweep(corpus, BUDGET, _variants()[:2])
    monkeypatch.setenv(parallel.ENV, "3")
    assert parallel.resolve_threads() == 3
    monkeypatch.delenv(parallel.ENV)
    assert parallel.resolve_threads() == len(os.sched_getaffinity(0))


def test_worker_errors_propagate_and_pool_is_reusable():
    seen = []

    def task(i, state):
        state.append(i)
        if i == 3:
            raise ValueError("boom 3")

    with pytest.raises(ValueError, match="boom 3"):
        parallel.run_tasks(8, 3, list, task)
    parallel.run_tasks(5, 2, lambda: seen, lambda i, s: None)  # still usable


def test_nested_call_inside_a_worker_runs_inline(corpus):
    """A sweep started from inside one of the pool's workers must not wait on the pool."""
    out = []
    parallel.run_tasks(
        2, 2, lambda: None, lambda i, s: out.append(c.sweep(corpus, BUDGET, _variants()[:2], threads=2).n_swing)
    )
    assert len(out) == 2 and out[0] == out[1]


def test_cli_threads_option(tmp_path, capsys):
    from cupel_np.cli import main

    with pytest.raises(SystemExit):
        main(["demo", "--threads", "0", "--out", str(tmp_path / "o")])
    assert "--threads must be a positive integer" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # shown only where it does something
        main(["presets", "--threads", "2"])
    assert "unrecognized arguments: --threads" in capsys.readouterr().err


@pytest.mark.parametrize("span", ["ties", "wide", "full"])
def test_timestamp_order_sorts_every_segment(span):
    """The shared timestamp order (one packed-key sort, or ranks when segment and timestamp
    do not fit 64 bits together) lists each segment's timestamped rows by timestamp."""
    from cupel_np.engine.placers import timestamp_order

    rng = np.random.default_rng({"ties": 1, "wide": 2, "full": 3}[span])
    for _ in range(60):
        n = int(rng.integers(0, 400))
        n_seg = int(rng.integers(1, 40))
        offsets = np.concatenate([[0], np.sort(rng.integers(0, n + 1, n_seg - 1)), [n]]).astype(np.int64)
        if span == "ties":
            ts = rng.integers(-3, 3, n)
        elif span == "wide":
            ts = rng.integers(-(2**40), 2**40, n)
        else:  # span of ~2**64: the rank fallback
            ts = np.where(
                rng.random(n) < 0.5,
                np.iinfo(np.int64).min + rng.integers(0, 5, n),
                np.iinfo(np.int64).max - rng.integers(0, 5, n),
            )
        ts = ts.astype(np.int64)
        valid = rng.random(n) < 0.7
        order, ts_sorted, off, *_ = timestamp_order(ts, valid, offsets)
        assert order.dtype == np.int64 and off.dtype == np.int64
        assert np.array_equal(ts_sorted, ts[order])
        for s in range(n_seg):
            seg_rows = np.flatnonzero(valid[offsets[s] : offsets[s + 1]]) + offsets[s]
            got = order[off[s] : off[s + 1]]
            assert np.array_equal(np.sort(got), seg_rows)
            assert np.all(ts[got][1:] >= ts[got][:-1])


def test_score_context_computes_each_column_once_on_many_threads(monkeypatch, corpus):
    """Base columns are computed concurrently: a column (or a child shared by two composites)
    asked for by several threads at once is evaluated once and equals the serial one."""
    import threading

    from cupel_np.engine import scorers
    from cupel_np.engine.scorers import ScoreContext

    rec, pri, kind = c.RecencyScorer(), c.PriorityScorer(), c.KindScorer()
    specs = [
        rec,
        pri,
        c.CompositeScorer(((rec, 1.0), (kind, 2.0))),
        c.ScaledScorer(rec),
        c.CompositeScorer(((pri, 1.0), (c.ScaledScorer(rec), 1.0))),
        c.FrequencyScorer(),
        c.TagScorer({"tag3": 1.0}),
    ]
    serial = ScoreContext(corpus, np.arange(corpus.n), corpus.offsets)
    want = [serial.score(s) for s in specs]
    calls: dict = {}
    lock = threading.Lock()
    evaluate = scorers._evaluate

    def counting(scorer, ctx):
        with lock:
            calls[scorer] = calls.get(scorer, 0) + 1
        return evaluate(scorer, ctx)

    monkeypatch.setattr(scorers, "_evaluate", counting)
    ctx = ScoreContext(corpus, np.arange(corpus.n), corpus.offsets)
    got = [None] * (4 * len(specs))

    def task(i, _):
        got[i] = ctx.score(specs[i % len(specs)])

    parallel.run_tasks(len(got), 4, lambda: None, task)
    assert calls and all(k == 1 for k in calls.values()), calls
    for i, col in enumerate(got):
        assert np.array_equal(col.view(np.int64), want[i % len(specs)].view(np.int64))


def test_sweep_result_status_without_repeated_content_is_the_run(corpus):
    """Without repeated content the [G, V] status is the run's inclusion matrix (no copy);
    with it, one status per content. Both agree with a per-content scatter."""
    for table in (c.ItemTable.from_arrow(matrix_arrow(3000, n_sets=N_SETS, seed=4), set_column="sid"), corpus):
        res = c.sweep(table, None, _variants(), on_error="collect", threads=2)
        inc = res.run.included
        want = np.zeros((res.group_first_row.shape[0], inc.shape[0]), dtype=bool)
        for v in range(inc.shape[0]):
            want[res.group_of_row[inc[v]], v] = True
        assert np.array_equal(res.status, want)
        valid = ~res.failed.T[res.group_set]
        n_inc = (want & valid).sum(axis=1)
        assert np.array_equal(res.swing, (n_inc > 0) & (n_inc < valid.sum(axis=1)))
        if table is not corpus:
            assert np.shares_memory(res.status, inc)


def test_placed_positions_per_set_agree_with_the_position_matrix(corpus):
    """Positions are stored for included rows only (rows = the inclusion matrix's): the per-set
    view used by reports matches the dense position matrix."""
    res = c.sweep(corpus, None, _variants(), on_error="collect", threads=2)
    run = res.run
    pos = run.position
    assert np.array_equal(pos >= 0, run.included)
    for v in range(run.n_variants):
        for s in range(corpus.n_sets):
            rows, p = run.placed_in(v, s)
            lo, hi = corpus.offsets[s], corpus.offsets[s + 1]
            want = lo + np.flatnonzero(pos[v, lo:hi] >= 0)
            assert np.array_equal(rows, want) and np.array_equal(p, pos[v, want])


def test_a_small_sweep_runs_on_the_calling_thread(monkeypatch):
    """Below ``INLINE_WORK`` item-variants the pool is not used, whatever ``threads`` says."""
    import threading

    from cupel_np.engine import batch
    from cupel_np.model.grid import Variant

    t = c.ItemTable.from_arrow(matrix_arrow(50))
    variants = [Variant(f"v{i}", c.Policy(c.RecencyScorer()), c.ContextBudget(10_000, 5_000)) for i in range(2)]
    seen = set()
    real = batch.run_variant

    def spy(*a, **k):
        seen.add(threading.current_thread().name)
        return real(*a, **k)

    monkeypatch.setattr(batch, "run_variant", spy)
    monkeypatch.setattr(parallel, "INLINE_WORK", 4096)
    batch.run_sweep(t, variants, threads=2)
    assert seen == {threading.current_thread().name}
    monkeypatch.setattr(parallel, "INLINE_WORK", 0)
    seen.clear()
    batch.run_sweep(t, variants, threads=2)
    assert seen and threading.current_thread().name not in seen
