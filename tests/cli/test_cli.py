"""The cupel-np command line: every subcommand, the error paths and the exit codes, and the
HTML report in a real headless browser (skipped where none is installed, failed instead when
the environment variable CI is set: .ci/run installs Debian's chromium)."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cupel_np import cli
from cupel_np.errors import InvalidConfigError

ROOT = Path(__file__).resolve().parents[2]
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


def _summary_table(out, labels, variants_parquet):
    """The printed per-variant table (after its header line) is one row per label, in order,
    holding exactly the totals of variants.parquet. Returns the lines after the table."""
    vt = pq.read_table(variants_parquet).to_pylist()
    lines = out.splitlines()
    start = 1
    header = lines[start]
    assert re.fullmatch(r"variant +included  tokens used target util swing incl\. failed sets", header)
    rows = lines[start + 1 : start + 1 + len(labels)]
    for label, line in zip(labels, rows):
        mine = [r for r in vt if r["variant"] == label]
        ok = [r for r in mine if r["error"] is None]
        used = sum(r["tokens_used"] for r in ok)
        target = sum(r["target_tokens"] for r in ok)
        want = [
            label,
            f"{sum(r['included_count'] for r in ok):,}",
            f"{used:,}",
            f"{100 * used / target:.1f}%",
            f"{sum(r['swing_included'] for r in ok):,}",
            f"{len(mine) - len(ok)}",
        ]
        assert line.split() == want, (line, want)
    return lines[start + 1 + len(labels) :]


def test_demo_writes_parquet_and_report(capsys, tmp_path, small_items):
    code, out, err = run(capsys, "demo", "--items", str(small_items), "--out", str(tmp_path / "d"), "--quiet")
    assert code == 0, err
    first = out.splitlines()[0]
    m = re.fullmatch(
        r"887 items in 30 sessions from (.+); 14 variants \(7 presets x 2 budgets\); "
        r"(\d+) swinging items; \d+\.\ds",
        first,
    )
    assert m and m.group(1) == str(small_items), first
    assert int(m.group(2)) == pq.read_table(tmp_path / "d" / "diffs.parquet").num_rows
    labels = [
        f"{p}|{b}"
        for p in ("chat", "code_review", "rag", "document_qa", "tool_use", "long_running", "debugging")
        for b in ("8000/6000", "4000/3000")
    ]
    rest = _summary_table(out, labels, tmp_path / "d" / "variants.parquet")
    assert rest == [f"wrote diffs.parquet, variants.parquet, items.parquet, report.html to {tmp_path / 'd'}"]
    for name in (
        "items.parquet",
        "diffs.parquet",
        "variants.parquet",
        "report.html",
        "heatmap.svg",
        "tokens.svg",
        "kinds.svg",
    ):
        assert (tmp_path / "d" / name).stat().st_size > 0, name
    html = (tmp_path / "d" / "report.html").read_text()
    assert html.count("data:image/svg+xml;base64,") == 3
    # the page fetches nothing (outside the charts' base64 data, which names the SVG namespace)
    assert "http" not in re.sub(r"data:image/svg\+xml;base64,[A-Za-z0-9+/=]+", "", html).replace("http-equiv", "")


def test_sensitivity_with_presets_and_policy_file(capsys, tmp_path, small_items):
    code, out, err = run(
        capsys,
        "sensitivity",
        str(small_items),
        "--preset",
        "chat",
        "--preset",
        "rag",
        *BUDGET,
        "--set-column",
        "session_id",
        "--out",
        str(tmp_path / "s"),
        "--json",
    )
    assert code == 0, err
    summary = json.loads(out)
    assert summary["variants"] == ["chat", "rag"] and summary["sets"] == 30 and summary["swinging"] > 0
    diffs = pq.read_table(tmp_path / "s" / "diffs.parquet")
    assert diffs.num_rows == summary["swinging"]
    code, out, err = run(
        capsys,
        "sensitivity",
        str(small_items),
        "--policies",
        str(ROOT / "data" / "examples" / "policies.toml"),
        *BUDGET,
        "--set-column",
        "session_id",
        "--out",
        str(tmp_path / "p"),
    )
    assert code == 0, err
    assert re.fullmatch(r"887 items in 30 set\(s\); 4 variants; \d+ swinging items; \d+\.\ds", out.splitlines()[0])
    rest = _summary_table(
        out, ["chat", "recent-trusted", "docs-first-knapsack", "tool-quota"], tmp_path / "p" / "variants.parquet"
    )
    assert rest == [f"wrote diffs.parquet, variants.parquet, items.parquet, report.html to {tmp_path / 'p'}"]


def test_sweep_with_grid_file(capsys, tmp_path, small_items):
    code, out, err = run(
        capsys,
        "sweep",
        str(small_items),
        "--grid",
        str(ROOT / "data" / "examples" / "grid.toml"),
        "--out",
        str(tmp_path / "g"),
        "--json",
    )
    assert code == 0, err
    labels = json.loads(out)["variants"]
    assert len(labels) == 16 and "tool_use|recency=1,kind=3|knapsack(100)|4000/3000" in labels


def test_run_prints_included_and_excluded(capsys, small_items):
    code, out, err = run(
        capsys,
        "run",
        str(small_items),
        "--preset",
        "chat",
        *BUDGET,
        "--set-column",
        "session_id",
        "--set",
        "session-0003",
    )
    assert code == 0, err
    text = out.splitlines()
    code, out, err = run(
        capsys,
        "run",
        str(small_items),
        "--preset",
        "chat",
        *BUDGET,
        "--set-column",
        "session_id",
        "--set",
        "session-0003",
        "--json",
    )
    report = json.loads(out)
    assert report["total_candidates"] == len(report["included"]) + len(report["excluded"]) == 44
    inc, exc = report["included"], report["excluded"]
    used = sum(i["item"]["tokens"] for i in inc)
    pinned = sum(i["item"]["tokens"] for i in inc if i["item"]["pinned"])
    assert text[0] == (
        f"included {len(inc)} of 44 items, {used:,} tokens ({pinned:,} pinned + {used - pinned:,} selected; "
        "target 6,000, 5,818 of it left for selection after pinned items and reserves)"
    )
    # one line per included item (placed order), then one per excluded item, as in the JSON
    assert len(text) == 1 + len(inc) + len(exc)
    for k, (line, i) in enumerate(zip(text[1:], inc)):
        assert line.split()[:5] == [
            str(k),
            "IN",
            f"{i['score']:.4f}",
            i["reason"]["reason"],
            str(i["item"]["tokens"]),
        ], line
    for line, e in zip(text[1 + len(inc) :], exc):
        fields = {k: v for k, v in e["reason"].items() if k != "reason"}
        assert line.split()[:4] == ["OUT", f"{e['score']:.4f}", e["reason"]["reason"], str(e["item"]["tokens"])], line
        assert line.endswith("  (" + ", ".join(f"{k}={v}" for k, v in fields.items()) + ")"), line


def test_presets_and_validate(capsys, tmp_path, small_items):
    code, out, _ = run(capsys, "presets")
    assert code == 0
    names = [line.split()[0] for line in out.splitlines() if line and not line.startswith(" ")]
    assert names == ["chat", "code_review", "rag", "document_qa", "tool_use", "long_running", "debugging"]
    assert (
        "document_qa   kind×2, reflexive×2, priority×1          knapsack(bucket 100) "
        "u_shaped       dedup=True overflow=throw"
    ) in out.splitlines()
    code, out, _ = run(capsys, "presets", "--json")
    assert json.loads(out)["rag"]["placer"] == "u_shaped"
    code, out, _ = run(capsys, "validate", str(small_items), "--set-column", "session_id")
    t = pq.read_table(small_items)
    n_neg = sum(1 for v in t.column("tokens").to_pylist() if v < 0)
    n_pinned = sum(1 for v in t.column("pinned").to_pylist() if v)
    assert code == 0
    assert out == (
        f"{small_items}: ok — 887 rows, 30 set(s), {n_neg} negative-token rows (will be excluded), {n_pinned} pinned\n"
    )
    bad = tmp_path / "bad.parquet"
    pq.write_table(
        pa.table({"content": ["a", "", "c", None], "tokens": [1, 2, None, 4], "kind": ["x", " ", "y", "z"]}), bad
    )
    code, out, _ = run(capsys, "validate", str(bad))
    assert code == 2
    assert "column 'content': empty string at row 1" in out
    assert "column 'content': null at row 3" in out
    assert "column 'tokens': null at row 2" in out
    assert "column 'kind': empty or whitespace-only at row 1 (' ')" in out


def test_conformance_subcommand(capsys):
    code, out, _ = run(capsys, "conformance", str(ROOT / "tests" / "vectors"))
    assert code == 0 and out.strip().endswith("passed, 0 failed")


@pytest.mark.parametrize(
    "argv, message",
    [
        (["run", "nope.parquet", "--preset", "chat", *BUDGET], "items file not found: nope.parquet"),
        (["run", "SAMPLE", "--preset", "nope", *BUDGET], "unknown preset 'nope'"),
        (
            ["run", "SAMPLE", "--preset", "chat", "--max-tokens", "10", "--target-tokens", "20"],
            "--target-tokens (20) must be <= --max-tokens (10)",
        ),
        (["run", "SAMPLE", "--preset", "chat", *BUDGET, "--set-column", "session_id"], "choose one with --set KEY"),
        (["sensitivity", "SAMPLE", "--preset", "chat", *BUDGET, "--out", "x"], "at least 2 variants"),
        (["sweep", "SAMPLE", "--grid", "BADGRID", "--out", "x"], "unknown key 'colour' in a grid file"),
        (["run", "JUNK", "--preset", "chat", *BUDGET], "cannot read Parquet file"),
        (["run", "SAMPLE", "--policy", "BADPOLICY", *BUDGET], "malformed policy JSON"),
    ],
)
def test_bad_input_is_one_line_exit_2_no_traceback(capsys, tmp_path, argv, message, small_items):
    (tmp_path / "grid.toml").write_text('colour = "red"\npresets = ["chat"]\n')
    (tmp_path / "junk.parquet").write_bytes(b"PAR1 not really")
    (tmp_path / "policy.json").write_text("{ nope")
    subst = {
        "SAMPLE": str(small_items),
        "BADGRID": str(tmp_path / "grid.toml"),
        "JUNK": str(tmp_path / "junk.parquet"),
        "BADPOLICY": str(tmp_path / "policy.json"),
    }
    code, out, err = run(capsys, *[subst.get(a, a) for a in argv])
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("cupel-np: error: ") and message in lines[0], err
    assert "Traceback" not in err


def test_usage_errors_and_help():
    r = subprocess.run([sys.executable, "-m", "cupel_np", "run"], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.startswith("usage: cupel-np run [-h]")
    assert r.stderr.splitlines()[-1] == (
        "cupel-np run: error: the following arguments are required: items, --max-tokens, --target-tokens"
    )
    r = subprocess.run([sys.executable, "-m", "cupel_np", "sweep", "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("usage: cupel-np sweep")
    assert re.search(r"^  --grid GRID\b", r.stdout, re.M), r.stdout


def test_debug_shows_traceback(capsys, tmp_path):
    # --debug lets the error escape (its traceback is printed) instead of the one-line message
    with pytest.raises(InvalidConfigError, match=r"^items file not found: .*nope\.parquet$"):
        cli.main(["run", str(tmp_path / "nope.parquet"), "--preset", "chat", *BUDGET, "--debug"])


def test_internal_error_is_exit_1(capsys, monkeypatch, small_items):
    import cupel_np.analysis.pipeline as pl

    def boom(*a, **k):
        raise RuntimeError("kaboom")

    monkeypatch.setattr(pl.Pipeline, "dry_run", boom)
    code, out, err = run(
        capsys,
        "run",
        str(small_items),
        "--preset",
        "chat",
        *BUDGET,
        "--set-column",
        "session_id",
        "--set",
        "session-0001",
    )
    assert code == 1 and "internal error: RuntimeError: kaboom" in err


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def test_report_renders_in_headless_chromium(tmp_path, small_items):
    if CHROMIUM is None:
        message = "no headless Chromium installed (Debian package 'chromium')"
        if os.environ.get("CI"):
            pytest.fail(f"{message}; CI must run this test (.ci/run installs it)")
        pytest.skip(message)
    assert cli.main(["demo", "--items", str(small_items), "--out", str(tmp_path / "d"), "--quiet"]) == 0
    page = (tmp_path / "d" / "report.html").resolve()
    shot = tmp_path / "shot.png"
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--window-size=1280,2000",
    ]
    r = subprocess.run(
        [CHROMIUM, *flags, f"--screenshot={shot}", page.as_uri()], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert shot.stat().st_size > 50_000  # a rendered page with images, not a blank one
    r = subprocess.run([CHROMIUM, *flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    dom = r.stdout
    assert "Swinging items" in dom and dom.count("<img") == 3 and "Top swinging items" in dom


def test_closed_stdout_pipe_is_quiet(tmp_path):
    # `cupel-np presets --json | head -1`: the reader is gone; no error line, SIGPIPE status
    import os as _os
    import subprocess
    import sys as _sys

    read_end, write_end = _os.pipe()
    _os.close(read_end)  # every write now fails with EPIPE
    err_path = tmp_path / "stderr.txt"
    with open(err_path, "wb") as err:
        rc = subprocess.call(
            [_sys.executable, "-m", "cupel_np", "presets", "--json"], stdout=write_end, stderr=err, timeout=120
        )
    _os.close(write_end)
    assert rc == 141
    assert err_path.read_text() == ""


def test_check_subcommand_is_registered(capsys):
    """`cupel-np check` (cupel_np/cli/check.py; its behaviour is tested in test_cli_check.py)."""
    with pytest.raises(SystemExit) as ei:
        cli.main(["check", "--help"])
    assert ei.value.code == 0
    out = capsys.readouterr().out
    for opt in ("--checks", "--set-column", "--junit", "--max-rows", "--memory-limit", "--chunk-rows"):
        assert opt in out
    with pytest.raises(SystemExit) as ei:  # argparse: a missing required option is usage error 2
        cli.main(["check", str(SAMPLE)])
    assert ei.value.code == 2 and "--checks" in capsys.readouterr().err
