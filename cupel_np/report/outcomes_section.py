"""Two sections of the sweep page: the signal checks (constant scorers, knapsack capacity,
empty selections) and, with labels, the outcomes (recall per variant with bootstrap
intervals, every variant against the first set by set, where the variants lose the relevant
items). Both are rendered from bounded data (``analysis.losses``)."""

from __future__ import annotations

from cupel_np.text import escape_html as _e

__all__ = ["section_checks", "section_outcomes"]

_METRIC_NAMES = {
    "token_recall": "token recall",
    "item_recall": "item recall",
    "gain_share": "gain share",
    "token_precision": "token precision",
}


def section_checks(lines: list[str]) -> str:
    """``<h2 id="checks">``: one list item per check line; nothing when no check fired."""
    if not lines:
        return ""
    items = "".join(f"<li>{_e(x)}</li>" for x in lines)
    return (
        '<h2 id="checks">Checks</h2><p class="meta">A constant scorer gave one value to every scoreable item of a '
        "set (sets of two or more); a variant whose every scorer is constant there keeps items by input order. A "
        "knapsack bucket above a set's effective target leaves it zero capacity; more than 25% of the target lost "
        "to the bucket remainder is flagged as rounding loss. A variant that kept no scoreable item although one "
        f'fitted the target selected nothing (the run did not fail).</p><ul id="check-lines">{items}</ul>'
    )


def _num(v) -> str:
    return "n/a" if v is None else f"{v:.3f}"


def section_outcomes(o: dict | None) -> str:
    """``<h2 id="outcomes">``: the outcomes of ``analysis.losses.outcome_page_data``."""
    if not o:
        return ""
    summ = o["summary"]
    first = summ[0] if summ else {}
    head = "".join(f"<th>{_e(n)}</th>" for n in _METRIC_NAMES.values())
    rows = "".join(
        f'<tr data-variant="{_e(r["variant"])}"><td>{_e(r["variant"])}</td>'
        + "".join(
            f'<td class="{k}" data-s="{r[k] if r[k] is not None else ""}">{_num(r[k])} '
            f'<span class="meta">[{_num(r[k + "_lo"])}, {_num(r[k + "_hi"])}]</span></td>'
            for k in _METRIC_NAMES
        )
        + f'<td class="failed">{r["sets_failed"]:,}</td></tr>'
        for r in summ
    )
    paired = "".join(
        f'<tr data-a="{_e(p["a"])}"><td>{_e(p["a"])}</td><td>{_e(p["b"])}</td><td>{p["sets"]:,}</td>'
        f'<td class="diff">{p["mean_diff"]:+.3f}</td><td>{p["lo"]:+.3f} to {p["hi"]:+.3f}</td>'
        f"<td>{p['wins']:,} / {p['ties']:,} / {p['losses']:,}</td></tr>"
        for p in o["paired"]
        if p.get("b") is not None
    )
    losses = "".join(
        f'<tr data-variant="{_e(x["variant"])}"><td>{_e(x["variant"])}</td><td class="reason">{_e(x["reason"])}</td>'
        f'<td class="lost">{x["relevant_lost"]:,}</td><td>{x["relevant_tokens_lost"]:,}</td></tr>'
        for x in o["losses"]
    )
    counts = (
        f"{first.get('sets_labelled', 0):,} labelled sets ({first.get('sets_without_relevant', 0):,} without a "
        f"relevant item), {first.get('sets_unlabelled', 0):,} unlabelled left out"
    )
    return f"""<h2 id="outcomes">Outcomes by {_e(repr(o["column"]))}</h2>
<p class="meta">Means over sets with a 95% percentile bootstrap interval; {counts}. Token precision counts
pinned items among the tokens kept. Tokens: {_e(o.get("tokens") or "the items' tokens column")}.</p>
<table id="outcome-summary"><thead><tr><th>variant</th>{head}<th>failed sets</th></tr></thead><tbody>{rows}</tbody></table>
<h3>Each variant against the first, set by set (token recall)</h3>
<table id="outcome-paired"><thead><tr><th>variant</th><th>against</th><th>sets</th><th>mean difference</th>
<th>95% interval</th><th>wins / ties / losses</th></tr></thead><tbody>{paired}</tbody></table>
<h3>Where the relevant items are lost</h3>
<p class="meta">Relevant contents of the labelled sets a variant ran on that it did not keep, by the reason it gave.</p>
<table id="outcome-losses"><thead><tr><th>variant</th><th>reason</th><th>relevant contents lost</th>
<th>their tokens</th></tr></thead><tbody>{losses}</tbody></table>"""
