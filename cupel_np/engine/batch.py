"""The multi-variant plan: every policy variant of a sweep over every item set of a table,
written as one row of ``[V, N]`` result matrices.

Shared across variants: classification (it depends only on tokens and pinned flags), each
distinct base scorer column (``ScoreContext``), the duplicate-content groups, and the first
pinned row of each set. Per variant: one kernel call per stage over all sets. A single policy
run (``Pipeline.dry_run``) is simply a sweep with one variant.

``run_sweep`` in phases, on the engine's one thread pool:

1. :func:`prepare_sweep` - what every variant reads, as independent tasks; returns the frozen
   :class:`SweepShared`.
2. :func:`run_variant` per variant (each worker with its own :class:`_Scratch`): scores, then
   ``_deduplicate``, ``_slice_greedy`` / ``_slice_sorted`` (with :class:`SlicerArgs`) and
   ``_place``, which ends in ``_record``: each writes only that variant's rows of the
   :class:`SweepRun`, so the result is the same for any thread count.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, NamedTuple

import numpy as np

from cupel_np.engine import groups as grp
from cupel_np.engine import stages
from cupel_np.engine.batch_kernels import duplicate_groups, duplicate_winners, variant_scores
from cupel_np.engine.parallel import resolve_threads, run_tasks
from cupel_np.engine.reasons import R_COUNT_CAP_EXCEEDED, R_DEDUPLICATED, R_NEGATIVE_TOKENS
from cupel_np.engine.scorers import ScoreContext, check_scorer_columns
from cupel_np.engine.slicers import kernels as sk
from cupel_np.engine.slicers import nested
from cupel_np.engine.slicers.greedy import greedy_segments
from cupel_np.engine.slicers.quota import quota_greedy_slice
from cupel_np.errors import (
    BudgetOverflowError,
    CupelError,
    PinnedExceedsBudgetError,
    ScarcityError,
    TableTooLargeError,
)
from cupel_np.model.budget import ContextBudget
from cupel_np.model.grid import Variant
from cupel_np.model.items import ItemTable
from cupel_np.model.policy import (
    CompositeScorer,
    CountConstrainedKnapsackSlice,
    CountQuotaSlice,
    GreedySlice,
    KnapsackSlice,
    QuotaSlice,
    Scorer,
    Slicer,
)

#: Most memory one knapsack DP may allocate, in keep-table cells (bits): 2^32 cells = 512 MiB.
#: A DP of n candidates and capacity C needs (n + 256) x 64 x (C // 64 + 2) cells: its keep
#: table (one bit per candidate and capacity cell, rows padded to 64-bit words) plus its value
#: rows (charged at 256 bits per capacity cell); see ``slicers.kernels.knapsack_fits``.
KNAPSACK_MAX_CELLS = 4_294_967_296

#: a result of a variant that has not run yet (every run replaces it)
_NOT_RUN = np.zeros(0, dtype=np.int64)


def segment_sums(values: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    cs = np.zeros(values.shape[0] + 1, dtype=np.int64 if values.dtype.kind in "biu" else np.float64)
    np.cumsum(values, out=cs[1:])
    return cs[offsets[1:]] - cs[offsets[:-1]]


def _offsets(counts: np.ndarray) -> np.ndarray:
    off = np.zeros(counts.shape[0] + 1, dtype=np.int64)
    np.cumsum(counts, out=off[1:])
    return off


class SetMap(Mapping):
    """``{set index: value}`` filled in bulk and built lazily: ``add(sets, build)`` records
    many sets at once (a set already present keeps its first value) and ``build(s)`` runs
    only when ``s`` is read, so a sweep that fails in 100,000 sets creates no Python object
    per set until someone asks. Iteration follows insertion (chunk by chunk, ascending
    within a chunk)."""

    def __init__(self, n_sets: int):
        self._has = np.zeros(n_sets, dtype=np.bool_)
        self._chunks: list[tuple[np.ndarray, Callable[[int], object]]] = []
        self._cache: dict[int, object] = {}
        self._len = 0

    def add(self, sets: np.ndarray, build: Callable[[int], object]) -> None:
        sets = np.asarray(sets, dtype=np.int64)
        sets = sets[~self._has[sets]]
        if sets.size:
            self._has[sets] = True
            self._chunks.append((sets, build))
            self._len += int(sets.size)

    def sets(self) -> np.ndarray:
        """Every set index present (insertion order)."""
        return np.concatenate([c for c, _ in self._chunks]) if self._chunks else np.zeros(0, np.int64)

    def __contains__(self, s) -> bool:
        try:
            return 0 <= s < self._has.shape[0] and bool(self._has[s])
        except TypeError:
            return False

    def __getitem__(self, s):
        if s not in self:
            raise KeyError(s)
        s = int(s)
        if s not in self._cache:
            for sets, build in self._chunks:
                i = np.searchsorted(sets, s)
                if i < sets.size and sets[i] == s:
                    self._cache[s] = build(s)
                    break
        return self._cache[s]

    def __iter__(self):
        for sets, _ in self._chunks:
            yield from sets.tolist()

    def __len__(self) -> int:
        return self._len


@dataclass
class Classified:
    """Classify-stage output, shared by every variant over the same table."""

    negative: np.ndarray  # bool [N]
    pinned: np.ndarray  # bool [N] (non-negative pinned rows)
    sc_rows: np.ndarray  # scoreable rows, grouped order
    sc_offsets: np.ndarray
    pin_rows: np.ndarray
    pin_offsets: np.ndarray
    pinned_tokens: np.ndarray  # per set
    first_pin: np.ndarray  # per set: first pinned row, -1 when none


def classify(table: ItemTable) -> Classified:
    neg = table.tokens < 0
    pin = table.pinned & ~neg
    sc = ~neg & ~pin
    pin_rows = np.flatnonzero(pin)
    pin_off = _offsets(segment_sums(pin.astype(np.int64), table.offsets))
    first = np.full(table.n_sets, -1, dtype=np.int64)
    has = pin_off[1:] > pin_off[:-1]
    first[has] = pin_rows[pin_off[:-1][has]]
    return Classified(
        neg,
        pin,
        np.flatnonzero(sc),
        _offsets(segment_sums(sc.astype(np.int64), table.offsets)),
        pin_rows,
        pin_off,
        segment_sums(np.where(pin, table.tokens, 0), table.offsets),
        first,
    )


def effective_targets(budget: ContextBudget, pinned_tokens: np.ndarray) -> np.ndarray:
    """The spec's effective target for every set at once (same float ops as the scalar form)."""
    reserved = budget.reserved_tokens
    eff_max = np.maximum(0, budget.max_tokens - budget.output_reserve - pinned_tokens - reserved)
    eff_t = np.minimum(np.maximum(0, budget.target_tokens - pinned_tokens - reserved), eff_max)
    margin = budget.estimation_safety_margin_percent
    if margin > 0:
        mult = 1.0 - margin / 100.0
        eff_max = np.floor(eff_max.astype(np.float64) * mult).astype(np.int64)
        eff_t = np.floor(eff_t.astype(np.float64) * mult).astype(np.int64)
        eff_t = np.minimum(eff_t, eff_max)
    return eff_t.astype(np.int64)


class SweepRun:
    """Result matrices of V variants over one table (rows in the table's grouped order).

    ``included[v, r]`` and ``reason[v, r]`` (int8 code) are dense; placed positions are kept for
    the included rows and scores rebuilt from the shared base columns (``position_for`` /
    ``scores_for``, or the ``position`` / ``scores`` matrices, built on access);
    everything needed to rebuild a reason's fields on demand is kept per set or sparsely."""

    def __init__(self, table: ItemTable, variants: Sequence[Variant], cls: Classified, plan: ScorePlan):
        v, n, s = len(variants), table.n, table.n_sets
        self.table = table
        self.variants = list(variants)
        self.classified = cls
        self.included = np.zeros((v, n), dtype=np.bool_)
        self.reason = np.full((v, n), -1, dtype=np.int8)
        # placed positions are kept for included rows only, in row order: ``placed_pos[v][i]``
        # is the position of the i-th row of ``flatnonzero(included[v])`` (4 bytes per included
        # item; the rows themselves are the inclusion matrix's, never stored twice)
        self.placed_pos: list[np.ndarray] = [_NOT_RUN] * v  # every variant replaces its entry
        self._placed_off: dict[int, np.ndarray] = {}
        # scores are not stored per variant: scores_for(v) rebuilds them from the shared base
        # columns (8 bytes per item per variant saved)
        self._plan = plan
        self.effective_target = np.zeros((v, s), dtype=np.int64)
        self.avail_slice = np.zeros((v, s), dtype=np.int64)
        self.avail_place = np.zeros((v, s), dtype=np.int64)
        self.cap_dropped = np.zeros((v, s), dtype=np.int64)
        # per variant {set: error} and {set: [(kind, required, satisfied), ...]}, built lazily
        self.errors: list[SetMap] = [SetMap(s) for _ in range(v)]
        self.shortfalls: list[SetMap] = [SetMap(s) for _ in range(v)]
        # sparse details: (rows, values...) sorted by row
        self.dedup_winner: list[tuple[np.ndarray, np.ndarray]] = [(_NOT_RUN, _NOT_RUN)] * v
        self.trunc_order: list[tuple[np.ndarray, np.ndarray]] = [(_NOT_RUN, _NOT_RUN)] * v
        self.count_cap: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = [(_NOT_RUN, _NOT_RUN, _NOT_RUN)] * v
        #: per variant its units (``groups.GroupPlan``), None for a variant without groups
        self.group_plan: list[grp.GroupPlan | None] = [None] * v
        # wall clock (time.time_ns) at the phase boundaries, for stage timings and trace spans:
        # prep_ns = (start, classified, shared scoring done); stage_ns[v] = (variant start,
        # scored, deduplicated, sliced, placed)
        self.prep_ns = np.zeros(3, dtype=np.int64)
        self.stage_ns = np.zeros((v, 5), dtype=np.int64)

    @property
    def n_variants(self) -> int:
        return len(self.variants)

    def position_for(self, v: int) -> np.ndarray:
        """Variant ``v``'s placed position per row (-1 when excluded)."""
        out = np.full(self.table.n, -1, dtype=np.int32)
        out[self.included[v]] = self.placed_pos[v]
        return out

    def placed_in(self, v: int, seg: int) -> tuple[np.ndarray, np.ndarray]:
        """Variant ``v``'s included rows of set ``seg`` (ascending) and their placed positions."""
        off = self._placed_off.get(v)
        if off is None:  # included rows before each set, once per variant
            off = self._placed_off[v] = (
                np.array([0, self.placed_pos[v].shape[0]], dtype=np.int64)
                if self.table.n_sets == 1
                else _offsets(segment_sums(self.included[v], self.table.offsets))
            )
        lo = int(self.table.offsets[seg])
        rows = lo + np.flatnonzero(self.included[v, lo : int(self.table.offsets[seg + 1])])
        return rows, self.placed_pos[v][off[seg] : off[seg + 1]]

    @property
    def position(self) -> np.ndarray:
        """``[V, N]`` placed positions (built on access)."""
        return (
            np.stack([self.position_for(v) for v in range(self.n_variants)])
            if self.n_variants
            else np.zeros((0, self.table.n), np.int32)
        )

    def scores_for(self, v: int) -> np.ndarray:
        """Variant ``v``'s report scores per row: its composite score for scoreable rows,
        1.0 for pinned rows, 0.0 for negative-token rows."""
        base, term_off, term_col, term_w = self._plan
        cls = self.classified
        out = np.zeros(self.table.n, dtype=np.float64)
        out[cls.sc_rows] = _one_variant(base, term_off, term_col, term_w, v)
        out[cls.pin_rows] = 1.0
        return out

    def scores_at(self, v: int, rows: np.ndarray) -> np.ndarray:
        """``scores_for(v)[rows]`` without building the whole column."""
        rows = np.asarray(rows, dtype=np.int64)
        cls = self.classified
        out = np.zeros(rows.shape[0], dtype=np.float64)
        out[cls.pinned[rows]] = 1.0
        pos = np.searchsorted(cls.sc_rows, rows)
        pos_c = np.minimum(pos, max(len(cls.sc_rows) - 1, 0))
        is_sc = (
            (pos < len(cls.sc_rows)) & (cls.sc_rows[pos_c] == rows)
            if len(cls.sc_rows)
            else np.zeros(rows.shape[0], bool)
        )
        if is_sc.any():
            base, term_off, term_col, term_w = self._plan
            out[is_sc] = _one_variant(np.ascontiguousarray(base[pos[is_sc]]), term_off, term_col, term_w, v)
        return out

    @property
    def scores(self) -> np.ndarray:
        """``[V, N]`` score matrix (built on access)."""
        return (
            np.stack([self.scores_for(v) for v in range(self.n_variants)])
            if self.n_variants
            else np.zeros((0, self.table.n))
        )


class ScorePlan(NamedTuple):
    """Every variant's composite score as weighted terms over the shared base columns: variant
    ``v`` is the sum of ``term_w[i] * base[:, term_col[i]]`` over ``i`` in
    ``term_off[v]:term_off[v + 1]`` (see ``_one_variant``)."""

    base: np.ndarray  # float64 [scoreable rows, distinct base scorers]
    term_off: np.ndarray  # int64 [V + 1]
    term_col: np.ndarray  # int64 per term: its column of ``base``
    term_w: np.ndarray  # float64 per term: its normalised weight


def _score_terms(variants: Sequence[Variant]) -> tuple[list[Scorer], np.ndarray, np.ndarray, np.ndarray]:
    """Distinct base scorers (in order of first use) and each variant's (column, normalised
    weight) terms."""
    cols: dict[Scorer, int] = {}
    term_off = [0]
    term_col: list[int] = []
    term_w: list[float] = []
    for var in variants:
        sc = var.policy.scorer
        pairs = (
            list(zip((s for s, _ in sc.entries), sc.normalized_weights()))
            if isinstance(sc, CompositeScorer)
            else [(sc, 1.0)]
        )
        for child, w in pairs:
            if child not in cols:
                cols[child] = len(cols)
            term_col.append(cols[child])
            term_w.append(w)
        term_off.append(len(term_col))
    return (
        list(cols),
        np.array(term_off, dtype=np.int64),
        np.array(term_col, dtype=np.int64),
        np.array(term_w, dtype=np.float64),
    )


class SlicerArgs(NamedTuple):
    """A slicer spec flattened into the arrays the slice kernels take (built by
    :func:`slicer_args`). The field names are the parameter names of
    ``slicers.kernels.slice_segments`` and ``slicers.quota.quota_greedy_slice``; :meth:`run`
    passes them by name. Arrays "per kind" are indexed by the table's kind id."""

    mode: int  #: ``slicers.kernels.MODE_*``
    use_knapsack: bool  #: the slicer (or a quota slicer's inner slicer) is a knapsack
    bucket: int  #: knapsack bucket size (100 when no knapsack is used)
    kind_rank: np.ndarray  #: int64 per kind: its rank in kind-name order
    q_has: np.ndarray  #: bool per kind: a QuotaSlice entry names it
    q_req: np.ndarray  #: float64 per kind: that entry's require percentage
    q_cap: np.ndarray  #: float64 per kind: that entry's cap percentage (100 without an entry)
    q_req_all: np.ndarray  #: float64 per QuotaSlice entry (kinds absent from the table too): require
    e_kind: np.ndarray  #: int64 per count entry: its kind (-1 when absent from the table)
    e_require: np.ndarray  #: int64 per count entry: require_count
    cap_of_kind: np.ndarray  #: int64 per kind: its count cap, -1 when none
    throw_on_scarcity: bool  #: a count slicer with scarcity_behavior "throw"
    resort_inner: bool  #: count-constrained knapsack: the knapsack's picks are re-sorted

    def run(
        self,
        tok: np.ndarray,
        score: np.ndarray,
        kind: np.ndarray,
        offsets: np.ndarray,
        targets: np.ndarray,
        max_cells: int,
        *,
        unsorted: bool = False,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Slice every segment of the candidates: ``slice_segments`` over score-sorted
        candidates, or with ``unsorted`` (a quota slicer with an inner greedy)
        ``quota_greedy_slice`` over candidates in row order. Returns ``(rank, err, err_a,
        err_b, satisfied, cap_dropped)`` (see ``slicers.kernels.slice_segments``)."""
        kernel = quota_greedy_slice if unsorted else sk.slice_segments
        return kernel(
            mode=self.mode,
            tok=tok,
            score=score,
            kind=kind,
            offsets=offsets,
            targets=targets,
            use_knapsack=self.use_knapsack,
            bucket=int(self.bucket),
            max_cells=int(max_cells),
            kind_rank=self.kind_rank,
            q_has=self.q_has,
            q_req=self.q_req,
            q_cap=self.q_cap,
            q_req_all=self.q_req_all,
            e_kind=self.e_kind,
            e_require=self.e_require,
            cap_of_kind=self.cap_of_kind,
            throw_on_scarcity=self.throw_on_scarcity,
            resort_inner=self.resort_inner,
        )


def slicer_args(slicer: Slicer, table: ItemTable) -> SlicerArgs:
    """Flatten a slicer spec into the arrays the slice kernels take."""
    n_kinds = len(table.kind_vocab) + 1
    kind_rank = np.zeros(n_kinds, dtype=np.int64)
    for r, k in enumerate(sorted(range(len(table.kind_vocab)), key=table.kind_vocab.__getitem__)):
        kind_rank[k] = r
    q_has = np.zeros(n_kinds, dtype=np.bool_)
    q_req = np.zeros(n_kinds, dtype=np.float64)
    q_cap = np.full(n_kinds, 100.0, dtype=np.float64)
    q_req_all = np.zeros(0, dtype=np.float64)
    e_kind = np.zeros(0, dtype=np.int64)
    e_req = np.zeros(0, dtype=np.int64)
    cap_of_kind = np.full(n_kinds, -1, dtype=np.int64)
    use_knapsack = False
    bucket = 100
    throw = False
    resort = False
    if isinstance(slicer, GreedySlice):
        mode = sk.MODE_GREEDY
    elif isinstance(slicer, KnapsackSlice):
        mode, bucket = sk.MODE_KNAPSACK, slicer.bucket_size
    elif isinstance(slicer, QuotaSlice):
        mode = sk.MODE_QUOTA
        if isinstance(slicer.inner, KnapsackSlice):
            use_knapsack, bucket = True, slicer.inner.bucket_size
        q_req_all = np.array([q.require for q in slicer.quotas], dtype=np.float64)
        for q in slicer.quotas:
            k = table.kind_ids_for(q.kind)
            if k >= 0:
                q_has[k] = True
                q_req[k] = q.require
                q_cap[k] = q.cap
    else:
        mode = sk.MODE_COUNT
        if isinstance(slicer, CountConstrainedKnapsackSlice):
            use_knapsack, bucket, resort = True, slicer.bucket_size, True
        throw = slicer.scarcity_behavior == "throw"
        e_kind = np.array([table.kind_ids_for(e.kind) for e in slicer.entries], dtype=np.int64)
        e_req = np.array([e.require_count for e in slicer.entries], dtype=np.int64)
        for e in slicer.entries:
            k = table.kind_ids_for(e.kind)
            if k >= 0 and e.cap_count is not None:
                cap_of_kind[k] = e.cap_count
    return SlicerArgs(
        mode=mode,
        use_knapsack=use_knapsack,
        bucket=bucket,
        kind_rank=kind_rank,
        q_has=q_has,
        q_req=q_req,
        q_cap=q_cap,
        q_req_all=q_req_all,
        e_kind=e_kind,
        e_require=e_req,
        cap_of_kind=cap_of_kind,
        throw_on_scarcity=throw,
        resort_inner=resort,
    )


def _one_variant(
    base: np.ndarray,
    term_off: np.ndarray,
    term_col: np.ndarray,
    term_w: np.ndarray,
    v: int,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """Variant ``v``'s composite score per base row (into ``out`` when given)."""
    a, b = int(term_off[v]), int(term_off[v + 1])
    out = np.empty(base.shape[0], dtype=np.float64) if out is None else out
    variant_scores(base, np.array([0, b - a], dtype=np.int64), term_col[a:b], term_w[a:b], out.reshape(1, -1))
    return out


def _scoreable(col: np.ndarray, sc_rows: np.ndarray) -> np.ndarray:
    """``col[sc_rows]``; the column itself (no copy) when every row is scoreable and it is
    already a writable C-contiguous int64 array (the kernels' argument type)."""
    if sc_rows.shape[0] == col.shape[0] and col.dtype == np.int64 and col.flags.c_contiguous and col.flags.writeable:
        return col
    return col[sc_rows]


def _no_state() -> None:
    return None


def _set_label(table: ItemTable, s: int) -> str:
    return "" if table.set_column is None else f"set {table.set_keys[s]!r}: "


# --- phase 1: what every variant shares --------------------------------------------------------


@dataclass(frozen=True)
class SweepShared:
    """What a sweep computes once, before its variants, and every variant only reads."""

    table: ItemTable
    classified: Classified
    plan: ScorePlan
    max_cells: int  #: the knapsack DP size limit (``KNAPSACK_MAX_CELLS``)
    dup_members: np.ndarray  #: scoreable positions grouped by content (``duplicate_groups``)
    dup_offsets: np.ndarray  #: the groups' offsets into ``dup_members``
    neg_rows: np.ndarray  #: rows with negative tokens
    all_sc: np.ndarray  #: every scoreable position (the candidates when nothing is deduplicated)
    sc_tok: np.ndarray  #: int64 tokens per scoreable position
    sc_kind: np.ndarray  #: int64 kind id per scoreable position
    #: ``stages.timestamp_order`` (None when no variant places chronologically)
    ts_order: np.ndarray | None
    ts_sorted: np.ndarray | None
    ts_offsets: np.ndarray | None
    #: per scoreable position, ``stages.chrono_compared`` (when a chronological variant is greedy)
    chrono_compared: np.ndarray | None
    #: the units of every group column a variant names (``groups.group_plan``)
    group_plans: dict[str, grp.GroupPlan] = field(default_factory=dict)


def _timestamps(
    table: ItemTable, sc_rows: np.ndarray, greedy_chrono: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """The shared timestamp order and, when a greedy variant places chronologically, the rows
    that placement compares (the greedy slicer orders them)."""
    ts = stages.timestamp_order(table.timestamp, table.timestamp_valid, table.offsets)
    compared = stages.chrono_compared(table.timestamp_valid, ts[0], ts[1], sc_rows) if greedy_chrono else None
    return ts[0], ts[1], ts[2], compared


def _score_column(ctx: ScoreContext, scorer: Scorer, base: np.ndarray, j: int) -> None:
    base[:, j] = ctx.score(scorer)


def _duplicates(table: ItemTable, sc_rows: np.ndarray, sc_off: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return duplicate_groups(table.content_id[sc_rows], sc_off)


def _gathers(table: ItemTable, cls: Classified) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Negative-token rows, every scoreable position, and the scoreable rows' tokens and kinds."""
    sc_rows = cls.sc_rows
    return (
        np.flatnonzero(cls.negative),
        np.arange(sc_rows.shape[0]),
        _scoreable(table.tokens, sc_rows),
        _scoreable(table.kind_id, sc_rows),
    )


def _run_all(tasks: Sequence[Callable[[], Any]], threads: int) -> list[Any]:
    """Run independent tasks on the engine's pool; their results, in task order."""
    results: list[Any] = [None] * len(tasks)

    def run(i: int, _state: None) -> None:
        results[i] = tasks[i]()

    run_tasks(len(tasks), threads, _no_state, run)
    return results


def prepare_sweep(
    table: ItemTable,
    variants: Sequence[Variant],
    cls: Classified,
    score_context: ScoreContext | None,
    threads: int,
    max_cells: int,
) -> SweepShared:
    """Everything that does not depend on the variant, as independent tasks on the pool: the
    shared timestamp order, each distinct base score column (one column of ``base``), the
    duplicate-content groups and the gathers every variant reads. Each task writes only its
    own output, so the result does not depend on the thread count. The score context lives
    only as long as this call: ``base`` holds every column the variants need."""
    sc_rows, sc_off = cls.sc_rows, cls.sc_offsets
    ctx = score_context or ScoreContext(table, sc_rows, sc_off)
    children, term_off, term_col, term_w = _score_terms(variants)
    base = np.empty((sc_rows.shape[0], len(children)), dtype=np.float64)
    chrono = [var for var in variants if var.policy.placer == "chronological"]
    tasks: list[Callable[[], Any]] = []
    if chrono:  # first: the longest task
        tasks.append(
            partial(_timestamps, table, sc_rows, any(isinstance(v.policy.slicer, GreedySlice) for v in chrono))
        )
    tasks += [partial(_score_column, ctx, child, base, j) for j, child in enumerate(children)]
    tasks.append(partial(_duplicates, table, sc_rows, sc_off))
    tasks.append(partial(_gathers, table, cls))
    results = _run_all(tasks, threads)
    ts_order, ts_sorted, ts_offsets, compared = results[0] if chrono else (None, None, None, None)
    (dup_members, dup_offsets), (neg_rows, all_sc, sc_tok, sc_kind) = results[-2], results[-1]
    plans = {
        col: grp.group_plan(table, col, sc_rows, sc_off, sc_tok)
        for col in dict.fromkeys(v.policy.groups for v in variants if v.policy.groups is not None)
    }
    return SweepShared(
        table=table,
        classified=cls,
        plan=ScorePlan(base, term_off, term_col, term_w),
        max_cells=max_cells,
        dup_members=dup_members,
        dup_offsets=dup_offsets,
        neg_rows=neg_rows,
        all_sc=all_sc,
        sc_tok=sc_tok,
        sc_kind=sc_kind,
        ts_order=ts_order,
        ts_sorted=ts_sorted,
        ts_offsets=ts_offsets,
        chrono_compared=compared,
        group_plans=plans,
    )


# --- phase 2: one variant -----------------------------------------------------------------------


class _Scratch:
    """One worker's buffers, reused by every variant it runs. The truncation marks and the
    count-cap details are allocated on first use; ``empty`` stands for an output a variant
    does not write."""

    def __init__(self, n: int, m: int):
        self.n = n
        self.position = np.zeros(n, dtype=np.int32)
        self.lstpos = np.full(n, -1, dtype=np.int32)
        self.scores = np.empty(m, dtype=np.float64)
        self.empty = np.zeros(0, dtype=np.int64)
        self._seq: np.ndarray | None = None
        self._details: tuple[np.ndarray, np.ndarray] | None = None

    def seq(self) -> np.ndarray:
        """Per-row truncation marks (only truncation writes them), all -1."""
        if self._seq is None:
            self._seq = np.empty(self.n, dtype=np.int64)
        self._seq[:] = -1
        return self._seq

    def details(self) -> tuple[np.ndarray, np.ndarray]:
        """Per-row CountCapExceeded (cap, count) (count slicers only)."""
        if self._details is None:
            self._details = (np.zeros(self.n, dtype=np.int64), np.zeros(self.n, dtype=np.int64))
        return self._details


class _Cut(NamedTuple):
    """The slice stage's output: what the place stage reads."""

    cand_rows: np.ndarray  # table row per candidate (per set, in the slicer's input order)
    cand_score: np.ndarray  # score per candidate
    cand_offsets: np.ndarray  # the sets' offsets into the candidates
    rank: np.ndarray  # per candidate: its place in the slicer's output, -1 when not selected
    rank_prefix: np.ndarray | None  # greedy: per set, the length of its unordered prefix
    cand_tok: np.ndarray | None  # greedy: tokens per candidate
    prefix_compared: bool  # greedy: the slicer ordered what chronological placement compares


def _pinned_error(table: ItemTable, pinned_tokens: np.ndarray, avail: int, label: str, s: int) -> CupelError:
    return PinnedExceedsBudgetError(
        f"{label}{_set_label(table, s)}pinned items require {int(pinned_tokens[s])} tokens, "
        f"but only {avail} are available (max_tokens - output_reserve)"
    )


def _slice_error(
    table: ItemTable,
    err: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    entries: Sequence[Any],
    label: str,
    name: str,
    max_cells: int,
    s: int,
) -> CupelError:
    if err[s] == sk.ERR_SCARCITY:
        e = entries[int(a[s])]
        return ScarcityError(
            f"{label}{_set_label(table, s)}{name}: kind {e.kind!r} requires "
            f"{e.require_count} items but only {int(b[s])} candidates are available"
        )
    n_c, cap = int(a[s]), int(b[s])
    need = (n_c + sk.KNAPSACK_ROW_CELLS) * 64 * (cap // 64 + 2)
    return TableTooLargeError(
        f"{label}{_set_label(table, s)}knapsack table of {n_c} candidates x "
        f"{cap + 1} capacity cells needs {need} cells (keep bits plus value rows) "
        f"over the limit of {max_cells} cells; raise bucket_size or lower the target"
    )


def _overflow_error(table: ItemTable, merged: np.ndarray, target: int, label: str, s: int) -> CupelError:
    return BudgetOverflowError(
        f"{label}{_set_label(table, s)}selected items require {int(merged[s])} tokens, "
        f"exceeding the target budget of {target} (overflow_strategy = 'throw')"
    )


def _shortfalls(satisfied: np.ndarray, entries: Sequence[Any], s: int) -> list[tuple[str, int, int]]:
    return [
        (entries[e].kind, entries[e].require_count, int(satisfied[s, e]))
        for e in np.flatnonzero(satisfied[s] >= 0).tolist()
    ]


def _deduplicate(sh: SweepShared, out: SweepRun, v: int, sc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Deduplicate: the surviving scoreable positions and their set offsets. Records each
    loser's reason and winner."""
    cls = sh.classified
    if not (out.variants[v].policy.deduplication and sh.dup_members.size):
        out.dedup_winner[v] = (np.zeros(0, np.int64), np.zeros(0, np.int64))
        return sh.all_sc, cls.sc_offsets
    members = sh.dup_members
    winners = duplicate_winners(members, sh.dup_offsets, sc)
    lose = winners != members
    losers, lwin = members[lose], winners[lose]
    o = np.argsort(losers)
    losers, lwin = losers[o], lwin[o]
    keep = np.ones(cls.sc_rows.shape[0], dtype=np.bool_)
    keep[losers] = False
    surv = np.flatnonzero(keep)
    surv_off = _offsets(segment_sums(keep.astype(np.int64), cls.sc_offsets))
    lrows = cls.sc_rows[losers]
    out.reason[v][lrows] = R_DEDUPLICATED
    out.dedup_winner[v] = (lrows, cls.sc_rows[lwin])
    return surv, surv_off


def _slice_greedy(
    sh: SweepShared, placer: str, sc: np.ndarray, surv: np.ndarray, surv_off: np.ndarray, targets: np.ndarray
) -> _Cut:
    """GreedySlice: no score sort (see slicers/greedy.py). A big set's fitting prefix stays
    unordered: the placer orders what it compares (chronological: the slicer orders the rows
    marked by the shared ``chrono_compared``)."""
    sc_rows = sh.classified.sc_rows
    every = surv.shape[0] == sc_rows.shape[0]  # no deduplication loser: the scoreable rows, in order
    cand_score = sc if every else sc[surv]
    cand_tok = sh.sc_tok if every else sh.sc_tok[surv]
    rank = np.full(len(surv), -1, dtype=np.int64)
    rank_prefix = np.zeros(sh.table.n_sets, dtype=np.int64)
    compared = None
    if placer == "chronological" and sh.chrono_compared is not None:
        compared = sh.chrono_compared if every else sh.chrono_compared[surv]
    greedy_segments(cand_tok, cand_score, surv_off, targets, rank, prefix=rank_prefix, compared=compared)
    cand_rows = sc_rows if every else sc_rows[surv]
    return _Cut(cand_rows, cand_score, surv_off, rank, rank_prefix, cand_tok, compared is not None)


def _slice_sorted(
    sh: SweepShared,
    out: SweepRun,
    v: int,
    args: SlicerArgs,
    sc: np.ndarray,
    surv: np.ndarray,
    surv_off: np.ndarray,
    targets: np.ndarray,
    label: str,
) -> _Cut:
    """Every other slicer: sort the survivors by score (a quota slicer with an inner greedy
    needs no sort either, see slicers/quota.py), slice, and record the variant's count-cap
    drops, shortfalls and per-set slicer errors."""
    sc_rows = sh.classified.sc_rows
    slicer = out.variants[v].policy.slicer
    unsorted = args.mode == sk.MODE_QUOTA and not args.use_knapsack
    cand = surv if unsorted else surv[stages.sort_segments(sc[surv], surv_off)]
    identity = unsorted and cand.shape[0] == sc_rows.shape[0]  # the scoreable rows, in order
    cand_score = sc if identity else sc[cand]
    tok = sh.sc_tok if identity else sh.sc_tok[cand]
    kind = sh.sc_kind if identity else sh.sc_kind[cand]
    if nested.is_nested(slicer):  # a count quota around a slicer other than greedy
        rank, err, err_a, err_b, satisfied, cap_dropped = nested.slice_nested(
            slicer, sh.table, slicer_args, tok, cand_score, kind, surv_off, targets, sh.max_cells
        )
    else:
        rank, err, err_a, err_b, satisfied, cap_dropped = args.run(
            tok, cand_score, kind, surv_off, targets, sh.max_cells, unsorted=unsorted
        )
    out.cap_dropped[v] = cap_dropped
    entries = nested.count_entries(slicer)  # the slicer's own, then a nested slicer's
    if len(entries):
        out.shortfalls[v].add(np.flatnonzero((satisfied >= 0).any(axis=1)), partial(_shortfalls, satisfied, entries))
    error = partial(_slice_error, sh.table, err, err_a, err_b, entries, label, slicer.name, sh.max_cells)
    out.errors[v].add(np.flatnonzero(err), error)
    return _Cut(sc_rows if identity else sc_rows[cand], cand_score, surv_off, rank, None, None, False)


_OVERFLOW = {"throw": stages.OVERFLOW_THROW, "truncate": stages.OVERFLOW_TRUNCATE, "proceed": stages.OVERFLOW_PROCEED}


def _place(
    sh: SweepShared,
    out: SweepRun,
    v: int,
    args: SlicerArgs,
    cut: _Cut,
    eff: np.ndarray,
    w: _Scratch,
    label: str,
    plan: grp.GroupPlan | None = None,
) -> None:
    """Place: merge pinned and sliced rows, apply the overflow strategy, run the placer and
    write every row's reason into the variant's rows of the result matrices. With ``plan``
    (groups) the candidates are units: their first members carry the units' tokens, and
    ``groups.expand`` gives every member its unit's outcome and place."""
    table, cls, var = sh.table, sh.classified, out.variants[v]
    pol, bud = var.policy, var.budget
    truncate = pol.overflow_strategy == "truncate"
    seq = w.seq() if truncate else w.empty
    count_caps = isinstance(pol.slicer, (CountQuotaSlice, CountConstrainedKnapsackSlice))
    detail_a, detail_b = w.details() if count_caps else (w.empty, w.empty)
    err, err_a, sliced_tok, kept_tok = stages.place_segments(
        table.n,
        table.tokens if plan is None else plan.row_tokens,
        table.kind_id,
        table.timestamp,
        table.timestamp_valid,
        cls.pin_rows,
        cls.pin_offsets,
        cut.cand_rows,
        cut.cand_score,
        cut.cand_offsets,
        cut.rank,
        eff,
        np.full(table.n_sets, bud.target_tokens, dtype=np.int64),
        np.full(table.n_sets, bud.output_reserve, dtype=np.int64),
        _OVERFLOW[pol.overflow_strategy],
        stages.PLACER_CHRONOLOGICAL if pol.placer == "chronological" else stages.PLACER_U_SHAPED,
        count_caps,
        args.cap_of_kind,
        out.included[v],
        out.reason[v],
        detail_a,
        detail_b,
        w.position,
        seq,
        sh.ts_order,
        sh.ts_sorted,
        sh.ts_offsets,
        w.lstpos,
        rank_prefix=cut.rank_prefix,
        cand_tok=cut.cand_tok,
        prefix_compared=cut.prefix_compared,
    )
    if plan is not None:
        grp.expand(plan, table.offsets, out.included[v], out.reason[v], w.position, seq, detail_a, detail_b)
    out.errors[v].add(np.flatnonzero(err), partial(_overflow_error, table, err_a, bud.target_tokens, label))
    out.avail_slice[v] = eff - sliced_tok
    out.avail_place[v] = bud.target_tokens - kept_tok
    _record(out, v, w.position, seq if truncate else None, (detail_a, detail_b) if count_caps else None)


def _record(
    out: SweepRun,
    v: int,
    position: np.ndarray,
    seq: np.ndarray | None,
    details: tuple[np.ndarray, np.ndarray] | None,
) -> None:
    """Keep what the worker's scratch holds for variant ``v``: truncated rows in drop order,
    CountCapExceeded details, the included rows' positions."""
    n = out.table.n
    reason = out.reason[v]
    if seq is not None:
        trunc = np.flatnonzero(seq >= 3 * n)
        reason[trunc] = stages.truncation_reasons(trunc, out.table.offsets, out.classified.pin_offsets)
        out.trunc_order[v] = (trunc, seq[trunc] - 3 * n)
    else:
        out.trunc_order[v] = (np.zeros(0, np.int64), np.zeros(0, np.int64))
    if details is not None:
        cc = np.flatnonzero(reason == R_COUNT_CAP_EXCEEDED)
        out.count_cap[v] = (cc, details[0][cc].copy(), details[1][cc].copy())
    else:
        out.count_cap[v] = (np.zeros(0, np.int64),) * 3
    out.placed_pos[v] = position[out.included[v]]


def run_variant(sh: SweepShared, out: SweepRun, v: int, w: _Scratch) -> None:
    """Variant ``v`` over every set: its scores, the pinned-budget check, then deduplicate,
    slice and place, each writing only variant ``v``'s rows of ``out``."""
    stamp = out.stage_ns[v]
    stamp[0] = time.time_ns()
    var = out.variants[v]
    label = f"variant {var.label!r}: " if var.label else ""
    errors = out.errors[v]
    sc = _one_variant(*sh.plan, v, out=w.scores)
    stamp[1] = time.time_ns()
    avail = var.budget.max_tokens - var.budget.output_reserve
    pinned_tokens = sh.classified.pinned_tokens
    errors.add(np.flatnonzero(pinned_tokens > avail), partial(_pinned_error, sh.table, pinned_tokens, avail, label))
    out.reason[v][sh.neg_rows] = R_NEGATIVE_TOKENS
    plan = sh.group_plans[var.policy.groups] if var.policy.groups is not None else None
    if plan is not None:  # units: deduplicate among units of one, slice one row per unit
        out.group_plan[v] = plan
        sh = dataclasses.replace(
            sh,
            sc_tok=plan.pos_tokens,
            dup_members=plan.dup_members,
            dup_offsets=plan.dup_offsets,
            chrono_compared=None,
        )
    surv, surv_off = _deduplicate(sh, out, v, sc)
    if plan is not None:
        surv, surv_off, sc = grp.collapse(plan, surv, surv_off, sc)
    stamp[2] = time.time_ns()
    eff = effective_targets(var.budget, pinned_tokens)
    out.effective_target[v] = eff
    run_targets = eff.copy()
    if errors:
        run_targets[errors.sets()] = 0
    args = slicer_args(var.policy.slicer, sh.table)
    if isinstance(var.policy.slicer, GreedySlice):
        cut = _slice_greedy(sh, var.policy.placer, sc, surv, surv_off, run_targets)
    else:
        cut = _slice_sorted(sh, out, v, args, sc, surv, surv_off, run_targets, label)
    stamp[3] = time.time_ns()
    _place(sh, out, v, args, cut, eff, w, label, plan)
    stamp[4] = time.time_ns()


# --- the sweep ----------------------------------------------------------------------------------


class _Progress:
    """Reports finished variants to ``callback(done, total)`` (workers finish concurrently)."""

    def __init__(self, callback: Callable[[int, int], None] | None, total: int):
        self.callback = callback
        self.total = total
        self.done = 0
        self.lock = threading.Lock()

    def step(self) -> None:
        if self.callback is not None:
            with self.lock:
                self.done += 1
                self.callback(self.done, self.total)


def run_sweep(
    table: ItemTable,
    variants: Sequence[Variant],
    *,
    max_cells: int = KNAPSACK_MAX_CELLS,
    progress: Callable[[int, int], None] | None = None,
    classified: Classified | None = None,
    score_context: ScoreContext | None = None,
    threads: int | None = None,
) -> SweepRun:
    """Run every variant over every set. Per-(variant, set) failures are recorded in
    ``SweepRun.errors[v][s]``; the caller decides whether they raise. Variants run on
    ``threads`` workers (see ``parallel.resolve_threads``); the result does not depend on it.

    Two phases on the one pool: :func:`prepare_sweep` (what every variant shares), then
    :func:`run_variant` per variant, each worker with its own scratch buffers."""
    if score_context is None:  # a custom scorer's column must exist and be numeric: say so first
        check_scorer_columns(table, (var.policy.scorer for var in variants))
    threads = resolve_threads(threads)
    t_start = time.time_ns()
    cls = classified or classify(table)
    t_cls = time.time_ns()
    shared = prepare_sweep(table, variants, cls, score_context, threads, max_cells)
    out = SweepRun(table, variants, cls, shared.plan)
    out.prep_ns[:] = (t_start, t_cls, time.time_ns())
    done = _Progress(progress, len(variants))

    def task(v: int, w: _Scratch) -> None:
        run_variant(shared, out, v, w)
        done.step()

    run_tasks(len(variants), threads, partial(_Scratch, table.n, cls.sc_rows.shape[0]), task)
    return out
