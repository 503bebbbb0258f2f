"""A written sweep directory, in-process (``items.parquet``, ...) or Dask (``items/part-*.parquet``,
... and ``manifest.json``): its outputs located and checked (``check_sweep_dir``), and the
per-variant aggregates the pages need, streamed from the ``variants`` output in batches with
bounded memory (``load_sweep_dir``)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from cupel_np._fs import AnyPath, arrow_files, arrow_location, as_path
from cupel_np.errors import InvalidConfigError
from cupel_np.io.outdir import (
    KIND_BUDGET,
    KIND_PARTS,
    KIND_STREAMED,
    KIND_SWEEP,
    KIND_TUNE,
    MANIFEST,
    PARTS_DIRS,
    SWEEP_FILES,
    CorruptManifestError,
    describe_outputs,
    in_progress,
    interrupted_note,
    load_manifest,
)

BATCH_ROWS = 65_536


#: scan one file and a few batches ahead: the default read-ahead (16 batches, 4 files) holds
#: several row groups of a large output at once, and the peak grew with the output size
_READAHEAD = {"batch_readahead": 2, "fragment_readahead": 1}


@dataclass
class SweepDirSummary:
    """What the report needs from a sweep directory."""

    labels: list[str]
    variants: list[dict]  # {"label", "policy", "budget"} as the writers record them
    set_column: str | None
    rows: int
    sets: int
    swing: int
    included: np.ndarray  # [V] included rows over all sets (failed sets excluded)
    tokens: np.ndarray  # [V] tokens used
    target: np.ndarray  # [V] target tokens summed over the sets that did not fail
    swing_included: np.ndarray  # [V]
    failed: np.ndarray  # [V] failed sets
    failure_example: dict[str, str] = field(default_factory=dict)
    #: per variant (orphan calls, orphan results), None when the outputs carry no such columns
    orphans: dict[str, tuple[int, int]] | None = None


def _output(out: AnyPath, name: str) -> AnyPath:
    d, f = out / name, out / f"{name}.parquet"
    if d.is_dir():
        return d
    if f.is_file():
        return f
    raise InvalidConfigError(f"{out} holds no sweep output {name!r} (expected {f.name} or {name}/part-*.parquet)")


def _files(p: AnyPath) -> list[str]:
    if p.is_file():
        return [str(p)]
    files = sorted(str(f) for f in p.glob("part-*.parquet"))
    _check_listing(p, len(files))
    return files


def _check_listing(p: AnyPath, found: int) -> None:
    """A part directory listing fewer part files than the run's manifest records (a part lost
    since, or a listing of an object store cut short) is refused, not read as the whole run."""
    from cupel_np.io.outdir import KIND_PARTS, read_manifest

    m = read_manifest(p.parent) or {}
    want = (m.get("summary") or {}).get("parts") if m.get("kind") == KIND_PARTS else None
    if isinstance(want, int) and found < want:
        raise InvalidConfigError(
            f"{p} lists {found} part file{'' if found == 1 else 's'}, the manifest records {want}: "
            "a part is missing or the listing is partial; rerun the sweep (or list the store again)"
        )


def _dataset(files) -> ds.FileSystemDataset:
    """A dataset over output files (local paths or URLs)."""
    fs, paths = arrow_files([files] if isinstance(files, str) else list(files))
    if fs is None:
        return ds.dataset(files, format="parquet")
    return ds.dataset(paths[0] if isinstance(files, str) else paths, format="parquet", filesystem=fs)


def _schema(path: str) -> pa.Schema:
    fs, p = arrow_location(path)
    return pq.read_schema(p, filesystem=fs)


def _metadata(path: str) -> Any:
    fs, p = arrow_location(path)
    return pq.read_metadata(p, filesystem=fs)


def _meta(out: AnyPath, variants_path: AnyPath) -> tuple[list[dict], str | None]:
    m = load_manifest(out)
    if m is not None and m.get("variants") is not None:
        if not m["variants"]:
            raise CorruptManifestError(f"{out / MANIFEST} is corrupt (it lists no variants); rerun the sweep")
        return m["variants"], m.get("set_column")
    files = _files(variants_path)
    if not files:
        raise InvalidConfigError(f"{variants_path} holds no part files")
    md = _schema(files[0]).metadata or {}
    if b"cupel_np.variants" not in md:
        raise InvalidConfigError(f"{files[0]} carries no cupel_np.variants metadata; not a cupel_np sweep output")
    names = _schema(files[0]).names
    set_col = names[1] if len(names) > 1 and names[1] != "included_count" else None
    return json.loads(md[b"cupel_np.variants"]), set_col


def check_sweep_dir(out: AnyPath) -> None:
    """Refuse a directory that is not one sweep's outputs: a budget simulation, or the outputs
    of two runs side by side (single files and part directories, or a manifest that names
    another layout than the one present)."""
    if not out.is_dir():
        raise InvalidConfigError(f"sweep directory not found: {out}")
    m = load_manifest(out) or {}
    if not in_progress() and interrupted_note(out):  # a run's own page is built before it finishes
        raise InvalidConfigError(interrupted_note(out))
    if m.get("kind") == KIND_BUDGET:
        raise InvalidConfigError(
            f"{out} holds a budget simulation, not a sweep; its page is written by cupel-np budget"
        )
    if m.get("kind") == KIND_TUNE:
        raise InvalidConfigError(
            f"{out} holds a policy search (cupel-np tune), not a sweep; its page is {out / 'report.html'}, "
            "written by cupel-np tune (rerun the search with --overwrite to rebuild it)"
        )
    files = [n for n in SWEEP_FILES if (out / n).is_file()]
    parts = [n for n in PARTS_DIRS if (out / n).is_dir()]
    if not files and not parts:  # nothing to build a page from: say so before any --overwrite advice
        _output(out, "variants")
    kind = m.get("kind")
    mixed = (files and parts) or (kind == KIND_PARTS and files) or (kind in (KIND_SWEEP, KIND_STREAMED) and parts)
    if mixed:
        raise InvalidConfigError(
            f"{out} is ambiguous: it holds {describe_outputs(out)}, the outputs of more than one run; "
            "rerun the sweep into an empty directory (or with --overwrite)"
        )


def load_sweep_dir(out_dir) -> SweepDirSummary:
    """Read what the page needs from a written sweep directory, with bounded memory."""
    out = as_path(out_dir)
    check_sweep_dir(out)
    vpath, dpath, ipath = _output(out, "variants"), _output(out, "diffs"), _output(out, "items")
    variants, set_col = _meta(out, vpath)
    labels = [v["label"] for v in variants]
    nv = len(labels)
    inc, tok, tgt, swi, fail = (np.zeros(nv, dtype=np.int64) for _ in range(5))
    example: dict[str, str] = {}
    vrows = 0
    vds = _dataset(_files(vpath))
    pair_cols = [c for c in ("orphan_calls", "orphan_results") if c in vds.schema.names]
    pairs = {c: np.zeros(nv, dtype=np.int64) for c in pair_cols} if len(pair_cols) == 2 else {}
    for b in vds.to_batches(
        columns=["variant", "included_count", "tokens_used", "target_tokens", "swing_included", "error", *pairs],
        batch_size=BATCH_ROWS,
        **_READAHEAD,
    ):
        vrows += b.num_rows
        codes = pc.index_in(b.column("variant"), value_set=pa.array(labels)).to_numpy(zero_copy_only=False)
        err = b.column("error").is_valid().to_numpy(zero_copy_only=False)
        ok = ~err
        np.add.at(fail, codes[err], 1)
        for name, acc in (
            ("included_count", inc),
            ("tokens_used", tok),
            ("target_tokens", tgt),
            ("swing_included", swi),
            *pairs.items(),
        ):
            np.add.at(acc, codes[ok], pc.fill_null(b.column(name), 0).to_numpy(zero_copy_only=False)[ok])
        if err.any():
            for r in np.flatnonzero(err)[:nv]:
                example.setdefault(labels[codes[r]], b.column("error")[int(r)].as_py())
    if set_col is not None and set_col not in _schema(_files(ipath)[0]).names:
        set_col = None  # a sweep without a set column: one unnamed set
    rows = sum(_metadata(f).num_rows for f in _files(ipath))
    swing = sum(_metadata(f).num_rows for f in _files(dpath))
    orphans = (
        {lab: (int(pairs["orphan_calls"][v]), int(pairs["orphan_results"][v])) for v, lab in enumerate(labels)}
        if pairs
        else None
    )
    return SweepDirSummary(
        labels, variants, set_col, rows, vrows // max(nv, 1), swing, inc, tok, tgt, swi, fail, example, orphans
    )
