"""Claude Code rewind branches: a record with two or more children is where the user rewound
(or edited a prompt); the live context is the chain from the root to the newest leaf. Records
on the other branches are left out and counted, or kept and marked with ``keep_rewound``."""

import json
from pathlib import Path

from cupel_np.cli import main
from cupel_np.io.importers import claude_code, estimate_tokens, import_transcripts

REWIND = Path(__file__).resolve().parents[2] / "data" / "transcripts" / "claude_code_rewind"
SKIP = "claude-code record on a rewound branch (not in the live context)"


def test_only_the_live_branch_by_default():
    res = import_transcripts("claude-code", REWIND)
    t = res.table.to_pylist()
    assert [r["content"] for r in t] == [
        "Add a discount field to the cart total.",
        "I'll look at cart.py first.",
        "Use a fixed-amount discount instead.",
        "Added discount_amount to Cart.total().",
        "Thanks, add a test.",
        "Added test_discount_amount.",
    ]
    assert {r["conversation_id"] for r in t} == {"9b2e4c1a-7d3f-4e8b-a1c5-2f6d8e0b3a71"}
    assert res.skipped[SKIP] == 4  # two prompts and two answers of the abandoned attempt
    assert SKIP in res.metadata_reasons  # abandoned by the user: not lost content
    assert all(r["tokens"] == estimate_tokens(r["content"]) for r in t)
    # only the live requests' API counts: msg_r1, msg_r2b, msg_r4
    (chk,) = res.tokens
    assert chk["requests"] == 3 and chk["api"] == 3404


def test_keep_rewound_marks_the_abandoned_records():
    res = import_transcripts("claude-code", REWIND, keep_rewound=True)
    t = res.table.to_pylist()
    assert len(t) == 10 and SKIP not in res.skipped
    rewound = [r["content"] for r in t if dict(r["metadata"]).get("rewound") == "true"]
    assert rewound == [
        "Use a percentage discount.",
        "Added discount_pct to Cart.total().",
        "Also round to cents.",
        "Rounded with Decimal.quantize.",
    ]
    assert [r["content"] for r in t].index(rewound[-1]) < [r["content"] for r in t].index(
        "Use a fixed-amount discount instead."
    )  # older branch first, in chain order


def _rec(uid, parent, rtype, minute, content, **extra):
    r = {
        "type": rtype,
        "uuid": uid,
        "parentUuid": parent,
        "sessionId": "s1",
        "timestamp": f"2026-01-01T00:{minute:02d}:00Z",
    }
    r["message"] = {"role": rtype, "content": content}
    r.update(extra)
    return r


def _write(path, recs):
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


def test_rewind_then_compaction_and_tools(tmp_path, monkeypatch):
    """The shape of a rewind before a compaction: the pre-compaction set holds the live
    branch only; a tool call and its result on the abandoned branch leave no orphan."""
    recs = [
        _rec("u1", None, "user", 0, "Start"),
        _rec("a1", "u1", "assistant", 1, [{"type": "text", "text": "Ready"}]),
        _rec("b1u", "a1", "user", 2, "First attempt"),
        _rec("b1a", "b1u", "assistant", 3, [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"c": "ls"}}]),
        _rec("b1r", "b1a", "user", 4, [{"type": "tool_result", "tool_use_id": "t1", "content": "a.py"}]),
        _rec("b2u", "a1", "user", 10, "Second attempt"),
        _rec("b2a", "b2u", "assistant", 11, [{"type": "tool_use", "id": "t2", "name": "Read", "input": {"p": "b"}}]),
        _rec(
            "b2r",
            "b2a",
            "user",
            12,
            [{"type": "tool_result", "tool_use_id": "t2", "content": "b text", "is_error": True}],
        ),
        {**_rec("cb", None, "system", 30, None), "subtype": "compact_boundary", "logicalParentUuid": "b2r"},
        _rec("cs", "cb", "user", 31, "Summary: the user asked for a plan.", isCompactSummary=True),
        _rec("p1u", "cs", "user", 40, "After compaction"),
    ]
    del recs[8]["message"]
    p = _write(tmp_path / "s1.jsonl", recs)
    res = import_transcripts("claude-code", p)
    t = res.table.to_pylist()
    by_set = {}
    for r in t:
        by_set.setdefault(r["conversation_id"], []).append(r["content"])
    assert by_set == {
        "s1": ["Start", "Ready", "Second attempt", 'Read({"p": "b"})', "b text"],
        "s1#1": ["Summary: the user asked for a plan.", "After compaction"],
    }
    assert res.skipped[SKIP] == 3
    calls = [r for r in t if r["tool_role"] in ("call", "result")]
    assert [(r["tool_role"], r["tool_call_id"], r["tool_group"]) for r in calls] == [
        ("call", "t2", "s1:t2"),
        ("result", "t2", "s1:t2"),
    ]
    assert dict(calls[1]["metadata"])["is_error"] == "true"
    monkeypatch.setattr(claude_code, "TWO_PASS_BYTES", 0)
    assert import_transcripts("claude-code", p).table.equals(res.table)


def test_sidechains_and_separate_trees_are_not_rewinds(tmp_path):
    """A sub-agent run hangs off the main chain but is its own set; a record whose parent is
    not in the log starts a tree of its own: neither is a fork of the live chain."""
    recs = [
        _rec("u1", None, "user", 0, "Start"),
        _rec("a1", "u1", "assistant", 1, [{"type": "text", "text": "Delegating"}]),
        _rec("x1", "a1", "user", 2, "sub-agent prompt", isSidechain=True, agentId="ag1"),
        _rec(
            "x2", "x1", "assistant", 3, [{"type": "text", "text": "sub-agent answer"}], isSidechain=True, agentId="ag1"
        ),
        _rec("u2", "a1", "user", 5, "Main again"),
        _rec("v1", "gone", "user", 9, "after a missing record"),
    ]
    res = import_transcripts("claude-code", _write(tmp_path / "s.jsonl", recs))
    assert SKIP not in res.skipped
    got = sorted((r["conversation_id"], r["content"]) for r in res.table.to_pylist())
    assert (
        ("s1@ag1", "sub-agent answer") in got
        and ("s1", "Main again") in got
        and ("s1", "after a missing record") in got
    )
    assert len(got) == 6


def test_cli_keep_rewound(tmp_path, capsys):
    out = tmp_path / "o.parquet"
    assert main(["import", "claude-code", str(REWIND), "--out", str(out)]) == 0
    assert f"4 {SKIP}" in capsys.readouterr().out
    assert main(["import", "claude-code", str(REWIND), "--out", str(out), "--keep-rewound", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["items"] == 10


def test_progress_records_in_the_chain_link_their_neighbours(tmp_path):
    """Claude Code 2.1 writes hook ``progress`` records into the chain (a tool result's
    parentUuid can be one). Such a record is not context, but its neighbours hang off each other
    through it: a rewind past it leaves the branch behind it out, as any rewind."""
    recs = [
        {"type": "progress", "uuid": "p0", "parentUuid": None, "sessionId": "s1", "data": {"type": "hook_progress"}},
        _rec("u1", "p0", "user", 0, "Run the tests"),
        _rec("a1", "u1", "assistant", 1, [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"c": "pytest"}}]),
        {"type": "progress", "uuid": "p1", "parentUuid": "a1", "sessionId": "s1", "data": {"type": "hook_progress"}},
        _rec("r1", "p1", "user", 2, [{"type": "tool_result", "tool_use_id": "t1", "content": "3 failed"}]),
        _rec("a2", "r1", "assistant", 3, [{"type": "text", "text": "Three tests fail."}]),
        _rec("u2", "a1", "user", 10, "Never mind, run only the unit tests"),  # rewound to a1
        _rec("a3", "u2", "assistant", 11, [{"type": "text", "text": "Running the unit tests."}]),
    ]
    res = import_transcripts("claude-code", _write(tmp_path / "s1.jsonl", recs))
    t = res.table.to_pylist()
    assert [r["content"] for r in t] == [
        "Run the tests",
        'Bash({"c": "pytest"})',
        "Never mind, run only the unit tests",
        "Running the unit tests.",
    ]
    assert {r["conversation_id"] for r in t} == {"s1"}
    assert res.skipped[SKIP] == 2 and res.skipped["claude-code record 'progress'"] == 2
    kept = import_transcripts("claude-code", tmp_path / "s1.jsonl", keep_rewound=True).table.to_pylist()
    # in chain order: the result follows its call (through the progress record)
    assert [r["content"] for r in kept][:4] == [
        "Run the tests",
        'Bash({"c": "pytest"})',
        "3 failed",
        "Three tests fail.",
    ]
