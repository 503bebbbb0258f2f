"""Agent trajectories: SWE-agent ``.traj`` and mini-swe-agent ``.traj.json``.

* SWE-agent: a JSON object whose ``history`` is the message list the model saw (``role``,
  ``content`` as text or parts, ``tool_calls``, a tool message's ``tool_call_ids``;
  ``message_type`` marks observations). ``trajectory`` repeats the steps (not read twice).
* mini-swe-agent: ``{"messages": [...], "info": ..., "trajectory_format": ...}`` (or a bare
  message list); actions are fenced commands in the assistant's text, observations come
  back as ``user`` messages; ``exit`` messages end the run and are not context.

The set is the file (its name without ``.traj`` / ``.traj.json``). Where the action is the
assistant's text (no ``tool_calls``), the ``user`` message right after an assistant message is
its observation: a ``ToolOutput`` (source ``Tool``, ``tool_role`` result) linked to that
assistant message, which becomes the call (``tool_role`` call, id ``#<message index>``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cupel_np.io.importers.core import (
    Bad,
    BadRecord,
    Conversation,
    Part,
    Reader,
    check_not_all_bad,
    json_document,
    raise_first_bad,
)
from cupel_np.io.importers.jsonread import streamed_object
from cupel_np.io.importers.openai import conversation as openai_conversation


def _stem(path: Path) -> str:
    name = path.name
    for suf in (".traj.json", ".traj", ".json"):
        if name.lower().endswith(suf):
            return name[: -len(suf)]
    return path.stem


def _messages(doc, fmt: str, skipped: dict) -> list:
    if isinstance(doc, list):
        msgs = doc
    elif isinstance(doc, dict) and isinstance(doc.get("history"), list):
        msgs = doc["history"]
    elif isinstance(doc, dict) and isinstance(doc.get("messages"), list):
        msgs = doc["messages"]
    else:
        raise Bad(f"expected a {fmt} trajectory: an object with 'history' or 'messages', or a message list")
    kept = []
    for m in msgs:
        if isinstance(m, dict) and m.get("role") == "exit":
            skipped["trajectory 'exit' message"] = skipped.get("trajectory 'exit' message", 0) + 1
            continue
        kept.append(m)
    return kept


def _link_text_actions(msgs: list, parts: list[Part]) -> None:
    """A ``user`` message right after an assistant message without ``tool_calls`` is that
    action's observation."""
    by_turn: dict[str, list[Part]] = {}
    for pt in parts:
        if pt.turn is not None:
            by_turn.setdefault(pt.turn, []).append(pt)
    for i in range(1, len(msgs)):
        prev, m = msgs[i - 1], msgs[i]
        if not (isinstance(prev, dict) and isinstance(m, dict)):
            continue
        if prev.get("role") != "assistant" or prev.get("tool_calls") or m.get("role") != "user":
            continue
        action = [p for p in by_turn.get(f"m{i - 1}", []) if p.tool_role is None]
        obs = by_turn.get(f"m{i}", [])
        if not action or not obs:
            continue
        cid = f"#{i - 1}"
        action[0].tool_role, action[0].tool_call_id = "call", cid
        for pt in obs:
            pt.kind, pt.source, pt.role = "ToolOutput", "Tool", "tool"
            pt.tool_role, pt.tool_call_id = "result", cid


def _message_index(pt: Part) -> int:
    """The index of the message a part came from (``turn`` is ``m<index>``; -1 for a tool
    definition, which precedes every message)."""
    return -1 if pt.turn is None else int(pt.turn[1:])


def _tokens_sent(doc, msgs: list, parts: list[Part]) -> tuple[int, list[int]] | None:
    """SWE-agent's own count: ``info.model_stats.tokens_sent`` (the API's input tokens summed
    over ``api_calls`` requests) with the part count before each assistant message, when the
    calls match the assistant messages one to one (a retried call has no message of its own:
    then the total cannot be placed, and it is not used)."""
    stats = (
        doc.get("info", {}).get("model_stats") if isinstance(doc, dict) and isinstance(doc.get("info"), dict) else None
    )
    if not isinstance(stats, dict):
        return None
    sent, calls = stats.get("tokens_sent"), stats.get("api_calls")
    if type(sent) is not int or type(calls) is not int or sent <= 0:
        return None
    asked = [i for i, m in enumerate(msgs) if isinstance(m, dict) and m.get("role") == "assistant"]
    if calls != len(asked):
        return None
    befores, k = [], 0
    for i in asked:  # parts come in message order; tool definitions (no turn) first
        while k < len(parts) and _message_index(parts[k]) < i:
            k += 1
        befores.append(k)
    return sent, befores


#: the members of a trajectory object that are read (``trajectory``, ``environment``,
#: ``replay_config``... are not)
_MEMBERS = ("history", "messages", "info")


def _documents(path: Path, name: str) -> Iterator[tuple[int, Any]]:
    """(line, document) of a trajectory file: over ``jsonread.JSON_STREAM_BYTES`` only the
    members read (``_MEMBERS``), one member at a time, without holding the file's text;
    otherwise the whole document (or its JSON lines)."""
    doc = streamed_object(path, name, _MEMBERS)
    if doc is not None:
        yield 1, doc
    else:
        yield from json_document(path)


def read(
    files: list[tuple[Path, str]], reader: Reader, *, skip_bad: bool, tool_call_kind: str, fmt: str
) -> Iterator[Conversation]:
    """Each file's conversation as it is read (memory bounded by the largest file; over
    ``jsonread.JSON_STREAM_BYTES``, by the members read)."""
    for path, name in files:
        since, file_records = len(reader.bad), 0
        for n, doc in _documents(path, name):
            reader.lines += 1
            file_records += 1
            local: dict[str, int] = {}
            try:
                if isinstance(doc, Bad):
                    raise doc
                msgs = _messages(doc, fmt, local)
                _, parts, api = openai_conversation({"messages": msgs}, local, tool_call_kind)
            except Bad as e:
                reader.bad.append(BadRecord(name, n, str(e)))
                continue
            _link_text_actions(msgs, parts)
            for r, c in local.items():
                reader.skip(r, c, metadata="exit" in r)
            for pt in parts:
                pt.file, pt.line = name, n
            key = _stem(path) if n == 1 else f"{_stem(path)}:{n}"
            conv = Conversation(key, parts, api)
            if not api:
                conv.api_sum = _tokens_sent(doc, msgs, parts)
            yield conv
        check_not_all_bad(fmt, name, file_records, reader.bad[since:])
        raise_first_bad(reader.bad, since, skip_bad)
