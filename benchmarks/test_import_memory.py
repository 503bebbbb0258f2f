"""Peak memory of ``cupel-np import`` against the size of its input (a child process each, its
peak RSS):

    .venv/bin/python -m pytest benchmarks/test_import_memory.py -s

For each of two formats, one large JSONL file of ``CUPEL_BENCH_IMPORT_MEM_MB`` MB (default
320) holding many conversations, each a copy (under its own ids) of one of a few generated ones,
and a file holding only the largest of them. ``cupel-np import`` runs on each in a fresh
interpreter; its peak RSS (``VmHWM`` of ``/proc/self/status``, else ``ru_maxrss``, which
also counts the parent's peak at the fork) is reported with the load average, and the growth
from the one-conversation file to the large one is asserted to be far below the file's size:

* Claude Code session logs (``claude_sessions.py``): 320 MB is over
  ``claude_code.STREAM_TWO_PASS_BYTES``, so the reader keeps a record index (fixed-width
  arrays, ``claude_index.py``: ~190 bytes a line at its peak between the passes, ~65 through
  the second) and reads each conversation's records again as it is written; the growth is that
  index plus a chunk: at most ``CUPEL_BENCH_IMPORT_MEM_SHARE`` (default 0.2) of the file and
  under 500 bytes a line (a record index of Python objects grew by ~740 bytes a line). The
  generated records carry canonical UUIDs, as Claude Code writes them. For comparison the whole-table import (``import_transcripts(...)
  .write_parquet``) runs on the same file (``CUPEL_BENCH_IMPORT_MEM_WHOLE=0`` skips it).
* OpenAI chat JSONL (one conversation a line): read one line at a time, so the growth is a
  chunk and the writer's buffers: at most a tenth of the file.
* ShareGPT as one ``.json`` document (a JSON array of conversations, indented): over
  ``jsonread.JSON_STREAM_BYTES`` it is read one element at a time: at most a tenth of the file.
* ``messages`` CSV whose conversations' rows are scattered through the file (2,000 open at a
  time): over ``messages.SPILL_BYTES`` the rows go to sorted runs in an unnamed temp file and
  are merged back by set: at most a fifth of the file.
* One SWE-agent trajectory (a file is one conversation): over ``jsonread.JSON_STREAM_BYTES``
  read member by member, the repeated ``trajectory`` dropped as read; what remains is the
  conversation itself (below 3.2 times the file).
* OpenTelemetry GenAI spans (OTLP JSON lines, each request repeating its thread's messages):
  over ``otel.TWO_PASS_BYTES`` the reader keeps each request's threading fields (8 bytes an
  input message) and reads the last request of each thread again: at most a fifth of the file
  (the whole-table import grows by more than the file).

``CUPEL_BENCH_IMPORT_MEM_BASE=/path/to/other/tree`` (e.g. ``git worktree add /tmp/base main``)
also runs that tree's import on the same files, right after this one's, and prints both.

The files live in pytest's temporary directory; the run takes a few minutes on a loaded
machine (generation ~5 s a file, each import of a large file ~10-30 s of CPU).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import claude_sessions as cs  # noqa: E402

MB = float(os.environ.get("CUPEL_BENCH_IMPORT_MEM_MB", 320))
SHARE = float(os.environ.get("CUPEL_BENCH_IMPORT_MEM_SHARE", 0.2))
WHOLE = os.environ.get("CUPEL_BENCH_IMPORT_MEM_WHOLE", "1") != "0"

_CHILD = """
import json, resource, sys, time
t = time.process_time()
mode, fmt, src, out = sys.argv[1:5]
more = sys.argv[5:]
if mode == "stream":
    from cupel_np.cli import main
    status = main(["import", fmt, src, "--out", out, "--json", *more])
    assert status == 0, status
else:
    from cupel_np.io.importers import import_transcripts
    import_transcripts(fmt, src).write_parquet(out)
try:  # this process's own peak: VmHWM is its memory map's, new at exec; ru_maxrss also counts
    # the parent's peak at the fork (Linux keeps the larger of the two)
    rss = next(int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith("VmHWM:"))
except (OSError, StopIteration):
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"rss": rss, "cpu": time.process_time() - t}), file=sys.stderr)
"""


def _copies(path: Path, bases: list[str], mb: float, rename) -> tuple[int, int]:
    """``path``: ``bases`` over and over, each copy renamed by ``rename(text, base, copy)``,
    up to ``mb`` MB; (bytes, conversations)."""
    total = n = copy = 0
    with path.open("w", encoding="utf-8") as f:
        while total < mb * 1e6:
            for i, text in enumerate(bases):
                one = rename(text, i, copy)
                f.write(one)
                total += len(one.encode())
                n += 1
            copy += 1
    return total, n


def claude_files(big: Path, small: Path, mb: float, seed: int = 11) -> tuple[int, int, int]:
    """Copies of 24 generated sessions (each copy its own session id, uuids and message ids) in
    ``big``, the largest session alone in ``small``: (bytes, sessions, largest's bytes)."""
    rng = random.Random(seed)
    bases = [cs.lines(cs.session(rng, f"Q{i:03d}Z", rng.randint(10, 40))) for i in range(24)]

    def rename(t: str, i: int, c: int) -> str:  # the session id, and the uuids made from it
        old, new = f"Q{i:03d}Z", f"C{c:05d}Q{i:03d}"
        return t.replace(old, new).replace(cs.uid_prefix(old), cs.uid_prefix(new))

    total, n = _copies(big, bases, mb, rename)
    largest = max(bases, key=len)
    small.write_text(largest, encoding="utf-8")
    return total, n, len(largest.encode())


def openai_files(big: Path, small: Path, mb: float, seed: int = 3) -> tuple[int, int, int]:
    """Copies of 40 generated chat conversations with tool calls, one a line."""
    rng = random.Random(seed)
    bases = []
    for _ in range(40):
        msgs = [{"role": "system", "content": cs.text(rng, 500)}]
        for t in range(rng.randint(5, 30)):
            call = {"id": f"c{t}", "type": "function", "function": {"name": "read", "arguments": '{"p": "x"}'}}
            msgs.append({"role": "user", "content": cs.text(rng, rng.choice([200, 2000, 8000]))})
            msgs.append({"role": "assistant", "content": cs.text(rng, 500), "tool_calls": [call]})
            msgs.append({"role": "tool", "tool_call_id": f"c{t}", "content": cs.text(rng, rng.choice([500, 5000]))})
        bases.append(json.dumps({"id": "@ID@", "messages": msgs}) + "\n")
    total, n = _copies(big, bases, mb, lambda t, i, c: t.replace("@ID@", f"c{c}-{i}", 1))
    largest = max(bases, key=len)
    small.write_text(largest.replace("@ID@", "one", 1), encoding="utf-8")
    return total, n, len(largest.encode())


def otel_files(big: Path, small: Path, mb: float, seed: int = 5) -> tuple[int, int, int]:
    """Copies of 12 generated threads of 6-12 growing GenAI requests (one export request a
    line per request), each copy its own conversation id."""
    rng = random.Random(seed)

    def kv(k, v):
        return {"key": k, "value": {"intValue": str(v)} if isinstance(v, int) else {"stringValue": v}}

    bases = []
    for _ in range(12):
        history, out = [{"role": "user", "parts": [{"type": "text", "content": cs.text(rng, 1500)}]}], []
        for step in range(rng.randint(6, 12)):
            answer = {"role": "assistant", "parts": [{"type": "text", "content": cs.text(rng, 800)}]}
            attrs = {
                "gen_ai.conversation.id": "@ID@",
                "gen_ai.input.messages": json.dumps(history),
                "gen_ai.output.messages": json.dumps([answer]),
                "gen_ai.usage.input_tokens": 100 * (step + 1),
            }
            span = {"traceId": "t", "spanId": f"s{step}", "startTimeUnixNano": str(1_700_000_000 + step) + "0" * 9}
            span["attributes"] = [kv(k, v) for k, v in attrs.items()]
            out.append(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}) + "\n")
            history = [*history, answer, {"role": "user", "parts": [{"type": "text", "content": cs.text(rng, 1500)}]}]
        bases.append("".join(out))
    total, n = _copies(big, bases, mb, lambda t, i, c: t.replace("@ID@", f"c{c}-{i}"))
    largest = max(bases, key=len)
    small.write_text(largest.replace("@ID@", "one"), encoding="utf-8")
    return total, n, len(largest.encode())


def sharegpt_files(big: Path, small: Path, mb: float, seed: int = 9) -> tuple[int, int, int]:
    """One ShareGPT ``.json`` document (a JSON array, as ShareGPT files are published) of copies
    of 40 generated conversations with function calls; the largest alone in a one-element array."""
    rng = random.Random(seed)
    bases = []
    for _ in range(40):
        turns = [{"from": "system", "value": cs.text(rng, 500)}]
        for _t in range(rng.randint(5, 30)):
            turns.append({"from": "human", "value": cs.text(rng, rng.choice([200, 2000, 8000]))})
            turns.append({"from": "function_call", "value": json.dumps({"name": "read", "arguments": {"p": "x"}})})
            turns.append({"from": "observation", "value": cs.text(rng, rng.choice([500, 5000]))})
            turns.append({"from": "gpt", "value": cs.text(rng, 500)})
        bases.append(json.dumps({"id": "@ID@", "conversations": turns}, indent=1))
    total = n = copy = 0
    with big.open("w", encoding="utf-8") as f:
        f.write("[\n")
        while total < mb * 1e6:
            for i, text in enumerate(bases):
                one = ("" if n == 0 else ",\n") + text.replace("@ID@", f"c{copy}-{i}", 1)
                f.write(one)
                total += len(one.encode())
                n += 1
            copy += 1
        f.write("\n]\n")
    largest = max(bases, key=len)
    small.write_text("[\n" + largest.replace("@ID@", "one", 1) + "\n]\n", encoding="utf-8")
    return total, n, len(largest.encode())


MESSAGES_MAP = ["--map", "content=text,kind=role,set=conv"]


def messages_files(big: Path, small: Path, mb: float, seed: int = 13, contiguous: bool = False) -> tuple[int, int, int]:
    """A messages CSV whose sets' rows are scattered: 2,000 conversations open at a time, each
    row going to one of them at random (a set's rows span much of the file), with a label and a
    score column; the rows of one conversation of the same length alone in ``small``. With
    ``contiguous``, one conversation open at a time (each set's 40 rows together)."""
    rng = random.Random(seed)
    texts = [cs.text(rng, k) for k in (100, 400, 1500, 4000) for _ in range(8)]
    header = "conv,role,text,label,score\n"

    def row(conv: str, k: int) -> str:
        text = texts[rng.randrange(len(texts))].replace('"', "'")
        return f'{conv},{"user" if k % 2 == 0 else "assistant"},"{text}",{rng.choice("abc")},{rng.random():.6f}\n'

    total, n, opened, counts = len(header), 0, [], {}
    with big.open("w", encoding="utf-8") as f:
        f.write(header)
        while total < mb * 1e6:
            if len(opened) < (1 if contiguous else 2000):
                opened.append(f"c{n}")
                n += 1
            j = rng.randrange(len(opened))
            conv = opened[j]
            k = counts.get(conv, 0)
            one = row(conv, k)
            f.write(one)
            total += len(one.encode())
            counts[conv] = k + 1
            if k + 1 >= 40:  # a conversation of 40 rows is done: another opens in its place
                opened[j] = f"c{n}"
                n += 1
    one_conv = header + "".join(row("one", k) for k in range(40))
    small.write_text(one_conv, encoding="utf-8")
    return total, n, len(one_conv.encode())


#: a second source tree (e.g. ``git worktree add /tmp/base main``) whose import runs beside this
#: one's on the same files, interleaved (its peak RSS and CPU are printed next to these)
BASE = os.environ.get("CUPEL_BENCH_IMPORT_MEM_BASE")


def _run(mode: str, fmt: str, src: Path, out: Path, more: list[str] = (), tree: str | None = None) -> dict:  # type: ignore[assignment]
    env = {**os.environ, "NUMBA_NUM_THREADS": "1"}
    if tree:
        env["PYTHONPATH"] = tree
    t = time.perf_counter()
    cmd = [sys.executable, "-c", _CHILD, mode, fmt, str(src), str(out), *more]
    # in the files' directory: with `-c` the current directory comes first on sys.path (before PYTHONPATH)
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=src.parent)
    assert p.returncode == 0, p.stderr[-2000:]
    got = json.loads(p.stderr.strip().splitlines()[-1])
    if mode == "stream":
        got["summary"] = json.loads(p.stdout)
    got["wall"] = time.perf_counter() - t
    return got


def _measure(
    tmp_path: Path,
    fmt: str,
    make,
    whole: bool,
    suffix: str = ".jsonl",
    more: list[str] = (),  # type: ignore[assignment]
) -> tuple[int, int, dict, dict | None]:
    big, small = tmp_path / f"many{suffix}", tmp_path / f"one{suffix}"
    t = time.perf_counter()
    total, n, largest = make(big, small, MB)
    gen = time.perf_counter() - t
    _run("stream", fmt, small, tmp_path / "warm.parquet", more)  # compile or load the estimate kernel once
    base = _run("stream", fmt, small, tmp_path / "one.parquet", more)
    streamed = _run("stream", fmt, big, tmp_path / "many.parquet", more)
    if BASE:  # the other tree on the same files, right after
        other = _run("stream", fmt, big, tmp_path / "base.parquet", more, tree=BASE)
        other_one = _run("stream", fmt, small, tmp_path / "base-one.parquet", more, tree=BASE)
        print(
            f"\n{fmt}: {BASE}: one conversation peak RSS {other_one['rss'] / 1e6:.0f} MB; the file "
            f"{other['rss'] / 1e6:.0f} MB (+{(other['rss'] - other_one['rss']) / 1e6:.0f} MB), CPU {other['cpu']:.1f} s"
            f"\n{fmt}: this tree: one conversation peak RSS {base['rss'] / 1e6:.0f} MB; the file "
            f"{streamed['rss'] / 1e6:.0f} MB (+{(streamed['rss'] - base['rss']) / 1e6:.0f} MB), CPU {streamed['cpu']:.1f} s"
        )
        assert other["summary"]["items"] == streamed["summary"]["items"]
    full = _run("whole", fmt, big, tmp_path / "whole.parquet") if whole else None
    load = os.getloadavg()
    growth = streamed["rss"] - base["rss"]
    lines = streamed["summary"]["lines"]
    print(
        f"\n{fmt} import memory, load average {load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f} (generation {gen:.0f} s):"
        f"\n  one conversation ({largest / 1e6:.2f} MB): peak RSS {base['rss'] / 1e6:.0f} MB, CPU {base['cpu']:.1f} s"
        f"\n  {n:,} conversations in one file ({total / 1e6:.0f} MB, {lines:,} lines): streamed `cupel-np import` "
        f"peak RSS {streamed['rss'] / 1e6:.0f} MB (+{growth / 1e6:.0f} MB, {growth / total:.1%} of the file, "
        f"{growth / lines:.0f} B a line), CPU {streamed['cpu']:.1f} s, wall {streamed['wall']:.1f} s"
        + (
            f"\n  the whole-table import of the same file: peak RSS {full['rss'] / 1e6:.0f} MB "
            f"(+{(full['rss'] - base['rss']) / 1e6:.0f} MB), CPU {full['cpu']:.1f} s"
            if full
            else ""
        )
    )
    if full:
        assert streamed["rss"] < full["rss"]
    return total, lines, base, streamed


def test_claude_code_import_peak_grows_by_its_index_not_the_file(tmp_path):
    total, lines, base, streamed = _measure(tmp_path, "claude-code", claude_files, WHOLE)
    growth = streamed["rss"] - base["rss"]
    assert growth < SHARE * total, f"peak grew {growth / 1e6:.0f} MB on a {total / 1e6:.0f} MB file"
    assert growth < 500 * lines, f"peak grew {growth / lines:.0f} B a line"


def test_openai_jsonl_import_peak_does_not_grow_with_the_file(tmp_path):
    total, _, base, streamed = _measure(tmp_path, "openai", openai_files, False)
    growth = streamed["rss"] - base["rss"]
    assert growth < 0.1 * total, f"peak grew {growth / 1e6:.0f} MB on a {total / 1e6:.0f} MB file"


def test_otel_import_peak_grows_by_its_index_not_the_file(tmp_path):
    total, _, base, streamed = _measure(tmp_path, "otel", otel_files, WHOLE)
    growth = streamed["rss"] - base["rss"]
    assert growth < 0.2 * total, f"peak grew {growth / 1e6:.0f} MB on a {total / 1e6:.0f} MB file"


def test_sharegpt_json_array_import_peak_does_not_grow_with_the_file(tmp_path):
    """A ``.json`` array over ``jsonread.JSON_STREAM_BYTES`` is read one element at a time."""
    total, _, base, streamed = _measure(tmp_path, "sharegpt", sharegpt_files, WHOLE, suffix=".json")
    growth = streamed["rss"] - base["rss"]
    assert growth < 0.1 * total, f"peak grew {growth / 1e6:.0f} MB on a {total / 1e6:.0f} MB file"


def test_scattered_messages_import_peak_is_a_run_not_the_file(tmp_path):
    """A messages file over ``messages.SPILL_BYTES`` whose sets' rows are scattered: rows go to
    sorted runs in a temp file, merged back by set."""
    total, _, base, streamed = _measure(tmp_path, "messages", messages_files, False, suffix=".csv", more=MESSAGES_MAP)
    growth = streamed["rss"] - base["rss"]
    assert growth < 0.2 * total, f"peak grew {growth / 1e6:.0f} MB on a {total / 1e6:.0f} MB file"


def test_contiguous_messages_import_peak_is_a_conversation(tmp_path):
    """A messages CSV over ``messages.SPILL_BYTES`` whose sets' rows are together: handed on
    one conversation at a time as read (no spill)."""
    total, _, base, streamed = _measure(
        tmp_path, "messages", lambda b, s, mb: messages_files(b, s, mb, contiguous=True), False, ".csv", MESSAGES_MAP
    )
    growth = streamed["rss"] - base["rss"]
    assert growth < 0.2 * total, f"peak grew {growth / 1e6:.0f} MB on a {total / 1e6:.0f} MB file"


def swe_agent_files(big: Path, small: Path, mb: float, seed: int = 17) -> tuple[int, int, int]:
    """One SWE-agent trajectory of about ``mb`` MB (a file is one conversation): ``trajectory``
    (each step's action, observation and response, as SWE-agent writes it), then ``history``
    (the same steps as the messages the model saw), then ``info``; a trajectory of 20 steps in
    ``small``. Written piece by piece, so this process stays small (a child's ``ru_maxrss``
    counts it)."""

    def steps(n: int):
        rng = random.Random(seed)  # the same steps for both members
        for t in range(n):
            yield t, cs.text(rng, 300), cs.text(rng, rng.choice([500, 5000]))

    def write(path: Path, n: int) -> int:
        rng = random.Random(seed + 1)
        with path.open("w", encoding="utf-8") as f:
            f.write('{\n  "environment": "swe_main",\n  "trajectory": [')
            for t, said, out in steps(n):
                step = {"action": "ls", "observation": out, "response": said, "state": "{}"}
                f.write(("," if t else "") + "\n    " + json.dumps(step))
            f.write('\n  ],\n  "history": [\n    ')
            head = [{"role": "system", "content": cs.text(rng, 500)}, {"role": "user", "content": cs.text(rng, 2000)}]
            f.write(",\n    ".join(json.dumps(m) for m in head))
            for t, said, out in steps(n):
                call = {"id": f"c{t}", "type": "function", "function": {"name": "bash", "arguments": '{"cmd": "ls"}'}}
                f.write(",\n    " + json.dumps({"role": "assistant", "content": said, "tool_calls": [call]}))
                f.write(",\n    " + json.dumps({"role": "tool", "content": out, "tool_call_ids": [f"c{t}"]}))
            f.write('\n  ],\n  "info": {"exit_status": "submitted"}\n}\n')
        return path.stat().st_size

    total = write(big, int(mb * 1e6 / 6000))
    return total, 1, write(small, 20)


def test_swe_agent_trajectory_import_peak_is_its_history(tmp_path):
    """A trajectory over ``jsonread.JSON_STREAM_BYTES`` is read member by member: its text and
    the ``trajectory`` copy are never held, only ``history`` and ``info``. The file is one
    conversation, so what remains is that conversation: its messages as parsed, its parts and
    its Arrow chunk (one conversation is one chunk), about 2.6 times the file here (main's
    whole-document parse: about 4 times)."""
    total, _, base, streamed = _measure(tmp_path, "swe-agent", swe_agent_files, False, suffix=".traj")
    growth = streamed["rss"] - base["rss"]
    assert growth < 3.2 * total, f"peak grew {growth / 1e6:.0f} MB on a {total / 1e6:.0f} MB file"
