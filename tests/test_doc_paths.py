"""The maps are true: every repository path that CONTRIBUTING.md, README.md and docs/*.md name
in backticks (`cupel_np/...`, `tests/...`, `benchmarks/...`, `docs/...`, `data/...`) exists.

A placeholder (`cupel_np/cli/<name>.py`) or a glob (`data/*.parquet`) is not a path and is
skipped; a pytest node id (`tests/test_x.py::test_y`) names its file."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PREFIXES = ("cupel_np/", "tests/", "benchmarks/", "docs/", "data/")
DOCS = ["CONTRIBUTING.md", "README.md", *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md"))]

#: paths a walk-through has the reader create (CONTRIBUTING's "How to add a scorer", step 6)
TO_BE_WRITTEN = {"tests/vectors/scoring/brevity-basic.toml"}

_FENCE = re.compile(r"^```.*?^```", re.M | re.S)
_SPAN = re.compile(r"`([^`\n]+)`")


def named_paths(text: str) -> list[str]:
    """The repository paths named in the inline code spans of a Markdown ``text``."""
    out = []
    for span in _SPAN.findall(_FENCE.sub("", text)):
        for token in span.split():
            token = token.split("::")[0].rstrip(",.;:)").lstrip("(")
            if token.startswith(PREFIXES) and not any(c in token for c in "<>*{}[]$"):
                out.append(token)
    return out


def test_the_path_finder_reads_spans_and_skips_placeholders():
    text = (
        "See `cupel_np/model/items.py`, `tests/test_x.py::test_y` and `CUPEL=1 pytest tests/a.py tests/b.py`;\n"
        "not `cupel_np/cli/<name>.py` nor `data/*.parquet` nor cupel_np/bare.py.\n"
        "```sh\npython tests/in_a_fence.py\n```\n"
    )
    assert named_paths(text) == ["cupel_np/model/items.py", "tests/test_x.py", "tests/a.py", "tests/b.py"]


@pytest.mark.parametrize("doc", DOCS)
def test_every_named_path_exists(doc):
    paths = named_paths((ROOT / doc).read_text())
    missing = sorted({p for p in paths if not (ROOT / p).exists() and p not in TO_BE_WRITTEN})
    assert not missing, f"{doc} names paths that do not exist: {missing}"


def test_contributing_names_many_paths():
    # the check above is only worth something if the maps name real paths
    assert len(set(named_paths((ROOT / "CONTRIBUTING.md").read_text()))) >= 20
