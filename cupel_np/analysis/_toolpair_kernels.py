"""The one kernel of the orphan analytics: per (variant, set), the tool calls kept without all
their results and the results kept without their call, in one pass over the linked rows of
every variant (see ``cupel_np.analysis.toolpairs``)."""

from __future__ import annotations

import numpy as np

from cupel_np._jit import as_input, jit


@jit
def _orphan_kernel(included, rows, is_call, link_off, link_set, out_calls, out_results):
    """``rows[link_off[l]:link_off[l + 1]]`` are link ``l``'s rows (its calls and results, one
    set ``link_set[l]``); ``is_call`` per entry of ``rows``. For every variant ``v`` (a row of
    ``included``) adds, to ``out_calls[v, set]``, the kept calls of each link with a result
    left out, and to ``out_results[v, set]`` the kept results of each link with no kept call."""
    n_var = included.shape[0]
    n_link = link_off.shape[0] - 1
    for v in range(n_var):
        inc = included[v]
        for link in range(n_link):
            kept_calls = 0
            kept_results = 0
            missing_results = 0
            for j in range(link_off[link], link_off[link + 1]):
                if is_call[j]:
                    if inc[rows[j]]:
                        kept_calls += 1
                elif inc[rows[j]]:
                    kept_results += 1
                else:
                    missing_results += 1
            s = link_set[link]
            if missing_results > 0:
                out_calls[v, s] += kept_calls
            if kept_calls == 0:
                out_results[v, s] += kept_results


def orphan_counts(
    included: np.ndarray, rows: np.ndarray, is_call: np.ndarray, link_off: np.ndarray, link_set: np.ndarray, n_sets: int
) -> tuple[np.ndarray, np.ndarray]:
    """``(orphan_calls, orphan_results)``, each int64 ``[V, S]``, from the ``[V, N]`` inclusion
    matrix and a table's links (see ``_orphan_kernel``)."""
    n_var = included.shape[0]
    calls = np.zeros((n_var, n_sets), dtype=np.int64)
    results = np.zeros((n_var, n_sets), dtype=np.int64)
    if rows.shape[0] and n_var:
        _orphan_kernel(
            as_input(included, np.bool_),
            as_input(rows, np.int64),
            as_input(is_call, np.bool_),
            as_input(link_off, np.int64),
            as_input(link_set, np.int64),
            calls,
            results,
        )
    return calls, results
