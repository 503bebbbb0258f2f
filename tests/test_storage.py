"""Object storage in and out, against a real S3 endpoint (moto's server on a loopback port,
``tests/s3_server.py``): every reader (a file, a directory, a glob, a hive dataset, policy and
checks files, transcripts) and every writer (sweep outputs, streamed and Dask parts, manifests,
pages) on ``s3://`` URLs gives byte-identical files to the same call on local paths; writes are
atomic (no partial object, no temp key left); ``overwrite`` and one run per directory hold;
the bad cases (missing bucket, missing or refused credentials, a denied write, a partial
listing of parts) are clear errors naming the URL, with nothing left that looks complete."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import cloudpickle
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import cupel_np as c
from cupel_np import _fs
from cupel_np.errors import InvalidConfigError
from cupel_np.io import import_transcripts, sweep_parquet, validate_items, write_sweep
from cupel_np.io.outdir import OutputExistsError
from cupel_np.model.datasets import read_table
from cupel_np.report.from_dir import write_dir_report

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "sample_sessions.parquet"
BUDGET = c.ContextBudget(8000, 6000, 1000)
VARIANTS = [("chat", c.preset("chat")), ("rag", c.preset("rag"))]

cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """60 sessions of the sample, as one file (row groups of 200 rows), as a directory of three
    files, and as a hive dataset partitioned on a ``shard`` column."""
    t = pq.read_table(SAMPLE)
    keys = t.column("session_id").to_pylist()
    t = t.take(pa.array([i for i, k in enumerate(keys) if int(k.split("-")[1]) < 60]))
    root = tmp_path_factory.mktemp("corpus")
    pq.write_table(t, root / "items.parquet", row_group_size=200)
    n = t.num_rows
    (root / "dir").mkdir()
    for i, (a, b) in enumerate([(0, n // 3), (n // 3, 2 * n // 3), (2 * n // 3, n)]):
        pq.write_table(t.slice(a, b - a), root / "dir" / f"part-{i}.parquet")
    for shard in ("a", "b"):
        (root / "hive" / f"shard={shard}").mkdir(parents=True)
        half = t.slice(0, n // 2) if shard == "a" else t.slice(n // 2)
        pq.write_table(half, root / "hive" / f"shard={shard}" / "data.parquet")
    (root / "hive" / "_SUCCESS").write_bytes(b"")
    return root


@pytest.fixture
def remote(s3_server, bucket, corpus):
    """The corpus uploaded under ``s3://BUCKET/corpus/``: (bucket, URL of the corpus)."""
    s3_server.upload_dir(corpus, bucket, "corpus")
    return bucket, f"s3://{bucket}/corpus"


def _same_files(s3, bucket: str, prefix: str, local: Path, skip=("manifest.json",)) -> list[str]:
    """Every file under ``local`` has a byte-identical object under ``prefix`` and no other
    object is there; returns the names compared."""
    keys = [k[len(prefix) + 1 :] for k in s3.keys(bucket, prefix + "/") if not k.endswith("/")]  # not dir markers
    names = sorted(f.relative_to(local).as_posix() for f in local.rglob("*") if f.is_file())
    assert keys == names
    for n in names:
        if n.split("/")[-1] not in skip:
            assert s3.get(bucket, f"{prefix}/{n}") == (local / n).read_bytes(), n
    return names


# ----------------------------------------------------------------------------- the layer
def test_local_paths_stay_paths_and_urls_do_not():
    assert _fs.as_path("a/b.parquet") == Path("a/b.parquet") and type(_fs.as_path("x")) is type(Path("x"))
    assert _fs.as_path("file:///tmp/a%20b/c.parquet") == Path("/tmp/a b/c.parquet")
    p = _fs.as_path("s3://bkt/dir/part-1.parquet")
    assert isinstance(p, _fs.RemotePath) and str(p) == "s3://bkt/dir/part-1.parquet"
    assert (p.name, p.stem, p.suffix, str(p.parent), str(p.parent / "x")) == (
        "part-1.parquet",
        "part-1",
        ".parquet",
        "s3://bkt/dir",
        "s3://bkt/dir/x",
    )
    assert _fs.arrow_location("a/b.parquet") == (None, "a/b.parquet")


@pytest.mark.parametrize(
    "pattern, path, hit",
    [
        ("*.parquet", "a.parquet", True),
        ("*.parquet", "d/a.parquet", False),
        ("**/*.parquet", "d/e/a.parquet", True),
        ("**/*.parquet", "a.parquet", True),
        ("part-[0-9]*.parquet", "part-7.parquet", True),
        ("part-[!0-9]*.parquet", "part-7.parquet", False),
        ("shard=?/*.parquet", "shard=a/data.parquet", True),
    ],
)
def test_glob_patterns_match_as_pathlib_does(pattern, path, hit):
    from cupel_np._fs import _glob_regex

    assert bool(_glob_regex(pattern).fullmatch(path)) is hit


def test_storage_options_are_checked_and_never_in_messages(s3_server, bucket):
    with pytest.raises(_fs.StorageError, match="known: access_key"):
        _fs.configure({"acess_key": "x"})
        _fs.as_path(f"s3://{bucket}/x").exists()
    with pytest.raises(_fs.StorageError, match="KEY=VALUE") as e:
        _fs.parse_options(["secret_key"])
    assert _fs.parse_options(["secret_key=a=b", "region=r"]) == {"secret_key": "a=b", "region": "r"}
    _fs.configure({"anonymous": "maybe"})
    with pytest.raises(_fs.StorageError, match="true or false") as e:
        _fs.as_path(f"s3://{bucket}/x").exists()
    assert "maybe" in str(e.value)  # not a secret: the value of a yes/no switch
    _fs.configure(None)


def test_a_url_without_its_package_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "fsspec", None)
    _fs.configure(None)
    with pytest.raises(_fs.StorageError, match=r'memory:// URLs need fsspec.*pip install "cupel-np\[fsspec\]"'):
        _fs.as_path("memory://x/y.parquet").exists()
    _fs.configure(None)


# ----------------------------------------------------------------------------- reading
@pytest.mark.parametrize("layout", ["items.parquet", "dir", "hive", "dir/part-*.parquet"])
def test_every_items_layout_reads_the_same_from_s3(remote, corpus, layout):
    _bucket, url = remote
    a = read_table(f"{url}/{layout}")
    b = read_table(str(corpus / layout))
    assert a.equals(b) and a.num_rows > 0
    if layout == "hive":
        assert a.schema.names[-1] == "shard"
    ta = c.ItemTable.from_parquet(f"{url}/{layout}", set_column="session_id")
    tb = c.ItemTable.from_parquet(str(corpus / layout), set_column="session_id")
    assert (ta.n, ta.n_sets) == (tb.n, tb.n_sets)


def test_a_list_of_urls_reads_in_the_order_given(remote, corpus):
    _bucket, url = remote
    files = [f"{url}/dir/part-2.parquet", f"{url}/dir/part-0.parquet"]
    local = [str(corpus / "dir" / "part-2.parquet"), str(corpus / "dir" / "part-0.parquet")]
    assert read_table(files).equals(read_table(local))


def test_validate_and_policy_and_checks_files_read_from_s3(s3_server, remote, corpus):
    bucket, url = remote
    assert validate_items(f"{url}/items.parquet", "session_id") == validate_items(
        corpus / "items.parquet", "session_id"
    )
    assert validate_items(f"{url}/items.parquet", "session_id", chunk_rows=150) == validate_items(
        corpus / "items.parquet", "session_id", chunk_rows=150
    )
    s3_server.put(bucket, "conf/policy.json", json.dumps(c.preset("rag").to_dict()).encode())
    assert c.Policy.from_file(f"s3://{bucket}/conf/policy.json") == c.preset("rag")
    from cupel_np.testing.checks import load_checks

    s3_server.put(bucket, "conf/checks.toml", (ROOT / "data" / "examples" / "checks.toml").read_bytes())
    a, b = load_checks(f"s3://{bucket}/conf/checks.toml"), load_checks(ROOT / "data" / "examples" / "checks.toml")
    assert [x.name for x in a.checks] == [x.name for x in b.checks] and a.set_column == b.set_column


def test_import_reads_transcripts_from_s3_and_writes_items_there(s3_server, bucket, tmp_path):
    src = ROOT / "data" / "transcripts"
    s3_server.upload_dir(src, bucket, "transcripts")
    a = import_transcripts("openai", f"s3://{bucket}/transcripts/openai_chat.jsonl")
    b = import_transcripts("openai", src / "openai_chat.jsonl")
    a.write_parquet(f"s3://{bucket}/items.parquet")
    b.write_parquet(tmp_path / "items.parquet")
    # the same items; each item's ``file`` metadata names the file as given (URL or path)
    import io

    got = pq.read_table(io.BytesIO(s3_server.get(bucket, "items.parquet")))
    want = pq.read_table(tmp_path / "items.parquet")
    assert got.drop_columns(["metadata"]).equals(want.drop_columns(["metadata"]))
    strip = [[(k, v) for k, v in (m or []) if k != "file"] for m in got.column("metadata").to_pylist()]
    assert strip == [[(k, v) for k, v in (m or []) if k != "file"] for m in want.column("metadata").to_pylist()]
    assert s3_server.keys(bucket, "items") == ["items.parquet"]  # no temp key left beside it


# ----------------------------------------------------------------------------- writing
def test_sweep_outputs_and_page_on_s3_are_the_local_bytes(s3_server, remote, corpus, tmp_path):
    bucket, url = remote
    res = c.sweep(c.ItemTable.from_parquet(f"{url}/items.parquet", set_column="session_id"), BUDGET, VARIANTS)
    write_sweep(res, f"s3://{bucket}/out")
    local = c.sweep(c.ItemTable.from_parquet(corpus / "items.parquet", set_column="session_id"), BUDGET, VARIANTS)
    write_sweep(local, tmp_path / "out")
    names = _same_files(s3_server, bucket, "out", tmp_path / "out")
    assert names == ["diffs.parquet", "items.parquet", "manifest.json", "variants.parquet"]
    m = json.loads(s3_server.get(bucket, "out/manifest.json"))
    assert m["kind"] == "sweep" and "testing" not in json.dumps(m)  # no credential in the manifest
    page = write_dir_report(f"s3://{bucket}/out")
    write_dir_report(tmp_path / "out")
    assert str(page) == f"s3://{bucket}/out/report.html"
    _same_files(s3_server, bucket, "out", tmp_path / "out")


def test_streamed_sweep_from_and_to_s3_is_the_local_bytes(s3_server, remote, corpus, tmp_path):
    bucket, url = remote
    kw = dict(set_column="session_id", chunk_rows=300, memory_limit=2**30)
    ta = sweep_parquet(f"{url}/hive", BUDGET, VARIANTS, f"s3://{bucket}/streamed", **kw)
    tb = sweep_parquet(corpus / "hive", BUDGET, VARIANTS, tmp_path / "streamed", **kw)
    assert ta == tb and ta["chunks"] > 1
    _same_files(s3_server, bucket, "streamed", tmp_path / "streamed")


def test_a_failed_write_leaves_no_object_and_no_temp_key(s3_server, bucket, monkeypatch):
    from cupel_np.io import parquet as cparquet

    t = pq.read_table(SAMPLE)

    def broken(self, table):
        raise OSError("disk gone")

    monkeypatch.setattr(cparquet.pq.ParquetWriter, "write_table", broken)
    with pytest.raises(_fs.StorageError, match=rf"s3://{bucket}/out/items.parquet: storage error \(disk gone\)"):
        cparquet.write_parquet_atomic(t, f"s3://{bucket}/out/items.parquet", {})
    assert [k for k in s3_server.keys(bucket) if not k.endswith("/")] == []


def test_one_run_per_directory_and_overwrite_on_s3(s3_server, remote):
    bucket, url = remote
    table = c.ItemTable.from_parquet(f"{url}/items.parquet", set_column="session_id")
    s3_server.put(bucket, "out/notes.txt", b"mine")
    write_sweep(c.sweep(table, BUDGET, VARIANTS), f"s3://{bucket}/out")
    with pytest.raises(OutputExistsError, match=f"s3://{bucket}/out already holds a sweep"):
        write_sweep(c.sweep(table, BUDGET, VARIANTS[:1]), f"s3://{bucket}/out")
    s3_server.put(bucket, "out/.items.parquet.0123abcd.tmp", b"left by a killed run")
    write_sweep(c.sweep(table, BUDGET, VARIANTS[:1]), f"s3://{bucket}/out", overwrite=True)
    keys = [k for k in s3_server.keys(bucket, "out/") if not k.endswith("/")]
    assert keys == [
        f"out/{n}" for n in ("diffs.parquet", "items.parquet", "manifest.json", "notes.txt", "variants.parquet")
    ]
    assert [v["label"] for v in json.loads(s3_server.get(bucket, "out/manifest.json"))["variants"]] == ["chat"]


def test_memory_urls_round_trip_in_one_process(corpus):
    pytest.importorskip("fsspec")
    res = c.sweep(c.ItemTable.from_parquet(corpus / "items.parquet", set_column="session_id"), BUDGET, VARIANTS)
    write_sweep(res, "memory://cupel-test/out")
    back = pq.read_table(pa.BufferReader(_fs.as_path("memory://cupel-test/out/variants.parquet").read_bytes()))
    assert back.equals(res.variants_table().cast(back.schema))
    assert sorted(p.name for p in _fs.as_path("memory://cupel-test/out").iterdir()) == [
        "diffs.parquet",
        "items.parquet",
        "manifest.json",
        "variants.parquet",
    ]


# ----------------------------------------------------------------------------- Dask
@pytest.fixture(scope="module")
def two_workers(s3_server):
    """Two worker processes, started after the S3 environment is set (they inherit it)."""
    pytest.importorskip("distributed")
    from distributed import Client, LocalCluster

    with (
        LocalCluster(processes=True, n_workers=2, threads_per_worker=1, dashboard_address=":0") as cluster,
        Client(cluster) as cl,
    ):
        yield cl


def test_dask_sweep_reads_and_writes_one_bucket_from_two_workers(s3_server, remote, corpus, tmp_path, two_workers):
    from cupel_np.io import dask as cdask

    bucket, url = remote
    kw = dict(set_column="session_id", client=two_workers, npartitions=3)
    sa = cdask.sweep(f"{url}/dir", BUDGET, VARIANTS, out_dir=f"s3://{bucket}/parts", **kw)
    sb = cdask.sweep(corpus / "dir", BUDGET, VARIANTS, out_dir=tmp_path / "parts", **kw)
    strip = ("plan_seconds", "task_seconds", "seconds", "warm_seconds")
    assert {k: v for k, v in sa.items() if k not in strip} == {k: v for k, v in sb.items() if k not in strip}
    names = _same_files(s3_server, bucket, "parts", tmp_path / "parts")
    assert sum(n.startswith("items/part-") for n in names) == 3
    workers = {w for w in two_workers.run(lambda: 1)}
    assert len(workers) == 2
    page = write_dir_report(f"s3://{bucket}/parts")
    write_dir_report(tmp_path / "parts")
    assert s3_server.get(bucket, "parts/report.html") == (tmp_path / "parts" / "report.html").read_bytes()
    assert page.name == "report.html"


def test_dask_workers_get_the_storage_options(s3_server, remote, tmp_path, monkeypatch):
    """Credentials given as storage options only (none in the environment the workers start
    with) reach every worker."""
    pytest.importorskip("distributed")
    from distributed import Client, LocalCluster

    from cupel_np.io import dask as cdask

    bucket, url = remote
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(k)
    _fs.configure({"access_key": "testing", "secret_key": "testing-secret-never-logged"})
    try:
        with (
            LocalCluster(processes=True, n_workers=2, threads_per_worker=1, dashboard_address=":0") as cluster,
            Client(cluster) as cl,
        ):
            s = cdask.sweep(
                f"{url}/dir", BUDGET, VARIANTS, set_column="session_id", out_dir=f"s3://{bucket}/o", client=cl
            )
    finally:
        _fs.configure(None)
    assert s["parts"] == 3
    assert "testing-secret" not in s3_server.get(bucket, "o/manifest.json").decode()


# ----------------------------------------------------------------------------- bad cases
def test_a_missing_bucket_is_named_on_read_and_write(s3_server, remote, tmp_path):
    bucket, url = remote
    with pytest.raises(
        _fs.StorageError, match="s3://no-such-bucket-x/items.parquet: no such bucket 'no-such-bucket-x'"
    ):
        read_table("s3://no-such-bucket-x/items.parquet")
    with pytest.raises(_fs.StorageError, match="no such bucket"):
        read_table("s3://no-such-bucket-x/dir/*.parquet")
    with pytest.raises(_fs.StorageError, match="s3://no-such-bucket-x/out: no such bucket"):
        sweep_parquet(f"{url}/items.parquet", BUDGET, VARIANTS, "s3://no-such-bucket-x/out", set_column="session_id")
    with pytest.raises(InvalidConfigError, match=f"items file not found: s3://{bucket}/nothing.parquet"):
        read_table(f"s3://{bucket}/nothing.parquet")


def test_missing_credentials_are_named_before_any_request(s3_server, bucket, monkeypatch, tmp_path):
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    monkeypatch.setenv("HOME", str(tmp_path))
    _fs.configure(None)
    try:
        with pytest.raises(_fs.StorageError, match="no AWS credentials for s3:// URLs: set AWS_ACCESS_KEY_ID"):
            read_table(f"s3://{bucket}/items.parquet")
    finally:
        _fs.configure(None)


def test_a_denied_write_is_named_and_leaves_nothing(s3_server, remote, monkeypatch):
    """moto's IAM checks on, as a user who may only read the bucket: the read works, the
    write is denied, and no object or temp key is left."""
    bucket, url = remote
    keys = s3_server.read_only_user(bucket)
    before = s3_server.keys(bucket)
    for k, v in keys.items():
        monkeypatch.setenv(k, v)
    _fs.configure(None)
    s3_server.auth(True)
    try:
        table = c.ItemTable.from_parquet(f"{url}/items.parquet", set_column="session_id")
        with pytest.raises(_fs.StorageError, match=f"s3://{bucket}/denied.*access denied") as e:
            write_sweep(c.sweep(table, BUDGET, VARIANTS), f"s3://{bucket}/denied")
        assert keys["AWS_SECRET_ACCESS_KEY"] not in str(e.value)
    finally:
        s3_server.auth(False)
        _fs.configure(None)
    assert [k for k in s3_server.keys(bucket) if not k.endswith("/")] == [k for k in before if not k.endswith("/")]


def test_refused_credentials_are_named(s3_server, remote, monkeypatch):
    bucket, url = remote
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIANOTAUSER")
    _fs.configure(None)
    s3_server.auth(True)
    try:
        with pytest.raises(_fs.StorageError, match=f"s3://{bucket}/corpus/items.parquet"):
            read_table(f"{url}/items.parquet")
    finally:
        s3_server.auth(False)
        _fs.configure(None)


def test_a_partial_listing_of_parts_is_refused(s3_server, remote, two_workers):
    """A Dask sweep's directory whose listing shows fewer part files than its manifest records
    (a part lost, or a listing cut short) is not reported as if it were the whole run."""
    from cupel_np.io import dask as cdask

    bucket, url = remote
    cdask.sweep(f"{url}/dir", BUDGET, VARIANTS, set_column="session_id", out_dir=f"s3://{bucket}/p", client=two_workers)
    s3_server.client.delete_object(Bucket=bucket, Key="p/items/part-00001.parquet")
    with pytest.raises(InvalidConfigError, match=rf"s3://{bucket}/p/items lists 2 part files, the manifest records 3"):
        write_dir_report(f"s3://{bucket}/p")
    assert "p/report.html" not in s3_server.keys(bucket, "p/")
