"""Every chart of every page (SVG bytes), drawn from plain arrays so the page built from an
in-memory result and the page built from written outputs draw the same pictures.

The charts are SVG written here, not a plotting library's figures: a page's charts are
bars, cells, lines and text, and drawing them with matplotlib cost ~0.4 s of CPU to import
pyplot and 0.15-0.4 s per chart (the demo's three: ~1 s of a 2.6 s warm demo, and the same
again in a cold one's compile child); these take milliseconds and stay sharp at any zoom.

Conventions: one colour per kind, the same in every report (a fixed palette indexed by a
stable hash of the case-folded kind name); axis labels in human units (1.5M, 20k, never a
``1e6`` offset); the budget ladder's budgets labelled on its axis; every user string shown
with control and bidi characters made visible, cut to ``CHART_LABEL_LIMIT`` characters and
escaped (a chart is embedded as an image, so nothing in it can run or restyle the page).
"""

from __future__ import annotations

import base64
import math
import struct
import zlib
from collections.abc import Sequence

import numpy as np

from cupel_np._svg import (
    Svg,
    axis_width,
    human,
    label_text,
    legend,
    legend_size,
    nice_ticks,
    percent,
    points,
    text_width,
    tick_format,
    y_axis,
)

#: kind colours (colour-blind-friendly "tab10"-like set, then lighter tones)
PALETTE = (
    "#4e79a7",
    "#f28e2b",
    "#59a14f",
    "#e15759",
    "#76b7b2",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
    "#86bcb6",
    "#d4a6c8",
)
IN, OUT, FAILED = "#5cb85c", "#d9534f", "#bbbbbb"
#: the budget curves' line colours, one per variant in order (matplotlib's default cycle)
LINES = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")

#: charts are as wide as this many variants at most (``VARIANT_PX`` each); past it, every
#: k-th variant is labelled and the per-bar percentages are left out, so a chart's size stays
#: bounded however many variants
MAX_WIDE = 60
#: the width of one variant's column
VARIANT_PX = 64
#: a heatmap row's height
ROW_PX = 18
#: the spec's kinds get fixed, distinct colours; any other kind a stable hash of its name
KNOWN_KINDS = ("message", "document", "tooloutput", "memory", "systemprompt", "toolcall")


def kind_colour(kind: str) -> str:
    """The colour of a kind, the same in every report: fixed for the spec's kinds, else a
    stable hash of the ASCII-folded name into the rest of the palette."""
    k = str(kind).lower()
    if k in KNOWN_KINDS:
        return PALETTE[KNOWN_KINDS.index(k)]
    rest = PALETTE[len(KNOWN_KINDS) :]
    return rest[zlib.crc32(k.encode("utf-8", "surrogatepass")) % len(rest)]


def _plot_width(v: int) -> float:
    """A chart's plot width for ``v`` variants (capped at ``MAX_WIDE`` of them)."""
    return float(VARIANT_PX * min(max(v, 1), MAX_WIDE))


def _variant_labels(labels: Sequence[str]) -> list[tuple[int, str]]:
    """The variants labelled on an axis and their text: every k-th past ``MAX_WIDE``."""
    step = -(-len(labels) // MAX_WIDE) if labels else 1
    return [(i, label_text(labels[i])) for i in range(0, len(labels), step)]


def _longest(shown: list[tuple[int, str]], size: float) -> float:
    return max((text_width(s, size) for _, s in shown), default=0.0)


def _labels_depth(shown: list[tuple[int, str]], size: float) -> float:
    """The height the variant labels, turned 45 degrees, take below the axis."""
    return _longest(shown, size) * 0.71 + size + 6


def _left_of_labels(x0: float, shown: list[tuple[int, str]], size: float, cw: float) -> float:
    """``x0``, moved right as far as the first turned variant label reaches left of it."""
    return max(x0, _longest(shown[:1], size) * 0.71 - cw / 2 + 8)


def _png(rgb: np.ndarray) -> bytes:
    """``rgb`` (rows x columns x 3, uint8) as a PNG image."""
    h, w, _ = rgb.shape
    raw = b"".join(b"\x00" + row.tobytes() for row in rgb)  # filter 0 before every row

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    head = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", head) + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b"")


def _rgb(colour: str) -> tuple[int, int, int]:
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


def heatmap_svg(status: np.ndarray, row_labels: list[str], labels: list[str]) -> bytes:
    """Swinging items x variants: ``status`` [rows, V] 1 included, 0 excluded, NaN failed.
    Up to ``MAX_WIDE`` variants a cell is a rectangle (one per run of equal cells); past it the
    cells are one pixel each of an image scaled to the plot (a few bytes a cell however the
    statuses alternate)."""
    v = len(labels)
    n = len(row_labels)
    shown = _variant_labels(labels)
    rows = [label_text(r) for r in row_labels]
    pw = _plot_width(v)
    cw = pw / max(v, 1)
    x0 = _left_of_labels(max([text_width(r, 10) for r in rows] + [40.0]) + 12, shown, 9, cw)
    y0 = 30.0
    title = "Most contested swinging items (green = included, red = excluded, grey = variant failed)"
    if not n:
        svg = Svg(max(pw + x0 + 20, text_width(title, 11) + 20), 120)
        svg.text(10, 16, title, 11)
        svg.text(x0 + pw / 2, 70, "no item swings between these variants", 11, "middle")
        return svg.bytes()
    ph = ROW_PX * n
    svg = Svg(max(x0 + pw + 20, text_width(title, 11) + 20), y0 + ph + _labels_depth(shown, 9))
    svg.text(10, 16, title, 11)
    status = np.asarray(status, dtype=np.float64).reshape(n, v)
    cell = np.where(np.isnan(status), 2, status == 1).astype(np.int8)
    colours = (OUT, IN, FAILED)
    if v > MAX_WIDE:
        rgb = np.array([_rgb(c) for c in colours], dtype=np.uint8)[cell]
        data = base64.b64encode(_png(rgb)).decode()
        svg.add(
            f'<image x="{x0:.1f}" y="{y0:.1f}" width="{pw:.1f}" height="{ph:.1f}" preserveAspectRatio="none" '
            f'style="image-rendering:pixelated" href="data:image/png;base64,{data}"/>'
        )
    for i in range(n):
        y = y0 + i * ROW_PX
        svg.text(x0 - 6, y + ROW_PX / 2 + 3.5, rows[i], 10, "end")
        if v > MAX_WIDE:
            continue
        row = cell[i]
        cuts = (np.flatnonzero(np.diff(row)) + 1).tolist()
        for a, b in zip([0, *cuts], [*cuts, v]):
            if b > a:
                svg.rect(x0 + a * cw, y, (b - a) * cw, ROW_PX, colours[row[a]])
    for i in range(n + 1):  # the rows' borders
        svg.line(x0, y0 + i * ROW_PX, x0 + pw, y0 + i * ROW_PX, "#ffffff", ' stroke-width="0.6"')
    _x_labels(svg, shown, x0, y0 + ph, cw)
    return svg.bytes()


def _bar_chart(labels, title, ylabel, top, entries, legend_title=None):
    """The frame of a bar chart over ``labels`` up to ``top``: the document, the y map, the
    plot's left edge, top and column width."""
    shown = _variant_labels(labels)
    pw = _plot_width(len(labels))
    cw = pw / max(len(labels), 1)
    ticks = nice_ticks(0.0, top * 1.06)  # (room for the labels over the tallest bar)
    x0 = _left_of_labels(axis_width(ticks, human), shown, 9, cw)
    y0, ph = 30.0, 240.0
    lw, lh = legend_size(entries, legend_title)
    svg = Svg(max(x0 + pw + lw + 12, text_width(title, 11) + 20), max(y0 + ph + _labels_depth(shown, 9), y0 + lh))
    svg.text(10, 16, title, 11)
    y_of = y_axis(svg, x0, y0, pw, ph, ticks, human, ylabel)
    _x_labels(svg, shown, x0, y0 + ph, cw)
    if entries:
        legend(svg, x0 + pw + 12, y0, entries, legend_title)
    return svg, y_of, x0, y0 + ph, cw


def tokens_svg(labels: list[str], used: np.ndarray, target: np.ndarray, could: np.ndarray | None = None) -> bytes:
    """Per variant: tokens used against the target, and (``could``) against what the sets
    could use at most (their tokens, capped at the target, summed)."""
    used, target = _amounts(used), _amounts(target)
    could = _amounts(could) if could is not None else None
    series = [("#cccccc", "target tokens (sets that ran)", target)]
    if could is not None:
        series.append(("#9ecae1", "usable: min(set tokens, target)", could))
    series.append(("#337ab7", "tokens used", used))
    top = max([float(s.max()) if s.size else 0.0 for _, _, s in series] + [1.0])
    title = "Tokens used vs budget per variant (% of what the sets could use)"
    entries = [(c, s) for c, s, _ in series]
    svg, y_of, x0, base_y, cw = _bar_chart(labels, title, "tokens (all sets)", top, entries)
    v = len(labels)
    bw = cw * 0.8 / len(series)
    for k, (colour, _, vals) in enumerate(series):
        for i in range(v):
            y = y_of(vals[i])
            svg.rect(x0 + i * cw + cw * 0.1 + k * bw, y, bw, base_y - y, colour)
    for i in range(v if v <= MAX_WIDE else 0):
        base = could[i] if could is not None and could[i] else target[i]
        if base:
            x = x0 + i * cw + cw * 0.1 + (len(series) - 0.5) * bw
            svg.text(x, y_of(used[i]) - 3, percent(used[i] / base), 8, "middle")
    return svg.bytes()


def kinds_svg(labels: list[str], kinds: list[str], mix: np.ndarray) -> bytes:
    """Stacked bars: ``mix`` [V, K] selected tokens per variant and kind (colours per kind
    name, the same in every report)."""
    v = len(labels)
    mix = _amounts(mix).reshape(v, len(kinds)) if len(kinds) else np.zeros((v, 0))
    order = np.argsort(-mix.sum(axis=0), kind="stable").tolist()
    entries = [(kind_colour(kinds[j]), label_text(kinds[j])) for j in order]
    top = max(float(mix.sum(axis=1).max()) if mix.size else 0.0, 1.0)
    title = "Kind mix of the selected tokens per variant"
    svg, y_of, x0, base_y, cw = _bar_chart(labels, title, "selected tokens", top, entries, "kind")
    for i in range(v):
        bottom = 0.0
        for j in order:
            val = mix[i, j]
            if val > 0:
                y_hi, y_lo = y_of(bottom + val), y_of(bottom)
                svg.rect(x0 + i * cw + cw * 0.15, y_hi, cw * 0.7, y_lo - y_hi, kind_colour(kinds[j]))
            bottom += val
    return svg.bytes()


def _x_labels(svg: Svg, shown, x0: float, y: float, cw: float) -> None:
    for i, s in shown:
        x = x0 + (i + 0.5) * cw
        svg.line(x, y, x, y + 4)
        svg.rotated(x, y + 12, s, 9, -45)


def _amounts(a) -> np.ndarray:
    """``a`` as float64 amounts to draw: NaN, infinities and negative values as 0."""
    a = np.asarray(a, dtype=np.float64)
    return np.where(np.isfinite(a) & (a > 0), a, 0.0)


def _geometric(x: np.ndarray) -> bool:
    """Whether the budgets ``x`` (ascending, positive) span more than 8x in steps of about
    one ratio rather than one difference: such a ladder is drawn on a log axis."""
    if x.size < 2 or x[0] <= 0 or x[-1] / x[0] <= 8:
        return False
    if x.size == 2:
        return True
    ratio, step = x[1:] / x[:-1], np.diff(x)
    return bool(ratio.max() / ratio.min() <= step.max() / max(step.min(), 1e-300))


def curve_svg(budgets: list[int], curves: dict[str, list], ylabel: str, title: str, as_percent: bool) -> bytes:
    """Budget-ladder curves: per label (q25, q50, q75) lists over ``budgets``; the median as a
    line with a dot per budget, the quartiles as a band; the ladder's budgets labelled on the x
    axis (a log axis for a geometric ladder spanning more than 8x; a label that would overlap
    the one before is left out)."""
    x = np.array(budgets, dtype=np.float64)
    drawn = []
    for lab, (q25, q50, q75) in curves.items():
        q25, q50, q75 = (np.array(q, dtype=np.float64) for q in (q25, q50, q75))
        if np.isfinite(q50).any():
            drawn.append((label_text(lab), q25, q50, q75))
    finite = [q[np.isfinite(q)] for _, *qs in drawn for q in qs]
    lo = min([float(f.min()) for f in finite if f.size] + [0.0])
    hi = max([float(f.max()) for f in finite if f.size] + [lo + (0.01 if as_percent else 1.0)])
    ticks = nice_ticks(lo, hi)
    fmt = tick_format(ticks, as_percent)
    entries = [(LINES[k % len(LINES)], lab) for k, (lab, *_) in enumerate(drawn)]
    x0 = max(axis_width(ticks, fmt), 50.0)
    y0, pw, ph = 30.0, 560.0, 260.0
    if x.size:
        xs = np.log10(x) if drawn and _geometric(x) else x
        span = float(xs[-1] - xs[0]) or 1.0
        px = x0 + 10 + (pw - 20) * (xs - xs[0]) / span
    else:
        px = x
    tick_text = [human(b) for b in x] if drawn else []
    turn = x.size > 8
    depth = (max([text_width(s, 8) for s in tick_text] + [0.0]) * (0.71 if turn else 0.0)) + 40
    lw, lh = legend_size(entries)
    svg = Svg(max(x0 + pw + lw + 12, text_width(title, 11) + 20), max(y0 + ph + depth, y0 + lh))
    svg.text(10, 16, title, 11)
    y_of = y_axis(svg, x0, y0, pw, ph, ticks, fmt, ylabel)
    last = -math.inf
    for i, s in enumerate(tick_text):
        svg.line(px[i], y0, px[i], y0 + ph, "#eeeeee")
        svg.line(px[i], y0 + ph, px[i], y0 + ph + 4)
        room = 12.0 if turn else text_width(s, 8) + 6
        if px[i] - last < room:  # would overlap the label before
            continue
        last = px[i]
        if turn:
            svg.rotated(px[i], y0 + ph + 12, s, 8, -45)
        else:
            svg.text(px[i], y0 + ph + 14, s, 8, "middle")
    svg.text(x0 + pw / 2, y0 + ph + depth - 8, "budget (max_tokens), one tick per ladder step", 10, "middle")
    if not drawn:  # every cell failed: nothing to scale
        svg.text(x0 + pw / 2, y0 + ph / 2, "every dry run failed: no curve", 11, "middle")
    for k, (_, q25, q50, q75) in enumerate(drawn):
        colour = LINES[k % len(LINES)]
        band = np.isfinite(q25) & np.isfinite(q75)
        for a, b in _runs(band):
            upper = [(px[i], y_of(q75[i])) for i in range(a, b)]
            lower = [(px[i], y_of(q25[i])) for i in range(b - 1, a - 1, -1)]
            svg.add(f'<polygon points="{points(upper + lower)}" fill="{colour}" fill-opacity="0.18"/>')
        ok = np.isfinite(q50)
        for a, b in _runs(ok):
            pts = [(px[i], y_of(q50[i])) for i in range(a, b)]
            svg.add(f'<polyline points="{points(pts)}" fill="none" stroke="{colour}" stroke-width="1.5"/>')
        for i in np.flatnonzero(ok).tolist():
            svg.add(f'<circle cx="{px[i]:.1f}" cy="{y_of(q50[i]):.1f}" r="2.5" fill="{colour}"/>')
    if entries:
        legend(svg, x0 + pw + 12, y0, entries)
    return svg.bytes()


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """The ``[a, b)`` runs of True in ``mask``."""
    edges = np.flatnonzero(np.diff(np.concatenate(([0], mask.astype(np.int8), [0]))))
    return list(zip(edges[::2].tolist(), edges[1::2].tolist()))
