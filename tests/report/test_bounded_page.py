"""Many variants (issue 27.4): past ``page.BOUNDED_VARIANTS`` the sweep page replaces its
V x V matrices by each variant's nearest and farthest variants and shows fewer item rows, says
so at the top, and stays small (300 variants on 120 rows made a 33 MB page, most of it the two
matrices); a few variants get the same page as before."""

import re

import numpy as np
import pyarrow.parquet as pq
import pytest

import cupel_np as c
from cupel_np.data import sample_path
from cupel_np.report import page
from cupel_np.report.from_result import result_page_data, write_html_report

PRESETS = ["chat", "rag", "document_qa", "long_running"]


def _result(n_variants: int):
    t = pq.read_table(sample_path()).slice(0, 120)
    variants = [
        (f"{p}-{i}", c.preset(p), c.ContextBudget(4000 + 40 * i, 3000 + 40 * i))
        for i in range(n_variants // len(PRESETS))
        for p in PRESETS
    ]
    return c.sweep(c.ItemTable.from_arrow(t, set_column="session_id"), c.ContextBudget(8000, 6000), variants)


@pytest.fixture(scope="module")
def many(tmp_path_factory):
    res = _result(300)
    path = write_html_report(res, tmp_path_factory.mktemp("many"), title="T")
    return res, path.read_text()


def test_300_variants_make_a_bounded_page_that_says_what_was_cut(many):
    res, html = many
    assert len(res.labels) == 300
    assert len(html.encode()) < 6 * 2**20  # 33 MB before the bound
    assert 'id="cut-notice"' in html and "300 variants, more than 50" in html
    assert 'id="agree-matrix"' not in html and 'id="jaccard-matrix"' not in html
    rows = re.findall(r'<tr data-variant="([^"]*)"><th>[^<]*</th><td><span class="nb"', html)
    assert sorted(rows) == sorted(res.labels)  # every variant has its neighbours row
    start = re.search(r'<div id="start".*?</div>', html, re.S).group(0)
    assert len(start) < 3000, len(start)  # the families are summarised, not every variant named
    n_rows = html.count('<tr data-set="')  # item rows in the swing table and the sets
    assert 0 < n_rows < 200 + 5 * 25


def test_the_neighbours_are_the_most_and_least_alike(many):
    res, html = many
    d = result_page_data(res, title="T")
    agree = d.ag["agree"]
    i = 7
    row = re.search(rf'<tr data-variant="{re.escape(res.labels[i])}">(.*?)</tr>', html).group(1)
    near, far = row.split("</td><td>")
    a = np.where(np.arange(len(res.labels)) == i, np.nan, agree[i])
    best, worst = np.nanmax(a), np.nanmin(a)
    first_near = float(re.search(r'data-v="([^"]+)"', near).group(1))
    first_far = float(re.search(r'data-v="([^"]+)"', far).group(1))
    assert first_near == best and first_far == worst
    assert near.count('class="nb"') == page.NEIGHBOURS == far.count('class="nb"')


def test_a_few_variants_keep_the_full_page(tmp_path):
    res = _result(8)  # 8 variants, as every page so far
    d = result_page_data(res, title="T")
    html = write_html_report(res, tmp_path, title="T").read_text()
    assert "cut-notice" not in html and 'id="neighbours"' not in html
    assert 'id="agree-matrix"' in html and 'id="jaccard-matrix"' in html
    body = re.search(r'<table id="swing-table">.*?</table>', html, re.S).group(0)
    assert body.count('<tr data-set="') == len(d.rows)  # every row kept
    assert page.row_cap(d, 200) == 200


def _svg_width(data: bytes) -> int:
    return int(re.match(rb'<svg [^>]*width="([0-9]+)"', data).group(1))


def test_charts_of_many_variants_have_a_bounded_width():
    from cupel_np.report import charts

    labels = [f"v{i}" for i in range(1000)]
    z = np.zeros(1000)
    heat = charts.heatmap_svg(np.zeros((3, 1000)), ["a", "b", "c"], labels)
    toks = charts.tokens_svg(labels, z + 5, z + 10, z + 8)
    # a column per variant would be 64,000 px (drawing 600 variants' PNG charts took 2.5 GiB)
    assert max(_svg_width(heat), _svg_width(toks)) < 8000
    assert len(heat) < 20_000 and len(toks) < 400_000  # labels every k-th variant; no percentages
    few = charts.tokens_svg(labels[:5], z[:5] + 5, z[:5] + 10, z[:5] + 8)
    assert _svg_width(few) < 1200  # a few variants: as before
