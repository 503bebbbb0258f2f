"""How it is computed: the Numba kernels (sort keys, scorers, slicers, stages) and the drivers
that run every variant of a sweep over every item set (batch, runner, parallel)."""
