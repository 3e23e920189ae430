"""Minder step 1: alignment onto one grid, and what is dropped (with a reason)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from aegis_slurm.errors import InputError, NoDataError
from aegis_slurm.metrics.align import align, clean

FIX = Path(__file__).parents[1] / "fixtures" / "metrics"
T0 = datetime(2026, 1, 5, 8, 0, tzinfo=UTC).timestamp()


def table(rows: list[tuple[float, str, str, float | None]]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "time": [datetime.fromtimestamp(T0 + t, UTC) for t, *_ in rows],
            "node": [r[1] for r in rows],
            "metric": [r[2] for r in rows],
            "value": [r[3] for r in rows],
        },
        schema={
            "time": pl.Datetime("us", "UTC"),
            "node": pl.Utf8,
            "metric": pl.Utf8,
            "value": pl.Float64,
        },
    )


def test_scrape_offsets_land_on_the_same_grid_point() -> None:
    # a scraped at :00, :15, ...; b at :09, :24, ... : the same instants of the job
    rows = [(15 * k, "a", "m", float(k)) for k in range(6)]
    rows += [(15 * k + 9, "b", "m", 10.0 + k) for k in range(6)]
    al = align(table(rows), step=15)
    assert al.nodes == ["a", "b"]
    np.testing.assert_array_equal(al.data["m"][0, :6], np.arange(6.0))
    # b's sample 9 s late is nearer to the next grid point than to the one before
    assert al.data["m"][1, 1] == 10.0


def test_one_missed_sample_is_filled_but_a_silent_node_stays_missing() -> None:
    rows = [(15 * k, "a", "m", 1.0) for k in range(20)]
    rows += [(15 * k, "b", "m", 2.0) for k in range(20) if k != 5]  # one scrape lost
    rows += [(15 * k, "c", "m", 3.0) for k in range(8)]  # stops reporting after 105 s
    al = align(table(rows), step=15)
    b, c = al.data["m"][1], al.data["m"][2]
    assert not np.isnan(b).any()
    assert np.isnan(c[10:]).all() and not np.isnan(c[:8]).any()


def test_job_node_without_any_sample_is_kept_as_absent() -> None:
    rows = [(15 * k, n, "m", 1.0) for k in range(4) for n in ("a", "b")]
    al = align(table(rows), step=15, nodes=["a", "b", "dead"])
    assert np.isnan(al.data["m"][2]).all()


def test_malformed_samples_are_counted_by_reason() -> None:
    # DCGM's blank sentinel, as dcgm-exporter's README shows it for DCGM_FI_DEV_MEMORY_TEMP
    line = next(
        ln
        for ln in (FIX / "dcgm-exporter-readme-metrics.txt").read_text().splitlines()
        if ln.startswith("DCGM_FI_DEV_MEMORY_TEMP{")
    )
    blank = float(line.rsplit(" ", 1)[1])
    rows = [(0, "a", "DCGM_FI_DEV_MEMORY_TEMP", blank), (0, "a", "m", None), (0, "b", "m", 1.0)]
    rows += [(15, "a", "m", float("nan")), (15, "b", "m", 2.0)]
    _, dropped = clean(table(rows))
    assert dropped == {"DCGM blank value (no reading)": 1, "value not a finite number": 2}


def test_missing_column_and_empty_table_are_clear_errors() -> None:
    with pytest.raises(InputError, match="lacks column"):
        align(pl.DataFrame({"time": [1], "node": ["a"]}))
    with pytest.raises(NoDataError):
        align(table([(0, "a", "m", None)]))
    with pytest.raises(InputError, match="UTC datetime"):
        align(pl.DataFrame({"time": ["x"], "node": ["a"], "metric": ["m"], "value": [1.0]}))


def test_a_counter_is_interpolated_between_scrapes_not_copied() -> None:
    # 1,000 bytes/s; node b scraped 9 s late and one scrape lost: a copy of the nearest scrape
    # would give a zero increment then a double one (a rate dip that is only the exporter)
    name = "node_infiniband_port_data_received_bytes_total"
    rows = [(15 * k, "a", name, 1000.0 * 15 * k) for k in range(12)]
    rows += [(15 * k + 9, "b", name, 1000.0 * (15 * k + 9)) for k in range(12) if k != 6]
    al = align(table(rows), step=15)
    b = al.data[name][al.nodes.index("b")]
    inc = np.diff(b[1:11])
    np.testing.assert_allclose(inc, 15_000.0)
    # a gauge keeps the nearest sample (a level, not an accumulation)
    rows = [(15 * k + 9, "b", "g", float(k)) for k in range(6)] + [(0, "a", "g", 0.0)]
    g = align(table(rows), step=15).data["g"]
    assert g[1][2] == 1.0  # at 30 s: the sample of 24 s, not 0.6 of the way from 9 s to 39 s


def test_a_counter_reset_between_scrapes_is_not_interpolated() -> None:
    name = "DCGM_FI_DEV_PCIE_REPLAY_COUNTER"
    rows = [(0, "a", name, 100.0), (16, "a", name, 2.0), (0, "b", name, 1.0), (16, "b", name, 1.0)]
    al = align(table(rows), step=15)
    assert al.data[name][0][1] == 2.0  # the nearest sample, not a value between 100 and 2
