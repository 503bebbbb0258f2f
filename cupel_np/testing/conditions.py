"""Column conditions: item predicates that work on one report entry and on a whole corpus.

``col("kind") == "Tool"`` is a condition. Called with a report entry (an ``IncludedItem`` /
``ExcludedItem``, or a bare ``ContextItem``) it answers for that entry, like any predicate;
given a sweep's table it answers for every row at once (one NumPy / Arrow operation per
condition, never a Python call per row). Conditions combine with ``&``, ``|`` and ``~``.

Columns: ``kind`` (compared ASCII-case-insensitively, like the engine compares kinds),
``source``, ``content``, ``tags``, ``tokens``, ``priority``, ``future_relevance_hint``,
``original_tokens``, ``pinned``, ``metadata.<key>``, and per variant ``score`` and
``reason`` (the spec's reason name, e.g. ``"Pinned"`` or ``"BudgetExceeded"``).
A null value (no priority, no such metadata key) satisfies no comparison.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cupel_np.engine.reasons import REASON_NAMES
from cupel_np.errors import InvalidConfigError
from cupel_np.model.items import ItemTable
from cupel_np.text import ascii_fold

__all__ = ["Column", "Condition", "col", "code_mask", "CONDITION_COLUMNS"]

_NUMERIC = ("tokens", "priority", "future_relevance_hint", "original_tokens", "pinned", "score")
_STRING = ("kind", "source", "content", "reason")
#: every column a condition may name (plus ``metadata.<key>``)
CONDITION_COLUMNS = _NUMERIC + _STRING + ("tags",)
_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


class Condition:
    """A predicate over items that also evaluates column-wise over a corpus."""

    def __call__(self, entry) -> bool:
        """True when ``entry`` (IncludedItem, ExcludedItem or ContextItem) satisfies it."""
        return bool(self.test(entry))

    def test(self, entry) -> bool:  # pragma: no cover - overridden
        """The condition on one entry (IncludedItem, ExcludedItem or ContextItem); ``__call__``
        returns it as a bool."""
        raise NotImplementedError

    def mask(self, ctx: RowContext) -> np.ndarray:  # pragma: no cover - overridden
        """Per row of ``ctx.table`` (grouped order): does the row satisfy the condition?"""
        raise NotImplementedError

    def describe(self) -> str:  # pragma: no cover - overridden
        """The condition as text, for failure messages."""
        raise NotImplementedError

    def uses_variant(self) -> bool:
        """Whether the condition reads a per-variant column (score, reason)."""
        return False

    def __and__(self, other: Condition) -> Condition:
        return _Bool("&", _cond(self), _cond(other))

    def __or__(self, other: Condition) -> Condition:
        return _Bool("|", _cond(self), _cond(other))

    def __invert__(self) -> Condition:
        return _Not(self)

    def __bool__(self) -> bool:
        raise TypeError("a condition has no truth value; combine conditions with &, | and ~ (not and/or/not)")

    def __repr__(self) -> str:
        return f"<condition {self.describe()}>"


def _cond(x) -> Condition:
    if not isinstance(x, Condition):
        raise InvalidConfigError(f"expected a condition such as col('kind') == 'Tool', got {type(x).__name__}")
    return x


class RowContext:
    """What a condition reads: a table, and (for score / reason) one variant of a run."""

    def __init__(self, table: ItemTable, run=None, v: int | None = None):
        self.table = table
        self.run = run
        self.v = v
        self._scores: np.ndarray | None = None

    def scores(self) -> np.ndarray:
        if self.run is None:
            raise InvalidConfigError("a condition on 'score' needs a sweep result")
        if self._scores is None:
            self._scores = self.run.scores_for(self.v)
        return self._scores

    def reasons(self) -> np.ndarray:
        if self.run is None:
            raise InvalidConfigError("a condition on 'reason' needs a sweep result")
        return self.run.reason[self.v]


def _entry_parts(entry):
    """(item, score or None, reason name or None) of an entry or a bare item."""
    item = getattr(entry, "item", None)
    if item is None:
        return entry, None, None
    reason = entry.reason
    name = getattr(reason, "reason", None)
    if not isinstance(name, str):
        name = getattr(reason, "value", str(reason))
    return item, entry.score, name


class Column:
    """``col(name)``: compare it (``==``, ``!=``, ``<``, ...) or use ``isin``, ``contains``,
    ``matches``, ``startswith``, ``is_null`` to make a condition."""

    def __init__(self, name: str):
        if not isinstance(name, str):
            raise InvalidConfigError(f"a column name must be a string, got {type(name).__name__}")
        if name not in CONDITION_COLUMNS and not (name.startswith("metadata.") and len(name) > 9):
            raise InvalidConfigError(
                f"unknown condition column {name!r}; columns: {', '.join(CONDITION_COLUMNS)}, metadata.<key>"
            )
        self.name = name

    def _cmp(self, op: str, value) -> Condition:
        return _Compare(self.name, op, value)

    def __eq__(self, value) -> Condition:  # type: ignore[override]
        return self._cmp("==", value)

    def __ne__(self, value) -> Condition:  # type: ignore[override]
        return self._cmp("!=", value)

    def __lt__(self, value) -> Condition:
        return self._cmp("<", value)

    def __le__(self, value) -> Condition:
        return self._cmp("<=", value)

    def __gt__(self, value) -> Condition:
        return self._cmp(">", value)

    def __ge__(self, value) -> Condition:
        return self._cmp(">=", value)

    __hash__ = None  # type: ignore[assignment]

    def isin(self, values: Iterable) -> Condition:
        """Equal to any of ``values``."""
        vals = list(values)
        if not vals:
            raise InvalidConfigError(f"col({self.name!r}).isin needs at least one value")
        out: Condition = self == vals[0]
        for v in vals[1:]:
            out = out | (self == v)
        return out

    def contains(self, text: str) -> Condition:
        """``tags``: has this exact tag; a string column: contains ``text`` as a substring."""
        return _Text(self.name, "contains", text)

    def startswith(self, text: str) -> Condition:
        """A string column starts with ``text``."""
        return _Text(self.name, "startswith", text)

    def matches(self, pattern: str) -> Condition:
        """A string column contains a match of the regular expression ``pattern``."""
        return _Text(self.name, "matches", pattern)

    def is_null(self) -> Condition:
        """The value is absent (``priority``, ``future_relevance_hint``, ``original_tokens``,
        ``metadata.<key>``)."""
        return _Null(self.name)


def col(name: str) -> Column:
    """A column of the items (or, in a sweep, of one variant's results) to build conditions."""
    return Column(name)


def _item_value(name: str, entry):
    item, score, reason = _entry_parts(entry)
    if name == "score":
        if score is None:
            raise InvalidConfigError("a condition on 'score' needs a report entry, not a bare ContextItem")
        return score
    if name == "reason":
        if reason is None:
            raise InvalidConfigError("a condition on 'reason' needs a report entry, not a bare ContextItem")
        return reason
    if name.startswith("metadata."):
        return item.metadata.get(name[9:])
    return getattr(item, name)


class _Compare(Condition):
    def __init__(self, name: str, op: str, value):
        self.name, self.op, self.value = name, op, value
        if name == "tags":
            raise InvalidConfigError("compare tags with col('tags').contains(tag)")
        is_str = name in _STRING or name.startswith("metadata.")
        if is_str:
            if not isinstance(value, str):
                raise InvalidConfigError(f"col({name!r}) compares with a string, got {value!r}")
            if op not in ("==", "!="):
                raise InvalidConfigError(f"col({name!r}) supports == and != (and contains / matches), not {op}")
            if name == "reason":
                _reason_codes(value)  # validates the name
        elif name == "pinned":
            if not isinstance(value, (bool, np.bool_)):
                raise InvalidConfigError(
                    f"col('pinned') is a boolean column: compare it with true or false, got {value!r}"
                )
        elif isinstance(value, str) or value is None or not isinstance(value, (int, float, bool, np.number)):
            raise InvalidConfigError(f"col({name!r}) compares with a number, got {value!r}")

    def describe(self) -> str:
        return f"{self.name} {self.op} {self.value!r}"

    def uses_variant(self) -> bool:
        return self.name in ("score", "reason")

    def test(self, entry) -> bool:
        got = _item_value(self.name, entry)
        if got is None:
            return False
        if self.name in ("kind", "reason"):
            return _OPS[self.op](ascii_fold(got), ascii_fold(self.value))
        if isinstance(got, float) and math.isnan(got):
            return self.op == "!="
        return bool(_OPS[self.op](got, self.value))

    def mask(self, ctx: RowContext) -> np.ndarray:
        t = ctx.table
        name = self.name
        if name == "kind":
            eq = t.kind_id == t.kind_ids_for(self.value)
            return eq if self.op == "==" else ~eq
        if name == "reason":
            eq = code_mask(ctx.reasons(), _reason_codes(self.value))
            return eq if self.op == "==" else ~eq
        if name in ("source", "content") or name.startswith("metadata."):
            arr = _string_column(t, name)
            fn = pc.equal if self.op == "==" else pc.not_equal
            return _np_bool(fn(arr, pa.scalar(self.value, pa.string())))
        values, valid = _numeric_column(ctx, name)
        out = _OPS[self.op](values, self.value)
        return out & valid


def code_mask(codes: np.ndarray, wanted) -> np.ndarray:
    """``np.isin(codes, wanted)`` for an int8 reason-code array, by a 256-entry lookup table
    (several times faster than ``np.isin`` on millions of codes)."""
    lut = np.zeros(256, dtype=np.bool_)
    lut[np.asarray(wanted, dtype=np.int64) & 0xFF] = True
    return lut[codes.view(np.uint8)]


def _reason_codes(name: str) -> list[int]:
    codes = [c for c, n in REASON_NAMES.items() if ascii_fold(n) == ascii_fold(name)]
    if not codes:
        names = sorted(set(REASON_NAMES.values()))
        raise InvalidConfigError(f"unknown reason {name!r}; reasons: {', '.join(names)}")
    return codes


def _string_column(t: ItemTable, name: str):
    if name == "source":
        return t.source
    if name == "content":
        return t.content
    return t.metadata_values(name[9:])


def _np_bool(arr) -> np.ndarray:
    return np.asarray(pc.fill_null(arr, False).to_numpy(zero_copy_only=False), dtype=np.bool_)


def _numeric_column(ctx: RowContext, name: str) -> tuple[np.ndarray, np.ndarray | bool]:
    t = ctx.table
    if name == "tokens":
        return t.tokens, True
    if name == "pinned":
        return t.pinned, True
    if name == "score":
        sc = ctx.scores()
        return sc, True
    if name == "priority":
        return t.priority, t.priority_valid
    if name == "original_tokens":
        return t.original_tokens_col, t.original_tokens_valid
    return t.hint, t.hint_valid  # future_relevance_hint


class _Text(Condition):
    def __init__(self, name: str, how: str, text: str):
        if not isinstance(text, str):
            raise InvalidConfigError(f"col({name!r}).{how} needs a string, got {text!r}")
        if name == "tags" and how != "contains":
            raise InvalidConfigError("tags support contains(tag) only")
        if name != "tags" and name not in ("kind", "source", "content") and not name.startswith("metadata."):
            raise InvalidConfigError(f"col({name!r}) is not a text column; {how} needs kind, source, content or tags")
        if how == "matches":
            try:
                self._re = re.compile(text)
            except re.error as e:
                raise InvalidConfigError(f"col({name!r}).matches: bad regular expression {text!r}: {e}") from None
        self.name, self.how, self.text = name, how, text

    def describe(self) -> str:
        return f"{self.name} {self.how} {self.text!r}"

    def test(self, entry) -> bool:
        got = _item_value(self.name, entry)
        if got is None:
            return False
        if self.name == "tags":
            return self.text in got
        if self.how == "contains":
            return self.text in got
        if self.how == "startswith":
            return got.startswith(self.text)
        return self._re.search(got) is not None

    def mask(self, ctx: RowContext) -> np.ndarray:
        t = ctx.table
        if self.name == "tags":
            hit = np.zeros(t.n, dtype=np.bool_)
            tid = t.tag_id_for(self.text) if t.n_raw_tags else None
            if tid is None:
                return hit
            per_tag = (t.tag_raw_id == tid).astype(np.int64)
            cs = np.zeros(per_tag.shape[0] + 1, dtype=np.int64)
            np.cumsum(per_tag, out=cs[1:])
            offs = t.tag_offsets
            return (cs[offs[1:]] - cs[offs[:-1]]) > 0
        arr = t.kind if self.name == "kind" else _string_column(t, self.name)
        if self.how == "contains":
            res = pc.match_substring(arr, self.text)
        elif self.how == "startswith":
            res = pc.starts_with(arr, self.text)
        else:
            res = pc.match_substring_regex(arr, self.text)
        return _np_bool(res)


class _Null(Condition):
    def __init__(self, name: str):
        if name not in ("priority", "future_relevance_hint", "original_tokens") and not name.startswith("metadata."):
            raise InvalidConfigError(f"col({name!r}) is never null")
        self.name = name

    def describe(self) -> str:
        return f"{self.name} is null"

    def test(self, entry) -> bool:
        return _item_value(self.name, entry) is None

    def mask(self, ctx: RowContext) -> np.ndarray:
        if self.name.startswith("metadata."):
            return np.asarray(
                ctx.table.metadata_values(self.name[9:]).is_null().to_numpy(zero_copy_only=False), dtype=np.bool_
            )
        return ~np.asarray(_numeric_column(ctx, self.name)[1], dtype=np.bool_)


class _Bool(Condition):
    def __init__(self, op: str, a: Condition, b: Condition):
        self.op, self.a, self.b = op, a, b

    def describe(self) -> str:
        return f"({self.a.describe()}) {'and' if self.op == '&' else 'or'} ({self.b.describe()})"

    def uses_variant(self) -> bool:
        return self.a.uses_variant() or self.b.uses_variant()

    def test(self, entry) -> bool:
        if self.op == "&":
            return self.a.test(entry) and self.b.test(entry)
        return self.a.test(entry) or self.b.test(entry)

    def mask(self, ctx: RowContext) -> np.ndarray:
        if self.op == "&":
            return self.a.mask(ctx) & self.b.mask(ctx)
        return self.a.mask(ctx) | self.b.mask(ctx)


class _Not(Condition):
    def __init__(self, a: Condition):
        self.a = _cond(a)

    def describe(self) -> str:
        return f"not ({self.a.describe()})"

    def uses_variant(self) -> bool:
        return self.a.uses_variant()

    def test(self, entry) -> bool:
        return not self.a.test(entry)

    def mask(self, ctx: RowContext) -> np.ndarray:
        return ~self.a.mask(ctx)
