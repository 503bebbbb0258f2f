"""The search space of a policy search: which scorers may appear and with which weights and
options, slicers and their options, placers, deduplication, overflow strategy, budgets.

Written as a TOML file (``data/examples/tune_space.toml`` is a commented example) or the same
structure as a dict. A *range* is a two-number list ``[low, high]`` (integers if both are
integers, else floats) or a table ``{low = .., high = .., log = true}``; *choices* are any
other list or a table ``{choices = [..]}``; anything else is a fixed value::

    [budget]                      # optional when tune() is given a budget; one of: max_tokens = 8000 | [4000, 8000, 16000] (choices)
    max_tokens = 8000             #         | {low = 2000, high = 32000, log = true} (range)
    output_reserve = 0            # fixed (target_tokens = max_tokens - output_reserve)
    reserved_slots = { Memory = 50 }          # fixed, optional: as in a budget table
    estimation_safety_margin_percent = 10.0   # fixed, optional

    [scorers]
    min = 1                       # at least / at most this many scorers in a policy
    max = 4

    [scorers.recency]             # any scorer type; its options are fixed, ranges or choices
    weight = [0.1, 3.0]           # the scorer's weight in the composite (> 0; default [0.1, 1])
    optional = true               # may the search leave it out? (default true)

    [scorers.kind]
    weight = [0.1, 3.0]
    weights = { ToolOutput = [0.0, 1.0], Document = [0.0, 1.0], Message = [0.0, 1.0] }

    [slicers.greedy]              # the slicers to choose from, each with its options
    [slicers.knapsack]
    bucket_size = [20, 200]

    placer = ["chronological", "u_shaped"]
    deduplication = true
    overflow_strategy = "truncate"
    groups = [false, "tool_group"]   # atomic groups (tool pairs) off / on: a dimension too

``kind`` ``weights`` and ``tag`` ``tag_weights`` are tables of per-kind / per-tag values
(each a range, choices or fixed); the policy file's lists (``weights = [{kind = "Message",
weight = 0.5}]``) are read as fixed values. A quota slicer's ``quotas`` and a count quota's
``entries`` written as the policy file's list of tables are that one list (fixed; ``{choices =
[[..], [..]]}`` searches several). Scorer types and options are the policy file's (see the
policy format); a sampled policy is checked like any other policy.

Several signals: a space may hold any number of column scorers, one table per column, each
with its own weight range, ``optional`` and ``default``, and any scorer type several times
under names of your own (``type`` says which)::

    [scorers.column.similarity]   # a column scorer reading the items column "similarity"
    weight = [0.1, 3.0]
    [scorers.column.position]     # another one, reading "position"
    weight = [0.1, 3.0]
    default = 0.0
    [scorers."column:rerank"]     # the same as [scorers.column.rerank]
    [scorers.fresh]               # any name with a type: a second recency, a registered scorer ...
    type = "recency"

The single-column form ``[scorers.column]`` with ``column = "similarity"`` still works. Each
entry is named ``column:<column>`` (a named entry: its name) in the search's parameters, and
the policies it produces name the column (``type = "column"``, ``column = ...``) like any
policy file. Scorer and slicer table names fold case and ``-`` / ``_`` as policy files do
(``[scorers.Metadata-Trust]`` is ``metadata_trust``); column names are taken as written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cupel_np._files import read_data_file
from cupel_np._fs import as_path
from cupel_np.errors import InvalidConfigError
from cupel_np.model.budget import ContextBudget
from cupel_np.model.fields import suggestion
from cupel_np.model.policy import Policy
from cupel_np.model.scorers import known_scorer_types, scorer_type
from cupel_np.model.slicers import SLICER_TYPES
from cupel_np.text import ascii_fold

__all__ = ["SearchSpace", "load_space"]

_TOP_KEYS = {"budget", "scorers", "slicers", "placer", "deduplication", "overflow_strategy", "groups"}
_BUDGET_KEYS = {"max_tokens", "output_reserve", "reserved_slots", "estimation_safety_margin_percent"}
#: per-key maps of a scorer: option name -> the key naming each entry
_MAP_OPTIONS = {("kind", "weights"): "kind", ("tag", "tag_weights"): "tag"}
#: the keys of a single [scorers.column] table (any other key names a column table)
_COLUMN_OWN_KEYS = {"column", "default", "weight", "optional", "type"}


@dataclass(frozen=True)
class Dim:
    """One searched or fixed value: ``kind`` is "fixed", "int", "float" or "choice"."""

    kind: str
    value: Any = None
    low: float = 0.0
    high: float = 0.0
    log: bool = False
    choices: tuple = ()

    def suggest(self, trial, name: str):
        """The value for ``trial`` (an Optuna trial): fixed, or asked from the optimizer."""
        if self.kind == "fixed":
            return self.value
        if self.kind == "int":
            return trial.suggest_int(name, int(self.low), int(self.high), log=self.log)
        if self.kind == "float":
            return trial.suggest_float(name, self.low, self.high, log=self.log)
        return self.choices[trial.suggest_categorical(name, list(range(len(self.choices))))]


def _is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def dim(where: str, v) -> Dim:
    """Read one value of the space file: a range, choices or a fixed value (module docstring)."""
    if isinstance(v, Mapping) and ("low" in v or "high" in v):
        unknown = sorted(set(v) - {"low", "high", "log"})
        if unknown:
            raise InvalidConfigError(
                f"{where}: unknown key {unknown[0]!r} in a range table{suggestion(unknown[0], ('low', 'high', 'log'))}; "
                "known keys: low, high, log"
            )
        if not (_is_num(v.get("low")) and _is_num(v.get("high"))):
            raise InvalidConfigError(f"{where}: a range table needs numbers low and high (and optional log)")
        if not isinstance(v.get("log", False), bool):
            raise InvalidConfigError(f"{where}: 'log' must be true or false, got {v['log']!r}")
        return _range(where, v["low"], v["high"], bool(v.get("log", False)))
    if isinstance(v, Mapping) and "choices" in v:
        if set(v) != {"choices"} or not isinstance(v["choices"], list) or not v["choices"]:
            raise InvalidConfigError(f"{where}: a choices table holds one non-empty list 'choices'")
        return Dim("choice", choices=tuple(v["choices"]))
    if isinstance(v, list):
        if len(v) == 2 and all(_is_num(x) for x in v):
            return _range(where, v[0], v[1], False)
        if not v:
            raise InvalidConfigError(f"{where}: an empty list of choices")
        return Dim("choice", choices=tuple(v))
    return Dim("fixed", value=v)


def _range(where: str, lo, hi, log: bool) -> Dim:
    if lo > hi:
        raise InvalidConfigError(f"{where}: range low {lo!r} is above high {hi!r}")
    if log and lo <= 0:
        raise InvalidConfigError(f"{where}: a log range needs low > 0, got {lo!r}")
    kind = "int" if isinstance(lo, int) and isinstance(hi, int) else "float"
    return Dim(kind, low=lo, high=hi, log=log)


@dataclass(frozen=True)
class ScorerDim:
    """One scorer of the space: its ``type``, its ``name`` (the type, ``column:<column>`` or
    the entry's own name: the search parameters are ``scorer.<name>.*``), weight and options."""

    type: str
    weight: Dim
    optional: bool
    options: dict[str, Any] = field(default_factory=dict)  # name -> Dim, or {key: Dim} for maps
    name: str = ""

    def __post_init__(self):
        if not self.name:
            object.__setattr__(self, "name", self.type)


@dataclass(frozen=True)
class SearchSpace:
    """A parsed search space; ``policy(trial)`` samples a (Policy, ContextBudget) pair."""

    scorers: tuple[ScorerDim, ...]
    min_scorers: int
    max_scorers: int
    slicers: tuple[tuple[str, dict[str, Dim]], ...]
    placer: Dim
    deduplication: Dim
    overflow_strategy: Dim
    max_tokens: Dim | None  # None: the budget comes from the caller
    output_reserve: int
    #: ``Policy.groups``: a column name, None for none, or choices of them (on/off a dimension)
    groups: Dim = Dim("fixed", value=None)
    #: the budget's fixed ``reserved_slots`` (kind -> tokens) and safety margin (EXTENSIONS.md)
    reserved_slots: tuple[tuple[str, int], ...] = ()
    estimation_safety_margin_percent: float = 0.0

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SearchSpace:
        """Parse a space (the TOML file's structure); unknown keys are errors."""
        _no_unknown("search space", d, _TOP_KEYS)
        b = d.get("budget", {})
        if not isinstance(b, Mapping) or (b and "max_tokens" not in b):
            raise InvalidConfigError("search space: [budget] needs max_tokens")
        _no_unknown("budget", b, _BUDGET_KEYS)
        reserve = b.get("output_reserve", 0)
        if not isinstance(reserve, int) or isinstance(reserve, bool) or reserve < 0:
            raise InvalidConfigError(f"budget.output_reserve must be a non-negative integer, got {reserve!r}")
        slots = b.get("reserved_slots", {})
        if not isinstance(slots, Mapping):
            raise InvalidConfigError(f"budget.reserved_slots must be a table of kind -> tokens, got {slots!r}")
        sc = d.get("scorers")
        if not isinstance(sc, Mapping) or not any(isinstance(v, Mapping) for v in sc.values()):
            raise InvalidConfigError("search space: [scorers.<type>] tables are required (at least one scorer)")
        scorers = _scorers(sc)
        _no_unknown("scorers", {k: v for k, v in sc.items() if not isinstance(v, Mapping)}, {"min", "max"})
        lo, hi = sc.get("min", 1), sc.get("max", len(scorers))
        if not (isinstance(lo, int) and isinstance(hi, int) and 1 <= lo <= hi):
            raise InvalidConfigError(
                f"scorers.min / scorers.max must be integers with 1 <= min <= max, got {lo!r}, {hi!r}"
            )
        if sum(not s.optional for s in scorers) > hi:
            raise InvalidConfigError(f"more required (optional = false) scorers than scorers.max = {hi}")
        sl = d.get("slicers", {"greedy": {}})
        if not isinstance(sl, Mapping) or not sl:
            raise InvalidConfigError("search space: [slicers.<type>] tables (at least one) expected")
        slicers: list[tuple[str, dict[str, Dim]]] = []
        for given, opts in sl.items():
            name = _fold(given)
            if name not in SLICER_TYPES:
                raise InvalidConfigError(
                    f"slicers: unknown slicer {given!r}; expected one of: {', '.join(SLICER_TYPES)}"
                )
            if any(n == name for n, _ in slicers):
                raise InvalidConfigError(f"slicers: {given!r} names slicer {name!r} a second time")
            if not isinstance(opts, Mapping):
                raise InvalidConfigError(f"slicers.{given}: expected a table of options")
            slicers.append((name, {k: _slicer_option(f"slicers.{given}.{k}", k, v) for k, v in opts.items()}))
        space = cls(
            scorers=scorers,
            min_scorers=lo,
            max_scorers=hi,
            slicers=tuple(slicers),
            placer=dim("placer", d.get("placer", "chronological")),
            deduplication=dim("deduplication", d.get("deduplication", True)),
            overflow_strategy=dim("overflow_strategy", d.get("overflow_strategy", "throw")),
            max_tokens=dim("budget.max_tokens", b["max_tokens"]) if b else None,
            output_reserve=reserve,
            groups=_groups_dim(d.get("groups")),
            reserved_slots=tuple(slots.items()),
            estimation_safety_margin_percent=b.get("estimation_safety_margin_percent", 0.0),
        )
        space._check_corners()
        return space

    @classmethod
    def from_file(cls, path) -> SearchSpace:
        """Read a TOML space file (errors name the file)."""
        p = as_path(path)
        data = read_data_file(p, default="toml")
        if not isinstance(data, Mapping):
            raise InvalidConfigError(f"{p}: a search space is a table, got {type(data).__name__}")
        try:
            return cls.from_dict(data)
        except InvalidConfigError as e:
            raise InvalidConfigError(f"{p}: {e}") from None

    # -- sampling ---------------------------------------------------------------------
    def budget(self, trial) -> ContextBudget | None:
        """The trial's budget (fixed, or asked); None when the space names no budget."""
        if self.max_tokens is None:
            return None
        mt = self.max_tokens.suggest(trial, "budget.max_tokens")
        return ContextBudget(
            max_tokens=int(mt),
            target_tokens=int(mt) - self.output_reserve,
            reserved_slots=dict(self.reserved_slots) or None,
            estimation_safety_margin_percent=self.estimation_safety_margin_percent,
        )

    def config(self, trial) -> dict[str, Any]:
        """The trial's policy as a policy dict (the policy file's structure)."""
        chosen = []
        for s in self.scorers:
            use = (not s.optional) or trial.suggest_categorical(f"scorer.{s.name}.use", [True, False])
            if use:
                chosen.append(s)
        if len(chosen) < self.min_scorers:  # too few asked: add the first left-out ones, in order
            chosen += [s for s in self.scorers if s not in chosen][: self.min_scorers - len(chosen)]
            chosen.sort(key=self.scorers.index)
        if len(chosen) > self.max_scorers:  # too many: keep the required ones, then the first
            keep = [s for s in chosen if not s.optional]
            keep += [s for s in chosen if s.optional][: self.max_scorers - len(keep)]
            chosen = sorted(keep, key=self.scorers.index)
        scorers = [_scorer_entry(s, trial) for s in chosen]
        names = [n for n, _ in self.slicers]
        si = 0 if len(names) == 1 else trial.suggest_categorical("slicer", list(range(len(names))))
        name, opts = self.slicers[si]
        cfg: dict[str, Any] = {"slicer": name}
        cfg.update({k: dv.suggest(trial, f"slicer.{name}.{k}") for k, dv in opts.items()})
        cfg.update(
            placer=self.placer.suggest(trial, "placer"),
            deduplication=self.deduplication.suggest(trial, "deduplication"),
            overflow_strategy=self.overflow_strategy.suggest(trial, "overflow_strategy"),
            scorers=scorers,
        )
        g = self.groups.suggest(trial, "groups")
        if g is not None:
            cfg["groups"] = g
        return cfg

    def distributions(self) -> dict[str, Any]:
        """Every searched value as an Optuna distribution, conditional ones included (the
        names ``config`` and ``budget`` ask for), for ``study.ask(fixed_distributions=...)``:
        a trial then carries all of them and ``config(ParamsTrial(trial.params))`` reads the
        ones its choices use."""
        from optuna import distributions as od

        out: dict[str, Any] = {}

        def add(name: str, d: Dim) -> None:
            if d.kind == "int":
                out[name] = od.IntDistribution(int(d.low), int(d.high), log=d.log)
            elif d.kind == "float":
                out[name] = od.FloatDistribution(float(d.low), float(d.high), log=d.log)
            elif d.kind == "choice":
                out[name] = od.CategoricalDistribution(list(range(len(d.choices))))

        for sd in self.scorers:
            if sd.optional:
                out[f"scorer.{sd.name}.use"] = od.CategoricalDistribution([True, False])
            add(f"scorer.{sd.name}.weight", sd.weight)
            for k, o in sd.options.items():
                for name, dv in o.items() if isinstance(o, dict) else [(None, o)]:
                    add(f"scorer.{sd.name}.{k}" + ("" if name is None else f".{name}"), dv)
        if len(self.slicers) > 1:
            out["slicer"] = od.CategoricalDistribution(list(range(len(self.slicers))))
        for name, opts in self.slicers:
            for k, dv in opts.items():
                add(f"slicer.{name}.{k}", dv)
        for name in ("placer", "deduplication", "overflow_strategy", "groups"):
            add(name, getattr(self, name))
        if self.max_tokens is not None:
            add("budget.max_tokens", self.max_tokens)
        return out

    def fixed_policies(self) -> list[Policy]:
        """One policy per scorer of the space whose options are all fixed (a column, recency,
        a registered scorer without searched options), the scorer alone: what the search can
        ask of that signal whatever its weight (``tune`` checks them for constant scores)."""
        out = []
        for sd in self.scorers:
            fixed = all(
                all(x.kind == "fixed" for x in o.values()) if isinstance(o, dict) else o.kind == "fixed"
                for o in sd.options.values()
            )
            if fixed:
                out.append(Policy.from_dict({"scorers": [_scorer_entry(sd, _LowTrial())]}))
        return out

    def _check_corners(self) -> None:
        """Build one policy from the first choice / low end of everything, so a bad option
        fails when the space is read, not in the middle of a search."""
        probe = _LowTrial()
        try:
            Policy.from_dict(self.config(probe))
            self.budget(probe)
        except InvalidConfigError as e:
            raise InvalidConfigError(f"search space gives an invalid policy: {e}") from None


def _tables(v) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(x, Mapping) for x in v)


def _slicer_option(where: str, key: str, v) -> Dim:
    """A slicer option: ``quotas`` / ``entries`` written as the policy file's list of tables is
    that one list (fixed; ``{choices = [[..], [..]]}`` searches several); any other value as
    ``dim`` reads it."""
    if key in ("quotas", "entries") and _tables(v):
        return Dim("fixed", value=v)
    return dim(where, v)


def _groups_dim(v) -> Dim:
    """``groups``: a column name, ``false`` / ``""`` for none, or a list (choices) of them, e.g.
    ``[false, "tool_group"]``: keeping tool pairs whole as a dimension of the search."""
    d = dim("groups", v)
    if d.kind in ("int", "float"):
        raise InvalidConfigError(f"groups: a group column name, false, or a list of them, got {v!r}")
    vals = d.choices if d.kind == "choice" else (d.value,)
    out: list[str | None] = []
    for g in vals:
        if g is None or g is False or g == "":
            out.append(None)
        elif isinstance(g, str) and g.strip():
            out.append(g)
        else:
            raise InvalidConfigError(f'groups: a group column name, or false / "" for none, got {g!r}')
    if len(set(out)) < len(out):
        raise InvalidConfigError(f"groups: a value is given twice ({v!r})")
    return Dim("choice", choices=tuple(out)) if d.kind == "choice" else Dim("fixed", value=out[0])


def _fold(name: str) -> str:
    """A scorer or slicer name as policy files read it: ASCII case folded, ``-`` as ``_``."""
    return ascii_fold(name).replace("-", "_")


def _scorers(sc: Mapping) -> tuple[ScorerDim, ...]:
    """Every scorer table of ``[scorers]`` (module docstring): ``[scorers.<type>]``,
    ``[scorers.column.<column>]``, ``[scorers."column:<column>"]`` and ``[scorers.<name>]``
    with a ``type``. Two entries with the same name (or reading the same column) are an error."""
    out: list[ScorerDim] = []
    for key, v in sc.items():
        if not isinstance(v, Mapping):
            continue
        folded = _fold(key)
        nested = v and all(isinstance(x, Mapping) for x in v.values()) and not set(v) & _COLUMN_OWN_KEYS
        if folded == "column" and nested:
            for col, opts in v.items():  # [scorers.column.<column>] tables
                out.append(_column_entry(f"scorers.column.{col}", col, opts))
        elif folded.startswith("column:"):
            out.append(_column_entry(f"scorers.{key}", key.split(":", 1)[1], v))
        elif "type" in v:
            t = v["type"]
            if not isinstance(t, str) or not t:
                raise InvalidConfigError(f"scorers.{key}.type must be a scorer type name, got {t!r}")
            rest = {k: x for k, x in v.items() if k != "type"}
            if _fold(t) == "column":
                if "column" not in rest:
                    raise InvalidConfigError(f"scorers.{key}: a column scorer needs 'column' (the items column)")
                out.append(_scorer(f"scorers.{key}", "column", rest, name=folded))
            else:
                out.append(_scorer(f"scorers.{key}", _fold(t), rest, name=folded))
        else:
            out.append(_scorer(f"scorers.{key}", folded, v))
    seen: set[str] = set()
    for s in out:
        col = s.options.get("column")
        idents = {s.name}
        if s.type == "column" and isinstance(col, Dim) and col.kind == "fixed":
            idents.add(f"column:{col.value}")
        clash = sorted(idents & seen)
        if clash:
            raise InvalidConfigError(
                f"scorers: {clash[0]!r} appears twice in the search space; give each scorer one table"
            )
        seen |= idents
    return tuple(out)


def _column_entry(where: str, column: str, v) -> ScorerDim:
    if not isinstance(v, Mapping):
        raise InvalidConfigError(f"{where}: expected a table (weight, optional, default)")
    if not column:
        raise InvalidConfigError(f"{where}: a column scorer needs a column name")
    if "column" in v or "type" in v:
        raise InvalidConfigError(f"{where}: the table name gives the column; remove 'column' / 'type'")
    return _scorer(where, "column", dict(v, column=column), name=f"column:{column}")


def _scorer(where: str, type_name: str, v: Mapping, name: str = "") -> ScorerDim:
    # the built-in types, a column scorer ([scorers.column] column = "similarity") and every
    # name registered with register_scorer (model/plugins.py)
    known = [t for t in known_scorer_types() if t != "composite"]
    if type_name not in known:
        raise InvalidConfigError(
            f"scorers: unknown scorer type {where.rsplit('.', 1)[-1]!r}{suggestion(type_name, known)}; "
            f"expected one of: {', '.join(known)} (or [scorers.column.<column>] tables, or a table with a 'type')"
        )
    st = scorer_type(type_name)
    if st is not None and st.keys is not None:  # a registered scorer's options go to its factory
        _no_unknown(where, v, set(st.keys) | {"weight", "optional"})
    optional = v.get("optional", True)
    if not isinstance(optional, bool):
        raise InvalidConfigError(f"{where}.optional must be true or false, got {optional!r}")
    options: dict[str, Any] = {}
    for k, x in v.items():
        if k in ("weight", "optional"):
            continue
        if (type_name, k) in _MAP_OPTIONS:
            if _tables(x):
                x = _weight_table(f"{where}.{k}", _MAP_OPTIONS[type_name, k], x)
            if not isinstance(x, Mapping) or not x:
                raise InvalidConfigError(f"{where}.{k}: expected a table of per-{_MAP_OPTIONS[type_name, k]} values")
            options[k] = {key: dim(f"{where}.{k}.{key}", val) for key, val in x.items()}
        else:
            options[k] = dim(f"{where}.{k}", x)
    w = dim(f"{where}.weight", v.get("weight", [0.1, 1.0]))
    lows = {"fixed": [w.value], "choice": list(w.choices)}.get(w.kind, [w.low])
    if not all(_is_num(x) and x > 0 for x in lows):
        raise InvalidConfigError(
            f"{where}.weight: weights must be positive numbers (got {lows[0]!r}); "
            "'optional = true' lets the search leave a scorer out"
        )
    return ScorerDim(type_name, w, optional, options, name or type_name)


def _weight_table(where: str, name_key: str, entries: list) -> dict[str, Any]:
    """A policy file's ``[[weights]]`` / ``[[tag_weights]]`` list (``{kind = .., weight = ..}``
    tables) as the space's per-kind / per-tag table of fixed weights."""
    out: dict[str, Any] = {}
    for i, e in enumerate(entries):
        _no_unknown(f"{where}[{i}]", e, {name_key, "weight"})
        name = e.get(name_key)
        if not isinstance(name, str) or not name or "weight" not in e:
            raise InvalidConfigError(f"{where}[{i}] needs a {name_key!r} (a string) and a 'weight'")
        if name in out:
            raise InvalidConfigError(f"{where}[{i}]: {name_key} {name!r} is given twice")
        out[name] = e["weight"]
    return out


def _scorer_entry(s: ScorerDim, trial) -> dict[str, Any]:
    e: dict[str, Any] = {"type": s.type, "weight": s.weight.suggest(trial, f"scorer.{s.name}.weight")}
    for k, o in s.options.items():
        if isinstance(o, dict):
            key = _MAP_OPTIONS[s.type, k]
            e[k] = [{key: name, "weight": dv.suggest(trial, f"scorer.{s.name}.{k}.{name}")} for name, dv in o.items()]
        else:
            e[k] = o.suggest(trial, f"scorer.{s.name}.{k}")
    return e


def _no_unknown(where: str, d: Mapping, known: set) -> None:
    unknown = sorted(set(d) - known)
    if unknown:
        raise InvalidConfigError(
            f"{where}: unknown key {unknown[0]!r}{suggestion(unknown[0], sorted(known))}; "
            f"known keys: {', '.join(sorted(known))}"
        )


class ParamsTrial:
    """A trial answering from a dict of already sampled values (``optuna`` trial.params)."""

    def __init__(self, params: dict[str, Any]):
        self.params = params

    def suggest_int(self, name, low, high, log=False):
        return self.params[name]

    def suggest_float(self, name, low, high, log=False):
        return self.params[name]

    def suggest_categorical(self, name, choices):
        return self.params[name]


class _LowTrial:
    """A stand-in trial answering the first choice / the low end of every range."""

    def suggest_int(self, name, low, high, log=False):
        return low

    def suggest_float(self, name, low, high, log=False):
        return low

    def suggest_categorical(self, name, choices):
        return choices[0]


def load_space(space) -> SearchSpace:
    """A SearchSpace from a SearchSpace, a dict or a TOML file path."""
    if isinstance(space, SearchSpace):
        return space
    if isinstance(space, Mapping):
        return SearchSpace.from_dict(space)
    if isinstance(space, (str, Path)):
        return SearchSpace.from_file(space)
    raise InvalidConfigError(f"space must be a SearchSpace, a dict or a TOML file path, got {type(space).__name__}")
