"""A cold run's compile shared with one child process (cupel_np/cli/coldstart.py). That the
plans match what the commands compile, and what sharing saves, is measured by
benchmarks/test_cold_start.py (it compiles everything into an empty cache)."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from numba.core import types as nbtypes

from cupel_np.cli import coldstart
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
    from cupel_np.cli import coldstart
    from cupel_np.engine import sortkeys

    coldstart.PLANS["t"] = (
        ("cupel_np.engine.sortkeys.desc_bits", "float64[1C]", 0),
        ("cupel_np.engine.sortkeys.int_keys", "int64[1C]", 0),
    )
    coldstart.kernels_cached = lambda: False
    sharing = coldstart.share_compile("t")
    if sys.argv[1] == "kill":
        sharing.child.kill()
        sharing.child.wait()
    else:  # the child takes the plan from its end: int_keys first
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


def test_a_dead_child_costs_only_time(tmp_path):
    """The child gone before it compiled anything: the command compiles int_keys itself."""
    out = _run("kill", tmp_path)
    assert out["hits"] == 0
    assert out["keys"][1] == (2**63) - 1


def test_no_child_when_no_core_is_idle_unless_told(monkeypatch):
    """Unset, sharing needs a core the load average leaves free; ``=1`` shares anyway."""
    started = []
    monkeypatch.setattr(coldstart, "_Sharing", lambda plan: started.append(plan) or "sharing")
    monkeypatch.setattr(coldstart, "kernels_cached", lambda: False)
    monkeypatch.setattr(coldstart, "available_cores", lambda: 2)
    monkeypatch.delenv("CUPEL_NP_COMPILE_AHEAD", raising=False)
    monkeypatch.setattr(os, "getloadavg", lambda: (1.9, 1.0, 1.0))
    assert coldstart.share_compile("demo") is None
    monkeypatch.setattr(os, "getloadavg", lambda: (0.4, 1.0, 1.0))
    assert coldstart.share_compile("demo") == "sharing"
    monkeypatch.setattr(os, "getloadavg", lambda: (9.0, 1.0, 1.0))
    monkeypatch.setenv("CUPEL_NP_COMPILE_AHEAD", "1")
    assert coldstart.share_compile("demo") == "sharing"
    monkeypatch.setattr(coldstart, "available_cores", lambda: 1)
    assert coldstart.share_compile("demo") is None
    assert len(started) == 2


def test_the_child_imports_the_kernels_without_the_library():
    """The child imports the plan's kernel modules without their packages' ``__init__`` (no
    pyarrow, no model): every kernel of every plan resolves that way."""
    entries = ["|".join(map(str, e)) for plan in PLANS.values() for e in plan]
    code = coldstart._CHILD_IMPORTS + textwrap.dedent(
        """
        import json
        from cupel_np.cli import coldstart
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
    demo = PLANS["demo"]
    assert demo[coldstart.root_order(demo, from_end=True)[0]][0] == "cupel_np.engine.stages._place_segments"


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
