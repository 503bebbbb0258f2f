"""``cupel-np presets``: the presets with their full configuration."""

from __future__ import annotations

import json

from cupel_np.cli.shared import (
    EXIT_OK,
)
from cupel_np.model.presets import PRESETS


def cmd_presets(args) -> int:
    if args.json:
        print(json.dumps({k: p.to_dict() for k, p in PRESETS.items()}, indent=2))
        return EXIT_OK
    for name, p in PRESETS.items():
        scorers = ", ".join(f"{s.type_name}×{w:g}" for s, w in getattr(p.scorer, "entries", ()))
        sl = p.slicer.name + (f"(bucket {p.slicer.bucket_size})" if hasattr(p.slicer, "bucket_size") else "")
        print(
            f"{name:<13} {scorers:<40} {sl:<20} {p.placer:<14} dedup={p.deduplication} overflow={p.overflow_strategy}"
        )
        print(f"{'':<13} {p.description}")
    return EXIT_OK
