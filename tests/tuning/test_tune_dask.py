"""``cupel_np.tune(..., client=...)`` and ``cupel-np tune --dask``: every batch of trials runs as
Dask tasks over partitions of whole item sets, and the leaderboard, Pareto front, best
policies, comparison, paired statistics and swing equal the in-process search's for the same
seed, with one partition and with several (sets split across partitions, rows in random
order, or a dask DataFrame); the partitions are loaded once per search, not once per batch."""

import json
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cupel_np.errors import InvalidConfigError
from cupel_np.tuning import distributed as tdist
from cupel_np.tuning import tune
from cupel_np.tuning.synthetic import trust_corpus

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from test_tune import SPACE  # noqa: E402

ARGS = dict(label_column="relevant", set_column="session_id", trials=24, batch_size=8, seed=5, n_boot=100)


@pytest.fixture(scope="module")
def client():
    from distributed import Client, LocalCluster

    with (
        LocalCluster(processes=False, n_workers=2, threads_per_worker=1, dashboard_address=":0") as cluster,
        Client(cluster) as cl,
    ):
        yield cl


@pytest.fixture(scope="module")
def items(tmp_path_factory):
    """40 sets in random row order (every set spans row groups), one file of 97-row groups."""
    t = trust_corpus(n_sets=40, items_per_set=20, seed=3)
    t = t.take(pa.array(np.random.default_rng(1).permutation(t.num_rows)))
    path = tmp_path_factory.mktemp("tune_dask") / "items.parquet"
    pq.write_table(t, path, row_group_size=97)
    return path


def _same(a, b):
    assert a.leaderboard.equals(b.leaderboard)
    assert a.pareto.equals(b.pareto)
    assert a.comparison.equals(b.comparison)
    assert [(l, p.to_dict(), bu) for l, p, bu in a.best] == [(l, p.to_dict(), bu) for l, p, bu in b.best]
    assert a.paired == b.paired and a.swing == b.swing
    assert (a.search_sets, a.heldout_sets) == (b.search_sets, b.heldout_sets)


@pytest.mark.parametrize("npartitions", [1, 3])
@pytest.mark.parametrize("objective", ["token_recall", "recall_vs_tokens"])
def test_tune_on_dask_equals_the_in_process_search(client, items, npartitions, objective):
    from distributed import get_task_stream

    here = tune(items, SPACE, 1500, objective=objective, **ARGS)
    with get_task_stream(client) as ts:
        there = tune(items, SPACE, 1500, objective=objective, client=client, npartitions=npartitions, **ARGS)
    _same(here, there)
    names = [t["key"][0] if isinstance(t["key"], tuple) else t["key"] for t in ts.data]
    loads = [k for k in names if str(k).startswith(tdist._load.__name__ + "-")]
    runs = [k for k in names if str(k).startswith(tdist._outcomes.__name__ + "-")]
    # loaded once per search; 3 batches, the best candidates compared for equal selections (not
    # in a Pareto search) and the final sweep each run one task per partition on them
    rounds = 4 if objective == "recall_vs_tokens" else 5
    assert len(loads) == npartitions and len(runs) == rounds * npartitions
    assert here.swing["swinging"] > 0 and here.leaderboard.num_rows == 24


def test_a_batch_over_the_memory_bound_gives_the_same_on_dask(client, items):
    here = tune(items, SPACE, 1500, **ARGS)
    there = tune(items, SPACE, 1500, client=client, npartitions=2, max_cells=300, **ARGS)
    _same(here, there)


def test_tune_on_dask_needs_a_set_column_and_reports_bad_labels(client, items, tmp_path):
    args = dict(ARGS, set_column=None)
    with pytest.raises(InvalidConfigError, match="set column"):
        tune(items, SPACE, 1500, client=client, **args)
    t = pq.read_table(items)
    t = t.set_column(t.schema.get_field_index("relevant"), "relevant", pa.array(["x"] * t.num_rows))
    pq.write_table(t, tmp_path / "bad.parquet")
    with pytest.raises(InvalidConfigError, match="label column 'relevant'"):
        tune(tmp_path / "bad.parquet", SPACE, 1500, client=client, **ARGS)


def test_cli_tune_dask_writes_what_the_in_process_run_writes(items, tmp_path, capsys):
    from cupel_np import cli

    space = Path(__file__).resolve().parents[2] / "data" / "examples" / "tune_space.toml"
    argv = ["tune", str(items), "--space", str(space), "--label-column", "relevant", "--set-column", "session_id"]
    argv += ["--trials", "8", "--batch-size", "4", "--json", "--quiet"]
    assert cli.main(argv + ["--out", str(tmp_path / "a")]) == 0
    a = json.loads(capsys.readouterr().out)
    assert cli.main(argv + ["--out", str(tmp_path / "b"), "--dask", "local:1"]) == 0
    b = json.loads(capsys.readouterr().out)
    assert a["best"] == b["best"] and a["paired"] == b["paired"]
    for name in ("leaderboard.parquet", "comparison.parquet", "pareto.parquet"):
        assert pq.read_table(tmp_path / "a" / name).equals(pq.read_table(tmp_path / "b" / name))
    assert (tmp_path / "a" / "best-1.toml").read_text() == (tmp_path / "b" / "best-1.toml").read_text()


def test_tune_on_a_dask_dataframe_equals_the_in_process_search(client, items):
    import dask.dataframe as dd
    import pandas as pd

    here = tune(pq.read_table(items), SPACE, 1500, **ARGS)
    frame = dd.from_pandas(pq.read_table(items).to_pandas(types_mapper=pd.ArrowDtype), npartitions=3, sort=False)
    _same(here, tune(frame, SPACE, 1500, client=client, **ARGS))
