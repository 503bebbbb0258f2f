"""What the user hands in: items and their column checks, budgets, scorer and slicer specs,
policies (dict and .NET shapes), presets, grids of variants, and the files that hold them."""
