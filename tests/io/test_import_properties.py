"""Property: how the records are spread over files does not change the items. A Claude Code
session split over any number of overlapping files (in any file order), or a file given twice,
imports as the same items as the one whole file."""

import json
import sys
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import strategies as S  # noqa: E402

from cupel_np.io.importers import claude_code, import_transcripts  # noqa: E402

PROPS = settings(
    max_examples=S.examples(40, 400),
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

_STEP = st.sampled_from(["user", "assistant", "tools", "shell", "compact", "side", "rewind"])


def _session(steps, texts):
    recs, parent, n = [], None, 0

    def add(kind, content, **extra):
        nonlocal parent, n
        uid = f"u{n}"
        r = {
            "type": kind,
            "uuid": uid,
            "parentUuid": parent,
            "sessionId": "s",
            "timestamp": f"2026-01-01T00:{n // 60:02d}:{n % 60:02d}Z",
            "message": {"role": kind, "content": content},
        }
        r.update(extra)
        recs.append(r)
        parent, n = uid, n + 1
        return r

    for i, (step, text) in enumerate(zip(steps, texts)):
        if step == "user":
            add("user", text)
        elif step == "assistant":
            add("assistant", [{"type": "text", "text": text}])
            recs[-1]["message"].update(id=f"m{i}", usage={"input_tokens": 10 * (i + 1)})
        elif step == "tools":
            add("assistant", [{"type": "tool_use", "id": f"t{i}", "name": "Bash", "input": {"c": text}}])
            add("user", [{"type": "tool_result", "tool_use_id": f"t{i}", "content": text, "is_error": i % 2 == 0}])
        elif step == "shell":
            add("user", f"<bash-stdout>\x1b[1m{text}\x1b[0m</bash-stdout><bash-stderr></bash-stderr>")
        elif step == "compact":
            b = add("system", None, subtype="compact_boundary", logicalParentUuid=parent)
            b["parentUuid"] = None
            del b["message"]
            add("user", f"Summary: {text}", isCompactSummary=True)
        elif step == "rewind":  # the next record forks from an earlier one (a rewind / edited prompt)
            if n:
                parent = f"u{max(0, n - 3)}"
            add("user", f"retry: {text}")
        else:
            keep = parent
            r = add("user", text, isSidechain=True, agentId="a1")
            r["parentUuid"] = None
            parent = keep
    return recs


@st.composite
def sessions_and_splits(draw):
    n = draw(st.integers(1, 14))
    steps = draw(st.lists(_STEP, min_size=n, max_size=n))
    texts = draw(
        st.lists(st.text("abc xyz_/.0123\n", min_size=1, max_size=12).filter(str.strip), min_size=n, max_size=n)
    )
    recs = _session(steps, texts)
    k = draw(st.integers(1, 4))
    cuts = sorted(draw(st.lists(st.integers(0, len(recs)), min_size=k - 1, max_size=k - 1)))
    bounds = [0, *cuts, len(recs)]
    spans = []
    for a, b in zip(bounds, bounds[1:]):
        lo = max(0, a - draw(st.integers(0, 3)))
        hi = min(len(recs), b + draw(st.integers(0, 3)))
        spans.append((lo, hi))
    order = draw(st.permutations(range(len(spans))))
    return recs, spans, order


def _write(path: Path, recs):
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


def _items(res):
    return res.table.drop(["metadata"])


@PROPS
@given(sessions_and_splits())
def test_split_over_files_gives_the_same_items(case):
    recs, spans, order = case
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        whole = import_transcripts("claude-code", _write(d / "whole.jsonl", recs), allow_empty=True)
        parts = d / "parts"
        parts.mkdir()
        for name, i in enumerate(order):
            a, b = spans[i]
            _write(parts / f"{name:02d}.jsonl", recs[a:b])
        split = import_transcripts("claude-code", parts, allow_empty=True)
        assert _items(split).equals(_items(whole))
        twice = import_transcripts("claude-code", [d / "whole.jsonl", d / "whole.jsonl"], allow_empty=True)
        assert twice.table.equals(whole.table)
        assert split.tokens == whole.tokens
        saved, claude_code.TWO_PASS_BYTES = claude_code.TWO_PASS_BYTES, 0  # read again per conversation
        try:
            two = import_transcripts("claude-code", parts, allow_empty=True)
        finally:
            claude_code.TWO_PASS_BYTES = saved
        assert two.table.equals(split.table)
        assert (two.skipped, two.tokens, two.lines) == (split.skipped, split.tokens, split.lines)


def test_the_same_file_twice_is_read_once(tmp_path):
    p = tmp_path / "c.jsonl"
    p.write_text(json.dumps({"id": "c", "messages": [{"role": "user", "content": "hi"}]}) + "\n")
    once = import_transcripts("openai", p)
    twice = import_transcripts("openai", [p, tmp_path / "." / "c.jsonl", tmp_path])
    assert twice.table.equals(once.table) and twice.lines == once.lines
