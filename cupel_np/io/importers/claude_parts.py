"""What one Claude Code record holds, as parts: message content blocks (text, tool calls and
results, images, ``!cmd`` shell input and output) and ``attachment`` payloads
(docs/importing.md, "Claude Code"). The reader (``claude_code``) places the parts."""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
import struct

from cupel_np.io.importers.core import Bad, Part, blank, call_part, count, result_parts, text_of

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_BASH_IN = re.compile(r"<bash-input>(.*?)</bash-input>", re.S)
_BASH_OUT = re.compile(r"<bash-stdout>(.*?)</bash-stdout>", re.S)
_BASH_ERR = re.compile(r"<bash-stderr>(.*?)</bash-stderr>", re.S)


def strip_ansi(s: str) -> str:
    """``s`` without ANSI escape sequences (colours, cursor moves, OSC titles)."""
    return _ANSI.sub("", s) if "\x1b" in s else s


def usage_tokens(usage) -> int | None:
    """The input tokens an API ``usage`` counted (input + cache creation + cache read), None
    for none."""
    if not isinstance(usage, dict):
        return None
    total, found = 0, False
    for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"):
        v = usage.get(k)
        if type(v) is int:
            total += v
            found = True
    return total if found and total else None


def _shell_parts(text: str, role: str, ts, uid) -> list[Part] | None:
    """``!cmd`` records: ``<bash-input>`` (the command) and ``<bash-stdout>`` /
    ``<bash-stderr>`` (its output, escapes stripped) as their own kinds, source ``Shell``."""
    if "<bash-" not in text:
        return None
    m_in = _BASH_IN.search(text)
    if m_in:
        return [Part(m_in.group(1), "ShellCommand", "Shell", False, role, ts, uid, extra={"shell": "input"})]
    out, err = _BASH_OUT.search(text), _BASH_ERR.search(text)
    if not out and not err:
        return None
    pieces = [strip_ansi(m.group(1)) for m in (out, err) if m and not blank(m.group(1))]
    body = "\n".join(pieces)
    extra = {"shell": "output", "stderr": "true" if err and not blank(err.group(1)) else "false"}
    return [Part(body, "ShellOutput", "Shell", False, role, ts, uid, extra=extra)] if body else []


def _blocks(content) -> list:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return content
    raise Bad(f"message.content must be a string or a list of blocks, got {type(content).__name__}")


def _references(content):
    """A tool result's content with each ``tool_reference`` block (ToolSearch's answer: the API
    puts the named tool's definition in the context) as a text line holding the tool's name."""
    if not isinstance(content, list) or not any(
        isinstance(p, dict) and p.get("type") == "tool_reference" for p in content
    ):
        return content
    return [
        {"type": "text", "text": str(p.get("tool_name"))}
        if isinstance(p, dict) and p.get("type") == "tool_reference"
        else p
        for p in content
    ]


def _image_dims(b: bytes) -> tuple[int, int] | None:
    """(width, height) from the first bytes of a PNG, GIF, JPEG or WebP image."""
    try:
        if b[:8] == b"\x89PNG\r\n\x1a\n":
            return struct.unpack(">II", b[16:24])
        if b[:4] == b"GIF8":
            return struct.unpack("<HH", b[6:10])
        if b[:4] == b"RIFF" and b[8:12] == b"WEBP":
            kind = b[12:16]
            if kind == b"VP8 ":
                w, h = struct.unpack("<HH", b[26:30])
                return w & 0x3FFF, h & 0x3FFF
            if kind == b"VP8L":
                v = int.from_bytes(b[21:25], "little")
                return (v & 0x3FFF) + 1, ((v >> 14) & 0x3FFF) + 1
            if kind == b"VP8X":
                return int.from_bytes(b[24:27], "little") + 1, int.from_bytes(b[27:30], "little") + 1
            return None
        if b[:2] == b"\xff\xd8":
            i = 2
            while i + 9 <= len(b) and b[i] == 0xFF:
                m = b[i + 1]
                if m in (0xD8, 0x01) or 0xD0 <= m <= 0xD7:
                    i += 2
                    continue
                if 0xC0 <= m <= 0xCF and m not in (0xC4, 0xC8, 0xCC):
                    h, w = struct.unpack(">HH", b[i + 5 : i + 9])
                    return w, h
                i += 2 + struct.unpack(">H", b[i + 2 : i + 4])[0]
    except struct.error:
        return None
    return None


def image_tokens(width: int, height: int) -> int:
    """The API's published count for an image: scaled down (aspect kept) to a long edge of at
    most 1568 px, then width x height / 750 tokens, at most about 1600."""
    s = min(1.0, 1568 / max(width, height, 1))
    return max(1, min(1600, math.ceil(width * s * height * s / 750)))


def image_part(b: dict, role: str, ts, uid, tcid: str | None = None) -> Part | None:
    """An ``image`` block (base64 data, as Claude Code logs a pasted or read image) as an item
    of kind ``Image`` whose tokens are the API's count for its size; None when its size cannot
    be read (a URL or file source, or data that is not a known image format)."""
    src = b.get("source")
    if not isinstance(src, dict) or src.get("type") != "base64" or not isinstance(src.get("data"), str):
        return None
    data = src["data"][: 1 << 16]
    try:
        dims = _image_dims(base64.b64decode(data[: len(data) // 4 * 4]))
    except (binascii.Error, ValueError):
        return None
    if not dims or min(dims) <= 0:
        return None
    w, h = dims
    mt = str(src["media_type"]) if isinstance(src.get("media_type"), str) else "image"
    return Part(
        f"[image {mt} {w}x{h}]",
        "Image",
        "Tool" if tcid else "Chat",
        False,
        role,
        ts,
        uid,
        tool_call_id=tcid,
        tool_role="result" if tcid else None,
        tokens=image_tokens(w, h),
        extra={"image": f"{w}x{h}", "media_type": mt},
    )


def _document_part(b: dict, ts, uid, skipped: dict) -> Part | None:
    """A ``document`` block whose text the log holds (source ``text``, or ``content`` of text
    blocks) as a ``Document`` item; None for one it does not (a base64 PDF, a URL, a file id)."""
    src = b.get("source")
    if not isinstance(src, dict):
        return None
    if src.get("type") == "text" and isinstance(src.get("data"), str):
        text = src["data"]
    elif src.get("type") == "content" and isinstance(src.get("content"), (str, list)):
        text = text_of(src["content"], "document.source.content", skipped)
    else:
        return None
    if blank(text):
        return None
    extra = {"document": "true"}
    for k in ("title", "context"):
        if isinstance(b.get(k), str) and b[k]:
            extra[k] = b[k]
    return Part(text, "Document", "Chat", False, "user", ts, uid, extra=extra)


def user_parts(obj: dict, content, ts, uid, skipped: dict, label: str = "claude-code") -> list[Part]:
    """The parts of a ``user`` record's content: text, tool results (and their images), images,
    documents with their text, ``!cmd`` input and output; other blocks are counted in
    ``skipped`` (as ``LABEL block 'TYPE'``)."""
    if isinstance(content, str):
        shell = _shell_parts(content, "user", ts, uid)
        if shell is not None:
            return shell
    extra: dict[str, str] = {}
    if obj.get("isCompactSummary"):
        extra["compact_summary"] = "true"
    if obj.get("isMeta"):
        extra["is_meta"] = "true"
    parts: list[Part] = []
    for i, b in enumerate(_blocks(content)):
        if not isinstance(b, dict) or not isinstance(b.get("type"), str):
            raise Bad(f"message.content[{i}]: expected a block with a 'type', got {b!r:.60}")
        bt = b["type"]
        if bt == "text":
            if not isinstance(b.get("text"), str):
                raise Bad(f"message.content[{i}]: text block without a string 'text'")
            if blank(b["text"]):
                count(skipped, "empty content")
                continue
            parts.append(Part(b["text"], "Message", "Chat", False, "user", ts, uid, extra=dict(extra) or None))
        elif bt == "image":
            img = image_part(b, "user", ts, uid)
            if img is None:
                count(skipped, f"{label} block 'image'")
            else:
                parts.append(img)
        elif bt == "document":
            doc = _document_part(b, ts, uid, skipped)
            if doc is None:
                count(skipped, f"{label} block 'document' (no text in the log)")
            else:
                parts.append(doc)
        elif bt == "tool_result":
            tcid = b.get("tool_use_id") if isinstance(b.get("tool_use_id"), str) else None
            rc = _references(b.get("content"))
            images: list[Part] = []
            if isinstance(rc, list) and any(isinstance(p, dict) and p.get("type") == "image" for p in rc):
                kept = []
                for p in rc:
                    img = (
                        image_part(p, "tool", ts, uid, tcid)
                        if isinstance(p, dict) and p.get("type") == "image"
                        else None
                    )
                    if img is None:
                        kept.append(p)
                    else:
                        images.append(img)
                rc = kept
            text = text_of(rc, f"message.content[{i}].content", skipped)
            err = b.get("is_error")
            for img in images:
                img.is_error = bool(err)
            if not (blank(text) and images):  # (the images answer the call then)
                parts += result_parts(strip_ansi(text), ts, uid, tcid, bool(err), skipped)
            parts.extend(images)
        else:
            key = f"{label} block '{bt}'"
            count(skipped, key)
    return parts


#: ``attachment`` records Claude Code sends to the model (as a ``<system-reminder>`` user message,
#: a queued prompt as a user message) and the field holding their text; any other attachment
#: with a string ``content`` is read too. Those without text (``command_permissions``,
#: ``compact_file_reference``, an empty reminder) or shown only to the user
#: (``hook_system_message``, the output of hooks other than SessionStart / UserPromptSubmit)
#: are counted, as metadata.
_ATTACHMENT_TEXT = {
    "queued_command": "prompt",
    "skill_listing": "content",
    "hook_additional_context": "content",
    "hook_success": "content",
    "selected_lines_in_ide": "content",
    "mcp_instructions_delta": "addedBlocks",
    "deferred_tools_delta": "addedNames",
    "task_reminder": "content",
    "todo_reminder": "content",
    "nested_memory": "content",
    "edited_text_file": "snippet",
}
_NOT_SENT = {"hook_system_message", "command_permissions"}


def _attachment_text(a: dict, skipped: dict) -> str:
    """The text of an ``attachment`` record's payload that the model saw ("" for none)."""
    t = a.get("type") if isinstance(a.get("type"), str) else None
    if t in _NOT_SENT or (t == "hook_success" and a.get("hookEvent") not in ("SessionStart", "UserPromptSubmit")):
        return ""
    if t == "file":
        c = a.get("content")
        f = c.get("file") if isinstance(c, dict) else None
        if isinstance(f, dict) and isinstance(f.get("content"), str):
            return f["content"]
        return ""
    v = a.get(_ATTACHMENT_TEXT.get(t, "content")) if t is not None else None
    if isinstance(v, str):
        return v
    if isinstance(v, list) and v:
        if all(isinstance(x, str) for x in v):
            return "\n".join(v)
        if t in _ATTACHMENT_TEXT:
            return text_of(v, "attachment", skipped) if t == "queued_command" else json.dumps(v, ensure_ascii=False)
    return ""


def attachment_parts(obj: dict, ts, uid, skipped: dict) -> list[Part]:
    """The part an ``attachment`` record added to the model's context, or none (counted)."""
    a = obj.get("attachment")
    t = a.get("type") if isinstance(a, dict) and isinstance(a.get("type"), str) else None
    text = _attachment_text(a, skipped) if isinstance(a, dict) else ""
    if blank(text):
        key = f"claude-code attachment '{t}' (not context)"
        count(skipped, key)
        return []
    extra = {"attachment": str(t)}
    if t == "queued_command":
        return [Part(text, "Message", "Chat", False, "user", ts, uid, extra=extra)]
    extra["is_meta"] = "true"
    return [Part(text, "Attachment", "Chat", False, "user", ts, uid, extra=extra)]


def assistant_parts(
    content, ts, uid, turn, tool_call_kind: str, skipped: dict, label: str = "claude-code"
) -> list[Part]:
    """The parts of an ``assistant`` record's content: text, tool calls (``tool_use``, and the
    API's server-run ``server_tool_use`` / ``mcp_tool_use``) and the MCP results the API put
    beside them (``mcp_tool_result``); thinking and other blocks are counted in ``skipped``
    (as ``LABEL block 'TYPE'``)."""
    parts: list[Part] = []
    for i, b in enumerate(_blocks(content)):
        if not isinstance(b, dict) or not isinstance(b.get("type"), str):
            raise Bad(f"message.content[{i}]: expected a block with a 'type', got {b!r:.60}")
        bt = b["type"]
        if bt == "text":
            if not isinstance(b.get("text"), str):
                raise Bad(f"message.content[{i}]: text block without a string 'text'")
            if blank(b["text"]):
                count(skipped, "empty content")
                continue
            parts.append(Part(b["text"], "Message", "Chat", False, "assistant", ts, uid, turn=turn))
        elif bt in ("tool_use", "server_tool_use", "mcp_tool_use"):
            name = b.get("name")
            if not isinstance(name, str):
                raise Bad(f"message.content[{i}]: tool_use block without a 'name'")
            tid = b.get("id") if isinstance(b.get("id"), str) else None
            parts.append(call_part(name, b.get("input", {}), tool_call_kind, "assistant", ts, uid, tid, turn))
        elif bt == "mcp_tool_result":
            tcid = b.get("tool_use_id") if isinstance(b.get("tool_use_id"), str) else None
            text = text_of(b.get("content"), f"message.content[{i}].content", skipped)
            err = b.get("is_error")
            parts += result_parts(text, ts, uid, tcid, bool(err), skipped)
        else:  # thinking, redacted_thinking, image, web search results ...: not resent as plain context
            key = f"{label} block '{bt}'"
            count(skipped, key)
    return parts
