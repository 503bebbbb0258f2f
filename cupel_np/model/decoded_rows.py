"""ContextItems decoded from an ItemTable's Arrow columns (a table read from Parquet or Arrow
keeps no item objects): what ``ItemTable.row`` and ``ItemTable.rows`` hand back, and what a
report's ``included`` / ``excluded`` hold for a sweep's sets."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa

from cupel_np.model._arrays import _one, _plain

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US_PER = {"s": 1_000_000, "ms": 1000, "us": 1}


def to_datetime(v: int, unit: str) -> datetime:
    """A timestamp column's value (``unit`` since the epoch, UTC) as an aware datetime, to the
    microsecond (nanoseconds floored)."""
    if unit == "ns":
        return _EPOCH + timedelta(microseconds=v // 1000)
    return _EPOCH + timedelta(microseconds=v * _US_PER[unit])


def _optional(values: np.ndarray, valid: np.ndarray) -> list:
    """``values`` as Python numbers, None where not ``valid``."""
    return [v if ok else None for v, ok in zip(values.tolist(), valid.tolist())]


def decoded_rows(table: Any, rows: np.ndarray, item: Callable[..., Any]) -> list:
    """The items of ``table``'s (an ``ItemTable``) ``rows`` (grouped order), each built by
    ``item`` (``ContextItem``) from its fields, every column taken for all the rows at once (a
    row at a time, each column's Arrow scalar and its dictionary decode cost ~80 us a row)."""
    idx = np.asarray(rows, dtype=np.int64)
    if idx.shape[0] == 0:
        return []
    at = pa.array(idx)
    col = table.table.column

    def taken(name: str) -> list:
        return _plain(_one(col(name)).take(at)).to_pylist()

    ts_valid = table.timestamp_valid[idx].tolist()
    unit = table.timestamp_unit
    timestamps = [to_datetime(v, unit) if ok else None for v, ok in zip(table.timestamp[idx].tolist(), ts_valid)]
    return [
        item(
            content=content,
            tokens=tokens,
            kind=kind,
            source=source,
            priority=priority,
            tags=tuple(tags or ()),
            metadata=dict(md or []),
            timestamp=ts,
            future_relevance_hint=hint,
            pinned=pinned,
            original_tokens=original,
        )
        for content, tokens, kind, source, priority, tags, md, ts, hint, pinned, original in zip(
            table.content.take(at).to_pylist(),
            table.tokens[idx].tolist(),
            taken("kind"),
            taken("source"),
            _optional(table.priority[idx], table.priority_valid[idx]),
            taken("tags"),
            taken("metadata"),
            timestamps,
            _optional(table.hint[idx], table.hint_valid[idx]),
            table.pinned[idx].tolist(),
            _optional(table.original_tokens_col[idx], table.original_tokens_valid[idx]),
            strict=True,
        )
    ]
