"""Transcript import: chat and agent logs -> an items table (one item per message part).

Formats (``FORMATS``; docs/importing.md has the full table): ``openai`` (chat-completions
JSONL, ``tools`` included; Responses API bodies and Batch API input lines too) and
``anthropic`` (Messages API request bodies) and ``gemini`` (``generateContent`` bodies), read by
the same reader, ``claude-code`` (session logs) and ``stream-json`` (the headless /
Agent SDK message stream, read by the same reader), ``codex`` (Codex CLI session logs),
``sharegpt`` (ShareGPT and LLaMA-Factory
files), ``swe-agent`` (``.traj``), ``mini-swe-agent`` (``.traj.json``), ``otel``
(OpenTelemetry GenAI spans, OTLP JSON), ``messages`` (JSONL / CSV / TSV / Parquet with a column
mapping), and ``auto`` (detected from each file's first record).

Every imported table has the set column, the items columns, and the tool-pair columns
``tool_call_id`` / ``tool_role`` / ``tool_group`` and ``segment`` (see docs/items-format.md).
Tokens come from a counter (``make_token_counter``); ``estimate_tokens`` is the default.

Every line that cannot be read raises ``BadTranscriptError`` naming file and line; with
``skip_bad=True`` it is recorded in ``ImportResult.bad`` instead (never dropped unseen). An
import that yields nothing, or skips more than it keeps, raises ``EmptyImportError`` unless
``allow_empty=True``.

``import_transcripts`` returns the whole table; ``import_to_parquet`` (what ``cupel-np
import`` runs) writes the same file in chunks as it goes, holding one chunk plus what the
format's reader needs (docs/importing.md, "Memory", says which formats that bounds).

Constants:

* ``FORMATS``: the format names ``import_transcripts`` (and ``cupel-np import --format``)
  accepts, ``auto`` first.
* ``MAP_TARGETS``: the item fields a ``messages`` column mapping may name (``content``,
  ``kind``, ``set``, ``timestamp``, ``source``, ``tokens``, ``pinned``, ``id``); ``role`` is
  accepted as another name for ``kind``.
* ``SURROGATES``: the ``ImportResult.skipped`` reason that counts strings holding a lone
  surrogate (not valid Unicode), kept with U+FFFD in its place (nothing is dropped).
"""

from __future__ import annotations

import contextlib
import errno
import gc
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from cupel_np._fs import as_path
from cupel_np.errors import InvalidConfigError
from cupel_np.io.importers import claude_code, codex, detect, messages, openai, otel, sharegpt, trajectories
from cupel_np.io.importers.core import (
    ITEM_COLUMNS,
    BadRecord,
    BadTranscriptError,
    Conversation,
    EmptyImportError,
    ImportResult,
    Reader,
    build_table,
    check_chunk_chars,
    items_schema,
    iter_chunks,
    spool_remote,
    transcript_files,
)
from cupel_np.io.importers.labels import distinctive_strings, reuse_labels
from cupel_np.io.importers.messages import MAP_TARGETS, parse_mapping
from cupel_np.io.importers.spool import decompressed
from cupel_np.io.importers.tokens import count_all, estimate_tokens, estimate_tokens_many, make_token_counter
from cupel_np.io.parquet import _AtomicWriter, _finish_all
from cupel_np.text import is_blank

#: the count of strings repaired for Arrow (in ``ImportResult.skipped``; nothing is dropped)
SURROGATES = "text with a lone surrogate (not valid Unicode), kept with U+FFFD in its place"

#: characters of content per chunk a streamed import converts and writes at once (smaller than
#: ``core.CHUNK_CHARS``: the chunk's strings, scattered among the freed records of the second
#: pass, set the peak; 1 Mi characters costs no measurable time, docs/importing.md "Memory")
STREAM_CHUNK_CHARS = 1 << 20

FORMATS = (
    "auto",
    "openai",
    "anthropic",
    "gemini",
    "claude-code",
    "stream-json",
    "codex",
    "sharegpt",
    "llama-factory",
    "swe-agent",
    "mini-swe-agent",
    "otel",
    "messages",
)

__all__ = [
    "FORMATS",
    "MAP_TARGETS",
    "SURROGATES",
    "BadRecord",
    "BadTranscriptError",
    "EmptyImportError",
    "ImportResult",
    "distinctive_strings",
    "estimate_tokens",
    "estimate_tokens_many",
    "import_to_parquet",
    "import_transcripts",
    "make_token_counter",
    "parse_mapping",
    "reuse_labels",
]


@contextlib.contextmanager
def _no_cyclic_gc():
    """The cyclic garbage collector paused: an import allocates millions of small objects
    that form no cycles (parsed records, parts), and each of CPython's full collections would
    walk all of them again (~20-40% of the import's time on large logs). Reference counting
    still frees everything; the collector runs again as before once the import returns."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _read(fmt: str, files, reader: Reader, opts: dict) -> tuple[Iterable[Conversation], list]:
    skip_bad, kind = opts["skip_bad"], opts["tool_call_kind"]
    if fmt in ("claude-code", "stream-json"):
        return claude_code.read(
            files,
            reader,
            skip_bad=skip_bad,
            tool_call_kind=kind,
            keep_rewound=opts["keep_rewound"],
            streamed=opts["streamed"],
            fmt=fmt,
        ), []
    if fmt == "codex":
        return codex.read(files, reader, skip_bad=skip_bad, tool_call_kind=kind), []
    if fmt in ("openai", "anthropic", "gemini"):  # one reader: the bodies share ``messages`` (``auto`` says openai)
        return openai.read(files, reader, skip_bad=skip_bad, tool_call_kind=kind, fmt=fmt), []
    if fmt in ("sharegpt", "llama-factory"):
        return sharegpt.read(files, reader, skip_bad=skip_bad, tool_call_kind=kind), []
    if fmt in ("swe-agent", "mini-swe-agent"):
        return trajectories.read(files, reader, skip_bad=skip_bad, tool_call_kind=kind, fmt=fmt), []
    if fmt == "otel":
        return otel.read(files, reader, skip_bad=skip_bad, tool_call_kind=kind, streamed=opts["streamed"]), []
    return messages.read(
        files,
        reader,
        skip_bad=skip_bad,
        mapping=opts["mapping"],
        set_column=opts["set_column"],
        streamed=opts["streamed"],
        contiguous=opts["contiguous"],
    )


def _start(
    fmt: str,
    paths,
    *,
    mapping,
    tokenizer,
    skip_bad,
    set_column,
    tool_call_kind,
    keep_rewound,
    streamed=False,
    contiguous=False,
) -> tuple:
    """Check the options and start the format's reader: (format, conversations, extra
    columns, reader state, the counter and its name). Streaming readers yield conversations
    as the files are read; the others have read everything when this returns."""
    if fmt not in FORMATS:
        raise InvalidConfigError(f"unknown transcript format {fmt!r}; known: {', '.join(FORMATS)}")
    files = transcript_files(paths)
    if not isinstance(tool_call_kind, str) or is_blank(tool_call_kind):
        raise InvalidConfigError(f"tool_call_kind must be a non-blank string, got {tool_call_kind!r}")
    if not isinstance(set_column, str) or not set_column or set_column in ITEM_COLUMNS:
        raise InvalidConfigError(f"set_column {set_column!r} clashes with an items column")
    parsed_mapping = parse_mapping(mapping)
    files = decompressed(files)  # (after the options' checks: nothing decompressed for a bad call)
    if fmt == "auto":
        fmt = detect.detect_all(files, mapped=bool(parsed_mapping))
    if parsed_mapping and fmt != "messages":
        raise InvalidConfigError(f"a column mapping applies to the 'messages' format, not {fmt!r}")
    if fmt in ("claude-code", "stream-json"):  # two passes need a local file: copy a large remote one
        files = spool_remote(files, claude_code.STREAM_TWO_PASS_BYTES if streamed else claude_code.TWO_PASS_BYTES)
    elif fmt == "otel" and streamed and not any(p.suffix.lower() == ".json" for p, _ in files):
        files = spool_remote(files, otel.TWO_PASS_BYTES)
    count, counter_name = make_token_counter(tokenizer)
    reader = Reader()
    opts = {
        "skip_bad": skip_bad,
        "tool_call_kind": tool_call_kind,
        "mapping": parsed_mapping,
        "set_column": set_column,
        "keep_rewound": keep_rewound,
        "streamed": streamed,
        "contiguous": contiguous,
    }
    convs, extra = _read(fmt, files, reader, opts)
    return fmt, convs, extra, reader, count, counter_name


def _result(table, set_column: str, fmt: str, reader: Reader, checks, counter_name: str, repaired: int) -> ImportResult:
    if repaired:
        reader.skip(SURROGATES, repaired, metadata=True)
    return ImportResult(
        table,
        set_column,
        reader.bad,
        reader.skipped,
        reader.lines,
        checks,
        counter_name,
        fmt,
        reader.metadata_reasons,
    )


def _named(paths) -> str:
    """The input of an import as the user gave it: one path, or the first and how many more."""
    if isinstance(paths, (str, Path)):
        return str(paths)
    items = [str(p) for p in paths]
    return items[0] if len(items) == 1 else f"{items[0]} and {len(items) - 1} more" if items else ""


def import_transcripts(
    fmt: str,
    paths: str | Path | Sequence[str | Path],
    *,
    mapping: str | dict[str, str] | None = None,
    tokenizer: str | Callable[[str], int] | None = None,
    skip_bad: bool = False,
    set_column: str = "conversation_id",
    tool_call_kind: str = "ToolCall",
    calibrate: bool = False,
    allow_empty: bool = False,
    keep_rewound: bool = False,
) -> ImportResult:
    """Read transcripts in ``fmt`` (one of ``FORMATS``) from ``paths`` (a path or a list; a
    directory means its transcript files, sorted) into items. ``calibrate`` scales each
    conversation's token counts to the API's own counts where the log has them (the rule is
    in docs/importing.md); ``allow_empty`` permits a result with no items, or with more
    skipped than kept; ``keep_rewound`` keeps the Claude Code records of rewound branches
    (marked ``metadata.rewound = "true"``) instead of only the live context. See the module
    docstring. The result holds the whole table: :func:`import_to_parquet` writes the same
    items to a file without holding them all."""
    repaired = [0]
    with _no_cyclic_gc():
        fmt, convs, extra, reader, count, counter_name = _start(
            fmt,
            paths,
            mapping=mapping,
            tokenizer=tokenizer,
            skip_bad=skip_bad,
            set_column=set_column,
            tool_call_kind=tool_call_kind,
            keep_rewound=keep_rewound,
        )
        table, checks = build_table(
            convs,
            set_column,
            lambda texts: count_all(texts, count),
            calibrate=calibrate,
            extra_columns=extra,
            repaired=repaired,
        )
    res = _result(table, set_column, fmt, reader, checks, counter_name, repaired[0])
    if not allow_empty:
        res.check_not_empty(_named(paths))
    return res


def import_to_parquet(
    fmt: str,
    paths: str | Path | Iterable[str | Path],
    out: str | Path,
    *,
    mapping: str | dict[str, str] | None = None,
    tokenizer: str | Callable[[str], int] | None = None,
    skip_bad: bool = False,
    set_column: str = "conversation_id",
    tool_call_kind: str = "ToolCall",
    calibrate: bool = False,
    allow_empty: bool = False,
    keep_rewound: bool = False,
    chunk_chars: int = STREAM_CHUNK_CHARS,
) -> ImportResult:
    """:func:`import_transcripts` written to the Parquet file ``out`` (a path or a URL) as it
    goes: conversations are converted in chunks of about ``chunk_chars`` characters of
    content, each chunk written as row groups, so memory holds one chunk (or the largest
    conversation) plus what the format's reader needs, not the table (which formats are
    bounded, and by what, is in docs/importing.md). The file is written to a temp file beside
    ``out`` and renamed into place only when the import succeeds (an error, including
    :class:`EmptyImportError`, leaves no file). It holds the same rows, in the same order,
    with the same schema, as ``import_transcripts(...).write_parquet(out)`` (a large messages
    input read as contiguous sets that turn out not to be is read again, spilling its rows:
    docs/importing.md, "Message tables"). The result has
    ``table=None``; its counts, ``out`` and ``written`` describe the file."""
    check_chunk_chars(chunk_chars)
    target = as_path(out)
    if target.is_dir():  # before any work, and never a temp file left beside a directory
        raise IsADirectoryError(errno.EISDIR, "is a directory; give a file path", str(target))
    if not isinstance(paths, (str, os.PathLike)):
        paths = list(paths)  # a restart reads the inputs again: a one-shot iterator must be held
    for contiguous in (True, False):  # messages: sets taken as contiguous, else spilled (restarted)
        try:
            return _import_to_parquet(
                fmt,
                paths,
                target,
                mapping=mapping,
                tokenizer=tokenizer,
                skip_bad=skip_bad,
                set_column=set_column,
                tool_call_kind=tool_call_kind,
                calibrate=calibrate,
                allow_empty=allow_empty,
                keep_rewound=keep_rewound,
                chunk_chars=chunk_chars,
                contiguous=contiguous,
            )
        except messages.NotContiguous:
            continue  # a set came back after another began: start again, spilling the rows
    raise AssertionError("unreachable: the spilled messages import does not restart")


def _import_to_parquet(fmt, paths, target, *, calibrate, allow_empty, chunk_chars, **opts) -> ImportResult:
    repaired = [0]
    checks: list[dict] = []
    with _no_cyclic_gc():
        fmt, convs, extra, reader, count, counter_name = _start(fmt, paths, streamed=True, **opts)
        chunks = iter_chunks(
            convs,
            opts["set_column"],
            lambda texts: count_all(texts, count),
            calibrate=calibrate,
            extra_columns=extra,
            repaired=repaired,
            checks=checks,
            chunk_chars=chunk_chars,
        )
        writer = _AtomicWriter(target, items_schema(opts["set_column"], extra), {})
        try:
            n_items, keys = 0, set()
            for chunk in chunks:
                writer.write(chunk)
                n_items += chunk.num_rows
                keys.update(chunk.column(opts["set_column"]).unique().to_pylist())
                del chunk
            res = _result(None, opts["set_column"], fmt, reader, checks, counter_name, repaired[0])
            res.out, res.written = writer.path, (n_items, len(keys))
            if not allow_empty:
                res.check_not_empty(_named(paths))
        except BaseException:
            writer.abort()
            raise
        _finish_all([writer])
    return res
