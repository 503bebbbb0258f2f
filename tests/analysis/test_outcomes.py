"""Outcome metrics (cupel_np.analysis.outcomes): per (variant, set) metrics equal an independent
computation from the oracle's per-set reports (tests/naive.py policy_sensitivity) on random
labelled corpora; paired comparisons and bootstrap intervals on constructed cases with known
answers; label validation; recall against budget."""

import math
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

import cupel_np as c  # noqa: E402
from cupel_np.analysis import outcomes as o  # noqa: E402
from cupel_np.errors import CupelError, InvalidConfigError  # noqa: E402

PROPS = settings(
    max_examples=S.examples(60, 400),
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _label_lists(n):
    boolean = st.lists(st.one_of(st.none(), st.booleans()), min_size=n, max_size=n)
    graded = st.lists(
        st.one_of(st.none(), st.sampled_from([0.0, 0.5, 1.0, 2.0]), st.floats(0, 10, allow_nan=False)),
        min_size=n,
        max_size=n,
    )
    return st.one_of(boolean, graded)


def _oracle_outcomes(rows, keys, variants, labels):
    """Per (variant, set) outcome rows from the oracle's reports, written out plainly."""
    want = naive.policy_sensitivity(rows, variants, keys)
    out = []
    for label, _b, _c in variants:
        for s in want:
            items = [rows[r] for r in s["rows"]]
            labs = [labels[r] for r in s["rows"]]
            labelled = any(x is not None for x in labs)
            content_label, content_tokens = {}, {}
            for it, lab in zip(items, labs):
                v = 0.0 if lab is None else float(lab)
                content_label[it["content"]] = max(content_label.get(it["content"], 0.0), v)
                content_tokens.setdefault(it["content"], max(it["tokens"], 0))
            relevant = [k for k, v in content_label.items() if v > 0]
            swinging = {content for content, _st in s["diffs"]}
            row = {"variant": label, "conv": s["key"], "labelled": labelled}
            rel_tok = sum(content_tokens[k] for k in relevant)
            gain = sum(content_label.values())
            row.update(
                relevant_items=len(relevant) if labelled else None,
                relevant_tokens=rel_tok if labelled else None,
                swing_relevant=len([k for k in relevant if k in swinging]) if labelled else None,
            )
            ok = dict(s["ok"])
            if label not in ok or not labelled:
                row.update(
                    relevant_included=None,
                    item_recall=None,
                    relevant_tokens_included=None,
                    token_recall=None,
                    gain_share=None,
                    included_tokens=None,
                    token_precision=None,
                    swing_relevant_included=None,
                )
                out.append(row)
                continue
            kept = {items[r]["content"] for r, _s, _r in ok[label]["included"]}
            kept_rel = [k for k in relevant if k in kept]
            kept_tok = sum(content_tokens[k] for k in kept)
            kept_rel_tok = sum(content_tokens[k] for k in kept_rel)
            row.update(
                relevant_included=len(kept_rel),
                item_recall=len(kept_rel) / len(relevant) if relevant else None,
                relevant_tokens_included=kept_rel_tok,
                token_recall=kept_rel_tok / rel_tok if rel_tok else None,
                gain_share=sum(content_label[k] for k in kept) / gain if gain else None,
                included_tokens=kept_tok,
                token_precision=kept_rel_tok / kept_tok if kept_tok else None,
                swing_relevant_included=len([k for k in kept_rel if k in swinging]),
            )
            out.append(row)
    return out


@PROPS
@given(case=S.sensitivity_cases(), data=st.data())
def test_outcomes_equal_an_independent_computation_from_the_oracle(case, data):
    rows, keys, variants = case
    labels = data.draw(_label_lists(len(rows)))
    try:
        ours = [(label, c.Policy.from_dict(cfg), c.ContextBudget(**b)) for label, b, cfg in variants]
        want = _oracle_outcomes(rows, keys, variants, labels)
    except (CupelError, naive.NaiveError):
        return  # a config both refuse: covered by the sensitivity tests
    table = c.ItemTable.from_items([dict(d, conv=k) for d, k in zip(rows, keys)], set_column="conv")
    res = c.sweep(table, None, ours, on_error="collect")
    got = res.outcomes_table(o.check_labels(labels, "relevant")).to_pylist()
    assert len(got) == len(want)
    for g, w in zip(got, want):
        for k, wv in w.items():
            gv = g[k]
            if isinstance(wv, float) and gv is not None:
                assert math.isclose(gv, wv, rel_tol=1e-12, abs_tol=1e-12), (k, g, w)
            else:
                assert gv == wv, (k, g, w)


# --------------------------------------------------------------------------- constructed cases
def _doc_or_message_corpus(n_sets=6):
    """Every set: one relevant Document and one Message, room for one of them only."""
    rows, labels = [], []
    for s in range(n_sets):
        rows.append(dict(content=f"doc {s}", tokens=100, kind="Document", conv=f"s{s}"))
        labels.append(True)
        rows.append(dict(content=f"msg {s}", tokens=100, kind="Message", conv=f"s{s}"))
        labels.append(False)
    return c.ItemTable.from_items(rows, set_column="conv"), labels


def _kind_policy(doc, msg):
    return c.Policy.from_dict(
        {
            "scorers": [
                {"type": "kind", "weights": [{"kind": "Document", "weight": doc}, {"kind": "Message", "weight": msg}]}
            ]
        }
    )


def _doc_vs_msg_result():
    table, labels = _doc_or_message_corpus()
    budget = c.ContextBudget(max_tokens=150, target_tokens=150)
    variants = [("docs", _kind_policy(1.0, 0.1)), ("msgs", _kind_policy(0.1, 1.0)), ("docs2", _kind_policy(1.0, 0.2))]
    return c.sweep(table, budget, variants), labels


def test_paired_comparison_of_a_policy_that_always_wins():
    res, labels = _doc_vs_msg_result()
    t = o.paired_comparisons(res, o.check_labels(labels, "relevant"), baseline="msgs").to_pylist()
    by = {r["a"]: r for r in t}
    assert by["docs"] == dict(
        a="docs", b="msgs", metric="token_recall", sets=6, mean_diff=1.0, lo=1.0, hi=1.0, wins=6, ties=0, losses=0
    )
    # the same policy with another weight keeps the same items: all ties, no difference
    assert (by["docs2"]["wins"], by["docs2"]["ties"], by["docs2"]["losses"]) == (6, 0, 0)
    t2 = o.paired_comparisons(res, o.check_labels(labels, "relevant"), pairs=[("docs2", "docs")]).to_pylist()
    assert (t2[0]["mean_diff"], t2[0]["lo"], t2[0]["hi"], t2[0]["ties"]) == (0.0, 0.0, 0.0, 6)


def test_paired_stats_known_answers():
    a = np.array([0.5, 0.6, 0.7, np.nan, 0.2])
    b = np.array([0.4, 0.6, 0.9, 0.1, np.nan])
    r = o.paired_stats(a, b, n_boot=200, seed=1)
    assert (r["sets"], r["wins"], r["ties"], r["losses"]) == (3, 1, 1, 1)
    assert math.isclose(r["mean_diff"], (0.1 + 0.0 - 0.2) / 3)
    # the bootstrap interval of a mean lies within the range of the differences and holds the mean
    assert -0.2 - 1e-12 <= r["lo"] <= r["mean_diff"] <= r["hi"] <= 0.1 + 1e-12
    # a difference present in every set, with noise: the interval excludes 0; pure noise: it holds 0
    rng = np.random.default_rng(0)
    noise = rng.normal(0, 0.05, 400)
    real = o.paired_stats(0.5 + 0.05 + noise, np.full(400, 0.5), seed=3)
    assert real["lo"] > 0 and real["wins"] > real["losses"]
    null = o.paired_stats(0.5 + noise - noise.mean(), np.full(400, 0.5), seed=3)
    assert null["lo"] < 0 < null["hi"]


def test_bootstrap_is_seeded_and_matches_a_plain_resampling():
    rng = np.random.default_rng(5)
    x = rng.random((50, 2))
    x[3, 1] = np.nan
    m1 = o.bootstrap_means(x, n_boot=300, seed=11)
    m2 = o.bootstrap_means(x, n_boot=300, seed=11)
    assert all(np.array_equal(p, q) for p, q in zip(m1, m2))
    assert np.allclose(m1[0], [x[:, 0].mean(), np.nanmean(x[:, 1])])
    # the same interval as resampling sets one draw at a time (counts from the same generator)
    g = np.random.default_rng(11)
    draws = g.integers(0, 50, size=(300, 50))
    means0 = [x[d, 0].mean() for d in draws]
    assert np.allclose([m1[1][0], m1[2][0]], np.quantile(means0, [0.025, 0.975]))


def test_unlabelled_sets_are_left_out_and_counted():
    res, labels = _doc_vs_msg_result()
    labels = [None, None] + labels[2:]  # set s0 has no labelled item
    lab = o.check_labels(labels, "relevant")
    t = res.outcomes_table(lab)
    s0 = [r for r in t.to_pylist() if r["conv"] == "s0"]
    assert all(r["labelled"] is False and r["token_recall"] is None for r in s0)
    summ = {r["variant"]: r for r in o.outcome_summary(res, lab, n_boot=50).to_pylist()}
    assert summ["docs"]["sets_labelled"] == 5 and summ["docs"]["sets_unlabelled"] == 1
    assert summ["docs"]["token_recall"] == 1.0 and summ["msgs"]["token_recall"] == 0.0
    assert summ["msgs"]["token_precision"] == 0.0


def test_graded_gain_share():
    table = c.ItemTable.from_items(
        [dict(content=f"x{i}", tokens=10, priority=i) for i in range(4)]  # priority 3 ranks first
    )
    budget = c.ContextBudget(max_tokens=20, target_tokens=20)
    res = c.sweep(table, budget, [("prio", c.Policy.from_dict({"scorers": [{"type": "priority"}]}))])
    (row,) = res.outcomes_table([0.0, 1.0, 2.0, 3.0]).to_pylist()
    assert row["gain_share"] == 5.0 / 6.0  # rows 2 and 3 kept
    assert (row["relevant_items"], row["relevant_included"], row["item_recall"]) == (3, 2, 2 / 3)


@pytest.mark.parametrize(
    "values, match",
    [
        ([1.0, None, -1.0], r"column 'rel', row 2: negative label \(value -1.0\)"),
        ([0.0, float("nan"), 1.0], r"column 'rel', row 1: not a finite number \(value nan\)"),
        ([0.0, 1.0, float("inf")], r"column 'rel', row 2: not a finite number \(value inf\)"),
        (["yes", "no", "no"], r"label column 'rel': labels must be boolean or non-negative numbers, got type string"),
    ],
)
def test_bad_labels_name_column_row_and_value(values, match):
    with pytest.raises(InvalidConfigError, match=match):
        o.labels_from(pa.table({"content": ["a", "b", "c"], "tokens": [1, 2, 3], "rel": values}), "rel")


def test_label_column_missing_or_wrong_length():
    src = pa.table({"content": ["a", "b"], "tokens": [1, 2], "rel": [True, False]})
    with pytest.raises(InvalidConfigError, match="label column 'relevant' not found"):
        o.labels_from(src, "relevant")
    res = c.sweep(c.ItemTable(src), c.ContextBudget(max_tokens=5, target_tokens=5), [("chat", c.preset("chat"))])
    assert res.outcomes_table("rel").num_rows == 1  # the ItemTable kept the extra column
    with pytest.raises(InvalidConfigError, match="label column 'nope' is not in this ItemTable"):
        res.outcomes_table("nope")
    with pytest.raises(InvalidConfigError, match="has 3 values for 2 items"):
        res.outcomes_table([True, False, True])
    # from a list of dict rows and from a frame-like dict of columns
    assert o.labels_from([{"rel": True}, {"rel": None}], "rel").values.tolist()[0] == 1.0
    assert o.labels_from({"rel": [0.5, 2.0]}, "rel").graded


def test_recall_against_budget_and_the_budget_that_reaches_it():
    rows = [dict(content=f"r{i}", tokens=100 * (i + 1), kind="Document") for i in range(4)]
    table = c.ItemTable.from_items(rows)
    labels = o.check_labels([True, True, True, False], "rel")
    ladder = [100, 300, 600, 1000]
    curves = c.budget_curves(table, [("docs", _kind_policy(1.0, 0.1))], ladder)
    recall, reach = o.budget_outcomes(curves, labels, reach=(0.5, 0.9, 1.0))
    want = []
    for b in ladder:  # the same numbers from one plain sweep per budget
        res = c.sweep(table, c.ContextBudget(max_tokens=b, target_tokens=b), [("docs", _kind_policy(1.0, 0.1))])
        want.append(res.outcomes_table(labels).column("token_recall")[0].as_py())
    assert recall.column("token_recall").to_pylist() == want
    first = {f: next((b for b, r in zip(ladder, want) if r >= f), None) for f in (0.5, 0.9, 1.0)}
    assert {r["fraction"]: r["budget"] for r in reach.to_pylist()} == first


def test_outcome_counts_are_the_same_for_any_thread_count():
    table, labels = _doc_or_message_corpus(n_sets=5)
    budget = c.ContextBudget(max_tokens=150, target_tokens=150)
    variants = [(f"v{i}", _kind_policy(1.0 + (i % 7), 0.5 + (i % 5))) for i in range(70)]  # 3 chunks of variants
    res = c.sweep(table, budget, variants)
    lab = o.check_labels(labels, "relevant")
    one, two = o.outcome_matrices(res, lab, threads=1), o.outcome_matrices(res, lab, threads=2)
    for name in ("relevant_included", "relevant_tokens_included", "included_tokens", "gain_included"):
        assert np.array_equal(getattr(one, name), getattr(two, name))
    assert one.relevant_included.sum() > 0


def test_reuse_labels_mark_tool_outputs_quoted_later(tmp_path):
    import json

    from cupel_np.io.importers import distinctive_strings, import_transcripts, reuse_labels

    conv = {
        "id": "c1",
        "messages": [
            {"role": "user", "content": "why does the build fail?"},
            {"role": "tool", "content": "error in src/cache_layer.py line 1207: KeyError", "tool_call_id": "a"},
            {"role": "tool", "content": "all 52 tests passed", "tool_call_id": "b"},
            {"role": "assistant", "content": "The KeyError comes from src/cache_layer.py; fixing it."},
            {"role": "tool", "content": "wrote src/other_module.py", "tool_call_id": "c"},
        ],
    }
    early = {
        "id": "c2",
        "messages": [
            {"role": "assistant", "content": "I will look at deploy/k8s.yaml"},  # before the output: no credit
            {"role": "tool", "content": "contents of deploy/k8s.yaml", "tool_call_id": "d"},
        ],
    }
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(conv) + "\n" + json.dumps(early) + "\n")
    res = import_transcripts("openai", path)
    labels = reuse_labels(res.table, res.set_column).to_pylist()
    kinds = res.table.column("kind").to_pylist()
    assert [l for l, k in zip(labels, kinds) if k == "ToolOutput"] == [True, False, False, False]
    assert all(l is None for l, k in zip(labels, kinds) if k != "ToolOutput")
    assert {"src/cache_layer.py", "1207"} <= distinctive_strings("error in src/cache_layer.py line 1207")
    assert o.check_labels(labels, "reused").values.shape == (len(kinds),)  # usable as outcome labels


def test_label_column_read_from_the_item_table_itself():
    """An ItemTable keeps the input's extra columns, so a sweep's outcomes can name the label
    column directly; the values are the source table's, row for row."""
    import pyarrow.parquet as pq

    from cupel_np.analysis.outcomes import labels_from

    src = pq.read_table(Path(__file__).resolve().parents[2] / "data" / "sample_sessions.parquet").slice(0, 600)
    t = c.ItemTable.from_arrow(src, set_column="session_id")
    assert "relevant" in t.extra_columns
    r = c.sweep(t, c.ContextBudget(4000, 3000), c.Sweep(["chat", "rag"]), progress=False)
    by_name = r.outcomes_table("relevant")
    assert by_name.num_rows == 2 * t.n_sets
    assert by_name.equals(r.outcomes_table(labels_from(src, "relevant")))
    with pytest.raises(c.InvalidConfigError, match="label column 'nope'"):
        r.outcomes_table("nope")


@pytest.mark.parametrize("order", ["speaker-first", "output-first", "interleaved"])
def test_reuse_labels_never_cross_conversations(order):
    """Issue 27: a planted bug that let a string said in one conversation label an output in
    another survived the suite. Conversation "b"'s assistant quotes src/shared_util.py, which
    only conversation "a"'s tool output holds: a's output stays unlabelled-relevant (False)
    whatever the row order."""
    from cupel_np.io.importers import reuse_labels

    a = [("a", "ToolOutput", "tool", "read src/shared_util.py: 41 lines")]
    b = [
        ("b", "ToolOutput", "tool", "listing of docs/"),
        ("b", "Message", "assistant", "Now I will edit src/shared_util.py and docs/index.md"),
    ]
    rows = {"speaker-first": b + a, "output-first": a + b, "interleaved": [b[0], a[0], b[1]]}[order]
    table = pa.table(
        {
            "conversation_id": [r[0] for r in rows],
            "kind": [r[1] for r in rows],
            "content": [r[3] for r in rows],
            "metadata": pa.array([[("role", r[2])] for r in rows], pa.map_(pa.string(), pa.string())),
        }
    )
    labels = dict(zip([r[3] for r in rows], reuse_labels(table).to_pylist()))
    assert labels["read src/shared_util.py: 41 lines"] is False
    assert labels["listing of docs/"] is False  # "docs/" alone is not one of b's later strings
    assert labels["Now I will edit src/shared_util.py and docs/index.md"] is None
