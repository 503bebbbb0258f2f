"""ContextItem's field checks: each takes the value a caller gave and returns it in its stored
form (or raises ``InvalidInputTypeError`` / ``InvalidConfigError`` naming the field). The
constructor (``items.ContextItem.__post_init__``) runs one only when a field's value is not
its usual kind (its fast paths accept nothing these would refuse)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

from cupel_np.errors import InvalidConfigError, InvalidInputTypeError
from cupel_np.model.fields import (
    require_int,
    require_mapping,
    require_nonblank,
    require_str,
    require_token_count,
)


def encodable(field_name: str, s: str) -> None:
    """Strings must be valid Unicode text (UTF-8 encodable): a lone surrogate is not."""
    try:
        s.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InvalidConfigError(
            f"ContextItem.{field_name} is not valid Unicode text: lone surrogate "
            f"{s[e.start]!r} at character {e.start} (value {s[:40]!r})"
        ) from None


I64_MIN, I64_MAX = -(2**63), 2**63 - 1
#: the metadata of every item built without any: a view over an empty dict no one else holds
NO_METADATA: Mapping[str, str] = MappingProxyType({})


def check_content(content: Any) -> None:
    """A non-empty string of valid Unicode."""
    require_str("ContextItem.content", content)
    if content == "":
        raise InvalidConfigError("ContextItem.content must be a non-empty string")
    encodable("content", content)


def check_tokens(tokens: Any, content: Any) -> int:
    """An integer within ±2**62, as an ``int`` (the message quotes the item's content)."""
    tokens = require_int("ContextItem.tokens", tokens, suffix=f" (content {content[:40]!r})")
    return require_token_count("ContextItem.tokens", tokens)


def check_label(name: str, v: Any) -> None:
    """``kind`` and ``source``: a string, not blank, valid Unicode."""
    encodable(name, require_nonblank(f"ContextItem.{name}", v))


def check_i64(name: str, v: Any) -> int:
    """``priority`` and ``original_tokens`` when given: an integer that fits in 64 bits."""
    v = require_int(f"ContextItem.{name}", v, optional=True)
    if not I64_MIN <= v <= I64_MAX:
        raise InvalidConfigError(f"ContextItem.{name} must fit in 64 bits, got {v}")
    return v


def check_tags(tags: Any) -> tuple[str, ...]:
    """Any iterable of strings but a string itself, as a tuple."""
    if isinstance(tags, str) or not isinstance(tags, Iterable):
        raise InvalidInputTypeError(f"ContextItem.tags must be a sequence of strings, got {type(tags).__name__}")
    tags = tuple(tags)
    for t in tags:
        if not isinstance(t, str):
            raise InvalidInputTypeError(f"ContextItem.tags must contain strings, got {type(t).__name__} {t!r}")
        encodable("tags", t)
    return tags


def check_metadata(metadata: Any) -> Mapping[str, str]:
    """A mapping of strings to strings (None: empty), as a read-only view of a copy."""
    md = require_mapping("ContextItem.metadata", metadata if metadata is not None else {}, "a mapping of str -> str")
    for k, v in md.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise InvalidInputTypeError(
                f"ContextItem.metadata must map strings to strings, got {k!r}: {v!r} ({type(v).__name__})"
            )
        encodable("metadata", k)
        encodable("metadata", v)
    return MappingProxyType(dict(md))


def check_timestamp(ts: Any) -> datetime:
    """A timezone-aware datetime, converted to UTC."""
    if not isinstance(ts, datetime):
        raise InvalidInputTypeError(f"ContextItem.timestamp must be a datetime or None, got {type(ts).__name__}")
    if ts.tzinfo is None or ts.utcoffset() is None:
        raise InvalidConfigError(
            f"ContextItem.timestamp must be timezone-aware (UTC semantics), got naive "
            f"{ts.isoformat()}; use datetime(..., tzinfo=timezone.utc)"
        )
    return ts.astimezone(UTC)
