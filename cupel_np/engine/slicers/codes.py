"""The slicer mode and error codes that the slice kernels and the Python side share."""

MODE_GREEDY = 0
MODE_KNAPSACK = 1
MODE_QUOTA = 2
MODE_COUNT = 3

ERR_NONE = 0
ERR_SCARCITY = 3
ERR_TABLE_TOO_LARGE = 4
ERR_NEEDS_SPLIT = 5  # internal to slice_segments: the segment goes to the exact-DP kernel
