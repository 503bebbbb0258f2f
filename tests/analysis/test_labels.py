"""Labels from what the agent used (``cupel_np.analysis.labels.usage_labels``), measured on
generated sessions with known use (tests/agent_sessions.py): precision and recall, the
corpus-rarity weighting and the tool-call evidence each shown to matter, the evidence column,
the graded form feeding gain_share."""

import numpy as np
import pyarrow as pa
import pytest
from agent_sessions import sessions

import cupel_np as c
from cupel_np.analysis import outcomes
from cupel_np.analysis.labels import usage_labels, usage_strings
from cupel_np.errors import InvalidConfigError
from cupel_np.io.importers import reuse_labels


def _scores(table: pa.Table, labels) -> dict:
    """Precision, recall and the share of tool-output tokens labelled used."""
    out = np.array([k == "ToolOutput" for k in table.column("kind").to_pylist()])
    truth = np.array([bool(x) for x in table.column("truth_used").to_pylist()])
    lab = np.array([bool(x) for x in labels])
    tok = np.array(table.column("tokens").to_pylist())
    tp, fp, fn = (lab & truth & out).sum(), (lab & ~truth & out).sum(), (~lab & truth & out).sum()
    return {
        "precision": tp / (tp + fp),
        "recall": tp / (tp + fn),
        "token_share": tok[lab & out].sum() / tok[out].sum(),
        "truth_token_share": tok[truth & out].sum() / tok[out].sum(),
    }


@pytest.fixture(scope="module", params=[0, 1])
def corpus(request):
    return sessions(40, 10, seed=request.param)


def test_precision_and_recall_on_generated_sessions(corpus):
    """The numbers docs/outcomes.md quotes: all quoted or acted-on outputs found, none of the
    unused ones, and the paraphrased test runs missed (they hold no string the agent reused)."""
    new = _scores(corpus, usage_labels(corpus).column("used").to_pylist())
    old = _scores(corpus, reuse_labels(corpus).to_pylist())
    assert new["precision"] >= 0.99 and 0.7 <= new["recall"] <= 0.8
    assert old["precision"] < 0.75 and old["recall"] < 0.7
    # independent of output size: the labelled outputs hold about the tool-output tokens the
    # truly used ones hold, where the old rule's "relevant" outputs hold most of them
    assert abs(new["token_share"] - new["truth_token_share"]) < 0.02
    assert old["token_share"] > 0.8
    kinds = corpus.column("truth_kind").to_pylist()
    used = usage_labels(corpus).column("used").to_pylist()
    missed = {kinds[i] for i, u in enumerate(used) if u is False and corpus.column("truth_used")[i].as_py()}
    assert missed == {"paraphrase"}


def test_without_the_rarity_weighting_project_wide_names_count(corpus):
    with_r = _scores(corpus, usage_labels(corpus).column("used").to_pylist())
    without = _scores(corpus, usage_labels(corpus, rarity=False).column("used").to_pylist())
    assert with_r["precision"] - without["precision"] > 0.1
    assert without["token_share"] > 0.3  # the big listings of shared names come back
    # one case: a listing of project-wide names, which a later message of every session names
    rows = []
    for s in range(10):
        rows += [
            {"conversation_id": f"c{s}", "kind": "ToolOutput", "content": "acme_core settings_loader", "role": "tool"},
            {"conversation_id": f"c{s}", "kind": "Message", "content": "Now acme_core.", "role": "assistant"},
        ]
    t = pa.Table.from_pylist([dict(r, tags=[r.pop("role")]) for r in rows])
    assert usage_labels(t).column("used").to_pylist()[::2] == [False] * 10
    assert usage_labels(t, rarity=False).column("used").to_pylist()[::2] == [True] * 10


def test_without_tool_call_evidence_outputs_acted_on_are_missed(corpus):
    with_t = _scores(corpus, usage_labels(corpus).column("used").to_pylist())
    without = _scores(corpus, usage_labels(corpus, tool_calls=False).column("used").to_pylist())
    assert with_t["recall"] - without["recall"] > 0.3
    kinds = corpus.column("truth_kind").to_pylist()
    lab = usage_labels(corpus, tool_calls=False).column("used").to_pylist()
    assert not any(lab[i] for i, k in enumerate(kinds) if k in ("edit", "path"))


def _session(*rows):
    out = []
    for kind, role, content, md in rows:
        out.append(
            {"conversation_id": "s", "kind": kind, "content": content, "tags": [role], "metadata": list(md.items())}
        )
    return pa.Table.from_pylist(out, schema=_SCHEMA)


_SCHEMA = pa.schema(
    [
        ("conversation_id", pa.string()),
        ("kind", pa.string()),
        ("content", pa.string()),
        ("tags", pa.list_(pa.string())),
        ("metadata", pa.map_(pa.string(), pa.string())),
    ]
)


def test_the_evidence_names_the_later_step_and_the_string():
    t = _session(
        ("Message", "user", "Fix src/app.py please", {"role": "user"}),
        ("ToolCall", "assistant", 'Read({"file_path": "src/util.py"})', {"tool_call_id": "a", "tool_name": "Read"}),
        ("ToolOutput", "tool", "def frobnicate_widget(x): pass", {"tool_call_id": "a"}),
        ("ToolCall", "assistant", 'Read({"file_path": "src/app.py"})', {"tool_call_id": "b", "tool_name": "Read"}),
        ("ToolOutput", "tool", "import os", {"tool_call_id": "b"}),
        ("ToolCall", "assistant", 'Edit({"file_path": "src/app.py"})', {"tool_call_id": "c", "tool_name": "Edit"}),
        ("Message", "assistant", "I will call frobnicate_widget from src/util.py.", {"role": "assistant"}),
    )
    lab = usage_labels(t, set_column="conversation_id")
    assert lab.column("used").to_pylist() == [None, None, True, None, False, None, None]
    ev = lab.column("evidence").to_pylist()[2]
    assert ev == "row 6 assistant: 'frobnicate_widget' (1.00); row 6 assistant: 'src/util.py' (1.00)"
    assert lab.column("evidence_row").to_pylist()[2] == 6
    # the Read of src/app.py is not credited with the path: the user's prompt named it first
    assert lab.column("used_grade").to_pylist()[4] == 0.0


def test_the_graded_form_feeds_gain_share(corpus):
    lab = usage_labels(corpus)
    grade = lab.column("used_grade").to_pylist()
    assert all(g is None or 0.0 <= g <= 1.0 for g in grade)
    assert any(g is not None and 0.0 < g < 1.0 for g in grade)  # part of an output reused
    table = corpus.append_column("used_grade", lab.column("used_grade"))
    items = c.ItemTable(table, set_column="conversation_id")
    res = c.sweep(
        items, c.ContextBudget(max_tokens=400, target_tokens=400), [(n, c.preset(n)) for n in ("chat", "tool_use")]
    )
    summary = outcomes.outcome_summary(res, "used_grade", n_boot=50).to_pylist()
    assert all(0.0 <= r["gain_share"] <= 1.0 for r in summary)
    assert outcomes.labels_from(items, "used_grade").graded


def test_usage_strings_and_option_errors():
    assert usage_strings("see src/app.py: parse_header at 1234, e.g. fooBar and someverylongword.") == {
        "src/app.py",
        "parse_header",
        "1234",
        "fooBar",
        "someverylongword",
    }
    with pytest.raises(InvalidConfigError, match="min_rarity must be in"):
        usage_labels(sessions(2, 2), min_rarity=2.0)
    with pytest.raises(InvalidConfigError, match="column 'session' not found"):
        usage_labels(sessions(2, 2), set_column="session")
