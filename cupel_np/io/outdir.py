"""Output directories: the names cupel_np's writers write, and the guard that keeps two runs
apart.

Every writer (``write_sweep``, ``sweep_parquet``, ``dask.sweep``, ``write_html_report``, the
budget outputs, the CLI's ``--out``) claims its directory first: a directory holding outputs
of another run is refused unless ``overwrite``, which then removes exactly those outputs (the
names in ``OUTPUT_NAMES`` and our temp files) and nothing else. A staging area a killed
``--overwrite`` run left (and nothing else of ours) is not another run's outputs: it is removed. A run is recognised by the
``run_id`` in ``manifest.json``, which every writer records, so the page written after the
Parquet files of the same result is not "another run".
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import re
import uuid
import weakref
from pathlib import Path

from cupel_np._files import atomic_write_bytes, dumps_json
from cupel_np._fs import RemotePath, as_path, rmtree
from cupel_np.errors import CorruptManifestError, InvalidConfigError, OutputExistsError

MANIFEST = "manifest.json"
#: an in-process or streamed sweep: one file per output
SWEEP_FILES = ("items.parquet", "diffs.parquet", "variants.parquet")
#: a Dask sweep: one directory of part files per output
PARTS_DIRS = ("items", "diffs", "variants")
#: ``budget_curves`` outputs
BUDGET_FILES = ("curves.parquet", "rows.parquet")
#: outcome metrics of a sweep run with a label column (``--label-column``)
OUTCOME_FILES = ("outcomes.parquet",)
#: the same, of a Dask sweep: one part file per partition
OUTCOME_PARTS = ("outcomes",)
#: the pages and their charts (also written beside the page)
PAGE_FILES = ("report.html", "heatmap.svg", "tokens.svg", "kinds.svg", "utilization.svg", "included.svg")
#: the PNG charts earlier versions' pages wrote (still outputs: an overwrite removes them)
LEGACY_PAGE_FILES = ("heatmap.png", "tokens.png", "kinds.png", "utilization.png", "included.png", "pareto.png")
#: a policy search (``cupel-np tune``), beside its ``best-N.toml`` policy files
TUNE_FILES = ("leaderboard.parquet", "pareto.parquet", "comparison.parquet", "pareto.svg", "summary.json")
#: every name a cupel_np writer puts in an output directory (plus temp files ``.NAME.*.tmp``
#: and a search's ``best-N.toml``)
OUTPUT_NAMES = (
    MANIFEST,
    *SWEEP_FILES,
    *OUTCOME_FILES,
    *OUTCOME_PARTS,
    *PARTS_DIRS,
    *BUDGET_FILES,
    *PAGE_FILES,
    *LEGACY_PAGE_FILES,
    *TUNE_FILES,
)
_BEST_POLICY = re.compile(r"best-[0-9]+\.toml")
#: the directory inside ``--out`` a CLI ``--overwrite`` run writes into before the swap
#: (``cli.staging``); a killed run's is removed by the next run into ``--out``
#: (``remove_abandoned_staging``) or the next ``--overwrite``
STAGING_PREFIX = ".cupel-staging-"

#: the columns the sweep outputs write beside the set-key column
OUTPUT_COLUMNS = (
    "content",
    "input_row",
    "kind",
    "source",
    "tokens",
    "variant",
    "included_count",
    "tokens_used",
    "target_tokens",
    "target_utilization",
    "budget_utilization",
    "kind_diversity",
    "timestamp_coverage",
    "tokens_over_budget",
    "swing_count",
    "swing_included",
    "error",
)

#: manifest ``kind`` values
KIND_SWEEP, KIND_STREAMED, KIND_PARTS, KIND_BUDGET = "sweep", "sweep-streamed", "sweep-parts", "budget"
KIND_PAGE, KIND_TUNE = "page", "tune"
_WHAT = {
    KIND_TUNE: "a policy search",
    KIND_PAGE: "a report page",
    KIND_SWEEP: "a sweep",
    KIND_STREAMED: "a streamed sweep",
    KIND_PARTS: "a sweep written in parts (Dask)",
    KIND_BUDGET: "a budget simulation",
}

#: id(result) -> run id, dropped when the result is collected (results need not be hashable)
_RUN_IDS: dict[int, str] = {}


def new_run_id() -> str:
    """A fresh run id (for runs that are not one Python object, e.g. a streamed sweep)."""
    return uuid.uuid4().hex


def run_id(owner) -> str:
    """The run id of a result object: the same id for every writer handed the same object."""
    rid = _RUN_IDS.get(id(owner))
    if rid is None:
        rid = _RUN_IDS[id(owner)] = new_run_id()
        weakref.finalize(owner, _RUN_IDS.pop, id(owner), None)
    return rid


def check_set_column(set_column, labels=()) -> None:
    """A set-key column whose name the sweep outputs also use (``content``, ``variant``, a
    variant label...) would write two columns of one name: refused before any work."""
    if set_column is None:
        return
    clash = set_column in OUTPUT_COLUMNS or set_column in labels
    if clash or any(set_column.startswith(f"{l}.") for l in labels):
        raise InvalidConfigError(
            f"set column {set_column!r} has the name of a column the sweep outputs write "
            f"({', '.join(OUTPUT_COLUMNS)} and the variant labels); rename the column in the input"
        )


def check_out_path(out, what: str = "output directory") -> Path | RemotePath:
    """``out`` as a Path (a ``RemotePath`` for a URL); an error if it exists and is not a
    directory (checked before any work)."""
    p = as_path(out)
    if p.exists() and not p.is_dir():
        raise InvalidConfigError(f"{what} {p} exists and is not a directory; choose a directory")
    return p


def _ours(p: Path | RemotePath) -> bool:
    if p.name in OUTPUT_NAMES or _BEST_POLICY.fullmatch(p.name) or p.name.startswith(STAGING_PREFIX):
        return True
    return p.name.endswith(".tmp") and p.name.startswith(".") and any(p.name[1:].startswith(n) for n in OUTPUT_NAMES)


def existing_outputs(out) -> list[Path | RemotePath]:
    """The cupel_np outputs (and leftover temp files) in ``out``, sorted by name."""
    p = as_path(out)
    if not p.is_dir():
        return []
    return sorted((f for f in p.iterdir() if _ours(f)), key=lambda f: f.name)


def read_manifest(out) -> dict | None:
    """``out/manifest.json`` as a dict, or None when there is none (or it is not ours)."""
    f = as_path(out) / MANIFEST
    if not f.is_file():
        return None
    try:
        m = json.loads(f.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # a StorageError is a ValueError too
        return None
    return m if isinstance(m, dict) else None


def load_manifest(out) -> dict | None:
    """``out/manifest.json`` checked: None when there is none; a ``CorruptManifestError``
    naming the file and what is wrong when it is not valid JSON, not an object, or its
    ``variants`` / ``set_column`` / ``outputs`` do not have the shapes cupel_np writes."""
    f = as_path(out) / MANIFEST
    if not f.is_file():
        return None

    def bad(what: str) -> CorruptManifestError:
        return CorruptManifestError(
            f"{f} is corrupt ({what}); rerun the command that wrote {out} (with --overwrite) to rewrite it"
        )

    try:
        m = json.loads(f.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise bad("not UTF-8 text") from None
    except ValueError as e:
        raise bad(f"malformed JSON: {e}") from None
    if not isinstance(m, dict):
        raise bad(f"a JSON {type(m).__name__}, not an object")
    v = m.get("variants")
    if v is not None:
        if not isinstance(v, list):
            raise bad("'variants' is not a list")
        for i, entry in enumerate(v):
            if not isinstance(entry, dict) or not isinstance(entry.get("label"), str):
                raise bad(f"variants[{i}] has no text 'label'")
    if not isinstance(m.get("set_column"), (str, type(None))):
        raise bad("'set_column' is not text or null")
    o = m.get("outputs")
    if o is not None and not (isinstance(o, list) and all(isinstance(x, str) for x in o)):
        raise bad("'outputs' is not a list of file names")
    for k in ("kind", "run_id"):
        if not isinstance(m.get(k), (str, type(None))):
            raise bad(f"{k!r} is not text")
    return m


def describe_outputs(out) -> str:
    """What the outputs in ``out`` are, in words (for error messages)."""
    m = read_manifest(out) or {}
    names = [f.name + ("/" if f.is_dir() else "") for f in existing_outputs(out)]
    shown = ", ".join(names[:6]) + (f", +{len(names) - 6} more" if len(names) > 6 else "")
    return f"{_WHAT.get(str(m.get('kind')), 'cupel-np outputs')} ({shown})"


def remove_outputs(out) -> list[str]:
    """Remove every cupel_np output in ``out`` (never another file); return the names removed."""
    gone = []
    for f in existing_outputs(out):
        rmtree(f) if f.is_dir() and not f.is_symlink() else f.unlink()
        gone.append(f.name)
    return gone


def claim_out_dir(out, *, overwrite: bool = False, run: str | None = None, create: bool = True) -> Path | RemotePath:
    """Make ``out`` ready for a run's outputs: create it if needed; if it holds outputs of
    another run (a manifest with another ``run_id``, or outputs without one), refuse unless
    ``overwrite``, which removes them. Outputs of the same ``run`` are left alone; staging
    areas of a killed ``--overwrite`` run, when nothing else of ours is there, are removed
    (``remove_abandoned_staging``). With
    ``create=False`` a missing directory is not created (a check before any work)."""
    p = check_out_path(out)
    if existing_outputs(p):
        m = read_manifest(p)
        same = run is not None and m is not None and m.get("run_id") == run
        if not same:
            if overwrite:
                remove_outputs(p)
            elif _only_staging(p):  # a killed --overwrite run's leftovers, no results: removed
                remove_abandoned_staging(p)
            else:
                if interrupted_note(p):
                    raise OutputExistsError(interrupted_note(p))
                raise OutputExistsError(
                    f"{p} already holds {describe_outputs(p)} from another run; choose another directory, "
                    "or pass --overwrite (Python: overwrite=True) to replace them"
                )
    if create:
        try:
            p.mkdir(parents=True, exist_ok=True)
        except OSError as e:  # a path that cannot be a directory here (read-only, /proc, a file above it)
            raise InvalidConfigError(f"cannot create the output directory {p}: {e.strerror or e}") from None
    return p


def _only_staging(p: Path | RemotePath) -> bool:
    found = existing_outputs(p)
    return bool(found) and all(f.name.startswith(STAGING_PREFIX) for f in found)


def remove_abandoned_staging(out) -> list[str]:
    """Remove the staging areas (``.cupel-staging-*``) an ``--overwrite`` run left in ``out``
    when it was killed before its swap: they hold no result anyone has seen (the results they
    were to replace are whatever ``out`` still holds), so a new run into ``out`` removes them
    rather than refusing ``out``. A staging area whose manifest says its run finished is a swap
    under way or cut short: an ``OutputExistsError`` names it and says what to do. Returns the
    names removed."""
    p = as_path(out)
    stages = [f for f in existing_outputs(p) if f.name.startswith(STAGING_PREFIX)]
    for f in stages:
        m = read_manifest(f)
        if m is not None and m.get("complete") is True:
            raise OutputExistsError(
                f"{p} holds {f.name}/, the finished outputs of an --overwrite run that was moving them into "
                f"{p} and did not end (killed during the move, or still moving them now); if no cupel-np run is "
                f"writing to {p}, delete {f} (or rerun with --overwrite, which removes it)"
            )
    for f in stages:
        rmtree(f) if f.is_dir() and not f.is_symlink() else f.unlink()
    return [f.name for f in stages]


#: True while a CLI command runs: the manifests it writes say ``"complete": false`` until
#: the command has finished (``mark_complete``), so an interrupted run never looks complete
_IN_PROGRESS: contextvars.ContextVar[bool] = contextvars.ContextVar("cupel_np_run_in_progress", default=False)


@contextlib.contextmanager
def run_in_progress():
    """While inside, every manifest written records ``"complete": false``."""
    tok = _IN_PROGRESS.set(True)
    try:
        yield
    finally:
        _IN_PROGRESS.reset(tok)


def in_progress() -> bool:
    """Whether a CLI command is running (its own outputs are not finished yet)."""
    return _IN_PROGRESS.get()


def mark_complete(out) -> None:
    """Record in ``out/manifest.json`` (if any) that the run that wrote it finished."""
    p = as_path(out)
    m = read_manifest(p)
    if m is not None and m.get("complete") is False:
        m["complete"] = True
        atomic_write_bytes(p / MANIFEST, dumps_json(m, indent=2).encode())


def interrupted_note(out) -> str:
    """Words for a directory whose manifest says its run did not finish ('' otherwise)."""
    m = read_manifest(out)
    if m is None or m.get("complete") is not False:
        return ""
    return (
        f"{out} holds an interrupted run (its manifest says it did not finish: killed or stopped "
        "before the end, so its outputs may be partial); rerun the command with --overwrite to replace it"
    )


def write_manifest(out, kind: str, run: str, outputs: list[str], **fields) -> Path | RemotePath:
    """Record (or extend, for the same run) ``out/manifest.json``: the run's kind, id and the
    output names written so far, plus ``fields`` (variants, set_column, summary...)."""
    p = as_path(out)
    m = read_manifest(p) or {}
    if m.get("run_id") != run:
        m = {}
    prev = [o for o in m.get("outputs", []) if o not in outputs] if isinstance(m.get("outputs"), list) else []
    if m.get("kind") in (KIND_SWEEP, KIND_STREAMED, KIND_PARTS, KIND_BUDGET) and kind == "page":
        kind = m["kind"]  # a page beside its run's data keeps the run's kind
    m.update(fields)
    m.update({"kind": kind, "run_id": run, "outputs": prev + list(outputs)})
    m["complete"] = not _IN_PROGRESS.get()
    m.setdefault("format", "cupel_np.outputs/1")
    atomic_write_bytes(p / MANIFEST, dumps_json(m, indent=2).encode())
    return p / MANIFEST
