"""Gemini API request bodies (``generateContent``), read by the ``openai`` reader: one
conversation a line, as a Gemini batch line (``{"key", "request"}``), a Vertex AI batch line
(``{"request", "response"}``) or a bare body.

``{"contents": [{"role": "user" | "model", "parts": [...]}], "systemInstruction": {...},
"tools": [{"functionDeclarations": [...]}]}``; the REST API's camelCase names and the Python
SDK's snake_case ones are both read. Parts: ``text`` (a ``thought`` summary counted in
``skipped``), ``functionCall`` and ``functionResponse`` (a call and its output, linked by their
``id``, else a response answers the earliest unanswered call of its name), ``executableCode``
and ``codeExecutionResult`` (the code-execution tool's call and output); media
(``inlineData``, ``fileData``) is counted in ``skipped``.
"""

from __future__ import annotations

import json
import math
from typing import Any

from cupel_np.io.importers.claude_parts import image_part
from cupel_np.io.importers.core import ApiCount, Bad, Part, blank, call_part, count, result_parts, role_part

LABEL = "gemini"


def _get(d: dict, camel: str) -> Any:
    """``d[camel]``, or its snake_case spelling (the Python SDK's dumps)."""
    if camel in d:
        return d[camel]
    return d.get("".join(f"_{c.lower()}" if c.isupper() else c for c in camel))


def is_body(obj: Any) -> bool:
    """A ``generateContent`` request body: ``contents`` (a list, or one Content: the API takes
    a repeated field's single value as its one element), no chat ``messages``."""
    if not isinstance(obj, dict) or "messages" in obj:
        return False
    c = obj.get("contents")
    return isinstance(c, list) or (isinstance(c, dict) and "parts" in c)


def _many(v: Any) -> Any:
    """A repeated field's value as a list (a single object is its one element)."""
    return [v] if isinstance(v, dict) else v


def request_of(obj: Any) -> dict | None:
    """The body a line holds, with its set key (a batch line's ``key``) as ``conversation_id``
    and the API's count (``usageMetadata.promptTokenCount`` of a logged response) as
    ``usage_prompt``; None for a line that holds none."""
    if not isinstance(obj, dict):
        return None
    if is_body(obj):
        return obj
    req = obj.get("request")
    if not isinstance(req, dict) or not is_body(req):
        return None
    out = dict(req)
    if isinstance(obj.get("key"), (str, int)):
        out["conversation_id"] = obj["key"]
    resp = obj.get("response")
    meta = _get(resp, "usageMetadata") if isinstance(resp, dict) else None
    if isinstance(meta, dict):
        out["usage_prompt"] = prompt_tokens(meta)
    return out


def prompt_tokens(meta: dict) -> Any:
    """``usageMetadata.promptTokenCount`` (or its snake_case spelling)."""
    return _get(meta, "promptTokenCount")


def _tools(tools: Any) -> list[Part]:
    """``ToolSchema`` items: each function declaration, and each other tool (search, code
    execution) whole, as compact JSON."""
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise Bad(f"tools: expected a list, got {type(tools).__name__}")
    parts = []
    for j, t in enumerate(tools):
        if not isinstance(t, dict):
            raise Bad(f"tools[{j}]: expected an object, got {type(t).__name__}")
        decls = _get(t, "functionDeclarations")
        entries = decls if isinstance(decls, list) else [t]
        for k, d in enumerate(entries):
            if not isinstance(d, dict):
                raise Bad(f"tools[{j}].functionDeclarations[{k}]: expected an object, got {type(d).__name__}")
            name = d.get("name") if isinstance(d.get("name"), str) else None
            text = json.dumps(d, ensure_ascii=False, separators=(",", ":"))
            parts.append(Part(text, "ToolSchema", "Tool", True, "", tool_name=name, extra={"tool_schema": "true"}))
    return parts


def _system(si: Any, skipped: dict) -> list[Part]:
    """The system instruction (a string, or a Content of text parts): one pinned
    ``SystemPrompt`` per text part."""
    if si is None:
        return []
    sp = _many(si.get("parts")) if isinstance(si, dict) else None
    if isinstance(si, str):
        texts = [si]
    elif isinstance(sp, list) and all(isinstance(p, dict) and isinstance(p.get("text"), str) for p in sp):
        texts = [p["text"] for p in sp]
    else:
        raise Bad("systemInstruction: expected a string or a Content of text parts")
    kind, source, pinned, role = role_part("system", "systemInstruction")
    out = []
    for x in texts:
        if blank(x):
            count(skipped, "empty content")
        else:
            out.append(Part(x, kind, source, pinned, role, turn="system"))
    return out


def conversation(obj: dict, skipped: dict, tool_call_kind: str) -> tuple[Any, list[Part], list[ApiCount]]:
    """(conversation id or None, parts, API counts) of one ``generateContent`` body."""
    cid = obj.get("conversation_id", obj.get("id"))
    if cid is not None and not isinstance(cid, (str, int)):
        raise Bad(f"conversation id must be a string or integer, got {cid!r}")
    parts = _tools(obj.get("tools")) + _system(_get(obj, "systemInstruction"), skipped)
    pending: list[tuple[str, str]] = []  # (call id, tool name) of the calls not yet answered, in order
    for i, c in enumerate(_many(obj["contents"])):
        w = f"contents[{i}]"
        cparts = _many(c.get("parts")) if isinstance(c, dict) else None
        if not isinstance(cparts, list):
            raise Bad(f"{w}: expected a Content with 'parts', got {c!r:.60}")
        role = c.get("role", "user")
        if not isinstance(role, str) or role.lower() not in ("user", "model", "function", "tool"):
            raise Bad(f"{w}.role: expected user or model, got {role!r}")
        model = role.lower() == "model"
        for j, p in enumerate(cparts):
            parts += _part(p, f"{w}.parts[{j}]", i, j, model, pending, tool_call_kind, skipped)
    api: list[ApiCount] = []
    n = obj.get("usage_prompt")
    if type(n) is int and n > 0:  # the response's count: of everything the request sent
        api.append(ApiCount(len(parts), n))
    return cid, parts, api


def _answer(pending: list[tuple[str, str]], cid: Any, name: str | None) -> str | None:
    """The call a response answers: its ``id``, else the earliest unanswered call of its name."""
    for k, (pid, pname) in enumerate(pending):
        if (isinstance(cid, str) and cid and pid == cid) or (not cid and (name is None or pname == name)):
            del pending[k]
            return pid
    return cid if isinstance(cid, str) and cid else None


def _part(p: Any, w: str, i: int, j: int, model: bool, pending, tool_call_kind: str, skipped: dict) -> list[Part]:
    if not isinstance(p, dict):
        raise Bad(f"{w}: expected a part object, got {type(p).__name__}")
    role = "assistant" if model else "user"
    turn = f"m{i}" if model else None
    if isinstance(p.get("text"), str):
        if p.get("thought"):
            count(skipped, f"{LABEL} part 'thought'")
            return []
        if blank(p["text"]):
            count(skipped, "empty content")
            return []
        kind, source, pinned, _ = role_part(role, w)
        return [Part(p["text"], kind, source, pinned, role, turn=turn)]
    call, code = _get(p, "functionCall"), _get(p, "executableCode")
    if isinstance(call, dict) or isinstance(code, dict):
        if isinstance(call, dict):
            name = call.get("name")
            if not isinstance(name, str) or not name:
                raise Bad(f"{w}.functionCall: without a 'name'")
            args: Any = call.get("args", {})
        else:
            name, args = "code_execution", code.get("code", "")
        given = call.get("id") if isinstance(call, dict) else None
        cid = given if isinstance(given, str) and given else f"#{i}.{j}"
        pending.append((cid, name))
        return [call_part(name, args, tool_call_kind, "assistant", None, None, cid, turn)]
    resp, result = _get(p, "functionResponse"), _get(p, "codeExecutionResult")
    if isinstance(resp, dict):
        name = resp.get("name") if isinstance(resp.get("name"), str) else None
        body = resp.get("response")
        text = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False) if body is not None else ""
        return result_parts(text, None, None, _answer(pending, resp.get("id"), name), None, skipped)
    if isinstance(result, dict):
        out: str = result["output"] if isinstance(result.get("output"), str) else ""
        failed = result.get("outcome") not in (None, "OUTCOME_OK")
        return result_parts(out, None, None, _answer(pending, None, "code_execution"), failed, skipped)
    image = _image(_get(p, "inlineData"), role, turn)
    if image is not None:
        return [image]
    kinds = [k for k, v in p.items() if v is not None and k not in ("thoughtSignature", "thought_signature", "thought")]
    count(skipped, f"{LABEL} part '{kinds[0] if kinds else 'empty'}'")
    return []


def _image(data: Any, role: str, turn) -> Part | None:
    """An ``inlineData`` image whose size its bytes tell, as an ``Image`` item: Gemini counts
    258 tokens for an image of at most 384 pixels a side, else 258 a 768 x 768 tile."""
    if not isinstance(data, dict) or not str(_get(data, "mimeType") or "").startswith("image/"):
        return None
    block = {"source": {"type": "base64", "data": data.get("data"), "media_type": _get(data, "mimeType")}}
    part = image_part(block, role, None, None)
    if part is None:
        return None
    w, h = (int(x) for x in (part.extra or {})["image"].split("x"))
    tiles = 1 if max(w, h) <= 384 else math.ceil(w / 768) * math.ceil(h / 768)
    part.tokens, part.turn = 258 * tiles, turn
    return part
