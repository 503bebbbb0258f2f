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

A big segment (greedy's big path, ``greedy.BIG_GREEDY`` candidates) folds the phases into
greedy's own passes (:func:`_count_big`): phases 1 and 3 read only the named kinds'
candidates (:class:`KindPositions`, which a sweep's variants share); after the pass that
builds the density keys and the frontier's histogram, phase 1 takes each entry's top from
its kind's candidates and the committed ones leave the histogram with a key no candidate has
(:data:`MARK`, so no stand-in tokens and no residual copy) (:func:`_count_frontier`); phase 3
marks each capped kind's fitting-prefix picks past its cap the same way before the prefix
pass ranks the rest (:func:`_cap_prefix`), and drops the walk's past it afterwards
(:func:`_cap_walk`): no pass over the candidates for phases 1 and 3, none for stand-in
tokens and none to renumber the ranks.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from cupel_np._jit import jit, jit_inner
from cupel_np.engine.batch_kernels import BIT1, popcount
from cupel_np.engine.slicers import greedy
from cupel_np.engine.slicers.codes import ERR_SCARCITY, ERR_TABLE_TOO_LARGE, MODE_COUNT
from cupel_np.engine.slicers.greedy import (
    FRONTIER_BLOCK,
    RADIX_PICK,
    GreedyScratch,
    _walk_chunks,
    density_key,
    fresh_ranks,
    greedy_segments,
    order_positions,
)
from cupel_np.engine.slicers.packed import _rank_packed, pack_bits
from cupel_np.engine.slicers.quota import _inner_pick
from cupel_np.engine.sortkeys import _SIGN, NAN_LAST, desc_bits, radix_argsort, score_cmp, stable_argsort

#: an entry's top ``require_count`` of its kind are kept in a sorted buffer up to this many
#: (one pass, a comparison per candidate of the kind); more are found by sorting the kind
TOP_BUFFER = 64

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


@jit_inner
def _kth_key(keys, k):
    """The ``k``-th smallest (from 0) of the uint64 ``keys``: a radix selection on 16-bit
    digits (linear time)."""
    nb = 65536
    mask = np.uint64(nb - 1)
    cnt = np.empty(nb, dtype=np.int64)
    idx = np.empty(keys.shape[0], dtype=np.int64)
    for i in range(keys.shape[0]):
        idx[i] = i
    m = keys.shape[0]
    prefix = np.uint64(0)
    for level in range(4):
        sh = np.uint64(48 - 16 * level)
        for b in range(nb):
            cnt[b] = 0
        for j in range(m):
            cnt[(keys[idx[j]] >> sh) & mask] += 1
        b = 0
        while k >= cnt[b]:
            k -= cnt[b]
            b += 1
        prefix = (prefix << np.uint64(16)) | np.uint64(b)
        c = 0
        for j in range(m):
            i = idx[j]
            if keys[i] >> sh == prefix:
                idx[c] = i
                c += 1
        m = c
    return prefix


@jit_inner
def _drop_prefix(tok, score, kind, rank, pre, n_p, kk, cnt, left, drop):
    """Of the ``cnt`` picks of kind ``kk`` in a greedy's unordered prefix (among ``pre[:n_p]``,
    positions in row order), keep the first ``left < cnt`` in the slicer's output order
    (density key, then score, then row): those below the ``left``-th key by selection, then
    of the candidates on that key the first by (score, row). The others' ranks are set in
    the ``drop`` bitmap; returns how many."""
    pk = np.empty(cnt, dtype=np.int64)
    c = 0
    for j in range(n_p):
        p = pre[j]
        if kind[p] == kk:
            pk[c] = p
            c += 1
    keep = np.empty(cnt, dtype=np.bool_)
    for j in range(cnt):
        keep[j] = False
    if left > 0:
        # density_bits(tok[pk], score[pk]) without the gathered copies
        y = np.empty(cnt, dtype=np.float64)
        for j in range(cnt):
            p = pk[j]
            y[j] = density_key(tok[p], score[p])
        kb = y.view(np.uint64)
        for j in range(cnt):  # float bit patterns to order-preserving keys (as density_bits)
            b = kb[j]
            kb[j] = ~b if b & _SIGN else b | _SIGN
        thr = _kth_key(kb, left - 1)
        n_below = 0
        n_tie = 0
        for j in range(cnt):
            if kb[j] < thr:
                keep[j] = True
                n_below += 1
            elif kb[j] == thr:
                n_tie += 1
        ties = np.empty(n_tie, dtype=np.int64)  # indexes into pk, in row order
        c = 0
        for j in range(cnt):
            if kb[j] == thr:
                ties[c] = j
                c += 1
        o = stable_argsort(desc_bits(score[pk[ties]]))  # (score, row): ties are in row order
        for q in range(left - n_below):
            keep[ties[o[q]]] = True
    for j in range(cnt):
        if not keep[j]:
            r = rank[pk[j]]
            drop[r >> 6] |= BIT1 << np.uint64(r & 63)
    return cnt - left


@jit
def _count_finish(
    tok,
    score,
    kind,
    offsets,
    targets,
    err,
    prefix,
    com,
    com_off,
    e_kind,
    taken,
    cap_of_kind,
    rank,
    cap_dropped,
    pre_kept,
):
    """Phase 3 (cap enforcement) per segment, on the inner greedy's ranks over every candidate
    (``rank``; the committed ones are -1 there): each capped kind keeps its first ``cap -
    committed`` picks in output order and the rest are dropped; the kept picks' ranks follow
    the committed ones (``com``, ranks 0, 1, ...) compacted in their order.

    Per capped kind, its picks' ranks beyond the segment's unordered prefix (``prefix[s]``
    ranks, see ``greedy_segments(prefix=)``; 0: every rank exact) are bits of a bitmap, so
    the first ones in rank order are found a word at a time; when the prefix holds more than
    the kind may keep, the kept ones there are found by selection (:func:`_drop_prefix`) and
    every pick beyond it is dropped. ``pre_kept[s]`` (0 on entry): how many of the prefix's
    picks stay (after the committed ones, ranks ``n_c .. n_c + pre_kept[s] - 1``, still in
    index order when the prefix was)."""
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
    pre_n = np.empty(n_cap, dtype=np.int64)
    pre_max = 0
    for s in range(n_seg):
        if prefix[s] > pre_max:
            pre_max = prefix[s]
    pre = np.empty(pre_max + 1 if n_cap > 0 else 0, dtype=np.int64)  # a segment's capped picks in its prefix
    blk = np.empty(CHUNK if n_cap > 0 else 0, dtype=np.int64)
    for s in range(n_seg):
        lo = offsets[s]
        hi = offsets[s + 1]
        if hi == lo or targets[s] <= 0 or err[s] != 0:
            continue
        n_c = com_off[s + 1] - com_off[s]
        n_drop = 0
        n_pre = prefix[s]
        pre_drop = 0  # the prefix's picks dropped
        nw = (hi - lo + 63) >> 6
        if n_cap > 0:
            n_p = 0
            for ci in range(n_cap):
                pre_n[ci] = 0
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
                    in_pre = r < n_pre
                    pre[n_p] = p  # kept when in the prefix (``pre`` has room for one more)
                    n_p += in_pre
                    pre_n[ci] += in_pre
                    bit = BIT1 << np.uint64(r & 63)
                    post[ci * nw_max + (r >> 6)] |= ZERO64 if in_pre else bit
            for ci in range(n_cap):
                e = s_entry[ci]
                kk = e_kind[e]
                keep = cap_of_kind[kk] - taken[s, e]
                if keep < 0:
                    keep = 0
                if pre_n[ci] > keep:
                    d = _drop_prefix(tok, score, kind, rank, pre, n_p, kk, pre_n[ci], keep, drop)
                    n_drop += d
                    pre_drop += d
                    keep = 0
                else:
                    keep -= pre_n[ci]
                base = ci * nw_max
                for w in range(nw):  # beyond the prefix: the first `keep` in rank order stay
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
        pre_kept[s] = n_pre - pre_drop


#: a density key no candidate has (``greedy.density_key`` is never NaN; the largest key is
#: +inf's): the big path's mark for the committed candidates and the dropped prefix picks
MARK = np.uint64(0xFFFFFFFFFFFFFFFF)


class KindPositions(NamedTuple):
    """The candidates of the kinds a count quota names, by kind: what its big-set path reads
    of the kinds, which no score or target changes (:func:`kind_positions`), so a sweep's
    variants share it (``SlicerArgs.shared_kind_positions``)."""

    slot: np.ndarray  #: int64 per kind id: its index here, -1 when not listed
    off: np.ndarray  #: int64 [n_listed + 1] into ``pos``
    pos: np.ndarray  #: the listed kinds' candidate positions, kind by kind, ascending inside


@jit
def _kind_positions(kind, slot, n_listed):
    cnt = np.zeros(n_listed + 1, dtype=np.int64)
    for p in range(kind.shape[0]):
        cnt[slot[kind[p]] + 1] += 1  # unlisted kinds (slot -1) count in cnt[0], unused
    off = np.empty(n_listed + 1, dtype=np.int64)
    off[0] = 0
    for j in range(n_listed):
        off[j + 1] = off[j] + cnt[j + 1]
    pos = np.empty(off[n_listed], dtype=np.int64)
    fill = off[:n_listed].copy()
    for p in range(kind.shape[0]):
        j = slot[kind[p]]
        if j >= 0:
            pos[fill[j]] = p
            fill[j] += 1
    return off, pos


def kind_positions(kind: np.ndarray, e_kind: np.ndarray, n_kinds: int) -> KindPositions:
    """:class:`KindPositions` of the candidates' ``kind`` (ids below ``n_kinds``) for the
    kinds ``e_kind`` names (-1: none)."""
    slot = np.full(n_kinds, -1, dtype=np.int64)
    listed = np.unique(e_kind[e_kind >= 0])
    slot[listed] = np.arange(listed.shape[0])
    return KindPositions(slot, *_kind_positions(kind, slot, listed.shape[0]))


@jit
def _top_of_positions(score, pos, base, need):
    """The first ``need`` of the candidates ``pos - base`` (ascending) in the score order
    (score descending, NaN lowest, then position), in that order (fewer when there are
    fewer): a sorted buffer in one pass up to ``TOP_BUFFER``, else a sort."""
    m = pos.shape[0]
    if need <= TOP_BUFFER:
        buf = np.empty(need, dtype=np.int64)
        bkey = np.empty(need, dtype=np.uint64)
        sc = np.empty(1, dtype=np.float64)  # a score's bits through memory (a scalar bitcast)
        su = sc.view(np.uint64)
        nb = 0
        for j in range(m):
            p = pos[j] - base
            x = score[p]
            sc[0] = 0.0 - x  # as sortkeys.desc_bits: -0.0 and 0.0 share a key, NaN last
            b = su[0]
            key = NAN_LAST if x != x else (~b if b & _SIGN else b | _SIGN)
            if nb == need:
                if key >= bkey[nb - 1]:  # not before the last kept (ties: the earlier stays)
                    continue
                w = nb - 1
            else:
                w = nb
                nb += 1
            while w > 0 and key < bkey[w - 1]:
                buf[w] = buf[w - 1]
                bkey[w] = bkey[w - 1]
                w -= 1
            buf[w] = p
            bkey[w] = key
        return buf[:nb]
    loc = np.empty(m, dtype=np.int64)
    for j in range(m):
        loc[j] = pos[j] - base
    key = desc_bits(score[loc])
    o = radix_argsort(key) if m >= RADIX_PICK else stable_argsort(key)
    k = need if need < m else m
    top = np.empty(k, dtype=np.int64)
    for j in range(k):
        top[j] = loc[o[j]]
    return top


@jit
def _count_frontier(
    tok, score, target, e_kind, e_require, kslot, kpos, ka, kz, base, throw_on_scarcity, taken, satisfied, kb, skb, stok
):
    """Phases 1 and 2's frontier for one big segment (the arrays are the segment's): the
    candidates' density keys (into ``kb``) and the token histogram of their first 16 bits in
    one pass (as ``greedy._frontier``), then each entry's top candidates by score among its
    kind's (``kpos[ka[j]:kz[j]] - base`` for the kind's slot ``j = kslot[kind]``,
    :class:`KindPositions`). The committed candidates then leave the histogram and get the
    key :data:`MARK`, so the frontier that follows is the residual's: the inner greedy over
    the uncommitted candidates with the residual target.

    ``taken``/``satisfied``: the segment's rows (per entry). Returns ``(com, fail, rt, thr,
    used)``: the committed positions in rank order (entry order, score order within an
    entry), the entry that fell short under ``throw_on_scarcity`` (-1: none; ``taken`` holds
    the count it found), the residual target (0: no phase 2), the frontier key (``MARK``
    when every uncommitted candidate fits) and the tokens below it."""
    n = tok.shape[0]
    n_e = e_kind.shape[0]
    nb = 65536
    mask = np.uint64(nb - 1)
    w = np.zeros(nb, dtype=np.int64)
    sh = np.uint64(48)
    y = np.empty(FRONTIER_BLOCK, dtype=np.float64)
    yb = y.view(np.uint64)
    for lo in range(0, n, FRONTIER_BLOCK):
        hi = min(lo + FRONTIER_BLOCK, n)
        for i in range(lo, hi):
            y[i - lo] = density_key(tok[i], score[i])
        for i in range(lo, hi):  # float bit patterns to order-preserving keys (as density_bits)
            b = yb[i - lo]
            b = ~b if b & _SIGN else b | _SIGN
            kb[i] = b
            w[b >> sh] += tok[i]
    total_need = 0
    for e in range(n_e):
        if e_require[e] > 0:
            total_need += e_require[e]
    com = np.empty(total_need, dtype=np.int64)
    c = 0
    prealloc = 0
    for e in range(n_e):
        need = e_require[e]
        if need <= 0:
            continue
        kk = e_kind[e]
        got = 0
        if kk >= 0:
            j = kslot[kk]
            top = _top_of_positions(score, kpos[ka[j] : kz[j]], base, need)
            got = top.shape[0]
            for q in range(got):
                p = top[q]
                com[c] = p
                c += 1
                prealloc += tok[p]
        taken[e] = got
        if got < need:
            if throw_on_scarcity:
                return com[:c], e, 0, MARK, 0
            satisfied[e] = got
    com = com[:c]
    for q in range(c):  # the committed candidates leave phase 2
        p = com[q]
        w[kb[p] >> sh] -= tok[p]
        kb[p] = MARK
    if target <= prealloc:
        return com, -1, 0, MARK, 0
    rt = target - prealloc
    # the frontier, as greedy._frontier (MARK's first 16 bits hold no tokens: never crossing)
    acc = 0
    b = 0
    while b < nb and acc + w[b] <= rt:
        acc += w[b]
        b += 1
    if b == nb:
        return com, -1, rt, MARK, -1
    prefix = np.uint64(b)
    m = 0
    for i in range(n):
        k = kb[i]
        if k >> sh == prefix:
            skb[m] = k
            stok[m] = tok[i]
            m += 1
    for level in range(3):
        sh = np.uint64(32 - 16 * level)
        for j in range(nb):
            w[j] = 0
        for j in range(m):
            w[(skb[j] >> sh) & mask] += stok[j]
        b = 0
        while acc + w[b] <= rt:
            acc += w[b]
            b += 1
        prefix = (prefix << np.uint64(16)) | np.uint64(b)
        q = 0
        for j in range(m):
            k = skb[j]
            skb[q] = k
            stok[q] = stok[j]
            q += 1 if k >> sh == prefix else 0
        m = q
    return com, -1, rt, prefix, acc


@jit
def _cap_prefix(kb, score, thr, kpos, ka, kz, base, keep):
    """Phase 3 inside one big segment's fitting prefix (density key below ``thr``), before
    the prefix is ranked: each capped kind (its candidates ``kpos[ka[ci]:kz[ci]] - base``,
    ascending) keeps its first ``keep[ci]`` prefix picks in output order (density key, then
    score, then row: below the ``keep``-th key by selection, then on that key by (score,
    row)) and the others get the key :data:`MARK`, so the prefix pass neither ranks nor walks
    them. ``keep`` becomes what each kind may still keep beyond the prefix; returns the picks
    dropped."""
    dropped = 0
    for ci in range(keep.shape[0]):
        left = keep[ci]
        cnt = 0
        for j in range(ka[ci], kz[ci]):
            cnt += 1 if kb[kpos[j] - base] < thr else 0
        if cnt <= left:
            keep[ci] = left - cnt
            continue
        keep[ci] = 0
        pk = np.empty(cnt + 1, dtype=np.int64)  # the kind's prefix picks, ascending (+1: the
        c = 0  # branch-free append writes one past the last)
        for j in range(ka[ci], kz[ci]):
            p = kpos[j] - base
            pk[c] = p
            c += 1 if kb[p] < thr else 0
        drop = np.ones(c, dtype=np.bool_)
        if left > 0:
            kp = np.empty(c, dtype=np.uint64)
            for j in range(c):
                kp[j] = kb[pk[j]]
            t = _kth_key(kp, left - 1)
            n_below = 0
            n_tie = 0
            for j in range(c):
                if kp[j] < t:
                    drop[j] = False
                    n_below += 1
                elif kp[j] == t:
                    n_tie += 1
            ties = np.empty(n_tie, dtype=np.int64)  # indexes into pk, in row order
            q = 0
            for j in range(c):
                if kp[j] == t:
                    ties[q] = j
                    q += 1
            o = stable_argsort(desc_bits(score[pk[ties]]))  # (score, row): ties are in row order
            for q in range(left - n_below):
                drop[ties[o[q]]] = False
        for j in range(c):
            if drop[j]:
                kb[pk[j]] = MARK
                dropped += 1
    return dropped


@jit
def _count_prefix(kb, tok, thr, remaining, rank, r0, cand):
    """``greedy._prefix_ranks`` with the keys :data:`MARK` left out: the prefix candidates
    (key below ``thr``) get ranks ``r0, r0 + 1, ...`` in index order, every other candidate -1;
    the candidates beyond the prefix that still fit ``remaining`` tokens (not marked) go to
    ``cand[:m]``. Returns the prefix's count and ``m``. Branch-free."""
    n = kb.shape[0]
    c = 0
    m = 0
    for i in range(n):
        key = kb[i]
        inside = 1 if key < thr else 0
        rank[i] = (r0 + c + 1) * inside - 1
        c += inside
        cand[m] = i
        m += (1 - inside) & (1 if key != MARK else 0) & (1 if tok[i] <= remaining else 0)
    return c, m


@jit
def _count_prefix_marked(kb, tok, thr, remaining, rank, r0, marked, bits, pk, pos, kp, cand):
    """``greedy._prefix_ranks_marked`` with the keys :data:`MARK` left out (as
    :func:`_count_prefix`; unmarked prefix ranks from ``r0``). Returns ``(k, c, m)``."""
    n = kb.shape[0]
    hi_mask = ~((np.uint64(1) << np.uint64(bits)) - np.uint64(1))
    k = 0
    c = 0
    m = 0
    for i in range(n):
        key = kb[i]
        inside = 1 if key < thr else 0
        mk = inside & (1 if marked[i] else 0)
        un = inside - mk
        rank[i] = (r0 + c + 1) * un - 1
        c += un
        pk[k] = (key & hi_mask) | np.uint64(k)
        pos[k] = i
        kp[k] = key
        k += mk
        cand[m] = i
        m += (1 - inside) & (1 if key != MARK else 0) & (1 if tok[i] <= remaining else 0)
    return k, c, m


@jit
def _cap_walk(cand, rank, kind, slot, keep, r0, byrank):
    """Phase 3 beyond one big segment's prefix: the walk's picks (among ``cand``, ranks from
    ``r0``, exact) in rank order; a capped kind's past its ``keep[slot]`` are dropped and the
    rest renumbered from ``r0``. ``byrank``: scratch as long as ``cand``. Returns the
    picks dropped."""
    n_w = 0
    for j in range(cand.shape[0]):
        p = cand[j]
        r = rank[p]
        if r >= r0:
            byrank[r - r0] = p
            n_w += 1
    dropped = 0
    nr = r0
    for q in range(n_w):
        p = byrank[q]
        ci = slot[kind[p]]
        if ci >= 0:
            if keep[ci] > 0:
                keep[ci] -= 1
            else:
                rank[p] = -1
                dropped += 1
                continue
        rank[p] = nr
        nr += 1
    return dropped


def _count_big(args, tok, score, kind, lo, target, marked, order, rank, taken, satisfied, kp_all):
    """CountQuotaSlice over greedy for one big segment (the arrays are the segment's, which
    starts at candidate ``lo``; ``taken``/``satisfied`` its rows; ``kp_all``: the
    :class:`KindPositions` of every candidate), phase 3 folded into phase 2: the frontier of
    the residual (:func:`_count_frontier`), the capped kinds' prefix picks past their caps
    marked (:func:`_cap_prefix`), the prefix pass ranking what is left after the committed
    ranks (with ``marked``: the unmarked ones in index order, then the marked ones in exact
    order, as ``greedy_segments(compared=)``), the exact walk beyond the frontier with its
    capped picks dropped (:func:`_cap_walk`). ``order``: the kept prefix in exact order too (no
    unordered prefix). Writes every rank of the segment. Returns ``(fail, n_c, dropped, kept
    prefix)`` (``fail``: the entry short under scarcity "throw", -1 none)."""
    n = tok.shape[0]
    e_kind, cap_of_kind = args.e_kind, args.cap_of_kind
    # the segment's range of each listed kind's positions
    ka = np.empty(kp_all.off.shape[0] - 1, dtype=np.int64)
    kz = np.empty(kp_all.off.shape[0] - 1, dtype=np.int64)
    for j in range(ka.shape[0]):
        part = kp_all.pos[kp_all.off[j] : kp_all.off[j + 1]]
        ka[j] = kp_all.off[j] + np.searchsorted(part, lo)
        kz[j] = kp_all.off[j] + np.searchsorted(part, lo + n)
    caps = [int(kk) for kk in e_kind if kk >= 0 and cap_of_kind[kk] >= 0]  # (entry order)
    cslot = np.full(cap_of_kind.shape[0], -1, dtype=np.int64)  # per kind: its capped index
    cslot[caps] = np.arange(len(caps))
    ci_of = kp_all.slot[caps]
    scratch = GreedyScratch()  # (names as greedy's big path's)
    kb = scratch.get("kb", n, np.uint64)
    pk = scratch.get("pk", n, np.uint64)
    pos = scratch.get("pos", n, np.int64)
    com, fail, rt, thr, used = _count_frontier(
        tok,
        score,
        target,
        e_kind,
        args.e_require,
        kp_all.slot,
        kp_all.pos,
        ka,
        kz,
        lo,
        bool(args.throw_on_scarcity),
        taken,
        satisfied,
        kb,
        pk,
        pos,
    )
    n_c = com.shape[0]
    if fail >= 0 or rt <= 0:
        rank[:] = -1
        if fail >= 0:
            return fail, 0, 0, 0
        rank[com] = np.arange(n_c)
        return -1, n_c, 0, 0
    thr = np.uint64(thr)
    every = used < 0
    remaining = 0 if every else rt - used
    keep = np.array([max(int(cap_of_kind[kk] - taken[e]), 0) for e, kk in enumerate(e_kind) if kk in caps], np.int64)
    dropped = _cap_prefix(kb, score, thr, kp_all.pos, ka[ci_of], kz[ci_of], lo, keep) if caps else 0
    cand = scratch.get("cand", n, np.int64)
    if marked is None:
        n_pre, m = _count_prefix(kb, tok, thr, remaining, rank, n_c, cand)
    else:
        bits = pack_bits(n)
        kp = scratch.get("kp", n, np.uint64)
        k, n_pre, m = _count_prefix_marked(kb, tok, thr, remaining, rank, n_c, marked, bits, pk, pos, kp, cand)
        if k:
            pk = pk[:k]
            pk.sort()  # NumPy's SIMD sort of distinct uint64 keys, in place
            r, sp = scratch.get("r", k, np.int64), scratch.get("sp", k, np.float64)
            _rank_packed(pk, pos[:k], kp[:k], bits, score, rank, n_c + n_pre, r, sp)
            n_pre += k
    cand = cand[:m]
    if m:
        _walk_chunks(kb, tok, score, cand, remaining, rank, n_c + n_pre, greedy.MIN_CHUNK)
        if caps:
            dropped += _cap_walk(cand, rank, kind, cslot, keep, n_c + n_pre, scratch.get("c_walk", m, np.int64))
    if order and n_pre > 1:
        p = np.flatnonzero((rank >= n_c) & (rank < n_c + n_pre))
        # (the prefix's keys computed again, as greedy's complete_ranks does: the one path of a
        # big set that orders a whole prefix outside the place stage, which warmup reaches)
        rank[order_positions(tok, score, p)] = n_c + np.arange(p.shape[0])
    rank[com] = np.arange(n_c)
    return -1, n_c, dropped, n_pre


def _solo_greedy(tok, score, offsets, com, com_off, res_targets, solo, rank, prefix, compared):
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
        pf = None if prefix is None else np.zeros(1, dtype=np.int64)
        marks = None if compared is None else compared[idx]
        greedy_segments(tok[idx], score[idx], off, res_targets[s : s + 1], r, prefix=pf, compared=marks)
        rank[idx] = r
        if prefix is not None:
            prefix[s] = pf[0]


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
            compared,
            unordered,
            (err, err_a, err_b, satisfied, taken, cap_dropped, pre_kept, n_com),
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


def _count_rows(args, tok, score, kind, offsets, targets, compared, unordered, outs):
    """The three phases over the segments whose ``targets`` are positive (the others' ranks
    -1): :func:`_count_commit`, ``greedy_segments`` over the stand-in tokens,
    :func:`_count_finish`. ``outs``: ``(err, err_a, err_b, satisfied, taken, cap_dropped,
    pre_kept, n_com)``, written at those segments. Returns the ranks."""
    err, err_a, err_b, satisfied, taken, cap_dropped, pre_kept, n_com = outs
    e_kind, cap_of_kind = args.e_kind, args.cap_of_kind
    n_seg = offsets.shape[0] - 1
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
    prefix = np.zeros(n_seg, dtype=np.int64)
    pf = None if compared is None and not unordered else prefix
    g_targets = np.where(solo, 0, res_targets) if solo.any() else res_targets
    rank = fresh_ranks(offsets, g_targets)  # unwritten where greedy's big path writes every rank
    if solo.any():
        _solo_greedy(tok, score, offsets, com, com_off, res_targets, solo, rank, pf, compared)
    greedy_segments(ftok, score, offsets, g_targets, rank, prefix=pf, compared=compared)
    _count_finish(
        tok,
        score,
        kind,
        offsets,
        targets,
        err,
        prefix,
        com,
        com_off,
        e_kind,
        taken,
        cap_of_kind,
        rank,
        cap_dropped,
        pre_kept,
    )
    n_com[:] = np.diff(com_off)
    return rank
