"""``cupel-np check ITEMS --checks FILE [--set-column COL] [--junit OUT.xml]``.

Runs every check of a checks file (``cupel_np.testing.checks``) over every item set, prints
a table of the failing (variant, set) pairs, and exits 1 when a check fails, 2 for bad input
(the message names the file, check and key), 0 otherwise. A check that checked nothing
(its kind or ``where`` matches no item of the input, or there are no (variant, set) pairs and
the file does not say ``allow_empty = true``) fails. ``--junit`` writes JUnit XML (one
test case per check) for CI systems. An input over the memory limit (or any input given
``--chunk-rows``) is checked in chunks of whole item sets, like ``sensitivity`` streams;
``--dask SPEC`` runs it on Dask (``cupel_np.dask.check``), with the same output.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow.compute as pc

from cupel_np._files import atomic_write_bytes, dumps_json
from cupel_np._fs import as_path
from cupel_np.cli.coldstart import compile_ahead, end_sharing, share_compile
from cupel_np.cli.shared import UsageError, _progress_enabled, _source
from cupel_np.errors import InvalidConfigError, MemoryLimitError
from cupel_np.io.dask import check, connect
from cupel_np.model import chunks, datasets  # read at call time: a test replaces chunks.whole_set_chunks
from cupel_np.model.fields import suggestion
from cupel_np.model.items import ItemTable
from cupel_np.testing.checks import ChecksFile, load_checks
from cupel_np.testing.runner import (
    EXIT_FAILED,
    EXIT_OK,
    CheckOutcome,
    junit_xml,
    outcome_failed,
    report_lines,
    run_checks,
)


def _tables(args, set_column: str | None, n_variants: int) -> Iterator[ItemTable]:
    """The items as one ItemTable, or as chunks of whole sets when streaming (the memory
    estimate and the chunk size account for the ``n_variants`` variants swept over them)."""
    src = _source(args.items)
    limit = (
        datasets.default_memory_limit()
        if args.memory_limit is None
        else datasets.parse_size(args.memory_limit, "--memory-limit")
    )
    if args.chunk_rows is not None and args.chunk_rows < 1:
        raise InvalidConfigError(f"--chunk-rows must be at least 1, got {args.chunk_rows}")
    d = None
    if args.chunk_rows is None:
        d = datasets.needs_streaming(
            src, limit, set_column=set_column, n_variants=n_variants, where=datasets.describe_source(src)
        )
        if d is None:
            yield ItemTable.from_parquet(src, set_column=set_column)
            return
    if not set_column:
        raise InvalidConfigError("streaming a check needs a set column (chunks hold whole item sets)")
    d = d if d is not None else datasets.open_dataset(src)
    if set_column not in d.schema.names:
        raise InvalidConfigError(
            f"set column {set_column!r} not found{suggestion(set_column, d.schema.names)} (columns: {', '.join(d.schema.names)})"
        )
    keys, lengths = datasets.set_runs(d, set_column)
    if len(pc.unique(keys)) != len(keys):
        raise MemoryLimitError(
            f"the sets of column {set_column!r} are not contiguous and the input is over the memory limit: "
            "sort the data by the set column to check it in chunks"
        )
    datasets.check_fits(
        d, set_column, limit, datasets.describe_source(src), runs=(keys, lengths), n_variants=n_variants
    )
    rows = args.chunk_rows or datasets.chunk_rows_for(d, limit, n_variants=n_variants)
    n_groups = sum(f.metadata.num_row_groups for f in d.get_fragments())
    for chunk, _done in chunks.whole_set_chunks(d, set_column, rows, n_groups):
        yield ItemTable.from_arrow(chunk, set_column=set_column)


def cmd_check(args) -> int:
    """The ``check`` subcommand (see the module docstring)."""
    if args.junit and as_path(args.junit).is_dir():  # checked before any work
        raise UsageError(f"the --junit path {args.junit} is a directory; give a file path (OUT.xml)")
    cf = load_checks(args.checks)
    set_column = args.set_column or cf.set_column
    if args.dask:
        outcomes = _check_on_dask(args, cf, set_column)
    else:
        sharing = share_compile("check")  # a cold kernel cache: two processes compile
        try:
            compile_ahead(sharing)
            outcomes = run_checks(cf, _tables(args, set_column, len(cf.variants)), threads=args.threads)
        finally:
            end_sharing(sharing)
    set_name = set_column or "set"
    if args.junit:
        _write_junit(args.junit, junit_xml(outcomes, as_path(args.checks).stem, set_name))
    if args.json:
        doc = [
            {
                "check": o.check.name,
                "pairs": o.pairs,
                "failed": o.failed,
                "problem": o.problem,
                "rows": o.table().to_pylist(),
            }
            for o in outcomes
        ]
        print(dumps_json(doc, indent=2))
    else:
        print("\n".join(report_lines(outcomes, set_name, args.max_rows)))
    return EXIT_FAILED if any(outcome_failed(o) for o in outcomes) else EXIT_OK


def _write_junit(path: str, data: bytes) -> None:
    """Atomically (temp file + rename, like every output); a missing parent directory is
    created, as for ``import --out`` and ``--out``; an error says it is the ``--junit`` path."""
    try:
        atomic_write_bytes(path, data)
    except OSError as e:
        raise UsageError(f"cannot write the --junit file {path}: {e.strerror or e}") from None


def _check_on_dask(args, checks_file: ChecksFile, set_column: str | None) -> list[CheckOutcome]:
    """``cupel-np check --dask SPEC``: the checks file's checks on Dask; its outcomes."""
    if not set_column:
        raise UsageError("--dask needs --set-column or set_column in the checks file (a task holds whole item sets)")
    with connect(args.dask) as client:
        return check(
            _source(args.items), checks_file, set_column=set_column, client=client, progress=_progress_enabled(args)
        )
