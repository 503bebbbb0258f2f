"""Opening an items Parquet file: the one read that ``ItemTable.from_parquet`` and
``cupel_np.io`` (``validate_items``) share, so both see the same table and the same errors."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from cupel_np._files import PathOrPaths
from cupel_np._fs import as_path
from cupel_np.errors import InvalidInputTypeError
from cupel_np.model.datasets import parquet_file, read_table


def one_line(text: object) -> str:
    """Arrow's messages can span lines; errors here are one line."""
    return " ".join(str(text).split())


def read_items_table(
    path: PathOrPaths,
    columns: list[str] | None = None,
    filter: pc.Expression | None = None,
) -> pa.Table:
    """Read items Parquet - a file, a directory (hive partition columns included), a glob or a
    list of files - into an Arrow table in input order (errors name the file). A single file
    without a filter is read directly, so duplicate column names are read as they are (the
    items check then names them) rather than refused by Arrow's dataset layer with a multi-line
    message."""
    if filter is not None or isinstance(path, (list, tuple)) or not as_path(path).is_file():
        return read_table(path, columns=columns, filter=filter)
    p = as_path(path)
    try:
        return parquet_file(p).read(columns=columns)
    except (pa.ArrowException, OSError) as e:
        raise InvalidInputTypeError(f"cannot read Parquet file {p}: {one_line(e)}") from None
