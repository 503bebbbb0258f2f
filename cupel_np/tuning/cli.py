"""``cupel-np tune``: the subcommand's options and what it runs. ``cupel_np.cli.commands``
registers it with ``add_tune_parser(sub, common)``; heavy imports wait until it runs."""

from __future__ import annotations

import json
import time
from pathlib import Path

__all__ = ["add_tune_parser", "cmd_tune"]


def add_tune_parser(sub, common) -> None:
    """Add the ``tune`` subcommand to the ``cupel-np`` parser."""
    p = sub.add_parser(
        "tune",
        parents=[common],
        help="search policies that keep the labelled-relevant items (Optuna; leaderboard, Pareto front, best policy files)",
    )
    p.add_argument("items", nargs="+", help="items Parquet: a file, a directory or several files")
    p.add_argument("--space", required=True, help="search space TOML (see data/examples/tune_space.toml)")
    p.add_argument("--label-column", required=True, help="relevance label column: boolean or non-negative numbers")
    p.add_argument("--set-column", help="item set key column (sets are split into search and held-out parts)")
    p.add_argument("--trials", type=int, default=256, help="trials in all (default 256)")
    p.add_argument("--batch-size", type=int, default=64, help="trials evaluated together as one sweep (default 64)")
    p.add_argument(
        "--objective",
        default="token_recall",
        choices=["token_recall", "item_recall", "gain_share", "recall_vs_tokens"],
        help="maximise a mean recall, or recall_vs_tokens for a Pareto search (default token_recall)",
    )
    p.add_argument(
        "--sampler",
        default="nsga2",
        choices=["nsga2", "tpe"],
        help="Optuna optimizer: nsga2 (a generation per batch, cheap per trial; default) or tpe",
    )
    p.add_argument("--seed", type=int, default=0, help="optimizer and bootstrap seed (default 0)")
    p.add_argument("--holdout", type=float, default=0.2, help="share of sets held out of the search (default 0.2)")
    p.add_argument("--top", type=int, default=5, help="best policies written and compared (default 5)")
    p.add_argument("--baseline", help="the policy the best one's swing is measured against (default: the best preset)")
    p.add_argument("--max-tokens", type=int, help="budget, when the space file names none")
    p.add_argument("--target-tokens", type=int, help="slicer target (default: max tokens - output reserve)")
    p.add_argument("--output-reserve", type=int, default=0, help="tokens kept for the answer")
    p.add_argument("--out", default="cupel-np-tune", help="output directory (default ./cupel-np-tune)")
    p.add_argument("--overwrite", action="store_true", help="replace the outputs of an earlier tune run in --out")
    p.add_argument(
        "--dask",
        metavar="SPEC",
        help="run every batch of trials on Dask (needs --set-column): local, local:N (a LocalCluster of N workers) "
        "or tcp://HOST:PORT",
    )
    p.set_defaults(func=cmd_tune)


def cmd_tune(args) -> int:
    """Run the search and write its outputs (exit 0), printing the best against the presets."""
    from cupel_np.model.budget import ContextBudget
    from cupel_np.tuning.output import summary_dict, write_tune
    from cupel_np.tuning.search import tune

    budget = None
    if args.max_tokens is not None:
        target = args.target_tokens if args.target_tokens is not None else args.max_tokens - args.output_reserve
        budget = ContextBudget(max_tokens=args.max_tokens, target_tokens=target, output_reserve=args.output_reserve)
    from cupel_np.model.datasets import dataset_source

    src = dataset_source(args.items)
    t0 = time.perf_counter()
    if args.dask:
        from cupel_np.io.dask import connect

        with connect(args.dask) as client:
            result = _tune(tune, args, src, budget, client)
    else:
        result = _tune(tune, args, src, budget, None)
    paths = write_tune(result, args.out, overwrite=args.overwrite)
    if args.json:
        print(json.dumps(summary_dict(result, paths), indent=2))
        return 0
    p = result.paired
    print(
        f"{result.trials} trials ({result.policies_swept} distinct policies; {args.objective}, seed {args.seed}) "
        f"on {result.search_sets} search sets, "
        f"{result.heldout_sets} held out; {time.perf_counter() - t0:.1f}s"
    )
    print(f"{'policy':<16} {'kind':<7} {'search recall':>13} {'held-out recall':>15} {'95% interval':>17}")
    for r in result.comparison.to_pylist():
        lo, hi = r["heldout_token_recall_lo"], r["heldout_token_recall_hi"]
        iv = f"{lo:.3f}-{hi:.3f}" if lo is not None and hi is not None else ""
        print(
            f"{r['label']:<16} {r['kind']:<7} {r['search_token_recall'] or 0:>13.3f} "
            f"{r['heldout_token_recall'] or 0:>15.3f} {iv:>17}"
        )
    print(
        f"{p['a']} vs {p['b']} on the {p['part']} sets: {p['mean_diff']:+.3f} {p['metric']} "
        f"({p['lo']:+.3f} to {p['hi']:+.3f}), {p['wins']} wins / {p['ties']} ties / {p['losses']} losses"
    )
    print(f"wrote {', '.join(Path(v).name for v in paths.values())} to {Path(args.out).resolve()}")
    return 0


def _tune(tune, args, src, budget, client):
    """``tune`` with the command's options (on Dask when ``client`` is given)."""
    return tune(
        src,
        args.space,
        budget,
        label_column=args.label_column,
        set_column=args.set_column,
        objective=args.objective,
        trials=args.trials,
        seed=args.seed,
        holdout=args.holdout,
        batch_size=args.batch_size,
        top=args.top,
        baseline=args.baseline,
        sampler=args.sampler,
        threads=args.threads,
        client=client,
        progress=None if not args.quiet else False,
    )
