"""cupel_np.testing.should(report): each of the spec's 13 patterns passes and fails, and a
failure's message is exactly the spec's text (spec/src/testing/vocabulary.md)."""

from types import SimpleNamespace

import pytest

import cupel_np as c
from cupel_np.errors import InvalidConfigError, InvalidInputTypeError
from cupel_np.testing import SelectionReportAssertionError, col, should


def _inc(content, kind, score, reason=c.InclusionReason.Scored, tokens=10):
    return c.IncludedItem(c.ContextItem(content, tokens, kind=kind), score, reason)


def _exc(content, kind, score, reason, tokens=10):
    return c.ExcludedItem(c.ContextItem(content, tokens, kind=kind), score, reason)


def _report(included=(), excluded=()):
    return SimpleNamespace(included=list(included), excluded=list(excluded))


# a report as the pipeline would give it: five included, four excluded
REPORT = _report(
    [
        _inc("sys", "SystemPrompt", 1.0, c.InclusionReason.Pinned, tokens=30),
        _inc("m1", "Message", 0.6, tokens=20),
        _inc("t1", "ToolOutput", 0.4, tokens=25),
        _inc("m2", "message", 0.3, tokens=15),
        _inc("d1", "Document", 0.9, tokens=10),
    ],
    [
        _exc("big", "Document", 0.8, c.BudgetExceeded(400, 40), tokens=400),
        _exc("m3", "Message", 0.5, c.BudgetExceeded(60, 40), tokens=60),
        _exc("m1-copy", "Message", 0.5, c.Deduplicated("m1")),
        _exc("neg", "ToolOutput", 0.0, c.NegativeTokens(-3), tokens=-3),
    ],
)
EMPTY = _report()


def _fails(fn, message):
    with pytest.raises(SelectionReportAssertionError) as ei:
        fn()
    assert str(ei.value) == message
    assert isinstance(ei.value, AssertionError)


def test_chain_returns_itself_and_passes_leave_report_alone():
    ch = should(REPORT)
    assert ch.include_item_with_kind("Message") is ch
    assert ch.have_at_least_n_exclusions(4).have_kind_coverage_count(4) is ch
    assert ch.report is REPORT


def test_include_item_with_kind():
    should(REPORT).include_item_with_kind("ToolOutput").include_item_with_kind("TOOLOUTPUT")
    _fails(
        lambda: should(REPORT).include_item_with_kind("Memory"),
        "IncludeItemWithKind(Memory) failed: Included contained 0 items with Kind=Memory. "
        "Included had 5 items with kinds: [SystemPrompt, Message, ToolOutput, Document].",
    )
    _fails(
        lambda: should(EMPTY).include_item_with_kind("Memory"),
        "IncludeItemWithKind(Memory) failed: Included contained 0 items with Kind=Memory. "
        "Included had 0 items with kinds: [].",
    )


def test_include_item_matching_gets_the_entry():
    should(REPORT).include_item_matching(lambda i: i.score > 0.85 and i.reason == c.InclusionReason.Scored)
    should(REPORT).include_item_matching(col("reason") == "Pinned")
    _fails(
        lambda: should(EMPTY).include_item_matching(lambda i: True),
        "IncludeItemMatching failed: no item in Included matched the predicate. Included had 0 items.",
    )
    with pytest.raises(SelectionReportAssertionError) as ei:
        should(REPORT).include_item_matching(lambda i: i.score > 1.0)
    msg = str(ei.value)
    assert msg.startswith(
        "IncludeItemMatching failed: no item in Included matched the predicate. Included had 5 items."
    )
    assert "kind=SystemPrompt, score=1.0, reason=Pinned" in msg


def test_include_exactly_n_items_with_kind():
    should(REPORT).include_exactly_n_items_with_kind("Message", 2).include_exactly_n_items_with_kind("Memory", 0)
    should(EMPTY).include_exactly_n_items_with_kind("Message", 0)
    _fails(
        lambda: should(REPORT).include_exactly_n_items_with_kind("Message", 1),
        "IncludeExactlyNItemsWithKind(Message, 1) failed: expected 1 items with Kind=Message in Included, "
        "but found 2. Included had 5 items total.",
    )


def test_exclude_item_with_reason():
    should(REPORT).exclude_item_with_reason("BudgetExceeded").exclude_item_with_reason(c.Deduplicated)
    should(REPORT).exclude_item_with_reason(c.NegativeTokens(-1))
    _fails(
        lambda: should(REPORT).exclude_item_with_reason("PinnedOverride"),
        "ExcludeItemWithReason(PinnedOverride) failed: no excluded item had reason PinnedOverride. "
        "Excluded had 4 items with reasons: [BudgetExceeded, Deduplicated, NegativeTokens].",
    )
    _fails(
        lambda: should(EMPTY).exclude_item_with_reason("Filtered"),
        "ExcludeItemWithReason(Filtered) failed: no excluded item had reason Filtered. "
        "Excluded had 0 items with reasons: [].",
    )
    with pytest.raises(InvalidConfigError, match="unknown exclusion reason 'Budget'"):
        should(REPORT).exclude_item_with_reason("Budget")


def test_exclude_item_matching_with_reason():
    should(REPORT).exclude_item_matching_with_reason(lambda e: e.item.kind == "Message", "Deduplicated")
    _fails(
        lambda: should(REPORT).exclude_item_matching_with_reason(col("kind") == "Message", "NegativeTokens"),
        "ExcludeItemMatchingWithReason(reason=NegativeTokens) failed: predicate matched 2 excluded item(s) but none "
        "had reason NegativeTokens. Matched items had reasons: [BudgetExceeded, Deduplicated].",
    )
    _fails(
        lambda: should(REPORT).exclude_item_matching_with_reason(col("kind") == "Memory", "BudgetExceeded"),
        "ExcludeItemMatchingWithReason(reason=BudgetExceeded) failed: predicate matched 0 excluded item(s) but none "
        "had reason BudgetExceeded. Matched items had reasons: [].",
    )


def test_exclude_item_with_budget_details_is_there_exists():
    # the second matching BudgetExceeded item carries the asked numbers: passes (not "the first")
    should(REPORT).exclude_item_with_budget_details(lambda e: True, 60, 40)
    should(REPORT).exclude_item_with_budget_details(col("kind") == "Document", 400, 40)
    _fails(
        lambda: should(REPORT).exclude_item_with_budget_details(lambda e: True, 60, 41),
        "ExcludeItemWithBudgetDetails failed: expected BudgetExceeded with item_tokens=60, available_tokens=41, "
        "but found item_tokens=400, available_tokens=40.",
    )
    _fails(
        lambda: should(REPORT).exclude_item_with_budget_details(col("kind") == "ToolOutput", 60, 40),
        "ExcludeItemWithBudgetDetails failed: expected BudgetExceeded with item_tokens=60, available_tokens=40, "
        "but no matching item had reason BudgetExceeded.",
    )


def test_have_no_exclusions_for_kind():
    should(REPORT).have_no_exclusions_for_kind("SystemPrompt")
    should(EMPTY).have_no_exclusions_for_kind("Message")
    _fails(
        lambda: should(REPORT).have_no_exclusions_for_kind("message"),
        "HaveNoExclusionsForKind(message) failed: found 2 excluded item(s) with Kind=message. "
        "First: score=0.5, reason=BudgetExceeded.",
    )


def test_have_at_least_n_exclusions():
    should(REPORT).have_at_least_n_exclusions(4)
    should(EMPTY).have_at_least_n_exclusions(0)
    _fails(
        lambda: should(REPORT).have_at_least_n_exclusions(5),
        "HaveAtLeastNExclusions(5) failed: expected at least 5 excluded items, but Excluded had 4.",
    )
    with pytest.raises(InvalidConfigError):
        should(REPORT).have_at_least_n_exclusions(-1)


def test_excluded_items_are_sorted_by_score_descending():
    should(REPORT).excluded_items_are_sorted_by_score_descending()
    should(EMPTY).excluded_items_are_sorted_by_score_descending()
    bad = _report(
        excluded=[
            _exc("a", "Message", 0.9, c.BudgetExceeded(1, 0)),
            _exc("b", "Message", 0.4, c.BudgetExceeded(1, 0)),
            _exc("c", "Message", 0.7, c.BudgetExceeded(1, 0)),
        ]
    )
    _fails(
        lambda: should(bad).excluded_items_are_sorted_by_score_descending(),
        "ExcludedItemsAreSortedByScoreDescending failed: item at index 2 (score=0.7) is higher than item at "
        "index 1 (score=0.4). Expected non-increasing scores.",
    )


def test_have_budget_utilization_above_divides_by_max_tokens():
    budget = c.ContextBudget(max_tokens=200, target_tokens=100)  # included tokens: 100
    should(REPORT).have_budget_utilization_above(0.5, budget)  # exact >=: 100/200 == 0.5 passes
    _fails(
        lambda: should(REPORT).have_budget_utilization_above(0.51, budget),
        "HaveBudgetUtilizationAbove(0.51) failed: computed utilization was 0.500000 "
        "(includedTokens=100, budget.MaxTokens=200).",
    )
    should(EMPTY).have_budget_utilization_above(0.0, budget)
    with pytest.raises(InvalidConfigError, match="max_tokens > 0"):
        should(EMPTY).have_budget_utilization_above(0.0, c.ContextBudget(max_tokens=0, target_tokens=0))


def test_have_kind_coverage_count():
    should(REPORT).have_kind_coverage_count(4).have_kind_coverage_count(0)
    _fails(
        lambda: should(REPORT).have_kind_coverage_count(5),
        "HaveKindCoverageCount(5) failed: expected at least 5 distinct ContextKind values in Included, "
        "but found 4: [SystemPrompt, Message, ToolOutput, Document].",
    )
    _fails(
        lambda: should(EMPTY).have_kind_coverage_count(1),
        "HaveKindCoverageCount(1) failed: expected at least 1 distinct ContextKind values in Included, but found 0: [].",
    )


def test_place_item_at_edge():
    should(REPORT).place_item_at_edge(col("kind") == "SystemPrompt").place_item_at_edge(lambda i: i.score == 0.9)
    # matches at index 1 and at the last index: the last one is at an edge, so it passes
    should(REPORT).place_item_at_edge(lambda i: i.score in (0.6, 0.9))
    _fails(
        lambda: should(REPORT).place_item_at_edge(col("kind") == "Message"),
        "PlaceItemAtEdge failed: item matching predicate was at index 1 (not at edge). "
        "Edge positions: 0 and 4. Included had 5 items.",
    )
    _fails(
        lambda: should(REPORT).place_item_at_edge(col("kind") == "Memory"),
        "PlaceItemAtEdge failed: no item in Included matched the predicate.",
    )
    _fails(
        lambda: should(EMPTY).place_item_at_edge(lambda i: True),
        "PlaceItemAtEdge failed: no item in Included matched the predicate.",
    )


def test_place_top_n_scored_at_edges():
    # U-shaped: 1.0 at 0, 0.9 at the end, 0.6 at 1, then 0.3 ... 0.4 inward
    should(REPORT).place_top_n_scored_at_edges(3).place_top_n_scored_at_edges(0)
    _fails(
        lambda: should(REPORT).place_top_n_scored_at_edges(4),
        "PlaceTopNScoredAtEdges(4) failed: 1 of the top-4 scored items were not at expected edge positions. "
        "Top-4 items (by score): [(kind=SystemPrompt, score=1.0, idx=0), (kind=Document, score=0.9, idx=4), "
        "(kind=Message, score=0.6, idx=1), (kind=ToolOutput, score=0.4, idx=2)]. "
        "Expected edge positions: [0, 4, 1, 3].",
    )
    _fails(
        lambda: should(REPORT).place_top_n_scored_at_edges(6),
        "PlaceTopNScoredAtEdges(6) failed: Included had 5 items, fewer than the 6 edge positions to check.",
    )
    should(EMPTY).place_top_n_scored_at_edges(0)


def test_place_top_n_tie_at_the_boundary_is_tolerated():
    # the 2nd score (0.5) is shared by positions 1 and 3: position 3 (the 2nd edge) holds a
    # tied item, which the spec accepts; upstream libraries pick one tied item and fail
    tied = _report([_inc("a", "M", 0.9), _inc("b", "M", 0.5), _inc("c", "M", 0.1), _inc("d", "M", 0.5)])
    should(tied).place_top_n_scored_at_edges(2)
    # a strictly higher item in the middle is not excused by ties at the edges
    mid = _report([_inc("a", "M", 0.3), _inc("b", "M", 0.9), _inc("c", "M", 0.3), _inc("d", "M", 0.3)])
    _fails(
        lambda: should(mid).place_top_n_scored_at_edges(2),
        "PlaceTopNScoredAtEdges(2) failed: 1 of the top-2 scored items were not at expected edge positions. "
        "Top-2 items (by score): [(kind=M, score=0.9, idx=1), (kind=M, score=0.3, idx=0)]. "
        "Expected edge positions: [0, 3].",
    )


def test_on_a_real_report():
    items = [
        c.ContextItem("system", 20, kind="SystemPrompt", pinned=True),
        c.ContextItem("hello", 30, kind="Message"),
        c.ContextItem("tool out", 200, kind="ToolOutput"),
        c.ContextItem("doc", 40, kind="Document"),
    ]
    rep = c.Pipeline(c.preset("rag")).dry_run(items, c.ContextBudget(max_tokens=120, target_tokens=100))
    ch = should(rep).include_item_with_kind("SystemPrompt").exclude_item_with_reason("BudgetExceeded")
    ch.exclude_item_with_budget_details(col("kind") == "ToolOutput", 200, rep.excluded[0].reason.available_tokens)
    ch.have_no_exclusions_for_kind("Message").excluded_items_are_sorted_by_score_descending()
    ch.place_top_n_scored_at_edges(len(rep.included))
    with pytest.raises(SelectionReportAssertionError):
        ch.have_no_exclusions_for_kind("ToolOutput")


def test_should_rejects_other_subjects():
    with pytest.raises(InvalidInputTypeError):
        should([1, 2])
    with pytest.raises(InvalidConfigError):
        should(REPORT).include_item_with_kind("")


def test_conditions_compose_and_check_their_arguments():
    e = REPORT.included[1]
    assert (col("kind") == "MESSAGE")(e) and (col("tokens") >= 20)(e)
    assert ((col("kind") == "Message") & (col("score") > 0.5))(e)
    assert not (~(col("kind") == "Message") | (col("score") > 0.9))(e)
    assert col("content").matches("^m[0-9]$")(e) and col("content").startswith("m")(e)
    assert col("kind").isin(["Document", "message"])(e)
    assert col("priority").is_null()(e) and not (col("priority") > 0)(e)
    with pytest.raises(InvalidConfigError, match="unknown condition column"):
        col("colour")
    with pytest.raises(InvalidConfigError, match="compares with a number"):
        _ = col("tokens") > "10"
    with pytest.raises(InvalidConfigError, match="unknown reason"):
        _ = col("reason") == "Nope"
    with pytest.raises(TypeError, match="no truth value"):
        bool(col("kind") == "Message")
    with pytest.raises(InvalidConfigError, match="needs a report entry"):
        (col("score") > 0)(e.item)


def test_api_misuse_is_a_cupel_error_naming_what_is_valid():
    """Issue 26: a string threshold raised numpy's UFuncTypeError, a per-report pattern on the
    corpus form a bare AttributeError, and a lower-case verbosity a plain ValueError."""
    from cupel_np.analysis.otel import CupelVerbosity, OpenTelemetryTraceCollector
    from cupel_np.testing import should

    items = [c.ContextItem(content=f"m{i}", tokens=10, future_relevance_hint=i / 10) for i in range(4)]
    budget = c.ContextBudget(max_tokens=100, target_tokens=30)
    report = c.Pipeline(c.Policy(c.ReflexiveScorer())).dry_run(items, budget)
    with pytest.raises(c.InvalidInputTypeError, match="threshold must be a number"):
        should(report).have_budget_utilization_above("0.3", budget)
    with pytest.raises(c.InvalidConfigError, match="threshold must be finite"):
        should(report).have_budget_utilization_above(float("nan"), budget)

    table = c.ItemTable.from_items([dict(content=f"m{i}", tokens=10, set="s") for i in range(4)], set_column="set")
    result = c.sweep(table, budget, [("a", c.preset("chat")), ("b", c.preset("rag"))])
    with pytest.raises(c.InvalidInputTypeError, match="threshold must be a number"):
        should(result).every_set().have_budget_utilization_above("0.3")
    with pytest.raises(c.CupelError, match=r"every_set\(variant=\.\.\.\)\.include_item_with_kind"):
        should(result).include_item_with_kind("Message")
    with pytest.raises(AttributeError):  # still an AttributeError for hasattr and friends
        should(result).include_item_with_kind("Message")
    assert not hasattr(should(result), "no_such_pattern")

    assert OpenTelemetryTraceCollector("stageonly").verbosity is CupelVerbosity.StageOnly
    assert OpenTelemetryTraceCollector("FULL").verbosity is CupelVerbosity.Full
    with pytest.raises(c.InvalidConfigError, match="StageOnly, StageAndExclusions, Full"):
        OpenTelemetryTraceCollector("everything")
