"""OpenAI-shaped conversations read whole (tools schemas, tool_call_ids, multi-part content,
refusals, names, usage), the tool-pair columns, and the token estimate against a literal
transcription of its rule."""

import base64
import json
import math
import random
import re

import pytest

from cupel_np.io.importers import BadTranscriptError, estimate_tokens, estimate_tokens_many, import_transcripts
from cupel_np.io.importers.detect import detect

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "run_shell",
            "description": "Run a shell command and return its output.",
            "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]},
        },
    },
    {"type": "function", "function": {"name": "read_file", "parameters": {"type": "object", "properties": {}}}},
]


def conversation():
    return {
        "id": "conv-7",
        "tools": TOOLS,
        "messages": [
            {"role": "system", "content": "You are a coding agent."},
            {
                "role": "user",
                "content": [{"type": "text", "text": "What is in /tmp?"}, {"type": "image_url", "image_url": {}}],
            },
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_a",
                        "type": "function",
                        "function": {"name": "run_shell", "arguments": '{"cmd": "ls /tmp"}'},
                    },
                    {"id": "call_b", "type": "function", "function": {"name": "read_file", "arguments": "{}"}},
                ],
            },
            {"role": "tool", "tool_call_id": "call_a", "name": "run_shell", "content": "x.log"},
            {"role": "tool", "tool_call_ids": ["call_b", "call_a"], "content": "both outputs, as SWE-agent sends them"},
            {"role": "assistant", "content": "", "refusal": "I cannot open that file."},
            {"role": "user", "name": "dana", "content": "ok"},
            {"role": "assistant", "content": "Done.", "usage": {"prompt_tokens": 700}},
        ],
        "usage": {"prompt_tokens": 760, "completion_tokens": 3},
    }


def test_openai_whole(tmp_path):
    p = tmp_path / "c.jsonl"
    p.write_text(json.dumps(conversation()) + "\n")
    res = import_transcripts("openai", p)
    t = res.table.to_pylist()
    md = [dict(r["metadata"]) for r in t]
    assert [r["kind"] for r in t] == [
        "ToolSchema",
        "ToolSchema",
        "SystemPrompt",
        "Message",
        "ToolCall",
        "ToolCall",
        "ToolOutput",
        "ToolOutput",
        "Message",
        "Message",
        "Message",
    ]
    # tools: pinned, one item each, the definition as compact JSON, tokens by the estimate
    assert [r["pinned"] for r in t[:3]] == [True, True, True] and json.loads(t[0]["content"]) == TOOLS[0]
    assert [m["tool_name"] for m in md[:2]] == ["run_shell", "read_file"]
    assert t[0]["tokens"] == estimate_tokens(t[0]["content"]) > 20
    assert res.skipped == {"non-text part 'image_url'": 1}
    # calls and results: ids, roles, one group for the turn; a tool_call_ids list answers its first id
    assert [r["tool_role"] for r in t[4:8]] == ["call", "call", "result", "result"]
    assert [r["tool_call_id"] for r in t[4:8]] == ["call_a", "call_b", "call_a", "call_b"]
    assert {r["tool_group"] for r in t[4:8]} == {"conv-7:call_a"}
    assert md[7]["tool_call_ids"] == "call_b,call_a" and md[7]["tool_name"] == "read_file"
    assert md[6]["tool_name"] == "run_shell"
    assert t[8]["content"] == "I cannot open that file." and md[8]["refusal"] == "true"
    assert md[9]["name"] == "dana"
    assert all(r["tool_group"] is None for r in t[:4] + t[8:])
    # usage: a per-message count before the last reply and the conversation's prompt_tokens
    (chk,) = res.tokens
    assert chk["requests"] == 2 and chk["api"] == 760
    assert chk["estimate"] == sum(r["tokens"] for r in t[:10])


def test_legacy_function_call_links_by_name(tmp_path):
    p = tmp_path / "f.jsonl"
    msgs = [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": None, "function_call": {"name": "get_weather", "arguments": "{}"}},
        {"role": "function", "name": "get_weather", "content": "sunny"},
    ]
    p.write_text(json.dumps({"messages": msgs}) + "\n")
    t = import_transcripts("openai", p).table.to_pylist()
    assert [r["tool_role"] for r in t] == [None, "call", "result"]
    assert t[1]["tool_call_id"] == t[2]["tool_call_id"] == "#1.0"  # synthesized: message 1, call 0
    assert t[1]["tool_group"] == t[2]["tool_group"] == "f:1:#1.0"


def test_orphan_result_has_its_own_group(tmp_path):
    p = tmp_path / "o.jsonl"
    msgs = [{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "call_gone", "content": "late output"}]
    p.write_text(json.dumps({"id": "c", "messages": msgs}) + "\n")
    t = import_transcripts("openai", p).table.to_pylist()
    assert (t[1]["tool_role"], t[1]["tool_call_id"], t[1]["tool_group"]) == ("result", "call_gone", "c:call_gone")


# ----------------------------------------------------------------------------- Anthropic bodies
def _png(width, height):
    """The first bytes of a PNG of that size (what the image reader looks at), base64."""
    head = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + width.to_bytes(4, "big") + height.to_bytes(4, "big")
    return base64.b64encode(head + b"\x08\x02\x00\x00\x00").decode()


def anthropic_body():
    """A Messages API request body as a proxy logs it, with the reply's usage."""
    return {
        "id": "msg-body-1",
        "model": "claude-sonnet",
        "system": [
            {"type": "text", "text": "You are a coding agent."},
            {"type": "text", "text": "Project notes: use pytest.", "cache_control": {"type": "ephemeral"}},
        ],
        "tools": [{"name": "bash", "description": "Run a command", "input_schema": {"type": "object"}}],
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "document", "source": {"type": "text", "data": "README: run make."}, "title": "README"},
                    {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBE"}},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": _png(1000, 750)}},
                    {"type": "text", "text": "Why does the build fail?"},
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "check the log", "signature": "sig"},
                    {"type": "text", "text": "Let me look."},
                    {"type": "tool_use", "id": "toolu_a", "name": "bash", "input": {"cmd": "make"}},
                    {"type": "tool_use", "id": "toolu_b", "name": "bash", "input": {"cmd": "cat log"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_a", "content": "make: error 2", "is_error": True},
                    {"type": "tool_result", "tool_use_id": "toolu_b", "content": [{"type": "text", "text": "E: x"}]},
                    {"type": "text", "text": "Both ran."},
                ],
            },
            {"role": "assistant", "content": "The log shows error x."},
        ],
        "usage": {"input_tokens": 90, "cache_read_input_tokens": 400},
    }


def test_anthropic_messages_body(tmp_path):
    """A Messages API body: the system blocks, documents with text, images by size, calls and
    results linked in one group, ``is_error``; thinking and a PDF without text counted."""
    p = tmp_path / "a.jsonl"
    p.write_text(json.dumps(anthropic_body()) + "\n")
    res = import_transcripts("auto", p)  # detected as the openai reader's shape
    t = res.table.to_pylist()
    md = [dict(r["metadata"]) for r in t]
    assert [r["kind"] for r in t] == [
        "ToolSchema",
        "SystemPrompt",
        "SystemPrompt",
        "Document",
        "Image",
        "Message",
        "Message",
        "ToolCall",
        "ToolCall",
        "ToolOutput",
        "ToolOutput",
        "Message",
        "Message",
    ]
    assert [r["content"] for r in t[1:4]] == [
        "You are a coding agent.",
        "Project notes: use pytest.",
        "README: run make.",
    ]
    assert [r["pinned"] for r in t[:4]] == [True, True, True, False]
    assert md[0]["tool_name"] == "bash" and md[3]["title"] == "README"
    assert t[4]["tokens"] == 1000 and md[4]["image"] == "1000x750"  # 1000 x 750 / 750
    assert t[7]["content"] == 'bash({"cmd": "make"})'
    assert [(r["tool_role"], r["tool_call_id"]) for r in t[7:11]] == [
        ("call", "toolu_a"),
        ("call", "toolu_b"),
        ("result", "toolu_a"),
        ("result", "toolu_b"),
    ]
    assert {r["tool_group"] for r in t[7:11]} == {"msg-body-1:toolu_a"}
    assert [md[k]["is_error"] for k in (9, 10)] == ["true", "false"] and md[10]["tool_name"] == "bash"
    assert all(r["tool_group"] is None for r in t[:7] + t[11:])
    assert res.skipped == {"anthropic block 'thinking'": 1, "anthropic block 'document' (no text in the log)": 1}
    (chk,) = res.tokens
    assert chk["api"] == 490 and chk["estimate"] == sum(r["tokens"] for r in t[:12])
    for fmt in ("openai", "anthropic"):  # named: the same reader
        assert import_transcripts(fmt, p).table.equals(res.table)


@pytest.mark.parametrize(
    "body,message",
    [
        ({"system": [{"type": "image"}], "messages": []}, "system[0]: expected a text block"),
        (
            {"messages": [{"role": "assistant", "content": [{"type": "tool_use", "id": "t"}]}]},
            "messages[0].content[0]: tool_use block without a 'name'",
        ),
        (
            {"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": 5}]}]},
            "messages[0].content[0].content: content must be a string or a list of parts, got int",
        ),
    ],
)
def test_anthropic_bad_bodies_are_named(tmp_path, body, message):
    p = tmp_path / "bad.jsonl"
    p.write_text(json.dumps({"messages": [{"role": "user", "content": "ok"}]}) + "\n" + json.dumps(body) + "\n")
    res = import_transcripts("openai", p, skip_bad=True)
    (bad,) = res.bad
    assert bad.line == 2 and message in bad.message, bad


def test_batch_api_input_lines(tmp_path):
    """Batch API input files: each line wraps a request (OpenAI ``body``, Anthropic ``params``)
    under a ``custom_id``, which names the conversation; ``auto`` detects both."""
    openai_line = {
        "custom_id": "req-1",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {
            "model": "gpt",
            "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}],
        },
    }
    anthropic_line = {"custom_id": "req-2", "params": anthropic_body()}
    for name, line in (("o", openai_line), ("a", anthropic_line)):
        p = tmp_path / f"{name}.jsonl"
        p.write_text(json.dumps(line) + "\n")
        res = import_transcripts("auto", p)
        plain = tmp_path / f"{name}-plain.jsonl"
        inner = dict(line.get("body") or line["params"], id=line["custom_id"])
        plain.write_text(json.dumps(inner) + "\n")
        want = import_transcripts("openai", plain).table
        assert res.table.drop_columns("metadata").equals(want.drop_columns("metadata"))
        no_file = [[kv for kv in md if kv[0] != "file"] for md in res.table.column("metadata").to_pylist()]
        assert no_file == [[kv for kv in md if kv[0] != "file"] for md in want.column("metadata").to_pylist()]
        assert set(res.table.column("conversation_id").to_pylist()) == {line["custom_id"]}
    assert import_transcripts("auto", tmp_path / "o.jsonl").items == 2
    # a line with a custom_id but no request in it is no batch line: named as one without messages
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"custom_id": "x", "body": {"prompt": "hi"}}) + "\n" + json.dumps(openai_line) + "\n")
    res = import_transcripts("openai", bad, skip_bad=True)
    assert [(b.line, b.message) for b in res.bad] == [(1, "missing 'messages' (a list of chat messages)")]


def responses_body():
    """A Responses API request body with the response logged beside it."""
    return {
        "id": "resp-1",
        "model": "gpt",
        "instructions": "You are a shell agent.",
        "tools": [{"type": "function", "name": "shell", "parameters": {"type": "object"}}],
        "input": [
            {"role": "user", "content": "list files"},
            {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"},
            {"type": "function_call", "call_id": "call_1", "name": "shell", "arguments": '{"cmd":"ls"}'},
            {"type": "function_call", "call_id": "call_2", "name": "shell", "arguments": '{"cmd":"pwd"}'},
            {"type": "function_call_output", "call_id": "call_1", "output": "a.txt"},
            {"type": "function_call_output", "call_id": "call_2", "output": [{"type": "input_text", "text": "/home"}]},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "One file."}]},
            {"role": "user", "content": [{"type": "input_text", "text": "patch it"}, {"type": "input_image"}]},
            {"type": "custom_tool_call", "call_id": "call_3", "name": "apply_patch", "input": "*** Begin Patch"},
            {"type": "custom_tool_call_output", "call_id": "call_3", "output": {"content": "failed", "success": False}},
            {"type": "local_shell_call", "call_id": "call_4", "action": {"type": "exec", "command": ["ls", "-a"]}},
            {"type": "local_shell_call_output", "call_id": "call_4", "output": ".git"},
        ],
        "usage": {"input_tokens": 300, "output_tokens": 4},
        "output": [
            {
                "type": "mcp_call",
                "id": "mcp_1",
                "name": "search",
                "server_label": "docs",
                "arguments": "{}",
                "output": "hit",
            },
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Done."}]},
        ],
    }


def test_responses_api_body(tmp_path):
    """A Responses body: instructions pinned, items in order, each response's calls one group,
    outputs linked by call_id with their tool's name and failure; the response's output items
    after the API's count of the input."""
    p = tmp_path / "r.jsonl"
    p.write_text(json.dumps(responses_body()) + "\n")
    res = import_transcripts("auto", p)
    t = res.table.to_pylist()
    md = [dict(r["metadata"]) for r in t]
    assert [(r["kind"], r["content"]) for r in t] == [
        ("ToolSchema", '{"type":"function","name":"shell","parameters":{"type":"object"}}'),
        ("SystemPrompt", "You are a shell agent."),
        ("Message", "list files"),
        ("ToolCall", 'shell({"cmd":"ls"})'),
        ("ToolCall", 'shell({"cmd":"pwd"})'),
        ("ToolOutput", "a.txt"),
        ("ToolOutput", "/home"),
        ("Message", "One file."),
        ("Message", "patch it"),
        ("ToolCall", "apply_patch(*** Begin Patch)"),
        ("ToolOutput", "failed"),
        ("ToolCall", "local_shell(ls -a)"),
        ("ToolOutput", ".git"),
        ("ToolCall", "search({})"),
        ("ToolOutput", "hit"),
        ("Message", "Done."),
    ]
    assert [r["pinned"] for r in t[:3]] == [True, True, False]
    groups = [r["tool_group"] for r in t]
    assert groups[3:7] == ["resp-1:call_1"] * 4 and groups[7:9] == [None, None]
    assert groups[9:11] == ["resp-1:call_3"] * 2 and groups[11:13] == ["resp-1:call_4"] * 2
    assert groups[13:15] == ["resp-1:mcp_1"] * 2
    assert [md[k]["tool_name"] for k in (5, 6, 10, 12, 14)] == [
        "shell",
        "shell",
        "apply_patch",
        "local_shell",
        "search",
    ]
    assert md[10]["is_error"] == "true" and "is_error" not in md[5]
    assert res.skipped == {"responses item 'reasoning'": 1, "non-text part 'input_image'": 1}
    (chk,) = res.tokens
    assert chk["api"] == 300 and chk["estimate"] == sum(r["tokens"] for r in t[:13])
    batch = tmp_path / "batch.jsonl"  # the same body in a Batch API line
    batch.write_text(json.dumps({"custom_id": "resp-1", "url": "/v1/responses", "body": responses_body()}) + "\n")
    assert import_transcripts("auto", batch).table.drop_columns("metadata").equals(res.table.drop_columns("metadata"))


def test_responses_input_as_a_string(tmp_path):
    p = tmp_path / "s.jsonl"
    p.write_text(json.dumps({"model": "gpt", "input": "hello"}) + "\n")
    t = import_transcripts("auto", p).table.to_pylist()
    assert [(r["kind"], r["content"]) for r in t] == [("Message", "hello")]


def _one(tmp_path, body, fmt="openai", **kw):
    p = tmp_path / "one.jsonl"
    p.write_text(json.dumps(body) + "\n")
    return import_transcripts(fmt, p, **kw)


def test_an_openai_line_keeps_its_shape_whatever_parts_it_holds(tmp_path):
    """A line with what only OpenAI's chat messages have (tool_calls, a tool role, a system
    message) is read as OpenAI's throughout: a thinking part or an image with a source does not
    turn a message into Anthropic blocks (its calls, refusal and name stay); a part whose type
    is not a string is counted, not a crash."""
    body = {
        "id": "c",
        "messages": [
            {"role": "system", "content": [{"type": "text", "text": "sys"}, {"type": "document", "source": {}}]},
            {
                "role": "user",
                "name": "ann",
                "content": [{"type": "text", "text": "hi"}, {"type": ["text"], "text": "x"}],
            },
            {
                "role": "assistant",
                "content": [{"type": "thinking", "thinking": "hmm"}, {"type": "text", "text": "calling"}],
                "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}],
                "refusal": "no way",
            },
            {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "image", "source": {"type": "url"}}]},
        ],
    }
    res = _one(tmp_path, body)
    t = res.table.to_pylist()
    assert [(r["kind"], r["content"], r["tool_role"]) for r in t] == [
        ("SystemPrompt", "sys", None),
        ("Message", "hi\nx", None),
        ("Message", "calling", None),
        ("Message", "no way", None),
        ("ToolCall", "ls({})", "call"),
        ("ToolOutput", "[no text]", "result"),  # its image is not text: the pair stays whole
    ]
    md = [dict(r["metadata"]) for r in t]
    assert md[1]["name"] == "ann" and md[5]["tool_name"] == "ls" and md[5]["no_text"] == "true"
    assert t[4]["tool_group"] == t[5]["tool_group"] == "c:call_1"
    assert res.skipped == {"non-text part 'document'": 1, "non-text part 'thinking'": 1, "non-text part 'image'": 1}


def test_empty_tool_results_are_items(tmp_path):
    """A result without text keeps its call's pair in every shape: an OpenAI tool message, an
    Anthropic tool_result, a Responses output (and a screenshot, counted as a non-text part)."""
    openai_body = {
        "messages": [
            {"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "a", "content": ""},
        ]
    }
    anthropic_body = {
        "messages": [
            {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "f", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "", "is_error": True}]},
        ]
    }
    responses_body = {
        "model": "m",
        "input": [
            {"type": "function_call", "call_id": "a", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "a", "output": ""},
            {"type": "computer_call", "call_id": "b", "action": {"type": "screenshot"}},
            {
                "type": "computer_call_output",
                "call_id": "b",
                "output": {"type": "computer_screenshot", "image_url": "x"},
            },
        ],
    }
    for body in (openai_body, anthropic_body, responses_body):
        res = _one(tmp_path, body)
        t = res.table.to_pylist()
        outputs = [r for r in t if r["kind"] == "ToolOutput"]
        assert outputs and all(r["content"] == "[no text]" for r in outputs), t
        assert all(dict(r["metadata"])["no_text"] == "true" for r in outputs)
        calls = {r["tool_call_id"]: r["tool_group"] for r in t if r["tool_role"] == "call"}
        assert {r["tool_call_id"]: r["tool_group"] for r in outputs} == calls
        assert "empty content" not in res.skipped
    assert dict(outputs[1]["metadata"])["tool_name"] == "computer"
    assert res.skipped == {"non-text part 'computer_screenshot'": 1}
    assert dict(_one(tmp_path, anthropic_body).table.to_pylist()[1]["metadata"])["is_error"] == "true"


def test_a_responses_output_links_by_its_call_id_only(tmp_path):
    body = {"model": "m", "input": [{"type": "function_call_output", "id": "fco_1", "output": "late"}]}
    (r,) = _one(tmp_path, body).table.to_pylist()
    assert (r["tool_role"], r["tool_call_id"], r["tool_group"]) == (None, None, None)


def test_usage_counts_the_whole_request_unless_the_reply_is_logged(tmp_path):
    """A body's usage: before the last message when that is the reply (an assistant message),
    else after every message (a request as sent)."""
    msgs = [
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": "a1"},
        {"role": "user", "content": "q2"},
    ]
    for body_msgs, before in ((msgs, 3), (msgs[:2], 1)):
        res = _one(tmp_path, {"id": "c", "messages": body_msgs, "usage": {"input_tokens": 50}})
        (chk,) = res.tokens
        t = res.table.to_pylist()
        assert chk["api"] == 50 and chk["estimate"] == sum(r["tokens"] for r in t[:before])


def test_lines_of_other_datasets_are_no_requests(tmp_path):
    """An Alpaca line (``instruction`` / ``input`` / ``output``) is no Responses body, and an
    embeddings batch line no conversation: named, not read as chat."""
    with pytest.raises(BadTranscriptError, match=r"could be read as 'openai' \(first, line 1: missing 'messages'"):
        _one(tmp_path, {"instruction": "Translate", "input": "Bonjour", "output": "Hello"})
    emb = tmp_path / "emb.jsonl"
    emb.write_text(json.dumps({"custom_id": "e", "url": "/v1/embeddings", "body": {"model": "m", "input": "x"}}) + "\n")
    assert detect(emb) is None
    chat = {
        "custom_id": "c9",
        "url": "/v1/chat/completions",
        "body": {"conversation_id": "inner", "messages": [{"role": "user", "content": "hi"}]},
    }
    (r,) = _one(tmp_path, chat, "auto").table.to_pylist()
    assert r["conversation_id"] == "c9"  # a batch line's set is its custom_id


def test_http_captures(tmp_path):
    """Capture lines (claude-trace, logging proxies): each request's body is a set, timestamped
    when it was sent, counted by its response's usage (a JSON body's, a stream's message_start
    or response.completed) after every message it sent (a trailing assistant prefill too); the
    capture's other calls and its failed requests are counted as metadata, and ``auto`` tells
    a capture whatever its first call."""
    sse = "event: message_start\ndata: " + json.dumps(
        {"type": "message_start", "message": {"id": "m", "usage": {"input_tokens": 30, "cache_read_input_tokens": 100}}}
    )
    done = "event: response.completed\ndata: " + json.dumps(
        {"type": "response.completed", "response": {"usage": {"input_tokens": 44}}}
    )
    url = "https://api.anthropic.com/v1/messages"
    three = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]
    prefill = [{"role": "user", "content": "d"}, {"role": "assistant", "content": "{"}]
    lines = [
        {
            "request": {"method": "GET", "url": "https://api.anthropic.com/v1/models"},
            "response": {"body": {"data": []}},
        },
        {
            "request": {
                "timestamp": 1748554704.5,
                "url": url,
                "body": {"system": "S", "messages": [{"role": "user", "content": "hi"}]},
            },
            "response": {
                "status_code": 200,
                "body": {"content": [{"type": "text", "text": "yo"}], "usage": {"input_tokens": 12}},
            },
        },
        {
            "request": {"url": url, "body": json.dumps({"messages": three})},
            "response": {"body": None, "body_raw": sse + "\n\nevent: message_stop\ndata: {}\n"},
        },
        {
            "request": {"url": "https://api.openai.com/v1/responses", "body": {"model": "m", "input": "q"}},
            "response": {"body_raw": done},
        },
        {"request": {"url": url, "body": {"messages": prefill}}, "response": {"body": {"usage": {"input_tokens": 9}}}},
        {
            "request": {"url": url, "body": {"messages": prefill}},
            "response": {"status_code": 529, "body": {"type": "error"}},
        },
    ]
    p = tmp_path / "cap.jsonl"
    p.write_text("".join(json.dumps(x) + "\n" for x in lines))
    res = import_transcripts("auto", p)
    t = res.table.to_pylist()
    assert [(r["conversation_id"], r["content"]) for r in t] == [
        ("cap:2", "S"),
        ("cap:2", "hi"),
        ("cap:3", "a"),
        ("cap:3", "b"),
        ("cap:3", "c"),
        ("cap:4", "q"),
        ("cap:5", "d"),
        ("cap:5", "{"),
    ]
    assert t[0]["timestamp"].isoformat() == t[1]["timestamp"].isoformat() == "2025-05-29T21:38:24.500000+00:00"
    assert t[2]["timestamp"] is None
    checks = {c["set"]: c for c in res.tokens}
    assert {k: (c["api"], c["estimate"]) for k, c in checks.items()} == {
        "cap:2": (12, t[0]["tokens"] + t[1]["tokens"]),
        "cap:3": (130, sum(r["tokens"] for r in t[2:5])),
        "cap:4": (44, t[5]["tokens"]),
        "cap:5": (9, t[6]["tokens"] + t[7]["tokens"]),  # the prefill was sent: counted
    }
    assert res.skipped == {
        "http exchange without a conversation (not a model request)": 1,
        "http exchange that failed (status 529)": 1,
    }
    assert res.metadata_reasons == set(res.skipped)


def test_capture_streams_and_what_is_no_capture(tmp_path):
    """A streamed chat-completions or Gemini capture is counted by its last usage chunk; a
    plain line cannot pass for a capture's internals; a generic request/response dataset is
    not detected as a capture; a capitalised System role counts as a system message."""
    chunk = "data: " + json.dumps({"choices": [], "usage": {"prompt_tokens": 21}}) + "\n\ndata: [DONE]\n"
    gem = "data: " + json.dumps({"candidates": [], "usageMetadata": {"promptTokenCount": 8}}) + "\n"
    lines = [
        {
            "request": {"url": "u", "body": {"messages": [{"role": "user", "content": "a"}]}},
            "response": {"body_raw": chunk},
        },
        {
            "request": {"url": "u", "body": {"contents": [{"role": "user", "parts": [{"text": "b"}]}]}},
            "response": {"body_raw": gem},
        },
    ]
    p = tmp_path / "cap.jsonl"
    p.write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert [c["api"] for c in import_transcripts("auto", p).tokens] == [21, 8]
    sneaky = {"messages": [{"role": "user", "content": "x"}], "\u0000sent": [None, "2025-01-01"]}
    (r,) = _one(tmp_path, sneaky).table.to_pylist()
    assert r["timestamp"] is None
    generic = tmp_path / "generic.jsonl"
    generic.write_text(json.dumps({"request": {"prompt": "hi"}, "response": {"text": "yo"}}) + "\n")
    assert detect(generic) is None
    both = {"system": "TOP", "messages": [{"role": "System", "content": "sys"}, {"role": "user", "content": "q"}]}
    res = _one(tmp_path, both)
    assert [r["content"] for r in res.table.to_pylist()] == ["sys", "q"]


def test_openai_part_lists_stay_one_item(tmp_path):
    """Text-only part lists (either API's) are one item, as before; an OpenAI ``image_url`` part
    does not turn a message into Anthropic blocks."""
    msgs = [
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {"role": "user", "content": [{"type": "text", "text": "c"}, {"type": "image", "image_url": {}}]},
    ]
    p = tmp_path / "o.jsonl"
    p.write_text(json.dumps({"messages": msgs}) + "\n")
    res = import_transcripts("openai", p)
    assert [r["content"] for r in res.table.to_pylist()] == ["a\nb", "c"]
    assert res.skipped == {"non-text part 'image'": 1}


# ----------------------------------------------------------------------------- the estimate
_PIECE = re.compile(
    r"(?P<word>[A-Za-z]+)|(?P<digits>[0-9]{1,3})|(?P<nl>\s*\n\s*)|(?P<space>[ \t]+)"
    r"|(?P<punct>[!-/:-@\[-`{-~]+)|(?P<other>[^\x00-\x7f])|(?P<ctl>[\x00-\x1f\x7f])"
)


def naive_estimate(text):
    """The rule as a regex, summed exactly (in 24ths)."""
    n24 = 0
    for m in _PIECE.finditer(text):
        s = m.group()
        kind = m.lastgroup
        if kind == "word":
            n24 += 24 + 4 * max(0, len(s) - 4)
        elif kind == "punct":
            n24 += 15 * len(s)
        elif kind == "space":
            n24 += 6 * (len(s) - 1)
        else:
            n24 += 24
    return math.ceil(n24 / 24)


def test_estimate_matches_the_rule_on_generated_text():
    rng = random.Random(28)
    alphabet = "abcXYZ  \t\t\n\r\x0b\x1c\x00\x7f\xa0\u3000\u2028日é0123456789!.,;{}-_\ud800"
    # every non-ASCII space, and characters whose UTF-8 bytes differ from one only in the last byte
    alphabet += "\x85\u1680\u2000\u2009\u200a\u2029\u202f\u205f" + "\x84\xa1\u1681\u200b\u202e\u2030\u205e\u3001😀"
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(3000)]
    texts += ["", "hello world", "x" * 100, " " * 9 + "\n", "\t \x0b \n \t"]
    got = estimate_tokens_many(texts).tolist()
    assert got == [naive_estimate(s) for s in texts]
    assert [estimate_tokens(s) for s in texts[:50]] == got[:50]


@pytest.mark.parametrize("text,expected", [("hello world", 3), ("a\nb", 3), ("12345", 2), ("日本語", 3), ("", 0)])
def test_estimate_examples(text, expected):
    assert estimate_tokens(text) == expected
