"""``cupel-np demo``: the presets x two budgets on the sample corpus; Parquet and the HTML report."""

from __future__ import annotations

import json
import time

from cupel_np._fs import as_path
from cupel_np.analysis.sensitivity import sweep
from cupel_np.cli.coldstart import compile_ahead, end_sharing, share_compile
from cupel_np.cli.shared import (
    EXIT_OK,
    _claim_out,
    _load_table,
    _progress_enabled,
    plural,
)
from cupel_np.cli.sweeps import (
    _print_summary,
    _summary_json,
    _write_outputs,
)
from cupel_np.cli.warmup import demo_grid
from cupel_np.data import sample_path
from cupel_np.errors import InvalidConfigError
from cupel_np.io.outdir import KIND_SWEEP, read_manifest, run_id, write_manifest


def cmd_demo(args) -> int:
    items = as_path(args.items) if args.items else sample_path()
    if not items.exists():
        raise InvalidConfigError(f"items file not found: {items}")
    # running the demo again replaces the earlier demo's outputs (nothing else: a directory
    # holding another run's outputs still needs --overwrite)
    args.overwrite = args.overwrite or (read_manifest(args.out) or {}).get("written_by") == "demo"
    _claim_out(args)
    t0 = time.perf_counter()
    # a cold kernel cache: a second process shares the compile, and the kernels are compiled
    # ahead of the sweep in the order that keeps both busy
    sharing = share_compile("demo")
    try:
        compile_ahead(sharing)
        return _run_demo(args, items, t0)
    finally:
        end_sharing(sharing)


def _run_demo(args, items, t0: float) -> int:
    table = _load_table(items, args.set_column)
    result = sweep(table, None, demo_grid(), on_error="collect", progress=_progress_enabled(args), threads=args.threads)
    paths = _write_outputs(result, args.out, title="cupel_np demo: presets x budgets on the sample corpus")
    write_manifest(as_path(args.out), KIND_SWEEP, run_id(result), [], written_by="demo")
    elapsed = time.perf_counter() - t0
    if args.json:
        print(json.dumps(_summary_json(result, paths, elapsed), indent=2))
        return EXIT_OK
    print(
        f"{plural(table.n, 'item')} in {plural(table.n_sets, 'session')} from {items}; "
        f"{plural(len(result.labels), 'variant')} "
        f"(7 presets x 2 budgets); {result.n_swing:,} swinging items; {elapsed:.1f}s"
    )
    _print_summary(result)
    print(f"wrote {', '.join(as_path(p).name for p in paths.values())} to {as_path(args.out).resolve()}")
    return EXIT_OK
