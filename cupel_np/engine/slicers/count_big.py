"""CountQuotaSlice around a greedy on one big segment (greedy's big path,
``greedy.BIG_GREEDY`` candidates and more), its phases folded into greedy's own passes
(:func:`_count_big`; ``count.count_greedy_slice`` dispatches here).

Phases 1 and 3 read only the named kinds'
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
from cupel_np.engine.slicers import greedy
from cupel_np.engine.slicers.greedy import (
    RADIX_PICK,
    GreedyScratch,
    _walk_chunks,
    frontier_of,
    keys_and_top_digits,
    order_positions,
)
from cupel_np.engine.slicers.packed import _rank_packed, offsets_dtype, pack_bits
from cupel_np.engine.sortkeys import _SIGN, NAN_LAST, desc_bits, radix_argsort, sort_keys, stable_argsort

#: an entry's top ``require_count`` of its kind are kept in a sorted buffer up to this many
#: (one pass, a comparison per candidate of the kind); more are found by sorting the kind
TOP_BUFFER = 64


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
def top_by_sort(score, pos, need):
    """The first ``need`` of the positions ``pos`` (ascending) in the score order (score
    descending, NaN lowest, then position), in that order: a stable sort of their keys (the
    path for more than ``TOP_BUFFER``; fewer when ``pos`` is shorter)."""
    m = pos.shape[0]
    key = desc_bits(score[pos])
    o = radix_argsort(key) if m >= RADIX_PICK else stable_argsort(key)
    k = need if need < m else m
    top = np.empty(k, dtype=np.int64)
    for j in range(k):
        top[j] = pos[o[j]]
    return top


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
    return top_by_sort(score, loc, need)


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
    n_e = e_kind.shape[0]
    w = keys_and_top_digits(tok, score, kb)
    sh = np.uint64(48)
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
    v, acc = frontier_of(kb, tok, w, rt, skb, stok)
    if acc < 0:
        return com, -1, rt, MARK, -1
    return com, -1, rt, v, acc


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
def _count_prefix_marked(kb, tok, score, thr, remaining, rank, r0, marked, bits, pk, pos, kp, sp, cand):
    """``greedy._prefix_ranks_marked`` with the keys :data:`MARK` left out (as
    :func:`_count_prefix`; unmarked prefix ranks from ``r0``; the marked ones' scores to
    ``sp``). Returns ``(k, c, m)``."""
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
        sp[k] = score[i]
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
        sp = scratch.get("sp", n, np.float64)
        k, n_pre, m = _count_prefix_marked(
            kb, tok, score, thr, remaining, rank, n_c, marked, bits, pk, pos, kp, sp, cand
        )
        if k:
            pk = pk[:k]
            sort_keys(pk, bits)  # distinct uint64 keys, in place
            _rank_packed(pk, pos[:k], kp[:k], sp[:k], bits, rank, n_c + n_pre, scratch.get("r", k, offsets_dtype(k)))
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
