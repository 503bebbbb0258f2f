"""Error types. Every error is a ``CupelError``; configuration and input errors are also
the fitting built-in (``ValueError`` / ``TypeError``) so generic handlers keep working."""

from __future__ import annotations


class CupelError(Exception):
    """Base class of every error raised by cupel_np."""

    #: short machine-readable code (the conformance vectors' ``[expected] error``)
    code: str = "error"


class InvalidConfigError(CupelError, ValueError):
    """A scorer, slicer, placer, policy, budget or item that must be rejected at construction."""

    code = "invalid_config"


class InvalidInputTypeError(CupelError, TypeError):
    """A value of the wrong type (a column of the wrong Arrow type, a float where an int belongs)."""

    code = "invalid_config"


class PinnedExceedsBudgetError(CupelError):
    """Pinned items need more tokens than ``max_tokens - output_reserve`` (Classify stage)."""

    code = "pinned_exceeds_budget"


class BudgetOverflowError(CupelError):
    """Merged items exceed ``target_tokens`` under ``overflow_strategy = "throw"`` (Place stage)."""

    code = "overflow"


class ScarcityError(CupelError):
    """A count-quota slicer with ``scarcity_behavior = "throw"`` cannot meet a ``require_count``."""

    code = "scarcity"


class TableTooLargeError(CupelError):
    """A knapsack DP keep table would exceed the configured cell limit."""

    code = "table_too_large"


class TooFewVariantsError(InvalidConfigError):
    """A sensitivity comparison was given fewer than two variants."""

    code = "too_few_variants"


class MemoryLimitError(InvalidConfigError):
    """A run whose estimated peak memory is over the memory limit and that cannot stream
    (raised before anything large is allocated)."""


class CupelWarning(UserWarning):
    """Base class of every warning cupel_np issues."""


class TraceCollectorWarning(CupelWarning):
    """A trace collector's method (or its callback) raised. Tracing is observational: the run
    goes on without that collector, and the warning names it and the error (once per run)."""


class ApiUsageError(CupelError, AttributeError):
    """A method that the object does not have, where another form has it (a per-report
    assertion asked of a sweep before ``every_set()``): the message names the right call."""

    code = "invalid_config"
