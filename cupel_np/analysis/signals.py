"""Checks that a sweep's numbers mean what they seem to: scorers that carry no signal, and
slicer settings that leave nothing to select.

* **Constant scorers.** A scorer that gives one value to every scoreable item of a set (recency
  on items without timestamps, ``tag`` on items without tags, a column that is null or constant
  in the set) adds nothing to a composite there, and a policy whose every scorer is constant on
  a set ranks that set by input order: whatever it keeps, it keeps by position. Only sets with
  at least two scoreable items count (one item is trivially "constant"); a NaN score equals
  only NaN.
* **Knapsack footguns.** The knapsack slicer works in buckets of ``bucket_size`` tokens: its
  capacity is ``effective target // bucket_size`` and an item weighs ``ceil(tokens /
  bucket_size)``. A bucket above a set's effective target leaves it **zero capacity** (the
  variant can keep nothing), and a remainder ``effective target % bucket_size`` of more than
  ``ROUNDING_LOSS_SHARE`` of the target is capacity lost to rounding. Checked for the
  ``knapsack`` and ``count_constrained_knapsack`` slicers (a quota slicer's inner knapsack
  works on per-kind shares of the target and is not checked).
* **Empty selections.** A variant that keeps no scoreable item of a set although one of them
  fits the set's effective target alone has *selected nothing*; the run does not fail, so it is
  counted here instead of hiding among the exclusion reasons.

Everything is computed from the sweep's shared base score columns and per-set counts: one
reduction per base scorer and per variant, never a loop per set.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cupel_np.engine.scorers import ScoreContext
from cupel_np.engine.sweep_run import classify
from cupel_np.model.policy import Policy
from cupel_np.model.scorers import CompositeScorer, Scorer
from cupel_np.model.slicers import CountConstrainedKnapsackSlice, KnapsackSlice

__all__ = [
    "ROUNDING_LOSS_SHARE",
    "Constancy",
    "KnapsackChecks",
    "constant_sets",
    "knapsack_checks",
    "policy_scorer_names",
    "policy_terms",
    "scorer_constancy",
    "scorer_name",
    "table_constancy",
    "token_counter_of",
]

#: the schema metadata keys an items file may carry naming its token counter and calibration
TOKEN_COUNTER_KEY = b"cupel_np.token_counter"
TOKEN_CALIBRATION_KEY = b"cupel_np.token_calibration"


def token_counter_of(metadata) -> str:
    """What the pages and tables of outcome metrics say about the tokens: the counter (and
    calibration) an items file's Arrow / Parquet schema metadata names under
    ``cupel_np.token_counter`` / ``cupel_np.token_calibration``, else that the counts are the
    items' own ``tokens`` column with no counter recorded."""
    md = dict(metadata or {})
    name = md.get(TOKEN_COUNTER_KEY) or md.get(b"token_counter")
    if not name:
        return "the items' tokens column (no token counter recorded)"
    out = f"counted by {name.decode('utf-8', 'replace')}"
    cal = md.get(TOKEN_CALIBRATION_KEY)
    return out + (f", calibrated: {cal.decode('utf-8', 'replace')}" if cal else ", not calibrated")


#: a knapsack losing more than this share of a set's effective target to rounding is flagged
ROUNDING_LOSS_SHARE = 0.25


def scorer_name(scorer: Scorer) -> str:
    """The scorer's name as the leaderboard, the pages and the warnings write it: its type
    (``recency``, ``kind``, a registered name) or ``column:<column>`` for a column scorer."""
    return str(scorer.type_name or type(scorer).__name__)


def policy_terms(policy: Policy) -> list[tuple[Scorer, float]]:
    sc = policy.scorer
    if isinstance(sc, CompositeScorer):
        return list(zip((s for s, _ in sc.entries), sc.normalized_weights()))
    return [(sc, 1.0)]


def policy_scorer_names(policy: Policy) -> str:
    """A policy's scorers with their normalised weights, ``column:similarity 0.62 + recency 0.38``."""
    return " + ".join(f"{scorer_name(s)} {w:.2f}" for s, w in policy_terms(policy))


def constant_sets(scores: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For one score column over the scoreable rows (grouped by ``offsets``): per set, whether
    it holds at least two rows (``checked``) and whether all of them have one value
    (``constant``, only where checked; a NaN equals only NaN)."""
    counts = np.diff(offsets)
    checked = counts >= 2
    constant = np.zeros(counts.shape[0], dtype=np.bool_)
    if checked.any():
        x = np.asarray(scores, dtype=np.float64)
        nan = np.isnan(x)
        hi = _reduce(np.fmax, x, offsets, checked)  # NaN left out: NaN only when all are NaN
        lo = _reduce(np.fmin, x, offsets, checked)
        n_nan = _reduce(np.add, nan.astype(np.int64), offsets, checked)
        constant[checked] = (n_nan == counts[checked]) | ((hi == lo) & (n_nan == 0))
    return checked, constant


def _reduce(ufunc, x: np.ndarray, offsets: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``ufunc.reduceat`` over the non-empty sets picked by ``mask`` (rows of the others left out)."""
    counts = np.diff(offsets)
    sub = x[np.repeat(mask, counts)]
    starts = np.concatenate([[0], np.cumsum(counts[mask])[:-1]]).astype(np.int64)
    return ufunc.reduceat(sub, starts)


@dataclass
class Constancy:
    """Constant scorers of a sweep. ``names``: the distinct base scorers (first use order);
    ``constant``: ``[K, S]`` bool, scorer k gave one value to every scoreable item of set s;
    ``checked``: ``[S]`` sets with at least two scoreable items; ``variant_terms``: per variant
    the indices of its scorers; ``all_constant``: ``[V, S]`` every scorer of the variant was
    constant on the set (it ranks that set by input order)."""

    names: list[str]
    constant: np.ndarray
    checked: np.ndarray
    variant_terms: list[list[int]]
    all_constant: np.ndarray

    def sets_constant(self, part: np.ndarray | None = None) -> dict[str, int]:
        """Scorer name -> sets (of ``part``, default all) on which it was constant; only
        scorers constant on at least one set."""
        m = self.constant if part is None else self.constant[:, part]
        out: dict[str, int] = {}
        for k, name in enumerate(self.names):
            n = int(m[k].sum())
            if n:
                out[name] = out.get(name, 0) + n
        return out

    def sets_checked(self, part: np.ndarray | None = None) -> int:
        return int(self.checked.sum() if part is None else self.checked[part].sum())

    def variant_constant(self, v: int, part: np.ndarray | None = None) -> dict[str, int]:
        """Variant ``v``'s scorers that were constant, with their set counts (of ``part``)."""
        m = self.constant if part is None else self.constant[:, part]
        out = {}
        for k in self.variant_terms[v]:
            n = int(m[k].sum())
            if n:
                out[self.names[k]] = n
        return out

    def summary_line(self, part: np.ndarray | None = None) -> str | None:
        """``constant scorers: recency on 300/300 sets, column:x on 2/300 sets`` or None."""
        found = self.sets_constant(part)
        if not found:
            return None
        n = self.sets_checked(part)
        return "constant scorers: " + ", ".join(f"{k} on {c:,}/{n:,} sets" for k, c in found.items())


def _base_scorers(policies: list[Policy]) -> tuple[list[Scorer], list[list[int]]]:
    """Distinct base scorers in order of first use (the sweep's base columns) and each
    policy's indices into them."""
    cols: dict[Scorer, int] = {}
    terms: list[list[int]] = []
    for pol in policies:
        ks = []
        for child, _w in policy_terms(pol):
            if child not in cols:
                cols[child] = len(cols)
            ks.append(cols[child])
        terms.append(ks)
    return list(cols), terms


def scorer_constancy(result) -> Constancy:
    """The constant scorers of a SweepResult (its run's shared base score columns)."""
    run = result.run
    policies = [v.policy for v in result.variants]
    scorers, terms = _base_scorers(policies)
    base = run.plan.base
    off = np.asarray(run.classified.sc_offsets, dtype=np.int64)
    n_sets = off.shape[0] - 1
    constant = np.zeros((len(scorers), n_sets), dtype=np.bool_)
    checked = np.diff(off) >= 2
    for k in range(len(scorers)):  # one reduction per base scorer
        checked, constant[k] = constant_sets(base[:, k], off)
    all_c = np.zeros((len(policies), n_sets), dtype=np.bool_)
    for v, ks in enumerate(terms):
        all_c[v] = np.logical_and.reduce(constant[ks], axis=0) if ks else False
    return Constancy([scorer_name(s) for s in scorers], constant, checked, terms, all_c)


def table_constancy(table, policies: list[Policy]) -> Constancy:
    """``scorer_constancy`` without a sweep: the base scorers of ``policies`` evaluated on an
    ItemTable (each distinct scorer once)."""
    scorers, terms = _base_scorers(policies)
    cls = classify(table)
    off = np.asarray(cls.sc_offsets, dtype=np.int64)
    ctx = ScoreContext(table, cls.sc_rows, off)
    constant = np.zeros((len(scorers), table.n_sets), dtype=np.bool_)
    checked = np.diff(off) >= 2
    for k, sc in enumerate(scorers):
        checked, constant[k] = constant_sets(ctx.score(sc), off)
    all_c = np.zeros((len(policies), table.n_sets), dtype=np.bool_)
    for v, ks in enumerate(terms):
        all_c[v] = np.logical_and.reduce(constant[ks], axis=0) if ks else False
    return Constancy([scorer_name(s) for s in scorers], constant, checked, terms, all_c)


@dataclass
class KnapsackChecks:
    """Per (variant, set) ``[V, S]``: ``capacity`` (knapsack buckets, -1 for other slicers),
    ``rounding_loss`` (share of the effective target lost to the bucket remainder, NaN for
    other slicers or a zero target), ``zero_capacity`` and ``rounding_flag`` (over
    ``ROUNDING_LOSS_SHARE``), and ``selected_nothing`` (no scoreable item kept although one
    fits the effective target alone; never on a failed cell); ``bucket`` per variant (0: not a
    knapsack)."""

    bucket: np.ndarray
    capacity: np.ndarray
    rounding_loss: np.ndarray
    zero_capacity: np.ndarray
    rounding_flag: np.ndarray
    selected_nothing: np.ndarray

    def lines(self, labels: list[str], part: np.ndarray | None = None) -> list[str]:
        """One line per flagged variant (the summary and the pages print them)."""
        out = []
        sl = slice(None) if part is None else part
        for v, label in enumerate(labels):
            z = int(self.zero_capacity[v, sl].sum())
            r = int(self.rounding_flag[v, sl].sum())
            e = int(self.selected_nothing[v, sl].sum())
            if z:
                out.append(
                    f"{label}: knapsack bucket {int(self.bucket[v])} is above the effective target on {z:,} sets "
                    "(zero capacity: it can keep nothing there)"
                )
            if r:
                out.append(
                    f"{label}: knapsack bucket {int(self.bucket[v])} loses more than "
                    f"{ROUNDING_LOSS_SHARE:.0%} of the target to rounding on {r:,} sets"
                )
            if e:
                out.append(f"{label}: selected nothing from {e:,} non-empty sets (an item fitted the target)")
        return out


def knapsack_checks(result) -> KnapsackChecks:
    """Knapsack capacity, rounding loss and empty selections of a SweepResult (module docstring)."""
    run = result.run
    t = result.table
    cls = run.classified
    n_var, n_sets = len(result.variants), t.n_sets
    eff = np.asarray(run.effective_target, dtype=np.int64)
    bucket = np.zeros(n_var, dtype=np.int64)
    for v, var in enumerate(result.variants):
        sl = var.policy.slicer
        if isinstance(sl, (KnapsackSlice, CountConstrainedKnapsackSlice)):
            bucket[v] = int(sl.bucket_size)
    off = np.asarray(cls.sc_offsets, dtype=np.int64)
    has_items = np.diff(off) > 0
    is_k = bucket > 0
    b = np.where(is_k, bucket, 1)[:, None]
    capacity = np.where(is_k[:, None], eff // b, -1)
    rem = np.where(is_k[:, None], eff % b, 0)
    loss = np.divide(rem, eff, out=np.full(eff.shape, np.nan), where=(eff > 0) & is_k[:, None])
    ok = ~result.failed
    zero = is_k[:, None] & (eff > 0) & (capacity == 0) & has_items[None, :] & ok
    rflag = is_k[:, None] & (capacity > 0) & (loss > ROUNDING_LOSS_SHARE) & has_items[None, :] & ok
    # smallest scoreable item of each set, and how many scoreable items each variant kept
    tok = np.asarray(t.tokens, dtype=np.int64)[cls.sc_rows]
    smallest = np.full(n_sets, np.iinfo(np.int64).max, dtype=np.int64)
    if has_items.any():
        smallest[has_items] = _reduce(np.minimum, tok, off, has_items)
    kept = np.zeros((n_var, n_sets), dtype=np.int64)
    seg = np.repeat(np.arange(n_sets, dtype=np.int64), np.diff(off))
    for v in range(n_var):  # one bincount per variant
        kept[v] = np.bincount(seg, weights=run.included[v][cls.sc_rows], minlength=n_sets).astype(np.int64)
    nothing = ok & (kept == 0) & has_items[None, :] & (smallest[None, :] <= eff)
    return KnapsackChecks(bucket, capacity, loss, zero, rflag, nothing)
