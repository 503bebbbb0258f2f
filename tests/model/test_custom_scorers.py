"""Custom scorers: ColumnScorer, FunctionScorer, register_scorer and --plugin.

The central property: a column scorer over a column ``s`` in [0, 1] is the reflexive scorer
with ``future_relevance_hint = s`` (selections, reasons, scores and diffs), through the API,
the CLI with a policy file, the streamed CLI path and Dask; a FunctionScorer returning that
column is too.
"""

from __future__ import annotations

import json
import math
import sys
import threading

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import strategies as S
from hypothesis import HealthCheck, given, settings

import cupel_np as c
from cupel_np import cli
from cupel_np.errors import InvalidConfigError, InvalidInputTypeError
from cupel_np.model.plugins import load_plugins, unregister_scorer
from cupel_np.model.scorers import registered_scorers

PROPS = settings(
    max_examples=S.examples(60, 600),
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
FIELDS = (
    ("content", pa.string()),
    ("tokens", pa.int64()),
    ("kind", pa.string()),
    ("source", pa.string()),
    ("priority", pa.int64()),
    ("tags", pa.list_(pa.string())),
    ("metadata", pa.map_(pa.string(), pa.string())),
    ("timestamp", pa.timestamp("us", tz="UTC")),
    ("future_relevance_hint", pa.float64()),
    ("pinned", pa.bool_()),
    ("original_tokens", pa.int64()),
)


def _s_of(hint):
    """The signal both scorers see: the hint clamped into [0, 1] (None and NaN are null)."""
    return None if hint is None or math.isnan(hint) else min(max(float(hint), 0.0), 1.0)


def _arrow(rows, sets=None) -> pa.Table:
    cols = {}
    for name, typ in FIELDS:
        vals = [r.get(name) for r in rows]
        if name == "metadata":
            vals = [None if v is None else list(v.items()) for v in vals]
        cols[name] = pa.array(vals, typ)
    cols["future_relevance_hint"] = pa.array([_s_of(r.get("future_relevance_hint")) for r in rows], pa.float64())
    cols["s"] = cols["future_relevance_hint"]
    if sets is not None:
        cols["conv"] = pa.array(sets, pa.string())
    return pa.table(cols)


def _swap(entry, to):
    """The scorer entry with every reflexive scorer (nested too) replaced by ``to``."""
    if isinstance(entry, list):
        return [_swap(e, to) for e in entry]
    if not isinstance(entry, dict):
        return entry
    if entry.get("type") == "reflexive":
        return dict(to, **({"weight": entry["weight"]} if "weight" in entry else {}))
    return {k: _swap(v, to) for k, v in entry.items()}


def _outcome(res):
    errs = {label: sorted(map(str, e)) for label, e in res.errors.items()}
    return res.included, res.reasons, res.scores, res.diffs_table(), errs


def _assert_same(a, b):
    ia, ra, sa, da, ea = a
    ib, rb, sb, db, eb = b
    np.testing.assert_array_equal(ia, ib)
    np.testing.assert_array_equal(ra, rb)
    np.testing.assert_array_equal(sa, sb)  # NaN == NaN here; bit-equal otherwise
    assert da.equals(db)
    assert ea == eb


def _identity_fn(columns, offsets):
    return np.nan_to_num(columns["s"], nan=0.0)


@pytest.fixture
def s_fn():
    c.register_scorer("s_fn", lambda: c.FunctionScorer(_identity_fn, name="s_fn"))
    yield
    unregister_scorer("s_fn")


# --------------------------------------------------------------------------- the property
@PROPS
@given(S.set_cases())
def test_column_and_function_scorers_equal_reflexive(case):
    sets, interleaving, budget, config = case
    rows, keys = [], []
    for s, k in interleaving:
        rows.append(sets[s][k])
        keys.append(S.SET_KEYS[s])
    table = c.ItemTable.from_arrow(_arrow(rows, keys), set_column="conv")
    b = c.ContextBudget(**budget)
    base = dict(config, scorers=[*config["scorers"], {"type": "reflexive", "weight": 1.5}])
    only = dict(config, scorers=[{"type": "reflexive"}])
    c.register_scorer("s_fn", lambda: c.FunctionScorer(_identity_fn, name="s_fn"))
    try:
        outcomes = []
        for to in (None, {"type": "column", "column": "s"}, {"type": "s_fn"}):
            cfgs = [base, only] if to is None else [_swap(base, to), _swap(only, to)]
            pols = [("mixed", c.Policy.from_dict(cfgs[0])), ("alone", c.Policy.from_dict(cfgs[1]))]
            outcomes.append(_outcome(c.sweep(table, b, pols, on_error="collect")))
    finally:
        unregister_scorer("s_fn")
    _assert_same(outcomes[0], outcomes[1])
    _assert_same(outcomes[0], outcomes[2])


# --------------------------------------------------------------------------- a seeded corpus
def _corpus(n_sets=12, seed=7) -> pa.Table:
    rng = np.random.default_rng(seed)
    rows, keys = [], []
    for s in range(n_sets):
        for i in range(int(rng.integers(3, 12))):
            h = None if rng.random() < 0.15 else float(rng.choice([0.0, 0.25, 0.5, 1.0, rng.random()]))
            rows.append(
                {
                    "content": f"c{s}-{i % 7}",
                    "tokens": int(rng.integers(0, 120)),
                    "kind": str(rng.choice(["Message", "Document", "ToolOutput"])),
                    "priority": int(rng.integers(0, 4)),
                    "timestamp": None if rng.random() < 0.2 else 1_700_000_000_000_000 + int(rng.integers(0, 10**9)),
                    "future_relevance_hint": h,
                    "pinned": bool(rng.random() < 0.08),
                }
            )
            keys.append(f"set{s:02d}")
    return _arrow(rows, keys)


def _policies(signal: dict) -> dict:
    """Two labelled policies, the signal in a composite and alone (EXTENSIONS.md form)."""
    return {
        "mix": {
            "slicer": "greedy",
            "overflow_strategy": "truncate",
            "scorers": [dict(signal, weight=2.0), {"type": "recency", "weight": 1.0}],
        },
        "alone": {
            "slicer": "quota",
            "quotas": [{"kind": "Document", "require": 20.0, "cap": 60.0}],
            "overflow_strategy": "proceed",
            "scorers": [dict(signal, weight=1.0)],
        },
    }


REFLEXIVE = {"type": "reflexive"}
COLUMN = {"type": "column", "column": "s"}
BUDGET = ["--max-tokens", "400", "--target-tokens", "250"]


def _cli_outputs(tmp_path, name, signal, *extra):
    items = tmp_path / "items.parquet"
    if not items.exists():
        pq.write_table(_corpus(), items, row_group_size=9)
    pol = tmp_path / f"{name}.json"
    pol.write_text(json.dumps(_policies(signal)))
    out = tmp_path / name
    argv = ["sensitivity", str(items), "--policies", str(pol), *BUDGET, "--set-column", "conv", "--out", str(out)]
    assert cli.main([*argv, "--quiet", *extra]) == 0
    return {n: pq.read_table(out / f"{n}.parquet") for n in ("items", "diffs")}


def test_cli_policy_file_column_equals_reflexive(tmp_path):
    want = _cli_outputs(tmp_path, "refl", REFLEXIVE)
    got = _cli_outputs(tmp_path, "col", COLUMN)
    assert want["items"].num_rows == _corpus().num_rows
    assert got["items"].equals(want["items"]) and got["diffs"].equals(want["diffs"])


def test_cli_streamed_column_equals_reflexive(tmp_path):
    want = _cli_outputs(tmp_path, "refl", REFLEXIVE, "--chunk-rows", "10")
    got = _cli_outputs(tmp_path, "col", COLUMN, "--chunk-rows", "10")
    whole = _cli_outputs(tmp_path, "whole", COLUMN)
    assert got["items"].equals(want["items"]) and got["diffs"].equals(want["diffs"])
    assert got["items"].sort_by("input_row").equals(whole["items"].sort_by("input_row"))


def test_cli_plugin_registers_a_scorer(tmp_path):
    plugin = tmp_path / "my_plugin.py"
    plugin.write_text(
        "import numpy as np\n"
        "import cupel_np as c\n\n"
        "def _s(columns, offsets):\n"
        "    return np.nan_to_num(columns['s'], nan=0.0)\n\n"
        "c.register_scorer('plugin-s', lambda: c.FunctionScorer(_s, name='plugin_s'))\n"
    )
    try:
        want = _cli_outputs(tmp_path, "refl", REFLEXIVE)
        got = _cli_outputs(tmp_path, "plug", {"type": "plugin-s"}, "--plugin", str(plugin))
    finally:
        unregister_scorer("plugin_s")
    assert got["items"].equals(want["items"]) and got["diffs"].equals(want["diffs"])


def test_cli_unknown_plugin_is_a_usage_error(tmp_path, capsys):
    argv = ["presets", "--plugin", "no_such_cupel_plugin_module"]
    assert cli.main(argv) != 0
    assert "no_such_cupel_plugin_module" in capsys.readouterr().err


def test_dask_column_equals_reflexive(tmp_path):
    pytest.importorskip("distributed")
    from distributed import Client, LocalCluster

    from cupel_np.io import dask as cdask

    items = tmp_path / "items.parquet"
    pq.write_table(_corpus(6), items, row_group_size=9)
    budget = c.ContextBudget(400, 250)
    outs = {}
    c.register_scorer("s_fn", lambda: c.FunctionScorer(_identity_fn, name="s_fn"))
    try:
        with LocalCluster(processes=False, n_workers=1, threads_per_worker=1, dashboard_address=":0") as cl, Client(cl):
            for name, signal in (("refl", REFLEXIVE), ("col", COLUMN), ("fn", {"type": "s_fn"})):
                pols = [(k, c.Policy.from_dict(v)) for k, v in _policies(signal).items()]
                cdask.sweep(str(items), budget, pols, set_column="conv", out_dir=tmp_path / name, progress=False)
                outs[name] = pq.read_table(tmp_path / name / "items").sort_by("input_row")
            bad = [("v", c.Policy(c.ColumnScorer("nope")))]
            with pytest.raises(InvalidConfigError, match="no column 'nope'"):
                cdask.sweep(str(items), budget, bad, set_column="conv", out_dir=tmp_path / "bad", progress=False)
    finally:
        unregister_scorer("s_fn")
    assert outs["col"].equals(outs["refl"]) and outs["fn"].equals(outs["refl"])
    pols = [(k, c.Policy.from_dict(v)) for k, v in _policies(COLUMN).items()]
    local = c.sweep(c.ItemTable.from_parquet(items, set_column="conv"), budget, pols)
    assert outs["col"].num_rows == local.items_table().num_rows


# --------------------------------------------------------------------------- FunctionScorer
@pytest.mark.parametrize("threads", [1, 2])
def test_function_scorer_called_once_per_sweep(threads):
    calls = []
    lock = threading.Lock()

    def fn(columns, offsets):
        with lock:
            calls.append(offsets.copy())
        return np.nan_to_num(columns["s"], nan=0.0)

    fs = c.FunctionScorer(fn, name="counted")
    table = c.ItemTable.from_arrow(_corpus(), set_column="conv")
    variants = [(f"v{w}", c.Policy(c.CompositeScorer(((fs, float(w)), (c.RecencyScorer(), 1.0))))) for w in range(1, 5)]
    variants += [("scaled", c.Policy(c.ScaledScorer(fs))), ("plain", c.Policy(fs))]
    c.sweep(table, c.ContextBudget(400, 250), variants, threads=threads)
    assert len(calls) == 1
    # the scoreable rows (pinned ones are never scored), one segment per set
    assert calls[0][-1] == table.n - int(table.pinned.sum()) and len(calls[0]) == table.n_sets + 1


def test_function_scorer_reproduces_upstream_inverted_sensitivity():
    """.NET PolicySensitivityTests.TwoVariants_DifferentScorers_ItemsSwapStatus with the
    inverted scorer (1 - hint) as a FunctionScorer."""
    items = [
        c.ContextItem(content=n, tokens=100, kind="Message", future_relevance_hint=h)
        for n, h in (("alpha", 0.9), ("beta", 0.7), ("gamma", 0.3), ("delta", 0.1))
    ]
    inverted = c.FunctionScorer(lambda cols, off: 1.0 - cols["future_relevance_hint"], name="inverted")
    budget = c.ContextBudget(max_tokens=400, target_tokens=200)
    report = c.policy_sensitivity(
        items, budget, [("normal", c.Policy(c.ReflexiveScorer())), ("inverted", c.Policy(inverted))]
    )
    assert [label for label, _ in report.variants] == ["normal", "inverted"]
    assert {d.content for d in report.diffs} == {"alpha", "beta", "gamma", "delta"}
    for d in report.diffs:
        assert {s for _, s in d.statuses} == {c.ItemStatus.Included, c.ItemStatus.Excluded}
    alpha = next(d for d in report.diffs if d.content == "alpha")
    assert alpha.statuses == (("normal", c.ItemStatus.Included), ("inverted", c.ItemStatus.Excluded))
    delta = next(d for d in report.diffs if d.content == "delta")
    assert delta.statuses == (("normal", c.ItemStatus.Excluded), ("inverted", c.ItemStatus.Included))


def test_function_scorer_gets_read_only_columns_and_set_offsets():
    seen = {}

    def fn(columns, offsets):
        seen["keys"] = set(columns)
        seen["tokens"] = columns["tokens"]
        seen["kind"] = columns["kind"]
        seen["offsets"] = offsets
        return np.zeros(len(columns["tokens"]))

    table = c.ItemTable.from_arrow(_corpus(3), set_column="conv")
    c.sweep(table, c.ContextBudget(400, 250), [("f", c.Policy(c.FunctionScorer(fn, name="f")))])
    assert {"content", "tokens", "kind", "s", "future_relevance_hint"} <= seen["keys"]
    assert not seen["tokens"].flags.writeable and not seen["offsets"].flags.writeable
    assert isinstance(seen["kind"], pa.Array) and seen["kind"].type == pa.string()
    with pytest.raises(ValueError):
        seen["tokens"][0] = 1


@pytest.mark.parametrize(
    "ret, err, words",
    [
        (lambda n: np.zeros(n + 1), InvalidConfigError, "shape"),
        (lambda n: np.zeros((n, 1)), InvalidConfigError, "shape"),
        (lambda n: np.array(["x"] * n), InvalidInputTypeError, "dtype"),
        (lambda n: np.zeros(n, dtype=bool), InvalidInputTypeError, "dtype"),
    ],
)
def test_function_scorer_result_is_checked(ret, err, words):
    fs = c.FunctionScorer(lambda cols, off: ret(len(cols["tokens"])), name="badfn")
    with pytest.raises(err, match=f"badfn.*{words}|{words}.*badfn"):
        c.sweep(c.ItemTable.from_arrow(_corpus(2)), c.ContextBudget(400, 250), [("v", c.Policy(fs))])


def test_function_scorer_integer_result_is_cast_and_nan_passes():
    def fn(cols, off):
        out = np.arange(len(cols["tokens"]), dtype=np.int32).astype(np.float64)
        out[0] = math.nan
        return out

    table = c.ItemTable.from_arrow(_arrow([{"content": f"x{i}", "tokens": 1} for i in range(4)]))
    res = c.sweep(table, c.ContextBudget(10, 10), [("v", c.Policy(c.FunctionScorer(fn, name="ints")))])
    assert math.isnan(res.scores[0, 0]) and list(res.scores[1:, 0]) == [1.0, 2.0, 3.0]


# --------------------------------------------------------------------------- column values
def test_column_null_nan_inf_and_default():
    rows = [{"content": f"x{i}", "tokens": 1} for i in range(5)]
    t = (
        _arrow(rows)
        .drop_columns(["s"])
        .append_column("sig", pa.array([0.5, None, math.nan, math.inf, -3], pa.float64()))
    )
    res = c.sweep(c.ItemTable.from_arrow(t), c.ContextBudget(10, 10), [("v", c.Policy(c.ColumnScorer("sig", 0.25)))])
    got = res.scores[:, 0]
    # NaN is a missing value like null (issue 26.17: one rule on every input path, see test_column_nan_rule)
    assert got[0] == 0.5 and got[1] == 0.25 and got[2] == 0.25 and got[3] == math.inf and got[4] == -3.0


def test_column_integer_and_decimal_columns_are_numeric():
    import decimal

    t = _arrow([{"content": f"x{i}", "tokens": 1} for i in range(3)]).drop_columns(["s"])
    t = t.append_column("n", pa.array([1, 2, None], pa.int16()))
    t = t.append_column("d", pa.array([decimal.Decimal("0.5"), None, decimal.Decimal("2")], pa.decimal128(5, 2)))
    res = c.sweep(
        c.ItemTable.from_arrow(t),
        c.ContextBudget(10, 10),
        [("n", c.Policy(c.ColumnScorer("n"))), ("d", c.Policy(c.ColumnScorer("d", 9)))],
    )
    assert res.scores[:, 0].tolist() == [1.0, 2.0, 0.0] and res.scores[:, 1].tolist() == [0.5, 9.0, 2.0]


def test_context_items_read_metadata():
    items = [
        c.ContextItem(content="a", tokens=10, metadata={"sim": "0.25"}),
        c.ContextItem(content="b", tokens=10, metadata={"sim": "1e0"}),
        c.ContextItem(content="c", tokens=10),
    ]
    res = c.sweep(items, c.ContextBudget(10, 10), [("v", c.Policy(c.ColumnScorer("sim", 0.5)))])
    assert res.scores[:, 0].tolist() == [0.25, 1.0, 0.5]
    assert res.included[:, 0].tolist() == [False, True, False]


def test_errors_name_the_column_before_any_work():
    calls = []

    def fn(cols, off):
        calls.append(1)
        return np.zeros(len(cols["tokens"]))

    fs = c.FunctionScorer(fn, name="early")
    table = c.ItemTable.from_arrow(_corpus(2))
    budget = c.ContextBudget(400, 250)
    with pytest.raises(InvalidConfigError, match="no column 'nope'"):
        c.sweep(table, budget, [("a", c.Policy(fs)), ("b", c.Policy(c.ScaledScorer(c.ColumnScorer("nope"))))])
    with pytest.raises(InvalidInputTypeError, match="column 'kind' is not numeric"):
        c.sweep(table, budget, [("a", c.Policy(fs)), ("b", c.Policy(c.ColumnScorer("kind")))])
    assert calls == []
    items = [c.ContextItem(content="a", tokens=1, metadata={"sim": " 1"})]
    with pytest.raises(InvalidInputTypeError, match="'sim'.*not numbers.*' 1'"):
        c.sweep(items, budget, [("a", c.Policy(c.ColumnScorer("sim")))])
    with pytest.raises(InvalidConfigError, match="no item has a metadata key 'sim'"):
        c.sweep([c.ContextItem(content="a", tokens=1)], budget, [("a", c.Policy(c.ColumnScorer("sim")))])


def test_streamed_input_checks_the_schema_first(tmp_path):
    items = tmp_path / "items.parquet"
    pq.write_table(_corpus(3), items)
    pols = [("a", c.Policy(c.ColumnScorer("similarity")))]
    from cupel_np.io.parquet import sweep_parquet

    with pytest.raises(InvalidConfigError, match="no column 'similarity'"):
        sweep_parquet(items, c.ContextBudget(400, 250), pols, tmp_path / "out", set_column="conv", chunk_rows=5)
    assert not (tmp_path / "out" / "items.parquet").exists()


# --------------------------------------------------------------------------- policy data
def test_policy_data_forms_round_trip(tmp_path, s_fn):
    d = {"scorers": [{"type": "column", "column": "sim", "default": 0.5, "weight": 2}, {"type": "s_fn"}]}
    p = c.Policy.from_dict(d)
    assert p.scorer.entries[0] == (c.ColumnScorer("sim", 0.5), 2.0)
    assert c.Policy.from_dict(p.to_dict()) == p
    assert c.Policy.from_json(p.to_json()) == p
    toml = tmp_path / "p.toml"
    toml.write_text(
        '[[scorers]]\ntype = "column"\ncolumn = "sim"\ndefault = 0.5\nweight = 2\n\n[[scorers]]\ntype = "s_fn"\n'
    )
    assert c.Policy.from_file(toml) == p
    dotnet = c.policy_to_dotnet(p)
    assert dotnet["scorers"][0] == {"type": "column", "column": "sim", "default": 0.5, "weight": 2.0}
    assert c.policy_from_dotnet(dotnet) == p
    assert c.Policy.from_json(json.dumps(dict(dotnet, deduplicationEnabled=True))) == p


def test_policy_data_errors():
    with pytest.raises(InvalidConfigError, match="needs 'column'"):
        c.Policy.from_dict({"scorers": [{"type": "column"}]})
    with pytest.raises(InvalidConfigError, match="unknown key.*'colum'"):
        c.Policy.from_dict({"scorers": [{"type": "column", "column": "x", "colum": "y"}]})
    with pytest.raises(InvalidConfigError, match="must be finite"):
        c.ColumnScorer("x", math.nan)
    with pytest.raises(InvalidConfigError, match="register_scorer"):
        c.Policy.from_dict({"scorers": [{"type": "function", "name": "x"}]})
    with pytest.raises(InvalidConfigError, match="built-in"):
        c.register_scorer("Recency", lambda: c.ColumnScorer("x"))
    with pytest.raises(InvalidConfigError, match="not registered"):
        c.policy_to_dotnet(c.Policy(c.FunctionScorer(_identity_fn, name="loose")))


def test_registered_options_give_one_shared_scorer():
    made = []

    def factory(column, scale=1.0):
        made.append(column)
        return c.FunctionScorer(lambda cols, off: np.nan_to_num(cols[column]) * scale, name=f"scaled_{column}")

    c.register_scorer("times", factory)
    try:
        a = c.Policy.from_dict({"scorers": [{"type": "times", "column": "s", "scale": 2}]})
        b = c.Policy.from_dict({"scorers": [{"type": "Times", "scale": 2, "column": "s"}]})
        assert a.scorer is b.scorer and made == ["s"]
        assert a.to_dict()["scorers"][0] == {"type": "times", "column": "s", "scale": 2, "weight": 1.0}
        assert "times" in registered_scorers()
        with pytest.raises(InvalidConfigError, match="rejected its options"):
            c.Policy.from_dict({"scorers": [{"type": "times", "colour": "s"}]})
    finally:
        unregister_scorer("times")
    with pytest.raises(InvalidConfigError, match="unknown scorer type 'times'"):
        c.Policy.from_dict({"scorers": [{"type": "times", "column": "s"}]})


def test_grid_weight_dimension_and_composition():
    table = c.ItemTable.from_arrow(_corpus(), set_column="conv")
    base = c.Policy(c.CompositeScorer(((c.ColumnScorer("s"), 1.0), (c.RecencyScorer(), 1.0))), name="p")
    grid = c.Sweep([base], weights=[{"column:s": 1.0}, {"column:s": 4.0, "recency": 0.5}])
    res = c.sweep(table, c.ContextBudget(400, 250), grid)
    assert len(res.labels) == 2
    refl = c.Policy(c.CompositeScorer(((c.ReflexiveScorer(), 1.0), (c.RecencyScorer(), 1.0))), name="p")
    want = c.sweep(
        table,
        c.ContextBudget(400, 250),
        c.Sweep([refl], weights=[{"reflexive": 1.0}, {"reflexive": 4.0, "recency": 0.5}]),
    )
    np.testing.assert_array_equal(res.included, want.included)
    np.testing.assert_array_equal(res.scores, want.scores)


def test_budget_simulation_and_dry_run_accept_column_scorers():
    items = [
        c.ContextItem(content=n, tokens=100, future_relevance_hint=h, metadata={"s": str(h)})
        for n, h in (("a", 0.9), ("b", 0.5), ("c", 0.1))
    ]
    col = c.Pipeline(c.Policy(c.ColumnScorer("s")))
    refl = c.Pipeline(c.Policy(c.ReflexiveScorer()))
    budget = c.ContextBudget(300, 200)
    assert [i.item.content for i in col.dry_run(items, budget).included] == [
        i.item.content for i in refl.dry_run(items, budget).included
    ]
    table = c.ItemTable.from_items(items)
    got = c.min_budgets(table, col.policy, 300)
    assert got.column("min_budget").to_pylist() == [100, 200, 300]
    assert got.equals(c.min_budgets(table, refl.policy, 300))


def test_load_plugins_module_name(tmp_path, monkeypatch):
    (tmp_path / "cupel_test_plugin_mod.py").write_text(
        "import cupel_np as c\nc.register_scorer('modsig', lambda: c.ColumnScorer('s'))\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        load_plugins(["cupel_test_plugin_mod"])
        assert c.Policy.from_dict({"scorers": [{"type": "modsig"}]}).scorer == c.ColumnScorer("s")
    finally:
        unregister_scorer("modsig")


@pytest.mark.parametrize("form", ["pandas", "polars", "parquet_dir", "subset"])
def test_every_table_source_keeps_the_signal_column(form, tmp_path):
    arrow = _corpus(4)
    if form == "pandas":
        # (an all-null integer column becomes float in pandas: leave that one out)
        table = c.ItemTable.from_arrow(arrow.drop_columns(["original_tokens"]).to_pandas(), set_column="conv")
    elif form == "polars":
        import polars as pl

        table = c.ItemTable.from_arrow(pl.from_arrow(arrow), set_column="conv")
    elif form == "parquet_dir":
        import pyarrow.dataset as ds

        ds.write_dataset(arrow, tmp_path / "d", format="parquet", partitioning=["conv"], partitioning_flavor="hive")
        table = c.ItemTable.from_parquet(tmp_path / "d", set_column="conv")
    else:
        table = c.ItemTable.from_arrow(arrow, set_column="conv").subset("set02")
    assert "s" in table.extra_columns
    budget = c.ContextBudget(400, 250)
    col = c.sweep(table, budget, [("v", c.Policy(c.ColumnScorer("s")))])
    refl = c.sweep(table, budget, [("v", c.Policy(c.ReflexiveScorer()))])
    np.testing.assert_array_equal(col.included, refl.included)
    np.testing.assert_array_equal(col.scores, refl.scores)


def test_an_inner_entry_may_carry_a_weight_which_is_ignored():
    """EXTENSIONS.md makes a wrapper's inner entry "a full scorer entry" (type + weight +
    options), as .NET's ScorerEntry does: the weight is accepted for a built-in, a column and a
    registered inner scorer, checked like every weight, and ignored (issue 26)."""
    from cupel_np.model.scorers import scorer_from_dict

    for inner, want in (
        ({"type": "recency", "weight": 3}, c.RecencyScorer()),
        ({"type": "column", "column": "x", "weight": 3}, c.ColumnScorer("x")),
    ):
        assert scorer_from_dict({"type": "scaled", "inner": inner}).inner == want
        assert scorer_from_dict({"type": "scaled", "inner_scorer": inner}).inner == want
    for bad in (0, -1, float("nan"), float("inf")):
        with pytest.raises(InvalidConfigError, match=r"inner\.weight must be"):
            scorer_from_dict({"type": "scaled", "inner": {"type": "recency", "weight": bad}})
    with pytest.raises(InvalidConfigError, match="unknown key 'wieght'"):
        scorer_from_dict({"type": "scaled", "inner": {"type": "recency", "wieght": 1}})
    c.register_scorer("inner_test_signal", lambda: c.ColumnScorer("x"))
    try:
        # the weight never reaches the factory (which takes no options)
        got = scorer_from_dict({"type": "scaled", "inner": {"type": "inner_test_signal", "weight": 3}})
        assert got.inner == c.ColumnScorer("x")
        assert scorer_from_dict({"type": "scaled", "inner": {"type": "inner_test_signal"}}).inner == c.ColumnScorer("x")
    finally:
        from cupel_np.model.plugins import unregister_scorer

        unregister_scorer("inner_test_signal")


def test_one_registry_holds_every_scorer_type_and_unregister_forgets_only_registered_names():
    """Built-in types, ``column``, ``function`` and registered names live in one registry
    (model/scorers.py); ``unregister_scorer`` removes a registered name and nothing else."""
    from cupel_np.model.plugins import unregister_scorer
    from cupel_np.model.scorers import known_scorer_types, registered_scorers, scorer_from_dict

    c.register_scorer("one_registry_signal", lambda: c.ColumnScorer("x"))
    try:
        assert known_scorer_types()[-2:] == ("column", "one_registry_signal")
        assert registered_scorers()[-1] == "one_registry_signal"
    finally:
        unregister_scorer("one_registry_signal")
    assert "one_registry_signal" not in known_scorer_types()
    for name in ("recency", "column", "function"):
        unregister_scorer(name)  # not a registered name: nothing to forget
    assert scorer_from_dict({"type": "recency"}) == c.RecencyScorer()
    assert scorer_from_dict({"type": "column", "column": "x"}) == c.ColumnScorer("x")
    with pytest.raises(InvalidConfigError, match="a function scorer is code, not data"):
        scorer_from_dict({"type": "function"})


@pytest.mark.parametrize(
    "text, message",
    [
        ("def broken(:\n", "syntax error at line 1"),
        ("raise RuntimeError('no licence key')\n", "failed while loading: RuntimeError: no licence key"),
    ],
)
def test_a_plugin_that_fails_to_load_is_a_usage_error_naming_it(tmp_path, capsys, text, message):
    plugin = tmp_path / "cupel_bad_plugin.py"
    plugin.write_text(text)
    assert cli.main(["presets", "--plugin", str(plugin)]) == 2
    err = capsys.readouterr().err
    assert str(plugin) in err and message in err and "internal error" not in err
    assert "cupel_bad_plugin" not in sys.modules


def test_a_file_plugin_leaves_sys_path_alone_and_its_neighbours_unimported(tmp_path):
    (tmp_path / "cupel_neighbour_mod.py").write_text("raise RuntimeError('a neighbour ran')\n")
    plugin = tmp_path / "cupel_path_plugin.py"
    plugin.write_text("import cupel_np as c\nc.register_scorer('pathsig', lambda: c.ColumnScorer('s'))\n")
    before = list(sys.path)
    try:
        load_plugins([str(plugin)])
        assert sys.path == before
        assert c.Policy.from_dict({"scorers": [{"type": "pathsig"}]}).scorer == c.ColumnScorer("s")
        with pytest.raises(ImportError):
            __import__("cupel_neighbour_mod")  # not importable from the plugin's directory
    finally:
        unregister_scorer("pathsig")
        sys.modules.pop("cupel_path_plugin", None)


def test_a_plugin_named_like_an_imported_module_is_refused(tmp_path, capsys):
    plugin = tmp_path / "json.py"
    plugin.write_text("import cupel_np as c\nc.register_scorer('jsonsig', lambda: c.ColumnScorer('s'))\n")
    assert cli.main(["presets", "--plugin", str(plugin)]) == 2
    err = capsys.readouterr().err
    assert "named like the module 'json' that is already imported" in err
    assert "jsonsig" not in registered_scorers()


def test_a_function_scorer_reading_a_missing_column_names_it(tmp_path, capsys):
    def fn(columns, offsets):
        return columns["similarity"]

    table = c.ItemTable.from_arrow(_corpus(2), set_column="conv")
    variants = [("sim", c.Policy(c.FunctionScorer(fn, name="sim_fn")))]
    with pytest.raises(InvalidConfigError, match="function scorer 'sim_fn' reads column 'similarity', which"):
        c.sweep(table, c.ContextBudget(400, 250), variants, on_error="collect")
