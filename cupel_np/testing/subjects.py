"""``should(subject)``, the entry point of the vocabulary: for a ``SelectionReport`` the chain
of the spec's 13 patterns (with ``match_snapshot``), for a ``SweepResult`` a ``CorpusShould``
whose ``every_set(variant=...)`` gives the same patterns over every item set.
"""

from __future__ import annotations

from typing import Any

from cupel_np.analysis.sensitivity import SweepResult
from cupel_np.errors import ApiUsageError
from cupel_np.testing.chain import SelectionReportAssertionChain
from cupel_np.testing.corpus import CorpusAssertionChain
from cupel_np.testing.snapshot import match_snapshot


class CorpusShould:
    """``should(result)`` for a sweep: choose the variants with ``every_set``."""

    def __init__(self, result: SweepResult):
        self.result = result

    def every_set(self, variant=None, *, collect: bool = False, max_listed: int = 10) -> CorpusAssertionChain:
        """The vocabulary over every item set of the chosen variant(s) (a label, a list of
        labels, or None for all). ``collect=True``: record failures, raise nothing."""
        return CorpusAssertionChain(self.result, variant, collect=collect, max_listed=max_listed)

    def __getattr__(self, name: str):
        # a pattern asked of the sweep itself: say which call gives it (issue 26)
        if not name.startswith("_") and hasattr(CorpusAssertionChain, name):
            raise ApiUsageError(
                f"should(sweep_result).{name}(...): the patterns of a sweep hold per item set; "
                f"choose the variants first: should(result).every_set(variant=...).{name}(...)"
            )
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}; it has every_set(variant=...)")


class _ReportShould(SelectionReportAssertionChain):
    def match_snapshot(self, name: str, *, directory=None) -> _ReportShould:
        """The report matches its snapshot ``name`` (see :func:`match_snapshot`)."""
        match_snapshot(self.report, name, directory=directory, _stacklevel=2)
        return self


def should(subject: Any) -> CorpusShould | SelectionReportAssertionChain:
    """The assertion chain for a ``SelectionReport`` (or anything with ``included`` and
    ``excluded`` lists), or for a ``SweepResult`` (then call ``every_set``)."""
    if isinstance(subject, SweepResult):
        return CorpusShould(subject)
    if not (hasattr(subject, "included") and hasattr(subject, "excluded")):
        from cupel_np.errors import InvalidInputTypeError

        raise InvalidInputTypeError(f"should() takes a SelectionReport or a SweepResult, got {type(subject).__name__}")
    return _ReportShould(subject)
