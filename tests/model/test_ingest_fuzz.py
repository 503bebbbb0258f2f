"""Ingestion fuzzing (issue 7, test item 3).

Hypothesis builds Arrow tables with every column type Arrow can hold in each items column -
strings of every layout, binary, dictionaries, every integer width, floats with NaN / inf,
decimals, timestamps in every unit and zone, booleans, dates, lists, maps, structs, nulls
everywhere, invalid UTF-8 - as plain, chunked or sliced arrays, with empty tables and missing
or repeated columns. Each table goes through ``ItemTable.from_arrow``, ``from_parquet`` (when
Parquet can hold it) and ``io.validate_items``. Every case must either load and run a
two-variant sweep with every input row accounted for in every variant, or raise ONE
``CupelError`` on one line naming the column (and the row and value for row problems); never
another exception. ``validate_items`` reports problems exactly when loading raises.

``CUPEL_NP_SOAK=1`` raises the example count for a long run.
"""

from __future__ import annotations

import decimal
import os
import re
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import cupel_np as c
from cupel_np.errors import CupelError
from cupel_np.io import validate_items

SOAK = os.environ.get("CUPEL_NP_SOAK") == "1"
FUZZ = settings(
    max_examples=int(os.environ.get("CUPEL_NP_FUZZ_EXAMPLES", 5000 if SOAK else 60)),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

D = decimal.Decimal
BAD_UTF8 = b"bad \xff\xfe"
STRINGS = ["a", "b", "chat log", "Message", "MESSAGE", "Tool", "", " ", "\u3000", "ü", "x" * 70, None, BAD_UTF8]
TEXT_TYPES = ["string", "large_string", "string_view", "dict_string", "binary", "large_binary", "binary_view"]
INT_TYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
FLOAT_TYPES = ["float16", "float32", "float64"]
DECIMAL_TYPES = ["decimal128(10,2)", "decimal128(38,0)", "decimal256(76,0)"]
UNITS = ["s", "ms", "us", "ns"]
ZONES = [None, "UTC", "America/New_York", "Asia/Kolkata", "+05:30", "-11:00"]
TS_TYPES = [f"timestamp[{u},{z}]" for u in UNITS for z in ZONES]
LIST_TYPES = [
    "list<string>",
    "large_list<string>",
    "list<dict_string>",
    "list_view<string>",
    "fixed_size_list<string,1>",
    "list<int64>",
]
MAP_TYPES = ["map<string,string>", "map<large_string,string>", "map<string,int64>"]
OTHER_TYPES = ["bool", "null", "date32", "struct", "dict_int"]
ALL_TYPES = TEXT_TYPES + INT_TYPES + FLOAT_TYPES + DECIMAL_TYPES + TS_TYPES + LIST_TYPES + MAP_TYPES + OTHER_TYPES

GOOD_TYPES = {
    "content": TEXT_TYPES,
    "tokens": INT_TYPES + ["decimal128(38,0)"],
    "kind": TEXT_TYPES,
    "source": TEXT_TYPES,
    "priority": INT_TYPES + DECIMAL_TYPES,
    "tags": LIST_TYPES[:-1],
    "metadata": MAP_TYPES[:2],
    "timestamp": TS_TYPES,
    "future_relevance_hint": FLOAT_TYPES + INT_TYPES[:4] + DECIMAL_TYPES[:1],
    "pinned": ["bool"],
    "original_tokens": INT_TYPES,
    "sid": ["string", "large_string", "string_view", "dict_string", "int64", "uint64", "int8"],
}
COLUMNS = list(GOOD_TYPES)


def _int_range(t: str) -> tuple[int, int]:
    bits = int(t.lstrip("uint"))
    return (0, 2**bits - 1) if t.startswith("u") else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)


def _per_second(unit: str) -> int:
    return {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}[unit]


def _value_pool(t: str, column: str) -> list:
    """Values a column of type ``t`` may hold (mostly good ones, some bad)."""
    if t in TEXT_TYPES:
        pool = STRINGS
        if column == "sid":
            pool = ["s1", "s2", "s3", None]
        return pool
    if t in INT_TYPES:
        lo, hi = _int_range(t)
        small = [0, 1, 3, 10, 1000, -1, -5]
        if column == "tokens":
            small += [2**61 + 1]
        return [v for v in small if lo <= v <= hi] + [lo, hi, None]
    if t in FLOAT_TYPES:
        return [0.0, 0.25, 1.0, -1.0, 2.5, float("nan"), float("inf"), float("-inf"), 1e300, None]
    if t == "decimal128(10,2)":
        return [D("1.00"), D("2.50"), D("-3.00"), D("12345678.99"), None]
    if t == "decimal128(38,0)":
        return [D(1), D(7), D(10**20), D(-(10**37)), D(2**63 - 1), None]
    if t == "decimal256(76,0)":
        return [D(2), D(10**70), D(-1), None]
    if t.startswith("timestamp"):
        per = _per_second(t[10 : t.index(",")])
        return [
            0,
            1,
            -1,
            1_700_000_000 * per,
            1_700_000_000 * per + 1,
            253_402_300_800 * per // per * per if per < 10**9 else 2**63 - 1,
            -62_135_596_801 * per if per < 10**9 else -(2**63) + 1,
            None,
        ]
    if t.startswith(("list", "large_list", "fixed_size_list")):
        if t == "list<int64>":
            return [[1], [], None, [2, 3]]
        if t.startswith("fixed_size_list"):
            return [["a"], ["B"], [None], None, [BAD_UTF8]]
        return [["a", "B"], [], None, ["x"], ["a", None], ["ü", "A"], [BAD_UTF8]]
    if t.startswith("map<") and t.endswith("int64>"):
        return [[("k", 1)], [], None]
    if t.startswith("map<"):
        return [
            [("cupel:trust", "0.5")],
            [("cupel:trust", "nan")],
            [("k", None)],
            [],
            None,
            [("a", "b"), ("a", "c")],
            [("k", BAD_UTF8)],
        ]
    if t == "bool":
        return [True, False, False, None]
    if t == "null":
        return [None]
    if t == "date32":
        return [0, 19000, None]
    if t == "struct":
        return [{"a": 1}, None]
    if t == "dict_int":
        return [1, 2, None]
    raise AssertionError(t)


def _utf8(values):
    """Encode text values (str / invalid bytes / None) as bytes for a binary-backed array."""
    return [v.encode() if isinstance(v, str) else v for v in values]


def _build(t: str, values: list) -> pa.Array:
    """An Arrow array of type ``t`` holding ``values`` (invalid UTF-8 kept as raw bytes)."""
    if t in ("string", "large_string", "string_view"):
        bin_t = {"string": pa.binary(), "large_string": pa.large_binary(), "string_view": pa.binary_view()}[t]
        return pa.array(_utf8(values), bin_t).view(getattr(pa, t)())
    if t == "dict_string":
        return pa.array(_utf8(values), pa.binary()).view(pa.string()).dictionary_encode()
    if t in ("binary", "large_binary", "binary_view"):
        return pa.array(_utf8(values), getattr(pa, t)())
    if t in INT_TYPES:
        return pa.array(values, getattr(pa, t)())
    if t in FLOAT_TYPES:
        with np.errstate(over="ignore"):  # 1e300 -> inf in float16 / float32, on purpose
            arr = np.array([np.nan if v is None else v for v in values], dtype=t)
        return pa.array(arr, mask=np.array([v is None for v in values], dtype=bool))
    if t.startswith("decimal"):
        m = re.fullmatch(r"decimal(128|256)\((\d+),(\d+)\)", t)
        ctor = pa.decimal128 if m[1] == "128" else pa.decimal256
        return pa.array(values, ctor(int(m[2]), int(m[3])))
    if t.startswith("timestamp"):
        unit, zone = t[10:-1].split(",")
        return pa.array(values, pa.int64()).cast(pa.timestamp(unit, None if zone == "None" else zone))
    if t.startswith(("list", "large_list", "fixed_size_list")):
        inner = t[t.index("<") + 1 : -1].split(",")[0]
        flat = [x for v in values if v is not None for x in v]
        offsets = np.cumsum([0] + [len(v) if v is not None else 0 for v in values]).astype(np.int32)
        mask = pa.array([v is None for v in values], pa.bool_())
        if inner == "int64":
            child = pa.array(flat, pa.int64())
        else:
            child = _build("dict_string" if inner == "dict_string" else "string", flat)
        if t.startswith("fixed_size_list"):
            width = 1
            padded = [x for v in values for x in (v if v is not None else [None] * width)]
            return pa.FixedSizeListArray.from_arrays(_build("string", padded), width, mask=mask)
        if t.startswith("large_list"):
            return pa.LargeListArray.from_arrays(pa.array(offsets.astype(np.int64)), child, mask=mask)
        if t.startswith("list_view"):
            sizes = np.diff(offsets).astype(np.int32)
            return pa.ListViewArray.from_arrays(pa.array(offsets[:-1]), pa.array(sizes), child, mask=mask)
        return pa.ListArray.from_arrays(pa.array(offsets), child, mask=mask)
    if t.startswith("map<"):
        key_t, item_t = t[4:-1].split(",")
        pairs = [p for v in values if v is not None for p in v]
        offsets = np.cumsum([0] + [len(v) if v is not None else 0 for v in values]).astype(np.int32)
        keys = _build(key_t, [k for k, _ in pairs])
        items = (
            pa.array([x for _, x in pairs], pa.int64()) if item_t == "int64" else _build(item_t, [x for _, x in pairs])
        )
        return pa.MapArray.from_arrays(
            pa.array(offsets), keys, items, mask=pa.array([v is None for v in values], pa.bool_())
        )
    if t == "bool":
        return pa.array(values, pa.bool_())
    if t == "null":
        return pa.nulls(len(values))
    if t == "date32":
        return pa.array(values, pa.date32())
    if t == "struct":
        return pa.array(values, pa.struct([("a", pa.int64())]))
    if t == "dict_int":
        return pa.array(values, pa.int64()).dictionary_encode()
    raise AssertionError(t)


_INT_COLUMNS = ("tokens", "priority", "original_tokens")


def _clean(column: str, t: str, v) -> bool:
    """Whether value ``v`` of type ``t`` is one the loader must accept in ``column``."""
    if v is None:
        return column not in ("content", "tokens", "sid")
    if v == BAD_UTF8:
        return False
    if isinstance(v, str) and column in ("content", "kind", "source"):
        return v.strip(" \u3000") != ""
    if isinstance(v, list):
        parts = [p for x in v for p in (x if isinstance(x, tuple) else (x,))]  # tags, or map pairs
        return all(p is not None and p != BAD_UTF8 for p in parts)
    if t.startswith("timestamp"):
        per = _per_second(t[10 : t.index(",")])
        return -62_135_596_800 * per <= v <= 253_402_300_799 * per
    if column == "sid" and isinstance(v, int):
        return v <= 2**63 - 1
    if column in _INT_COLUMNS and isinstance(v, (int, D)):
        limit = 2**40 if column == "tokens" else 2**63
        return v == int(v) and -limit <= v < limit
    return True


@st.composite
def column_arrays(draw, column: str, n: int, clean: bool):
    """(type name, array or chunked array of length ``n``) for one column. ``clean``: only
    types and values the loader must accept."""
    good = clean or draw(st.integers(0, 9)) < 7
    t = draw(st.sampled_from(GOOD_TYPES[column] if good else ALL_TYPES))
    pool = _value_pool(t, column)
    if clean:
        pool = [v for v in pool if _clean(column, t, v)] or [None]
    values = draw(st.lists(st.sampled_from(pool), min_size=n, max_size=n))
    layout = draw(st.sampled_from(["plain", "sliced", "chunked", "chunked_sliced"]))
    if layout in ("sliced", "chunked_sliced"):
        junk = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=3))
        arr = _build(t, junk + values + junk).slice(len(junk), n)
    else:
        arr = _build(t, values)
    if layout.startswith("chunked"):
        cut = draw(st.integers(0, n))
        arr = pa.chunked_array([arr.slice(0, cut), arr.slice(cut)], type=arr.type)
    return t, arr


@st.composite
def item_tables(draw):
    """(Arrow table, set column or None, description of the columns)."""
    n = draw(st.sampled_from([0, 1, 2, 3, 5, 8]))
    clean = draw(st.booleans())  # half the tables must load: they exercise the run path
    names, arrays, described = [], [], []
    for column in COLUMNS:
        required = column in ("content", "tokens")
        present = (clean or draw(st.integers(0, 19)) != 0) if required else draw(st.booleans())
        if column == "sid":
            present = draw(st.booleans())
        if not present:
            continue
        t, arr = draw(column_arrays(column, n, clean))
        names.append(column)
        arrays.append(arr)
        described.append(f"{column}:{t}")
    if names and not clean and draw(st.integers(0, 9)) == 0:  # a repeated column
        i = draw(st.integers(0, len(names) - 1))
        names.append(names[i])
        arrays.append(arrays[i])
        described.append(f"{names[i]}:repeated")
    if draw(st.booleans()):
        names.append("ignored")
        arrays.append(pa.array(range(n)))
    order = draw(st.permutations(range(len(names))))
    table = pa.Table.from_arrays([arrays[i] for i in order], names=[names[i] for i in order])
    set_column = "sid" if "sid" in names and draw(st.integers(0, 3)) != 0 else None
    if set_column is None and not clean and draw(st.integers(0, 19)) == 0:
        set_column = "missing_set_column"
    return table, set_column, clean, described


VARIANTS = [
    ("chat", c.preset("chat")),
    (
        "wide",
        c.Policy.from_dict(
            {
                "slicer": "knapsack",
                "bucket_size": 7,
                "placer": "u_shaped",
                "deduplication": True,
                "overflow_strategy": "truncate",
                "scorers": [
                    {
                        "type": "decay",
                        "weight": 1.0,
                        "reference_time": "2300-01-01T00:00:00Z",
                        "curve": {"type": "exponential", "half_life_secs": 86400.0},
                    },
                    {"type": "priority", "weight": 1.0},
                    {"type": "metadata_trust", "weight": 1.0},
                    {"type": "tag", "weight": 1.0, "tag_weights": {"a": 2.0, "x": 1.0}},
                    {"type": "frequency", "weight": 1.0},
                    {"type": "reflexive", "weight": 1.0},
                ],
            }
        ),
    ),
]
BUDGET = c.ContextBudget(10_000, 5_000, output_reserve=100)


def _load(fn):
    """("ok", ItemTable) or ("error", message); any other exception fails the test."""
    try:
        return "ok", fn()
    except CupelError as e:
        msg = str(e)
        assert msg and "\n" not in msg, f"error message is not one line: {msg!r}"
        assert re.search(r"column '[^']+'|columns named '[^']+'|no '(content|tokens)' column", msg), msg
        return "error", msg


def _row_message_names_row(msg: str) -> None:
    """Row problems name the row (and the value where it can be shown)."""
    if (
        re.search(r"\bnull\b|invalid UTF-8|empty|whitespace|does not fit|not an integer|outside years|add up past", msg)
        and "must be" not in msg
    ):
        assert re.search(r"row \d+", msg), msg


def _check_runs(items: c.ItemTable, n: int) -> None:
    assert items.n == n
    res = c.sweep(items, BUDGET, VARIANTS, on_error="collect")
    assert res.included.shape == (n, len(VARIANTS))
    out = res.items_table()
    assert out.num_rows == n
    assert out.column("input_row").to_pylist() == list(range(n))
    failed_rows = np.zeros((len(VARIANTS), n), dtype=bool)
    for v, label in enumerate(res.labels):
        inc = out.column(f"{label}.included")
        reason = out.column(f"{label}.reason")
        failed = inc.is_null().to_numpy(zero_copy_only=False)
        failed_rows[v] = failed
        included = inc.fill_null(False).to_numpy(zero_copy_only=False)
        has_reason = reason.is_valid().to_numpy(zero_copy_only=False)
        # every row of every variant: included, or excluded with a reason, or in a failed set
        assert np.all(included | has_reason | failed), (label, out.to_pylist())
        assert not np.any(included & failed)
    errors = res.errors
    for v, label in enumerate(res.labels):  # a failed (variant, set) is reported, never dropped
        assert failed_rows[v].any() == (label in errors)
        for err in errors.get(label, {}).values():
            assert isinstance(err, CupelError) and "\n" not in str(err)


@FUZZ
@given(case=item_tables())
def test_ingest_fuzz(case):
    table, set_column, clean, described = case
    n = table.num_rows
    arrow = _load(lambda: c.ItemTable.from_arrow(table, set_column=set_column))
    if clean:
        assert arrow[0] == "ok", (described, arrow)
    event(f"from_arrow: {arrow[0]}" + (f" ({n} rows)" if arrow[0] == "ok" else ""))
    if arrow[0] == "ok":
        _check_runs(arrow[1], n)
    else:
        _row_message_names_row(arrow[1])
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "items.parquet"
        try:
            pq.write_table(table, path)
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError):
            event("not writable to Parquet")
            return  # Parquet cannot hold one of these types: the Arrow path alone is checked
        from_file = _load(lambda: c.ItemTable.from_parquet(path, set_column=set_column))
        problems, summary = validate_items(path, set_column=set_column)
        assert bool(problems) == (from_file[0] == "error"), (described, problems, from_file)
        assert all("\n" not in p for p in problems)
        assert summary["rows"] == n
        if from_file[0] == "ok":
            _check_runs(from_file[1], n)
        # Parquet keeps every type read here, so the file loads exactly when the table does
        assert from_file[0] == arrow[0], (described, arrow, from_file)


# ------------------------------------------------------------ pinned cases the fuzzer found
@pytest.mark.parametrize(
    "column, array, accepted",
    [
        ("tokens", pa.array([2**63], pa.uint64()), False),
        ("tokens", pa.array([5], pa.uint64()), True),
        ("tokens", pa.array([D("3")], pa.decimal128(38, 0)), True),
        ("tokens", pa.array([D("2.5")], pa.decimal128(10, 2)), False),
        ("tokens", pa.array([D(10**40)], pa.decimal256(76, 0)), False),
        ("priority", pa.array([D(-(10**37))], pa.decimal128(38, 0)), False),
        ("future_relevance_hint", pa.array([D("0.25")], pa.decimal128(10, 2)), True),
        ("future_relevance_hint", pa.array(np.array([0.5], np.float16)), True),
        ("timestamp", pa.array([10**15], pa.timestamp("s")), False),
        ("timestamp", pa.array([-62_135_596_801], pa.timestamp("s", "UTC")), False),
        ("timestamp", pa.array([2**63 - 1], pa.timestamp("ns", "Asia/Kolkata")), True),
        ("timestamp", pa.array([1_700_000_000_000], pa.timestamp("ms", "America/New_York")), True),
        ("content", pa.array([b"bytes"], pa.binary()), True),
        ("content", pa.array([b"\xff"], pa.large_binary()), False),
        ("content", pa.array(["v"], pa.string_view()), True),
        ("tags", pa.array([["a"]], pa.list_view(pa.string())), True),
        ("tags", pa.array([["a"]], pa.list_(pa.string(), 1)), True),
        ("pinned", pa.array([1], pa.int8()), False),
        ("timestamp", pa.array([0], pa.date32()), False),
    ],
)
def test_column_types(column, array, accepted):
    cols = {"content": pa.array(["c"]), "tokens": pa.array([1]), column: array}
    table = pa.table(cols)
    status, value = _load(lambda: c.ItemTable.from_arrow(table))
    assert status == ("ok" if accepted else "error"), value
    if accepted:
        _check_runs(value, 1)
    else:
        assert f"column {column!r}" in value


def test_uint64_set_keys():
    """Found by the soak: a uint64 key above 2**63-1 loaded, then the sweep's output tables
    failed with OverflowError. Keys are int64; a key that does not fit is named."""
    base = {"content": ["a", "b"], "tokens": [1, 2]}
    t = c.ItemTable.from_arrow(pa.table({**base, "sid": pa.array([7, 2**63 - 1], pa.uint64())}), set_column="sid")
    assert t.set_keys == [7, 2**63 - 1]
    _check_runs(t, 2)
    status, msg = _load(
        lambda: c.ItemTable.from_arrow(
            pa.table({**base, "sid": pa.array([0, 2**64 - 1], pa.uint64())}), set_column="sid"
        )
    )
    assert (status, msg) == (
        "error",
        "set column 'sid', row 1: does not fit in a 64-bit signed integer (value 18446744073709551615)",
    )


def test_timestamps_in_any_zone_are_the_same_instant():
    instant = 1_700_000_000
    tables = [
        pa.table(
            {"content": ["a"], "tokens": [1], "timestamp": pa.array([instant * _per_second(u)], pa.timestamp(u, z))}
        )
        for u in UNITS
        for z in ZONES
    ]
    rows = [c.ItemTable.from_arrow(t).row(0).timestamp for t in tables]
    assert len(set(rows)) == 1 and rows[0].timestamp() == instant


def test_empty_table_of_every_good_type_runs():
    for column in COLUMNS[:-1]:
        for t in GOOD_TYPES[column]:
            cols = {"content": _build("string", []), "tokens": _build("int64", []), column: _build(t, [])}
            _check_runs(c.ItemTable.from_arrow(pa.table(cols)), 0)
