"""Typical user mistakes answered with exit 2 and one line naming the file, flag or column, and
the value (no traceback, no work done): ``demo --items`` an empty file (it wrote empty
outputs and exited 0), a bad budget flag (named as ``ContextBudget.max_tokens``, a name the
command line does not have), a label or set column the items file does not have (``tune`` and
``sensitivity`` named neither the file nor a close column)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cupel_np import cli

ITEMS = {
    "session_id": ["s1", "s1", "s2", "s2"],
    "content": ["a", "b", "c", "d"],
    "tokens": [10, 20, 30, 40],
    "kind": ["Message"] * 4,
    "relevant": [True, False, True, False],
}


@pytest.fixture
def items(tmp_path):
    path = tmp_path / "items.parquet"
    pq.write_table(pa.table(ITEMS), path)
    return path


def _one_line_error(capsys, argv) -> str:
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert code == 2, (code, out, err)
    assert len(lines) == 1 and lines[0].startswith("cupel-np: error: ") and "Traceback" not in err, err
    return lines[0]


def test_demo_refuses_an_empty_items_file(tmp_path, capsys):
    empty = tmp_path / "empty.parquet"
    pq.write_table(pa.table(ITEMS).slice(0, 0), empty)
    line = _one_line_error(capsys, ["demo", "--items", empty, "--out", tmp_path / "out", "--quiet"])
    assert "empty.parquet: no items (0 rows)" in line and "--allow-empty" in line
    assert not (tmp_path / "out").exists()


BUDGETS = [
    (["--max-tokens", "-5", "--target-tokens", "10"], "--max-tokens must be >= 0, got -5"),
    (["--max-tokens", "100", "--target-tokens", "200"], "--target-tokens (200) must be <= --max-tokens (100)"),
    (
        ["--max-tokens", "100", "--target-tokens", "50", "--output-reserve", "500"],
        "--output-reserve (500) must be <= --max-tokens (100)",
    ),
]


@pytest.mark.parametrize(("flags", "message"), BUDGETS)
@pytest.mark.parametrize("command", ["run", "sensitivity", "tune"])
def test_a_bad_budget_flag_is_named_by_its_flag(tmp_path, items, capsys, command, flags, message):
    argv = {
        "run": ["run", items, "--preset", "chat", "--set-column", "session_id", "--set", "s1"],
        "sensitivity": ["sensitivity", items, "--preset", "chat", "--preset", "rag", "--out", tmp_path / "o"],
        "tune": [
            "tune",
            items,
            "--space",
            tmp_path / "space.toml",
            "--label-column",
            "relevant",
            "--out",
            tmp_path / "o",
        ],
    }[command]
    (tmp_path / "space.toml").write_text("[scorers.priority]\n", encoding="utf-8")
    line = _one_line_error(capsys, [*argv, *flags])
    assert line == f"cupel-np: error: {message}", line


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["tune", "ITEMS", "--space", "SPACE", "--label-column", "relevent", "--set-column", "session_id"],
            "items.parquet: label column 'relevent' not found (did you mean 'relevant'?)",
        ),
        (
            ["tune", "ITEMS", "--space", "SPACE", "--label-column", "relevant", "--set-column", "sesion_id"],
            "items.parquet: set column 'sesion_id' not found (did you mean 'session_id'?)",
        ),
        (
            ["sensitivity", "ITEMS", "--preset", "chat", "--preset", "rag", "--max-tokens", "100"]
            + ["--target-tokens", "50", "--set-column", "session_id", "--label-column", "relevent"],
            "items.parquet: label column 'relevent' not found (did you mean 'relevant'?)",
        ),
    ],
)
def test_a_missing_column_names_the_file_and_the_closest_column(tmp_path, items, capsys, argv, message):
    (tmp_path / "space.toml").write_text("[budget]\nmax_tokens = 100\n[scorers.priority]\n", encoding="utf-8")
    subst = {"ITEMS": str(items), "SPACE": str(tmp_path / "space.toml")}
    line = _one_line_error(capsys, [subst.get(a, a) for a in argv] + ["--out", tmp_path / "o"])
    assert message in line and "(columns: session_id, content, tokens, kind, relevant)" in line, line
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--trials", "0"], "--trials must be an integer >= 1, got 0"),
        (["--batch-size", "-2"], "--batch-size must be an integer >= 1, got -2"),
        (["--top", "0"], "--top must be an integer >= 1, got 0"),
        (["--holdout", "2"], "--holdout must be in [0, 1), got 2.0"),
    ],
)
def test_tune_search_flags_are_named_as_flags(tmp_path, items, capsys, flags, message, monkeypatch):
    """``tune``'s own options were named by the Python parameter (``trials must be ...``), and
    ``--holdout`` was checked only after the items were read."""
    from cupel_np.cli import tune as tune_cmd

    monkeypatch.setattr(tune_cmd, "dataset_source", lambda *_a: pytest.fail("the items were read"))
    (tmp_path / "space.toml").write_text("[budget]\nmax_tokens = 100\n[scorers.priority]\n", encoding="utf-8")
    argv = ["tune", items, "--space", tmp_path / "space.toml", "--label-column", "relevant", "--out", tmp_path / "o"]
    line = _one_line_error(capsys, [*argv, *flags])
    assert line == f"cupel-np: error: {message}", line
