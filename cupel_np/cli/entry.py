"""``cupel-np`` (``cupel_np.cli.main``): start a cold ``demo``/``check``'s compile child
(``cupel_np.cli.early``), then import the command line and run it. This module imports only
``early`` at its top, so the child starts before the library is imported (~0.5 s)."""

from __future__ import annotations

import sys

from cupel_np.cli import early


def main(argv: list[str] | None = None) -> int:
    """Run the ``cupel-np`` command line on ``argv`` (default: ``sys.argv[1:]``) and return the
    exit status: 0 ok, 1 internal error, 2 user error (see ``cupel_np.cli.app.main``)."""
    early.start(sys.argv[1:] if argv is None else argv)
    try:
        # imported here, after the compile child started: the library's import overlaps its start
        from cupel_np.cli.app import main as run

        return run(argv)
    finally:
        early.discard()  # a child the command did not take (it failed first, or took another path)
