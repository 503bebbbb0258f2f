"""The HTML report of a written sweep directory, in-process (``items.parquet``, ...) or Dask
(``items/part-*.parquet``, ... and ``manifest.json``), read with bounded memory: per-variant
aggregates come from streaming the ``variants`` output in batches, the swinging items shown
are the ``top_k`` most contested rows of ``diffs`` (kept while streaming), and their reasons
come from a filtered scan of ``items``. Nothing holds a whole output in memory."""

from __future__ import annotations

import base64
import html
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from cupel_np.errors import InvalidConfigError

BATCH_ROWS = 65_536
#: scan one file and a few batches ahead: the default read-ahead (16 batches, 4 files) holds
#: several row groups of a large output at once, and the peak grew with the output size
_READAHEAD = {"batch_readahead": 2, "fragment_readahead": 1}


@dataclass
class SweepDirSummary:
    """What the report needs from a sweep directory."""

    labels: list[str]
    variants: list[dict]  # {"label", "policy", "budget"} as the writers record them
    set_column: str | None
    rows: int
    sets: int
    swing: int
    included: np.ndarray  # [V] included rows over all sets (failed sets excluded)
    tokens: np.ndarray  # [V] tokens used
    target: np.ndarray  # [V] target tokens summed over the sets that did not fail
    swing_included: np.ndarray  # [V]
    failed: np.ndarray  # [V] failed sets
    failure_example: dict[str, str] = field(default_factory=dict)
    top: list[dict] = field(default_factory=list)  # set, content, status[V] (1/0/-1 failed), reason[V]


def _output(out: Path, name: str) -> Path:
    d, f = out / name, out / f"{name}.parquet"
    if d.is_dir():
        return d
    if f.is_file():
        return f
    raise InvalidConfigError(f"{out} holds no sweep output {name!r} (expected {f.name} or {name}/part-*.parquet)")


def _files(p: Path) -> list[str]:
    return [str(p)] if p.is_file() else sorted(str(f) for f in p.glob("part-*.parquet"))


def _meta(out: Path, variants_path: Path) -> tuple[list[dict], str | None]:
    manifest = out / "manifest.json"
    if manifest.is_file():
        m = json.loads(manifest.read_text())
        if isinstance(m.get("variants"), list):
            return m["variants"], m.get("set_column")
    files = _files(variants_path)
    if not files:
        raise InvalidConfigError(f"{variants_path} holds no part files")
    md = pq.read_schema(files[0]).metadata or {}
    if b"cupel_np.variants" not in md:
        raise InvalidConfigError(f"{files[0]} carries no cupel_np.variants metadata; not a cupel_np sweep output")
    names = pq.read_schema(files[0]).names
    set_col = names[1] if len(names) > 1 and names[1] != "included_count" else None
    return json.loads(md[b"cupel_np.variants"]), set_col


def check_sweep_dir(out: Path) -> None:
    """Refuse a directory that is not one sweep's outputs: a budget simulation, or the outputs
    of two runs side by side (single files and part directories, or a manifest that names
    another layout than the one present)."""
    from cupel_np.io.outdir import (
        KIND_BUDGET,
        KIND_PARTS,
        KIND_STREAMED,
        KIND_SWEEP,
        PARTS_DIRS,
        SWEEP_FILES,
        describe_outputs,
        read_manifest,
    )

    if not out.is_dir():
        raise InvalidConfigError(f"sweep directory not found: {out}")
    m = read_manifest(out) or {}
    if m.get("kind") == KIND_BUDGET:
        raise InvalidConfigError(
            f"{out} holds a budget simulation, not a sweep; its page is written by cupel-np budget"
        )
    files = [n for n in SWEEP_FILES if (out / n).is_file()]
    parts = [n for n in PARTS_DIRS if (out / n).is_dir()]
    kind = m.get("kind")
    mixed = (files and parts) or (kind == KIND_PARTS and files) or (kind in (KIND_SWEEP, KIND_STREAMED) and parts)
    if mixed:
        raise InvalidConfigError(
            f"{out} is ambiguous: it holds {describe_outputs(out)}, the outputs of more than one run; "
            "rerun the sweep into an empty directory (or with --overwrite)"
        )


def load_sweep_dir(out_dir, top_k: int = 40) -> SweepDirSummary:
    """Read what the page needs from a written sweep directory, with bounded memory."""
    out = Path(out_dir)
    check_sweep_dir(out)
    vpath, dpath, ipath = _output(out, "variants"), _output(out, "diffs"), _output(out, "items")
    variants, set_col = _meta(out, vpath)
    labels = [v["label"] for v in variants]
    nv = len(labels)
    inc, tok, tgt, swi, fail = (np.zeros(nv, dtype=np.int64) for _ in range(5))
    example: dict[str, str] = {}
    vrows = 0
    vds = ds.dataset(_files(vpath), format="parquet")
    for b in vds.to_batches(
        columns=["variant", "included_count", "tokens_used", "target_tokens", "swing_included", "error"],
        batch_size=BATCH_ROWS,
        **_READAHEAD,
    ):
        vrows += b.num_rows
        codes = pc.index_in(b.column("variant"), value_set=pa.array(labels)).to_numpy(zero_copy_only=False)
        err = b.column("error").is_valid().to_numpy(zero_copy_only=False)
        ok = ~err
        np.add.at(fail, codes[err], 1)
        for name, acc in (
            ("included_count", inc),
            ("tokens_used", tok),
            ("target_tokens", tgt),
            ("swing_included", swi),
        ):
            np.add.at(acc, codes[ok], pc.fill_null(b.column(name), 0).to_numpy(zero_copy_only=False)[ok])
        if err.any():
            for r in np.flatnonzero(err)[:nv]:
                example.setdefault(labels[codes[r]], b.column("error")[int(r)].as_py())
    if set_col is not None and set_col not in pq.read_schema(_files(ipath)[0]).names:
        set_col = None  # a sweep without a set column: one unnamed set
    rows = sum(pq.read_metadata(f).num_rows for f in _files(ipath))
    swing = sum(pq.read_metadata(f).num_rows for f in _files(dpath))
    top = _top_swings(dpath, labels, set_col, top_k)
    _add_reasons(ipath, labels, set_col, top)
    return SweepDirSummary(
        labels, variants, set_col, rows, vrows // max(nv, 1), swing, inc, tok, tgt, swi, fail, example, top
    )


def _top_swings(dpath: Path, labels: list[str], set_col, k: int) -> list[dict]:
    """The k most contested swinging contents (closest to an even split of the variants that
    did not fail; ties by set key, then content, so every layout of the same sweep shows the
    same rows); at most k + one batch of rows held at a time."""
    keep: pa.Table | None = None
    cols = ([set_col] if set_col else []) + ["content", *labels]
    for b in ds.dataset(_files(dpath), format="parquet").to_batches(columns=cols, batch_size=BATCH_ROWS, **_READAHEAD):
        t = pa.Table.from_batches([b])
        st = (
            np.stack([pc.equal(t.column(l), "Included").to_numpy(zero_copy_only=False) for l in labels], axis=1)
            if t.num_rows
            else np.zeros((0, len(labels)), bool)
        )
        valid = (
            np.stack([t.column(l).is_valid().to_numpy(zero_copy_only=False) for l in labels], axis=1)
            if t.num_rows
            else np.zeros((0, len(labels)), bool)
        )
        n_inc = (st & valid).sum(axis=1)
        contest = np.minimum(n_inc, valid.sum(axis=1) - n_inc)
        t = t.append_column("__contest", pa.array(contest.astype(np.int64)))
        keep = t if keep is None else pa.concat_tables([keep, t])
        keep = keep.sort_by(
            [("__contest", "descending"), *([(set_col, "ascending")] if set_col else []), ("content", "ascending")]
        ).slice(0, k)
    if keep is None:
        return []
    out = []
    for r in keep.to_pylist():
        status = [(-1 if r[l] is None else int(r[l] == "Included")) for l in labels]
        out.append(
            {
                "set": r[set_col] if set_col else None,
                "content": r["content"],
                "status": status,
                "reason": [None] * len(labels),
            }
        )
    return out


def _add_reasons(ipath: Path, labels: list[str], set_col, top: list[dict]) -> None:
    """Each shown content's reason per variant: Included if any copy is, else the first copy's."""
    if not top:
        return
    contents = pa.array(sorted({t["content"] for t in top}))
    cols = ([set_col] if set_col else []) + [
        "content",
        "input_row",
        *(f"{l}.reason" for l in labels),
        *(f"{l}.included" for l in labels),
    ]
    flt = pc.field("content").isin(contents)
    found: dict = {}
    for b in ds.dataset(_files(ipath), format="parquet").to_batches(
        columns=cols, filter=flt, batch_size=BATCH_ROWS, **_READAHEAD
    ):
        for r in b.to_pylist():
            found.setdefault((r[set_col] if set_col else None, r["content"]), []).append(r)
    for t in top:
        rs = sorted(found.get((t["set"], t["content"]), []), key=lambda r: r["input_row"])
        for v, l in enumerate(labels):
            if t["status"][v] < 0:
                t["reason"][v] = "failed"
            elif any(r[f"{l}.included"] for r in rs):
                t["reason"][v] = "Included"
            elif rs:
                t["reason"][v] = rs[0][f"{l}.reason"] or "Excluded"
            else:
                t["reason"][v] = "Excluded"


# ----------------------------------------------------------------------------- page
def _heatmap(s: SweepDirSummary) -> bytes:
    from matplotlib.colors import ListedColormap

    from cupel_np.report.html import _mpl, _plt, _png, _short

    plt = _plt()
    nv = len(s.labels)
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * nv + 5), max(2.5, 0.28 * len(s.top) + 1.5)))
    if s.top:
        data = np.array([t["status"] for t in s.top], dtype=float)
        data[data < 0] = np.nan
        cmap = ListedColormap(["#d9534f", "#5cb85c"]).with_extremes(bad="#bbbbbb")
        ax.imshow(np.ma.masked_invalid(data), aspect="auto", cmap=cmap, vmin=0, vmax=1, interpolation="nearest")
        ax.set_yticks(
            range(len(s.top)),
            [
                _mpl(f"{t['set']}: {_short(t['content'], 48)}" if s.set_column else _short(t["content"], 48))
                for t in s.top
            ],
            fontsize=7,
        )
    else:
        ax.text(0.5, 0.5, "no item swings between these variants", ha="center", va="center", transform=ax.transAxes)
        ax.set_yticks([])
    ax.set_xticks(range(nv), [_mpl(l) for l in s.labels], rotation=45, ha="right", fontsize=8)
    ax.set_title("Most contested swinging items (green = included, red = excluded, grey = failed)", fontsize=9)
    return _png(fig)


def _tokens(s: SweepDirSummary) -> bytes:
    from cupel_np.report.html import _mpl, _plt, _png

    plt = _plt()
    nv = len(s.labels)
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * nv + 3), 3.6))
    x = np.arange(nv)
    ax.bar(x - 0.2, s.target, width=0.4, label="target tokens (sets that ran)", color="#cccccc")
    ax.bar(x + 0.2, s.tokens, width=0.4, label="tokens used", color="#337ab7")
    for i in range(nv):
        if s.target[i]:
            ax.text(x[i] + 0.2, s.tokens[i], f"{s.tokens[i] / s.target[i]:.0%}", ha="center", va="bottom", fontsize=7)
    ax.set_xticks(x, [_mpl(l) for l in s.labels], rotation=45, ha="right", fontsize=8)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_title("Tokens used vs budget per variant", fontsize=9)
    return _png(fig)


def _describe(v: dict) -> str:
    from cupel_np.model.policy import Policy
    from cupel_np.report.html import _describe_scorer

    b = v["budget"]
    try:
        p = Policy.from_dict(v["policy"])
        what = f"scorer {_describe_scorer(p.scorer)}, slicer {p.slicer.name}, placer {p.placer}"
    except Exception:  # a policy written by another version: show it as recorded
        what = json.dumps(v["policy"])[:200]
    return (
        f"<li><b>{html.escape(v['label'])}</b>: {html.escape(what)}, budget "
        f"{b.get('max_tokens')}/{b.get('target_tokens')} (reserve {b.get('output_reserve', 0)})</li>"
    )


def _check_page(out: Path, overwrite: bool) -> None:
    """Never silently replace a page built from the in-memory result (or a page that is not
    ours) with one built from the written outputs."""
    page = out / "report.html"
    if overwrite or not page.is_file():
        return
    head = page.read_bytes()[:2000].decode("utf-8", "replace")
    if f'content="{PAGE_FROM_OUTPUTS}"' not in head:
        what = "from the in-memory result" if PAGE_FROM_RESULT in head else "by another tool or version"
        raise InvalidConfigError(
            f"{page} was written {what}; pass overwrite=True (CLI: --overwrite) to replace it with the page "
            "built from the written outputs, or choose another directory"
        )


#: the generator tag of each kind of page (``<meta name="generator">``)
PAGE_FROM_RESULT, PAGE_FROM_OUTPUTS = "cupel_np report from-result", "cupel_np report from-outputs"


def write_dir_report(out_dir, *, title: str | None = None, top_k: int = 40, overwrite: bool = False) -> Path:
    """Write ``report.html`` (PNGs embedded and beside it) for the sweep written in ``out_dir``.
    A directory holding more than one run's outputs is refused, and so is replacing a page
    built from the in-memory result, unless ``overwrite=True``."""
    from cupel_np.io.parquet import atomic_write_bytes
    from cupel_np.report.html import CSS, _short

    out = Path(out_dir)
    if top_k < 0:
        raise InvalidConfigError(f"top_k must be at least 0, got {top_k}")
    s = load_sweep_dir(out, top_k)
    _check_page(out, overwrite)
    pngs = {"heatmap.png": _heatmap(s), "tokens.png": _tokens(s)}
    for name, data in pngs.items():
        atomic_write_bytes(out / name, data)

    def img(name, alt):
        return f'<img alt="{alt}" src="data:image/png;base64,{base64.b64encode(pngs[name]).decode()}">'

    title = title or f"cupel_np sweep: {out.resolve().name}"
    rows = []
    for v, l in enumerate(s.labels):
        util = s.tokens[v] / s.target[v] if s.target[v] else 0.0
        rows.append(
            f"<tr><td>{html.escape(l)}</td><td>{s.included[v]:,}</td><td>{s.tokens[v]:,}</td>"
            f"<td>{util:.1%}</td><td>{s.swing_included[v]:,}</td><td>{s.failed[v]:,}</td></tr>"
        )
    fails = "".join(
        f"<li>{html.escape(l)}: {s.failed[i]:,} set(s) failed, e.g. {html.escape(s.failure_example.get(l, ''))}</li>"
        for i, l in enumerate(s.labels)
        if s.failed[i]
    )
    head = "".join(f"<th>{html.escape(l)}</th>" for l in s.labels)
    top = []
    for t in s.top:
        cells = "".join(
            f'<td class="{"fail" if r == "failed" else "in" if r == "Included" else "out"}">{html.escape(str(r))}</td>'
            for r in t["reason"]
        )
        set_cell = f"<td>{html.escape(str(t['set']))}</td>" if s.set_column else ""
        top.append(f"<tr>{set_cell}<td>{html.escape(_short(t['content'], 80))}</td>{cells}</tr>")
    set_head = f"<th>{html.escape(s.set_column)}</th>" if s.set_column else ""
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="generator" content="{PAGE_FROM_OUTPUTS}">
<title>{html.escape(title)}</title>
<style>{CSS}</style></head><body>
<h1>{html.escape(title)}</h1>
<p class="meta">{s.rows:,} items in {s.sets:,} item set(s); {len(s.labels)} variants; {s.swing:,} swinging
contents (an item swings when at least two variants disagree on it). Built from the written outputs.</p>
<h2>Variants</h2><ul>{"".join(_describe(v) for v in s.variants)}</ul>
<table><tr><th>variant</th><th>included</th><th>tokens used</th><th>utilization</th><th>swing incl.</th>
<th>failed sets</th></tr>{"".join(rows)}</table>
{f"<h2>Failed variants</h2><ul>{fails}</ul>" if fails else ""}
<h2>Swinging items</h2>{img("heatmap.png", "heatmap of swinging items by variant")}
<h2>Tokens used vs budget</h2>{img("tokens.png", "tokens used per variant")}
<h2>The {len(s.top)} most contested swinging items and each variant's reason</h2>
<table><tr>{set_head}<th>content</th>{head}</tr>{"".join(top)}</table>
</body></html>
"""
    path = out / "report.html"
    atomic_write_bytes(path, page.encode("utf-8"))
    return path
