"""The Arrow tables of ``budget_sim.budget_curves``, built from its kernels' arrays without a
Python object per row: string columns are takes from small Arrow arrays (a NumPy object
array of a million references and its conversion cost ~70 ms)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa


def repeat_strings(values: list[str], each: int) -> pa.Array:
    """``values``, each repeated ``each`` times, as an Arrow string array."""
    index = np.repeat(np.arange(len(values), dtype=np.int32), each)
    return pa.array(values, pa.string()).take(pa.array(index))


def strings_at(n: int, at: list[int], text: list[str]) -> pa.Array:
    """A string column of ``n`` nulls with ``text[i]`` at position ``at[i]``."""
    if not at:
        return pa.nulls(n, pa.string())
    index = np.full(n, -1, dtype=np.int64)
    index[np.asarray(at, dtype=np.int64)] = np.arange(len(at), dtype=np.int64)
    return pa.array(text, pa.string()).take(pa.array(index, mask=index < 0))


def rows_table(
    input_row: np.ndarray,
    set_of_row: np.ndarray,
    keys: pa.Array | None,
    set_col: str,
    labels: list[str],
    ladder_vals: np.ndarray,
    stats: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
) -> pa.Table:
    """One row per (input row, variant), variant by variant, rows in input order: the set key
    (when ``keys``: the sets' keys), ``input_row``, the variant's label and its ladder
    statistics (``stats[p]``: per table row the first stable ladder index, -1 for none; the
    flips; whether it ever went out), gathered from the table's set-grouped row order
    (``input_row``: each table row's input row)."""
    n = input_row.shape[0]
    to_input = None
    if not bool((input_row == np.arange(n)).all()):  # rows not already set by set
        to_input = np.empty(n, dtype=np.int64)
        to_input[input_row] = np.arange(n, dtype=np.int64)
    # the columns every variant's rows share (Arrow arrays are immutable: shared, not copied)
    row_keys = None if keys is None else keys.take(pa.array(set_of_row if to_input is None else set_of_row[to_input]))
    rows = pa.array(np.arange(n, dtype=np.int64))
    parts = []
    for label, (stable, flips, went_out) in zip(labels, stats, strict=True):
        if to_input is not None:
            stable, flips, went_out = stable[to_input], flips[to_input], went_out[to_input]
        cols: dict[str, pa.Array] = {}
        if row_keys is not None:
            cols[set_col] = row_keys
        cols["input_row"] = rows
        cols["variant"] = repeat_strings([label], n)
        cols["min_stable_budget"] = pa.array(ladder_vals[np.maximum(stable, 0)], mask=stable < 0)
        cols["flips"] = pa.array(flips)
        cols["flips_more_than_once"] = pa.array(flips > 1)
        cols["non_monotonic"] = pa.array(went_out)
        parts.append(pa.table(cols))
    return pa.concat_tables(parts)
