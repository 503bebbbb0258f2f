"""``import_to_parquet`` (what ``cupel-np import`` runs) writes conversations in chunks as it goes;
the file it writes is the one the whole-table import writes: same rows, order, types, schema
metadata, and the same counts, skips, bad lines and token checks. The chunk size is forced
small (``chunk_chars``) so every fixture is written as several chunks."""

import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cupel_np.cli import main
from cupel_np.errors import BadTranscriptError, EmptyImportError, InvalidConfigError
from cupel_np.io.importers import claude_code, import_to_parquet, import_transcripts, jsonread, messages, otel

CLAUDE_DIRS = [
    "data/transcripts/claude_code",
    "data/transcripts/claude_code_resumed",
    "data/transcripts/claude_code_rewind",
]
MESSAGES_MAP = "content=text,kind=speaker,set=thread,timestamp=sent_at,source=channel"

FIXTURES = [
    ("claude-code", "data/transcripts/claude_code", {}),
    ("claude-code", "data/transcripts/claude_code_resumed", {"calibrate": True}),
    ("claude-code", "data/transcripts/claude_code_rewind", {}),
    ("claude-code", "data/transcripts/claude_code_rewind", {"keep_rewound": True}),
    ("stream-json", "data/transcripts/stream_json.jsonl", {}),
    ("openai", "data/transcripts/openai_chat.jsonl", {"tool_call_kind": "ToolUse"}),
    ("auto", "data/transcripts/anthropic.jsonl", {}),
    ("codex", "data/transcripts/codex", {}),
    ("sharegpt", "data/transcripts/sharegpt.json", {}),
    ("llama-factory", "data/transcripts/llama_factory_v1.jsonl", {}),
    ("swe-agent", "data/transcripts/trajectories/demo__dates-7.traj", {}),
    ("mini-swe-agent", "data/transcripts/trajectories/demo-math.traj.json", {}),
    ("auto", "data/transcripts/trajectories", {}),
    ("otel", "data/transcripts/otel", {}),
    ("messages", "data/transcripts/messages.csv", {"mapping": MESSAGES_MAP, "set_column": "thread_id"}),
    ("claude-code", CLAUDE_DIRS, {"tokenizer": "chars4"}),
]


def _whole(fmt, path, out, **kw):
    res = import_transcripts(fmt, path, **kw)
    res.write_parquet(out)
    return res


def _same(whole, streamed, a, b):
    ta, tb = pq.read_table(a), pq.read_table(b)
    assert tb.schema.equals(ta.schema, check_metadata=True)
    assert tb.equals(ta)
    assert pq.read_schema(b).metadata == pq.read_schema(a).metadata
    assert streamed.table is None and streamed.written == (whole.items, whole.conversations)
    assert (streamed.items, streamed.conversations) == (whole.items, whole.conversations)
    assert streamed.summary() == whole.summary()
    assert streamed.metadata_reasons == whole.metadata_reasons


@pytest.mark.parametrize("fmt,path,kw", FIXTURES)
def test_streamed_file_is_the_whole_table_file(tmp_path, fmt, path, kw):
    a, b = tmp_path / "whole.parquet", tmp_path / "streamed.parquet"
    whole = _whole(fmt, path, a, **kw)
    streamed = import_to_parquet(fmt, path, b, chunk_chars=1, **kw)  # a chunk per conversation
    assert whole.items > 0
    _same(whole, streamed, a, b)
    assert streamed.out == b
    if whole.conversations > 1:  # several chunks were written: one row group each
        assert pq.ParquetFile(b).metadata.num_row_groups >= 2
    assert sorted(os.listdir(tmp_path)) == ["streamed.parquet", "whole.parquet"]  # no temp file left


@pytest.mark.parametrize("fmt,path,kw", FIXTURES)
def test_bounded_readers_write_the_whole_table_file(tmp_path, monkeypatch, fmt, path, kw):
    """Every size threshold forced to 0: ``.json`` arrays read one element at a time (in reads
    of 7 bytes), messages spilled to runs of a few rows, Claude Code and OTel JSONL in two
    passes; the file is still the whole-table import's."""
    a, b = tmp_path / "whole.parquet", tmp_path / "bounded.parquet"
    whole = _whole(fmt, path, a, **kw)
    monkeypatch.setattr(jsonread, "JSON_STREAM_BYTES", 0)
    monkeypatch.setattr(jsonread, "JSON_READ_BYTES", 7)
    monkeypatch.setattr(messages, "SPILL_BYTES", 0)
    monkeypatch.setattr(messages, "SPILL_RUN_CHARS", 200)
    monkeypatch.setattr(claude_code, "STREAM_TWO_PASS_BYTES", 0)
    monkeypatch.setattr(otel, "TWO_PASS_BYTES", 0)
    _same(whole, import_to_parquet(fmt, path, b, chunk_chars=1, **kw), a, b)


@pytest.mark.parametrize("chunk_chars", [1, 300, 5000, 1 << 30])
def test_any_chunk_size_writes_the_same_file(tmp_path, monkeypatch, chunk_chars):
    """Claude Code in both reading modes (one pass, and the record index + second pass)."""
    a = tmp_path / "whole.parquet"
    whole = _whole("claude-code", CLAUDE_DIRS, a)
    reads = []
    real = claude_code.json_line_at
    monkeypatch.setattr(claude_code, "json_line_at", lambda f, offset: reads.append(offset) or real(f, offset))
    for two_pass in (False, True):
        # the streamed import has its own (lower) threshold; the whole-table one's is not used
        monkeypatch.setattr(claude_code, "STREAM_TWO_PASS_BYTES", 0 if two_pass else 1 << 40)
        monkeypatch.setattr(claude_code, "TWO_PASS_BYTES", 1 << 40 if two_pass else 0)
        b = tmp_path / f"s{two_pass}.parquet"
        reads.clear()
        _same(whole, import_to_parquet("claude-code", CLAUDE_DIRS, b, chunk_chars=chunk_chars), a, b)
        assert (len(reads) > 0) == two_pass  # the second pass re-reads records at their offsets


def test_bad_lines_surrogates_and_extra_columns_stream_alike(tmp_path):
    lines = [
        json.dumps({"id": "c1", "messages": [{"role": "user", "content": "first \ud800 broken"}]}),
        "{not json",
        json.dumps(
            {"id": "c2", "messages": [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}]}
        ),
        json.dumps({"id": "c3", "messages": [{"role": "user", "content": "x" * 50}], "usage": {"prompt_tokens": 20}}),
    ]
    src = tmp_path / "chats.jsonl"
    src.write_text("\n".join(lines) + "\n")
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    whole = _whole("openai", src, a, skip_bad=True)
    assert whole.skipped and len(whole.bad) == 1
    _same(whole, import_to_parquet("openai", src, b, skip_bad=True, chunk_chars=1), a, b)

    rows = [
        {"text": "a", "conv": "s1", "label": True, "score": 0.5},
        {"text": "b", "conv": "s2", "label": False, "score": 1},
        {"text": "c", "conv": "s1", "label": None, "score": "high"},  # mixed: strings
    ]
    msgs = tmp_path / "msgs.jsonl"
    msgs.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    a2, b2 = tmp_path / "a2.parquet", tmp_path / "b2.parquet"
    whole = _whole("messages", msgs, a2, mapping="content=text,set=conv")
    assert {"label", "score"} <= set(pq.read_schema(a2).names)
    _same(whole, import_to_parquet("messages", msgs, b2, mapping="content=text,set=conv", chunk_chars=1), a2, b2)


def test_a_failed_streamed_import_leaves_no_file(tmp_path):
    good = json.dumps({"id": "c1", "messages": [{"role": "user", "content": "hello"}]})
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.jsonl").write_text((good + "\n") * 3)
    (tmp_path / "in" / "b.jsonl").write_text(good + "\n{not json\n")
    out = tmp_path / "out" / "items.parquet"
    with pytest.raises(BadTranscriptError, match="b.jsonl:2"):  # after a.jsonl's chunks were written
        import_to_parquet("openai", tmp_path / "in", out, chunk_chars=1)
    assert not out.parent.exists() or os.listdir(out.parent) == []
    empty = tmp_path / "empty.jsonl"
    empty.write_text(json.dumps({"id": "c", "messages": [{"role": "user", "content": "  "}]}) + "\n")
    with pytest.raises(EmptyImportError):
        import_to_parquet("openai", empty, out)
    assert not out.parent.exists() or os.listdir(out.parent) == []
    res = import_to_parquet("openai", empty, out, allow_empty=True)  # an empty file, with the schema
    assert res.items == 0 and pq.read_table(out).num_rows == 0
    assert pq.read_schema(out).equals(import_transcripts("openai", empty, allow_empty=True).table.schema)


def test_streamed_result_refuses_to_write_again_and_bad_arguments(tmp_path):
    res = import_to_parquet("openai", "data/transcripts/openai_chat.jsonl", tmp_path / "o.parquet")
    with pytest.raises(InvalidConfigError, match="streamed"):
        res.write_parquet(tmp_path / "again.parquet")
    with pytest.raises(IsADirectoryError):
        import_to_parquet("openai", "data/transcripts/openai_chat.jsonl", tmp_path)
    with pytest.raises(InvalidConfigError, match="chunk_chars"):
        import_to_parquet("openai", "data/transcripts/openai_chat.jsonl", tmp_path / "x.parquet", chunk_chars=0)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o.parquet"]


def test_cli_import_writes_the_whole_table_file(tmp_path, capsys):
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    whole = _whole("claude-code", "data/transcripts/claude_code", a, calibrate=True)
    assert (
        main(["import", "claude-code", "data/transcripts/claude_code", "--out", str(b), "--calibrate", "--json"]) == 0
    )
    printed = json.loads(capsys.readouterr().out)
    assert pq.read_table(b).equals(pq.read_table(a))
    assert pq.read_table(b).schema.equals(pa.ipc.read_schema(pa.py_buffer(whole.table.schema.serialize())))
    assert printed["items"] == whole.items and printed["out"] == str(b)
    assert main(["import", "claude-code", "data/transcripts/claude_code", "--out", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err


def _kv(key, v):
    return {"key": key, "value": {"intValue": str(v)} if isinstance(v, int) else {"stringValue": v}}


def _otel_span(sid, start, attrs):
    return {
        "traceId": "t",
        "spanId": sid,
        "startTimeUnixNano": str(start),
        "attributes": [_kv(k, v) for k, v in attrs.items()],
    }


def _otel_file(path):
    """Threads of growing GenAI requests over several lines, spans of different threads in one
    line, out of time order; a fork (an input that does not extend its thread's), OpenInference
    spans, a span without messages, a bad line."""

    def msg(role, text):
        return {"role": role, "parts": [{"type": "text", "content": text}]}

    def genai(conv, inputs, output, tokens):
        return {
            "gen_ai.conversation.id": conv,
            "gen_ai.input.messages": json.dumps(inputs),
            "gen_ai.output.messages": json.dumps([output]),
            "gen_ai.tool.definitions": json.dumps([{"type": "function", "name": "look", "parameters": {}}]),
            "gen_ai.usage.input_tokens": tokens,
        }

    lines, t0 = [], 1_700_000_000_000_000_000
    history = {c: [msg("user", f"question for {c}")] for c in ("a", "b", "c")}
    for step in range(4):
        spans = []
        for c in ("c", "a", "b"):
            out = msg("assistant", f"answer {step} in {c} " + "words " * step)
            spans.append(_otel_span(f"{c}{step}", t0 + step * 10**9, genai(c, history[c], out, 40 + 30 * step)))
            history[c] = [*history[c], out, msg("user", f"follow-up {step}")]
        if step == 2:
            fork = [msg("user", "question for a, edited")]
            spans.append(_otel_span("fork", t0 + 5, genai("a", fork, msg("assistant", "other"), 12)))
            spans.append(_otel_span("http", t0, {"http.method": "GET"}))
        lines.append({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]})
    oi = {
        "session.id": "oi",
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.content": "Count the users.",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": "42.",
        "llm.token_count.prompt": 9,
    }
    lines.insert(1, {"resourceSpans": [{"scopeSpans": [{"spans": [_otel_span("oi", t0, oi)]}]}]})
    path.write_text("\n".join(json.dumps(x) for x in reversed(lines)) + "\n{not json\n")


def test_otel_two_passes_stream_the_same_file(tmp_path, monkeypatch):
    from cupel_np.io.importers import otel

    src = tmp_path / "spans.jsonl"
    _otel_file(src)
    a = tmp_path / "whole.parquet"
    whole = _whole("otel", src, a, skip_bad=True)
    assert whole.conversations == 5 and len(whole.bad) == 1 and whole.skipped["otel span without messages"] == 1
    assert {k for k in pq.read_table(a).column("conversation_id").to_pylist()} == {"a", "a#1", "b", "c", "oi"}
    reads = []
    real = otel.json_line_at
    monkeypatch.setattr(otel, "json_line_at", lambda f, offset: reads.append(offset) or real(f, offset))
    for two_pass in (False, True):
        monkeypatch.setattr(otel, "TWO_PASS_BYTES", 0 if two_pass else 1 << 40)
        b = tmp_path / f"s{two_pass}.parquet"
        reads.clear()
        _same(whole, import_to_parquet("otel", src, b, skip_bad=True, chunk_chars=1), a, b)
        assert (len(reads) > 0) == two_pass
