"""Frame mechanisms shared by the store and the analytics (one place each)."""

from __future__ import annotations

import polars as pl


def chunked_like(column: pl.Series, frame: pl.DataFrame) -> pl.Series:
    """``column`` (one value per row of ``frame``) cut into the chunks of ``frame``'s columns.

    A table read from many Parquet parts is many chunks; a column set beside them in other
    chunks makes polars rechunk (copy) the whole table on the next filter or select, which
    for years of runs with node lists is gigabytes.
    """
    if not frame.width:
        return column
    lengths = [chunk.len() for chunk in frame.to_series(0).get_chunks()]
    if len(lengths) <= 1:
        return column
    out, offset = [], 0
    for length in lengths:
        out.append(column.slice(offset, length))
        offset += length
    return pl.concat(out, rechunk=False)


def repeated(values: pl.Series) -> pl.Series:
    """Whether each value occurs more than once in ``values`` (``Series.is_duplicated``; a
    null is repeated when there are two).

    By one sort and a comparison of neighbours: ``is_duplicated`` hashes every value into one
    table, 4-5 s for 20M integers on a 2-core machine against half a second this way."""
    present = values.drop_nulls().sort()
    twice = present.filter(present == present.shift(1)).unique()
    out = values.is_in(twice.implode())
    return out.fill_null(values.null_count() > 1).alias(values.name)


def row_numbered(frame: pl.DataFrame) -> bool:
    """``row_id`` is the first column and reads 0, 1, 2, ... (as ``with_row_index`` makes it)."""
    if not frame.columns or frame.columns[0] != "row_id":
        return False
    if frame.schema["row_id"] != pl.UInt32:
        return False
    return bool(frame.select((pl.col("row_id") == pl.int_range(pl.len())).all()).item())


def rows_by_id(frame: pl.DataFrame, row_ids: pl.Series, columns: list[str]) -> pl.DataFrame:
    """``row_ids`` (named as given) and the ``columns`` of the rows of ``frame`` with those
    ``row_id``s, one row per id of ``frame``, in the order of ``row_ids``.

    The inner join on ``row_id`` it stands for hashes every row of ``frame`` (20M for years of
    history); a row-numbered frame (:func:`row_numbered`) is read by position instead."""
    ids = row_ids.drop_nulls()
    if row_numbered(frame):
        known = ids.filter(ids < frame.height)
        return frame.select(columns).gather(known).insert_column(0, known)
    keyed = frame.select(pl.col("row_id").alias(ids.name), *columns)
    return ids.to_frame().join(keyed, on=ids.name, how="inner", maintain_order="left")
