"""The user's own scorer names: ``register_scorer`` / ``unregister_scorer`` enter a factory in
(and take it out of) the one registry of scorer type names (``_SCORERS`` in
``cupel_np.model.scorers``), ``_registered_from_dict`` builds a registered name's scorer from
policy data (one object per name and options), and ``load_plugins`` imports the modules and
files that register them (``cupel-np --plugin``).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from typing import Any

from cupel_np.errors import InvalidConfigError, InvalidInputTypeError
from cupel_np.model.scorers import _SCORERS, FunctionScorer, Scorer, ScorerType
from cupel_np.text import ascii_fold

#: keys every registered scorer table may carry besides its factory's options
REGISTERED_SCORER_KEYS = ("type", "weight")


# ----------------------------------------------------------------------------- register_scorer
#: scorers registered factories built, by (name, options): the same options give the same object
_MADE: dict[tuple[str, str], Scorer] = {}
_LOCK = threading.Lock()


def _norm(name: str) -> str:
    return ascii_fold(name).replace("-", "_")


def register_scorer(name: str, factory: Callable[..., Scorer]) -> None:
    """Make ``{"type": name, ...options}`` usable in policy data, files, grids and the .NET
    shape: ``factory(**options)`` builds the scorer (a FunctionScorer, a ColumnScorer, a
    composite...). Names compare like built-in type names (ASCII case-insensitive, ``-`` =
    ``_``) and may not shadow a built-in type; registering a name again replaces its factory.
    The same options always give the same scorer object, so every policy naming it shares one
    computed column."""
    if not isinstance(name, str) or not name.strip():
        raise InvalidConfigError(f"register_scorer needs a non-empty name, got {name!r}")
    if not callable(factory):
        raise InvalidInputTypeError(f"register_scorer({name!r}) factory must be callable, got {factory!r}")
    key = _norm(name)
    known = _SCORERS.get(key)
    if known is not None and known.factory is None:
        raise InvalidConfigError(f"register_scorer: {name!r} is a built-in scorer type; choose another name")
    with _LOCK:
        _SCORERS[key] = ScorerType(_registered_from_dict, None, factory)
        for k in [k for k in _MADE if k[0] == key]:
            del _MADE[k]


def unregister_scorer(name: str) -> None:
    """Forget a registered name (tests and plugins that reload)."""
    key = _norm(name)
    with _LOCK:
        known = _SCORERS.get(key)
        if known is not None and known.factory is not None:
            del _SCORERS[key]
        for k in [k for k in _MADE if k[0] == key]:
            del _MADE[k]


def _registered_from_dict(e: Mapping[str, Any], where: str) -> Scorer:
    """A registered name's table: every key but ``type`` / ``weight`` is a factory option."""
    key = _norm(str(e.get("type")))
    known = _SCORERS.get(key)
    factory = None if known is None else known.factory
    if factory is None:  # pragma: no cover - the parser is only installed for registered names
        raise InvalidConfigError(f"{where}: scorer type {e.get('type')!r} is not registered")
    opts = {k: v for k, v in e.items() if k not in REGISTERED_SCORER_KEYS}
    try:
        okey = json.dumps(opts, sort_keys=True, default=str)
    except (TypeError, ValueError):
        raise InvalidConfigError(f"{where}: options of scorer {key!r} must be plain data") from None
    with _LOCK:
        made = _MADE.get((key, okey))
    if made is not None:
        return made
    try:
        made = factory(**opts)
    except TypeError as err:
        raise InvalidConfigError(f"{where}: registered scorer {key!r} rejected its options {opts!r}: {err}") from None
    if not isinstance(made, Scorer):
        raise InvalidInputTypeError(f"{where}: the factory of scorer {key!r} returned {made!r}, not a scorer spec")
    if isinstance(made, FunctionScorer) and made.source is None:
        object.__setattr__(made, "source", (key, okey))
    with _LOCK:
        return _MADE.setdefault((key, okey), made)


def load_plugins(modules) -> None:
    """Import each plugin (a module name, or a path to a ``.py`` file) so the scorers it
    registers with ``register_scorer`` can be named in policy data. A plugin is code and runs
    with the caller's rights. Any error loading one (not found, a syntax error, an exception
    it raises) is an ``InvalidConfigError`` naming the plugin.

    A file is loaded from that file alone (``importlib.util.spec_from_file_location``) as a
    module named after it; its directory is *not* put on ``sys.path``, so no other file there
    can shadow a module imported later. A file named like a module already imported
    (``json.py``) is refused. The plugin may import installed packages (and modules on
    ``sys.path``), not its neighbour files: put shared code in an installed package. With
    ``cloudpickle`` present (the ``dask`` extra) a file plugin's functions are pickled by value,
    so the workers of a Dask cluster need not import the file."""
    import importlib

    for spec in modules or ():
        if spec.endswith(".py") or "/" in spec or "\\" in spec:
            _load_plugin_file(spec)
            continue
        try:
            importlib.import_module(spec)
        except ImportError as e:
            raise InvalidConfigError(f"plugin {spec!r} cannot be imported: {e}") from None
        except Exception as e:  # noqa: BLE001 - the plugin's own error, reported as its
            raise InvalidConfigError(f"plugin {spec!r} failed while loading: {type(e).__name__}: {e}") from None


def _load_plugin_file(spec: str) -> None:
    import importlib.util
    import sys
    from pathlib import Path

    path = Path(spec).resolve()
    if not path.is_file():
        raise InvalidConfigError(f"plugin file not found: {spec}")
    name = path.stem
    if not name.isidentifier():
        raise InvalidConfigError(f"plugin file {spec}: {name!r} is not a module name; rename the file")
    loaded = sys.modules.get(name)
    if loaded is not None:
        file = getattr(loaded, "__file__", None)
        same = file is not None and Path(file).resolve() == path
        if not same:
            raise InvalidConfigError(
                f"plugin file {spec} is named like the module {name!r} that is already imported "
                f"({getattr(loaded, '__file__', None) or 'built in'}); rename the plugin file"
            )
    module_spec = importlib.util.spec_from_file_location(name, path)
    if module_spec is None or module_spec.loader is None:
        raise InvalidConfigError(f"plugin file {spec} cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    try:
        module_spec.loader.exec_module(module)
    except SyntaxError as e:
        sys.modules.pop(name, None)
        raise InvalidConfigError(f"plugin file {spec}: syntax error at line {e.lineno}: {e.msg}") from None
    except Exception as e:  # noqa: BLE001 - the plugin's own error, reported as its
        sys.modules.pop(name, None)
        raise InvalidConfigError(f"plugin file {spec} failed while loading: {type(e).__name__}: {e}") from None
    try:
        import cloudpickle  # type: ignore[import-untyped]
    except ImportError:
        return
    cloudpickle.register_pickle_by_value(module)
