"""Warm once per host: a worker's warm-up takes the host's lock file in turn (the first
compiles and writes Numba's cache, the others wait, then load it), runs once per process,
never fails a run, and a Dask sweep warms every worker before its first task."""

import threading
import time

import pytest

pytest.importorskip("distributed")
import fcntl  # noqa: E402

import cupel_np as c  # noqa: E402
from cupel_np.io import _workers  # noqa: E402

BUDGET = c.ContextBudget(8000, 6000, 1000)
VARIANTS = [("chat", c.preset("chat")), ("rag", c.preset("rag"))]


def test_a_warm_up_waits_for_the_host_lock_then_runs_once_per_process(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))  # where the lock file goes
    monkeypatch.setattr(_workers, "_WARM", {})
    monkeypatch.setattr(_workers, "_cache_present", lambda: False)  # a new host: nothing cached yet
    assert _workers._lock_path().startswith(str(tmp_path))
    done: list[dict] = []
    with open(_workers._lock_path(), "a+") as held:  # another worker of this host is compiling
        fcntl.flock(held, fcntl.LOCK_EX)
        t = threading.Thread(target=lambda: done.append(_workers.warm_kernels(BUDGET, VARIANTS)))
        t.start()
        time.sleep(0.6)
        assert t.is_alive() and not done  # waiting for the lock, not compiling beside it
        fcntl.flock(held, fcntl.LOCK_UN)
    t.join(120)
    assert done[0]["waited"] >= 0.5 and done[0]["again"] is False
    assert _workers.warm_kernels(BUDGET, VARIANTS)["again"] is True  # once per process


def test_a_warm_cache_is_loaded_without_waiting_for_the_lock(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(_workers, "_WARM", {})
    monkeypatch.setattr(_workers, "_cache_present", lambda: True)
    with open(_workers._lock_path(), "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        out = _workers.warm_kernels(BUDGET, VARIANTS)  # would block forever if it took the lock
    assert out["waited"] < 5 and out["again"] is False


def test_a_failing_warm_up_never_fails_the_run(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(_workers, "_WARM", {})

    def broken(budget, variants):
        raise RuntimeError("no sample here")

    monkeypatch.setattr(_workers, "_warm_sweep", broken)
    assert _workers.warm_kernels(BUDGET, VARIANTS)["again"] is False


def test_a_dask_sweep_warms_every_worker_before_its_tasks(tmp_path):
    from distributed import Client, LocalCluster, get_task_stream

    from cupel_np.data import sample_path
    from cupel_np.io import dask as cdask

    with (
        LocalCluster(processes=True, n_workers=2, threads_per_worker=1, dashboard_address=":0") as cluster,
        Client(cluster) as client,
    ):
        client.wait_for_workers(2)
        with get_task_stream(client) as ts:
            s = cdask.sweep(
                sample_path(), BUDGET, VARIANTS, set_column="session_id", out_dir=tmp_path / "o", client=client
            )
        workers = set(client.scheduler_info()["workers"])
    assert s["warm_seconds"] > 0
    starts: dict[str, dict[str, float]] = {}
    for task in ts.data:
        kind = "warm" if str(task["key"]).startswith("cupel-warm") else "other"
        begin = min(x["start"] for x in task["startstops"])
        end = max(x["stop"] for x in task["startstops"])
        w = starts.setdefault(task["worker"], {})
        if kind == "warm":
            w["warm_end"] = end
        elif "_traced_partition" in str(task["key"]):
            w["first_task"] = min(w.get("first_task", begin), begin)
    assert set(starts) == workers
    for w, times in starts.items():
        assert "warm_end" in times, w
        if "first_task" in times:
            assert times["first_task"] >= times["warm_end"], w
