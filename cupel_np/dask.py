"""``cupel_np.dask``, the documented path of :mod:`cupel_np.io.dask` (the same module object)."""

import sys

from cupel_np.io import dask as _dask

sys.modules[__name__] = _dask
