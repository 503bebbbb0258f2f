"""The charts are SVG documents (``report.charts``): well formed, the heatmap's cells in their
status colours (rectangles, or one image's pixels past ``MAX_WIDE`` variants), user strings
escaped and cut, legends and labels inside the chart, axes ending on a tick, the budget curves
on a log axis for a geometric ladder spanning more than 8x."""

from __future__ import annotations

import base64
import struct
import xml.etree.ElementTree as ET
import zlib
from collections import Counter

import numpy as np
import pytest

from cupel_np import _svg as prim
from cupel_np.report import charts

NS = "{http://www.w3.org/2000/svg}"


def _svg(data: bytes) -> ET.Element:
    root = ET.fromstring(data.decode("utf-8"))
    assert root.tag == NS + "svg"
    return root


def _texts(root: ET.Element) -> list[str]:
    return [t.text or "" for t in root.iter(NS + "text")]


def test_heatmap_cells_have_their_status_colours():
    status = np.array([[1.0, 0.0, np.nan, 1.0], [1.0, 1.0, 1.0, 0.0]])
    root = _svg(charts.heatmap_svg(status, ["row a", "row b"], ["v0", "v1", "v2", "v3"]))
    area: Counter = Counter()
    for r in root.iter(NS + "rect"):
        if r.get("fill") in (charts.IN, charts.OUT, charts.FAILED):
            area[r.get("fill")] += float(r.get("width")) * float(r.get("height"))
    # five cells included, two excluded, one failed: the areas in that ratio
    assert area[charts.IN] == pytest.approx(5 * area[charts.FAILED])
    assert area[charts.OUT] == pytest.approx(2 * area[charts.FAILED]) and area[charts.FAILED] > 0
    assert {"row a", "row b", "v0", "v1", "v2"} <= set(_texts(root))


def test_a_run_of_equal_cells_is_one_rectangle():
    """A row is drawn as its runs of equal status."""
    status = np.zeros((2, charts.MAX_WIDE))
    status[1, 20:] = 1.0
    root = _svg(charts.heatmap_svg(status, ["flat", "one change"], [f"v{i}" for i in range(charts.MAX_WIDE)]))
    cells = [r for r in root.iter(NS + "rect") if r.get("fill") in (charts.IN, charts.OUT)]
    assert len(cells) == 3


def _png_pixels(data: bytes) -> np.ndarray:
    """An RGB PNG (filter 0 on every row, as ``charts._png`` writes) as rows x columns x 3."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    w, h = struct.unpack(">II", data[16:24])
    at, idat = 8, b""
    while at < len(data):
        (size,) = struct.unpack(">I", data[at : at + 4])
        if data[at + 4 : at + 8] == b"IDAT":
            idat += data[at + 8 : at + 8 + size]
        at += size + 12
    raw = np.frombuffer(zlib.decompress(idat), dtype=np.uint8).reshape(h, 1 + 3 * w)
    assert (raw[:, 0] == 0).all()
    return raw[:, 1:].reshape(h, w, 3)


def test_past_max_wide_the_cells_are_pixels_of_one_image():
    """Past ``MAX_WIDE`` variants every cell is one pixel of an image scaled to the plot: the
    chart's size no longer grows with how often a row changes."""
    v = 5000
    status = np.zeros((3, v))
    status[0, ::2] = 1.0  # a change at every cell
    status[2, 7] = np.nan
    svg = charts.heatmap_svg(status, ["a", "b", "c"], [f"v{i}" for i in range(v)])
    assert len(svg) < 60_000  # (rectangles: 2,500 for the first row alone)
    (img,) = _svg(svg).iter(NS + "image")
    px = _png_pixels(base64.b64decode(img.get("href").split(",", 1)[1]))
    assert px.shape == (3, v, 3)
    colour = {charts.IN: (1.0, 0), charts.OUT: (0.0, 0)}
    for c, (val, row) in colour.items():
        want = np.array([int(c[k : k + 2], 16) for k in (1, 3, 5)])
        assert ((px[row] == want).all(axis=1) == (status[row] == val)).all()
    assert (px[2, 7] == [int(charts.FAILED[k : k + 2], 16) for k in (1, 3, 5)]).all()
    assert not [r for r in _svg(svg).iter(NS + "rect") if r.get("fill") in (charts.IN, charts.OUT)]


def test_user_strings_are_escaped_and_cut():
    hostile = "<script>alert(1)</script> & \u202e" + "K" * 500
    svg = charts.kinds_svg(["a&b", "<v>"], [hostile, "message"], np.array([[3.0, 1.0], [4.0, 2.0]]))
    root = _svg(svg)  # parses: every string escaped
    assert b"<script>" not in svg and "\u202e" not in svg.decode("utf-8")
    texts = _texts(root)
    assert "a&b" in texts and "<v>" in texts
    shown = [t for t in texts if t.startswith("<script>")]
    assert len(shown) == 1 and shown[0].endswith("…") and "⟨U+202E⟩" in shown[0]
    # cut to the limit, then the bidi control made visible
    assert len(shown[0].replace("⟨U+202E⟩", "\u202e")) == prim.CHART_LABEL_LIMIT
    # what XML cannot hold, even escaped, is made visible too (the chart stays well formed)
    odd = charts.kinds_svg(["v"], ["a\ufffeb\ud800c"], np.array([[1.0]]))
    assert "a⟨U+FFFE⟩b⟨U+D800⟩c" in _texts(_svg(odd))


def test_charts_of_no_data_say_so():
    assert "no item swings between these variants" in _texts(_svg(charts.heatmap_svg(np.zeros((0, 2)), [], ["a", "b"])))
    empty = {"v": ([np.nan] * 3, [np.nan] * 3, [np.nan] * 3)}
    assert "every dry run failed: no curve" in _texts(_svg(charts.curve_svg([100, 200, 400], empty, "y", "t", True)))
    _svg(charts.kinds_svg(["a"], [], np.zeros((1, 0))))
    _svg(charts.tokens_svg([], np.zeros(0), np.zeros(0), None))


def test_curves_use_a_log_axis_past_8x_and_break_at_failed_cells():
    curves = {"a": ([0.1, 0.2, np.nan, 0.5], [0.2, 0.3, np.nan, 0.6], [0.3, 0.4, np.nan, 0.7])}
    wide = _svg(charts.curve_svg([100, 1000, 10_000, 100_000], curves, "util", "t", True))
    xs = [float(c.get("cx")) for c in wide.iter(NS + "circle")]
    assert len(xs) == 3  # the failed budget has no dot
    lines = list(wide.iter(NS + "polyline"))
    assert len(lines) == 2  # the line breaks where the cell failed
    # a log axis: equal ratios are equal steps (100 -> 1,000 -> 10,000 -> 100,000)
    assert xs[1] - xs[0] == pytest.approx((xs[2] - xs[1]) / 2, rel=1e-3)
    assert {"100", "1k", "100k"} <= set(_texts(wide)) and "60%" in _texts(wide)
    narrow = _svg(charts.curve_svg([100, 200, 400], {"a": ([1, 2, 3], [2, 3, 4], [3, 4, 5])}, "n", "t", False))
    xs = [float(c.get("cx")) for c in narrow.iter(NS + "circle")]
    assert xs[1] - xs[0] == pytest.approx((xs[2] - xs[1]) / 2, rel=1e-3)  # linear: 100 then 200 apart


def test_nice_ticks_are_round_and_end_at_or_above_the_data():
    assert prim.nice_ticks(0, 1_800_000) == [0, 500_000, 1_000_000, 1_500_000, 2_000_000]
    assert prim.nice_ticks(0, 0.93) == pytest.approx([0, 0.2, 0.4, 0.6, 0.8, 1.0])
    assert prim.nice_ticks(0, 8) == [0, 2, 4, 6, 8]
    assert prim.nice_ticks(5, 5) == [5]
    # percentages with as many decimals as the step needs: never two equal labels
    for hi in (0.012, 0.03, 0.93, 0.0004):
        ticks = prim.nice_ticks(0, hi)
        text = [prim.tick_format(ticks, True)(t) for t in ticks]
        assert len(set(text)) == len(text), text
    assert [prim.tick_format([0, 0.0025], True)(t) for t in (0, 0.0025)] == ["0.00%", "0.25%"]


def test_legends_and_turned_labels_stay_inside_the_chart():
    kinds = [f"kind number {k:02d}" for k in range(24)]
    root = _svg(charts.kinds_svg(["a", "b"], kinds, np.ones((2, 24))))
    bottom = max(float(t.get("y")) for t in root.iter(NS + "text") if (t.text or "").startswith("kind number"))
    assert bottom < float(root.get("height"))  # every legend entry drawn inside
    long = [f"policies/very_long_policy_file_name_{i:02d}.toml|8000/6000" for i in range(3)]
    for svg in (
        charts.tokens_svg(long, np.ones(3), np.ones(3) * 2, None),
        charts.kinds_svg(long, ["message"], np.ones((3, 1))),
        charts.heatmap_svg(np.ones((1, 3)), ["r"], long),
    ):
        first = next(
            t for t in _svg(svg).iter(NS + "text") if t.get("transform") and t.text == prim.label_text(long[0])
        )
        assert float(first.get("x")) - 0.71 * prim.text_width(first.text, 9) >= 0  # its start is not cut


def test_a_linear_ladder_is_drawn_on_a_linear_axis():
    budgets = list(range(4000, 200_001, 13_066))[:16]
    curves = {"a": (list(range(16)), list(range(16)), list(range(16)))}
    xs = [float(c.get("cx")) for c in _svg(charts.curve_svg(budgets, curves, "n", "t", False)).iter(NS + "circle")]
    assert np.allclose(np.diff(xs), xs[1] - xs[0], atol=0.2)


def test_kinds_are_stacked_largest_first_in_their_own_colours():
    mix = np.array([[1.0, 3.0], [1.0, 4.0]])  # Memory 2 tokens in all, message 7
    root = _svg(charts.kinds_svg(["v0", "v1"], ["Memory", "message"], mix))
    legend = [t.text for t in root.iter(NS + "text") if t.text in ("Memory", "message")]
    assert legend == ["message", "Memory"]  # the legend lists the larger first
    bars = [r for r in root.iter(NS + "rect") if r.get("width") != "100%" and float(r.get("width")) > 10]
    assert [b.get("fill") for b in bars] == [charts.kind_colour(k) for k in ("message", "Memory") * 2]
    heights = [float(b.get("height")) for b in bars]
    assert heights[0] / heights[1] == pytest.approx(3.0) and heights[2] / heights[3] == pytest.approx(4.0)
