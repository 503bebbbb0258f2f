"""Import throughput on Claude-Code-shaped JSONL, generated here (no real logs needed):

    .venv/bin/python -m pytest benchmarks/test_import.py -s

``CUPEL_BENCH_IMPORT_MB`` (default 24) sets the size. The sessions look like real ones: a user
prompt, then turns of assistant text + 1-3 tool calls (each block its own record, with the
message's ``usage`` repeated), tool results of a few hundred bytes to ~20 KB (file reads, test
output), ``thinking`` blocks, ``file-history-snapshot`` records, a compaction in some sessions,
and one resumed session that copies its history into a second file (so uuid dedup runs).

Reported (medians of the rounds, one process, one core): MB/s of the import, MB/s of a bare
``json.loads`` of every line of the same files (the floor any Python reader pays), their
ratio, and the import's peak traced memory against the input size and the largest session.
"""

import json
import os
import random
import statistics
import time
import tracemalloc

import pytest

from cupel_np.io.importers import import_transcripts

MB = float(os.environ.get("CUPEL_BENCH_IMPORT_MB", 24))
WORDS = "the a cache price src/app.py def return None assert timeout retry ok FAIL 42 line import self value".split()


def _text(rng, n_bytes):
    out, size = [], 0
    while size < n_bytes:
        line = " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 14)))
        out.append(line)
        size += len(line) + 1
    return "\n".join(out)


def _session(rng, sid, n_turns):
    recs, parent, k = [], None, 0
    base = {"isSidechain": False, "userType": "external", "cwd": "/home/dev/p", "sessionId": sid, "version": "2.0.61"}

    def add(rtype, content, **extra):
        nonlocal parent, k
        uid = f"{sid}-{k:05d}"
        r = {
            **base,
            "parentUuid": parent,
            "type": rtype,
            "uuid": uid,
            "timestamp": f"2026-11-20T11:{k // 60 % 60:02d}:{k % 60:02d}.000Z",
        }
        r["message"] = {"role": rtype, "content": content, **extra}
        recs.append(r)
        parent, k = uid, k + 1
        return r

    add("user", _text(rng, 300))
    for t in range(n_turns):
        mid = f"msg_{sid}_{t}"
        usage = {
            "input_tokens": 10,
            "cache_creation_input_tokens": 500,
            "cache_read_input_tokens": 1000 * t,
            "output_tokens": 90,
        }
        add(
            "assistant",
            [{"type": "thinking", "thinking": _text(rng, 400), "signature": "c2ln" * 20}],
            id=mid,
            usage=usage,
        )
        add("assistant", [{"type": "text", "text": _text(rng, 250)}], id=mid, usage=usage)
        for c in range(rng.randint(1, 3)):
            tid = f"toolu_{sid}_{t}_{c}"
            add(
                "assistant",
                [{"type": "tool_use", "id": tid, "name": "Read", "input": {"file_path": "/home/dev/p/src/app.py"}}],
                id=mid,
                usage=usage,
            )
            size = int(rng.choice([300, 1500, 6000, 20000]))
            r = add("user", [{"type": "tool_result", "tool_use_id": tid, "content": _text(rng, size)}])
            r["toolUseResult"] = {"stdout": "", "stderr": "", "interrupted": False}
        if rng.random() < 0.1:
            recs.append({"type": "file-history-snapshot", "messageId": mid, "snapshot": {"trackedFileBackups": {}}})
        if t == n_turns // 2 and rng.random() < 0.3:
            last = parent
            b = add("system", None)
            del b["message"]
            b.update(
                subtype="compact_boundary", parentUuid=None, logicalParentUuid=last, content="Conversation compacted"
            )
            add("user", "This session is being continued from a previous conversation. " + _text(rng, 2000))
            recs[-1]["isCompactSummary"] = True
    return recs


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    rng = random.Random(40)
    d = tmp_path_factory.mktemp("claude")
    total, i, largest = 0, 0, 0
    while total < MB * 1e6:
        recs = _session(rng, f"s{i:04d}", rng.randint(20, 80))
        lines = "".join(json.dumps(r) + "\n" for r in recs)
        (d / f"s{i:04d}.jsonl").write_text(lines)
        if i == 1:  # a resumed session: a second file copies the first's history, then goes on
            more = _session(rng, "s0001b", 5)
            more[0]["parentUuid"] = recs[-1]["uuid"]
            extra = lines + "".join(json.dumps(r) + "\n" for r in more)
            (d / "s0001-resumed.jsonl").write_text(extra)
            total += len(extra)
        largest = max(largest, len(lines))
        total += len(lines)
        i += 1
    return d, total, largest


def _median_seconds(fn, rounds=3):
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def test_import_throughput(corpus):
    d, total, largest = corpus
    files = sorted(d.glob("*.jsonl"))
    import_transcripts("claude-code", files[:1])  # warm: compile or load the estimate kernel

    def bare():
        for f in files:
            with f.open("rb") as fh:
                for line in fh:
                    json.loads(line)

    res_holder = {}

    def run():
        res_holder["res"] = import_transcripts("claude-code", d)

    t_json, t_imp, ratios = [], [], []
    for _ in range(3):  # interleaved, so a change in the machine's load hits both alike
        t_json.append(_median_seconds(bare, 1))
        t_imp.append(_median_seconds(run, 1))
        ratios.append(t_json[-1] / t_imp[-1])
    t_json, t_imp = statistics.median(t_json), statistics.median(t_imp)
    tracemalloc.start()
    run()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    res = res_holder["res"]
    mbs, mbs_json = total / t_imp / 1e6, total / t_json / 1e6
    print(
        f"\nimport: {total / 1e6:.1f} MB, {len(files)} files, {res.items:,} items in {res.conversations} sets: "
        f"median {t_imp:.2f} s = {mbs:.1f} MB/s; bare json.loads {mbs_json:.1f} MB/s "
        f"(import at {statistics.median(ratios):.0%} of it, median of interleaved rounds); peak traced memory {peak / 1e6:.0f} MB "
        f"= {peak / total:.2f}x the input, {peak / largest:.1f}x the largest session ({largest / 1e6:.1f} MB)"
    )
    assert res.items > 0 and res.skipped["claude-code duplicate record (same uuid, first copy kept)"] > 0
    target = float(os.environ.get("CUPEL_BENCH_IMPORT_MIN_MBS", 0))
    assert mbs >= target, f"{mbs:.1f} MB/s < {target} MB/s"
