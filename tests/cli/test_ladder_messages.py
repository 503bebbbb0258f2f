"""``cupel-np budget --ladder`` errors in the command's words (new-user pass, issue 26.17): a
value starting with '-' gets the ``=`` form, a ladder the geometric spacing cannot start names
``--ladder`` and the fix, and an output reserve over LO names ``--output-reserve``, never the
Python function (``budget_ladder: ...``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cupel_np import cli

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample_sessions.parquet"


def _err(capsys, *argv) -> tuple[int, str]:
    try:
        code = cli.main(["budget", str(SAMPLE), "--preset", "chat", "--set-column", "session_id", *argv])
    except SystemExit as e:  # argparse's own errors
        code = int(e.code or 0)
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, want",
    [
        (["--ladder", "-5:2000:3"], "expected one argument (a value that starts with '-' is given as --ladder=VALUE)"),
        (["--ladder=-5:2000:3"], "--ladder -5:2000:3: LO is the smallest budget"),
        (["--ladder=0:2000:3"], "--ladder 0:2000:3: geometric spacing needs lo >= 1, got 0; start at LO >= 1 or pass"),
        (["--ladder=100:2000:3", "--output-reserve", "500"], "--output-reserve 500 must be in [0, LO] of --ladder"),
        (["--ladder=300:200:3"], "--ladder 300:200:3: lo (300) must be < hi (200)"),
    ],
)
def test_ladder_errors_name_the_flag(tmp_path, capsys, argv, want):
    code, err = _err(capsys, *argv, "--out", str(tmp_path / "o"))
    assert code == 2 and want in err, err
    assert "budget_ladder" not in err and not (tmp_path / "o").exists()
