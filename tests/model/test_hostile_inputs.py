"""Inputs a careless or hostile user may give: a policy file that is not UTF-8 and documents
nested thousands deep are usage errors naming the file, never internal errors."""

from pathlib import Path

import pytest

import cupel_np as c
from cupel_np import cli
from cupel_np.errors import InvalidConfigError
from cupel_np.testing.checks import load_checks

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample_sessions.parquet"


def test_a_policy_file_that_is_not_utf8_is_a_usage_error_naming_it(tmp_path, capsys):
    p = tmp_path / "latin1.toml"
    p.write_bytes('name = "caf\u00e9"\n[[scorers]]\ntype = "recency"\n'.encode("latin-1"))
    with pytest.raises(InvalidConfigError, match=r"latin1.toml: not UTF-8 text"):
        c.Policy.from_file(p)
    argv = ["run", str(SAMPLE), "--policy", str(p), "--max-tokens", "800", "--target-tokens", "600"]
    assert cli.main(argv + ["--set-column", "session_id", "--set", "session-0007"]) == 2
    err = capsys.readouterr().err
    assert "latin1.toml: not UTF-8" in err and "internal error" not in err


@pytest.mark.parametrize("suffix", [".json", ".toml"])
def test_deeply_nested_documents_are_a_clear_error(tmp_path, suffix):
    p = tmp_path / f"deep{suffix}"
    if suffix == ".json":
        p.write_text('{"scorers": ' + "[" * 100_000 + "]" * 100_000 + "}")
    else:
        p.write_text("x = " + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(InvalidConfigError, match="nested too deeply"):
        c.Policy.from_file(p)
    with pytest.raises(InvalidConfigError, match=rf"deep{suffix}: nested too deeply"):
        load_checks(p)


def test_a_policy_nested_through_wrappers_is_a_clear_error():
    d: dict = {"type": "priority"}
    for _ in range(5000):
        d = {"type": "scaled", "inner": d}
    with pytest.raises(InvalidConfigError, match="nested too deeply"):
        c.Policy.from_dict({"scorers": [dict(d, weight=1)]})
