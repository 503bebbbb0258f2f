"""OpenTelemetry GenAI spans from OTLP JSON files (the collector's file exporter: one
``{"resourceSpans": [...]}`` export request a line, or one such document).

A span is a model request when it carries its messages, in either attribute style:

* GenAI semantic conventions: ``gen_ai.input.messages`` / ``gen_ai.output.messages`` (JSON
  lists of ``{"role", "parts": [{"type": "text", "content"}, {"type": "tool_call", "id",
  "name", "arguments"}, {"type": "tool_call_response", "id", "response"}, ...]}``),
  ``gen_ai.system_instructions``, ``gen_ai.tool.definitions``, ``gen_ai.usage.input_tokens``,
  ``gen_ai.conversation.id``;
* OpenInference: ``llm.input_messages.N.message.role`` / ``.content`` /
  ``.contents.M.message_content.text`` / ``.tool_calls.M.tool_call.{id,function.name,
  function.arguments}`` / ``.tool_call_id`` / ``.name``, ``llm.output_messages.N...``,
  ``llm.tools.N.tool.json_schema``, ``llm.token_count.prompt``, ``session.id``.

Spans group into conversations by ``gen_ai.conversation.id`` / ``session.id``, else their
trace. Within one, requests in time order whose inputs extend the previous request's input
form one thread: its set is the last request's context (input and output); each request's
input token count is an API count at the point its input ends. A request whose input does not
extend the thread's starts another set, ``KEY#N``.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cupel_np.io.importers.core import (
    ApiCount,
    Bad,
    BadRecord,
    Conversation,
    Part,
    Reader,
    check_not_all_bad,
    count,
    json_document,
    json_lines,
    raise_first_bad,
)
from cupel_np.io.importers.openai import conversation as openai_conversation


def _value(v) -> Any:
    """An OTLP JSON ``AnyValue`` as Python."""
    if not isinstance(v, dict):
        return v
    if "stringValue" in v:
        return v["stringValue"]
    if "intValue" in v:
        return int(v["intValue"])
    if "doubleValue" in v:
        return float(v["doubleValue"])
    if "boolValue" in v:
        return bool(v["boolValue"])
    if "arrayValue" in v:
        return [_value(x) for x in (v["arrayValue"] or {}).get("values", [])]
    if "kvlistValue" in v:
        return {kv.get("key"): _value(kv.get("value")) for kv in (v["kvlistValue"] or {}).get("values", [])}
    return None


def _attrs(span: dict) -> dict[str, Any]:
    out = {}
    for kv in span.get("attributes") or []:
        if isinstance(kv, dict) and isinstance(kv.get("key"), str):
            out[kv["key"]] = _value(kv.get("value"))
    return out


def _json_attr(a: dict, key: str, where: str):
    v = a.get(key)
    if isinstance(v, str):
        try:
            return json.loads(v)
        except json.JSONDecodeError:
            raise Bad(f"{where}: attribute {key!r} is not JSON") from None
    return v


def _genai_messages(msgs, skipped: dict) -> list[dict]:
    """GenAI semconv messages -> OpenAI-shaped messages (tool responses as tool messages)."""
    out: list[dict] = []
    for m in msgs or []:
        if not isinstance(m, dict):
            continue
        texts, calls, responses = [], [], []
        for p in m.get("parts") or []:
            t = p.get("type") if isinstance(p, dict) else None
            if t == "text" and isinstance(p.get("content"), str):
                texts.append(p["content"])
            elif t == "tool_call":
                calls.append(
                    {"id": p.get("id"), "function": {"name": p.get("name"), "arguments": p.get("arguments", {})}}
                )
            elif t == "tool_call_response":
                resp = p.get("response")
                text = resp if isinstance(resp, str) else json.dumps(resp, ensure_ascii=False)
                responses.append({"role": "tool", "tool_call_id": p.get("id"), "content": text})
            else:
                count(skipped, f"otel part '{t}'")
        if texts or calls:
            msg: dict[str, Any] = {"role": m.get("role"), "content": "\n".join(texts)}
            if calls:
                msg["tool_calls"] = calls
            out.append(msg)
        out.extend(responses)
    return out


_OI = re.compile(r"^llm\.(input|output)_messages\.(\d+)\.message\.(.+)$")


def _openinference_messages(a: dict, which: str) -> list[dict]:
    msgs: dict[int, dict[str, Any]] = {}
    for k, v in a.items():
        m = _OI.match(k)
        if not m or m.group(1) != which:
            continue
        d = msgs.setdefault(int(m.group(2)), {})
        d[m.group(3)] = v
    out = []
    for i in sorted(msgs):
        d = msgs[i]
        msg: dict[str, Any] = {"role": d.get("role")}
        text = d.get("content")
        if text is None:
            parts = sorted(
                (k, v) for k, v in d.items() if k.startswith("contents.") and k.endswith("message_content.text")
            )
            text = "\n".join(str(v) for _, v in parts)
        msg["content"] = text or ""
        calls: dict[int, dict] = {}
        for k, v in d.items():
            cm = re.match(r"^tool_calls\.(\d+)\.tool_call\.(.+)$", k)
            if cm:
                c = calls.setdefault(int(cm.group(1)), {"function": {}})
                if cm.group(2) == "id":
                    c["id"] = v
                elif cm.group(2).startswith("function."):
                    c["function"][cm.group(2)[9:]] = v
        if calls:
            msg["tool_calls"] = [calls[j] for j in sorted(calls)]
        if "tool_call_id" in d:
            msg["tool_call_id"] = d["tool_call_id"]
        if isinstance(d.get("name"), str):
            msg["name"] = d["name"]
        out.append(msg)
    return out


def _tools(a: dict, genai) -> list:
    if genai is not None:
        return genai if isinstance(genai, list) else []
    tools = []
    for k in sorted(
        (k for k in a if re.match(r"^llm\.tools\.\d+\.tool\.json_schema$", k)), key=lambda k: int(k.split(".")[2])
    ):
        v = a[k]
        try:
            tools.append(json.loads(v) if isinstance(v, str) else v)
        except json.JSONDecodeError:
            tools.append({"json_schema": v})
    return tools


def _span_request(span: dict, skipped: dict) -> dict | None:
    """(conversation key, start, input messages, output messages, tools, input tokens)."""
    a = _attrs(span)
    gi = _json_attr(a, "gen_ai.input.messages", "span")
    go = _json_attr(a, "gen_ai.output.messages", "span")
    if gi is not None or go is not None:
        inp = _genai_messages(gi, skipped)
        sysi = _json_attr(a, "gen_ai.system_instructions", "span")
        if isinstance(sysi, list):
            texts = [str(p["content"]) for p in sysi if isinstance(p, dict) and isinstance(p.get("content"), str)]
            if texts:
                inp.insert(0, {"role": "system", "content": "\n".join(texts)})
        out = _genai_messages(go, skipped)
        tools = _tools(a, _json_attr(a, "gen_ai.tool.definitions", "span"))
        tokens = a.get("gen_ai.usage.input_tokens")
    elif any(k.startswith("llm.input_messages.") or k.startswith("llm.output_messages.") for k in a):
        inp, out = _openinference_messages(a, "input"), _openinference_messages(a, "output")
        tools = _tools(a, None)
        tokens = a.get("llm.token_count.prompt")
    else:
        return None
    key = a.get("gen_ai.conversation.id") or a.get("session.id") or span.get("traceId") or "trace"
    start = span.get("startTimeUnixNano")
    return {
        "key": str(key),
        "start": int(start) if start not in (None, "") else 0,
        "span": str(span.get("spanId", "")),
        "input": inp,
        "output": out,
        "tools": tools,
        "tokens": tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else None,
    }


def _spans(doc) -> list[dict]:
    if not isinstance(doc, dict) or not isinstance(doc.get("resourceSpans"), list):
        raise Bad("expected an OTLP JSON export request with 'resourceSpans'")
    out: list[dict] = []
    for rs in doc["resourceSpans"]:
        for ss in (rs or {}).get("scopeSpans") or (rs or {}).get("instrumentationLibrarySpans") or []:
            out.extend(s for s in (ss or {}).get("spans") or [] if isinstance(s, dict))
    return out


def _parts(req: dict, msgs: list, skipped: dict, kind: str) -> list[Part]:
    _, parts, _ = openai_conversation({"tools": req["tools"] or None, "messages": msgs}, skipped, kind)
    return parts


def _threads(reqs: list[dict], skipped: dict, kind: str) -> list[Conversation]:
    threads: list[tuple[str, list[dict], list[tuple]]] = []  # (key, requests, input signature)
    for r in sorted(reqs, key=lambda r: (r["key"], r["start"], r["span"])):
        sig = [(m.get("role"), m.get("content")) for m in r["input"]]
        for t in threads:
            if t[0] == r["key"] and sig[: len(t[2])] == t[2]:
                t[1].append(r)
                threads[threads.index(t)] = (t[0], t[1], sig)
                break
        else:
            threads.append((r["key"], [r], sig))
    convs = []
    n_of: dict[str, int] = {}
    for key, rs, _ in threads:
        k = n_of.get(key, 0)
        n_of[key] = k + 1
        last = rs[-1]
        parts = _parts(last, last["input"] + last["output"], skipped, kind)
        for pt in parts:
            pt.file, pt.line = last["file"], last["line"]
        conv = Conversation(key if k == 0 else f"{key}#{k}", parts)
        seen = 0
        for r in rs:  # each message's time: the first request that had it
            n_in = len(_parts(r, r["input"], {}, kind))
            n_all = n_in + len(_parts(r, r["output"], {}, kind))
            ts = datetime.fromtimestamp(r["start"] / 1e9, tz=UTC) if r["start"] else None
            for pt in parts[seen:n_all]:
                pt.timestamp = ts
            seen = max(seen, n_all)
            if r["tokens"] is not None:
                conv.api.append(ApiCount(n_in, r["tokens"]))
            if r is not last:
                count(skipped, "otel request repeated in a later request's input", 1)
        convs.append(conv)
    return convs


def read(files: list[tuple[Path, str]], reader: Reader, *, skip_bad: bool, tool_call_kind: str) -> list[Conversation]:
    reqs: list[dict] = []
    for path, name in files:
        file_records, since = 0, len(reader.bad)
        records = json_document(path) if path.suffix.lower() == ".json" else json_lines(path)
        for n, doc in records:
            reader.lines += 1
            file_records += 1
            local: dict[str, int] = {}
            try:
                if isinstance(doc, Bad):
                    raise doc
                found = []
                for span in _spans(doc):
                    r = _span_request(span, local)
                    if r is None:
                        reader.skip("otel span without messages", metadata=True)
                    else:
                        _parts(r, r["input"] + r["output"], {}, tool_call_kind)  # a bad message is this line's
                        r["file"], r["line"] = name, n
                        found.append(r)
            except Bad as e:
                reader.bad.append(BadRecord(name, n, str(e)))
                continue
            for r_, c in local.items():
                reader.skip(r_, c)
            reqs.extend(found)
        check_not_all_bad("otel", name, file_records, reader.bad[since:])
        raise_first_bad(reader.bad, since, skip_bad)
    skipped: dict[str, int] = {}
    convs = _threads(reqs, skipped, tool_call_kind)
    for reason, c in skipped.items():
        reader.skip(reason, c, metadata="repeated" in reason)
    return convs
