"""Outputs can be trusted (issues 26 and 27): a corrupted manifest is a clear error, a replaced
run is a swap, an interrupted run never looks complete, failures are counted per variant."""

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cupel_np import cli

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "data" / "sample_sessions.parquet"
CLI_BUDGET = ["--max-tokens", "8000", "--target-tokens", "6000", "--set-column", "session_id", "--quiet"]


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """6 sessions of the sample corpus, contiguous by session."""
    t = pq.read_table(SAMPLE)
    keys = t.column("session_id").to_pylist()
    keep = [i for i, k in enumerate(keys) if int(k.split("-")[1]) < 6]
    path = tmp_path_factory.mktemp("items") / "items.parquet"
    pq.write_table(t.take(pa.array(keep)), path, row_group_size=200)
    return path


def _sens(small, out, *extra):
    return ["sensitivity", str(small), "--preset", "chat", "--preset", "rag", *CLI_BUDGET, "--out", str(out), *extra]


@pytest.fixture(scope="module")
def streamed(small, tmp_path_factory):
    out = tmp_path_factory.mktemp("streamed") / "out"
    assert cli.main(_sens(small, out, "--chunk-rows", "300")) == 0
    return out


@pytest.mark.parametrize(
    "text",
    [
        "{not json",
        "[1, 2]",
        json.dumps({"kind": "sweep-streamed", "variants": "chat"}),
        json.dumps({"kind": "sweep-streamed", "variants": []}),
        json.dumps({"kind": "sweep-streamed", "variants": [{"name": "chat"}]}),
        json.dumps({"kind": "sweep-streamed", "variants": [{"label": "chat"}], "set_column": 3}),
    ],
)
def test_report_on_a_corrupted_manifest_is_a_clear_error(tmp_path, streamed, text, capsys):
    import shutil

    out = tmp_path / "copy"
    shutil.copytree(streamed, out)
    (out / "manifest.json").write_text(text)
    capsys.readouterr()
    assert cli.main(["report", str(out), "--overwrite"]) == 2
    err = capsys.readouterr().err
    assert "manifest.json is corrupt" in err and "internal error" not in err


def test_import_out_a_directory_names_it_not_a_temp_file(tmp_path, capsys):
    src = tmp_path / "chat.jsonl"
    src.write_text(json.dumps({"messages": [{"role": "user", "content": "hello"}]}) + "\n")
    d = tmp_path / "outdir"
    d.mkdir()
    assert cli.main(["import", "openai", str(src), "--out", str(d)]) == 2
    err = capsys.readouterr().err
    assert str(d) in err and ".tmp" not in err
    assert list(tmp_path.glob(".*.tmp")) == []


def test_a_directory_with_one_bad_file_names_it(tmp_path, capsys):
    d = tmp_path / "parts"
    d.mkdir()
    ok = {"content": ["a", "b"], "tokens": [1, 2], "session_id": ["s", "s"]}
    pq.write_table(pa.table(ok), d / "part-0.parquet")
    pq.write_table(pa.table(ok), d / "part-1.parquet")
    bad = {"content": [1, 2], "tokens": [1, 2], "session_id": ["t", "t"]}
    pq.write_table(pa.table(bad), d / "part-2.parquet")
    code = cli.main(
        ["sensitivity", str(d), "--preset", "chat", "--preset", "rag", *CLI_BUDGET, "--out", str(tmp_path / "o")]
    )
    err = capsys.readouterr().err
    assert code == 2 and "part-2.parquet" in err and "'content'" in err, err


@pytest.mark.parametrize("stream", [[], ["--chunk-rows", "300"]], ids=["in-memory", "streamed"])
def test_every_cell_failed_is_not_a_green_run(tmp_path, stream, capsys):
    t = pq.read_table(SAMPLE).slice(0, 400)
    # the pinned items alone are over the budget in every set: every (variant, set) cell fails
    t = t.set_column(t.schema.get_field_index("tokens"), "tokens", pa.array([5000] * t.num_rows, pa.int64()))
    if "pinned" in t.schema.names:
        t = t.drop_columns(["pinned"])
    t = t.append_column("pinned", pa.array([True] * t.num_rows))
    f = tmp_path / "items.parquet"
    pq.write_table(t, f)
    code = cli.main(_sens(f, tmp_path / "o", *stream))
    io = capsys.readouterr()
    assert code == 2, io
    assert "every (variant, set) cell failed" in io.err
    chat = [l for l in io.out.splitlines() if " x variant 'chat'" in l]
    rag = [l for l in io.out.splitlines() if " x variant 'rag'" in l]
    assert chat and rag  # one count per variant, never one count over both


def _snapshot(out: Path) -> dict:
    return {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}


def test_overwrite_is_a_swap_a_failed_run_keeps_the_old_results(tmp_path, small, capsys):
    out = tmp_path / "ow"
    assert cli.main(_sens(small, out)) == 0
    before = _snapshot(out)
    assert json.loads(before["manifest.json"])["complete"] is True
    capsys.readouterr()
    # a bad input: the old code removed the previous results before reading anything
    assert cli.main(_sens(tmp_path / "missing.parquet", out, "--overwrite")) == 2
    err = capsys.readouterr().err
    assert "previous results in" in err and "were kept" in err
    assert _snapshot(out) == before
    assert not list(out.glob(".cupel-staging-*")) and not list(out.glob(".*.tmp"))
    # a good run replaces them; what it prints names --out, never the staging directory
    assert cli.main(_sens(small, out, "--overwrite", "--chunk-rows", "300")) == 0
    io = capsys.readouterr()
    assert ".cupel-staging" not in io.out and str(out.resolve()) in io.out
    assert not list(out.glob(".cupel-staging-*"))
    m = json.loads((out / "manifest.json").read_text())
    assert m["kind"] == "sweep-streamed" and m["complete"] is True
    assert (
        _snapshot(out)["items.parquet"] != before["items.parquet"]
        or m["run_id"] != json.loads(before["manifest.json"])["run_id"]
    )


@pytest.mark.parametrize("stream", [[], ["--chunk-rows", "300"]], ids=["in-memory", "streamed"])
def test_an_interrupted_run_never_looks_complete(tmp_path, small, stream, monkeypatch, capsys):
    import cupel_np.cli.sweeps as sweeps

    def ctrl_c(*a, **k):  # Ctrl-C after the Parquet files, before the page
        raise KeyboardInterrupt

    monkeypatch.setattr(sweeps, "write_dir_report" if stream else "write_html_report", ctrl_c)
    out = tmp_path / "int"
    assert cli.main(_sens(small, out, *stream)) == 130
    assert (out / "variants.parquet").is_file()
    assert json.loads((out / "manifest.json").read_text())["complete"] is False
    monkeypatch.undo()
    capsys.readouterr()
    assert cli.main(["report", str(out)]) == 2
    err = capsys.readouterr().err
    assert "interrupted run" in err and "--overwrite" in err
    assert cli.main(_sens(small, out)) == 2
    err = capsys.readouterr().err
    assert "interrupted run" in err and "--overwrite" in err
    assert cli.main(_sens(small, out, "--overwrite")) == 0
    assert json.loads((out / "manifest.json").read_text())["complete"] is True


def _strict(text: str):
    def refuse(c):
        raise AssertionError(f"non-standard JSON constant {c}")

    return json.loads(text, parse_constant=refuse)


def test_the_json_writer_never_writes_nan_or_infinity():
    import numpy as np

    from cupel_np._files import dumps_json

    doc = {"a": float("nan"), "b": [float("inf"), np.float64("-inf"), 1.5], "c": {"d": np.float32("nan")}}
    assert _strict(dumps_json(doc)) == {"a": None, "b": [None, None, 1.5], "c": {"d": None}}


@pytest.mark.parametrize("value", [False, None], ids=["all-false", "all-null"])
def test_tune_without_a_relevant_item_stops_before_writing_winners(tmp_path, value, capsys):
    from cupel_np.tuning.synthetic import trust_corpus

    t = trust_corpus(n_sets=12, items_per_set=10, seed=3)
    t = t.set_column(t.schema.get_field_index("relevant"), "relevant", pa.array([value] * t.num_rows, pa.bool_()))
    items = tmp_path / "items.parquet"
    pq.write_table(t, items)
    out = tmp_path / "out"
    space = ROOT / "data" / "examples" / "tune_space.toml"
    argv = ["tune", str(items), "--space", str(space), "--label-column", "relevant", "--set-column", "session_id"]
    argv += ["--trials", "4", "--batch-size", "2", "--out", str(out), "--json", "--quiet"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "no relevant items" in err
    assert not list(out.glob("best-*.toml")) and not (out / "summary.json").exists()


def test_sensitivity_json_outcomes_are_strict_json(tmp_path, small, capsys):
    t = pq.read_table(small)
    t = t.append_column("rel", pa.array([False] * t.num_rows))
    f = tmp_path / "items.parquet"
    pq.write_table(t, f)
    assert cli.main(_sens(f, tmp_path / "o", "--label-column", "rel", "--json")) == 0
    _strict(capsys.readouterr().out)
    _strict((tmp_path / "o" / "manifest.json").read_text())


CHECKS = """
set_column = "session_id"
presets = ["chat", "rag"]
[budget]
max_tokens = 8000
target_tokens = 6000
output_reserve = 1000

[[check]]
name = "memories never dropped \\u001b[31m\\u0007"
variant = "chat"
assert = "have_no_exclusions_for_kind"
kind = "Memory"
"""


def test_junit_xml_with_control_characters_parses_and_names_its_path(tmp_path, small, capsys):
    import xml.etree.ElementTree as ET

    t = pq.read_table(small)
    keys = [k + "\x1b\x00" for k in t.column("session_id").to_pylist()]
    t = t.set_column(t.schema.get_field_index("session_id"), "session_id", pa.array(keys))
    f = tmp_path / "items.parquet"
    pq.write_table(t, f)
    checks = tmp_path / "checks.toml"
    checks.write_text(CHECKS)
    junit = tmp_path / "sub" / "r.xml"  # a missing parent directory is created, as for import --out
    assert cli.main(["check", str(f), "--checks", str(checks), "--junit", str(junit)]) == 1
    root = ET.parse(junit).getroot()  # the old code wrote the raw control characters: unparseable
    case = root.find("testsuite/testcase")
    assert case.get("name") == "memories never dropped \\x1b[31m\\x07"
    assert "\\x1b\\x00" in case.find("failure").text
    assert not list(junit.parent.glob(".*.tmp"))
    capsys.readouterr()
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code = cli.main(["check", str(f), "--checks", str(checks), "--junit", str(blocker / "r.xml")])
    err = capsys.readouterr().err
    assert code == 2 and "--junit" in err and str(blocker / "r.xml") in err, err


def test_variant_labels_that_look_like_field_paths_build_every_page(tmp_path, small, capsys):
    pol = tmp_path / "p.toml"
    pol.write_text('[[variants]]\nlabel = ".hidden"\npreset = "chat"\n[[variants]]\nlabel = "../x"\npreset = "rag"\n')
    out = tmp_path / "o"
    argv = ["sensitivity", str(small), "--policies", str(pol), *CLI_BUDGET, "--out", str(out), "--chunk-rows", "300"]
    assert cli.main(argv) == 0, capsys.readouterr().err
    assert cli.main(["report", str(out), "--overwrite"]) == 0, capsys.readouterr().err
    assert ".hidden" in (out / "report.html").read_text()


@pytest.mark.parametrize("stream", [[], ["--chunk-rows", "300"]], ids=["in-memory", "streamed"])
def test_sigkill_during_an_overwrite_never_loses_or_fakes_results(tmp_path, small, stream):
    """SIGKILL an ``--overwrite`` run at several moments: --out holds either the previous run,
    byte for byte, or the new run complete; never a temp file or a half-replaced run."""
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "ow"
    assert cli.main(_sens(small, out)) == 0
    before = _snapshot(out)
    argv = [sys.executable, "-m", "cupel_np", *_sens(small, out, "--overwrite", *stream)]
    for delay in (0.5, 2.0, 4.0, 7.0):
        p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        p.send_signal(signal.SIGKILL)
        p.wait()
        assert not list(out.glob(".*.tmp"))  # temp files only ever inside the staging directory
        now = _snapshot(out)
        m = json.loads(now["manifest.json"])
        if now == before:
            continue  # killed before the swap: the previous results, untouched
        assert m["complete"] is True and all((out / n).exists() for n in m["outputs"])
        before = now  # the run finished: the new results are the ones to keep
