"""Transcript import: chat and agent logs -> an items table (one item per message part).

Formats (``FORMATS``; docs/importing.md has the full table): ``openai`` (chat-completions
JSONL, ``tools`` included), ``claude-code`` (session logs) and ``stream-json`` (the headless /
Agent SDK message stream, read by the same reader), ``sharegpt`` (ShareGPT and LLaMA-Factory
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
import gc
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from cupel_np.errors import InvalidConfigError
from cupel_np.io.importers import claude_code, detect, messages, openai, otel, sharegpt, trajectories
from cupel_np.io.importers.core import (
    ITEM_COLUMNS,
    BadRecord,
    BadTranscriptError,
    Conversation,
    EmptyImportError,
    ImportResult,
    Reader,
    build_table,
    transcript_files,
)
from cupel_np.io.importers.labels import distinctive_strings, reuse_labels
from cupel_np.io.importers.messages import MAP_TARGETS, parse_mapping
from cupel_np.io.importers.tokens import count_all, estimate_tokens, estimate_tokens_many, make_token_counter
from cupel_np.text import is_blank

#: the count of strings repaired for Arrow (in ``ImportResult.skipped``; nothing is dropped)
SURROGATES = "text with a lone surrogate (not valid Unicode), kept with U+FFFD in its place"

FORMATS = (
    "auto",
    "openai",
    "claude-code",
    "stream-json",
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
            files, reader, skip_bad=skip_bad, tool_call_kind=kind, keep_rewound=opts["keep_rewound"]
        ), []
    if fmt == "openai":
        return openai.read(files, reader, skip_bad=skip_bad, tool_call_kind=kind), []
    if fmt in ("sharegpt", "llama-factory"):
        return sharegpt.read(files, reader, skip_bad=skip_bad, tool_call_kind=kind), []
    if fmt in ("swe-agent", "mini-swe-agent"):
        return trajectories.read(files, reader, skip_bad=skip_bad, tool_call_kind=kind, fmt=fmt), []
    if fmt == "otel":
        return otel.read(files, reader, skip_bad=skip_bad, tool_call_kind=kind), []
    return messages.read(files, reader, skip_bad=skip_bad, mapping=opts["mapping"], set_column=opts["set_column"])


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
    docstring."""
    if fmt not in FORMATS:
        raise InvalidConfigError(f"unknown transcript format {fmt!r}; known: {', '.join(FORMATS)}")
    files = transcript_files(paths)
    if not isinstance(tool_call_kind, str) or is_blank(tool_call_kind):
        raise InvalidConfigError(f"tool_call_kind must be a non-blank string, got {tool_call_kind!r}")
    if not isinstance(set_column, str) or not set_column or set_column in ITEM_COLUMNS:
        raise InvalidConfigError(f"set_column {set_column!r} clashes with an items column")
    parsed_mapping = parse_mapping(mapping)
    if fmt == "auto":
        fmt = detect.detect_all(files, mapped=bool(parsed_mapping))
    if parsed_mapping and fmt != "messages":
        raise InvalidConfigError(f"a column mapping applies to the 'messages' format, not {fmt!r}")
    count, counter_name = make_token_counter(tokenizer)
    reader = Reader()
    opts = {
        "skip_bad": skip_bad,
        "tool_call_kind": tool_call_kind,
        "mapping": parsed_mapping,
        "set_column": set_column,
        "keep_rewound": keep_rewound,
    }
    repaired = [0]
    with _no_cyclic_gc():
        convs, extra = _read(fmt, files, reader, opts)
        table, checks = build_table(
            convs,
            set_column,
            lambda texts: count_all(texts, count),
            calibrate=calibrate,
            extra_columns=extra,
            repaired=repaired,
        )
    if repaired[0]:
        reader.skip(SURROGATES, repaired[0], metadata=True)
    res = ImportResult(
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
    if not allow_empty:
        res.check_not_empty()
    return res
