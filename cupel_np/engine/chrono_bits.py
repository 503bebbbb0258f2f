"""Chronological placement of a segment that keeps every merged item (no truncation), on
bitmaps: :func:`_chrono_kept` (called by ``stages._place_segments``) places the kept rows by
filtering the shared timestamp order through one bit per row, and :func:`_repair_ties` (a
kernel of its own, called after the place kernel only when a segment has runs of equal
timestamps) puts those runs in input order. The same positions as
``placers._chronological_filter`` gives when nothing is truncated."""

from __future__ import annotations

import numpy as np

from cupel_np._jit import jit, jit_inner
from cupel_np.engine.batch_kernels import BIT1, popcount
from cupel_np.engine.placers import _repair_pairs


@jit_inner
def _chrono_kept(
    pin_rows, plo, n_pin, cand_rows, clo, chi, rank, m, ts_valid, ts_order, ts_sorted, a, b, kbits, position
):
    """Chronological placement of one segment when every merged item is kept in merged order
    (input position = pinned index, or ``n_pin + rank`` for a sliced item), without a per-row
    table of input positions: the kept rows are bits of ``kbits`` (one bit per table row, so
    the scan of the shared timestamp order tests bits that stay in cache).

    Writes the timestamped kept rows' positions in the shared order filtered by ``kbits``;
    runs of equal timestamps are left for :func:`_repair_ties` (called after the place kernel),
    which this kernel tells where they are. Returns ``(c, ubits, upre, first, end)``: the
    timestamped count; the untimestamped kept items as bits by input position with the set
    bits before each word (such an item at input position ``j`` goes to
    ``c + bit_rank(ubits, upre, j)``); and the span ``ts_order[first:end]`` holding the runs of
    equal timestamps (empty when there are none). The caller writes those in its
    pass over the kept rows, and clears their ``kbits`` words there. The same positions as
    ``placers._chronological_filter`` gives when nothing is truncated."""
    n_words = (m + 63) >> 6
    ubits = np.empty(n_words, dtype=np.uint64)
    for w in range(n_words):
        ubits[w] = 0
    for q in range(n_pin):
        row = pin_rows[plo + q]
        kbits[row >> 6] |= BIT1 << np.uint64(row & 63)
        if not ts_valid[row]:
            ubits[q >> 6] |= BIT1 << np.uint64(q & 63)
    cw = -1  # the kbits word being filled (candidates usually ascend by row: one store a word)
    acc = np.uint64(0)
    for p in range(clo, chi):
        r = rank[p]
        row = cand_rows[p]
        sel = r >= 0
        w = row >> 6
        if w != cw:
            if cw >= 0:
                kbits[cw] |= acc
            cw = w
            acc = np.uint64(0)
        acc |= np.uint64(sel) << np.uint64(row & 63)
        j = n_pin + r if sel else 0  # a no-op store when not an untimestamped kept item
        u = sel & (not ts_valid[row])
        ubits[j >> 6] |= np.uint64(u) << np.uint64(j & 63)
    if cw >= 0:
        kbits[cw] |= acc
    upre = np.empty(n_words, dtype=np.int64)
    t = 0
    for w in range(n_words):
        upre[w] = t
        t += popcount(ubits[w])
    c = 0
    first = -1  # the timestamp-order span of the runs of equal timestamps (kept rows)
    last = -1
    prev_i = -1  # the previous kept row's index in the shared order, and its timestamp
    prev_t = 0
    for i in range(a, b):
        row = ts_order[i]
        if (kbits[row >> 6] >> np.uint64(row & 63)) & BIT1:
            tt = ts_sorted[i]
            if prev_i >= 0 and tt == prev_t:
                if first < 0:
                    first = prev_i
                last = i
            position[row] = c
            prev_i = i
            prev_t = tt
            c += 1
    return c, ubits, upre, first, last + 1


@jit
def _repair_ties(
    segs,
    tie_a,
    tie_b,
    pin_rows,
    pin_offsets,
    cand_rows,
    cand_offsets,
    rank,
    ts_order,
    ts_sorted,
    included,
    lstpos,
    position,
):
    """After ``_place_segments``: the runs of equal timestamps among the kept (``included``)
    rows of each segment ``segs`` placed by ``_chrono_kept`` back to input order, in the
    span ``ts_order[tie_a[s]:tie_b[s]]`` that holds them: a run keeps its positions, its rows
    are ordered by input position (``_tie_keys``). A kernel of its own: a run without equal
    timestamps never compiles it."""
    for s in segs:
        plo = pin_offsets[s]
        n_pin = pin_offsets[s + 1] - plo
        clo = cand_offsets[s]
        chi = cand_offsets[s + 1]
        asc = True  # the candidates' rows ascend: bisection finds a row's input position
        for p in range(clo + 1, chi):
            if cand_rows[p] <= cand_rows[p - 1]:
                asc = False
                break
        _repair_span(
            pin_rows,
            plo,
            n_pin,
            cand_rows,
            clo,
            chi,
            rank,
            ts_order,
            ts_sorted,
            tie_a[s],
            tie_b[s],
            asc,
            included,
            lstpos,
            position,
        )


@jit_inner
def _repair_span(
    pin_rows, plo, n_pin, cand_rows, clo, chi, rank, ts_order, ts_sorted, a, b, asc, included, lstpos, position
):
    """:func:`_repair_ties` for one segment."""
    trow = np.empty(b - a, dtype=np.int64)  # the kept rows of every run, in timestamp order
    tts = np.empty(b - a, dtype=np.int64)  # their timestamps
    tpos = np.empty(b - a, dtype=np.int64)  # their positions (ascending inside a run)
    n_t = 0
    c = position[ts_order[a]]
    prev = -1  # the previous kept row, its timestamp, whether it is in trow
    prev_t = 0
    prev_in = False
    for i in range(a, b):
        row = ts_order[i]
        if not included[row]:
            continue
        tt = ts_sorted[i]
        if prev >= 0 and tt == prev_t:
            if not prev_in:
                trow[n_t] = prev
                tts[n_t] = prev_t
                tpos[n_t] = c - 1
                n_t += 1
            trow[n_t] = row
            tts[n_t] = tt
            tpos[n_t] = c
            n_t += 1
            prev_in = True
        else:
            prev_in = False
        prev = row
        prev_t = tt
        c += 1
    tkey = _tie_keys(trow, n_t, pin_rows, plo, n_pin, cand_rows, clo, chi, rank, asc, lstpos)
    _repair_pairs(trow, tkey, tts, n_t)  # each run by input position; its positions stay
    for u in range(n_t):
        position[trow[u]] = tpos[u]


#: at most this many pinned items in a segment are searched one by one for a tied row
TIE_PIN_SEARCH = 64


@jit_inner
def _tie_keys(trow, n_t, pin_rows, plo, n_pin, cand_rows, clo, chi, rank, asc, lstpos):
    """The input position (pinned index, or ``n_pin + rank``) of each kept row ``trow[:n_t]``:
    by bisection of the candidates when their rows ascend (and a search of the few pinned
    ones), else through ``lstpos`` (set for the segment's kept rows, back to -1 on return)."""
    key = np.empty(n_t, dtype=np.int64)
    if asc and n_pin <= TIE_PIN_SEARCH:
        for u in range(n_t):
            row = trow[u]
            lo = clo
            hi = chi
            while lo < hi:
                mid = (lo + hi) >> 1
                if cand_rows[mid] < row:
                    lo = mid + 1
                else:
                    hi = mid
            if lo < chi and cand_rows[lo] == row:
                key[u] = n_pin + rank[lo]
            else:  # a pinned row
                for q in range(n_pin):
                    if pin_rows[plo + q] == row:
                        key[u] = q
                        break
        return key
    for q in range(n_pin):
        lstpos[pin_rows[plo + q]] = q
    for p in range(clo, chi):
        if rank[p] >= 0:
            lstpos[cand_rows[p]] = n_pin + rank[p]
    for u in range(n_t):
        key[u] = lstpos[trow[u]]
    for q in range(n_pin):
        lstpos[pin_rows[plo + q]] = -1
    for p in range(clo, chi):
        if rank[p] >= 0:
            lstpos[cand_rows[p]] = -1
    return key
