"""A 1 MB variant label (issue 27.4): the per-variant table a run prints cuts it for display
(with the number of characters left out), while the outputs keep the whole label."""

import pyarrow.parquet as pq

from cupel_np import cli
from cupel_np.cli.sweeps import TABLE_LABEL_LIMIT
from cupel_np.data import sample_path


def test_a_1mb_label_is_cut_in_the_printed_table_and_kept_in_the_outputs(tmp_path, capsys):
    items = tmp_path / "tiny.parquet"
    pq.write_table(pq.read_table(sample_path()).slice(0, 200), items)
    long = "v" * 1_000_000
    pol = tmp_path / "p.toml"
    pol.write_text(f'[[variants]]\nlabel = "{long}"\npreset = "chat"\n[[variants]]\nlabel = "rag"\npreset = "rag"\n')
    out = tmp_path / "o"
    argv = ["sensitivity", str(items), "--policies", str(pol), "--set-column", "session_id"]
    argv += ["--max-tokens", "8000", "--target-tokens", "6000", "--out", str(out)]
    assert cli.main(argv) == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    assert len(printed) < 5_000 and max(len(line) for line in printed.splitlines()) < 400
    assert "v" * TABLE_LABEL_LIMIT + f"… (+{1_000_000 - TABLE_LABEL_LIMIT:,} characters)" in printed
    rag = next(line for line in printed.splitlines() if line.startswith("rag "))
    head = next(line for line in printed.splitlines() if line.startswith("variant "))
    n = rag.split()[1]  # the included count ends where its header does: the columns still line up
    assert rag.index(n) + len(n) == head.index("included") + len("included")
    assert long in pq.read_table(out / "variants.parquet").column("variant").to_pylist()
