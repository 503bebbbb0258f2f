"""``cupel-np import``: chat / agent transcripts to an items Parquet file (``import`` is a keyword,
hence the underscore)."""

from __future__ import annotations

import json
import sys

from cupel_np.cli.shared import (
    EXIT_OK,
    plural,
)
from cupel_np.io.importers import import_transcripts


def cmd_import(args) -> int:
    res = import_transcripts(
        args.format,
        args.inputs,
        mapping=args.map,
        tokenizer=args.tokenizer,
        skip_bad=args.skip_bad,
        set_column=args.set_column,
        tool_call_kind=args.tool_call_kind,
    )
    out = res.write_parquet(args.out)
    for b in res.bad:  # listed, never silently dropped
        print(f"cupel-np: skipped bad {'line' if b.unit == 'line' else 'row'}: {b}", file=sys.stderr)
    if args.json:
        print(json.dumps({**res.summary(), "out": str(out), "set_column": res.set_column}, indent=2))
        return EXIT_OK
    skipped = "; ".join(f"{n} {r}" for r, n in sorted(res.skipped.items()))
    print(
        f"{plural(res.items, 'item')} in {res.conversations:,} conversation(s) from "
        f"{res.lines:,} line(s) -> {out} (set column {res.set_column!r}); "
        f"{len(res.bad)} bad line(s) skipped" + (f"; not context: {skipped}" if skipped else "")
    )
    return EXIT_OK
