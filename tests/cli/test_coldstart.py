"""A cold run's compile shared with one child process (cupel_np/cli/coldstart.py). That the
plans match what the commands compile, and what sharing saves, is measured by
benchmarks/test_cold_start.py (it compiles everything into an empty cache)."""

import os
import subprocess
import sys
import tempfile
import textwrap

import numpy as np
import pytest
from numba.core import types as nbtypes

from cupel_np.cli import coldstart, early
from cupel_np.cli.compile_plans import PLANS


def test_plan_text_round_trips():
    ro = nbtypes.Array(nbtypes.float64, 1, "C", readonly=True)
    assert coldstart.type_text(ro) == "float64[1Cr]"
    assert coldstart.type_text(nbtypes.Array(nbtypes.int8, 2, "A")) == "int8[2A]"
    assert coldstart.type_text(nbtypes.boolean) == "bool"
    assert coldstart.text_type("float64[1Cr]") == ro
    for plan in PLANS.values():
        for _, sig, _ in plan:
            assert coldstart.signature_text(tuple(coldstart.text_type(t) for t in sig.split())) == sig
    with pytest.raises(ValueError, match="no plan text"):
        coldstart.type_text(nbtypes.UniTuple(nbtypes.int64, 2))


def test_plans_name_existing_kernels_in_call_order():
    for command, plan in PLANS.items():
        assert plan and coldstart._resolves(plan), command
        assert plan[0][2] == 0
        for (_, _, before), (_, _, depth) in zip(plan, plan[1:], strict=False):
            assert depth <= before + 1  # a kernel's callees follow it
        assert len({(n, s) for n, s, _ in plan}) == len(plan)


def test_a_stale_plan_shares_nothing(monkeypatch):
    monkeypatch.setenv("CUPEL_NP_COMPILE_AHEAD", "1")
    monkeypatch.setattr(coldstart, "kernels_cached", lambda: False)
    monkeypatch.setitem(coldstart.PLANS, "stale", (("cupel_np.engine.sortkeys.no_such_kernel", "int64[1C]", 0),))
    assert coldstart.share_compile("stale") is None


SCRIPT = textwrap.dedent(
    """
    import json, os, sys, time
    import numpy as np
    from cupel_np.cli import coldstart, early
    from cupel_np.engine import sortkeys

    # the child takes the root with the most code first (``root_order``): int_keys (224 bytes
    # of bytecode against score_cmp's 86)
    coldstart.PLANS["t"] = (
        ("cupel_np.engine.sortkeys.score_cmp", "float64 float64", 0),
        ("cupel_np.engine.sortkeys.int_keys", "int64[1C]", 0),
    )
    assert coldstart.root_order(coldstart.PLANS["t"], from_end=True) == [1, 0]
    coldstart.kernels_cached = lambda: False
    sharing = coldstart.share_compile("t")
    if sys.argv[1] == "kill":
        sharing.child.kill()
        sharing.child.wait()
    elif sys.argv[1] == "ahead":  # score_cmp compiled here before any use; int_keys by whoever took it
        coldstart.compile_ahead(sharing)
        assert sortkeys.score_cmp.signatures and os.path.exists(os.path.join(sharing.dir, "done-0"))
    else:  # the child takes its largest root first: int_keys
        t_end = time.monotonic() + 300
        while not os.path.exists(os.path.join(sharing.dir, "done-1")) and time.monotonic() < t_end:
            time.sleep(0.01)
    x = np.array([3, -1, 2**62, -(2**63)], dtype=np.int64)
    keys = sortkeys.int_keys(x)
    hits = sum(sortkeys.int_keys.stats.cache_hits.values())
    coldstart.end_sharing(sharing)
    print(json.dumps({"keys": keys.tolist(), "hits": hits, "left": os.path.exists(sharing.dir)}))
    """
)


def _run(mode, cache):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache), CUPEL_NP_COMPILE_AHEAD="1")
    env.pop("NUMBA_DISABLE_JIT", None)
    proc = subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    import json

    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_command_loads_what_the_child_compiled(tmp_path):
    """int_keys is compiled by the child only: the command loads it from the cache."""
    out = _run("wait", tmp_path)
    expected = (np.array([3, -1, 2**62, -(2**63)], dtype=np.int64).view(np.uint64) ^ np.uint64(1 << 63)).tolist()
    assert out["keys"] == expected
    assert out["hits"] == 1
    assert not out["left"]  # the claim directory is removed


def test_compiling_ahead_takes_what_the_child_has_not(tmp_path):
    out = _run("ahead", tmp_path)
    assert out["keys"][1] == (2**63) - 1 and not out["left"]


def test_a_dead_child_costs_only_time(tmp_path):
    """The child gone before it compiled anything: the command compiles int_keys itself."""
    out = _run("kill", tmp_path)
    assert out["hits"] == 0
    assert out["keys"][1] == (2**63) - 1


def test_no_child_when_no_core_is_idle_unless_told(monkeypatch):
    """Unset, sharing needs a core the load average leaves free; ``=1`` shares anyway."""
    started = []
    monkeypatch.setattr(early, "spawn", lambda command: started.append(command) or "child")
    monkeypatch.setattr(coldstart, "_Sharing", lambda plan, child: (plan, child))
    monkeypatch.setattr(coldstart, "kernels_cached", lambda: False)
    monkeypatch.setattr(early, "available_cores", lambda: 2)
    monkeypatch.delenv("CUPEL_NP_COMPILE_AHEAD", raising=False)
    monkeypatch.setattr(os, "getloadavg", lambda: (1.9, 1.0, 1.0))
    assert coldstart.share_compile("demo") is None
    monkeypatch.setattr(os, "getloadavg", lambda: (0.4, 1.0, 1.0))
    assert coldstart.share_compile("demo") == (PLANS["demo"], "child")
    monkeypatch.setattr(os, "getloadavg", lambda: (9.0, 1.0, 1.0))
    monkeypatch.setenv("CUPEL_NP_COMPILE_AHEAD", "1")
    assert coldstart.share_compile("demo") == (PLANS["demo"], "child")
    monkeypatch.setattr(early, "available_cores", lambda: 1)
    assert coldstart.share_compile("demo") is None
    assert started == ["demo", "demo"]


def test_the_child_imports_the_kernels_without_the_library():
    """The child imports the plan's kernel modules without their packages' ``__init__`` (no
    pyarrow, no model): every kernel of every plan resolves that way."""
    entries = ["|".join(map(str, e)) for plan in PLANS.values() for e in plan]
    code = early.CHILD_IMPORTS + textwrap.dedent(
        """
        import json
        from cupel_np.cli import coldstart, early
        plan = [(n, s, int(d)) for n, s, d in (e.split("|") for e in sys.argv[2:])]
        print(json.dumps({"resolves": coldstart._resolves(plan),
                          "heavy": sorted(m for m in ("pyarrow", "pandas", "cupel_np.model.items") if m in sys.modules)}))
        """
    )
    env = dict(os.environ)
    env.pop("NUMBA_DISABLE_JIT", None)
    proc = subprocess.run([sys.executable, "-c", code, "unused", *entries], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    import json

    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out == {"resolves": True, "heavy": []}


def test_root_order():
    """The command takes the kernels it calls from Python in plan order; the child the
    largest first (ties: from the end); each exactly once."""
    plan = (("a", "", 0), ("b", "", 0), ("b1", "", 1), ("c", "", 0), ("d", "", 0), ("d1", "", 1), ("d2", "", 2))
    plan += (("e", "", 0),)
    assert coldstart.root_order(plan, from_end=False) == [0, 1, 3, 4, 7]
    assert coldstart.root_order(plan, from_end=True) == [4, 1, 7, 3, 0]
    for plan in PLANS.values():
        roots = [i for i, e in enumerate(plan) if e[2] == 0]
        assert sorted(coldstart.root_order(plan, from_end=True)) == roots
    # by code: the place kernel alone (no placer under it in the demo) outweighs the knapsack chain
    demo = PLANS["demo"]
    assert demo[coldstart.root_order(demo, from_end=True)[0]][0] == "cupel_np.engine.stages._place_segments"
    weights = coldstart.subtree_weights(demo)
    chain = [i for i, e in enumerate(demo) if e[0].endswith("._slice_knapsack")][0]
    assert weights[chain] == sum(coldstart._code_size(e[0]) for e in demo[chain : chain + 6]) > 6


def test_a_picked_up_compile_never_waits(tmp_path, monkeypatch):
    """A root compiled while waiting for the other process compiles a kernel that process
    holds itself instead of waiting (two such waits could wait for each other)."""
    plan = (("cupel_np.engine.sortkeys.int_keys", "int64[1C]", 0),)
    claims = coldstart._Claims(plan, str(tmp_path), lambda: True)
    try:
        assert coldstart._claim(str(tmp_path), 0)  # the other process holds it

        def no_wait(i):
            raise AssertionError("a picked-up compile waited")

        monkeypatch.setattr(claims, "help_and_wait", no_wait)
        compile_ = coldstart._dispatcher(plan[0][0]).compile
        sig = (coldstart.text_type("int64[1C]"),)
        with pytest.raises(AssertionError, match="waited"):
            compile_(sig)  # outside a picked-up compile it would wait
        claims.picking = 1
        compile_(sig)
        assert any(s == sig for s in coldstart._dispatcher(plan[0][0]).signatures)
    finally:
        claims.unhook()


def test_a_stale_entry_is_taken_once(tmp_path):
    """An entry whose types no longer parse is marked taken: neither process picks it again."""
    plan = (("cupel_np.engine.sortkeys.int_keys", "no_such_type[1C]", 0),)
    claims = coldstart._Claims(plan, str(tmp_path), lambda: True)
    try:
        assert claims.next_untaken_root() == 0
        claims.compile_entry(0)
        assert claims.next_untaken_root() is None
    finally:
        claims.unhook()


def test_the_early_cache_guess_finds_numbas_index_file(tmp_path):
    """``early`` works out, without Numba, the directory and name of the index file Numba
    writes for the probe kernel (``coldstart.kernels_cached`` checks that file): with and
    without NUMBA_CACHE_DIR."""
    code = textwrap.dedent(
        """
        import fnmatch, json, os
        from cupel_np.cli import early
        from cupel_np.engine import batch_kernels
        index = batch_kernels.variant_scores._cache._cache_file._index_path
        print(json.dumps([os.path.dirname(index) == early.cache_index_dir(),
                          fnmatch.fnmatchcase(os.path.basename(index), early.cache_index_pattern())]))
        """
    )
    for cache in (str(tmp_path), None):
        env = dict(os.environ)
        env.pop("NUMBA_DISABLE_JIT", None)
        env.pop("NUMBA_CACHE_DIR", None)
        if cache:
            env["NUMBA_CACHE_DIR"] = cache
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert proc.stdout.strip().splitlines()[-1] == "[true, true]", cache


def test_looks_cached_reads_the_index_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    assert not early.looks_cached()
    d = early.cache_index_dir()
    os.makedirs(d)
    name = early.cache_index_pattern().replace("*", "123")
    open(os.path.join(d, name), "w").close()
    assert early.looks_cached()


def test_the_command_word():
    assert early.command_of(["demo", "--out", "x"]) == "demo"
    assert early.command_of(["check", "items.parquet", "--checks", "c.toml"]) == "check"
    assert early.command_of(["check", "items.parquet", "--dask", "local"]) is None  # compiles in the workers
    assert early.command_of(["demo", "--help"]) is None
    assert early.command_of([]) is None
    assert not early.wanted("sweep")  # no plan


class _FakeChild:
    def __init__(self):
        self.killed = False

    def poll(self):
        return 0 if self.killed else None

    def kill(self):
        self.killed = True

    def wait(self):
        return 0


def _fake_spawn(started):
    def spawn(command):
        s = early.Started(command, tempfile.mkdtemp(prefix="cupel-np-test-"), _FakeChild())
        started.append(s)
        return s

    return spawn


def test_an_early_child_is_taken_by_its_command_or_stopped(monkeypatch, tmp_path):
    """``start`` starts a child for a cold demo; ``share_compile`` takes it (stopping it when
    Numba says the kernels are cached after all); a child of another command, or one nobody
    took, is stopped."""
    started: list = []
    monkeypatch.setattr(early, "spawn", _fake_spawn(started))
    monkeypatch.setenv("CUPEL_NP_COMPILE_AHEAD", "1")
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))  # empty: looks cold
    monkeypatch.setattr(coldstart, "kernels_cached", lambda: False)

    early.start(["demo"])
    sharing = coldstart.share_compile("demo")
    assert sharing is not None and sharing.started is started[0] and sharing.dir == started[0].dir
    assert early.take("demo") is None  # taken once
    coldstart.end_sharing(sharing)
    assert started[0].child.killed and not os.path.exists(started[0].dir)

    early.start(["demo"])
    monkeypatch.setattr(coldstart, "kernels_cached", lambda: True)  # the guess was wrong
    assert coldstart.share_compile("demo") is None
    assert started[1].child.killed and not os.path.exists(started[1].dir)

    early.start(["demo"])
    assert early.take("check") is None and started[2].child.killed  # another command's child
    early.start(["check", "x", "--checks", "y"])
    early.discard()
    assert started[3].child.killed and not os.path.exists(started[3].dir)

    monkeypatch.setenv("CUPEL_NP_COMPILE_AHEAD", "0")
    early.start(["demo"])
    assert len(started) == 4


def test_the_entry_point_starts_the_child_before_the_library(tmp_path):
    """``cupel_np.cli.main(["demo", ...])`` starts the compile child before it imports NumPy,
    Numba, pyarrow or the library; a command that fails before its work stops it."""
    code = textwrap.dedent(
        """
        import json, subprocess, sys
        from cupel_np.cli import early
        seen = {}
        orig = early.spawn
        def spawn(command):
            seen["loaded"] = sorted(m for m in ("numpy", "numba", "pyarrow", "cupel_np.model", "cupel_np.cli.app")
                                    if m in sys.modules)
            seen["started"] = s = early.Started(command, early.tempfile.mkdtemp(),
                                                subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]))
            return s
        early.spawn = spawn
        import cupel_np.cli
        rc = cupel_np.cli.main(["demo", "--quiet", "--out", sys.argv[1]])
        print(json.dumps({"rc": rc, "loaded": seen["loaded"], "stopped": seen["started"].child.poll() is not None}))
        """
    )
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")  # --out is a file: the demo stops before its work
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"), CUPEL_NP_COMPILE_AHEAD="1")
    env.pop("NUMBA_DISABLE_JIT", None)
    proc = subprocess.run(
        [sys.executable, "-c", code, str(not_a_dir)], capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    import json

    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out == {"rc": 2, "loaded": [], "stopped": True}


def test_a_waiting_process_picks_up_only_smaller_roots(tmp_path):
    """Waiting for a short entry the other process holds, a process does not start a longer
    root (it would hold its own chain back by all of it); waiting for a long one, it does."""
    plan = (
        ("cupel_np.engine.sortkeys.desc_bits", "a", 0),
        ("cupel_np.engine.sortkeys.desc_bits", "a1", 1),
        ("cupel_np.engine.sortkeys.desc_bits", "a2", 1),
        ("cupel_np.engine.sortkeys.int_keys", "b", 0),
        ("cupel_np.engine.sortkeys.int_keys", "b1", 1),
        ("cupel_np.engine.sortkeys.stable_argsort", "c", 0),
    )
    assert coldstart.subtree_sizes(plan) == [3, 1, 1, 2, 1, 1]
    claims = coldstart._Claims(plan, str(tmp_path), lambda: True, from_end=True)
    try:
        assert claims.roots == [0, 3, 5]
        assert claims.next_untaken_root() == 0
        assert claims.next_untaken_root(smaller_than=1) is None  # waiting for a2: nothing is smaller
        assert claims.next_untaken_root(smaller_than=2) == 5
        assert claims.next_untaken_root(smaller_than=3) == 3
        assert coldstart._claim(str(tmp_path), 3)
        assert claims.next_untaken_root(smaller_than=3) == 5
    finally:
        claims.unhook()


def test_the_command_compiles_ahead_the_childs_chain_from_its_end_then_the_largest_roots(tmp_path):
    plan = (("a", "", 0), ("b", "", 0), ("b1", "", 1), ("c", "", 0), ("d", "", 0), ("d1", "", 1), ("d2", "", 2))
    plan += (("d3", "", 1), ("e", "", 0), ("e1", "", 1))
    claims = coldstart._Claims.__new__(coldstart._Claims)  # the order only: no kernels to hook
    claims.plan, claims.size = plan, coldstart.subtree_sizes(plan)
    assert coldstart.root_order(plan, from_end=True)[0] == 4  # the child starts with d
    assert claims.ahead_order() == [7, 6, 5, 1, 8, 0, 3, 4]
    for command, plan in PLANS.items():  # every entry once
        claims.plan, claims.size = plan, coldstart.subtree_sizes(plan)
        order = claims.ahead_order()
        first = coldstart.root_order(plan, from_end=True)[0]
        roots = {i for i, e in enumerate(plan) if e[2] == 0}
        assert sorted(order) == sorted(roots | set(range(first + 1, first + claims.size[first]))), command
