"""Bounded memory through the command line (opt-in, minutes, GBs of disk):

    CUPEL_BENCH_BIG=1 .venv/bin/python -m pytest benchmarks/test_memory.py -s

An items file of ``CUPEL_BENCH_MEM_ROWS`` rows (default 50M; a comma list runs several sizes)
is generated on the fly, one row group at a time (sets of 50 rows, contiguous; ~40-character
contents, kinds, sparse priorities, timestamps, pinned first rows), then

    cupel-np sensitivity FILE --preset chat --preset rag --preset document_qa --preset long_running
        --set-column session_id --memory-limit 2G ...

runs in a fresh subprocess (streams: the input is far over 2G by the estimate); its wall time
and peak RSS (``ru_maxrss`` of the child) are reported. On ``CUPEL_BENCH_COMPARE_ROWS`` rows
(default 5M) the same command runs in memory (``--memory-limit 64G``) and streamed, for the
throughput ratio and the in-memory peak (bytes per input row, and the peak per uncompressed
Parquet byte that ``datasets.IN_MEMORY_FACTOR`` estimates).
"""

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

BIG = os.environ.get("CUPEL_BENCH_BIG") == "1"
SIZES = [int(x) for x in os.environ.get("CUPEL_BENCH_MEM_ROWS", "50000000").split(",")]
COMPARE = int(os.environ.get("CUPEL_BENCH_COMPARE_ROWS", 5_000_000))
SET_SIZE = 50
GROUP = 500_000  # rows per row group
PRESETS = ["chat", "rag", "document_qa", "long_running"]

pytestmark = pytest.mark.skipif(not BIG, reason="set CUPEL_BENCH_BIG=1 (50M rows, GBs of disk, many minutes)")


def write_corpus(path: Path, rows: int, seed: int = 5, group: int = GROUP) -> None:
    """``rows`` items in sets of 50, written a row group (``group`` rows) at a time (bounded
    memory)."""
    rng = np.random.default_rng(seed)
    kinds = pa.array(["Message", "ToolOutput", "Document", "Memory", "message"])
    schema = None
    with pq.ParquetWriter(
        path,
        pa.schema(
            [
                ("session_id", pa.int64()),
                ("content", pa.string()),
                ("tokens", pa.int64()),
                ("kind", pa.string()),
                ("priority", pa.int64()),
                ("timestamp", pa.timestamp("us", tz="UTC")),
                ("pinned", pa.bool_()),
            ]
        ),
        compression="zstd",
    ) as w:
        for lo in range(0, rows, group):
            n = min(group, rows - lo)
            r = np.arange(lo, lo + n)
            s, p = r // SET_SIZE, r % SET_SIZE
            content = pc.binary_join_element_wise(
                "s",
                pa.array(s).cast(pa.string()),
                " t",
                pa.array(p).cast(pa.string()),
                " ",
                pa.array(rng.integers(10**8, 10**9, n)).cast(pa.string()),
                " tool output",
                "",
            )
            t = pa.table(
                {
                    "session_id": s,
                    "content": content,
                    "tokens": rng.integers(1, 400, n),
                    "kind": kinds.take(pa.array(rng.integers(0, 5, n))),
                    "priority": pa.array(rng.integers(0, 100, n), mask=rng.random(n) < 0.5),
                    "timestamp": pa.array(
                        (1_700_000_000_000_000 + s * 10**9 + p * 10**6).astype("datetime64[us]"),
                        pa.timestamp("us", tz="UTC"),
                    ),
                    "pinned": p == 0,
                }
            )
            schema = schema or w.schema
            w.write_table(t.cast(schema), row_group_size=group)


WRAP = """
import resource, subprocess, sys, time
t0 = time.perf_counter()
rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode
print(rc, time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)
"""


def cli(path: Path, out: Path, *extra: str) -> dict:
    """One CLI run in a fresh child: exit code, wall seconds and the child's peak RSS."""
    argv = [
        sys.executable,
        "-m",
        "cupel_np",
        "sensitivity",
        str(path),
        *[a for p in PRESETS for a in ("--preset", p)],
        "--max-tokens",
        "8000",
        "--target-tokens",
        "6000",
        "--set-column",
        "session_id",
        "--out",
        str(out),
        "--quiet",
        *extra,
    ]
    res = subprocess.run([sys.executable, "-c", WRAP, *argv], capture_output=True, text=True, check=True)
    rc, sec, rss = res.stdout.split()
    assert rc == "0", res.stderr
    return {"seconds": float(sec), "peak_rss": int(rss)}


def _gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB"


def _uncompressed(path: Path) -> int:
    md = pq.read_metadata(path)
    return sum(md.row_group(g).total_byte_size for g in range(md.num_row_groups))


def test_streaming_cli_memory_is_flat(tmp_path):
    warm = tmp_path / "warm.parquet"
    write_corpus(warm, 20_000)
    cli(warm, tmp_path / "w")  # compile / load the Numba cache once
    lines = []
    # the same size in memory and streamed: throughput and the in-memory peak
    small = tmp_path / "compare.parquet"
    write_corpus(small, COMPARE)
    mem = cli(small, tmp_path / "mem", "--memory-limit", "64G")
    st = cli(small, tmp_path / "st", "--memory-limit", "2G")
    ub = _uncompressed(small)
    lines.append(
        f"{COMPARE:,} rows: in memory {mem['seconds']:.1f}s peak {_gib(mem['peak_rss'])} "
        f"({mem['peak_rss'] / COMPARE:.0f} B/row, {mem['peak_rss'] / ub:.1f}x uncompressed); streamed "
        f"{st['seconds']:.1f}s peak {_gib(st['peak_rss'])}; streamed/in-memory time "
        f"{st['seconds'] / mem['seconds']:.2f}x"
    )
    for a in ("items", "diffs", "variants"):
        assert (
            pq.read_metadata(tmp_path / "st" / f"{a}.parquet").num_rows
            == pq.read_metadata(tmp_path / "mem" / f"{a}.parquet").num_rows
        ), a
    small.unlink()
    peaks = []
    for rows in SIZES:
        f = tmp_path / f"items-{rows}.parquet"
        t0 = time.perf_counter()
        write_corpus(f, rows)
        gen = time.perf_counter() - t0
        r = cli(f, tmp_path / f"out-{rows}", "--memory-limit", "2G")
        peaks.append(r["peak_rss"])
        lines.append(
            f"{rows:,} rows ({f.stat().st_size / 2**20:.0f} MiB on disk, generated in {gen:.0f}s): "
            f"streamed {r['seconds']:.1f}s ({rows * len(PRESETS) / r['seconds'] / 1e6:.2f}M item-variants/s), "
            f"peak RSS {_gib(r['peak_rss'])}"
        )
        f.unlink()
    print("\n" + "\n".join(lines))
    assert max(peaks) <= 2 * 2**30, peaks
