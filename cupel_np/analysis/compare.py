"""The comparison statistics the sweep pages show, from an in-memory SweepResult: pairwise
agreement of the variants (``agreement``, or ``agreement_start`` / ``agreement_add`` /
``agreement_finish`` over blocks, as the page built from written outputs accumulates it),
their ``similarity_order``, swinging contents per kind or source (``swing_by_category``,
``top_categories``), per-variant ``reason_totals``, and the cells, set summaries and token
totals of the rows shown. ``cupel_np.report`` draws them.

Everything works on the [G, V] content-status matrix (G = content groups, one per distinct
content of a set; V = variants) and the failed (variant, set) cells: one pass of matrix
products over bounded blocks of groups, never a Python loop per set or per pair.
"""

from __future__ import annotations

import numpy as np
import pyarrow.compute as pc

from cupel_np.engine.reasons import reason_name_lut


def first_input_row(result, groups: np.ndarray) -> np.ndarray:
    """The input row number of each group's first copy (the tie-break every page uses)."""
    return result.table.input_row[result.group_first_row[groups]]


def top_swings(result, k: int, gs: np.ndarray | None = None) -> np.ndarray:
    """Swinging groups, most contested first (the closest to an even split of the variants
    that ran; ties by the first copy's input row, as the page from written outputs orders)."""
    gs = result.swing_groups if gs is None else gs
    if gs.size == 0:
        return gs
    ok = valid_cells(result, gs)
    n_inc = (result.status[gs] & ok).sum(axis=1)
    contest = np.minimum(n_inc, ok.sum(axis=1) - n_inc)
    order = np.lexsort((first_input_row(result, gs), -contest))
    return gs[order[:k]]


BLOCK = 1 << 18

MAX_CATEGORIES = 8


def valid_cells(result, gs=None) -> np.ndarray:
    """[G, V] bool: the variant ran on the group's set (it did not fail there)."""
    sets = result.group_set if gs is None else result.group_set[gs]
    return ~result.failed.T[sets]


def agreement_start(v: int) -> dict:
    """Accumulators of ``agreement_add`` for V variants."""
    return {k: np.zeros((v, v)) for k in ("ii", "ee", "vv", "iv")}


def agreement_add(acc: dict, st: np.ndarray, ok: np.ndarray | None) -> None:
    """Add a block of groups: ``st`` [g, V] content status, ``ok`` [g, V] the variant ran on
    the group's set (None: every variant ran)."""
    if ok is not None:
        inc = (st & ok).astype(np.float64)
        exc = (~st & ok).astype(np.float64)
        okf = ok.astype(np.float64)
        acc["vv"] += okf.T @ okf
        acc["iv"] += inc.T @ okf
    else:
        inc = st.astype(np.float64)
        exc = 1.0 - inc
        acc["vv"] += inc.shape[0]
        acc["iv"] += inc.sum(axis=0)[:, None]
    acc["ii"] += inc.T @ inc
    acc["ee"] += exc.T @ exc


def agreement_finish(acc: dict) -> dict:
    """The matrices of ``agreement`` from its accumulators."""
    ii, ee, vv, iv = acc["ii"], acc["ee"], acc["vv"], acc["iv"]
    v = ii.shape[0]
    same = ii + ee
    agree = np.divide(same, vv, out=np.full((v, v), np.nan), where=vv > 0)
    union = iv + iv.T - ii
    jac = np.divide(ii, union, out=np.ones((v, v)), where=union > 0)
    jac[vv == 0] = np.nan
    return {
        "agree": agree,
        "jaccard": jac,
        "disagree": np.rint(vv - same).astype(np.int64),
        "compared": np.rint(vv).astype(np.int64),
        "order": similarity_order(agree),
    }


def agreement(result) -> dict:
    """Pairwise agreement of the variants over content groups, counting only sets where both
    ran: ``agree[a, b]`` = share of groups with the same status; ``jaccard[a, b]`` = |A∩B| /
    |A∪B| of the included groups (1.0 when both include nothing); ``disagree[a, b]`` = the
    number of groups that swing between a and b; ``order`` puts similar variants together."""
    acc = agreement_start(len(result.labels))
    g = result.status.shape[0]
    any_failed = bool(result.failed.any())
    for lo in range(0, g, BLOCK):
        ok = valid_cells(result, np.arange(lo, min(g, lo + BLOCK))) if any_failed else None
        agreement_add(acc, result.status[lo : lo + BLOCK], ok)
    return agreement_finish(acc)


def similarity_order(agree: np.ndarray) -> list[int]:
    """A chain through the variants: start at the one least like the others, then always step
    to the unvisited variant most like the current one (ties: input order)."""
    v = agree.shape[0]
    if v == 0:
        return []
    a = np.nan_to_num(agree, nan=0.0)
    mean = (a.sum(axis=1) - np.diag(a)) / max(v - 1, 1)
    cur = int(np.argmin(mean))
    order = [cur]
    left = np.ones(v, dtype=bool)
    left[cur] = False
    while left.any():
        cand = np.where(left, a[cur], -np.inf)
        cur = int(np.argmax(cand))
        order.append(cur)
        left[cur] = False
    return order


def _category_ids(result, which: str) -> tuple[np.ndarray, list[str]]:

    t = result.table
    rows = result.group_first_row
    if which == "kind":  # kinds compare case-insensitively (ASCII), as the scorers do
        return t.kind_id[rows], list(t.kind_vocab)
    enc = pc.dictionary_encode(t.source.take(rows))
    return enc.indices.to_numpy(zero_copy_only=False).astype(np.int64), enc.dictionary.to_pylist()


def top_categories(names: list, swinging: np.ndarray) -> list[int]:
    """The ``MAX_CATEGORIES`` categories with the most swinging groups (ties by name)."""
    k = len(names)
    by_name = np.argsort(np.argsort(np.array([str(n) for n in names], dtype=object))) if k else np.zeros(0, int)
    return [int(j) for j in np.lexsort((by_name, -swinging))[:MAX_CATEGORIES] if swinging[j] > 0]


def swing_by_category(result, which: str) -> dict:
    """Per variant pair and category (``kind`` or ``source`` of the content's first row):
    the number of content groups that swing between the pair. ``counts[c]`` is [V, V]; the
    categories are the ``MAX_CATEGORIES`` with the most swinging groups, the rest summed in
    ``other`` (so the row totals equal ``agreement()['disagree']``). Only swinging groups can
    differ between two variants, so only they are visited; memory is O(MAX_CATEGORIES V²)
    however many categories there are."""
    v = len(result.labels)
    cid, names = _category_ids(result, which)
    k = len(names)
    gs = result.swing_groups
    swing_groups = np.bincount(cid[gs], minlength=k)[:k]
    groups = np.bincount(cid, minlength=k)[:k]
    top = top_categories(names, swing_groups)
    remap = np.full(k, len(top), dtype=np.int64)  # every other category -> one "other" slot
    remap[top] = np.arange(len(top))
    n_slots = len(top) + 1
    counts = np.zeros((n_slots, v, v))
    any_failed = bool(result.failed.any())
    for lo in range(0, gs.size, BLOCK):
        sel_g = gs[lo : lo + BLOCK]
        st = result.status[sel_g]
        if any_failed:
            ok = valid_cells(result, sel_g)
            inc, exc = st & ok, ~st & ok
        else:
            inc, exc = st, ~st
        c = remap[cid[sel_g]]
        order = np.argsort(c, kind="stable")
        bounds = np.searchsorted(c[order], np.arange(n_slots + 1))
        for j in np.flatnonzero(np.diff(bounds)):  # one product per category present
            sel = order[bounds[j] : bounds[j + 1]]
            m = inc[sel].astype(np.float64).T @ exc[sel].astype(np.float64)
            counts[j] += m + m.T
    counts = np.rint(counts).astype(np.int64)
    rest = np.ones(k, dtype=bool)
    rest[top] = False
    return {
        "names": [names[j] for j in top],
        "counts": counts[: len(top)],
        "other": counts[len(top)],
        "swinging": swing_groups[top],
        "groups": groups[top],
        "other_swinging": int(swing_groups[rest].sum()),
    }


def swing_by_category_from_counts(cat: dict, v: int) -> dict:
    """``swing_by_category``'s dict from per-category counts accumulated over written outputs:
    ``cat[name] = (swinging groups, groups, [V, V] swing counts)``."""
    names = list(cat)
    swinging = np.array([cat[n][0] for n in names], dtype=np.int64)
    top = top_categories(names, swinging)
    rest = [j for j in range(len(names)) if j not in set(top)]
    other = sum((cat[names[j]][2] for j in rest), np.zeros((v, v)))
    return {
        "names": [names[j] for j in top],
        "counts": np.rint(np.array([cat[names[j]][2] for j in top]).reshape(len(top), v, v)).astype(np.int64),
        "other": np.rint(other).astype(np.int64),
        "swinging": swinging[top] if top else np.zeros(0, np.int64),
        "groups": np.array([cat[names[j]][1] for j in top], dtype=np.int64),
        "other_swinging": int(swinging[rest].sum()) if rest else 0,
    }


def group_cells(result, groups: np.ndarray) -> dict:
    """For the given content groups: per variant ``status`` ('Included' / exclusion reason
    of the content's first row / 'failed'), ``reason`` (the row's reason name, inclusion
    reasons too) and ``rank`` (1 + the rows of the set that variant scored strictly higher;
    None where the variant failed). Cost: one sort of each touched set per variant."""
    t = result.table
    v = len(result.labels)
    n = len(groups)
    rows = result.group_first_row[groups]
    sets = result.group_set[groups]
    names = reason_name_lut()
    status = np.empty((n, v), dtype=object)
    reason = np.empty((n, v), dtype=object)
    rank = np.zeros((n, v), dtype=np.int64)
    uniq, inv = np.unique(sets, return_inverse=True)
    for vi in range(v):
        codes = result.run.reason[vi][rows].astype(np.int64)
        inc = result.status[groups, vi]
        fail = result.failed[vi, sets]
        reason[:, vi] = names[codes + 1]
        status[:, vi] = np.where(fail, "failed", np.where(inc, "Included", names[codes + 1]))
        for j, s in enumerate(uniq):  # bounded: only the sets of the rows shown
            lo, hi = int(t.offsets[s]), int(t.offsets[s + 1])
            sc = np.sort(result.run.scores_at(vi, np.arange(lo, hi)))
            here = np.flatnonzero(inv == j)
            mine = result.run.scores_at(vi, rows[here])
            rank[here, vi] = 1 + (hi - lo) - np.searchsorted(sc, mine, side="right")
    return {"status": status, "reason": reason, "rank": rank, "failed": result.failed[:, sets].T}


def reason_totals(result) -> tuple[list[str], np.ndarray]:
    """Over ALL swinging contents: per variant, how many are Included and how many are
    excluded for each reason (the reason of the content's first row); failed cells apart."""
    names = reason_name_lut()
    gs = result.swing_groups
    rows = result.group_first_row[gs]
    sets = result.group_set[gs]
    cols: dict[str, None] = {}
    v = len(result.labels)
    per_v = []
    for vi in range(v):
        inc = result.status[gs, vi]
        fail = result.failed[vi, sets]
        codes = result.run.reason[vi][rows].astype(np.int64)
        out = {"Included": int((inc & ~fail).sum()), "failed": int(fail.sum())}
        ex = ~inc & ~fail
        cnt = np.bincount(codes[ex] + 1, minlength=len(names))
        for c in np.flatnonzero(cnt):
            out[str(names[c])] = out.get(str(names[c]), 0) + int(cnt[c])
        per_v.append(out)
        for k in out:
            cols.setdefault(k, None)
    keys = ["Included"] + sorted(k for k in cols if k not in ("Included", "failed")) + ["failed"]
    return keys, np.array([[d.get(k, 0) for k in keys] for d in per_v], dtype=np.int64).reshape(v, len(keys))


def set_summary(result, segs: np.ndarray) -> dict:
    """Per shown set and variant: included count, tokens used, swinging contents included
    (the same numbers as variants.parquet)."""
    t = result.table
    v = len(result.labels)
    inc_n = np.zeros((len(segs), v), dtype=np.int64)
    tok = np.zeros((len(segs), v), dtype=np.int64)
    sw_inc = np.zeros((len(segs), v), dtype=np.int64)
    for j, s in enumerate(segs):
        lo, hi = int(t.offsets[s]), int(t.offsets[s + 1])
        glo, ghi = int(result.swing_offsets[s]), int(result.swing_offsets[s + 1])
        sg = result.swing_groups[glo:ghi]
        for vi in range(v):
            m = result.run.included[vi][lo:hi]
            inc_n[j, vi] = int(m.sum())
            tok[j, vi] = int(t.tokens[lo:hi][m].sum())
            sw_inc[j, vi] = int(result.status[sg, vi].sum())
    return {"included": inc_n, "tokens": tok, "swing_included": sw_inc}


def token_totals(result) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per variant over the sets that ran: tokens used, target, and what the sets could use
    (min(set tokens, target))."""
    t = result.table
    seg = np.repeat(np.arange(t.n_sets), np.diff(t.offsets))
    set_tokens = np.bincount(seg, weights=np.maximum(t.tokens, 0), minlength=t.n_sets)
    v = len(result.labels)
    used, target, could = np.zeros(v), np.zeros(v), np.zeros(v)
    for vi, var in enumerate(result.variants):
        ok = ~result.failed[vi]
        inc = result.run.included[vi]
        used[vi] = float(np.where(inc, t.tokens, 0)[ok[seg]].sum())
        target[vi] = var.budget.target_tokens * ok.sum()
        could[vi] = np.minimum(set_tokens, var.budget.target_tokens)[ok].sum()
    return used, target, could


def kind_mix(result) -> np.ndarray:
    t = result.table
    k = len(t.kind_vocab)
    mix = np.zeros((len(result.labels), k))
    for v in range(len(result.labels)):
        inc = result.run.included[v]
        mix[v] = np.bincount(t.kind_id[inc], weights=t.tokens[inc], minlength=k)[:k]
    return mix
