"""SVG charts' drawing primitives: the document, text, axes, ticks and legends every chart of
the package draws with (``report.charts``: the pages' charts; ``tuning.output``: the search's
Pareto plot). Coordinates in px, origin top left. Every user string goes through
:func:`label_text` (cut, control and bidi characters and what XML cannot hold made visible)
and is escaped when written."""

from __future__ import annotations

import html
import math
import re
from collections.abc import Callable

from cupel_np.text import display_text, shorten

#: characters of a label a chart shows (legends and ticks grow with the longest label)
CHART_LABEL_LIMIT = 40
#: the charts' font (the first one the viewer has)
FONT = "DejaVu Sans, Verdana, Arial, Helvetica, sans-serif"


#: code points XML does not allow even escaped (surrogates cannot be written as UTF-8 either)
_NOT_XML = re.compile("[\ud800-\udfff\ufffe\uffff]")


def label_text(s) -> str:
    """A user string as a chart shows it: cut to ``CHART_LABEL_LIMIT`` characters (a 1 MB kind
    made a 7-million-pixel legend), control and bidi characters and what XML cannot hold made
    visible. Not escaped."""
    s = display_text(shorten(str(s), CHART_LABEL_LIMIT))
    return _NOT_XML.sub(lambda m: f"\u27e8U+{ord(m.group()):04X}\u27e9", s)


def text_width(s: str, size: float) -> float:
    """About how wide ``s`` is at font ``size`` (px): an average sans-serif glyph, wide
    characters counted wider. Only places the axes: a label that runs past it is not cut."""
    wide = sum(1 for ch in s if ch.isupper() or ch in "mwMW@%" or ord(ch) > 0x2E80)
    return size * (0.56 * len(s) + 0.2 * wide)


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
    """Round tick values from at or below ``lo`` to the first at or above ``hi`` (steps of 1,
    2, 2.5 or 5 times a power of ten), about ``most`` of them: the axis ends on a tick."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo] if math.isfinite(lo) else [0.0]
    raw = (hi - lo) / max(1, most - 1)
    mag = 10.0 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.floor(lo / step + 1e-9) * step
    ticks = [round(first, 12) + 0.0]
    while ticks[-1] < hi - step * 1e-9:
        ticks.append(round(first + len(ticks) * step, 12) + 0.0)
    return ticks


def tick_format(ticks: list[float], as_percent: bool) -> Callable[[float], str]:
    """The labels of ``ticks``: human units, or percentages with as many decimals as their
    step needs (never two equal labels)."""
    if not as_percent:
        return human
    step = (ticks[1] - ticks[0]) * 100 if len(ticks) > 1 else 1.0
    digits = max(0, -math.floor(math.log10(step) + 1e-9)) if step > 0 else 0
    digits += 1 if step * 10**digits % 1 > 1e-9 else 0  # 2.5, 0.25, ...
    return lambda v: f"{v * 100:.{digits}f}%"


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


def legend(svg: Svg, x: float, y: float, entries: list[tuple[str, str]], title: str | None = None) -> None:
    """A legend of coloured squares and their (already cut) labels, top left at ``(x, y)``."""
    if title:
        svg.text(x, y + 10, title, 10, extra=' font-weight="bold"')
        y += 16
    for colour, s in entries:
        svg.rect(x, y, 10, 10, colour)
        svg.text(x + 15, y + 9, s, 10)
        y += 16


def legend_size(entries: list[tuple[str, str]], title: str | None = None) -> tuple[float, float]:
    """The width and height :func:`legend` takes (none without entries)."""
    if not entries:
        return 0.0, 0.0
    widest = max([text_width(s, 10) + 15 for _, s in entries] + [text_width(title or "", 10)])
    return widest + 20, 16.0 * (len(entries) + bool(title)) + 10


def y_axis(svg: Svg, x0: float, y0: float, pw: float, ph: float, ticks: list[float], fmt, ylabel: str):
    """The y axis from ``ticks[0]`` to ``ticks[-1]`` (grid, labels, title) in the plot box at
    ``(x0, y0)`` sized ``pw`` x ``ph``; returns the value-to-y map."""
    lo, hi = ticks[0], ticks[-1]
    span = (hi - lo) or 1.0

    def y_of(v: float) -> float:
        return y0 + ph - ph * (v - lo) / span

    for t in ticks:
        svg.line(x0, y_of(t), x0 + pw, y_of(t), "#e5e5e5")
        svg.text(x0 - 5, y_of(t) + 3.5, fmt(t), 9, "end")
    svg.line(x0, y0, x0, y0 + ph)
    svg.line(x0, y0 + ph, x0 + pw, y0 + ph)
    svg.rotated(14, y0 + ph / 2, ylabel, 10, -90, "middle")
    return y_of


def axis_width(ticks: list[float], fmt) -> float:
    return max(text_width(fmt(t), 9) for t in ticks) + 30


def points(pts) -> str:
    return " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)
