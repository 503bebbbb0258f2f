"""Sweeps past one machine: Dask drives, the in-process engine computes.

``sweep(source, budget, variants, set_column=..., out_dir=...)`` splits a Parquet dataset (or
a Dask DataFrame) into partitions of whole item sets, runs ``cupel_np.sweep`` on each
partition in a Dask task and lets every task write its own ``items/``, ``diffs/`` and
``variants/`` part file. The driver only gathers per-partition summaries.
``check(source, checks_file)`` runs a checks file's policy checks the same way (each task
returns only its failure counts and first failing rows).

* Every row carries its input row number (the order ``cupel_np.model.datasets`` reads the files
  in); a task sorts its rows by it before building the ItemTable, so ties break in original
  order exactly as in process, whatever the shuffle did.
* The rows are shuffled on the set key only when some set's rows lie in more than one
  partition (one pass over the set column decides).
* A part is written to a temp file and renamed, and is named by its partition number, so a
  task that Dask retries after its worker died rewrites the same name: no duplicates, and the
  driver removes any temp file a killed task left.

Needs the ``dask`` extra: ``pip install "cupel-np[dask]"``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from cupel_np._fs import arrow_location, as_path, rmtree
from cupel_np.errors import CupelError, InvalidConfigError, InvalidInputTypeError
from cupel_np.io.dask_plan import ROW as ROW
from cupel_np.io.dask_plan import _delayed, partition_table, require_dask, whole_set_partitions

if TYPE_CHECKING:
    from cupel_np.testing.checks import ChecksFile
    from cupel_np.testing.runner import CheckOutcome

# Grouped by use: what users call, then what other wings (tuning, cli) build on.
__all__ = [
    # sweeps and checks on a cluster
    "check",
    "connect",
    "outcome_summary_of_parts",
    "sweep",
    # for other wings
    "partition_table",
    "require_dask",
    "whole_set_partitions",
    "worker_threads",
]

PARTS = ("items", "diffs", "variants")
#: the part directory of the outcome rows (a sweep with a label column)
OUTCOMES = "outcomes"
#: in an outcomes part: the input row of the set's first item (orders the sets as in process)
SET_FIRST_ROW = "set_first_row"
MANIFEST = "manifest.json"


def _read_parquet(path) -> pa.Table:
    """One Parquet file, local or at a URL."""
    import pyarrow.parquet as pq

    fs, p = arrow_location(path)
    return pq.read_table(p, filesystem=fs)


# ----------------------------------------------------------------------------- worker side
def _write_part(table: pa.Table, path, meta: dict) -> None:
    from cupel_np.io.parquet import write_parquet_atomic

    write_parquet_atomic(table, path, meta)


def worker_threads() -> int:
    """The thread count of the Dask worker running the current task (1 outside a worker): a
    task's share of the machine, which the engine's own pool must not exceed."""
    try:
        from distributed import get_worker

        return max(1, int(get_worker().state.nthreads))
    except (ImportError, ValueError, AttributeError):
        return 1


def _run_partition(
    df, index: int, budget, variants, set_column: str, on_error: str, out_dir: str, rows_from=None, label_column=None
) -> dict:
    """One Dask task: sweep the partition's sets with the in-process engine and write its
    three part files (four with ``label_column``: its outcome rows, see ``_outcome_part``).
    Returns the partition's summary. ``rows_from``: the Parquet source's ``RowSource`` (input
    errors then name the part file and the row in it)."""
    from cupel_np.analysis.sensitivity import sweep
    from cupel_np.io.parquet import _variants_metadata

    t0 = time.perf_counter()
    labels = [v.label for v in variants]
    empty = {
        "partition": index,
        "rows": 0,
        "sets": 0,
        "swing": 0,
        "failed": dict.fromkeys(labels, 0),
        "seconds": 0.0,
        "written": False,
    }
    if len(df) == 0:
        return empty
    table, rows = partition_table(df, set_column, rows_from)
    relevance = None if label_column is None else _partition_labels(table, label_column, rows, rows_from)
    # this task's share of the machine is its worker's thread count (1 on the clusters this
    # module starts): the engine's own pool must not add threads on top of Dask's
    res = sweep(table, budget, variants, on_error=on_error, progress=False, threads=worker_threads())
    items = res.items_table()
    items = items.set_column(items.schema.get_field_index("input_row"), "input_row", rows)
    meta = _variants_metadata(variants)
    out = as_path(out_dir)
    name = f"part-{index:05d}.parquet"
    for kind, part in (("diffs", res.diffs_table()), ("variants", res.variants_table()), ("items", items)):
        _write_part(part, out / kind / name, meta)
    if relevance is not None:
        _write_part(_outcome_part(res, relevance, rows), out / OUTCOMES / name, meta)
    errors = res.errors
    return {
        "partition": index,
        "rows": table.n,
        "sets": table.n_sets,
        "swing": res.n_swing,
        "failed": {l: len(errors.get(l, {})) for l in labels},
        "seconds": time.perf_counter() - t0,
        "written": True,
    }


def _partition_labels(table, label_column: str, input_rows: pa.Array, rows_from=None):
    """The partition's labels, checked before the sweep runs; a bad one names the file and
    the row in it (``rows_from``: the Parquet source's ``RowSource``), else the input row."""
    from cupel_np.analysis.outcomes import Labels, check_labels

    rows, global_rows = table.input_row, input_rows.to_numpy(zero_copy_only=False)

    def locate(r: int) -> tuple[str | None, int]:
        g = int(global_rows[rows[r]])
        return rows_from.locate(g) if rows_from is not None else (None, g)

    stored = check_labels(table.extra_column(label_column), label_column, locate=locate)
    vals = np.empty_like(stored.values)
    vals[rows] = stored.values
    return Labels(label_column, vals, stored.graded)


def _outcome_part(res, labels, rows: pa.Array) -> pa.Table:
    """The partition's ``outcomes_table`` rows, with ``set_first_row``: the input row of each
    set's first item, by which the driver lists the sets in the in-process order."""
    t = res.outcomes_table(labels)
    table = res.table
    first = rows.to_numpy(zero_copy_only=False)[table.input_row[table.offsets[:-1]]]
    return t.append_column(SET_FIRST_ROW, pa.array(np.tile(first, len(res.labels)), pa.int64()))


def _traced_partition(
    df,
    index: int,
    budget,
    variants,
    set_column: str,
    on_error: str,
    out_dir: str,
    carrier,
    rows_from=None,
    label_column=None,
):
    """``_run_partition`` inside a ``cupel.sweep.partition`` span of the driver's trace
    (``carrier``: its W3C trace context; empty when tracing is off)."""
    from cupel_np.analysis import otel

    with otel.remote_span("cupel.sweep.partition", carrier, {"cupel.partition": index}) as span:
        summary = _run_partition(df, index, budget, variants, set_column, on_error, out_dir, rows_from, label_column)
        if span is not None:
            span.set_attributes({"cupel.sweep.items": summary["rows"], "cupel.sweep.sets": summary["sets"]})
        return summary


# ----------------------------------------------------------------------------- driver
def _parts(label_column: str | None) -> tuple[str, ...]:
    """The part directories a sweep writes (``outcomes`` too with a label column)."""
    return PARTS if label_column is None else (*PARTS, OUTCOMES)


def _prepare_out_dir(out, overwrite: bool, run: str, parts: tuple[str, ...] = PARTS) -> None:
    """Claim ``out`` (``io.outdir``: another run's outputs refused unless ``overwrite``, which
    removes them) and create the part directories."""
    from cupel_np.io.outdir import claim_out_dir

    claim_out_dir(out, overwrite=overwrite, run=run)
    for p in parts:
        (out / p).mkdir(parents=True, exist_ok=True)


def _remove_temp_files(out, parts: tuple[str, ...] = PARTS) -> int:
    n = 0
    for p in parts:
        for f in (out / p).glob(".*.tmp"):
            f.unlink(missing_ok=True)
            n += 1
    return n


def _shared(value):
    """``value`` as one graph key every task depends on: not traversed nor tokenized once per
    task (Dask walks dataclasses such as policies field by field: measured 70-90 ms a task for
    8 variants, 1,000 partitions would spend over a minute building the graph), and sent to
    each worker once."""
    import dask

    return dask.delayed(value, traverse=False, pure=True)


def _checked_variants(budget, variants, *, set_column: str, on_error: str) -> list:
    """``sweep``'s arguments checked; its variants."""
    from cupel_np.model.budget import ContextBudget
    from cupel_np.model.grid import as_variants, check_on_error

    check_on_error(on_error)
    if not isinstance(set_column, str) or not set_column:
        raise InvalidConfigError(f"set_column must be a column name, got {set_column!r}")
    if budget is not None and not isinstance(budget, ContextBudget):
        raise InvalidInputTypeError(f"budget must be a ContextBudget, got {type(budget).__name__}")
    vs = as_variants(variants, budget, allow_budget=True)
    if not vs:
        raise InvalidConfigError("sweep needs at least one variant")
    for v in vs:
        if v.label in ("content", "input_row", set_column):
            raise InvalidConfigError(f"variant label {v.label!r} clashes with a result column name")
    from cupel_np.io.outdir import check_set_column

    check_set_column(set_column, [v.label for v in vs])
    return vs


def _client_or_own(client):
    """``(client, own_cluster)``: the given client, else the current one, else a client of a
    LocalCluster made for this call (``own_cluster``, which the caller closes)."""
    from distributed import Client, LocalCluster

    if client is not None:
        return client, None
    try:
        from distributed import default_client

        return default_client(), None
    except ValueError:
        own_cluster = LocalCluster(processes=True, threads_per_worker=1, dashboard_address=":0")
        return Client(own_cluster), own_cluster


def _summary(results: list[dict], labels: list[str], shuffled: bool, t_plan: float, t0: float) -> dict:
    """The partitions' results added up (``sweep``'s return value)."""
    return {
        "rows": sum(r["rows"] for r in results),
        "sets": sum(r["sets"] for r in results),
        "swing": sum(r["swing"] for r in results),
        "failed": {l: sum(r["failed"][l] for r in results) for l in labels},
        "partitions": len(results),
        "parts": sum(r["written"] for r in results),
        "shuffled": shuffled,
        "plan_seconds": round(t_plan, 3),
        "task_seconds": round(sum(r["seconds"] for r in results), 3),
        "seconds": round(time.perf_counter() - t0, 3),
    }


def sweep(
    source,
    budget,
    variants,
    *,
    set_column: str,
    out_dir,
    client=None,
    on_error: str = "raise",
    npartitions: int | None = None,
    overwrite: bool = False,
    progress: bool | None = None,
    label_column: str | None = None,
    warm: bool = True,
) -> dict:
    """Run every variant over every item set of ``source`` on a Dask cluster.

    ``source``: a Parquet file, a directory (hive partition columns are ordinary columns), a
    glob pattern, a list of files, or a dask DataFrame. ``variants``: what ``cupel_np.sweep`` accepts
    (including a ``Sweep`` grid); ``budget`` is the default for variants without one.
    ``client``: a ``distributed.Client`` (default: the current one, else a LocalCluster for
    this call). ``npartitions``: how many tasks (default: one per file / input partition).
    ``on_error``: ``"raise"`` (the first failing set's error, naming set and variant) or
    ``"collect"`` (failures are in the ``variants`` parts' ``error`` column and counted in the
    summary). Writes ``out_dir/{items,diffs,variants}/part-NNNNN.parquet`` and
    ``out_dir/manifest.json``; an existing sweep there is an error unless ``overwrite``.
    ``label_column``: a relevance label column; every task then also writes its sets'
    outcome rows (``SweepResult.outcomes_table`` plus ``set_first_row``, the input row of the
    set's first item) to ``out_dir/outcomes/part-NNNNN.parquet`` (see ``outcome_summary_of_parts``).

    ``warm``: before any task, every worker compiles (or loads from Numba's cache) the kernels
    these variants need, one worker per host at a time, so a new machine compiles once and its
    other workers load the cache (``io._workers.warm_kernels``).

    Returns the summary: rows, sets, swing (swinging contents), failed (sets per variant),
    partitions, shuffled, seconds, warm_seconds (the longest warm-up; 0 without one)."""
    require_dask()
    from cupel_np.analysis import otel

    t0 = time.perf_counter()
    vs = _checked_variants(budget, variants, set_column=set_column, on_error=on_error)
    if progress is None:
        progress = bool(getattr(sys.stderr, "isatty", lambda: False)())
    from cupel_np.io.outdir import new_run_id

    out = as_path(out_dir)
    run_id = new_run_id()
    dirs = _parts(label_column)
    _prepare_out_dir(out, overwrite, run_id, dirs)

    client, own_cluster = _client_or_own(client)
    futures = []
    root = otel.start_root("cupel.sweep.dask", {"cupel.sweep.variants": len(vs)})
    try:
        warm_ups: list = []  # submitted once the driver checked the columns, before the planning tasks
        parts, shuffled, rows_from = whole_set_partitions(
            source,
            set_column,
            client,
            npartitions=npartitions,
            variants=vs,
            columns=[label_column] if label_column else [],
            before_tasks=lambda: warm_ups.extend(_warm_ups(client, budget, vs, warm)),
        )
        warmed = client.gather(warm_ups)
        t_plan = time.perf_counter() - t0
        run = _delayed(_traced_partition)
        carrier = otel.context_carrier(root)
        b, v, r = _shared(budget), _shared(vs), _shared(rows_from)
        tasks = [run(p, i, b, v, set_column, on_error, str(out), carrier, r, label_column) for i, p in enumerate(parts)]
        futures = client.compute(tasks)
        results = _gather(client, futures, progress)
    except BaseException as e:
        if futures:
            if isinstance(e, Exception):  # let running tasks end so none writes after the cleanup
                from distributed import wait

                wait(futures)
            client.cancel(futures)
        for p in dirs:
            try:
                rmtree(out / p)
            except (OSError, CupelError):  # the run's own error is the one to report
                pass
        raise
    finally:
        otel.end(root, {"cupel.sweep.partitions": len(futures)})
        if own_cluster is not None:
            client.close()
            own_cluster.close()
    _remove_temp_files(out, dirs)
    summary = _summary(results, [v.label for v in vs], shuffled, t_plan, t0)
    summary["warm_seconds"] = round(max((w["seconds"] for w in warmed), default=0.0), 3)
    _write_parts_manifest(out, run_id, vs, set_column, summary, dirs)
    return summary


def _warm_ups(client, budget, vs, warm: bool) -> list:
    """The warm-up futures (one per worker) when ``warm``, submitted before the run's tasks."""
    if not warm:
        return []
    from cupel_np.io._workers import submit_warm_ups

    return submit_warm_ups(client, budget, vs)


def _gather(client, futures, progress: bool) -> list[dict]:
    """The tasks' summaries as they finish (a progress line on stderr when ``progress``).

    ``as_completed`` only watches the tasks' states; the results are fetched here, one
    ``client.gather`` per batch of tasks that finished together (one round trip to the
    scheduler per ``result()`` call cost ~36 ms a task on a loaded machine). Its
    ``with_results`` mode fetched each result in a background coroutine of the client, and
    when that fetch failed (a CI run: an AssertionError inside Tornado's stream write) the
    exception went to the event loop's log and the task never came out of the iterator: the
    sweep waited forever. A failing fetch here raises in the caller."""
    from distributed import as_completed

    results: list[dict] = []
    for batch in as_completed(futures).batches():
        results.extend(client.gather(batch))
        if progress:
            s = sum(r["rows"] for r in results)
            sys.stderr.write(f"\rpartitions {len(results)}/{len(futures)}  rows {s:,}")
            sys.stderr.flush()
    if progress:
        sys.stderr.write("\n")
    return results


def _write_parts_manifest(out, run_id: str, vs, set_column: str, summary: dict, dirs=PARTS) -> None:
    """``manifest.json`` of a finished Dask sweep (its parts, variants and summary)."""
    from cupel_np.io.outdir import KIND_PARTS, write_manifest
    from cupel_np.io.parquet import _variants_metadata

    meta = _variants_metadata(vs)
    write_manifest(
        out,
        KIND_PARTS,
        run_id,
        [f"{p}/" for p in dirs],
        format="cupel_np.sweep.parts/1",
        version=meta[b"cupel_np.version"].decode(),
        set_column=set_column,
        variants=json.loads(meta[b"cupel_np.variants"]),
        summary=summary,
    )


# ----------------------------------------------------------------------------- checks
def _check_partition(df, cf, set_column: str, keep: int, rows_from=None) -> dict:
    """One Dask task of ``check``: the checks file's checks over the partition's whole item sets
    with the in-process engine. Returns the row count and one ``CheckPart`` per check (counts,
    and only the first ``keep`` failing rows, ordered by their sets' input rows)."""
    from cupel_np.testing.runner import check_table, first_rows

    if len(df) == 0:
        return {"rows": 0, "parts": None}
    table, rows = partition_table(df, set_column, rows_from)
    first = rows.to_numpy(zero_copy_only=False)[first_rows(table)]
    return {"rows": table.n, "parts": check_table(cf, table, keep=keep, threads=worker_threads(), first=first)}


def check(
    source: Any,
    checks: ChecksFile | str | os.PathLike,
    *,
    set_column: str | None = None,
    client: Any = None,
    npartitions: int | None = None,
    keep: int = 1000,
    progress: bool | None = None,
    warm: bool = True,
) -> list[CheckOutcome]:
    """Run a checks file's checks over every item set of ``source`` on a Dask cluster: what
    ``cupel-np check ITEMS --checks FILE --dask SPEC`` does.

    ``checks``: a checks file path or a parsed ``cupel_np.testing.checks.ChecksFile``.
    ``source``, ``client`` and ``npartitions`` as for :func:`sweep`; ``set_column`` defaults to
    the checks file's. Each task sweeps the variants over its partition of whole item sets and
    returns only its counts and first ``keep`` failing rows per check. Returns one
    ``cupel_np.testing.runner.CheckOutcome`` per check, equal to the in-process run's (the same
    counts, and the same first ``keep`` rows in the same order), timings aside. ``warm``: as
    for :func:`sweep`."""
    require_dask()
    from cupel_np.model.grid import as_variants
    from cupel_np.testing.checks import ChecksFile, load_checks
    from cupel_np.testing.runner import merge_parts

    cf = checks if isinstance(checks, ChecksFile) else load_checks(checks)
    set_column = set_column or cf.set_column
    if not isinstance(set_column, str) or not set_column:
        raise InvalidConfigError(
            "checking on Dask needs a set column (a task holds whole item sets): "
            "set_column = ... in the checks file, or --set-column"
        )
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 0:
        raise InvalidConfigError(f"keep must be a count of rows, got {keep!r}")
    vs = as_variants(cf.variants, None, allow_budget=True)
    if progress is None:
        progress = bool(getattr(sys.stderr, "isatty", lambda: False)())
    client, own_cluster = _client_or_own(client)
    futures = []
    try:
        warm_ups: list = []  # submitted once the driver checked the columns, before the planning tasks
        parts, _shuffled, rows_from = whole_set_partitions(
            source,
            set_column,
            client,
            npartitions=npartitions,
            variants=vs,
            before_tasks=lambda: warm_ups.extend(_warm_ups(client, None, vs, warm)),
        )
        client.gather(warm_ups)
        run = _delayed(_check_partition)
        shared_cf, r = _shared(cf), _shared(rows_from)
        futures = client.compute([run(p, shared_cf, set_column, keep, r) for p in parts])
        results = _gather(client, futures, progress)
    except BaseException:
        if futures:
            client.cancel(futures)
        raise
    finally:
        if own_cluster is not None:
            client.close()
            own_cluster.close()
    return merge_parts(
        cf.checks, [r["parts"] for r in results if r["parts"] is not None], keep, allow_empty=cf.allow_empty
    )


class connect:
    """``with connect("local:2") as client``: a LocalCluster of N single-threaded worker
    processes (``local`` = one per core), or ``tcp://HOST:PORT`` for an existing scheduler."""

    def __init__(self, spec: str):
        require_dask()
        self.spec = spec
        self.cluster = None
        self.client = None

    def __enter__(self):
        from distributed import Client, LocalCluster

        spec = self.spec.strip()
        if spec == "local" or spec.startswith("local:"):
            n = spec.partition(":")[2]
            if n and (not n.isdigit() or int(n) < 1):
                raise InvalidConfigError(f"--dask local:N needs a positive worker count, got {spec!r}")
            self.cluster = LocalCluster(
                n_workers=int(n) if n else (os.cpu_count() or 1),
                threads_per_worker=1,
                processes=True,
                dashboard_address=":0",
            )
            self.client = Client(self.cluster)
        elif "://" in spec:
            try:
                self.client = Client(spec, timeout="20s")
            except OSError as e:
                raise InvalidConfigError(f"cannot reach the Dask scheduler at {spec}: {e}") from None
        else:
            raise InvalidConfigError(
                f"--dask takes local, local:N or a scheduler address like tcp://HOST:8786, got {spec!r}"
            )
        return self.client

    def __exit__(self, *exc):
        if self.client is not None:
            self.client.close()
        if self.cluster is not None:
            self.cluster.close()
        return False


def outcome_summary_of_parts(out_dir, variants=None, **kw) -> pa.Table:
    """``outcome_summary_of_table`` over a Dask sweep's ``outcomes/`` parts, the sets listed
    in the in-process order (by the input row of their first item): the same numbers as the
    in-process ``outcome_summary``. ``kw``: ``outcome_summary_of_table``'s options."""
    import pyarrow.compute as pc

    from cupel_np.analysis.outcomes import outcome_summary_of_table

    files = sorted((as_path(out_dir) / OUTCOMES).glob("part-*.parquet"))
    if not files:
        return pa.table({"variant": pa.array([], pa.string())})
    t = pa.concat_tables([_read_parquet(f) for f in files], promote_options="permissive")
    names = t.column("variant").to_pylist()
    order = list(dict.fromkeys(names)) if variants is None else list(variants)
    rank = pa.array(np.array([order.index(n) for n in dict.fromkeys(names)]))
    vcode = pc.index_in(t.column("variant"), pa.array(list(dict.fromkeys(names)))).to_numpy()
    key = np.lexsort((t.column(SET_FIRST_ROW).to_numpy(), rank.to_numpy()[vcode]))
    return outcome_summary_of_table(t.take(pa.array(key)), order, **kw)
