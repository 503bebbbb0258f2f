"""Atomic groups (the policy option ``groups = "<column>"``; docs/tool-pairs.md).

The scoreable items of one set that share a non-null value of the column are one *unit*,
selected whole or not at all. The unchanged slicers and placers run in *unit space*: one
candidate per unit (its first member's row, the unit's tokens, its first member's kind), in
the order of the units' first members. Three steps are new:

1. :func:`group_plan` (once per sweep and column, shared by every variant; a task on the
   engine's pool beside the score columns): each scoreable position's unit, numbered in order
   of the units' first members, found in one kernel pass over the sets (no sort); each unit's
   members, its tokens (the sum of the members'), its row, kind and set offsets. Then
   :func:`with_duplicates`: the duplicate-content groups among units of one, as units.
2. :func:`unit_scores` (per variant): each unit's score, the highest member score (NaN
   lowest). A unit of one is its item, bit for bit.
3. :func:`expand` (per variant, after placement): every member takes its unit's inclusion
   and reason (and count-cap details and truncation order); in a set that keeps a unit of two
   or more, the included rows are renumbered so that a unit's members follow at its place,
   contiguous, in input order. Only the larger units' members are visited otherwise.

Pinned and negative-token items are no members: they are classified before units form.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cupel_np._jit import as_input, jit
from cupel_np.errors import InvalidConfigError, InvalidInputTypeError


@dataclass(frozen=True)
class GroupPlan:
    """One table's units under one group column. Positions are indices into the
    classification's ``sc_rows``; rows are the table's (grouped order); units are numbered in
    the order of their first members."""

    column: str
    n_rows: int  #: the table's rows
    unit_of: np.ndarray  #: int64 per scoreable position: its unit
    first: np.ndarray  #: int64 per unit: its first member's position (ascending)
    m_off: np.ndarray  #: int64 [U + 1]: offsets into ``m_pos`` / ``m_rows``
    m_pos: np.ndarray  #: int64: every unit's member positions, ascending
    m_rows: np.ndarray  #: int64: every unit's member rows, ascending
    u_rows: np.ndarray  #: int64 per unit: its first member's row (the unit's candidate row)
    u_tok: np.ndarray  #: int64 per unit: its tokens
    u_kind: np.ndarray  #: per unit: its first member's kind id
    u_off: np.ndarray  #: int64 [n_sets + 1]: each set's units
    u_all: np.ndarray  #: every unit (the candidates when nothing is deduplicated)
    row_tokens: np.ndarray  #: int64 per row: the unit's tokens for a unit's first member, else the row's own
    multi: np.ndarray  #: int64: the units of two or more members, ascending
    multi_off: np.ndarray  #: int64 [n_sets + 1]: each set's ``multi``
    is_other: np.ndarray  #: bool per row: a member of a larger unit other than its first
    dup_members: np.ndarray  #: duplicate-content groups among units of one, as units
    dup_offsets: np.ndarray
    key: pa.Array  #: the column's values per row (grouped order), for outputs

    @property
    def n_multi(self) -> int:
        """Units of two or more members."""
        return int(self.multi.shape[0])

    @cached_property
    def member_rep(self) -> np.ndarray:
        """int64 per row: the first member's row for the other members of a unit, else -1."""
        rep = np.full(self.n_rows, -1, dtype=np.int64)
        size = np.diff(self.m_off)
        rows = self.m_rows
        rep[rows] = np.repeat(rows[self.m_off[:-1]], size)
        rep[rows[self.m_off[:-1]]] = -1
        return rep

    @cached_property
    def unit_row_tokens(self) -> np.ndarray:
        """int64 per row: its unit's tokens (its own outside units)."""
        out = self.row_tokens.copy()
        out[self.m_rows] = np.repeat(self.u_tok, np.diff(self.m_off))
        return out


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


@jit
def _units_kernel(code, sc_off, n_codes, tok):
    """Per set, in position order: a position whose code (-1: none) an earlier position of its
    set holds joins that position's unit, any other starts a unit. Returns ``(unit_of, first,
    u_off, m_off, m_pos, u_tok)`` (see ``GroupPlan``; ``m_pos``: the members as positions)."""
    m = code.shape[0]
    n_seg = sc_off.shape[0] - 1
    last_set = np.full(n_codes, -1, dtype=np.int64)
    last_unit = np.empty(n_codes, dtype=np.int64)
    unit_of = np.empty(m, dtype=np.int64)
    first = np.empty(m, dtype=np.int64)
    size = np.zeros(m + 1, dtype=np.int64)
    u_tok = np.zeros(m, dtype=np.int64)
    u_off = np.zeros(n_seg + 1, dtype=np.int64)
    n_units = 0
    for s in range(n_seg):
        for p in range(sc_off[s], sc_off[s + 1]):
            c = code[p]
            if c >= 0 and last_set[c] == s:
                u = last_unit[c]
            else:
                u = n_units
                n_units += 1
                first[u] = p
                if c >= 0:
                    last_set[c] = s
                    last_unit[c] = u
            unit_of[p] = u
            size[u + 1] += 1
            u_tok[u] += tok[p]
        u_off[s + 1] = n_units
    m_off = np.cumsum(size[: n_units + 1])
    fill = m_off[:-1].copy()
    m_pos = np.empty(m, dtype=np.int64)
    for p in range(m):
        u = unit_of[p]
        m_pos[fill[u]] = p
        fill[u] += 1
    return unit_of, first[:n_units], u_off, m_off, m_pos, u_tok[:n_units]


def with_duplicates(plan: GroupPlan, dup_members: np.ndarray, dup_offsets: np.ndarray) -> GroupPlan:
    """``plan`` with the duplicate-content groups among its units of one, as units: the
    scoreable positions' groups (``batch_kernels.duplicate_groups``) without the members of
    larger units (they neither lose nor win), those left with two or more members."""
    if dup_members.size == 0:
        return plan
    units = plan.unit_of[dup_members]
    keep = np.diff(plan.m_off)[units] == 1
    sizes = np.diff(dup_offsets)
    gid = np.repeat(np.arange(sizes.shape[0]), sizes)
    left = np.bincount(gid[keep], minlength=sizes.shape[0])
    keep &= left[gid] >= 2
    off = np.zeros(int((left >= 2).sum()) + 1, dtype=np.int64)
    np.cumsum(left[left >= 2], out=off[1:])
    return dataclasses.replace(plan, dup_members=units[keep].astype(np.int64), dup_offsets=off)


def group_codes(table, column: str) -> tuple[pa.Array, np.ndarray, int]:
    """``(values, codes, n_codes)``: the group column per row (``group_values``) and each row's
    value as an int64 code (-1 for null), equal codes for equal values. Cached with the table
    (a budget search or a tuning run sweeps one table many times)."""
    cache = getattr(table, "_cache", None)
    ck = ("group_codes", column)
    if cache is not None and ck in cache:
        return cache[ck]
    vals = group_values(table, column)
    enc = pc.dictionary_encode(vals)
    codes = enc.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    out = (vals, codes, max(len(enc.dictionary), 1))
    if cache is not None:
        cache[ck] = out
    return out


def group_plan(table, column: str, sc_rows: np.ndarray, sc_offsets: np.ndarray) -> GroupPlan:
    """The units of ``table``'s scoreable rows under ``column`` (see the module docstring),
    without duplicate-content groups (:func:`with_duplicates` adds them)."""
    vals, codes, n_codes = group_codes(table, column)
    every = sc_rows.shape[0] == table.n  # no pinned or negative-token row
    unit_of, first, u_off, m_off, m_pos, u_tok = _units_kernel(
        as_input(codes if every else codes[sc_rows], np.int64),
        as_input(sc_offsets, np.int64),
        n_codes,
        as_input(table.tokens if every else table.tokens[sc_rows], np.int64),
    )
    size = np.diff(m_off)
    if every:  # position p is row p: the kernel's positions are the rows (no 8 MB gathers)
        u_rows, m_rows = first, m_pos
    else:
        u_rows = sc_rows[first].astype(np.int64, copy=False)
        m_rows = sc_rows[m_pos].astype(np.int64, copy=False)
    row_tokens = table.tokens.copy()
    row_tokens[u_rows] = u_tok
    multi = np.flatnonzero(size > 1).astype(np.int64)
    is_other = np.zeros(table.n, dtype=np.bool_)
    big_rows = np.repeat(size > 1, size)
    is_other[m_rows[big_rows]] = True
    is_other[u_rows[multi]] = False
    return GroupPlan(
        column=column,
        n_rows=table.n,
        unit_of=unit_of,
        first=first,
        m_off=m_off,
        m_pos=m_pos,
        m_rows=m_rows,
        u_rows=u_rows,
        u_tok=u_tok,
        u_kind=table.kind_id[u_rows],
        u_off=u_off,
        u_all=np.arange(first.shape[0]),
        row_tokens=row_tokens,
        multi=multi,
        multi_off=np.searchsorted(multi, u_off).astype(np.int64),
        is_other=is_other,
        dup_members=np.zeros(0, np.int64),
        dup_offsets=np.zeros(1, np.int64),
        key=vals,
    )


@jit
def _max_members(multi, m_off, m_pos, score, out):
    """``out[u]`` = the highest member score of each larger unit (NaN lowest)."""
    for k in range(multi.shape[0]):
        u = multi[k]
        best = out[u]
        for j in range(m_off[u] + 1, m_off[u + 1]):
            x = score[m_pos[j]]
            if x == x and (best != best or x > best):  # the highest, NaN lowest
                best = x
        out[u] = best


def unit_scores(plan: GroupPlan, score: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Each unit's score from the per-position ``score``, into ``out`` (float64, at least U
    long; its first U entries are returned): the highest member score, NaN lowest, so a unit
    of one scores as its item."""
    u = out[: plan.first.shape[0]]
    # (every first member is a scoreable position, so no index is clipped; ``mode="raise"``
    # buffers the output: ~800k units 1.7 ms against 0.7)
    np.take(score, plan.first, out=u, mode="clip")
    if plan.multi.size:
        _max_members(
            as_input(plan.multi, np.int64),
            as_input(plan.m_off, np.int64),
            as_input(plan.m_pos, np.int64),
            as_input(score, np.float64),
            u,
        )
    return u


@jit
def _expand_kernel(
    offsets, multi, multi_off, m_off, m_rows, is_other, included, reason, position, seq, detail_a, detail_b, shift
):
    """Per set: the other members of each larger unit take its first member's outcome. When
    the set keeps such a unit, every placed row moves up by the members (beyond the first) of
    the kept units placed before it, and each unit's other members follow its first, in row
    (input) order. ``seq`` and the details may be empty (not written); ``shift``: scratch,
    one more entry than the largest set."""
    n_seg = offsets.shape[0] - 1
    has_seq = seq.shape[0] > 0
    has_detail = detail_a.shape[0] > 0
    for s in range(n_seg):
        lo = offsets[s]
        n = offsets[s + 1] - lo
        kept = False
        for k in range(multi_off[s], multi_off[s + 1]):
            u = multi[k]
            rep = m_rows[m_off[u]]
            inc = included[rep]
            for q in range(m_off[u] + 1, m_off[u + 1]):
                r = m_rows[q]
                included[r] = inc
                reason[r] = reason[rep]
                if has_seq:
                    seq[r] = seq[rep]
                if has_detail:
                    detail_a[r] = detail_a[rep]
                    detail_b[r] = detail_b[rep]
            if inc:
                if not kept:
                    kept = True
                    for j in range(n + 1):
                        shift[j] = 0
                shift[position[rep] + 1] += m_off[u + 1] - m_off[u] - 1
        if not kept:
            continue  # every placed item is a unit of one (or pinned): positions stand
        for j in range(n):
            shift[j + 1] += shift[j]
        # placed rows (the placer numbered them 0..): branch-free, other rows keep theirs
        for r in range(lo, lo + n):
            t = np.int64(included[r] and not is_other[r])
            p = np.int64(position[r]) * t
            position[r] = p + shift[p] * t + np.int64(position[r]) * (1 - t)
        for k in range(multi_off[s], multi_off[s + 1]):
            u = multi[k]
            rep = m_rows[m_off[u]]
            if included[rep]:
                at = position[rep]
                for q in range(m_off[u] + 1, m_off[u + 1]):
                    position[m_rows[q]] = at + (q - m_off[u])


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
    _expand_kernel(
        as_input(offsets, np.int64),
        as_input(plan.multi, np.int64),
        as_input(plan.multi_off, np.int64),
        as_input(plan.m_off, np.int64),
        as_input(plan.m_rows, np.int64),
        as_input(plan.is_other, np.bool_),
        included,
        reason,
        position,
        seq,
        detail_a,
        detail_b,
        np.empty(int(np.diff(offsets).max(initial=0)) + 1, dtype=np.int64),
    )
