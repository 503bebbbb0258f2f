"""Generic message files: JSONL / CSV / TSV / Parquet, one message a line or row, columns named
by a mapping (``content=text,kind=role,set=conv``; targets ``MAP_TARGETS``). Every column the
mapping does not use is kept as a column of the items table, typed as read (Parquet: its type;
JSONL: what JSON gives, strings where values of one column mix types; CSV/TSV: strings)."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
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
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        vals = [v if v is None or isinstance(v, str) else json.dumps(v, ensure_ascii=False) for v in values]
        return pa.string(), vals
    return (pa.string() if pa.types.is_null(arr.type) else arr.type), values


def read(
    files: list[tuple[Path, str]], reader: Reader, *, skip_bad: bool, mapping: dict, set_column: str
) -> tuple[list[Conversation], list[tuple[str, pa.DataType]]]:
    """The conversations, and the extra columns (name, type) every part's ``row`` holds."""
    convs: dict[str, Conversation] = {}
    extras: dict[str, None] = {}
    parquet_types: dict[str, pa.DataType] = {}
    reserved = {set_column, *ITEM_COLUMNS}
    for path, name in files:
        _check_mapped_columns(path, mapping)
        if path.suffix.lower() == ".parquet":
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
                convs.setdefault(sid, Conversation(sid)).parts.append(pt)
        check_not_all_bad("messages", name, file_records, reader.bad[since:])
        raise_first_bad(reader.bad, since, skip_bad)
    columns = []
    all_parts = [pt for c in convs.values() for pt in c.parts]
    for k in extras:
        typ, vals = _extra_type(k, [(pt.row or {}).get(k) for pt in all_parts], parquet_types)
        for pt, v in zip(all_parts, vals):
            if pt.row is not None:
                pt.row[k] = v
        columns.append((k, typ))
    return list(convs.values()), columns
