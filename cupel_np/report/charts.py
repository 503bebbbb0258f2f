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

import html
import math
import zlib
from collections.abc import Callable, Sequence

import numpy as np

from cupel_np.text import display_text

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

#: characters of a label a chart shows (legends and ticks grow with the longest label)
CHART_LABEL_LIMIT = 40

#: charts are as wide as this many variants at most (``VARIANT_PX`` each); past it, every
#: k-th variant is labelled and the per-bar percentages are left out, so a chart's size stays
#: bounded however many variants
MAX_WIDE = 60
#: the width of one variant's column
VARIANT_PX = 64
#: a heatmap row's height
ROW_PX = 18
FONT = "DejaVu Sans, Verdana, Arial, Helvetica, sans-serif"


def label_text(s) -> str:
    """A user string as a chart shows it: cut to ``CHART_LABEL_LIMIT`` characters (a 1 MB kind
    made a 7-million-pixel legend), control and bidi characters made visible. Not escaped."""
    s = str(s)
    if len(s) > CHART_LABEL_LIMIT:
        s = s[: CHART_LABEL_LIMIT - 1] + "…"
    return display_text(s)


def text_width(s: str, size: float) -> float:
    """About how wide ``s`` is at font ``size`` (px): an average sans-serif glyph, wide
    characters counted wider. Only places the axes: a label that runs past it is not cut."""
    wide = sum(1 for ch in s if ch.isupper() or ch in "mwMW@%" or ord(ch) > 0x2E80)
    return size * (0.56 * len(s) + 0.2 * wide)


#: the spec's kinds get fixed, distinct colours; any other kind a stable hash of its name
KNOWN_KINDS = ("message", "document", "tooloutput", "memory", "systemprompt", "toolcall")


def kind_colour(kind: str) -> str:
    """The colour of a kind, the same in every report: fixed for the spec's kinds, else a
    stable hash of the ASCII-folded name into the rest of the palette."""
    k = str(kind).lower()
    if k in KNOWN_KINDS:
        return PALETTE[KNOWN_KINDS.index(k)]
    rest = PALETTE[len(KNOWN_KINDS) :]
    return rest[zlib.crc32(k.encode("utf-8")) % len(rest)]


def human(v: float) -> str:
    """1500000 -> '1.5M', 20000 -> '20k', 950 -> '950'."""
    a = abs(v)
    for div, suf in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if a >= div:
            return f"{v / div:.2f}".rstrip("0").rstrip(".") + suf
    return f"{v:.0f}" if float(v).is_integer() else f"{v:.2g}"


def percent(v: float) -> str:
    """0.25 -> '25%'."""
    return f"{v:.0%}"


def nice_ticks(lo: float, hi: float, most: int = 6) -> list[float]:
    """Round tick values covering ``[lo, hi]`` (steps of 1, 2, 2.5 or 5 times a power of ten),
    at most about ``most`` of them."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo] if math.isfinite(lo) else [0.0]
    raw = (hi - lo) / max(1, most - 1)
    mag = 10.0 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.floor(lo / step + 1e-9) * step
    ticks = []
    k = 0
    while True:
        t = first + k * step
        if t > hi + step * 1e-9:
            break
        ticks.append(round(t, 12) + 0.0)
        k += 1
    return ticks


class Svg:
    """An SVG document built element by element (coordinates in px, origin top left)."""

    def __init__(self, width: float, height: float):
        self.width, self.height = math.ceil(width), math.ceil(height)
        self.parts: list[str] = []

    def add(self, element: str) -> None:
        self.parts.append(element)

    def rect(self, x, y, w, h, fill: str, extra: str = "") -> None:
        self.add(f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" fill="{fill}"{extra}/>')

    def line(self, x1, y1, x2, y2, stroke: str = "#333", extra: str = "") -> None:
        self.add(f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{stroke}"{extra}/>')

    def text(self, x, y, s: str, size: float = 10, anchor: str = "start", extra: str = "") -> None:
        """``s`` (shown as is, escaped here) at ``(x, y)``, its baseline at ``y``."""
        self.add(
            f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size:g}" text-anchor="{anchor}"{extra}>'
            f"{html.escape(s, quote=False)}</text>"
        )

    def rotated(self, x, y, s: str, size: float, angle: float, anchor: str = "end") -> None:
        """``s`` turned by ``angle`` degrees about its anchor point ``(x, y)``."""
        self.text(x, y, s, size, anchor, f' transform="rotate({angle:g} {x:.1f} {y:.1f})"')

    def bytes(self) -> bytes:
        head = (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.width}" height="{self.height}" '
            f'viewBox="0 0 {self.width} {self.height}" font-family="{FONT}">'
            f'<rect width="100%" height="100%" fill="#ffffff"/>'
        )
        return (head + "".join(self.parts) + "</svg>").encode("utf-8")


def _plot_width(v: int) -> float:
    """A chart's plot width for ``v`` variants (capped at ``MAX_WIDE`` of them)."""
    return max(6, VARIANT_PX * min(max(v, 1), MAX_WIDE) * 1.0)


def _variant_labels(labels: Sequence[str]) -> list[tuple[int, str]]:
    """The variants labelled on an axis and their text: every k-th past ``MAX_WIDE``."""
    step = -(-len(labels) // MAX_WIDE) if labels else 1
    return [(i, label_text(labels[i])) for i in range(0, len(labels), step)]


def _labels_depth(shown: list[tuple[int, str]], size: float) -> float:
    """The height the variant labels, turned 45 degrees, take below the axis."""
    longest = max((text_width(s, size) for _, s in shown), default=0.0)
    return longest * 0.71 + size + 6


def _legend(svg: Svg, x: float, y: float, entries: list[tuple[str, str]], title: str | None = None) -> None:
    """A legend of coloured squares and their (already cut) labels, top left at ``(x, y)``."""
    if title:
        svg.text(x, y + 10, title, 10, extra=' font-weight="bold"')
        y += 16
    for colour, s in entries:
        svg.rect(x, y, 10, 10, colour)
        svg.text(x + 15, y + 9, s, 10)
        y += 16


def _legend_width(entries: list[tuple[str, str]], title: str | None = None) -> float:
    widest = max([text_width(s, 10) + 15 for _, s in entries] + [text_width(title or "", 10)])
    return widest + 20


def _bar_frame(
    svg: Svg, x0: float, y0: float, pw: float, ph: float, top: float, ylabel: str, fmt=human
) -> tuple[float, Callable]:
    """The y axis of a bar chart from 0 to ``top`` (ticks, grid, label) in the plot box at
    ``(x0, y0)`` sized ``pw`` x ``ph``; returns the scale's top and the value-to-y map."""
    top *= 1.06  # room for the labels over the tallest bar
    ticks = nice_ticks(0.0, top)
    top = max(top, ticks[-1]) or 1.0

    def y_of(v: float) -> float:
        return y0 + ph - ph * v / top

    for t in ticks:
        y = y_of(t)
        svg.line(x0, y, x0 + pw, y, "#e5e5e5")
        svg.text(x0 - 5, y + 3.5, fmt(t), 9, "end")
    svg.line(x0, y0, x0, y0 + ph)
    svg.line(x0, y0 + ph, x0 + pw, y0 + ph)
    svg.rotated(14, y0 + ph / 2, ylabel, 10, -90, "middle")
    return top, y_of


def _y_axis_width(top: float, fmt=human) -> float:
    return max(text_width(fmt(t), 9) for t in nice_ticks(0.0, top)) + 30


def heatmap_svg(status: np.ndarray, row_labels: list[str], labels: list[str]) -> bytes:
    """Swinging items x variants: ``status`` [rows, V] 1 included, 0 excluded, NaN failed."""
    v = len(labels)
    n = len(row_labels)
    shown = _variant_labels(labels)
    rows = [label_text(r) for r in row_labels]
    left = max([text_width(r, 10) for r in rows] + [40.0]) + 12
    pw = _plot_width(v)
    x0, y0 = left, 30.0
    title = "Most contested swinging items (green = included, red = excluded, grey = variant failed)"
    if not n:
        svg = Svg(max(pw + x0 + 20, text_width(title, 11) + 20), 120)
        svg.text(10, 16, title, 11)
        svg.text(x0 + pw / 2, 70, "no item swings between these variants", 11, "middle")
        return svg.bytes()
    ph = ROW_PX * n
    svg = Svg(max(x0 + pw + 20, text_width(title, 11) + 20), y0 + ph + _labels_depth(shown, 9))
    svg.text(10, 16, title, 11)
    cw = pw / max(v, 1)
    cell = np.where(np.isnan(status), 2, status == 1).astype(np.int8)
    colours = (OUT, IN, FAILED)
    for i in range(n):
        y = y0 + i * ROW_PX
        svg.text(x0 - 6, y + ROW_PX / 2 + 3.5, rows[i], 10, "end")
        row = cell[i]
        # one rectangle a run of equal cells: bounded by the changes, not by the variants
        cuts = np.flatnonzero(np.diff(row)) + 1
        starts = [0, *cuts.tolist()]
        ends = [*cuts.tolist(), v]
        for a, b in zip(starts, ends):
            if b > a:
                svg.rect(x0 + a * cw, y, (b - a) * cw, ROW_PX, colours[row[a]])
    for i in range(n + 1):  # the rows' borders
        svg.line(x0, y0 + i * ROW_PX, x0 + pw, y0 + i * ROW_PX, "#ffffff", ' stroke-width="0.6"')
    for i, s in shown:
        x = x0 + (i + 0.5) * cw
        svg.line(x, y0 + ph, x, y0 + ph + 4)
        svg.rotated(x, y0 + ph + 12, s, 9, -45)
    return svg.bytes()


def _bars_layout(labels, legend_entries, legend_title, top, fmt=human):
    shown = _variant_labels(labels)
    x0 = _y_axis_width(top, fmt)
    pw = _plot_width(len(labels))
    y0, ph = 30.0, 240.0
    lw = _legend_width(legend_entries, legend_title)
    return shown, x0, y0, pw, ph, lw


def tokens_svg(labels: list[str], used: np.ndarray, target: np.ndarray, could: np.ndarray | None = None) -> bytes:
    """Per variant: tokens used against the target, and (``could``) against what the sets
    could use at most (their tokens, capped at the target, summed)."""
    used, target = _finite(used), _finite(target)
    could = _finite(could) if could is not None else None
    series = [("#cccccc", "target tokens (sets that ran)", target)]
    if could is not None:
        series.append(("#9ecae1", "usable: min(set tokens, target)", could))
    series.append(("#337ab7", "tokens used", used))
    top = max([float(s.max()) if s.size else 0.0 for _, _, s in series] + [1.0])
    entries = [(c, s) for c, s, _ in series]
    shown, x0, y0, pw, ph, lw = _bars_layout(labels, entries, None, top)
    title = "Tokens used vs budget per variant (% of what the sets could use)"
    svg = Svg(max(x0 + pw + lw + 10, text_width(title, 11) + 20), y0 + ph + _labels_depth(shown, 9))
    svg.text(10, 16, title, 11)
    top, y_of = _bar_frame(svg, x0, y0, pw, ph, top, "tokens (all sets)")
    v = len(labels)
    cw = pw / max(v, 1)
    bw = cw * 0.8 / len(series)
    for k, (colour, _, vals) in enumerate(series):
        for i in range(v):
            h = y0 + ph - y_of(vals[i])
            svg.rect(x0 + i * cw + cw * 0.1 + k * bw, y0 + ph - h, bw, h, colour)
    for i in range(v if v <= MAX_WIDE else 0):
        base = could[i] if could is not None and could[i] else target[i]
        if base:
            x = x0 + i * cw + cw * 0.1 + (len(series) - 0.5) * bw
            svg.text(x, y_of(used[i]) - 3, percent(used[i] / base), 8, "middle")
    _x_labels(svg, shown, x0, y0 + ph, cw)
    _legend(svg, x0 + pw + 12, y0, entries)
    return svg.bytes()


def kinds_svg(labels: list[str], kinds: list[str], mix: np.ndarray) -> bytes:
    """Stacked bars: ``mix`` [V, K] selected tokens per variant and kind (colours per kind
    name, the same in every report)."""
    v = len(labels)
    mix = _finite(np.asarray(mix, dtype=np.float64).reshape(v, len(kinds)))
    order = np.argsort(-mix.sum(axis=0), kind="stable") if len(kinds) else np.zeros(0, np.intp)
    entries = [(kind_colour(kinds[j]), label_text(kinds[j])) for j in order]
    top = max(float(mix.sum(axis=1).max()) if v and len(kinds) else 0.0, 1.0)
    shown, x0, y0, pw, ph, lw = _bars_layout(labels, entries or [("#ffffff", "")], "kind", top)
    title = "Kind mix of the selected tokens per variant"
    svg = Svg(max(x0 + pw + lw + 10, text_width(title, 11) + 20), y0 + ph + _labels_depth(shown, 9))
    svg.text(10, 16, title, 11)
    top, y_of = _bar_frame(svg, x0, y0, pw, ph, top, "selected tokens")
    cw = pw / max(v, 1)
    for i in range(v):
        bottom = 0.0
        for j in order:
            val = mix[i, j]
            if val > 0:
                y_hi, y_lo = y_of(bottom + val), y_of(bottom)
                svg.rect(x0 + i * cw + cw * 0.15, y_hi, cw * 0.7, y_lo - y_hi, kind_colour(kinds[j]))
            bottom += val
    _x_labels(svg, shown, x0, y0 + ph, cw)
    if entries:
        _legend(svg, x0 + pw + 12, y0, entries, "kind")
    return svg.bytes()


def _x_labels(svg: Svg, shown, x0: float, y: float, cw: float) -> None:
    for i, s in shown:
        x = x0 + (i + 0.5) * cw
        svg.line(x, y, x, y + 4)
        svg.rotated(x, y + 12, s, 9, -45)


def _finite(a) -> np.ndarray:
    """``a`` as float64 with every NaN or infinity drawn as 0."""
    a = np.asarray(a, dtype=np.float64)
    return np.where(np.isfinite(a), a, 0.0)


def curve_svg(budgets: list[int], curves: dict[str, list], ylabel: str, title: str, as_percent: bool) -> bytes:
    """Budget-ladder curves: per label (q25, q50, q75) lists over ``budgets``; the median as a
    line with a dot per budget, the quartiles as a band; every ladder budget labelled on the x
    axis (a log axis when the ladder spans more than 8x)."""
    fmt = percent if as_percent else human
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
    lo, hi = min(lo, ticks[0]), max(hi, ticks[-1])
    entries = [(LINES[k % len(LINES)], lab) for k, (lab, *_) in enumerate(drawn)]
    x0 = max([text_width(fmt(t), 9) for t in ticks] + [20.0]) + 30
    y0, pw, ph = 30.0, 560.0, 260.0
    log = bool(drawn) and x.size > 0 and x[0] > 0 and x[-1] / x[0] > 8
    if x.size:
        xs = np.log10(x) if log else x
        span = float(xs[-1] - xs[0]) or 1.0
        px = x0 + 10 + (pw - 20) * (xs - xs[0]) / span
    else:
        px = x
    tick_text = [human(b) for b in x] if drawn else []
    turn = x.size > 8
    depth = (max([text_width(s, 8) for s in tick_text] + [0.0]) * (0.71 if turn else 0.0)) + 40
    lw = _legend_width(entries) if entries else 0.0
    svg = Svg(max(x0 + pw + lw + 10, text_width(title, 11) + 20), y0 + ph + depth)
    svg.text(10, 16, title, 11)

    def y_of(v):
        return y0 + ph - ph * (v - lo) / ((hi - lo) or 1.0)

    for t in ticks:
        svg.line(x0, y_of(t), x0 + pw, y_of(t), "#e5e5e5")
        svg.text(x0 - 5, y_of(t) + 3.5, fmt(t), 9, "end")
    for i, s in enumerate(tick_text):
        svg.line(px[i], y0, px[i], y0 + ph, "#eeeeee")
        svg.line(px[i], y0 + ph, px[i], y0 + ph + 4)
        if turn:
            svg.rotated(px[i], y0 + ph + 12, s, 8, -45)
        else:
            svg.text(px[i], y0 + ph + 14, s, 8, "middle")
    svg.line(x0, y0, x0, y0 + ph)
    svg.line(x0, y0 + ph, x0 + pw, y0 + ph)
    svg.rotated(14, y0 + ph / 2, ylabel, 10, -90, "middle")
    svg.text(x0 + pw / 2, y0 + ph + depth - 8, "budget (max_tokens), one tick per ladder step", 10, "middle")
    if not drawn:  # every cell failed: nothing to scale
        svg.text(x0 + pw / 2, y0 + ph / 2, "every dry run failed: no curve", 11, "middle")
    for k, (_, q25, q50, q75) in enumerate(drawn):
        colour = LINES[k % len(LINES)]
        band = np.isfinite(q25) & np.isfinite(q75)
        for a, b in _runs(band):
            pts = [(px[i], y_of(q75[i])) for i in range(a, b)] + [
                (px[i], y_of(q25[i])) for i in range(b - 1, a - 1, -1)
            ]
            svg.add(f'<polygon points="{_points(pts)}" fill="{colour}" fill-opacity="0.18"/>')
        ok = np.isfinite(q50)
        for a, b in _runs(ok):
            pts = [(px[i], y_of(q50[i])) for i in range(a, b)]
            svg.add(f'<polyline points="{_points(pts)}" fill="none" stroke="{colour}" stroke-width="1.5"/>')
        for i in np.flatnonzero(ok).tolist():
            svg.add(f'<circle cx="{px[i]:.1f}" cy="{y_of(q50[i]):.1f}" r="2.5" fill="{colour}"/>')
    if entries:
        _legend(svg, x0 + pw + 12, y0, entries)
    return svg.bytes()


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """The ``[a, b)`` runs of True in ``mask``."""
    edges = np.flatnonzero(np.diff(np.concatenate(([0], mask.astype(np.int8), [0]))))
    return list(zip(edges[::2].tolist(), edges[1::2].tolist()))


def _points(pts) -> str:
    return " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)


#: the functions a chart job may name (``draw_all``): each returns its chart's SVG bytes
CHART_FUNCTIONS = ("heatmap_svg", "tokens_svg", "kinds_svg", "curve_svg")

#: a chart job: the file name, the name of a function of ``CHART_FUNCTIONS``, its arguments
ChartJob = tuple[str, str, tuple]


def draw(function: str, args: tuple) -> bytes:
    """The SVG bytes of the chart function named ``function`` (one of ``CHART_FUNCTIONS``) on
    ``args``."""
    if function not in CHART_FUNCTIONS:
        raise ValueError(f"no chart function {function!r}")
    return globals()[function](*args)


def draw_all(jobs: Sequence[ChartJob]) -> dict[str, bytes]:
    """Every job's chart, by its file name."""
    return {name: draw(function, args) for name, function, args in jobs}
