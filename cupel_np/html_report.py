"""``report.html``: a self-contained page (no network; PNGs embedded) for a SweepResult.

Sections: a heatmap of the top swinging items x variants, tokens used vs budget per variant,
the kind mix of each variant's selection, and the top swinging items with every variant's
reason. The PNGs are also written beside the page.
"""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .report import REASON_NAMES

TOP_K = 40


def _plt():
    import matplotlib

    matplotlib.use("Agg")  # headless
    import matplotlib.pyplot as plt

    return plt


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    _plt().close(fig)
    return buf.getvalue()


def _top_swings(result, k: int) -> np.ndarray:
    """Swinging groups, most contested first (the closest to a 50/50 split of variants)."""
    gs = result.swing_groups
    if gs.size == 0:
        return gs
    n_inc = result.status[gs].sum(axis=1)
    contest = np.minimum(n_inc, result.status.shape[1] - n_inc)
    order = np.lexsort((gs, -contest))
    return gs[order[:k]]


def _short(s: str, n: int = 60) -> str:
    s = s.replace("\n", " ")
    return s if len(s) <= n else s[: n - 1] + "…"


def _mpl(s: str) -> str:
    """Text for matplotlib: '$' would start mathtext (and can make it raise)."""
    return s.replace("$", r"\$")


def heatmap_png(result, groups: np.ndarray) -> bytes:
    plt = _plt()
    from matplotlib.colors import ListedColormap

    v = len(result.labels)
    h = max(2.5, 0.28 * len(groups) + 1.5)
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * v + 5), h))
    if len(groups):
        data = result.status[groups].astype(float)
        failed = result.failed.T[result.group_set[groups]]
        data[failed] = np.nan
        cmap = ListedColormap(["#d9534f", "#5cb85c"]).with_extremes(bad="#bbbbbb")
        ax.imshow(np.ma.masked_invalid(data), aspect="auto", cmap=cmap, vmin=0, vmax=1, interpolation="nearest")
        t = result.table
        labels = []
        for g in groups:
            key = t.set_keys[result.group_set[g]]
            content = _short(t.content[int(result.group_first_row[g])].as_py(), 48)
            labels.append(_mpl(f"{key}: {content}" if t.set_column else content))
        ax.set_yticks(range(len(groups)), labels, fontsize=7)
    else:
        ax.text(0.5, 0.5, "no item swings between these variants", ha="center", va="center", transform=ax.transAxes)
        ax.set_yticks([])
    ax.set_xticks(range(v), [_mpl(l) for l in result.labels], rotation=45, ha="right", fontsize=8)
    ax.set_title("Swinging items (green = included, red = excluded, grey = variant failed)", fontsize=9)
    return _png(fig)


def tokens_png(result) -> bytes:
    plt = _plt()
    vt = result.variants_table()
    labels = result.labels
    # one row per (variant, set): sum per variant without a Python loop over the rows
    idx = pc.index_in(vt["variant"], value_set=pa.array(labels, pa.string())).to_numpy(zero_copy_only=False)
    u = vt["tokens_used"].to_numpy(zero_copy_only=False)
    u = np.where(np.isnan(u.astype(np.float64)), 0.0, u.astype(np.float64))
    used = np.bincount(idx, weights=u, minlength=len(labels))
    target = np.bincount(idx, weights=vt["target_tokens"].to_numpy(zero_copy_only=False).astype(np.float64),
                         minlength=len(labels))
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(labels) + 3), 3.6))
    x = np.arange(len(labels))
    ax.bar(x - 0.2, target, width=0.4, label="target tokens (all sets)", color="#cccccc")
    ax.bar(x + 0.2, used, width=0.4, label="tokens used", color="#337ab7")
    for i in range(len(labels)):
        if target[i]:
            ax.text(x[i] + 0.2, used[i], f"{used[i] / target[i]:.0%}", ha="center", va="bottom", fontsize=7)
    ax.set_xticks(x, [_mpl(l) for l in labels], rotation=45, ha="right", fontsize=8)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_title("Tokens used vs budget per variant", fontsize=9)
    return _png(fig)


def kinds_png(result) -> bytes:
    plt = _plt()
    t = result.table
    kinds = t.kind_vocab
    k = len(kinds)
    mix = np.zeros((len(result.labels), k))
    for v in range(len(result.labels)):
        inc = result.run.included[v]
        mix[v] = np.bincount(t.kind_id[inc], weights=t.tokens[inc], minlength=k)[:k]
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(result.labels) + 3), 3.6))
    bottom = np.zeros(len(result.labels))
    x = np.arange(len(result.labels))
    for j in np.argsort(-mix.sum(axis=0)):
        ax.bar(x, mix[:, j], bottom=bottom, label=_mpl(kinds[j]))
        bottom += mix[:, j]
    ax.set_xticks(x, [_mpl(l) for l in result.labels], rotation=45, ha="right", fontsize=8)
    if k:
        ax.legend(fontsize=7, title="kind (case-folded)", title_fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_title("Kind mix of the selected tokens per variant", fontsize=9)
    return _png(fig)


def _reason_cell(result, v: int, g: int) -> str:
    from .batch import R_TRUNCATED

    s = int(result.group_set[g])
    if result.failed[v, s]:
        return '<td class="fail">failed</td>'
    rows = _group_rows(result, g)
    inc = [r for r in rows if result.run.included[v][r]]
    if inc:
        return '<td class="in">Included</td>'
    code = int(result.run.reason[v][rows[0]])
    name = "BudgetExceeded (truncated)" if code == R_TRUNCATED else REASON_NAMES.get(code, "?")
    return f'<td class="out">{html.escape(name)}</td>'


def _group_rows(result, g: int) -> list[int]:
    first = int(result.group_first_row[g])
    s = int(result.group_set[g])
    lo, hi = int(result.table.offsets[s]), int(result.table.offsets[s + 1])
    cid = result.table.content_id[first]
    return [first] + [int(r) for r in np.flatnonzero(result.table.content_id[first + 1:hi] == cid) + first + 1]


def _describe_scorer(sc) -> str:
    entries = getattr(sc, "entries", None)
    if entries:
        return " + ".join(f"{_describe_scorer(s)}×{w:g}" for s, w in entries)
    inner = getattr(sc, "inner", None)
    return f"scaled({_describe_scorer(inner)})" if inner is not None else sc.type_name


CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em;color:#222;max-width:1200px}
h1{font-size:1.4em} h2{font-size:1.1em;margin-top:1.6em}
table{border-collapse:collapse;font-size:12px} td,th{border:1px solid #ddd;padding:3px 6px;text-align:left}
th{background:#f5f5f5} td.in{background:#dff0d8} td.out{background:#f2dede} td.fail{background:#ddd}
img{max-width:100%;border:1px solid #eee} .meta{color:#666;font-size:12px}
"""


def write_html_report(result, out_dir, *, title: str = "cupel_np policy sensitivity", top_k: int = TOP_K) -> Path:
    """Write ``report.html`` plus ``heatmap.png``, ``tokens.png`` and ``kinds.png`` into
    ``out_dir`` (atomically) and return the page's path."""
    from .io import atomic_write_bytes

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    groups = _top_swings(result, top_k)
    pngs = {
        "heatmap.png": heatmap_png(result, groups),
        "tokens.png": tokens_png(result),
        "kinds.png": kinds_png(result),
    }
    for name, data in pngs.items():
        atomic_write_bytes(out / name, data)
    t = result.table

    def img(name, alt):
        return f'<img alt="{alt}" src="data:image/png;base64,{base64.b64encode(pngs[name]).decode()}">'

    head = "".join(f"<th>{html.escape(l)}</th>" for l in result.labels)
    rows_html = []
    for g in groups:
        key = t.set_keys[int(result.group_set[g])]
        content = t.content[int(result.group_first_row[g])].as_py()
        cells = "".join(_reason_cell(result, v, int(g)) for v in range(len(result.labels)))
        set_cell = f"<td>{html.escape(str(key))}</td>" if t.set_column else ""
        rows_html.append(f"<tr>{set_cell}<td>{html.escape(_short(content, 80))}</td>{cells}</tr>")
    set_head = f"<th>{html.escape(t.set_column)}</th>" if t.set_column else ""
    variants = "".join(
        f"<li><b>{html.escape(v.label)}</b>: scorer {html.escape(_describe_scorer(v.policy.scorer))}, slicer "
        f"{html.escape(v.policy.slicer.name)}, placer {html.escape(v.policy.placer)}, budget "
        f"{v.budget.max_tokens}/{v.budget.target_tokens} (reserve {v.budget.output_reserve})</li>"
        for v in result.variants
    )
    errors = result.errors
    err_html = ""
    if errors:
        items = "".join(
            f"<li>{html.escape(l)}: {len(e)} set(s) failed, e.g. {html.escape(str(next(iter(e.values()))))}</li>"
            for l, e in errors.items()
        )
        err_html = f"<h2>Failed variants</h2><ul>{items}</ul>"
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>{CSS}</style></head><body>
<h1>{html.escape(title)}</h1>
<p class="meta">{t.n:,} items in {t.n_sets:,} item set(s); {len(result.labels)} variants;
{result.n_swing:,} swinging contents (an item swings when at least two variants disagree on it).</p>
<h2>Variants</h2><ul>{variants}</ul>{err_html}
<h2>Swinging items</h2>{img("heatmap.png", "heatmap of swinging items by variant")}
<h2>Tokens used vs budget</h2>{img("tokens.png", "tokens used per variant")}
<h2>Kind mix per variant</h2>{img("kinds.png", "kind mix per variant")}
<h2>Top swinging items and each variant's reason</h2>
<table><tr>{set_head}<th>content</th>{head}</tr>{"".join(rows_html)}</table>
</body></html>
"""
    path = out / "report.html"
    atomic_write_bytes(path, page.encode("utf-8"))
    return path
