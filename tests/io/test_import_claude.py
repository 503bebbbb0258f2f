"""Claude Code logs imported exactly: records by uuid across files, compaction segments,
sub-agents apart, tool calls linked to results (names, errors, groups), ``!cmd`` output,
the stream-json message stream, and token counts against the API's ``usage``."""

import json

import pytest

from cupel_np.io.importers import EmptyImportError, estimate_tokens, import_transcripts
from cupel_np.io.importers.claude_code import strip_ansi

S = "sess-1"


def rec(kind, uid, parent, content, *, ts, session=S, **extra):
    r = {
        "type": kind,
        "uuid": uid,
        "parentUuid": parent,
        "sessionId": session,
        "isSidechain": False,
        "timestamp": f"2026-11-20T10:{ts:02d}:00Z",
        "message": {"role": kind, "content": content},
    }
    for k in list(extra):
        if k in ("id", "usage", "model"):
            r["message"][k] = extra.pop(k)
    r.update(extra)
    return r


def session_records():
    """One session: a turn with two tool calls (one failing), a ``!ls``, a compaction, and a
    sub-agent run."""
    u1 = {"input_tokens": 100, "cache_creation_input_tokens": 20, "cache_read_input_tokens": 0}
    u2 = {"input_tokens": 5, "cache_creation_input_tokens": 10, "cache_read_input_tokens": 300}
    u3 = {"input_tokens": 40, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    return [
        {"type": "summary", "summary": "Fix it", "leafUuid": "u5"},
        rec("user", "u1", None, "Please fix the failing test in src/app.py", ts=1),
        rec("assistant", "a1", "u1", [{"type": "thinking", "thinking": "hm"}], ts=2, id="msg_1", usage=u1),
        rec("assistant", "a2", "a1", [{"type": "text", "text": "Let me look."}], ts=2, id="msg_1", usage=u1),
        rec(
            "assistant",
            "a3",
            "a2",
            [{"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "src/app.py"}}],
            ts=2,
            id="msg_1",
            usage=u1,
        ),
        rec(
            "assistant",
            "a4",
            "a3",
            [{"type": "tool_use", "id": "toolu_2", "name": "Bash", "input": {"command": "pytest -q"}}],
            ts=2,
            id="msg_1",
            usage=u1,
        ),
        rec(
            "user",
            "u2",
            "a4",
            [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "def f(): return 1"}],
            ts=3,
        ),
        rec(
            "user",
            "u3",
            "u2",
            [{"type": "tool_result", "tool_use_id": "toolu_2", "content": "1 failed", "is_error": True}],
            ts=3,
        ),
        rec("assistant", "a5", "u3", [{"type": "text", "text": "Fixed src/app.py."}], ts=4, id="msg_2", usage=u2),
        rec("user", "u4", "a5", "<bash-input>ls</bash-input>", ts=5),
        rec(
            "user",
            "u5",
            "u4",
            "<bash-stdout>\x1b[1;32mapp.py\x1b[0m  tests</bash-stdout><bash-stderr></bash-stderr>",
            ts=5,
        ),
        {
            "type": "system",
            "subtype": "compact_boundary",
            "uuid": "b1",
            "parentUuid": None,
            "logicalParentUuid": "u5",
            "sessionId": S,
            "timestamp": "2026-11-20T10:06:00Z",
            "content": "Conversation compacted",
            "compactMetadata": {"trigger": "manual", "preTokens": 9000},
        },
        rec(
            "user",
            "u6",
            "b1",
            "This session is being continued from a previous conversation. Summary: fixed app.py.",
            ts=6,
            isCompactSummary=True,
        ),
        rec(
            "assistant",
            "a6",
            "u6",
            [{"type": "text", "text": "Continuing from the summary."}],
            ts=7,
            id="msg_3",
            usage=u3,
        ),
        rec("user", "s1", None, "Find every caller of f", ts=8, isSidechain=True, agentId="ag1"),
        rec(
            "assistant",
            "s2",
            "s1",
            [{"type": "text", "text": "f is called in main.py"}],
            ts=8,
            isSidechain=True,
            agentId="ag1",
        ),
    ]


def write(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def rows(res):
    return res.table.to_pylist()


def md(r):
    return dict(r["metadata"])


def test_session_items_kinds_links_and_segments(tmp_path):
    p = write(tmp_path / "s.jsonl", session_records())
    res = import_transcripts("claude-code", p)
    t = rows(res)
    by_set = {}
    for r in t:
        by_set.setdefault(r["conversation_id"], []).append(r)
    assert list(by_set) == [S, f"{S}#1", f"{S}@ag1"]  # main segment 0, after the compaction, the sub-agent
    main = by_set[S]
    assert [r["kind"] for r in main] == [
        "Message",
        "Message",
        "ToolCall",
        "ToolCall",
        "ToolOutput",
        "ToolOutput",
        "Message",
        "ShellCommand",
        "ShellOutput",
    ]
    assert all(r["segment"] == 0 for r in main) and all(r["segment"] == 1 for r in by_set[f"{S}#1"])
    # the compaction summary opens segment 1 and never shares a set with what it replaced
    summary = by_set[f"{S}#1"][0]
    assert summary["content"].startswith("This session is being continued") and md(summary)["compact_summary"] == "true"
    assert [r["content"] for r in by_set[f"{S}@ag1"]] == ["Find every caller of f", "f is called in main.py"]
    # tool pairs: both calls of the turn and both results share one group; names on both sides
    calls, outs = main[2:4], main[4:6]
    assert [r["tool_role"] for r in main[2:6]] == ["call", "call", "result", "result"]
    assert [r["tool_call_id"] for r in main[2:6]] == ["toolu_1", "toolu_2", "toolu_1", "toolu_2"]
    assert {r["tool_group"] for r in main[2:6]} == {f"{S}:toolu_1"}
    assert [md(r)["tool_name"] for r in calls + outs] == ["Read", "Bash", "Read", "Bash"]
    assert [md(r)["is_error"] for r in outs] == ["false", "true"]
    assert all(
        r["tool_role"] is None and r["tool_group"] is None and r["tool_call_id"] is None for r in main[:2] + main[6:]
    )
    # !ls: the command and its output (escapes stripped) as their own kinds, source Shell
    assert main[7]["content"] == "ls" and main[7]["source"] == "Shell"
    assert main[8]["content"] == "app.py  tests" and main[8]["source"] == "Shell"
    # file as given and line; tokens by the estimate
    assert md(main[0])["file"] == str(p) and md(main[0])["line"] == "2" and md(main[8])["line"] == "11"
    assert all(r["tokens"] == estimate_tokens(r["content"]) for r in t)
    assert res.skipped["claude-code block 'thinking'"] == 1 and res.skipped["claude-code record 'summary'"] == 1


def test_strip_ansi():
    assert strip_ansi("\x1b[31mred\x1b[0m \x1b]0;title\x07x") == "red x"


def _split(records, spans):
    return [[records[i] for i in range(a, b)] for a, b in spans]


def test_session_in_three_overlapping_files_is_one_conversation(tmp_path):
    recs = session_records()
    one = import_transcripts("claude-code", write(tmp_path / "one.jsonl", recs))
    d = tmp_path / "parts"
    d.mkdir()
    for i, chunk in enumerate(_split(recs, [(0, 9), (5, 13), (10, len(recs))])):
        write(d / f"{2 - i}.jsonl", chunk)  # the later records in the earlier file, to be sure order is the chain's
    three = import_transcripts("claude-code", d)
    cols = [c for c in one.table.column_names if c != "metadata"]
    assert three.table.select(cols).equals(one.table.select(cols))
    dup = three.skipped["claude-code duplicate record (same uuid, first copy kept)"]
    assert dup == 4 + 3  # records 5..8 and 10..12 are in two files each
    assert three.items == one.items == 13


def test_disagreeing_copies_keep_the_first_and_are_counted(tmp_path):
    recs = session_records()
    changed = json.loads(json.dumps(recs[8]))
    changed["message"]["content"][0]["text"] = "A different text for the same uuid."
    write(tmp_path / "a.jsonl", recs)
    write(tmp_path / "b.jsonl", [changed])
    res = import_transcripts("claude-code", tmp_path)
    assert res.skipped["claude-code duplicate record whose content differs (first copy kept)"] == 1
    assert "Fixed src/app.py." in res.table["content"].to_pylist()
    assert "A different text for the same uuid." not in res.table["content"].to_pylist()


def test_resumed_session_joins_its_conversation(tmp_path):
    recs = session_records()[:11]
    later = [
        rec("user", "r1", "u5", "One more thing: add a test.", ts=20, session="sess-2"),
        rec("assistant", "r2", "r1", [{"type": "text", "text": "Added tests/test_app.py."}], ts=21, session="sess-2"),
    ]
    write(tmp_path / "sess-1.jsonl", recs)
    write(tmp_path / "sess-2.jsonl", recs[1:] + later)  # a resumed session copies the history
    res = import_transcripts("claude-code", tmp_path)
    assert res.table["conversation_id"].unique().to_pylist() == [S]
    assert res.table["content"].to_pylist()[-2:] == ["One more thing: add a test.", "Added tests/test_app.py."]
    assert res.items == 11


def test_usage_reported_and_calibrated(tmp_path):
    p = write(tmp_path / "s.jsonl", session_records())
    res = import_transcripts("claude-code", p)
    main = [r for r in rows(res) if r["conversation_id"] == S]
    est = [r["tokens"] for r in main]
    (chk,) = [c for c in res.tokens if c["set"] == S]
    # requests: msg_1 after the first item (120 tokens by the API), msg_2 after six (315)
    e1, e2 = est[0], sum(est[:6])
    assert chk["requests"] == 2 and chk["estimate"] == e2 and chk["api"] == 315
    slope = (315 - 120) / (e2 - e1)
    assert chk["slope"] == pytest.approx(slope) and chk["ratio"] == pytest.approx(1 / slope)
    assert chk["prefix"] == pytest.approx(120 - slope * e1)
    one_request = [c for c in res.tokens if c["set"] == f"{S}#1"][0]
    assert one_request["requests"] == 1 and one_request["ratio"] is None  # one point: no growth to compare
    assert res.token_ratio() == pytest.approx(1 / slope)
    cal = import_transcripts("claude-code", p, calibrate=True)
    cal_main = [r["tokens"] for r in rows(cal) if r["conversation_id"] == S]
    assert cal_main == [max(1, int(k * slope + 0.5)) for k in est]
    other = [r["tokens"] for r in rows(cal) if r["conversation_id"] != S]
    assert other == [r["tokens"] for r in rows(res) if r["conversation_id"] != S]  # nothing to calibrate by


def stream_records():
    return [
        {"type": "system", "subtype": "init", "session_id": "q1", "uuid": "i1", "tools": ["Bash"], "model": "m"},
        {
            "type": "assistant",
            "session_id": "q1",
            "uuid": "x1",
            "parent_tool_use_id": None,
            "message": {
                "id": "m1",
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Listing files."},
                    {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}},
                ],
                "usage": {"input_tokens": 900, "cache_read_input_tokens": 0},
            },
        },
        {
            "type": "assistant",
            "session_id": "q1",
            "uuid": "x2",
            "parent_tool_use_id": "t1",
            "message": {"id": "m2", "role": "assistant", "content": [{"type": "text", "text": "sub-agent work"}]},
        },
        {
            "type": "user",
            "session_id": "q1",
            "uuid": "x3",
            "parent_tool_use_id": None,
            "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a.txt"}]},
        },
        {
            "type": "assistant",
            "session_id": "q1",
            "uuid": "x4",
            "parent_tool_use_id": None,
            "message": {
                "id": "m3",
                "role": "assistant",
                "content": [{"type": "text", "text": "There is one file."}],
                "usage": {"input_tokens": 20, "cache_read_input_tokens": 900},
            },
        },
        {"type": "result", "subtype": "success", "is_error": False, "result": "There is one file.", "session_id": "q1"},
    ]


def test_stream_json_auto_detected(tmp_path):
    p = write(tmp_path / "run.jsonl", stream_records())
    res = import_transcripts("auto", p)
    assert res.format == "stream-json"
    t = rows(res)
    assert [(r["conversation_id"], r["kind"]) for r in t] == [
        ("q1", "Message"),
        ("q1", "ToolCall"),
        ("q1", "ToolOutput"),
        ("q1", "Message"),
        ("q1@t1", "Message"),
    ]
    assert t[1]["tool_group"] == t[2]["tool_group"] == "q1:t1" and md(t[2])["tool_name"] == "Bash"
    assert res.skipped["claude-code record 'result'"] == 1 and res.skipped["claude-code record 'system'"] == 1
    (chk,) = [c for c in res.tokens if c["set"] == "q1"]
    assert chk["requests"] == 2 and chk["api"] == 920
    assert import_transcripts("stream-json", p).table.equals(res.table)


@pytest.mark.parametrize("fmt", ["stream-json", "claude-code"])
def test_a_file_of_unreadable_records_names_the_format_asked_for(tmp_path, fmt):
    """Both formats share one reader; the error names the one the user chose."""
    from cupel_np.errors import BadTranscriptError

    p = write(tmp_path / "run.jsonl", [{"type": "user", "message": {"role": "user", "content": "hi"}}] * 2)
    with pytest.raises(BadTranscriptError, match=rf"none of its 2 line\(s\) could be read as '{fmt}'"):
        import_transcripts(fmt, p, skip_bad=True)


def test_document_blocks_with_text_are_documents(tmp_path):
    """A ``document`` block holding its text (a plain-text source, or content blocks) is a
    Document item; one the log holds no text of (a base64 PDF) is counted."""
    docs = [
        {"type": "document", "source": {"type": "text", "data": "spec text"}, "title": "spec.md"},
        {"type": "document", "source": {"type": "content", "content": [{"type": "text", "text": "part"}]}},
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBE"}},
        {"type": "text", "text": "summarise these"},
    ]
    res = import_transcripts("claude-code", write(tmp_path / "d.jsonl", [rec("user", "u1", None, docs, ts=1)]))
    t = rows(res)
    assert [(r["kind"], r["content"]) for r in t] == [
        ("Document", "spec text"),
        ("Document", "part"),
        ("Message", "summarise these"),
    ]
    assert md(t[0])["title"] == "spec.md" and "title" not in md(t[1])
    assert res.skipped == {"claude-code block 'document' (no text in the log)": 1}


def test_an_empty_tool_result_keeps_its_pair(tmp_path):
    """A tool_result with no text (a command that printed nothing) is an item, ``[no text]``:
    dropping it would leave its call without a result, a context no API takes."""
    call = [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "true"}}]
    result = [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "", "is_error": False}]
    recs = [rec("user", "u1", None, "run it", ts=1), rec("assistant", "a1", "u1", call, ts=2, id="m1")]
    recs.append(rec("user", "u2", "a1", result, ts=3))
    res = import_transcripts("claude-code", write(tmp_path / "e.jsonl", recs))
    t = rows(res)
    assert [(r["kind"], r["content"], r["tool_role"]) for r in t] == [
        ("Message", "run it", None),
        ("ToolCall", 'Bash({"command": "true"})', "call"),
        ("ToolOutput", "[no text]", "result"),
    ]
    assert (
        t[1]["tool_group"] == t[2]["tool_group"] and md(t[2])["no_text"] == "true" and md(t[2])["tool_name"] == "Bash"
    )
    assert "empty content" not in res.skipped


def test_nothing_to_import_is_an_error(tmp_path):
    p = write(tmp_path / "meta.jsonl", [{"type": "summary", "summary": "x", "leafUuid": "u"}])
    with pytest.raises(EmptyImportError, match=r"0 items from 1 line"):
        import_transcripts("claude-code", p)
    assert import_transcripts("claude-code", p, allow_empty=True).items == 0


def test_chunked_table_build_is_the_same(tmp_path, monkeypatch):
    from cupel_np.io.importers import core

    p = write(tmp_path / "s.jsonl", session_records())
    whole = import_transcripts("claude-code", p, calibrate=True)
    monkeypatch.setattr(core, "CHUNK_CHARS", 10)  # one conversation a chunk
    chunked = import_transcripts("claude-code", p, calibrate=True)
    assert chunked.table.equals(whole.table) and chunked.tokens == whole.tokens
