"""A column scorer reads NaN as a missing value, like null, on every input path (issue 26.17:
a pandas NaN reached Arrow as null and scored the default, while an Arrow, polars or Parquet
NaN scored NaN). Each path below carries a value, a null (where it can hold one), a NaN and
an infinity; the scores must be value, default, default, infinity on every one."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import cupel_np as c

DEFAULT = 0.25
SIG = [0.5, None, math.nan, math.inf]
WANT = [0.5, DEFAULT, DEFAULT, math.inf]
BASE = {"content": [f"x{i}" for i in range(4)], "tokens": [1, 1, 1, 1]}


def _scores(items) -> list[float]:
    policy = c.Policy(c.ColumnScorer("sig", DEFAULT))
    res = c.sweep(items, c.ContextBudget(10, 10), [("v", policy)])
    return [float(x) for x in np.asarray(res.scores[:, 0])]


def _arrow() -> pa.Table:
    return pa.table({**BASE, "sig": pa.array(SIG, pa.float64())})


def _same(got: list[float], want: list[float]) -> None:
    assert not any(math.isnan(x) for x in got), got
    assert got == want, got


def test_arrow():
    _same(_scores(c.ItemTable.from_arrow(_arrow())), WANT)


def test_parquet(tmp_path):
    pq.write_table(_arrow(), tmp_path / "i.parquet")
    _same(_scores(c.ItemTable.from_parquet(tmp_path / "i.parquet")), WANT)


def test_pandas_float_and_nullable_float():
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({**BASE, "sig": [0.5, None, math.nan, math.inf]})  # float64: None is NaN there
    _same(_scores(c.ItemTable.from_arrow(df)), WANT)
    df["sig"] = pd.array([0.5, pd.NA, math.nan, math.inf], dtype="Float64")
    _same(_scores(c.ItemTable.from_arrow(df)), WANT)


def test_polars_keeps_nan_apart_from_null():
    pl = pytest.importorskip("polars")
    df = pl.DataFrame({**BASE, "sig": pl.Series([0.5, None, math.nan, math.inf], dtype=pl.Float64)})
    assert df["sig"].null_count() == 1 and df["sig"].is_nan().sum() == 1  # both kinds reach cupel_np
    _same(_scores(c.ItemTable.from_arrow(df)), WANT)


def test_a_dict_of_columns():
    _same(_scores(c.ItemTable.from_arrow({**BASE, "sig": SIG})), WANT)


def test_dicts_and_context_items_read_metadata():
    meta = [{"sig": "0.5"}, {}, {"sig": "NaN"}, {"sig": "inf"}]
    rows = [{"content": f"x{i}", "tokens": 1, "metadata": m} for i, m in enumerate(meta)]
    _same(_scores(c.ItemTable.from_items(rows)), WANT)
    items = [c.ContextItem(content=f"x{i}", tokens=1, metadata=m) for i, m in enumerate(meta)]
    _same(_scores(c.ItemTable.from_items(items)), WANT)


def test_an_item_field_column():
    t = pa.table({**BASE, "future_relevance_hint": pa.array([0.5, None, math.nan, 0.75], pa.float64())})
    policy = c.Policy(c.ColumnScorer("future_relevance_hint", DEFAULT))
    res = c.sweep(c.ItemTable.from_arrow(t), c.ContextBudget(10, 10), [("v", policy)])
    _same([float(x) for x in np.asarray(res.scores[:, 0])], [0.5, DEFAULT, DEFAULT, 0.75])
