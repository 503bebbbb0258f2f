"""Compile plans for a cold run (see ``cupel_np.cli.coldstart``): per command, the kernels it
compiles (name, signature, depth: 0 when called from Python), in the order the compiles start. Written by
``python -m cupel_np.cli.plan_record``; do not edit by hand."""

PLANS: dict[str, tuple[tuple[str, str, int], ...]] = {
    "demo": (
        ("cupel_np.engine.scorers.ranks._rank_short", "int64[1Cr] bool[1Cr] int64[1Cr] int64", 0),
        ("cupel_np.engine.scorers.ranks._ranks_of_sorted", "uint64[1C] int64[1C] int64 float64[1C]", 1),
        ("cupel_np.engine.scorers.kernels.frequency_scores_small", "int64[1Cr] int64[1Cr] int64 int64[1Cr]", 0),
        ("cupel_np.engine.batch_kernels.variant_scores", "float64[2C] int64[1C] int64[1C] float64[1C] float64[2C]", 0),
        ("cupel_np.engine.batch_kernels.duplicate_winners", "int64[1C] int64[1C] float64[1C]", 0),
        (
            "cupel_np.engine.slicers.greedy._greedy_small",
            "int64[1C] float64[1C] int64[1C] int64[1C] int64[1C] int64",
            0,
        ),
        ("cupel_np.engine.slicers.greedy.density_key", "int64 float64", 1),
        ("cupel_np.engine.sortkeys.score_cmp", "float64 float64", 1),
        (
            "cupel_np.engine.stages._place_segments",
            "int64[1C] int64[1C] int64[1C] bool[1C] int64[1C] int64[1C] int64[1C] float64[1C] int64[1C] int64[1C] int64[1C] int64[1C] int64[1C] int64 int64 bool none bool[1C] int8[1C] int64[1C] int64[1C] int32[1C] int64[1C] int64[1C] int64[1C] none int64[1C] int64[1C] int32[1C] int64 int64 none none int64[1C]",
            0,
        ),
        ("cupel_np.engine.stages._sort_short_segments", "float64[1C] int64[1C] int64[1C]", 0),
        (
            "cupel_np.engine.slicers.knapsack._slice_knapsack",
            "int64[1C] float64[1C] int64[1C] int64[1C] int64 int64 int64[1C] int8[1C] int64[1C] int64[1C]",
            0,
        ),
        (
            "cupel_np.engine.slicers.knapsack._knapsack_items",
            "int64[1C] float64[1C] int64[1C] int64 int64 int64 int64[1C] int64",
            1,
        ),
        ("cupel_np.engine.slicers.knapsack.knapsack_fits", "int64 int64 int64", 2),
        ("cupel_np.engine.slicers.knapsack.knapsack_value", "float64", 2),
        ("cupel_np.engine.slicers.knapsack._dp_int64", "int64[1C] int64[1C] int64 uint64[1C] int64", 1),
        (
            "cupel_np.engine.slicers.knapsack._knapsack_take",
            "uint64[1C] int64[1C] int64[1C] int64 int64 int64[1C] int64",
            1,
        ),
    ),
    "check": (
        ("cupel_np.engine.scorers.ranks._rank_short", "int64[1Cr] bool[1Cr] int64[1Cr] int64", 0),
        ("cupel_np.engine.scorers.ranks._ranks_of_sorted", "uint64[1C] int64[1C] int64 float64[1C]", 1),
        ("cupel_np.engine.batch_kernels.variant_scores", "float64[2C] int64[1C] int64[1C] float64[1C] float64[2C]", 0),
        ("cupel_np.engine.batch_kernels.duplicate_winners", "int64[1C] int64[1C] float64[1C]", 0),
        (
            "cupel_np.engine.slicers.greedy._greedy_small",
            "int64[1C] float64[1C] int64[1C] int64[1C] int64[1C] int64",
            0,
        ),
        ("cupel_np.engine.slicers.greedy.density_key", "int64 float64", 1),
        ("cupel_np.engine.sortkeys.score_cmp", "float64 float64", 1),
        (
            "cupel_np.engine.stages._place_segments",
            "int64[1C] int64[1C] int64[1C] bool[1C] int64[1C] int64[1C] int64[1C] float64[1C] int64[1C] int64[1C] int64[1C] int64[1C] int64[1C] int64 int64 bool none bool[1C] int8[1C] int64[1C] int64[1C] int32[1C] int64[1C] int64[1C] int64[1C] none int64[1C] int64[1C] int32[1C] int64 int64 none none int64[1C]",
            0,
        ),
        ("cupel_np.testing._kernels._top_n_fail_kernel", "float64[1Cr] int64[1Cr] int64[1Cr] int64 int64[1C]", 0),
    ),
}
