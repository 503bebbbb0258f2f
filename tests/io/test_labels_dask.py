"""``--label-column`` with ``--dask`` on ``cupel-np sensitivity`` and ``sweep``: every task writes
its sets' outcome rows to ``outcomes/part-NNNNN.parquet`` (listed in the manifest), and the
printed token recall lines and JSON outcomes equal the in-process run's, with sets split
across several files and partitions; a bad label names the file, the row and the value."""

import json
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cupel_np import cli
from cupel_np.io import dask as cdask

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "data" / "sample_sessions.parquet"
BUDGET = ["--max-tokens", "4000", "--target-tokens", "3000"]
PRESETS = ["--preset", "chat", "--preset", "rag"]


@pytest.fixture(scope="module")
def items(tmp_path_factory):
    """24 sessions of the sample corpus in random row order, in 3 files (every set spans files,
    so the Dask run shuffles on the set key), and the same rows in one file."""
    t = pq.read_table(SAMPLE)
    keys = t.column("session_id").to_pylist()
    t = t.take(pa.array([i for i, k in enumerate(keys) if int(k.split("-")[1]) < 24]))
    t = t.take(pa.array(np.random.default_rng(7).permutation(t.num_rows)))
    d = tmp_path_factory.mktemp("labels_dask")
    (d / "parts").mkdir()
    third = -(-t.num_rows // 3)
    for i in range(3):
        pq.write_table(t.slice(i * third, third), d / "parts" / f"f{i}.parquet")
    pq.write_table(t, d / "one.parquet")
    return d


def run(capsys, *argv):
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _recall_block(out: str) -> list[str]:
    lines = out.splitlines()
    i = next(k for k, line in enumerate(lines) if line.startswith("token recall by 'relevant'"))
    block = [lines[i]]
    for line in lines[i + 1 :]:
        if not re.fullmatch(r"  \S+ +.*", line):
            break
        block.append(line)
    return block


def _key(t: pa.Table) -> pa.Table:
    return t.select([c for c in t.column_names if c != cdask.SET_FIRST_ROW]).sort_by(
        [("variant", "ascending"), ("session_id", "ascending")]
    )


def test_sensitivity_on_dask_prints_and_writes_the_in_process_outcomes(capsys, tmp_path, items):
    args = ["sensitivity", *PRESETS, *BUDGET, "--set-column", "session_id", "--label-column", "relevant"]
    code, here, err = run(capsys, *args[:1], items / "one.parquet", *args[1:], "--out", tmp_path / "a")
    assert code == 0, err
    code, there, err = run(capsys, *args[:1], items / "parts", *args[1:], "--out", tmp_path / "b", "--dask", "local:2")
    assert code == 0, err
    assert "3 partitions, shuffled on the set key" in there
    assert _recall_block(there) == _recall_block(here) and len(_recall_block(here)) == 3
    parts = sorted((tmp_path / "b" / "outcomes").glob("part-*.parquet"))
    assert len(parts) == 3
    whole = pq.read_table(tmp_path / "a" / "outcomes.parquet")
    assert _key(pa.concat_tables([pq.read_table(p) for p in parts])).equals(_key(whole))
    assert "outcomes/" in json.loads((tmp_path / "b" / "manifest.json").read_text())["outputs"]
    assert "outcomes/" in there.splitlines()[-1]


def test_sweep_on_dask_json_outcomes_equal_in_process(capsys, tmp_path, items):
    grid = tmp_path / "grid.toml"
    grid.write_text('presets = ["chat", "rag", "tool_use"]\n[[budgets]]\nmax_tokens = 4000\ntarget_tokens = 3000\n')
    args = ["--grid", grid, "--set-column", "session_id", "--label-column", "relevant", "--json"]
    code, here, err = run(capsys, "sweep", items / "one.parquet", *args, "--out", tmp_path / "a")
    assert code == 0, err
    code, there, err = run(capsys, "sweep", items / "parts", *args, "--out", tmp_path / "b", "--dask", "local:1")
    assert code == 0, err
    a, b = json.loads(here)["outcomes"], json.loads(there)["outcomes"]
    assert a == b and len(b) == 3  # every number, bootstrap intervals included, to the last bit


def test_a_bad_label_on_dask_names_file_row_and_value(capsys, tmp_path, items):
    bad = tmp_path / "bad"
    bad.mkdir()
    for f in ("f0", "f1", "f2"):  # graded labels (the sample's are boolean), one negative in f1
        t = pq.read_table(items / "parts" / f"{f}.parquet")
        rel = np.array(t.column("relevant").to_pylist(), dtype=np.float64)
        if f == "f1":
            rel[17] = -2.5
        pq.write_table(
            t.set_column(t.schema.get_field_index("relevant"), "relevant", pa.array(rel)), bad / f"{f}.parquet"
        )
    code, out, err = run(
        capsys, "sensitivity", bad, *PRESETS, *BUDGET, "--set-column", "session_id", "--label-column", "relevant",
        "--out", tmp_path / "o", "--dask", "local:1",
    )  # fmt: skip
    assert code == 2
    assert "f1.parquet" in err and "column 'relevant', row 17: negative label (value -2.5)" in err
    code, out, err = run(
        capsys, "sensitivity", bad, *PRESETS, *BUDGET, "--set-column", "session_id", "--label-column", "nope",
        "--out", tmp_path / "p", "--dask", "local:1",
    )  # fmt: skip
    assert code == 2 and "'nope' not found" in err
