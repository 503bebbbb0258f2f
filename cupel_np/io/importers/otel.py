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
extend the thread's starts another set, ``KEY#N``. Whether an input extends another is decided
on a running 64-bit hash of each message's role and content (the same in either reading mode).
"""

from __future__ import annotations

import json
import re
from array import array
from collections.abc import Iterator
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
    json_line_at,
    json_lines,
    raise_first_bad,
)
from cupel_np.io.importers.openai import conversation as openai_conversation


def _value(v) -> Any:
    """An OTLP JSON ``AnyValue`` as Python (``Bad`` for one that is not)."""
    if not isinstance(v, dict):
        return v
    try:
        if "stringValue" in v:
            return v["stringValue"]
        if "intValue" in v:
            return int(v["intValue"])
        if "doubleValue" in v:
            return float(v["doubleValue"])
        if "boolValue" in v:
            return bool(v["boolValue"])
        if "arrayValue" in v:
            return [_value(x) for x in _list((v["arrayValue"] or {}).get("values"), "arrayValue.values")]
        if "kvlistValue" in v:
            kvs = _list((v["kvlistValue"] or {}).get("values"), "kvlistValue.values")
            return {kv.get("key"): _value(kv.get("value")) for kv in kvs if isinstance(kv, dict)}
    except (TypeError, ValueError, AttributeError) as e:
        raise Bad(f"an attribute value is not an OTLP AnyValue: {v!r:.60} ({e})") from None
    return None


def _list(v, where: str) -> list:
    """``v`` when it is a list, [] for a missing one; ``Bad`` otherwise."""
    if v is None:
        return []
    if not isinstance(v, list):
        raise Bad(f"{where}: expected a list, got {type(v).__name__}")
    return v


def _obj(v, where: str) -> dict:
    if not isinstance(v, dict):
        raise Bad(f"{where}: expected an object, got {type(v).__name__}")
    return v


def _attrs(span: dict) -> dict[str, Any]:
    out = {}
    for kv in span.get("attributes") or []:
        if isinstance(kv, dict) and isinstance(kv.get("key"), str):
            try:
                out[kv["key"]] = _value(kv.get("value"))
            except Bad as e:
                raise Bad(f"attribute {kv['key']!r}: {e}") from None
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
        if "parts" not in m and ("content" in m or "tool_calls" in m):
            out.append(_openai_message(m, skipped))  # OpenAI-shaped (Laminar, OpenLLMetry)
            continue
        texts, calls, responses = [], [], []
        for p in _list(m.get("parts"), "a message's parts"):
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


def _openai_message(m: dict, skipped: dict) -> dict:
    """An OpenAI-shaped message found where GenAI messages (``parts``) were expected: its
    ``content`` (a string or text parts) as text, its ``tool_calls``, ``tool_call_id``, ``name``."""
    c = m.get("content")
    if isinstance(c, list):
        texts = []
        for p in c:
            if isinstance(p, str):
                texts.append(p)
            elif isinstance(p, dict) and isinstance(p.get("text"), str):
                texts.append(p["text"])
            else:
                count(skipped, f"otel part '{p.get('type') if isinstance(p, dict) else type(p).__name__}'")
        c = "\n".join(texts)
    elif c is not None and not isinstance(c, str):
        c = json.dumps(c, ensure_ascii=False)
    msg: dict[str, Any] = {"role": m.get("role"), "content": c or ""}
    calls = [
        {
            "id": tc.get("id"),
            "function": tc.get("function") or {"name": tc.get("name"), "arguments": tc.get("arguments")},
        }
        for tc in _list(m.get("tool_calls"), "a message's tool_calls")
        if isinstance(tc, dict)
    ]
    if calls:
        msg["tool_calls"] = calls
    for k in ("tool_call_id", "name"):
        if isinstance(m.get(k), str):
            msg[k] = m[k]
    return msg


_TL = re.compile(r"^gen_ai\.(prompt|completion)\.(\d+)\.(.+)$")


def _indexed_messages(a: dict, which: str) -> list[dict]:
    """OpenLLMetry's (Traceloop's) indexed attributes: ``gen_ai.prompt.N.role`` / ``.content`` /
    ``.tool_calls.J.{id,name,arguments}`` / ``.tool_call_id``, and ``gen_ai.completion.N...``."""
    msgs: dict[int, dict[str, Any]] = {}
    for k, v in a.items():
        m = _TL.match(k)
        if m and m.group(1) == which:
            msgs.setdefault(int(m.group(2)), {})[m.group(3)] = v
    out = []
    for i in sorted(msgs):
        d = msgs[i]
        msg: dict[str, Any] = {"role": d.get("role") or ("user" if which == "prompt" else "assistant")}
        c = d.get("content")
        msg["content"] = c if isinstance(c, str) else ("" if c is None else json.dumps(c, ensure_ascii=False))
        calls: dict[int, dict] = {}
        for k, v in d.items():
            cm = re.match(r"^tool_calls\.(\d+)\.(id|name|arguments)$", k)
            if cm:
                c2 = calls.setdefault(int(cm.group(1)), {"function": {}})
                if cm.group(2) == "id":
                    c2["id"] = v
                else:
                    c2["function"][cm.group(2)] = v
        if calls:
            msg["tool_calls"] = [calls[j] for j in sorted(calls)]
        if isinstance(d.get("tool_call_id"), str):
            msg["tool_call_id"] = d["tool_call_id"]
        out.append(msg)
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
    elif any(_TL.match(k) for k in a):
        inp, out = _indexed_messages(a, "prompt"), _indexed_messages(a, "completion")
        tools = []
        tokens = next(
            (
                a[k]
                for k in ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.usage.prompt_tokens")
                if k in a
            ),
            None,
        )
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
    for i, rs in enumerate(doc["resourceSpans"]):
        rs = _obj(rs, f"resourceSpans[{i}]")
        scopes = rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans")
        for j, ss in enumerate(_list(scopes, f"resourceSpans[{i}].scopeSpans")):
            spans = _obj(ss, f"resourceSpans[{i}].scopeSpans[{j}]").get("spans")
            out.extend(sp for sp in _list(spans, f"resourceSpans[{i}].scopeSpans[{j}].spans") if isinstance(sp, dict))
    return out


def _parts(req: dict, msgs: list, skipped: dict, kind: str) -> list[Part]:
    _, parts, _ = openai_conversation({"tools": req["tools"] or None, "messages": msgs}, skipped, kind)
    return parts


def _prefix_hashes(msgs: list[dict]) -> array:
    """``h[i]``: a hash of the first ``i`` input messages' (role, content), so that whether one
    request's input extends another's is one comparison (``h[len(other)] == other's last``);
    8 bytes a message."""
    h = array("q", [0])
    for m in msgs:
        c = m.get("content")
        key = c if isinstance(c, str) else json.dumps(c, sort_keys=True, default=str)
        h.append(hash((h[-1], str(m.get("role")), key)))
    return h


def _light(r: dict, kind: str, keep: bool) -> dict:
    """What threading a request needs: its prefix hashes and part counts (the part count of
    its input, and of input and output as two calls count them); without ``keep``, its
    messages are dropped (read again for the last request of each thread)."""
    r["hashes"] = _prefix_hashes(r["input"])
    r["n_in"] = len(_parts(r, r["input"], {}, kind))
    r["n_all"] = r["n_in"] + len(_parts(r, r["output"], {}, kind))
    if not keep:
        del r["input"], r["output"], r["tools"]
    return r


def _threads(reqs: list[dict], skipped: dict, kind: str, full) -> Iterator[Conversation]:
    """The conversations of the requests (each with ``_light`` fields); ``full(r)`` gives a
    request with its messages."""
    threads: list[tuple[str, list[dict], int, int]] = []  # (key, requests, input length, its hash)
    for r in sorted(reqs, key=lambda r: (r["key"], r["start"], r["span"])):
        h = r["hashes"]
        for i, t in enumerate(threads):
            if t[0] == r["key"] and t[2] < len(h) and h[t[2]] == t[3]:
                t[1].append(r)
                threads[i] = (t[0], t[1], len(h) - 1, h[-1])
                break
        else:
            threads.append((r["key"], [r], len(h) - 1, h[-1]))
        del r["hashes"]
    n_of: dict[str, int] = {}
    for key, rs, _, _ in threads:
        k = n_of.get(key, 0)
        n_of[key] = k + 1
        last = full(rs[-1])
        parts = _parts(last, last["input"] + last["output"], skipped, kind)
        for pt in parts:
            pt.file, pt.line = last["file"], last["line"]
        conv = Conversation(key if k == 0 else f"{key}#{k}", parts)
        seen = 0
        for r in rs:  # each message's time: the first request that had it
            ts = datetime.fromtimestamp(r["start"] / 1e9, tz=UTC) if r["start"] else None
            for pt in parts[seen : r["n_all"]]:
                pt.timestamp = ts
            seen = max(seen, r["n_all"])
            if r["tokens"] is not None:
                conv.api.append(ApiCount(r["n_in"], r["tokens"]))
            if r is not rs[-1]:
                count(skipped, "otel request repeated in a later request's input", 1)
        yield conv


def _line_requests(doc, kind: str, skipped: dict, no_messages=lambda: None) -> list[dict]:
    """The model requests of one line (an export request), in span order; ``no_messages()``
    for each span that is not one."""
    found = []
    for span in _spans(doc):
        r = _span_request(span, skipped)
        if r is None:
            no_messages()
        else:
            _parts(r, r["input"] + r["output"], {}, kind)  # a bad message is this line's
            found.append(r)
    return found


class _Reread:
    """The second pass: a request's messages read again from its line (the last line read is
    kept, since the threads ending in one export request come one after another)."""

    def __init__(self, files, kind: str):
        self.files, self.kind = files, kind
        self.cached: tuple[tuple[int, int], list[dict]] | None = None

    def __call__(self, r: dict) -> dict:
        fi, offset, idx = r["at"]
        if self.cached is None or self.cached[0] != (fi, offset):
            with self.files[fi][0].open("rb") as f:
                doc = json_line_at(f, offset)
            self.cached = ((fi, offset), _line_requests(doc, self.kind, {}))
        again = self.cached[1][idx]
        return {**r, "input": again["input"], "output": again["output"], "tools": again["tools"]}


#: local JSONL inputs larger than this are read in two passes by a streamed import: the first
#: keeps each request's threading fields (a hash per input message), the second reads the last
#: request of each thread again (docs/importing.md, "Memory")
TWO_PASS_BYTES = 32 << 20


def read(
    files: list[tuple[Path, str]], reader: Reader, *, skip_bad: bool, tool_call_kind: str, streamed: bool = False
) -> Iterator[Conversation]:
    """The conversations of ``files``. A streamed import of local JSONL files over
    ``TWO_PASS_BYTES`` keeps only each request's threading fields and reads the last request
    of each thread again; otherwise every request is held until all are read."""
    two_pass = (
        streamed
        and all(isinstance(p, Path) and p.suffix.lower() != ".json" for p, _ in files)
        and sum(p.stat().st_size for p, _ in files) > TWO_PASS_BYTES
    )
    reqs: list[dict] = []

    def no_messages() -> None:
        reader.skip("otel span without messages", metadata=True)

    for fi, (path, name) in enumerate(files):
        file_records, since = 0, len(reader.bad)
        json_doc = path.suffix.lower() == ".json"
        records = ((n, doc, 0) for n, doc in json_document(path)) if json_doc else json_lines(path, offsets=True)
        for n, doc, offset in records:
            reader.lines += 1
            file_records += 1
            local: dict[str, int] = {}
            try:
                if isinstance(doc, Bad):
                    raise doc
                found = _line_requests(doc, tool_call_kind, local, no_messages)
            except Bad as e:
                reader.bad.append(BadRecord(name, n, str(e)))
                continue
            for r_, c in local.items():
                reader.skip(r_, c)
            for idx, r in enumerate(found):
                r["file"], r["line"], r["at"] = name, n, (fi, offset, idx)
                reqs.append(_light(r, tool_call_kind, keep=not two_pass))
        check_not_all_bad("otel", name, file_records, reader.bad[since:])
        raise_first_bad(reader.bad, since, skip_bad)
    return _counted(reqs, reader, tool_call_kind, _Reread(files, tool_call_kind) if two_pass else (lambda r: r))


def _counted(reqs: list[dict], reader: Reader, kind: str, full) -> Iterator[Conversation]:
    skipped: dict[str, int] = {}
    yield from _threads(reqs, skipped, kind, full)
    for reason, c in skipped.items():
        reader.skip(reason, c, metadata="repeated" in reason)
