"""report.html in a real browser (headless Chromium): the numbers it shows equal those
recomputed from the written Parquet files, its sort/filter JavaScript works, it loads nothing
from the network, and the notebook summaries (_repr_html_) render.

Without a browser the test is skipped locally; with CI set it fails instead."""

import os
import re
import shutil
import subprocess
from collections import defaultdict
from html.parser import HTMLParser
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import cupel_np as c
from cupel_np.io import write_sweep
from cupel_np.report.from_result import write_html_report

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "data" / "sample_sessions.parquet"
MAX_ROWS = 60


def find_browser():
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome"):
        p = shutil.which(name)
        if p:
            return p
    if os.environ.get("CI"):
        pytest.fail("no Chromium/Chrome on PATH; CI must install one (apt-get install -y chromium)")
    pytest.skip("no Chromium/Chrome on PATH")


def browser(*args, url):
    import tempfile

    exe = find_browser()
    with tempfile.TemporaryDirectory(prefix="cupel-np-chromium-") as profile:  # no shared profile lock
        cmd = [
            exe,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={profile}",
            *args,
            url,
        ]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


# ----------------------------------------------------------------------------- a tiny DOM
class Node:
    def __init__(self, tag, attrs, parent):
        self.tag, self.attrs, self.parent, self.children, self.text_parts = tag, dict(attrs), parent, [], []

    def all(self, tag=None, **attrs):
        out = []
        for ch in self.children:
            if (tag is None or ch.tag == tag) and all(ch.attrs.get(k.replace("_", "-")) == v for k, v in attrs.items()):
                out.append(ch)
            out.extend(ch.all(tag, **attrs))
        return out

    def find(self, tag=None, **attrs):
        r = self.all(tag, **attrs)
        assert r, f"no <{tag} {attrs}>"
        return r[0]


VOID = {"meta", "img", "input", "br", "hr", "link", "col", "source"}


class DomParser(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Node("#root", {}, None)
        self.cur = self.root

    def handle_starttag(self, tag, attrs):
        n = Node(tag, attrs, self.cur)
        self.cur.children.append(n)
        self.cur.text_parts.append(n)
        if tag not in VOID:
            self.cur = n

    def handle_endtag(self, tag):
        n = self.cur
        while n is not None and n.tag != tag:
            n = n.parent
        if n is not None and n.parent is not None:
            self.cur = n.parent

    def handle_data(self, data):
        self.cur.text_parts.append(data)


def text(n):
    return "".join(p if isinstance(p, str) else text(p) for p in n.text_parts)


def parse(dom: str) -> Node:
    p = DomParser()
    p.feed(dom)
    return p.root


# ----------------------------------------------------------------------------- the sweep
@pytest.fixture(scope="module")
def written(tmp_path_factory):
    d = tmp_path_factory.mktemp("report")
    t = pq.read_table(SAMPLE)
    keep = pc.is_in(t["session_id"], value_set=pc.unique(t["session_id"]).slice(0, 40))
    items_path = d / "input.parquet"
    pq.write_table(t.filter(keep), items_path)
    table = c.ItemTable.from_parquet(items_path, set_column="session_id")
    b = c.ContextBudget(8000, 6000, 1000)
    variants = [
        ("chat", c.preset("chat"), b),
        ("rag", c.preset("rag"), b),
        ("chat-small", c.preset("chat"), c.ContextBudget(4000, 3000, 500)),
        ("document_qa", c.preset("document_qa"), b),
        ("tiny", c.preset("chat"), c.ContextBudget(330, 300)),
    ]  # fails where the pinned prompt > 330
    result = c.sweep(table, None, variants, on_error="collect")
    assert result.errors.get("tiny") and len(result.errors["tiny"]) < table.n_sets  # some cells failed, not all
    out = d / "out"
    write_sweep(result, out)
    page = write_html_report(result, out, title="test report", max_rows=MAX_ROWS, max_sets=4, max_pairs=8)
    return {"dir": out, "page": page, "input": items_path, "result": result, "labels": result.labels}


@pytest.fixture(scope="module")
def dom(written):
    return parse(browser("--dump-dom", url=written["page"].as_uri()))


@pytest.fixture(scope="module")
def parquet(written):
    """Everything the test checks against, recomputed from the written Parquet files only."""
    out = written["dir"]
    items = pq.read_table(out / "items.parquet").to_pylist()
    inp = pq.read_table(written["input"]).to_pylist()
    labels = written["labels"]
    groups = defaultdict(list)  # (set, content) -> rows in input order
    for r in items:
        groups[(r["session_id"], r["content"])].append(r)
    status = {}
    for k, rows in groups.items():
        st = {}
        for l in labels:
            vals = [r[f"{l}.included"] for r in rows]
            st[l] = None if vals[0] is None else any(vals)
        status[k] = st
    by_set = defaultdict(list)
    for r in items:
        by_set[r["session_id"]].append(r)
    return {
        "items": items,
        "input": inp,
        "groups": groups,
        "status": status,
        "by_set": by_set,
        "diffs": pq.read_table(out / "diffs.parquet").to_pylist(),
        "variants": pq.read_table(out / "variants.parquet").to_pylist(),
    }


def test_summary_numbers(dom, parquet, written):
    s = dom.find("p", id="summary")
    assert int(s.attrs["data-swing"]) == len(parquet["diffs"]) > MAX_ROWS
    assert int(s.attrs["data-items"]) == len(parquet["items"])
    assert int(s.attrs["data-sets"]) == len({r["session_id"] for r in parquet["variants"]})
    assert f"{len(parquet['diffs']):,} swinging contents" in text(s)


def pair_stats(parquet, a, b):
    same = both = inter = union = 0
    for st in parquet["status"].values():
        if st[a] is None or st[b] is None:
            continue
        both += 1
        same += st[a] == st[b]
        inter += st[a] and st[b]
        union += st[a] or st[b]
    return same / both, (inter / union if union else 1.0), both - same


def test_agreement_matrix(dom, parquet, written):
    labels = written["labels"]
    for key, idx in (("agree", 0), ("jaccard", 1)):
        m = dom.find("table", id=f"{key}-matrix")
        cells = m.all("td")
        assert len(cells) == len(labels) ** 2
        for td in cells:
            want = pair_stats(parquet, td.attrs["data-a"], td.attrs["data-b"])[idx]
            assert float(td.attrs["data-v"]) == pytest.approx(want, abs=1e-12)
            assert text(td) == f"{want:.3f}"
        # rows ordered as a similarity chain: each next variant is the most similar one left
        order = [text(tr.all("th")[0]) for tr in m.all("tr")[1:]]
        assert sorted(order) == sorted(labels)
        for i in range(1, len(order) - 1) if key == "agree" else ():
            nxt = pair_stats(parquet, order[i - 1], order[i])[0]
            for later in order[i + 1 :]:
                assert nxt >= pair_stats(parquet, order[i - 1], later)[0] - 1e-12


def test_swing_by_kind_and_source(dom, parquet, written):
    inp = parquet["input"]
    first_row = {k: rows[0]["input_row"] for k, rows in parquet["groups"].items()}
    for which in ("kind", "source"):
        table = dom.find("table", id=f"by-{which}")
        pairs = table.all("tr", **{"class": "pair"})
        assert 0 < len(pairs) <= 8
        totals = []
        for tr in pairs:
            a, b = tr.attrs["data-a"], tr.attrs["data-b"]
            per_cat = defaultdict(int)
            for k, st in parquet["status"].items():
                if st[a] is None or st[b] is None or st[a] == st[b]:
                    continue
                v = inp[first_row[k]][which]
                per_cat[v.lower() if which == "kind" else v] += 1
            tds = tr.all("td")
            total = int(text(tds[1]).replace(",", ""))
            assert total == pair_stats(parquet, a, b)[2] == sum(per_cat.values())
            totals.append(total)
            shown = 0
            for td in tds[2:]:
                cat = td.attrs["data-cat"]
                n = int(text(td).replace(",", ""))
                if cat != "(other)":
                    assert n == per_cat.get(cat, 0), (which, a, b, cat)
                shown += n
            assert shown == total
        assert totals == sorted(totals, reverse=True)


def test_reasons_and_swing_table(dom, parquet, written):
    labels = written["labels"]
    diffs = parquet["diffs"]
    groups = parquet["groups"]
    # aggregates over ALL swinging contents
    tot = dom.find("table", id="reason-totals")
    for tr in tot.all("tr")[1:]:
        l = tr.attrs["data-variant"]
        want = defaultdict(int)
        for d in diffs:
            st = d[l]
            if st is None:
                want["failed"] += 1
            elif st == "Included":
                want["Included"] += 1
            else:
                want[groups[(d["session_id"], d["content"])][0][f"{l}.reason"]] += 1
        got = {td.attrs["data-reason"]: int(text(td).replace(",", "")) for td in tr.all("td")}
        assert {k: v for k, v in got.items() if v} == dict(want)
    # the bounded, sortable table: every cell's status, reason and score rank
    t = dom.find("table", id="swing-table")
    rows = t.all("tbody")[0].all("tr")
    assert len(rows) == MAX_ROWS
    diff_keys = {(d["session_id"], d["content"]) for d in diffs}
    inp = parquet["input"]
    for tr in rows:
        key = (tr.attrs["data-set"], tr.attrs["data-content"])
        assert key in diff_keys
        first = groups[key][0]
        tds = tr.all("td")
        assert int(tds[4].attrs["data-s"]) == inp[first["input_row"]]["tokens"]
        st = parquet["status"][key]
        n_in = sum(1 for l in labels if st[l])
        assert text(tds[5]) == f"{n_in}/{sum(1 for l in labels if st[l] is not None)}"
        for l, td in zip(labels, tds[6:]):
            if st[l] is None:
                assert td.attrs["data-status"] == "failed"
                continue
            assert td.attrs["data-status"] == ("Included" if st[l] else first[f"{l}.reason"])
            assert td.attrs["data-reason"] == first[f"{l}.reason"]
            score = first[f"{l}.score"]
            rank = 1 + sum(1 for r in parquet["by_set"][key[0]] if r[f"{l}.score"] > score)
            assert int(td.attrs["data-rank"]) == rank

    # the most contested first: no hidden swinging content is more contested than a shown one
    def contest(k):
        st = parquet["status"][k]
        n = sum(1 for l in labels if st[l])
        return min(n, len(labels) - n)

    shown = {(tr.attrs["data-set"], tr.attrs["data-content"]) for tr in rows}
    assert min(contest(k) for k in shown) >= max(contest(k) for k in diff_keys - shown)


def test_set_drill_down(dom, parquet):
    swing = {}
    per = defaultdict(dict)
    for r in parquet["variants"]:
        swing[r["session_id"]] = r["swing_count"]
        per[r["session_id"]][r["variant"]] = r
    sets = dom.all("details", **{"class": "set"})
    assert len(sets) == 4
    shown = [int(d.attrs["data-swing"]) for d in sets]
    assert shown == sorted(swing.values(), reverse=True)[:4]
    for d in sets:
        key = d.attrs["data-set"]
        assert int(d.attrs["data-swing"]) == swing[key]
        for tr in d.all("tr"):
            l = tr.attrs.get("data-variant")
            if l is None:
                continue
            row = per[key][l]
            if row["error"] is not None:
                assert "failed" in text(tr)
                continue
            got = {td.attrs["data-k"]: int(text(td).replace(",", "")) for td in tr.all("td") if "data-k" in td.attrs}
            set_tokens = sum(max(r["tokens"], 0) for r in parquet["input"] if r["session_id"] == key)
            assert got == {
                "included": row["included_count"],
                "tokens": row["tokens_used"],
                "usable": min(set_tokens, row["target_tokens"]),  # what the variant could use at most
                "swing_included": row["swing_included"],
            }
        assert len(d.find("table", **{"class": "set-items"}).all("tbody")[0].all("tr")) == min(25, swing[key])


def test_sort_and_filter_javascript(written):
    page = written["page"].as_uri()
    d = parse(browser("--dump-dom", url=page + "#sort=4:desc"))
    t = d.find("table", id="swing-table")
    assert t.attrs["data-sorted"] == "4:desc"
    toks = [int(tr.all("td")[4].attrs["data-s"]) for tr in t.all("tbody")[0].all("tr")]
    assert toks == sorted(toks, reverse=True) and len(set(toks)) > 1
    kinds = [o.attrs["value"] for o in d.find("select", id="kind").all("option") if o.attrs["value"]]
    kind = kinds[-1]
    d = parse(browser("--dump-dom", url=page + "#kind=" + kind))
    rows = d.find("table", id="swing-table").all("tbody")[0].all("tr")
    visible = [tr for tr in rows if "display: none" not in tr.attrs.get("style", "")]
    assert visible and all(text(tr.all("td")[2]) == kind for tr in visible)
    assert len(visible) < len(rows) and text(d.find("span", id="shown")) == str(len(visible))


def test_self_contained_and_screenshot(written, tmp_path):
    src = written["page"].read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", src)  # nothing fetched from the network
    assert "<script src" not in src and "@import" not in src
    shot = tmp_path / "shot.png"
    browser(f"--screenshot={shot}", "--window-size=1400,2000", url=written["page"].as_uri())
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 50_000  # a rendered page, not a blank one


def test_repr_html(written):
    r = written["result"]
    h = r._repr_html_()
    assert "SweepResult" in h and f"{r.n_swing:,} swinging" in h and len(h) < 20_000
    key = r.table.set_keys[0]
    rep = r.report(key)
    h = rep._repr_html_()
    assert "PolicySensitivityReport" in h and f"{len(rep.diffs):,} swinging" in h
    sel = r.selection_report("chat", key)
    h = sel._repr_html_()
    assert f"{len(sel.included):,} included" in h and f"{len(sel.excluded):,} excluded" in h
    assert h.count("<tr>") <= 1 + 2 * 10


def test_many_categories_stay_bounded():
    """Hundreds of sources: 8 named, the rest in 'other', and every pair's row still adds up."""
    import numpy as np
    import pyarrow as pa

    from cupel_np.analysis.compare import MAX_CATEGORIES, agreement, swing_by_category

    t = pq.read_table(SAMPLE)
    t = t.filter(pc.is_in(t["session_id"], value_set=pc.unique(t["session_id"]).slice(0, 30)))
    t = t.set_column(
        t.schema.get_field_index("source"), "source", pa.array([f"src-{i % 300}" for i in range(t.num_rows)])
    )
    r = c.sweep(
        c.ItemTable.from_arrow(t, set_column="session_id"),
        c.ContextBudget(8000, 6000, 1000),
        [("chat", c.preset("chat")), ("rag", c.preset("rag")), ("dq", c.preset("document_qa"))],
    )
    cat = swing_by_category(r, "source")
    assert len(cat["names"]) == MAX_CATEGORIES and cat["counts"].shape == (MAX_CATEGORIES, 3, 3)
    total = cat["counts"].sum(axis=0) + cat["other"]
    assert np.array_equal(total, agreement(r)["disagree"]) and cat["other"].sum() > 0
    assert int(cat["swinging"].sum()) + cat["other_swinging"] == r.n_swing


def test_fits_the_window_and_starts_with_words(tmp_path):
    """14 variants (the demo's grid) on 30 sessions: no table is wider than a 1400 px window,
    and the page opens with a summary in words."""
    t = pq.read_table(SAMPLE)
    keep = pc.is_in(t["session_id"], value_set=pc.unique(t["session_id"]).slice(0, 30))
    table = c.ItemTable.from_arrow(t.filter(keep), set_column="session_id")
    grid = c.Sweep(list(c.PRESETS), budgets=[c.ContextBudget(8000, 6000, 1000), c.ContextBudget(4000, 3000, 500)])
    page = write_html_report(c.sweep(table, None, grid), tmp_path / "o", title="wide")
    probe = (
        "<script>var w=[];document.querySelectorAll('table').forEach(function(t){w.push(t.scrollWidth)});"
        "document.body.setAttribute('data-w',Math.max.apply(null,w)+' '+document.documentElement.clientWidth)"
        "</script></body>"
    )
    probed = tmp_path / "probe.html"
    probed.write_text(page.read_text().replace("</body>", probe))
    d = parse(browser("--window-size=1400,900", "--dump-dom", url=probed.as_uri()))
    widest, window = (int(x) for x in d.find("body").attrs["data-w"].split())
    assert 1300 <= window <= 1400 and widest <= window, (widest, window)
    start = text(d.find("div", id="start"))
    assert "contents swing" in start and "The pair that differs most is" in start and "most common reason" in start
    # issue 26: the budgets are stated, and variant families read as words, not Python sets
    assert "2 budgets (from max 8,000 tokens, target 6,000, output reserve 1,000;" in start, start
    assert "{" not in start and "}" not in start


def test_chart_units_and_kind_colours():
    from cupel_np.report.charts import PALETTE, human, kind_colour

    assert [human(x) for x in (0, 950, 1000, 20000, 1_250_000, 1_500_000, 2.5e9)] == [
        "0", "950", "1k", "20k", "1.25M", "1.5M", "2.5G",
    ]  # fmt: skip
    # one colour per kind in every report: fixed by the (case-folded) name, not by the order drawn
    assert kind_colour("Message") == kind_colour("message") and kind_colour("ToolOutput") in PALETTE
    assert (
        len({kind_colour(k) for k in ("Message", "ToolOutput", "Document", "SystemPrompt", "Memory", "ToolCall")}) == 6
    )


def test_hostile_strings_stay_inert_and_bounded(tmp_path):
    """Issue 27: an unterminated bidi override in a label reversed the page's sentences, and a
    1 MB kind made a 7-million-pixel chart legend and a 28.6 MB page. User strings are shown
    with control and bidi characters made visible, cut for display, and charts cut labels."""
    import pyarrow as pa

    t = pq.read_table(SAMPLE)
    t = t.filter(pc.is_in(t["session_id"], value_set=pc.unique(t["session_id"]).slice(0, 6)))
    huge = "K" * 1_000_000
    kinds = t["kind"].to_pylist()
    kinds[0] = huge
    kinds[1] = "Memo\u202ery\x1b[31m"
    t = t.set_column(t.schema.get_field_index("kind"), "kind", pa.array(kinds))
    table = c.ItemTable.from_arrow(t, set_column="session_id")
    b = c.ContextBudget(8000, 6000, 1000)
    result = c.sweep(table, b, [("chat\u202e", c.preset("chat")), ("rag\u2067", c.preset("rag"))])
    page = write_html_report(result, tmp_path / "o", title="hostile \u202etitle")
    src = page.read_text(encoding="utf-8")
    for raw in ("\u202e", "\u2067", "\x1b"):
        assert raw not in src
    assert "chat⟨U+202E⟩" in src and "rag⟨U+2067⟩" in src
    assert len(src) < 3_000_000, len(src)  # the 1 MB kind is cut wherever it is shown
    d = parse(browser("--dump-dom", url=page.as_uri()))
    start = text(d.find("div", id="start"))
    assert "contents swing" in start and "\u202e" not in start
    assert "one budget (max 8,000 tokens, target 6,000, output reserve 1,000)" in start, start
    # every chart stays a sane size whatever the labels
    import base64

    charts = re.findall(r'src="data:image/svg\+xml;base64,([^"]+)"', src)
    assert len(charts) == 3
    for data in charts:
        svg = base64.b64decode(data)
        w, h = (int(v) for v in re.match(rb'<svg [^>]*width="([0-9]+)" height="([0-9]+)"', svg).groups())
        assert w < 4000 and h < 4000, (w, h)
        assert b"KKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKKK" not in svg  # the 1 MB kind cut in the legend
