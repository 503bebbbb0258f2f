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

    from cupel_np import cli

    monkeypatch.chdir(tmp_path)  # no data/ here: the demo must use the packaged sample
    assert cli.main(["demo", "--quiet", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["items"] == pq.read_metadata(DATA / "sample_sessions.parquet").num_rows
    assert summary["sets"] == 300 and len(summary["variants"]) == 14
    for name in ("items.parquet", "diffs.parquet", "variants.parquet", "report.html"):
        assert (tmp_path / "cupel-np-demo" / name).is_file()


def test_kinds_and_sources_are_not_one_to_one():
    t = pq.read_table(DATA / "sample_sessions.parquet")
    pairs = set(zip(pc.ascii_lower(t["kind"]).to_pylist(), t["source"].to_pylist()))
    kinds_per_source: dict = {}
    sources_per_kind: dict = {}
    for k, s in pairs:
        kinds_per_source.setdefault(s, set()).add(k)
        sources_per_kind.setdefault(k, set()).add(s)
    # swing by kind and swing by source must not be the same table renamed
    assert max(len(v) for v in kinds_per_source.values()) > 1
    assert max(len(v) for v in sources_per_kind.values()) > 1


def test_relevant_label_follows_the_documented_rule():

    t = pq.read_table(DATA / "sample_sessions.parquet")
    assert t.schema.field("relevant").type == pa.bool_() and t["relevant"].null_count == 0
    sim = t["similarity"].to_numpy()
    rel = t["relevant"].to_numpy(zero_copy_only=False)
    assert 0.0 <= sim.min() and sim.max() <= 1.0
    assert 0.05 < rel.mean() < 0.3  # a minority of items matter
    assert (rel == (sim > 0.6)).mean() > 0.9  # similarity drives it (the rule adds a little noise)
    keys: dict = {}
    for s, c, r in zip(t["session_id"].to_pylist(), t["content"].to_pylist(), rel):
        assert keys.setdefault((s, c), r) == r  # exact duplicates share their label


def test_shipped_examples_point_only_at_what_a_pip_user_has():
    """Issue 26.17: a pip install has no EXTENSIONS.md (it is beside the conformance vectors,
    not in the package); the shipped example files must not send a user there."""
    files = sorted((PKG_DATA / "examples").glob("*.toml"))
    assert files
    for p in files:
        assert "EXTENSIONS.md" not in p.read_text(encoding="utf-8"), p.name
