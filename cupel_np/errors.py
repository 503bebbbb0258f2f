"""Every error and warning class cupel_np raises or issues, in one module.

Every error is a ``CupelError``; configuration and input errors are also the fitting built-in
(``ValueError`` / ``TypeError``) so generic handlers keep working. The policy-test assertion
failures (``cupel_np.testing``) are ``AssertionError`` s, so pytest shows them as failures.
The wings re-export the classes they raise from here (``cupel_np.io.outdir.OutputExistsError``
is this module's class)."""

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


class OutputExistsError(InvalidConfigError):
    """An output directory holds the outputs of another run (and ``overwrite`` was not given)."""

    code = "output_exists"


class BadTranscriptError(InvalidConfigError):
    """A transcript line or row that cannot be turned into items (names file and line)."""

    code = "bad_transcript"


class NonMonotonicSlicerError(CupelError):
    """A budget-simulation method was called with a slicer whose inclusion is not monotonic in
    the budget (the spec's ``InvalidOperationException``)."""

    code = "non_monotonic_slicer"


class SelectionReportAssertionError(AssertionError):
    """A Cupel.Testing assertion failed; the message says what was expected and found."""


class CorpusAssertionError(SelectionReportAssertionError):
    """A corpus check failed on some (variant, set) pairs; ``failures`` holds all of them (a
    ``pyarrow.Table``, one row per failing pair)."""

    def __init__(self, message: str, failures):
        super().__init__(message)
        #: every failing (variant, set) pair, one row each (a ``pyarrow.Table``)
        self.failures = failures


class SnapshotMismatchError(SelectionReportAssertionError):
    """The report differs from its recorded snapshot (the message holds a unified diff)."""


class CupelWarning(UserWarning):
    """Base class of every warning cupel_np issues."""


class TraceCollectorWarning(CupelWarning):
    """A trace collector's method (or its callback) raised. Tracing is observational: the run
    goes on without that collector, and the warning names it and the error (once per run)."""


class ApiUsageError(CupelError, AttributeError):
    """A method that the object does not have, where another form has it (a per-report
    assertion asked of a sweep before ``every_set()``): the message names the right call."""

    code = "invalid_config"


class StorageError(InvalidConfigError):
    """A URL that cannot be read or written: no such bucket, no credentials, access denied, a
    missing extra, a bad storage option. Names the URL, never a credential."""

    code = "storage"


class EmptyImportError(InvalidConfigError):
    """An import that yielded no items, or skipped more than it kept (``allow_empty`` permits)."""

    code = "empty_import"


class CorruptManifestError(InvalidConfigError):
    """``manifest.json`` of an output directory is not a manifest cupel_np wrote."""

    code = "corrupt_manifest"
