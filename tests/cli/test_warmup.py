"""``cupel-np warmup`` and the demo's compile-ahead (cupel_np/cli/warmup.py). That the
workloads reach every kernel is checked here on an empty cache (~40 s); what a cold start
costs with them is measured by benchmarks/test_cold_start.py."""

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

from cupel_np.cli import warmup
from cupel_np.cli.app import main

PACKAGE = Path(__file__).resolve().parents[2] / "cupel_np"


def _modules_with_kernels() -> set[str]:
    out = set()
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and any(
                ast.unparse(d) in ("jit", "_jit.jit", "jit_with_gil", "_jit.jit_with_gil") for d in node.decorator_list
            ):
                rel = path.relative_to(PACKAGE.parent).with_suffix("")
                out.add(".".join(rel.parts))
    return out


def test_every_module_with_a_kernel_is_listed():
    """A kernel in a module warmup does not import would never be reported as missed."""
    assert _modules_with_kernels() == set(warmup.KERNEL_MODULES)


def test_all_kernels_names_every_kernel():
    kernels = warmup.all_kernels()
    assert len(kernels) == len(set(kernels))
    assert "cupel_np.engine.stages._place_segments" in kernels
    assert "cupel_np.engine.scorers.kernels.frequency_scores" in kernels


def test_jobs_split_the_workloads():
    names = list(warmup.WORKLOADS)
    for jobs in (1, 2, 3, 10):
        parts = warmup._split(names, jobs)
        assert len(parts) == min(jobs, len(names))
        assert sorted(n for p in parts for n in p) == sorted(names)


def test_warmup_without_jit_is_a_usage_error(monkeypatch, capsys):
    monkeypatch.setenv("NUMBA_DISABLE_JIT", "1")
    assert main(["warmup"]) == 2
    assert "NUMBA_DISABLE_JIT" in capsys.readouterr().err


def test_jobs_must_be_positive(capsys):
    try:
        main(["warmup", "--jobs", "0"])
    except SystemExit as e:
        assert e.code == 2
    assert "--jobs must be a positive integer" in capsys.readouterr().err


def test_compile_sharing_stays_off_when_told_or_cached(monkeypatch):
    from cupel_np.cli import coldstart

    monkeypatch.setenv("CUPEL_NP_COMPILE_AHEAD", "0")
    assert coldstart.share_compile("demo") is None
    monkeypatch.setenv("CUPEL_NP_COMPILE_AHEAD", "1")
    monkeypatch.setattr(coldstart, "kernels_cached", lambda: True)
    assert coldstart.share_compile("demo") is None
    monkeypatch.setattr(coldstart, "kernels_cached", lambda: False)
    assert coldstart.share_compile("no such command") is None
    coldstart.end_sharing(None)


def test_a_child_runs_its_workload_and_names_its_kernels():
    """The child entry point runs in a fresh interpreter and prints JSON of what it reached
    (the analysis workload: a small one)."""
    env = dict(os.environ)
    proc = subprocess.run(
        [sys.executable, "-c", warmup._CHILD, "analysis"], capture_output=True, text=True, env=env, timeout=900
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    import json

    reached = json.loads(proc.stdout.strip().splitlines()[-1])
    if env.get("NUMBA_DISABLE_JIT") != "1":
        assert "cupel_np.analysis.budget_sim._ladder_kernel" in reached
        assert "cupel_np.testing._kernels._top_n_fail_kernel" in reached


def test_the_workloads_reach_every_kernel(monkeypatch, tmp_path):
    """Every kernel is compiled by some workload: a path a change makes unreachable from them
    (a threshold moved, a kernel added) would compile on a user's first run after ``cupel-np
    warmup`` said it was done. An empty kernel cache (~40 s on two cores): from a warm one a
    kernel only other kernels call is never loaded on its own, so it would not count."""
    if os.environ.get("NUMBA_DISABLE_JIT") == "1":
        return  # no kernels to reach (the CI runs this file with the JIT on)
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    r = warmup.warmup(jobs=2)
    assert len(r.kernels) > 100  # every module's kernels were imported
    assert r.missing == [], r.missing


def _result(missing):
    kernels = ["m.a", "m.b", *missing]
    return warmup.WarmupResult(kernels, {"m.a": ["()"], "m.b": ["()"]}, 0.5, 2, list(missing))


def test_a_partial_warmup_exits_1_and_names_what_it_missed(monkeypatch, capsys):
    """A kernel no workload reached compiles on its first use: the command says so on stderr
    and in its exit status (also with --json), unless --allow-missing."""
    monkeypatch.setattr(warmup, "warmup", lambda jobs: _result(["m.c"]))
    assert main(["warmup"]) == 1
    out, err = capsys.readouterr()
    assert "2 of 3 kernels" in out
    assert "warmup incomplete: 1 kernel not reached" in err and "m.c" in err and "--allow-missing" in err
    assert main(["warmup", "--json"]) == 1
    out, err = capsys.readouterr()
    assert json.loads(out)["missing"] == ["m.c"] and "m.c" in err
    assert main(["warmup", "--allow-missing"]) == 0
    assert "m.c" in capsys.readouterr().err


def test_a_complete_warmup_exits_0(monkeypatch, capsys):
    monkeypatch.setattr(warmup, "warmup", lambda jobs: _result([]))
    assert main(["warmup"]) == 0
    out, err = capsys.readouterr()
    assert "2 of 2 kernels" in out and err == ""
