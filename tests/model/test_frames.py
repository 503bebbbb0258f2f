"""Issue 17.2: frames as people build them. The sample corpus round-trips through pandas and
polars (their default dtypes: Categorical / Enum strings, string views, nullable integers as
float64, metadata as dicts) and loads as the same items; a value pandas cannot have meant as
an integer is a clear error naming column, row and value."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cupel_np.errors import InvalidInputTypeError
from cupel_np.model.items import ItemTable

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample_sessions.parquet"
SET = "session_id"


@pytest.fixture(scope="module")
def sample() -> pa.Table:
    return pq.read_table(SAMPLE)


def _rows(t: ItemTable) -> list:
    """Everything a table holds, decoded (sets, input order, every column), plus some rows as
    ContextItems."""
    cols = [t.content, t.kind, t.source, t.tags]
    out = [t.set_keys, t.input_row.tolist(), [c.to_pylist() for c in cols], t.tokens.tolist()]
    out.append([dict(m) for m in t.metadata.to_pylist()])  # a dict's keys in struct field order
    out += [t.priority.tolist(), t.priority_valid.tolist(), t.original_tokens_col.tolist(), t.hint.tolist()]
    out += [t.timestamp.tolist(), t.timestamp_valid.tolist(), t.pinned.tolist()]
    return out + [t.row(i) for i in range(0, t.n, 97)]


@pytest.fixture(scope="module")
def expected(sample) -> list:
    return _rows(ItemTable.from_arrow(sample, set_column=SET))


def _categorical(sample: pa.Table) -> pl.DataFrame:
    kinds = sorted(set(sample.column("kind").to_pylist()))
    return pl.from_arrow(sample).with_columns(
        pl.col(SET).cast(pl.Categorical),
        pl.col("kind").cast(pl.Enum(kinds)),
        pl.col("source").cast(pl.Categorical),
        pl.col("content").cast(pl.Categorical),
        pl.col("tags").cast(pl.List(pl.Categorical)),
    )


@pytest.mark.parametrize("categorical", [False, True])
@pytest.mark.parametrize("how", ["to_arrow", "to_arrow_newest", "frame"])
def test_polars_round_trip(sample, expected, categorical, how):
    df = _categorical(sample) if categorical else pl.from_arrow(sample)
    if how == "to_arrow":
        data = df.to_arrow()
    elif how == "to_arrow_newest":  # string_view and dictionary<string_view>
        data = df.to_arrow(compat_level=pl.CompatLevel.newest())
    else:  # the frame itself, through the Arrow C stream
        data = df
    assert _rows(ItemTable.from_arrow(data, set_column=SET)) == expected


def test_pandas_round_trip(sample, expected):
    df = sample.to_pandas()
    assert df["priority"].dtype == "float64"  # the nullable integer column pandas makes
    assert _rows(ItemTable.from_arrow(pa.Table.from_pandas(df), set_column=SET)) == expected
    assert _rows(ItemTable.from_arrow(df, set_column=SET)) == expected


def test_pandas_categories_and_dict_metadata(sample, expected):
    df = sample.to_pandas()
    df["kind"] = df["kind"].astype("category")
    df[SET] = df[SET].astype("category")
    df["metadata"] = [dict(m) for m in df["metadata"]]  # dicts: Arrow makes a struct of the keys
    assert pa.Table.from_pandas(df).schema.field("metadata").type.num_fields > 1
    assert _rows(ItemTable.from_arrow(df, set_column=SET)) == expected


def test_metadata_as_key_value_lists():
    entries = pa.array(
        [[{"key": "a", "value": "1"}], [], None, [{"key": "b", "value": "2"}, {"key": "c", "value": "3"}]],
        pa.list_(pa.struct([("key", pa.string()), ("value", pa.string())])),
    )
    pairs = pa.array([[["a", "1"]], [], None, [["b", "2"], ["c", "3"]]], pa.list_(pa.list_(pa.string())))
    want = [{"a": "1"}, {}, {}, {"b": "2", "c": "3"}]
    for md in (entries, pairs):
        t = ItemTable.from_arrow(pa.table({"content": list("wxyz"), "tokens": [1, 2, 3, 4], "metadata": md}))
        assert [dict(t.row(i).metadata) for i in range(4)] == want


def test_metadata_lists_that_are_not_pairs_name_the_row():
    pairs = pa.array([[["a", "1"]], [["b"]]], pa.list_(pa.list_(pa.string())))
    with pytest.raises(ValueError, match=r"column 'metadata', row 1: a metadata entry is not a \[key, value\] pair"):
        ItemTable.from_arrow(pa.table({"content": ["x", "y"], "tokens": [1, 2], "metadata": pairs}))


def test_struct_metadata_with_non_string_values_is_a_clear_error():
    df = pd.DataFrame({"content": ["x"], "tokens": [1], "metadata": [{"n": 1}]})
    with pytest.raises(InvalidInputTypeError, match=r"column 'metadata' .*field 'n' must hold strings"):
        ItemTable.from_arrow(df)


@pytest.mark.parametrize("column", ["priority", "original_tokens", "tokens"])
def test_float_integer_columns(column):
    base = {"content": ["a", "b", "c"], "tokens": [1.0, 2.0, 3.0]}
    ok = pd.DataFrame({**base, column: [1.0, float("nan"), 3.0]})
    if column == "tokens":
        with pytest.raises(ValueError, match=r"column 'tokens', row 1: null"):
            ItemTable.from_arrow(ok)
    else:
        t = ItemTable.from_arrow(ok)
        assert [getattr(t.row(i), column) for i in range(3)] == [1, None, 3]
    bad = pd.DataFrame({**base, column: [1.0, 2.0, 2.5]})
    with pytest.raises(
        InvalidInputTypeError, match=rf"column '{column}', row 2: is not a whole number .*\(value 2.5\)"
    ):
        ItemTable.from_arrow(bad)
    with pytest.raises(InvalidInputTypeError, match=rf"column '{column}', row 0: .*\(value inf\)"):
        ItemTable.from_arrow(pd.DataFrame({**base, column: [float("inf"), 2.0, 3.0]}))
