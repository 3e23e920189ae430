"""The shared frame mechanisms against what they stand in for."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from aegis_slurm.accounting.frames import chunked_like, repeated, row_numbered, rows_by_id


@pytest.mark.parametrize("seed", range(6))
def test_repeated_is_is_duplicated(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 3000))
    values = rng.integers(0, max(1, n // 2), n).astype(np.uint64)
    s = pl.Series("k", values)
    if seed % 2:  # nulls: one, several, or none
        s = s.scatter(rng.integers(0, max(1, n), min(n, seed)).tolist(), None) if n else s
    got = repeated(s)
    assert got.name == "k"
    assert got.dtype == pl.Boolean
    assert got.null_count() == 0
    assert got.to_list() == s.is_duplicated().to_list()


def test_repeated_edges() -> None:
    assert repeated(pl.Series("e", [], dtype=pl.UInt32)).to_list() == []
    assert repeated(pl.Series([None], dtype=pl.Int64)).to_list() == [False]
    assert repeated(pl.Series([None, 3, None], dtype=pl.Int64)).to_list() == [True, False, True]
    assert repeated(pl.Series([2**64 - 1, 0, 2**64 - 1], dtype=pl.UInt64)).to_list() == [
        True,
        False,
        True,
    ]


def test_chunked_like_follows_the_frame() -> None:
    frame = pl.concat([pl.DataFrame({"a": [1, 2]}), pl.DataFrame({"a": [3]})], rechunk=False)
    col = chunked_like(pl.Series("b", [10, 20, 30]), frame)
    assert [c.len() for c in col.get_chunks()] == [2, 1]
    assert col.to_list() == [10, 20, 30]


@pytest.mark.parametrize("numbered", [True, False])
def test_rows_by_id_is_the_inner_join_it_stands_for(numbered: bool) -> None:
    frame = pl.DataFrame({"x": [10, 11, 12, 13], "y": ["a", "b", "c", "d"]}).with_row_index(
        "row_id"
    )
    if not numbered:  # ids that are not positions: the join path
        frame = frame.with_columns(pl.col("row_id") * 2)
    ids = pl.Series("victim_row_id", [2, 0, None, 99, 2], dtype=pl.UInt32)
    got = rows_by_id(frame, ids, ["x"])
    want = ids.to_frame().join(
        frame.select(pl.col("row_id").alias("victim_row_id"), "x"),
        on="victim_row_id",
        how="inner",
        maintain_order="left",
    )
    assert got.equals(want)
    assert got.columns == ["victim_row_id", "x"]
    assert row_numbered(frame) is numbered
