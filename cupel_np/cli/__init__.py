"""The ``cupel-np`` command (:mod:`cupel_np.cli.commands`) and the conformance runner."""

from cupel_np.cli.commands import main

__all__ = ["main"]
