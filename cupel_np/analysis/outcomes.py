"""Outcome metrics: which policy keeps what mattered.

Items may carry a relevance label: a boolean column (``relevant``) or a graded one (a
non-negative number; 0 = not relevant). A null label means "not labelled": a set with no
labelled item is left out of every outcome metric (and counted); inside a labelled set an
unlabelled item counts as not relevant.

Metrics are content-keyed like the sensitivity statuses: a content (exact string, per set) is
included by a variant when any copy of it is, its label is the largest label of its copies, and
its tokens are its first row's (a negative token count counts as 0). Per (variant, set):

* ``relevant_items`` / ``relevant_included``: relevant contents, and how many the variant keeps;
* ``item_recall`` = relevant_included / relevant_items;
* ``relevant_tokens`` / ``relevant_tokens_included`` and ``token_recall`` (their ratio);
* ``gain_share``: the graded gain kept, sum of the kept labels / sum of all labels (for a
  boolean label it equals item_recall);
* ``included_tokens`` and ``token_precision`` = relevant_tokens_included / included_tokens;
* ``swing_relevant``: relevant contents among the set's swinging contents, and
  ``swing_relevant_included``: how many of those the variant keeps.

A ratio with a zero denominator is null (no relevant item, nothing included), as is every
metric of a (variant, set) that failed. Everything is computed on the sweep's matrices: one
kernel pass over the ``[V, G]`` status matrix, never a Python loop per set (DESIGN.md, decision 13).

Corpus aggregates (``outcome_summary``) are means over sets with a percentile bootstrap
interval (sets resampled with replacement, seeded); ``paired_comparisons`` compares variants
set by set (the mean difference with its bootstrap interval, and wins / ties / losses).
``budget_outcomes`` turns ``budget_curves`` output into recall against budget and the smallest
ladder budget at which each variant keeps 90 / 95 / 99 % of the relevant tokens.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from cupel_np._jit import as_input, jit
from cupel_np.engine.parallel import resolve_threads, run_tasks
from cupel_np.engine.sweep_run import segment_sums
from cupel_np.errors import InvalidConfigError, InvalidInputTypeError
from cupel_np.model.fields import suggestion
from cupel_np.model.items import ItemTable

__all__ = [
    "Labels",
    "OutcomeMatrices",
    "METRICS",
    "check_labels",
    "labels_from",
    "outcome_matrices",
    "outcomes_table",
    "outcome_summary",
    "outcome_summary_of_table",
    "paired_comparisons",
    "bootstrap_means",
    "budget_outcomes",
]

#: the ratio metrics that corpus aggregates and comparisons are about
METRICS = ("token_recall", "item_recall", "gain_share", "token_precision")


# --------------------------------------------------------------------------- labels
@dataclass(frozen=True)
class Labels:
    """A validated label column: ``values`` in input row order (float64, NaN = unlabelled),
    ``graded`` False for a boolean column."""

    column: str
    values: np.ndarray
    graded: bool

    def __len__(self) -> int:
        return int(self.values.shape[0])


def _show(v) -> str:
    r = repr(v)
    return r if len(r) <= 60 else r[:57] + "..."


def check_labels(col, column: str, *, locate: Callable[[int], tuple[str | None, int]] | None = None) -> Labels:
    """Validate a label column (an Arrow array, a NumPy array or a list): boolean, or numbers
    that are finite and non-negative; null = unlabelled. Bad input raises InvalidConfigError
    naming the column, the first bad row and its value. ``locate(r)``: (file or None, row) of
    position ``r``, for a column that is a chunk or a reordering of the input."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    if not isinstance(col, pa.Array):
        try:
            col = pa.array(col, from_pandas=True)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
            raise InvalidConfigError(f"label column {column!r}: cannot read as booleans or numbers ({e})") from None
    if pa.types.is_dictionary(col.type):
        col = col.dictionary_decode()
    t = col.type
    if pa.types.is_null(t):
        return Labels(column, np.full(len(col), np.nan), False)
    if pa.types.is_boolean(t):
        vals = col.cast(pa.float64()).fill_null(np.nan).to_numpy(zero_copy_only=False).astype(np.float64)
        return Labels(column, vals, False)
    if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)):
        raise InvalidConfigError(
            f"label column {column!r}: labels must be boolean or non-negative numbers, got type {t}"
        )
    vals = col.cast(pa.float64()).fill_null(np.nan).to_numpy(zero_copy_only=False).astype(np.float64, copy=True)
    valid = col.is_valid().to_numpy(zero_copy_only=False)
    bad_nan = valid & ~np.isfinite(vals)
    bad_neg = valid & np.isfinite(vals) & (vals < 0)
    for mask, what in ((bad_nan, "not a finite number"), (bad_neg, "negative label")):
        idx = np.flatnonzero(mask)
        if idx.size:
            r = int(idx[0])
            more = f" (and {idx.size - 1} more rows)" if idx.size > 1 else ""
            file, row = (None, r) if locate is None else locate(r)
            raise InvalidConfigError(
                f"{'' if file is None else f'{file}: '}column {column!r}, row {row}: {what} "
                f"(value {_show(col[r].as_py())}){more}; "
                "labels are booleans or non-negative numbers, null for unlabelled"
            )
    vals[~valid] = np.nan
    return Labels(column, vals, True)


def labels_from(items, label_column: str) -> Labels:
    """Read and validate ``label_column`` from the items as handed in: an Arrow table, a
    pandas / polars frame, a dict of columns, a list of dicts, or an ItemTable whose table
    kept the column (values come back in input row order)."""
    if not isinstance(label_column, str) or not label_column:
        raise InvalidInputTypeError(f"label_column must be a column name, got {label_column!r}")
    if isinstance(items, ItemTable):
        names = items.table.column_names
        if label_column in names:
            column = items.table.column(label_column)
        elif label_column in items.extra_columns:  # kept beside the item fields, in table order
            column = items.extra_column(label_column)
        else:
            known = [*names, *items.extra_columns]
            raise InvalidConfigError(
                f"label column {label_column!r} is not in this ItemTable{suggestion(label_column, known)} "
                f"(columns: {', '.join(known)})"
            )
        rows = items.input_row  # errors name the input row, not the grouped one
        stored = check_labels(column, label_column, locate=lambda r: (None, int(rows[r])))
        vals = np.empty_like(stored.values)
        vals[items.input_row] = stored.values
        return Labels(label_column, vals, stored.graded)
    if isinstance(items, Sequence) and not isinstance(items, (str, bytes)):
        if items and not all(isinstance(r, Mapping) for r in items):
            raise InvalidInputTypeError("labels from a list need dict rows (ContextItems carry no label)")
        return check_labels([r.get(label_column) for r in items], label_column)
    if not isinstance(items, pa.Table):
        try:
            items = pa.table(items)
        except Exception as e:  # pyarrow raises several types here
            raise InvalidInputTypeError(f"cannot read items as an Arrow table: {e}") from None
    if label_column not in items.column_names:
        raise InvalidConfigError(
            f"label column {label_column!r} not found{suggestion(label_column, items.column_names)} "
            f"(columns: {', '.join(items.column_names)})"
        )
    return check_labels(items.column(label_column), label_column)


def _as_labels(result, labels) -> Labels:
    n = result.table.n
    if isinstance(labels, str):
        labels = labels_from(result.table, labels)
    elif not isinstance(labels, Labels):
        labels = check_labels(labels, "labels")
    if len(labels) != n:
        raise InvalidConfigError(f"label column {labels.column!r} has {len(labels)} values for {n} items")
    return labels


# --------------------------------------------------------------------------- matrices
@dataclass
class OutcomeMatrices:
    """Per-set totals (``[S]``) and per (variant, set) counts (``[V, S]``); ``failed`` marks
    the (variant, set) cells that failed, ``labelled`` the sets with at least one label."""

    labelled: np.ndarray
    relevant_items: np.ndarray
    relevant_tokens: np.ndarray
    gain_total: np.ndarray
    swing_relevant: np.ndarray
    failed: np.ndarray
    relevant_included: np.ndarray
    relevant_tokens_included: np.ndarray
    gain_included: np.ndarray
    included_tokens: np.ndarray
    swing_relevant_included: np.ndarray
    group_relevant: np.ndarray  # [G]: which content groups (SweepResult.status rows) are relevant

    def ratio(self, metric: str) -> np.ndarray:
        """``[V, S]`` float64 of one of METRICS; NaN where undefined, failed or unlabelled."""
        num, den = {
            "token_recall": (self.relevant_tokens_included, self.relevant_tokens[None, :]),
            "item_recall": (self.relevant_included, self.relevant_items[None, :]),
            "gain_share": (self.gain_included, self.gain_total[None, :]),
            "token_precision": (self.relevant_tokens_included, self.included_tokens),
        }[metric]
        num = np.asarray(num, dtype=np.float64)
        den = np.broadcast_to(np.asarray(den, dtype=np.float64), num.shape)
        out = np.full(num.shape, np.nan)
        np.divide(num, den, out=out, where=den > 0)
        out[self.failed | ~self.labelled[None, :]] = np.nan
        return out


@jit
def _outcome_kernel(
    status, goff, g_rel, g_tok, g_label, sw_rel, graded, rel_inc, rel_tok_inc, inc_tok, gain_inc, sw_inc
):
    """Per (variant, set), over the set's content groups: relevant kept, relevant tokens kept,
    tokens kept, relevant swinging kept, and (``graded`` labels) gain kept. One pass over
    ``status`` ([V, G]). The counts are integer sums the compiler can vectorise; the gain, a
    float sum kept in group order, gets its own loop, run only for graded labels (a boolean
    label's gain is its relevant count: the caller copies it)."""
    n_var = status.shape[0]
    n_sets = goff.shape[0] - 1
    for v in range(n_var):
        row = status[v]
        for s in range(n_sets):
            n_rel = 0
            rel_tok = 0
            tok = 0
            sw = 0
            for g in range(goff[s], goff[s + 1]):  # branch-free: x and r are 0 or 1
                x = np.int64(row[g])
                r = x * np.int64(g_rel[g])
                t = g_tok[g]
                tok += x * t
                n_rel += r
                rel_tok += r * t
                sw += r * np.int64(sw_rel[g])
            rel_inc[v, s] = n_rel
            rel_tok_inc[v, s] = rel_tok
            inc_tok[v, s] = tok
            sw_inc[v, s] = sw
            if graded:
                gain = 0.0
                for g in range(goff[s], goff[s + 1]):
                    gain += np.int64(row[g]) * g_label[g]  # adding +0.0 leaves a sum of non-negative labels unchanged
                gain_inc[v, s] = gain


def outcome_matrices(result, labels, *, threads: int | None = None) -> OutcomeMatrices:
    """Outcome counts of a SweepResult under ``labels`` (a Labels, a column name the table
    kept, or one value per input row); ``threads`` as for ``sweep`` (same result for any)."""
    lab = _as_labels(result, labels)
    t = result.table
    n_sets = t.n_sets
    stored = lab.values[t.input_row]  # grouped row order
    labelled_row = ~np.isnan(stored)
    set_of_row = np.repeat(np.arange(n_sets, dtype=np.int64), np.diff(t.offsets))
    labelled = np.bincount(set_of_row[labelled_row], minlength=n_sets) > 0
    row_label = np.where(labelled_row, stored, 0.0)
    n_groups = result.group_first_row.shape[0]
    if n_groups == t.n:  # no repeated content: group g is row g
        g_label = row_label
    else:  # the largest label of each group's rows: a sort by group, then one reduceat
        order = np.argsort(result.group_of_row, kind="stable")
        starts = np.searchsorted(result.group_of_row[order], np.arange(n_groups))
        g_label = np.maximum.reduceat(row_label[order], starts)
    g_rel = g_label > 0
    g_tok = np.maximum(t.tokens[result.group_first_row], 0)
    gs, goff = result.group_set, result.group_offsets
    status = as_input(result.status.T, np.bool_)  # [V, G]
    n_var = status.shape[0]
    shape = (n_var, n_sets)
    rel_inc, rel_tok_inc, inc_tok, sw_inc = (np.zeros(shape, dtype=np.int64) for _ in range(4))
    gain_inc = np.zeros(shape, dtype=np.float64)
    sw_rel = result.swing & g_rel
    ins = (
        as_input(goff, np.int64),
        as_input(g_rel, np.bool_),
        as_input(g_tok, np.int64),
        as_input(g_label, np.float64),
        as_input(sw_rel, np.bool_),
    )
    chunk = 32  # variants per task: each task writes its own rows, so any thread count gives the same

    def task(i: int, _state) -> None:
        sl = slice(i * chunk, min((i + 1) * chunk, n_var))
        _outcome_kernel(status[sl], *ins, graded, rel_inc[sl], rel_tok_inc[sl], inc_tok[sl], gain_inc[sl], sw_inc[sl])

    graded = bool(lab.graded)
    run_tasks(-(-n_var // chunk), resolve_threads(threads), lambda: None, task)
    if not graded:  # a boolean label is 1 on every relevant content: the gain kept is the count kept
        gain_inc[:] = rel_inc
    return OutcomeMatrices(
        labelled=labelled,
        relevant_items=np.bincount(gs[g_rel], minlength=n_sets),
        relevant_tokens=segment_sums(np.where(g_rel, g_tok, 0), goff),
        gain_total=np.bincount(gs, weights=g_label, minlength=n_sets),
        swing_relevant=np.bincount(gs[sw_rel], minlength=n_sets),
        failed=np.asarray(result.failed, dtype=np.bool_),
        relevant_included=rel_inc,
        relevant_tokens_included=rel_tok_inc,
        gain_included=gain_inc,
        included_tokens=inc_tok,
        swing_relevant_included=sw_inc,
        group_relevant=g_rel,
    )


def outcomes_table(result, labels) -> pa.Table:
    """One row per (variant, set), variant-major like ``variants_table``: the counts and
    ratios of the module docstring (null where a variant failed on the set, where the set has
    no labelled item, or where a ratio's denominator is 0), and ``labelled`` per set."""
    m = outcome_matrices(result, labels)
    n_var, n_sets = m.failed.shape
    skip = (m.failed | ~m.labelled[None, :]).reshape(-1)

    def per_set(a) -> pa.Array:
        return pa.array(np.tile(a, n_var), mask=np.tile(~m.labelled, n_var))

    def cell(a) -> pa.Array:
        return pa.array(a.reshape(-1), mask=skip)

    def ratio(name) -> pa.Array:
        r = m.ratio(name).reshape(-1)
        return pa.array(r, mask=np.isnan(r))

    return pa.table(
        {
            "variant": pa.array(np.repeat(np.array(result.labels, dtype=object), n_sets), pa.string()),
            result.table.set_column or "set": result._set_keys_array.take(pa.array(np.tile(np.arange(n_sets), n_var))),
            "labelled": pa.array(np.tile(m.labelled, n_var)),
            "relevant_items": per_set(m.relevant_items),
            "relevant_included": cell(m.relevant_included),
            "item_recall": ratio("item_recall"),
            "relevant_tokens": per_set(m.relevant_tokens),
            "relevant_tokens_included": cell(m.relevant_tokens_included),
            "token_recall": ratio("token_recall"),
            "gain_share": ratio("gain_share"),
            "included_tokens": cell(m.included_tokens),
            "token_precision": ratio("token_precision"),
            "swing_relevant": per_set(m.swing_relevant),
            "swing_relevant_included": cell(m.swing_relevant_included),
        }
    )


# --------------------------------------------------------------------------- aggregates
def bootstrap_means(
    x: np.ndarray, *, n_boot: int = 1000, ci: float = 0.95, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per column of ``x`` (``[S, K]``, NaN = no value for that set): the mean over sets and a
    percentile bootstrap interval. Every column is resampled with the same set draws (so
    columns stay paired), drawn from ``numpy.random.default_rng(seed)``; a resample in which a
    column has no value is left out of that column's percentiles. Returns (mean, lo, hi)."""
    if not 0 < ci < 1:
        raise InvalidConfigError(f"ci must be in (0, 1), got {ci!r}")
    if n_boot < 1:
        raise InvalidConfigError(f"n_boot must be at least 1, got {n_boot!r}")
    x = np.asarray(x, dtype=np.float64)
    n_sets, k = x.shape
    valid = ~np.isnan(x)
    xv = np.where(valid, x, 0.0)
    cnt = valid.sum(axis=0)
    mean = np.divide(xv.sum(axis=0), cnt, out=np.full(k, np.nan), where=cnt > 0)
    if n_sets == 0:
        return mean, mean.copy(), mean.copy()
    rng = np.random.default_rng(seed)
    boots = np.empty((n_boot, k))
    step = max(1, 4_000_000 // max(n_sets, 1))
    for b0 in range(0, n_boot, step):  # resample counts per set, a block of resamples at a time
        nb = min(step, n_boot - b0)
        draws = rng.integers(0, n_sets, size=(nb, n_sets))  # each resample: n_sets sets with replacement
        draws += np.arange(nb, dtype=np.int64)[:, None] * n_sets
        w = np.bincount(draws.ravel(), minlength=nb * n_sets).reshape(nb, n_sets).astype(np.float64)
        num, den = w @ xv, w @ valid.astype(np.float64)
        boots[b0 : b0 + nb] = np.divide(num, den, out=np.full(num.shape, np.nan), where=den > 0)
    alpha = (1 - ci) / 2
    lo = np.full(k, np.nan)
    hi = np.full(k, np.nan)
    for j in range(k):  # per column (variant), never per set
        col = boots[:, j][~np.isnan(boots[:, j])]
        if col.size:
            lo[j], hi[j] = np.quantile(col, [alpha, 1 - alpha])
    return mean, lo, hi


def outcome_summary(
    result, labels, *, metrics: Sequence[str] = METRICS, n_boot: int = 1000, ci: float = 0.95, seed: int = 0
) -> pa.Table:
    """One row per variant: how many sets were scored, unlabelled, without a relevant item or
    failed, and per metric its mean over sets with a percentile bootstrap interval
    (``<metric>``, ``<metric>_lo``, ``<metric>_hi``)."""
    m = outcome_matrices(result, labels)
    _check_metrics(metrics)
    cols: dict = {
        "variant": pa.array(result.labels, pa.string()),
        "sets_labelled": pa.array(np.full(len(result.labels), int(m.labelled.sum()))),
        "sets_unlabelled": pa.array(np.full(len(result.labels), int((~m.labelled).sum()))),
        "sets_without_relevant": pa.array(
            np.full(len(result.labels), int((m.labelled & (m.relevant_items == 0)).sum()))
        ),
        "sets_failed": pa.array((m.failed & m.labelled[None, :]).sum(axis=1)),
    }
    for name in metrics:
        mean, lo, hi = bootstrap_means(m.ratio(name).T, n_boot=n_boot, ci=ci, seed=seed)
        cols[name] = pa.array(mean, mask=np.isnan(mean))
        cols[f"{name}_lo"] = pa.array(lo, mask=np.isnan(lo))
        cols[f"{name}_hi"] = pa.array(hi, mask=np.isnan(hi))
    return pa.table(cols)


def outcome_summary_of_table(
    outcomes: pa.Table,
    variants: Sequence[str] | None = None,
    *,
    metrics: Sequence[str] = METRICS,
    n_boot: int = 1000,
    ci: float = 0.95,
    seed: int = 0,
) -> pa.Table:
    """``outcome_summary`` from an outcomes table (``outcomes_table`` rows, e.g. a streamed
    run's ``outcomes.parquet``, written chunk by chunk): the same columns, and the same
    numbers as ``outcome_summary`` of the whole sweep when the table lists the sets in the
    same order. ``variants``: their order (default: as they first appear)."""
    _check_metrics(metrics)
    names = outcomes.column("variant").to_numpy(zero_copy_only=False)
    if variants is None:
        variants = list(dict.fromkeys(names.tolist()))
    rows = [np.flatnonzero(names == v) for v in variants]  # one mask per variant, never per set
    if len({r.size for r in rows}) > 1:
        raise InvalidConfigError("outcomes table: variants have different numbers of sets")

    def floats(name: str) -> np.ndarray:  # a null becomes NaN
        return np.asarray(outcomes.column(name).to_numpy(zero_copy_only=False), dtype=np.float64)

    labelled = np.asarray(outcomes.column("labelled").to_numpy(zero_copy_only=False), dtype=bool)
    failed = labelled & np.isnan(floats("relevant_included"))
    relevant = floats("relevant_items")
    first = rows[0] if rows else np.zeros(0, dtype=np.int64)
    n_var = len(variants)
    cols: dict = {
        "variant": pa.array(list(variants), pa.string()),
        "sets_labelled": pa.array(np.full(n_var, int(labelled[first].sum()))),
        "sets_unlabelled": pa.array(np.full(n_var, int((~labelled[first]).sum()))),
        "sets_without_relevant": pa.array(np.full(n_var, int((labelled[first] & (relevant[first] == 0)).sum()))),
        "sets_failed": pa.array(np.array([int(failed[r].sum()) for r in rows], dtype=np.int64)),
    }
    for name in metrics:
        values = floats(name)
        # [S, V] laid out as outcome_summary's (a transposed [V, S]): NumPy then sums alike
        x = np.stack([values[r] for r in rows]).T if rows else np.zeros((0, 0))
        mean, lo, hi = bootstrap_means(x, n_boot=n_boot, ci=ci, seed=seed)
        cols[name] = pa.array(mean, mask=np.isnan(mean))
        cols[f"{name}_lo"] = pa.array(lo, mask=np.isnan(lo))
        cols[f"{name}_hi"] = pa.array(hi, mask=np.isnan(hi))
    return pa.table(cols)


def _check_metrics(metrics) -> None:
    for name in [metrics] if isinstance(metrics, str) else metrics:
        if name not in METRICS:
            raise InvalidConfigError(f"unknown outcome metric {name!r}; metrics: {', '.join(METRICS)}")


def paired_stats(
    a: np.ndarray, b: np.ndarray, *, n_boot: int = 1000, ci: float = 0.95, seed: int = 0, tie: float = 1e-12
) -> dict:
    """Set-by-set comparison of two metric vectors (NaN = no value): over the sets where both
    have a value, the mean of ``a - b`` with its percentile bootstrap interval, and the sets
    where ``a`` is higher (wins), within ``tie`` (ties) or lower (losses)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    both = ~np.isnan(a) & ~np.isnan(b)
    d = (a - b)[both]
    mean, lo, hi = bootstrap_means(d[:, None], n_boot=n_boot, ci=ci, seed=seed)
    return {
        "sets": int(d.size),
        "mean_diff": float(mean[0]),
        "lo": float(lo[0]),
        "hi": float(hi[0]),
        "wins": int((d > tie).sum()),
        "ties": int((np.abs(d) <= tie).sum()),
        "losses": int((d < -tie).sum()),
    }


def paired_comparisons(
    result,
    labels,
    *,
    metric: str = "token_recall",
    baseline: str | None = None,
    pairs: Sequence[tuple[str, str]] | None = None,
    n_boot: int = 1000,
    ci: float = 0.95,
    seed: int = 0,
) -> pa.Table:
    """Variants compared set by set on ``metric``: every variant against ``baseline`` (default:
    the first variant), or the given ``(a, b)`` label pairs. One row per pair: ``a``, ``b``,
    paired sets, ``mean_diff`` (a - b) with its bootstrap interval ``lo`` / ``hi``, and
    ``wins`` / ``ties`` / ``losses`` of ``a``. An interval that excludes 0 says the difference
    is more than resampling noise at that level."""
    _check_metrics(metric)
    m = outcome_matrices(result, labels)
    x = m.ratio(metric)
    idx = {label: i for i, label in enumerate(result.labels)}
    if pairs is None:
        base = result.labels[0] if baseline is None else baseline
        pairs = [(label, base) for label in result.labels if label != base]
    for p in pairs:
        for label in p:
            if label not in idx:
                raise InvalidConfigError(f"no variant labelled {label!r}; labels: {', '.join(result.labels)}")
    rows = [
        dict(a=a, b=b, metric=metric, **paired_stats(x[idx[a]], x[idx[b]], n_boot=n_boot, ci=ci, seed=seed))
        for a, b in pairs
    ]
    schema = pa.schema(
        [("a", pa.string()), ("b", pa.string()), ("metric", pa.string()), ("sets", pa.int64())]
        + [(k, pa.float64()) for k in ("mean_diff", "lo", "hi")]
        + [(k, pa.int64()) for k in ("wins", "ties", "losses")]
    )
    return pa.Table.from_pylist(rows, schema=schema)


# --------------------------------------------------------------------------- budget curves
def budget_outcomes(curves, labels, *, reach: Sequence[float] = (0.9, 0.95, 0.99)) -> tuple[pa.Table, pa.Table]:
    """Outcomes of ``budget_curves(...)`` output. Returns two tables:

    * recall against budget, one row per (variant, budget): ``token_recall`` pooled over the
      corpus (relevant tokens kept / relevant tokens, over labelled sets where the cell ran),
      ``token_recall_mean`` and ``item_recall_mean`` (means over sets);
    * ``reach``: per variant and fraction, the smallest ladder budget at which the pooled token
      recall reaches it (null when no budget of the ladder does). Inclusion is not always
      monotonic in the budget, so a larger budget may fall below the fraction again."""
    res = curves.sweep_result()
    m = outcome_matrices(res, labels)
    n_b = len(curves.budgets)
    ok = ~m.failed & m.labelled[None, :]
    kept = np.where(ok, m.relevant_tokens_included, 0).sum(axis=1)
    total = np.where(ok, m.relevant_tokens[None, :], 0).sum(axis=1)
    pooled = np.divide(kept, total, out=np.full(kept.shape, np.nan), where=total > 0)
    tok_mean = _nanmean_rows(m.ratio("token_recall"))
    item_mean = _nanmean_rows(m.ratio("item_recall"))
    budgets = np.array([b.max_tokens for b in curves.budgets], dtype=np.int64)
    labels_v = np.repeat(np.array(curves.labels, dtype=object), n_b)
    recall = pa.table(
        {
            "variant": pa.array(labels_v, pa.string()),
            "budget": pa.array(np.tile(budgets, len(curves.labels))),
            "token_recall": pa.array(pooled, mask=np.isnan(pooled)),
            "token_recall_mean": pa.array(tok_mean, mask=np.isnan(tok_mean)),
            "item_recall_mean": pa.array(item_mean, mask=np.isnan(item_mean)),
        }
    )
    rows = []
    for p, label in enumerate(curves.labels):
        r = pooled[p * n_b : (p + 1) * n_b]
        for f in reach:
            hit = np.flatnonzero(r >= f - 1e-12)
            rows.append({"variant": label, "fraction": float(f), "budget": int(budgets[hit[0]]) if hit.size else None})
    schema = pa.schema([("variant", pa.string()), ("fraction", pa.float64()), ("budget", pa.int64())])
    return recall, pa.Table.from_pylist(rows, schema=schema)


def _nanmean_rows(x: np.ndarray) -> np.ndarray:
    cnt = (~np.isnan(x)).sum(axis=1)
    s = np.where(np.isnan(x), 0.0, x).sum(axis=1)
    return np.divide(s, cnt, out=np.full(cnt.shape, np.nan), where=cnt > 0)
