"""Policy search: ask Optuna for a batch of candidate policies, run the whole batch as ONE
sweep (shared base scores, all cores), score every candidate on labelled outcomes, tell the
optimizer, repeat (DESIGN.md, decision 14).

Sets are split into a search part and a held-out part by a stable hash of the set key
(``blake2b`` of the key's text, so the split is the same in every process and on every
machine); the optimizer only ever sees search-part metrics. The best policies and every preset
are then measured on the held-out part side by side, with bootstrap intervals and a paired
comparison against the best preset (``tuning/best.py``). What a search is given is checked
before any work in ``tuning/inputs.py``.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from cupel_np._jit import as_input, jit
from cupel_np.analysis.outcomes import Labels, OutcomeMatrices, outcome_matrices
from cupel_np.analysis.sensitivity import sweep
from cupel_np.analysis.signals import Constancy, knapsack_checks, policy_scorer_names, table_constancy, token_counter_of
from cupel_np.errors import InvalidConfigError
from cupel_np.model.budget import ContextBudget
from cupel_np.model.items import ItemTable
from cupel_np.model.policy import Policy, json_default
from cupel_np.tuning.best import CONSTANT_WARN_SHARE as CONSTANT_WARN_SHARE
from cupel_np.tuning.best import _finish, _num, _policy_key, _swing
from cupel_np.tuning.best import pareto_front as pareto_front
from cupel_np.tuning.inputs import OBJECTIVES as OBJECTIVES
from cupel_np.tuning.inputs import SAMPLERS as SAMPLERS
from cupel_np.tuning.inputs import (
    _check_baseline,
    _check_options,
    _items_metadata,
    _prepare,
    _space_and_budget,
    check_some_relevant,
)
from cupel_np.tuning.space import ParamsTrial, SearchSpace
from cupel_np.tuning.split import heldout_sets

__all__ = ["OBJECTIVES", "SAMPLERS", "TuneResult", "heldout_sets", "tune"]

_PART_METRICS = ("token_recall", "item_recall", "gain_share", "token_precision", "tokens_used")


@dataclass
class TuneResult:
    """What a search found. ``leaderboard``: one row per trial (search and held-out metrics,
    the policy as JSON); ``pareto``: the trials no other trial beats on both search token
    recall and tokens used; ``best``: the top policies ``(label, Policy, ContextBudget)``;
    ``comparison``: the best policies and every preset on the held-out sets (means with
    bootstrap intervals); ``paired``: best vs the best preset, set by set on the held-out sets;
    ``swing``: how the best policy's selections differ from ``baseline``'s on those sets;
    ``policies_swept``: the distinct policies the search swept (a trial repeating an earlier
    trial's policy and budget takes its numbers). ``equivalents``: per best policy, the other
    candidates that made the very same selections on the search sets (one behaviour, listed
    once); ``constant_scorers``: scorer name -> search sets on which it gave one value to
    every scoreable item (of ``constant_checked`` sets with two or more); ``warnings``: what
    makes a top policy's rank an artefact (a constant scorer, a knapsack that keeps nothing),
    and that ``paired`` compared nothing when no set of its part has a relevant item (the
    lines the command prints as ``warning:`` and ``summary.json`` lists)."""

    objective: str
    seed: int
    trials: int
    search_sets: int
    heldout_sets: int
    leaderboard: pa.Table
    pareto: pa.Table
    best: list[tuple[str, Policy, ContextBudget]]
    comparison: pa.Table
    paired: dict[str, Any]
    swing: dict[str, Any]
    elapsed: float
    policies_swept: int = 0
    equivalents: dict[str, list[str]] = field(default_factory=dict)
    constant_scorers: dict[str, int] = field(default_factory=dict)
    constant_checked: int = 0
    warnings: list[str] = field(default_factory=list)
    token_counter: str = ""
    study: Any = field(repr=False, default=None)

    def __repr__(self) -> str:
        top = self.best[0][0] if self.best else None
        return (
            f"TuneResult(objective={self.objective!r}, trials={self.trials}, policies_swept={self.policies_swept}, "
            f"best={top!r}, paired={self.paired})"
        )


# --------------------------------------------------------------------------- metrics
def part_metrics(m: OutcomeMatrices, part: np.ndarray) -> dict[str, np.ndarray]:
    """Per variant, means over the sets of ``part`` (``[S]`` bool) that have a label: recalls
    count a failed (variant, set) as 0 where the set has something to recall (it delivered
    nothing), precision and tokens used leave a failed cell out, and a ratio whose
    denominator is 0 is left out; ``failed_sets`` counts the failed cells. One pass over the
    ``[V, S]`` counts (``_part_sums``)."""
    n_var = m.failed.shape[0]
    sums = np.zeros((len(_PART_METRICS), n_var))
    counts = np.zeros((len(_PART_METRICS), n_var), dtype=np.int64)
    failed = np.zeros(n_var, dtype=np.int64)
    _part_sums(
        as_input(m.failed, np.bool_),
        as_input(part & m.labelled, np.bool_),
        as_input(m.relevant_tokens, np.int64),
        as_input(m.relevant_items, np.int64),
        as_input(m.gain_total, np.float64),
        as_input(m.relevant_tokens_included, np.int64),
        as_input(m.relevant_included, np.int64),
        as_input(m.gain_included, np.float64),
        as_input(m.included_tokens, np.int64),
        sums,
        counts,
        failed,
    )
    means = np.divide(sums, counts, out=np.full(sums.shape, np.nan), where=counts > 0)
    out = {name: means[k] for k, name in enumerate(_PART_METRICS)}
    out["failed_sets"] = failed
    return out


@jit
def _part_sums(
    failed, scope, rel_tok, rel_items, gain_tot, rel_tok_inc, rel_inc, gain_inc, inc_tok, sums, counts, n_failed
):
    """Per variant, the sums and counts of ``_PART_METRICS`` (in that order) over the sets of
    ``scope``, each sum taken set after set (a variant's mean does not depend on the other
    variants), and its failed cells. The ratios divide float64 values, as ``OutcomeMatrices.ratio``."""
    for v in range(failed.shape[0]):
        for s in range(failed.shape[1]):
            if not scope[s]:
                continue
            f = failed[v, s]
            if f:
                n_failed[v] += 1
            if rel_tok[s] > 0:  # token recall
                sums[0, v] += 0.0 if f else np.float64(rel_tok_inc[v, s]) / np.float64(rel_tok[s])
                counts[0, v] += 1
            if rel_items[s] > 0:  # item recall
                sums[1, v] += 0.0 if f else np.float64(rel_inc[v, s]) / np.float64(rel_items[s])
                counts[1, v] += 1
            if gain_tot[s] > 0:  # graded gain share
                sums[2, v] += 0.0 if f else gain_inc[v, s] / gain_tot[s]
                counts[2, v] += 1
            if not f:
                if inc_tok[v, s] > 0:  # precision by tokens
                    sums[3, v] += np.float64(rel_tok_inc[v, s]) / np.float64(inc_tok[v, s])
                    counts[3, v] += 1
                sums[4, v] += np.float64(inc_tok[v, s])  # tokens used
                counts[4, v] += 1


def _evaluate(table, labels, variants, threads, heldout):
    """One sweep of ``variants``; (search metrics, held-out metrics, OutcomeMatrices)."""
    res = sweep(table, None, variants, on_error="collect", threads=threads)
    m = outcome_matrices(res, labels, threads=threads)
    return part_metrics(m, ~heldout), part_metrics(m, heldout), m, res


def _evaluate_bounded(table, labels, variants, threads, heldout, max_cells: int):
    """``_evaluate`` of a batch, as several sweeps of whole variants when its ``[V, N]``
    matrices would hold more than ``max_cells`` cells (memory bound; same metrics: every
    variant is computed on its own). Returns (search metrics, held-out metrics)."""
    step = max(1, max_cells // max(table.n, 1))
    parts = [
        _evaluate(table, labels, variants[i : i + step], threads, heldout)[:2] for i in range(0, len(variants), step)
    ]
    if len(parts) == 1:
        return parts[0]
    return tuple({k: np.concatenate([p[j][k] for p in parts]) for k in parts[0][j]} for j in (0, 1))


class _InProcess:
    """The search's sweeps in this process over the whole table."""

    def __init__(self, table: ItemTable, labels: Labels, held: np.ndarray, threads: int | None):
        self.table, self.labels, self.held, self.threads = table, labels, held, threads
        self.n_sets = table.n_sets
        self.token_counter = token_counter_of(None)

    def batch(self, variants, max_cells: int):
        """(search metrics, held-out metrics) of a batch of trials."""
        return _evaluate_bounded(self.table, self.labels, variants, self.threads, self.held, max_cells)

    def final(self, variants):
        """(search metrics, held-out metrics, OutcomeMatrices, swing(a, b, part) -> dict)."""
        search, heldm, m, res = _evaluate(self.table, self.labels, variants, self.threads, self.held)
        self.last = res
        return search, heldm, m, lambda a, b, part: _swing(res, m, a, b, part, variants)

    def fingerprints(self, variants) -> list[bytes]:
        """Per variant, a digest of what it selects on the search sets (content statuses and
        failed sets): equal digests, equal selections."""
        res = sweep(self.table, None, variants, on_error="collect", threads=self.threads)
        search = ~self.held
        in_search = search[res.group_set]
        return [
            hashlib.blake2b(
                np.packbits(res.status[in_search, v]).tobytes() + np.packbits(res.failed[v, search]).tobytes()
            ).digest()
            for v in range(len(variants))
        ]

    def constancy(self, policies) -> Constancy | None:
        """The constant scorers of ``policies`` on this table."""
        return table_constancy(self.table, policies)

    def knapsack_lines(self, labels: list[str]) -> list[str]:
        """Knapsack and empty-selection flags of the last ``final`` sweep, on the search sets."""
        return knapsack_checks(self.last).lines(labels, ~self.held)

    def close(self) -> None:
        """Nothing to release."""


class _OnDask:
    """The search's sweeps as Dask tasks over partitions of whole sets (``tuning.distributed``):
    the same per-(variant, set) matrices, so the same metrics."""

    def __init__(self, ev):
        self.ev, self.held, self.n_sets = ev, ev.held, ev.n_sets
        self.token_counter = token_counter_of(None)

    def batch(self, variants, max_cells: int):
        """(search metrics, held-out metrics) of a batch of trials."""
        m, _sw = self.ev.matrices(variants, max_cells)
        return part_metrics(m, ~self.held), part_metrics(m, self.held)

    def final(self, variants):
        """(search metrics, held-out metrics, OutcomeMatrices, swing(0, b, part) -> dict)."""
        m, sw = self.ev.matrices(variants, swing=True)

        def swing(a: int, b: int, part: np.ndarray) -> dict:
            assert a == 0  # the tasks count swing against variant 0 (the best policy)
            out = {"a": variants[a][0], "b": variants[b][0]}
            out.update({k: int(v[b][part].sum()) for k, v in sw.items()})
            return out

        return part_metrics(m, ~self.held), part_metrics(m, self.held), m, swing

    def fingerprints(self, variants) -> list[bytes]:
        """Per variant, a digest of its per-set outcome counts on the search sets (the tasks
        return no item statuses: equal counts on every set stand for equal selections)."""
        m, _sw = self.ev.matrices(variants)
        search = ~self.held
        return [
            hashlib.blake2b(
                b"".join(
                    np.ascontiguousarray(a[v, search]).tobytes()
                    for a in (m.failed, m.included_tokens, m.relevant_tokens_included, m.relevant_included)
                )
            ).digest()
            for v in range(len(variants))
        ]

    def constancy(self, policies) -> Constancy | None:
        """Not computed on Dask (the items stay on the workers)."""
        return None

    def knapsack_lines(self, labels: list[str]) -> list[str]:
        """Not computed on Dask."""
        return []

    def close(self) -> None:
        """Release the partitions loaded on the cluster."""
        self.ev.close()


# --------------------------------------------------------------------------- search
def _new_study(objective: str, seed: int, sampler: str = "nsga2", batch_size: int = 64, space: dict | None = None):
    """An Optuna study. ``nsga2``: NSGA-II with a population of one batch (every batch is a
    generation; cheap to ask, so a batch costs about what its sweep costs); ``tpe``: the
    Tree-structured Parzen Estimator (often better with few trials, but every ask re-reads
    the whole history: about 20 ms per trial after 500 trials). ``space``: the fixed
    distributions every trial is asked with (``SearchSpace.distributions()``), which spares
    NSGA-II from inferring them from the history at every ask (same samples)."""
    try:
        import optuna
    except ImportError:
        raise InvalidConfigError("policy search needs Optuna: pip install 'cupel-np[tune]'") from None

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    smp: optuna.samplers.BaseSampler
    if sampler == "tpe":
        smp = optuna.samplers.TPESampler(seed=seed)
    else:
        smp = _nsga2(optuna, space)(seed=seed, population_size=max(2, batch_size))
    if objective == "recall_vs_tokens":
        return optuna.create_study(directions=["maximize", "minimize"], sampler=smp)
    return optuna.create_study(direction="maximize", sampler=smp)


def _nsga2(optuna, space: dict | None):
    """NSGAIISampler, told the search space when it is known. Optuna's own sampler infers it
    at every ask as the intersection of the distributions of all completed trials (a copy of
    it per ask); every trial here is asked with the same fixed distributions, so that
    intersection is ``space`` itself (ordered by name as Optuna orders it) once one trial has
    completed; before that NSGA-II samples the first generation independently either way."""
    if not space:
        return optuna.samplers.NSGAIISampler
    known = {k: space[k] for k in sorted(space) if not space[k].single()}

    class _KnownSpaceNSGAII(optuna.samplers.NSGAIISampler):
        def infer_relative_search_space(self, study, trial):  # noqa: ARG002 (Optuna's signature)
            return dict(known)

    return _KnownSpaceNSGAII


def _run_trials(
    study, space, budget, ev, *, objective, trials, batch_size, max_cells, progress=None
) -> tuple[list[dict[str, Any]], int, dict[int, ContextBudget]]:
    """Ask / evaluate / tell in batches: (one leaderboard row per trial, the number of distinct
    policies swept, each valid trial's budget: the leaderboard keeps only its max and target
    tokens). ``progress(done, total, best)`` is called after each batch (``best``:
    the best search value so far).

    A trial whose policy and budget equal an earlier trial's (NSGA-II children often repeat a
    parent, or differ only in a value their policy does not use: the weight of a scorer left
    out, the bucket size of a greedy slicer) is not swept again: it gets the metrics of the
    first, which are the same numbers (every variant of a sweep is computed on its own, see
    ``part_metrics``). Each batch sweeps only the policies the search has not met yet."""
    import optuna

    rows: list[dict[str, Any]] = []
    dists = space.distributions()  # every value sampled up front: one relative sample per trial
    seen: dict[str, dict[str, Any]] = {}  # policy key -> its metric columns of the leaderboard
    budgets: dict[int, ContextBudget] = {}
    done = 0
    while done < trials:
        batch = [study.ask(fixed_distributions=dists) for _ in range(min(batch_size, trials - done))]
        done += len(batch)
        ok, variants, keys, dicts = [], [], [], []
        for t in batch:
            try:
                pt = ParamsTrial(t.params)
                pol = Policy.from_dict(dict(space.config(pt), name=f"trial-{t.number:04d}"))
                b = space.budget(pt) or budget
            except InvalidConfigError as e:
                study.tell(t, state=optuna.trial.TrialState.FAIL)
                rows.append({"trial": t.number, "label": f"trial-{t.number:04d}", "state": f"invalid: {e}"})
                continue
            ok.append(t)
            budgets[t.number] = b
            variants.append((pol.name, pol, b))
            dicts.append(pol.to_dict())
            keys.append(_policy_key(dicts[-1], b))
        new = {k: i for i, k in reversed(list(enumerate(keys))) if k not in seen}  # key -> first index
        if new:
            firsts = sorted(new.values())
            search, held = ev.batch([variants[i] for i in firsts], max_cells)
            for j, i in enumerate(firsts):
                seen[keys[i]] = _metric_columns(search, held, j)
        for i, t in enumerate(ok):
            mets = seen[keys[i]]
            rec = mets["search_token_recall" if objective == "recall_vs_tokens" else f"search_{objective}"] or 0.0
            if objective == "recall_vs_tokens":  # an undefined mean (None: every set failed) is told as 0
                study.tell(t, [rec, mets["search_tokens_used"] or 0.0])
            else:
                study.tell(t, rec)
            label, pol, b = variants[i]
            row = {"trial": t.number, "label": label, "state": "ok", "max_tokens": b.max_tokens}
            row["target_tokens"] = b.target_tokens
            row["scorers"] = policy_scorer_names(pol)
            row.update(mets)
            row["policy"] = json.dumps(dicts[i], sort_keys=True, default=json_default)  # a decay reference_time
            rows.append(row)
        if progress is not None:
            key = "search_token_recall" if objective == "recall_vs_tokens" else f"search_{objective}"
            progress(done, trials, max((r[key] for r in rows if r.get(key) is not None), default=float("nan")))
    rows.sort(key=lambda r: r["trial"])
    return rows, len(seen), budgets


def _metric_columns(search: dict, held: dict, i: int) -> dict[str, Any]:
    """Variant ``i``'s leaderboard metric columns (search and held-out parts)."""
    out: dict[str, Any] = {}
    for part, mets in (("search", search), ("heldout", held)):
        for k in _PART_METRICS:
            out[f"{part}_{k}"] = _num(mets[k][i])
        out[f"{part}_failed_sets"] = int(mets["failed_sets"][i])
    return out


def _progress_line(progress: bool | None, objective: str):
    """A callback writing ``trials 128/512  best search token_recall 0.412`` to stderr after
    each batch (by default only when stderr is a terminal), or None."""
    if progress is None:
        progress = bool(getattr(sys.stderr, "isatty", lambda: False)())
    if not progress:
        return None
    name = "token_recall" if objective == "recall_vs_tokens" else objective

    def line(done: int, total: int, best: float) -> None:
        sys.stderr.write(f"\rtrials {done:,}/{total:,}  best search {name} {best:.3f}")
        if done >= total:
            sys.stderr.write("\n")
        sys.stderr.flush()

    return line


_LB_SCHEMA = pa.schema(
    [("trial", pa.int64()), ("label", pa.string()), ("state", pa.string()), ("max_tokens", pa.int64())]
    + [("target_tokens", pa.int64()), ("scorers", pa.string())]
    + [(f"{p}_{k}", pa.float64()) for p in ("search", "heldout") for k in _PART_METRICS]
    + [("search_failed_sets", pa.int64()), ("heldout_failed_sets", pa.int64()), ("policy", pa.string())]
)


# --------------------------------------------------------------------------- entry point
def tune(
    items: Any,
    space: SearchSpace | Mapping[str, Any] | str | os.PathLike[str],
    budget: ContextBudget | int | None = None,
    *,
    label_column: str | Labels,
    objective: str = "token_recall",
    trials: int = 256,
    seed: int = 0,
    holdout: float = 0.2,
    batch_size: int = 64,
    set_column: str | None = None,
    top: int = 5,
    presets: list[str] | None = None,
    baseline: str | None = None,
    n_boot: int = 1000,
    sampler: str = "nsga2",
    max_cells: int = 1 << 28,
    threads: int | None = None,
    client: Any = None,
    npartitions: int | None = None,
    progress: bool | None = None,
) -> TuneResult:
    """Search policies that keep what the labels say mattered.

    ``items``: an ItemTable, an Arrow table / pandas / polars frame or dict of columns, or an
    items Parquet path (with ``set_column``); ``label_column``: the relevance column (boolean
    or non-negative numbers) or a ``Labels``. ``space``: a SearchSpace, its dict or a TOML file
    (see ``cupel_np.tuning.space``); ``budget`` (a ContextBudget or max tokens), when given,
    replaces the space's ``[budget]`` (as ``--max-tokens`` overrides the file in the CLI). ``objective``: maximise the mean per-set ``token_recall`` (or
    ``item_recall`` / ``gain_share``) on the search sets, or ``recall_vs_tokens`` for a Pareto
    front of token recall against tokens used. Trials are asked ``batch_size`` at a time and
    each batch runs as one sweep. ``holdout``: the share of sets kept out of the search (by a
    stable hash of the set key). ``top`` best policies and ``presets`` (default: all) are
    compared on the held-out sets; ``baseline`` (default: the preset best on the search sets)
    is what the best policy's swing is measured against. ``sampler``: ``"nsga2"`` (NSGA-II, one
    generation per batch; cheap per trial) or ``"tpe"`` (see ``_new_study``). ``max_cells``: a
    batch whose ``[variants, items]`` result matrices would hold more cells runs as several
    sweeps of whole variants (about 3 bytes a cell at peak), so memory stays bounded whatever
    the batch size. ``client``: a ``distributed.Client``: with an items Parquet path or a dask
    DataFrame (and ``set_column``), every batch runs as Dask tasks over partitions of whole
    sets (``npartitions`` of them; default one per file / input partition), each returning only
    per-(variant, set) outcome counts; the results equal the in-process search's. Deterministic
    for a given seed and thread count."""
    t0 = time.perf_counter()
    _check_options(
        sampler=sampler, objective=objective, trials=trials, batch_size=batch_size, top=top, max_cells=max_cells
    )
    _check_baseline(baseline, presets, trials)
    sp, budget = _space_and_budget(space, budget)
    ev = _evaluator(items, label_column, set_column, holdout, threads, client, npartitions)
    try:
        held = ev.held
        if holdout > 0 and (held.all() or not held.any()):
            raise InvalidConfigError(
                f"holdout={holdout} leaves {int(held.sum())} of {ev.n_sets} sets held out: the split needs sets on "
                "both sides (use a set column with more sets, or holdout=0)"
            )
        study = _new_study(objective, seed, sampler, batch_size, sp.distributions())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", category=_optuna_warning())
            rows, swept, budgets = _run_trials(
                study,
                sp,
                budget,
                ev,
                objective=objective,
                trials=trials,
                batch_size=batch_size,
                max_cells=max_cells,
                progress=_progress_line(progress, objective),
            )
        board = pa.Table.from_pylist(rows, schema=_LB_SCHEMA)
        final = _finish(
            board,
            budgets,
            ev,
            space=sp,
            objective=objective,
            top=top,
            presets=presets,
            baseline=baseline,
            n_boot=n_boot,
            seed=seed,
        )
    finally:
        ev.close()
    return TuneResult(
        objective=objective,
        seed=seed,
        trials=trials,
        search_sets=int((~held).sum()),
        heldout_sets=int(held.sum()),
        elapsed=time.perf_counter() - t0,
        policies_swept=swept,
        study=study,
        **final,
    )


def _evaluator(items, label_column, set_column, holdout, threads, client, npartitions):
    """Where the sweeps run: on Dask with ``client`` (a path or dask DataFrame of items),
    else in this process over the whole table."""
    if client is not None:
        from cupel_np.tuning.distributed import DaskEvaluator

        return _OnDask(
            DaskEvaluator(
                items,
                label_column=label_column,
                set_column=set_column,
                holdout=holdout,
                client=client,
                npartitions=npartitions,
            )
        )
    table, labels = _prepare(items, label_column, set_column)
    if len(labels) != table.n:
        raise InvalidConfigError(f"label column {labels.column!r} has {len(labels)} values for {table.n} items")
    check_some_relevant(labels)
    ev = _InProcess(table, labels, heldout_sets(table.set_keys, holdout), threads)
    ev.token_counter = token_counter_of(_items_metadata(items))
    return ev


def _optuna_warning():
    import optuna

    return optuna.exceptions.ExperimentalWarning
