"""The house rules of the package layout, read from the source with ``ast`` (nothing imported):

* no import circle among cupel_np modules (imports inside functions count: a lazy import
  hides a circle, it does not remove it);
* each wing imports only its own wing and the wings below it
  (ground < model < engine < analysis < testing < io < report < cli < faces);
* no underscore name is imported across wings, nor read as an attribute of a module imported
  from another wing;
* no plain-Python (non-jitted) function is longer than 100 lines;
* no module is longer than 700 lines (an allowed exception is listed with its reason);
* no kernel wrapper (a plain function calling a jitted kernel) takes more than 12 parameters;
* ``tests/`` mirrors the wings: every test file is in ``tests/<wing>/`` (deeper folders mirror a
  subpackage: ``tests/io/importers/`` for ``cupel_np/io/importers/``), or at the top of
  ``tests/`` when it is listed in ``TOP_LEVEL_TESTS`` with its reason; basenames are unique.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "cupel_np"

#: bottom to top; a module belongs to the wing of its first path component under cupel_np/
WINGS = ["ground", "model", "engine", "analysis", "testing", "io", "tuning", "report", "cli", "faces"]
GROUND = {"errors", "text", "_jit", "_files", "_fs", "_cloud", "_version", "_cores", "_malloc", "_svg", "data"}
FACES = {"__init__", "__main__", "dask", "conformance"}  # the package face and the moved-path shims

MAX_LINES = 100
#: files exempt from the limit (none: every plain-Python function is within it)
LONG_FUNCTIONS_ALLOWED: set[str] = set()


def _modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__" and len(parts) > 1:
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _wing(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:  # cupel_np/__init__.py
        return "faces"
    head = parts[1]
    if head in GROUND:
        return "ground"
    if head in FACES and len(parts) == 2:
        return "faces"
    assert head in WINGS, f"{module}: not in any wing (add it to WINGS/GROUND/FACES in tests/test_layout.py)"
    return head


def _imports(module: str) -> Iterator[tuple[str, list[str], int]]:
    """``(imported module, names taken from it, line)`` for every import of ``module``'s file,
    wherever it stands. ``from pkg import sub`` imports the module ``pkg.sub`` when it is one."""
    tree = ast.parse(MODULES[module].read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "cupel_np":
                    yield alias.name, [], node.lineno
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "cupel_np":
            assert node.level == 0, f"{module}:{node.lineno}: relative import"
            names = []
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                if sub in MODULES:
                    yield sub, [], node.lineno
                else:
                    names.append(alias.name)
            if names:
                yield node.module, names, node.lineno


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for m in MODULES:
        for target, _, _ in _imports(m):
            assert target in MODULES, f"{m} imports {target}, which is not a module of the package"
            if target != m:
                graph[m].add(target)
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle, or None (iterative depth-first search)."""
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    for root in sorted(graph):
        if root in state:
            continue
        stack = [(root, iter(sorted(graph[root])))]
        path = [root]
        state[root] = 1
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                state[node] = 2
                stack.pop()
                path.pop()
            elif state.get(child) == 1:
                return path[path.index(child) :] + [child]
            elif child not in state:
                state[child] = 1
                stack.append((child, iter(sorted(graph[child]))))
                path.append(child)
    return None


def test_cycle_finder_finds_a_circle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_every_module_has_a_wing():
    for m in MODULES:
        assert _wing(m) in WINGS
    assert _wing("cupel_np.engine.stages") == "engine" and _wing("cupel_np._jit") == "ground"
    assert _wing("cupel_np") == "faces" and _wing("cupel_np.dask") == "faces"


def test_no_import_circle():
    assert _cycle(_graph()) is None, " -> ".join(_cycle(_graph()) or [])


def test_wings_import_only_downwards():
    bad = []
    for m in MODULES:
        for target, _, line in _imports(m):
            if WINGS.index(_wing(target)) > WINGS.index(_wing(m)):
                bad.append(f"{m}:{line} ({_wing(m)}) imports {target} ({_wing(target)})")
    assert not bad, "\n".join(bad)


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def test_no_underscore_name_crosses_a_wing():
    bad = []
    for m in MODULES:
        tree = ast.parse(MODULES[m].read_text())
        foreign_modules = set()  # local names bound to a module of another wing
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("cupel_np"):
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    target = sub if sub in MODULES else node.module
                    if _wing(target) == _wing(m):
                        continue
                    if target == sub:
                        foreign_modules.add(alias.asname or alias.name)
                    elif _private(alias.name):
                        bad.append(f"{m}:{node.lineno} imports {alias.name} from {target}")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("cupel_np.") and _wing(alias.name) != _wing(m) and alias.asname:
                        foreign_modules.add(alias.asname)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in foreign_modules
                and _private(node.attr)
            ):
                bad.append(f"{m}:{node.lineno} reads {node.value.id}.{node.attr}")
    assert not bad, "\n".join(bad)


#: the project's kernel decorators (``cupel_np._jit``), bare or qualified
_KERNEL_DECORATORS = {f"{p}{d}" for p in ("", "_jit.") for d in ("jit", "jit_inner", "jit_with_gil")}


def _jitted(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Decorated with one of the project's kernel decorators (``from cupel_np._jit import jit``,
    ``jit_inner`` for a kernel only other kernels call, ``jit_with_gil``)."""
    return any(ast.unparse(d) in _KERNEL_DECORATORS for d in fn.decorator_list)


def _long_in(source: str) -> list[tuple[str, int, int]]:
    """``(name, first line, length)`` of every plain-Python function of ``source`` (nested
    ones too) longer than ``MAX_LINES`` lines."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not _jitted(node):
            n = node.end_lineno - node.lineno + 1
            if n > MAX_LINES:
                out.append((node.name, node.lineno, n))
    return out


def long_functions(allowed: set[str] = LONG_FUNCTIONS_ALLOWED) -> list[str]:
    """Every plain-Python function of the package longer than ``MAX_LINES`` lines, outside the
    ``allowed`` files."""
    out = []
    for path in MODULES.values():
        rel = path.relative_to(PACKAGE).as_posix()
        if rel not in allowed:
            out += [f"{rel}:{line} {name}: {n} lines" for name, line, n in _long_in(path.read_text())]
    return out


def test_no_plain_python_function_over_100_lines():
    long = long_functions()
    assert not long, "\n".join(long)


def test_the_length_rule_counts_plain_functions_and_skips_kernels():
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES))
    short = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES - 1))
    source = f"@jit\ndef kernel():\n{body}\n\ndef plain():\n{body}\n\ndef fits():\n{short}\n"
    assert _long_in(source) == [("plain", MAX_LINES + 4, MAX_LINES + 1)]
    inner = f"@jit_inner\ndef helper():\n{body}\n\n@other\ndef plain():\n{body}\n"
    assert [name for name, _, _ in _long_in(inner)] == ["plain"]


#: the only imports the command line may delay to a function: optional extras (each heavy)
LAZY_CLI_IMPORTS = {"optuna", "dask", "distributed"}
#: and one delayed import of the library itself, with its reason: the entry point starts a cold
#: run's compile child (cli/early.py) before it imports the rest (issue 31)
LAZY_CLI_ENTRY = {("entry.py", "cupel_np.cli.app")}


def _function_imports(source: str) -> list[tuple[int, str]]:
    """``(line, module)`` of every import inside a function of ``source``."""
    out = []
    for fn in ast.walk(ast.parse(source)):
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            for node in ast.walk(fn):
                if isinstance(node, ast.Import):
                    out += [(node.lineno, a.name) for a in node.names]
                elif isinstance(node, ast.ImportFrom):
                    out.append((node.lineno, node.module or ""))
    return out


def test_the_command_line_imports_at_module_level():
    """cli/ sits on top of every wing, so it needs no import inside a function to dodge the wing
    order; only the optional extras wait until a command needs them."""
    bad = [
        f"{path.relative_to(PACKAGE).as_posix()}:{line} {mod}"
        for m, path in MODULES.items()
        if m.startswith("cupel_np.cli")
        for line, mod in _function_imports(path.read_text())
        if mod.split(".")[0] not in LAZY_CLI_IMPORTS
        and (path.relative_to(PACKAGE / "cli").as_posix(), mod) not in LAZY_CLI_ENTRY
    ]
    assert not bad, "\n".join(bad)


def test_the_import_rule_sees_imports_inside_functions():
    source = "import os\n\ndef f():\n    import optuna\n    from cupel_np.io import dask\n"
    assert _function_imports(source) == [(4, "optuna"), (5, "cupel_np.io")]


def test_no_module_reads_its_callers_frames():
    """Behaviour follows from arguments, never from a caller's locals or line numbers (the
    column checks once ordered their messages by walking ``sys._getframe``)."""
    bad = [m for m, path in MODULES.items() if "_getframe" in path.read_text() or "f_locals" in path.read_text()]
    assert not bad, bad


#: the longest a module of the package may be
MAX_MODULE_LINES = 700
#: modules over the limit, each with the reason (an entry must still be over: see below)
#: (none: tuning/search.py, model/scorers.py and io/dask.py were split by concept in issue 25)
LONG_MODULES_ALLOWED: set[str] = set()
#: the most parameters a kernel wrapper (a plain function that calls a jitted kernel) may take
MAX_WRAPPER_PARAMS = 12


def long_modules() -> list[str]:
    """Every module of the package over ``MAX_MODULE_LINES`` lines, with its length."""
    out = []
    for path in MODULES.values():
        n = len(path.read_text().splitlines())
        if n > MAX_MODULE_LINES:
            out.append(f"{path.relative_to(PACKAGE).as_posix()}: {n} lines")
    return out


def test_no_module_over_700_lines():
    long = [m for m in long_modules() if m.split(":")[0] not in LONG_MODULES_ALLOWED]
    assert not long, "modules over the limit (split them by concept):\n" + "\n".join(long)


def test_every_allowed_long_module_is_still_long():
    still = {m.split(":")[0] for m in long_modules()}
    assert LONG_MODULES_ALLOWED <= still, (
        f"no longer over the limit, drop from the list: {LONG_MODULES_ALLOWED - still}"
    )


def _n_params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = fn.args
    return len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs) + (a.vararg is not None) + (a.kwarg is not None)


def _called_names(fn: ast.AST) -> set[str]:
    out = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Name):
                out.add(f.id)
            elif isinstance(f, ast.Attribute):
                out.add(f.attr)
    return out


def wide_wrappers(sources: dict[str, str], limit: int = MAX_WRAPPER_PARAMS) -> list[str]:
    """Every plain function of ``sources`` (name -> source) that calls a jitted kernel of any of
    them (by name) and takes more than ``limit`` parameters."""
    trees = {name: ast.parse(src) for name, src in sources.items()}
    funcs = {
        name: [n for n in ast.walk(t) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
        for name, t in trees.items()
    }
    kernels = {f.name for fs in funcs.values() for f in fs if _jitted(f)}
    return [
        f"{name}:{f.lineno} {f.name}: {_n_params(f)} parameters"
        for name, fs in funcs.items()
        for f in fs
        if not _jitted(f) and _n_params(f) > limit and _called_names(f) & kernels
    ]


def test_no_kernel_wrapper_over_12_parameters():
    wide = wide_wrappers({path.relative_to(PACKAGE).as_posix(): path.read_text() for path in MODULES.values()})
    assert not wide, "kernel wrappers with too many parameters (group them in a NamedTuple):\n" + "\n".join(wide)


def test_the_wrapper_rule_sees_wide_wrappers_of_kernels_only():
    params = ", ".join(f"a{i}" for i in range(MAX_WRAPPER_PARAMS + 1))
    source = (
        f"@jit\ndef kern({params}):\n    pass\n\n"
        f"def wide({params}):\n    return kern({params})\n\n"
        f"def fits({', '.join(f'a{i}' for i in range(MAX_WRAPPER_PARAMS))}):\n    return kern()\n\n"
        f"def wide_but_plain({params}):\n    return len({params})\n"
    )
    assert wide_wrappers({"m.py": source}) == [f"m.py:5 wide: {MAX_WRAPPER_PARAMS + 1} parameters"]


# ----------------------------------------------------------------------------- tests/ mirrors the wings
TESTS = Path(__file__).resolve().parent
#: the folders of tests/: one per wing with code of its own (the ground and the faces have none)
TEST_WINGS = ("model", "engine", "analysis", "testing", "io", "tuning", "report", "cli")
#: the test files that stay at the top of tests/, each with its reason: cross-cutting (about
#: every wing, the docs or the oracle) or about a module at the top of cupel_np/ (the ground
#: and the faces, which have no wing folder)
TOP_LEVEL_TESTS = {
    "test_conformance.py": "the conformance vectors through the runner (the face cupel_np/conformance.py)",
    "test_doc_paths.py": "every path CONTRIBUTING.md, README.md and docs/ name",
    "test_docstrings.py": "a docstring on every public name of every wing",
    "test_layout.py": "these rules, over the whole package and tests/",
    "test_readme.py": "the code blocks of README.md, CONTRIBUTING.md and docs/",
    "test_typing.py": "the annotations of everything the faces export",
    "test_version.py": "cupel_np/_version.py (ground) and --version",
    "test_package_face.py": "cupel_np/__init__.py (the face): its names imported on first use",
    "test_naive_oracle.py": "the oracle tests/naive.py itself, against the conformance vectors",
    "test_jit.py": "cupel_np/_jit.py (ground)",
    "test_malloc.py": "cupel_np/_malloc.py (ground): glibc's malloc thresholds before a big sweep",
    "test_storage.py": "cupel_np/_fs.py (ground): every reader and writer of every wing on object storage",
    "test_sample_data.py": "cupel_np/data/ (ground): the sample corpus",
    "test_cores.py": "cupel_np/_cores.py (ground): the CPU, and whether NumPy's sort is slow on it",
}


def _test_files() -> list[str]:
    """Every test file pytest collects under tests/, relative to it (``test_*.py`` and ``*_test.py``)."""
    found = set(TESTS.rglob("test_*.py")) | set(TESTS.rglob("*_test.py"))
    return sorted(p.relative_to(TESTS).as_posix() for p in found)


def _subpackages() -> set[str]:
    """Every subpackage of cupel_np as a path relative to it (``engine``, ``engine/scorers``)."""
    return {p.parent.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("__init__.py") if p.parent != PACKAGE}


def misplaced_tests(files: list[str], subpackages: set[str]) -> list[str]:
    """What breaks the mirror, for test ``files`` given relative to tests/: a file at the top
    not in ``TOP_LEVEL_TESTS``, a folder that is no wing folder (or below one, no subpackage of
    that wing), a basename used twice (pytest imports test files by basename)."""
    out = []
    first: dict[str, str] = {}
    for rel in files:
        *folders, name = rel.split("/")
        if name in first:
            out.append(f"tests/{rel}: the basename of tests/{first[name]} (basenames are unique)")
        first.setdefault(name, rel)
        folder = "/".join(folders)
        if not folder:
            if name not in TOP_LEVEL_TESTS:
                out.append(f"tests/{rel}: not in a wing folder (tests/<wing>/) nor in TOP_LEVEL_TESTS")
        elif folders[0] not in TEST_WINGS or folder not in subpackages:
            out.append(
                f"tests/{rel}: tests/{folder}/ mirrors no subpackage of cupel_np (wings: {', '.join(TEST_WINGS)})"
            )
    return out


def test_tests_mirror_the_wings():
    bad = misplaced_tests(_test_files(), _subpackages())
    assert not bad, "move each into tests/<wing>/ for the subpackage it is about:\n" + "\n".join(bad)


def test_every_top_level_test_is_still_there():
    missing = set(TOP_LEVEL_TESTS) - set(_test_files())
    assert not missing, f"listed in TOP_LEVEL_TESTS but not at the top of tests/: {sorted(missing)}"


def test_every_test_wing_is_a_wing_of_the_package():
    assert set(TEST_WINGS) == set(WINGS) - {"ground", "faces"}
    assert all((PACKAGE / w / "__init__.py").is_file() for w in TEST_WINGS)


def test_the_mirror_rule_catches_a_misplaced_file():
    subpackages = {"model", "engine", "engine/scorers", "io", "io/importers", "data"}
    good = ["test_layout.py", "model/test_items.py", "engine/scorers/test_kernels.py", "io/importers/test_x.py"]
    assert misplaced_tests(good, subpackages) == []
    bad = [
        "test_items_again.py",  # at the top, not listed
        "data/test_sample.py",  # a ground subpackage: no wing folder
        "gui/test_window.py",  # no such wing
        "engine/slicers/test_greedy.py",  # no such subpackage of the engine
        "io/test_items.py",  # a basename used twice
        "model/test_items.py",
    ]
    assert misplaced_tests(sorted(bad), subpackages) == [
        f"tests/data/test_sample.py: tests/data/ mirrors no subpackage of cupel_np (wings: {', '.join(TEST_WINGS)})",
        "tests/engine/slicers/test_greedy.py: tests/engine/slicers/ mirrors no subpackage of cupel_np"
        f" (wings: {', '.join(TEST_WINGS)})",
        "tests/gui/test_window.py: tests/gui/ mirrors no subpackage of cupel_np (wings: " + ", ".join(TEST_WINGS) + ")",
        "tests/model/test_items.py: the basename of tests/io/test_items.py (basenames are unique)",
        "tests/test_items_again.py: not in a wing folder (tests/<wing>/) nor in TOP_LEVEL_TESTS",
    ]


# ----------------------------------------------------------------------------- one face style
#: wing faces that load names on first use (a module ``__getattr__`` and its name table), each
#: with the reason
LAZY_FACES = {
    "tuning": "output.py writes through io/, which a plain `import cupel_np` does not load",
}


def face_code(source: str, lazy: bool = False) -> list[str]:
    """What a face's source holds besides its docstring, imports and ``__all__`` (and, for a
    lazy face, its ``__getattr__`` and the table it reads)."""
    out = []
    for i, node in enumerate(ast.parse(source).body):
        if i == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            continue
        targets = [ast.unparse(t) for t in node.targets] if isinstance(node, ast.Assign) else []
        if targets == ["__all__"] or (lazy and targets == ["_HOME"]):
            continue
        if lazy and isinstance(node, ast.FunctionDef) and node.name == "__getattr__":
            continue
        out.append(f"{node.lineno}: {ast.unparse(node).splitlines()[0]}")
    return out


def test_every_wing_face_only_re_exports():
    bad = []
    for wing in WINGS:
        face = PACKAGE / wing / "__init__.py"
        if face.is_file():
            bad += [f"{wing}/__init__.py:{c}" for c in face_code(face.read_text(), lazy=wing in LAZY_FACES)]
    assert not bad, "a face holds code (move it to a module of its wing):\n" + "\n".join(bad)


def test_the_face_rule_sees_code():
    face = '"""Doc."""\nfrom x import a\n__all__ = ["a"]\n_HOME = {}\n\ndef __getattr__(n):\n    pass\n\nclass C:\n    pass\n'
    assert face_code(face, lazy=True) == ["9: class C:"]
    assert face_code(face) == ["4: _HOME = {}", "6: def __getattr__(n):", "9: class C:"]
