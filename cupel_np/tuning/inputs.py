"""What a search is given, checked before any work: the items and their labels (at least one
relevant item), the budget and the search space (one of the two gives a budget), the
objective, the sampler, the counts and the baseline, and the ``tune`` extra (Optuna).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pyarrow as pa

from cupel_np.analysis.outcomes import Labels, labels_from
from cupel_np.errors import InvalidConfigError, InvalidInputTypeError
from cupel_np.model.budget import ContextBudget
from cupel_np.model.fields import suggestion
from cupel_np.model.items import ItemTable
from cupel_np.model.presets import PRESETS
from cupel_np.tuning.space import SearchSpace, load_space

#: single-objective metrics (maximised), and the multi-objective "token recall vs tokens used"
OBJECTIVES = ("token_recall", "item_recall", "gain_share", "recall_vs_tokens")


def _prepare(items, label_column, set_column) -> tuple[ItemTable, Labels]:
    if isinstance(items, ItemTable):
        if isinstance(label_column, Labels):
            return items, label_column
        return items, labels_from(items, label_column)
    if isinstance(items, (str, Path)) or (isinstance(items, list) and items and isinstance(items[0], (str, Path))):
        from cupel_np.io import read_items_table

        items = read_items_table(items)
    if not isinstance(items, pa.Table):
        try:
            items = pa.table(items)
        except Exception as e:  # pyarrow raises several types here
            raise InvalidInputTypeError(f"cannot read items as an Arrow table: {e}") from None
    labels = label_column if isinstance(label_column, Labels) else labels_from(items, label_column)
    return ItemTable(items, set_column=set_column), labels


def check_some_relevant(labels: Labels) -> None:
    """A search needs at least one relevant item (a label > 0): with none, every recall is
    undefined and any "winner" would be arbitrary."""
    v = labels.values
    if not (v[~np.isnan(v)] > 0).any():
        what = "every label is null" if np.isnan(v).all() else "every label is false or 0"
        raise InvalidConfigError(
            f"no relevant items: {what} in label column {labels.column!r}, so there is nothing to tune for; "
            "label some items as relevant (true or a positive number)"
        )


def _as_budget(budget) -> ContextBudget | None:
    if budget is None or isinstance(budget, ContextBudget):
        return budget
    if isinstance(budget, int) and not isinstance(budget, bool):
        return ContextBudget(max_tokens=budget, target_tokens=budget)
    raise InvalidInputTypeError(f"budget must be a ContextBudget or an integer, got {type(budget).__name__}")


#: the optimizers ``tune`` can drive (Optuna samplers)
SAMPLERS = ("nsga2", "tpe")


def _items_metadata(items) -> dict | None:
    """The schema metadata of the items as handed in (an Arrow table or an items Parquet
    file: the first one of a list), where the token counter may be named."""
    if isinstance(items, pa.Table):
        return items.schema.metadata
    first = items[0] if isinstance(items, list) and items else items
    if isinstance(first, (str, Path)) and Path(first).is_file():
        import pyarrow.parquet as pq

        try:
            return pq.read_schema(first).metadata
        except (OSError, pa.ArrowInvalid):
            return None
    return None


def _space_and_budget(space, budget) -> tuple[SearchSpace, ContextBudget | None]:
    """The search space and the caller's budget, which (the CLI's ``--max-tokens``) wins over
    the space's ``[budget]``; one of the two must give a budget."""
    sp: SearchSpace = load_space(space)
    budget = _as_budget(budget)
    if budget is not None and sp.max_tokens is not None:
        sp = dataclasses.replace(sp, max_tokens=None)
    if sp.max_tokens is None and budget is None:
        raise InvalidConfigError("no budget: give tune() a budget or the space a [budget] table")
    return sp, budget


def _require_optuna() -> None:
    """The search needs the ``tune`` extra: say which, before any work (not a raw
    ``ModuleNotFoundError`` from the first place that imports it)."""
    try:
        import optuna  # noqa: F401
    except ImportError as e:
        raise InvalidConfigError(
            f'policy search needs Optuna ({e.name or "optuna"} is not installed): pip install "cupel-np[tune]"'
        ) from None


def _check_baseline(baseline: str | None, presets: list[str] | None, trials: int) -> None:
    """Refuse, before any work, a ``baseline`` that can be neither a preset (``name`` or
    ``name@MAX_TOKENS``) nor a trial's label (``trial-NNNN``)."""
    if baseline is None:
        return
    names = list(PRESETS) if presets is None else list(presets)
    if not isinstance(baseline, str):
        raise InvalidConfigError(f"baseline must be a preset name or a trial label, got {baseline!r}")
    m = re.fullmatch(r"trial-(\d{4,})", baseline)
    if m and int(m.group(1)) < max(trials, 1):
        return
    if baseline.split("@", 1)[0] in names:
        return
    raise InvalidConfigError(
        f"baseline {baseline!r} is neither a preset nor a trial label (trial-0000 ...)"
        f"{suggestion(baseline, names)}; presets: {', '.join(names)}"
    )


def _check_options(*, sampler: str, objective: str, **counts: int) -> None:
    _require_optuna()
    if sampler not in SAMPLERS:
        raise InvalidConfigError(f"unknown sampler {sampler!r}; samplers: {', '.join(SAMPLERS)}")
    if objective not in OBJECTIVES:
        raise InvalidConfigError(f"unknown objective {objective!r}; objectives: {', '.join(OBJECTIVES)}")
    for name, v in counts.items():
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise InvalidConfigError(f"{name} must be an integer >= 1, got {v!r}")
