"""A killed ``--overwrite`` run leaves its staging area (``OUT/.cupel-staging-*``, a directory
or an object prefix) inside ``--out``. It holds no result anyone has seen, so a later run
WITHOUT ``--overwrite`` into a directory where it is all that is left proceeds and removes it
(it used to refuse ``OUT`` as "another run's outputs", naming a hidden directory). Results
beside it are still protected, and a staging area whose run had finished (a swap cut short or
under way) is an error naming what to delete. On a local directory and on ``s3://``."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import cupel_np as c
from cupel_np.cli import main
from cupel_np.io import write_sweep
from cupel_np.io.outdir import STAGING_PREFIX, OutputExistsError, mark_complete, run_in_progress

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "data" / "sample_sessions.parquet"
BUDGET = c.ContextBudget(8000, 6000, 1000)
VARIANTS = [("chat", c.preset("chat")), ("rag", c.preset("rag"))]
STAGE = f"{STAGING_PREFIX}0123456789ab"


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    t = pq.read_table(SAMPLE)
    keys = t.column("session_id").to_pylist()
    t = t.take(pa.array([i for i, k in enumerate(keys) if int(k.split("-")[1]) < 12]))
    d = tmp_path_factory.mktemp("stale-items")
    pq.write_table(t, d / "items.parquet")
    return d / "items.parquet", c.sweep(c.ItemTable.from_arrow(t, set_column="session_id"), BUDGET, VARIANTS)


def _killed_stage(out: str, res, *, finished: bool = False) -> None:
    """What an --overwrite run killed mid-way leaves: its outputs in ``OUT/.cupel-staging-*``,
    the manifest saying it did not finish (``finished``: killed during the swap instead)."""
    stage = f"{out}/{STAGE}"
    with run_in_progress():
        write_sweep(res, stage)
    if finished:
        mark_complete(stage)


def _names(out: Path) -> list[str]:
    return sorted(p.name for p in out.iterdir())


def test_a_run_into_a_directory_holding_only_a_killed_runs_staging_proceeds_and_removes_it(tmp_path, result):
    _items, res = result
    out = tmp_path / "out"
    _killed_stage(str(out), res)
    (out / "notes.txt").write_text("mine", encoding="utf-8")  # not ours: kept
    write_sweep(res, out)
    assert _names(out) == ["diffs.parquet", "items.parquet", "manifest.json", "notes.txt", "variants.parquet"]
    assert json.loads((out / "manifest.json").read_text())["complete"] is True


def test_the_cli_without_overwrite_after_the_old_results_were_deleted(tmp_path, result, capsys):
    items, res = result
    out = tmp_path / "out"
    argv = ["sensitivity", items, "--preset", "chat", "--preset", "rag", "--max-tokens", "8000"]
    argv += ["--target-tokens", "6000", "--set-column", "session_id", "--quiet", "--out", out]
    assert main([str(a) for a in argv]) == 0
    _killed_stage(str(out), res)
    for f in out.iterdir():  # `rm out/*`: the shell's glob leaves the hidden staging directory
        if not f.name.startswith("."):
            f.unlink()
    assert main([str(a) for a in argv]) == 0, capsys.readouterr().err
    assert not [f for f in _names(out) if f.startswith(".")]
    assert "report.html" in _names(out)


def test_results_beside_a_stale_staging_area_are_still_protected(tmp_path, result):
    _items, res = result
    out = tmp_path / "out"
    write_sweep(res, out)
    _killed_stage(str(out), res)
    with pytest.raises(OutputExistsError, match="already holds a sweep .* from another run"):
        write_sweep(c.sweep(res.table, BUDGET, VARIANTS[:1]), out)
    assert STAGE in _names(out)
    write_sweep(c.sweep(res.table, BUDGET, VARIANTS[:1]), out, overwrite=True)  # removes both
    assert STAGE not in _names(out)


def test_a_finished_staging_area_is_named_with_what_to_delete(tmp_path, result, capsys):
    items, res = result
    out = tmp_path / "out"
    _killed_stage(str(out), res, finished=True)  # killed while its outputs were moved into place
    with pytest.raises(OutputExistsError) as e:
        write_sweep(res, out)
    msg = str(e.value)
    assert f"delete {out / STAGE}" in msg and "--overwrite" in msg and "did not end" in msg
    assert STAGE in _names(out)
    argv = ["sensitivity", items, "--preset", "chat", "--preset", "rag", "--max-tokens", "8000"]
    argv += ["--target-tokens", "6000", "--set-column", "session_id", "--quiet", "--out", out]
    assert main([str(a) for a in argv]) == 2  # the CLI: exit 2 with the same words
    assert f"delete {out / STAGE}" in capsys.readouterr().err


def test_on_s3_a_killed_runs_staging_prefix_is_removed_by_the_next_run(s3_server, bucket, result):
    _items, res = result
    out = f"s3://{bucket}/out"
    _killed_stage(out, res)
    assert any(k.startswith(f"out/{STAGE}/") for k in s3_server.keys(bucket))
    write_sweep(res, out)
    keys = [k for k in s3_server.keys(bucket) if not k.endswith("/")]
    assert keys == [f"out/{n}" for n in ("diffs.parquet", "items.parquet", "manifest.json", "variants.parquet")]


def test_on_s3_a_finished_staging_prefix_is_named(s3_server, bucket, result):
    _items, res = result
    out = f"s3://{bucket}/out"
    _killed_stage(out, res, finished=True)
    with pytest.raises(OutputExistsError, match=f"delete {out}/{STAGE}"):
        write_sweep(res, out)
    assert any(k.startswith(f"out/{STAGE}/") for k in s3_server.keys(bucket))
