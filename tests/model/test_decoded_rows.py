"""``ItemTable.rows`` on a table that keeps no item objects decodes each column once for all
the rows (``model.decoded_rows``). The items must equal those the table was made from (every
field, any row order and repeats, timestamps loaded from every unit, a set column that regroups rows) and
``row`` must agree with ``rows``."""

from datetime import UTC, datetime

import numpy as np
import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cupel_np as c
from tests.analysis.test_single_selection import _as_items, _fields
from tests.strategies import item_lists


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(item_lists(max_size=12, min_size=1), st.data())
def test_decoded_rows_equal_the_items_the_table_was_made_from(dicts, data):
    items = _as_items(dicts)
    table = c.ItemTable(c.ItemTable.from_items(items).table)  # Arrow only: no item objects kept
    assert table._items is None
    rows = np.array(data.draw(st.lists(st.integers(0, table.n - 1), max_size=20)), dtype=np.int64)
    got = table.rows(rows)
    want = [items[int(table.input_row[r])] for r in rows]
    assert [_fields(g) for g in got] == [_fields(w) for w in want]
    assert [_fields(table.row(r)) for r in rows] == [_fields(g) for g in got]
    assert table.rows(np.zeros(0, dtype=np.int64)) == []


def test_every_timestamp_unit_and_a_set_column():
    moments = [datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC), None, datetime(1969, 12, 31, 23, 59, 59, tzinfo=UTC)]
    for unit in ("s", "ms", "us", "ns"):
        arrow = pa.table(
            {
                "content": ["a", "b", "c"],
                "tokens": [1, 2, 3],
                "session_id": ["y", "x", "y"],
                "timestamp": pa.array(moments, pa.timestamp(unit, tz="UTC")),
                "metadata": pa.array([[("k", "v")], None, []], pa.map_(pa.string(), pa.string())),
                "tags": [["t1", "t2"], None, []],
            }
        )
        table = c.ItemTable.from_arrow(arrow, set_column="session_id")
        got = table.rows(np.arange(table.n))
        assert [table.row(i) for i in range(table.n)] == got
        by_content = {it.content: it for it in got}
        cut = {"s": 0, "ms": 123000}.get(unit)
        first = moments[0] if cut is None else moments[0].replace(microsecond=cut)
        assert by_content["a"].timestamp == first and by_content["b"].timestamp is None
        assert by_content["c"].timestamp == moments[2]
        assert dict(by_content["a"].metadata) == {"k": "v"} and by_content["a"].tags == ("t1", "t2")
        assert dict(by_content["b"].metadata) == {} and by_content["b"].tags == ()
