"""Paths and URLs: one small layer between cupel_np's readers and writers and the file systems.

``as_path(x)`` is the one entry: a local path (anything without a ``scheme://``) comes back as
the ``pathlib.Path`` it always was, so local runs take exactly the code and the speed they took
before; ``file://`` URLs become local Paths too. Any other URL becomes a :class:`RemotePath`,
the subset of ``pathlib.Path`` that cupel_np's readers and writers use (``/``, ``name``,
``parent``, ``is_file``, ``is_dir``, ``iterdir``, ``glob``, ``rglob``, ``read_bytes``,
``unlink``, ``mkdir``...) over a ``pyarrow.fs`` file system:

* ``s3://bucket/key`` - pyarrow's built-in S3 file system (no extra package). Credentials and
  the endpoint come from the usual environment (``AWS_ACCESS_KEY_ID``,
  ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_PROFILE``, ``AWS_REGION`` /
  ``AWS_DEFAULT_REGION``, ``AWS_ENDPOINT_URL`` / ``AWS_ENDPOINT_URL_S3``) and from storage
  options (``--storage-option KEY=VALUE``; :func:`configure`).
* ``gs://bucket/key`` - pyarrow's built-in GCS file system (``STORAGE_EMULATOR_HOST`` for an
  emulator), and ``az://container/key`` / ``abfs://container/key`` - pyarrow's Azure file system
  (account, key and endpoints from ``AZURE_STORAGE_*`` or a connection string): see ``_cloud``.
* ``memory://key`` and any other fsspec protocol - through fsspec (the ``fsspec`` extra), the
  memory file system being one process's own.

Storage options are never logged nor written anywhere: errors and manifests name the URL only.
Writes are atomic on object stores too (:func:`atomic_write_bytes` in ``_files``): a temp key
beside the target, then a server-side copy into place, so a reader never sees part of an object.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from cupel_np._cloud import EXTRAS as _EXTRAS
from cupel_np._cloud import azure as _azure_fs
from cupel_np._cloud import check_keys as _check_keys
from cupel_np._cloud import gcs as _gcs_fs
from cupel_np._cloud import split_endpoint as _endpoint
from cupel_np._cloud import typed as _typed
from cupel_np.errors import StorageError

if TYPE_CHECKING:
    import pyarrow.fs as pafs

#: what ``as_path`` returns
AnyPath: TypeAlias = "Path | RemotePath"

_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://(.*)$", re.DOTALL)

#: storage options set by :func:`configure` (the CLI's ``--storage-option``), per process
_OPTIONS: dict[str, str] = {}

#: the options each built-in file system accepts (pyarrow's keyword names, plus ``endpoint_url``)
S3_OPTIONS = (
    "access_key",
    "secret_key",
    "session_token",
    "region",
    "endpoint_url",
    "endpoint_override",
    "scheme",
    "anonymous",
    "force_virtual_addressing",
    "connect_timeout",
    "request_timeout",
    "allow_bucket_creation",
)


def is_url(x: object) -> bool:
    """Whether ``x`` is a ``scheme://...`` string (a Windows drive ``C:\\`` is not)."""
    return isinstance(x, str) and _URL.match(x) is not None and len(x.split("://", 1)[0]) > 1


def is_remote(x: object) -> bool:
    """Whether ``x`` names a location on a non-local file system (a URL other than file://)."""
    if isinstance(x, RemotePath):
        return True
    return is_url(x) and not str(x).lower().startswith("file://")


def as_path(x: Any) -> Path | RemotePath:
    """``x`` as a ``pathlib.Path`` (local paths and ``file://`` URLs, unchanged) or a
    :class:`RemotePath` (every other URL)."""
    if isinstance(x, (Path, RemotePath)):
        return x
    if isinstance(x, str):
        m = _URL.match(x)
        if m and len(m.group(1)) > 1:
            scheme = m.group(1).lower()
            if scheme == "file":
                from urllib.parse import unquote, urlparse

                u = urlparse(x)
                return Path(unquote(u.path))
            return RemotePath(scheme, m.group(2).strip("/"))
    return Path(x)


def configure(options: dict[str, str] | None) -> None:
    """Set this process's storage options (``KEY=VALUE`` pairs: see ``S3_OPTIONS``...), applied
    to every URL opened from now on. ``None`` or ``{}`` clears them."""
    _OPTIONS.clear()
    _OPTIONS.update({str(k): str(v) for k, v in (options or {}).items()})
    _filesystem.cache_clear()


def current_options() -> dict[str, str]:
    """A copy of the storage options in force (to hand to Dask workers; never to print)."""
    return dict(_OPTIONS)


def parse_options(pairs: list[str] | None) -> dict[str, str]:
    """``["KEY=VALUE", ...]`` (the CLI's repeated ``--storage-option``) as a dict; a pair
    without ``=`` is an error naming the key only (the value may be a secret)."""
    out: dict[str, str] = {}
    for p in pairs or []:
        key, eq, value = p.partition("=")
        key = key.strip()
        if not eq or not key:
            raise StorageError(f"--storage-option takes KEY=VALUE, got a value without '=' (key {key or '?'!r})")
        out[key] = value
    return out


# ----------------------------------------------------------------------------- file systems
def _env_has_aws_credentials() -> bool:
    env = os.environ
    if env.get("AWS_ACCESS_KEY_ID") and env.get("AWS_SECRET_ACCESS_KEY"):
        return True
    if any(env.get(k) for k in ("AWS_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_FULL_URI")):
        return True
    if env.get("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"):
        return True
    files = [env.get("AWS_SHARED_CREDENTIALS_FILE"), env.get("AWS_CONFIG_FILE")]
    home = Path(env.get("HOME") or "~").expanduser()
    files += [str(home / ".aws" / "credentials"), str(home / ".aws" / "config")]
    return any(f and os.path.isfile(f) for f in files)


def _s3(options: dict[str, str]) -> pafs.FileSystem:
    import pyarrow.fs as pafs

    _check_keys("s3", options, S3_OPTIONS)
    kw: dict[str, Any] = {k: _typed(k, v) for k, v in options.items()}
    endpoint = (
        kw.pop("endpoint_url", None) or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    )
    if endpoint and "endpoint_override" not in kw:
        kw["endpoint_override"], scheme = _endpoint(endpoint)
        kw.setdefault("scheme", scheme)
    if "region" not in kw:
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        if region or kw.get("endpoint_override"):  # a custom endpoint: never ask AWS for a region
            kw["region"] = region or "us-east-1"
    has_keys = "access_key" in kw and "secret_key" in kw
    if not (kw.get("anonymous") or has_keys or _env_has_aws_credentials()):
        metadata_off = os.environ.get("AWS_EC2_METADATA_DISABLED", "").lower() == "true"
        if metadata_off or kw.get("endpoint_override"):
            raise StorageError(
                "no AWS credentials for s3:// URLs: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE), "
                "pass --storage-option access_key=... --storage-option secret_key=..., "
                "or --storage-option anonymous=true for a public bucket"
            )
    try:
        return pafs.S3FileSystem(**kw)
    except (TypeError, ValueError) as e:
        raise StorageError(f"bad storage options for s3:// URLs: {e}") from None


def _fsspec(scheme: str, options: dict[str, str], *, extra: str | None = None) -> pafs.FileSystem:
    import pyarrow.fs as pafs

    extra = extra or _EXTRAS.get(scheme, "fsspec")
    try:
        import fsspec  # type: ignore[import-untyped]
    except ImportError:
        raise StorageError(
            f'{scheme}:// URLs need fsspec, which is not installed: pip install "cupel-np[{extra}]"'
        ) from None
    try:
        fs = fsspec.filesystem(scheme, **options)
    except ImportError as e:
        raise StorageError(
            f'{scheme}:// URLs need {e.name or "a package"}, which is not installed: pip install "cupel-np[{extra}]"'
        ) from None
    except ValueError as e:
        raise StorageError(f"{scheme}:// URLs are not supported: {e}") from None
    except TypeError as e:
        raise StorageError(f"bad storage options for {scheme}:// URLs: {e}") from None
    return pafs.PyFileSystem(pafs.FSSpecHandler(fs))


@cache
def _filesystem(scheme: str) -> pafs.FileSystem:
    options = dict(_OPTIONS)
    if scheme == "s3":
        return _s3(options)
    if scheme in ("gs", "gcs"):
        return _gcs_fs(options, _fsspec)
    if scheme in ("az", "abfs", "abfss"):
        return _azure_fs(scheme, options, _fsspec)
    return _fsspec(scheme, options)


def filesystem(scheme: str) -> pafs.FileSystem:
    """The (cached, per process) ``pyarrow.fs`` file system of a URL scheme, built with the
    storage options in force."""
    return _filesystem(scheme.lower())


def arrow_location(x: Any) -> tuple[pafs.FileSystem | None, str]:
    """``(file system, path on it)`` for pyarrow's readers and writers: ``(None, x)`` for a
    local path, so local calls stay exactly what they were."""
    p = as_path(x)
    if isinstance(p, RemotePath):
        return p.fs, p.path
    return None, str(p)


def arrow_files(files: list[str]) -> tuple[pafs.FileSystem | None, list[str]]:
    """One file system and the paths on it for a list of files (all local or all on one store)."""
    if not files or not any(is_remote(f) for f in files):
        return None, [str(as_path(f)) if is_url(f) else str(f) for f in files]
    ps = [as_path(f) for f in files]
    schemes = {p.scheme if isinstance(p, RemotePath) else "file" for p in ps}
    if len(schemes) > 1:
        raise StorageError(f"items files on different file systems ({', '.join(sorted(schemes))}): use one")
    first = ps[0]
    assert isinstance(first, RemotePath)
    return first.fs, [p.path for p in ps if isinstance(p, RemotePath)]


def translate(e: BaseException, url: str) -> StorageError:
    """An OSError of a remote file system as a one-line StorageError naming ``url``."""
    msg = " ".join(str(e).split())
    low = msg.lower()
    if "nosuchbucket" in low or "bucket does not exist" in low or ("bucket" in low and "not found" in low):
        why = "no such bucket"
    elif any(w in low for w in ("access denied", "accessdenied", "access_denied", "forbidden", "403")):
        why = "access denied"
    elif "invalidaccesskeyid" in low or "signaturedoesnotmatch" in low or "credentials" in low:
        why = "the credentials were refused"
    elif "connect" in low or "timed out" in low or "curl" in low:
        why = "cannot reach the storage endpoint"
    else:
        why = "storage error"
    return StorageError(f"{url}: {why} ({msg})")


# ----------------------------------------------------------------------------- remote paths
class RemotePath:
    """A file or directory on an object store or another non-local file system: the part of
    ``pathlib.Path``'s interface cupel_np uses, backed by ``pyarrow.fs``. ``str()`` is the URL;
    ``path`` is the location on the file system (``bucket/key``). Directories are key prefixes:
    one exists when a key lies under it (or a directory marker does)."""

    __slots__ = ("_type", "path", "scheme")

    def __init__(self, scheme: str, path: str, _type: Any = None):
        self.scheme = scheme
        self.path = path.strip("/")
        self._type = _type  # the file type a listing already told (saves a request)

    # -- naming --------------------------------------------------------------------------
    def __str__(self) -> str:
        return f"{self.scheme}://{self.path}"

    def __repr__(self) -> str:
        return f"RemotePath({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RemotePath) and (self.scheme, self.path) == (other.scheme, other.path)

    def __hash__(self) -> int:
        return hash((self.scheme, self.path))

    def __lt__(self, other: RemotePath) -> bool:
        return str(self) < str(other)

    def __truediv__(self, name: Any) -> RemotePath:
        return RemotePath(self.scheme, f"{self.path}/{str(name).strip('/')}" if self.path else str(name))

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]

    @property
    def suffix(self) -> str:
        n = self.name
        i = n.rfind(".")
        return n[i:] if 0 < i < len(n) - 1 else ""

    @property
    def stem(self) -> str:
        s = self.suffix
        return self.name[: -len(s)] if s else self.name

    @property
    def parent(self) -> RemotePath:
        head = self.path.rsplit("/", 1)[0] if "/" in self.path else ""
        return RemotePath(self.scheme, head)

    @property
    def parts(self) -> tuple[str, ...]:
        return tuple(self.path.split("/"))

    def relative_to(self, other: RemotePath) -> Path:
        if not isinstance(other, RemotePath) or other.scheme != self.scheme:
            raise ValueError(f"{self} is not under {other}")
        base = other.path + "/" if other.path else ""
        if not self.path.startswith(base):
            raise ValueError(f"{self} is not under {other}")
        return Path(self.path[len(base) :])

    def resolve(self) -> RemotePath:
        return self

    def expanduser(self) -> RemotePath:
        return self

    def is_absolute(self) -> bool:
        return True

    def is_symlink(self) -> bool:
        return False

    # -- the file system -----------------------------------------------------------------
    @property
    def fs(self) -> pafs.FileSystem:
        return filesystem(self.scheme)

    def _info(self):
        import pyarrow.fs as pafs

        if self._type is not None:
            return pafs.FileInfo(self.path, self._type)
        try:
            return self.fs.get_file_info(self.path)
        except OSError as e:
            if "not found" in str(e).lower() and "bucket" not in str(e).lower():
                return pafs.FileInfo(self.path, pafs.FileType.NotFound)
            raise translate(e, str(self)) from None

    def missing_bucket(self) -> StorageError | None:
        """The error to raise when this path's bucket does not exist (None when it does, or
        the store has no buckets)."""
        if self.scheme not in ("s3", "gs", "gcs", "az", "abfs", "abfss") or not self.path:
            return None
        import pyarrow.fs as pafs

        bucket = self.path.split("/", 1)[0]
        try:
            found = self.fs.get_file_info(bucket).type != pafs.FileType.NotFound
        except OSError as e:
            raise translate(e, str(self)) from None
        word = "container" if self.scheme.startswith(("az", "abfs")) else "bucket"
        return None if found else StorageError(f"{self}: no such {word} {bucket!r}")

    def not_found(self, what: str = "file") -> Exception:
        """The error for a path that does not exist: no such bucket, or no such file."""
        return self.missing_bucket() or FileNotFoundError(2, f"No such {what}", str(self))

    def exists(self) -> bool:
        import pyarrow.fs as pafs

        return self._info().type != pafs.FileType.NotFound

    def is_file(self) -> bool:
        import pyarrow.fs as pafs

        return self._info().type == pafs.FileType.File

    def is_dir(self) -> bool:
        import pyarrow.fs as pafs

        if not self.path:
            return True
        return self._info().type == pafs.FileType.Directory

    def _list(self, recursive: bool) -> list:
        import pyarrow.fs as pafs

        try:
            infos = self.fs.get_file_info(pafs.FileSelector(self.path, recursive=recursive, allow_not_found=True))
        except OSError as e:
            raise translate(e, str(self)) from None
        return [pafs.FileInfo(i.path.strip("/"), i.type) for i in infos]  # fsspec's paths may lead with "/"

    def iterdir(self):
        for info in sorted(self._list(False), key=lambda i: i.path):
            yield RemotePath(self.scheme, info.path, info.type)

    def walk_files(self) -> list[RemotePath]:
        """Every file under this directory, sorted by path (the remote ``rglob("*")`` of files)."""
        import pyarrow.fs as pafs

        return sorted(RemotePath(self.scheme, i.path, i.type) for i in self._list(True) if i.type == pafs.FileType.File)

    def glob(self, pattern: str, *, files_only: bool = False):
        """Entries under this directory whose path relative to it matches ``pattern``
        (``**`` crosses directories; other wildcards stay within one name), sorted."""
        import pyarrow.fs as pafs

        recursive = "**" in pattern or "/" in pattern
        rx = _glob_regex(pattern)
        base = self.path + "/" if self.path else ""
        for info in sorted(self._list(recursive), key=lambda i: i.path):
            if files_only and info.type != pafs.FileType.File:
                continue
            if rx.fullmatch(info.path[len(base) :]):
                yield RemotePath(self.scheme, info.path, info.type)

    def rglob(self, pattern: str):
        yield from self.glob(f"**/{pattern}")

    def read_bytes(self) -> bytes:
        try:
            with self.fs.open_input_stream(self.path, compression=None) as f:  # (the stored bytes, as a local read)
                return f.read()
        except OSError as e:
            if isinstance(e, FileNotFoundError) or "not found" in str(e).lower() and "bucket" not in str(e).lower():
                raise self.not_found() from None
            raise translate(e, str(self)) from None

    def open(self, mode: str = "r", *, encoding: str | None = None, newline: str | None = None) -> Any:
        """A file object reading this file (``r`` or ``rb``), streamed from the store."""
        import io

        if mode not in ("r", "rb"):
            raise ValueError(f"RemotePath.open: only reading ('r', 'rb'), got {mode!r}")
        try:
            raw = self.fs.open_input_stream(self.path, compression=None)  # (not by the name's suffix)
        except OSError as e:
            if isinstance(e, FileNotFoundError) or "not found" in str(e).lower() and "bucket" not in str(e).lower():
                raise self.not_found() from None
            raise translate(e, str(self)) from None
        buffered = io.BufferedReader(_RawStream(raw))  # type: ignore[type-var]
        if mode == "rb":
            return buffered
        return io.TextIOWrapper(buffered, encoding=encoding or "utf-8", newline=newline)

    def read_text(self, encoding: str = "utf-8") -> str:
        return self.read_bytes().decode(encoding)

    def write_bytes(self, data: bytes) -> int:
        """Atomic: a temp key beside this one, then moved into place."""
        write_remote(self, lambda sink: sink.write(data))
        return len(data)

    def write_text(self, text: str, encoding: str = "utf-8") -> int:
        return self.write_bytes(text.encode(encoding))

    def unlink(self, missing_ok: bool = False) -> None:
        try:
            self.fs.delete_file(self.path)
        except FileNotFoundError:
            if not missing_ok:
                raise
        except OSError as e:
            if missing_ok and "not found" in str(e).lower() and "bucket" not in str(e).lower():
                return
            raise translate(e, str(self)) from None

    def rmtree(self) -> None:
        try:
            self.fs.delete_dir(self.path)
        except OSError as e:
            raise translate(e, str(self)) from None

    def mkdir(self, parents: bool = False, exist_ok: bool = False) -> None:
        """Directories are prefixes: nothing to create, but the bucket must exist (checked, so
        a missing bucket is an error before any work, not at the first write)."""
        missing = self.missing_bucket()
        if missing is not None:
            raise missing
        if self.is_file():
            raise StorageError(f"{self} exists and is not a directory")


class _RawStream:
    """A pyarrow input stream as a raw binary file (for ``io.BufferedReader``)."""

    def __init__(self, stream: Any):
        self._s = stream
        self.closed = False

    def readable(self) -> bool:
        return True

    def writable(self) -> bool:
        return False

    def seekable(self) -> bool:
        return False

    def readinto(self, b: Any) -> int:
        data = self._s.read(len(b))
        n = len(data)
        b[:n] = data
        return n

    def close(self) -> None:
        if not self.closed:
            self._s.close()
            self.closed = True

    def flush(self) -> None:
        pass

    def fileno(self) -> int:
        raise OSError("no file descriptor")

    def isatty(self) -> bool:
        return False


def _glob_regex(pattern: str) -> re.Pattern[str]:
    """A glob pattern (relative, ``/``-separated) as a regex: ``*`` and ``?`` within one name,
    ``[...]`` a character class, a ``**`` segment any number of directories."""
    segs = pattern.split("/")
    out = []
    for i, seg in enumerate(segs):
        last = i == len(segs) - 1
        if seg == "**":
            out.append(".*" if last else "(?:[^/]+/)*")
            continue
        j = 0
        while j < len(seg):
            ch = seg[j]
            if ch == "*":
                out.append("[^/]*")
            elif ch == "?":
                out.append("[^/]")
            elif ch == "[" and seg.find("]", j + 2) > 0:
                k = seg.find("]", j + 2)
                body = seg[j + 1 : k]
                out.append("[" + ("^" + body[1:] if body.startswith("!") else body).replace("\\", "\\\\") + "]")
                j = k
            else:
                out.append(re.escape(ch))
            j += 1
        if not last:
            out.append("/")
    return re.compile("".join(out), re.DOTALL)


def rmtree(p: Any) -> None:
    """Remove a directory and everything under it (local or remote)."""
    q = as_path(p)
    if isinstance(q, RemotePath):
        q.rmtree()
    else:
        import shutil

        shutil.rmtree(q)


def glob_files(pattern: str) -> list[str]:
    """The files matching a glob ``pattern`` (a URL or a local pattern), sorted."""
    p = as_path(pattern)
    if not isinstance(p, RemotePath):
        import glob

        return sorted(f for f in glob.glob(str(p), recursive=True) if Path(f).is_file())
    parts = p.path.split("/")
    fixed = []
    for part in parts:
        if any(ch in part for ch in "*?["):
            break
        fixed.append(part)
    base = RemotePath(p.scheme, "/".join(fixed))
    rest = "/".join(parts[len(fixed) :])
    return [str(f) for f in base.glob(rest, files_only=True)]


# ----------------------------------------------------------------------------- atomic writes
def remote_temp(target: RemotePath) -> RemotePath:
    """A temp key beside ``target`` (a ``RemotePath``), named as cupel_np's temp files are
    (``.NAME.RANDOM.tmp``) so ``--overwrite`` and the readers know it for what it is."""
    import uuid

    return target.parent / f".{target.name}.{uuid.uuid4().hex[:12]}.tmp"


def commit_remote(tmp: RemotePath, target: RemotePath) -> None:
    """Move a finished temp key into place (a server-side copy on object stores: the target
    appears whole or not at all), or remove it and raise a StorageError naming ``target``."""
    try:
        try:
            tmp.fs.move(tmp.path, target.path)
        except NotImplementedError:  # Azure without a hierarchical namespace: copy, then delete
            tmp.fs.copy_file(tmp.path, target.path)
            tmp.fs.delete_file(tmp.path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise translate(e, str(target)) from None


def write_remote(target: RemotePath, write: Callable[[Any], object]) -> None:
    """Write ``target`` through ``write(sink)`` on a temp key, then move it into place."""
    target.parent.mkdir(parents=True, exist_ok=True)  # checks the bucket
    tmp = remote_temp(target)
    try:
        with tmp.fs.open_output_stream(tmp.path) as sink:
            write(sink)
    except OSError as e:
        _discard(tmp)
        raise translate(e, str(target)) from None
    except BaseException:
        _discard(tmp)
        raise
    commit_remote(tmp, target)


def _discard(tmp: RemotePath) -> None:
    try:
        tmp.unlink(missing_ok=True)
    except Exception:  # the first error is the one to report
        pass
