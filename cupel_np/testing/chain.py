"""``should(report)``: the Cupel.Testing vocabulary's 13 assertion patterns over one report.

Every method checks one pattern of ``spec/src/testing/vocabulary.md`` and returns the chain;
a failure raises :class:`SelectionReportAssertionError` (an ``AssertionError``, so pytest
reports it as a test failure) whose message is the spec's message for that pattern.

Kinds compare ASCII-case-insensitively (the engine's ContextKind rule); a kind list in a
message holds each distinct kind once, spelled as it first appears, in list order. Numbers
without a format in the spec print as Python prints them (``0.5``, ``1e-07``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from cupel_np.analysis.analytics import budget_utilization
from cupel_np.engine.reasons import REASON_NAMES
from cupel_np.errors import InvalidConfigError, InvalidInputTypeError, SelectionReportAssertionError
from cupel_np.model.budget import ContextBudget
from cupel_np.text import ascii_fold, is_blank

__all__ = ["SelectionReportAssertionChain", "SelectionReportAssertionError", "reason_name", "EXCLUSION_REASONS"]

#: the spec's exclusion reason variant names (a reason argument names one of these)
EXCLUSION_REASONS = tuple(sorted({n for c, n in REASON_NAMES.items() if c >= 10}))


def reason_name(reason) -> str:
    """The spec's variant name of a reason argument: a name (any ASCII case), an
    ``ExclusionReason`` class or instance, or an ``InclusionReason``."""
    name = getattr(reason, "reason", None)
    if isinstance(name, str) and name:
        return name
    value = getattr(reason, "value", None)
    if isinstance(value, str):
        return value
    if isinstance(reason, str):
        for n in EXCLUSION_REASONS:
            if ascii_fold(n) == ascii_fold(reason):
                return n
    raise InvalidConfigError(f"unknown exclusion reason {reason!r}; reasons: {', '.join(EXCLUSION_REASONS)}")


def entry_reason_name(entry) -> str:
    """The reason variant name of an IncludedItem / ExcludedItem."""
    return reason_name(entry.reason)


def _kind_arg(kind) -> str:
    if not isinstance(kind, str) or is_blank(kind):
        raise InvalidConfigError(f"a kind must be a non-empty string, got {kind!r}")
    return kind


def _count_arg(n, what: str = "n") -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise InvalidConfigError(f"{what} must be a non-negative integer, got {n!r}")
    return n


def _threshold_arg(t) -> float:
    """A utilization threshold: a finite number (a fraction of ``max_tokens``, e.g. 0.3)."""
    if isinstance(t, bool) or not isinstance(t, (int, float, np.integer, np.floating)):
        raise InvalidInputTypeError(
            f"threshold must be a number (a fraction of max_tokens, e.g. 0.3), got {type(t).__name__} {t!r}"
        )
    if not math.isfinite(float(t)):
        raise InvalidConfigError(f"threshold must be finite, got {t!r}")
    return float(t)


def distinct_kinds(kinds: Sequence[str]) -> list[str]:
    """Each kind once (ASCII-case-insensitively), spelled as it first appears."""
    seen: dict[str, str] = {}
    for k in kinds:
        seen.setdefault(ascii_fold(k), k)
    return list(seen.values())


def distinct_names(names: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(names))


def edge_positions(n: int, count: int) -> list[int]:
    """The first ``n`` edge positions of a list of ``count``: 0, count-1, 1, count-2, ..."""
    out: list[int] = []
    lo, hi = 0, count - 1
    while len(out) < n and lo <= hi:
        out.append(lo)
        if lo != hi and len(out) < n:
            out.append(hi)
        lo, hi = lo + 1, hi - 1
    return out


def _score_key(s: float) -> float:
    """Descending-score sort key; a NaN score ranks lowest."""
    return float("inf") if s != s else -s


class SelectionReportAssertionChain:
    """The assertion chain over one report (anything with ``included`` / ``excluded`` lists of
    ``IncludedItem`` / ``ExcludedItem``). Each method returns the chain."""

    def __init__(self, report):
        self.report = report

    def _fail(self, message: str):
        raise SelectionReportAssertionError(message)

    # -- inclusion -------------------------------------------------------------------
    def include_item_with_kind(self, kind: str) -> SelectionReportAssertionChain:
        """At least one included item has Kind ``kind``."""
        kind = _kind_arg(kind)
        inc = self.report.included
        if not any(ascii_fold(i.item.kind) == ascii_fold(kind) for i in inc):
            kinds = ", ".join(distinct_kinds([i.item.kind for i in inc]))
            self._fail(
                f"IncludeItemWithKind({kind}) failed: Included contained 0 items with Kind={kind}. "
                f"Included had {len(inc)} items with kinds: [{kinds}]."
            )
        return self

    def include_item_matching(self, predicate: Callable) -> SelectionReportAssertionChain:
        """At least one included entry (item, score, reason) satisfies ``predicate``."""
        inc = self.report.included
        if not any(predicate(i) for i in inc):
            shown = "; ".join(f"kind={i.item.kind}, score={i.score}, reason={entry_reason_name(i)}" for i in inc[:5])
            more = f" First {min(5, len(inc))}: [{shown}]." if inc else ""
            self._fail(
                f"IncludeItemMatching failed: no item in Included matched the predicate. Included had {len(inc)} items.{more}"
            )
        return self

    def include_exactly_n_items_with_kind(self, kind: str, n: int) -> SelectionReportAssertionChain:
        """Exactly ``n`` included items have Kind ``kind`` (``n = 0`` is valid)."""
        kind, n = _kind_arg(kind), _count_arg(n)
        inc = self.report.included
        actual = sum(1 for i in inc if ascii_fold(i.item.kind) == ascii_fold(kind))
        if actual != n:
            self._fail(
                f"IncludeExactlyNItemsWithKind({kind}, {n}) failed: expected {n} items with Kind={kind} in Included, "
                f"but found {actual}. Included had {len(inc)} items total."
            )
        return self

    # -- exclusion -------------------------------------------------------------------
    def exclude_item_with_reason(self, reason) -> SelectionReportAssertionChain:
        """At least one excluded item carries the reason variant ``reason``."""
        name = reason_name(reason)
        exc = self.report.excluded
        names = [entry_reason_name(e) for e in exc]
        if name not in names:
            self._fail(
                f"ExcludeItemWithReason({name}) failed: no excluded item had reason {name}. "
                f"Excluded had {len(exc)} items with reasons: [{', '.join(distinct_names(names))}]."
            )
        return self

    def exclude_item_matching_with_reason(self, predicate: Callable, reason) -> SelectionReportAssertionChain:
        """An excluded entry satisfies ``predicate`` and carries the reason variant ``reason``."""
        name = reason_name(reason)
        matched = [entry_reason_name(e) for e in self.report.excluded if predicate(e)]
        if name not in matched:
            self._fail(
                f"ExcludeItemMatchingWithReason(reason={name}) failed: predicate matched {len(matched)} excluded "
                f"item(s) but none had reason {name}. Matched items had reasons: [{', '.join(distinct_names(matched))}]."
            )
        return self

    def exclude_item_with_budget_details(
        self, predicate: Callable, expected_item_tokens: int, expected_available_tokens: int
    ) -> SelectionReportAssertionChain:
        """Some excluded entry satisfies ``predicate`` and is BudgetExceeded with exactly these
        ``item_tokens`` and ``available_tokens``."""
        eit, eat = expected_item_tokens, expected_available_tokens
        budget = [e for e in self.report.excluded if entry_reason_name(e) == "BudgetExceeded" and predicate(e)]
        if any(e.reason.item_tokens == eit and e.reason.available_tokens == eat for e in budget):
            return self
        head = f"ExcludeItemWithBudgetDetails failed: expected BudgetExceeded with item_tokens={eit}, available_tokens={eat}"
        if not budget:
            self._fail(f"{head}, but no matching item had reason BudgetExceeded.")
        first = budget[0].reason
        self._fail(f"{head}, but found item_tokens={first.item_tokens}, available_tokens={first.available_tokens}.")
        return self  # unreachable

    def have_no_exclusions_for_kind(self, kind: str) -> SelectionReportAssertionChain:
        """No excluded item has Kind ``kind``."""
        kind = _kind_arg(kind)
        hits = [e for e in self.report.excluded if ascii_fold(e.item.kind) == ascii_fold(kind)]
        if hits:
            self._fail(
                f"HaveNoExclusionsForKind({kind}) failed: found {len(hits)} excluded item(s) with Kind={kind}. "
                f"First: score={hits[0].score}, reason={entry_reason_name(hits[0])}."
            )
        return self

    # -- aggregate -------------------------------------------------------------------
    def have_at_least_n_exclusions(self, n: int) -> SelectionReportAssertionChain:
        """The excluded list holds at least ``n`` items."""
        n = _count_arg(n)
        actual = len(self.report.excluded)
        if actual < n:
            self._fail(
                f"HaveAtLeastNExclusions({n}) failed: expected at least {n} excluded items, but Excluded had {actual}."
            )
        return self

    def excluded_items_are_sorted_by_score_descending(self) -> SelectionReportAssertionChain:
        """Every adjacent pair of excluded scores satisfies ``score[i] >= score[i+1]``."""
        sc = [e.score for e in self.report.excluded]
        for i in range(len(sc) - 1):
            if not sc[i] >= sc[i + 1]:
                self._fail(
                    f"ExcludedItemsAreSortedByScoreDescending failed: item at index {i + 1} (score={sc[i + 1]}) is "
                    f"higher than item at index {i} (score={sc[i]}). Expected non-increasing scores."
                )
        return self

    # -- budget / coverage -----------------------------------------------------------
    def have_budget_utilization_above(self, threshold: float, budget: ContextBudget) -> SelectionReportAssertionChain:
        """sum(included tokens) / budget.max_tokens >= ``threshold`` (exact comparison)."""
        threshold = _threshold_arg(threshold)
        if not isinstance(budget, ContextBudget):
            raise InvalidConfigError(f"budget must be a ContextBudget, got {type(budget).__name__}")
        if budget.max_tokens <= 0:
            raise InvalidConfigError("have_budget_utilization_above needs budget.max_tokens > 0")
        used = sum(i.item.tokens for i in self.report.included)
        actual = budget_utilization(self.report, budget)  # ÷ max_tokens, the spec's PD-2 denominator
        if not actual >= threshold:
            self._fail(
                f"HaveBudgetUtilizationAbove({threshold}) failed: computed utilization was {actual:.6f} "
                f"(includedTokens={used}, budget.MaxTokens={budget.max_tokens})."
            )
        return self

    def have_kind_coverage_count(self, n: int) -> SelectionReportAssertionChain:
        """At least ``n`` distinct kinds among the included items."""
        n = _count_arg(n)
        kinds = distinct_kinds([i.item.kind for i in self.report.included])
        if len(kinds) < n:
            self._fail(
                f"HaveKindCoverageCount({n}) failed: expected at least {n} distinct ContextKind values in Included, "
                f"but found {len(kinds)}: [{', '.join(kinds)}]."
            )
        return self

    # -- ordering --------------------------------------------------------------------
    def place_item_at_edge(self, predicate: Callable) -> SelectionReportAssertionChain:
        """The first or the last included entry satisfies ``predicate``."""
        inc = self.report.included
        hits = [k for k, i in enumerate(inc) if predicate(i)]
        if not hits:
            self._fail("PlaceItemAtEdge failed: no item in Included matched the predicate.")
        last = len(inc) - 1
        if hits[0] != 0 and hits[-1] != last:
            self._fail(
                f"PlaceItemAtEdge failed: item matching predicate was at index {hits[0]} (not at edge). "
                f"Edge positions: 0 and {last}. Included had {len(inc)} items."
            )
        return self

    def place_top_n_scored_at_edges(self, n: int) -> SelectionReportAssertionChain:
        """The ``n`` highest-scored included items occupy the ``n`` outermost positions
        (0, count-1, 1, count-2, ...); at the boundary any item tied with the n-th score counts."""
        n = _count_arg(n)
        inc = self.report.included
        count = len(inc)
        if n == 0:
            return self
        if n > count:
            self._fail(
                f"PlaceTopNScoredAtEdges({n}) failed: Included had {count} items, fewer than the {n} "
                "edge positions to check."
            )
        scores = [i.score for i in inc]
        order = sorted(range(count), key=lambda k: (_score_key(scores[k]), k))
        t = _score_key(scores[order[n - 1]])
        edges = edge_positions(n, count)
        fail = top_n_fail_count([_score_key(s) for s in scores], edges, t, n)
        if fail:
            top = ", ".join(f"(kind={inc[k].item.kind}, score={scores[k]}, idx={k})" for k in order[:n])
            self._fail(
                f"PlaceTopNScoredAtEdges({n}) failed: {fail} of the top-{n} scored items were not at expected edge "
                f"positions. Top-{n} items (by score): [{top}]. Expected edge positions: "
                f"[{', '.join(map(str, edges))}]."
            )
        return self

    # -- tool pairs (a cupel_np extension; docs/tool-pairs.md) ------------------------------
    def keeps_tool_pairs(self) -> SelectionReportAssertionChain:
        """No tool call is included without all its results and no result without its call
        (the ``tool_call_id`` / ``tool_role`` link, see ``cupel_np.analysis.toolpairs``). A
        report whose items carry no link is a configuration error, not a pass."""
        rep = self.report
        rows = rep.orphan_rows() if hasattr(rep, "orphan_rows") else None
        if rows is None:
            from cupel_np.errors import InvalidConfigError

            raise InvalidConfigError(
                "KeepsToolPairs: the items carry no tool link (columns 'tool_call_id' and 'tool_role', "
                "or those metadata keys); see docs/tool-pairs.md"
            )
        calls, results = rows
        if calls.size or results.size:
            t = rep._run.table
            shown = "; ".join(
                f"{what} {t.content[int(r)].as_py()[:40]!r} (input row {int(t.input_row[r])})"
                for what, rs in (("call", calls), ("result", results))
                for r in rs[:3]
            )
            self._fail(
                f"KeepsToolPairs failed: {calls.size} tool call(s) included without all their results and "
                f"{results.size} result(s) included without their call. First: [{shown}]."
            )
        return self


def top_n_fail_count(keys: Sequence[float], edges: Sequence[int], t: float, n: int) -> int:
    """How many of the n edge positions do not hold one of the top-n items, counting an item
    tied with the n-th score (sort key ``t``) as top-n while such slots remain."""
    m = sum(1 for k in keys if k < t)  # strictly better than the n-th score
    e_gt = sum(1 for p in edges if keys[p] < t)
    e_eq = sum(1 for p in edges if keys[p] == t)
    return n - (e_gt + min(e_eq, n - m))
