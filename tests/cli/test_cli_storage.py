"""Every command on ``s3://`` URLs in and out, against moto's S3 server on a loopback port
(``tests/s3_server.py``), equal to the same command on local paths: ``import``, ``validate``,
``sensitivity`` (in process, streamed with ``--chunk-rows`` / ``--memory-limit``, and
``--dask local:2``: two worker processes reading and writing one bucket), ``check`` (with
``--junit``), ``tune`` and ``report``; the Parquet outputs are byte-identical. ``--storage-option``
carries credentials and the endpoint. The bad cases exit 2 naming the URL and leave nothing
that looks complete (no manifest)."""

from __future__ import annotations

import json
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
    """50 sessions of the sample in row groups of 150 rows (streamed runs take several chunks)."""
    t = pq.read_table(SAMPLE)
    keys = t.column("session_id").to_pylist()
    t = t.take(pa.array([i for i, k in enumerate(keys) if int(k.split("-")[1]) < 50]))
    d = tmp_path_factory.mktemp("cli-items")
    pq.write_table(t, d / "items.parquet", row_group_size=150)
    pq.write_table(t.slice(0, t.num_rows // 2), d / "a.parquet")
    pq.write_table(t.slice(t.num_rows // 2), d / "b.parquet")
    return d


@pytest.fixture
def up(s3_server, bucket, items):
    """The items uploaded: (bucket, s3 URL of the items directory)."""
    s3_server.upload_dir(items, bucket, "in")
    return bucket, f"s3://{bucket}/in"


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _objects(s3, bucket: str, prefix: str) -> dict[str, bytes]:
    return {k[len(prefix) + 1 :]: s3.get(bucket, k) for k in s3.keys(bucket, prefix + "/") if not k.endswith("/")}


def _same(s3, bucket: str, prefix: str, local: Path, compare=(".parquet",)) -> list[str]:
    """The same file names under the prefix as in ``local``, and byte-identical files of the
    suffixes in ``compare``."""
    remote = _objects(s3, bucket, prefix)
    names = sorted(f.relative_to(local).as_posix() for f in local.rglob("*") if f.is_file())
    assert sorted(remote) == names
    for n in names:
        if n.endswith(compare):
            assert remote[n] == (local / n).read_bytes(), n
    return names


def test_import_and_validate_on_s3(capsys, s3_server, bucket, tmp_path):
    s3_server.upload_dir(ROOT / "data" / "transcripts", bucket, "tr")
    src = f"s3://{bucket}/tr/openai_chat.jsonl"
    code, _o, err = run(capsys, "import", "openai", src, "--out", f"s3://{bucket}/items.parquet", "--quiet")
    assert code == 0, err
    local = tmp_path / "items.parquet"
    assert (
        run(capsys, "import", "openai", ROOT / "data/transcripts/openai_chat.jsonl", "--out", local, "--quiet")[0] == 0
    )
    # the same items; only each item's ``file`` metadata differs: it names the file as given
    # (the URL, or the local path), which the importers keep for provenance
    import io

    remote_t = pq.read_table(io.BytesIO(s3_server.get(bucket, "items.parquet")))
    local_t = pq.read_table(local)
    assert remote_t.drop_columns(["metadata"]).equals(local_t.drop_columns(["metadata"]))

    def files(t):
        return [dict(m or []).pop("file", None) for m in t.column("metadata").to_pylist()]

    def others(t):
        return [{k: v for k, v in (m or []) if k != "file"} for m in t.column("metadata").to_pylist()]

    assert others(remote_t) == others(local_t)
    assert {f for f in files(remote_t)} == {src} and {f for f in files(local_t)} == {
        str(ROOT / "data/transcripts/openai_chat.jsonl")
    }
    a = run(capsys, "validate", f"s3://{bucket}/items.parquet", "--json")
    b = run(capsys, "validate", local, "--json")
    assert a[0] == b[0] == 0 and json.loads(a[1]) == json.loads(b[1])


@pytest.mark.parametrize(
    "mode",
    [[], ["--chunk-rows", "300"], ["--memory-limit", "2M"]],
    ids=["in-process", "chunk-rows", "memory-limit"],
)
def test_sensitivity_in_and_out_of_s3_equals_local(capsys, s3_server, up, items, tmp_path, mode):
    bucket, url = up
    args = [*PRESETS, *BUDGET, "--set-column", "session_id", "--quiet", *mode]
    code, _out, err = run(capsys, "sensitivity", f"{url}/items.parquet", *args, "--out", f"s3://{bucket}/out")
    assert code == 0, err
    assert run(capsys, "sensitivity", items / "items.parquet", *args, "--out", tmp_path / "out")[0] == 0
    names = _same(s3_server, bucket, "out", tmp_path / "out")
    assert "manifest.json" in names and "report.html" in names
    kind = json.loads(s3_server.get(bucket, "out/manifest.json"))["kind"]
    assert kind == ("sweep" if not mode else "sweep-streamed")
    # the page of the written outputs, from the bucket
    assert run(capsys, "report", f"s3://{bucket}/out", "--overwrite", "--quiet")[0] == 0
    assert run(capsys, "report", tmp_path / "out", "--overwrite", "--quiet")[0] == 0
    assert s3_server.get(bucket, "out/report.html") == (tmp_path / "out" / "report.html").read_bytes()


def test_sensitivity_on_dask_two_workers_one_bucket(capsys, s3_server, up, items, tmp_path):
    bucket, url = up
    args = [*PRESETS, *BUDGET, "--set-column", "session_id", "--quiet", "--dask", "local:2"]
    files = [f"{url}/a.parquet", f"{url}/b.parquet"]
    code, _out, err = run(capsys, "sensitivity", *files, *args, "--out", f"s3://{bucket}/dk")
    assert code == 0, err
    assert run(capsys, "sensitivity", items / "a.parquet", items / "b.parquet", *args, "--out", tmp_path / "dk")[0] == 0
    names = _same(s3_server, bucket, "dk", tmp_path / "dk")
    assert {"items/part-00000.parquet", "items/part-00001.parquet", "manifest.json", "report.html"} <= set(names)


def test_check_with_junit_on_s3(capsys, s3_server, up, items, tmp_path):
    bucket, url = up
    checks = ROOT / "data" / "examples" / "checks.toml"
    s3_server.put(bucket, "conf/checks.toml", checks.read_bytes())
    a = run(
        capsys,
        "check",
        f"{url}/items.parquet",
        "--checks",
        f"s3://{bucket}/conf/checks.toml",
        "--junit",
        f"s3://{bucket}/junit.xml",
        "--json",
    )
    b = run(capsys, "check", items / "items.parquet", "--checks", checks, "--junit", tmp_path / "junit.xml", "--json")
    assert a[0] == b[0] and json.loads(a[1]) == json.loads(b[1])
    ja, jb = s3_server.get(bucket, "junit.xml").decode(), (tmp_path / "junit.xml").read_text()
    strip = lambda x: __import__("re").sub(r'time="[^"]*"|timestamp="[^"]*"', "", x)  # noqa: E731
    assert strip(ja) == strip(jb)


def test_tune_reads_and_writes_s3(capsys, s3_server, bucket, tmp_path):
    from cupel_np.tuning.synthetic import trust_corpus

    local = tmp_path / "items.parquet"
    pq.write_table(trust_corpus(n_sets=40, items_per_set=20, seed=3), local)
    s3_server.put(bucket, "items.parquet", local.read_bytes())
    s3_server.put(bucket, "space.toml", (ROOT / "data" / "examples" / "tune_space.toml").read_bytes())
    args = ["--label-column", "relevant", "--set-column", "session_id", "--trials", "8", "--batch-size", "4", "--quiet"]
    code, _o, err = run(
        capsys,
        "tune",
        f"s3://{bucket}/items.parquet",
        "--space",
        f"s3://{bucket}/space.toml",
        *args,
        "--out",
        f"s3://{bucket}/tune",
    )
    assert code == 0, err
    space = ROOT / "data" / "examples" / "tune_space.toml"
    assert run(capsys, "tune", local, "--space", space, *args, "--out", tmp_path / "tune")[0] == 0
    names = _same(s3_server, bucket, "tune", tmp_path / "tune", compare=(".parquet", ".toml"))
    assert "leaderboard.parquet" in names and "best-1.toml" in names


def test_storage_options_carry_the_endpoint_and_keys(capsys, s3_server, up, monkeypatch):
    """No AWS variable at all: the endpoint and keys come from --storage-option, and the secret
    is in no output."""
    bucket, url = up
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(k)
    opts = [
        "--storage-option",
        f"endpoint_url={s3_server.endpoint}",
        "--storage-option",
        "access_key=testing",
        "--storage-option",
        "secret_key=testing-secret-never-logged",
    ]
    try:
        code, out, err = run(capsys, "validate", f"{url}/items.parquet", *opts)
        assert code == 0, err
        code, out, err = run(
            capsys,
            "sensitivity",
            f"{url}/items.parquet",
            *PRESETS,
            *BUDGET,
            "--set-column",
            "session_id",
            "--quiet",
            "--out",
            f"s3://{bucket}/o",
            *opts,
        )
        assert code == 0, err
    finally:
        _fs.configure(None)
    assert "testing-secret" not in out + err
    assert "testing-secret" not in s3_server.get(bucket, "o/manifest.json").decode()


def test_bad_cases_exit_2_naming_the_url_and_leave_nothing_complete(capsys, s3_server, up, monkeypatch, tmp_path):
    bucket, url = up
    sweep = [*PRESETS, *BUDGET, "--set-column", "session_id", "--quiet"]
    # a missing bucket, read and written
    code, _o, err = run(capsys, "validate", "s3://no-such-bucket-y/items.parquet")
    assert code == 2 and "s3://no-such-bucket-y/items.parquet: no such bucket" in err
    code, _o, err = run(capsys, "sensitivity", f"{url}/items.parquet", *sweep, "--out", "s3://no-such-bucket-y/out")
    assert code == 2 and "s3://no-such-bucket-y/out: no such bucket" in err
    # a denied write: moto's IAM checks on, as a user who may only read
    before = _objects(s3_server, bucket, "in")
    keys = s3_server.read_only_user(bucket)
    for k, v in keys.items():
        monkeypatch.setenv(k, v)
    _fs.configure(None)
    s3_server.auth(True)
    try:
        code, _o, err = run(capsys, "sensitivity", f"{url}/items.parquet", *sweep, "--out", f"s3://{bucket}/denied")
    finally:
        s3_server.auth(False)
        _fs.configure(None)
    assert code == 2 and f"s3://{bucket}/denied" in err and "access denied" in err
    assert keys["AWS_SECRET_ACCESS_KEY"] not in err
    assert not _objects(s3_server, bucket, "denied") and _objects(s3_server, bucket, "in") == before
    # no credentials anywhere
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    monkeypatch.setenv("HOME", str(tmp_path))
    _fs.configure(None)
    try:
        code, _o, err = run(capsys, "validate", f"{url}/items.parquet")
    finally:
        _fs.configure(None)
    assert code == 2 and "no AWS credentials for s3:// URLs" in err


def test_a_partial_listing_exits_2_and_writes_no_page(capsys, s3_server, up):
    bucket, url = up
    args = [*PRESETS, *BUDGET, "--set-column", "session_id", "--quiet", "--dask", "local:2"]
    code, _o, err = run(
        capsys, "sensitivity", f"{url}/a.parquet", f"{url}/b.parquet", *args, "--out", f"s3://{bucket}/p"
    )
    assert code == 0, err
    s3_server.client.delete_object(Bucket=bucket, Key="p/variants/part-00001.parquet")
    s3_server.client.delete_object(Bucket=bucket, Key="p/report.html")
    code, _o, err = run(capsys, "report", f"s3://{bucket}/p", "--overwrite")
    assert code == 2 and f"s3://{bucket}/p/variants lists 1 part file, the manifest records 2" in err
    assert "report.html" not in _objects(s3_server, bucket, "p")


def _sens_s3(url: str, out: str, *extra) -> list[str]:
    return ["sensitivity", url, *PRESETS, *BUDGET, "--set-column", "session_id", "--quiet", "--out", out, *extra]


@pytest.fixture
def s3_run(capsys, s3_server, up):
    """A finished sweep at s3://BUCKET/ow: (bucket, items URL, its objects)."""
    bucket, url = up
    assert run(capsys, *_sens_s3(f"{url}/a.parquet", f"s3://{bucket}/ow"))[0] == 0
    before = _objects(s3_server, bucket, "ow")
    assert "manifest.json" in before and json.loads(before["manifest.json"])["complete"] is True
    return bucket, url, before


def test_overwrite_on_s3_is_a_swap_a_failed_run_keeps_the_old_results(capsys, s3_server, s3_run):
    bucket, url, before = s3_run
    # a bad input (exit 2): the old code removed the previous objects before reading anything
    code, _o, err = run(capsys, *_sens_s3(f"{url}/missing.parquet", f"s3://{bucket}/ow", "--overwrite"))
    assert code == 2 and "were kept" in err, err
    assert _objects(s3_server, bucket, "ow") == before
    # a good run replaces them, manifest included, and leaves no staging or temp object
    code, out, err = run(capsys, *_sens_s3(f"{url}/b.parquet", f"s3://{bucket}/ow", "--overwrite", "--quiet"))
    assert code == 0, err
    after = _objects(s3_server, bucket, "ow")
    assert sorted(after) == sorted(before), after.keys()
    assert not [k for k in s3_server.keys(bucket) if ".cupel-staging-" in k or k.endswith(".tmp")]
    assert ".cupel-staging" not in out
    m, old = json.loads(after["manifest.json"]), json.loads(before["manifest.json"])
    assert m["complete"] is True and m["run_id"] != old["run_id"]
    assert after["items.parquet"] != before["items.parquet"]  # b.parquet's sessions, not a.parquet's
    assert run(capsys, "report", f"s3://{bucket}/ow", "--overwrite", "--quiet")[0] == 0


def test_overwrite_on_s3_interrupted_keeps_the_old_results(capsys, s3_server, s3_run, monkeypatch):
    import cupel_np.cli.sweeps as sweeps

    def ctrl_c(*a, **k):  # Ctrl-C after the Parquet files, before the page
        raise KeyboardInterrupt

    bucket, url, before = s3_run
    monkeypatch.setattr(sweeps, "write_html_report", ctrl_c)
    code, _o, err = run(capsys, *_sens_s3(f"{url}/b.parquet", f"s3://{bucket}/ow", "--overwrite"))
    assert code == 130, err
    assert _objects(s3_server, bucket, "ow") == before
    assert not [k for k in s3_server.keys(bucket) if ".cupel-staging-" in k]


_HANG_BEFORE_THE_PAGE = """
import sys, time
from pathlib import Path
import cupel_np.cli.sweeps as sweeps
from cupel_np.cli import main

def hang(*a, **k):  # the Parquet outputs are written: say so and wait for the kill
    Path(sys.argv[1]).touch()
    time.sleep(600)

sweeps.write_html_report = hang
sys.exit(main(sys.argv[2:]))
"""


def test_overwrite_on_s3_killed_keeps_the_old_results(capsys, s3_server, s3_run, tmp_path):
    import signal
    import subprocess
    import sys
    import time

    bucket, url, before = s3_run
    ready = tmp_path / "ready"
    argv = _sens_s3(f"{url}/b.parquet", f"s3://{bucket}/ow", "--overwrite")
    p = subprocess.Popen(
        [sys.executable, "-c", _HANG_BEFORE_THE_PAGE, str(ready), *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 300
        while not ready.exists() and p.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ready.exists(), f"the run ended ({p.returncode}) or timed out before its Parquet outputs"
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    keys = s3_server.keys(bucket, "ow/")
    staged = [k for k in keys if k.startswith("ow/.cupel-staging-")]
    assert any(k.endswith("/items.parquet") for k in staged), keys  # killed mid-way, after writing
    kept = {k: v for k, v in _objects(s3_server, bucket, "ow").items() if not k.startswith(".cupel-staging-")}
    assert kept == before
    # the next --overwrite removes the killed run's staging prefix
    assert run(capsys, *_sens_s3(f"{url}/b.parquet", f"s3://{bucket}/ow", "--overwrite"))[0] == 0
    assert not [k for k in s3_server.keys(bucket) if ".cupel-staging-" in k]
    assert json.loads(s3_server.get(bucket, "ow/manifest.json"))["complete"] is True
