"""``cupel-np sensitivity``: compare labelled policies or presets over an items file."""

from __future__ import annotations

import time

from cupel_np.analysis.sensitivity import sweep
from cupel_np.cli.shared import (
    UsageError,
    _budget,
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
from cupel_np.errors import TooFewVariantsError
from cupel_np.model.files import load_policies_file
from cupel_np.model.presets import preset


def cmd_sensitivity(args) -> int:
    if bool(args.policies) == bool(args.preset):
        raise UsageError("give either --policies FILE or one or more --preset NAME")
    variants = load_policies_file(args.policies) if args.policies else [(p, preset(p)) for p in args.preset]
    if getattr(args, "groups", None):
        variants = with_groups(variants, args.groups)
    if len(variants) < 2:
        raise TooFewVariantsError("sensitivity needs at least 2 variants (policies or presets)")
    budget = _budget(args)
    _claim_out(args, args.set_column, [str(l) for l, *_ in variants])
    if args.dask:
        return _run_dask(args, budget, variants, args.set_column, f"Policy sensitivity: {_name(args.items)}")
    t0 = time.perf_counter()
    title = f"Policy sensitivity: {_name(args.items)}"
    if _streams(args, args.set_column, len(variants)):
        return _run_streaming(args, budget, variants, args.set_column, title, t0)
    table = _load_table(args.items, args.set_column)
    labels = _labels(args, table)
    result = sweep(table, budget, variants, on_error="collect", progress=_progress_enabled(args), threads=args.threads)
    return _finish(args, result, t0, title, labels)
