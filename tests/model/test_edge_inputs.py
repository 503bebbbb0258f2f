"""Edge inputs found in review: each must give the right answer or a CupelError naming the
field, row or value — never a wrong result, a raw library error or a traceback."""

import re
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import cupel_np as c
from cupel_np import cli
from cupel_np.errors import CupelError, InvalidConfigError, InvalidInputTypeError
from cupel_np.io import sweep_parquet, validate_items

UTC = UTC

CHAT, RAG = c.preset("chat"), c.preset("rag")


def test_token_sums_that_would_overflow_int64_are_rejected():
    with pytest.raises(InvalidConfigError, match=r"tokens must be greater than -2\*\*62 and less than 2\*\*62"):
        c.ContextItem("p", 2**62, pinned=True)
    with pytest.raises(InvalidConfigError, match="add up past"):
        c.ItemTable.from_arrow(pa.table({"content": ["a", "b"], "tokens": [2**61 + 1, 2**61 + 1]}))
    with pytest.raises(InvalidConfigError, match="max_tokens must be greater than -2"):
        c.ContextBudget(2**62, 5)
    with pytest.raises(InvalidConfigError, match="priority must fit in 64 bits"):
        c.ContextItem("a", 1, priority=2**64)


def test_report_of_a_failed_cell_raises_its_error():
    thr = c.Policy(c.KindScorer(), overflow_strategy="throw")
    items = [c.ContextItem("p", 60, pinned=True), c.ContextItem("a", 0), c.ContextItem("b", 30)]
    ok = c.Policy(c.KindScorer(), overflow_strategy="truncate")
    r = c.sweep(
        items, None, [("thr", thr, c.ContextBudget(100, 50)), ("ok", ok, c.ContextBudget(100, 50))], on_error="collect"
    )
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
    from cupel_np.report.from_result import write_html_report

    page = write_html_report(r, tmp_path).read_text()
    assert r"run $\badcmd{x}$ now" in page and (tmp_path / "heatmap.svg").stat().st_size > 0
    assert rb"run $\badcmd{x}$ now" in (tmp_path / "heatmap.svg").read_bytes()  # drawn as it is


def test_cli_with_empty_items_and_a_set_column(tmp_path, capsys):
    src = tmp_path / "empty.parquet"
    pq.write_table(
        pa.table(
            {"sid": pa.array([], pa.string()), "content": pa.array([], pa.string()), "tokens": pa.array([], pa.int64())}
        ),
        src,
    )
    code = cli.main(
        [
            "sensitivity",
            str(src),
            "--preset",
            "chat",
            "--preset",
            "rag",
            "--max-tokens",
            "100",
            "--target-tokens",
            "50",
            "--set-column",
            "sid",
            "--out",
            str(tmp_path / "o"),
            "--quiet",
            "--allow-empty",  # by default an empty table is refused (issue 28)
        ]
    )
    assert code == 0, capsys.readouterr().err
    refused = cli.main(["validate", str(src), "--set-column", "sid"])
    assert refused == 2 and "no items (0 rows)" in capsys.readouterr().err


def test_set_column_may_be_an_item_column_and_keys_must_be_scalars():
    t = c.ItemTable.from_arrow(
        pa.table({"content": ["a", "b", "c"], "tokens": [1, 2, 3], "kind": ["Message", "Memory", "Message"]}),
        set_column="kind",
    )
    assert t.set_keys == ["Message", "Memory"] and t.row(0).kind == "Message"
    t2 = c.ItemTable.from_items(
        [{"content": "a", "tokens": 1, "kind": "X"}, {"content": "b", "tokens": 1, "kind": "Y"}], set_column="kind"
    )
    assert t2.set_keys == ["X", "Y"] and t2.row(1).kind == "Y" and t2.set_column == "kind"
    with pytest.raises(
        InvalidInputTypeError, match=r"^set column 'sid' must hold strings or integers, got list<item: int64>$"
    ):
        c.ItemTable.from_arrow(pa.table({"content": ["a"], "tokens": [1], "sid": [[1]]}), set_column="sid")
    with pytest.raises(InvalidConfigError, match="keys of mixed or unsupported types"):
        c.ItemTable.from_items(
            [{"content": "a", "tokens": 1, "s": 1}, {"content": "b", "tokens": 1, "s": "x"}], set_column="s"
        )


def test_null_metadata_values_are_named_at_load_and_by_validate(tmp_path, capsys):
    md = pa.array([[("k", "v")], [("a", "b"), ("k", None)]], pa.map_(pa.string(), pa.string()))
    table = pa.table({"content": ["a", "b"], "tokens": [1, 2], "metadata": md})
    with pytest.raises(InvalidConfigError, match="column 'metadata', row 1: a metadata value is null"):
        c.ItemTable.from_arrow(table)
    pq.write_table(table, tmp_path / "m.parquet")
    assert cli.main(["validate", str(tmp_path / "m.parquet")]) == 2
    assert "column 'metadata': a metadata value is null (values must be strings) at row 1" in capsys.readouterr().out


@pytest.mark.parametrize(
    "grid, message",
    [
        (
            'presets = "chat"\nweights = { recency = "high" }\n[[budgets]]\nmax_tokens = 10\ntarget_tokens = 5\n',
            "weights[0].recency must be a number",
        ),
        (
            'presets = ["chat"]\n[[budgets]]\nmax_tokens = 10\ntarget_tokens = 5\nbogus = 1\n',
            "budgets[0]: budget: unknown key 'bogus'",
        ),
        ('presets = ["chat"]\n', "at least one [[budgets]]"),
    ],
)
def test_grid_file_errors(tmp_path, capsys, grid, message):
    g = tmp_path / "g.toml"
    g.write_text(grid)
    items = Path(__file__).resolve().parents[2] / "data" / "sample_sessions.parquet"
    assert cli.main(["sweep", str(items), "--grid", str(g), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_grid_accepts_a_single_preset_and_weights_table():
    vs = c.Sweep(["chat"], weights={"recency": 2.0}).variants()
    assert [(s.type_name, w) for s, w in vs[0][1].scorer.entries] == [("recency", 2.0), ("kind", 1.0)]


def test_out_path_that_is_a_file_is_a_usage_error(tmp_path, capsys):
    f = tmp_path / "file"
    f.write_text("x")
    items = Path(__file__).resolve().parents[2] / "data" / "sample_sessions.parquet"
    code = cli.main(
        [
            "sensitivity",
            str(items),
            "--preset",
            "chat",
            "--preset",
            "rag",
            "--max-tokens",
            "8000",
            "--target-tokens",
            "6000",
            "--out",
            str(f / "sub"),
            "--quiet",
        ]
    )
    assert code == 2 and "cupel-np: error:" in capsys.readouterr().err


# ------------------------------------------------- issue 7, defect 4: one CupelError, one line
def _one_line_error(exc_info, cls=CupelError):
    err = exc_info.value
    assert isinstance(err, cls) and isinstance(err, CupelError)
    assert "\n" not in str(err)
    return str(err)


def _bad_utf8(*values: bytes, typ=pa.string()) -> pa.Array:  # noqa: B008 (an immutable type object)
    """A string array holding exactly these bytes (Arrow does not validate buffers)."""
    offsets = np.cumsum([0] + [len(v) for v in values]).astype(np.int32 if typ == pa.string() else np.int64)
    return pa.Array.from_buffers(
        typ, len(values), [None, pa.py_buffer(offsets.tobytes()), pa.py_buffer(b"".join(values))]
    )


def _in_file(path, msg: str) -> str:
    """``msg`` (an anchored pattern) as the loader reports it for a row of Parquet file ``path``."""
    return "^" + re.escape(str(path)) + ": " + msg.lstrip("^")


def test_duplicate_column_names_are_named(tmp_path):
    t = pa.Table.from_arrays([pa.array(["a"]), pa.array([1]), pa.array(["b"])], names=["content", "tokens", "content"])
    msg = "^items table has 2 columns named 'content' \\(columns: content, tokens, content\\); names must be unique$"
    with pytest.raises(InvalidConfigError, match=msg) as ei:
        c.ItemTable.from_arrow(t)
    _one_line_error(ei)
    pq.write_table(t, tmp_path / "dup.parquet")
    with pytest.raises(InvalidConfigError, match=_in_file(tmp_path / "dup.parquet", msg)) as ei:
        c.ItemTable.from_parquet(tmp_path / "dup.parquet")
    _one_line_error(ei)
    problems, _ = validate_items(tmp_path / "dup.parquet")
    assert problems == [
        "items table has 2 columns named 'content' (columns: content, tokens, content); names must be unique"
    ]
    # a repeated column that is not read is ignored
    extra = pa.Table.from_arrays(
        [pa.array(["a"]), pa.array([1]), pa.array([1]), pa.array([2])], names=["content", "tokens", "x", "x"]
    )
    assert c.ItemTable.from_arrow(extra).n == 1


@pytest.mark.parametrize("typ", [pa.string(), pa.large_string()])
def test_invalid_utf8_content_is_rejected_at_load_naming_the_row(tmp_path, typ):
    t = pa.table({"content": _bad_utf8(b"ok", b"bad \xff\xfe", typ=typ), "tokens": [1, 2]})
    msg = r"^column 'content', row 1: invalid UTF-8 \(value b'bad \\xff\\xfe'\)$"
    with pytest.raises(InvalidConfigError, match=msg) as ei:
        c.ItemTable.from_arrow(t)
    _one_line_error(ei)
    pq.write_table(t, tmp_path / "u.parquet")
    with pytest.raises(InvalidConfigError, match=_in_file(tmp_path / "u.parquet", msg)):
        c.ItemTable.from_parquet(tmp_path / "u.parquet")
    assert validate_items(tmp_path / "u.parquet")[0] == ["column 'content': invalid UTF-8 at row 1 (b'bad \\xff\\xfe')"]


def test_invalid_utf8_in_tags_metadata_kind_and_set_keys():
    bad = _bad_utf8(b"\xc3")
    tags = pa.ListArray.from_arrays(pa.array([0, 0, 1], pa.int32()), bad)
    base = {"content": ["a", "b"], "tokens": [1, 2]}
    with pytest.raises(InvalidConfigError, match=r"^column 'tags', row 1: invalid UTF-8$"):
        c.ItemTable.from_arrow(pa.table({**base, "tags": tags}))
    md = pa.MapArray.from_arrays(pa.array([0, 1, 1], pa.int32()), pa.array(["k"]), bad)
    with pytest.raises(InvalidConfigError, match=r"^column 'metadata', row 0: invalid UTF-8$"):
        c.ItemTable.from_arrow(pa.table({**base, "metadata": md}))
    with pytest.raises(InvalidConfigError, match=r"^column 'kind', row 0: invalid UTF-8 \(value b'\\xc3'\)$"):
        c.ItemTable.from_arrow(pa.table({**base, "kind": _bad_utf8(b"\xc3", b"x")}))
    with pytest.raises(InvalidConfigError, match=r"^set column 's', row 1: invalid UTF-8"):
        c.ItemTable.from_arrow(pa.table({**base, "s": _bad_utf8(b"x", b"\xc3")}), set_column="s")


@pytest.mark.parametrize(
    "field, kwargs",
    [
        ("content", {"content": "a\ud800b"}),
        ("kind", {"kind": "K\udfff"}),
        ("source", {"source": "\ud800"}),
        ("tags", {"tags": ("ok", "\udc80")}),
        ("metadata", {"metadata": {"k": "\ud800"}}),
    ],
)
def test_lone_surrogates_are_rejected_at_construction(field, kwargs):
    args = {"content": "x", "tokens": 1, **kwargs}
    with pytest.raises(
        InvalidConfigError, match=rf"^ContextItem\.{field} is not valid Unicode text: lone surrogate"
    ) as ei:
        c.ContextItem(**args)
    _one_line_error(ei)
    with pytest.raises(InvalidConfigError, match=rf"^row 0: ContextItem\.{field} is not valid Unicode text"):
        c.ItemTable.from_items([args])


def test_decay_reference_in_2300_with_nanosecond_timestamps():
    """Was OverflowError: the reference time in nanoseconds does not fit in int64."""
    ts = [datetime(2024, 1, 1, tzinfo=UTC), datetime(2200, 1, 1, tzinfo=UTC), None]
    policy = c.Policy.from_dict(
        {
            "scorers": [
                {
                    "type": "decay",
                    "reference_time": "2300-01-01T00:00:00Z",
                    "curve": {"type": "exponential", "half_life_secs": 3.0e9},
                }
            ]
        }
    )
    budget = c.ContextBudget(1000, 1000)
    scores = {}
    for unit in ("s", "ms", "us", "ns"):
        t = c.ItemTable.from_arrow(
            pa.table(
                {
                    "content": ["old", "new", "none"],
                    "tokens": [1, 1, 1],
                    "timestamp": pa.array(ts, pa.timestamp(unit, tz="UTC")),
                }
            )
        )
        rep = c.Pipeline(policy).dry_run(t, budget)
        scores[unit] = {i.item.content: i.score for i in rep.included}
    assert scores["ns"] == scores["us"] == scores["ms"] == scores["s"]
    age = (datetime(2300, 1, 1, tzinfo=UTC) - ts[0]).total_seconds()
    assert scores["ns"]["old"] == pytest.approx(2.0 ** (-age / 3.0e9), rel=1e-12)


def test_reserved_slots_whose_sum_overflows():
    with pytest.raises(
        InvalidConfigError, match=r"^ContextBudget.reserved_slots add up to 9223372036854775806, past 2\*\*62"
    ) as ei:
        c.ContextBudget(10, 5, reserved_slots={"a": 2**62 - 1, "b": 2**62 - 1})
    _one_line_error(ei)
    b = c.ContextBudget(10, 5, reserved_slots={"a": 2**61, "b": 2**61 - 1})
    assert b.effective(0) == (0, 0)


@pytest.mark.parametrize(
    "keys, typ",
    [
        ([1.0, float("nan"), float("nan")], "double"),
        ([True, False, True], "bool"),
        ([b"x", b"y", b"x"], "binary"),
        ([datetime(2024, 1, 1), datetime(2024, 1, 2), datetime(2024, 1, 1)], "timestamp[us]"),
    ],
)
def test_set_keys_must_be_strings_or_integers(keys, typ):
    t = pa.table({"content": ["a", "b", "c"], "tokens": [1, 2, 3], "s": keys})
    with pytest.raises(
        InvalidInputTypeError, match=rf"^set column 's' must hold strings or integers, got {re.escape(typ)}$"
    ) as ei:
        c.ItemTable.from_arrow(t, set_column="s")
    _one_line_error(ei)


def test_float_set_keys_through_from_items_are_rejected():
    rows = [{"content": "a", "tokens": 1, "s": float("nan")}, {"content": "b", "tokens": 1, "s": float("nan")}]
    with pytest.raises(InvalidInputTypeError, match="^set column 's' must hold strings or integers, got double$"):
        c.ItemTable.from_items(rows, set_column="s")


def test_validate_applies_exactly_the_loader_checks(tmp_path):
    """validate said "ok" for tokens that load refused (the sum check was the loader's only)."""
    path = tmp_path / "big.parquet"
    pq.write_table(pa.table({"content": ["a", "b"], "tokens": [2**61 + 1, 2**61 + 1]}), path)
    with pytest.raises(
        InvalidConfigError, match=_in_file(path, r"^column 'tokens', row 1: the token counts add up past 4.61e\+18")
    ) as ei:
        c.ItemTable.from_parquet(path)
    _one_line_error(ei)
    problems, _ = validate_items(path)
    assert problems == [
        "column 'tokens': the token counts add up past 4.61e+18 (sums must fit in 64-bit integers) "
        f"at row 1 ({2**61 + 1})"
    ]


def test_validate_lists_every_problem_the_loader_would_raise_first(tmp_path):
    path = tmp_path / "many.parquet"
    pq.write_table(
        pa.table(
            {
                "content": ["a", "", None, "d"],
                "tokens": pa.array([1, 2**64 - 1, 3, None], pa.uint64()),
                "kind": ["x", " ", "y", "z"],
                "s": [1.5, 2.5, 1.5, 2.5],
            }
        ),
        path,
    )
    problems, summary = validate_items(path, set_column="s")
    assert problems == [
        "column 'tokens': does not fit in a 64-bit signed integer at row 1 (18446744073709551615)",
        "column 'content': null at row 2",
        "column 'content': empty string at row 1",
        "column 'tokens': null at row 3",
        "column 'kind': empty or whitespace-only at row 1 (' ')",
        "set column 's' must hold strings or integers, got double",
    ]
    assert summary["rows"] == 4
    with pytest.raises(
        InvalidConfigError,
        match=_in_file(
            path, r"^column 'tokens', row 1: does not fit in a 64-bit signed integer \(value 18446744073709551615\)$"
        ),
    ):
        c.ItemTable.from_parquet(path, set_column="s")
