"""ShareGPT, LLaMA-Factory v1, SWE-agent and mini-swe-agent trajectories, OTLP GenAI spans in
both attribute styles, and message tables with extra columns: items, kinds, links, tokens."""

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cupel_np.io.importers import EmptyImportError, estimate_tokens, import_transcripts


def rows(res):
    return res.table.to_pylist()


def md(r):
    return dict(r["metadata"])


def tokens_are_estimates(res):
    return all(r["tokens"] == estimate_tokens(r["content"]) for r in rows(res))


def test_sharegpt_array_with_function_call(tmp_path):
    data = [
        {
            "id": "sg-1",
            "system": "You are a weather bot.",
            "tools": json.dumps([{"name": "get_weather", "parameters": {"type": "object"}}]),
            "conversations": [
                {"from": "human", "value": "Weather in Oslo?"},
                {"from": "function_call", "value": json.dumps({"name": "get_weather", "arguments": {"city": "Oslo"}})},
                {"from": "observation", "value": "-3C, snow"},
                {"from": "gpt", "value": "It is -3C and snowing in Oslo."},
            ],
        },
        {"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": ""}]},
    ]
    p = tmp_path / "sg.json"
    p.write_text(json.dumps(data))
    res = import_transcripts("auto", p)
    assert res.format == "sharegpt"
    t = rows(res)
    assert [(r["conversation_id"], r["kind"]) for r in t] == [
        ("sg-1", "ToolSchema"),
        ("sg-1", "SystemPrompt"),
        ("sg-1", "Message"),
        ("sg-1", "ToolCall"),
        ("sg-1", "ToolOutput"),
        ("sg-1", "Message"),
        ("sg:1", "Message"),
    ]
    assert t[3]["content"] == 'get_weather({"city": "Oslo"})'
    assert (t[3]["tool_role"], t[4]["tool_role"]) == ("call", "result")
    assert t[3]["tool_call_id"] == t[4]["tool_call_id"] == "#1.0"
    assert t[3]["tool_group"] == t[4]["tool_group"] == "sg-1:#1.0" and md(t[4])["tool_name"] == "get_weather"
    assert res.skipped == {"empty content": 1} and tokens_are_estimates(res)
    assert md(t[6])["row"] == "1"


def test_llama_factory_v1_parts(tmp_path):
    lines = [
        {
            "messages": [
                {"role": "user", "content": [{"type": "text", "value": "List /srv"}]},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "reasoning", "value": "use the shell"},
                        {"type": "tool_call", "value": json.dumps({"name": "shell", "arguments": {"cmd": "ls /srv"}})},
                    ],
                },
                {"role": "tool", "content": [{"type": "text", "value": "www\nbackups"}]},
                {"role": "assistant", "content": [{"type": "text", "value": "Two directories: www and backups."}]},
            ]
        }
    ]
    p = tmp_path / "v1.jsonl"
    p.write_text("".join(json.dumps(x) + "\n" for x in lines))
    res = import_transcripts("auto", p)
    assert res.format == "llama-factory" and res.items == 4  # the file that once imported as 0 items
    t = rows(res)
    assert [r["kind"] for r in t] == ["Message", "ToolCall", "ToolOutput", "Message"]
    assert t[1]["tool_group"] == t[2]["tool_group"] == "v1:1:#1.0"
    assert res.skipped == {"llama-factory part 'reasoning'": 1} and tokens_are_estimates(res)


def test_swe_agent_traj_with_tool_call_ids(tmp_path):
    traj = {
        "trajectory": [{"action": "ls", "observation": "setup.py", "thought": "look"}],
        "history": [
            {
                "role": "system",
                "content": "You are an autonomous programmer.",
                "agent": "main",
                "message_type": "system_prompt",
            },
            {"role": "user", "content": [{"type": "text", "text": "Fix issue 12."}], "message_type": "observation"},
            {
                "role": "assistant",
                "content": "Let me look around.",
                "thought": "Let me look around.",
                "action": "ls",
                "message_type": "action",
                "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}
                ],
            },
            {
                "role": "tool",
                "content": [{"type": "text", "text": "setup.py\nsrc"}],
                "tool_call_ids": ["call_1"],
                "message_type": "observation",
            },
            {"role": "assistant", "content": "Done.", "message_type": "action"},
        ],
        "info": {"exit_status": "submitted"},
    }
    p = tmp_path / "repo__issue-12.traj"
    p.write_text(json.dumps(traj))
    res = import_transcripts("auto", p)
    assert res.format == "swe-agent"
    t = rows(res)
    assert {r["conversation_id"] for r in t} == {"repo__issue-12"}
    assert [r["kind"] for r in t] == ["SystemPrompt", "Message", "Message", "ToolCall", "ToolOutput", "Message"]
    assert t[3]["tool_call_id"] == t[4]["tool_call_id"] == "call_1" and md(t[4])["tool_name"] == "bash"
    assert t[3]["tool_group"] == t[4]["tool_group"] == "repo__issue-12:call_1" and tokens_are_estimates(res)


def test_mini_swe_agent_observations_answer_the_action(tmp_path):
    doc = {
        "info": {"exit_status": "Submitted"},
        "trajectory_format": "mini-swe-agent-1.1",
        "messages": [
            {"role": "system", "content": "You can run bash."},
            {"role": "user", "content": "Please solve this issue: tests fail"},
            {"role": "assistant", "content": "THOUGHT: run them.\n\n```bash\npytest -q\n```"},
            {"role": "user", "content": "<returncode>1</returncode>\n<output>\n1 failed\n</output>"},
            {
                "role": "assistant",
                "content": "THOUGHT: done.\n\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```",
            },
            {"role": "exit", "content": "", "extra": {"exit_status": "Submitted"}},
        ],
    }
    p = tmp_path / "task-9.traj.json"
    p.write_text(json.dumps(doc))
    res = import_transcripts("auto", p)
    assert res.format == "mini-swe-agent"
    t = rows(res)
    assert [r["kind"] for r in t] == ["SystemPrompt", "Message", "Message", "ToolOutput", "Message"]
    assert (t[2]["tool_role"], t[3]["tool_role"]) == ("call", "result")
    assert t[2]["tool_call_id"] == t[3]["tool_call_id"] == "#2" and t[2]["tool_group"] == "task-9:#2"
    assert t[3]["source"] == "Tool" and t[4]["tool_role"] is None
    assert res.skipped == {"trajectory 'exit' message": 1} and tokens_are_estimates(res)


def _otlp(spans):
    return {
        "resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"scope": {"name": "t"}, "spans": spans}]}]
    }


def _kv(key, v):
    if isinstance(v, bool):
        return {"key": key, "value": {"boolValue": v}}
    if isinstance(v, int):
        return {"key": key, "value": {"intValue": str(v)}}
    return {"key": key, "value": {"stringValue": v}}


def _span(span_id, start, attrs):
    return {
        "traceId": "t1",
        "spanId": span_id,
        "name": "chat",
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(start + 1000),
        "attributes": [_kv(k, v) for k, v in attrs.items()],
    }


def test_otel_genai_semconv_spans(tmp_path):
    q = {"role": "user", "parts": [{"type": "text", "content": "Weather in Paris?"}]}
    call = {
        "role": "assistant",
        "parts": [{"type": "tool_call", "id": "call_w", "name": "get_weather", "arguments": {"city": "Paris"}}],
    }
    resp = {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_w", "response": "rainy, 14C"}]}
    ans = {"role": "assistant", "parts": [{"type": "text", "content": "Rainy, 14C."}], "finish_reason": "stop"}
    tools = [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}]
    s1 = _span(
        "a1",
        1_700_000_000_000_000_000,
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.conversation.id": "conv-p",
            "gen_ai.system_instructions": json.dumps([{"type": "text", "content": "Be brief."}]),
            "gen_ai.input.messages": json.dumps([q]),
            "gen_ai.output.messages": json.dumps([call]),
            "gen_ai.tool.definitions": json.dumps(tools),
            "gen_ai.usage.input_tokens": 60,
        },
    )
    s2_attrs = dict(_kv_dict(s1))
    s2_attrs.update(
        {
            "gen_ai.input.messages": json.dumps([q, call, resp]),
            "gen_ai.output.messages": json.dumps([ans]),
            "gen_ai.usage.input_tokens": 95,
        }
    )
    s2 = _span("a2", 1_700_000_001_000_000_000, s2_attrs)
    other = _span("x", 1_700_000_000_500_000_000, {"http.method": "GET"})
    p = tmp_path / "traces.jsonl"
    p.write_text(json.dumps(_otlp([s1, other])) + "\n" + json.dumps(_otlp([s2])) + "\n")
    res = import_transcripts("auto", p)
    assert res.format == "otel"
    t = rows(res)
    assert [r["kind"] for r in t] == ["ToolSchema", "SystemPrompt", "Message", "ToolCall", "ToolOutput", "Message"]
    assert {r["conversation_id"] for r in t} == {"conv-p"}
    assert t[3]["tool_group"] == t[4]["tool_group"] == "conv-p:call_w" and md(t[4])["tool_name"] == "get_weather"
    assert t[2]["timestamp"].timestamp() == 1_700_000_000 and t[5]["timestamp"].timestamp() == 1_700_000_001
    (chk,) = res.tokens
    assert chk["requests"] == 2 and chk["api"] == 95 and chk["estimate"] == sum(r["tokens"] for r in t[:5])
    assert res.skipped["otel span without messages"] == 1 and tokens_are_estimates(res)


def _kv_dict(span):
    out = {}
    for kv in span["attributes"]:
        v = kv["value"]
        out[kv["key"]] = int(v["intValue"]) if "intValue" in v else v.get("stringValue", v.get("boolValue"))
    return out


def test_otel_openinference_spans(tmp_path):
    a = {
        "openinference.span.kind": "LLM",
        "session.id": "sess-oi",
        "llm.input_messages.0.message.role": "system",
        "llm.input_messages.0.message.content": "You answer with SQL.",
        "llm.input_messages.1.message.role": "user",
        "llm.input_messages.1.message.contents.0.message_content.type": "text",
        "llm.input_messages.1.message.contents.0.message_content.text": "Count the users.",
        "llm.input_messages.2.message.role": "assistant",
        "llm.input_messages.2.message.tool_calls.0.tool_call.id": "c9",
        "llm.input_messages.2.message.tool_calls.0.tool_call.function.name": "run_sql",
        "llm.input_messages.2.message.tool_calls.0.tool_call.function.arguments": '{"q": "select count(*) from users"}',
        "llm.input_messages.3.message.role": "tool",
        "llm.input_messages.3.message.tool_call_id": "c9",
        "llm.input_messages.3.message.content": "42",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": "There are 42 users.",
        "llm.tools.0.tool.json_schema": json.dumps({"type": "function", "function": {"name": "run_sql"}}),
        "llm.token_count.prompt": 88,
    }
    p = tmp_path / "oi.json"
    p.write_text(json.dumps(_otlp([_span("s", 1_700_000_000_000_000_000, a)])))
    res = import_transcripts("otel", p)
    t = rows(res)
    assert [r["kind"] for r in t] == ["ToolSchema", "SystemPrompt", "Message", "ToolCall", "ToolOutput", "Message"]
    assert {r["conversation_id"] for r in t} == {"sess-oi"}
    assert t[3]["content"] == 'run_sql({"q": "select count(*) from users"})'
    assert t[3]["tool_group"] == t[4]["tool_group"] == "sess-oi:c9" and md(t[4])["tool_name"] == "run_sql"
    (chk,) = res.tokens
    assert chk["requests"] == 1 and chk["api"] == 88 and tokens_are_estimates(res)


def test_messages_keep_extra_columns_and_read_tsv(tmp_path):
    p = tmp_path / "m.tsv"
    p.write_text("conv\trole\ttext\tlabel\tscore\nA\tuser\thello there\trelevant\t0.9\nA\tassistant\thi\t\t0.1\n")
    res = import_transcripts("auto", p, mapping="content=text,set=conv")
    t = res.table
    assert t.column_names[-2:] == ["label", "score"] and t["label"].to_pylist() == ["relevant", ""]
    assert t.schema.field("score").type == pa.string()  # as read: CSV/TSV values are strings
    j = tmp_path / "m.jsonl"
    j.write_text(
        json.dumps({"content": "a", "label": True, "score": 0.5, "n": 3})
        + "\n"
        + json.dumps({"content": "b", "label": None, "score": 1, "n": 4})
        + "\n"
    )
    tj = import_transcripts("messages", j).table
    assert tj.schema.field("label").type == pa.bool_() and tj["score"].to_pylist() == [0.5, 1.0]
    assert tj.schema.field("n").type == pa.int64()
    pq.write_table(pa.table({"content": ["x"], "relevance": pa.array([0.25], pa.float32())}), tmp_path / "m.parquet")
    tp = import_transcripts("messages", tmp_path / "m.parquet").table
    assert tp.schema.field("relevance").type == pa.float32()


def test_auto_refuses_unknown_and_mixed(tmp_path):
    (tmp_path / "x.jsonl").write_text(json.dumps({"hello": 1}) + "\n")
    with pytest.raises(Exception, match="cannot tell its transcript format"):
        import_transcripts("auto", tmp_path / "x.jsonl")
    (tmp_path / "x.jsonl").write_text(json.dumps({"messages": [{"role": "user", "content": "a"}]}) + "\n")
    (tmp_path / "y.jsonl").write_text(json.dumps({"type": "summary", "sessionId": "s"}) + "\n")
    with pytest.raises(Exception, match="more than one format"):
        import_transcripts("auto", tmp_path)


def test_v1_file_read_as_openai_is_not_a_silent_success(tmp_path):
    p = tmp_path / "v1.jsonl"
    p.write_text(
        json.dumps({"messages": [{"role": "assistant", "content": [{"type": "tool_call", "value": "{}"}]}]}) + "\n"
    )
    with pytest.raises(EmptyImportError, match="0 items"):
        import_transcripts("openai", p)
