"""``cupel-np tune``: search policies over labelled outcomes (``cupel_np.tuning``)."""

from __future__ import annotations

import sys
import time

from cupel_np._files import dumps_json
from cupel_np._fs import as_path
from cupel_np.analysis.signals import policy_scorer_names
from cupel_np.cli.shared import UsageError, flag_budget
from cupel_np.io.dask import connect
from cupel_np.io.outdir import check_out_path, claim_out_dir
from cupel_np.model.datasets import dataset_source
from cupel_np.tuning.output import paired_text, summary_dict, tune_warnings, write_tune
from cupel_np.tuning.search import tune


def cmd_tune(args) -> int:
    """Run the search and write its outputs (exit 0), printing the best against the presets."""
    for flag, v in (("--trials", args.trials), ("--batch-size", args.batch_size), ("--top", args.top)):
        if v < 1:
            raise UsageError(f"{flag} must be an integer >= 1, got {v}")
    if not 0 <= args.holdout < 1:  # checked before the items are read
        raise UsageError(f"--holdout must be in [0, 1), got {args.holdout}")
    # --out is checked before any work (a search can take minutes): not a file, and (unless
    # --overwrite) not holding another run's outputs; it is created only when written
    check_out_path(args.out, "--out")
    if not args.overwrite:
        claim_out_dir(args.out, overwrite=False, create=False)
    budget = None
    if args.max_tokens is not None:
        target = args.target_tokens if args.target_tokens is not None else args.max_tokens - args.output_reserve
        budget = flag_budget(args.max_tokens, target, args.output_reserve)

    src = dataset_source(args.items)
    t0 = time.perf_counter()
    if args.dask:
        with connect(args.dask) as client:
            result = _tune(tune, args, src, budget, client)
    else:
        result = _tune(tune, args, src, budget, None)
    paths = write_tune(result, args.out, overwrite=args.overwrite)
    if args.json:
        print(dumps_json(summary_dict(result, paths), indent=2))
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
            f"{r['label']:<16} {r['kind']:<7} {_num(r['search_token_recall']):>13} "
            f"{_num(r['heldout_token_recall']):>15} {iv:>17}"
        )
    print(paired_text(p, result.heldout_sets if p["part"] == "heldout" else result.search_sets))
    for i, (label, pol, _b) in enumerate(result.best, start=1):
        same = result.equivalents.get(label) or []
        also = f" (selects as {len(same)} other candidate{'s' if len(same) != 1 else ''})" if same else ""
        print(f"best #{i} {label}: {policy_scorer_names(pol)}{also}")
    if result.constant_scorers:
        n = result.constant_checked
        shown = ", ".join(f"{k} on {v:,}/{n:,}" for k, v in result.constant_scorers.items())
        print(f"constant scorers on the search sets: {shown}")
    for w in tune_warnings(result):
        print(f"warning: {w}", file=sys.stderr)
    print(f"wrote {', '.join(as_path(v).name for v in paths.values())} to {as_path(args.out).resolve()}")
    return 0


def _num(v) -> str:
    """A recall in the printed table: n/a where the sets had no relevant item (not 0.000)."""
    return "n/a" if v is None or v != v else f"{v:.3f}"


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
