"""CountQuotaSlice around any inner slicer the spec allows (slicers/count-quota.md: a decorator
slicer that forbids only KnapsackSlice inside it): quota, a nested count quota,
count_constrained_knapsack. (Count quota over greedy keeps the one-kernel path in
``count._slice_count``.)

The three phases over every segment of the score-sorted candidates: phase 1 commits each
entry's top ``require_count`` candidates of its kind (a kernel), phase 2 runs the inner slicer
on the residual candidates with the residual targets (the inner slicer's own driver, so any
nesting works), phase 3 appends the inner picks in the inner output order, dropping those
over their kind's cap (a kernel). Output as ``slicers.slice_segments``; the per-entry
``satisfied`` columns are the outer slicer's entries, then the inner slicer's (see
:func:`count_entries`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from cupel_np._jit import jit
from cupel_np.engine.slicers import codes
from cupel_np.model.policy import CountConstrainedKnapsackSlice, CountQuotaSlice, GreedySlice

ERR_SCARCITY = codes.ERR_SCARCITY


def is_nested(slicer) -> bool:
    """A count quota whose inner slicer is not greedy (this module's path)."""
    return isinstance(slicer, CountQuotaSlice) and not isinstance(slicer.inner, GreedySlice)


def count_entries(slicer) -> tuple:
    """The count entries a run's ``satisfied`` columns and scarcity errors refer to: the
    slicer's own, then its inner slicer's (recursively)."""
    if isinstance(slicer, CountQuotaSlice):
        return tuple(slicer.entries) + (count_entries(slicer.inner) if is_nested(slicer) else ())
    if isinstance(slicer, CountConstrainedKnapsackSlice):
        return tuple(slicer.entries)
    return ()


@jit
def _phase1(
    kind,
    tok,
    offsets,
    targets,
    e_kind,
    e_require,
    throw_on_scarcity,
    committed,
    rank,
    prealloc,
    err,
    err_a,
    err_b,
    satisfied,
):
    """Phase 1 (count-satisfy) per segment: ``committed``/``rank`` for the committed positions
    (entry order, score order within an entry), their tokens in ``prealloc``."""
    for s in range(offsets.shape[0] - 1):
        lo = offsets[s]
        hi = offsets[s + 1]
        if hi - lo == 0 or targets[s] <= 0:
            continue
        n_out = 0
        for e in range(e_kind.shape[0]):
            need = e_require[e]
            if need <= 0:
                continue
            kk = e_kind[e]
            got = 0
            if kk >= 0:
                for p in range(lo, hi):
                    if got >= need:
                        break
                    if kind[p] == kk:
                        committed[p] = True
                        rank[p] = n_out
                        n_out += 1
                        prealloc[s] += tok[p]
                        got += 1
            if got < need:
                if throw_on_scarcity:
                    err[s] = ERR_SCARCITY
                    err_a[s] = e
                    err_b[s] = got
                    break
                satisfied[s, e] = got


@jit
def _phase3(kind, offsets, committed, res_pos, res_off, inner_rank, cap_of_kind, rank, cap_dropped):
    """Phase 3 (cap enforcement) per segment: the inner picks after the committed ones, in the
    inner output order, unless their kind's count (committed ones included) reached its cap."""
    count = np.zeros(cap_of_kind.shape[0], dtype=np.int64)
    for s in range(offsets.shape[0] - 1):
        lo = offsets[s]
        hi = offsets[s + 1]
        n_out = 0
        for p in range(lo, hi):
            count[kind[p]] = 0
        for p in range(lo, hi):
            if committed[p]:
                count[kind[p]] += 1
                n_out += 1
        rlo = res_off[s]
        rhi = res_off[s + 1]
        k = 0
        for q in range(rlo, rhi):
            if inner_rank[q] >= 0:
                k += 1
        picks = np.empty(k, dtype=np.int64)
        for q in range(rlo, rhi):
            if inner_rank[q] >= 0:
                picks[inner_rank[q]] = res_pos[q]
        for j in range(k):
            p = picks[j]
            kk = kind[p]
            if cap_of_kind[kk] >= 0 and count[kk] >= cap_of_kind[kk]:
                cap_dropped[s] += 1
                continue
            rank[p] = n_out
            n_out += 1
            count[kk] += 1


def slice_nested(slicer, table, slicer_args: Callable, tok, score, kind, offsets, targets, max_cells: int):
    """Run ``slicer`` (any slicer spec) over every segment of the score-sorted candidates;
    returns what ``slicers.slice_segments`` returns. ``slicer_args(spec, table)`` flattens a
    spec into the engine's ``SlicerArgs`` (whose ``run`` slices a non-nested spec)."""
    args = slicer_args(slicer, table)
    if not is_nested(slicer):
        return args.run(tok, score, kind, offsets, targets, max_cells)
    e_kind, e_req, cap_of_kind = args.e_kind, args.e_require, args.cap_of_kind
    throw = bool(args.throw_on_scarcity)
    n, n_seg = tok.shape[0], offsets.shape[0] - 1
    committed = np.zeros(n, dtype=np.bool_)
    rank = np.full(n, -1, dtype=np.int64)
    prealloc = np.zeros(n_seg, dtype=np.int64)
    err = np.zeros(n_seg, dtype=np.int8)
    err_a = np.zeros(n_seg, dtype=np.int64)
    err_b = np.zeros(n_seg, dtype=np.int64)
    sat = np.full((n_seg, e_kind.shape[0]), -1, dtype=np.int64)
    _phase1(kind, tok, offsets, targets, e_kind, e_req, throw, committed, rank, prealloc, err, err_a, err_b, sat)
    # phase 2: the inner slicer over the residual candidates (score order kept) and targets
    res_pos = np.flatnonzero(~committed)
    res_off = np.searchsorted(res_pos, offsets).astype(np.int64)
    res_targets = np.where(err == 0, np.maximum(targets - prealloc, 0), 0).astype(np.int64)
    i_rank, i_err, i_a, i_b, i_sat, i_drop = slice_nested(
        slicer.inner, table, slicer_args, tok[res_pos], score[res_pos], kind[res_pos], res_off, res_targets, max_cells
    )
    inner_failed = (err == 0) & (i_err != 0)
    err[inner_failed] = i_err[inner_failed]
    err_a[inner_failed] = i_a[inner_failed] + np.where(i_err[inner_failed] == codes.ERR_SCARCITY, e_kind.shape[0], 0)
    err_b[inner_failed] = i_b[inner_failed]
    cap_dropped = np.zeros(n_seg, dtype=np.int64)
    i_rank[np.repeat(inner_failed, np.diff(res_off))] = -1
    _phase3(kind, offsets, committed, res_pos, res_off, i_rank, cap_of_kind, rank, cap_dropped)
    rank[np.repeat(err != 0, np.diff(offsets))] = -1
    return rank, err, err_a, err_b, np.concatenate([sat, i_sat], axis=1), cap_dropped + i_drop
