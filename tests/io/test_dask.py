"""cupel_np.dask on a real multi-process LocalCluster: the union of the written parts equals
the in-process sweep, whatever the partitioning, file layout and row order; faults."""

import json
import os
import re
import signal
import sys
from pathlib import Path

import cloudpickle
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import cupel_np as c
from cupel_np.errors import CupelError, InvalidConfigError, PinnedExceedsBudgetError
from cupel_np.io import dask as cdask

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample_sessions.parquet"
BUDGET = c.ContextBudget(8000, 6000, 1000)
VARIANTS = [
    ("chat", c.preset("chat")),
    ("rag", c.preset("rag")),
    ("small", c.preset("chat"), c.ContextBudget(4000, 3000)),
]
# pinned items need more than 300 tokens in about half of the sample's sessions
FAILING = [*VARIANTS, ("tight", c.preset("chat"), c.ContextBudget(300, 250))]
KEYS = {"items": ["session_id", "input_row"], "diffs": ["session_id", "content"], "variants": ["variant", "session_id"]}

# the kill test's partition function runs on the workers: ship this module's code by value
cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture(scope="module")
def client():
    from distributed import Client, LocalCluster

    with (
        LocalCluster(processes=True, n_workers=2, threads_per_worker=1, dashboard_address=":0") as cluster,
        Client(cluster) as cl,
    ):
        yield cl


@pytest.fixture(scope="module")
def sample():
    return pq.read_table(SAMPLE)


def _expected(source, variants=VARIANTS, on_error="raise"):
    res = c.sweep(c.ItemTable.from_parquet(source, set_column="session_id"), BUDGET, variants, on_error=on_error)
    return {"items": res.items_table(), "diffs": res.diffs_table(), "variants": res.variants_table()}, res


def _assert_same(out: Path, expected: dict) -> None:
    for name, keys in KEYS.items():
        files = sorted(p.name for p in (out / name).iterdir())
        assert all(f.startswith("part-") and f.endswith(".parquet") for f in files), files
        a = pq.read_table(out / name).sort_by([(k, "ascending") for k in keys])
        b = expected[name].sort_by([(k, "ascending") for k in keys])
        assert a.num_rows == b.num_rows, name
        assert a.equals(b.cast(a.schema)), name


@pytest.mark.parametrize("npartitions", [1, 2, 4])
def test_partitions_equal_in_process(tmp_path, client, sample, npartitions):
    src = tmp_path / "items.parquet"
    pq.write_table(sample, src, row_group_size=1000)  # sets straddle row groups
    expected, res = _expected(src)
    s = cdask.sweep(
        src, BUDGET, VARIANTS, set_column="session_id", out_dir=tmp_path / "out", client=client, npartitions=npartitions
    )
    assert s["partitions"] == npartitions and s["shuffled"] == (npartitions > 1)
    assert (s["rows"], s["sets"], s["swing"]) == (sample.num_rows, 300, res.n_swing)
    assert s["failed"] == {"chat": 0, "rag": 0, "small": 0}
    _assert_same(tmp_path / "out", expected)
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert [v["label"] for v in manifest["variants"]] == ["chat", "rag", "small"]
    assert c.ContextBudget.from_dict(manifest["variants"][2]["budget"]) == c.ContextBudget(4000, 3000)
    assert c.Policy.from_dict(manifest["variants"][1]["policy"]) == c.preset("rag")
    md = pq.read_metadata(next((tmp_path / "out" / "items").iterdir())).metadata
    assert json.loads(md[b"cupel_np.variants"]) == manifest["variants"]


def test_shuffled_rows_in_many_files(tmp_path, client, sample):
    """A dataset written in random row order over 5 files: every set spans partitions."""
    t = sample.take(pa.array(np.random.default_rng(7).permutation(sample.num_rows)))
    d = tmp_path / "ds"
    d.mkdir()
    cuts = np.linspace(0, t.num_rows, 6).astype(int)
    for i in range(5):
        pq.write_table(t.slice(cuts[i], cuts[i + 1] - cuts[i]), d / f"part-{i}.parquet")
    expected, _ = _expected(d)
    s = cdask.sweep(d, BUDGET, VARIANTS, set_column="session_id", out_dir=tmp_path / "out", client=client)
    assert s["partitions"] == 5 and s["shuffled"]
    _assert_same(tmp_path / "out", expected)


def test_sets_split_across_hive_files_without_shuffle_when_whole(tmp_path, client, sample):
    """Sorted rows cut into files mid-set (shuffle needed); then files holding whole sets under
    hive directories (no shuffle), with a list of files as the source."""
    d = tmp_path / "split"
    d.mkdir()
    cuts = [0, 1001, 4444, sample.num_rows]
    for i in range(3):
        pq.write_table(sample.slice(cuts[i], cuts[i + 1] - cuts[i]), d / f"f{i}.parquet")
    expected, _ = _expected(d)
    s = cdask.sweep(d, BUDGET, VARIANTS, set_column="session_id", out_dir=tmp_path / "o1", client=client)
    assert s["shuffled"]
    _assert_same(tmp_path / "o1", expected)

    keys = sample.column("session_id").to_numpy(zero_copy_only=False)
    files = []
    for day, (lo, hi) in enumerate([(0, 100), (100, 200), (200, 300)]):
        sel = (keys >= f"session-{lo:04d}") & (keys < f"session-{hi:04d}")
        p = tmp_path / "hive" / f"day={day}"
        p.mkdir(parents=True)
        pq.write_table(sample.filter(pa.array(sel)), p / "f.parquet")
        files.append(p / "f.parquet")
    expected, _ = _expected(files)
    s = cdask.sweep(files, BUDGET, VARIANTS, set_column="session_id", out_dir=tmp_path / "o2", client=client)
    assert not s["shuffled"] and s["partitions"] == 3
    _assert_same(tmp_path / "o2", expected)
    day = pq.read_table(tmp_path / "o2" / "items")
    assert day.num_rows == sample.num_rows


def test_failing_set_raises_naming_set_and_variant(tmp_path, client, sample):
    src = tmp_path / "items.parquet"
    pq.write_table(sample, src)
    with pytest.raises(PinnedExceedsBudgetError, match=r"variant 'tight': set 'session-\d+': pinned items"):
        cdask.sweep(
            src, BUDGET, FAILING, set_column="session_id", out_dir=tmp_path / "out", client=client, npartitions=2
        )
    assert not any((tmp_path / "out" / p).exists() for p in ("items", "diffs", "variants", "manifest.json"))


def test_failing_sets_collected(tmp_path, client, sample):
    src = tmp_path / "items.parquet"
    pq.write_table(sample, src, row_group_size=2000)
    expected, res = _expected(src, FAILING, on_error="collect")
    s = cdask.sweep(
        src,
        BUDGET,
        FAILING,
        set_column="session_id",
        out_dir=tmp_path / "out",
        client=client,
        on_error="collect",
        npartitions=3,
    )
    n_failed = len(res.errors["tight"])
    assert 50 < n_failed < 250
    assert s["failed"] == {"chat": 0, "rag": 0, "small": 0, "tight": n_failed}
    _assert_same(tmp_path / "out", expected)


def test_existing_out_dir_refused_unless_overwrite(tmp_path, client, sample):
    src = tmp_path / "items.parquet"
    pq.write_table(sample.slice(0, 500), src)
    out = tmp_path / "out"
    cdask.sweep(src, BUDGET, VARIANTS, set_column="session_id", out_dir=out, client=client)
    with pytest.raises(InvalidConfigError, match="already holds a sweep .*overwrite=True"):
        cdask.sweep(src, BUDGET, VARIANTS, set_column="session_id", out_dir=out, client=client)
    s = cdask.sweep(src, BUDGET, VARIANTS[:2], set_column="session_id", out_dir=out, client=client, overwrite=True)
    assert s["rows"] == 500
    assert json.loads((out / "manifest.json").read_text())["summary"] == s
    assert set(pq.read_table(out / "variants").column("variant").unique().to_pylist()) == {"chat", "rag"}


def test_bad_arguments(tmp_path, client):
    with pytest.raises(InvalidConfigError, match="set column 'nope' not found"):
        cdask.sweep(SAMPLE, BUDGET, VARIANTS, set_column="nope", out_dir=tmp_path / "o", client=client)
    with pytest.raises(InvalidConfigError, match="on_error"):
        cdask.sweep(
            SAMPLE, BUDGET, VARIANTS, set_column="session_id", out_dir=tmp_path / "o", client=client, on_error="ignore"
        )
    with pytest.raises(InvalidConfigError, match="items file not found"):
        cdask.sweep(
            tmp_path / "nope.parquet", BUDGET, VARIANTS, set_column="session_id", out_dir=tmp_path / "o2", client=client
        )


# ----------------------------------------------------------------------------- worker death
def _piece_or_die(i: int, path: str, bounds: list, marker: str):
    """Partition ``i`` of the items. The driver reads each input partition twice (row counts
    and set keys, then the sweep itself); the second read of partition 1 kills its own worker
    process, once, in the middle of the sweep's graph (its shuffle outputs die too)."""
    import pandas as pd

    if i == 1:
        count = Path(marker + ".count")
        n = int(count.read_text()) + 1 if count.exists() else 1
        count.write_text(str(n))
        if n == 2 and not os.path.exists(marker):
            Path(marker).write_text(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)
    t = pq.read_table(path).slice(bounds[i], bounds[i + 1] - bounds[i])
    return t.to_pandas(types_mapper=pd.ArrowDtype)


def test_killed_worker_is_retried_and_output_complete(tmp_path, client, sample):
    import dask.dataframe as dd
    import pandas as pd

    t = sample.take(pa.array(np.random.default_rng(3).permutation(sample.num_rows)))
    src = tmp_path / "items.parquet"
    pq.write_table(t, src)
    bounds = np.linspace(0, t.num_rows, 5).astype(int).tolist()
    marker = tmp_path / "killed"
    meta = t.schema.empty_table().to_pandas(types_mapper=pd.ArrowDtype)
    ddf = dd.from_map(
        _piece_or_die,
        range(4),
        path=str(src),
        bounds=bounds,
        marker=str(marker),
        meta=meta,
        divisions=[None] * 5,
        enforce_metadata=False,
    )
    expected, _ = _expected(src)
    s = cdask.sweep(ddf, BUDGET, VARIANTS, set_column="session_id", out_dir=tmp_path / "out", client=client)
    assert marker.exists()  # a worker really died
    assert s["rows"] == t.num_rows and s["partitions"] == 4 and s["shuffled"]
    assert int((tmp_path / "killed.count").read_text()) >= 3  # read again after the death
    for name in ("items", "diffs", "variants"):  # no duplicate, no temp or partial file
        assert sorted(os.listdir(tmp_path / "out" / name)) == [f"part-{i:05d}.parquet" for i in range(4)]
    _assert_same(tmp_path / "out", expected)


def test_dask_error_is_a_cupel_error():
    assert issubclass(PinnedExceedsBudgetError, CupelError)


# ----------------------------------------------------------------------------- command line, report
def test_cli_dask_and_report_from_any_sweep_directory(tmp_path, client, sample, capsys):
    from cupel_np.cli import main
    from cupel_np.report.from_dir import dir_page_data as page_data
    from cupel_np.report.sweep_dir import load_sweep_dir

    t = sample.take(pa.array(np.random.default_rng(5).permutation(sample.num_rows)))
    d = tmp_path / "ds"
    d.mkdir()
    for i in range(3):
        pq.write_table(t.slice(i * 3000, 3000), d / f"f{i}.parquet")
    common = [
        "--preset",
        "chat",
        "--preset",
        "rag",
        "--preset",
        "long_running",
        "--max-tokens",
        "8000",
        "--target-tokens",
        "6000",
        "--set-column",
        "session_id",
        "--quiet",
    ]
    assert main(["sensitivity", str(d), *common, "--out", str(tmp_path / "mem")]) == 0
    assert (
        main(["sensitivity", str(d), *common, "--out", str(tmp_path / "dk"), "--dask", client.scheduler.address]) == 0
    )
    out = capsys.readouterr().out
    assert "on Dask" in out and "3 partitions, shuffled on the set key" in out
    assert (tmp_path / "dk" / "report.html").is_file() and (tmp_path / "dk" / "manifest.json").is_file()
    # rerun into the same directory: refused, then replaced with --overwrite
    assert (
        main(["sensitivity", str(d), *common, "--out", str(tmp_path / "dk"), "--dask", client.scheduler.address]) == 2
    )
    assert "already holds a sweep" in capsys.readouterr().err
    files = [str(d / f"f{i}.parquet") for i in range(3)]
    assert (
        main(
            [
                "sensitivity",
                *files,
                *common,
                "--out",
                str(tmp_path / "dk"),
                "--dask",
                "local:1",
                "--overwrite",
                "--json",
            ]
        )
        == 0
    )
    summary = json.loads(capsys.readouterr().out)
    assert summary["rows"] == sample.num_rows and summary["partitions"] == 3

    a, b = load_sweep_dir(tmp_path / "mem"), load_sweep_dir(tmp_path / "dk")
    for f in ("labels", "variants", "set_column", "rows", "sets", "swing"):
        assert getattr(a, f) == getattr(b, f), f
    assert (
        page_data(tmp_path / "mem", max_rows=15, top_k=15).rows
        == page_data(tmp_path / "dk", max_rows=15, top_k=15).rows
    )
    for f in ("included", "tokens", "target", "swing_included", "failed"):
        assert np.array_equal(getattr(a, f), getattr(b, f)), f
    res = c.sweep(
        c.ItemTable.from_parquet(d, set_column="session_id"),
        BUDGET,
        [(p, c.preset(p)) for p in ("chat", "rag", "long_running")],
    )
    vt = res.variants_table().group_by("variant").aggregate([("included_count", "sum"), ("tokens_used", "sum")])
    got = dict(zip(vt["variant"].to_pylist(), vt["included_count_sum"].to_pylist()))
    assert got == dict(zip(a.labels, a.included.tolist()))
    assert a.rows == sample.num_rows and a.sets == 300 and a.swing == res.n_swing
    top = page_data(tmp_path / "dk", max_rows=15, top_k=15).rows
    assert len(top) == 15 and all(r for t_ in top for r in t_["reason"])  # every variant's status or reason
    assert all(0 < t_["n_in"] < t_["n_valid"] for t_ in top)  # every shown row swings
    assert main(["report", str(tmp_path / "mem"), "--title", "from disk"]) == 2  # never replaces a richer page silently
    assert main(["report", str(tmp_path / "mem"), "--title", "from disk", "--overwrite"]) == 0
    page = (tmp_path / "mem" / "report.html").read_text()
    assert "from disk" in page and 'data-sections="start variants agreement by-kind by-source why sets charts"' in page
    assert main(["report", str(tmp_path / "nothing")]) == 2
    # one report whatever the path: the Dask directory's page is the in-memory page, byte for byte
    from cupel_np.report.from_dir import write_dir_report
    from cupel_np.report.from_result import write_html_report

    def norm(p):
        return re.sub(r'content="cupel_np report from-[a-z]+"', "", p.read_text())

    res = c.sweep(
        c.ItemTable.from_parquet(d, set_column="session_id"),
        c.ContextBudget(8000, 6000),  # the CLI run's budget
        [(p, c.preset(p)) for p in ("chat", "rag", "long_running")],
    )
    p_mem = write_html_report(res, tmp_path / "page", title="T")
    assert norm(write_dir_report(tmp_path / "dk", title="T")) == norm(p_mem)


def test_task_restores_input_order_whatever_the_row_order(tmp_path, sample):
    """A partition whose rows arrive in any order (a shuffle may interleave them) is swept in
    input-row order: same parts as the ordered partition."""
    import pandas as pd

    from cupel_np.model.grid import as_variants

    t = sample.slice(0, 1500)
    t = t.append_column(cdask.ROW, pa.array(np.arange(100, 100 + t.num_rows, dtype=np.int64)))
    vs = as_variants(VARIANTS, BUDGET, allow_budget=True)
    ordered = t.to_pandas(types_mapper=pd.ArrowDtype)
    mixed = t.take(pa.array(np.random.default_rng(2).permutation(t.num_rows))).to_pandas(types_mapper=pd.ArrowDtype)
    a = cdask._run_partition(ordered, 0, BUDGET, vs, "session_id", "raise", str(tmp_path / "a"))
    b = cdask._run_partition(mixed, 0, BUDGET, vs, "session_id", "raise", str(tmp_path / "b"))
    assert (a["rows"], a["sets"], a["swing"]) == (b["rows"], b["sets"], b["swing"]) == (1500, a["sets"], a["swing"])
    for name in ("items", "diffs", "variants"):
        x = pq.read_table(tmp_path / "a" / name / "part-00000.parquet")
        y = pq.read_table(tmp_path / "b" / name / "part-00000.parquet")
        assert x.equals(y), name
    assert pq.read_table(tmp_path / "a" / "items").column("input_row").to_pylist() == list(range(100, 1600))


def test_tasks_run_the_engine_on_their_workers_share(client):
    # a task's sweep uses its worker's thread count, never the machine's cores on top of
    # Dask's own worker threads
    from distributed import Client, LocalCluster

    assert client.submit(cdask.worker_threads, pure=False).result() == 1
    with (
        LocalCluster(processes=False, n_workers=1, threads_per_worker=3, dashboard_address=":0") as lc,
        Client(lc) as two,
    ):
        assert two.submit(cdask.worker_threads, pure=False).result() == 3
    assert cdask.worker_threads() == 1  # outside any worker


def _summary_task(i):
    return {"rows": i}


def test_gather_raises_when_fetching_a_result_fails_instead_of_waiting_forever(client, monkeypatch):
    """A CI run hung for good in a Dask sweep: fetching one task's result failed inside the
    client (an AssertionError in Tornado's stream write), ``as_completed(with_results=True)``
    sent that to the event loop's log, and the task never came out of the iterator. Now the
    first fetch that fails raises in the sweep's thread (and the others are fetched as usual)."""
    import threading

    import dask

    from cupel_np.io.dask import _gather

    futures = client.compute([dask.delayed(_summary_task, pure=False)(i) for i in range(4)])
    assert sorted(r["rows"] for r in _gather(client, futures, False)) == [0, 1, 2, 3]

    real = client._gather
    calls = []

    async def failing_once(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise AssertionError("write buffer")
        return await real(*args, **kwargs)

    monkeypatch.setattr(client, "_gather", failing_once)
    futures = client.compute([dask.delayed(_summary_task, pure=False)(i) for i in range(4)])
    outcome: list = []

    def run():
        try:
            outcome.append(_gather(client, futures, False))
        except AssertionError as e:
            outcome.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(60)
    assert not t.is_alive(), "the gather is still waiting"
    assert len(outcome) == 1 and isinstance(outcome[0], AssertionError), outcome
