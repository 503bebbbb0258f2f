"""Import throughput and memory on generated Claude Code session logs (no real logs needed):

    NUMBA_NUM_THREADS=1 .venv/bin/python -m pytest benchmarks/test_import.py -s

The sessions (``claude_sessions.py``) carry what real ones carry beside the messages: the record
envelope, the whole API message with its usage on every assistant record, and the
``toolUseResult`` that repeats each tool's output. ``CUPEL_BENCH_IMPORT_MB`` (default 20) sets
the size of the throughput corpus; it includes a resumed session copied into a second file (so
the uuid dedup runs) and compactions.

Throughput is CPU time of this process (``time.process_time``: the machine is shared), median
of interleaved rounds, against a bare ``json.loads`` of every line in the same rounds; the load
average is printed. Three paths are timed: ``import_transcripts`` (the whole table), the
streamed ``import_to_parquet`` that ``cupel-np import`` runs (chunks written to a Parquet file
as they are made), and the same streamed import in two passes
(``claude_code.STREAM_TWO_PASS_BYTES`` forced to 0: what its inputs over 32 MiB get).
``CUPEL_BENCH_IMPORT_MIN_MBS`` (default 40) is asserted for all three.

Memory: tracemalloc's peak over a many-conversation input at two sizes, one pass (every part
held until the table is built) against two passes (``claude_code.TWO_PASS_BYTES``: a record
index, then each conversation read again), less the output table's own bytes.
"""

import json
import os
import random
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import claude_sessions as cs  # noqa: E402

from cupel_np.io.importers import claude_code, import_to_parquet, import_transcripts  # noqa: E402

MB = float(os.environ.get("CUPEL_BENCH_IMPORT_MB", 20))


def _write_corpus(d: Path, mb: float, seed: int, turns=(20, 80), resumed=True) -> tuple[int, int]:
    rng = random.Random(seed)
    total, i, largest = 0, 0, 0
    while total < mb * 1e6:
        recs = cs.session(rng, f"s{i:04d}", rng.randint(*turns))
        text = cs.lines(recs)
        (d / f"s{i:04d}.jsonl").write_text(text)
        size = len(text.encode())
        if i == 1 and resumed:  # a resumed session: a second file copies the first's history, then goes on
            more = cs.session(rng, "s0001b", 5, compact=False)
            # a session may end on a record without a uuid: hang the resumed part off the last one with it
            more[0]["parentUuid"] = next(r["uuid"] for r in reversed(recs) if "uuid" in r)
            extra = text + cs.lines(more)
            (d / "s0001-resumed.jsonl").write_text(extra)
            size = len(extra.encode())
            total += size
        largest = max(largest, size)
        total += len(text.encode())
        i += 1
    return total, largest


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    d = tmp_path_factory.mktemp("claude")
    total, largest = _write_corpus(d, MB, 40)
    return d, total, largest


def _cpu(fn) -> float:
    t = time.process_time()
    fn()
    return time.process_time() - t


def test_import_throughput(corpus, tmp_path):
    d, total, largest = corpus
    files = sorted(d.glob("*.jsonl"))
    import_transcripts("claude-code", files[:1])  # warm: compile or load the estimate kernel

    def bare():
        for f in files:
            with f.open("rb") as fh:
                for line in fh:
                    json.loads(line)

    res = {}

    def run():
        res["res"] = import_transcripts("claude-code", d)

    def streamed():
        res["streamed"] = import_to_parquet("claude-code", d, tmp_path / "items.parquet")

    def two_passes():
        saved, claude_code.STREAM_TWO_PASS_BYTES = claude_code.STREAM_TWO_PASS_BYTES, 0
        try:
            import_to_parquet("claude-code", d, tmp_path / "items2.parquet")
        finally:
            claude_code.STREAM_TWO_PASS_BYTES = saved

    t_json, t_imp, t_stream, t_two = [], [], [], []
    for _ in range(5):  # interleaved, so a change in the machine's load hits all alike
        t_json.append(_cpu(bare))
        t_imp.append(_cpu(run))
        t_stream.append(_cpu(streamed))
        t_two.append(_cpu(two_passes))
    load = os.getloadavg()
    r = res["res"]
    mbs, mbs_json = total / statistics.median(t_imp) / 1e6, total / statistics.median(t_json) / 1e6
    mbs_stream, mbs_two = total / statistics.median(t_stream) / 1e6, total / statistics.median(t_two) / 1e6
    ratio = statistics.median(a / b for a, b in zip(t_json, t_imp))
    print(
        f"\nimport: {total / 1e6:.1f} MB, {len(files)} files, {r.items:,} items in {r.conversations} sets, "
        f"{r.lines:,} lines; CPU time, median of 5 interleaved rounds, load average {load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f}: "
        f"import {mbs:.1f} MB/s, bare json.loads {mbs_json:.0f} MB/s (the import at {ratio:.0%} of it); "
        f"streamed to Parquet {mbs_stream:.1f} MB/s, in two passes {mbs_two:.1f} MB/s"
    )
    assert r.items > 0 and r.skipped["claude-code duplicate record (same uuid, first copy kept)"] > 0
    assert res["streamed"].items == r.items
    target = float(os.environ.get("CUPEL_BENCH_IMPORT_MIN_MBS", 40))
    assert mbs >= target, f"{mbs:.1f} MB/s < {target} MB/s"
    assert mbs_stream >= target, f"streamed: {mbs_stream:.1f} MB/s < {target} MB/s"
    assert mbs_two >= target, f"streamed in two passes: {mbs_two:.1f} MB/s < {target} MB/s"


def _peak(path, two_pass: bool) -> tuple[int, int, int]:
    saved = claude_code.TWO_PASS_BYTES
    claude_code.TWO_PASS_BYTES = 0 if two_pass else 1 << 50
    try:
        tracemalloc.start()
        res = import_transcripts("claude-code", path)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    finally:
        claude_code.TWO_PASS_BYTES = saved
    return peak, res.table.nbytes, res.lines


def test_import_memory_is_bounded_by_the_largest_conversation(tmp_path):
    sizes = {}
    for mb in (12, 36):
        d = tmp_path / f"c{mb}"
        d.mkdir()
        total, largest = _write_corpus(d, mb, 7, turns=(10, 40), resumed=False)
        import_transcripts("claude-code", sorted(d.glob("*.jsonl"))[:1])
        one, table, lines = _peak(d, False)
        two, _, _ = _peak(d, True)
        sizes[mb] = (total, largest, table, lines, one - table, two - table)
    print(f"\nimport memory (tracemalloc peak less the output table; load average {os.getloadavg()[0]:.1f}):")
    for total, largest, table, lines, one, two in sizes.values():
        print(
            f"  {total / 1e6:.0f} MB input, {lines:,} lines, largest session {largest / 1e6:.2f} MB, table {table / 1e6:.0f} MB: "
            f"one pass +{one / 1e6:.1f} MB, two passes +{two / 1e6:.1f} MB ({two / lines:.0f} B a line)"
        )
    (_, _, _, l1, one1, two1), (_, _, _, l3, one3, two3) = sizes[12], sizes[36]
    # what each further line costs: one pass holds every part, so its excess grows with the
    # text; two passes hold one chunk of conversations (core.CHUNK_CHARS, or the largest
    # conversation when it is larger) plus an index entry a line
    one_line, two_line = (one3 - one1) / (l3 - l1), (two3 - two1) / (l3 - l1)
    print(f"  each further line: one pass {one_line:.0f} B, two passes {two_line:.0f} B")
    assert two_line < 400, f"{two_line:.0f} B a line"
    assert two_line < one_line / 3


def test_streamed_json_array_and_spilled_messages_throughput(tmp_path):
    """The bounded readers against the held ones, in interleaved rounds of this process (CPU
    time, median of 5; ``CUPEL_BENCH_IMPORT_MB`` sets each input's size): a ShareGPT ``.json``
    array read whole (``jsonread.JSON_STREAM_BYTES`` above its size, what main does) or one element at
    a time (0), and a messages CSV with scattered sets held (``messages.SPILL_BYTES`` above its
    size) or spilled to sorted runs and merged (0: its sets are scattered, so the contiguous
    reading restarts first), and a messages CSV with contiguous sets held or handed on as read
    (0); the streamed import (``import_to_parquet``) each time. The two of each pair write the
    same file."""
    from test_import_memory import MESSAGES_MAP, messages_files, sharegpt_files

    from cupel_np.io.importers import jsonread, messages

    sg, msgs = tmp_path / "sg.json", tmp_path / "m.csv"
    sg_total, _, _ = sharegpt_files(sg, tmp_path / "sg1.json", MB)
    m_total, _, _ = messages_files(msgs, tmp_path / "m1.csv", MB)
    contig = tmp_path / "c.csv"
    c_total, _, _ = messages_files(contig, tmp_path / "c1.csv", MB, contiguous=True)
    mapping = MESSAGES_MAP[1]
    cases = {
        "sharegpt .json, whole": (lambda: import_to_parquet("sharegpt", sg, tmp_path / "a.parquet"), jsonread, "JSON_STREAM_BYTES", 1 << 50, sg_total),
        "sharegpt .json, streamed": (lambda: import_to_parquet("sharegpt", sg, tmp_path / "b.parquet"), jsonread, "JSON_STREAM_BYTES", 0, sg_total),
        "messages csv, held": (lambda: import_to_parquet("messages", msgs, tmp_path / "c.parquet", mapping=mapping), messages, "SPILL_BYTES", 1 << 50, m_total),
        "messages csv, spilled": (lambda: import_to_parquet("messages", msgs, tmp_path / "d.parquet", mapping=mapping), messages, "SPILL_BYTES", 0, m_total),
        "contiguous messages csv, held": (lambda: import_to_parquet("messages", contig, tmp_path / "e.parquet", mapping=mapping), messages, "SPILL_BYTES", 1 << 50, c_total),
        "contiguous messages csv, streamed": (lambda: import_to_parquet("messages", contig, tmp_path / "f.parquet", mapping=mapping), messages, "SPILL_BYTES", 0, c_total),
    }  # fmt: skip
    import_transcripts("sharegpt", tmp_path / "sg1.json")  # warm: compile or load the estimate kernel
    times: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(5):
        for name, (fn, module, attr, value, _) in cases.items():
            saved = getattr(module, attr)
            setattr(module, attr, value)
            try:
                times[name].append(_cpu(fn))
            finally:
                setattr(module, attr, saved)
    load = os.getloadavg()
    print(
        f"\nbounded readers, CPU time, median of 5 interleaved rounds, load average {load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f}:"
    )
    for name, (_, _, _, _, total) in cases.items():
        print(f"  {name}: {total / 1e6:.1f} MB, {total / statistics.median(times[name]) / 1e6:.1f} MB/s")
    for held, bounded in (
        ("sharegpt .json, whole", "sharegpt .json, streamed"),
        ("messages csv, held", "messages csv, spilled"),
        ("contiguous messages csv, held", "contiguous messages csv, streamed"),
    ):
        ratio = statistics.median(b / a for a, b in zip(times[held], times[bounded]))
        print(f"  {bounded} / {held}: {ratio:.2f}x the CPU time (median of the paired rounds)")
    import pyarrow.parquet as pq

    assert pq.read_table(tmp_path / "b.parquet").equals(pq.read_table(tmp_path / "a.parquet"))
    assert pq.read_table(tmp_path / "d.parquet").equals(pq.read_table(tmp_path / "c.parquet"))
    assert pq.read_table(tmp_path / "f.parquet").equals(pq.read_table(tmp_path / "e.parquet"))
