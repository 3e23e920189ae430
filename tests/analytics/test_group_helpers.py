"""The window-free group helpers equal polars' ``over`` forms on any sorted frame."""

from __future__ import annotations

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from aegis_slurm.analytics.common import gpu_bucket, prev_in_group, seq_within


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(-50, 50)), max_size=60))
def test_seq_and_prev_match_over(rows):
    df = pl.DataFrame(rows, schema={"g": pl.Int64, "v": pl.Int64}, orient="row").sort("g")
    got = df.select(seq_within("g").alias("s"), prev_in_group(pl.col("v"), "g").alias("p"))
    want = df.select(
        pl.int_range(pl.len(), dtype=pl.Int64).over("g").alias("s"),
        pl.col("v").shift(1).over("g").alias("p"),
    )
    assert got.equals(want)


def test_gpu_bucket_is_power_of_two_floor():
    df = pl.DataFrame({"gpus": [0, 1, 2, 3, 7, 8, 9, 127, 128, 129, 16384]})
    assert df.select(gpu_bucket())["gpu_bucket"].to_list() == [
        None,
        1,
        2,
        2,
        4,
        8,
        8,
        64,
        128,
        128,
        16384,
    ]
