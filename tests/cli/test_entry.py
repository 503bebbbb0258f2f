"""``cupel_np/cli/entry.py``: the ``cupel-np`` process (``run``) ends without the interpreter's
teardown, yet with its exit status, all its output and the exit handlers run."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _cupel_np(*args, cwd):
    env = dict(os.environ, CUPEL_NP_COMPILE_AHEAD="0")
    return subprocess.run([sys.executable, "-m", "cupel_np", *args], cwd=cwd, capture_output=True, env=env, timeout=300)


def test_the_process_keeps_its_output_status_and_exit_handlers(tmp_path):
    """Piped stdout arrives whole; the status is the command's; an exit handler a plugin
    registered runs; a usage error still exits 2 with its message."""
    plugin = tmp_path / "plugin.py"
    flag = tmp_path / "flag"
    plugin.write_text(
        textwrap.dedent(
            f"""
            import atexit, pathlib
            atexit.register(lambda: pathlib.Path({str(flag)!r}).write_text("ran"))
            """
        )
    )
    proc = _cupel_np("presets", "--json", "--plugin", str(plugin), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    assert "chat" in json.dumps(doc) and len(proc.stdout) > 1000
    assert flag.read_text() == "ran"
    bad = _cupel_np("demo", "--no-such-option", cwd=tmp_path)
    assert bad.returncode == 2 and b"--no-such-option" in bad.stderr


def test_the_console_script_is_run():
    text = (ROOT / "pyproject.toml").read_text()
    assert 'cupel-np = "cupel_np.cli.entry:run"' in text
    assert (ROOT / "cupel_np" / "__main__.py").read_text().strip().endswith("run()")


def test_threads_that_are_not_daemons_finish_before_the_exit(tmp_path):
    """A plugin's worker thread (not a daemon) and a thread pool's pending task finish before the
    process ends, as at the interpreter's own exit."""
    plugin = tmp_path / "plugin.py"
    done, pooled = tmp_path / "done", tmp_path / "pooled"
    plugin.write_text(
        textwrap.dedent(
            f"""
            import pathlib, threading, time
            from concurrent.futures import ThreadPoolExecutor

            def late(path):
                time.sleep(0.5)
                pathlib.Path(path).write_text("done")

            threading.Thread(target=late, args=({str(done)!r},)).start()
            ThreadPoolExecutor(1).submit(late, {str(pooled)!r})
            """
        )
    )
    proc = _cupel_np("presets", "--plugin", str(plugin), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert done.read_text() == "done" and pooled.read_text() == "done"
