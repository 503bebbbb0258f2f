"""Atomic groups (issue 29, docs/tool-pairs.md): the oracle's rules on known answers, the
oracle against itself (groups of one = no groups), and the engine against the oracle."""

import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import naive  # noqa: E402
import strategies as S  # noqa: E402

PROPS = settings(
    max_examples=S.examples(60, 600),
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _item(content, tokens, hint, t=None, group=None, kind="Message", pinned=False):
    d = {
        "content": content,
        "tokens": tokens,
        "kind": kind,
        "future_relevance_hint": hint,
        "timestamp": None if t is None else T0 + timedelta(seconds=t),
        "pinned": pinned,
        "metadata": {} if group is None else {"g": group},
    }
    return d


BUDGET = {"max_tokens": 200, "target_tokens": 70}
REFLEXIVE = {"scorers": [{"type": "reflexive", "weight": 1.0}], "slicer": "greedy"}


def _known_items():
    # a message, a call and its result (one unit "g1", the result later than message B), B
    return [
        _item("A", 10, 0.5, t=0),
        _item("call", 5, 0.1, t=1, group="g1", kind="ToolCall"),
        _item("result", 50, 0.9, t=3, group="g1", kind="ToolOutput"),
        _item("B", 30, 0.6, t=2),
    ]


def test_oracle_known_answer_greedy_keeps_or_drops_the_pair_whole():
    items = _known_items()
    plain = naive.run_pipeline(items, BUDGET, REFLEXIVE)
    # densities 0.05, 0.02, 0.018, 0.02: A, call, B fit (45), the result does not (95 > 70)
    assert [r for r, _s, _x in plain["included"]] == [0, 1, 3]
    assert naive.orphan_counts(_links(items), [0, 1, 3]) == (1, 0)
    grouped = naive.run_pipeline(items, BUDGET, dict(REFLEXIVE, groups="g"))
    # the unit: 55 tokens, score max(0.1, 0.9) = 0.9, density 0.0164 < B's 0.02: A and B fit (40),
    # the unit does not (95 > 70); both members carry the unit's reason and tokens
    assert [r for r, _s, _x in grouped["included"]] == [0, 3]
    ex = {row: (reason, fields) for row, _s, reason, fields in grouped["excluded"]}
    assert ex[1] == ex[2] == ("BudgetExceeded", {"item_tokens": 55, "available_tokens": 30})
    assert [e[0] for e in grouped["excluded"]] == [2, 1]  # by member score: 0.9, then 0.1


def test_oracle_known_answer_chronological_keeps_members_contiguous():
    items = _known_items()
    budget = {"max_tokens": 200, "target_tokens": 150}
    plain = naive.run_pipeline(items, budget, REFLEXIVE)
    assert plain["placed"] == [0, 1, 3, 2]  # by timestamp: B (t=2) between call and result
    grouped = naive.run_pipeline(items, budget, dict(REFLEXIVE, groups="g"))
    assert grouped["placed"] == [0, 1, 2, 3]  # the unit at its first member's time, whole


def test_oracle_known_answer_pinned_items_are_no_members():
    # a pinned call is included as every pinned item is; its result is a unit of one (the
    # rule: units are formed from the scoreable items), here too big for the budget
    items = _known_items()
    items[1] = dict(items[1], pinned=True)
    grouped = naive.run_pipeline(items, {"max_tokens": 200, "target_tokens": 60}, dict(REFLEXIVE, groups="g"))
    reasons = {r: reason for r, _s, reason in grouped["included"]}
    assert reasons[1] == "Pinned" and 2 not in reasons
    assert grouped == naive.run_pipeline(items, {"max_tokens": 200, "target_tokens": 60}, REFLEXIVE)


def test_oracle_known_answer_dedup_spares_members():
    items = _known_items() + [_item("result", 50, 0.95, t=4)]  # same content as the unit's result
    grouped = naive.run_pipeline(items, {"max_tokens": 400, "target_tokens": 300}, dict(REFLEXIVE, groups="g"))
    assert sorted(r for r, _s, _x in grouped["included"]) == [0, 1, 2, 3, 4]
    plain = naive.run_pipeline(items, {"max_tokens": 400, "target_tokens": 300}, REFLEXIVE)
    assert [(r, reason) for r, _s, reason, _f in plain["excluded"]] == [(2, "Deduplicated")]


def test_oracle_known_answer_truncation_drops_whole_units():
    # a count quota commits 3 units (35 tokens) over the 20-token target; truncation walks the
    # units by score: A (10) stays, the pair (15) does not fit and goes whole, B (10) fills 20
    items = [
        _item("A", 10, 0.5, t=0),
        _item("call", 5, 0.2, t=1, group="g1"),
        _item("result", 10, 0.3, t=2, group="g1"),
        _item("B", 10, 0.25, t=3),
    ]
    config = {
        "scorers": [{"type": "reflexive", "weight": 1.0}],
        "slicer": "count_quota",
        "entries": [{"kind": "Message", "require_count": 3, "cap_count": 3}],
        "overflow_strategy": "truncate",
    }
    budget = {"max_tokens": 100, "target_tokens": 20}
    plain = naive.run_pipeline(items, budget, config)
    assert sorted(r for r, _s, _x in plain["included"]) == [0, 2]  # the result without its call
    rep = naive.run_pipeline(items, budget, dict(config, groups="g"))
    assert sorted(r for r, _s, _x in rep["included"]) == [0, 3]
    assert [(r, reason, f) for r, _s, reason, f in rep["excluded"]] == [
        (2, "BudgetExceeded", {"item_tokens": 15, "available_tokens": 0}),
        (1, "BudgetExceeded", {"item_tokens": 15, "available_tokens": 0}),
    ]


def _links(items):
    """Tool links from the test group key: the first member is the call, the rest results."""
    out = []
    first = {}
    for i, it in enumerate(items):
        g = (it.get("metadata") or {}).get("g")
        if g is None:
            out.append({})
        elif g not in first:
            first[g] = i
            out.append({"tool_call_id": g, "tool_role": "call"})
        else:
            out.append({"tool_call_id": g, "tool_role": "result"})
    return out


@st.composite
def grouped_cases(draw, singletons=False):
    """(items, budget, config) of the pipeline cases with a group key ``g`` in the metadata of
    some items; ``singletons``: every key names one item."""
    items, budget, config = draw(S.pipeline_cases())
    labels = draw(st.lists(st.sampled_from([None, "a", "b", "c", "d"]), min_size=len(items), max_size=len(items)))
    out = []
    for k, (it, g) in enumerate(zip(items, labels, strict=True)):
        if g is not None and singletons:
            g = f"{g}{k}"
        md = dict(it.get("metadata") or {})
        if g is not None:
            md["g"] = g
        out.append(dict(it, metadata=md))
    return out, budget, dict(config, groups="g")


def _outcome(fn, *args):
    try:
        return ("ok", fn(*args))
    except naive.NaiveError as e:
        return ("error", e.code)


@PROPS
@given(grouped_cases(singletons=True))
def test_oracle_groups_of_one_are_no_groups(case):
    items, budget, config = case
    plain = {k: v for k, v in config.items() if k != "groups"}
    assert _outcome(naive.run_pipeline, items, budget, config) == _outcome(naive.run_pipeline, items, budget, plain)


@PROPS
@given(grouped_cases())
def test_oracle_units_are_all_or_nothing_and_contiguous(case):
    items, budget, config = case
    got = _outcome(naive.run_pipeline, items, budget, config)
    if got[0] == "error":
        return
    rep = got[1]
    placed = rep["placed"]
    pos = {r: k for k, r in enumerate(placed)}
    members: dict = {}
    for i, it in enumerate(items):
        g = it["metadata"].get("g")
        if g is not None and it["tokens"] >= 0 and not it.get("pinned"):
            members.setdefault(g, []).append(i)
    for rows in members.values():
        kept = [r in pos for r in rows]
        assert all(kept) or not any(kept)
        if all(kept):
            at = [pos[r] for r in rows]
            assert at == list(range(at[0], at[0] + len(rows)))  # contiguous, input order
    if not any(it["tokens"] < 0 or it.get("pinned") for it in items):
        assert naive.orphan_counts(_links(items), placed) == (0, 0)


# ---------------------------------------------------------------------------------------------
# The engine against the oracle
# ---------------------------------------------------------------------------------------------

import pytest  # noqa: E402
from test_properties import assert_same_outcome, engine_outcome, naive_outcome  # noqa: E402

import cupel_np as c  # noqa: E402

SLICERS = ("greedy", "knapsack", "quota", "count_quota", "count_constrained_knapsack")
PLACERS = ("chronological", "u_shaped")


@st.composite
def focused_grouped_cases(draw, slicer, placer):
    """Grouped cases aimed at one slicer and one placer (the nested count quotas come with
    count_quota's inner slicers)."""
    items, budget, config = draw(S.focused_cases(slicer))
    labels = draw(st.lists(st.sampled_from([None, "a", "b", "c"]), min_size=len(items), max_size=len(items)))
    out = [
        dict(it, metadata=dict(it.get("metadata") or {}, **({"g": g} if g else {})))
        for it, g in zip(items, labels, strict=True)
    ]
    return out, budget, dict(config, groups="g", placer=placer)


FOCUSED = settings(PROPS, max_examples=max(1, PROPS.max_examples // 3))


@FOCUSED
@pytest.mark.parametrize("placer", PLACERS)
@pytest.mark.parametrize("slicer", SLICERS)
@given(data=st.data())
def test_engine_matches_the_oracle_with_groups(slicer, placer, data):
    items, budget, config = data.draw(focused_grouped_cases(slicer, placer))
    want = naive_outcome(items, budget, config)
    got, report = engine_outcome(items, budget, config)
    assert_same_outcome(got, want)
    if report is not None:
        # members contiguous in input order at their unit's place
        placed = list(report.input_rows(report.included_rows))
        pos = {int(r): k for k, r in enumerate(placed)}
        members: dict = {}
        for i, it in enumerate(items):
            g = it["metadata"].get("g")
            if g is not None and it["tokens"] >= 0 and not it.get("pinned"):
                members.setdefault(g, []).append(i)
        for rows in members.values():
            kept = [r in pos for r in rows]
            assert all(kept) or not any(kept)
            if all(kept):
                assert [pos[r] for r in rows] == list(range(pos[rows[0]], pos[rows[0]] + len(rows)))


@PROPS
@given(S.pipeline_cases())
def test_engine_matches_the_oracle_with_groups_mixed(case):
    items, budget, config = case
    rnd = [None, "a", "b", None, "c"]
    items = [
        dict(it, metadata=dict(it.get("metadata") or {}, **({"g": rnd[k % 5]} if rnd[k % 5] else {})))
        for k, it in enumerate(items)
    ]
    config = dict(config, groups="g")
    assert_same_outcome(engine_outcome(items, budget, config)[0], naive_outcome(items, budget, config))


@PROPS
@given(grouped_cases(singletons=True))
def test_engine_groups_of_one_are_no_groups_bit_for_bit(case):
    items, budget, config = case
    plain = {k: v for k, v in config.items() if k != "groups"}
    a, ra = engine_outcome(items, budget, config)
    b, rb = engine_outcome(items, budget, plain)
    assert_same_outcome(a, b, exact_scores=True)
    if ra is not None:
        assert list(ra.included_rows) == list(rb.included_rows)
        assert [e.reason for e in ra.excluded] == [e.reason for e in rb.excluded]


def test_every_preset_with_groups_leaves_no_orphans_and_keeps_units_whole():
    import dataclasses

    from test_tool_pairs import BUDGETS, direct_counts, table_of, transcript_rows

    from cupel_np.model.presets import PRESETS

    rows = transcript_rows(11)
    table = table_of(rows)
    variants = []
    for name, pol in PRESETS.items():
        for i, b in enumerate(BUDGETS):
            variants.append((f"{name}-{i}", pol, b))
            variants.append((f"{name}-{i}+groups", dataclasses.replace(pol, groups="tool_group"), b))
    res = c.sweep(table, None, variants, on_error="collect")
    items = res.items_table()
    o = res.orphans
    broken = 0
    for v, label in enumerate(res.labels):
        inc = [bool(x) for x in items.column(f"{label}.included").to_pylist()]
        ok_sets = {key for s, key in enumerate(table.set_keys) if not res.failed[v, s]}
        want = direct_counts(rows, inc)
        for s, key in enumerate(table.set_keys):
            if key in ok_sets:
                assert (o["orphan_calls"][v, s], o["orphan_results"][v, s]) == want[key]
        if label.endswith("+groups"):
            assert int(o["orphan_calls"][v].sum() + o["orphan_results"][v].sum()) == 0, label
            groups: dict = {}
            for i, r in enumerate(rows):
                if r["tool_group"] is not None and not r["pinned"] and r["conv"] in ok_sets:
                    groups.setdefault((r["conv"], r["tool_group"]), []).append(inc[i])
            assert all(all(g) or not any(g) for g in groups.values()), label
        else:
            broken += int(o["orphan_calls"][v].sum() + o["orphan_results"][v].sum())
    assert broken > 0  # without groups the presets do break pairs on this fixture


def test_the_option_in_python_dict_toml_dotnet_and_its_errors():
    from cupel_np.errors import InvalidConfigError

    d = {"scorers": [{"type": "recency", "weight": 1.0}], "slicer": "greedy", "groups": "tool_group"}
    pol = c.Policy.from_dict(d)
    assert pol.groups == "tool_group" and pol.to_dict()["groups"] == "tool_group"
    assert c.Policy.from_dict(pol.to_dict()) == pol
    assert "groups" not in c.Policy.from_dict({k: v for k, v in d.items() if k != "groups"}).to_dict()
    toml = 'groups = "tool_group"\nslicer = "greedy"\n[[scorers]]\ntype = "recency"\nweight = 1.0\n'
    assert c.Policy.from_toml(toml).groups == "tool_group"
    dotnet = c.policy_to_dotnet(pol)
    assert dotnet["groups"] == "tool_group" and c.policy_from_dotnet(dotnet).groups == "tool_group"
    with pytest.raises(InvalidConfigError, match="Policy.groups must be a column name"):
        c.Policy.from_dict(dict(d, groups=" "))
    with pytest.raises(InvalidConfigError, match="groups: the items have no column 'nope'"):
        c.sweep(
            c.ItemTable.from_arrow(pa.table({"content": ["a"], "tokens": [1], "g": ["x"]})),
            c.ContextBudget(10, 10),
            [("a", c.Policy.from_dict(dict(d, groups="nope")))],
        )


def test_a_grid_varies_groups_on_and_off():
    from cupel_np.model.grid import Sweep

    grid = Sweep(["chat"], groups=[None, "tool_group"], budgets=[c.ContextBudget(800, 600, 50)])
    vs = grid.variants()
    assert [(label, p.groups) for label, p, _b in vs] == [
        ("chat|no groups", None),
        ("chat|groups=tool_group", "tool_group"),
    ]
    from test_tool_pairs import table_of, transcript_rows

    res = c.sweep(table_of(transcript_rows(12)), None, grid, on_error="collect")
    t = res.orphan_totals()
    assert t["chat|groups=tool_group"] == (0, 0) and sum(t["chat|no groups"]) > 0


def test_grid_file_and_cli_groups(tmp_path, capsys):
    from test_tool_pairs import transcript_rows

    from cupel_np.cli.app import main
    from cupel_np.model.files import load_grid_file

    pa_rows = pa.Table.from_pylist(transcript_rows(13, n_sets=2))
    import pyarrow.parquet as pq

    items = tmp_path / "items.parquet"
    pq.write_table(pa_rows, items)
    grid = tmp_path / "grid.toml"
    grid.write_text(
        'presets = ["chat"]\ngroups = [false, "tool_group"]\n[[budgets]]\nmax_tokens = 800\ntarget_tokens = 600\n'
    )
    g, _ = load_grid_file(grid)
    assert [p.groups for _l, p, _b in g.variants()] == [None, "tool_group"]
    rc = main(
        ["sweep", str(items), "--grid", str(grid), "--set-column", "conv", "--out", str(tmp_path / "o1"), "--json"]
    )
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["orphans"]["chat|groups=tool_group"] == {"calls": 0, "results": 0}
    rc = main(
        [
            "sensitivity",
            str(items),
            "--preset",
            "chat",
            "--preset",
            "rag",
            "--max-tokens",
            "800",
            "--target-tokens",
            "600",
        ]
        + ["--set-column", "conv", "--groups", "tool_group", "--out", str(tmp_path / "o2"), "--json"]
    )
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert all(v == {"calls": 0, "results": 0} for v in out["orphans"].values())


def test_outputs_carry_the_group_key(tmp_path, capsys):
    """items.parquet (in memory, streamed in chunks, a Dask part, the CLI) carries the group
    column as strings when a variant selects groups, and not otherwise; a report builds from
    the written outputs."""
    import dataclasses

    import numpy as np
    import pandas as pd
    import pyarrow.parquet as pq
    from test_tool_pairs import transcript_rows

    from cupel_np.cli.app import main
    from cupel_np.errors import InvalidConfigError
    from cupel_np.io import dask as cdask
    from cupel_np.io import sweep_parquet, write_sweep
    from cupel_np.model.grid import as_variants
    from cupel_np.report.from_dir import write_dir_report

    rows = transcript_rows(21, n_sets=4)
    want = [r["tool_group"] for r in rows]
    assert any(want) and None in want
    src = pa.Table.from_pylist(rows)
    path = tmp_path / "items.parquet"
    pq.write_table(src, path, row_group_size=40)
    budget = c.ContextBudget(800, 600, 50)
    chat = c.preset("chat")
    vs = [("plain", chat), ("grouped", dataclasses.replace(chat, groups="tool_group"))]

    def key_of(items: pa.Table) -> list:
        items = items.sort_by("input_row")
        assert items.column("input_row").to_pylist() == list(range(len(rows)))
        assert items.schema.field("tool_group").type == pa.string()
        return items.column("tool_group").to_pylist()

    table = c.ItemTable.from_arrow(src, set_column="conv")
    res = c.sweep(table, budget, vs)
    assert key_of(res.items_table()) == want
    assert "tool_group" not in c.sweep(table, budget, vs[:1]).items_table().column_names
    write_sweep(res, tmp_path / "mem")
    assert key_of(pq.read_table(tmp_path / "mem" / "items.parquet")) == want
    totals = sweep_parquet(path, budget, vs, tmp_path / "streamed", set_column="conv", chunk_rows=40)
    assert totals["chunks"] > 1
    assert key_of(pq.read_table(tmp_path / "streamed" / "items.parquet")) == want
    write_dir_report(tmp_path / "streamed")
    # a Dask part: one partition, and one whose group column is all null (pandas: object None)
    v = as_variants(vs, budget, allow_budget=True)
    frame = src.append_column(cdask.ROW, pa.array(np.arange(len(rows), dtype=np.int64))).to_pandas()
    cdask._run_partition(frame, 0, budget, v, "conv", "raise", str(tmp_path / "dk"))
    assert key_of(pq.read_table(tmp_path / "dk" / "items" / "part-00000.parquet")) == want
    none = frame.assign(tool_group=pd.Series([None] * len(frame), dtype=object))
    cdask._run_partition(none, 1, budget, v, "conv", "raise", str(tmp_path / "dk"))
    assert key_of(pq.read_table(tmp_path / "dk" / "items" / "part-00001.parquet")) == [None] * len(rows)
    # integer keys are written as strings
    ints = src.set_column(
        src.schema.get_field_index("tool_group"),
        "tool_group",
        pa.array([hash(k) % 97 if k else None for k in want], pa.int64()),
    )
    got = key_of(c.sweep(c.ItemTable.from_arrow(ints, set_column="conv"), budget, vs).items_table())
    assert got == [None if k is None else str(hash(k) % 97) for k in want]
    # the CLI
    rc = main(
        [
            "sensitivity",
            str(path),
            "--preset",
            "chat",
            "--preset",
            "rag",
            "--max-tokens",
            "800",
            "--target-tokens",
            "600",
        ]
        + ["--set-column", "conv", "--groups", "tool_group", "--out", str(tmp_path / "cli"), "--quiet"]
    )
    assert rc == 0
    assert key_of(pq.read_table(tmp_path / "cli" / "items.parquet")) == want
    capsys.readouterr()
    # a group column with the name of an output column would be written twice
    clash = src.rename_columns([n if n != "tool_group" else "input_row" for n in src.column_names])
    g = [("g", dataclasses.replace(chat, groups="input_row"))]
    r = c.sweep(c.ItemTable.from_arrow(clash, set_column="conv"), budget, g)
    with pytest.raises(InvalidConfigError, match="groups: column 'input_row' has the name of a column"):
        r.items_table()


def test_budget_simulation_and_outcomes_honour_groups():
    """With groups an item's minimum budget is its unit's (find_min_budget_for per item, and
    min_budgets for every row at once, agree); budget curves keep units whole at every budget;
    outcomes count what the grouped selection kept."""
    import dataclasses

    import numpy as np
    from test_tool_pairs import table_of, transcript_rows

    rows = transcript_rows(31, n_sets=2)
    plain = c.Policy(c.RecencyScorer())
    grouped = dataclasses.replace(plain, groups="tool_group")
    table = table_of(rows)
    found = c.min_budgets(table, grouped, 3000)
    mb, err = found.column("min_budget").to_pylist(), found.column("error").to_pylist()
    mb_plain = c.min_budgets(table, plain, 3000).column("min_budget").to_pylist()
    units: dict = {}
    for i, r in enumerate(rows):
        if r["tool_group"] is not None and not r["pinned"]:
            units.setdefault((r["conv"], r["tool_group"]), []).append(i)
    big = [m for m in units.values() if len(m) > 1]
    assert big
    for m in big:
        assert len({mb[i] for i in m}) == 1, m  # one budget for the whole unit
        if mb[m[0]] is not None:
            assert mb[m[0]] >= sum(rows[i]["tokens"] for i in m)
    assert any(len({mb_plain[i] for i in m}) > 1 for m in big)  # without groups they differ
    # the spec's one-item search on each set agrees with the vectorised one
    for conv in ("c0", "c1"):
        idx = [i for i, r in enumerate(rows) if r["conv"] == conv]
        one = table_of([rows[i] for i in idx])
        for k, i in enumerate(idx):
            if err[i] is None:
                assert c.Pipeline(grouped).find_min_budget_for(one, k, 3000) == mb[i], (conv, k)
            else:  # a probed dry run fails (pinned items above the budget): the search raises it
                with pytest.raises(c.CupelError):
                    c.Pipeline(grouped).find_min_budget_for(one, k, 3000)
    # budget curves: units whole at every budget, one min stable budget per unit
    curves = c.budget_curves(table, [("g", grouped)], [300, 600, 1200, 2400])
    inc = curves.run.included  # [budgets, grouped rows]; the table groups the rows by set
    pos = {int(r): k for k, r in enumerate(table.input_row)}
    for m in big:
        for j in range(inc.shape[0]):
            kept = {bool(inc[j, pos[i]]) for i in m}
            assert len(kept) == 1
    stable = curves.rows.column("min_stable_budget").to_pylist()
    assert all(len({stable[i] for i in m}) == 1 for m in big)
    # outcomes: recall of the grouped selection, against a direct count from the items output
    labels = [r["kind"] == "ToolOutput" for r in rows]
    res = c.sweep(table, c.ContextBudget(900, 700), [("g", grouped), ("p", plain)])
    out = res.outcomes_table(labels)
    items = res.items_table()
    for label in ("g", "p"):
        kept = np.array(items.column(f"{label}.included").to_pylist())
        for s, conv in enumerate(("c0", "c1")):
            sel = np.array([r["conv"] == conv for r in rows]) & np.array(labels)
            got = out.filter(pa.compute.equal(out["variant"], label)).column("relevant_included").to_pylist()[s]
            assert got == int((kept & sel).sum())


def test_tune_space_varies_groups_as_a_dimension():
    """A search space's ``groups`` (fixed, or choices such as ``[false, "tool_group"]``) goes
    into every sampled policy: the search sweeps policies with and without groups, those with
    groups leave no orphans."""
    pytest.importorskip("optuna")
    from test_tool_pairs import table_of, transcript_rows

    from cupel_np.errors import InvalidConfigError
    from cupel_np.tuning.search import tune
    from cupel_np.tuning.space import SearchSpace

    space = {
        "scorers": {"recency": {"weight": [0.1, 1.0]}, "kind": {"weight": [0.1, 1.0]}},
        "groups": [False, "tool_group"],
    }
    rows = transcript_rows(41, n_sets=8)
    for r in rows:
        r["relevant"] = r["kind"] == "ToolOutput"
    table = table_of(rows)
    res = tune(table, space, 700, label_column="relevant", trials=16, batch_size=8, seed=3, n_boot=50, holdout=0.25)
    pols = [c.Policy.from_dict(json.loads(p)) for p in res.leaderboard.column("policy").to_pylist()]
    assert {p.groups for p in pols} == {None, "tool_group"}
    board = res.leaderboard.to_pylist()
    for p, row in zip(pols, board, strict=True):
        got = c.sweep(table, c.ContextBudget(row["max_tokens"], row["target_tokens"]), [("x", p)], on_error="collect")
        if p.groups is not None:
            assert got.orphan_totals()["x"] == (0, 0)
    fixed = SearchSpace.from_dict(dict(space, groups="tool_group"))
    assert fixed.config(fixed_trial()).get("groups") == "tool_group"
    assert "groups" not in SearchSpace.from_dict(dict(space, groups=False)).config(fixed_trial())
    with pytest.raises(InvalidConfigError, match="groups: a group column name"):
        SearchSpace.from_dict(dict(space, groups=[False, 3]))
    with pytest.raises(InvalidConfigError, match="groups: a value is given twice"):
        SearchSpace.from_dict(dict(space, groups=["", False]))


def fixed_trial():
    from cupel_np.tuning.space import _LowTrial

    return _LowTrial()


def _claude_session(sid: str, rng) -> list[dict]:
    """One Claude Code session log (records as the CLI writes them): turns of one to three
    tool calls (one assistant message, one record per call) answered in the next records; a
    call whose result never came; a compaction, after which a result answers a call from
    before it (its call was compacted away)."""
    recs: list[dict] = []
    ts = [0]

    def add(kind, content, **extra):
        ts[0] += 1
        r = {
            "type": kind,
            "uuid": f"{sid}-{len(recs)}",
            "parentUuid": recs[-1]["uuid"] if recs else None,
            "sessionId": sid,
            "isSidechain": False,
            "timestamp": f"2026-11-20T{10 + ts[0] // 60:02d}:{ts[0] % 60:02d}:00Z",
            "message": {"role": kind, "content": content},
        }
        if "id" in extra:
            r["message"]["id"] = extra.pop("id")
        r.update(extra)
        recs.append(r)

    def words(lo, hi):
        return " ".join(f"w{int(x)}" for x in rng.integers(0, 10_000, int(rng.integers(lo, hi))))

    def turn(t, n_calls, answered):
        ids = [f"{sid}-t{t}-c{k}" for k in range(n_calls)]
        for cid in ids:
            add(
                "assistant",
                [{"type": "tool_use", "id": cid, "name": "Bash", "input": {"command": words(2, 8)}}],
                id=f"{sid}-m{t}",
            )
        for cid in ids[:answered]:
            add("user", [{"type": "tool_result", "tool_use_id": cid, "content": words(20, 600)}])
        add("assistant", [{"type": "text", "text": words(5, 80)}], id=f"{sid}-r{t}")
        return ids

    add("user", words(5, 40))
    early = []
    for t in range(5):
        n = int(rng.integers(1, 4))
        early += turn(t, n, n if t != 2 else n - 1)  # turn 2: its last call is never answered
    recs.append(
        {
            "type": "system",
            "subtype": "compact_boundary",
            "uuid": f"{sid}-b",
            "parentUuid": None,
            "logicalParentUuid": recs[-1]["uuid"],
            "sessionId": sid,
            "timestamp": "2026-11-20T12:00:00Z",
            "content": "Conversation compacted",
        }
    )
    add("user", "This session is being continued from a previous conversation. " + words(5, 30), isCompactSummary=True)
    add("user", [{"type": "tool_result", "tool_use_id": early[0], "content": words(20, 300)}])  # its call: compacted
    for t in range(5, 9):
        n = int(rng.integers(1, 4))
        turn(t, n, n)
    return recs


def test_imported_logs_every_preset_with_groups_leaves_no_orphans(tmp_path):
    """Issue 29's acceptance: on imported Claude Code logs (multi-call turns, a call with no
    result, a result whose call was compacted away), every preset with groups on leaves 0
    orphans, and with groups off each (variant, set)'s orphan counts equal a direct count from
    the items output."""
    import dataclasses

    import numpy as np
    from test_tool_pairs import direct_counts

    from cupel_np.analysis.toolpairs import tool_links
    from cupel_np.io.importers import import_transcripts
    from cupel_np.model.presets import PRESETS

    rng = np.random.default_rng(7)
    path = tmp_path / "logs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for s in range(8) for r in _claude_session(f"s{s}", rng)))
    imported = import_transcripts("claude-code", path)
    src = imported.table
    table = c.ItemTable.from_arrow(src, set_column=imported.set_column)
    links = tool_links(table)
    assert int(links.unmatched_calls.sum()) >= 8 and int(links.unmatched_results.sum()) >= 8
    calls_per_group: dict = {}
    for r in src.to_pylist():
        if r["tool_role"] == "call":
            calls_per_group[r["tool_group"]] = calls_per_group.get(r["tool_group"], 0) + 1
    assert max(calls_per_group.values()) >= 2  # multi-call turns
    budgets = [c.ContextBudget(4000, 3000, 200), c.ContextBudget(1500, 1200, 100)]
    variants = []
    for name, pol in PRESETS.items():
        for i, b in enumerate(budgets):
            variants.append((f"{name}-{i}", pol, b))
            variants.append((f"{name}-{i}+groups", dataclasses.replace(pol, groups="tool_group"), b))
    res = c.sweep(table, None, variants, on_error="collect")
    items = res.items_table().sort_by("input_row")
    rows = [dict(r, conv=r[imported.set_column]) for r in src.to_pylist()]
    o = res.orphans
    broken = 0
    for v, label in enumerate(res.labels):
        inc = [bool(x) for x in items.column(f"{label}.included").to_pylist()]
        want = direct_counts(rows, inc)
        ok = [s for s in range(table.n_sets) if not res.failed[v, s]]
        assert ok, label
        got = {table.set_keys[s]: (int(o["orphan_calls"][v, s]), int(o["orphan_results"][v, s])) for s in ok}
        if label.endswith("+groups"):
            assert all(x == (0, 0) for x in got.values()), label
        else:
            assert got == {k: want[k] for k in got}, label
            broken += sum(a + b for a, b in got.values())
    assert broken > 0  # without groups the presets do break pairs on these logs
