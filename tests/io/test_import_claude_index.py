"""The Claude Code record index in compact arrays (``claude_index``): canonical UUIDs as 128-bit
keys, other ids in a side table, the order among records of one time as the id strings sort,
and every fixture giving the same items whether read in one pass or two."""

import json
from pathlib import Path

import numpy as np
import pytest

from cupel_np.io.importers import claude_code, claude_index, import_transcripts

DATA = Path(__file__).resolve().parents[2] / "data" / "transcripts"
FIXTURES = ["claude_code", "claude_code_resumed", "claude_code_rewind", "stream_json.jsonl"]


def _same(one, two):
    assert two.table.equals(one.table) and two.table.schema.equals(one.table.schema)
    assert (two.skipped, two.tokens, two.lines, two.conversations) == (
        one.skipped,
        one.tokens,
        one.lines,
        one.conversations,
    )


@pytest.mark.parametrize("keep_rewound", [False, True])
@pytest.mark.parametrize("name", FIXTURES)
def test_every_fixture_alike_in_one_pass_and_two(monkeypatch, name, keep_rewound):
    monkeypatch.setattr(claude_code, "TWO_PASS_BYTES", 1 << 40)
    one = import_transcripts("auto", DATA / name, keep_rewound=keep_rewound)
    monkeypatch.setattr(claude_code, "TWO_PASS_BYTES", 0)
    two = import_transcripts("auto", DATA / name, keep_rewound=keep_rewound)
    assert one.items > 0
    _same(one, two)


def test_keys_sharing_a_high_half_across_merges(monkeypatch):
    monkeypatch.setattr(claude_index, "_PENDING", 3)
    keys = claude_index.Keys()
    ids = [f"0000000{i % 2}-0000-4000-8000-{j:012x}" for i in range(2) for j in range(9)]
    for row, uid in enumerate(ids):
        k = claude_index.key_of(uid)
        assert isinstance(k, int) and claude_index.uuid_of(k) == uid
        assert keys.get(k) == -1
        keys.add(k, row)
    keys.add("Not-A-UUID", len(ids))
    assert [keys.get(claude_index.key_of(u)) for u in ids] == list(range(len(ids)))
    assert keys.get("Not-A-UUID") == len(ids) and keys.get(claude_index.key_of("x")) == -1
    keys.merge()
    keys.bits = bytearray(b"\xff" * len(keys.bits))  # every absent key passes the filter: searched
    absent = [claude_index.key_of(f"0000000{i}-0000-4000-8000-{j:012x}") for i in (0, 1, 2) for j in (9, 99)]
    assert [keys.get(k) for k in absent] == [-1] * 6
    assert [keys.get(claude_index.key_of(u)) for u in ids] == list(range(len(ids)))
    ks = [claude_index.key_of(u) for u in ids] + [(1 << 64) | 5, 7]
    hi = np.array([k >> 64 for k in ks], np.uint64)
    lo = np.array([k & ((1 << 64) - 1) for k in ks], np.uint64)
    assert keys.find(hi, lo).tolist() == list(range(len(ids))) + [-1, -1]
    assert claude_index.key_of("ABCDEF01-0000-4000-8000-000000000000") == "ABCDEF01-0000-4000-8000-000000000000"


def _rec(uid, parent, rtype, content, minute=0, **extra):
    r = {"type": rtype, "uuid": uid, "parentUuid": parent, "sessionId": "s1"}
    r["timestamp"] = f"2026-01-01T00:{minute:02d}:00Z"
    r["message"] = {"role": rtype, "content": content}
    return json.dumps({**r, **extra})


@pytest.mark.parametrize("two_pass", [False, True])
@pytest.mark.parametrize("other", ["00000000-0000-4000-8000-0000000000bb", "ffffffff-0000-4000-8000-0000000000bb"])
def test_records_of_one_time_order_by_their_id_strings(tmp_path, monkeypatch, two_pass, other):
    """Two branches from one prompt, their answers at the same time: the newest leaf is the
    larger id string, whether the ids are canonical UUIDs or not ('Z' sorts between '0' and
    'f'); an uppercase UUID is not canonical and sorts as its string."""
    root = "Root-Not-Canonical"
    lines = [
        _rec(root, None, "user", "question"),
        _rec("Zodd", root, "assistant", "answer Z", 1),
        _rec(other, root, "assistant", "answer other", 1),
        _rec("progress-1", other, "progress", None, 1),
    ]
    (tmp_path / "s.jsonl").write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(claude_code, "TWO_PASS_BYTES", 0 if two_pass else 1 << 40)
    t = import_transcripts("claude-code", tmp_path).table.to_pylist()
    live = "answer other" if other.startswith("f") else "answer Z"
    assert [r["content"] for r in t] == ["question", live]


@pytest.mark.parametrize("two_pass", [False, True])
def test_a_cycle_and_a_chain_through_progress_records(tmp_path, monkeypatch, two_pass):
    """Parents through non-message records (two hops) link the chain; a parent cycle ends at
    the record closing it; every record is imported once."""
    u = [f"{i:08x}-0000-4000-8000-000000000000" for i in range(8)]
    lines = [
        _rec(u[0], None, "user", "first"),
        json.dumps({"type": "progress", "uuid": u[1], "parentUuid": u[0], "sessionId": "s1"}),
        json.dumps({"type": "attachment", "uuid": u[2], "parentUuid": u[1], "sessionId": "s1"}),
        _rec(u[3], u[2], "assistant", "second", 1),
        _rec(u[4], u[5], "user", "cycle a", 2),
        _rec(u[5], u[4], "assistant", "cycle b", 3),
    ]
    (tmp_path / "s.jsonl").write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(claude_code, "TWO_PASS_BYTES", 0 if two_pass else 1 << 40)
    res = import_transcripts("claude-code", tmp_path)
    t = res.table.to_pylist()
    assert sorted(r["content"] for r in t) == ["cycle a", "cycle b", "first", "second"]
    by = {r["content"]: r["conversation_id"] for r in t}
    assert by["first"] == by["second"]
    assert [r["content"] for r in t] == ["first", "second", "cycle b", "cycle a"]


@pytest.mark.parametrize("two_pass", [False, True])
def test_tiny_batches_and_merges_give_the_same_items(monkeypatch, two_pass):
    """Rows moved into the columns and keys merged after every record: duplicates and their
    content checks then look rows up in the columns and the sorted keys, not the buffers."""
    monkeypatch.setattr(claude_code, "TWO_PASS_BYTES", 0 if two_pass else 1 << 40)
    path = DATA / "claude_code_resumed"
    one = import_transcripts("claude-code", path)
    monkeypatch.setattr(claude_index, "_BATCH", 1)
    monkeypatch.setattr(claude_index, "_PENDING", 1)
    two = import_transcripts("claude-code", path)
    assert any("duplicate" in k for k in one.skipped)
    _same(one, two)
