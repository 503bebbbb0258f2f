"""``cupel-np budget``: budget curves along a ladder of budgets."""

from __future__ import annotations

import time

import pyarrow.parquet as pq

from cupel_np._files import dumps_json
from cupel_np._fs import arrow_location, as_path
from cupel_np.analysis.budget_sim import budget_curves, budget_ladder
from cupel_np.analysis.outcomes import labels_from
from cupel_np.analysis.signals import token_counter_of
from cupel_np.cli.shared import (
    EXIT_OK,
    UsageError,
    _claim_out,
    _load_table,
    _print_failures,
    _set_column_hint,
    plural,
    top_reasons,
    with_groups,
)
from cupel_np.errors import InvalidConfigError
from cupel_np.model.policy import Policy
from cupel_np.model.presets import preset
from cupel_np.report.budget import parse_ladder, print_outcomes, print_summary, summarize, write_budget_outputs


def _ladder(args, lo: int, hi: int, steps: int) -> list:
    """The ladder, its errors in the command's words (the flag and the value given)."""
    try:
        return budget_ladder(lo, hi, steps, spacing=args.spacing, output_reserve=args.output_reserve)
    except InvalidConfigError as e:
        msg = str(e).removeprefix("budget_ladder: ")
        if "output_reserve" in msg:
            raise InvalidConfigError(
                f"--output-reserve {args.output_reserve:,} must be in [0, LO] of --ladder {args.ladder} "
                f"(every budget of the ladder keeps it for the answer)"
            ) from None
        hint = "; start at LO >= 1 or pass --spacing linear" if "geometric" in msg else ""
        raise InvalidConfigError(f"--ladder {args.ladder}: {msg}{hint}") from None


def cmd_budget(args) -> int:
    if not args.policy and not args.preset:
        raise UsageError("give one or more --policy FILE and/or --preset NAME")
    variants = [(as_path(f).stem, Policy.from_file(f)) for f in args.policy or []]
    variants += [(name, preset(name)) for name in args.preset or []]
    if getattr(args, "groups", None):
        variants = with_groups(variants, args.groups)
    lo, hi, steps = parse_ladder(args.ladder)
    ladder = _ladder(args, lo, hi, steps)
    _claim_out(args)
    t0 = time.perf_counter()
    table = _load_table(args.items, args.set_column)
    labels = labels_from(table, args.label_column) if args.label_column else None  # checked before the run
    result = budget_curves(table, variants, ladder)
    errors = [e for e in result.curves.column("error").to_pylist() if e is not None]
    if errors and len(errors) == result.curves.num_rows:  # nothing to draw: say why, write nothing
        n, example = top_reasons(errors, 1)[0]
        raise UsageError(
            f"every (variant, budget, set) cell failed, so there are no curves to draw; most common reason "
            f"({plural(n, 'cell')}): {example}{_set_column_hint(args.items, args.set_column)}"
        )
    tokens = token_counter_of(_file_metadata(args.items))
    paths = write_budget_outputs(
        result, args.out, title=f"Budget simulation: {as_path(args.items).name}", labels=labels, tokens=tokens
    )
    elapsed = time.perf_counter() - t0
    summary = summarize(result.curves, result.rows)
    if args.json:
        out = _budget_json(table, summary, paths, elapsed)
        if labels is not None:
            out["outcomes"] = _outcomes_json(paths)
            out["tokens"] = tokens
        print(dumps_json(out, indent=2))
        return EXIT_OK
    print(
        f"{plural(table.n, 'item')} in {table.n_sets:,} set(s); {len(variants)} variant(s) x "
        f"{len(ladder)} budgets ({lo:,} .. {hi:,}, {args.spacing}); {elapsed:.1f}s"
    )
    print_summary(summary)
    if labels is not None:
        print_outcomes(pq.read_table(paths["outcomes"]), pq.read_table(paths["outcome_reach"]), labels.column)
        print(f"tokens: {tokens}")
    _print_failures(errors)
    print(f"wrote {', '.join(as_path(p).name for p in paths.values())} to {as_path(args.out).resolve()}")
    return EXIT_OK


def _file_metadata(path) -> dict | None:
    """The schema metadata of an items Parquet file (where its token counter may be named)."""
    try:
        if not as_path(path).is_file():
            return None
        fs, where = arrow_location(path)
        return pq.read_schema(where, filesystem=fs).metadata
    except (OSError, ValueError):
        return None


def _outcomes_json(paths: dict) -> dict:
    """Per variant: pooled token recall at each budget, and the budget reaching each share."""
    out: dict = {}
    for r in pq.read_table(paths["outcomes"]).to_pylist():
        out.setdefault(r["variant"], {"recall": {}, "reach": {}})["recall"][str(r["budget"])] = r["token_recall"]
    for r in pq.read_table(paths["outcome_reach"]).to_pylist():
        out.setdefault(r["variant"], {"recall": {}, "reach": {}})["reach"][f"{round(r['fraction'] * 100)}%"] = r[
            "budget"
        ]
    return out


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
