"""Naive reference oracle for the Cupel context-selection pipeline.

This module is a slow, deliberately literal transcription of the Cupel
specification pseudocode (spec/src/**) plus the project decisions recorded in
the semantics document.  It is the reference that the vectorized engine
(cupel_np) is compared against, so it must stay independent of it: it does not
import cupel_np, and it uses no numpy.  Clarity beats speed everywhere.

Conventions
-----------
* An item is a plain dict (see ``ITEM_DEFAULTS`` for the keys and defaults).
* Items are identified by their position in a list, never by content.
* "ASCII folding" maps only 'A'-'Z' to 'a'-'z' (never ``str.lower()``).
* Every failure is a ``NaiveError`` whose ``.code`` is one of
  ``pinned_exceeds_budget``, ``overflow``, ``scarcity``, ``invalid_config``.
"""

import math
import re
import sys
from datetime import UTC, datetime

__all__ = [
    "NaiveError",
    "score_items",
    "score_config",
    "slice_items",
    "slice_items_detailed",
    "place",
    "run_pipeline",
    "policy_sensitivity",
]


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------

ERROR_CODES = ("pinned_exceeds_budget", "overflow", "scarcity", "invalid_config")


class NaiveError(Exception):
    """A pipeline failure.  ``code`` is one of ``ERROR_CODES``."""

    def __init__(self, code, message=""):
        assert code in ERROR_CODES, code
        super().__init__(f"{code}: {message}" if message else code)
        self.code = code


def _invalid(message):
    raise NaiveError("invalid_config", message)


# ---------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------

MAX_FLOAT = sys.float_info.max

# Unicode White_Space property (what Rust's str::trim strips).
_WHITESPACE = set(
    "\u0009\u000a\u000b\u000c\u000d\u0020\u0085\u00a0\u1680"
    "\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)


def ascii_fold(text):
    """Lower-case 'A'-'Z' only; every other character is left alone."""
    out = []
    for ch in text:
        if "A" <= ch <= "Z":
            out.append(chr(ord(ch) + 32))
        else:
            out.append(ch)
    return "".join(out)


def _is_blank(text):
    """True for an empty or whitespace-only string."""
    for ch in text:
        if ch not in _WHITESPACE:
            return False
    return True


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _score_desc_key(score):
    """Sort key for "score descending" with NaN treated as the lowest score.

    Used with Python's stable ``sorted``, so ties keep their input order.
    """
    if isinstance(score, float) and math.isnan(score):
        return (1, 0.0)
    return (0, -score)


def _as_utc(moment):
    """Timestamps are instants; a naive datetime is taken to be UTC."""
    if moment is None:
        return None
    if not isinstance(moment, datetime):
        _invalid(f"timestamp must be a datetime, got {moment!r}")
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment


# ---------------------------------------------------------------------------
# Items
# ---------------------------------------------------------------------------

ITEM_DEFAULTS = {
    "content": "",
    "tokens": 0,
    "kind": "Message",
    "source": "Chat",
    "priority": None,
    "tags": [],
    "metadata": {},
    "timestamp": None,
    "future_relevance_hint": None,
    "pinned": False,
}


def normalize_item(item):
    """Return a new dict with every ITEM_DEFAULTS key present."""
    out = {}
    for key, default in ITEM_DEFAULTS.items():
        value = item.get(key, default)
        if value is None and key in ("kind", "source", "tags", "metadata", "pinned"):
            value = default
        out[key] = value
    out["tags"] = list(out["tags"])
    out["metadata"] = dict(out["metadata"])
    out["timestamp"] = _as_utc(out["timestamp"])
    return out


def validate_item(item):
    """ContextItem construction rules (content non-empty, kind/source non-blank)."""
    if not isinstance(item["content"], str) or item["content"] == "":
        _invalid("item content must be a non-empty string")
    if not _is_int(item["tokens"]):
        _invalid("item tokens must be an integer")
    if not isinstance(item["kind"], str) or _is_blank(item["kind"]):
        _invalid("item kind must be a non-blank string")
    if not isinstance(item["source"], str) or _is_blank(item["source"]):
        _invalid("item source must be a non-blank string")


# ---------------------------------------------------------------------------
# Scorers
#
# Every scorer has ``score(i, all_items)``, the spec's Score(item, allItems)
# with the item identified by its index i in all_items (reference identity),
# and ``score_all(all_items)`` returning one score per item.
# ---------------------------------------------------------------------------


class Scorer:
    def score(self, i, all_items):
        raise NotImplementedError

    def score_all(self, all_items):
        return [self.score(i, all_items) for i in range(len(all_items))]


class RecencyScorer(Scorer):
    def score(self, i, all_items):
        item = all_items[i]
        if item["timestamp"] is None:
            return 0.0
        count_with_timestamp = 0
        rank = 0
        for other in all_items:
            if other["timestamp"] is None:
                continue
            count_with_timestamp += 1
            if other["timestamp"] < item["timestamp"]:
                rank += 1
        if count_with_timestamp <= 1:
            return 1.0
        return rank / (count_with_timestamp - 1)


class PriorityScorer(Scorer):
    def score(self, i, all_items):
        item = all_items[i]
        if item["priority"] is None:
            return 0.0
        count_with_priority = 0
        rank = 0
        for other in all_items:
            if other["priority"] is None:
                continue
            count_with_priority += 1
            if other["priority"] < item["priority"]:
                rank += 1
        if count_with_priority <= 1:
            return 1.0
        return rank / (count_with_priority - 1)


DEFAULT_KIND_WEIGHTS = {
    "SystemPrompt": 1.0,
    "Memory": 0.8,
    "ToolOutput": 0.6,
    "Document": 0.4,
    "Message": 0.2,
}


class KindScorer(Scorer):
    def __init__(self, weights):
        # weights: list of (kind, weight) pairs; later duplicates win.
        self.weights = {}
        for kind, weight in weights:
            if not isinstance(kind, str) or _is_blank(kind):
                # a ContextKind: non-empty, not whitespace-only (data-model/enumerations.md)
                _invalid("kind weight key must be a non-blank string")
            if not _is_number(weight):
                _invalid("kind weight must be a number")
            if weight < 0.0:
                _invalid("kind weight must be non-negative")
            if not math.isfinite(weight):
                _invalid("kind weight must be finite")
            self.weights[ascii_fold(kind)] = float(weight)

    def score(self, i, all_items):
        key = ascii_fold(all_items[i]["kind"])
        if key in self.weights:
            return self.weights[key]
        return 0.0


class TagScorer(Scorer):
    def __init__(self, weights):
        # weights: list of (tag, weight) pairs; later duplicates win.
        self.tag_weights = {}
        for tag, weight in weights:
            if not isinstance(tag, str):
                _invalid("tag weight key must be a string")
            if not _is_number(weight):
                _invalid("tag weight must be a number")
            if weight < 0.0:
                _invalid("tag weight must be non-negative")
            if not math.isfinite(weight):
                _invalid("tag weight must be finite")
            self.tag_weights[tag] = float(weight)
        self.total_weight = 0.0
        for weight in self.tag_weights.values():
            self.total_weight += weight

    def score(self, i, all_items):
        tags = all_items[i]["tags"]
        if self.total_weight == 0.0 or len(tags) == 0:
            return 0.0
        matched_sum = 0.0
        for tag in tags:
            if tag in self.tag_weights:  # case-sensitive lookup
                matched_sum += self.tag_weights[tag]
        return min(matched_sum / self.total_weight, 1.0)


class FrequencyScorer(Scorer):
    def score(self, i, all_items):
        item = all_items[i]
        if len(item["tags"]) == 0 or len(all_items) <= 1:
            return 0.0
        matching_items = 0
        for j, other in enumerate(all_items):
            if j == i:  # skip self by identity
                continue
            if len(other["tags"]) == 0:
                continue
            if _shares_any_tag(item["tags"], other["tags"]):
                matching_items += 1
        return matching_items / (len(all_items) - 1)


def _shares_any_tag(tags_a, tags_b):
    for a in tags_a:
        for b in tags_b:
            if ascii_fold(a) == ascii_fold(b):
                return True
    return False


class ReflexiveScorer(Scorer):
    def score(self, i, all_items):
        value = all_items[i]["future_relevance_hint"]
        if value is None:
            return 0.0
        value = float(value)
        if not math.isfinite(value):
            return 0.0
        return _clamp(value, 0.0, 1.0)


def _clamp(x, lo, hi):
    if x < lo:
        return lo
    if x > hi:
        return hi
    return x


class CompositeScorer(Scorer):
    def __init__(self, entries):
        # entries: list of (scorer, weight)
        if len(entries) == 0:
            _invalid("composite needs at least one scorer")
        total_weight = 0.0
        for scorer, weight in entries:
            if scorer is None:
                _invalid("composite child scorer must not be null")
            if not _is_number(weight):
                _invalid("composite weight must be a number")
            if weight <= 0.0:
                _invalid("composite weight must be positive")
            if not math.isfinite(weight):
                _invalid("composite weight must be finite")
            total_weight += weight
        self.scorers = [scorer for scorer, _ in entries]
        self.normalized_weights = [weight / total_weight for _, weight in entries]
        # Children are freshly built objects, so the graph is a tree: no cycles.

    def score(self, i, all_items):
        result = 0.0
        for scorer, weight in zip(self.scorers, self.normalized_weights):
            result = result + scorer.score(i, all_items) * weight
        return result

    def score_all(self, all_items):
        # Same arithmetic as score(), with each child evaluated once per pass.
        child_scores = [scorer.score_all(all_items) for scorer in self.scorers]
        results = []
        for i in range(len(all_items)):
            result = 0.0
            for k, weight in enumerate(self.normalized_weights):
                result = result + child_scores[k][i] * weight
            results.append(result)
        return results


class ScaledScorer(Scorer):
    def __init__(self, inner):
        self.inner = inner

    def _scale(self, raw_score, inner_scores):
        if len(inner_scores) == 0:
            return 0.5
        lo = math.inf
        hi = -math.inf
        for s in inner_scores:
            if s < lo:
                lo = s
            if s > hi:
                hi = s
        if hi == lo:
            return 0.5
        return (raw_score - lo) / (hi - lo)

    def score(self, i, all_items):
        inner_scores = [self.inner.score(j, all_items) for j in range(len(all_items))]
        return self._scale(inner_scores[i], inner_scores)

    def score_all(self, all_items):
        # The spec allows caching the inner pass; the result is identical.
        inner_scores = self.inner.score_all(all_items)
        return [self._scale(inner_scores[i], inner_scores) for i in range(len(all_items))]


TRUST_KEY = "cupel:trust"

# Rust's str::parse::<f64>() grammar: optional sign, then inf / infinity / nan
# (any case) or a decimal number with optional exponent.  No whitespace, no
# underscores, no hex, ASCII digits only.
_RUST_F64 = re.compile(
    r"[+-]?(?:inf|infinity|nan|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:e[+-]?[0-9]+)?)",
    re.IGNORECASE | re.ASCII,
)


def parse_rust_f64(text):
    """Return the float value of ``text`` or None when it does not parse."""
    if not isinstance(text, str) or _RUST_F64.fullmatch(text) is None:
        return None
    return float(text)


class MetadataTrustScorer(Scorer):
    def __init__(self, default_score):
        if not _is_number(default_score) or not (0.0 <= default_score <= 1.0):
            _invalid("metadata_trust default_score must be in [0, 1]")
        self.default_score = float(default_score)

    def score(self, i, all_items):
        metadata = all_items[i]["metadata"]
        if TRUST_KEY not in metadata:
            return self.default_score
        value = parse_rust_f64(metadata[TRUST_KEY])
        if value is None:
            return self.default_score
        if not math.isfinite(value):
            return self.default_score
        return _clamp(value, 0.0, 1.0)


class MetadataKeyScorer(Scorer):
    DEFAULT_MULTIPLIER = 1.0

    def __init__(self, key, value, boost):
        if not isinstance(key, str) or not isinstance(value, str):
            _invalid("metadata_key key and value must be strings")
        if not _is_number(boost):
            _invalid("metadata_key boost must be a number")
        if boost <= 0.0:
            _invalid("metadata_key boost must be > 0")
        if not math.isfinite(boost):
            _invalid("metadata_key boost must be finite")
        self.key = key
        self.value = value
        self.boost = float(boost)

    def score(self, i, all_items):
        metadata = all_items[i]["metadata"]
        if self.key not in metadata:
            return self.DEFAULT_MULTIPLIER
        if metadata[self.key] != self.value:
            return self.DEFAULT_MULTIPLIER
        return self.boost


class DecayScorer(Scorer):
    def __init__(self, reference_time, curve, null_timestamp_score):
        if not isinstance(reference_time, datetime):
            _invalid("decay reference_time must be a datetime")
        if not _is_number(null_timestamp_score) or not (0.0 <= null_timestamp_score <= 1.0):
            _invalid("decay null_timestamp_score must be in [0, 1]")
        self.reference_time = _as_utc(reference_time)
        self.null_timestamp_score = float(null_timestamp_score)
        self.curve = _build_curve(curve)

    def score(self, i, all_items):
        timestamp = all_items[i]["timestamp"]
        if timestamp is None:
            return self.null_timestamp_score
        age = (self.reference_time - timestamp).total_seconds()
        age = max(0.0, age)  # future-dated items are maximally fresh
        return self.curve(age)


def _positive_seconds(value, name):
    if not _is_number(value) or not math.isfinite(value) or value <= 0:
        _invalid(f"decay {name} must be a positive finite number of seconds")
    return float(value)


def _build_curve(curve):
    """Return a function age_seconds -> score."""
    if not isinstance(curve, dict):
        _invalid("decay curve must be a table")
    curve_type = curve.get("type")

    if curve_type == "exponential":
        half_life = _positive_seconds(curve.get("half_life_secs"), "half_life_secs")

        def exponential(age):
            return math.pow(2.0, -age / half_life)

        return exponential

    if curve_type == "window":
        max_age = _positive_seconds(curve.get("max_age_secs"), "max_age_secs")

        def window(age):
            if age < max_age:
                return 1.0
            return 0.0

        return window

    if curve_type == "step":
        raw_windows = curve.get("windows")
        if not isinstance(raw_windows, list) or len(raw_windows) == 0:
            _invalid("decay step curve needs at least one window")
        windows = []
        for w in raw_windows:
            if not isinstance(w, dict):
                _invalid("decay step window must be a table")
            max_age = _positive_seconds(w.get("max_age_secs"), "window max_age_secs")
            score = w.get("score")
            if not _is_number(score):
                _invalid("decay step window score must be a number")
            windows.append((max_age, float(score)))

        def step(age):
            for max_age, score in windows:
                if max_age > age:
                    return score
            return windows[-1][1]

        return step

    _invalid(f"unknown decay curve type {curve_type!r}")


def _weight_pairs(raw, key_name):
    """Kind/tag weights: a list of {key_name, weight} tables, or a plain table."""
    if raw is None:
        return []
    if isinstance(raw, dict):
        return list(raw.items())
    if not isinstance(raw, list):
        _invalid(f"{key_name} weights must be a list of tables")
    pairs = []
    for entry in raw:
        if not isinstance(entry, dict) or key_name not in entry or "weight" not in entry:
            _invalid(f"each weight entry needs {key_name!r} and 'weight'")
        pairs.append((entry[key_name], entry["weight"]))
    return pairs


def _composite_children(entry):
    if "scorers" in entry:
        return entry["scorers"]
    if "children" in entry:
        return entry["children"]
    return None


def build_scorer(entry):
    """Build a scorer from one scorer entry (EXTENSIONS.md form)."""
    if isinstance(entry, str):
        entry = {"type": entry}
    if not isinstance(entry, dict):
        _invalid("scorer entry must be a table")
    scorer_type = entry.get("type")

    if scorer_type == "recency":
        return RecencyScorer()
    if scorer_type == "priority":
        return PriorityScorer()
    if scorer_type == "frequency":
        return FrequencyScorer()
    if scorer_type == "reflexive":
        return ReflexiveScorer()

    if scorer_type == "kind":
        if "weights" in entry and entry.get("use_default_weights") is not True:
            return KindScorer(_weight_pairs(entry["weights"], "kind"))
        return KindScorer(list(DEFAULT_KIND_WEIGHTS.items()))

    if scorer_type == "tag":
        return TagScorer(_weight_pairs(entry.get("tag_weights"), "tag"))

    if scorer_type == "composite":
        children = _composite_children(entry)
        if not isinstance(children, list):
            _invalid("composite needs a 'scorers' (or 'children') list")
        return CompositeScorer([(build_scorer(child), _entry_weight(child)) for child in children])

    if scorer_type == "scaled":
        if isinstance(entry.get("inner"), dict):
            return ScaledScorer(build_scorer(entry["inner"]))
        if isinstance(entry.get("inner_scorer"), str):
            return ScaledScorer(build_scorer({"type": entry["inner_scorer"]}))
        if isinstance(entry.get("inner_scorer"), dict):
            return ScaledScorer(build_scorer(entry["inner_scorer"]))
        _invalid("scaled needs 'inner_scorer' or 'inner'")

    if scorer_type == "metadata_trust":
        return MetadataTrustScorer(entry.get("default_score", 0.5))

    if scorer_type == "metadata_key":
        for key in ("key", "value", "boost"):
            if key not in entry:
                _invalid(f"metadata_key needs {key!r}")
        return MetadataKeyScorer(entry["key"], entry["value"], entry["boost"])

    if scorer_type == "decay":
        return DecayScorer(
            entry.get("reference_time"),
            entry.get("curve"),
            entry.get("null_timestamp_score", 0.5),
        )

    _invalid(f"unknown scorer type {scorer_type!r}")


def _entry_weight(entry):
    """Weight of a child entry inside a composite (1.0 when not given)."""
    if isinstance(entry, dict):
        return entry.get("weight", 1.0)
    return 1.0


def build_config_scorer(config):
    """Pipeline scorer: one entry -> that scorer; several -> composite."""
    entries = config.get("scorers")
    if not isinstance(entries, list) or len(entries) == 0:
        _invalid("config needs at least one scorer")
    if len(entries) == 1:
        return build_scorer(entries[0])  # its weight is ignored
    return CompositeScorer([(build_scorer(e), _entry_weight(e)) for e in entries])


def score_items(items, scorer):
    """Score every item with one scorer entry; allItems = the given list."""
    built = build_scorer(scorer)
    all_items = [normalize_item(item) for item in items]
    return built.score_all(all_items)


def score_config(items, config):
    """Score every item with the scorer a [config] table describes."""
    built = build_config_scorer(config)
    all_items = [normalize_item(item) for item in items]
    return built.score_all(all_items)


# ---------------------------------------------------------------------------
# Slicers
#
# Each slicer works on ``scored`` (the full list of (item, score) pairs) and a
# ``pool``: the positions of ``scored`` it was handed, in the order it was
# handed them.  It returns positions of ``scored`` in slicer output order.
# ---------------------------------------------------------------------------


def greedy_slice(scored, pool, target_tokens):
    if len(pool) == 0 or target_tokens <= 0:
        return []

    # Step 1: value densities
    densities = []  # (density, index into pool)
    for i, pos in enumerate(pool):
        item, score = scored[pos]
        tokens = item["tokens"]
        if tokens == 0:
            densities.append((MAX_FLOAT, i))
        else:
            densities.append((score / tokens, i))

    # Step 2: density descending, ties by index ascending (stable sort)
    densities = sorted(densities, key=lambda d: _score_desc_key(d[0]))

    # Step 3: greedy fill
    remaining = target_tokens
    selected = []
    for _density, i in densities:
        pos = pool[i]
        tokens = scored[pos][0]["tokens"]
        if tokens == 0:
            selected.append(pos)
        elif tokens <= remaining:
            selected.append(pos)
            remaining = remaining - tokens
    return selected


def _knapsack_value(score):
    if isinstance(score, float) and math.isnan(score):
        return 0
    scaled = score * 10000
    if scaled == -math.inf:
        return 0
    # the spec's integer value, cast as Rust casts f64 -> i64: it saturates at i64::MAX, for a
    # finite value past 2**63 exactly as for +inf (sums of values are then exact, unbounded)
    if scaled == math.inf:
        return 2**63 - 1
    return min(max(0, math.floor(scaled)), 2**63 - 1)


def knapsack_slice(scored, pool, target_tokens, bucket_size):
    if len(pool) == 0 or target_tokens <= 0:
        return []

    # Step 1: pre-filter zero-token items
    zero_token_items = []
    candidates = []
    for pos in pool:
        tokens = scored[pos][0]["tokens"]
        if tokens == 0:
            zero_token_items.append(pos)
        elif tokens > 0:
            candidates.append(pos)
    if len(candidates) == 0:
        return zero_token_items

    n = len(candidates)

    # Step 2: parallel arrays
    weights = [scored[pos][0]["tokens"] for pos in candidates]
    values = [_knapsack_value(scored[pos][1]) for pos in candidates]

    # Step 3: discretize (floor for capacity, ceil for weights)
    capacity = target_tokens // bucket_size
    if capacity == 0:
        return zero_token_items
    discretized_weights = [-(-w // bucket_size) for w in weights]

    # Step 4: DP with a 1D value array and a 2D keep table
    dp = [0] * (capacity + 1)
    keep = [[False] * (capacity + 1) for _ in range(n)]
    for i in range(n):
        dw = discretized_weights[i]
        dv = values[i]
        for w in range(capacity, dw - 1, -1):
            with_item = dp[w - dw] + dv
            if with_item > dp[w]:
                dp[w] = with_item
                keep[i][w] = True

    # Step 5: reconstruct
    selected = []
    remaining_capacity = capacity
    for i in range(n - 1, -1, -1):
        if keep[i][remaining_capacity]:
            selected.append(candidates[i])
            remaining_capacity = remaining_capacity - discretized_weights[i]

    # Step 6: zero-token items first, then the DP picks in reconstruction order
    return zero_token_items + selected


def _run_inner(inner_name, bucket_size, scored, pool, target_tokens):
    if inner_name == "greedy":
        return greedy_slice(scored, pool, target_tokens)
    return knapsack_slice(scored, pool, target_tokens, bucket_size)


def quota_slice(scored, pool, target_tokens, quotas, inner_name, bucket_size):
    """quotas: dict folded kind -> (require_pct, cap_pct)."""
    if len(pool) == 0 or target_tokens <= 0:
        return []

    # Phase 1: partition by folded kind (each partition keeps pool order)
    partitions = {}
    for pos in pool:
        kind = ascii_fold(scored[pos][0]["kind"])
        partitions.setdefault(kind, []).append(pos)

    # Phase 2: candidate token mass per kind
    candidate_token_mass = {}
    for kind, positions in partitions.items():
        mass = 0
        for pos in positions:
            mass = mass + scored[pos][0]["tokens"]
        candidate_token_mass[kind] = mass

    # Phase 3: budget distribution
    kind_budgets = _distribute_budget(partitions, candidate_token_mass, target_tokens, quotas)

    # Phase 4: per-kind slicing, kinds in ascending folded-kind order
    all_selected = []
    for kind in sorted(partitions):
        kind_budget = kind_budgets.get(kind, 0)
        if kind_budget <= 0:
            continue
        cap_pct = quotas[kind][1] if kind in quotas else 100.0
        cap = math.floor(cap_pct / 100.0 * target_tokens)
        sub_target = min(kind_budget, cap)
        all_selected.extend(_run_inner(inner_name, bucket_size, scored, partitions[kind], sub_target))
    return all_selected


def _distribute_budget(partitions, candidate_token_mass, target_tokens, quotas):
    # Step 1: require and cap token amounts for configured kinds
    require_tokens = {}
    cap_tokens = {}
    for kind, (require_pct, cap_pct) in quotas.items():
        require_tokens[kind] = math.floor(require_pct / 100.0 * target_tokens)
        cap_tokens[kind] = math.floor(cap_pct / 100.0 * target_tokens)

    # Step 2: sum of required tokens
    total_required = 0
    for req in require_tokens.values():
        total_required = total_required + req
    unassigned_budget = max(0, target_tokens - total_required)

    # Step 3: distribution mass
    total_mass_for_distribution = 0
    for kind in partitions:
        cap = cap_tokens.get(kind, target_tokens)
        require = require_tokens.get(kind, 0)
        if cap > require:
            total_mass_for_distribution = total_mass_for_distribution + candidate_token_mass[kind]

    # Step 4: per-kind budget
    kind_budgets = {}
    for kind in partitions:
        require = require_tokens.get(kind, 0)
        cap = cap_tokens.get(kind, target_tokens)
        proportional = 0
        if total_mass_for_distribution > 0 and cap > require:
            proportional = math.floor(
                float(unassigned_budget) * float(candidate_token_mass[kind]) / float(total_mass_for_distribution)
            )
        kind_budget = require + proportional
        if kind_budget > cap:
            kind_budget = cap
        kind_budgets[kind] = kind_budget
    return kind_budgets


def count_slice(scored, pool, max_tokens, target_tokens, entries, scarcity, inner_name, bucket_size, resort_phase2):
    """CountQuotaSlice / CountConstrainedKnapsackSlice.

    entries: list of (kind_as_written, require_count, cap_count), config order
    (cap_count NO_CAP: no cap).
    Returns (selected positions, shortfalls, cap_excluded_count).
    """
    if len(pool) == 0 or target_tokens <= 0:
        return [], [], 0

    entry_by_kind = {}
    for kind, require_count, cap_count in entries:
        entry_by_kind[ascii_fold(kind)] = (require_count, cap_count)

    # --- Phase 1: Count-Satisfy ---
    partitions = {}
    for pos in pool:
        kind = ascii_fold(scored[pos][0]["kind"])
        partitions.setdefault(kind, []).append(pos)
    for kind in partitions:
        partitions[kind] = sorted(partitions[kind], key=lambda p: _score_desc_key(scored[p][1]))

    committed = []
    committed_set = set()
    selected_count = {}
    pre_allocated_tokens = 0
    shortfalls = []

    for kind, require_count, _cap_count in entries:
        if require_count <= 0:
            continue
        candidates = partitions.get(ascii_fold(kind), [])
        satisfied = 0
        for pos in candidates:
            if satisfied >= require_count:
                break
            committed.append(pos)
            committed_set.add(pos)
            pre_allocated_tokens = pre_allocated_tokens + scored[pos][0]["tokens"]
            satisfied = satisfied + 1
        selected_count[ascii_fold(kind)] = satisfied
        if satisfied < require_count:
            if scarcity == "throw":
                raise NaiveError(
                    "scarcity",
                    f"candidate pool for kind '{kind}' has {satisfied} items but RequireCount is {require_count}.",
                )
            shortfalls.append((kind, require_count, satisfied))

    # --- Phase 2: Budget-Distribute ---
    residual = [pos for pos in pool if pos not in committed_set]
    residual_target = max(0, target_tokens - pre_allocated_tokens)
    inner_target = min(residual_target, max_tokens)
    inner_selected = []
    cap_excluded_count = 0
    if residual_target > 0 and isinstance(inner_name, dict):
        # a nested inner slicer spec: its shortfalls follow the outer ones
        inner_selected, inner_shortfalls, cap_excluded_count = _run_slicer(
            inner_name, scored, residual, max_tokens, inner_target
        )
        shortfalls.extend(inner_shortfalls)
    elif residual_target > 0:
        inner_selected = _run_inner(inner_name, bucket_size, scored, residual, inner_target)
    if resort_phase2:
        inner_selected = sorted(inner_selected, key=lambda p: _score_desc_key(scored[p][1]))

    # --- Phase 3: Cap Enforcement ---
    result = list(committed)
    for pos in inner_selected:
        kind = ascii_fold(scored[pos][0]["kind"])
        count = selected_count.get(kind, 0)
        if kind in entry_by_kind and entry_by_kind[kind][1] is not NO_CAP and count >= entry_by_kind[kind][1]:
            cap_excluded_count += 1  # cap exceeded
        else:
            result.append(pos)
            selected_count[kind] = count + 1
    return result, shortfalls, cap_excluded_count


SLICER_NAMES = ("greedy", "knapsack", "quota", "count_quota", "count_constrained_knapsack")
COUNT_SLICERS = ("count_quota", "count_constrained_knapsack")


def build_slicer(config):
    """Validate the slicer part of a config and return a plain description dict."""
    name = config.get("slicer", "greedy")
    if name not in SLICER_NAMES:
        _invalid(f"unknown slicer {name!r}")
    spec = {"name": name}

    uses_knapsack = name in ("knapsack", "count_constrained_knapsack")

    if name == "count_quota" and (
        isinstance(config.get("inner_slicer"), dict) or config.get("inner_slicer") == "quota"
    ):
        # a decorator slicer: any inner slicer but knapsack (a slicer table, or "quota" with
        # its quotas in the same table)
        inner = config["inner_slicer"]
        inner_config = inner if isinstance(inner, dict) else {"slicer": "quota", "quotas": config.get("quotas", [])}
        if inner_config.get("slicer", "greedy") == "knapsack":
            _invalid("count_quota does not accept a knapsack inner slicer")
        spec["inner"] = build_slicer(inner_config)
    elif name in ("quota", "count_quota"):
        inner = config.get("inner_slicer", "greedy")
        if inner not in ("greedy", "knapsack"):
            _invalid(f"unknown inner slicer {inner!r}")
        if name == "count_quota" and inner == "knapsack":
            _invalid("count_quota does not accept a knapsack inner slicer")
        spec["inner"] = inner
        uses_knapsack = uses_knapsack or inner == "knapsack"
    elif name == "count_constrained_knapsack":
        spec["inner"] = "knapsack"

    if uses_knapsack:
        bucket_size = config.get("bucket_size", 100)
        if not _is_int(bucket_size) or bucket_size <= 0:
            _invalid("bucket_size must be a positive integer")
        spec["bucket_size"] = bucket_size
    else:
        spec["bucket_size"] = 100

    if name == "quota":
        spec["quotas"] = _build_quotas(config.get("quotas", []))

    if name in COUNT_SLICERS:
        spec["entries"] = _build_count_entries(config.get("entries", []))
        scarcity = config.get("scarcity_behavior", "degrade")
        if not isinstance(scarcity, str) or ascii_fold(scarcity) not in ("degrade", "throw"):
            _invalid(f"unknown scarcity_behavior {scarcity!r}")
        spec["scarcity"] = ascii_fold(scarcity)
    return spec


def _build_quotas(raw):
    if not isinstance(raw, list):
        _invalid("quotas must be a list of tables")
    quotas = {}
    require_sum = 0.0
    for entry in raw:
        if not isinstance(entry, dict):
            _invalid("quota entry must be a table")
        kind = entry.get("kind")
        require = entry.get("require", 0.0)
        cap = entry.get("cap", 100.0)
        if not isinstance(kind, str) or _is_blank(kind):
            _invalid("quota kind must be a non-blank string")
        if not _is_number(require) or not (0.0 <= require <= 100.0):
            _invalid("quota require must be in [0, 100]")
        if not _is_number(cap) or not (0.0 <= cap <= 100.0):
            _invalid("quota cap must be in [0, 100]")
        if require > cap:
            _invalid("quota require must not exceed cap")
        key = ascii_fold(kind)
        if key in quotas:
            _invalid(f"duplicate quota kind {kind!r}")
        quotas[key] = (float(require), float(cap))
        require_sum += require
    if require_sum > 100.0:
        _invalid("quota require percentages sum to more than 100")
    return quotas


#: cap_count of a count entry that leaves it out: no cap for that kind
NO_CAP = None


def _build_count_entries(raw):
    if not isinstance(raw, list):
        _invalid("entries must be a list of tables")
    entries = []
    seen = set()
    for entry in raw:
        if not isinstance(entry, dict):
            _invalid("count entry must be a table")
        kind = entry.get("kind")
        require_count = entry.get("require_count")
        # README "Differences from upstream" 6: an omitted cap_count means "no cap"
        cap_count = entry.get("cap_count") if "cap_count" in entry else NO_CAP
        if not isinstance(kind, str) or _is_blank(kind):
            _invalid("count entry kind must be a non-blank string")
        if not _is_int(require_count) or not (cap_count is NO_CAP or _is_int(cap_count)):
            _invalid("count entry needs integer require_count and cap_count")
        if require_count < 0 or (cap_count is not NO_CAP and cap_count < 0):
            _invalid("count entry counts must be non-negative")
        if cap_count is not NO_CAP and require_count > cap_count:
            _invalid("require_count must not exceed cap_count")
        if cap_count is not NO_CAP and cap_count == 0 and require_count > 0:
            _invalid("cap_count 0 with a positive require_count")
        if ascii_fold(kind) in seen:
            _invalid(f"duplicate count entry kind {kind!r}")
        seen.add(ascii_fold(kind))
        entries.append((kind, require_count, cap_count))
    return entries


def _run_slicer(spec, scored, pool, max_tokens, target_tokens):
    """Returns (selected positions, shortfalls, cap_excluded_count)."""
    name = spec["name"]
    if name == "greedy":
        return greedy_slice(scored, pool, target_tokens), [], 0
    if name == "knapsack":
        return knapsack_slice(scored, pool, target_tokens, spec["bucket_size"]), [], 0
    if name == "quota":
        selected = quota_slice(scored, pool, target_tokens, spec["quotas"], spec["inner"], spec["bucket_size"])
        return selected, [], 0
    return count_slice(
        scored,
        pool,
        max_tokens,
        target_tokens,
        spec["entries"],
        spec["scarcity"],
        spec["inner"],
        spec["bucket_size"],
        resort_phase2=(name == "count_constrained_knapsack"),
    )


def slice_items_detailed(scored, target_tokens, config, max_tokens=None):
    """Like slice_items, but returns a dict that also carries cap_excluded_count."""
    spec = build_slicer(config)
    if max_tokens is None:
        max_tokens = target_tokens
    pairs = [(normalize_item(item), score) for item, score in scored]
    pool = list(range(len(pairs)))
    selected, shortfalls, cap_excluded = _run_slicer(spec, pairs, pool, max_tokens, target_tokens)
    return {"selected": selected, "shortfalls": shortfalls, "cap_excluded_count": cap_excluded}


def slice_items(scored, target_tokens, config, max_tokens=None):
    """Run the configured slicer; returns (selected positions, shortfalls)."""
    detail = slice_items_detailed(scored, target_tokens, config, max_tokens)
    return detail["selected"], detail["shortfalls"]


# ---------------------------------------------------------------------------
# Placers
# ---------------------------------------------------------------------------


def _normalize_placer_name(name):
    if name == "chronological":
        return "chronological"
    if name in ("u_shaped", "u-shaped"):
        return "u_shaped"
    _invalid(f"unknown placer {name!r}")


def chronological_place(items):
    """items: list of (item, score).  Returns indices in placed order."""
    with_timestamp = [i for i in range(len(items)) if items[i][0]["timestamp"] is not None]
    without_timestamp = [i for i in range(len(items)) if items[i][0]["timestamp"] is None]
    # stable sort: ascending timestamp, ties keep index order
    with_timestamp = sorted(with_timestamp, key=lambda i: items[i][0]["timestamp"])
    return with_timestamp + without_timestamp


def u_shaped_place(items):
    n = len(items)
    if n == 0:
        return []
    ranked = sorted(range(n), key=lambda i: _score_desc_key(items[i][1]))
    result = [None] * n
    left = 0
    right = n - 1
    for rank, index in enumerate(ranked):
        if rank % 2 == 0:
            result[left] = index
            left += 1
        else:
            result[right] = index
            right -= 1
    return result


def place(merged, placer):
    """Order merged (item, score) pairs; returns positions in placed order."""
    name = _normalize_placer_name(placer)
    items = [(normalize_item(item), score) for item, score in merged]
    if name == "chronological":
        return chronological_place(items)
    return u_shaped_place(items)


# ---------------------------------------------------------------------------
# Budget
# ---------------------------------------------------------------------------


def validate_budget(budget):
    max_tokens = budget.get("max_tokens")
    target_tokens = budget.get("target_tokens")
    output_reserve = budget.get("output_reserve", 0)
    reserved_slots = budget.get("reserved_slots", {}) or {}
    margin = budget.get("estimation_safety_margin_percent", 0.0)

    if not _is_int(max_tokens) or max_tokens < 0:
        _invalid("max_tokens must be an integer >= 0")
    if not _is_int(target_tokens) or target_tokens < 0:
        _invalid("target_tokens must be an integer >= 0")
    if target_tokens > max_tokens:
        _invalid("target_tokens must not exceed max_tokens")
    if not _is_int(output_reserve) or output_reserve < 0:
        _invalid("output_reserve must be an integer >= 0")
    if output_reserve > max_tokens:
        _invalid("output_reserve must not exceed max_tokens")
    if not _is_number(margin) or not (0.0 <= margin <= 100.0):
        _invalid("estimation_safety_margin_percent must be in [0, 100]")
    if not isinstance(reserved_slots, dict):
        _invalid("reserved_slots must be a table")
    seen_kinds = set()
    for kind, count in reserved_slots.items():
        # keys are ContextKinds: non-blank, compared ASCII-case-insensitively, so two
        # spellings of one kind are a duplicate key (rejected, like quota / count entries)
        if not isinstance(kind, str) or _is_blank(kind):
            _invalid("reserved slot kind must be a non-blank string")
        if ascii_fold(kind) in seen_kinds:
            _invalid(f"reserved slot kind {kind!r} given twice")
        seen_kinds.add(ascii_fold(kind))
        if not _is_int(count) or count < 0:
            _invalid(f"reserved slot for {kind!r} must be an integer >= 0")

    return {
        "max_tokens": max_tokens,
        "target_tokens": target_tokens,
        "output_reserve": output_reserve,
        "reserved_slots": dict(reserved_slots),
        "margin": float(margin),
    }


def compute_effective_budget(budget, pinned_tokens):
    """Returns (effective_max, effective_target) exactly as spec/pipeline/slice.md."""
    reserved_tokens = 0
    for count in budget["reserved_slots"].values():
        reserved_tokens = reserved_tokens + count
    effective_max = max(0, budget["max_tokens"] - budget["output_reserve"] - pinned_tokens - reserved_tokens)
    effective_target = max(0, budget["target_tokens"] - pinned_tokens - reserved_tokens)
    effective_target = min(effective_target, effective_max)

    if budget["margin"] > 0:
        multiplier = 1.0 - budget["margin"] / 100.0
        effective_max = math.floor(effective_max * multiplier)
        effective_target = math.floor(effective_target * multiplier)
        effective_target = min(effective_target, effective_max)
    return effective_max, effective_target


# ---------------------------------------------------------------------------
# Pipeline
# ---------------------------------------------------------------------------

OVERFLOW_STRATEGIES = ("throw", "truncate", "proceed")


def run_pipeline(items, budget, config):
    """Run Classify, Score, Deduplicate, Sort, Slice, Place and build the report.

    Rows are input indices.  Returns a dict with placed, included, excluded,
    total_candidates, total_tokens_considered, shortfalls.
    """
    if config.get("groups") is not None:
        return run_pipeline_grouped(items, budget, config)
    # ---- construction / validation (nothing runs before all of it passes) --
    b = validate_budget(budget)
    rows = [normalize_item(item) for item in items]
    for row_item in rows:
        validate_item(row_item)
    scorer = build_config_scorer(config)
    slicer = build_slicer(config)
    placer = _normalize_placer_name(config.get("placer", "chronological"))
    deduplication = config.get("deduplication", True)
    if not isinstance(deduplication, bool):
        _invalid("deduplication must be a boolean")
    overflow_strategy = config.get("overflow_strategy", "throw")
    if not isinstance(overflow_strategy, str) or ascii_fold(overflow_strategy) not in OVERFLOW_STRATEGIES:
        _invalid(f"unknown overflow_strategy {overflow_strategy!r}")
    overflow_strategy = ascii_fold(overflow_strategy)

    excluded = []  # (row, score, reason, fields) in insertion order

    # ---- Stage 1: Classify ------------------------------------------------
    pinned = []
    scoreable = []
    for row, item in enumerate(rows):
        if item["tokens"] < 0:
            excluded.append((row, 0.0, "NegativeTokens", {"tokens": item["tokens"]}))
            continue
        if item["pinned"]:
            pinned.append(row)
        else:
            scoreable.append(row)

    pinned_tokens = 0
    for row in pinned:
        pinned_tokens = pinned_tokens + rows[row]["tokens"]
    available_for_pinned = b["max_tokens"] - b["output_reserve"]
    if pinned_tokens > available_for_pinned:
        raise NaiveError(
            "pinned_exceeds_budget",
            f"Pinned items require {pinned_tokens} tokens, but only {available_for_pinned} are available",
        )

    # ---- Stage 2: Score (allItems = the scoreable list) --------------------
    scores = scorer.score_all([rows[row] for row in scoreable])
    scored = [(scoreable[k], scores[k]) for k in range(len(scoreable))]  # (row, score)

    # ---- Stage 3: Deduplicate ---------------------------------------------
    if deduplication and len(scored) > 0:
        best_by_content = {}
        for i, (row, score) in enumerate(scored):
            content = rows[row]["content"]
            if content in best_by_content:
                existing = best_by_content[content]
                if score > scored[existing][1]:
                    best_by_content[content] = i
            else:
                best_by_content[content] = i
        deduped = []
        for i, (row, score) in enumerate(scored):
            content = rows[row]["content"]
            if best_by_content[content] == i:
                deduped.append((row, score))
            else:
                excluded.append((row, score, "Deduplicated", {"deduplicated_against": content}))
    else:
        deduped = list(scored)

    # ---- Stage 4: Sort (stable, score descending) --------------------------
    sorted_scored = sorted(deduped, key=lambda pair: _score_desc_key(pair[1]))

    # ---- Stage 5: Slice -----------------------------------------------------
    effective_max, effective_target = compute_effective_budget(b, pinned_tokens)
    slicer_pairs = [(rows[row], score) for row, score in sorted_scored]
    pool = list(range(len(slicer_pairs)))
    selected_positions, shortfalls, _cap_excluded = _run_slicer(
        slicer, slicer_pairs, pool, effective_max, effective_target
    )
    sliced = [sorted_scored[p] for p in selected_positions]  # (row, score), slicer order

    # Slice-stage exclusions: every sorted item the slicer did not return.
    selected_set = set(selected_positions)
    sliced_tokens = 0
    for row, _score in sliced:
        sliced_tokens = sliced_tokens + rows[row]["tokens"]
    count_caps = {}
    if slicer["name"] in COUNT_SLICERS:
        for kind, _require, cap in slicer["entries"]:
            if cap is not NO_CAP:
                count_caps[ascii_fold(kind)] = cap
    for p, (row, score) in enumerate(sorted_scored):
        if p in selected_set:
            continue
        item = rows[row]
        tokens = item["tokens"]
        kind = ascii_fold(item["kind"])
        if pinned_tokens > 0 and tokens > effective_target and tokens <= b["target_tokens"] - b["output_reserve"]:
            excluded.append((row, score, "PinnedOverride", {"displaced_by": rows[pinned[0]]["content"]}))
            continue
        if kind in count_caps:
            cap = count_caps[kind]
            count = 0
            for sliced_row, _s in sliced:
                if ascii_fold(rows[sliced_row]["kind"]) == kind:
                    count += 1
            if count >= cap and tokens <= effective_target:
                excluded.append((row, score, "CountCapExceeded", {"kind": item["kind"], "cap": cap, "count": count}))
                continue
        excluded.append(
            (
                row,
                score,
                "BudgetExceeded",
                {"item_tokens": tokens, "available_tokens": effective_target - sliced_tokens},
            )
        )

    # ---- Stage 6: Place -----------------------------------------------------
    merged = []  # (row, score, is_pinned)
    for row in pinned:
        merged.append((row, 1.0, True))
    for row, score in sliced:
        merged.append((row, score, False))

    merged_tokens = 0
    for row, _score, _is_pinned in merged:
        merged_tokens = merged_tokens + rows[row]["tokens"]

    if merged_tokens > b["target_tokens"]:
        if overflow_strategy == "throw":
            raise NaiveError(
                "overflow",
                f"Selected items require {merged_tokens} tokens, exceeding target budget of {b['target_tokens']}",
            )
        if overflow_strategy == "truncate":
            ordered = sorted(
                merged,
                key=lambda m: (0 if m[2] else 1, _score_desc_key(m[1])),
            )
            kept = []
            dropped = []
            current_tokens = 0
            for entry in ordered:
                row, _score, is_pinned = entry
                tokens = rows[row]["tokens"]
                if is_pinned:
                    kept.append(entry)
                    current_tokens = current_tokens + tokens
                elif current_tokens + tokens <= b["target_tokens"]:
                    kept.append(entry)
                    current_tokens = current_tokens + tokens
                else:
                    dropped.append(entry)
            kept_tokens = 0
            for row, _score, _is_pinned in kept:
                kept_tokens = kept_tokens + rows[row]["tokens"]
            for row, score, _is_pinned in dropped:
                if pinned:
                    # the spec's PinnedOverride: displaced by the pinned items truncation keeps
                    # first (as .NET; the Rust crate says BudgetExceeded); displaced_by names
                    # the first pinned item, as for the slice-stage PinnedOverride
                    excluded.append((row, score, "PinnedOverride", {"displaced_by": rows[pinned[0]]["content"]}))
                    continue
                excluded.append(
                    (
                        row,
                        score,
                        "BudgetExceeded",
                        {"item_tokens": rows[row]["tokens"], "available_tokens": b["target_tokens"] - kept_tokens},
                    )
                )
            merged = kept
        # "proceed": accept the over-budget selection unchanged

    placer_input = [(rows[row], score) for row, score, _is_pinned in merged]
    if placer == "chronological":
        order = chronological_place(placer_input)
    else:
        order = u_shaped_place(placer_input)
    placed = [merged[k] for k in order]

    # ---- Report --------------------------------------------------------------
    included = []
    for row, score, is_pinned in placed:
        if is_pinned:
            included.append((row, 1.0, "Pinned"))
        elif rows[row]["tokens"] == 0:
            included.append((row, score, "ZeroToken"))
        else:
            included.append((row, score, "Scored"))

    excluded = sorted(excluded, key=lambda e: _score_desc_key(e[1]))

    total_tokens_considered = 0
    for item in rows:
        total_tokens_considered = total_tokens_considered + item["tokens"]

    return {
        "placed": [row for row, _score, _is_pinned in placed],
        "included": included,
        "excluded": excluded,
        "total_candidates": len(rows),
        "total_tokens_considered": total_tokens_considered,
        "shortfalls": list(shortfalls),
    }


# ---------------------------------------------------------------------------
# Policy sensitivity (README "Policy sensitivity and sweeps" -> Semantics and
# "Differences from upstream" 10 and 11)
# ---------------------------------------------------------------------------


def policy_sensitivity(rows, variants, set_keys=None):
    """Run every variant over every item set with ``run_pipeline`` and diff the results.

    rows: items in input order.  set_keys: one key per row (None: all rows are one set).
    variants: (label, budget, config) triples.  A config or budget that
    ``run_pipeline`` rejects as invalid raises (it is not a per-set failure);
    every other failure of a variant on a set is collected.

    Returns one dict per item set, in order of the set's first input row:
      key      the set key;
      rows     the set's input rows, in input order (report rows index this list);
      ok       [(label, run_pipeline report)] for the variants that succeeded;
      failed   [(label, error code)] for the variants that failed;
      status   {content: {label: "Included" | "Excluded"}} over the ok variants;
      diffs    [(content, [(label, status), ...])] for the contents on which two
               ok variants disagree, ordered by the first input row holding them.
    A content's status under a variant is Included if ANY row of the set with that
    exact content is included, else Excluded: one status per content per variant.
    """
    if set_keys is None:
        set_keys = [None] * len(rows)
    assert len(set_keys) == len(rows)
    order = []
    members = {}
    for row, key in enumerate(set_keys):
        if key not in members:
            members[key] = []
            order.append(key)
        members[key].append(row)
    out = []
    for key in order:
        set_rows = members[key]
        items = [rows[r] for r in set_rows]
        ok = []
        failed = []
        for label, budget, config in variants:
            try:
                report = run_pipeline(items, budget, config)
            except NaiveError as err:
                if err.code == "invalid_config":
                    raise
                failed.append((label, err.code))
                continue
            ok.append((label, report))
        contents = []  # distinct contents, in order of their first row
        for item in items:
            if item["content"] not in contents:
                contents.append(item["content"])
        status = {}
        for content in contents:
            status[content] = {}
            for label, report in ok:
                included = False
                for row, _score, _reason in report["included"]:
                    if items[row]["content"] == content:
                        included = True
                status[content][label] = "Included" if included else "Excluded"
        diffs = []
        for content in contents:
            values = [status[content][label] for label, _report in ok]
            if "Included" in values and "Excluded" in values:
                diffs.append((content, [(label, status[content][label]) for label, _r in ok]))
        out.append({"key": key, "rows": set_rows, "ok": ok, "failed": failed, "status": status, "diffs": diffs})
    return out


# ===========================================================================
# Analytics, stage funnel and overflow (issue 19; owned by the analytics work)
#
# Independent of the engine: computed from run_pipeline's report dict and the
# items.  Kept in one block so other oracle additions merge cleanly.
# ===========================================================================


def analytics(items, report, budget, config):
    """The report analytics of one run_pipeline report.

    Returns budget_utilization (included tokens / max_tokens; NaN when
    max_tokens is 0), kind_diversity (distinct ASCII-folded kinds),
    timestamp_coverage (0.0 when nothing is included), tokens_over_budget
    (proceed only: included tokens above target_tokens, else 0) and quota (one
    (kind, mode, require, cap, actual, utilization) tuple per constraint,
    sorted by kind; cap and utilization None for a count entry without cap).
    """
    rows = [normalize_item(item) for item in items]
    included = [rows[row] for row, _score, _reason in report["included"]]
    used = 0
    for item in included:
        used = used + item["tokens"]
    if budget["max_tokens"] == 0:
        utilization = math.nan
    else:
        utilization = float(used) / float(budget["max_tokens"])
    kinds = set()
    stamped = 0
    for item in included:
        kinds.add(ascii_fold(item["kind"]))
        if item["timestamp"] is not None:
            stamped += 1
    coverage = 0.0 if not included else stamped / len(included)
    strategy = ascii_fold(config.get("overflow_strategy", "throw"))
    over = 0
    if strategy == "proceed" and used > budget["target_tokens"]:
        over = used - budget["target_tokens"]
    return {
        "budget_utilization": utilization,
        "kind_diversity": len(kinds),
        "timestamp_coverage": coverage,
        "tokens_over_budget": over,
        "quota": _quota_rows(included, budget, config),
    }


def _quota_rows(included, budget, config):
    slicer = build_slicer(config)
    constraints = []
    if slicer["name"] == "quota":
        for kind_key, (require, cap) in slicer["quotas"].items():
            constraints.append((_quota_kind_name(config, kind_key), "percentage", require, cap))
    elif slicer["name"] in COUNT_SLICERS:
        for kind, require, cap in slicer["entries"]:
            constraints.append((kind, "count", float(require), None if cap is NO_CAP else float(cap)))
    out = []
    target = float(budget["target_tokens"])
    for kind, mode, require, cap in constraints:
        tokens = 0
        count = 0
        for item in included:
            if ascii_fold(item["kind"]) == ascii_fold(kind):
                tokens = tokens + item["tokens"]
                count += 1
        if mode == "percentage":
            actual = 0.0 if target == 0.0 else float(tokens) / target * 100.0
        else:
            actual = float(count)
        if cap is None:
            utilization = None
        elif cap == 0.0:
            utilization = 0.0
        else:
            utilization = min(max(actual / cap, 0.0), 1.0)
        out.append((kind, mode, require, cap, actual, utilization))
    out.sort(key=lambda r: r[0])
    return out


def _quota_kind_name(config, kind_key):
    for entry in config.get("quotas", []):
        if ascii_fold(entry["kind"]) == kind_key:
            return entry["kind"]
    return kind_key


def funnel(items, budget, config):
    """Items entering and leaving each stage of one run (cupel_np's definition,
    docs/observability.md): a list of (stage, in, out, excluded).

    Derived by running the pipeline twice: as configured, and with the
    overflow strategy forced to proceed (the slicer's output before any
    truncation; slicing does not depend on the strategy).
    """
    rows = [normalize_item(item) for item in items]
    report = run_pipeline(items, budget, config)
    untruncated = run_pipeline(items, budget, dict(config, overflow_strategy="proceed"))
    n = len(rows)
    negative = sum(1 for item in rows if item["tokens"] < 0)
    pinned = sum(1 for item in rows if item["tokens"] >= 0 and item["pinned"])
    scoreable = n - negative - pinned
    dedup = sum(1 for e in report["excluded"] if e[2] == "Deduplicated")
    sliced = len(untruncated["included"]) - pinned
    kept = len(report["included"])
    return [
        ("Classify", n, n - negative, negative),
        ("Score", scoreable, scoreable, 0),
        ("Deduplicate", scoreable, scoreable - dedup, dedup),
        ("Slice", scoreable - dedup, sliced, scoreable - dedup - sliced),
        ("Place", pinned + sliced, kept, pinned + sliced - kept),
    ]


# ===========================================================================
# Tool pairs (issue 29; docs/tool-pairs.md): atomic groups and orphan counts
#
# A cupel_np extension, not in the spec.  Kept in one block so other oracle
# additions merge cleanly.
# ===========================================================================


def _unit_score_key(score):
    """Order of member scores for the unit rule "the highest member score": NaN lowest."""
    if isinstance(score, float) and math.isnan(score):
        return (0, 0.0)
    return (1, score)


def run_pipeline_grouped(items, budget, config):
    """run_pipeline with ``config["groups"] = column``: the items of the set that share a
    non-null value of ``item[column]`` are one unit, chosen whole or not at all.

    The rules (docs/tool-pairs.md), literally:
      * Classify: as without groups. Negative-token items are excluded (NegativeTokens)
        and pinned items are included (Pinned); neither belongs to a unit: units are formed
        from the scoreable items only.
      * Score: every scoreable item is scored as usual (relative scorers see the items);
        a unit's score is its highest member score (NaN lowest; all NaN: NaN).
      * Deduplicate: only among the items that are units of one; members of larger units
        are neither dropped nor drop others.
      * Sort and slice: the slicer sees one pseudo-item per unit: its first member (input
        order) with tokens = the sum of the members' tokens, scored with the unit's score;
        ties keep the order of the units' first members.  So kind (quotas, count caps) and
        timestamp (chronological placement) are the first member's.
      * Every member of an excluded unit gets the unit's reason (fields computed with the
        unit's tokens); the overflow strategies see units (truncation drops whole units).
      * Place: the placer orders the units; each unit's members follow at its place,
        contiguous, in input order.  Included reasons: Pinned (pinned unit), ZeroToken (a
        unit of 0 tokens) or Scored.
    Items with no value in the column are units of one: without any group this returns
    exactly what run_pipeline returns.
    """
    column = config["groups"]
    if not isinstance(column, str) or column == "":
        _invalid("groups must be a column name")
    b = validate_budget(budget)
    rows = [normalize_item(item) for item in items]
    for row_item in rows:
        validate_item(row_item)
    scorer = build_config_scorer(config)
    slicer = build_slicer(config)
    placer = _normalize_placer_name(config.get("placer", "chronological"))
    deduplication = config.get("deduplication", True)
    if not isinstance(deduplication, bool):
        _invalid("deduplication must be a boolean")
    overflow_strategy = config.get("overflow_strategy", "throw")
    if not isinstance(overflow_strategy, str) or ascii_fold(overflow_strategy) not in OVERFLOW_STRATEGIES:
        _invalid(f"unknown overflow_strategy {overflow_strategy!r}")
    overflow_strategy = ascii_fold(overflow_strategy)
    excluded = []
    stage_of = {}  # row -> (stage, order within the stage): the engine's excluded order

    # ---- Classify and form the units -----------------------------------------
    units = []  # each: list of rows, input order
    unit_of_key = {}
    pinned = []
    for row, item in enumerate(rows):
        if item["tokens"] < 0:
            excluded.append((row, 0.0, "NegativeTokens", {"tokens": item["tokens"]}))
            stage_of[row] = (0, row)
            continue
        if item["pinned"]:
            pinned.append(row)
            continue
        key = items[row].get(column)
        if key is None:  # items given as ContextItems carry the column as a metadata key
            key = (items[row].get("metadata") or {}).get(column)
        if key is None:
            units.append([row])
        elif key in unit_of_key:
            units[unit_of_key[key]].append(row)
        else:
            unit_of_key[key] = len(units)
            units.append([row])
    units.sort(key=lambda members: members[0])
    pinned_units = [[r] for r in pinned]  # a pinned item is placed as a unit of its own
    free_units = units

    def unit_tokens(u):
        total = 0
        for r in u:
            total = total + rows[r]["tokens"]
        return total

    pinned_tokens = 0
    for u in pinned_units:
        pinned_tokens = pinned_tokens + unit_tokens(u)
    available_for_pinned = b["max_tokens"] - b["output_reserve"]
    if pinned_tokens > available_for_pinned:
        raise NaiveError(
            "pinned_exceeds_budget",
            f"Pinned items require {pinned_tokens} tokens, but only {available_for_pinned} are available",
        )

    # ---- Score the scoreable items, then the units -----------------------------
    scoreable = [r for u in free_units for r in u]
    scoreable.sort()
    scores = scorer.score_all([rows[r] for r in scoreable])
    score_of = {scoreable[k]: scores[k] for k in range(len(scoreable))}

    def unit_score(u):
        best = score_of[u[0]]
        for r in u[1:]:
            if _unit_score_key(score_of[r]) > _unit_score_key(best):
                best = score_of[r]
        return best

    # ---- Deduplicate among the units of one --------------------------------------
    alone = [(u[0], score_of[u[0]]) for u in free_units if len(u) == 1]
    losers = set()
    if deduplication and alone:
        best_by_content = {}
        for i, (row, score) in enumerate(alone):
            content = rows[row]["content"]
            if content in best_by_content:
                if score > alone[best_by_content[content]][1]:
                    best_by_content[content] = i
            else:
                best_by_content[content] = i
        for i, (row, score) in enumerate(alone):
            if best_by_content[rows[row]["content"]] != i:
                losers.add(row)
                excluded.append((row, score, "Deduplicated", {"deduplicated_against": rows[row]["content"]}))
                stage_of[row] = (1, row)
    survivors = [u for u in free_units if not (len(u) == 1 and u[0] in losers)]

    # ---- Sort and slice the units -------------------------------------------------
    scored_units = [(u, unit_score(u)) for u in survivors]
    sorted_units = sorted(scored_units, key=lambda pair: _score_desc_key(pair[1]))
    effective_max, effective_target = compute_effective_budget(b, pinned_tokens)

    def pseudo(u):
        item = dict(rows[u[0]])
        item["tokens"] = unit_tokens(u)
        return item

    slicer_pairs = [(pseudo(u), score) for u, score in sorted_units]
    pool = list(range(len(slicer_pairs)))
    selected_positions, shortfalls, _cap = _run_slicer(slicer, slicer_pairs, pool, effective_max, effective_target)
    sliced = [sorted_units[p] for p in selected_positions]
    selected_set = set(selected_positions)
    sliced_tokens = 0
    for u, _score in sliced:
        sliced_tokens = sliced_tokens + unit_tokens(u)
    count_caps = {}
    if slicer["name"] in COUNT_SLICERS:
        for kind, _require, cap in slicer["entries"]:
            if cap is not NO_CAP:
                count_caps[ascii_fold(kind)] = cap
    first_pinned = min(r for u in pinned_units for r in u) if pinned_units else None
    for p, (u, _uscore) in enumerate(sorted_units):
        if p in selected_set:
            continue
        tokens = unit_tokens(u)
        kind = ascii_fold(rows[u[0]]["kind"])
        if pinned_tokens > 0 and tokens > effective_target and tokens <= b["target_tokens"] - b["output_reserve"]:
            reason, fields = "PinnedOverride", {"displaced_by": rows[first_pinned]["content"]}
        elif (
            kind in count_caps
            and tokens <= effective_target
            and (sum(1 for v, _s in sliced if ascii_fold(rows[v[0]]["kind"]) == kind) >= count_caps[kind])
        ):
            count = sum(1 for v, _s in sliced if ascii_fold(rows[v[0]]["kind"]) == kind)
            reason, fields = "CountCapExceeded", {"kind": rows[u[0]]["kind"], "cap": count_caps[kind], "count": count}
        else:
            reason, fields = (
                "BudgetExceeded",
                {"item_tokens": tokens, "available_tokens": effective_target - sliced_tokens},
            )
        for r in u:
            excluded.append((r, score_of[r], reason, fields))
            stage_of[r] = (2, r)

    # ---- Place ----------------------------------------------------------------------
    merged = [(u, 1.0, True) for u in pinned_units] + [(u, score, False) for u, score in sliced]
    merged_tokens = 0
    for u, _score, _pinned in merged:
        merged_tokens = merged_tokens + unit_tokens(u)
    if merged_tokens > b["target_tokens"]:
        if overflow_strategy == "throw":
            raise NaiveError(
                "overflow",
                f"Selected items require {merged_tokens} tokens, exceeding target budget of {b['target_tokens']}",
            )
        if overflow_strategy == "truncate":
            ordered = sorted(merged, key=lambda m: (0 if m[2] else 1, _score_desc_key(m[1])))
            kept, dropped, current = [], [], 0
            for entry in ordered:
                tokens = unit_tokens(entry[0])
                if entry[2] or current + tokens <= b["target_tokens"]:
                    kept.append(entry)
                    current = current + tokens
                else:
                    dropped.append(entry)
            kept_tokens = 0
            for u, _score, _pinned in kept:
                kept_tokens = kept_tokens + unit_tokens(u)
            for u, _score, _pinned in dropped:
                if pinned_units:
                    reason, fields = "PinnedOverride", {"displaced_by": rows[first_pinned]["content"]}
                else:
                    reason = "BudgetExceeded"
                    fields = {"item_tokens": unit_tokens(u), "available_tokens": b["target_tokens"] - kept_tokens}
                for r in u:
                    excluded.append((r, score_of[r], reason, fields))
                    stage_of[r] = (3, len(stage_of))
            merged = kept
    placer_input = [(pseudo(u), score) for u, score, _pinned in merged]
    order = chronological_place(placer_input) if placer == "chronological" else u_shaped_place(placer_input)
    included = []
    for k in order:
        u, _score, is_pinned = merged[k]
        zero = unit_tokens(u) == 0
        for r in u:
            if is_pinned:
                included.append((r, 1.0, "Pinned"))
            else:
                included.append((r, score_of[r], "ZeroToken" if zero else "Scored"))
    # score descending, then the stage that excluded the item, then its order in that stage
    # (row order; truncation: drop order) - run_pipeline's order wherever units are single
    excluded = sorted(excluded, key=lambda e: (_score_desc_key(e[1]), stage_of[e[0]]))
    total = 0
    for item in rows:
        total = total + item["tokens"]
    return {
        "placed": [r for r, _s, _reason in included],
        "included": included,
        "excluded": excluded,
        "total_candidates": len(rows),
        "total_tokens_considered": total,
        "shortfalls": list(shortfalls),
    }


def orphan_counts(items, included_rows, id_key="tool_call_id", role_key="tool_role"):
    """(orphan calls, orphan results) of one selection: a kept call whose results (in the
    set) are not all kept; a kept result none of whose calls is kept.  Calls with no result
    in the set and results with no call in it are never orphans."""
    kept = set(included_rows)
    calls, results = {}, {}
    for row, item in enumerate(items):
        cid, role = item.get(id_key), item.get(role_key)
        if cid is None or role is None:
            continue
        if ascii_fold(role) == "call":
            calls.setdefault(cid, []).append(row)
        elif ascii_fold(role) == "result":
            results.setdefault(cid, []).append(row)
    orphan_calls = orphan_results = 0
    for cid in calls:
        if cid not in results:
            continue
        if not all(r in kept for r in results[cid]):
            orphan_calls += sum(1 for r in calls[cid] if r in kept)
        if not any(r in kept for r in calls[cid]):
            orphan_results += sum(1 for r in results[cid] if r in kept)
    return orphan_calls, orphan_results
