"""A JSON ``\\ud800`` escape (a lone surrogate: not valid Unicode) in a transcript's text used
to crash the import inside Arrow with a bare UnicodeEncodeError; it is kept with U+FFFD in its
place, and counted."""

import json

from cupel_np.io.importers import SURROGATES, estimate_tokens, import_transcripts


def test_lone_surrogates_are_replaced_and_counted(tmp_path):
    p = tmp_path / "s.jsonl"
    lines = [
        json.dumps(
            {
                "id": "c1",
                "messages": [{"role": "user", "content": "caf\ud800 ok"}, {"role": "assistant", "content": "fine"}],
            }
        ),
        json.dumps(
            {
                "id": "c2",
                "messages": [
                    {"role": "user", "content": "an emoji \U0001f600 stays"},
                    {"role": "tool", "tool_call_id": "x\udfff", "content": "out"},
                ],
            }
        ),
    ]
    p.write_text("\n".join(lines) + "\n")  # json.dumps writes the escapes: \\ud800
    assert "\\ud800" in p.read_text()
    res = import_transcripts("openai", p)
    t = res.table.to_pylist()
    assert t[0]["content"] == "caf\ufffd ok" and t[0]["tokens"] == estimate_tokens("caf\ud800 ok")
    assert t[2]["content"] == "an emoji \U0001f600 stays"
    assert t[3]["tool_call_id"] == "x\ufffd" and dict(t[3]["metadata"])["tool_call_id"] == "x\ufffd"
    assert t[3]["tool_group"] == "c2:x\ufffd"
    assert res.skipped == {SURROGATES: 4}  # strings: the content; the id in its column, its group and metadata
    assert res.lost == 0
