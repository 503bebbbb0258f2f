"""``sensitivity --dask`` prints the per-variant table the in-process run prints (issue 26.18:
it printed one line of totals), and a Dask run whose every (variant, set) cell failed is exit 2
like the in-process and streamed runs (issue 26.7), with its outputs still written."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from cupel_np import cli

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample_sessions.parquet"
COMMON = ["--preset", "chat", "--preset", "rag", "--preset", "long_running", "--set-column", "session_id"]
COMMON += ["--max-tokens", "8000", "--target-tokens", "6000", "--quiet"]


@pytest.fixture(scope="module")
def items(tmp_path_factory) -> Path:
    t = pq.read_table(SAMPLE)
    t = t.filter(pc.is_in(t["session_id"], value_set=pc.unique(t["session_id"]).slice(0, 12)))
    p = tmp_path_factory.mktemp("items") / "items.parquet"
    pq.write_table(t, p)
    return p


def _table(out: str) -> list[str]:
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("variant "))
    return lines[start : start + 4]


def test_dask_prints_the_in_process_table(tmp_path, capsys, items):
    assert cli.main(["sensitivity", str(items), *COMMON, "--out", str(tmp_path / "mem")]) == 0
    mem = capsys.readouterr().out
    assert cli.main(["sensitivity", str(items), *COMMON, "--out", str(tmp_path / "dk"), "--dask", "local:1"]) == 0
    dk = capsys.readouterr().out
    assert "on Dask" in dk
    table = _table(mem)
    assert [line.split()[0] for line in table[1:]] == ["chat", "rag", "long_running"]
    assert _table(dk) == table


def test_dask_run_whose_every_cell_failed_is_exit_2(tmp_path, capsys):
    # every set holds a pinned item larger than the budget: every cell fails
    n = 6
    t = pa.table(
        {
            "session_id": [f"s{i // 2}" for i in range(n)],
            "content": [f"c{i}" for i in range(n)],
            "tokens": [500 if i % 2 == 0 else 10 for i in range(n)],
            "kind": ["Message"] * n,
            "pinned": [i % 2 == 0 for i in range(n)],
        }
    )
    p = tmp_path / "pinned.parquet"
    pq.write_table(t, p)
    argv = ["sensitivity", str(p), "--preset", "chat", "--preset", "rag", "--set-column", "session_id"]
    argv += ["--max-tokens", "100", "--target-tokens", "80", "--quiet", "--dask", "local:1"]
    for extra, out in (([], "a"), (["--json"], "b")):
        code = cli.main([*argv, *extra, "--out", str(tmp_path / out)])
        err = capsys.readouterr().err
        assert code == 2 and "every (variant, set) cell failed (6 of 6)" in err, err
        assert (tmp_path / out / "variants").is_dir()
