"""Budget simulation: which items sit on the margin, what is the smallest budget that includes
an item, and how selection changes along a ladder of budgets.

* ``get_marginal_items`` / ``find_min_budget_for`` are the spec's (and .NET's) methods for one
  item set: the same dry runs, guards and messages (``Pipeline`` exposes them as methods).
* ``budget_curves`` runs every (variant, budget) pair as one column of ONE sweep (base scores
  are computed once and shared) and reduces the ``[V*B, N]`` inclusion matrix to per-set
  curves and per-row ladder statistics with two kernels.
* ``min_budgets`` answers ``find_min_budget_for`` for every row of a corpus at once: all probes
  of one binary-search step, for every row of every set, are evaluated by one engine call over a
  derived table holding one copy of a set per distinct (set, probe budget) pair.

Inclusion is not monotonic in the budget (greedy skipping, quotas, count quotas); the curves
report where it is not instead of assuming it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import numpy as np
import pyarrow as pa

from cupel_np._jit import jit
from cupel_np.analysis._budget_probe import _CopiedScores, _ProbeTable
from cupel_np.analysis._curve_tables import repeat_strings, rows_table, strings_at
from cupel_np.engine.batch import run_sweep
from cupel_np.engine.groups import group_codes, group_plan
from cupel_np.engine.parallel import run_tasks, threads_for
from cupel_np.engine.runner import as_table, run_policy
from cupel_np.engine.scorers import ScoreContext
from cupel_np.engine.sweep_run import SweepRun, classify
from cupel_np.errors import (
    BudgetOverflowError,
    InvalidConfigError,
    InvalidInputTypeError,
    NonMonotonicSlicerError,
    PinnedExceedsBudgetError,
    ScarcityError,
    TableTooLargeError,
)
from cupel_np.model.budget import ContextBudget, require_budget_int
from cupel_np.model.grid import PolicySource, Sweep, Variant
from cupel_np.model.hints import Items, PolicyLike
from cupel_np.model.items import ContextItem, ItemTable
from cupel_np.model.policy import Policy
from cupel_np.model.slicers import CountConstrainedKnapsackSlice, CountQuotaSlice, QuotaSlice

if TYPE_CHECKING:
    from cupel_np.analysis.sensitivity import SweepResult


#: the spec's (and .NET's) guard messages, verbatim
MARGINAL_QUOTA_MESSAGE = (
    "GetMarginalItems requires monotonic item inclusion. QuotaSlice produces non-monotonic "
    "inclusion as budget changes shift percentage allocations."
)
FIND_MIN_MONOTONIC_MESSAGE = (
    "FindMinBudgetFor requires monotonic item inclusion. QuotaSlice and CountQuotaSlice produce "
    "non-monotonic inclusion as budget changes shift allocations. Use a GreedySlice or "
    "KnapsackSlice inner slicer for budget simulation."
)
TARGET_NOT_IN_ITEMS_MESSAGE = "targetItem must be an element of items"
CEILING_BELOW_TOKENS_MESSAGE = "searchCeiling must be >= targetItem.Tokens"

#: slicers ``find_min_budget_for`` / ``min_budgets`` refuse. The spec and .NET name QuotaSlice and
#: CountQuotaSlice; CountConstrainedKnapsackSlice is refused too (it enforces the same count
#: requirements and caps, so it is just as non-monotonic; the Rust crate refuses it as well).
FIND_MIN_REFUSED = (QuotaSlice, CountQuotaSlice, CountConstrainedKnapsackSlice)


def _policy_of(p) -> Policy:
    if isinstance(p, PolicySource):
        return p.policy
    if not isinstance(p, Policy):
        raise InvalidInputTypeError(f"policy must be a Policy or a Pipeline, got {type(p).__name__}")
    return p


def _single_set(items) -> ItemTable:
    table = as_table(items)
    if table.n_sets != 1:
        raise InvalidConfigError(
            f"this table holds {table.n_sets} item sets; budget simulation on a Pipeline runs one "
            "set at a time (use cupel_np.min_budgets / budget_curves for many sets)"
        )
    return table


def _item_at(items, table: ItemTable, row: int) -> ContextItem:
    """The caller's own ContextItem object when items were given as objects (.NET returns the
    same references), else the row rebuilt from the table."""
    if isinstance(items, (list, tuple)):
        return items[int(table.input_row[row])]
    return table.row(row)


# --------------------------------------------------------------------------- spec parity
def get_marginal_items(policy, items, budget: ContextBudget, slack_tokens: int) -> list[ContextItem]:
    """Items included at ``budget`` but not at ``budget`` reduced by ``slack_tokens`` (max and
    target both lowered, output reserve kept, no reserved slots or safety margin: the spec's
    formula and .NET's constructor call), in the full run's placed order. Items are compared by
    identity (row), not content."""
    policy = _policy_of(policy)
    table = _single_set(items)
    if not isinstance(budget, ContextBudget):
        raise InvalidInputTypeError(f"budget must be a ContextBudget, got {type(budget).__name__}")
    slack = require_budget_int("slack_tokens", slack_tokens)
    if isinstance(policy.slicer, QuotaSlice):
        raise NonMonotonicSlicerError(MARGINAL_QUOTA_MESSAGE)
    if slack == 0:
        return []
    from cupel_np.analysis.selection import SelectionReport

    cls = classify(table)
    ctx = ScoreContext(table, cls.sc_rows, cls.sc_offsets)
    primary = run_policy(table, budget, policy, classified=cls, score_context=ctx)
    primary.raise_first_error()
    reduced = ContextBudget(
        max_tokens=budget.max_tokens - slack,
        target_tokens=budget.target_tokens - slack,
        output_reserve=budget.output_reserve,
    )
    margin = run_policy(table, reduced, policy, classified=cls, score_context=ctx)
    margin.raise_first_error()
    placed = SelectionReport(primary, 0).included_rows
    return [_item_at(items, table, r) for r in placed if not margin.included[r]]


def _target_row(items, table: ItemTable, target_item) -> int:
    """The grouped row of ``target_item``: the same object (identity, as .NET's reference
    equality) in a sequence of ContextItems, or an input row number of an ItemTable."""
    if isinstance(items, (list, tuple)):
        for i, it in enumerate(items):
            if it is target_item:
                return int(np.flatnonzero(table.input_row == i)[0])
        raise InvalidConfigError(f"{TARGET_NOT_IN_ITEMS_MESSAGE} (got {target_item!r:.80})")
    if (
        isinstance(target_item, (int, np.integer))
        and not isinstance(target_item, bool)
        and 0 <= int(target_item) < table.n
    ):
        return int(np.flatnonzero(table.input_row == int(target_item))[0])
    raise InvalidConfigError(
        f"{TARGET_NOT_IN_ITEMS_MESSAGE} (with an ItemTable, target_item is an input row number "
        f"in [0, {table.n}); got {target_item!r:.80})"
    )


def _search_tokens(table: ItemTable, policy: Policy, cls) -> np.ndarray:
    """Per row the low end of its search: its tokens, or with groups its unit's (a member is
    selected only with its whole unit, so its minimum budget is the unit's: every member's
    search is the same search)."""
    if policy.groups is None:
        return table.tokens
    return group_plan(table, policy.groups, cls.sc_rows, cls.sc_offsets).unit_row_tokens


def find_min_budget_for(policy, items, target_item, search_ceiling: int) -> int | None:
    """The spec's binary search over ``[target_item.tokens, search_ceiling]`` with budgets
    ``max_tokens = target_tokens = mid``, checking ``low`` and then ``high`` at the end; None when
    the item is not selected at either. A failing dry run (e.g. pinned items above a probed
    budget) raises, as upstream's does. With groups (``Policy.groups``) the search is the item's
    unit's: from the unit's tokens, the same for every member."""
    policy = _policy_of(policy)
    table = _single_set(items)
    if isinstance(policy.slicer, FIND_MIN_REFUSED):
        raise NonMonotonicSlicerError(FIND_MIN_MONOTONIC_MESSAGE)
    row = _target_row(items, table, target_item)
    ceiling = require_budget_int("search_ceiling", search_ceiling)
    cls = classify(table)
    tokens = int(_search_tokens(table, policy, cls)[row])
    if ceiling < tokens:
        what = "targetItem.Tokens" if policy.groups is None else "the tokens of targetItem's unit"
        raise InvalidConfigError(f"{CEILING_BELOW_TOKENS_MESSAGE} (search_ceiling = {ceiling}, {what} = {tokens})")
    ctx = ScoreContext(table, cls.sc_rows, cls.sc_offsets)

    def included_at(b: int) -> bool:
        run = run_policy(table, ContextBudget(max_tokens=b, target_tokens=b), policy, classified=cls, score_context=ctx)
        run.raise_first_error()
        return bool(run.included[row])

    low, high = tokens, ceiling
    while high - low > 1:
        mid = low + (high - low) // 2
        if included_at(mid):
            high = mid
        else:
            low = mid
    if included_at(low):
        return low
    if included_at(high):
        return high
    return None


# --------------------------------------------------------------------------- ladders
def budget_ladder(
    lo: int, hi: int, steps: int, spacing: str = "geometric", output_reserve: int = 0
) -> list[ContextBudget]:
    """``steps`` budgets from ``lo`` to ``hi`` (both included) as the model window
    (``max_tokens``), each with ``target_tokens = max_tokens - output_reserve``. ``spacing`` is
    "geometric" (equal ratios; the usual 4k ... 200k question) or "linear"; values are rounded to
    integers and must stay distinct."""
    lo = require_budget_int("lo", lo)
    hi = require_budget_int("hi", hi)
    steps = require_budget_int("steps", steps)
    reserve = require_budget_int("output_reserve", output_reserve)
    if steps < 2:
        raise InvalidConfigError(f"budget_ladder: steps must be >= 2, got {steps}")
    if not lo < hi:
        raise InvalidConfigError(f"budget_ladder: lo ({lo}) must be < hi ({hi})")
    if lo < 0:
        raise InvalidConfigError(f"budget_ladder: lo is a budget (max_tokens) and must be >= 0, got {lo}")
    if reserve < 0 or reserve > lo:
        raise InvalidConfigError(f"budget_ladder: output_reserve must be in [0, lo = {lo}], got {reserve}")
    i = np.arange(steps, dtype=np.float64) / (steps - 1)
    if spacing == "geometric":
        if lo <= 0:
            raise InvalidConfigError(f"budget_ladder: geometric spacing needs lo >= 1, got {lo}")
        vals = np.rint(np.exp(math.log(lo) + i * (math.log(hi) - math.log(lo))))
    elif spacing == "linear":
        vals = np.rint(lo + i * (hi - lo))
    else:
        raise InvalidConfigError(f"budget_ladder: spacing must be 'geometric' or 'linear', got {spacing!r}")
    vals = vals.astype(np.int64)
    vals[0], vals[-1] = lo, hi
    if np.any(np.diff(vals) <= 0):
        dup = int(vals[1:][np.diff(vals) <= 0][0])
        raise InvalidConfigError(
            f"budget_ladder: {steps} {spacing} steps from {lo} to {hi} round to the same budget "
            f"{dup} twice; use fewer steps or a wider range"
        )
    return [ContextBudget(int(b), int(b) - reserve, reserve) for b in vals]


def _as_ladder(budgets) -> list[ContextBudget]:
    if isinstance(budgets, (str, bytes)) or not isinstance(budgets, Sequence):
        raise InvalidInputTypeError(
            f"budgets must be a list of ContextBudgets or integers (see budget_ladder), got {type(budgets).__name__}"
        )
    out = []
    for i, b in enumerate(budgets):
        if isinstance(b, ContextBudget):
            out.append(b)
        else:
            v = require_budget_int(f"budgets[{i}]", b)
            out.append(ContextBudget(v, v))
    if len(out) < 2:
        raise InvalidConfigError(f"budget_curves needs at least 2 budgets, got {len(out)}")
    for i in range(1, len(out)):
        if out[i].max_tokens <= out[i - 1].max_tokens:
            raise InvalidConfigError(
                f"budgets[{i}]: max_tokens {out[i].max_tokens} is not above budgets[{i - 1}]'s "
                f"{out[i - 1].max_tokens}; a ladder must strictly increase"
            )
    return out


# --------------------------------------------------------------------------- kernels
@jit
def _set_totals_kernel(included, failed, tokens, offsets, count_out, tokens_out):
    """Per (column, set): included count and tokens used (0 for failed cells)."""
    n_cols = included.shape[0]
    n_sets = offsets.shape[0] - 1
    for c in range(n_cols):
        for s in range(n_sets):
            if failed[c, s]:
                continue
            cnt = 0
            tok = 0
            for r in range(offsets[s], offsets[s + 1]):
                if included[c, r]:
                    cnt += 1
                    tok += tokens[r]
            count_out[c, s] = cnt
            tokens_out[c, s] = tok


@jit
def _ladder_kernel(included, failed, set_of_row, p, n_budgets, stable_from, flips, went_out):
    """Variant ``p``'s ladder statistics per row over columns ``p*B .. p*B+B-1`` (a failed cell
    counts as excluded): the first ladder index from which the row stays included (-1 if it is
    not included at the largest budget), the number of status changes, and whether it ever goes
    from included to excluded as the budget grows."""
    n = included.shape[1]
    base = p * n_budgets
    for r in range(n):
        s = set_of_row[r]
        prev = False
        last_out = -1
        nf = 0
        down = False
        for j in range(n_budgets):
            cur = included[base + j, r] and not failed[base + j, s]
            if not cur:
                last_out = j
            if j > 0 and cur != prev:
                nf += 1
                if prev:
                    down = True
            prev = cur
        stable_from[r] = last_out + 1 if last_out + 1 < n_budgets else -1
        flips[r] = nf
        went_out[r] = down


# --------------------------------------------------------------------------- curves
@dataclass
class BudgetCurves:
    """``curves``: one row per (variant, budget, set); ``rows``: one row per (input row,
    variant). ``run`` is the underlying sweep (columns ordered variant-major: column
    ``p * len(budgets) + j`` is variant ``p`` at ``budgets[j]``)."""

    labels: list[str]
    budgets: list[ContextBudget]
    curves: pa.Table
    rows: pa.Table
    run: object

    def sweep_result(self) -> SweepResult:
        """The underlying sweep as a SweepResult (one variant per (policy, budget) column)."""
        from cupel_np.analysis.sensitivity import SweepResult

        return SweepResult(cast("SweepRun", self.run))


def _set_keys_array(table: ItemTable) -> pa.Array:
    return pa.array(table.set_keys) if table.set_column else pa.nulls(table.n_sets, pa.string())


def budget_curves(
    items: Items,
    variants: Sequence[tuple[str, PolicyLike] | str] | Sweep,
    budgets: Sequence[ContextBudget | int],
    *,
    on_error: str = "collect",
) -> BudgetCurves:
    """Every variant at every budget of ``budgets`` (a list of ContextBudgets or integers, or
    ``budget_ladder(...)``), as ONE sweep of ``len(variants) * len(budgets)`` columns.

    ``variants``: ``(label, Policy | Pipeline)`` pairs, or preset names. A (variant, budget,
    set) whose dry run fails (e.g. pinned items above a small budget) has null counts and its
    error in the ``error`` column, and counts as "nothing included" in the row statistics;
    ``on_error="raise"`` raises the first such error instead."""
    from cupel_np.model.grid import as_variants
    from cupel_np.model.presets import preset

    if on_error not in ("raise", "collect"):
        raise InvalidConfigError(f"on_error must be 'raise' or 'collect', got {on_error!r}")
    table = as_table(items)
    ladder = _as_ladder(budgets)
    if isinstance(variants, (list, tuple)):
        variants = [(v, preset(v)) if isinstance(v, str) else v for v in variants]
    vs = as_variants(variants, ladder[0], allow_budget=False)
    if not vs:
        raise InvalidConfigError("budget_curves needs at least one variant")
    n_b = len(ladder)
    cols = [Variant(f"{v.label}@{b.max_tokens}", v.policy, b) for v in vs for b in ladder]
    run = run_sweep(table, cols)
    n_cols, n_sets = len(cols), table.n_sets
    failed = np.zeros((n_cols, n_sets), dtype=np.bool_)
    err_at: list[int] = []  # (column, set) flat positions of the failed runs, and their errors
    err_text: list[str] = []
    for c, errs in enumerate(run.errors):
        for s, e in errs.items():
            if on_error == "raise":
                raise e
            failed[c, s] = True
            err_at.append(c * n_sets + s)
            err_text.append(str(e))
    count = np.zeros((n_cols, n_sets), dtype=np.int64)
    used = np.zeros((n_cols, n_sets), dtype=np.int64)
    # per row x variant, in input row order: each variant's ladder statistics and its columns'
    # set totals are its own task on the engine's pool (each writes only its own arrays and
    # rows, so the answer is the same for any thread count)
    set_of_row = np.repeat(np.arange(n_sets, dtype=np.int64), np.diff(table.offsets))
    # (each variant's own arrays: Arrow may hold a NumPy array without copying it)
    stats = [
        (np.empty(table.n, dtype=np.int64), np.empty(table.n, dtype=np.int32), np.empty(table.n, dtype=np.bool_))
        for _ in vs
    ]

    def per_variant(p: int, _state: None) -> None:
        a, b = p * n_b, (p + 1) * n_b  # its columns (row slices of C-ordered matrices: contiguous)
        _set_totals_kernel(run.included[a:b], failed[a:b], table.tokens, table.offsets, count[a:b], used[a:b])
        _ladder_kernel(run.included, failed, set_of_row, p, n_b, *stats[p])

    run_tasks(len(vs), threads_for(None, table.n * n_cols), lambda: None, per_variant)
    target = np.repeat(np.array([b.target_tokens for b in ladder] * len(vs), dtype=np.int64), n_sets)
    used_flat = used.reshape(-1)
    util = np.divide(used_flat.astype(np.float64), target, out=np.zeros(used_flat.shape[0]), where=target > 0)
    fmask = failed.reshape(-1)
    set_col = table.set_column or "set"
    keys = _set_keys_array(table)
    curves = pa.table(
        {
            "variant": repeat_strings([v.label for v in vs], n_b * n_sets),
            "budget": pa.array(
                np.repeat(np.tile(np.array([b.max_tokens for b in ladder], dtype=np.int64), len(vs)), n_sets)
            ),
            "target_tokens": pa.array(target),
            set_col: keys.take(pa.array(np.tile(np.arange(n_sets, dtype=np.int64), n_cols))),
            "included_count": pa.array(count.reshape(-1), mask=fmask),
            "tokens_used": pa.array(used_flat, mask=fmask),
            "target_utilization": pa.array(util, mask=fmask),
            "error": strings_at(n_cols * n_sets, err_at, err_text),
        }
    )
    ladder_vals = np.array([b.max_tokens for b in ladder], dtype=np.int64)
    keys_or_none = keys if table.set_column else None
    rows = rows_table(table.input_row, set_of_row, keys_or_none, set_col, [v.label for v in vs], ladder_vals, stats)
    return BudgetCurves([v.label for v in vs], ladder, curves, rows, run)


# --------------------------------------------------------------------------- min budgets
# per-row outcome codes of min_budgets (the error find_min_budget_for would raise)
_E_NONE, _E_BUDGET, _E_PINNED, _E_OVERFLOW, _E_SCARCITY, _E_TABLE, _E_CEILING = range(7)
_ERROR_NAMES = {
    _E_BUDGET: "InvalidConfigError",
    _E_PINNED: "PinnedExceedsBudgetError",
    _E_OVERFLOW: "BudgetOverflowError",
    _E_SCARCITY: "ScarcityError",
    _E_TABLE: "TableTooLargeError",
    _E_CEILING: "InvalidConfigError",
}
_ERROR_CODES = (
    (PinnedExceedsBudgetError, _E_PINNED),
    (BudgetOverflowError, _E_OVERFLOW),
    (ScarcityError, _E_SCARCITY),
    (TableTooLargeError, _E_TABLE),
)


# what a row is in a probe: a slicing candidate, never included, or pinned
_K_CANDIDATE, _K_NEVER, _K_PINNED = 0, 1, 2


class _Prober:
    """Evaluates (row, budget) probes of one policy, all of a round in one engine call (or a
    few, for very large rounds).

    Everything that does not depend on the budget is settled once on the parent table: scores
    (computed once, gathered into the copies), deduplication (the losers are never included;
    the copies hold the survivors only, so the engine finds no duplicates), negative-token rows
    (never included). A copy of a set is its surviving scoreable rows plus ONE pinned row
    carrying the set's pinned tokens plus ``cap - b``; the copy runs at ``ContextBudget(cap,
    cap)``. With ``max = target`` and no reserve the slicer and placer then see exactly what a
    run at ``ContextBudget(b, b)`` sees: effective target ``max(0, b - pinned)``, the pinned
    check ``pinned > b``, the overflow check ``pinned + sliced > b`` and the same truncation.
    A pinned row is included exactly when its set's run does not fail."""

    def __init__(self, table: ItemTable, policy: Policy, max_rows: int):
        from cupel_np.engine.reasons import R_DEDUPLICATED

        self.table = table
        self.policy = policy
        self.max_rows = max_rows
        cls = self.cls = classify(table)
        self.ctx = ScoreContext(table, cls.sc_rows, cls.sc_offsets)
        self.sc_pos = np.full(table.n, -1, dtype=np.int64)
        self.sc_pos[cls.sc_rows] = np.arange(cls.sc_rows.shape[0])
        self.set_of_row = np.repeat(np.arange(table.n_sets, dtype=np.int64), np.diff(table.offsets))
        self.steps = 0
        self.engine_calls = 0
        self.probe_rows = 0
        # deduplication does not depend on the budget: one run at a budget every set's pinned
        # items fit tells the losers
        loser = np.zeros(table.n, dtype=np.bool_)
        if policy.deduplication and table.n:
            b0 = int(cls.pinned_tokens.max())
            run0 = run_policy(table, ContextBudget(b0, b0), policy, classified=cls, score_context=self.ctx)
            self.engine_calls += 1
            loser = run0.reason == R_DEDUPLICATED
        keep = ~cls.negative & ~cls.pinned & ~loser
        self.kept_rows = np.flatnonzero(keep)
        counts = np.diff(np.searchsorted(self.kept_rows, table.offsets))
        self.kept_off = np.zeros(table.n_sets + 1, dtype=np.int64)
        np.cumsum(counts, out=self.kept_off[1:])
        self.kept_index = np.full(table.n, -1, dtype=np.int64)
        self.kept_index[self.kept_rows] = np.arange(self.kept_rows.shape[0]) - np.repeat(self.kept_off[:-1], counts)
        self.role = np.full(table.n, _K_NEVER, dtype=np.int8)
        self.role[keep] = _K_CANDIDATE
        self.role[cls.pinned] = _K_PINNED
        # groups: units form in each copy from the parent's keys (members are scoreable rows,
        # so a copy's units are its set's; deduplication losers are units of one)
        self.groups = None
        if policy.groups is not None:
            self.groups = (policy.groups, group_codes(table, policy.groups)[1])

    def _run_copies(self, u_set, u_b, included_out, err_out) -> None:
        """One engine call over the copies of sets ``u_set`` at budgets ``u_b``."""
        size = np.diff(self.kept_off)[u_set] + 1
        off = np.zeros(u_set.shape[0] + 1, dtype=np.int64)
        np.cumsum(size, out=off[1:])
        # src[j]: parent row of derived row j, -1 for the pinned row closing each copy
        within = np.arange(off[-1], dtype=np.int64) - np.repeat(off[:-1], size)
        src = (
            self.kept_rows[
                np.minimum(np.repeat(self.kept_off[:-1][u_set], size) + within, max(self.kept_rows.shape[0] - 1, 0))
            ]
            if self.kept_rows.size
            else np.zeros(off[-1], np.int64)
        )
        src[off[1:] - 1] = -1
        cap = int(u_b.max())
        probe = _ProbeTable(self.table, src, off, self.cls.pinned_tokens[u_set] + (cap - u_b), self.groups)
        # duck-typed: the probe table and its scores carry exactly what classify / run_sweep read
        table = cast(ItemTable, probe)
        cls = classify(table)
        ctx = cast(ScoreContext, _CopiedScores(self.ctx, self.sc_pos[src[cls.sc_rows]]))
        run = run_sweep(table, [Variant("", self.policy, ContextBudget(cap, cap))], classified=cls, score_context=ctx)
        self.engine_calls += 1
        self.probe_rows += probe.n
        for c, e in run.errors[0].items():
            err_out[c] = next((code for typ, code in _ERROR_CODES if isinstance(e, typ)), _E_BUDGET)
        included_out[:] = run.included[0]

    def probe(self, rows: np.ndarray, budgets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each (row, budget): is the row included in its set's dry run at
        ``ContextBudget(budget, budget)``, and the error code of that dry run (0 = none)."""
        self.steps += 1
        k = rows.shape[0]
        inc = np.zeros(k, dtype=np.bool_)
        err = np.zeros(k, dtype=np.int8)
        neg = budgets < 0
        err[neg] = _E_BUDGET  # ContextBudget rejects a negative max_tokens before any run
        ok = np.flatnonzero(~neg)
        if ok.size == 0:
            return inc, err
        r, b = rows[ok], budgets[ok]
        s = self.set_of_row[r]
        order = np.lexsort((b, s))
        s_o, b_o = s[order], b[order]
        new = np.ones(order.shape[0], dtype=np.bool_)
        new[1:] = (s_o[1:] != s_o[:-1]) | (b_o[1:] != b_o[:-1])
        copy_of = np.empty(order.shape[0], dtype=np.int64)
        copy_of[order] = np.cumsum(new) - 1
        u_set, u_b = s_o[new], b_o[new]
        size = np.diff(self.kept_off)[u_set] + 1
        off = np.zeros(u_set.shape[0] + 1, dtype=np.int64)
        np.cumsum(size, out=off[1:])
        included = np.zeros(int(off[-1]), dtype=np.bool_)
        copy_err = np.zeros(u_set.shape[0], dtype=np.int8)
        # copies are independent: evaluate them in chunks of at most max_rows derived rows
        # (one engine call per chunk; one chunk unless the round is very large)
        cuts = [0]
        while cuts[-1] < u_set.shape[0]:
            nxt = int(np.searchsorted(off, off[cuts[-1]] + self.max_rows, side="right")) - 1
            cuts.append(max(nxt, cuts[-1] + 1))
        for a, z in zip(cuts[:-1], cuts[1:]):
            self._run_copies(u_set[a:z], u_b[a:z], included[off[a] : off[z]], copy_err[a:z])
        e = copy_err[copy_of]
        role = self.role[r]
        cand = role == _K_CANDIDATE
        got = np.zeros(r.shape[0], dtype=np.bool_)
        got[cand] = included[off[copy_of[cand]] + self.kept_index[r[cand]]]
        got[role == _K_PINNED] = True
        got[e != 0] = False
        inc[ok] = got
        err[ok] = e
        return inc, err


def min_budgets(
    items: Items,
    policy: PolicyLike,
    search_ceiling: int,
    *,
    max_probe_rows: int = 4_000_000,
    stats: dict | None = None,
) -> pa.Table:
    """``find_min_budget_for`` for every row of every item set, without a Python call per row
    or per probe: each binary-search step evaluates the probes of all rows in one engine call
    (``O(log search_ceiling)`` calls in all).

    Returns one row per input row: the set key (when the table has a set column),
    ``input_row``, ``min_budget`` (null when the row is not selectable within the ceiling, or
    when find_min_budget_for would raise), ``error`` (the class find_min_budget_for would raise
    for that row, else null) and ``error_budget`` (the probed budget whose dry run failed).
    A step whose derived table would exceed ``max_probe_rows`` rows is run in chunks of whole
    set copies (bounded memory; one engine call per chunk). ``stats`` (a dict) receives
    ``steps`` (probe rounds: the search steps plus at most two final checks), ``engine_calls``
    and ``probe_rows`` (rows the engine ran)."""
    policy = _policy_of(policy)
    table = as_table(items)
    if isinstance(policy.slicer, FIND_MIN_REFUSED):
        raise NonMonotonicSlicerError(FIND_MIN_MONOTONIC_MESSAGE)
    ceiling = require_budget_int("search_ceiling", search_ceiling)
    n = table.n
    max_rows = require_budget_int("max_probe_rows", max_probe_rows)
    if max_rows < 1:
        raise InvalidConfigError(f"max_probe_rows must be >= 1, got {max_rows}")
    prober = _Prober(table, policy, max_rows)
    low = _search_tokens(table, policy, prober.cls).copy()
    high = np.full(n, ceiling, dtype=np.int64)
    result = np.full(n, -1, dtype=np.int64)
    found = np.zeros(n, dtype=np.bool_)
    err = np.zeros(n, dtype=np.int8)
    err_budget = np.zeros(n, dtype=np.int64)
    err[ceiling < low] = _E_CEILING
    low_moved = np.zeros(n, dtype=np.bool_)
    high_moved = np.zeros(n, dtype=np.bool_)

    def fail(rows, codes, budgets):
        bad = codes != 0
        err[rows[bad]] = codes[bad]
        err_budget[rows[bad]] = budgets[bad]
        return ~bad

    # the search: every row still searching probes its midpoint; one engine call per step
    while True:
        act = np.flatnonzero((err == 0) & (high - low > 1))
        if act.size == 0:
            break
        mid = low[act] + (high[act] - low[act]) // 2
        inc, codes = prober.probe(act, mid)
        good = fail(act, codes, mid)
        a, m, i = act[good], mid[good], inc[good]
        high[a[i]] = m[i]
        high_moved[a[i]] = True
        low[a[~i]] = m[~i]
        low_moved[a[~i]] = True
    # the final checks at low, then high. A bound the search moved was itself probed (low:
    # not included; high: included) and dry runs are deterministic, so only an unmoved bound
    # needs a run.
    live = err == 0
    ok_low = live & low_moved
    need_low = np.flatnonzero(live & ~low_moved)
    if need_low.size:
        inc, codes = prober.probe(need_low, low[need_low])
        good = fail(need_low, codes, low[need_low])
        hit = need_low[good & inc]
        result[hit], found[hit] = low[hit], True
        ok_low[need_low[good & ~inc]] = True
    # rows whose low check failed cleanly: high
    moved = np.flatnonzero(ok_low & high_moved)
    result[moved], found[moved] = high[moved], True
    need_high = np.flatnonzero(ok_low & ~high_moved)
    if need_high.size:
        inc, codes = prober.probe(need_high, high[need_high])
        good = fail(need_high, codes, high[need_high])
        hit = need_high[good & inc]
        result[hit], found[hit] = high[hit], True
    if stats is not None:
        stats["steps"] = prober.steps
        stats["engine_calls"] = prober.engine_calls
        stats["probe_rows"] = prober.probe_rows
    # back to input row order
    to_input = np.empty(n, dtype=np.int64)
    to_input[table.input_row] = np.arange(n, dtype=np.int64)
    names = np.array([None] + [_ERROR_NAMES[c] for c in range(1, 7)], dtype=object)
    e_in = err[to_input]
    cols = {}
    if table.set_column:
        set_of_row = prober.set_of_row[to_input]
        cols[table.set_column] = _set_keys_array(table).take(pa.array(set_of_row))
    cols["input_row"] = pa.array(np.arange(n, dtype=np.int64))
    cols["min_budget"] = pa.array(result[to_input], mask=~found[to_input])
    cols["error"] = pa.array(names[e_in.astype(np.int64)], pa.string())
    cols["error_budget"] = pa.array(err_budget[to_input], mask=(e_in == 0) | (e_in == _E_CEILING))
    return pa.table(cols)
