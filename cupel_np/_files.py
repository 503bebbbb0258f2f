"""Writing files atomically (temp file beside the target + rename) with the permissions a
plainly created file would get. Shared by every module that writes output files. A URL
(``s3://...``, see ``_fs``) is written the object-store way: a temp key beside the target,
then a server-side copy into place, so no reader ever sees part of an object."""

from __future__ import annotations

import errno
import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from cupel_np._fs import RemotePath

#: a file system path, or a URL (``s3://...``: see ``_fs``)
StrPath: TypeAlias = "str | os.PathLike[str] | RemotePath"
#: one path (a file, a directory or a glob pattern) or a list of files
PathOrPaths: TypeAlias = "StrPath | list[StrPath] | tuple[StrPath, ...]"


def file_mode() -> int:
    """The mode a newly created file gets (0o666 minus the process umask). Read from
    /proc/self/status where available: setting the umask to read it would race other threads."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def temp_beside(p: Path) -> str:
    """A temp file next to ``p`` (same file system, so the rename is atomic), with the
    permissions a plainly created file would get: mkstemp makes it 0600."""
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, file_mode())
    finally:
        os.close(fd)
    return tmp


def atomic_write_bytes(path: StrPath, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temp file + rename (never a half-written file)."""
    from cupel_np._fs import RemotePath, as_path, write_remote

    target = as_path(path)
    if isinstance(target, RemotePath):
        write_remote(target, lambda sink: sink.write(data))
        return
    p = target
    if p.is_dir():
        raise IsADirectoryError(errno.EISDIR, "is a directory; give a file path", str(p))
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_beside(p)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, p)
    except OSError as e:  # name the file asked for, never our temp file
        _unlink_quietly(tmp)
        raise type(e)(e.errno, e.strerror or str(e), str(p)) from None
    except BaseException:
        _unlink_quietly(tmp)
        raise


def _unlink_quietly(tmp: str) -> None:
    try:
        os.unlink(tmp)
    except OSError:
        pass


def _finite(o):
    """``o`` with every NaN / Infinity float (Python or NumPy) replaced by None."""
    if isinstance(o, float) or type(o).__name__ in ("float32", "float64", "float16"):
        f = float(o)
        return f if f == f and f not in (float("inf"), float("-inf")) else None
    if isinstance(o, dict):
        return {k: _finite(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_finite(v) for v in o]
    return o


def dumps_json(obj, **kw) -> str:
    """The one JSON writer of every output (summary.json, ``--json``, manifests): strict JSON,
    never ``NaN`` or ``Infinity``. A number that is not finite (a metric with nothing to
    measure, e.g. a recall over sets without a relevant item) is written as ``null``."""
    kw.setdefault("default", str)
    return json.dumps(_finite(obj), allow_nan=False, **kw)


#: the message for a document nested deeper than the parser (or a reader) can follow
TOO_DEEP = "nested too deeply to read (tables or lists inside each other hundreds of levels deep)"


def read_data_file(path: StrPath, *, default: str = "json") -> object:
    """The TOML or JSON document in ``path`` (by its suffix, ``.toml`` / ``.json``; any other
    suffix is read as ``default``). A missing file or a malformed document is an
    ``InvalidConfigError`` naming the file."""
    import json

    from cupel_np._fs import as_path
    from cupel_np.errors import InvalidConfigError

    p = as_path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise InvalidConfigError(f"cannot read {p}: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise InvalidConfigError(f"{p}: not UTF-8 text (byte {e.start}: {e.reason}); save the file as UTF-8") from None
    suffix = p.suffix.lower()
    kind = "toml" if suffix == ".toml" else "json" if suffix == ".json" else default
    if kind == "toml":
        import tomli

        try:
            return tomli.loads(text)
        except tomli.TOMLDecodeError as e:
            raise InvalidConfigError(f"{p}: malformed TOML: {e}") from None
        except RecursionError:
            raise InvalidConfigError(f"{p}: {TOO_DEEP}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise InvalidConfigError(f"{p}: malformed JSON: {e}") from None
    except RecursionError:
        raise InvalidConfigError(f"{p}: {TOO_DEEP}") from None
