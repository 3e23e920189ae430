"""The shared frame mechanisms against what they stand in for."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from aegis_slurm.accounting.frames import chunked_like, repeated


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
