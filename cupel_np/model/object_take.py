"""``[items[i] for i in rows]`` for a list of objects and an integer index array, in three C
passes and no Python int per row: how ``Pipeline.run`` builds its list of selected items.

CPython builds a list one reference at a time. Its one bulk gather, ``numpy.take`` on an object
array, first needs the items as an object array, and copying them into one (``np.fromiter``,
one reference each) costs more than the gather itself: at 5,000 items ~55 us of the ~83 the
whole list took, where the selection took ~700. But a list already holds its items as an array
of pointers. On an interpreter whose list layout this module has checked (CPython, a word-sized
object header and size, then the pointer to the items: the layout of every CPython 3 release with
the GIL), ``take_objects`` views those pointers as unsigned words, takes the wanted ones with
NumPy (no references involved), and views the taken words as an object array whose ``tolist``
makes the new list: one new reference per item, as a list comprehension would.

Safety:

* the pointers read are those of a private copy of the caller's sequence (``list(items)``, one C
  pass): no other thread and no finalizer can change or free it, or its items, while their
  pointers are read and referenced; the copy is dropped once ``tolist`` holds its own references;
* ``take`` checks every index against the copy's length (IndexError, as ``items[i]`` would);
* ``first_of_permutation`` writes pointers into the copy only, and only a permutation of the
  copy's own: its kernel checks the order is one (every index once) before it writes anything,
  and anything else is taken by index; the kernel holds the GIL (``_jit.jit_with_gil``), so no
  other thread, and no collection in one, sees the copy half written. Without the JIT (where
  a kernel is plain Python, interruptible between writes) the order is taken by index too;
* views that do not own their memory never release the objects they show (NumPy clears object
  references only in arrays that own their buffer), so the counts stay exact (tested);
* the layout is checked once, on a probe list, before it is relied on: anywhere it does not hold
  (another interpreter, a free-threaded or reference-tracing build, a 32-bit one) the gather is
  the ``np.fromiter(...).take(...).tolist()`` it replaces, with the same result.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Sequence

import numpy as np

from cupel_np._jit import as_input, jit_with_gil

_WORD = np.dtype(np.uintp)
_OBJECT = np.dtype(object)


class _Memory:
    """A borrowed stretch of memory shown to NumPy through the array interface."""

    __slots__ = ("__array_interface__",)

    def __init__(self, address: int, n: int, typestr: str, read_only: bool):
        self.__array_interface__ = {"data": (address, read_only), "shape": (n,), "typestr": typestr, "version": 3}


def _view(address: int, n: int, dtype: np.dtype, read_only: bool = True) -> np.ndarray:
    """``n`` values of ``dtype`` at ``address`` (not owned: nothing is freed or released)."""
    return np.asarray(_Memory(address, n, dtype.str, read_only))


def _items_of(own: list) -> int:
    """The address of ``own``'s item pointers (where ``ITEMS_WORD`` is set)."""
    return ctypes.c_size_t.from_address(id(own) + _ITEMS_OFFSET).value


def _items_word() -> int | None:
    """The index of the word of a list object that points to its items (3: after the reference
    count, the type and the size), or None where a probe list does not show that layout."""
    if sys.implementation.name != "cpython" or not getattr(sys, "_is_gil_enabled", lambda: True)():
        return None  # (a free-threaded build's header is longer: the probe below would say so too)
    if _WORD.itemsize != 8 or sys.maxsize != 2**63 - 1:
        return None
    probe = [object(), object(), object()]
    head = _view(id(probe), 4, _WORD)
    if int(head[1]) != id(list) or int(head[2]) != len(probe) or not head[3]:
        return None
    if _view(int(head[3]), len(probe), _WORD).tolist() != [id(x) for x in probe]:
        return None
    if _view(int(head[3]), len(probe), _OBJECT).tolist() != probe:
        return None
    return 3


#: where a list keeps the pointer to its items (None: the layout is not the one checked above)
ITEMS_WORD = _items_word()
_ITEMS_OFFSET = _WORD.itemsize * (ITEMS_WORD or 0)


def take_objects(items: Sequence, rows: np.ndarray) -> list:
    """``[items[i] for i in rows]`` (``rows``: integers; ``items``: a list or a tuple)."""
    rows = np.asarray(rows)
    if ITEMS_WORD is None or rows.ndim != 1:  # (other shapes: NumPy's answer, as before)
        return np.fromiter(items, dtype=object, count=len(items)).take(rows).tolist()
    own = list(items)  # (private: see the module's note)
    n = len(own)
    if n == 0:
        return np.empty(0, dtype=object).take(rows).tolist()  # (any index: IndexError)
    pointers = _view(_items_of(own), n, _WORD).take(rows)
    taken = _view(pointers.__array_interface__["data"][0], pointers.shape[0], _OBJECT).tolist()
    del own  # (only now: ``taken`` holds its own references)
    return taken


@jit_with_gil
def _permute_words(words, order):
    """Put ``words`` in ``order`` (``words[i]`` becomes the old ``words[order[i]]``) and say
    True when ``order`` is a permutation of ``words``' indices; else write nothing and say
    False. Every index is checked before the first write."""
    n = words.shape[0]
    if order.shape[0] != n:
        return False
    moved = np.empty(n, dtype=words.dtype)
    seen = np.zeros(n, dtype=np.bool_)
    for i in range(n):
        j = order[i]
        if j < 0 or j >= n or seen[j]:
            return False
        seen[j] = True
        moved[i] = words[j]
    for i in range(n):
        words[i] = moved[i]
    return True


#: False under ``NUMBA_DISABLE_JIT=1``: the kernel is plain Python then, interruptible between writes
_COMPILED = hasattr(_permute_words, "get_call_template")


def first_of_permutation(items: Sequence, order: np.ndarray, k: int) -> list:
    """``[items[i] for i in order[:k]]``, for ``order`` a permutation of ``range(len(items))``
    (``sweep_run.placed_permutation``'s): the item pointers of a private copy of the list are
    put in that order (a permutation keeps every reference the copy holds, once) and the copy
    cut to its first ``k``, which releases the others: no new reference per item kept and none
    dropped from it, where ``take_objects`` takes one per item kept and drops the copy's (4,000
    of 5,000 items in ~13 us against ~27). Any other order (not every index once, another
    length than the items': a list changed during the run) is taken by index."""
    order = np.asarray(order)
    if ITEMS_WORD is None or not _COMPILED or order.dtype.kind not in "iu":
        return take_objects(items, order[:k])
    own = list(items)  # (private: see the module's note)
    n = len(own)
    if order.shape != (n,) or not 0 <= k <= n:
        return take_objects(own, order[:k])
    if n and not _permute_words(_view(_items_of(own), n, _WORD, read_only=False), as_input(order, np.int64)):
        return take_objects(own, order[:k])
    del own[k:]
    return own
