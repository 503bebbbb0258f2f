"""``cupel-np check --dask`` and ``cupel_np.dask.check``: on a real multi-process LocalCluster
the checks give exactly the in-process run's outcomes, failure table, exit code and JUnit XML,
for one and several partitions, with sets split across partitions (shuffle) and files in random
row order; bad input exits 2. Streamed chunks list failures in the whole run's order too."""

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cupel_np import cli
from cupel_np.errors import InvalidConfigError
from cupel_np.io import dask as cdask
from cupel_np.io import dask_plan
from cupel_np.model.items import ItemTable
from cupel_np.testing.checks import load_checks
from cupel_np.testing.runner import run_checks

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "data" / "sample_sessions.parquet"
EXAMPLE = ROOT / "data" / "examples" / "checks.toml"

# fails for every variant (in a different number of sets each), with run errors from "tight"
# (pinned items need more than 300 tokens in about half of the sessions); the last check
# passes and names its variants out of label order
CHECKS = """
set_column = "session_id"
presets = ["chat", "rag"]
[budget]
max_tokens = 8000
target_tokens = 6000
output_reserve = 1000

[[variants]]
label = "tight"
preset = "chat"
budget = { max_tokens = 300, target_tokens = 250 }

[[check]]
name = "memories are never dropped"
assert = "have_no_exclusions_for_kind"
kind = "Memory"

[[check]]
name = "system prompt kept"
assert = "include_item_with_kind"
kind = "SystemPrompt"

[[check]]
name = "rag and chat run"
variant = ["rag", "chat"]
assert = "have_at_least_n_exclusions"
n = 0
"""


@pytest.fixture(scope="module")
def client():
    from distributed import Client, LocalCluster

    with (
        LocalCluster(processes=True, n_workers=2, threads_per_worker=1, dashboard_address=":0") as cluster,
        Client(cluster) as cl,
    ):
        yield cl


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """40 sessions of the sample corpus: the table, one file in row groups of 100 rows (sets
    straddle them), and the checks file."""
    t = pq.read_table(SAMPLE)
    keys = t.column("session_id").to_pylist()
    t = t.take(pa.array([i for i, k in enumerate(keys) if int(k.split("-")[1]) < 40]))
    d = tmp_path_factory.mktemp("small")
    pq.write_table(t, d / "items.parquet", row_group_size=100)
    (d / "checks.toml").write_text(CHECKS)
    return t, d / "items.parquet", d / "checks.toml"


def _in_process(source, checks, keep=1000):
    cf = load_checks(checks)
    return run_checks(cf, [ItemTable.from_parquet(source, set_column="session_id")], keep=keep)


def _assert_same(got, expected):
    assert [o.check.name for o in got] == [o.check.name for o in expected]
    for g, e in zip(got, expected):
        assert (g.check.name, g.pairs, g.failed, g.kept) == (e.check.name, e.pairs, e.failed, e.kept)
        assert g.table().equals(e.table()), g.check.name


@pytest.fixture
def spans(monkeypatch):
    """Records whether each run shuffled (the driver's decision)."""
    seen = []
    real = dask_plan._spans

    def spy(keys):
        seen.append(real(keys))
        return seen[-1]

    monkeypatch.setattr(dask_plan, "_spans", spy)
    return seen


@pytest.mark.parametrize("npartitions", [1, 3])
@pytest.mark.parametrize("keep", [1000, 7])
def test_partitions_give_the_in_process_outcomes(client, small, spans, npartitions, keep):
    _t, src, checks = small
    expected = _in_process(src, checks, keep)
    assert expected[2].failed == 0 and min(o.failed for o in expected[:2]) > 7
    if keep == 7:  # the first 7 rows of each failing check, out of more
        assert [o.kept for o in expected] == [7, 7, 0]
    else:
        assert {r["variant"] for r in expected[0].table().to_pylist()} == {"chat", "rag", "tight"}
        assert any(r["error"] for r in expected[1].table().to_pylist())  # run errors are rows too
    got = cdask.check(src, checks, client=client, npartitions=npartitions, keep=keep)
    assert spans == [npartitions > 1]  # several partitions of this file split sets: shuffled
    _assert_same(got, expected)


def test_random_row_order_over_files(client, small, tmp_path, spans):
    """Every set spans the five files; failures still come in the whole run's order."""
    t, _src, checks = small
    t = t.take(pa.array(np.random.default_rng(3).permutation(t.num_rows)))
    cuts = np.linspace(0, t.num_rows, 6).astype(int)
    for i in range(5):
        pq.write_table(t.slice(cuts[i], cuts[i + 1] - cuts[i]), tmp_path / f"part-{i}.parquet")
    got = cdask.check(tmp_path, load_checks(checks), set_column="session_id", client=client, keep=10)
    assert spans == [True]
    _assert_same(got, _in_process(tmp_path, checks, keep=10))


def test_dask_dataframe_source(client, small, spans):
    """A dask DataFrame of four partitions cut mid-set, read with Arrow-backed dtypes."""
    import dask.dataframe as dd

    _t, src, checks = small
    ddf = dd.read_parquet(src, dtype_backend="pyarrow", split_row_groups=3)
    assert ddf.npartitions > 1
    got = cdask.check(ddf, checks, client=client)
    assert spans == [True]
    _assert_same(got, _in_process(src, checks))


def _run(capsys, *argv):
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _junit(path: Path) -> bytes:
    return re.sub(rb' time="[0-9.]+"', b"", path.read_bytes())


def test_cli_dask_prints_and_writes_what_the_in_process_run_does(client, small, tmp_path, capsys):
    t, _src, checks = small
    d = tmp_path / "split"  # sorted rows cut into files mid-set
    d.mkdir()
    for i, (lo, hi) in enumerate([(0, 333), (333, 900), (900, t.num_rows)]):
        pq.write_table(t.slice(lo, hi - lo), d / f"f{i}.parquet")
    a, b = tmp_path / "a.xml", tmp_path / "b.xml"
    code, whole, _ = _run(capsys, "check", d, "--checks", checks, "--junit", a, "--max-rows", "1000")
    code2, dask, err = _run(
        capsys, "check", d, "--checks", checks, "--junit", b, "--max-rows", "1000", "--dask", client.scheduler.address
    )
    assert code == code2 == 1, err
    assert dask == whole and "FAIL  memories are never dropped" in whole
    assert _junit(a) == _junit(b)
    assert ET.parse(b).getroot().find("testsuite").get("failures") == "2"
    code, whole, _ = _run(capsys, "check", d, "--checks", checks, "--json")
    code2, dask, _ = _run(capsys, "check", d, "--checks", checks, "--json", "--dask", client.scheduler.address)
    assert code == code2 == 1 and dask == whole


def test_cli_dask_exits_0_when_every_check_passes(client, small, tmp_path, capsys):
    _t, src, _checks = small
    code, out, err = _run(capsys, "check", src, "--checks", EXAMPLE, "--dask", client.scheduler.address)
    assert code == 0, out + err
    assert out.splitlines()[-1] == "9 checks: 9 passed, 0 failed"
    assert out == _run(capsys, "check", src, "--checks", EXAMPLE)[1]


def test_cli_dask_bad_input_exits_2(client, small, tmp_path, capsys):
    _t, src, checks = small
    no_set = tmp_path / "no_set.toml"
    no_set.write_text(CHECKS.replace('set_column = "session_id"\n', ""))
    address = client.scheduler.address
    code, _, err = _run(capsys, "check", src, "--checks", no_set, "--dask", address)
    assert code == 2 and "--dask needs --set-column" in err
    code, _, err = _run(capsys, "check", src, "--checks", checks, "--set-column", "nope", "--dask", address)
    assert code == 2 and "set column 'nope' not found" in err
    code, _, err = _run(capsys, "check", src, "--checks", checks, "--dask", "nowhere")
    assert code == 2 and "--dask takes local" in err
    bad = tmp_path / "bad.toml"
    bad.write_text(CHECKS.replace('kind = "Memory"', 'knd = "Memory"'))
    code, _, err = _run(capsys, "check", src, "--checks", bad, "--dask", address)
    assert code == 2 and "unknown key(s) 'knd'" in err
    with pytest.raises(InvalidConfigError, match="needs a set column"):
        cdask.check(src, load_checks(no_set), client=client)


def test_streamed_chunks_list_failures_in_the_whole_runs_order(small, capsys):
    """Chunks of whole sets used to list a check's failures chunk by chunk (chat, rag, tight of
    the first chunk, then of the next): now by variant, then set, as the whole run does."""
    _t, src, checks = small
    code, whole, _ = _run(capsys, "check", src, "--checks", checks, "--max-rows", "1000")
    code2, chunked, _ = _run(capsys, "check", src, "--checks", checks, "--max-rows", "1000", "--chunk-rows", "150")
    assert code == code2 == 1
    assert chunked == whole


def test_a_test_on_the_cluster_is_bounded_in_time(client, request):
    """A test using the cluster carries the suite's timeout (tests/conftest.py): a hung
    gather fails the test instead of stalling the run."""
    from conftest import DASK_TEST_TIMEOUT

    marker = request.node.get_closest_marker("timeout")
    assert marker is not None and marker.args == (DASK_TEST_TIMEOUT,)
    assert request.config.pluginmanager.hasplugin("timeout")
