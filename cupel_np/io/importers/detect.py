"""``auto``: each file's format from its name and first record; all files must agree."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cupel_np.errors import BadTranscriptError, InvalidConfigError
from cupel_np.io.importers import codex, jsonread, openai


def _first_record(path: Path) -> Any:
    """The first JSON value of a file: the whole document when it is one, else its first
    non-blank line (JSONL); None when neither parses."""
    with path.open("rb") as f:
        head = f.read(1 << 16)
    stripped = head.removeprefix(b"\xef\xbb\xbf").lstrip()  # a UTF-8 byte-order mark, as json.loads allows
    if stripped[:1] in (b"[", b"{") and path.suffix.lower() in (".json", ".traj"):
        elements = jsonread.streamed_array(path) if path.suffix.lower() == ".json" else None
        if elements is not None:  # a large array: its first object, without reading the rest
            try:
                return [next((x for x in elements if isinstance(x, dict)), None)]
            except BadTranscriptError:
                pass  # not one document: as below, its first line
            finally:
                elements.close()  # type: ignore[attr-defined]
        elif (whole := jsonread.document_bytes(path)) is not None:  # None: JSON lines (a large file)
            try:
                return json.loads(whole)
            except (json.JSONDecodeError, UnicodeDecodeError):
                pass
            finally:
                del whole
    with path.open("rb") as f:
        for raw in f:
            if raw.strip():
                try:
                    return json.loads(raw)
                except (json.JSONDecodeError, UnicodeDecodeError):
                    return None
    return None


def detect(path: Path) -> str | None:
    """The format of one file, or None when it is not recognised."""
    name = path.name.lower()
    if name.endswith((".csv", ".tsv", ".parquet")):
        return "messages"
    if name.endswith(".traj"):
        return "swe-agent"
    if name.endswith(".traj.json"):
        return "mini-swe-agent"
    first = _first_record(path)
    if isinstance(first, list):
        first = next((x for x in first if isinstance(x, dict)), None)
    if not isinstance(first, dict):
        return None
    if "resourceSpans" in first:
        return "otel"
    if codex.looks_like(first):
        return "codex"
    if isinstance(first.get("type"), str) and (
        "sessionId" in first or first.get("type") in ("summary", "file-history-snapshot", "queue-operation")
    ):
        return "claude-code"
    if isinstance(first.get("type"), str) and "session_id" in first:
        return "stream-json"
    if isinstance(first.get("conversations"), list):
        return "sharegpt"
    msgs = first.get("messages")
    if isinstance(msgs, list):
        m0 = next((m for m in msgs if isinstance(m, dict)), {})
        if "from" in m0 and "value" in m0:
            return "sharegpt"
        parts = [p for m in msgs if isinstance(m, dict) and isinstance(m.get("content"), list) for p in m["content"]]
        if any(isinstance(p, dict) and "value" in p and "text" not in p for p in parts):
            return "llama-factory"
        return "openai"
    if openai.looks_like(first):  # a Responses body, a Batch API input line (either API's)
        return "openai"
    if isinstance(first.get("history"), list) and isinstance(first.get("trajectory"), list):
        return "swe-agent"
    return None


def detect_all(files: list[tuple[Path, str]], *, mapped: bool = False) -> str:
    """The one format of ``files`` (``messages`` when a column mapping is given)."""
    if mapped:
        return "messages"
    found: dict[str, list[str]] = {}
    for path, name in files:
        fmt = detect(path)
        if fmt is None:
            raise InvalidConfigError(
                f"{name}: cannot tell its transcript format from its name and first record; "
                "name the format (openai, anthropic, gemini, claude-code, stream-json, codex, sharegpt, swe-agent, mini-swe-agent, otel, messages)"
            )
        found.setdefault(fmt, []).append(name)
    if set(found) == {"swe-agent", "mini-swe-agent"}:  # one reader reads both
        return "swe-agent"
    if len(found) > 1:
        what = "; ".join(f"{f}: {', '.join(n[:3])}{' ...' if len(n) > 3 else ''}" for f, n in found.items())
        raise InvalidConfigError(f"the files are in more than one format ({what}); import each format on its own")
    return next(iter(found))
