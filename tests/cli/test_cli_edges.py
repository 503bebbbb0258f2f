"""Failures explained, not crashed, and the smaller CLI edges (issue 17.7-17.10)."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import cupel_np as c
from cupel_np import cli
from cupel_np.cli import shared
from cupel_np.cli.parser import build_parser
from cupel_np.errors import InvalidConfigError
from cupel_np.io import sweep_parquet

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "data" / "sample_sessions.parquet"
TR = ROOT / "data" / "transcripts"


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """10 sessions of the sample corpus."""
    t = pq.read_table(SAMPLE)
    keys = t.column("session_id").to_pylist()
    keep = [i for i, k in enumerate(keys) if int(k.split("-")[1]) < 10]
    path = tmp_path_factory.mktemp("items") / "items.parquet"
    pq.write_table(t.take(pa.array(keep)), path)
    return path


def run(capsys, *argv):
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_budget_with_every_cell_failed_says_why_and_writes_nothing(tmp_path, small, capsys):
    # no --set-column: the whole file is one set whose pinned items exceed every ladder budget
    code, out, err = run(capsys, "budget", small, "--preset", "chat", "--ladder", "300:900:3", "--out", tmp_path / "b")
    assert code == 2 and "internal error" not in err
    assert "every (variant, budget, set) cell failed" in err and "pinned items require" in err
    assert "--set-column (session_id?)" in err
    assert not (tmp_path / "b").exists()


def test_budget_prints_why_some_cells_failed(tmp_path, small, capsys):
    code, out, err = run(
        capsys, "budget", small, "--preset", "chat", "--ladder", "100:20000:4", "--set-column", "session_id",
        "--out", tmp_path / "b", "--quiet",
    )  # fmt: skip
    assert code == 0, err
    assert re.search(r"\d+ failed \(variant, set\) cells?; most common reasons:\n +\d+ x .*pinned items require", out)


def test_run_on_a_multi_set_file_points_at_set_column(small, capsys):
    # one session's pinned items fit in 2000 tokens; the ten sessions' together do not
    code, out, err = run(capsys, "run", small, "--preset", "chat", "--max-tokens", "2000", "--target-tokens", "1500")
    assert code == 2
    assert "--set-column (session_id?)" in err and "--set KEY" in err


@pytest.mark.parametrize("stream", [[], ["--chunk-rows", "100"]])
def test_sensitivity_prints_the_top_failure_reasons(tmp_path, small, capsys, stream):
    code, out, err = run(
        capsys, "sensitivity", small, "--preset", "chat", "--preset", "rag", "--max-tokens", "300",
        "--target-tokens", "200", "--set-column", "session_id", "--out", tmp_path / "o", "--quiet", *stream,
    )  # fmt: skip
    assert code == 0, err
    m = re.search(r"(\d+) failed \(variant, set\) cells?; most common reasons:\n((?: +[\d,]+ x .*\n)+)", out)
    assert m, out
    counts = [int(l.split(" x ")[0].replace(",", "")) for l in m.group(2).splitlines()]
    assert sum(counts) <= int(m.group(1)) and counts == sorted(counts, reverse=True)
    assert "pinned items require" in m.group(2)


def test_top_reasons_groups_messages_that_differ_in_set_and_numbers():
    msgs = [
        "variant 'a': set 's1': pinned items require 10 tokens, but only 5 are available",
        "variant 'b': set 's2': pinned items require 12 tokens, but only 5 are available",
        "variant 'a': set 's3': overflow",
    ]
    # per variant (issue 26: "254 x variant 'chat'" used to count other variants' failures too)
    assert shared.top_reasons(msgs) == [(1, msgs[0]), (1, msgs[1]), (1, msgs[2])]
    assert shared.top_reasons([*msgs, msgs[0].replace("s1", "s9").replace("10", "11")])[0] == (2, msgs[0])


def test_set_column_named_like_an_output_column_is_refused_before_work(tmp_path, small, capsys):
    for extra in ([], ["--chunk-rows", "200"]):
        code, out, err = run(
            capsys, "sensitivity", small, "--preset", "chat", "--preset", "rag", "--max-tokens", "8000",
            "--target-tokens", "6000", "--set-column", "content", "--out", tmp_path / "o", *extra,
        )  # fmt: skip
        assert code == 2 and "ArrowInvalid" not in err and "set column 'content' has the name of a column" in err
    with pytest.raises(InvalidConfigError, match="set column 'content'"):
        sweep_parquet(
            small, c.ContextBudget(8000, 6000), [("a", c.preset("chat"))], tmp_path / "p", set_column="content"
        )


def test_import_file_level_problems_exit_2_whatever_skip_bad(tmp_path, capsys):
    for skip in ([], ["--skip-bad"]):
        code, out, err = run(capsys, "import", "openai", TR / "claude_code", "--out", tmp_path / "x.parquet", *skip)
        assert code == 2 and "could be read as 'openai'" in err and "--skip-bad" not in err
        code, out, err = run(
            capsys, "import", "messages", TR / "messages.csv", "--map", "content=nope", "--out", tmp_path / "y.parquet",
            *skip,
        )  # fmt: skip
        assert code == 2 and "content=nope" in err and "--skip-bad" not in err
    assert not (tmp_path / "x.parquet").exists() and not (tmp_path / "y.parquet").exists()
    # one bad line among good ones is still a line-level problem that --skip-bad skips
    src = tmp_path / "mixed.jsonl"
    good = (TR / "openai_chat.jsonl").read_text().splitlines()[0]
    src.write_text(good + "\n{not json\n")
    code, out, err = run(capsys, "import", "openai", src, "--out", tmp_path / "z.parquet")
    assert code == 2 and "--skip-bad" in err
    assert run(capsys, "import", "openai", src, "--out", tmp_path / "z.parquet", "--skip-bad")[0] == 0


def test_conformance_json_and_empty_dir(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    code, out, err = run(capsys, "conformance", tmp_path / "empty")
    assert code == 2 and "no .toml conformance vectors" in err
    vec = ROOT / "tests" / "vectors"
    code, out, err = run(capsys, "conformance", vec, "--json")
    got = json.loads(out)
    assert code == 0 and got["failed"] == 0 and got["passed"] == len(list(vec.rglob("*.toml")))


def test_report_top_must_not_be_negative(tmp_path, capsys):
    with pytest.raises(SystemExit):
        cli.main(["report", str(tmp_path), "--top", "-5"])
    assert "non-negative" in capsys.readouterr().err


def test_plurals(tmp_path, small, capsys):
    assert [shared.plural(n, "chunk") for n in (0, 1, 2, 1000)] == ["0 chunks", "1 chunk", "2 chunks", "1,000 chunks"]
    code, out, err = run(
        capsys, "sensitivity", small, "--preset", "chat", "--preset", "rag", "--max-tokens", "8000",
        "--target-tokens", "6000", "--set-column", "session_id", "--out", tmp_path / "o", "--chunk-rows", "100000",
    )  # fmt: skip
    assert code == 0 and "(streamed in 1 chunk of whole sets)" in out and "1 chunks" not in out


def test_run_json_timestamps_are_iso_8601(small, capsys):
    code, out, err = run(
        capsys, "run", small, "--preset", "chat", "--max-tokens", "8000", "--target-tokens", "6000",
        "--set-column", "session_id", "--set", "session-0001", "--json",
    )  # fmt: skip
    assert code == 0, err
    stamps = re.findall(r'"timestamp": "([^"]*)"', out)
    assert stamps and all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)", s) for s in stamps)


def test_required_options_are_required_and_every_option_has_help(capsys):
    with pytest.raises(SystemExit):
        cli.main(["run", "x.parquet", "--preset", "chat", "--target-tokens", "5"])
    assert "the following arguments are required: --max-tokens" in capsys.readouterr().err
    parser = build_parser()
    subs = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    for name, p in subs.choices.items():
        for a in p._actions:
            assert a.help, f"{name} {a.option_strings or a.dest} has no help text"
    assert "--threads" not in subs.choices["presets"].format_help()  # shown only where it does something


def test_sweep_result_repr(small):
    t = c.ItemTable.from_parquet(small, set_column="session_id")
    r = c.sweep(t, c.ContextBudget(8000, 6000), [("chat", c.preset("chat")), ("rag", c.preset("rag"))])
    assert repr(r) == f"SweepResult(items={t.n}, sets=10, variants=[chat, rag], swinging={r.n_swing})"
    assert r.n_swing > 0


def test_io_after_plain_import_without_loading_it_eagerly():
    code = (
        "import sys, cupel_np\n"
        "assert 'cupel_np.io' not in sys.modules\n"
        "assert cupel_np.io.write_sweep is not None\n"
        "try:\n    cupel_np.no_such_name\nexcept AttributeError:\n    pass\nelse:\n    raise SystemExit(1)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_first_run_says_it_is_compiling_on_a_terminal(monkeypatch, capsys):
    class Args:
        quiet = False

    monkeypatch.setattr(shared, "kernels_cached", lambda: False)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    shared._say_if_compiling(Args())
    assert "compiling kernels, first run only" in capsys.readouterr().err
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    shared._say_if_compiling(Args())
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    monkeypatch.setattr(shared, "kernels_cached", lambda: True)
    shared._say_if_compiling(Args())
    assert capsys.readouterr().err == ""


def test_smaller_messages_say_what_is_wrong(tmp_path, capsys):
    """A negative ladder start, the exclusive 2**62 bound, a boolean column compared with a
    string, and validate --json on a corrupt file (which printed nothing on stdout)."""
    from cupel_np import cli
    from cupel_np.errors import InvalidConfigError
    from cupel_np.model.fields import require_token_count
    from cupel_np.report.budget import parse_ladder
    from cupel_np.testing.checks import parse_where

    with pytest.raises(InvalidConfigError, match="LO is the smallest budget .* must be >= 0, got -5"):
        parse_ladder("-5:2000:3")
    with pytest.raises(
        InvalidConfigError, match=r"greater than -2\*\*62 and less than 2\*\*62, got 4611686018427387904"
    ):
        require_token_count("tokens", 2**62)
    with pytest.raises(InvalidConfigError, match=r"col\('pinned'\) is a boolean column: compare it with true or false"):
        parse_where({"pinned": "yes"}, "check[0]")
    bad = tmp_path / "corrupt.parquet"
    bad.write_bytes(b"PAR1 not really")
    assert cli.main(["validate", str(bad), "--json"]) == 2
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert doc["ok"] is False and "corrupt.parquet" in doc["error"] and "corrupt.parquet" in err
