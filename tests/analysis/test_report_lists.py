"""``SelectionReport.included`` / ``excluded`` build their entries a list at a time (the
fields written straight into each frozen instance, the budget reasons from one column read).
Each list must equal the row-by-row construction through the dataclasses' own ``__init__``
and ``exclusion_reason``, and the instances must behave as constructed ones do."""

import pickle

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cupel_np as c
from cupel_np.analysis import selection as sel
from tests.analysis.test_single_selection import POLICIES, _as_items
from tests.strategies import item_lists


def _row_by_row(report):
    run = report._run
    t = run.table
    inc = report.included_rows
    exc = report.excluded_rows
    included = [
        sel.IncludedItem(t.row(r), float(s), sel._INCLUSION[int(run.reason[r])])
        for r, s in zip(inc, run.scores_at(inc))
    ]
    excluded = [
        sel.ExcludedItem(t.row(r), float(s), sel.exclusion_reason(run, int(r), report._seg))
        for r, s in zip(exc, run.scores_at(exc))
    ]
    return included, excluded


def _same(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert type(g) is type(w) and g.item is w.item
        assert repr(g.score) == repr(w.score)  # (NaN-safe, and the same float type)
        assert type(g.score) is float and type(g.reason) is type(w.reason)
        assert g.reason == w.reason and repr(g) == repr(w)
        if isinstance(w.reason, sel.ExclusionReason):
            assert g.reason.to_dict() == w.reason.to_dict()
            assert list(g.reason.to_dict()) == list(w.reason.to_dict())  # field order kept
        assert hash(g) == hash(w) and g == w or w.score != w.score


#: every slicer family, both placers, truncation and deduplication of duplicates
_MORE = [
    c.Policy(c.KindScorer(), overflow_strategy="truncate", placer="u_shaped"),
    c.Policy(
        c.TagScorer({"a": 1.0}),
        slicer=c.CountQuotaSlice((c.CountQuotaEntry("Message", require_count=0, cap_count=1),)),
    ),
]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    item_lists(max_size=14, min_size=1),
    st.integers(0, 60),
    st.sampled_from(range(len(POLICIES) + len(_MORE))),
    st.booleans(),
)
def test_the_report_lists_equal_the_row_by_row_construction(dicts, target, p, twice):
    items = _as_items(dicts)
    if twice:  # duplicate contents: Deduplicated reasons among the excluded
        items = items + [c.ContextItem(it.content, it.tokens, kind=it.kind) for it in items[:3]]
    policy = (POLICIES + _MORE)[p]
    budget = c.ContextBudget(max_tokens=target + 20, target_tokens=target)
    try:
        report = c.Pipeline(policy).dry_run(items, budget)
    except c.CupelError:
        return
    inc, exc = _row_by_row(report)
    _same(report.included, inc)
    _same(report.excluded, exc)


def test_a_long_report_has_budget_reasons_built_in_bulk_and_they_pickle():
    items = [c.ContextItem(f"item {i}", 10 + i % 7, kind="Message") for i in range(600)]
    items += [c.ContextItem("item 3", 12, kind="Message")]  # a duplicate: one Deduplicated
    report = c.Pipeline(c.Policy(c.ReflexiveScorer())).dry_run(items, c.ContextBudget(5000, 3900))
    inc, exc = _row_by_row(report)
    _same(report.included, inc)
    _same(report.excluded, exc)
    names = {e.reason.reason for e in report.excluded}
    assert names == {"BudgetExceeded", "Deduplicated"}, names
    assert len(report.included) > 256 and len(report.excluded) > 256  # the object-array take
    again = pickle.loads(pickle.dumps(report.excluded[:5] + report.included[:5]))
    assert again == report.excluded[:5] + report.included[:5]


def test_an_included_row_with_an_exclusion_code_is_an_error():
    report = c.Pipeline(c.Policy(c.ReflexiveScorer())).dry_run(
        [c.ContextItem("a", 1), c.ContextItem("b", 1)], c.ContextBudget(10, 10)
    )
    report._run.reason[report.included_rows[0]] = c.engine.reasons.R_BUDGET_EXCEEDED
    with pytest.raises(ValueError, match="exclusion code 10"):
        _ = report.included
