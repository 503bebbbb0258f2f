"""The single-policy stage runner over a whole ItemTable (every item set at once), and the
object-style ``Pipeline`` API on top of it.

Stages: Classify -> Score -> Deduplicate -> Sort -> Slice -> Place. Each stage is one
vectorized NumPy step or one segmented Numba kernel call; there is no Python loop per item set.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from . import stages
from .budget import ContextBudget, effective_budget
from .errors import (
    BudgetOverflowError,
    CupelError,
    InvalidInputTypeError,
    PinnedExceedsBudgetError,
    ScarcityError,
    TableTooLargeError,
)
from .items import ContextItem, ItemTable
from .policy import (
    CountConstrainedKnapsackSlice,
    CountQuotaSlice,
    GreedySlice,
    KnapsackSlice,
    Policy,
    QuotaSlice,
)
from .scorers import ScoreContext
from .slicers import kernels as sk
from .text import ascii_fold

#: Largest knapsack DP keep table (candidates x capacity cells) a run may allocate. The
#: table is packed 8 cells per byte, so this is 512 MiB of keep bits.
KNAPSACK_MAX_CELLS = 4_294_967_296


def as_table(items) -> ItemTable:
    if isinstance(items, ItemTable):
        return items
    if isinstance(items, (list, tuple)):
        return ItemTable.from_items(items)
    raise InvalidInputTypeError(
        f"items must be an ItemTable or a sequence of ContextItems, got {type(items).__name__}"
    )


def _check_budget(budget) -> ContextBudget:
    if not isinstance(budget, ContextBudget):
        raise InvalidInputTypeError(f"budget must be a ContextBudget, got {type(budget).__name__}")
    return budget


def segment_sums(values: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    cs = np.zeros(values.shape[0] + 1, dtype=np.int64)
    np.cumsum(values, out=cs[1:])
    return cs[offsets[1:]] - cs[offsets[:-1]]


@dataclass
class Classified:
    """Classify-stage output, shared by every policy run over the same table."""

    negative: np.ndarray  # bool [N]
    pinned: np.ndarray  # bool [N] (non-negative pinned rows)
    sc_rows: np.ndarray  # scoreable rows, grouped order
    sc_offsets: np.ndarray
    pin_rows: np.ndarray
    pin_offsets: np.ndarray
    pinned_tokens: np.ndarray  # per segment


def classify(table: ItemTable) -> Classified:
    neg = table.tokens < 0
    pin = table.pinned & ~neg
    sc = ~neg & ~pin
    sc_rows = np.flatnonzero(sc)
    pin_rows = np.flatnonzero(pin)
    sc_off = np.zeros(table.n_sets + 1, dtype=np.int64)
    np.cumsum(segment_sums(sc.astype(np.int64), table.offsets), out=sc_off[1:])
    pin_off = np.zeros(table.n_sets + 1, dtype=np.int64)
    np.cumsum(segment_sums(pin.astype(np.int64), table.offsets), out=pin_off[1:])
    pinned_tokens = segment_sums(np.where(pin, table.tokens, 0), table.offsets)
    return Classified(neg, pin, sc_rows, sc_off, pin_rows, pin_off, pinned_tokens)


@dataclass
class PolicyRun:
    """One policy over one table: per-row result columns (grouped row order) and per-set
    facts. Reports are built from these on demand."""

    table: ItemTable
    policy: Policy
    budget: ContextBudget
    included: np.ndarray  # bool
    score: np.ndarray  # float64
    reason: np.ndarray  # int8 reason code
    detail_a: np.ndarray  # int64 (item_tokens / tokens / cap)
    detail_b: np.ndarray  # int64 (available_tokens / count)
    ref_row: np.ndarray  # int64 (survivor of a duplicate / first pinned row)
    position: np.ndarray  # int64 placed position within the set, -1 if excluded
    seq: np.ndarray  # int64 exclusion insertion sequence (stable tie-break)
    effective_target: np.ndarray  # per set
    error: list  # per set: None or the CupelError that set's run raised
    shortfalls: list  # per set: list of (kind, required, satisfied)
    cap_dropped: np.ndarray  # per set: phase-2 picks dropped by count caps

    def raise_first_error(self) -> None:
        for s, e in enumerate(self.error):
            if e is not None:
                raise e


def _slicer_args(slicer, table: ItemTable):
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
    return (mode, use_knapsack, bucket, kind_rank, q_has, q_req, q_cap, q_req_all, e_kind, e_req,
            cap_of_kind, throw, resort)


def run_policy(
    table: ItemTable,
    budget: ContextBudget,
    policy: Policy,
    *,
    classified: Classified | None = None,
    score_context: ScoreContext | None = None,
    max_cells: int = KNAPSACK_MAX_CELLS,
) -> PolicyRun:
    """Run one policy over every item set of ``table``. Per-set failures are recorded in
    ``PolicyRun.error`` (callers decide whether to raise)."""
    n = table.n
    n_sets = table.n_sets
    cls = classified or classify(table)
    ctx = score_context or ScoreContext(table, cls.sc_rows, cls.sc_offsets)

    errors: list = [None] * n_sets
    avail = budget.max_tokens - budget.output_reserve
    over = np.flatnonzero(cls.pinned_tokens > avail)
    for s in over:
        errors[s] = PinnedExceedsBudgetError(
            f"{_set_label(table, s)}pinned items require {int(cls.pinned_tokens[s])} tokens, but only "
            f"{avail} are available (max_tokens - output_reserve)"
        )

    included = np.zeros(n, dtype=np.bool_)
    score = np.zeros(n, dtype=np.float64)
    reason = np.full(n, -1, dtype=np.int8)
    detail_a = np.zeros(n, dtype=np.int64)
    detail_b = np.zeros(n, dtype=np.int64)
    ref_row = np.full(n, -1, dtype=np.int64)
    position = np.full(n, -1, dtype=np.int64)
    seq = np.full(n, -1, dtype=np.int64)

    # Classify exclusions
    neg_rows = np.flatnonzero(cls.negative)
    reason[neg_rows] = stages.R_NEGATIVE_TOKENS
    detail_a[neg_rows] = table.tokens[neg_rows]
    seq[neg_rows] = neg_rows

    # Score
    sc_score = ctx.score(policy.scorer) if len(cls.sc_rows) else np.zeros(0)
    sc_rows = cls.sc_rows
    sc_off = cls.sc_offsets

    # Deduplicate
    if policy.deduplication and len(sc_rows):
        winner = stages.dedup_survivors(table.content_id[sc_rows], sc_score, sc_off)
        losers = np.flatnonzero(winner != np.arange(len(sc_rows)))
        lrows = sc_rows[losers]
        reason[lrows] = stages.R_DEDUPLICATED
        score[lrows] = sc_score[losers]
        ref_row[lrows] = sc_rows[winner[losers]]
        seq[lrows] = n + losers
        keep = winner == np.arange(len(sc_rows))
        surv = np.flatnonzero(keep)
        surv_off = np.zeros(n_sets + 1, dtype=np.int64)
        np.cumsum(segment_sums(keep.astype(np.int64), sc_off), out=surv_off[1:])
    else:
        surv = np.arange(len(sc_rows))
        surv_off = sc_off

    # Sort
    surv_score = sc_score[surv]
    order = stages.sort_segments(surv_score, surv_off)
    cand_rows = sc_rows[surv[order]]
    cand_score = surv_score[order]

    # Effective budgets per set
    eff_targets = np.empty(n_sets, dtype=np.int64)
    for s in range(n_sets):
        eff_targets[s] = effective_budget(
            budget.max_tokens, budget.target_tokens, budget.output_reserve,
            budget.reserved_tokens, budget.estimation_safety_margin_percent,
            int(cls.pinned_tokens[s]),
        )[1]
    run_targets = eff_targets.copy()
    for s in over:
        run_targets[s] = 0

    # Slice
    (mode, use_knapsack, bucket, kind_rank, q_has, q_req, q_cap, q_req_all, e_kind, e_req,
     cap_of_kind, throw, resort) = _slicer_args(policy.slicer, table)
    cand_tok = table.tokens[cand_rows]
    cand_kind = table.kind_id[cand_rows]
    rank, s_err, s_err_a, s_err_b, satisfied, cap_dropped = sk.slice_segments(
        mode, cand_tok, cand_score, cand_kind, surv_off, run_targets, use_knapsack, int(bucket),
        int(max_cells), kind_rank, q_has, q_req, q_cap, q_req_all, e_kind, e_req, cap_of_kind,
        throw, resort,
    )
    shortfalls: list = [[] for _ in range(n_sets)]
    entries = getattr(policy.slicer, "entries", ())
    if len(entries):
        bad = np.argwhere(satisfied >= 0)
        for s, e in bad:
            shortfalls[s].append((entries[e].kind, entries[e].require_count, int(satisfied[s, e])))
    for s in np.flatnonzero(s_err):
        if errors[s] is not None:
            continue
        if s_err[s] == sk.ERR_SCARCITY:
            e = entries[int(s_err_a[s])]
            errors[s] = ScarcityError(
                f"{_set_label(table, s)}{policy.slicer.name}: kind {e.kind!r} requires "
                f"{e.require_count} items but only {int(s_err_b[s])} candidates are available"
            )
        else:
            errors[s] = TableTooLargeError(
                f"{_set_label(table, s)}knapsack table of {int(s_err_a[s])} candidates x "
                f"{int(s_err_b[s]) + 1} capacity cells exceeds the limit of {max_cells} cells; "
                "raise bucket_size or lower the target"
            )

    # Place (merge, overflow, placer) and every reason
    count_caps = isinstance(policy.slicer, (CountQuotaSlice, CountConstrainedKnapsackSlice))
    ov = {"throw": stages.OVERFLOW_THROW, "truncate": stages.OVERFLOW_TRUNCATE,
          "proceed": stages.OVERFLOW_PROCEED}[policy.overflow_strategy]
    pl = stages.PLACER_CHRONOLOGICAL if policy.placer == "chronological" else stages.PLACER_U_SHAPED
    p_err, p_err_a = stages.place_segments(
        n, table.tokens, table.kind_id, table.timestamp, table.timestamp_valid,
        cls.pin_rows, cls.pin_offsets, cand_rows, cand_score, surv_off, rank,
        eff_targets, np.full(n_sets, budget.target_tokens, dtype=np.int64),
        np.full(n_sets, budget.output_reserve, dtype=np.int64),
        ov, pl, count_caps, cap_of_kind,
        included, score, reason, detail_a, detail_b, ref_row, position, seq,
    )
    for s in np.flatnonzero(p_err):
        if errors[s] is None:
            errors[s] = BudgetOverflowError(
                f"{_set_label(table, s)}selected items require {int(p_err_a[s])} tokens, exceeding "
                f"the target budget of {budget.target_tokens} (overflow_strategy = 'throw')"
            )
    return PolicyRun(
        table, policy, budget, included, score, reason, detail_a, detail_b, ref_row, position,
        seq, eff_targets, errors, shortfalls, cap_dropped,
    )


def _set_label(table: ItemTable, s: int) -> str:
    if table.set_column is None:
        return ""
    return f"set {table.set_keys[s]!r}: "


class Pipeline:
    """A policy plus a budget-independent runner. The budget is always passed explicitly."""

    def __init__(self, policy: Policy):
        if not isinstance(policy, Policy):
            raise InvalidInputTypeError(f"Pipeline needs a Policy, got {type(policy).__name__}")
        self.policy = policy

    def __repr__(self) -> str:
        return f"Pipeline({self.policy!r})"

    def _run_single(self, items, budget, policy) -> PolicyRun:
        table = as_table(items)
        budget = _check_budget(budget)
        if table.n_sets != 1:
            raise CupelError(
                f"this table holds {table.n_sets} item sets; Pipeline runs one set at a time "
                "(select one, or use cupel_np.sweep for many sets)"
            )
        run = run_policy(table, budget, policy)
        run.raise_first_error()
        return run

    def run(self, items, budget: ContextBudget) -> list[ContextItem]:
        """The selected items in placed order."""
        return [inc.item for inc in self.dry_run(items, budget).included]

    def dry_run(self, items, budget: ContextBudget):
        """A full SelectionReport for one item set."""
        from .report import SelectionReport

        return SelectionReport(self._run_single(items, budget, self.policy), 0)

    def dry_run_with_policy(self, items, budget: ContextBudget, policy: Policy):
        """Like ``dry_run`` but with another policy's scorer, slicer, placer and flags."""
        from .report import SelectionReport

        if not isinstance(policy, Policy):
            raise InvalidInputTypeError(f"policy must be a Policy, got {type(policy).__name__}")
        return SelectionReport(self._run_single(items, budget, policy), 0)
