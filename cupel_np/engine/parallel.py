"""The one thread pool the engine runs on.

Variants of a sweep are independent, and every kernel is ``nogil``, so they run concurrently
on plain threads; NumPy's sorts release the GIL too. So does the work a sweep does once before
its variants (the shared timestamp order, each base score column, the duplicate groups): one
task each on the same pool. There is no second mechanism (no numba ``prange``), so nothing
oversubscribes. Each worker owns its scratch buffers; every task writes only its own output
(a variant its own rows of the result matrices), so the answer is the same for any thread
count and any assignment of tasks to workers.

``threads``: an explicit argument wins, then ``CUPEL_NP_THREADS``, then the number of cores
the process may use (``os.sched_getaffinity``). A caller that is itself a worker of a pool
(a Dask task) passes its own share.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from cupel_np._cores import available_cores
from cupel_np.errors import InvalidConfigError

#: a worker's own state (scratch buffers), made once per worker
S = TypeVar("S")

ENV = "CUPEL_NP_THREADS"

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_pool_size = 0
_inside = threading.local()


def resolve_threads(threads: int | None = None) -> int:
    """The thread count to use (validated)."""
    if threads is None:
        env = os.environ.get(ENV, "").strip()
        if not env:
            return available_cores()
        try:
            threads = int(env)
        except ValueError:
            raise InvalidConfigError(f"{ENV} must be a positive integer, got {env!r}") from None
        if threads < 1:
            raise InvalidConfigError(f"{ENV} must be a positive integer, got {env!r}")
        return threads
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise InvalidConfigError(f"threads must be a positive integer, got {threads!r}")
    return threads


#: a sweep with fewer item-variants than this runs on the calling thread whatever ``threads``
#: says: handing its tasks to the pool and waiting for them costs more than the work (one
#: selection of 50 items: ~0.1-0.3 ms of thread hand-offs against ~0.05 ms of kernels). The
#: result is the same for any thread count, so this changes only the time.
INLINE_WORK = 4096


def threads_for(threads: int | None, work: int) -> int:
    """``resolve_threads(threads)``, or 1 when ``work`` (item-variants) is too small to share."""
    n = resolve_threads(threads)
    return 1 if work < INLINE_WORK else n


def _get_pool(size: int) -> ThreadPoolExecutor:
    global _pool, _pool_size
    with _lock:
        if _pool is None or _pool_size < size:
            old = _pool
            _pool = ThreadPoolExecutor(max_workers=size, thread_name_prefix="cupel_np")
            _pool_size = size
            if old is not None:
                old.shutdown(wait=False)
        return _pool


def run_tasks(n_tasks: int, threads: int, make_worker_state: Callable[[], S], task: Callable[[int, S], None]) -> None:
    """Run ``task(i, state)`` for ``i in range(n_tasks)`` on at most ``threads`` workers, each
    with its own ``state = make_worker_state()``. Tasks are handed out in index order; the
    first exception (by task index) is raised after every worker stopped."""
    workers = min(threads, n_tasks)
    if workers <= 1 or getattr(_inside, "worker", False):  # never wait on our own pool
        state = make_worker_state()
        for i in range(n_tasks):
            task(i, state)
        return
    nxt = iter(range(n_tasks))
    take = threading.Lock()
    failed: dict[int, BaseException] = {}

    def work():
        _inside.worker = True
        state = make_worker_state()
        while True:
            with take:
                if failed:
                    return
                i = next(nxt, None)
            if i is None:
                return
            try:
                task(i, state)
            except BaseException as e:  # noqa: BLE001 - re-raised in the caller
                with take:
                    failed[i] = e
                return

    pool = _get_pool(workers)
    futures = [pool.submit(work) for _ in range(workers)]
    for f in futures:
        f.result()
    if failed:
        raise failed[min(failed)]
