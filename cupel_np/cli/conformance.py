"""Conformance vector runner: ``python -m cupel_np.conformance PATH...``.

Runs every ``.toml`` vector under the given files / directories (recursively): the upstream
format (scoring, slicing, placing, pipeline with diagnostics) and the extensions in
``EXTENSIONS.md`` (pipeline options, expected errors, sensitivity vectors). Prints one line
per failing vector (path and the first difference) and ends with ``N passed, M failed``.
Exit status 0 exactly when vectors ran and none failed (2 when a path holds none). Unknown
keys are ignored.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import tomli

from cupel_np.analysis.pipeline import Pipeline
from cupel_np.analysis.sensitivity import policy_sensitivity
from cupel_np.analysis.trace import DiagnosticTraceCollector, TraceDetailLevel
from cupel_np.cli.shared import EXIT_INTERNAL, EXIT_OK, UsageError
from cupel_np.engine import place_stage, stages
from cupel_np.engine.batch import KNAPSACK_MAX_CELLS
from cupel_np.engine.scorers import ScoreContext
from cupel_np.engine.slicers import codes as sk
from cupel_np.engine.slicers import slicer_args
from cupel_np.errors import CupelError
from cupel_np.model.budget import ContextBudget
from cupel_np.model.fields import suggestion, unknown_keys_ignored
from cupel_np.model.items import ContextItem, ItemTable
from cupel_np.model.policy import Policy
from cupel_np.model.scorers import scorer_from_dict
from cupel_np.model.slicers import slicer_from_dict


class VectorFailure(Exception):
    """The first difference between a vector's expectation and the engine's answer."""


def load_vector(path: Path) -> dict:
    with open(path, "rb") as f:
        return tomli.load(f)


def _aware(v):
    if isinstance(v, datetime) and v.tzinfo is None:
        return v.replace(tzinfo=UTC)
    return v


def _md_value(v) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
    return str(v)


def item_from_vector(d: Mapping[str, Any]) -> ContextItem:
    hint = d.get("futureRelevanceHint", d.get("future_relevance_hint"))
    md = d.get("metadata") or {}
    return ContextItem(
        content=d.get("content"),
        tokens=d.get("tokens"),
        kind=d.get("kind", "Message"),
        source=d.get("source", "Chat"),
        priority=d.get("priority"),
        tags=tuple(d.get("tags") or ()),
        metadata={str(k): _md_value(v) for k, v in md.items()},
        timestamp=_aware(d.get("timestamp")),
        future_relevance_hint=hint,
        pinned=bool(d.get("pinned", False)),
        original_tokens=d.get("original_tokens"),
    )


def _eps(vec: Mapping) -> float:
    return float((vec.get("tolerance") or {}).get("score_epsilon", 1e-9))


def _close(a: float, b: float, eps: float) -> bool:
    return abs(a - b) < eps or (a == b)


def _expect_error(vec: Mapping) -> str | None:
    exp = vec.get("expected")
    if isinstance(exp, Mapping) and isinstance(exp.get("error"), str):
        return exp["error"]
    if vec.get("test", {}).get("expect_construction_error"):
        return "invalid_config"
    return None


# ------------------------------------------------------------------------------- stages
def run_scoring(vec: Mapping) -> None:
    test = vec["test"]
    entry = dict(vec.get("config") or {})
    entry["type"] = test.get("scorer", entry.get("type"))
    scorer = scorer_from_dict(entry, "scorer")
    items = [item_from_vector(d) for d in vec.get("items", [])]
    table = ItemTable.from_items(items)
    rows = np.arange(table.n, dtype=np.int64)
    ctx = ScoreContext(table, rows, np.array([0, table.n], dtype=np.int64))
    scores = ctx.score(scorer)
    eps = _eps(vec)
    by_content: dict[str, list[float]] = {}
    for it, s in zip(items, scores):
        by_content.setdefault(it.content, []).append(float(s))
    for exp in vec.get("expected", []):
        c = exp["content"]
        if c not in by_content:
            raise VectorFailure(f"no scored item with content {c!r}")
        got = by_content[c].pop(0)
        want = float(exp["score_approx"])
        if not _close(got, want, eps):
            raise VectorFailure(f"score of {c!r}: expected {want!r}, got {got!r}")


def _slicer_run(vec: Mapping):
    test = vec["test"]
    cfg = dict(vec.get("config") or {})
    cfg["slicer"] = test.get("slicer", cfg.get("slicer", "greedy"))
    slicer = slicer_from_dict(cfg)
    scored = vec.get("scored_items", [])
    items = [item_from_vector(d) for d in scored]
    table = ItemTable.from_items(items)
    score = np.array([float(d.get("score", 0.0)) for d in scored], dtype=np.float64)
    target = int((vec.get("budget") or {}).get("target_tokens", 0))
    rank, err, err_a, err_b, satisfied, cap_dropped = slicer_args(slicer, table).run(
        table.tokens,
        score,
        table.kind_id,
        np.array([0, table.n], dtype=np.int64),
        np.array([target], dtype=np.int64),
        KNAPSACK_MAX_CELLS,
    )
    if err[0] == sk.ERR_SCARCITY:
        raise _Coded("scarcity")
    if err[0] == sk.ERR_TABLE_TOO_LARGE:
        raise _Coded("table_too_large")
    return items, rank, satisfied, cap_dropped


class _Coded(Exception):
    def __init__(self, code):
        super().__init__(code)
        self.code = code


def run_slicing(vec: Mapping) -> None:
    items, rank, satisfied, cap_dropped = _slicer_run(vec)
    got = sorted(it.content for it, r in zip(items, rank) if r >= 0)
    exp = vec.get("expected") or {}
    want = sorted(exp.get("selected_contents", []))
    if got != want:
        raise VectorFailure(f"selected {got}, expected {want}")
    if "shortfall_count" in exp:
        n_short = int((satisfied >= 0).sum())
        if n_short != int(exp["shortfall_count"]):
            raise VectorFailure(f"shortfall_count {n_short}, expected {exp['shortfall_count']}")
    if "cap_excluded_count" in exp:
        if int(cap_dropped[0]) != int(exp["cap_excluded_count"]):
            raise VectorFailure(f"cap_excluded_count {int(cap_dropped[0])}, expected {exp['cap_excluded_count']}")


def run_placing(vec: Mapping) -> None:
    test = vec["test"]
    placer = Policy(scorer_from_dict({"type": "reflexive"}), placer=test.get("placer", "chronological")).placer
    raw = vec.get("items", [])
    items = [item_from_vector(d) for d in raw]
    table = ItemTable.from_items(items)
    n = table.n
    score = np.array([float(d.get("score", 0.0)) for d in raw], dtype=np.float64)
    rows = np.arange(n, dtype=np.int64)
    out = {"inc": np.zeros(n, dtype=np.bool_)}
    reason = np.zeros(n, dtype=np.int8)
    a = np.zeros(n, dtype=np.int64)
    b = np.zeros(n, dtype=np.int64)
    pos = np.full(n, -1, dtype=np.int64)
    seq = np.zeros(n, dtype=np.int64)
    big = np.array([np.iinfo(np.int64).max // 4], dtype=np.int64)
    place_stage.place_segments(
        place_stage.PlaceRows(table.tokens, table.kind_id, table.timestamp, table.timestamp_valid),
        place_stage.PlaceSegments(
            np.zeros(0, dtype=np.int64), np.array([0, 0], dtype=np.int64), big, big, np.zeros(1, dtype=np.int64)
        ),
        place_stage.Candidates(rows, score, np.array([0, n], dtype=np.int64), rows.copy()),
        place_stage.PlacePolicy(
            stages.OVERFLOW_PROCEED,
            stages.PLACER_CHRONOLOGICAL if placer == "chronological" else stages.PLACER_U_SHAPED,
            False,
            np.full(len(table.kind_vocab) + 1, -1, dtype=np.int64),
        ),
        place_stage.PlaceOutputs(out["inc"], reason, a, b, pos, seq),
    )
    got = [items[i].content for i in np.argsort(pos)]
    want = list((vec.get("expected") or {}).get("ordered_contents", []))
    if got != want:
        raise VectorFailure(f"placed order {got}, expected {want}")


def _budget(vec: Mapping) -> ContextBudget:
    b = vec.get("budget") or {}
    return ContextBudget(
        max_tokens=b.get("max_tokens", b.get("target_tokens", 0)),
        target_tokens=b.get("target_tokens", 0),
        output_reserve=b.get("output_reserve", 0),
        reserved_slots=b.get("reserved_slots") or {},
        estimation_safety_margin_percent=b.get("estimation_safety_margin_percent", 0.0),
    )


_REASON_FIELDS = (
    "item_tokens",
    "available_tokens",
    "deduplicated_against",
    "tokens",
    "displaced_by",
    "kind",
    "cap",
    "count",
    "actual",
    "displaced_by_kind",
    "score",
    "threshold",
    "filter_name",
)


def _check_diagnostics(report, diag: Mapping, eps: float) -> None:
    if "included" in diag:
        got = report.included
        want = diag["included"]
        if len(got) != len(want):
            raise VectorFailure(
                f"diagnostics.included has {len(got)} items {[g.item.content for g in got]}, "
                f"expected {len(want)} {[w.get('content') for w in want]}"
            )
        for i, (g, w) in enumerate(zip(got, want)):
            if g.item.content != w.get("content"):
                raise VectorFailure(f"included[{i}] is {g.item.content!r}, expected {w.get('content')!r}")
            if "score_approx" in w and not _close(g.score, float(w["score_approx"]), eps):
                raise VectorFailure(
                    f"included[{i}] {g.item.content!r} score {g.score!r}, expected {w['score_approx']!r}"
                )
            if "inclusion_reason" in w and g.reason.value != w["inclusion_reason"]:
                raise VectorFailure(
                    f"included[{i}] {g.item.content!r} reason {g.reason.value}, expected {w['inclusion_reason']}"
                )
    if "excluded" in diag:
        got = report.excluded
        want = diag["excluded"]
        if len(got) != len(want):
            raise VectorFailure(
                f"diagnostics.excluded has {len(got)} items {[g.item.content for g in got]}, "
                f"expected {len(want)} {[w.get('content') for w in want]}"
            )
        for i, (g, w) in enumerate(zip(got, want)):
            if g.item.content != w.get("content"):
                raise VectorFailure(f"excluded[{i}] is {g.item.content!r}, expected {w.get('content')!r}")
            if "score_approx" in w and not _close(g.score, float(w["score_approx"]), eps):
                raise VectorFailure(
                    f"excluded[{i}] {g.item.content!r} score {g.score!r}, expected {w['score_approx']!r}"
                )
            if "exclusion_reason" in w and g.reason.reason != w["exclusion_reason"]:
                raise VectorFailure(
                    f"excluded[{i}] {g.item.content!r} reason {g.reason.reason}, expected {w['exclusion_reason']}"
                )
            fields = g.reason.to_dict()
            for k in _REASON_FIELDS:
                if k in w and k in fields and fields[k] != w[k]:
                    raise VectorFailure(f"excluded[{i}] {g.item.content!r} {k} = {fields[k]!r}, expected {w[k]!r}")
    summary = diag.get("summary") or {}
    for k in ("total_candidates", "total_tokens_considered"):
        if k in summary and getattr(report, k) != summary[k]:
            raise VectorFailure(f"{k} = {getattr(report, k)}, expected {summary[k]}")
    if "count_requirement_shortfalls" in diag:
        got = [(s.kind, s.required_count, s.satisfied_count) for s in report.count_requirement_shortfalls]
        want = [
            (w.get("kind"), w.get("required_count"), w.get("satisfied_count"))
            for w in diag["count_requirement_shortfalls"]
        ]
        if got != want:
            raise VectorFailure(f"count_requirement_shortfalls {got}, expected {want}")


def run_pipeline(vec: Mapping) -> None:
    policy = Policy.from_dict(vec.get("config") or {})
    budget = _budget(vec)
    items = [item_from_vector(d) for d in vec.get("items", [])]
    report = Pipeline(policy).dry_run(items, budget, trace=_collector_for(vec))
    if "expected_output" in vec or _expect_error(vec) is None:
        got = [i.item.content for i in report.included]
        want = [e["content"] for e in vec.get("expected_output", [])]
        if got != want:
            raise VectorFailure(f"output {got}, expected {want}")
    exp = vec.get("expected") or {}
    diag = exp.get("diagnostics") if isinstance(exp, Mapping) else None
    if diag:
        _check_diagnostics(report, diag, _eps(vec))
    if isinstance(exp, Mapping):
        _check_observability(report, budget, exp, _eps(vec))


# -- project extension: analytics, stage events and item events (tests/vectors/observability)
def _collector_for(vec: Mapping):
    """An item-level collector when the vector expects item events, else the default."""
    exp = vec.get("expected")
    if isinstance(exp, Mapping) and "item_events" in exp:
        return DiagnosticTraceCollector(TraceDetailLevel.ITEM)
    return None


def _same_number(got, want, eps: float) -> bool:
    if got is None or want is None:
        return got is None and want is None
    if isinstance(want, float) and math.isnan(want):
        return isinstance(got, float) and math.isnan(got)
    return _close(float(got), float(want), eps)


def _check_observability(report, budget: ContextBudget, exp: Mapping, eps: float) -> None:
    """``[expected.analytics]`` (budget_utilization, kind_diversity, timestamp_coverage,
    tokens_over_budget, ``[[expected.analytics.quota]]``), ``[[expected.stage_events]]``
    (stage, item_count) and ``[[expected.item_events]]`` (stage, message), each optional."""
    an = exp.get("analytics")
    if isinstance(an, Mapping):
        got = {
            "budget_utilization": report.budget_utilization(budget),
            "kind_diversity": report.kind_diversity(),
            "timestamp_coverage": report.timestamp_coverage(),
            "tokens_over_budget": report.overflow.tokens_over_budget if report.overflow else 0,
        }
        for k, g in got.items():
            if k in an and not _same_number(g, an[k], eps):
                raise VectorFailure(f"analytics {k} = {g!r}, expected {an[k]!r}")
        if "quota" in an:
            rows = report.quota_utilization()
            want = list(an["quota"])
            if len(rows) != len(want):
                raise VectorFailure(f"{len(rows)} quota rows, expected {len(want)}")
            for r, w in zip(rows, want):
                for k in ("kind", "mode"):
                    if k in w and getattr(r, k) != w[k]:
                        raise VectorFailure(f"quota {r.kind!r} {k} = {getattr(r, k)!r}, expected {w[k]!r}")
                for k in ("require", "cap", "actual", "utilization"):
                    if k in w and not _same_number(getattr(r, k), w[k], eps):
                        raise VectorFailure(f"quota {r.kind!r} {k} = {getattr(r, k)!r}, expected {w[k]!r}")
            for r, w in zip(rows, want):
                if "cap" not in w and r.cap is not None:
                    raise VectorFailure(f"quota {r.kind!r} cap = {r.cap!r}, expected none")
    if "stage_events" in exp:
        got_st = [(e.stage.value, e.item_count) for e in report.events if e.message is None]
        want_st = [(w.get("stage"), w.get("item_count")) for w in exp["stage_events"]]
        if got_st != want_st:
            raise VectorFailure(f"stage events {got_st}, expected {want_st}")
    if "item_events" in exp:
        got_it = [(e.stage.value, e.message) for e in report.events if e.message is not None]
        want_it = [(w.get("stage"), w.get("message")) for w in exp["item_events"]]
        if got_it != want_it:
            raise VectorFailure(f"item events {got_it}, expected {want_it}")


def run_sensitivity(vec: Mapping) -> None:
    variants = []
    for i, v in enumerate(vec.get("variants", [])):
        if not isinstance(v, Mapping):
            raise VectorFailure(f"variants[{i}] is not a table")
        variants.append((v.get("label"), Policy.from_dict(v.get("config") or {})))
    budget = _budget(vec)
    items = [item_from_vector(d) for d in vec.get("items", [])]
    report = policy_sensitivity(items, budget, variants)
    exp = vec.get("expected") or {}
    want_vars = exp.get("variants")
    if want_vars is not None:
        got_labels = [label for label, _ in report.variants]
        want_labels = [w.get("label") for w in want_vars]
        if got_labels != want_labels:
            raise VectorFailure(f"variant labels {got_labels}, expected {want_labels}")
        for (label, rep), w in zip(report.variants, want_vars):
            if "included" in w:
                got = [i.item.content for i in rep.included]
                if got != list(w["included"]):
                    raise VectorFailure(f"variant {label!r} included {got}, expected {list(w['included'])}")
    if "diffs" in exp or want_vars is not None:
        want = {}
        for d in exp.get("diffs", []):
            want[d.get("content")] = [(st.get("label"), st.get("status")) for st in d.get("statuses", [])]
        got = {e.content: [(l, s.value) for l, s in e.statuses] for e in report.diffs}
        if set(got) != set(want):
            raise VectorFailure(f"swinging contents {sorted(got)}, expected {sorted(want)}")
        for content, sts in want.items():
            # one status per label: compared by label, in whatever order the vector lists them
            if dict(got[content]) != dict(sts) or len(dict(sts)) != len(sts):
                raise VectorFailure(f"statuses of {content!r}: {got[content]}, expected {sts}")


def run_budget_simulation(vec: Mapping) -> None:
    """``stage = "budget_simulation"``: ``[query] method`` is ``get_marginal_items`` (with
    ``[budget]`` and ``slack_tokens``; ``[expected] marginal`` = contents in the full run's
    placed order) or ``find_min_budget_for`` (``target`` = the target item's content, which is
    unique in the vector, or a content not in ``[[items]]``; ``search_ceiling``;
    ``[expected] min_budget`` or ``selectable = false``)."""
    policy = Policy.from_dict(vec.get("config") or {})
    items = [item_from_vector(d) for d in vec.get("items", [])]
    q = vec.get("query") or {}
    exp = vec.get("expected") or {}
    method = q.get("method")
    pipe = Pipeline(policy)
    if method == "get_marginal_items":
        got = [i.content for i in pipe.get_marginal_items(items, _budget(vec), q.get("slack_tokens"))]
        want = list(exp.get("marginal", []))
        if got != want:
            raise VectorFailure(f"marginal items {got}, expected {want}")
    elif method == "find_min_budget_for":
        target = q.get("target")
        matches = [i for i in items if i.content == target]
        if len(matches) > 1:
            raise VectorFailure(f"target content {target!r} is not unique in [[items]]")
        # a content not in [[items]]: an equal-looking item that is not an element of items
        item = matches[0] if matches else ContextItem(str(target), int(q.get("target_tokens", 1)))
        got = pipe.find_min_budget_for(items, item, q.get("search_ceiling"))
        want = exp.get("min_budget") if exp.get("selectable", True) else None
        if got != want:
            raise VectorFailure(f"min budget {got}, expected {want}")
    else:
        raise VectorFailure(f"unknown budget_simulation method {method!r}")


RUNNERS = {
    "scoring": run_scoring,
    "slicing": run_slicing,
    "placing": run_placing,
    "pipeline": run_pipeline,
    "sensitivity": run_sensitivity,
    "budget_simulation": run_budget_simulation,
}


def run_vector(path: Path) -> str | None:
    """Run one vector; ``None`` when it passes, else the first difference."""
    try:
        vec = load_vector(path)
    except Exception as e:  # unreadable TOML is a failing vector, not a crash
        return f"cannot read vector: {e}"
    stage = (vec.get("test") or {}).get("stage")
    runner = RUNNERS.get(stage)
    if runner is None:
        if stage is None:
            return "not a conformance vector: no [test] table with a 'stage' key"
        return f"unknown stage {stage!r}{suggestion(str(stage), RUNNERS)}; stages: {', '.join(RUNNERS)}"
    want_err = _expect_error(vec)
    try:
        # EXTENSIONS.md: unknown keys in a vector are ignored, never rejected
        with unknown_keys_ignored():
            runner(vec)
    except VectorFailure as f:
        return str(f)
    except (CupelError, _Coded, ValueError, TypeError) as e:
        code = getattr(e, "code", None) or ("invalid_config" if isinstance(e, (ValueError, TypeError)) else "error")
        if want_err is not None:
            if code == want_err:
                return None
            return f"expected error {want_err!r}, got {code!r}: {e}"
        return f"unexpected error ({code}): {e}"
    if want_err is not None:
        return f"expected error {want_err!r}, but the run succeeded"
    return None


def collect(paths: Iterable[str | Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            out.extend(sorted(q for q in p.rglob("*.toml") if q.is_file()))
        elif p.is_file():
            out.append(p)
        else:
            raise FileNotFoundError(f"no such vector file or directory: {p}")
    return out


def run(paths: Iterable[str | Path], out=None) -> tuple[int, int]:
    out = out or sys.stdout
    files = collect(paths)
    passed = failed = 0
    for f in files:
        msg = run_vector(f)
        if msg is None:
            passed += 1
        else:
            failed += 1
            print(f"FAIL {f}: {msg}", file=out)
    print(f"{passed} passed, {failed} failed", file=out)
    return passed, failed


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print(
            "usage: python -m cupel_np.conformance PATH [PATH ...]\n\n"
            "Runs every .toml conformance vector under the given files/directories."
        )
        return 0 if args else 2
    try:
        files = collect(args)
    except FileNotFoundError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if not files:  # nothing run is not a pass (as ``cupel-np conformance`` says)
        print(f"error: no .toml conformance vectors found under {', '.join(args)}", file=sys.stderr)
        return 2
    _, failed = run(files)
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())


def cmd_conformance(args) -> int:
    try:
        files = collect(args.paths)
    except FileNotFoundError as e:
        raise UsageError(str(e)) from None
    if not files:  # nothing run is not a pass
        raise UsageError(f"no .toml conformance vectors found under {', '.join(args.paths)}")
    failures = {}
    for f in files:
        msg = run_vector(f)
        if msg is not None:
            failures[str(f)] = msg
    if args.json:
        print(json.dumps({"passed": len(files) - len(failures), "failed": len(failures), "failures": failures}))
    else:
        for name, msg in failures.items():
            print(f"FAIL {name}: {msg}")
        print(f"{len(files) - len(failures)} passed, {len(failures)} failed")
    return EXIT_OK if not failures else EXIT_INTERNAL
