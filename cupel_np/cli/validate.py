"""``cupel-np validate``: schema and row problems of an items file."""

from __future__ import annotations

import json

from cupel_np.cli.shared import (
    EXIT_OK,
    EXIT_USAGE,
    UsageError,
    _err,
    _memory_limit,
    _progress_enabled,
    _source,
    plural,
)
from cupel_np.errors import CupelError
from cupel_np.io.parquet import validate_items


def cmd_validate(args) -> int:
    if args.chunk_rows is not None and args.chunk_rows < 1:
        raise UsageError(f"--chunk-rows must be at least 1, got {args.chunk_rows}")
    try:
        problems, summary = validate_items(
            _source(args.items),
            set_column=args.set_column,
            chunk_rows=args.chunk_rows,
            memory_limit=_memory_limit(args),
            progress=_progress_enabled(args),
        )
    except CupelError as e:
        if not args.json:
            raise
        # --json promises a JSON answer on stdout: an unreadable input is a problem too
        print(json.dumps({"ok": False, "problems": [str(e)], "error": str(e)}, indent=2))
        _err(str(e))
        return EXIT_USAGE
    src = _source(args.items)
    args.items = src if not isinstance(src, list) else f"{src[0]} (+{len(src) - 1} files)"
    if args.json:
        print(json.dumps({"ok": not problems, "problems": problems, **summary}, indent=2))
    else:
        if problems:
            for p in problems:
                print(f"{args.items}: {p}")
        else:
            print(
                f"{args.items}: ok — {plural(summary['rows'], 'row')}, {summary['sets']:,} set(s), "
                f"{summary['negative_tokens']:,} negative-token rows (will be excluded), "
                f"{summary['pinned']:,} pinned"
            )
    return EXIT_OK if not problems else EXIT_USAGE
