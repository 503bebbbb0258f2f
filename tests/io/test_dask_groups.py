"""A Dask run whose policy groups by a column the items lack (or one of a type groups cannot
read) fails on the driver before any task runs (no warm-up, no planning task, no partition
task), naming the column, the variant and the file; the CLI exits 2 (issue 29)."""

import dataclasses

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_tool_pairs import transcript_rows

import cupel_np as c
from cupel_np import cli
from cupel_np.errors import InvalidConfigError, InvalidInputTypeError
from cupel_np.io import dask as cdask

BUDGET = c.ContextBudget(800, 600, 50)


class NoTasks:
    """A client that fails the test on any use: nothing may reach the cluster."""

    def __getattr__(self, name):
        raise AssertionError(f"the run used the cluster (client.{name}) before checking its columns")


@pytest.fixture(scope="module")
def items(tmp_path_factory):
    d = tmp_path_factory.mktemp("dask_groups")
    t = pa.Table.from_pylist(transcript_rows(51, n_sets=3))
    pq.write_table(t, d / "items.parquet")
    floats = t.set_column(t.schema.get_field_index("tool_group"), "tool_group", pa.array([1.5] * t.num_rows))
    pq.write_table(floats, d / "floats.parquet")
    return d


def _variants(column):
    chat = c.preset("chat")
    return [("plain", chat), ("paired", dataclasses.replace(chat, groups=column))]


@pytest.mark.parametrize("run", ["sweep", "check"])
def test_a_missing_group_column_fails_before_any_task(tmp_path, items, run):
    src = items / "items.parquet"
    with pytest.raises(InvalidConfigError) as e:
        if run == "sweep":
            cdask.sweep(src, BUDGET, _variants("tool_grp"), set_column="conv", out_dir=tmp_path / "o", client=NoTasks())
        else:
            checks = {
                "variants": [{"label": "paired", "config": {**c.preset("chat").to_dict(), "groups": "tool_grp"}}],
                "budget": {"max_tokens": 800, "target_tokens": 600},
                "set_column": "conv",
                "check": [{"assert": "keeps_tool_pairs"}],
            }
            from cupel_np.testing.checks import parse_checks

            cdask.check(src, parse_checks(checks), client=NoTasks())
    msg = str(e.value)
    assert "groups: variant 'paired' groups by column 'tool_grp'" in msg
    assert str(src) in msg and "tool_group" in msg  # the file, and the columns it has


def test_a_dask_dataframe_source_is_checked_too(tmp_path, items):
    import dask.dataframe as dd

    df = dd.from_pandas(pq.read_table(items / "items.parquet").to_pandas(), npartitions=2)
    with pytest.raises(InvalidConfigError, match="column 'tool_grp', which the dask DataFrame does not have"):
        cdask.sweep(df, BUDGET, _variants("tool_grp"), set_column="conv", out_dir=tmp_path / "o", client=NoTasks())


def test_a_group_column_of_floats_is_named(tmp_path, items):
    src = items / "floats.parquet"
    with pytest.raises(InvalidInputTypeError, match=r"groups: column 'tool_group' of .*floats\.parquet must hold"):
        cdask.sweep(src, BUDGET, _variants("tool_group"), set_column="conv", out_dir=tmp_path / "o", client=NoTasks())


def test_cli_dask_missing_group_column_exits_2(tmp_path, items, capsys):
    src = items / "items.parquet"
    argv = ["sensitivity", src, "--preset", "chat", "--preset", "rag", "--max-tokens", "800", "--target-tokens", "600"]
    argv += ["--set-column", "conv", "--groups", "tool_grp", "--out", tmp_path / "o", "--dask", "local:1"]
    code = cli.main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert code == 2
    assert "column 'tool_grp'" in err and str(src) in err and "internal error" not in err
