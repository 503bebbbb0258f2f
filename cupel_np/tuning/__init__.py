"""Policy search over labelled outcomes: ``tune`` (Optuna ask/tell, each batch of trials one
sweep), the search space file, and the written outputs (leaderboard, Pareto front, best
policy files, report page). Needs the optional ``tune`` extra (``optuna``).

Names are imported on first use: ``output.py`` writes through the I/O wing, which a plain
``import cupel_np`` (whose ``tune`` is ``search.py``'s) does not load. Optuna itself is
imported only when a search runs.
"""

from __future__ import annotations

import importlib
from typing import Any

# Grouped by source file.
__all__ = [
    # search.py
    "OBJECTIVES",
    "TuneResult",
    "heldout_sets",
    "tune",
    # space.py
    "SearchSpace",
    "load_space",
    # output.py
    "policy_toml",
    "write_tune",
]

_HOME = {
    "OBJECTIVES": "search",
    "TuneResult": "search",
    "heldout_sets": "search",
    "tune": "search",
    "SearchSpace": "space",
    "load_space": "space",
    "policy_toml": "output",
    "write_tune": "output",
}


def __getattr__(name: str) -> Any:
    if name in _HOME:
        return getattr(importlib.import_module(f"cupel_np.tuning.{_HOME[name]}"), name)
    raise AttributeError(f"module 'cupel_np.tuning' has no attribute {name!r}")
