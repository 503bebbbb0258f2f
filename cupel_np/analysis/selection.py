"""SelectionReport and the inclusion / exclusion reasons.

Reports are views over a PolicyRun's columns: the included and excluded lists (and the
ContextItems in them) are built only when read.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, fields
from functools import cached_property
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from cupel_np.analysis import analytics, toolpairs
from cupel_np.analysis._repr import REPR_CSS, REPR_ROWS, html_table
from cupel_np.analysis.trace import OverflowEvent, TraceEvent
from cupel_np.engine import reasons
from cupel_np.engine.reasons import REASON_NAMES
from cupel_np.model.budget import ContextBudget
from cupel_np.model.items import ContextItem
from cupel_np.model.policy import Policy
from cupel_np.text import shorten

if TYPE_CHECKING:
    from cupel_np.engine.runner import PolicyRun


class InclusionReason(enum.Enum):
    """Why an item was included (the spec's InclusionReason): ``Scored`` (chosen by the slicer),
    ``Pinned`` (pinned, so always in) or ``ZeroToken`` (zero tokens, so free)."""

    Scored = "Scored"
    Pinned = "Pinned"
    ZeroToken = "ZeroToken"

    def to_dict(self) -> dict:
        """``{"reason": name}``, the spec's JSON form of the reason."""
        return {"reason": self.value}


@dataclass(frozen=True)
class ExclusionReason:
    """Base of the data-carrying exclusion reasons; ``reason`` is the variant name."""

    reason: ClassVar[str] = ""

    def to_dict(self) -> dict:
        """The spec's JSON form: ``{"reason": name}`` plus the reason's fields (tokens are token
        counts)."""
        d = {"reason": self.reason}
        d.update(self.__dict__)
        return d


@dataclass(frozen=True)
class BudgetExceeded(ExclusionReason):
    """The item did not fit: it needed ``item_tokens`` tokens and ``available_tokens`` were
    left."""

    item_tokens: int
    available_tokens: int
    reason: ClassVar[str] = "BudgetExceeded"


@dataclass(frozen=True)
class ScoredTooLow(ExclusionReason):
    """Reserved by the spec; never emitted by the built-in stages."""

    score: float
    threshold: float
    reason: ClassVar[str] = "ScoredTooLow"


@dataclass(frozen=True)
class Deduplicated(ExclusionReason):
    """A duplicate of the item with id ``deduplicated_against`` (same content; the higher-scored
    one stays)."""

    deduplicated_against: str
    reason: ClassVar[str] = "Deduplicated"


@dataclass(frozen=True)
class QuotaCapExceeded(ExclusionReason):
    """Reserved by the spec; never emitted by the built-in stages."""

    kind: str
    cap: int
    actual: int
    reason: ClassVar[str] = "QuotaCapExceeded"


@dataclass(frozen=True)
class QuotaRequireDisplaced(ExclusionReason):
    """Reserved by the spec; never emitted by the built-in stages."""

    displaced_by_kind: str
    reason: ClassVar[str] = "QuotaRequireDisplaced"


@dataclass(frozen=True)
class NegativeTokens(ExclusionReason):
    """The item has a negative token count ``tokens`` (never selectable)."""

    tokens: int
    reason: ClassVar[str] = "NegativeTokens"


@dataclass(frozen=True)
class PinnedOverride(ExclusionReason):
    """The item was displaced by the pinned item ``displaced_by`` (a pinned item takes the
    room)."""

    displaced_by: str
    reason: ClassVar[str] = "PinnedOverride"


@dataclass(frozen=True)
class Filtered(ExclusionReason):
    """Reserved by the spec; never emitted by the built-in stages."""

    filter_name: str
    reason: ClassVar[str] = "Filtered"


@dataclass(frozen=True)
class CountCapExceeded(ExclusionReason):
    """A count-quota slicer's per-kind ``cap_count`` was reached (upstream extension)."""

    kind: str
    cap: int
    count: int
    reason: ClassVar[str] = "CountCapExceeded"


@dataclass(frozen=True)
class IncludedItem:
    """An included item with its ``score`` (the scorer's value, 0..1 for the built-in scorers)
    and its ``InclusionReason``."""

    item: ContextItem
    score: float
    reason: InclusionReason


@dataclass(frozen=True)
class ExcludedItem:
    """An excluded item with its ``score`` and the ``ExclusionReason`` (which carries the
    numbers, e.g. tokens)."""

    item: ContextItem
    score: float
    reason: ExclusionReason


@dataclass(frozen=True)
class CountRequirementShortfall:
    """A count-quota ``require_count`` the candidates could not meet: ``kind``, the
    ``required_count`` and the ``satisfied_count`` reached (item counts)."""

    kind: str
    required_count: int
    satisfied_count: int


_INCLUSION = {
    reasons.R_SCORED: InclusionReason.Scored,
    reasons.R_PINNED: InclusionReason.Pinned,
    reasons.R_ZERO_TOKEN: InclusionReason.ZeroToken,
}
#: ``_INCLUSION`` as a list by code (a missing code: None, which no included row holds)
_INCLUSION_BY_CODE = [_INCLUSION.get(code) for code in range(256)]


def _sparse(pairs, row: int):
    rows = pairs[0]
    i = int(np.searchsorted(rows, row))
    if i >= rows.shape[0] or rows[i] != row:
        raise KeyError(row)
    return tuple(int(a[i]) for a in pairs[1:])


def exclusion_reason(run, row: int, segment: int) -> ExclusionReason:
    """Rebuild row ``row``'s data-carrying exclusion reason from the run's columns."""
    sw, v = run.sweep, run.v
    t = run.table
    code = int(run.reason[row])
    plan = sw.group_plan[v]
    # a unit's member carries its unit's reason: the unit's tokens (docs/tool-pairs.md)
    tokens = t.tokens if plan is None else plan.unit_row_tokens
    if code == reasons.R_BUDGET_EXCEEDED:
        return BudgetExceeded(int(tokens[row]), int(sw.avail_slice[v, segment]))
    if code == reasons.R_TRUNCATED:
        return BudgetExceeded(int(tokens[row]), int(sw.avail_place[v, segment]))
    if code == reasons.R_NEGATIVE_TOKENS:
        return NegativeTokens(int(t.tokens[row]))
    if code == reasons.R_DEDUPLICATED:
        (winner,) = _sparse(sw.dedup_winner[v], row)
        return Deduplicated(t.content[winner].as_py())
    if code in (reasons.R_PINNED_OVERRIDE, reasons.R_TRUNCATED_PINNED):
        return PinnedOverride(t.content[int(sw.classified.first_pin[segment])].as_py())
    if code == reasons.R_COUNT_CAP_EXCEEDED:
        cap, count = _sparse(sw.count_cap[v], row)
        unit_row = row if plan is None or plan.member_rep[row] < 0 else int(plan.member_rep[row])
        return CountCapExceeded(t.kind[unit_row].as_py(), cap, count)  # the unit's kind: its first member's
    raise ValueError(f"row {row} has no exclusion reason (code {code})")


_NEW = object.__new__


def _build3(cls, first: list, second: list, third: list) -> list:
    """``list(map(cls, first, second, third))`` for a frozen dataclass of three fields and no
    ``__post_init__`` (``IncludedItem``, ``ExcludedItem``): each instance's fields written
    straight into its ``__dict__``, in field order, as the generated ``__init__`` writes them
    (its three ``object.__setattr__`` calls cost twice the rest; a report of 5,000 items)."""
    a, b, c = (f.name for f in fields(cls))
    out: list = []
    append = out.append
    for x, y, z in zip(first, second, third, strict=True):
        obj = _NEW(cls)
        d = obj.__dict__
        d[a] = x
        d[b] = y
        d[c] = z
        append(obj)
    return out


def _build2(cls, first: list, second) -> list:
    """``_build3`` for a frozen dataclass of two fields (``BudgetExceeded``); ``second`` one
    value for every instance."""
    a, b = (f.name for f in fields(cls))
    out: list = []
    append = out.append
    for x in first:
        obj = _NEW(cls)
        d = obj.__dict__
        d[a] = x
        d[b] = second
        append(obj)
    return out


def exclusion_reasons(run, rows: np.ndarray, segment: int) -> list[ExclusionReason]:
    """``[exclusion_reason(run, r, segment) for r in rows]``: the budget reasons (most of a
    report's excluded items) built from one column read, the others row by row."""
    n = rows.shape[0]
    codes = run.reason[rows]
    out: list = [None] * n
    sw, v = run.sweep, run.v
    plan = sw.group_plan[v]
    tokens = run.table.tokens if plan is None else plan.unit_row_tokens
    for code, avail in (
        (reasons.R_BUDGET_EXCEEDED, sw.avail_slice[v, segment] if n else 0),
        (reasons.R_TRUNCATED, sw.avail_place[v, segment] if n else 0),
    ):
        at = np.flatnonzero(codes == code)
        if at.shape[0]:
            built = _build2(BudgetExceeded, tokens[rows[at]].tolist(), int(avail))
            for i, r in zip(at.tolist(), built):
                out[i] = r
    for i in [i for i, r in enumerate(out) if r is None]:
        out[i] = exclusion_reason(run, int(rows[i]), segment)
    return out


def _stage_rank(reason: np.ndarray) -> np.ndarray:
    """The stage that recorded each exclusion: classify 0, dedup 1, slice 2, place 3."""
    stage = reasons.EXCLUSION_STAGE[reason.view(np.uint8)]
    return np.where(stage < 0, 2, stage).astype(np.int8)


def excluded_order(run, lo: int, hi: int) -> np.ndarray:
    """Rows of one set's excluded items: score descending, then the order the pipeline
    recorded them (stage, then within a stage its own order: row order, except truncation,
    which drops in its own order)."""
    rows = np.arange(lo, hi)
    rows = rows[~run.included[lo:hi]]
    if rows.size == 0:
        return rows
    sc = run.scores_at(rows)
    key = np.where(np.isnan(sc), np.inf, -sc)
    stage = _stage_rank(run.reason[rows])
    within = rows.astype(np.int64)
    trunc_rows, trunc_ord = run.sweep.trunc_order[run.v]
    if trunc_rows.size:
        sel = stage == 3
        if sel.any():
            idx = np.searchsorted(trunc_rows, rows[sel])
            within = within.copy()
            within[sel] = trunc_ord[idx]
    return rows[np.lexsort((within, stage, key))]


class SelectionReport:
    """Why each item of one item set was included or excluded.

    ``included``: placed order; ``excluded``: score descending (stable by the order the
    pipeline excluded them); every input row is in exactly one of them."""

    def __init__(self, run: PolicyRun, segment: int):
        err = run.error_of(segment)
        if err is not None:
            # this (policy, set) failed: there is no selection to report
            raise err
        self._run = run
        self._seg = segment
        t = run.table
        self._lo = int(t.offsets[segment])
        self._hi = int(t.offsets[segment + 1])

    #: the run's trace events (set by ``Pipeline.dry_run``; reports read from a sweep have none:
    #: see ``SweepResult.funnel_table`` and ``stage_seconds``)
    _events: list = []

    @property
    def events(self) -> list[TraceEvent]:
        """Trace events in stage order (``Pipeline.dry_run``: five stage events, plus item
        events at the ITEM detail level); empty for reports read from a sweep."""
        return list(self._events)

    @cached_property
    def excluded_stage_ranks(self) -> np.ndarray:
        """Per ``excluded`` item, the stage that excluded it: 0 Classify, 1 Deduplicate,
        2 Slice, 3 Place (truncation)."""
        return _stage_rank(self._run.reason[self.excluded_rows])

    @cached_property
    def overflow(self) -> OverflowEvent | None:
        """The OverflowEvent of this run: only under the proceed strategy, when the included
        (pinned + sliced) tokens exceed ``target_tokens``; None otherwise."""
        run = self._run
        if run.policy.overflow_strategy != "proceed":
            return None
        rows = self.included_rows
        used = int(run.table.tokens[rows].sum())
        if used <= run.budget.target_tokens:
            return None
        return OverflowEvent(used - run.budget.target_tokens, tuple(i.item for i in self.included), run.budget)

    @cached_property
    def included_rows(self) -> np.ndarray:
        """Grouped-order rows of the included items, in placed order."""
        run = self._run
        return run.sweep.placed_order(run.v, self._seg)[0]

    @cached_property
    def excluded_rows(self) -> np.ndarray:
        return excluded_order(self._run, self._lo, self._hi)

    @cached_property
    def included(self) -> list[IncludedItem]:
        run = self._run
        rows = self.included_rows
        reason_of = list(map(_INCLUSION_BY_CODE.__getitem__, run.reason[rows].tolist()))
        if None in reason_of:
            code = run.reason[rows[reason_of.index(None)]]
            raise ValueError(f"an included row holds exclusion code {int(code)}")
        return _build3(IncludedItem, run.table.rows(rows), run.scores_at(rows).tolist(), reason_of)

    @cached_property
    def excluded(self) -> list[ExcludedItem]:
        run = self._run
        rows = self.excluded_rows
        reason_of = exclusion_reasons(run, rows, self._seg)
        return _build3(ExcludedItem, run.table.rows(rows), run.scores_at(rows).tolist(), reason_of)

    @property
    def total_candidates(self) -> int:
        """The number of items of the set that went into the pipeline (included + excluded)."""
        return self._hi - self._lo

    @property
    def total_tokens_considered(self) -> int:
        """The tokens of all the set's items, summed (a token count)."""
        return int(self._run.table.tokens[self._lo : self._hi].sum())

    @property
    def count_requirement_shortfalls(self) -> list[CountRequirementShortfall]:
        """The count-quota requirements this run could not meet (empty when all were met)."""
        return [CountRequirementShortfall(*s) for s in self._run.shortfalls_of(self._seg)]

    @property
    def effective_target_tokens(self) -> int:
        """The budget's target after the output reserve and safety margin (tokens), as the
        slicer saw it."""
        return int(self._run.effective_target[self._seg])

    # -- analytics (cupel_np.analysis.analytics; upstream's SelectionReportExtensions) --------
    def budget_utilization(self, budget: ContextBudget | None = None) -> float:
        """Included tokens / ``budget.max_tokens`` (default: the run's budget; NaN when 0)."""
        return analytics.budget_utilization(self, self._run.budget if budget is None else budget)

    def kind_diversity(self) -> int:
        """Distinct kinds (ASCII case-insensitive) among the included items."""
        return analytics.kind_diversity(self)

    def timestamp_coverage(self) -> float:
        """Share of included items with a timestamp (0.0 when none is included)."""
        return analytics.timestamp_coverage(self)

    def quota_utilization(
        self, policy: Policy | None = None, budget: ContextBudget | None = None
    ) -> list[analytics.KindQuotaUtilization]:
        """Per quota constraint of ``policy``'s slicer (default: the run's policy and budget)."""
        return analytics.quota_utilization(
            self, self._run.policy if policy is None else policy, self._run.budget if budget is None else budget
        )

    # -- tool pairs (cupel_np.analysis.toolpairs; docs/tool-pairs.md) -------------------------
    @cached_property
    def _orphans(self) -> tuple[np.ndarray, np.ndarray] | None:
        links = toolpairs.tool_links(self._run.table)
        if links is None:
            return None
        seg = links.segment(self._seg)
        inc = self._run.included
        kept = inc[seg.rows]
        link_of = np.repeat(np.arange(seg.n_links), np.diff(seg.link_off))
        kept_calls = np.bincount(link_of[kept & seg.is_call], minlength=seg.n_links)
        missing = np.bincount(link_of[~kept & ~seg.is_call], minlength=seg.n_links)
        calls = seg.rows[kept & seg.is_call & (missing[link_of] > 0)]
        results = seg.rows[kept & ~seg.is_call & (kept_calls[link_of] == 0)]
        return np.sort(calls), np.sort(results)

    @property
    def orphan_calls(self) -> int | None:
        """Tool calls kept without all their results (None: the items carry no
        ``tool_call_id`` / ``tool_role`` link)."""
        o = self._orphans
        return None if o is None else int(o[0].shape[0])

    @property
    def orphan_results(self) -> int | None:
        """Tool results kept without their call (None: the items carry no link)."""
        o = self._orphans
        return None if o is None else int(o[1].shape[0])

    def orphan_rows(self) -> tuple[np.ndarray, np.ndarray] | None:
        """Grouped-order rows of the orphan calls and of the orphan results (ascending; see
        ``input_rows``), or None without the link."""
        return self._orphans

    def input_rows(self, rows: np.ndarray) -> np.ndarray:
        """Map grouped rows (``included_rows`` / ``excluded_rows``) to input row numbers."""
        return self._run.table.input_row[rows]

    def to_dict(self) -> dict:
        """The report as the spec's JSON-ready dict: events, included and excluded items with
        scores and reasons, totals."""
        return {
            "events": [e.to_dict() for e in self.events],
            "included": [
                {"item": i.item.to_dict(), "score": i.score, "reason": i.reason.to_dict()} for i in self.included
            ],
            "excluded": [
                {"item": e.item.to_dict(), "score": e.score, "reason": e.reason.to_dict()} for e in self.excluded
            ],
            "total_candidates": self.total_candidates,
            "total_tokens_considered": self.total_tokens_considered,
            "count_requirement_shortfalls": [s.__dict__ for s in self.count_requirement_shortfalls],
        }

    def __repr__(self) -> str:
        return (
            f"SelectionReport(included={int(self._run.included[self._lo : self._hi].sum())}, "
            f"excluded={self.total_candidates - int(self._run.included[self._lo : self._hi].sum())}, "
            f"total_candidates={self.total_candidates})"
        )

    def _repr_html_(self) -> str:
        """A compact notebook summary (the first included and excluded items with reasons)."""
        return _repr_html_selection(self)


def _repr_html_selection(report) -> str:
    run = report._run
    t = run.table
    inc = report.included_rows
    exc = report.excluded_rows
    used = int(t.tokens[inc].sum())
    rows = []
    for r, sc in zip(inc[:REPR_ROWS], run.scores_at(inc[:REPR_ROWS])):
        rows.append(
            [
                "IN",
                shorten(t.content[int(r)].as_py(), 60),
                t.kind[int(r)].as_py(),
                int(t.tokens[r]),
                float(sc),
                REASON_NAMES.get(int(run.reason[r]), "?"),
            ]
        )
    for r, sc in zip(exc[:REPR_ROWS], run.scores_at(exc[:REPR_ROWS])):
        rows.append(
            [
                "OUT",
                shorten(t.content[int(r)].as_py(), 60),
                t.kind[int(r)].as_py(),
                int(t.tokens[r]),
                float(sc),
                exclusion_reason(run, int(r), report._seg).reason,
            ]
        )
    more = []
    if len(inc) > REPR_ROWS:
        more.append(f"{len(inc) - REPR_ROWS} more included")
    if len(exc) > REPR_ROWS:
        more.append(f"{len(exc) - REPR_ROWS} more excluded")
    return (
        f'<div class="cupel-np">{REPR_CSS}<b>SelectionReport</b>: {len(inc):,} included ({used:,} tokens, '
        f"effective target {report.effective_target_tokens:,}), {len(exc):,} excluded of "
        f"{report.total_candidates:,} candidates"
        + html_table(["", "content", "kind", "tokens", "score", "reason"], rows, {3, 4})
        + (f"<p>… {', '.join(more)}</p>" if more else "")
        + "</div>"
    )
