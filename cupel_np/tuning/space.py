"""The search space of a policy search: which scorers may appear and with which weights and
options, slicers and their options, placers, deduplication, overflow strategy, budgets.

Written as a TOML file (``data/examples/tune_space.toml`` is a commented example) or the same
structure as a dict. A *range* is a two-number list ``[low, high]`` (integers if both are
integers, else floats) or a table ``{low = .., high = .., log = true}``; *choices* are any
other list or a table ``{choices = [..]}``; anything else is a fixed value::

    [budget]                      # optional when tune() is given a budget; one of: max_tokens = 8000 | [4000, 8000, 16000] (choices)
    max_tokens = 8000             #         | {low = 2000, high = 32000, log = true} (range)
    output_reserve = 0            # fixed (target_tokens = max_tokens - output_reserve)

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

``kind`` ``weights`` and ``tag`` ``tag_weights`` are tables of per-kind / per-tag values
(each a range, choices or fixed). Scorer types and options are the policy file's (see the
policy format); a sampled policy is checked like any other policy.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cupel_np._files import read_data_file
from cupel_np.errors import InvalidConfigError
from cupel_np.model.budget import ContextBudget
from cupel_np.model.fields import suggestion
from cupel_np.model.policy import Policy
from cupel_np.model.scorers import known_scorer_types
from cupel_np.model.slicers import SLICER_TYPES

__all__ = ["SearchSpace", "load_space"]

_TOP_KEYS = {"budget", "scorers", "slicers", "placer", "deduplication", "overflow_strategy"}
_BUDGET_KEYS = {"max_tokens", "output_reserve"}
#: per-key maps of a scorer: option name -> the key naming each entry
_MAP_OPTIONS = {("kind", "weights"): "kind", ("tag", "tag_weights"): "tag"}


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
    type: str
    weight: Dim
    optional: bool
    options: dict[str, Any] = field(default_factory=dict)  # name -> Dim, or {key: Dim} for maps


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
        sc = d.get("scorers")
        if not isinstance(sc, Mapping) or not any(isinstance(v, Mapping) for v in sc.values()):
            raise InvalidConfigError("search space: [scorers.<type>] tables are required (at least one scorer)")
        scorers = tuple(_scorer(name, v) for name, v in sc.items() if isinstance(v, Mapping))
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
        slicers = []
        for name, opts in sl.items():
            if name not in SLICER_TYPES:
                raise InvalidConfigError(
                    f"slicers: unknown slicer {name!r}; expected one of: {', '.join(SLICER_TYPES)}"
                )
            if not isinstance(opts, Mapping):
                raise InvalidConfigError(f"slicers.{name}: expected a table of options")
            slicers.append((name, {k: dim(f"slicers.{name}.{k}", v) for k, v in opts.items()}))
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
        )
        space._check_corners()
        return space

    @classmethod
    def from_file(cls, path) -> SearchSpace:
        """Read a TOML space file (errors name the file)."""
        p = Path(path)
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
        return ContextBudget(max_tokens=int(mt), target_tokens=int(mt) - self.output_reserve)

    def config(self, trial) -> dict[str, Any]:
        """The trial's policy as a policy dict (the policy file's structure)."""
        chosen = []
        for s in self.scorers:
            use = (not s.optional) or trial.suggest_categorical(f"scorer.{s.type}.use", [True, False])
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
                out[f"scorer.{sd.type}.use"] = od.CategoricalDistribution([True, False])
            add(f"scorer.{sd.type}.weight", sd.weight)
            for k, o in sd.options.items():
                for name, dv in o.items() if isinstance(o, dict) else [(None, o)]:
                    add(f"scorer.{sd.type}.{k}" + ("" if name is None else f".{name}"), dv)
        if len(self.slicers) > 1:
            out["slicer"] = od.CategoricalDistribution(list(range(len(self.slicers))))
        for name, opts in self.slicers:
            for k, dv in opts.items():
                add(f"slicer.{name}.{k}", dv)
        for name in ("placer", "deduplication", "overflow_strategy"):
            add(name, getattr(self, name))
        if self.max_tokens is not None:
            add("budget.max_tokens", self.max_tokens)
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


def _scorer(name: str, v: Mapping) -> ScorerDim:
    # the built-in types, a column scorer ([scorers.column] column = "similarity") and every
    # name registered with register_scorer (model/scorers.py)
    known = [t for t in known_scorer_types() if t != "composite"]
    if name not in known:
        raise InvalidConfigError(f"scorers: unknown scorer type {name!r}; expected one of: {', '.join(known)}")
    optional = v.get("optional", True)
    if not isinstance(optional, bool):
        raise InvalidConfigError(f"scorers.{name}.optional must be true or false, got {optional!r}")
    options: dict[str, Any] = {}
    for k, x in v.items():
        if k in ("weight", "optional"):
            continue
        if (name, k) in _MAP_OPTIONS:
            if not isinstance(x, Mapping) or not x:
                raise InvalidConfigError(f"scorers.{name}.{k}: expected a table of per-{_MAP_OPTIONS[name, k]} values")
            options[k] = {key: dim(f"scorers.{name}.{k}.{key}", val) for key, val in x.items()}
        else:
            options[k] = dim(f"scorers.{name}.{k}", x)
    w = dim(f"scorers.{name}.weight", v.get("weight", [0.1, 1.0]))
    lows = {"fixed": [w.value], "choice": list(w.choices)}.get(w.kind, [w.low])
    if not all(_is_num(x) and x > 0 for x in lows):
        raise InvalidConfigError(
            f"scorers.{name}.weight: weights must be positive numbers (got {lows[0]!r}); "
            "'optional = true' lets the search leave a scorer out"
        )
    return ScorerDim(name, w, optional, options)


def _scorer_entry(s: ScorerDim, trial) -> dict[str, Any]:
    e: dict[str, Any] = {"type": s.type, "weight": s.weight.suggest(trial, f"scorer.{s.type}.weight")}
    for k, o in s.options.items():
        if isinstance(o, dict):
            key = _MAP_OPTIONS[s.type, k]
            e[k] = [{key: name, "weight": dv.suggest(trial, f"scorer.{s.type}.{k}.{name}")} for name, dv in o.items()]
        else:
            e[k] = o.suggest(trial, f"scorer.{s.type}.{k}")
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
