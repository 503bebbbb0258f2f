"""The README, CONTRIBUTING.md and every page in docs/ tell the truth: their code blocks run.

Every fenced block has a language, and the language says what happens to it:

* ``python`` blocks run, in page order, in one namespace per page, inside a scratch directory
  that links the clone's ``data/`` and ``tests/`` (so the examples read the sample corpus and
  write nothing into the clone).
* ``console`` blocks are command-line sessions. Each ``$ cupel-np ...`` command (with ``\\``
  continuations) runs through ``cupel_np.cli.main`` in the same scratch directory, after the
  page's python blocks above it, and the lines after it must match what it printed: a line
  ``...`` stands for any number of lines, ``…`` for any text within a line, and the run time
  at the end of a summary line ("; 2.6s") is not compared.
* ``bash`` blocks are the README's two quick-start commands (a fresh venv each); ``.ci/run``
  runs the second on a clean clone, and the first is the demo that ``console`` blocks run.
* Not run: ``sh`` (commands that need a venv, a cluster, a benchmark or the whole suite),
  ``text`` (command syntax and sample output), ``toml`` and ``diff`` (file contents and edits
  to module files, in CONTRIBUTING.md).
"""

import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
RUN = {"python", "console"}
NOT_RUN = {"bash", "sh", "text", "toml", "diff"}
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```$", re.S | re.M)
# the README's quick start, byte for byte
QUICK_START = [
    "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/cupel-np demo",
    'python3 -m venv .venv && .venv/bin/pip install -e ".[test]" && .venv/bin/python -m pytest',
]


def blocks(page: Path) -> list[tuple[str, str, int]]:
    """(language, code, line number of the opening fence) of every fenced block."""
    src = page.read_text()
    return [(m.group(1).strip(), m.group(2), src.count("\n", 0, m.start()) + 1) for m in FENCE.finditer(src)]


def _name(page: Path) -> str:
    return str(page.relative_to(ROOT))


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    for name in ("data", "tests"):
        (tmp_path / name).symlink_to(ROOT / name, target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    return tmp_path


# ----------------------------------------------------------------------------- console blocks
def _commands(code: str) -> list[tuple[list[str], list[str]]]:
    """The ``$`` commands of a console block, each with the output lines shown after it."""
    out: list[tuple[list[str], list[str]]] = []
    lines = code.rstrip("\n").split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        assert line.startswith("$ "), f"console output before any command: {line!r}"
        cmd = line[2:]
        while cmd.endswith("\\"):
            i += 1
            cmd = cmd[:-1] + " " + lines[i].strip()
        i += 1
        shown = []
        while i < len(lines) and not lines[i].startswith("$ "):
            shown.append(lines[i])
            i += 1
        out.append((shlex.split(cmd), shown))
    return out


def _argv(words: list[str]) -> list[str]:
    if words[0] == "cupel-np":
        return words[1:]
    if words[:3] == ["python", "-m", "cupel_np"]:
        return words[3:]
    raise AssertionError(f"a console block may only run cupel-np, not {' '.join(words)!r}")


_TIME = re.compile(r"; \d+(\.\d+)?s$")


def _norm(line: str) -> str:
    return _TIME.sub("; <time>", line.rstrip())


def assert_output_matches(shown: list[str], actual: str, where: str) -> None:
    pattern = "".join(
        r"(?:[^\n]*\n)*?" if line.strip() == "..." else re.escape(_norm(line)).replace("…", r"[^\n]*") + r"\n"
        for line in shown
    )
    got = "".join(_norm(line) + "\n" for line in actual.rstrip("\n").split("\n")) if actual.strip() else ""
    assert re.fullmatch(pattern, got), (
        f"{where}: the output differs from the block\n--- shown\n" + "\n".join(shown) + "\n--- printed\n" + got
    )


def run_cli(words: list[str], capsys) -> str:
    from cupel_np.cli import main

    capsys.readouterr()
    main(_argv(words))
    out = capsys.readouterr()
    return out.out + out.err


# ----------------------------------------------------------------------------- the pages
def test_every_block_is_classified():
    for page in PAGES:
        for lang, _, line in blocks(page):
            assert lang in RUN | NOT_RUN, (
                f"{_name(page)}:{line}: a code block needs one of the languages {sorted(RUN | NOT_RUN)}, got {lang!r}"
            )


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_page_runs(page, scratch, capsys):
    ns: dict = {"__name__": "__doc__"}
    ran = 0
    for lang, code, line in blocks(page):
        where = f"{_name(page)}:{line}"
        if lang == "python":
            exec(compile(code, where, "exec"), ns)
            ran += 1
        elif lang == "console":
            for words, shown in _commands(code):
                assert_output_matches(shown, run_cli(words, capsys), f"{where} ({' '.join(words[:2])})")
            ran += 1
    if page.parent.name == "docs" and page.stem not in ("differences", "performance", "memory", "report"):
        assert ran, f"{_name(page)} has no example that runs"


# ----------------------------------------------------------------------------- the README
def test_quick_start_is_two_commands_and_matches_ci():
    src = README.read_text()
    cmds = [code.rstrip("\n") for lang, code, _ in blocks(README) if lang == "bash"]
    assert cmds == QUICK_START
    assert src.index("## Quick start") < src.index(QUICK_START[0]) < src.index("## API tour")
    assert QUICK_START[1] in (ROOT / ".ci" / "run").read_text()
    for page in PAGES[1:]:
        assert all(lang != "bash" for lang, _, _ in blocks(page)), f"{_name(page)}: bash is for the quick start"


def test_readme_demo_output_is_what_the_demo_prints(scratch, capsys):
    text = [code for lang, code, _ in blocks(README) if lang == "text"]
    shown = text[0].rstrip("\n").split("\n")
    assert shown[0].startswith("8,878 items in 300 sessions")
    assert_output_matches(shown, run_cli(["cupel-np", "demo"], capsys), "README.md demo output")


def test_api_tour_says_what_the_code_does(scratch, capsys):
    code = re.search(r"## API tour\n\n```python\n(.*?)```", README.read_text(), re.S).group(1)
    exec(compile(code, "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert "IN  You are a coding agent. 1.0 Pinned" in out
    assert "OUT $ pytest -x ... 200 lines" in out and "BudgetExceeded(item_tokens=900" in out


def test_sweep_example_says_what_the_code_does(scratch, capsys):
    code = [code for lang, code, _ in blocks(README) if lang == "python"][1]
    exec(compile(code, "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert re.search(r"^chat \d+ included$", out, re.M) and re.search(r"^rag \d+ included$", out, re.M)


def test_docs_links_resolve():
    for page in PAGES:
        prose = re.sub(r"`[^`\n]*`", "", FENCE.sub("", page.read_text()))
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", prose):
            if "://" in target:
                continue
            assert (page.parent / target).exists(), f"{_name(page)}: broken link {target}"
    linked = set(re.findall(r"\]\(docs/([\w-]+\.md)", README.read_text()))
    assert linked == {p.name for p in (ROOT / "docs").glob("*.md")}, "the README links every docs page"


def test_no_page_gives_the_result_matrices_as_v_by_n():
    """Issue 26: README, sweeps.md, testing.md and observability.md called `result.included`
    `[V, N]`; it is `[N, V]` (a column per variant). `[V, N]` may name only the engine's own
    buffers, in a sentence that says so."""
    for page in PAGES:
        for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            if "[V, N]" in line:
                assert "engine" in line or "buffer" in line, f"{page.name}:{n}: {line.strip()}"
