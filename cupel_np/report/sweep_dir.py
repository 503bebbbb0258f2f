"""A written sweep directory, in-process (``items.parquet``, ...) or Dask (``items/part-*.parquet``,
... and ``manifest.json``): its outputs located and checked (``check_sweep_dir``), and the
per-variant aggregates the pages need, streamed from the ``variants`` output in batches with
bounded memory (``load_sweep_dir``)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from cupel_np.errors import InvalidConfigError
from cupel_np.io.outdir import (
    KIND_BUDGET,
    KIND_PARTS,
    KIND_STREAMED,
    KIND_SWEEP,
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


def _output(out: Path, name: str) -> Path:
    d, f = out / name, out / f"{name}.parquet"
    if d.is_dir():
        return d
    if f.is_file():
        return f
    raise InvalidConfigError(f"{out} holds no sweep output {name!r} (expected {f.name} or {name}/part-*.parquet)")


def _files(p: Path) -> list[str]:
    return [str(p)] if p.is_file() else sorted(str(f) for f in p.glob("part-*.parquet"))


def _meta(out: Path, variants_path: Path) -> tuple[list[dict], str | None]:
    m = load_manifest(out)
    if m is not None and m.get("variants") is not None:
        if not m["variants"]:
            raise CorruptManifestError(f"{out / MANIFEST} is corrupt (it lists no variants); rerun the sweep")
        return m["variants"], m.get("set_column")
    files = _files(variants_path)
    if not files:
        raise InvalidConfigError(f"{variants_path} holds no part files")
    md = pq.read_schema(files[0]).metadata or {}
    if b"cupel_np.variants" not in md:
        raise InvalidConfigError(f"{files[0]} carries no cupel_np.variants metadata; not a cupel_np sweep output")
    names = pq.read_schema(files[0]).names
    set_col = names[1] if len(names) > 1 and names[1] != "included_count" else None
    return json.loads(md[b"cupel_np.variants"]), set_col


def check_sweep_dir(out: Path) -> None:
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
    files = [n for n in SWEEP_FILES if (out / n).is_file()]
    parts = [n for n in PARTS_DIRS if (out / n).is_dir()]
    kind = m.get("kind")
    mixed = (files and parts) or (kind == KIND_PARTS and files) or (kind in (KIND_SWEEP, KIND_STREAMED) and parts)
    if mixed:
        raise InvalidConfigError(
            f"{out} is ambiguous: it holds {describe_outputs(out)}, the outputs of more than one run; "
            "rerun the sweep into an empty directory (or with --overwrite)"
        )


def load_sweep_dir(out_dir) -> SweepDirSummary:
    """Read what the page needs from a written sweep directory, with bounded memory."""
    out = Path(out_dir)
    check_sweep_dir(out)
    vpath, dpath, ipath = _output(out, "variants"), _output(out, "diffs"), _output(out, "items")
    variants, set_col = _meta(out, vpath)
    labels = [v["label"] for v in variants]
    nv = len(labels)
    inc, tok, tgt, swi, fail = (np.zeros(nv, dtype=np.int64) for _ in range(5))
    example: dict[str, str] = {}
    vrows = 0
    vds = ds.dataset(_files(vpath), format="parquet")
    for b in vds.to_batches(
        columns=["variant", "included_count", "tokens_used", "target_tokens", "swing_included", "error"],
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
        ):
            np.add.at(acc, codes[ok], pc.fill_null(b.column(name), 0).to_numpy(zero_copy_only=False)[ok])
        if err.any():
            for r in np.flatnonzero(err)[:nv]:
                example.setdefault(labels[codes[r]], b.column("error")[int(r)].as_py())
    if set_col is not None and set_col not in pq.read_schema(_files(ipath)[0]).names:
        set_col = None  # a sweep without a set column: one unnamed set
    rows = sum(pq.read_metadata(f).num_rows for f in _files(ipath))
    swing = sum(pq.read_metadata(f).num_rows for f in _files(dpath))
    return SweepDirSummary(
        labels, variants, set_col, rows, vrows // max(nv, 1), swing, inc, tok, tgt, swi, fail, example
    )
