"""The best policies of a search (``tune``'s last step, after the trial loop of
``cupel_np.tuning.search``): the leaderboard ranked and its Pareto front, the best candidates
as distinct policies (``_policy_key``) and distinct behaviours (equal selections on the
search sets are one best policy with its equivalents), then the best policies and the presets
measured side by side on the held-out sets (bootstrap intervals, the paired comparison, the
swing against the baseline) and the warnings that make a rank an artefact (constant scorers,
knapsack settings that keep nothing).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cupel_np.analysis.outcomes import OutcomeMatrices, bootstrap_means, paired_stats
from cupel_np.analysis.signals import policy_scorer_names, policy_terms, scorer_name
from cupel_np.errors import InvalidConfigError
from cupel_np.model.budget import ContextBudget
from cupel_np.model.policy import Policy, json_default
from cupel_np.model.presets import PRESETS
from cupel_np.tuning.space import SearchSpace


def _policy_key(policy: dict, budget: ContextBudget) -> str:
    """What a sweep's outcome depends on: the policy without its name, and the budget."""
    d = {k: v for k, v in policy.items() if k != "name"}
    return json.dumps(d, sort_keys=True, default=json_default) + "|" + repr(budget)


def _num(x) -> float | None:
    x = float(x)
    return None if np.isnan(x) else x


def pareto_front(recall: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    """Indices of the points no other point beats on both (recall higher or equal, tokens
    lower or equal, one strictly), sorted by tokens then recall descending."""
    order = np.lexsort((-recall, tokens))
    front, best = [], -np.inf
    for i in order:  # one pass over points sorted by tokens (not per set)
        if recall[i] > best:
            front.append(i)
            best = recall[i]
    return np.array(front, dtype=np.int64)


def _ranked(board: pa.Table, objective: str) -> tuple[pa.Table, tuple[np.ndarray, np.ndarray]]:
    ok = board.filter(pc.equal(board["state"], "ok"))
    key = "search_token_recall" if objective == "recall_vs_tokens" else f"search_{objective}"
    score = np.nan_to_num(ok[key].to_numpy(zero_copy_only=False).astype(np.float64), nan=-1.0)
    trial = ok["trial"].to_numpy()
    order = np.lexsort((trial, -score))  # best first, ties by trial number
    rec = np.nan_to_num(ok["search_token_recall"].to_numpy(zero_copy_only=False).astype(np.float64), nan=-1.0)
    tok = np.nan_to_num(ok["search_tokens_used"].to_numpy(zero_copy_only=False).astype(np.float64), nan=np.inf)
    return ok, (order, pareto_front(rec, tok))


def _finish(board, budgets, ev, *, space, objective, top, presets, baseline, n_boot, seed) -> dict:
    """The best policies and the presets on the held-out sets (one sweep), the Pareto front.
    ``budgets``: each trial's budget (the one it was searched with: output reserve, reserved
    slots and safety margin included), which the best policies and the presets beside them
    are measured with. The best policies are distinct behaviours (``_behaviours``); the
    constant scorers, the knapsack flags and a paired comparison that compared nothing become
    ``warnings``."""
    ok, (order, front) = _ranked(board, objective)
    if ok.num_rows == 0:
        raise InvalidConfigError("no trial produced a valid policy: check the search space")
    if objective == "recall_vs_tokens":  # the best of a Pareto search: its front, highest recall first
        fr = front[
            np.argsort(
                -np.nan_to_num(ok["search_token_recall"].to_numpy(zero_copy_only=False)[front].astype(float)),
                kind="stable",
            )
        ]
        picks = list(fr[:top])
        equivalents: dict[int, list[str]] = {}
    else:
        picks, equivalents = _behaviours(ok, _distinct(ok, order, _n_candidates(top), budgets), top, budgets, ev)
    best = []
    for i in picks:
        r = ok.slice(int(i), 1).to_pylist()[0]
        pol = Policy.from_dict(json.loads(r["policy"]))
        best.append((r["label"], pol, budgets[r["trial"]]))
    names = list(PRESETS) if presets is None else presets
    distinct = {repr(b): b for _l, _p, b in best}  # budgets differ in max tokens (see SearchSpace.budget)
    used = sorted(distinct.values(), key=lambda b: (b.max_tokens, b.target_tokens))
    preset_vs = []
    for b in used:
        for n in names:
            label = n if len(used) == 1 else f"{n}@{b.max_tokens}"
            preset_vs.append((label, PRESETS[n] if n in PRESETS else _preset(n), b))
    variants = best + preset_vs
    held = ev.held
    search, heldm, m, swing_of = ev.final(variants)
    part = held if held.any() else ~held
    comparison = _comparison(variants, len(best), search, heldm, m, part, n_boot, seed)
    # the best preset on the SEARCH sets (choosing it on held-out sets would flatter it)
    key = "token_recall" if objective == "recall_vs_tokens" else objective
    p_scores = np.nan_to_num(search[key][len(best) :], nan=-1.0)
    bp = len(best) + int(np.argmax(p_scores))
    base = bp if baseline is None else _index_of(variants, baseline)
    x = _scored(m, key, part)
    paired = dict(a=variants[0][0], b=variants[bp][0], metric=key, part="heldout" if held.any() else "search")
    paired.update(paired_stats(x[0], x[bp], n_boot=n_boot, seed=seed))
    swing = swing_of(0, base, part)
    pareto = ok.take(pa.array(front, pa.int64()))
    equiv = {best[j][0]: equivalents.get(int(i), []) for j, i in enumerate(picks)}
    checks = _artefacts(ev, space, variants, len(best), search, objective)
    if not compared(paired):
        checks["warnings"].append(not_compared_line(paired, int(held.sum() if held.any() else (~held).sum())))
    comparison = comparison.append_column(
        "equivalents", pa.array([", ".join(equiv.get(v[0], [])) for v in variants], pa.string())
    )
    return dict(
        leaderboard=board,
        pareto=pareto,
        best=best,
        comparison=comparison,
        paired=paired,
        swing=swing,
        equivalents=equiv,
        **checks,
    )


def compared(paired: dict) -> bool:
    """Whether the paired comparison of the best policy and the best preset compared any set
    (none has a relevant item when every label of that part is false or null)."""
    d = paired.get("mean_diff")
    return bool(paired.get("sets")) and d is not None and math.isfinite(d)


def not_compared_line(paired: dict, sets: int) -> str:
    """The warning of a paired comparison that compared nothing: none of the ``sets`` sets of
    its part has a relevant item."""
    return (
        f"none of the {sets:,} {paired['part']} sets has a relevant item in the label column: the best policies "
        "are not compared with the presets there (label items in more sets"
        + (", or hold out more sets: --holdout, holdout=)" if paired["part"] == "heldout" else ")")
    )


def _n_candidates(top: int) -> int:
    """How many distinct policies, best first, are compared for equal selections."""
    return max(4 * top, top + 16)


def _behaviours(
    ok: pa.Table, cands: list[int], top: int, budgets: dict[int, ContextBudget], ev
) -> tuple[list[int], dict[int, list[str]]]:
    """The first ``top`` of ``cands`` (rows, best first) that select differently on the
    search sets, and for each the labels of the later candidates selecting exactly as it does
    (``ev.fingerprints``: one sweep of the candidates). A search often meets one behaviour
    under many policies (a single scaled column under different weights, a knapsack bucket that
    changes nothing): those are one best policy with its equivalents, not five."""
    if len(cands) <= 1:
        return cands, {}
    pols, trials, labels = ok["policy"].to_pylist(), ok["trial"].to_pylist(), ok["label"].to_pylist()
    variants = [(labels[i], Policy.from_dict(json.loads(pols[i])), budgets[trials[i]]) for i in cands]
    fps = ev.fingerprints(variants)
    first: dict[bytes, int] = {}
    picks: list[int] = []
    equivalents: dict[int, list[str]] = {}
    for i, fp in zip(cands, fps):
        if fp in first:
            equivalents[first[fp]].append(labels[i])
        elif len(picks) < top:
            first[fp] = i
            picks.append(i)
            equivalents[i] = []
    return picks, equivalents


#: a best policy is flagged when one of its scorers is constant on at least this share of the
#: search sets (two or more scoreable items)
CONSTANT_WARN_SHARE = 0.5


def _artefacts(ev, space: SearchSpace, variants, n_best: int, search: dict, objective: str) -> dict:
    """Constant scorers (of the space's scorers, the best policies' and the presets') on the
    search sets, and warnings: a best policy with a scorer constant on at least
    ``CONSTANT_WARN_SHARE`` of them (and whether it ranks them by input order: every scorer
    constant), knapsack settings that keep nothing, empty selections."""
    policies = [v[1] for v in variants] + space.fixed_policies()
    con = ev.constancy(policies)
    warnings: list[str] = []
    if con is None:
        return dict(
            constant_scorers={},
            constant_checked=0,
            warnings=ev.knapsack_lines([v[0] for v in variants]),
            token_counter=ev.token_counter,
        )
    part = ~ev.held if (~ev.held).any() else ev.held
    n = con.sets_checked(part)
    key = "token_recall" if objective == "recall_vs_tokens" else objective
    space_names = {scorer_name(sc) for p in space.fixed_policies() for sc, _w in policy_terms(p)}
    for name, cnt in con.sets_constant(part).items():
        if name in space_names and n and cnt >= CONSTANT_WARN_SHARE * n:
            warnings.append(
                f"{name} gave one value to every scoreable item on {cnt:,}/{n:,} search sets: it carries no "
                "signal there, and a policy of it alone keeps items by input order"
            )
    for i in range(n_best):
        label, pol = variants[i][0], variants[i][1]
        hit = {k: c for k, c in con.variant_constant(i, part).items() if n and c >= CONSTANT_WARN_SHARE * n}
        if not hit:
            continue
        all_c = int(con.all_constant[i][part].sum())
        what = ", ".join(f"{k} on {c:,}/{n:,}" for k, c in hit.items())
        tail = (
            f"; every scorer of it is constant on {all_c:,} of them, where it keeps items by input order"
            if all_c
            else ""
        )
        warnings.append(
            f"best #{i + 1} {label} ({policy_scorer_names(pol)}; search {key} {_fmt3(search[key][i])}): "
            f"constant scorer {what} search sets (one value for every item){tail}"
        )
    warnings += ev.knapsack_lines([v[0] for v in variants[:n_best]])
    return dict(
        constant_scorers=con.sets_constant(part), constant_checked=n, warnings=warnings, token_counter=ev.token_counter
    )


def _fmt3(x) -> str:
    x = float(x)
    return "n/a" if np.isnan(x) else f"{x:.3f}"


def _distinct(ok: pa.Table, order: np.ndarray, top: int, budgets: dict[int, ContextBudget]) -> list[int]:
    """The first ``top`` rows of ``order`` whose policy (name aside) and budget differ from
    every row picked before (``_policy_key``): a search meets a good policy many times, and
    five copies of one policy are not five best policies."""
    pols, trials = ok["policy"].to_pylist(), ok["trial"].to_pylist()
    picks: list[int] = []
    keys: set[str] = set()
    for i in order:
        key = _policy_key(json.loads(pols[i]), budgets[trials[i]])
        if key not in keys:
            keys.add(key)
            picks.append(int(i))
            if len(picks) == top:
                break
    return picks


def _preset(name):
    from cupel_np.model.presets import preset

    return preset(name)


def _index_of(variants, label) -> int:
    for i, v in enumerate(variants):
        if v[0] == label:
            return i
    raise InvalidConfigError(
        f"baseline {label!r} is neither a best policy nor a preset: {', '.join(v[0] for v in variants)}"
    )


def _scored(m: OutcomeMatrices, metric: str, part: np.ndarray) -> np.ndarray:
    """``[V, sets of part]`` of a recall metric, a failed (variant, set) counting 0 where the
    set has something to recall (as the search scores it); NaN where undefined."""
    den = {"token_recall": m.relevant_tokens, "item_recall": m.relevant_items, "gain_share": m.gain_total}[metric]
    x = np.where(m.failed & (den > 0)[None, :], 0.0, m.ratio(metric))
    return x[:, part]


def _comparison(variants, n_best, search, heldm, m, part, n_boot, seed) -> pa.Table:
    mean, lo, hi = bootstrap_means(_scored(m, "token_recall", part).T, n_boot=n_boot, seed=seed)
    rows = []
    for i, (label, _pol, b) in enumerate(variants):
        rows.append(
            {
                "label": label,
                "kind": "best" if i < n_best else "preset",
                "max_tokens": b.max_tokens,
                "search_token_recall": _num(search["token_recall"][i]),
                "search_tokens_used": _num(search["tokens_used"][i]),
                "heldout_token_recall": _num(mean[i]),
                "heldout_token_recall_lo": _num(lo[i]),
                "heldout_token_recall_hi": _num(hi[i]),
                "heldout_item_recall": _num(heldm["item_recall"][i]),
                "heldout_token_precision": _num(heldm["token_precision"][i]),
                "heldout_tokens_used": _num(heldm["tokens_used"][i]),
                "heldout_failed_sets": int(heldm["failed_sets"][i]),
            }
        )
    return pa.Table.from_pylist(rows)


def _swing(res, m, a: int, b: int, part: np.ndarray, variants) -> dict:
    """Contents of the part's sets that ``a`` and ``b`` decide differently, and how many of
    them are relevant and kept by each (content-keyed, like every outcome metric)."""
    st = res.status  # [G, V]
    in_part = part[res.group_set]
    ok = ~m.failed[a][res.group_set] & ~m.failed[b][res.group_set]
    differ = (st[:, a] != st[:, b]) & in_part & ok
    lab = m.group_relevant
    return {
        "a": variants[a][0],
        "b": variants[b][0],
        "swinging": int(differ.sum()),
        "relevant_swinging": int((differ & lab).sum()),
        "relevant_kept_by_a_only": int((differ & lab & st[:, a]).sum()),
        "relevant_kept_by_b_only": int((differ & lab & st[:, b]).sum()),
    }
