"""Report analytics: the four upstream metrics per report, and the same metrics as columns
of a sweep computed on its result matrices.

Per report (functions here, also methods of ``SelectionReport``):

* ``budget_utilization(report, budget)``: included tokens / ``budget.max_tokens`` (the spec's
  denominator, ``testing/vocabulary.md`` PD-2). ``max_tokens = 0``: NaN (upstream divides and
  gets NaN; a budget with ``max_tokens = 0`` can only include zero-token items).
* ``kind_diversity(report)``: distinct kinds among the included items, kinds compared as the
  spec compares them (ASCII case-insensitively).
* ``timestamp_coverage(report)``: share of included items with a timestamp; 0.0 when none
  is included.
* ``quota_utilization(report, policy, budget)``: one ``KindQuotaUtilization`` per quota
  constraint of a quota or count-quota slicer, sorted by kind (see the function).

Per sweep (``sweep_columns`` / ``quota_columns``): the same values for every (variant, set)
from the ``[V, N]`` inclusion matrix with segment sums and bincounts, one vectorized pass per
variant and never a Python loop per set.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from cupel_np.engine.sweep_run import segment_sums
from cupel_np.model.budget import ContextBudget
from cupel_np.model.policy import CountConstrainedKnapsackSlice, CountQuotaSlice, Policy, QuotaSlice
from cupel_np.text import ascii_fold

#: ``KindQuotaUtilization.mode`` values
MODE_PERCENTAGE = "percentage"
MODE_COUNT = "count"


@dataclass(frozen=True)
class KindQuotaUtilization:
    """How far one quota constraint's kind got towards its cap.

    ``actual``: percentage mode, the kind's included tokens as a percentage of
    ``budget.target_tokens`` (0.0 when the target is 0); count mode, the number of included
    items of the kind. ``utilization``: ``actual / cap`` clamped to [0, 1]; 0.0 when ``cap`` is
    0; None when the count entry has no cap (``cap`` None, a cupel_np extension)."""

    kind: str
    mode: str
    require: float
    cap: float | None
    actual: float
    utilization: float | None


def _included_items(report) -> list:
    return [inc.item for inc in report.included]


def budget_utilization(report, budget: ContextBudget) -> float:
    """Included tokens divided by ``budget.max_tokens`` (NaN when ``max_tokens`` is 0).

    Can exceed 1.0 only if the included items exceed the hard ceiling."""
    used = sum(it.tokens for it in _included_items(report))
    if budget.max_tokens == 0:
        return math.nan
    return float(used) / float(budget.max_tokens)


def kind_diversity(report) -> int:
    """Number of distinct kinds among the included items (ASCII case-insensitive); 0 when empty."""
    return len({ascii_fold(it.kind) for it in _included_items(report)})


def timestamp_coverage(report) -> float:
    """Share of included items that carry a timestamp (0.0 when nothing is included)."""
    items = _included_items(report)
    if not items:
        return 0.0
    return sum(1 for it in items if it.timestamp is not None) / len(items)


def quota_constraints(policy: Policy | object) -> list[tuple[str, str, float, float | None]]:
    """``(kind, mode, require, cap)`` of every quota constraint of a policy's slicer (or of a
    slicer spec), in the policy's order; empty for slicers without quotas."""
    slicer = getattr(policy, "slicer", policy)
    if isinstance(slicer, QuotaSlice):
        return [(q.kind, MODE_PERCENTAGE, float(q.require), float(q.cap)) for q in slicer.quotas]
    if isinstance(slicer, (CountQuotaSlice, CountConstrainedKnapsackSlice)):
        return [
            (e.kind, MODE_COUNT, float(e.require_count), None if e.cap_count is None else float(e.cap_count))
            for e in slicer.entries
        ]
    return []


def _utilization(actual: float, cap: float | None) -> float | None:
    if cap is None:
        return None
    if cap == 0.0:
        return 0.0
    return min(max(actual / cap, 0.0), 1.0)


def quota_utilization(report, policy: Policy | object, budget: ContextBudget) -> list[KindQuotaUtilization]:
    """One row per quota constraint of ``policy``'s slicer, sorted by kind (ordinal).

    Percentage constraints (``QuotaSlice``): ``actual = kind tokens / budget.target_tokens *
    100`` (0.0 when ``target_tokens`` is 0). Count constraints (``CountQuotaSlice``,
    ``CountConstrainedKnapsackSlice``): ``actual`` = included items of the kind. Kinds are
    compared ASCII case-insensitively. Upstream's definition, edge cases included."""
    tokens: dict[str, int] = {}
    count: dict[str, int] = {}
    for it in _included_items(report):
        k = ascii_fold(it.kind)
        tokens[k] = tokens.get(k, 0) + it.tokens
        count[k] = count.get(k, 0) + 1
    target = float(budget.target_tokens)
    out = []
    for kind, mode, require, cap in quota_constraints(policy):
        k = ascii_fold(kind)
        if mode == MODE_PERCENTAGE:
            actual = 0.0 if target == 0.0 else float(tokens.get(k, 0)) / target * 100.0
        else:
            actual = float(count.get(k, 0))
        out.append(KindQuotaUtilization(kind, mode, require, cap, actual, _utilization(actual, cap)))
    out.sort(key=lambda r: r.kind)
    return out


# --------------------------------------------------------------------------- sweep columns
def _distinct_per_set(set_of: np.ndarray, key: np.ndarray, n_keys: int, n_sets: int) -> np.ndarray:
    """Per set, the number of distinct ``key`` values among the rows ``set_of`` assigns to it."""
    if set_of.size == 0:
        return np.zeros(n_sets, dtype=np.int64)
    cells = n_sets * n_keys
    if cells <= max(4 * set_of.size, 1 << 16):  # a bitmap per (set, key): no sort
        seen = np.zeros(cells, dtype=np.bool_)
        seen[set_of * n_keys + key] = True
        return np.count_nonzero(seen.reshape(n_sets, n_keys), axis=1).astype(np.int64)
    u = np.unique(set_of * n_keys + key)
    return np.bincount(u // n_keys, minlength=n_sets).astype(np.int64)


def set_of_rows(table) -> np.ndarray:
    """The set index of every (grouped) row of ``table``."""
    return np.repeat(np.arange(table.n_sets, dtype=np.int64), np.diff(table.offsets))


def sweep_columns(run, set_of: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """``[V, S]`` matrices of the analytics of every (variant, set) of a ``SweepRun``:
    ``included_count``, ``tokens_used`` (exact int64), ``timestamped_count``,
    ``kind_diversity``, ``budget_utilization`` (NaN where ``max_tokens`` is 0),
    ``timestamp_coverage`` and ``tokens_over_budget`` (the ``OverflowEvent`` excess under the
    proceed strategy, else 0). Failed cells hold whatever the matrices say: mask them."""
    t = run.table
    n_sets, n_var = t.n_sets, run.n_variants
    seg = set_of_rows(t) if set_of is None else set_of
    n_kinds = len(t.kind_vocab) + 1
    tsv = t.timestamp_valid
    cnt = np.empty((n_var, n_sets), dtype=np.int64)
    tok = np.empty((n_var, n_sets), dtype=np.int64)
    tsc = np.empty((n_var, n_sets), dtype=np.int64)
    div = np.empty((n_var, n_sets), dtype=np.int64)
    cells = n_sets * n_kinds * 2
    if cells <= max(4 * t.n, 1 << 16):
        # one code per row, (set, kind, timestamped), shared by the variants: per variant one
        # gather and one bincount give counts, timestamped counts and distinct kinds per set
        code = (seg * n_kinds + t.kind_id) * 2 + tsv
        for v in range(n_var):  # one vectorised pass per variant, never per set
            inc = run.included[v]
            per = np.bincount(code[inc], minlength=cells).reshape(n_sets, n_kinds, 2)
            by_kind = per.sum(axis=2)
            cnt[v] = by_kind.sum(axis=1)
            tsc[v] = per[:, :, 1].sum(axis=1)
            div[v] = np.count_nonzero(by_kind, axis=1)
            tok[v] = segment_sums(np.where(inc, t.tokens, 0), t.offsets)
    else:  # very many sets: gathers and a sort instead of a (set, kind) grid
        for v in range(n_var):
            inc = run.included[v]
            seg_inc = seg[inc]
            cnt[v] = np.bincount(seg_inc, minlength=n_sets)
            tok[v] = segment_sums(np.where(inc, t.tokens, 0), t.offsets)
            tsc[v] = np.bincount(seg_inc[tsv[inc]], minlength=n_sets)
            div[v] = _distinct_per_set(seg_inc, t.kind_id[inc], n_kinds, n_sets)
    max_t = np.array([var.budget.max_tokens for var in run.variants], dtype=np.int64)[:, None]
    target = np.array([var.budget.target_tokens for var in run.variants], dtype=np.int64)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        bu = np.where(max_t > 0, tok / np.where(max_t > 0, max_t, 1), np.nan)
        cov = np.where(cnt > 0, tsc / np.maximum(cnt, 1), 0.0)
    proceed = np.array([var.policy.overflow_strategy == "proceed" for var in run.variants], dtype=np.bool_)[:, None]
    over = np.where(proceed, np.maximum(tok - target, 0), 0)
    return {
        "included_count": cnt,
        "tokens_used": tok,
        "timestamped_count": tsc,
        "kind_diversity": div,
        "budget_utilization": bu,
        "timestamp_coverage": cov,
        "tokens_over_budget": over,
    }


def quota_columns(run, set_of: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Long-form quota utilization of every (variant, set, constraint) of a ``SweepRun``, as
    flat arrays ``variant`` (index), ``set`` (index), ``kind``, ``mode``, ``require``, ``cap``
    (NaN: no cap), ``actual``, ``utilization`` (NaN: no cap). Constraints of a variant are
    sorted by kind, like ``quota_utilization``; variants without quotas give no rows."""
    t = run.table
    n_sets = t.n_sets
    parts: dict[str, list] = {
        k: [] for k in ("variant", "set", "kind", "mode", "require", "cap", "actual", "utilization")
    }
    for v, var in enumerate(run.variants):
        cons = sorted(quota_constraints(var.policy), key=lambda c: c[0])
        if not cons:
            continue
        inc = run.included[v]
        target = float(var.budget.target_tokens)
        actual = np.empty((len(cons), n_sets))
        util = np.empty((len(cons), n_sets))
        for c, (kind, mode, _require, cap) in enumerate(cons):  # per constraint: one pass over the rows
            k = t.kind_ids_for(kind)
            sel = inc & (t.kind_id == k) if k >= 0 else np.zeros(t.n, dtype=np.bool_)
            if mode == MODE_PERCENTAGE:
                ktok = segment_sums(np.where(sel, t.tokens, 0), t.offsets)
                actual[c] = 0.0 if target == 0.0 else ktok / target * 100.0
            else:
                actual[c] = segment_sums(sel.astype(np.int64), t.offsets)
            if cap is None:
                util[c] = np.nan
            elif cap == 0.0:
                util[c] = 0.0
            else:
                util[c] = np.clip(actual[c] / cap, 0.0, 1.0)
        # rows ordered (set, constraint) within the variant
        n_c = len(cons)
        parts["variant"].append(np.full(n_sets * n_c, v, dtype=np.int64))
        parts["set"].append(np.repeat(np.arange(n_sets, dtype=np.int64), n_c))
        parts["kind"].append(np.tile(np.array([c[0] for c in cons], dtype=object), n_sets))
        parts["mode"].append(np.tile(np.array([c[1] for c in cons], dtype=object), n_sets))
        parts["require"].append(np.tile(np.array([c[2] for c in cons], dtype=np.float64), n_sets))
        parts["cap"].append(np.tile(np.array([np.nan if c[3] is None else c[3] for c in cons]), n_sets))
        parts["actual"].append(actual.T.reshape(-1))
        parts["utilization"].append(util.T.reshape(-1))
    empty = {"kind": object, "mode": object, "variant": np.int64, "set": np.int64}
    return {k: (np.concatenate(v) if v else np.zeros(0, dtype=empty.get(k, np.float64))) for k, v in parts.items()}
