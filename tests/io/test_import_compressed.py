"""Compressed transcripts (``.gz``, ``.bz2``, ``.xz``, ``.zst``) are decompressed as they are read
(``spool.decompressed``): the items are the uncompressed file's, the format is told from the
name without the compression suffix, a directory's compressed files are found, metadata names
the file as given, and a file that does not decompress is named."""

import bz2
import gzip
import lzma
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cupel_np import _fs
from cupel_np.io.importers import BadTranscriptError, import_to_parquet, import_transcripts

ROOT = Path(__file__).resolve().parents[2]


def _zstd(data: bytes) -> bytes:
    out = pa.BufferOutputStream()
    with pa.CompressedOutputStream(out, "zstd") as z:
        z.write(data)
    return out.getvalue().to_pybytes()


PACK = {".gz": gzip.compress, ".bz2": bz2.compress, ".xz": lzma.compress, ".zst": _zstd}


def _files(res):
    return [dict(md)["file"] for md in res.table.column("metadata").to_pylist()]


def _same_items(a, b):
    assert a.table.drop_columns("metadata").equals(b.table.drop_columns("metadata"))
    strip = [[kv for kv in md if kv[0] != "file"] for md in a.table.column("metadata").to_pylist()]
    assert strip == [[kv for kv in md if kv[0] != "file"] for md in b.table.column("metadata").to_pylist()]


@pytest.mark.parametrize("ext", sorted(PACK))
@pytest.mark.parametrize(
    "src",
    [
        "data/transcripts/openai_chat.jsonl",
        "data/transcripts/sharegpt.json",
        "data/transcripts/trajectories/demo__dates-7.traj",
        "data/transcripts/codex/rollout-2026-11-20T10-00-00-0199aaaa-1111-7222-8333-444455556666.jsonl",
    ],
)
def test_a_compressed_file_imports_as_the_file(tmp_path, ext, src):
    plain = ROOT / src
    packed = tmp_path / (plain.name + ext)
    packed.write_bytes(PACK[ext](plain.read_bytes()))
    want = import_transcripts("auto", plain)
    got = import_transcripts("auto", packed)  # detected through the name without the suffix
    _same_items(got, want)
    assert set(_files(got)) == {str(packed)}  # metadata names the file given
    assert got.format == want.format


def test_a_directory_finds_compressed_files_and_streams(tmp_path):
    src = ROOT / "data/transcripts/claude_code"
    shutil.copytree(src, tmp_path / "plain")
    for f in sorted((tmp_path / "plain").rglob("*.jsonl")):
        out = tmp_path / "packed" / f.relative_to(tmp_path / "plain")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.with_name(f.name + ".gz").write_bytes(gzip.compress(f.read_bytes()))
    want = import_transcripts("claude-code", tmp_path / "plain")
    got = import_transcripts("auto", tmp_path / "packed")
    _same_items(got, want)
    assert all(name.endswith(".jsonl.gz") for name in _files(got))
    streamed = import_to_parquet("claude-code", tmp_path / "packed", tmp_path / "s.parquet", chunk_chars=1)
    assert streamed.items == want.items
    assert pq.read_table(tmp_path / "s.parquet").drop_columns("metadata").equals(want.table.drop_columns("metadata"))


def test_a_compressed_file_on_an_object_store(tmp_path):
    pytest.importorskip("fsspec")
    plain = ROOT / "data/transcripts/openai_chat.jsonl"
    url = "memory://compressed-test/chat.jsonl.gz"
    _fs.as_path(url).write_bytes(gzip.compress(plain.read_bytes()))
    got = import_transcripts("auto", url)
    _same_items(got, import_transcripts("auto", plain))
    assert set(_files(got)) == {url}


@pytest.mark.parametrize("ext", sorted(PACK))
def test_a_file_that_does_not_decompress_is_named(tmp_path, ext):
    bad = tmp_path / f"broken.jsonl{ext}"
    bad.write_bytes(b"this is not compressed data at all" * 10)
    with pytest.raises(BadTranscriptError, match=rf"broken\.jsonl\{ext}: cannot be decompressed as {ext[1:]}"):
        import_transcripts("openai", bad)
    cut = tmp_path / f"cut.jsonl{ext}"  # a truncated download
    cut.write_bytes(PACK[ext]((ROOT / "data/transcripts/openai_chat.jsonl").read_bytes())[:-20])
    with pytest.raises(BadTranscriptError, match=rf"cut\.jsonl\{ext}: cannot be decompressed"):
        import_transcripts("openai", cut)


def test_many_compressed_files_hold_no_descriptor_each(tmp_path):
    """A directory of more compressed files than the process may open at once (Codex's
    archive): each is decompressed into a named temp file, so no descriptor is held per file."""
    resource = pytest.importorskip("resource")
    src = (ROOT / "data/transcripts/openai_chat.jsonl").read_bytes()
    for i in range(150):
        (tmp_path / f"s{i:03d}.jsonl.gz").write_bytes(gzip.compress(src.replace(b'"id": "', f'"id": "f{i}-'.encode())))
    code = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))\n"
        "from cupel_np.io.importers import import_transcripts\n"
        f"print(import_transcripts('auto', {str(tmp_path)!r}).conversations)\n"
    )
    import subprocess
    import sys

    assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] > 64
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    plain = import_transcripts("openai", ROOT / "data/transcripts/openai_chat.jsonl").conversations
    assert int(done.stdout.strip()) == 150 * plain
