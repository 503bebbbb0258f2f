"""A typo in a preset, set column or label column name gets a "did you mean" from the names
present, in memory and streamed, and a CLI user is not sent to a Python function (new-user
pass of issue 26: "unknown preset 'chta'" listed the presets without naming the close one, and
a mistyped --label-column said "pass the labels from the source table: labels_from(...)")."""

from __future__ import annotations

from pathlib import Path

import pytest

from cupel_np import cli

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample_sessions.parquet"
BUDGET = ["--max-tokens", "2000", "--target-tokens", "1500"]


@pytest.mark.parametrize(
    "argv, want",
    [
        (["--preset", "chta", "--preset", "rag", "--set-column", "session_id"], "(did you mean 'chat'?)"),
        (["--preset", "chat", "--preset", "rag", "--set-column", "sesion_id"], "(did you mean 'session_id'?)"),
        (
            ["--preset", "chat", "--preset", "rag", "--set-column", "sesion_id", "--chunk-rows", "500"],
            "(did you mean 'session_id'?)",
        ),
        (
            ["--preset", "chat", "--preset", "rag", "--set-column", "session_id", "--label-column", "relevnt"],
            "(did you mean 'relevant'?)",
        ),
        (
            ["--preset", "chat", "--preset", "rag", "--set-column", "session_id", "--label-column", "relevnt"]
            + ["--chunk-rows", "500"],
            "(did you mean 'relevant'?)",
        ),
    ],
)
def test_typos_get_a_suggestion(tmp_path, capsys, argv, want):
    code = cli.main(["sensitivity", str(SAMPLE), *argv, *BUDGET, "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and want in err and "labels_from" not in err, err


def test_tune_label_column_typo(tmp_path, capsys):
    space = Path(__file__).resolve().parents[2] / "data" / "examples" / "tune_space.toml"
    argv = ["tune", str(SAMPLE), "--space", str(space), "--label-column", "relevnt", "--set-column", "session_id"]
    assert cli.main([*argv, "--out", str(tmp_path / "t")]) == 2
    assert "(did you mean 'relevant'?)" in capsys.readouterr().err
