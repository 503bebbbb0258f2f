"""The sweep page, ``report.html``: one renderer, one function per section, fed by ``PageData``.

``PageData`` holds only bounded aggregates and rows (never a matrix over all items). Two
builders fill it: ``report.from_result.result_page_data`` from an in-memory SweepResult, and
``report.from_dir.dir_page_data`` from the written Parquet outputs (streamed, any layout). Both
feed the same sections, so every path explains a sweep the same way:

1. start here (a summary in words)  2. variants and failures  3. how alike are the variants
4. swing by kind  5. swing by source  6. why swinging items were left out (reason totals and
the interactive table)  7. the sets that change most (drill-down)  8. charts.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field

import numpy as np

from cupel_np._files import atomic_write_bytes
from cupel_np._fs import AnyPath
from cupel_np.io.outdir import LEGACY_PAGE_FILES
from cupel_np.report import charts
from cupel_np.report.outcomes_section import section_checks, section_outcomes
from cupel_np.text import escape_html as _e
from cupel_np.text import shorten as _short

#: the generator tag of each kind of page (``<meta name="generator">``)
PAGE_FROM_RESULT, PAGE_FROM_OUTPUTS = "cupel_np report from-result", "cupel_np report from-outputs"
#: the charts a sweep page writes beside itself (and embeds)
CHARTS = ("heatmap.svg", "tokens.svg", "kinds.svg")
#: the sections every sweep page has, in order (``data-sections`` on the body)
SECTIONS = ("start", "variants", "agreement", "by-kind", "by-source", "why", "sets", "charts")
#: past this many variants the page is bounded: the V x V matrices become each variant's
#: ``NEIGHBOURS`` nearest and farthest variants, and the item tables (one column per variant)
#: show fewer rows (``row_cap``), so the page grows about linearly in V; the page says so
BOUNDED_VARIANTS = 50
#: nearest and farthest variants listed per variant past ``BOUNDED_VARIANTS``
NEIGHBOURS = 3


@dataclass
class PageData:
    """Everything the sweep page shows. Rows (``rows`` and each set's ``rows``) are dicts:
    set, content, kind, source, tokens, n_in, n_valid, group_keys (the row's key in each of
    ``group_columns``, None for none; absent: no key), and per variant status ('Included', an
    exclusion reason or 'failed'), reason (the row's reason name) and rank (score rank in the
    set, None where failed)."""

    title: str
    generator: str
    set_name: str
    has_sets: bool
    n_items: int
    n_sets: int
    n_swing: int
    labels: list[str]
    variants: list[dict]  # label, policy (dict), budget (dict)
    failed_sets: np.ndarray  # [V]
    failure_example: dict[str, str]
    ag: dict  # agreement(): agree, jaccard, disagree, compared, order
    by_kind: dict  # swing_by_category()
    by_source: dict
    reason_keys: list[str]
    reason_totals: np.ndarray  # [V, len(reason_keys)]
    rows: list[dict]
    sets: list[dict]  # key, swing, groups, items, per_variant [{included,tokens,target,swing_included,error}], rows
    used: np.ndarray  # [V] tokens used (sets that ran)
    target: np.ndarray  # [V] target tokens (sets that ran)
    could: np.ndarray  # [V] min(set tokens, target) summed over the sets that ran
    kind_names: list[str]
    kind_mix: np.ndarray  # [V, K] selected tokens
    heat_rows: int = 40
    max_pairs: int = 20
    notes: list[str] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)  # analysis.losses.check_lines
    outcomes: dict | None = None  # analysis.losses.outcome_page_data, with labels
    #: per variant (orphan calls, orphan results) over the sets it ran on; None when the items
    #: carry no tool call/result link (docs/tool-pairs.md)
    orphans: dict[str, tuple[int, int]] | None = None
    #: the group columns whose key the item tables show beside each row (docs/tool-pairs.md):
    #: those the variants select units by, else the importers' ``tool_group`` if the items carry it
    group_columns: list[str] = field(default_factory=list)


# ----------------------------------------------------------------------------- sections
def _heat(x: float) -> str:
    """A background colour from white (0) to blue (1)."""
    if x != x:
        return "#eeeeee"
    a = max(0.0, min(1.0, float(x)))
    r = int(255 - a * (255 - 51))
    g = int(255 - a * (255 - 122))
    b = int(255 - a * (255 - 183))
    return f"#{r:02x}{g:02x}{b:02x}"


def _describe_scorer(d) -> str:
    if not isinstance(d, dict):
        return str(d)
    if d.get("type") == "composite" or "scorers" in d:
        parts = d.get("scorers") or d.get("entries") or []
        return " + ".join(f"{_describe_scorer(s)}×{s.get('weight', 1):g}" for s in parts if isinstance(s, dict))
    if "inner" in d:
        return f"scaled({_describe_scorer(d['inner'])})"
    return str(d.get("type", "?"))


def describe_variant(v: dict) -> str:
    """One line per variant: scorer, slicer, placer, budget (from the recorded dicts)."""
    p, b = v.get("policy") or {}, v.get("budget") or {}
    scorer = _describe_scorer({"scorers": p["scorers"]} if "scorers" in p else p.get("scorer", p))
    return (
        f"scorer {scorer}, slicer {p.get('slicer', '?')}, placer {p.get('placer', '?')}, budget "
        f"{b.get('max_tokens')}/{b.get('target_tokens')} (reserve {b.get('output_reserve', 0)})"
    )


def _pair_phrase(d: PageData) -> str:
    v = len(d.labels)
    if v < 2:
        return "There is only one variant, so nothing can swing."
    ia, ib = np.triu_indices(v, 1)
    dis = d.ag["disagree"][ia, ib]
    p = int(np.lexsort((ib, ia, -dis))[0])
    a, b = int(ia[p]), int(ib[p])
    kinds = d.by_kind
    shares = sorted(((int(kinds["counts"][c][a, b]), n) for c, n in enumerate(kinds["names"])), key=lambda t: -t[0])[:2]
    on = " and ".join(f"{_e(n)} ({k:,})" for k, n in shares if k) or "no kind in particular"
    return (
        f"The pair that differs most is <b>{_e(d.labels[a])}</b> ↔ <b>{_e(d.labels[b])}</b>: "
        f"{int(dis[p]):,} contents swing between them, mostly {on}."
    )


def _families(d: PageData, threshold: float = 0.98) -> list[list[str]]:
    """Variants that agree on at least ``threshold`` of contents, chained along the order."""
    out: list[list[str]] = []
    order = d.ag["order"]
    for i, j in zip(order, order[1:]):
        x = d.ag["agree"][i, j]
        if x == x and x >= threshold:
            if out and out[-1][-1] == d.labels[i]:
                out[-1].append(d.labels[j])
            else:
                out.append([d.labels[i], d.labels[j]])
    return out


def _and_list(xs: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return xs[0] if len(xs) == 1 else ", ".join(xs[:-1]) + " and " + xs[-1]


def _budget_phrase(d: PageData) -> str:
    """The budget(s) the variants ran with, in words: one budget, or how many distinct ones."""
    seen: list[tuple] = []
    for x in d.variants:
        b = x.get("budget") or {}
        key = (b.get("max_tokens"), b.get("target_tokens"), b.get("output_reserve", 0))
        if key not in seen:
            seen.append(key)

    def one(k: tuple) -> str:
        mx, tg, res = k
        num = [f"{n:,}" if isinstance(n, int) else str(n) for n in (mx, tg, res)]
        return f"max {num[0]} tokens, target {num[1]}" + (f", output reserve {num[2]}" if res else "")

    if not seen:
        return "budget not recorded"
    if len(seen) == 1:
        return "one budget (" + one(seen[0]) + ")"
    return f"{len(seen)} budgets (from {one(seen[0])}; each variant's is listed under Variants)"


def _orphan_phrase(d: PageData) -> str:
    """The tool-pair sentence of Start here: which variants keep calls or results apart."""
    if d.orphans is None:
        return ""
    bad = [(lab, c, r) for lab, (c, r) in d.orphans.items() if c or r]
    if not bad:
        return (
            "<p>Tool pairs: every variant keeps each tool call with all its results and each result with its call.</p>"
        )
    listed = "; ".join(
        f"<b>{_e(lab)}</b>: {c:,} call(s) without all their results, {r:,} result(s) without their call"
        for lab, c, r in bad[:6]
    )
    more = f"; and {len(bad) - 6} more variants" if len(bad) > 6 else ""
    return (
        f'<p class="warn">{len(bad)} of {len(d.orphans)} variants leave orphan tool pairs, a context a '
        f"model API rejects: {listed}{more}. The policy option <code>groups</code> keeps them together "
        "(docs/tool-pairs.md).</p>"
    )


def _families_text(d: PageData, fam: list[list[str]]) -> str:
    """The families in words; past ``BOUNDED_VARIANTS`` variants at most 5 families of at most
    ``NEIGHBOURS`` names each, the rest counted."""
    if len(d.labels) <= BOUNDED_VARIANTS:
        return "; ".join(_and_list([f"<b>{_e(x)}</b>" for x in f]) for f in fam)
    parts = [
        ", ".join(f"<b>{_e(_short(x, 40))}</b>" for x in f[:NEIGHBOURS])
        + (f" and {len(f) - NEIGHBOURS:,} more" if len(f) > NEIGHBOURS else "")
        for f in fam[:5]
    ]
    more = f"; and {len(fam) - 5:,} more families" if len(fam) > 5 else ""
    return f"{len(fam):,} families: " + "; ".join(parts) + more


def section_start(d: PageData) -> str:
    """1. Start here: what the page found, in words."""
    v = len(d.labels)
    fam = _families(d)
    fam_txt = (
        "Variants that behave almost alike (≥ 98% same status): " + _families_text(d, fam) + "."
        if fam
        else "No two variants agree on 98% or more of the contents: every variant makes its own choices."
    )
    keys, tot = d.reason_keys, d.reason_totals
    excl = [(int(tot[:, j].sum()), k) for j, k in enumerate(keys) if k not in ("Included", "failed")]
    excl.sort(key=lambda t: -t[0])
    why = (
        f"When a variant leaves a swinging item out, the most common reason is <b>{_e(excl[0][1])}</b> "
        f"({excl[0][0]:,} of {sum(n for n, _ in excl):,} exclusions)."
        if excl and excl[0][0]
        else ""
    )
    failed = int(d.failed_sets.sum())
    fail_txt = f" {failed:,} (variant, set) cells failed; see Variants." if failed else ""
    share = d.n_swing / max(1, d.n_items)
    return (
        f'<div id="start" class="start"><h2>Start here</h2><p>{d.n_items:,} items in {d.n_sets:,} item set(s), '
        f"{v} variants, {_budget_phrase(d)}. <b>{d.n_swing:,}</b> contents swing (≈{share:.1%} of the items): at least two variants "
        f"that ran on the set disagree on them.{fail_txt}</p><p>{fam_txt}</p>"
        f"<p>{_pair_phrase(d) if d.n_swing else ''} {why}</p>{_orphan_phrase(d)}</div>"
    )


def section_variants(d: PageData) -> str:
    """2. The variants, and the failures with an example each."""
    items = "".join(f"<li><b>{_e(x['label'])}</b>: {_e(describe_variant(x))}</li>" for x in d.variants)
    errs = "".join(
        f"<li>{_e(l)}: {int(d.failed_sets[i]):,} set(s) failed, e.g. {_e(d.failure_example.get(l, ''))}</li>"
        for i, l in enumerate(d.labels)
        if d.failed_sets[i]
    )
    notes = "".join(f'<p class="meta note">{_e(n)}</p>' for n in d.notes)
    return (
        f'<details id="variants"><summary><b>Variants</b> ({len(d.labels)})</summary><ul>{items}</ul></details>'
        + (f'<h2 id="failed">Failed variants</h2><ul>{errs}</ul>' if errs else "")
        + notes
    )


def _matrix_html(d: PageData, key: str, title: str) -> str:
    labs, order = d.labels, d.ag["order"]
    m = d.ag[key]
    head = "".join(f'<th class="rot"><span>{_e(labs[j])}</span></th>' for j in order)
    off = m[~np.eye(len(labs), dtype=bool)]
    off = off[off == off]
    lo, hi = (float(off.min()), float(off.max())) if off.size else (0.0, 1.0)
    span = hi - lo if hi > lo else 1.0
    rows = []
    for i in order:
        cells = "".join(
            f'<td class="num" style="background:{_heat((m[i, j] - lo) / span)}" data-a="{_e(labs[i])}" '
            f'data-b="{_e(labs[j])}" data-v="{float(m[i, j])!r}">{"–" if m[i, j] != m[i, j] else f"{m[i, j]:.3f}"}</td>'
            for j in order
        )
        rows.append(f"<tr><th>{_e(labs[i])}</th>{cells}</tr>")
    return (
        f'<div class="mat"><h3>{title}</h3><p class="meta">colour: white = {lo:.3f} … blue = {hi:.3f}</p>'
        f'<div class="scroll"><table class="matrix" id="{key}-matrix"><tr><th></th>{head}</tr>{"".join(rows)}'
        "</table></div></div>"
    )


def row_cap(d: PageData, n: int) -> int:
    """How many of ``n`` item rows a table with one column per variant shows: all up to
    ``BOUNDED_VARIANTS`` variants, past it about ``n * BOUNDED_VARIANTS / V`` (at least 3), so
    rows x variants stays about constant."""
    v = len(d.labels)
    return n if v <= BOUNDED_VARIANTS else min(n, max(3, n * BOUNDED_VARIANTS // v))


def cut_notice(d: PageData) -> str:
    """The sentence a bounded page (more than ``BOUNDED_VARIANTS`` variants) shows at the top."""
    if len(d.labels) <= BOUNDED_VARIANTS:
        return ""
    return (
        f'<p class="warn cut" id="cut-notice">{len(d.labels):,} variants, more than {BOUNDED_VARIANTS}: to keep '
        "this page small, the variant-by-variant matrices are replaced by each variant's "
        f"{NEIGHBOURS} nearest and {NEIGHBOURS} farthest variants, and the item tables show "
        f"{row_cap(d, max(1, len(d.rows)))} of {len(d.rows)} rows (a set's items proportionally fewer). "
        f"The charts are at most {charts.MAX_WIDE} variants wide, labelling every few variants. The numbers over all "
        "variants (reason totals, swinging contents, pairs) are unchanged; "
        "the written outputs hold every row (docs/report.md).</p>"
    )


def _neighbours_html(d: PageData) -> str:
    """Per variant, its nearest and farthest variants by share of the same status (Jaccard in
    the tooltip): the bounded form of the two matrices."""
    labs, agree, jac = d.labels, d.ag["agree"], d.ag["jaccard"]
    v = len(labs)

    def cell(i: int, j: int) -> str:
        return (
            f'<span class="nb" data-b="{_e(labs[j])}" data-v="{float(agree[i, j])!r}" '
            f'title="Jaccard {float(jac[i, j]):.3f}">{_e(_short(labs[j], 32))} ({float(agree[i, j]):.3f})</span>'
        )

    rows = []
    for i in d.ag["order"]:
        a = np.where(np.arange(v) == i, np.nan, agree[i])
        ok = np.flatnonzero(a == a)
        by = ok[np.lexsort((ok, -a[ok]))]
        near, far = by[:NEIGHBOURS], by[::-1][:NEIGHBOURS]
        rows.append(
            f'<tr data-variant="{_e(labs[i])}"><th>{_e(labs[i])}</th><td>{", ".join(cell(i, int(j)) for j in near)}'
            f"</td><td>{', '.join(cell(i, int(j)) for j in far)}</td></tr>"
        )
    return (
        f'<div class="scroll"><table id="neighbours"><tr><th>variant</th><th>nearest {NEIGHBOURS} (same status)</th>'
        f"<th>farthest {NEIGHBOURS}</th></tr>{''.join(rows)}</table></div>"
    )


def section_agreement(d: PageData) -> str:
    """3. How alike the variants are: agreement and Jaccard matrices in similarity order (past
    ``BOUNDED_VARIANTS`` variants, each variant's nearest and farthest variants instead)."""
    if len(d.labels) > BOUNDED_VARIANTS:
        return (
            '<h2 id="agreement">How alike are the variants?</h2><p class="meta">Over every content of every set '
            f"where both variants ran. With {len(d.labels):,} variants (more than {BOUNDED_VARIANTS}) the two "
            f"V × V matrices are cut: each variant's {NEIGHBOURS} nearest and {NEIGHBOURS} farthest variants by share "
            "of contents with the same status (Jaccard of the included contents in the tooltip), in similarity "
            "order.</p>" + _neighbours_html(d)
        )
    return (
        '<h2 id="agreement">How alike are the variants?</h2><p class="meta">Over every content of every set where '
        "both variants ran. Rows and columns are ordered so that similar variants sit together (a chain from the "
        "least typical variant, each step to the most similar one left).</p>"
        + _matrix_html(d, "agree", "Share of contents with the same status")
        + _matrix_html(d, "jaccard", "Jaccard of the included contents")
    )


def section_pairs(d: PageData, which: str) -> str:
    """4./5. Swing by kind or by source, per variant pair (the pairs that disagree most)."""
    cat = d.by_kind if which == "kind" else d.by_source
    labs = d.labels
    v = len(labs)
    ia, ib = np.triu_indices(v, 1)
    dis = d.ag["disagree"][ia, ib]
    order = np.lexsort((ib, ia, -dis))[: d.max_pairs]
    names = cat["names"]
    has_other = bool(np.asarray(cat["other"]).any())
    head = "".join(f"<th>{_e(n)}</th>" for n in names) + ("<th>(other)</th>" if has_other else "")
    sub = "".join(
        f'<td class="num" data-cat="{_e(n)}">{int(s):,} / {int(g):,}</td>'
        for n, s, g in zip(names, cat["swinging"], cat["groups"])
    )
    rows = [
        f'<tr class="tot"><td colspan="2">swinging contents / all contents of this {which} (any pair)</td>'
        f"{sub}{'<td></td>' if has_other else ''}</tr>"
    ]
    for p in order:
        a, b = int(ia[p]), int(ib[p])
        cells = "".join(
            f'<td class="num" data-cat="{_e(n)}">{int(cat["counts"][c][a, b]):,}</td>' for c, n in enumerate(names)
        )
        if has_other:
            cells += f'<td class="num" data-cat="(other)">{int(cat["other"][a, b]):,}</td>'
        rows.append(
            f'<tr class="pair" data-a="{_e(labs[a])}" data-b="{_e(labs[b])}"><td>{_e(labs[a])} ↔ {_e(labs[b])}</td>'
            f'<td class="num total">{int(dis[p]):,}</td>{cells}</tr>'
        )
    more = (
        f'<p class="meta">Showing the {len(order)} of {len(dis)} pairs that disagree most.</p>'
        if len(dis) > len(order)
        else ""
    )
    intro = (
        '<h2 id="by-kind-h">Swing by kind, per variant pair</h2><p class="meta">Contents that one variant of the '
        "pair includes and the other excludes, by the content's kind (ASCII case-folded). Pairs that disagree most "
        "first.</p>"
        if which == "kind"
        else '<h2 id="by-source-h">Swing by source, per variant pair</h2>'
    )
    return (
        f'{intro}<div class="scroll"><table class="pairs" id="by-{which}"><tr><th>variant pair</th><th>swinging</th>'
        f"{head}</tr>{''.join(rows)}</table></div>{more}"
    )


#: short cell texts, so a table of many variants fits the window (the full name is the tooltip)
SHORT = {
    "Included": "in",
    "BudgetExceeded": "budget",
    "ScoredTooLow": "low score",
    "Deduplicated": "dup",
    "QuotaCapExceeded": "quota cap",
    "QuotaRequireDisplaced": "quota req",
    "CountCapExceeded": "count cap",
    "NegativeTokens": "neg tokens",
    "PinnedOverride": "pin override",
    "Filtered": "filtered",
}


def _short_status(st: str) -> str:
    return SHORT.get(st, _short(st, 12))


def _cells_html(row: dict) -> str:
    out = []
    for st, reason, r in zip(row["status"], row["reason"], row["rank"]):
        if st == "failed":
            out.append('<td class="fail" data-s="-1" data-status="failed">failed</td>')
            continue
        cls = "in" if st == "Included" else "out"
        key = (1 if st == "Included" else 0) * 10**9 - int(r)
        out.append(
            f'<td class="{cls}" data-s="{key}" data-status="{_e(st)}" data-reason="{_e(reason)}" data-rank="{int(r)}" '
            f'title="{_e(st)} ({_e(reason)}), score rank {int(r)}">{_e(_short_status(st))} '
            f'<span class="rk">#{int(r)}</span></td>'
        )
    return "".join(out)


def _rows_html(d: PageData, rows: list[dict]) -> str:
    out = []
    for row in rows:
        key = "" if row["set"] is None else str(row["set"])
        content = row["content"]
        out.append(
            f'<tr data-set="{_e(key)}" data-content="{_e(content)}"><td>{_e(key)}</td>'
            f'<td title="{_e(content)}">{_e(_short(content, 56))}</td><td>{_e(row["kind"])}</td>'
            f'<td>{_e(row["source"])}</td><td class="num" data-s="{int(row["tokens"])}">{int(row["tokens"]):,}</td>'
            f"{_group_cells_html(d, row)}"
            f'<td class="num" data-s="{row["n_in"]}">{row["n_in"]}/{row["n_valid"]}</td>{_cells_html(row)}</tr>'
        )
    return "".join(out)


def _group_cells_html(d: PageData, row: dict) -> str:
    """The row's key in each group column (empty: no unit)."""
    keys = row.get("group_keys") or [None] * len(d.group_columns)
    return "".join(
        f'<td class="grp" data-group="{_e(c)}">{"" if k is None else _e(str(k))}</td>'
        for c, k in zip(d.group_columns, keys, strict=True)
    )


def _head_html(d: PageData) -> str:
    cols = [d.set_name, "content", "kind", "source", "tokens", *d.group_columns, "included by"]
    head = [f'<th data-col="{k}">{_e(c)}</th>' for k, c in enumerate(cols)]
    head += [f'<th class="rot" data-col="{len(cols) + k}"><span>{_e(c)}</span></th>' for k, c in enumerate(d.labels)]
    return "".join(head)


def _group_phrase(d: PageData) -> str:
    if not d.group_columns:
        return ""
    cols = ", ".join(f"<code>{_e(c)}</code>" for c in d.group_columns)
    return (
        f" {cols}: the item's group key (items of a set sharing a key are one unit under "
        "<code>groups</code>, kept or left out together; empty: no group)."
    )


def section_why(d: PageData) -> str:
    """6. Why each variant left swinging items out: reason totals, then the interactive table."""
    tot_rows = "".join(
        f'<tr data-variant="{_e(l)}"><th>{_e(l)}</th>'
        + "".join(
            f'<td class="num" data-reason="{_e(k)}">{int(d.reason_totals[vi, j]):,}</td>'
            for j, k in enumerate(d.reason_keys)
        )
        + "</tr>"
        for vi, l in enumerate(d.labels)
    )
    shown = d.rows[: row_cap(d, len(d.rows))]
    kinds = "".join(f'<option value="{_e(k)}">{_e(k)}</option>' for k in sorted({r["kind"] for r in shown}))
    n = len(shown)
    return (
        f'<h2 id="why">Why each variant left swinging items out</h2><p class="meta">All {d.n_swing:,} swinging '
        "contents: how many each variant includes, and the reason of each exclusion.</p>"
        f'<div class="scroll"><table id="reason-totals"><tr><th>variant</th>'
        f"{''.join(f'<th>{_e(k)}</th>' for k in d.reason_keys)}</tr>{tot_rows}</table></div>"
        "<h3>Top swinging items: the most contested, with each variant's reason and score rank</h3>"
        "<p class=\"meta\">Each cell: that variant's status or exclusion reason, and the item's score rank within "
        "its set under that variant (#1 = highest score; hover a cell for the full reason). Click a header to "
        f"sort.{_group_phrase(d)} Short names: {_e(', '.join(f'{v} = {k}' for k, v in SHORT.items()))}.</p>"
        f'<div class="controls">filter <input id="q" placeholder="text in any cell"> kind <select id="kind">'
        f'<option value="">(all)</option>{kinds}</select> <span class="meta"><span id="shown">{n}</span> of {n} rows '
        f"shown; {d.n_swing:,} swinging contents in all</span></div>"
        f'<div class="scroll"><table id="swing-table"><thead><tr>{_head_html(d)}</tr></thead>'
        f"<tbody>{_rows_html(d, shown)}</tbody></table></div>"
    )


def _set_html(d: PageData, j: int, s: dict) -> str:
    vrows = []
    for vi, l in enumerate(d.labels):
        pv = s["per_variant"][vi]
        cells = (
            f'<td colspan="5" class="fail">failed: {_e(pv["error"])}</td>'
            if pv["error"] is not None
            else f'<td class="num" data-k="included">{pv["included"]:,}</td>'
            f'<td class="num" data-k="tokens">{pv["tokens"]:,}</td><td class="num">{pv["target"]:,}</td>'
            f'<td class="num" data-k="usable">{min(s["set_tokens"], pv["target"]):,}</td>'
            f'<td class="num" data-k="swing_included">{pv["swing_included"]:,}</td>'
        )
        vrows.append(f'<tr data-variant="{_e(l)}"><th>{_e(l)}</th>{cells}</tr>')
    key = "(all items)" if not d.has_sets else str(s["key"])
    shown = s["rows"][: row_cap(d, len(s["rows"]))]
    more = (
        f'<p class="meta">{len(shown)} of {s["swing"]} swinging contents shown.</p>' if s["swing"] > len(shown) else ""
    )
    return (
        f'<details class="set" data-set="{_e(key)}" data-swing="{s["swing"]}"{" open" if j == 0 else ""}>'
        f"<summary><b>{_e(key)}</b>: {s['swing']:,} swinging of {s['groups']:,} contents ({s['items']:,} items)"
        "</summary><table><tr><th>variant</th><th>included</th><th>tokens used</th><th>target</th>"
        '<th title="min(the set\'s tokens, target): what the variant could use at most">usable</th>'
        f"<th>swinging included</th></tr>{''.join(vrows)}</table>"
        f'<div class="scroll"><table class="set-items"><thead><tr>{_head_html(d)}</tr></thead>'
        f"<tbody>{_rows_html(d, shown)}</tbody></table></div>{more}</details>"
    )


def section_sets(d: PageData) -> str:
    """7. The sets with the most swinging contents, each with its variants and items."""
    body = "".join(_set_html(d, j, s) for j, s in enumerate(d.sets))
    return '<h2 id="sets">The sets that change most</h2>' + (
        body or '<p class="meta">No set has swinging contents.</p>'
    )


def chart_svgs(d: PageData) -> dict[str, bytes]:
    """The page's charts (also written beside the page), drawn by ``report.charts``."""
    heat = d.rows[: d.heat_rows]
    status = np.array(
        [[np.nan if s == "failed" else float(s == "Included") for s in r["status"]] for r in heat], dtype=float
    ).reshape(len(heat), len(d.labels))
    row_labels = [f"{r['set']}: {_short(r['content'], 48)}" if d.has_sets else _short(r["content"], 48) for r in heat]
    drawn = (
        charts.heatmap_svg(status, row_labels, d.labels),
        charts.tokens_svg(d.labels, d.used, d.target, d.could),
        charts.kinds_svg(d.labels, d.kind_names, d.kind_mix),
    )
    return dict(zip(CHARTS, drawn, strict=True))


def chart_img(svgs: dict[str, bytes], name: str, alt: str) -> str:
    """Chart ``name`` of ``svgs`` embedded as an image (its text can neither run nor restyle
    the page)."""
    return f'<img alt="{alt}" src="data:image/svg+xml;base64,{base64.b64encode(svgs[name]).decode()}">'


def section_charts(svgs: dict[str, bytes]) -> str:
    """8. The charts, embedded."""
    return (
        '<h2 id="charts">Swinging items at a glance</h2>'
        f"{chart_img(svgs, 'heatmap.svg', 'heatmap of swinging items by variant')}"
        '<h2>Tokens used vs budget</h2><p class="meta">Per variant over the sets that ran: the target, what the '
        "sets could use at most (their tokens, capped at the target) and what was used; the percentage is used / "
        f"could use.</p>{chart_img(svgs, 'tokens.svg', 'tokens used per variant')}"
        f"<h2>Kind mix per variant</h2>{chart_img(svgs, 'kinds.svg', 'kind mix per variant')}"
    )


def render_page(d: PageData, svgs: dict[str, bytes]) -> str:
    """The whole page: every section in order, CSS and script inline."""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="generator" content="{d.generator}">
<meta name="viewport" content="width=device-width, initial-scale=1"><title>{_e(d.title)}</title>
<style>{CSS}</style></head><body data-sections="{" ".join(SECTIONS)}">
<h1>{_e(d.title)}</h1>
<p class="meta" id="summary" data-items="{d.n_items}" data-sets="{d.n_sets}" data-variants="{len(d.labels)}" data-swing="{d.n_swing}">
{d.n_items:,} items in {d.n_sets:,} item set(s); {len(d.labels)} variants; {d.n_swing:,} swinging contents
(a content swings when at least two variants that ran on its set disagree on it).</p>
{cut_notice(d)}{section_start(d)}{section_variants(d)}{section_checks(d.checks)}{section_outcomes(d.outcomes)}{section_agreement(d)}{section_pairs(d, "kind")}{section_pairs(d, "source")}
{section_why(d)}{section_sets(d)}{section_charts(svgs)}
<script>{JS}</script>
</body></html>
"""


def write_page(d: PageData, out: AnyPath) -> AnyPath:
    """Write ``report.html`` and its charts (SVGs, embedded and beside the page) into ``out``;
    a ``kinds.svg`` or other chart of an earlier page is replaced, never left stale."""
    svgs = chart_svgs(d)
    for name, data in svgs.items():
        atomic_write_bytes(out / name, data)
    for name in LEGACY_PAGE_FILES:  # an earlier version's PNG charts would no longer match
        if name.removesuffix(".png") + ".svg" in svgs:
            (out / name).unlink(missing_ok=True)
    path = out / "report.html"
    atomic_write_bytes(path, render_page(d, svgs).encode("utf-8"))
    return path


JS = r"""
(function(){
  function val(td){var s=td.getAttribute('data-s');return s===null?td.textContent.trim().toLowerCase():parseFloat(s);}
  function sortBy(table,col,desc){
    var body=table.tBodies[0],rows=Array.prototype.slice.call(body.rows);
    rows.sort(function(a,b){var x=val(a.cells[col]),y=val(b.cells[col]);
      var c=(typeof x==='number'&&typeof y==='number')?x-y:String(x).localeCompare(String(y));
      return desc?-c:c;});
    rows.forEach(function(r){body.appendChild(r);});
    table.setAttribute('data-sorted',col+(desc?':desc':':asc'));
  }
  function filter(table,text,kind){
    text=(text||'').toLowerCase();var shown=0;
    Array.prototype.forEach.call(table.tBodies[0].rows,function(r){
      var ok=(!text||r.textContent.toLowerCase().indexOf(text)>=0)&&(!kind||r.cells[2].textContent===kind);
      r.style.display=ok?'':'none';if(ok)shown++;});
    var c=document.getElementById('shown');if(c)c.textContent=shown;
  }
  var t=document.getElementById('swing-table');if(!t)return;
  Array.prototype.forEach.call(t.tHead.rows[0].cells,function(th,i){
    th.addEventListener('click',function(){var d=t.getAttribute('data-sorted');sortBy(t,i,d===i+':asc');});});
  var q=document.getElementById('q'),k=document.getElementById('kind');
  function apply(){filter(t,q.value,k.value);}
  q.addEventListener('input',apply);k.addEventListener('change',apply);
  // state from the address: #sort=COL[:desc]&q=TEXT&kind=KIND (shareable views; used by the tests)
  var h=decodeURIComponent(location.hash.slice(1));
  h.split('&').forEach(function(p){var kv=p.split('=');if(kv.length<2)return;
    if(kv[0]==='sort'){var a=kv[1].split(':');sortBy(t,parseInt(a[0],10),a[1]==='desc');}
    if(kv[0]==='q'){q.value=kv[1];}
    if(kv[0]==='kind'){k.value=kv[1];}});
  apply();
})();
"""

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em;color:#222;max-width:1800px}
td,th,li,code,b,span,h1,label,option{unicode-bidi:isolate}
h1{font-size:1.4em} h2{font-size:1.15em;margin-top:1.8em;border-bottom:1px solid #ddd} h3{font-size:.95em}
table{border-collapse:collapse;font-size:12px;margin:.4em 0} td,th{border:1px solid #ddd;padding:3px 6px;text-align:left}
th{background:#f5f5f5} td.in{background:#dff0d8} td.out{background:#f2dede} td.fail{background:#ddd}
td.num{text-align:right;font-variant-numeric:tabular-nums} .rk{color:#777;font-size:10px}
img{max-width:100%;border:1px solid #eee} .meta{color:#666;font-size:12px}
.mat{display:inline-block;vertical-align:top;margin-right:1.5em;max-width:100%} th.rot{height:110px;vertical-align:bottom;padding:2px}
table.matrix{font-size:10.5px} table.matrix td{padding:2px 3px}
th.rot span{writing-mode:vertical-rl;transform:rotate(180deg);white-space:nowrap}
#swing-table th{cursor:pointer} .controls{margin:.5em 0} tr.tot td{background:#fafafa;color:#555}
details{margin:.4em 0} summary{cursor:pointer} .scroll{overflow-x:auto;max-width:100%}
#swing-table td,table.set-items td{white-space:nowrap}
#swing-table td:nth-child(2),table.set-items td:nth-child(2){max-width:16em;overflow:hidden;text-overflow:ellipsis}
#swing-table td:first-child,table.set-items td:first-child{max-width:9em;overflow:hidden;text-overflow:ellipsis}
#swing-table td.in,#swing-table td.out,#swing-table td.fail,table.set-items td.in,table.set-items td.out{padding:1px 3px;line-height:1.15}
#swing-table .rk,table.set-items .rk{display:block}
.start{background:#f7fbff;border:1px solid #d6e6f5;padding:.2em 1em;margin:1em 0} .start h2{border:0;margin-top:.5em}
.note{background:#fff8e1;padding:.3em .6em} .warn{background:#fff3e0;border-left:3px solid #e65100;padding:.3em .6em}
"""
