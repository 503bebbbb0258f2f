"""Corpus checks: the vocabulary's patterns for every (variant, item set) of a sweep at once.

``should(result).every_set(variant="chat").include_item_with_kind("SystemPrompt")`` evaluates
the pattern on the sweep's ``[V, N]`` matrices with segment reductions over the set offsets:
one NumPy pass per variant, never a Python call per set. Item predicates are column
conditions (:func:`cupel_np.testing.col`). A failing check raises :class:`CorpusAssertionError`
naming how many (variant, set) pairs fail and listing the first ones; ``failures()`` returns
every failing pair of every check run so far as an Arrow table. A (variant, set) whose run
failed (``on_error="collect"``) fails every check, with the run's error in the table.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cupel_np.engine.reasons import R_BUDGET_EXCEEDED, R_TRUNCATED, REASON_NAMES
from cupel_np.engine.sweep_run import segment_reduce, segment_sums
from cupel_np.errors import CorpusAssertionError, InvalidConfigError
from cupel_np.model.budget import ContextBudget
from cupel_np.testing._kernels import top_n_fail_counts
from cupel_np.testing.chain import _count_arg, _kind_arg, _threshold_arg, reason_name
from cupel_np.testing.conditions import Condition, RowContext, code_mask

__all__ = ["CorpusAssertionChain", "CorpusAssertionError", "FAILURE_SCHEMA"]

#: columns of ``failures()``
FAILURE_SCHEMA = pa.schema(
    [
        ("check", pa.string()),
        ("variant", pa.string()),
        ("set", pa.string()),
        ("expected", pa.string()),
        ("found", pa.string()),
        ("error", pa.string()),
    ]
)


def _codes(name: str) -> np.ndarray:
    return np.array([c for c, n in REASON_NAMES.items() if n == name], dtype=np.int8)


#: the set bits of every 16-bit value
_POPCOUNT16 = np.unpackbits(np.arange(1 << 16, dtype=np.uint16).view(np.uint8)).reshape(-1, 16).sum(1, dtype=np.int64)


def _kind_bits(kind_id: np.ndarray, k: int) -> np.ndarray | None:
    """Each row's kind as one bit (``1 << kind_id``) for at most 16 kinds (uint8 for up to 8),
    else None."""
    if k > 16:
        return None
    dtype = np.uint8 if k <= 8 else np.uint16
    return np.left_shift(dtype(1), kind_id.astype(dtype))


def _condition(pred) -> Condition:
    if not isinstance(pred, Condition):
        raise InvalidConfigError(
            "corpus checks take column conditions such as cupel_np.testing.col('kind') == 'Tool', "
            f"not {type(pred).__name__}"
        )
    return pred


class CorpusAssertionChain:
    """The vocabulary over every item set of a ``SweepResult``, for the chosen variants.

    ``collect=True`` records failures without raising (read them with ``failures()``)."""

    def __init__(self, result, variant=None, *, collect: bool = False, max_listed: int = 10):
        self.result = result
        self.run = result.run
        self.table = result.table
        labels = list(result.labels)
        if variant is None:
            wanted = labels
        else:
            wanted = [variant] if isinstance(variant, str) else list(variant)
        for w in wanted:
            if w not in labels:
                raise InvalidConfigError(f"no variant labelled {w!r}; labels: {', '.join(labels)}")
        self.variants = [labels.index(w) for w in wanted]
        self.collect = collect
        self.max_listed = max_listed
        t = self.table
        self._offsets = np.asarray(t.offsets, dtype=np.int64)
        self._sizes = np.diff(self._offsets)
        self._seg = np.repeat(np.arange(t.n_sets, dtype=np.int64), self._sizes)
        self._failures: list[pa.Table] = []
        self._positions: list[tuple[np.ndarray, np.ndarray]] = []
        self._keys: pa.Array | None = None
        self._mask_cache: dict[int, tuple[Condition, np.ndarray]] = {}

    # -- plumbing ---------------------------------------------------------------------
    def _count(self, mask: np.ndarray) -> np.ndarray:
        return segment_sums(mask, self._offsets)

    def _ctx(self, v: int) -> RowContext:
        return RowContext(self.table, self.run, v)

    def _mask(self, cond: Condition, v: int) -> np.ndarray:
        """``cond``'s row mask for variant ``v``; a condition that reads no per-variant column
        is evaluated once per chain and shared by every variant."""
        if cond.uses_variant():
            return cond.mask(self._ctx(v))
        key = id(cond)
        hit = self._mask_cache.get(key)
        if hit is None or hit[0] is not cond:
            hit = self._mask_cache[key] = (cond, cond.mask(self._ctx(v)))
        return hit[1]

    def _inc_segments(self, v: int):
        """Variant ``v``'s included rows (ascending), their set, the per-set counts and offsets
        into them, and their placed positions (``placed_pos`` is aligned with these rows)."""
        rows = np.flatnonzero(self.run.included[v])
        seg = self._seg[rows]
        cnt = np.bincount(seg, minlength=self.table.n_sets)
        off = np.zeros(cnt.shape[0] + 1, dtype=np.int64)
        np.cumsum(cnt, out=off[1:])
        return rows, seg, cnt, off, np.asarray(self.run.placed_pos[v], dtype=np.int64)

    def _set_keys(self) -> pa.Array:
        if self._keys is None:
            keys = pa.array(self.table.set_keys)
            self._keys = keys if keys.type == pa.string() else keys.cast(pa.string())
        return self._keys

    def _check(self, label: str, expected: str, per_variant, fmt: str = "int") -> CorpusAssertionChain:
        """Run ``per_variant(v) -> (ok[S], found[S])`` for every chosen variant; record and
        (unless collecting) raise on the failing (variant, set) pairs."""
        parts = []
        total = 0
        for j, v in enumerate(self.variants):
            ok, found = per_variant(v)
            failed = self.result.failed[v]
            bad = np.flatnonzero(~ok | failed)
            total += ok.shape[0]
            if bad.size:
                parts.append(self._rows(label, expected, v, bad, found[bad], failed[bad], fmt))
                self._positions.append((np.full(bad.size, j, dtype=np.int64), bad.astype(np.int64)))
        if not parts:
            return self
        table = pa.concat_tables(parts)
        self._failures.append(table)
        if not self.collect:
            raise CorpusAssertionError(self._message(label, table, total), table)
        return self

    def _rows(self, label, expected, v, sets, found, failed, fmt) -> pa.Table:
        n = sets.shape[0]
        if fmt == "float":
            found_s = _fixed6(found.astype(np.float64), failed)
        else:
            found_s = pa.array(found.astype(np.int64), mask=failed).cast(pa.string())
        errors = pa.nulls(n, pa.string())
        if failed.any():
            errs = self.run.errors[v]
            errors = pa.array([str(errs[int(s)]) if f else None for s, f in zip(sets, failed)], pa.string())
        return pa.table(
            [
                pa.repeat(pa.scalar(label, pa.string()), n),
                pa.repeat(pa.scalar(self.result.labels[v], pa.string()), n),
                self._set_keys().take(pa.array(sets, pa.int64())),
                pa.repeat(pa.scalar(expected, pa.string()), n),
                found_s,
                errors,
            ],
            schema=FAILURE_SCHEMA,
        )

    def _message(self, label: str, table: pa.Table, total: int) -> str:
        k = table.num_rows
        lines = [f"{label} failed for {k} of {total} (variant, set) pairs:"]
        for r in table.slice(0, self.max_listed).to_pylist():
            what = f"error: {r['error']}" if r["error"] is not None else f"expected {r['expected']}, found {r['found']}"
            lines.append(f"  variant {r['variant']}, set {r['set']}: {what}")
        if k > self.max_listed:
            lines.append(f"  ... and {k - self.max_listed} more (failures() returns every row)")
        return "\n".join(lines)

    def failures(self) -> pa.Table:
        """Every failing (variant, set) row of every check run so far on this chain."""
        return pa.concat_tables(self._failures) if self._failures else FAILURE_SCHEMA.empty_table()

    def failure_positions(self) -> tuple[np.ndarray, np.ndarray]:
        """``(variant, set)`` positions of the rows of ``failures()``, aligned with them: the
        variant's index in this chain's ``variants`` (the order the rows list the variants in)
        and the set's index in the result's ItemTable."""
        if not self._positions:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        return (
            np.concatenate([v for v, _s in self._positions]),
            np.concatenate([s for _v, s in self._positions]),
        )

    @property
    def ok(self) -> bool:
        """True while no check on this chain has failed."""
        return not self._failures

    # -- inclusion ----------------------------------------------------------------------
    def _kind_mask(self, kind: str) -> np.ndarray:
        t = self.table
        return t.kind_id == t.kind_ids_for(kind)

    def include_item_with_kind(self, kind: str) -> CorpusAssertionChain:
        """Every set includes at least one item of Kind ``kind``."""
        kind = _kind_arg(kind)
        km = self._kind_mask(kind)

        def per(v):
            cnt = self._count(self.run.included[v] & km)
            return cnt > 0, cnt

        return self._check(f"IncludeItemWithKind({kind})", f"included items with Kind={kind} >= 1", per)

    def include_item_matching(self, condition: Condition) -> CorpusAssertionChain:
        """Every set includes at least one item satisfying ``condition``."""
        cond = _condition(condition)

        def per(v):
            cnt = self._count(self.run.included[v] & self._mask(cond, v))
            return cnt > 0, cnt

        return self._check("IncludeItemMatching", f"included items matching {cond.describe()} >= 1", per)

    def include_exactly_n_items_with_kind(self, kind: str, n: int) -> CorpusAssertionChain:
        """Every set includes exactly ``n`` items of Kind ``kind``."""
        kind, n = _kind_arg(kind), _count_arg(n)
        km = self._kind_mask(kind)

        def per(v):
            cnt = self._count(self.run.included[v] & km)
            return cnt == n, cnt

        return self._check(f"IncludeExactlyNItemsWithKind({kind}, {n})", f"included items with Kind={kind} == {n}", per)

    # -- exclusion ----------------------------------------------------------------------
    def exclude_item_with_reason(self, reason) -> CorpusAssertionChain:
        """Every set excludes at least one item with the reason variant ``reason``."""
        name = reason_name(reason)
        codes = _codes(name)

        def per(v):
            cnt = self._count(code_mask(self.run.reason[v], codes))
            return cnt > 0, cnt

        return self._check(f"ExcludeItemWithReason({name})", f"excluded items with reason {name} >= 1", per)

    def exclude_item_matching_with_reason(self, condition: Condition, reason) -> CorpusAssertionChain:
        """Every set excludes an item satisfying ``condition`` with the reason variant ``reason``."""
        cond = _condition(condition)
        name = reason_name(reason)
        codes = _codes(name)

        def per(v):
            cnt = self._count(code_mask(self.run.reason[v], codes) & self._mask(cond, v))
            return cnt > 0, cnt

        return self._check(
            f"ExcludeItemMatchingWithReason(reason={name})",
            f"excluded items matching {cond.describe()} with reason {name} >= 1",
            per,
        )

    def exclude_item_with_budget_details(
        self, condition: Condition, expected_item_tokens: int, expected_available_tokens: int
    ) -> CorpusAssertionChain:
        """Every set excludes an item satisfying ``condition`` as BudgetExceeded with exactly
        these ``item_tokens`` and ``available_tokens``."""
        cond = _condition(condition)
        eit, eat = int(expected_item_tokens), int(expected_available_tokens)
        run = self.run

        def per(v):
            code = run.reason[v]
            rows = np.flatnonzero(code_mask(code, (R_BUDGET_EXCEEDED, R_TRUNCATED)) & (self.table.tokens == eit))
            seg = self._seg[rows]
            avail = np.where(code[rows] == R_TRUNCATED, run.avail_place[v][seg], run.avail_slice[v][seg])
            keep = (avail == eat) & self._mask(cond, v)[rows]
            cnt = np.bincount(seg[keep], minlength=self.table.n_sets)
            return cnt > 0, cnt

        return self._check(
            "ExcludeItemWithBudgetDetails",
            f"excluded items matching {cond.describe()} with BudgetExceeded(item_tokens={eit}, "
            f"available_tokens={eat}) >= 1",
            per,
        )

    def have_no_exclusions_for_kind(self, kind: str) -> CorpusAssertionChain:
        """No set excludes an item of Kind ``kind``."""
        kind = _kind_arg(kind)
        km = self._kind_mask(kind)

        def per(v):
            cnt = self._count(~self.run.included[v] & km)
            return cnt == 0, cnt

        return self._check(f"HaveNoExclusionsForKind({kind})", f"excluded items with Kind={kind} == 0", per)

    # -- aggregate ----------------------------------------------------------------------
    def have_at_least_n_exclusions(self, n: int) -> CorpusAssertionChain:
        """Every set excludes at least ``n`` items."""
        n = _count_arg(n)

        def per(v):
            cnt = self._sizes - self._count(self.run.included[v])
            return cnt >= n, cnt

        return self._check(f"HaveAtLeastNExclusions({n})", f"excluded items >= {n}", per)

    def excluded_items_are_sorted_by_score_descending(self) -> CorpusAssertionChain:
        """In every set, adjacent excluded scores satisfy ``score[i] >= score[i+1]`` in the
        report's order. That order is score descending with a NaN score last (ties keep the
        pipeline's order, which cannot change the outcome), so a pair can only violate the
        rule at a NaN: the first violation is just before the first NaN, or at 0 when every
        score is NaN. Counted per set, no sort. ``found``: the first violating index (-1 none)."""

        def per(v):
            exc = ~self.run.included[v]
            n_exc = self._count(exc)
            nan_rows = self.run.nan_score_rows(v)  # (usually none: no score column to build)
            nan_rows = nan_rows[exc[nan_rows]]
            n_nan = np.bincount(self._seg[nan_rows], minlength=self.table.n_sets)
            n_num = n_exc - n_nan
            first = np.where(n_num > 0, n_num - 1, 0)
            first = np.where((n_nan > 0) & (n_exc >= 2), first, -1)
            return first < 0, first

        return self._check(
            "ExcludedItemsAreSortedByScoreDescending", "no excluded item scored above its predecessor (index -1)", per
        )

    # -- budget / coverage --------------------------------------------------------------
    def have_budget_utilization_above(
        self, threshold: float, budget: ContextBudget | None = None
    ) -> CorpusAssertionChain:
        """In every set, sum(included tokens) / max_tokens >= ``threshold``; ``max_tokens`` is
        ``budget``'s, or by default each variant's own budget's."""
        threshold = _threshold_arg(threshold)
        if budget is not None and not isinstance(budget, ContextBudget):
            raise InvalidConfigError(f"budget must be a ContextBudget, got {type(budget).__name__}")
        tokens = self.table.tokens
        kept = np.empty_like(tokens)  # one buffer for every variant (a fresh one faults its pages in)

        def per(v):
            b = budget if budget is not None else self.result.variants[v].budget
            _positive_max(b)
            # (the included rows' tokens, 0 elsewhere: a product costs half of ``np.where``)
            used = segment_sums(np.multiply(tokens, self.run.included[v], out=kept), self._offsets)
            util = used / b.max_tokens  # analytics.budget_utilization per set, on the matrices
            return util >= threshold, util

        return self._check(
            f"HaveBudgetUtilizationAbove({threshold})",
            f"utilization (included tokens / max_tokens) >= {threshold}",
            per,
            "float",
        )

    def have_kind_coverage_count(self, n: int) -> CorpusAssertionChain:
        """Every set includes items of at least ``n`` distinct kinds."""
        n = _count_arg(n)
        t = self.table
        k = max(len(t.kind_vocab), 1)

        # up to 16 kinds: each row's kind as one bit, OR-ed per set and the bits counted
        bits = _kind_bits(t.kind_id, k)
        dense = bits is None and t.n_sets * k <= 4 * t.n + 1_000_000  # a dense (set, kind) count table is small
        pair = self._seg * k + t.kind_id if dense else None

        def per(v):
            inc = self.run.included[v]
            if bits is not None:
                cnt = _POPCOUNT16[segment_reduce(np.bitwise_or, bits * inc, self._offsets)]
            elif pair is not None:
                hit = np.bincount(pair[inc], minlength=t.n_sets * k)
                cnt = np.count_nonzero(hit.reshape(t.n_sets, k), axis=1)
            else:
                rows = np.flatnonzero(inc)
                pairs = np.unique(self._seg[rows] * k + t.kind_id[rows])
                cnt = np.bincount(pairs // k, minlength=t.n_sets)
            return cnt >= n, cnt

        return self._check(f"HaveKindCoverageCount({n})", f"distinct included kinds >= {n}", per)

    # -- ordering -----------------------------------------------------------------------
    def place_item_at_edge(self, condition: Condition) -> CorpusAssertionChain:
        """In every set, the first or last placed item satisfies ``condition``. ``found``: the
        placed index of the first matching item (-1: none)."""
        cond = _condition(condition)
        n_sets = self.table.n_sets

        def per(v):
            rows, seg, cnt, off, pos = self._inc_segments(v)
            hit = self._mask(cond, v)[rows]
            at_edge = hit & ((pos == 0) | (pos == cnt[seg] - 1))
            ok = np.bincount(seg[at_edge], minlength=n_sets) > 0
            first = _segment_min(np.where(hit, pos, _BIG), cnt, off, _BIG)
            first[first == _BIG] = -1
            return ok, first

        return self._check("PlaceItemAtEdge", f"an included item matching {cond.describe()} at index 0 or count-1", per)

    def place_top_n_scored_at_edges(self, n: int) -> CorpusAssertionChain:
        """In every set, the ``n`` highest-scored included items occupy the ``n`` outermost
        positions (ties at the n-th score interchangeable). ``found``: edge slots not holding a
        top-n item (``n - count`` when fewer than ``n`` items are included)."""
        n = _count_arg(n)
        return self._check(
            f"PlaceTopNScoredAtEdges({n})",
            f"edge slots (of {n}) not holding a top-{n} scored item == 0",
            self._top_n(n),
        )

    def _top_n(self, n: int):
        n_sets = self.table.n_sets

        def per(v):
            rows, seg, cnt, off, pos = self._inc_segments(v)
            if n == 0:
                return np.ones(n_sets, dtype=np.bool_), np.zeros(n_sets, dtype=np.int64)
            sc = self.run.scores_for(v)[rows]  # one gather: faster than scores_at's searchsorted
            fail = top_n_fail_counts(np.where(np.isnan(sc), np.inf, -sc), off, pos, n)
            enough = cnt >= n
            return enough & (fail == 0), fail

        return per

    # -- tool pairs (a cupel_np extension; docs/tool-pairs.md) ------------------------------
    def keeps_tool_pairs(self) -> CorpusAssertionChain:
        """In every set, no tool call is included without all its results and no result
        without its call. ``found``: orphan calls + orphan results. Items without the
        ``tool_call_id`` / ``tool_role`` link are a configuration error, not a pass."""
        orphans = self.result.orphans
        if orphans is None:
            raise InvalidConfigError(
                "KeepsToolPairs: the items carry no tool link (columns 'tool_call_id' and 'tool_role', "
                "or those metadata keys); see docs/tool-pairs.md"
            )
        total = orphans["orphan_calls"] + orphans["orphan_results"]

        def per(v):
            return total[v] == 0, total[v]

        return self._check("KeepsToolPairs", "orphan tool calls + orphan tool results == 0", per)


_BIG = np.iinfo(np.int64).max


def _segment_min(values: np.ndarray, cnt: np.ndarray, off: np.ndarray, empty) -> np.ndarray:
    """Per segment (offsets ``off``, counts ``cnt``, possibly 0) the minimum of ``values``,
    NaN ignored (``fmin``); ``empty`` for a segment with no rows."""
    if values.shape[0] == 0:
        return np.full(cnt.shape[0], empty, dtype=np.result_type(values, type(empty)))
    out = np.fmin.reduceat(values, np.minimum(off[:-1], values.shape[0] - 1))
    out[cnt == 0] = empty
    return out


def _fixed6(x: np.ndarray, null: np.ndarray) -> pa.Array:
    """``f"{v:.6f}"`` for every value, built column-wise in Arrow (a Python format call per
    failing set would dominate a check that fails in many sets)."""
    finite = np.isfinite(x)
    q = np.round(np.abs(np.where(finite, x, 0.0)) * 1e6).astype(np.int64)
    whole = pa.array(q // 1_000_000).cast(pa.string())
    frac = pc.utf8_lpad(pa.array(q % 1_000_000).cast(pa.string()), 6, "0")
    sign = pa.array(np.where(x < 0, "-", ""), pa.string())
    out = pc.binary_join_element_wise(sign, whole, ".", frac, "")
    if not finite.all():
        out = pc.if_else(pa.array(finite), out, pa.array([repr(float(v)) for v in x], pa.string()))
    return pc.if_else(pa.array(null), pa.scalar(None, pa.string()), out)


def _positive_max(budget: ContextBudget) -> None:
    if budget.max_tokens <= 0:
        raise InvalidConfigError("have_budget_utilization_above needs budget.max_tokens > 0")
