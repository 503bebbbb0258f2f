"""A full disk while outputs are written (issue 27.7): every writer's temp file is removed even
when one writer fails to close, no output is put in place beside a missing one, pyarrow prints no
"Exception ignored in ParquetWriter.__del__", and the error names the output file (exit 2).

Injected (``ENOSPC`` from a wrapped ``ParquetWriter``) everywhere; on a real 256 KiB tmpfs too
when the tests may mount one (root with ``CAP_SYS_ADMIN``; skipped otherwise)."""

import errno
import gc
import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from cupel_np import ContextBudget, ItemTable, cli, sweep
from cupel_np.data import sample_path
from cupel_np.io import write_sweep

ARGS = ["--preset", "chat", "--preset", "rag", "--max-tokens", "8000", "--target-tokens", "6000"]
ARGS += ["--set-column", "session_id", "--quiet"]
REAL = pq.ParquetWriter
#: the output file an unnamed temp file (``/proc/self/fd/N``, Linux O_TMPFILE) is written for
FD_NAMES: dict[str, str] = {}


@pytest.fixture(params=["unnamed", "named"])
def temp_kind(request, monkeypatch):
    """The injected faults on both kinds of temp file: the unnamed one Linux gives (linked in
    at commit) and the named one used elsewhere. Faults are chosen by output name, so the
    unnamed file's output is recorded when it is made."""
    from cupel_np.io import parquet as pqmod

    real = pqmod._unnamed_beside
    if request.param == "named":
        monkeypatch.setattr(pqmod, "_unnamed_beside", lambda p: None)
    else:

        def recording(p):
            fd = real(p)
            assert fd is not None, "this file system has no O_TMPFILE: the unnamed case cannot run here"
            FD_NAMES[f"/proc/self/fd/{fd}"] = p.name
            return fd

        monkeypatch.setattr(pqmod, "_unnamed_beside", recording)
    return request.param


def faulty_writer(fail_write: dict[str, int], fail_close: set[str]):
    """A ParquetWriter whose ``write_table`` raises ENOSPC at the given call (1-based) for files
    whose name contains a key of ``fail_write``, and whose ``close`` raises ENOSPC every time for
    files named in ``fail_close`` (as pyarrow's does: the writer stays open, and its ``__del__``
    closes it again)."""

    class Faulty(REAL):
        def __init__(self, where, *a, **kw):
            super().__init__(where, *a, **kw)
            self.name = os.path.basename(FD_NAMES.get(str(where), str(where)))
            self.calls = 0

        def write_table(self, table, *a, **kw):
            self.calls += 1
            if any(k in self.name and self.calls >= n for k, n in fail_write.items()):
                raise OSError(errno.ENOSPC, "Error writing bytes to file. Detail: [errno 28] No space left on device")
            return super().write_table(table, *a, **kw)

        def close(self):
            if self.is_open and any(k in self.name for k in fail_close):
                raise OSError(errno.ENOSPC, "Error writing bytes to file. Detail: [errno 28] No space left on device")
            return super().close()

    return Faulty


def _leftovers(out: Path) -> list[str]:
    return sorted(p.name for p in out.rglob("*")) if out.exists() else []


@pytest.fixture
def unraisable(monkeypatch):
    """Exceptions Python could not raise (e.g. from a ``__del__``), collected."""
    seen: list = []
    monkeypatch.setattr(
        sys, "unraisablehook", lambda u: seen.append(f"{u.exc_type.__name__}: {u.exc_value} in {u.object}")
    )
    return seen


@pytest.mark.parametrize(
    "fail_write, fail_close, named",
    [
        ({"items": 3}, {"variants"}, "items.parquet"),  # a write fails, and another writer's close too
        ({}, {"diffs"}, "diffs.parquet"),  # the first writer fails to close: the others are removed too
        ({}, {"items"}, "items.parquet"),  # the last one does: the others were finished, not put in place
    ],
    ids=["write", "first-close", "last-close"],
)
def test_a_full_disk_during_a_streamed_run_leaves_nothing(
    tmp_path, capsys, monkeypatch, unraisable, temp_kind, fail_write, fail_close, named
):
    monkeypatch.setattr(pq, "ParquetWriter", faulty_writer(fail_write, fail_close))
    out = tmp_path / "out"
    code = cli.main(["sensitivity", str(sample_path()), *ARGS, "--out", str(out), "--chunk-rows", "300"])
    err = capsys.readouterr().err
    gc.collect()
    assert code == 2, err
    assert str(out / named) in err and "No space left on device" in err, err
    assert ".tmp" not in err and "Traceback" not in err
    assert _leftovers(out) == []  # no temp file, and no output in place beside a missing one
    assert unraisable == []


def test_a_full_disk_under_overwrite_keeps_the_previous_results(tmp_path, capsys, monkeypatch, unraisable, temp_kind):
    out = tmp_path / "out"
    assert cli.main(["sensitivity", str(sample_path()), *ARGS, "--out", str(out), "--chunk-rows", "300"]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    capsys.readouterr()
    monkeypatch.setattr(pq, "ParquetWriter", faulty_writer({"items": 2}, {"diffs", "variants"}))
    code = cli.main(["sensitivity", str(sample_path()), *ARGS, "--out", str(out), "--chunk-rows", "300", "--overwrite"])
    err = capsys.readouterr().err
    gc.collect()
    assert code == 2 and "items.parquet" in err and "previous results" in err, err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert unraisable == []


def test_a_full_disk_writing_an_in_memory_result_puts_no_output_in_place(tmp_path, monkeypatch, unraisable, temp_kind):
    t = pq.read_table(sample_path()).slice(0, 600)
    res = sweep(ItemTable.from_arrow(t, set_column="session_id"), ContextBudget(8000, 6000), ["chat", "rag"])
    monkeypatch.setattr(pq, "ParquetWriter", faulty_writer({}, {"items"}))
    with pytest.raises(OSError, match=r"No space left on device.*items\.parquet"):
        write_sweep(res, tmp_path / "o")
    gc.collect()
    assert _leftovers(tmp_path / "o") == []  # diffs and variants were finished but not put in place
    assert unraisable == []


def _skip_or_fail(why: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{why}; CI runs as root and must run the real full-disk test")
    pytest.skip(why)


@pytest.fixture
def small_tmpfs(tmp_path):
    """A 256 KiB tmpfs mounted at a fresh directory (unmounted afterwards), or a skip (a
    failure under CI, which runs as root and must run every test)."""
    where = tmp_path / f"full-{uuid.uuid4().hex[:6]}"
    where.mkdir()
    mount, umount = shutil.which("mount"), shutil.which("umount")
    if os.geteuid() != 0 or not mount or not umount:
        _skip_or_fail("mounting a small tmpfs needs root (the injected ENOSPC tests cover the same code)")
    r = subprocess.run([mount, "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(where)], capture_output=True, text=True)
    if r.returncode != 0:
        _skip_or_fail(f"cannot mount a tmpfs here ({r.stderr.strip()}); the injected ENOSPC tests cover the same code")
    try:
        yield where
    finally:
        subprocess.run([umount, str(where)], check=True)


@pytest.mark.parametrize("stream", [["--chunk-rows", "300"], []], ids=["streamed", "in-memory"])
def test_a_really_full_disk(small_tmpfs, stream):
    out = small_tmpfs / "out"
    r = subprocess.run(
        [sys.executable, "-m", "cupel_np", "sensitivity", str(sample_path()), *ARGS, "--out", str(out), *stream],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2, r.stderr
    assert "No space left on device" in r.stderr and str(out) in r.stderr, r.stderr
    assert "Exception ignored" not in r.stderr and "Traceback" not in r.stderr and ".tmp" not in r.stderr, r.stderr
    left = _leftovers(out)
    assert not [n for n in left if n.endswith(".tmp") or n.startswith(".")], left
    # whatever was written before the disk filled is not taken for a finished run: parquet
    # outputs only under a manifest that says the run did not complete
    if {"items.parquet", "diffs.parquet", "variants.parquet"} & set(left):
        assert json.loads((out / "manifest.json").read_text())["complete"] is False
