"""Transcript import: the committed samples in every format, bad lines, mappings, token counters,
and the imported items running through `cupel-np sensitivity`."""

import json
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cupel_np import cli
from cupel_np.errors import CupelError, InvalidConfigError
from cupel_np.io import import_transcripts as reexported
from cupel_np.io.importers import (
    BadTranscriptError,
    EmptyImportError,
    estimate_tokens,
    import_transcripts,
    make_token_counter,
)
from cupel_np.model.items import ItemTable

ROOT = Path(__file__).resolve().parents[2]
TR = ROOT / "data" / "transcripts"
CSV_MAP = "content=text,kind=speaker,set=thread,timestamp=sent_at,source=channel"


def md(row):
    return dict(row["metadata"])


def test_reexported_from_io():
    assert reexported is import_transcripts


def test_openai_sample():
    res = import_transcripts("openai", TR / "openai_chat.jsonl")
    t = res.table.to_pylist()
    assert res.conversations == 4 and res.lines == 4 and not res.bad
    raw = [json.loads(l) for l in (TR / "openai_chat.jsonl").read_text().splitlines()]
    assert {r["conversation_id"] for r in t} == {c["id"] for c in raw}
    # every message with text is one item, every tool call one more
    n_text = sum(1 for c in raw for m in c["messages"] if m.get("content"))
    n_calls = sum(len(m.get("tool_calls", [])) for c in raw for m in c["messages"])
    assert len(t) == n_text + n_calls
    by_role = {}
    for r in t:
        by_role.setdefault((md(r)["role"], r["kind"]), []).append(r)
    sys_rows = by_role[("system", "SystemPrompt")] + by_role[("developer", "SystemPrompt")]
    assert all(r["pinned"] for r in sys_rows) and len(by_role[("developer", "SystemPrompt")]) == 2
    assert not any(r["pinned"] for r in t if r["kind"] != "SystemPrompt")
    calls = by_role[("assistant", "ToolCall")]
    assert len(calls) == n_calls and all(
        r["source"] == "Tool" and r["content"].startswith("run_shell({") for r in calls
    )
    outs = by_role[("tool", "ToolOutput")]
    assert all(r["source"] == "Tool" and md(r)["tool_call_id"].startswith("call_") for r in outs)
    # list-of-parts content is joined; timestamps parsed as UTC
    first_conv = raw[0]["messages"]
    a = next(m for m in first_conv if m["role"] == "assistant" and m["content"])
    row = next(r for r in t if r["content"] == a["content"][0]["text"])
    assert row["timestamp"] == datetime.fromisoformat(a["timestamp"]).astimezone(UTC)
    assert md(row)["message_id"] == a["id"] and md(row)["line"] == "1"
    assert all(r["tokens"] == estimate_tokens(r["content"]) for r in t)


def test_claude_code_sample_directory():
    res = import_transcripts("claude-code", TR / "claude_code")
    t = res.table.to_pylist()
    files = sorted((TR / "claude_code").glob("*.jsonl"))
    assert res.conversations == 3 and {r["conversation_id"] for r in t} == {f.stem for f in files}
    recs = [json.loads(l) for f in files for l in f.read_text().splitlines()]
    n_summary = sum(r["type"] == "summary" for r in recs)
    n_system = sum(r["type"] == "system" for r in recs)
    blocks = [
        b
        for r in recs
        if r["type"] in ("user", "assistant")
        for b in (r["message"]["content"] if isinstance(r["message"]["content"], list) else [{"type": "text"}])
    ]
    n_thinking = sum(b["type"] == "thinking" for b in blocks)
    assert res.skipped == {
        "claude-code record 'summary'": n_summary,
        "claude-code record 'system'": n_system,
        "claude-code block 'thinking'": n_thinking,
    }
    kinds = {}
    for r in t:
        kinds[r["kind"]] = kinds.get(r["kind"], 0) + 1
    assert kinds["ToolCall"] == sum(b["type"] == "tool_use" for b in blocks)
    assert kinds["ToolOutput"] == sum(b["type"] == "tool_result" for b in blocks)
    assert len(t) == len(blocks) - n_thinking
    use = next(r for r in t if r["kind"] == "ToolCall")
    result = next(r for r in t if r["kind"] == "ToolOutput" and md(r)["tool_call_id"] == md(use)["tool_call_id"])
    assert md(use)["tool_name"] in ("Read", "Bash", "Edit") and result["source"] == "Tool"
    assert all(r["timestamp"] is not None and md(r)["message_id"] for r in t)


def test_messages_csv_with_mapping_and_parquet(tmp_path):
    res = import_transcripts("messages", TR / "messages.csv", mapping=CSV_MAP)
    t = res.table.to_pylist()
    assert res.conversations == 4 and res.lines == len((TR / "messages.csv").read_text().splitlines()) - 1
    assert {r["kind"] for r in t} == {"SystemPrompt", "Message", "Document"}  # roles mapped, other kinds kept
    assert all(r["pinned"] == (r["kind"] == "SystemPrompt") for r in t)
    assert {r["source"] for r in t} == {"support", "chat", "email", "kb"}
    assert md(t[0])["line"] == "2"
    # the same rows as Parquet give the same items (rows numbered from 0)
    import csv

    with open(TR / "messages.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "m.parquet")
    res2 = import_transcripts("messages", tmp_path / "m.parquet", mapping=CSV_MAP)
    assert res2.table.drop(["metadata"]).equals(res.table.drop(["metadata"]))
    assert dict(res2.table["metadata"][0].as_py())["row"] == "0"


def test_messages_defaults_and_jsonl(tmp_path):
    p = tmp_path / "m.jsonl"
    p.write_text(
        "\n".join(
            json.dumps(x)
            for x in [
                {"role": "system", "content": "be brief", "conversation_id": "c1"},
                {"role": "user", "content": "hi", "conversation_id": "c1", "tokens": 7},
                {"role": "assistant", "content": "", "conversation_id": "c1"},
                {"content": "no role, no set", "conversation_id": "c2", "timestamp": 1764547200},
            ]
        )
        + "\n"
    )
    res = import_transcripts("messages", p)
    t = res.table.to_pylist()
    assert [r["kind"] for r in t] == ["SystemPrompt", "Message", "Message"]
    assert t[1]["tokens"] == 7 and res.skipped == {"empty content": 1}
    assert t[2]["timestamp"] == datetime(2025, 12, 1, tzinfo=UTC)
    with pytest.raises(InvalidConfigError, match="mapping target 'colour'"):
        import_transcripts("messages", p, mapping="colour=x")
    with pytest.raises(InvalidConfigError, match="expected TARGET=COLUMN"):
        import_transcripts("messages", p, mapping="content")
    with pytest.raises(InvalidConfigError, match="applies to the 'messages' format"):
        import_transcripts("openai", p, mapping="content=x")


def test_openai_empty_conversation_is_counted(tmp_path):
    p = tmp_path / "e.jsonl"
    p.write_text(
        json.dumps({"id": "x", "messages": []})
        + "\n"
        + json.dumps({"messages": [{"role": "user", "content": "hi"}]})
        + "\n"
    )
    res = import_transcripts("openai", p)
    assert res.skipped == {"conversation without messages": 1} and res.items == 1
    assert res.table["conversation_id"].to_pylist() == ["e:2"]  # no id: FILE-STEM:LINE


def _bad_openai(tmp_path):
    good = (TR / "openai_chat.jsonl").read_text().splitlines()
    p = tmp_path / "mixed.jsonl"
    p.write_text(
        "\n".join(
            [
                good[0],
                "{not json",
                good[1],
                json.dumps({"messages": [{"role": "wizard", "content": "x"}]}),
                json.dumps({"messages": [{"role": "user", "content": "t", "timestamp": "yesterday"}]}),
                good[2],
            ]
        )
        + "\n"
    )
    return p


def test_bad_lines_named_or_skipped_and_listed(tmp_path):
    p = _bad_openai(tmp_path)
    with pytest.raises(BadTranscriptError, match=rf"{p}:2: not valid JSON"):
        import_transcripts("openai", p)
    res = import_transcripts("openai", p, skip_bad=True)
    assert [(b.line, b.message.split(":")[0]) for b in res.bad] == [
        (2, "not valid JSON"),
        (4, "messages[0].role"),
        (5, "messages[0].timestamp"),
    ]
    assert "wizard" in res.bad[1].message and "'yesterday'" in res.bad[2].message
    assert res.conversations == 3 and res.lines == 6
    assert isinstance(BadTranscriptError("x"), CupelError)


def test_bad_csv_line_numbers_count_physical_lines(tmp_path):
    p = tmp_path / "m.csv"
    p.write_text('set,role,content,tokens\nA,user,"two\nlines",3\nA,user,ok,three\nA,martian_role_is_a_kind,fine,\n')
    with pytest.raises(BadTranscriptError, match=rf"{p}:4: column 'tokens': tokens must be an integer, got 'three'"):
        import_transcripts("messages", p)
    res = import_transcripts("messages", p, skip_bad=True)
    assert [b.line for b in res.bad] == [4]
    assert res.table["kind"].to_pylist() == ["Message", "martian_role_is_a_kind"]


def test_claude_code_bad_records(tmp_path):
    p = tmp_path / "s.jsonl"
    p.write_text(
        "\n".join(
            [
                json.dumps(
                    {
                        "type": "user",
                        "sessionId": "s",
                        "message": {"role": "user", "content": "hi"},
                        "timestamp": "2026-01-01T00:00:00Z",
                    }
                ),
                json.dumps({"type": "assistant", "message": {"content": "no session"}}),
                json.dumps({"type": "assistant", "sessionId": "s", "message": {"content": [{"type": "tool_use"}]}}),
                json.dumps({"type": "queue-operation"}),
            ]
        )
        + "\n"
    )
    with pytest.raises(EmptyImportError, match=r"skipped more than it kept: 1 item\(s\) kept, 2 skipped"):
        import_transcripts("claude-code", p, skip_bad=True)  # 2 bad lines, 1 item
    res = import_transcripts("claude-code", p, skip_bad=True, allow_empty=True)
    assert [(b.line, b.message) for b in res.bad] == [
        (2, "assistant record has no 'sessionId' (session log) or 'session_id' (stream-json)"),
        (3, "message.content[0]: tool_use block without a 'name'"),
    ]
    assert res.items == 1 and res.skipped == {"claude-code record 'queue-operation'": 1}


def count_words(s):  # a tokenizer named as module:function in the tests below
    return len(s.split())


def test_token_counters(tmp_path):
    assert estimate_tokens("") == 0
    assert estimate_tokens("hello world") == 3  # 1 + 1/6, twice, rounded up
    assert estimate_tokens("a\nb") == 3
    assert estimate_tokens("12345") == 2  # digit groups of up to 3
    assert estimate_tokens("日本語") == 3  # one per non-ASCII character
    assert make_token_counter("chars4")[0]("abcde") == 2
    fn, name = make_token_counter("test_import:count_words")
    assert fn("a b c") == 3 and name == "test_import:count_words"
    res = import_transcripts("openai", TR / "openai_chat.jsonl", tokenizer=count_words)
    assert res.table["tokens"].to_pylist() == [len(c.split()) for c in res.table["content"].to_pylist()]
    with pytest.raises(InvalidConfigError, match="token counter returned -1"):
        import_transcripts("openai", TR / "openai_chat.jsonl", tokenizer=lambda s: -1)
    with pytest.raises(InvalidConfigError, match="cannot import module 'no_such_mod_xyz'"):
        make_token_counter("no_such_mod_xyz:f")
    with pytest.raises(InvalidConfigError, match="has no 'nope'"):
        make_token_counter("json:nope")
    with pytest.raises(InvalidConfigError, match="expected 'estimate'"):
        make_token_counter("bogus")
    with pytest.raises(InvalidConfigError, match="tiktoken"):  # not installed, or its file not fetchable offline
        fn, _ = make_token_counter("tiktoken:no_such_encoding_xyz")


def test_cli_import_then_sensitivity(capsys, tmp_path):
    items = {}
    for fmt, inp, extra, target in [
        ("openai", TR / "openai_chat.jsonl", [], 900),
        ("claude-code", TR / "claude_code", [], 900),
        ("messages", TR / "messages.csv", ["--map", CSV_MAP], 250),
    ]:
        out = tmp_path / f"{fmt}.parquet"
        assert cli.main(["import", fmt, str(inp), "--out", str(out), *extra]) == 0
        msg = capsys.readouterr().out
        table = ItemTable.from_parquet(out, set_column="conversation_id")
        assert f"{table.n:,} items in {table.n_sets:,} conversation(s)" in msg
        items[fmt] = out
        code = cli.main(
            [
                "sensitivity",
                str(out),
                "--preset",
                "chat",
                "--preset",
                "rag",
                "--preset",
                "document_qa",
                "--max-tokens",
                str(target + 300),
                "--target-tokens",
                str(target),
                "--set-column",
                "conversation_id",
                "--out",
                str(tmp_path / f"out-{fmt}"),
                "--quiet",
                "--json",
            ]
        )
        summary = json.loads(capsys.readouterr().out)
        assert code == 0 and summary["items"] == table.n and summary["sets"] == table.n_sets
        assert summary["swinging"] > 0  # the budget is tight enough that the presets disagree
    assert "not context: 9 claude-code block 'thinking'" in cli_out(capsys, "claude-code", TR / "claude_code", tmp_path)


def cli_out(capsys, fmt, inp, tmp_path):
    assert cli.main(["import", fmt, str(inp), "--out", str(tmp_path / "again.parquet")]) == 0
    return capsys.readouterr().out


def test_cli_import_bad_lines(capsys, tmp_path):
    p = _bad_openai(tmp_path)
    assert cli.main(["import", "openai", str(p), "--out", str(tmp_path / "x.parquet")]) == 2
    err = capsys.readouterr().err
    assert f"{p}:2: not valid JSON" in err and not (tmp_path / "x.parquet").exists()
    assert cli.main(["import", "openai", str(p), "--out", str(tmp_path / "x.parquet"), "--skip-bad", "--json"]) == 0
    cap = capsys.readouterr()
    summary = json.loads(cap.out)
    assert len(summary["bad"]) == 3 and summary["items"] == pq.read_table(tmp_path / "x.parquet").num_rows
    assert [l for l in cap.err.splitlines() if l.startswith("cupel-np: skipped bad line:")] == [
        f"cupel-np: skipped bad line: {b}" for b in summary["bad"]
    ]
    assert cli.main(["import", "openai", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "y.parquet")]) == 2
    assert "transcript file not found" in capsys.readouterr().err
