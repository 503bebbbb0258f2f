"""Generic message files: JSONL / CSV / TSV / Parquet, one message a line or row, columns named
by a mapping (``content=text,kind=role,set=conv``; targets ``MAP_TARGETS``). Every column the
mapping does not use is kept as a column of the items table, typed as read (Parquet: its type;
JSONL: what JSON gives, strings where values of one column mix types; CSV/TSV: strings)."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from cupel_np._fs import arrow_location
from cupel_np.errors import InvalidConfigError
from cupel_np.io.importers.core import (
    ITEM_COLUMNS,
    ROLE_KINDS,
    Bad,
    BadRecord,
    BadTranscriptError,
    Conversation,
    Part,
    Reader,
    blank,
    check_not_all_bad,
    count,
    file_size,
    json_lines,
    parse_ts,
    raise_first_bad,
    role_part,
    text_of,
)
from cupel_np.model.datasets import parquet_file

MAP_TARGETS = ("content", "kind", "set", "timestamp", "source", "tokens", "pinned", "id")


def parse_mapping(spec) -> dict[str, str]:
    """``"content=text,kind=role"`` (or a dict) -> {target: column}; targets in MAP_TARGETS."""
    if spec is None:
        return {}
    if isinstance(spec, dict):
        pairs = list(spec.items())
    else:
        pairs = []
        for piece in str(spec).split(","):
            if not piece.strip():
                continue
            k, sep, v = piece.partition("=")
            if not sep or not k.strip() or not v.strip():
                raise InvalidConfigError(f"mapping entry {piece!r}: expected TARGET=COLUMN")
            pairs.append((k.strip(), v.strip()))
    out = {}
    for k, v in pairs:
        k = "kind" if k == "role" else k
        if k not in MAP_TARGETS:
            raise InvalidConfigError(f"mapping target {k!r}: expected one of {', '.join(MAP_TARGETS)}")
        out[k] = v
    return out


def _rows(path: Path) -> Iterator[tuple[int, str, Any]]:
    """(line or row number, unit, record) of a JSONL / CSV / TSV / Parquet messages file; a
    JSON line that does not parse is yielded as a :class:`Bad`."""
    suf = path.suffix.lower()
    if suf == ".parquet":
        r = 0
        for batch in parquet_file(path).iter_batches(batch_size=65536):
            for rec in batch.to_pylist():
                yield r, "row", rec
                r += 1
    elif suf in (".csv", ".tsv"):
        with path.open(newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f, delimiter="\t" if suf == ".tsv" else ",")
            start = 2
            for rec in reader:
                yield start, "line", rec
                start = reader.line_num + 1
    elif suf in (".jsonl", ".json", ".ndjson"):
        for n, rec in json_lines(path):
            yield n, "line", rec
    else:
        raise InvalidConfigError(
            f"{path}: messages files must be .jsonl, .csv, .tsv or .parquet, got {suf or 'no suffix'!r}"
        )


def _column_names(path: Path) -> list[str] | None:
    suf = path.suffix.lower()
    if suf == ".parquet":
        import pyarrow.parquet as pq

        fs, where = arrow_location(path)
        return pq.read_schema(where, filesystem=fs).names
    if suf in (".csv", ".tsv"):
        with path.open(newline="", encoding="utf-8") as f:
            return next(csv.reader(f, delimiter="\t" if suf == ".tsv" else ","), [])
    return None


def _check_mapped_columns(path: Path, mapping: dict) -> None:
    """A file-level problem, whatever ``skip_bad`` says: a column named in the mapping that a
    CSV / TSV / Parquet messages file does not have (every row would be bad)."""
    names = _column_names(path)
    if not mapping or names is None:
        return
    missing = [f"{t}={c}" for t, c in mapping.items() if c not in names]
    if missing:
        raise BadTranscriptError(
            f"{path}: the mapping names column(s) the file does not have: {', '.join(missing)} "
            f"(columns: {', '.join(names) or 'none'})"
        )


def _columns(mapping: dict, rec: dict) -> dict[str, str]:
    col = {t: mapping.get(t, t) for t in MAP_TARGETS}
    if "kind" not in mapping and "kind" not in rec and "role" in rec:
        col["kind"] = "role"
    if "set" not in mapping and "set" not in rec and "conversation_id" in rec:
        col["set"] = "conversation_id"
    return col


def _tokens(rec: dict, col: dict, mapping: dict):
    tokens = rec.get(col["tokens"]) if "tokens" in mapping or "tokens" in rec else None
    if tokens is None or tokens == "":
        return None
    if isinstance(tokens, str):
        try:
            tokens = int(tokens.strip())
        except ValueError:
            raise Bad(f"column {col['tokens']!r}: tokens must be an integer, got {tokens!r}") from None
    if isinstance(tokens, bool) or not isinstance(tokens, int):
        raise Bad(f"column {col['tokens']!r}: tokens must be an integer, got {tokens!r}")
    return tokens


def _kind(rec: dict, col: dict) -> tuple[str, str, bool, str | None]:
    kind_v = rec.get(col["kind"])
    kind, source, pinned, role = "Message", "Chat", False, None
    if kind_v is not None and not (isinstance(kind_v, str) and kind_v == ""):
        if not isinstance(kind_v, str) or blank(kind_v):
            raise Bad(f"column {col['kind']!r}: kind/role must be a non-blank string, got {kind_v!r}")
        if kind_v.strip().lower() in ROLE_KINDS:
            kind, source, pinned, role = role_part(kind_v, col["kind"])
        else:
            kind = kind_v
    src = rec.get(col["source"])
    if src is not None and src != "":
        if not isinstance(src, str) or blank(src):
            raise Bad(f"column {col['source']!r}: source must be a non-blank string, got {src!r}")
        source = src
    pin = rec.get(col["pinned"])
    if pin is not None and pin != "":
        if isinstance(pin, str) and pin.strip().lower() in ("true", "1", "yes", "false", "0", "no"):
            pin = pin.strip().lower() in ("true", "1", "yes")
        if not isinstance(pin, bool):
            raise Bad(f"column {col['pinned']!r}: pinned must be true/false, got {pin!r}")
        pinned = pin
    return kind, source, pinned, role


def message_row(rec, mapping: dict, default_set: str, skipped: dict) -> tuple[str, list[Part], set[str]]:
    """(set key, parts, the columns the mapping used) of one row."""
    if not isinstance(rec, dict):
        raise Bad(f"expected an object, got {type(rec).__name__}")
    col = _columns(mapping, rec)
    used = set(col.values())
    if col["content"] not in rec:
        raise Bad(f"no content column {col['content']!r} (map it with content=COLUMN)")
    text = rec[col["content"]]
    if text is None or (isinstance(text, str) and blank(text)):
        count(skipped, "empty content")
        return default_set, [], used
    if not isinstance(text, str):
        text = text_of(text, col["content"], skipped)
    kind, source, pinned, role = _kind(rec, col)
    tokens = _tokens(rec, col, mapping)
    ts_v = rec.get(col["timestamp"])
    ts = parse_ts(ts_v if ts_v != "" else None, f"column {col['timestamp']!r}")
    sid = rec.get(col["set"])
    sid = default_set if sid is None or sid == "" else str(sid)
    mid = rec.get(col["id"])
    part = Part(text, kind, source, pinned, role or "", ts, None if mid in (None, "") else str(mid))
    part.tokens = tokens
    return sid, [part], used


def _extra_type(name: str, values: list, parquet_types: dict) -> tuple[pa.DataType, list]:
    if name in parquet_types:
        return parquet_types[name], values
    try:
        arr = pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):  # mixed types; an int beyond 64 bits
        return pa.string(), [_as_string(v) for v in values]
    return (pa.string() if pa.types.is_null(arr.type) else arr.type), values


#: a streamed import of messages files larger than this (bytes, all files together) keeps the
#: rows in a local temp file, not in memory (see :class:`_Spill`); smaller inputs are held
SPILL_BYTES = 32 << 20
#: rows (content characters, plus ``_ROW_COST`` a row) held before they are sorted and written
#: to the temp file as a run
SPILL_RUN_CHARS = 8 << 20
_ROW_COST = 256
#: rows in one pickled piece of a run (what the merge holds per run)
_PIECE_ROWS = 512

_INT64 = (-(1 << 63), (1 << 63) - 1)
_SIMPLE = {str: pa.string(), bool: pa.bool_(), int: pa.int64(), float: pa.float64()}


class NotContiguous(Exception):  # noqa: N818 - a signal to the driver, never seen by a caller
    """Raised by :func:`read`'s contiguous reading when a set's rows turn out not to be
    together (or the extra columns not as the headers said): ``import_to_parquet`` drops what it
    wrote and reads again, spilling the rows."""


def read(
    files: list[tuple[Path, str]],
    reader: Reader,
    *,
    skip_bad: bool,
    mapping: dict,
    set_column: str,
    streamed: bool = False,
    contiguous: bool = False,
) -> tuple[Iterable[Conversation], list[tuple[str, pa.DataType]]]:
    """The conversations (in the order of their first row; each set's rows in the order read),
    and the extra columns (name, type) every part's ``row`` holds. A streamed import of inputs
    over ``SPILL_BYTES`` does not hold the rows: with ``contiguous`` and CSV / TSV / Parquet
    files (whose extra columns' types the headers tell: strings, the Parquet types), the sets
    are handed on one at a time as read, and :class:`NotContiguous` is raised if a set comes
    back after another began; otherwise the rows go to a local temp file as they are read and
    the conversations are handed out of it one at a time (:class:`_Spill`). Both give the
    conversations, in the order, of the held path; otherwise every row is held."""
    large = streamed and sum(file_size(p) for p, _ in files) > SPILL_BYTES
    if large and contiguous and all(p.suffix.lower() in (".csv", ".tsv", ".parquet") for p, _ in files):
        return _contiguous(files, reader, skip_bad=skip_bad, mapping=mapping, set_column=set_column)
    spill = _Spill() if large else None
    convs: dict[str, Conversation] = {}
    extras: dict[str, None] = {}
    parquet_types: dict[str, pa.DataType] = {}
    reserved = {set_column, *ITEM_COLUMNS}
    try:
        for path, name in files:
            for sid, pt in _file_parts(path, name, reader, mapping, reserved, extras, skip_bad, parquet_types):
                if spill is not None:
                    spill.add(sid, pt)
                else:
                    convs.setdefault(sid, Conversation(sid)).parts.append(pt)
        if spill is not None:
            spill.finish()
            columns = spill.column_types(list(extras), parquet_types)
            return spill.conversations(), columns
    except BaseException:
        if spill is not None:
            spill.close()
        raise
    columns = []
    all_parts = [pt for c in convs.values() for pt in c.parts]
    for k in extras:
        typ, vals = _extra_type(k, [(pt.row or {}).get(k) for pt in all_parts], parquet_types)
        for pt, v in zip(all_parts, vals):
            if pt.row is not None:
                pt.row[k] = v
        columns.append((k, typ))
    return list(convs.values()), columns


def _file_parts(
    path, name: str, reader: Reader, mapping: dict, reserved: set, extras: dict, skip_bad: bool, parquet_types=None
) -> Iterator[tuple[str, Part]]:
    """One file's parts with their set keys, in row order, for both reading paths: each part
    carries its row's extra columns (their names added to ``extras`` in the order first
    seen), a bad row is recorded in ``reader``; once the file is read, a file none of whose
    rows could be read, or (without ``skip_bad``) any bad row, raises. ``parquet_types``, when
    given, gets a Parquet file's column types (read after the mapped columns are checked)."""
    _check_mapped_columns(path, mapping)
    if parquet_types is not None and path.suffix.lower() == ".parquet":
        import pyarrow.parquet as pq

        for f in pq.read_schema(path):
            parquet_types.setdefault(f.name, f.type)
    file_records, since = 0, len(reader.bad)
    for n, unit, rec in _rows(path):
        reader.lines += 1
        file_records += 1
        local: dict[str, int] = {}
        try:
            if isinstance(rec, Bad):
                raise rec
            sid, parts, used = message_row(rec, mapping, path.stem, local)
        except Bad as e:
            reader.bad.append(BadRecord(name, n, str(e), unit))
            continue
        for r, c in local.items():
            reader.skip(r, c)
        row = {k: v for k, v in rec.items() if k not in used and k not in reserved}
        for k in row:
            extras.setdefault(k)
        for pt in parts:
            pt.file, pt.line, pt.unit, pt.row = name, n, unit, row
            yield sid, pt
    check_not_all_bad("messages", name, file_records, reader.bad[since:])
    raise_first_bad(reader.bad, since, skip_bad)


def _header_columns(files, mapping: dict, set_column: str) -> tuple[list[tuple[str, pa.DataType]], dict]:
    """The extra columns the held path would find, from the files' headers / schemas (in the
    order first seen), with their types (CSV / TSV: strings; Parquet: its types)."""
    import pyarrow.parquet as pq

    extras: dict[str, None] = {}
    parquet_types: dict[str, pa.DataType] = {}
    reserved = set(ITEM_COLUMNS) | {set_column}
    for path, _ in files:
        if path.suffix.lower() == ".parquet":
            fs, where = arrow_location(path)
            schema = pq.read_schema(where, filesystem=fs)
            names = schema.names
            for f in schema:
                parquet_types.setdefault(f.name, f.type)
        else:
            names = _column_names(path) or []
        used = set(_columns(mapping, dict.fromkeys(names)).values())
        for k in names:
            if k not in used and k not in reserved:
                extras.setdefault(k)
    return [(k, parquet_types.get(k, pa.string())) for k in extras], parquet_types


def _contiguous(
    files, reader: Reader, *, skip_bad: bool, mapping: dict, set_column: str
) -> tuple[Iterator[Conversation], list[tuple[str, pa.DataType]]]:
    """Sets handed on as read, for CSV / TSV / Parquet files whose sets are contiguous (see
    :func:`read`); the extra columns come from the headers, and the ones the rows show are
    checked against them at the end (a mismatch raises :class:`NotContiguous` too)."""
    columns, _ = _header_columns(files, mapping, set_column)
    reserved = {set_column, *ITEM_COLUMNS}

    def conversations() -> Iterator[Conversation]:
        done: set[str] = set()
        extras: dict[str, None] = {}
        current: Conversation | None = None
        for path, name in files:
            for sid, pt in _file_parts(path, name, reader, mapping, reserved, extras, skip_bad):
                if current is None or current.key != sid:
                    if sid in done:
                        raise NotContiguous(sid)
                    if current is not None:
                        done.add(current.key)
                        yield current
                    current = Conversation(sid)
                current.parts.append(pt)
        if list(extras) != [k for k, _ in columns]:
            raise NotContiguous("the rows' columns are not the headers'")
        if current is not None:
            yield current

    return conversations(), columns


def _as_string(v):
    """A value of an extra column whose values mix types (see ``_extra_type``)."""
    return v if v is None or isinstance(v, str) else json.dumps(v, ensure_ascii=False)


class _Spill:
    """The rows of a large messages input, in a local unnamed temp file, handed out again
    conversation by conversation in the order the held path gives (sets by first row, each
    set's rows as read): an external merge sort. Rows are held up to ``SPILL_RUN_CHARS``,
    stably sorted by their set's first-seen number and written as a run of pickled pieces (at
    most ``_PIECE_ROWS`` rows of one set each); the conversations are a merge of the runs on
    (set number, run), so memory holds one run while reading, and one piece per run plus the
    conversation being built while writing. The set keys and, per extra column, the Python
    types seen are kept: a column of one type (str, bool, int64-range int or float, or none)
    has the type ``pyarrow`` infers for it whatever the order; for any other column its values
    are gathered in the output order (one column) and typed as the held path types them."""

    def __init__(self) -> None:
        import tempfile

        self.f = tempfile.TemporaryFile(prefix="cupel-spill-")
        self.keys: list[str] = []
        self.number: dict[str, int] = {}
        self.held: list[tuple] = []
        self.size = 0
        self.runs: list[tuple[int, int]] = []  # (start, end) byte offsets of each run
        self.types: dict[str, set] = {}
        self.convert: dict[str, bool] = {}

    def add(self, sid: str, pt: Part) -> None:
        i = self.number.get(sid)
        if i is None:
            i = self.number[sid] = len(self.keys)
            self.keys.append(sid)
        row = pt.row or {}
        for k, v in row.items():
            if v is not None:
                t = type(v)
                if t is int and not _INT64[0] <= v <= _INT64[1]:
                    t = object  # outside int64: not one simple type
                seen = self.types.get(k)
                if seen is None:
                    self.types[k] = {t}
                elif t not in seen:
                    seen.add(t)
        self.held.append(
            (i, pt.content, pt.kind, pt.source, pt.pinned, pt.role, pt.timestamp, pt.id, pt.tokens, pt.file, pt.line,
             pt.unit, row)
        )  # fmt: skip
        self.size += len(pt.content) + _ROW_COST
        if self.size >= SPILL_RUN_CHARS:
            self._write_run()

    def _write_run(self) -> None:
        import pickle

        if not self.held:
            return
        self.held.sort(key=lambda r: r[0])  # stable: each set's rows stay in the order read
        start = self.f.seek(0, 2)
        held, piece = self.held, []
        for j, r in enumerate(held):
            piece.append(r)
            if len(piece) >= _PIECE_ROWS or j + 1 == len(held) or held[j + 1][0] != r[0]:
                pickle.dump((r[0], piece), self.f, protocol=pickle.HIGHEST_PROTOCOL)
                piece = []
        self.runs.append((start, self.f.tell()))
        self.held, self.size = [], 0

    def finish(self) -> None:
        self._write_run()
        self.f.flush()

    def _pieces(self, run: int) -> Iterator[tuple[int, int, list]]:
        import pickle

        at, end = self.runs[run]
        f = self.f
        while at < end:
            f.seek(at)
            number, piece = pickle.load(f)
            at = f.tell()
            yield number, run, piece

    def _merged(self) -> Iterator[tuple[int, list[tuple]]]:
        """(set number, its rows) of each set, in order."""
        import heapq

        runs = [self._pieces(r) for r in range(len(self.runs))]
        current, rows = -1, []  # type: ignore[var-annotated]
        for number, _, piece in heapq.merge(*runs, key=lambda x: (x[0], x[1])):
            if number != current:
                if rows:
                    yield current, rows
                current, rows = number, []
            rows.extend(piece)
        if rows:
            yield current, rows

    def column_types(self, names, parquet_types: dict) -> list[tuple[str, pa.DataType]]:
        """Each extra column's type, as the held path's ``_extra_type`` gives it: from the types
        seen while reading where they decide it, else from the column's values, which one pass
        over the spilled rows collects for every such column together."""
        out: dict[str, pa.DataType] = {}
        mixed = []
        for k in names:
            seen = self.types.get(k, set())
            if k in parquet_types:
                out[k] = parquet_types[k]
            elif not seen:
                out[k] = pa.string()  # every value None: a null column, written as strings
            elif len(seen) == 1 and next(iter(seen)) in _SIMPLE:
                out[k] = _SIMPLE[next(iter(seen))]
            else:
                mixed.append(k)
        if mixed:
            values: dict[str, list] = {k: [] for k in mixed}
            for _, rows in self._merged():
                for r in rows:
                    for k in mixed:
                        values[k].append(r[12].get(k))
            for k in mixed:
                typ, vals = _extra_type(k, values[k], parquet_types)
                self.convert[k] = vals is not values[k]
                out[k] = typ
        return [(k, out[k]) for k in names]

    def conversations(self) -> Iterator[Conversation]:
        convert = [k for k, yes in self.convert.items() if yes]
        try:
            for number, rows in self._merged():
                parts = []
                for _, content, kind, source, pinned, role, ts, mid, tokens, file, line, unit, row in rows:
                    pt = Part(content, kind, source, pinned, role, ts, mid)
                    pt.tokens, pt.file, pt.line, pt.unit = tokens, file, line, unit
                    for k in convert:
                        if k in row:
                            row[k] = _as_string(row[k])
                    pt.row = row
                    parts.append(pt)
                yield Conversation(self.keys[number], parts)
        finally:
            self.close()

    def close(self) -> None:
        self.f.close()
