"""Numba kernels for the non-scoring pipeline stages: deduplicate, sort, and the final
place stage (merge, overflow, placer) together with every inclusion/exclusion reason.

All of them walk item-set segments themselves. Row indices are positions in the ItemTable's
grouped row order.
"""

from __future__ import annotations

import numpy as np

from cupel_np._jit import jit
from cupel_np.engine.batch_kernels import BIT1
from cupel_np.engine.chrono_bits import _chrono_place, _chrono_tied, _chrono_words
from cupel_np.engine.place_fast import (
    _chrono_mark_listed,
    _chrono_pass,
    _chrono_pass_listed,
    _select_pass,
    _u_pass,
    _unselect,
)
from cupel_np.engine.placers import (
    PLACER_CHRONOLOGICAL,
    PLACER_U_SHAPED,
    _place_order,
    _u_shaped_all,
)

# reason codes (stored in the int8 reason matrix): one home, cupel_np.engine.reasons
from cupel_np.engine.reasons import (  # noqa: E402
    R_BUDGET_EXCEEDED,
    R_COUNT_CAP_EXCEEDED,
    R_PINNED,
    R_PINNED_OVERRIDE,
    R_SCORED,
    R_TRUNCATED,
    R_TRUNCATED_PINNED,
    R_ZERO_TOKEN,
)
from cupel_np.engine.sortkeys import (  # noqa: F401 (radix_argsort: re-exported)
    desc_bits,
    int_keys,
    radix_argsort,
    radix_for,
    stable_argsort,
)

ERR_OVERFLOW = 2

#: the place kernel sorts a kept list of at most this many items itself (insertion, in
#: preallocated scratch); a longer one goes to the bitmaps (chronological, with the shared
#: timestamp order) or to ``placers._place_order``. A run whose segments are all this short
#: compiles neither (``place_stage.place_segments`` passes None for what they read; it reads
#: this at each call and hands it to the kernel, so a test may lower it)
SMALL_PLACE = 64


def truncation_reasons(rows: np.ndarray, offsets: np.ndarray, pin_offsets: np.ndarray) -> np.ndarray:
    """The reason code of each row truncation dropped (grouped-order ``rows``): PinnedOverride
    when the row's set has a pinned item (the pinned items were kept first and took the
    budget), else BudgetExceeded."""
    has_pin = np.diff(pin_offsets) > 0
    seg = np.searchsorted(offsets, rows, side="right") - 1
    return np.where(has_pin[seg], R_TRUNCATED_PINNED, R_TRUNCATED).astype(np.int8)


OVERFLOW_THROW = 0
OVERFLOW_TRUNCATE = 1
OVERFLOW_PROCEED = 2


#: segments at least this long are sorted by NumPy's (much faster) stable sort instead of
#: inside the kernel; a corpus of small sets never leaves the kernel
BIG_SEGMENT = 65536


#: a run whose segments all have at most this many rows sorts them by insertion
#: (``_sort_short_segments``) and compiles neither ``stable_argsort`` nor ``desc_bits`` under
#: the sort stage (a corpus of small sets: the demo's, the samples')
SHORT_SEGMENT = 64


@jit
def _sort_short_segments(score, offsets, out):
    """``_sort_small_segments`` for segments of at most ``SHORT_SEGMENT`` rows: a stable
    insertion sort, score descending with NaN lowest (-0.0 ties 0.0, NaN ties NaN), the order
    of ``stable_argsort(desc_bits(...))``. Writes positions into ``out``."""
    for s in range(offsets.shape[0] - 1):
        lo = offsets[s]
        for i in range(lo, offsets[s + 1]):
            x = score[i]
            j = i
            while j > lo:
                a = score[out[j - 1]]
                if not (a < x or (a != a and x == x)):  # x does not come before a: stop
                    break
                out[j] = out[j - 1]
                j -= 1
            out[j] = i


@jit
def _sort_small_segments(score, offsets, out):
    for s in range(offsets.shape[0] - 1):
        lo = offsets[s]
        hi = offsets[s + 1]
        if hi - lo == 0 or hi - lo >= BIG_SEGMENT:
            continue
        order = stable_argsort(desc_bits(score[lo:hi]))
        for j in range(hi - lo):
            out[lo + j] = order[j] + lo


@jit
def index_order_runs(order, key):
    """``order`` sorted by ``key`` with ties in any order: each run of equal keys back to
    ascending index order (short runs by insertion, long ones by a sort). In place."""
    n = order.shape[0]
    i = 0
    while i < n:
        j = i + 1
        while j < n and key[j] == key[i]:
            j += 1
        if 1 < j - i <= 32:
            for u in range(i + 1, j):
                x = order[u]
                w = u - 1
                while w >= i and order[w] > x:
                    order[w + 1] = order[w]
                    w -= 1
                order[w + 1] = x
        elif j - i > 32:
            seg = order[i:j].copy()
            o = stable_argsort(int_keys(seg))
            for u in range(j - i):  # element loops, not slice assignment (see _jit)
                order[i + u] = seg[o[u]]
        i = j


def sort_segments(score, offsets):
    """Stable per-segment order by score descending (NaN lowest); returns positions."""
    out = np.empty(score.shape[0], dtype=np.int64)
    sizes = np.diff(offsets)
    if sizes.shape[0] == 0 or sizes.max() <= SHORT_SEGMENT:
        _sort_short_segments(score, offsets, out)
        return out
    _sort_small_segments(score, offsets, out)
    for s in np.flatnonzero(sizes >= BIG_SEGMENT):
        lo, hi = int(offsets[s]), int(offsets[s + 1])
        key = desc_bits(score[lo:hi])
        if radix_for(hi - lo):  # NumPy's quicksort is slow here
            o = radix_argsort(key)  # stable: equal keys in index order
        else:
            o = np.argsort(key)  # unstable SIMD quicksort, then equal-key runs back to index order
            index_order_runs(o, key[o])
        out[lo:hi] = o + lo
    return out


@jit
def _place_segments(
    tokens,
    kind,
    ts,
    ts_valid,
    pin_rows,
    pin_offsets,
    cand_rows,
    cand_score,
    cand_offsets,
    rank,
    eff_targets,
    budget_targets,
    budget_reserves,
    overflow,
    placer,
    count_caps,
    cap_of_kind,
    included,
    reason,
    detail_a,
    detail_b,
    position,
    ts_order,
    ts_sorted,
    ts_offsets,
    ts_code,
    ts_runs,
    ts_run_offsets,
    lstpos,
    chrono_min,
    small_place,
    radix_min,
    u_at,
    u_pin,
):
    """Merge pinned and sliced items per segment (item set), apply the overflow strategy, run
    the placer and write every row's inclusion/exclusion reason.

    Parameters, by what they are indexed by (row: the table's grouped row order; segment:
    item set; candidate: the slicer's input, segment by segment):

    Per row of the table (read only)
        tokens : int64 tokens per row
        kind : int64 kind id per row
        ts, ts_valid : int64 timestamp per row (the table's unit) and whether it has one
    Per segment (read only)
        pin_rows, pin_offsets : the non-negative pinned rows, grouped by segment
            (``pin_rows[pin_offsets[s]:pin_offsets[s+1]]``, input order)
        eff_targets : the spec's effective target (what the slicer was given)
        budget_targets, budget_reserves : the budget's target_tokens and output_reserve (the
            overflow target, and the PinnedOverride limit ``target - reserve``)
    Per candidate (the slice stage's output; segment ``s`` is ``cand_offsets[s]:cand_offsets[s+1]``)
        cand_rows : table row of each candidate
        cand_score : its score
        cand_offsets : per segment, int64 [n_seg + 1]
        rank : its place in the slicer's output, -1 when not selected
    Per variant (its policy)
        overflow : ``OVERFLOW_THROW`` / ``OVERFLOW_TRUNCATE`` / ``OVERFLOW_PROCEED``
        placer : ``PLACER_CHRONOLOGICAL`` / ``PLACER_U_SHAPED``
        count_caps : the slicer has count caps (CountCapExceeded reasons are written)
        cap_of_kind : int64 per kind id, its count cap (-1 none); read only with ``count_caps``.
            None without count caps where ``radix_min`` is None: that specialization does not
            compile the caps' code
    Shared by every variant (``timestamp_order``; read only)
        ts_order, ts_sorted, ts_offsets : every segment's timestamped rows sorted by timestamp
            (``ts_order[ts_offsets[s]:ts_offsets[s+1]]``, ties in any order) and their
            timestamps in that order (empty without the shared order, ``ts_offsets`` all 0).
            Chronological placement of a segment that keeps many of its rows filters that
            order instead of sorting, then repairs runs of equal timestamps to the placer's
            input order.
        ts_code, ts_runs, ts_run_offsets : ``placers.timestamp_ranks`` of that order: each
            row's index in it (``2 * i + tied``, -1 untimestamped) and each segment's runs of
            equal timestamps: a segment that may keep more than ``small_place`` items (its
            pinned rows and candidates) and 1/32 of its timestamped rows is placed on bitmaps
            in that order (``chrono_bits``). ``ts_code`` None: no segment is placed that way
            (the runs are not read), and this specialization of the kernel does not compile
            the bitmap path.
    Scratch
        lstpos : per row, -1 on entry and exit
    Per variant, prepared by the wrapper (``_sliced_score_order``; u-shaped only, else empty)
        u_at, u_pin : segment ``s``'s u-shaped placement when ``u_pin[s] >= 0``: each selected
            candidate's position (``u_at``, per candidate), the pinned items' first place in
            u-shaped order (``u_pin[s]``). It serves the segment when nothing is truncated; a
            truncating segment sorts its kept items itself. ``u_at`` is None where
            ``radix_min`` is (no segment that long): that specialization does not compile it.
    Tuning constants (choose the path, never the answer)
        chrono_min : ``CHRONO_FILTER_MIN``: a short list of more kept items filters the
            shared order (when it keeps at least 1/32 of the segment's timestamped rows)
        small_place : ``SMALL_PLACE``: a list of at most this many kept items is sorted in
            the kernel
        radix_min : ``RADIX_MIN``, for ``placers._place_order``, which places a longer list
            that no fast path serves. None: no segment has more than ``small_place`` items,
            and this specialization does not compile ``_place_order`` and the sorts it calls.
    Outputs (per row; only the rows of the merged segments are written)
        included : bool, the row is in the context: False on entry (only the included rows
            are written)
        reason : int8 reason code (``engine.reasons``); a selected candidate's is written
            only when it is placed (a set that throws leaves it as it was)
        detail_a, detail_b : the cap and the count of a CountCapExceeded row (with
            ``count_caps``, when not empty: the same as the returned ``cc_*``); other reasons'
            fields are rebuilt on demand
        position : the placed position of an included row (other rows' entries mean
            nothing: a fast pass writes one to every candidate of its segment)

    Returns
        per segment ``(err, err_a, sliced_tokens, kept_tokens, trunc, ties)``, then
        ``key_at``, then ``(cc_rows, cc_cap, cc_count)``:
        ``ERR_OVERFLOW`` with the merged token count when the strategy is throw; the tokens the
        slicer selected; the tokens of the included rows; whether the set truncates; whether
        ``chrono_bits._chrono_ties`` puts its runs of equal timestamps in input order, and
        the input positions it reads (``key_at``); the CountCapExceeded rows (segment by
        segment, in candidate order; empty without ``count_caps``) with their caps and counts
        (views of buffers as long as the candidates). A truncating set is left to
        ``placers._place_truncated`` after its slice-stage exclusions (its kept rows, their
        reasons and positions, its kept tokens and ``seq``): a kernel of its own, so a run that
        never truncates never compiles the truncation; so is ``_chrono_ties``.
    """
    n_seg = pin_offsets.shape[0] - 1
    # np.empty and element loops, never np.zeros/np.ones/np.arange: each of those compiles
    # implementations of its own per dtype (see cupel_np._jit)
    err = np.empty(n_seg, dtype=np.int8)
    err_a = np.empty(n_seg, dtype=np.int64)
    sliced_out = np.empty(n_seg, dtype=np.int64)  # per segment: tokens the slicer selected
    kept_out = np.empty(n_seg, dtype=np.int64)  # per segment: tokens of the included rows
    trunc = np.empty(n_seg, dtype=np.bool_)  # the sets _place_truncated places
    ties = np.empty(n_seg, dtype=np.bool_)  # the sets _chrono_ties repairs
    for s in range(n_seg):
        ties[s] = False
        err[s] = 0
        err_a[s] = 0
        sliced_out[s] = 0
        kept_out[s] = 0
        trunc[s] = False
    # The candidates are read in two steps: one pass over all of them (the slice stage's
    # exclusions, counts and sums) that lists the selected ones, then the passes of placement
    # over that list only. Every write of the first pass is a select, not a branch: whether
    # a candidate is selected is unpredictable, and a mispredicted branch per row cost more
    # than the rest of the pass. The list holds what placement reads of each selected
    # candidate (read again by candidate, a sparse selection's rows would each cost a cache
    # miss): its index ``sel_at``, row ``sel_row`` and ``2 * rank + (tokens == 0)`` in
    # ``sel_key``. A long segment placed on bitmaps or from ``u_at`` lists nothing: both of
    # its passes walk every candidate (``place_fast``).
    n_cand = cand_rows.shape[0]
    sel_at = np.empty(n_cand, dtype=np.int64)
    sel_row = np.empty(n_cand, dtype=np.int64)
    sel_key = np.empty(n_cand, dtype=np.int64)
    sel_code = np.empty(n_cand if ts_code is not None else 0, dtype=np.int64)  # (bitmaps: ``ts_code``)
    # chronological placement on bitmaps (chrono_bits): each segment's kept rows are marked,
    # the timestamped ones by their index in the shared timestamp order (the words of ``bp``
    # from 0), the others by input position (``umark``, packed in the words from ``u_word``),
    # each word next to its set bits before it; and the input position of a kept tied row by
    # its index in the shared order (``key_at``, written then read for the kept tied rows only).
    # ``ts_code`` is None where no segment is placed on bitmaps (``place_segments`` decides):
    # Numba prunes every branch on ``ts_code is not None`` before typing, so that
    # specialization never compiles the bitmap path (``chrono_bits``)
    max_m = 0  # the most merged items a segment may have
    for s in range(n_seg):
        ms = pin_offsets[s + 1] - pin_offsets[s] + cand_offsets[s + 1] - cand_offsets[s]
        max_m = ms if ms > max_m else max_m
    # scratch of the short lists' insertion sort (every list when ``radix_min`` is None)
    n_short = max_m
    if radix_min is not None:
        n_short = max_m if max_m < small_place else small_place
    jrow = np.empty(n_short, dtype=np.int64)  # row per input position
    jscore = np.empty(n_short, dtype=np.float64)  # score per input position
    jat = np.empty(n_short + 1, dtype=np.int64)  # input positions in sorted order (+1: a spare slot)
    jrest = np.empty(n_short, dtype=np.int64)  # the untimestamped ones, in input order
    tkey = np.empty(n_short + 1, dtype=np.int64)  # sorted timestamps (+1: a spare slot)
    skey = np.empty(n_short, dtype=np.float64)  # sorted scores
    n_ts = ts_order.shape[0]
    chrono = False
    tied_any = False
    if ts_code is not None:
        chrono = placer == PLACER_CHRONOLOGICAL
        u_word = (n_ts + 63) >> 6 if chrono else 0
        # (+1: a spare slot; a multiple of 8: chrono_bits reads it eight marks at a time)
        umark = np.empty((max_m + 8) & ~7 if chrono else 0, dtype=np.uint8)
        zrow = np.empty(n_cand + 1 if chrono else 0, dtype=np.int64)  # selected rows of zero tokens
        # (+1 word: a candidate not selected reads the word of input position n_pin)
        bp = np.empty(2 * (u_word + ((max_m + 64) >> 6)) if chrono else 0, dtype=np.uint64)
        tied_any = chrono and ts_runs.shape[0] > 0
    key_at = np.empty(n_ts + 1 if tied_any else 0, dtype=np.int64)  # (+1: the others' stores)
    no_mark = np.empty(0, dtype=np.uint8)
    no_zero = np.empty(0, dtype=np.int64)
    # ``cap_of_kind`` None (no count caps, short lists only): Numba prunes every branch on
    # ``cap_of_kind is not None``, so that specialization compiles none of the caps' code
    n_kinds = 1
    n_defer = 0
    if cap_of_kind is not None and count_caps:
        n_kinds = cap_of_kind.shape[0]
        n_defer = cand_rows.shape[0]
    kind_count = np.empty(n_kinds, dtype=np.int64)  # scratch, reset per segment
    # the CountCapExceeded rows, their caps and counts (returned, in candidate order); first
    # every candidate that may be one (``defer``, decided after its segment's pass)
    defer = np.empty(n_defer, dtype=np.int64)
    cc_cap = np.empty(defer.shape[0], dtype=np.int64)
    cc_count = np.empty(defer.shape[0], dtype=np.int64)
    n_cc = 0
    details = detail_a.shape[0] > 0
    for k in range(n_kinds):
        kind_count[k] = 0
    for s in range(n_seg):
        plo = pin_offsets[s]
        phi = pin_offsets[s + 1]
        clo = cand_offsets[s]
        chi = cand_offsets[s + 1]
        n_pin = phi - plo
        n_sel = 0
        pinned_tokens = 0
        for q in range(plo, phi):
            pinned_tokens += tokens[pin_rows[q]]
        sliced_tokens = 0
        eff_target = eff_targets[s]
        override_max = budget_targets[s] - budget_reserves[s]
        has_pin = pinned_tokens > 0
        # this segment's kinds from 0 (all kinds when fewer than its candidates)
        if cap_of_kind is not None and count_caps:
            if n_kinds <= chi - clo:
                for k in range(n_kinds):
                    kind_count[k] = 0
            else:
                for p in range(clo, chi):
                    kind_count[kind[cand_rows[p]]] = 0
        # slice-stage exclusions: an excluded row's reason (a selected row keeps its own until
        # it is placed), the selected ones listed, counted and summed; a CountCapExceeded
        # candidate needs its kind's final count: decided after the pass
        n_def = n_cc
        # a long segment placed on bitmaps (chronological: when it keeps more than
        # ``small_place`` items and 1/32 of its timestamped rows, ``fast_chrono`` below) or
        # from ``u_at`` (u-shaped) unless it truncates: ``place_fast``'s passes, its rows marked
        # included before the overflow is known (taken back when it throws or truncates).
        # Chronological: taken when the segment may keep that many (``may_chrono``) and a
        # sample of its candidates says at least half are selected (a sparser selection is
        # listed, its later passes over the list only); listed after the pass when it keeps
        # fewer than the bitmaps pay for
        fast_u = placer == PLACER_U_SHAPED and u_pin[s] >= 0
        n_most = n_pin + chi - clo
        span = ts_offsets[s + 1] - ts_offsets[s]
        may_chrono = chrono and n_most > small_place and n_most * 32 >= span
        if may_chrono:  # ~1024 candidates evenly spaced (a tuning choice: both paths agree)
            step = max(1, (chi - clo) >> 10)
            n_try = 0
            n_hit = 0
            for p in range(clo, chi, step):
                n_try += 1
                n_hit += np.int64(rank[p] >= 0)
            may_chrono = n_hit * 2 >= n_try
        fused = (u_at is not None and fast_u) or (ts_code is not None and may_chrono)
        n_zero = 0  # (``_select_pass``, chronological: the selected rows of zero tokens in ``zrow``)
        consecutive = False
        if fused:
            for q in range(plo, phi):
                included[pin_rows[q]] = True
        if ts_code is not None and may_chrono:
            for q in range(n_pin):  # input position q: whether its row is untimestamped
                umark[q] = 0 if ts_valid[pin_rows[plo + q]] else 1
            n_sel, sliced_tokens, n_def, n_zero, consecutive = _select_pass(
                rank, cand_rows, tokens, kind, clo, chi, has_pin, eff_target, override_max, cap_of_kind,
                count_caps, kind_count, defer, n_def, reason, included, ts_valid, umark, n_pin, zrow,
            )  # fmt: skip
        elif fused:
            n_sel, sliced_tokens, n_def, _nz, _cons = _select_pass(
                rank, cand_rows, tokens, kind, clo, chi, has_pin, eff_target, override_max, cap_of_kind,
                count_caps, kind_count, defer, n_def, reason, included, ts_valid, no_mark, n_pin, no_zero,
            )  # fmt: skip
        # nearly every candidate selected (counted first: a pass that vectorizes, a tenth of
        # the others): branches rarely mispredict, so the passes branch instead and walk the
        # candidates themselves, no list
        n_pre = 0
        for p in range(clo, clo if fused else chi):
            n_pre += np.int64(rank[p] >= 0)
        # (a segment chronological placement may put on bitmaps is listed: they read the lists)
        dense = not fused and not chrono and n_pre * 8 >= (chi - clo) * 7
        for p in range(clo, chi if dense else clo):
            r = rank[p]
            row = cand_rows[p]
            t = tokens[row]
            if r >= 0:
                n_sel += 1
                sliced_tokens += t
                if cap_of_kind is not None and count_caps:
                    kind_count[kind[row]] += 1
                continue
            if has_pin and t > eff_target and t <= override_max:
                reason[row] = R_PINNED_OVERRIDE
            elif cap_of_kind is not None and count_caps and cap_of_kind[kind[row]] >= 0 and t <= eff_target:
                defer[n_def] = row
                n_def += 1
                reason[row] = R_BUDGET_EXCEEDED
            else:
                reason[row] = R_BUDGET_EXCEEDED
        for p in range(clo, clo if dense or fused else chi):
            row = cand_rows[p]
            t = tokens[row]
            r = rank[p]
            sel = r >= 0
            at = clo + n_sel
            sel_at[at] = p
            sel_row[at] = row
            sel_key[at] = 2 * r + np.int64(t == 0)
            if ts_code is not None and chrono:
                sel_code[at] = ts_code[row]
            n_sel += np.int64(sel)
            sliced_tokens += t if sel else 0
            over = has_pin & (t > eff_target) & (t <= override_max)
            ex = R_PINNED_OVERRIDE if over else R_BUDGET_EXCEEDED
            if cap_of_kind is not None and count_caps:
                k = kind[row]
                kind_count[k] += np.int64(sel)
                defer[n_def] = row
                n_def += np.int64((not sel) & (cap_of_kind[k] >= 0) & (t <= eff_target))
            old = reason[row]
            reason[row] = old if sel else ex
        if cap_of_kind is not None:
            for u in range(n_cc, n_def):  # a capped kind's candidate: CountCapExceeded
                row = defer[u]
                k = kind[row]
                if kind_count[k] >= cap_of_kind[k]:
                    reason[row] = R_COUNT_CAP_EXCEEDED
                    defer[n_cc] = row
                    cc_cap[n_cc] = cap_of_kind[k]
                    cc_count[n_cc] = kind_count[k]
                    n_cc += 1
                    if details:
                        detail_a[row] = cap_of_kind[k]
                        detail_b[row] = kind_count[k]
        m = n_pin + n_sel
        merged_tokens = pinned_tokens + sliced_tokens
        target = budget_targets[s]
        sliced_out[s] = sliced_tokens
        kept_out[s] = merged_tokens
        if fused and merged_tokens > target and overflow != OVERFLOW_PROCEED:
            _unselect(pin_rows, plo, phi, cand_rows, clo, chi, included)
        if merged_tokens > target and overflow == OVERFLOW_THROW:
            err[s] = ERR_OVERFLOW
            err_a[s] = merged_tokens
            kept_out[s] = 0
            continue
        # _finish_ranks makes this same decision before the kernel (a truncating segment gets
        # exact ranks): the two conditions must stay identical
        if merged_tokens > target and overflow == OVERFLOW_TRUNCATE:
            trunc[s] = True  # placed by _place_truncated (compiled only when a set truncates)
            continue
        fast_chrono = chrono and m > small_place and m * 32 >= span
        if ts_code is not None and may_chrono and not fast_chrono:  # fewer kept: listed here
            k = clo
            for p in range(clo, chi):
                r = rank[p]
                if r >= 0:
                    row = cand_rows[p]
                    sel_at[k] = p
                    sel_row[k] = row
                    sel_key[k] = 2 * r + np.int64(tokens[row] == 0)
                    sel_code[k] = ts_code[row]
                    k += 1
        # the selected candidates: [clo, sel_hi) of the sel_* lists, or (dense) of the
        # candidates, skipping the others
        sel_hi = chi if dense else clo + n_sel
        if ts_code is not None and fast_chrono and not fused:  # (listed: marked here, bit by bit)
            _chrono_mark_listed(
                sel_row, sel_code, sel_key, clo, clo + n_sel, n_pin, ts_offsets[s], ts_offsets[s + 1], bp, umark,
                included,
            )  # fmt: skip
            for q in range(plo, phi):
                row = pin_rows[q]
                included[row] = True
                code = ts_code[row]
                if code >= 0:
                    bp[2 * (code >> 7)] |= BIT1 << np.uint64((code >> 1) & 63)
                umark[q - plo] = 1 if code < 0 else 0
        if ts_code is not None and fast_chrono:  # every merged item kept, in merged order: no merged arrays
            _chrono_words(ts_order, ts_offsets[s], ts_offsets[s + 1], included, umark, m, bp, u_word, fused)
        elif u_at is not None and fast_u:  # the pinned items' places (the candidates' are in ``u_at``)
            _u_shaped_all(pin_rows, plo, n_pin, cand_rows, clo, clo, rank, u_at, u_pin[s], m, position)
        elif radix_min is None or m <= small_place:
            # a short list by input position j (pinned in input order, score 1.0, then the
            # slicer output in its order), sorted here by insertion: stable, as _place_order
            for q in range(n_pin):
                jrow[q] = pin_rows[plo + q]
                jscore[q] = 1.0
            for u in range(clo, sel_hi):
                r = rank[u] if dense else sel_key[u] >> 1
                if r < 0:
                    continue
                p = u if dense else sel_at[u]
                jrow[n_pin + r] = cand_rows[p]
                if placer != PLACER_CHRONOLOGICAL:
                    jscore[n_pin + r] = cand_score[p]
            if placer == PLACER_CHRONOLOGICAL and n_ts > 0 and m > chrono_min and m * 32 >= span:
                # many kept: the shared order's span filtered by the kept rows (``lstpos``:
                # input position, -1 on entry and exit); equal timestamps then by input
                # position (an insertion sort on (timestamp, position): inversions only there)
                for j in range(m):
                    lstpos[jrow[j]] = j
                n_t = 0
                tied = False
                prev = ts_sorted[ts_offsets[s]] if span > 0 else 0  # no kept row before: no tie
                for i in range(ts_offsets[s], ts_offsets[s + 1]):
                    # without branches (kept or not is unpredictable): every row is written at
                    # n_t, which only a kept row advances (``tkey``/``jat`` have a spare slot)
                    row = ts_order[i]
                    j = lstpos[row]
                    keep = j >= 0
                    t = ts_sorted[i]
                    tied |= keep & (n_t > 0) & (prev == t)
                    prev = t if keep else prev
                    tkey[n_t] = t
                    jat[n_t] = j
                    n_t += np.int64(keep)
                if tied:
                    for k in range(1, n_t):
                        t = tkey[k]
                        j = jat[k]
                        w = k - 1
                        while w >= 0 and tkey[w] == t and jat[w] > j:
                            jat[w + 1] = jat[w]
                            w -= 1
                        jat[w + 1] = j
                for k in range(n_t):
                    position[jrow[jat[k]]] = k
                n_u = 0
                for j in range(m):
                    row = jrow[j]
                    lstpos[row] = -1
                    if not ts_valid[row]:
                        position[row] = n_t + n_u
                        n_u += 1
            elif placer == PLACER_CHRONOLOGICAL:  # by timestamp, then the untimestamped ones
                n_t = 0
                n_u = 0
                for j in range(m):
                    row = jrow[j]
                    if ts_valid[row]:
                        t = ts[row]
                        w = n_t - 1
                        while w >= 0 and tkey[w] > t:
                            tkey[w + 1] = tkey[w]
                            jat[w + 1] = jat[w]
                            w -= 1
                        tkey[w + 1] = t
                        jat[w + 1] = j
                        n_t += 1
                    else:
                        jrest[n_u] = j
                        n_u += 1
                for k in range(n_t):
                    position[jrow[jat[k]]] = k
                for k in range(n_u):
                    position[jrow[jrest[k]]] = n_t + k
            else:  # by score descending (NaN lowest; -0.0 ties 0.0, as desc_bits), dealt to both ends
                for j in range(m):
                    x = jscore[j]
                    w = j - 1
                    while w >= 0 and (x > skey[w] or (skey[w] != skey[w] and x == x)):
                        skey[w + 1] = skey[w]
                        jat[w + 1] = jat[w]
                        w -= 1
                    skey[w + 1] = x
                    jat[w + 1] = j
                for k in range(m):
                    position[jrow[jat[k]]] = k // 2 if k % 2 == 0 else m - 1 - k // 2
        else:
            # merged list: pinned (input order, score 1.0) then the slicer output in its order
            mrow = np.empty(m, dtype=np.int64)
            mscore = np.empty(m, dtype=np.float64)
            for q in range(n_pin):
                mrow[q] = pin_rows[plo + q]
                mscore[q] = 1.0
            for u in range(clo, sel_hi):
                r = rank[u] if dense else sel_key[u] >> 1
                if r < 0:
                    continue
                p = u if dense else sel_at[u]
                mrow[n_pin + r] = cand_rows[p]
                mscore[n_pin + r] = cand_score[p]
            lst = np.empty(m, dtype=np.int64)
            for j in range(m):
                lst[j] = j
            placed = _place_order(mrow, mscore, lst, ts, ts_valid, placer, radix_min)
            for j in range(m):
                position[mrow[placed[j]]] = j
        for q in range(plo, phi):
            row = pin_rows[q]
            included[row] = True
            reason[row] = R_PINNED
            if ts_code is not None and fast_chrono:  # the places of the marked rows
                _chrono_place(row, q - plo, ts_code, bp, u_word, key_at, position)
        # the selected candidates: included, their reasons and (fast paths) their places
        if ts_code is not None and fast_chrono and not fused:
            _chrono_pass_listed(
                sel_row, sel_code, sel_key, clo, clo + n_sel, n_pin, bp, u_word << 6, tied_any, n_ts, key_at,
                position, reason,
            )  # fmt: skip
        elif ts_code is not None and fast_chrono:
            tied_mode = 0  # the key_at stores: none without tied rows, a branch for few (see _chrono_pass)
            if tied_any:
                n_tied = 0
                for r in range(ts_run_offsets[s], ts_run_offsets[s + 1]):
                    n_tied += ts_runs[2 * r + 1] - ts_runs[2 * r]
                tied_mode = 0 if n_tied == 0 else 2 if n_tied * 16 <= chi - clo else 1
            _chrono_pass(
                rank, cand_rows, consecutive, clo, chi, n_pin, ts_code, bp, u_word << 6, tied_mode, n_ts, key_at,
                position, reason,
            )  # fmt: skip
            for u in range(n_zero):  # (it wrote Scored)
                reason[zrow[u]] = R_ZERO_TOKEN
        elif u_at is not None and fast_u:
            _u_pass(rank, cand_rows, tokens, clo, chi, u_at, position, reason)
        else:
            for u in range(clo, sel_hi):
                if dense:
                    if rank[u] < 0:
                        continue
                    row = cand_rows[u]
                    zero = tokens[row] == 0
                else:
                    row = sel_row[u]
                    zero = (sel_key[u] & 1) == 1
                included[row] = True
                reason[row] = R_ZERO_TOKEN if zero else R_SCORED
        if ts_code is not None and fast_chrono:
            ties[s] = _chrono_tied(ts_order, included, ts_runs, ts_run_offsets[s], ts_run_offsets[s + 1])
    return err, err_a, sliced_out, kept_out, trunc, ties, key_at, defer[:n_cc], cc_cap[:n_cc], cc_count[:n_cc]
