"""Outputs of ``cupel-np budget``: ``curves.parquet``, ``rows.parquet`` and a self-contained
``report.html`` (SVG charts embedded; also written beside the page).

The page is built from the two Arrow tables alone (``summarize``), so it shows exactly what
the Parquet files hold: per variant, the median and inter-quartile band across sets of
utilization and included count at every ladder budget, the budget at which the variant's
corpus-wide included count first reaches 90 / 95 / 99 % of its count at the largest budget,
and the rows whose inclusion is not monotonic along the ladder.

With labels (``labels=``, ``--label-column``): ``outcomes.parquet`` (token recall against
budget per variant: pooled over the labelled sets, and the means over sets of token and item
recall; ``analysis.outcomes.budget_outcomes``), ``outcome_reach.parquet`` (the smallest ladder
budget at which each variant's pooled token recall reaches 90 / 95 / 99 %) and a page section
with both, stating the token counter.
"""

from __future__ import annotations

import html
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from cupel_np._fs import AnyPath
from cupel_np.errors import InvalidConfigError
from cupel_np.report.charts import curve_svg
from cupel_np.report.page import CSS, chart_img

#: the shares of the largest-budget selection the report locates
LEVELS = (0.90, 0.95, 0.99)


def parse_ladder(spec: str) -> tuple[int, int, int]:
    """``LO:HI:STEPS`` -> (lo, hi, steps)."""
    parts = spec.split(":")
    try:
        if len(parts) != 3:
            raise ValueError
        lo, hi, steps = (int(p) for p in parts)
    except ValueError:
        raise InvalidConfigError(f"--ladder must be LO:HI:STEPS (three integers), got {spec!r}") from None
    if lo < 0:
        raise InvalidConfigError(f"--ladder {spec}: LO is the smallest budget (max_tokens) and must be >= 0, got {lo}")
    return lo, hi, steps


def _grid(curves: pa.Table, column: str):
    """``column`` as a [variant, budget, set] float array (NaN where the cell failed), with
    the variant labels and ladder budgets in the table's order."""
    labels = list(dict.fromkeys(curves.column("variant").to_pylist()))
    budgets = np.array(list(dict.fromkeys(curves.column("budget").to_pylist())), dtype=np.int64)
    n_p, n_b = len(labels), len(budgets)
    n_s = curves.num_rows // max(n_p * n_b, 1)
    if n_p * n_b * n_s != curves.num_rows:
        raise InvalidConfigError("curves table is not a full variant x budget x set grid")
    col = curves.column(column).to_numpy(zero_copy_only=False)
    vals = np.asarray(col, dtype=np.float64)  # nulls become NaN
    return labels, budgets, vals.reshape(n_p, n_b, n_s)


def summarize(curves: pa.Table, rows: pa.Table) -> dict:
    """Every number the report shows, computed from the two tables."""
    labels, budgets, util = _grid(curves, "target_utilization")
    _, _, count = _grid(curves, "included_count")
    out = {"labels": labels, "budgets": budgets.tolist(), "variants": {}}
    rv = rows.column("variant").to_numpy(zero_copy_only=False)
    nonmono = rows.column("non_monotonic").to_numpy(zero_copy_only=False)
    multi = rows.column("flips_more_than_once").to_numpy(zero_copy_only=False)
    for p, lab in enumerate(labels):
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a budget where every set failed: NaN, not noise
            u_q = [
                np.nanpercentile(util[p], q, axis=1) if util.shape[2] else np.full(len(budgets), np.nan)
                for q in (25, 50, 75)
            ]
            c_q = [
                np.nanpercentile(count[p], q, axis=1) if count.shape[2] else np.full(len(budgets), np.nan)
                for q in (25, 50, 75)
            ]
        total = np.nansum(count[p], axis=1).astype(np.int64)  # failed cells include nothing
        reach = {}
        for lv in LEVELS:
            hit = np.flatnonzero(total >= lv * total[-1]) if total[-1] > 0 else np.zeros(0, np.int64)
            reach[f"{round(lv * 100)}%"] = int(budgets[hit[0]]) if hit.size else None
        mine = rv == lab
        out["variants"][lab] = {
            "util_q": [q.tolist() for q in u_q],
            "count_q": [q.tolist() for q in c_q],
            "total_included": total.tolist(),
            "reach": reach,
            "non_monotonic_rows": int(np.count_nonzero(nonmono[mine])),
            "multi_flip_rows": int(np.count_nonzero(multi[mine])),
            "failed_cells": int(np.count_nonzero(np.isnan(count[p]))),
        }
    return out


def _curve_svg(summary: dict, key: str, ylabel: str, title: str, percent: bool) -> bytes:
    curves = {lab: summary["variants"][lab][key] for lab in summary["labels"]}
    return curve_svg(summary["budgets"], curves, ylabel, title, percent)


def _fmt(v) -> str:
    return "never" if v is None else f"{v:,}"


def outcomes_html(recall: pa.Table, reach: pa.Table, column: str, tokens: str) -> str:
    """The page section of a labelled budget run: recall against budget and the budgets at
    which each variant reaches 90 / 95 / 99 % of the relevant tokens."""
    budgets = sorted(set(recall.column("budget").to_pylist()))
    by = {(r["variant"], r["budget"]): r for r in recall.to_pylist()}
    variants = list(dict.fromkeys(recall.column("variant").to_pylist()))
    head = "".join(f"<th>{b:,}</th>" for b in budgets)
    rows = "".join(
        f'<tr data-variant="{html.escape(v)}"><td>{html.escape(v)}</td>'
        + "".join(f"<td>{_fmt3(by[v, b]['token_recall'])}</td>" for b in budgets)
        + "</tr>"
        for v in variants
    )
    fr = sorted(set(reach.column("fraction").to_pylist()))
    rby = {(r["variant"], r["fraction"]): r["budget"] for r in reach.to_pylist()}
    rhead = "".join(f"<th>{round(f * 100)}% at</th>" for f in fr)
    rrows = "".join(
        f'<tr data-variant="{html.escape(v)}"><td>{html.escape(v)}</td>'
        + "".join(f'<td class="reach">{_fmt(rby.get((v, f)))}</td>' for f in fr)
        + "</tr>"
        for v in variants
    )
    return f"""<h2 id="outcomes">Recall against budget</h2>
<p class="meta">Relevant tokens kept / relevant tokens by {html.escape(repr(column))}, pooled over the labelled
sets where the cell ran, at every ladder budget. Tokens: {html.escape(tokens)}.</p>
<table id="recall-by-budget"><tr><th>variant</th>{head}</tr>{rows}</table>
<h2>Budget needed for recall</h2>
<p class="meta">The smallest ladder budget at which the pooled token recall reaches the share (blank: no
budget of the ladder does; recall need not rise with the budget).</p>
<table id="recall-reach"><tr><th>variant</th>{rhead}</tr>{rrows}</table>"""


def _fmt3(v) -> str:
    return "" if v is None else f"{v:.3f}"


def print_outcomes(recall: pa.Table, reach: pa.Table, column: str, out=None) -> None:
    """The labelled budget run's lines: per variant, the budget reaching each recall share and
    the pooled token recall at the largest budget."""
    fr = sorted(set(reach.column("fraction").to_pylist()))
    rby = {(r["variant"], r["fraction"]): r["budget"] for r in reach.to_pylist()}
    last = max(recall.column("budget").to_pylist())
    at_last = {r["variant"]: r["token_recall"] for r in recall.to_pylist() if r["budget"] == last}
    variants = list(dict.fromkeys(recall.column("variant").to_pylist()))
    w = max([len("variant"), *(len(v) for v in variants)])
    print(f"token recall by {column!r} (pooled over the labelled sets) against budget:", file=out)
    print(
        f"  {'variant':<{w}}  {'recall at ' + format(last, ','):>16} "
        + " ".join(f"{str(round(f * 100)) + '% at':>10}" for f in fr),
        file=out,
    )
    for v in variants:
        cells = " ".join(f"{_fmt(rby.get((v, f))) or '-':>10}" for f in fr)
        print(f"  {v:<{w}}  {_fmt3(at_last.get(v)):>16} {cells}", file=out)


def start_here(summary: dict) -> str:
    """The budget page's opening paragraph in words: the ladder, which variant reaches 95% of
    its largest-budget inclusion soonest, and where inclusion is not monotonic."""
    b = summary["budgets"]
    labels = summary["labels"]
    parts = [f"{len(labels)} variant(s) over {len(b)} budgets from {b[0]:,} to {b[-1]:,} tokens." if b else ""]
    reach = [(summary["variants"][lab]["reach"].get("95%"), lab) for lab in labels]
    got = sorted((r, lab) for r, lab in reach if r is not None)
    if got:
        parts.append(
            f"<b>{html.escape(got[0][1])}</b> needs the least budget to keep 95% of what it keeps at the largest "
            f"one ({got[0][0]:,} tokens)."
        )
    never = [lab for r, lab in reach if r is None]
    if never:
        parts.append(f"Never at 95% on this ladder: {html.escape(', '.join(never))}.")
    nonmono = [lab for lab in labels if summary["variants"][lab]["non_monotonic_rows"]]
    parts.append(
        f"Inclusion is not monotonic in the budget for {html.escape(', '.join(nonmono))} (see below)."
        if nonmono
        else "Every variant's inclusion grows with the budget (no item drops out as the budget rises)."
    )
    return '<div id="start"><h2>Start here</h2><p>' + " ".join(p for p in parts if p) + "</p></div>"


def render_html(summary: dict, svgs: dict[str, bytes], *, title: str, meta: str, extra: str = "") -> str:
    def img(name, alt):
        return chart_img(svgs, name, alt)

    levels = [f"{round(lv * 100)}%" for lv in LEVELS]
    head = "".join(f"<th>{l} at</th>" for l in levels)
    reach_rows = []
    mono_rows = []
    for lab in summary["labels"]:
        v = summary["variants"][lab]
        cells = "".join(f'<td class="reach" data-level="{l}">{_fmt(v["reach"][l])}</td>' for l in levels)
        reach_rows.append(
            f'<tr data-variant="{html.escape(lab)}"><td>{html.escape(lab)}</td>'
            f'<td class="largest">{v["total_included"][-1]:,}</td>{cells}</tr>'
        )
        mono_rows.append(
            f'<tr data-variant="{html.escape(lab)}"><td>{html.escape(lab)}</td>'
            f'<td class="nonmono">{v["non_monotonic_rows"]:,}</td>'
            f'<td class="multiflip">{v["multi_flip_rows"]:,}</td>'
            f'<td class="failed">{v["failed_cells"]:,}</td></tr>'
        )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>{CSS}</style></head><body>
<h1>{html.escape(title)}</h1>
<p class="meta">{html.escape(meta)}</p>
{start_here(summary)}
<h2>Utilization by budget</h2>
<p class="meta">Tokens used / target tokens per item set: the line is the median across sets, the band the
inter-quartile range (failed cells left out).</p>
{img("utilization.svg", "utilization curves per variant")}
<h2>Included items by budget</h2>
{img("included.svg", "included-count curves per variant")}
<h2>Budget needed</h2>
<p class="meta">The smallest ladder budget at which the variant's included count, summed over all sets,
reaches the given share of its count at the largest budget.</p>
<table id="reach"><tr><th>variant</th><th>included at largest budget</th>{head}</tr>{"".join(reach_rows)}</table>
<h2>Non-monotonic rows</h2>
<p class="meta">Rows that are included at some budget and excluded at a larger one (greedy skipping,
quotas, count quotas), rows whose status changes more than once along the ladder, and
(variant, budget, set) cells whose dry run failed (counted as including nothing).</p>
<table id="nonmono"><tr><th>variant</th><th>non-monotonic rows</th><th>rows flipping more than once</th><th>failed cells</th></tr>{"".join(mono_rows)}</table>
{extra}
</body></html>
"""


def write_budget_outputs(
    result, out_dir, *, title: str, overwrite: bool = False, labels=None, tokens: str = ""
) -> dict[str, AnyPath]:
    """Write ``curves.parquet``, ``rows.parquet`` (zstd, atomically), the two SVG charts,
    ``report.html`` and ``manifest.json`` for a ``BudgetCurves`` result; returns the paths. A
    directory holding another run's outputs is refused unless ``overwrite=True``. With
    ``labels`` (a Labels, or a column the items kept) also ``outcomes.parquet`` and
    ``outcome_reach.parquet`` and their page section (module docstring); ``tokens`` says
    what the token counts are (``analysis.signals.token_counter_of``)."""
    from cupel_np.io.outdir import KIND_BUDGET, claim_out_dir, run_id, write_manifest
    from cupel_np.io.parquet import atomic_write_bytes

    out = claim_out_dir(out_dir, overwrite=overwrite, run=run_id(result))
    paths = {}
    tables = [("curves", result.curves), ("rows", result.rows)]
    extra = ""
    if labels is not None:
        from cupel_np.analysis.outcomes import budget_outcomes
        from cupel_np.analysis.signals import token_counter_of

        recall, reach = budget_outcomes(result, labels)
        tables += [("outcomes", recall), ("outcome_reach", reach)]
        column = labels if isinstance(labels, str) else labels.column
        extra = outcomes_html(recall, reach, column, tokens or token_counter_of(None))
    for name, table in tables:
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink, compression="zstd")
        paths[name] = out / f"{name}.parquet"
        atomic_write_bytes(paths[name], sink.getvalue().to_pybytes())
    summary = summarize(result.curves, result.rows)
    svgs = {
        "utilization.svg": _curve_svg(summary, "util_q", "target util (median, IQR)", "Utilization by budget", True),
        "included.svg": _curve_svg(
            summary, "count_q", "included items per set (median, IQR)", "Included items by budget", False
        ),
    }
    for name, data in svgs.items():
        atomic_write_bytes(out / name, data)
    t = result.run.table
    meta = (
        f"{t.n:,} items in {t.n_sets:,} item set(s); {len(result.labels)} variant(s) x "
        f"{len(result.budgets)} budgets from {result.budgets[0].max_tokens:,} to "
        f"{result.budgets[-1].max_tokens:,} tokens (output reserve {result.budgets[0].output_reserve:,})."
    )
    page = render_html(summary, svgs, title=title, meta=meta, extra=extra)
    paths["report"] = out / "report.html"
    atomic_write_bytes(paths["report"], page.encode("utf-8"))
    write_manifest(out, KIND_BUDGET, run_id(result), [*(p.name for p in paths.values()), *svgs])
    return paths


def print_summary(summary: dict, out=None) -> None:
    levels = [f"{round(lv * 100)}%" for lv in LEVELS]
    w = max([len("variant")] + [len(l) for l in summary["labels"]])
    print(
        f"{'variant':<{w}}  {'largest':>9} " + " ".join(f"{l + ' at':>10}" for l in levels) + f" {'non-monotonic':>13}",
        file=out,
    )
    for lab in summary["labels"]:
        v = summary["variants"][lab]
        reach = " ".join(f"{_fmt(v['reach'][l]):>10}" for l in levels)
        print(f"{lab:<{w}}  {v['total_included'][-1]:>9,} {reach} {v['non_monotonic_rows']:>13,}", file=out)
