"""Codex CLI session logs (``~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl``).

A file is one session, one line a record ``{"timestamp", "type", "payload"}``:
``session_meta`` (the session's ``id``, and in newer logs the ``base_instructions`` sent as
the API's instructions), ``response_item`` (an OpenAI Responses item: messages, tool calls
and their outputs, reasoning; read by ``responses.item_parts``), ``compacted`` (a
compaction), ``event_msg`` (what the interface showed, most of it a copy of the items, and
the API's ``token_count``), ``turn_context`` and newer record types. The oldest logs (2025)
have no wrapper: a first line ``{"id", "timestamp", "instructions"}``, then bare items and
``{"record_type": "state"}`` lines.

The model (docs/importing.md, "Codex CLI"):

* the items are the ``response_item`` records in file order, timestamped by their line;
  events are not items (they repeat the items, or are the interface's own);
* the set is the session id of the file's first ``session_meta`` (a forked session's file
  copies its parent's records after its own ``session_meta``: they are the fork's context
  too, and stay); a second file with a session id already read is a copy, counted;
* each ``compacted`` record starts a new context segment, its own set ``SESSION#K``: it
  opens with the compacted history Codex continued from (``replacement_history``), else
  with the summary as a user message;
* ``thread_rolled_back`` (an undone turn) removes the segment's last ``num_turns`` user
  turns;
* the API's input count of each request: ``token_count`` events whose running total moved
  (the same event is repeated for rate limits, after a compaction and in a fork's copy), or
  ``token_usage_record`` lines where the log has them.
"""

from __future__ import annotations

import bisect
import dataclasses
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cupel_np.io.importers import responses
from cupel_np.io.importers.core import (
    ApiCount,
    Bad,
    BadRecord,
    Conversation,
    Part,
    Reader,
    blank,
    check_not_all_bad,
    count,
    json_lines,
    parse_ts,
    raise_first_bad,
    role_part,
)

LABEL = "codex"
#: the skip reason of items an undone turn (``thread_rolled_back``) removed
UNDONE = "codex item undone (thread_rolled_back)"
#: user messages Codex writes itself (instructions, the environment, notices): context the
#: model sees, marked ``is_meta`` as Claude Code's own reminders are
_INJECTED = re.compile(
    r"\s*(<environment_context>|<user_instructions>|# AGENTS\.md instructions for |<INSTRUCTIONS>|<skill>"
    r"|<turn_aborted>|<subagent_notification>|<user_shell_command>)"
)
#: how much of the user's messages a 2025 compaction kept (Codex: 20,000 tokens, ~4 bytes each)
_KEPT_USER_CHARS = 80_000
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.I)


def session_key(path: Path) -> str:
    """A session's id from its file name (``rollout-<time>-<uuid>.jsonl``), else the stem."""
    stem = path.name.removesuffix(".jsonl")
    m = _UUID.search(stem)
    return m.group(0) if m else stem


class _Session:
    """One file's conversations as its records are read."""

    def __init__(self, key: str, name: str, tool_call_kind: str, skipped: dict) -> None:
        self.key = key
        self.name = name
        self.kind = tool_call_kind
        self.skipped = skipped
        self.convs = [Conversation(key)]
        self.turns = responses.Turns()
        self.turn_start = 0
        self.total = None  # the last token_count total taken
        self.records: list[tuple[int, int, int]] = []  # token_usage_record: (segment, before, tokens)
        self.response_ids: set[str] = set()
        self.metas = 0  # session_meta records read

    @property
    def parts(self) -> list[Part]:
        return self.convs[-1].parts

    def add(self, parts: list[Part], line: int) -> None:
        seg = len(self.convs) - 1
        for pt in parts:
            pt.file, pt.line, pt.segment = self.name, line, seg
        self.parts.extend(parts)

    def item(self, item: Any, line: int, ts, w: str = "payload") -> None:
        was_model = self.turns.in_model
        parts = responses.item_parts(item, w, self.turns, ts, self.kind, self.skipped, LABEL)
        if self.turns.in_model and not was_model:
            self.turn_start = len(self.parts)
        for pt in parts:
            if pt.kind == "Message" and pt.role == "user" and _INJECTED.match(pt.content):
                pt.extra = {**(pt.extra or {}), "is_meta": "true"}
        self.add(parts, line)

    def request(self) -> int:
        """Where the request a usage counts began: before the model items of the response
        being read (a response's items may be logged before or after its usage)."""
        return self.turn_start if self.turns.in_model else len(self.parts)

    def compacted(self, payload: dict, line: int, ts) -> None:
        """A compaction: a new segment holding the history Codex continued from. Its
        ``replacement_history`` when logged; else (logs of 2025) what Codex rebuilt then: the
        session's first context (instructions, environment), the user's messages (the newest,
        up to ``_KEPT_USER_CHARS``) and the summary as a user message (none when empty). The
        compaction happened whatever its record holds: the segment opens with the items that
        can be read, and an item that cannot makes the line bad (raised once it is open)."""
        history = payload.get("replacement_history")
        turns = responses.Turns()
        parts: list[Part] = []
        bad = None
        if isinstance(history, list):
            for j, it in enumerate(history):
                try:
                    parts += responses.item_parts(
                        it, f"payload.replacement_history[{j}]", turns, ts, self.kind, self.skipped, LABEL
                    )
                except Bad as e:
                    bad = bad or e
        else:
            parts = [dataclasses.replace(pt, timestamp=ts) for pt in self._initial() + self._user_messages()]
            summary = payload.get("message")
            if isinstance(summary, str) and not blank(summary):
                kind, source, pinned, role = role_part("user", "compacted")
                parts.append(Part(summary, kind, source, pinned, role, ts, extra={"compact_summary": "true"}))
            else:
                count(self.skipped, "empty content")
        for pt in parts:
            if not (pt.extra or {}).get("compact_summary"):
                pt.extra = {**(pt.extra or {}), "compacted": "true"}
        self.convs.append(Conversation(f"{self.key}#{len(self.convs)}"))
        self.turns, self.turn_start = turns, 0
        turns.in_model = False
        self.add(parts, line)
        if bad is not None:
            raise bad

    def _initial(self) -> list[Part]:
        """The session's first context: what its first segment holds before the first message
        the user typed (base instructions, developer messages, Codex's own user messages)."""
        out = []
        for pt in self.convs[0].parts:
            if pt.role == "user" and not (pt.extra or {}).get("is_meta"):
                break
            if pt.role in ("system", "developer", "user"):
                out.append(pt)
        return out

    def _user_messages(self) -> list[Part]:
        """The messages the user typed in the current segment (those an earlier compaction
        carried over included, its summary not), the newest first up to ``_KEPT_USER_CHARS``
        characters, in their order; the one that overflows is kept cut in its middle, as Codex
        cut it, and is the oldest kept."""
        kept, size = [], 0
        for pt in reversed(self.parts):
            extra = pt.extra or {}
            if pt.role != "user" or pt.kind != "Message" or extra.get("is_meta") or extra.get("compact_summary"):
                continue
            room = _KEPT_USER_CHARS - size
            if len(pt.content) > room:
                if room > 0:
                    half = room // 2
                    cut = pt.content[:half] + "\n…\n" + pt.content[len(pt.content) - half :]
                    kept.append(dataclasses.replace(pt, content=cut, extra={**extra, "truncated": "true"}))
                break
            kept.append(pt)
            size += len(pt.content)
        return kept[::-1]

    def rolled_back(self, n: int) -> None:
        """Drop the segment's last ``n`` user turns (from its n-th last message the user typed)."""
        users = [i for i, pt in enumerate(self.parts) if pt.role == "user" and not (pt.extra or {}).get("is_meta")]
        if n <= 0 or not users:
            return
        cut = users[-min(n, len(users))]
        count(self.skipped, UNDONE, len(self.parts) - cut)
        del self.parts[cut:]
        conv, seg = self.convs[-1], len(self.convs) - 1
        conv.api = [a for a in conv.api if a.before <= cut]  # (a count of the undone turns' requests goes too)
        self.records = [r for r in self.records if r[0] != seg or r[1] <= cut]
        self.turns.in_model = False

    def token_count(self, payload: dict) -> None:
        info = payload.get("info")
        if not isinstance(info, dict):
            return
        total, last = info.get("total_token_usage"), info.get("last_token_usage")
        if not isinstance(total, dict) or not isinstance(last, dict):
            return
        t, n = total.get("total_tokens"), last.get("input_tokens")
        moved = type(t) is int and t != self.total and type(total.get("input_tokens")) is int and total["input_tokens"]
        if moved:
            self.total = t
            if type(n) is int and n > 0:
                self.convs[-1].api.append(ApiCount(self.request(), n))

    def usage_record(self, payload: dict) -> None:
        rid, usage = payload.get("response_id"), payload.get("usage")
        n = usage.get("input_tokens") if isinstance(usage, dict) else None
        if type(n) is not int or n <= 0 or (isinstance(rid, str) and rid in self.response_ids):
            return
        if isinstance(rid, str):
            self.response_ids.add(rid)
        self.records.append((len(self.convs) - 1, self.request(), n))

    def done(self) -> list[Conversation]:
        if self.records:  # one record a response: the API's counts, without the events' repeats
            for c in self.convs:
                c.api = []
            for seg, before, n in self.records:
                self.convs[seg].api.append(ApiCount(before, n))
        for c in self.convs:
            _abort_unanswered(c)
        return [c for c in self.convs if c.parts or c is self.convs[0]]


def _abort_unanswered(conv: Conversation) -> None:
    """The output Codex sends for a call that has none (an interrupted turn) in every later
    request: ``aborted``, right after the call (its ``ensure_call_outputs_present``), where a
    later request was made: a message (the user's, Codex's own) or a model item of another
    turn follows the call (an output of a call beside it does not: no request followed it)."""
    parts = conv.parts
    if not parts:
        return
    answered = {pt.tool_call_id for pt in parts if pt.tool_role == "result"}
    last_msg = max((k for k, q in enumerate(parts) if q.role in ("user", "system", "developer")), default=-1)
    model = [(k, q.turn) for k, q in enumerate(parts) if q.turn is not None and q.role == "assistant"]
    last_turn = model[-1][1] if model else None
    last_model, other_model = (model[-1][0] if model else -1), max((k for k, t in model if t != last_turn), default=-1)
    out: list[Part] = []
    after: list[int] = []  # the calls an output was put after
    for i, pt in enumerate(parts):
        out.append(pt)
        cid = pt.tool_call_id
        later = last_msg > i or other_model > i or (pt.turn != last_turn and last_model > i)
        if pt.tool_role == "call" and cid and cid not in answered and later:
            out.append(
                dataclasses.replace(
                    pt,
                    content="aborted",
                    kind="ToolOutput",
                    role="tool",
                    id=None,
                    tool_role="result",
                    turn=None,
                    tokens=None,
                    extra={"synthesized": "aborted"},
                )
            )
            answered.add(cid)
            after.append(i)
    if after:
        conv.parts = out
        conv.api = [ApiCount(a.before + bisect.bisect_left(after, a.before), a.tokens) for a in conv.api]


def _meta(s: _Session, payload: dict, line: int, ts) -> None:
    """A ``session_meta`` record: the first is the session's (its base instructions, when
    logged, are the first item); a later one opens a fork's copy of its parent's records."""
    s.metas += 1
    if s.metas > 1:
        count(s.skipped, "codex record 'session_meta' (a fork's copied history)")
        return
    base = payload.get("base_instructions")
    text = base.get("text") if isinstance(base, dict) else base
    if isinstance(text, str) and not blank(text):
        kind, source, pinned, role = role_part("system", "base_instructions")
        s.add([Part(text, kind, source, pinned, role, ts, turn="instructions")], line)


def _session_id(obj: Any) -> str | None:
    """The session id a file's first record names (a ``session_meta``, or the oldest logs'
    first line)."""
    if not isinstance(obj, dict):
        return None
    payload = obj.get("payload") if obj.get("type") == "session_meta" else obj if "type" not in obj else None
    sid = payload.get("id") if isinstance(payload, dict) else None
    return sid if isinstance(sid, str) and sid else None


#: the wrapped records' types (one without a payload is a bad line, not an item)
_RECORDS = frozenset({"session_meta", "response_item", "compacted", "turn_context", "event_msg", "token_usage_record"})


def _record(s: _Session, obj: Any, line: int) -> None:
    if not isinstance(obj, dict):
        raise Bad(f"expected a record object, got {type(obj).__name__}")
    rtype = obj.get("type")
    ts = parse_ts(obj.get("timestamp"), "timestamp")
    if "payload" not in obj:  # the oldest logs: bare items, state lines, the session line
        if rtype in _RECORDS:
            raise Bad(f"a '{rtype}' record without a payload")
        if "record_type" in obj:
            count(s.skipped, f"codex record '{obj['record_type']}'")
        elif rtype is None and "id" in obj and "role" not in obj:  # (its instructions are the user's, also a message)
            _meta(s, obj, line, ts)
        else:
            s.item(obj, line, ts, "item")
        return
    payload = obj["payload"]
    if not isinstance(payload, dict):
        raise Bad(f"payload: expected an object, got {type(payload).__name__}")
    if rtype == "response_item":
        s.item(payload, line, ts)
    elif rtype == "session_meta":
        _meta(s, payload, line, ts)
    elif rtype == "compacted":
        s.compacted(payload, line, ts)
    elif rtype == "event_msg":
        et = payload.get("type")
        if et == "token_count":
            s.token_count(payload)
        elif et == "thread_rolled_back" and type(payload.get("num_turns")) is int:
            s.rolled_back(payload["num_turns"])
        count(s.skipped, f"codex event '{et}'" if isinstance(et, str) else "codex event (no type)")
    else:
        if rtype == "token_usage_record":
            s.usage_record(payload)
        count(s.skipped, f"codex record '{rtype}'")


def _is_metadata(reason: str) -> bool:
    """Records that are never context, and undone turns (the "skipped more than kept" check
    leaves them out)."""
    return reason.startswith(("codex record", "codex event")) or reason == UNDONE


def read(
    files: list[tuple[Path, str]], reader: Reader, *, skip_bad: bool, tool_call_kind: str
) -> Iterator[Conversation]:
    """Each file's conversations (a segment a compaction) once the file is read: memory
    bounded by the largest session file. A file whose session was read from another file
    (the same session id: a copy) is counted, not read again."""
    seen: set[str] = set()
    for path, name in files:
        since, file_records = len(reader.bad), 0
        local: dict[str, int] = {}
        s: _Session | None = None
        for n, obj in json_lines(path):
            reader.lines += 1
            file_records += 1
            if s is None:
                s = _Session(_session_id(obj) or session_key(path), name, tool_call_kind, local)
                if s.key in seen:
                    break
            try:
                if isinstance(obj, Bad):
                    raise obj
                _record(s, obj, n)
            except Bad as e:
                reader.bad.append(BadRecord(name, n, str(e)))
        check_not_all_bad(LABEL, name, file_records, reader.bad[since:])
        raise_first_bad(reader.bad, since, skip_bad)
        if s is None:
            continue
        if s.key in seen:
            reader.skip("codex session already read (a copy of its file)", metadata=True)
            continue
        seen.add(s.key)
        for r, c in local.items():
            reader.skip(r, c, metadata=_is_metadata(r))
        yield from s.done()


def looks_like(first: Any) -> bool:
    """A Codex rollout's first record: a ``session_meta`` line, or the oldest logs' session line."""
    if not isinstance(first, dict):
        return False
    if first.get("type") == "session_meta" and isinstance(first.get("payload"), dict):
        return True
    return set(first) <= {"id", "timestamp", "instructions", "git"} and "id" in first and "timestamp" in first
