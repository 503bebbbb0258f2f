"""Policy search on Dask: every batch of trials runs as Dask tasks over partitions of whole
item sets, each task returning only its sets' per-(variant, set) outcome counts (never item
rows); the driver puts the sets back in the in-process order (the order of their first input
row) and computes exactly the numbers the in-process search computes.

The partitions are read, shuffled (only when a set spans partitions) and turned into
ItemTables once per ``tune`` call and kept on the workers (``client.compute`` futures, released
at the end); each batch then costs one task per partition on the already loaded tables. The
search/held-out split is applied in the tasks, by set key (``heldout_sets``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cupel_np.analysis.outcomes import OutcomeMatrices, labels_from, outcome_matrices
from cupel_np.errors import InvalidConfigError

__all__ = ["DaskEvaluator"]

#: the per-(variant, set) and per-set fields of OutcomeMatrices a task sends back
_VS = (
    "failed",
    "relevant_included",
    "relevant_tokens_included",
    "gain_included",
    "included_tokens",
    "swing_relevant_included",
)
_S = ("labelled", "relevant_items", "relevant_tokens", "gain_total", "swing_relevant")
_SWING = ("swinging", "relevant_swinging", "relevant_kept_by_a_only", "relevant_kept_by_b_only")


def _load(df, set_column: str, label_column: str, holdout: float, rows_from) -> dict:
    """Task: a partition's ItemTable and labels (kept on the worker), its sets' first input
    rows and held-out flags."""
    from cupel_np.io.dask import partition_table
    from cupel_np.tuning.split import heldout_sets

    if len(df) == 0:
        return {"table": None, "first": np.zeros(0, np.int64), "held": np.zeros(0, bool), "rows": 0}
    table, rows = partition_table(df, set_column, rows_from)
    labels = labels_from(table, label_column)
    r = rows.to_numpy(zero_copy_only=False)
    first = r[table.input_row[table.offsets[:-1]]]  # a set's first stored row is its earliest input row
    held = heldout_sets(table.set_keys, holdout)
    return {"table": table, "labels": labels, "first": first, "held": held, "rows": table.n}


def _outcomes(part: dict, variants, max_cells: int, swing: bool) -> dict | None:
    """Task: the partition's per-(variant, set) outcome counts for ``variants`` (as several
    sweeps of whole variants past ``max_cells``); with ``swing``, per set the contents each
    variant decides differently from variant 0, and how many of them are relevant / kept."""
    from cupel_np.analysis.sensitivity import sweep
    from cupel_np.io.dask import worker_threads

    table = part["table"]
    if table is None:
        return None
    threads = worker_threads()
    step = len(variants) if swing else max(1, max_cells // max(table.n, 1))
    chunks = []
    for i in range(0, len(variants), step):
        res = sweep(table, None, variants[i : i + step], on_error="collect", threads=threads)
        m = outcome_matrices(res, part["labels"], threads=threads)
        out = {k: getattr(m, k) for k in _VS}
        if swing:
            out.update(_swing_counts(res, m))
        chunks.append(out)
    per_vs = {k: np.concatenate([c[k] for c in chunks]) for k in chunks[0]}
    return {"per_set": {k: getattr(m, k) for k in _S}, **per_vs}


def _swing_counts(res, m: OutcomeMatrices) -> dict:
    """``[V, S]`` counts of ``best._swing`` for a = variant 0 and b = every variant."""
    st = res.status  # [G, V]
    gs, n_sets = res.group_set, m.failed.shape[1]
    ok = ~m.failed[:, gs].T  # [G, V]
    differ = (st != st[:, :1]) & ok & ok[:, :1]
    lab = m.group_relevant[:, None]
    masks = (differ, differ & lab, differ & lab & st[:, :1], differ & lab & st)
    out = {}
    for name, mask in zip(_SWING, masks):
        out[name] = np.stack([np.bincount(gs[mask[:, v]], minlength=n_sets) for v in range(st.shape[1])])
    return out


class DaskEvaluator:
    """The search's sweeps on a Dask cluster (see the module docstring): ``held`` is the
    held-out flag of every set in the in-process set order; ``batch`` and ``final`` return
    what the in-process evaluator returns."""

    def __init__(self, source: Any, *, label_column: str, set_column: str | None, holdout: float, client, npartitions):
        from cupel_np.io.dask import require_dask, whole_set_partitions

        require_dask()
        if not isinstance(set_column, str) or not set_column:
            raise InvalidConfigError("tune on Dask needs a set column (--set-column; a task holds whole item sets)")
        if not isinstance(label_column, str):
            raise InvalidConfigError("tune on Dask needs label_column as a column name")
        self.client = client
        parts, _shuffled, rows_from = whole_set_partitions(source, set_column, client, npartitions=npartitions)
        import dask

        load = dask.delayed(_load, pure=True)
        self.parts = client.compute([load(p, set_column, label_column, holdout, rows_from) for p in parts])
        heads = client.gather(client.map(_head, self.parts))
        first = np.concatenate([h["first"] for h in heads])
        self.order = np.argsort(first, kind="stable")  # concatenated sets -> in-process set order
        self.held = np.concatenate([h["held"] for h in heads])[self.order]
        self.n = sum(h["rows"] for h in heads)
        self.n_sets = int(first.shape[0])

    def _run(self, variants, max_cells: int, swing: bool) -> dict:
        futs = [self.client.submit(_outcomes, p, variants, max_cells, swing, pure=False) for p in self.parts]
        got = [r for r in self.client.gather(futs) if r is not None]
        cat = {k: np.concatenate([g["per_set"][k] for g in got])[self.order] for k in _S}
        for k in got[0]:
            if k != "per_set":
                cat[k] = np.concatenate([g[k] for g in got], axis=1)[:, self.order]
        return cat

    def matrices(self, variants, max_cells: int = 1 << 62, swing: bool = False):
        """``(OutcomeMatrices without group_relevant, swing counts or None)`` of ``variants``."""
        cat = self._run(variants, max_cells, swing)
        m = OutcomeMatrices(**{k: cat[k] for k in _S + _VS}, group_relevant=np.zeros(0, bool))
        return m, ({k: cat[k] for k in _SWING} if swing else None)

    def close(self) -> None:
        """Release the loaded partitions on the cluster."""
        self.client.cancel(self.parts)


def _head(part: dict) -> dict:
    return {k: part[k] for k in ("first", "held", "rows")}
