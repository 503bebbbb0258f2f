"""What every Dask worker of a cupel_np run is given before its first task: this process's
storage options (``--storage-option``; the workers' own environment gives the rest). Imported
only with Dask installed (``cupel_np.io.dask`` imports it on use)."""

from __future__ import annotations

import hashlib
import json

from distributed.diagnostics.plugin import WorkerPlugin

from cupel_np import _fs


class StorageOptions(WorkerPlugin):
    """Sets the driver's storage options on each worker, those that join later included. The
    options travel over Dask's own connection and are held in memory only: never logged."""

    idempotent = True

    def __init__(self, options: dict[str, str]):
        self.options = dict(options)

    def setup(self, worker) -> None:
        _fs.configure(self.options)


def share_storage_options(client) -> None:
    """Register the driver's storage options on ``client``'s workers (nothing when none are
    set). The plugin's name is a digest of the options, so other options register anew."""
    options = _fs.current_options()
    if not options:
        return
    digest = hashlib.sha256(json.dumps(options, sort_keys=True).encode()).hexdigest()[:16]
    client.register_plugin(StorageOptions(options), name=f"cupel-np-storage-{digest}")
