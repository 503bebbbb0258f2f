"""What ``sensitivity``, ``sweep`` and ``demo`` share: the run in memory, streamed in chunks of
whole item sets, or on Dask, and the written outputs and printed summary of each."""

from __future__ import annotations

import sys
import time

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pds
import pyarrow.parquet as pq

from cupel_np._files import dumps_json
from cupel_np._fs import arrow_location, as_path
from cupel_np.analysis.losses import check_lines
from cupel_np.analysis.outcomes import labels_from, outcome_summary, outcome_summary_of_table
from cupel_np.cli.shared import (
    EXIT_OK,
    UsageError,
    _memory_limit,
    _name,
    _print_failures,
    _progress_enabled,
    _source,
    _written_failures,
    all_cells_failed,
    plural,
)
from cupel_np.io.dask import connect, outcome_summary_of_parts
from cupel_np.io.dask import sweep as dask_sweep
from cupel_np.io.outdir import read_manifest
from cupel_np.io.parquet import sweep_parquet, write_sweep
from cupel_np.model.datasets import check_page_fits, needs_streaming
from cupel_np.report.from_dir import write_dir_report
from cupel_np.report.from_result import write_html_report
from cupel_np.report.sweep_dir import load_sweep_dir
from cupel_np.text import display_text


def _run_dask(args, budget, variants, set_column, title: str) -> int:
    """A sensitivity/sweep command on Dask: parts written by the workers, report from them."""
    if not set_column:
        raise UsageError("--dask needs --set-column (the unit of work is a partition of whole item sets)")
    check_page_fits(len(variants.variants()) if hasattr(variants, "variants") else len(variants), _memory_limit(args))
    with connect(args.dask) as client:
        summary = dask_sweep(
            _source(args.items),
            budget,
            variants,
            set_column=set_column,
            out_dir=args.out,
            client=client,
            on_error="collect",
            overwrite=args.overwrite,
            progress=_progress_enabled(args),
            label_column=args.label_column,
        )
    report = write_dir_report(args.out, title=title)
    outcomes = None
    if args.label_column:
        labels = [v["label"] for v in (read_manifest(args.out) or {}).get("variants", [])]
        outcomes = outcome_summary_of_parts(args.out, labels, metrics=("token_recall",))
    if args.json:
        extra = {} if outcomes is None else {"outcomes": _outcome_json(outcomes)}
        print(
            dumps_json(
                {**summary, "outputs": {"dir": str(as_path(args.out)), "report": str(report)}, **extra}, indent=2
            )
        )
        all_cells_failed(sum(summary["failed"].values()), summary["sets"] * len(variants), args.items, set_column)
        return EXIT_OK
    failed = sum(summary["failed"].values())
    print(
        f"{plural(summary['rows'], 'item')} in {summary['sets']:,} set(s) on Dask ({args.dask}, "
        f"{plural(summary['partitions'], 'partition')}{', shuffled on the set key' if summary['shuffled'] else ''}); "
        f"{plural(summary['swing'], 'swinging item')}; {plural(failed, 'failed (variant, set) cell')}; "
        f"{summary['seconds']:.1f}s"
    )
    s = load_sweep_dir(args.out)
    _print_table(s.labels, s.included, s.tokens, s.target, s.swing_included, s.failed, s.orphans)
    if outcomes is not None:
        _print_outcomes(outcomes, args.label_column)
    _print_failures(_written_failures(args.out))
    dirs = "items/, diffs/, variants/, outcomes/" if outcomes is not None else "items/, diffs/, variants/"
    print(f"wrote {dirs}, manifest.json and {report.name} to {as_path(args.out).resolve()}")
    all_cells_failed(failed, summary["sets"] * len(s.labels), args.items, set_column)
    return EXIT_OK


def _streams(args, set_column, n_variants: int) -> bool:
    """Whether a sensitivity/sweep run of ``n_variants`` variants streams: asked for
    (``--chunk-rows``), or the input's estimated in-memory peak for that many variants is over
    the memory limit (``datasets.needs_streaming``, which also refuses an input over the limit
    without a set column: one item set cannot be cut). A run whose report page alone is estimated
    over the limit (many variants) is refused first (``datasets.check_page_fits``)."""
    check_page_fits(n_variants, _memory_limit(args))
    if args.chunk_rows is not None:
        if args.chunk_rows < 1:
            raise UsageError(f"--chunk-rows must be at least 1, got {args.chunk_rows}")
        if not set_column:
            raise UsageError("--chunk-rows needs a set column (chunks hold whole item sets)")
        return True
    src = _source(args.items)
    d = needs_streaming(src, _memory_limit(args), set_column=set_column, n_variants=n_variants, where=_name(args.items))
    return d is not None


def _run_streaming(args, budget, variants, set_column, title: str, t0: float) -> int:
    """A sensitivity/sweep run in chunks of whole item sets (``io.sweep_parquet``): the same
    Parquet outputs as the in-memory run, and the report built from them (``report_dir``)."""
    tot = sweep_parquet(
        _source(args.items),
        budget,
        variants,
        args.out,
        set_column=set_column,
        chunk_rows=args.chunk_rows,
        on_error="collect",
        progress=_progress_enabled(args),
        memory_limit=_memory_limit(args),
        threads=args.threads,
        label_column=args.label_column,
    )
    report = write_dir_report(args.out, title=title)
    elapsed = time.perf_counter() - t0
    out = as_path(args.out)
    paths = {k: str(out / f"{k}.parquet") for k in ("diffs", "variants", "items")}
    paths["report"] = str(report)
    s = load_sweep_dir(out)
    summary = _streamed_outcomes(out, s.labels, paths) if args.label_column else None
    if args.json:
        errs = (
            pds.dataset(_where(out / "variants.parquet")[0], format="parquet", filesystem=_where(out)[1])
            .to_table(columns=["variant", s.set_column or "set", "error"], filter=pds.field("error").is_valid())
            .to_pylist()
        )
        errors: dict = {}
        for r in errs:
            errors.setdefault(r["variant"], {})[str(r[s.set_column or "set"])] = r["error"]
        print(
            dumps_json(
                {
                    "items": tot["rows"],
                    "sets": tot["sets"],
                    "variants": s.labels,
                    "swinging": tot["swing"],
                    "errors": errors,
                    "outputs": paths,
                    "seconds": round(elapsed, 3),
                    "streamed": {"chunks": tot["chunks"], "chunk_rows": tot["chunk_rows"]},
                    **({"outcomes": _outcome_json(summary)} if summary is not None else {}),
                },
                indent=2,
            )
        )
        all_cells_failed(int(s.failed.sum()), tot["sets"] * len(s.labels), args.items, set_column)
        return EXIT_OK
    print(
        f"{plural(tot['rows'], 'item')} in {tot['sets']:,} set(s); {plural(len(s.labels), 'variant')}; "
        f"{plural(tot['swing'], 'swinging item')}; {elapsed:.1f}s (streamed in {plural(tot['chunks'], 'chunk')} "
        "of whole sets)"
    )
    _print_table(s.labels, s.included, s.tokens, s.target, s.swing_included, s.failed, s.orphans)
    if summary is not None:
        _print_outcomes(summary, args.label_column)
    _print_failures(_written_failures(out))
    print(f"wrote {', '.join(as_path(p).name for p in paths.values())} to {out.resolve()}")
    all_cells_failed(int(s.failed.sum()), tot["sets"] * len(s.labels), args.items, set_column)
    return EXIT_OK


def _streamed_outcomes(out, labels: list[str], paths: dict):
    """The per-variant outcome summary of a streamed run, from its ``outcomes.parquet``."""
    f = out / "outcomes.parquet"
    if not f.is_file():  # an empty input writes no part
        return pa.table({"variant": pa.array([], pa.string())})
    paths["outcomes"] = str(f)
    where, fs = _where(f)
    return outcome_summary_of_table(pq.read_table(where, filesystem=fs), labels, metrics=("token_recall",))


def _where(path) -> tuple:
    """``(path, filesystem)`` of a local path or URL, for pyarrow's readers."""
    fs, where = arrow_location(path)
    return where, fs


def _print_summary(result, out=None) -> None:
    out = out or sys.stdout
    vt = result.variants_table()
    ok = pc.is_null(vt["error"])
    failed = pc.invert(ok)
    zero = pa.scalar(0, pa.int64())
    t = pa.table(
        {
            "variant": vt["variant"],
            "included": pc.if_else(ok, vt["included_count"].cast(pa.int64()), zero),
            "tokens": pc.if_else(ok, vt["tokens_used"].cast(pa.int64()), zero),
            "target": pc.if_else(ok, vt["target_tokens"].cast(pa.int64()), zero),
            "swing_in": pc.if_else(ok, vt["swing_included"].cast(pa.int64()), zero),
            "failed": failed.cast(pa.int64()),
        }
    )
    agg = (
        t.group_by("variant", use_threads=False)
        .aggregate([(c, "sum") for c in ("included", "tokens", "target", "swing_in", "failed")])
        .to_pydict()
    )
    stats = {
        lab: {k: agg[f"{k}_sum"][i] for k in ("included", "tokens", "target", "swing_in", "failed")}
        for i, lab in enumerate(agg["variant"])
    }
    orphans = result.orphan_totals()  # None: the items carry no tool call/result link
    labels = [lab for lab in result.labels if lab in stats]  # one line per variant, in variant order
    cols = [[stats[lab][k] for lab in labels] for k in ("included", "tokens", "target", "swing_in", "failed")]
    _print_table(labels, *cols, orphans, out=out)


#: the longest variant label the per-variant table prints whole (a longer one is cut, with the
#: number of characters left out; the Parquet outputs and the page keep the whole label)
TABLE_LABEL_LIMIT = 120


def _print_table(labels, included, tokens, target, swing_in, failed, orphans, out=None) -> None:
    """The per-variant table every sensitivity/sweep run prints (in memory, streamed or on
    Dask): one line per variant, with the orphan columns when the items carry tool pairs. A
    label longer than ``TABLE_LABEL_LIMIT`` characters is cut for display (the outputs keep it)."""
    shown = [display_text(lab, TABLE_LABEL_LIMIT) for lab in labels]
    w = max([8, *(len(l) for l in shown)])
    pairs_head = f" {'orphan calls':>12} {'orphan results':>14}" if orphans is not None else ""
    print(
        f"{'variant':<{w}}  {'included':>9} {'tokens used':>12} {'target util':>11} {'swing incl.':>11} {'failed sets':>11}"
        + pairs_head,
        file=out or sys.stdout,
    )
    for v, lab in enumerate(labels):
        util = tokens[v] / target[v] if target[v] else 0.0
        pairs = f" {orphans[lab][0]:>12,} {orphans[lab][1]:>14,}" if orphans is not None else ""
        print(
            f"{shown[v]:<{w}}  {int(included[v]):>9,} {int(tokens[v]):>12,} {util:>11.1%} {int(swing_in[v]):>11,} "
            f"{int(failed[v]):>11,}" + pairs,
            file=out or sys.stdout,
        )


def _write_outputs(result, out_dir, *, title: str, html: bool = True, labels=None) -> dict:
    paths = {k: str(v) for k, v in write_sweep(result, out_dir, labels=labels).items()}
    if html:
        paths["report"] = str(write_html_report(result, out_dir, title=title, labels=labels))
    return paths


def _summary_json(result, paths: dict, elapsed: float) -> dict:
    return {
        "items": result.table.n,
        "sets": result.table.n_sets,
        "variants": result.labels,
        "swinging": result.n_swing,
        **(
            {"orphans": {l: {"calls": c, "results": r} for l, (c, r) in totals.items()}}
            if (totals := result.orphan_totals()) is not None
            else {}
        ),
        "errors": {l: {str(k): str(e) for k, e in errs.items()} for l, errs in result.errors.items()},
        "outputs": paths,
        "seconds": round(elapsed, 3),
    }


def _labels(args, table):
    """The ``--label-column`` labels, read and checked before the sweep runs (None without it)."""
    if not getattr(args, "label_column", None):
        return None

    return labels_from(table, args.label_column)


def _outcome_json(summary) -> dict:
    return {r["variant"]: {k: v for k, v in r.items() if k != "variant"} for r in summary.to_pylist()}


def _print_outcomes(summary, column: str) -> None:
    """One line per variant: its mean token recall over the labelled sets, with the interval."""
    if summary.num_rows == 0:
        return
    first = summary.slice(0, 1).to_pylist()[0]
    scored = first["sets_labelled"] - first["sets_without_relevant"]
    if scored == 0:  # the policies were compared, but the outcome lines measure nothing
        print(
            f"warning: no set has an item labelled relevant in {column!r} "
            f"({first['sets_labelled']:,} labelled, {first['sets_unlabelled']:,} unlabelled): token recall is "
            "n/a for every variant; check the column's values (true marks a relevant item)",
            file=sys.stderr,
        )
    print(
        f"token recall by {column!r}: mean over the {plural(scored, 'set')} with a relevant item, 95% bootstrap "
        f"interval ({first['sets_labelled']:,} labelled, {first['sets_unlabelled']:,} unlabelled left out):"
    )
    w = max([8, *(len(v) for v in summary.column("variant").to_pylist())])
    for r in summary.to_pylist():
        m, lo, hi = r["token_recall"], r["token_recall_lo"], r["token_recall_hi"]
        shown = "n/a" if m is None else f"{m:.3f} [{lo:.3f}, {hi:.3f}]"
        failed = f"  ({plural(r['sets_failed'], 'failed set')})" if r["sets_failed"] else ""
        print(f"  {r['variant']:<{w}}  {shown}{failed}")


def _finish(args, result, t0: float, title: str, labels=None) -> int:
    """Write the outputs of a sensitivity/sweep command and print its summary."""
    paths = _write_outputs(result, args.out, title=title, labels=labels)
    summary = None
    if labels is not None:
        summary = outcome_summary(result, labels, metrics=("token_recall",))
    elapsed = time.perf_counter() - t0
    checks = check_lines(result)
    if args.json:
        out = _summary_json(result, paths, elapsed)
        out["checks"] = checks
        if summary is not None:
            out["outcomes"] = _outcome_json(summary)
        print(dumps_json(out, indent=2))
        _all_failed(args, result)
        return EXIT_OK
    t = result.table
    print(
        f"{plural(t.n, 'item')} in {t.n_sets:,} set(s); {plural(len(result.labels), 'variant')}; "
        f"{plural(result.n_swing, 'swinging item')}; {elapsed:.1f}s"
    )
    _print_summary(result)
    for line in checks:  # constant scorers, knapsack capacity, empty selections
        print(f"check: {line}")
    if summary is not None:
        _print_outcomes(summary, labels.column)
    _print_failures(str(e) for errs in result.errors.values() for e in errs.values())
    print(f"wrote {', '.join(as_path(p).name for p in paths.values())} to {as_path(args.out).resolve()}")
    _all_failed(args, result)
    return EXIT_OK


def _all_failed(args, result) -> None:
    failed = sum(len(errs) for errs in result.errors.values())
    all_cells_failed(failed, result.table.n_sets * len(result.labels), args.items, result.table.set_column)
