"""What a billion rows cost: the measurements behind docs/scaling-out.md's plan, and a simulated
run of the Dask driver over a billion-row partition plan. A script (minutes, GBs), not a test:

    .venv/bin/python benchmarks/billion.py partition --rows 1000000 --variants 8
    .venv/bin/python benchmarks/billion.py efficiency --rows 2000000 --variants 8 --partitions 4
    .venv/bin/python benchmarks/billion.py simulate --rows 1000000000 --partition-rows 1000000 \\
        --task-seconds 20 --workers 64 --time-scale 0.001

* ``partition``: one Dask task's work on one partition of ROWS rows (sets of 50, the corpus of
  ``benchmarks/test_dask.py``: ~35 bytes a row on disk), in a fresh process: read the Parquet
  piece, build the ItemTable, sweep VARIANTS weight variants (greedy, chronological), write the
  items / diffs / variants parts. Prints seconds (read, sweep, write), the peak RSS of the
  process (``ru_maxrss``) and the bytes written.
* ``efficiency``: ``cupel_np.dask.sweep`` over ROWS rows in PARTITIONS files on a LocalCluster
  of 1 and then 2 single-threaded workers (warm: the kernels are compiled first): wall seconds
  and the parallel efficiency T1 / (2 x T2).
* ``simulate``: the real driver (``cupel_np.dask.sweep``) over a synthetic plan of ROWS rows in
  partitions of PARTITION_ROWS rows, whose tasks sleep for TASK_SECONDS x TIME_SCALE each and
  return a partition summary, on WORKERS worker threads (one process): the task count, the
  time to plan, the driver's peak RSS and the scheduler's throughput. Only the Parquet
  metadata reads, the key scan and the partition work are replaced; the graph, the scheduling,
  the gathering of summaries and the manifest are the driver's own.

Every mode prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SET_SIZE = 50


def _variants(n: int):
    import numpy as np

    import cupel_np as c

    base = [c.RecencyScorer(), c.PriorityScorer(), c.KindScorer(), c.ReflexiveScorer()]
    rng = np.random.default_rng(1)
    return [(f"v{i}", c.Policy(c.CompositeScorer(tuple(zip(base, rng.uniform(0.1, 1.0, 4)))))) for i in range(n)]


def _corpus(path: Path, rows: int, files: int = 1, seed: int = 11) -> None:
    """ROWS rows in sets of 50, contiguous, cut into FILES files."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    sid = np.repeat(np.arange(rows // SET_SIZE + 1, dtype=np.int64), SET_SIZE)[:rows]
    pos = np.tile(np.arange(SET_SIZE, dtype=np.int64), rows // SET_SIZE + 1)[:rows]
    kinds = pa.array(["Message", "ToolOutput", "Document", "Memory", "message"])
    path.mkdir(parents=True, exist_ok=True)
    cuts = np.linspace(0, rows, files + 1).astype(np.int64)
    cuts = [int(c - c % SET_SIZE) if 0 < i < files else int(c) for i, c in enumerate(cuts)]
    for f in range(files):
        lo, hi = cuts[f], cuts[f + 1]
        n = hi - lo
        s, p = sid[lo:hi], pos[lo:hi]
        content = pc.binary_join_element_wise(
            "session ",
            pa.array(s).cast(pa.string()),
            " turn ",
            pa.array(p).cast(pa.string()),
            pa.array(rng.integers(0, 10**9, n)).cast(pa.string()),
            " ...tool output and notes",
            "",
        )
        t = pa.table(
            {
                "session_id": s,
                "content": content,
                "tokens": rng.integers(1, 400, n),
                "kind": kinds.take(pa.array(rng.integers(0, 5, n))),
                "priority": pa.array(rng.integers(0, 100, n), mask=rng.random(n) < 0.5),
                "timestamp": pa.array(
                    (1_700_000_000_000_000 + s * 10**9 + p * 10**6).astype("datetime64[us]"),
                    pa.timestamp("us", tz="UTC"),
                ),
                "pinned": p == 0,
            }
        )
        pq.write_table(t, path / f"part-{f:03d}.parquet", row_group_size=200_000)


def _peak() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


# ----------------------------------------------------------------------------- partition
def _partition_child(src: str, out: str, n_variants: int) -> dict:
    import cupel_np as c
    from cupel_np.io.parquet import _variants_metadata, write_parquet_atomic

    vs = _variants(n_variants)
    budget = c.ContextBudget(8000, 6000)
    base = _peak()
    t0 = time.perf_counter()
    table = c.ItemTable.from_parquet(src, set_column="session_id")
    t1 = time.perf_counter()
    res = c.sweep(table, budget, vs, threads=1)
    t2 = time.perf_counter()
    meta = _variants_metadata(res.variants)
    written = 0
    for name, part in (("diffs", res.diffs_table()), ("variants", res.variants_table()), ("items", res.items_table())):
        p = write_parquet_atomic(part, Path(out) / name / "part-00000.parquet", meta)
        written += os.path.getsize(p)
    t3 = time.perf_counter()
    return {
        "rows": table.n,
        "variants": n_variants,
        "read_s": round(t1 - t0, 2),
        "sweep_s": round(t2 - t1, 2),
        "write_s": round(t3 - t2, 2),
        "task_s": round(t3 - t0, 2),
        "peak_rss_gib": round(_peak() / 2**30, 3),
        "rss_before_gib": round(base / 2**30, 3),
        "input_bytes": os.path.getsize(src),
        "output_bytes": written,
    }


def cmd_partition(a) -> dict:
    with tempfile.TemporaryDirectory() as d:
        _corpus(Path(d) / "in", a.rows)
        src = str(Path(d) / "in" / "part-000.parquet")
        # compile first (the measured process then loads the kernels from the cache)
        subprocess.run(
            [sys.executable, __file__, "_warm", "--variants", str(a.variants)], check=True, env=_env(), cwd=ROOT
        )
        code = f"import json, sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import billion; "
        code += f"print(json.dumps(billion._partition_child({src!r}, {str(Path(d) / 'out')!r}, {a.variants})))"
        r = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, env=_env())
        return json.loads(r.stdout.strip().splitlines()[-1])


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def cmd_warm(a) -> dict:
    import cupel_np as c
    from cupel_np.data import sample_path

    c.sweep(c.ItemTable.from_parquet(sample_path(), set_column="session_id"), c.ContextBudget(8000, 6000), _variants(2))
    return {"warm": True}


# ----------------------------------------------------------------------------- efficiency
def _worker_cpu() -> dict:
    """This worker process's CPU seconds (user + system) and the threads it runs."""
    import threading

    r = resource.getrusage(resource.RUSAGE_SELF)
    return {"cpu": r.ru_utime + r.ru_stime, "threads": threading.active_count()}


def _worker_limits() -> dict:
    """What could oversubscribe a worker's core: pyarrow's CPU pool, Numba's threads, BLAS."""
    import numba
    import pyarrow as pa

    return {
        "arrow_cpu": pa.cpu_count(),
        "arrow_io": pa.io_thread_count(),
        "numba": numba.get_num_threads(),
        "omp": os.environ.get("OMP_NUM_THREADS"),
    }


def _idle_cpu(client, seconds: float = 5.0) -> float:
    """The CPU seconds a second an idle worker spends (Dask's event loop, heartbeats, memory
    monitor): a per-worker cost that grows with the wall time, whatever the work."""
    a = client.run(_worker_cpu)
    t0 = time.perf_counter()
    time.sleep(seconds)
    b = client.run(_worker_cpu)
    dt = time.perf_counter() - t0
    return round(sum(b[w]["cpu"] - a[w]["cpu"] for w in a) / len(a) / dt, 4)


def _accounting(ts: list, wall: float, workers: int) -> dict:
    """From a task stream: the sweep tasks' summed compute time, the transfer time, and the
    workers' idle share of the wall time (the scheduler not keeping them busy)."""
    compute = transfer = 0.0
    busy: dict = {}
    for t in ts:
        for x in t["startstops"]:
            d = x["stop"] - x["start"]
            if x["action"] == "compute":
                compute += d
                busy[t["worker"]] = busy.get(t["worker"], 0.0) + d
            elif x["action"] == "transfer":
                transfer += d
    return {
        "compute_s": round(compute, 2),
        "transfer_s": round(transfer, 3),
        "idle_share": round(1 - sum(busy.values()) / (workers * wall), 3),
        "tasks": len(ts),
    }


def _timed_run(client, workers: int, src: Path, out: Path, budget, vs) -> dict:
    """One timed ``cupel_np.dask.sweep`` on warm workers, with its CPU accounting."""
    from distributed import get_task_stream

    from cupel_np.io import dask as cdask

    cpu0 = client.run(_worker_cpu)
    drv0 = time.process_time()
    t0 = time.perf_counter()
    with get_task_stream(client) as ts:
        s = cdask.sweep(src, budget, vs, set_column="session_id", out_dir=out, client=client, warm=False)
    wall = time.perf_counter() - t0
    drv = time.process_time() - drv0
    cpu1 = client.run(_worker_cpu)
    worker_cpu = sum(cpu1[w]["cpu"] - cpu0[w]["cpu"] for w in cpu1)
    return {
        "wall_s": round(wall, 2),
        "worker_cpu_s": round(worker_cpu, 2),
        "worker_cpu_per_wall": round(worker_cpu / wall, 2),  # <= workers, else oversubscribed
        "driver_cpu_s": round(drv, 2),
        "task_s": s["task_seconds"],
        "plan_s": s["plan_seconds"],
        "partitions": s["partitions"],
        **_accounting(ts.data, wall, workers),
    }


def cmd_efficiency(a) -> dict:
    """Parallel efficiency 1 -> 2 workers, with the CPU accounting that explains it. Each
    worker count runs on its own LocalCluster of single-threaded worker processes, warmed
    first (kernels compiled or loaded, outside the timing); then ``--repeats`` timed runs of
    1 and 2 workers interleave, and the medians give T1, T2 and T1 / (2 T2)."""
    import statistics

    from distributed import Client, LocalCluster

    import cupel_np as c
    from cupel_np.io import dask as cdask

    vs = _variants(a.variants)
    budget = c.ContextBudget(8000, 6000)
    out: dict = {
        "rows": a.rows,
        "variants": a.variants,
        "partitions": a.partitions,
        "cores": len(os.sched_getaffinity(0)),
        "load_avg_start": [round(x, 2) for x in os.getloadavg()],
    }
    runs: dict = {1: [], 2: []}
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "in"
        _corpus(src, a.rows, files=a.partitions)
        clusters = {}
        try:
            for workers in (1, 2):
                cl = LocalCluster(
                    n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0", memory_limit=0
                )
                client = Client(cl)
                client.wait_for_workers(workers)
                clusters[workers] = (cl, client)
                cdask.sweep(  # warm every worker outside the timing
                    str(src / "part-000.parquet"),
                    budget,
                    vs,
                    set_column="session_id",
                    out_dir=Path(d) / f"w{workers}",
                    client=client,
                    npartitions=workers,
                )
                out[f"limits_{workers}"] = client.run(_worker_limits)
                out[f"idle_cpu_per_worker_s_per_s_{workers}"] = _idle_cpu(client)
            for r in range(a.repeats):
                for workers in (1, 2):
                    client = clusters[workers][1]
                    runs[workers].append(_timed_run(client, workers, src, Path(d) / f"o{workers}-{r}", budget, vs))
        finally:
            for cl, client in clusters.values():
                client.close()
                cl.close()
    for workers in (1, 2):
        out[f"runs_{workers}"] = runs[workers]
        out[f"wall_{workers}"] = statistics.median(x["wall_s"] for x in runs[workers])
        out[f"worker_cpu_{workers}"] = statistics.median(x["worker_cpu_s"] for x in runs[workers])
    out["efficiency"] = round(out["wall_1"] / (2 * out["wall_2"]), 3)
    # the same ratio in CPU seconds: below 1 when two workers side by side need more CPU for the
    # same work (cache and memory-bandwidth contention, oversubscription) - not the machine's load
    out["cpu_efficiency"] = round(out["worker_cpu_1"] / out["worker_cpu_2"], 3)
    out["load_avg_end"] = [round(x, 2) for x in os.getloadavg()]
    return out


# ----------------------------------------------------------------------------- simulate
def _sleeping_partition(df, index, budget, variants, set_column, on_error, out_dir, carrier, rows_from, label):
    time.sleep(df)  # the "frame" is the task's sleep time
    labels = [v.label for v in variants]
    return {
        "partition": index,
        "rows": PARTITION_ROWS,
        "sets": PARTITION_ROWS // SET_SIZE,
        "swing": 0,
        "failed": dict.fromkeys(labels, 0),
        "seconds": df,
        "written": True,
    }


PARTITION_ROWS = 1_000_000


def cmd_simulate(a) -> dict:
    import dask
    from distributed import Client, LocalCluster

    import cupel_np as c
    from cupel_np.io import dask as cdask

    global PARTITION_ROWS
    PARTITION_ROWS = a.partition_rows
    cdask.require_dask()  # the imports (dask.dataframe: seconds) before the clock starts
    n_parts = -(-a.rows // a.partition_rows)
    sleep = a.task_seconds * a.time_scale
    rss0 = _peak()

    def plan(source, set_column, client, *, npartitions=None, variants=(), columns=()):
        # the plan a billion-row dataset gives: one delayed partition per piece, none shuffled
        # (whole sets per partition); each partition's "frame" is its task's sleep time
        parts = [dask.delayed(float)(sleep, dask_key_name=f"frame-{i}") for i in range(n_parts)]
        return parts, False, None

    cdask.whole_set_partitions = plan  # the metadata reads and the key scan replaced
    cdask._traced_partition = _sleeping_partition
    with (
        LocalCluster(n_workers=1, threads_per_worker=a.workers, processes=False, dashboard_address=":0") as cl,
        Client(cl) as client,
        tempfile.TemporaryDirectory() as d,
    ):
        t0 = time.perf_counter()
        s = cdask.sweep(
            "synthetic",
            c.ContextBudget(8000, 6000),
            _variants(a.variants),
            set_column="session_id",
            out_dir=Path(d) / "o",
            client=client,
            warm=False,
        )
        wall = time.perf_counter() - t0
    ideal = n_parts * sleep / a.workers
    return {
        "rows": a.rows,
        "partition_rows": a.partition_rows,
        "tasks": n_parts,
        "workers": a.workers,
        "task_sleep_s": sleep,
        "wall_s": round(wall, 2),
        "ideal_s": round(ideal, 2),
        "scheduler_overhead_s": round(wall - ideal, 2),
        "plan_s": s["plan_seconds"],
        "driver_peak_rss_gib": round(_peak() / 2**30, 3),
        "driver_rss_before_gib": round(rss0 / 2**30, 3),
        "summary_rows": s["rows"],
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    q = sub.add_parser("partition")
    q.add_argument("--rows", type=int, default=1_000_000)
    q.add_argument("--variants", type=int, default=8)
    q = sub.add_parser("_warm")
    q.add_argument("--variants", type=int, default=8)
    q = sub.add_parser("efficiency")
    q.add_argument("--rows", type=int, default=2_000_000)
    q.add_argument("--variants", type=int, default=8)
    q.add_argument("--partitions", type=int, default=4)
    q.add_argument("--repeats", type=int, default=3)
    q = sub.add_parser("simulate")
    q.add_argument("--rows", type=int, default=1_000_000_000)
    q.add_argument("--partition-rows", type=int, default=1_000_000)
    q.add_argument("--task-seconds", type=float, default=20.0)
    q.add_argument("--time-scale", type=float, default=0.001)
    q.add_argument("--workers", type=int, default=64)
    q.add_argument("--variants", type=int, default=8)
    a = p.parse_args(argv)
    fn = {"partition": cmd_partition, "_warm": cmd_warm, "efficiency": cmd_efficiency, "simulate": cmd_simulate}[a.cmd]
    print(json.dumps(fn(a)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
