"""Edge inputs found in review: each must give the right answer or a CupelError naming the
field, row or value — never a wrong result, a raw library error or a traceback."""

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import cupel_np as c
from cupel_np import cli
from cupel_np.errors import CupelError, InvalidConfigError, InvalidInputTypeError
from cupel_np.io import sweep_parquet

CHAT, RAG = c.preset("chat"), c.preset("rag")


def test_token_sums_that_would_overflow_int64_are_rejected():
    with pytest.raises(InvalidConfigError, match=r"tokens must be within ±2\*\*62"):
        c.ContextItem("p", 2**62, pinned=True)
    with pytest.raises(InvalidConfigError, match="add up past"):
        c.ItemTable.from_arrow(pa.table({"content": ["a", "b"], "tokens": [2**61 + 1, 2**61 + 1]}))
    with pytest.raises(InvalidConfigError, match="max_tokens must be within"):
        c.ContextBudget(2**62, 5)
    with pytest.raises(InvalidConfigError, match="priority must fit in 64 bits"):
        c.ContextItem("a", 1, priority=2**64)


def test_report_of_a_failed_cell_raises_its_error():
    thr = c.Policy(c.KindScorer(), overflow_strategy="throw")
    items = [c.ContextItem("p", 60, pinned=True), c.ContextItem("a", 0), c.ContextItem("b", 30)]
    ok = c.Policy(c.KindScorer(), overflow_strategy="truncate")
    r = c.sweep(items, None, [("thr", thr, c.ContextBudget(100, 50)), ("ok", ok, c.ContextBudget(100, 50))],
                on_error="collect")
    with pytest.raises(c.BudgetOverflowError, match="variant 'thr'"):
        r.selection_report("thr")
    assert [i.item.content for i in r.selection_report("ok").included] == ["p"]  # effective target 0
    with pytest.raises(InvalidConfigError, match="no variant labelled 'zz'"):
        r.selection_report("zz")
    # a single-variant sweep names its variant too
    with pytest.raises(c.BudgetOverflowError, match="variant 'thr'"):
        c.sweep(items, None, [("thr", thr, c.ContextBudget(100, 50))])


def test_streaming_when_the_first_chunk_has_no_swing(tmp_path):
    rows = {"sid": ["A"] * 2 + ["B"] * 3, "content": ["a1", "a2", "b1", "b2", "b3"], "tokens": [1, 1, 300, 300, 300]}
    src = tmp_path / "s.parquet"
    pq.write_table(pa.table(rows), src, row_group_size=2)
    variants = [("big", CHAT, c.ContextBudget(1000, 800)), ("small", CHAT, c.ContextBudget(600, 500))]
    totals = sweep_parquet(src, None, variants, tmp_path / "out", set_column="sid", chunk_rows=1)
    diffs = pq.read_table(tmp_path / "out" / "diffs.parquet")
    assert totals["swing"] == diffs.num_rows == 1 and diffs.column("sid").to_pylist() == ["B"]
    empty = tmp_path / "empty.parquet"
    pq.write_table(pa.table(rows).slice(0, 0), empty)
    assert sweep_parquet(empty, None, variants, tmp_path / "o2", set_column="sid")["rows"] == 0
    assert pq.read_table(tmp_path / "o2" / "items.parquet").num_rows == 0


def test_dollar_signs_in_content_and_labels_do_not_break_the_report(tmp_path):
    items = [c.ContextItem(r"run $\badcmd{x}$ now", 300), c.ContextItem("b $x$", 300), c.ContextItem("z", 10)]
    r = c.sweep(items, None, [("$a$", CHAT, c.ContextBudget(700, 650)), ("b", CHAT, c.ContextBudget(700, 20))])
    assert r.n_swing == 2  # both '$' items swing, so they label the heatmap rows
    from cupel_np.html_report import write_html_report

    page = write_html_report(r, tmp_path).read_text()
    assert r"run $\badcmd{x}$ now" in page and (tmp_path / "heatmap.png").stat().st_size > 0


def test_cli_with_empty_items_and_a_set_column(tmp_path, capsys):
    src = tmp_path / "empty.parquet"
    pq.write_table(pa.table({"sid": pa.array([], pa.string()), "content": pa.array([], pa.string()),
                             "tokens": pa.array([], pa.int64())}), src)
    code = cli.main(["sensitivity", str(src), "--preset", "chat", "--preset", "rag", "--max-tokens", "100",
                     "--target-tokens", "50", "--set-column", "sid", "--out", str(tmp_path / "o"), "--quiet"])
    assert code == 0, capsys.readouterr().err


def test_set_column_may_be_an_item_column_and_keys_must_be_scalars():
    t = c.ItemTable.from_arrow(pa.table({"content": ["a", "b", "c"], "tokens": [1, 2, 3],
                                         "kind": ["Message", "Memory", "Message"]}), set_column="kind")
    assert t.set_keys == ["Message", "Memory"] and t.row(0).kind == "Message"
    t2 = c.ItemTable.from_items([{"content": "a", "tokens": 1, "kind": "X"}, {"content": "b", "tokens": 1, "kind": "Y"}],
                                set_column="kind")
    assert t2.set_keys == ["X", "Y"] and t2.row(1).kind == "Y" and t2.set_column == "kind"
    with pytest.raises(InvalidInputTypeError, match=r"^set column 'sid' must hold strings or integers, got list<item: int64>$"):
        c.ItemTable.from_arrow(pa.table({"content": ["a"], "tokens": [1], "sid": [[1]]}), set_column="sid")
    with pytest.raises(InvalidConfigError, match="keys of mixed or unsupported types"):
        c.ItemTable.from_items([{"content": "a", "tokens": 1, "s": 1}, {"content": "b", "tokens": 1, "s": "x"}], set_column="s")


def test_null_metadata_values_are_named_at_load_and_by_validate(tmp_path, capsys):
    md = pa.array([[("k", "v")], [("a", "b"), ("k", None)]], pa.map_(pa.string(), pa.string()))
    table = pa.table({"content": ["a", "b"], "tokens": [1, 2], "metadata": md})
    with pytest.raises(InvalidConfigError, match="column 'metadata', row 1: a metadata value is null"):
        c.ItemTable.from_arrow(table)
    pq.write_table(table, tmp_path / "m.parquet")
    assert cli.main(["validate", str(tmp_path / "m.parquet")]) == 2
    assert "column 'metadata': a metadata value is null (values must be strings) at row 1" in capsys.readouterr().out


@pytest.mark.parametrize("grid, message", [
    ('presets = "chat"\nweights = { recency = "high" }\n[[budgets]]\nmax_tokens = 10\ntarget_tokens = 5\n', "weights[0].recency must be a number"),
    ('presets = ["chat"]\n[[budgets]]\nmax_tokens = 10\ntarget_tokens = 5\nbogus = 1\n', "unknown key(s) ['bogus']"),
    ('presets = ["chat"]\n', "at least one [[budgets]]"),
])
def test_grid_file_errors(tmp_path, capsys, grid, message):
    g = tmp_path / "g.toml"
    g.write_text(grid)
    items = Path(__file__).resolve().parents[1] / "data" / "sample_sessions.parquet"
    assert cli.main(["sweep", str(items), "--grid", str(g), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_grid_accepts_a_single_preset_and_weights_table():
    vs = c.Sweep(["chat"], weights={"recency": 2.0}).variants()
    assert [(s.type_name, w) for s, w in vs[0][1].scorer.entries] == [("recency", 2.0), ("kind", 1.0)]


def test_out_path_that_is_a_file_is_a_usage_error(tmp_path, capsys):
    f = tmp_path / "file"
    f.write_text("x")
    items = Path(__file__).resolve().parents[1] / "data" / "sample_sessions.parquet"
    code = cli.main(["sensitivity", str(items), "--preset", "chat", "--preset", "rag", "--max-tokens", "8000",
                     "--target-tokens", "6000", "--out", str(f / "sub"), "--quiet"])
    assert code == 2 and "cupel-np: error:" in capsys.readouterr().err
