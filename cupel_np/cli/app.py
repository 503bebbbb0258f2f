"""``cupel-np`` / ``python -m cupel_np``: parse, run the command, map errors to exit statuses.

Exit status: 0 ok, 2 bad usage or bad input (one line on stderr naming the file, field, row
and value), 1 internal error. ``--debug`` shows tracebacks.
"""

from __future__ import annotations

import os
import sys

from cupel_np import _fs
from cupel_np.cli.budget import cmd_budget
from cupel_np.cli.demo import cmd_demo
from cupel_np.cli.parser import build_parser
from cupel_np.cli.run import cmd_run
from cupel_np.cli.sensitivity import cmd_sensitivity
from cupel_np.cli.shared import (
    EXIT_INTERNAL,
    EXIT_USAGE,
    UsageError,
    _err,
    _say_if_compiling,
    refuse_empty,
    refuse_missing_columns,
)
from cupel_np.cli.staging import run_swapped
from cupel_np.cli.sweep import cmd_sweep
from cupel_np.cli.tune import cmd_tune
from cupel_np.cli.validate import cmd_validate
from cupel_np.errors import CupelError
from cupel_np.model.plugins import load_plugins
from cupel_np.text import SafeTerminalText


def main(argv: list[str] | None = None) -> int:
    """Run the ``cupel-np`` command line on ``argv`` (default: ``sys.argv[1:]``) and return the
    exit status: 0 ok, 1 internal error, 2 user error (a ``CupelError`` or a bad argument,
    reported on stderr)."""
    # control and bidi characters in user strings (item content, labels, set keys, values in
    # error messages) are printed visibly, never as escape sequences the terminal would obey;
    # stderr keeps carriage returns (the progress lines rewrite themselves)
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = SafeTerminalText(out), SafeTerminalText(err, keep_cr=True)
    try:
        return _main(argv)
    finally:
        sys.stdout, sys.stderr = out, err


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        load_plugins(args.plugin)
        _fs.configure(_fs.parse_options(getattr(args, "storage_option", None)))
        refuse_empty(args)
        if args.func is not cmd_validate:  # validate lists a missing set column among its problems
            refuse_missing_columns(args)
        if args.func in (cmd_demo, cmd_sensitivity, cmd_sweep, cmd_budget, cmd_run):
            _say_if_compiling(args)
        if args.func in (cmd_demo, cmd_sensitivity, cmd_sweep, cmd_budget, cmd_tune):
            return run_swapped(args, args.func)  # --overwrite is a swap
        return args.func(args)
    except UsageError as e:
        _err(str(e))
        return EXIT_USAGE
    except BrokenPipeError:
        # the reader went away (`cupel-np run ... --json | head`): not an error of ours; stop
        # quietly, with the status a process killed by SIGPIPE gets, and let no flush at exit
        # complain again
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 128 + 13
    except (CupelError, OSError) as e:  # bad input, or a path we cannot read or write
        if args.debug:
            raise
        _err(str(e))
        return EXIT_USAGE
    except KeyboardInterrupt:
        _err("interrupted")
        return 130
    except Exception as e:  # an engine bug, not the user's input
        if args.debug:
            raise
        _err(f"internal error: {type(e).__name__}: {e} (rerun with --debug for the traceback)")
        return EXIT_INTERNAL
