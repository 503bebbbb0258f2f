"""Policies as data: validated, immutable, hashable scorer / slicer / placer specs.

``Policy.from_dict`` takes a pipeline conformance vector's ``[config]`` table (see
EXTENSIONS.md); ``to_dict`` writes the same shape back. ``Policy.from_json_file`` /
``from_toml_file`` load files, and ``Policy.from_dotnet_json`` reads the .NET
``Wollax.Cupel.Json`` policy shape.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from cupel_np._files import TOO_DEEP, StrPath
from cupel_np._fs import as_path
from cupel_np.errors import InvalidConfigError, InvalidInputTypeError
from cupel_np.model.dotnet import (
    DOTNET_POLICY_KEYS,
    DOTNET_QUOTA_KEYS,
    DOTNET_SCORER_KEYS,
    dotnet_policy_fields,
)
from cupel_np.model.fields import require_bool, require_keys, require_mapping, require_str, require_weight
from cupel_np.model.scorers import CompositeScorer, Scorer, composite_from_list, scorer_from_dict
from cupel_np.model.slicers import (
    CountConstrainedKnapsackSlice,
    CountQuotaSlice,
    GreedySlice,
    KnapsackSlice,
    QuotaSlice,
    Slicer,
    slicer_from_dict,
    slicer_option_keys,
)
from cupel_np.text import ascii_fold

PLACERS = ("chronological", "u_shaped")
OVERFLOW_STRATEGIES = ("throw", "truncate", "proceed")


def _placer_name(v) -> str:
    s = require_str("placer", v)
    norm = ascii_fold(s).replace("-", "_")
    if norm == "ushaped":
        norm = "u_shaped"
    if norm not in PLACERS:
        raise InvalidConfigError(f"unknown placer {s!r}; expected one of: chronological, u_shaped")
    return norm


# ----------------------------------------------------------------------------- policy
@dataclass(frozen=True)
class Policy:
    """A complete selection policy. The budget is never part of it."""

    scorer: Scorer
    slicer: Slicer = field(default_factory=GreedySlice)
    placer: str = "chronological"
    deduplication: bool = True
    overflow_strategy: str = "throw"
    name: str | None = None
    description: str | None = None
    #: atomic groups (a cupel_np extension, docs/tool-pairs.md): the items of a set sharing a
    #: non-null value of this column are selected whole or not at all; None: every item alone
    groups: str | None = None

    def __post_init__(self):
        if not isinstance(self.scorer, Scorer):
            raise InvalidInputTypeError(f"Policy.scorer must be a scorer spec, got {self.scorer!r}")
        if not isinstance(
            self.slicer, (GreedySlice, KnapsackSlice, QuotaSlice, CountQuotaSlice, CountConstrainedKnapsackSlice)
        ):
            raise InvalidInputTypeError(f"Policy.slicer must be a slicer spec, got {self.slicer!r}")
        object.__setattr__(self, "placer", _placer_name(self.placer))
        object.__setattr__(self, "deduplication", require_bool("Policy.deduplication", self.deduplication))
        ov = ascii_fold(require_str("overflow_strategy", self.overflow_strategy))
        if ov not in OVERFLOW_STRATEGIES:
            raise InvalidConfigError(
                f"unknown overflow_strategy {self.overflow_strategy!r}; expected throw, truncate or proceed"
            )
        object.__setattr__(self, "overflow_strategy", ov)
        for k in ("name", "description"):
            v = getattr(self, k)
            if v is not None:
                require_str(f"Policy.{k}", v)
        if self.groups is not None and (not isinstance(self.groups, str) or not self.groups.strip()):
            raise InvalidConfigError(f"Policy.groups must be a column name (or None), got {self.groups!r}")

    # -- dict / file round trips --------------------------------------------------------
    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Policy:
        """From a pipeline vector's ``[config]`` table (EXTENSIONS.md) + name/description. A key
        no reader knows, at any depth, is an error naming it and where it is."""
        try:
            return policy_from_dict(d)
        except RecursionError:
            raise InvalidConfigError(f"policy: {TOO_DEEP}") from None

    def to_dict(self) -> dict[str, Any]:
        """The policy as its dict (JSON/TOML policy file) form; ``policy_from_dict`` reads it
        back."""
        sc = self.scorer
        if isinstance(sc, CompositeScorer):
            scorers = [dict(s.to_dict(), weight=w) for s, w in sc.entries]
        else:
            scorers = [dict(sc.to_dict(), weight=1.0)]
        d: dict[str, Any] = dict(self.slicer.to_dict())
        d.update(
            placer=self.placer,
            deduplication=self.deduplication,
            overflow_strategy=self.overflow_strategy,
            scorers=scorers,
        )
        if self.name is not None:
            d["name"] = self.name
        if self.description is not None:
            d["description"] = self.description
        if self.groups is not None:
            d["groups"] = self.groups
        return d

    def to_json(self) -> str:
        """The policy as an indented JSON policy file (``to_dict`` serialised)."""
        return json.dumps(self.to_dict(), default=json_default, indent=2)

    @classmethod
    def from_json(cls, text: str) -> Policy:
        """A Policy from the text of a JSON policy file. Raises ``InvalidConfigError`` for
        malformed JSON or a bad field (named)."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise InvalidConfigError(f"malformed policy JSON: {e}") from None
        except RecursionError:
            raise InvalidConfigError(f"policy JSON: {TOO_DEEP}") from None
        if is_dotnet_shape(data):
            return cls.from_dotnet_json(data)
        return cls.from_dict(data)

    @classmethod
    def from_toml(cls, text: str) -> Policy:
        """A Policy from the text of a TOML policy file. Raises ``InvalidConfigError`` for
        malformed TOML or a bad field (named)."""
        import tomli

        try:
            data = tomli.loads(text)
        except tomli.TOMLDecodeError as e:
            raise InvalidConfigError(f"malformed policy TOML: {e}") from None
        except RecursionError:
            raise InvalidConfigError(f"policy TOML: {TOO_DEEP}") from None
        if "config" in data and "scorers" not in data:
            require_keys("policy TOML", data, ("config", "name", "description"))
            data = dict(require_mapping("[config]", data["config"]), **{k: v for k, v in data.items() if k != "config"})
        return cls.from_dict(data)

    @classmethod
    def from_file(cls, path: StrPath) -> Policy:
        """A Policy from a ``.toml`` or ``.json`` policy file (by suffix; anything else is read
        as JSON). Raises ``InvalidConfigError`` naming the file when it cannot be read or
        parsed."""
        p = as_path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as e:
            raise InvalidConfigError(f"cannot read policy file {str(p)!r}: {e.strerror}") from None
        except UnicodeDecodeError as e:
            raise InvalidConfigError(
                f"{p}: not UTF-8 text (byte {e.start}: {e.reason}); save the policy file as UTF-8"
            ) from None
        try:
            if p.suffix.lower() == ".toml":
                return cls.from_toml(text)
            return cls.from_json(text)
        except InvalidConfigError as e:
            raise InvalidConfigError(f"{p}: {e}") from None

    @classmethod
    def from_dotnet_json(cls, data: Mapping[str, Any]) -> Policy:
        """A Policy from the .NET ``Wollax.Cupel.Json`` policy shape (a parsed dict); see
        ``policy_from_dotnet``."""
        return policy_from_dotnet(data)


def json_default(o):
    if isinstance(o, datetime):
        return o.isoformat()
    raise TypeError(f"not JSON serializable: {o!r}")


#: keys of a policy table besides its slicer's options. ``bucket_size`` is one of them: the
#: conformance format lists it among the flat [config] options with a default of 100 for every
#: slicer (upstream's vectors and grids carry it beside slicers that do not read it)
POLICY_KEYS = frozenset(
    {
        "scorers",
        "slicer",
        "placer",
        "deduplication",
        "overflow_strategy",
        "name",
        "description",
        "bucket_size",
        "groups",
    }
)


def policy_from_dict(d: Mapping[str, Any], where: str = "policy config") -> Policy:
    """A Policy from a pipeline vector's ``[config]`` table (EXTENSIONS.md) + name/description;
    every key is checked (``scorers[1]: unknown key 'wieght' ... (did you mean 'weight'?)``)."""
    if not isinstance(d, Mapping):
        raise InvalidInputTypeError(f"{where} must be a table/dict, got {type(d).__name__}")
    slicer = slicer_from_dict(d, where, extra_keys=POLICY_KEYS)
    scorers = d.get("scorers")
    if not scorers:
        raise InvalidConfigError(f"{where} needs a non-empty 'scorers' list")
    if not isinstance(scorers, list):
        raise InvalidInputTypeError(f"'scorers' must be a list of scorer tables, got {type(scorers).__name__}")
    if len(scorers) == 1:
        scorer = scorer_from_dict(scorers[0], "scorers[0]")
        # one scorer is used alone (its weight is ignored), but a weight that no list would
        # accept is refused here too, as it is with two scorers
        require_weight("scorers[0].weight", scorers[0].get("weight", 1.0), positive=True)
    else:
        scorer = composite_from_list(scorers, "scorers")
    return Policy(
        scorer=scorer,
        slicer=slicer,
        placer=d.get("placer", "chronological"),
        deduplication=d.get("deduplication", True),
        overflow_strategy=d.get("overflow_strategy", "throw"),
        name=d.get("name"),
        description=d.get("description"),
        groups=d.get("groups"),
    )


def is_dotnet_shape(data: Any) -> bool:
    """Whether a policy object is in the .NET shape: a key only that shape has, at the top or
    in a scorer or quota entry."""
    if not isinstance(data, Mapping):
        return False
    slicer_keys = slicer_option_keys()  # e.g. "quotas": both shapes
    if any(k in data for k in DOTNET_POLICY_KEYS - POLICY_KEYS - slicer_keys):
        return True
    entries = [e for k in ("scorers", "quotas") if isinstance(data.get(k), list) for e in data[k]]
    only_dotnet = (DOTNET_SCORER_KEYS | DOTNET_QUOTA_KEYS) - {"type", "weight", "kind"}
    return any(isinstance(e, Mapping) and any(k in e for k in only_dotnet) for e in entries)


def policy_from_dotnet(d: Mapping[str, Any]) -> Policy:
    """Read a policy written by .NET ``CupelJsonSerializer`` (or by hand in that shape). Keys
    are upstream's JSON property names; any other key is an error."""
    return Policy(**dotnet_policy_fields(d))
