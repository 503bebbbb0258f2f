"""Generated Claude Code session logs shaped like real ones, for the import benchmarks.

Every record carries what a real session log carries beside the message: the envelope
(``parentUuid``, ``isSidechain``, ``userType``, ``cwd``, ``sessionId``, ``version``,
``gitBranch``, ``uuid``, ``timestamp``), on assistant records the whole API message (``model``,
``id``, ``stop_reason``, ``usage`` with its cache breakdown) and ``requestId``, and on tool
results the ``toolUseResult`` that repeats the output (a Read's file, a Bash run's stdout, an
Edit's original file and patch, a Write's content). Each turn is assistant thinking + text +
1-3 tool calls (Read, Bash, Edit, Write), each block its own record with the message's usage;
tool results run from a few hundred bytes to ~20 KB; ``file-history-snapshot`` records;
a compaction in some sessions.
"""

from __future__ import annotations

import hashlib
import json
import random

WORDS = (
    "the a cache price src/app.py def return None assert timeout retry ok FAIL 42 line import self value "
    "config user request handler = ( ) : , . -> [ ] {} 'key' 0.5 test_price"
).split()


def text(rng: random.Random, n_bytes: int) -> str:
    """About ``n_bytes`` of code-and-prose-like lines."""
    out, size = [], 0
    while size < n_bytes:
        indent = " " * (4 * rng.randint(0, 3))
        line = indent + " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 14)))
        out.append(line)
        size += len(line) + 1
    return "\n".join(out)


def numbered(body: str) -> str:
    """A Read tool's output: the file's lines, numbered."""
    return "\n".join(f"{i:>6}\t{line}" for i, line in enumerate(body.split("\n"), start=1))


def uid_prefix(sid: str) -> str:
    """The first two groups of the uuids of session ``sid``'s records: canonical lowercase
    UUIDs as Claude Code writes them, unique to the session."""
    d = hashlib.md5(sid.encode()).hexdigest()
    return f"{d[:8]}-{d[8:12]}"


def session(rng: random.Random, sid: str, n_turns: int, *, compact: bool = True) -> list[dict]:
    """One session's records, in file order."""
    recs: list[dict] = []
    prefix = uid_prefix(sid)
    parent: list = [None]
    k = [0]
    base = {
        "isSidechain": False,
        "userType": "external",
        "cwd": "/home/dev/project",
        "sessionId": sid,
        "version": "2.0.61",
        "gitBranch": "main",
    }

    def add(rtype: str, message: dict | None, **extra) -> dict:
        uid = f"{prefix}-4000-8000-{k[0]:012x}"
        r = {"parentUuid": parent[0], **base, "type": rtype}
        if message is not None:
            r["message"] = message
        r.update(extra)
        r["uuid"] = uid
        r["timestamp"] = f"2026-11-20T{11 + k[0] // 3600 % 12:02d}:{k[0] // 60 % 60:02d}:{k[0] % 60:02d}.123Z"
        recs.append(r)
        parent[0] = uid
        k[0] += 1
        return r

    def prompt(body: str, **extra) -> None:
        r = add("user", {"role": "user", "content": body}, **extra)
        snap = {"messageId": r["uuid"], "trackedFileBackups": {}, "timestamp": r["timestamp"]}
        recs.append(
            {"type": "file-history-snapshot", "messageId": r["uuid"], "snapshot": snap, "isSnapshotUpdate": False}
        )

    def assistant(block: dict, mid: str, usage: dict, request: str) -> None:
        msg = {
            "model": "claude-sonnet-4-5-20250929",
            "id": mid,
            "type": "message",
            "role": "assistant",
            "content": [block],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage,
        }
        add("assistant", msg, requestId=request)

    prompt(text(rng, 300), thinkingMetadata={"level": "high", "disabled": False, "triggers": []}, todos=[])
    cache = 12000
    for t in range(n_turns):
        mid = f"msg_01{sid}{t:06d}"
        cache += rng.randint(500, 6000)
        usage = {
            "input_tokens": rng.randint(1, 9),
            "cache_creation_input_tokens": rng.randint(100, 3000),
            "cache_read_input_tokens": cache,
            "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 200},
            "output_tokens": rng.randint(20, 900),
            "service_tier": "standard",
        }

        req = f"req_011C{sid}{t:08d}"
        thinking = text(rng, rng.choice([200, 800, 2000]))
        assistant({"type": "thinking", "thinking": thinking, "signature": "RXVk" * 80}, mid, usage, req)
        assistant({"type": "text", "text": text(rng, rng.choice([80, 250, 900]))}, mid, usage, req)
        for c in range(rng.randint(1, 3)):
            tid = f"toolu_01{sid}{t:04d}{c}"
            path = f"/home/dev/project/src/mod{rng.randint(0, 40)}.py"
            tool = rng.choice(["Read", "Read", "Bash", "Bash", "Edit", "Write"])
            if tool == "Read":
                body = text(rng, rng.choice([200, 800, 3000, 12000]))
                inp: dict = {"file_path": path}
                out = numbered(body)
                tur: dict = {
                    "type": "text",
                    "file": {"filePath": path, "content": body, "numLines": body.count("\n") + 1},
                }
            elif tool == "Bash":
                body = text(rng, rng.choice([100, 600, 3000]))
                inp = {"command": "pytest -q tests/test_app.py", "description": "Run the tests"}
                out = body
                tur = {"stdout": body, "stderr": "", "interrupted": False, "isImage": False}
            elif tool == "Edit":
                old, new, orig = text(rng, 200), text(rng, 300), text(rng, 5000)
                inp = {"file_path": path, "old_string": old, "new_string": new}
                out = f"The file {path} has been updated. Here's the result of running `cat -n`:\n" + numbered(new)
                patch = [{"oldStart": 10, "oldLines": 4, "newStart": 10, "newLines": 6, "lines": new.split("\n")}]
                tur = {
                    "filePath": path,
                    "oldString": old,
                    "newString": new,
                    "originalFile": orig,
                    "structuredPatch": patch,
                }
            else:
                body = text(rng, 3000)
                inp = {"file_path": path, "content": body}
                out = f"File created successfully at: {path}"
                tur = {"type": "create", "filePath": path, "content": body, "structuredPatch": [], "originalFile": None}
            assistant({"type": "tool_use", "id": tid, "name": tool, "input": inp}, mid, usage, req)
            call_uuid = parent[0]
            block = {"tool_use_id": tid, "type": "tool_result", "content": out}
            if rng.random() < 0.05:
                block["is_error"] = True
            add("user", {"role": "user", "content": [block]}, toolUseResult=tur, sourceToolAssistantUUID=call_uuid)
        if rng.random() < 0.2:
            prompt(text(rng, 200))
        if compact and t == n_turns // 2 and rng.random() < 0.3:
            last = parent[0]
            b = add("system", None, subtype="compact_boundary", content="Conversation compacted", level="info")
            b.update(parentUuid=None, logicalParentUuid=last, compactMetadata={"trigger": "auto", "preTokens": cache})
            add(
                "user",
                {
                    "role": "user",
                    "content": "This session is being continued from a previous conversation. " + text(rng, 2000),
                },
                isCompactSummary=True,
            )
    return recs


def lines(recs: list[dict]) -> str:
    """The records as JSON lines, compact as Claude Code writes them."""
    return "".join(json.dumps(r, separators=(",", ":"), ensure_ascii=False) + "\n" for r in recs)
