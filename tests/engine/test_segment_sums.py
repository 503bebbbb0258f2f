"""``sweep_run.segment_sums`` and ``segment_reduce`` (per-segment reductions by ``reduceat``: the
sums, and the corpus checks' per-set bit OR) against the running-sum and the
set-by-set definitions, over empty segments, segments longer than an int16 accumulator holds
and values past the last offset."""

import numpy as np
import pytest

import cupel_np as c
from cupel_np.engine.sweep_run import segment_reduce, segment_sums
from cupel_np.testing import should


def _running(values, offsets):
    """The former definition: differences of one running sum."""
    cs = np.zeros(values.shape[0] + 1, dtype=np.int64 if values.dtype.kind in "biu" else np.float64)
    np.cumsum(values, out=cs[1:])
    return cs[offsets[1:]] - cs[offsets[:-1]]


def _cases(seed: int, n: int = 400):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        n_seg = int(rng.integers(0, 12))
        sizes = rng.integers(0, 6, n_seg) * (rng.random(n_seg) < 0.7)
        if n_seg and rng.random() < 0.1:  # past what an int16 accumulator holds
            sizes[rng.integers(n_seg)] = rng.integers(32_000, 70_000)
        offsets = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
        extra = int(rng.integers(0, 3)) if rng.random() < 0.2 else 0  # rows past the last offset
        yield rng, offsets, int(offsets[-1]) + extra


def test_segment_sums_equal_the_running_sums():
    for rng, offsets, n in _cases(1):
        for values in (
            rng.random(n) < 0.5,
            np.ones(n, dtype=np.bool_),
            rng.integers(-5, 2000, n),
            rng.integers(0, 100, n).astype(np.int32),
            rng.integers(0, 3, n).astype(np.uint8),
            rng.random(n),
        ):
            got, want = segment_sums(values, offsets), _running(values, offsets)
            assert got.dtype == want.dtype and got.shape == want.shape
            assert np.array_equal(got, want), (values.dtype, np.diff(offsets))


def test_segment_or_is_each_sets_or():
    for rng, offsets, n in _cases(2, 200):
        values = rng.integers(0, 1 << 16, n).astype(np.uint16) * (rng.random(n) < 0.3)
        got = segment_reduce(np.bitwise_or, values, offsets)
        want = [np.bitwise_or.reduce(values[a:b]) if b > a else 0 for a, b in zip(offsets[:-1], offsets[1:])]
        assert got.dtype == np.uint16 and got.tolist() == [int(w) for w in want]


@pytest.mark.parametrize("n_kinds", [3, 9, 20])
def test_kind_coverage_counts_distinct_included_kinds_per_set(n_kinds):
    """Up to 8 kinds as uint8 bits, up to 16 as uint16, more by the dense (set, kind) count:
    each set's distinct included kinds, as counted set by set."""
    rng = np.random.default_rng(n_kinds)
    kinds = [f"K{i}" for i in range(n_kinds)]
    rows = [
        {
            "content": f"c{i}",
            "tokens": int(rng.integers(1, 60)),
            "kind": kinds[int(rng.integers(n_kinds))],
            "s": i // 40,
        }
        for i in range(40 * 30)
    ]
    table = c.ItemTable.from_items(rows, set_column="s")
    res = c.sweep(
        table, c.ContextBudget(max_tokens=250, target_tokens=150), [("a", c.preset("chat")), ("b", c.preset("rag"))]
    )
    pairs = len(res.labels) * table.n_sets
    sizes = []
    for threshold in (2, n_kinds // 2, n_kinds):
        ch = should(res).every_set(collect=True).have_kind_coverage_count(threshold)
        failing = {(r["variant"], r["set"], int(r["found"])) for r in ch.failures().to_pylist()}
        want = set()
        for label in res.labels:
            for key in table.set_keys:
                rep = res.selection_report(label, key)
                distinct = len({it.item.kind for it in rep.included})
                if distinct < threshold:
                    want.add((label, str(key), distinct))
        assert failing == want
        sizes.append(len(want))
    assert sizes[0] < pairs and sizes[-1] > 0  # some pairs pass and some fail
