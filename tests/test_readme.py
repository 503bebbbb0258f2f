"""The README's API tour is runnable and says what the code does."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_api_tour_runs(capsys):
    src = README.read_text()
    code = re.search(r"## API tour\n\n```python\n(.*?)```", src, re.S).group(1)
    exec(compile(code, "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert "IN  You are a coding agent. 1.0 Pinned" in out
    assert "OUT $ pytest -x ... 200 lines" in out and "BudgetExceeded(item_tokens=900" in out


def test_quick_start_matches_ci():
    src = README.read_text()
    cmds = re.findall(r"```bash\n(.*?)\n```", src)
    assert len(cmds) == 2
    ci = (README.parent / ".ci" / "run").read_text()
    assert cmds[1] in ci


def test_sensitivity_example_runs(capsys, monkeypatch):
    monkeypatch.chdir(README.parent)
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    exec(compile(blocks[1], "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert re.search(r"^chat \d+ included$", out, re.M) and re.search(r"^rag \d+ included$", out, re.M)
    assert "('rag', 'Included')" in out
