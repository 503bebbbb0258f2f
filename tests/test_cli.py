"""The cupel-np command line: every subcommand, the error paths and the exit codes, and the
HTML report in a real headless browser (skipped where none is installed)."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cupel_np import cli

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "sample_sessions.parquet"
BUDGET = ["--max-tokens", "8000", "--target-tokens", "6000", "--output-reserve", "1000"]


@pytest.fixture(scope="module")
def small_items(tmp_path_factory):
    """30 sessions of the sample corpus (keeps the CLI tests quick)."""
    t = pq.read_table(SAMPLE)
    keys = t.column("session_id").to_pylist()
    keep = [i for i, k in enumerate(keys) if int(k.split("-")[1]) < 30]
    path = tmp_path_factory.mktemp("items") / "items.parquet"
    pq.write_table(t.take(pa.array(keep)), path)
    return path


def run(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_demo_writes_parquet_and_report(capsys, tmp_path, small_items):
    code, out, err = run(capsys, "demo", "--items", str(small_items), "--out", str(tmp_path / "d"), "--quiet")
    assert code == 0, err
    assert "chat|8000/6000" in out and "utilization" in out
    for name in ("items.parquet", "diffs.parquet", "variants.parquet", "report.html", "heatmap.png", "tokens.png", "kinds.png"):
        assert (tmp_path / "d" / name).stat().st_size > 0, name
    html = (tmp_path / "d" / "report.html").read_text()
    assert "data:image/png;base64," in html and "http" not in html.replace("http-equiv", "")


def test_sensitivity_with_presets_and_policy_file(capsys, tmp_path, small_items):
    code, out, err = run(capsys, "sensitivity", str(small_items), "--preset", "chat", "--preset", "rag", *BUDGET,
                         "--set-column", "session_id", "--out", str(tmp_path / "s"), "--json")
    assert code == 0, err
    summary = json.loads(out)
    assert summary["variants"] == ["chat", "rag"] and summary["sets"] == 30 and summary["swinging"] > 0
    diffs = pq.read_table(tmp_path / "s" / "diffs.parquet")
    assert diffs.num_rows == summary["swinging"]
    code, out, err = run(capsys, "sensitivity", str(small_items), "--policies", str(ROOT / "data" / "examples" / "policies.toml"),
                         *BUDGET, "--set-column", "session_id", "--out", str(tmp_path / "p"))
    assert code == 0, err
    assert "recent-trusted" in out and "tool-quota" in out


def test_sweep_with_grid_file(capsys, tmp_path, small_items):
    code, out, err = run(capsys, "sweep", str(small_items), "--grid", str(ROOT / "data" / "examples" / "grid.toml"),
                         "--out", str(tmp_path / "g"), "--json")
    assert code == 0, err
    labels = json.loads(out)["variants"]
    assert len(labels) == 16 and "tool_use|recency=1,kind=3|knapsack(100)|4000/3000" in labels


def test_run_prints_included_and_excluded(capsys, small_items):
    code, out, err = run(capsys, "run", str(small_items), "--preset", "chat", *BUDGET,
                         "--set-column", "session_id", "--set", "session-0003")
    assert code == 0, err
    assert " IN " in out and " OUT " in out and "BudgetExceeded" in out
    code, out, err = run(capsys, "run", str(small_items), "--preset", "chat", *BUDGET,
                         "--set-column", "session_id", "--set", "session-0003", "--json")
    report = json.loads(out)
    assert report["total_candidates"] == len(report["included"]) + len(report["excluded"])


def test_presets_and_validate(capsys, tmp_path, small_items):
    code, out, _ = run(capsys, "presets")
    assert code == 0 and "document_qa" in out and "knapsack(bucket 100)" in out
    code, out, _ = run(capsys, "presets", "--json")
    assert json.loads(out)["rag"]["placer"] == "u_shaped"
    code, out, _ = run(capsys, "validate", str(small_items), "--set-column", "session_id")
    assert code == 0 and ": ok" in out
    bad = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"content": ["a", "", "c", None], "tokens": [1, 2, None, 4],
                             "kind": ["x", " ", "y", "z"]}), bad)
    code, out, _ = run(capsys, "validate", str(bad))
    assert code == 2
    assert "column 'content': empty string at row 1" in out
    assert "column 'content': null at row 3" in out
    assert "column 'tokens': null at row 2" in out
    assert "column 'kind': empty or whitespace-only at row 1 (' ')" in out


def test_conformance_subcommand(capsys):
    code, out, _ = run(capsys, "conformance", str(ROOT / "tests" / "vectors"))
    assert code == 0 and out.strip().endswith("passed, 0 failed")


@pytest.mark.parametrize("argv, message", [
    (["run", "nope.parquet", "--preset", "chat", *BUDGET], "items file not found: nope.parquet"),
    (["run", "SAMPLE", "--preset", "nope", *BUDGET], "unknown preset 'nope'"),
    (["run", "SAMPLE", "--preset", "chat", "--max-tokens", "10", "--target-tokens", "20"], "target_tokens (20) must be <= max_tokens (10)"),
    (["run", "SAMPLE", "--preset", "chat", *BUDGET, "--set-column", "session_id"], "choose one with --set KEY"),
    (["sensitivity", "SAMPLE", "--preset", "chat", *BUDGET, "--out", "x"], "at least 2 variants"),
    (["sweep", "SAMPLE", "--grid", "BADGRID", "--out", "x"], "unknown grid key(s) ['colour']"),
    (["run", "JUNK", "--preset", "chat", *BUDGET], "cannot read Parquet file"),
    (["run", "SAMPLE", "--policy", "BADPOLICY", *BUDGET], "malformed policy JSON"),
])
def test_bad_input_is_one_line_exit_2_no_traceback(capsys, tmp_path, argv, message, small_items):
    (tmp_path / "grid.toml").write_text('colour = "red"\npresets = ["chat"]\n')
    (tmp_path / "junk.parquet").write_bytes(b"PAR1 not really")
    (tmp_path / "policy.json").write_text("{ nope")
    subst = {"SAMPLE": str(small_items), "BADGRID": str(tmp_path / "grid.toml"),
             "JUNK": str(tmp_path / "junk.parquet"), "BADPOLICY": str(tmp_path / "policy.json")}
    code, out, err = run(capsys, *[subst.get(a, a) for a in argv])
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("cupel-np: error: ") and message in lines[0], err
    assert "Traceback" not in err


def test_usage_errors_and_help():
    r = subprocess.run([sys.executable, "-m", "cupel_np", "run"], capture_output=True, text=True)
    assert r.returncode == 2 and "usage:" in r.stderr
    r = subprocess.run([sys.executable, "-m", "cupel_np", "sweep", "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "--grid" in r.stdout


def test_debug_shows_traceback(capsys, tmp_path):
    with pytest.raises(Exception):
        cli.main(["run", str(tmp_path / "nope.parquet"), "--preset", "chat", *BUDGET, "--debug"])


def test_internal_error_is_exit_1(capsys, monkeypatch, small_items):
    import cupel_np.pipeline as pl

    def boom(*a, **k):
        raise RuntimeError("kaboom")

    monkeypatch.setattr(pl.Pipeline, "dry_run", boom)
    code, out, err = run(capsys, "run", str(small_items), "--preset", "chat", *BUDGET,
                         "--set-column", "session_id", "--set", "session-0001")
    assert code == 1 and "internal error: RuntimeError: kaboom" in err


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.mark.skipif(CHROMIUM is None, reason="no headless Chromium installed (Debian package 'chromium')")
def test_report_renders_in_headless_chromium(tmp_path, small_items):
    assert cli.main(["demo", "--items", str(small_items), "--out", str(tmp_path / "d"), "--quiet"]) == 0
    page = (tmp_path / "d" / "report.html").resolve()
    shot = tmp_path / "shot.png"
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1280,2000"]
    r = subprocess.run([CHROMIUM, *flags, f"--screenshot={shot}", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert shot.stat().st_size > 50_000  # a rendered page with images, not a blank one
    r = subprocess.run([CHROMIUM, *flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    dom = r.stdout
    assert "Swinging items" in dom and dom.count("<img") == 3 and "Top swinging items" in dom
