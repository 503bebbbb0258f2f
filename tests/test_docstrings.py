"""Every public name has a docstring: each name in ``cupel_np.__all__`` and in every wing's
``__all__``, and the public methods and properties of the classes among them (as stumpy's
``docstring.py`` walks its ``__all__``). The subpackage faces below the wings that define
``__all__`` (``cupel_np.io.importers``, ``cupel_np.engine.scorers``, ...: found in the source,
so a new one is checked too) are held to the same rule.

A constant has no ``__doc__`` of its own. A subpackage face documents each constant it exports
in a ``Constants:`` section of its module docstring, one ``* ``NAME``: what it is`` entry each
(visible at runtime, in ``help()``; the section names no constant the face does not export). A
wing face may instead give it a ``#:`` comment on the line above its assignment (the form
Sphinx reads).

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


#: a ``Constants:`` section entry: ``* ``NAME``: text``
_CONSTANT_ENTRY = re.compile(r"^\s*\*\s+``([A-Za-z_][A-Za-z0-9_]*)``\s*:\s*(\S.*)$")


def documented_constants(doc: str | None) -> dict[str, str]:
    """NAME -> its text, for each entry of the ``Constants:`` section of a module docstring
    (the section runs from a line ``Constants:`` to the first line that is neither blank, an
    entry, nor an entry's indented continuation)."""
    out: dict[str, str] = {}
    inside = False
    for line in (doc or "").splitlines():
        if line.strip() == "Constants:":
            inside = True
            continue
        if not inside:
            continue
        m = _CONSTANT_ENTRY.match(line)
        if m:
            out[m.group(1)] = m.group(2)
        elif line.strip() and not line.startswith((" ", "\t")):
            break
    return out


def _is_constant(name: str, obj) -> bool:
    return not (
        isinstance(obj, type | types.FunctionType | types.BuiltinFunctionType | types.ModuleType)
        or callable(obj)
        or name.startswith("__")
    )


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


def missing_docstrings(module, *, comments: bool = True) -> list[str]:
    """Every public name of ``module.__all__`` (and public member of its classes) with no
    docstring, as ``module.name`` / ``module.Class.member``. A constant is documented by an
    entry of the module docstring's ``Constants:`` section, or (``comments``) by a ``#:``
    comment above its assignment; an entry naming no exported constant is reported too."""
    out = []
    entries = documented_constants(module.__doc__)
    constants = {n for n in module.__all__ if _is_constant(n, getattr(module, n))}
    for name in sorted(set(entries) - constants):
        out.append(f"{module.__name__}: the Constants section names {name!r}, which is not an exported constant")
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
        elif name in constants and name not in entries and not (comments and _data_documented(name)):
            how = "an entry in the module docstring's Constants section" + (
                " or a '#:' comment above its assignment" if comments else ""
            )
            out.append(f"{where} (a constant: give it {how})")
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


def subpackage_faces() -> list[str]:
    """Every package below a wing (``cupel_np/<wing>/<sub>/``, any depth) whose ``__init__.py``
    assigns ``__all__``, read from the source (nothing imported to find them)."""
    out = []
    for p in sorted(PACKAGE.rglob("__init__.py")):
        rel = p.parent.relative_to(PACKAGE)
        if len(rel.parts) >= 2 and re.search(r"^__all__\s*(:[^=]*)?=", p.read_text(), re.M):
            out.append("cupel_np." + ".".join(rel.parts))
    return out


def test_the_subpackage_faces_are_found():
    found = subpackage_faces()
    assert {"cupel_np.io.importers", "cupel_np.engine.scorers"} <= set(found)
    assert not set(found) & set(FACES)


@pytest.mark.parametrize("face", subpackage_faces())
def test_every_name_a_subpackage_face_exports_has_a_docstring(face):
    mod = _face(face)
    assert mod.__doc__, f"{face} has no module docstring"
    bare = missing_docstrings(mod, comments=False)  # constants: in the module docstring, seen at runtime
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
        "fake.UNDOCUMENTED_CONSTANT_XYZ (a constant: give it an entry in the module docstring's Constants "
        "section or a '#:' comment above its assignment)",
    ]


def test_the_constants_section_documents_constants_at_runtime():
    mod = types.ModuleType("fake", "A fake face.\n\nConstants:\n\n* ``KNOWN_XYZ``: a documented one,\n  on two lines\n")
    mod.KNOWN_XYZ, mod.BARE_XYZ = 1, 2
    mod.__all__ = ["KNOWN_XYZ", "BARE_XYZ"]
    assert missing_docstrings(mod, comments=False) == [
        "fake.BARE_XYZ (a constant: give it an entry in the module docstring's Constants section)"
    ]
    mod.__doc__ += "* ``GONE_XYZ``: a constant no longer exported\n"
    mod.__all__ = ["KNOWN_XYZ"]
    assert missing_docstrings(mod, comments=False) == [
        "fake: the Constants section names 'GONE_XYZ', which is not an exported constant"
    ]
    # an entry outside the section, or with no text, documents nothing
    mod2 = types.ModuleType("fake2", "* ``KNOWN_XYZ``: not in a section\n\nConstants:\n\n* ``OTHER_XYZ``:\n")
    mod2.KNOWN_XYZ = mod2.OTHER_XYZ = 1
    mod2.__all__ = ["KNOWN_XYZ", "OTHER_XYZ"]
    assert len(missing_docstrings(mod2, comments=False)) == 2


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
