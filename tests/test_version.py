"""``cupel-np --version`` prints the package version (``cupel_np._version``)."""

import subprocess
import sys
from pathlib import Path

import pytest

import cupel_np
from cupel_np import cli

ROOT = Path(__file__).resolve().parents[1]


def test_version_flag_prints_the_package_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"cupel-np {cupel_np.__version__}\n"


def test_version_flag_from_the_module_entry_point():
    proc = subprocess.run(
        [sys.executable, "-m", "cupel_np", "--version"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"cupel-np {cupel_np.__version__}"
    assert cupel_np.__version__ and cupel_np.__version__[0].isdigit()
