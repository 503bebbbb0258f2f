"""OpenTelemetry spans of dry runs (the spec's names, attributes and tiers) and sweeps."""

import pytest
from opentelemetry import trace as otel_trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

import cupel_np as c
from cupel_np.analysis import otel
from cupel_np.analysis.otel import CupelVerbosity, OpenTelemetryTraceCollector

STAGE_SPANS = [f"cupel.stage.{s}" for s in ("classify", "score", "deduplicate", "slice", "place")]


def _provider(**kw):
    exporter = InMemorySpanExporter()
    provider = TracerProvider(**kw)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


@pytest.fixture(scope="module")
def global_exporter():
    """The process-wide provider (set once) with an in-memory exporter."""
    provider = otel_trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        otel_trace.set_tracer_provider(provider)
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter


ITEMS = [
    c.ContextItem("sys", 5, kind="System", pinned=True),
    c.ContextItem("a", 10, kind="Message"),
    c.ContextItem("a", 10, kind="Message"),
    c.ContextItem("neg", -1),
    c.ContextItem("huge", 900, kind="Doc"),
]


def _run(verbosity):
    provider, exporter = _provider()
    col = OpenTelemetryTraceCollector(verbosity, tracer_provider=provider)
    rep = c.Pipeline(c.preset("chat")).dry_run(ITEMS, c.ContextBudget(100, 60), trace=col)
    return rep, {s.name: s for s in exporter.get_finished_spans()}


@pytest.mark.parametrize("verbosity", list(CupelVerbosity))
def test_dry_run_spans_names_attributes_and_tiers(verbosity):
    rep, spans = _run(verbosity)
    assert set(spans) == {"cupel.pipeline", *STAGE_SPANS}
    root = spans["cupel.pipeline"]
    assert root.attributes["cupel.budget.max_tokens"] == 100
    assert root.attributes["cupel.verbosity"] == verbosity.value
    assert root.instrumentation_scope.name == "cupel"
    for name in STAGE_SPANS:
        s = spans[name]
        assert s.parent.span_id == root.context.span_id
        assert s.attributes["cupel.stage.name"] == name.rsplit(".", 1)[1]
        assert root.start_time <= s.start_time <= s.end_time <= root.end_time
    counts = [
        (spans[n].attributes["cupel.stage.item_count_in"], spans[n].attributes["cupel.stage.item_count_out"])
        for n in STAGE_SPANS
    ]
    assert counts == [(5, 4), (3, 3), (3, 2), (2, 1), (2, 2)]
    exclusions = {n: [e for e in spans[n].events if e.name == "cupel.exclusion"] for n in STAGE_SPANS}
    included = [e for e in spans["cupel.stage.place"].events if e.name == "cupel.item.included"]
    if verbosity is CupelVerbosity.StageOnly:
        assert all(not v for v in exclusions.values()) and not included
        assert all("cupel.exclusion.count" not in spans[n].attributes for n in STAGE_SPANS)
    else:
        got = {
            n: [(e.attributes["cupel.exclusion.reason"], e.attributes["cupel.exclusion.item_tokens"]) for e in v]
            for n, v in exclusions.items()
        }
        assert got["cupel.stage.classify"] == [("NegativeTokens", -1)]
        assert got["cupel.stage.deduplicate"] == [("Deduplicated", 10)]
        assert got["cupel.stage.slice"] == [("BudgetExceeded", 900)]
        assert spans["cupel.stage.slice"].attributes["cupel.exclusion.count"] == 1
        assert exclusions["cupel.stage.slice"][0].attributes["cupel.exclusion.item_kind"] == "Doc"
        if verbosity is CupelVerbosity.Full:
            assert sorted((e.attributes["cupel.item.kind"], e.attributes["cupel.item.tokens"]) for e in included) == [
                ("Message", 10),
                ("System", 5),
            ]
            assert all(isinstance(e.attributes["cupel.item.score"], float) for e in included)
        else:
            assert not included


def test_sampled_out_and_missing_opentelemetry_emit_nothing(monkeypatch):
    provider, exporter = _provider(sampler=ALWAYS_OFF)
    col = OpenTelemetryTraceCollector("Full", tracer_provider=provider)
    c.Pipeline(c.preset("chat")).dry_run(ITEMS, c.ContextBudget(100, 60), trace=col)
    assert exporter.get_finished_spans() == ()
    monkeypatch.setattr(otel, "_api", None)  # as if the extra were not installed
    assert not OpenTelemetryTraceCollector().is_enabled
    rep = c.Pipeline(c.preset("chat")).dry_run(ITEMS, c.ContextBudget(100, 60), trace=OpenTelemetryTraceCollector())
    assert rep.events == [] and len(rep.included) == 2
    c.sweep(ITEMS, c.ContextBudget(100, 60), [("a", c.preset("chat")), ("b", c.preset("rag"))])


def test_sweep_emits_its_phase_spans(global_exporter):
    global_exporter.clear()
    t = c.ItemTable.from_items([dict(content=f"m{i}", tokens=10 + i, conv=i % 3) for i in range(12)], set_column="conv")
    c.sweep(t, c.ContextBudget(100, 40), [("chat", c.preset("chat")), ("rag", c.preset("rag"))], threads=2)
    spans = global_exporter.get_finished_spans()
    (root,) = [s for s in spans if s.name == "cupel.sweep"]
    assert dict(root.attributes) == {
        "cupel.sweep.items": 12,
        "cupel.sweep.sets": 3,
        "cupel.sweep.variants": 2,
        "cupel.sweep.threads": 2,
        "cupel.sweep.failed_cells": 0,
        "cupel.sweep.swinging_contents": root.attributes["cupel.sweep.swinging_contents"],
    }
    children = [s for s in spans if s.parent is not None and s.parent.span_id == root.context.span_id]
    assert [s.name for s in children] == [
        "cupel.sweep.classify",
        "cupel.sweep.score",
        "cupel.sweep.variant",
        "cupel.sweep.variant",
        "cupel.sweep.diffs",
    ]
    variants = [s for s in children if s.name == "cupel.sweep.variant"]
    assert [v.attributes["cupel.variant.label"] for v in variants] == ["chat", "rag"]
    for v in variants:
        phases = [s.name for s in spans if s.parent is not None and s.parent.span_id == v.context.span_id]
        assert phases == ["cupel.sweep.score", "cupel.sweep.deduplicate", "cupel.sweep.slice", "cupel.sweep.place"]
    assert all(root.start_time <= s.start_time <= s.end_time <= root.end_time for s in children)


def _corpus(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [dict(content=f"m{i}", tokens=10 + i, kind="Message", conv=f"s{i // 4}") for i in range(16)]
    path = tmp_path / "items.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=4)
    return path


def _children(spans, parent):
    return [s.name for s in spans if s.parent is not None and s.parent.span_id == parent.context.span_id]


def test_streamed_sweep_is_one_span_with_read_sweep_write_per_chunk(global_exporter, tmp_path):
    from cupel_np.io.parquet import sweep_parquet

    global_exporter.clear()
    totals = sweep_parquet(
        _corpus(tmp_path),
        c.ContextBudget(100, 40),
        [("chat", c.preset("chat")), ("rag", c.preset("rag"))],
        tmp_path / "out",
        set_column="conv",
        chunk_rows=8,
    )
    spans = global_exporter.get_finished_spans()
    (root,) = [s for s in spans if s.name == "cupel.sweep.stream"]
    assert root.attributes["cupel.sweep.rows"] == 16 and root.attributes["cupel.sweep.chunks"] == totals["chunks"] > 1
    kids = _children(spans, root)
    assert kids[:3] == ["cupel.sweep.read", "cupel.sweep", "cupel.sweep.write"]
    assert kids.count("cupel.sweep") == totals["chunks"]
    for s in spans:
        if s.name == "cupel.sweep":
            assert "cupel.sweep.variant" in _children(spans, s)


def test_dask_partitions_are_spans_in_the_drivers_trace(global_exporter, tmp_path):
    from distributed import Client, LocalCluster

    from cupel_np.io import dask as cdask

    global_exporter.clear()
    with (
        LocalCluster(processes=False, n_workers=1, threads_per_worker=1, dashboard_address=":0") as cluster,
        Client(cluster) as client,
    ):
        summary = cdask.sweep(
            _corpus(tmp_path),
            c.ContextBudget(100, 40),
            [("chat", c.preset("chat"))],
            set_column="conv",
            out_dir=tmp_path / "out",
            client=client,
            npartitions=2,
        )
    spans = global_exporter.get_finished_spans()
    (root,) = [s for s in spans if s.name == "cupel.sweep.dask"]
    parts = [s for s in spans if s.name == "cupel.sweep.partition"]
    assert len(parts) == summary["partitions"] == root.attributes["cupel.sweep.partitions"]
    assert all(p.context.trace_id == root.context.trace_id and p.parent.span_id == root.context.span_id for p in parts)
    assert sorted(p.attributes["cupel.partition"] for p in parts) == list(range(len(parts)))
    assert sum(p.attributes["cupel.sweep.items"] for p in parts) == 16
    for p in parts:
        if p.attributes["cupel.sweep.items"]:
            assert _children(spans, p) == ["cupel.sweep"]


def test_a_raising_trace_collector_never_aborts_the_run():
    """Issue 26: tracing is observational. A callback (or collector method) that raises used to
    abort the pipeline; the run now completes with the same report and one warning naming the
    collector."""
    import warnings as _w

    items = [c.ContextItem(content=f"m{i}", tokens=10, future_relevance_hint=i / 10) for i in range(5)]
    budget = c.ContextBudget(max_tokens=100, target_tokens=30)
    pipe = c.Pipeline(c.Policy(c.ReflexiveScorer()))
    want = [i.item.content for i in pipe.dry_run(items, budget).included]

    calls = []

    def boom(event):
        calls.append(event)
        raise RuntimeError("callback failed")

    class Broken:
        is_enabled = True

        def record_stage_event(self, event):
            raise KeyError("stage")

        def record_item_event(self, event):
            raise KeyError("item")

        def on_pipeline_completed(self, report, budget, snaps):
            raise AssertionError("never reached: the collector failed earlier in this run")

    for collector, name in (
        (c.DiagnosticTraceCollector(callback=boom), "DiagnosticTraceCollector"),
        (Broken(), "Broken"),
    ):
        with _w.catch_warnings(record=True) as got:
            _w.simplefilter("always")
            report = pipe.dry_run(items, budget, trace=collector)
        assert [i.item.content for i in report.included] == want
        msgs = [str(w.message) for w in got if issubclass(w.category, c.TraceCollectorWarning)]
        assert len(msgs) == 1 and name in msgs[0], msgs
    assert len(calls) == 1  # called once, then left alone for the rest of the run
