"""Policy, variants and grid files (TOML/JSON) read into model objects: ``load_policies_file``
(labelled policies: ``sensitivity --policies``) and ``load_grid_file`` (a ``Sweep`` grid:
``sweep --grid``). Every key is checked; errors name the file, the entry and the key."""

from __future__ import annotations

from cupel_np._files import read_data_file
from cupel_np.errors import CupelError, InvalidConfigError


def _read_data_file(path) -> object:
    return read_data_file(path, default="json")


def _policy_from_obj(obj, where: str):
    """One policy of a policies or grid file (its ``label`` already taken off): ``preset =
    "name"``, a ``config`` table, the config keys inline, or a .NET policy object. Every key is
    checked; errors are prefixed with ``where``."""
    from cupel_np.model.fields import require_keys
    from cupel_np.model.policy import Policy, is_dotnet_shape

    if not isinstance(obj, dict):
        raise InvalidConfigError(f"{where}: a policy must be a table/object")
    try:
        if "preset" in obj:
            from cupel_np.model.presets import preset

            require_keys("entry", obj, ("preset",), what="beside 'preset'")
            return preset(obj["preset"])
        if "config" in obj:
            require_keys("entry", obj, ("config",), what="beside 'config'")
            return Policy.from_dict(obj["config"])
        if is_dotnet_shape(obj):
            return Policy.from_dotnet_json(obj)
        return Policy.from_dict(obj)
    except CupelError as e:
        raise type(e)(f"{where}: {e}") from None


def _labelled(e, where: str) -> tuple[str, dict]:
    """A ``[[variants]]`` / ``[[policies]]`` entry: its label and the rest of the entry."""
    if not isinstance(e, dict) or not e.get("label"):
        raise InvalidConfigError(f"{where} needs a 'label'")
    if not isinstance(e["label"], str):
        raise InvalidConfigError(f"{where}: 'label' must be a string, got {e['label']!r}")
    return e["label"], {k: v for k, v in e.items() if k != "label"}


def load_policies_file(path) -> list[tuple[str, object]]:
    """Labelled policies from a JSON/TOML file: ``[[variants]]`` tables (``label`` plus
    ``config``, ``preset``, or a .NET policy object), or a mapping label -> policy. A key no
    reader knows is an error naming the file, the entry and the key."""
    from cupel_np.model.fields import require_keys

    data = _read_data_file(path)
    if isinstance(data, dict) and "variants" in data:
        require_keys(str(path), data, ("variants",), what="beside 'variants'")
        entries = data["variants"]
        if not isinstance(entries, list):
            raise InvalidConfigError(f"{path}: 'variants' must be a list")
        out = []
        for i, e in enumerate(entries):
            label, rest = _labelled(e, f"{path}: variants[{i}]")
            out.append((label, _policy_from_obj(rest, f"{path}: variants[{i}] ({label!r})")))
        return out
    if isinstance(data, dict):
        return [(k, _policy_from_obj(v, f"{path}: variant {k!r}")) for k, v in data.items()]
    raise InvalidConfigError(f"{path}: expected 'variants' or a mapping of label -> policy")


GRID_KEYS = ("presets", "policies", "weights", "slicers", "placers", "budgets", "groups", "set_column")


def _grid_weights(path, data: dict):
    weights = data.get("weights")
    if isinstance(weights, dict):
        weights = [weights]
    if weights is not None and not (isinstance(weights, list) and all(isinstance(w, dict) for w in weights)):
        raise InvalidConfigError(f"{path}: 'weights' must be a list of tables of scorer type -> weight")
    for i, w in enumerate(weights or []):
        for k, x in w.items():
            if isinstance(x, bool) or not isinstance(x, (int, float)):
                raise InvalidConfigError(f"{path}: weights[{i}].{k} must be a number, got {x!r}")
    return weights


def _grid_policies(path, data: dict) -> dict:
    from cupel_np.model.presets import preset

    presets = data.get("presets", [])
    if isinstance(presets, str):
        presets = [presets]
    if not isinstance(presets, list):
        raise InvalidConfigError(f"{path}: 'presets' must be a list of preset names")
    policies = {}
    for name in presets:
        policies[str(name)] = preset(str(name))
    entries = data.get("policies", [])
    if not isinstance(entries, list):
        raise InvalidConfigError(f"{path}: 'policies' must be a list of [[policies]] tables")
    for i, e in enumerate(entries):
        label, rest = _labelled(e, f"{path}: policies[{i}]")
        policies[label] = _policy_from_obj(rest, f"{path}: policies[{i}] ({label!r})")
    if not policies:
        raise InvalidConfigError(f"{path}: the grid needs 'presets' and/or 'policies'")
    return policies


def _grid_budgets(path, data: dict) -> list:
    from cupel_np.model.budget import ContextBudget

    budgets = []
    entries = data.get("budgets", [])
    if not isinstance(entries, list):
        raise InvalidConfigError(f"{path}: 'budgets' must be a list of [[budgets]] tables")
    for i, b in enumerate(entries):
        if not isinstance(b, dict):
            raise InvalidConfigError(f"{path}: budgets[{i}] must be a table")
        try:
            budgets.append(ContextBudget.from_dict(b))
        except CupelError as e:
            raise type(e)(f"{path}: budgets[{i}]: {e}") from None
    if not budgets:
        raise InvalidConfigError(f"{path}: the grid needs at least one [[budgets]] entry")
    return budgets


def load_grid_file(path):
    """A Sweep grid (see docs/cli.md 'Grid files') plus the grid's default set column. A key no
    reader knows, at any depth, is an error naming the file, where it is and the key."""
    from cupel_np.model.fields import require_keys
    from cupel_np.model.grid import Sweep

    data = _read_data_file(path)
    if not isinstance(data, dict):
        raise InvalidConfigError(f"{path}: a grid file must be a table/object")
    require_keys(str(path), data, GRID_KEYS, what="in a grid file")
    policies = _grid_policies(path, data)
    weights = _grid_weights(path, data)
    budgets = _grid_budgets(path, data)
    try:
        grid = Sweep(
            policies,
            weights=weights,
            slicers=data.get("slicers"),
            placers=data.get("placers"),
            budgets=budgets,
            groups=data.get("groups"),
        )
        grid.variants()
    except CupelError as e:
        raise type(e)(f"{path}: {e}") from None
    return grid, data.get("set_column")
