"""CountQuotaSlice and CountConstrainedKnapsackSlice around an inner greedy or knapsack, over
every segment of the score-sorted candidates in one kernel (other inner slicers:
slicers/nested.py); and CountQuotaSlice around a greedy without the score sort
(:func:`count_greedy_slice`, the sweep's path).

Without the score sort, the three phases over candidates in row order: phase 1 commits each
entry's top ``require_count`` candidates of its kind by (score descending, NaN lowest; row) -
a selection, not a sort (:func:`_count_commit`); phase 2 is the greedy over the residual
candidates (``greedy.greedy_segments``, which never needs the score order: its own order is
(density, score, row)); phase 3 appends the greedy's picks in its output order, dropping those
over their kind's count cap (:func:`_count_finish`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from cupel_np._jit import jit
from cupel_np.engine.batch_kernels import BIT1, bit_rank, popcount
from cupel_np.engine.slicers.codes import ERR_SCARCITY, ERR_TABLE_TOO_LARGE, MODE_COUNT
from cupel_np.engine.slicers.greedy import RADIX_PICK, density_bits, greedy_segments, order_positions
from cupel_np.engine.slicers.quota import _inner_pick
from cupel_np.engine.sortkeys import desc_bits, radix_argsort, score_cmp, stable_argsort

#: an entry's top ``require_count`` of its kind are kept in a sorted buffer up to this many
#: (one pass, a comparison per candidate of the kind); more are found by sorting the kind
TOP_BUFFER = 64


@jit
def _slice_count(
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
    throw_on_scarcity,
    resort_inner,
    rank,
    err,
    err_a,
    err_b,
    satisfied,
    cap_dropped,
):
    """CountQuotaSlice / CountConstrainedKnapsackSlice over every segment of the score-sorted
    candidates.

    Parameters (the fields of ``SlicerArgs`` unpacked by ``slicers.slice_segments``; one
    flat list so that the kernel compiles for one signature)

    Per candidate, score-sorted, segment by segment (read only)
        tok, score, kind : int64 tokens, float64 score, int64 kind id
    Per segment (read only)
        offsets : int64 [n_seg + 1] into the candidates
        targets : int64 token target
    The inner slicer
        use_knapsack : a knapsack (CountConstrainedKnapsackSlice) rather than greedy
        bucket, max_cells : the knapsack's bucket size and DP limit
        resort_inner : re-sort the inner picks by score (count-constrained knapsack)
    The count entries
        e_kind, e_require : per entry, its kind id (-1 when absent) and require_count
        cap_of_kind : int64 per kind id, its cap_count (-1 none)
        throw_on_scarcity : scarcity_behavior "throw" (else the shortfall is recorded)
    Outputs
        rank : per candidate, its place in its segment's output (-1 on entry)
        err, err_a, err_b : per segment, ``ERR_SCARCITY`` (entry, count found) or
            ``ERR_TABLE_TOO_LARGE`` (the knapsack's candidates and capacity)
        satisfied : per segment and entry, the count found when it fell short (-1 on entry)
        cap_dropped : per segment, the phase-2 picks dropped by count caps
    """
    n_seg = offsets.shape[0] - 1
    n_entries = e_kind.shape[0]
    # per-call scratch indexed by kind; reset per segment for what the segment can touch
    count = np.zeros(cap_of_kind.shape[0], dtype=np.int64)
    for s in range(n_seg):
        lo = offsets[s]
        hi = offsets[s + 1]
        target = targets[s]
        m = hi - lo
        if m == 0 or target <= 0:
            continue
        out = np.empty(m, dtype=np.int64)
        n_out = 0
        committed = np.zeros(m, dtype=np.bool_)
        for p in range(lo, hi):
            count[kind[p]] = 0
        for e in range(n_entries):
            if e_kind[e] >= 0:
                count[e_kind[e]] = 0
        prealloc = 0
        failed = False
        for e in range(n_entries):
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
                        out[n_out] = p
                        n_out += 1
                        committed[p - lo] = True
                        prealloc += tok[p]
                        got += 1
                count[kk] = got
            if got < need:
                if throw_on_scarcity:
                    err[s] = ERR_SCARCITY
                    err_a[s] = e
                    err_b[s] = got
                    failed = True
                    break
                satisfied[s, e] = got
        if failed:
            continue
        residual_target = target - prealloc
        if residual_target > 0:
            n_res = m - np.sum(committed)
            cand = np.empty(n_res, dtype=np.int64)
            c = 0
            for p in range(lo, hi):
                if not committed[p - lo]:
                    cand[c] = p
                    c += 1
            inner = np.empty(n_res, dtype=np.int64)
            n_in, n_c, cap = _inner_pick(use_knapsack, tok, score, cand, residual_target, bucket, max_cells, inner, 0)
            if cap < 0:
                err[s] = ERR_TABLE_TOO_LARGE
                err_a[s] = n_c
                err_b[s] = -cap
                continue
            inner = inner[:n_in]
            if resort_inner and n_in > 1:
                inner = inner[stable_argsort(desc_bits(score[inner]))]
            for j in range(n_in):
                p = inner[j]
                kk = kind[p]
                cap_k = cap_of_kind[kk]
                if cap_k >= 0 and count[kk] >= cap_k:
                    cap_dropped[s] += 1
                    continue
                out[n_out] = p
                n_out += 1
                count[kk] += 1
        for j in range(n_out):
            rank[out[j]] = j


@jit
def _top_of_kind(score, kind, lo, hi, kk, need):
    """The first ``need`` candidates of kind ``kk`` in ``lo..hi`` (row order) in the score
    order (score descending, NaN lowest, then position), in that order (fewer when the kind
    has fewer)."""
    if need <= TOP_BUFFER:
        buf = np.empty(need, dtype=np.int64)
        nb = 0
        for p in range(lo, hi):
            if kind[p] != kk:
                continue
            x = score[p]
            if nb == need:
                if score_cmp(x, score[buf[nb - 1]]) >= 0:  # not before the last kept (ties: row)
                    continue
                w = nb - 1
            else:
                w = nb
                nb += 1
            while w > 0 and score_cmp(x, score[buf[w - 1]]) < 0:
                buf[w] = buf[w - 1]
                w -= 1
            buf[w] = p
        return buf[:nb]
    m = 0
    for p in range(lo, hi):
        if kind[p] == kk:
            m += 1
    pos = np.empty(m, dtype=np.int64)
    c = 0
    for p in range(lo, hi):
        if kind[p] == kk:
            pos[c] = p
            c += 1
    key = desc_bits(score[pos])
    o = radix_argsort(key) if m >= RADIX_PICK else stable_argsort(key)
    k = need if need < m else m
    top = np.empty(k, dtype=np.int64)
    for j in range(k):
        top[j] = pos[o[j]]
    return top


@jit
def _count_commit(
    tok,
    score,
    kind,
    offsets,
    targets,
    e_kind,
    e_require,
    throw_on_scarcity,
    marks,
    rank,
    taken,
    err,
    err_a,
    err_b,
    satisfied,
):
    """Phase 1 (count-satisfy) over candidates in row order, per segment: each entry's top
    ``require_count`` candidates of its kind (:func:`_top_of_kind`) get ranks 0, 1, ... (entry
    order, score order within an entry), ``taken[s, e]`` of them. A shortfall is recorded in
    ``satisfied`` or, with ``throw_on_scarcity``, as the segment's ``ERR_SCARCITY`` (entry,
    count found); a failed segment keeps no rank.

    Returns phase 2's input, the residual (every candidate not committed, in order):
    ``(res_pos, rtok, rscore, rmark, res_off, res_targets)``; ``rmark`` (when ``marks`` is not
    empty) is ``marks`` gathered."""
    n = tok.shape[0]
    n_seg = offsets.shape[0] - 1
    committed = np.zeros(n, dtype=np.bool_)
    res_targets = np.zeros(n_seg, dtype=np.int64)
    for s in range(n_seg):
        lo = offsets[s]
        hi = offsets[s + 1]
        if hi - lo == 0 or targets[s] <= 0:
            continue
        n_out = 0
        prealloc = 0
        for e in range(e_kind.shape[0]):
            need = e_require[e]
            if need <= 0:
                continue
            kk = e_kind[e]
            got = 0
            if kk >= 0:
                top = _top_of_kind(score, kind, lo, hi, kk, need)
                got = top.shape[0]
                for j in range(got):
                    p = top[j]
                    committed[p] = True
                    rank[p] = n_out
                    n_out += 1
                    prealloc += tok[p]
            taken[s, e] = got
            if got < need:
                if throw_on_scarcity:
                    err[s] = ERR_SCARCITY
                    err_a[s] = e
                    err_b[s] = got
                    for p in range(lo, hi):
                        rank[p] = -1
                    break
                satisfied[s, e] = got
        if err[s] == 0 and targets[s] > prealloc:
            res_targets[s] = targets[s] - prealloc
    has = marks.shape[0] > 0
    res_pos = np.empty(n, dtype=np.int64)
    rtok = np.empty(n, dtype=np.int64)
    rscore = np.empty(n, dtype=np.float64)
    rmark = np.empty(n if has else 0, dtype=np.bool_)
    res_off = np.empty(n_seg + 1, dtype=np.int64)
    c = 0
    for s in range(n_seg):
        res_off[s] = c
        for p in range(offsets[s], offsets[s + 1]):
            if not committed[p]:
                res_pos[c] = p
                rtok[c] = tok[p]
                rscore[c] = score[p]
                if has:
                    rmark[c] = marks[p]
                c += 1
    res_off[n_seg] = c
    return res_pos[:c], rtok[:c], rscore[:c], rmark[: c if has else 0], res_off, res_targets


@jit
def _count_finish(kind, offsets, res_pos, res_off, inner_rank, e_kind, taken, cap_of_kind, rank, cap_dropped, done):
    """Phase 3 (cap enforcement) per segment: the inner greedy's picks (``inner_rank`` per
    residual candidate) follow the committed ones in the inner output order, unless their
    kind's count (committed ones included) reached its cap; every residual candidate's
    ``rank`` is written (-1 when not selected or dropped). Segments with ``done[s]`` were
    finished by :func:`_capped_prefix` and are left alone."""
    count = np.zeros(cap_of_kind.shape[0], dtype=np.int64)
    for s in range(offsets.shape[0] - 1):
        if done[s]:
            continue
        rlo = res_off[s]
        rhi = res_off[s + 1]
        n_c = offsets[s + 1] - offsets[s] - (rhi - rlo)  # the committed candidates
        by_rank = np.empty(rhi - rlo, dtype=np.int64)  # a pick's kind when capped (else -1), by rank
        k = 0
        capped = False
        for q in range(rlo, rhi):
            r = inner_rank[q]
            if r >= 0:
                k += 1
                kk = kind[res_pos[q]]
                if cap_of_kind[kk] >= 0:
                    by_rank[r] = kk
                    capped = True
                else:
                    by_rank[r] = -1
        if not capped:  # nothing to drop: the picks follow the committed ones
            for q in range(rlo, rhi):
                r = inner_rank[q]
                rank[res_pos[q]] = n_c + r if r >= 0 else -1
            continue
        for e in range(e_kind.shape[0]):
            if e_kind[e] >= 0:
                count[e_kind[e]] = taken[s, e]
        drops = 0
        for r in range(k):  # in output order: the new rank, or -1 when over its kind's cap
            kk = by_rank[r]
            if kk >= 0:
                if count[kk] >= cap_of_kind[kk]:
                    by_rank[r] = -1
                    drops += 1
                    continue
                count[kk] += 1
            by_rank[r] = r - drops
        cap_dropped[s] = drops
        for q in range(rlo, rhi):
            r = inner_rank[q]
            nr = by_rank[r] if r >= 0 else -1
            rank[res_pos[q]] = n_c + nr if nr >= 0 else -1
        for e in range(e_kind.shape[0]):
            if e_kind[e] >= 0:
                count[e_kind[e]] = 0


@jit
def _capped_picks(kind, res_pos, rlo, rhi, inner_rank, n_pre, cap_of_kind):
    """The picks of a capped kind among the residual candidates ``rlo..rhi``: local positions
    and kinds of those in the unordered prefix (rank below ``n_pre``), then of the others."""
    pre = np.empty(rhi - rlo, dtype=np.int64)
    pre_k = np.empty(rhi - rlo, dtype=np.int64)
    post = np.empty(rhi - rlo, dtype=np.int64)
    post_k = np.empty(rhi - rlo, dtype=np.int64)
    n_a = 0
    n_b = 0
    for q in range(rlo, rhi):
        r = inner_rank[q]
        if r >= 0:
            k = kind[res_pos[q]]
            if cap_of_kind[k] >= 0:
                if r < n_pre:
                    pre[n_a] = q - rlo
                    pre_k[n_a] = k
                    n_a += 1
                else:
                    post[n_b] = q - rlo
                    post_k[n_b] = k
                    n_b += 1
    return pre[:n_a], pre_k[:n_a], post[:n_b], post_k[:n_b]


@jit
def _drop_compact(res_pos, rlo, rhi, inner_rank, drop, n_c, rank):
    """Ranks of the residual candidates ``rlo..rhi`` without the picks ``drop`` (local
    positions): the kept picks' ranks compacted in their order (less the dropped ranks below
    them, counted on a bitmap by rank), after the ``n_c`` committed ones; -1 for the rest."""
    n_words = (rhi - rlo + 63) >> 6
    bits = np.zeros(n_words, dtype=np.uint64)
    for j in range(drop.shape[0]):
        r = inner_rank[rlo + drop[j]]
        bits[r >> 6] |= BIT1 << np.uint64(r & 63)
    pre = np.empty(n_words, dtype=np.int64)
    t = 0
    for w in range(n_words):
        pre[w] = t
        t += popcount(bits[w])
    for q in range(rlo, rhi):
        r = inner_rank[q]
        nr = -1
        if r >= 0 and not (bits[r >> 6] >> np.uint64(r & 63)) & BIT1:
            nr = n_c + r - bit_rank(bits, pre, r)
        rank[res_pos[q]] = nr


class Residual(NamedTuple):
    """Phase 2's candidates (every candidate not committed, segment by segment) and the inner
    greedy's ranks over them."""

    res_pos: np.ndarray  #: the candidate's position
    res_off: np.ndarray  #: int64 [n_seg + 1] offsets
    rtok: np.ndarray  #: tokens
    rscore: np.ndarray  #: scores
    inner_rank: np.ndarray  #: the inner greedy's rank (-1: not picked)


def _capped_prefix(s, kind, offsets, res: Residual, n_pre, e_kind, taken, cap_of_kind, rank, cap_dropped):
    """Phase 3 for a segment whose inner greedy left a fitting prefix of ``n_pre`` picks
    unordered (ranks ``0..n_pre-1``, see ``greedy_segments(prefix=)``): each capped kind keeps
    its first ``cap - committed`` picks in the exact output order - found by selection on the
    density key among its prefix picks (``np.partition``; the picks on the boundary key in
    exact order), then its picks after the prefix by rank - and the kept picks' ranks are
    compacted in their order. Returns False (nothing written) when no pick has a capped
    kind."""
    res_pos, res_off, rtok, rscore, inner_rank = res
    rlo, rhi = int(res_off[s]), int(res_off[s + 1])
    pre_all, pre_k, post_all, post_k = _capped_picks(kind, res_pos, rlo, rhi, inner_rank, n_pre, cap_of_kind)
    if pre_all.size + post_all.size == 0:
        return False
    count = {}
    for e in range(e_kind.shape[0]):
        if e_kind[e] >= 0:
            count[int(e_kind[e])] = int(taken[s, e])
    drops = []
    for kk in np.flatnonzero(cap_of_kind >= 0).tolist():  # pre_k / post_k hold capped kinds only
        left = max(0, int(cap_of_kind[kk]) - count.get(kk, 0))
        pre = pre_all[pre_k == kk]
        post = post_all[post_k == kk]
        if pre.size > left:
            keep = np.zeros(pre.size, dtype=np.bool_)
            if left > 0:
                kb = density_bits(rtok[rlo + pre], rscore[rlo + pre])
                thr = np.partition(kb, left - 1)[left - 1]
                below = kb < thr
                keep[below] = True
                ties = np.flatnonzero(kb == thr)
                need = left - int(below.sum())
                first = order_positions(rtok, rscore, rlo + pre[ties])[:need] - rlo
                keep[np.searchsorted(pre, first)] = True
            drops += [pre[~keep], post]
        else:
            rest = left - pre.size
            if post.size > rest:
                drops.append(post[np.argsort(inner_rank[rlo + post])[rest:]])
    drop = np.concatenate(drops) if drops else np.zeros(0, dtype=np.int64)
    n_c = int(offsets[s + 1] - offsets[s]) - (rhi - rlo)
    _drop_compact(res_pos, rlo, rhi, inner_rank, drop.astype(np.int64), n_c, rank)
    cap_dropped[s] = drop.size
    return True


def count_greedy_slice(args, tok, score, kind, offsets, targets, max_cells, compared=None):
    """CountQuotaSlice with an inner greedy over every segment, candidates in row order inside
    each segment; the arguments (``args``: a ``SlicerArgs``) and results of
    ``slicers.slice_segments`` (see the module docstring for the phases).

    ``compared`` (bool per candidate, ``placers.chrono_compared``): only the marked
    candidates' ranks need to be in exact order relative to each other (chronological
    placement without truncation); the greedy then leaves its fitting prefix unordered apart
    from them, and phase 3 finds each capped kind's kept picks in that prefix by selection
    (:func:`_capped_prefix`). The selection is the same."""
    assert args.mode == MODE_COUNT and not args.use_knapsack  # the caller's dispatch (SlicerArgs.run)
    e_kind, cap_of_kind = args.e_kind, args.cap_of_kind
    n, n_seg, n_e = tok.shape[0], offsets.shape[0] - 1, e_kind.shape[0]
    rank = np.empty(n, dtype=np.int64)  # every position written: phase 1 or phase 3
    err = np.zeros(n_seg, dtype=np.int8)
    err_a = np.zeros(n_seg, dtype=np.int64)
    err_b = np.zeros(n_seg, dtype=np.int64)
    satisfied = np.full((n_seg, n_e), -1, dtype=np.int64)
    taken = np.zeros((n_seg, n_e), dtype=np.int64)
    marks = _NO_MARKS if compared is None else compared
    res_pos, rtok, rscore, rmark, res_off, res_targets = _count_commit(
        tok,
        score,
        kind,
        offsets,
        targets,
        e_kind,
        args.e_require,
        bool(args.throw_on_scarcity),
        marks,
        rank,
        taken,
        err,
        err_a,
        err_b,
        satisfied,
    )
    inner_rank = np.full(res_pos.shape[0], -1, dtype=np.int64)
    cap_dropped = np.zeros(n_seg, dtype=np.int64)
    done = np.zeros(n_seg, dtype=np.bool_)
    if compared is None:
        greedy_segments(rtok, rscore, res_off, res_targets, inner_rank)
    else:
        prefix = np.zeros(n_seg, dtype=np.int64)
        greedy_segments(rtok, rscore, res_off, res_targets, inner_rank, prefix=prefix, compared=rmark)
        if (cap_of_kind >= 0).any():
            for s in np.flatnonzero(prefix > 1).tolist():
                done[s] = _capped_prefix(
                    s,
                    kind,
                    offsets,
                    Residual(res_pos, res_off, rtok, rscore, inner_rank),
                    int(prefix[s]),
                    e_kind,
                    taken,
                    cap_of_kind,
                    rank,
                    cap_dropped,
                )
    _count_finish(kind, offsets, res_pos, res_off, inner_rank, e_kind, taken, cap_of_kind, rank, cap_dropped, done)
    return rank, err, err_a, err_b, satisfied, cap_dropped


_NO_MARKS = np.zeros(0, dtype=np.bool_)
