"""An output directory that cannot be created is a user error naming it as the output
directory (new-user pass of issue 26: ``--out /proc/x`` said only "[Errno 2] No such file or
directory: '/proc/x'")."""

from __future__ import annotations

from pathlib import Path

import pytest

from cupel_np import cli
from cupel_np.errors import InvalidConfigError
from cupel_np.io.outdir import claim_out_dir

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample_sessions.parquet"


def test_claim_names_the_output_directory(tmp_path):
    (tmp_path / "f").write_text("x", encoding="utf-8")
    with pytest.raises(InvalidConfigError, match="cannot create the output directory .*f/sub"):
        claim_out_dir(tmp_path / "f" / "sub")


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs /proc")
def test_cli_out_under_proc(tmp_path, capsys):
    argv = ["budget", str(SAMPLE), "--preset", "chat", "--ladder", "500:2000:3", "--set-column", "session_id"]
    assert cli.main([*argv, "--out", "/proc/cupel-np-cannot-be-here"]) == 2
    err = capsys.readouterr().err
    assert "cannot create the output directory /proc/cupel-np-cannot-be-here" in err, err
