"""The charts' one-draw PNGs: the same crop as ``bbox_inches="tight"``, and the heatmap's
cells in their status colours."""

from __future__ import annotations

import io

import numpy as np
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
