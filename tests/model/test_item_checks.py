"""ContextItem's constructor checks each field on a fast path for the usual value and a full
check for the rest (``ContextItem.__post_init__``, ``model/item_checks.py``): whatever the
values, the item it builds, or the error it raises, must be what the full checks alone give,
run in the constructor's field order (``reference``). The full checks' own messages are
tested with the items (tests/model/test_items.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from types import MappingProxyType

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cupel_np as c
from cupel_np.errors import InvalidConfigError, InvalidInputTypeError
from cupel_np.model.fields import require_bool, require_number
from cupel_np.model.item_checks import (
    check_content,
    check_i64,
    check_label,
    check_metadata,
    check_tags,
    check_timestamp,
    check_tokens,
)


class Text(str):
    """A str subclass (the full checks accept it)."""


class Stamp(datetime):
    """A datetime subclass (pandas' Timestamp is one)."""


class NoOffset(timezone.__base__):  # a tzinfo whose utcoffset is None
    def utcoffset(self, dt):
        return None

    def tzname(self, dt):
        return None

    def dst(self, dt):
        return None


T0 = datetime(2024, 5, 1, 12, 30, tzinfo=UTC)
DEFAULTS = dict(
    kind="Message",
    source="Chat",
    priority=None,
    tags=(),
    metadata=None,
    timestamp=None,
    future_relevance_hint=None,
    pinned=False,
    original_tokens=None,
)


def reference(**kw):
    """The stored fields the full checks alone give (a dict), in the constructor's order."""
    f = dict(DEFAULTS, **kw)
    check_content(f["content"])
    f["tokens"] = check_tokens(f["tokens"], f["content"])
    check_label("kind", f["kind"])
    check_label("source", f["source"])
    for name in ("priority", "original_tokens"):
        if f[name] is not None:
            f[name] = check_i64(name, f[name])
    f["tags"] = check_tags(f["tags"])
    f["metadata"] = dict(check_metadata(f["metadata"]))
    if f["timestamp"] is not None:
        f["timestamp"] = check_timestamp(f["timestamp"])
    if f["future_relevance_hint"] is not None:
        f["future_relevance_hint"] = require_number(
            "ContextItem.future_relevance_hint", f["future_relevance_hint"], optional=True
        )
    f["pinned"] = require_bool("ContextItem.pinned", f["pinned"])
    return f


STRINGS = [
    "Message",
    "a",
    "~",
    "!x",
    " lead",
    "trail ",
    " ",
    "\t",
    "  ",
    "\u3000",
    "\x1c",
    "\x7f",
    "é",
    "x\ud800",
    "",
    Text("Doc"),
]
VALUES = {
    "content": ["hello", " ", "é", "a\ud800", "", Text("sub"), 5, None, b"bytes"],
    "tokens": [0, 7, -3, 2**62 - 1, 2**62, -(2**62) + 1, -(2**62), True, np.int64(9), 5.0, "5"],
    "kind": [*STRINGS, None, 3],
    "source": [*STRINGS, None],
    "priority": [None, 0, -5, 2**63 - 1, 2**63, -(2**63), -(2**63) - 1, True, np.int32(3), 1.0],
    "original_tokens": [None, 12, 2**63, np.int64(4), 2.0],
    "tags": [(), ("a",), ("a", "b"), ["x", "y"], ("é",), ("a\ud800",), "ab", (1,), None, (Text("t"),), ("",), (" ",)],
    "metadata": [
        None,
        {},
        {"k": "v"},
        {"k": 1},
        {1: "v"},
        MappingProxyType({"k": "v"}),
        {"é": "a\ud800"},
        [],
        {"": ""},
    ],
    "timestamp": [
        None,
        T0,
        T0.astimezone(timezone(timedelta(hours=2))),
        T0.replace(tzinfo=timezone(timedelta(0), "Z")),  # zero offset, not the UTC object
        T0.replace(tzinfo=None),
        T0.replace(tzinfo=NoOffset()),
        Stamp(2024, 5, 1, tzinfo=UTC),
        "2024-05-01",
    ],
    "future_relevance_hint": [None, 0.5, float("nan"), float("inf"), 1, True, np.float32(0.25), "x"],
    "pinned": [False, True, np.bool_(True), 0, None],
}
FIELDS = {name: st.sampled_from(values) for name, values in VALUES.items()}


def _outcome(f):
    try:
        return "ok", f()
    except (InvalidConfigError, InvalidInputTypeError) as e:
        return type(e), str(e)


@settings(max_examples=400, deadline=None)
@given(
    st.fixed_dictionaries(
        {"content": FIELDS["content"], "tokens": FIELDS["tokens"]},
        optional={k: v for k, v in FIELDS.items() if k not in ("content", "tokens")},
    )
)
def test_the_constructor_builds_what_the_full_checks_build(kw):
    got, want = _outcome(lambda: c.ContextItem(**kw)), _outcome(lambda: reference(**kw))
    assert got[0] == want[0], (kw, got, want)
    if got[0] != "ok":
        assert got[1] == want[1]
        return
    item, ref = got[1], want[1]
    for name, value in ref.items():
        stored = getattr(item, name)
        if name == "metadata":
            assert isinstance(stored, MappingProxyType) and dict(stored) == value
            continue
        assert type(stored) is type(value), (name, stored, value)
        assert stored == value or (stored != stored and value != value), (name, stored, value)
        if name == "timestamp" and value is not None:
            assert stored.tzinfo is UTC


@pytest.mark.parametrize(
    ("name", "value"),
    [(name, v) for name, values in VALUES.items() for v in values],
    ids=lambda x: repr(x)[:20],
)
def test_each_value_of_each_field_on_an_otherwise_valid_item(name, value):
    """Every value above in every field, the other fields valid (the random combinations
    mostly stop at an earlier bad field)."""
    kw = {"content": "hello", "tokens": 7, name: value}
    got, want = _outcome(lambda: c.ContextItem(**kw)), _outcome(lambda: reference(**kw))
    assert got[0] == want[0] and (got[0] == "ok" or got[1] == want[1]), (kw, got, want)


def test_the_usual_values_keep_their_objects():
    """On the fast paths nothing is copied: the tuple of tags, the UTC timestamp and an
    item without metadata share what they were given (or one empty view, which no one can
    change)."""
    tags = ("a", "b")
    a = c.ContextItem("x", 1, tags=tags, timestamp=T0)
    b = c.ContextItem("y", 2)
    assert a.tags is tags and a.timestamp is T0
    assert a.metadata == {} and a.metadata is b.metadata
    with pytest.raises(TypeError):
        a.metadata["k"] = "v"  # type: ignore[index]
    given = {"k": "v"}
    d = c.ContextItem("z", 3, metadata=given)
    given["k"] = "changed"  # the item keeps its own copy
    assert d.metadata == {"k": "v"}
