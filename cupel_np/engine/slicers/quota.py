"""QuotaSlice with an inner GreedySlice, without the score sort.

The spec hands QuotaSlice the score-sorted candidates, partitions them by kind (keeping that
order), gives each kind a token budget and runs the inner greedy on each partition; the output
is the partitions' selections concatenated in partition order (kinds by ASCII-lowercased
name). The inner greedy orders its partition by (density desc, score desc, position asc), and
inside one kind the score-sorted position is (score desc, row asc): so, as for the plain
greedy (slicers/greedy.py), the score order is never needed. Here:

* :func:`kind_groups` lays the candidates out as sub-segments, one per (segment, kind present),
  kinds in partition order, rows ascending inside, with each one's tokens: nothing there
  depends on a score or a target, so a sweep's variants share it (``SlicerArgs.run_rows``);
* :func:`_sub_targets` gives each sub-segment its kind budget (:func:`budget_split`, the
  sorted path's own split; 0 where the segment's target is not positive);
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

from typing import NamedTuple

import numpy as np

from cupel_np._jit import jit, jit_inner
from cupel_np.engine.slicers.codes import ERR_TABLE_TOO_LARGE, MODE_QUOTA
from cupel_np.engine.slicers.greedy import fresh_ranks, greedy_pick, greedy_segments
from cupel_np.engine.slicers.knapsack import knapsack_pick
from cupel_np.engine.sortkeys import int_keys, stable_argsort


class KindGroups(NamedTuple):
    """The candidates grouped by (segment, kind) - a quota's partitions - as sub-segments: what
    a quota needs of them that no score or target changes (:func:`kind_groups`), so a sweep's
    variants share it."""

    perm: np.ndarray  #: candidate positions, sub-segment by sub-segment (ascending inside each)
    ptok: np.ndarray  #: their tokens
    pmark: np.ndarray  #: their ``marks`` (empty without marks)
    sub_off: np.ndarray  #: int64 [n_sub + 1] into ``perm``
    sub_seg: np.ndarray  #: each sub-segment's segment (ascending)
    sub_kind: np.ndarray  #: its kind; a segment's kinds in partition order
    sub_mass: np.ndarray  #: its tokens


@jit
def _kind_groups(tok, kind, offsets, kind_rank, marks):
    """:class:`KindGroups` fields of the candidates (``marks``: bool per candidate, or empty)."""
    n = tok.shape[0]
    n_seg = offsets.shape[0] - 1
    n_kinds = kind_rank.shape[0]
    mass = np.zeros(n_kinds, dtype=np.int64)
    cnt = np.zeros(n_kinds, dtype=np.int64)
    start = np.empty(n_kinds, dtype=np.int64)
    found = np.empty(n_kinds, dtype=np.int64)
    perm = np.empty(n, dtype=np.int64)
    ptok = np.empty(n, dtype=np.int64)
    has = marks.shape[0] > 0
    pmark = np.empty(n if has else 0, dtype=np.bool_)
    # at most one sub-segment per (segment, kind), and each holds a candidate
    n_sub_max = min(n, n_seg * n_kinds)
    sub_off = np.empty(n_sub_max + 1, dtype=np.int64)
    sub_seg = np.empty(n_sub_max, dtype=np.int64)
    sub_kind = np.empty(n_sub_max, dtype=np.int64)
    sub_mass = np.empty(n_sub_max, dtype=np.int64)
    sub_off[0] = 0
    n_sub = 0
    c = 0
    for s in range(n_seg):
        lo = offsets[s]
        hi = offsets[s + 1]
        present = _kinds_present(tok, kind, lo, hi, kind_rank, mass, cnt, found)
        for j in range(present):
            kk = found[j]
            start[kk] = c
            c += cnt[kk]
            sub_seg[n_sub] = s
            sub_kind[n_sub] = kk
            sub_mass[n_sub] = mass[kk]
            n_sub += 1
            sub_off[n_sub] = c
        if has:  # two loops: the test stays out of the scatter
            for p in range(lo, hi):
                k = kind[p]
                q = start[k]
                perm[q] = p
                ptok[q] = tok[p]
                pmark[q] = marks[p]
                start[k] = q + 1
        else:
            for p in range(lo, hi):
                k = kind[p]
                q = start[k]
                perm[q] = p
                ptok[q] = tok[p]
                start[k] = q + 1
        for j in range(present):
            kk = found[j]
            mass[kk] = 0
            cnt[kk] = 0
    return perm, ptok, pmark, sub_off[: n_sub + 1], sub_seg[:n_sub], sub_kind[:n_sub], sub_mass[:n_sub]


def kind_groups(tok, kind, offsets, kind_rank, marks=None) -> KindGroups:
    """The candidates (row order inside each segment) grouped by (segment, kind), kinds in
    partition order (``kind_rank``), with ``marks`` (bool per candidate) alongside."""
    return KindGroups(*_kind_groups(tok, kind, offsets, kind_rank, _NO_MARKS if marks is None else marks))


@jit
def _sub_targets(sub_seg, sub_kind, sub_mass, targets, n_kinds, q_has, q_req, q_cap, q_req_all):
    """Each sub-segment's kind budget (0 in a segment whose target is not positive): the
    spec's split (:func:`budget_split`) of its segment's target over the segment's kinds."""
    n_sub = sub_seg.shape[0]
    sub_target = np.empty(n_sub, dtype=np.int64)
    mass = np.zeros(n_kinds, dtype=np.int64)
    found = np.empty(n_kinds, dtype=np.int64)
    kb = np.empty(n_kinds, dtype=np.int64)
    u = 0
    while u < n_sub:
        s = sub_seg[u]
        e = u + 1
        while e < n_sub and sub_seg[e] == s:
            e += 1
        target = targets[s]
        if target <= 0:
            for v in range(u, e):
                sub_target[v] = 0
        else:
            for v in range(u, e):
                found[v - u] = sub_kind[v]
                mass[sub_kind[v]] = sub_mass[v]
            budget_split(found, e - u, mass, target, q_has, q_req, q_cap, q_req_all, kb)
            for v in range(u, e):
                sub_target[v] = kb[sub_kind[v]]
                mass[sub_kind[v]] = 0
        u = e
    return sub_target


@jit
def _gather(x, idx):
    """``x[idx]`` (a loop: NumPy's fancy indexing in a kernel compiles its own machinery)."""
    out = np.empty(idx.shape[0], dtype=x.dtype)
    for j in range(idx.shape[0]):
        out[j] = x[idx[j]]
    return out


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
    (``place_stage.Candidates.prefix_ranges``): within a segment the sub-segments come in output
    order, so the ranges ascend."""
    has = prefix > 1
    r_off = np.searchsorted(sub_seg[has], np.arange(n_seg + 1), side="left").astype(np.int64)
    return r_off, sub_base[has], sub_base[has] + prefix[has]


def quota_greedy_segments(
    tok,
    score,
    kind,
    offsets,
    targets,
    quotas,
    rank,
    *,
    big=None,
    min_chunk=None,
    compared=None,
    unordered=False,
    groups=None,
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
    (``place_stage.Candidates.prefix_ranges``; u-shaped placement orders only the ties it compares).
    Returns those ranges, else None. Every candidate's rank is written (``rank`` may be
    uninitialized on entry).

    ``groups``: :func:`kind_groups` of these candidates (with ``compared`` as its marks), when
    the caller keeps it (every variant of a sweep over the same candidates shares it)."""
    kind_rank, q_has, q_req, q_cap, q_req_all = quotas
    g = kind_groups(tok, kind, offsets, kind_rank, compared) if groups is None else groups
    perm, ptok, pmark, sub_off, sub_seg = g.perm, g.ptok, g.pmark, g.sub_off, g.sub_seg
    n_seg = offsets.shape[0] - 1
    if perm.shape[0] == 0:
        return (np.zeros(n_seg + 1, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)) if unordered else None
    sub_target = _sub_targets(
        sub_seg, g.sub_kind, g.sub_mass, targets, kind_rank.shape[0], q_has, q_req, q_cap, q_req_all
    )
    pscore = _gather(score, perm)
    sub_rank = fresh_ranks(sub_off, sub_target) if big is None else np.full(perm.shape[0], -1, dtype=np.int64)
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


def quota_greedy_slice(
    args, tok, score, kind, offsets, targets, max_cells, compared=None, unordered=False, groups=None
):
    """:func:`quota_greedy_segments` with the arguments (``args``: a ``SlicerArgs``) and
    results of ``slicers.slice_segments`` (a quota slice with an inner greedy never fails),
    over candidates in row order (``compared``, ``unordered``: see
    :func:`quota_greedy_segments`), and the unordered ranges of ranks (None without
    ``unordered``)."""
    assert args.mode == MODE_QUOTA and not args.use_knapsack  # the caller's dispatch (batch.run_sweep)
    n = tok.shape[0]
    n_seg = offsets.shape[0] - 1
    # every candidate is in a sub-segment, so _quota_ranks writes every rank
    rank = np.empty(n, dtype=np.int64)
    ranges = quota_greedy_segments(
        tok,
        score,
        kind,
        offsets,
        targets,
        args.quota_arrays,
        rank,
        compared=compared,
        unordered=unordered,
        groups=groups,
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
    ``found`` kinds afterwards."""
    present = _kinds_present(tok, kind, lo, hi, kind_rank, mass, cnt, found)
    budget_split(found, present, mass, target, q_has, q_req, q_cap, q_req_all, kb)
    return present


@jit
def _kinds_present(tok, kind, lo, hi, kind_rank, mass, cnt, found):
    """The kinds present in candidates ``lo..hi`` in partition order (``found[:present]``)
    with their tokens and counts added to ``mass``/``cnt`` (per kind, zero on entry); returns
    ``present``."""
    present = 0
    for p in range(lo, hi):
        k = kind[p]
        if cnt[k] == 0:
            found[present] = k
            present += 1
        mass[k] += tok[p]
        cnt[k] += 1
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
    return present


#: 2**63 as a float64: the first value above every int64
_I64_SPAN = 9.223372036854775808e18


@jit_inner
def _floor_i64(x):
    """``floor(x)`` as int64 the way Rust's ``as i64`` casts it (the spec's percentages of a
    target are computed so): saturating at the int64 range, NaN 0. Numba's own conversion of a
    float at or past 2**63 is undefined (x86 gives -2**63)."""
    if x != x:
        return np.int64(0)
    if x >= _I64_SPAN:
        return np.int64(0x7FFFFFFFFFFFFFFF)
    if x < -_I64_SPAN:
        return np.int64(-0x7FFFFFFFFFFFFFFF - 1)
    return np.int64(np.floor(x))


@jit
def budget_split(found, present, mass, target, q_has, q_req, q_cap, q_req_all, kb):
    """The spec's split of a segment's ``target`` (> 0) over its kinds ``found[:present]``
    (partition order; ``mass``: tokens per kind): ``kb[kind]`` = each one's token budget, the
    target its inner slicer gets. The one implementation every quota path uses.

    A kind without a quota is capped at ``target`` in the split and at ``floor(100 / 100.0 *
    target)`` when its sub-budget is made (the spec's per-kind slicing, and the Rust crate's
    guard); the two differ only when ``target`` is above 2**53 and rounds down as a float64."""
    tgt = np.float64(target)
    total_required = 0
    for e in range(q_req_all.shape[0]):
        total_required += _floor_i64(q_req_all[e] / 100.0 * tgt)
    unassigned = target - total_required
    if unassigned < 0:
        unassigned = 0
    total_mass = 0
    for j in range(present):
        kk = found[j]
        req, cap = _req_cap(kk, q_has, q_req, q_cap, target, tgt)
        if cap > req:
            total_mass += mass[kk]
    whole = _floor_i64(100.0 / 100.0 * tgt)  # the sub-budget cap of a kind without a quota
    for j in range(present):
        kk = found[j]
        req, cap = _req_cap(kk, q_has, q_req, q_cap, target, tgt)
        proportional = 0
        if total_mass > 0 and cap > req:
            proportional = _floor_i64(np.float64(unassigned) * np.float64(mass[kk]) / np.float64(total_mass))
        b = req + proportional
        b = cap if b > cap else b
        if not q_has[kk] and b > whole:
            b = whole
        kb[kk] = b


@jit
def _req_cap(kk, q_has, q_req, q_cap, target, tgt):
    if q_has[kk]:
        return _floor_i64(q_req[kk] / 100.0 * tgt), _floor_i64(q_cap[kk] / 100.0 * tgt)
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
