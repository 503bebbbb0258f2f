"""Command line: ``cupel-np`` / ``python -m cupel_np``."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from .errors import CupelError


def _demo(args) -> int:
    import numpy as np

    from .budget import ContextBudget
    from .dotnet import PRESETS
    from .items import ItemTable
    from .pipeline import classify, run_policy
    from .scorers import ScoreContext

    path = Path(args.items)
    t0 = time.perf_counter()
    table = ItemTable.from_parquet(path, set_column=args.set_column)
    budget = ContextBudget(args.max_tokens, args.target_tokens, args.output_reserve)
    cls = classify(table)
    ctx = ScoreContext(table, cls.sc_rows, cls.sc_offsets)  # base scorer columns are shared
    runs = {name: run_policy(table, budget, p, classified=cls, score_context=ctx) for name, p in PRESETS.items()}
    elapsed = time.perf_counter() - t0
    base_name = next(iter(runs))
    base = runs[base_name].included
    print(f"{table.n} items in {table.n_sets} sets from {path}; budget max={budget.max_tokens} "
          f"target={budget.target_tokens} reserve={budget.output_reserve}")
    print(f"{'preset':<13}{'included':>9}{'tokens used':>13}{'utilization':>13}{'failed sets':>13}{'differ vs ' + base_name:>16}")
    for name, r in runs.items():
        used = int(table.tokens[r.included].sum())
        cap = budget.target_tokens * table.n_sets
        failed = sum(e is not None for e in r.error)
        print(f"{name:<13}{int(r.included.sum()):>9}{used:>13}{used / cap:>12.1%}{failed:>13}{int((r.included != base).sum()):>16}")
    print(f"{len(runs)} policies x {table.n} items in {elapsed:.2f}s")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cupel-np", description="Cupel context selection at corpus scale.")
    sub = parser.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("demo", help="run the upstream presets over the sample corpus and summarise")
    d.add_argument("--items", default="data/sample_sessions.parquet", help="items Parquet file")
    d.add_argument("--set-column", default="session_id")
    d.add_argument("--max-tokens", type=int, default=8000)
    d.add_argument("--target-tokens", type=int, default=6000)
    d.add_argument("--output-reserve", type=int, default=1000)
    c = sub.add_parser("conformance", help="run conformance vectors (files or directories)")
    c.add_argument("paths", nargs="+")
    args = parser.parse_args(argv)
    try:
        if args.cmd == "demo":
            return _demo(args)
        from . import conformance

        return conformance.main(args.paths)
    except CupelError as e:
        print(f"cupel-np: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
