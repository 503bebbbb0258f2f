"""What every ``cupel-np`` command shares: the exit statuses, ``UsageError``, progress and
"compiling" notes, ``--out`` claiming, the items input, the budget options and the failure
summary."""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as pds

from cupel_np._fs import arrow_location, as_path
from cupel_np.cli.coldstart import kernels_cached
from cupel_np.errors import CupelError, InvalidConfigError
from cupel_np.io.outdir import check_set_column, claim_out_dir
from cupel_np.model.budget import ContextBudget
from cupel_np.model.columns import ITEM_FIELDS
from cupel_np.model.datasets import dataset_source, default_memory_limit, open_dataset, parse_size
from cupel_np.model.fields import suggestion
from cupel_np.model.items import ItemTable

EXIT_OK, EXIT_INTERNAL, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    pass


class AllCellsFailedError(UsageError):
    """Every (variant, set) cell of a run failed (the run finished; it compared nothing)."""


def _err(msg: str) -> None:
    print(f"cupel-np: error: {msg}", file=sys.stderr)


def _progress_enabled(args) -> bool:
    return not args.quiet and sys.stderr.isatty()


def _say_if_compiling(args) -> None:
    """On a terminal, a cold first run says why it is silent for a while (stderr only)."""
    if not getattr(args, "quiet", False) and sys.stderr.isatty() and not kernels_cached():
        print("cupel-np: compiling kernels, first run only (10-20 s) ...", file=sys.stderr, flush=True)


def _claim_out(args, set_column=None, labels=()) -> Path:
    """Check ``--out`` before any work: not an existing file, and not holding another run's
    outputs unless ``--overwrite`` (which removes them; ``io.outdir`` names what is ours);
    and a set column whose name the outputs use is refused before anything is read."""
    check_set_column(set_column, labels)
    return claim_out_dir(args.out, overwrite=args.overwrite, create=False)


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 chunk``, ``2 chunks``, ``1,000 partitions`` (``many`` for irregular plurals)."""
    return f"{n:,} {word if n == 1 else (many or word + 's')}"


_PREFIX = re.compile(r"^(variant '[^']*': )?(set .*?: )?")
_VARIANT = re.compile(r"^variant '[^']*': ")


def top_reasons(messages, k: int = 3) -> list[tuple[int, str]]:
    """The ``k`` most common failure reasons among error ``messages``: messages that differ
    only in the set or the numbers count as one reason (per variant: a count never mixes
    variants); each comes with its count and one full example, most common first."""
    groups: dict[str, list] = {}
    for m in messages:
        m = str(m)
        v = _VARIANT.match(m)
        key = (v.group(0) if v else "") + re.sub(r"\d[\d,]*", "N", _PREFIX.sub("", m, count=1))
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


def all_cells_failed(failed: int, cells: int, items, set_column) -> None:
    """Every (variant, set) cell failed: nothing was compared, so the run is an error (exit 2)
    with the likely fix, not a green run (the outputs and the reasons are still written)."""
    if cells == 0 or failed < cells:
        return
    hint = _set_column_hint(items, set_column)
    raise AllCellsFailedError(
        f"every (variant, set) cell failed ({failed:,} of {cells:,}): nothing was compared; see the reasons "
        "above" + (hint or "; fix the input or the policies and rerun with --overwrite")
    )


def _written_failures(out) -> list[str]:
    """The error of every failed (variant, set) cell of a written sweep (``variants`` output)."""
    f = as_path(out) / "variants.parquet"
    src = f if f.is_file() else as_path(out) / "variants"
    if not src.exists():
        return []
    fs, where = arrow_location(src)
    t = pds.dataset(where, format="parquet", filesystem=fs).to_table(
        columns=["error"], filter=pds.field("error").is_valid()
    )
    return [str(e) for e in t.column("error").to_pylist()]


def _set_column_hint(items, set_column) -> str:
    """When no set column was given though the input has columns other than item fields:
    a hint naming them (the whole input was taken as ONE item set)."""
    if set_column:
        return ""

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


_EMPTY_HELP = "run even when the items table has no rows (by default an empty table is an error)"


def refuse_empty(args) -> None:
    """A command that reads items refuses an input with no rows (an import that found
    nothing, a wrong file) unless ``--allow-empty``: an empty table answers no question."""
    items = getattr(args, "items", None)
    if not items or getattr(args, "allow_empty", True):
        return
    try:
        n = open_dataset(_source(items)).count_rows()
    except (CupelError, OSError, ValueError):
        return  # the command itself names what is wrong with the input
    if n == 0:
        raise UsageError(
            f"{_name(items)}: no items (0 rows): there is nothing to select from; if it came from "
            "`cupel-np import`, check the import's summary; --allow-empty runs on it anyway"
        )


def refuse_missing_columns(args) -> None:
    """The ``--set-column`` and ``--label-column`` a command is given are columns of its items
    (the schema only, before any work); the error names the file, the closest column and the
    columns there are. ``validate`` reports a missing set column among its problems."""
    items = getattr(args, "items", None)
    asked = [(w, getattr(args, f"{w}_column", None)) for w in ("set", "label")]
    asked = [(w, c) for w, c in asked if isinstance(c, str)]
    if not items or not asked:
        return
    try:
        names = open_dataset(_source(items)).schema.names
    except (CupelError, OSError, ValueError):
        return  # the command itself names what is wrong with the input
    for what, col in asked:
        if col not in names:
            raise UsageError(
                f"{_name(items)}: {what} column {col!r} not found{suggestion(col, names)} (columns: {', '.join(names)})"
            )


def _load_table(path, set_column):
    return ItemTable.from_parquet(_source(path), set_column=set_column)


def _source(items):
    return dataset_source(items)


def _name(items) -> str:
    src = _source(items)
    return as_path(src).name if not isinstance(src, list) else f"{as_path(src[0]).name} (+{len(src) - 1} files)"


def _memory_limit(args) -> int:
    """``--memory-limit`` in bytes (default: ``datasets.default_memory_limit()``)."""
    return default_memory_limit() if args.memory_limit is None else parse_size(args.memory_limit, "--memory-limit")


def _budget(args):
    if args.max_tokens is None or args.target_tokens is None:
        raise UsageError("--max-tokens and --target-tokens are required")
    return flag_budget(args.max_tokens, args.target_tokens, args.output_reserve or 0)


_BUDGET_FIELD = re.compile(r"(?:ContextBudget\.)?\b(max_tokens|target_tokens|output_reserve)\b")


def flag_budget(max_tokens: int, target_tokens: int, output_reserve: int = 0) -> ContextBudget:
    """The budget of ``--max-tokens`` / ``--target-tokens`` / ``--output-reserve``; a bad value
    is named by its flag (``--target-tokens (200) must be <= --max-tokens (100)``)."""
    try:
        return ContextBudget(max_tokens, target_tokens, output_reserve)
    except InvalidConfigError as e:
        raise UsageError(_BUDGET_FIELD.sub(lambda m: "--" + m.group(1).replace("_", "-"), str(e))) from None


def _one_line(s: str, n: int = 70) -> str:
    s = s.replace("\n", " ")
    return s if len(s) <= n else s[: n - 1] + "…"


def with_groups(variants, column: str) -> list:
    """``--groups COLUMN``: every variant's policy with ``groups = COLUMN`` (labels and budgets
    kept)."""
    out = []
    for v in variants:
        label, pol, *rest = v
        out.append((label, dataclasses.replace(pol, groups=column), *rest))
    return out
