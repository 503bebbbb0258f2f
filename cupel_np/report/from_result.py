"""``report.html`` for an in-memory SweepResult: the numbers the page shows (computed by
``analysis.compare`` from the [G, V] content-status matrix in bounded blocks), gathered into
``report.page.PageData`` and rendered by ``report.page`` (the same sections and charts as the
page built from written outputs, ``report.from_dir``). Every section is bounded in size
whatever the sweep's size.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from cupel_np._fs import AnyPath
from cupel_np.analysis.compare import (
    agreement,
    group_cells,
    kind_mix,
    reason_totals,
    set_summary,
    swing_by_category,
    token_totals,
    top_swings,
    valid_cells,
)
from cupel_np.analysis.losses import check_lines, outcome_page_data
from cupel_np.analysis.signals import token_counter_of
from cupel_np.analysis.toolpairs import shown_group_keys
from cupel_np.io.outdir import KIND_PAGE, claim_out_dir, run_id, write_manifest
from cupel_np.report.page import CHARTS, PAGE_FROM_RESULT, PageData, write_page

TOP_K = 40  # rows of the heatmap chart


def _rows(result, groups: np.ndarray, keys: dict[str, pa.Array]) -> list[dict]:
    """The page's row dicts for content groups (``report.page.PageData.rows``); ``keys``: the
    group columns shown (``shown_group_keys``), each row's key taken at its first row."""
    if len(groups) == 0:
        return []
    t = result.table
    cells = group_cells(result, groups)
    valid = valid_cells(result, groups)
    out = []
    for i, g in enumerate(groups):
        r, s = int(result.group_first_row[g]), int(result.group_set[g])
        fail = cells["failed"][i]
        out.append(
            {
                "set": t.set_keys[s] if t.set_column else None,
                "content": t.content[r].as_py(),
                "kind": t.kind[r].as_py(),
                "source": t.source[r].as_py(),
                "tokens": int(t.tokens[r]),
                "group_keys": [col[r].as_py() for col in keys.values()],
                "n_in": int((result.status[g] & ~result.failed[:, s]).sum()),
                "n_valid": int(valid[i].sum()),
                "status": [str(x) for x in cells["status"][i]],
                "reason": [str(x) for x in cells["reason"][i]],
                "rank": [None if fail[v] else int(cells["rank"][i, v]) for v in range(len(result.labels))],
            }
        )
    return out


def _drill_sets(result, max_sets: int, keys: dict[str, pa.Array]) -> list[dict]:
    """The sets with the most swinging contents (ties: the set's first input row)."""
    t = result.table
    per_set = np.diff(result.swing_offsets)
    first = t.input_row[np.asarray(t.offsets[:-1], dtype=np.int64)] if t.n else np.zeros(t.n_sets, np.int64)
    segs = np.lexsort((first, -per_set))[:max_sets]
    segs = segs[per_set[segs] > 0]
    ss = set_summary(result, segs)
    out = []
    for j, s in enumerate(int(x) for x in segs):
        sg = result.swing_groups[int(result.swing_offsets[s]) : int(result.swing_offsets[s + 1])]
        per_variant = [
            {
                "error": str(result.run.errors[vi][s]) if result.failed[vi, s] else None,
                "included": int(ss["included"][j, vi]),
                "tokens": int(ss["tokens"][j, vi]),
                "target": int(result.variants[vi].budget.target_tokens),
                "swing_included": int(ss["swing_included"][j, vi]),
            }
            for vi in range(len(result.labels))
        ]
        out.append(
            {
                "key": t.set_keys[s] if t.set_column else None,
                "swing": int(sg.size),
                "groups": int(result.group_offsets[s + 1] - result.group_offsets[s]),
                "items": int(t.offsets[s + 1] - t.offsets[s]),
                "set_tokens": int(np.maximum(t.tokens[int(t.offsets[s]) : int(t.offsets[s + 1])], 0).sum()),
                "per_variant": per_variant,
                "rows": _rows(result, top_swings(result, 25, sg), keys),
            }
        )
    return out


def result_page_data(result, *, title: str, max_rows: int = 200, max_sets: int = 5, top_k: int = TOP_K) -> PageData:
    """Everything the sweep page shows, from an in-memory SweepResult."""
    t = result.table
    keys, totals = reason_totals(result)
    errors = result.errors
    used, target, could = token_totals(result)
    group_keys = shown_group_keys(result.run)
    return PageData(
        title=title,
        generator=PAGE_FROM_RESULT,
        set_name=t.set_column or "set",
        has_sets=bool(t.set_column),
        n_items=t.n,
        n_sets=t.n_sets,
        n_swing=result.n_swing,
        labels=list(result.labels),
        variants=[
            {"label": x.label, "policy": x.policy.to_dict(), "budget": x.budget.to_dict()} for x in result.variants
        ],
        failed_sets=result.failed.sum(axis=1),
        failure_example={l: str(next(iter(e.values()))) for l, e in errors.items()},
        ag=agreement(result),
        by_kind=swing_by_category(result, "kind"),
        by_source=swing_by_category(result, "source"),
        reason_keys=keys,
        reason_totals=totals,
        rows=_rows(result, top_swings(result, max(max_rows, top_k)), group_keys),
        sets=_drill_sets(result, max_sets, group_keys),
        used=used,
        target=target,
        could=could,
        kind_names=list(t.kind_vocab),
        kind_mix=kind_mix(result),
        heat_rows=top_k,
        orphans=result.orphan_totals(),
        group_columns=list(group_keys),
    )


#: the older name of ``result_page_data`` (kept for code written against it)
page_data = result_page_data


def write_html_report(
    result,
    out_dir,
    *,
    title: str = "cupel_np policy sensitivity",
    top_k: int = TOP_K,
    max_rows: int = 200,
    max_sets: int = 5,
    max_pairs: int = 20,
    overwrite: bool = False,
    labels=None,
    n_boot: int = 500,
    tokens: str = "",
) -> AnyPath:
    """Write ``report.html`` plus ``heatmap.svg``, ``tokens.svg`` and ``kinds.svg`` into
    ``out_dir`` (atomically) and return the page's path. The page's size is bounded for any
    sweep: ``max_rows`` swinging items, ``max_sets`` drill-down sets, ``max_pairs`` variant
    pairs, plus aggregates over everything. A directory holding another run's outputs is
    refused unless ``overwrite=True`` (the same result's ``write_sweep`` outputs are its own).
    The page lists the signal checks (constant scorers, knapsack capacity, empty selections);
    with ``labels`` (a Labels or a column the items kept) it has an outcomes section
    (``n_boot`` bootstrap resamples; ``tokens`` says what the token counts are)."""
    out = claim_out_dir(out_dir, overwrite=overwrite, run=run_id(result))
    d = result_page_data(result, title=title, max_rows=max_rows, max_sets=max_sets, top_k=top_k)
    d.max_pairs = max_pairs
    d.checks = check_lines(result)
    if labels is not None:
        d.outcomes = outcome_page_data(result, labels, n_boot=n_boot, tokens=tokens or token_counter_of(None))
    path = write_page(d, out)
    write_manifest(out, KIND_PAGE, run_id(result), [path.name, *CHARTS])
    return path
