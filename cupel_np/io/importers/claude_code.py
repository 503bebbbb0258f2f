"""Claude Code session logs and the headless / Agent SDK message stream (``stream-json``).

Session logs (``~/.claude/projects/<project>/<session>.jsonl``) hold one record a line;
records carry ``uuid`` and ``parentUuid`` (a chain, resumable across files), ``sessionId``,
``timestamp``, ``isSidechain`` (sub-agent runs) and, on ``user`` / ``assistant`` records,
``message.content``. The stream (``claude -p --output-format stream-json``, the Agent SDK)
has ``session_id`` instead, no ``parentUuid`` (its order is the file's), ``system`` (init)
and ``result`` records, and ``parent_tool_use_id`` on a sub-agent's messages.

The model (see docs/importing.md, "Claude Code"):

* a record is identified by its ``uuid``: the first copy read (files in the order given,
  a directory's sorted) is the item, later copies are counted as duplicates (and separately
  when their content differs from the first copy's);
* a conversation is a chain of records: every record belongs to the conversation of the root
  it reaches through ``parentUuid`` (a compaction boundary through ``logicalParentUuid``),
  keyed by the root's session id, however many files hold it;
* each compaction starts a new context segment, its own set ``SESSION#K`` (segment K);
  the compaction summary opens it, so it never shares a context with the items it replaced;
* sub-agent (sidechain) records form their own sets, ``SESSION@AGENT``.
"""

from __future__ import annotations

import json
from array import array
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from cupel_np.io.importers.claude_index import BOUNDARY, Index, children, key_of, live, parallel, roots
from cupel_np.io.importers.claude_parts import (
    assistant_parts,
    attachment_parts,
    usage_tokens,
    user_parts,
)
from cupel_np.io.importers.claude_parts import image_tokens as image_tokens
from cupel_np.io.importers.claude_parts import strip_ansi as strip_ansi
from cupel_np.io.importers.core import (
    ApiCount,
    Bad,
    BadRecord,
    Conversation,
    Part,
    Reader,
    check_not_all_bad,
    count,
    json_line_at,
    json_lines,
    parse_ts,
    raise_first_bad,
    streamed_array,
)

#: a record's time as an order key: microseconds since the epoch; a record without a time
#: sorts after every timed one (as ``(ts is None, ts)`` would)
_NO_TIME = 1 << 62
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)


def _time_key(ts: datetime | None) -> int:
    return _NO_TIME if ts is None else (ts - _EPOCH) // _US


class _State:
    def __init__(self, tool_call_kind: str, low_memory: bool = False, keep_rewound: bool = False):
        self.tool_call_kind = tool_call_kind
        self.low_memory = low_memory
        self.keep_rewound = keep_rewound
        self.rewound = 0  # records on rewound branches
        #: the records (first copies), in compact columns; the chain records that are not
        #: messages (``progress`` hook records, ``attachment``\ s, ...) too (``Index.add_via``): a message
        #: whose parent is one of them hangs, through it, off the message before it
        self.ix = Index(keep_parts=not low_memory)
        self.seen = 0
        self.duplicates = 0
        self.conflicts = 0


_NOT_CONTEXT = {"summary", "file-history-snapshot", "queue-operation", "custom-title", "result", "stream_event"}


def _record(
    st: _State, obj, name: str, n: int, last: dict, reader: Reader, skipped: dict, loc=None, unit: str = "line"
) -> bool:
    """Read one record into a node (or count it); False for a copy of a record already read.
    With ``loc`` (file index, offset, line) the node keeps only its part count and location."""
    if not isinstance(obj, dict):
        raise Bad(f"expected a JSON object, got {type(obj).__name__}")
    rtype = obj.get("type")
    if not isinstance(rtype, str):
        raise Bad("record has no 'type'")
    boundary = rtype == "system" and obj.get("subtype") == "compact_boundary"
    attachment = rtype == "attachment" and isinstance(obj.get("uuid"), str) and isinstance(obj.get("sessionId"), str)
    if (rtype not in ("user", "assistant", "system") and not attachment) or (
        rtype == "system" and not boundary and "uuid" not in obj
    ):
        reader.skip(f"claude-code record '{rtype}'", metadata=True)
        link = obj.get("uuid")
        if isinstance(link, str) and link and "parentUuid" in obj:
            parent_of = obj.get("parentUuid")
            st.ix.add_via(link, parent_of if isinstance(parent_of, str) else None)
        return True
    sid = obj.get("sessionId", obj.get("session_id"))
    if not isinstance(sid, str) or not sid:
        raise Bad(f"{rtype} record has no 'sessionId' (session log) or 'session_id' (stream-json)")
    raw_uid = obj.get("uuid")
    uid: str = raw_uid if isinstance(raw_uid, str) and raw_uid else f"{name}:{n}"
    ts = parse_ts(obj.get("timestamp"), "timestamp")
    side: str | None = None
    if obj.get("isSidechain") or obj.get("parent_tool_use_id"):
        side = str(obj.get("agentId") or obj.get("parent_tool_use_id") or "sidechain")
    if "parentUuid" in obj:
        parent = obj.get("parentUuid")
        if boundary and parent is None:
            parent = obj.get("logicalParentUuid")
    else:  # the stream: records follow each other in file order
        parent = last.get((sid, side))
    last[(sid, side)] = uid
    parts, msg_id, api = _message_parts(st, obj, rtype, ts, uid, name, n, skipped)
    if unit != "line":
        for pt in parts:
            pt.unit = unit
    sig = hash(tuple((p.kind, p.content) for p in parts))
    st.seen += 1
    key = key_of(uid)
    old = st.ix.keys.get(key)
    if old >= 0:
        st.duplicates += 1
        if st.ix.sig(old) != sig:
            st.conflicts += 1
        return False
    if rtype == "system":
        reader.skip("claude-code record 'system'", metadata=True)
    fields = (sid, side, _time_key(ts), boundary, msg_id, api, sig, rtype == "user" and _results_only(obj))
    st.ix.add(uid, key, parent if isinstance(parent, str) else None, fields, parts, loc)
    return True


def _results_only(obj: dict) -> bool:
    """Whether a user record's content is only ``tool_result`` blocks (a parallel call's result
    can hang off the chain: see ``claude_index.parallel``)."""
    content = obj["message"].get("content")
    return (
        isinstance(content, list)
        and bool(content)
        and all(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
    )


def _message_parts(st: _State, obj: dict, rtype: str, ts, uid: str, name: str, n: int, skipped: dict):
    """(parts, message id, API input tokens) of a user / assistant record."""
    parts: list[Part] = []
    msg_id = None
    api = None
    if rtype == "attachment":
        parts = attachment_parts(obj, ts, uid, skipped)
    elif rtype != "system":
        msg = obj.get("message")
        if not isinstance(msg, dict):
            raise Bad(f"{rtype} record has no 'message' object")
        content = msg.get("content")
        if rtype == "user":
            parts = user_parts(obj, content, ts, uid, skipped)
        elif obj.get("isApiErrorMessage") is True:  # written by Claude Code, never by the model
            key = "claude-code API error message (written by Claude Code, not sent to the model)"
            count(skipped, key)
        else:
            msg_id = msg.get("id") if isinstance(msg.get("id"), str) else None
            parts = assistant_parts(content, ts, uid, msg_id or uid, st.tool_call_kind, skipped)
            if msg.get("model") != "<synthetic>":
                api = usage_tokens(msg.get("usage"))
    for pt in parts:
        pt.file, pt.line = name, n
    return parts, msg_id, api


class _Graph:
    """The conversation structure of the index's rows: parent within a conversation (``ep``,
    -1 for a root), root, rank (time, then id), children and the live context."""

    def __init__(self, ix: Index):
        ix.flush()
        c = ix.cols
        self.flags, self.api, self.msg, self.n_parts = c.np("flags"), c.np("api"), c.np("msg"), c.np("n_parts")
        self.sess, self.side = c.np("sess"), c.np("side")
        par = ix.parents()
        ix.release("phi", "plo", "sig")  # the pass's lookups are done: only what placing needs
        self.ep, root = roots(par, self.side, (self.flags & BOUNDARY) != 0)
        order, self.rank = ix.ranks()
        ix.release("tkey")
        self.starts, self.kids = children(self.ep, self.rank)
        self.live = live(self.ep, root, order, self.rank, self.starts[1:] == self.starts[:-1])
        self.side_call = parallel(self.live, self.ep, self.flags, self.msg, self.n_parts)

    def done(self, ix: Index) -> None:
        """Release all but the live flags (and the columns that read records again)."""
        self.flags = self.api = self.msg = self.n_parts = self.sess = self.side = None  # type: ignore[assignment]
        self.ep = self.rank = self.starts = self.kids = self.side_call = None  # type: ignore[assignment]
        ix.release("flags", "api", "msg", "n_parts", "sess", "side")


def _walk(st: _State, g: _Graph, key: str, rs: list[int]) -> list[tuple[Conversation, np.ndarray, list[int], int]]:
    """The segments of one key's conversation (its roots ``rs`` in rank order): the records
    in context order from each root, a compaction boundary opening the next segment."""
    segs: dict[int, tuple[Conversation, list[int], list[int], int]] = {}
    seen_msgs: set[int] = set()
    next_seg = 0
    c = st.ix.cols  # ``array``\ s: their items read as Python ints, faster than NumPy's
    flags, api, msg, n_parts = c.flags, c.api, c.msg, c.n_parts
    starts, kids, lv, keep = (
        array("i", g.starts.tobytes()),
        array("i", g.kids.tobytes()),
        g.live.tobytes(),
        st.keep_rewound,
    )
    side_call = g.side_call.tobytes()
    for r in rs:
        start = next_seg + 1 if (flags[r] & BOUNDARY and segs) else next_seg
        stack = [(r, start)]
        #: the branches of a parallel call (``claude_index.parallel``), held back until the walk
        #: leaves the assistant message they fork from, so that the results follow all the calls
        pending: list[tuple[int, int]] = []
        pending_msg = 0
        while stack or pending:
            if not stack or (pending and (msg[stack[-1][0]] == 0 or msg[stack[-1][0]] != pending_msg)):
                stack.extend(reversed(pending))
                pending = []
            nd, seg = stack.pop()
            if flags[nd] & BOUNDARY and nd != r:
                seg = max(seg, next_seg) + 1
            next_seg = max(next_seg, seg)
            entry = segs.get(seg)
            if entry is None:
                conv = Conversation(key if seg == 0 else f"{key}#{seg}", order=(int(g.rank[nd]), key, seg))
                entry = segs[seg] = (conv, [], [0], seg)
            conv, members, size, _ = entry
            a, m = api[nd], msg[nd]
            if a >= 0 and m not in seen_msgs:
                conv.api.append(ApiCount(size[0], a))
            if m:
                seen_msgs.add(m)
            members.append(nd)
            size[0] += n_parts[nd]
            b, e = starts[nd], starts[nd + 1]
            if e > b:
                ks = [k for k in kids[b:e] if keep or lv[k]]
                later = [k for k in ks if side_call[k]] if len(ks) > 1 else []
                if later:
                    if not pending:
                        pending_msg = m
                    pending.extend((k, seg) for k in later)
                    ks = [k for k in ks if not side_call[k]]
                stack.extend((k, seg) for k in reversed(ks))
    return [(c, np.array(m, np.int32), size, seg) for c, m, size, seg in segs.values()]


def _conversations(st: _State) -> tuple[_Graph, list[tuple[Conversation, np.ndarray, int]]]:
    """Each conversation (without its parts yet), its rows in context order (a row off the live
    context is on a rewound branch: left out unless ``st.keep_rewound``) and its segment; the
    API counts are placed by the rows' part counts."""
    ix = st.ix
    g = _Graph(ix)
    st.rewound = int(np.count_nonzero((g.n_parts > 0) & ~g.live))  # with content
    by_key: dict[tuple[int, int], list[int]] = {}
    for r in np.flatnonzero(g.ep < 0).tolist():
        by_key.setdefault((int(g.sess[r]), int(g.side[r])), []).append(r)
    convs: list = []
    for (sess, side), rs in by_key.items():
        key = ix.names[sess] if side < 0 else f"{ix.names[sess]}@{ix.names[side]}"
        rs.sort(key=lambda r: g.rank[r])
        convs.extend(e for e in _walk(st, g, key, rs) if e[2][0] or e[0].api)
    convs.sort(key=lambda e: e[0].order)
    g.done(ix)
    return g, [(c, m, seg) for c, m, _, seg in convs]


#: inputs larger than this (local files, in bytes) are read in two passes, so that memory holds
#: the record index and one conversation's parts rather than every part (docs/importing.md)
TWO_PASS_BYTES = 256 << 20
#: the same for a streamed import (``import_to_parquet``, ``cupel-np import``), which holds no
#: table: over this, the record index and a chunk instead of every part (the second pass costs
#: about 1.3-1.8x the CPU time of one)
STREAM_TWO_PASS_BYTES = 32 << 20
#: open files kept during the second pass
_OPEN_FILES = 64


def _filled(st: _State, g: _Graph, convs, files) -> Iterator[Conversation]:
    """Each conversation with its parts, read again from the files for rows that kept only
    their location; a row's parts are released once handed on."""
    handles: dict[int, Any] = {}
    ix = st.ix
    fis, offsets, lines = ix.cols.fi, ix.cols.offset, ix.cols.line  # ``array``\ s: items as Python ints
    try:
        for conv, members, seg in convs:
            for row in members.tolist():
                fi = fis[row]
                if fi >= 0:
                    f = handles.get(fi)
                    if f is None:
                        if len(handles) >= _OPEN_FILES:
                            for h in handles.values():
                                h.close()
                            handles.clear()
                        f = handles[fi] = files[fi][0].open("rb")
                    obj = json_line_at(f, offsets[row])
                    rtype = obj["type"]
                    ts = parse_ts(obj.get("timestamp"), "timestamp")  # as the first pass read it
                    parts, _, _ = _message_parts(st, obj, rtype, ts, ix.uid(row), files[fi][1], lines[row], {})
                else:
                    parts = ix.parts[row]  # type: ignore[index]
                    ix.parts[row] = None  # type: ignore[index]
                rewound = not g.live[row]
                for pt in parts:
                    pt.segment = seg
                    if rewound:
                        pt.extra = {**(pt.extra or {}), "rewound": "true"}
                conv.parts.extend(parts)
            yield conv
    finally:
        for h in handles.values():
            h.close()


def _array_file(path: Path) -> bool:
    """Whether the file is one JSON array (``claude -p --output-format json --verbose`` prints
    the stream's messages as one), not JSON lines."""
    with path.open("rb") as f:
        head = f.read(256)
    return head.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] == b"["


def _array_records(path: Path, name: str) -> Iterator[tuple[int, Any, int]]:
    """(row, record, 0) of each element of a JSON-array file (rows from 0); the file whole as
    one bad row when it is not one JSON array. Over ``jsonread.JSON_STREAM_BYTES`` the array
    is read one element at a time (``jsonread.streamed_array``: the same records, the file's
    text never held; a malformed document stops the import naming where, as for every
    streamed ``.json``)."""
    elements = streamed_array(path, name)
    if elements is not None:
        yield from ((i, rec, 0) for i, rec in enumerate(elements))
        return
    raw = path.read_bytes()
    try:
        doc = json.loads(raw[3:] if raw.startswith(b"\xef\xbb\xbf") else raw)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as e:
        yield 0, Bad(f"not valid JSON: {e}"), 0
        return
    if not isinstance(doc, list):
        yield 0, Bad(f"expected a JSON array of records, got {type(doc).__name__}"), 0
        return
    for i, rec in enumerate(doc):
        yield i, rec, 0


def read(
    files: list[tuple[Path, str]],
    reader: Reader,
    *,
    skip_bad: bool,
    tool_call_kind: str,
    keep_rewound: bool = False,
    streamed: bool = False,
    fmt: str = "claude-code",
) -> Iterator[Conversation]:
    """The conversations of ``files``, each with its parts once it is reached (``fmt``, the
    format the user named or detection chose, is the one errors name). Inputs over
    ``TWO_PASS_BYTES`` (local files; ``STREAM_TWO_PASS_BYTES`` when ``streamed``) are read
    twice: the first pass keeps each record's chain fields, part count and location, the
    second reads each conversation's records again as it is built. Both give the same items."""
    limit = STREAM_TWO_PASS_BYTES if streamed else TWO_PASS_BYTES
    arrays = [_array_file(p) for p, _ in files]
    two_pass = (
        all(isinstance(p, Path) for p, _ in files)
        and not any(arrays)
        and sum(p.stat().st_size for p, _ in files) > limit
    )
    st = _State(tool_call_kind, low_memory=two_pass, keep_rewound=keep_rewound)
    for fi, (path, name) in enumerate(files):
        file_records, since = 0, len(reader.bad)
        last: dict = {}
        unit = "row" if arrays[fi] else "line"
        for n, rec, offset in _array_records(path, name) if arrays[fi] else json_lines(path, offsets=True):
            reader.lines += 1
            file_records += 1
            local: dict[str, int] = {}
            try:
                if isinstance(rec, Bad):
                    raise rec
                new = _record(st, rec, name, n, last, reader, local, (fi, offset, n) if two_pass else None, unit)
            except Bad as e:
                reader.bad.append(BadRecord(name, n, str(e), unit))
                continue
            if not new:
                continue  # a copy: its skipped parts were counted with the first
            for r, c in local.items():
                # thinking is never resent as context; an attachment counted here was not context
                reader.skip(
                    r, c, metadata="thinking" in r or r.startswith(("claude-code attachment", "claude-code API"))
                )
        check_not_all_bad(fmt, name, file_records, reader.bad[since:])
        raise_first_bad(reader.bad, since, skip_bad)
    if st.duplicates:
        reader.skip(
            "claude-code duplicate record (same uuid, first copy kept)", st.duplicates - st.conflicts, metadata=True
        )
    if st.conflicts:
        reader.skip("claude-code duplicate record whose content differs (first copy kept)", st.conflicts, metadata=True)
    g, convs = _conversations(st)
    if st.rewound and not keep_rewound:
        reader.skip("claude-code record on a rewound branch (not in the live context)", st.rewound, metadata=True)
    reader.skipped = {k: v for k, v in reader.skipped.items() if v}
    return _filled(st, g, convs, files)


def looks_like(first: Any) -> bool:
    """Auto-detection: a first record with ``sessionId`` / ``session_id`` and a Claude Code type."""
    return isinstance(first, dict) and (
        ("sessionId" in first or "session_id" in first or first.get("type") in ("summary", "file-history-snapshot"))
        and isinstance(first.get("type"), str)
    )
