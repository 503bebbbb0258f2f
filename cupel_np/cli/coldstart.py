"""Share a cold run's compile between two processes (``cupel-np demo`` and ``check``).

On a cold kernel cache almost all of a first run is Numba compiling kernels, and Numba
compiles one kernel at a time per process, so a first run on a 2-core machine left one core
idle. A *compile plan* (:data:`cupel_np.cli.compile_plans.PLANS`, recorded from a cold run of
the command by ``python -m cupel_np.cli.plan_record``) lists every kernel the command
compiles, with its signature and its depth (0: called from Python; a kernel's callees follow
it), in the order the compiles start. :func:`share_compile` starts ONE child process that
compiles the depth-0 entries largest first (:func:`root_order`), while the command, before its
work (:func:`compile_ahead`), compiles the kernels the child's first root calls from the last,
then the other roots largest first. The child imports only Numba and the kernel modules (``early.CHILD_IMPORTS``);
``cupel-np demo`` and ``check`` start it before they import the library (``cupel_np.cli.early``).

Each entry is compiled by exactly one of them: a process takes an entry by creating its claim
file (``O_EXCL``) and marks it done when the kernel is in the cache. A process that reaches an
entry the other has taken first compiles the untaken kernels that entry calls, from the last
(the holder goes from the first), then, while it waits for the done mark, the next untaken
entries of its own order that are smaller than the awaited one, and then loads the kernel from
the cache: the same machine code it would have
compiled, so results are identical. The call graph
has no cycles and claims are taken under Numba's compiler lock, so the two never wait for each
other. A child that dies, or a plan the code no longer matches, only costs time: the command
compiles what it needs itself. The child is stopped when the command ends (each cache file is
written whole under a temporary name, so a stopped write leaves nothing).

Two processes on two cores: never more (``available_cores() < 2`` shares nothing), and only
when the load average leaves a core free (``early.core_to_spare``). ``CUPEL_NP_COMPILE_AHEAD=0``
turns sharing off, ``=1`` shares whatever the load (the benchmark does).
"""

from __future__ import annotations

import importlib
import os
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numba
import numpy as np
from numba.core import types as nbtypes
from numba.core.compiler_lock import global_compiler_lock

from cupel_np.cli import early
from cupel_np.cli.compile_plans import PLANS
from cupel_np.engine import batch_kernels

#: how long the command waits for a kernel the child is compiling before compiling it itself
WAIT_SECONDS = 600.0

_ARRAY = re.compile(r"^(\w+)\[(\d+)([CFA])(r?)\]$")


def type_text(t) -> str:
    """A kernel argument type as plan text: ``int64``, or ``float64[1Cr]`` for a 1-d C-order
    read-only float64 array (no ``r`` when writable), ``none`` for None; :class:`ValueError`
    for other types."""
    if isinstance(t, nbtypes.Array):
        return f"{t.dtype}[{t.ndim}{t.layout}{'r' if not t.mutable else ''}]"
    if isinstance(t, (nbtypes.Integer, nbtypes.Float, nbtypes.Boolean)):
        return str(t)
    if isinstance(t, nbtypes.NoneType):  # an argument a kernel's specialization prunes on
        return "none"
    raise ValueError(f"no plan text for the kernel argument type {t}")


def text_type(s: str):
    """The Numba type of plan text written by :func:`type_text`."""
    m = _ARRAY.match(s)
    if m:
        dtype = numba.from_dtype(np.dtype(m.group(1)))
        return nbtypes.Array(dtype, int(m.group(2)), m.group(3), readonly=bool(m.group(4)))
    if s == "none":
        return nbtypes.none
    return numba.from_dtype(np.dtype(s))


def signature_text(sig) -> str:
    """A signature (tuple of argument types) as plan text, arguments separated by spaces."""
    return " ".join(type_text(t) for t in sig)


def kernels_cached() -> bool:
    """Whether the compiled kernels every run needs are in Numba's on-disk cache (a cold
    first run compiles them for ~10-20 s). True when JIT is off or the cache cannot be read."""
    if os.environ.get("NUMBA_DISABLE_JIT") == "1":
        return True

    try:
        return os.path.exists(batch_kernels.variant_scores._cache._cache_file._index_path)
    except AttributeError:  # another Numba version's internals: say nothing rather than guess
        return True


def _dispatcher(name: str):
    module, _, fn = name.rpartition(".")
    return getattr(importlib.import_module(module), fn)


class _Claims:
    """One process's side of the sharing: a hook on every plan kernel's ``compile`` that
    takes the entry (claim file) and compiles it, or, when the other process holds it,
    compiles the still untaken kernels that entry calls (from the last: the holder takes them
    from the first) and then waits for its done mark and loads it from the cache.
    ``other_alive`` says whether waiting still makes sense (the other process may have died)."""

    def __init__(self, plan, directory: str, other_alive: Callable[[], bool], from_end: bool = False):
        self.plan = plan
        self.roots = root_order(plan, from_end)
        self.size = subtree_sizes(plan)
        self.index = {(n, s): i for i, (n, s, _) in enumerate(plan)}
        self.dir = directory
        self.other_alive = other_alive
        #: > 0 while this process compiles a root it picked up while waiting: such a compile
        #: never waits (a kernel the other process holds is compiled here too), or two
        #: processes each waiting inside a picked-up compile could wait for each other
        self.picking = 0
        self.hooked: list = []
        for name in sorted({e[0] for e in plan}):
            d = _dispatcher(name)
            d.compile = self._hook(name, d.compile)
            self.hooked.append(d)

    def _hook(self, name, orig):
        def compile(sig):
            # under Numba's (re-entrant) compiler lock: a thread never holds a claim while it
            # waits for the lock held by another thread that waits for the other process
            with global_compiler_lock:
                i = self.index.get((name, signature_text(sig))) if plannable(sig) else None
                if i is None or _claim(self.dir, i):
                    try:
                        return orig(sig)
                    finally:
                        if i is not None:
                            Path(self.dir, f"done-{i}").touch()
                if self.picking:
                    return orig(sig)  # the same code as the other process's (or its cache file)
                self.help_and_wait(i)
                return orig(sig)  # loads the other process's kernel from the cache (or compiles it)

        return compile

    def compile_entry(self, i: int) -> None:
        """Compile plan entry ``i`` ahead of use (through the hook: taken, or waited for). A
        plan the code no longer matches is no error: what a run needs it compiles on use."""
        name, sig, _ = self.plan[i]
        try:
            _dispatcher(name).compile(tuple(text_type(t) for t in sig.split()))
        except Exception:  # a stale entry (say, a type renamed): compiled on use
            _claim(self.dir, i)  # taken, or both processes would pick it up again forever
            Path(self.dir, f"done-{i}").touch()

    def untaken(self, i: int) -> bool:
        return not os.path.exists(os.path.join(self.dir, f"claim-{i}"))

    def help_and_wait(self, i: int) -> None:
        end = i + self.size[i]
        for j in reversed(range(i + 1, end)):  # the kernels entry i calls, first compiled under it
            if self.untaken(j) and not Path(self.dir, f"done-{i}").exists():
                self.compile_entry(j)
        done = Path(self.dir, f"done-{i}")
        t_end = time.monotonic() + WAIT_SECONDS
        while not done.exists() and self.other_alive() and time.monotonic() < t_end:
            j = self.next_untaken_root(smaller_than=self.size[i])
            if j is None:
                time.sleep(0.005)
            else:  # rather than wait idle: a kernel this process would compile next anyway
                self.picking += 1
                try:
                    self.compile_entry(j)
                finally:
                    self.picking -= 1

    def next_untaken_root(self, smaller_than: int | None = None):
        """The first plan entry called from Python that neither process has taken, in this
        process's order (:func:`root_order`); ``None`` when all are taken.

        While waiting for entry ``i`` (``smaller_than``: its size, :func:`subtree_sizes`) only
        a smaller root is picked up: a process waiting inside a long compile of its own (the
        child's place kernel, which the command needs last) for a short entry the other is
        helping with would otherwise start a long root and hold its own chain back by all of
        it, while the other, done with everything else, sits idle (seen: 1.4 s of the knapsack
        picked up for a 0.03 s wait). Compiling a root while waiting cannot deadlock: that
        compile never waits (``picking``), so a process waits only for an entry the other is
        compiling on its chain of calls, and a cycle of such waits would be a cycle of calls."""
        for j in self.roots:
            if self.untaken(j) and (smaller_than is None or self.size[j] < smaller_than):
                return j
        return None

    def ahead_order(self) -> list[int]:
        """The command's order when it compiles ahead (:func:`compile_ahead`): first the
        kernels the child's first root calls, from the last (the child compiles that root's
        chain from its first kernel, and the chain's own code last: the longest path of the
        whole compile, shortened by what the command takes off it), then the other roots
        largest first (as the child takes them when its chain is done: what is left at the
        end is small, so neither process waits long for the other's last kernel)."""
        first = root_order(self.plan, from_end=True)[0]
        helped = list(reversed(range(first + 1, first + self.size[first])))
        roots = sorted((i for i in root_order(self.plan, from_end=False) if i != first), key=lambda i: -self.size[i])
        return helped + roots + [first]

    def compile_ahead(self) -> None:
        """Compile every plan entry of :meth:`ahead_order` that neither process has taken."""
        for j in self.ahead_order():
            if self.untaken(j):
                self.compile_entry(j)

    def unhook(self) -> None:
        for d in self.hooked:
            del d.compile  # the instance attribute: back to the class's method


class _Sharing:
    """The command's side: its claims and the child (``early.Started``)."""

    def __init__(self, plan: tuple[tuple[str, str, int], ...], started: early.Started):
        self.started = started
        self.dir = started.dir
        self.child = started.child
        self.claims = _Claims(plan, self.dir, lambda: self.child.poll() is None)

    def close(self) -> None:
        self.claims.unhook()
        self.started.stop()


def plannable(sig) -> bool:
    """Whether every argument type of ``sig`` has a plan text (arrays and numbers)."""
    try:
        signature_text(sig)
    except ValueError:
        return False
    return True


def _claim(directory: str, i: int) -> bool:
    return _claim_path(Path(directory, f"claim-{i}"))


def _claim_path(path: Path) -> bool:
    """Create ``path`` if no process has (``O_EXCL``): whether this call did."""
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


def share_compile(command: str):
    """On a cold kernel cache, share ``command``'s compile plan with one child process (see
    the module docstring): the one ``cupel_np.cli.main`` started before it imported the
    library (``early``), else one started now. ``None`` when the kernels are cached, JIT is
    off, only one core is usable or none is idle, ``CUPEL_NP_COMPILE_AHEAD=0`` or there is no
    (current) plan. End it with :func:`end_sharing`."""
    started = early.take(command)
    if started is None and not early.wanted(command):
        return None
    plan = PLANS[command]
    if kernels_cached() or not _resolves(plan):  # the early guess was wrong, or a stale plan
        if started is not None:
            started.stop()
        return None
    return _Sharing(plan, started if started is not None else early.spawn(command))


def _resolves(plan) -> bool:
    """Whether every kernel the plan names exists (a stale plan shares nothing)."""
    try:
        return all(hasattr(_dispatcher(name), "get_call_template") for name, _, _ in plan)
    except (ImportError, AttributeError):
        return False


def compile_ahead(sharing) -> None:
    """The command's side of a shared compile (``sharing`` from :func:`share_compile`, or
    ``None``: nothing to do), before its work: compile the plan ahead in the order that keeps
    both processes busy to the end (:meth:`_Claims.ahead_order`) rather than as the work
    reaches each kernel; the work then loads what it calls (what the child still holds it
    waits for). A kernel the plan does not list is compiled on use, as ever."""
    if sharing is not None:
        sharing.claims.compile_ahead()


def end_sharing(sharing) -> None:
    """Remove the hooks and stop the child (``sharing`` may be ``None``)."""
    if sharing is not None:
        sharing.close()


def subtree_sizes(plan) -> list[int]:
    """Per plan entry, its size: 1 + the entries that follow it deeper (first compiled under
    it), a stand-in for how long its compile takes with all it calls."""
    sizes = []
    for i, (_, _, depth) in enumerate(plan):
        end = i + 1
        while end < len(plan) and plan[end][2] > depth:
            end += 1
        sizes.append(end - i)
    return sizes


def _code_size(name: str) -> int:
    """The kernel's Python bytecode length, a stand-in for its compile time (LLVM's work grows
    with the code, and one long kernel can cost more than a chain of short ones); 1 for a name
    that does not resolve."""
    try:
        return len(_dispatcher(name).py_func.__code__.co_code)
    except (ImportError, AttributeError, ValueError):
        return 1


def subtree_weights(plan) -> list[int]:
    """Per plan entry, the :func:`_code_size` of it and of the entries first compiled under it
    (:func:`subtree_sizes`)."""
    own = [_code_size(name) for name, _, _ in plan]
    return [sum(own[i : i + n]) for i, n in enumerate(subtree_sizes(plan))]


def root_order(plan, from_end: bool) -> list[int]:
    """The plan entries called from Python (depth 0) in the order a process takes them. The
    command: plan order (the order it needs them). The child: the largest first (the most
    code compiled under it, :func:`subtree_weights`: a long kernel or a long chain of nested
    compiles, which only one process can compile from the top, so what the command would
    otherwise wait for longest), ties from the plan's end. The small ones the command takes on
    its way."""
    roots = [i for i, e in enumerate(plan) if e[2] == 0]
    if not from_end:
        return roots
    weight = subtree_weights(plan)
    return sorted(roots, key=lambda i: (-weight[i], -i))


def child_main() -> None:
    """The child: compile the plan's kernels that the command calls from Python (depth 0),
    in :func:`root_order` (the largest first), skipping those the command has taken; a kernel they call
    that the command holds is waited for (the call graph has no cycles, so the two never
    wait for each other). Arguments: the claim directory, then ``name|signature|depth``."""
    directory, entries = sys.argv[1], sys.argv[2:]
    parent = os.getppid()
    plan = [(n, s, int(d)) for n, s, d in (e.split("|") for e in entries)]
    claims = _Claims(plan, directory, lambda: os.getppid() == parent, from_end=True)
    while (i := claims.next_untaken_root()) is not None:
        claims.compile_entry(i)
    claims.unhook()
