"""Policy sensitivity and sweeps: sweep == policy_sensitivity == V separate dry runs diffed by
hand (content-keyed, one status per content), on generated inputs with duplicates; the same
against the independent oracle ``naive.policy_sensitivity`` (per-variant naive pipelines,
then the content-keyed diff) over multi-set tables, every table and report checked; plus the
API's errors and tables."""

import math
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import naive  # noqa: E402
import strategies as S  # noqa: E402
import test_properties as P  # noqa: E402

import cupel_np as c  # noqa: E402
from cupel_np.errors import CupelError, InvalidConfigError, InvalidInputTypeError  # noqa: E402

#: variants_table columns the oracle's ``analytics`` computes per (variant, set)
ANALYTICS_COLUMNS = ("budget_utilization", "kind_diversity", "timestamp_coverage", "tokens_over_budget")
SIGNAL_COLUMNS = (
    "constant_scorers",
    "knapsack_capacity",
    "knapsack_rounding_loss",
    "knapsack_flag",
    "selected_nothing",
)

PROPS = settings(
    max_examples=S.examples(120, 800),
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _budget(d):
    return c.ContextBudget(**d)


def _by_hand(items, budget, variants):
    """V separate dry runs, diffed by content: Included if any copy is included. A variant
    may carry its own budget as a third element."""
    ok, failed, status = [], [], {}
    for label, pol, *own in variants:
        try:
            rep = c.Pipeline(pol).dry_run(items, own[0] if own else budget)
        except CupelError as e:
            failed.append((label, e.code))
            continue
        ok.append((label, [i.item.content for i in rep.included]))
        inc = {i.item.content for i in rep.included}
        for it in items:
            status.setdefault(it.content, {})[label] = it.content in inc
    diffs = {}
    for content, by_label in status.items():
        vals = [by_label[l] for l, _ in ok]
        if any(vals) and not all(vals):
            diffs[content] = [(l, "Included" if by_label[l] else "Excluded") for l, _ in ok]
    return ok, failed, diffs


def _variants(draw_configs):
    return [(f"v{i}", c.Policy.from_dict(cfg)) for i, cfg in enumerate(draw_configs)]


@PROPS
@given(items=S.item_lists(max_size=10), budget=S.budgets(), configs=st.lists(S.configs(), min_size=2, max_size=4))
def test_policy_sensitivity_equals_dry_runs_diffed_by_hand(items, budget, configs):
    items = [c.ContextItem(**d) for d in items]
    budget = _budget(budget)
    variants = _variants(configs)
    ok, failed, diffs = _by_hand(items, budget, variants)
    rep = c.policy_sensitivity(items, budget, variants, on_error="collect")
    assert [(l, [i.item.content for i in r.included]) for l, r in rep.variants] == ok
    assert [(l, e.code) for l, e in rep.failed] == failed
    got = {e.content: [(l, s.value) for l, s in e.statuses] for e in rep.diffs}
    assert got == diffs
    assert len(rep.diffs) == len(diffs)  # one entry per content, never two
    if failed:
        with pytest.raises(CupelError) as ei:
            c.policy_sensitivity(items, budget, variants)
        assert ei.value.code == failed[0][1] and repr(failed[0][0]) in str(ei.value)


@PROPS
@given(
    data=S.item_sets(max_sets=4, max_items=8),
    budgets=st.lists(S.budgets(), min_size=2, max_size=3),
    configs=st.lists(S.configs(), min_size=2, max_size=3),
)
def test_sweep_over_many_sets_equals_per_set_sensitivity(data, budgets, configs):
    sets, interleaving = data
    rows = [dict(sets[s][k], session=f"s{s}") for s, k in interleaving]
    table = c.ItemTable.from_items(rows, set_column="session")
    variants = [(f"v{i}", c.Policy.from_dict(cfg), _budget(budgets[i % len(budgets)])) for i, cfg in enumerate(configs)]
    res = c.sweep(table, None, variants, on_error="collect")
    assert res.included.shape == (len(rows), len(variants))
    n_swing = 0
    for s, items in enumerate(sets):
        items = [c.ContextItem(**d) for d in items]
        key = f"s{s}"
        rep = res.report(key)
        for label, pol, bud in variants:
            try:
                one = c.Pipeline(pol).dry_run(items, bud)
            except CupelError as e:
                assert res.errors[label][key].code == e.code
                continue
            got = dict(rep.variants)[label]
            assert [x.item.content for x in got.included] == [x.item.content for x in one.included]
            assert [(x.item.content, x.reason) for x in got.excluded] == [
                (x.item.content, x.reason) for x in one.excluded
            ]
        _, _, diffs = _by_hand(items, None, variants)
        assert {e.content: [(l, st.value) for l, st in e.statuses] for e in rep.diffs} == diffs
        n_swing += len(rep.diffs)
    dt = res.diffs_table()
    assert dt.num_rows == n_swing == res.n_swing
    # the items table keeps every input row, in input order
    it = res.items_table()
    assert it.num_rows == len(rows)
    assert it.column("content").to_pylist() == [r["content"] for r in rows]


def test_errors_and_labels():
    items = [c.ContextItem("a", 10)]
    b = c.ContextBudget(100, 50)
    p = c.Policy(c.RecencyScorer())
    with pytest.raises(c.TooFewVariantsError, match="policy_sensitivity requires at least 2 variants") as ei:
        c.policy_sensitivity(items, b, [("only", p)])
    assert isinstance(ei.value, ValueError)
    with pytest.raises(InvalidConfigError, match="label 'x' is used twice"):
        c.policy_sensitivity(items, b, [("x", p), ("x", p)])
    with pytest.raises(InvalidConfigError, match="label must not be empty"):
        c.policy_sensitivity(items, b, [("", p), ("y", p)])
    with pytest.raises(InvalidInputTypeError, match="variant 'y': expected a Policy or a Pipeline, got dict"):
        c.policy_sensitivity(items, b, [("x", p), ("y", {})])
    with pytest.raises(InvalidInputTypeError, match="budget must be a ContextBudget"):
        c.policy_sensitivity(items, {"max_tokens": 1}, [("x", p), ("y", p)])
    with pytest.raises(InvalidInputTypeError, match="variant 'y': budget must be a ContextBudget"):
        c.sweep(items, b, [("x", p), ("y", p, 5)])
    many = c.ItemTable.from_items(
        [{"content": "a", "tokens": 1, "s": 1}, {"content": "b", "tokens": 1, "s": 2}], set_column="s"
    )
    with pytest.raises(InvalidConfigError, match="use cupel_np.sweep"):
        c.policy_sensitivity(many, b, [("x", p), ("y", p)])


def test_duplicate_content_gets_one_status_per_variant():
    # upstream emits one status per copy, so a content can be both Included and Excluded
    # under the same variant; here a content is Included when any copy is.
    items = [
        c.ContextItem("dup", 40, priority=10, future_relevance_hint=0.0),
        c.ContextItem("other", 40, priority=5, future_relevance_hint=0.5),
        c.ContextItem("dup", 40, priority=1, future_relevance_hint=1.0),
    ]
    b = c.ContextBudget(50, 40)
    by_prio = c.Policy(c.PriorityScorer(), deduplication=False)
    by_hint = c.Policy(c.ReflexiveScorer(), deduplication=False)
    rep = c.policy_sensitivity(items, b, [("prio", by_prio), ("hint", by_hint)])
    assert [i.item.priority for i in dict(rep.variants)["prio"].included] == [10]
    assert [i.item.priority for i in dict(rep.variants)["hint"].included] == [1]
    assert len(rep.diffs) == 0  # "dup" is Included under both


def test_collect_reports_failed_variant_never_drops_it():
    items = [c.ContextItem("pin", 80, pinned=True), c.ContextItem("a", 10)]
    b = c.ContextBudget(100, 50)
    throw = c.Policy(c.RecencyScorer(), overflow_strategy="throw")
    proceed = c.Policy(c.RecencyScorer(), overflow_strategy="proceed")
    truncate = c.Policy(c.RecencyScorer(), overflow_strategy="truncate")
    with pytest.raises(c.BudgetOverflowError, match="variant 'throw'"):
        c.policy_sensitivity(items, b, [("throw", throw), ("proceed", proceed)])
    rep = c.policy_sensitivity(
        items, b, [("throw", throw), ("proceed", proceed), ("truncate", truncate)], on_error="collect"
    )
    assert [l for l, _ in rep.failed] == ["throw"] and rep.failed[0][1].code == "overflow"
    assert [l for l, _ in rep.variants] == ["proceed", "truncate"]
    res = c.sweep(items, b, [("throw", throw), ("proceed", proceed)], on_error="collect")
    vt = res.variants_table().to_pylist()
    assert vt[0]["variant"] == "throw" and vt[0]["error"] == (
        "variant 'throw': selected items require 80 tokens, exceeding the target budget of 50 "
        "(overflow_strategy = 'throw')"
    )
    assert vt[1]["error"] is None
    assert vt[0]["included_count"] is None and vt[1]["included_count"] == 1
    assert res.diffs_table().num_rows == 0


def test_pipeline_method_and_from_pipelines():
    items = [
        c.ContextItem("a", 40, priority=10, future_relevance_hint=0.1),
        c.ContextItem("b", 40, priority=1, future_relevance_hint=0.9),
    ]
    b = c.ContextBudget(50, 40)
    pa_, pr = c.Pipeline(c.Policy(c.PriorityScorer())), c.Pipeline(c.Policy(c.ReflexiveScorer()))
    r1 = pa_.policy_sensitivity(items, b, [("priority", pa_), ("reflexive", pr)])
    r2 = c.policy_sensitivity_from_pipelines(items, b, [("priority", pa_), ("reflexive", pr)])
    for r in (r1, r2):
        assert sorted((d.content, d.statuses[0][1].value) for d in r.diffs) == [("a", "Included"), ("b", "Excluded")]
    with pytest.raises(InvalidInputTypeError, match="expected a Pipeline"):
        c.policy_sensitivity_from_pipelines(items, b, [("x", pa_.policy), ("y", pr)])


def test_tables_shape_and_types():
    t = c.ItemTable.from_parquet(
        Path(__file__).resolve().parents[2] / "data" / "sample_sessions.parquet", set_column="session_id"
    )
    res = c.sweep(
        t,
        c.ContextBudget(8000, 6000, 1000),
        [
            ("chat", c.preset("chat")),
            ("rag", c.preset("rag")),
            ("small", c.preset("chat"), c.ContextBudget(4000, 3000)),
        ],
    )
    dt = res.diffs_table()
    assert dt.column_names == ["session_id", "content", "chat", "rag", "small"]
    assert set(dt.column("rag").to_pylist()) <= {"Included", "Excluded"}
    it = res.items_table()
    assert it.num_rows == t.n and it.schema.field("chat.score").type == pa.float64()
    vt = res.variants_table()
    assert vt.num_rows == 3 * t.n_sets
    small = [r for r in vt.to_pylist() if r["variant"] == "small"]
    assert all(r["tokens_used"] <= 3000 or r["error"] for r in small)
    # a budget sweep: halving the budget never adds included items in these greedy runs
    assert res.included[:, 2].sum() < res.included[:, 0].sum()


def test_sweep_grid_labels_and_policies():
    grid = c.Sweep(
        ["chat", "rag"],
        weights=[{"kind": 1}, {"kind": 5}],
        slicers=["greedy", c.KnapsackSlice(50)],
        budgets=[c.ContextBudget(8000, 6000), c.ContextBudget(4000, 3000)],
    )
    vs = grid.variants()
    assert len(vs) == len(grid) == 16
    label, pol, bud = vs[-1]
    assert label == "rag|kind=5|knapsack(50)|4000/3000"
    assert pol.slicer == c.KnapsackSlice(50) and bud == c.ContextBudget(4000, 3000)
    assert [(s.type_name, w) for s, w in pol.scorer.entries] == [("reflexive", 3.0), ("kind", 5.0)]
    assert len({l for l, _, _ in vs}) == 16
    t = c.ItemTable.from_parquet(
        Path(__file__).resolve().parents[2] / "data" / "sample_sessions.parquet", set_column="session_id"
    )
    res = c.sweep(t, None, grid)
    assert res.labels == [l for l, _, _ in vs] and res.included.shape == (t.n, 16)
    with pytest.raises(InvalidConfigError, match="has no tag scorer to reweight"):
        c.Sweep(["chat"], weights=[{"tag": 1}]).variants()
    with pytest.raises(InvalidInputTypeError, match="budget must be a ContextBudget"):
        c.sweep(t, None, c.Sweep(["chat", "rag"]))  # no budget anywhere


# ---------------------------------------------------------------------------
# Against the independent oracle (tests/naive.py policy_sensitivity)
# ---------------------------------------------------------------------------


def _engine_variants(variants):
    """(label, Policy, ContextBudget) triples; None when the oracle too rejects a config."""
    try:
        return [(label, c.Policy.from_dict(config), c.ContextBudget(**budget)) for label, budget, config in variants]
    except CupelError:
        return None


def _oracle(rows, keys, variants):
    try:
        return naive.policy_sensitivity(rows, variants, keys)
    except naive.NaiveError as err:
        assert err.code == "invalid_config"
        return None


def _check_against_oracle(res, rows, want, variants, set_name):
    """Every view of a SweepResult equals the oracle's per-set results."""
    n_diffs = sum(len(s["diffs"]) for s in want)
    event("swings" if n_diffs else "no swing")
    event("a variant failed on a set" if any(s["failed"] for s in want) else "no failure")
    labels = [label for label, _b, _c in variants]
    # errors: exactly the failed (variant, set) cells, with their codes
    want_errors = {}
    for s in want:
        for label, code in s["failed"]:
            want_errors.setdefault(label, {})[s["key"]] = code
    assert {l: {k: e.code for k, e in errs.items()} for l, errs in res.errors.items()} == want_errors
    # diffs_table: set by first appearance, then content by its first row; null = failed
    want_diffs = []
    for s in want:
        failed = {label for label, _code in s["failed"]}
        for content, statuses in s["diffs"]:
            row = {set_name: s["key"], "content": content}
            row.update({label: None if label in failed else dict(statuses)[label] for label in labels})
            want_diffs.append(row)
    assert res.diffs_table().to_pylist() == want_diffs
    assert res.n_swing == len(want_diffs)
    # items_table: every input row, per variant included / score / reason / position
    got_items = res.items_table().to_pylist()
    assert [r["input_row"] for r in got_items] == list(range(len(rows)))
    assert [r["content"] for r in got_items] == [d["content"] for d in rows]
    for s in want:
        ok = dict(s["ok"])
        for label in labels:
            for row in s["rows"]:
                g = got_items[row]
                assert g.get(set_name) == s["key"]  # no set column: one set, key None
                if label not in ok:
                    assert [g[f"{label}.{f}"] for f in ("included", "score", "reason", "position")] == [None] * 4, (
                        label,
                        g,
                    )
            if label not in ok:
                continue
            report = ok[label]
            for pos, (r, score, reason) in enumerate(report["included"]):
                g = got_items[s["rows"][r]]
                assert (g[f"{label}.included"], g[f"{label}.reason"], g[f"{label}.position"]) == (True, reason, pos), (
                    label,
                    g,
                )
                assert P._score_close(g[f"{label}.score"], score), (label, g, score)
            for r, score, reason, _fields in report["excluded"]:
                g = got_items[s["rows"][r]]
                assert (g[f"{label}.included"], g[f"{label}.reason"], g[f"{label}.position"]) == (
                    False,
                    reason,
                    None,
                ), (label, g)
                assert P._score_close(g[f"{label}.score"], score), (label, g, score)
    # variants_table: per variant, per set (sets in order of first appearance)
    want_vt = []
    for label, budget, _config in variants:
        for s in want:
            ok = dict(s["ok"])
            row = {
                "variant": label,
                set_name: s["key"],
                "target_tokens": budget["target_tokens"],
                "swing_count": len(s["diffs"]),
            }
            if label in ok:
                inc = [s["rows"][r] for r, _s, _r in ok[label]["included"]]
                used = sum(rows[r]["tokens"] for r in inc)
                row.update(
                    included_count=len(inc),
                    tokens_used=used,
                    target_utilization=used / budget["target_tokens"] if budget["target_tokens"] else 0.0,
                    swing_included=sum(1 for content, _st in s["diffs"] if s["status"][content][label] == "Included"),
                )
                an = naive.analytics([rows[r] for r in s["rows"]], ok[label], budget, _config)
                row.update({k: an[k] for k in ANALYTICS_COLUMNS})
            else:
                row.update(included_count=None, tokens_used=None, target_utilization=None, swing_included=None)
                row.update(dict.fromkeys(ANALYTICS_COLUMNS))
            want_vt.append(row)
    got_vt = res.variants_table().to_pylist()
    assert len(got_vt) == len(want_vt)
    for g, w in zip(got_vt, want_vt):
        failed = w["included_count"] is None
        assert (g["error"] is None) != failed, (g, w)
        # the signal checks (constant scorers, knapsack capacity, empty selections) have their
        # own tests (tests/analysis/test_signals.py)
        g = {k: v for k, v in g.items() if k not in ("error", *SIGNAL_COLUMNS)}
        if not failed and math.isnan(w["budget_utilization"]):  # max_tokens = 0
            assert math.isnan(g.pop("budget_utilization")), g
            w.pop("budget_utilization")
        if not failed:
            assert abs(g.pop("target_utilization") - w.pop("target_utilization")) <= 1e-12 * max(
                1.0, w["tokens_used"] or 0
            ), (g, w)
        assert g == w
    # report(set): failed, variants (included rows in placed order), diffs
    for s in want:
        rep = res.report(s["key"])
        assert [(l, e.code) for l, e in rep.failed] == s["failed"]
        assert [l for l, _r in rep.variants] == [l for l, _r in s["ok"]]
        for (_label, got), (_l, w) in zip(rep.variants, s["ok"]):
            assert [int(r) for r in got.input_rows(got.included_rows)] == [s["rows"][r] for r, _s, _r in w["included"]]
            assert [int(r) for r in got.input_rows(got.excluded_rows)] == [
                s["rows"][r] for r, _s, _r, _f in w["excluded"]
            ]
        diffs = [(e.content, [(l, st.value) for l, st in e.statuses]) for e in rep.diffs]
        assert diffs == s["diffs"]
        assert len(rep.diffs) == len(s["diffs"])


def _sweep_matches_oracle(rows, keys, variants):
    """The sweep of ``rows`` grouped by ``keys`` == the oracle (or both refuse the variants)."""
    ours = _engine_variants(variants)
    want = _oracle(rows, keys, variants)
    assert (ours is None) == (want is None)
    if ours is None:
        return
    table = c.ItemTable.from_items([dict(d, conv=k) for d, k in zip(rows, keys)], set_column="conv")
    res = c.sweep(table, None, ours, on_error="collect")
    _check_against_oracle(res, rows, want, variants, "conv")


@PROPS
@given(case=S.sensitivity_cases())
def test_sweep_over_many_sets_matches_naive_oracle(case):
    rows, keys, variants = case
    _sweep_matches_oracle(rows, keys, variants)


@PROPS
@given(items=S.item_lists(min_size=1, max_size=12), data=st.data())
def test_policy_sensitivity_matches_naive_oracle(items, data):
    """One item set, one budget: policy_sensitivity (collect and raise) == the oracle."""
    budget = data.draw(S.budgets())
    variants = data.draw(S.sensitivity_variants(S._kinds_of(items), budget_st=st.just(budget)))
    ours = _engine_variants(variants)
    want = _oracle(items, None, variants)
    assert (ours is None) == (want is None)
    if ours is None:
        return
    (want,) = want
    ctx = [c.ContextItem(**d) for d in items]
    pairs = [(label, pol) for label, pol, _b in ours]
    rep = c.policy_sensitivity(ctx, c.ContextBudget(**budget), pairs, on_error="collect")
    assert [(l, e.code) for l, e in rep.failed] == want["failed"]
    assert [l for l, _r in rep.variants] == [l for l, _r in want["ok"]]
    for (_l, got), (_l2, w) in zip(rep.variants, want["ok"]):
        P.assert_same_outcome(
            ("ok", P.normalize_report(got)),
            (
                "ok",
                {
                    "included": w["included"],
                    "excluded": w["excluded"],
                    "total_candidates": w["total_candidates"],
                    "total_tokens_considered": w["total_tokens_considered"],
                    "shortfalls": [tuple(x) for x in w["shortfalls"]],
                },
            ),
        )
    assert [(e.content, [(l, st.value) for l, st in e.statuses]) for e in rep.diffs] == want["diffs"]
    if want["failed"]:
        label, code = want["failed"][0]
        with pytest.raises(CupelError) as ei:
            c.policy_sensitivity(ctx, c.ContextBudget(**budget), pairs)
        assert ei.value.code == code and repr(label) in str(ei.value)


@settings(PROPS, max_examples=S.examples(8, 150))
@given(case=S.many_set_cases(max_sets=120), data=st.data())
def test_sweep_big_tables_match_naive_oracle(case, data):
    """Hundreds of sets, or sets of hundreds of items, with several variants."""
    rows, keys, budget, config = case
    kinds = S._kinds_of(rows)
    variants = [("base", budget, config)] + [
        (f"v{i}", b, cfg) for i, (_l, b, cfg) in enumerate(data.draw(S.sensitivity_variants(kinds, n_min=1, n_max=3)))
    ]
    n_max = max(sum(1 for k in keys if k == key) for key in set(keys))
    if n_max > S.CHEAP_SCORERS_ABOVE:
        variants = variants[:1] + [(l, b, dict(cfg, scorers=config["scorers"])) for l, b, cfg in variants[1:]]
    _sweep_matches_oracle(rows, keys, variants)


@settings(PROPS, max_examples=S.examples(20, 400))
@given(case=S.big_pipeline_cases("huge_tokens"), data=st.data())
def test_sweep_with_tokens_near_the_int64_limit_matches_naive_oracle(case, data):
    """Token counts near 2^62: tokens_used and utilization stay exact."""
    items, budget, config = case
    others = data.draw(S.sensitivity_variants(S._kinds_of(items), n_min=1, n_max=2, budget_st=st.just(budget)))
    variants = [("base", budget, config)] + [
        (f"v{i}", b, data.draw(S.small_knapsack_tables(cfg, b))) for i, (_l, b, cfg) in enumerate(others)
    ]
    ours = _engine_variants(variants)
    want = _oracle(items, None, variants)
    assert (ours is None) == (want is None)
    if ours is None:
        return
    res = c.sweep([c.ContextItem(**d) for d in items], None, ours, on_error="collect")
    _check_against_oracle(res, items, want, variants, "set")


def test_variants_table_tokens_used_is_exact_above_2_53():
    # summed through float64, 2**61 + 1 + 3 came out as 2**61
    items = [c.ContextItem("a", 2**61 + 1), c.ContextItem("b", 3)]
    b = c.ContextBudget(2**62 - 1, 2**62 - 1)
    p = c.Policy(c.ReflexiveScorer())
    vt = c.sweep(items, b, [("x", p), ("y", p)]).variants_table()
    assert vt.column("tokens_used").to_pylist() == [2**61 + 4, 2**61 + 4]


def test_status_strings_match_the_python_strings(monkeypatch):
    """The diffs table's status columns, built from Arrow buffers, equal one Python string per
    row: one chunk (its own offsets, or offsets shared between columns) and several chunks."""
    import numpy as np

    from cupel_np.analysis import sensitivity as sens

    rng = np.random.default_rng(3)
    for n in (0, 1, 7, 1000):
        inc = rng.random(n) < 0.5
        null = rng.random(n) < 0.2
        want = [None if z else ("Included" if i else "Excluded") for i, z in zip(inc.tolist(), null.tolist())]
        assert sens._status_strings(inc, null).to_pylist() == want
        assert sens._status_strings(inc, null, sens._status_offsets(n)).to_pylist() == want
        assert sens._status_strings(inc, np.zeros(n, np.bool_)).null_count == 0
        with monkeypatch.context() as m:
            m.setattr(sens, "_STATUS_CHUNK", 3)
            chunked = sens._status_strings(inc, null)
            assert chunked.to_pylist() == want
            assert n <= 3 or chunked.num_chunks == -(-n // 3)


def test_sweep_result_reuses_the_sweeps_content_groups():
    """A sweep over every row (nothing pinned, no negative tokens) hands its duplicate-content
    groups to the result (``SweepRun.content_groups``): equal to the table's own, and the result
    built from them equals one that finds them itself; with a pinned row it hands none."""
    import numpy as np

    from cupel_np.analysis.sensitivity import SweepResult
    from cupel_np.engine.batch_kernels import duplicate_groups

    def rows(pin: bool):
        out = []
        for s in range(3):
            for i in range(40):
                text = f"dup {i % 7}" if i % 3 == 0 else f"s{s} item {i}"
                out.append({"sid": s, "content": text, "tokens": 1 + (i * 7) % 13, "pinned": pin and i == 5})
        return out

    variants = [("a", c.Policy(c.ReflexiveScorer())), ("b", c.Policy(c.PriorityScorer(), placer="u_shaped"))]
    for pin in (False, True):
        table = c.ItemTable.from_arrow(pa.Table.from_pylist(rows(pin)), set_column="sid")
        res = c.sweep(table, c.ContextBudget(60, 40), variants, threads=1)
        groups = res.run.content_groups
        want = duplicate_groups(table.content_id, table.offsets)
        if pin:
            assert groups is None
        else:
            assert groups is not None and want[0].size > 0
            assert all(np.array_equal(g, w) for g, w in zip(groups, want, strict=True))
        res.run.content_groups = None
        own = SweepResult(res.run)
        for name in ("group_of_row", "group_first_row", "group_set", "group_offsets", "swing_groups", "swing_offsets"):
            assert np.array_equal(getattr(res, name), getattr(own, name)), name
        assert res.diffs_table().equals(own.diffs_table())
