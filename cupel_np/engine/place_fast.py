"""The place kernel's passes over a long segment that is placed without merged lists:
chronologically on bitmaps (``chrono_bits``) or u-shaped from ``u_order``'s positions.
``stages._place_segments`` calls them per segment; each walks every candidate of the segment
in candidate order (the rows ascending, from every slicer but a sorted one's u-shaped
placement: sequential reads and writes), with selects, not branches, where a candidate being
selected or not decides (that is unpredictable, and a mispredicted branch per row costs more
than the rest of the work). A loop of its own per pass: inside the large place kernel the
same loops compiled to slower code.

:func:`_select_pass` does the slice stage's exclusions and marks the selected rows included
before the overflow is known (:func:`_unselect` undoes it for a set that throws or
truncates); :func:`_chrono_pass` and :func:`_u_pass` then write the selected rows' places and
reasons.
"""

from __future__ import annotations

import numpy as np

from cupel_np._jit import jit_inner
from cupel_np.engine.batch_kernels import BIT1
from cupel_np.engine.chrono_bits import popcount64
from cupel_np.engine.reasons import R_BUDGET_EXCEEDED, R_PINNED_OVERRIDE, R_SCORED, R_ZERO_TOKEN


@jit_inner
def _select_pass(
    rank,
    cand_rows,
    tokens,
    kind,
    clo,
    chi,
    has_pin,
    eff_target,
    override_max,
    cap_of_kind,
    count_caps,
    kind_count,
    defer,
    n_def,
    reason,
    included,
    ts_valid,
    umark,
    n_pin,
    zrow,
):
    """One segment's candidates ``clo:chi``: an excluded row's reason (PinnedOverride or
    BudgetExceeded; a selected row keeps its own until it is placed), every selected row
    ``included`` (``_unselect`` takes it back), and the selected ones counted and their tokens
    summed. With ``count_caps`` (``cap_of_kind`` not None) the selected per kind are counted
    into ``kind_count`` and every excluded candidate of a capped kind that fits is appended to
    ``defer`` from ``n_def`` on (as in ``_place_segments``). ``umark`` not empty
    (chronological placement, ``chrono_bits``): per input position ``n_pin + rank`` of a
    selected row, 1 when it is untimestamped (``ts_valid``), else 0 (``umark[umark.shape[0] -
    1]`` is a spare slot); and for :func:`_chrono_pass`, which then reads neither the
    candidates' tokens nor, when they are consecutive rows, their rows: the selected rows of
    zero tokens listed in ``zrow`` (scratch, longer than the segment's candidates) and whether
    the candidates are the rows ``cand_rows[clo]``, ``cand_rows[clo] + 1``, ... Returns
    ``(n_sel, sliced_tokens, n_def, n_zero, consecutive)`` (``n_zero`` 0 and ``consecutive``
    False without ``umark``)."""
    n_sel = 0
    sliced = 0
    spare = umark.shape[0] - 1
    rk = rank[clo:chi]  # (slices indexed from 0: provably non-negative, no wraparound select)
    rows = cand_rows[clo:chi]
    marks = umark.shape[0] > 0  # (loop-invariant: LLVM unswitches the loop on it)
    n_zero = 0
    row0 = np.uint64(rows[0]) if chi > clo else np.uint64(0)
    gap = np.uint64(0)  # any candidate not at row0 + p
    for p in range(chi - clo):
        r = rk[p]
        row = np.uint64(rows[p])  # (unsigned: no wraparound select per access)
        t = tokens[row]
        sel = r >= 0
        n_sel += np.int64(sel)
        sliced += t if sel else 0
        ex = R_PINNED_OVERRIDE if has_pin & (t > eff_target) & (t <= override_max) else R_BUDGET_EXCEEDED
        if cap_of_kind is not None and count_caps:
            k = kind[row]
            kind_count[k] += np.int64(sel)
            defer[n_def] = np.int64(row)
            n_def += np.int64((not sel) & (cap_of_kind[k] >= 0) & (t <= eff_target))
        old = reason[row]
        reason[row] = old if sel else ex
        included[row] = sel
        if marks:
            umark[np.uint64(n_pin + r if sel else spare)] = 0 if ts_valid[row] else 1  # (each position once)
            zrow[n_zero] = np.int64(row)  # (every row written, the next one kept: no branch)
            n_zero += np.int64(sel & (t == 0))
            gap |= row ^ (row0 + np.uint64(p))
    return n_sel, sliced, n_def, n_zero, marks and gap == 0


@jit_inner
def _unselect(pin_rows, plo, phi, cand_rows, clo, chi, included):
    """A segment that throws or truncates: its rows' ``included`` back to False (``_select_pass``
    and the pinned rows set it before the overflow was known)."""
    for q in range(plo, phi):
        included[pin_rows[q]] = False
    for p in range(clo, chi):
        included[cand_rows[p]] = False


@jit_inner
def _chrono_pass(
    rank, cand_rows, consecutive, clo, chi, n_pin, ts_code, bp, u_base, tied_mode, n_ts, key_at, position, reason
):
    """Chronological placement of one segment's selected candidates on the bitmaps
    ``chrono_bits._chrono_words`` filled (``bp``: per word its bits, then the marks before it;
    a timestamped row at bit ``i``, its index in the shared order; an untimestamped one at bit
    ``u_base + n_pin + rank``): the place of a marked bit is the marks before it. Writes their
    ``position`` (and a meaningless one to every candidate not selected) and reason, and, with
    ``tied_mode`` above 0, a selected tied row's input position to ``key_at[i]``: 1, for many
    tied rows, by a store per candidate (``key_at[n_ts]`` takes the others'), 2, for few, by a
    branch that is rarely taken (0: no tied row). Every selected row's reason is written Scored: the caller then writes
    ZeroToken to those of zero tokens (``_select_pass`` lists them; reading every candidate's
    tokens again cost more). ``consecutive``: the candidates are the rows ``cand_rows[clo]``,
    ``cand_rows[clo] + 1``, ... (as ``_select_pass`` found), and ``cand_rows`` is not read
    further."""
    rk = rank[clo:chi]
    rows = cand_rows[clo:chi]
    row0 = np.uint64(rows[0]) if chi > clo else np.uint64(0)
    for p in range(chi - clo):
        r = rk[p]
        sel = r >= 0
        row = row0 + np.uint64(p) if consecutive else np.uint64(rows[p])  # (loop-invariant: unswitched)
        code = ts_code[row]
        stamped = code >= 0
        i = code >> 1
        j = n_pin + r if sel else n_pin
        b = i if stamped else u_base + j
        w = np.uint64(b >> 6) << BIT1
        # every candidate's position written, a meaningless one where not selected (a row's
        # position means something only while it is included): a store of a select of the
        # old value compiled to a branch per row, mispredicted for a fifth of them (4.4 ->
        # 2.9 ms a pass over 1M candidates, 80% selected)
        position[row] = np.int64(bp[w + BIT1]) + popcount64(bp[w] & ((BIT1 << np.uint64(b & 63)) - BIT1))
        tied = sel & stamped & ((code & 1) == 1)
        if tied_mode == 1:  # (loop-invariant: unswitched)
            key_at[i if tied else n_ts] = j
        elif tied_mode == 2 and tied:
            key_at[i] = j
        old = reason[row]
        reason[row] = R_SCORED if sel else old


@jit_inner
def _u_pass(rank, cand_rows, tokens, clo, chi, u_at, position, reason):
    """U-shaped placement of one segment's selected candidates at their places in ``u_at``
    (``u_order._sliced_score_order``): their ``position`` and reason (and a meaningless
    position to every candidate not selected, as ``_chrono_pass`` writes: a row's position
    means something only while it is included, and a store of a select of the old value
    compiles to a branch per row)."""
    rk = rank[clo:chi]
    rows = cand_rows[clo:chi]
    at_p = u_at[clo:chi]
    for p in range(chi - clo):
        sel = rk[p] >= 0
        row = np.uint64(rows[p])
        position[row] = at_p[p]
        old = reason[row]
        placed = R_ZERO_TOKEN if tokens[row] == 0 else R_SCORED
        reason[row] = placed if sel else old


@jit_inner
def _chrono_mark_listed(sel_row, sel_code, sel_key, lo, hi, n_pin, a, b, bp, umark, included):
    """A segment whose selected candidates are listed (``_place_segments``' ``sel_row``,
    ``sel_code``, ``sel_key`` in ``lo:hi``: a sparser selection than ``_select_pass`` serves)
    marked for ``chrono_bits._chrono_words`` (``gather`` False): each ``included``, a
    timestamped one's bit ``i`` set in ``bp`` (the segment's words, shared order ``a:b``,
    cleared first: the work follows the kept rows, not the shared order) and per input
    position ``n_pin + rank`` whether it is untimestamped (``umark``). The caller marks the
    pinned rows after this."""
    if b > a:
        for w in range(a >> 6, ((b - 1) >> 6) + 1):
            bp[2 * w] = np.uint64(0)
    for u in range(lo, hi):
        row = sel_row[u]
        code = sel_code[u]
        included[row] = True
        if code >= 0:
            i = code >> 1
            bp[2 * (i >> 6)] |= BIT1 << np.uint64(i & 63)
        umark[n_pin + (sel_key[u] >> 1)] = 1 if code < 0 else 0


@jit_inner
def _chrono_pass_listed(
    sel_row, sel_code, sel_key, lo, hi, n_pin, bp, u_base, tied_any, n_ts, key_at, position, reason
):
    """:func:`_chrono_pass` over the listed selected candidates (see
    :func:`_chrono_mark_listed`)."""
    for u in range(lo, hi):
        row = sel_row[u]
        key = sel_key[u]
        code = sel_code[u]
        stamped = code >= 0
        i = code >> 1
        j = n_pin + (key >> 1)
        b = i if stamped else u_base + j
        w = np.uint64(b >> 6) << BIT1
        position[row] = np.int64(bp[w + BIT1]) + popcount64(bp[w] & ((BIT1 << np.uint64(b & 63)) - BIT1))
        if tied_any:
            key_at[i if stamped & ((code & 1) == 1) else n_ts] = j
        reason[row] = R_ZERO_TOKEN if key & 1 else R_SCORED
