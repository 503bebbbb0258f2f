"""`cupel-np import` on the command line: formats by name or detected, the tokens line and
--calibrate, --allow-empty."""

import json
from pathlib import Path

import pyarrow.parquet as pq

from cupel_np.cli import main

ROOT = Path(__file__).resolve().parents[2]
TR = ROOT / "data" / "transcripts"


def test_import_auto_prints_counter_and_api_comparison(tmp_path, capsys):
    out = tmp_path / "s.parquet"
    assert main(["import", "auto", str(TR / "stream_json.jsonl"), "--out", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("5 items in 2 conversation(s) from 6 line(s)")
    assert lines[1].startswith("tokens: estimate; estimate vs API: the estimate grew")
    assert lines[2].startswith("  q1: 2 request(s); at the last, API 920 tokens")
    t = pq.read_table(out)
    assert {"tool_call_id", "tool_role", "tool_group", "segment"} <= set(t.column_names)


def test_import_calibrate_json(tmp_path, capsys):
    out = tmp_path / "c.parquet"
    args = ["import", "claude-code", str(TR / "claude_code_resumed"), "--out", str(out), "--calibrate", "--json"]
    assert main(args) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["format"] == "claude-code" and summary["counter"] == "estimate"
    (chk,) = [c for c in summary["tokens_vs_api"] if c["set"] == "sess-1"]
    assert chk["calibrated"] is True and chk["requests"] == 2
    plain = tmp_path / "p.parquet"
    assert main(["import", "claude-code", str(TR / "claude_code_resumed"), "--out", str(plain)]) == 0
    capsys.readouterr()
    cal = pq.read_table(out).to_pylist()
    raw = pq.read_table(plain).to_pylist()
    got = [r["tokens"] for r in cal if r["conversation_id"] == "sess-1"]
    assert got == [max(1, int(r["tokens"] * chk["slope"] + 0.5)) for r in raw if r["conversation_id"] == "sess-1"]
    assert got != [r["tokens"] for r in raw if r["conversation_id"] == "sess-1"]


def test_import_of_nothing_exits_2_unless_allowed(tmp_path, capsys):
    p = tmp_path / "titles.jsonl"
    p.write_text(json.dumps({"type": "summary", "summary": "x", "leafUuid": "u"}) + "\n")
    out = tmp_path / "x.parquet"
    assert main(["import", "claude-code", str(p), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "0 items from 1 line(s)" in err and "claude-code record 'summary'" in err and "--allow-empty" in err
    assert f"the import of {p} yielded" in err  # names the input
    assert not out.exists()
    empty, blank = tmp_path / "empty.jsonl", tmp_path / "blank.jsonl"
    empty.write_text("")
    blank.write_text("\n\n")
    assert main(["import", "sharegpt", str(empty), str(blank), "--out", str(out)]) == 2
    assert f"the import of {empty} and 1 more yielded 0 items" in capsys.readouterr().err
    assert main(["import", "claude-code", str(p), "--out", str(out), "--allow-empty"]) == 0
    assert pq.read_table(out).num_rows == 0


def test_cli_formats_are_the_importers():
    from cupel_np.cli import parser
    from cupel_np.io.importers import FORMATS

    assert parser.IMPORT_FORMATS == list(FORMATS)


def test_item_readers_refuse_an_empty_table(tmp_path, capsys):
    p = tmp_path / "titles.jsonl"
    p.write_text(json.dumps({"type": "summary", "summary": "x", "leafUuid": "u"}) + "\n")
    empty = tmp_path / "empty.parquet"
    assert main(["import", "claude-code", str(p), "--out", str(empty), "--allow-empty"]) == 0
    capsys.readouterr()
    runs = {
        "sensitivity": ["--preset", "chat", "--preset", "rag", "--max-tokens", "100", "--target-tokens", "80"],
        "run": ["--preset", "chat", "--max-tokens", "100", "--target-tokens", "80"],
        "validate": [],
    }
    for cmd, extra in runs.items():
        out = ["--out", str(tmp_path / f"o-{cmd}")] if cmd == "sensitivity" else []
        assert main([cmd, str(empty), *extra, *out]) == 2, cmd
        err = capsys.readouterr().err
        assert "empty.parquet: no items (0 rows)" in err and "--allow-empty" in err, cmd
    out = ["--out", str(tmp_path / "o-allowed")]
    assert main(["sensitivity", str(empty), *runs["sensitivity"], *out, "--allow-empty", "--quiet", "--json"]) == 0
    capsys.readouterr()
    good = tmp_path / "good.parquet"
    assert main(["import", "auto", str(TR / "stream_json.jsonl"), "--out", str(good)]) == 0
    capsys.readouterr()
    assert main(["validate", str(good)]) == 0  # a table with rows is not refused


def test_a_large_broken_json_array_exits_2_naming_where_and_writes_nothing(tmp_path, capsys, monkeypatch):
    """Over ``jsonread.JSON_STREAM_BYTES`` (forced to 0) a ``.json`` array is streamed; a
    truncated one fails at the point it breaks, with or without --skip-bad, and leaves no file."""
    from cupel_np.io.importers import jsonread

    monkeypatch.setattr(jsonread, "JSON_STREAM_BYTES", 0)
    convs = [{"id": f"c{i}", "conversations": [{"from": "human", "value": f"hi {i}"}]} for i in range(3)]
    whole = tmp_path / "ok.json"
    whole.write_text(json.dumps(convs, indent=1))
    out = tmp_path / "x.parquet"
    assert main(["import", "auto", str(whole), "--out", str(out)]) == 0
    assert capsys.readouterr().out.startswith("3 items in 3 conversation(s) from 3 line(s)")
    out.unlink()
    cut = tmp_path / "cut.json"
    cut.write_text(whole.read_text()[:-20])
    for more in ([], ["--skip-bad"]):
        assert main(["import", "sharegpt", str(cut), "--out", str(out), *more]) == 2
        err = capsys.readouterr().err
        assert f"{cut}: not valid JSON: " in err and "in element 2 of the top-level array" in err
        assert not out.exists()
