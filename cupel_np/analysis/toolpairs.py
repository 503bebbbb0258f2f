"""Tool pairs: which tool calls and tool results a selection keeps apart.

A model API accepts a tool result only after the call it answers, and an assistant turn's
tool calls only when every one of them is answered. Items carry that link in two columns
(the importers write them; any table may carry them):

* ``tool_call_id`` (string): the call's id, on the call item and on every result answering it;
* ``tool_role`` (string): ``"call"``, ``"result"`` or null (ASCII case-insensitive).

Items built from ``ContextItem``s / dicts carry the same two values as metadata keys.

Within one item set, the calls and results sharing a ``tool_call_id`` are one *link*. A
selection leaves

* an **orphan call** for every kept call of a link whose results are not all kept, and
* an **orphan result** for every kept result of a link none of whose calls is kept.

Only links the input holds count: a call with no result in its set (the result was never
recorded) and a result whose call is absent from its set (compacted away) are *unmatched*:
no selection can pair them, so they are never orphans (``ToolLinks.unmatched_calls`` /
``unmatched_results`` count them per set).

The links are found once per table (``tool_links``: one pass over the linked rows with a
small hash table per set, ids compared byte for byte, then one pass placing the rows by link;
no sort); the counts of every (variant, set) come from the ``[V, N]`` inclusion matrix in one
kernel pass per variant over the linked rows and the links (``orphan_columns``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cupel_np.analysis._toolpair_kernels import build_links, orphan_counts, role_codes
from cupel_np.engine.groups import group_values
from cupel_np.errors import InvalidConfigError, InvalidInputTypeError
from cupel_np.model.fields import suggestion

#: the two link columns (top-level columns, or metadata keys of items built from ContextItems)
CALL_ID_COLUMN = "tool_call_id"
ROLE_COLUMN = "tool_role"
#: the column the importers write for ``groups``: one key per assistant turn's calls and results
GROUP_COLUMN = "tool_group"
ROLE_CALL, ROLE_RESULT = "call", "result"

__all__ = [
    "CALL_ID_COLUMN",
    "GROUP_COLUMN",
    "ROLE_COLUMN",
    "ToolLinks",
    "group_key_columns",
    "orphan_columns",
    "shown_group_keys",
    "tool_links",
]


@dataclass(frozen=True)
class ToolLinks:
    """The call-result links of one ItemTable (grouped row order).

    ``rows[link_off[l]:link_off[l + 1]]`` are link ``l``'s calls and results (``is_call``
    tells them apart), all in set ``link_set[l]``; links are ordered by set, so set ``s`` owns
    links ``set_link_off[s]:set_link_off[s + 1]``. Only links with at least one call and one
    result are kept (``n_calls[l]`` calls first); ``unmatched_calls[s]`` / ``unmatched_results[s]`` count set ``s``'s
    linked rows whose other side is absent from the set."""

    rows: np.ndarray  # int32 (int64 past 2**31 rows), linked rows grouped by link, calls first,
    # each side in row order
    is_call: np.ndarray  # bool per entry of rows
    n_calls: np.ndarray  # int64 [L]: the calls of each link
    link_off: np.ndarray  # int64 [L + 1]
    link_set: np.ndarray  # int64 [L], ascending
    set_link_off: np.ndarray  # int64 [S + 1]
    unmatched_calls: np.ndarray  # int64 [S]
    unmatched_results: np.ndarray  # int64 [S]

    @property
    def n_links(self) -> int:
        return int(self.link_set.shape[0])

    def segment(self, s: int) -> ToolLinks:
        """The links of set ``s`` alone (offsets rebased; ``link_set`` all 0)."""
        a, b = int(self.set_link_off[s]), int(self.set_link_off[s + 1])
        lo, hi = int(self.link_off[a]), int(self.link_off[b])
        return ToolLinks(
            self.rows[lo:hi],
            self.is_call[lo:hi],
            self.n_calls[a:b],
            self.link_off[a : b + 1] - lo,
            np.zeros(b - a, dtype=np.int64),
            np.array([0, b - a], dtype=np.int64),
            self.unmatched_calls[s : s + 1],
            self.unmatched_results[s : s + 1],
        )

    def counts(self, included: np.ndarray, n_sets: int) -> tuple[np.ndarray, np.ndarray]:
        """``(orphan_calls, orphan_results)`` ``[V, n_sets]`` from a ``[V, N]`` inclusion matrix."""
        return orphan_counts(np.atleast_2d(included), self.rows, self.n_calls, self.link_off, self.link_set, n_sets)


def _string_values(col: pa.Array, name: str) -> pa.Array:
    t = col.type
    if pa.types.is_dictionary(t):
        col = col.cast(t.value_type)
        t = col.type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return col  # read from its buffers, no copy
    if pa.types.is_string_view(t) or pa.types.is_integer(t) or pa.types.is_null(t):
        return col.cast(pa.string())
    raise InvalidInputTypeError(f"column {name!r}: expected strings (tool call ids and roles), got Arrow type {t}")


def _link_columns(table) -> tuple[pa.Array, pa.Array] | None:
    """The ``tool_call_id`` and ``tool_role`` values per row (grouped order), or None when the
    table carries neither as columns nor (items from ContextItems) as metadata keys. One of
    the two columns without the other is an error."""
    extra = set(getattr(table, "extra_columns", ()))
    have = [c for c in (CALL_ID_COLUMN, ROLE_COLUMN) if c in extra]
    if len(have) == 2:
        return (
            _string_values(table.extra_column(CALL_ID_COLUMN), CALL_ID_COLUMN),
            _string_values(table.extra_column(ROLE_COLUMN), ROLE_COLUMN),
        )
    if len(have) == 1:
        missing = ROLE_COLUMN if have[0] == CALL_ID_COLUMN else CALL_ID_COLUMN
        raise InvalidConfigError(
            f"the items have a {have[0]!r} column but no {missing!r} column: tool pairs need both "
            f"({CALL_ID_COLUMN!r}: the call's id on the call and its results; {ROLE_COLUMN!r}: "
            f"'call', 'result' or null)"
        )
    if getattr(table, "columns_from_metadata", False) and table.n:
        ids = table.metadata_values(CALL_ID_COLUMN)
        roles = table.metadata_values(ROLE_COLUMN)
        if len(ids) and ids.null_count < len(ids) and roles.null_count < len(roles):
            return ids, roles
    return None


def _role_error(table, roles: pa.Array, rows: np.ndarray) -> InvalidConfigError:
    """The error naming the first row of ``rows`` (non-null roles) whose role is neither a
    call nor a result (ASCII case-insensitive), with how many such rows there are."""
    bad = np.flatnonzero(role_codes(roles, rows) == -2)
    row = int(rows[bad[0]])
    value = roles[row].as_py()
    return InvalidConfigError(
        f"column {ROLE_COLUMN!r}: input row {int(table.input_row[row])} has {value!r}; expected "
        f"'call', 'result' or null{suggestion(value, [ROLE_CALL, ROLE_RESULT])}"
        + (f" ({bad.size} rows in all)" if bad.size > 1 else "")
    )


def tool_links(table) -> ToolLinks | None:
    """The call-result links of ``table`` (cached on it), or None when the items carry no link
    columns (see the module docstring)."""
    cache = table._cache
    key = ("tool_links",)
    if key in cache:
        return cache[key]
    cols = _link_columns(table)
    if cols is None:
        cache[key] = None
        return None
    ids, roles = cols
    # the rows with an id and a role (a role of a row without an id links nothing)
    rows = np.flatnonzero(pc.and_(pc.is_valid(ids), pc.is_valid(roles)).to_numpy(zero_copy_only=False))
    n_sets = table.n_sets
    built = build_links(ids, roles, rows, np.asarray(table.offsets, dtype=np.int64))
    if built is None:  # a role that is neither 'call' nor 'result'
        raise _role_error(table, roles, rows)
    rows, is_call, n_calls, link_off, link_set, unmatched = built
    out = ToolLinks(
        rows,
        is_call,
        n_calls,
        link_off,
        link_set,
        np.searchsorted(link_set, np.arange(n_sets + 1)).astype(np.int64),
        unmatched[:, 0],
        unmatched[:, 1],
    )
    cache[key] = out
    return out


def orphan_columns(run) -> dict[str, np.ndarray] | None:
    """``{"orphan_calls": [V, S], "orphan_results": [V, S]}`` (int64) for a ``SweepRun``, or
    None when its items carry no link columns. Failed cells hold whatever the matrices say:
    mask them."""
    links = tool_links(run.table)
    if links is None:
        return None
    calls, results = links.counts(run.included, run.table.n_sets)
    return {"orphan_calls": calls, "orphan_results": results}


def group_key_columns(run, taken) -> dict[str, pa.Array]:
    """The group columns of a ``SweepRun``'s variants (``Policy.groups``, in order of first
    use), each as strings per row in grouped row order, for the per-item outputs: the row's
    value, which makes it a member of its set's unit of that key (null: no unit; pinned and
    negative-token rows keep their value but are no members). A name among ``taken`` (the
    outputs' other columns) is an error: the column would be written twice."""
    out: dict[str, pa.Array] = {}
    for plan in run.group_plan:
        if plan is None or plan.column in out:
            continue
        if plan.column in taken or any(plan.column.startswith(f"{c}.") for c in taken):
            raise InvalidConfigError(
                f"groups: column {plan.column!r} has the name of a column the sweep outputs write "
                f"({', '.join(taken)}, ...); rename the column in the input"
            )
        key = plan.key
        out[plan.column] = key.cast(pa.string()) if not pa.types.is_string(key.type) else key
    return out


def shown_group_keys(run) -> dict[str, pa.Array]:
    """The group columns a report shows beside each item of a ``SweepRun``, as strings per row
    in grouped row order: the columns its variants select units by (``group_key_columns``),
    or, when none does, the importers' ``tool_group`` if the items carry it (as a column, or
    as a metadata key of items built from ContextItems); empty otherwise."""
    used = group_key_columns(run, ())
    if used:
        return used
    table = run.table
    if GROUP_COLUMN not in getattr(table, "extra_columns", ()) and not getattr(table, "columns_from_metadata", False):
        return {}
    col = group_values(table, GROUP_COLUMN)
    if col.null_count == len(col):
        return {}
    return {GROUP_COLUMN: col.cast(pa.string()) if not pa.types.is_string(col.type) else col}
