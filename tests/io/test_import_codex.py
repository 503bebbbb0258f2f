"""Codex CLI session logs: items from the response items in file order, events and context
records counted, compaction segments (replacement history, or the summary), undone turns,
forks and copies, both log eras, and the API's counts without the repeated events."""

import json

import pytest

from cupel_np.io.importers import BadTranscriptError, import_transcripts
from cupel_np.io.importers.detect import detect

SID = "0199aaaa-1111-7222-8333-444455556666"


def line(kind, payload, sec=0):
    return {"timestamp": f"2026-11-20T10:00:{sec:02d}.000Z", "type": kind, "payload": payload}


def item(payload, sec=0):
    return line("response_item", payload, sec)


def msg(role, text, sec=0):
    part = "output_text" if role == "assistant" else "input_text"
    return item({"type": "message", "role": role, "content": [{"type": part, "text": text}]}, sec)


def usage(total_in, total, last_in, sec=0, **extra):
    last = {"input_tokens": last_in, "cached_input_tokens": 0, "output_tokens": 5, "total_tokens": last_in + 5}
    info = {
        "total_token_usage": {
            "input_tokens": total_in,
            "cached_input_tokens": 0,
            "output_tokens": 5,
            "total_tokens": total,
        },
        "last_token_usage": last,
        "model_context_window": 272000,
    }
    return line("event_msg", {"type": "token_count", "info": info, **extra}, sec)


def meta(sid=SID, **extra):
    return line("session_meta", {"id": sid, "timestamp": "2026-11-20T10:00:00Z", "cwd": "/app", **extra})


def session():
    return [
        meta(base_instructions={"text": "You are Codex."}),
        item({"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "<permissions>"}]}),
        msg("user", "<environment_context>\n<cwd>/app</cwd>\n</environment_context>"),
        msg("user", "Why does the test fail?", 1),
        line("event_msg", {"type": "user_message", "message": "Why does the test fail?"}, 1),
        line("turn_context", {"cwd": "/app", "model": "gpt"}, 1),
        line("event_msg", {"type": "token_count", "info": None, "rate_limits": {}}, 2),
        item({"type": "reasoning", "summary": [], "content": None, "encrypted_content": "gAAA"}, 3),
        item({"type": "function_call", "name": "shell", "arguments": '{"command":["pytest"]}', "call_id": "c1"}, 3),
        item({"type": "function_call", "name": "shell", "arguments": '{"command":["ls"]}', "call_id": "c2"}, 3),
        usage(4000, 4010, 4000, 3),
        usage(4000, 4010, 4000, 3, rate_limits={}),  # the same usage again (rate limits): one request
        item({"type": "function_call_output", "call_id": "c1", "output": "FAILED test_sum"}, 5),
        item(
            {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "app.py"}]}, 5
        ),
        msg("assistant", "add() is off by one.", 7),
        usage(8100, 8120, 4100, 7),
        line("compacted", {"message": "", "replacement_history": [msg("user", "Why?")["payload"]]}, 9),
        line("event_msg", {"type": "context_compacted"}, 9),
        usage(8100, 8125, 0, 9),  # recomputed after the compaction: no request
        msg("user", "Fix it.", 10),
        item({"type": "custom_tool_call", "call_id": "c3", "name": "apply_patch", "input": "*** Begin Patch"}, 11),
        item({"type": "custom_tool_call_output", "call_id": "c3", "output": "Success."}, 12),
        msg("assistant", "Fixed.", 13),
        usage(9100, 9130, 1000, 13),
    ]


def write(path, records):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def rows(res):
    return [dict(r, metadata=dict(r["metadata"])) for r in res.table.to_pylist()]


def test_session_items_segments_and_counts(tmp_path):
    p = write(tmp_path / "2026/11/20" / f"rollout-2026-11-20T10-00-00-{SID}.jsonl", session())
    assert detect(p) == "codex"
    res = import_transcripts("auto", tmp_path)
    t = rows(res)
    assert [(r["conversation_id"], r["segment"], r["kind"], r["content"]) for r in t] == [
        (SID, 0, "SystemPrompt", "You are Codex."),
        (SID, 0, "SystemPrompt", "<permissions>"),
        (SID, 0, "Message", "<environment_context>\n<cwd>/app</cwd>\n</environment_context>"),
        (SID, 0, "Message", "Why does the test fail?"),
        (SID, 0, "ToolCall", 'shell({"command":["pytest"]})'),
        (SID, 0, "ToolCall", 'shell({"command":["ls"]})'),
        (SID, 0, "ToolOutput", "FAILED test_sum"),
        (SID, 0, "ToolOutput", "app.py"),
        (SID, 0, "Message", "add() is off by one."),
        (f"{SID}#1", 1, "Message", "Why?"),
        (f"{SID}#1", 1, "Message", "Fix it."),
        (f"{SID}#1", 1, "ToolCall", "apply_patch(*** Begin Patch)"),
        (f"{SID}#1", 1, "ToolOutput", "Success."),
        (f"{SID}#1", 1, "Message", "Fixed."),
    ]
    assert [r["pinned"] for r in t[:4]] == [True, True, False, False]
    assert t[2]["metadata"]["is_meta"] == "true" and "is_meta" not in t[3]["metadata"]
    assert t[9]["metadata"]["compacted"] == "true"
    assert {r["tool_group"] for r in t[4:8]} == {f"{SID}:c1"} and t[8]["tool_group"] is None
    assert t[12]["tool_group"] == f"{SID}#1:c3" and t[12]["metadata"]["tool_name"] == "apply_patch"
    assert t[3]["timestamp"].isoformat() == "2026-11-20T10:00:01+00:00"
    assert res.skipped == {
        "codex event 'user_message'": 1,
        "codex event 'token_count'": 6,
        "codex event 'context_compacted'": 1,
        "codex record 'turn_context'": 1,
        "codex item 'reasoning'": 1,
    }
    # one request per moved total: before the first response's calls (4 items in context),
    # then before its reply; after the compaction, before the last reply
    checks = {c["set"]: c for c in res.tokens}
    assert checks[SID]["requests"] == 2 and checks[SID]["api"] == 4100
    assert checks[SID]["estimate"] == sum(r["tokens"] for r in t[:8])
    assert checks[f"{SID}#1"]["requests"] == 1 and checks[f"{SID}#1"]["api"] == 1000


def test_a_compaction_without_history_is_rebuilt_as_codex_did(tmp_path):
    """A 2025 compaction (a summary, no replacement history): the new segment holds the
    session's first context, the messages the user typed (those carried over too; not Codex's
    own, not an earlier summary; the one over the budget cut in its middle) and the summary
    (none when empty). A compaction whose history holds an unreadable item opens its segment
    with the others, and the line is reported."""
    big = "x" * 80_006 + "TAIL"
    recs = [
        meta(base_instructions={"text": "You are Codex."}),
        msg("user", "<environment_context>/app</environment_context>"),
        msg("user", "a"),
        msg("assistant", "b"),
        line("compacted", {"message": "Summary one."}),
        msg("user", "c"),
        line("compacted", {"replacement_history": [msg("user", "kept")["payload"], "not an item"]}),
        line("compacted", {"message": "Summary two."}),
        msg("user", big),
        line("compacted", {"message": ""}),
        msg("user", "d"),
    ]
    res = import_transcripts("codex", write(tmp_path / "s.jsonl", recs), skip_bad=True)
    t = rows(res)
    got = [(r["segment"], r["content"] if len(r["content"]) < 100 else "BIG") for r in t]
    assert got == [
        (0, "You are Codex."),
        (0, "<environment_context>/app</environment_context>"),
        (0, "a"),
        (0, "b"),
        (1, "You are Codex."),
        (1, "<environment_context>/app</environment_context>"),
        (1, "a"),
        (1, "Summary one."),
        (1, "c"),
        (2, "kept"),
        (3, "You are Codex."),
        (3, "<environment_context>/app</environment_context>"),
        (3, "kept"),
        (3, "Summary two."),
        (3, "BIG"),
        (4, "You are Codex."),
        (4, "<environment_context>/app</environment_context>"),
        (4, "BIG"),  # over the budget: cut in its middle, the oldest kept ("kept" is not)
        (4, "d"),
    ]
    assert [b.line for b in res.bad] == [7]
    assert [r["metadata"].get("compacted") for r in t[4:8]] == ["true", "true", "true", None]
    assert t[7]["metadata"]["compact_summary"] == "true" and t[4]["pinned"] and t[5]["metadata"]["is_meta"] == "true"
    assert t[14]["content"] == big and t[17]["metadata"]["truncated"] == "true"
    cut = t[17]["content"]
    assert len(cut) < len(big) and cut.startswith("xxx") and cut.endswith("TAIL") and "\n…\n" in cut
    assert {r["conversation_id"] for r in t[9:10]} == {f"{SID}#2"} and res.skipped["empty content"] == 1


def test_undone_turns_are_removed(tmp_path):
    recs = [
        meta(),
        msg("user", "first"),
        msg("assistant", "one"),
        msg("user", "second"),
        msg("assistant", "two"),
        line("event_msg", {"type": "thread_rolled_back", "num_turns": 1}),
        msg("user", "second, again"),
    ]
    res = import_transcripts("codex", write(tmp_path / "s.jsonl", recs))
    assert [r["content"] for r in rows(res)] == ["first", "one", "second, again"]
    assert res.skipped["codex item undone (thread_rolled_back)"] == 2


def test_the_oldest_logs_and_copies_and_forks(tmp_path):
    old = [
        {"id": "old-1", "timestamp": "2025-08-01T10:00:00Z", "instructions": None},
        {"record_type": "state"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hello"}]},
    ]
    p = write(tmp_path / "a" / "rollout-2025-08-01T10-00-00-old.jsonl", old)
    assert detect(p) == "codex"
    write(tmp_path / "b" / "copy.jsonl", old)  # the same session again (archived): read once
    fork = [meta("fork-1", forked_from_id="old-1"), meta("old-1"), msg("user", "hi"), msg("user", "and then?")]
    write(tmp_path / "c" / "fork.jsonl", fork)
    res = import_transcripts("codex", tmp_path)
    t = rows(res)
    assert [(r["conversation_id"], r["content"]) for r in t] == [
        ("old-1", "hi"),
        ("old-1", "hello"),
        ("fork-1", "hi"),  # the parent's copied records are the fork's context too
        ("fork-1", "and then?"),
    ]
    assert res.skipped["codex session already read (a copy of its file)"] == 1
    assert res.skipped["codex record 'session_meta' (a fork's copied history)"] == 1
    assert res.skipped["codex record 'state'"] == 1


def record(rid, n):
    return {"type": "token_usage_record", "payload": {"response_id": rid, "usage": {"input_tokens": n}}}


def test_usage_records_are_the_counts_where_logged(tmp_path):
    """One count a response (a repeated record once), where the response began; the counts of
    an undone turn's requests go with it."""
    recs = [meta(), msg("user", "q"), usage(600, 610, 600), msg("assistant", "a"), record("r1", 700), record("r1", 700)]
    recs += [msg("user", "long " * 50), msg("assistant", "b"), record("r2", 900)]
    recs += [
        line("event_msg", {"type": "thread_rolled_back", "num_turns": 1}),
        msg("user", "again"),
        msg("assistant", "c"),
    ]
    recs += [record("r3", 750)]
    res = import_transcripts("codex", write(tmp_path / "s.jsonl", recs))
    t = rows(res)
    assert [r["content"] for r in t] == ["q", "a", "again", "c"]
    ((chk),) = res.tokens
    assert chk["requests"] == 2 and chk["api"] == 750  # r1 before "a", r3 before "c"; r2 undone
    assert chk["estimate"] == sum(r["tokens"] for r in t[:3])
    assert (
        res.skipped["codex item undone (thread_rolled_back)"] == 2
        and "codex record 'token_usage_record'" in res.skipped
    )


def test_an_interrupted_call_gets_the_output_codex_sent(tmp_path):
    """A call left without an output (the turn interrupted) is answered ``aborted`` in every
    later request (Codex's own rule): the item follows the call, the counts after it move; a
    call the session ends on (no later request) stays unanswered."""
    call = {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c1"}
    recs = [meta(), msg("user", "run"), item(call, 1), usage(100, 105, 100, 1)]
    recs += [msg("user", "stop, do this instead", 2), msg("assistant", "ok", 3), usage(300, 310, 200, 3)]
    recs += [item({**call, "call_id": "c2"}, 4)]
    t = rows(res := import_transcripts("codex", write(tmp_path / "s.jsonl", recs)))
    assert [(r["kind"], r["content"], r["tool_call_id"]) for r in t] == [
        ("Message", "run", None),
        ("ToolCall", "shell({})", "c1"),
        ("ToolOutput", "aborted", "c1"),
        ("Message", "stop, do this instead", None),
        ("Message", "ok", None),
        ("ToolCall", "shell({})", "c2"),
    ]
    assert t[2]["metadata"]["synthesized"] == "aborted" and t[2]["tool_group"] == t[1]["tool_group"]
    assert t[2]["metadata"]["tool_name"] == "shell" and t[5]["tool_group"] == f"{SID}:c2"
    ((chk),) = res.tokens
    assert chk["requests"] == 2 and chk["estimate"] == sum(r["tokens"] for r in t[:4])  # "ok" was the reply


def test_a_session_ending_mid_response_adds_no_output(tmp_path):
    """Two calls of one response, one answered, and the session ends: no later request was
    made, so the other call stays unanswered (an output beside it is no request)."""
    call = {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c1"}
    recs = [meta(), msg("user", "go"), item(call), item({**call, "call_id": "c2"})]
    recs.append(item({"type": "function_call_output", "call_id": "c1", "output": "ok"}))
    t = rows(import_transcripts("codex", write(tmp_path / "s.jsonl", recs)))
    assert [(r["content"], r["tool_call_id"]) for r in t] == [
        ("go", None),
        ("shell({})", "c1"),
        ("shell({})", "c2"),
        ("ok", "c1"),
    ]


def test_records_without_what_they_need_are_named(tmp_path):
    recs = [meta(), msg("user", "q"), {"type": "response_item"}, line("event_msg", {"no": "type"})]
    res = import_transcripts("codex", write(tmp_path / "s.jsonl", recs), skip_bad=True)
    assert [(b.line, b.message) for b in res.bad] == [(3, "a 'response_item' record without a payload")]
    assert res.skipped == {"codex event (no type)": 1}


def test_a_bad_line_is_named(tmp_path):
    p = write(tmp_path / "s.jsonl", [meta(), msg("user", "q"), line("response_item", "not an object")])
    with pytest.raises(BadTranscriptError, match=r"s\.jsonl:3: payload: expected an object, got str"):
        import_transcripts("codex", p)
    res = import_transcripts("codex", p, skip_bad=True)
    assert res.items == 1 and [b.line for b in res.bad] == [3]
