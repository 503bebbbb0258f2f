"""Shapes seen in real public recordings (Claude Code session logs, stream-json, OTLP files)
that the earlier fixtures did not have. Each fixture here is written for this repository and
reproduces one shape; the recordings themselves are not committed."""

import base64
import json
import struct

import pytest

from cupel_np.errors import BadTranscriptError
from cupel_np.io.importers import claude_code, estimate_tokens, import_transcripts
from cupel_np.io.importers.claude_code import image_tokens

SESSION = "5f0c2a9e-8d41-4b7a-9c3e-1a2b3c4d5e6f"
REWOUND = "claude-code record on a rewound branch (not in the live context)"


def _uid(n: int) -> str:
    return f"00000000-0000-4000-8000-{n:012d}"


def _rec(n, parent, rtype, sec, content, **extra):
    r = {
        "parentUuid": None if parent is None else _uid(parent),
        "isSidechain": False,
        "userType": "external",
        "cwd": "/work/app",
        "sessionId": SESSION,
        "version": "2.1.14",
        "type": rtype,
        "uuid": _uid(n),
        "timestamp": f"2026-01-21T06:19:{sec:06.3f}Z",
    }
    if rtype == "assistant":
        msg_id, usage = extra.pop("msg"), extra.pop("usage", {"input_tokens": 3, "cache_read_input_tokens": 15000})
        r["message"] = {
            "id": msg_id,
            "type": "message",
            "role": "assistant",
            "model": "claude-opus-4-5",
            "content": content,
        }
        r["message"]["usage"] = usage
    else:
        r["message"] = {"role": "user", "content": content}
    r.update(extra)
    return r


def _use(tid, name, **inp):
    return [{"type": "tool_use", "id": tid, "name": name, "input": inp}]


def _result(tid, text, **kw):
    return [{"tool_use_id": tid, "type": "tool_result", "content": text, **kw}]


def _write(path, recs):
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


def _parallel_reads(results_in_call_order=True):
    """One API response with two ``Read`` calls (two records, the second chained to the first),
    each result a child of the record holding its call, as Claude Code 2.0-2.1 writes them;
    the chain goes on from the result written last."""
    recs = [
        {
            "type": "queue-operation",
            "operation": "dequeue",
            "timestamp": "2026-01-21T06:19:38.048Z",
            "sessionId": SESSION,
        },
        _rec(1, None, "user", 38, "Add multiply_numbers and a test."),
        _rec(2, 1, "assistant", 40, [{"type": "text", "text": "Let me read both files."}], msg="msg_A"),
        _rec(3, 2, "assistant", 41, _use("toolu_r1", "Read", file_path="src/m.py"), msg="msg_A"),
        _rec(4, 3, "assistant", 42, _use("toolu_r2", "Read", file_path="tests/t.py"), msg="msg_A"),
    ]
    r1 = _rec(5, 3, "user", 43, _result("toolu_r1", "def add(a, b): ..."), sourceToolAssistantUUID=_uid(3))
    r2 = _rec(6, 4, "user", 43, _result("toolu_r2", "def test_add(): ..."), sourceToolAssistantUUID=_uid(4))
    last = 6 if results_in_call_order else 5
    recs += [r1, r2] if results_in_call_order else [r2, r1]
    recs += [
        _rec(7, last, "assistant", 45, [{"type": "text", "text": "Adding the function."}], msg="msg_B"),
        _rec(8, 7, "user", 50, "Thanks."),
    ]
    return recs


@pytest.mark.parametrize("in_order", [True, False])
def test_parallel_tool_results_are_context_not_a_rewind(tmp_path, monkeypatch, in_order):
    """The branch a parallel call's result hangs on was sent with the next request: it is kept
    (the earlier reader took it for a rewound branch and dropped the first result), and the
    results follow all the calls of their response."""
    path = _write(tmp_path / f"{SESSION}.jsonl", _parallel_reads(in_order))
    res = import_transcripts("claude-code", path)
    t = res.table.to_pylist()
    assert REWOUND not in res.skipped
    assert [(r["kind"], r["tool_call_id"]) for r in t] == [
        ("Message", None),
        ("Message", None),
        ("ToolCall", "toolu_r1"),
        ("ToolCall", "toolu_r2"),
        ("ToolOutput", "toolu_r1" if in_order else "toolu_r2"),
        ("ToolOutput", "toolu_r2" if in_order else "toolu_r1"),
        ("Message", None),
        ("Message", None),
    ]
    outs = {r["tool_call_id"]: dict(r["metadata"]) for r in t if r["kind"] == "ToolOutput"}
    assert {k: v["tool_name"] for k, v in outs.items()} == {"toolu_r1": "Read", "toolu_r2": "Read"}
    assert {r["tool_group"] for r in t if r["tool_role"]} == {f"{SESSION}:toolu_r1"}
    # the two-pass reader places them alike
    monkeypatch.setattr(claude_code, "TWO_PASS_BYTES", 0)
    assert import_transcripts("claude-code", path).table.equals(res.table)


def test_a_branch_that_went_on_from_a_tool_result_is_still_a_rewind(tmp_path):
    """A fork whose other branch holds more than the call's results (here a later reply) is a
    rewind as before: only the branch with the newest leaf is the live context."""
    recs = _parallel_reads()[1:]
    recs.insert(5, _rec(9, 5, "assistant", 44, [{"type": "text", "text": "Abandoned reply."}], msg="msg_X"))
    res = import_transcripts("claude-code", _write(tmp_path / "s.jsonl", recs))
    texts = [r["content"] for r in res.table.to_pylist()]
    assert "Abandoned reply." not in texts and "def add(a, b): ..." not in texts
    assert res.skipped[REWOUND] == 2


def _span(trace, span, start, attrs):
    def val(v):
        return {"intValue": str(v)} if isinstance(v, int) else {"stringValue": v}

    return {
        "traceId": trace,
        "spanId": span,
        "name": "chat gpt-4o",
        "kind": 3,
        "startTimeUnixNano": str(start),
        "attributes": [{"key": k, "value": val(v)} for k, v in attrs.items()],
    }


def _otlp(path, spans):
    doc = {
        "resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"scope": {"name": "x"}, "spans": spans}]}]
    }
    path.write_text(json.dumps(doc) + "\n")
    return path


_T = "0af7651916cd43dd8448eb211c80319c"


def test_otel_openai_shaped_messages_in_genai_attributes(tmp_path):
    """Some instrumentations (Laminar, OpenLLMetry's JSON form) put OpenAI-shaped messages
    (``content``, ``tool_calls``, ``tool_call_id``) in ``gen_ai.input.messages``; the earlier
    reader looked only for ``parts`` and dropped them without a count."""
    first = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Weather in Paris?"}]
    call = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
    second = first + [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": "18C, cloudy"}]},
    ]
    spans = [
        _span(_T, "a" * 16, 1, {"gen_ai.input.messages": json.dumps(first), "gen_ai.usage.input_tokens": 40}),
        _span(_T, "b" * 16, 2, {"gen_ai.input.messages": json.dumps(second), "gen_ai.usage.input_tokens": 75}),
    ]
    res = import_transcripts("otel", _otlp(tmp_path / "laminar.json", spans))
    t = res.table.to_pylist()
    assert [(r["kind"], r["content"]) for r in t] == [
        ("SystemPrompt", "You are terse."),
        ("Message", "Weather in Paris?"),
        ("ToolCall", 'get_weather({"city": "Paris"})'),
        ("ToolOutput", "18C, cloudy"),
    ]
    assert t[2]["tool_call_id"] == t[3]["tool_call_id"] == "call_1"
    assert dict(t[3]["metadata"])["tool_name"] == "get_weather"
    (chk,) = res.tokens
    assert chk["requests"] == 2 and chk["api"] == 75


def test_otel_openllmetry_indexed_attributes(tmp_path):
    """OpenLLMetry (Traceloop) writes ``gen_ai.prompt.N.role`` / ``.content`` and
    ``gen_ai.completion.N...`` with ``gen_ai.usage.prompt_tokens``; the earlier reader found no
    messages in such spans (every span skipped, the import empty)."""
    a1 = {
        "gen_ai.system": "openai",
        "gen_ai.prompt.0.role": "system",
        "gen_ai.prompt.0.content": "Extract fields",
        "gen_ai.prompt.1.role": "user",
        "gen_ai.prompt.1.content": "from invoice INV-1234",
        "gen_ai.completion.0.role": "assistant",
        "gen_ai.completion.0.tool_calls.0.id": "call_9",
        "gen_ai.completion.0.tool_calls.0.name": "lookup",
        "gen_ai.completion.0.tool_calls.0.arguments": '{"id": "INV-1234"}',
        "gen_ai.usage.prompt_tokens": 1200,
    }
    res = import_transcripts("otel", _otlp(tmp_path / "traceloop.json", [_span(_T, "c" * 16, 5, a1)]))
    t = res.table.to_pylist()
    assert [(r["kind"], r["content"]) for r in t] == [
        ("SystemPrompt", "Extract fields"),
        ("Message", "from invoice INV-1234"),
        ("ToolCall", 'lookup({"id": "INV-1234"})'),
    ]
    assert t[2]["tool_call_id"] == "call_9"
    assert res.tokens[0]["api"] == 1200


def test_a_boundary_whose_logical_parent_follows_it_still_opens_a_segment(tmp_path):
    """A compaction that keeps a preserved segment can name, as the boundary's
    ``logicalParentUuid``, a record written after the summary under its old id (a shape
    claude-code-log keeps a fixture of): the chain is then a cycle. It is cut at the boundary,
    so the summary and what follows it are still their own set."""

    def rec(u, p, t, minute, text, **kw):
        r = {"type": t, "uuid": u, "parentUuid": p, "sessionId": "s2", "timestamp": f"2025-07-01T10:{minute:02d}:00Z"}
        if t == "user":
            r["message"] = {"role": "user", "content": text}
        else:
            r["message"] = {"role": t, "id": f"msg_{u}", "content": [{"type": "text", "text": text}]}
        r.update(kw)
        return r

    boundary = {
        "type": "system",
        "subtype": "compact_boundary",
        "uuid": "cb",
        "parentUuid": None,
        "logicalParentUuid": "kept",
        "sessionId": "s2",
        "timestamp": "2025-07-01T10:30:00Z",
        "compactMetadata": {
            "trigger": "auto",
            "preservedSegment": {"headUuid": "kept", "anchorUuid": "cs", "tailUuid": "kept"},
        },
    }
    recs = [
        rec("u1", None, "user", 0, "Start"),
        rec("a1", "u1", "assistant", 1, "Ready"),
        rec("u2", "a1", "user", 20, "Keep going"),
        boundary,
        rec("cs", "cb", "user", 30, "This session is being continued. Summary: a plan.", isCompactSummary=True),
        rec("kept", "cs", "assistant", 21, "Kept going"),  # preserved: its old time
        rec("u3", "kept", "user", 40, "After compaction"),
    ]
    res = import_transcripts("claude-code", _write(tmp_path / "s2.jsonl", recs))
    got = [(r["conversation_id"], r["segment"], r["content"][:12]) for r in res.table.to_pylist()]
    assert got == [
        ("s2", 0, "Start"),
        ("s2", 0, "Ready"),
        ("s2", 0, "Keep going"),
        ("s2#1", 1, "This session"),
        ("s2#1", 1, "Kept going"),
        ("s2#1", 1, "After compac"),
    ]


def _att(n, parent, sec, payload):
    return {
        "parentUuid": None if parent is None else _uid(parent),
        "isSidechain": False,
        "attachment": payload,
        "type": "attachment",
        "uuid": _uid(n),
        "timestamp": f"2026-05-03T10:57:{sec:06.3f}Z",
        "sessionId": SESSION,
        "version": "2.1.126",
    }


def _attachments_session():
    """Claude Code 2.1.10x-2.1.12x writes what it adds to the model's context beside the user's
    prompt (skills, MCP instructions, deferred tool names, hook context, files re-read after a
    compaction, queued prompts) as ``attachment`` records in the chain; some carry nothing the
    model sees."""
    u = _rec(1, None, "user", 29, "Build the vault program.")
    u["timestamp"] = "2026-05-03T10:57:29.100Z"
    a1 = _rec(9, 8, "assistant", 33, [{"type": "text", "text": "Reading the IDL first."}], msg="msg_1")
    a1["timestamp"] = "2026-05-03T10:57:33.000Z"
    a1["message"]["usage"] = {"input_tokens": 4, "cache_creation_input_tokens": 900, "cache_read_input_tokens": 0}
    a2 = _rec(12, 11, "assistant", 40, [{"type": "text", "text": "Done."}], msg="msg_2")
    a2["timestamp"] = "2026-05-03T10:57:40.000Z"
    a2["message"]["usage"] = {"input_tokens": 4, "cache_creation_input_tokens": 60, "cache_read_input_tokens": 904}
    return [
        _att(
            0,
            None,
            17,
            {
                "type": "hook_success",
                "hookEvent": "SessionStart",
                "hookName": "SessionStart:startup",
                "content": "TERSE MODE ACTIVE",
            },
        ),
        u | {"parentUuid": _uid(0)},
        _att(2, 1, 29.2, {"type": "deferred_tools_delta", "addedNames": ["WebFetch", "TaskCreate"]}),
        _att(3, 2, 29.3, {"type": "skill_listing", "content": "- update-config: configure the harness"}),
        _att(4, 3, 29.4, {"type": "command_permissions", "allowedTools": []}),
        _att(
            5,
            4,
            29.5,
            {
                "type": "mcp_instructions_delta",
                "addedNames": ["pencil"],
                "addedBlocks": ["## pencil\nUse the pencil tools."],
            },
        ),
        _att(6, 5, 29.6, {"type": "hook_system_message", "content": "\x1b[1m[recent context]\x1b[0m"}),
        _att(7, 6, 29.7, {"type": "hook_success", "hookEvent": "PostToolUse", "content": "formatted 1 file"}),
        _att(8, 7, 29.8, {"type": "task_reminder", "content": [], "itemCount": 0}),
        a1,
        _att(
            10,
            9,
            35,
            {
                "type": "file",
                "filename": "/w/idl.json",
                "content": {"type": "text", "file": {"filePath": "/w/idl.json", "content": '{"name": "vault"}'}},
            },
        ),
        _att(11, 10, 36, {"type": "queued_command", "prompt": "also add a test", "commandMode": "prompt"}),
        _att(13, 11, 37, {"type": "edited_text_file", "filename": "/w/lib.rs", "snippet": "12\tpub fn vault() {}"}),
        a2 | {"parentUuid": _uid(13)},
    ]


def test_attachments_the_model_saw_are_items(tmp_path, monkeypatch):
    """The earlier reader counted every ``attachment`` record as metadata, so what they added to
    the context was missing from the items and from the estimate set against the API's counts."""
    path = _write(tmp_path / f"{SESSION}.jsonl", _attachments_session())
    res = import_transcripts("claude-code", path)
    t = res.table.to_pylist()
    got = [(r["kind"], dict(r["metadata"]).get("attachment"), r["content"]) for r in t]
    assert got == [
        ("Attachment", "hook_success", "TERSE MODE ACTIVE"),
        ("Message", None, "Build the vault program."),
        ("Attachment", "deferred_tools_delta", "WebFetch\nTaskCreate"),
        ("Attachment", "skill_listing", "- update-config: configure the harness"),
        ("Attachment", "mcp_instructions_delta", "## pencil\nUse the pencil tools."),
        ("Message", None, "Reading the IDL first."),
        ("Attachment", "file", '{"name": "vault"}'),
        ("Message", "queued_command", "also add a test"),
        ("Attachment", "edited_text_file", "12\tpub fn vault() {}"),
        ("Message", None, "Done."),
    ]
    assert all(r["tags"] == ["user"] for r in t if dict(r["metadata"]).get("attachment"))
    assert {k: v for k, v in res.skipped.items() if "attachment" in k} == {
        "claude-code attachment 'command_permissions' (not context)": 1,
        "claude-code attachment 'hook_system_message' (not context)": 1,
        "claude-code attachment 'hook_success' (not context)": 1,
        "claude-code attachment 'task_reminder' (not context)": 1,
    }
    assert all(k in res.metadata_reasons for k in res.skipped if "attachment" in k)
    # the first request saw the five items before it, the second nine
    (chk,) = res.tokens
    assert chk["requests"] == 2 and chk["api"] == 968
    before = [sum(r["tokens"] for r in t[:5]), sum(r["tokens"] for r in t[:9])]
    assert chk["estimate"] == before[1] and before[0] < before[1]
    monkeypatch.setattr(claude_code, "TWO_PASS_BYTES", 0)
    assert import_transcripts("claude-code", path).table.equals(res.table)


def test_api_error_messages_are_not_context(tmp_path):
    """When a request fails Claude Code writes the error as an assistant record of model
    ``<synthetic>`` with ``isApiErrorMessage`` ("Not logged in", "Credit balance is too low",
    "API Error: 400 ..."): the model never wrote it. It is counted, not an item, and the chain
    goes on through it."""
    err = _rec(2, 1, "assistant", 41, [{"type": "text", "text": "Credit balance is too low"}], msg="e1")
    err["message"]["model"] = "<synthetic>"
    err.update(isApiErrorMessage=True, error="billing_error")
    recs = [
        _rec(1, None, "user", 40, "Deploy it."),
        err,
        _rec(3, 2, "user", 50, "Try again."),
        _rec(4, 3, "assistant", 51, [{"type": "text", "text": "Deploying."}], msg="m2"),
    ]
    res = import_transcripts("claude-code", _write(tmp_path / "s.jsonl", recs))
    assert [r["content"] for r in res.table.to_pylist()] == ["Deploy it.", "Try again.", "Deploying."]
    key = "claude-code API error message (written by Claude Code, not sent to the model)"
    assert res.skipped[key] == 1 and key in res.metadata_reasons


def test_tool_search_references_are_the_call_output(tmp_path):
    """Claude Code 2.1's ToolSearch answers with ``tool_reference`` blocks (the API puts each
    named tool's definition in the context). The earlier reader counted them as non-text parts
    and dropped the result, leaving its call without an output."""
    result = [
        {"type": "tool_reference", "tool_name": "TaskCreate"},
        {"type": "tool_reference", "tool_name": "TaskList"},
    ]
    recs = [
        _rec(1, None, "user", 1, "Track the work."),
        _rec(2, 1, "assistant", 2, _use("toolu_s", "ToolSearch", query="select:TaskCreate,TaskList"), msg="m1"),
        _rec(3, 2, "user", 3, _result("toolu_s", result)),
    ]
    res = import_transcripts("claude-code", _write(tmp_path / "s.jsonl", recs))
    out = [r for r in res.table.to_pylist() if r["kind"] == "ToolOutput"]
    assert [(r["tool_call_id"], r["content"], dict(r["metadata"])["tool_name"]) for r in out] == [
        ("toolu_s", "TaskCreate\nTaskList", "ToolSearch")
    ]
    assert not any("tool_reference" in k for k in res.skipped)


@pytest.mark.parametrize(
    "payload", [{"type": {"nested": 1}}, {"type": None, "content": "x"}, None, "text", {"type": "file", "content": 3}]
)
def test_a_malformed_attachment_is_counted_not_a_crash(tmp_path, payload):
    """A fuzzed copy of a real log (an attachment whose ``type`` is an object) raised a
    TypeError; any attachment payload must import or be counted."""
    recs = [
        _rec(1, None, "user", 1, "Hi."),
        _att(2, 1, 2, payload),
        _rec(3, 2, "assistant", 3, [{"type": "text", "text": "Hello."}], msg="m"),
    ]
    res = import_transcripts("claude-code", _write(tmp_path / "s.jsonl", recs))
    assert [r["content"] for r in res.table.to_pylist()] == ["Hi.", "Hello."]
    assert sum(v for k, v in res.skipped.items() if k.startswith("claude-code attachment")) == 1


@pytest.mark.parametrize(
    "doc",
    [
        {"resourceSpans": [3]},
        {"resourceSpans": [{"scopeSpans": "x"}]},
        {"resourceSpans": [{"scopeSpans": [{"spans": 7}]}]},
        {"resourceSpans": [{"scopeSpans": [{"spans": [{"attributes": [{"key": "k", "value": {"intValue": "a"}}]}]}]}]},
        {
            "resourceSpans": [
                {"scopeSpans": [{"spans": [{"attributes": [{"key": "k", "value": {"arrayValue": ["x"]}}]}]}]}
            ]
        },
        {
            "resourceSpans": [
                {
                    "scopeSpans": [
                        {
                            "spans": [
                                {
                                    "attributes": [
                                        {
                                            "key": "gen_ai.input.messages",
                                            "value": {"stringValue": '[{"role": "user", "parts": 5}]'},
                                        }
                                    ]
                                }
                            ]
                        }
                    ]
                }
            ]
        },
    ],
)
def test_a_malformed_otlp_line_is_a_bad_line_not_a_crash(tmp_path, doc):
    """Mutated OTLP lines raised AttributeError / ValueError from deep in the reader; each is now
    a bad line naming what is wrong (skipped and listed with ``skip_bad``)."""
    good = {
        "resourceSpans": [
            {
                "scopeSpans": [
                    {
                        "spans": [
                            _span(
                                _T,
                                "a" * 16,
                                1,
                                {
                                    "gen_ai.input.messages": '[{"role": "user", "parts": [{"type": "text", "content": "Hi"}]}]'
                                },
                            )
                        ]
                    }
                ]
            }
        ]
    }
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps(doc) + "\n")
    res = import_transcripts("otel", path, skip_bad=True)
    assert [r["content"] for r in res.table.to_pylist()] == ["Hi"]
    assert [b.line for b in res.bad] == [2]


def _stream_messages():
    sid = "40e7b02d-c0f9-4876-9010-f514d4eb0603"
    return [
        {
            "type": "system",
            "subtype": "init",
            "cwd": "/w",
            "session_id": sid,
            "tools": ["Bash"],
            "uuid": "53e9d0b7-d864-43b8-a2cb-83c601deb075",
        },
        {
            "type": "assistant",
            "message": {
                "id": "msg_01",
                "role": "assistant",
                "model": "claude-opus-4-5-20251101",
                "content": [{"type": "tool_use", "id": "toolu_ls", "name": "Bash", "input": {"command": "ls -la"}}],
                "usage": {"input_tokens": 10, "cache_creation_input_tokens": 3556, "cache_read_input_tokens": 17254},
            },
            "parent_tool_use_id": None,
            "session_id": sid,
            "uuid": "2f21a2b4-8398-44a5-9a44-b01dd2ba10d3",
        },
        {
            "type": "user",
            "message": {
                "role": "user",
                "content": [
                    {
                        "tool_use_id": "toolu_ls",
                        "type": "tool_result",
                        "content": "total 8\nREADME.md",
                        "is_error": False,
                    }
                ],
            },
            "parent_tool_use_id": None,
            "session_id": sid,
            "uuid": "aea826c9-a926-494b-b395-d06ebcbd9703",
            "tool_use_result": {"stdout": "total 8\nREADME.md", "stderr": "", "interrupted": False, "isImage": False},
        },
        {
            "type": "result",
            "subtype": "success",
            "is_error": False,
            "result": "Listed.",
            "session_id": sid,
            "uuid": "894a597c-b4ec-4baf-8a0e-6809b77f00b0",
        },
    ]


@pytest.mark.parametrize("indent", [None, 2])
def test_verbose_json_output_is_the_stream_as_one_array(tmp_path, monkeypatch, indent):
    """``claude -p --output-format json --verbose`` prints the stream's messages as one JSON
    array (compact or, saved by tools, indented); ``auto`` took it for stream-json but the reader
    refused every line ("expected a JSON object, got list")."""
    path = tmp_path / "run.json"
    path.write_text(json.dumps(_stream_messages(), indent=indent))
    res = import_transcripts("auto", path)
    t = res.table.to_pylist()
    assert res.format == "stream-json"
    assert [(r["kind"], r["tool_call_id"], dict(r["metadata"])["row"]) for r in t] == [
        ("ToolCall", "toolu_ls", "1"),
        ("ToolOutput", "toolu_ls", "2"),
    ]
    assert res.skipped == {"claude-code record 'system'": 1, "claude-code record 'result'": 1}
    monkeypatch.setattr(claude_code, "TWO_PASS_BYTES", 0)  # an array is read in one pass
    assert import_transcripts("stream-json", path).table.equals(res.table)


def test_eight_parallel_reads_keep_the_api_order(tmp_path):
    """A response of eight ``Read`` calls (seen in a real 2.1.79 session): the chain of call
    records forks at each one; the import gives the eight calls, then the eight results."""
    k = 8
    recs = [
        _rec(1, None, "user", 1, "Read the sources."),
        _rec(2, 1, "assistant", 2, [{"type": "text", "text": "Reading."}], msg="m"),
    ]
    for i in range(k):
        recs.append(
            _rec(
                10 + i,
                2 if i == 0 else 10 + i - 1,
                "assistant",
                3 + i * 0.1,
                _use(f"toolu_{i}", "Read", file_path=f"f{i}"),
                msg="m",
            )
        )
    for i in range(k):
        recs.append(_rec(30 + i, 10 + i, "user", 5 + i * 0.01, _result(f"toolu_{i}", f"source {i}")))
    recs.append(_rec(50, 30 + k - 1, "assistant", 7, [{"type": "text", "text": "Read them all."}], msg="m2"))
    res = import_transcripts("claude-code", _write(tmp_path / "s.jsonl", recs))
    got = [(r["kind"], r["tool_call_id"]) for r in res.table.to_pylist()]
    calls = [("ToolCall", f"toolu_{i}") for i in range(k)]
    outs = [("ToolOutput", f"toolu_{i}") for i in range(k)]
    assert got == [("Message", None), ("Message", None), *calls, *outs, ("Message", None)]
    assert REWOUND not in res.skipped


def _png(w, h):
    import zlib

    ihdr = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    raw = b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + ihdr + struct.pack(">I", zlib.crc32(b"IHDR" + ihdr))
    return base64.b64encode(raw + b"\x00" * 16).decode()


def _jpeg(w, h):
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    sof = b"\xff\xc0" + struct.pack(">HBHH", 17, 8, h, w) + b"\x03\x01\x22\x00\x02\x11\x01\x03\x11\x01"
    return base64.b64encode(b"\xff\xd8" + app0 + sof + b"\xff\xd9").decode()


def _img(media, data):
    return {"type": "image", "source": {"type": "base64", "media_type": media, "data": data}}


def test_images_are_items_with_the_apis_count_for_their_size(tmp_path):
    """A pasted screenshot and an image a tool read were counted as skipped blocks: their
    tokens (about 1600 each for a screenshot) were missing, and a short session of screenshots
    was refused for skipping more than it kept. Each is now an ``Image`` item whose tokens are
    the API's published count for its size (read from the PNG / JPEG / GIF / WebP header)."""
    recs = [
        _rec(1, None, "user", 1, [_img("image/png", _png(1920, 1080)), {"type": "text", "text": "Why is this red?"}]),
        _rec(2, 1, "assistant", 2, _use("toolu_r", "Read", file_path="/w/logo.jpg"), msg="m1"),
        _rec(3, 2, "user", 3, _result("toolu_r", [_img("image/jpeg", _jpeg(800, 600))])),
        _rec(4, 3, "assistant", 4, _use("toolu_s", "Screenshot"), msg="m2"),
        _rec(
            5, 4, "user", 5, _result("toolu_s", [{"type": "text", "text": "saved"}, _img("image/png", _png(100, 50))])
        ),
        _rec(6, 5, "user", 6, [{"type": "image", "source": {"type": "url", "url": "https://x/y.png"}}]),
    ]
    res = import_transcripts("claude-code", _write(tmp_path / "s.jsonl", recs))
    got = [
        (r["kind"], r["content"], r["tokens"], r["tool_call_id"])
        for r in res.table.to_pylist()
        if r["kind"] in ("Image", "ToolOutput")
    ]
    assert got == [
        ("Image", "[image image/png 1920x1080]", 1600, None),  # 1568x882 after scaling: 1844, at most 1600
        ("Image", "[image image/jpeg 800x600]", 640, "toolu_r"),
        ("ToolOutput", "saved", estimate_tokens("saved"), "toolu_s"),
        ("Image", "[image image/png 100x50]", 7, "toolu_s"),
    ]
    assert res.skipped.get("claude-code block 'image'") == 1  # the URL image: no size to count
    assert image_tokens(1092, 1092) == 1590 and image_tokens(200, 200) == 54


def test_a_malformed_otlp_attribute_is_named(tmp_path):
    """The bad line says which attribute's value is not an OTLP AnyValue."""
    doc = {
        "resourceSpans": [
            {"scopeSpans": [{"spans": [{"attributes": [{"key": "llm.weird", "value": {"arrayValue": ["x"]}}]}]}]}
        ]
    }
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(doc) + "\n")
    with pytest.raises(BadTranscriptError, match=r"attribute 'llm\.weird': an attribute value is not an OTLP AnyValue"):
        import_transcripts("otel", path)
