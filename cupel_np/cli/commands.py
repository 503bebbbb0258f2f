"""Command line: ``cupel-np`` / ``python -m cupel_np``.

Exit status: 0 ok, 2 bad usage or bad input (one line on stderr naming the file, field, row
and value), 1 internal error. ``--debug`` shows tracebacks.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

from cupel_np._files import read_data_file
from cupel_np._version import __version__
from cupel_np.errors import CupelError, InvalidConfigError
from cupel_np.model.custom_scorers import load_plugins

EXIT_OK, EXIT_INTERNAL, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    pass


def _err(msg: str) -> None:
    print(f"cupel-np: error: {msg}", file=sys.stderr)


def _progress_enabled(args) -> bool:
    return not args.quiet and sys.stderr.isatty()


def kernels_cached() -> bool:
    """Whether the compiled kernels every run needs are in Numba's on-disk cache (a cold
    first run compiles them for ~10-20 s). True when JIT is off or the cache cannot be read."""
    if os.environ.get("NUMBA_DISABLE_JIT") == "1":
        return True
    from cupel_np.engine import batch_kernels

    try:
        return os.path.exists(batch_kernels.variant_scores._cache._cache_file._index_path)
    except AttributeError:  # another Numba version's internals: say nothing rather than guess
        return True


def _say_if_compiling(args) -> None:
    """On a terminal, a cold first run says why it is silent for a while (stderr only)."""
    if not getattr(args, "quiet", False) and sys.stderr.isatty() and not kernels_cached():
        print("cupel-np: compiling kernels, first run only (10-20 s) ...", file=sys.stderr, flush=True)


def _claim_out(args, set_column=None, labels=()) -> Path:
    """Check ``--out`` before any work: not an existing file, and not holding another run's
    outputs unless ``--overwrite`` (which removes them; ``io.outdir`` names what is ours);
    and a set column whose name the outputs use is refused before anything is read."""
    from cupel_np.io.outdir import check_set_column, claim_out_dir

    check_set_column(set_column, labels)
    return claim_out_dir(args.out, overwrite=args.overwrite, create=False)


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 chunk``, ``2 chunks``, ``1,000 partitions`` (``many`` for irregular plurals)."""
    return f"{n:,} {word if n == 1 else (many or word + 's')}"


_PREFIX = re.compile(r"^(variant '[^']*': )?(set .*?: )?")


def top_reasons(messages, k: int = 3) -> list[tuple[int, str]]:
    """The ``k`` most common failure reasons among error ``messages``: messages that differ
    only in the variant, the set or the numbers count as one reason; each comes with its
    count and one full example, most common first."""
    groups: dict[str, list] = {}
    for m in messages:
        m = str(m)
        key = re.sub(r"\d[\d,]*", "N", _PREFIX.sub("", m, count=1))
        g = groups.setdefault(key, [0, m])
        g[0] += 1
    ranked = sorted(groups.values(), key=lambda g: -g[0])
    return [(n, ex) for n, ex in ranked[:k]]


def _print_failures(messages, out=None) -> None:
    """Why (variant, set) cells failed: the top reasons with counts and an example each."""
    msgs = list(messages)
    if not msgs:
        return
    print(f"{plural(len(msgs), 'failed (variant, set) cell')}; most common reasons:", file=out)
    for n, ex in top_reasons(msgs):
        print(f"  {n:>6,} x {_one_line(ex, 160)}", file=out)


def _written_failures(out) -> list[str]:
    """The error of every failed (variant, set) cell of a written sweep (``variants`` output)."""
    import pyarrow.dataset as pds

    f = Path(out) / "variants.parquet"
    src = f if f.is_file() else Path(out) / "variants"
    if not src.exists():
        return []
    t = pds.dataset(str(src), format="parquet").to_table(columns=["error"], filter=pds.field("error").is_valid())
    return [str(e) for e in t.column("error").to_pylist()]


def _set_column_hint(items, set_column) -> str:
    """When no set column was given though the input has columns other than item fields:
    a hint naming them (the whole input was taken as ONE item set)."""
    if set_column:
        return ""
    import pyarrow as pa

    from cupel_np.model.datasets import open_dataset
    from cupel_np.model.items import ITEM_FIELDS

    try:
        schema = open_dataset(_source(items)).schema
    except CupelError:
        return ""

    def key_like(t) -> bool:  # a set key is text or a whole number, never a score or a flag
        if pa.types.is_dictionary(t):
            t = t.value_type
        return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_integer(t)

    other = [f.name for f in schema if f.name not in ITEM_FIELDS and key_like(f.type)]
    if not other:
        return ""
    return (
        f"; without --set-column the whole input is ONE item set: if it holds several, name the set-key "
        f"column with --set-column ({', '.join(other[:3])}?)"
    )


# ----------------------------------------------------------------------------- loading
def _load_table(path, set_column):
    from cupel_np.model.items import ItemTable

    return ItemTable.from_parquet(_source(path), set_column=set_column)


def _source(items):
    from cupel_np.model.datasets import dataset_source

    return dataset_source(items)


def _name(items) -> str:
    src = _source(items)
    return Path(src).name if not isinstance(src, list) else f"{Path(src[0]).name} (+{len(src) - 1} files)"


def _run_dask(args, budget, variants, set_column, title: str) -> int:
    """A sensitivity/sweep command on Dask: parts written by the workers, report from them."""
    from cupel_np.io.dask import connect
    from cupel_np.io.dask import sweep as dask_sweep
    from cupel_np.report.from_dir import write_dir_report

    if not set_column:
        raise UsageError("--dask needs --set-column (the unit of work is a partition of whole item sets)")
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
        from cupel_np.io.dask import outcome_summary_of_parts
        from cupel_np.io.outdir import read_manifest

        labels = [v["label"] for v in (read_manifest(args.out) or {}).get("variants", [])]
        outcomes = outcome_summary_of_parts(args.out, labels, metrics=("token_recall",))
    if args.json:
        extra = {} if outcomes is None else {"outcomes": _outcome_json(outcomes)}
        print(
            json.dumps({**summary, "outputs": {"dir": str(Path(args.out)), "report": str(report)}, **extra}, indent=2)
        )
        return EXIT_OK
    failed = sum(summary["failed"].values())
    print(
        f"{plural(summary['rows'], 'item')} in {summary['sets']:,} set(s) on Dask ({args.dask}, "
        f"{plural(summary['partitions'], 'partition')}{', shuffled on the set key' if summary['shuffled'] else ''}); "
        f"{plural(summary['swing'], 'swinging item')}; {plural(failed, 'failed (variant, set) cell')}; "
        f"{summary['seconds']:.1f}s"
    )
    if outcomes is not None:
        _print_outcomes(outcomes, args.label_column)
    _print_failures(_written_failures(args.out))
    dirs = "items/, diffs/, variants/, outcomes/" if outcomes is not None else "items/, diffs/, variants/"
    print(f"wrote {dirs}, manifest.json and {report.name} to {Path(args.out).resolve()}")
    return EXIT_OK


def _memory_limit(args) -> int:
    """``--memory-limit`` in bytes (default: ``datasets.default_memory_limit()``)."""
    from cupel_np.model.datasets import default_memory_limit, parse_size

    return default_memory_limit() if args.memory_limit is None else parse_size(args.memory_limit, "--memory-limit")


def _streams(args, set_column, n_variants: int) -> bool:
    """Whether a sensitivity/sweep run of ``n_variants`` variants streams: asked for
    (``--chunk-rows``), or the input's estimated in-memory peak for that many variants is over
    the memory limit (``datasets.needs_streaming``, which also refuses an input over the limit
    without a set column: one item set cannot be cut)."""
    from cupel_np.model.datasets import needs_streaming

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
    from cupel_np.io.parquet import sweep_parquet
    from cupel_np.report.from_dir import load_sweep_dir, write_dir_report

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
    out = Path(args.out)
    paths = {k: str(out / f"{k}.parquet") for k in ("diffs", "variants", "items")}
    paths["report"] = str(report)
    s = load_sweep_dir(out)
    summary = _streamed_outcomes(out, s.labels, paths) if args.label_column else None
    if args.json:
        import pyarrow.dataset as pds

        errs = (
            pds.dataset(str(out / "variants.parquet"))
            .to_table(columns=["variant", s.set_column or "set", "error"], filter=pds.field("error").is_valid())
            .to_pylist()
        )
        errors: dict = {}
        for r in errs:
            errors.setdefault(r["variant"], {})[str(r[s.set_column or "set"])] = r["error"]
        print(
            json.dumps(
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
        return EXIT_OK
    print(
        f"{plural(tot['rows'], 'item')} in {tot['sets']:,} set(s); {plural(len(s.labels), 'variant')}; "
        f"{plural(tot['swing'], 'swinging item')}; {elapsed:.1f}s (streamed in {plural(tot['chunks'], 'chunk')} "
        "of whole sets)"
    )
    w = max([8, *(len(l) for l in s.labels)])
    print(
        f"{'variant':<{w}}  {'included':>9} {'tokens used':>12} {'target util':>11} {'swing incl.':>11} {'failed sets':>11}"
    )
    for v, lab in enumerate(s.labels):
        util = s.tokens[v] / s.target[v] if s.target[v] else 0.0
        print(
            f"{lab:<{w}}  {s.included[v]:>9,} {s.tokens[v]:>12,} {util:>11.1%} {s.swing_included[v]:>11,} {s.failed[v]:>11,}"
        )
    if summary is not None:
        _print_outcomes(summary, args.label_column)
    _print_failures(_written_failures(out))
    print(f"wrote {', '.join(Path(p).name for p in paths.values())} to {out.resolve()}")
    return EXIT_OK


def _streamed_outcomes(out: Path, labels: list[str], paths: dict):
    """The per-variant outcome summary of a streamed run, from its ``outcomes.parquet``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from cupel_np.analysis.outcomes import outcome_summary_of_table

    f = out / "outcomes.parquet"
    if not f.is_file():  # an empty input writes no part
        return pa.table({"variant": pa.array([], pa.string())})
    paths["outcomes"] = str(f)
    return outcome_summary_of_table(pq.read_table(f), labels, metrics=("token_recall",))


def _budget(args):
    from cupel_np.model.budget import ContextBudget

    if args.max_tokens is None or args.target_tokens is None:
        raise UsageError("--max-tokens and --target-tokens are required")
    return ContextBudget(args.max_tokens, args.target_tokens, args.output_reserve or 0)


def _read_data_file(path) -> object:
    return read_data_file(path, default="json")


def _policy_from_obj(obj, where: str):
    """One policy of a policies or grid file (its ``label`` already taken off): ``preset =
    "name"``, a ``config`` table, the config keys inline, or a .NET policy object. Every key is
    checked; errors are prefixed with ``where``."""
    from cupel_np.model.fields import require_keys
    from cupel_np.model.policy import Policy, is_dotnet_shape

    if not isinstance(obj, dict):
        raise InvalidConfigError(f"{where}: a policy must be a table/object")
    try:
        if "preset" in obj:
            from cupel_np.model.presets import preset

            require_keys("entry", obj, ("preset",), what="beside 'preset'")
            return preset(obj["preset"])
        if "config" in obj:
            require_keys("entry", obj, ("config",), what="beside 'config'")
            return Policy.from_dict(obj["config"])
        if is_dotnet_shape(obj):
            return Policy.from_dotnet_json(obj)
        return Policy.from_dict(obj)
    except CupelError as e:
        raise type(e)(f"{where}: {e}") from None


def _labelled(e, where: str) -> tuple[str, dict]:
    """A ``[[variants]]`` / ``[[policies]]`` entry: its label and the rest of the entry."""
    if not isinstance(e, dict) or not e.get("label"):
        raise InvalidConfigError(f"{where} needs a 'label'")
    if not isinstance(e["label"], str):
        raise InvalidConfigError(f"{where}: 'label' must be a string, got {e['label']!r}")
    return e["label"], {k: v for k, v in e.items() if k != "label"}


def load_policies_file(path) -> list[tuple[str, object]]:
    """Labelled policies from a JSON/TOML file: ``[[variants]]`` tables (``label`` plus
    ``config``, ``preset``, or a .NET policy object), or a mapping label -> policy. A key no
    reader knows is an error naming the file, the entry and the key."""
    from cupel_np.model.fields import require_keys

    data = _read_data_file(path)
    if isinstance(data, dict) and "variants" in data:
        require_keys(str(path), data, ("variants",), what="beside 'variants'")
        entries = data["variants"]
        if not isinstance(entries, list):
            raise InvalidConfigError(f"{path}: 'variants' must be a list")
        out = []
        for i, e in enumerate(entries):
            label, rest = _labelled(e, f"{path}: variants[{i}]")
            out.append((label, _policy_from_obj(rest, f"{path}: variants[{i}] ({label!r})")))
        return out
    if isinstance(data, dict):
        return [(k, _policy_from_obj(v, f"{path}: variant {k!r}")) for k, v in data.items()]
    raise InvalidConfigError(f"{path}: expected 'variants' or a mapping of label -> policy")


GRID_KEYS = ("presets", "policies", "weights", "slicers", "placers", "budgets", "set_column")


def _grid_weights(path, data: dict):
    weights = data.get("weights")
    if isinstance(weights, dict):
        weights = [weights]
    if weights is not None and not (isinstance(weights, list) and all(isinstance(w, dict) for w in weights)):
        raise InvalidConfigError(f"{path}: 'weights' must be a list of tables of scorer type -> weight")
    for i, w in enumerate(weights or []):
        for k, x in w.items():
            if isinstance(x, bool) or not isinstance(x, (int, float)):
                raise InvalidConfigError(f"{path}: weights[{i}].{k} must be a number, got {x!r}")
    return weights


def _grid_policies(path, data: dict) -> dict:
    from cupel_np.model.presets import preset

    presets = data.get("presets", [])
    if isinstance(presets, str):
        presets = [presets]
    if not isinstance(presets, list):
        raise InvalidConfigError(f"{path}: 'presets' must be a list of preset names")
    policies = {}
    for name in presets:
        policies[str(name)] = preset(str(name))
    entries = data.get("policies", [])
    if not isinstance(entries, list):
        raise InvalidConfigError(f"{path}: 'policies' must be a list of [[policies]] tables")
    for i, e in enumerate(entries):
        label, rest = _labelled(e, f"{path}: policies[{i}]")
        policies[label] = _policy_from_obj(rest, f"{path}: policies[{i}] ({label!r})")
    if not policies:
        raise InvalidConfigError(f"{path}: the grid needs 'presets' and/or 'policies'")
    return policies


def _grid_budgets(path, data: dict) -> list:
    from cupel_np.model.budget import ContextBudget

    budgets = []
    entries = data.get("budgets", [])
    if not isinstance(entries, list):
        raise InvalidConfigError(f"{path}: 'budgets' must be a list of [[budgets]] tables")
    for i, b in enumerate(entries):
        if not isinstance(b, dict):
            raise InvalidConfigError(f"{path}: budgets[{i}] must be a table")
        try:
            budgets.append(ContextBudget.from_dict(b))
        except CupelError as e:
            raise type(e)(f"{path}: budgets[{i}]: {e}") from None
    if not budgets:
        raise InvalidConfigError(f"{path}: the grid needs at least one [[budgets]] entry")
    return budgets


def load_grid_file(path):
    """A Sweep grid (see docs/cli.md 'Grid files') plus the grid's default set column. A key no
    reader knows, at any depth, is an error naming the file, where it is and the key."""
    from cupel_np.model.fields import require_keys
    from cupel_np.model.grid import Sweep

    data = _read_data_file(path)
    if not isinstance(data, dict):
        raise InvalidConfigError(f"{path}: a grid file must be a table/object")
    require_keys(str(path), data, GRID_KEYS, what="in a grid file")
    policies = _grid_policies(path, data)
    weights = _grid_weights(path, data)
    budgets = _grid_budgets(path, data)
    try:
        grid = Sweep(
            policies, weights=weights, slicers=data.get("slicers"), placers=data.get("placers"), budgets=budgets
        )
        grid.variants()
    except CupelError as e:
        raise type(e)(f"{path}: {e}") from None
    return grid, data.get("set_column")


# ----------------------------------------------------------------------------- output
def _print_summary(result, out=None) -> None:
    import pyarrow as pa
    import pyarrow.compute as pc

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
    w = max([8, *(len(l) for l in stats)])
    orphans = result.orphan_totals()  # None: the items carry no tool call/result link
    pairs_head = f" {'orphan calls':>12} {'orphan results':>14}" if orphans is not None else ""
    print(
        f"{'variant':<{w}}  {'included':>9} {'tokens used':>12} {'target util':>11} {'swing incl.':>11} {'failed sets':>11}"
        + pairs_head,
        file=out,
    )
    for lab in result.labels:  # one line per variant, in variant order
        if lab not in stats:
            continue
        s = stats.pop(lab)
        util = s["tokens"] / s["target"] if s["target"] else 0.0
        pairs = f" {orphans[lab][0]:>12,} {orphans[lab][1]:>14,}" if orphans is not None else ""
        print(
            f"{lab:<{w}}  {s['included']:>9,} {s['tokens']:>12,} {util:>11.1%} {s['swing_in']:>11,} {s['failed']:>11,}"
            + pairs,
            file=out,
        )


def _write_outputs(result, out_dir, *, title: str, html: bool = True, labels=None) -> dict:
    from cupel_np.io.parquet import write_sweep

    paths = {k: str(v) for k, v in write_sweep(result, out_dir, labels=labels).items()}
    if html:
        from cupel_np.report.html import write_html_report

        paths["report"] = str(write_html_report(result, out_dir, title=title))
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


# ----------------------------------------------------------------------------- commands
def cmd_demo(args) -> int:
    from cupel_np.analysis.sensitivity import sweep
    from cupel_np.data import sample_path
    from cupel_np.io.outdir import KIND_SWEEP, read_manifest, run_id, write_manifest
    from cupel_np.model.budget import ContextBudget
    from cupel_np.model.grid import Sweep
    from cupel_np.model.presets import PRESETS

    items = Path(args.items) if args.items else sample_path()
    if not items.exists():
        raise InvalidConfigError(f"items file not found: {items}")
    # running the demo again replaces the earlier demo's outputs (nothing else: a directory
    # holding another run's outputs still needs --overwrite)
    args.overwrite = args.overwrite or (read_manifest(args.out) or {}).get("written_by") == "demo"
    _claim_out(args)
    t0 = time.perf_counter()
    table = _load_table(items, args.set_column)
    grid = Sweep(list(PRESETS), budgets=[ContextBudget(8000, 6000, 1000), ContextBudget(4000, 3000, 500)])
    result = sweep(table, None, grid, on_error="collect", progress=_progress_enabled(args), threads=args.threads)
    paths = _write_outputs(result, args.out, title="cupel_np demo: presets x budgets on the sample corpus")
    write_manifest(Path(args.out), KIND_SWEEP, run_id(result), [], written_by="demo")
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
    print(f"wrote {', '.join(Path(p).name for p in paths.values())} to {Path(args.out).resolve()}")
    return EXIT_OK


def cmd_sensitivity(args) -> int:
    from cupel_np.analysis.sensitivity import sweep
    from cupel_np.model.presets import preset

    if bool(args.policies) == bool(args.preset):
        raise UsageError("give either --policies FILE or one or more --preset NAME")
    variants = load_policies_file(args.policies) if args.policies else [(p, preset(p)) for p in args.preset]
    if len(variants) < 2:
        from cupel_np.errors import TooFewVariantsError

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


def cmd_sweep(args) -> int:
    from cupel_np.analysis.sensitivity import sweep

    grid, grid_set_col = load_grid_file(args.grid)
    _claim_out(args, args.set_column or grid_set_col, [str(label) for label, *_ in grid.variants()])
    if args.dask:
        return _run_dask(
            args, None, grid, args.set_column or grid_set_col, f"Sweep: {_name(args.items)} x {Path(args.grid).name}"
        )
    t0 = time.perf_counter()
    title = f"Sweep: {_name(args.items)} x {Path(args.grid).name}"
    if _streams(args, args.set_column or grid_set_col, len(grid.variants())):
        return _run_streaming(args, None, grid, args.set_column or grid_set_col, title, t0)
    table = _load_table(args.items, args.set_column or grid_set_col)
    labels = _labels(args, table)
    result = sweep(table, None, grid, on_error="collect", progress=_progress_enabled(args), threads=args.threads)
    return _finish(args, result, t0, title, labels)


def _labels(args, table):
    """The ``--label-column`` labels, read and checked before the sweep runs (None without it)."""
    if not getattr(args, "label_column", None):
        return None
    from cupel_np.analysis.outcomes import labels_from

    return labels_from(table, args.label_column)


def _outcome_json(summary) -> dict:
    return {r["variant"]: {k: v for k, v in r.items() if k != "variant"} for r in summary.to_pylist()}


def _print_outcomes(summary, column: str) -> None:
    """One line per variant: its mean token recall over the labelled sets, with the interval."""
    if summary.num_rows == 0:
        return
    first = summary.slice(0, 1).to_pylist()[0]
    scored = first["sets_labelled"] - first["sets_without_relevant"]
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
        from cupel_np.analysis.outcomes import outcome_summary

        summary = outcome_summary(result, labels, metrics=("token_recall",))
    elapsed = time.perf_counter() - t0
    if args.json:
        out = _summary_json(result, paths, elapsed)
        if summary is not None:
            out["outcomes"] = _outcome_json(summary)
        print(json.dumps(out, indent=2))
        return EXIT_OK
    t = result.table
    print(
        f"{plural(t.n, 'item')} in {t.n_sets:,} set(s); {plural(len(result.labels), 'variant')}; "
        f"{plural(result.n_swing, 'swinging item')}; {elapsed:.1f}s"
    )
    _print_summary(result)
    if summary is not None:
        _print_outcomes(summary, labels.column)
    _print_failures(str(e) for errs in result.errors.values() for e in errs.values())
    print(f"wrote {', '.join(Path(p).name for p in paths.values())} to {Path(args.out).resolve()}")
    return EXIT_OK


def cmd_budget(args) -> int:
    from cupel_np.analysis.budget_sim import budget_curves, budget_ladder
    from cupel_np.model.policy import Policy
    from cupel_np.model.presets import preset
    from cupel_np.report.budget import parse_ladder, print_summary, summarize, write_budget_outputs

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
        print(json.dumps(_budget_json(table, summary, paths, elapsed), indent=2))
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


def cmd_run(args) -> int:
    from cupel_np.analysis.pipeline import Pipeline
    from cupel_np.model.policy import Policy
    from cupel_np.model.presets import preset

    if bool(args.policy) == bool(args.preset):
        raise UsageError("give either --policy FILE or --preset NAME")
    policy = Policy.from_file(args.policy) if args.policy else preset(args.preset)
    budget = _budget(args)
    table = _load_table(args.items, args.set_column)
    if table.n_sets > 1 or args.set is not None:
        if args.set_column is None:
            raise UsageError("--set needs --set-column")
        if args.set is None:
            raise UsageError(f"{table.n_sets} item sets in {_name(args.items)}; choose one with --set KEY")
        table = table.subset(table.set_keys[_segment(table, args.set)])
    try:
        report = Pipeline(policy).dry_run(table, budget, threads=args.threads)
    except CupelError as e:
        hint = _set_column_hint(args.items, args.set_column)
        if not hint:
            raise
        raise type(e)(f"{e}{hint} and choose one with --set KEY") from None
    if args.json:
        print(json.dumps(report.to_dict(), default=_iso_default, indent=2))
        return EXIT_OK
    used = sum(i.item.tokens for i in report.included)
    print(
        f"included {len(report.included)} of {report.total_candidates} items, {used:,} tokens "
        f"(target {budget.target_tokens:,}, effective {report.effective_target_tokens:,})"
    )
    for i, inc in enumerate(report.included):
        print(
            f"  {i:>3}  IN   {inc.score:8.4f}  {inc.reason.value:<10} {inc.item.tokens:>7}  {_one_line(inc.item.content)}"
        )
    for exc in report.excluded:
        detail = ", ".join(f"{k}={v}" for k, v in exc.reason.to_dict().items() if k != "reason")
        print(
            f"       OUT  {exc.score:8.4f}  {exc.reason.reason:<16} {exc.item.tokens:>7}  {_one_line(exc.item.content)}  ({detail})"
        )
    for s in report.count_requirement_shortfalls:
        print(f"  shortfall: kind {s.kind!r} required {s.required_count}, got {s.satisfied_count}")
    return EXIT_OK


def _iso_default(v):
    """JSON for what json cannot write: datetimes as ISO 8601, anything else as text."""
    from datetime import date, datetime

    if isinstance(v, datetime):
        return v.isoformat().replace("+00:00", "Z")
    if isinstance(v, date):
        return v.isoformat()
    return str(v)


def _segment(table, key: str) -> int:
    for i, k in enumerate(table.set_keys):
        if str(k) == key:
            return i
    raise InvalidConfigError(f"no set {key!r} in set column {table.set_column!r}")


def _one_line(s: str, n: int = 70) -> str:
    s = s.replace("\n", " ")
    return s if len(s) <= n else s[: n - 1] + "…"


def cmd_presets(args) -> int:
    from cupel_np.model.presets import PRESETS

    if args.json:
        print(json.dumps({k: p.to_dict() for k, p in PRESETS.items()}, indent=2))
        return EXIT_OK
    for name, p in PRESETS.items():
        scorers = ", ".join(f"{s.type_name}×{w:g}" for s, w in getattr(p.scorer, "entries", ()))
        sl = p.slicer.name + (f"(bucket {p.slicer.bucket_size})" if hasattr(p.slicer, "bucket_size") else "")
        print(
            f"{name:<13} {scorers:<40} {sl:<20} {p.placer:<14} dedup={p.deduplication} overflow={p.overflow_strategy}"
        )
        print(f"{'':<13} {p.description}")
    return EXIT_OK


def cmd_validate(args) -> int:
    from cupel_np.io.parquet import validate_items

    if args.chunk_rows is not None and args.chunk_rows < 1:
        raise UsageError(f"--chunk-rows must be at least 1, got {args.chunk_rows}")
    problems, summary = validate_items(
        _source(args.items),
        set_column=args.set_column,
        chunk_rows=args.chunk_rows,
        memory_limit=_memory_limit(args),
        progress=_progress_enabled(args),
    )
    src = _source(args.items)
    args.items = src if not isinstance(src, list) else f"{src[0]} (+{len(src) - 1} files)"
    if args.json:
        print(json.dumps({"ok": not problems, "problems": problems, **summary}, indent=2))
    else:
        if problems:
            for p in problems:
                print(f"{args.items}: {p}")
        else:
            print(
                f"{args.items}: ok — {plural(summary['rows'], 'row')}, {summary['sets']:,} set(s), "
                f"{summary['negative_tokens']:,} negative-token rows (will be excluded), "
                f"{summary['pinned']:,} pinned"
            )
    return EXIT_OK if not problems else EXIT_USAGE


def cmd_import(args) -> int:
    from cupel_np.io.importers import import_transcripts

    res = import_transcripts(
        args.format,
        args.inputs,
        mapping=args.map,
        tokenizer=args.tokenizer,
        skip_bad=args.skip_bad,
        set_column=args.set_column,
        tool_call_kind=args.tool_call_kind,
    )
    out = res.write_parquet(args.out)
    for b in res.bad:  # listed, never silently dropped
        print(f"cupel-np: skipped bad {'line' if b.unit == 'line' else 'row'}: {b}", file=sys.stderr)
    if args.json:
        print(json.dumps({**res.summary(), "out": str(out), "set_column": res.set_column}, indent=2))
        return EXIT_OK
    skipped = "; ".join(f"{n} {r}" for r, n in sorted(res.skipped.items()))
    print(
        f"{plural(res.items, 'item')} in {res.conversations:,} conversation(s) from "
        f"{res.lines:,} line(s) -> {out} (set column {res.set_column!r}); "
        f"{len(res.bad)} bad line(s) skipped" + (f"; not context: {skipped}" if skipped else "")
    )
    return EXIT_OK


def cmd_report(args) -> int:
    from cupel_np.report.from_dir import write_dir_report

    path = write_dir_report(args.out_dir, title=args.title, top_k=args.top, overwrite=args.overwrite)
    if args.json:
        print(json.dumps({"report": str(path)}))
    else:
        print(f"wrote {path}")
    return EXIT_OK


def cmd_conformance(args) -> int:
    from cupel_np.cli import conformance

    try:
        files = conformance.collect(args.paths)
    except FileNotFoundError as e:
        raise UsageError(str(e)) from None
    if not files:  # nothing run is not a pass
        raise UsageError(f"no .toml conformance vectors found under {', '.join(args.paths)}")
    failures = {}
    for f in files:
        msg = conformance.run_vector(f)
        if msg is not None:
            failures[str(f)] = msg
    if args.json:
        print(json.dumps({"passed": len(files) - len(failures), "failed": len(failures), "failures": failures}))
    else:
        for name, msg in failures.items():
            print(f"FAIL {name}: {msg}")
        print(f"{len(files) - len(failures)} passed, {len(failures)} failed")
    return EXIT_OK if not failures else EXIT_INTERNAL


# ----------------------------------------------------------------------------- parser
def _threads_arg(v: str) -> int:
    try:
        n = int(v)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"--threads must be a positive integer, got {v!r}")
    return n


def _out_opts(p, default: str | None = None) -> None:
    """``--out DIR`` (required unless a default is given) and ``--overwrite``."""
    if default is None:
        p.add_argument("--out", required=True, help="output directory")
    else:
        p.add_argument("--out", default=default, help=f"output directory (default ./{default})")
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the outputs of an earlier run in --out (only cupel-np's own files are removed)",
    )


def _count_arg(v: str) -> int:
    try:
        n = int(v)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, got {v!r}")
    return n


_ITEMS_HELP = "items Parquet: a file, a directory (hive partitions become columns) or several files"


def _check_on_dask(args, checks_file, set_column):
    """``cupel-np check --dask SPEC``: the checks file's checks on Dask; its outcomes."""
    from cupel_np.io.dask import check, connect

    if not set_column:
        raise UsageError("--dask needs --set-column or set_column in the checks file (a task holds whole item sets)")
    with connect(args.dask) as client:
        return check(
            _source(args.items), checks_file, set_column=set_column, client=client, progress=_progress_enabled(args)
        )


_SET_HELP = "column holding the item-set key (without it the whole input is one item set)"
_LABEL_HELP = (
    "relevance label column (boolean, or non-negative numbers; null = unlabelled): also write outcomes.parquet "
    "and print each variant's token recall with its bootstrap interval"
)
_DASK_HELP = "run on Dask: local, local:N (a LocalCluster of N workers) or tcp://HOST:PORT"


def _common_parents() -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    """(options of every command, the same plus --threads for the commands that compute)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--quiet", action="store_true", help="no progress output")
    common.add_argument("--debug", action="store_true", help="show tracebacks")
    common.add_argument(
        "--plugin",
        action="append",
        default=[],
        metavar="MODULE",
        help="import MODULE (a module name or a .py file) first, so the scorers it registers "
        "with cupel_np.register_scorer can be named in policy and grid files (repeatable)",
    )
    common.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    compute = argparse.ArgumentParser(add_help=False, parents=[common])
    compute.add_argument(
        "--threads",
        type=_threads_arg,
        default=None,
        help="worker threads (default: $CUPEL_NP_THREADS, else the cores this process may use)",
    )
    return common, compute


def _budget_opts(p) -> None:
    g = p.add_argument_group("budget (required)")
    g.add_argument("--max-tokens", type=int, required=True, help="the model's context window")
    g.add_argument("--target-tokens", type=int, required=True, help="the slicer's token target")
    p.add_argument("--output-reserve", type=int, default=0, help="tokens kept for the answer (default 0)")


def _memory_opts(p) -> None:
    p.add_argument(
        "--memory-limit",
        metavar="SIZE",
        help="memory budget, e.g. 2G or 500M (default: half the memory available now); "
        "a larger input is processed in chunks of whole item sets",
    )
    p.add_argument(
        "--chunk-rows",
        type=int,
        metavar="N",
        help="stream in chunks of at least N rows (whole row groups and item sets), whatever the input size",
    )


def _add_sweeps(sub, compute) -> None:
    p = sub.add_parser("demo", parents=[compute], help="presets x budgets on the sample corpus; Parquet + HTML report")
    p.add_argument("--items", help="items Parquet (default: the sample corpus shipped in the package)")
    p.add_argument("--set-column", default="session_id", help="column holding the item-set key (default session_id)")
    _out_opts(p, "cupel-np-demo")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("sensitivity", parents=[compute], help="compare policies over an items file")
    p.add_argument("items", nargs="+", help=_ITEMS_HELP)
    p.add_argument("--policies", help="JSON/TOML file of labelled policies")
    p.add_argument("--preset", action="append", help="a preset to compare (repeatable)")
    _budget_opts(p)
    p.add_argument("--set-column", help=_SET_HELP)
    p.add_argument("--label-column", metavar="COL", help=_LABEL_HELP)
    _out_opts(p)
    p.add_argument("--dask", metavar="SPEC", help=_DASK_HELP)
    _memory_opts(p)
    p.set_defaults(func=cmd_sensitivity)

    p = sub.add_parser(
        "sweep", parents=[compute], help="run a grid of variants (presets x weights x slicers x placers x budgets)"
    )
    p.add_argument("items", nargs="+", help=_ITEMS_HELP)
    p.add_argument("--grid", required=True, help="grid file (TOML/JSON; see docs/sweeps.md)")
    p.add_argument("--set-column", help="column holding the item-set key (overrides the grid's)")
    p.add_argument("--label-column", metavar="COL", help=_LABEL_HELP)
    _out_opts(p)
    p.add_argument("--dask", metavar="SPEC", help=_DASK_HELP)
    _memory_opts(p)
    p.set_defaults(func=cmd_sweep)


def _add_single(sub, common, compute) -> None:
    p = sub.add_parser("budget", parents=[common], help="budget curves: selection and utilization along a ladder")
    p.add_argument("items", help="items Parquet file")
    p.add_argument("--policy", action="append", help="policy file (JSON/TOML; repeatable, labelled by file name)")
    p.add_argument("--preset", action="append", help="a preset (repeatable)")
    p.add_argument("--ladder", required=True, help="LO:HI:STEPS budgets (max_tokens), e.g. 4000:200000:16")
    p.add_argument(
        "--spacing", choices=["geometric", "linear"], default="geometric", help="ladder spacing (default geometric)"
    )
    p.add_argument("--output-reserve", type=int, default=0, help="tokens kept for the answer at every budget")
    p.add_argument("--set-column", help=_SET_HELP)
    _out_opts(p)
    p.set_defaults(func=cmd_budget)

    p = sub.add_parser(
        "run", parents=[compute], help="one dry run: included and excluded items with scores and reasons"
    )
    p.add_argument("items", nargs="+", help=_ITEMS_HELP)
    p.add_argument("--policy", help="policy file (JSON/TOML, EXTENSIONS.md or .NET shape)")
    p.add_argument("--preset", help="a preset name")
    _budget_opts(p)
    p.add_argument("--set-column", help=_SET_HELP)
    p.add_argument("--set", metavar="KEY", help="which item set to run (with --set-column)")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("presets", parents=[common], help="list the presets with their full configuration")
    p.set_defaults(func=cmd_presets)

    p = sub.add_parser("validate", parents=[common], help="check an items file: schema and row problems")
    p.add_argument("items", nargs="+", help=_ITEMS_HELP)
    p.add_argument("--set-column", help=_SET_HELP)
    _memory_opts(p)
    p.set_defaults(func=cmd_validate)


def _add_files(sub, common) -> None:
    p = sub.add_parser("import", parents=[common], help="chat / agent transcripts -> an items Parquet file")
    p.add_argument(
        "format",
        choices=["openai", "claude-code", "messages"],
        help="openai: chat-completions JSONL; claude-code: session JSONL; messages: JSONL/CSV/Parquet + --map",
    )
    p.add_argument("inputs", nargs="+", metavar="IN", help="input files or directories")
    p.add_argument("--out", required=True, help="items Parquet to write")
    p.add_argument(
        "--map",
        help="messages format: TARGET=COLUMN,... (targets: content, kind (or role), set, "
        "timestamp, source, tokens, pinned, id)",
    )
    p.add_argument(
        "--tokenizer",
        help="token counter: estimate (default), chars4, tiktoken:ENCODING, "
        "tokenizers:PATH/tokenizer.json or module:function",
    )
    p.add_argument(
        "--skip-bad",
        action="store_true",
        help="skip unreadable lines (each is listed on stderr); a file none of whose lines reads is still an error",
    )
    p.add_argument(
        "--set-column", default="conversation_id", help="name of the conversation column (default conversation_id)"
    )
    p.add_argument("--tool-call-kind", default="ToolCall", help="kind given to tool calls (default ToolCall)")
    p.set_defaults(func=cmd_import)

    p = sub.add_parser("report", parents=[common], help="HTML report of a written sweep directory (in-process or Dask)")
    p.add_argument("out_dir", help="a directory written by sensitivity, sweep or demo (with or without --dask)")
    p.add_argument("--title", help="page title (default: the directory's name)")
    p.add_argument("--top", type=_count_arg, default=200, help="swinging items in the table (default 200)")
    p.add_argument("--overwrite", action="store_true", help="replace a report.html built from the in-memory result")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("conformance", parents=[common], help="run conformance vectors (files or directories)")
    p.add_argument("paths", nargs="+", metavar="PATH", help="vector .toml files or directories holding them")
    p.set_defaults(func=cmd_conformance)


def build_parser() -> argparse.ArgumentParser:
    """The ``cupel-np`` argument parser (one sub-command per task)."""
    from cupel_np.testing.cli import add_check_parser
    from cupel_np.tuning.cli import add_tune_parser

    common, compute = _common_parents()
    parser = argparse.ArgumentParser(
        prog="cupel-np",
        description="Cupel context selection at corpus scale: which items do your policies swap in or out?",
    )
    parser.add_argument("--version", action="version", version=f"cupel-np {__version__}")
    sub = parser.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    _add_sweeps(sub, compute)
    _add_single(sub, common, compute)
    _add_files(sub, common)
    add_check_parser(sub, compute, dask_runner=_check_on_dask)  # `cupel-np check`: cupel_np/testing/cli.py
    add_tune_parser(sub, compute)  # `cupel-np tune`: implemented in cupel_np/tuning/cli.py
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        load_plugins(args.plugin)
        if args.func in (cmd_demo, cmd_sensitivity, cmd_sweep, cmd_budget, cmd_run):
            _say_if_compiling(args)
        return args.func(args)
    except UsageError as e:
        _err(str(e))
        return EXIT_USAGE
    except BrokenPipeError:
        # the reader went away (`cupel-np run ... --json | head`): not an error of ours; stop
        # quietly, with the status a process killed by SIGPIPE gets, and let no flush at exit
        # complain again
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 128 + 13
    except (CupelError, OSError) as e:  # bad input, or a path we cannot read or write
        if args.debug:
            raise
        _err(str(e))
        return EXIT_USAGE
    except KeyboardInterrupt:
        _err("interrupted")
        return 130
    except Exception as e:  # an engine bug, not the user's input
        if args.debug:
            raise
        _err(f"internal error: {type(e).__name__}: {e} (rerun with --debug for the traceback)")
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
