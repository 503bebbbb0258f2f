"""What every Dask worker of a cupel_np run is given before its first task: this process's
storage options (``--storage-option``; the workers' own environment gives the rest), and warm
kernels, compiled once per host (``warm_kernels``). Imported only with Dask installed
(``cupel_np.io.dask`` imports it on use)."""

from __future__ import annotations

import hashlib
import json

from distributed.diagnostics.plugin import WorkerPlugin

from cupel_np import _fs


class StorageOptions(WorkerPlugin):
    """Sets the driver's storage options on each worker, those that join later included. The
    options travel over Dask's own connection and are held in memory only: never logged."""

    idempotent = True

    def __init__(self, options: dict[str, str]):
        self.options = dict(options)

    def setup(self, worker) -> None:
        _fs.configure(self.options)


def share_storage_options(client) -> None:
    """Register the driver's storage options on ``client``'s workers (nothing when none are
    set). The plugin's name is a digest of the options, so other options register anew."""
    options = _fs.current_options()
    if not options:
        return
    digest = hashlib.sha256(json.dumps(options, sort_keys=True).encode()).hexdigest()[:16]
    client.register_plugin(StorageOptions(options), name=f"cupel-np-storage-{digest}")


# ----------------------------------------------------------------------------- warm once per host
#: set in a worker process once its kernels are warm (a later run's warm-up is then free)
_WARM: dict[str, float] = {}


def _lock_path() -> str:
    """The per-host lock file the warm-ups take in turn: in ``NUMBA_CACHE_DIR`` when set (the
    cache they share), else the temp directory."""
    import os
    import tempfile

    base = os.environ.get("NUMBA_CACHE_DIR") or tempfile.gettempdir()
    os.makedirs(base, exist_ok=True)
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return os.path.join(base, f".cupel_np-warm-{uid}.lock")


def warm_kernels(budget, variants) -> dict:
    """Compile (or load from Numba's cache) the kernels a sweep of ``variants`` needs, by
    sweeping them over two sets of the sample corpus, holding a per-host file lock: on a new
    machine the first worker compiles and writes the cache while the others wait, then they load
    it (about a second each) instead of each compiling for ~15 s. Best effort: any failure
    (a custom scorer's column the sample lacks...) leaves the kernels to the first task."""
    import os
    import socket
    import time

    t0 = time.perf_counter()
    if _WARM:
        return {"host": socket.gethostname(), "pid": os.getpid(), "waited": 0.0, "seconds": 0.0, "again": True}
    waited = 0.0
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: no lock, each worker warms itself
        fcntl = None  # type: ignore[assignment]
    lock = None
    if not _cache_present():  # a warm cache is loaded by every worker at once, no lock needed
        try:
            lock = open(_lock_path(), "a+")  # noqa: SIM115 - held across the warm-up, closed below
        except OSError:  # nowhere to put the lock (a read-only temp dir): warm without it
            lock = None
    try:
        if fcntl is not None and lock is not None:
            fcntl.flock(lock, fcntl.LOCK_EX)
        waited = time.perf_counter() - t0
        _warm_sweep(budget, variants)
    except Exception:  # a warm-up never fails a run: the first task compiles what is left
        pass
    finally:
        if lock is not None:
            lock.close()  # releases the lock
    _WARM["seconds"] = time.perf_counter() - t0
    return {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "waited": round(waited, 3),
        "seconds": round(_WARM["seconds"], 3),
        "again": False,
    }


def _cache_present() -> bool:
    """Whether Numba's on-disk cache already holds the kernels every sweep needs (then the
    workers load it side by side; only a cold cache is worth taking turns for)."""
    import os

    if os.environ.get("NUMBA_DISABLE_JIT") == "1":
        return True
    from cupel_np.engine import batch_kernels

    try:
        return os.path.exists(batch_kernels.variant_scores._cache._cache_file._index_path)
    except AttributeError:  # another Numba version's internals: take the lock to be safe
        return False


def _warm_sweep(budget, variants) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from cupel_np.analysis.sensitivity import sweep
    from cupel_np.data import sample_path
    from cupel_np.model.items import ItemTable

    t = pq.read_table(sample_path())
    keys = t.column("session_id").to_pylist()
    first = set(list(dict.fromkeys(keys))[:2])
    t = t.take(pa.array([i for i, k in enumerate(keys) if k in first]))
    table = ItemTable.from_arrow(t, set_column="session_id")
    sweep(table, budget, variants, on_error="collect", progress=False, threads=1)


def submit_warm_ups(client, budget, variants) -> list:
    """One warm-up task per worker (pinned to it), submitted before the run's own tasks; the
    caller waits for them before it computes the partitions."""
    import uuid

    run = uuid.uuid4().hex[:8]
    info = client.scheduler_info(n_workers=-1) if _takes_n_workers(client) else client.scheduler_info()
    workers = list(info["workers"])
    return [
        client.submit(
            warm_kernels,
            budget,
            variants,
            workers=[w],
            allow_other_workers=False,
            pure=False,
            key=f"cupel-warm-{run}-{i}",
        )
        for i, w in enumerate(workers)
    ]


def _takes_n_workers(client) -> bool:
    import inspect

    return "n_workers" in inspect.signature(client.scheduler_info).parameters
