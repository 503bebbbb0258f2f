"""The multi-variant plan: every policy variant of a sweep over every item set of a table,
written as one row of ``[V, N]`` result matrices.

Shared across variants: classification (it depends only on tokens and pinned flags), each
distinct base scorer column (``ScoreContext``), the duplicate-content groups, and the first
pinned row of each set. Per variant: one kernel call per stage over all sets. A single policy
run (``Pipeline.dry_run``) is simply a sweep with one variant.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from cupel_np.engine import reasons, stages
from cupel_np.engine.batch_kernels import duplicate_groups, duplicate_winners, variant_scores
from cupel_np.engine.parallel import resolve_threads, run_tasks
from cupel_np.engine.scorers import ScoreContext, check_scorer_columns
from cupel_np.engine.slicers import kernels as sk
from cupel_np.engine.slicers import nested
from cupel_np.engine.slicers.greedy import greedy_segments
from cupel_np.engine.slicers.quota import quota_greedy_slice
from cupel_np.errors import (
    BudgetOverflowError,
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
)

#: Most memory one knapsack DP may allocate, in keep-table cells (bits): 2^32 cells = 512 MiB.
#: A DP of n candidates and capacity C needs (n + 256) x 64 x (C // 64 + 2) cells: its keep
#: table (one bit per candidate and capacity cell, rows padded to 64-bit words) plus its value
#: rows (charged at 256 bits per capacity cell); see ``slicers.kernels.knapsack_fits``.
KNAPSACK_MAX_CELLS = 4_294_967_296


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

    def __init__(self, table: ItemTable, variants: Sequence[Variant], cls: Classified):
        v, n, s = len(variants), table.n, table.n_sets
        self.table = table
        self.variants = list(variants)
        self.classified = cls
        self.included = np.zeros((v, n), dtype=np.bool_)
        self.reason = np.full((v, n), -1, dtype=np.int8)
        # placed positions are kept for included rows only, in row order: ``placed_pos[v][i]``
        # is the position of the i-th row of ``flatnonzero(included[v])`` (4 bytes per included
        # item; the rows themselves are the inclusion matrix's, never stored twice)
        self.placed_pos: list[np.ndarray] = []
        self._placed_off: dict[int, np.ndarray] = {}
        # scores are not stored per variant: scores_for(v) rebuilds them from the shared base
        # columns (8 bytes per item per variant saved)
        self._plan = None
        self.effective_target = np.zeros((v, s), dtype=np.int64)
        self.avail_slice = np.zeros((v, s), dtype=np.int64)
        self.avail_place = np.zeros((v, s), dtype=np.int64)
        self.cap_dropped = np.zeros((v, s), dtype=np.int64)
        # per variant {set: error} and {set: [(kind, required, satisfied), ...]}, built lazily
        self.errors: list[SetMap] = [SetMap(s) for _ in range(v)]
        self.shortfalls: list[SetMap] = [SetMap(s) for _ in range(v)]
        # sparse details: (rows, values...) sorted by row
        self.dedup_winner: list[tuple[np.ndarray, np.ndarray]] = []
        self.trunc_order: list[tuple[np.ndarray, np.ndarray]] = []
        self.count_cap: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

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
        out[self.table.pinned[rows] & ~cls.negative[rows]] = 1.0
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


def _score_terms(variants: Sequence[Variant]):
    """Distinct base scorers (in order of first use) and each variant's (column, normalised
    weight) terms."""
    cols: dict = {}
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


def slicer_args(slicer, table: ItemTable):
    """Flatten a slicer spec into the arrays ``slice_segments`` takes."""
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
        use_knapsack = isinstance(slicer.inner, KnapsackSlice)
        if use_knapsack:
            bucket = slicer.inner.bucket_size
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
    return (
        mode,
        use_knapsack,
        bucket,
        kind_rank,
        q_has,
        q_req,
        q_cap,
        q_req_all,
        e_kind,
        e_req,
        cap_of_kind,
        throw,
        resort,
    )


def _one_variant(base, term_off, term_col, term_w, v: int, out: np.ndarray | None = None) -> np.ndarray:
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
    ``threads`` workers (see ``parallel.resolve_threads``); the result does not depend on it."""
    if score_context is None:  # a custom scorer's column must exist and be numeric: say so first
        check_scorer_columns(table, (var.policy.scorer for var in variants))
    n = table.n
    n_sets = table.n_sets
    threads = resolve_threads(threads)
    cls = classified or classify(table)
    ctx = score_context or ScoreContext(table, cls.sc_rows, cls.sc_offsets)
    out = SweepRun(table, variants, cls)
    sc_rows, sc_off = cls.sc_rows, cls.sc_offsets
    m = len(sc_rows)
    # Everything that does not depend on the variant, as independent tasks on the pool: the
    # shared timestamp order, each distinct base score column (one column of ``base``), the
    # duplicate-content groups and the gathers every variant reads. Each task writes its own
    # output, so the result does not depend on the thread count.
    children, term_off, term_col, term_w = _score_terms(variants)
    base = np.empty((m, len(children)), dtype=np.float64)
    shared: dict = {}
    jobs: list[Callable[[], None]] = []
    if any(var.policy.placer == "chronological" for var in variants):
        greedy_chrono = any(
            var.policy.placer == "chronological" and isinstance(var.policy.slicer, GreedySlice) for var in variants
        )

        def ts_job() -> None:
            ts = shared["ts"] = stages.timestamp_order(table.timestamp, table.timestamp_valid, table.offsets)
            if greedy_chrono:  # the rows chronological placement compares (greedy orders them)
                shared["chrono_compared"] = stages.chrono_compared(table.timestamp_valid, ts[0], ts[1], sc_rows)

        jobs.append(ts_job)

    def column(j: int) -> None:
        base[:, j] = ctx.score(children[j])  # noqa: F821 (called before the del below)

    jobs += [lambda j=j: column(j) for j in range(len(children))]  # noqa: F821
    jobs.append(lambda: shared.__setitem__("dup", duplicate_groups(table.content_id[sc_rows], sc_off)))
    jobs.append(
        lambda: shared.update(
            neg_rows=np.flatnonzero(cls.negative),
            all_sc=np.arange(m),
            sc_tok=_scoreable(table.tokens, sc_rows),
            sc_kind=_scoreable(table.kind_id, sc_rows),
        )
    )
    run_tasks(len(jobs), threads, _no_state, lambda i, _: jobs[i]())  # noqa: F821
    out._plan = plan = (base, term_off, term_col, term_w)
    del ctx, column, jobs  # the base matrix holds every column the variants need
    members, goff = shared["dup"]
    neg_rows, sc_tok, sc_kind = shared["neg_rows"], shared["sc_tok"], shared["sc_kind"]
    all_sc = shared["all_sc"]  # every scoreable position, shared by the variants (never written)
    ts_order, ts_sorted, ts_off = shared.get("ts", (None, None, None))
    chrono_cmp = shared.get("chrono_compared")  # per scoreable row; never written
    nv = len(variants)
    out.placed_pos = [None] * nv
    out.dedup_winner = [None] * nv
    out.trunc_order = [None] * nv
    out.count_cap = [None] * nv
    done = [0]
    done_lock = threading.Lock()
    no_detail = np.zeros(0, dtype=np.int64)

    def scratch():  # per worker, reused by each variant it runs
        return dict(
            pos64=np.zeros(n, dtype=np.int32), lstpos=np.full(n, -1, dtype=np.int32), sc=np.empty(m, dtype=np.float64)
        )

    def one(v: int, w: dict) -> None:
        var = variants[v]
        pos64, lstpos = w["pos64"], w["lstpos"]
        pol, bud = var.policy, var.budget
        errors = out.errors[v]
        label = f"variant {var.label!r}: " if var.label else ""
        included = out.included[v]
        reason = out.reason[v]
        truncate = pol.overflow_strategy == "truncate"
        if truncate:  # seq marks truncated rows (only truncation writes it: allocated on first use)
            if "seq" not in w:
                w["seq"] = np.empty(n, dtype=np.int64)
            seq = w["seq"]
            seq[:] = -1
        else:
            seq = no_detail
        sc = _one_variant(*plan, v, out=w["sc"])
        avail = bud.max_tokens - bud.output_reserve
        errors.add(
            np.flatnonzero(cls.pinned_tokens > avail),
            lambda s, label=label, avail=avail: PinnedExceedsBudgetError(
                f"{label}{_set_label(table, s)}pinned items require {int(cls.pinned_tokens[s])} tokens, "
                f"but only {avail} are available (max_tokens - output_reserve)"
            ),
        )
        reason[neg_rows] = reasons.R_NEGATIVE_TOKENS
        # Deduplicate
        if pol.deduplication and members.size:
            winners = duplicate_winners(members, goff, sc)
            lose = winners != members
            losers, lwin = members[lose], winners[lose]
            o = np.argsort(losers)
            losers, lwin = losers[o], lwin[o]
            keep = np.ones(m, dtype=np.bool_)
            keep[losers] = False
            surv = np.flatnonzero(keep)
            surv_off = _offsets(segment_sums(keep.astype(np.int64), sc_off))
            lrows = sc_rows[losers]
            reason[lrows] = reasons.R_DEDUPLICATED
            out.dedup_winner[v] = (lrows, sc_rows[lwin])
        else:
            surv = all_sc
            surv_off = sc_off
            out.dedup_winner[v] = (np.zeros(0, np.int64), np.zeros(0, np.int64))
        eff = effective_targets(bud, cls.pinned_tokens)
        out.effective_target[v] = eff
        run_targets = eff.copy()
        if errors:
            run_targets[errors.sets()] = 0
        # Sort + Slice
        (
            mode,
            use_knapsack,
            bucket,
            kind_rank,
            q_has,
            q_req,
            q_cap,
            q_req_all,
            e_kind,
            e_req,
            cap_of_kind,
            throw,
            resort,
        ) = slicer_args(pol.slicer, table)
        identity = False  # candidates are exactly the scoreable rows, in order
        rank_prefix = cand_tok = compared = None
        if isinstance(pol.slicer, GreedySlice):
            cand = surv  # greedy needs no score sort (see slicers/greedy.py)
            every = identity = cand.shape[0] == m  # no deduplication loser
            cand_score = sc if every else sc[cand]
            cand_tok = sc_tok if every else sc_tok[cand]
            rank = np.full(len(cand), -1, dtype=np.int64)
            # a big set's fitting prefix stays unordered: the placer orders what it compares
            # (chronological: the slicer orders the rows marked by chrono_compared, shared)
            rank_prefix = np.zeros(n_sets, dtype=np.int64)
            compared = None
            if pol.placer == "chronological" and chrono_cmp is not None:
                compared = chrono_cmp if every else chrono_cmp[cand]
            greedy_segments(cand_tok, cand_score, surv_off, run_targets, rank, prefix=rank_prefix, compared=compared)
        else:
            # quota with an inner greedy needs no score sort either (see slicers/quota.py)
            unsorted = mode == sk.MODE_QUOTA and not use_knapsack
            cand = surv if unsorted else surv[stages.sort_segments(sc[surv], surv_off)]
            identity = unsorted and cand.shape[0] == m
            cand_score = sc if identity else sc[cand]
            rank, s_err, s_err_a, s_err_b, satisfied, cap_dropped = (
                quota_greedy_slice if unsorted else nested.driver_for(pol.slicer, table, slicer_args)
            )(
                mode,
                sc_tok if identity else sc_tok[cand],
                cand_score,
                sc_kind if identity else sc_kind[cand],
                surv_off,
                run_targets,
                use_knapsack,
                int(bucket),
                int(max_cells),
                kind_rank,
                q_has,
                q_req,
                q_cap,
                q_req_all,
                e_kind,
                e_req,
                cap_of_kind,
                throw,
                resort,
            )
            out.cap_dropped[v] = cap_dropped
            entries = nested.count_entries(pol.slicer)  # the outer slicer's, then nested ones'
            if len(entries):
                out.shortfalls[v].add(
                    np.flatnonzero((satisfied >= 0).any(axis=1)),
                    lambda s, sat=satisfied, entries=entries: [
                        (entries[e].kind, entries[e].require_count, int(sat[s, e])) for e in np.flatnonzero(sat[s] >= 0)
                    ],
                )

            def slice_error(s, s_err=s_err, a=s_err_a, b=s_err_b, entries=entries, label=label, name=pol.slicer.name):
                if s_err[s] == sk.ERR_SCARCITY:
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

            errors.add(np.flatnonzero(s_err), slice_error)
        cand_rows = sc_rows if identity else sc_rows[cand]
        # Place + reasons
        count_caps = isinstance(pol.slicer, (CountQuotaSlice, CountConstrainedKnapsackSlice))
        if count_caps and "detail_a" not in w:  # CountCapExceeded details (count slicers only)
            w["detail_a"], w["detail_b"] = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
        detail_a, detail_b = (w["detail_a"], w["detail_b"]) if count_caps else (no_detail, no_detail)
        ov = {"throw": stages.OVERFLOW_THROW, "truncate": stages.OVERFLOW_TRUNCATE, "proceed": stages.OVERFLOW_PROCEED}[
            pol.overflow_strategy
        ]
        pl = stages.PLACER_CHRONOLOGICAL if pol.placer == "chronological" else stages.PLACER_U_SHAPED
        p_err, p_err_a, sliced_tok, kept_tok = stages.place_segments(
            n,
            table.tokens,
            table.kind_id,
            table.timestamp,
            table.timestamp_valid,
            cls.pin_rows,
            cls.pin_offsets,
            cand_rows,
            cand_score,
            surv_off,
            rank,
            eff,
            np.full(n_sets, bud.target_tokens, dtype=np.int64),
            np.full(n_sets, bud.output_reserve, dtype=np.int64),
            ov,
            pl,
            count_caps,
            cap_of_kind,
            included,
            reason,
            detail_a,
            detail_b,
            pos64,
            seq,
            ts_order,
            ts_sorted,
            ts_off,
            lstpos,
            rank_prefix=rank_prefix,
            cand_tok=cand_tok,
            prefix_compared=compared is not None,
        )
        errors.add(
            np.flatnonzero(p_err),
            lambda s, a=p_err_a, label=label, target=bud.target_tokens: BudgetOverflowError(
                f"{label}{_set_label(table, s)}selected items require {int(a[s])} tokens, "
                f"exceeding the target budget of {target} (overflow_strategy = 'throw')"
            ),
        )
        out.avail_slice[v] = eff - sliced_tok
        if truncate:
            trunc = np.flatnonzero(seq >= 3 * n)
            reason[trunc] = stages.truncation_reasons(trunc, table.offsets, cls.pin_offsets)
            out.trunc_order[v] = (trunc, seq[trunc] - 3 * n)
        else:
            out.trunc_order[v] = (np.zeros(0, np.int64), np.zeros(0, np.int64))
        if count_caps:
            cc = np.flatnonzero(reason == reasons.R_COUNT_CAP_EXCEEDED)
            out.count_cap[v] = (cc, detail_a[cc].copy(), detail_b[cc].copy())
        else:
            out.count_cap[v] = (np.zeros(0, np.int64),) * 3
        out.avail_place[v] = bud.target_tokens - kept_tok
        out.placed_pos[v] = pos64[included]
        if progress is not None:
            with done_lock:
                done[0] += 1
                progress(done[0], nv)

    run_tasks(nv, threads, scratch, one)
    return out
