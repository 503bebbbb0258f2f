"""Every chart of every page (PNG bytes), drawn from plain arrays so the page built from an
in-memory result and the page built from written outputs draw the same pictures.

Conventions: one colour per kind, the same in every report (a fixed palette indexed by a
stable hash of the case-folded kind name); axis labels in human units (1.5M, 20k, never a
``1e6`` offset); the budget ladder's budgets labelled on its axis.
"""

from __future__ import annotations

import io
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

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


def plt():
    """matplotlib.pyplot on the headless Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as pyplot

    return pyplot


#: the charts' resolution (every figure is made at it, so its text is measured once)
DPI = 110


def figure(figsize: tuple[float, float]):
    """A new figure and its axes at ``DPI``."""
    return plt().subplots(figsize=figsize, dpi=DPI)


def png(fig) -> bytes:
    """The figure as PNG bytes, cropped to what it draws plus ``savefig.pad_inches`` (as
    ``bbox_inches="tight"``), with one draw: the crop is measured from the text's extents
    without the layout-only draw pass "tight" makes first (a second draw of every artist,
    about a third of a chart's CPU). The figure is closed."""
    import matplotlib

    pad = matplotlib.rcParams["savefig.pad_inches"]
    box = fig.get_tightbbox(fig.canvas.get_renderer()).padded(pad)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches=box)
    plt().close(fig)
    return buf.getvalue()


#: characters of a label a chart shows (legends and ticks grow with the longest label)
CHART_LABEL_LIMIT = 40


def mpl_text(s: str) -> str:
    """Text for matplotlib: cut to ``CHART_LABEL_LIMIT`` characters (a 1 MB kind made a
    7-million-pixel legend), control and bidi characters made visible, and '$' escaped (it
    would start mathtext, and can make it raise)."""
    s = str(s)
    if len(s) > CHART_LABEL_LIMIT:
        s = s[: CHART_LABEL_LIMIT - 1] + "…"
    return display_text(s).replace("$", r"\$")


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


def _human_axis(axis) -> None:
    axis.set_major_formatter(plt().FuncFormatter(lambda v, _: human(v)))


#: charts are as wide as this many variants at most (0.9 inch each); past it, every k-th variant
#: is labelled and the per-bar percentages are left out, so a chart's pixels (and the memory to
#: draw it: 2.5 GiB for 600 variants before the cap) stay bounded however many variants
MAX_WIDE = 60


def _width(v: int, extra: float) -> float:
    """A chart's width in inches for ``v`` variants (capped at ``MAX_WIDE`` of them)."""
    return max(6, 0.9 * min(v, MAX_WIDE) + extra)


def _variant_axis(ax, labels: list[str]) -> None:
    step = -(-len(labels) // MAX_WIDE)
    at = range(0, len(labels), step)
    ax.set_xticks(list(at), [mpl_text(labels[i]) for i in at], rotation=45, ha="right", fontsize=8)


def heatmap_png(status: np.ndarray, row_labels: list[str], labels: list[str]) -> bytes:
    """Swinging items x variants: ``status`` [rows, V] 1 included, 0 excluded, NaN failed."""
    from matplotlib.colors import ListedColormap

    v = len(labels)
    n = len(row_labels)
    fig, ax = figure((_width(v, 5), max(2.5, 0.28 * n + 1.5)))
    if n:
        # one filled quad a cell (a mesh of rows x variants), the first row at the top, each
        # cell centred on its tick: an image would be resampled to the axes' every pixel
        # (a 2-megapixel image made, mapped and scaled: ~0.06 of the demo heatmap's ~0.36 s of CPU)
        cell = np.where(np.isnan(status), 2, status == 1).astype(np.intp)
        edges_x, edges_y = np.arange(v + 1) - 0.5, np.arange(n + 1) - 0.5
        ax.pcolormesh(edges_x, edges_y, cell, cmap=ListedColormap([OUT, IN, FAILED]), vmin=-0.5, vmax=2.5)
        ax.set_xlim(-0.5, v - 0.5)
        ax.set_ylim(n - 0.5, -0.5)
        ax.set_yticks(range(n), [mpl_text(r) for r in row_labels], fontsize=7)
    else:
        ax.text(0.5, 0.5, "no item swings between these variants", ha="center", va="center", transform=ax.transAxes)
        ax.set_yticks([])
    _variant_axis(ax, labels)
    ax.set_title("Most contested swinging items (green = included, red = excluded, grey = variant failed)", fontsize=9)
    return png(fig)


def tokens_png(labels: list[str], used: np.ndarray, target: np.ndarray, could: np.ndarray | None = None) -> bytes:
    """Per variant: tokens used against the target, and (``could``) against what the sets
    could use at most (their tokens, capped at the target, summed)."""
    fig, ax = figure((_width(len(labels), 3), 3.6))
    x = np.arange(len(labels))
    w = 0.27 if could is not None else 0.4
    ax.bar(x - w, target, width=w, label="target tokens (sets that ran)", color="#cccccc")
    if could is not None:
        ax.bar(x, could, width=w, label="usable: min(set tokens, target)", color="#9ecae1")
    ax.bar(x + (w if could is not None else 0), used, width=w, label="tokens used", color="#337ab7")
    for i in range(len(labels) if len(labels) <= MAX_WIDE else 0):
        base = could[i] if could is not None and could[i] else target[i]
        if base:
            ax.text(
                x[i] + (w if could is not None else 0),
                used[i],
                f"{used[i] / base:.0%}",
                ha="center",
                va="bottom",
                fontsize=7,
            )
    _variant_axis(ax, labels)
    _human_axis(ax.yaxis)
    ax.set_ylabel("tokens (all sets)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_title("Tokens used vs budget per variant (% of what the sets could use)", fontsize=9)
    return png(fig)


def kinds_png(labels: list[str], kinds: list[str], mix: np.ndarray) -> bytes:
    """Stacked bars: ``mix`` [V, K] selected tokens per variant and kind (colours per kind
    name, the same in every report)."""
    fig, ax = figure((_width(len(labels), 3), 3.6))
    bottom = np.zeros(len(labels))
    x = np.arange(len(labels))
    for j in np.argsort(-mix.sum(axis=0), kind="stable") if len(kinds) else []:
        ax.bar(x, mix[:, j], bottom=bottom, label=mpl_text(kinds[j]), color=kind_colour(kinds[j]))
        bottom += mix[:, j]
    _variant_axis(ax, labels)
    _human_axis(ax.yaxis)
    ax.set_ylabel("selected tokens")
    if len(kinds):
        ax.legend(fontsize=7, title="kind", title_fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_title("Kind mix of the selected tokens per variant", fontsize=9)
    return png(fig)


def curve_png(budgets: list[int], curves: dict[str, list], ylabel: str, title: str, percent: bool) -> bytes:
    """Budget-ladder curves: per label (q25, q50, q75) lists over ``budgets``; the median as a
    line, the quartiles as a band; every ladder budget labelled on the x axis."""
    p = plt()
    fig, ax = figure((8, 4))
    x = np.array(budgets, dtype=np.float64)
    drawn = False
    for lab, (q25, q50, q75) in curves.items():
        q25, q50, q75 = (np.array(q, dtype=np.float64) for q in (q25, q50, q75))
        if not np.isfinite(q50).any():
            continue
        drawn = True
        (line,) = ax.plot(x, q50, marker="o", markersize=3, label=mpl_text(lab))
        ax.fill_between(x, q25, q75, color=line.get_color(), alpha=0.18, linewidth=0)
    if not drawn:  # every cell failed: nothing to scale (a log axis of no data raises)
        ax.text(0.5, 0.5, "every dry run failed: no curve", ha="center", va="center", transform=ax.transAxes)
    elif x.size and x[0] > 0 and x[-1] / x[0] > 8:
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(p.NullFormatter())
    if drawn and x.size:
        ax.set_xticks(x, [human(b) for b in x], rotation=45 if x.size > 8 else 0, fontsize=7)
    ax.set_xlabel("budget (max_tokens), one tick per ladder step")
    ax.set_ylabel(ylabel)
    if percent:
        ax.yaxis.set_major_formatter(p.FuncFormatter(lambda v, _: f"{v:.0%}"))
    else:
        _human_axis(ax.yaxis)
    ax.grid(alpha=0.3)
    if drawn:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_title(title, fontsize=9)
    return png(fig)


#: the functions a chart job may name (``draw_all``): each returns its chart's PNG bytes
CHART_FUNCTIONS = ("heatmap_png", "tokens_png", "kinds_png", "curve_png")

#: a chart job: the file name, the name of a function of ``CHART_FUNCTIONS``, its arguments
ChartJob = tuple[str, str, tuple]

_drawer: Callable[[Sequence[ChartJob]], dict[str, bytes]] | None = None


def draw(function: str, args: tuple) -> bytes:
    """The PNG bytes of the chart function named ``function`` (one of ``CHART_FUNCTIONS``) on
    ``args``."""
    if function not in CHART_FUNCTIONS:
        raise ValueError(f"no chart function {function!r}")
    return globals()[function](*args)


def draw_all(jobs: Sequence[ChartJob]) -> dict[str, bytes]:
    """Every job's chart, by its file name: one after the other here, or by the drawer
    :func:`drawn_by` installed (a cold ``cupel-np demo`` draws some in its compile child,
    idle by then: ``cupel_np.cli.coldstart``), which returns the same bytes."""
    if _drawer is not None:
        return _drawer(jobs)
    return {name: draw(function, args) for name, function, args in jobs}


@contextmanager
def drawn_by(drawer: Callable[[Sequence[ChartJob]], dict[str, bytes]] | None) -> Iterator[None]:
    """Within the block, :func:`draw_all` hands its jobs to ``drawer`` (``None``: draws them
    here)."""
    global _drawer
    before, _drawer = _drawer, drawer
    try:
        yield
    finally:
        _drawer = before
