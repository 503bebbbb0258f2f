"""Stage events, trace collectors and overflow events (spec: diagnostics/events.md and
diagnostics/trace-collector.md), and the batch equivalent for sweeps: the stage funnel.

A single run (``Pipeline.dry_run(..., trace=collector)``) reports to a collector: item-level
events of a stage first (only when the collector's detail level is ``ITEM``), then exactly one
stage-level event per stage, in stage order Classify, Score, Deduplicate, Slice, Place.
A sweep runs each stage once for every set and variant, so it has no per-set durations: its
funnel (``funnel_columns`` / ``SweepResult.funnel_table()``) gives the items entering and
leaving each stage per (variant, set), and ``stage_seconds`` the measured wall time of each
batch phase.

Item counts (``docs/observability.md``): Classify in = all items, out = items with tokens >= 0;
Score in = out = the scoreable (non-pinned) items; Deduplicate out = its in minus Deduplicated;
Slice in = Deduplicate out, out = the items the slicer selected; Place in = pinned + sliced,
out = the included items (truncation is Place's exclusion).
"""

from __future__ import annotations

import enum
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from cupel_np.engine import reasons
from cupel_np.errors import TraceCollectorWarning
from cupel_np.model.budget import ContextBudget
from cupel_np.model.items import ContextItem
from cupel_np.text import ascii_fold


class PipelineStage(enum.Enum):
    """The five observable stages (Sort has no diagnostic boundary, as in the spec)."""

    Classify = "Classify"
    Score = "Score"
    Deduplicate = "Deduplicate"
    Slice = "Slice"
    Place = "Place"


#: the stages in pipeline order
STAGES = tuple(PipelineStage)


class TraceDetailLevel(enum.IntEnum):
    """``STAGE``: stage events only; ``ITEM``: stage events plus per-item events."""

    STAGE = 0
    ITEM = 1


@dataclass(frozen=True)
class TraceEvent:
    """One trace record. Stage events: the stage's wall time and item count (items leaving
    the stage). Item events: ``duration_ms`` 0.0, ``item_count`` 1 and a message."""

    stage: PipelineStage
    duration_ms: float
    item_count: int
    message: str | None = None

    def to_dict(self) -> dict:
        """The spec's JSON shape (``message`` omitted when absent)."""
        d: dict = {"stage": self.stage.value, "duration_ms": self.duration_ms, "item_count": self.item_count}
        if self.message is not None:
            d["message"] = self.message
        return d


@dataclass(frozen=True)
class OverflowEvent:
    """The merged selection exceeded ``budget.target_tokens`` under the proceed strategy.

    ``overflowing_items``: every item present at the overflow (pinned and sliced)."""

    tokens_over_budget: int
    overflowing_items: tuple[ContextItem, ...]
    budget: ContextBudget


@runtime_checkable
class TraceCollector(Protocol):
    """What the pipeline calls while it runs. ``is_enabled`` is checked before any event is
    built; a collector may also define ``record_overflow_event(event)`` and
    ``on_pipeline_completed(report, budget, snapshots)`` (both optional)."""

    @property
    def is_enabled(self) -> bool: ...

    def record_stage_event(self, event: TraceEvent) -> None: ...

    def record_item_event(self, event: TraceEvent) -> None: ...


class NullTraceCollector:
    """The disabled collector: records nothing and makes the pipeline build no event."""

    is_enabled = False

    def record_stage_event(self, event: TraceEvent) -> None:
        """Does nothing."""

    def record_item_event(self, event: TraceEvent) -> None:
        """Does nothing."""


#: a shared disabled collector
NULL_COLLECTOR = NullTraceCollector()


@dataclass
class DiagnosticTraceCollector:
    """Buffers events in insertion order. ``detail_level`` gates item events; ``callback``
    (optional) is called synchronously with every recorded event; overflow events are kept
    in ``overflow_events``."""

    detail_level: TraceDetailLevel = TraceDetailLevel.STAGE
    callback: Callable[[TraceEvent], None] | None = None
    events: list[TraceEvent] = field(default_factory=list)
    overflow_events: list[OverflowEvent] = field(default_factory=list)

    @property
    def is_enabled(self) -> bool:
        """Always True: this collector records every event it is given."""
        return True

    def record_stage_event(self, event: TraceEvent) -> None:
        """Record a stage event (always)."""
        self.events.append(event)
        if self.callback is not None:
            self.callback(event)

    def record_item_event(self, event: TraceEvent) -> None:
        """Record an item event when the detail level is ITEM."""
        if self.detail_level >= TraceDetailLevel.ITEM:
            self.record_stage_event(event)

    def record_overflow_event(self, event: OverflowEvent) -> None:
        """Keep an overflow event."""
        self.overflow_events.append(event)


class GuardedCollector:
    """A user's collector as one run sees it: a method (or a callback inside it) that raises is
    reported once, as a ``TraceCollectorWarning`` naming the collector, the method and the error,
    and the collector is not called again in this run. Tracing only observes: it never aborts
    the pipeline (as .NET's DiagnosticTraceCollector survives a failing callback)."""

    def __init__(self, collector: Any):
        self.collector = collector
        self.failed = False

    def call(self, method: str, *args: Any) -> None:
        """``collector.method(*args)`` unless the collector failed earlier in this run or has no
        such (optional) method."""
        if self.failed:
            return
        fn = getattr(self.collector, method, None)
        if fn is None:
            return
        try:
            fn(*args)
        except Exception as err:  # noqa: BLE001 - any error of user code, reported and survived
            self.failed = True
            warnings.warn(
                f"trace collector {type(self.collector).__name__}.{method} raised "
                f"{type(err).__name__}: {err}; the run goes on without it (tracing is observational)",
                TraceCollectorWarning,
                stacklevel=2,
            )

    @property
    def is_enabled(self) -> bool:
        """The collector's ``is_enabled``; False once it failed (or when reading it raises)."""
        if self.failed:
            return False
        try:
            return bool(self.collector.is_enabled)
        except Exception as err:  # noqa: BLE001
            self.failed = True
            warnings.warn(
                f"trace collector {type(self.collector).__name__}.is_enabled raised {type(err).__name__}: {err}; "
                "the run goes on without it (tracing is observational)",
                TraceCollectorWarning,
                stacklevel=2,
            )
            return False

    @property
    def detail_level(self) -> Any:
        """The collector's detail level (ITEM when it has none: it then receives item events)."""
        return getattr(self.collector, "detail_level", TraceDetailLevel.ITEM)

    def record_stage_event(self, event: TraceEvent) -> None:
        """Forwarded, guarded."""
        self.call("record_stage_event", event)

    def record_item_event(self, event: TraceEvent) -> None:
        """Forwarded, guarded."""
        self.call("record_item_event", event)


@dataclass(frozen=True)
class StageSnapshot:
    """One stage of one run: items in and out, its excluded items and its wall clock."""

    stage: PipelineStage
    item_count_in: int
    item_count_out: int
    start_ns: int
    end_ns: int

    @property
    def duration_ms(self) -> float:
        return (self.end_ns - self.start_ns) / 1e6


# --------------------------------------------------------------------------- funnel
#: funnel bucket of every reason code: 0 not excluded by a stage below, 1 Deduplicate,
#: 2 Slice, 3 Place (NegativeTokens is Classify's: shared by all variants, counted apart)
_BUCKET = np.maximum(reasons.EXCLUSION_STAGE, 0).astype(np.int64)


def funnel_columns(run, set_of: np.ndarray) -> np.ndarray:
    """``[V, S, 5, 2]`` int64: items entering and leaving each stage (in ``STAGES`` order) for
    every (variant, set) of a ``SweepRun``, from its reason matrix (one bincount per variant)."""
    t = run.table
    n_sets, n_var = t.n_sets, run.n_variants
    cls = run.classified
    n = np.diff(np.asarray(t.offsets, dtype=np.int64))
    neg = np.bincount(set_of[cls.negative], minlength=n_sets)
    pin = np.diff(cls.pin_offsets)
    sc = n - neg - pin
    out = np.empty((n_var, n_sets, 5, 2), dtype=np.int64)
    for v in range(n_var):  # one pass per variant, never per set
        bucket = _BUCKET[run.reason[v].view(np.uint8)]
        per = np.bincount(set_of * 4 + bucket, minlength=n_sets * 4).reshape(n_sets, 4)
        dedup, sliced_out, trunc = per[:, 1], per[:, 2], per[:, 3]
        after_dedup = sc - dedup
        sliced = after_dedup - sliced_out
        out[v, :, 0] = np.stack([n, n - neg], axis=1)
        out[v, :, 1] = np.stack([sc, sc], axis=1)
        out[v, :, 2] = np.stack([sc, after_dedup], axis=1)
        out[v, :, 3] = np.stack([after_dedup, sliced], axis=1)
        out[v, :, 4] = np.stack([pin + sliced, pin + sliced - trunc], axis=1)
    return out


def stage_bounds(run, v: int) -> list[tuple[int, int]]:
    """Wall-clock (start_ns, end_ns) of each stage of variant ``v`` of a ``SweepRun``.

    Classify and the shared scoring run once for every variant; Score is the shared scoring
    followed by the variant's composite (its duration is the sum of both)."""
    p, s = run.prep_ns, run.stage_ns[v]
    score_ns = int(p[2] - p[1]) + int(s[1] - s[0])
    return [
        (int(p[0]), int(p[1])),
        (int(s[1]) - score_ns, int(s[1])),
        (int(s[1]), int(s[2])),
        (int(s[2]), int(s[3])),
        (int(s[3]), int(s[4])),
    ]


def snapshots(run, v: int, seg: int) -> list[StageSnapshot]:
    """The five stage snapshots of variant ``v`` over set ``seg`` (a single run: one set)."""
    t = run.table
    set_of = np.repeat(np.arange(t.n_sets, dtype=np.int64), np.diff(t.offsets))
    counts = funnel_columns(_OneVariant(run, v), set_of)[0, seg]
    return [
        StageSnapshot(st, int(counts[i, 0]), int(counts[i, 1]), a, b)
        for i, (st, (a, b)) in enumerate(zip(STAGES, stage_bounds(run, v)))
    ]


class _OneVariant:
    """A one-variant view of a SweepRun for ``funnel_columns``."""

    def __init__(self, run, v: int):
        self.table = run.table
        self.classified = run.classified
        self.n_variants = 1
        self.reason = run.reason[v : v + 1]


# --------------------------------------------------------------------------- single-run events
_SLICER_CLASS = {"count_quota": "CountQuotaSlice", "count_constrained_knapsack": "CountConstrainedKnapsackSlice"}


def _exclusion_message(e) -> str:
    r = e.reason
    name = r.reason
    if name == "BudgetExceeded":
        return f"BudgetExceeded: {r.item_tokens} tokens requested, {r.available_tokens} available"
    if name == "NegativeTokens":
        return f"NegativeTokens: the item has {r.tokens} tokens"
    if name == "Deduplicated":
        return "Deduplicated: another item with the same content scored at least as high"
    if name == "PinnedOverride":
        return f"PinnedOverride: {e.item.tokens} tokens do not fit beside the pinned items"
    return name


#: the stage of each ``SelectionReport.excluded_stage_ranks`` value
STAGE_OF_RANK = (PipelineStage.Classify, PipelineStage.Deduplicate, PipelineStage.Slice, PipelineStage.Place)


def item_events(report, policy, budget: ContextBudget) -> dict[PipelineStage, list[TraceEvent]]:
    """The item-level events of one run, per stage: one per excluded item (in the stage that
    excluded it, in the excluded list's order), plus upstream's messages: count-quota
    shortfalls and count-cap exclusions (.NET's wording), a quota kind selected below its
    required tokens, and truncation that cannot get under the target because of pinned items.
    ``report`` is a ``SelectionReport``."""
    out: dict[PipelineStage, list[TraceEvent]] = {st: [] for st in STAGES}
    slicer = policy.slicer
    cls_name = _SLICER_CLASS.get(getattr(slicer, "name", ""), "")
    ranks = report.excluded_stage_ranks
    for e, rank in zip(report.excluded, ranks):
        stage = STAGE_OF_RANK[int(rank)]
        if e.reason.reason == "CountCapExceeded":
            msg = (
                f"{cls_name}: item excluded \u2014 kind '{e.reason.kind}' reached cap {e.reason.cap} "
                "(ExclusionReason.CountCapExceeded)."
            )
        else:
            msg = _exclusion_message(e)
        out[stage].append(TraceEvent(stage, 0.0, 1, msg))
    sl = out[PipelineStage.Slice]
    for sf in report.count_requirement_shortfalls:
        sl.append(
            TraceEvent(
                PipelineStage.Slice,
                0.0,
                1,
                f"{cls_name}: shortfall for kind '{sf.kind}': required {sf.required_count}, "
                f"satisfied {sf.satisfied_count}.",
            )
        )
    sl += _quota_warnings(report, slicer, ranks)
    kept = sum(i.item.tokens for i in report.included)
    if policy.overflow_strategy == "truncate" and kept > budget.target_tokens:
        out[PipelineStage.Place].append(
            TraceEvent(
                PipelineStage.Place,
                0.0,
                1,
                f"WARNING: After truncation, selected items still exceed TargetTokens ({kept} > "
                f"{budget.target_tokens}). Pinned items cannot be removed.",
            )
        )
    return out


def _quota_warnings(report, slicer, ranks) -> list[TraceEvent]:
    """QuotaSlice: a required kind whose candidates the slicer selected below its required
    tokens (``int(require / 100 * effective target)``), as .NET warns."""
    quotas = getattr(slicer, "quotas", None)
    if not quotas or getattr(slicer, "name", "") != "quota":
        return []
    target = report.effective_target_tokens
    selected: dict[str, int] = {}
    candidates: set[str] = set()
    for inc in report.included:
        if inc.reason.value != "Pinned":
            k = ascii_fold(inc.item.kind)
            selected[k] = selected.get(k, 0) + inc.item.tokens
            candidates.add(k)
    for e, rank in zip(report.excluded, ranks):
        if rank >= 2:  # a slice or place exclusion: it was a slicer candidate
            k = ascii_fold(e.item.kind)
            candidates.add(k)
            if rank == 3:  # selected by the slicer, then truncated
                selected[k] = selected.get(k, 0) + e.item.tokens
    out = []
    for q in quotas:
        k = ascii_fold(q.kind)
        require = int(q.require / 100.0 * target)
        if require > 0 and k in candidates and selected.get(k, 0) < require:
            out.append(
                TraceEvent(
                    PipelineStage.Slice,
                    0.0,
                    1,
                    f"WARNING: Kind '{q.kind}' selected {selected.get(k, 0)} tokens, below the required "
                    f"{require} tokens. Insufficient items for quota.",
                )
            )
    return out


def record_run(report, policy, budget: ContextBudget, collector, snaps: list[StageSnapshot]) -> list[TraceEvent]:
    """Send one run's events to ``collector`` (item events of a stage before its stage event,
    item events built only when the collector wants them); returns the events recorded."""
    if not collector.is_enabled:
        return []
    wants_items = getattr(collector, "detail_level", TraceDetailLevel.ITEM) >= TraceDetailLevel.ITEM
    items = item_events(report, policy, budget) if wants_items else {}
    recorded: list[TraceEvent] = []
    for snap in snaps:
        for ev in items.get(snap.stage, ()):
            collector.record_item_event(ev)
            recorded.append(ev)
        ev = TraceEvent(snap.stage, snap.duration_ms, snap.item_count_out)
        collector.record_stage_event(ev)
        recorded.append(ev)
    return recorded
