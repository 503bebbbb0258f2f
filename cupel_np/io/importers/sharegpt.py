"""ShareGPT and LLaMA-Factory files: a JSON array of conversations, or JSONL.

* ShareGPT (and LLaMA-Factory's ``sharegpt`` formatting): ``{"conversations": [{"from":
  ..., "value": ...}], "system": ..., "tools": ...}``; ``from`` is ``human`` / ``user``,
  ``gpt`` / ``assistant``, ``system``, ``function_call`` (the value is a JSON call, or a list
  of them) or ``observation`` / ``tool`` (a tool's output).
* LLaMA-Factory v1 parts: ``{"messages": [{"role": ..., "content": [{"type": "text" |
  "reasoning" | "tool_call", "value": ...}]}], "tools": ...}``.

Calls carry no ids in these formats: each gets ``#<message>.<call>`` and an output answers
the earliest call not yet answered (the order the formats imply).
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cupel_np.io.importers.core import (
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
    raise_first_bad,
    role_part,
    streamed_array,
)
from cupel_np.io.importers.openai import tool_schema_parts

_FROM = {
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "chatgpt": "assistant",
    "bard": "assistant",
    "bing": "assistant",
    "model": "assistant",
    "system": "system",
    "function_call": "call",
    "tool_call": "call",
    "observation": "tool",
    "tool": "tool",
    "function": "tool",
}


def _tools(v, where: str) -> list[Part]:
    if isinstance(v, str):
        if blank(v):
            return []
        try:
            v = json.loads(v)
        except json.JSONDecodeError:
            raise Bad(f"{where}: not a JSON list of tool definitions") from None
    return tool_schema_parts(v, where)


def _calls(value, where: str, i: int, tool_call_kind: str) -> list[Part]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise Bad(f"{where}: a function call must be JSON {{'name', 'arguments'}}, got {value!r:.60}") from None
    calls = value if isinstance(value, list) else [value]
    out = []
    for j, c in enumerate(calls):
        if not isinstance(c, dict) or not isinstance(c.get("name"), str):
            raise Bad(f"{where}: a function call must have a 'name', got {c!r:.60}")
        args = c.get("arguments", c.get("parameters", {}))
        out.append(call_part(c["name"], args, tool_call_kind, "assistant", None, None, f"#{i}.{j}", f"m{i}"))
    return out


class _Linker:
    """Outputs answer the earliest unanswered call."""

    def __init__(self) -> None:
        self.pending: deque[Part] = deque()

    def calls(self, parts: list[Part]) -> list[Part]:
        self.pending.extend(parts)
        return parts

    def result(self, text: str, i: int) -> Part:
        pt = Part(text, "ToolOutput", "Tool", False, "tool", turn=f"m{i}", tool_role="result")
        if self.pending:
            call = self.pending.popleft()
            pt.tool_call_id, pt.tool_name = call.tool_call_id, call.tool_name
        return pt


def _sharegpt(turns: list, skipped: dict, tool_call_kind: str) -> list[Part]:
    link = _Linker()
    parts: list[Part] = []
    for i, m in enumerate(turns):
        w = f"conversations[{i}]"
        if not isinstance(m, dict) or "from" not in m:
            raise Bad(f"{w}: expected an object with 'from' and 'value', got {m!r:.60}")
        who = _FROM.get(str(m["from"]).strip().lower())
        if who is None:
            raise Bad(f"{w}.from: expected one of {', '.join(_FROM)}, got {m['from']!r}")
        value = m.get("value")
        if who == "call":
            parts.extend(link.calls(_calls(value, f"{w}.value", i, tool_call_kind)))
            continue
        if not isinstance(value, str):
            raise Bad(f"{w}.value: expected a string, got {type(value).__name__}")
        if blank(value):
            count(skipped, "empty content")
        elif who == "tool":
            parts.append(link.result(value, i))
        else:
            kind, source, pinned, role = role_part(who, f"{w}.from")
            parts.append(Part(value, kind, source, pinned, role, turn=f"m{i}"))
    return parts


def _v1(msgs: list, skipped: dict, tool_call_kind: str) -> list[Part]:
    link = _Linker()
    parts: list[Part] = []
    for i, m in enumerate(msgs):
        w = f"messages[{i}]"
        if not isinstance(m, dict):
            raise Bad(f"{w}: expected an object, got {type(m).__name__}")
        kind, source, pinned, role = role_part(m.get("role"), f"{w}.role")
        content = m.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "value": content}]
        if not isinstance(content, list):
            raise Bad(f"{w}.content: expected a list of parts, got {type(content).__name__}")
        texts = []
        calls: list[Part] = []
        for j, p in enumerate(content):
            if not isinstance(p, dict) or not isinstance(p.get("type"), str):
                raise Bad(f"{w}.content[{j}]: expected {{'type', 'value'}}, got {p!r:.60}")
            v = p.get("value", p.get("text"))
            if p["type"] == "text" and isinstance(v, str):
                texts.append(v)
            elif p["type"] == "tool_call":
                calls.extend(_calls(v, f"{w}.content[{j}]", i, tool_call_kind))
            else:
                count(skipped, f"llama-factory part '{p['type']}'")
        text = "\n".join(texts)
        if blank(text):
            if not calls:
                count(skipped, "empty content")
        elif role in ("tool", "function"):
            parts.append(link.result(text, i))
        else:
            parts.append(Part(text, kind, source, pinned, role, turn=f"m{i}"))
        for j, c in enumerate(calls):  # several tool_call parts in one message: number them apart
            c.tool_call_id = f"#{i}.{j}"
        parts.extend(link.calls(calls))
    return parts


def conversation(obj, skipped: dict, tool_call_kind: str) -> tuple[Any, list[Part]]:
    if not isinstance(obj, dict):
        raise Bad(f"expected a JSON object with 'conversations' or 'messages', got {type(obj).__name__}")
    cid = obj.get("id", obj.get("conversation_id"))
    parts = _tools(obj.get("tools"), "tools")
    if isinstance(obj.get("system"), str) and not blank(obj["system"]):
        parts.append(Part(obj["system"], "SystemPrompt", "Chat", True, "system"))
    turns = obj.get("conversations")
    msgs = obj.get("messages")
    if isinstance(turns, list):
        parts += _sharegpt(turns, skipped, tool_call_kind)
    elif isinstance(msgs, list) and msgs and isinstance(msgs[0], dict) and "from" in msgs[0]:
        parts += _sharegpt(msgs, skipped, tool_call_kind)
    elif isinstance(msgs, list):
        parts += _v1(msgs, skipped, tool_call_kind)
    else:
        raise Bad("missing 'conversations' (ShareGPT) or 'messages' (LLaMA-Factory)")
    return cid, parts


def _records(path: Path, name: str) -> Iterator[tuple[int, str, Any]]:
    """(line, "line", record) of each JSON line, or (index, "row", element) of each element of
    an array (a ``.json`` document, or a line holding an array)."""
    if path.suffix.lower() == ".json":
        elements = streamed_array(path, name)
        if elements is not None:  # a large .json array: one element at a time
            for k, obj in enumerate(elements):
                yield k, "row", obj
            return
    for n, rec in json_document(path) if path.suffix.lower() == ".json" else json_lines(path):
        if isinstance(rec, list):
            for k, obj in enumerate(rec):
                yield k, "row", obj
        else:
            yield n, "line", rec


def read(
    files: list[tuple[Path, str]], reader: Reader, *, skip_bad: bool, tool_call_kind: str
) -> Iterator[Conversation]:
    """Each conversation as it is read: one line at a time for JSONL (memory bounded by the
    longest line); a ``.json`` array whole up to ``jsonread.JSON_STREAM_BYTES``, one element at a
    time over it."""
    for path, name in files:
        file_records, since = 0, len(reader.bad)
        for line, unit, obj in _records(path, name):
            reader.lines += 1
            file_records += 1
            local: dict[str, int] = {}
            try:
                if isinstance(obj, Bad):
                    raise obj
                cid, parts = conversation(obj, local, tool_call_kind)
            except Bad as e:
                reader.bad.append(BadRecord(name, line, str(e), unit))
                continue
            for r, c in local.items():
                reader.skip(r, c, metadata="reasoning" in r)
            for pt in parts:
                pt.file, pt.line, pt.unit = name, line, unit
            yield Conversation(str(cid) if cid is not None else f"{path.stem}:{line}", parts)
        check_not_all_bad("sharegpt", name, file_records, reader.bad[since:])
        raise_first_bad(reader.bad, since, skip_bad)
