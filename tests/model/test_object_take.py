"""``model.object_take``: ``Pipeline.run``'s list of selected items, taken by pointer.

The oracle is the list comprehension each function stands for; the reference counts of the
items are compared before, while and after the result is held (a count off by one would be a
leak or a use after free), on the layout the module checked and on its fallback."""

from __future__ import annotations

import gc
import sys
import sysconfig
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cupel_np.model import object_take
from cupel_np.model.object_take import first_of_permutation, take_objects


class _Item:
    """An object whose reference count nothing else touches (a ContextItem's record cache could)."""

    def __init__(self, i: int):
        self.i = i


def _counts(items) -> list[int]:
    return [sys.getrefcount(x) for x in items]


@pytest.fixture(params=["pointers", "fallback"])
def layout(request, monkeypatch):
    """Both paths: the checked list layout, and the one taken where it does not hold."""
    if request.param == "fallback":
        monkeypatch.setattr(object_take, "ITEMS_WORD", None)
    return request.param


def test_the_layout_is_checked_on_this_interpreter():
    """Every CPython 3 build with the GIL keeps a list's item pointer in its fourth word; the
    check found it here (no silent fallback where CI runs)."""
    plain = not sysconfig.get_config_var("Py_GIL_DISABLED") and not hasattr(sys, "getobjects")  # (trace-refs)
    if sys.implementation.name == "cpython" and plain:
        assert object_take.ITEMS_WORD == 3
    else:  # pragma: no cover - other interpreters take the fallback
        assert object_take.ITEMS_WORD is None


def _both_paths():
    """The checked layout's word, then None (the fallback)."""
    return (object_take._items_word(), None)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 60), st.data())
def test_take_objects_is_the_comprehension(n, data):
    items = [_Item(i) for i in range(n)]
    rows = np.array(data.draw(st.lists(st.integers(-n, n - 1), max_size=80)) if n else [], dtype=np.int64)
    before = _counts(items)
    taken = np.bincount(rows % max(n, 1), minlength=n) if n else []
    for word in _both_paths():
        object_take.ITEMS_WORD = word
        try:
            got = take_objects(items, rows)
        finally:
            object_take.ITEMS_WORD = object_take._items_word()
        want = [items[i] for i in rows.tolist()]
        assert len(got) == len(want) and all(a is b for a, b in zip(got, want))
        del want
        assert _counts(items) == [b + int(t) for b, t in zip(before, taken)]
        del got
        assert _counts(items) == before


def test_take_objects_counts_each_taken_item_once(layout):
    items = [_Item(i) for i in range(3000)]  # (more than a small list, so the pointers are read)
    rows = np.random.default_rng(3).integers(0, 3000, 2500)
    before = _counts(items)
    got = take_objects(items, rows)
    taken = np.bincount(rows, minlength=3000)
    assert _counts(items) == [b + int(t) for b, t in zip(before, taken)]
    assert all(got[j] is items[r] for j, r in enumerate(rows.tolist()))
    del got
    assert _counts(items) == before


def test_take_objects_refuses_what_indexing_refuses(layout):
    items = (_Item(0), _Item(1), _Item(2))  # (a tuple: copied into a list like any sequence)
    for rows in (np.array([3]), np.array([-4]), np.array([0, 7, 1])):
        with pytest.raises(IndexError):
            take_objects(items, rows)
    with pytest.raises(IndexError):
        take_objects([], np.array([0]))
    assert take_objects([], np.zeros(0, np.int64)) == []
    assert take_objects(items, np.array([2, -1, 0]))[0] is items[2]


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 400), st.data())
def test_first_of_permutation_is_the_comprehension(n, data):
    items = [_Item(i) for i in range(n)]
    order = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1))).permutation(n).astype(np.int64)
    k = data.draw(st.integers(0, n))
    before = _counts(items)
    for word in _both_paths():
        object_take.ITEMS_WORD = word
        try:
            got = first_of_permutation(items, order, k)
        finally:
            object_take.ITEMS_WORD = object_take._items_word()
        assert len(got) == k and all(a is items[i] for a, i in zip(got, order[:k].tolist()))
        kept = np.zeros(n, np.int64)
        kept[order[:k]] = 1
        assert _counts(items) == [b + int(t) for b, t in zip(before, kept)]  # one reference per item kept
        del got
        assert _counts(items) == before  # and none left behind


def test_first_of_permutation_of_another_length_is_taken_by_index(layout):
    """An order of another length than the items (the list changed during the run): the
    first ``k`` are taken by index, checked, never by reordering pointers."""
    items = [_Item(i) for i in range(5)]
    before = _counts(items)
    got = first_of_permutation(items, np.array([4, 2, 0, 1, 3, 5]), 3)
    assert [x.i for x in got] == [4, 2, 0]
    with pytest.raises(IndexError):
        first_of_permutation(items, np.array([7, 2, 0, 1]), 2)
    del got
    assert _counts(items) == before


def test_the_callers_list_is_left_as_it_was(layout):
    items = [_Item(i) for i in range(2000)]
    copy = list(items)
    order = np.random.default_rng(5).permutation(2000)
    got = first_of_permutation(items, order, 1500)
    assert all(a is b for a, b in zip(items, copy)) and len(items) == 2000
    assert len(got) == 1500 and got is not items


def test_a_list_changed_by_another_thread_while_it_is_taken():
    """The pointers read are a private copy's: another thread growing, shrinking and
    clearing the caller's list meanwhile changes which items come back, never a count."""
    items = [_Item(i) for i in range(3000)]
    keep = list(items)  # (every item stays alive: counts are compared at the end)
    before = _counts(keep)
    stop = threading.Event()

    def churn():
        rng = np.random.default_rng(9)
        while not stop.is_set():
            op = int(rng.integers(4))
            if op == 0:
                items.clear()
                items.extend(keep)
            elif op == 1 and items:
                del items[int(rng.integers(len(items))) :]
            elif op == 2:
                items.extend(keep[:500])
            else:
                items.reverse()

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    worker = threading.Thread(target=churn)
    worker.start()
    try:
        rng = np.random.default_rng(1)
        for _ in range(400):
            n = len(items)
            order = rng.permutation(max(n, 1))
            try:
                got = first_of_permutation(items, order, len(order) // 2)
                got += take_objects(items, order[: len(order) // 2])
            except IndexError:  # (the list shrank between len() and the take: as indexing says)
                continue
            assert all(isinstance(x, _Item) for x in got)
            del got
    finally:
        stop.set()
        worker.join()
        sys.setswitchinterval(switch)
    items.clear()
    gc.collect()
    assert _counts(keep) == [b - 1 for b in before]  # (the caller's list no longer holds them)


@pytest.mark.parametrize(
    "order",
    [
        np.zeros(300, np.int64),  # one row 300 times
        np.r_[0, -300, np.arange(2, 300)],  # -300 is row 0 again
        np.r_[np.arange(299), 300],  # one row past the end
        np.append(np.arange(299, dtype=np.uint64), np.uint64(2**64 - 1)),  # a uint64 that would wrap to -1
        np.arange(300, dtype=np.int32)[::-1],  # a permutation, as int32 and strided
    ],
)
def test_first_of_permutation_takes_any_other_order_by_index(order):
    """An order of the right length that is not every index once never reaches the pointer
    write (the kernel checks it first): the first k are taken by index, as the comprehension
    would take them (or refused as indexing refuses), and no item is freed or leaked."""
    import weakref

    items = [_Item(i) for i in range(300)]
    alive = [weakref.ref(x) for x in items]
    before = _counts(items)
    try:
        want = [items[i] for i in order[:200].tolist()]
    except IndexError:
        with pytest.raises(IndexError):
            first_of_permutation(items, order, 200)
    else:
        got = first_of_permutation(items, order, 200)
        assert len(got) == 200 and all(a is b for a, b in zip(got, want))
        del got, want
    assert _counts(items) == before and all(w() is not None for w in alive)


def test_the_pointer_write_is_the_checked_kernel_holding_the_gil(monkeypatch):
    """A permutation goes through ``_permute_words`` (not a silent fallback), compiled with the
    GIL held so no other thread sees the copy half written; it writes nothing when the order
    is not one."""
    compiled = object_take._COMPILED  # (False under NUMBA_DISABLE_JIT=1: the kernel is Python)
    assert not compiled or object_take._permute_words.targetoptions["nogil"] is False
    calls = []
    kernel = object_take._permute_words

    def spy(words, order):
        calls.append(kernel(words, order))
        return calls[-1]

    monkeypatch.setattr(object_take, "_permute_words", spy)
    items = [_Item(i) for i in range(400)]
    got = first_of_permutation(items, np.random.default_rng(2).permutation(400), 300)
    assert calls == ([True] if compiled else []) and len(got) == 300  # (without the JIT: by index)
    words = np.arange(5, dtype=np.uint64)
    for bad in (np.array([0, 0, 2, 3, 4]), np.array([0, 1, 2, 3]), np.array([4, 3, 2, 1, 5])):
        assert not kernel(words, bad) and words.tolist() == [0, 1, 2, 3, 4]
    assert kernel(words, np.array([4, 3, 2, 1, 0])) and words.tolist() == [4, 3, 2, 1, 0]


def test_take_objects_of_other_shapes_is_numpys(layout):
    """Rows of two dimensions are NumPy's take of the items (nested lists), never a pointer read."""
    items = [_Item(i) for i in range(3000)]
    rows = np.array([[3, 4], [5, 6]])
    got = take_objects(items, rows)
    assert [[x.i for x in r] for r in got] == [[3, 4], [5, 6]]
    assert take_objects(items, np.zeros((4096, 0), np.int64)) == [[]] * 4096
