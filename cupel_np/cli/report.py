"""``cupel-np report``: the HTML report of a written sweep directory."""

from __future__ import annotations

import json

from cupel_np.cli.shared import (
    EXIT_OK,
)
from cupel_np.report.from_dir import write_dir_report


def cmd_report(args) -> int:
    path = write_dir_report(args.out_dir, title=args.title, top_k=args.top, overwrite=args.overwrite)
    if args.json:
        print(json.dumps({"report": str(path)}))
    else:
        print(f"wrote {path}")
    return EXIT_OK
