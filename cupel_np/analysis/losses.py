"""Where variants lose the relevant items, and the bounded outcome summary a sweep page shows.

``relevant_losses(result, labels)``: per variant and exclusion reason, the relevant contents
(content-keyed, like every outcome metric) of the labelled sets the variant ran on that it did
not keep, and their tokens. The reason is the one the variant gave the content's first row
(``BudgetExceeded``, ``ScoredTooLow``, ``Deduplicated``, ...).

``outcome_page_data(result, labels)``: what a page's outcomes section shows, bounded by the
number of variants: the per-variant summary with bootstrap intervals (``outcome_summary``),
every variant against the first set by set (``paired_comparisons``), the losses, and the
signal checks (``cupel_np.analysis.signals``).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from cupel_np.analysis.outcomes import (
    METRICS,
    outcome_matrices,
    outcome_summary,
    outcome_summary_of_table,
    paired_comparisons,
    paired_stats,
)
from cupel_np.analysis.signals import knapsack_checks, scorer_constancy
from cupel_np.engine.reasons import reason_name_lut

__all__ = [
    "check_lines",
    "check_lines_of_variants",
    "outcome_page_data",
    "outcome_page_data_of_table",
    "relevant_losses",
]


def relevant_losses(result, labels) -> pa.Table:
    """One row per (variant, reason) with at least one loss: ``variant``, ``reason``,
    ``relevant_lost`` (contents), ``relevant_tokens_lost``; variants in order, reasons by
    contents lost (most first). Failed (variant, set) cells and unlabelled sets are left out."""
    m = outcome_matrices(result, labels)
    run = result.run
    lut = reason_name_lut()
    g_first = result.group_first_row
    g_set = result.group_set
    g_tok = np.maximum(np.asarray(result.table.tokens, dtype=np.int64)[g_first], 0)
    rows = []
    for v, label in enumerate(result.labels):  # one bincount per variant
        lost = m.group_relevant & ~result.status[:, v] & m.labelled[g_set] & ~m.failed[v][g_set]
        code = run.reason[v][g_first[lost]].astype(np.int64) + 1
        n = np.bincount(code, minlength=lut.shape[0])
        tok = np.bincount(code, weights=g_tok[lost], minlength=lut.shape[0])
        for c in np.argsort(-n, kind="stable"):
            if n[c] == 0:
                break
            rows.append(
                {
                    "variant": label,
                    "reason": lut[c] or "none",
                    "relevant_lost": int(n[c]),
                    "relevant_tokens_lost": int(tok[c]),
                }
            )
    schema = pa.schema(
        [
            ("variant", pa.string()),
            ("reason", pa.string()),
            ("relevant_lost", pa.int64()),
            ("relevant_tokens_lost", pa.int64()),
        ]
    )
    return pa.Table.from_pylist(rows, schema=schema)


def check_lines(result) -> list[str]:
    """The signal checks of a sweep in words: the constant scorers and, per variant, the
    knapsack capacity and empty-selection flags (empty when nothing is flagged)."""
    out = []
    line = scorer_constancy(result).summary_line()
    if line:
        out.append(line)
    out += knapsack_checks(result).lines(list(result.labels))
    return out


def check_lines_of_variants(vt: pa.Table) -> list[str]:
    """``check_lines`` from a written ``variants.parquet`` (``variants_table`` rows, any number of
    chunks): the same flags, counted over the table's rows; a scorer's sets are the distinct
    (set, scorer) pairs of its ``constant_scorers`` lists, out of every set of the table."""
    if "constant_scorers" not in vt.column_names:
        return []
    import pyarrow.compute as pc

    set_col = vt.column_names[1]  # variants_table: variant, then the set column
    n_sets = len(pc.unique(vt[set_col]))
    out = []
    lists = vt["constant_scorers"]
    parent = pc.list_parent_indices(lists)
    flat = pc.list_flatten(lists)
    if len(flat):
        pairs = pa.table({"set": vt[set_col].take(parent), "scorer": flat})
        per = pairs.group_by(["scorer", "set"], use_threads=False).aggregate([]).group_by("scorer", use_threads=False)
        counts = per.aggregate([("set", "count")]).to_pylist()
        order = list(dict.fromkeys(flat.to_pylist()))
        by = {r["scorer"]: r["set_count"] for r in counts}
        out.append("constant scorers: " + ", ".join(f"{k} on {by[k]:,}/{n_sets:,} sets" for k in order))
    variants = list(dict.fromkeys(vt["variant"].to_pylist()))
    flags = vt.select(["variant", "knapsack_flag", "selected_nothing"]).to_pylist()
    for label in variants:
        mine = [r for r in flags if r["variant"] == label]
        z = sum(r["knapsack_flag"] == "zero_capacity" for r in mine)
        r_ = sum(r["knapsack_flag"] == "rounding_loss" for r in mine)
        e = sum(bool(r["selected_nothing"]) for r in mine)
        if z:
            out.append(f"{label}: knapsack bucket is above the effective target on {z:,} sets (zero capacity)")
        if r_:
            out.append(f"{label}: knapsack bucket loses more than 25% of the target to rounding on {r_:,} sets")
        if e:
            out.append(f"{label}: selected nothing from {e:,} non-empty sets (an item fitted the target)")
    return out


def outcome_page_data(result, labels, *, n_boot: int = 500, seed: int = 0, tokens: str = "") -> dict:
    """The bounded data of a page's outcomes section (module docstring); ``tokens`` says what
    the token counts are."""
    summary = outcome_summary(result, labels, metrics=METRICS, n_boot=n_boot, seed=seed)
    paired = (
        paired_comparisons(result, labels, n_boot=n_boot, seed=seed)
        if len(result.labels) > 1
        else pa.table({"a": pa.array([], pa.string())})
    )
    column = labels if isinstance(labels, str) else getattr(labels, "column", "labels")
    return {
        "column": column,
        "summary": summary.to_pylist(),
        "paired": paired.to_pylist(),
        "losses": relevant_losses(result, labels).to_pylist(),
        "tokens": tokens,
    }


def outcome_page_data_of_table(
    outcomes: pa.Table, variants: list[str], column: str, *, n_boot: int = 500, seed: int = 0, tokens: str = ""
) -> dict:
    """``outcome_page_data`` from a written ``outcomes.parquet`` (a streamed or Dask run's page):
    the same summary and paired comparisons (sets in the table's order); the losses are totals
    per variant (the reasons are in the items, not in the outcomes table: ``reason`` is
    ``"(any)"``)."""
    summary = outcome_summary_of_table(outcomes, variants, metrics=METRICS, n_boot=n_boot, seed=seed)
    names = np.asarray(outcomes.column("variant").to_numpy(zero_copy_only=False))
    rec = np.asarray(outcomes.column("token_recall").to_numpy(zero_copy_only=False), dtype=np.float64)
    rel = np.asarray(outcomes.column("relevant_items").to_numpy(zero_copy_only=False), dtype=np.float64)
    inc = np.asarray(outcomes.column("relevant_included").to_numpy(zero_copy_only=False), dtype=np.float64)
    tok = np.asarray(outcomes.column("relevant_tokens").to_numpy(zero_copy_only=False), dtype=np.float64)
    tinc = np.asarray(outcomes.column("relevant_tokens_included").to_numpy(zero_copy_only=False), dtype=np.float64)
    rows = {v: np.flatnonzero(names == v) for v in variants}
    paired = [
        dict(
            a=v,
            b=variants[0],
            metric="token_recall",
            **paired_stats(rec[rows[v]], rec[rows[variants[0]]], n_boot=n_boot, seed=seed),
        )
        for v in variants[1:]
    ]
    losses = []
    for v in variants:
        ok = ~np.isnan(inc[rows[v]])
        lost = int((rel[rows[v]] - inc[rows[v]])[ok].sum())
        if lost:
            t_lost = int((tok[rows[v]] - tinc[rows[v]])[ok].sum())
            losses.append({"variant": v, "reason": "(any)", "relevant_lost": lost, "relevant_tokens_lost": t_lost})
    return {"column": column, "summary": summary.to_pylist(), "paired": paired, "losses": losses, "tokens": tokens}
