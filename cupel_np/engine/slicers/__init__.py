"""The slicers: one module per slicer family (``greedy``, ``knapsack``, ``quota``, ``count``,
and ``nested`` for a count quota around a slicer other than greedy or knapsack), each with its
kernels and fast paths; here, :class:`SlicerArgs` (a slicer spec as the arrays the kernels
take) and :func:`slice_segments`, the dispatcher over one driver kernel per slicer."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from cupel_np.engine.slicers.codes import ERR_NEEDS_SPLIT, MODE_COUNT, MODE_GREEDY, MODE_KNAPSACK, MODE_QUOTA
from cupel_np.engine.slicers.count import _slice_count, count_greedy_slice
from cupel_np.engine.slicers.count_big import KindPositions, kind_positions
from cupel_np.engine.slicers.greedy import _slice_greedy
from cupel_np.engine.slicers.knapsack import _slice_knapsack, _slice_knapsack_split
from cupel_np.engine.slicers.quota import KindGroups, _slice_quota, kind_groups, quota_greedy_slice
from cupel_np.model.items import ItemTable
from cupel_np.model.slicers import (
    CountConstrainedKnapsackSlice,
    CountQuotaSlice,
    GreedySlice,
    KnapsackSlice,
    QuotaSlice,
    Slicer,
)


def slice_segments(args: SlicerArgs, tok, score, kind, offsets, targets, max_cells):
    """Run one slicer (``args``, from :func:`slicer_args`) over every segment of the sorted
    candidate arrays: ``tok``, ``score`` and ``kind`` per candidate, ``offsets`` (int64
    [n_seg + 1]) and ``targets`` per segment, ``max_cells`` the knapsack DP's limit (see
    ``knapsack.knapsack_fits``).

    Returns ``(rank, err, err_a, err_b, satisfied, cap_dropped)``: ``rank`` per position,
    per-segment error code and details, per segment and count entry the satisfied count when
    it fell short (-1 otherwise), and per segment the phase-2 picks dropped by count caps.

    One kernel per slicer mode: a policy compiles only its own slicer's code (a cold start
    that never runs a quota or count slicer does not compile them)."""
    mode, use_knapsack, bucket = args.mode, args.use_knapsack, int(args.bucket)
    kind_rank, q_has, q_req, q_cap, q_req_all = args.quota_arrays
    e_kind, e_require, cap_of_kind = args.e_kind, args.e_require, args.cap_of_kind
    max_cells = int(max_cells)
    n = tok.shape[0]
    n_seg = offsets.shape[0] - 1
    rank = np.full(n, -1, dtype=np.int64)
    err = np.zeros(n_seg, dtype=np.int8)
    err_a = np.zeros(n_seg, dtype=np.int64)
    err_b = np.zeros(n_seg, dtype=np.int64)
    satisfied = np.full((n_seg, e_kind.shape[0]), -1, dtype=np.int64)
    cap_dropped = np.zeros(n_seg, dtype=np.int64)
    if mode == MODE_GREEDY:
        _slice_greedy(tok, score, offsets, targets, rank)
    elif mode == MODE_KNAPSACK:
        _slice_knapsack(tok, score, offsets, targets, bucket, max_cells, rank, err, err_a, err_b)
        split = np.flatnonzero(err == ERR_NEEDS_SPLIT)
        if split.size:
            _slice_knapsack_split(tok, score, offsets, targets, bucket, max_cells, split, rank, err, err_a, err_b)
    elif mode == MODE_QUOTA:
        _slice_quota(
            tok,
            score,
            kind,
            offsets,
            targets,
            use_knapsack,
            bucket,
            max_cells,
            kind_rank,
            q_has,
            q_req,
            q_cap,
            q_req_all,
            rank,
            err,
            err_a,
            err_b,
        )
    else:
        _slice_count(
            tok,
            score,
            kind,
            offsets,
            targets,
            use_knapsack,
            bucket,
            max_cells,
            e_kind,
            e_require,
            cap_of_kind,
            args.throw_on_scarcity,
            args.resort_inner,
            rank,
            err,
            err_a,
            err_b,
            satisfied,
            cap_dropped,
        )
    return rank, err, err_a, err_b, satisfied, cap_dropped


class SlicerArgs(NamedTuple):
    """A slicer spec flattened into the arrays the slice kernels take (built by
    :func:`slicer_args`). The field names are the slice kernels' parameter names;
    :meth:`run` dispatches to :func:`slice_segments` or ``quota.quota_greedy_slice``, which
    unpack them for the kernels. Arrays "per kind" are indexed by the table's kind id."""

    mode: int  #: ``codes.MODE_*``
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
        compared: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Slice every segment of the candidates: ``slice_segments`` over score-sorted
        candidates, or with ``unsorted`` (a quota or count quota slicer with an inner greedy,
        :func:`row_order`) :meth:`run_rows` over candidates in row order (``compared``: only
        those candidates' ranks need exact order, see ``quota.quota_greedy_segments``).
        Returns ``(rank, err, err_a, err_b, satisfied, cap_dropped)`` (see
        :func:`slice_segments`)."""
        if unsorted:
            return self.run_rows(tok, score, kind, offsets, targets, max_cells, compared=compared)[0]
        return slice_segments(self, tok, score, kind, offsets, targets, max_cells)

    def run_rows(
        self,
        tok: np.ndarray,
        score: np.ndarray,
        kind: np.ndarray,
        offsets: np.ndarray,
        targets: np.ndarray,
        max_cells: int,
        *,
        compared: np.ndarray | None = None,
        unordered: bool = False,
        groups: KindGroups | None = None,
        positions: KindPositions | None = None,
    ) -> tuple[
        tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
        tuple[np.ndarray, np.ndarray, np.ndarray] | None,
    ]:
        """A quota or count quota slicer with an inner greedy (:func:`row_order`) over
        candidates in row order: ``quota.quota_greedy_slice`` / ``count.count_greedy_slice``.
        ``compared``: only those candidates' ranks need exact order; ``unordered`` (without
        ``compared``): the greedy's fitting prefixes stay unordered, ranked in index order.
        Returns ``((rank, err, err_a, err_b, satisfied, cap_dropped), ranges)``: those
        prefixes as ranges of ranks (``place_stage.Candidates.prefix_ranges``), None without
        ``unordered``. ``groups`` (a quota): ``quota.kind_groups`` of these candidates with
        ``compared`` as marks, when the caller keeps it (:meth:`shared_kind_groups`);
        ``positions`` (a count quota): ``count_big.kind_positions`` of these candidates, likewise
        (:meth:`shared_kind_positions`)."""
        if self.mode == MODE_COUNT:
            return count_greedy_slice(
                self, tok, score, kind, offsets, targets, max_cells, compared, unordered, positions
            )
        return quota_greedy_slice(self, tok, score, kind, offsets, targets, max_cells, compared, unordered, groups)

    def shared_kind_groups(
        self, memo: dict, tok: np.ndarray, kind: np.ndarray, offsets: np.ndarray, compared: np.ndarray | None
    ) -> KindGroups | None:
        """For a quota with an inner greedy: ``quota.kind_groups`` of the candidates (what
        :meth:`run_rows` computes of them that no score or target changes), computed once
        per ``memo`` (a sweep's ``SweepShared.memo``, whose arrays ``tok``, ``kind`` and
        ``compared`` are: every variant over the same candidates shares it) and kind order;
        else None. Two workers may both compute it; the first stored is kept."""
        if self.mode != MODE_QUOTA or self.use_knapsack:
            return None
        key = ("kind_groups", self.kind_rank.tobytes(), offsets.tobytes(), compared is not None)
        groups = memo.get(key)
        if groups is None:
            groups = memo.setdefault(key, kind_groups(tok, kind, offsets, self.kind_rank, compared))
        return groups

    def shared_kind_positions(self, memo: dict, kind: np.ndarray) -> KindPositions | None:
        """For a count quota with an inner greedy: ``count_big.kind_positions`` of the candidates
        (the kinds its entries name, which no score or target changes), computed once per
        ``memo`` (a sweep's ``SweepShared.memo``, whose ``kind`` array it is) and set of
        kinds; else None. Two workers may both compute it; the first stored is kept."""
        if self.mode != MODE_COUNT or self.use_knapsack:
            return None
        key = ("kind_positions", np.unique(self.e_kind[self.e_kind >= 0]).tobytes(), self.cap_of_kind.shape[0])
        positions = memo.get(key)
        if positions is None:
            positions = memo.setdefault(key, kind_positions(kind, self.e_kind, self.cap_of_kind.shape[0]))
        return positions

    @property
    def quota_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(kind_rank, q_has, q_req, q_cap, q_req_all)``: the QuotaSlice arrays, in the order
        the quota kernels take them."""
        return self.kind_rank, self.q_has, self.q_req, self.q_cap, self.q_req_all


def row_order(slicer: Slicer) -> bool:
    """A quota or count quota slicer with an inner greedy: :meth:`SlicerArgs.run` takes its
    candidates in row order (``unsorted``), no score sort needed."""
    return isinstance(slicer, (QuotaSlice, CountQuotaSlice)) and isinstance(slicer.inner, GreedySlice)


def greedy_inside(slicer: Slicer) -> bool:
    """The slicer is greedy, or a quota or count quota over greedy: it can leave its fitting
    prefix unordered apart from what chronological placement compares
    (``placers.chrono_compared``)."""
    return isinstance(slicer, GreedySlice) or row_order(slicer)


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
        mode = MODE_GREEDY
    elif isinstance(slicer, KnapsackSlice):
        mode, bucket = MODE_KNAPSACK, slicer.bucket_size
    elif isinstance(slicer, QuotaSlice):
        mode = MODE_QUOTA
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
        mode = MODE_COUNT
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
