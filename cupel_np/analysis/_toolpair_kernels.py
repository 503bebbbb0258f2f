"""The kernels of the orphan analytics: the call-result links of a table (one hash pass per
set over the linked rows, then one placing pass) and, per (variant, set), the tool calls kept
without all their results and the results kept without their call (one gather and prefix sum
per variant over the linked rows, then one pass over the links; see
``cupel_np.analysis.toolpairs``)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from cupel_np._jit import as_input, jit
from cupel_np.engine.parallel import resolve_threads, run_tasks


@jit
def _orphan_kernel(inc, rows, call_end, link_off, link_set, kept, out_calls, out_results):
    """``rows[link_off[l]:link_off[l + 1]]`` are link ``l``'s rows, its calls first (up to
    ``call_end[l]``), then its results, all of set ``link_set[l]`` (ascending). For one
    variant (``inc``: inclusion per row) adds, to ``out_calls[set]``, the kept calls of each
    link with a result left out, and to ``out_results[set]`` the kept results of each link
    with no kept call. ``kept`` (scratch, ``len(rows) + 1``) gets the running count of kept
    linked rows, so a link's kept calls and results are two differences: no loop per link,
    and the per-link work is branch-free (inclusion is data, a branch on it mispredicts)."""
    n = rows.shape[0]
    acc = 0
    kept[0] = 0
    for j in range(n):
        acc += inc[rows[j]]
        kept[j + 1] = acc
    n_link = link_set.shape[0]
    if n_link == 0:
        return
    s = link_set[0]
    calls = 0
    results = 0
    for link in range(n_link):
        e = call_end[link]
        b = link_off[link + 1]
        kept_calls = kept[e] - kept[link_off[link]]
        kept_results = kept[b] - kept[e]
        t = link_set[link]
        if t != s:  # links come by set: one write per set
            out_calls[s] += calls
            out_results[s] += results
            calls = 0
            results = 0
            s = t
        calls += kept_calls * (kept_results < b - e)
        results += kept_results * (kept_calls == 0)
    out_calls[s] += calls
    out_results[s] += results


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
    starts = as_input(link_off, np.int64)
    args = (
        as_input(rows, np.int32 if rows.dtype == np.int32 else np.int64),
        as_input(starts[:-1] + as_input(n_calls, np.int64), np.int64),
        starts,
        as_input(link_set, np.int64),
    )

    def task(v: int, kept: np.ndarray) -> None:
        _orphan_kernel(inc[v], *args, kept, calls[v], results[v])

    run_tasks(n_var, resolve_threads(threads), lambda: np.empty(rows.shape[0] + 1, dtype=np.int64), task)
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


def _buffers(arr) -> tuple[np.ndarray, np.ndarray]:
    """(offsets [n + 1], uint8 data) of a string or large_string Arrow array, zero-copy: int32
    offsets (a large_string array is cast to string first unless its data passes 2 GiB, the
    one case whose int64 offsets compile the kernels a second time)."""
    if pa.types.is_large_string(arr.type):
        data = arr.buffers()[2]
        if data is None or data.size < 2**31:
            arr = arr.cast(pa.string())
    bufs = arr.buffers()
    wide = pa.types.is_large_string(arr.type)
    off = np.frombuffer(bufs[1], dtype=np.int64 if wide else np.int32)[arr.offset : arr.offset + len(arr) + 1]
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    return as_input(off, off.dtype), as_input(data, np.uint8)


_CALL = np.frombuffer(b"call", dtype=np.uint8).copy()
_RESULT = np.frombuffer(b"result", dtype=np.uint8).copy()


def role_codes(arr, rows: np.ndarray) -> np.ndarray:
    """int8 per row of ``rows`` (non-null strings of ``arr``; see ``_role_kernel``)."""
    off, data = _buffers(arr)
    out = np.empty(rows.shape[0], dtype=np.int8)
    _role_kernel(off, data, as_input(rows, np.int64), _CALL, _RESULT, out)
    return out


@jit
def _id_hash(off, data, i):
    """A 64-bit hash of row ``i``'s id bytes (eight bytes per multiply)."""
    a = off[i]
    b = off[i + 1]
    h = np.uint64(0x9E3779B97F4A7C15) ^ np.uint64(b - a)
    j = a
    while j + 8 <= b:
        w = np.uint64(0)
        for u in range(8):
            w |= np.uint64(data[j + u]) << np.uint64(8 * u)
        h = (h ^ w) * np.uint64(0xBF58476D1CE4E5B9)
        h ^= h >> np.uint64(31)
        j += 8
    w = np.uint64(0)
    u = 0
    while j < b:
        w |= np.uint64(data[j]) << np.uint64(8 * u)
        j += 1
        u += 1
    h = (h ^ w) * np.uint64(0x94D049BB133111EB)
    return h ^ (h >> np.uint64(29))


@jit
def _same_id(off, data, i, r):
    """Rows ``i`` and ``r`` hold the same id bytes."""
    a = off[i]
    n = off[i + 1] - a
    b = off[r]
    if off[r + 1] - b != n:
        return False
    for u in range(n):
        if data[a + u] != data[b + u]:
            return False
    return True


@jit
def _link_rows(id_off, id_data, role_off, role_data, rows, set_off, call, result, role, link_of, links):
    """Per linked row ``rows[k]`` (ascending, a non-null id and role): its role (``role[k]``:
    0 call, 1 result; see ``_role_kernel``) and its link (``link_of[k]``), one hash table per
    set (sized for that set's linked rows, so it stays in cache; ids compared byte for byte,
    never by hash alone). Links are numbered in order of first row, hence by set; ``links``
    ``[4, R]`` gets each link's set, first row, calls and results. Returns the number of links,
    or ``-1 - k`` for the first row ``k`` whose role is neither."""
    n = rows.shape[0]
    slots = np.empty(0, dtype=np.int64)
    stamp = np.empty(0, dtype=np.int64)
    n_link = 0
    s = 0
    k0 = 0
    while k0 < n:
        while set_off[s + 1] <= rows[k0]:
            s += 1
        k1 = k0 + 1
        while k1 < n and rows[k1] < set_off[s + 1]:
            k1 += 1
        bits = 1
        while (1 << bits) < 2 * (k1 - k0):
            bits += 1
        if (1 << bits) > slots.shape[0]:
            slots = np.empty(1 << bits, dtype=np.int64)
            stamp = np.zeros(1 << bits, dtype=np.int64)
        mask = (1 << bits) - 1
        link = -1
        for k in range(k0, k1):
            i = rows[k]
            a = role_off[i]
            m = role_off[i + 1] - a
            if _fold_equals(role_data, a, m, call):
                role[k] = 0
            elif _fold_equals(role_data, a, m, result):
                role[k] = 1
            else:
                return -1 - k
            # the previous linked row's id (a result mostly follows its call): that link,
            # without hashing; else the set's table
            if k == k0 or not _same_id(id_off, id_data, i, rows[k - 1]):
                p = np.int64((_id_hash(id_off, id_data, i) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(64 - bits))
                while True:
                    if stamp[p] != s + 1:  # a free slot (of this set's table): a new link
                        link = n_link
                        n_link += 1
                        stamp[p] = s + 1
                        slots[p] = link
                        links[0, link] = s
                        links[1, link] = i
                        links[2, link] = 0
                        links[3, link] = 0
                        break
                    link = slots[p]
                    if _same_id(id_off, id_data, i, links[1, link]):
                        break
                    p = (p + 1) & mask
            link_of[k] = link
            links[2 + role[k], link] += 1
        k0 = k1
    return n_link


@jit
def _place_links(rows, role, link_of, links, n_link, out_rows, out_call, n_calls, link_off, link_set, unmatched):
    """Keep the links with a call and a result: their rows (calls first, each side in row
    order) in ``out_rows``/``out_call``, their call counts, offsets and sets; count the others'
    rows per set in ``unmatched`` ([S, 2]: calls without a result, results without a call).
    ``links[1]`` is reused as each link's cursors. Returns (links kept, rows kept)."""
    kept = 0
    n_out = 0
    link_off[0] = 0
    for link in range(n_link):
        s = links[0, link]
        c = links[2, link]
        r = links[3, link]
        if c == 0:
            unmatched[s, 1] += r
            links[2, link] = -1
        elif r == 0:
            unmatched[s, 0] += c
            links[2, link] = -1
        else:
            links[2, link] = n_out  # the next call's place
            links[3, link] = n_out + c  # the next result's place
            n_calls[kept] = c
            link_set[kept] = s
            n_out += c + r
            kept += 1
            link_off[kept] = n_out
    for k in range(rows.shape[0]):
        link = link_of[k]
        if links[2, link] < 0:
            continue
        side = 2 + role[k]
        p = links[side, link]
        out_rows[p] = rows[k]
        out_call[p] = role[k] == 0
        links[side, link] = p + 1
    return kept, n_out


#: the fewest linked rows ``build_links`` splits into parts (whole sets each) for the pool
SPLIT_MIN = 1 << 15


def _parts(rows: np.ndarray, set_off: np.ndarray, threads: int) -> list[int]:
    """Boundaries ``0 = b0 < b1 < ... = len(rows)`` of up to ``threads`` parts of about equal
    length, each ending where a set ends (a set's linked rows stay in one part)."""
    n = rows.shape[0]
    bounds = [0]
    for p in range(1, threads):
        k = n * p // threads
        if k <= bounds[-1]:
            continue
        s = int(np.searchsorted(set_off, rows[k], side="right")) - 1  # the set of row ``rows[k]``
        k = int(np.searchsorted(rows, set_off[s + 1]))  # that set's end
        if bounds[-1] < k < n:
            bounds.append(k)
    bounds.append(n)
    return bounds


def build_links(ids, roles, rows: np.ndarray, set_off: np.ndarray, threads: int | None = None):
    """The links of the linked rows ``rows`` (ascending; non-null ``ids`` and ``roles``, string
    arrays) within the sets ``set_off``: (rows int32, is_call, n_calls, link_off, link_set,
    unmatched [S, 2]) as ``ToolLinks`` holds them, or None when a row has a role that is
    neither a call nor a result (the caller names it). From ``SPLIT_MIN`` linked rows the
    hash pass runs on the engine's pool (``threads`` as in ``sweep``) in parts of whole sets,
    each numbering its links from 0; the parts' numbers are then shifted by the links before
    them, which is the one pass's numbering (links in order of first row): the same answer
    for any thread count."""
    n = rows.shape[0]
    n_sets = set_off.shape[0] - 1
    rows_in = as_input(rows, np.int64)
    off_in = as_input(set_off, np.int64)
    role = np.empty(n, dtype=np.int8)
    link_of = np.empty(n, dtype=np.int64)
    id_bufs, role_bufs = _buffers(ids), _buffers(roles)
    bounds = _parts(rows_in, off_in, resolve_threads(threads)) if n >= SPLIT_MIN else [0, n]
    n_parts = len(bounds) - 1
    part_links: list = [None] * n_parts
    counts = [0] * n_parts

    def task(p: int, _state: None) -> None:
        a, b = bounds[p], bounds[p + 1]
        part_links[p] = np.empty((4, b - a), dtype=np.int64)
        # the id hash multiplies modulo 2**64 on purpose: compiled, that is silent; with
        # NUMBA_DISABLE_JIT it runs on NumPy scalars, which would warn of an overflow
        with np.errstate(over="ignore"):
            counts[p] = _link_rows(
                *id_bufs, *role_bufs, rows_in[a:b], off_in, _CALL, _RESULT, role[a:b], link_of[a:b], part_links[p]
            )

    if n_parts == 1:  # (on the calling thread)
        task(0, None)
    else:
        run_tasks(n_parts, n_parts, lambda: None, task)
    if min(counts) < 0:
        return None
    base = 0
    for p, c in enumerate(counts):
        if base:
            link_of[bounds[p] : bounds[p + 1]] += base
        base += c
    n_link = base
    links = (
        part_links[0]
        if n_parts == 1
        else np.concatenate([pl[:, :c] for pl, c in zip(part_links, counts, strict=True)], axis=1)
    )
    out_rows = np.empty(n, dtype=np.int32 if n == 0 or int(rows[-1]) < 2**31 else np.int64)
    out_call = np.empty(n, dtype=np.bool_)
    n_calls = np.empty(n_link, dtype=np.int64)
    link_off = np.empty(n_link + 1, dtype=np.int64)
    link_set = np.empty(n_link, dtype=np.int64)
    unmatched = np.zeros((n_sets, 2), dtype=np.int64)
    kept, n_out = _place_links(
        rows_in, role, link_of, links, n_link, out_rows, out_call, n_calls, link_off, link_set, unmatched
    )
    return out_rows[:n_out], out_call[:n_out], n_calls[:kept], link_off[: kept + 1], link_set[:kept], unmatched
