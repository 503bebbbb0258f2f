"""What the user hands in, as validated data: items (``items.py``) and their column checks
(``columns.py``), budgets, scorer specs (``scorers.py``, with the one registry of scorer type
names), slicer specs (``slicers.py``), ``Policy`` and its dict shape (``policy.py``), the .NET
policy shape (``dotnet.py``), presets and grids of variants (``grid.py``)."""
