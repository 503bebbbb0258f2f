"""``--overwrite`` is a swap: the new run writes into a staging directory inside ``--out``
(same file system, or a staging prefix under an object-store URL) and its outputs replace the
old ones only once the command has finished.
A failed run (exit 2) removes its staging directory and keeps the old results, saying so; a
killed run leaves the old results untouched (and a hidden ``.cupel-staging-*`` directory that
the next ``--overwrite`` run removes).

The run's stdout is held until the swap so that the paths it prints are those of ``--out``."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import sys
import uuid
from pathlib import Path

from cupel_np._fs import RemotePath, as_path, commit_remote, rmtree
from cupel_np.cli.shared import AllCellsFailedError
from cupel_np.io.outdir import (
    MANIFEST,
    STAGING_PREFIX,
    check_out_path,
    existing_outputs,
    mark_complete,
    run_in_progress,
)


def _remove(p: Path) -> None:
    if p.is_dir() and not p.is_symlink():
        shutil.rmtree(p)
    else:
        p.unlink()


def swap_in(stage: Path, out: Path) -> None:
    """Replace the outputs in ``out`` by those in ``stage``: the old manifest goes first and the
    new one comes last, so at no moment does ``out`` hold a manifest over a mix of two runs."""
    old = [f for f in existing_outputs(out) if f != stage]
    for f in sorted(old, key=lambda f: f.name != MANIFEST):  # the manifest first
        _remove(f)
    new = sorted(stage.iterdir(), key=lambda f: f.name == MANIFEST)  # the manifest last
    for f in new:
        os.replace(f, out / f.name)
    stage.rmdir()


def swap_in_remote(stage: RemotePath, out: RemotePath) -> None:
    """``swap_in`` on an object store, which has no rename: the old outputs are deleted
    (manifest first), then each staged object is moved into place (a server-side copy: each
    appears whole), the manifest last, and the staging prefix removed."""
    old = [f for f in existing_outputs(out) if f != stage]
    for f in sorted(old, key=lambda f: f.name != MANIFEST):  # the manifest first
        rmtree(f) if f.is_dir() else f.unlink(missing_ok=True)
    new = sorted(stage.walk_files(), key=lambda f: (f.name == MANIFEST and f.parent == stage, f.path))
    for f in new:  # the manifest last
        commit_remote(f, out / f.path[len(stage.path) + 1 :])
    _discard_stage(stage)


def _discard_stage(stage: Path | RemotePath) -> None:
    if isinstance(stage, RemotePath):
        with contextlib.suppress(Exception):  # the run's own error is the one to report
            if stage.exists():
                stage.rmtree()
    else:
        shutil.rmtree(stage, ignore_errors=True)


def _finished(args, func) -> int:
    """``func(args)`` with its manifests marked incomplete until it returns 0 (or stops because
    every cell failed: the run finished, its outputs are whole)."""
    with run_in_progress():
        try:
            rc = func(args)
        except AllCellsFailedError:
            mark_complete(args.out)
            raise
    if rc == 0:
        mark_complete(args.out)
    return rc


def run_swapped(args, func) -> int:
    """Run ``func(args)``; with ``--overwrite`` over existing outputs, as a swap (see above)."""
    out = as_path(args.out)
    if not getattr(args, "overwrite", False) or not existing_outputs(check_out_path(out)):
        return _finished(args, func)
    stage = out / f"{STAGING_PREFIX}{uuid.uuid4().hex[:12]}"
    args.out, args.overwrite = str(stage), False
    buf = io.StringIO()
    ok = False
    try:
        with contextlib.redirect_stdout(buf):
            rc = _finished(args, func)
        ok = rc == 0 and stage.is_dir()
        if ok:
            swap_in_remote(stage, out) if isinstance(stage, RemotePath) else swap_in(stage, out)
        return rc
    finally:
        text = buf.getvalue()
        for s, o in ((str(stage.resolve()), str(out.resolve())), (str(stage), str(out))):
            text = text.replace(s, o)
        sys.stdout.write(text)
        if not ok:
            _discard_stage(stage)
            print(f"cupel-np: the new run did not finish; the previous results in {out} were kept", file=sys.stderr)
        args.out = str(out)
