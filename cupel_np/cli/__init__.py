"""The ``cupel-np`` command line: ``parser`` builds the argument parser, ``app.main`` runs it,
one module per sub-command holds what it does (``demo``, ``sensitivity``, ``sweep``, ``budget``,
``run``, ``presets``, ``validate``, ``import_``, ``report``, ``conformance``, ``check``,
``tune``), ``sweeps`` what the sweeping commands share and ``shared`` what every command shares."""

from cupel_np.cli.app import main

__all__ = ["main"]
