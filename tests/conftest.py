import logging
import os
import sys
from pathlib import Path

import pytest
from s3_server import ENV_NAMES, S3, free_port
from s3_server import KEYS as S3_KEYS

from cupel_np import _fs

CONFORMANCE = Path(__file__).resolve().parents[2] / "shared" / "conformance"

# Every folder of tests/ on the path (after everything else), as pytest puts tests/ itself for
# this file: a test module may import another's helpers by basename from any folder
# (`from test_properties import assert_same_outcome`); basenames are unique across the tree
# (tests/test_layout.py), so a name means one file whichever test runs first or alone.
for _folder in sorted({p.parent for p in Path(__file__).resolve().parent.rglob("test_*.py")}):
    if str(_folder) not in sys.path:
        sys.path.append(str(_folder))


#: seconds a test on a dask cluster (one using a ``client`` fixture) may take before it fails:
#: a lost task leaves ``as_completed`` waiting for ever, which stalled a CI run until its own
#: limit instead of failing with a traceback (the slowest such test takes ~10 s here)
DASK_TEST_TIMEOUT = 300


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "client" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.timeout(DASK_TEST_TIMEOUT))


def missing_conformance(where: Path = CONFORMANCE) -> None:
    """The conformance vectors are absent: skip the calling test, or fail it when the
    environment variable CI is set (CI must run every conformance test)."""
    message = f"conformance vectors not found at {where} (../shared/conformance)"
    if os.environ.get("CI"):
        pytest.fail(f"{message}; CI must run the conformance tests")
    pytest.skip(message)


@pytest.fixture(scope="session")
def conformance_dir() -> Path:
    if not CONFORMANCE.is_dir():
        missing_conformance()
    return CONFORMANCE


# ----------------------------------------------------------------------------- S3 (moto)
@pytest.fixture(scope="session")
def s3_server():
    """moto's S3 server on 127.0.0.1:<free port>, with the AWS environment set for this
    process and every process it starts (Dask workers), restored afterwards. Never skipped
    under CI (``CI`` set): the ``test`` extra installs ``moto[server]``."""
    try:
        from moto.server import ThreadedMotoServer
    except ImportError:  # pragma: no cover - the test extra installs moto[server]
        if os.environ.get("CI"):
            pytest.fail('moto[server] is not installed: pip install -e ".[test]"')
        pytest.skip("moto[server] is not installed")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    saved = {k: os.environ.get(k) for k in ENV_NAMES}
    for k in ENV_NAMES:
        os.environ.pop(k, None)
    os.environ.update(
        S3_KEYS,
        AWS_DEFAULT_REGION="us-east-1",
        AWS_ENDPOINT_URL=endpoint,
        AWS_EC2_METADATA_DISABLED="true",  # never ask an instance metadata address for credentials
        AWS_SHARED_CREDENTIALS_FILE=os.devnull,
        AWS_CONFIG_FILE=os.devnull,
    )
    _fs.configure(None)
    try:
        yield S3(endpoint)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        _fs.configure(None)
        server.stop()


@pytest.fixture
def bucket(s3_server) -> str:
    """A fresh, empty bucket's name."""
    _fs.configure(None)
    return s3_server.new_bucket()


# ----------------------------------------------------------------------------- GCS and Azure
def _emulator(make, name: str, install: str):
    """Start an emulator (``make()``), with its environment set for this process and every
    process it starts, restored afterwards; skipped when it is not installed, failed under CI.
    Only the emulator's own variables are touched: both emulators live for the session, so
    Azurite's must not unset GCS's ``STORAGE_EMULATOR_HOST`` (the gs:// tests after it then
    went to Google's real endpoint and hung in pyarrow's retries)."""
    try:
        store = make()
    except (ImportError, FileNotFoundError) as e:
        message = f"{name} is not installed ({e}): {install}"
        if os.environ.get("CI"):
            pytest.fail(f"{message}; CI must run the {name} tests")
        pytest.skip(message)
    saved = {k: os.environ.get(k) for k in store.env_names}
    for k in store.env_names:
        os.environ.pop(k, None)
    os.environ.update(store.env)
    _fs.configure(None)
    try:
        yield store
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        _fs.configure(None)
        store.stop()


@pytest.fixture(scope="session")
def gcs_server(tmp_path_factory):
    """fake-gcs-server on 127.0.0.1:<free port> (``STORAGE_EMULATOR_HOST`` set)."""
    from object_stores import GCS

    yield from _emulator(lambda: GCS(tmp_path_factory.mktemp("gcs")), "fake-gcs-server", 'pip install -e ".[test]"')


@pytest.fixture(scope="session")
def azure_server(tmp_path_factory):
    """Azurite's blob service on 127.0.0.1:<free port> (``AZURE_STORAGE_CONNECTION_STRING`` set)."""
    from object_stores import Azurite, azurite_command

    def make():
        command = azurite_command()
        if command is None:
            raise FileNotFoundError("azurite-blob not found")
        return Azurite(command, tmp_path_factory.mktemp("azurite"))

    yield from _emulator(make, "Azurite", "npm install --prefix .azurite azurite (Node 18+)")


@pytest.fixture(params=["gs", "az"])
def store(request):
    """Each emulated object store in turn (GCS, then Azure Blob)."""
    return request.getfixturevalue("gcs_server" if request.param == "gs" else "azure_server")
