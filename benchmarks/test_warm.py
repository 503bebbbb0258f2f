"""A Dask sweep on a machine whose Numba cache is empty (a new host): the first task's latency
on each cold worker without and with the warm-up (``cupel_np.io.dask.sweep(warm=...)``).
Opt-in (about a minute per mode; every mode compiles from nothing once):

    CUPEL_BENCH_WARM=1 .venv/bin/python -m pytest benchmarks/test_warm.py -s

Each mode runs in a fresh interpreter with ``NUMBA_CACHE_DIR`` set to a new empty directory
(which the workers inherit), on a LocalCluster of ``CUPEL_BENCH_WORKERS`` (default 2)
single-threaded worker processes, sweeping the sample corpus (300 sessions, cut at set
boundaries into 2 files per worker, so every worker runs sweep tasks) with 4 presets. Reported per mode: the wall time of the run, the warm-up's time on
each worker (the first compiles while the others wait for the host lock, then load the
cache), the first sweep task's duration on each worker and how many sweep tasks each ran
(``get_task_stream``), and the CPU seconds all workers spent; then the table of
docs/scaling-out.md ("Warm workers") with the commit and the load average.
"""

import json
import os
import subprocess
import sys
import tempfile

import pytest

WORKERS = int(os.environ.get("CUPEL_BENCH_WORKERS", 2))

pytestmark = pytest.mark.skipif(
    os.environ.get("CUPEL_BENCH_WARM") != "1", reason="set CUPEL_BENCH_WARM=1 (compiles from nothing, minutes)"
)

RUN = r"""
import json, sys, time
import cupel_np as c
from cupel_np.data import sample_path
from cupel_np.io import dask as cdask
from distributed import Client, LocalCluster, get_task_stream


def main():

    warm = sys.argv[1] == "1"
    workers = int(sys.argv[2])
    out = sys.argv[3]
    variants = [(p, c.preset(p)) for p in ("chat", "rag", "document_qa", "long_running")]
    # the sample cut at set boundaries into 2 files per worker: every worker gets sweep tasks
    import os, pyarrow as pa, pyarrow.parquet as pq
    t = pq.read_table(sample_path())
    keys = t.column("session_id").to_pylist()
    order = list(dict.fromkeys(keys))
    n = 2 * workers
    src = out + "-in"
    os.makedirs(src)
    for i in range(n):
        mine = set(order[i * len(order) // n:(i + 1) * len(order) // n])
        pq.write_table(t.take(pa.array([r for r, k in enumerate(keys) if k in mine])), f"{src}/part-{i}.parquet")
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0") as cl, Client(cl) as client:
        client.wait_for_workers(workers)
        t0 = time.perf_counter()
        with get_task_stream(client) as ts:
            s = cdask.sweep(src, c.ContextBudget(8000, 6000, 1000), variants, set_column="session_id",
                            out_dir=out, client=client, warm=warm)
        wall = time.perf_counter() - t0
        cpu = sum(client.run(lambda: __import__("resource").getrusage(__import__("resource").RUSAGE_SELF).ru_utime
                             + __import__("resource").getrusage(__import__("resource").RUSAGE_SELF).ru_stime).values())
    first = {}
    warmups = {}
    per_worker = {}
    for t in sorted(ts.data, key=lambda t: t["startstops"][0]["start"]):
        compute = [x for x in t["startstops"] if x["action"] == "compute"]
        if not compute:
            continue
        dur = compute[0]["stop"] - compute[0]["start"]
        if str(t["key"]).startswith("cupel-warm"):
            warmups[t["worker"]] = round(dur, 2)
        elif "_traced_partition" in str(t["key"]):
            per_worker[t["worker"]] = per_worker.get(t["worker"], 0) + 1
            first.setdefault(t["worker"], round(dur, 2))
    print(json.dumps({"warm": warm, "workers": workers, "wall": round(wall, 2), "warm_seconds": s["warm_seconds"],
                      "warmups": sorted(warmups.values()), "first_task": sorted(first.values()), "sweep_tasks_per_worker": sorted(per_worker.values()),
                      "worker_cpu": round(cpu, 1), "rows": s["rows"]}))


if __name__ == "__main__":
    main()
"""


def _mode(warm: bool) -> dict:
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as out:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache}
        r = subprocess.run(
            [sys.executable, "-c", RUN, "1" if warm else "0", str(WORKERS), os.path.join(out, "o")],
            env=env,
            capture_output=True,
            text=True,
            timeout=1800,
        )
        assert r.returncode == 0, r.stderr[-3000:]
        return json.loads(r.stdout.strip().splitlines()[-1])


def _commit() -> str:
    r = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=os.path.dirname(__file__)
    )
    return r.stdout.strip() or "?"


def test_first_task_latency_on_cold_workers_without_and_with_the_warm_up():
    load0 = os.getloadavg()[0]
    rows = [_mode(False), _mode(True)]
    load1 = os.getloadavg()[0]
    for r in rows:
        print(json.dumps(r))
    # the docs' table (docs/scaling-out.md, "Warm workers"): one line per mode
    print(f"commit {_commit()}, {os.cpu_count()} cores, load average {load0:.1f} -> {load1:.1f}")
    print(
        "| mode | warm-up per worker s | first task per worker s | sweep tasks per worker | run wall s | worker CPU s |"
    )
    for r in rows:
        print(
            f"| {'warm-up' if r['warm'] else 'no warm-up'} | {', '.join(map(str, r['warmups'])) or '-'} | "
            f"{', '.join(map(str, r['first_task']))} | {', '.join(map(str, r['sweep_tasks_per_worker']))} | "
            f"{r['wall']} | {r['worker_cpu']} |"
        )
    cold, warm = rows
    assert cold["rows"] == warm["rows"]
    # with the warm-up every first task runs on loaded kernels: far under the cold compile
    assert max(warm["first_task"]) < min(cold["first_task"])
