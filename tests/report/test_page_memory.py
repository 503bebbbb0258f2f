"""The page built from written outputs (``report/from_dir.py``) holds a bounded part of the
``items`` output at a time: pieces of about ``BATCH_ROWS`` rows (a larger set whole) whether the
sets are contiguous or interleave, no Arrow hash aggregate over the per-variant reason strings
(it held a C++ string per content group and variant outside Arrow's memory pool), and only the
swinging rows that can still reach the page's tables are built into tables. The page is the
in-memory page, byte for byte, whatever the piece size."""

import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import cupel_np as c
from cupel_np.io import sweep_parquet, write_sweep
from cupel_np.model import datasets
from cupel_np.report import from_dir
from cupel_np.report.from_result import write_html_report

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "data" / "sample_sessions.parquet"
BUDGET = c.ContextBudget(8000, 6000, 1000)
VARIANTS = [("chat", c.preset("chat")), ("rag", c.preset("rag")), ("tiny", c.preset("chat"), c.ContextBudget(900, 700))]
PIECE = 64


def _norm(p: Path) -> str:
    return re.sub(r'content="cupel_np report from-[a-z]+"', "", p.read_text())


@pytest.fixture(scope="module")
def small() -> pa.Table:
    """12 sessions of the sample corpus, contiguous by session."""
    t = pq.read_table(SAMPLE)
    keep = [i for i, k in enumerate(t.column("session_id").to_pylist()) if int(k.split("-")[1]) < 12]
    return t.take(pa.array(keep))


def _written(kind: str, t: pa.Table, tmp_path: Path) -> tuple[Path, str, int]:
    """A sweep directory written in-process (sets interleaved) or streamed (contiguous), the
    in-memory page of the same sweep, and the largest set's rows."""
    if kind == "interleaved":
        t = t.take(pa.array(np.random.default_rng(3).permutation(t.num_rows)))
    res = c.sweep(c.ItemTable.from_arrow(t, set_column="session_id"), BUDGET, VARIANTS)
    assert res.n_swing > PIECE  # pieces of PIECE rows hold fewer swinging contents than the whole
    want = _norm(write_html_report(res, tmp_path / "mem", title="T"))
    out = tmp_path / "out"
    if kind == "interleaved":
        write_sweep(res, out)
    else:
        pq.write_table(t, tmp_path / "items.parquet", row_group_size=200)
        sweep_parquet(tmp_path / "items.parquet", BUDGET, VARIANTS, out, set_column="session_id", chunk_rows=200)
    largest = max(r["counts"] for r in t.column("session_id").value_counts().to_pylist())
    return out, want, largest


@pytest.mark.parametrize("kind", ["interleaved", "streamed"])
def test_the_page_reads_items_in_bounded_pieces(tmp_path, small, monkeypatch, kind):
    out, want, largest = _written(kind, small, tmp_path)
    monkeypatch.setattr(from_dir, "BATCH_ROWS", PIECE)
    monkeypatch.setattr(datasets, "default_memory_limit", lambda: 1)  # an interleaved file: groups of PIECE rows
    pieces: list[int] = []
    add = from_dir._PageAcc.add
    monkeypatch.setattr(from_dir._PageAcc, "add", lambda self, t: (pieces.append(t.num_rows), add(self, t))[1])
    assert _norm(from_dir.write_dir_report(out, title="T")) == want
    assert sum(pieces) == small.num_rows and len(pieces) > 1
    # a piece is whole sets: at most PIECE rows plus the rest of the set it cuts into, or one
    # larger set (the interleaved file was read whole, every row in one piece)
    assert max(pieces) <= PIECE + largest


def test_no_hash_aggregate_of_reason_strings_and_small_kept_tables(tmp_path, small, monkeypatch):
    out, want, _ = _written("streamed", small, tmp_path)
    aggregated: list[str] = []
    real = pa.TableGroupBy.aggregate

    def aggregate(self, aggs):
        aggregated.extend(a[0] if isinstance(a[0], str) else str(a[0]) for a in aggs)
        return real(self, aggs)

    monkeypatch.setattr(pa.TableGroupBy, "aggregate", aggregate)
    kept: list[int] = []
    best = from_dir._best
    monkeypatch.setattr(from_dir, "_best", lambda t, k: (kept.append(t.num_rows), best(t, k))[1])
    top, max_sets = 5, 2
    from_dir.write_dir_report(out, title="T", top_k=top, max_sets=max_sets)
    assert aggregated  # the per-set sums still use Arrow
    assert not [a for a in aggregated if a.endswith(".reason")]
    # the kept rows and the piece's rows that can still reach them: not every swinging content
    # of the piece (the sample's pieces hold hundreds)
    assert kept and max(kept) <= 2 * top + 25 * max_sets


def test_an_interleaved_file_that_fits_the_memory_limit_is_scanned_once(tmp_path, small, monkeypatch):
    """Groups of sets are as large as the memory limit allows: an items file that fits is one
    filtered scan (a scan per ``BATCH_ROWS`` rows read a 5M-row file some 80 times), and a
    limit that holds about half the file makes a few."""
    out, want, _ = _written("interleaved", small, tmp_path)
    monkeypatch.setattr(from_dir, "BATCH_ROWS", PIECE)
    scans: list[int] = []
    scan = from_dir._scan_sets
    monkeypatch.setattr(from_dir, "_scan_sets", lambda *a: (scans.append(1), scan(*a))[1])
    assert _norm(from_dir.write_dir_report(out, title="T")) == want
    assert len(scans) == 1
    md = pq.read_metadata(out / "items.parquet")
    half = sum(md.row_group(g).total_byte_size for g in range(md.num_row_groups)) * from_dir.SCATTERED_FACTOR // 2
    monkeypatch.setattr(datasets, "default_memory_limit", lambda: half)
    scans.clear()
    assert _norm(from_dir.write_dir_report(out, title="T", overwrite=True)) == want
    assert 2 <= len(scans) <= 4
