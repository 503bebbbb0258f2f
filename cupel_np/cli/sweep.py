"""``cupel-np sweep``: run a grid file's variants over an items file."""

from __future__ import annotations

import time

from cupel_np._fs import as_path
from cupel_np.analysis.sensitivity import sweep
from cupel_np.cli.shared import (
    _claim_out,
    _load_table,
    _name,
    _progress_enabled,
    with_groups,
)
from cupel_np.cli.sweeps import (
    _finish,
    _labels,
    _run_dask,
    _run_streaming,
    _streams,
)
from cupel_np.model.files import load_grid_file


def cmd_sweep(args) -> int:
    grid, grid_set_col = load_grid_file(args.grid)
    if getattr(args, "groups", None):
        grid = with_groups(grid.variants(), args.groups)
    _claim_out(args, args.set_column or grid_set_col, [str(label) for label, *_ in grid.variants()])
    if args.dask:
        return _run_dask(
            args, None, grid, args.set_column or grid_set_col, f"Sweep: {_name(args.items)} x {as_path(args.grid).name}"
        )
    t0 = time.perf_counter()
    title = f"Sweep: {_name(args.items)} x {as_path(args.grid).name}"
    if _streams(args, args.set_column or grid_set_col, len(grid.variants())):
        return _run_streaming(args, None, grid, args.set_column or grid_set_col, title, t0)
    table = _load_table(args.items, args.set_column or grid_set_col)
    labels = _labels(args, table)
    result = sweep(table, None, grid, on_error="collect", progress=_progress_enabled(args), threads=args.threads)
    return _finish(args, result, t0, title, labels)
