"""``cupel-np run`` prints one column layout for included and excluded items (issue 26.18): the
reason column is as wide as the longest reason shown, so the tokens and content columns line
up on every row, with short reasons (``Scored``, ``Pinned``) and long ones (``PinnedOverride``,
``BudgetExceeded``, ``Deduplicated``) in one listing."""

from __future__ import annotations

import re
from pathlib import Path

from cupel_np import cli

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample_sessions.parquet"
ROW = re.compile(r"^  (?P<i>[ \d]{3})  (?:IN |OUT)  (?P<score>[ \d.-]{8})  (?P<reason>\S+) +(?P<tokens>\d+)  \S")


def test_run_columns_line_up_with_long_and_short_reasons(capsys):
    argv = ["run", str(SAMPLE), "--set-column", "session_id", "--set", "session-0001", "--preset", "chat"]
    assert cli.main([*argv, "--max-tokens", "2000", "--target-tokens", "1500"]) == 0
    rows = capsys.readouterr().out.splitlines()[1:]
    matches = [ROW.match(line) for line in rows]
    assert rows and all(matches), [r for r, m in zip(rows, matches) if not m]
    reasons = {m["reason"] for m in matches if m}
    assert {"Scored", "Pinned"} <= reasons and {"PinnedOverride", "BudgetExceeded", "Deduplicated"} <= reasons
    assert len({m.start("reason") for m in matches if m}) == 1  # the reason column starts in one place
    assert len({m.end("tokens") for m in matches if m}) == 1, rows  # and the tokens column ends in one
