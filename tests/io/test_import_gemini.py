"""Gemini ``generateContent`` bodies: the system instruction and tool declarations, text,
function calls and responses linked (by id, else by name in order), code execution, thoughts
and media counted, both spellings of the fields, batch and Vertex lines, and captures."""

import base64
import json

import pytest

from cupel_np.io.importers import BadTranscriptError, import_transcripts
from cupel_np.io.importers.detect import detect


def body():
    return {
        "systemInstruction": {"parts": [{"text": "You are a travel agent."}]},
        "tools": [
            {"functionDeclarations": [{"name": "weather", "parameters": {"type": "object"}}, {"name": "flights"}]},
            {"codeExecution": {}},
        ],
        "contents": [
            {
                "role": "user",
                "parts": [{"text": "Paris or Rome?"}, {"inlineData": {"mimeType": "image/png", "data": "iVBO"}}],
            },
            {
                "role": "model",
                "parts": [
                    {"text": "weigh the weather", "thought": True},
                    {"functionCall": {"name": "weather", "args": {"city": "Paris"}}},
                    {"functionCall": {"name": "weather", "args": {"city": "Rome"}}},
                ],
            },
            {
                "role": "user",
                "parts": [
                    {"functionResponse": {"name": "weather", "response": {"temp": 18}}},
                    {"functionResponse": {"name": "weather", "response": {"temp": 25}}},
                ],
            },
            {
                "role": "model",
                "parts": [
                    {"executableCode": {"language": "PYTHON", "code": "print(25 - 18)"}},
                    {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "7\n"}},
                    {"text": "Rome is 7 degrees warmer."},
                ],
            },
        ],
    }


def _import(tmp_path, line, fmt="auto"):
    p = tmp_path / "g.jsonl"
    p.write_text(json.dumps(line) + "\n")
    return p, import_transcripts(fmt, p)


def test_a_generate_content_body(tmp_path):
    p, res = _import(tmp_path, {"key": "trip-1", "request": body()})
    assert detect(p) == "openai"
    t = res.table.to_pylist()
    assert [(r["kind"], r["content"], r["tool_role"], r["tool_call_id"]) for r in t] == [
        ("ToolSchema", '{"name":"weather","parameters":{"type":"object"}}', None, None),
        ("ToolSchema", '{"name":"flights"}', None, None),
        ("ToolSchema", '{"codeExecution":{}}', None, None),
        ("SystemPrompt", "You are a travel agent.", None, None),
        ("Message", "Paris or Rome?", None, None),
        ("ToolCall", 'weather({"city": "Paris"})', "call", "#1.1"),
        ("ToolCall", 'weather({"city": "Rome"})', "call", "#1.2"),
        ("ToolOutput", '{"temp": 18}', "result", "#1.1"),  # by name, in order
        ("ToolOutput", '{"temp": 25}', "result", "#1.2"),
        ("ToolCall", "code_execution(print(25 - 18))", "call", "#3.0"),
        ("ToolOutput", "7\n", "result", "#3.0"),
        ("Message", "Rome is 7 degrees warmer.", None, None),
    ]
    assert {r["conversation_id"] for r in t} == {"trip-1"}
    assert len({r["tool_group"] for r in t[5:9]}) == 1 and t[9]["tool_group"] == t[10]["tool_group"]
    assert [dict(r["metadata"]).get("tool_name") for r in t[7:9]] == ["weather", "weather"]
    assert dict(t[10]["metadata"])["is_error"] == "false" and "is_error" not in dict(t[7]["metadata"])
    assert res.skipped == {"gemini part 'thought'": 1, "gemini part 'inlineData'": 1}
    assert [r["pinned"] for r in t[:5]] == [True, True, True, True, False]


def test_snake_case_ids_and_the_vertex_response(tmp_path):
    """The Python SDK's field names read as the REST API's; ids link a response to its call
    whatever the order; a Vertex output line's usage counts everything the request sent."""
    snake = {
        "system_instruction": {"parts": [{"text": "sys"}]},
        "contents": [
            {"role": "user", "parts": [{"text": "go"}]},
            {
                "role": "model",
                "parts": [
                    {"function_call": {"id": "a", "name": "f", "args": {}}},
                    {"function_call": {"id": "b", "name": "f", "args": {}}},
                ],
            },
            {"role": "user", "parts": [{"function_response": {"id": "b", "name": "f", "response": {"r": 2}}}]},
            {"role": "user", "parts": [{"function_response": {"id": "a", "name": "f", "response": {"r": 1}}}]},
        ],
    }
    _, res = _import(tmp_path, {"request": snake, "response": {"usageMetadata": {"promptTokenCount": 90}}})
    t = res.table.to_pylist()
    assert [(r["content"], r["tool_call_id"]) for r in t] == [
        ("sys", None),
        ("go", None),
        ("f({})", "a"),
        ("f({})", "b"),
        ('{"r": 2}', "b"),
        ('{"r": 1}', "a"),
    ]
    (chk,) = res.tokens
    assert chk["api"] == 90 and chk["estimate"] == sum(r["tokens"] for r in t)


def test_a_captured_gemini_request(tmp_path):
    url = "https://generativelanguage.googleapis.com/v1beta/models/gemini:generateContent"
    line = {
        "request": {"url": url, "body": {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}},
        "response": {"status_code": 200, "body": {"candidates": [], "usageMetadata": {"promptTokenCount": 5}}},
    }
    _, res = _import(tmp_path, line)
    assert [r["content"] for r in res.table.to_pylist()] == ["hi"]
    (chk,) = res.tokens
    assert chk["api"] == 5


def test_bad_bodies_are_named(tmp_path):
    p = tmp_path / "bad.jsonl"
    bad = {"contents": [{"role": "narrator", "parts": [{"text": "x"}]}]}
    p.write_text(json.dumps(body()) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(
        BadTranscriptError, match=r"bad\.jsonl:2: contents\[0\]\.role: expected user or model, got 'narrator'"
    ):
        import_transcripts("gemini", p)
    assert import_transcripts("gemini", p, skip_bad=True).items == 12


@pytest.mark.parametrize(
    "line,message",
    [
        ({"contents": [], "systemInstruction": {"parts": [None]}}, "systemInstruction: expected a string or a Content"),
        ({"contents": [], "systemInstruction": {"parts": -1}}, "systemInstruction: expected a string or a Content"),
        (
            {"contents": [], "tools": [{"functionDeclarations": [1]}]},
            "tools[0].functionDeclarations[0]: expected an object",
        ),
        ({"key": "k", "request": {"contents": None}}, "request: its 'contents' is no conversation this reader reads"),
        (
            {"request": {"url": "u", "body": {"messages": "oops"}}, "response": {}},
            "request: its 'messages' is no conversation",
        ),
    ],
)
def test_malformed_lines_are_bad_lines(tmp_path, line, message):
    """Never an uncaught error, never a silent skip: a malformed body is a bad line."""
    p = tmp_path / "m.jsonl"
    mixed = {"contents": [{"role": "model", "parts": [{"functionCall": "x", "executableCode": {"code": "1"}}]}]}
    p.write_text(json.dumps(body()) + "\n" + json.dumps(line) + "\n" + json.dumps(mixed) + "\n")
    res = import_transcripts("gemini", p, skip_bad=True)
    assert [b.line for b in res.bad] == [2] and message in res.bad[0].message
    assert res.table.to_pylist()[-1]["content"] == "code_execution(1)"  # (a string functionCall beside code)


def _png(width, height):
    head = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + width.to_bytes(4, "big") + height.to_bytes(4, "big")
    return base64.b64encode(head + b"\x08\x02\x00\x00\x00").decode()


def test_single_values_roles_and_inline_images(tmp_path):
    """What the API accepts, read: a repeated field's single value (``contents``, ``parts``,
    the system instruction's ``parts``: a real Vertex batch writes them so), roles in capitals;
    an inline image is an Image item counted as Gemini counts it (258 tokens a 768 x 768 tile,
    one for an image of at most 384 pixels a side); a file by URI is counted."""
    line = {
        "system_instruction": {"parts": {"text": "sys"}},
        "contents": [
            {"role": "USER", "parts": {"text": "look"}},
            {
                "role": "user",
                "parts": [
                    {"inlineData": {"mimeType": "image/png", "data": _png(300, 200)}},
                    {"inline_data": {"mime_type": "image/png", "data": _png(1000, 800)}},
                    {"fileData": None, "file_data": {"file_uri": "gs://b/x.jpeg", "mime_type": "image/jpeg"}},
                ],
            },
            {"role": "MODEL", "parts": [{"text": "a desk"}]},
        ],
    }
    _, res = _import(tmp_path, line)
    t = res.table.to_pylist()
    assert [(r["kind"], r["content"], r["tokens"]) for r in t[2:4]] == [
        ("Image", "[image image/png 300x200]", 258),
        ("Image", "[image image/png 1000x800]", 4 * 258),
    ]
    assert [r["kind"] for r in t] == ["SystemPrompt", "Message", "Image", "Image", "Message"]
    assert dict(t[4]["metadata"])["role"] == "assistant"
    assert res.skipped == {"gemini part 'file_data'": 1}
    _, one = _import(tmp_path, {"contents": {"role": "user", "parts": {"text": "alone"}}})
    assert [r["content"] for r in one.table.to_pylist()] == ["alone"]
