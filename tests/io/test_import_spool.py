"""Claude Code and OTel inputs on an object store are copied to a local unnamed temp file when
they are large enough for two passes (``spool.spool_remote``), so they take the local files' two
passes (records read again at their byte offsets) instead of holding every record; the items are
those of the local import. ``memory://`` (fsspec) stands in for an object store."""

import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from cupel_np import _fs
from cupel_np.io.importers import claude_code, core, import_to_parquet, otel

pytest.importorskip("fsspec")


def _upload(local: Path, url: str) -> str:
    _fs.as_path(url).write_bytes(local.read_bytes())
    return url


def _fds() -> set[str]:
    """What this process's open files point to (Linux)."""
    out = set()
    for x in os.listdir("/proc/self/fd") if Path("/proc/self/fd").exists() else []:
        try:
            out.add(os.readlink(f"/proc/self/fd/{x}"))
        except OSError:
            pass  # the listing's own descriptor, closed meanwhile
    return out


@pytest.mark.parametrize(
    "fmt,src,module,reread",
    [
        ("claude-code", "data/transcripts/claude_code_resumed/sess-1.jsonl", claude_code, "json_line_at"),
        ("otel", "data/transcripts/otel/genai_spans.jsonl", otel, "_Reread"),
    ],
)
def test_a_large_remote_input_takes_the_two_pass_path(tmp_path, monkeypatch, fmt, src, module, reread):
    url = _upload(Path(src), f"memory://spool-test/{fmt}/{Path(src).name}")
    local = import_to_parquet(fmt, src, tmp_path / "local.parquet")
    calls = []
    real = getattr(module, reread)
    monkeypatch.setattr(module, reread, lambda *a: calls.append(1) or real(*a))
    remote_one = import_to_parquet(fmt, url, tmp_path / "one.parquet")  # small: one pass, no copy
    assert not calls
    monkeypatch.setattr(claude_code, "STREAM_TWO_PASS_BYTES", 0)
    monkeypatch.setattr(otel, "TWO_PASS_BYTES", 0)
    before = _fds()
    remote_two = import_to_parquet(fmt, url, tmp_path / "two.parquet")
    assert calls  # records were read again from the local copy
    one, two = (pq.read_table(tmp_path / f"{x}.parquet") for x in ("one", "two"))
    assert two.equals(one) and remote_two.summary() == remote_one.summary() == local.summary()
    files = {dict(m)["file"] for m in two.column("metadata").to_pylist()}
    assert files == {url}  # metadata names the remote file, not the copy
    here = pq.read_table(tmp_path / "local.parquet")
    assert two.drop(["metadata"]).equals(here.drop(["metadata"]))
    assert not any("cupel-spool" in f for f in _fds() - before)  # the copy is gone


def test_spooled_path_keeps_the_remote_name_and_is_read_locally(tmp_path):
    url = _upload(Path("data/transcripts/otel/genai_spans.jsonl"), "memory://spool-test/x/spans.jsonl")
    ((p, name),) = core.spool_remote([(_fs.as_path(url), url)], over=0)
    assert isinstance(p, Path) and name == url
    assert (p.name, p.suffix, p.stem) == ("spans.jsonl", ".jsonl", "spans")
    assert p.read_bytes() == Path("data/transcripts/otel/genai_spans.jsonl").read_bytes()
    assert p.stat().st_size == len(p.read_bytes())
    same = [(_fs.as_path(url), url)]
    assert core.spool_remote(same, over=1 << 30) is same  # small enough for one pass: not copied
    local = [(Path("data/transcripts/otel/genai_spans.jsonl"), "x")]
    assert core.spool_remote(local, over=0) is local  # local files are never copied


def test_a_large_json_array_on_an_object_store_is_streamed(tmp_path, monkeypatch):
    """The element-at-a-time ``.json`` reader reads object-store files too (no copy needed)."""
    from cupel_np.io.importers import import_transcripts, jsonread

    url = _upload(Path("data/transcripts/sharegpt.json"), "memory://spool-test/sg/sharegpt.json")
    whole = import_transcripts("auto", url)
    monkeypatch.setattr(jsonread, "JSON_STREAM_BYTES", 0)
    monkeypatch.setattr(jsonread, "JSON_READ_BYTES", 13)
    assert jsonread.streamed_array(_fs.as_path(url)) is not None
    streamed = import_to_parquet("auto", url, tmp_path / "s.parquet")
    assert pq.read_table(tmp_path / "s.parquet").equals(whole.table)
    assert streamed.summary() == whole.summary()


@pytest.mark.parametrize("proc", [True, False], ids=["proc", "no-proc"])
def test_a_spooled_input_is_downloaded_once(tmp_path, monkeypatch, proc):
    """Without ``/proc/self/fd`` (macOS, some containers; simulated here) the copy was made
    twice: the object was downloaded into an unnamed temp file, then again into a named one.
    The bytes read from the store are counted: one download, with or without ``/proc``."""
    import gc

    from cupel_np.io.importers import spool

    src = Path("data/transcripts/claude_code_resumed/sess-1.jsonl")
    url = _upload(src, f"memory://spool-test/once-{proc}/sess-1.jsonl")
    fetched: list[int] = []
    real_read = _fs._RawStream.readinto

    def counted(self, b):
        n = real_read(self, b)
        fetched.append(n)
        return n

    monkeypatch.setattr(_fs._RawStream, "readinto", counted)
    if not proc:
        real_exists = os.path.exists
        monkeypatch.setattr(
            spool.os.path, "exists", lambda x: not str(x).startswith("/proc/self/fd") and real_exists(x)
        )
    ((p, name),) = core.spool_remote([(_fs.as_path(url), url)], over=0)
    assert sum(fetched) == src.stat().st_size  # downloaded once
    assert name == url and p.read_bytes() == src.read_bytes()
    assert str(p).startswith("/proc/self/fd/") == proc
    copy_dir = Path(str(p)).parent
    del p
    gc.collect()
    assert proc or not copy_dir.exists()  # the named copy goes with its path

    monkeypatch.setattr(claude_code, "STREAM_TWO_PASS_BYTES", 0)  # the import spools it too: once
    fetched.clear()
    remote = import_to_parquet("claude-code", url, tmp_path / "remote.parquet")
    assert sum(fetched) == src.stat().st_size
    local = import_to_parquet("claude-code", src, tmp_path / "local.parquet")
    assert remote.summary() == local.summary()
    here, there = (pq.read_table(tmp_path / f"{x}.parquet").drop(["metadata"]) for x in ("local", "remote"))
    assert there.equals(here)
