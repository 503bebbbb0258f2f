"""``cupel-np import``: chat / agent transcripts to an items Parquet file (``import`` is a keyword,
hence the underscore). Streamed: conversations are converted and written in chunks
(``import_to_parquet``), so memory does not hold the table (docs/importing.md, "Memory")."""

from __future__ import annotations

import json
import sys

from cupel_np.cli.shared import EXIT_OK
from cupel_np.io.importers import import_to_parquet


def cmd_import(args) -> int:
    res = import_to_parquet(
        args.format,
        args.inputs,
        args.out,
        mapping=args.map,
        tokenizer=args.tokenizer,
        skip_bad=args.skip_bad,
        set_column=args.set_column,
        tool_call_kind=args.tool_call_kind,
        calibrate=args.calibrate,
        allow_empty=args.allow_empty,
        keep_rewound=args.keep_rewound,
    )
    out = res.out
    for b in res.bad:  # listed, never silently dropped
        print(f"cupel-np: skipped bad {'line' if b.unit == 'line' else 'row'}: {b}", file=sys.stderr)
    if args.json:
        print(json.dumps({**res.summary(), "out": str(out), "set_column": res.set_column}, indent=2))
        return EXIT_OK
    print("\n".join(res.summary_lines(out)))  # counts, the token counter and its estimate vs the API
    return EXIT_OK
