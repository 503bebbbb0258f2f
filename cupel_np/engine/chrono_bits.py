"""Chronological placement of a segment that keeps every merged item (no truncation), on
bitmaps in timestamp-order space. ``stages._place_segments`` marks each kept timestamped row
at its index in the shared timestamp order (``placers.timestamp_ranks`` gives every row's
index once per sweep; :func:`_chrono_mark_pinned` for the pinned ones) and each kept
untimestamped one at its input position; :func:`_chrono_prefix` counts the marks before each
word, so a kept row's place is the count of marks before its own, written in row order
(:func:`_chrono_place`). :func:`_chrono_ties` puts the segment's runs of equal timestamps
(listed once per sweep) in input order. The same positions as
``placers._chronological_filter`` gives when nothing is truncated."""

from __future__ import annotations

import numpy as np
from numba.core import types
from numba.extending import intrinsic

from cupel_np._jit import jit, jit_inner
from cupel_np.engine.batch_kernels import BIT1, bit_rank, popcount
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
def _chrono_mark_pinned(pin_rows, plo, n_pin, ts_code, tbits, umark):
    """Marks a segment's pinned rows ``pin_rows[plo:plo + n_pin]`` (input positions
    ``0..n_pin``) as ``_place_segments`` marks its kept sliced rows: a timestamped row at its
    index ``i`` in the shared order (``ts_code[row] >> 1``, see ``placers.timestamp_ranks``) in
    ``tbits``; at its input position, ``umark`` is 1 for an untimestamped row, else 0."""
    for q in range(n_pin):
        code = ts_code[pin_rows[plo + q]]
        if code >= 0:
            i = code >> 1
            tbits[i >> 6] |= BIT1 << np.uint64(i & 63)
        umark[q] = 1 if code < 0 else 0


@jit_inner
def _chrono_prefix(tbits, tpre, a, b, umark, ubits, upre, m):
    """Chronological placement of one segment whose merged items are all kept in merged
    order (input position = pinned index, or ``n_pin + rank`` for a sliced item), marked by
    ``_place_segments``: each timestamped row at its index ``i`` in the shared order
    (``a <= i < b``) in ``tbits``, and per input position ``j < m`` whether its row is
    untimestamped (``umark[j]``, 1 or 0: a byte store each, which unlike setting a bit reads
    nothing, so ranks in order do not chain the stores through one word). Packs ``umark`` into
    ``ubits``, writes the set bits before each of the segment's words (``tpre``, ``upre``) and
    returns ``c``, the timestamped count: a timestamped row goes to ``bit_rank(tbits, tpre, i)``
    (the shared order filtered by the kept rows), an untimestamped one to
    ``c + bit_rank(ubits, upre, j)`` (after them, in input order); :func:`_chrono_place`. Runs
    of equal timestamps are left to :func:`_chrono_ties`."""
    t = 0
    for w in range((m + 63) >> 6):
        x = np.uint64(0)
        base = w << 6
        for k in range(min(64, m - base)):
            x |= np.uint64(umark[base + k]) << np.uint64(k)
        ubits[w] = x
        upre[w] = t
        t += popcount64(x)
    c = 0
    if b > a:
        for w in range(a >> 6, ((b - 1) >> 6) + 1):
            tpre[w] = c
            c += popcount64(tbits[w])
    return c


@jit_inner
def _chrono_clear(tbits, a, b):
    """A segment's marks in ``tbits`` (see :func:`_chrono_prefix`) back to 0 (``ubits`` is
    rewritten whole from the next segment's ``umark``)."""
    if b > a:
        for w in range(a >> 6, ((b - 1) >> 6) + 1):
            tbits[w] = 0


@jit_inner
def _chrono_tied(tbits, runs, r0, r1):
    """Whether a run of equal timestamps ``r0 <= r < r1`` (spans of the shared order, see
    ``placers.timestamp_ranks``) has two or more rows marked in ``tbits``: the segment needs
    :func:`_chrono_ties`."""
    for r in range(r0, r1):
        k = 0
        for i in range(runs[2 * r], runs[2 * r + 1]):
            k += np.int64((tbits[i >> 6] >> np.uint64(i & 63)) & BIT1)
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
def _chrono_place(row, j, ts_code, tbits, tpre, c, ubits, upre, key_at, position):
    """The position of kept ``row`` (input position ``j``) of a segment :func:`_chrono_prefix`
    counted, which returned ``c``: the kept timestamped rows before it in the shared order, or
    after every timestamped one the untimestamped ones before it in input order. A tied
    row's input position goes to ``key_at`` for :func:`_chrono_ties`."""
    code = ts_code[row]
    if code >= 0:
        i = code >> 1
        position[row] = bit_rank(tbits, tpre, i)
        if code & 1:
            key_at[i] = j
    else:
        position[row] = c + bit_rank(ubits, upre, j)
