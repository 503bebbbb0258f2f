"""Inputs copied to local temp files: object-store inputs, for readers that take two passes
over large local inputs (:func:`spool_remote`), and compressed inputs, decompressed for every
reader (:func:`decompressed`)."""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
from pathlib import Path, PurePosixPath
from typing import Any

from cupel_np._fs import RemotePath
from cupel_np.errors import BadTranscriptError
from cupel_np.io.importers.jsonread import _remote_size, file_size

_Local: Any = type(Path())  # PosixPath or WindowsPath: what Path() makes here


class SpooledPath(_Local):
    """A local copy of an input (:func:`spool_remote`, :func:`decompressed`): a local path (an
    unnamed temp file, reopened through ``/proc/self/fd``, or a temp file that is removed with
    this object) that keeps the input's ``name``, ``suffix`` and ``stem`` (a compressed input's
    without the compression suffix), so a reader treats it as it would the input, with the
    local file's seeks and second passes."""

    _shown: Any
    _keep: Any

    @property
    def name(self) -> str:
        return self._shown.name

    @property
    def suffix(self) -> str:
        return self._shown.suffix

    @property
    def stem(self) -> str:
        return self._shown.stem


def spool_remote(files: list[tuple[Any, str]], over: int) -> list[tuple[Any, str]]:
    """``files`` with each object-store file (a ``RemotePath``) copied to a local temp file,
    when all ``files`` hold more than ``over`` bytes together (or a remote size cannot be
    told): readers that take two passes over large local inputs (reading records again at
    their byte offsets) then take them on object-store inputs too, instead of holding every
    record. The copy is an unnamed file where the system has them (Linux ``O_TMPFILE``: nothing
    is left behind, even by a killed process), removed when the returned path is released;
    names in metadata stay the remote ones (the second item of each pair)."""
    if not any(isinstance(p, RemotePath) for p, _ in files):
        return files
    sizes = [_remote_size(p) if isinstance(p, RemotePath) else file_size(p) for p, _ in files]
    if None not in sizes and sum(sizes) <= over:  # type: ignore[arg-type]
        return files
    return [(_spool(p) if isinstance(p, RemotePath) else p, name) for p, name in files]


def _zstd(raw):
    import pyarrow as pa

    return pa.CompressedInputStream(pa.PythonFile(raw, mode="r"), "zstd")


#: compressed inputs: the name's last suffix -> a decompressing reader over the raw stream
COMPRESSED = {
    ".gz": lambda raw: gzip.GzipFile(fileobj=raw, mode="rb"),
    ".bz2": lambda raw: bz2.BZ2File(raw, mode="rb"),
    ".xz": lambda raw: lzma.LZMAFile(raw, mode="rb"),
    ".zst": _zstd,
}


def compression_of(name: str) -> str | None:
    """The compression suffix a file name ends with (``.gz``, ``.bz2``, ``.xz``, ``.zst``), or None."""
    suffix = os.path.splitext(name)[1].lower()
    return suffix if suffix in COMPRESSED else None


def decompressed(files: list[tuple[Any, str]]) -> list[tuple[Any, str]]:
    """``files`` with each compressed one (by its name's suffix: ``COMPRESSED``) decompressed
    into a local temp file (a named one: a directory of thousands holds no file descriptor per
    file; disk: the files' decompressed sizes until the import ends) as it is read (memory: a
    read buffer), named without the suffix for the readers (``logs.jsonl.gz`` reads as
    ``logs.jsonl``: its format detected and read as such); names in metadata stay the files'
    own. A file that does not decompress is an error naming it."""
    out = []
    for p, name in files:
        ext = compression_of(p.name)
        if ext is None:
            out.append((p, name))
            continue
        inner = PurePosixPath(p.name[: -len(ext)])
        try:
            out.append((_spool(p, inner, COMPRESSED[ext], named=True), name))
        except (OSError, EOFError, lzma.LZMAError, ValueError) as e:  # (pyarrow's errors are OSError / ValueError)
            raise BadTranscriptError(f"{name}: cannot be decompressed as {ext[1:]}: {e}") from None
    return out


def _spool(p, shown: Any = None, decode: Any = None, named: bool = False) -> SpooledPath:
    """One copy of ``p`` (downloaded, and decompressed by ``decode`` when given) into a local
    file: an unnamed temp file reopened through ``/proc/self/fd`` where that exists (told
    before the copy, so the file is read once on every system), else (or ``named``: no file
    descriptor held per copy, for inputs of many files) a named copy in a private directory.
    ``shown``: what the copy is named as (``p`` by default)."""
    import contextlib
    import shutil
    import tempfile
    import weakref

    f = None if named else tempfile.TemporaryFile(prefix="cupel-spool-")
    here = "" if f is None else f"/proc/self/fd/{f.fileno()}"
    if f is not None and os.path.exists(here):
        out = SpooledPath(here)
        out._keep = weakref.finalize(out, f.close)  # the file lives as long as the path
        dst: Any = contextlib.nullcontext(f)
    else:  # no /proc (macOS, some containers): a named copy in a private directory, removed with the path
        if f is not None:
            f.close()
        tmp = tempfile.mkdtemp(prefix="cupel-spool-")
        local = os.path.join(tmp, "input" + (p if shown is None else shown).suffix)
        out = SpooledPath(local)
        out._keep = weakref.finalize(out, shutil.rmtree, tmp, True)
        dst = open(local, "wb")  # closed by the with below
    try:
        with dst as w, p.open("rb") as raw:  # the copy is closed however the download ends
            src = decode(raw) if decode is not None else raw
            try:
                shutil.copyfileobj(src, w, 1 << 20)
            finally:
                if src is not raw:
                    src.close()
            w.flush()
    except BaseException:
        out._keep()  # the partial copy goes now
        raise
    out._shown = p if shown is None else shown
    return out
