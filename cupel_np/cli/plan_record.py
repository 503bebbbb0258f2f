"""Record the compile plans of ``cupel_np.cli.coldstart`` (``python -m cupel_np.cli.plan_record``
in a checkout rewrites ``cupel_np/cli/compile_plans.py``; ``benchmarks/test_cold_start.py``
fails when a plan no longer matches what its command compiles)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from numba.core import dispatcher

from cupel_np.cli.app import main
from cupel_np.cli.coldstart import plannable, signature_text
from cupel_np.data import sample_path


def record_plan(argv: list[str]) -> list[tuple[str, str, int]]:
    """Run ``cupel-np ARGV`` in this process (sharing off; the kernel cache must be empty)
    and return its compile plan: every project kernel it compiles, with its signature and
    its depth (0: called from Python, else the number of kernels being compiled around it),
    in the order the compiles start (a kernel before the kernels it calls)."""
    orig = dispatcher.Dispatcher.compile
    plan: list[tuple[str, str, int]] = []
    seen: set[tuple[str, str]] = set()
    local = threading.local()

    def compile(self, sig):
        f = self.py_func
        depth = getattr(local, "depth", 0)
        if f.__module__.startswith("cupel_np.") and plannable(sig):
            entry = (f"{f.__module__}.{f.__qualname__}", signature_text(sig))
            if entry not in seen:
                seen.add(entry)
                plan.append((*entry, depth))
        local.depth = depth + 1
        try:
            return orig(self, sig)
        finally:
            local.depth = depth

    os.environ["CUPEL_NP_COMPILE_AHEAD"] = "0"
    dispatcher.Dispatcher.compile = compile
    try:
        main(argv)
    finally:
        dispatcher.Dispatcher.compile = orig
    return plan


#: the runs :data:`cupel_np.cli.compile_plans.PLANS` is recorded from (the check file is the
#: repository's ``data/examples/checks.toml``: the plans are recorded in a checkout)
PLAN_RUNS = {
    "demo": ["demo", "--quiet", "--out", "{tmp}/demo"],
    "check": ["check", "{sample}", "--checks", "{root}/data/examples/checks.toml"],
}


def plan_argv(command: str, tmp: str) -> list[str]:
    """The arguments of ``command``'s recorded run, with its paths filled in."""
    root = Path(__file__).resolve().parents[2]
    return [a.format(tmp=tmp, sample=sample_path(), root=root) for a in PLAN_RUNS[command]]


def recorded_plan(command: str) -> list[tuple[str, str, int]]:
    """``command``'s compile plan as recorded now, in a fresh interpreter (see :func:`record_plan`)."""
    with tempfile.TemporaryDirectory() as tmp:
        code = (
            "import io, json, sys; from contextlib import redirect_stdout; "
            "from cupel_np.cli.plan_record import record_plan, plan_argv\n"
            "with redirect_stdout(io.StringIO()): plan = record_plan(plan_argv(sys.argv[1], sys.argv[2]))\n"
            "print(json.dumps(plan))"
        )
        env = dict(os.environ, NUMBA_CACHE_DIR=os.path.join(tmp, "cache"))  # empty: every compile is seen
        env.pop("NUMBA_DISABLE_JIT", None)
        cmd = [sys.executable, "-c", code, command, tmp]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env)
    return [(n, s, d) for n, s, d in json.loads(proc.stdout.strip().splitlines()[-1])]


def _write_plans() -> None:
    lines = [
        '"""Compile plans for a cold run (see ``cupel_np.cli.coldstart``): per command, the kernels it',
        "compiles (name, signature, depth: 0 when called from Python), in the order the compiles start. Written by",
        '``python -m cupel_np.cli.plan_record``; do not edit by hand."""',
        "",
        "PLANS: dict[str, tuple[tuple[str, str, int], ...]] = {",
    ]
    for command in PLAN_RUNS:
        lines.append(f"    {command!r}: (")
        lines += [f"        ({n!r}, {s!r}, {d})," for n, s, d in recorded_plan(command)]
        lines.append("    ),")
    lines.append("}")
    Path(__file__).with_name("compile_plans.py").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    _write_plans()
