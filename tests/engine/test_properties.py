"""Property tests: the engine (cupel_np) against the naive oracle (tests/naive.py).

1. every scorer column (ScoreContext.score) == naive.score_items (1e-9), per item set;
2. Pipeline.dry_run == naive.run_pipeline exactly: the same error code or both succeed;
   included rows in placed order with scores (1e-9) and reasons; excluded rows in order
   with reason names and every reason field; totals; count shortfalls. Items round-trip.
   Now and then the budget, config or an item is invalid (both must reject it);
3. one table holding many item sets (set_column, rows interleaved) through run_policy ==
   one Pipeline run per set, bit for bit (same per-set reports, same errors);
4. ItemTables built from Arrow views -- slices of bigger tables, takes from shuffled ones,
   multi-chunk columns, dictionary / large_string / nanosecond columns, read-only strided
   NumPy buffers -- give the oracle's report and the from_items report bit for bit.

The strategies live in tests/strategies.py. Each property runs 150 examples (about 40 s for
the file once Numba's cache is warm); CUPEL_NP_SOAK=1 runs 1500 and CUPEL_PROPERTY_EXAMPLES=N
runs N (the focused test runs 2/5 of that per focus).
"""

import dataclasses
import math
import os
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import naive  # noqa: E402
import strategies as S  # noqa: E402

from cupel_np import (  # noqa: E402
    ContextBudget,
    ContextItem,
    CupelError,
    ItemTable,
    Pipeline,
    Policy,
)
from cupel_np.analysis.pipeline import run_policy  # noqa: E402
from cupel_np.analysis.selection import SelectionReport  # noqa: E402
from cupel_np.engine.scorers import ScoreContext  # noqa: E402
from cupel_np.model.scorers import scorer_from_dict  # noqa: E402

EPS = 1e-9

PROPS = settings(
    max_examples=int(os.environ.get("CUPEL_PROPERTY_EXAMPLES", S.examples(150, 1500))),
    deadline=None,
    database=None,  # keep the work tree clean; failures print a reproduction blob
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------


def _context_item(d):
    return ContextItem(**d)


def _score_close(a, b):
    """Equal to 1e-9 (relative to the magnitude for the few scores far above 1)."""
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= EPS * max(1.0, abs(b))


def _same_value(a, b):
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def _item_matches(item, d):
    """The ContextItem a report hands back is the input item (every field)."""
    want = _context_item(d).to_dict()
    got = item.to_dict()
    assert got.keys() == want.keys()
    for key in got:
        assert _same_value(got[key], want[key]), (key, got[key], want[key])


def naive_outcome(items, budget, config):
    """("error", code) or ("ok", normalized report) from the oracle."""
    try:
        rep = naive.run_pipeline(items, budget, config)
    except naive.NaiveError as err:
        return ("error", err.code)
    return (
        "ok",
        {
            "included": [(row, score, reason) for row, score, reason in rep["included"]],
            "excluded": [(row, score, reason, dict(fields)) for row, score, reason, fields in rep["excluded"]],
            "total_candidates": rep["total_candidates"],
            "total_tokens_considered": rep["total_tokens_considered"],
            "shortfalls": [tuple(s) for s in rep["shortfalls"]],
        },
    )


def normalize_report(report, row_map=None):
    """Engine SelectionReport -> the oracle's normalized shape; rows are input rows
    (``row_map`` maps them further, e.g. to positions inside one item set)."""
    inc_rows = report.input_rows(report.included_rows)
    exc_rows = report.input_rows(report.excluded_rows)
    if row_map is not None:
        inc_rows = [row_map[int(r)] for r in inc_rows]
        exc_rows = [row_map[int(r)] for r in exc_rows]
    included = [(int(r), inc.score, inc.reason.value) for r, inc in zip(inc_rows, report.included)]
    excluded = [
        (int(r), exc.score, exc.reason.reason, dataclasses.asdict(exc.reason))
        for r, exc in zip(exc_rows, report.excluded)
    ]
    return {
        "included": included,
        "excluded": excluded,
        "total_candidates": report.total_candidates,
        "total_tokens_considered": report.total_tokens_considered,
        "shortfalls": [(s.kind, s.required_count, s.satisfied_count) for s in report.count_requirement_shortfalls],
    }


def engine_outcome(items, budget, config, table=None):
    try:
        policy = Policy.from_dict(config)
        b = ContextBudget(**budget)
        source = table if table is not None else [_context_item(d) for d in items]
        report = Pipeline(policy).dry_run(source, b)
    except CupelError as err:
        return ("error", err.code), None
    return ("ok", normalize_report(report)), report


def assert_same_outcome(got, want, exact_scores=False):
    assert got[0] == want[0], (got, want)
    if got[0] == "error":
        assert got[1] == want[1], (got, want)
        return
    g, w = got[1], want[1]
    for key in ("total_candidates", "total_tokens_considered", "shortfalls"):
        assert g[key] == w[key], (key, g[key], w[key])
    assert [e[0] for e in g["included"]] == [e[0] for e in w["included"]], (g, w)
    assert [e[0] for e in g["excluded"]] == [e[0] for e in w["excluded"]], (g, w)
    for a, b in zip(g["included"], w["included"]):
        assert a[2] == b[2], (a, b)
        assert (a[1] == b[1]) if exact_scores else _score_close(a[1], b[1]), (a, b)
    for a, b in zip(g["excluded"], w["excluded"]):
        assert a[2] == b[2], (a, b)
        assert a[3] == b[3], (a, b)
        assert (a[1] == b[1]) if exact_scores else _score_close(a[1], b[1]), (a, b)


# ---------------------------------------------------------------------------
# 1. Scorer columns
# ---------------------------------------------------------------------------


@PROPS
@given(S.scoring_cases())
def test_scorer_columns_match_naive(case):
    sets, entry = case
    spec = scorer_from_dict(entry)
    rows = [dict(d, set=f"s{s}") for s, items in enumerate(sets) for d in items]
    nonempty = [items for items in sets if items]
    if not rows:
        table = ItemTable.from_items([])
    else:
        table = ItemTable.from_items(rows, set_column="set")
    all_rows = np.arange(table.n, dtype=np.int64)
    got = ScoreContext(table, all_rows, table.offsets).score(spec)
    assert got.shape == (table.n,)
    # grouped row -> (set, position in set)
    position = []
    for s, items in enumerate(sets):
        position.extend((s, k) for k in range(len(items)))
    assert table.n_sets == max(1, len(nonempty))
    want = {s: naive.score_items(items, entry) for s, items in enumerate(sets)}
    for grouped, in_row in enumerate(table.input_row):
        s, k = position[int(in_row)]
        assert _score_close(float(got[grouped]), want[s][k]), (entry, s, k, got[grouped], want[s][k])


# ---------------------------------------------------------------------------
# 2. Full pipeline
# ---------------------------------------------------------------------------


def _check_items_roundtrip(report, items):
    inc_rows = report.input_rows(report.included_rows)
    exc_rows = report.input_rows(report.excluded_rows)
    assert sorted(list(inc_rows) + list(exc_rows)) == list(range(len(items)))
    for r, inc in zip(inc_rows, report.included):
        _item_matches(inc.item, items[int(r)])
    for r, exc in zip(exc_rows, report.excluded):
        _item_matches(exc.item, items[int(r)])


@PROPS
@given(S.pipeline_cases(invalid=True, blank_kinds=True))
def test_pipeline_matches_naive(case):
    items, budget, config = case
    want = naive_outcome(items, budget, config)
    got, report = engine_outcome(items, budget, config)
    assert_same_outcome(got, want)
    if report is not None:
        _check_items_roundtrip(report, items)


FOCUSED = settings(PROPS, max_examples=max(1, PROPS.max_examples * 2 // 5))


@FOCUSED
@pytest.mark.parametrize("focus", S.FOCUS_CASES)
@given(data=st.data())
def test_focused_pipeline_matches_naive(focus, data):
    # the mixed strategy above reaches these cases too, but how often varies a lot from run
    # to run; here every focus gets its own examples: PinnedOverride's edges, truncation that
    # fills the target exactly, binding count caps, phase-2 re-sorting, quota partition order,
    # knapsack values far above 2^32
    items, budget, config = data.draw(S.focused_cases(focus))
    want = naive_outcome(items, budget, config)
    got, report = engine_outcome(items, budget, config)
    assert_same_outcome(got, want)
    if report is not None:
        _check_items_roundtrip(report, items)


# ---------------------------------------------------------------------------
# 3. Many item sets in one table
# ---------------------------------------------------------------------------


@PROPS
@given(S.set_cases(), st.sampled_from(["str", "int"]))
def test_set_column_equals_one_run_per_set(case, key_kind):
    sets, interleaving, budget, config = case
    policy = Policy.from_dict(config)
    b = ContextBudget(**budget)

    def key(s):
        return S.SET_KEYS[s] if key_kind == "str" else 100 - 7 * s

    rows = []
    row_map = {}  # combined input row -> position inside its set
    for s, k in interleaving:
        row_map[len(rows)] = k
        rows.append(dict(sets[s][k], conv=key(s)))
    table = ItemTable.from_items(rows, set_column="conv")
    run = run_policy(table, b, policy)
    assert table.n_sets == len(sets)
    assert len(run.error) == len(sets)
    for seg, set_key in enumerate(table.set_keys):
        s = [key(j) for j in range(len(sets))].index(set_key)
        items = sets[s]
        try:
            single = Pipeline(policy).dry_run([_context_item(d) for d in items], b)
            want = ("ok", normalize_report(single))
        except CupelError as err:
            want = ("error", err.code)
        if run.error[seg] is not None:
            got = ("error", run.error[seg].code)
        else:
            report = SelectionReport(run, seg)
            got = ("ok", normalize_report(report, row_map))
            for r, inc in zip(report.input_rows(report.included_rows), report.included):
                _item_matches(inc.item, items[row_map[int(r)]])
        assert_same_outcome(got, want, exact_scores=True)


# ---------------------------------------------------------------------------
# 4. Arrow views: slices, takes, chunks, dictionary columns
# ---------------------------------------------------------------------------

ARROW_FIELDS = (
    "content",
    "tokens",
    "kind",
    "source",
    "priority",
    "tags",
    "metadata",
    "timestamp",
    "future_relevance_hint",
    "pinned",
    "original_tokens",
)


def _arrow_table(items, ts_unit="us", dict_kind=False, large_content=False):
    cols = {f: [] for f in ARROW_FIELDS}
    for d in items:
        cols["content"].append(d["content"])
        cols["tokens"].append(d["tokens"])
        cols["kind"].append(d.get("kind"))
        cols["source"].append(d.get("source"))
        cols["priority"].append(d.get("priority"))
        cols["tags"].append(d.get("tags"))
        md = d.get("metadata")
        cols["metadata"].append(None if md is None else list(md.items()))
        cols["timestamp"].append(d.get("timestamp"))
        cols["future_relevance_hint"].append(d.get("future_relevance_hint"))
        cols["pinned"].append(d.get("pinned"))
        cols["original_tokens"].append(d.get("original_tokens"))
    arrays = {
        "content": pa.array(cols["content"], pa.large_string() if large_content else pa.string()),
        "tokens": pa.array(cols["tokens"], pa.int64()),
        "kind": pa.array(cols["kind"], pa.string()),
        "source": pa.array(cols["source"], pa.string()),
        "priority": pa.array(cols["priority"], pa.int64()),
        "tags": pa.array(cols["tags"], pa.list_(pa.string())),
        "metadata": pa.array(cols["metadata"], pa.map_(pa.string(), pa.string())),
        "timestamp": pa.array(cols["timestamp"], pa.timestamp(ts_unit, tz="UTC")),
        "future_relevance_hint": pa.array(cols["future_relevance_hint"], pa.float64()),
        "pinned": pa.array(cols["pinned"], pa.bool_()),
        "original_tokens": pa.array(cols["original_tokens"], pa.int64()),
    }
    if dict_kind:
        arrays["kind"] = arrays["kind"].dictionary_encode()
    return pa.table(arrays)


@st.composite
def arrow_views(draw):
    """(items, budget, Arrow table whose rows are exactly ``items`` but whose columns are
    views: offsets into bigger buffers, several chunks, gathered by take)."""
    items, budget, config = draw(S.pipeline_cases(extreme_timestamps=False))
    junk_before = draw(S.item_lists(max_size=5, extreme_timestamps=False))
    junk_after = draw(S.item_lists(max_size=5, extreme_timestamps=False))
    ts_unit = draw(st.sampled_from(["us", "ns"]))
    dict_kind = draw(st.booleans())
    large = draw(st.booleans())
    how = draw(st.sampled_from(["slice", "take", "chunks"]))
    build = lambda rows: _arrow_table(rows, ts_unit, dict_kind, large)  # noqa: E731
    if how == "slice":
        big = build(junk_before + items + junk_after)
        view = big.slice(len(junk_before), len(items))
    elif how == "chunks":
        cut = draw(st.integers(0, len(items)))
        parts = [build(junk_before + items[:cut]), build(items[cut:] + junk_after)]
        big = pa.concat_tables(parts)
        view = big.slice(len(junk_before), len(items))
    else:
        pool = junk_before + items + junk_after
        perm = draw(st.permutations(range(len(pool))))
        shuffled = build([pool[i] for i in perm])
        where = {p: i for i, p in enumerate(perm)}
        idx = [where[len(junk_before) + k] for k in range(len(items))]
        view = shuffled.take(pa.array(idx, pa.int64()))
        if view.num_rows and draw(st.booleans()):
            view = view.slice(0, view.num_rows)
    if draw(st.booleans()):
        # tokens / pinned from read-only, strided NumPy views (pa.array keeps or copies them)
        n = len(items)
        tok = np.full(3 * n + 1, -999, dtype=np.int64)
        tok[1::3][:n] = [d["tokens"] for d in items]
        tok.setflags(write=False)
        pin = np.zeros(2 * n, dtype=np.bool_)
        pin[::2] = [bool(d.get("pinned")) for d in items]
        pin.setflags(write=False)
        view = view.set_column(view.schema.get_field_index("tokens"), "tokens", pa.array(tok[1::3][:n]))
        view = view.set_column(view.schema.get_field_index("pinned"), "pinned", pa.array(pin[::2]))
    assert view.num_rows == len(items)
    return items, budget, config, view


@PROPS
@given(arrow_views())
def test_arrow_views_give_same_reports(case):
    items, budget, config, view = case
    want = naive_outcome(items, budget, config)
    try:
        table = ItemTable.from_arrow(view)
    except CupelError as err:  # pragma: no cover - every generated table is valid
        pytest.fail(f"valid Arrow view rejected: {err}")
    got, report = engine_outcome(items, budget, config, table=table)
    assert_same_outcome(got, want)
    ref, _ = engine_outcome(items, budget, config)
    assert_same_outcome(got, ref, exact_scores=True)
    if report is not None:
        _check_items_roundtrip(report, items)


# ---------------------------------------------------------------------------
# Fixed points the random pools also reach
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("raw", S.TRUST_VALUES_NON_ASCII_FOLD)
def test_trust_parse_rejects_non_ascii_case_variants(raw):
    # 'ınf' (dotless i) matches "inf" under Unicode case folding; Rust's parser rejects it.
    items = [{"content": "c", "tokens": 1, "metadata": {"cupel:trust": raw}}]
    entry = {"type": "metadata_trust", "default_score": 0.3}
    table = ItemTable.from_items(items)
    got = ScoreContext(table, np.arange(1), table.offsets).score(scorer_from_dict(entry))
    assert list(got) == naive.score_items(items, entry) == [0.3]


@pytest.mark.parametrize("kind", ["\x1c", "\x1f"])
def test_information_separator_kind_is_not_blank(kind):
    # U+001C..U+001F: str.isspace() says whitespace, Unicode White_Space (Rust's trim, .NET's
    # IsWhiteSpace, the oracle) does not -- such a kind is valid.
    items = [{"content": "c", "tokens": 1, "kind": kind}]
    budget = {"max_tokens": 10, "target_tokens": 10}
    config = {"scorers": [{"type": "kind", "weights": [{"kind": kind, "weight": 1.0}]}]}
    want = naive_outcome(items, budget, config)
    assert want[0] == "ok"
    got, _ = engine_outcome(items, budget, config)
    assert_same_outcome(got, want)


def test_knapsack_values_stay_exact_above_1e11():
    # score x 10000 above 1e15: one 3e12 item (value 3e16) beats two 8e11 ones (1.6e16);
    # a knapsack that clamps values at 1e15 would take the two.
    items = [
        {"content": "a", "tokens": 60, "kind": "A"},
        {"content": "b", "tokens": 50, "kind": "B"},
        {"content": "c", "tokens": 50, "kind": "B"},
    ]
    budget = {"max_tokens": 100, "target_tokens": 100}
    config = {"slicer": "knapsack", "bucket_size": 10, "scorers": [{"type": "kind", "weights": {"A": 3e12, "B": 8e11}}]}
    want = naive_outcome(items, budget, config)
    assert [row for row, _s, _r in want[1]["included"]] == [0]
    got, _ = engine_outcome(items, budget, config)
    assert_same_outcome(got, want)
