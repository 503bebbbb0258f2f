"""The command line streams (chunks of whole item sets) and writes what the in-memory run
writes; validate streams and lists the same problems at the same global rows; a run that
cannot fit stops before it starts."""

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cupel_np import cli
from cupel_np.data import sample_path
from cupel_np.errors import InvalidConfigError
from cupel_np.io.parquet import sweep_parquet
from cupel_np.model.datasets import (
    CHUNK_FIXED_BYTES,
    estimate_in_memory_peak,
    format_size,
    open_dataset,
    parse_size,
    set_runs,
)
from cupel_np.model.files import load_grid_file

BUDGET = ["--max-tokens", "8000", "--target-tokens", "6000"]
SORT = {"items": ["input_row"], "diffs": ["session_id", "content"], "variants": ["variant", "session_id"]}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """The first 25 sessions of the sample, sets contiguous, in row groups of 1 row (so
    ``--chunk-rows 1`` streams exactly one set per chunk) and of 37 rows (sets straddle them)."""
    t = pq.read_table(sample_path())
    keys = t.column("session_id").unique()[:25]
    import pyarrow.compute as pc

    t = t.filter(pc.is_in(t.column("session_id"), value_set=keys))
    d = tmp_path_factory.mktemp("corpus")
    pq.write_table(t, d / "rg1.parquet", row_group_size=1)
    pq.write_table(t, d / "rg37.parquet", row_group_size=37)
    return d, t


def run(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _tables(out_dir):
    res = {}
    for name, keys in SORT.items():
        t = pq.read_table(out_dir / f"{name}.parquet")
        res[name] = t.replace_schema_metadata(None).sort_by([(k, "ascending") for k in keys])
    return res


@pytest.mark.parametrize(
    "file,chunk", [("rg1.parquet", 1), ("rg37.parquet", 1), ("rg37.parquet", 100), ("rg37.parquet", 400)]
)
def test_streamed_outputs_equal_in_memory(capsys, tmp_path, corpus, file, chunk):
    d, t = corpus
    args = [
        "sensitivity",
        str(d / file),
        "--preset",
        "chat",
        "--preset",
        "rag",
        "--preset",
        "document_qa",
        *BUDGET,
        "--set-column",
        "session_id",
        "--quiet",
        "--json",
    ]
    code, out, err = run(capsys, *args, "--out", str(tmp_path / "mem"), "--memory-limit", "8G")
    assert code == 0, err
    assert "streamed" not in json.loads(out)
    code, out, err = run(capsys, *args, "--out", str(tmp_path / "str"), "--chunk-rows", str(chunk))
    assert code == 0, err
    summary = json.loads(out)
    assert summary["items"] == t.num_rows and summary["sets"] == 25
    if chunk == 1 and file == "rg1.parquet":
        assert summary["streamed"]["chunks"] == 25  # one set per chunk
    assert summary["streamed"]["chunks"] > 1
    mem, st = _tables(tmp_path / "mem"), _tables(tmp_path / "str")
    for name in SORT:
        assert mem[name].schema == st[name].schema, name
        assert mem[name].equals(st[name]), name
    assert (tmp_path / "str" / "report.html").stat().st_size > 0


def test_sweep_streams_when_the_input_is_over_the_limit(capsys, tmp_path, corpus):
    d, t = corpus
    grid = tmp_path / "grid.toml"
    grid.write_text(
        'presets = ["chat", "rag"]\nset_column = "session_id"\n[[budgets]]\nmax_tokens = 8000\ntarget_tokens = 6000\n'
    )
    base = ["sweep", str(d / "rg37.parquet"), "--grid", str(grid), "--quiet", "--json"]
    code, out, err = run(capsys, *base, "--out", str(tmp_path / "mem"), "--memory-limit", "8G")
    assert code == 0, err
    # the estimate for 25 sessions is about 1 MiB: a 400K limit streams, in chunks sized by the limit
    code, out, err = run(capsys, *base, "--out", str(tmp_path / "str"), "--memory-limit", "400K")
    assert code == 0, err
    assert json.loads(out)["streamed"]["chunks"] > 1
    mem, st = _tables(tmp_path / "mem"), _tables(tmp_path / "str")
    for name in SORT:
        assert mem[name].equals(st[name]), name


def test_one_set_over_the_limit_stops_before_it_starts(capsys, tmp_path, corpus):
    d, _ = corpus
    code, out, err = run(
        capsys,
        "sensitivity",
        str(d / "rg37.parquet"),
        "--preset",
        "chat",
        "--preset",
        "rag",
        *BUDGET,
        "--set-column",
        "session_id",
        "--out",
        str(tmp_path / "o"),
        "--memory-limit",
        "20K",
    )
    assert code == 2
    assert "estimated to need" in err and "over the memory limit of" in err and "--memory-limit" in err
    assert "item set 'session-" in err
    assert not (tmp_path / "o").exists()  # nothing written
    code, out, err = run(
        capsys,
        "sensitivity",
        str(d / "rg37.parquet"),
        "--preset",
        "chat",
        "--preset",
        "rag",
        *BUDGET,
        "--out",
        str(tmp_path / "o2"),
        "--memory-limit",
        "100K",
    )
    assert code == 2 and "no set column" in err and "Dask" in err


def test_parse_size():
    assert parse_size("2G") == 2 * 2**30 and parse_size("500M") == 500 * 2**20
    assert parse_size("1.5GiB") == int(1.5 * 2**30) and parse_size("1024") == 1024
    for bad in ("", "2X", "-1G", "0"):
        with pytest.raises(InvalidConfigError):
            parse_size(bad)


def test_set_runs_across_row_groups(tmp_path):
    pq.write_table(pa.table({"s": ["a", "a", "a", "b", "b", "a"]}), tmp_path / "f.parquet", row_group_size=2)
    keys, lengths = set_runs(open_dataset(tmp_path / "f.parquet"), "s")
    assert keys.to_pylist() == ["a", "b", "a"] and lengths.tolist() == [3, 2, 1]


# ----------------------------------------------------------------------------- validate
def _bad_file(path, rg):
    rng = np.random.default_rng(3)
    n = 500
    content = [f"item {i}" for i in range(n)]
    for r in (3, 140, 141, 377, 499):
        content[r] = ""
    tokens = rng.integers(1, 100, n).astype(object)
    for r in (0, 250, 251, 252, 253, 254, 255, 256):
        tokens[r] = None
    kind = ["Message"] * n
    kind[260] = "   "
    sid = np.repeat(np.arange(50), 10).astype(object)
    sid[333] = None
    pq.write_table(
        pa.table(
            {
                "content": content,
                "tokens": pa.array(list(tokens), pa.int64()),
                "kind": kind,
                "session_id": pa.array(list(sid), pa.int64()),
            }
        ),
        path,
        row_group_size=rg,
    )


@pytest.mark.parametrize("chunk", [1, 64, 200])
def test_validate_streams_with_the_same_problems_and_rows(capsys, tmp_path, chunk):
    _bad_file(tmp_path / "bad.parquet", 50)
    base = ["validate", str(tmp_path / "bad.parquet"), "--set-column", "session_id", "--json"]
    code, out, err = run(capsys, *base, "--memory-limit", "8G")
    assert code == 2
    mem = json.loads(out)
    code, out, err = run(capsys, *base, "--chunk-rows", str(chunk))
    assert code == 2
    st = json.loads(out)
    assert st["problems"] == mem["problems"]
    assert st["rows"] == mem["rows"] == 500
    assert any("rows 3 (" in p or "rows 3," in p or "at rows 3" in p for p in mem["problems"])
    assert any("333" in p for p in mem["problems"])


def test_validate_streams_a_clean_file(capsys, tmp_path, corpus):
    d, t = corpus
    base = ["validate", str(d / "rg37.parquet"), "--set-column", "session_id", "--json"]
    code, out, _ = run(capsys, *base, "--memory-limit", "8G")
    mem = json.loads(out)
    code2, out, _ = run(capsys, *base, "--chunk-rows", "40")
    assert code == code2 == 0
    assert json.loads(out) == mem and mem["sets"] == 25


def test_sets_not_contiguous_are_grouped_when_they_fit_and_refused_when_not(capsys, tmp_path, corpus):
    d, t = corpus
    rng = np.random.default_rng(2)
    shuffled = t.take(pa.array(rng.permutation(t.num_rows)))
    pq.write_table(shuffled, tmp_path / "shuf.parquet", row_group_size=100)
    base = [
        "sensitivity",
        str(tmp_path / "shuf.parquet"),
        "--preset",
        "chat",
        "--preset",
        "rag",
        *BUDGET,
        "--set-column",
        "session_id",
        "--quiet",
        "--json",
    ]
    code, _, err = run(capsys, *base, "--out", str(tmp_path / "mem"), "--memory-limit", "8G")
    assert code == 0, err
    code, out, err = run(capsys, *base, "--out", str(tmp_path / "str"), "--chunk-rows", "50")
    assert code == 0, err
    mem, st = _tables(tmp_path / "mem"), _tables(tmp_path / "str")
    for name in SORT:
        assert mem[name].equals(st[name]), name
    code, out, err = run(capsys, *base, "--out", str(tmp_path / "no"), "--memory-limit", "200K")
    assert code == 2 and "is not contiguous" in err and "--dask" in err and "limit 200.0 KiB" in err


# ----------------------------------------------------------------------------- variant count
def _grid(path, n_budgets: int, set_column: bool = True):
    """A grid of 2 presets x ``n_budgets`` budgets."""
    lines = ['presets = ["chat", "rag"]'] + (['set_column = "session_id"'] if set_column else [])
    for i in range(n_budgets):
        lines += ["[[budgets]]", f"max_tokens = {8000 - 100 * i}", f"target_tokens = {6000 - 100 * i}"]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _between(path) -> int:
    """A memory limit over the estimate for 2 variants and under the one for 48."""
    d = open_dataset(path)
    few, many = estimate_in_memory_peak(d, n_variants=2), estimate_in_memory_peak(d, n_variants=48)
    assert many > 1.5 * few  # the result matrices of 48 variants weigh more than the input
    return (few + many) // 2


def test_many_variants_stream_where_few_run_in_memory(capsys, tmp_path, corpus):
    d, t = corpus
    src = d / "rg37.parquet"
    limit = str(_between(src))
    out = {}
    for n in (1, 24):
        base = ["sweep", str(src), "--grid", _grid(tmp_path / f"g{n}.toml", n), "--quiet", "--json"]
        code, text, err = run(capsys, *base, "--out", str(tmp_path / f"o{n}"), "--memory-limit", limit)
        assert code == 0, err
        out[n] = json.loads(text)
    assert len(out[1]["variants"]) == 2 and len(out[24]["variants"]) == 48
    assert "streamed" not in out[1]  # 2 variants fit in memory
    assert out[24]["streamed"]["chunks"] > 1 and out[24]["items"] == t.num_rows  # 48 do not: chunks


def test_chunks_hold_fewer_rows_for_more_variants(tmp_path, corpus):
    d, _ = corpus
    src = d / "rg37.parquet"
    # streams at any variant count, in chunks of a few row groups
    limit = CHUNK_FIXED_BYTES + estimate_in_memory_peak(open_dataset(src), n_variants=2) // 3
    rows = {}
    for n in (1, 24):
        grid, _ = load_grid_file(_grid(tmp_path / f"g{n}.toml", n))
        tot = sweep_parquet(src, None, grid, tmp_path / f"o{n}", set_column="session_id", memory_limit=limit)
        rows[n] = tot["chunk_rows"]
        # a chunk (whole sets, at most that many rows, read within row groups) is estimated to fit
        assert CHUNK_FIXED_BYTES + estimate_in_memory_peak(open_dataset(src), rows[n], n_variants=2 * n) <= limit
    assert rows[24] < rows[1] / 2


def test_without_a_set_column_many_variants_are_refused_naming_the_need(capsys, tmp_path, corpus):
    d, _ = corpus
    src = d / "rg37.parquet"
    limit = _between(src)
    base = ["sweep", str(src), "--quiet", "--memory-limit", str(limit)]
    code, _, err = run(capsys, *base, "--grid", _grid(tmp_path / "g1.toml", 1, False), "--out", str(tmp_path / "o1"))
    # it runs (one set, in memory); that one set fails its budget, which is now exit 2 (issue 26.7)
    assert code == 2 and "every (variant, set) cell failed" in err and "no set column" not in err, err
    code, _, err = run(capsys, *base, "--grid", _grid(tmp_path / "g24.toml", 24, False), "--out", str(tmp_path / "o24"))
    assert code == 2 and "no set column" in err and "for 48 variants" in err
    need = estimate_in_memory_peak(open_dataset(src), n_variants=48)
    assert format_size(need) in err and format_size(limit) in err
    assert not (tmp_path / "o24").exists()


def test_sets_not_contiguous_are_refused_when_many_variants_would_not_fit(capsys, tmp_path, corpus):
    _, t = corpus
    shuffled = t.take(pa.array(np.random.default_rng(2).permutation(t.num_rows)))
    src = tmp_path / "shuf.parquet"
    pq.write_table(shuffled, src, row_group_size=100)
    limit = str(_between(src))
    base = ["sweep", str(src), "--chunk-rows", "50", "--memory-limit", limit, "--quiet"]
    code, _, err = run(capsys, *base, "--grid", _grid(tmp_path / "g1.toml", 1), "--out", str(tmp_path / "o1"))
    assert code == 0, err  # 2 variants: the sets are grouped in memory
    code, _, err = run(capsys, *base, "--grid", _grid(tmp_path / "g24.toml", 24), "--out", str(tmp_path / "o24"))
    assert code == 2 and "is not contiguous" in err and "for 48 variants" in err


def test_a_chunks_results_are_freed_before_the_next_chunk_is_swept(tmp_path, corpus, monkeypatch):
    import gc
    import weakref

    from cupel_np.io import parquet as pio

    d, _ = corpus
    real = pio._sweep_chunk
    held: list = []  # weak references to the previous chunk's result, table and output parts
    alive: list[int] = []

    def recording(chunk, table, *rest):
        gc.collect()
        alive.append(sum(r() is not None for r in held))
        res, parts = real(chunk, table, *rest)
        held[:] = [weakref.ref(res), weakref.ref(table), *(weakref.ref(t) for t in parts.values())]
        return res, parts

    monkeypatch.setattr(pio, "_sweep_chunk", recording)
    grid, _ = load_grid_file(_grid(tmp_path / "g.toml", 2))
    tot = sweep_parquet(d / "rg37.parquet", None, grid, tmp_path / "o", set_column="session_id", chunk_rows=100)
    assert tot["chunks"] == len(alive) > 2
    assert alive == [0] * len(alive)
