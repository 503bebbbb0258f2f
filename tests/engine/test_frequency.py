"""FrequencyScorer against the literal oracle (tests/naive.py) on the shapes its fast paths
take: many small sets drawing from a large tag vocabulary (per-set local tag ids), big sets
with common tags (the longest-list shortcut, the stamp walk with bitset membership, the
bitset union), tags repeated on one item, case-folded tags and items without tags.

Scores are compared exactly: the kernel and the oracle divide the same two integers."""

import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import naive  # noqa: E402

import cupel_np as c  # noqa: E402
from cupel_np.engine.scorers import ScoreContext  # noqa: E402
from cupel_np.engine.scorers import kernels as sck  # noqa: E402
from cupel_np.engine.sweep_run import classify  # noqa: E402

PROPS = settings(
    max_examples=150,
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# a vocabulary far larger than any one set, with case variants that fold together
VOCAB = ["a", "A", "b", "B", "Tag", "tAG", "tag", "É", "é"] + [f"t{i}" for i in range(400)]


def _naive_sets(sets):
    out = []
    for items in sets:
        out.extend(naive.score_items(items, {"type": "frequency"}))
    return out


def _engine_sets(sets):
    """Through the public path: Arrow table with a set column, tag encoding, ScoreContext."""
    rows = [(s, f"c{s}-{i}", it["tags"]) for s, items in enumerate(sets) for i, it in enumerate(items)]
    table = c.ItemTable.from_arrow(
        pa.table(
            {
                "set": pa.array([r[0] for r in rows], pa.int64()),
                "content": pa.array([r[1] for r in rows], pa.string()),
                "tokens": pa.array(np.ones(len(rows), dtype=np.int64)),
                "tags": pa.array([r[2] for r in rows], pa.list_(pa.string())),
            }
        ),
        set_column="set",
    )
    cls = classify(table)
    assert len(cls.sc_rows) == len(rows)  # every item is scoreable (tokens 1, not pinned)
    return ScoreContext(table, cls.sc_rows, cls.sc_offsets).score(c.FrequencyScorer()).tolist()


def _items(tag_lists):
    return [{"content": f"x{i}", "tokens": 1, "tags": list(tags)} for i, tags in enumerate(tag_lists)]


def _kernel(tag_lists, seg_sizes, kernel=None):
    """Call the kernel (the general one unless given) directly with folded ids over a
    vocabulary of len(VOCAB) + extra ids."""
    ids = {}
    flat = [ids.setdefault(naive.ascii_fold(t), len(ids)) for tags in tag_lists for t in tags]
    offs = np.concatenate([[0], np.cumsum([len(t) for t in tag_lists])]).astype(np.int64)
    seg = np.concatenate([[0], np.cumsum(seg_sizes)]).astype(np.int64)
    # n_tags well above the ids in use: the global vocabulary must not matter
    kernel = kernel or sck.frequency_scores
    return kernel(offs, np.array(flat, dtype=np.int64), len(ids) + 10_000, seg)


tags_st = st.lists(st.sampled_from(VOCAB), max_size=5)
small_sets = st.lists(st.lists(tags_st.map(tuple), min_size=0, max_size=8), min_size=1, max_size=12)


@PROPS
@given(small_sets)
def test_many_small_sets_match_naive(sets):
    sets = [_items(s) for s in sets if s]  # a set holds at least one item
    if not sets:
        return
    assert _engine_sets(sets) == _naive_sets(sets)


@PROPS
@given(
    st.lists(
        st.lists(st.lists(st.sampled_from(["a", "A", "b", "c", "C", "d"]), max_size=6), min_size=1, max_size=30),
        min_size=1,
        max_size=4,
    )
)
def test_dense_small_vocabulary_with_repeats_matches_naive(sets):
    # few distinct tags: many repeated tags on one item and many items sharing every tag
    sets = [_items(s) for s in sets]
    assert _engine_sets(sets) == _naive_sets(sets)


def test_many_two_item_sets_with_unique_tags():
    rng = np.random.default_rng(1)
    n_sets = 3000
    tag_lists = []
    for s in range(n_sets):
        shared = rng.random() < 0.3
        tag_lists.append([f"u{s}a"] + (["Shared"] if shared else []))
        tag_lists.append([f"u{s}b"] + (["SHARED"] if shared and rng.random() < 0.5 else []))
    got = _kernel(tag_lists, [2] * n_sets)
    want = _naive_sets([_items(tag_lists[2 * s : 2 * s + 2]) for s in range(n_sets)])
    assert got.tolist() == want


def _big_set(rng, m):
    """One set built so every branch is taken: words = ceil(m/64) and a posting list longer
    than that is held as a bitset.
      - 'common' on ~85% of items (dense), 'Mid0'..'mid3' on ~15% each (dense), 'r0'.. rare;
      - an item with common + a mid tag has rest (mid list) > words * 3: bitset union;
      - an item with common + a 'pair' tag (a list of 1-2 items) walks it with bitset
        membership of t* (STAMP_COST x 2 entries < the bitset's words);
      - an item with rare tags only walks them with a scan of each peer's tags;
      - an item with one distinct tag (possibly repeated, possibly case-varied) is O(1);
      - about 8% of items have no tag."""
    tag_lists = []
    for _ in range(m):
        u = rng.random()
        if u < 0.08:
            tags = []
        else:
            tags = []
            if rng.random() < 0.85:
                tags.append(["common", "Common", "COMMON"][int(rng.integers(0, 3))])
            for j in range(4):
                if rng.random() < 0.15:
                    tags.append(f"{'M' if rng.random() < 0.5 else 'm'}id{j}")
            for _ in range(int(rng.integers(0, 3))):
                tags.append(f"r{int(rng.integers(0, m // 8))}")
            if rng.random() < 0.3:
                tags.append(f"pair{len(tag_lists) // 2}")  # a list of 1-2 items: the stamp walk
            if tags and rng.random() < 0.2:
                tags.append(tags[int(rng.integers(0, len(tags)))])  # repeated on one item
        tag_lists.append(tags)
    return tag_lists


@pytest.mark.parametrize("seed, m", [(0, 700), (1, 450), (2, 130)])
def test_big_set_with_common_tags_matches_naive(seed, m):
    rng = np.random.default_rng(seed)
    tag_lists = _big_set(rng, m)
    got = _kernel(tag_lists, [m])
    assert got.tolist() == naive.score_items(_items(tag_lists), {"type": "frequency"})


def test_several_big_and_small_segments_match_naive():
    rng = np.random.default_rng(5)
    sizes = [300, 1, 2, 0, 257, 3, 1, 64, 65]
    tag_lists = []
    for m in sizes:
        tag_lists.extend(_big_set(rng, m) if m > 3 else [[f"z{int(rng.integers(0, 3))}"] for _ in range(m)])
    got = _kernel(tag_lists, sizes)
    want, k = [], 0
    for m in sizes:
        want.extend(naive.score_items(_items(tag_lists[k : k + m]), {"type": "frequency"}))
        k += m
    assert got.tolist() == want


def test_small_set_kernel_matches_naive_and_the_general_kernel():
    # sets of up to SMALL_SET items built like the big sets (dense lists, repeats, no tags):
    # the one-word kernel counts what the general kernel counts, so the scores are equal
    rng = np.random.default_rng(11)
    sizes = [sck.SMALL_SET, 1, 2, 0, 50, sck.SMALL_SET - 1, 3, 40]
    tag_lists = []
    for m in sizes:
        tag_lists.extend(_big_set(rng, m) if m > 3 else [[f"z{int(rng.integers(0, 3))}"] for _ in range(m)])
    small = _kernel(tag_lists, sizes, sck.frequency_scores_small)
    assert small.tolist() == _kernel(tag_lists, sizes).tolist()
    want, k = [], 0
    for m in sizes:
        want.extend(naive.score_items(_items(tag_lists[k : k + m]), {"type": "frequency"}))
        k += m
    assert small.tolist() == want


@PROPS
@given(st.lists(st.lists(tags_st.map(tuple), min_size=0, max_size=64), min_size=1, max_size=4))
def test_small_set_kernel_matches_the_general_kernel(sets):
    tag_lists = [list(t) for s in sets for t in s]
    sizes = [len(s) for s in sets]
    assert _kernel(tag_lists, sizes, sck.frequency_scores_small).tolist() == _kernel(tag_lists, sizes).tolist()


@pytest.mark.parametrize("m", [sck.SMALL_SET, sck.SMALL_SET + 1])
def test_engine_scores_sets_either_side_of_the_small_kernel_limit(m):
    # the engine takes the small kernel when no set is longer than SMALL_SET, else the general one
    tag_lists = _big_set(np.random.default_rng(m), m)
    sets = [_items(tag_lists), _items(tag_lists[:5])]
    assert _engine_sets(sets) == _naive_sets(sets)


def test_rare_tag_only_items_in_big_set():
    # every list short (no bitsets): the union is walked with peer-tag scans
    rng = np.random.default_rng(9)
    m = 600
    tag_lists = [[f"p{int(rng.integers(0, 60))}" for _ in range(int(rng.integers(0, 4)))] for _ in range(m)]
    got = _kernel(tag_lists, [m])
    assert got.tolist() == naive.score_items(_items(tag_lists), {"type": "frequency"})


def test_no_tags_anywhere_scores_zero():
    got = _kernel([[] for _ in range(10)], [4, 6])
    assert got.tolist() == [0.0] * 10
    assert _engine_sets([_items([[], [], ["x"]])]) == [0.0, 0.0, 0.0]


def test_cost_does_not_grow_with_the_table_vocabulary():
    # 16,000 two-item sets, every tag unique: the old kernel allocated vocabulary-sized arrays
    # per set (4.2 s at 32,000 items); per-set local ids make it a few milliseconds.
    import time

    n_sets = 16_000
    offs = np.arange(0, 2 * n_sets + 1, dtype=np.int64)
    ids = np.arange(2 * n_sets, dtype=np.int64)
    seg = np.arange(0, 2 * n_sets + 1, 2, dtype=np.int64)
    sck.frequency_scores(offs, ids, 2 * n_sets, seg)  # compile / load
    t0 = time.perf_counter()
    out = sck.frequency_scores(offs, ids, 2 * n_sets, seg)
    elapsed = time.perf_counter() - t0
    assert out.tolist() == [0.0] * (2 * n_sets)
    assert elapsed < 0.5, elapsed


# ----------------------------------------------------------------------------- kernel boundary
def test_as_input_is_zero_copy_read_only_and_normalizes():
    from cupel_np._jit import as_input

    a = np.arange(5, dtype=np.int64)
    v = as_input(a, np.int64)
    assert np.shares_memory(v, a) and not v.flags.writeable and a.flags.writeable
    assert as_input(v, np.int64) is v  # already right: returned as is
    w = as_input(np.arange(10, dtype=np.int32)[::2], np.int64)
    assert w.dtype == np.int64 and w.flags.c_contiguous and not w.flags.writeable
    assert w.tolist() == [0, 2, 4, 6, 8]


SPECIALIZATION_SCRIPT = r"""
import json
import pyarrow as pa
import cupel_np as c
from cupel_np._jit import specializations
from cupel_np.engine.sweep_run import classify
from cupel_np.engine.scorers import ScoreContext
from datetime import datetime, timezone

SCORERS = [c.RecencyScorer(), c.PriorityScorer(), c.TagScorer((("a", 1.0),)), c.FrequencyScorer(),
           c.ScaledScorer(c.PriorityScorer()), c.CompositeScorer(((c.RecencyScorer(), 1.0), (c.KindScorer(), 2.0))),
           c.DecayScorer(datetime(2026, 1, 1, tzinfo=timezone.utc), c.ExponentialCurve(3600.0))]
for pinned in ([False, False, False], [True, False, False]):  # rows = every row / a gather
    t = c.ItemTable.from_arrow(pa.table({
        "content": ["x", "y", "z"], "tokens": [1, 2, 3], "pinned": pinned,
        "tags": [["a", "B"], ["b"], []], "priority": pa.array([1, None, 3], pa.int32()),
        "timestamp": pa.array([1, 2, None], pa.timestamp("ms", tz="UTC"))}))
    cls = classify(t)
    for s in SCORERS:
        ScoreContext(t, cls.sc_rows, cls.sc_offsets).score(s)
# a set longer than SMALL_SET: FrequencyScorer takes the general kernel
t = c.ItemTable.from_arrow(pa.table({"content": [f"c{i}" for i in range(70)], "tokens": [1] * 70,
                                     "tags": [["a", "b"][: i % 3] for i in range(70)]}))
cls = classify(t)
ScoreContext(t, cls.sc_rows, cls.sc_offsets).score(c.FrequencyScorer())
print(json.dumps({k: v for k, v in specializations().items() if ".scorers." in k}))
"""


def test_scorer_kernels_compile_one_specialization():
    """Through the public path every scorer kernel is compiled once: int32 columns, gathered
    and zero-copy inputs, cached (read-only) score columns all reach it as one type."""
    import json
    import os
    import subprocess

    if os.environ.get("NUMBA_DISABLE_JIT") == "1":
        pytest.skip("no compilation with NUMBA_DISABLE_JIT=1")
    out = subprocess.run(
        [sys.executable, "-c", SPECIALIZATION_SCRIPT], capture_output=True, text=True, check=True, timeout=600
    )
    specs = json.loads(out.stdout.strip().splitlines()[-1])
    assert {k.rsplit(".", 1)[1] for k in specs} >= {
        "_rank_short",
        "tag_scores",
        "frequency_scores",
        "frequency_scores_small",
        "scaled_scores",
        "weighted_sum",
        "decay_scores",
    }
    assert all(len(v) == 1 for v in specs.values()), specs


def _by_definition(offs, ids, seg):
    """Frequency scores by the definition: per set, each tag's items; an item's peers are the
    union of its tags' items, itself included."""
    out = np.zeros(offs.shape[0] - 1)
    for lo, hi in zip(seg[:-1].tolist(), seg[1:].tolist(), strict=True):
        m = hi - lo
        if m <= 1:
            continue
        tags = [set(ids[offs[r] : offs[r + 1]].tolist()) for r in range(lo, hi)]
        items_of: dict = {}
        for r, ts in enumerate(tags):
            for t in ts:
                items_of.setdefault(t, set()).add(r)
        for r, ts in enumerate(tags):
            if ts:
                out[lo + r] = (len(set().union(*(items_of[t] for t in ts))) - 1) / (m - 1)
    return out


@pytest.mark.parametrize(
    "shape",
    ["mid_density", "dense", "sparse", "one_item_of_four_tags", "repeated_tags", "mixed_sets"],
)
def test_subset_counts_and_the_walk_give_the_definitions_scores(shape):
    """Sets whose items carry at most ``SUBSET_MAX_TAGS`` distinct tags are scored by subset
    counts (inclusion-exclusion) when the posting-list walk would cost more; others by the
    walk and its bitsets. Both equal the definition, to the bit: posting lists of ~10 (the
    counts), of hundreds (counts, where the walk would OR bitsets), of ~1 (the walk), one item
    of four tags (the walk for its whole set), a tag repeated on one item (counted once), and
    sets of each kind side by side."""
    rng = np.random.default_rng(len(shape))
    n, vocab, kmax = {"dense": (2000, 20, 4), "sparse": (2000, 4000, 4)}.get(shape, (2000, 200, 4))
    k = rng.integers(0, kmax, n)
    if shape == "one_item_of_four_tags":
        k[n // 2] = 4
    offs = np.concatenate([[0], np.cumsum(k)]).astype(np.int64)
    ids = rng.integers(0, vocab, int(k.sum())).astype(np.int64)
    if shape == "repeated_tags":  # some items name one tag twice
        two = np.flatnonzero(k >= 2)[::3]
        ids[offs[two] + 1] = ids[offs[two]]
    seg = np.array([0, n], dtype=np.int64)
    if shape == "mixed_sets":
        seg = np.array([0, 700, 701, 1500, n], dtype=np.int64)
        ids[offs[1500] :] = rng.integers(0, 5000, ids.shape[0] - offs[1500])  # a sparse last set
    want = _by_definition(offs, ids, seg)
    got = sck.frequency_scores(offs, ids, max(vocab, 5000), seg)
    assert np.array_equal(got, want)
