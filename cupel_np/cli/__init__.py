"""The ``cupel-np`` command line: ``entry.main`` is the command (it starts a cold run's compile
child, ``early``, before it imports the rest), ``parser`` builds the argument parser,
``app.main`` runs it, one module per sub-command holds what it does (``demo``,
``sensitivity``, ``sweep``, ``budget``, ``run``, ``presets``, ``validate``, ``import_``,
``report``, ``conformance``, ``check``, ``tune``), ``sweeps`` what the sweeping commands share
and ``shared`` what every command shares."""

from cupel_np.cli.entry import main

__all__ = ["main"]
