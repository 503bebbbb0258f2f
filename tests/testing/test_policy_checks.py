"""The project's own presets, tested the way docs/testing.md recommends (copy this file).

Each test states a rule a team would want from its context policy and checks it with
cupel_np.testing: per report for a hand-made conversation, and for every session of the
sample corpus at once with corpus checks.
"""

from pathlib import Path

import pytest

import cupel_np as c
from cupel_np.testing import col, should
from cupel_np.testing.checks import load_checks
from cupel_np.testing.runner import run_checks

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "data" / "sample_sessions.parquet"
BUDGET = c.ContextBudget(max_tokens=8000, target_tokens=6000, output_reserve=1000)
U_SHAPED = ["rag", "document_qa"]


@pytest.fixture(scope="module")
def corpus():
    """Every preset over every session of the sample corpus (one sweep, shared scores)."""
    table = c.ItemTable.from_parquet(SAMPLE, set_column="session_id")
    return c.sweep(table, BUDGET, [(name, c.preset(name)) for name in c.PRESETS])


def test_every_preset_always_keeps_the_system_prompt(corpus):
    (
        should(corpus)
        .every_set()
        .include_item_with_kind("SystemPrompt")
        .include_exactly_n_items_with_kind("SystemPrompt", 1)
        .have_no_exclusions_for_kind("SystemPrompt")
        .include_item_matching(col("pinned") == True)  # noqa: E712
    )


def test_every_preset_fills_a_third_of_the_window(corpus):
    should(corpus).every_set().have_budget_utilization_above(0.33)


def test_excluded_lists_are_ordered_by_score(corpus):
    should(corpus).every_set().excluded_items_are_sorted_by_score_descending()


def test_u_shaped_presets_put_their_best_items_at_the_edges(corpus):
    (
        should(corpus)
        .every_set(variant=U_SHAPED)
        .place_top_n_scored_at_edges(2)
        .place_item_at_edge(col("kind") == "SystemPrompt")
        .have_kind_coverage_count(3)
    )


def test_chat_drops_old_tool_output_before_recent_messages():
    items = [
        c.ContextItem("You are a coding agent.", 50, kind="SystemPrompt", pinned=True),
        c.ContextItem("old tool dump " * 40, 900, kind="ToolOutput", source="Tool", priority=1),
        c.ContextItem("please fix the failing test", 40, kind="Message"),
        c.ContextItem("which test?", 10, kind="Message"),
        c.ContextItem("test_parse in test_io.py", 20, kind="Message"),
    ]
    report = c.Pipeline(c.preset("chat")).dry_run(items, c.ContextBudget(max_tokens=600, target_tokens=400))
    (
        should(report)
        .include_item_with_kind("SystemPrompt")
        .include_exactly_n_items_with_kind("Message", 3)
        .exclude_item_matching_with_reason(col("kind") == "ToolOutput", "BudgetExceeded")
        # available: the effective target 350 (400 minus the pinned 50) less the 70 tokens of
        # messages the slicer took first (they are denser)
        .exclude_item_with_budget_details(col("source") == "Tool", 900, 280)
        .have_at_least_n_exclusions(1)
        .have_budget_utilization_above(0.19, c.ContextBudget(max_tokens=600, target_tokens=400))
    )


def test_the_example_checks_file_holds_on_the_sample_corpus():
    cf = load_checks(ROOT / "data" / "examples" / "checks.toml")
    table = c.ItemTable.from_parquet(SAMPLE, set_column=cf.set_column)
    outcomes = run_checks(cf, [table])
    assert [(o.check.name, o.failed) for o in outcomes if o.failed] == []
    assert all(o.pairs > 0 for o in outcomes)
