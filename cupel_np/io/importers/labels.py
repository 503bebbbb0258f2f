"""Heuristic relevance labels for imported transcripts (``reuse_labels``)."""

from __future__ import annotations

import re
from typing import Any

import pyarrow as pa

from cupel_np.errors import InvalidConfigError

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
