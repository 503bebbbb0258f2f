"""A checks file whose utilization check meets a variant with max_tokens 0 is refused when the
file is read, naming the file, the check and the variant (new-user pass, issue 26.14: it said
only "have_budget_utilization_above needs budget.max_tokens > 0")."""

from __future__ import annotations

from pathlib import Path

from cupel_np import cli

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample_sessions.parquet"
CHECKS = """
set_column = "session_id"
presets = ["chat"]
[[variants]]
label = "zero"
preset = "rag"
budget = {{ max_tokens = 0, target_tokens = 0 }}
[budget]
max_tokens = 8000
target_tokens = 6000
[[check]]
name = "uses the window"
assert = "have_budget_utilization_above"
threshold = 0.3
{variant}
"""


def test_a_zero_max_tokens_variant_is_named_with_the_file_and_the_check(tmp_path, capsys):
    f = tmp_path / "checks.toml"
    f.write_text(CHECKS.format(variant=""), encoding="utf-8")
    assert cli.main(["check", str(SAMPLE), "--checks", str(f)]) == 2
    err = capsys.readouterr().err
    assert f"{f}: check[0] ('uses the window')" in err and "variant 'zero'" in err, err


def test_the_check_on_other_variants_only_runs(tmp_path, capsys):
    f = tmp_path / "checks.toml"
    f.write_text(CHECKS.format(variant='variant = "chat"'), encoding="utf-8")
    code = cli.main(["check", str(SAMPLE), "--checks", str(f)])
    out, err = capsys.readouterr()
    assert code in (0, 1) and "uses the window" in out, err
