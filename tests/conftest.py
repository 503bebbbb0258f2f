import os
from pathlib import Path

import pytest

CONFORMANCE = Path(__file__).resolve().parents[2] / "shared" / "conformance"


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
