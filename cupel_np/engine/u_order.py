"""U-shaped placement's score order of the sliced items (:func:`_sliced_score_order`, which
``place_stage`` calls before the place kernel): each segment's selected candidates packed by
score (:func:`_u_pack`), and what the placer compares of the greedy prefixes a slicer left
unordered ordered exactly (:func:`_u_finish`; runs of tied scores by :func:`_place_run`).
"""

from __future__ import annotations

import numpy as np

from cupel_np._jit import filled, jit, jit_inner
from cupel_np.engine.slicers.greedy import density_key
from cupel_np.engine.sortkeys import _SIGN, NAN_LAST, sort_keys, sort_pairs

_ONE_KEY = np.uint64(0xBFF0000000000000 ^ 0xFFFFFFFFFFFFFFFF)
_MAGNITUDE = np.uint64(0x7FFFFFFFFFFFFFFF)
_INF_BITS = np.uint64(0x7FF0000000000000)
_NO_TOKENS = np.zeros(0, dtype=np.int64)
#: ``u_at`` holds positions as int32 (half the memory its scattered writes and the place
#: kernel's pass over it touch) unless a set could hold 2**31 items
_NO_PLACES = np.zeros(0, dtype=np.int32)


def _u_at_dtype(n_places: int):
    """``u_at``'s dtype when positions go up to ``n_places``: int32, else int64."""
    return np.int32 if n_places < 2**31 else np.int64


@jit_inner
def _bits_key(b):
    """``desc_bits`` of the score whose float64 bit pattern is ``b``: NaN ``NAN_LAST``, either
    zero ``_SIGN``, a negative score its own bits, a positive one its bits inverted below
    ``_SIGN``."""
    a = b & _MAGNITUDE
    if a > _INF_BITS:
        return NAN_LAST
    if a == 0:
        return _SIGN
    return b if b & _SIGN else ~b ^ _SIGN


@jit
def _u_pack(rank, score_bits, lo, hi, shift):
    """The items the slicer selected in ``[lo, hi)`` (``score_bits``: the candidates' scores
    as uint64 bit patterns) as distinct uint64 keys, in candidate order: the high
    ``64 - shift`` bits of the score key (``desc_bits``), then the candidate's index
    ``p - lo`` (below ``2**shift``). Ascending keys are the score order up to runs that share
    the high bits (``_u_finish`` orders those)."""
    # room for every candidate (one spare: the write below is branch-free), not a counting
    # pass over ``rank`` first: the pass is bound by memory reads, not by the allocation
    out = np.empty(hi - lo + 1, dtype=np.uint64)
    high = ~((np.uint64(1) << np.uint64(shift)) - np.uint64(1))
    c = 0
    rk = rank[lo:hi]  # (slices indexed from 0: no wraparound select per read)
    sb = score_bits[lo:hi]
    for p in range(hi - lo):
        out[c] = (_bits_key(sb[p]) & high) | np.uint64(p)
        c += rk[p] >= 0
    return out[:c]


@jit_inner
def _tie_before(fk, bk, tk, rk, a, b):
    """Entry ``a`` of a run precedes entry ``b``: by score key, block, tie key, then rank."""
    if fk[a] != fk[b]:
        return fk[a] < fk[b]
    if bk[a] != bk[b]:
        return bk[a] < bk[b]
    if tk[a] != tk[b]:
        return tk[a] < tk[b]
    return rk[a] < rk[b]


@jit_inner
def _tie_order(fk, bk, tk, rk):
    """The run's entries ordered by (``fk``, ``bk``, ``tk``, ``rk``) (distinct: ``rk`` are
    ranks): insertion sort on runs of 16, then bottom-up merges."""
    n = fk.shape[0]
    o = np.arange(n)
    for a in range(0, n, 16):
        b = min(a + 16, n)
        for i in range(a + 1, b):
            x = o[i]
            w = i - 1
            while w >= a and _tie_before(fk, bk, tk, rk, x, o[w]):
                o[w + 1] = o[w]
                w -= 1
            o[w + 1] = x
    src = o
    dst = np.empty(n, dtype=np.int64)
    width = 16
    while width < n:
        for a in range(0, n, 2 * width):
            m = min(a + width, n)
            b = min(a + 2 * width, n)
            i = a
            j = m
            k = a
            while i < m and j < b:
                if _tie_before(fk, bk, tk, rk, src[j], src[i]):
                    dst[k] = src[j]
                    j += 1
                else:
                    dst[k] = src[i]
                    i += 1
                k += 1
            while i < m:
                dst[k] = src[i]
                i += 1
                k += 1
            while j < b:
                dst[k] = src[j]
                j += 1
                k += 1
        src, dst = dst, src
        width *= 2
    return src


@jit_inner
def _range_of(r_lo, r_hi, r):
    """The index of the range ``[r_lo[i], r_hi[i])`` (ascending, disjoint) that holds rank
    ``r``, or -1 (a binary search)."""
    a = 0
    b = r_lo.shape[0]
    while a < b:  # the first range starting after r is at a
        mid = (a + b) >> 1
        if r_lo[mid] <= r:
            a = mid + 1
        else:
            b = mid
    return a - 1 if a > 0 and r < r_hi[a - 1] else -1


#: runs longer than this are first tried in token order by a radix sort (``_place_run``)
RUN_RADIX_MIN = 64


@jit_inner
def _radix_by(key, o, tmp, cnt, n):
    """Reorder ``o[:n]`` (entries of a run) stably by ``key[o[u]]`` ascending: an LSD radix
    sort on the bytes where the keys differ (``tmp``: scratch of ``n``, ``cnt``: of 256)."""
    diff = np.uint64(0)
    for u in range(n):
        diff |= key[u] ^ key[0]
    for d in range(8):
        sh = np.uint64(8 * d)
        if (diff >> sh) & np.uint64(255) == 0:
            continue
        for b in range(256):
            cnt[b] = 0
        for u in range(n):
            cnt[(key[o[u]] >> sh) & np.uint64(255)] += 1
        total = 0
        for b in range(256):
            c = cnt[b]
            cnt[b] = total
            total += c
        for u in range(n):
            b = (key[o[u]] >> sh) & np.uint64(255)
            tmp[cnt[b]] = o[u]
            cnt[b] += 1
        for u in range(n):
            o[u] = tmp[u]


@jit_inner
def _in_order(o, fk, bk, tk, rk, n):
    """``o[:n]`` is the run's order: each entry before the next by ``_tie_before``."""
    for u in range(1, n):
        if not _tie_before(fk, bk, tk, rk, o[u - 1], o[u]):
            return False
    return True


@jit_inner
def _u_place(j, m):
    """Item ``j`` of u-shaped order (``m`` items): its position."""
    return j // 2 + (m - 1 - 2 * (j // 2)) * (j & 1)


#: a run of one score whose tokens are all below this is ordered by (tokens, rank) directly
#: (``_one_score_run``); with ranks below ``2**38`` the pair packs into one uint64
TOK_LIMIT = 1 << 26
_TOK_SHIFT = np.uint64(38)


@jit_inner
def _one_score_run(sc, fk, rk, key, ix, r_n, r_lo, r_hi, one_key, n_pin, m, j, n_before, u_at, key2, o, row2, cnt):
    """``_place_run``'s common case, without densities: every entry of the run has one score
    bit pattern ``s`` with ``2**-900 < s < 2**1000`` and one unordered range, and fewer than
    ``TOK_LIMIT`` tokens. Then the tie key (density descending) is token order exactly: zero
    tokens' density (MAX_FLOAT) is above every ``s / t``, and for ``1 <= t1 < t2 < 2**26`` the
    exact quotients differ by a factor above ``1 + 2**-26``, which rounding to normal doubles
    (``s / t > 2**-926``) keeps strict; equal tokens tie, then rank. So the run is in (tokens,
    rank) order: by tokens from candidate order (a radix sort) when that puts equal tokens in
    rank order (a range ranked in index order), else by both packed in one key. Returns
    ``(placed, j, n_before)``; nothing is written when the case does not apply."""
    s = sc[0]
    if not (s > 2.0**-900 and s < 2.0**1000) or r_lo.shape[0] == 0:  # (NaN fails too)
        return False, j, n_before
    g = _range_of(r_lo, r_hi, rk[0])
    if g < 0 or r_hi[g] > (1 << 38):
        return False, j, n_before
    b0 = fk[0]
    a = r_lo[g]
    b = r_hi[g]
    ok = True
    for u in range(r_n):
        r = rk[u]
        ok &= (fk[u] == b0) & (r >= a) & (r < b) & (key[u] < np.uint64(TOK_LIMIT))
    if not ok:
        return False, j, n_before
    for u in range(r_n):
        o[u] = u
    done = False
    if r_n > RUN_RADIX_MIN:
        _radix_by(key, o, row2, cnt, r_n)
        done = True
        for u in range(1, r_n):
            x = o[u - 1]
            y = o[u]
            done &= (key[x] < key[y]) | ((key[x] == key[y]) & (rk[x] < rk[y]))
        if not done:
            for u in range(r_n):
                o[u] = u
    if not done:
        for u in range(r_n):
            key[u] = (key[u] << _TOK_SHIFT) | np.uint64(rk[u])
        if r_n > RUN_RADIX_MIN:
            _radix_by(key, o, row2, cnt, r_n)
        else:
            sort_pairs(key, o, key2, row2, r_n)
    if n_before < 0 and _bits_key(b0) >= one_key:
        n_before = j
        j += n_pin
    for u in range(r_n):
        u_at[ix[o[u]]] = _u_place(j, m)
        j += 1
    return True, j, n_before


@jit_inner
def _place_run(
    sc,
    fk,
    rk,
    key,
    ix,
    r_n,
    r_lo,
    r_hi,
    one_key,
    n_pin,
    m,
    j,
    n_before,
    u_at,
    scratch_u,
    scratch_i,
    scratch_f,
    scratch_fb,
):
    """Place one run of ``_u_finish`` (keys that share their high bits) from place ``j`` on:
    its entries (in candidate order) are candidates ``ix[:r_n]`` with scores ``sc`` (``fk``:
    the same memory as uint64 bits), ranks ``rk`` and tokens ``key`` (every one gathered by
    the caller; ``fk`` and ``key`` are overwritten), ordered by score key ``fk``, block ``bk``,
    tie key ``tk``, then rank ``rk`` (``_tie_before``; see ``_u_finish``), each entry's
    position written to ``u_at``. Returns ``(j, n_before)`` after the run.
    ``scratch_u``/``scratch_i``/``scratch_f``: uint64 / int64 / float64 scratch of ``2 * r_n`` /
    ``3 * r_n + 256`` / ``r_n`` entries at least, ``scratch_fb`` the same memory as ``scratch_f``.

    The order is found by stable sorts of one key each, least significant first, from
    candidate order, each skipped when the whole run shares its key, and then checked
    (``_in_order``, one pass; the entries are distinct by rank):

    * a long run (``RUN_RADIX_MIN``) first by tokens (a radix sort of two bytes, usually),
      then ``bk``, then ``fk``: among items of one score, the tie key (density descending)
      is token order when the score is positive, and candidate order is rank order inside
      an unordered range (ranked in index order);
    * else, or when that order fails the check (a score of zero or below, densities that
      round equal), by ``tk``, then ``bk``, then ``fk`` on compact keys (``sort_pairs``);
    * else by the comparison sort ``_tie_order``.

    Outside the ranges ``bk`` is the rank itself and ``tk`` is 0."""
    tk = scratch_u[:r_n]
    key2 = scratch_u[r_n : 2 * r_n]
    bk = scratch_i[:r_n]
    o = scratch_i[r_n : 2 * r_n]
    row2 = scratch_i[2 * r_n : 3 * r_n]
    cnt = scratch_i[3 * r_n : 3 * r_n + 256]
    placed, j1, nb = _one_score_run(
        sc, fk, rk, key, ix, r_n, r_lo, r_hi, one_key, n_pin, m, j, n_before, u_at, key2, o, row2, cnt
    )
    if placed:
        return j1, nb
    dens = scratch_f[:r_n]
    dens_bits = scratch_fb[:r_n]
    n_r = r_lo.shape[0]
    same_f = True
    same_b = True
    same_t = True
    for u in range(r_n):
        s = sc[u]  # (``fk``'s float: read before ``fk[u]`` is written)
        f = _bits_key(fk[u])
        r = rk[u]
        # the block: the first rank of its unordered range, else its own rank (ranges are
        # disjoint, so blocks compare as the ranks of the output order do)
        g = _range_of(r_lo, r_hi, r) if n_r else -1
        inside = g >= 0
        b = r_lo[g] if inside else r
        tok = key[u]
        dens[u] = density_key(np.int64(tok), s) + 0.0  # -0.0 + 0.0 == +0.0 (used inside a range only)
        key[u] = tok if inside else np.uint64(0)
        tk[u] = np.uint64(inside)  # (the tie key below, from the density's bits)
        fk[u] = f
        bk[u] = b
        same_f &= f == fk[0]
        same_b &= b == bk[0]
        o[u] = u
    for u in range(r_n):
        x = dens_bits[u]
        t = (~x if x & _SIGN else x | _SIGN) if tk[u] else np.uint64(0)
        tk[u] = t
        same_t &= t == tk[0]
    done = False
    if r_n > RUN_RADIX_MIN and not same_t:
        _radix_by(key, o, row2, cnt, r_n)
        if not same_b:
            for u in range(r_n):
                key[u] = np.uint64(bk[u])  # ranks: non-negative
            _radix_by(key, o, row2, cnt, r_n)
        if not same_f:
            _radix_by(fk, o, row2, cnt, r_n)
        done = _in_order(o, fk, bk, tk, rk, r_n)
        if not done:
            for u in range(r_n):
                o[u] = u
    if not done:
        if not same_t:
            for u in range(r_n):
                key[u] = tk[o[u]]
            sort_pairs(key, o, key2, row2, r_n)
        if not same_b:
            for u in range(r_n):
                key[u] = np.uint64(bk[o[u]])
            sort_pairs(key, o, key2, row2, r_n)
        if not same_f:
            for u in range(r_n):
                key[u] = fk[o[u]]
            sort_pairs(key, o, key2, row2, r_n)
    order = o
    if not done and not _in_order(o, fk, bk, tk, rk, r_n):
        order = _tie_order(fk, bk, tk, rk)
    for u in range(r_n):
        q = order[u]
        if n_before < 0 and fk[q] >= one_key:
            n_before = j
            j += n_pin
        u_at[ix[q]] = _u_place(j, m)
        j += 1
    return j, n_before


@jit
def _u_finish(packed, shift, lo, rank, score_bits, cand_score, cand_tok, r_lo, r_hi, one_key, n_pin, u_at):
    """Place a segment's sliced items from ``packed`` (``_u_pack``'s keys, sorted ascending):
    every run of keys that share their high bits is ordered by score key, then slicer output
    order (``packed`` is scratch). The slicer output order is the ranks' except inside the
    unordered ranges of ranks ``[r_lo[i], r_hi[i])`` (ascending, disjoint; a greedy's fitting
    prefix, ranked in index order, see ``place_stage.Candidates.prefix_ranges``): a range's items
    come where its ranks do, among themselves by density descending (NaN last:
    ``density_key``), then rank. The ``n_pin`` pinned items (score 1.0, key ``one_key``) come
    after the sliced items scored above 1.0 and before the others; item ``j`` of that order
    (``m`` in all) is placed at ``j // 2`` (even ``j``) or ``m - 1 - j // 2`` (odd ``j``): written
    to ``u_at[p]`` for candidate ``p``. Returns the pinned items' first ``j``.

    Three passes: the keys in order, a lone key's candidate placed at once and each run's
    keys moved to the front of ``packed`` (its first place and length noted); then every run
    entry's scattered reads in one loop (their cache misses overlap, which they do not between
    the writes of the first pass); then each run ordered and placed (``_place_run``). The
    pinned items go in when the first key not below ``one_key``'s high bits is met; when that
    is a run's, the run places them (its places are known: the run's and the pinned's)."""
    n = packed.shape[0]
    m = n + n_pin
    sh = np.uint64(shift)
    low = (np.uint64(1) << sh) - np.uint64(1)
    one_high = one_key >> sh
    ulo = np.uint64(lo)
    # per run (at most n // 2): its first key, its first place, its length (pages are touched
    # only where written)
    runs = np.empty(3 * (n // 2) + 3, dtype=np.int64)
    n_runs = 0
    pin_run = -1  # the run the pinned items go into, if any
    c = 0  # the runs' keys in all
    longest = 0
    j = 0  # the next item's place in u-shaped order, pinned items included
    n_before = -1  # the pinned items' first place, once known (or left to ``pin_run``)
    pins_open = True
    i = 0
    while i < n:
        k = packed[i]
        h = k >> sh
        e = i + 1
        while e < n and packed[e] >> sh == h:
            e += 1
        r_n = e - i
        if pins_open and h >= one_high:
            if h > one_high or (r_n == 1 and _bits_key(score_bits[ulo + (k & low)]) >= one_key):
                n_before = j
                j += n_pin
                pins_open = False
            elif r_n > 1:  # the run decides where in it they go
                pin_run = n_runs
                pins_open = False
        if r_n == 1:
            u_at[ulo + (k & low)] = _u_place(j, m)
            j += 1
        else:
            runs[3 * n_runs] = i
            runs[3 * n_runs + 1] = j
            runs[3 * n_runs + 2] = r_n
            n_runs += 1
            c += r_n
            longest = max(longest, r_n)
            j += r_n + (n_pin if pin_run == n_runs - 1 else 0)
        i = e
    if n_runs == 0:
        return j if n_before < 0 else n_before
    sc = np.empty(c, dtype=np.float64)
    fk = sc.view(np.uint64)
    tok = np.empty(c, dtype=np.uint64)
    rk = np.empty(c, dtype=np.int64)
    ix = np.empty(c, dtype=np.int64)
    with_tok = r_lo.shape[0] > 0  # (``cand_tok`` may be empty without ranges)
    u = 0
    for q in range(n_runs):
        i = runs[3 * q]
        for e in range(i, i + runs[3 * q + 2]):
            p = lo + np.int64(packed[e] & low)
            ix[u] = p
            sc[u] = cand_score[p]
            rk[u] = rank[p]
            tok[u] = np.uint64(cand_tok[p]) if with_tok else np.uint64(0)
            u += 1
    scratch_u = np.empty(2 * longest, dtype=np.uint64)
    scratch_i = np.empty(3 * longest + 256, dtype=np.int64)
    scratch_f = np.empty(longest, dtype=np.float64)
    scratch_fb = scratch_f.view(np.uint64)
    a = 0
    for q in range(n_runs):
        j0 = runs[3 * q + 1]
        r_n = runs[3 * q + 2]
        b = a + r_n
        j1, nb = _place_run(
            sc[a:b],
            fk[a:b],
            rk[a:b],
            tok[a:b],
            ix[a:b],
            r_n,
            r_lo,
            r_hi,
            one_key,
            n_pin,
            m,
            j0,
            -1 if q == pin_run else 0,
            u_at,
            scratch_u,
            scratch_i,
            scratch_f,
            scratch_fb,
        )
        if q == pin_run:
            n_before = nb if nb >= 0 else j1  # none of the run at 1.0 or below: right after it
        a = b
    if n_before < 0:
        n_before = j
    return n_before


def _sliced_score_order(rank, cand_score, cand_tok, cand_offsets, pin_offsets, min_sel, ranges):
    """Per segment with at least ``min_sel`` selected items, or an unordered range of ranks
    (``ranges``, see below): u-shaped placement of its selected and pinned items, every one
    kept - the selected items in (score descending with NaN lowest, slicer output) order, the
    pinned ones (score 1.0) inserted before the first one not scored above 1.0. One NumPy SIMD
    sort of distinct uint64 keys (score key high bits, candidate index low bits: ``_u_pack``),
    then ``_u_finish`` orders the runs that share the high bits. Returns ``(u_at, u_pin)``: per
    candidate of a placed segment, its position (``u_at``, int32 below 2**31 places: see
    ``_u_at_dtype``; not written for the others); per
    segment, the pinned items' first place in u-shaped order, -1 when the segment is left to
    the place kernel.

    ``ranges``: None, or ``(r_off, r_lo, r_hi)`` - segment ``s``'s unordered ranges of ranks
    are ``[r_lo[i], r_hi[i])`` for ``i`` in ``r_off[s]:r_off[s + 1]`` (ascending, disjoint:
    greedy fitting prefixes ranked in index order, ``place_stage.Candidates.prefix_ranges``).
    ``cand_tok`` (tokens per candidate) is read only with ranges."""
    n_seg = cand_offsets.shape[0] - 1
    u_pin = filled(n_seg, -1, np.int64)
    if ranges is None and int(cand_offsets[-1]) < min_sel:  # too few candidates in all: no NumPy steps
        return _NO_PLACES, u_pin
    u_at = None
    sizes = np.diff(cand_offsets)
    big = sizes >= max(min_sel, 1)
    if ranges is not None:
        r_off, r_lo, r_hi = ranges
        has_range = np.diff(r_off) > 0
        big |= has_range
        assert cand_tok is not None
    else:
        r_off, r_lo, r_hi = np.zeros(n_seg + 1, np.int64), _NO_TOKENS, _NO_TOKENS
        has_range = np.zeros(n_seg, dtype=np.bool_)
    tok = _NO_TOKENS if cand_tok is None else cand_tok
    score_bits = cand_score.view(np.uint64)
    for s in np.flatnonzero(big):  # a few big sets at most
        a, b = int(r_off[s]), int(r_off[s + 1])
        lo, hi = int(cand_offsets[s]), int(cand_offsets[s + 1])
        shift = (hi - lo - 1).bit_length()
        packed = _u_pack(rank, score_bits, lo, hi, shift)
        if (packed.shape[0] < min_sel and not has_range[s]) or packed.shape[0] == 0:
            continue
        sort_keys(packed, shift)  # the keys are distinct, so any sort agrees
        if u_at is None:
            u_at = np.empty(rank.shape[0], dtype=_u_at_dtype(rank.shape[0] + int(pin_offsets[-1])))
        n_pin = int(pin_offsets[s + 1] - pin_offsets[s])
        u_pin[s] = _u_finish(
            packed, shift, lo, rank, score_bits, cand_score, tok, r_lo[a:b], r_hi[a:b], _ONE_KEY, n_pin, u_at
        )
    return (_NO_PLACES if u_at is None else u_at), u_pin
