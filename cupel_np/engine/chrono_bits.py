"""Chronological placement of a segment that keeps every merged item (no truncation), on
bitmaps in timestamp-order space. ``stages._place_segments`` marks its kept rows included
(``place_fast._select_pass``) and each kept untimestamped one at its input position;
:func:`_chrono_words` gathers the kept timestamped rows' bits in the shared timestamp order
(``placers.timestamp_ranks`` gives every row's index in it once per sweep) and counts the
marks before each word, so a kept row's place is the count of marks before its own, written
in row order (``place_fast._chrono_pass``, :func:`_chrono_place` for the pinned rows).
:func:`_chrono_ties` puts the segment's runs of equal timestamps (listed once per sweep) in
input order. The same positions as ``placers._chronological_filter`` gives when nothing is
truncated."""

from __future__ import annotations

import numpy as np
from numba.core import types
from numba.extending import intrinsic

from cupel_np._jit import jit, jit_inner
from cupel_np.engine.batch_kernels import BIT1, popcount
from cupel_np.engine.placers import _repair_pairs


def _llvm_ctpop(typingctx, x):
    """The set bits of a uint64 as LLVM's ``ctpop`` (one POPCNT instruction where the CPU has
    it); ``batch_kernels.popcount`` is a dozen operations that LLVM does not recognise."""
    if x != types.uint64:
        return None

    def codegen(context, builder, signature, args):
        return builder.ctpop(args[0])

    return types.int64(types.uint64), codegen


#: ``batch_kernels.popcount``'s count in one instruction (the plain function with the JIT off,
#: where the kernels are plain functions too: ``cupel_np._jit``)
popcount64 = intrinsic(_llvm_ctpop) if hasattr(popcount, "get_call_template") else popcount


@jit_inner
def _pack8(x):
    """Eight marks (bytes of 0 or 1, the first in the low byte of ``x``) as the low 8 bits,
    the first mark in bit 0: each fold doubles the marks gathered in every byte."""
    x |= x >> np.uint64(7)
    x |= x >> np.uint64(14)
    x |= x >> np.uint64(28)
    return x & np.uint64(0xFF)


@jit_inner
def _chrono_words(ts_order, a, b, included, umark, m, bp, u_word, gather):
    """Chronological placement of one segment whose merged items are all kept in merged
    order (input position = pinned index, or ``n_pin + rank`` for a sliced item): the bitmaps
    its places are counted on, per word ``w`` its bits ``bp[2 * w]`` and the set bits before it
    ``bp[2 * w + 1]`` (side by side: a place reads one cache line). Bit ``i`` for ``a <= i <
    b`` is the timestamped row at index ``i`` of the shared order (``ts_order``), set when that
    row is ``included`` (the shared order filtered by the kept rows, gathered in order: the
    segment's other bits stay 0, so its words need no clearing); bit ``u_word * 64 + j`` for
    ``j < m``, ``umark[j]``: whether the row at input position ``j`` is untimestamped (1 or 0),
    its set bits before it counted after every timestamped kept row (``umark``: its length a
    multiple of 8, read eight marks at a time). Returns that count
    ``c``: a timestamped row goes to the set bits before its bit ``i``, an untimestamped one
    to ``c`` plus the set bits before ``j`` (after them, in input order), as ``bp``'s counts
    say (:func:`_chrono_at`). Runs of equal timestamps are left to :func:`_chrono_ties`.
    ``gather`` False: the timestamped bits are set already (a sparse selection's, marked one
    by one: ``place_fast._chrono_mark_listed``), only counted here."""
    c = 0
    if b > a:
        for w in range(a >> 6, ((b - 1) >> 6) + 1):
            x = bp[2 * w]
            if gather:
                x = np.uint64(0)
                for i in range(max(a, w << 6), min(b, (w << 6) + 64)):
                    x |= np.uint64(included[np.uint64(ts_order[i])]) << np.uint64(i & 63)
            bp[2 * w] = x
            bp[2 * w + 1] = np.uint64(c)
            c += popcount64(x)
    t = c
    um = umark.view(np.uint64)  # eight marks a load (``umark``'s length is a multiple of 8)
    for v in range((m + 63) >> 6):
        x = np.uint64(0)
        base = v << 6
        if base + 64 <= m:
            for g in range(8):
                x |= _pack8(um[(base >> 3) + g]) << np.uint64(8 * g)
        else:
            for k in range(m - base):
                x |= np.uint64(umark[base + k]) << np.uint64(k)
        bp[2 * (u_word + v)] = x
        bp[2 * (u_word + v) + 1] = np.uint64(t)
        t += popcount64(x)
    return c


@jit_inner
def _chrono_at(bp, b):
    """The set bits before bit ``b`` of :func:`_chrono_words`'s bitmaps: a kept row's place."""
    w = b >> 6
    return np.int64(bp[2 * w + 1]) + popcount64(bp[2 * w] & ((BIT1 << np.uint64(b & 63)) - BIT1))


@jit_inner
def _chrono_tied(ts_order, included, runs, r0, r1):
    """Whether a run of equal timestamps ``r0 <= r < r1`` (spans of the shared order
    ``ts_order``, see ``placers.timestamp_ranks``) has two or more ``included`` rows: the
    segment needs :func:`_chrono_ties`."""
    for r in range(r0, r1):
        k = 0
        for i in range(runs[2 * r], runs[2 * r + 1]):
            k += np.int64(included[ts_order[i]])
            if k > 1:
                return True
    return False


@jit
def _chrono_ties(segs, ts_order, runs, run_offsets, included, key_at, position):
    """After ``_place_segments``: the runs of equal timestamps of each segment ``segs`` it
    placed on bitmaps back to input order (a kernel of its own, so a run without equal
    timestamps never compiles it). Run ``r`` is the span ``runs[2 * r]:runs[2 * r + 1]`` of
    the shared order ``ts_order`` (segment ``s``'s runs ``run_offsets[s]:run_offsets[s + 1]``,
    see ``placers.timestamp_ranks``). A run's kept (``included``) rows hold consecutive
    positions; with two or more of them, those positions go to the rows by input position
    (``key_at[i]``, written by ``_place_segments`` for every kept tied row at its index ``i``)."""
    for s in segs:
        r0 = run_offsets[s]
        r1 = run_offsets[s + 1]
        n = 0
        for r in range(r0, r1):
            n += runs[2 * r + 1] - runs[2 * r]
        trow = np.empty(n, dtype=np.int64)  # the kept rows of the runs, in timestamp order
        tkey = np.empty(n, dtype=np.int64)  # their input positions
        tgrp = np.empty(n, dtype=np.int64)  # their run
        tpos = np.empty(n, dtype=np.int64)  # their positions (ascending inside a run)
        k = 0
        for r in range(r0, r1):
            k0 = k
            for i in range(runs[2 * r], runs[2 * r + 1]):
                row = ts_order[i]
                if included[row]:
                    trow[k] = row
                    tkey[k] = key_at[i]
                    tgrp[k] = r
                    tpos[k] = position[row]
                    k += 1
            if k - k0 < 2:  # fewer than two kept: nothing to order
                k = k0
        _repair_pairs(trow, tkey, tgrp, k)  # each run by input position; its positions stay
        for u in range(k):
            position[trow[u]] = tpos[u]


@jit_inner
def _chrono_place(row, j, ts_code, bp, u_word, key_at, position):
    """The position of kept ``row`` (input position ``j``) of a segment on
    :func:`_chrono_words`'s bitmaps: the kept timestamped rows before it in the shared order,
    or after every timestamped one the untimestamped ones before it in input order. A tied
    row's input position goes to ``key_at`` for :func:`_chrono_ties`."""
    code = ts_code[row]
    if code >= 0:
        i = code >> 1
        position[row] = _chrono_at(bp, i)
        if code & 1:
            key_at[i] = j
    else:
        position[row] = _chrono_at(bp, (u_word << 6) + j)
