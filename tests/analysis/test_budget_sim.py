"""Budget simulation against the naive oracle.

1. ``Pipeline.get_marginal_items`` / ``find_min_budget_for`` equal a literal transcription of
   the spec's pseudocode over ``naive.run_pipeline`` (guards, errors, results);
2. ``min_budgets`` gives, on every row of every set, what that transcription gives;
3. ``budget_curves`` equals one naive run per (variant, budget, set);
plus the exact guard messages, the ladder helper and hand-built non-monotonic cases.
"""

import os
import sys
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import naive  # noqa: E402
import strategies as S  # noqa: E402

import cupel_np as c  # noqa: E402
from cupel_np import ContextBudget, ContextItem, CupelError, ItemTable, Pipeline, Policy  # noqa: E402
from cupel_np.analysis.budget_sim import (  # noqa: E402
    CEILING_BELOW_TOKENS_MESSAGE,
    FIND_MIN_MONOTONIC_MESSAGE,
    MARGINAL_QUOTA_MESSAGE,
    TARGET_NOT_IN_ITEMS_MESSAGE,
    NonMonotonicSlicerError,
)

PROPS = settings(
    max_examples=int(os.environ.get("CUPEL_PROPERTY_EXAMPLES", "80")),
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

REFUSED_BY_FIND_MIN = ("quota", "count_quota", "count_constrained_knapsack")
ERROR_CODE_OF_CLASS = {
    "InvalidConfigError": "invalid_config",
    "PinnedExceedsBudgetError": "pinned_exceeds_budget",
    "BudgetOverflowError": "overflow",
    "ScarcityError": "scarcity",
}


# ---------------------------------------------------------------------------
# The oracle: the spec's pseudocode over naive.run_pipeline (rows are list positions)
# ---------------------------------------------------------------------------


class OracleError(Exception):
    def __init__(self, code, budget=None):
        super().__init__(code)
        self.code = code
        self.budget = budget


def naive_run(items, budget, config):
    try:
        return naive.run_pipeline(items, budget, config)
    except naive.NaiveError as e:
        raise OracleError(e.code, budget.get("max_tokens")) from None


def naive_find_min(items, row, ceiling, config):
    """FIND-MIN-BUDGET-FOR, with .NET's final check at low then high."""
    if config.get("slicer") in REFUSED_BY_FIND_MIN:
        raise OracleError("non_monotonic_slicer")
    tokens = items[row]["tokens"]
    if ceiling < tokens:
        raise OracleError("invalid_config")

    def included_at(b):
        if b < 0:  # ContextBudget(maxTokens: b) rejects it before any run
            raise OracleError("invalid_config", b)
        rep = naive_run(items, {"max_tokens": b, "target_tokens": b}, config)
        return any(r == row for r, _s, _why in rep["included"])

    low, high = tokens, ceiling
    while high - low > 1:
        mid = low + (high - low) // 2
        if included_at(mid):
            high = mid
        else:
            low = mid
    if included_at(low):
        return low
    if included_at(high):
        return high
    return None


def naive_marginal(items, budget, slack, config):
    """GET-MARGINAL-ITEMS: rows included at budget and not at the reduced budget, in the full
    run's placed order."""
    if config.get("slicer") == "quota":
        raise OracleError("non_monotonic_slicer")
    if slack == 0:
        return []
    primary = naive_run(items, budget, config)
    reduced = {
        "max_tokens": budget["max_tokens"] - slack,
        "target_tokens": budget["target_tokens"] - slack,
        "output_reserve": budget.get("output_reserve", 0),
    }
    margin = naive_run(items, reduced, config)
    kept = {r for r, _s, _w in margin["included"]}
    return [r for r in primary["placed"] if r not in kept]


def _outcome(fn, *args):
    try:
        return ("ok", fn(*args))
    except OracleError as e:
        return ("error", e.code)
    except CupelError as e:
        return ("error", e.code)


def _objs(items):
    return [ContextItem(**d) for d in items]


def _kinds(items):
    return tuple(sorted({d.get("kind", "Message") for d in items}))


# ---------------------------------------------------------------------------
# 1. Spec parity against the oracle
# ---------------------------------------------------------------------------


@st.composite
def find_min_cases(draw):
    items = draw(S.item_lists(min_size=1, max_size=9, extreme_timestamps=False))
    config = draw(S.configs(kinds=_kinds(items)))
    row = draw(st.integers(0, len(items) - 1))
    total = sum(max(d["tokens"], 0) for d in items)
    ceiling = draw(st.one_of(st.integers(-6, 12), st.integers(0, total + 20)))
    return items, row, ceiling, config


@PROPS
@given(find_min_cases())
def test_find_min_budget_for_matches_spec_pseudocode(case):
    items, row, ceiling, config = case
    want = _outcome(naive_find_min, items, row, ceiling, config)
    objs = _objs(items)
    got = _outcome(lambda: Pipeline(Policy.from_dict(config)).find_min_budget_for(objs, objs[row], ceiling))
    assert got == want


@st.composite
def marginal_cases(draw):
    budget = draw(S.budgets())
    items = draw(S.item_lists(max_size=10, extreme_timestamps=False, tokens=S.tokens_near(budget)))
    config = draw(S.configs(kinds=_kinds(items)))
    slack = draw(st.one_of(st.just(0), st.integers(-10, 60), st.integers(0, 300)))
    return items, budget, slack, config


@PROPS
@given(marginal_cases())
def test_get_marginal_items_matches_spec_pseudocode(case):
    items, budget, slack, config = case
    want = _outcome(naive_marginal, items, budget, slack, config)
    objs = _objs(items)

    def engine():
        got = Pipeline(Policy.from_dict(config)).get_marginal_items(objs, ContextBudget(**budget), slack)
        # the caller's own objects come back (identity, as .NET's reference equality)
        return [next(i for i, o in enumerate(objs) if o is g) for g in got]

    assert _outcome(engine) == want


# ---------------------------------------------------------------------------
# 2. min_budgets: every row of every set at once
# ---------------------------------------------------------------------------


@st.composite
def corpus_cases(draw, refused_ok=False):
    sets, interleaving = draw(S.item_sets(max_sets=3, max_items=8))
    config = draw(S.configs(kinds=_kinds([d for s in sets for d in s])))
    if not refused_ok and config.get("slicer") in REFUSED_BY_FIND_MIN:
        config = {
            k: v for k, v in config.items() if k not in ("quotas", "entries", "scarcity_behavior", "inner_slicer")
        }
        config["slicer"] = draw(st.sampled_from(["greedy", "knapsack"]))
    return sets, interleaving, config


def _corpus_table(sets, interleaving):
    rows, where = [], []
    for s, k in interleaving:
        rows.append(dict(sets[s][k], conv=S.SET_KEYS[s]))
        where.append((s, k))
    return ItemTable.from_items(rows, set_column="conv"), where


@PROPS
@given(corpus_cases(), st.one_of(st.integers(-3, 10), st.integers(0, 300)))
def test_min_budgets_equals_find_min_budget_for_on_every_row(case, ceiling):
    sets, interleaving, config = case
    table, where = _corpus_table(sets, interleaving)
    policy = Policy.from_dict(config)
    stats = {}
    got = c.min_budgets(table, policy, ceiling, stats=stats).to_pylist()
    # chunked probe steps (a few rows per engine call) give the same answer
    assert c.min_budgets(table, policy, ceiling, max_probe_rows=7).to_pylist() == got
    assert len(got) == table.n
    for input_row, (s, k) in enumerate(where):
        g = got[input_row]
        assert g["input_row"] == input_row and g["conv"] == S.SET_KEYS[s]
        try:
            want, want_err = naive_find_min(sets[s], k, ceiling, config), None
        except OracleError as e:
            want, want_err = None, e
        assert g["min_budget"] == want, (input_row, g, want, want_err and want_err.code)
        if want_err is None:
            assert g["error"] is None and g["error_budget"] is None
        else:
            assert ERROR_CODE_OF_CLASS[g["error"]] == want_err.code
            assert g["error_budget"] == want_err.budget
    # O(log ceiling) engine calls: the search steps plus the two final checks
    span = max([ceiling - d["tokens"] for s in sets for d in s] + [1])
    assert stats["steps"] <= max(span, 1).bit_length() + 3
    # one call per round (a round of only negative budgets runs nothing), plus the one run
    # that settles deduplication
    assert stats["engine_calls"] <= stats["steps"] + policy.deduplication


def test_min_budgets_refuses_non_monotonic_slicers():
    items = [ContextItem("a", 10)]
    for name in REFUSED_BY_FIND_MIN:
        extra = {
            "quota": {"quotas": [{"kind": "Message", "require": 10.0}]},
            "count_quota": {"entries": [{"kind": "Message", "require_count": 1}]},
            "count_constrained_knapsack": {"entries": [{"kind": "Message", "require_count": 1}]},
        }[name]
        pol = Policy.from_dict({"slicer": name, "scorers": [{"type": "reflexive", "weight": 1}], **extra})
        with pytest.raises(NonMonotonicSlicerError) as ei:
            c.min_budgets(items, pol, 100)
        assert str(ei.value) == FIND_MIN_MONOTONIC_MESSAGE
        with pytest.raises(NonMonotonicSlicerError):
            Pipeline(pol).find_min_budget_for(items, items[0], 100)


# ---------------------------------------------------------------------------
# 3. budget_curves == one run per (variant, budget, set)
# ---------------------------------------------------------------------------


@st.composite
def ladders(draw):
    vals = sorted(set(draw(st.lists(st.integers(0, 260), min_size=2, max_size=5))))
    if len(vals) < 2:
        vals = [vals[0], vals[0] + 7]
    reserve = draw(st.sampled_from([0, 0, 3]))
    return [ContextBudget(v, v - reserve, reserve) if v >= reserve else ContextBudget(v, v) for v in vals]


@PROPS
@given(corpus_cases(refused_ok=True), st.lists(S.configs(), min_size=0, max_size=1), ladders())
def test_budget_curves_equal_one_run_per_budget(case, more_configs, ladder):
    sets, interleaving, config = case
    configs = [config] + more_configs
    table, where = _corpus_table(sets, interleaving)
    variants = [(f"v{i}", Policy.from_dict(cf)) for i, cf in enumerate(configs)]
    res = c.budget_curves(table, variants, ladder)
    curves = res.curves.to_pylist()
    rows = res.rows.to_pylist()
    n_sets, n_b = table.n_sets, len(ladder)
    assert len(curves) == len(configs) * n_b * n_sets and len(rows) == len(configs) * table.n
    seg_of_key = {k: i for i, k in enumerate(table.set_keys)}
    for p, cf in enumerate(configs):
        inc = {}  # (set, position) -> per-budget status
        for j, b in enumerate(ladder):
            bd = {"max_tokens": b.max_tokens, "target_tokens": b.target_tokens, "output_reserve": b.output_reserve}
            for s, items in enumerate(sets):
                try:
                    rep = naive_run(items, bd, cf)
                    got_rows = {r for r, _s, _w in rep["included"]}
                    failed = False
                except OracleError:
                    got_rows, failed = set(), True
                for k in range(len(items)):
                    inc.setdefault((s, k), []).append(k in got_rows)
                rec = curves[(p * n_b + j) * n_sets + seg_of_key[S.SET_KEYS[s]]]
                assert (rec["variant"], rec["budget"], rec["conv"]) == (f"v{p}", b.max_tokens, S.SET_KEYS[s])
                assert (rec["error"] is not None) == failed
                if failed:
                    assert rec["included_count"] is None and rec["target_utilization"] is None
                else:
                    used = sum(items[k]["tokens"] for k in got_rows)
                    assert rec["included_count"] == len(got_rows) and rec["tokens_used"] == used
                    want_util = used / b.target_tokens if b.target_tokens > 0 else 0.0
                    assert rec["target_utilization"] == pytest.approx(want_util, abs=0, rel=1e-15)
        for input_row, (s, k) in enumerate(where):
            r = rows[p * table.n + input_row]
            st_ = inc[(s, k)]
            assert (r["input_row"], r["variant"], r["conv"]) == (input_row, f"v{p}", S.SET_KEYS[s])
            flips = sum(st_[i] != st_[i - 1] for i in range(1, n_b))
            assert r["flips"] == flips and r["flips_more_than_once"] == (flips > 1)
            assert r["non_monotonic"] == any(st_[i - 1] and not st_[i] for i in range(1, n_b))
            stable = None
            for j in range(n_b - 1, -1, -1):
                if not st_[j]:
                    break
                stable = ladder[j].max_tokens
            assert r["min_stable_budget"] == stable


# ---------------------------------------------------------------------------
# 4. Guards, messages and hand-built cases
# ---------------------------------------------------------------------------

T0 = datetime(2026, 1, 1, tzinfo=UTC)
GREEDY = Policy.from_dict({"slicer": "greedy", "scorers": [{"type": "reflexive", "weight": 1.0}]})


def _skip_items():
    """Greedy by density: A (60 tokens) is denser than X (10 tokens). X is in at 10 (A does
    not fit), out at 60 (A fills it), in again at 70."""
    return [ContextItem("A", 60, future_relevance_hint=1.0), ContextItem("X", 10, future_relevance_hint=0.1)]


def test_guard_messages_are_the_specs():
    quota = Policy.from_dict(
        {
            "slicer": "quota",
            "quotas": [{"kind": "Message", "require": 10.0}],
            "scorers": [{"type": "reflexive", "weight": 1}],
        }
    )
    items = [ContextItem("a", 10)]
    with pytest.raises(NonMonotonicSlicerError) as ei:
        Pipeline(quota).get_marginal_items(items, ContextBudget(100, 100), 0)  # guard before slack 0
    assert (
        str(ei.value)
        == MARGINAL_QUOTA_MESSAGE
        == (
            "GetMarginalItems requires monotonic item inclusion. QuotaSlice produces non-monotonic "
            "inclusion as budget changes shift percentage allocations."
        )
    )
    count = Policy.from_dict(
        {
            "slicer": "count_quota",
            "entries": [{"kind": "Message", "require_count": 1}],
            "scorers": [{"type": "reflexive", "weight": 1}],
            "overflow_strategy": "proceed",
        }
    )
    # CountQuotaSlice is allowed by GetMarginalItems (the spec guards QuotaSlice only); its
    # required item is kept even at 5 tokens, so nothing is marginal
    assert Pipeline(count).get_marginal_items(items, ContextBudget(100, 100), 95) == []
    with pytest.raises(NonMonotonicSlicerError) as ei:
        Pipeline(quota).find_min_budget_for(items, items[0], 100)
    assert str(ei.value) == FIND_MIN_MONOTONIC_MESSAGE


def test_find_min_preconditions():
    items = _skip_items()
    p = Pipeline(GREEDY)
    twin = ContextItem("A", 60, future_relevance_hint=1.0)  # equal, but not the same object
    assert twin == items[0]
    with pytest.raises(c.InvalidConfigError) as ei:
        p.find_min_budget_for(items, twin, 100)
    assert str(ei.value).startswith(TARGET_NOT_IN_ITEMS_MESSAGE)
    with pytest.raises(c.InvalidConfigError) as ei:
        p.find_min_budget_for(items, items[0], 59)
    assert str(ei.value).startswith(CEILING_BELOW_TOKENS_MESSAGE) and "59" in str(ei.value)
    assert p.find_min_budget_for(items, items[0], 60) == 60
    # an ItemTable takes an input row number
    assert p.find_min_budget_for(ItemTable.from_items(items), 1, 100) == 10
    with pytest.raises(c.InvalidConfigError):
        p.find_min_budget_for(ItemTable.from_items(items), 2, 100)


def test_slack_zero_runs_nothing():
    # pinned items above the budget would make any dry run fail; slack 0 returns first
    items = [ContextItem("p", 500, pinned=True)]
    assert Pipeline(GREEDY).get_marginal_items(items, ContextBudget(100, 100), 0) == []
    with pytest.raises(c.PinnedExceedsBudgetError):
        Pipeline(GREEDY).get_marginal_items(items, ContextBudget(100, 100), 10)


def test_binary_search_answer_on_a_non_monotonic_row():
    # X is included at 10..59, excluded at 60..69 and included from 70 on. The spec's search
    # over [10, 200] probes 105 (in), 57 (in), 33 (in), 21 (in), 15, 12, 11 (in) -> 10.
    items = _skip_items()
    assert Pipeline(GREEDY).find_min_budget_for(items, items[1], 200) == 10
    assert (
        naive_find_min(
            [
                {"content": "A", "tokens": 60, "future_relevance_hint": 1.0},
                {"content": "X", "tokens": 10, "future_relevance_hint": 0.1},
            ],
            1,
            200,
            {"slicer": "greedy", "scorers": [{"type": "reflexive", "weight": 1.0}]},
        )
        == 10
    )
    got = c.min_budgets(items, GREEDY, 200).to_pylist()
    assert [g["min_budget"] for g in got] == [60, 10]


def test_curves_flag_a_row_that_flips_twice():
    items = _skip_items()
    res = c.budget_curves(items, [("greedy", GREEDY)], [10, 60, 70])
    rows = res.rows.to_pylist()
    a, x = rows
    assert (a["min_stable_budget"], a["flips"], a["non_monotonic"]) == (60, 1, False)
    assert (x["min_stable_budget"], x["flips"], x["flips_more_than_once"], x["non_monotonic"]) == (70, 2, True, True)
    assert [r["included_count"] for r in res.curves.to_pylist()] == [1, 1, 2]


def test_curves_collect_failures_and_can_raise():
    items = [ContextItem("sys", 50, pinned=True), ContextItem("a", 30)]
    res = c.budget_curves(items, ["chat"], [40, 100])
    recs = res.curves.to_pylist()
    assert recs[0]["error"] and "pinned items require 50 tokens" in recs[0]["error"]
    assert recs[0]["included_count"] is None and recs[1]["included_count"] == 2
    assert [r["min_stable_budget"] for r in res.rows.to_pylist()] == [100, 100]
    with pytest.raises(c.PinnedExceedsBudgetError):
        c.budget_curves(items, ["chat"], [40, 100], on_error="raise")


def test_curves_are_the_same_for_any_thread_count_and_row_order(monkeypatch):
    """The per-variant statistics run as tasks on the engine's pool: one thread and two give
    the same tables, for sets whose rows are in input order and for interleaved ones (rows
    gathered back to input order), with failed (column, set) cells among them."""
    rng = np.random.default_rng(7)
    n = 1200
    sid = np.repeat(np.arange(40), 30)
    rows = [
        {
            "content": f"c{i}",
            "tokens": int(rng.integers(1, 400)),
            "kind": ["Message", "Document", "ToolOutput"][int(rng.integers(3))],
            "priority": int(rng.integers(0, 9)),
            "pinned": bool(i % 30 == 0 and (i // 30) % 7 == 0),
        }
        for i in range(n)
    ]
    variants = [("chat", c.preset("chat")), ("rag", c.preset("rag")), ("code", c.preset("code_review"))]
    ladder = c.budget_ladder(200, 20_000, 12, output_reserve=50)
    for order in (np.arange(n), rng.permutation(n)):
        table = ItemTable.from_items([dict(rows[i], s=int(sid[i])) for i in order], set_column="s")
        out = {}
        for threads in ("1", "2"):
            monkeypatch.setenv("CUPEL_NP_THREADS", threads)
            res = c.budget_curves(table, variants, ladder)
            out[threads] = (res.curves, res.rows)
        assert out["1"][0].equals(out["2"][0]) and out["1"][1].equals(out["2"][1])
        curves = out["1"][0].to_pylist()
        assert any(r["error"] for r in curves) and any(r["included_count"] for r in curves)
        assert out["1"][1].num_rows == n * len(variants)
        assert out["1"][1].column("input_row").to_pylist() == list(range(n)) * len(variants)


def test_budget_ladder():
    lad = c.budget_ladder(4000, 200_000, 16, output_reserve=1000)
    vals = [b.max_tokens for b in lad]
    assert vals[0] == 4000 and vals[-1] == 200_000 and len(vals) == 16
    ratios = np.array(vals[1:]) / np.array(vals[:-1])
    assert np.allclose(ratios, (200_000 / 4000) ** (1 / 15), rtol=1e-3)
    assert all(b.target_tokens == b.max_tokens - 1000 and b.output_reserve == 1000 for b in lad)
    assert [b.max_tokens for b in c.budget_ladder(0, 100, 5, spacing="linear")] == [0, 25, 50, 75, 100]
    for args, kw, msg in [
        ((10, 10, 3), {}, "lo (10) must be < hi (10)"),
        ((1, 4, 10), {}, "round to the same budget"),
        ((0, 100, 3), {}, "geometric spacing needs lo >= 1"),
        ((10, 100, 1), {}, "steps must be >= 2"),
        ((10, 100, 3), {"spacing": "log"}, "spacing must be"),
        ((10, 100, 3), {"output_reserve": 11}, "output_reserve must be in"),
    ]:
        with pytest.raises(c.InvalidConfigError, match=None) as ei:
            c.budget_ladder(*args, **kw)
        assert msg in str(ei.value)
    with pytest.raises(c.InvalidConfigError) as ei:
        c.budget_curves([ContextItem("a", 1)], ["chat"], [100, 50])
    assert "strictly increase" in str(ei.value)


# ---------------------------------------------------------------------------
# 5. The conformance vectors agree with the spec pseudocode and with the runner
# ---------------------------------------------------------------------------

VECTORS = sorted((Path(__file__).resolve().parents[1] / "vectors" / "budget").glob("*.toml"))


def _naive_item(d):
    out = {k: v for k, v in d.items() if k != "futureRelevanceHint"}
    if "futureRelevanceHint" in d:
        out["future_relevance_hint"] = d["futureRelevanceHint"]
    return out


@pytest.mark.parametrize("path", VECTORS, ids=[p.stem for p in VECTORS])
def test_budget_vectors_match_oracle_and_runner(path):
    from cupel_np.conformance import load_vector, run_vector

    vec = load_vector(path)
    assert vec["test"]["stage"] == "budget_simulation"
    items = [_naive_item(d) for d in vec["items"]]
    q, exp, config = vec["query"], vec["expected"], vec["config"]
    if q["method"] == "get_marginal_items":
        b = vec["budget"]
        out = _outcome(
            naive_marginal,
            items,
            {
                "max_tokens": b["max_tokens"],
                "target_tokens": b["target_tokens"],
                "output_reserve": b.get("output_reserve", 0),
            },
            q["slack_tokens"],
            config,
        )
        want = ("error", exp["error"]) if "error" in exp else ("ok", exp["marginal"])
        if out[0] == "ok":
            out = ("ok", [items[r]["content"] for r in out[1]])
    else:
        rows = [i for i, d in enumerate(items) if d["content"] == q["target"]]
        if rows:
            out = _outcome(naive_find_min, items, rows[0], q["search_ceiling"], config)
        else:
            out = ("error", "non_monotonic_slicer" if config.get("slicer") in REFUSED_BY_FIND_MIN else "invalid_config")
        want = (
            ("error", exp["error"])
            if "error" in exp
            else ("ok", exp.get("min_budget") if exp.get("selectable", True) else None)
        )
    assert out == want
    assert run_vector(path) is None


# ---------------------------------------------------------------------------
# 6. CLI: Parquet files and a report whose numbers are the files' numbers
# ---------------------------------------------------------------------------


def _cli_corpus(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    sample = Path(__file__).resolve().parents[2] / "data" / "sample_sessions.parquet"
    t = pq.read_table(sample)
    keys = t.column("session_id").to_pylist()
    keep = [i for i, k in enumerate(keys) if int(k.split("-")[1]) < 25]
    path = tmp_path / "items.parquet"
    pq.write_table(t.take(pa.array(keep)), path)
    return path


def _expected_numbers(curves, rows):
    """The report's numbers recomputed from the Parquet files (independently of summarize)."""
    out = {}
    c = curves.to_pylist()
    labels = list(dict.fromkeys(r["variant"] for r in c))
    budgets = sorted({r["budget"] for r in c})
    for lab in labels:
        total = {
            b: sum(r["included_count"] or 0 for r in c if r["variant"] == lab and r["budget"] == b) for b in budgets
        }
        largest = total[budgets[-1]]
        reach = {}
        for lv in (90, 95, 99):
            hit = [b for b in budgets if total[b] * 100 >= lv * largest]
            reach[f"{lv}%"] = f"{hit[0]:,}" if hit else "never"
        mine = [r for r in rows.to_pylist() if r["variant"] == lab]
        failed = sum(1 for r in c if r["variant"] == lab and r["included_count"] is None)
        out[lab] = {
            "largest": f"{largest:,}",
            "reach": reach,
            "nonmono": f"{sum(r['non_monotonic'] for r in mine):,}",
            "multiflip": f"{sum(r['flips_more_than_once'] for r in mine):,}",
            "failed": f"{failed:,}",
        }
    return out


def _shown_numbers(dom):
    """Numbers in the rendered page's two tables, by variant."""
    import re

    got = {}
    for table_id in ("reach", "nonmono"):
        body = re.search(rf'<table id="{table_id}">(.*?)</table>', dom, re.S).group(1)
        for tr in re.findall(r'<tr data-variant="([^"]*)">(.*?)</tr>', body, re.S):
            lab, cells = tr
            g = got.setdefault(lab, {"reach": {}})
            for cls, level, text in re.findall(r'<td class="(\w+)"(?: data-level="([^"]+)")?>([^<]*)</td>', cells):
                if cls == "reach":
                    g["reach"][level] = text
                else:
                    g[cls] = text
    return got


def test_cli_budget_writes_parquet_and_report(capsys, tmp_path):
    import pyarrow.parquet as pq

    from cupel_np import cli

    items = _cli_corpus(tmp_path)
    out = tmp_path / "b"
    argv = [
        "budget",
        str(items),
        "--preset",
        "chat",
        "--preset",
        "rag",
        "--ladder",
        "300:32000:7",
        "--output-reserve",
        "100",
        "--set-column",
        "session_id",
        "--out",
        str(out),
        "--quiet",
    ]
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    curves, rows = pq.read_table(out / "curves.parquet"), pq.read_table(out / "rows.parquet")
    # the files are budget_curves' tables
    table = ItemTable.from_parquet(items, set_column="session_id")
    res = c.budget_curves(table, ["chat", "rag"], c.budget_ladder(300, 32000, 7, output_reserve=100))
    assert curves.equals(res.curves) and rows.equals(res.rows)
    want = _expected_numbers(curves, rows)
    for lab, w in want.items():
        assert f"{lab}" in printed and w["reach"]["90%"] in printed
    assert (
        sum(int(w["failed"].replace(",", "")) for w in want.values()) > 0
    )  # pinned prompts (150-399 tokens) above 300 - 100
    page = (out / "report.html").read_text()
    assert _shown_numbers(page) == {
        lab: {
            "largest": w["largest"],
            "reach": w["reach"],
            "nonmono": w["nonmono"],
            "multiflip": w["multiflip"],
            "failed": w["failed"],
        }
        for lab, w in want.items()
    }
    # issue 26: the budget page opens with what it found, in words
    start = page[page.index('<div id="start">') : page.index("</div>", page.index('<div id="start">'))]
    assert "2 variant(s) over 7 budgets from 300 to 32,000 tokens." in start, start
    reach95 = {lab: w["reach"]["95%"] for lab, w in want.items()}
    soonest = min((int(v.replace(",", "")), lab) for lab, v in reach95.items() if v != "never")
    assert f"<b>{soonest[1]}</b> needs the least budget to keep 95%" in start and f"({soonest[0]:,} tokens)" in start
    code = cli.main(["budget", str(items), "--preset", "chat", "--ladder", "800:32000", "--out", str(out)])
    assert code == 2 and "LO:HI:STEPS" in capsys.readouterr().err


def test_budget_report_renders_in_headless_chromium(tmp_path):
    import shutil
    import subprocess

    import pyarrow.parquet as pq

    from cupel_np import cli

    chromium = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if chromium is None:
        pytest.skip("no headless Chromium installed (Debian package 'chromium')")
    items = _cli_corpus(tmp_path)
    out = tmp_path / "b"
    assert (
        cli.main(
            [
                "budget",
                str(items),
                "--preset",
                "chat",
                "--preset",
                "code_review",
                "--ladder",
                "1000:40000:6",
                "--set-column",
                "session_id",
                "--out",
                str(out),
                "--quiet",
            ]
        )
        == 0
    )
    page = (out / "report.html").resolve()
    shot = tmp_path / "shot.png"
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--window-size=1280,2000",
    ]
    r = subprocess.run(
        [chromium, *flags, f"--screenshot={shot}", page.as_uri()], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert shot.stat().st_size > 50_000  # a rendered page with images, not a blank one
    r = subprocess.run([chromium, *flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    dom = r.stdout
    assert dom.count("<img") == 2 and "Utilization by budget" in dom and "Non-monotonic rows" in dom
    want = _expected_numbers(pq.read_table(out / "curves.parquet"), pq.read_table(out / "rows.parquet"))
    assert _shown_numbers(dom) == {
        lab: {
            "largest": w["largest"],
            "reach": w["reach"],
            "nonmono": w["nonmono"],
            "multiflip": w["multiflip"],
            "failed": w["failed"],
        }
        for lab, w in want.items()
    }


def test_docs_budget_example_runs(capsys, monkeypatch):
    import re

    page = Path(__file__).resolve().parents[2] / "docs" / "budget-simulation.md"
    monkeypatch.chdir(page.parents[1])
    src = page.read_text()
    code = re.search(r"# Budget simulation\n.*?```python\n(.*?)```", src, re.S).group(1)
    scope = {}
    exec(compile(code, str(page), "exec"), scope)
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("[ContextItem(content='X'") and out[1] == "70"
    res, mins = scope["res"], scope["mins"]
    assert res.curves.num_rows == 3 * 16 * 300 and res.rows.num_rows == 3 * scope["table"].n
    assert mins.num_rows == scope["table"].subset("session-0007").n
