"""``cupel-np warmup``: compile (or load) every kernel into Numba's on-disk cache ahead of use.

A first run after an install compiles the kernels it reaches (seconds each, see
CONTRIBUTING.md "Cold start"); the cache in ``NUMBA_CACHE_DIR`` (default: ``__pycache__`` next
to the package) serves every later process. ``warmup`` fills it for container images and CI
caches: small workloads that together reach every kernel (:data:`WORKLOADS`), split over
``jobs`` child processes that compile independent kernels side by side into the one cache
(Numba writes each cache file whole, under a temporary name, so concurrent writers are safe;
a kernel two children both reach is compiled twice and stored once). It then reports the
kernels it reached and any it did not.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import numpy as np
import pyarrow as pa

from cupel_np import _jit
from cupel_np.analysis import budget_sim, outcomes
from cupel_np.analysis.pipeline import Pipeline
from cupel_np.analysis.sensitivity import sweep
from cupel_np.analysis.toolpairs import tool_links
from cupel_np.cli import shared
from cupel_np.cli.sweeps import _write_outputs
from cupel_np.data import sample_path
from cupel_np.engine import stages
from cupel_np.engine.batch import KNAPSACK_MAX_CELLS
from cupel_np.engine.slicers import slicer_args
from cupel_np.engine.sortkeys import radix_sort
from cupel_np.errors import CupelError, InvalidConfigError
from cupel_np.io.importers.tokens import estimate_tokens_many
from cupel_np.model.budget import ContextBudget
from cupel_np.model.curves import ExponentialCurve, StepCurve, WindowCurve
from cupel_np.model.grid import Sweep
from cupel_np.model.items import ItemTable
from cupel_np.model.policy import Policy
from cupel_np.model.presets import PRESETS, preset
from cupel_np.model.scorers import (
    ColumnScorer,
    CompositeScorer,
    DecayScorer,
    FrequencyScorer,
    KindScorer,
    MetadataKeyScorer,
    MetadataTrustScorer,
    PriorityScorer,
    RecencyScorer,
    ReflexiveScorer,
    ScaledScorer,
    TagScorer,
)
from cupel_np.model.slicers import (
    CountConstrainedKnapsackSlice,
    CountQuotaEntry,
    CountQuotaSlice,
    GreedySlice,
    KnapsackSlice,
    QuotaEntry,
    QuotaSlice,
)
from cupel_np.testing._kernels import top_n_fail_counts
from cupel_np.tuning import search

#: the modules that define kernels (every ``_jit.jit`` function lives in one of them)
KERNEL_MODULES = (
    "cupel_np.engine.sortkeys",
    "cupel_np.engine.batch_kernels",
    "cupel_np.engine.stages",
    "cupel_np.engine.chrono_bits",
    "cupel_np.engine.placers",
    "cupel_np.engine.u_order",
    "cupel_np.engine.scorers.kernels",
    "cupel_np.engine.scorers.ranks",
    "cupel_np.engine.slicers.greedy",
    "cupel_np.engine.slicers.packed",
    "cupel_np.engine.slicers.knapsack",
    "cupel_np.engine.slicers.quota",
    "cupel_np.engine.slicers.count",
    "cupel_np.engine.slicers.count_big",
    "cupel_np.model.object_take",
    "cupel_np.engine.slicers.nested",
    "cupel_np.analysis.outcomes",
    "cupel_np.analysis.budget_sim",
    "cupel_np.testing._kernels",
    "cupel_np.tuning.search",
    "cupel_np.io.importers.tokens",
    "cupel_np.engine.groups",
    "cupel_np.analysis._toolpair_kernels",
)


def _arrow_table(n: int, n_sets: int, seed: int) -> pa.Table:
    """A generated table: tags, metadata, timestamps, priorities, hints, six kinds, pinned
    and duplicated rows, zero-token rows; one set or ``n_sets`` (column ``sid``)."""

    rng = np.random.default_rng(seed)
    tokens = rng.integers(1, 2000, n)
    tokens[rng.random(n) < 0.01] = 0
    k = rng.integers(0, 4, n)
    vocab = np.array([f"tag{i}" for i in range(64)] + ["TAG1"])
    tags = pa.ListArray.from_arrays(
        pa.array(np.concatenate([[0], np.cumsum(k)]).astype(np.int32)),
        pa.array(vocab).take(pa.array(rng.integers(0, len(vocab), int(k.sum())))),
    )
    has = rng.random(n) < 0.5
    md = pa.MapArray.from_arrays(
        pa.array(np.concatenate([[0], np.cumsum(has)]).astype(np.int32)),
        pa.array(["cupel:trust"] * int(has.sum()), pa.string()),
        pa.array(np.array(["0.2", "0.9", "x"])[rng.integers(0, 3, int(has.sum()))]),
    )
    content = np.array([f"item {i}" for i in range(n)])
    content[5::37] = content[4::37][: len(content[5::37])]  # duplicates
    kinds = np.array(["Message", "Document", "ToolOutput", "Memory", "SystemPrompt", "Note"])
    ts = (1_700_000_000_000_000 + rng.integers(0, 10**9, n)).astype("datetime64[us]")
    cols = {
        "content": pa.array(content),
        "tokens": tokens,
        "kind": pa.array(kinds).take(pa.array(rng.integers(0, len(kinds), n))),
        "priority": pa.array(rng.integers(0, 5, n), mask=rng.random(n) < 0.5),
        "tags": tags,
        "metadata": md,
        "timestamp": pa.array(ts, pa.timestamp("us", tz="UTC"), mask=rng.random(n) < 0.3),
        "future_relevance_hint": pa.array(rng.random(n), mask=rng.random(n) < 0.2),
        "pinned": rng.random(n) < 0.002,
        "signal": rng.random(n) * 1e300,  # a column scorer's values that sum past 2**63
    }
    if n_sets > 1:
        cols["sid"] = np.repeat(np.arange(n_sets), -(-n // n_sets))[:n]
    return pa.table(cols)


def _table(n: int, n_sets: int, seed: int):
    """:func:`_arrow_table` as an item table (set column ``sid`` when ``n_sets > 1``)."""

    return ItemTable.from_arrow(_arrow_table(n, n_sets, seed), set_column="sid" if n_sets > 1 else None)


def _policies():

    base = CompositeScorer(
        (
            (RecencyScorer(), 1.0),
            (PriorityScorer(), 0.5),
            (KindScorer(), 0.3),
            (ReflexiveScorer(), 0.7),
        )
    )
    scorers = [
        FrequencyScorer(),
        TagScorer((("tag1", 1.0), ("tag2", 0.5))),
        ScaledScorer(PriorityScorer()),
        MetadataTrustScorer(),
        MetadataKeyScorer("cupel:trust", "0.9", 2.0),
        DecayScorer(datetime(2024, 1, 1, tzinfo=UTC), ExponentialCurve(3600.0)),
        DecayScorer(datetime(2024, 1, 1, tzinfo=UTC), WindowCurve(86400.0)),
        DecayScorer(datetime(2024, 1, 1, tzinfo=UTC), StepCurve(((3600.0, 1.0), (86400.0, 0.5)))),
    ]
    quota = (QuotaEntry("Message", require=10, cap=60), QuotaEntry("Document", require=5, cap=40))
    count = (CountQuotaEntry("Document", require_count=2, cap_count=5),)
    slicers = [
        GreedySlice(),
        KnapsackSlice(50),
        QuotaSlice(quota, GreedySlice()),
        QuotaSlice(quota, KnapsackSlice(50)),
        CountQuotaSlice(count),
        CountQuotaSlice(count, QuotaSlice(quota, GreedySlice())),
        CountConstrainedKnapsackSlice(count, bucket_size=50),
    ]
    pols = []
    for i, sl in enumerate(slicers):
        for placer in ("chronological", "u_shaped"):
            for overflow in ("throw", "truncate", "proceed"):
                pols.append(Policy(base, slicer=sl, placer=placer, overflow_strategy=overflow, name=f"p{i}"))
    pols += [Policy(s, name=f"s{j}") for j, s in enumerate(scorers)]
    pols.append(Policy(CompositeScorer(((base, 1.0), (scorers[0], 1.0)))))
    return pols


def _sweep(table, budgets) -> None:

    grid = Sweep(_policies(), budgets=budgets)
    sweep(table, None, grid, on_error="collect", threads=1).diffs_table()


def _engine_small() -> None:
    """Every scorer, slicer, placer and overflow strategy on a corpus of small sets."""

    _sweep(_table(3000, 60, 1), [ContextBudget(20_000, 6_000, 500), ContextBudget(3_000, 1_000)])
    # sets of more than greedy.MEDIUM_MIN candidates and fewer than greedy.PACKED_MIN: the
    # medium greedy kernel (longer sets take the packed walk, shorter ones the small kernel)
    _sweep(_table(800, 2, 6), [ContextBudget(200_000, 100_000)])

    grid = Sweep([Policy(ColumnScorer("signal"), slicer=KnapsackSlice(50))], budgets=[ContextBudget(9000, 6000)])
    sweep(_table(600, 20, 2), None, grid, on_error="collect", threads=1)  # split knapsack rows
    # a slicer alone over score-sorted candidates, as ``cupel-np conformance`` runs slicing
    # vectors (greedy is otherwise always the unsorted path)

    t = _table(50, 1, 5)
    score = np.sort(np.random.default_rng(5).random(t.n))[::-1].copy()
    for sl in (GreedySlice(), KnapsackSlice(10)):
        slicer_args(sl, t).run(
            t.tokens,
            score,
            t.kind_id,
            np.array([0, t.n], dtype=np.int64),
            np.array([5000], dtype=np.int64),
            KNAPSACK_MAX_CELLS,
        )
    # one selection as a service runs it: Pipeline on ContextItems (the small-set driver)
    items = t.rows(np.arange(t.n))
    for p in PRESETS.values():
        Pipeline(p).run(items, ContextBudget(5000, 2000))
    # hundreds of items kept out of row order: run's list by pointer (``model.object_take``)
    big = _table(600, 1, 7)
    Pipeline(Policy(RecencyScorer(), placer="u_shaped")).run(big.rows(np.arange(big.n)), ContextBudget(10**9, 10**8))


def _engine_large() -> None:
    """The paths only big sets reach: density-prefix greedy, radix sorts, bitset frequency;
    and both sides of the one choice that depends on the CPU (``_cores.simd_sort_is_slow``:
    an image warmed on one machine may run on another): the packed-key radix sort, and the
    repair of NumPy's unstable argsort that the radix argsort makes unnecessary."""

    _sweep(_table(70_000, 1, 3), [ContextBudget(20_000_000, 8_000_000)])
    keys = np.arange(64, dtype=np.uint64)[::-1].copy()
    radix_sort(keys, np.empty_like(keys), 0)
    order = np.argsort(keys)
    stages.index_order_runs(order, keys[order])


def demo_grid():
    """The demo's grid: the seven presets x two budgets (``cupel-np demo``)."""

    return Sweep(list(PRESETS), budgets=[ContextBudget(8000, 6000, 1000), ContextBudget(4000, 3000, 500)])


def _demo() -> None:
    """What ``cupel-np demo`` runs: the presets over the sample corpus, and its outputs."""

    result = sweep(shared._load_table(sample_path(), "session_id"), None, demo_grid(), on_error="collect")
    with _tempdir() as out:
        _write_outputs(result, out, title="warmup")


def _analysis() -> None:
    """Budget curves, minimal budgets, outcomes, checks and the tuner's metrics."""

    table = _table(2000, 40, 4)
    pols = [("chat", preset("chat")), ("rag", preset("rag"))]
    budget_sim.budget_curves(table, pols, [4000, 8000, 16000])
    budget_sim.min_budgets(table, preset("chat"), 20_000)
    result = sweep(table, ContextBudget(8000, 6000), pols)
    labels = np.random.default_rng(6).random(table.n) < 0.2  # relevant or not, per input row
    m = outcomes.outcome_matrices(result, labels)
    search.part_metrics(m, np.ones(m.failed.shape[1], dtype=bool))
    key = np.random.default_rng(5).random(100)
    top_n_fail_counts(key, np.array([0, 50, 100], dtype=np.int64), np.arange(100, dtype=np.int64) % 50, 3)


def _pairs() -> None:
    """Tool pairs and atomic groups (orphan counts, unit selection) and the importers' token
    estimate: the kernels only transcripts with tool calls reach."""

    t = _arrow_table(1200, 30, 7)
    n = t.num_rows
    rng = np.random.default_rng(7)
    call = np.arange(n) // 3  # a call and its two results, in input order
    role = np.where(np.arange(n) % 3 == 0, "call", "result")
    linked = rng.random(n) < 0.6
    ids = pa.array([f"c{c}" for c in call], mask=~linked)
    t = t.append_column("tool_call_id", ids).append_column("tool_role", pa.array(role, mask=~linked))
    t = t.append_column("tool_group", ids)
    table = ItemTable.from_arrow(t, set_column="sid")
    base = preset("chat")
    pols = [
        Policy(base.scorer, slicer=sl, placer=pl, groups="tool_group")
        for sl in (GreedySlice(), KnapsackSlice(50))
        for pl in ("chronological", "u_shaped")
    ]
    variants = [("chat", base), *((f"g{i}", p) for i, p in enumerate(pols))]
    sweep(table, ContextBudget(8000, 6000), variants, on_error="collect", threads=1).variants_table()
    estimate_tokens_many(["plain words", "naïve — text\twith   spaces", ""])
    # a role that is neither 'call' nor 'result': the error names the row (_role_kernel)
    bogus = t.set_column(t.schema.get_field_index("tool_role"), "tool_role", pa.array(["bogus"] * n))
    try:
        tool_links(ItemTable.from_arrow(bogus, set_column="sid"))
    except InvalidConfigError:
        pass


class _tempdir:
    def __enter__(self) -> str:

        self._d = tempfile.TemporaryDirectory()
        return self._d.name

    def __exit__(self, *exc) -> None:
        self._d.cleanup()


#: name -> workload; each reaches a part of the kernels (the union reaches all)
WORKLOADS: dict[str, Callable[[], None]] = {
    "demo": _demo,
    "engine": _engine_small,
    "large": _engine_large,
    "analysis": _analysis,
    "pairs": _pairs,
}


def all_kernels() -> list[str]:
    """``module.function`` of every project kernel."""

    for m in KERNEL_MODULES:
        importlib.import_module(m)
    fns = [getattr(d, "py_func", d) for d in _jit.KERNELS]
    return sorted(f"{f.__module__}.{f.__qualname__}" for f in fns)


def run_here(names) -> dict[str, list[str]]:
    """Run workloads ``names`` in this process; the kernels compiled or loaded (signatures)."""

    all_kernels()
    for name in names:
        WORKLOADS[name]()
    return _jit.specializations()


@dataclass
class WarmupResult:
    kernels: list[str]
    reached: dict[str, list[str]]
    seconds: float
    jobs: int
    missing: list[str] = field(default_factory=list)


def _split(names: list[str], jobs: int) -> list[list[str]]:
    parts: list[list[str]] = [[] for _ in range(max(1, min(jobs, len(names))))]
    for i, n in enumerate(names):
        parts[i % len(parts)].append(n)
    return parts


def warmup(jobs: int = 1, names: list[str] | None = None) -> WarmupResult:
    """Run the workloads (all by default) in ``jobs`` child processes sharing the kernel
    cache, and report what they reached."""
    t0 = time.perf_counter()
    names = list(WORKLOADS) if names is None else names
    env = dict(os.environ)
    env.pop("NUMBA_DISABLE_JIT", None)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _CHILD, *part],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for part in _split(names, jobs)
    ]
    reached: dict[str, list[str]] = {}
    failures = []
    for p in procs:
        out, err = p.communicate()
        if p.returncode != 0:
            failures.append(err.strip().splitlines()[-1] if err.strip() else f"exit {p.returncode}")
            continue
        for k, sigs in json.loads(out.strip().splitlines()[-1]).items():
            reached.setdefault(k, sorted(set(reached.get(k, [])) | set(sigs)))
    if failures:
        raise CupelError(f"warmup failed: {'; '.join(failures)}")
    kernels = all_kernels()
    return WarmupResult(
        kernels, reached, time.perf_counter() - t0, len(procs), [k for k in kernels if k not in reached]
    )


def _cache_place() -> str:
    d = os.environ.get("NUMBA_CACHE_DIR")
    return d if d else "the package's __pycache__ directories (NUMBA_CACHE_DIR unset)"


def cmd_warmup(args) -> int:
    if os.environ.get("NUMBA_DISABLE_JIT") == "1":
        raise InvalidConfigError("NUMBA_DISABLE_JIT=1: there are no kernels to compile")
    r = warmup(args.jobs)
    # a kernel no workload reached is left to compile on its first use: the cache is not
    # what the command promises, so say so in the exit status (a project bug, reported as
    # one) unless the caller accepts a partial warm-up
    status = shared.EXIT_INTERNAL if r.missing and not args.allow_missing else shared.EXIT_OK
    if args.json:
        doc = {"kernels": r.kernels, "reached": r.reached, "missing": r.missing, "seconds": r.seconds}
        print(json.dumps({**doc, "jobs": r.jobs, "cache": os.environ.get("NUMBA_CACHE_DIR")}, indent=2))
    else:
        print(
            f"{len(r.reached)} of {len(r.kernels)} kernels compiled or loaded into {_cache_place()} "
            f"in {r.seconds:.1f}s ({shared.plural(r.jobs, 'process', 'processes')})"
        )
    if r.missing:
        print(
            f"warmup incomplete: {shared.plural(len(r.missing), 'kernel', 'kernels')} not reached by any "
            f"workload (each compiles on its first use instead): {', '.join(r.missing)}"
            + ("" if args.allow_missing else f" (exit {status}; --allow-missing exits 0)"),
            file=sys.stderr,
        )
    return status


def child_main() -> None:
    """A warmup child process: run the workloads named on the command line, print the kernels."""
    print(json.dumps(run_here(sys.argv[1:])))


#: what a child process runs (``python -c``; the workload names follow as arguments)
_CHILD = "from cupel_np.cli.warmup import child_main; child_main()"
