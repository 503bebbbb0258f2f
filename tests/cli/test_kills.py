"""SIGKILL at several moments of ``import`` and ``check --junit`` (issue 27: like the
sensitivity one in test_trust_outputs.py): the previous output stays readable and whole, or
the new one is complete; never a temp file or a file that looks complete but is not."""

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
