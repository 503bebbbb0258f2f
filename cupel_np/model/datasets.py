"""Parquet datasets: one file, a directory (hive partitions become ordinary columns), a glob
pattern or a list of files, read through ``pyarrow.dataset`` in one fixed order (the files as listed, a
directory's files sorted by path; row groups in file order). That order defines every row's
input row number, in process and on Dask alike.

Also what the streaming corpus sweep behind ``io.sweep_parquet`` decides before it reads: the
memory estimate, the chunk size and the set layout (whole item sets per chunk when each set's
rows are contiguous, ``chunks.whole_set_chunks``; otherwise the table is grouped in memory when
it fits, and the error points to ``cupel_np.dask.sweep`` when it does not).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from cupel_np._fs import RemotePath, arrow_files, arrow_location, as_path, glob_files, is_remote, translate
from cupel_np.errors import CupelError, InvalidConfigError, InvalidInputTypeError
from cupel_np.model.chunks import READ_BATCH_ROWS, conform, dataset_batches

#: The in-memory peak is estimated per input row as ``IN_MEMORY_FACTOR`` x the row's share of the
#: uncompressed Parquet bytes (the Arrow table, the encoded ItemTable, shared scoring columns, the
#: content/kind/source columns of the outputs) + ``PER_VARIANT_BYTES`` per variant (the result
#: matrices: included and reason bytes, int32 placed positions of included rows; and the items
#: output's included/score/reason/position columns per variant, built whole before writing).
#: Calibrated as peak RSS (``ru_maxrss``) on ``benchmarks/test_memory.py``'s corpus (sets of 50,
#: 46.5 uncompressed bytes a row), grids of 4 presets x 1, 4 or 16 budgets, one run each.
#: ``cupel-np sweep`` in memory (child process, report included): 1.5M rows: V = 4: 1.33 GiB,
#: V = 16: 2.00 GiB, V = 64: 5.08 GiB; 3M rows: V = 4: 2.20 GiB, V = 16: 3.77 GiB: each variant
#: adds 46-47 bytes a row (3M rows, V = 4 -> 16: +134 MiB a variant; 1.5M rows, V = 16 -> 64:
#: +65.7 MiB a variant), and the rest is ~620 bytes a row at V = 4 over a fixed ~0.4 GiB
#: (interpreter, libraries, compiled kernels: 0.37 GiB on the 200-row sample). One streamed
#: chunk (``io.sweep_parquet``, 150k rows): V = 4 / 16 / 64: peaks 468 / 553 / 912 MiB, 254 MiB
#: idle: 50-52 bytes a row per variant, 765 bytes a row at V = 4 (150k -> 250k rows) and ~105 MiB
#: fixed (``CHUNK_FIXED_BYTES``). Per variant: 52, the larger. The factor 13 folds part of the fixed
#: cost into the rows: the estimate is 0-8% over the 3M-row peaks and the 1.5M-row peaks at 16
#: and 64 variants (14%, 0.19 GiB, under the 1.5M-row, V = 4 peak) and further above the peak on
#: larger inputs (earlier, the factor alone: 5M rows, V = 4, 13.1x; Dask corpus, 10M rows, V = 8,
#: 13.8x).
IN_MEMORY_FACTOR = 13.0

#: estimated peak resident bytes per input row and variant (see ``IN_MEMORY_FACTOR``)
PER_VARIANT_BYTES = 52.0

#: resident bytes a streamed run holds whatever its chunk size (see ``IN_MEMORY_FACTOR``): set
#: aside from the memory limit before the chunk rows are sized
CHUNK_FIXED_BYTES = 128 * 2**20

#: the variant count assumed by a caller that does not give one (a few presets)
DEFAULT_VARIANTS = 4


def describe_source(source) -> str:
    if isinstance(source, (list, tuple)):
        return f"{len(source)} files ({source[0]}{', ...' if len(source) > 1 else ''})" if source else "[]"
    return str(source)


def _files_of(source) -> tuple[list[str], str | None]:
    """The Parquet files of ``source`` in input order, and the directory hive partition
    names are read relative to (None for a single file or a list given without one). Files
    on an object store are URLs (``s3://bucket/key``), listed the same way."""
    if isinstance(source, str) and any(ch in source for ch in "*?[") and not as_path(source).exists():
        files = glob_files(source)
        if not files:
            _raise_missing_bucket(source)
            raise InvalidConfigError(f"no items files match {source}")
        return _files_of(files)
    if isinstance(source, (str, os.PathLike, RemotePath)):
        p = as_path(source)
        if p.is_dir():
            if isinstance(p, RemotePath):
                found = [(str(f), f.relative_to(p).parts) for f in p.walk_files()]
            else:
                found = [(str(f), f.relative_to(p).parts) for f in p.rglob("*") if f.is_file()]
            files = sorted(f for f, parts in found if not any(part.startswith((".", "_")) for part in parts))
            if not files:
                raise InvalidConfigError(f"items directory {p} holds no Parquet files")
            return files, str(p)
        if not p.exists():
            _raise_missing_bucket(p)
            raise InvalidConfigError(f"items file not found: {p}")
        return [str(p)], None
    if isinstance(source, (list, tuple)):
        if not source:
            raise InvalidConfigError("the list of items files is empty")
        files = []
        for f in source:
            if not isinstance(f, (str, os.PathLike, RemotePath)):
                raise InvalidInputTypeError(f"items files must be paths, got {type(f).__name__} {f!r}")
            if not as_path(f).is_file():
                _raise_missing_bucket(f)
                raise InvalidConfigError(f"items file not found: {f}")
            files.append(str(f))
        return files, _common_parent(files)
    raise InvalidInputTypeError(
        f"items source must be a path, a directory or a list of paths, got {type(source).__name__}"
    )


def _raise_missing_bucket(path) -> None:
    """A URL whose bucket does not exist: say so (rather than "file not found")."""
    p = as_path(path)
    if isinstance(p, RemotePath):
        missing = p.missing_bucket()
        if missing is not None:
            raise missing


def _common_parent(files: list[str]) -> str | None:
    """The directory hive names of a list of files are read under: their common parent, when
    they lie in more than one directory."""
    if any(is_remote(f) for f in files):
        parents = {str(as_path(f).parent) for f in files}
        if len(parents) < 2:
            return None
        split = [p.split("/") for p in parents]
        common = []
        for segs in zip(*split):
            if len(set(segs)) > 1:
                break
            common.append(segs[0])
        return "/".join(common) if len(common) > 2 else None  # "s3:", "", bucket...
    parents = {str(Path(f).parent) for f in files}
    try:
        return os.path.commonpath([str(Path(f).parent) for f in files]) if len(parents) > 1 else None
    except ValueError:
        return None


def _url(fs, path: str, like: str) -> str:
    """A fragment's path as its callers named files: the URL of a remote one."""
    if fs is None:
        return path
    scheme = like.split("://", 1)[0]
    return f"{scheme}://{path}"


def dataset_source(items):
    """A command line's items argument(s) as a dataset source: one file, directory or glob
    pattern as itself, several as a list of files."""
    if isinstance(items, (list, tuple)):
        return items[0] if len(items) == 1 else list(items)
    return items


def open_dataset(source) -> ds.FileSystemDataset:
    """A ``pyarrow.dataset`` over ``source`` with one schema unified over every file (a column
    missing from some files reads as null there) plus the hive partition columns."""
    if isinstance(source, ds.Dataset):
        return source
    files, base = _files_of(source)
    fs, paths = arrow_files(files)
    schemas = []
    for f, p in zip(files, paths):
        try:
            schemas.append(pq.read_schema(p, filesystem=fs))
        except (pa.ArrowInvalid, OSError) as e:
            if fs is not None and not isinstance(e, pa.ArrowInvalid):
                raise translate(e, f) from None
            raise InvalidInputTypeError(f"cannot read Parquet file {f}: {e}") from None
    _check_unifiable(files, schemas)
    try:
        kw: dict = (
            {
                "partitioning": _hive_strings(paths, arrow_location(base)[1]),
                "partition_base_dir": arrow_location(base)[1],
            }
            if base
            else {}
        )
        if fs is not None:
            kw["filesystem"] = fs
        probe = ds.dataset(paths, format="parquet", **kw)
        schema = pa.unify_schemas(
            [*schemas, probe.partitioning.schema] if base else schemas, promote_options="permissive"
        )
        return ds.dataset(paths, format="parquet", schema=schema, **kw)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OSError) as e:
        raise InvalidInputTypeError(f"cannot read Parquet dataset {describe_source(source)}: {e}") from None


def _check_unifiable(files: list, schemas: list[pa.Schema]) -> None:
    """Files whose schemas cannot be merged: an error naming the first file that does not merge
    with the ones before it, the column and both types (Arrow's own message names no file)."""
    if len(schemas) < 2:
        return
    try:
        pa.unify_schemas(schemas, promote_options="permissive")
        return
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        pass
    acc = schemas[0]
    for f, sch in zip(files[1:], schemas[1:]):
        try:
            acc = pa.unify_schemas([acc, sch], promote_options="permissive")
        except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
            clash = [n for n in sch.names if n in acc.names and acc.field(n).type != sch.field(n).type]
            what = (
                f"column {clash[0]!r} is {sch.field(clash[0]).type} there but {acc.field(clash[0]).type} in "
                f"{files[0]}" + (" and the files before it" if len(files) > 2 else "")
                if clash
                else str(e)
            )
            raise InvalidInputTypeError(
                f"cannot merge Parquet file {f} with the other input files: {what}; fix or remove that file"
            ) from None


def fragment_paths(d: ds.FileSystemDataset, source) -> list[str]:
    """The files of a dataset's fragments as ``source`` names them (URLs on an object store)."""
    fs = d.filesystem if is_remote(_first(source)) else None
    like = _first(source)
    return [_url(fs, f.path, like) for f in d.get_fragments()]


def _first(source) -> str:
    if isinstance(source, (list, tuple)):
        return str(source[0]) if source else ""
    return str(source)


def _hive_strings(files, base: str):
    """The hive partitioning of ``files`` under ``base`` with every partition value read as a
    string, as written in the path: Arrow's type guess would read ``session=007`` and
    ``session=7`` as one integer key 7 (two item sets merged, and ``--set 007`` finding none)."""
    names: dict[str, None] = {}
    for f in files:
        rel = os.path.relpath(os.fspath(f), base)
        for seg in Path(rel).parts[:-1]:  # the directories ``key=value`` between base and file
            if "=" in seg and not seg.startswith("="):
                names.setdefault(seg.split("=", 1)[0], None)
    return ds.partitioning(pa.schema([(n, pa.string()) for n in names]), flavor="hive")


def read_table(source, columns: list[str] | None = None, filter=None) -> pa.Table:
    """Read ``source`` (file, directory, glob pattern or list of files) into one Arrow table in input order.
    ``filter`` is a ``pyarrow.compute`` expression; partition columns may appear in it."""
    d = open_dataset(source)
    if columns is not None:
        missing = [c for c in columns if c not in d.schema.names]
        if missing:
            raise InvalidConfigError(
                f"column {missing[0]!r} not found in {describe_source(source)} (columns: {', '.join(d.schema.names)})"
            )
    try:
        return d.to_table(columns=columns, filter=filter)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OSError) as e:
        raise InvalidInputTypeError(f"cannot read Parquet dataset {describe_source(source)}: {e}") from None


# ----------------------------------------------------------------------------- row sources
class RowSource:
    """Where the rows of a table read from Parquet came from, for error messages: row ``r`` of
    the table is row ``locate(r)[1]`` of file ``locate(r)[0]``. Built for nothing but errors:
    the files' row counts (and, under a filter, which rows the filter kept) are read on the
    first ``locate``. ``shifted`` and ``taken`` describe a chunk or a reordered part of the
    table (a streamed chunk, a Dask partition)."""

    def __init__(self, source, filter=None, *, rows: np.ndarray | None = None, offset: int = 0):
        self.source = source
        self.description = describe_source(source)
        self.filter = filter
        self.rows = rows
        self.offset = offset
        self._files: list[str] | None = None
        self._starts: np.ndarray | None = None
        self._kept: list[np.ndarray] | None = None

    @property
    def many_files(self) -> bool:
        """Whether rows may come from more than one file (then each row names its file)."""
        try:
            return len(self._layout()[0]) > 1
        except (CupelError, pa.ArrowException, OSError):
            return False

    def shifted(self, offset: int) -> RowSource:
        """The same source for a chunk whose first row is row ``offset`` of this table."""
        out = self._copy()
        out.offset = self.offset + int(offset)
        return out

    def taken(self, rows: np.ndarray) -> RowSource:
        """The same source for a table whose row ``r`` is row ``rows[r]`` of this one."""
        out = self._copy()
        out.rows = np.asarray(rows, dtype=np.int64)
        return out

    def locate(self, r: int) -> tuple[str, int]:
        """(file, row within that file) of row ``r``; (the source, ``r``) if the files cannot be
        read again (this runs while an error is being raised: it must not raise another)."""
        r = int(r) if self.rows is None else int(self.rows[int(r)])
        r += self.offset
        try:
            files, starts = self._layout()
        except (CupelError, pa.ArrowException, OSError):
            return self.description, r
        i = max(int(np.searchsorted(starts, r, side="right")) - 1, 0)
        local = r - int(starts[i])
        if self._kept is not None and local < len(self._kept[i]):
            local = int(self._kept[i][local])
        return files[i], local

    def _copy(self) -> RowSource:
        out = RowSource(self.source, self.filter, rows=self.rows, offset=self.offset)
        out._files, out._starts, out._kept = self._files, self._starts, self._kept
        return out

    def _layout(self) -> tuple[list[str], np.ndarray]:
        if self._files is None:
            single = isinstance(self.source, (str, os.PathLike)) and as_path(self.source).is_file()
            if self.filter is None and single:
                files, counts = [str(self.source)], [parquet_file(self.source).metadata.num_rows]
            elif self.filter is None:  # fragments are the files in input order
                d = open_dataset(self.source)
                frags = list(d.get_fragments())
                files, counts = fragment_paths(d, self.source), [f.metadata.num_rows for f in frags]
            else:
                files, counts, self._kept = self._filtered()
            self._starts = np.concatenate(([0], np.cumsum(counts)[:-1])).astype(np.int64)
            self._files = files
        assert self._starts is not None
        return self._files, self._starts

    def _filtered(self) -> tuple[list[str], list[int], list[np.ndarray]]:
        """Per file, the rows the filter kept (their row numbers in the file)."""
        d = open_dataset(self.source)
        files, counts, kept = [], [], []
        for frag, path in zip(d.get_fragments(), fragment_paths(d, self.source)):
            t = frag.to_table(schema=d.schema)
            t = t.append_column("__cupel_file_row__", pa.array(np.arange(t.num_rows, dtype=np.int64)))
            idx = t.filter(self.filter).column("__cupel_file_row__").to_numpy()
            files.append(path)
            counts.append(len(idx))
            kept.append(idx)
        return files, counts, kept


def parquet_file(path) -> pq.ParquetFile:
    """``pq.ParquetFile`` of a local path or a URL (errors of the store name the URL)."""
    fs, p = arrow_location(path)
    if fs is None:
        return pq.ParquetFile(p)
    try:
        return pq.ParquetFile(fs.open_input_file(p))
    except OSError as e:
        if isinstance(e, FileNotFoundError) or "not found" in str(e).lower() and "bucket" not in str(e).lower():
            _raise_missing_bucket(path)
            raise InvalidConfigError(f"items file not found: {path}") from None
        raise translate(e, str(path)) from None


# ----------------------------------------------------------------------------- pieces
@dataclass(frozen=True)
class Piece:
    """A run of row groups of one file: the unit a Dask partition reads. ``first_row`` is the
    input row number of its first row in the whole dataset."""

    path: str
    row_groups: tuple[int, ...]
    num_rows: int
    first_row: int


def pieces(source, npartitions: int | None = None) -> tuple[list[Piece], pa.Schema]:
    """Split a dataset into about ``npartitions`` pieces of whole row groups in input order
    (default: one per file), from the Parquet metadata alone."""
    d = open_dataset(source)
    groups: list[tuple[str, int, int]] = []
    per_file: list[int] = []
    for frag, path in zip(d.get_fragments(), fragment_paths(d, source)):
        md = frag.metadata
        per_file.append(md.num_row_groups)
        for g in range(md.num_row_groups):
            groups.append((path, g, md.row_group(g).num_rows))
    total = sum(r for _, _, r in groups)
    if npartitions is None:
        npartitions = max(1, len(per_file))
    if npartitions < 1:
        raise InvalidConfigError(f"npartitions must be at least 1, got {npartitions}")
    out: list[Piece] = []
    cur: list[int] = []
    cur_path, cur_rows, cur_bin, first = "", 0, -1, 0  # cur_path is read only once cur holds a group
    row = 0
    for path, g, r in groups:
        b = row * npartitions // max(total, 1)  # the partition this row group starts in
        if cur and (path != cur_path or b != cur_bin):
            out.append(Piece(cur_path, tuple(cur), cur_rows, first))
            cur, cur_rows = [], 0
        if not cur:
            cur_path, cur_bin, first = path, b, row
        cur.append(g)
        cur_rows += r
        row += r
    if cur:
        out.append(Piece(cur_path, tuple(cur), cur_rows, first))
    return out, d.schema


def read_piece(piece: Piece, schema: pa.Schema, partition_base: str | None = None) -> pa.Table:
    """The rows of one piece in file order, in the dataset schema (hive partition columns
    filled from the path; a column missing from this file is null)."""
    try:
        pf = parquet_file(piece.path)
        present = set(pf.schema_arrow.names)
        t = pf.read_row_groups(list(piece.row_groups), columns=[n for n in schema.names if n in present])
    except (pa.ArrowInvalid, OSError) as e:
        raise InvalidInputTypeError(f"cannot read Parquet file {piece.path}: {e}") from None
    keys = {}
    if partition_base:
        fs, path = arrow_location(piece.path)
        base = arrow_location(partition_base)[1]
        hive = _hive_strings([path], base)
        d = ds.dataset([path], format="parquet", partitioning=hive, partition_base_dir=base, filesystem=fs)
        keys = ds.get_partition_keys(next(iter(d.get_fragments())).partition_expression)
    return conform(t, schema, keys)


def partition_base(source) -> str | None:
    if isinstance(source, ds.Dataset):
        return None
    return _files_of(source)[1]


# ----------------------------------------------------------------------------- set layout
def runs_are_sets(keys: pa.Array | pa.ChunkedArray) -> bool:
    """True when every set's rows form one contiguous run (so a stream of whole sets works)."""
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    if len(keys) == 0:
        return True
    codes = pc.dictionary_encode(keys).indices.to_numpy(zero_copy_only=False)
    runs = 1 + int(np.count_nonzero(codes[1:] != codes[:-1]))
    return runs == int(codes.max()) + 1


def first_repeated_set(keys: pa.Array | pa.ChunkedArray):
    """The first set (in input order) whose rows reappear after another set's rows."""
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    enc = pc.dictionary_encode(keys)
    codes = enc.indices.to_numpy(zero_copy_only=False)
    starts = np.concatenate(([0], np.flatnonzero(codes[1:] != codes[:-1]) + 1))
    run_codes = codes[starts]
    _, first_idx = np.unique(run_codes, return_index=True)
    again = np.ones(run_codes.shape[0], dtype=bool)
    again[first_idx] = False
    if not again.any():
        return None
    return enc.dictionary[int(run_codes[np.flatnonzero(again)[0]])].as_py()


def uncompressed_bytes(d: ds.FileSystemDataset) -> int:
    """Uncompressed size of every row group of a dataset, from the Parquet metadata."""
    total = 0
    for frag in d.get_fragments():
        md = frag.metadata
        total += sum(md.row_group(g).total_byte_size for g in range(md.num_row_groups))
    return total


def available_memory() -> int:
    """Bytes this process may still allocate: MemAvailable (Linux), capped by a cgroup limit."""
    avail = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    avail = int(line.split()[1]) * 1024
                    break
    except OSError:
        pass
    try:
        raw = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if raw != "max":
            cap = int(raw) - int(Path("/sys/fs/cgroup/memory.current").read_text().strip())
            avail = cap if avail is None else min(avail, cap)
    except (OSError, ValueError):
        pass
    if avail is None:
        avail = int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES"))
    return max(0, avail)


def format_size(n: int) -> str:
    if n >= 2**30:
        return f"{n / 2**30:.1f} GiB"
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n / 2**10:.1f} KiB"


def default_memory_limit() -> int:
    """Half of the memory available now."""
    return available_memory() // 2


_UNITS = {
    "": 1,
    "B": 1,
    "K": 2**10,
    "KB": 2**10,
    "KIB": 2**10,
    "M": 2**20,
    "MB": 2**20,
    "MIB": 2**20,
    "G": 2**30,
    "GB": 2**30,
    "GIB": 2**30,
    "T": 2**40,
    "TB": 2**40,
    "TIB": 2**40,
}


def parse_size(text, what: str = "size") -> int:
    """``2G``, ``500M``, ``1.5GiB``, ``123456`` -> bytes (binary units)."""
    import re

    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?)\s*([A-Za-z]*)\s*", str(text))
    if not m or m.group(2).upper() not in _UNITS:
        raise InvalidConfigError(f"{what}: expected a size such as 2G, 500M or 1048576, got {text!r}")
    n = int(float(m.group(1)) * _UNITS[m.group(2).upper()])
    if n <= 0:
        raise InvalidConfigError(f"{what}: must be positive, got {text!r}")
    return n


def estimate_in_memory_peak(
    d: ds.FileSystemDataset, rows: int | None = None, *, n_variants: int = DEFAULT_VARIANTS
) -> int:
    """Estimated peak resident bytes of an in-memory sweep of ``n_variants`` variants over
    ``rows`` rows of ``d`` (default all of them): per row, its uncompressed Parquet bytes x
    ``IN_MEMORY_FACTOR`` + ``n_variants`` x ``PER_VARIANT_BYTES``."""
    total_rows = sum(f.metadata.num_rows for f in d.get_fragments())
    rows = total_rows if rows is None else rows
    per_row = uncompressed_bytes(d) / max(total_rows, 1) * IN_MEMORY_FACTOR + max(n_variants, 0) * PER_VARIANT_BYTES
    return int(rows * per_row)


def chunk_rows_for(
    d: ds.FileSystemDataset, limit: int, cap: int = 250_000, *, n_variants: int = DEFAULT_VARIANTS
) -> int:
    """The most rows of a streamed chunk of a sweep of ``n_variants`` variants
    (``chunks.whole_set_chunks``: whole sets, at most this many rows unless one set is longer):
    at most ``cap`` (past a quarter million rows a chunk buys no throughput, only memory:
    measured 11.9 s and 1.0 GB peak at 250k vs 13.5 s and 1.6 GB at 1M rows a chunk, 5M rows x 4
    presets), else what fits in ``limit`` less ``CHUNK_FIXED_BYTES`` by the estimate, with the
    batch read past the chunk (at most as many rows, at their uncompressed bytes) counted too;
    at least 1 (then a chunk is one set). Row groups do not matter: they are read in batches."""
    total_rows = sum(f.metadata.num_rows for f in d.get_fragments())
    raw = uncompressed_bytes(d) / max(total_rows, 1)
    per_row = max(estimate_in_memory_peak(d, 1_000_000, n_variants=n_variants) / 1_000_000 + raw, 1.0)
    fit = int((limit - CHUNK_FIXED_BYTES) // per_row)
    return int(min(cap, max(1, fit)))


def set_runs(d: ds.FileSystemDataset, set_column: str) -> tuple[pa.Array, np.ndarray]:
    """The runs of equal set keys in input order, read a batch at a time (memory in proportion
    to the number of runs, not rows): (key of each run, length of each run)."""
    keys, lengths = [], []
    last = None
    for t, _ in dataset_batches(d, READ_BATCH_ROWS, columns=[set_column]):
        col = t.column(set_column).combine_chunks()
        if len(col) == 0:
            continue
        if pa.types.is_dictionary(col.type):
            col = col.dictionary_decode()
        neq = pc.fill_null(pc.not_equal(col.slice(1), col.slice(0, len(col) - 1)), True).to_numpy(zero_copy_only=False)
        starts = np.concatenate(([0], np.flatnonzero(neq) + 1))
        lens = np.diff(np.append(starts, len(col)))
        run_keys = col.take(pa.array(starts))
        if last is not None and run_keys[0].equals(last):
            lengths[-1][-1] += int(lens[0])
            run_keys, lens = run_keys.slice(1), lens[1:]
        if len(run_keys):
            keys.append(run_keys)
            lengths.append(lens.astype(np.int64))
            last = run_keys[len(run_keys) - 1]
    if not keys:
        return pa.array([], d.schema.field(set_column).type), np.zeros(0, dtype=np.int64)
    return pa.concat_arrays(keys), np.concatenate(lengths)


def check_fits(
    d: ds.FileSystemDataset,
    set_column: str | None,
    limit: int,
    where: str,
    runs: tuple[pa.Array, np.ndarray] | None = None,
    *,
    n_variants: int = DEFAULT_VARIANTS,
) -> None:
    """Raise MemoryLimitError before anything is allocated when the largest item set (the
    whole input without a set column) is estimated to need more than ``limit`` bytes for a
    sweep of ``n_variants`` variants: such a run cannot be streamed in whole sets."""
    from cupel_np.errors import MemoryLimitError

    if set_column is None:
        rows = sum(f.metadata.num_rows for f in d.get_fragments())
        what = f"the whole input is one item set ({rows:,} rows; no set column)"
    else:
        keys, lengths = runs if runs is not None else set_runs(d, set_column)
        if lengths.size == 0:
            return
        i = int(np.argmax(lengths))
        rows = int(lengths[i])
        what = f"item set {keys[i].as_py()!r} (column {set_column!r}) has {rows:,} rows"
    need = estimate_in_memory_peak(d, rows, n_variants=n_variants)
    if need > limit:
        raise MemoryLimitError(
            f"{where}: {what}, estimated to need {format_size(need)} in memory at once for "
            f"{n_variants} variant{'' if n_variants == 1 else 's'}, over the memory limit "
            f"of {format_size(limit)}; a set is never cut, so smaller chunks cannot help; "
            "options: more memory (raise --memory-limit, a larger machine, or Dask workers with more memory "
            "each: --dask), or split it into smaller item sets (a finer set column)"
        )


#: estimated peak bytes of the report page per variant (its per-variant tables; charts are at
#: most ``report.charts.MAX_WIDE`` variants wide) and per pair of variants (the variant-by-variant
#: agreement and swing-by-category arrays; the page shows them bounded past
#: ``report.page.BOUNDED_VARIANTS``): fit to the in-memory page of 200 rows with 4 presets x 75 /
#: 250 / 500 budgets, peak RSS (``ru_maxrss``, a child process each) 585 MiB at 300 variants,
#: 700 MiB at 1,000 and 1,433 MiB at 2,000 (about 0.3 GiB of it the sweep), load average 2.4;
#: the pair term dominates, so the per-variant term is a small safety margin. Before the page was
#: bounded, 1,000 variants peaked at 4.52 GiB (its charts 0.9 inch a variant wide).
PAGE_BYTES_PER_VARIANT = 256.0 * 2**10
#: see ``PAGE_BYTES_PER_VARIANT``
PAGE_BYTES_PER_PAIR = 360.0

#: the page estimate is checked only past this many variants (below it the page is small next
#: to the rows' estimate, and the tests' tiny limits that force streaming stay usable)
PAGE_CHECK_VARIANTS = 100


def check_page_fits(n_variants: int, limit: int) -> None:
    """Raise MemoryLimitError before any work when the report page of more than
    ``PAGE_CHECK_VARIANTS`` variants (``n_variants``) is estimated (``PAGE_BYTES_PER_VARIANT``, ``PAGE_BYTES_PER_PAIR``) to need more than
    ``limit`` bytes, whatever the rows (a chunk of fewer rows cannot help)."""
    from cupel_np.errors import MemoryLimitError

    if n_variants <= PAGE_CHECK_VARIANTS:
        return
    need = int(n_variants * PAGE_BYTES_PER_VARIANT + n_variants * n_variants * PAGE_BYTES_PER_PAIR)
    if need > limit:
        raise MemoryLimitError(
            f"{n_variants:,} variants: the report page (its variant-by-variant arrays) is "
            f"estimated to need {format_size(need)} in memory, over the memory limit of {format_size(limit)}, "
            "whatever the number of rows; options: sweep fewer variants at once (split the grid or the "
            "policies file), or raise --memory-limit"
        )


def needs_streaming(
    source, limit: int, *, set_column: str | None, n_variants: int, where: str
) -> ds.FileSystemDataset | None:
    """Whether a run of ``n_variants`` variants over ``source`` must stream in chunks of whole
    sets: the opened dataset when its estimated in-memory peak is over ``limit``, else None
    (also when ``source`` does not open as a dataset: the whole-file read then says why).
    Without a set column the input is one item set, which cannot be cut: over the limit,
    ``check_fits`` raises MemoryLimitError naming the need. The one decision the sweep
    commands and ``check`` share."""
    try:
        d = open_dataset(source)
    except CupelError:
        return None
    if estimate_in_memory_peak(d, n_variants=n_variants) <= limit:
        return None
    if not set_column:
        check_fits(d, None, limit, where, n_variants=n_variants)  # raises: over the limit
    return d
