"""``cupel-np run``: one dry run of one policy over one item set, with scores and reasons."""

from __future__ import annotations

import dataclasses
from datetime import date, datetime

from cupel_np._files import dumps_json
from cupel_np.analysis.pipeline import Pipeline
from cupel_np.cli.shared import (
    EXIT_OK,
    UsageError,
    _budget,
    _load_table,
    _name,
    _one_line,
    _set_column_hint,
)
from cupel_np.errors import CupelError, InvalidConfigError
from cupel_np.model.policy import Policy
from cupel_np.model.presets import preset


def cmd_run(args) -> int:
    if bool(args.policy) == bool(args.preset):
        raise UsageError("give either --policy FILE or --preset NAME")
    policy = Policy.from_file(args.policy) if args.policy else preset(args.preset)
    if getattr(args, "groups", None):
        policy = dataclasses.replace(policy, groups=args.groups)
    budget = _budget(args)
    table = _load_table(args.items, args.set_column)
    if table.n_sets > 1 or args.set is not None:
        if args.set_column is None:
            raise UsageError("--set needs --set-column")
        if args.set is None:
            raise UsageError(f"{table.n_sets} item sets in {_name(args.items)}; choose one with --set KEY")
        table = table.subset(table.set_keys[_segment(table, args.set)])
    try:
        report = Pipeline(policy).dry_run(table, budget, threads=args.threads)
    except CupelError as e:
        hint = _set_column_hint(args.items, args.set_column)
        if not hint:
            raise
        raise type(e)(f"{e}{hint} and choose one with --set KEY") from None
    if args.json:
        print(dumps_json(report.to_dict(), default=_iso_default, indent=2))
        return EXIT_OK
    used = sum(i.item.tokens for i in report.included)
    pinned = sum(i.item.tokens for i in report.included if i.item.pinned)
    # the effective target is what the slicer may fill beside the pinned items (the target less
    # pinned tokens, reserved slots and the safety margin): included tokens may exceed it
    print(
        f"included {len(report.included)} of {report.total_candidates} items, {used:,} tokens "
        f"({pinned:,} pinned + {used - pinned:,} selected; target {budget.target_tokens:,}, "
        f"{report.effective_target_tokens:,} of it left for selection after pinned items and reserves)"
    )
    # one layout for both parts: the reason column as wide as the longest reason shown, so the
    # tokens and content columns line up whatever the reasons are
    w = max([8, *(len(inc.reason.value) for inc in report.included), *(len(e.reason.reason) for e in report.excluded)])
    for i, inc in enumerate(report.included):
        print(
            f"  {i:>3}  IN   {inc.score:8.4f}  {inc.reason.value:<{w}} {inc.item.tokens:>7}  {_one_line(inc.item.content)}"
        )
    for exc in report.excluded:
        detail = ", ".join(f"{k}={v}" for k, v in exc.reason.to_dict().items() if k != "reason")
        print(
            f"  {'':>3}  OUT  {exc.score:8.4f}  {exc.reason.reason:<{w}} {exc.item.tokens:>7}  "
            f"{_one_line(exc.item.content)}  ({detail})"
        )
    for s in report.count_requirement_shortfalls:
        print(f"  shortfall: kind {s.kind!r} required {s.required_count}, got {s.satisfied_count}")
    return EXIT_OK


def _iso_default(v):
    """JSON for what json cannot write: datetimes as ISO 8601, anything else as text."""
    if isinstance(v, datetime):
        return v.isoformat().replace("+00:00", "Z")
    if isinstance(v, date):
        return v.isoformat()
    return str(v)


def _segment(table, key: str) -> int:
    for i, k in enumerate(table.set_keys):
        if str(k) == key:
            return i
    raise InvalidConfigError(f"no set {key!r} in set column {table.set_column!r}")
