"""``--label-column`` on ``cupel-np sensitivity`` and ``sweep``: outcomes.parquet and the
per-variant token recall lines, in process and streamed in chunks; bad labels name the
column, the row and the value."""

import json
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import cupel_np as c
from cupel_np import cli
from cupel_np.analysis.outcomes import outcome_summary, outcome_summary_of_table

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "data" / "sample_sessions.parquet"
BUDGET = ["--max-tokens", "4000", "--target-tokens", "3000"]
PRESETS = ["--preset", "chat", "--preset", "rag"]


@pytest.fixture(scope="module")
def items(tmp_path_factory):
    """24 sessions of the sample corpus (it has a ``relevant`` column), in row groups of 50
    rows so that a streamed run reads several chunks."""
    t = pq.read_table(SAMPLE)
    keys = t.column("session_id").to_pylist()
    keep = [i for i, k in enumerate(keys) if int(k.split("-")[1]) < 24]
    path = tmp_path_factory.mktemp("items") / "items.parquet"
    pq.write_table(t.take(pa.array(keep)), path, row_group_size=50)
    return path


def run(capsys, *argv):
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _api(items):
    table = c.ItemTable.from_parquet(items, set_column="session_id")
    return c.sweep(table, c.ContextBudget(4000, 3000), [("chat", c.preset("chat")), ("rag", c.preset("rag"))])


def _recall_lines(out: str) -> dict:
    """variant -> (mean, lo, hi) as printed under the 'token recall by' line."""
    lines = out.splitlines()
    i = next(k for k, line in enumerate(lines) if line.startswith("token recall by 'relevant'"))
    got = {}
    for line in lines[i + 1 :]:
        m = re.fullmatch(r"  (\S+) +([0-9.]+) \[([0-9.]+), ([0-9.]+)\]", line)
        if not m:
            break
        got[m.group(1)] = tuple(float(x) for x in m.group(2, 3, 4))
    return got


def _sorted(t: pa.Table) -> pa.Table:
    return t.sort_by([("variant", "ascending"), ("session_id", "ascending")])


def test_sensitivity_writes_outcomes_and_prints_token_recall(capsys, tmp_path, items):
    code, out, err = run(
        capsys, "sensitivity", items, *PRESETS, *BUDGET, "--set-column", "session_id", "--label-column", "relevant",
        "--out", tmp_path / "o",
    )  # fmt: skip
    assert code == 0, err
    res = _api(items)
    written = pq.read_table(tmp_path / "o" / "outcomes.parquet")
    assert written.equals(res.outcomes_table("relevant"))
    summary = outcome_summary(res, "relevant", metrics=("token_recall",)).to_pylist()
    want = {
        r["variant"]: tuple(round(r[k], 3) for k in ("token_recall", "token_recall_lo", "token_recall_hi"))
        for r in summary
    }
    assert _recall_lines(out) == want
    scored = summary[0]["sets_labelled"] - summary[0]["sets_without_relevant"]
    assert f"mean over the {scored} sets with a relevant item" in out
    assert "outcomes.parquet" in out.splitlines()[-1]
    assert "outcomes.parquet" in json.loads((tmp_path / "o" / "manifest.json").read_text())["outputs"]


def test_without_label_column_no_outcomes(capsys, tmp_path, items):
    code, out, err = run(
        capsys, "sensitivity", items, *PRESETS, *BUDGET, "--set-column", "session_id", "--out", tmp_path / "o"
    )
    assert code == 0, err
    assert not (tmp_path / "o" / "outcomes.parquet").exists() and "token recall" not in out


def test_streamed_run_writes_the_same_outcomes(capsys, tmp_path, items):
    args = [*PRESETS, *BUDGET, "--set-column", "session_id", "--label-column", "relevant"]
    code, whole, err = run(capsys, "sensitivity", items, *args, "--out", tmp_path / "a")
    assert code == 0, err
    code, streamed, err = run(capsys, "sensitivity", items, *args, "--chunk-rows", 100, "--out", tmp_path / "b")
    assert code == 0, err
    assert re.search(r"streamed in ([2-9]|\d\d+) chunks", streamed), streamed
    a = pq.read_table(tmp_path / "a" / "outcomes.parquet")
    b = pq.read_table(tmp_path / "b" / "outcomes.parquet")
    assert _sorted(b).equals(_sorted(a))
    assert _recall_lines(streamed) == _recall_lines(whole) and _recall_lines(whole)
    code, out, err = run(capsys, "sensitivity", items, *args, "--chunk-rows", 100, "--out", tmp_path / "c", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert set(doc["outcomes"]) == {"chat", "rag"} and doc["outputs"]["outcomes"].endswith("outcomes.parquet")


def test_summary_of_a_table_equals_outcome_summary(items):
    res = _api(items)
    direct = outcome_summary(res, "relevant")
    assert outcome_summary_of_table(res.outcomes_table("relevant"), res.labels).equals(direct)
    # chunks concatenated in the same set order give the same numbers
    t = res.outcomes_table("relevant")
    half = t.num_rows // 2  # variant-major: the first half is 'chat'
    shuffled = pa.concat_tables([t.slice(half), t.slice(0, half)])
    assert outcome_summary_of_table(shuffled, res.labels).equals(direct)


def test_sweep_command_with_labels(capsys, tmp_path, items):
    grid = tmp_path / "grid.toml"
    grid.write_text('presets = ["chat", "rag", "tool_use"]\n[[budgets]]\nmax_tokens = 4000\ntarget_tokens = 3000\n')
    code, out, err = run(
        capsys, "sweep", items, "--grid", grid, "--set-column", "session_id", "--label-column", "relevant",
        "--out", tmp_path / "g", "--json",
    )  # fmt: skip
    assert code == 0, err
    doc = json.loads(out)
    o = pq.read_table(tmp_path / "g" / "outcomes.parquet")
    assert o.num_rows == len(doc["variants"]) * doc["sets"] == 3 * 24
    assert set(doc["outcomes"]) == set(doc["variants"])
    assert pc.all(o["labelled"]).as_py()


@pytest.fixture
def bad_items(tmp_path, items):
    """The items with a negative label at row 130 of the file."""
    t = pq.read_table(items)
    rel = np.array(t.column("relevant").to_pylist(), dtype=np.float64)
    rel[130] = -2.5
    t = t.set_column(t.schema.get_field_index("relevant"), "relevant", pa.array(rel))
    path = tmp_path / "bad.parquet"
    pq.write_table(t, path, row_group_size=50)
    return path


@pytest.mark.parametrize("extra", [[], ["--chunk-rows", "100"]], ids=["in-process", "streamed"])
def test_a_bad_label_names_column_row_and_value(capsys, tmp_path, bad_items, extra):
    code, out, err = run(
        capsys, "sensitivity", bad_items, *PRESETS, *BUDGET, "--set-column", "session_id", "--label-column",
        "relevant", "--out", tmp_path / "o", *extra,
    )  # fmt: skip
    assert code == 2
    assert "column 'relevant', row 130: negative label (value -2.5)" in err
    assert not (tmp_path / "o" / "outcomes.parquet").exists()


@pytest.mark.parametrize("extra", [[], ["--chunk-rows", "100"]], ids=["in-process", "streamed"])
def test_a_missing_label_column_is_named(capsys, tmp_path, items, extra):
    code, out, err = run(
        capsys, "sensitivity", items, *PRESETS, *BUDGET, "--set-column", "session_id", "--label-column", "nope",
        "--out", tmp_path / "o", *extra,
    )  # fmt: skip
    assert code == 2 and "label column 'nope'" in err


def test_overwrite_removes_a_stale_outcomes_file(capsys, tmp_path, items):
    """outcomes.parquet is one of cupel_np's output names: --overwrite removes it with the rest."""
    args = ["sensitivity", items, *PRESETS, *BUDGET, "--set-column", "session_id", "--out", tmp_path / "o"]
    code, out, err = run(capsys, *args, "--label-column", "relevant")
    assert code == 0, err
    assert (tmp_path / "o" / "outcomes.parquet").is_file()
    code, out, err = run(capsys, *args)
    assert code == 2 and "already holds" in err
    code, out, err = run(capsys, *args, "--overwrite")
    assert code == 0, err
    assert not (tmp_path / "o" / "outcomes.parquet").exists()


def test_a_bad_label_of_a_grouped_table_names_the_input_row():
    """An ItemTable groups rows by set; a bad label is still named by its row in the input."""
    from cupel_np.analysis.outcomes import labels_from
    from cupel_np.errors import InvalidConfigError

    src = pa.table(
        {
            "content": ["a", "b", "c", "d"],
            "tokens": [1, 2, 3, 4],
            "s": ["x", "y", "x", "y"],
            "rel": [1.0, -3.0, 0.0, 2.0],
        }
    )
    table = c.ItemTable(src, set_column="s")
    assert table.input_row.tolist() != [0, 1, 2, 3]  # grouped: row 1 is not at position 1
    with pytest.raises(InvalidConfigError, match=r"column 'rel', row 1: negative label \(value -3.0\)"):
        labels_from(table, "rel")


@pytest.mark.parametrize("stream", [[], ["--chunk-rows", "100"]], ids=["in-memory", "streamed"])
def test_labels_with_no_relevant_item_warn_that_recall_measures_nothing(tmp_path, capsys, items, stream):
    t = pq.read_table(items)
    t = t.set_column(t.schema.get_field_index("relevant"), "relevant", pa.array([False] * t.num_rows))
    path = tmp_path / "none.parquet"
    pq.write_table(t, path)
    labels = ["--set-column", "session_id", "--label-column", "relevant", *stream]
    code, out, err = run(capsys, "sensitivity", path, *PRESETS, *BUDGET, *labels, "--out", tmp_path / "o")
    assert code == 0  # the policies were compared: the outputs are real
    assert "n/a" in out and "warning: no set has an item labelled relevant in 'relevant'" in err
    code, out, err = run(capsys, "sensitivity", items, *PRESETS, *BUDGET, *labels, "--out", tmp_path / "o2")
    assert code == 0 and "warning: no set" not in err  # real labels: no warning
