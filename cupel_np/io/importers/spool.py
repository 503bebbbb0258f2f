"""Object-store inputs copied to local temp files, for readers that take two passes over
large local inputs (:func:`spool_remote`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from cupel_np._fs import RemotePath
from cupel_np.io.importers.jsonread import _remote_size, file_size

_Local: Any = type(Path())  # PosixPath or WindowsPath: what Path() makes here


class SpooledPath(_Local):
    """A local copy of a remote input (:func:`spool_remote`): a local path (an unnamed temp
    file, reopened through ``/proc/self/fd``, or a temp file that is removed with this object)
    that keeps the remote file's ``name``, ``suffix`` and ``stem``, so a reader treats it as it
    would the remote file, with the local file's seeks and second passes."""

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


def _spool(p) -> SpooledPath:
    """One download of ``p`` into a local file: an unnamed temp file reopened through
    ``/proc/self/fd`` where that exists (told before the download, so the file is fetched once
    on every system), else a named copy in a private directory."""
    import contextlib
    import shutil
    import tempfile
    import weakref

    f = tempfile.TemporaryFile(prefix="cupel-spool-")
    here = f"/proc/self/fd/{f.fileno()}"
    if os.path.exists(here):
        out = SpooledPath(here)
        out._keep = weakref.finalize(out, f.close)  # the file lives as long as the path
        dst: Any = contextlib.nullcontext(f)
    else:  # no /proc (macOS, some containers): a named copy in a private directory, removed with the path
        f.close()
        tmp = tempfile.mkdtemp(prefix="cupel-spool-")
        local = os.path.join(tmp, "input" + p.suffix)
        out = SpooledPath(local)
        out._keep = weakref.finalize(out, shutil.rmtree, tmp, True)
        dst = open(local, "wb")  # closed by the with below
    try:
        with dst as w, p.open("rb") as src:  # the copy is closed however the download ends
            shutil.copyfileobj(src, w, 1 << 20)
            w.flush()
    except BaseException:
        out._keep()  # the partial copy goes now
        raise
    out._shown = p
    return out
