"""Arrow array helpers the item records and the column checks share: one array from chunks,
dictionary encoding on and off, string views and list parts made plain."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def _dict_encoded(col: pa.Array) -> pa.Array:
    """A string column, or the strings inside a list / map column, dictionary-encoded."""
    if pa.types.is_string(col.type):
        return pc.dictionary_encode(col)
    if col.null_count:  # the checked table has none; keep any as they are
        return col
    if pa.types.is_map(col.type):
        return pa.MapArray.from_arrays(col.offsets, pc.dictionary_encode(col.keys), pc.dictionary_encode(col.items))
    if pa.types.is_list(col.type) or pa.types.is_large_list(col.type):
        return type(col).from_arrays(col.offsets, pc.dictionary_encode(col.values))
    return col


def _plain(col: pa.Array) -> pa.Array:
    """The inverse of ``_dict_encoded``."""
    t = col.type
    if pa.types.is_dictionary(t):
        return col.dictionary_decode()
    if pa.types.is_map(t) and pa.types.is_dictionary(t.key_type):
        return pa.MapArray.from_arrays(col.offsets, col.keys.dictionary_decode(), col.items.dictionary_decode())
    if (pa.types.is_list(t) or pa.types.is_large_list(t)) and pa.types.is_dictionary(t.value_type):
        return type(col).from_arrays(col.offsets, col.values.dictionary_decode())
    return col


def _one(col) -> pa.Array:
    """A column as one Arrow array, without a copy when it already is one chunk."""
    if isinstance(col, pa.ChunkedArray):
        return col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
    return col


def _np(arr) -> np.ndarray:
    return arr.to_numpy(zero_copy_only=False)


def _py(arr):
    return lambda r: arr[r].as_py()


def _without_views(col: pa.Array) -> pa.Array:
    """``string_view`` / ``binary_view`` as their large (offset) types: Arrow's take and
    dictionary kernels do not handle views (Polars hands them over)."""
    if pa.types.is_string_view(col.type):
        return col.cast(pa.large_string())
    if pa.types.is_binary_view(col.type):
        return col.cast(pa.large_binary())
    return col


def _decoded(col: pa.Array) -> pa.Array:
    """A dictionary array decoded (Polars Categorical / Enum, pandas category); other arrays as
    they are. Decoding is a take from the dictionary, with views made takeable first."""
    if not pa.types.is_dictionary(col.type):
        return col
    return _without_views(_decoded(col.dictionary)).take(col.indices)


def _is_stringish(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)


def _string_child_type(t: pa.DataType) -> bool:
    if pa.types.is_dictionary(t):
        t = t.value_type
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t) or pa.types.is_null(t)


def _is_listy(t: pa.DataType) -> bool:
    return (
        pa.types.is_list(t)
        or pa.types.is_large_list(t)
        or pa.types.is_fixed_size_list(t)
        or pa.types.is_list_view(t)
        or pa.types.is_large_list_view(t)
    )


def _list_parts(col: pa.Array) -> tuple[np.ndarray, pa.Array]:
    """(int64 offsets, logical values) of any list-like array (null lists are empty): pyarrow
    26 casts list_view -> list into an invalid array, so lists are rebuilt from these."""
    sizes = _np(pc.list_value_length(col).fill_null(0)).astype(np.int64)
    offsets = np.zeros(len(col) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    return offsets, col.flatten()


def _plain_strings(arr: pa.Array) -> pa.Array:
    """Any string-like array (dictionary, view, large, all-null) as plain ``string``."""
    arr = _without_views(_decoded(arr))
    return arr.cast(pa.string())
