"""Parquet in and out: sweep outputs with metadata, streaming a corpus chunk by chunk."""

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import cupel_np as c
from cupel_np.errors import InvalidConfigError
from cupel_np.io import sweep_parquet, write_sweep

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample_sessions.parquet"
VARIANTS = [
    ("chat", c.preset("chat")),
    ("rag", c.preset("rag")),
    ("small", c.preset("chat"), c.ContextBudget(4000, 3000)),
]
BUDGET = c.ContextBudget(8000, 6000, 1000)


@pytest.fixture(scope="module")
def in_memory(tmp_path_factory):
    t = c.ItemTable.from_parquet(SAMPLE, set_column="session_id")
    out = tmp_path_factory.mktemp("mem")
    write_sweep(c.sweep(t, BUDGET, VARIANTS), out)
    return out


def test_outputs_carry_policies_and_budgets(in_memory):
    for name in ("items", "diffs", "variants"):
        md = pq.read_metadata(in_memory / f"{name}.parquet").metadata
        meta = json.loads(md[b"cupel_np.variants"])
        assert [m["label"] for m in meta] == ["chat", "rag", "small"]
        assert c.Policy.from_dict(meta[1]["policy"]) == c.preset("rag")
        assert c.ContextBudget.from_dict(meta[2]["budget"]) == c.ContextBudget(4000, 3000)
    assert not list(in_memory.glob(".*.tmp"))


@pytest.mark.parametrize("group_rows, chunk_rows", [(500, 1), (777, 3000), (100_000, 10)])
def test_streaming_equals_in_memory(tmp_path, in_memory, group_rows, chunk_rows):
    src = tmp_path / "items.parquet"
    pq.write_table(pq.read_table(SAMPLE), src, row_group_size=group_rows)  # sets straddle groups
    totals = sweep_parquet(src, BUDGET, VARIANTS, tmp_path / "out", set_column="session_id", chunk_rows=chunk_rows)
    assert totals["rows"] == pq.read_metadata(SAMPLE).num_rows and totals["sets"] == 300
    for name in ("diffs", "variants", "items"):
        a = pq.read_table(tmp_path / "out" / f"{name}.parquet")
        b = pq.read_table(in_memory / f"{name}.parquet")
        assert a.num_rows == b.num_rows
        if name == "variants":  # streamed: variant-major within each chunk
            a, b = (x.sort_by([("variant", "ascending"), ("session_id", "ascending")]) for x in (a, b))
        assert a.equals(b.cast(a.schema)), name


def test_non_contiguous_set_is_named(tmp_path):
    t = pq.read_table(SAMPLE)
    t = pa.concat_tables([t, t.slice(0, 3)])  # session-0000 reappears at the end
    src = tmp_path / "bad.parquet"
    pq.write_table(t, src, row_group_size=1000)
    with pytest.raises(InvalidConfigError, match="set 'session-0000' .* is not contiguous.*cupel_np.dask.sweep"):
        sweep_parquet(src, BUDGET, VARIANTS, tmp_path / "out", set_column="session_id", chunk_rows=2000, memory_limit=0)
    assert not (tmp_path / "out" / "diffs.parquet").exists()
    assert not list((tmp_path / "out").glob("*.tmp")) and not list((tmp_path / "out").glob(".*.tmp"))


def test_missing_file_and_column(tmp_path):
    with pytest.raises(InvalidConfigError, match="items file not found"):
        sweep_parquet(tmp_path / "nope.parquet", BUDGET, VARIANTS, tmp_path, set_column="s")
    with pytest.raises(InvalidConfigError, match="set column 'sid' not found"):
        sweep_parquet(SAMPLE, BUDGET, VARIANTS, tmp_path, set_column="sid")


# ----------------------------------------------------------------- output file permissions
@pytest.fixture
def umask():
    """Set the process umask for one test and restore it afterwards."""
    import os

    old = os.umask(0o022)
    os.umask(old)
    yield lambda m: os.umask(m)
    os.umask(old)


@pytest.mark.parametrize("mask", [0o022, 0o002, 0o077])
def test_output_files_get_the_umask_mode(tmp_path, umask, mask):
    """Temp file + rename must not leave mkstemp's 0600 (issue 7, defect 5)."""
    import stat

    from cupel_np.io import atomic_write_bytes

    umask(mask)
    items = [c.ContextItem(f"x{i}", 5) for i in range(3)]
    paths = write_sweep(c.sweep(items, BUDGET, VARIANTS[:2]), tmp_path / "out")
    atomic_write_bytes(tmp_path / "report.html", b"<html></html>")
    files = [*paths.values(), tmp_path / "report.html"]
    for p in files:
        assert stat.S_IMODE(p.stat().st_mode) == 0o666 & ~mask, p


def test_cli_output_files_get_the_umask_mode(tmp_path, umask):
    import stat

    from cupel_np.cli import main

    umask(0o022)
    src = tmp_path / "items.parquet"
    pq.write_table(pa.table({"content": ["a", "b", "c"], "tokens": [1, 2, 3]}), src)
    out = tmp_path / "out"
    assert (
        main(
            [
                "sensitivity",
                str(src),
                "--preset",
                "chat",
                "--preset",
                "rag",
                "--quiet",
                "--max-tokens",
                "10",
                "--target-tokens",
                "5",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    written = sorted(p for p in out.iterdir() if p.is_file())
    assert {p.name for p in written} >= {"items.parquet", "diffs.parquet", "variants.parquet", "report.html"}
    assert {p.name: oct(stat.S_IMODE(p.stat().st_mode)) for p in written} == {p.name: oct(0o644) for p in written}
