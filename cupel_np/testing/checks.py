"""Checks files: policies, budgets and corpus assertions in one TOML (or JSON) file.

::

    set_column = "session_id"          # optional; --set-column overrides it
    [budget]                           # the default budget of every variant
    max_tokens = 4000
    target_tokens = 3000

    [[variants]]                       # or: presets = ["chat", "rag"], or policies = "file.toml"
    label = "chat"
    preset = "chat"                    # or [variants.config] (a pipeline config table)

    [[check]]
    name = "the system prompt is always included"   # optional
    variant = "chat"                   # optional: a label or a list; default every variant
    assert = "include_item_with_kind"
    kind = "SystemPrompt"

    [[check]]
    assert = "have_no_exclusions_for_kind"
    kind = "Memory"

    [[check]]
    assert = "include_item_matching"
    where = { kind = "ToolOutput", tokens = { gt = 100 } }

A ``where`` table is a column condition: each key a column (see
``cupel_np.testing.conditions``), each value either a plain value (equality) or a table of
operators ``eq ne lt le gt ge in contains startswith matches is_null``; keys are AND-ed.
Every unknown key is an error naming the check and the key.

A check that checks nothing fails: one whose ``kind`` or ``where`` matches no item of the
whole input (the message lists the kinds present, with a "did you mean"), and every check when
the input has no (variant, set) pairs at all, unless the file says ``allow_empty = true``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from cupel_np._files import read_data_file
from cupel_np._fs import AnyPath, as_path
from cupel_np.errors import InvalidConfigError
from cupel_np.model.budget import ContextBudget
from cupel_np.model.fields import suggestion
from cupel_np.model.policy import Policy, is_dotnet_shape
from cupel_np.model.presets import preset
from cupel_np.testing.chain import EXCLUSION_REASONS
from cupel_np.testing.conditions import Condition, col
from cupel_np.text import ascii_fold

__all__ = ["Check", "ChecksFile", "PATTERN_ARGS", "load_checks", "parse_checks", "parse_where"]

#: every assertion a check may name, with its argument keys in call order
PATTERN_ARGS: dict[str, tuple[str, ...]] = {
    "include_item_with_kind": ("kind",),
    "include_item_matching": ("where",),
    "include_exactly_n_items_with_kind": ("kind", "n"),
    "exclude_item_with_reason": ("reason",),
    "exclude_item_matching_with_reason": ("where", "reason"),
    "exclude_item_with_budget_details": ("where", "item_tokens", "available_tokens"),
    "have_no_exclusions_for_kind": ("kind",),
    "have_at_least_n_exclusions": ("n",),
    "excluded_items_are_sorted_by_score_descending": (),
    "have_budget_utilization_above": ("threshold",),
    "have_kind_coverage_count": ("n",),
    "place_item_at_edge": ("where",),
    "place_top_n_scored_at_edges": ("n",),
    "keeps_tool_pairs": (),
}
_CHECK_KEYS = {"name", "variant", "assert"}
_TOP_KEYS = {"set_column", "allow_empty", "budget", "variants", "presets", "policies", "check"}
_VARIANT_KEYS = {"label", "preset", "config", "budget"}
_BUDGET_KEYS = {"max_tokens", "target_tokens", "output_reserve", "reserved_slots", "estimation_safety_margin_percent"}
_OPS = ("eq", "ne", "lt", "le", "gt", "ge", "in", "contains", "startswith", "matches", "is_null")


@dataclass
class Check:
    """One assertion of a checks file, ready to run on a corpus chain."""

    name: str
    pattern: str
    args: tuple
    variants: list[str] | None

    def run(self, chain) -> None:
        """Run the assertion on ``chain`` (a CorpusAssertionChain)."""
        getattr(chain, self.pattern)(*self.args)


@dataclass
class ChecksFile:
    """A parsed checks file: variants (label, policy, budget), checks and the set column."""

    path: str
    variants: list[tuple[str, Policy, ContextBudget]]
    checks: list[Check]
    set_column: str | None = None
    #: ``allow_empty = true``: an input with no (variant, set) pairs passes (default: it fails)
    allow_empty: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


def _read(path: AnyPath) -> Any:
    return read_data_file(path, default="toml")


def load_checks(path) -> ChecksFile:
    """Read and validate a checks file (TOML, or JSON by its ``.json`` suffix)."""
    p = as_path(path)
    return parse_checks(_read(p), str(p), base=p.parent)


def _unknown(where: str, keys, allowed) -> None:
    bad = sorted(set(keys) - set(allowed))
    if bad:
        raise InvalidConfigError(
            f"{where}: unknown key(s) {', '.join(map(repr, bad))}; known: {', '.join(sorted(allowed))}"
        )


def _budget(obj, where: str) -> ContextBudget:
    if isinstance(obj, ContextBudget):
        return obj
    if not isinstance(obj, dict):
        raise InvalidConfigError(f"{where}: a budget must be a table with max_tokens and target_tokens")
    _unknown(where, obj, _BUDGET_KEYS)
    try:
        return ContextBudget.from_dict(obj)
    except (InvalidConfigError, TypeError) as e:
        raise InvalidConfigError(f"{where}: {e}") from None


def _policy(entry: dict, where: str) -> Policy:
    try:
        rest = {k: v for k, v in entry.items() if k not in ("label", "budget")}
        if is_dotnet_shape(rest):  # any key only the .NET shape has, as policies files tell it
            return Policy.from_dotnet_json(rest)
        _unknown(where, entry, _VARIANT_KEYS)
        if ("preset" in entry) == ("config" in entry):
            raise InvalidConfigError("give exactly one of 'preset' or 'config'")
        if "preset" in entry:
            return preset(entry["preset"])
        if not isinstance(entry["config"], dict):
            raise InvalidConfigError("'config' must be a table")
        return Policy.from_dict(entry["config"])
    except (InvalidConfigError, TypeError) as e:
        msg = str(e)
        raise InvalidConfigError(msg if msg.startswith(where) else f"{where}: {msg}") from None


def _variants(data: dict, path: str, base: AnyPath | None, default: ContextBudget | None) -> list:
    entries: list[tuple[str, dict]] = []
    if "policies" in data:
        if not isinstance(data["policies"], str) or not data["policies"]:
            raise InvalidConfigError(
                f"{path}: 'policies' must be the path of a policies file (a string), got {data['policies']!r}"
            )
        ref = as_path(data["policies"])
        if not ref.is_absolute() and base is not None:
            ref = base / str(ref)
        other = _read(ref)
        if not isinstance(other, dict) or not isinstance(other.get("variants"), list):
            raise InvalidConfigError(f"{ref}: expected [[variants]] tables")
        entries += [(f"{ref}: variants[{i}]", e) for i, e in enumerate(other["variants"])]
    raw = data.get("variants", [])
    if not isinstance(raw, list):
        raise InvalidConfigError(f"{path}: 'variants' must be a list of tables ([[variants]])")
    entries += [(f"{path}: variants[{i}]", e) for i, e in enumerate(raw)]
    presets = data.get("presets", [])
    if not isinstance(presets, list) or not all(isinstance(p, str) for p in presets):
        raise InvalidConfigError(f"{path}: 'presets' must be a list of preset names")
    entries += [(f"{path}: presets[{i}]", {"label": p, "preset": p}) for i, p in enumerate(presets)]
    out = []
    for where, e in entries:
        if not isinstance(e, dict) or not isinstance(e.get("label"), str) or not e["label"]:
            raise InvalidConfigError(f"{where}: needs a 'label'")
        pol = _policy(e, where)
        if "budget" in e:
            budget = _budget(e["budget"], f"{where}.budget")
        elif default is not None:
            budget = default
        else:
            raise InvalidConfigError(f"{where}: no budget (add a [budget] table or a budget to the variant)")
        out.append((e["label"], pol, budget))
    labels = [lab for lab, _p, _b in out]
    dup = sorted({lab for lab in labels if labels.count(lab) > 1})
    if dup:
        raise InvalidConfigError(f"{path}: duplicate variant label(s) {', '.join(map(repr, dup))}")
    if not out:
        raise InvalidConfigError(f'{path}: no variants (add [[variants]], presets = [...] or policies = "file")')
    return out


def parse_where(obj, where: str) -> Condition:
    """A ``where`` table as a condition (keys AND-ed)."""
    if isinstance(obj, Condition):
        return obj
    if not isinstance(obj, dict) or not obj:
        raise InvalidConfigError(f"{where}: 'where' must be a non-empty table of column conditions")
    out: Condition | None = None
    for name, spec in obj.items():
        try:
            column = col(name)
            ops = spec if isinstance(spec, dict) else {"eq": spec}
            if not ops:
                raise InvalidConfigError(f"no operator for column {name!r}")
            for op, value in ops.items():
                if op not in _OPS:
                    raise InvalidConfigError(
                        f"unknown operator {op!r} for column {name!r}; operators: {', '.join(_OPS)}"
                    )
                cond = _apply(column, op, value)
                out = cond if out is None else out & cond
        except InvalidConfigError as e:
            raise InvalidConfigError(f"{where}.where: {e}") from None
    assert out is not None
    return out


def _apply(column, op: str, value) -> Condition:
    if op == "is_null":
        if value is not True and value is not False:
            raise InvalidConfigError(f"is_null takes true or false, got {value!r}")
        return column.is_null() if value else ~column.is_null()
    if op == "in":
        if not isinstance(value, list):
            raise InvalidConfigError(f"'in' takes a list, got {value!r}")
        return column.isin(value)
    if op in ("contains", "startswith", "matches"):
        return getattr(column, op)(value)
    return {
        "eq": column.__eq__,
        "ne": column.__ne__,
        "lt": column.__lt__,
        "le": column.__le__,
        "gt": column.__gt__,
        "ge": column.__ge__,
    }[op](value)


def _number(v, key: str, where: str, kind=int):
    ok = isinstance(v, int) and not isinstance(v, bool) if kind is int else isinstance(v, (int, float))
    if not ok or isinstance(v, bool):
        raise InvalidConfigError(f"{where}: '{key}' must be {'an integer' if kind is int else 'a number'}, got {v!r}")
    return v


def _check(entry, where: str, labels: list[str]) -> Check:
    if not isinstance(entry, dict):
        raise InvalidConfigError(f"{where}: a check must be a table")
    if isinstance(entry.get("name"), str):
        where = f"{where} ({entry['name']!r})"
    pattern = entry.get("assert")
    if pattern not in PATTERN_ARGS:
        raise InvalidConfigError(
            f"{where}: 'assert' must name a pattern, got {pattern!r}; patterns: {', '.join(PATTERN_ARGS)}"
        )
    keys = PATTERN_ARGS[pattern]
    _unknown(f"{where} ({pattern})", entry, _CHECK_KEYS | set(keys))
    args = []
    for k in keys:
        if k not in entry:
            raise InvalidConfigError(f"{where} ({pattern}): missing '{k}'")
        v = entry[k]
        if k == "where":
            v = parse_where(v, where)
        elif k in ("n", "item_tokens", "available_tokens"):
            v = _number(v, k, where)
            if v < 0:
                raise InvalidConfigError(f"{where} ({pattern}): '{k}' must be a non-negative integer, got {v!r}")
        elif k == "threshold":
            v = float(_number(v, k, where, float))
            if not math.isfinite(v):
                raise InvalidConfigError(f"{where} ({pattern}): 'threshold' must be a finite number, got {v!r}")
        elif not isinstance(v, str):
            raise InvalidConfigError(f"{where}: '{k}' must be a string, got {v!r}")
        elif k == "reason":
            folded = {ascii_fold(r): r for r in EXCLUSION_REASONS}
            if ascii_fold(v) not in folded:
                raise InvalidConfigError(
                    f"{where} ({pattern}): unknown exclusion reason {v!r}{suggestion(v, EXCLUSION_REASONS)}; "
                    f"reasons: {', '.join(EXCLUSION_REASONS)}"
                )
            v = folded[ascii_fold(v)]
        args.append(v)
    variant = entry.get("variant")
    if variant is not None:
        wanted = [variant] if isinstance(variant, str) else variant
        if not isinstance(wanted, list) or not all(isinstance(w, str) for w in wanted):
            raise InvalidConfigError(f"{where}: 'variant' must be a label or a list of labels")
        for w in wanted:
            if w not in labels:
                raise InvalidConfigError(f"{where}: no variant labelled {w!r}; labels: {', '.join(labels)}")
        variant = wanted
    name = entry.get("name")
    if name is None:
        shown = ", ".join(f"{k}={entry[k]!r}" for k in keys if k != "where")
        name = f"{pattern}({shown})" if shown else pattern
    elif not isinstance(name, str):
        raise InvalidConfigError(f"{where}: 'name' must be a string")
    return Check(name, pattern, tuple(args), variant)


def _check_budgets(check: Check, variants: list, where: str) -> None:
    """A utilization check needs max_tokens > 0 in every variant it runs on: refused here,
    naming the file, the check and the variant, not halfway through the run."""
    if check.pattern != "have_budget_utilization_above":
        return
    for label, _p, budget in variants:
        if (check.variants is None or label in check.variants) and budget.max_tokens <= 0:
            raise InvalidConfigError(
                f"{where}: have_budget_utilization_above divides by max_tokens, which is "
                f"{budget.max_tokens} for variant {label!r}; give that variant a budget with max_tokens > 0"
            )


def parse_checks(data, path: str = "<checks>", base: AnyPath | None = None) -> ChecksFile:
    """Validate a checks document (the parsed TOML / JSON object)."""
    if not isinstance(data, dict):
        raise InvalidConfigError(f"{path}: expected a table at the top level")
    _unknown(path, data, _TOP_KEYS)
    default = _budget(data["budget"], f"{path}: budget") if "budget" in data else None
    variants = _variants(data, path, base, default)
    labels = [lab for lab, _p, _b in variants]
    raw = data.get("check", [])
    if not isinstance(raw, list) or not raw:
        raise InvalidConfigError(f"{path}: no checks (add [[check]] tables)")
    checks = [_check(e, f"{path}: check[{i}]", labels) for i, e in enumerate(raw)]
    for i, ch in enumerate(checks):
        _check_budgets(ch, variants, f"{path}: check[{i}] ({ch.name!r})")
    set_column = data.get("set_column")
    if set_column is not None and (not isinstance(set_column, str) or not set_column):
        raise InvalidConfigError(f"{path}: 'set_column' must be a column name")
    allow_empty = data.get("allow_empty", False)
    if not isinstance(allow_empty, bool):
        raise InvalidConfigError(f"{path}: 'allow_empty' must be true or false, got {allow_empty!r}")
    return ChecksFile(path, variants, checks, set_column, allow_empty)
