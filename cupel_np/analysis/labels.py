"""Relevance labels from what an agent used: the successor of ``io.importers.reuse_labels``.

``usage_labels(table)`` reads an imported transcript (``import_transcripts`` output: one row
per message part, ``kind`` ``ToolOutput`` / ``ToolCall`` / ``Message``, the role and the
``tool_call_id`` in ``metadata``) and marks each tool output **used** when a later step of the
same conversation reuses one of its strings:

* **Strings**: paths, file names, identifiers (camelCase, snake_case, dotted), hex hashes,
  numbers of 3+ digits and words of 7+ letters, at least ``min_length`` characters, from the
  output and from the argument values of the tool call that produced it (matched by
  ``tool_call_id``: a ``Read`` of ``src/app.py`` is about ``src/app.py``). Of a tool call
  only the argument values count (its JSON keys and the tool name recur in every call).
* **Later steps**: the arguments of later tool calls (an ``Edit`` of the path, a ``grep`` for
  the identifier; ``tool_calls=False`` leaves them out) and later assistant messages. Later
  tool outputs and user messages are not the agent acting.
* **Novel strings only**: a string that appeared in the conversation before the output (other
  than in its own call) was not brought by it: a path from the user's prompt, the repository
  root in every call.
* **Rare strings only**: a string's weight is ``ln((C + 1) / c) / ln(C + 1)`` where ``C`` is
  the number of conversations in the table and ``c`` the number holding the string, 1 for a
  string of one conversation, 0 for one in every conversation. A match counts when the weight
  is at least ``min_rarity`` (default 0.5: the string is in at most ``sqrt(C + 1)``
  conversations), so a project-wide identifier or a common word that turns up in a later
  message by chance is no evidence (``rarity=False`` counts every string). The test is per
  string, not per output, so a big output is not "used" for holding many strings.

Columns (one row per input row; null for rows that are not tool outputs):

* ``used`` (bool): at least one counting match;
* ``used_grade`` (float64 in [0, 1]): the weight of the output's novel, rare strings that were
  reused over the weight of all of them (0 when it has none): a graded label for
  ``gain_share``;
* ``evidence_row`` (int64): the input row of the nearest later step that reused a string;
* ``evidence`` (string): up to three matches, ``row 17 ToolCall Edit: 'src/app.py' (0.93)``.

What it misses: use without quotation (a test run that passed, a search that found nothing,
paraphrase) and use in a later conversation. Measured on generated sessions in
``tests/analysis/test_labels.py`` (see docs/outcomes.md); never ground truth.
"""

from __future__ import annotations

import json
import math
import re
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable

import pyarrow as pa

from cupel_np.errors import InvalidConfigError

__all__ = ["STRING_PATTERN", "usage_labels", "usage_strings"]

#: what counts as a string worth matching
STRING_PATTERN = re.compile(
    r"(?:[\w.-]*/[\w./-]+)"  # paths: src/app.py, /var/log/x
    r"|(?:\b\w+\.[A-Za-z]{1,5}\b)"  # file names: app.py, k8s.yaml
    r"|(?:\b[A-Za-z]*[a-z][A-Z]\w*\b)"  # camelCase identifiers
    r"|(?:\b\w+_\w+\b)"  # snake_case identifiers
    r"|(?:\b[0-9a-f]{7,}\b)"  # hashes
    r"|(?:\b\d{3,}\b)"  # numbers with 3+ digits
    r"|(?:\b[A-Za-z]{7,}\b)"  # long words
)


def usage_strings(text: str, min_length: int = 4) -> set[str]:
    """The strings of ``text`` that ``usage_labels`` matches (``STRING_PATTERN``), at least
    ``min_length`` characters long, trailing dots and slashes left off."""
    out = set()
    for m in STRING_PATTERN.findall(text or ""):
        m = m.rstrip("./")
        if len(m) >= min_length:
            out.add(m)
    return out


_CALL = re.compile(r"^[\w.:-]+\((.*)\)$", re.S)


def _call_strings(text: str, min_length: int) -> set[str]:
    """The strings of a tool call's argument VALUES (``Name({"file_path": ...})`` as the
    importers write it): keys and the tool name are the same in every call, never evidence."""
    m = _CALL.match(text or "")
    if m is None:
        return usage_strings(text, min_length)
    try:
        args = json.loads(m.group(1))
    except ValueError:
        return usage_strings(m.group(1), min_length)
    out: set[str] = set()
    stack = [args]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
        elif isinstance(v, str):
            out |= usage_strings(v, min_length)
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            out |= usage_strings(str(v), min_length)
    return out


def _column(table: pa.Table, name: str) -> list:
    if name not in table.column_names:
        raise InvalidConfigError(f"usage_labels: column {name!r} not found (columns: {', '.join(table.column_names)})")
    return table.column(name).to_pylist()


def _metadata(table: pa.Table) -> list[dict]:
    if "metadata" not in table.column_names:
        return [{} for _ in range(table.num_rows)]
    return [dict(m or []) for m in table.column("metadata").to_pylist()]


def _role(md: dict, tags) -> str | None:
    r = md.get("role")
    if r is None and tags:
        r = tags[0]
    return None if r is None else str(r).lower()


def usage_labels(
    table: pa.Table,
    set_column: str = "conversation_id",
    *,
    min_length: int = 4,
    min_rarity: float = 0.5,
    rarity: bool = True,
    tool_calls: bool = True,
    tool_call_kinds: Iterable[str] = ("ToolCall",),
) -> pa.Table:
    """The module docstring's labels of an imported transcript table (rows in import order):
    a table of ``used``, ``used_grade``, ``evidence_row`` and ``evidence``, one row per input
    row. ``rarity=False`` and ``tool_calls=False`` turn off the corpus-rarity test and the
    tool-call evidence (for comparison); ``tool_call_kinds``: the kinds of tool-call rows."""
    if not 0.0 <= min_rarity <= 1.0:
        raise InvalidConfigError(f"usage_labels: min_rarity must be in [0, 1], got {min_rarity!r}")
    keys = _column(table, set_column)
    content = _column(table, "content")
    kinds = [str(k or "").lower() for k in _column(table, "kind")]
    md = _metadata(table)
    tags = table.column("tags").to_pylist() if "tags" in table.column_names else [None] * table.num_rows
    call_kinds = {k.lower() for k in tool_call_kinds}
    strings = [
        _call_strings(c, min_length) if kinds[i] in call_kinds else usage_strings(c, min_length)
        for i, c in enumerate(content)
    ]
    rows_of: dict = {}
    for i, k in enumerate(keys):
        rows_of.setdefault(k, []).append(i)
    # in how many conversations each string occurs
    conv_count: Counter = Counter()
    for rows in rows_of.values():
        conv_count.update(set().union(*(strings[i] for i in rows)))
    n_conv = len(rows_of)
    denom = math.log(n_conv + 1)

    def weight(s: str) -> float:
        return 1.0 if not rarity else math.log((n_conv + 1) / conv_count[s]) / denom

    n = table.num_rows
    used: list[bool | None] = [None] * n
    grade: list[float | None] = [None] * n
    ev_row: list[int | None] = [None] * n
    evidence: list[str | None] = [None] * n
    for rows in rows_of.values():
        _conversation(
            rows, kinds, md, tags, strings, call_kinds, tool_calls, weight, min_rarity, used, grade, ev_row, evidence
        )
    return pa.table(
        {
            "used": pa.array(used, pa.bool_()),
            "used_grade": pa.array(grade, pa.float64()),
            "evidence_row": pa.array(ev_row, pa.int64()),
            "evidence": pa.array(evidence, pa.string()),
        }
    )


def _conversation(
    rows, kinds, md, tags, strings, call_kinds, tool_calls, weight, min_rarity, used, grade, ev_row, evidence
):
    """Label the tool outputs of one conversation (``rows``: its input rows in order)."""
    own_call: dict[int, int] = {}  # output row -> the row of the call that produced it
    call_of_id = {}
    for i in rows:
        tid = md[i].get("tool_call_id")
        if kinds[i] in call_kinds and tid:
            call_of_id[tid] = i
        elif kinds[i] == "tooloutput" and tid in call_of_id:
            own_call[i] = call_of_id[tid]
    actors = []  # rows whose strings count as reuse: later tool calls, later assistant messages
    for i in rows:
        if kinds[i] in call_kinds:
            actors.append(tool_calls)
        else:
            actors.append(kinds[i] == "message" and _role(md[i], tags[i]) == "assistant")
    # where each string is reused: the positions (in ``rows``) of the acting rows holding it
    act_pos: dict[str, list[int]] = {}
    for j, i in enumerate(rows):
        if actors[j]:
            for st in strings[i]:
                act_pos.setdefault(st, []).append(j)
    before: Counter = Counter()
    for j, i in enumerate(rows):
        if kinds[i] == "tooloutput":
            call = own_call.get(i)
            cand = strings[i] | (strings[call] if call is not None else set())
            call_s = strings[call] if call is not None else set()
            eligible = {}
            for s in cand:
                elsewhere = before[s] - (1 if s in call_s else 0)
                w = weight(s)
                if elsewhere <= 0 and w >= min_rarity:
                    eligible[s] = w
            hits = []
            for st, w in eligible.items():
                pos = act_pos.get(st)
                k = bisect_right(pos, j) if pos else 0
                if pos and k < len(pos):
                    hits.append((rows[pos[k]], -w, st))
            hits.sort()
            used[i] = bool(hits)
            total = sum(eligible.values())
            grade[i] = (sum(-h[1] for h in hits) / total) if total > 0 else 0.0
            if hits:
                ev_row[i] = hits[0][0]
                evidence[i] = "; ".join(
                    f"row {r} {_step(r, kinds, md, tags)}: {s!r} ({-nw:.2f})" for r, nw, s in hits[:3]
                )
        before.update(strings[i])


def _step(r: int, kinds, md, tags) -> str:
    if kinds[r] == "message":
        return "assistant"
    name = md[r].get("tool_name")
    return f"ToolCall {name}" if name else "ToolCall"
