"""QuotaSlice with an inner GreedySlice, without the score sort.

The spec hands QuotaSlice the score-sorted candidates, partitions them by kind (keeping that
order), gives each kind a token budget and runs the inner greedy on each partition; the output
is the partitions' selections concatenated in partition order (kinds by ASCII-lowercased
name). The inner greedy orders its partition by (density desc, score desc, position asc), and
inside one kind the score-sorted position is (score desc, row asc): so, as for the plain
greedy (slicers/greedy.py), the score order is never needed. Here:

* one kernel (:func:`_quota_plan`) computes every segment's kind budgets with
  :func:`kind_budgets` (the sorted path's own function) and lays the candidates out as sub-segments, one per
  (segment, kind with a positive budget), kinds in partition order, rows ascending inside;
* :func:`greedy_segments` runs the greedy over all sub-segments at once (small ones in its
  kernel, big ones by its chunked density walk);
* :func:`_quota_ranks` turns each sub-segment's output positions into positions in its
  segment's output (the kinds' selections concatenated) and scatters them back to the
  candidates.

Candidates are taken in any order that keeps rows ascending inside a segment (the sweep
passes the scoreable rows in row order); a kind with budget 0 or without candidates selects
nothing, as in the spec.
"""

from __future__ import annotations

import numpy as np

from cupel_np._jit import jit
from cupel_np.engine.slicers.codes import ERR_TABLE_TOO_LARGE, MODE_QUOTA
from cupel_np.engine.slicers.greedy import greedy_pick, greedy_segments
from cupel_np.engine.slicers.knapsack import knapsack_pick
from cupel_np.engine.sortkeys import int_keys, stable_argsort


@jit
def _quota_plan(tok, score, kind, offsets, targets, kind_rank, q_has, q_req, q_cap, q_req_all, marks):
    """Sub-segments of the quota partitions that get a positive budget.

    Returns ``(perm, ptok, pscore, pmark, sub_off, sub_target, sub_seg)``: candidate positions
    grouped by sub-segment (ascending inside each) with their tokens, scores and ``marks``
    (bool per candidate; empty: none, and ``pmark`` empty), the sub-segment offsets into
    ``perm``, each sub-segment's kind budget and its segment."""
    n = tok.shape[0]
    n_seg = offsets.shape[0] - 1
    n_kinds = kind_rank.shape[0]
    mass = np.zeros(n_kinds, dtype=np.int64)
    cnt = np.zeros(n_kinds, dtype=np.int64)
    start = np.full(n_kinds, -1, dtype=np.int64)
    found = np.empty(n_kinds, dtype=np.int64)
    kb = np.empty(n_kinds, dtype=np.int64)
    perm = np.empty(n, dtype=np.int64)
    ptok = np.empty(n, dtype=np.int64)
    pscore = np.empty(n, dtype=np.float64)
    has = marks.shape[0] > 0
    pmark = np.empty(n if has else 0, dtype=np.bool_)
    # a sub-segment holds at least one candidate: at most n of them
    sub_off = np.empty(n + 1, dtype=np.int64)
    sub_target = np.empty(n, dtype=np.int64)
    sub_seg = np.empty(n, dtype=np.int64)
    sub_off[0] = 0
    n_sub = 0
    c = 0
    for s in range(n_seg):
        lo = offsets[s]
        hi = offsets[s + 1]
        target = targets[s]
        if hi - lo == 0 or target <= 0:
            continue
        present = kind_budgets(
            tok, kind, lo, hi, target, kind_rank, q_has, q_req, q_cap, q_req_all, mass, cnt, found, kb
        )
        for j in range(present):
            kk = found[j]
            if kb[kk] > 0:
                start[kk] = c
                c += cnt[kk]
                sub_target[n_sub] = kb[kk]
                sub_seg[n_sub] = s
                n_sub += 1
                sub_off[n_sub] = c
        for p in range(lo, hi):
            k = kind[p]
            q = start[k]
            if q >= 0:
                perm[q] = p
                ptok[q] = tok[p]
                pscore[q] = score[p]
                if has:
                    pmark[q] = marks[p]
                start[k] = q + 1
        for j in range(present):
            kk = found[j]
            mass[kk] = 0
            cnt[kk] = 0
            start[kk] = -1
    pmark = pmark[: c if has else 0]
    return perm[:c], ptok[:c], pscore[:c], pmark, sub_off[: n_sub + 1], sub_target[:n_sub], sub_seg[:n_sub]


@jit
def _quota_ranks(perm, sub_off, sub_seg, sub_rank, rank, sub_base):
    """``rank[perm[j]]`` = the sub-segment rank ``sub_rank[j]`` plus the count selected by the
    segment's earlier sub-segments (``sub_base[u]`` for sub-segment ``u``), or -1 when not
    selected."""
    base = 0
    prev = -1
    for u in range(sub_seg.shape[0]):
        if sub_seg[u] != prev:
            prev = sub_seg[u]
            base = 0
        sub_base[u] = base
        got = 0
        for j in range(sub_off[u], sub_off[u + 1]):
            # branch-free (which candidates are selected is unpredictable): -1 stays -1
            r = sub_rank[j]
            sel = r >= 0
            rank[perm[j]] = r + (base if sel else 0)
            got += sel
        base += got


def _sub_ranges(n_seg, sub_seg, sub_base, prefix):
    """The sub-segments' unordered prefixes (``prefix[u]`` ranks from ``sub_base[u]``) longer
    than 1 as their segments' ranges of ranks ``(r_off, r_lo, r_hi)``
    (``stages.Candidates.prefix_ranges``): within a segment the sub-segments come in output
    order, so the ranges ascend."""
    has = prefix > 1
    r_off = np.searchsorted(sub_seg[has], np.arange(n_seg + 1), side="left").astype(np.int64)
    return r_off, sub_base[has], sub_base[has] + prefix[has]


def quota_greedy_segments(
    tok, score, kind, offsets, targets, quotas, rank, *, big=None, min_chunk=None, compared=None, unordered=False
):
    """QuotaSlice with an inner greedy over every segment; candidates in row order inside each
    segment. ``quotas``: ``(kind_rank, q_has, q_req, q_cap, q_req_all)``, the QuotaSlice arrays
    (``SlicerArgs.quota_arrays``). Writes ``rank[p]`` = position in the segment's slicer
    output, -1 when not selected (``rank`` must be -1 on entry). ``big``/``min_chunk`` are
    handed to :func:`greedy_segments` (they choose the path, never the answer).

    ``compared`` (bool per candidate, ``placers.chrono_compared``): only the marked candidates'
    ranks need to be in exact order relative to each other (chronological placement compares
    no others); each kind's fitting prefix is then left unordered apart from them, as the plain
    greedy does (``greedy_segments(prefix=, compared=)``). The selection is the same.

    ``unordered`` (without ``compared``): each kind's fitting prefix is left unordered, ranked
    in index order, and returned as the segments' ranges of ranks ``(r_off, r_lo, r_hi)``
    (``stages.Candidates.prefix_ranges``; u-shaped placement orders only the ties it compares).
    Returns those ranges, else None."""
    kind_rank, q_has, q_req, q_cap, q_req_all = quotas
    marks = _NO_MARKS if compared is None else compared
    perm, ptok, pscore, pmark, sub_off, sub_target, sub_seg = _quota_plan(
        tok, score, kind, offsets, targets, kind_rank, q_has, q_req, q_cap, q_req_all, marks
    )
    n_seg = offsets.shape[0] - 1
    if perm.shape[0] == 0:
        return (np.zeros(n_seg + 1, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)) if unordered else None
    sub_rank = np.full(perm.shape[0], -1, dtype=np.int64)
    prefix = None
    if compared is None and not unordered:
        greedy_segments(ptok, pscore, sub_off, sub_target, sub_rank, big=big, min_chunk=min_chunk)
    else:
        # each sub-segment's unordered prefix holds ranks 0..prefix-1 (with ``compared``, the
        # marked ones last in exact order: concatenated per segment below, the marked ones stay
        # in exact order)
        prefix = np.zeros(sub_target.shape[0], dtype=np.int64)
        greedy_segments(
            ptok,
            pscore,
            sub_off,
            sub_target,
            sub_rank,
            big=big,
            min_chunk=min_chunk,
            prefix=prefix,
            compared=pmark if compared is not None else None,
        )
    sub_base = np.empty(sub_seg.shape[0], dtype=np.int64)
    _quota_ranks(perm, sub_off, sub_seg, sub_rank, rank, sub_base)
    if compared is None and unordered:
        assert prefix is not None
        return _sub_ranges(n_seg, sub_seg, sub_base, prefix)
    return None


_NO_MARKS = np.zeros(0, dtype=np.bool_)


def quota_greedy_slice(args, tok, score, kind, offsets, targets, max_cells, compared=None, unordered=False):
    """:func:`quota_greedy_segments` with the arguments (``args``: a ``SlicerArgs``) and
    results of ``slicers.slice_segments`` (a quota slice with an inner greedy never fails),
    over candidates in row order (``compared``, ``unordered``: see
    :func:`quota_greedy_segments`), and the unordered ranges of ranks (None without
    ``unordered``)."""
    assert args.mode == MODE_QUOTA and not args.use_knapsack  # the caller's dispatch (batch.run_sweep)
    n = tok.shape[0]
    n_seg = offsets.shape[0] - 1
    rank = np.full(n, -1, dtype=np.int64)
    ranges = quota_greedy_segments(
        tok, score, kind, offsets, targets, args.quota_arrays, rank, compared=compared, unordered=unordered
    )
    return (
        rank,
        np.zeros(n_seg, dtype=np.int8),
        np.zeros(n_seg, dtype=np.int64),
        np.zeros(n_seg, dtype=np.int64),
        np.full((n_seg, args.e_kind.shape[0]), -1, dtype=np.int64),
        np.zeros(n_seg, dtype=np.int64),
    ), ranges


@jit
def _inner_pick(use_knapsack, tok, score, cand, target, bucket, max_cells, out, n_out):
    if use_knapsack:
        return knapsack_pick(tok, score, cand, target, bucket, max_cells, out, n_out)
    return greedy_pick(tok, score, cand, target, out, n_out), 0, 0


@jit
def _quota_segment(
    tok,
    score,
    kind,
    lo,
    hi,
    target,
    use_knapsack,
    bucket,
    max_cells,
    kind_rank,
    q_has,
    q_req,
    q_cap,
    q_req_all,
    out,
    n_out,
    mass,
    cnt,
    found,
    kbud,
):
    """QuotaSlice for one segment (percent require/cap per kind, inner greedy/knapsack)."""
    n_out, n_c, cap = _quota_segment_inner(
        tok,
        score,
        kind,
        lo,
        hi,
        target,
        use_knapsack,
        bucket,
        max_cells,
        kind_rank,
        q_has,
        q_req,
        q_cap,
        q_req_all,
        out,
        n_out,
        mass,
        cnt,
        found,
        kbud,
    )
    for p in range(lo, hi):
        mass[kind[p]] = 0
        cnt[kind[p]] = 0
    return n_out, n_c, cap


@jit
def kind_budgets(tok, kind, lo, hi, target, kind_rank, q_has, q_req, q_cap, q_req_all, mass, cnt, found, kb):
    """The spec's QuotaSlice budget of every kind present in candidates ``lo..hi``: fills
    ``found[:present]`` with those kinds in partition order (ASCII-lowercased name, as
    ``kind_rank``), ``kb[kind]`` with each one's token budget, ``mass``/``cnt`` (zero on entry)
    with their tokens and counts; returns ``present``. The caller zeroes ``mass``/``cnt`` at the
    ``found`` kinds afterwards. The one implementation both quota paths use."""
    present = 0
    for p in range(lo, hi):
        k = kind[p]
        if cnt[k] == 0:
            found[present] = k
            present += 1
        mass[k] += tok[p]
        cnt[k] += 1
    tgt = np.float64(target)
    total_required = 0
    for e in range(q_req_all.shape[0]):
        total_required += np.int64(np.floor(q_req_all[e] / 100.0 * tgt))
    unassigned = target - total_required
    if unassigned < 0:
        unassigned = 0
    if present <= 32:  # insertion sort by kind_rank (stable: ties in first-seen order)
        for j in range(1, present):
            x = found[j]
            w = j - 1
            while w >= 0 and kind_rank[found[w]] > kind_rank[x]:
                found[w + 1] = found[w]
                w -= 1
            found[w + 1] = x
    else:  # many kinds in one set: never quadratic
        ranks = np.empty(present, dtype=np.int64)
        for j in range(present):
            ranks[j] = kind_rank[found[j]]
        o = stable_argsort(int_keys(ranks))
        kinds = np.empty(present, dtype=np.int64)
        for j in range(present):
            kinds[j] = found[o[j]]
        for j in range(present):
            found[j] = kinds[j]
    total_mass = 0
    for j in range(present):
        kk = found[j]
        req, cap = _req_cap(kk, q_has, q_req, q_cap, target, tgt)
        if cap > req:
            total_mass += mass[kk]
    for j in range(present):
        kk = found[j]
        req, cap = _req_cap(kk, q_has, q_req, q_cap, target, tgt)
        proportional = 0
        if total_mass > 0 and cap > req:
            proportional = np.int64(np.floor(np.float64(unassigned) * np.float64(mass[kk]) / np.float64(total_mass)))
        b = req + proportional
        kb[kk] = cap if b > cap else b
    return present


@jit
def _req_cap(kk, q_has, q_req, q_cap, target, tgt):
    if q_has[kk]:
        return np.int64(np.floor(q_req[kk] / 100.0 * tgt)), np.int64(np.floor(q_cap[kk] / 100.0 * tgt))
    return np.int64(0), np.int64(target)


@jit
def _quota_segment_inner(
    tok,
    score,
    kind,
    lo,
    hi,
    target,
    use_knapsack,
    bucket,
    max_cells,
    kind_rank,
    q_has,
    q_req,
    q_cap,
    q_req_all,
    out,
    n_out,
    mass,
    cnt,
    found,
    kbud,
):
    # mass / cnt / found / kbud are per-call scratch arrays indexed by kind (mass and cnt zero
    # on entry, zeroed again by the caller): the cost per segment is its own size, not the
    # table's kind vocabulary
    present = kind_budgets(tok, kind, lo, hi, target, kind_rank, q_has, q_req, q_cap, q_req_all, mass, cnt, found, kbud)
    for j in range(present):
        kk = found[j]
        kb = kbud[kk]
        if kb <= 0:
            continue
        cand = np.empty(cnt[kk], dtype=np.int64)
        c = 0
        for p in range(lo, hi):
            if kind[p] == kk:
                cand[c] = p
                c += 1
        n_out, n_c, cap = _inner_pick(use_knapsack, tok, score, cand, kb, bucket, max_cells, out, n_out)
        if cap < 0:
            return n_out, n_c, cap
    return n_out, 0, 0


@jit
def _slice_quota(
    tok,
    score,
    kind,
    offsets,
    targets,
    use_knapsack,
    bucket,
    max_cells,
    kind_rank,
    q_has,
    q_req,
    q_cap,
    q_req_all,
    rank,
    err,
    err_a,
    err_b,
):
    """QuotaSlice over every segment of the score-sorted candidates (the sweep takes
    :func:`quota_greedy_slice` when the inner slicer is greedy).

    Parameters (the fields of ``SlicerArgs`` unpacked by ``slicers.slice_segments``; one
    flat list so that the kernel compiles for one signature)

    Per candidate, score-sorted, segment by segment (read only)
        tok, score, kind : int64 tokens, float64 score, int64 kind id
    Per segment (read only)
        offsets : int64 [n_seg + 1] into the candidates
        targets : int64 token target
    The inner slicer
        use_knapsack : the inner slicer is a knapsack (else greedy)
        bucket, max_cells : the knapsack's bucket size and DP limit
    The quotas (``SlicerArgs.quota_arrays``)
        kind_rank : int64 per kind id, its rank in kind-name order (partition order)
        q_has, q_req, q_cap : per kind id, whether an entry names it, its require and cap (%)
        q_req_all : every entry's require (%), kinds absent from the table too
    Outputs
        rank : per candidate, its place in its segment's output (-1 on entry)
        err, err_a, err_b : per segment, ``ERR_TABLE_TOO_LARGE`` with the knapsack's
            candidates and capacity
    """
    n_kinds = kind_rank.shape[0]
    # per-call scratch indexed by kind; every segment leaves it zeroed
    mass = np.zeros(n_kinds, dtype=np.int64)
    cnt = np.zeros(n_kinds, dtype=np.int64)
    found = np.empty(n_kinds, dtype=np.int64)
    kbud = np.empty(n_kinds, dtype=np.int64)
    for s in range(offsets.shape[0] - 1):
        lo = offsets[s]
        hi = offsets[s + 1]
        target = targets[s]
        if hi - lo == 0 or target <= 0:
            continue
        out = np.empty(hi - lo, dtype=np.int64)
        n_out, n_c, cap = _quota_segment(
            tok,
            score,
            kind,
            lo,
            hi,
            target,
            use_knapsack,
            bucket,
            max_cells,
            kind_rank,
            q_has,
            q_req,
            q_cap,
            q_req_all,
            out,
            0,
            mass,
            cnt,
            found,
            kbud,
        )
        if cap < 0:
            err[s] = ERR_TABLE_TOO_LARGE
            err_a[s] = n_c
            err_b[s] = -cap
            continue
        for j in range(n_out):
            rank[out[j]] = j
