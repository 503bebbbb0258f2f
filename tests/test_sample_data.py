"""The committed sample corpus is exactly what data/make_sample.py generates, it has the
features the demo is meant to show, it ships inside the package (data/ links to it, one copy),
and the demo finds it from any working directory."""

import runpy
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data"
PKG_DATA = ROOT / "cupel_np" / "data"


def test_sample_is_reproducible_and_small():
    mod = runpy.run_path(str(DATA / "make_sample.py"))
    import numpy as np

    rows = mod["make_rows"](np.random.default_rng(mod["SEED"]))
    schema = mod["SCHEMA"]
    cols = {f.name: [r[f.name] if f.name != "metadata" else list(r["metadata"].items()) for r in rows] for f in schema}
    fresh = pa.Table.from_pydict(cols, schema=schema)
    committed = pq.read_table(DATA / "sample_sessions.parquet")
    assert committed.equals(fresh)
    assert (DATA / "sample_sessions.parquet").stat().st_size < 5_000_000


def test_sample_has_the_interesting_cases():
    t = pq.read_table(DATA / "sample_sessions.parquet")
    assert len(pc.unique(t["session_id"])) == 300
    assert pc.sum(t["pinned"]).as_py() == 300  # one pinned system prompt per session
    kinds = set(t["kind"].to_pylist())
    assert {"Message", "message", "MESSAGE", "ToolOutput", "tooloutput", "Document", "Memory", "SystemPrompt"} <= kinds
    tags = set(pc.list_flatten(t["tags"]).to_pylist())
    assert any(x != x.lower() for x in tags) and any(x == x.lower() for x in tags)
    keys = [(s, c) for s, c in zip(t["session_id"].to_pylist(), t["content"].to_pylist())]
    assert len(keys) > len(set(keys))  # exact duplicates inside sessions
    trust = pc.map_lookup(t["metadata"], "cupel:trust", "first").drop_null().to_pylist()
    assert "high" in trust and any(v.replace(".", "", 1).isdigit() for v in trust)
    assert pc.max(t["tokens"]).as_py() > 3000 and t["timestamp"].null_count > 0


def test_one_copy_shipped_in_the_package():
    import tomli

    from cupel_np.data import example_path, sample_path

    assert sample_path() == (PKG_DATA / "sample_sessions.parquet").resolve() and sample_path().is_file()
    assert (DATA / "sample_sessions.parquet").resolve() == sample_path()  # data/ links to the package copy
    for name in ("grid.toml", "policies.toml"):
        assert (DATA / "examples" / name).resolve() == example_path(name)
    globs = tomli.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["cupel_np"]
    shipped = {p.resolve() for g in globs for p in (ROOT / "cupel_np").glob(g)}
    assert {sample_path(), example_path("grid.toml"), example_path("policies.toml")} <= shipped
    assert runpy.run_path(str(DATA / "make_sample.py"))["OUT"].resolve() == sample_path()


def test_demo_runs_from_any_directory(tmp_path, monkeypatch, capsys):
    import json

    from cupel_np.cli import commands as cli

    monkeypatch.chdir(tmp_path)  # no data/ here: the demo must use the packaged sample
    assert cli.main(["demo", "--quiet", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["items"] == pq.read_metadata(DATA / "sample_sessions.parquet").num_rows
    assert summary["sets"] == 300 and len(summary["variants"]) == 14
    for name in ("items.parquet", "diffs.parquet", "variants.parquet", "report.html"):
        assert (tmp_path / "cupel-np-demo" / name).is_file()
