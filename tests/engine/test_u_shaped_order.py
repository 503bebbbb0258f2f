"""U-shaped placement of a big set (``u_order._sliced_score_order``, then ``_u_shaped_all``)
against a plain sort of the selected items by (score key, slicer output order).

The kernel sorts keys that hold only the high bits of each score key (the candidate's index
fills the low bits), then orders every run of keys that share those high bits: these cases
draw scores a few units in the last place apart (one run, different scores), around the
pinned items' 1.0 (the run where the pinned items go in), with NaN, -0.0, infinities and
unordered ranges of ranks - greedy prefixes, a quota's one per kind, a count quota's after its
committed items - where ties go by density, then rank."""

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cupel_np.engine import u_order
from cupel_np.engine.sortkeys import desc_bits

SETTINGS = settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])

ULP_APART = [np.nextafter(1.0, 2.0), 1.0, np.nextafter(1.0, 0.0), 1.0 + 2**-50, 0.5, 0.5 + 2**-52, 0.5 + 2**-51]
SCORES = ULP_APART + [0.0, -0.0, np.nan, np.inf, -np.inf, -1.0, 2.0, 1e-310]


def density_desc(t, s):
    """Greedy's order of densities, ascending: descending density, NaN last, zero tokens
    first (density MAX_FLOAT); -0.0 is 0.0."""
    d = np.finfo(np.float64).max if t == 0 else s / t
    return np.inf if d != d else -d + 0.0


def reference(rank, score, tok, ranges, n_pin):
    """Each selected candidate's position and the pinned items' first place, from a sort.
    ``ranges``: the unordered ranges of ranks ``[a, b)`` (index order inside)."""
    key = desc_bits(score)
    sel = [p for p in range(rank.shape[0]) if rank[p] >= 0]

    def order_key(p):
        r = int(rank[p])
        for a, b in ranges:
            if a <= r < b:  # an unordered range where its ranks are, inside by density, then rank
                return (int(key[p]), a, density_desc(int(tok[p]), float(score[p])), r)
        return (int(key[p]), r, 0.0, r)

    order = sorted(sel, key=order_key)
    first_pin = next((i for i, p in enumerate(order) if key[p] >= u_order._ONE_KEY), len(order))
    m = len(order) + n_pin
    at = {}
    for i, p in enumerate(order):
        j = i if i < first_pin else i + n_pin
        at[p] = j // 2 if j % 2 == 0 else m - 1 - j // 2
    return at, first_pin


@st.composite
def segments(draw):
    n = draw(st.integers(1, 300))
    score = np.array(draw(st.lists(st.sampled_from(SCORES), min_size=n, max_size=n)), dtype=np.float64)
    tok = np.array(draw(st.lists(st.sampled_from([0, 1, 2, 3, 7]), min_size=n, max_size=n)), dtype=np.int64)
    selected = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    sel = np.flatnonzero(selected)
    n_sel = sel.shape[0]
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    # the output cut into blocks of ranks: unordered ranges (their candidates ranked in index
    # order) between exact stretches (ranked in a random order); a greedy prefix is [0, k)
    cuts = sorted(set(draw(st.lists(st.integers(0, n_sel), max_size=6))) | {0, n_sel})
    unordered = draw(st.lists(st.booleans(), min_size=len(cuts), max_size=len(cuts)))
    perm = rng.permutation(sel)  # which candidates hold each block's ranks
    rank = np.full(n, -1, dtype=np.int64)
    ranges = []
    # (rarely, a range not ranked in index order: the order is still by rank, which the
    # kernel's shortcuts assume is candidate order and check)
    in_index_order = draw(st.integers(0, 9)) > 0
    for (a, b), u in zip(zip(cuts[:-1], cuts[1:]), unordered):
        who = perm[a:b]
        if u and b - a > 1:
            ranges.append((a, b))
            rank[np.sort(who) if in_index_order else who] = np.arange(a, b)
        else:
            rank[who] = np.arange(a, b)
    return score, tok, rank, ranges, draw(st.integers(0, 3))


def check(case):
    """The kernel's placement of one segment is the reference's."""
    score, tok, rank, ranges, n_pin = case
    n = score.shape[0]
    arg = None
    if ranges:
        arg = np.array([0, len(ranges)]), np.array([a for a, _ in ranges]), np.array([b for _, b in ranges])
    u_at, u_pin = u_order._sliced_score_order(rank, score, tok, np.array([0, n]), np.array([0, n_pin]), 0, arg)
    at, first_pin = reference(rank, score, tok, ranges, n_pin)
    if not at:
        assert u_pin[0] == -1  # nothing selected: left to the place kernel
        return
    assert u_pin[0] == first_pin
    assert {p: int(u_at[p]) for p in at} == at


@SETTINGS
@given(segments())
def test_u_shaped_order_is_the_sorted_order(case):
    check(case)


def test_small_segments_are_left_to_the_place_kernel():
    """Only segments with at least ``min_sel`` selected items (or a prefix) are placed."""
    rng = np.random.default_rng(3)
    n = 900
    score = np.round(rng.random(n), 1)  # long runs of equal scores
    tok = rng.integers(0, 5, n)
    rank = np.full(n, -1, dtype=np.int64)
    offsets = np.array([0, 100, 900])
    for lo, hi in zip(offsets[:-1], offsets[1:]):
        rank[lo:hi] = rng.permutation(hi - lo)
    pins = np.array([0, 2, 3])
    u_at, u_pin = u_order._sliced_score_order(rank, score, tok, offsets, pins, 500, None)
    assert u_pin[0] == -1
    at, first_pin = reference(rank[100:], score[100:], tok[100:], [], 1)
    assert u_pin[1] == first_pin
    assert {p - 100: int(u_at[p]) for p in range(100, 900)} == at


@st.composite
def long_runs(draw):
    """Few distinct scores over many candidates: runs of ties longer than ``RUN_RADIX_MIN``
    (ordered by tokens first, checked, else by the tie keys), with scores whose token order
    is not the tie order (zero, negative, NaN, infinite) and token counts whose densities
    round equal."""
    n = draw(st.integers(u_order.RUN_RADIX_MIN, 1500))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    values = draw(st.lists(st.sampled_from(SCORES + [0.25, 3.0, -0.5]), min_size=1, max_size=4))
    score = rng.choice(np.array(values, dtype=np.float64), n)
    tok_pool = draw(st.sampled_from([np.arange(5), np.arange(3000), np.array([0, 2**53, 2**53 + 2, 2**60, 2**60 + 1])]))
    tok = rng.choice(tok_pool, n).astype(np.int64)
    sel = np.flatnonzero(rng.random(n) < draw(st.sampled_from([0.5, 1.0])))
    n_sel = sel.shape[0]
    rank = np.full(n, -1, dtype=np.int64)
    perm = rng.permutation(sel)
    cuts = sorted(set(rng.integers(0, n_sel + 1, draw(st.integers(0, 4))).tolist()) | {0, n_sel})
    ranges = []
    for a, b in zip(cuts[:-1], cuts[1:]):
        who = perm[a:b]
        if b - a > 1 and draw(st.booleans()):
            ranges.append((a, b))
            rank[np.sort(who)] = np.arange(a, b)
        else:
            rank[who] = np.arange(a, b)
    return score, tok, rank, ranges, draw(st.integers(0, 3))


@settings(max_examples=40, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(long_runs())
def test_long_runs_of_ties_are_in_the_sorted_order(case):
    check(case)


def test_a_long_run():
    """One score for 17,000 candidates but a few: one run, ordered in its scratch."""
    rng = np.random.default_rng(5)
    n = 17_084
    score = np.full(n, 0.5)
    score[rng.random(n) < 0.01] = 0.75
    tok = rng.integers(0, 4000, n)
    rank = np.full(n, -1, dtype=np.int64)
    rank[:] = np.arange(n)  # one greedy prefix: ranks in index order
    arg = np.array([0, 1]), np.array([0]), np.array([n])
    u_at, u_pin = u_order._sliced_score_order(rank, score, tok, np.array([0, n]), np.array([0, 2]), 0, arg)
    at, first_pin = reference(rank, score, tok, [(0, n)], 2)
    assert u_pin[0] == first_pin
    assert np.array_equal(u_at, np.array([at[p] for p in range(n)]))
