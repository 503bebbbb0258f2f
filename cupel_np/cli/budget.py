"""``cupel-np budget``: budget curves along a ladder of budgets."""

from __future__ import annotations

import time
from pathlib import Path

from cupel_np._files import dumps_json
from cupel_np.analysis.budget_sim import budget_curves, budget_ladder
from cupel_np.cli.shared import (
    EXIT_OK,
    UsageError,
    _claim_out,
    _load_table,
    _print_failures,
    _set_column_hint,
    plural,
    top_reasons,
)
from cupel_np.model.policy import Policy
from cupel_np.model.presets import preset
from cupel_np.report.budget import parse_ladder, print_summary, summarize, write_budget_outputs


def cmd_budget(args) -> int:
    if not args.policy and not args.preset:
        raise UsageError("give one or more --policy FILE and/or --preset NAME")
    variants = [(Path(f).stem, Policy.from_file(f)) for f in args.policy or []]
    variants += [(name, preset(name)) for name in args.preset or []]
    lo, hi, steps = parse_ladder(args.ladder)
    ladder = budget_ladder(lo, hi, steps, spacing=args.spacing, output_reserve=args.output_reserve)
    _claim_out(args)
    t0 = time.perf_counter()
    table = _load_table(args.items, args.set_column)
    result = budget_curves(table, variants, ladder)
    errors = [e for e in result.curves.column("error").to_pylist() if e is not None]
    if errors and len(errors) == result.curves.num_rows:  # nothing to draw: say why, write nothing
        n, example = top_reasons(errors, 1)[0]
        raise UsageError(
            f"every (variant, budget, set) cell failed, so there are no curves to draw; most common reason "
            f"({plural(n, 'cell')}): {example}{_set_column_hint(args.items, args.set_column)}"
        )
    paths = write_budget_outputs(result, args.out, title=f"Budget simulation: {Path(args.items).name}")
    elapsed = time.perf_counter() - t0
    summary = summarize(result.curves, result.rows)
    if args.json:
        print(dumps_json(_budget_json(table, summary, paths, elapsed), indent=2))
        return EXIT_OK
    print(
        f"{plural(table.n, 'item')} in {table.n_sets:,} set(s); {len(variants)} variant(s) x "
        f"{len(ladder)} budgets ({lo:,} .. {hi:,}, {args.spacing}); {elapsed:.1f}s"
    )
    print_summary(summary)
    _print_failures(errors)
    print(f"wrote {', '.join(Path(p).name for p in paths.values())} to {Path(args.out).resolve()}")
    return EXIT_OK


def _budget_json(table, summary: dict, paths: dict, elapsed: float) -> dict:
    keys = ("reach", "total_included", "non_monotonic_rows", "multi_flip_rows", "failed_cells")
    return {
        "items": table.n,
        "sets": table.n_sets,
        "budgets": summary["budgets"],
        "variants": {l: {k: v[k] for k in keys} for l, v in summary["variants"].items()},
        "outputs": {k: str(v) for k, v in paths.items()},
        "seconds": round(elapsed, 3),
    }
