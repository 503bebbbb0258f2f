"""Moving items and results at scale: Parquet in and out, datasets, Dask, transcript importers.

The public face; the code lives in the modules below, grouped here by source file:
``parquet`` (sweeps of files too large for memory, the written outputs, validation),
``importers`` (agent transcripts to items), ``dask`` (sweeps past one machine; imported on
use, since it needs the optional ``dask`` extra).
"""

from cupel_np.io.importers import import_transcripts
from cupel_np.io.parquet import (
    atomic_write_bytes,
    read_items_table,
    sweep_parquet,
    validate_items,
    write_parquet_atomic,
    write_sweep,
)

# Grouped by source file (``dask``: ``cupel_np.dask``, imported on use).
__all__ = [
    # importers.py
    "import_transcripts",
    # parquet.py
    "atomic_write_bytes",
    "read_items_table",
    "sweep_parquet",
    "validate_items",
    "write_parquet_atomic",
    "write_sweep",
]
