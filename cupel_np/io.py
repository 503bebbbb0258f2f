"""Parquet / Arrow input. The only module that knows about files.

Items schema (snake_case ContextItem fields): ``content`` string (required), ``tokens``
integer (required), ``kind`` string, ``source`` string, ``priority`` integer, ``tags``
list<string>, ``metadata`` map<string, string>, ``timestamp`` timestamp (UTC; a zone-less
timestamp is read as UTC), ``future_relevance_hint`` float, ``pinned`` bool,
``original_tokens`` integer, plus any set-key column. Missing optional columns take the
spec's defaults; other columns are ignored.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import pyarrow as pa
import pyarrow.parquet as pq

from .errors import InvalidConfigError, InvalidInputTypeError


def read_items_table(path, columns: list[str] | None = None, filter=None) -> pa.Table:
    """Read items Parquet - a file, a directory (hive partition columns included) or a list
    of files - into an Arrow table (errors name the file)."""
    from .datasets import read_table

    return read_table(path, columns=columns, filter=filter)


def write_items_parquet(table, path) -> None:
    """Write an ItemTable's items (input order, canonical schema) to Parquet atomically."""
    import os
    import tempfile

    arrow = table.table.take(pa.array(_inverse(table.input_row)))
    p = Path(path)
    fd, tmp = tempfile.mkstemp(dir=p.parent if str(p.parent) else ".", prefix=f".{p.name}.", suffix=".tmp")
    os.close(fd)
    try:
        pq.write_table(arrow, tmp)
        os.replace(tmp, p)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _inverse(perm):
    import numpy as np

    inv = np.empty_like(perm)
    inv[perm] = np.arange(len(perm))
    return inv


def atomic_write_bytes(path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temp file + rename (never a half-written file)."""
    import os
    import tempfile

    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, p)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


# ----------------------------------------------------------------------------- sweep output
def _variants_metadata(variants) -> dict[bytes, bytes]:
    import json

    from . import __version__
    from .policy import _json_default

    meta = [
        {"label": v.label, "policy": v.policy.to_dict(), "budget": v.budget.to_dict()}
        for v in variants
    ]
    return {
        b"cupel_np.version": __version__.encode(),
        b"cupel_np.variants": json.dumps(meta, default=_json_default).encode(),
    }


class _AtomicWriter:
    """A ParquetWriter on a temp file beside the target, renamed into place on close; an
    interrupted run leaves no file that looks complete."""

    def __init__(self, path: Path, schema: pa.Schema, metadata: dict[bytes, bytes]):
        import os
        import tempfile

        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".tmp")
        os.close(fd)
        self.tmp = tmp
        self.schema = schema.with_metadata({**(schema.metadata or {}), **metadata})
        self.writer = pq.ParquetWriter(tmp, self.schema, compression="zstd")

    def write(self, table: pa.Table) -> None:
        self.writer.write_table(table.cast(self.schema))

    def close(self) -> None:
        import os

        self.writer.close()
        os.replace(self.tmp, self.path)

    def abort(self) -> None:
        import os

        try:
            self.writer.close()
        finally:
            if os.path.exists(self.tmp):
                os.unlink(self.tmp)


def write_sweep(result, out_dir, *, items: bool = True) -> dict[str, Path]:
    """Write ``diffs.parquet``, ``variants.parquet`` and (``items=True``) ``items.parquet``
    for a SweepResult into ``out_dir``; the policies and budgets go in the file metadata."""
    out = Path(out_dir)
    meta = _variants_metadata(result.variants)
    tables = {"diffs": result.diffs_table(), "variants": result.variants_table()}
    if items:
        tables["items"] = result.items_table()
    paths = {}
    for name, table in tables.items():
        w = _AtomicWriter(out / f"{name}.parquet", table.schema, meta)
        try:
            w.write(table)
        except BaseException:
            w.abort()
            raise
        w.close()
        paths[name] = out / f"{name}.parquet"
    return paths


def sweep_parquet(path, budget, variants, out_dir, *, set_column: str, chunk_rows: int = 1_000_000,
                  on_error: str = "raise", items: bool = True, progress: bool | None = None,
                  memory_limit: int | None = None) -> dict:
    """Sweep a corpus too large for memory: read ``path`` (a file, a directory or a list of
    files) a few row groups at a time, whole item sets per chunk, sweep each chunk, and stream
    ``items`` / ``diffs`` / ``variants`` Parquet into ``out_dir``. When a set's rows are not
    contiguous the whole input is grouped in memory if it fits in ``memory_limit`` bytes
    (default half the available memory); otherwise the error says to use the Dask path.
    Returns totals (rows, sets, swinging contents, chunks)."""
    from .datasets import sweep_dataset

    return sweep_dataset(path, budget, variants, out_dir, set_column=set_column, chunk_rows=chunk_rows,
                         on_error=on_error, items=items, progress=progress, memory_limit=memory_limit)


# ----------------------------------------------------------------------------- validation
def validate_items(path, set_column: str | None = None, max_rows_listed: int = 5) -> tuple[list[str], dict]:
    """Every schema and row problem of an items file (not just the first), by column and row.
    Returns ``(problems, summary)``; no problems means ``ItemTable.from_parquet`` will load it."""
    import pyarrow.compute as pc

    from .errors import CupelError
    from .items import ITEM_SCHEMA, _cast_column
    from .text import WHITE_SPACE_CLASS

    table = read_items_table(path)
    problems: list[str] = []
    names = set(table.column_names)
    n = table.num_rows

    def rows_of(mask, values=None) -> str:
        idx = np.flatnonzero(np.asarray(mask))
        shown = []
        for r in idx[:max_rows_listed]:
            shown.append(f"{int(r)} ({values[int(r)].as_py()!r})" if values is not None else str(int(r)))
        more = f" and {idx.size - max_rows_listed} more" if idx.size > max_rows_listed else ""
        return f"row{'s' if idx.size > 1 else ''} {', '.join(shown)}{more}"

    for req in ("content", "tokens"):
        if req not in names:
            problems.append(f"missing required column {req!r}")
    if set_column is not None and set_column not in names:
        problems.append(f"set column {set_column!r} not found (columns: {', '.join(table.column_names)})")
    cols = {}
    for f in ITEM_SCHEMA:
        if f.name not in names:
            continue
        try:
            cols[f.name] = _cast_column(f.name, table.column(f.name).combine_chunks(), f.type)
        except CupelError as e:
            problems.append(str(e))
    if "content" in cols and n:
        c = cols["content"]
        if c.null_count:
            problems.append(f"column 'content': null at {rows_of(c.is_null().to_numpy(zero_copy_only=False))}")
        empty = pc.fill_null(pc.equal(pc.utf8_length(c), 0), False).to_numpy(zero_copy_only=False)
        if empty.any():
            problems.append(f"column 'content': empty string at {rows_of(empty)}")
    if "tokens" in cols and cols["tokens"].null_count:
        problems.append(f"column 'tokens': null at {rows_of(cols['tokens'].is_null().to_numpy(zero_copy_only=False))}")
    for name in ("kind", "source"):
        if name in cols and n:
            blank = pc.fill_null(pc.match_substring_regex(cols[name], f"^[{WHITE_SPACE_CLASS}]*$"), False)
            blank = blank.to_numpy(zero_copy_only=False)
            if blank.any():
                problems.append(f"column {name!r}: empty or whitespace-only at {rows_of(blank, cols[name])}")
    if "tags" in cols and n and cols["tags"].flatten().null_count:
        flat_null = cols["tags"].flatten().is_null().to_numpy(zero_copy_only=False)
        lengths = pc.fill_null(pc.list_value_length(cols["tags"]), 0).to_numpy(zero_copy_only=False)
        rows = np.unique(np.searchsorted(np.cumsum(lengths), np.flatnonzero(flat_null), side="right"))
        mask = np.zeros(n, dtype=bool)
        mask[rows] = True
        problems.append(f"column 'tags': null tag at {rows_of(mask)}")
    n_sets = 1
    if set_column is not None and set_column in names:
        keys = table.column(set_column).combine_chunks()
        if keys.null_count:
            problems.append(f"set column {set_column!r}: null at {rows_of(keys.is_null().to_numpy(zero_copy_only=False))}")
        n_sets = len(pc.unique(keys))
    if "metadata" in cols and n and cols["metadata"].items.null_count:
        md = cols["metadata"]
        offs = md.offsets.to_numpy(zero_copy_only=False)
        rows = np.unique(np.searchsorted(offs[1:] - offs[0], np.flatnonzero(md.items.is_null().to_numpy(zero_copy_only=False)), side="right"))
        mask = np.zeros(n, dtype=bool)
        mask[rows] = True
        problems.append(f"column 'metadata': null value at {rows_of(mask)}")
    if set_column is not None and set_column in names:
        kt = table.schema.field(set_column).type
        if pa.types.is_nested(kt):
            problems.append(f"set column {set_column!r} must hold scalar keys (strings or integers), got {kt}")
    neg = int((cols["tokens"].fill_null(0).to_numpy(zero_copy_only=False) < 0).sum()) if "tokens" in cols else 0
    pinned = int(pc.sum(cols["pinned"]).as_py() or 0) if "pinned" in cols else 0
    return problems, {"rows": n, "sets": n_sets, "negative_tokens": neg, "pinned": pinned}
