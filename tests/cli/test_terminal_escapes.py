"""Control and escape sequences in user strings (item content, labels, values quoted in error
messages) are shown visibly (``⟨U+001B⟩``), never written raw to the terminal."""

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from cupel_np import cli

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample_sessions.parquet"


def test_escape_sequences_in_content_never_reach_the_terminal(tmp_path, capsys):
    t = pq.read_table(SAMPLE)
    keys = t.column("session_id").to_pylist()
    rows = [i for i, k in enumerate(keys) if k == "session-0007"]
    t = t.take(pa.array(rows))
    hostile = ["\x1b]0;pwned\x07", "\x1b[2J\x1b[31mred", "over\rwrite", "bidi\u202egnp.exe"]
    content = t.column("content").to_pylist()
    content[: len(hostile)] = hostile
    t = t.set_column(t.schema.get_field_index("content"), "content", pa.array(content))
    items = tmp_path / "hostile.parquet"
    pq.write_table(t, items)
    argv = ["run", str(items), "--preset", "chat", "--max-tokens", "100000", "--target-tokens", "90000"]
    assert cli.main(argv) == 0
    out, err = capsys.readouterr()
    for ch in ("\x1b", "\x07", "\r", "\u202e"):
        assert ch not in out and ch not in err
    assert "\u27e8U+001B\u27e9]0;pwned\u27e8U+0007\u27e9" in out and "\u27e8U+202E\u27e9" in out
    # an error message quoting a user's value is escaped too
    assert cli.main(["run", str(items), "--preset", "chat\x1b[31m", "--max-tokens", "10", "--target-tokens", "5"]) == 2
    assert "\x1b" not in capsys.readouterr().err
