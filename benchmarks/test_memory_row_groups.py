"""``--memory-limit`` on an input of 1,048,576-row row groups (pyarrow's default; issue 27.8):
a streamed run's peak RSS stays within the limit above an idle run's (a minute or two):

    .venv/bin/python -m pytest benchmarks/test_memory_row_groups.py -s

The benchmark corpus (``test_memory.write_corpus``: sets of 50, ~40-character contents) of
``CUPEL_BENCH_RG_ROWS`` rows (default 3M) in row groups of 1,048,576 rows, then ``cupel-np
sensitivity FILE`` with 4 presets under ``--memory-limit 300M`` and ``1G`` in a fresh child
process each; peak RSS is the child's ``ru_maxrss``. The idle peak is the same command on a
20,000-row file in memory (interpreter, libraries, compiled kernels and the report). Before
the fix, chunks were whole row groups whatever the limit: 1M-row chunks.
"""

import os

from test_memory import cli, write_corpus

ROWS = int(os.environ.get("CUPEL_BENCH_RG_ROWS", 3_000_000))
GROUP = 1_048_576
LIMITS = {"300M": 300 * 2**20, "1G": 2**30}


def _gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB"


def test_streamed_peak_stays_within_the_limit_on_million_row_groups(tmp_path):
    warm = tmp_path / "warm.parquet"
    write_corpus(warm, 20_000)
    cli(warm, tmp_path / "w")  # compile / load the Numba cache once
    idle = cli(warm, tmp_path / "idle", "--memory-limit", "64G")["peak_rss"]
    big = tmp_path / "big.parquet"
    write_corpus(big, ROWS, group=GROUP)
    lines = [f"idle (20k rows in memory): peak {_gib(idle)}"]
    over = {}
    for name in LIMITS:
        r = cli(big, tmp_path / f"out-{name}", "--memory-limit", name)
        over[name] = r["peak_rss"] - idle
        lines.append(
            f"{ROWS:,} rows in {GROUP:,}-row groups, --memory-limit {name}: {r['seconds']:.1f}s, "
            f"peak {_gib(r['peak_rss'])} ({_gib(over[name])} over idle)"
        )
    print("\n" + "\n".join(lines))
    for name, limit in LIMITS.items():
        assert over[name] <= limit, (name, over[name])
