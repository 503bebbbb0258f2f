"""The importers' shared core: parts, conversations, bad lines, and the items table they make.

A format module turns its files into :class:`Conversation` objects (a set key, its parts in
context order, and the API's own token counts where the log has them). This module counts
tokens, derives the tool-pair columns, calibrates, and builds the Arrow table.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

from cupel_np._files import atomic_write_bytes
from cupel_np._fs import RemotePath, as_path
from cupel_np.errors import BadTranscriptError, EmptyImportError, InvalidConfigError
from cupel_np.io.importers.jsonread import (  # noqa: F401 - the readers' shared names, kept here
    Bad,
    file_size,
    json_document,
    json_line_at,
    json_lines,
    streamed_array,
)
from cupel_np.io.importers.spool import COMPRESSED, spool_remote  # noqa: F401
from cupel_np.text import is_blank

ROLE_KINDS = {
    "system": ("SystemPrompt", "Chat", True),
    "developer": ("SystemPrompt", "Chat", True),
    "user": ("Message", "Chat", False),
    "assistant": ("Message", "Chat", False),
    "tool": ("ToolOutput", "Tool", False),
    "function": ("ToolOutput", "Tool", False),
}

#: the items columns every importer writes, after the set column
ITEM_COLUMNS = (
    "content",
    "tokens",
    "kind",
    "source",
    "pinned",
    "timestamp",
    "tags",
    "metadata",
    "tool_call_id",
    "tool_role",
    "tool_group",
    "segment",
)


@dataclass(frozen=True)
class BadRecord:
    """A line (or row) that could not be read: its file (as named in metadata), its line
    (``unit == "line"``, 1-based) or row (``unit == "row"``, 0-based), and why."""

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


@dataclass(slots=True)
class Part:
    """One future item. ``turn`` groups the parts of one assistant turn (its tool calls share
    a ``tool_group``); ``tool_role`` is ``"call"`` or ``"result"``; ``extra`` is more metadata."""

    content: str
    kind: str
    source: str
    pinned: bool
    role: str
    timestamp: datetime | None = None
    id: str | None = None
    tool_name: str | None = None
    tool_call_id: str | None = None
    tool_role: str | None = None
    turn: str | None = None
    tokens: int | None = None
    is_error: bool | None = None
    file: str = ""
    line: int = 0
    unit: str = "line"
    segment: int = 0
    extra: dict[str, str] | None = None
    row: dict[str, Any] | None = None  # extra columns of a messages row, kept as read


#: the content of a tool result without text (an empty output, or one whose images the log
#: does not hold): an item all the same, so that its call keeps its pair (``metadata.no_text``)
NO_TEXT = "[no text]"


def result_parts(
    text: str, ts, mid, call_id, is_error, skipped: dict, extra=None, *, name=None, role: str = "tool"
) -> list[Part]:
    """A tool result: its text as a ``ToolOutput`` linked to ``call_id``; without text, a
    ``NO_TEXT`` item (``metadata.no_text``) when it is linked, so that its call keeps its pair,
    else nothing (counted as ``empty content``)."""
    if blank(text) and not call_id:
        count(skipped, "empty content")
        return []
    if blank(text):
        text, extra = NO_TEXT, {**(extra or {}), "no_text": "true"}
    link = "result" if call_id else None
    return [Part(text, "ToolOutput", "Tool", False, role, ts, mid, name, call_id, link, is_error=is_error, extra=extra)]


def call_part(name: str, args, kind: str, role: str, ts, mid, call_id, turn, extra=None) -> Part:
    """A tool call: ``name(arguments)`` (``call_text``) as a ``kind`` item, linked to ``call_id``
    (a call without an id has no link), in the assistant turn ``turn``."""
    link = "call" if call_id else None
    return Part(call_text(name, args), kind, "Tool", False, role, ts, mid, name, call_id, link, turn, extra=extra)


@dataclass
class ApiCount:
    """The API's own count of a request's input: ``before`` parts of the conversation were in
    context when it was sent, and it counted ``tokens`` (input + cache tokens)."""

    before: int
    tokens: int


@dataclass
class Conversation:
    key: str
    parts: list[Part] = field(default_factory=list)
    api: list[ApiCount] = field(default_factory=list)
    order: tuple = ()  # sort key among conversations (first-seen position by default)
    #: only a total (SWE-agent's ``model_stats.tokens_sent``): (the API's input tokens summed
    #: over the requests, the part count before each request)
    api_sum: tuple[int, list[int]] | None = None


@dataclass
class Reader:
    """State a format reader shares with the driver: bad lines, skip counts, line count."""

    skipped: dict[str, int] = field(default_factory=dict)
    bad: list[BadRecord] = field(default_factory=list)
    lines: int = 0
    #: skip reasons that are records the format never means as context (metadata records):
    #: they do not count as lost content in the "skipped more than kept" check
    metadata_reasons: set[str] = field(default_factory=set)

    def skip(self, reason: str, n: int = 1, *, metadata: bool = False) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + n
        if metadata:
            self.metadata_reasons.add(reason)


def count(skipped: dict, reason: str, n: int = 1) -> None:
    skipped[reason] = skipped.get(reason, 0) + n


def parse_ts(v, where: str) -> datetime | None:
    if v is None:
        return None
    if isinstance(v, bool):
        raise Bad(f"{where}: timestamp must be an ISO 8601 string or epoch seconds, got {v!r}")
    if isinstance(v, (int, float)):
        if not math.isfinite(v):
            raise Bad(f"{where}: timestamp {v!r} is not finite")
        secs = v / 1000.0 if abs(v) > 1e11 else float(v)  # epoch milliseconds are common too
        try:
            return datetime.fromtimestamp(secs, tz=UTC)
        except (OverflowError, OSError, ValueError):
            raise Bad(f"{where}: timestamp {v!r} is out of range") from None
    if isinstance(v, datetime):
        return v if v.tzinfo else v.replace(tzinfo=UTC)
    if isinstance(v, str):
        try:
            d = datetime.fromisoformat(v.strip())
        except ValueError:
            raise Bad(f"{where}: timestamp {v!r} is not ISO 8601") from None
        return (d if d.tzinfo else d.replace(tzinfo=UTC)).astimezone(UTC)
    raise Bad(f"{where}: timestamp must be an ISO 8601 string or epoch seconds, got {type(v).__name__}")


def text_of(content, where: str, skipped: dict) -> str:
    """A message's text: a string, or a list of parts whose text parts are joined (``text``
    or LLaMA-Factory v1's ``{"type": "text", "value": ...}``); other parts are counted."""
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
            elif isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("value"), str):
                out.append(p["value"])
            elif isinstance(p, dict) and p.get("type") == "refusal" and isinstance(p.get("refusal"), str):
                out.append(p["refusal"])
            elif isinstance(p, dict) and isinstance(p.get("type"), str):
                count(skipped, f"non-text part '{p['type']}'")
            else:
                raise Bad(f"{where}: content part {i} must be a string or an object with 'text', got {p!r:.60}")
        return "\n".join(out)
    raise Bad(f"{where}: content must be a string or a list of parts, got {type(content).__name__}")


def role_part(role, where: str) -> tuple[str, str, bool, str]:
    """(kind, source, pinned, normalised role) of a chat role."""
    if not isinstance(role, str) or role.strip().lower() not in ROLE_KINDS:
        raise Bad(f"{where}: role must be one of {', '.join(ROLE_KINDS)}, got {role!r}")
    r = role.strip().lower()
    kind, source, pinned = ROLE_KINDS[r]
    return kind, source, pinned, r


def call_text(name: str, args) -> str:
    """A tool call's item text: ``name(arguments JSON)``."""
    if not isinstance(args, str):
        args = json.dumps(args, ensure_ascii=False)
    return f"{name}({args})"


def blank(s: str) -> bool:
    return is_blank(s)


# ----------------------------------------------------------------------------- files
TRANSCRIPT_SUFFIXES = (".jsonl", ".json", ".ndjson", ".csv", ".tsv", ".parquet", ".traj")
#: what a directory's compressed transcript files end with (``logs.jsonl.gz``: ``spool.decompressed``)
_COMPRESSED_SUFFIXES = tuple(s + c for s in TRANSCRIPT_SUFFIXES for c in COMPRESSED)


def transcript_files(paths) -> list[tuple[Any, str]]:
    """(file, its name in metadata) for every file ``paths`` names (a path or a list; a
    directory means its transcript files, compressed ones too (``.gz``, ``.bz2``, ``.xz``,
    ``.zst``), sorted, each named relative to the directory as given, e.g.
    ``logs/proj/abc.jsonl``); an error for a missing file, an empty directory
    or no file at all."""
    if isinstance(paths, (str, Path, RemotePath)):
        paths = [paths]
    files: list[tuple[Any, str]] = []
    for given in paths:
        p: Any = as_path(given)  # a local Path, or a RemotePath for an object-store URL
        if p.is_dir():
            found = sorted(
                x
                for x in p.rglob("*")
                if x.name.lower().endswith(TRANSCRIPT_SUFFIXES + _COMPRESSED_SUFFIXES) and x.is_file()
            )
            if not found:
                raise InvalidConfigError(f"no transcript files in directory {p}")
            files.extend((x, str(p / x.relative_to(p))) for x in found)
        elif not p.exists():
            raise InvalidConfigError(f"transcript file not found: {p}")
        else:
            files.append((p, str(p)))
    if not files:
        raise InvalidConfigError("no transcript files given")
    seen: set[Any] = set()
    unique = []
    for f, name in files:  # a file named twice (or also through its directory) is read once
        key = f.resolve()
        if key not in seen:
            seen.add(key)
            unique.append((f, name))
    return unique


def check_not_all_bad(fmt: str, name: str, n_records: int, bad: list) -> None:
    """A file none of whose lines can be read is a file-level problem (the wrong format, a
    missing column), an error whatever ``skip_bad`` says."""
    if n_records and len(bad) == n_records:
        first = bad[0]
        raise BadTranscriptError(
            f"{name}: none of its {n_records} {first.unit}(s) could be read as {fmt!r} (first, {first.unit} "
            f"{first.line}: {first.message}); is the file in another format, or is a column mapping missing?"
        )


def raise_first_bad(bad: list[BadRecord], since: int, skip_bad: bool) -> None:
    if not skip_bad and len(bad) > since:
        raise BadTranscriptError(f"{bad[since]} (use --skip-bad / skip_bad=True to skip and list bad lines)")


# ----------------------------------------------------------------------------- result
@dataclass
class ImportResult:
    """``table``: items (set column first, then the items schema); ``bad``: unreadable
    lines (only with ``skip_bad``); ``skipped``: counted parts that are not context
    (reason -> count, e.g. ``empty content``, ``claude-code record 'summary'``);
    ``tokens``: the estimate against the API's own counts, per conversation (see
    ``docs/importing.md``); ``counter``: the token counter's name."""

    table: pa.Table | None
    set_column: str
    bad: list[BadRecord] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)
    lines: int = 0
    tokens: list[dict] = field(default_factory=list)
    counter: str = "estimate"
    format: str = ""
    metadata_reasons: set[str] = field(default_factory=set)
    #: a streamed import (``import_to_parquet``; ``table`` is None): the file written and its
    #: (items, conversations)
    out: Any = None
    written: tuple[int, int] | None = None

    @property
    def items(self) -> int:
        """The number of items imported (rows of the table, or of the file a streamed import wrote)."""
        if self.table is None:
            return self.written[0] if self.written else 0
        return self.table.num_rows

    @property
    def conversations(self) -> int:
        """The number of distinct sets (values of the set column)."""
        if self.table is None:
            return self.written[1] if self.written else 0
        return len(self.table.column(self.set_column).unique())

    @property
    def lost(self) -> int:
        """Bad lines plus skipped parts that held content (metadata records not counted)."""
        return len(self.bad) + sum(n for r, n in self.skipped.items() if r not in self.metadata_reasons)

    def write_parquet(self, path) -> Path:
        """Write the items atomically (temp file + rename)."""
        import pyarrow.parquet as pq

        if self.table is None:
            raise InvalidConfigError(f"this import was streamed to {self.out}; it holds no table to write again")
        buf = pa.BufferOutputStream()
        pq.write_table(self.table, buf, compression="zstd")
        atomic_write_bytes(path, buf.getvalue().to_pybytes())
        return as_path(path)  # type: ignore[return-value]  # a RemotePath for a URL

    def token_ratio(self) -> float | None:
        """The median over conversations of estimate growth / API growth (None without usage)."""
        ratios = sorted(t["ratio"] for t in self.tokens if t.get("ratio") is not None)
        if not ratios:
            return None
        m = len(ratios) // 2
        return ratios[m] if len(ratios) % 2 else (ratios[m - 1] + ratios[m]) / 2

    def summary(self) -> dict:
        """The counts as a dict (what ``cupel-np import --json`` prints): format, lines, items,
        conversations, bad lines, skipped reasons, the token counter and the estimate against
        the API's counts."""
        return {
            "format": self.format,
            "lines": self.lines,
            "items": self.items,
            "conversations": self.conversations,
            "bad": [str(b) for b in self.bad],
            "skipped": dict(self.skipped),
            "counter": self.counter,
            "tokens_vs_api": self.tokens,
            "token_ratio": self.token_ratio(),
        }

    def summary_lines(self, out, *, limit: int = 10) -> list[str]:
        """What ``cupel-np import`` prints: the counts line, the tokens line, then one line
        per conversation with API counts (at most ``limit``)."""
        skipped = "; ".join(f"{n} {r}" for r, n in sorted(self.skipped.items()))
        lines = [
            f"{self.items:,} items in {self.conversations:,} conversation(s) from {self.lines:,} line(s) -> {out} "
            f"(set column {self.set_column!r}); {len(self.bad)} bad line(s) skipped"
            + (f"; not context: {skipped}" if skipped else "")
        ]
        tok = f"tokens: {self.counter}"
        ratio = self.token_ratio()
        counted = [t for t in self.tokens if t.get("ratio") is not None]
        calibrated = sum(1 for t in self.tokens if t.get("calibrated"))
        if not self.tokens:
            tok += "; the log has no API token counts"
        elif ratio is None:
            tok += f"; {len(self.tokens)} conversation(s) with API counts, none with two requests to compare"
        else:
            tok += (
                f"; estimate vs API: the estimate grew {ratio:.2f}x as much (median of {len(counted)} conversation(s))"
                + (f"; calibrated {calibrated} conversation(s) to the API" if calibrated else "")
            )
        lines.append(tok)
        for t in self.tokens[:limit]:
            before = " before calibration" if t.get("calibrated") else ""
            if t.get("summed"):
                r = "" if t.get("ratio") is None else f"; the estimate was {t['ratio']:.2f}x the API's count"
                lines.append(
                    f"  {t['set']}: {t['requests']} request(s); summed over them, API {t['api']:,.0f} tokens, "
                    f"estimate{before} {t['estimate']:,.0f}{r}"
                )
                continue
            r = "" if t.get("ratio") is None else f"; the estimate grew {t['ratio']:.2f}x as much as the API's count"
            lines.append(
                f"  {t['set']}: {t['requests']} request(s); at the last, API {t['api']:,.0f} tokens, "
                f"estimate{before} {t['estimate']:,.0f}{r}"
            )
        if len(self.tokens) > limit:
            lines.append(f"  ... {len(self.tokens) - limit} more (--json lists them all)")
        return lines

    def check_not_empty(self, source: str = "") -> None:
        """Raise :class:`EmptyImportError` for 0 items, or more lost than kept; ``source`` (the
        input, as the user named it) is named in the message."""
        src = f" of {source}" if source else ""
        why = "; ".join(f"{n} {r}" for r, n in sorted(self.skipped.items()) if r not in self.metadata_reasons)
        meta = "; ".join(f"{n} {r}" for r, n in sorted(self.skipped.items()) if r in self.metadata_reasons)
        bad = f"{len(self.bad)} bad line(s)" + (f" (first: {self.bad[0]})" if self.bad else "")
        detail = f"skipped: {bad}" + (f"; {why}" if why else "") + (f"; not context: {meta}" if meta else "")
        if self.items == 0:
            raise EmptyImportError(
                f"the import{src} yielded 0 items from {self.lines} line(s) ({detail}); "
                "is this the right format? (allow_empty=True / --allow-empty permits an empty result)"
            )
        if self.lost > self.items:
            raise EmptyImportError(
                f"the import{src} skipped more than it kept: {self.items} item(s) kept, {self.lost} skipped ({detail}); "
                "is this the right format? (allow_empty=True / --allow-empty permits it)"
            )


def items_schema(set_column: str, extra: list[tuple[str, pa.DataType]] = ()) -> pa.Schema:  # type: ignore[assignment]
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
            ("tool_call_id", pa.string()),
            ("tool_role", pa.string()),
            ("tool_group", pa.string()),
            ("segment", pa.int64()),
            *extra,
        ]
    )


def tool_columns(conv: Conversation) -> list[str | None]:
    """Each part's ``tool_group``: calls of one assistant turn share
    ``<conversation>:<first call id of the turn>``, and every result answering one of them
    gets the same key; a result whose call is not in the conversation gets
    ``<conversation>:<its call id>`` (an orphan group); other parts None."""
    group_of_turn: dict[str, str] = {}
    group_of_call: dict[str, str] = {}
    for i, pt in enumerate(conv.parts):
        if pt.tool_role == "call" and pt.tool_call_id:
            turn = pt.turn if pt.turn is not None else f"#{i}"
            g = group_of_turn.setdefault(turn, f"{conv.key}:{pt.tool_call_id}")
            group_of_call.setdefault(pt.tool_call_id, g)
    out: list[str | None] = []
    for pt in conv.parts:
        if pt.tool_role == "call" and pt.tool_call_id:
            out.append(group_of_call[pt.tool_call_id])
        elif pt.tool_role == "result" and pt.tool_call_id:
            out.append(group_of_call.get(pt.tool_call_id, f"{conv.key}:{pt.tool_call_id}"))
        else:
            out.append(None)
    return out


def link_results(parts: list[Part]) -> None:
    """Give each tool result its call's name (where the result does not name it)."""
    names = {pt.tool_call_id: pt.tool_name for pt in parts if pt.tool_role == "call" and pt.tool_call_id}
    for pt in parts:
        if pt.tool_role == "result" and pt.tool_call_id and not pt.tool_name:
            pt.tool_name = names.get(pt.tool_call_id)


# ----------------------------------------------------------------------------- tokens vs API
def token_check(conv: Conversation, tokens: list[int]) -> dict | None:
    """The estimate against the API's counts for one conversation: the least-squares line
    ``api = prefix + slope * estimate`` through its recorded requests (estimate = the tokens
    of the parts before each request). ``ratio`` = 1 / slope (how the estimate's growth
    compares to the API's); None when fewer than two requests with distinct estimates.

    With only the API's total over the requests (``conv.api_sum``), the estimate summed over
    the same requests is compared with it: ``slope`` = API total / estimate total (what
    ``--calibrate`` multiplies by), ``ratio`` = 1 / slope, ``prefix`` None, ``summed`` True."""
    cum = [0]
    for k in tokens:
        cum.append(cum[-1] + k)
    if not conv.api and conv.api_sum is not None:
        total, befores = conv.api_sum
        est = float(sum(cum[min(b, len(tokens))] for b in befores))
        out_sum: dict[str, Any] = {"set": conv.key, "requests": len(befores), "estimate": est, "api": float(total)}
        if est > 0 and total > 0:
            out_sum.update(slope=total / est, prefix=None, ratio=est / total, summed=True)
        else:
            out_sum.update(slope=None, prefix=None, ratio=None, summed=True)
        return out_sum
    if not conv.api:
        return None
    xs = [float(cum[min(a.before, len(tokens))]) for a in conv.api]
    ys = [float(a.tokens) for a in conv.api]
    out: dict[str, Any] = {"set": conv.key, "requests": len(xs), "estimate": xs[-1], "api": ys[-1]}
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if n < 2 or sxx == 0:
        out.update(slope=None, prefix=None, ratio=None)
        return out
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    if slope <= 0:
        out.update(slope=None, prefix=None, ratio=None)
        return out
    out.update(slope=slope, prefix=my - slope * mx, ratio=1.0 / slope)
    return out


def calibrated(tokens: list[int], slope: float) -> list[int]:
    """Each count times ``slope``, rounded half up (a non-zero count stays at least 1)."""
    return [0 if k == 0 else max(1, math.floor(k * slope + 0.5)) for k in tokens]


# ----------------------------------------------------------------------------- table
#: text per chunk of conversations turned into Arrow at once (then their parts are released)
CHUNK_CHARS = 4 << 20


def check_chunk_chars(chunk_chars) -> None:
    """``chunk_chars`` must be a positive integer (call it before reading: ``iter_chunks``, a generator, checks late)."""
    if not isinstance(chunk_chars, int) or isinstance(chunk_chars, bool) or chunk_chars < 1:
        raise InvalidConfigError(f"chunk_chars must be a positive integer, got {chunk_chars!r}")


def iter_chunks(
    convs: Iterable[Conversation],
    set_column: str,
    count_all: Callable[[list[str]], list[int]],
    *,
    calibrate: bool = False,
    extra_columns: list[tuple[str, pa.DataType]] | None = None,
    repaired: list[int] | None = None,
    checks: list[dict] | None = None,
    chunk_chars: int = CHUNK_CHARS,
) -> Iterator[pa.Table]:
    """The items of ``convs`` (in order) as Arrow tables of whole conversations, one per chunk
    of about ``chunk_chars`` characters of content (a conversation larger than that is one
    chunk), each conversation's ``parts`` emptied once it is in Arrow. ``convs`` may be a
    generator that reads each conversation's parts only when it is reached (a streaming
    reader, or the Claude Code reader's second pass): then no more than one chunk of parts is
    held at a time. Each conversation's token check is appended to ``checks``;
    ``repaired[0]`` is increased by the number of strings whose lone surrogates (JSON
    ``\\ud800`` escapes: not valid Unicode, which Arrow cannot hold) were replaced by U+FFFD.
    Every chunk has the schema ``items_schema(set_column, extra_columns)``; chunks change no value."""
    check_chunk_chars(chunk_chars)
    extra = extra_columns or []
    fixes = repaired if repaired is not None else [0]
    out_checks = checks if checks is not None else []
    schema = items_schema(set_column, extra)
    pending: list[Conversation] = []
    size = 0
    for conv in convs:
        pending.append(conv)
        size += sum(len(pt.content) for pt in conv.parts)
        if size >= chunk_chars:
            yield _chunk(pending, set_column, count_all, calibrate, extra, schema, out_checks, fixes)
            pending, size = [], 0
    if pending:
        yield _chunk(pending, set_column, count_all, calibrate, extra, schema, out_checks, fixes)


def build_table(
    convs: Iterable[Conversation],
    set_column: str,
    count_all: Callable[[list[str]], list[int]],
    *,
    calibrate: bool = False,
    extra_columns: list[tuple[str, pa.DataType]] | None = None,
    repaired: list[int] | None = None,
) -> tuple[pa.Table, list[dict]]:
    """The items table of ``convs`` (in order) and the per-conversation token checks: the
    chunks of :func:`iter_chunks` (so the Python strings and the table are not both held
    whole), concatenated."""
    checks: list[dict] = []
    batches = list(
        iter_chunks(
            convs,
            set_column,
            count_all,
            calibrate=calibrate,
            extra_columns=extra_columns,
            repaired=repaired,
            checks=checks,
        )
    )
    table = pa.concat_tables(batches) if batches else items_schema(set_column, extra_columns or []).empty_table()
    return table, checks  # one chunk per batch: combining would copy the whole table


def _chunk(convs, set_column, count_all, calibrate, extra, schema, checks, fixes) -> pa.Table:
    cols: dict[str, list] = {k: [] for k in (set_column, *ITEM_COLUMNS)}
    for name, _ in extra:
        cols[name] = []
    texts = [pt.content for c in convs for pt in c.parts if pt.tokens is None]
    counted = iter(count_all(texts))
    del texts
    for conv in convs:
        link_results(conv.parts)
        tokens = [pt.tokens if pt.tokens is not None else next(counted) for pt in conv.parts]
        chk = token_check(conv, tokens)
        if chk is not None:
            if calibrate and chk["slope"] is not None:
                tokens = calibrated(tokens, chk["slope"])
                chk["calibrated"] = True
            checks.append(chk)
        groups = tool_columns(conv)
        _append(cols, set_column, conv, tokens, groups, extra)
        conv.parts = []
    try:
        return pa.Table.from_pydict(cols, schema=schema)
    except UnicodeEncodeError:  # a lone surrogate somewhere (rare): repair this chunk's strings
        for name, values in cols.items():
            cols[name] = [_valid_unicode(v, fixes) for v in values]
        return pa.Table.from_pydict(cols, schema=schema)


def _valid_unicode(v, fixes: list[int]):
    """``v`` (a string, or a list / tuple of them, nested) with each lone surrogate replaced
    by U+FFFD; ``fixes[0]`` counts the strings changed."""
    if isinstance(v, str):
        try:
            v.encode("utf-8")
            return v
        except UnicodeEncodeError:
            fixes[0] += 1
            return v.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(v, list):
        return [_valid_unicode(x, fixes) for x in v]
    if isinstance(v, tuple):
        return tuple(_valid_unicode(x, fixes) for x in v)
    return v


def _metadata(pt: Part) -> list[tuple[str, str]]:
    md = {"file": pt.file, "line" if pt.unit == "line" else "row": str(pt.line)}
    if pt.role:
        md["role"] = pt.role
    if pt.id:
        md["message_id"] = pt.id
    if pt.tool_name:
        md["tool_name"] = pt.tool_name
    if pt.tool_call_id:
        md["tool_call_id"] = pt.tool_call_id
    if pt.is_error is not None:
        md["is_error"] = "true" if pt.is_error else "false"
    if pt.extra:
        md.update(pt.extra)
    return list(md.items())


def _append(cols: dict, set_column: str, conv: Conversation, tokens: list[int], groups: list, extra: list) -> None:
    for pt, k, g in zip(conv.parts, tokens, groups):
        cols[set_column].append(conv.key)
        cols["content"].append(pt.content)
        cols["tokens"].append(k)
        cols["kind"].append(pt.kind)
        cols["source"].append(pt.source)
        cols["pinned"].append(pt.pinned)
        cols["timestamp"].append(pt.timestamp)
        cols["tags"].append([pt.role] if pt.role else [])
        cols["metadata"].append(_metadata(pt))
        cols["tool_call_id"].append(pt.tool_call_id if pt.tool_role else None)
        cols["tool_role"].append(pt.tool_role)
        cols["tool_group"].append(g)
        cols["segment"].append(pt.segment)
        for name, _ in extra:
            cols[name].append(None if pt.row is None else pt.row.get(name))
