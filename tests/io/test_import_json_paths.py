"""The optional orjson fast path for JSON lines gives the same items, skips and errors as the
standard library alone, including on the lines the two parsers read differently."""

import json

import pytest

from cupel_np.io.importers import core, import_transcripts


def _edge_lines() -> bytes:
    def conv(i, extra_msg=None, **extra):
        msgs = [{"role": "user", "content": f"question {i}"}, {"role": "assistant", "content": f"answer {i}"}]
        if extra_msg:
            msgs.append(extra_msg)
        return json.dumps({"id": f"c{i}", "messages": msgs, **extra}).encode()

    call = {"role": "assistant", "content": None, "tool_calls": []}
    big = dict(
        call, tool_calls=[{"id": "t1", "type": "function", "function": {"name": "f", "arguments": {"n": 10**25}}}]
    )
    neg = dict(
        call, tool_calls=[{"id": "t2", "type": "function", "function": {"name": "f", "arguments": {"n": -(2**63) - 1}}}]
    )
    nested = dict(call, tool_calls=[{"id": "t3", "type": "function", "function": {"name": "f", "arguments": {}}}])
    lines = [
        b"\xef\xbb\xbf" + conv(0),
        conv(1, usage={"prompt_tokens": 12}),
        conv(2).replace(b'"c2"', b'"c2", "note": "\\ud800"'),  # a lone surrogate escape (a field not imported)
        conv(3).replace(b'"c3"', b'"c3", "score": NaN'),
        conv(4, big),
        conv(5, neg),
        conv(6).replace(b'"id": "c6"', b'"id": "x", "id": "c6"'),  # a duplicate key: the last wins
        conv(7, nested).replace(b'"arguments": {}', b'"arguments": ' + b"[" * 600 + b"1" + b"]" * 600),
        b"[" * 1010 + b"]" * 1010,  # nested past what the standard library reads
        b"  ",
        b'{"id": "c9", "messages": [{"role": "user", "content": "caf\xe9"}]}',  # not UTF-8
        b'{"id": "c10", "messages": [',  # cut short
        conv(11, usage={"prompt_tokens": 2**64 + 5}),
    ]
    return b"\n".join(lines) + b"\n"


def _run(path):
    res = import_transcripts("openai", path, skip_bad=True)
    return res.table, [str(b) for b in res.bad], res.skipped, res.tokens


def test_orjson_and_the_standard_library_import_the_same(tmp_path, monkeypatch):
    orjson = pytest.importorskip("orjson")
    p = tmp_path / "edge.jsonl"
    p.write_bytes(_edge_lines())
    calls = []

    def counting_loads(raw):
        calls.append(raw)
        return orjson.loads(raw)

    monkeypatch.setattr(
        core,
        "_orjson",
        type("M", (), {"loads": staticmethod(counting_loads), "JSONDecodeError": orjson.JSONDecodeError}),
    )
    fast = _run(p)
    assert calls, "the fast path was not taken"
    assert not any(b"10000000000000000000000000" in c or b"[[[[[[" in c for c in calls)  # routed to json
    monkeypatch.setattr(core, "_orjson", None)
    slow = _run(p)
    assert fast[0].equals(slow[0])
    assert fast[1:] == slow[1:]
    t = fast[0].to_pylist()
    calls_text = [r["content"] for r in t if r["tool_role"] == "call"]
    assert 'f({"n": 10000000000000000000000000})' in calls_text  # an integer, not a float
    assert f'f({{"n": {-(2**63) - 1}}})' in calls_text
    assert {r["conversation_id"] for r in t} >= {"c0", "c1", "c2", "c3", "c6", "c7", "c11"}
    assert len(fast[1]) == 3  # the 1010-deep line, the bad UTF-8 and the cut line, named alike
    assert any("nested too deeply" in b for b in fast[1]) and any("edge.jsonl:12" in b for b in fast[1])
