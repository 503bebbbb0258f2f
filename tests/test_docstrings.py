"""Every public name has a docstring: each name in ``cupel_np.__all__`` and in every wing's
``__all__``, and the public methods and properties of the classes among them (as stumpy's
``docstring.py`` walks its ``__all__``). A constant has no ``__doc__`` of its own: it needs a
``#:`` comment on the line above its assignment (the form Sphinx reads).

Also: every error and warning class lives in ``cupel_np/errors.py`` and is exported from
``cupel_np``.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import types
from pathlib import Path

import pytest

import cupel_np
import cupel_np.errors

PACKAGE = Path(cupel_np.__file__).resolve().parent

#: the faces whose ``__all__`` is the public surface (the package and each wing)
FACES = [
    "cupel_np",
    "cupel_np.analysis",
    "cupel_np.cli",
    "cupel_np.dask",
    "cupel_np.engine",
    "cupel_np.io",
    "cupel_np.model",
    "cupel_np.report",
    "cupel_np.testing",
    "cupel_np.tuning",
]

#: error classes that may live outside errors.py, each with the reason
ERRORS_ELSEWHERE = {
    # the command line's own signal for "exit 2", raised and caught inside cli/ (never reaches
    # a caller of the Python API, which gets the CupelError the command caught)
    "cli/shared.py:UsageError",
    "cli/shared.py:AllCellsFailedError",  # a UsageError (exit 2) that never leaves cli/, like it
}


def _own_doc(obj) -> str | None:
    """``obj``'s own docstring: a class's is not inherited, nor the one dataclasses make up."""
    if isinstance(obj, type):
        doc = obj.__dict__.get("__doc__")
        if doc and doc.startswith(f"{obj.__name__}(") and doc.rstrip().endswith(")"):
            return None  # dataclasses' generated signature, not a docstring
        return doc
    return inspect.getdoc(obj)  # a method may take its documented base method's docstring


def _data_documented(name: str) -> bool:
    """A ``#:`` comment right above a top-level ``name = ...`` / ``name: T = ...`` somewhere
    in the package."""
    pattern = re.compile(rf"^{re.escape(name)}\s*(:[^=]*)?=", re.M)
    for path in PACKAGE.rglob("*.py"):
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines):
            if pattern.match(line) and i > 0 and lines[i - 1].lstrip().startswith("#:"):
                return True
    return False


def _members(cls: type):
    """``(name, member)`` of the public methods and properties ``cls`` defines or inherits
    from classes of this package."""
    seen = set()
    for klass in cls.__mro__:
        if not klass.__module__.startswith("cupel_np"):
            continue
        for name, member in vars(klass).items():
            if name.startswith("_") or name in seen:
                continue
            seen.add(name)
            if isinstance(member, staticmethod | classmethod):
                member = member.__func__
            if isinstance(member, property | types.FunctionType):
                yield name, getattr(cls, name) if not isinstance(member, property) else member


def missing_docstrings(module) -> list[str]:
    """Every public name of ``module.__all__`` (and public member of its classes) with no
    docstring, as ``module.name`` / ``module.Class.member``."""
    out = []
    for name in module.__all__:
        obj = getattr(module, name)
        where = f"{module.__name__}.{name}"
        if isinstance(obj, type | types.FunctionType | types.BuiltinFunctionType) or callable(obj):
            if not _own_doc(obj):
                out.append(where)
            if isinstance(obj, type):
                for member_name, member in _members(obj):
                    if not _own_doc(member):
                        out.append(f"{where}.{member_name}")
        elif not isinstance(obj, types.ModuleType) and not name.startswith("__") and not _data_documented(name):
            out.append(f"{where} (a constant: give it a '#:' comment above its assignment)")
    return out


def test_every_wing_face_is_checked():
    """A wing added later is checked too: every subpackage directly under cupel_np/ but the
    ground's data/ is in FACES."""
    wings = {f"cupel_np.{p.parent.name}" for p in PACKAGE.glob("*/__init__.py") if p.parent.name != "data"}
    assert len(wings) >= 8 and wings <= set(FACES), f"wing faces missing from FACES: {sorted(wings - set(FACES))}"


def _face(name: str):
    if name == "cupel_np.tuning":
        pytest.importorskip("optuna")
    if name == "cupel_np.dask":
        pytest.importorskip("dask")
    return importlib.import_module(name)


@pytest.mark.parametrize("face", FACES)
def test_every_public_name_has_a_docstring(face):
    mod = _face(face)
    assert mod.__doc__, f"{face} has no module docstring"
    assert hasattr(mod, "__all__"), f"{face} has no __all__"
    bare = missing_docstrings(mod)
    assert not bare, "public names without a docstring:\n" + "\n".join(bare)


def test_the_docstring_check_finds_bare_names():
    mod = types.ModuleType("fake", "A fake face.")

    def documented():
        """Has one."""

    def bare():
        pass

    class Thing:
        """A class with a bare method and a bare property."""

        def method(self):
            pass

        @property
        def prop(self):
            return 1

        def _private(self):
            pass

    Thing.__module__ = "cupel_np.fake"
    mod.documented, mod.bare, mod.Thing = documented, bare, Thing
    mod.UNDOCUMENTED_CONSTANT_XYZ = 3
    mod.__all__ = ["documented", "bare", "Thing", "UNDOCUMENTED_CONSTANT_XYZ"]
    assert missing_docstrings(mod) == [
        "fake.bare",
        "fake.Thing.method",
        "fake.Thing.prop",
        "fake.UNDOCUMENTED_CONSTANT_XYZ (a constant: give it a '#:' comment above its assignment)",
    ]


def test_a_dataclass_generated_signature_is_not_a_docstring():
    from dataclasses import dataclass

    @dataclass
    class Bare:
        x: int

    assert _own_doc(Bare) is None


def _error_classes_in_source() -> list[str]:
    """``file:Class`` of every class of the package named ``*Error`` or ``*Warning``."""
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and node.name.endswith(("Error", "Warning")):
                out.append(f"{path.relative_to(PACKAGE).as_posix()}:{node.name}")
    return out


def test_every_error_and_warning_class_lives_in_errors_py():
    found = _error_classes_in_source()
    assert any(f.startswith("errors.py:") for f in found)  # the walk sees errors.py itself
    elsewhere = [f for f in found if not f.startswith("errors.py:") and f not in ERRORS_ELSEWHERE]
    assert not elsewhere, "error/warning classes outside cupel_np/errors.py (move them there):\n" + "\n".join(elsewhere)


def test_every_error_and_warning_class_is_exported():
    classes = [
        n
        for n, obj in vars(cupel_np.errors).items()
        if isinstance(obj, type) and issubclass(obj, BaseException | Warning) and obj.__module__ == "cupel_np.errors"
    ]
    assert len(classes) >= 15
    missing = [
        n for n in classes if n not in cupel_np.__all__ or getattr(cupel_np, n) is not getattr(cupel_np.errors, n)
    ]
    assert not missing, f"errors.py classes not exported from cupel_np: {missing}"


def test_old_names_stay_as_aliases():
    from cupel_np.io import importers, outdir
    from cupel_np.model import budget, grid
    from cupel_np.report import from_dir, from_result

    assert cupel_np.Sweep is cupel_np.VariantGrid is grid.Sweep
    assert outdir.OutputExistsError is cupel_np.OutputExistsError
    assert importers.BadTranscriptError is cupel_np.BadTranscriptError
    assert budget.require_int is budget.require_budget_int
    assert from_dir.page_data is from_dir.dir_page_data
    assert from_result.page_data is from_result.result_page_data
