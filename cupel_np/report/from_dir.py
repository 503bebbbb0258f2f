"""The HTML report of a written sweep directory (``report.sweep_dir`` reads its layout and
per-variant aggregates), read with bounded memory: the page's sections come from streaming
``items`` in pieces of whole sets (``dir_page_data``). Nothing holds a whole output in memory."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cupel_np._fs import AnyPath, as_path
from cupel_np.analysis.compare import agreement_add, agreement_finish, agreement_start, swing_by_category_from_counts
from cupel_np.analysis.losses import check_lines_of_variants, outcome_page_data_of_table
from cupel_np.analysis.toolpairs import GROUP_COLUMN
from cupel_np.errors import InvalidConfigError
from cupel_np.io.outdir import KIND_PAGE, read_manifest, write_manifest
from cupel_np.model import datasets  # read at call time: tests replace default_memory_limit
from cupel_np.report.page import CHARTS, PAGE_FROM_OUTPUTS, PAGE_FROM_RESULT, PageData, write_page
from cupel_np.report.sweep_dir import (
    _READAHEAD,
    BATCH_ROWS,
    _dataset,
    _files,
    _metadata,
    _output,
    _schema,
    check_sweep_dir,
    load_sweep_dir,
)

#: an items file whose sets interleave is read in groups of whole sets, one filtered scan of
#: the file per group; a group holds as many rows as fit in the memory limit at this many times
#: their uncompressed Parquet bytes (the table, its per-variant NumPy columns, the kept rows),
#: at least ``BATCH_ROWS``: a file that fits is read in one scan, as before, instead of once
#: per ``BATCH_ROWS`` rows
SCATTERED_FACTOR = 4


# ----------------------------------------------------------------------------- page
def _check_page(out: AnyPath, overwrite: bool) -> None:
    """Never silently replace a page built from the in-memory result (or a page that is not
    ours) with one built from the written outputs."""
    page = out / "report.html"
    if overwrite or not page.is_file():
        return
    head = page.read_bytes()[:2000].decode("utf-8", "replace")

    if f'content="{PAGE_FROM_OUTPUTS}"' not in head:
        what = "from the in-memory result" if PAGE_FROM_RESULT in head else "by another tool or version"
        raise InvalidConfigError(
            f"{page} was written {what}; pass --overwrite (Python: overwrite=True) to replace it with the page "
            "built from the written outputs, or choose another directory"
        )


# ----------------------------------------------------------------------------- the full page
# The same PageData as report.from_result.result_page_data, computed from the written outputs: one pass over
# ``items`` in pieces of whole sets (a file's sets are contiguous when the writers streamed it;
# otherwise the file is read whole, as the in-memory run that wrote it held it), grouping the
# rows of each piece by (set, content) into content groups, then the same block arithmetic as
# the in-memory page (analysis.compare.agreement_add and friends). Bounded: per piece, plus the
# kept top rows, V x V accumulators per category, and one entry per candidate drill-down set.
_KEY = "__set__"
#: content groups per block of the V x V matrix products (their float temporaries are [block, V])
_BLOCK = 8192


def _group_columns(ipath: AnyPath, variants: list[dict]) -> list[str]:
    """The group columns the page shows (as ``report.from_result`` does): those the variants'
    policies select units by (the items output carries each), else ``tool_group`` if the
    items output has it."""
    names = _schema(_files(ipath)[0]).names
    used = []
    for v in variants:
        col = (v.get("policy") or {}).get("groups")
        if isinstance(col, str) and col in names and col not in used:
            used.append(col)
    return used or ([GROUP_COLUMN] if GROUP_COLUMN in names else [])


def _items_columns(ipath: AnyPath, labels: list[str], set_col, groups: list[str]) -> list[str]:
    names = _schema(_files(ipath)[0]).names
    missing = [c for c in ("kind", "source", "tokens") if c not in names]
    if missing:
        raise InvalidConfigError(
            f"{ipath} has no {', '.join(missing)} column(s): written by an older cupel_np; rerun the sweep to build "
            "the full page"
        )
    return ([set_col] if set_col else []) + [
        "input_row",
        "content",
        "kind",
        "source",
        "tokens",
        *groups,
        *(f"{l}.included" for l in labels),
        *(f"{l}.reason" for l in labels),
    ]


def _pieces(path: str, cols: list[str], set_col):
    """Tables of whole sets from one items file, about ``BATCH_ROWS`` rows each (a larger set
    whole): streamed when its sets are contiguous, else a filtered scan per group of sets."""
    pf = datasets.parquet_file(path)
    if set_col is None:
        yield pf.read(columns=cols)  # one set, never cut (the sweep held it whole too)
        return

    run_keys, run_lengths = datasets.set_runs(_dataset(path), set_col)  # a row group at a time
    if len(run_keys) and len(pc.unique(run_keys)) != len(run_keys):
        yield from _scattered_pieces(path, cols, set_col, run_keys, run_lengths)
        return
    del run_keys, run_lengths
    buf = None
    for b in pf.iter_batches(batch_size=BATCH_ROWS, columns=cols):
        buf = pa.Table.from_batches([b]) if buf is None else pa.concat_tables([buf, pa.Table.from_batches([b])])
        del b
        k = buf.column(set_col)
        cut = len(k) - _tail_len(k, k[len(k) - 1])
        del k
        if cut > 0:
            # the unfinished set is copied out, so that nothing here holds the batch once the
            # caller is done with the piece: one batch in memory at a time, not two
            piece, buf = buf.slice(0, cut), buf.slice(cut).take(pa.array(np.arange(buf.num_rows - cut)))
            yield piece
            del piece
    if buf is not None and buf.num_rows:
        yield buf


def _scattered_pieces(path: str, cols: list[str], set_col: str, run_keys: pa.Array, run_lengths: np.ndarray):
    """Pieces of a file whose sets interleave: the sets, in order of first appearance, cut into
    groups that fit the memory limit (``_scattered_group_rows``), each read by one filtered
    scan of the file (rows in file order): one scan when the file fits, more only when it
    does not (reading it whole then held every row of every variant at once)."""
    enc = pc.dictionary_encode(run_keys)  # the sets in order of first appearance
    sizes = np.bincount(enc.indices.to_numpy(zero_copy_only=False), weights=run_lengths, minlength=len(enc.dictionary))
    group = _scattered_group_rows(path)
    lo, rows = 0, 0
    for i, n in enumerate(sizes.astype(np.int64)):
        if rows and rows + n > group:
            yield _scan_sets(path, cols, set_col, enc.dictionary.slice(lo, i - lo))
            lo, rows = i, 0
        rows += n
    if rows:
        yield _scan_sets(path, cols, set_col, enc.dictionary.slice(lo))


def _scattered_group_rows(path: str) -> int:
    """Rows per group of sets of an interleaved items file (see ``SCATTERED_FACTOR``)."""
    md = _metadata(path)
    ub = sum(md.row_group(g).total_byte_size for g in range(md.num_row_groups))
    per_row = max(ub / max(md.num_rows, 1), 1.0)
    return max(BATCH_ROWS, int(datasets.default_memory_limit() // (SCATTERED_FACTOR * per_row)))


def _scan_sets(path: str, cols: list[str], set_col: str, keys: pa.Array) -> pa.Table:
    """The rows of the sets ``keys`` in file order, from a scan of one batch at a time."""
    scan = _dataset(path).scanner(
        columns=cols, filter=pc.field(set_col).isin(keys), batch_size=BATCH_ROWS, **_READAHEAD
    )
    return scan.to_table()


def _tail_len(keys, last) -> int:
    eq = pc.fill_null(pc.equal(keys, last), False).to_numpy(zero_copy_only=False)
    return int(len(eq) - (np.flatnonzero(~eq)[-1] + 1)) if (~eq).any() else len(eq)


class _PageAcc:
    """Accumulates the page's aggregates over pieces of whole sets. A piece's content groups
    are found with NumPy (one group id per row), and each variant's columns are reduced one
    variant at a time: Arrow's hash "first" of 2V string columns over every row of a piece
    held a C++ string per group and variant outside Arrow's memory pool, so the page's peak
    grew with the variants and, through the fragmented heap, with the pieces."""

    def __init__(self, labels, set_col, targets, max_rows: int, candidates: set, per_set_rows: int = 25, groups=()):
        self.labels, self.set_col, self.v = labels, set_col, len(labels)
        self.group_cols = list(groups)  # shown beside each row: its key at the group's first row
        self.targets = np.asarray(targets, dtype=np.float64)
        self.ag = agreement_start(self.v)
        self.cat: dict[str, dict] = {"kind": {}, "source": {}}  # name -> [swinging, groups, VxV counts]
        self.reasons: dict[str, np.ndarray] = {}
        self.kind_mix: dict[str, np.ndarray] = {}
        self.kind_first: dict[str, int] = {}  # kind -> its first input row (the page lists kinds in that order)
        self.could = np.zeros(self.v)
        self.max_rows, self.candidates, self.per_set_rows = max_rows, candidates, per_set_rows
        self.top: pa.Table | None = None
        self.set_top: dict = {}
        self.set_info: dict = {}  # candidate set -> (groups, items)

    def add(self, t: pa.Table) -> None:
        key = t.column(self.set_col) if self.set_col else pa.nulls(t.num_rows, pa.string())
        t = t.append_column(_KEY, key)
        self._rows_level(t)
        g, gid = self._groups(t)
        st, ok = self._status(t, gid, g.num_rows)
        for lo in range(0, st.shape[0], _BLOCK):  # [block, V] float temporaries, not [groups, V]
            agreement_add(self.ag, st[lo : lo + _BLOCK], ok[lo : lo + _BLOCK])
        n_in, n_ok = (st & ok).sum(1), ok.sum(1)
        sw = (n_in > 0) & (n_in < n_ok)
        self._categories(g, st, ok, sw)
        idx = np.flatnonzero(sw)
        if not idx.size:
            return
        keep = self._choose(g, idx, np.minimum(n_in, n_ok - n_in)[idx])
        reasons = self._reasons(t, gid, g.num_rows, st, ok, idx, keep)
        self._keep(g, st, ok, n_in, n_ok, idx[keep], reasons)

    def _rows_level(self, t: pa.Table) -> None:
        """Kind mix of the selected tokens, and what each set could use (min(tokens, target))."""
        tok = np.maximum(t.column("tokens").to_numpy(zero_copy_only=False).astype(np.float64), 0)
        kinds = pc.ascii_lower(t.column("kind")).combine_chunks()
        enc = pc.dictionary_encode(kinds)
        kid = enc.indices.to_numpy(zero_copy_only=False)
        names = enc.dictionary.to_pylist()
        first = np.full(len(names), np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(first, kid, t.column("input_row").to_numpy(zero_copy_only=False).astype(np.int64))
        for n, r in zip(names, first.tolist()):
            self.kind_first[n] = min(r, self.kind_first.get(n, r))
        for v, l in enumerate(self.labels):
            inc = pc.fill_null(t.column(f"{l}.included"), False).to_numpy(zero_copy_only=False)
            mix = np.bincount(kid[inc], weights=tok[inc], minlength=len(names))
            for j, n in enumerate(names):
                self.kind_mix.setdefault(n, np.zeros(self.v))[v] += mix[j]
        # the group-by addresses columns by plain position names: a label such as ".hidden" would
        # make "{label}.included" a nested field path to Arrow's aggregation
        aggs = [("tokens", "sum"), ("tokens", "count"), ("input_row", "min")]
        aggs += [(f"v{v}", "count") for v in range(len(self.labels))]
        by_pos = {f"v{v}": t.column(f"{l}.included") for v, l in enumerate(self.labels)}
        g = pa.table({_KEY: t.column(_KEY), "input_row": t.column("input_row"), **by_pos, "tokens": pa.array(tok)})
        s = g.group_by(_KEY, use_threads=False).aggregate(aggs)
        st = s["tokens_sum"].to_numpy(zero_copy_only=False)
        for v in range(len(self.labels)):
            ran = s[f"v{v}_count"].to_numpy(zero_copy_only=False) > 0
            self.could[v] += np.minimum(st, self.targets[v])[ran].sum()
        if self.candidates:
            s = s.filter(pc.is_in(s[_KEY], value_set=pa.array(list(self.candidates), s[_KEY].type)))
            rows = zip(
                s[_KEY].to_pylist(),
                s["tokens_count"].to_pylist(),
                s["input_row_min"].to_pylist(),
                s["tokens_sum"].to_pylist(),
            )
            for k, n, first, tokens in rows:
                self.set_info[k] = [0, n, first, int(tokens)]  # groups (set by _groups), items, first row, tokens

    def _groups(self, t: pa.Table) -> tuple[pa.Table, np.ndarray]:
        """The piece's content groups, (set, content) in order of first appearance: a table of
        each group's set, content, first input row and first non-null kind / source / tokens,
        and the group of each row."""
        kc = pc.dictionary_encode(t.column(_KEY).combine_chunks(), null_encoding="encode")
        cc = pc.dictionary_encode(t.column("content").combine_chunks(), null_encoding="encode")
        code = kc.indices.to_numpy(zero_copy_only=False).astype(np.int64) * max(len(cc.dictionary), 1)
        code += cc.indices.to_numpy(zero_copy_only=False)
        _, first, inverse = np.unique(code, return_index=True, return_inverse=True)
        order = np.argsort(first)
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        gid, first = rank[inverse.reshape(-1)], first[order]
        n = first.size
        irow = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(irow, gid, t.column("input_row").to_numpy(zero_copy_only=False).astype(np.int64))
        at = pa.array(first)
        g = pa.table(
            {
                _KEY: t.column(_KEY).take(at),
                "content": t.column("content").take(at),
                "input_row_min": pa.array(irow),
                **{f"{c}_first": _take_first(t.column(c), gid, n) for c in ("kind", "source", "tokens")},
                **{f"g{j}_at": t.column(c).take(at).cast(pa.string()) for j, c in enumerate(self.group_cols)},
            }
        )
        if self.set_info:
            keys = g[_KEY]
            mine = keys.filter(pc.is_in(keys, value_set=pa.array(list(self.set_info), keys.type)))
            for r in pc.value_counts(mine).to_pylist():
                self.set_info[r["values"]][0] = int(r["counts"])
        return g, gid

    def _status(self, t: pa.Table, gid: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        """[groups, V] whether some row of the group is included (st), and whether the variant
        ran on it (ok: some row's ``included`` is not null)."""
        st, ok = np.zeros((n, self.v), dtype=bool), np.zeros((n, self.v), dtype=bool)
        for v, l in enumerate(self.labels):
            col = t.column(f"{l}.included")
            valid = col.is_valid().to_numpy(zero_copy_only=False)
            inc = pc.fill_null(col, False).to_numpy(zero_copy_only=False) & valid
            ok[:, v] = np.bincount(gid[valid], minlength=n) > 0
            st[:, v] = np.bincount(gid[inc], minlength=n) > 0
        return st, ok

    def _categories(self, g, st, ok, sw) -> None:
        for which, col in (("kind", pc.ascii_lower(g["kind_first"])), ("source", g["source_first"])):
            enc = pc.dictionary_encode(col.combine_chunks())
            cid = enc.indices.to_numpy(zero_copy_only=False)
            names = enc.dictionary.to_pylist()
            groups = np.bincount(cid, minlength=len(names))
            swing = np.bincount(cid[sw], minlength=len(names))
            for j, n in enumerate(names):
                slot = self.cat[which].setdefault(n, [0, 0, np.zeros((self.v, self.v))])
                slot[0] += int(swing[j])
                slot[1] += int(groups[j])
                sel = np.flatnonzero(sw & (cid == j)) if swing[j] else np.zeros(0, np.int64)
                for lo in range(0, sel.size, _BLOCK):
                    b = sel[lo : lo + _BLOCK]
                    inc = (st[b] & ok[b]).astype(np.float64)
                    exc = (~st[b] & ok[b]).astype(np.float64)
                    m = inc.T @ exc
                    slot[2] += m + m.T

    def _choose(self, g: pa.Table, idx: np.ndarray, contest: np.ndarray) -> np.ndarray:
        """Which of the swinging groups ``idx`` can still reach the kept top rows: the piece's
        ``max_rows`` most contested (ties: first input row, then order), and its
        ``per_set_rows`` most contested of each drill-down candidate set; positions into
        ``idx``, ascending. The top of (kept rows + these) is the top of (kept rows + all)."""
        first = g["input_row_min"].to_numpy(zero_copy_only=False)[idx]
        order = np.lexsort((first, -contest))
        keep = [order[: self.max_rows]]
        if self.candidates:
            keys = g[_KEY].take(pa.array(idx)).combine_chunks()
            mine = pc.is_in(keys, value_set=pa.array(list(self.candidates), keys.type))
            if pc.any(mine).as_py():
                code = pc.dictionary_encode(keys, null_encoding="encode").indices.to_numpy(zero_copy_only=False)
                in_set = mine.to_numpy(zero_copy_only=False)
                for c in np.unique(code[in_set]):
                    keep.append(order[code[order] == c][: self.per_set_rows])
        return np.unique(np.concatenate(keep))

    def _reasons(self, t, gid, n, st, ok, idx, keep) -> list[pa.Array]:
        """Count each variant's reasons over the swinging groups it excluded (a group's reason is
        its first row's non-null one), one variant at a time; return the reasons of the kept
        groups ``idx[keep]``, per variant."""
        out = []
        for v, l in enumerate(self.labels):
            s, o = st[idx, v], ok[idx, v]
            self.reasons.setdefault("Included", np.zeros(self.v, np.int64))[v] += int((s & o).sum())
            self.reasons.setdefault("failed", np.zeros(self.v, np.int64))[v] += int((~o).sum())
            col = t.column(f"{l}.reason")
            at = _first_valid(gid, col.is_valid().to_numpy(zero_copy_only=False), n)[idx]
            excl = at[~s & o]
            r = pc.fill_null(col.take(pa.array(excl, mask=excl < 0)), "Excluded")
            for x in pc.value_counts(r).to_pylist():
                self.reasons.setdefault(str(x["values"]), np.zeros(self.v, np.int64))[v] += int(x["counts"])
            mine = at[keep]
            out.append(col.take(pa.array(mine, mask=mine < 0)))
        return out

    def _keep(self, g, st, ok, n_in, n_ok, idx, reasons: list) -> None:
        """Merge the chosen swinging groups ``idx`` into the most contested rows kept, overall
        and per candidate set (ties: first input row)."""
        at = pa.array(idx)
        cols = {
            "set": g[_KEY].take(at),
            "content": g["content"].take(at),
            "kind": g["kind_first"].take(at),
            "source": g["source_first"].take(at),
            "tokens": g["tokens_first"].take(at),
            "first": g["input_row_min"].take(at),
            "contest": pa.array(np.minimum(n_in, n_ok - n_in)[idx].astype(np.int64)),
            "n_in": pa.array(n_in[idx].astype(np.int64)),
            "n_valid": pa.array(n_ok[idx].astype(np.int64)),
            **{f"g{j}": g[f"g{j}_at"].take(at) for j in range(len(self.group_cols))},
        }
        for v, reason in enumerate(reasons):
            status = np.full(idx.size, None, dtype=object)
            status[st[idx, v]] = "Included"
            status[~ok[idx, v]] = "failed"
            cols[f"s{v}"] = pc.coalesce(pa.array(status, pa.string()), reason, pa.scalar("Excluded"))
            cols[f"r{v}"] = reason
        t = pa.table(cols)
        self.top = _best(t if self.top is None else pa.concat_tables([self.top, t]), self.max_rows)
        if self.candidates:
            mine = pc.is_in(t["set"], pa.array(list(self.candidates), t["set"].type))
            for k in set(t.filter(mine)["set"].to_pylist()):
                part = t.filter(pc.is_null(t["set"]) if k is None else pc.equal(t["set"], k))
                prev = self.set_top.get(k)
                self.set_top[k] = _best(part if prev is None else pa.concat_tables([prev, part]), self.per_set_rows)


def _first_valid(gid: np.ndarray, valid: np.ndarray, n: int) -> np.ndarray:
    """Per group (of ``n``), the first row whose value is valid, or -1 (Arrow's hash "first",
    which skips nulls)."""
    rows = np.flatnonzero(valid)
    out = np.full(n, -1, dtype=np.int64)
    u, i = np.unique(gid[rows], return_index=True)
    out[u] = rows[i]
    return out


def _take_first(col, gid: np.ndarray, n: int):
    """``col``'s first non-null value per group (null when the group has none)."""
    at = _first_valid(gid, col.is_valid().to_numpy(zero_copy_only=False), n)
    return col.take(pa.array(at, mask=at < 0))


def _best(t: pa.Table, k: int) -> pa.Table:
    return t.sort_by([("contest", "descending"), ("first", "ascending")]).slice(0, k)


def _set_stats(vpath: AnyPath, ipath: AnyPath, labels: list[str], set_col, max_sets: int) -> tuple[dict, set]:
    """Per set (from ``variants``): swinging contents; the drill-down sets: the ``max_sets``
    with the most, ties broken by the set's first input row (as the in-memory page does), so
    at most ``max_sets`` sets are followed however many tie."""
    col = set_col or "set"
    t = _dataset(_files(vpath)).to_table(columns=[col, "swing_count"], filter=pc.field("variant") == labels[0])
    counts = dict(zip(t[col].to_pylist(), t["swing_count"].to_pylist()))
    pos = sorted((n for n in counts.values() if n), reverse=True)
    if not pos:
        return counts, set()
    floor = pos[min(max_sets, len(pos)) - 1]
    above = {k for k, n in counts.items() if n > floor}
    tied = [k for k, n in counts.items() if n == floor]
    need = max_sets - len(above)
    if len(tied) > need:  # the first input row decides among the tied sets
        first = _first_rows(ipath, set_col, tied)
        tied = sorted(tied, key=lambda k: first[k])[:need]
    return counts, above | set(tied)


def _first_rows(ipath: AnyPath, set_col, keys: list) -> dict:
    """Each of ``keys``'s first input row, from one streamed scan of two ``items`` columns."""
    first: dict = {}
    flt = pc.field(set_col).isin(pa.array(keys))
    for b in _dataset(_files(ipath)).to_batches(
        columns=[set_col, "input_row"], filter=flt, batch_size=BATCH_ROWS, **_READAHEAD
    ):
        g = pa.table(b).group_by(set_col).aggregate([("input_row", "min")])
        for k, r in zip(g[set_col].to_pylist(), g["input_row_min"].to_pylist()):
            first[k] = min(r, first.get(k, r))
    return first


def _per_variant(vpath: AnyPath, labels: list[str], set_col, keys: list) -> dict:
    col = set_col or "set"
    flt = pc.field(col).isin(pa.array(keys)) if set_col else None
    t = _dataset(_files(vpath)).to_table(
        columns=["variant", col, "included_count", "tokens_used", "target_tokens", "swing_included", "error"],
        filter=flt,
    )
    out: dict = {}
    for r in t.to_pylist():
        out.setdefault(r[col], {})[r["variant"]] = {
            "error": r["error"],
            "included": int(r["included_count"] or 0),
            "tokens": int(r["tokens_used"] or 0),
            "target": int(r["target_tokens"]),
            "swing_included": int(r["swing_included"] or 0),
        }
    return out


def _ranks(ipath: AnyPath, labels: list[str], set_col, rows: list[dict]) -> None:
    """Each shown row's score rank in its set per variant (1 + rows scored strictly higher),
    from a filtered scan of ``items``; None where the variant failed."""
    if not rows:
        return
    keys = sorted({r["set"] for r in rows}, key=str)
    cols = ([set_col] if set_col else []) + ["input_row", *(f"{l}.score" for l in labels)]
    flt = pc.field(set_col).isin(pa.array(keys)) if set_col else None
    scan = _dataset(_files(ipath)).scanner(
        columns=cols, filter=flt, batch_size=BATCH_ROWS, **_READAHEAD
    )  # a batch of every score column at a time, not the default read-ahead of 16 batches from 4 files
    t = scan.to_table()
    key_col = t[set_col].to_pylist() if set_col else [None] * t.num_rows
    by_set: dict = {}
    for i, k in enumerate(key_col):
        by_set.setdefault(k, []).append(i)
    irow = t["input_row"].to_numpy(zero_copy_only=False)
    where = {int(irow[i]): i for i in range(len(irow))}  # input row -> row of t (the same for every variant)
    for v, l in enumerate(labels):
        sc = t[f"{l}.score"].to_numpy(zero_copy_only=False).astype(np.float64)
        srt = {k: np.sort(sc[ix]) for k, ix in by_set.items()}
        for r in rows:
            if r["status"][v] == "failed":
                r["rank"][v] = None
                continue
            s = srt[r["set"]]
            mine = sc[where[r["first"]]]
            r["rank"][v] = int(1 + len(s) - np.searchsorted(s, mine, side="right"))


def _row_dicts(t: pa.Table | None, v: int, n_groups: int = 0) -> list[dict]:
    if t is None:
        return []
    out = []
    for r in t.to_pylist():
        out.append(
            {
                "set": r["set"],
                "content": r["content"],
                "kind": r["kind"],
                "source": r["source"],
                "tokens": int(r["tokens"]),
                "group_keys": [r[f"g{j}"] for j in range(n_groups)],
                "n_in": int(r["n_in"]),
                "n_valid": int(r["n_valid"]),
                "first": int(r["first"]),
                "status": [r[f"s{i}"] for i in range(v)],
                "reason": [r[f"r{i}"] or "" for i in range(v)],
                "rank": [None] * v,
            }
        )
    return out


def _drill(acc: _PageAcc, counts: dict, vpath, labels, set_col, ipath, max_sets: int) -> list[dict]:
    """The drill-down sets: most swinging contents first, ties by the set's first input row."""
    keys = sorted(acc.set_top, key=lambda k: (-counts.get(k, 0), acc.set_info[k][2]))[:max_sets]
    per_variant = _per_variant(vpath, labels, set_col, keys) if keys else {}
    out = []
    for k in keys:
        rows = _row_dicts(acc.set_top[k], len(labels), len(acc.group_cols))
        _ranks(ipath, labels, set_col, rows)
        groups, items, _, set_tokens = acc.set_info[k]
        out.append(
            {
                "key": k,
                "swing": int(counts.get(k, 0)),
                "groups": groups,
                "items": items,
                "set_tokens": set_tokens,
                "per_variant": [per_variant.get(k, {}).get(l) for l in labels],
                "rows": rows,
            }
        )
    return out


def dir_page_data(out_dir, *, title: str | None = None, max_rows: int = 200, max_sets: int = 5, top_k: int = 40):
    """Everything the sweep page shows (``report.page.PageData``), from the outputs written in
    ``out_dir`` by any writer (in-process, streamed or Dask), with bounded memory."""
    out = as_path(out_dir)
    s = load_sweep_dir(out)
    vpath, ipath = _output(out, "variants"), _output(out, "items")
    labels, set_col = s.labels, s.set_column
    groups = _group_columns(ipath, s.variants)
    cols = _items_columns(ipath, labels, set_col, groups)
    counts, candidates = _set_stats(vpath, ipath, labels, set_col, max_sets)
    targets = [int((v.get("budget") or {}).get("target_tokens", 0)) for v in s.variants]
    acc = _PageAcc(labels, set_col, targets, max(max_rows, top_k), candidates, groups=groups)
    for f in _files(ipath):
        for piece in _pieces(f, cols, set_col):
            acc.add(piece)
            del piece  # before the next piece is read
    rows = _row_dicts(acc.top, len(labels), len(groups))
    _ranks(ipath, labels, set_col, rows)
    keys = ["Included"] + sorted(k for k in acc.reasons if k not in ("Included", "failed")) + ["failed"]
    zero = np.zeros(len(labels), np.int64)
    kinds = sorted(acc.kind_mix, key=acc.kind_first.__getitem__)
    d = PageData(
        title=title or f"cupel_np sweep: {out.resolve().name}",
        generator=PAGE_FROM_OUTPUTS,
        set_name=set_col or "set",
        has_sets=bool(set_col),
        n_items=s.rows,
        n_sets=s.sets,
        n_swing=s.swing,
        labels=labels,
        variants=s.variants,
        failed_sets=s.failed,
        failure_example=s.failure_example,
        ag=agreement_finish(acc.ag),
        by_kind=swing_by_category_from_counts(acc.cat["kind"], len(labels)),
        by_source=swing_by_category_from_counts(acc.cat["source"], len(labels)),
        reason_keys=keys,
        reason_totals=np.stack([acc.reasons.get(k, zero) for k in keys], axis=1),
        rows=rows,
        sets=_drill(acc, counts, vpath, labels, set_col, ipath, max_sets),
        used=s.tokens.astype(np.float64),
        target=s.target.astype(np.float64),
        could=acc.could,
        kind_names=kinds,
        kind_mix=np.stack([acc.kind_mix[k] for k in kinds], axis=1) if kinds else np.zeros((len(labels), 0)),
        heat_rows=top_k,
        orphans=s.orphans,
        group_columns=groups,
    )
    _signals(d, out, vpath, labels)
    return d


def _signals(d, out: AnyPath, vpath: AnyPath, labels: list[str]) -> None:
    """The checks from the variants table's signal columns and, when the run wrote
    ``outcomes.parquet`` (labels), the outcomes section."""
    vcols = [c for c in ("variant", "constant_scorers", "knapsack_flag", "selected_nothing")]
    names = _schema(_files(vpath)[0]).names
    if all(c in names for c in vcols):
        vt = _dataset(_files(vpath)).to_table(columns=[names[0], names[1], *vcols[1:]])
        d.checks = check_lines_of_variants(vt)
    opath = out / "outcomes.parquet"
    if opath.is_file() or (out / "outcomes").is_dir():
        files = [opath] if opath.is_file() else sorted((out / "outcomes").glob("*.parquet"))
        table = _dataset([str(f) for f in files]).to_table()
        if "set_first_row" in table.column_names:  # Dask parts: the in-process set order
            table = table.sort_by("set_first_row")
        m = read_manifest(out) or {}
        d.outcomes = outcome_page_data_of_table(table, labels, str(m.get("label_column") or "the labels"))


#: the older name of ``dir_page_data`` (kept for code written against it)
page_data = dir_page_data


def write_dir_report(
    out_dir, *, title: str | None = None, top_k: int = 200, overwrite: bool = False, max_sets: int = 5
) -> AnyPath:
    """Write ``report.html`` (the same sections and charts as ``write_html_report``'s page;
    SVG charts embedded and beside it) for the sweep written in ``out_dir``: ``top_k`` swinging
    items in the table (the heatmap shows up to 40 of them). A directory holding more than one
    run's outputs is refused, and so is replacing a page built from the in-memory result,
    unless ``overwrite=True``."""
    out = as_path(out_dir)
    if top_k < 0:
        raise InvalidConfigError(f"top_k must be at least 0, got {top_k}")
    check_sweep_dir(out)
    _check_page(out, overwrite)
    pa.default_memory_pool().release_unused()  # what a sweep run just before in this process freed
    d = dir_page_data(out, title=title, max_rows=top_k, max_sets=max_sets, top_k=min(40, top_k))
    # the Arrow memory the scans freed goes back to the system before the charts are drawn
    # (with NumPy, outside Arrow's pool): kept by the pool, it added to their peak
    pa.default_memory_pool().release_unused()
    path = write_page(d, out)
    m = read_manifest(out) or {}
    if m.get("run_id"):
        write_manifest(out, KIND_PAGE, m["run_id"], [path.name, *CHARTS])
    return path
