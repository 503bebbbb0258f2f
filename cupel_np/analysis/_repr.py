"""Helpers of the compact notebook summaries (``_repr_html_``) that SweepResult,
PolicySensitivityReport and SelectionReport draw beside their classes: bounded in size
whatever the run's size."""

from __future__ import annotations

from collections.abc import Set as AbstractSet

import numpy as np

from cupel_np.text import escape_html as _e

REPR_ROWS = 10
REPR_CSS = "<style>.cupel-np td,.cupel-np th{padding:2px 6px;text-align:left}.cupel-np td.n{text-align:right}</style>"


def html_table(head: list[str], rows: list[list], nums: AbstractSet[int] = frozenset()) -> str:
    h = "".join(f"<th>{_e(x)}</th>" for x in head)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="n">{x:,}</td>'
            if i in nums and isinstance(x, (int, np.integer))
            else (f'<td class="n">{x:.4f}</td>' if i in nums and isinstance(x, float) else f"<td>{_e(x)}</td>")
            for i, x in enumerate(r)
        )
        + "</tr>"
        for r in rows
    )
    return f"<table><tr>{h}</tr>{body}</table>"
