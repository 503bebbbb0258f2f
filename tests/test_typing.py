"""The public API is annotated: every function and public method that ``import cupel_np`` and
``cupel_np.io`` export has a type hint on each parameter and on its return value (mypy, run by
.ci/run with the configuration in pyproject.toml, checks that the hints hold)."""

import dataclasses
import inspect

import cupel_np
import cupel_np.io


def _unannotated(fn, qual: str) -> list[str]:
    sig = inspect.signature(fn)
    out = [
        f"{qual}({name})"
        for name, p in sig.parameters.items()
        if name not in ("self", "cls") and p.annotation is inspect.Parameter.empty
    ]
    if fn.__name__ != "__init__" and sig.return_annotation is inspect.Signature.empty:
        out.append(f"{qual} -> ?")
    return out


def _public_callables(obj, name: str):
    """``(function, qualified name)`` for a function, or a class's public methods (its
    ``__init__`` unless a dataclass generated it), properties and class/static methods."""
    if inspect.isfunction(obj):
        yield obj, name
        return
    if not inspect.isclass(obj) or issubclass(obj, BaseException):
        return
    for attr, value in vars(obj).items():
        if attr.startswith("_") and attr != "__init__":
            continue
        if attr == "__init__" and dataclasses.is_dataclass(obj):
            continue
        if isinstance(value, staticmethod | classmethod):
            value = value.__func__
        elif isinstance(value, property):
            value = value.fget
        if inspect.isfunction(value):
            yield value, f"{name}.{attr}"


def unannotated_public_api() -> list[str]:
    out = []
    for module in (cupel_np, cupel_np.io):
        for name in module.__all__:
            for fn, qual in _public_callables(getattr(module, name), f"{module.__name__}.{name}"):
                out += _unannotated(fn, qual)
    return sorted(set(out))


def test_every_public_callable_is_annotated():
    missing = unannotated_public_api()
    assert not missing, "\n".join(missing)


def test_the_check_sees_a_missing_hint():
    def f(a, b: int):
        return b

    class C:
        def method(self, x: int) -> int:
            return x

        def _private(self, y):
            return y

    assert _unannotated(f, "f") == ["f(a)", "f -> ?"]
    assert [q for _, q in _public_callables(C, "C")] == ["C.method"]
    assert _unannotated(C.method, "C.method") == []
