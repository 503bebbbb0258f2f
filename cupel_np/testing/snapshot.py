"""Snapshot assertions: a report's stable JSON form kept beside the test that checks it.

``match_snapshot(report, "name")`` compares the report with ``__snapshots__/name.json`` in the
calling test file's directory. A missing snapshot is written (except under ``CI``, where it
fails: a snapshot is recorded on a developer's machine and reviewed); a different one fails
with a unified diff; ``CUPEL_UPDATE_SNAPSHOTS=1`` rewrites it.

The spec defers snapshots because its excluded order breaks score ties by an insertion
order the report does not show. Here the excluded order is total and a function of the
inputs alone: score descending, then the stage that excluded the item (classify, dedup,
slice, place), then the item's row within that stage (truncation's own drop order for the
place stage); scores are bit-identical for any thread count. So the same items, policy and
budget always give the same bytes.
"""

from __future__ import annotations

import difflib
import inspect
import json
import math
import os
from datetime import datetime
from pathlib import Path
from typing import Any

from cupel_np.errors import InvalidConfigError, SnapshotMismatchError
from cupel_np.testing.chain import entry_reason_name

__all__ = ["SnapshotMismatchError", "match_snapshot", "snapshot_json"]


def _item(item) -> dict:
    d = item.to_dict()
    ts = d.get("timestamp")
    if isinstance(ts, datetime):
        d["timestamp"] = ts.isoformat()
    return d


def _num(x: float):
    x = float(x)
    return repr(x) if not math.isfinite(x) else x


def _reason(entry) -> dict:
    r = entry.reason
    d = r.to_dict() if hasattr(r, "to_dict") else {"reason": entry_reason_name(entry)}
    return {k: _num(v) if isinstance(v, float) else v for k, v in d.items()}


def snapshot_json(report) -> str:
    """The stable JSON text of a report: included (placed order) and excluded (the report's
    total order) entries with item, score and reason; keys sorted; a trailing newline."""
    doc = {
        "included": [{"item": _item(i.item), "score": _num(i.score), "reason": _reason(i)} for i in report.included],
        "excluded": [{"item": _item(e.item), "score": _num(e.score), "reason": _reason(e)} for e in report.excluded],
    }
    for name in ("total_candidates", "total_tokens_considered"):
        if hasattr(report, name):
            doc[name] = getattr(report, name)
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _caller_dir(stacklevel: int) -> Path:
    frame = inspect.stack()[stacklevel]
    return Path(frame.filename).resolve().parent


def match_snapshot(report: Any, name: str, *, directory: str | os.PathLike | None = None, _stacklevel: int = 1) -> None:
    """Assert that ``report`` matches the snapshot ``name`` (see the module docstring).
    ``directory``: where ``__snapshots__`` lives (default: the calling file's directory)."""
    if not isinstance(name, str) or not name or any(c in name for c in "/\\") or name.startswith("."):
        raise InvalidConfigError(f"a snapshot name must be a plain file name, got {name!r}")
    base = Path(directory) if directory is not None else _caller_dir(_stacklevel + 1)
    path = base / "__snapshots__" / f"{name}.json"
    actual = snapshot_json(report)
    update = os.environ.get("CUPEL_UPDATE_SNAPSHOTS") == "1"
    if not path.exists():
        if os.environ.get("CI") and not update:
            raise SnapshotMismatchError(
                f"snapshot {name!r} does not exist ({path}); record it locally (or with CUPEL_UPDATE_SNAPSHOTS=1) "
                "and commit it"
            )
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual, encoding="utf-8")
        return
    expected = path.read_text(encoding="utf-8")
    if expected == actual:
        return
    if update:
        path.write_text(actual, encoding="utf-8")
        return
    diff = "".join(
        difflib.unified_diff(
            expected.splitlines(keepends=True), actual.splitlines(keepends=True), f"{path.name} (snapshot)", "actual"
        )
    )
    raise SnapshotMismatchError(
        f"report does not match snapshot {name!r} ({path}); CUPEL_UPDATE_SNAPSHOTS=1 rewrites it.\n{diff}"
    )
