"""``cupel-np`` (``cupel_np.cli.main``): start a cold ``demo``/``check``'s compile child
(``cupel_np.cli.early``), then import the command line and run it. This module imports only
``early`` at its top, so the child starts before the library is imported (~0.5 s).

:func:`run` is the console script (and ``python -m cupel_np``): :func:`main`, then an exit
that skips the interpreter's teardown."""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import NoReturn

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


def run() -> NoReturn:
    """The ``cupel-np`` process: :func:`main` on ``sys.argv[1:]``, then exit with its status
    without the interpreter's teardown (freeing Numba's and pyarrow's objects
    one by one: ~0.3 s of CPU at the end of every run, which the process's exit does at once).
    Threads that are not daemons are joined and the exit handlers run, as at a normal exit,
    and the standard streams are flushed; every output file is
    closed by then (each is written whole, under a temporary name). In-process callers use
    :func:`main`, which returns."""
    try:
        code = main()
    except SystemExit as e:  # argparse: --help, --version, a usage error
        if e.code is not None and not isinstance(e.code, int):
            raise
        code = e.code or 0
    # what the interpreter's exit does first: join the threads that are not daemons and run
    # threading's exit callbacks (a ThreadPoolExecutor's pending work), then the exit handlers
    shutdown = getattr(threading, "_shutdown", None)
    if shutdown is not None:
        shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nothing more to say there
            pass
    os._exit(code)
