"""``report.html``: a self-contained page (no network; PNGs, CSS and plain JavaScript inline)
for a SweepResult (the notebook summaries live beside their classes, helpers in _repr.py).

Sections: how alike the variants are (agreement and Jaccard matrices, ordered so similar
variants sit together); swing by kind and by source per variant pair; why each variant left
swinging items out (reason totals over all of them, and a sortable, filterable table of the
most contested items with every variant's status, reason and score rank); a drill-down into
the sets that change most; a heatmap, tokens vs budget and the kind mix (PNGs, also written
beside the page). Every section is bounded in size whatever the sweep's size.
"""

from __future__ import annotations

import base64
import io
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cupel_np.engine.reasons import reason_name_lut
from cupel_np.text import escape_html as _e
from cupel_np.text import shorten as _short

TOP_K = 40  # rows of the heatmap PNG


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
    target = np.bincount(
        idx, weights=vt["target_tokens"].to_numpy(zero_copy_only=False).astype(np.float64), minlength=len(labels)
    )
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


# ----------------------------------------------------------------------------- the numbers
# Everything below works on the [G, V] content-status matrix (G = content groups, one per
# distinct content of a set; V = variants) and the failed (variant, set) cells: one pass of
# matrix products over bounded blocks of groups, never a Python loop per set or per pair.
BLOCK = 1 << 18
MAX_CATEGORIES = 8


def _valid(result, gs=None) -> np.ndarray:
    """[G, V] bool: the variant ran on the group's set (it did not fail there)."""
    sets = result.group_set if gs is None else result.group_set[gs]
    return ~result.failed.T[sets]


def agreement(result) -> dict:
    """Pairwise agreement of the variants over content groups, counting only sets where both
    ran: ``agree[a, b]`` = share of groups with the same status; ``jaccard[a, b]`` = |A∩B| /
    |A∪B| of the included groups (1.0 when both include nothing); ``disagree[a, b]`` = the
    number of groups that swing between a and b; ``order`` puts similar variants together."""
    v = len(result.labels)
    ii = np.zeros((v, v))
    ee = np.zeros((v, v))
    vv = np.zeros((v, v))
    iv = np.zeros((v, v))
    g = result.status.shape[0]
    any_failed = bool(result.failed.any())
    for lo in range(0, g, BLOCK):
        st = result.status[lo : lo + BLOCK]
        if any_failed:
            ok = _valid(result, np.arange(lo, min(g, lo + BLOCK)))
            inc = (st & ok).astype(np.float64)
            exc = (~st & ok).astype(np.float64)
            okf = ok.astype(np.float64)
            vv += okf.T @ okf
            iv += inc.T @ okf
        else:
            inc = st.astype(np.float64)
            exc = 1.0 - inc
            vv += inc.shape[0]
            iv += inc.sum(axis=0)[:, None]
        ii += inc.T @ inc
        ee += exc.T @ exc
    same = ii + ee
    agree = np.divide(same, vv, out=np.full((v, v), np.nan), where=vv > 0)
    union = iv + iv.T - ii
    jac = np.divide(ii, union, out=np.ones((v, v)), where=union > 0)
    jac[vv == 0] = np.nan
    disagree = np.rint(vv - same).astype(np.int64)
    return {
        "agree": agree,
        "jaccard": jac,
        "disagree": disagree,
        "compared": np.rint(vv).astype(np.int64),
        "order": similarity_order(agree),
    }


def similarity_order(agree: np.ndarray) -> list[int]:
    """A chain through the variants: start at the one least like the others, then always step
    to the unvisited variant most like the current one (ties: input order)."""
    v = agree.shape[0]
    if v == 0:
        return []
    a = np.nan_to_num(agree, nan=0.0)
    mean = (a.sum(axis=1) - np.diag(a)) / max(v - 1, 1)
    cur = int(np.argmin(mean))
    order = [cur]
    left = np.ones(v, dtype=bool)
    left[cur] = False
    while left.any():
        cand = np.where(left, a[cur], -np.inf)
        cur = int(np.argmax(cand))
        order.append(cur)
        left[cur] = False
    return order


def _category_ids(result, which: str) -> tuple[np.ndarray, list[str]]:
    import pyarrow.compute as pc

    t = result.table
    rows = result.group_first_row
    if which == "kind":  # kinds compare case-insensitively (ASCII), as the scorers do
        return t.kind_id[rows], list(t.kind_vocab)
    enc = pc.dictionary_encode(t.source.take(rows))
    return enc.indices.to_numpy(zero_copy_only=False).astype(np.int64), enc.dictionary.to_pylist()


def swing_by_category(result, which: str) -> dict:
    """Per variant pair and category (``kind`` or ``source`` of the content's first row):
    the number of content groups that swing between the pair. ``counts[c]`` is [V, V]; the
    categories are the ``MAX_CATEGORIES`` with the most swinging groups, the rest summed in
    ``other`` (so the row totals equal ``agreement()['disagree']``). Only swinging groups can
    differ between two variants, so only they are visited; memory is O(MAX_CATEGORIES V²)
    however many categories there are."""
    v = len(result.labels)
    cid, names = _category_ids(result, which)
    k = len(names)
    gs = result.swing_groups
    swing_groups = np.bincount(cid[gs], minlength=k)[:k]
    groups = np.bincount(cid, minlength=k)[:k]
    top = [int(j) for j in np.lexsort((np.arange(k), -swing_groups))[:MAX_CATEGORIES] if swing_groups[j] > 0]
    remap = np.full(k, len(top), dtype=np.int64)  # every other category -> one "other" slot
    remap[top] = np.arange(len(top))
    n_slots = len(top) + 1
    counts = np.zeros((n_slots, v, v))
    any_failed = bool(result.failed.any())
    for lo in range(0, gs.size, BLOCK):
        sel_g = gs[lo : lo + BLOCK]
        st = result.status[sel_g]
        if any_failed:
            ok = _valid(result, sel_g)
            inc, exc = st & ok, ~st & ok
        else:
            inc, exc = st, ~st
        c = remap[cid[sel_g]]
        order = np.argsort(c, kind="stable")
        bounds = np.searchsorted(c[order], np.arange(n_slots + 1))
        for j in np.flatnonzero(np.diff(bounds)):  # one product per category present
            sel = order[bounds[j] : bounds[j + 1]]
            m = inc[sel].astype(np.float64).T @ exc[sel].astype(np.float64)
            counts[j] += m + m.T
    counts = np.rint(counts).astype(np.int64)
    rest = np.ones(k, dtype=bool)
    rest[top] = False
    return {
        "names": [names[j] for j in top],
        "counts": counts[: len(top)],
        "other": counts[len(top)],
        "swinging": swing_groups[top],
        "groups": groups[top],
        "other_swinging": int(swing_groups[rest].sum()),
    }


def group_cells(result, groups: np.ndarray) -> dict:
    """For the given content groups: per variant ``status`` ('Included' / exclusion reason
    of the content's first row / 'failed'), ``reason`` (the row's reason name, inclusion
    reasons too) and ``rank`` (1 + the rows of the set that variant scored strictly higher;
    None where the variant failed). Cost: one sort of each touched set per variant."""
    t = result.table
    v = len(result.labels)
    n = len(groups)
    rows = result.group_first_row[groups]
    sets = result.group_set[groups]
    names = reason_name_lut()
    status = np.empty((n, v), dtype=object)
    reason = np.empty((n, v), dtype=object)
    rank = np.zeros((n, v), dtype=np.int64)
    uniq, inv = np.unique(sets, return_inverse=True)
    for vi in range(v):
        codes = result.run.reason[vi][rows].astype(np.int64)
        inc = result.status[groups, vi]
        fail = result.failed[vi, sets]
        reason[:, vi] = names[codes + 1]
        status[:, vi] = np.where(fail, "failed", np.where(inc, "Included", names[codes + 1]))
        for j, s in enumerate(uniq):  # bounded: only the sets of the rows shown
            lo, hi = int(t.offsets[s]), int(t.offsets[s + 1])
            sc = np.sort(result.run.scores_at(vi, np.arange(lo, hi)))
            here = np.flatnonzero(inv == j)
            mine = result.run.scores_at(vi, rows[here])
            rank[here, vi] = 1 + (hi - lo) - np.searchsorted(sc, mine, side="right")
    return {"status": status, "reason": reason, "rank": rank, "failed": result.failed[:, sets].T}


def reason_totals(result) -> tuple[list[str], np.ndarray]:
    """Over ALL swinging contents: per variant, how many are Included and how many are
    excluded for each reason (the reason of the content's first row); failed cells apart."""
    names = reason_name_lut()
    gs = result.swing_groups
    rows = result.group_first_row[gs]
    sets = result.group_set[gs]
    cols: dict[str, np.ndarray] = {}
    v = len(result.labels)
    per_v = []
    for vi in range(v):
        inc = result.status[gs, vi]
        fail = result.failed[vi, sets]
        codes = result.run.reason[vi][rows].astype(np.int64)
        out = {"Included": int((inc & ~fail).sum()), "failed": int(fail.sum())}
        ex = ~inc & ~fail
        cnt = np.bincount(codes[ex] + 1, minlength=len(names))
        for c in np.flatnonzero(cnt):
            out[str(names[c])] = out.get(str(names[c]), 0) + int(cnt[c])
        per_v.append(out)
        for k in out:
            cols.setdefault(k, None)
    keys = ["Included"] + sorted(k for k in cols if k not in ("Included", "failed")) + ["failed"]
    return keys, np.array([[d.get(k, 0) for k in keys] for d in per_v], dtype=np.int64).reshape(v, len(keys))


def set_summary(result, segs: np.ndarray) -> dict:
    """Per shown set and variant: included count, tokens used, swinging contents included
    (the same numbers as variants.parquet)."""
    t = result.table
    v = len(result.labels)
    inc_n = np.zeros((len(segs), v), dtype=np.int64)
    tok = np.zeros((len(segs), v), dtype=np.int64)
    sw_inc = np.zeros((len(segs), v), dtype=np.int64)
    for j, s in enumerate(segs):
        lo, hi = int(t.offsets[s]), int(t.offsets[s + 1])
        glo, ghi = int(result.swing_offsets[s]), int(result.swing_offsets[s + 1])
        sg = result.swing_groups[glo:ghi]
        for vi in range(v):
            m = result.run.included[vi][lo:hi]
            inc_n[j, vi] = int(m.sum())
            tok[j, vi] = int(t.tokens[lo:hi][m].sum())
            sw_inc[j, vi] = int(result.status[sg, vi].sum())
    return {"included": inc_n, "tokens": tok, "swing_included": sw_inc}


# ----------------------------------------------------------------------------- HTML
def _heat(x: float) -> str:
    """A background colour from white (0) to blue (1)."""
    if x != x:
        return "#eeeeee"
    a = max(0.0, min(1.0, float(x)))
    r = int(255 - a * (255 - 51))
    g = int(255 - a * (255 - 122))
    b = int(255 - a * (255 - 183))
    return f"#{r:02x}{g:02x}{b:02x}"


def _agreement_html(result, ag: dict) -> str:
    labs = result.labels
    order = ag["order"]
    head = "".join(f'<th class="rot"><span>{_e(labs[j])}</span></th>' for j in order)

    def table(key: str, title: str) -> str:
        m = ag[key]
        off = m[~np.eye(len(labs), dtype=bool)]
        off = off[off == off]
        lo, hi = (float(off.min()), float(off.max())) if off.size else (0.0, 1.0)
        span = hi - lo if hi > lo else 1.0
        rows = []
        for i in order:
            cells = []
            for j in order:
                x = m[i, j]
                txt = "–" if x != x else f"{x:.3f}"
                cells.append(
                    f'<td class="num" style="background:{_heat((x - lo) / span)}" data-a="{_e(labs[i])}" '
                    f'data-b="{_e(labs[j])}" data-v="{float(x)!r}">{txt}</td>'
                )
            rows.append(f"<tr><th>{_e(labs[i])}</th>{''.join(cells)}</tr>")
        return (
            f'<div class="mat"><h3>{title}</h3><p class="meta">colour: white = {lo:.3f} … blue = {hi:.3f}</p>'
            f'<table class="matrix" id="{key}-matrix">'
            f"<tr><th></th>{head}</tr>{''.join(rows)}</table></div>"
        )

    return table("agree", "Share of contents with the same status") + table(
        "jaccard", "Jaccard of the included contents"
    )


def _pairs_html(result, ag: dict, cat: dict, which: str, max_pairs: int) -> str:
    labs = result.labels
    v = len(labs)
    ia, ib = np.triu_indices(v, 1)
    d = ag["disagree"][ia, ib]
    order = np.lexsort((ib, ia, -d))[:max_pairs]
    names = cat["names"]
    has_other = bool(cat["other"].any())
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
            f'<td class="num total">{int(d[p]):,}</td>{cells}</tr>'
        )
    more = (
        f'<p class="meta">Showing the {len(order)} of {len(d)} pairs that disagree most.</p>'
        if len(d) > len(order)
        else ""
    )
    return (
        f'<table class="pairs" id="by-{which}"><tr><th>variant pair</th><th>swinging</th>{head}</tr>'
        f"{''.join(rows)}</table>{more}"
    )


def _cells_html(result, cells: dict, i: int) -> str:
    out = []
    for vi in range(len(result.labels)):
        st = cells["status"][i, vi]
        if st == "failed":
            out.append('<td class="fail" data-s="-1" data-status="failed">failed</td>')
            continue
        r = int(cells["rank"][i, vi])
        cls = "in" if st == "Included" else "out"
        key = (1 if st == "Included" else 0) * 10**9 - r
        out.append(
            f'<td class="{cls}" data-s="{key}" data-status="{_e(st)}" data-reason="{_e(cells["reason"][i, vi])}" '
            f'data-rank="{r}" title="{_e(cells["reason"][i, vi])}, score rank {r}">{_e(st)} <span class="rk">#{r}</span></td>'
        )
    return "".join(out)


def _item_rows_html(result, groups: np.ndarray, cells: dict) -> str:
    t = result.table
    rows = []
    valid = _valid(result, groups).sum(axis=1) if len(groups) else np.zeros(0, dtype=np.int64)
    for i, g in enumerate(groups):
        r = int(result.group_first_row[g])
        s = int(result.group_set[g])
        content = t.content[r].as_py()
        kind = t.kind[r].as_py()
        source = t.source[r].as_py()
        key = t.set_keys[s] if t.set_column else ""
        n_in = int((result.status[g] & ~result.failed[:, s]).sum())
        rows.append(
            f'<tr data-set="{_e(key)}" data-content="{_e(content)}"><td>{_e(key)}</td>'
            f'<td title="{_e(content)}">{_e(_short(content, 56))}</td><td>{_e(kind)}</td><td>{_e(source)}</td>'
            f'<td class="num" data-s="{int(t.tokens[r])}">{int(t.tokens[r]):,}</td>'
            f'<td class="num" data-s="{n_in}">{n_in}/{int(valid[i])}</td>{_cells_html(result, cells, i)}</tr>'
        )
    return "".join(rows)


def _items_head(result, set_name: str) -> str:
    cols = [set_name, "content", "kind", "source", "tokens", "included by"] + result.labels
    return "".join(f'<th data-col="{k}">{_e(c)}</th>' for k, c in enumerate(cols))


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
h1{font-size:1.4em} h2{font-size:1.15em;margin-top:1.8em;border-bottom:1px solid #ddd} h3{font-size:.95em}
table{border-collapse:collapse;font-size:12px;margin:.4em 0} td,th{border:1px solid #ddd;padding:3px 6px;text-align:left}
th{background:#f5f5f5} td.in{background:#dff0d8} td.out{background:#f2dede} td.fail{background:#ddd}
td.num{text-align:right;font-variant-numeric:tabular-nums} .rk{color:#777;font-size:10px}
img{max-width:100%;border:1px solid #eee} .meta{color:#666;font-size:12px}
.mat{display:inline-block;vertical-align:top;margin-right:1.5em} th.rot{height:110px;vertical-align:bottom;padding:2px}
table.matrix{font-size:10.5px} table.matrix td{padding:2px 3px}
th.rot span{writing-mode:vertical-rl;transform:rotate(180deg);white-space:nowrap}
#swing-table th{cursor:pointer} .controls{margin:.5em 0} tr.tot td{background:#fafafa;color:#555}
details{margin:.4em 0} summary{cursor:pointer} .scroll{overflow-x:auto;max-width:100%}
#swing-table td,table.set-items td{white-space:nowrap}
"""


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
) -> Path:
    """Write ``report.html`` plus ``heatmap.png``, ``tokens.png`` and ``kinds.png`` into
    ``out_dir`` (atomically) and return the page's path. The page's size is bounded for any
    sweep: ``max_rows`` swinging items, ``max_sets`` drill-down sets, ``max_pairs`` variant
    pairs, plus aggregates over everything. A directory holding another run's outputs is
    refused unless ``overwrite=True`` (the same result's ``write_sweep`` outputs are its own)."""
    from cupel_np._files import atomic_write_bytes
    from cupel_np.io.outdir import KIND_PAGE, claim_out_dir, run_id, write_manifest

    out = claim_out_dir(out_dir, overwrite=overwrite, run=run_id(result))
    groups = _top_swings(result, top_k)
    pngs = {
        "heatmap.png": heatmap_png(result, groups),
        "tokens.png": tokens_png(result),
        "kinds.png": kinds_png(result),
    }
    for name, data in pngs.items():
        atomic_write_bytes(out / name, data)
    t = result.table
    set_name = t.set_column or "set"
    v = len(result.labels)

    def img(name, alt):
        return f'<img alt="{alt}" src="data:image/png;base64,{base64.b64encode(pngs[name]).decode()}">'

    variants = "".join(
        f"<li><b>{_e(x.label)}</b>: scorer {_e(_describe_scorer(x.policy.scorer))}, slicer "
        f"{_e(x.policy.slicer.name)}, placer {_e(x.policy.placer)}, budget "
        f"{x.budget.max_tokens}/{x.budget.target_tokens} (reserve {x.budget.output_reserve})</li>"
        for x in result.variants
    )
    errors = result.errors
    err_html = ""
    if errors:
        items = "".join(
            f"<li>{_e(l)}: {len(e)} set(s) failed, e.g. {_e(str(next(iter(e.values()))))}</li>"
            for l, e in errors.items()
        )
        err_html = f"<h2>Failed variants</h2><ul>{items}</ul>"

    ag = agreement(result)
    by_kind = swing_by_category(result, "kind")
    by_source = swing_by_category(result, "source")
    top = _top_swings(result, max_rows)
    cells = group_cells(result, top)
    keys, totals = reason_totals(result)
    tot_rows = "".join(
        f'<tr data-variant="{_e(result.labels[vi])}"><th>{_e(result.labels[vi])}</th>'
        + "".join(f'<td class="num" data-reason="{_e(k)}">{int(totals[vi, j]):,}</td>' for j, k in enumerate(keys))
        + "</tr>"
        for vi in range(v)
    )
    reason_html = (
        f'<table id="reason-totals"><tr><th>variant</th>{"".join(f"<th>{_e(k)}</th>" for k in keys)}</tr>'
        f"{tot_rows}</table>"
    )
    kinds_opts = "".join(
        f'<option value="{_e(k)}">{_e(k)}</option>'
        for k in sorted({t.kind[int(result.group_first_row[g])].as_py() for g in top})
    )
    swing_html = (
        f'<div class="controls">filter <input id="q" placeholder="text in any cell"> kind <select id="kind">'
        f'<option value="">(all)</option>{kinds_opts}</select> <span class="meta"><span id="shown">{len(top)}</span> '
        f"of {len(top)} rows shown; {result.n_swing:,} swinging contents in all</span></div>"
        f'<div class="scroll"><table id="swing-table"><thead><tr>{_items_head(result, set_name)}</tr></thead>'
        f"<tbody>{_item_rows_html(result, top, cells)}</tbody></table></div>"
    )

    # per-set drill-down: the sets with the most swinging contents
    per_set = np.diff(result.swing_offsets)
    segs = np.lexsort((np.arange(t.n_sets), -per_set))[:max_sets]
    segs = segs[per_set[segs] > 0]
    ss = set_summary(result, segs)
    drill = []
    for j, s in enumerate(segs):
        s = int(s)
        key = t.set_keys[s] if t.set_column else "(all items)"
        lo, hi = int(result.swing_offsets[s]), int(result.swing_offsets[s + 1])
        sg = result.swing_groups[lo:hi]
        n_groups = int(result.group_offsets[s + 1] - result.group_offsets[s])
        shown = _top_swings_in(result, sg, 25)
        c2 = group_cells(result, shown)
        vrows = "".join(
            f'<tr data-variant="{_e(result.labels[vi])}"><th>{_e(result.labels[vi])}</th>'
            + (
                '<td colspan="4" class="fail">failed: ' + _e(str(result.run.errors[vi][s])) + "</td>"
                if result.failed[vi, s]
                else f'<td class="num" data-k="included">{int(ss["included"][j, vi]):,}</td>'
                f'<td class="num" data-k="tokens">{int(ss["tokens"][j, vi]):,}</td>'
                f'<td class="num">{result.variants[vi].budget.target_tokens:,}</td>'
                f'<td class="num" data-k="swing_included">{int(ss["swing_included"][j, vi]):,}</td>'
            )
            + "</tr>"
            for vi in range(v)
        )
        drill.append(
            f'<details class="set" data-set="{_e(key)}" data-swing="{hi - lo}"{" open" if j == 0 else ""}>'
            f"<summary><b>{_e(key)}</b>: {hi - lo:,} swinging of {n_groups:,} contents "
            f"({int(t.offsets[s + 1] - t.offsets[s]):,} items)</summary>"
            f"<table><tr><th>variant</th><th>included</th><th>tokens used</th><th>target</th>"
            f"<th>swinging included</th></tr>{vrows}</table>"
            f'<div class="scroll"><table class="set-items"><thead><tr>{_items_head(result, set_name)}</tr></thead>'
            f"<tbody>{_item_rows_html(result, shown, c2)}</tbody></table></div>"
            + (
                f'<p class="meta">{len(shown)} of {hi - lo} swinging contents shown.</p>'
                if hi - lo > len(shown)
                else ""
            )
            + "</details>"
        )
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="generator" content="cupel_np report from-result">
<title>{_e(title)}</title>
<style>{CSS}</style></head><body>
<h1>{_e(title)}</h1>
<p class="meta" id="summary" data-items="{t.n}" data-sets="{t.n_sets}" data-variants="{v}" data-swing="{result.n_swing}">
{t.n:,} items in {t.n_sets:,} item set(s); {v} variants; {result.n_swing:,} swinging contents
(a content swings when at least two variants that ran on its set disagree on it).</p>
<details><summary><b>Variants</b> ({v})</summary><ul>{variants}</ul></details>{err_html}
<h2 id="agreement">How alike are the variants?</h2>
<p class="meta">Over every content of every set where both variants ran. Rows and columns are
ordered so that similar variants sit together (a chain from the least typical variant, each
step to the most similar one left).</p>
{_agreement_html(result, ag)}
<h2 id="by-kind-h">Swing by kind, per variant pair</h2>
<p class="meta">Contents that one variant of the pair includes and the other excludes, by the
content's kind (ASCII case-folded). Pairs that disagree most first.</p>
{_pairs_html(result, ag, by_kind, "kind", max_pairs)}
<h2 id="by-source-h">Swing by source, per variant pair</h2>
{_pairs_html(result, ag, by_source, "source", max_pairs)}
<h2 id="why">Why each variant left swinging items out</h2>
<p class="meta">All {result.n_swing:,} swinging contents: how many each variant includes, and
the reason of each exclusion.</p>
{reason_html}
<h3>Top swinging items: the most contested, with each variant's reason and score rank</h3>
<p class="meta">Each cell: that variant's status or exclusion reason, and the item's score rank
within its set under that variant (#1 = highest score). Click a header to sort.</p>
{swing_html}
<h2 id="sets">The sets that change most</h2>
{"".join(drill) or '<p class="meta">No set has swinging contents.</p>'}
<h2>Swinging items at a glance</h2>{img("heatmap.png", "heatmap of swinging items by variant")}
<h2>Tokens used vs budget</h2>{img("tokens.png", "tokens used per variant")}
<h2>Kind mix per variant</h2>{img("kinds.png", "kind mix per variant")}
<script>{JS}</script>
</body></html>
"""
    path = out / "report.html"
    atomic_write_bytes(path, page.encode("utf-8"))
    write_manifest(out, KIND_PAGE, run_id(result), [path.name, *pngs])
    return path


def _top_swings_in(result, gs: np.ndarray, k: int) -> np.ndarray:
    if gs.size == 0:
        return gs
    n_inc = result.status[gs].sum(axis=1)
    contest = np.minimum(n_inc, result.status.shape[1] - n_inc)
    return gs[np.lexsort((gs, -contest))[:k]]


def _describe_scorer(sc) -> str:
    entries = getattr(sc, "entries", None)
    if entries:
        return " + ".join(f"{_describe_scorer(s)}×{w:g}" for s, w in entries)
    inner = getattr(sc, "inner", None)
    return f"scaled({_describe_scorer(inner)})" if inner is not None else sc.type_name
