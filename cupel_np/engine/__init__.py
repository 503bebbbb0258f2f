"""How it is computed: the Numba kernels (sort keys, scorers, slicers, stages) and the drivers
that run every variant of a sweep over every item set (sweep_shared, batch, runner, parallel).

The face names the drivers; the kernels stay in their modules (``engine/slicers/``,
``engine/scorers/``, ``stages.py``, ...), which the wings above import directly."""

from cupel_np.engine.batch import run_sweep
from cupel_np.engine.runner import PolicyRun, run_policy
from cupel_np.engine.sweep_shared import SweepShared, prepare_sweep

# Grouped by source file.
__all__ = [
    # batch.py
    "run_sweep",
    # runner.py
    "PolicyRun",
    "run_policy",
    # sweep_shared.py
    "SweepShared",
    "prepare_sweep",
]
