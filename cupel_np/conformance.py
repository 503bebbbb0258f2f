"""``python -m cupel_np.conformance PATH...``: the runner lives in :mod:`cupel_np.cli.conformance`."""

import sys

from cupel_np.cli import conformance as _conformance

if __name__ == "__main__":
    sys.exit(_conformance.main())
sys.modules[__name__] = _conformance
