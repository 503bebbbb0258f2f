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

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from cupel_np.io.importers.core import (
    ApiCount,
    Bad,
    BadRecord,
    Conversation,
    Part,
    Reader,
    blank,
    call_text,
    check_not_all_bad,
    json_line_at,
    json_lines,
    parse_ts,
    raise_first_bad,
    text_of,
)

#: records that are never context (counted, as metadata records)
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_BASH_IN = re.compile(r"<bash-input>(.*?)</bash-input>", re.S)
_BASH_OUT = re.compile(r"<bash-stdout>(.*?)</bash-stdout>", re.S)
_BASH_ERR = re.compile(r"<bash-stderr>(.*?)</bash-stderr>", re.S)


def strip_ansi(s: str) -> str:
    """``s`` without ANSI escape sequences (colours, cursor moves, OSC titles)."""
    return _ANSI.sub("", s) if "\x1b" in s else s


#: a record's time as an order key: microseconds since the epoch; a record without a time
#: sorts after every timed one (as ``(ts is None, ts)`` would)
_NO_TIME = 1 << 62
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)


def _time_key(ts: datetime | None) -> int:
    return _NO_TIME if ts is None else (ts - _EPOCH) // _US


@dataclass(slots=True)
class _Node:
    """One record of the index: in two-pass mode (``fi >= 0``) it holds no parts, only what
    places it (chain, session, time) and where to read it again, so it is kept small: no
    per-record containers, strings shared where records repeat them."""

    uuid: str
    parent: str | None
    session: str
    side: str | None  # sub-agent key, None on the main chain
    tkey: int  # ``_time_key`` of its timestamp
    boundary: bool
    parts: list[Part] | tuple[()]
    msg_id: str | None = None
    api: int | None = None  # input + cache tokens of the request this assistant message answered
    sig: int = 0
    children: str | list[str] | None = None  # one child's uuid, or a list of them
    n_parts: int = 0
    fi: int = -1  # two passes: file index, byte offset and line to read the record again
    offset: int = 0
    line: int = 0
    rewound: bool = False  # on a branch the user rewound (not in the live context)


def _order(nd: _Node) -> tuple[int, str]:
    """A record's place among others: its time, then its uuid."""
    return nd.tkey, nd.uuid


def _kids(nd: _Node) -> tuple[str, ...] | list[str]:
    c = nd.children
    return () if c is None else (c,) if isinstance(c, str) else c


def _add_child(nd: _Node, uid: str) -> None:
    c = nd.children
    if c is None:
        nd.children = uid
    elif isinstance(c, str):
        nd.children = [c, uid]
    else:
        c.append(uid)


def _usage_tokens(usage) -> int | None:
    if not isinstance(usage, dict):
        return None
    total, found = 0, False
    for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"):
        v = usage.get(k)
        if type(v) is int:
            total += v
            found = True
    return total if found and total else None


def _shell_parts(text: str, role: str, ts, uid) -> list[Part] | None:
    """``!cmd`` records: ``<bash-input>`` (the command) and ``<bash-stdout>`` /
    ``<bash-stderr>`` (its output, escapes stripped) as their own kinds, source ``Shell``."""
    if "<bash-" not in text:
        return None
    m_in = _BASH_IN.search(text)
    if m_in:
        return [Part(m_in.group(1), "ShellCommand", "Shell", False, role, ts, uid, extra={"shell": "input"})]
    out, err = _BASH_OUT.search(text), _BASH_ERR.search(text)
    if not out and not err:
        return None
    pieces = [strip_ansi(m.group(1)) for m in (out, err) if m and not blank(m.group(1))]
    body = "\n".join(pieces)
    extra = {"shell": "output", "stderr": "true" if err and not blank(err.group(1)) else "false"}
    return [Part(body, "ShellOutput", "Shell", False, role, ts, uid, extra=extra)] if body else []


def _blocks(content) -> list:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return content
    raise Bad(f"message.content must be a string or a list of blocks, got {type(content).__name__}")


def _user_parts(obj: dict, content, ts, uid, skipped: dict) -> list[Part]:
    if isinstance(content, str):
        shell = _shell_parts(content, "user", ts, uid)
        if shell is not None:
            return shell
    extra: dict[str, str] = {}
    if obj.get("isCompactSummary"):
        extra["compact_summary"] = "true"
    if obj.get("isMeta"):
        extra["is_meta"] = "true"
    parts: list[Part] = []
    for i, b in enumerate(_blocks(content)):
        if not isinstance(b, dict) or not isinstance(b.get("type"), str):
            raise Bad(f"message.content[{i}]: expected a block with a 'type', got {b!r:.60}")
        bt = b["type"]
        if bt == "text":
            if not isinstance(b.get("text"), str):
                raise Bad(f"message.content[{i}]: text block without a string 'text'")
            if blank(b["text"]):
                skipped["empty content"] = skipped.get("empty content", 0) + 1
                continue
            parts.append(Part(b["text"], "Message", "Chat", False, "user", ts, uid, extra=dict(extra) or None))
        elif bt == "tool_result":
            text = text_of(b.get("content"), f"message.content[{i}].content", skipped)
            tcid = b.get("tool_use_id") if isinstance(b.get("tool_use_id"), str) else None
            if blank(text):
                skipped["empty content"] = skipped.get("empty content", 0) + 1
                continue
            err = b.get("is_error")
            parts.append(
                Part(
                    strip_ansi(text),
                    "ToolOutput",
                    "Tool",
                    False,
                    "tool",
                    ts,
                    uid,
                    tool_call_id=tcid,
                    tool_role="result" if tcid else None,
                    is_error=bool(err) if err is not None else False,
                )
            )
        else:
            key = f"claude-code block '{bt}'"
            skipped[key] = skipped.get(key, 0) + 1
    return parts


def _assistant_parts(content, ts, uid, turn, tool_call_kind: str, skipped: dict) -> list[Part]:
    parts: list[Part] = []
    for i, b in enumerate(_blocks(content)):
        if not isinstance(b, dict) or not isinstance(b.get("type"), str):
            raise Bad(f"message.content[{i}]: expected a block with a 'type', got {b!r:.60}")
        bt = b["type"]
        if bt == "text":
            if not isinstance(b.get("text"), str):
                raise Bad(f"message.content[{i}]: text block without a string 'text'")
            if blank(b["text"]):
                skipped["empty content"] = skipped.get("empty content", 0) + 1
                continue
            parts.append(Part(b["text"], "Message", "Chat", False, "assistant", ts, uid, turn=turn))
        elif bt in ("tool_use", "server_tool_use"):
            name = b.get("name")
            if not isinstance(name, str):
                raise Bad(f"message.content[{i}]: tool_use block without a 'name'")
            tid = b.get("id") if isinstance(b.get("id"), str) else None
            parts.append(
                Part(
                    call_text(name, b.get("input", {})),
                    tool_call_kind,
                    "Tool",
                    False,
                    "assistant",
                    ts,
                    uid,
                    tool_name=name,
                    tool_call_id=tid,
                    tool_role="call" if tid else None,
                    turn=turn,
                )
            )
        else:  # thinking, redacted_thinking, image ...: not resent as plain context
            key = f"claude-code block '{bt}'"
            skipped[key] = skipped.get(key, 0) + 1
    return parts


class _State:
    def __init__(self, tool_call_kind: str, low_memory: bool = False, keep_rewound: bool = False):
        self.tool_call_kind = tool_call_kind
        self.low_memory = low_memory
        self.keep_rewound = keep_rewound
        self.rewound = 0  # records on rewound branches
        #: uuid -> parentUuid of records that are not messages but sit in the chain
        #: (``progress`` hook records, ``attachment``\ s, ...): a message whose parent is one of
        #: them hangs, through it, off the message before it
        self.via: dict[str, str | None] = {}
        self.nodes: dict[str, _Node] = {}
        self.sessions: dict[str, str] = {}  # one string per session id, shared by its records
        self.last_msg: str | None = None  # the message id of the record before (records of one message share it)
        self.seen = 0
        self.duplicates = 0
        self.conflicts = 0


_NOT_CONTEXT = {"summary", "file-history-snapshot", "queue-operation", "custom-title", "result", "stream_event"}


def _record(st: _State, obj, name: str, n: int, last: dict, reader: Reader, skipped: dict, loc=None) -> bool:
    """Read one record into a node (or count it); False for a copy of a record already read.
    With ``loc`` (file index, offset, line) the node keeps only its part count and location."""
    if not isinstance(obj, dict):
        raise Bad(f"expected a JSON object, got {type(obj).__name__}")
    rtype = obj.get("type")
    if not isinstance(rtype, str):
        raise Bad("record has no 'type'")
    boundary = rtype == "system" and obj.get("subtype") == "compact_boundary"
    if rtype not in ("user", "assistant", "system") or (rtype == "system" and not boundary and "uuid" not in obj):
        reader.skip(f"claude-code record '{rtype}'", metadata=True)
        link = obj.get("uuid")
        if isinstance(link, str) and link and "parentUuid" in obj:
            parent_of = obj.get("parentUuid")
            st.via.setdefault(link, parent_of if isinstance(parent_of, str) else None)
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
    sig = hash(tuple((p.kind, p.content) for p in parts))
    st.seen += 1
    old = st.nodes.get(uid)
    if old is not None:
        st.duplicates += 1
        if old.sig != sig:
            st.conflicts += 1
        return False
    if rtype == "system":
        reader.skip("claude-code record 'system'", metadata=True)
    if isinstance(parent, str) and parent in st.nodes:
        parent = st.nodes[parent].uuid  # the string the index holds already
    sid = st.sessions.setdefault(sid, sid)
    if msg_id is not None and msg_id == st.last_msg:
        msg_id = st.last_msg
    st.last_msg = msg_id
    nd = _Node(uid, parent, sid, side, _time_key(ts), boundary, parts, msg_id, api, sig, n_parts=len(parts))
    if loc is not None:  # two passes: the parts are read again when their conversation is built
        nd.parts, (nd.fi, nd.offset, nd.line) = (), loc
    st.nodes[uid] = nd
    return True


def _message_parts(st: _State, obj: dict, rtype: str, ts, uid: str, name: str, n: int, skipped: dict):
    """(parts, message id, API input tokens) of a user / assistant record."""
    parts: list[Part] = []
    msg_id = None
    api = None
    if rtype != "system":
        msg = obj.get("message")
        if not isinstance(msg, dict):
            raise Bad(f"{rtype} record has no 'message' object")
        content = msg.get("content")
        if rtype == "user":
            parts = _user_parts(obj, content, ts, uid, skipped)
        else:
            msg_id = msg.get("id") if isinstance(msg.get("id"), str) else None
            parts = _assistant_parts(content, ts, uid, msg_id or uid, st.tool_call_kind, skipped)
            if msg.get("model") != "<synthetic>":
                api = _usage_tokens(msg.get("usage"))
    for pt in parts:
        pt.file, pt.line = name, n
    return parts, msg_id, api


def _link_through(st: _State) -> None:
    """Parents that are chain records but not messages (``st.via``) replaced by the first
    ancestor that is a message record (or None)."""
    nodes, via = st.nodes, st.via
    if not via:
        return
    for nd in nodes.values():
        p, hops = nd.parent, 0
        while p is not None and p not in nodes and p in via and hops <= len(via):
            p, hops = via[p], hops + 1  # hops: a cycle among them ends the walk
        nd.parent = p


def _roots(st: _State) -> dict[str, str]:
    """Each node's root (following parents that are in the log), iteratively."""
    _link_through(st)
    root: dict[str, str] = {}
    nodes = st.nodes
    for uid in nodes:
        path: list[str] = []
        on_path: set[str] = set()
        cur = uid
        while cur not in root:
            path.append(cur)
            on_path.add(cur)
            p = nodes[cur].parent
            if p is None or p not in nodes or p in on_path:  # a cycle ends at the record closing it
                root[cur] = cur
                break
            if nodes[p].side != nodes[cur].side and nodes[cur].side is not None:
                root[cur] = cur  # a sub-agent's first record hangs off the main chain
                break
            cur = p
        r = root[cur]
        for x in path:
            root[x] = r
    return root


def _live(st: _State, root: dict[str, str]) -> set[str]:
    """The records of the live context: in each tree (a root and the records that reach it),
    the chain from the root to its newest leaf (latest timestamp, then uuid). A record with
    two or more children is where the user rewound (or edited a message, or resumed from an
    earlier point): the branches that do not lead to the newest leaf are abandoned."""
    nodes = st.nodes
    newest: dict[str, _Node] = {}  # root -> its newest leaf
    for uid, nd in nodes.items():
        if nd.children is None:
            r = root[uid]
            best = newest.get(r)
            if best is None or _order(nd) > _order(best):
                newest[r] = nd
    live: set[str] = set()
    for r, leaf in newest.items():
        cur: str | None = leaf.uuid
        while cur is not None and cur not in live:
            live.add(cur)
            cur = None if cur == r else nodes[cur].parent
    return live


def _conversations(st: _State) -> list[tuple[Conversation, list[_Node], int]]:
    """Each conversation (without its parts yet), its nodes in context order (each marked
    ``rewound`` when on a rewound branch: those are left out unless ``st.keep_rewound``) and
    its segment; the API counts are placed by the nodes' part counts."""
    nodes = st.nodes
    root = _roots(st)
    for uid, nd in nodes.items():
        if root[uid] != uid:
            _add_child(nodes[nd.parent], uid)  # type: ignore[index]
    live = _live(st, root)
    st.rewound = sum(1 for uid, nd in nodes.items() if nd.n_parts and uid not in live)  # with content
    by_key: dict[str, list[_Node]] = {}
    for uid, nd in nodes.items():
        if root[uid] == uid:
            key = nd.session if nd.side is None else f"{nd.session}@{nd.side}"
            by_key.setdefault(key, []).append(nd)
    convs: list[tuple[Conversation, list[_Node], list[int], int]] = []
    for key, roots in by_key.items():
        roots.sort(key=_order)
        segs: dict[int, tuple[Conversation, list[_Node], list[int], int]] = {}
        seen_msgs: set[str] = set()
        next_seg = 0
        for r in roots:
            start = next_seg + 1 if (r.boundary and segs) else next_seg
            stack = [(r, start)]
            while stack:
                nd, seg = stack.pop()
                if nd.boundary and nd is not r:
                    seg = max(seg, next_seg) + 1
                next_seg = max(next_seg, seg)
                entry = segs.get(seg)
                if entry is None:
                    conv = Conversation(key if seg == 0 else f"{key}#{seg}", order=(_order(nd), key, seg))
                    entry = segs[seg] = (conv, [], [0], seg)
                conv, members, size, _ = entry
                if nd.api is not None and nd.msg_id not in seen_msgs:
                    conv.api.append(ApiCount(size[0], nd.api))
                if nd.msg_id:
                    seen_msgs.add(nd.msg_id)
                nd.rewound = nd.uuid not in live
                members.append(nd)
                size[0] += nd.n_parts
                kids = sorted((nodes[c] for c in _kids(nd) if st.keep_rewound or c in live), key=_order, reverse=True)
                stack.extend((k, seg) for k in kids)
        convs.extend(e for e in segs.values() if e[2][0] or e[0].api)
    convs.sort(key=lambda e: e[0].order)
    return [(c, m, seg) for c, m, _, seg in convs]


#: inputs larger than this (local files, in bytes) are read in two passes, so that memory holds
#: the record index and one conversation's parts rather than every part (docs/importing.md)
TWO_PASS_BYTES = 256 << 20
#: the same for a streamed import (``import_to_parquet``, ``cupel-np import``), which holds no
#: table: over this, the record index and a chunk instead of every part (the second pass costs
#: about 1.3-1.8x the CPU time of one)
STREAM_TWO_PASS_BYTES = 32 << 20
#: open files kept during the second pass
_OPEN_FILES = 64


def _filled(st: _State, convs, files) -> Iterator[Conversation]:
    """Each conversation with its parts, read again from the files for nodes that kept only
    their location; a node's parts are released once handed on."""
    handles: dict[int, Any] = {}
    try:
        for conv, members, seg in convs:
            for nd in members:
                parts = nd.parts
                if nd.fi >= 0:
                    fi, offset, n = nd.fi, nd.offset, nd.line
                    f = handles.get(fi)
                    if f is None:
                        if len(handles) >= _OPEN_FILES:
                            for h in handles.values():
                                h.close()
                            handles.clear()
                        f = handles[fi] = files[fi][0].open("rb")
                    obj = json_line_at(f, offset)
                    rtype = obj["type"]
                    ts = parse_ts(obj.get("timestamp"), "timestamp")  # as the first pass read it
                    parts, _, _ = _message_parts(st, obj, rtype, ts, nd.uuid, files[fi][1], n, {})
                nd.parts = ()
                for pt in parts:
                    pt.segment = seg
                    if nd.rewound:
                        pt.extra = {**(pt.extra or {}), "rewound": "true"}
                conv.parts.extend(parts)
            yield conv
    finally:
        for h in handles.values():
            h.close()


def read(
    files: list[tuple[Path, str]],
    reader: Reader,
    *,
    skip_bad: bool,
    tool_call_kind: str,
    keep_rewound: bool = False,
    streamed: bool = False,
) -> Iterator[Conversation]:
    """The conversations of ``files``, each with its parts once it is reached. Inputs over
    ``TWO_PASS_BYTES`` (local files; ``STREAM_TWO_PASS_BYTES`` when ``streamed``) are read
    twice: the first pass keeps each record's chain fields, part count and location, the
    second reads each conversation's records again as it is built. Both give the same items."""
    limit = STREAM_TWO_PASS_BYTES if streamed else TWO_PASS_BYTES
    two_pass = all(isinstance(p, Path) for p, _ in files) and sum(p.stat().st_size for p, _ in files) > limit
    st = _State(tool_call_kind, low_memory=two_pass, keep_rewound=keep_rewound)
    for fi, (path, name) in enumerate(files):
        file_records, since = 0, len(reader.bad)
        last: dict = {}
        for n, rec, offset in json_lines(path, offsets=True):
            reader.lines += 1
            file_records += 1
            local: dict[str, int] = {}
            try:
                if isinstance(rec, Bad):
                    raise rec
                new = _record(st, rec, name, n, last, reader, local, (fi, offset, n) if two_pass else None)
            except Bad as e:
                reader.bad.append(BadRecord(name, n, str(e)))
                continue
            if not new:
                continue  # a copy: its skipped parts were counted with the first
            for r, c in local.items():
                reader.skip(r, c, metadata="thinking" in r)  # thinking is never resent as context
        check_not_all_bad("claude-code", name, file_records, reader.bad[since:])
        raise_first_bad(reader.bad, since, skip_bad)
    if st.duplicates:
        reader.skip(
            "claude-code duplicate record (same uuid, first copy kept)", st.duplicates - st.conflicts, metadata=True
        )
    if st.conflicts:
        reader.skip("claude-code duplicate record whose content differs (first copy kept)", st.conflicts, metadata=True)
    convs = _conversations(st)
    if st.rewound and not keep_rewound:
        reader.skip("claude-code record on a rewound branch (not in the live context)", st.rewound, metadata=True)
    reader.skipped = {k: v for k, v in reader.skipped.items() if v}
    return _filled(st, convs, files)


def looks_like(first: Any) -> bool:
    """Auto-detection: a first record with ``sessionId`` / ``session_id`` and a Claude Code type."""
    return isinstance(first, dict) and (
        ("sessionId" in first or "session_id" in first or first.get("type") in ("summary", "file-history-snapshot"))
        and isinstance(first.get("type"), str)
    )
