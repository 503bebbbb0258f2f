"""The policy search's Pareto plot (``tuning.output.pareto_svg``): trials, the front as one
line, the presets as labelled squares; well formed whatever the labels or missing values."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np

from cupel_np.tuning.output import pareto_svg

NS = "{http://www.w3.org/2000/svg}"


def test_the_plot_shows_trials_front_and_presets():
    x = np.array([100.0, 200.0, 300.0, np.nan, 400.0])
    y = np.array([0.2, 0.5, 0.4, 0.9, 0.8])
    presets = [("chat <1>", 250.0, 0.45), ("rag & co", 350.0, 0.6), ("gone", float("nan"), 0.1)]
    root = ET.fromstring(pareto_svg(x, y, np.array([100.0, 200.0, 400.0]), np.array([0.2, 0.5, 0.8]), presets))
    circles = list(root.iter(NS + "circle"))
    assert len([c for c in circles if c.get("fill-opacity")]) == 4  # the finite trials
    assert len([c for c in circles if not c.get("fill-opacity")]) == 3  # the front's points
    (line,) = root.iter(NS + "polyline")
    assert len(line.get("points").split()) == 3
    texts = [t.text for t in root.iter(NS + "text")]
    assert "chat <1>" in texts and "rag & co" in texts and "gone" not in texts
    squares = [r for r in root.iter(NS + "rect") if r.get("fill") == "#d62728" and r.get("width") == "7.0"]
    assert len(squares) == 2
    # higher recall is higher on the plot, more tokens further right
    front = [tuple(map(float, p.split(","))) for p in line.get("points").split()]
    assert front[0][0] < front[1][0] < front[2][0] and front[0][1] > front[1][1] > front[2][1]


def test_an_empty_search_still_draws_a_plot():
    root = ET.fromstring(pareto_svg(np.zeros(0), np.zeros(0), np.zeros(0), np.zeros(0), []))
    assert root.tag == NS + "svg" and not list(root.iter(NS + "polyline"))
