"""Thousands of variants (issue 27.4): a run whose report page is estimated over the memory
limit stops before any row is read, naming the limit (10,000 variants used to run out of
memory allocating variant-by-variant arrays; 1,000 peaked at 4.5 GiB on 200 rows, 0.7 GiB since
the page is bounded past 50 variants)."""

import pyarrow.parquet as pq
import pytest

from cupel_np import cli
from cupel_np.data import sample_path
from cupel_np.model.datasets import check_page_fits, format_size


def _grid(path, budgets: int) -> str:
    text = 'set_column = "session_id"\npresets = ["chat", "rag", "document_qa", "long_running"]\n'
    text += "".join(f"[[budgets]]\nmax_tokens = {4000 + i}\ntarget_tokens = {3000 + i}\n" for i in range(budgets))
    path.write_text(text)
    return str(path)


@pytest.fixture
def no_rows_read(monkeypatch):
    """Reading the items (in memory or streamed) fails the test: the refusal comes first."""
    from cupel_np.cli import shared, sweep, sweeps

    def refuse(*a, **kw):
        raise AssertionError("the items were read")

    for mod in (shared, sweep, sweeps):
        for name in ("_load_table", "sweep_parquet"):
            if hasattr(mod, name):
                monkeypatch.setattr(mod, name, refuse)


@pytest.mark.parametrize("budgets, limit", [(2500, "20G"), (250, "300M")], ids=["10000-variants", "1000-variants"])
def test_many_variants_stop_before_any_work_naming_the_limit(tmp_path, capsys, no_rows_read, budgets, limit):
    items = tmp_path / "tiny.parquet"
    pq.write_table(pq.read_table(sample_path()).slice(0, 200), items)
    argv = ["sweep", str(items), "--grid", _grid(tmp_path / "g.toml", budgets), "--out", str(tmp_path / "o2")]
    code = cli.main([*argv, "--memory-limit", limit])
    err = capsys.readouterr().err
    assert code == 2, err
    n = 4 * budgets
    assert f"{n:,} variants" in err and "memory limit of" in err and "--memory-limit" in err, err
    assert "internal error" not in err
    assert not (tmp_path / "o2").exists() or not any((tmp_path / "o2").iterdir())


def test_the_page_estimate_refuses_only_over_the_limit():
    check_page_fits(16, 2**30)  # a few variants: far under any limit
    check_page_fits(1_000, 2**30)  # the bounded page: 1,000 variants peaked at 711 MiB (was refused)
    with pytest.raises(Exception, match=r"10,000 variants.*memory limit of 1\.0 GiB") as e:
        check_page_fits(10_000, 2**30)
    assert format_size(2**30) in str(e.value)
