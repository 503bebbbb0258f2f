"""The page's contested-items tables show each item's group key (issue 29, docs/tool-pairs.md)
when the sweep selected units by a group column, or when the items carry ``tool_group``; the
same on the page built from a SweepResult and on the one built from the written outputs."""

from html.parser import HTMLParser

import pyarrow as pa
import pytest

import cupel_np as c
from cupel_np.io.parquet import write_sweep
from cupel_np.report.from_dir import dir_page_data
from cupel_np.report.from_result import result_page_data
from cupel_np.report.page import section_sets, section_why


def rows(n_sets: int = 4, turns: int = 8) -> list[dict]:
    """Sessions of a message, then a tool call and its result(s) sharing a ``tool_group`` key,
    with token counts that make budgets disagree."""
    out = []
    for s in range(n_sets):
        for t in range(turns):
            out.append({"conv": f"c{s}", "content": f"s{s} ask {t}", "tokens": 20 + 7 * t, "tool_group": None})
            n_results = 1 + (t + s) % 2
            key = f"s{s}-g{t}"
            out.append({"conv": f"c{s}", "content": f"s{s} call {t}", "tokens": 15 + 3 * t, "tool_group": key})
            for k in range(n_results):
                out.append(
                    {
                        "conv": f"c{s}",
                        "content": f"s{s} out {t}.{k}",
                        "tokens": 40 + 11 * ((t * 3 + k) % 5),
                        "tool_group": key,
                    }
                )
    return out


class _Tables(HTMLParser):
    """Every table's header texts and, per body row, its cells' texts and attributes, keyed
    by the table's id (``swing-table``) or class (``set-items``)."""

    def __init__(self):
        super().__init__()
        self.tables: list[dict] = []
        self._cell: list | None = None
        self._in_head = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table":
            self.tables.append({"name": a.get("id") or a.get("class"), "head": [], "rows": []})
        elif tag == "thead":
            self._in_head = True
        elif tag == "tbody":
            self._in_head = False
        elif tag == "tr" and self.tables and not self._in_head:
            self.tables[-1]["rows"].append({"attrs": a, "cells": []})
        elif tag in ("td", "th") and self.tables:
            self._cell = [a, ""]

    def handle_data(self, data):
        if self._cell is not None:
            self._cell[1] += data

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self.tables:
            t = self.tables[-1]
            if self._in_head:
                t["head"].append(self._cell[1].strip())
            elif t["rows"]:
                t["rows"][-1]["cells"].append((self._cell[0], self._cell[1].strip()))
            self._cell = None


def page_tables_html(d) -> str:
    """The page's sections with item tables (the rest of ``render_page`` needs the charts)."""
    return section_why(d) + section_sets(d)


def item_tables(html: str) -> list[dict]:
    p = _Tables()
    p.feed(html)
    return [t for t in p.tables if t["name"] in ("swing-table", "set-items")]


def _sweep(data, grouped: bool):
    """Recency and reflexive-free priority policies (one with groups when ``grouped``) under a
    budget that keeps about half of each set."""
    groups = "tool_group" if grouped else None
    variants = [
        ("recency", c.Policy(c.RecencyScorer(), groups=groups)),
        ("kind", c.Policy(c.KindScorer())),
    ]
    table = c.ItemTable.from_arrow(pa.Table.from_pylist(data), set_column="conv")
    return c.sweep(table, c.ContextBudget(400, 300), variants, on_error="collect")


def _check_group_cells(tables, data, column):
    key_of = {(r["conv"], r["content"]): r.get("tool_group") for r in data}
    seen_keys = 0
    for t in tables:
        assert t["head"][:7] == ["conv", "content", "kind", "source", "tokens", column, "included by"], t["head"]
        assert t["rows"]
        for r in t["rows"]:
            a, cells = r["attrs"], r["cells"]
            want = key_of[(a["data-set"], a["data-content"])]
            attrs, txt = cells[5]
            assert attrs.get("data-group") == column
            assert txt == ("" if want is None else want)
            seen_keys += want is not None
    assert seen_keys  # some contested item is a member of a group: the check can fail


@pytest.mark.parametrize("grouped", [True, False])
def test_contested_items_show_the_group_key(tmp_path, grouped):
    """With groups (the key of the unit) and without (the items carry ``tool_group``): the
    page from the result shows it; the page from the outputs too when the sweep used groups
    (only then do the items outputs carry the column)."""
    data = rows()
    res = _sweep(data, grouped)
    assert res.n_swing > 0
    d = result_page_data(res, title="t")
    assert d.group_columns == ["tool_group"]
    html = page_tables_html(d)
    _check_group_cells(item_tables(html), data, "tool_group")
    assert "the item's group key" in html
    write_sweep(res, tmp_path / "out")
    dd = dir_page_data(tmp_path / "out")
    if grouped:
        assert dd.group_columns == ["tool_group"]
        _check_group_cells(item_tables(page_tables_html(dd)), data, "tool_group")
    else:
        assert dd.group_columns == []


def test_no_group_column_no_group_cells():
    data = [{k: v for k, v in r.items() if k != "tool_group"} for r in rows()]
    res = _sweep(data, False)
    d = result_page_data(res, title="t")
    assert d.group_columns == []
    html = page_tables_html(d)
    for t in item_tables(html):
        assert t["head"][:6] == ["conv", "content", "kind", "source", "tokens", "included by"]
        assert all(len(r["cells"]) == 6 + len(res.labels) for r in t["rows"])
    assert "data-group" not in html and "the item's group key" not in html
