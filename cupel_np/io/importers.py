"""Transcript import: chat and agent logs -> an items table (one item per message part).

Formats (``FORMATS``):

* ``openai`` — OpenAI chat-completions JSONL, one conversation per line:
  ``{"messages": [{"role": ..., "content": ..., "tool_calls": [...], "tool_call_id": ...}], ...}``
  with optional conversation ``id`` / ``conversation_id`` and per-message ``timestamp`` /
  ``created_at`` and ``id``.
* ``claude-code`` — Claude Code session JSONL (``~/.claude/projects/<project>/<session>.jsonl``):
  one record per line; ``user`` / ``assistant`` records carry ``message.content`` (a string or
  ``text`` / ``tool_use`` / ``tool_result`` / ``thinking`` / ``image`` blocks), ``sessionId``,
  ``timestamp`` and ``uuid``. Other record types (``summary``, ``system`` events,
  ``file-history-snapshot``, ...) are not context; they are counted in ``ImportResult.skipped``.
* ``messages`` — any JSONL / CSV / Parquet file with one message per line or row, its columns
  named by a mapping (``content=text,kind=role,set=conv``; see ``MAP_TARGETS``).

Roles become kinds: ``system`` / ``developer`` -> ``SystemPrompt`` (pinned), ``user`` /
``assistant`` -> ``Message``, tool results (``tool`` / ``function`` role, ``tool_result``
blocks) -> ``ToolOutput`` with source ``Tool``, and each tool call -> its own item of kind
``ToolCall`` (source ``Tool``; ``tool_call_kind=`` changes the kind). The set key is the
conversation. Tokens come from a counter (``make_token_counter``): the default estimate, any
callable, ``tiktoken:ENCODING``, ``tokenizers:PATH/tokenizer.json`` or ``module:function``.

Every line that cannot be read raises ``BadTranscriptError`` naming file and line; with
``skip_bad=True`` it is recorded in ``ImportResult.bad`` instead (never dropped unseen).
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

from cupel_np._files import atomic_write_bytes
from cupel_np.errors import InvalidConfigError
from cupel_np.text import is_blank

FORMATS = ("openai", "claude-code", "messages")
MAP_TARGETS = ("content", "kind", "set", "timestamp", "source", "tokens", "pinned", "id")

_ROLE_KINDS = {
    "system": ("SystemPrompt", "Chat", True),
    "developer": ("SystemPrompt", "Chat", True),
    "user": ("Message", "Chat", False),
    "assistant": ("Message", "Chat", False),
    "tool": ("ToolOutput", "Tool", False),
    "function": ("ToolOutput", "Tool", False),
}


class BadTranscriptError(InvalidConfigError):
    """A transcript line or row that cannot be turned into items (names file and line)."""

    code = "bad_transcript"


@dataclass(frozen=True)
class BadRecord:
    file: str
    line: int  # 1-based line (JSONL, CSV) or 0-based row (Parquet, with ``unit == "row"``)
    message: str
    unit: str = "line"

    def __str__(self) -> str:
        return (
            f"{self.file}:{self.line}: {self.message}"
            if self.unit == "line"
            else f"{self.file}: row {self.line}: {self.message}"
        )


@dataclass
class ImportResult:
    """``table``: items (set column first, then the items schema); ``bad``: unreadable
    lines (only with ``skip_bad``); ``skipped``: counted parts that are not context
    (reason -> count, e.g. ``empty content``, ``claude-code record 'summary'``)."""

    table: pa.Table
    set_column: str
    bad: list[BadRecord] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)
    lines: int = 0

    @property
    def items(self) -> int:
        return self.table.num_rows

    @property
    def conversations(self) -> int:
        return len(self.table.column(self.set_column).unique())

    def write_parquet(self, path) -> Path:
        """Write the items atomically (temp file + rename)."""
        import pyarrow.parquet as pq

        buf = pa.BufferOutputStream()
        pq.write_table(self.table, buf, compression="zstd")
        atomic_write_bytes(path, buf.getvalue().to_pybytes())
        return Path(path)

    def summary(self) -> dict:
        return {
            "lines": self.lines,
            "items": self.items,
            "conversations": self.conversations,
            "bad": [str(b) for b in self.bad],
            "skipped": dict(self.skipped),
        }


# ----------------------------------------------------------------------------- token counters
# The default estimate: text is cut into pieces like a BPE pre-tokenizer would (letter runs,
# digit groups of up to 3, punctuation runs, line breaks, other scripts' characters) and each
# piece costs a fixed share of tokens. Measured against a real 65k-vocabulary BPE tokenizer
# (see README "Importing transcripts"); it needs no download and is deterministic.
_PIECE = re.compile(
    r"(?P<word>[A-Za-z]+)|(?P<digits>[0-9]{1,3})|(?P<nl>\s*\n\s*)|(?P<space>[ \t]+)"
    r"|(?P<punct>[!-/:-@\[-`{-~]+)|(?P<other>[^\x00-\x7f])|(?P<ctl>[\x00-\x1f\x7f])"
)


def estimate_tokens(text: str) -> int:
    """Deterministic token estimate (no download): a word of up to 4 letters is 1 token and
    each further 6 letters add one, a digit group of up to 3 is 1, punctuation costs one per
    1.6 characters, a line break 1, a non-ASCII character 1, runs of spaces one per 4 beyond
    the first; the sum is rounded up. 0 for empty text."""
    n = 0.0
    for m in _PIECE.finditer(text):
        kind = m.lastgroup
        s = m.group()
        if kind == "word":
            n += 1 + max(0, len(s) - 4) / 6
        elif kind == "punct":
            n += len(s) / 1.6
        elif kind == "space":
            n += (len(s) - 1) / 4  # a single space merges into the next piece
        else:  # digits, line break, non-ASCII character, control character
            n += 1
    return int(math.ceil(n))


def make_token_counter(spec=None) -> tuple[Callable[[str], int], str]:
    """A ``str -> int`` counter and its name from ``spec``: ``None`` / ``"estimate"`` (the
    default estimate), ``"chars4"`` (ceil(len/4)), a callable, ``"tiktoken:ENCODING"``,
    ``"tokenizers:PATH"`` (a Hugging Face ``tokenizer.json``) or ``"module:function"``."""
    if spec is None or spec == "estimate":
        return estimate_tokens, "estimate"
    if callable(spec):
        return spec, getattr(spec, "__name__", "callable")
    if not isinstance(spec, str):
        raise InvalidConfigError(f"tokenizer must be a name, 'module:function' or a callable, got {spec!r}")
    if spec == "chars4":
        return (lambda s: (len(s) + 3) // 4), "chars4"
    prefix, sep, rest = spec.partition(":")
    if not sep or not rest:
        raise InvalidConfigError(
            f"tokenizer {spec!r}: expected 'estimate', 'chars4', 'tiktoken:ENCODING', "
            "'tokenizers:PATH' or 'module:function'"
        )
    if prefix == "tiktoken":
        try:
            import tiktoken
        except ImportError:
            raise InvalidConfigError(
                f"tokenizer {spec!r}: tiktoken is not installed (pip install 'cupel-np[tokenizers]')"
            ) from None
        try:
            enc = tiktoken.get_encoding(rest)
        except Exception as e:  # unknown name, or its BPE file cannot be fetched
            raise InvalidConfigError(
                f"tokenizer {spec!r}: tiktoken cannot load {rest!r}: {type(e).__name__}: {e}"
            ) from None
        return (lambda s: len(enc.encode(s, disallowed_special=()))), spec
    if prefix == "tokenizers":
        try:
            from tokenizers import Tokenizer
        except ImportError:
            raise InvalidConfigError(
                f"tokenizer {spec!r}: the tokenizers package is not installed (pip install tokenizers)"
            ) from None
        try:
            tok = Tokenizer.from_file(rest)
        except Exception as e:
            raise InvalidConfigError(f"tokenizer {spec!r}: cannot load {rest!r}: {e}") from None
        return (lambda s: len(tok.encode(s, add_special_tokens=False).ids)), spec
    import importlib

    try:
        mod = importlib.import_module(prefix)
    except ImportError as e:
        raise InvalidConfigError(f"tokenizer {spec!r}: cannot import module {prefix!r}: {e}") from None
    fn: Any = mod
    for part in rest.split("."):
        fn = getattr(fn, part, None)
        if fn is None:
            raise InvalidConfigError(f"tokenizer {spec!r}: module {prefix!r} has no {rest!r}")
    if not callable(fn):
        raise InvalidConfigError(f"tokenizer {spec!r}: {rest!r} is not callable")
    return fn, spec


# ----------------------------------------------------------------------------- records
class _Bad(Exception):
    """A problem with the current line (caught per line, reported with file and line)."""


@dataclass
class _Part:
    content: str
    kind: str
    source: str
    pinned: bool
    role: str
    timestamp: datetime | None = None
    id: str | None = None
    tool_name: str | None = None
    tool_call_id: str | None = None
    tokens: int | None = None


def _parse_ts(v, where: str) -> datetime | None:
    if v is None:
        return None
    if isinstance(v, bool):
        raise _Bad(f"{where}: timestamp must be an ISO 8601 string or epoch seconds, got {v!r}")
    if isinstance(v, (int, float)):
        if not math.isfinite(v):
            raise _Bad(f"{where}: timestamp {v!r} is not finite")
        secs = v / 1000.0 if abs(v) > 1e11 else float(v)  # epoch milliseconds are common too
        try:
            return datetime.fromtimestamp(secs, tz=UTC)
        except (OverflowError, OSError, ValueError):
            raise _Bad(f"{where}: timestamp {v!r} is out of range") from None
    if isinstance(v, datetime):
        return v if v.tzinfo else v.replace(tzinfo=UTC)
    if isinstance(v, str):
        try:
            d = datetime.fromisoformat(v.strip())
        except ValueError:
            raise _Bad(f"{where}: timestamp {v!r} is not ISO 8601") from None
        return (d if d.tzinfo else d.replace(tzinfo=UTC)).astimezone(UTC)
    raise _Bad(f"{where}: timestamp must be an ISO 8601 string or epoch seconds, got {type(v).__name__}")


def _text_of(content, where: str, skipped: dict) -> str:
    """A message's text: a string, or a list of parts whose text parts are joined."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for i, p in enumerate(content):
            if isinstance(p, str):
                out.append(p)
            elif isinstance(p, dict) and isinstance(p.get("text"), str):
                out.append(p["text"])
            elif isinstance(p, dict) and isinstance(p.get("type"), str):
                _count(skipped, f"non-text part '{p['type']}'")
            else:
                raise _Bad(f"{where}: content part {i} must be a string or an object with 'text', got {p!r:.60}")
        return "\n".join(out)
    raise _Bad(f"{where}: content must be a string or a list of parts, got {type(content).__name__}")


def _count(skipped: dict, reason: str, n: int = 1) -> None:
    skipped[reason] = skipped.get(reason, 0) + n


def _role_part(role, where: str) -> tuple[str, str, bool, str]:
    """(kind, source, pinned, normalised role) of a chat role."""
    if not isinstance(role, str) or role.strip().lower() not in _ROLE_KINDS:
        raise _Bad(f"{where}: role must be one of {', '.join(_ROLE_KINDS)}, got {role!r}")
    r = role.strip().lower()
    kind, source, pinned = _ROLE_KINDS[r]
    return kind, source, pinned, r


def _openai_conversation(obj, where: str, skipped: dict, tool_call_kind: str) -> tuple[str | None, list[_Part]]:
    if not isinstance(obj, dict):
        raise _Bad(f"expected a JSON object with 'messages', got {type(obj).__name__}")
    msgs = obj.get("messages")
    if not isinstance(msgs, list):
        raise _Bad("missing 'messages' (a list of chat messages)")
    cid = obj.get("conversation_id", obj.get("id"))
    if cid is not None and not isinstance(cid, (str, int)):
        raise _Bad(f"conversation id must be a string or integer, got {cid!r}")
    parts: list[_Part] = []
    if not msgs:
        _count(skipped, "conversation without messages")
    for i, m in enumerate(msgs):
        w = f"messages[{i}]"
        if not isinstance(m, dict):
            raise _Bad(f"{w}: expected an object, got {type(m).__name__}")
        kind, source, pinned, role = _role_part(m.get("role"), f"{w}.role")
        ts = _parse_ts(m.get("timestamp", m.get("created_at")), f"{w}.timestamp")
        mid = m.get("id")
        mid = None if mid is None else str(mid)
        text = _text_of(m.get("content"), f"{w}.content", skipped)
        name = m.get("name") if isinstance(m.get("name"), str) else None
        tcid = m.get("tool_call_id") if isinstance(m.get("tool_call_id"), str) else None
        if is_blank(text):
            if not m.get("tool_calls"):
                _count(skipped, "empty content")
        else:
            parts.append(
                _Part(text, kind, source, pinned, role, ts, mid, name if role in ("tool", "function") else None, tcid)
            )
        calls = m.get("tool_calls")
        if calls is None and isinstance(m.get("function_call"), dict):
            calls = [{"function": m["function_call"]}]
        if calls is not None:
            if not isinstance(calls, list):
                raise _Bad(f"{w}.tool_calls: expected a list, got {type(calls).__name__}")
            for j, c in enumerate(calls):
                fn = c.get("function") if isinstance(c, dict) else None
                if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
                    raise _Bad(f"{w}.tool_calls[{j}]: expected {{'function': {{'name', 'arguments'}}}}, got {c!r:.80}")
                args = fn.get("arguments", "")
                if not isinstance(args, str):
                    args = json.dumps(args, ensure_ascii=False)
                parts.append(
                    _Part(
                        f"{fn['name']}({args})",
                        tool_call_kind,
                        "Tool",
                        False,
                        role,
                        ts,
                        mid,
                        fn["name"],
                        c.get("id") if isinstance(c.get("id"), str) else None,
                    )
                )
    return (None if cid is None else str(cid)), parts


def _claude_record(obj, where: str, skipped: dict, tool_call_kind: str) -> tuple[str | None, list[_Part]]:
    if not isinstance(obj, dict):
        raise _Bad(f"expected a JSON object, got {type(obj).__name__}")
    rtype = obj.get("type")
    if not isinstance(rtype, str):
        raise _Bad("record has no 'type'")
    if rtype not in ("user", "assistant"):
        _count(skipped, f"claude-code record '{rtype}'")
        return None, []
    msg = obj.get("message")
    if not isinstance(msg, dict):
        raise _Bad(f"{rtype} record has no 'message' object")
    sid = obj.get("sessionId")
    if not isinstance(sid, str) or not sid:
        raise _Bad(f"{rtype} record has no 'sessionId'")
    ts = _parse_ts(obj.get("timestamp"), "timestamp")
    uid = obj.get("uuid") if isinstance(obj.get("uuid"), str) else None
    role = rtype
    content = msg.get("content")
    parts: list[_Part] = []
    if isinstance(content, str):
        blocks = [{"type": "text", "text": content}]
    elif isinstance(content, list):
        blocks = content
    else:
        raise _Bad(f"message.content must be a string or a list of blocks, got {type(content).__name__}")
    for i, b in enumerate(blocks):
        w = f"message.content[{i}]"
        if not isinstance(b, dict) or not isinstance(b.get("type"), str):
            raise _Bad(f"{w}: expected a block with a 'type', got {b!r:.60}")
        bt = b["type"]
        if bt == "text":
            if not isinstance(b.get("text"), str):
                raise _Bad(f"{w}: text block without a string 'text'")
            if is_blank(b["text"]):
                _count(skipped, "empty content")
                continue
            parts.append(_Part(b["text"], "Message", "Chat", False, role, ts, uid))
        elif bt == "tool_use":
            name = b.get("name")
            inp: Any = b.get("input", {})
            if not isinstance(name, str):
                raise _Bad(f"{w}: tool_use block without a 'name'")
            parts.append(
                _Part(
                    f"{name}({json.dumps(inp, ensure_ascii=False)})",
                    tool_call_kind,
                    "Tool",
                    False,
                    role,
                    ts,
                    uid,
                    name,
                    b.get("id") if isinstance(b.get("id"), str) else None,
                )
            )
        elif bt == "tool_result":
            text = _text_of(b.get("content"), f"{w}.content", skipped)
            if is_blank(text):
                _count(skipped, "empty content")
                continue
            tcid = b.get("tool_use_id") if isinstance(b.get("tool_use_id"), str) else None
            parts.append(_Part(text, "ToolOutput", "Tool", False, "tool", ts, uid, None, tcid))
        else:  # thinking, redacted_thinking, image, document ...: not resent as plain context
            _count(skipped, f"claude-code block '{bt}'")
    return sid, parts


# ----------------------------------------------------------------------------- generic messages
def parse_mapping(spec) -> dict[str, str]:
    """``"content=text,kind=role"`` (or a dict) -> {target: column}; targets in MAP_TARGETS."""
    if spec is None:
        return {}
    if isinstance(spec, dict):
        pairs = list(spec.items())
    else:
        pairs = []
        for piece in str(spec).split(","):
            if not piece.strip():
                continue
            k, sep, v = piece.partition("=")
            if not sep or not k.strip() or not v.strip():
                raise InvalidConfigError(f"mapping entry {piece!r}: expected TARGET=COLUMN")
            pairs.append((k.strip(), v.strip()))
    out = {}
    for k, v in pairs:
        k = "kind" if k == "role" else k
        if k not in MAP_TARGETS:
            raise InvalidConfigError(f"mapping target {k!r}: expected one of {', '.join(MAP_TARGETS)}")
        out[k] = v
    return out


def _rows(path: Path) -> Iterator[tuple[int, str, Any]]:
    """(line or row number, unit, record) of a JSONL / CSV / Parquet messages file; a JSON
    line that does not parse is yielded as an exception."""
    suf = path.suffix.lower()
    if suf == ".parquet":
        import pyarrow.parquet as pq

        r = 0
        for batch in pq.ParquetFile(path).iter_batches(batch_size=65536):
            for rec in batch.to_pylist():
                yield r, "row", rec
                r += 1
    elif suf == ".csv":
        with path.open(newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            start = 2
            for rec in reader:
                yield start, "line", rec
                start = reader.line_num + 1
    elif suf in (".jsonl", ".json", ".ndjson"):
        yield from _json_lines(path)
    else:
        raise InvalidConfigError(f"{path}: messages files must be .jsonl, .csv or .parquet, got {suf or 'no suffix'!r}")


def _check_mapped_columns(path: Path, mapping: dict) -> None:
    """A file-level problem, whatever ``skip_bad`` says: a column named in the mapping that a
    CSV / Parquet messages file does not have (every row would be bad)."""
    suf = path.suffix.lower()
    if not mapping or suf not in (".csv", ".parquet"):
        return
    if suf == ".parquet":
        import pyarrow.parquet as pq

        names = pq.read_schema(path).names
    else:
        with path.open(newline="", encoding="utf-8") as f:
            names = next(csv.reader(f), [])
    missing = [f"{t}={c}" for t, c in mapping.items() if c not in names]
    if missing:
        raise BadTranscriptError(
            f"{path}: the mapping names column(s) the file does not have: {', '.join(missing)} "
            f"(columns: {', '.join(names) or 'none'})"
        )


def _check_not_all_bad(fmt: str, name: str, n_records: int, bad: list) -> None:
    """A file none of whose lines can be read is a file-level problem (the wrong format, a
    missing column), an error whatever ``skip_bad`` says: skipping every line would write an
    empty items file."""
    if n_records and len(bad) == n_records:
        first = bad[0]
        raise BadTranscriptError(
            f"{name}: none of its {n_records} {first.unit}(s) could be read as {fmt!r} (first, {first.unit} "
            f"{first.line}: {first.message}); is the file in another format, or is a column mapping missing?"
        )


def _json_lines(path: Path) -> Iterator[tuple[int, str, Any]]:
    with path.open("rb") as f:
        for n, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            try:
                yield n, "line", json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                yield n, "line", _Bad(f"not valid JSON: {e}")
            except RecursionError:
                yield n, "line", _Bad("not readable: JSON nested too deeply")


def _message_row(rec, mapping: dict, default_set: str, skipped: dict) -> tuple[str, list[_Part]]:
    if not isinstance(rec, dict):
        raise _Bad(f"expected an object, got {type(rec).__name__}")
    col = {t: mapping.get(t, t) for t in MAP_TARGETS}
    if "kind" not in mapping and "kind" not in rec and "role" in rec:
        col["kind"] = "role"
    if "set" not in mapping and "set" not in rec and "conversation_id" in rec:
        col["set"] = "conversation_id"
    if col["content"] not in rec:
        raise _Bad(f"no content column {col['content']!r} (map it with content=COLUMN)")
    text = rec[col["content"]]
    if text is None or (isinstance(text, str) and is_blank(text)):
        _count(skipped, "empty content")
        return default_set, []
    if not isinstance(text, str):
        text = _text_of(text, col["content"], skipped)
    kind_v = rec.get(col["kind"])
    kind, source, pinned, role = "Message", "Chat", False, None
    if kind_v is not None and not (isinstance(kind_v, str) and kind_v == ""):
        if not isinstance(kind_v, str) or is_blank(kind_v):
            raise _Bad(f"column {col['kind']!r}: kind/role must be a non-blank string, got {kind_v!r}")
        if kind_v.strip().lower() in _ROLE_KINDS:
            kind, source, pinned, role = _role_part(kind_v, col["kind"])
        else:
            kind = kind_v
    src = rec.get(col["source"])
    if src is not None and src != "":
        if not isinstance(src, str) or is_blank(src):
            raise _Bad(f"column {col['source']!r}: source must be a non-blank string, got {src!r}")
        source = src
    pin = rec.get(col["pinned"])
    if pin is not None and pin != "":
        if isinstance(pin, str) and pin.strip().lower() in ("true", "1", "yes", "false", "0", "no"):
            pin = pin.strip().lower() in ("true", "1", "yes")
        if not isinstance(pin, bool):
            raise _Bad(f"column {col['pinned']!r}: pinned must be true/false, got {pin!r}")
        pinned = pin
    tokens = rec.get(col["tokens"]) if "tokens" in mapping or "tokens" in rec else None
    if tokens is not None and tokens != "":
        if isinstance(tokens, str):
            try:
                tokens = int(tokens.strip())
            except ValueError:
                raise _Bad(f"column {col['tokens']!r}: tokens must be an integer, got {tokens!r}") from None
        if isinstance(tokens, bool) or not isinstance(tokens, int):
            raise _Bad(f"column {col['tokens']!r}: tokens must be an integer, got {tokens!r}")
    else:
        tokens = None
    ts_v = rec.get(col["timestamp"])
    ts = _parse_ts(ts_v if ts_v != "" else None, f"column {col['timestamp']!r}")
    sid = rec.get(col["set"])
    sid = default_set if sid is None or sid == "" else str(sid)
    mid = rec.get(col["id"])
    part = _Part(text, kind, source, pinned, role or "", ts, None if mid in (None, "") else str(mid))
    part.tokens = tokens
    return sid, [part]


# ----------------------------------------------------------------------------- entry point
_ITEM_COLUMNS = ("content", "tokens", "kind", "source", "pinned", "timestamp", "tags", "metadata")


def _transcript_files(paths) -> list[Path]:
    """The files ``paths`` names (a path or a list; a directory means its transcript files,
    sorted); an error for a missing file, an empty directory or no file at all."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    files: list[Path] = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            found = sorted(
                x for x in p.rglob("*") if x.suffix.lower() in (".jsonl", ".csv", ".parquet") and x.is_file()
            )
            if not found:
                raise InvalidConfigError(f"no transcript files in directory {p}")
            files.extend(found)
        elif not p.exists():
            raise InvalidConfigError(f"transcript file not found: {p}")
        else:
            files.append(p)
    if not files:
        raise InvalidConfigError("no transcript files given")
    return files


def _counted(parts: list[_Part], count: Callable[[str], int]) -> list[int]:
    """Each part's tokens: its own, else the counter's (which must return an integer >= 0)."""
    counted = []
    for pt in parts:
        if pt.tokens is not None:
            counted.append(pt.tokens)
            continue
        k = count(pt.content)
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            try:
                k2 = int(k)
            except (TypeError, ValueError):
                k2 = None
            if k2 is None or k2 != k or k2 < 0 or isinstance(k, bool):
                raise InvalidConfigError(f"token counter returned {k!r} (expected an integer >= 0)")
            k = k2
        counted.append(k)
    return counted


def _append_items(
    cols: dict[str, list], set_column: str, sid, parts: list[_Part], counted: list[int], path: Path, n: int, unit: str
) -> None:
    """One item per part, appended to the columns (metadata names the file and line or row)."""
    for pt, k in zip(parts, counted):
        md = {"role": pt.role, "file": path.name, "line" if unit == "line" else "row": str(n)}
        if pt.id:
            md["message_id"] = pt.id
        if pt.tool_name:
            md["tool_name"] = pt.tool_name
        if pt.tool_call_id:
            md["tool_call_id"] = pt.tool_call_id
        if not pt.role:
            del md["role"]
        cols[set_column].append(sid)
        cols["content"].append(pt.content)
        cols["tokens"].append(k)
        cols["kind"].append(pt.kind)
        cols["source"].append(pt.source)
        cols["pinned"].append(pt.pinned)
        cols["timestamp"].append(pt.timestamp)
        cols["tags"].append([pt.role] if pt.role else [])
        cols["metadata"].append(list(md.items()))


def _items_schema(set_column: str) -> pa.Schema:
    return pa.schema(
        [
            (set_column, pa.string()),
            ("content", pa.string()),
            ("tokens", pa.int64()),
            ("kind", pa.string()),
            ("source", pa.string()),
            ("pinned", pa.bool_()),
            ("timestamp", pa.timestamp("us", tz="UTC")),
            ("tags", pa.list_(pa.string())),
            ("metadata", pa.map_(pa.string(), pa.string())),
        ]
    )


def import_transcripts(
    fmt: str,
    paths: str | Path | Sequence[str | Path],
    *,
    mapping: str | dict[str, str] | None = None,
    tokenizer: str | Callable[[str], int] | None = None,
    skip_bad: bool = False,
    set_column: str = "conversation_id",
    tool_call_kind: str = "ToolCall",
) -> ImportResult:
    """Read transcripts in ``fmt`` (one of ``FORMATS``) from ``paths`` (a path or a list; a
    directory means its ``*.jsonl`` files, sorted) into items. See the module docstring."""
    if fmt not in FORMATS:
        raise InvalidConfigError(f"unknown transcript format {fmt!r}; known: {', '.join(FORMATS)}")
    files = _transcript_files(paths)
    if not isinstance(tool_call_kind, str) or is_blank(tool_call_kind):
        raise InvalidConfigError(f"tool_call_kind must be a non-blank string, got {tool_call_kind!r}")
    if (
        not isinstance(set_column, str)
        or not set_column
        or set_column in ("content", "tokens", "kind", "source", "pinned", "timestamp", "metadata", "tags")
    ):
        raise InvalidConfigError(f"set_column {set_column!r} clashes with an items column")
    mapping = parse_mapping(mapping)
    if mapping and fmt != "messages":
        raise InvalidConfigError(f"a column mapping applies to the 'messages' format, not {fmt!r}")
    count, _ = make_token_counter(tokenizer)

    cols: dict[str, list] = {k: [] for k in (set_column, *_ITEM_COLUMNS)}
    bad: list[BadRecord] = []
    skipped: dict[str, int] = {}
    lines = 0
    for path in files:
        name = str(path)
        if fmt == "messages":
            _check_mapped_columns(path, mapping)
            records = _rows(path)
        else:
            records = _json_lines(path)
        file_records, file_bad = 0, len(bad)
        for n, unit, rec in records:
            lines += 1
            file_records += 1
            local_skipped: dict[str, int] = {}
            try:
                if isinstance(rec, _Bad):
                    raise rec
                if fmt == "openai":
                    sid, parts = _openai_conversation(rec, name, local_skipped, tool_call_kind)
                    if sid is None:
                        sid = f"{path.stem}:{n}"
                elif fmt == "claude-code":
                    sid, parts = _claude_record(rec, name, local_skipped, tool_call_kind)
                else:
                    sid, parts = _message_row(rec, mapping, path.stem, local_skipped)
                counted = _counted(parts, count)
            except _Bad as e:
                # without skip_bad the first bad line is raised at the end of its file, once it
                # is known not to be a file-level problem (every line bad)
                bad.append(BadRecord(name, n, str(e), unit))
                continue
            for r, c in local_skipped.items():
                _count(skipped, r, c)
            _append_items(cols, set_column, sid, parts, counted, path, n, unit)
        _check_not_all_bad(fmt, name, file_records, bad[file_bad:])
        if not skip_bad and len(bad) > file_bad:
            b = bad[file_bad]
            raise BadTranscriptError(f"{b} (use --skip-bad / skip_bad=True to skip and list bad lines)")
    table = pa.Table.from_pydict(cols, schema=_items_schema(set_column))
    return ImportResult(table, set_column, bad, skipped, lines)


# --------------------------------------------------------------------------- heuristic labels
#: what counts as a distinctive string: a path or file name, an identifier with an underscore,
#: a dot or an inner capital, a number of 3+ digits, a hex string of 7+ characters
_DISTINCTIVE = re.compile(
    r"(?:[\w.-]*/[\w./-]+)"  # paths: src/app.py, /var/log/x
    r"|(?:\b\w+\.[A-Za-z]{1,5}\b)"  # file names: app.py, k8s.yaml
    r"|(?:\b[A-Za-z]*[a-z][A-Z]\w*\b)"  # camelCase identifiers
    r"|(?:\b\w+_\w+\b)"  # snake_case identifiers
    r"|(?:\b[0-9a-f]{7,}\b)"  # hashes
    r"|(?:\b\d{3,}\b)"  # numbers with 3+ digits
)


def distinctive_strings(text: str, min_length: int = 4) -> set[str]:
    """The distinctive strings of ``text`` (paths, file names, camelCase / snake_case
    identifiers, hex hashes, numbers of 3+ digits) at least ``min_length`` characters long."""
    return {m for m in _DISTINCTIVE.findall(text) if len(m) >= min_length}


def reuse_labels(table: pa.Table, set_column: str = "conversation_id", *, min_length: int = 4) -> pa.Array:
    """A heuristic relevance label for imported transcripts (``import_transcripts`` output):
    a ``ToolOutput`` row is relevant (True) when one of its distinctive strings (see
    ``distinctive_strings``) appears among the distinctive strings of a LATER assistant
    message of the same conversation (rows in import order); otherwise False. Every other
    row is unlabelled (null), so outcome metrics are about tool outputs only.

    What it captures: the agent quoting or acting on a tool result by name - a file path it
    then edits, an error code or line number it mentions, a commit hash, an identifier it goes
    on to use. What it does not: a result that mattered without being quoted (a test run that
    passed, a search that found nothing, knowledge used in paraphrase), a string that reappears
    by coincidence (a common path repeated in every listing), or what the user needed;
    assistant messages before the output count for nothing, and tool calls are not messages.
    Use it to compare policies when no labels exist, never as ground truth."""
    for name in (set_column, "content", "kind"):
        if name not in table.column_names:
            raise InvalidConfigError(
                f"reuse_labels: column {name!r} not found (columns: {', '.join(table.column_names)})"
            )
    keys = table.column(set_column).to_pylist()
    content = table.column("content").to_pylist()
    kinds = [str(k).lower() for k in table.column("kind").to_pylist()]
    roles = _roles(table)
    labels: list[bool | None] = [None] * table.num_rows
    rows_of: dict[Any, list[int]] = {}
    for i, k in enumerate(keys):
        rows_of.setdefault(k, []).append(i)
    for rows in rows_of.values():  # per conversation: walk backwards collecting later assistant strings
        later: set[str] = set()
        for i in reversed(rows):
            if kinds[i] == "tooloutput":
                labels[i] = bool(distinctive_strings(content[i] or "", min_length) & later)
            elif kinds[i] == "message" and roles[i] == "assistant":
                later |= distinctive_strings(content[i] or "", min_length)
    return pa.array(labels, pa.bool_())


def _roles(table: pa.Table) -> list[str | None]:
    """Each row's role: the ``role`` metadata the importers write, else its first tag."""
    if "metadata" in table.column_names:
        md = table.column("metadata").to_pylist()
        roles = [dict(m or []).get("role") for m in md]
        if any(r is not None for r in roles):
            return roles
    if "tags" in table.column_names:
        return [(t[0] if t else None) for t in table.column("tags").to_pylist()]
    return [None] * table.num_rows
