"""OpenAI chat-completions conversations (fine-tuning / batch JSONL, one conversation a line).

``{"messages": [...], "tools": [...], "id": ..., "usage": {...}}``. Read whole: ``tools``
(and legacy ``functions``) definitions become ``ToolSchema`` items (pinned, source ``Tool``,
one per tool, first in the conversation: the API sends them with every request); messages
with ``content`` as a string or a list of parts (``text``, ``refusal``; others counted in
``skipped``), a ``refusal`` field, ``tool_calls`` (or a legacy ``function_call``), a tool
message's ``tool_call_id`` or ``tool_call_ids`` list (SWE-agent) and ``name``.

Anthropic Messages API request bodies share the shape and are read by the same reader: a
top-level ``system`` (a string or text blocks: a ``SystemPrompt`` item each), and content
blocks (``tool_use`` / ``tool_result`` as linked calls and outputs, ``image`` with its size,
``document`` with its text; ``thinking`` counted in ``skipped``) read as the ``claude-code``
reader reads them (``claude_parts``).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cupel_np.io.importers import gemini, responses
from cupel_np.io.importers.claude_parts import assistant_parts, user_parts
from cupel_np.io.importers.core import (
    ApiCount,
    Bad,
    BadRecord,
    Conversation,
    Part,
    Reader,
    blank,
    call_part,
    check_not_all_bad,
    count,
    json_document,
    json_lines,
    parse_ts,
    raise_first_bad,
    result_parts,
    role_part,
    streamed_array,
    text_of,
)


def api_tokens(usage) -> int | None:
    """The input tokens an API response reports: OpenAI ``prompt_tokens`` (or ``input_tokens``
    of the Responses API), Anthropic ``input_tokens`` + cache tokens."""
    if not isinstance(usage, dict):
        return None
    for k in ("prompt_tokens",):
        v = usage.get(k)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    vals = [usage.get(k) for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")]
    ints = [v for v in vals if isinstance(v, int) and not isinstance(v, bool)]
    return sum(ints) if ints else None


def tool_schema_parts(tools, where: str) -> list[Part]:
    """``ToolSchema`` items of a ``tools`` (or ``functions``) list: each definition as compact
    JSON, pinned (it is sent with every request), tokens by the counter."""
    if tools is None:
        return []
    if isinstance(tools, str):  # LLaMA-Factory and others store the list as a JSON string
        if blank(tools):
            return []
        try:
            tools = json.loads(tools)
        except json.JSONDecodeError:
            raise Bad(f"{where}: not a JSON list of tool definitions") from None
    if not isinstance(tools, list):
        raise Bad(f"{where}: expected a list of tool definitions, got {type(tools).__name__}")
    parts = []
    for j, t in enumerate(tools):
        if not isinstance(t, dict):
            raise Bad(f"{where}[{j}]: expected an object, got {type(t).__name__}")
        fn: dict = t["function"] if isinstance(t.get("function"), dict) else t
        name = fn.get("name") if isinstance(fn.get("name"), str) else None
        text = json.dumps(t, ensure_ascii=False, separators=(",", ":"))
        parts.append(Part(text, "ToolSchema", "Tool", True, "", tool_name=name, extra={"tool_schema": "true"}))
    return parts


def _calls(m: dict, w: str, i: int, role: str, ts, mid, tool_call_kind: str) -> list[Part]:
    calls = m.get("tool_calls")
    if calls is None and isinstance(m.get("function_call"), dict):
        calls = [{"function": m["function_call"]}]
    if calls is None:
        return []
    if not isinstance(calls, list):
        raise Bad(f"{w}.tool_calls: expected a list, got {type(calls).__name__}")
    out = []
    for j, c in enumerate(calls):
        fn = c.get("function") if isinstance(c, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise Bad(f"{w}.tool_calls[{j}]: expected {{'function': {{'name', 'arguments'}}}}, got {c!r:.80}")
        cid = c.get("id") if isinstance(c.get("id"), str) and c.get("id") else f"#{i}.{j}"
        out.append(call_part(fn["name"], fn.get("arguments", ""), tool_call_kind, role, ts, mid, cid, f"m{i}"))
    return out


def _result_ids(m: dict, role: str, name, parts: list[Part]) -> tuple[str | None, list[str]]:
    """The call id(s) a tool message answers: ``tool_call_id``, a ``tool_call_ids`` list, or
    (legacy ``function`` role) the latest call of that name not yet answered."""
    ids = m.get("tool_call_ids")
    if isinstance(ids, list) and ids and all(isinstance(x, str) for x in ids):
        return ids[0], list(ids)
    tcid = m.get("tool_call_id")
    if isinstance(tcid, str) and tcid:
        return tcid, [tcid]
    if role in ("tool", "function"):
        answered = {p.tool_call_id for p in parts if p.tool_role == "result"}
        for p in reversed(parts):
            if p.tool_role == "call" and p.tool_call_id not in answered and (name is None or p.tool_name == name):
                return p.tool_call_id, [p.tool_call_id]  # type: ignore[list-item]
    return None, []


#: content block types only the Anthropic Messages API has (an OpenAI part list holds
#: ``text``, ``refusal``, ``image_url``, ``input_audio``, ``file``)
_BLOCKS = frozenset(
    {
        "tool_use",
        "tool_result",
        "server_tool_use",
        "mcp_tool_use",
        "mcp_tool_result",
        "web_search_tool_result",
        "web_fetch_tool_result",
        "code_execution_tool_result",
        "thinking",
        "redacted_thinking",
        "document",
        "search_result",
        "container_upload",
    }
)


def _block_type(b) -> bool:
    """Whether ``b`` is a content block only the Anthropic Messages API has."""
    t = b.get("type") if isinstance(b, dict) else None
    return isinstance(t, str) and (t in _BLOCKS or (t == "image" and isinstance(b.get("source"), dict)))


#: what only an OpenAI chat message has: a line holding one is read as OpenAI's throughout
_OPENAI_ROLES = frozenset({"system", "developer", "tool", "function"})
_OPENAI_KEYS = ("tool_calls", "function_call", "tool_call_id", "tool_call_ids", "refusal")


def anthropic_line(msgs: list) -> bool:
    """Whether a line's messages are the Messages API's: some message's content holds a block
    only that API has (``_BLOCKS``, an image with a ``source``), and no message has what only
    OpenAI's chat messages have (a ``system`` / ``developer`` / ``tool`` role, ``tool_calls``,
    ``tool_call_id``, ``refusal``). An OpenAI line keeps its part lists as they were read (a
    block of another API counted as a non-text part), whatever parts a gateway put in them."""
    blocks = False
    for m in msgs:
        if not isinstance(m, dict):
            continue
        role = m.get("role")
        if (isinstance(role, str) and role.strip().lower() in _OPENAI_ROLES) or any(k in m for k in _OPENAI_KEYS):
            return False
        content = m.get("content")
        blocks = blocks or (isinstance(content, list) and any(_block_type(b) for b in content))
    return blocks


def _system_parts(system, skipped: dict) -> list[Part]:
    """An Anthropic request's top-level ``system``: a string, or text blocks (one
    ``SystemPrompt`` item each, as the API's cache breakpoints may split them)."""
    kind, source, pinned, role = role_part("system", "system")
    if isinstance(system, str):
        texts = [system]
    elif isinstance(system, list):
        texts = []
        for j, b in enumerate(system):
            if isinstance(b, dict) and isinstance(b.get("text"), str):
                texts.append(b["text"])
            elif isinstance(b, str):
                texts.append(b)
            else:
                raise Bad(f"system[{j}]: expected a text block, got {b!r:.60}")
    else:
        raise Bad(f"system: expected a string or a list of text blocks, got {type(system).__name__}")
    parts: list[Part] = []
    for t in texts:
        if blank(t):
            count(skipped, "empty content")
        else:
            parts.append(Part(t, kind, source, pinned, role, turn="system"))
    return parts


def _block_parts(m: dict, w: str, i: int, role: str, ts, mid, tool_call_kind: str, skipped: dict) -> list[Part]:
    """The parts of a Messages API message whose content is a list of blocks (a user or an
    assistant message: ``anthropic_line`` leaves no other role)."""
    try:
        if role == "assistant":
            return assistant_parts(m["content"], ts, mid, f"m{i}", tool_call_kind, skipped, label="anthropic")
        return user_parts({}, m["content"], ts, mid, skipped, label="anthropic")
    except Bad as e:  # (its message names the block as ``message.content[j]``: say which message)
        raise Bad(f"{w}.{str(e).removeprefix('message.')}") from None


def batch_request(obj) -> dict | None:
    """The request a Batch API input line wraps (OpenAI ``{"custom_id", "body": {...}}``,
    Anthropic ``{"custom_id", "params": {...}}``), its ``custom_id`` as its id; None for a line
    that is no such wrapper."""
    if not isinstance(obj, dict) or "messages" in obj or "custom_id" not in obj:
        return None
    url = obj.get("url")
    if isinstance(url, str) and not url.rstrip("/").endswith(_BATCH_URLS):  # (embeddings, moderations ...)
        return None
    inner = obj.get("body") if isinstance(obj.get("body"), dict) else obj.get("params")
    if not isinstance(inner, dict) or not (isinstance(inner.get("messages"), list) or _is_responses(inner)):
        return None
    return {**inner, "conversation_id": obj["custom_id"]}


def exchange_request(obj) -> tuple[dict, tuple[Any, Any]] | None:
    """The request body an HTTP capture line holds (``{"request": {"url", "body"}, "response":
    {"body" | "body_raw"}}``, as claude-trace and logging proxies write them), with the API's
    usage from its response (a JSON body's ``usage``, or a stream's ``message_start`` /
    ``response.completed`` event) as the body's ``usage``, and what was sent: (that usage, the
    request's ``timestamp``; the usage counts every message, a trailing assistant prefill
    included). None for a line that is no such capture."""
    if not isinstance(obj, dict) or "messages" in obj or not isinstance(obj.get("request"), dict):
        return None
    body = obj["request"].get("body")
    if isinstance(body, str):
        try:
            body = json.loads(body)
        except json.JSONDecodeError:
            return None
    if not isinstance(body, dict) or not (
        isinstance(body.get("messages"), list) or _is_responses(body) or gemini.is_body(body)
    ):
        return None
    resp: dict = obj["response"] if isinstance(obj.get("response"), dict) else {}
    rb = resp.get("body")
    usage = _body_usage(rb) if isinstance(rb, dict) else _stream_usage(resp.get("body_raw"))
    out = {k: v for k, v in body.items() if k != "output"}
    out["usage"] = usage
    return out, (usage, obj["request"].get("timestamp"))


def _body_usage(body: dict) -> dict | None:
    """A response body's usage: ``usage`` (OpenAI, Anthropic), ``usageMetadata`` (Gemini, or
    the Python SDK's ``usage_metadata``)."""
    for k in ("usage", "usageMetadata", "usage_metadata"):
        if isinstance(body.get(k), dict):
            return body[k]
    return None


def _capture(first: dict) -> bool:
    """An HTTP capture's line (of any call): a request with a ``url`` or a ``body``, and a
    response."""
    req = first.get("request")
    return isinstance(req, dict) and "response" in first and ("url" in req or "body" in req)


def _failed(obj: dict) -> int | None:
    """A capture line's response status when it is an error (a failed request, retried)."""
    resp = obj.get("response")
    status = resp.get("status_code", resp.get("status")) if isinstance(resp, dict) else None
    return status if type(status) is int and status >= 400 else None


def _stream_usage(raw) -> dict | None:
    """The input usage of a streamed (server-sent events) response: Anthropic's
    ``message_start`` message, a Responses stream's ``response.completed`` response, else the
    last event's own usage (a chat-completions stream's final chunk, Gemini's chunks)."""
    if not isinstance(raw, str):
        return None
    last = None
    for line in raw.splitlines():
        if not line.startswith("data:") or "sage" not in line:  # (usage, usageMetadata, usage_metadata)
            continue
        try:
            ev = json.loads(line[5:])
        except json.JSONDecodeError:
            continue
        if not isinstance(ev, dict):
            continue
        holder = ev.get("message") if ev.get("type") == "message_start" else ev.get("response")
        if ev.get("type") in ("message_start", "response.completed") and isinstance(holder, dict):
            if isinstance(holder.get("usage"), dict):
                return holder["usage"]
        last = _body_usage(ev) or last
    return last


#: the skip reasons of an HTTP capture's lines that are no model request, or a request that
#: failed (metadata, not content)
NOT_A_REQUEST = "http exchange without a conversation (not a model request)"
FAILED_REQUEST = "http exchange that failed"

#: the endpoints of batch lines that hold a conversation
_BATCH_URLS = ("/chat/completions", "/responses", "/messages")


def _is_responses(obj: dict) -> bool:
    """A Responses API request body: ``input`` (a string, or a list of items) and no
    ``messages``, with a ``model`` or ``instructions`` beside it, or items that are objects (a
    line of another dataset with an ``input`` field, e.g. Alpaca's, is none)."""
    if "messages" in obj:
        return False
    items = obj.get("input")
    if isinstance(items, str):
        return "model" in obj or "instructions" in obj
    return isinstance(items, list) and (
        "model" in obj or "instructions" in obj or (bool(items) and all(isinstance(x, dict) for x in items))
    )


def _responses_conversation(obj: dict, skipped: dict, tool_call_kind: str) -> tuple[list[Part], list[ApiCount]]:
    """The parts of a Responses API request body: its ``tools``, ``instructions`` (a pinned
    ``SystemPrompt``), the ``input`` items and, when the line logs the response too, its
    ``output`` items (the API's count of the input, ``usage.input_tokens``, before them)."""
    parts = tool_schema_parts(obj.get("tools"), "tools")
    instructions = obj.get("instructions")
    if instructions is not None:
        if not isinstance(instructions, str):
            raise Bad(f"instructions: expected a string, got {type(instructions).__name__}")
        if blank(instructions):
            count(skipped, "empty content")
        else:
            kind, source, pinned, role = role_part("developer", "instructions")
            parts.append(Part(instructions, kind, source, pinned, role, turn="instructions"))
    items = obj["input"]
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    turns = responses.Turns()
    for i, it in enumerate(items):
        parts += responses.item_parts(it, f"input[{i}]", turns, None, tool_call_kind, skipped, "responses")
    api: list[ApiCount] = []
    t = api_tokens(obj.get("usage"))
    output = obj.get("output")
    if t is not None:
        api.append(ApiCount(len(parts), t))
    if isinstance(output, list):
        for i, it in enumerate(output):
            parts += responses.item_parts(it, f"output[{i}]", turns, None, tool_call_kind, skipped, "responses")
    return parts, api


def _unwrapped(obj: dict, skipped: dict, tool_call_kind: str) -> tuple[tuple | None, dict, Any]:
    """The shapes around a chat conversation: (the conversation when it is read here, else
    None; the chat body to read; a captured request's usage and time). A Gemini body, a batch
    line, an HTTP capture (its failed requests and other calls counted), a Responses body."""
    if (body := gemini.request_of(obj)) is not None:  # a generateContent body
        return gemini.conversation(body, skipped, tool_call_kind), obj, None
    sent = None
    if (request := batch_request(obj)) is not None:
        obj = request
    elif (captured := exchange_request(obj)) is not None:
        if (status := _failed(obj)) is not None:
            count(skipped, f"{FAILED_REQUEST} (status {status})")  # (retried: its context is the next line's)
            return (None, [], []), obj, None
        obj, sent = captured
    elif "messages" not in obj and isinstance(obj.get("request"), dict):
        req = obj["request"]
        inner = req.get("body") if isinstance(req.get("body"), dict) else req
        held = [k for k in ("messages", "contents", "input") if k in inner]
        if held:  # a request that holds a conversation, not readable: a bad line, not another call
            raise Bad(f"request: its '{held[0]}' is no conversation this reader reads")
        count(skipped, NOT_A_REQUEST)  # (a capture's other calls)
        return (None, [], []), obj, None
    if sent is not None and gemini.is_body(obj):  # a captured Gemini request
        obj["usage_prompt"] = gemini.prompt_tokens(sent[0] if isinstance(sent[0], dict) else {})
        g_cid, g_parts, g_api = gemini.conversation(obj, skipped, tool_call_kind)
        return (g_cid, _at(g_parts, sent), g_api), obj, sent
    if _is_responses(obj):
        cid = obj.get("conversation_id", obj.get("id"))
        if cid is not None and not isinstance(cid, (str, int)):
            raise Bad(f"conversation id must be a string or integer, got {cid!r}")
        r_parts, r_api = _responses_conversation(obj, skipped, tool_call_kind)
        return (cid, _at(r_parts, sent), r_api), obj, sent
    return None, obj, sent


def conversation(obj, skipped: dict, tool_call_kind: str, msgs_key: str = "messages") -> tuple[Any, list[Part], list]:
    """(conversation id or None, parts, API counts) of one OpenAI-shaped conversation (or a
    shape around one: ``_unwrapped``)."""
    if not isinstance(obj, dict):
        raise Bad(f"expected a JSON object with 'messages', got {type(obj).__name__}")
    sent = None
    if msgs_key == "messages":
        done, obj, sent = _unwrapped(obj, skipped, tool_call_kind)
        if done is not None:
            return done
    msgs = obj.get(msgs_key)
    if not isinstance(msgs, list):
        raise Bad(f"missing '{msgs_key}' (a list of chat messages)")
    cid = obj.get("conversation_id", obj.get("id"))
    if cid is not None and not isinstance(cid, (str, int)):
        raise Bad(f"conversation id must be a string or integer, got {cid!r}")
    parts = tool_schema_parts(obj.get("tools"), "tools") + tool_schema_parts(obj.get("functions"), "functions")
    blocks = anthropic_line(msgs)
    system = obj.get("system")
    if system is not None:  # Anthropic: the system prompt beside the messages
        has_role = any(
            isinstance(m, dict) and str(m.get("role")).strip().lower() in ("system", "developer") for m in msgs
        )
        if has_role or not isinstance(system, (str, list)):  # (a dataset's own field: not read twice)
            count(skipped, "top-level 'system' beside system messages" if has_role else "top-level 'system' (not text)")
        else:
            parts += _system_parts(system, skipped)
    api: list[ApiCount] = []
    if not msgs:
        count(skipped, "conversation without messages")
    last_assistant, last_role = None, None
    for i, m in enumerate(msgs):
        w = f"{msgs_key}[{i}]"
        if not isinstance(m, dict):
            raise Bad(f"{w}: expected an object, got {type(m).__name__}")
        kind, source, pinned, role = role_part(m.get("role"), f"{w}.role")
        last_role = role
        ts = parse_ts(m.get("timestamp", m.get("created_at")), f"{w}.timestamp")
        mid = None if m.get("id") is None else str(m.get("id"))
        if role == "assistant":
            last_assistant = len(parts)
            resp = m.get("extra", {}).get("response") if isinstance(m.get("extra"), dict) else None
            t = api_tokens(m.get("usage", resp.get("usage") if isinstance(resp, dict) else None))
            if t is not None:
                api.append(ApiCount(len(parts), t))
        if blocks and isinstance(m.get("content"), list) and any(_block_type(b) for b in m["content"]):
            parts += _block_parts(m, w, i, role, ts, mid, tool_call_kind, skipped)
            continue
        name = m.get("name") if isinstance(m.get("name"), str) else None
        text = text_of(m.get("content"), f"{w}.content", skipped)
        calls = _calls(m, w, i, role, ts, mid, tool_call_kind)
        if not blank(text):
            pt = Part(text, kind, source, pinned, role, ts, mid, turn=f"m{i}")
            if role in ("tool", "function"):
                first, ids = _result_ids(m, role, name, parts)
                pt.tool_name, pt.tool_call_id = name, first
                pt.tool_role = "result" if first else None
                if len(ids) > 1:
                    pt.extra = {"tool_call_ids": ",".join(ids)}
            elif name:
                pt.extra = {"name": name}
            parts.append(pt)
        else:
            first, ids = _result_ids(m, role, name, parts) if role in ("tool", "function") else (None, [])
            if first is not None:  # an empty result: an item all the same, its call keeps its pair
                many = {"tool_call_ids": ",".join(ids)} if len(ids) > 1 else None
                parts += result_parts("", ts, mid, first, None, skipped, many, name=name, role=role)
            elif not calls and not isinstance(m.get("refusal"), str):
                count(skipped, "empty content")
        if isinstance(m.get("refusal"), str) and not blank(m["refusal"]):
            parts.append(
                Part(m["refusal"], kind, source, pinned, role, ts, mid, turn=f"m{i}", extra={"refusal": "true"})
            )
        parts.extend(calls)
    t = api_tokens(obj.get("usage"))
    if t is not None:  # a logged request + its reply: the prompt is everything before the reply
        reply = last_role == "assistant" and last_assistant is not None and sent is None
        api.append(ApiCount(last_assistant if reply else len(parts), t))  # type: ignore[arg-type]
    return cid, _at(parts, sent), api


def _at(parts: list[Part], sent) -> list[Part]:
    """A captured request's parts, timestamped when it was sent where they hold no time."""
    ts = parse_ts(sent[1], "request.timestamp") if sent is not None and sent[1] is not None else None
    if ts is None:
        return parts
    return [pt if pt.timestamp is not None else dataclasses.replace(pt, timestamp=ts) for pt in parts]


_END = object()


def _records(path: Path, name: str) -> Iterator[tuple[int, str, Any]]:
    """(line, "line", record) of each JSON line, or of a ``.json`` document that is not an
    array or is an array of one element; (index, "row", element) of each element of a longer
    ``.json`` array."""
    is_json = path.suffix.lower() == ".json"
    elements = streamed_array(path, name) if is_json else None
    if elements is not None:  # a large .json array: one element at a time
        first = next(elements, _END)
        second = next(elements, _END) if first is not _END else _END
        if first is not _END and second is _END:
            yield 1, "line", first
        elif first is not _END:
            yield 0, "row", first
            yield 1, "row", second
            for k, obj in enumerate(elements, start=2):
                yield k, "row", obj
        return
    for n, rec in json_document(path) if is_json else json_lines(path):
        items = rec if isinstance(rec, list) and n == 1 and is_json else [rec]
        for k, obj in enumerate(items):
            yield (n, "line", obj) if len(items) == 1 else (k, "row", obj)


def read(
    files: list[tuple[Path, str]], reader: Reader, *, skip_bad: bool, tool_call_kind: str, fmt: str = "openai"
) -> Iterator[Conversation]:
    """Each line's (or a ``.json`` array's each element's) conversation as it is read: one
    line at a time for JSONL (memory bounded by the longest line); a ``.json`` document whole
    up to ``jsonread.JSON_STREAM_BYTES``, an array one element at a time over it."""
    for path, name in files:
        file_records, since = 0, len(reader.bad)
        for line, unit, obj in _records(path, name):
            reader.lines += 1
            file_records += 1
            local: dict[str, int] = {}
            try:
                if isinstance(obj, Bad):
                    raise obj
                cid, parts, api = conversation(obj, local, tool_call_kind)
            except Bad as e:
                reader.bad.append(BadRecord(name, line, str(e), unit))
                continue
            for r, c in local.items():
                reader.skip(r, c, metadata=r == NOT_A_REQUEST or r.startswith(FAILED_REQUEST))
            for pt in parts:
                pt.file, pt.line, pt.unit = name, line, unit
            key = str(cid) if cid is not None else f"{path.stem}:{line}"
            yield Conversation(key, parts, api)
        check_not_all_bad(fmt, name, file_records, reader.bad[since:])
        raise_first_bad(reader.bad, since, skip_bad)


def looks_like(first: Any) -> bool:
    """An OpenAI-shaped first record: chat ``messages``, a Responses ``input`` with a ``model``
    or ``instructions``, or a Batch API line or an HTTP capture line wrapping either."""
    return isinstance(first, dict) and (
        isinstance(first.get("messages"), list)
        or (_is_responses(first) and ("model" in first or "instructions" in first))
        or batch_request(first) is not None
        or gemini.request_of(first) is not None
        or _capture(first)
    )
