"""The upstream conformance vectors through the project's own runner."""

import io
import subprocess
import sys
from pathlib import Path

from cupel_np.cli import conformance


def test_every_vector_passes(conformance_dir):
    out = io.StringIO()
    passed, failed = conformance.run([conformance_dir], out=out)
    assert failed == 0, out.getvalue()
    assert passed == 67, out.getvalue()
    assert out.getvalue().strip().splitlines()[-1] == "67 passed, 0 failed"


def test_cli_exit_status_and_summary_line(conformance_dir, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(
        (conformance_dir / "required" / "placing" / "u-shaped-basic.toml")
        .read_text()
        .replace("ordered_contents = [", 'ordered_contents = ["nope", ')
    )
    good = conformance_dir / "required" / "placing" / "chronological-basic.toml"
    r = subprocess.run(
        [sys.executable, "-m", "cupel_np.conformance", str(good), str(bad)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 1
    lines = r.stdout.strip().splitlines()
    assert lines[-1] == "1 passed, 1 failed"
    assert str(bad) in lines[0] and "placed order" in lines[0]
    r = subprocess.run([sys.executable, "-m", "cupel_np.conformance", str(good)], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "1 passed, 0 failed"


def test_missing_path_is_a_usage_error(tmp_path):
    assert conformance.main([str(tmp_path / "nope")]) == 2


def test_module_runner_refuses_a_path_with_no_vectors(tmp_path, capsys):
    """``python -m cupel_np.conformance`` on a directory without vectors ran nothing and exited
    0 ("0 passed, 0 failed"); like ``cupel-np conformance`` it is now a usage error."""
    (tmp_path / "notes.txt").write_text("not a vector")
    assert conformance.main([str(tmp_path)]) == 2
    assert "no .toml conformance vectors found" in capsys.readouterr().err


EXT_PIPELINE = """
[test]
name = "ext: reserved slots, margin, metadata_key composite, quota in pipeline"
stage = "pipeline"
an_unknown_key = "ignored"

[budget]
max_tokens = 1000
target_tokens = 600
reserved_slots = { Message = 100 }
estimation_safety_margin_percent = 10.0

[config]
slicer = "quota"
inner_slicer = "greedy"
placer = "u-shaped"
deduplication = true
overflow_strategy = "throw"
[[config.quotas]]
kind = "Document"
require = 50.0
cap = 100.0
[[config.scorers]]
type = "metadata_key"
weight = 1.0
key = "cupel:priority"
value = "high"
boost = 2.0
[[config.scorers]]
type = "scaled"
weight = 1.0
[config.scorers.inner]
type = "kind"
use_default_weights = true

[[items]]
content = "doc-a"
tokens = 200
kind = "document"
metadata = { "cupel:priority" = "high" }
[[items]]
content = "msg-b"
tokens = 200
kind = "Message"
[[items]]
content = "doc-c"
tokens = 300
kind = "DOCUMENT"
source = "Rag"
original_tokens = 900

[[expected_output]]
content = "doc-a"

[[expected.diagnostics.excluded]]
content = "doc-c"
score_approx = 1.0
exclusion_reason = "BudgetExceeded"
item_tokens = 300
available_tokens = 250
[[expected.diagnostics.excluded]]
content = "msg-b"
score_approx = 0.5
exclusion_reason = "BudgetExceeded"
item_tokens = 200
available_tokens = 250
"""


def test_extension_pipeline_vector(tmp_path):
    # scores: doc-a 1.5, msg-b 0.5, doc-c 1.0; effective target = floor((600-100)*0.9) = 450;
    # quota: Document 225 + floor(225*500/700) = 385 -> doc-a only; Message floor(225*200/700) = 64
    p = tmp_path / "ext.toml"
    p.write_text(EXT_PIPELINE)
    assert conformance.run_vector(p) is None


def test_expected_error_codes(tmp_path):
    cases = {
        "pinned_exceeds_budget": ("max_tokens = 100\ntarget_tokens = 50\n", "pinned = true\ntokens = 200"),
        "overflow": ("max_tokens = 1000\ntarget_tokens = 50\n", "pinned = true\ntokens = 200"),
    }
    for code, (budget, item) in cases.items():
        p = tmp_path / f"{code}.toml"
        p.write_text(
            f'[test]\nname="x"\nstage="pipeline"\n[budget]\n{budget}'
            '[config]\nslicer="greedy"\nplacer="chronological"\n[[config.scorers]]\ntype="recency"\nweight=1.0\n'
            f'[[items]]\ncontent="a"\n{item}\n[expected]\nerror="{code}"\n'
        )
        assert conformance.run_vector(p) is None, code
        p.write_text(p.read_text().replace(f'error="{code}"', 'error="scarcity"'))
        assert "expected error 'scarcity'" in conformance.run_vector(p)


def test_project_sensitivity_vectors():
    vectors = Path(__file__).resolve().parent / "vectors"
    out = io.StringIO()
    passed, failed = conformance.run([vectors], out=out)
    assert failed == 0 and passed >= 4, out.getvalue()


def test_sensitivity_statuses_compare_by_label_in_any_order(tmp_path):
    """EXTENSIONS.md compares diffs "as a set keyed by content"; each entry's statuses are one
    per label, so a vector may list them in any order. A wrong status or a label given twice
    still fails."""
    src = (Path(__file__).resolve().parent / "vectors" / "sensitivity" / "basic-two-variants.toml").read_text()
    flipped = src.replace(
        'statuses = [ { label = "prio", status = "Included" }, { label = "refl", status = "Excluded" } ]',
        'statuses = [ { label = "refl", status = "Excluded" }, { label = "prio", status = "Included" } ]',
    )
    assert flipped != src
    p = tmp_path / "flipped.toml"
    p.write_text(flipped)
    assert conformance.run_vector(p) is None
    wrong = flipped.replace(
        '{ label = "refl", status = "Excluded" }, { label = "prio", status = "Included" }',
        '{ label = "refl", status = "Included" }, { label = "prio", status = "Included" }',
    )
    p.write_text(wrong)
    assert "statuses of" in conformance.run_vector(p)
    twice = flipped.replace(
        '{ label = "refl", status = "Excluded" }, { label = "prio", status = "Included" }',
        '{ label = "refl", status = "Excluded" }, { label = "prio", status = "Included" }, '
        '{ label = "prio", status = "Included" }',
    )
    p.write_text(twice)
    assert "statuses of" in conformance.run_vector(p)
