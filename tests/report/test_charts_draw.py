"""The charts' one-draw PNGs: the same crop as ``bbox_inches="tight"``, and the heatmap's
cells in their status colours."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from cupel_np.report import charts


def _tight(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=charts.DPI, bbox_inches="tight")
    return buf.getvalue()


def test_png_crops_like_tight_without_its_extra_draw():
    # long rotated x labels, a long y label and a legend outside the axes: a fixed layout
    # would clip them; the crop must hold all of them exactly as "tight" does
    labels = [f"variant-{i}|a long preset name {i}" for i in range(5)]
    fig, ax = charts.figure((6, 3))
    ax.bar(range(5), [1, 2, 3, 2, 1], label="tokens used by every set of this variant")
    charts._variant_axis(ax, labels)
    ax.set_ylabel("a y label")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
    want = _tight(fig)
    got = charts.png(fig)
    assert Image.open(io.BytesIO(got)).size == Image.open(io.BytesIO(want)).size
    assert got == want


def test_heatmap_cells_have_their_status_colours():
    status = np.array([[1.0, 0.0, np.nan], [0.0, np.nan, 1.0]])
    img = np.asarray(Image.open(io.BytesIO(charts.heatmap_png(status, ["row a", "row b"], ["v0", "v1", "v2"]))))
    rgb = img[..., :3].reshape(-1, 3)
    count = {
        c: int((rgb == np.array(Image.new("RGB", (1, 1), c).getpixel((0, 0)))).all(1).sum())
        for c in (charts.IN, charts.OUT, charts.FAILED)
    }
    # each status covers two of the six cells: about the same area each, and all three drawn
    assert min(count.values()) > 1000
    assert max(count.values()) < 1.2 * min(count.values())


def test_draw_all_draws_here_or_hands_the_jobs_to_the_drawer():
    jobs = [("k.png", "kinds_png", (["v0", "v1"], ["message"], np.array([[3.0], [4.0]])))]
    here = charts.draw_all(jobs)
    assert set(here) == {"k.png"} and here["k.png"].startswith(b"\x89PNG")
    seen = []
    with charts.drawn_by(lambda js: seen.append(js) or {"k.png": b"elsewhere"}):
        assert charts.draw_all(jobs) == {"k.png": b"elsewhere"}
    assert seen == [jobs]
    assert charts.draw_all(jobs) == here  # the drawer is gone after the block
    with pytest.raises(ValueError, match="no chart function"):
        charts.draw("png", ())
