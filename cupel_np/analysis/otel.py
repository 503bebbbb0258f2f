"""OpenTelemetry spans for pipeline runs and sweeps (spec: integrations/opentelemetry.md).

Optional: ``pip install "cupel-np[otel]"`` installs ``opentelemetry-api`` only; spans go
nowhere until the application configures an SDK tracer provider. Without the package, or with
tracing off (no provider, or a sampler that drops the trace), nothing is built: every entry
point checks first and returns.

* A single run: ``Pipeline.dry_run(items, budget, trace=OpenTelemetryTraceCollector(...))``
  emits ``cupel.pipeline`` with the five ``cupel.stage.{classify,score,deduplicate,slice,place}``
  children and the spec's attributes at the spec's verbosity tiers (``StageOnly``,
  ``StageAndExclusions``, ``Full``). Span times are the stages' measured wall clock.
* A sweep (``cupel_np.sweep``) emits ``cupel.sweep`` with children for its real batch phases:
  ``cupel.sweep.classify``, ``cupel.sweep.score`` (shared scoring), one ``cupel.sweep.variant``
  per variant with ``cupel.sweep.{score,deduplicate,slice,place}`` children, and
  ``cupel.sweep.diffs``; attributes count items, sets, variants and threads.
* Streamed and Dask runs (``current_span``, ``traced_iter``, ``start_root``,
  ``context_carrier``, ``remote_span``): ``cupel.sweep.stream`` with per-chunk read / sweep /
  write spans, and ``cupel.sweep.dask`` with ``cupel.sweep.partition`` spans in its trace.

The tracer's instrumentation scope is ``"cupel"`` (the Rust crate's source name).
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from cupel_np.analysis.trace import STAGE_OF_RANK, STAGES, StageSnapshot, TraceDetailLevel, TraceEvent
from cupel_np.errors import InvalidConfigError

#: instrumentation scope name of every span
SOURCE_NAME = "cupel"

_UNSET: Any = object()
_api: Any = _UNSET


def _otel():
    """The ``opentelemetry.trace`` module, or None when it is not installed (looked up once)."""
    global _api
    if _api is _UNSET:
        try:
            from opentelemetry import trace as api
        except ImportError:  # the optional extra is not installed
            api = None
        _api = api
    return _api


class CupelVerbosity(enum.Enum):
    """How much a pipeline span tree carries (the spec's tiers)."""

    StageOnly = "StageOnly"
    StageAndExclusions = "StageAndExclusions"
    Full = "Full"


_RANK = {CupelVerbosity.StageOnly: 0, CupelVerbosity.StageAndExclusions: 1, CupelVerbosity.Full: 2}


def _verbosity(v) -> CupelVerbosity:
    """A ``CupelVerbosity`` or its name, any case (``"stageonly"``, ``"Full"``)."""
    if isinstance(v, CupelVerbosity):
        return v
    if isinstance(v, str):
        for member in CupelVerbosity:
            if member.value.lower() == v.strip().lower().replace("_", "").replace("-", ""):
                return member
    names = ", ".join(m.value for m in CupelVerbosity)
    raise InvalidConfigError(f"OpenTelemetryTraceCollector verbosity must be one of {names}, got {v!r}")


def _tracer(provider=None):
    api = _otel()
    if api is None:
        return None
    return api.get_tracer(SOURCE_NAME, tracer_provider=provider)


class OpenTelemetryTraceCollector:
    """A trace collector that turns one pipeline run into OpenTelemetry spans.

    ``verbosity``: a ``CupelVerbosity`` (or its name). ``tracer_provider``: the provider to use
    (default: the global one). Disabled (``is_enabled`` False) when opentelemetry is not
    installed. Create one per run or reuse it; it keeps no state between runs."""

    detail_level = TraceDetailLevel.STAGE

    def __init__(self, verbosity: CupelVerbosity | str = CupelVerbosity.StageOnly, tracer_provider=None):
        self.verbosity = _verbosity(verbosity)
        self.tracer_provider = tracer_provider

    @property
    def is_enabled(self) -> bool:
        return _otel() is not None

    def record_stage_event(self, event: TraceEvent) -> None:
        """Spans are built from the run's snapshots when it completes: nothing to do here."""

    def record_item_event(self, event: TraceEvent) -> None:
        """Item decisions are read from the report when the run completes."""

    def on_pipeline_completed(self, report, budget, snapshots: list[StageSnapshot]) -> None:
        """Emit ``cupel.pipeline`` and its five stage spans for a finished run."""
        tracer = _tracer(self.tracer_provider)
        if tracer is None or not snapshots:
            return
        api = _otel()
        root = tracer.start_span("cupel.pipeline", start_time=min(s.start_ns for s in snapshots))
        if not root.is_recording():
            root.end()
            return
        tier = _RANK[self.verbosity]
        root.set_attributes(
            {
                "cupel.budget.max_tokens": budget.max_tokens,
                "cupel.budget.target_tokens": budget.target_tokens,
                "cupel.verbosity": self.verbosity.value,
                "cupel.total_candidates": report.total_candidates,
                "cupel.included_count": len(report.included_rows),
                "cupel.excluded_count": len(report.excluded_rows),
            }
        )
        ctx = api.set_span_in_context(root)
        excluded = _exclusions_by_stage(report) if tier >= 1 else {}
        for snap in snapshots:
            name = snap.stage.value.lower()
            span = tracer.start_span(f"cupel.stage.{name}", context=ctx, start_time=snap.start_ns)
            span.set_attributes(
                {
                    "cupel.stage.name": name,
                    "cupel.stage.item_count_in": snap.item_count_in,
                    "cupel.stage.item_count_out": snap.item_count_out,
                }
            )
            if tier >= 1:
                exc = excluded.get(snap.stage, [])
                span.set_attribute("cupel.exclusion.count", len(exc))
                for e in exc:
                    span.add_event(
                        "cupel.exclusion",
                        {
                            "cupel.exclusion.reason": e.reason.reason,
                            "cupel.exclusion.item_kind": e.item.kind,
                            "cupel.exclusion.item_tokens": e.item.tokens,
                        },
                        timestamp=snap.end_ns,
                    )
            if tier >= 2 and snap.stage is STAGES[-1]:
                for inc in report.included:
                    span.add_event(
                        "cupel.item.included",
                        {
                            "cupel.item.kind": inc.item.kind,
                            "cupel.item.tokens": inc.item.tokens,
                            "cupel.item.score": inc.score,
                        },
                        timestamp=snap.end_ns,
                    )
            span.end(end_time=snap.end_ns)
        root.end(end_time=max(s.end_ns for s in snapshots))


def _exclusions_by_stage(report) -> dict:
    out: dict = {}
    for e, rank in zip(report.excluded, report.excluded_stage_ranks):
        out.setdefault(STAGE_OF_RANK[int(rank)], []).append(e)
    return out


def emit_sweep(result, start_ns: int, end_ns: int, threads: int, tracer_provider=None) -> None:
    """Emit ``cupel.sweep`` and its phase spans for a finished ``SweepResult`` (nothing when
    opentelemetry is missing or the span is not recorded)."""
    tracer = _tracer(tracer_provider)
    if tracer is None:
        return
    root = tracer.start_span("cupel.sweep", start_time=start_ns)
    if not root.is_recording():
        root.end()
        return
    api = _otel()
    run = result.run
    t = result.table
    root.set_attributes(
        {
            "cupel.sweep.items": t.n,
            "cupel.sweep.sets": t.n_sets,
            "cupel.sweep.variants": len(result.labels),
            "cupel.sweep.threads": threads,
            "cupel.sweep.failed_cells": int(result.failed.sum()),
            "cupel.sweep.swinging_contents": result.n_swing,
        }
    )
    ctx = api.set_span_in_context(root)
    p = [int(x) for x in run.prep_ns]

    def child(name: str, a: int, b: int, context, attrs: dict | None = None):
        span = tracer.start_span(name, context=context, start_time=a)
        if attrs:
            span.set_attributes(attrs)
        return span, b

    for name, a, b in (("cupel.sweep.classify", p[0], p[1]), ("cupel.sweep.score", p[1], p[2])):
        span, b = child(name, a, b, ctx)
        span.end(end_time=b)
    for v, label in enumerate(result.labels):
        s = [int(x) for x in run.stage_ns[v]]
        vspan, vend = child(
            "cupel.sweep.variant",
            s[0],
            s[4],
            ctx,
            {"cupel.variant.label": label, "cupel.variant.failed_sets": int(result.failed[v].sum())},
        )
        vctx = api.set_span_in_context(vspan)
        for i, name in enumerate(("score", "deduplicate", "slice", "place")):
            span, b = child(f"cupel.sweep.{name}", s[i], s[i + 1], vctx)
            span.end(end_time=b)
        vspan.end(end_time=vend)
    d0, d1 = result._diff_ns
    span, b = child("cupel.sweep.diffs", d0, d1, ctx)
    span.end(end_time=b)
    root.end(end_time=end_ns)


# --------------------------------------------------------------------------- spans around I/O
@contextmanager
def current_span(name: str, attributes: dict | None = None) -> Iterator[Any]:
    """A span that is current inside the block (so sweeps run there nest under it); yields
    None and does nothing when opentelemetry is missing."""
    tracer = _tracer()
    if tracer is None:
        yield None
        return
    with tracer.start_as_current_span(name, attributes=attributes) as span:
        yield span


def traced_iter(iterable, name: str) -> Iterator[Any]:
    """Yield from ``iterable``, each ``next`` (e.g. reading a chunk) inside a span ``name``."""
    it = iter(iterable)
    while True:
        with current_span(name):
            try:
                value = next(it)
            except StopIteration:
                return
        yield value


def start_root(name: str, attributes: dict | None = None):
    """Start a span that a distributed run's tasks will hang under (None when tracing is
    unavailable); end it with ``end``."""
    tracer = _tracer()
    if tracer is None:
        return None
    span = tracer.start_span(name, attributes=attributes)
    return span if span.is_recording() else _end_none(span)


def _end_none(span) -> None:
    span.end()
    return None


def end(span, attributes: dict | None = None) -> None:
    """End a span from ``start_root`` (no-op for None)."""
    if span is not None:
        if attributes:
            span.set_attributes(attributes)
        span.end()


def context_carrier(span) -> dict:
    """The W3C trace-context headers of ``span`` (empty when None): what a remote task needs
    to put its spans in the driver's trace."""
    if span is None:
        return {}
    from opentelemetry import propagate

    carrier: dict = {}
    propagate.inject(carrier, context=_otel().set_span_in_context(span))
    return carrier


@contextmanager
def remote_span(name: str, carrier: dict | None, attributes: dict | None = None) -> Iterator[Any]:
    """A current span in the trace ``carrier`` came from (a child of the driver's span, in
    the task's process); no span when the carrier is empty or opentelemetry is missing."""
    tracer = _tracer() if carrier else None
    if tracer is None:
        yield None
        return
    from opentelemetry import propagate

    ctx = propagate.extract(carrier)
    with tracer.start_as_current_span(name, context=ctx, attributes=attributes) as span:
        yield span
