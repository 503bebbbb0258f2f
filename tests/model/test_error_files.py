"""Issue 17.3: every input error names the file (the part file of a dataset), the column, the
row in that file and the value, on every path that reads items: ``ItemTable.from_parquet``
(file, directory, glob, list, filter), ``validate``, the CLI's in-memory and streamed runs."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from cupel_np.cli import main
from cupel_np.errors import InvalidConfigError
from cupel_np.io.parquet import validate_items
from cupel_np.model.items import ItemTable


def _part(path: Path, content: list, sets: list, tokens: list | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tokens = tokens or [10] * len(content)
    pq.write_table(pa.table({"content": content, "tokens": tokens, "s": sets}), path, row_group_size=2)


@pytest.fixture
def dataset(tmp_path) -> Path:
    d = tmp_path / "corpus"
    _part(d / "part-0.parquet", ["a", "b", "c"], [1, 1, 2])
    _part(d / "part-1.parquet", ["d", "e", None, "g"], [3, 3, 4, 4])
    return d


BROKEN = "part-1.parquet: column 'content', row 2: null"


@pytest.mark.parametrize("how", ["dir", "glob", "list", "file"])
def test_from_parquet_names_the_part_file_and_its_row(dataset, how):
    src = {
        "dir": dataset,
        "glob": str(dataset / "part-*.parquet"),
        "list": [str(dataset / "part-0.parquet"), str(dataset / "part-1.parquet")],
        "file": dataset / "part-1.parquet",
    }[how]
    with pytest.raises(InvalidConfigError) as err:
        ItemTable.from_parquet(src, set_column="s")
    assert str(err.value) == f"{dataset / BROKEN}"


def test_from_parquet_with_a_filter_names_the_row_in_the_file(dataset):
    with pytest.raises(InvalidConfigError, match=r"part-1\.parquet: column 'content', row 2: null$"):
        ItemTable.from_parquet(dataset, set_column="s", filter=pc.field("s") >= 3)


def test_hive_partition_filter(tmp_path):
    d = tmp_path / "hive"
    _part(d / "day=1" / "x.parquet", ["a", "b"], [1, 2])
    _part(d / "day=2" / "x.parquet", ["c", "", "e"], [3, 4, 5])
    with pytest.raises(InvalidConfigError, match=r"day=2/x\.parquet: column 'content', row 1: empty string$"):
        ItemTable.from_parquet(d, set_column="s", filter=pc.field("day") == "2")  # hive values are strings (issue 26)


def test_table_problems_name_the_source(tmp_path):
    f = tmp_path / "no_tokens.parquet"
    pq.write_table(pa.table({"content": ["a"]}), f)
    with pytest.raises(InvalidConfigError, match=rf"^{f}: items table has no 'tokens' column"):
        ItemTable.from_parquet(f)


def test_validate_lists_rows_by_file(dataset):
    want = [f"column 'content': null at row 2 of {dataset / 'part-1.parquet'}"]
    assert validate_items(dataset)[0] == want
    assert validate_items(dataset, chunk_rows=2)[0] == want
    # one file: rows as before (the command line prefixes the file)
    assert validate_items(dataset / "part-1.parquet")[0] == ["column 'content': null at row 2"]


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "ITEMS", "--preset", "chat", "--set-column", "s", "--set", "4"],
        ["sensitivity", "ITEMS", "--preset", "chat", "--preset", "rag", "--set-column", "s", "--out", "OUT"],
        [
            "sensitivity",
            "ITEMS",
            "--preset",
            "chat",
            "--preset",
            "rag",
            "--set-column",
            "s",
            "--out",
            "OUT",
            "--chunk-rows",
            "2",
        ],
        ["budget", "ITEMS", "--preset", "chat", "--set-column", "s", "--out", "OUT", "--ladder", "100:1000:4"],
    ],
)
def test_cli_paths_name_the_part_file(dataset, tmp_path, capsys, argv):
    argv = [str(dataset) if a == "ITEMS" else str(tmp_path / "out") if a == "OUT" else a for a in argv]
    if argv[0] != "budget":
        argv += ["--max-tokens", "1000", "--target-tokens", "800"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"cupel-np: error: {dataset / BROKEN}", err


def test_streamed_chunks_name_the_row_in_the_file(dataset, tmp_path):
    from cupel_np.io.parquet import sweep_parquet
    from cupel_np.model.budget import ContextBudget
    from cupel_np.model.presets import preset

    variants = [("chat", preset("chat")), ("rag", preset("rag"))]
    with pytest.raises(InvalidConfigError) as err:
        sweep_parquet(dataset, ContextBudget(1000, 800), variants, tmp_path / "o", set_column="s", chunk_rows=1)
    assert str(err.value) == str(dataset / BROKEN)


def test_dask_partition_names_the_part_file_whatever_the_row_order(dataset, tmp_path):
    """A Dask task holds rows of any files in any order (ROW is the input row): its errors
    name the part file and the row in it."""
    import numpy as np
    import pandas as pd

    from cupel_np.io import dask as cdask
    from cupel_np.model.budget import ContextBudget
    from cupel_np.model.datasets import RowSource, read_table
    from cupel_np.model.grid import as_variants
    from cupel_np.model.presets import preset

    t = read_table(dataset)
    order = np.array([6, 5, 4, 3, 2, 1, 0])
    t = t.take(pa.array(order)).append_column(cdask.ROW, pa.array(order))
    vs = as_variants([("chat", preset("chat")), ("rag", preset("rag"))], ContextBudget(1000, 800), allow_budget=True)
    df = t.to_pandas(types_mapper=pd.ArrowDtype)
    with pytest.raises(InvalidConfigError) as err:
        cdask._run_partition(df, 0, ContextBudget(1000, 800), vs, "s", "raise", str(tmp_path / "o"), RowSource(dataset))
    assert str(err.value) == str(dataset / BROKEN)
