"""Items from a file, a directory (hive partitions as columns) or a list of files, in process."""

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

import cupel_np as c
from cupel_np.errors import InvalidConfigError, InvalidInputTypeError
from cupel_np.io import sweep_parquet, write_sweep
from cupel_np.model.datasets import first_repeated_set, pieces, read_piece, read_table, runs_are_sets

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample_sessions.parquet"
VARIANTS = [("chat", c.preset("chat")), ("rag", c.preset("rag"))]
BUDGET = c.ContextBudget(8000, 6000, 1000)


@pytest.fixture(scope="module")
def sample():
    return pq.read_table(SAMPLE)


def _hive(tmp_path, sample, parts=3):
    """The sample split by a derived ``day`` column into hive directories, day 0 first."""
    keys = sample.column("session_id").to_numpy(zero_copy_only=False)
    day = np.array([int(k[-4:]) % parts for k in keys])
    root = tmp_path / "hive"
    for d in range(parts):
        (root / f"day={d}").mkdir(parents=True)
        pq.write_table(sample.filter(pa.array(day == d)), root / f"day={d}" / "part-0.parquet", row_group_size=700)
    return root, day


def test_directory_with_hive_column_as_set_column_and_filter(tmp_path, sample):
    root, day = _hive(tmp_path, sample)
    t = read_table(root)
    # partition values are strings, as written in the path (never type-guessed)
    assert t.num_rows == sample.num_rows and t.schema.field("day").type == pa.string()
    assert t.column("day").to_pylist() == [str(d) for d in sorted(day.tolist())]  # directories in sorted order
    by_day = c.ItemTable.from_parquet(root, set_column="day")
    assert by_day.n_sets == 3 and by_day.set_keys == ["0", "1", "2"]
    one = c.ItemTable.from_parquet(root, set_column="session_id", filter=ds.field("day") == "1")
    assert one.n == int((day == 1).sum()) and one.n_sets == 100
    order = np.argsort(day, kind="stable")  # the rows as the directory reads them
    ref = c.sweep(c.ItemTable.from_arrow(sample.take(pa.array(order)), set_column="session_id"), BUDGET, VARIANTS)
    got = c.sweep(c.ItemTable.from_parquet(root, set_column="session_id"), BUDGET, VARIANTS)
    assert got.items_table().drop_columns([]).equals(ref.items_table())


def test_list_of_files_in_given_order_with_unified_schema(tmp_path, sample):
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    pq.write_table(sample.slice(0, 100).drop_columns(["tags", "priority"]), a)  # columns missing here
    pq.write_table(sample.slice(100, 50), b)
    t = read_table([b, a])
    assert t.num_rows == 150 and "tags" in t.column_names and "priority" in t.column_names
    assert (
        t.column("content").to_pylist()
        == sample.slice(100, 50).column("content").to_pylist() + sample.slice(0, 100).column("content").to_pylist()
    )
    assert t.slice(50).column("priority").null_count == 100
    items = c.ItemTable.from_parquet([b, a], set_column="session_id")
    assert items.n == 150


def test_errors_name_the_path(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(InvalidConfigError, match="holds no Parquet files"):
        read_table(tmp_path / "empty")
    with pytest.raises(InvalidConfigError, match="items file not found: .*nope.parquet"):
        read_table([SAMPLE, tmp_path / "nope.parquet"])
    with pytest.raises(InvalidConfigError, match="list of items files is empty"):
        read_table([])
    (tmp_path / "junk.parquet").write_bytes(b"junk")
    with pytest.raises(InvalidInputTypeError, match="cannot read Parquet file .*junk.parquet"):
        read_table([SAMPLE, tmp_path / "junk.parquet"])
    with pytest.raises(InvalidConfigError, match="column 'nope' not found"):
        read_table(SAMPLE, columns=["nope"])


def test_pieces_cover_every_row_once_in_order(tmp_path, sample):
    root, _ = _hive(tmp_path, sample)
    full = read_table(root)
    for n in (1, 2, 5, 40):
        ps, schema = pieces(root, n)
        assert [p.first_row for p in ps] == list(np.cumsum([0] + [p.num_rows for p in ps[:-1]]))
        got = pa.concat_tables([read_piece(p, schema, str(root)) for p in ps])
        assert got.equals(full)
        assert len(ps) >= min(n, 3)


def test_set_runs():
    assert runs_are_sets(pa.array(["a", "a", "b", "c", "c"]))
    assert not runs_are_sets(pa.array(["a", "b", "a"]))
    assert runs_are_sets(pa.array([], pa.string()))
    assert first_repeated_set(pa.chunked_array([["a", "b"], ["b", "c", "a", "c"]])) == "a"
    assert first_repeated_set(pa.array([1, 1, 2])) is None


def _in_memory(source, tmp_path):
    out = tmp_path / "mem"
    write_sweep(c.sweep(c.ItemTable.from_parquet(source, set_column="session_id"), BUDGET, VARIANTS), out)
    return out


def _same_outputs(a: Path, b: Path):
    for name in ("items", "diffs", "variants"):
        x, y = pq.read_table(a / f"{name}.parquet"), pq.read_table(b / f"{name}.parquet")
        if name == "variants":
            x, y = (t.sort_by([("variant", "ascending"), ("session_id", "ascending")]) for t in (x, y))
        assert x.equals(y.cast(x.schema)), name


def test_sweep_parquet_streams_a_directory(tmp_path, sample):
    d = tmp_path / "sorted"
    d.mkdir()
    cuts = [0, 999, 5000, sample.num_rows]  # sets split across files, still contiguous
    for i in range(3):
        pq.write_table(sample.slice(cuts[i], cuts[i + 1] - cuts[i]), d / f"f{i}.parquet", row_group_size=400)
    totals = sweep_parquet(d, BUDGET, VARIANTS, tmp_path / "out", set_column="session_id", chunk_rows=1000)
    assert totals["chunks"] > 3 and totals["sets"] == 300
    _same_outputs(tmp_path / "out", _in_memory(d, tmp_path))


def test_sweep_parquet_groups_non_contiguous_sets_in_memory(tmp_path, sample):
    t = sample.take(pa.array(np.random.default_rng(1).permutation(sample.num_rows)))
    d = tmp_path / "shuffled"
    d.mkdir()
    for i in range(4):
        pq.write_table(t.slice(i * 2300, 2300), d / f"f{i}.parquet")
    totals = sweep_parquet(d, BUDGET, VARIANTS, tmp_path / "out", set_column="session_id", chunk_rows=500)
    assert totals["chunks"] == 1 and totals["rows"] == sample.num_rows and totals["sets"] == 300
    _same_outputs(tmp_path / "out", _in_memory(d, tmp_path))
    with pytest.raises(
        InvalidConfigError,
        match=r"set 'session-\d+' .*is not contiguous in .*shuffled.*needs about [\d.]+ MiB .*--dask",
    ):
        sweep_parquet(d, BUDGET, VARIANTS, tmp_path / "o2", set_column="session_id", memory_limit=1000)
    assert not (tmp_path / "o2").exists() or not list((tmp_path / "o2").iterdir())


def test_cli_takes_directories_and_file_lists(tmp_path, sample, capsys):
    from cupel_np.cli import main

    root, day = _hive(tmp_path, sample)
    assert main(["validate", str(root), "--set-column", "day"]) == 0
    assert f"ok — {sample.num_rows:,} rows, 3 set(s)" in capsys.readouterr().out
    files = [str(root / f"day={d}" / "part-0.parquet") for d in (2, 0)]
    assert (
        main(
            [
                "sensitivity",
                *files,
                "--preset",
                "chat",
                "--preset",
                "rag",
                "--max-tokens",
                "8000",
                "--target-tokens",
                "6000",
                "--set-column",
                "session_id",
                "--out",
                str(tmp_path / "o"),
                "--quiet",
                "--json",
            ]
        )
        == 0
    )
    import json

    out = json.loads(capsys.readouterr().out)
    assert out["items"] == int(((day == 2) | (day == 0)).sum()) and out["sets"] == 200
    assert (
        main(
            [
                "run",
                str(root),
                "--preset",
                "chat",
                "--max-tokens",
                "8000",
                "--target-tokens",
                "6000",
                "--set-column",
                "session_id",
                "--set",
                "session-0001",
                "--json",
            ]
        )
        == 0
    )


def test_glob_pattern(tmp_path, sample):
    root, day = _hive(tmp_path, sample)
    t = read_table(str(root / "day=*" / "*.parquet"))
    assert t.num_rows == sample.num_rows and t.column("day").to_pylist() == [str(d) for d in sorted(day.tolist())]
    with pytest.raises(InvalidConfigError, match="no items files match"):
        read_table(str(tmp_path / "nothing-*.parquet"))


def test_hive_partition_values_are_strings_as_written(tmp_path, sample, capsys):
    """``session=007`` and ``session=7`` are two item sets (Arrow's type guess made both the
    integer 7: one set, and ``--set 007`` found nothing)."""
    from cupel_np.cli import main

    root = tmp_path / "hive"
    part = sample.slice(0, 40).drop_columns(["session_id"])
    for key in ("007", "7"):
        (root / f"session={key}").mkdir(parents=True)
        pq.write_table(part, root / f"session={key}" / "part-0.parquet")
    items = c.ItemTable.from_parquet(root, set_column="session")
    assert items.n_sets == 2 and sorted(items.set_keys) == ["007", "7"]
    argv = ["run", str(root), "--set-column", "session", "--set", "007", "--preset", "chat"]
    assert main(argv + ["--max-tokens", "8000", "--target-tokens", "6000", "--quiet"]) == 0
    assert "included" in capsys.readouterr().out
