"""GreedySlice without a full comparison sort.

The spec sorts the score-sorted candidates by density (score / tokens) and fills the budget
in that order. The order is the lexicographic key (density desc, score desc, index asc): the
score-sorted position is exactly (score desc, index asc), so the pipeline's score sort is not
needed for greedy at all.

Small segments (a corpus of many sets) are handled inside one kernel, segments of up to
``PACKED_MIN`` candidates by a stable sort in another; longer ones below ``BIG_GREEDY`` by the
packed sort described below, the whole segment as one chunk (``_greedy_packed``). Big segments
(at least ``BIG_GREEDY`` candidates) need no order to decide most of the selection:

* the *fitting prefix* - every candidate whose density key is below the budget frontier, the
  first key at which the running token total passes the target - is selected whole; the
  frontier is found by a radix selection weighted by tokens (linear time, ``_frontier``);
* beyond it, only candidates with ``tokens <= remaining budget`` can still be selected (the
  remaining budget never grows); they are walked in exact order, chunk by chunk: a chunk is
  every remaining candidate whose key is at most a threshold (a linear-time partition, so runs
  of equal keys are never split), ordered by a *packed* sort: one sort (``sortkeys.sort_keys``) of
  distinct uint64 keys, each the density key's high bits with the candidate's index in the
  low bits, then a repair of the runs that share the high bits to (density, score desc,
  index asc) - the spec's total order (``packed._walk_packed``).

The prefix's ranks are written in index order. ``greedy_segments`` orders them (NumPy's
quicksort of the keys and a repair of runs of equal keys) unless the caller takes them unordered (``prefix=``): the placers compare
only a few of them by rank (``place_stage._finish_ranks``); the ones the caller marks (``compared=``)
are ordered by a packed sort (``packed._rank_packed``). The answer does not depend on the chunking,
the packing or the path (tests force tiny chunks, more index bits and the big path on small
sets). A caller that slices many variants of one big set passes a :class:`GreedyScratch`:
the big path's segment-sized buffers are then reused instead of page-faulted in again.
"""

from __future__ import annotations

import numpy as np

from cupel_np._jit import filled, jit, jit_inner
from cupel_np.engine.slicers.packed import _pack_keys, _rank_packed, _walk_packed, offsets_dtype, pack_bits
from cupel_np.engine.sortkeys import (
    _SIGN,
    desc_bits,
    int_keys,
    radix_argsort,
    radix_for,
    score_cmp,
    sort_keys,
    stable_argsort,
)

#: greedy partitions at least this long are ordered by the radix sort
RADIX_PICK = 4096

MAX_FLOAT = np.finfo(np.float64).max

#: segments with at least this many candidates take the big-set path (the budget frontier by a
#: weighted radix selection, then the exact chunked walk of what still fits beyond it)
BIG_GREEDY = 32768
#: first chunk of the exact walk beyond the frontier (the chunks then grow 4x): the few
#: thousand candidates of a usual walk are taken whole, by one packed sort and no partition
MIN_CHUNK = 65536
#: small segments up to this size are ordered by insertion sort
INSERTION_MAX = 48
#: segments of more candidates than this (and fewer than ``BIG_GREEDY``) go to ``_greedy_medium``
MEDIUM_MIN = INSERTION_MAX * 4
#: segments of at least this many candidates (and fewer than ``BIG_GREEDY``) are ordered by one
#: packed sort instead (``_greedy_packed``): the kernel's stable merge sort mispredicts a branch
#: per comparison once a segment outgrows the first cache level (one set, measured: 500
#: candidates 9-10 us either way, 1,000 ~35 against ~16, 5,000 ~325 against ~63, 20,000 ~1,600
#: against ~265)
PACKED_MIN = 640


@jit_inner
def density_key(t, s):
    """The one definition of greedy's order key for a candidate of ``t`` tokens and score
    ``s``: ascending for 'density descending, NaN last' (zero tokens: density MAX_FLOAT;
    ``0.0 - d`` folds -0.0 into +0.0, so equal densities share one key and one bit pattern)."""
    d = MAX_FLOAT if t == 0 else s / np.float64(t)
    return np.inf if d != d else 0.0 - d


@jit
def _greedy_small(tok, score, offsets, targets, rank, big):
    """Greedy over the segments of at most ``MEDIUM_MIN`` candidates (fewer than ``big``):
    an insertion sort into reused scratch. Larger ones are left to ``_greedy_medium`` (a
    kernel of its own: a run without such sets does not compile its sorts) and
    ``_greedy_big``."""
    # scratch sized by the largest small segment, reused by every segment
    k_max = 0
    for s in range(offsets.shape[0] - 1):
        k = offsets[s + 1] - offsets[s]
        if k < big and k <= MEDIUM_MIN and k > k_max:
            k_max = k
    skey = np.empty(k_max, dtype=np.float64)
    sidx = np.empty(k_max, dtype=np.int64)
    for s in range(offsets.shape[0] - 1):
        lo = offsets[s]
        hi = offsets[s + 1]
        k = hi - lo
        target = targets[s]
        if k == 0 or target <= 0 or k >= big or k > MEDIUM_MIN:
            continue
        # insertion sort of (density key, position); equal keys then by (score key, position)
        for j in range(k):
            kd = density_key(tok[lo + j], score[lo + j])
            w = j - 1
            while w >= 0:
                kw = skey[w]
                if kw < kd:
                    break
                if kw == kd:
                    y = sidx[w]
                    cmp = score_cmp(score[lo + y], score[lo + j])
                    if cmp < 0 or (cmp == 0 and y < j):
                        break
                skey[w + 1] = kw
                sidx[w + 1] = sidx[w]
                w -= 1
            skey[w + 1] = kd
            sidx[w + 1] = j
        remaining = target
        n_out = 0
        for j in range(k):
            q = sidx[j]
            t = tok[lo + q]
            if t == 0:
                rank[lo + q] = n_out
                n_out += 1
            elif t <= remaining:
                rank[lo + q] = n_out
                n_out += 1
                remaining -= t


@jit
def _greedy_medium(tok, score, offsets, targets, rank, segs):
    """Greedy over the segments ``segs`` (more than ``MEDIUM_MIN`` candidates, fewer than
    ``PACKED_MIN``; target above 0): candidates in (density key, score key, position) order
    by one stable sort of the density keys (equal keys stay in position order) and a repair
    of the runs of equal keys by score (``repair_runs``; runs are rare, so one sort costs
    about half of sorting by score first), then the walk. Called only when such a set exists
    (see ``greedy_segments``), so a run of small sets never compiles the sorts."""
    for u in range(segs.shape[0]):
        s = segs[u]
        lo = offsets[s]
        hi = offsets[s + 1]
        k = hi - lo
        kb = density_bits(tok[lo:hi], score[lo:hi])
        order = stable_argsort(kb)
        repair_runs(order, kb[order], score[lo:hi])
        remaining = targets[s]
        n_out = 0
        for j in range(k):
            q = order[j]
            t = tok[lo + q]
            if t == 0:
                rank[lo + q] = n_out
                n_out += 1
            elif t <= remaining:
                rank[lo + q] = n_out
                n_out += 1
                remaining -= t


@jit
def repair_runs(order, ks, score):
    """``order`` is sorted by its keys ``ks`` (``ks[i]`` is the key of ``order[i]``) with equal
    keys in any order; reorder every run of equal keys by (score descending with NaN last,
    position ascending). In place."""
    n = order.shape[0]
    j = 1
    while j < n:
        if ks[j] != ks[j - 1]:  # the common case, a key of its own: a tight loop to skip it
            j += 1
            continue
        i = j - 1  # a run of equal keys starts at i
        kv = ks[i]
        j += 1
        while j < n and ks[j] == kv:
            j += 1
        if j - i <= INSERTION_MAX:
            for u in range(i + 1, j):  # insertion sort by (score key, position)
                x = order[u]
                w = u - 1
                while w >= i:
                    y = order[w]
                    cmp = score_cmp(score[y], score[x])
                    if cmp < 0 or (cmp == 0 and y < x):
                        break
                    order[w + 1] = y
                    w -= 1
                order[w + 1] = x
        else:
            run = order[i:j]
            run = run[stable_argsort(int_keys(run))]
            sk = desc_bits(score[run])
            o = stable_argsort(sk)
            for q in range(j - i):
                order[i + q] = run[o[q]]
        j += 1  # ks[j] differs from the run's key


@jit
def density_bits(tok, score):
    """The order-preserving bits of every candidate's ``density_key``, in one pass: ascending uint64 keys for
    'density descending, NaN last'; -0.0 and 0.0 share one key, as comparisons do."""
    k = tok.shape[0]
    y = np.empty(k, dtype=np.float64)
    for j in range(k):
        y[j] = density_key(tok[j], score[j])
    u = y.view(np.uint64)
    for j in range(k):  # float bit patterns to order-preserving keys (see sortkeys)
        b = u[j]
        u[j] = ~b if b & _SIGN else b | _SIGN
    return u


#: digit bits of :func:`frontier_of`'s levels after the first (16-bit) digit
LOW_DIGIT_BITS = 12


@jit_inner
def keys_and_top_digits(tok, score, kb):
    """:func:`density_bits` of every candidate, into ``kb``, and the histogram of their first
    16-bit digits weighted by tokens (returned, 65,536 entries), in two loops: the keys (the
    float written and turned into its order-preserving bits in place, a loop that vectorizes),
    then the histogram. Faster than one pass over blocks of a small scratch (keys and
    histogram of a block while it stays in L1: measured 2.0 against 1.5 ms a 1M-row variant;
    the scatter-add holds the block loop back) although it reads ``kb`` and ``tok`` twice."""
    n = tok.shape[0]
    y = kb.view(np.float64)
    for i in range(n):
        y[i] = density_key(tok[i], score[i])
        b = kb[i]  # float bit patterns to order-preserving keys (as density_bits)
        kb[i] = ~b if b & _SIGN else b | _SIGN
    w = np.zeros(65536, dtype=np.int64)
    sh = np.uint64(48)
    for i in range(n):
        w[kb[i] >> sh] += tok[i]
    return w


@jit_inner
def frontier_of(kb, tok, w, target, skb, stok):
    """The budget frontier of the density keys ``kb`` (tokens ``tok``), found without sorting:
    a radix selection weighted by tokens, from ``w``, the histogram of the first 16-bit digit
    (:func:`keys_and_top_digits`; overwritten), then on ``LOW_DIGIT_BITS``-bit digits of the
    crossing bucket's keys: the smallest key ``v`` such that the
    candidates with key <= v hold more than ``target`` tokens, and the tokens of the keys < v;
    ``(0, -1)`` when every candidate fits. ``skb``, ``stok``: scratch of ``kb``'s length."""
    n = kb.shape[0]
    nb = 65536
    sh = np.uint64(48)
    acc = 0
    b = 0
    while b < nb and acc + w[b] <= target:
        acc += w[b]
        b += 1
    if b == nb:
        return np.uint64(0), -1
    prefix = np.uint64(b)
    # the crossing bucket's candidates' keys and tokens gathered (a few: the branch is
    # predictable; ``np.empty`` pages never written cost nothing), then narrowed digit by digit
    m = 0
    for i in range(n):
        k = kb[i]
        if k >> sh == prefix:
            skb[m] = k
            stok[m] = tok[i]
            m += 1
    # the 48 bits left in digits of at most 12 bits: the crossing bucket holds few keys, so
    # clearing and scanning 4,096 counters a level costs less than 65,536 (~0.1 ms a call)
    left = 48
    while left > 0:
        d = min(LOW_DIGIT_BITS, left)
        left -= d
        sh = np.uint64(left)
        nd = 1 << d
        dmask = np.uint64(nd - 1)
        for j in range(nd):
            w[j] = 0
        for j in range(m):
            w[(skb[j] >> sh) & dmask] += stok[j]
        b = 0
        while acc + w[b] <= target:  # the bucket that crosses exists (the parent crossed)
            acc += w[b]
            b += 1
        prefix = (prefix << np.uint64(d)) | np.uint64(b)
        c = 0
        for j in range(m):
            k = skb[j]
            skb[c] = k
            stok[c] = stok[j]
            c += 1 if k >> sh == prefix else 0
        m = c
    return prefix, acc


@jit
def _frontier(tok, score, target, kb, skb, stok):
    """:func:`density_bits` of every candidate (into ``kb``) and the budget frontier of the density order,
    found without sorting (a radix selection weighted by tokens, :func:`frontier_of`; the first
    digit's histogram is built in the same pass as the keys): the smallest key ``v`` such that
    the candidates with key <= v hold more than ``target`` tokens. Returns ``(keys, v, tokens
    of the keys < v)``, or ``(keys, 0, -1)`` when every candidate fits. ``kb``, ``skb`` and
    ``stok``: buffers of the segment's length (scratch: ``skb``, ``stok``)."""
    w = keys_and_top_digits(tok, score, kb)
    v, acc = frontier_of(kb, tok, w, target, skb, stok)
    return kb, v, acc


def _walk_chunks(kb, tok, score, cand, remaining, rank, n_out, chunk):
    """Walk the candidates ``cand`` (positions, ascending) in exact density order, chunk by
    chunk, from ``n_out`` with ``remaining`` tokens: each chunk ordered by a packed sort and
    walked in one kernel (``packed._walk_packed``)."""
    while cand.size:
        rest = None
        if chunk < cand.shape[0]:  # the chunk: every candidate with a key up to the chunk-th's
            kc = kb[cand]
            inside = kc <= kc[np.argpartition(kc, chunk - 1)[chunk - 1]]
            cand, rest = cand[inside], cand[~inside]
        bits = pack_bits(cand.shape[0])
        pk, kp, sc, tc = _pack_keys(kb, cand, score, tok, bits)
        sort_keys(pk, bits)  # distinct uint64 keys, in place
        remaining, n_out = _walk_packed(pk, cand, kp, sc, tc, bits, remaining, rank, n_out)
        if rest is None:
            return
        cand = rest[tok[rest] <= remaining]
        chunk *= 4


def _greedy_packed(tok, score, lo, hi, target, rank):
    """One segment (candidates ``lo:hi``) of fewer than ``BIG_GREEDY`` candidates in exact
    order: the big path's walk with the whole segment as its one chunk (``_walk_chunks``: one
    sort of packed keys, the runs that share high bits repaired). The same ranks
    as ``_greedy_medium`` gives; its kernels are the big path's."""
    t, s = tok[lo:hi], score[lo:hi]
    _walk_chunks(density_bits(t, s), t, s, np.arange(hi - lo, dtype=np.int64), target, rank[lo:hi], 0, hi - lo)


def _greedy_big(tok, score, target, rank, min_chunk, marked, scratch):
    """One big segment (``tok``, ``score``, ``rank``, ``marked`` are the segment's slices). The
    prefix of the density order that fits the budget whole (every candidate before the
    frontier) is selected without ordering it: its ranks are written in index order, or, with
    ``marked``, the unmarked ones first in index order and then the marked ones in exact order.
    Returns that prefix's length (0: every rank is exact); ``complete_ranks`` orders it when a
    consumer needs it."""
    n = tok.shape[0]
    kb = scratch.get("kb", n, np.uint64)
    pk = scratch.get("pk", n, np.uint64)
    pos = scratch.get("pos", n, np.int64)
    kb, thr, used = _frontier(tok, score, target, kb, pk, pos)
    every = used < 0  # everything fits
    thr = np.uint64(thr)
    remaining = 0 if every else target - used
    cand = scratch.get("cand", 0 if every else n, np.int64)
    if marked is None:
        n_pre, m = _prefix_ranks(kb, tok, thr, every, remaining, rank, cand)
    else:
        bits = pack_bits(n)
        kp = scratch.get("kp", n, np.uint64)
        sp = scratch.get("sp", n, np.float64)
        k, n_pre, m = _prefix_ranks_marked(
            kb, tok, score, thr, every, remaining, rank, marked, bits, pk, pos, kp, sp, cand
        )
        if k:
            pk = pk[:k]
            sort_keys(pk, bits)  # distinct uint64 keys, in place
            _rank_packed(pk, pos[:k], kp[:k], sp[:k], bits, rank, n_pre, scratch.get("r", k, offsets_dtype(k)))
            n_pre += k
    cand = cand[:m]
    if not every:
        _walk_chunks(kb, tok, score, cand, remaining, rank, n_pre, min_chunk)
    return n_pre


class GreedyScratch:
    """Buffers the big path reuses from one segment, and one call of :func:`greedy_segments`,
    to the next (one worker's: a sweep's variants on one thread share one). A fresh array of
    a big segment's length costs page faults on first write, more than the pass that fills
    it."""

    def __init__(self) -> None:
        self._bufs: dict[str, np.ndarray] = {}

    def get(self, name: str, n: int, dtype) -> np.ndarray:
        """The buffer ``name``, ``n`` entries of ``dtype`` (contents undefined)."""
        b = self._bufs.get(name)
        if b is None or b.shape[0] < n or b.dtype != dtype:
            b = self._bufs[name] = np.empty(n, dtype=dtype)
        return b[:n]


@jit
def _prefix_ranks(kb, tok, thr, every, remaining, rank, cand):
    """The prefix candidates (key < ``thr``; all when ``every``) get ranks 0, 1, ... in index
    order, every other candidate -1; returns their count and the count ``m`` of the candidates
    beyond the prefix that still fit ``remaining`` tokens (key >= ``thr``), written to
    ``cand[:m]`` (ascending; ``cand`` as long as the segment unless ``every``: none then).
    Branch-free: whether a candidate is inside cannot be predicted."""
    n = kb.shape[0]
    if every:
        for i in range(n):
            rank[i] = i
        return n, 0
    c = 0
    m = 0
    for i in range(n):  # flags as 0/1 integers: selects and adds, no branches
        inside = 1 if kb[i] < thr else 0
        rank[i] = (c + 1) * inside - 1  # c when in the prefix, else -1
        c += inside
        cand[m] = i
        m += (1 - inside) & (1 if tok[i] <= remaining else 0)
    return c, m


@jit
def _prefix_ranks_marked(kb, tok, score, thr, every, remaining, rank, marked, bits, pk, pos, kp, sp, cand):
    """:func:`_prefix_ranks` with ``marked``: only the unmarked prefix candidates get ranks
    0, 1, ... in index order (the marked ones -1). The ``k`` marked prefix candidates go to
    ``pos[:k]`` (positions, ascending), ``kp[:k]`` (their density keys), ``sp[:k]`` (their
    scores, from ``score``) and ``pk[:k]`` (packed keys: the density key with its
    low ``bits`` bits replaced by the index into ``pos``, which sorts them by key and, among
    keys that share their high bits, by position; see ``packed._rank_packed``). ``pk``, ``pos``,
    ``kp`` and ``sp`` are scratch of the segment's length. Returns ``k``, the count of unmarked prefix
    candidates, and the count ``m`` of the candidates beyond the prefix that still fit
    ``remaining`` tokens, written to ``cand[:m]`` (as in :func:`_prefix_ranks`). Branch-free."""
    n = kb.shape[0]
    hi_mask = ~((np.uint64(1) << np.uint64(bits)) - np.uint64(1))
    k = 0
    c = 0
    m = 0
    for i in range(n):  # flags as 0/1 integers: selects and adds, no branches
        key = kb[i]
        inside = 1 if every or key < thr else 0
        mk = inside & (1 if marked[i] else 0)
        un = inside - mk
        rank[i] = (c + 1) * un - 1  # c when unmarked in the prefix, else -1
        c += un
        pk[k] = (key & hi_mask) | np.uint64(k)
        pos[k] = i
        kp[k] = key
        sp[k] = score[i]
        k += mk
        if not every:
            cand[m] = i
            m += (1 - inside) & (1 if tok[i] <= remaining else 0)
    return k, c, m


def order_positions(tok, score, pos, kb=None):
    """The candidates ``pos`` (positions) in slicer-output order: density descending, then
    score, then index (an argsort of the density keys - NumPy's quicksort, or the stable radix
    argsort where that is slow, ``sortkeys.radix_for`` - plus a repair of runs of equal keys). ``kb``:
    the segment's ``density_bits`` when already computed."""
    kp = density_bits(tok[pos], score[pos]) if kb is None else kb[pos]
    if radix_for(kp.shape[0]):  # NumPy's quicksort is slow here
        o = radix_argsort(kp)  # stable; runs of equal keys repaired to (score, index) below
    else:
        o = np.argsort(kp)  # unstable; runs of equal keys repaired to (score, index) below
    order = pos[o]
    repair_runs(order, kp[o], score)
    return order


def complete_ranks(tok, score, rank, n_pre):
    """Exact slicer-output ranks for the unordered prefix of one segment (``0 <= rank[p] <
    n_pre``, written in index order by the big-segment path; the slices are the segment's)."""
    if n_pre > 1:
        order = order_positions(tok, score, np.flatnonzero((rank >= 0) & (rank < n_pre)))
        rank[order] = np.arange(order.shape[0])


def fresh_ranks(offsets: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """A ``rank`` array for :func:`greedy_segments` (default thresholds): -1 wherever it will
    not write every entry; left unwritten (``np.empty``) when every segment takes the big path,
    which writes each of its ranks (-1 included): a 1M-row set saves a full pass."""
    n = int(offsets[-1])
    if n >= BIG_GREEDY:  # (a small table: no NumPy calls at all, a single selection's µs count)
        sizes = np.diff(offsets)
        if sizes.shape[0] and bool(((sizes >= BIG_GREEDY) & (targets > 0)).all()):
            return np.empty(n, dtype=np.int64)
    return filled(n, -1, np.int64)


#: the segment list of a one-set table's only segment (``_greedy_medium``)
_FIRST_SET = np.zeros(1, dtype=np.int64)


def greedy_segments(
    tok,
    score,
    offsets,
    targets,
    rank,
    *,
    big: int | None = None,
    min_chunk: int | None = None,
    prefix: np.ndarray | None = None,
    compared: np.ndarray | None = None,
    scratch: GreedyScratch | None = None,
):
    """GreedySlice per segment over candidates in input (row) order. Writes ``rank[p]`` =
    position in the slicer output (density order), -1 when not selected (``rank`` must be -1
    on entry, except over the segments that take the big path: see :func:`fresh_ranks`). ``big`` and ``min_chunk`` (default: the module's ``BIG_GREEDY`` and
    ``MIN_CHUNK``) choose the path only, never the answer. Precondition (what
    ``items.check_items`` guarantees for every table): a segment's tokens sum to less than
    2**62, so the big path's int64 token sums cannot overflow.

    With ``prefix`` (int64 per segment, zeros), a big segment's fitting prefix is left
    unordered: ``prefix[s]`` = its length, those candidates hold ranks ``0..prefix[s]-1`` in
    index order, the rest of the output exact ranks from ``prefix[s]`` (see
    ``complete_ranks``). Without it every rank is exact. ``compared`` (bool per candidate,
    with ``prefix``): inside the prefix the unmarked candidates come first (index order) and
    the marked ones after them in exact order - for a consumer that compares by rank only
    marked candidates with each other (chronological placement: the untimestamped and
    equal-timestamp ones, ``placers.chrono_compared``). ``scratch``: the caller's reused
    buffers (:class:`GreedyScratch`), a fresh set otherwise."""
    big = BIG_GREEDY if big is None else big
    min_chunk = MIN_CHUNK if min_chunk is None else min_chunk
    if offsets.shape[0] == 2 and offsets[1] - offsets[0] < big:
        # one set below the big path (a service's selection): its kernel without the
        # per-segment NumPy bookkeeping below (~9 us of a 500-row selection)
        k = offsets[1] - offsets[0]
        if k <= MEDIUM_MIN:
            _greedy_small(tok, score, offsets, targets, rank, big)
        elif targets[0] > 0:
            if k >= PACKED_MIN:
                _greedy_packed(tok, score, int(offsets[0]), int(offsets[1]), int(targets[0]), rank)
            else:
                _greedy_medium(tok, score, offsets, targets, rank, _FIRST_SET)
        return
    _greedy_small(tok, score, offsets, targets, rank, big)
    sizes = np.diff(offsets)
    if sizes.shape[0] and sizes.max() > MEDIUM_MIN:
        medium = (sizes > MEDIUM_MIN) & (sizes < big) & (targets > 0)
        packed = medium & (sizes >= PACKED_MIN)
        for p in np.flatnonzero(packed).tolist():  # each costs ~60 us and more: the calls' ~8 do not count
            _greedy_packed(tok, score, int(offsets[p]), int(offsets[p + 1]), int(targets[p]), rank)
        rest = np.flatnonzero(medium & ~packed)
        if rest.shape[0]:  # a kernel of its own: a run of small sets never compiles its sorts
            _greedy_medium(tok, score, offsets, targets, rank, rest.astype(np.int64))
    for s in np.flatnonzero((sizes >= big) & (targets > 0)):  # a few big sets at most
        lo, hi = int(offsets[s]), int(offsets[s + 1])
        marked = None if compared is None or prefix is None else compared[lo:hi]
        if scratch is None:
            scratch = GreedyScratch()
        n_pre = _greedy_big(tok[lo:hi], score[lo:hi], int(targets[s]), rank[lo:hi], min_chunk, marked, scratch)
        if prefix is not None:
            prefix[s] = n_pre
        else:
            complete_ranks(tok[lo:hi], score[lo:hi], rank[lo:hi], n_pre)


@jit_inner
def greedy_pick(tok, score, cand, target, out, n_out):
    """GreedySlice over the candidate positions ``cand`` (in sorted order). Appends the
    selected positions to ``out[n_out:]`` in density order; returns the new length."""
    k = cand.shape[0]
    if k == 0 or target <= 0:
        return n_out
    dens = np.empty(k, dtype=np.float64)
    for j in range(k):
        t = tok[cand[j]]
        if t == 0:
            dens[j] = MAX_FLOAT
        else:
            dens[j] = score[cand[j]] / np.float64(t)
    # density descending (NaN lowest), ties in candidate order: a stable sort
    key = desc_bits(dens)
    order = radix_argsort(key) if k >= RADIX_PICK else stable_argsort(key)
    remaining = target
    for j in range(k):
        p = cand[order[j]]
        t = tok[p]
        if t == 0:
            out[n_out] = p
            n_out += 1
        elif t <= remaining:
            out[n_out] = p
            n_out += 1
            remaining -= t
    return n_out


@jit
def _slice_greedy(tok, score, offsets, targets, rank):
    """GreedySlice over every segment of the score-sorted candidates (the sweep itself takes
    slicers/greedy.py; this serves single score-sorted lists, e.g. the conformance runner)."""
    for s in range(offsets.shape[0] - 1):
        lo = offsets[s]
        hi = offsets[s + 1]
        if hi - lo == 0 or targets[s] <= 0:
            continue
        # the positions lo..hi-1 by a loop: np.arange(lo, hi) would compile an implementation
        # that nothing else on a cold start needs
        cand = np.empty(hi - lo, dtype=np.int64)
        for j in range(hi - lo):
            cand[j] = lo + j
        out = np.empty(hi - lo, dtype=np.int64)
        n_out = greedy_pick(tok, score, cand, targets[s], out, 0)
        for j in range(n_out):
            rank[out[j]] = j
