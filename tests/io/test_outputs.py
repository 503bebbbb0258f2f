"""Output directories never mix two runs (issue 17.6): every writer refuses a directory holding
another run's outputs unless overwrite, which removes only cupel_np's own files; ``report``
refuses an ambiguous directory and never silently replaces a richer page."""

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import cupel_np as c
from cupel_np import cli
from cupel_np.errors import InvalidConfigError
from cupel_np.io import sweep_parquet, write_sweep
from cupel_np.io.outdir import OUTPUT_NAMES, OutputExistsError, existing_outputs, read_manifest
from cupel_np.report.budget import write_budget_outputs
from cupel_np.report.from_dir import write_dir_report
from cupel_np.report.from_result import write_html_report
from cupel_np.report.sweep_dir import load_sweep_dir

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "data" / "sample_sessions.parquet"
BUDGET = c.ContextBudget(8000, 6000, 1000)
VARIANTS = [("chat", c.preset("chat")), ("rag", c.preset("rag"))]
CLI_BUDGET = ["--max-tokens", "8000", "--target-tokens", "6000", "--set-column", "session_id", "--quiet"]


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """12 sessions of the sample corpus, contiguous by session."""
    t = pq.read_table(SAMPLE)
    keys = t.column("session_id").to_pylist()
    keep = [i for i, k in enumerate(keys) if int(k.split("-")[1]) < 12]
    path = tmp_path_factory.mktemp("items") / "items.parquet"
    pq.write_table(t.take(pa.array(keep)), path, row_group_size=400)
    return path


@pytest.fixture(scope="module")
def results(small):
    t = c.ItemTable.from_parquet(small, set_column="session_id")
    return c.sweep(t, BUDGET, VARIANTS), c.sweep(t, BUDGET, [VARIANTS[1], ("chat", c.preset("chat"))])


def _fake_parts_run(out: Path) -> None:
    """The layout a Dask sweep leaves: part directories and a manifest."""
    for p in ("items", "diffs", "variants"):
        (out / p).mkdir(parents=True)
        (out / p / "part-00000.parquet").write_bytes(b"old")
    (out / "manifest.json").write_text(json.dumps({"kind": "sweep-parts", "run_id": "old", "variants": []}))


def test_in_process_run_into_a_dask_dir_is_refused_then_replaced(tmp_path, results):
    out = tmp_path / "out"
    _fake_parts_run(out)
    (out / "notes.txt").write_text("mine")
    with pytest.raises(OutputExistsError, match=r"already holds a sweep written in parts .*overwrite=True"):
        write_sweep(results[0], out)
    assert (out / "items" / "part-00000.parquet").is_file()  # nothing touched by the refusal
    write_sweep(results[0], out, overwrite=True)
    assert not (out / "items").exists() and not (out / "diffs").exists()
    assert (out / "notes.txt").read_text() == "mine"  # never a file that is not ours
    assert read_manifest(out)["kind"] == "sweep"
    assert load_sweep_dir(out).swing == results[0].n_swing  # the new sweep, not the old one


def test_same_result_page_joins_its_files_another_result_does_not(tmp_path, results):
    out = tmp_path / "out"
    write_sweep(results[0], out)
    write_html_report(results[0], out)  # the same run: allowed
    assert {"report.html", "items.parquet", "manifest.json"} <= {p.name for p in out.iterdir()}
    assert set(read_manifest(out)["outputs"]) >= {"items.parquet", "report.html", "heatmap.svg"}
    with pytest.raises(OutputExistsError):
        write_html_report(results[1], out)
    with pytest.raises(OutputExistsError):
        write_sweep(results[1], out, items=False)  # would leave the first run's items.parquet behind
    write_sweep(results[1], out, items=False, overwrite=True)
    assert not (out / "items.parquet").exists() and not (out / "report.html").exists()


def test_an_earlier_versions_png_charts_are_outputs_an_overwrite_removes(tmp_path, results):
    """Pages wrote PNG charts before they wrote SVG: a directory holding those is another
    run's outputs (refused), and ``overwrite`` removes them rather than leaving stale charts."""
    out = tmp_path / "out"
    out.mkdir()
    for name in ("heatmap.png", "tokens.png", "kinds.png", "utilization.png"):
        (out / name).write_bytes(b"\x89PNG old")
    (out / "notes.txt").write_text("mine")
    with pytest.raises(OutputExistsError, match="heatmap.png"):
        write_html_report(results[0], out)
    write_html_report(results[0], out, overwrite=True)
    assert sorted(p.name for p in out.iterdir()) == [
        "heatmap.svg", "kinds.svg", "manifest.json", "notes.txt", "report.html", "tokens.svg"
    ]  # fmt: skip


def test_a_page_rebuilt_from_outputs_leaves_no_png_chart_of_an_earlier_version(tmp_path, results):
    """``cupel-np report --overwrite`` on a sweep directory an earlier version wrote (its page
    with PNG charts): the new page's SVG charts replace them, none is left stale beside it."""
    out = tmp_path / "out"
    write_sweep(results[0], out)
    for name in ("heatmap.png", "tokens.png", "kinds.png"):
        (out / name).write_bytes(b"\x89PNG old")
    write_dir_report(out, overwrite=True)
    names = {p.name for p in out.iterdir()}
    assert {"heatmap.svg", "tokens.svg", "kinds.svg", "report.html"} <= names
    assert not any(n.endswith(".png") for n in names)


def test_streamed_and_budget_writers_refuse_too(tmp_path, results, small):
    out = tmp_path / "out"
    write_sweep(results[0], out)
    with pytest.raises(OutputExistsError):
        sweep_parquet(small, BUDGET, VARIANTS, out, set_column="session_id", chunk_rows=500)
    tot = sweep_parquet(small, BUDGET, VARIANTS, out, set_column="session_id", chunk_rows=500, overwrite=True)
    assert read_manifest(out)["kind"] == "sweep-streamed" and load_sweep_dir(out).swing == tot["swing"]
    t = c.ItemTable.from_parquet(small, set_column="session_id")
    curves = c.budget_curves(t, [("chat", c.preset("chat"))], c.budget_ladder(2000, 8000, 3))
    with pytest.raises(OutputExistsError):
        write_budget_outputs(curves, out, title="t")
    write_budget_outputs(curves, out, title="t", overwrite=True)
    assert not (out / "items.parquet").exists() and read_manifest(out)["kind"] == "budget"
    with pytest.raises(InvalidConfigError, match="budget simulation, not a sweep"):
        write_dir_report(out)


def test_report_refuses_an_ambiguous_dir(tmp_path, results):
    out = tmp_path / "out"
    write_sweep(results[0], out)
    for p in ("items", "diffs", "variants"):  # another run's parts beside the files
        (out / p).mkdir()
    with pytest.raises(InvalidConfigError, match="ambiguous"):
        write_dir_report(out)


def test_report_never_silently_replaces_the_in_memory_page(tmp_path, results, capsys):
    out = tmp_path / "out"
    write_sweep(results[0], out)
    write_html_report(results[0], out)
    before = (out / "report.html").read_bytes()
    assert cli.main(["report", str(out)]) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert (out / "report.html").read_bytes() == before
    assert cli.main(["report", str(out), "--overwrite"]) == 0
    assert cli.main(["report", str(out)]) == 0  # a page built from the outputs is rebuilt freely


def test_cli_out_refused_before_any_work(tmp_path, small, capsys):
    f = tmp_path / "a-file"
    f.write_text("x")
    # the items do not exist: the error is about --out, so nothing was read first
    code = cli.main(
        ["sensitivity", str(tmp_path / "missing.parquet"), "--preset", "chat", "--preset", "rag"]
        + CLI_BUDGET
        + ["--out", str(f)]
    )
    assert code == 2 and "exists and is not a directory" in capsys.readouterr().err
    code = cli.main(
        [
            "budget",
            str(tmp_path / "missing.parquet"),
            "--preset",
            "chat",
            "--ladder",
            "1000:4000:3",
            "--out",
            str(f),
            "--quiet",
        ]
    )
    assert code == 2 and "exists and is not a directory" in capsys.readouterr().err
    out = tmp_path / "o"
    argv = ["sensitivity", str(small), "--preset", "chat", "--preset", "rag", *CLI_BUDGET, "--out", str(out)]
    assert cli.main(argv) == 0
    capsys.readouterr()
    assert cli.main(argv) == 2 and "--overwrite" in capsys.readouterr().err
    (out / "keep.csv").write_text("k")
    assert cli.main([*argv, "--overwrite", "--chunk-rows", "500"]) == 0
    names = {p.name for p in out.iterdir()}
    assert "keep.csv" in names and read_manifest(out)["kind"] == "sweep-streamed"
    assert all(p.name in OUTPUT_NAMES for p in existing_outputs(out))


def _norm(p: Path) -> str:
    import re

    return re.sub(r'content="cupel_np report from-[a-z]+"', "", p.read_text())


def test_one_page_whatever_the_path(tmp_path, small):
    """The page built from written outputs (in-process files, or streamed in chunks of whole
    sets, with failed cells and duplicate contents) is the in-memory page, byte for byte."""
    t = c.ItemTable.from_parquet(small, set_column="session_id")
    variants = [*VARIANTS, ("tiny", c.preset("code_review"), c.ContextBudget(300, 250))]
    res = c.sweep(t, BUDGET, variants, on_error="collect")
    assert res.failed.any() and res.failed.sum() < res.failed.size  # some cells failed, not all
    write_sweep(res, tmp_path / "mem")
    want = _norm(write_html_report(res, tmp_path / "mem", title="T"))
    assert 'data-sections="start variants agreement by-kind by-source why sets charts"' in want
    (tmp_path / "mem" / "report.html").unlink()
    assert _norm(write_dir_report(tmp_path / "mem", title="T")) == want
    sweep_parquet(
        small, BUDGET, variants, tmp_path / "str", set_column="session_id", chunk_rows=300, on_error="collect"
    )
    assert _norm(write_dir_report(tmp_path / "str", title="T")) == want
    assert {"heatmap.svg", "tokens.svg", "kinds.svg"} <= {p.name for p in (tmp_path / "str").iterdir()}


def test_cli_streamed_run_writes_the_full_page(tmp_path, small, capsys):
    out = tmp_path / "o"
    argv = ["sensitivity", str(small), "--preset", "chat", "--preset", "rag", *CLI_BUDGET, "--out", str(out)]
    assert cli.main([*argv, "--chunk-rows", "300"]) == 0
    page = (out / "report.html").read_text()
    for h in ('id="start"', 'id="agreement-matrix"'.replace("agreement", "agree"), 'id="by-kind"', 'id="by-source"',
              'id="reason-totals"', 'id="swing-table"', 'class="set"', "kind mix per variant"):  # fmt: skip
        assert h in page, h


def test_one_page_without_a_set_column(tmp_path):
    """One unnamed set (no set column): the drill-down keeps its rows on both paths."""
    t = c.ItemTable.from_arrow(pq.read_table(SAMPLE).slice(0, 60).drop_columns(["session_id"]))
    res = c.sweep(t, c.ContextBudget(2000, 1500), VARIANTS)
    assert res.n_swing > 0
    write_sweep(res, tmp_path / "o")
    want = write_html_report(res, tmp_path / "o", title="T")
    text = _norm(want)
    want.unlink()
    assert 'class="set-items"' in text and _norm(write_dir_report(tmp_path / "o", title="T")) == text


def test_one_page_when_the_sets_are_interleaved(tmp_path, small):
    """An in-process sweep of rows whose sets interleave: the items file is read whole, and
    the page is the same."""
    import numpy as np

    t = pq.read_table(small)
    shuffled = t.take(pa.array(np.random.default_rng(3).permutation(t.num_rows)))
    res = c.sweep(c.ItemTable.from_arrow(shuffled, set_column="session_id"), BUDGET, VARIANTS)
    write_sweep(res, tmp_path / "o")
    want = write_html_report(res, tmp_path / "o", title="T")
    text = _norm(want)
    want.unlink()
    assert _norm(write_dir_report(tmp_path / "o", title="T")) == text


def test_the_demo_replaces_its_own_earlier_run_but_nothing_else(tmp_path, small, capsys):
    """Running the demo twice (docs: 'later runs take 2-3 s') works; the demo still refuses a
    directory holding another run's outputs without --overwrite."""
    out = tmp_path / "demo"
    demo = ["demo", "--items", str(small), "--out", str(out), "--quiet"]
    assert cli.main(demo) == 0
    first = read_manifest(out)
    assert first["written_by"] == "demo"
    assert cli.main(demo) == 0  # the earlier demo's outputs are replaced
    second = read_manifest(out)
    assert second["written_by"] == "demo" and second["run_id"] != first["run_id"]
    other = tmp_path / "other"
    _fake_parts_run(other)
    assert cli.main(["demo", "--items", str(small), "--out", str(other), "--quiet"]) == 2
    assert "already holds a sweep written in parts" in capsys.readouterr().err
    assert (other / "items" / "part-00000.parquet").read_bytes() == b"old"


def test_page_from_outputs_follows_at_most_max_sets_sets_whatever_ties(tmp_path, results):
    """Many sets tie on their swing count: the drill-down candidates are cut to max_sets by
    the first input row (not every tied set, which made the page's memory grow with the sets)."""
    from cupel_np.report import from_dir

    out = tmp_path / "o"
    write_sweep(results[0], out)
    vpath, ipath = from_dir._output(out, "variants"), from_dir._output(out, "items")
    labels = [v.label for v in results[0].variants]
    counts, chosen = from_dir._set_stats(vpath, ipath, labels, "session_id", 2)
    assert len(chosen) == min(2, sum(1 for n in counts.values() if n))
    ties = {n for n in counts.values() if n} and len(set(counts.values())) < len(counts)
    assert ties  # the small corpus has tied swing counts, so the cut is exercised
    d = from_dir.dir_page_data(out, max_sets=2)
    assert {s["key"] for s in d.sets} == chosen
