"""ContextItem / ItemTable / ContextBudget: encoding, grouping, Arrow & Parquet input, bad input."""

import dataclasses
from datetime import UTC, datetime

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import cupel_np as c
from cupel_np.errors import CupelError, InvalidConfigError, InvalidInputTypeError

UTC = UTC


def test_context_item_validation_names_field_and_value():
    with pytest.raises(InvalidConfigError, match="content must be a non-empty"):
        c.ContextItem("", 1)
    with pytest.raises(InvalidConfigError, match="kind must not be empty or whitespace-only, got ' '"):
        c.ContextItem("a", 1, kind=" ")
    with pytest.raises(InvalidConfigError, match="source must not be empty"):
        c.ContextItem("a", 1, source="\t")
    with pytest.raises(InvalidInputTypeError, match="tokens must be an integer, got float 1.5"):
        c.ContextItem("a", 1.5)
    with pytest.raises(InvalidConfigError, match="timezone-aware"):
        c.ContextItem("a", 1, timestamp=datetime(2024, 1, 1))
    with pytest.raises(InvalidInputTypeError, match="metadata must map strings to strings"):
        c.ContextItem("a", 1, metadata={"cupel:trust": 0.5})
    item = c.ContextItem("a", 1, tags=["x"], metadata={"k": "v"})
    assert item.tags == ("x",) and hash(item) == hash(c.ContextItem("a", 1, tags=("x",), metadata={"k": "v"}))
    with pytest.raises(dataclasses.FrozenInstanceError):
        item.tokens = 5  # frozen


def test_budget_rules():
    b = c.ContextBudget(1000, 800, 100, {"Message": 50}, 10.0)
    assert b.effective(pinned_tokens=100) == (675, 585)  # floor(750*.9), floor(650*.9)
    for args, match in [
        ((-1, 0), "max_tokens must be >= 0"),
        ((10, -1), "target_tokens must be >= 0"),
        ((10, 20), r"target_tokens \(20\) must be <= max_tokens \(10\)"),
        ((10, 5, -1), "output_reserve must be >= 0"),
        ((10, 5, 11), r"output_reserve \(11\) must be <= max_tokens"),
        ((10, 5, 0, {"m": -1}), r"reserved_slots\['m'\] must be >= 0"),
        ((10, 5, 0, {"M": 1, "m": 1}), "names kind 'm' twice"),
        ((10, 5, 0, None, 100.5), r"must be in \[0.0, 100.0\]"),
    ]:
        with pytest.raises(InvalidConfigError, match=match):
            c.ContextBudget(*args)
    with pytest.raises(InvalidInputTypeError):
        c.ContextBudget(10.0, 5)


def test_set_grouping_is_stable_and_maps_back():
    rows = [{"content": f"c{i}", "tokens": 10, "session": s} for i, s in enumerate("babcab")]
    t = c.ItemTable.from_items(rows, set_column="session")
    assert t.set_keys == ["b", "a", "c"]
    assert list(t.offsets) == [0, 3, 5, 6]
    assert [rows[i]["content"] for i in t.input_row] == ["c0", "c2", "c5", "c1", "c4", "c3"]
    assert t.row(3).content == "c1"


def test_case_folding_is_ascii_only():
    t = c.ItemTable.from_items(
        [
            c.ContextItem("a", 1, kind="Message", tags=("Db",)),
            c.ContextItem("b", 1, kind="MESSAGE", tags=("dB",)),
            c.ContextItem("c", 1, kind="MESSAGÉ", tags=("ǅ",)),  # non-ASCII letters are not folded
            c.ContextItem("d", 1, kind="messagé", tags=("ǆ",)),
        ]
    )
    assert t.kind_id[0] == t.kind_id[1] and t.kind_id[2] != t.kind_id[3]
    assert t.tag_fold_id[0] == t.tag_fold_id[1] and t.tag_fold_id[2] != t.tag_fold_id[3]


def test_from_arrow_and_parquet_defaults_and_types(tmp_path):
    table = pa.table(
        {
            "content": ["a", "b", "c"],
            "tokens": pa.array([10, 20, 30], pa.int32()),
            "timestamp": pa.array([datetime(2024, 1, 1), None, datetime(2024, 2, 1)], pa.timestamp("ms")),
            "tags": [["x"], None, []],
            "extra": [1, 2, 3],
        }
    )
    t = c.ItemTable.from_arrow(table)
    assert t.row(1).kind == "Message" and t.row(1).source == "Chat" and t.row(1).tags == ()
    assert t.row(0).timestamp == datetime(2024, 1, 1, tzinfo=UTC)
    path = tmp_path / "items.parquet"
    pq.write_table(table, path)
    t2 = c.ItemTable.from_parquet(path)
    assert [t2.row(i) for i in range(3)] == [t.row(i) for i in range(3)]
    # a dict of columns works too (anything pyarrow.table() takes)
    assert c.ItemTable.from_arrow({"content": ["z"], "tokens": [1]}).row(0).content == "z"


@pytest.mark.parametrize(
    "cols, exc, match",
    [
        ({"tokens": [1]}, InvalidConfigError, "no 'content' column"),
        ({"content": ["a", ""], "tokens": [1, 2]}, InvalidConfigError, "column 'content', row 1"),
        ({"content": ["a", None], "tokens": [1, 2]}, InvalidConfigError, "column 'content', row 1: null$"),
        (
            {"content": ["a"], "tokens": [1.5]},
            InvalidInputTypeError,
            r"column 'tokens', row 0: is not a whole number that fits in 64 bits \(an integer column\) \(value 1.5\)",
        ),
        ({"content": ["a", "b"], "tokens": [1, None]}, InvalidConfigError, "column 'tokens', row 1: null$"),
        (
            {"content": ["a", "b"], "tokens": [1, 2], "kind": ["x", "  "]},
            InvalidConfigError,
            r"column 'kind', row 1: .*whitespace-only \(value '  '\)",
        ),
        (
            {"content": ["a"], "tokens": [1], "timestamp": ["2024-01-01"]},
            InvalidInputTypeError,
            "must be an Arrow timestamp",
        ),
        ({"content": ["a"], "tokens": [1], "tags": ["x"]}, InvalidInputTypeError, "'tags' must be list<string>"),
        (
            {"content": ["a", "b"], "tokens": [1, 2], "tags": [["x"], ["y", None]]},
            InvalidConfigError,
            "column 'tags', row 1: a tag is null",
        ),
    ],
)
def test_bad_columns_name_column_row_and_value(cols, exc, match):
    with pytest.raises(exc, match=match) as ei:
        c.ItemTable.from_arrow(pa.table(cols))
    assert isinstance(ei.value, CupelError)


def test_missing_parquet_and_set_column_errors(tmp_path):
    with pytest.raises(InvalidConfigError, match="items file not found"):
        c.ItemTable.from_parquet(tmp_path / "nope.parquet")
    (tmp_path / "junk.parquet").write_bytes(b"not parquet")
    with pytest.raises(InvalidInputTypeError, match="cannot read Parquet file"):
        c.ItemTable.from_parquet(tmp_path / "junk.parquet")
    with pytest.raises(InvalidConfigError, match="set column 'sid' not found"):
        c.ItemTable.from_arrow(pa.table({"content": ["a"], "tokens": [1]}), set_column="sid")
    with pytest.raises(InvalidConfigError, match=r"^set column 'sid', row 1: null \(every row needs a set key\)$"):
        c.ItemTable.from_arrow(
            pa.table({"content": ["a", "b"], "tokens": [1, 1], "sid": ["x", None]}), set_column="sid"
        )


def test_every_row_is_reported_and_nothing_dropped():
    items = [
        c.ContextItem("p", 10, pinned=True),
        c.ContextItem("neg", -3),
        c.ContextItem("dup", 10, priority=1),
        c.ContextItem("dup", 10, priority=2),
        c.ContextItem("big", 10_000, priority=3),
        c.ContextItem("zero", 0),
    ]
    pol = c.Policy(c.PriorityScorer())
    r = c.Pipeline(pol).dry_run(items, c.ContextBudget(100, 80))
    assert r.total_candidates == len(r.included) + len(r.excluded) == 6
    assert sorted(list(r.input_rows(r.included_rows)) + list(r.input_rows(r.excluded_rows))) == list(range(6))
    reasons = {e.item.content + str(e.item.priority): e.reason.reason for e in r.excluded}
    assert reasons == {"negNone": "NegativeTokens", "dup1": "Deduplicated", "big3": "BudgetExceeded"}
    inc = {i.item.content: i.reason.value for i in r.included}
    assert inc == {"p": "Pinned", "dup": "Scored", "zero": "ZeroToken"}


def test_pipeline_errors_are_cupel_errors():
    pol = c.Policy(c.RecencyScorer())
    with pytest.raises(c.PinnedExceedsBudgetError, match="pinned items require 200 tokens, but only 90"):
        c.Pipeline(pol).run([c.ContextItem("p", 200, pinned=True)], c.ContextBudget(100, 50, 10))
    with pytest.raises(c.BudgetOverflowError, match="require 80 tokens, exceeding the target budget of 50"):
        c.Pipeline(pol).run([c.ContextItem("p", 80, pinned=True)], c.ContextBudget(100, 50))
    with pytest.raises(InvalidInputTypeError, match="budget must be a ContextBudget"):
        c.Pipeline(pol).run([c.ContextItem("p", 1)], {"max_tokens": 1})
    many = c.ItemTable.from_items(
        [{"content": "a", "tokens": 1, "s": 1}, {"content": "b", "tokens": 1, "s": 2}], set_column="s"
    )
    with pytest.raises(CupelError, match="holds 2 item sets"):
        c.Pipeline(pol).dry_run(many, c.ContextBudget(10, 10))


def test_rows_by_a_boolean_mask_are_the_rows_where_it_is_set():
    """``ItemTable.rows`` takes a mask over every row as well as row numbers, whether the
    table holds its items or decodes them from Arrow; a mask of another length is refused."""
    items = [c.ContextItem(f"c{i}", i + 1, kind=("Message", "Doc")[i % 2]) for i in range(7)]
    mask = np.array([True, False, False, True, True, False, True])
    for table in (c.ItemTable.from_items(items), c.ItemTable.from_arrow(c.ItemTable.from_items(items).table)):
        assert [i.content for i in table.rows(mask)] == ["c0", "c3", "c4", "c6"]
        assert table.rows(mask) == table.rows(np.flatnonzero(mask))
        assert table.rows(np.zeros(7, dtype=np.bool_)) == []
        with pytest.raises(IndexError, match="one entry per row"):
            table.rows(mask[:5])
