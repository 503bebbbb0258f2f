import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from cupel_np import ItemTable


def make_table(n: int, seed: int = 7, n_tags: int = 2000) -> ItemTable:
    """A realistic single item set: Zipf-distributed tag vocabulary (1-4 tags per item, mixed
    case), timestamps, sparse priorities, hints, trust metadata, several kinds."""
    rng = np.random.default_rng(seed)
    vocab = np.array([f"tag{i}" for i in range(n_tags)] + [f"TAG{i}" for i in range(50)])
    k = rng.integers(0, 5, n)
    flat = np.minimum(rng.zipf(1.3, k.sum()) - 1, len(vocab) - 1)
    offsets = np.concatenate([[0], np.cumsum(k)])
    tags = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(vocab).take(pa.array(flat)))
    kinds = np.array(["Message", "message", "Document", "ToolOutput", "Memory", "SystemPrompt"])
    trust = np.array(["0.1", "0.5", "0.9", "high", "1.5"])
    has = (np.arange(n) % 3) != 0
    md_off = np.concatenate([[0], np.cumsum(has)]).astype(np.int32)
    md = pa.MapArray.from_arrays(
        pa.array(md_off),
        pa.array(["cupel:trust"]).take(pa.array(np.zeros(int(has.sum()), dtype=np.int64))),
        pa.array(trust).take(pa.array((np.arange(n) % 5)[has])),
    )
    ts = (1_700_000_000_000_000 + rng.integers(0, 10**12, n)).astype("datetime64[us]")
    table = pa.table(
        {
            "content": pc.binary_join_element_wise("item ", pa.array(np.arange(n)).cast(pa.string()), ""),
            "tokens": rng.integers(1, 2000, n),
            "kind": pa.array(kinds).take(pa.array(rng.integers(0, len(kinds), n))),
            "priority": pa.array(rng.integers(0, 100, n), mask=rng.random(n) < 0.5),
            "tags": tags,
            "metadata": md,
            "timestamp": pa.array(ts, pa.timestamp("us", tz="UTC"), mask=rng.random(n) < 0.1),
            "future_relevance_hint": rng.normal(0.5, 0.3, n),
        }
    )
    return ItemTable.from_arrow(table)


@pytest.fixture(scope="session")
def table_200k() -> ItemTable:
    return make_table(200_000)
