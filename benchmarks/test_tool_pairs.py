"""What tool pairs (issue 29, docs/tool-pairs.md) cost a sweep (run once, briefly):

    .venv/bin/python -m pytest benchmarks/test_tool_pairs.py -s

* the orphan analytics (``SweepResult.orphans``: the per-table link pass plus one kernel pass
  over the linked rows of every variant) add at most 3% to a 1M-item, 16-variant sweep with
  ``variants_table()`` (the measure of benchmarks/test_analytics_cost.py) over 10,000 sets in
  which ~30% of the items are in call/result groups of 2-4; the share of the sweep alone is
  printed beside it;
* a sweep whose 16 variants all select groups (``groups = "tool_group"``) costs at most 1.25x
  the same sweep without (CPU time and wall time).

Medians of a few rounds, ratios measured in one process.
"""

import time

import numpy as np
import pyarrow as pa
from matrix_data import matrix_arrow, variants

import cupel_np as c
from cupel_np.analysis.toolpairs import orphan_columns, tool_links


def tool_pair_arrow(n: int, *, n_sets: int = 10_000, share: float = 0.3, seed: int = 5) -> pa.Table:
    """The matrix corpus plus ``tool_call_id`` / ``tool_role`` / ``tool_group``: runs of 2-4
    consecutive rows of one set (a call, then its results) hold about ``share`` of the items."""
    t = matrix_arrow(n, n_sets=n_sets)
    rng = np.random.default_rng(seed)
    sid = t.column("sid").to_numpy()
    size = rng.integers(2, 5, n)  # a group's size, if one starts at this row
    start = rng.random(n) < share / 2.4  # mean group size 3; overlapping starts are skipped
    group = np.full(n, -1, dtype=np.int64)
    first = np.zeros(n, dtype=np.bool_)
    i, g = 0, 0
    starts = np.flatnonzero(start)
    for s in starts:  # setup only (not timed): one pass over the group starts
        if s < i:
            continue
        e = min(s + int(size[s]), n)
        e = s + int(np.count_nonzero(sid[s:e] == sid[s]))  # inside one set
        if e - s >= 2:
            group[s:e] = g
            first[s] = True
            g += 1
        i = e
    has = group >= 0
    key = pa.array(np.char.add("g", group.astype(str)), mask=~has)
    role = pa.array(np.where(first, "call", "result"), mask=~has)
    return t.append_column("tool_call_id", key).append_column("tool_role", role).append_column("tool_group", key)


def _median(f, rounds=5):
    ts = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


def test_orphan_analytics_add_at_most_3_percent():
    n = 1_000_000
    table = c.ItemTable.from_arrow(tool_pair_arrow(n), set_column="sid")
    links = tool_links(table)
    grouped = int(np.diff(links.link_off).sum())
    vs = variants(16)
    budget = c.ContextBudget(20_000, 12_000)
    c.sweep(table, budget, vs[:2])  # compile
    res = c.sweep(table, budget, vs)
    orphan_columns(res.run)  # compile

    def links():
        table._cache.pop(("tool_links",), None)
        tool_links(table)

    sweep_s, table_s, links_s, counts_s = [], [], [], []
    for _ in range(5):  # interleaved rounds: the machine's load drifts
        t0 = time.perf_counter()
        r = c.sweep(table, budget, vs)
        t1 = time.perf_counter()
        r.variants_table()  # what a sweep's caller reads (and where the orphans show)
        t2 = time.perf_counter()
        sweep_s.append(t1 - t0)
        table_s.append(t2 - t0)
        links_s.append(_median(links, 1))
        counts_s.append(_median(lambda: orphan_columns(res.run), 1))
    sweep_m, total_m, links_m, counts_m = (float(np.median(x)) for x in (sweep_s, table_s, links_s, counts_s))
    orphan_s = links_m + counts_m  # the per-table link pass counts too
    o = orphan_columns(res.run)
    share = orphan_s / total_m
    print(
        f"\n1M x 16 over 10,000 sets, {grouped / n:.0%} of items in call/result groups: sweep {sweep_m:.3f}s, "
        f"with variants_table {total_m:.3f}s; orphan analytics {orphan_s:.4f}s (links {links_m:.4f}s once per "
        f"table, counts {counts_m:.4f}s) = {share:.1%} of sweep + variants_table, {orphan_s / sweep_m:.1%} of the "
        f"sweep alone ({int(o['orphan_calls'].sum()):,} orphan calls, {int(o['orphan_results'].sum()):,} orphan "
        "results)"
    )
    assert 0.25 <= grouped / n <= 0.35
    # as benchmarks/test_analytics_cost.py: the share of a sweep with variants_table()
    assert share <= 0.03


def test_groups_cost_at_most_a_quarter_more():
    """A 1M-item, 16-variant sweep with ~30% of the items in groups of 2-4 costs at most 1.25x
    the same sweep without groups (medians of interleaved rounds in one process)."""
    import dataclasses

    n = 1_000_000
    table = c.ItemTable.from_arrow(tool_pair_arrow(n), set_column="sid")
    budget = c.ContextBudget(20_000, 12_000)
    plain = variants(16)
    grouped = [(label, dataclasses.replace(p, groups="tool_group")) for label, p in plain]
    c.sweep(table, budget, plain[:2])
    c.sweep(table, budget, grouped[:2])  # compile
    wall: dict[str, list[float]] = {"off": [], "on": []}
    cpu: dict[str, list[float]] = {"off": [], "on": []}
    for _ in range(5):  # interleaved rounds: the machine's load drifts
        for name, vs in (("off", plain), ("on", grouped)):
            table._cache.pop(("group_codes", "tool_group"), None)  # every cost counts, as in a one-off run
            w0, c0 = time.perf_counter(), time.process_time()
            c.sweep(table, budget, vs)
            wall[name].append(time.perf_counter() - w0)
            cpu[name].append(time.process_time() - c0)
    off_m, on_m = float(np.median(wall["off"])), float(np.median(wall["on"]))
    cpu_off, cpu_on = float(np.median(cpu["off"])), float(np.median(cpu["on"]))
    res = c.sweep(table, budget, grouped)
    o = orphan_columns(res.run)
    print(
        f"\n1M x 16 over 10,000 sets, 30% of items in groups of 2-4 (medians of 5 interleaved rounds): wall "
        f"{off_m:.3f}s without groups, {on_m:.3f}s with = {on_m / off_m:.2f}x; CPU {cpu_off:.3f}s / {cpu_on:.3f}s = "
        f"{cpu_on / cpu_off:.2f}x ({int(o['orphan_calls'].sum() + o['orphan_results'].sum())} orphans)"
    )
    assert int(o["orphan_calls"].sum() + o["orphan_results"].sum()) == 0
    # the cost: CPU time of every thread (what the load on a shared machine disturbs least)
    # and the wall time the caller waits
    assert cpu_on / cpu_off <= 1.25
    assert on_m / off_m <= 1.25
