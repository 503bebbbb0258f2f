"""``cupel-np budget --groups COLUMN`` (issue 29): every variant selects the items sharing a
value of COLUMN whole, as ``sensitivity`` / ``sweep --groups`` do; the curves equal
``budget_curves`` with ``groups = COLUMN``; a column the items lack is an error naming it."""

import dataclasses

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_tool_pairs import transcript_rows

import cupel_np as c
from cupel_np import cli
from cupel_np.model.presets import preset


@pytest.fixture(scope="module")
def items(tmp_path_factory):
    path = tmp_path_factory.mktemp("items") / "items.parquet"
    pq.write_table(pa.Table.from_pylist(transcript_rows(41, n_sets=3)), path)
    return path


def _budget(capsys, items, out, *extra):
    argv = ["budget", items, "--preset", "chat", "--ladder", "300:2400:4", "--spacing", "linear"]
    argv = [*argv, "--set-column", "conv", "--out", out, "--quiet", *extra]
    code = cli.main([str(a) for a in argv])
    return code, capsys.readouterr()


def test_budget_groups_flag_keeps_units_whole(tmp_path, items, capsys):
    code, (out, err) = _budget(capsys, items, tmp_path / "g", "--groups", "tool_group")
    assert code == 0, err
    got = pq.read_table(tmp_path / "g" / "curves.parquet")
    table = c.ItemTable.from_arrow(pq.read_table(items), set_column="conv")
    ladder = c.budget_ladder(300, 2400, 4, spacing="linear")
    assert [b.max_tokens for b in ladder] == [300, 1000, 1700, 2400]
    grouped = dataclasses.replace(preset("chat"), groups="tool_group")
    want = c.budget_curves(table, [("chat", grouped)], ladder).curves
    assert got.select(want.column_names).equals(want)
    # the flag changes the answer: without it the curves are the ungrouped policy's
    code, (out, err) = _budget(capsys, items, tmp_path / "p")
    assert code == 0, err
    plain = pq.read_table(tmp_path / "p" / "curves.parquet")
    assert plain.equals(c.budget_curves(table, [("chat", preset("chat"))], ladder).curves.select(plain.column_names))
    assert not plain.column("included_count").equals(got.column("included_count"))


def test_budget_groups_flag_names_a_missing_column(tmp_path, items, capsys):
    code, (out, err) = _budget(capsys, items, tmp_path / "x", "--groups", "tool_grp")
    assert code == 2
    assert "groups: the items have no column 'tool_grp'" in err and "internal error" not in err
    assert not (tmp_path / "x").exists()
