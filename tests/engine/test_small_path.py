"""The small-set driver (``engine.small.run_one``, what ``Pipeline.run`` / ``dry_run`` use on
one item set) against the batch engine (``runner.run_policy``, a one-variant sweep): the same
``SweepRun``, array for array, on random item sets for every slicer (nested count quotas
included), placer, scorer type, overflow strategy, with and without groups, pinned and
zero-token items, duplicate contents and tied scores (``strategies.pipeline_cases``). Pipeline
against the naive oracle is ``test_properties.py``'s job (it runs on this driver too)."""

import dataclasses

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import pipeline_cases

import cupel_np as c
from cupel_np.analysis.trace import DiagnosticTraceCollector
from cupel_np.engine.runner import run_policy
from cupel_np.engine.small import PolicyPlan, classify_one, run_one
from cupel_np.engine.sweep_run import classify
from cupel_np.model.item_rows import ItemRows

PROPS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _as_items(dicts):
    return [c.ContextItem(**{k: v for k, v in d.items() if v is not None or k in ("content", "tokens")}) for d in dicts]


def _with_groups(dicts, groups):
    """Items with metadata ``g`` set from ``groups`` (None: no group)."""
    out = []
    for d, g in zip(dicts, groups):
        d = dict(d)
        if g is not None:
            d["metadata"] = {**(d.get("metadata") or {}), "g": g}
        out.append(d)
    return out


def _same_errors(a, b):
    assert list(a) == list(b)
    for s in a:
        assert type(a[s]) is type(b[s]) and str(a[s]) == str(b[s])


def assert_same_run(got, want):
    """Every result array and per-set detail of the two one-variant sweeps is identical."""
    g, w = got.sweep, want.sweep
    for name in ("negative", "pinned", "sc_rows", "sc_offsets", "pin_rows", "pin_offsets", "pinned_tokens"):
        a, b = getattr(g.classified, name), getattr(w.classified, name)
        assert a.dtype == b.dtype and np.array_equal(a, b), name
    for name in ("included", "reason", "effective_target", "avail_slice", "avail_place", "cap_dropped"):
        a, b = getattr(g, name), getattr(w, name)
        assert a.dtype == b.dtype and np.array_equal(a, b), name
    assert np.array_equal(g.placed_pos[0], w.placed_pos[0])
    for name in ("dedup_winner", "trunc_order", "count_cap"):
        for a, b in zip(getattr(g, name)[0], getattr(w, name)[0], strict=True):
            assert np.array_equal(a, b), name
    # scores bit for bit (NaN where both are NaN)
    assert np.array_equal(g.scores_for(0), w.scores_for(0), equal_nan=True)
    _same_errors(g.errors[0], w.errors[0])
    assert dict(g.shortfalls[0]) == dict(w.shortfalls[0])
    assert (g.group_plan[0] is None) == (w.group_plan[0] is None)


def _policy_budget(config, budget):
    return c.Policy.from_dict(config), c.ContextBudget(**budget)


@PROPS
@given(pipeline_cases(extreme_timestamps=True), st.data())
def test_small_driver_equals_the_batch_engine(case, data):
    dicts, budget, config = case
    if dicts and data.draw(st.booleans()):  # atomic groups over a few keys (ties across units too)
        keys = data.draw(st.lists(st.sampled_from([None, "g1", "g2", "g3"]), min_size=len(dicts), max_size=len(dicts)))
        dicts = _with_groups(dicts, keys)
        config = dict(config, groups="g")
    policy, bud = _policy_budget(config, budget)
    items = _as_items(dicts)
    want = run_policy(ItemRows.from_items(items), bud, policy)
    got = run_one(ItemRows.from_items(items), bud, PolicyPlan.of(policy))
    assert_same_run(got, want)
    # and on the Arrow path's table
    arrow = c.ItemTable.from_items(items)
    assert_same_run(run_one(arrow, bud, PolicyPlan.of(policy)), run_policy(arrow, bud, policy))


@PROPS
@given(pipeline_cases(extreme_timestamps=False))
def test_pipeline_run_and_dry_run_equal_the_batch_report(case):
    dicts, budget, config = case
    policy, bud = _policy_budget(config, budget)
    items = _as_items(dicts)
    pipe = c.Pipeline(policy)
    want = run_policy(ItemRows.from_items(items), bud, policy)
    errs = want.sweep.errors[0]
    if errs:
        with pytest.raises(type(errs[0]), match="."):
            pipe.run(items, bud)
        with pytest.raises(type(errs[0]), match="."):
            pipe.dry_run(items, bud)
        return
    report = c.SelectionReport(want, 0)
    got = pipe.dry_run(items, bud)
    assert np.array_equal(got.included_rows, report.included_rows)
    assert np.array_equal(got.excluded_rows, report.excluded_rows)
    assert [(i.score, i.reason) for i in got.included] == [(i.score, i.reason) for i in report.included]
    assert [(e.score, e.reason) for e in got.excluded] == [(e.score, e.reason) for e in report.excluded]
    assert [i.item for i in got.included] == pipe.run(items, bud)
    # the default collector's events, built when read, are those a collector records
    collector = DiagnosticTraceCollector()
    traced = pipe.dry_run(items, bud, trace=collector)
    assert [(e.stage, e.item_count) for e in got.events] == [(e.stage, e.item_count) for e in collector.events]
    assert len(got.events) == 5 and [e.stage for e in traced.events] == [e.stage for e in got.events]


def test_classify_one_equals_classify():
    items = [
        c.ContextItem("a", 3),
        c.ContextItem("b", -1, pinned=True),
        c.ContextItem("c", 0, pinned=True),
        c.ContextItem("d", -2),
        c.ContextItem("e", 7, pinned=True),
        c.ContextItem("f", 0),
    ]
    for some in (items, items[:1], items[1:2], []):
        t = ItemRows.from_items(some)
        a, b = classify_one(t), classify(t)
        for f in dataclasses.fields(a):
            x, y = getattr(a, f.name), getattr(b, f.name)
            assert x.dtype == y.dtype and np.array_equal(x, y), (len(some), f.name)


def test_classify_over_many_sets_equals_a_row_by_row_count():
    """``classify`` of a table of several sets (one empty, some without pins, pinned rows of
    negative tokens) against a count row by row: the scoreable and pinned rows and offsets,
    each set's pinned tokens and first pinned row."""
    rng = np.random.default_rng(5)
    sizes = [0, 4, 9, 1, 12, 0, 6]
    rows = []
    for s, k in enumerate(sizes):
        for i in range(k):
            pinned = s % 2 == 0 and rng.random() < 0.4
            rows.append({"sid": s, "content": f"{s}-{i}", "tokens": int(rng.integers(-3, 20)), "pinned": pinned})
    t = c.ItemTable.from_arrow(pa.Table.from_pylist(rows), set_column="sid")
    got = classify(t)
    tok, pin = t.tokens.tolist(), t.pinned.tolist()
    want_sc, want_pin, sc_off, pin_off, pin_tok, first = [], [], [0], [0], [], []
    for s in range(t.n_sets):
        lo, hi = int(t.offsets[s]), int(t.offsets[s + 1])
        p = [r for r in range(lo, hi) if pin[r] and tok[r] >= 0]
        want_pin += p
        want_sc += [r for r in range(lo, hi) if tok[r] >= 0 and not pin[r]]
        sc_off.append(len(want_sc))
        pin_off.append(len(want_pin))
        pin_tok.append(sum(tok[r] for r in p))
        first.append(p[0] if p else -1)
    assert got.sc_rows.tolist() == want_sc and got.sc_offsets.tolist() == sc_off
    assert got.pin_rows.tolist() == want_pin and got.pin_offsets.tolist() == pin_off
    assert got.pinned_tokens.dtype == np.int64 and got.pinned_tokens.tolist() == pin_tok
    assert got.first_pin.tolist() == first
    assert any(pin_tok) and got.negative.tolist() == [x < 0 for x in tok]


def test_column_scorer_is_checked_and_scored_like_the_batch_engine():
    table = c.ItemTable.from_arrow(
        pa.table({"content": ["a", "b", "c"], "tokens": [5, 5, 5], "s": [0.5, 2.0, 1.0], "word": ["x", "y", "z"]})
    )
    bud = c.ContextBudget(100, 10)
    policy = c.Policy(c.CompositeScorer(((c.ColumnScorer("s"), 1.0), (c.ReflexiveScorer(), 1.0))))
    assert_same_run(run_one(table, bud, PolicyPlan.of(policy)), run_policy(table, bud, policy))
    for col, err in (("nope", c.InvalidConfigError), ("word", c.InvalidInputTypeError)):
        bad = c.Policy(c.ColumnScorer(col))
        with pytest.raises(err) as small:
            run_one(table, bud, PolicyPlan.of(bad))
        with pytest.raises(err) as batch:
            run_policy(table, bud, bad)
        assert str(small.value) == str(batch.value)


def test_the_plan_follows_a_replaced_policy():
    """``Pipeline`` keeps its policy's plan; a policy assigned later gets its own."""
    items = [c.ContextItem("a", 5, priority=1, future_relevance_hint=0.9), c.ContextItem("b", 5, priority=2)]
    pipe = c.Pipeline(c.Policy(c.PriorityScorer()))
    bud = c.ContextBudget(100, 5)
    assert [i.content for i in pipe.run(items, bud)] == ["b"]
    pipe.policy = c.Policy(c.ReflexiveScorer())
    assert [i.content for i in pipe.run(items, bud)] == ["a"]
    assert [i.item.content for i in pipe.dry_run_with_policy(items, bud, c.Policy(c.PriorityScorer())).included] == [
        "b"
    ]
    assert [i.content for i in pipe.run(items, bud)] == ["a"]


_SPECIALIZATIONS = """
import json
import cupel_np as c
from cupel_np import _jit
from cupel_np.engine.runner import run_policy
from cupel_np.engine.small import PolicyPlan, run_one
from cupel_np.model.item_rows import ItemRows
from datetime import UTC, datetime, timedelta

t0 = datetime(2024, 1, 1, tzinfo=UTC)
items = [
    c.ContextItem(f"c{i % 17}", (i * 7) % 40, kind=("Message", "Tool", "Doc")[i % 3], priority=i % 5 or None,
                  tags=("a", "b")[: i % 3], timestamp=t0 + timedelta(seconds=i) if i % 4 else None,
                  future_relevance_hint=(i % 10) / 10, pinned=i % 13 == 0, metadata={"g": f"g{i % 6}"})
    for i in range(60)
]
quotas = c.QuotaSlice((c.QuotaEntry("Tool", require=10, cap=50),))
count = c.CountQuotaSlice((c.CountQuotaEntry("Tool", 1, 3),))
policies = [c.Policy(c.CompositeScorer(((p.scorer, 1.0), (c.TagScorer({"a": 1.0}), 0.5))), slicer=sl, placer=pl,
                     overflow_strategy=ov, groups=g)
            for p in c.PRESETS.values()
            for sl, pl, ov, g in [(c.GreedySlice(), "chronological", "throw", None),
                                  (c.KnapsackSlice(10), "u_shaped", "truncate", None),
                                  (quotas, "chronological", "proceed", "g"), (count, "u_shaped", "truncate", None)]]
budget = c.ContextBudget(1000, 300)
for p in policies:
    run_policy(ItemRows.from_items(items), budget, p)
before = _jit.specializations()
for p in policies:
    run_one(ItemRows.from_items(items), budget, PolicyPlan.of(p))
    c.Pipeline(p).run(items, budget)
print(json.dumps([before, _jit.specializations()]))
"""


#: the one kernel the batch engine's run does not call on these sets: the included rows' placed
#: order, which ``Pipeline.run`` and a report's included rows read (``SweepRun.placed_order``;
#: ``cupel-np warmup`` runs ``Pipeline.run``, so it compiles it; from 256 selected items ``run``
#: also reaches ``model.object_take._permute_words``, which warmup reaches too)
RUN_ONLY = "cupel_np.engine.batch_kernels.placed_rows"


def test_the_small_driver_reaches_no_kernel_specialization_of_its_own():
    """No new compile (cold start) and nothing ``cupel-np warmup`` would miss: every kernel
    signature the small driver calls is one the batch engine calls on the same sets, but
    ``Pipeline.run``'s placed order (one signature)."""
    import json
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _SPECIALIZATIONS], capture_output=True, text=True, check=True)
    before, after = json.loads(out.stdout)
    assert before and RUN_ONLY not in before
    assert len(after.pop(RUN_ONLY)) == 1
    assert after == before


def test_item_rows_hand_back_the_items_like_the_arrow_table():
    """``Pipeline.run``'s items: ``ItemRows.rows`` (the items by index) against the Arrow path."""
    items = [c.ContextItem(f"c{i}", i) for i in range(6)]
    rows, arrow = ItemRows.from_items(items), c.ItemTable.from_items(items)
    mask = np.array([True, False, True, True, False, False])
    for idx in (np.array([4, 0, 2]), np.zeros(0, np.int64), np.array([-1, 1]), [3, 1], mask):
        got = rows.rows(idx)
        assert [i.content for i in got] == [i.content for i in arrow.rows(idx)]
        assert all(any(g is it for it in items) for g in got)


def test_u_shaped_placement_leaves_the_timestamps_unread():
    """Only chronological placement reads the timestamp columns: a u-shaped selection whose
    scorers do not read them leaves an ItemRows' timestamp column unbuilt (on items new to the
    process, the costliest column to read), and selects what the Arrow path selects, on sets
    above and below the place kernel's chronological filter size."""
    from datetime import UTC, datetime, timedelta

    from cupel_np.engine.small import run_sweep_one

    t0 = datetime(2024, 1, 1, tzinfo=UTC)
    for n in (5, 300):
        items = [
            c.ContextItem(
                f"c{i}",
                5 + i % 7,
                timestamp=None if i % 4 == 0 else t0 + timedelta(minutes=i % 9),
                future_relevance_hint=(i % 5) / 5,
            )
            for i in range(n)
        ]
        budget = c.ContextBudget(max_tokens=4 * n, target_tokens=3 * n)
        for placer, overflow in (("u_shaped", "throw"), ("u_shaped", "truncate"), ("chronological", "throw")):
            plan = PolicyPlan.of(c.Policy(c.ReflexiveScorer(), placer=placer, overflow_strategy=overflow))
            rows = ItemRows.from_items(items)
            got = run_sweep_one(rows, budget, plan)
            assert ("_timestamps" in vars(rows)) == (placer == "chronological"), (n, placer)
            want = run_sweep_one(c.ItemTable.from_items(items), budget, plan)
            assert got.included[0].any() and np.array_equal(got.included[0], want.included[0])
            assert np.array_equal(got.placed_pos[0], want.placed_pos[0])
            assert np.array_equal(got.reason[0], want.reason[0])


def test_the_timestamp_order_is_built_only_where_placement_reads_it(monkeypatch):
    """A single set's shared timestamp order is built by the place stage, and only when the
    set may keep more than ``stages.SMALL_PLACE`` items (and ``placers.CHRONO_FILTER_MIN``)
    and 1/32 of its timestamped rows (else the place kernel sorts the kept items itself, by
    insertion); the selection is the batch engine's either way, whose sweep filters the
    shared order from CHRONO_FILTER_MIN kept items (tied timestamps, a pinned item, both
    overflow strategies that place)."""
    from datetime import UTC, datetime, timedelta

    from cupel_np.engine import placers, small, stages

    built = []
    order_of = small._timestamp_order
    monkeypatch.setattr(small, "_timestamp_order", lambda table: built.append(1) or order_of(table))
    t0 = datetime(2024, 1, 1, tzinfo=UTC)
    items = [
        c.ContextItem(f"c{i}", 10, timestamp=None if i % 5 == 0 else t0 + timedelta(hours=i % 6), pinned=i == 3)
        for i in range(150)
    ]
    least = max(placers.CHRONO_FILTER_MIN, stages.SMALL_PLACE)
    keeps = [5, placers.CHRONO_FILTER_MIN, 40, least, least + 1, 120]
    for keep in keeps:
        for overflow in ("throw", "truncate"):
            budget = c.ContextBudget(max_tokens=10 * keep + 50, target_tokens=10 * keep)
            policy = c.Policy(c.RecencyScorer(), placer="chronological", overflow_strategy=overflow)
            built.clear()
            got = run_one(ItemRows.from_items(items), budget, PolicyPlan.of(policy))
            assert bool(built) == (keep > least), (keep, overflow)
            assert int(np.count_nonzero(got.sweep.included[0])) == keep
            assert_same_run(got, run_policy(c.ItemTable.from_items(items), budget, policy))


@pytest.mark.parametrize("shape", ["ordered", "swapped", "shuffled", "shuffled_ties", "centuries"])
def test_the_timestamp_order_of_one_set_is_the_stable_argsorts(monkeypatch, shape):
    """``small._timestamp_order`` sorts timestamps that come nearly in order with NumPy's stable
    sort and a set of ``TS_PACKED_MIN`` rows or more far from order by packed (timestamp, row)
    keys; the order is the stable argsort's either way (ties in row order), on any CPU's sort
    (``CUPEL_NP_SORT``'s choice forced both ways), untimestamped rows left out; timestamps too
    far apart for the row index to fit beside them are argsorted stably."""
    from datetime import UTC, datetime, timedelta

    from cupel_np import _cores
    from cupel_np.engine import placers, small

    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    rng = np.random.default_rng(len(shape))
    n = 3000
    ts = 1_700_000_000_000_000 + np.sort(rng.integers(0, 10**10, n))
    if shape == "swapped":  # one in ten next to its neighbour's place
        i = rng.choice(n - 1, n // 10, replace=False)
        ts[i], ts[i + 1] = ts[i + 1].copy(), ts[i].copy()
    elif shape in ("shuffled", "centuries"):
        ts = rng.permutation(ts)
    elif shape == "shuffled_ties":
        ts = rng.integers(0, 40, n) * 10**9
    if shape == "centuries":  # year 1 to 9999 in microseconds: 58 bits, and 12 bits of rows
        ts[::2] = -62_135_596_800_000_000
        ts[1::2] = 253_402_300_799_000_000
    valid = rng.random(n) > 0.1
    table = ItemRows.from_items(
        [
            c.ContextItem(f"c{i}", 1, timestamp=epoch + timedelta(microseconds=int(t)) if ok else None)
            for i, (t, ok) in enumerate(zip(ts, valid, strict=True))
        ]
    )
    ts, valid = table.timestamp, table.timestamp_valid
    rows = valid.nonzero()[0]
    want = rows[np.argsort(ts[rows], kind="stable")]
    packed = []
    real = placers.sorted_by_timestamp
    monkeypatch.setattr(placers, "sorted_by_timestamp", lambda *a: packed.append(1) or real(*a))
    for chosen in (True, False):
        monkeypatch.setattr(_cores, "_SORT_CHOICE", [chosen])
        got = small._timestamp_order(table)
        assert np.array_equal(got.order, want)
        assert np.array_equal(got.sorted, ts[want])
        assert list(got.offsets) == [0, rows.shape[0]]
    assert bool(packed) == (shape in ("shuffled", "shuffled_ties", "centuries")), shape
