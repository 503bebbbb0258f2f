"""Hypothesis strategies for the property tests (tests/engine/test_properties.py).

Everything here produces plain data in the shapes tests/naive.py takes:

* an item is a dict with ContextItem's field names (``original_tokens`` is only
  read by the engine; the oracle ignores it);
* a budget is a dict with ContextBudget's keyword names;
* a config is exactly a pipeline vector's ``[config]`` table (EXTENSIONS.md).

The value pools are deliberately tiny so that ties and collisions are common:
duplicate contents, equal scores / timestamps / priorities, kinds and tags that
differ only by ASCII case (and non-ASCII letters that must NOT fold), pinned,
zero- and negative-token items, budgets that are zero or a few tokens.
"""

import math
from datetime import UTC, datetime, timedelta, timezone

from hypothesis import strategies as st

UTC = UTC
IST = timezone(timedelta(hours=5, minutes=30))
PST = timezone(timedelta(hours=-8))

# ---------------------------------------------------------------------------
# Value pools
# ---------------------------------------------------------------------------

CONTENTS = ["a", "b", "c", "d", "e", "f", "g", "A", "dup", "x y", "\u00e9t\u00e9", "\u00c9T\u00c9"]

KINDS = [
    "Message",
    "message",
    "MESSAGE",
    "Document",
    "document",
    "ToolOutput",
    "toolOutput",
    "SystemPrompt",
    "Memory",
    "memory",
    "\u00c4rger",
    "\u00e4rger",  # non-ASCII initial: these two are DIFFERENT kinds
    "Custom",
    "\x1c",  # str.isspace() is True, but it is not Unicode White_Space: a valid kind
]

# kinds a config may name: the item kinds plus some no item has
CONFIG_KINDS = KINDS + ["Absent", "ABSENT", "\u00c4RGER"]

SOURCES = ["Chat", "chat", "Tool", "rag"]

TAGS = ["A", "a", "b", "B", "\u00e4", "\u00c4", "tag", "TAG"]

# Same instant spelled in three zones, plus near neighbours, so equal timestamps are common.
_T0 = datetime(2025, 3, 1, 12, 0, 0, tzinfo=UTC)
TIMESTAMP_POOL = [
    _T0,
    _T0.astimezone(IST),
    _T0.astimezone(PST),
    _T0 + timedelta(microseconds=1),
    _T0 - timedelta(seconds=1),
    _T0 - timedelta(hours=1),
    _T0 - timedelta(days=3, microseconds=250),
    _T0 + timedelta(days=1),  # after every reference time below: a "future" item
    datetime(1970, 1, 1, tzinfo=UTC),
    datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),  # negative epoch offset
]
# Instants far from 1970 (UTC only: they do not fit in a nanosecond Arrow column).
EXTREME_TIMESTAMPS = [
    datetime(1, 1, 1, tzinfo=UTC),
    datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
]

REFERENCE_TIMES = [
    _T0,
    _T0.astimezone(IST),
    _T0 + timedelta(hours=2, microseconds=7),
    datetime(2024, 1, 1, tzinfo=UTC),  # before most items: ages clamp to zero
]

PRIORITIES = [0, 1, 1, 2, -3, 10, 2**62, -(2**62)]

HINTS = [0.0, 0.25, 0.5, 1.0, -0.5, 1.5, 7, float("nan"), float("inf"), float("-inf"), 0.1]

# cupel:trust strings: Rust str::parse::<f64> grammar -- parseable, unparseable and
# non-finite values.
TRUST_VALUES = [
    "0.7",
    "0.25",
    "1",
    "5.",
    "+.5",
    "-0.1",
    "1.5",
    "1e-1",
    "1E-1",
    "-0",
    "0.5",
    "abc",
    " 0.5",
    "0.5 ",
    "",
    ".",
    "e5",
    "1e",
    "1_0",
    "0x1p-1",
    "\u0665",
    "+",
    "--1",
    "inf",
    "-Infinity",
    "NaN",
    "nan",
    "INF",
    "infinity",
    "1e400",
    "1e-400",
]
# Non-ASCII letters that a Unicode case-insensitive regex would match to "i" / "n"; Rust
# rejects them (so does the engine since cupel_np/text.py uses (?ai:...)).
TRUST_VALUES_NON_ASCII_FOLD = ["\u0131nf", "\u0130nf", "\u0131nf\u0131n\u0131ty", "\u0130NF"]
TRUST_VALUES = TRUST_VALUES + TRUST_VALUES_NON_ASCII_FOLD

METADATA_KEYS = ["cupel:trust", "src", "team", "Src"]
METADATA_VALUES = ["x", "X", "0.5", "", "yes"]


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------


def _weighted(*pairs):
    """A weighted choice of strategies: ``_weighted((3, a), (1, b))`` picks a about 3x as
    often as b (st.one_of strongly prefers its first branch)."""
    choices = [strategy for weight, strategy in pairs for _ in range(weight)]
    return st.sampled_from(choices).flatmap(lambda strategy: strategy)


def _uniform(lo, hi):
    """Integers spread evenly over [lo, hi] (st.integers favours the ends)."""
    return st.sampled_from(range(lo, hi + 1))


# ---------------------------------------------------------------------------
# Items
# ---------------------------------------------------------------------------

tokens_st = _weighted(
    (6, _uniform(0, 40)),
    (3, st.sampled_from([0, 0, 1, 1, 10, 10, 25, 25])),
    (1, st.integers(-5, -1)),
    (1, _uniform(41, 150)),
)

timestamps_st = _weighted(
    (1, st.none()),
    (3, st.sampled_from(TIMESTAMP_POOL)),
    (
        2,
        st.datetimes(
            min_value=datetime(2024, 12, 1),
            max_value=datetime(2025, 4, 1),
            timezones=st.sampled_from([UTC, IST, PST]),
        ),
    ),
)

metadata_st = st.dictionaries(
    st.sampled_from(METADATA_KEYS),
    st.one_of(st.sampled_from(METADATA_VALUES), st.sampled_from(TRUST_VALUES)),
    max_size=3,
)


# whitespace-only (Unicode White_Space) kinds: rejected at item construction
BLANK_KINDS = [" ", "\t\n", "\u2003", "\u0085", "\u3000 "]


@st.composite
def item_dicts(draw, extreme_timestamps=True, blank_kinds=False, tokens=tokens_st, kinds=None):
    """One item. ``kinds``: draw the kind from these only (and always set it)."""
    item = {"content": draw(st.sampled_from(CONTENTS)), "tokens": draw(tokens)}
    if kinds:
        item["kind"] = draw(st.sampled_from(kinds))
    elif draw(st.integers(0, 5)):
        item["kind"] = draw(st.sampled_from(KINDS))
    if blank_kinds and draw(st.integers(0, 59)) == 31:
        item["kind"] = draw(st.sampled_from(BLANK_KINDS))
    if draw(st.booleans()):
        item["source"] = draw(st.sampled_from(SOURCES))
    if draw(st.integers(0, 2)):
        item["priority"] = draw(st.one_of(st.none(), st.sampled_from(PRIORITIES)))
    if draw(st.integers(0, 2)):
        item["tags"] = draw(
            _weighted(
                (3, st.lists(st.sampled_from(TAGS), max_size=4)),
                (1, st.lists(st.sampled_from(TAGS), min_size=1, max_size=2).map(lambda t: t + t)),
            )
        )
    if draw(st.integers(0, 2)):
        item["metadata"] = draw(metadata_st)
    if draw(st.integers(0, 3)):
        pool = timestamps_st
        if extreme_timestamps:
            pool = st.one_of(timestamps_st, st.sampled_from(EXTREME_TIMESTAMPS))
        item["timestamp"] = draw(pool)
    if draw(st.integers(0, 2)):
        item["future_relevance_hint"] = draw(st.one_of(st.none(), st.sampled_from(HINTS), st.floats(-1.0, 2.0)))
    if draw(st.integers(0, 11)) == 5:
        item["pinned"] = True
    if draw(st.integers(0, 5)) == 0:
        item["original_tokens"] = draw(st.integers(0, 500))
    return item


def item_lists(max_size=12, min_size=0, extreme_timestamps=True, blank_kinds=False, tokens=tokens_st, kinds=None):
    # draw the length first: plain st.lists favours very short lists
    return st.integers(min_size, max_size).flatmap(
        lambda n: st.lists(item_dicts(extreme_timestamps, blank_kinds, tokens, kinds), min_size=n, max_size=n)
    )


# a few kinds only: per-kind counts grow, so caps bind and quota partitions hold several items
kind_subsets = st.lists(st.sampled_from(KINDS), min_size=1, max_size=3)


# ---------------------------------------------------------------------------
# Budgets
# ---------------------------------------------------------------------------


def _fold(text):
    """ASCII case folding ('A'-'Z' only), as the spec compares kinds."""
    return "".join(chr(ord(c) + 32) if "A" <= c <= "Z" else c for c in text)


def _unique_fold(kinds):
    """Drop kinds that repeat another kind up to ASCII case."""
    seen = set()
    out = []
    for kind in kinds:
        folded = _fold(kind)
        if folded not in seen:
            seen.add(folded)
            out.append(kind)
    return out


@st.composite
def budgets(draw):
    # mostly "about the size of the item set" (about 12 x 20 tokens), sometimes tiny or zero
    target = draw(
        _weighted(
            (1, st.integers(0, 8)),
            (4, _uniform(20, 250)),
            (1, st.sampled_from([10, 20, 25, 30, 50, 60, 100])),
            (1, st.integers(0, 400)),
        )
    )
    max_tokens = target + draw(_weighted((2, st.just(0)), (2, _uniform(0, 30)), (1, st.integers(0, 300))))
    budget = {"max_tokens": max_tokens, "target_tokens": target}
    if draw(st.booleans()):
        budget["output_reserve"] = draw(st.one_of(st.integers(0, max_tokens), st.integers(0, max_tokens - target)))
    if draw(st.integers(0, 3)) == 0:
        kinds = _unique_fold(draw(st.lists(st.sampled_from(CONFIG_KINDS), max_size=3)))
        budget["reserved_slots"] = {k: draw(st.integers(0, 15)) for k in kinds}
    if draw(st.integers(0, 3)) == 0:
        budget["estimation_safety_margin_percent"] = draw(
            st.one_of(
                st.sampled_from([0.0, 0, 10, 12.5, 33.3, 50.0, 99.9, 100.0]),
                st.floats(0.0, 100.0),
            )
        )
    return budget


# ---------------------------------------------------------------------------
# Scorers
# ---------------------------------------------------------------------------

SIMPLE_TYPES = ["recency", "priority", "kind", "tag", "frequency", "reflexive", "metadata_trust"]

weights_st = st.one_of(
    st.sampled_from([1.0, 1, 2, 0.5, 3.0, 0.1]),
    st.floats(0.001, 10.0),
)
# 3e12 / 7.5e11: scores far above 1 give knapsack values (score x 10000) far above 2^32;
# the slicers must stay exact while sums of values fit in an int64
HUGE_SCORES = [3e12, 7.5e11]
nonneg_weights_st = _weighted(
    (3, st.sampled_from([0.0, 1.0, 0.5, 2, 0.3])),
    (3, st.floats(0.0, 5.0)),
    (1, st.sampled_from(HUGE_SCORES)),
)
unit_st = st.one_of(st.sampled_from([0.0, 0.5, 1.0, 0.3]), st.floats(0.0, 1.0))
# Ages that really occur (reference time minus a pool timestamp), so curve boundaries
# ("age < max_age", "max_age > age") are hit exactly.
POOL_AGES = sorted(
    {
        (ref - ts).total_seconds()
        for ref in REFERENCE_TIMES
        for ts in TIMESTAMP_POOL
        if ref > ts and (ref - ts).total_seconds() < 1e6
    }
)
seconds_st = _weighted(
    (2, st.sampled_from([1, 1.0, 60.0, 3600, 86400.0, 0.5, 1e-6])),
    (2, st.sampled_from(POOL_AGES)),
    (1, st.floats(1e-3, 1e8)),
)


@st.composite
def kind_scorers(draw):
    form = draw(st.integers(0, 4))
    if form == 0:
        return {"type": "kind"}
    if form == 1:
        return {"type": "kind", "use_default_weights": draw(st.booleans())}
    pairs = draw(st.lists(st.tuples(st.sampled_from(CONFIG_KINDS), nonneg_weights_st), max_size=5))
    if form == 2:
        # a plain table: one weight per spelling (folded duplicates still possible)
        return {"type": "kind", "weights": dict(pairs)}
    return {"type": "kind", "weights": [{"kind": k, "weight": w} for k, w in pairs]}


@st.composite
def tag_scorers(draw, pool=()):
    """A tag scorer; with ``pool`` (tags the items carry) its keys are mostly those."""
    keys = (
        _weighted((1, st.sampled_from(TAGS + ["zz"])), (3, st.sampled_from(sorted(pool))))
        if pool
        else st.sampled_from(TAGS + ["zz"])
    )
    pairs = draw(st.lists(st.tuples(keys, nonneg_weights_st), max_size=draw(st.sampled_from([1, 2, 3, 5]))))
    if draw(st.integers(0, 3)) == 0:
        return {"type": "tag", "tag_weights": dict(pairs)}
    return {"type": "tag", "tag_weights": [{"tag": t, "weight": w} for t, w in pairs]}


@st.composite
def decay_scorers(draw, reference_time=None, ages=()):
    """A decay scorer. With ``ages`` (ages of real items at ``reference_time``) the curve's
    ages are often exactly those, so "age < max_age" / "max_age > age" boundaries are hit."""
    if ages:
        age_st = _weighted((1, seconds_st), (2, st.sampled_from(sorted(ages))))
    else:
        age_st = seconds_st
    curve_type = draw(st.sampled_from(["exponential", "window", "step"]))
    if curve_type == "exponential":
        curve = {"type": "exponential", "half_life_secs": draw(age_st)}
    elif curve_type == "window":
        curve = {"type": "window", "max_age_secs": draw(age_st)}
    else:
        windows = draw(
            st.lists(
                st.fixed_dictionaries(
                    {
                        "max_age_secs": _weighted((1, age_st), (1, st.sampled_from(POOL_AGES))),
                        "score": st.one_of(unit_st, st.sampled_from([-0.5, 1.5] + HUGE_SCORES)),
                    }
                ),
                min_size=1,
                max_size=4,
            )
        )
        curve = {"type": "step", "windows": windows}
    if reference_time is None:
        reference_time = draw(st.sampled_from(REFERENCE_TIMES))
    entry = {"type": "decay", "reference_time": reference_time, "curve": curve}
    if draw(st.booleans()):
        entry["null_timestamp_score"] = draw(unit_st)
    return entry


@st.composite
def metadata_trust_scorers(draw):
    if draw(st.booleans()):
        return {"type": "metadata_trust"}
    return {"type": "metadata_trust", "default_score": draw(unit_st)}


@st.composite
def metadata_key_scorers(draw):
    return {
        "type": "metadata_key",
        "key": draw(st.sampled_from(METADATA_KEYS)),
        "value": draw(st.sampled_from(METADATA_VALUES + TRUST_VALUES[:5])),
        "boost": draw(
            _weighted(
                (3, st.sampled_from([2.0, 0.5, 1.0, 3])), (3, st.floats(0.01, 5.0)), (1, st.sampled_from(HUGE_SCORES))
            )
        ),
    }


def leaf_scorers():
    return st.one_of(
        st.sampled_from(["recency", "priority", "frequency", "reflexive"]).map(lambda t: {"type": t}),
        kind_scorers(),
        tag_scorers(),
        metadata_trust_scorers(),
        metadata_key_scorers(),
        decay_scorers(),
    )


@st.composite
def _with_weight(draw, entry_st):
    """A scorer entry, usually with a ``weight`` (1.0 when left out)."""
    entry = dict(draw(entry_st))
    if draw(st.integers(0, 3)):
        entry["weight"] = draw(weights_st)
    return entry


@st.composite
def _scaled(draw, inner_st):
    form = draw(st.integers(0, 2))
    if form == 0:
        return {"type": "scaled", "inner_scorer": draw(st.sampled_from(SIMPLE_TYPES))}
    inner = draw(inner_st)
    if form == 1:
        return {"type": "scaled", "inner": inner}
    return {"type": "scaled", "inner_scorer": inner}


@st.composite
def _composite(draw, child_st):
    children = draw(st.lists(_with_weight(child_st), min_size=1, max_size=3))
    key = draw(st.sampled_from(["scorers", "children"]))
    return {"type": "composite", key: children}


def scorer_entries(depth=2):
    """One scorer entry (EXTENSIONS.md form), composite / scaled nested up to ``depth``."""
    if depth <= 0:
        return leaf_scorers()
    inner = scorer_entries(depth - 1)
    return st.one_of(leaf_scorers(), _scaled(inner), _composite(inner))


# Every scorer type, each with the same chance (so nested ones are not rare).
SCORER_TYPE_STRATEGIES = {
    "recency": st.just({"type": "recency"}),
    "priority": st.just({"type": "priority"}),
    "frequency": st.just({"type": "frequency"}),
    "reflexive": st.just({"type": "reflexive"}),
    "kind": kind_scorers(),
    "tag": tag_scorers(),
    "metadata_trust": metadata_trust_scorers(),
    "metadata_key": metadata_key_scorers(),
    "decay": decay_scorers(),
    "scaled": _scaled(scorer_entries(1)),
    "composite": _composite(scorer_entries(1)),
}


def any_scorer_entry():
    return st.sampled_from(sorted(SCORER_TYPE_STRATEGIES)).flatmap(lambda t: SCORER_TYPE_STRATEGIES[t])


@st.composite
def scoring_cases(draw, max_sets=3):
    """(item sets, scorer entry): every scorer type about equally often; a decay scorer's curve
    ages are often the exact ages of the drawn items."""
    sets = draw(st.lists(item_lists(), min_size=1, max_size=max_sets))
    # decay has three curves and the boundary cases: give it three shares
    scorer_type = draw(st.sampled_from(sorted(SCORER_TYPE_STRATEGIES) + ["decay", "decay"]))
    if scorer_type == "tag":
        return sets, draw(tag_scorers(tuple({t for items in sets for d in items for t in d.get("tags") or ()})))
    if scorer_type != "decay":
        return sets, draw(SCORER_TYPE_STRATEGIES[scorer_type])
    reference = draw(st.sampled_from(REFERENCE_TIMES))
    ages = {
        (reference - d["timestamp"]).total_seconds()
        for items in sets
        for d in items
        if d.get("timestamp") is not None and d["timestamp"] < reference
    }
    return sets, draw(decay_scorers(reference, tuple(sorted(ages))))


# ---------------------------------------------------------------------------
# Slicers, placers, whole configs
# ---------------------------------------------------------------------------

bucket_sizes = _weighted((2, st.sampled_from([1, 1, 2, 5, 10, 25])), (1, st.integers(1, 50)))


def _kind_pool(kinds):
    """Kinds a config names: with ``kinds`` (the items' own kinds) mostly those."""
    kinds = sorted(k for k in kinds if k in KINDS)
    if not kinds:
        return st.sampled_from(CONFIG_KINDS)
    return _weighted((1, st.sampled_from(CONFIG_KINDS)), (2, st.sampled_from(kinds)))


@st.composite
def quota_lists(draw, kinds=()):
    kinds = _unique_fold(draw(st.lists(_kind_pool(kinds), max_size=4)))
    total = 0.0  # (summed as QuotaSlice sums them: in order, in floats)
    quotas = []
    for kind in kinds:
        require = draw(_weighted((2, st.sampled_from([0.0, 10.0, 25.0, 33.3, 50.0])), (1, st.floats(0.0, 100.0))))
        require = min(require, 100.0 - total)
        while total + require > 100.0:  # (100 - total may round up: 34.53... + 33.3 + 32.16... > 100.0)
            require = math.nextafter(require, 0.0)
        cap = draw(
            _weighted(
                (1, st.just(require)),
                (2, st.just(100.0)),
                (1, st.sampled_from([max(require, c) for c in (20.0, 50.0, 75.0)])),
                (1, st.floats(require, 100.0)),
            )
        )
        total += require
        entry = {"kind": kind}
        if require or draw(st.booleans()):
            entry["require"] = require
        if cap != 100.0 or draw(st.booleans()):
            entry["cap"] = cap
        quotas.append(entry)
    return quotas


@st.composite
def count_entries(draw, kinds=()):
    """Count-quota entries; now and then without ``cap_count`` (no cap, README "Differences
    from upstream" 6)."""
    kinds = _unique_fold(draw(st.lists(_kind_pool(kinds), max_size=4)))
    entries = []
    for kind in kinds:
        require = draw(st.integers(0, 3))
        if draw(st.integers(0, 3)) == 0:
            entries.append({"kind": kind, "require_count": require})
            continue
        cap = draw(st.integers(require, 4)) if require else draw(st.integers(0, 3))
        entries.append({"kind": kind, "require_count": require, "cap_count": cap})
    return entries


@st.composite
def slicer_configs(draw, kinds=(), depth=1):
    """A slicer table; a count quota's inner slicer is sometimes any slicer but knapsack (the
    spec's decorator): ``"quota"`` with the quotas beside it, or a whole slicer table (nested
    up to ``depth`` levels)."""
    name = draw(st.sampled_from(["greedy", "knapsack", "quota", "count_quota", "count_constrained_knapsack", None]))
    config = {}
    if name is not None:
        config["slicer"] = name
    if name == "knapsack":
        config["bucket_size"] = draw(bucket_sizes)
    elif name == "quota":
        config["quotas"] = draw(quota_lists(kinds))
        inner = draw(st.sampled_from(["greedy", "knapsack", None]))
        if inner is not None:
            config["inner_slicer"] = inner
        if inner == "knapsack":
            config["bucket_size"] = draw(bucket_sizes)
    elif name in ("count_quota", "count_constrained_knapsack"):
        config["entries"] = draw(count_entries(kinds))
        scarcity = draw(st.sampled_from(["degrade", "degrade", None, None, "throw", "Throw"]))
        if scarcity is not None:
            config["scarcity_behavior"] = scarcity
        if name == "count_constrained_knapsack":
            config["bucket_size"] = draw(bucket_sizes)
        else:
            inner = draw(st.sampled_from(["greedy", None, "quota", "table"] if depth > 0 else ["greedy", None]))
            if inner == "quota":
                config["inner_slicer"] = "quota"
                config["quotas"] = draw(quota_lists(kinds))
            elif inner == "table":
                table = draw(slicer_configs(kinds, depth - 1).filter(lambda t: t.get("slicer") != "knapsack"))
                config["inner_slicer"] = dict(table, slicer=table.get("slicer", "greedy"))
            elif inner is not None:
                config["inner_slicer"] = inner
    return config


CONFIG_SCORERS = st.lists(_with_weight(scorer_entries(2)), min_size=1, max_size=3)


@st.composite
def configs(draw, scorers=None, kinds=()):
    """A full pipeline ``[config]`` table; quota / count entries favour ``kinds``."""
    config = draw(slicer_configs(kinds))
    if scorers is None:
        scorers = CONFIG_SCORERS
    config["scorers"] = draw(scorers)
    placer = draw(st.sampled_from(["chronological", "u_shaped", "u-shaped", None]))
    if placer is not None:
        config["placer"] = placer
    dedup = draw(st.sampled_from([True, False, None]))
    if dedup is not None:
        config["deduplication"] = dedup
    overflow = draw(st.sampled_from(["throw", "truncate", "proceed", "Truncate", None]))
    if overflow is not None:
        config["overflow_strategy"] = overflow
    return config


# ---------------------------------------------------------------------------
# Occasionally invalid configs: both implementations must reject them alike.
# ---------------------------------------------------------------------------

_BREAKERS = [
    lambda c: c["scorers"].append({"type": "recency", "weight": 0.0}),
    lambda c: c["scorers"].append({"type": "kind", "weight": -1.0}),
    lambda c: c["scorers"].append({"type": "tag", "tag_weights": [{"tag": "a", "weight": -0.5}]}),
    lambda c: c["scorers"].append({"type": "metadata_trust", "default_score": 1.5}),
    lambda c: c["scorers"].append({"type": "metadata_key", "key": "k", "value": "v", "boost": 0.0}),
    lambda c: c["scorers"].append({"type": "composite", "scorers": []}),
    lambda c: c["scorers"].append(
        {"type": "decay", "reference_time": _T0, "curve": {"type": "window", "max_age_secs": 0}}
    ),
    lambda c: c["scorers"].append({"type": "decay", "reference_time": _T0, "curve": {"type": "step", "windows": []}}),
    lambda c: c["scorers"].append(
        {
            "type": "decay",
            "reference_time": _T0,
            "null_timestamp_score": -0.1,
            "curve": {"type": "exponential", "half_life_secs": 5},
        }
    ),
    lambda c: c.update(slicer="knapsack", bucket_size=0),
    lambda c: c.update(slicer="quota", quotas=[{"kind": "A", "require": 60.0, "cap": 50.0}]),
    lambda c: c.update(slicer="quota", quotas=[{"kind": "m", "require": 1.0}, {"kind": "M", "require": 1.0}]),
    lambda c: c.update(slicer="quota", quotas=[{"kind": "a", "require": 60.0}, {"kind": "b", "require": 41.0}]),
    lambda c: c.update(slicer="count_quota", entries=[{"kind": "A", "require_count": 2, "cap_count": 1}]),
    lambda c: c.update(slicer="count_quota", inner_slicer="knapsack", entries=[]),
    lambda c: c.update(
        slicer="count_constrained_knapsack",
        entries=[{"kind": "x", "require_count": 0, "cap_count": 1}, {"kind": "X", "require_count": 0, "cap_count": 1}],
    ),
    lambda c: c["scorers"].append({"type": "kind", "weights": [{"kind": " ", "weight": 1.0}]}),
    lambda c: c["scorers"].append({"type": "kind", "weights": {"\u2003": 0.5}}),
    lambda c: c.update(placer="sideways"),
    lambda c: c.update(overflow_strategy="explode"),
]


@st.composite
def maybe_invalid_configs(draw, kinds=()):
    config = draw(configs(kinds=kinds))
    if draw(st.integers(0, 19)) == 7:
        config = {**config, "scorers": list(config["scorers"])}
        draw(st.sampled_from(_BREAKERS))(config)
    return config


@st.composite
def maybe_invalid_budgets(draw):
    budget = draw(budgets())
    if draw(st.integers(0, 39)) == 13:
        budget = dict(budget)
        breaker = draw(
            st.sampled_from(
                [
                    {"target_tokens": budget["max_tokens"] + 1},
                    {"output_reserve": budget["max_tokens"] + 1},
                    {"estimation_safety_margin_percent": 100.5},
                    {"reserved_slots": {"Message": -1}},
                    {"reserved_slots": {" ": 1}},
                    {"reserved_slots": {"Message": 1, "message": 0}},
                    {"max_tokens": -1, "target_tokens": 0},
                ]
            )
        )
        budget.update(breaker)
    return budget


# ---------------------------------------------------------------------------
# Several item sets (for set_column tests)
# ---------------------------------------------------------------------------

SET_KEYS = ["conv-0", "conv-1", "conv-2", "conv-3", "conv-4"]


@st.composite
def item_sets(draw, max_sets=4, max_items=12, tokens=tokens_st, kinds=None):
    """(list of per-set item lists, interleaving) -- ``interleaving`` is a list of
    (set index, position in set) in the order the rows appear in the combined input."""
    n_sets = draw(st.integers(1, max_sets))
    sets = [draw(item_lists(max_size=max_items, min_size=1, tokens=tokens, kinds=kinds)) for _ in range(n_sets)]
    labels = [(s, k) for s, items in enumerate(sets) for k in range(len(items))]
    order = draw(st.permutations(labels))
    # keep each set's own order (rows are grouped stably): sort positions within a set
    per_set_next = [0] * n_sets
    interleaving = []
    for s, _k in order:
        interleaving.append((s, per_set_next[s]))
        per_set_next[s] += 1
    return sets, interleaving


# ---------------------------------------------------------------------------
# Budget-aware token counts
# ---------------------------------------------------------------------------


def tokens_near(budget):
    """Token counts drawn partly from the budget's own boundaries (target, target minus the
    output reserve, halves and thirds, +-1), so that "fits exactly" / "one too many" cases
    of the slicers, the PinnedOverride rule and overflow truncation come up often."""

    def as_int(value, default=0):
        return value if isinstance(value, int) and not isinstance(value, bool) else default

    target = as_int(budget.get("target_tokens"))
    reserve = as_int(budget.get("output_reserve"))
    max_tokens = as_int(budget.get("max_tokens"))
    marks = set()
    for base in (target, target - reserve, max_tokens - reserve, target // 2, target // 3, (target - reserve) // 2):
        marks.update((base - 1, base, base + 1))
    marks = sorted(m for m in marks if m >= 0)
    return _weighted((3, tokens_st), (1, st.sampled_from(marks)))


def _kinds_of(items):
    return tuple(sorted({d.get("kind", "Message") for d in items}))


def _drop_timestamps(items):
    return [{k: v for k, v in d.items() if k != "timestamp"} for d in items]


@st.composite
def overflow_cases(draw, extreme_timestamps=True):
    """(items, budget, config) where a count-quota slicer's phase 1 commits more tokens than
    the target, so the Place stage overflows; tokens are multiples of 5, so the truncation
    walk often fills the target exactly before it drops the rest."""
    kinds = draw(st.lists(st.sampled_from(KINDS), min_size=1, max_size=2))
    target = draw(st.sampled_from([15, 20, 25, 30, 40, 50]))
    budget = {"max_tokens": target + draw(st.sampled_from([0, 10, 100])), "target_tokens": target}
    tokens = st.sampled_from([0, 5, 5, 10, 10, 15, 20, 25])
    items = draw(item_lists(min_size=2, max_size=8, extreme_timestamps=extreme_timestamps, tokens=tokens, kinds=kinds))
    if draw(st.booleans()):
        items = _drop_timestamps(items)
    config = draw(configs(kinds=tuple(kinds)))
    config["slicer"] = draw(st.sampled_from(["count_quota", "count_constrained_knapsack"]))
    config["bucket_size"] = draw(st.sampled_from([1, 5]))
    config.pop("inner_slicer", None)
    config.pop("quotas", None)  # a quota slicer's option: a count-quota policy refuses it
    entries = []
    for kind in _unique_fold(kinds):
        present = sum(1 for d in items if _fold(d["kind"]) == _fold(kind))
        require = draw(_weighted((3, st.just(present)), (1, st.integers(0, present))))
        entries.append({"kind": kind, "require_count": require, "cap_count": require + draw(st.integers(0, 2))})
    config["entries"] = entries
    config["overflow_strategy"] = draw(st.sampled_from(["truncate", "truncate", "truncate", "proceed", "throw"]))
    return items, budget, config


@st.composite
def slicer_focus_cases(draw, slicer, extreme_timestamps=True):
    """(items, budget, config) aimed at one slicer: a few kinds with several items each (so
    count caps bind, count_constrained_knapsack re-sorts several phase-2 picks and quota
    partitions hold several items) and often no timestamps, so the placed order shows the
    slicer's output order. greedy: many equal densities with different scores; knapsack:
    scores far above 1."""
    kinds = draw(st.lists(st.sampled_from(KINDS), min_size=2, max_size=3))
    budget = draw(budgets())
    tokens = _weighted((3, tokens_st), (1, tokens_near(budget)))
    if slicer == "greedy":
        # sizes in ratio 1:2:4 and scores 1 or 2 (below): many equal densities with
        # different scores, and several zero-token items (density "infinite")
        tokens = st.sampled_from([0, 0, 5, 10, 10, 20, 20, 40])
    items = draw(item_lists(min_size=5, extreme_timestamps=extreme_timestamps, tokens=tokens, kinds=kinds))
    if draw(st.integers(0, 2)):
        items = _drop_timestamps(items)
    config = draw(configs(kinds=tuple(kinds)))
    if draw(st.integers(0, 2)):
        config["placer"] = "chronological"  # with no timestamps: placed order = slicer order
    for key in ("slicer", "bucket_size", "inner_slicer", "quotas", "entries", "scarcity_behavior"):
        config.pop(key, None)
    if draw(st.booleans()):
        # a scorer that gives every item a positive score, so knapsack values are not all 0
        config["scorers"] = config["scorers"] + [{"type": "metadata_trust", "weight": 0.5}]
    if slicer == "greedy":
        config["slicer"] = "greedy"
        if draw(st.integers(0, 2)):
            config["scorers"] = [{"type": "metadata_key", "key": "src", "value": "x", "boost": 2.0}]
            marks = draw(st.lists(st.booleans(), min_size=len(items), max_size=len(items)))
            items = [dict(d, metadata={"src": "x"}) if mark else d for d, mark in zip(items, marks)]
    elif slicer == "knapsack":
        config.update(slicer="knapsack", bucket_size=draw(bucket_sizes))
        if draw(st.booleans()):
            # kinds worth 1.1e11..7.5e11: knapsack values 1.1e15..7.5e15 that must stay exact
            # (one 2e11 item against two 1.1e11 ones is decided by them)
            config["bucket_size"] = draw(st.sampled_from([1, 2, 5]))
            values = draw(st.permutations([2e11, 1.5e11, 1.1e11, 7.5e11]))
            config["scorers"] = [{"type": "kind", "weights": dict(zip(_unique_fold(kinds), values))}]
    elif slicer == "quota":
        config.update(slicer="quota", quotas=draw(quota_lists(tuple(kinds))))
        if draw(st.booleans()):
            config.update(inner_slicer="knapsack", bucket_size=draw(bucket_sizes))
    else:
        config["slicer"] = slicer
        config["entries"] = [
            {"kind": kind, "require_count": require, "cap_count": require + draw(st.integers(0, 2))}
            for kind in _unique_fold(kinds)
            for require in [draw(st.integers(0, 2))]
        ]
        if slicer == "count_constrained_knapsack":
            config["bucket_size"] = draw(bucket_sizes)
        if draw(st.integers(0, 3)) == 0:
            config["scarcity_behavior"] = "throw"
        if slicer == "count_quota" and draw(st.booleans()):
            # the decorator over other slicers: quota (greedy or knapsack inside), a nested
            # count quota, count_constrained_knapsack
            form = draw(st.sampled_from(["quota", "quota_knapsack", "count_quota", "count_constrained_knapsack"]))
            if form == "quota":
                config.update(inner_slicer="quota", quotas=draw(quota_lists(tuple(kinds))))
            elif form == "quota_knapsack":
                config["inner_slicer"] = {
                    "slicer": "quota",
                    "inner_slicer": "knapsack",
                    "bucket_size": draw(bucket_sizes),
                    "quotas": draw(quota_lists(tuple(kinds))),
                }
            else:
                inner = {"slicer": form, "entries": draw(count_entries(tuple(kinds)))}
                if form == "count_constrained_knapsack":
                    inner["bucket_size"] = draw(bucket_sizes)
                config["inner_slicer"] = inner
    return items, budget, config


@st.composite
def pinned_cases(draw, extreme_timestamps=True):
    """(items, budget, config) with pinned items and an output reserve, and unpinned items
    sized around target - output_reserve: the PinnedOverride rule's edges."""
    target = draw(_uniform(20, 200))
    reserve = draw(_uniform(1, target))
    budget = {
        "max_tokens": target + draw(st.sampled_from([0, 5, 50])),
        "target_tokens": target,
        "output_reserve": reserve,
    }
    limit = target - reserve
    sizes = sorted({m for m in (limit - 1, limit, limit + 1, target - 1, target, target + 1) if m >= 0})
    pinned = draw(
        item_lists(
            min_size=1, max_size=2, extreme_timestamps=extreme_timestamps, tokens=_uniform(0, max(0, min(limit, 15)))
        )
    )
    pinned = [dict(d, pinned=True) for d in pinned]
    others = draw(
        item_lists(
            min_size=1,
            max_size=8,
            extreme_timestamps=extreme_timestamps,
            tokens=_weighted((1, tokens_st), (2, st.sampled_from(sizes))),
        )
    )
    others = [dict(d, pinned=False) for d in others]
    items = draw(st.permutations(pinned + others))
    return items, budget, draw(configs(kinds=_kinds_of(items)))


FOCUS_CASES = ("pinned", "overflow", "greedy", "knapsack", "quota", "count_quota", "count_constrained_knapsack")


def focused_cases(focus, extreme_timestamps=True):
    """(items, budget, config) of one focus: "pinned" (pinned_cases), "overflow"
    (overflow_cases) or a slicer name (slicer_focus_cases)."""
    if focus == "overflow":
        return overflow_cases(extreme_timestamps)
    if focus == "pinned":
        return pinned_cases(extreme_timestamps)
    return slicer_focus_cases(focus, extreme_timestamps)


@st.composite
def pipeline_cases(draw, invalid=False, blank_kinds=False, extreme_timestamps=True):
    """(items, budget, config): a budget, then items whose token counts often sit on its
    edges, then a config whose quota / count entries mostly name the items' kinds.
    ``invalid``: now and then a budget or config that must be rejected. About half the
    cases are focused ones instead (overflow_cases, pinned_cases, slicer_focus_cases)."""
    focus = draw(st.sampled_from([None] * 7 + list(FOCUS_CASES) + ["overflow"]))
    if focus is not None:
        return draw(focused_cases(focus, extreme_timestamps))
    budget = draw(maybe_invalid_budgets() if invalid else budgets())
    subset = draw(kind_subsets) if draw(st.booleans()) else None
    items = draw(
        item_lists(
            extreme_timestamps=extreme_timestamps, blank_kinds=blank_kinds, tokens=tokens_near(budget), kinds=subset
        )
    )
    if draw(st.integers(0, 2)) == 1:
        # no timestamps at all: the chronological placer then keeps the merged order, so the
        # report shows the slicer's output order (its tie-breaks) directly
        items = _drop_timestamps(items)
    kinds = _kinds_of(items)
    config = draw(maybe_invalid_configs(kinds) if invalid else configs(kinds=kinds))
    return items, budget, config


@st.composite
def set_cases(draw):
    """(item sets with their interleaving, budget, config) for one-table-many-sets runs."""
    budget = draw(budgets())
    subset = draw(kind_subsets) if draw(st.booleans()) else None
    sets, interleaving = draw(item_sets(tokens=tokens_near(budget), kinds=subset))
    config = draw(configs(kinds=_kinds_of([d for items in sets for d in items])))
    return sets, interleaving, budget, config


# ---------------------------------------------------------------------------
# Soak mode and example counts
# ---------------------------------------------------------------------------

import os  # noqa: E402
import random  # noqa: E402

#: CUPEL_NP_SOAK=1: a long bug hunt (many more examples of every property, big shapes too)
SOAK = os.environ.get("CUPEL_NP_SOAK", "") not in ("", "0")


def examples(default, soak):
    """Hypothesis example count: ``default`` normally, ``soak`` under CUPEL_NP_SOAK=1."""
    return soak if SOAK else default


# ---------------------------------------------------------------------------
# Big shapes: sets of hundreds to tens of thousands of items, many sets, values near the
# int64 / float64 limits. Drawing thousands of items one choice at a time would overrun
# hypothesis' buffer, so a big item list is drawn as a handful of shape parameters plus a
# seed, and expanded by a seeded random.Random: every example is still reproducible.
# ---------------------------------------------------------------------------

#: greedy_segments sorts sets of at most 4096 candidates fully and takes a 16384-item
#: density prefix (widened when it does not fill the target) beyond that
GREEDY_FULL_SORT_BELOW = 4096
GREEDY_PREFIX = 16384
#: stages.sort_segments hands segments of at least this many rows to NumPy's sort
BIG_SEGMENT = 65536
#: every |tokens| of one table must add up to less than this (cupel_np.model.columns)
TOKEN_SUM_LIMIT = 2**62

BIG_TAGS = TAGS + [f"t{i}" for i in range(40)]
#: the naive oracle's recency / priority / frequency / scaled scorers are O(N^2) per set:
#: above this many items per set the big strategies use only the O(N) scorers
CHEAP_SCORERS_ABOVE = 700


@st.composite
def item_shapes(draw, min_items, max_items, huge_tokens=False):
    """The parameters of a big item list (expanded by ``expand_items``)."""
    return {
        "n": draw(st.integers(min_items, max_items)),
        "seed": draw(st.integers(0, 2**32 - 1)),
        # distinct contents: few -> big duplicate groups, many -> mostly unique
        "contents": draw(st.sampled_from([1, 3, 12, 50, 1000, 10**6])),
        "kinds": draw(st.sampled_from([1, 2, 4, len(KINDS)])),
        "tokens": draw(st.sampled_from(["small", "coarse", "wide"] + ["huge"] * huge_tokens)),
        "zero_rate": draw(st.sampled_from([0.0, 0.01, 0.2])),
        "negative_rate": draw(st.sampled_from([0.0, 0.0, 0.01])),
        "pinned_rate": draw(st.sampled_from([0.0, 0.0, 0.002, 0.05])),
        # tags: none, Zipf-like (a few tags on very many items: the frequency bitsets), uniform
        "tags": draw(st.sampled_from(["none", "zipf", "uniform"])),
        "timestamps": draw(st.sampled_from(["none", "pool", "all"])),
        "priorities": draw(st.sampled_from(["none", "pool", "wide"])),
        "metadata": draw(st.booleans()),
        "hints": draw(st.booleans()),
    }


def expand_items(shape, n=None):
    """The item dicts of ``shape`` (first ``n`` of them when given)."""
    rng = random.Random(shape["seed"])
    n = shape["n"] if n is None else n
    kinds = KINDS[: shape["kinds"]]
    if shape["contents"] <= len(CONTENTS):
        contents = CONTENTS[: shape["contents"]]
    else:
        contents = None
    huge = shape["tokens"] == "huge"
    if huge:
        # a few items near the per-item limit (2^62), all of them together below the
        # table's limit; the rest small
        n_huge = min(n, rng.randint(1, 3))
        room = TOKEN_SUM_LIMIT - 2**52 - 1000 * n  # slack for the float check and small rows
        huge_rows = set(rng.sample(range(n), n_huge))
        huge_tokens = [rng.randint(room // (2 * n_huge), room // n_huge) for _ in range(n_huge)]
    items = []
    for i in range(n):
        r = rng.random()
        if r < shape["zero_rate"]:
            tokens = 0
        elif r < shape["zero_rate"] + shape["negative_rate"]:
            tokens = -rng.randint(1, 50)
        elif huge and i in huge_rows:
            tokens = huge_tokens.pop()
        elif shape["tokens"] == "coarse":
            tokens = rng.choice([1, 5, 10, 10, 20, 40, 100])
        elif shape["tokens"] == "wide":
            tokens = rng.randint(1, 2000)
        else:
            tokens = rng.randint(1, 60)
        item = {
            "content": rng.choice(contents) if contents else f"c{rng.randrange(shape['contents'])}",
            "tokens": tokens,
            "kind": rng.choice(kinds),
        }
        if shape["tags"] == "zipf":
            item["tags"] = [
                BIG_TAGS[min(int(rng.paretovariate(1.2)) - 1, len(BIG_TAGS) - 1)] for _ in range(rng.randint(0, 3))
            ]
        elif shape["tags"] == "uniform":
            item["tags"] = rng.sample(BIG_TAGS, rng.randint(0, 2))
        if shape["timestamps"] == "all" or (shape["timestamps"] == "pool" and rng.random() < 0.8):
            item["timestamp"] = rng.choice(TIMESTAMP_POOL) + timedelta(
                seconds=rng.choice([0, 0, rng.randint(0, 10**6)])
            )
        if shape["priorities"] == "pool":
            item["priority"] = rng.choice(PRIORITIES + [None])
        elif shape["priorities"] == "wide":
            item["priority"] = rng.randint(-(10**6), 10**6)
        if shape["metadata"] and rng.random() < 0.5:
            item["metadata"] = {"cupel:trust": rng.choice(TRUST_VALUES[:12]), "src": rng.choice(METADATA_VALUES)}
        if shape["hints"] and rng.random() < 0.7:
            item["future_relevance_hint"] = rng.choice(HINTS[:7] + [rng.random()])
        if rng.random() < shape["pinned_rate"]:
            item["pinned"] = True
        items.append(item)
    return items


#: scores near the float64 limits (kind weights / metadata_key boosts / decay step scores)
EXTREME_SCORES = [1.7976931348623157e308, 1e308, 1e300, 5e-324, 2.2250738585072014e-308, 1e-300, 9.2e14, 9.3e14]
#: scores whose knapsack values (score x 10000) stay far below 2^63 even summed over
#: thousands of items: the knapsack slicers get only these in the default strategies,
#: because summed values near 9e18 are a known engine bug (issue 7, defect 1)
SAFE_KNAPSACK_SCORES = [0.0, 0.3, 1.0, 2.5, 10.0, 1e6]


@st.composite
def cheap_scorers(draw, extreme=False):
    """Scorer entries that the oracle computes in O(N) (no ranks, no pairwise tags)."""
    values = st.sampled_from(SAFE_KNAPSACK_SCORES + (EXTREME_SCORES if extreme else []))
    form = draw(
        st.sampled_from(["kind", "kind_weights", "reflexive", "metadata_trust", "metadata_key", "tag", "decay"])
    )
    if form == "kind":
        return {"type": "kind"}
    if form == "kind_weights":
        return {
            "type": "kind",
            "weights": {k: draw(values) for k in draw(st.lists(st.sampled_from(KINDS), max_size=4))},
        }
    if form == "metadata_key":
        return {
            "type": "metadata_key",
            "key": "src",
            "value": draw(st.sampled_from(METADATA_VALUES)),
            "boost": draw(
                st.sampled_from(
                    [b for b in SAFE_KNAPSACK_SCORES if b > 0] + ([1e300, 1.7976931348623157e308] if extreme else [])
                )
            ),
        }
    if form == "tag":
        return {
            "type": "tag",
            "tag_weights": {t: draw(values) for t in draw(st.lists(st.sampled_from(BIG_TAGS[:12]), max_size=4))},
        }
    if form == "decay":
        windows = [
            {"max_age_secs": draw(st.sampled_from([60.0, 3600.0, 86400.0, 1e7])), "score": draw(values)}
            for _ in range(draw(st.integers(1, 3)))
        ]
        return {
            "type": "decay",
            "reference_time": draw(st.sampled_from(REFERENCE_TIMES)),
            "curve": draw(
                st.sampled_from(
                    [{"type": "step", "windows": windows}, {"type": "exponential", "half_life_secs": 3600.0}]
                )
            ),
        }
    return {"type": form}


@st.composite
def big_configs(draw, n_per_set, kinds, extreme_scores=False, slicer=None):
    """A config for sets of ``n_per_set`` items: O(N) scorers only above CHEAP_SCORERS_ABOVE;
    scores near the float limits only with greedy (see SAFE_KNAPSACK_SCORES)."""
    if n_per_set > CHEAP_SCORERS_ABOVE:
        config = draw(
            configs(kinds=kinds, scorers=st.lists(_with_weight(cheap_scorers(extreme_scores)), min_size=1, max_size=3))
        )
    else:
        config = draw(configs(kinds=kinds))
        if extreme_scores:
            config["scorers"] = config["scorers"] + [draw(_with_weight(cheap_scorers(True)))]
    if slicer is not None:
        for key in ("slicer", "bucket_size", "inner_slicer", "quotas", "entries", "scarcity_behavior"):
            config.pop(key, None)
        config["slicer"] = slicer
    if extreme_scores or _has_huge_weights(config):
        # keep the knapsack slicers away from value sums near 2^63 (known bug)
        for key in ("bucket_size", "inner_slicer", "quotas", "entries", "scarcity_behavior"):
            config.pop(key, None)
        config["slicer"] = "greedy"
    if config.get("slicer") in ("count_quota", "count_constrained_knapsack"):
        # bigger counts, so requirements and caps bind on big sets
        for entry in config.get("entries", []):
            entry["require_count"] = entry["require_count"] * draw(st.sampled_from([1, 10, 100]))
            if "cap_count" in entry:
                entry["cap_count"] = max(entry["cap_count"] * 100, entry["require_count"])
    return config


def _has_huge_weights(value):
    """Any number above 1e6 anywhere in a config (kind / tag weights, boosts, step scores)."""
    if isinstance(value, dict):
        return any(_has_huge_weights(v) for k, v in value.items() if k != "reference_time")
    if isinstance(value, list):
        return any(_has_huge_weights(v) for v in value)
    return isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) > 1e6


@st.composite
def big_budgets(draw, items, fracs=(0.0, 0.001, 0.05, 0.3, 0.7, 1.0, 1.5)):
    """A budget sized against ``items``: a fraction (one of ``fracs``; hypothesis tries the
    first one first) of their total, with huge tokens a target near 2^62."""
    total = sum(max(0, d["tokens"]) for d in items)
    pinned = sum(d["tokens"] for d in items if d.get("pinned") and d["tokens"] > 0)
    limit = 2**62 - 1
    frac = draw(st.sampled_from(fracs))
    target = min(limit, int(total * frac) + draw(st.integers(0, 50)))
    target = max(target, min(limit, pinned))
    max_tokens = min(limit, target + draw(st.sampled_from([0, 0, 10, total])))
    budget = {"max_tokens": max_tokens, "target_tokens": target}
    if draw(st.integers(0, 3)) == 0:
        budget["output_reserve"] = draw(st.integers(0, max_tokens - target))
    return budget


@st.composite
def big_pipeline_cases(draw, shape):
    """(items, budget, config) of one big shape:

    * "hundreds": 100-700 items, every scorer and slicer;
    * "greedy_prefix": 20000-24000 items (past greedy's 16384 prefix; a target of 0.9 of the
      tokens makes it widen), greedy;
    * "full_sort": 4000-4200 items (both sides of greedy's full-sort switch at 4096), greedy;
    * "big_segment": 65536-66500 items (NumPy's sort for big segments);
    * "huge_tokens": 20-300 items, a few with tokens near 2^62, budgets near 2^62;
    * "extreme_scores": 20-3000 items scored near the float64 limits (greedy only).
    """
    lo, hi = {
        "hundreds": (100, 700),
        "greedy_prefix": (20000, 24000),
        "full_sort": (GREEDY_FULL_SORT_BELOW - 96, GREEDY_FULL_SORT_BELOW + 104),
        "big_segment": (BIG_SEGMENT, BIG_SEGMENT + 1000),
        "huge_tokens": (20, 300),
        "extreme_scores": (20, 3000),
    }[shape]
    params = draw(item_shapes(lo, hi, huge_tokens=shape == "huge_tokens"))
    if shape == "huge_tokens":
        params["tokens"] = "huge"
    if shape in ("greedy_prefix", "big_segment"):
        params["pinned_rate"] = 0.0  # pinned rows leave the slicer's set below the threshold
        params["negative_rate"] = 0.0
        params["contents"] = 10**6  # duplicates too would leave fewer candidates than needed
    items = expand_items(params)
    kinds = _kinds_of(items)
    # greedy's 16384-item prefix holds ~80% of the tokens: 0.9 makes it widen
    fracs = {"greedy_prefix": (0.9, 0.3, 0.99, 0.05), "big_segment": (0.5, 0.9, 0.01)}
    budget = draw(big_budgets(items, **({"fracs": fracs[shape]} if shape in fracs else {})))
    slicer = "greedy" if shape in ("greedy_prefix", "full_sort", "big_segment") else None
    config = draw(big_configs(len(items), kinds, extreme_scores=shape == "extreme_scores", slicer=slicer))
    if shape == "huge_tokens":
        config = draw(small_knapsack_tables(config, budget))
    return items, budget, config


@st.composite
def small_knapsack_tables(draw, config, budget):
    """``config`` with a knapsack bucket near the target: a knapsack table over a 2^62 target
    is refused (TableTooLargeError, an engine limit the oracle does not have)."""
    if config.get("slicer") in ("knapsack", "count_constrained_knapsack") or config.get("inner_slicer") == "knapsack":
        config = dict(config, bucket_size=max(1, budget["target_tokens"] // draw(st.sampled_from([1, 3, 50]))))
    inner = config.get("inner_slicer")
    if isinstance(inner, dict):  # a count quota's nested slicer table: its knapsack too
        config = dict(config, inner_slicer=draw(small_knapsack_tables(inner, budget)))
    return config


BIG_SHAPES = ("hundreds", "greedy_prefix", "full_sort", "big_segment", "huge_tokens", "extreme_scores")


@st.composite
def many_set_cases(draw, max_sets=200):
    """(rows, set keys, budget, config): many small sets, or a few sets of hundreds of items,
    in one table with interleaved rows."""
    many = draw(st.booleans())
    n_sets = draw(st.integers(20, max_sets)) if many else draw(st.integers(2, 4))
    rng = random.Random(draw(st.integers(0, 2**32 - 1)))
    params = draw(item_shapes(1, 12 if many else 400))
    rows, keys = [], []
    for s in range(n_sets):
        n = rng.randint(1, params["n"])
        for d in expand_items(dict(params, seed=rng.randrange(2**32)), n):
            rows.append(d)
            keys.append(s)
    order = list(range(len(rows)))
    if draw(st.booleans()):
        rng.shuffle(order)
    rows = [rows[i] for i in order]
    keys = [keys[i] for i in order]
    kinds = _kinds_of(rows)
    budget = draw(budgets())
    config = draw(big_configs(max(1, params["n"]), kinds))
    return rows, keys, budget, config


@st.composite
def knapsack_limit_cases(draw):
    """(items, budget, config) for a knapsack slicer with a small table: the test picks a
    ``max_cells`` near candidates x capacity."""
    items = draw(item_lists(min_size=1, max_size=30))
    budget = draw(budgets())
    config = draw(configs(kinds=_kinds_of(items)))
    for key in ("slicer", "bucket_size", "inner_slicer", "quotas", "entries", "scarcity_behavior"):
        config.pop(key, None)
    config["slicer"] = draw(st.sampled_from(["knapsack", "count_constrained_knapsack"]))
    config["bucket_size"] = draw(st.sampled_from([1, 1, 2, 3, 7]))
    if config["slicer"] == "count_constrained_knapsack":
        config["entries"] = draw(count_entries(_kinds_of(items)))
    return items, budget, config


# ---------------------------------------------------------------------------
# Policy sensitivity: several item sets, several labelled variants
# ---------------------------------------------------------------------------

_VARY = ("scorers", "slicer", "placer", "deduplication", "overflow_strategy", "budget")


@st.composite
def sensitivity_variants(draw, kinds, n_min=2, n_max=4, budget_st=None):
    """[(label, budget, config)]: a base config and variations of it (one dimension changed,
    so few contents swing) mixed with independent configs."""
    if budget_st is None:
        budget_st = budgets()
    base_budget = draw(budget_st)
    base = draw(configs(kinds=kinds))
    out = []
    for i in range(draw(st.integers(n_min, n_max))):
        budget, config = base_budget, dict(base)
        # placer / dedup / overflow changes rarely change inclusion: favour the others
        how = draw(
            st.sampled_from(_VARY + ("same", "independent", "scorers", "scorers", "slicer", "budget", "independent"))
        )
        if how == "independent":
            config = draw(configs(kinds=kinds))
            budget = draw(budget_st)
        elif how == "budget":
            budget = draw(budget_st)
        elif how in ("scorers", "placer", "deduplication", "overflow_strategy"):
            other = draw(configs(kinds=kinds))
            config.pop(how, None)
            if how in other:
                config[how] = other[how]
        elif how == "slicer":
            other = draw(slicer_configs(kinds))
            for key in ("slicer", "bucket_size", "inner_slicer", "quotas", "entries", "scarcity_behavior"):
                config.pop(key, None)
            config.update(other)
        out.append((draw(st.sampled_from([f"v{i}", f"variant {i}", f"\u00e9-{i}"])), budget, config))
    return out


@st.composite
def sensitivity_cases(draw, max_sets=4, max_items=10, max_variants=4):
    """(rows in input order, set key per row, variants): sets interleaved in one table."""
    subset = draw(kind_subsets) if draw(st.booleans()) else None
    budget = draw(budgets())
    sets, interleaving = draw(
        item_sets(max_sets=max_sets, max_items=max_items, kinds=subset, tokens=tokens_near(budget))
    )
    key_of = draw(st.sampled_from([lambda s: SET_KEYS[s], lambda s: 100 - 7 * s]))
    rows = [sets[s][k] for s, k in interleaving]
    keys = [key_of(s) for s, _k in interleaving]
    # budgets mostly the one the token counts were drawn around, so selections are partial
    variants = draw(
        sensitivity_variants(
            _kinds_of(rows), n_max=max_variants, budget_st=_weighted((3, st.just(budget)), (1, budgets()))
        )
    )
    return rows, keys, variants
