"""The derived tables ``min_budgets`` probes run on (see ``budget_sim._Prober``)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from cupel_np.engine.scorers import ScoreContext
from cupel_np.model.items import ItemTable


class _ProbeTable:
    """The columns ``run_sweep`` reads, for a derived table whose item sets are copies of the
    parent's sets reduced to what decides inclusion (see ``_Prober``). Strings never enter:
    kinds keep the parent's ids and every row gets its own content id."""

    set_column = None

    def __init__(
        self,
        parent: ItemTable,
        src: np.ndarray,
        offsets: np.ndarray,
        pad_tokens: np.ndarray,
        groups: tuple[str, np.ndarray] | None = None,
    ):
        pad = src < 0
        safe = np.where(pad, 0, src)
        self.n = int(src.shape[0])
        self.offsets = offsets
        self.set_keys = [None] * (offsets.shape[0] - 1)
        self.tokens = parent.tokens[safe]
        self.tokens[pad] = pad_tokens
        self.pinned = pad.copy()
        self.content_id = np.arange(self.n, dtype=np.int64)
        self.kind_id = parent.kind_id[safe]
        self.kind_vocab = parent.kind_vocab
        self.kind_ids_for = parent.kind_ids_for
        self.timestamp = parent.timestamp[safe]
        self.timestamp_valid = np.where(pad, False, parent.timestamp_valid[safe])
        self.timestamp_unit = parent.timestamp_unit
        # groups (``(column, the parent's int64 codes, -1 for none)``): an integer column of
        # the codes; the pinned row closing each copy is in no unit
        self._groups: tuple[str, pa.Array] | None = None
        if groups is not None:
            code = np.where(pad, -1, groups[1][safe])
            self._groups = (groups[0], pa.array(code, pa.int64(), mask=code < 0))

    @property
    def extra_columns(self) -> list[str]:
        """The group column, when the policy has groups."""
        return [] if self._groups is None else [self._groups[0]]

    def extra_column(self, name: str) -> pa.Array:
        """The group column's codes per derived row (KeyError for any other name)."""
        if self._groups is None or name != self._groups[0]:
            raise KeyError(name)
        return self._groups[1]

    @property
    def n_sets(self) -> int:
        return len(self.set_keys)


class _CopiedScores:
    """A score context for a probe table: every base column is the parent's, gathered (scores
    depend on the whole set's scoreable rows, which the parent run saw)."""

    def __init__(self, parent_ctx: ScoreContext, pos: np.ndarray):
        self._parent = parent_ctx
        self._pos = pos

    def __len__(self) -> int:
        return self._pos.shape[0]

    def __bool__(self) -> bool:  # present even when empty (run_sweep tests ``score_context or ...``)
        return True

    def score(self, scorer) -> np.ndarray:
        return self._parent.score(scorer)[self._pos]

    def score_into(self, scorer, out: np.ndarray) -> None:
        """``out[:] = self.score(scorer)`` (``ScoreContext.score_into``: a sweep's base column)."""
        out[:] = self.score(scorer)
