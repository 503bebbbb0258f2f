"""One selection (``Pipeline.run`` / ``dry_run`` on a list of ContextItems) takes shortcuts
that must not change a result: a table built from ContextItems skips the loader's checks
(the items were checked one by one) and hands back the very items it was built from, and a
small sweep runs on the calling thread; items keep their numeric records and a Pipeline its
policy's plan between calls. Each is compared with the long way here."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cupel_np as c
from cupel_np.model import items as items_mod
from tests.engine.test_small_path import assert_same_run
from tests.strategies import item_lists


def _as_items(dicts):
    return [c.ContextItem(**{k: v for k, v in d.items() if v is not None or k in ("content", "tokens")}) for d in dicts]


def _nan_safe(values):
    return [("NaN",) if isinstance(v, float) and v != v else v for v in values]


def _fields(item):
    return _nan_safe(list(item.to_dict().values()))


def _checked(items):
    """The table the loader's full checks give for the same columns."""
    quick = c.ItemTable.from_items(items)
    return quick, c.ItemTable(quick.table)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(item_lists(max_size=12, min_size=1))
def test_items_table_equals_the_checked_one(dicts):
    items = _as_items(dicts)
    quick, full = _checked(items)
    assert quick.table.schema.equals(full.table.schema)
    for name in quick.table.column_names:  # NaN hints compare equal here (Table.equals: never)
        a, b = (_nan_safe(t.table.column(name).to_pylist()) for t in (quick, full))
        assert a == b, name
    for name in ("tokens", "content_id", "kind_id", "pinned", "timestamp", "timestamp_valid", "input_row", "offsets"):
        a, b = getattr(quick, name), getattr(full, name)
        assert a.dtype == b.dtype and (a == b).all(), name
    assert quick.kind_vocab == full.kind_vocab
    for i in range(quick.n):
        assert quick.row(i) is items[i]  # the input's own objects ...
        assert _fields(quick.row(i)) == _fields(full.row(i))  # ... equal to the decoded rows


def test_a_token_sum_near_the_limit_still_runs_the_check():
    big = items_mod.TOKEN_LIMIT // 2
    items = [c.ContextItem("a", big), c.ContextItem("b", big)]
    try:
        c.ItemTable.from_items(items)
    except c.CupelError as e:
        assert "add up past" in str(e)
    else:
        raise AssertionError("the token-sum check did not run")


POLICIES = [
    c.Policy(c.CompositeScorer(((c.RecencyScorer(), 2.0), (c.KindScorer(), 1.0)))),
    c.Policy(c.PriorityScorer(), placer="u_shaped", overflow_strategy="truncate"),
    c.Policy(c.ReflexiveScorer(), slicer=c.KnapsackSlice(10), placer="u_shaped"),
    c.Policy(c.RecencyScorer(), slicer=c.QuotaSlice((c.QuotaEntry("Message", require=10, cap=60),), c.GreedySlice())),
    c.Policy(
        c.PriorityScorer(),
        slicer=c.CountQuotaSlice((c.CountQuotaEntry("Document", require_count=1, cap_count=2),)),
        overflow_strategy="proceed",
    ),
]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(item_lists(max_size=12, min_size=1), st.integers(0, 60), st.sampled_from(range(len(POLICIES))))
def test_run_and_dry_run_match_the_long_way(dicts, target, p):
    items = _as_items(dicts)
    budget = c.ContextBudget(max_tokens=target + 20, target_tokens=target)
    pipe = c.Pipeline(POLICIES[p])
    try:
        got = pipe.dry_run(items, budget)
    except c.CupelError as e:
        err = type(e), str(e)
        try:
            c.Pipeline(POLICIES[p]).dry_run(c.ItemTable(c.ItemTable.from_items(items).table), budget, threads=2)
        except c.CupelError as e2:
            assert (type(e2), str(e2)) == err
            return
        raise AssertionError("only the short way failed") from None
    # the long way: the fully checked table, on the pool
    from cupel_np.engine import parallel

    old = parallel.INLINE_WORK
    parallel.INLINE_WORK = 0
    try:
        want = pipe.dry_run(c.ItemTable(c.ItemTable.from_items(items).table), budget, threads=2)
    finally:
        parallel.INLINE_WORK = old
    for part in ("included", "excluded"):
        a, b = ([(_fields(i.item), repr(i.score), i.reason) for i in getattr(r, part)] for r in (got, want))
        assert a == b, part
    ran = pipe.run(items, budget)
    assert [id(i.item) for i in got.included] == [id(i) for i in ran]
    assert all(any(r is it for it in items) for r in ran)  # the caller's own objects


# -- what one selection keeps between calls ---------------------------------------------------


def _columns(table):
    names = ("tokens", "pinned", "content_id", "kind_id", "timestamp", "timestamp_valid", "priority")
    return [getattr(table, n) for n in names] + [table.priority_valid, table.hint, table.hint_valid, table.tag_fold_id]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(item_lists(max_size=12, min_size=1), st.data())
def test_the_records_items_keep_give_the_columns_they_were_made_from(dicts, data):
    """An item keeps its numeric record after its first selection: a table built again from
    the same items (all of them with records, or some: a list mixing seen and new items, or
    copies, which carry the record along) has the Arrow path's columns."""
    import copy

    from cupel_np.model.item_rows import ROW_KEY, ItemRows

    items = _as_items(dicts)
    fresh = [getattr(i, ROW_KEY) is None for i in items]
    first = ItemRows.from_items(items)
    assert all(fresh) and all(getattr(i, ROW_KEY) for i in items)
    extra = _as_items(data.draw(item_lists(max_size=4)))
    for again in (items, items[::-1] + extra, [copy.copy(i) for i in items]):
        table, arrow = ItemRows.from_items(again), c.ItemTable.from_items(again)
        for a, b in zip(_columns(table), _columns(arrow), strict=True):
            assert a.dtype == b.dtype and np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
    for a, b in zip(_columns(first), _columns(c.ItemTable.from_items(items)), strict=True):
        assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f")


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(item_lists(max_size=10, min_size=1), min_size=2, max_size=4), st.integers(0, 60), st.data())
def test_one_plan_over_many_requests_equals_the_batch_engine(lists, target, data):
    """A Pipeline keeps its policy's plan (slicer arrays and kind weights per kind
    vocabulary) across calls: each call over a new item set, with other kinds, is the batch
    engine's run of that set."""
    from cupel_np.engine.runner import run_policy
    from cupel_np.engine.small import PolicyPlan, run_one
    from cupel_np.model.item_rows import ItemRows

    policy = POLICIES[data.draw(st.sampled_from(range(len(POLICIES))))]
    plan = PolicyPlan.of(policy)
    budget = c.ContextBudget(max_tokens=target + 20, target_tokens=target)
    for dicts in lists:
        items = _as_items(dicts)
        assert_same_run(
            run_one(ItemRows.from_items(items), budget, plan), run_policy(ItemRows.from_items(items), budget, policy)
        )


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 700), st.data())
def test_rows_in_placed_order_equal_the_stable_argsort(k, data):
    """Rows in placed order (``sweep_run.in_placed_order``: ``run``'s items and a report's
    included rows): a permutation of the positions is
    scattered by the kernel, anything else sorted; both are the stable argsort's answer, and
    the order is said to be row order exactly when it is. The whole order
    (``placed_permutation``) is every row once, the rows not included after the others,
    ascending: ``object_take.first_of_permutation`` reorders a list's pointers by it."""
    from cupel_np.engine.batch_kernels import placed_rows as kernel
    from cupel_np.engine.sweep_run import in_placed_order as placed_rows
    from cupel_np.engine.sweep_run import placed_permutation

    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    included = np.zeros(10 * k + 1, dtype=np.bool_)
    included[rng.choice(included.shape[0], k, replace=False)] = True
    shape = data.draw(st.sampled_from(["shuffled", "in order", "one swap"]))
    pos = np.arange(k, dtype=np.int32) if shape != "shuffled" else rng.permutation(k).astype(np.int32)
    if shape == "one swap" and k > 1:
        i, j = rng.choice(k, 2, replace=False)
        pos[[i, j]] = pos[[j, i]]
    broken = bool(k) and data.draw(st.booleans())
    if broken:  # not a permutation: a repeated, a too large or a negative position
        pos[rng.integers(k)] = data.draw(st.sampled_from([int(pos[rng.integers(k)]), k + 3, -1, -k]))
    permutation = np.array_equal(np.sort(pos), np.arange(k))
    want = included.nonzero()[0][np.argsort(pos, kind="stable")]
    got, in_order = placed_rows(included, pos)
    assert got.dtype == want.dtype and np.array_equal(got, want)
    assert in_order == (permutation and np.array_equal(pos, np.arange(k)))
    order, k_got, in_order_too = placed_permutation(included, pos)
    assert k_got == k and in_order_too == in_order and np.array_equal(order[:k], want)
    assert np.array_equal(np.sort(order), np.arange(included.shape[0]))  # every row once
    assert np.array_equal(order[k:], (~included).nonzero()[0])
    # the kernel returns nothing unless the positions were a permutation (the caller sorts then)
    assert (kernel(included, pos).shape[0] == included.shape[0] + 1) == permutation
    if k:  # more positions than included rows, or fewer: not a set's placement either
        fewer = included.copy()
        fewer[included.nonzero()[0][-1]] = False
        assert kernel(fewer, pos).shape[0] == 0
        more = included.copy()
        more[(~included).nonzero()[0][0]] = True
        assert kernel(more, pos).shape[0] == 0
        # more positions than rows at all (the kernel's buffer has a slot per row): nothing
        assert kernel(included[:1].copy(), np.arange(3 * k + 5, dtype=np.int32)).shape[0] == 0
        for wrong in (fewer, more):  # never from the place stage: said, not truncated
            with pytest.raises(ValueError, match="placed positions for"):
                placed_rows(wrong, pos)
            with pytest.raises(ValueError, match="placed positions for"):
                placed_permutation(wrong, pos)


@pytest.mark.parametrize("n", [40, 300, 3000])
def test_a_session_placed_in_row_order_returns_the_callers_items(n):
    """A session's messages, timestamped in order and placed chronologically, come out in row
    order: ``run`` takes them by the inclusion mask (``ItemRows.rows``) and returns the caller's
    own objects in the report's order; a shuffled copy of the session is placed out of row
    order and returns the same objects in the same (chronological) order."""
    from datetime import UTC, datetime, timedelta

    t0 = datetime(2025, 3, 1, tzinfo=UTC)
    items = [
        c.ContextItem(f"m{i}", 5 + i % 23, kind=("Message", "ToolOutput")[i % 2], timestamp=t0 + timedelta(seconds=i))
        for i in range(n)
    ]
    budget = c.ContextBudget(max_tokens=10**6, target_tokens=sum(i.tokens for i in items) // 2)
    pipe = c.Pipeline(
        c.Policy(c.CompositeScorer(((c.RecencyScorer(), 1.0), (c.KindScorer(), 1.0))), placer="chronological")
    )
    for listed in (items, items[::-1]):
        sweep = pipe._sweep_single(listed, budget, pipe.policy, clock=False)
        assert sweep.placed_order(0, 0)[1] == (listed is items)
        ran = pipe.run(listed, budget)
        report = pipe.dry_run(listed, budget)
        assert [id(i) for i in ran] == [id(i.item) for i in report.included]
        assert [i.timestamp for i in ran] == sorted(i.timestamp for i in ran) and 0 < len(ran) < n
    # the same session as a table that does not hold its items (decoded from Arrow), and as a
    # list of dicts: the same items, by content, in the same order
    want = [i.content for i in pipe.run(items, budget)]
    for other in (c.ItemTable.from_arrow(c.ItemTable.from_items(items).table), [i.to_dict() for i in items]):
        assert [i.content for i in pipe.run(other, budget)] == want


@pytest.mark.parametrize("preset", ["chat", "rag", "long_running"])
@pytest.mark.parametrize("n", [300, 2500])
def test_run_of_hundreds_of_items_is_the_reports_and_leaves_the_list_alone(preset, n):
    """From 256 selected items ``run`` reorders a copy of the caller's list by pointer
    (``object_take.first_of_permutation``): the same objects as the report's included items,
    in its order; the caller's list unchanged; no reference left behind once the result goes."""
    import sys
    from datetime import UTC, datetime, timedelta

    rng = np.random.default_rng(n)
    t0 = datetime(2025, 3, 1, tzinfo=UTC)
    kinds = ("Message", "ToolOutput", "Document", "Memory")
    items = [
        c.ContextItem(
            f"item {i} {rng.integers(10**6)}",
            int(rng.integers(1, 60)),
            kind=kinds[int(rng.integers(4))],
            priority=int(rng.integers(0, 5)) if rng.random() < 0.5 else None,
            timestamp=t0 + timedelta(seconds=int(rng.integers(10**6))) if rng.random() < 0.8 else None,
            tags=("a", "b")[: int(rng.integers(0, 3))],
        )
        for i in range(n)
    ]
    listed = list(items)
    budget = c.ContextBudget(max_tokens=10**7, target_tokens=sum(i.tokens for i in items) * 9 // 10)
    pipe = c.Pipeline(dict(c.PRESETS)[preset])
    pipe.run(items, budget)  # (the items keep their records: later counts are steady)
    counts = [sys.getrefcount(i) for i in items]
    ran = pipe.run(items, budget)
    assert len(ran) >= 256 and ran is not items
    assert [id(i.item) for i in pipe.dry_run(items, budget).included] == [id(i) for i in ran]
    assert all(a is b for a, b in zip(items, listed)) and len(items) == n
    del ran
    assert [sys.getrefcount(i) for i in items] == counts
