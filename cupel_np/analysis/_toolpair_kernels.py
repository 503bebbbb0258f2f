"""The one kernel of the orphan analytics: per (variant, set), the tool calls kept without all
their results and the results kept without their call, in one pass over the linked rows of
every variant (see ``cupel_np.analysis.toolpairs``)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from cupel_np._jit import as_input, jit
from cupel_np.engine.parallel import resolve_threads, run_tasks
from cupel_np.engine.sortkeys import stable_argsort


@jit
def _orphan_kernel(included, rows, n_calls, link_off, link_set, out_calls, out_results):
    """``rows[link_off[l]:link_off[l + 1]]`` are link ``l``'s rows, its ``n_calls[l]`` calls
    first, then its results, all of set ``link_set[l]``. For every variant ``v`` (a row of
    ``included``) adds, to ``out_calls[v, set]``, the kept calls of each link with a result
    left out, and to ``out_results[v, set]`` the kept results of each link with no kept call.
    The per-row work is a branch-free sum (inclusion is data, a branch on it mispredicts)."""
    n_var = included.shape[0]
    n_link = link_off.shape[0] - 1
    for v in range(n_var):
        inc = included[v]
        for link in range(n_link):
            a = link_off[link]
            m = a + n_calls[link]
            b = link_off[link + 1]
            kept_calls = 0
            for j in range(a, m):
                kept_calls += inc[rows[j]]
            kept_results = 0
            for j in range(m, b):
                kept_results += inc[rows[j]]
            s = link_set[link]
            if kept_results < b - m:
                out_calls[v, s] += kept_calls
            if kept_calls == 0:
                out_results[v, s] += kept_results


def orphan_counts(
    included: np.ndarray,
    rows: np.ndarray,
    n_calls: np.ndarray,
    link_off: np.ndarray,
    link_set: np.ndarray,
    n_sets: int,
    threads: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``(orphan_calls, orphan_results)``, each int64 ``[V, S]``, from the ``[V, N]`` inclusion
    matrix and a table's links (see ``_orphan_kernel``); variants run on the engine's pool
    (each writes only its own rows: the same answer for any thread count)."""
    n_var = included.shape[0]
    calls = np.zeros((n_var, n_sets), dtype=np.int64)
    results = np.zeros((n_var, n_sets), dtype=np.int64)
    if not (rows.shape[0] and n_var):
        return calls, results
    inc = as_input(included, np.bool_)
    args = (
        as_input(rows, np.int32 if rows.dtype == np.int32 else np.int64),
        as_input(n_calls, np.int64),
        as_input(link_off, np.int64),
        as_input(link_set, np.int64),
    )

    def task(v: int, _state: None) -> None:
        _orphan_kernel(inc[v : v + 1], *args, calls[v : v + 1], results[v : v + 1])

    run_tasks(n_var, resolve_threads(threads), lambda: None, task)
    return calls, results


@jit
def _fold_equals(data, a, n, word):
    """The ``n`` bytes at ``data[a:]`` equal ``word`` (lower-case ASCII), ASCII case-folded."""
    if n != word.shape[0]:
        return False
    for j in range(n):
        b = data[a + j]
        if 65 <= b <= 90:
            b += 32
        if b != word[j]:
            return False
    return True


@jit
def _role_kernel(off, data, rows, call, result, out):
    """Per row ``rows[k]`` (a non-null string): 0 when it is ``call``, 1 when ``result`` (ASCII
    case-insensitive), -2 for anything else."""
    for k in range(rows.shape[0]):
        i = rows[k]
        a = off[i]
        n = off[i + 1] - a
        if _fold_equals(data, a, n, call):
            out[k] = 0
        elif _fold_equals(data, a, n, result):
            out[k] = 1
        else:
            out[k] = -2


@jit
def _link_keys(off, data, rows, set_off, role, shift, seg, out):
    """Per linked row ``rows[k]`` (ascending): its set (written to ``seg[k]``, found by walking
    ``set_off``) in the top ``64 - shift`` bits, a 64-bit FNV-1a hash of its id's bytes cut to
    ``shift - 1`` bits, then its role bit ``role[k]`` (calls first)."""
    prime = np.uint64(1099511628211)
    cut = np.uint64(65 - shift)
    s = 0
    for k in range(rows.shape[0]):
        i = rows[k]
        while set_off[s + 1] <= i:
            s += 1
        seg[k] = s
        h = np.uint64(14695981039346656037)
        for j in range(off[i], off[i + 1]):
            h = (h ^ np.uint64(data[j])) * prime
        out[k] = (np.uint64(s) << np.uint64(shift)) | ((h >> cut) << np.uint64(1)) | np.uint64(role[k])


@jit
def _runs_hold_one_id(off, data, rows, key):
    """Within each run of equal ``key >> 1`` (sorted keys), every row's id equals the run's
    first row's id: False on a hash collision."""
    n = rows.shape[0]
    i = 0
    while i < n:
        g = key[i] >> np.uint64(1)
        r0 = rows[i]
        a0 = off[r0]
        n0 = off[r0 + 1] - a0
        j = i + 1
        while j < n and (key[j] >> np.uint64(1)) == g:
            r = rows[j]
            a = off[r]
            if off[r + 1] - a != n0:
                return False
            for u in range(n0):
                if data[a + u] != data[a0 + u]:
                    return False
            j += 1
        i = j
    return True


@jit
def _sort_within_sets(keys, seg):
    """The order of ``keys`` ascending, given that the rows come in runs of one set (``seg``
    nondecreasing) and every key starts with its set's bits: each run is sorted on its own
    (by insertion when short)."""
    n = keys.shape[0]
    order = np.arange(n)
    a = 0
    while a < n:
        b = a + 1
        while b < n and seg[b] == seg[a]:
            b += 1
        if b - a <= 32:
            for u in range(a + 1, b):
                x = order[u]
                kx = keys[x]
                w = u - 1
                while w >= a and keys[order[w]] > kx:
                    order[w + 1] = order[w]
                    w -= 1
                order[w + 1] = x
        else:
            part = np.empty(b - a, dtype=np.uint64)
            for u in range(b - a):
                part[u] = keys[a + u]
            o = stable_argsort(part)
            for u in range(b - a):
                order[a + u] = a + o[u]
        a = b
    return order


def _buffers(arr) -> tuple[np.ndarray, np.ndarray]:
    """(int64 offsets [n + 1], uint8 data) of a string or large_string Arrow array (the data
    buffer zero-copy)."""
    bufs = arr.buffers()
    wide = pa.types.is_large_string(arr.type)
    off = np.frombuffer(bufs[1], dtype=np.int64 if wide else np.int32)[arr.offset : arr.offset + len(arr) + 1]
    off = off.astype(np.int64, copy=False)
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    return off, data


_CALL = np.frombuffer(b"call", dtype=np.uint8).copy()
_RESULT = np.frombuffer(b"result", dtype=np.uint8).copy()


def role_codes(arr, rows: np.ndarray) -> np.ndarray:
    """int8 per row of ``rows`` (non-null strings of ``arr``; see ``_role_kernel``)."""
    off, data = _buffers(arr)
    out = np.empty(rows.shape[0], dtype=np.int8)
    _role_kernel(as_input(off, np.int64), as_input(data, np.uint8), as_input(rows, np.int64), _CALL, _RESULT, out)
    return out


def link_keys(
    arr, rows: np.ndarray, set_off: np.ndarray, role: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``(order, keys, seg)``: the linked rows' (ascending ``rows``, their roles ``role``) order
    by (set, id hash, role), those uint64 keys sorted, and each row's set (in ``rows`` order); None when two
    different ids of one set share a hash, or the sets leave too few hash bits (the caller
    then encodes the ids exactly)."""
    off, data = _buffers(arr)
    n_sets = set_off.shape[0] - 1
    shift = 64 - max(1, int(n_sets - 1).bit_length())
    if shift < 33:
        return None
    keys = np.empty(rows.shape[0], dtype=np.uint64)
    seg = np.empty(rows.shape[0], dtype=np.int64)
    off_in, data_in = as_input(off, np.int64), as_input(data, np.uint8)
    _link_keys(
        off_in,
        data_in,
        as_input(rows, np.int64),
        as_input(set_off, np.int64),
        as_input(role, np.int8),
        shift,
        seg,
        keys,
    )
    order = _sort_within_sets(keys, seg)  # rows come grouped by set: many small sorts
    keys = keys[order]
    if not _runs_hold_one_id(off_in, data_in, as_input(rows[order], np.int64), keys):
        return None
    return order, keys, seg


@jit
def _build_links(rows, seg, is_call, key, n_sets, out_rows, out_call, n_calls, link_off, link_set, unmatched):
    """From the linked rows sorted by link (runs of equal ``key``, calls first): keep the links
    with a call and a result (their rows in ``out_rows``/``out_call``, their call counts,
    offsets and sets); count the others' rows per set in ``unmatched`` ([S, 2]: calls without
    a result, results without a call). Returns (links kept, rows kept)."""
    n = rows.shape[0]
    n_link = 0
    n_out = 0
    link_off[0] = 0
    i = 0
    while i < n:
        j = i
        c = 0
        while j < n and key[j] == key[i]:
            c += is_call[j]
            j += 1
        s = seg[i]
        if c == 0:
            unmatched[s, 1] += j - i
        elif c == j - i:
            unmatched[s, 0] += c
        else:
            for u in range(i, j):
                out_rows[n_out] = rows[u]
                out_call[n_out] = is_call[u]
                n_out += 1
            n_calls[n_link] = c
            link_set[n_link] = s
            n_link += 1
            link_off[n_link] = n_out
        i = j
    return n_link, n_out


def build_links(rows: np.ndarray, seg: np.ndarray, is_call: np.ndarray, key: np.ndarray, n_sets: int):
    """``_build_links`` with its outputs allocated and trimmed: (rows int32, is_call, n_calls,
    link_off, link_set, unmatched [S, 2])."""
    n = rows.shape[0]
    out_rows = np.empty(n, dtype=np.int32 if n == 0 or int(rows.max()) < 2**31 else np.int64)
    out_call = np.empty(n, dtype=np.bool_)
    n_calls = np.empty(n, dtype=np.int64)
    link_off = np.empty(n + 1, dtype=np.int64)
    link_set = np.empty(n, dtype=np.int64)
    unmatched = np.zeros((n_sets, 2), dtype=np.int64)
    n_link, n_out = _build_links(
        as_input(rows, np.int64),
        as_input(seg, np.int64),
        as_input(is_call, np.bool_),
        np.ascontiguousarray(key),
        n_sets,
        out_rows,
        out_call,
        n_calls,
        link_off,
        link_set,
        unmatched,
    )
    return out_rows[:n_out], out_call[:n_out], n_calls[:n_link], link_off[: n_link + 1], link_set[:n_link], unmatched
