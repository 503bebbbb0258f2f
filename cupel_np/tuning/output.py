"""What ``cupel-np tune`` writes: ``leaderboard.parquet`` (one row per trial),
``pareto.parquet`` (the search Pareto front of token recall against tokens used),
``comparison.parquet`` (the best policies and the presets on the held-out sets),
``best-1.toml`` ... (policy files any ``--policy`` option reads), ``pareto.svg`` and
``report.html``, and ``summary.json``."""

from __future__ import annotations

import json
import math
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from cupel_np._files import atomic_write_bytes, dumps_json
from cupel_np._svg import (
    Svg,
    axis_width,
    human,
    label_text,
    legend,
    legend_size,
    nice_ticks,
    points,
    text_width,
    y_axis,
)
from cupel_np.analysis.signals import policy_scorer_names
from cupel_np.errors import InvalidConfigError
from cupel_np.io.outdir import KIND_TUNE, claim_out_dir, new_run_id, write_manifest
from cupel_np.io.parquet import write_parquet_atomic
from cupel_np.model.budget import ContextBudget
from cupel_np.model.policy import Policy
from cupel_np.text import escape_html
from cupel_np.tuning.best import compared

__all__ = ["policy_toml", "write_tune"]


# --------------------------------------------------------------------------- policy TOML
def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)  # a JSON string is a TOML basic string
    if isinstance(v, datetime):  # a decay scorer's reference_time: a TOML offset date-time
        return v.isoformat()
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml_value(x)}" for k, x in v.items()) + " }"
    raise InvalidConfigError(f"cannot write {v!r} to TOML")


def _toml_table(d: dict, path: list[str], out: list[str]) -> None:
    """Scalars and inline values first, then sub-tables and arrays of tables."""
    nested = []
    for k, v in d.items():
        if v is None:
            continue
        if isinstance(v, dict) or (isinstance(v, list) and v and all(isinstance(x, dict) for x in v)):
            nested.append((k, v))
        else:
            out.append(f"{json.dumps(k) if not k.isidentifier() else k} = {_toml_value(v)}")
    for k, v in nested:
        p = path + [k]
        if isinstance(v, dict):
            out.append(f"\n[{'.'.join(p)}]")
            _toml_table(v, p, out)
        else:
            for x in v:
                out.append(f"\n[[{'.'.join(p)}]]")
                _toml_table(x, p, out)


def policy_toml(policy: Policy, budget: ContextBudget | None = None, comment: str = "") -> str:
    """A policy file (``Policy.from_file`` / ``--policy`` read it back to an equal policy); the
    budget it was chosen for is written as a comment (the budget is never part of a policy)."""
    lines = [f"# {line}" for line in comment.splitlines()]
    if budget is not None:
        opts = f"--max-tokens {budget.max_tokens} --target-tokens {budget.target_tokens}"
        if budget.output_reserve:
            opts += f" --output-reserve {budget.output_reserve}"
        lines.append(f"# chosen for {opts}")
        extra = [
            f"{k}={v!r}"
            for k, v in (
                ("reserved_slots", budget.reserved_slots),
                ("estimation_safety_margin_percent", budget.estimation_safety_margin_percent),
            )
            if v
        ]
        if extra:
            lines.append(f"# and a budget with {', '.join(extra)}")
    _toml_table(policy.to_dict(), [], lines)
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- outputs
def _write(path: Path, data: bytes) -> Path:
    atomic_write_bytes(path, data)  # a temp file + rename: never a half-written output
    return path


def write_tune(result, out, *, overwrite: bool = False, title: str = "cupel_np tune") -> dict[str, str]:
    """Write a TuneResult's outputs to directory ``out`` (refusing one holding an earlier
    run's unless ``overwrite``); returns {name: path}."""
    out = claim_out_dir(out, overwrite=overwrite)  # another run's outputs: refused unless overwrite
    paths: dict[str, str] = {}
    for name in ("leaderboard", "pareto", "comparison"):
        paths[name] = str(write_parquet_atomic(getattr(result, name), out / f"{name}.parquet", {}))
    for i, (label, pol, b) in enumerate(result.best, start=1):
        note = f"{label}: best #{i} of a {result.objective} search (seed {result.seed})"
        note += f"\nscorers: {policy_scorer_names(pol)}"
        if result.equivalents.get(label):
            note += f"\nselects as: {', '.join(result.equivalents[label])}"
        text = policy_toml(pol, b, note)
        paths[f"best-{i}"] = str(_write(out / f"best-{i}.toml", text.encode()))
    paths["plot"] = str(_pareto_svg(result, out / "pareto.svg"))
    paths["report"] = str(_report_html(result, out / "report.html", title))
    summary = summary_dict(result, paths)
    paths["summary"] = str(_write(out / "summary.json", dumps_json(summary, indent=2).encode()))
    write_manifest(out, KIND_TUNE, new_run_id(), [Path(p).name for p in paths.values()], objective=result.objective)
    return paths


def paired_text(paired: dict, sets: int) -> str:
    """The paired comparison in words, or why there is none (out of ``sets`` sets of the part)."""
    p = paired
    head = f"{p['a']} vs {p['b']} on the {p['part']} sets"
    if not compared(p):
        return f"{head}: not compared, none of the {sets:,} {p['part']} sets has a relevant item"
    return (
        f"{head}: {p['mean_diff']:+.3f} {p['metric']} ({p['lo']:+.3f} to {p['hi']:+.3f}), "
        f"{p['wins']} wins / {p['ties']} ties / {p['losses']} losses"
    )


def tune_warnings(result) -> list[str]:
    """The search's warnings (``TuneResult.warnings``: the artefacts, and that the best policy
    could not be compared with the presets when no set of that part has a relevant item)."""
    return list(result.warnings)


def summary_dict(result, paths: dict | None = None) -> dict:
    """The run in a few numbers (what ``--json`` prints)."""
    cmp = result.comparison.to_pylist()
    best = next((r for r in cmp if r["kind"] == "best"), None)
    presets = [r for r in cmp if r["kind"] == "preset"]
    top_preset = max(presets, key=lambda r: r["heldout_token_recall"] or -1.0) if presets else None
    return {
        "objective": result.objective,
        "seed": result.seed,
        "trials": result.trials,
        "policies_swept": result.policies_swept,
        "search_sets": result.search_sets,
        "heldout_sets": result.heldout_sets,
        "best": best,
        "best_preset_heldout": top_preset,
        "paired": result.paired,
        "swing": result.swing,
        "best_scorers": [policy_scorer_names(p) for _l, p, _b in result.best],
        "equivalents": result.equivalents,
        "constant_scorers": {"sets": result.constant_checked, "constant": result.constant_scorers},
        "warnings": tune_warnings(result),
        "token_counter": result.token_counter,
        "seconds": round(result.elapsed, 3),
        "outputs": paths or {},
    }


def _pareto_svg(result, path: Path) -> Path:
    lb = result.leaderboard
    ok = np.array([s == "ok" for s in lb["state"].to_pylist()], dtype=bool)
    x = np.array(lb["search_tokens_used"].to_pylist(), dtype=float)[ok]
    y = np.array(lb["search_token_recall"].to_pylist(), dtype=float)[ok]
    fx = np.array(result.pareto["search_tokens_used"].to_pylist(), dtype=float)
    fy = np.array(result.pareto["search_token_recall"].to_pylist(), dtype=float)
    presets = [
        (r["label"], float(r["search_tokens_used"] or 0.0), float(r["search_token_recall"]))
        for r in result.comparison.to_pylist()
        if r["kind"] == "preset" and r["search_token_recall"] is not None
    ]
    return _write(path, pareto_svg(x, y, fx, fy, presets))


def pareto_svg(
    x: np.ndarray, y: np.ndarray, front_x: np.ndarray, front_y: np.ndarray, presets: list[tuple[str, float, float]]
) -> bytes:
    """A policy search's trials (``x`` tokens used, ``y`` token recall), its Pareto front as a
    line, and the presets as labelled squares."""
    x, y, front_x, front_y = (np.asarray(a, dtype=np.float64) for a in (x, y, front_x, front_y))
    ok = np.isfinite(x) & np.isfinite(y)
    front = np.isfinite(front_x) & np.isfinite(front_y)
    marks = [
        (label_text(lab), float(px), float(py)) for lab, px, py in presets if math.isfinite(px) and math.isfinite(py)
    ]
    xs = np.concatenate([x[ok], front_x[front], [m[1] for m in marks]])
    ys = np.concatenate([y[ok], front_y[front], [m[2] for m in marks]])
    x_lo, x_hi = (float(xs.min()), float(xs.max())) if xs.size else (0.0, 1.0)
    y_lo, y_hi = (float(ys.min()), float(ys.max())) if ys.size else (0.0, 1.0)
    xt = nice_ticks(x_lo, x_hi if x_hi > x_lo else x_lo + 1.0)
    yt = nice_ticks(y_lo, y_hi if y_hi > y_lo else y_lo + 0.01)
    entries = [("#7f8c9d", "trials"), ("#1f77b4", "Pareto front (search sets)"), ("#d62728", "presets")]
    x0 = max(axis_width(yt, human), 50.0)
    y0, pw, ph = 20.0, 520.0, 300.0
    lw, lh = legend_size(entries)
    svg = Svg(x0 + pw + max(lw, max([text_width(m[0], 8) for m in marks] + [0.0]) * 0.5) + 20, y0 + ph + 50)
    y_of = y_axis(svg, x0, y0, pw, ph, yt, human, "token recall (mean over search sets)")
    x_span = (xt[-1] - xt[0]) or 1.0

    def x_of(v: float) -> float:
        return x0 + pw * (v - xt[0]) / x_span

    for t in xt:
        svg.line(x_of(t), y0, x_of(t), y0 + ph, "#eeeeee")
        svg.text(x_of(t), y0 + ph + 14, human(t), 9, "middle")
    svg.text(x0 + pw / 2, y0 + ph + 36, "tokens used per set (mean)", 10, "middle")
    for px, py in zip(x[ok].tolist(), y[ok].tolist()):
        svg.add(f'<circle cx="{x_of(px):.1f}" cy="{y_of(py):.1f}" r="2.5" fill="#7f8c9d" fill-opacity="0.35"/>')
    pts = [(x_of(a), y_of(b)) for a, b in zip(front_x[front].tolist(), front_y[front].tolist())]
    if pts:
        svg.add(f'<polyline points="{points(pts)}" fill="none" stroke="#1f77b4" stroke-width="1.5"/>')
    for px, py in pts:
        svg.add(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3" fill="#1f77b4"/>')
    for lab, px, py in marks:
        svg.rect(x_of(px) - 3.5, y_of(py) - 3.5, 7, 7, "#d62728")
        svg.text(x_of(px) + 6, y_of(py) - 5, lab, 8)
    legend(svg, x0 + pw + 12, y0, entries)
    return svg.bytes()


def _fmt(v) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    if isinstance(v, float):
        return f"{v:,.3f}" if abs(v) < 100 else f"{v:,.0f}"
    return escape_html(str(v))


def _checks_html(result) -> str:
    """The best policies' scorers and equivalents, the constant scorers and every warning."""
    rows = "".join(
        f"<tr><td>#{i}</td><td>{escape_html(label)}</td><td style='text-align:left'>"
        f"{escape_html(policy_scorer_names(pol))}</td><td style='text-align:left'>"
        f"{escape_html(', '.join(result.equivalents.get(label, [])) or '-')}</td></tr>"
        for i, (label, pol, _b) in enumerate(result.best, start=1)
    )
    n = result.constant_checked
    const = (
        ", ".join(f"{escape_html(k)} on {v:,}/{n:,}" for k, v in result.constant_scorers.items())
        if result.constant_scorers
        else "none"
    )
    warn = "".join(f"<li>{escape_html(w)}</li>" for w in tune_warnings(result))
    return (
        "<h2>Best behaviours</h2><p>Candidates that select exactly the same items on the search sets are one "
        "entry; the others are listed as its equivalents.</p><table><tr><th>rank</th><th>policy</th>"
        f"<th>scorers (normalised weights)</th><th>equivalents</th></tr>{rows}</table>"
        f'<h2>Checks</h2><p id="constant-scorers">Constant scorers (one value for every scoreable item of a set) '
        f"on the search sets with two or more items: {const}.</p>"
        + (f'<ul id="warnings" class="warnings">{warn}</ul>' if warn else "<p>No warnings.</p>")
    )


#: the comparison table's column prefixes, shown as a header row above their columns
_PARTS = (("search_", "search sets"), ("heldout_", "held-out sets"))


def _comparison_columns(cols: list[str]) -> list[tuple[str, str, list[str]]]:
    """(group, header, columns) per shown column: the search and held-out metrics under one
    header each, without their prefix, and a metric's ``_lo``/``_hi`` pair as one "95%
    interval" column, so the table fits a laptop window instead of scrolling sideways."""
    out: list[tuple[str, str, list[str]]] = []
    for c in cols:
        if c.endswith("_hi") and c[:-3] + "_lo" in cols:
            continue
        group, name = "", c
        for prefix, part in _PARTS:
            if c.startswith(prefix):
                group, name = part, c[len(prefix) :]
        if c.endswith("_lo") and c[:-3] + "_hi" in cols:
            out.append((group, "95% interval", [c, c[:-3] + "_hi"]))
        else:
            out.append((group, name.replace("_", " "), [c]))
    return out


def _comparison_html(cmp) -> str:
    shown = _comparison_columns(list(cmp.column_names))
    top, sub = [], []
    for i, (group, header, _c) in enumerate(shown):
        if not group:
            top.append(f'<th rowspan="2">{escape_html(header)}</th>')
        elif i == 0 or shown[i - 1][0] != group:
            span = next((j for j, x in enumerate(shown[i:]) if x[0] != group), len(shown) - i)
            top.append(f'<th colspan="{span}">{escape_html(group)}</th>')
        if group:
            sub.append(f"<th>{escape_html(header)}</th>")

    def cell(r: dict, c: list[str]) -> str:
        if len(c) == 2:
            lo, hi = r[c[0]], r[c[1]]
            return "<td>n/a</td>" if lo is None or hi is None else f'<td class="nowrap">{_fmt(lo)} to {_fmt(hi)}</td>'
        v = r[c[0]]
        return f'<td class="text">{_fmt(v)}</td>' if isinstance(v, str) else f"<td>{_fmt(v)}</td>"

    body = "".join(
        "<tr"
        + (' class="best"' if r["kind"] == "best" else "")
        + ">"
        + "".join(cell(r, c) for _g, _h, c in shown)
        + "</tr>"
        for r in cmp.to_pylist()
    )
    return f'<table id="comparison"><tr>{"".join(top)}</tr><tr>{"".join(sub)}</tr>{body}</table>'


def _report_html(result, path: Path, title: str) -> Path:
    table = _comparison_html(result.comparison)
    p, s = result.paired, result.swing
    verdict = (
        ""
        if not compared(p)
        else "a real improvement at this level"
        if p["lo"] > 0
        else "a loss"
        if p["hi"] < 0
        else "not distinguishable from noise"
    )
    part_sets = result.heldout_sets if p["part"] == "heldout" else result.search_sets
    against = (
        f"""mean {escape_html(p["metric"])}
difference {p["mean_diff"]:+.3f} (95% interval {p["lo"]:+.3f} to {p["hi"]:+.3f}) over {p["sets"]} sets,
{p["wins"]} wins / {p["ties"]} ties / {p["losses"]} losses: {verdict}."""
        if compared(p)
        else f"not compared: none of the {part_sets:,} {escape_html(p['part'])} sets has a relevant item (see Checks)."
    )
    best_toml = policy_toml(result.best[0][1], result.best[0][2]) if result.best else ""
    checks = _checks_html(result)
    html = f"""<!doctype html><html><head><meta charset="utf-8"><title>{escape_html(title)}</title>
<style>body{{font-family:system-ui,sans-serif;max-width:1100px;margin:1em auto;padding:0 1em}}
table{{border-collapse:collapse;font-size:13px;display:block;overflow-x:auto}}
td,th{{border:1px solid #ccc;padding:3px 6px;text-align:right}} tr.best{{background:#eef6ff}}
th{{text-align:center}} td.text{{text-align:left;overflow-wrap:anywhere;min-width:7em;max-width:16em}} td.nowrap{{white-space:nowrap}}
pre{{background:#f6f6f6;padding:8px;overflow-x:auto}}</style></head><body>
<h1>{escape_html(title)}</h1>
<p><b>Start here.</b> {result.trials} trials ({result.policies_swept} distinct policies) maximising <code>{escape_html(result.objective)}</code> (seed {result.seed})
on {result.search_sets} search sets; {result.heldout_sets} sets held out. On the {escape_html(p["part"])} sets, the best
policy <b>{escape_html(p["a"])}</b> against the best preset <b>{escape_html(p["b"])}</b>: {against}</p>
{checks}
<h2>Best policies and presets</h2>{table}
<p>Token precision counts pinned items (kept by every policy) among the tokens kept.
Tokens: {escape_html(result.token_counter)}.</p>
<h2>Swing against {escape_html(s["b"])}</h2>
<p>{s["swinging"]} contents of the held-out sets are kept by one of {escape_html(s["a"])} and {escape_html(s["b"])} only;
{s["relevant_swinging"]} of them are relevant: {s["relevant_kept_by_a_only"]} kept by {escape_html(s["a"])} alone,
{s["relevant_kept_by_b_only"]} by {escape_html(s["b"])} alone.</p>
<h2>Token recall against tokens used</h2><img src="pareto.svg" alt="Pareto front">
<h2>The best policy (best-1.toml)</h2><pre>{escape_html(best_toml)}</pre>
</body></html>"""
    atomic_write_bytes(path, html.encode("utf-8"))
    return path
