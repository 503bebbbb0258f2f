"""Evaluation and search on real signals (issue 30): a search space with several column
scorers, constant scorers detected and warned about, best policies that are distinct
behaviours, knapsack settings that keep nothing flagged."""

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import cupel_np as c
from cupel_np.analysis.signals import (
    ROUNDING_LOSS_SHARE,
    constant_sets,
    knapsack_checks,
    policy_scorer_names,
    scorer_constancy,
    token_counter_of,
)
from cupel_np.errors import InvalidConfigError
from cupel_np.tuning import SearchSpace, tune, write_tune
from cupel_np.tuning.space import ParamsTrial, _LowTrial
from cupel_np.tuning.synthetic import mix_corpus

TWO_COLUMNS = {
    "scorers": {
        "max": 3,
        "column": {"similarity": {"weight": [0.1, 3.0]}, "position": {"weight": [0.1, 3.0]}},
        "recency": {"weight": [0.1, 3.0]},
    },
    "slicers": {"greedy": {}},
}


# --------------------------------------------------------------------------- space shapes
def test_a_space_holds_several_column_scorers_each_with_its_own_range():
    sp = SearchSpace.from_dict(TWO_COLUMNS)
    assert [s.name for s in sp.scorers] == ["column:similarity", "column:position", "recency"]
    assert [s.type for s in sp.scorers] == ["column", "column", "recency"]
    d = sp.distributions()
    assert {"scorer.column:similarity.weight", "scorer.column:position.weight", "scorer.recency.weight"} <= set(d)
    cfg = sp.config(_LowTrial())  # every optional scorer used, low weights
    cols = [e["column"] for e in cfg["scorers"] if e["type"] == "column"]
    assert cols == ["similarity", "position"]
    pol = c.Policy.from_dict(cfg)
    assert policy_scorer_names(pol) == "column:similarity 0.33 + column:position 0.33 + recency 0.33"


def test_column_tables_by_quoted_name_and_named_entries_of_any_type():
    sp = SearchSpace.from_dict(
        {
            "scorers": {
                "column:rerank": {"weight": [0.5, 2.0], "default": 0.25},
                "fresh": {"type": "Recency", "weight": 1.0},
                "other": {"type": "column", "column": "bm25"},
                "Metadata-Trust": {},
            },
            "slicers": {"Knapsack": {"bucket_size": 50}},
        }
    )
    assert [(s.name, s.type) for s in sp.scorers] == [
        ("column:rerank", "column"),
        ("fresh", "recency"),
        ("other", "column"),
        ("metadata_trust", "metadata_trust"),
    ]
    assert sp.slicers[0][0] == "knapsack"
    cfg = sp.config(_LowTrial())
    assert cfg["scorers"][0] == {"type": "column", "weight": 0.5, "default": 0.25, "column": "rerank"}
    assert cfg["scorers"][2]["column"] == "bm25"


def test_the_single_column_table_still_reads_and_keeps_its_parameter_names():
    sp = SearchSpace.from_dict({"scorers": {"column": {"column": "similarity", "weight": [0.1, 3.0]}}})
    assert [(s.name, s.type) for s in sp.scorers] == [("column", "column")]
    assert "scorer.column.weight" in sp.distributions()
    params = {"scorer.column.use": True, "scorer.column.weight": 2.0}
    assert sp.config(ParamsTrial(params))["scorers"] == [{"type": "column", "weight": 2.0, "column": "similarity"}]


def test_several_signal_space_errors_name_the_table():
    with pytest.raises(InvalidConfigError, match="'column:similarity' appears twice"):
        SearchSpace.from_dict({"scorers": {"column": {"similarity": {}}, "column:similarity": {}}})
    with pytest.raises(InvalidConfigError, match="scorers.column.x: the table name gives the column"):
        SearchSpace.from_dict({"scorers": {"column": {"x": {"column": "y"}}}})
    with pytest.raises(InvalidConfigError, match="scorers.two: a column scorer needs 'column'"):
        SearchSpace.from_dict({"scorers": {"two": {"type": "column"}}})
    with pytest.raises(InvalidConfigError, match="unknown scorer type 'column2'"):
        SearchSpace.from_dict({"scorers": {"column2": {"column": "x"}}})
    with pytest.raises(InvalidConfigError, match="names slicer 'greedy' a second time"):
        SearchSpace.from_dict({"scorers": {"kind": {}}, "slicers": {"greedy": {}, "Greedy": {}}})


# --------------------------------------------------------------------------- constant scorers
def test_constant_sets_counts_only_sets_of_two_or_more_and_nan_equals_only_nan():
    scores = np.array([1.0, 1.0, 0.5, 0.7, 3.0, np.nan, np.nan, np.nan, 2.0])
    off = np.array([0, 2, 4, 5, 7, 9])
    checked, constant = constant_sets(scores, off)
    assert checked.tolist() == [True, True, False, True, True]
    assert constant.tolist() == [True, False, False, True, False]


def _no_timestamps(n_sets=3, per=4):
    rows = []
    for s in range(n_sets):
        for i in range(per):
            rows.append(
                {
                    "session_id": f"s{s}",
                    "content": f"item {s}-{i}",
                    "tokens": 30,
                    "kind": "Document" if s == 0 else ["Document", "Message"][i % 2],
                    "similarity": None if s == 2 else float(i),
                }
            )
    return c.ItemTable(pa.Table.from_pylist(rows), set_column="session_id")


def test_a_sweep_names_the_scorers_constant_on_each_set():
    t = _no_timestamps()
    variants = [
        ("recency", c.Policy.from_dict({"scorers": [{"type": "recency"}]})),
        (
            "mix",
            c.Policy.from_dict(
                {"scorers": [{"type": "kind"}, {"type": "column", "column": "similarity", "default": 0.0}]}
            ),
        ),
    ]
    res = c.sweep(t, c.ContextBudget(max_tokens=60, target_tokens=60), variants)
    con = scorer_constancy(res)
    assert con.names == ["recency", "kind", "column:similarity"]
    assert con.sets_constant() == {"recency": 3, "kind": 1, "column:similarity": 1}
    assert con.all_constant.tolist() == [[True, True, True], [False, False, False]]
    assert (
        con.summary_line() == "constant scorers: recency on 3/3 sets, kind on 1/3 sets, column:similarity on 1/3 sets"
    )
    vt = res.variants_table().to_pylist()
    assert [r["constant_scorers"] for r in vt] == [["recency"]] * 3 + [["kind"], [], ["column:similarity"]]


# --------------------------------------------------------------------------- knapsack footguns
def test_a_bucket_above_the_target_is_flagged_and_the_empty_selection_visible():
    t = _no_timestamps(2, 4)
    variants = [
        ("big_bucket", c.Policy.from_dict({"slicer": "knapsack", "bucket_size": 100, "scorers": [{"type": "kind"}]})),
        ("rounding", c.Policy.from_dict({"slicer": "knapsack", "bucket_size": 30, "scorers": [{"type": "kind"}]})),
        ("greedy", c.Policy.from_dict({"scorers": [{"type": "kind"}]})),
    ]
    res = c.sweep(t, c.ContextBudget(max_tokens=80, target_tokens=80), variants, on_error="collect")
    k = knapsack_checks(res)
    assert k.capacity.tolist() == [[0, 0], [2, 2], [-1, -1]]
    assert k.zero_capacity.tolist() == [[True, True], [False, False], [False, False]]
    assert k.rounding_loss[1].tolist() == [20 / 80] * 2 and not k.rounding_flag.any()  # 25 % is the limit
    assert k.selected_nothing.tolist() == [[True, True], [False, False], [False, False]]
    assert not res.failed.any()  # nothing failed: the empty selection is seen only here
    lines = k.lines(res.labels)
    assert lines == [
        "big_bucket: knapsack bucket 100 is above the effective target on 2 sets (zero capacity: it can keep nothing there)",
        "big_bucket: selected nothing from 2 non-empty sets (an item fitted the target)",
    ]
    res2 = c.sweep(t, c.ContextBudget(max_tokens=70, target_tokens=70), variants[1:2])
    k2 = knapsack_checks(res2)
    assert k2.rounding_loss[0, 0] == pytest.approx(10 / 70) and ROUNDING_LOSS_SHARE == 0.25
    res3 = c.sweep(t, c.ContextBudget(max_tokens=59, target_tokens=59), variants[1:2])
    assert knapsack_checks(res3).rounding_flag.all()  # 29 of 59 tokens lost to rounding
    vt = res.variants_table().to_pylist()
    assert [r["knapsack_capacity"] for r in vt] == [0, 0, 2, 2, None, None]
    assert [r["selected_nothing"] for r in vt] == [True, True, False, False, False, False]


# --------------------------------------------------------------------------- the search
@pytest.fixture(scope="module")
def mixed():
    return mix_corpus(n_sets=80, items_per_set=30, seed=4)


def test_a_search_over_two_columns_and_recency_ranks_a_mix_first_and_warns(mixed, tmp_path):
    """Issue 30's done-when: relevance follows a mix of two columns, there are no timestamps."""
    res = tune(
        mixed,
        TWO_COLUMNS,
        1200,
        label_column="relevant",
        set_column="session_id",
        trials=64,
        batch_size=32,
        seed=1,
        n_boot=100,
    )
    first = res.best[0][1].to_dict()["scorers"]
    assert sorted(e["column"] for e in first if e["type"] == "column") == ["position", "similarity"]
    lb = res.leaderboard.to_pylist()
    assert any("column:similarity" in (r["scorers"] or "") and "column:position" in r["scorers"] for r in lb)
    n = res.constant_checked
    assert n == res.search_sets and res.constant_scorers["recency"] == n
    assert any(w.startswith("recency gave one value to every scoreable item") for w in res.warnings)
    # the best five are five behaviours: no two select the same items on the search sets
    variants = [(label, pol, b) for label, pol, b in res.best]
    swept = c.sweep(c.ItemTable(mixed, set_column="session_id"), None, variants)
    cols = {swept.status[:, v].tobytes() for v in range(len(variants))}
    assert len(res.best) == 5 and len(cols) == 5
    cmp = res.comparison.to_pylist()
    assert "equivalents" in res.comparison.column_names and cmp[0]["label"] == res.best[0][0]
    # the outputs say it too: summary.json and the page
    paths = write_tune(res, tmp_path / "out")
    summary = json.loads(Path(paths["summary"]).read_text())
    assert summary["warnings"] == res.warnings and summary["constant_scorers"]["constant"]["recency"] == n
    assert summary["best_scorers"][0].startswith("column:")
    page = Path(paths["report"]).read_text()
    assert f"recency on {n}/{n}" in page and 'id="warnings"' in page
    assert "no token counter recorded" in page and summary["token_counter"] == res.token_counter
    best1 = Path(paths["best-1"]).read_text()
    assert f"# scorers: {policy_scorer_names(res.best[0][1])}" in best1
    assert c.Policy.from_file(paths["best-1"]) == res.best[0][1].__class__.from_dict(res.best[0][1].to_dict())


def test_the_token_counter_named_in_the_items_metadata_is_stated(mixed):
    assert token_counter_of(None) == "the items' tokens column (no token counter recorded)"
    meta = {b"cupel_np.token_counter": b"tiktoken:o200k_base", b"cupel_np.token_calibration": b"usage x1.07"}
    assert token_counter_of(meta) == "counted by tiktoken:o200k_base, calibrated: usage x1.07"
    space = {"scorers": {"column": {"similarity": {}}}, "slicers": {"greedy": {}}}
    res = tune(
        mixed.replace_schema_metadata(meta),
        space,
        1200,
        label_column="relevant",
        set_column="session_id",
        trials=4,
        batch_size=4,
        n_boot=20,
    )
    assert res.token_counter == "counted by tiktoken:o200k_base, calibrated: usage x1.07"


def test_policies_with_the_same_selections_are_one_best_entry_with_their_equivalents(mixed):
    """One column under different weights (and recency, constant) selects the same items: the
    best list holds it once and names the others as its equivalents."""
    space = {"scorers": {"column": {"similarity": {}}, "recency": {}}, "slicers": {"greedy": {}}}
    res = tune(
        mixed,
        space,
        1200,
        label_column="relevant",
        set_column="session_id",
        trials=24,
        batch_size=12,
        seed=2,
        n_boot=50,
    )
    swept = c.sweep(c.ItemTable(mixed, set_column="session_id"), None, list(res.best))
    assert len({swept.status[:, v].tobytes() for v in range(len(res.best))}) == len(res.best)
    assert sum(len(v) for v in res.equivalents.values()) > 0
    top = res.best[0][0]
    assert res.equivalents[top] and all(e.startswith("trial-") for e in res.equivalents[top])
    # recency is constant everywhere: every best policy using it is named in a warning, and the
    # one using it alone is said to keep items by input order
    for i, (label, pol, _b) in enumerate(res.best, start=1):
        types = [s["type"] for s in pol.to_dict()["scorers"]]
        mine = [w for w in res.warnings if w.startswith(f"best #{i} {label} ")]
        assert bool(mine) == ("recency" in types)
        assert any("by input order" in w for w in mine) == (types == ["recency"])


# --------------------------------------------------------------------------- budget outcomes
def test_a_labelled_budget_run_writes_recall_against_budget_and_the_budget_reaching_each_share(mixed, tmp_path, capsys):
    import pyarrow.parquet as pq

    from cupel_np.report.budget import print_outcomes, write_budget_outputs

    table = c.ItemTable(mixed.slice(0, 600), set_column="session_id")
    curves = c.budget_curves(table, ["chat", "rag"], c.budget_ladder(200, 6400, 6))
    paths = write_budget_outputs(curves, tmp_path / "b", title="t", labels="relevant")
    recall = pq.read_table(paths["outcomes"])
    reach = pq.read_table(paths["outcome_reach"])
    assert recall.num_rows == 2 * 6 and reach.num_rows == 2 * 3
    want_recall, want_reach = c.analysis.outcomes.budget_outcomes(curves, "relevant")
    assert recall.equals(want_recall) and reach.equals(want_reach)
    page = Path(paths["report"]).read_text()
    assert 'id="recall-by-budget"' in page and 'id="recall-reach"' in page and "no token counter recorded" in page
    print_outcomes(recall, reach, "relevant")
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "token recall by 'relevant' (pooled over the labelled sets) against budget:"
    top = {r["variant"]: r["token_recall"] for r in recall.to_pylist() if r["budget"] == 6400}
    assert out[2].split()[:2] == ["chat", f"{top['chat']:.3f}"]


# --------------------------------------------------------------------------- page data
def test_relevant_losses_add_up_to_what_each_variant_missed(mixed):
    from cupel_np.analysis.losses import check_lines, outcome_page_data, relevant_losses
    from cupel_np.analysis.outcomes import outcome_matrices

    table = c.ItemTable(mixed.slice(0, 900), set_column="session_id")
    variants = [
        ("sim", c.Policy.from_dict({"scorers": [{"type": "column", "column": "similarity"}]})),
        ("recency", c.Policy.from_dict({"scorers": [{"type": "recency"}]})),
        ("bucket", c.Policy.from_dict({"slicer": "knapsack", "bucket_size": 2000, "scorers": [{"type": "recency"}]})),
    ]
    res = c.sweep(table, c.ContextBudget(max_tokens=1000, target_tokens=1000), variants)
    losses = relevant_losses(res, "relevant").to_pylist()
    m = outcome_matrices(res, "relevant")
    for v, label in enumerate(res.labels):
        missed = int((m.relevant_items - m.relevant_included[v])[m.labelled & ~m.failed[v]].sum())
        assert sum(x["relevant_lost"] for x in losses if x["variant"] == label) == missed
    assert {x["reason"] for x in losses if x["variant"] == "bucket"} == {"BudgetExceeded"}
    lines = check_lines(res)
    assert lines[0] == "constant scorers: recency on 30/30 sets"
    assert "bucket: knapsack bucket 2000 is above the effective target on 30 sets" in lines[1]
    assert lines[2] == "bucket: selected nothing from 30 non-empty sets (an item fitted the target)"
    o = outcome_page_data(res, "relevant", n_boot=50)
    assert [r["variant"] for r in o["summary"]] == res.labels and [p["a"] for p in o["paired"]] == ["recency", "bucket"]
    assert o["summary"][2]["token_recall"] == 0.0


def test_the_checks_read_back_from_a_written_variants_table(mixed):
    from cupel_np.analysis.losses import check_lines, check_lines_of_variants

    table = c.ItemTable(mixed.slice(0, 300), set_column="session_id")
    variants = [
        ("recency", c.Policy.from_dict({"scorers": [{"type": "recency"}]})),
        ("bucket", c.Policy.from_dict({"slicer": "knapsack", "bucket_size": 2000, "scorers": [{"type": "kind"}]})),
    ]
    res = c.sweep(table, c.ContextBudget(max_tokens=1000, target_tokens=1000), variants)
    vt = res.variants_table()
    halves = pa.concat_tables([vt.slice(0, 7), vt.slice(7)])  # as chunks of a streamed run
    assert check_lines_of_variants(halves) == [
        "constant scorers: recency on 10/10 sets, kind on 10/10 sets",
        "bucket: knapsack bucket is above the effective target on 10 sets (zero capacity)",
        "bucket: selected nothing from 10 non-empty sets (an item fitted the target)",
    ]
    assert check_lines(res)[0] == "constant scorers: recency on 10/10 sets, kind on 10/10 sets"


def test_the_outcomes_section_data_from_a_written_outcomes_table_equals_the_in_memory_one(mixed):
    from cupel_np.analysis.losses import outcome_page_data, outcome_page_data_of_table

    table = c.ItemTable(mixed.slice(0, 900), set_column="session_id")
    variants = [
        ("sim", c.Policy.from_dict({"scorers": [{"type": "column", "column": "similarity"}]})),
        ("pos", c.Policy.from_dict({"scorers": [{"type": "column", "column": "position"}]})),
    ]
    res = c.sweep(table, c.ContextBudget(max_tokens=1000, target_tokens=1000), variants)
    mem = outcome_page_data(res, "relevant", n_boot=80)
    written = outcome_page_data_of_table(res.outcomes_table("relevant"), res.labels, "relevant", n_boot=80)
    assert written["summary"] == mem["summary"] and written["paired"] == mem["paired"]
    assert [(x["variant"], x["relevant_lost"]) for x in written["losses"]] == [
        (v, sum(x["relevant_lost"] for x in mem["losses"] if x["variant"] == v)) for v in res.labels
    ]


# --------------------------------------------------------------------------- the commands
def _items_file(mixed, tmp_path, n=600):
    path = tmp_path / "items.parquet"
    import pyarrow.parquet as pq

    pq.write_table(mixed.slice(0, n), path)
    return path


def test_cli_tune_prints_the_behaviours_constant_scorers_and_warnings(mixed, tmp_path, capsys):
    from cupel_np import cli

    space = tmp_path / "space.toml"
    space.write_text(
        "[scorers]\nmax = 3\n[scorers.column.similarity]\nweight = [0.1, 3.0]\n"
        "[scorers.column.position]\nweight = [0.1, 3.0]\n[scorers.Recency]\nweight = [0.1, 3.0]\n[slicers.greedy]\n"
    )
    items = _items_file(mixed, tmp_path, 1500)
    argv = ["tune", str(items), "--space", str(space), "--label-column", "relevant", "--set-column", "session_id"]
    argv += ["--trials", "16", "--batch-size", "8", "--max-tokens", "1200", "--out", str(tmp_path / "t"), "--quiet"]
    assert cli.main(argv) == 0
    cap = capsys.readouterr()
    assert "best #1 trial-" in cap.out and "column:" in cap.out
    assert "constant scorers on the search sets: recency on " in cap.out
    assert "warning: recency gave one value to every scoreable item" in cap.err


def test_cli_sensitivity_prints_the_checks_and_its_page_has_outcomes(mixed, tmp_path, capsys):
    from cupel_np import cli

    items = _items_file(mixed, tmp_path)
    pol = tmp_path / "policies.toml"
    pol.write_text(
        '[[variants]]\nlabel = "rag"\npreset = "rag"\n[[variants]]\nlabel = "big_bucket"\n[variants.config]\n'
        'slicer = "knapsack"\nbucket_size = 2000\n[[variants.config.scorers]]\ntype = "kind"\n'
    )
    argv = ["sensitivity", str(items), "--set-column", "session_id", "--policies", str(pol)]
    argv += [
        "--max-tokens",
        "1000",
        "--target-tokens",
        "1000",
        "--label-column",
        "relevant",
        "--out",
        str(tmp_path / "s"),
    ]
    assert cli.main(argv + ["--quiet"]) == 0
    out = capsys.readouterr().out
    assert "check: big_bucket: knapsack bucket 2000 is above the effective target on 20 sets" in out
    assert "check: big_bucket: selected nothing from 20 non-empty sets (an item fitted the target)" in out
    page = (tmp_path / "s" / "report.html").read_text()
    assert 'id="outcomes"' in page and 'id="outcome-losses"' in page and 'id="check-lines"' in page
    assert cli.main(argv + ["--json", "--overwrite", "--quiet"]) == 0
    js = json.loads(capsys.readouterr().out)
    assert any("selected nothing" in line for line in js["checks"])


def test_cli_budget_with_labels_gives_recall_against_budget(mixed, tmp_path, capsys):
    from cupel_np import cli

    items = _items_file(mixed, tmp_path)
    argv = ["budget", str(items), "--set-column", "session_id", "--preset", "chat", "--preset", "rag"]
    argv += ["--ladder", "200:6400:6", "--label-column", "relevant", "--out", str(tmp_path / "b"), "--quiet"]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "token recall by 'relevant' (pooled over the labelled sets) against budget:" in out
    assert "tokens: the items' tokens column (no token counter recorded)" in out
    assert (tmp_path / "b" / "outcomes.parquet").is_file() and (tmp_path / "b" / "outcome_reach.parquet").is_file()
    assert cli.main(argv + ["--json", "--overwrite"]) == 0
    js = json.loads(capsys.readouterr().out)
    assert set(js["outcomes"]) == {"chat", "rag"} and set(js["outcomes"]["chat"]["reach"]) == {"90%", "95%", "99%"}
    assert cli.main([*argv[:-5], "--label-column", "nope", "--out", str(tmp_path / "c")]) == 2
    assert "label column 'nope'" in capsys.readouterr().err
