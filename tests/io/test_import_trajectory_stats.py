"""SWE-agent trajectories carry the API's own total: ``info.model_stats.tokens_sent`` over
``api_calls`` requests. The import compares the estimate summed over the same requests (the
context before each assistant message) with it, and ``calibrate`` scales to it. Found on
SWE-agent's public trajectories, where the estimate ran 1.14-1.16x the GPT-4 counts."""

import json

from cupel_np.io.importers import estimate_tokens, import_transcripts


def _traj(tmp_path, calls, sent=900):
    history = [
        {"role": "system", "content": "You are an autonomous programmer.", "agent": "primary"},
        {"role": "user", "content": "Fix the failing test in tests/test_price.py", "agent": "primary"},
        {"role": "assistant", "content": "Let me look.\n```\nopen tests/test_price.py\n```", "agent": "primary"},
        {
            "role": "user",
            "content": "[File: tests/test_price.py (12 lines total)]\n1:def test_price():",
            "agent": "primary",
        },
        {"role": "assistant", "content": "```\nsubmit\n```", "agent": "primary"},
    ]
    info = {"model_stats": {"tokens_sent": sent, "tokens_received": 40, "api_calls": calls, "instance_cost": 0.01}}
    p = tmp_path / "demo__repo-1.traj"
    p.write_text(json.dumps({"environment": "swe_main", "trajectory": [], "history": history, "info": info}))
    return p, history


def test_tokens_sent_against_the_estimate(tmp_path):
    p, history = _traj(tmp_path, calls=2)
    res = import_transcripts("swe-agent", p)
    t = res.table.to_pylist()
    assert [r["kind"] for r in t] == ["SystemPrompt", "Message", "Message", "ToolOutput", "Message"]
    cum = [sum(r["tokens"] for r in t[:k]) for k in range(len(t) + 1)]
    est = cum[2] + cum[4]  # before the first assistant message, before the second
    assert all(r["tokens"] == estimate_tokens(r["content"]) for r in t)
    (chk,) = res.tokens
    assert chk == {
        "set": "demo__repo-1",
        "requests": 2,
        "estimate": float(est),
        "api": 900.0,
        "slope": 900 / est,
        "prefix": None,
        "ratio": est / 900,
        "summed": True,
    }
    assert res.token_ratio() == est / 900
    assert "summed over them, API 900 tokens" in "\n".join(res.summary_lines("out.parquet"))
    cal = import_transcripts("swe-agent", p, calibrate=True).table.to_pylist()
    assert [r["tokens"] for r in cal] == [max(1, int(r["tokens"] * 900 / est + 0.5)) for r in t]


def test_a_retried_call_leaves_the_total_unplaced(tmp_path):
    p, _ = _traj(tmp_path, calls=3)  # three calls, two assistant messages: a retry
    assert import_transcripts("swe-agent", p).tokens == []
