from pathlib import Path

import pytest

CONFORMANCE = Path(__file__).resolve().parents[2] / "shared" / "conformance"


@pytest.fixture(scope="session")
def conformance_dir() -> Path:
    if not CONFORMANCE.is_dir():
        pytest.skip(f"conformance vectors not found at {CONFORMANCE} (../shared/conformance)")
    return CONFORMANCE
