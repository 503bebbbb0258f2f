"""Generated agent sessions with known use: the fixture on which the transcript labels
(``cupel_np.analysis.labels.usage_labels`` and ``io.importers.reuse_labels``) are measured.

Each session (``conversation_id``) is a user prompt naming a file, then tool calls and their
outputs (``ToolCall`` / ``ToolOutput`` rows linked by ``tool_call_id``, as ``import_transcripts``
writes them) and assistant messages. Every tool output has a true ``truth_used``:

* ``edit`` (used): a Read of a file; a later Edit of that path quotes one of its lines;
* ``path`` (used): a Read of a file whose text holds nothing distinctive; a later Edit names
  the path only (use through a tool call's arguments);
* ``quote`` (used): a grep whose line number and function name a later assistant message
  quotes;
* ``paraphrase`` (used): a test run the agent sums up in its own words (no string reused);
* ``noise`` (unused): a listing of this session's own names, never mentioned again, plus the
  project's shared names;
* ``big`` (unused): a long listing of the project's shared files and names, which later
  messages of every session mention by chance.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa

#: names every session of the project shares (a project-wide identifier is no evidence)
PROJECT = [
    "acme_core",
    "AcmeClient",
    "src/acme/config.py",
    "settings_loader",
    "pyproject.toml",
    "load_settings",
    "requests",
    "repository",
    "function",
    "because",
    "returns",
    "configuration",
]
KINDS = ("edit", "path", "quote", "paraphrase", "noise", "big")


def sessions(n_sessions: int = 40, steps: int = 10, seed: int = 0) -> pa.Table:
    """An items table (``import_transcripts`` columns plus ``truth_used`` and ``truth_kind``)."""
    rng = np.random.default_rng(seed)
    rows: list[dict] = []
    for s in range(n_sessions):
        _session(rows, f"sess-{s:03d}", s, steps, rng)
    cols = {k: [r.get(k) for r in rows] for k in ("conversation_id", "content", "kind", "truth_used", "truth_kind")}
    cols["tokens"] = [max(1, len(r["content"]) // 4) for r in rows]
    cols["source"] = ["Tool" if r["kind"] != "Message" else "Chat" for r in rows]
    cols["pinned"] = [False] * len(rows)
    cols["tags"] = [[r["role"]] for r in rows]
    cols["metadata"] = [[(k, v) for k, v in r["md"].items()] for r in rows]
    return pa.table(
        {
            "conversation_id": pa.array(cols["conversation_id"], pa.string()),
            "content": pa.array(cols["content"], pa.string()),
            "tokens": pa.array(cols["tokens"], pa.int64()),
            "kind": pa.array(cols["kind"], pa.string()),
            "source": pa.array(cols["source"], pa.string()),
            "pinned": pa.array(cols["pinned"]),
            "tags": pa.array(cols["tags"], pa.list_(pa.string())),
            "metadata": pa.array(cols["metadata"], pa.map_(pa.string(), pa.string())),
            "truth_used": pa.array(cols["truth_used"], pa.bool_()),
            "truth_kind": pa.array(cols["truth_kind"], pa.string()),
        }
    )


def _add(rows, sid, kind, role, content, **md):
    rows.append({"conversation_id": sid, "kind": kind, "role": role, "content": content, "md": dict(role=role, **md)})


def _call(rows, sid, cid, name, args):
    _add(rows, sid, "ToolCall", "assistant", f"{name}({json.dumps(args)})", tool_call_id=cid, tool_name=name)


def _output(rows, sid, cid, text, used, kind):
    _add(rows, sid, "ToolOutput", "tool", text, tool_call_id=cid)
    rows[-1]["truth_used"] = used
    rows[-1]["truth_kind"] = kind


def _shared(rng, k):
    return " ".join(rng.choice(PROJECT, size=k))


def _session(rows, sid, s, steps, rng):
    _add(rows, sid, "Message", "user", f"Please fix the failing import in src/app_{s}/main.py; we use acme_core.")
    pending: list[tuple[int, str, dict]] = []  # (step due, how, what)
    for k in range(steps):
        cid = f"call-{s}-{k}"
        kind = KINDS[int(rng.integers(0, len(KINDS)))]
        path = f"src/app_{s}/module_{k}.py"
        if kind == "edit":
            fn = f"handle_{s}_{k}_{int(rng.integers(100, 999))}"
            _call(rows, sid, cid, "Read", {"file_path": path})
            body = f"def {fn}(request):\n    return {_shared(rng, 3)}\n"
            _output(rows, sid, cid, body, True, kind)
            pending.append((k + int(rng.integers(1, 3)), "edit", {"file_path": path, "old_string": f"def {fn}("}))
        elif kind == "path":
            _call(rows, sid, cid, "Read", {"file_path": path})
            _output(rows, sid, cid, f"# {_shared(rng, 4)}\n", True, kind)
            pending.append((k + int(rng.integers(1, 3)), "edit", {"file_path": path, "old_string": "# "}))
        elif kind == "quote":
            line, fn = int(rng.integers(1000, 9999)), f"parse_frame_{s}_{k}"
            _call(rows, sid, cid, "Bash", {"command": "grep -rn 'raise' src"})
            _output(rows, sid, cid, f"{path}:{line}: raise ValueError in {fn}\n{_shared(rng, 2)}", True, kind)
            pending.append((k + 1, "say", {"text": f"The error is raised at line {line} in {fn}."}))
        elif kind == "paraphrase":
            _call(rows, sid, cid, "Bash", {"command": "pytest -q"})
            _output(rows, sid, cid, "........ 42 passed in 0.51s", True, kind)
            pending.append((k + 1, "say", {"text": "Good: the whole suite passes now."}))
        elif kind == "noise":
            _call(rows, sid, cid, "Bash", {"command": "ls"})
            own = " ".join(f"scratch_{s}_{k}_{j}.tmp" for j in range(3))
            _output(rows, sid, cid, f"{own} {_shared(rng, 2)}", False, kind)
        else:
            _call(rows, sid, cid, "Bash", {"command": "find . -name '*.py'"})
            _output(rows, sid, cid, "\n".join(_shared(rng, 6) for _ in range(40)), False, kind)
        for _due, how, what in [p for p in pending if p[0] == k]:
            if how == "edit":
                _call(rows, sid, f"edit-{s}-{k}-{len(rows)}", "Edit", dict(what, new_string="..."))
                _output(rows, sid, f"edit-{s}-{k}-{len(rows)}", "The file has been updated.", False, "ack")
            else:
                _add(rows, sid, "Message", "assistant", what["text"])
        pending = [p for p in pending if p[0] != k]
        # chatter: every session's assistant names shared project things now and then
        _add(rows, sid, "Message", "assistant", f"Looking at {_shared(rng, 2)} next.")
    for _due, how, what in pending:
        if how == "edit":
            _call(rows, sid, f"edit-{s}-end-{len(rows)}", "Edit", dict(what, new_string="..."))
        else:
            _add(rows, sid, "Message", "assistant", what["text"])
