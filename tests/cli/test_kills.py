"""SIGKILL at several moments of ``import`` and ``check --junit``, and while ``tune --overwrite``
writes its outputs (issue 27; like the sensitivity ones in test_trust_outputs.py): the previous
output stays readable and whole, or the new one is complete; never a temp file or a file that
looks complete but is not."""

import json
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import pyarrow.parquet as pq

from cupel_np import cli
from cupel_np.data import sample_path

DELAYS = (0.5, 1.5, 3.0, 5.0, 8.0)


def _kill_after(argv: list[str], delay: float) -> None:
    p = subprocess.Popen(
        [sys.executable, "-m", "cupel_np", *argv], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    time.sleep(delay)
    p.send_signal(signal.SIGKILL)
    p.wait()


def test_sigkill_during_an_import_keeps_the_previous_file_whole(tmp_path, capsys):
    src = tmp_path / "sg.json"
    convs = [
        {
            "id": str(i),
            "conversations": [{"from": "human", "value": f"q {i} " * 5}, {"from": "gpt", "value": f"a {i} " * 8}],
        }
        for i in range(30_000)
    ]
    src.write_text(json.dumps(convs))
    out = tmp_path / "items.parquet"
    argv = ["import", "sharegpt", str(src), "--out", str(out), "--quiet"]
    assert cli.main(argv) == 0
    capsys.readouterr()
    before = out.read_bytes()
    rows = pq.read_metadata(out).num_rows
    for delay in DELAYS:
        _kill_after(argv, delay)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["items.parquet", "sg.json"]  # no temp file
        now = out.read_bytes()
        if now != before:  # the new import finished: it must be whole
            assert pq.read_metadata(out).num_rows == rows
            before = now


CHECKS = """set_column = "session_id"
[budget]
max_tokens = 8000
target_tokens = 6000
[[variants]]
label = "chat"
preset = "chat"
[[variants]]
label = "rag"
preset = "rag"
[[check]]
assert = "include_item_with_kind"
kind = "SystemPrompt"
"""


def test_sigkill_during_a_check_keeps_the_junit_report_parseable(tmp_path, capsys):
    checks = tmp_path / "checks.toml"
    checks.write_text(CHECKS)
    junit = tmp_path / "r" / "junit.xml"
    argv = ["check", str(sample_path()), "--checks", str(checks), "--junit", str(junit), "--chunk-rows", "500"]
    assert cli.main(argv) in (0, 1)
    capsys.readouterr()
    before = junit.read_bytes()
    for delay in DELAYS:
        _kill_after(argv, delay)
        assert [p.name for p in junit.parent.iterdir()] == ["junit.xml"]  # no temp file
        ET.fromstring(junit.read_bytes())  # whole: the previous report or the new one
        assert junit.read_bytes() == before or ET.fromstring(junit.read_bytes()).find("testsuite") is not None


def _files(out) -> dict:
    return {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}


#: run the CLI, but once the search is done and its Parquet outputs are written, say so
#: (touch argv[1]) and wait to be killed: a kill in the middle of writing the new outputs
_HANG_BEFORE_THE_TUNE_PAGE = """
import sys, time
from pathlib import Path
import cupel_np.tuning.output as output
from cupel_np.cli import main

def hang(*a, **k):
    Path(sys.argv[1]).touch()
    time.sleep(600)

output._report_html = hang
sys.exit(main(sys.argv[2:]))
"""


def test_sigkill_while_tune_overwrite_writes_keeps_the_previous_search(tmp_path, capsys):
    """``tune --overwrite`` killed while it writes its outputs (after the search, before the
    page): --out still holds the previous search byte for byte, and no temp file beside it;
    the next ``--overwrite`` then completes."""
    from cupel_np.tuning.synthetic import trust_corpus

    items = tmp_path / "items.parquet"
    pq.write_table(trust_corpus(n_sets=60, items_per_set=30, seed=3), items)
    space = tmp_path / "space.toml"
    space.write_text(
        "[budget]\nmax_tokens = 1500\n[scorers]\nmax = 2\n"
        "[scorers.recency]\nweight = [0.1, 3.0]\n[scorers.metadata_trust]\nweight = [0.1, 3.0]\n"
        "[slicers.greedy]\n"
    )
    out = tmp_path / "t"
    argv = ["tune", str(items), "--space", str(space), "--label-column", "relevant", "--set-column", "session_id"]
    argv += ["--trials", "16", "--batch-size", "8", "--out", str(out), "--quiet"]
    assert cli.main(argv) == 0, capsys.readouterr().err
    capsys.readouterr()
    before = _files(out)
    assert json.loads(before["manifest.json"])["complete"] is True
    ready = tmp_path / "ready"
    p = subprocess.Popen(
        [sys.executable, "-c", _HANG_BEFORE_THE_TUNE_PAGE, str(ready), *argv, "--overwrite"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 300
        while not ready.exists() and p.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ready.exists(), f"the run ended ({p.returncode}) or timed out before writing its outputs"
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    assert _files(out) == before  # the previous search, untouched
    assert not list(out.glob(".*.tmp"))
    assert cli.main([*argv, "--overwrite"]) == 0
    m = json.loads((out / "manifest.json").read_text())
    assert m["complete"] is True and (out / "report.html").is_file()
    assert not list(out.glob(".cupel-staging-*"))
