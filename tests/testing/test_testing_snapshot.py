"""match_snapshot: writes a stable JSON form beside the test, passes on an equal report,
fails with a unified diff on a different one, rewrites under CUPEL_UPDATE_SNAPSHOTS=1, and
refuses to record silently under CI; the JSON is the same bytes for any thread count even
when many excluded items tie on score (the excluded order is total)."""

import json

import pytest

import cupel_np as c
from cupel_np.errors import InvalidConfigError
from cupel_np.testing import SnapshotMismatchError, match_snapshot, should, snapshot_json

BUDGET = c.ContextBudget(max_tokens=100, target_tokens=60)


def _items(extra_tokens=0):
    # equal kinds, no timestamps: many items tie on score, so the excluded order rests on
    # the engine's tie-break (stage, then row)
    items = [c.ContextItem("system", 10, kind="SystemPrompt", pinned=True)]
    items += [c.ContextItem(f"note {i}", 15 + extra_tokens, kind="Message") for i in range(8)]
    items += [c.ContextItem("note 3", 15, kind="Message"), c.ContextItem("bad", -1, kind="Message")]
    return items


def _report(extra_tokens=0, threads=None):
    return c.Pipeline(c.preset("chat")).dry_run(_items(extra_tokens), BUDGET, threads=threads)


@pytest.fixture
def local(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("CUPEL_UPDATE_SNAPSHOTS", raising=False)
    return monkeypatch


def test_records_then_matches(local, tmp_path):
    rep = _report()
    match_snapshot(rep, "chat", directory=tmp_path)
    path = tmp_path / "__snapshots__" / "chat.json"
    doc = json.loads(path.read_text())
    assert [e["item"]["content"] for e in doc["included"]] == [i.item.content for i in rep.included]
    assert [e["reason"]["reason"] for e in doc["excluded"]] == [e.reason.reason for e in rep.excluded]
    assert doc["excluded"][0]["reason"].keys() >= {"reason"}
    match_snapshot(_report(), "chat", directory=tmp_path)  # an equal report passes
    should(_report()).match_snapshot("chat", directory=tmp_path)


def test_mismatch_shows_a_diff_and_update_rewrites(local, tmp_path):
    match_snapshot(_report(), "chat", directory=tmp_path)
    before = (tmp_path / "__snapshots__" / "chat.json").read_text()
    with pytest.raises(SnapshotMismatchError) as ei:
        match_snapshot(_report(extra_tokens=5), "chat", directory=tmp_path)
    msg = str(ei.value)
    assert isinstance(ei.value, AssertionError)
    assert "CUPEL_UPDATE_SNAPSHOTS=1" in msg
    assert "--- chat.json (snapshot)" in msg and "+++ actual" in msg
    assert '-        "tokens": 15\n' in msg and '+        "tokens": 20\n' in msg
    assert (tmp_path / "__snapshots__" / "chat.json").read_text() == before  # untouched
    local.setenv("CUPEL_UPDATE_SNAPSHOTS", "1")
    match_snapshot(_report(extra_tokens=5), "chat", directory=tmp_path)
    assert (tmp_path / "__snapshots__" / "chat.json").read_text() == snapshot_json(_report(extra_tokens=5))


def test_missing_snapshot_fails_under_ci(local, tmp_path):
    local.setenv("CI", "1")
    with pytest.raises(SnapshotMismatchError, match="does not exist"):
        match_snapshot(_report(), "new", directory=tmp_path)
    assert not (tmp_path / "__snapshots__").exists()


def test_default_directory_is_beside_the_calling_test(local):
    # the committed snapshot next to this file (tests/testing/__snapshots__/chat_ties.json)
    match_snapshot(_report(), "chat_ties")


def test_same_bytes_for_any_thread_count_with_ties():
    rep1, rep2 = _report(threads=1), _report(threads=2)
    scores = [e.score for e in rep1.excluded]
    assert len(scores) != len(set(scores))  # ties are present
    assert snapshot_json(rep1) == snapshot_json(rep2) == snapshot_json(_report())


def test_bad_snapshot_names():
    with pytest.raises(InvalidConfigError):
        match_snapshot(_report(), "../escape")
