"""The sweep page's outcomes and checks sections in a real browser (headless Chromium, as
tests/report/test_report_html.py): with labels the page shows recall per variant with its interval,
every variant against the first, and where each loses the relevant items, each number equal
to the one recomputed from the written Parquet files; a knapsack whose bucket is above the
target is flagged and the page says it selected nothing."""

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from test_report_html import SAMPLE, browser, parse, text

import cupel_np as c
from cupel_np.analysis.outcomes import outcome_summary_of_table
from cupel_np.io import write_sweep
from cupel_np.report.from_result import write_html_report


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    d = tmp_path_factory.mktemp("outcomes")
    t = pq.read_table(SAMPLE)
    keep = pc.is_in(t["session_id"], value_set=pc.unique(t["session_id"]).slice(0, 30))
    table = c.ItemTable(t.filter(keep), set_column="session_id")
    b = c.ContextBudget(max_tokens=3000, target_tokens=1500)
    variants = [
        ("chat", c.preset("chat"), c.ContextBudget(max_tokens=8000, target_tokens=6000)),
        ("rag", c.preset("rag"), c.ContextBudget(max_tokens=8000, target_tokens=6000)),
        (
            "big_bucket",
            c.Policy.from_dict({"slicer": "knapsack", "bucket_size": 4000, "scorers": [{"type": "kind"}]}),
            b,
        ),
    ]
    result = c.sweep(table, None, variants, on_error="collect")
    out = d / "out"
    write_sweep(result, out, labels="relevant")
    page = write_html_report(result, out, title="outcomes", labels="relevant", n_boot=200)
    return {"dir": out, "page": page, "result": result}


@pytest.fixture(scope="module")
def dom(written):
    return parse(browser("--dump-dom", url=written["page"].as_uri()))


def test_the_outcomes_section_shows_recall_with_intervals_per_variant(dom, written):
    section = dom.find("table", id="outcome-summary")
    rows = [r for r in section.all("tr") if r.attrs.get("data-variant")]
    shown = {r.attrs["data-variant"]: r for r in rows}
    assert list(shown) == written["result"].labels
    want = outcome_summary_of_table(
        pq.read_table(written["dir"] / "outcomes.parquet"), written["result"].labels, n_boot=200
    ).to_pylist()
    for w in want:
        cell = shown[w["variant"]].find("td", **{"class": "token_recall"})
        assert text(cell).split()[0] == f"{w['token_recall']:.3f}"
        assert f"[{w['token_recall_lo']:.3f}, {w['token_recall_hi']:.3f}]" in text(cell)
    assert "Token precision counts pinned items" in " ".join(text(dom.find("h2", id="outcomes").parent).split())


def test_paired_comparisons_and_losses(dom, written):
    paired = [r for r in dom.find("table", id="outcome-paired").all("tr") if r.attrs.get("data-a")]
    assert [r.attrs["data-a"] for r in paired] == ["rag", "big_bucket"]
    losses = [r for r in dom.find("table", id="outcome-losses").all("tr") if r.attrs.get("data-variant")]
    out = pq.read_table(written["dir"] / "outcomes.parquet").to_pylist()
    for label in written["result"].labels:
        mine = [r for r in out if r["variant"] == label and r["relevant_included"] is not None]
        missed = sum(r["relevant_items"] - r["relevant_included"] for r in mine)
        shown = sum(
            int(text(r.find("td", **{"class": "lost"})).replace(",", ""))
            for r in losses
            if r.attrs["data-variant"] == label
        )
        assert shown == missed, label
    bucket = [text(r.find("td", **{"class": "reason"})) for r in losses if r.attrs["data-variant"] == "big_bucket"]
    assert bucket[0] == "BudgetExceeded"  # most of its losses: it keeps nothing


def test_a_bucket_above_the_target_is_flagged_and_the_page_says_it_selected_nothing(dom, written):
    lines = [text(li) for li in dom.find("ul", id="check-lines").all("li")]
    n = written["result"].table.n_sets
    assert (
        f"big_bucket: knapsack bucket 4000 is above the effective target on {n} sets (zero capacity: it can keep nothing there)"
        in lines
    )
    assert f"big_bucket: selected nothing from {n} non-empty sets (an item fitted the target)" in lines
    assert not any(line.startswith(("chat:", "rag:")) for line in lines)
