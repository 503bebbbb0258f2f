"""CountQuotaSlice and CountConstrainedKnapsackSlice around an inner greedy or knapsack, over
every segment of the score-sorted candidates in one kernel (other inner slicers:
slicers/nested.py); and CountQuotaSlice around a greedy without the score sort
(:func:`count_greedy_slice`, the sweep's path).

Without the score sort, the three phases over candidates in row order: phase 1 commits each
entry's top ``require_count`` candidates of its kind by (score descending, NaN lowest; row) -
a selection, not a sort (:func:`_count_commit`); phase 2 is the greedy over every candidate
with the committed ones' tokens replaced by more than the remaining budget, so it never
selects them and needs no residual copy (``greedy.greedy_segments``, which never needs the
score order: its own order is (density, score, row)); phase 3 drops the greedy's picks over
their kind's count cap, in its output order, and numbers the rest after the committed ones
(:func:`_count_finish`).

A big segment (greedy's big path) folds the phases into greedy's own passes: see
``slicers.count_big``.
"""

from __future__ import annotations

import numpy as np

from cupel_np._jit import jit
from cupel_np.engine.batch_kernels import BIT1, popcount
from cupel_np.engine.slicers import greedy
from cupel_np.engine.slicers.codes import ERR_SCARCITY, ERR_TABLE_TOO_LARGE, MODE_COUNT
from cupel_np.engine.slicers.count_big import TOP_BUFFER, _count_big, kind_positions, top_by_sort
from cupel_np.engine.slicers.greedy import (
    fresh_ranks,
    greedy_segments,
)
from cupel_np.engine.slicers.quota import _inner_pick
from cupel_np.engine.sortkeys import _SIGN, NAN_LAST, desc_bits, score_cmp, stable_argsort

#: a segment's tokens stay below this (the bound ``greedy_segments`` assumes), the stand-ins
#: for the committed candidates in phase 2 included (:func:`_count_commit`)
TOKEN_LIMIT = 1 << 62

#: phase 3 gathers the picks of capped kinds this many candidates at a time
CHUNK = 4096

ZERO64 = np.uint64(0)


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
    return top_by_sort(score, pos, need)


@jit
def _count_commit(
    tok,
    score,
    kind,
    offsets,
    targets,
    e_kind,
    e_require,
    n_kinds,
    throw_on_scarcity,
    taken,
    err,
    err_a,
    err_b,
    satisfied,
):
    """Phase 1 (count-satisfy) over candidates in row order, per segment: each entry's top
    ``require_count`` candidates of its kind - by one pass over the segment that keeps every
    entry's top in a sorted buffer (``need <= TOP_BUFFER``; more: :func:`_top_of_kind`) -
    ``taken[s, e]`` of them. A shortfall is recorded in ``satisfied`` or, with
    ``throw_on_scarcity``, as the segment's ``ERR_SCARCITY`` (entry, count found), and the
    segment commits nothing. ``n_kinds``: kind ids are below it.

    Returns ``(ftok, com, com_off, res_targets, solo)``:

    ftok : phase 2's tokens - ``tok`` with each committed candidate's replaced by its segment's
        residual target + 1: the inner greedy over every candidate never selects it (it never
        fits, and the big path's frontier, the first key whose running total passes the
        target, is at or before its key), so phase 2 needs no residual copy (unwritten in the
        segments whose target is not positive)
    com, com_off : the committed positions, segment ``s``'s at ``com[com_off[s]:com_off[s+1]]``
        in their rank order (entry order, score order within an entry)
    res_targets : per segment phase 2's target (0: no phase 2)
    solo : per segment, the stand-ins would take its tokens to ``TOKEN_LIMIT`` (the bound the
        greedy's sums assume): ``ftok`` holds the real tokens there and phase 2 runs over a
        residual copy (:func:`_solo_greedy`)
    """
    n = tok.shape[0]
    n_seg = offsets.shape[0] - 1
    n_e = e_kind.shape[0]
    ftok = np.empty(n, dtype=np.int64)
    res_targets = np.empty(n_seg, dtype=np.int64)
    solo = np.empty(n_seg, dtype=np.bool_)
    entry_of = np.empty(n_kinds, dtype=np.int64)  # the entry whose top the buffer pass keeps
    for k in range(n_kinds):
        entry_of[k] = -1
    total_need = 0
    for e in range(n_e):
        if e_require[e] > 0:
            total_need += e_require[e]
            if e_kind[e] >= 0 and e_require[e] <= TOP_BUFFER:
                entry_of[e_kind[e]] = e
    size = 0
    for s in range(n_seg):
        m = offsets[s + 1] - offsets[s]
        size += m if m < total_need else total_need
    com = np.empty(size, dtype=np.int64)
    com_off = np.empty(n_seg + 1, dtype=np.int64)
    buf = np.empty(n_e * TOP_BUFFER, dtype=np.int64)  # entry e's top at e * TOP_BUFFER, sorted
    bkey = np.empty(n_e * TOP_BUFFER, dtype=np.uint64)  # their score keys
    nb = np.empty(n_e, dtype=np.int64)
    # per kind: a candidate enters its entry's buffer when its score key is below ``bound``
    # (the last kept one's: ties keep the earlier row) or the buffer is not full (``open_``);
    # kinds without a buffered entry: never (bound 0, not open). One test per candidate that
    # is almost always false, so the pass does not branch on the kind
    bound = np.empty(n_kinds, dtype=np.uint64)
    open_ = np.empty(n_kinds, dtype=np.bool_)
    sc = np.empty(1, dtype=np.float64)  # a score's bits through memory (a scalar bitcast)
    su = sc.view(np.uint64)
    c = 0
    for s in range(n_seg):
        lo = offsets[s]
        hi = offsets[s + 1]
        com_off[s] = c
        res_targets[s] = 0
        solo[s] = False
        if hi - lo == 0 or targets[s] <= 0:  # no phase 2 reads its ``ftok``
            continue
        for k in range(n_kinds):
            bound[k] = 0
            open_[k] = entry_of[k] >= 0
        for e in range(n_e):
            nb[e] = 0
        total = 0
        for p in range(lo, hi):
            t = tok[p]
            ftok[p] = t
            total += t
            k = kind[p]
            x = score[p]
            sc[0] = 0.0 - x  # as sortkeys.desc_bits: -0.0 and 0.0 share a key, NaN last
            b = su[0]
            key = NAN_LAST if x != x else (~b if b & _SIGN else b | _SIGN)
            if (key < bound[k]) | open_[k]:
                e = entry_of[k]
                base = e * TOP_BUFFER
                need = e_require[e]
                w = nb[e]
                if w == need:
                    w -= 1
                else:
                    nb[e] = w + 1
                while w > 0 and key < bkey[base + w - 1]:
                    buf[base + w] = buf[base + w - 1]
                    bkey[base + w] = bkey[base + w - 1]
                    w -= 1
                buf[base + w] = p
                bkey[base + w] = key
                if nb[e] == need:
                    open_[k] = False
                    bound[k] = bkey[base + need - 1]
        prealloc = 0
        failed = False
        for e in range(n_e):
            need = e_require[e]
            if need <= 0:
                continue
            kk = e_kind[e]
            got = 0
            if kk >= 0:
                if need <= TOP_BUFFER:
                    got = nb[e]
                    for j in range(got):
                        p = buf[e * TOP_BUFFER + j]
                        com[c] = p
                        c += 1
                        prealloc += tok[p]
                else:
                    top = _top_of_kind(score, kind, lo, hi, kk, need)
                    got = top.shape[0]
                    for j in range(got):
                        p = top[j]
                        com[c] = p
                        c += 1
                        prealloc += tok[p]
            taken[s, e] = got
            if got < need:
                if throw_on_scarcity:
                    err[s] = ERR_SCARCITY
                    err_a[s] = e
                    err_b[s] = got
                    failed = True
                    break
                satisfied[s, e] = got
        if failed:
            c = com_off[s]
            continue
        if targets[s] > prealloc:
            rt = targets[s] - prealloc
            res_targets[s] = rt
            n_c = c - com_off[s]
            # the stand-ins' n_c * (rt + 1) tokens on top of the residual's must stay below the limit
            if n_c > 0 and rt >= (TOKEN_LIMIT - 1 - (total - prealloc)) // n_c:
                solo[s] = True
            else:
                for j in range(com_off[s], c):
                    ftok[com[j]] = rt + 1
    com_off[n_seg] = c
    return ftok, com[:c], com_off, res_targets, solo


@jit
def _count_finish(kind, offsets, targets, err, com, com_off, e_kind, taken, cap_of_kind, rank, cap_dropped):
    """Phase 3 (cap enforcement) per segment, on the inner greedy's ranks over every candidate
    (``rank``; the committed ones are -1 there): each capped kind keeps its first ``cap -
    committed`` picks in output order and the rest are dropped; the kept picks' ranks follow
    the committed ones (``com``, ranks 0, 1, ...) compacted in their order.

    Per capped kind, its picks' ranks are bits of a bitmap, so the first ones in rank order
    are found a word at a time. Every rank is exact here: the segments are below greedy's big
    path (a big one takes ``count_big._count_big``), so greedy left no unordered prefix."""
    n_seg = offsets.shape[0] - 1
    n_e = e_kind.shape[0]
    slot = np.empty(cap_of_kind.shape[0], dtype=np.int64)  # per kind: its capped slot (-1: none)
    for k in range(cap_of_kind.shape[0]):
        slot[k] = -1
    s_entry = np.empty(n_e, dtype=np.int64)  # per capped slot: its entry
    n_cap = 0
    for e in range(n_e):
        kk = e_kind[e]
        if kk >= 0 and cap_of_kind[kk] >= 0:
            slot[kk] = n_cap
            s_entry[n_cap] = e
            n_cap += 1
    m_max = 0
    for s in range(n_seg):
        m = offsets[s + 1] - offsets[s]
        if m > m_max:
            m_max = m
    nw_max = (m_max + 63) >> 6 if n_cap > 0 else 0
    post = np.empty(n_cap * nw_max, dtype=np.uint64)  # slot ci's bitmap at ci * nw_max; 0 between segments
    for w in range(post.shape[0]):
        post[w] = 0
    drop = np.empty(nw_max, dtype=np.uint64)  # 0 between segments
    for w in range(nw_max):
        drop[w] = 0
    below = np.empty(nw_max, dtype=np.int64)  # the dropped ranks before each word
    blk = np.empty(CHUNK if n_cap > 0 else 0, dtype=np.int64)
    for s in range(n_seg):
        lo = offsets[s]
        hi = offsets[s + 1]
        if hi == lo or targets[s] <= 0 or err[s] != 0:
            continue
        n_c = com_off[s + 1] - com_off[s]
        n_drop = 0
        nw = (hi - lo + 63) >> 6
        if n_cap > 0:
            # the picks of capped kinds, a chunk at a time gathered without branching on them
            # (most candidates are not such picks, in no predictable pattern)
            for b0 in range(lo, hi, CHUNK):
                b1 = b0 + CHUNK if b0 + CHUNK < hi else hi
                c = 0
                for p in range(b0, b1):
                    blk[c] = p
                    c += (rank[p] >= 0) & (slot[kind[p]] >= 0)
                for j in range(c):
                    p = blk[j]
                    r = rank[p]
                    ci = slot[kind[p]]
                    post[ci * nw_max + (r >> 6)] |= BIT1 << np.uint64(r & 63)
            for ci in range(n_cap):
                e = s_entry[ci]
                kk = e_kind[e]
                keep = cap_of_kind[kk] - taken[s, e]
                if keep < 0:
                    keep = 0
                base = ci * nw_max
                for w in range(nw):  # the first `keep` in rank order stay
                    x = post[base + w]
                    if x == 0:
                        continue
                    post[base + w] = 0
                    if keep > 0:
                        pc = popcount(x)
                        if pc <= keep:
                            keep -= pc
                            continue
                        while keep > 0:
                            x &= x - BIT1  # the lowest rank stays
                            keep -= 1
                    drop[w] |= x
                    n_drop += popcount(x)
        if n_drop == 0:
            if n_c > 0:
                for p in range(lo, hi):
                    r = rank[p]
                    rank[p] = r + n_c if r >= 0 else r
        else:
            t = 0
            for w in range(nw):
                below[w] = t
                t += popcount(drop[w])
            for p in range(lo, hi):  # without branches: about half the candidates are picks
                r = rank[p]
                q = r if r >= 0 else 0
                word = drop[q >> 6]
                bit = BIT1 << np.uint64(q & 63)
                nr = n_c + q - below[q >> 6] - popcount(word & (bit - BIT1))
                rank[p] = nr if (r >= 0) & ((word & bit) == ZERO64) else -1
            for w in range(nw):
                drop[w] = 0
        for j in range(com_off[s], com_off[s + 1]):
            rank[com[j]] = j - com_off[s]
        cap_dropped[s] = n_drop


def _solo_greedy(tok, score, offsets, com, com_off, res_targets, solo, rank):
    """Phase 2 for the ``solo`` segments (see :func:`_count_commit`): the greedy over the
    segment's candidates less the committed ones, its ranks scattered back (rare: tokens
    near ``TOKEN_LIMIT``)."""
    for s in np.flatnonzero(solo).tolist():
        lo, hi = int(offsets[s]), int(offsets[s + 1])
        keep = np.ones(hi - lo, dtype=np.bool_)
        keep[com[com_off[s] : com_off[s + 1]] - lo] = False
        idx = np.flatnonzero(keep) + lo
        r = np.full(idx.shape[0], -1, dtype=np.int64)
        off = np.array([0, idx.shape[0]], dtype=np.int64)
        greedy_segments(tok[idx], score[idx], off, res_targets[s : s + 1], r)
        rank[idx] = r


def count_greedy_slice(
    args, tok, score, kind, offsets, targets, max_cells, compared=None, unordered=False, positions=None
):
    """CountQuotaSlice with an inner greedy over every segment, candidates in row order inside
    each segment; the arguments (``args``: a ``SlicerArgs``) and results of
    ``slicers.slice_segments`` (see the module docstring for the phases), and the unordered
    ranges of ranks (None without ``unordered``).

    ``compared`` (bool per candidate, ``placers.chrono_compared``): only the marked
    candidates' ranks need to be in exact order relative to each other (chronological
    placement without truncation); the greedy then leaves its fitting prefix unordered apart
    from them, and phase 3 finds each capped kind's kept picks in that prefix by selection.
    The selection is the same. ``unordered`` (without ``compared``): the prefix's kept picks
    stay unordered, ranked in index order after the committed ones, and are returned as the
    segments' ranges of ranks ``(r_off, r_lo, r_hi)`` (``place_stage.Candidates.prefix_ranges``:
    u-shaped placement orders only the ties it compares). ``positions``: the
    :class:`KindPositions` of these candidates for ``args.e_kind``, when the caller keeps
    it (every variant of a sweep over the same candidates shares it)."""
    assert args.mode == MODE_COUNT and not args.use_knapsack  # the caller's dispatch (SlicerArgs.run)
    n_seg, n_e = offsets.shape[0] - 1, args.e_kind.shape[0]
    unordered = unordered and compared is None
    err = np.zeros(n_seg, dtype=np.int8)
    err_a = np.zeros(n_seg, dtype=np.int64)
    err_b = np.zeros(n_seg, dtype=np.int64)
    satisfied = np.full((n_seg, n_e), -1, dtype=np.int64)
    taken = np.zeros((n_seg, n_e), dtype=np.int64)
    cap_dropped = np.zeros(n_seg, dtype=np.int64)
    pre_kept = np.zeros(n_seg, dtype=np.int64)
    n_com = np.zeros(n_seg, dtype=np.int64)
    sizes = np.diff(offsets)
    big = (sizes >= greedy.BIG_GREEDY) & (targets > 0)
    if n_seg and big.all():  # (the usual sweep: one big set) no other segment to rank
        rank = np.empty(int(offsets[-1]), dtype=np.int64)
    else:
        rank = _count_rows(
            args,
            tok,
            score,
            kind,
            offsets,
            np.where(big, 0, targets) if big.any() else targets,
            (err, err_a, err_b, satisfied, taken, cap_dropped, n_com),
        )
    if big.any() and positions is None:
        positions = kind_positions(kind, args.e_kind, args.cap_of_kind.shape[0])
    for s in np.flatnonzero(big).tolist():
        lo, hi = int(offsets[s]), int(offsets[s + 1])
        fail, n_com[s], cap_dropped[s], pre_kept[s] = _count_big(
            args,
            tok[lo:hi],
            score[lo:hi],
            kind[lo:hi],
            lo,
            int(targets[s]),
            None if compared is None else compared[lo:hi],
            compared is None and not unordered,
            rank[lo:hi],
            taken[s],
            satisfied[s],
            positions,
        )
        if fail >= 0:
            err[s], err_a[s], err_b[s] = ERR_SCARCITY, fail, taken[s, fail]
    ranges = None
    if unordered:  # one range per set: its prefix's kept picks, after the committed ones
        has = pre_kept > 1
        r_lo = n_com[has]
        ranges = np.concatenate(([0], np.cumsum(has))).astype(np.int64), r_lo, r_lo + pre_kept[has]
    return (rank, err, err_a, err_b, satisfied, cap_dropped), ranges


def _count_rows(args, tok, score, kind, offsets, targets, outs):
    """The three phases over the segments whose ``targets`` are positive (the others' ranks
    -1; none of them on greedy's big path, so every rank is exact: no unordered prefix to
    report, whatever ``compared`` or ``unordered`` the caller has): :func:`_count_commit`,
    ``greedy_segments`` over the stand-in tokens, :func:`_count_finish`. ``outs``: ``(err,
    err_a, err_b, satisfied, taken, cap_dropped, n_com)``, written at those segments.
    Returns the ranks."""
    err, err_a, err_b, satisfied, taken, cap_dropped, n_com = outs
    e_kind, cap_of_kind = args.e_kind, args.cap_of_kind
    ftok, com, com_off, res_targets, solo = _count_commit(
        tok,
        score,
        kind,
        offsets,
        targets,
        e_kind,
        args.e_require,
        cap_of_kind.shape[0],
        bool(args.throw_on_scarcity),
        taken,
        err,
        err_a,
        err_b,
        satisfied,
    )
    g_targets = np.where(solo, 0, res_targets) if solo.any() else res_targets
    rank = fresh_ranks(offsets, g_targets)  # unwritten where greedy's big path writes every rank
    if solo.any():
        _solo_greedy(tok, score, offsets, com, com_off, res_targets, solo, rank)
    greedy_segments(ftok, score, offsets, g_targets, rank)
    _count_finish(kind, offsets, targets, err, com, com_off, e_kind, taken, cap_of_kind, rank, cap_dropped)
    n_com[:] = np.diff(com_off)
    return rank
