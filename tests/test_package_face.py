"""``cupel_np/__init__.py`` (the package face): every public name is imported on first use,
so ``import cupel_np`` (and the ``cupel-np`` command, which starts a cold run's compile child
before the library is imported) loads nothing else; every name still resolves, once, to the
object of the module that defines it."""

import ast
import json
import subprocess
import sys
from pathlib import Path

import cupel_np

INIT = Path(cupel_np.__file__)


def test_import_cupel_np_loads_nothing_else():
    code = (
        "import json, sys, cupel_np\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('cupel_np', 'numpy', 'numba', 'pyarrow'))))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == ["cupel_np", "cupel_np._version"]


def _type_checking_imports() -> dict[str, str]:
    """name -> module of the imports under ``if TYPE_CHECKING:`` in the face's source."""
    out = {}
    for node in ast.parse(INIT.read_text()).body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom) and imp.module
                out.update({a.asname or a.name: imp.module for a in imp.names})
    return out


def test_the_name_table_matches_the_typed_imports_and_all():
    """``_EXPORTS`` (what runs) names the same modules as the imports type checkers read, and
    every name of ``__all__`` but ``__version__``."""
    assert cupel_np._EXPORTS == _type_checking_imports()
    assert set(cupel_np._EXPORTS) | {"__version__"} == set(cupel_np.__all__)
    assert len(cupel_np.__all__) == len(set(cupel_np.__all__))


def test_every_public_name_resolves_in_a_fresh_interpreter():
    """In reverse order (a name whose module imports another face name first), each name is
    its module's object; then ``from cupel_np import *``, ``dir`` and the subpackages."""
    code = (
        "import importlib, json, sys, cupel_np\n"
        "bad = [n for n in reversed(cupel_np.__all__) if n != '__version__' and "
        "getattr(cupel_np, n) is not getattr(importlib.import_module(cupel_np._EXPORTS[n]), n)]\n"
        "ns = {}\n"
        "exec('from cupel_np import *', ns)\n"
        "bad += [n for n in cupel_np.__all__ if n not in ns or n not in dir(cupel_np)]\n"
        "sub = [cupel_np.io.__name__, cupel_np.model.items.__name__, cupel_np.engine.__name__]\n"
        "try:\n"
        "    cupel_np.no_such_name\n"
        "    missing = 'found'\n"
        "except AttributeError as e:\n"
        "    missing = str(e)\n"
        "print(json.dumps({'bad': bad, 'sub': sub, 'missing': missing}))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out == {
        "bad": [],
        "sub": ["cupel_np.io", "cupel_np.model.items", "cupel_np.engine"],
        "missing": "module 'cupel_np' has no attribute 'no_such_name'",
    }


def test_a_name_is_kept_after_its_first_use():
    policy = cupel_np.Policy
    assert vars(cupel_np)["Policy"] is policy
