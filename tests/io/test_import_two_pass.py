"""The Claude Code reader's two-pass mode (inputs over ``TWO_PASS_BYTES``: a record index
first, then each conversation's records read again as it is built) gives the same result
as holding every part in memory."""

import json

import pytest

from cupel_np.io.importers import claude_code, import_transcripts


def _both(monkeypatch, fmt, paths, **kw):
    one = import_transcripts(fmt, paths, **kw)
    monkeypatch.setattr(claude_code, "TWO_PASS_BYTES", 0)
    two = import_transcripts(fmt, paths, **kw)
    monkeypatch.setattr(claude_code, "TWO_PASS_BYTES", 1 << 40)
    return one, two


def _same(one, two):
    assert two.table.equals(one.table)
    assert two.table.schema.equals(one.table.schema)
    assert (two.skipped, two.tokens, two.lines, [str(b) for b in two.bad]) == (
        one.skipped,
        one.tokens,
        one.lines,
        [str(b) for b in one.bad],
    )


@pytest.mark.parametrize(
    "fmt,path",
    [
        ("claude-code", "data/transcripts/claude_code"),
        ("claude-code", "data/transcripts/claude_code_resumed"),
        ("auto", "data/transcripts/stream_json.jsonl"),
    ],
)
def test_samples_import_alike_in_two_passes(monkeypatch, fmt, path):
    one, two = _both(monkeypatch, fmt, path)
    assert one.items > 0
    _same(one, two)


def test_two_passes_with_a_bom_bad_lines_and_conflicting_copies(tmp_path, monkeypatch):
    def rec(uid, parent, rtype, content, **extra):
        r = {"type": rtype, "uuid": uid, "parentUuid": parent, "sessionId": "s1", "timestamp": "2026-01-01T00:00:00Z"}
        r["message"] = {"role": rtype, "content": content, **extra}
        return json.dumps(r)

    a = [
        rec("u1", None, "user", "first question"),
        "{not json",
        rec("u2", "u1", "assistant", [{"type": "text", "text": "an answer"}], id="m1", usage={"input_tokens": 50}),
        rec("u3", "u2", "user", [{"type": "tool_result", "tool_use_id": "t9", "content": "orphan output"}]),
    ]
    b = [
        rec("u2", "u1", "assistant", [{"type": "text", "text": "another answer"}], id="m1"),  # differs: counted
        rec("u4", "u3", "assistant", [{"type": "text", "text": "more"}], id="m2", usage={"input_tokens": 90}),
    ]
    (tmp_path / "a.jsonl").write_bytes(b"\xef\xbb\xbf" + "\n".join(a).encode() + b"\n")
    (tmp_path / "b.jsonl").write_text("\n".join(b) + "\n")
    one, two = _both(monkeypatch, "claude-code", tmp_path, skip_bad=True)
    assert one.items == 4 and len(one.bad) == 1
    assert one.skipped["claude-code duplicate record whose content differs (first copy kept)"] == 1
    _same(one, two)
