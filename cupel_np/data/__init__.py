"""Files shipped inside the package: the demo's sample corpus and example policy/grid files.

``data/`` at the repository top level holds symlinks to these (one copy only);
``data/make_sample.py`` regenerates the corpus.
"""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).resolve().parent


def sample_path() -> Path:
    """The sample corpus: 300 generated coding-agent sessions (set column ``session_id``)."""
    return _HERE / "sample_sessions.parquet"


def example_path(name: str) -> Path:
    """An example file by name: ``policies.toml`` or ``grid.toml``."""
    from cupel_np.errors import InvalidConfigError

    p = _HERE / "examples" / name
    if not p.is_file():
        names = sorted(x.name for x in (_HERE / "examples").glob("*.toml"))
        raise InvalidConfigError(f"no example file {name!r}; shipped: {', '.join(names)}")
    return p
