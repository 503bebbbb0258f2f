"""Report analytics, stage events and funnel, overflow events (issue 19) against the oracle."""

import math
import sys
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import naive  # noqa: E402
import strategies as S  # noqa: E402

import cupel_np as c  # noqa: E402
from cupel_np.analysis import analytics  # noqa: E402
from cupel_np.analysis.pipeline import Pipeline  # noqa: E402
from cupel_np.analysis.trace import (  # noqa: E402
    STAGES,
    DiagnosticTraceCollector,
    NullTraceCollector,
    OverflowEvent,
    PipelineStage,
    TraceDetailLevel,
)
from cupel_np.errors import CupelError  # noqa: E402

PROPS = settings(
    max_examples=S.examples(60, 600),
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

ANALYTICS = ("budget_utilization", "kind_diversity", "timestamp_coverage", "tokens_over_budget")


def _same(a, b) -> bool:
    """Equal, NaN equal to NaN (budget_utilization with max_tokens = 0)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def _engine_variants(variants):
    try:
        return [(label, c.Policy.from_dict(config), c.ContextBudget(**budget)) for label, budget, config in variants]
    except CupelError:
        return None


def _quota_rows_of(report_rows):
    return [(r.kind, r.mode, r.require, r.cap, r.actual, r.utilization) for r in report_rows]


@PROPS
@given(case=S.sensitivity_cases())
def test_sweep_analytics_quota_and_funnel_equal_the_oracle_and_the_report_methods(case):
    """Every analytics column, every quota_table row and every funnel_table row equals the
    oracle's per-report value; SelectionReport's methods equal the sweep's columns."""
    rows, keys, variants = case
    ours = _engine_variants(variants)
    try:
        want = naive.policy_sensitivity(rows, variants, keys)
    except naive.NaiveError as err:
        assert err.code == "invalid_config"
        want = None
    assert (ours is None) == (want is None)
    if ours is None:
        return
    table = c.ItemTable.from_items([dict(d, conv=k) for d, k in zip(rows, keys)], set_column="conv")
    res = c.sweep(table, None, ours, on_error="collect")
    vt = iter(res.variants_table().to_pylist())
    qt = res.quota_table().to_pylist()
    ft = iter(res.funnel_table().to_pylist())
    got_quota: dict = {}
    for r in qt:
        got_quota.setdefault((r["variant"], r["conv"]), []).append(
            (r["kind"], r["mode"], r["require"], r["cap"], r["actual"], r["utilization"])
        )
    for label, budget, config in variants:
        for s in want:
            ok = dict(s["ok"])
            row = next(vt)
            funnel = [next(ft) for _ in STAGES]
            assert [f["stage"] for f in funnel] == [st.value for st in STAGES]
            if label not in ok:
                assert all(row[k] is None for k in ANALYTICS), row
                assert all(f["items_in"] is None and f["items_out"] is None for f in funnel)
                assert all(q[5] is None and q[4] is None for q in got_quota.get((label, s["key"]), []))
                continue
            items = [rows[r] for r in s["rows"]]
            an = naive.analytics(items, ok[label], budget, config)
            for k in ANALYTICS:
                assert _same(row[k], an[k]), (k, row[k], an[k])
            want_quota = [(k, m, r, cp, a, None if u is None else u) for k, m, r, cp, a, u in an["quota"]]
            assert got_quota.get((label, s["key"]), []) == want_quota
            want_funnel = naive.funnel(items, budget, config)
            assert [(f["stage"], f["items_in"], f["items_out"], f["excluded"]) for f in funnel] == want_funnel
            # the per-report methods give the same values as the sweep's columns
            rep = res.selection_report(label, s["key"])
            assert _same(rep.budget_utilization(), row["budget_utilization"])
            assert rep.kind_diversity() == row["kind_diversity"]
            assert rep.timestamp_coverage() == row["timestamp_coverage"]
            assert (rep.overflow.tokens_over_budget if rep.overflow else 0) == row["tokens_over_budget"]
            assert _quota_rows_of(rep.quota_utilization()) == want_quota


@PROPS
@given(case=S.pipeline_cases())
def test_dry_run_events_five_stages_in_order_counts_equal_the_oracle(case):
    items, budget, config = case
    try:
        policy = c.Policy.from_dict(config)
        b = c.ContextBudget(**budget)
    except CupelError:
        return
    try:
        want = naive.funnel(items, budget, config)
    except naive.NaiveError:
        want = None
    col = DiagnosticTraceCollector(TraceDetailLevel.ITEM)
    try:
        rep = Pipeline(policy).dry_run([c.ContextItem(**d) for d in items], b, trace=col)
    except CupelError:
        assert want is None
        return
    assert want is not None
    stage_events = [e for e in rep.events if e.message is None]
    assert [e.stage for e in stage_events] == list(STAGES)
    assert [e.item_count for e in stage_events] == [out for _s, _i, out, _x in want]
    assert all(e.duration_ms >= 0.0 for e in stage_events)
    # item events come before their stage's event, never after it
    pos = 0
    for e in rep.events:
        if e.message is None:
            pos += 1
        else:
            assert STAGES.index(e.stage) == pos, e
            assert (e.duration_ms, e.item_count) == (0.0, 1)
    # one item event per excluded item (plus warnings), in the stage that excluded it
    per_stage = {st: sum(1 for e in rep.events if e.stage is st and e.message and ":" in e.message) for st in STAGES}
    for st, (_s, _n_in, _n_out, n_x) in zip(STAGES, want):
        if st in (PipelineStage.Classify, PipelineStage.Deduplicate):
            assert per_stage[st] == n_x
        if st is PipelineStage.Place:
            # a truncated item is BudgetExceeded, or PinnedOverride where the set has pinned items
            # (.NET's reason, and ours since issue 18; the oracle counts both as truncated)
            trunc = sum(
                1
                for e in rep.events
                if e.stage is st and (e.message or "").startswith(("BudgetExceeded", "PinnedOverride"))
            )
            assert trunc == n_x
    assert col.events == rep.events


def test_stage_level_collector_gets_no_item_events_and_the_callback_sees_each_event():
    items = [c.ContextItem("a", 10), c.ContextItem("a", 10), c.ContextItem("neg", -3), c.ContextItem("big", 900)]
    seen = []
    col = DiagnosticTraceCollector(callback=seen.append)
    rep = c.Pipeline(c.preset("chat")).dry_run(items, c.ContextBudget(100, 50), trace=col)
    assert [e.stage for e in rep.events] == list(STAGES)
    assert seen == col.events == rep.events
    assert all(e.message is None for e in rep.events)
    # default: a stage-level collector, five stage events on the report
    rep = c.Pipeline(c.preset("chat")).dry_run(items, c.ContextBudget(100, 50))
    assert [(e.stage, e.item_count) for e in rep.events] == [
        (PipelineStage.Classify, 3),
        (PipelineStage.Score, 3),
        (PipelineStage.Deduplicate, 2),
        (PipelineStage.Slice, 1),
        (PipelineStage.Place, 1),
    ]
    assert rep.to_dict()["events"][0]["stage"] == "Classify"
    # the null collector: nothing recorded, nothing on the report
    assert (
        c.Pipeline(c.preset("chat")).dry_run(items, c.ContextBudget(100, 50), trace=NullTraceCollector()).events == []
    )


def test_item_events_carry_the_upstream_messages():
    pol = c.Policy.from_dict(
        {
            "scorers": [{"type": "priority"}],
            "slicer": "count_quota",
            "entries": [{"kind": "Tool", "require_count": 3, "cap_count": 3}, {"kind": "Doc", "cap_count": 1}],
        }
    )
    items = [
        c.ContextItem("t1", 5, kind="Tool"),
        c.ContextItem("d1", 5, kind="Doc"),
        c.ContextItem("d2", 5, kind="Doc"),
    ]
    col = DiagnosticTraceCollector(TraceDetailLevel.ITEM)
    rep = c.Pipeline(pol).dry_run(items, c.ContextBudget(100, 100), trace=col)
    msgs = [e.message for e in rep.events if e.message]
    assert "CountQuotaSlice: shortfall for kind 'Tool': required 3, satisfied 1." in msgs
    assert "CountQuotaSlice: item excluded \u2014 kind 'Doc' reached cap 1 (ExclusionReason.CountCapExceeded)." in msgs


def _overflow_case(strategy):
    pol = c.Policy.from_dict({"scorers": [{"type": "priority"}], "overflow_strategy": strategy})
    items = [c.ContextItem("sys", 80, pinned=True), c.ContextItem("m", 10), c.ContextItem("z", 0)]
    return pol, items, c.ContextBudget(100, 50)


def test_proceed_delivers_one_overflow_event_throw_and_truncate_none():
    pol, items, budget = _overflow_case("proceed")
    got = []
    col = DiagnosticTraceCollector()
    rep = c.Pipeline(pol, on_overflow=got.append).dry_run(items, budget, trace=col)
    assert len(got) == 1 and isinstance(got[0], OverflowEvent)
    assert got[0].tokens_over_budget == 80 + 0 - 50
    assert sorted(i.content for i in got[0].overflowing_items) == sorted(i.item.content for i in rep.included)
    assert "sys" in [i.content for i in got[0].overflowing_items]
    assert got[0].budget == budget
    assert col.overflow_events == got and rep.overflow == got[0]
    res = c.sweep(items, budget, [("p", pol), ("t", _overflow_case("truncate")[0])])
    assert res.variants_table().column("tokens_over_budget").to_pylist() == [30, 0]
    got.clear()
    c.Pipeline(_overflow_case("truncate")[0], on_overflow=got.append).dry_run(items, budget)
    assert got == []
    with pytest.raises(CupelError):
        c.Pipeline(_overflow_case("throw")[0], on_overflow=got.append).dry_run(items, budget)
    assert got == []
    # within budget: no event under proceed either
    c.Pipeline(pol, on_overflow=got.append).dry_run(items[1:], budget)
    assert got == []


def test_quota_edge_cases_zero_target_zero_cap_no_cap_and_zero_max_tokens():
    items = [c.ContextItem("a", 0, kind="Doc"), c.ContextItem("b", 0, kind="tool")]
    pol = c.Policy.from_dict(
        {"scorers": [{"type": "priority"}], "slicer": "quota", "quotas": [{"kind": "doc", "require": 0, "cap": 0}]}
    )
    rep = c.Pipeline(pol).dry_run(items, c.ContextBudget(0, 0))
    assert math.isnan(rep.budget_utilization())  # max_tokens = 0
    assert rep.included == []
    assert (rep.kind_diversity(), rep.timestamp_coverage()) == (0, 0.0)  # nothing included
    (q,) = rep.quota_utilization()
    assert (q.actual, q.utilization) == (0.0, 0.0)  # zero target, zero cap
    cnt = c.Policy.from_dict(
        {"scorers": [{"type": "priority"}], "slicer": "count_quota", "entries": [{"kind": "Doc", "require_count": 1}]}
    )
    (q,) = c.Pipeline(cnt).dry_run(items, c.ContextBudget(10, 10)).quota_utilization()
    assert (q.mode, q.cap, q.actual, q.utilization) == ("count", None, 1.0, None)
    qt = c.sweep(items, c.ContextBudget(10, 10), [("c", cnt), ("q", pol)]).quota_table().to_pylist()
    assert [(r["variant"], r["kind"], r["cap"], r["utilization"]) for r in qt] == [
        ("c", "Doc", None, None),
        ("q", "doc", 0.0, 0.0),
    ]
    # percentage against target_tokens, clamped to [0, 1]
    big = [c.ContextItem("x", 40, kind="Doc", timestamp=None), c.ContextItem("y", 10, kind="Tool")]
    pol2 = c.Policy.from_dict(
        {"scorers": [{"type": "priority"}], "slicer": "quota", "quotas": [{"kind": "Doc", "require": 10, "cap": 50}]}
    )
    rep = c.Pipeline(pol2).dry_run(big, c.ContextBudget(200, 100))
    (q,) = rep.quota_utilization()
    want = sum(i.item.tokens for i in rep.included if i.item.kind == "Doc") / 100 * 100.0
    assert q.actual == want and q.utilization == min(want / 50.0, 1.0)
    assert rep.budget_utilization() == sum(i.item.tokens for i in rep.included) / 200


def test_functions_work_on_any_report_and_match_methods():
    items = [c.ContextItem("a", 10, kind="A"), c.ContextItem("b", 10, kind="a")]
    rep = c.Pipeline(c.preset("chat")).dry_run(items, c.ContextBudget(100, 100))
    assert analytics.kind_diversity(rep) == rep.kind_diversity() == 1  # kinds compare ASCII-folded
    assert analytics.budget_utilization(rep, c.ContextBudget(40, 40)) == 0.5
    assert rep.budget_utilization() == 0.2


def test_stage_seconds_and_sweep_funnel_table_shape():
    t = c.ItemTable.from_parquet(
        Path(__file__).resolve().parents[2] / "data" / "sample_sessions.parquet", set_column="session_id"
    )
    res = c.sweep(t, c.ContextBudget(8000, 6000, 1000), [("chat", c.preset("chat")), ("rag", c.preset("rag"))])
    ss = res.stage_seconds().to_pylist()
    assert [r["phase"] for r in ss] == ["classify", "score"] + ["score", "deduplicate", "slice", "place"] * 2 + [
        "diffs"
    ]
    assert all(r["seconds"] >= 0.0 for r in ss)
    ft = res.funnel_table()
    assert ft.num_rows == 2 * t.n_sets * 5
    vt = res.variants_table().to_pylist()
    place = [r for r in ft.to_pylist() if r["stage"] == "Place"]
    assert [r["items_out"] for r in place] == [r["included_count"] for r in vt]


def test_sweep_columns_for_very_many_sets_take_the_sorting_path_and_agree():
    """5,000 sets x 9 kinds is too big a (set, kind) grid: the other path gives the same."""
    rng = np.random.default_rng(3)
    n = 7_000
    kinds = [f"K{i}" for i in range(9)]
    rows = [
        dict(
            content=f"c{i}",
            tokens=int(rng.integers(0, 60)),
            kind=kinds[int(rng.integers(0, 9))],
            sid=int(rng.integers(0, 5_000)),
            timestamp=datetime(2024, 1, 1, tzinfo=UTC) if rng.random() < 0.5 else None,
        )
        for i in range(n)
    ]
    t = c.ItemTable.from_items(rows, set_column="sid")
    assert t.n_sets * (len(t.kind_vocab) + 1) * 2 > max(4 * t.n, 1 << 16)
    res = c.sweep(t, c.ContextBudget(100, 80), [("chat", c.preset("chat"))])
    cols = analytics.sweep_columns(res.run)
    inc = res.run.included[0]
    for s in range(t.n_sets):
        lo, hi = int(t.offsets[s]), int(t.offsets[s + 1])
        r = np.flatnonzero(inc[lo:hi]) + lo
        assert cols["included_count"][0, s] == r.size
        assert cols["kind_diversity"][0, s] == len(set(t.kind_id[r].tolist()))
        assert cols["timestamped_count"][0, s] == int(t.timestamp_valid[r].sum())
        assert cols["tokens_used"][0, s] == int(t.tokens[r].sum())


def test_conformance_runner_checks_the_observability_keys(tmp_path):
    from cupel_np.cli import conformance

    src = Path(__file__).resolve().parents[1] / "vectors" / "observability"
    vec = (src / "analytics-count-quota-events.toml").read_text()
    assert conformance.run_vector(src / "analytics-count-quota-events.toml") is None
    for old, new, what in [
        ("kind_diversity = 3", "kind_diversity = 2", "analytics kind_diversity"),
        ("utilization = 0.3333333333333333", "utilization = 0.5", "quota 'Tool' utilization"),
        ('stage = "Slice"\nitem_count = 3', 'stage = "Slice"\nitem_count = 4', "stage events"),
        ("required 3, satisfied 1.", "required 3, satisfied 2.", "item events"),
    ]:
        p = tmp_path / "v.toml"
        assert old in vec
        p.write_text(vec.replace(old, new, 1))
        assert what in (conformance.run_vector(p) or ""), what


def test_truncation_pinned_override_counts_as_a_place_exclusion():
    """R_TRUNCATED_PINNED (truncation's PinnedOverride) is excluded by the Place stage in the
    stage events and the funnel, as in the report's excluded order (one table of stages:
    engine.reasons.EXCLUSION_STAGE)."""
    import cupel_np as c
    from cupel_np.analysis.trace import DiagnosticTraceCollector, PipelineStage

    items = [
        c.ContextItem("pinned-system", 60, kind="SystemPrompt", pinned=True),
        c.ContextItem("forced-tool", 60, kind="ToolOutput", future_relevance_hint=0.8),
        c.ContextItem("small-note", 30, kind="Message", future_relevance_hint=0.1),
    ]
    policy = c.Policy.from_dict(
        {
            "slicer": "count_quota",
            "entries": [{"kind": "ToolOutput", "require_count": 1}],
            "deduplication": False,
            "overflow_strategy": "truncate",
            "scorers": [{"type": "reflexive"}],
        }
    )
    budget = c.ContextBudget(200, 100)
    trace = DiagnosticTraceCollector()
    report = c.Pipeline(policy).dry_run(items, budget, trace=trace)
    assert [e.item.content for e in report.excluded if type(e.reason).__name__ == "PinnedOverride"] == ["forced-tool"]
    place = [e for e in trace.events if e.stage == PipelineStage.Place and e.message is None][-1]
    assert place.item_count == len(report.included) == 1
    table = c.ItemTable.from_items([it.to_dict() for it in items])
    funnel = c.sweep(table, budget, [("p", policy)]).funnel_table().to_pylist()
    place_row = [r for r in funnel if r["stage"] == "Place"][0]
    assert place_row["items_out"] == 1 and place_row["excluded"] == 1
