"""``cupel-np check``: the example checks file passes on the sample corpus (exit 0); a
violated check exits 1 with a readable failure table; bad checks files exit 2 naming the
key; the JUnit XML parses and has the JUnit structure; streaming gives the same answer."""

import xml.etree.ElementTree as ET
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cupel_np import cli
from cupel_np.errors import InvalidConfigError
from cupel_np.model.items import ItemTable
from cupel_np.testing.checks import load_checks, parse_checks

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "data" / "sample_sessions.parquet"
EXAMPLE = ROOT / "data" / "examples" / "checks.toml"

VIOLATED = """
set_column = "session_id"
presets = ["chat", "rag"]
[budget]
max_tokens = 8000
target_tokens = 6000
output_reserve = 1000

[[check]]
name = "system prompt kept"
assert = "include_item_with_kind"
kind = "SystemPrompt"

[[check]]
name = "memories are never dropped"
variant = "chat"
assert = "have_no_exclusions_for_kind"
kind = "Memory"
"""


@pytest.fixture(scope="module")
def small_items(tmp_path_factory):
    """40 sessions of the sample corpus, in row groups of 100 rows (for chunked runs)."""
    t = pq.read_table(SAMPLE)
    keys = t.column("session_id").to_pylist()
    keep = [i for i, k in enumerate(keys) if int(k.split("-")[1]) < 40]
    path = tmp_path_factory.mktemp("items") / "items.parquet"
    pq.write_table(t.take(pa.array(keep)), path, row_group_size=100)
    return path


def run(capsys, *argv):
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_example_checks_file_passes_on_the_sample_corpus(capsys, tmp_path):
    junit = tmp_path / "out.xml"
    code, out, err = run(capsys, "check", SAMPLE, "--checks", EXAMPLE, "--junit", junit)
    assert code == 0, out + err
    lines = out.splitlines()
    assert lines[-1] == "9 checks: 9 passed, 0 failed"
    assert all(line.startswith("PASS  ") for line in lines[:-1])
    root = ET.parse(junit).getroot()
    assert root.tag == "testsuites" and root.get("tests") == "9" and root.get("failures") == "0"
    (suite,) = root.findall("testsuite")
    cases = suite.findall("testcase")
    assert len(cases) == 9 and not suite.findall("testcase/failure")
    assert cases[0].get("name") == "the system prompt is always included"


def test_violated_check_exits_1_with_a_failure_table(capsys, tmp_path, small_items):
    checks = tmp_path / "checks.toml"
    checks.write_text(VIOLATED)
    junit = tmp_path / "junit.xml"
    code, out, err = run(capsys, "check", small_items, "--checks", checks, "--junit", junit, "--max-rows", "3")
    assert code == 1, err
    lines = out.splitlines()
    assert lines[0] == "PASS  system prompt kept  (80 (variant, set) pairs)"
    fail = [i for i, line in enumerate(lines) if line.startswith("FAIL  memories are never dropped")]
    assert fail, out
    i = fail[0]
    n = int(lines[i].split("(")[1].split(" of ")[0])
    assert lines[i] == f"FAIL  memories are never dropped  ({n} of 40 (variant, set) pairs fail)" and n > 3
    assert lines[i + 1].split() == ["variant", "session_id", "expected", "found"]
    for row in lines[i + 2 : i + 5]:
        cells = row.split(None, 2)
        assert cells[0] == "chat" and cells[1].startswith("session-00"), row
        assert "excluded items with Kind=Memory == 0" in row and int(row.split()[-1]) >= 1
    assert lines[i + 5] == f"  ... and {n - 3} more"
    assert lines[-1] == "2 checks: 1 passed, 1 failed"
    # the JUnit file: one failing test case, its failure names the count and holds the table
    root = ET.parse(junit).getroot()
    suite = root.find("testsuite")
    assert suite.get("tests") == "2" and suite.get("failures") == "1"
    failures = suite.findall("testcase/failure")
    assert len(failures) == 1
    assert failures[0].get("message") == f"{n} of 40 (variant, set) pairs fail"
    assert "excluded items with Kind=Memory == 0" in failures[0].text


def test_streamed_check_gives_the_same_failures(capsys, tmp_path, small_items, monkeypatch):
    checks = tmp_path / "checks.toml"
    checks.write_text(VIOLATED)
    code, whole, _ = run(capsys, "check", small_items, "--checks", checks, "--max-rows", "1000")
    chunks = []
    real = ItemTable.from_arrow.__func__

    def counting(cls, data, set_column=None):
        chunks.append(len(data))
        return real(cls, data, set_column=set_column)

    monkeypatch.setattr(ItemTable, "from_arrow", classmethod(counting))
    code2, chunked, _ = run(
        capsys, "check", small_items, "--checks", checks, "--max-rows", "1000", "--chunk-rows", "150"
    )
    assert code == code2 == 1
    assert len(chunks) > 3 and sum(chunks) == pq.read_metadata(small_items).num_rows
    assert chunked == whole


@pytest.mark.parametrize(
    "text, message",
    [
        ('presets = ["chat"]\n[budget]\nmax_tokens = 10\ntarget_tokens = 5\n', "no checks"),
        (
            'presets = ["chat"]\n[budget]\nmax_tokens = 10\ntarget_tokens = 5\n'
            '[[check]]\nassert = "include_item_with_kind"\nknd = "Memory"\n',
            "check[0] (include_item_with_kind): unknown key(s) 'knd'",
        ),
        (
            'presets = ["chat"]\n[budget]\nmax_tokens = 10\ntarget_tokens = 5\n[[check]]\nassert = "include_all"\n',
            "check[0]: 'assert' must name a pattern, got 'include_all'",
        ),
        (
            'presets = ["chat"]\n[budget]\nmax_tokens = 10\ntarget_tokens = 5\n'
            '[[check]]\nassert = "have_at_least_n_exclusions"\n',
            "check[0] (have_at_least_n_exclusions): missing 'n'",
        ),
        (
            'presets = ["chat"]\n[budget]\nmax_tokens = 10\ntarget_tokens = 5\n'
            '[[check]]\nassert = "include_item_matching"\nwhere = { colour = "red" }\n',
            "check[0].where: unknown condition column 'colour'",
        ),
        (
            'presets = ["chat"]\n[budget]\nmax_tokens = 10\ntarget_tokens = 5\n'
            '[[check]]\nassert = "include_item_matching"\nwhere = { tokens = { above = 3 } }\n',
            "unknown operator 'above' for column 'tokens'",
        ),
        (
            'presets = ["chat"]\n[budget]\nmax_tokens = 10\ntarget_tokens = 5\n'
            '[[check]]\nvariant = "rag"\nassert = "have_at_least_n_exclusions"\nn = 1\n',
            "check[0]: no variant labelled 'rag'",
        ),
        ('presets = ["chat"]\n[budget]\nmax_tokens = 10\ntarget_tokens = 5\nmax_tokens = 3\n', "malformed TOML"),
        ('presets = ["chat"]\n[budget]\nmax_tokens = 10\ntarget = 5\n', "budget: unknown key(s) 'target'"),
        ('[[check]]\nassert = "have_at_least_n_exclusions"\nn = 1\n', "no variants"),
        ('presets = ["chat"]\nsets = "x"\n', "unknown key(s) 'sets'"),
        (
            'presets = ["chat"]\n[budget]\nmax_tokens = 10\ntarget_tokens = 5\n'
            '[[check]]\nname = "dropped"\nassert = "exclude_item_with_reason"\nreason = "BudgetExceded"\n',
            "check[0] ('dropped') (exclude_item_with_reason): unknown exclusion reason 'BudgetExceded' "
            "(did you mean 'BudgetExceeded'?)",
        ),
        (
            'presets = ["chat"]\n[budget]\nmax_tokens = 10\ntarget_tokens = 5\n'
            '[[check]]\nassert = "have_at_least_n_exclusions"\nn = -1\n',
            "check[0] (have_at_least_n_exclusions): 'n' must be a non-negative integer, got -1",
        ),
        (
            "policies = 5\n[budget]\nmax_tokens = 10\ntarget_tokens = 5\n"
            '[[check]]\nassert = "have_at_least_n_exclusions"\nn = 1\n',
            "'policies' must be the path of a policies file (a string), got 5",
        ),
    ],
)
def test_bad_checks_file_exits_2_naming_the_key(capsys, tmp_path, small_items, text, message):
    checks = tmp_path / "bad.toml"
    checks.write_text(text)
    code, out, err = run(capsys, "check", small_items, "--checks", checks, "--set-column", "session_id")
    assert code == 2, out
    assert message in err and str(checks) in err


def test_missing_items_file_exits_2(capsys, tmp_path):
    code, _out, err = run(capsys, "check", tmp_path / "nope.parquet", "--checks", EXAMPLE)
    assert code == 2 and err.startswith("cupel-np: error:")


def test_parse_checks_builds_conditions_and_names():
    cf = parse_checks(
        {
            "presets": ["chat"],
            "budget": {"max_tokens": 100, "target_tokens": 80},
            "check": [
                {"assert": "include_item_matching", "where": {"kind": "Tool", "tokens": {"gt": 3, "le": 9}}},
                {"assert": "have_budget_utilization_above", "threshold": 0.5, "variant": ["chat"]},
                {"assert": "exclude_item_with_reason", "reason": "BudgetExceeded", "name": "drops happen"},
            ],
        }
    )
    assert [c.name for c in cf.checks] == [
        "include_item_matching",
        "have_budget_utilization_above(threshold=0.5)",
        "drops happen",
    ]
    cond = cf.checks[0].args[0]
    assert cond.describe() == "((kind == 'Tool') and (tokens > 3)) and (tokens <= 9)"
    assert cf.checks[1].variants == ["chat"] and cf.checks[0].variants is None
    assert cf.variants[0][0] == "chat" and cf.variants[0][2].max_tokens == 100


def test_checks_file_may_reference_a_policies_file(tmp_path):
    (tmp_path / "pol.toml").write_text('[[variants]]\nlabel = "mine"\npreset = "rag"\n')
    (tmp_path / "c.toml").write_text(
        'policies = "pol.toml"\n[budget]\nmax_tokens = 10\ntarget_tokens = 5\n'
        '[[check]]\nassert = "have_at_least_n_exclusions"\nn = 0\n'
    )
    cf = load_checks(tmp_path / "c.toml")
    assert [lab for lab, _p, _b in cf.variants] == ["mine"]
    with pytest.raises(InvalidConfigError, match="give exactly one of 'preset' or 'config'"):
        parse_checks({"variants": [{"label": "x"}], "budget": {"max_tokens": 1, "target_tokens": 1}, "check": [{}]})


def test_json_output_lists_every_check_with_its_failures(capsys, tmp_path, small_items):
    import json

    checks = tmp_path / "checks.toml"
    checks.write_text(VIOLATED)
    code, out, _err = run(capsys, "check", small_items, "--checks", checks, "--json")
    assert code == 1
    doc = json.loads(out)
    assert [(d["check"], d["pairs"]) for d in doc] == [("system prompt kept", 80), ("memories are never dropped", 40)]
    assert doc[0]["failed"] == 0 and doc[0]["rows"] == []
    assert doc[1]["failed"] == len(doc[1]["rows"]) > 0
    assert {r["variant"] for r in doc[1]["rows"]} == {"chat"}


def test_a_check_of_many_variants_streams_where_few_run_in_memory(capsys, tmp_path, small_items, monkeypatch):
    from cupel_np.model import chunks, datasets

    d = datasets.open_dataset(small_items)
    few, many = (datasets.estimate_in_memory_peak(d, n_variants=n) for n in (2, 48))
    assert many > 1.5 * few
    limit = (few + many) // 2
    streamed = []
    real = chunks.whole_set_chunks

    def recording(d, set_column, chunk_rows, n_groups):
        streamed.append(chunk_rows)
        return real(d, set_column, chunk_rows, n_groups)

    monkeypatch.setattr(chunks, "whole_set_chunks", recording)
    head = 'set_column = "session_id"\n[budget]\nmax_tokens = 8000\ntarget_tokens = 6000\n'
    check = '[[check]]\nassert = "include_item_with_kind"\nkind = "SystemPrompt"\n'
    for n in (2, 48):
        variants = "".join(f'[[variants]]\nlabel = "v{i}"\npreset = "{("chat", "rag")[i % 2]}"\n' for i in range(n))
        checks = tmp_path / f"checks{n}.toml"
        checks.write_text(head + variants + check)
        code, _, err = run(capsys, "check", small_items, "--checks", checks, "--memory-limit", limit, "--json")
        assert code in (0, 1), err
        if n == 2:
            assert streamed == []  # 2 variants: the whole input in memory
    assert len(streamed) == 1 and streamed[0] < pq.read_metadata(small_items).num_rows  # 48: in chunks
    assert datasets.estimate_in_memory_peak(d, streamed[0], n_variants=48) <= limit


def test_check_refuses_what_cannot_be_streamed_as_the_sweep_commands_do(capsys, tmp_path, small_items):
    """One decision for sweep and check (``datasets.needs_streaming``): over the memory limit
    without a set column, the whole input is one set and both refuse it naming the need; with
    a set column, a set larger than the limit is refused before any chunk is read (check
    used to chunk it silently)."""
    from cupel_np.model import datasets

    d = datasets.open_dataset(small_items)
    limit = datasets.estimate_in_memory_peak(d, n_variants=1) // 2  # the input does not fit; its sets do
    head = '[budget]\nmax_tokens = 8000\ntarget_tokens = 6000\n[[variants]]\nlabel = "a"\npreset = "chat"\n'
    check = '[[check]]\nassert = "include_item_with_kind"\nkind = "SystemPrompt"\n'
    checks = tmp_path / "checks.toml"
    checks.write_text(head + check)
    code, _, err = run(capsys, "check", small_items, "--checks", checks, "--memory-limit", limit)
    assert code != 0 and "the whole input is one item set" in err and "for 1 variant" in err
    code, _, err = run(
        capsys,
        "sensitivity",
        small_items,
        "--preset",
        "chat",
        "--preset",
        "rag",
        "--max-tokens",
        8000,
        "--target-tokens",
        6000,
        "--memory-limit",
        limit,
        "--out",
        tmp_path / "s",
    )
    assert code != 0 and "the whole input is one item set" in err
    tiny = datasets.estimate_in_memory_peak(d, 5, n_variants=1)  # under every set's need
    checks.write_text('set_column = "session_id"\n' + head + check)
    code, _, err = run(capsys, "check", small_items, "--checks", checks, "--memory-limit", tiny)
    assert code != 0 and "item set 'session-" in err and "a set is never cut" in err


CHECKED_NOTHING = """
set_column = "session_id"
presets = ["chat"]
[budget]
max_tokens = 8000
target_tokens = 6000

[[check]]
name = "misspelled kind"
assert = "have_no_exclusions_for_kind"
kind = "Memroy"

[[check]]
name = "exactly none of a kind no item has"
assert = "include_exactly_n_items_with_kind"
kind = "Memroy"
n = 0

[[check]]
name = "a where that matches nothing"
assert = "place_item_at_edge"
where = { kind = "Nope" }
"""


def test_a_check_on_a_kind_no_item_has_fails_with_a_did_you_mean(capsys, tmp_path, small_items):
    checks = tmp_path / "checks.toml"
    checks.write_text(CHECKED_NOTHING)
    junit = tmp_path / "j.xml"
    code, out, _err = run(capsys, "check", small_items, "--checks", checks, "--junit", junit)
    assert code == 1, out
    lines = out.splitlines()
    assert lines[0].startswith("FAIL  misspelled kind  (checked nothing: no item of the input has kind 'Memroy'")
    assert "(did you mean 'Memory'?)" in lines[0]
    assert lines[1].startswith("FAIL  exactly none of a kind no item has  (checked nothing")
    # a check that fails anyway says why too, under its FAIL line
    assert lines[2].startswith("FAIL  a where that matches nothing  (")
    assert lines[3].startswith("  checked nothing: no item of the input matches kind == 'Nope'")
    assert lines[-1] == "3 checks: 0 passed, 3 failed"
    root = ET.parse(junit).getroot()
    assert root.get("failures") == "3"
    assert all(tc.find("failure") is not None for tc in root.iter("testcase"))


def test_an_empty_corpus_fails_unless_the_checks_file_allows_it(capsys, tmp_path, small_items):
    empty = tmp_path / "empty.parquet"
    pq.write_table(pq.read_table(small_items).slice(0, 0), empty)
    checks = tmp_path / "checks.toml"
    checks.write_text(VIOLATED)
    # an empty items file is refused before any work (exit 2) unless --allow-empty ...
    code, _out, err = run(capsys, "check", empty, "--checks", checks)
    assert code == 2 and "--allow-empty" in err
    # ... and then zero (variant, set) pairs still fail every check unless the checks file allows it
    code, out, _err = run(capsys, "check", empty, "--checks", checks, "--json", "--allow-empty")
    assert code == 1
    assert "no (variant, set) pairs" in out and "allow_empty = true" in out
    checks.write_text("allow_empty = true\n" + VIOLATED)
    code, out, _err = run(capsys, "check", empty, "--checks", checks, "--allow-empty")
    assert code == 0, out
    assert "2 checks: 2 passed, 0 failed" in out


def test_allow_empty_must_be_a_boolean():
    with pytest.raises(InvalidConfigError, match="'allow_empty' must be true or false"):
        parse_checks(
            {
                "allow_empty": 1,
                "presets": ["chat"],
                "budget": {"max_tokens": 10, "target_tokens": 5},
                "check": [{"assert": "have_at_least_n_exclusions", "n": 0}],
            }
        )
