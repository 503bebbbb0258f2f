"""The charts are SVG documents (``report.charts``): well formed, the heatmap's cells in their
status colours, user strings escaped and cut, sizes bounded, the budget curves on a log axis
when the ladder spans more than 8x."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import Counter

import numpy as np
import pytest

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
    """A row is drawn as its runs of equal status: its size grows with the changes along
    it, not with the variants."""
    status = np.zeros((2, 1000))
    status[1, 500:] = 1.0
    root = _svg(charts.heatmap_svg(status, ["flat", "one change"], [f"v{i}" for i in range(1000)]))
    cells = [r for r in root.iter(NS + "rect") if r.get("fill") in (charts.IN, charts.OUT)]
    assert len(cells) == 3


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
    assert len(shown[0].replace("⟨U+202E⟩", "\u202e")) == charts.CHART_LABEL_LIMIT


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


def test_nice_ticks_are_round_and_cover_the_range():
    assert charts.nice_ticks(0, 1_800_000) == [0, 500_000, 1_000_000, 1_500_000]
    assert charts.nice_ticks(0, 0.93) == pytest.approx([0, 0.2, 0.4, 0.6, 0.8])
    assert charts.nice_ticks(0, 7) == [0, 2, 4, 6]
    assert charts.nice_ticks(5, 5) == [5]


def test_draw_all_names_every_chart_and_refuses_other_functions():
    jobs = [("k.svg", "kinds_svg", (["v0", "v1"], ["message"], np.array([[3.0], [4.0]])))]
    here = charts.draw_all(jobs)
    assert set(here) == {"k.svg"} and here["k.svg"].startswith(b"<svg ")
    assert here == charts.draw_all(jobs)  # the same bytes every time
    with pytest.raises(ValueError, match="no chart function"):
        charts.draw("svg", ())
