"""Atomic groups (the policy option ``groups = "<column>"``; docs/tool-pairs.md).

The scoreable items of one set that share a non-null value of the column are one *unit*,
selected whole or not at all. The unchanged slicers and placers run on one representative
row per unit; only three steps are new, each one pass over a set-grouped array:

1. :func:`group_plan` (once per table and column, shared by every variant): each scoreable
   position's unit, numbered in order of the units' first members; each unit's members, its
   tokens (the sum of the members'), and the duplicate-content groups among units of one.
2. :func:`collapse` (per variant, after deduplication): one candidate per unit, at its first
   member's position, scored with the highest member score (NaN lowest). A unit of one is
   its item, bit for bit.
3. :func:`expand` (per variant, after placement): every member takes its unit's inclusion
   and reason (and count-cap details and truncation order); the included members of each set
   are renumbered so that a unit's members follow at its place, contiguous, in input order.

Pinned and negative-token items are no members: they are classified before units form.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cupel_np._jit import as_input, jit
from cupel_np.engine.batch_kernels import duplicate_groups
from cupel_np.errors import InvalidConfigError, InvalidInputTypeError


@dataclass(frozen=True)
class GroupPlan:
    """One table's units under one group column (scoreable positions: indices into the
    classification's ``sc_rows``)."""

    column: str
    unit_of: np.ndarray  #: int64 per scoreable position: its unit
    first: np.ndarray  #: int64 per unit: its first member's position (ascending)
    m_off: np.ndarray  #: int64 [U + 1]: offsets into ``m_pos``
    m_pos: np.ndarray  #: int64: every unit's member positions, ascending
    pos_tokens: np.ndarray  #: int64 per scoreable position: its unit's tokens at its first member, else its own
    row_tokens: np.ndarray  #: int64 per row: the unit's tokens for a unit's first member, else the row's own
    unit_row_tokens: np.ndarray  #: int64 per row: its unit's tokens (its own outside units)
    member_rep: np.ndarray  #: int64 per row: the first member's row for the other members of a unit, else -1
    rep_unit: np.ndarray  #: int64 per row: the unit of a larger unit's first member, else -1
    m_rows: np.ndarray  #: int64: ``m_pos`` as rows
    dup_members: np.ndarray  #: duplicate-content groups among units of one (``duplicate_groups``)
    dup_offsets: np.ndarray
    n_multi: int  #: units of two or more members
    key: pa.Array  #: the column's values per row (grouped order), for outputs


def group_values(table, column: str) -> pa.Array:
    """The group column per row (grouped order): a column of the items, or for items built from
    ContextItems a metadata key. Its values are compared exactly (strings or integers)."""
    extra = getattr(table, "extra_columns", ())
    if column in extra:
        col = table.extra_column(column)
    elif getattr(table, "columns_from_metadata", False):
        col = table.metadata_values(column) if table.n else pa.nulls(0, pa.string())
    else:
        raise InvalidConfigError(
            f"groups: the items have no column {column!r} (columns beyond the item fields: "
            f"{', '.join(extra) or 'none'}); the importers write 'tool_group'"
        )
    t = col.type
    if pa.types.is_dictionary(t):
        col = col.cast(t.value_type)
        t = col.type
    if not (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_integer(t) or pa.types.is_null(t)):
        raise InvalidInputTypeError(f"groups: column {column!r} must hold strings or integers, got Arrow type {t}")
    return col


def group_plan(table, column: str, sc_rows: np.ndarray, sc_offsets: np.ndarray, sc_tok: np.ndarray) -> GroupPlan:
    """The units of ``table``'s scoreable rows under ``column`` (see the module docstring)."""
    vals = group_values(table, column)
    enc = pc.dictionary_encode(vals)
    codes = enc.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    m = sc_rows.shape[0]
    code = codes[sc_rows] if m else np.zeros(0, np.int64)
    keyed = np.flatnonzero(code >= 0)
    is_first = np.ones(m, dtype=np.bool_)
    group_first = np.zeros(0, np.int64)
    inverse = np.zeros(0, np.int64)
    if keyed.size:
        seg = np.searchsorted(sc_offsets, keyed, side="right") - 1
        k = seg * max(len(enc.dictionary), 1) + code[keyed]
        _u, first_idx, inverse = np.unique(k, return_index=True, return_inverse=True)
        group_first = keyed[first_idx]
        is_first[keyed] = False
        is_first[group_first] = True
    uid = np.cumsum(is_first) - 1
    unit_of = uid.copy()
    if keyed.size:
        unit_of[keyed] = uid[group_first[inverse.reshape(-1)]]
    first = np.flatnonzero(is_first)
    size = np.bincount(unit_of, minlength=first.shape[0]) if m else np.zeros(0, np.int64)
    m_off = np.zeros(first.shape[0] + 1, dtype=np.int64)
    np.cumsum(size, out=m_off[1:])
    m_pos = np.argsort(unit_of, kind="stable").astype(np.int64)
    tok = np.add.reduceat(sc_tok[m_pos], m_off[:-1]) if first.size else np.zeros(0, np.int64)
    multi = size[unit_of] > 1 if m else np.zeros(0, np.bool_)
    pos_tokens = sc_tok.copy()
    pos_tokens[first] = tok
    row_tokens = table.tokens.copy()
    row_tokens[sc_rows[first]] = tok
    unit_row_tokens = table.tokens.copy()
    unit_row_tokens[sc_rows] = tok[unit_of]
    member_rep = np.full(table.n, -1, dtype=np.int64)
    others = multi & ~is_first
    member_rep[sc_rows[others]] = sc_rows[first[unit_of[others]]]
    rep_unit = np.full(table.n, -1, dtype=np.int64)
    big = np.flatnonzero(size > 1)
    rep_unit[sc_rows[first[big]]] = big
    # deduplication among units of one: every member of a larger unit gets a content id of
    # its own, so it neither loses nor wins
    cid = table.content_id[sc_rows].copy()
    n_multi_rows = int(multi.sum())
    if n_multi_rows:
        cid[multi] = (int(table.content_id.max()) + 1) + np.arange(n_multi_rows)
    dup_members, dup_offsets = duplicate_groups(cid, sc_offsets)
    return GroupPlan(
        column,
        unit_of,
        first,
        m_off,
        m_pos,
        pos_tokens,
        row_tokens,
        unit_row_tokens,
        member_rep,
        rep_unit,
        sc_rows[m_pos].astype(np.int64),
        dup_members,
        dup_offsets,
        int((size > 1).sum()),
        vals,
    )


@jit
def _collapse_kernel(surv, surv_off, unit_of, first, m_off, m_pos, score, out_pos, out_score, out_off):
    n_seg = surv_off.shape[0] - 1
    c = 0
    out_off[0] = 0
    for s in range(n_seg):
        for i in range(surv_off[s], surv_off[s + 1]):
            p = surv[i]
            u = unit_of[p]
            if first[u] != p:
                continue
            best = score[p]
            for j in range(m_off[u] + 1, m_off[u + 1]):
                x = score[m_pos[j]]
                if x == x and (best != best or x > best):  # the highest, NaN lowest
                    best = x
            out_pos[c] = p
            out_score[c] = best
            c += 1
        out_off[s + 1] = c
    return c


def collapse(
    plan: GroupPlan, surv: np.ndarray, surv_off: np.ndarray, score: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(cand, cand_off, unit_score)``: one candidate position per unit among the survivors
    (its first member's, in position order) with the sets' offsets, and ``score`` with each
    candidate's entry replaced by its unit's score (the highest member score, NaN lowest)."""
    out_pos = np.empty(surv.shape[0], dtype=np.int64)
    out_score = np.empty(surv.shape[0], dtype=np.float64)
    out_off = np.empty(surv_off.shape[0], dtype=np.int64)
    c = _collapse_kernel(
        as_input(surv, np.int64),
        as_input(surv_off, np.int64),
        as_input(plan.unit_of, np.int64),
        as_input(plan.first, np.int64),
        as_input(plan.m_off, np.int64),
        as_input(plan.m_pos, np.int64),
        as_input(score, np.float64),
        out_pos,
        out_score,
        out_off,
    )
    cand = out_pos[:c]
    unit_score = score.copy()
    unit_score[cand] = out_score[:c]
    return cand, out_off, unit_score


@jit
def _expand_kernel(
    offsets, member_rep, rep_unit, m_off, m_rows, included, reason, position, seq, detail_a, detail_b, order
):
    """Per set: members take their unit's outcome; included rows renumbered so each unit's
    members follow its first member, in row (input) order. ``order``: scratch per row."""
    n_seg = offsets.shape[0] - 1
    has_seq = seq.shape[0] > 0
    has_detail = detail_a.shape[0] > 0
    for s in range(n_seg):
        lo = offsets[s]
        hi = offsets[s + 1]
        # every member takes its unit's outcome
        for r in range(lo, hi):
            rep = member_rep[r]
            if rep >= 0:
                included[r] = included[rep]
                reason[r] = reason[rep]
                if has_seq:
                    seq[r] = seq[rep]
                if has_detail:
                    detail_a[r] = detail_a[rep]
                    detail_b[r] = detail_b[rep]
        # the placed units in placed order (their first members' positions), then renumber
        n_placed = 0
        for r in range(lo, hi):
            if included[r] and member_rep[r] < 0:
                n_placed += 1
        for r in range(lo, hi):
            if included[r] and member_rep[r] < 0:
                order[lo + position[r]] = r
        # each unit's members (its first member included) in row order
        j = 0
        for k in range(n_placed):
            rep = order[lo + k]
            u = rep_unit[rep]
            if u < 0:
                position[rep] = j
                j += 1
                continue
            for q in range(m_off[u], m_off[u + 1]):
                position[m_rows[q]] = j
                j += 1


def expand(
    plan: GroupPlan,
    offsets: np.ndarray,
    included: np.ndarray,
    reason: np.ndarray,
    position: np.ndarray,
    seq: np.ndarray,
    detail_a: np.ndarray,
    detail_b: np.ndarray,
) -> None:
    """In place, after placement (see the module docstring, step 3)."""
    if plan.n_multi == 0:
        return
    order = np.empty(included.shape[0], dtype=np.int64)
    _expand_kernel(
        as_input(offsets, np.int64),
        as_input(plan.member_rep, np.int64),
        as_input(plan.rep_unit, np.int64),
        as_input(plan.m_off, np.int64),
        as_input(plan.m_rows, np.int64),
        included,
        reason,
        position,
        seq,
        detail_a,
        detail_b,
        order,
    )
