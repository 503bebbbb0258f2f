"""Start a cold ``demo``/``check``'s compile child before the library is imported.

``cupel_np.cli.coldstart`` shares a cold run's compile with one child process; the child only
needs Numba and the kernel modules, while the command first imports the whole library (~0.5 s
of CPU; NumPy, Numba, pyarrow, the model, the analyses, the report). :func:`start`, called by
``cupel_np.cli.main`` (``entry``) before it imports the rest of the package, starts the child right
away, so its compile overlaps those imports; ``coldstart.share_compile`` then :func:`take` s it
instead of starting one. Only the standard library and :mod:`cupel_np.cli.compile_plans` are
imported here.

Whether the kernels are cached is guessed without Numba (:func:`cache_index_dir`: where
Numba's cache locator puts the kernel cache); a wrong guess only costs time: a child started
for a warm cache is stopped by ``share_compile``, which checks with Numba, and a cold cache
taken for warm starts the child there, as before. A child nobody took (the command failed
before its work, or took another path) is stopped by :func:`discard`.
"""

from __future__ import annotations

import glob
import hashlib
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cupel_np._cores import available_cores
from cupel_np.cli.compile_plans import PLANS

#: the child's imports (``python -c``; the claim directory and the plan entries follow as
#: arguments): the plan's kernel modules and ``coldstart``, WITHOUT running any package's
#: ``__init__`` (every package of ``cupel_np`` is entered in ``sys.modules`` unexecuted): the
#: engine's ``__init__`` imports its drivers, and those the model and pyarrow; compiling
#: kernels needs only Numba and the kernel modules, so the child is ready sooner. A kernel
#: module that needs its package's ``__init__`` fails here (tests/cli/test_coldstart.py).
CHILD_IMPORTS = (
    "import importlib, importlib.util, os, sys\n"
    "spec = importlib.util.find_spec('cupel_np')\n"
    "top = spec.submodule_search_locations[0]\n"
    "for d, dirs, files in os.walk(top):\n"
    "    dirs[:] = [x for x in dirs if x != '__pycache__' and not x.startswith('.')]\n"
    "    if '__init__.py' in files:\n"
    "        rel = os.path.relpath(d, top)\n"
    "        pkg = 'cupel_np' if rel == os.curdir else 'cupel_np.' + rel.replace(os.sep, '.')\n"
    "        sys.modules.setdefault(pkg, importlib.util.module_from_spec(importlib.util.find_spec(pkg)))\n"
    "for name in sorted({e.split('|')[0].rpartition('.')[0] for e in sys.argv[2:]}) + ['cupel_np.cli.coldstart']:\n"
    "    importlib.import_module(name)\n"
)

#: what the child runs
CHILD = CHILD_IMPORTS + "sys.modules['cupel_np.cli.coldstart'].child_main()\n"

#: the kernel whose cache index says the kernels are cached (``coldstart.kernels_cached``)
PROBE_MODULE, PROBE_KERNEL = "batch_kernels", "variant_scores"


@dataclass
class Started:
    """A compile child started for ``command``: its claim directory and process."""

    command: str
    dir: str
    child: subprocess.Popen

    def stop(self) -> None:
        """Stop the child and remove its claim directory."""
        if self.child.poll() is None:
            self.child.kill()
        self.child.wait()
        for p in Path(self.dir).iterdir():
            p.unlink()
        os.rmdir(self.dir)


_pending: Started | None = None


def core_to_spare() -> bool:
    """Whether a core is free for the child: the 1-minute load average leaves at least about
    one of the usable cores idle. On a busy machine a second process only competes for the
    same cores (the sum of CPU time grows by 10-20%: each process sets Numba up, and NumPy's
    implementations are compiled in both), so the wall time grows too."""
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):  # no load average here: assume the cores are free
        return True
    return load <= available_cores() - 1 + 0.5


def wanted(command: str | None) -> bool:
    """Whether ``command`` may share its compile now (the environment, the cores, the load),
    before any look at the cache. ``CUPEL_NP_COMPILE_AHEAD=0`` never, ``=1`` whatever the load."""
    mode = os.environ.get("CUPEL_NP_COMPILE_AHEAD", "")
    if mode == "0" or os.environ.get("NUMBA_DISABLE_JIT") == "1" or not PLANS.get(command or ""):
        return False
    if available_cores() < 2:
        return False
    return mode == "1" or core_to_spare()


def cache_index_dir() -> str:
    """The directory Numba keeps the probe kernel's cache index in, worked out as Numba's
    cache locators do (``numba.core.caching``): ``NUMBA_CACHE_DIR`` (a subdirectory named after
    the source directory and its hash), else the ``__pycache__`` beside the source when
    writable, else the user-wide cache directory."""
    engine = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "engine")
    sub = f"{os.path.basename(engine)}_{hashlib.sha1(engine.encode()).hexdigest()}"
    user = os.environ.get("NUMBA_CACHE_DIR")
    if user:
        return os.path.join(user, sub)
    in_tree = os.path.join(engine, "__pycache__")
    if os.access(in_tree if os.path.isdir(in_tree) else engine, os.W_OK):
        return in_tree
    cache_home = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return os.path.join(cache_home, "numba", sub)


def cache_index_pattern() -> str:
    """The probe kernel's index file name, its source line left as ``*``."""
    v = sys.version_info
    return f"{PROBE_MODULE}.{PROBE_KERNEL}-*.py{v[0]}{v[1]}{getattr(sys, 'abiflags', '')}.nbi"


def looks_cached() -> bool:
    """Whether the kernel cache seems filled (:func:`cache_index_dir`), without Numba."""
    return bool(glob.glob(os.path.join(glob.escape(cache_index_dir()), cache_index_pattern())))


def command_of(argv: list[str]) -> str | None:
    """The sub-command of a ``cupel-np`` argument list: its first word that is no option;
    ``None`` when asking for help, or when ``check`` runs on Dask (nothing compiles here)."""
    words = [a for a in argv if not a.startswith("-")]
    if not words or any(a in ("-h", "--help", "--dask") or a.startswith("--dask=") for a in argv):
        return None
    return words[0]


def start(argv: list[str]) -> None:
    """Start the compile child of the command ``argv`` runs, if it compiles a plan, may share
    it (:func:`wanted`) and the kernels do not look cached; :func:`take` hands it over."""
    global _pending
    command = command_of(argv)
    if _pending is not None or not wanted(command) or looks_cached():
        return
    assert command is not None
    _pending = spawn(command)


def spawn(command: str) -> Started:
    """Start the compile child of ``command``'s plan (see ``cupel_np.cli.coldstart``)."""
    plan = PLANS[command]
    directory = tempfile.mkdtemp(prefix="cupel-np-compile-")
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, directory, *["|".join(map(str, e)) for e in plan]],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return Started(command, directory, child)


def take(command: str) -> Started | None:
    """The child :func:`start` started for ``command`` (now the caller's to stop), or ``None``."""
    global _pending
    started, _pending = _pending, None
    if started is not None and started.command != command:
        started.stop()
        return None
    return started


def discard() -> None:
    """Stop a child that nobody took."""
    global _pending
    started, _pending = _pending, None
    if started is not None:
        started.stop()
