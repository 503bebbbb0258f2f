"""A ContextItem pickles (what ``multiprocessing`` does to a service's items) and deep-copies:
the loaded item equals the original field by field, and leaves behind what a selection kept on
the original (``model.item_rows``: the packed record and the tag ids are this process's)."""

import copy
import pickle
from dataclasses import dataclass, fields
from datetime import UTC, datetime, timedelta, timezone
from types import MappingProxyType

from hypothesis import HealthCheck, given, settings
from strategies import item_lists

import cupel_np as c
from cupel_np.model import item_rows, tag_ids


def _as_items(dicts):
    return [c.ContextItem(**{k: v for k, v in d.items() if v is not None or k in ("content", "tokens")}) for d in dicts]


def _kept(item) -> set[str]:
    """What a selection kept on the item: the record's slot when set, and its tag ids."""
    kept = {k for k in vars(item) if k.startswith("_cupel_np_")}
    return kept | ({item_rows.ROW_KEY} if getattr(item, item_rows.ROW_KEY) is not None else set())


def _same_fields(a, b) -> bool:
    return all(getattr(a, f.name) == getattr(b, f.name) for f in fields(c.ContextItem))


def test_every_field_survives_a_round_trip():
    item = c.ContextItem(
        "body",
        7,
        kind="Document",
        source="Tool",
        priority=-3,
        tags=("A", "b"),
        metadata={"k": "v", "x": ""},
        timestamp=datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=timezone(timedelta(hours=2))),
        future_relevance_hint=0.25,
        pinned=True,
        original_tokens=9,
    )
    for _ in range(3):  # a list of new items: marked (few: records) first, then records, then tag ids
        assert item_rows.ItemRows.from_items([item]).frequency_tags[1].shape == (2,)  # what the small path reads
    assert _kept(item) == {item_rows.ROW_KEY, tag_ids._tag_key[0]}
    for back in (pickle.loads(pickle.dumps(item, protocol=p)) for p in range(2, pickle.HIGHEST_PROTOCOL + 1)):
        assert type(back) is c.ContextItem and back == item and _same_fields(back, item)
        assert isinstance(back.metadata, MappingProxyType) and back.timestamp.tzinfo is UTC
        assert _kept(back) == set()  # the record and tag ids are made again on first use
    deep = copy.deepcopy(item)
    assert deep == item and _kept(deep) == set()
    shallow = copy.copy(item)  # same process: keeps the record and tag ids
    assert shallow == item and shallow is not item and vars(shallow) == vars(item)
    assert getattr(shallow, item_rows.ROW_KEY) is getattr(item, item_rows.ROW_KEY)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(item_lists(max_size=12))
def test_loaded_items_select_as_the_originals(dicts):
    items = _as_items(dicts)
    if not items:
        return
    budget = c.ContextBudget(max_tokens=10**6, target_tokens=max(1, sum(max(i.tokens, 0) for i in items) // 2))
    scorer = c.CompositeScorer(((c.FrequencyScorer(), 1.0), (c.RecencyScorer(), 1.0)))
    pipe = c.Pipeline(c.Policy(scorer, overflow_strategy="proceed"))
    want = pipe.run(items, budget)
    back = pickle.loads(pickle.dumps(items))
    assert list(map(repr, back)) == list(map(repr, items))  # field by field, a NaN hint included
    got = pipe.run(back, budget)
    where = {id(x): k for seq in (items, back) for k, x in enumerate(seq)}
    assert [where[id(i)] for i in got] == [where[id(i)] for i in want]


@dataclass(frozen=True, eq=False)
class _Scored(c.ContextItem):
    label: float = 0.0


def test_a_subclass_with_its_own_field_pickles_whole():
    """A subclass's own fields travel too (the reduction reads the dataclass fields)."""
    item = _Scored("hello", 3, metadata={"k": "v"}, label=0.75)
    for back in (pickle.loads(pickle.dumps(item)), copy.deepcopy(item)):
        assert type(back) is _Scored and back.label == 0.75 and back.content == "hello"
        assert dict(back.metadata) == {"k": "v"} and isinstance(back.metadata, MappingProxyType)
