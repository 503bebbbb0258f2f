"""A checks file's checks over whole corpora: ``run_checks`` over one table or chunks of whole
item sets, ``check_table`` / ``merge_parts`` for parts run apart (chunks, Dask partitions),
and the outcomes as a text report (``report_lines``) or JUnit XML (``junit_xml``). The
command is ``cupel_np.cli.check``."""

from __future__ import annotations

import re
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

if TYPE_CHECKING:
    from cupel_np.model.items import ItemTable
    from cupel_np.testing.checks import Check, ChecksFile

__all__ = [
    "CheckOutcome",
    "CheckPart",
    "check_table",
    "first_rows",
    "junit_xml",
    "merge_parts",
    "outcome_failed",
    "report_lines",
    "run_checks",
]

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


@dataclass
class CheckOutcome:
    """One check over the whole corpus: how many (variant, set) pairs it saw and failed,
    the first ``keep`` failing rows, and the seconds it took."""

    check: Check
    pairs: int = 0
    failed: int = 0
    rows: list[pa.Table] = field(default_factory=list)
    kept: int = 0
    seconds: float = 0.0
    #: why the check checked nothing (its kind or ``where`` matches no item of the input, or
    #: the input has no (variant, set) pairs); such a check fails (``outcome_failed``)
    problem: str | None = None

    def table(self) -> pa.Table:
        from cupel_np.testing.corpus import FAILURE_SCHEMA

        return pa.concat_tables(self.rows) if self.rows else FAILURE_SCHEMA.empty_table()


#: order keys of a ``CheckPart``'s rows: the variant's position in the check's variants, and
#: the set's first row in the whole input (the order an in-process run lists failures in)
ORDER = ("__variant_pos", "__first_row")


@dataclass
class CheckPart:
    """One check over one table of whole item sets (a chunk, or a Dask partition): its pair and
    failure counts, its seconds, and its first ``keep`` failing rows with the ``ORDER`` keys."""

    pairs: int
    failed: int
    seconds: float
    rows: pa.Table
    #: items of the table the check's ``kind`` / ``where`` matches (None: the check names none)
    subject: int | None = None
    #: the kinds present in the table (for a "did you mean" when a check's kind is absent)
    kinds: frozenset[str] = frozenset()


def first_rows(table: ItemTable) -> np.ndarray:
    """Each set's first row in ``table``'s input (sets are numbered by first appearance)."""
    starts = np.asarray(table.offsets[:-1], dtype=np.int64)
    if table.n == 0:
        return np.zeros(starts.shape[0], dtype=np.int64)
    return np.asarray(table.input_row, dtype=np.int64)[starts]


def check_table(
    cf: ChecksFile, table: ItemTable, *, keep: int = 1000, threads: int | None = None, first: np.ndarray | None = None
) -> list[CheckPart]:
    """Sweep the checks file's variants over ``table`` (whole item sets) and run every check on
    every set: one ``CheckPart`` per check. ``first``: each set's first row in the whole input
    (default ``first_rows(table)``), which orders the failing rows across tables."""
    from cupel_np.analysis.sensitivity import sweep
    from cupel_np.testing.corpus import CorpusAssertionChain

    first = first_rows(table) if first is None else first
    res = sweep(table, None, cf.variants, on_error="collect", progress=False, threads=threads)
    parts = []
    for check in cf.checks:
        t0 = time.perf_counter()
        chain = CorpusAssertionChain(res, check.variants, collect=True)
        check.run(chain)
        fails = chain.failures()
        vpos, sets = chain.failure_positions()
        keys = first[sets]
        order = np.lexsort((keys, vpos))[:keep]
        rows = fails.take(pa.array(order, pa.int64()))
        rows = rows.append_column(ORDER[0], pa.array(vpos[order], pa.int64()))
        rows = rows.append_column(ORDER[1], pa.array(keys[order], pa.int64()))
        subject = _subject_count(check, chain)
        kinds = _kinds_present(table)
        pairs = len(chain.variants) * table.n_sets
        parts.append(CheckPart(pairs, fails.num_rows, time.perf_counter() - t0, rows, subject, kinds))
    return parts


def _kinds_present(table: ItemTable) -> frozenset[str]:
    """The distinct kind strings of ``table`` as written (for messages)."""
    import pyarrow.compute as pc

    col = table.table.column("kind").combine_chunks()
    if pa.types.is_dictionary(col.type):
        col = col.dictionary.take(pc.unique(col.indices).drop_null())
    return frozenset(str(k) for k in pc.unique(col).drop_null().to_pylist())


def _subject_count(check: Check, chain) -> int | None:
    """How many items of the chain's table the check's ``kind`` or ``where`` matches (a
    ``where`` reading per-variant columns counts an item matched in any of the check's
    variants); None when the check names neither."""
    from cupel_np.testing.checks import PATTERN_ARGS
    from cupel_np.testing.conditions import Condition

    keys = PATTERN_ARGS[check.pattern]
    mask = None
    if "kind" in keys:
        mask = chain._kind_mask(check.args[keys.index("kind")])
    if "where" in keys:
        cond = check.args[keys.index("where")]
        assert isinstance(cond, Condition)
        m = np.zeros(chain.table.n, dtype=np.bool_)
        for v in chain.variants if cond.uses_variant() else chain.variants[:1]:
            m |= np.asarray(chain._mask(cond, v), dtype=np.bool_)
        mask = m if mask is None else mask & m
    return None if mask is None else int(np.count_nonzero(mask))


def outcome_failed(o: CheckOutcome) -> bool:
    """True when the check failed on some pair or checked nothing (``o.problem``)."""
    return bool(o.failed or o.problem)


def _problem(check: Check, pairs: int, subject: int | None, kinds: set[str], allow_empty: bool) -> str | None:
    from cupel_np.model.fields import suggestion
    from cupel_np.testing.checks import PATTERN_ARGS

    if pairs == 0:
        if allow_empty:
            return None
        return (
            "checked nothing: the input has no (variant, set) pairs "
            "(set allow_empty = true in the checks file if an empty input is expected)"
        )
    if subject == 0:
        keys = PATTERN_ARGS[check.pattern]
        if "kind" in keys:
            kind = check.args[keys.index("kind")]
            present = ", ".join(sorted(kinds)) or "none"
            return (
                f"checked nothing: no item of the input has kind {kind!r}"
                f"{suggestion(kind, sorted(kinds))}; kinds present: {present}"
            )
        cond = check.args[keys.index("where")]
        return f"checked nothing: no item of the input matches {cond.describe()}"
    return None


def merge_parts(
    checks: list[Check], parts: Iterable[list[CheckPart]], keep: int = 1000, *, allow_empty: bool = False
) -> list[CheckOutcome]:
    """The outcomes of ``checks`` from their parts over tables of disjoint item sets, in any
    order: counts added up, and the first ``keep`` failing rows per check in the order an
    in-process run of the whole input lists them (by variant, then by set in input order).
    A check that checked nothing gets a ``problem``: its kind or ``where`` matches no item of
    the whole input, or there are no (variant, set) pairs at all (unless ``allow_empty``)."""
    from cupel_np.testing.checks import PATTERN_ARGS

    outcomes = [CheckOutcome(ch) for ch in checks]
    subjects: list[int | None] = [None] * len(checks)
    kinds: set[str] = set()
    for per_check in parts:
        for i, (out, part) in enumerate(zip(outcomes, per_check, strict=True)):
            kinds |= part.kinds
            if part.subject is not None:
                subjects[i] = (subjects[i] or 0) + part.subject
            out.pairs += part.pairs
            out.failed += part.failed
            out.seconds += part.seconds
            if part.rows.num_rows:
                rows = pa.concat_tables([*out.rows, part.rows])
                out.rows = [rows.sort_by([(k, "ascending") for k in ORDER]).slice(0, keep)]
    for i, out in enumerate(outcomes):
        out.rows = [r.drop_columns(list(ORDER)) for r in out.rows]
        out.kept = sum(r.num_rows for r in out.rows)
        subject = subjects[i]
        if subject is None and any(k in PATTERN_ARGS[out.check.pattern] for k in ("kind", "where")):
            subject = 0  # no part at all: nothing matched
        out.problem = _problem(out.check, out.pairs, subject, kinds, allow_empty)
    return outcomes


def run_checks(cf: ChecksFile, tables, *, keep: int = 1000, threads: int | None = None) -> list[CheckOutcome]:
    """Sweep the checks file's variants over each ItemTable of ``tables`` (one, or chunks of
    whole sets in input order) and run every check on every set; failing rows beyond ``keep``
    per check are counted, not kept. The rows are in the same order however the input is cut."""

    def parts() -> Iterator[list[CheckPart]]:
        before = 0
        for table in tables:
            yield check_table(cf, table, keep=keep, threads=threads, first=first_rows(table) + before)
            before += table.n

    return merge_parts(cf.checks, parts(), keep, allow_empty=cf.allow_empty)


def _fmt_table(t: pa.Table, set_name: str, limit: int) -> list[str]:
    rows = t.slice(0, limit).to_pylist()
    head = ["variant", set_name, "expected", "found"]
    body = [
        [
            r["variant"],
            str(r["set"]),
            r["expected"],
            r["found"] if r["error"] is None else f"error: {r['error']}",
        ]
        for r in rows
    ]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head)]
    lines = ["  " + "  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip()]
    lines += ["  " + "  ".join(c.ljust(w) for c, w in zip(b, widths)).rstrip() for b in body]
    return lines


def report_lines(outcomes: list[CheckOutcome], set_name: str, max_rows: int) -> list[str]:
    """The human-readable report: one PASS/FAIL line per check, a table under each failure."""
    lines = []
    for o in outcomes:
        if o.problem and not o.failed:
            lines.append(f"FAIL  {o.check.name}  ({o.problem})")
            continue
        if not o.failed:
            lines.append(f"PASS  {o.check.name}  ({o.pairs:,} (variant, set) pairs)")
            continue
        lines.append(f"FAIL  {o.check.name}  ({o.failed:,} of {o.pairs:,} (variant, set) pairs fail)")
        if o.problem:
            lines.append(f"  {o.problem}")
        lines += _fmt_table(o.table(), set_name, max_rows)
        if o.failed > max_rows:
            lines.append(f"  ... and {o.failed - max_rows:,} more")
    n_fail = sum(1 for o in outcomes if outcome_failed(o))
    noun = "check" if len(outcomes) == 1 else "checks"
    lines.append(f"{len(outcomes)} {noun}: {len(outcomes) - n_fail} passed, {n_fail} failed")
    return lines


def junit_xml(outcomes: list[CheckOutcome], suite: str, set_name: str, max_rows: int = 50) -> bytes:
    """JUnit XML: one ``testsuite`` of one ``testcase`` per check; a failing check has a
    ``failure`` element whose text is the failure table."""
    n_fail = sum(1 for o in outcomes if outcome_failed(o))
    total = sum(o.seconds for o in outcomes)
    root = ET.Element("testsuites", name="cupel-np check", tests=str(len(outcomes)), failures=str(n_fail))
    root.set("time", f"{total:.3f}")
    ts = ET.SubElement(root, "testsuite", name=suite, tests=str(len(outcomes)), failures=str(n_fail))
    ts.set("errors", "0")
    ts.set("skipped", "0")
    ts.set("time", f"{total:.3f}")
    for o in outcomes:
        tc = ET.SubElement(ts, "testcase", classname=f"cupel-np.check.{suite}", name=o.check.name)
        tc.set("time", f"{o.seconds:.3f}")
        if o.problem and not o.failed:
            f = ET.SubElement(tc, "failure", type="CheckedNothing")
            f.set("message", o.problem)
        elif o.failed:
            f = ET.SubElement(tc, "failure", type="CorpusAssertionError")
            f.set("message", f"{o.failed} of {o.pairs} (variant, set) pairs fail")
            text = _fmt_table(o.table(), set_name, max_rows)
            if o.failed > max_rows:
                text.append(f"  ... and {o.failed - max_rows} more")
            f.text = "\n".join(text)
    for el in root.iter():  # set keys, labels and check names are user strings
        el.attrib.update({k: xml_safe(v) for k, v in el.attrib.items()})
        if el.text:
            el.text = xml_safe(el.text)
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


#: characters XML 1.0 cannot hold (even escaped): C0 controls but tab/newline/CR, surrogates,
#: U+FFFE/U+FFFF; plus DEL and C1 controls, legal but unreadable in a CI log
_XML_ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


def xml_safe(s: str) -> str:
    """``s`` with every character XML cannot hold written as the text ``\\xNN`` / ``\\uNNNN``
    (so a CI parser reads the report of a failing check whatever its set keys and labels)."""
    return _XML_ILLEGAL.sub(lambda m: f"\\x{ord(m[0]):02x}" if ord(m[0]) < 0x100 else f"\\u{ord(m[0]):04x}", s)
