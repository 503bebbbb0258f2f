"""The S3 round trips (``test_cli_storage.py``) on ``gs://`` and ``az://`` URLs, against local
emulators on loopback ports (``tests/object_stores.py``: fake-gcs-server, Azurite):
``import``, ``validate``, ``sensitivity`` in process, streamed and on Dask (two worker
processes), ``check`` (with ``--junit``), ``tune``, ``report`` and ``--overwrite`` read from and
write to the store, and their files are byte-identical to the same commands on local paths. The
emulators are found through the variables Google's and Azure's own tools read
(``STORAGE_EMULATOR_HOST``, ``AZURE_STORAGE_CONNECTION_STRING``), or ``--storage-option``."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cupel_np import _fs
from cupel_np.cli import main

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "data" / "sample_sessions.parquet"
BUDGET = ["--max-tokens", "8000", "--target-tokens", "6000", "--output-reserve", "1000"]
PRESETS = ["--preset", "chat", "--preset", "rag"]


@pytest.fixture(scope="module")
def items(tmp_path_factory):
    """40 sessions of the sample in row groups of 150 rows (streamed runs take several chunks)."""
    t = pq.read_table(SAMPLE)
    keys = t.column("session_id").to_pylist()
    t = t.take(pa.array([i for i, k in enumerate(keys) if int(k.split("-")[1]) < 40]))
    d = tmp_path_factory.mktemp("cloud-items")
    pq.write_table(t, d / "items.parquet", row_group_size=150)
    return d


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _same(store, bucket: str, prefix: str, local: Path, compare=(".parquet",)) -> list[str]:
    """The same file names under the prefix as in ``local`` (no temp key, nothing else), and
    byte-identical files of the suffixes in ``compare``."""
    keys = [k[len(prefix) + 1 :] for k in store.keys(bucket, prefix)]
    names = sorted(f.relative_to(local).as_posix() for f in local.rglob("*") if f.is_file())
    assert keys == names
    for n in names:
        if n.endswith(compare):
            assert store.get(bucket, f"{prefix}/{n}") == (local / n).read_bytes(), n
    return names


def test_import_and_validate(capsys, store, tmp_path):
    bucket = store.new_bucket()
    store.upload_dir(ROOT / "data" / "transcripts", bucket, "tr")
    src = store.url(bucket, "tr/openai_chat.jsonl")
    code, _o, err = run(capsys, "import", "openai", src, "--out", store.url(bucket, "items.parquet"), "--quiet")
    assert code == 0, err
    local = tmp_path / "items.parquet"
    code, _o, err = run(
        capsys, "import", "openai", ROOT / "data/transcripts/openai_chat.jsonl", "--out", local, "--quiet"
    )
    assert code == 0, err
    assert [k for k in store.keys(bucket) if not k.startswith("tr/")] == ["items.parquet"]  # no temp key left
    got = pq.read_table(io.BytesIO(store.get(bucket, "items.parquet")))
    want = pq.read_table(local)
    # the same items; each item's ``file`` metadata names the file as given (URL or path)
    assert got.drop_columns(["metadata"]).equals(want.drop_columns(["metadata"]))
    assert {dict(m or []).get("file") for m in got.column("metadata").to_pylist()} == {src}
    a = run(capsys, "validate", store.url(bucket, "items.parquet"), "--json")
    b = run(capsys, "validate", local, "--json")
    assert a[0] == b[0] == 0 and json.loads(a[1]) == json.loads(b[1])


@pytest.mark.parametrize("mode", [[], ["--chunk-rows", "300"]], ids=["in-process", "streamed"])
def test_sensitivity_and_report_equal_local(capsys, store, items, tmp_path, mode):
    bucket = store.new_bucket()
    store.upload_dir(items, bucket, "in")
    args = [*PRESETS, *BUDGET, "--set-column", "session_id", "--quiet", *mode]
    out = store.url(bucket, "out")
    code, _o, err = run(capsys, "sensitivity", store.url(bucket, "in/items.parquet"), *args, "--out", out)
    assert code == 0, err
    code, _o, err = run(capsys, "sensitivity", items / "items.parquet", *args, "--out", tmp_path / "out")
    assert code == 0, err
    names = _same(store, bucket, "out", tmp_path / "out")
    assert {"manifest.json", "report.html"} <= set(names)
    kind = json.loads(store.get(bucket, "out/manifest.json"))["kind"]
    assert kind == ("sweep" if not mode else "sweep-streamed")
    # the page of the written outputs, rebuilt from the store
    code, _o, err = run(capsys, "report", out, "--overwrite", "--quiet")
    assert code == 0, err
    assert run(capsys, "report", tmp_path / "out", "--overwrite", "--quiet")[0] == 0
    assert store.get(bucket, "out/report.html") == (tmp_path / "out" / "report.html").read_bytes()
    _same(store, bucket, "out", tmp_path / "out")


def test_a_second_run_into_the_same_directory_is_refused(capsys, store, items):
    bucket = store.new_bucket()
    store.upload_dir(items, bucket, "in")
    args = [*PRESETS, *BUDGET, "--set-column", "session_id", "--quiet", "--out", store.url(bucket, "out")]
    assert run(capsys, "sensitivity", store.url(bucket, "in/items.parquet"), *args)[0] == 0
    code, _o, err = run(capsys, "sensitivity", store.url(bucket, "in/items.parquet"), *args)
    assert code == 2 and store.url(bucket, "out") in err and "--overwrite" in err


def test_a_missing_bucket_or_container_is_named(capsys, store, items):
    bucket = store.new_bucket()
    store.upload_dir(items, bucket, "in")
    missing = store.url("no-such-place-x", "items.parquet")
    code, _o, err = run(capsys, "validate", missing)
    assert code == 2 and f"{missing}: no such {store.word} 'no-such-place-x'" in err, err
    args = [*PRESETS, *BUDGET, "--set-column", "session_id", "--quiet"]
    out = store.url("no-such-place-x", "out")
    code, _o, err = run(capsys, "sensitivity", store.url(bucket, "in/items.parquet"), *args, "--out", out)
    assert code == 2 and f"{out}: no such {store.word}" in err, err


def test_storage_options_instead_of_the_environment(capsys, store, items, monkeypatch):
    """The endpoint (and Azure's account and key) as ``--storage-option``, no variable set."""
    bucket = store.new_bucket()
    store.upload_dir(items, bucket, "in")
    for k in store.env:
        monkeypatch.delenv(k)
    if store.scheme == "gs":
        opts = {"endpoint_url": store.endpoint, "anonymous": "true", "project_id": "p"}
    else:
        from object_stores import AZURITE_ACCOUNT, AZURITE_KEY

        opts = {"endpoint_url": store.endpoint, "account_name": AZURITE_ACCOUNT, "account_key": AZURITE_KEY}
    argv = [x for k, v in opts.items() for x in ("--storage-option", f"{k}={v}")]
    try:
        code, out, err = run(capsys, "validate", store.url(bucket, "in/items.parquet"), "--json", *argv)
    finally:
        _fs.configure(None)
    assert code == 0, err
    assert json.loads(out)["rows"] > 0
    assert "Eby8vdM02x" not in out + err


def test_check_with_junit(capsys, store, items, tmp_path):
    bucket = store.new_bucket()
    store.upload_dir(items, bucket, "in")
    checks = ROOT / "data" / "examples" / "checks.toml"
    store.put(bucket, "conf/checks.toml", checks.read_bytes())
    a = run(
        capsys,
        "check",
        store.url(bucket, "in/items.parquet"),
        "--checks",
        store.url(bucket, "conf/checks.toml"),
        "--junit",
        store.url(bucket, "junit.xml"),
        "--json",
    )
    b = run(capsys, "check", items / "items.parquet", "--checks", checks, "--junit", tmp_path / "junit.xml", "--json")
    assert a[0] == b[0] and json.loads(a[1]) == json.loads(b[1]), a[2]
    strip = lambda x: re.sub(r'time="[^"]*"|timestamp="[^"]*"', "", x)  # noqa: E731
    assert strip(store.get(bucket, "junit.xml").decode()) == strip((tmp_path / "junit.xml").read_text())


def test_tune_reads_and_writes(capsys, store, tmp_path):
    from cupel_np.tuning.synthetic import trust_corpus

    bucket = store.new_bucket()
    local = tmp_path / "items.parquet"
    pq.write_table(trust_corpus(n_sets=40, items_per_set=20, seed=3), local)
    space = ROOT / "data" / "examples" / "tune_space.toml"
    store.put(bucket, "items.parquet", local.read_bytes())
    store.put(bucket, "space.toml", space.read_bytes())
    args = ["--label-column", "relevant", "--set-column", "session_id", "--trials", "8", "--batch-size", "4", "--quiet"]
    src, sp = store.url(bucket, "items.parquet"), store.url(bucket, "space.toml")
    code, _o, err = run(capsys, "tune", src, "--space", sp, *args, "--out", store.url(bucket, "tune"))
    assert code == 0, err
    assert run(capsys, "tune", local, "--space", space, *args, "--out", tmp_path / "tune")[0] == 0
    names = _same(store, bucket, "tune", tmp_path / "tune", compare=(".parquet", ".toml"))
    assert "leaderboard.parquet" in names and "best-1.toml" in names


def test_overwrite_is_a_swap(capsys, store, items, tmp_path):
    """``--overwrite``: a failed run keeps the old objects; a good one replaces them, leaving no
    staging or temp object, byte-identical to the same two runs on a local directory."""
    bucket = store.new_bucket()
    half = pq.read_table(items / "items.parquet")
    pq.write_table(half.slice(0, half.num_rows // 2), tmp_path / "a.parquet")
    pq.write_table(half.slice(half.num_rows // 2), tmp_path / "b.parquet")
    store.upload_dir(tmp_path, bucket, "in")
    args = [*PRESETS, *BUDGET, "--set-column", "session_id", "--quiet"]
    out = store.url(bucket, "ow")
    assert run(capsys, "sensitivity", store.url(bucket, "in/a.parquet"), *args, "--out", out)[0] == 0
    before = {k: store.get(bucket, k) for k in store.keys(bucket, "ow")}
    code, _o, err = run(
        capsys, "sensitivity", store.url(bucket, "in/missing.parquet"), *args, "--out", out, "--overwrite"
    )
    assert code == 2 and "were kept" in err, err
    assert {k: store.get(bucket, k) for k in store.keys(bucket, "ow")} == before
    code, _o, err = run(capsys, "sensitivity", store.url(bucket, "in/b.parquet"), *args, "--out", out, "--overwrite")
    assert code == 0, err
    local = tmp_path / "ow"
    assert run(capsys, "sensitivity", tmp_path / "a.parquet", *args, "--out", local)[0] == 0
    assert run(capsys, "sensitivity", tmp_path / "b.parquet", *args, "--out", local, "--overwrite")[0] == 0
    _same(store, bucket, "ow", local)
    assert not [k for k in store.keys(bucket) if ".cupel-staging-" in k or k.endswith(".tmp")]
    assert json.loads(store.get(bucket, "ow/manifest.json"))["complete"] is True


def test_sensitivity_on_dask_two_workers_one_bucket(capsys, store, items, tmp_path):
    """``--dask local:2``: two worker processes (they inherit the emulator's variables) read
    the items from the store and write their parts to it, equal to the same run on local paths."""
    pytest.importorskip("distributed")
    bucket = store.new_bucket()
    t = pq.read_table(items / "items.parquet")
    pq.write_table(t.slice(0, t.num_rows // 2), tmp_path / "a.parquet")
    pq.write_table(t.slice(t.num_rows // 2), tmp_path / "b.parquet")
    store.upload_dir(tmp_path, bucket, "in")
    args = [*PRESETS, *BUDGET, "--set-column", "session_id", "--quiet", "--dask", "local:2"]
    files = [store.url(bucket, "in/a.parquet"), store.url(bucket, "in/b.parquet")]
    code, _o, err = run(capsys, "sensitivity", *files, *args, "--out", store.url(bucket, "dk"))
    assert code == 0, err
    local = [tmp_path / "a.parquet", tmp_path / "b.parquet"]
    assert run(capsys, "sensitivity", *local, *args, "--out", tmp_path / "dk")[0] == 0
    names = _same(store, bucket, "dk", tmp_path / "dk")
    assert {"items/part-00000.parquet", "items/part-00001.parquet", "manifest.json", "report.html"} <= set(names)
