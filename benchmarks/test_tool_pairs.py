"""What tool pairs (issue 29, docs/tool-pairs.md) cost a sweep (run once, briefly):

    .venv/bin/python -m pytest benchmarks/test_tool_pairs.py -s

* the orphan analytics (the per-table link pass, the counts of every (variant, set) and their
  two ``variants_table()`` columns) add at most 3% to a 1M-item, 16-variant sweep with
  ``variants_table()`` (the measure of benchmarks/test_analytics_cost.py) over 10,000 sets in
  which ~30% of the items are in call/result groups of 2-4;
* a sweep whose 16 variants all select groups (``groups = "tool_group"``) costs at most 1.25x
  the same sweep without (CPU time and wall time).

Medians of interleaved rounds, ratios measured in one process.
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


def _orphan_analytics(res) -> int:
    """What the orphan analytics add to ``res.variants_table()``, from scratch: the link pass
    (cached per table: dropped first, so it counts in full), the counts, and the two masked
    columns (as ``SweepResult.orphans`` and ``variants_table`` build them)."""
    res.table._cache.pop(("tool_links",), None)
    cols = orphan_columns(res.run)
    assert cols is not None
    for a in cols.values():
        a[res.failed] = 0
    failed = res.failed.reshape(-1)
    return sum(len(pa.array(a.reshape(-1), mask=failed)) for a in cols.values())


def _timed(f) -> tuple[float, float]:
    w0, c0 = time.perf_counter(), time.process_time()
    f()
    return time.perf_counter() - w0, time.process_time() - c0


def test_orphan_analytics_add_at_most_3_percent(monkeypatch):
    """Each round (interleaved: the machine's load drifts) times, in wall and CPU time (every
    thread's), a sweep + ``variants_table()`` with the orphan analytics, the same without
    (``orphan_columns`` answering None, as for items without the link columns), and the
    analytics alone from scratch. The asserted share is the analytics' median over the
    median sweep without them; the end-to-end difference of the two sweeps is printed beside
    it (on a loaded machine it is mostly noise: a 3% difference is ~1.5 sigma of one sweep)."""
    from cupel_np.analysis import sensitivity

    n = 1_000_000
    table = c.ItemTable.from_arrow(tool_pair_arrow(n), set_column="sid")
    links = tool_links(table)
    grouped = int(np.diff(links.link_off).sum())
    vs = variants(16)
    budget = c.ContextBudget(20_000, 12_000)
    res = c.sweep(table, budget, vs)
    assert "orphan_calls" in res.variants_table().column_names  # compiled, and on by default
    _orphan_analytics(res)

    def with_orphans():
        table._cache.pop(("tool_links",), None)  # the link pass counts in every round
        assert "orphan_calls" in c.sweep(table, budget, vs).variants_table().column_names

    def without_orphans():
        with monkeypatch.context() as m:
            m.setattr(sensitivity, "orphan_columns", lambda run: None)
            assert "orphan_calls" not in c.sweep(table, budget, vs).variants_table().column_names

    times: dict[str, list[tuple[float, float]]] = {"with": [], "without": [], "alone": []}
    for r in range(7):
        pair = [("with", with_orphans), ("without", without_orphans)]
        for name, f in pair if r % 2 else pair[::-1]:
            times[name].append(_timed(f))
        times["alone"].append(_timed(lambda: _orphan_analytics(res)))
    wall = {k: float(np.median([t[0] for t in v])) for k, v in times.items()}
    cpu = {k: float(np.median([t[1] for t in v])) for k, v in times.items()}
    share_wall = wall["alone"] / wall["without"]
    share_cpu = cpu["alone"] / cpu["without"]
    res.table._cache.pop(("tool_links",), None)
    o = res.orphans
    print(
        f"\n1M x 16 over 10,000 sets, {grouped / n:.0%} of items in call/result groups (medians of 7 interleaved "
        f"rounds): sweep + variants_table without orphan analytics {wall['without']:.3f}s wall / "
        f"{cpu['without']:.3f}s CPU; the analytics alone (link pass from scratch, counts, columns) "
        f"{wall['alone'] * 1e3:.1f} ms wall / {cpu['alone'] * 1e3:.1f} ms CPU = {share_wall:.2%} wall, "
        f"{share_cpu:.2%} CPU; end to end with/without {wall['with'] / wall['without']:.3f}x wall, "
        f"{cpu['with'] / cpu['without']:.3f}x CPU ({int(o['orphan_calls'].sum()):,} orphan calls, "
        f"{int(o['orphan_results'].sum()):,} orphan results)"
    )
    assert 0.25 <= grouped / n <= 0.35
    assert share_wall <= 0.03
    assert share_cpu <= 0.03


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
