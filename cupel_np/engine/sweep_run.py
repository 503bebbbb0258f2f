"""A sweep's result (:class:`SweepRun`: V variants' result matrices over one table, with
per-set maps built lazily, :class:`SetMap`) and what it keeps from the shared phase: the
classify stage's output (:func:`classify`) and the score plan (:class:`ScorePlan`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from cupel_np._jit import filled
from cupel_np.engine.batch_kernels import placed_rows, variant_scores
from cupel_np.engine.groups import GroupPlan
from cupel_np.model.budget import ContextBudget
from cupel_np.model.grid import Variant
from cupel_np.model.items import ItemTable

#: a result of a variant that has not run yet (every run replaces it)
_NOT_RUN = np.zeros(0, dtype=np.int64)


def segment_sums(values: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Per segment ``s`` the sum of ``values[offsets[s]:offsets[s + 1]]``: int64 for bool and
    integer values, float64 for floats (the differences of one running sum, as ever).

    Integers and bools are summed segment by segment (:func:`segment_reduce`), a bool mask in
    the narrowest accumulator its longest segment fits: 5M rows in ~1.4 ms where the running
    sum took ~26 (NumPy casts every bool to int64 on its way into ``cumsum``). The same
    integers either way (integer sums wrap alike in any order)."""
    if values.dtype.kind not in "biu":
        cs = np.zeros(values.shape[0] + 1, dtype=np.float64)
        np.cumsum(values, out=cs[1:])
        return cs[offsets[1:]] - cs[offsets[:-1]]
    offsets = np.asarray(offsets, dtype=np.int64)
    acc: type[np.signedinteger] = np.int64
    if values.dtype.kind == "b":
        values = values.view(np.uint8)
        longest = int((offsets[1:] - offsets[:-1]).max()) if offsets.shape[0] > 1 else 0
        acc = np.int16 if longest <= np.iinfo(np.int16).max else np.int32 if longest <= _I32_MAX else np.int64
    return segment_reduce(np.add, values, offsets, acc).astype(np.int64, copy=False)


def segment_reduce(ufunc: np.ufunc, values: np.ndarray, offsets: np.ndarray, dtype=None) -> np.ndarray:
    """Per segment ``ufunc``'s reduction of ``values[offsets[s]:offsets[s + 1]]`` (in
    ``dtype``, by default the values'), 0 for an empty segment: one ``ufunc.reduceat`` over
    the non-empty segments (a reduction from a non-empty start runs to the next one, and an
    empty segment between them holds nothing)."""
    n_seg = offsets.shape[0] - 1
    dtype = values.dtype if dtype is None else np.dtype(dtype)
    if n_seg <= 0:
        return np.zeros(0, dtype=dtype)
    x = values[: int(offsets[-1])]
    sizes = offsets[1:] - offsets[:-1]
    if int(np.count_nonzero(sizes)) == n_seg:  # no empty segment: each start is its own index
        return ufunc.reduceat(x, offsets[:-1], dtype=dtype)
    out = np.zeros(n_seg, dtype=dtype)
    full = np.flatnonzero(sizes)
    if full.shape[0]:
        out[full] = ufunc.reduceat(x, offsets[full], dtype=dtype)
    return out


_I32_MAX = np.iinfo(np.int32).max


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
        self._n_sets = n_sets
        self._has: np.ndarray | None = None  # per set, whether present (made by the first add)
        self._chunks: list[tuple[np.ndarray, Callable[[int], object]]] = []
        self._cache: dict[int, object] = {}
        self._len = 0

    def add(self, sets: np.ndarray, build: Callable[[int], object]) -> None:
        sets = np.asarray(sets, dtype=np.int64)
        if self._has is None:
            self._has = np.zeros(self._n_sets, dtype=np.bool_)
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
            return self._has is not None and 0 <= s < self._n_sets and bool(self._has[s])
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
    # (the masks summed as they are: ``segment_sums`` counts a bool mask in a narrow
    # accumulator, where a cast to int64 first wrote 8 MB per 1M rows)
    pin_off = _offsets(segment_sums(pin, table.offsets))
    first = filled(table.n_sets, -1, np.int64)
    has = pin_off[1:] > pin_off[:-1]
    first[has] = pin_rows[pin_off[:-1][has]]
    if pin_rows.shape[0]:  # the pinned rows' tokens per set, from those rows only
        pinned_tokens = segment_sums(table.tokens[pin_rows], pin_off)
    else:
        pinned_tokens = np.zeros(table.n_sets, dtype=np.int64)
    return Classified(
        neg,
        pin,
        np.flatnonzero(sc),
        _offsets(segment_sums(sc, table.offsets)),
        pin_rows,
        pin_off,
        pinned_tokens,
        first,
    )


def effective_targets(budget: ContextBudget, pinned_tokens: np.ndarray) -> np.ndarray:
    """The spec's effective target for every set at once (same float ops as the scalar form)."""
    reserved = budget.reserved_tokens
    margin = budget.estimation_safety_margin_percent
    if pinned_tokens.shape[0] == 1 and not margin > 0:  # one set, no margin: the integer formula in Python
        pinned = int(pinned_tokens[0])  # (every term within 2**62: no int64 wraparound to mirror)
        out = np.empty(1, dtype=np.int64)
        out[0] = min(
            max(0, budget.target_tokens - pinned - reserved),
            max(0, budget.max_tokens - budget.output_reserve - pinned - reserved),
        )
        return out
    eff_max = np.maximum(0, budget.max_tokens - budget.output_reserve - pinned_tokens - reserved)
    eff_t = np.minimum(np.maximum(0, budget.target_tokens - pinned_tokens - reserved), eff_max)
    if margin > 0:
        mult = 1.0 - margin / 100.0
        eff_max = np.floor(eff_max.astype(np.float64) * mult).astype(np.int64)
        eff_t = np.floor(eff_t.astype(np.float64) * mult).astype(np.int64)
        eff_t = np.minimum(eff_t, eff_max)
    return eff_t.astype(np.int64)


def placed_permutation(included: np.ndarray, placed_pos: np.ndarray) -> tuple[np.ndarray, int, bool]:
    """Every row of one item set once: its included rows (``included``: per row) in placed
    order, from their placed positions (``placed_pos``: per included row, in row order), then
    the rows not included, ascending; the number of included rows ``k`` (the order's first
    ``k``); and whether the placed order is row order (a session's messages placed
    chronologically: the items can then be taken by ``included`` itself). One kernel walk
    (``batch_kernels.placed_rows``); positions that are not ``0 .. k-1`` each once (never
    written by the place stage) are sorted instead: the stable argsort's answer either way."""
    k = placed_pos.shape[0]
    n = included.shape[0]
    out = placed_rows(included, placed_pos)
    if out.shape[0] == n + 1:
        return out[:n], k, bool(out[n])
    rows = included.nonzero()[0]
    if rows.shape[0] != k:  # (one position per included row)
        raise ValueError(f"{k} placed positions for {rows.shape[0]} included rows")
    return np.concatenate((rows[np.argsort(placed_pos, kind="stable")], (~included).nonzero()[0])), k, False


def in_placed_order(included: np.ndarray, placed_pos: np.ndarray) -> tuple[np.ndarray, bool]:
    """One item set's included rows in placed order, and whether that order is row order
    (:func:`placed_permutation`'s first ``k``)."""
    order, k, in_order = placed_permutation(included, placed_pos)
    return order[:k], in_order


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
        self.reason = filled((v, n), -1, np.int8)
        # placed positions are kept for included rows only, in row order: ``placed_pos[v][i]``
        # is the position of the i-th row of ``flatnonzero(included[v])`` (4 bytes per included
        # item; the rows themselves are the inclusion matrix's, never stored twice)
        self.placed_pos: list[np.ndarray] = [_NOT_RUN] * v  # every variant replaces its entry
        self._placed_off: dict[int, np.ndarray] = {}
        # scores are not stored per variant: scores_for(v) rebuilds them from the shared base
        # columns (8 bytes per item per variant saved)
        self._plan = plan
        # (four views of one allocation: a single selection's microseconds count)
        self.effective_target, self.avail_slice, self.avail_place, self.cap_dropped = np.zeros(
            (4, v, s), dtype=np.int64
        )
        # per variant {set: error} and {set: [(kind, required, satisfied), ...]}, built lazily
        self.errors: list[SetMap] = [SetMap(s) for _ in range(v)]
        self.shortfalls: list[SetMap] = [SetMap(s) for _ in range(v)]
        # sparse details: (rows, values...) sorted by row
        self.dedup_winner: list[tuple[np.ndarray, np.ndarray]] = [(_NOT_RUN, _NOT_RUN)] * v
        self.trunc_order: list[tuple[np.ndarray, np.ndarray]] = [(_NOT_RUN, _NOT_RUN)] * v
        self.count_cap: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = [(_NOT_RUN, _NOT_RUN, _NOT_RUN)] * v
        #: per variant its units (``engine.groups.GroupPlan``), None for a variant without groups
        self.group_plan: list[GroupPlan | None] = [None] * v
        #: the table's duplicate-content groups (``batch_kernels.duplicate_groups(table.content_id,
        #: table.offsets)``: members, offsets) when the sweep found them over every row (the
        #: scoreable rows are every row), else None: a sweep result finds them itself
        self.content_groups: tuple[np.ndarray, np.ndarray] | None = None
        # wall clock (time.time_ns) at the phase boundaries, for stage timings and trace spans:
        # prep_ns = (start, classified, shared scoring done); stage_ns[v] = (variant start,
        # scored, deduplicated, sliced, placed)
        self.prep_ns = np.zeros(3, dtype=np.int64)
        self.stage_ns = np.zeros((v, 5), dtype=np.int64)

    @property
    def n_variants(self) -> int:
        return len(self.variants)

    @property
    def plan(self) -> ScorePlan:
        """The shared base score columns and each variant's terms over them (read only)."""
        return self._plan

    def position_for(self, v: int) -> np.ndarray:
        """Variant ``v``'s placed position per row (-1 when excluded)."""
        out = np.full(self.table.n, -1, dtype=np.int32)
        out[self.included[v]] = self.placed_pos[v]
        return out

    def placed_in(self, v: int, seg: int) -> tuple[np.ndarray, np.ndarray]:
        """Variant ``v``'s included rows of set ``seg`` (ascending) and their placed positions."""
        lo = int(self.table.offsets[seg])
        rows = lo + np.flatnonzero(self.included[v, lo : int(self.table.offsets[seg + 1])])
        return rows, self._placed_pos_of(v, seg)

    def _placed_pos_of(self, v: int, seg: int) -> np.ndarray:
        off = self._placed_off.get(v)
        if off is None:  # included rows before each set, once per variant
            off = self._placed_off[v] = (
                np.array([0, self.placed_pos[v].shape[0]], dtype=np.int64)
                if self.table.n_sets == 1
                else _offsets(segment_sums(self.included[v], self.table.offsets))
            )
        return self.placed_pos[v][off[seg] : off[seg + 1]]

    def placed_order(self, v: int, seg: int) -> tuple[np.ndarray, bool]:
        """Variant ``v``'s included rows of set ``seg`` in placed order, and whether that order
        is row order (:func:`in_placed_order`)."""
        lo, hi = int(self.table.offsets[seg]), int(self.table.offsets[seg + 1])
        rows, in_order = in_placed_order(self.included[v, lo:hi], self._placed_pos_of(v, seg))
        return (rows if lo == 0 else lo + rows), in_order

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
        if cls.sc_rows.shape[0] == self.table.n:  # every row scoreable: the composite is the column
            return _one_variant(base, term_off, term_col, term_w, v)
        out = np.zeros(self.table.n, dtype=np.float64)
        out[cls.sc_rows] = _one_variant(base, term_off, term_col, term_w, v)
        out[cls.pin_rows] = 1.0
        return out

    def nan_score_rows(self, v: int) -> np.ndarray:
        """``np.flatnonzero(np.isnan(scores_for(v)))`` without building the whole column: only
        a scoreable row's composite score can be NaN (pinned rows score 1.0, negative-token
        rows 0.0), so the rows are the scoreable ones whose score is (ascending)."""
        base, term_off, term_col, term_w = self._plan
        sc_rows = self.classified.sc_rows
        return sc_rows[np.isnan(_one_variant(base, term_off, term_col, term_w, v))]

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
