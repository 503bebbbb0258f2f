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

import pyarrow as pa
import pyarrow.parquet as pq

from .errors import InvalidConfigError, InvalidInputTypeError


def read_items_table(path, columns: list[str] | None = None) -> pa.Table:
    """Read an items Parquet file into an Arrow table (errors name the file)."""
    p = Path(path)
    if not p.exists():
        raise InvalidConfigError(f"items file not found: {p}")
    try:
        return pq.read_table(p, columns=columns)
    except (pa.ArrowInvalid, OSError) as e:
        raise InvalidInputTypeError(f"cannot read Parquet file {p}: {e}") from None


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
