"""``cupel-np conformance`` on a TOML file that is not a vector says so, and a mistyped stage
gets a suggestion (new-user pass of issue 26: both said "unknown stage None" / "unknown stage
'pipline'" and nothing more)."""

from __future__ import annotations

from cupel_np import cli


def test_a_file_that_is_not_a_vector_and_a_mistyped_stage(tmp_path, capsys):
    (tmp_path / "a.toml").write_text("x = 1\n", encoding="utf-8")
    (tmp_path / "b.toml").write_text('[test]\nname = "b"\nstage = "pipline"\n', encoding="utf-8")
    assert cli.main(["conformance", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "a.toml: not a conformance vector: no [test] table with a 'stage' key" in out, out
    assert "b.toml: unknown stage 'pipline' (did you mean 'pipeline'?); stages: scoring," in out, out
