"""Writing files atomically (temp file beside the target + rename) with the permissions a
plainly created file would get. Shared by every module that writes output files."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import TypeAlias

#: a file system path
StrPath: TypeAlias = str | os.PathLike[str]
#: one path (a file, a directory or a glob pattern) or a list of files
PathOrPaths: TypeAlias = StrPath | list[StrPath] | tuple[StrPath, ...]


def _file_mode() -> int:
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
        os.fchmod(fd, _file_mode())
    finally:
        os.close(fd)
    return tmp


def atomic_write_bytes(path: StrPath, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temp file + rename (never a half-written file)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_beside(p)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, p)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


#: the message for a document nested deeper than the parser (or a reader) can follow
TOO_DEEP = "nested too deeply to read (tables or lists inside each other hundreds of levels deep)"


def read_data_file(path: StrPath, *, default: str = "json") -> object:
    """The TOML or JSON document in ``path`` (by its suffix, ``.toml`` / ``.json``; any other
    suffix is read as ``default``). A missing file or a malformed document is an
    ``InvalidConfigError`` naming the file."""
    import json

    from cupel_np.errors import InvalidConfigError

    p = Path(path)
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
