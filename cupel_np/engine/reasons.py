"""Every reason code the engine records, and its name in the spec.

The int8 reason matrix (``[V, N]``) holds one of these codes per (variant, row). Kernels read
the codes as compile-time constants; reports, tables and pages turn them into the spec's names
with :data:`REASON_NAMES` or the vectorized :func:`reason_name_lut`.
"""

import numpy as np

# inclusion reasons
R_SCORED = 0
R_PINNED = 1
R_ZERO_TOKEN = 2

# exclusion reasons
R_BUDGET_EXCEEDED = 10
R_SCORED_TOO_LOW = 11
R_DEDUPLICATED = 12
R_QUOTA_CAP_EXCEEDED = 13
R_QUOTA_REQUIRE_DISPLACED = 14
R_NEGATIVE_TOKENS = 15
R_PINNED_OVERRIDE = 16
R_FILTERED = 17
R_COUNT_CAP_EXCEEDED = 18
#: BudgetExceeded recorded by the Place stage's truncation (the spec's name is BudgetExceeded;
#: the separate code keeps the stage that excluded the item, which orders the excluded list)
R_TRUNCATED = 19
#: PinnedOverride recorded by the Place stage's truncation: the item's set has pinned items,
#: which took the budget first (spec: diagnostics/exclusion-reasons.md, "Place stage
#: (Truncate)"; .NET does the same; the Rust crate says BudgetExceeded here)
R_TRUNCATED_PINNED = 20
#: the codes the Place stage's truncation records (its exclusions sort after the slicer's)
TRUNCATION_CODES = (R_TRUNCATED, R_TRUNCATED_PINNED)

#: the spec's name of every code
REASON_NAMES = {
    R_SCORED: "Scored",
    R_PINNED: "Pinned",
    R_ZERO_TOKEN: "ZeroToken",
    R_BUDGET_EXCEEDED: "BudgetExceeded",
    R_SCORED_TOO_LOW: "ScoredTooLow",
    R_DEDUPLICATED: "Deduplicated",
    R_QUOTA_CAP_EXCEEDED: "QuotaCapExceeded",
    R_QUOTA_REQUIRE_DISPLACED: "QuotaRequireDisplaced",
    R_NEGATIVE_TOKENS: "NegativeTokens",
    R_PINNED_OVERRIDE: "PinnedOverride",
    R_FILTERED: "Filtered",
    R_COUNT_CAP_EXCEEDED: "CountCapExceeded",
    R_TRUNCATED: "BudgetExceeded",
    R_TRUNCATED_PINNED: "PinnedOverride",
}


def _exclusion_stages() -> np.ndarray:
    stage = np.full(256, -1, dtype=np.int8)
    for code in (
        R_BUDGET_EXCEEDED,
        R_SCORED_TOO_LOW,
        R_QUOTA_CAP_EXCEEDED,
        R_QUOTA_REQUIRE_DISPLACED,
        R_PINNED_OVERRIDE,
        R_FILTERED,
        R_COUNT_CAP_EXCEEDED,
    ):
        stage[code] = 2
    stage[R_NEGATIVE_TOKENS] = 0
    stage[R_DEDUPLICATED] = 1
    stage[list(TRUNCATION_CODES)] = 3
    return stage


#: the stage that records each exclusion code, indexed by ``reason.view(np.uint8)``:
#: 0 Classify (NegativeTokens), 1 Deduplicate, 2 Slice, 3 Place (truncation); -1 for the
#: inclusion codes and "no reason" (-1). Reports order exclusions and count funnels by it.
EXCLUSION_STAGE = _exclusion_stages()


def reason_name_lut() -> np.ndarray:
    """Object array mapping ``code + 1`` to the spec's name (index 0, code -1: no reason, "")."""
    names = ["" for _ in range(130)]
    for code, name in REASON_NAMES.items():
        names[code + 1] = name
    return np.array(names, dtype=object)
