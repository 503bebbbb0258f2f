"""Issue 17.4: ``validate`` lists every problem, the same whether the file is checked whole or
in chunks: a problem one check finds never hides what another check finds in the same rows."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cupel_np.io.parquet import validate_items


def _write(tmp_path, columns: dict, row_group_size: int):
    path = tmp_path / "items.parquet"
    pq.write_table(pa.table(columns), path, row_group_size=row_group_size)
    return path


def test_issue_repro_overflow_and_nulls(tmp_path):
    tokens = pa.array([2**63 + 5, None, 1, None], pa.uint64())
    path = _write(tmp_path, {"content": list("abcd"), "tokens": tokens}, 2)
    want = [
        "column 'tokens': does not fit in a 64-bit signed integer at row 0 (9223372036854775813)",
        "column 'tokens': null at rows 1, 3",
    ]
    assert validate_items(path)[0] == want
    for chunk in (1, 2, 3, 4):
        assert validate_items(path, chunk_rows=chunk)[0] == want


@pytest.mark.parametrize("chunk", [1, 3, 7, 50])
def test_every_check_runs_whatever_another_found(tmp_path, chunk):
    n = 40
    content = [f"c{i}" for i in range(n)]
    content[2] = None
    content[30] = ""
    tokens = [i for i in range(n)]
    tokens[1] = 2**63 + 1
    tokens[5] = None
    tokens[33] = None
    kind = ["k"] * n
    kind[0] = b"\xff"
    kind[31] = b" "
    cols = {
        "content": pa.array([None if c is None else c.encode() for c in content], pa.binary()),
        "tokens": pa.array(tokens, pa.uint64()),
        "kind": pa.array([k if isinstance(k, bytes) else k.encode() for k in kind], pa.binary()),
        "s": pa.array([1] * 20 + [None] + [2] * 19, pa.int64()),
    }
    path = _write(tmp_path, cols, 10)
    whole = validate_items(path, set_column="s")[0]
    assert validate_items(path, set_column="s", chunk_rows=chunk)[0] == whole
    assert whole == [
        "column 'tokens': does not fit in a 64-bit signed integer at row 1 (9223372036854775809)",
        "column 'kind': invalid UTF-8 at row 0 (b'\\xff')",
        "column 'content': null at row 2",
        "column 'content': empty string at row 30",
        "column 'tokens': null at rows 5, 33",
        "column 'kind': empty or whitespace-only at row 31 (' ')",
        "set column 's': null (every row needs a set key) at row 20",
    ]
