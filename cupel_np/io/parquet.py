"""Parquet in and out: validating items files, streaming sweeps, writing results (atomically,
with the permissions the umask gives). Opening an items file is ``_readers.read_items_table``,
shared with ``ItemTable.from_parquet``; the accepted types are checked by ``columns.check_items``.

Items schema (snake_case ContextItem fields): ``content`` string (required), ``tokens``
integer (required), ``kind`` string, ``source`` string, ``priority`` integer, ``tags``
list<string>, ``metadata`` map<string, string>, ``timestamp`` timestamp (UTC; a zone-less
timestamp is read as UTC), ``future_relevance_hint`` float, ``pinned`` bool,
``original_tokens`` integer, plus any set-key column. Missing optional columns take the
spec's defaults; other columns are ignored.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from cupel_np._files import atomic_write_bytes, file_mode, temp_beside
from cupel_np._fs import AnyPath, RemotePath, as_path, commit_remote, remote_temp, translate
from cupel_np._version import __version__
from cupel_np.analysis import otel
from cupel_np.analysis.outcomes import check_labels
from cupel_np.analysis.sensitivity import SweepResult, sweep
from cupel_np.engine.scorers.custom import check_schema_columns
from cupel_np.errors import InvalidConfigError, InvalidInputTypeError, MemoryLimitError
from cupel_np.io.outdir import (
    KIND_STREAMED,
    KIND_SWEEP,
    check_set_column,
    claim_out_dir,
    new_run_id,
    run_id,
    write_manifest,
)
from cupel_np.model._readers import read_items_table
from cupel_np.model.budget import ContextBudget
from cupel_np.model.chunks import dataset_batches, whole_set_chunks
from cupel_np.model.columns import SET_COLUMN, Problems, check_items
from cupel_np.model.datasets import (
    RowSource,
    check_fits,
    chunk_rows_for,
    default_memory_limit,
    describe_source,
    estimate_in_memory_peak,
    first_repeated_set,
    format_size,
    open_dataset,
    parquet_file,
    set_runs,
    uncompressed_bytes,
)
from cupel_np.model.fields import suggestion
from cupel_np.model.grid import as_variants
from cupel_np.model.hints import PathOrPaths, StrPath, Variants
from cupel_np.model.items import ItemTable
from cupel_np.model.policy import json_default

__all__ = [
    "atomic_write_bytes",
    "read_items_table",
    "sweep_parquet",
    "validate_items",
    "write_parquet_atomic",
    "write_sweep",
]


# ----------------------------------------------------------------------------- sweep output
def _variants_metadata(variants) -> dict[bytes, bytes]:
    meta = [{"label": v.label, "policy": v.policy.to_dict(), "budget": v.budget.to_dict()} for v in variants]
    return {
        b"cupel_np.version": __version__.encode(),
        b"cupel_np.variants": json.dumps(meta, default=json_default).encode(),
    }


class _AtomicWriter:
    """A ParquetWriter on a temp file beside the target, renamed into place on close; an
    interrupted run leaves no file that looks complete. On an object store (a URL target) the
    temp is a key beside the target, copied into place on close (``_fs.commit_remote``).

    ``finish`` completes the temp file and ``commit`` puts it in place, so that several outputs
    can all be finished before any is committed. A write or finish that fails (a full disk)
    removes the temp file and raises an ``OSError`` naming the target, never the temp file;
    ``abort`` never raises (so every writer of a run is aborted, whichever fails first) and
    leaves pyarrow nothing to close again at garbage collection."""

    def __init__(self, path, schema: pa.Schema, metadata: dict[bytes, bytes]):
        self.path = as_path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # no metadata to add: the schema as given (``with_metadata`` would turn None into {})
        self.schema = schema.with_metadata({**(schema.metadata or {}), **metadata}) if metadata else schema
        if isinstance(self.path, RemotePath):
            self.tmp: Any = remote_temp(self.path)
            try:
                self.writer = pq.ParquetWriter(self.tmp.path, self.schema, compression="zstd", filesystem=self.tmp.fs)
            except OSError as e:
                raise translate(e, str(self.path)) from None
        else:
            # Linux: an unnamed file in the target's directory (O_TMPFILE), linked in at commit,
            # so even a SIGKILL mid-write leaves nothing behind; elsewhere a named temp file
            self.fd = _unnamed_beside(self.path)
            self.tmp = temp_beside(self.path) if self.fd is None else f"/proc/self/fd/{self.fd}"
            try:
                self.writer = pq.ParquetWriter(self.tmp, self.schema, compression="zstd")
            except OSError as e:
                self._drop_local()
                raise self._named(e) from None

    def _named(self, e: OSError) -> Exception:
        """``e`` as an error naming the target (an object store's as a ``StorageError``)."""
        if isinstance(self.path, RemotePath):
            return translate(e, str(self.path))
        if e.errno:
            return OSError(e.errno, os.strerror(e.errno), str(self.path))
        return OSError(f"cannot write {self.path}: {e}")

    def write(self, table: pa.Table) -> None:
        try:
            self.writer.write_table(table.cast(self.schema))
        except OSError as e:
            self.abort()
            raise self._named(e) from None

    def finish(self) -> None:
        """Complete the temp file (its footer); on failure remove it and raise naming the target."""
        try:
            self.writer.close()
        except OSError as e:
            self.abort()
            raise self._named(e) from None

    def commit(self) -> None:
        """Put the finished temp file in place."""
        if isinstance(self.path, RemotePath):
            commit_remote(self.tmp, self.path)
        elif self.fd is None:
            os.replace(self.tmp, self.path)
        else:
            named = temp_beside(self.path)  # linked under a temp name, then renamed over the target
            try:
                os.unlink(named)
                # a directory fd makes os.link call linkat with AT_SYMLINK_FOLLOW (plain link()
                # would try to link the /proc magic link itself)
                dfd = os.open(self.path.parent, os.O_RDONLY | os.O_DIRECTORY)
                try:
                    os.link(self.tmp, os.path.basename(named), dst_dir_fd=dfd, follow_symlinks=True)
                finally:
                    os.close(dfd)
                os.replace(named, self.path)
            except OSError as e:
                _remove_quietly(named)
                raise self._named(e) from None
            finally:
                self._drop_local()

    def abort(self) -> None:
        """Close quietly and remove the temp file; never raises (the first error is the one to
        report)."""
        try:
            self.writer.close()
        except Exception:
            # pyarrow's writer stays "open" after a failed close and its __del__ would try again
            # (printing "Exception ignored in ParquetWriter.__del__"): mark it closed and close
            # the file under it ourselves
            self.writer.is_open = False
            try:
                if self.writer.file_handle is not None:
                    self.writer.file_handle.close()
            except Exception:
                pass
        if isinstance(self.path, RemotePath):
            try:
                self.tmp.unlink(missing_ok=True)
            except Exception:
                pass
        else:
            self._drop_local()

    def _drop_local(self) -> None:
        if self.fd is None:
            _remove_quietly(self.tmp)
            return
        fd, self.fd = self.fd, None
        try:
            os.close(fd)
        except OSError:
            pass


def _unnamed_beside(p) -> int | None:
    """A file descriptor of an unnamed file in ``p``'s directory (Linux ``O_TMPFILE``), or None
    where the system or the file system has none (then a named temp file is used)."""
    flag = getattr(os, "O_TMPFILE", 0)
    if not flag:
        return None
    try:
        return os.open(p.parent, flag | os.O_WRONLY, file_mode())
    except OSError:
        return None


def _remove_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _finish_all(writers: list[_AtomicWriter]) -> None:
    """Finish every writer, then commit them all; if one fails to finish, abort every one (no
    temp file stays, no output is put in place beside a missing one) and raise its error."""
    try:
        for w in writers:
            w.finish()
    except BaseException:
        for w in writers:
            w.abort()
        raise
    for w in writers:
        w.commit()


def write_sweep(
    result: SweepResult, out_dir: StrPath, *, items: bool = True, overwrite: bool = False, labels: Any = None
) -> dict[str, AnyPath]:
    """Write ``diffs.parquet``, ``variants.parquet`` and (``items=True``) ``items.parquet``
    for a SweepResult into ``out_dir``, plus ``manifest.json`` (the run, its variants and set
    column); the policies and budgets also go in the file metadata. A directory holding
    another run's outputs is refused unless ``overwrite=True``, which removes them first
    (``io.outdir``: only cupel_np's own output names are touched). ``labels`` (a label column
    name the table kept, or a ``Labels``): also write ``outcomes.parquet``
    (``SweepResult.outcomes_table``)."""
    check_set_column(result.table.set_column, result.labels)
    out = claim_out_dir(out_dir, overwrite=overwrite, run=run_id(result))
    meta = _variants_metadata(result.variants)
    tables = {"diffs": result.diffs_table(), "variants": result.variants_table()}
    if items:
        tables["items"] = result.items_table()
    if labels is not None:
        tables["outcomes"] = result.outcomes_table(labels)
    writers: dict[str, _AtomicWriter] = {}
    try:
        for name, table in tables.items():
            writers[name] = _AtomicWriter(out / f"{name}.parquet", table.schema, meta)
            writers[name].write(table)
    except BaseException:
        for w in writers.values():
            w.abort()
        raise
    _finish_all(list(writers.values()))  # all in place, or none
    paths = {name: w.path for name, w in writers.items()}
    _sweep_manifest(out, KIND_SWEEP, run_id(result), result.variants, result.table.set_column, list(paths))
    return paths


def _sweep_manifest(
    out: Path | RemotePath, kind: str, run: str, variants, set_column, names: list[str], **fields
) -> None:
    meta = _variants_metadata(variants)
    write_manifest(
        out,
        kind,
        run,
        [f"{n}.parquet" for n in names],
        version=__version__,
        set_column=set_column,
        variants=json.loads(meta[b"cupel_np.variants"]),
        **fields,
    )


def write_parquet_atomic(table: pa.Table, path: StrPath, meta: dict[bytes, bytes]) -> AnyPath:
    """Write one Arrow table to ``path`` (a local path or a URL) through a temp file + rename,
    with ``meta`` in the schema metadata; an interrupted write leaves no file behind."""
    w = _AtomicWriter(path, table.schema, meta)
    try:
        w.write(table)
    except BaseException:
        w.abort()
        raise
    _finish_all([w])
    return w.path


def _sweep_parquet(
    path: PathOrPaths,
    budget: ContextBudget | None,
    variants: Variants,
    out_dir: StrPath,
    *,
    set_column: str,
    chunk_rows: int | None = None,
    on_error: str = "raise",
    items: bool = True,
    progress: bool | None = None,
    memory_limit: int | None = None,
    threads: int | None = None,
    overwrite: bool = False,
    label_column: str | None = None,
) -> dict:
    """The body of :func:`sweep_parquet` (outside its span)."""
    vs = as_variants(variants, budget, allow_budget=True)
    check_set_column(set_column, [v.label for v in vs])
    run = new_run_id()
    out = claim_out_dir(out_dir, overwrite=overwrite, run=run, create=False)  # created by the first write
    d = open_dataset(path)
    where = describe_source(path)
    source = RowSource(path)
    if set_column not in d.schema.names:
        raise InvalidConfigError(
            f"set column {set_column!r} not found in {where}{suggestion(set_column, d.schema.names)} "
            f"(columns: {', '.join(d.schema.names)})"
        )
    if label_column is not None and label_column not in d.schema.names:
        raise InvalidConfigError(
            f"label column {label_column!r} not found in {where}{suggestion(label_column, d.schema.names)} "
            f"(columns: {', '.join(d.schema.names)})"
        )
    check_schema_columns(d.schema, (v.policy.scorer for v in vs), where)  # before reading any row
    meta = _variants_metadata(vs)
    if progress is None:
        progress = bool(getattr(sys.stderr, "isatty", lambda: False)())
    limit = default_memory_limit() if memory_limit is None else int(memory_limit)
    run_keys, run_lengths = set_runs(d, set_column)  # the key column only, one row group at a time
    if len(pc.unique(run_keys)) != len(run_keys):
        need = estimate_in_memory_peak(d, n_variants=len(vs))
        if need > limit:
            raise MemoryLimitError(
                f"set {first_repeated_set(run_keys)!r} (column {set_column!r}) is not contiguous in {where}: "
                f"its rows reappear after other sets' rows, and grouping the sets in memory for {len(vs)} "
                f"variants needs about {format_size(need)} (limit {format_size(limit)}); sort the data by the set column, "
                "or run it on Dask (cupel_np.dask.sweep, or cupel-np ... --dask local)"
            )
        chunk_iter = iter([(d.to_table(), 1)])
        n_groups = 1
    else:
        check_fits(d, set_column, limit, where, runs=(run_keys, run_lengths), n_variants=len(vs))
        if chunk_rows is None:
            chunk_rows = chunk_rows_for(d, limit, n_variants=len(vs))
        n_groups = sum(f.metadata.num_row_groups for f in d.get_fragments())
        chunk_iter = whole_set_chunks(d, set_column, chunk_rows, n_groups)
    del run_keys, run_lengths
    writers: dict[str, _AtomicWriter] = {}
    totals: dict[str, Any] = {"rows": 0, "sets": 0, "swing": 0, "chunks": 0, "chunk_rows": chunk_rows}
    try:
        for chunk, done_groups in otel.traced_iter(chunk_iter, "cupel.sweep.read"):
            # errors name the part file and the row in it (the chunk's rows are rows of the input)
            here = source.shifted(totals["rows"])
            table = ItemTable.from_arrow(chunk, set_column=set_column, source=here)
            res, parts = _sweep_chunk(chunk, table, here, budget, vs, on_error, threads, items, label_column)
            with otel.current_span("cupel.sweep.write"):
                for name, t in parts.items():
                    if name not in writers:
                        writers[name] = _AtomicWriter(out / f"{name}.parquet", t.schema, meta)
                    writers[name].write(t)
            totals["rows"] += table.n
            totals["sets"] += table.n_sets
            totals["swing"] += res.n_swing
            totals["chunks"] += 1
            # drop this chunk's results now: held until the next chunk's sweep returns, two
            # chunks' matrices and output tables would be resident at once
            del chunk, table, res, parts, t
            if progress:
                sys.stderr.write(
                    f"\rrow groups {done_groups}/{n_groups}  rows {totals['rows']}  swinging {totals['swing']}"
                )
                sys.stderr.flush()
        if progress:
            sys.stderr.write("\n")
    except BaseException:
        for w in writers.values():
            w.abort()
        raise
    _finish_all(list(writers.values()))
    out.mkdir(parents=True, exist_ok=True)  # an empty input writes no part, but the run is recorded
    _sweep_manifest(out, KIND_STREAMED, run, vs, set_column, list(writers), summary=totals)
    return totals


def _sweep_chunk(chunk, table, here: RowSource, budget, vs, on_error, threads, items: bool, label_column):
    """One streamed chunk: its SweepResult and the output parts it adds (``items`` with
    input rows counted from the chunk's first row; ``outcomes`` when there is a label
    column, whose labels are checked before the sweep runs, errors naming file and row)."""
    row0 = here.offset
    labels = None
    if label_column is not None:
        labels = check_labels(chunk.column(label_column), label_column, locate=here.locate)
    res = sweep(table, budget, vs, on_error=on_error, progress=False, threads=threads)
    parts = {"diffs": res.diffs_table(), "variants": res.variants_table()}
    if labels is not None:
        parts["outcomes"] = res.outcomes_table(labels)
    if items:
        it = res.items_table()
        it = it.set_column(
            it.schema.get_field_index("input_row"),
            "input_row",
            pa.array(np.arange(it.num_rows, dtype=np.int64) + row0),
        )
        parts["items"] = it
    return res, parts


# ----------------------------------------------------------------------------- validation
def sweep_parquet(
    path: PathOrPaths,
    budget: ContextBudget | None,
    variants: Variants,
    out_dir: StrPath,
    *,
    set_column: str,
    chunk_rows: int | None = None,
    on_error: str = "raise",
    items: bool = True,
    progress: bool | None = None,
    memory_limit: int | None = None,
    threads: int | None = None,
    overwrite: bool = False,
    label_column: str | None = None,
) -> dict:
    """Sweep a corpus too large for memory: read ``path`` (a file, a directory or a list of
    files) in batches (within row groups too), whole item sets per chunk, sweep each chunk, and
    stream ``items`` / ``diffs`` / ``variants`` Parquet into ``out_dir``. Chunks hold at most
    ``chunk_rows`` rows, or one set longer than that (default: what fits in ``memory_limit`` by
    the estimate for this many variants, at most a quarter million; ``chunks.whole_set_chunks``). Before anything large is allocated, a set whose estimated in-memory peak is over
    ``memory_limit`` (default half the available memory) raises ``MemoryLimitError``. When a
    set's rows are not contiguous the whole input is grouped in memory if it fits in the
    limit; otherwise the error says to use the Dask path. Returns totals (rows, sets,
    swinging contents, chunks, chunk_rows). With OpenTelemetry tracing on, the run is one
    ``cupel.sweep.stream`` span holding each chunk's ``cupel.sweep.read``, ``cupel.sweep`` and
    ``cupel.sweep.write``. ``out_dir`` holding another run's outputs is refused unless
    ``overwrite=True`` (``io.outdir``), before any input is read. ``label_column``: a
    relevance label column of the input; each chunk's outcome metrics per (variant, set)
    (``SweepResult.outcomes_table``) then stream into ``outcomes.parquet`` too."""
    with otel.current_span("cupel.sweep.stream") as span:
        totals = _sweep_parquet(
            path,
            budget,
            variants,
            out_dir,
            set_column=set_column,
            chunk_rows=chunk_rows,
            on_error=on_error,
            items=items,
            progress=progress,
            memory_limit=memory_limit,
            threads=threads,
            overwrite=overwrite,
            label_column=label_column,
        )
        if span is not None:
            span.set_attributes({f"cupel.sweep.{k}": v for k, v in totals.items() if isinstance(v, int)})
        return totals


def validate_items(
    path: PathOrPaths,
    set_column: str | None = None,
    max_rows_listed: int = 5,
    *,
    chunk_rows: int | None = None,
    memory_limit: int | None = None,
    progress: bool = False,
) -> tuple[list[str], dict]:
    """Every schema and row problem of an items file (not just the first), by column and row.
    Returns ``(problems, summary)``. It runs the loader's own checks (``columns.check_items``),
    so no problems means exactly that ``ItemTable.from_parquet`` will load the file.

    The file is read in chunks of ``chunk_rows`` rows when given, or when the whole read is
    estimated (``VALIDATE_FACTOR`` x uncompressed bytes) to need more than ``memory_limit``
    (default half the available memory): the same problems at the same (input) row numbers."""
    try:
        d = open_dataset(path)
    except InvalidInputTypeError:  # e.g. repeated column names: the whole-file read names the problem
        if chunk_rows is not None or not (isinstance(path, (str, os.PathLike)) and as_path(path).is_file()):
            raise
        d, chunk_rows = None, None
    if chunk_rows is None and d is not None:
        limit = default_memory_limit() if memory_limit is None else int(memory_limit)
        if uncompressed_bytes(d) * VALIDATE_FACTOR > limit:
            chunk_rows = chunk_rows_for(d, limit, n_variants=0)  # nothing is swept: the table alone
    if chunk_rows is None:
        table = read_items_table(path)
        problems = Problems(collect=True, max_rows=max_rows_listed, source=RowSource(path))
        checked = check_items(table, set_column, problems)
        summary = {"rows": table.num_rows, "sets": None, "negative_tokens": None, "pinned": None}
        if checked is not None:
            summary.update(_validate_counts(checked, set_column))
            if set_column is not None:
                summary["sets"] = len(summary.pop("_keys"))
        return problems.messages, summary
    if chunk_rows < 1:
        raise InvalidConfigError(f"chunk_rows must be at least 1, got {chunk_rows}")
    problems = Problems(collect=True, max_rows=max_rows_listed, source=RowSource(path))
    rows, ok, neg, pinned, keys = 0, True, 0, 0, []
    total = sum(f.metadata.num_rows for f in d.get_fragments()) if d is not None else 0
    for batch in _batches(path, d, chunk_rows):
        chunk = pa.Table.from_batches([batch])
        problems.row_offset = rows
        checked = check_items(chunk, set_column, problems)
        rows += chunk.num_rows
        if progress:
            sys.stderr.write(f"\rvalidated {rows:,} of {total:,} rows")
            sys.stderr.flush()
        if checked is None:
            ok = False
        elif ok:
            c = _validate_counts(checked, set_column)
            neg += c["negative_tokens"]
            pinned += c["pinned"]
            if set_column is not None:
                keys.append(c["_keys"])
    if progress:
        sys.stderr.write("\n")
    summary = {"rows": rows, "sets": None, "negative_tokens": None, "pinned": None}
    if ok:
        sets = 1
        if set_column is not None:
            sets = len(pc.unique(pa.chunked_array(keys, keys[0].type if keys else pa.string()))) if keys else 0
        summary.update(sets=sets, negative_tokens=neg, pinned=pinned)
    return problems.messages, summary


#: peak resident bytes of an in-memory ``validate_items`` per uncompressed Parquet byte (the
#: table read, and the checked copy check_items builds), used only to decide when validate
#: streams; measured: ``cupel-np validate`` on the 5M-row benchmark file (234 MB uncompressed)
#: peaked at 1.27 GB RSS = 5.4x, interpreter included
VALIDATE_FACTOR = 5.5


def _validate_counts(checked: pa.Table, set_column) -> dict:
    tokens = checked.column("tokens").to_numpy()
    out = {
        "sets": 1,
        "negative_tokens": int((tokens < 0).sum()),
        "pinned": int(pc.sum(checked.column("pinned")).as_py() or 0),
    }
    if set_column is not None:
        out["_keys"] = pc.unique(checked.column(SET_COLUMN).combine_chunks())
    return out


def _batches(path, d, chunk_rows: int):
    """Record batches of at most ``chunk_rows`` rows in input order, read the way
    ``read_items_table`` reads (a single file directly, so repeated column names survive)."""
    if not isinstance(path, (list, tuple)) and as_path(path).is_file():
        pf = parquet_file(path)
        if pf.metadata.num_rows == 0:
            yield pa.RecordBatch.from_pylist([], schema=pf.schema_arrow)
            return
        yield from pf.iter_batches(batch_size=chunk_rows)
        return
    empty = True
    for t, _ in dataset_batches(d, chunk_rows):  # within row groups too (Dataset.to_batches decodes them whole)
        empty = False
        yield from t.to_batches()
    if empty:
        yield pa.RecordBatch.from_pylist([], schema=d.schema)
