"""Policy tests: the Cupel.Testing vocabulary over one report, or over every set of a sweep.

``should(report)`` returns the chain of the spec's 13 assertion patterns
(:class:`SelectionReportAssertionChain`); ``should(result).every_set(variant=...)`` the same
patterns over every item set of a ``SweepResult`` (:class:`CorpusAssertionChain`), with item
predicates written as column conditions (:func:`col`). ``match_snapshot`` keeps a report's
stable JSON form beside the test. See docs/testing.md.
"""

from cupel_np.errors import CorpusAssertionError, SelectionReportAssertionError, SnapshotMismatchError
from cupel_np.testing.chain import SelectionReportAssertionChain
from cupel_np.testing.conditions import Column, Condition, col
from cupel_np.testing.corpus import CorpusAssertionChain
from cupel_np.testing.snapshot import match_snapshot, snapshot_json
from cupel_np.testing.subjects import CorpusShould, should

# Grouped by source file.
__all__ = [
    # chain.py
    "SelectionReportAssertionChain",
    "SelectionReportAssertionError",  # from cupel_np.errors
    # conditions.py
    "Column",
    "Condition",
    "col",
    # corpus.py
    "CorpusAssertionChain",
    "CorpusAssertionError",  # from cupel_np.errors
    # snapshot.py
    "SnapshotMismatchError",  # from cupel_np.errors
    "match_snapshot",
    "snapshot_json",
    # subjects.py
    "CorpusShould",
    "should",
]
