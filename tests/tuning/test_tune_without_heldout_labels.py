"""A search whose held-out sets hold no relevant item compares nothing there: it says so
(a warning on stderr, in ``summary.json`` and on the page), and prints n/a, never ``+nan`` or
a held-out recall of 0.000 (found by the new-user pass of issue 26)."""

from __future__ import annotations

import json
import math

import pyarrow as pa
import pyarrow.parquet as pq

from cupel_np import cli
from cupel_np.tuning import heldout_sets
from cupel_np.tuning.synthetic import trust_corpus

SPACE = """
[scorers]
max = 2
recency = { weight = [0.1, 3.0] }
priority = { weight = [0.1, 3.0] }
[slicers.greedy]
"""


def _no_nan(x) -> None:
    if isinstance(x, float):
        assert math.isfinite(x), x
    elif isinstance(x, dict):
        for v in x.values():
            _no_nan(v)
    elif isinstance(x, list):
        for v in x:
            _no_nan(v)


def test_no_relevant_item_in_the_heldout_sets_is_said_not_shown_as_nan(tmp_path, capsys):
    t = trust_corpus(n_sets=30, items_per_set=12, seed=3)
    keys = t.column("session_id").to_pylist()
    held = dict(zip(sorted(set(keys)), heldout_sets(sorted(set(keys)), 0.2), strict=True))
    assert any(held.values()) and not all(held.values())
    rel = [bool(r) and not held[k] for r, k in zip(t.column("relevant").to_pylist(), keys, strict=True)]
    assert any(rel)
    items = tmp_path / "items.parquet"
    pq.write_table(t.set_column(t.schema.get_field_index("relevant"), "relevant", pa.array(rel)), items)
    space = tmp_path / "space.toml"
    space.write_text(SPACE + "[budget]\nmax_tokens = 1500\n", encoding="utf-8")
    argv = ["tune", str(items), "--space", str(space), "--label-column", "relevant", "--set-column", "session_id"]
    argv += ["--trials", "4", "--batch-size", "4", "--quiet"]

    assert cli.main([*argv, "--out", str(tmp_path / "a")]) == 0
    out, err = capsys.readouterr()
    assert "nan" not in out.lower(), out
    n_held = sum(held.values())
    assert f"not compared, none of the {n_held} heldout sets has a relevant item" in out, out
    assert f"warning: none of the {n_held:,} heldout sets has a relevant item" in err, err
    table = [line for line in out.splitlines() if line.split()[1:2] in (["best"], ["preset"])]
    assert table and all(line.split()[3] == "n/a" for line in table), table  # held-out recall: n/a, not 0.000

    page = (tmp_path / "a" / "report.html").read_text(encoding="utf-8")
    assert "nan" not in page.replace("nanoseconds", "").lower().replace("n/a", "")
    assert "not compared: none of the" in page and "has a relevant item in the label column" in page

    assert cli.main([*argv, "--out", str(tmp_path / "b"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    _no_nan(summary)
    assert any("has a relevant item" in w for w in summary["warnings"])
    on_disk = json.loads((tmp_path / "b" / "summary.json").read_text(encoding="utf-8"))
    _no_nan(on_disk)
    assert on_disk["warnings"] == summary["warnings"]


def test_the_python_result_carries_the_not_compared_warning():
    """``tune``'s result says what the command and the page say: its ``warnings`` name the
    held-out sets without a relevant item (it had only the artefact warnings before)."""
    from cupel_np import tune

    t = trust_corpus(n_sets=30, items_per_set=12, seed=3)
    keys = t.column("session_id").to_pylist()
    held = dict(zip(sorted(set(keys)), heldout_sets(sorted(set(keys)), 0.2), strict=True))
    rel = [bool(r) and not held[k] for r, k in zip(t.column("relevant").to_pylist(), keys, strict=True)]
    t = t.set_column(t.schema.get_field_index("relevant"), "relevant", pa.array(rel))
    space = {"scorers": {"max": 2, "recency": {"weight": [0.1, 3.0]}}, "slicers": {"greedy": {}}}
    found = tune(t, space, 1500, label_column="relevant", set_column="session_id", trials=4, batch_size=4, seed=1)
    n_held = sum(held.values())
    hits = [w for w in found.warnings if f"none of the {n_held:,} heldout sets has a relevant item" in w]
    assert len(hits) == 1, found.warnings
    assert "not compared with the presets" in hits[0] and "holdout=" in hits[0]
    assert found.paired["sets"] == 0 and math.isnan(found.paired["mean_diff"])  # as docs/outcomes.md says
