"""OpenAI-shaped conversations read whole (tools schemas, tool_call_ids, multi-part content,
refusals, names, usage), the tool-pair columns, and the token estimate against a literal
transcription of its rule."""

import json
import math
import random
import re

import pytest

from cupel_np.io.importers import estimate_tokens, estimate_tokens_many, import_transcripts

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
