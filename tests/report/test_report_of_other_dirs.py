"""``cupel-np report`` on a directory it cannot build a page for says what works (issue 26.17):
a tune output directory is named as such, with the command that rebuilds its page, and a
directory without sweep outputs is refused before any ``--overwrite`` advice (which could
only fail there)."""

from __future__ import annotations

from cupel_np import cli
from cupel_np.io.outdir import KIND_TUNE, new_run_id, write_manifest


def _report(capsys, *argv):
    code = cli.main(["report", *argv])
    return code, capsys.readouterr().err


def test_report_on_a_tune_directory_names_tune_and_suggests_what_works(tmp_path, capsys):
    out = tmp_path / "tune-out"
    out.mkdir()
    (out / "report.html").write_text("<!doctype html><title>cupel_np tune</title>", encoding="utf-8")
    (out / "best-1.toml").write_text("[[scorers]]\ntype = 'priority'\nweight = 1.0\n", encoding="utf-8")
    write_manifest(out, KIND_TUNE, new_run_id(), ["report.html", "best-1.toml"])
    for extra in ([], ["--overwrite"]):
        code, err = _report(capsys, str(out), *extra)
        assert code == 2
        assert "policy search (cupel-np tune)" in err and "cupel-np tune" in err
        assert "pass --overwrite" not in err and "no sweep output" not in err
    assert (out / "report.html").read_text(encoding="utf-8").startswith("<!doctype html><title>cupel_np tune")


def test_report_without_sweep_outputs_does_not_suggest_overwrite(tmp_path, capsys):
    out = tmp_path / "d"
    out.mkdir()
    (out / "report.html").write_text("<html>someone else's page</html>", encoding="utf-8")
    code, err = _report(capsys, str(out))
    assert code == 2 and "no sweep output 'variants'" in err and "--overwrite" not in err
