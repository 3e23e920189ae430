"""Hostile shapes of the offline Parquet table through the real CLI.

Each must give a correct verdict or one ``aegis-slurm: error:`` line with a documented exit code;
never a traceback, never a node called faulty because of the file's shape.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner

from aegis_slurm.cli import main

POWER, CLOCK = "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_SM_CLOCK"
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def healthy(nodes: int = 8, steps: int = 60, step: float = 15.0) -> pl.DataFrame:
    """A quiet job: every node at the same power and clock, small noise, jittered scrapes."""
    rng = np.random.default_rng(7)
    rows = []
    for n in range(nodes):
        for m, level in ((POWER, 400.0), (CLOCK, 1980.0)):
            for k in range(steps):
                t = T0 + timedelta(seconds=k * step + rng.uniform(0, 3))
                rows.append((t, f"n{n:02d}", m, level + rng.normal(0, 3)))
    return pl.DataFrame(rows, schema=["time", "node", "metric", "value"], orient="row")


def run(path: Path, *extra: str):
    r = CliRunner().invoke(main, ["minder", str(path), "--json", *extra])
    assert "Traceback" not in r.output and not isinstance(r.exception, ZeroDivisionError)
    return r


def verdict(tmp_path: Path, df: pl.DataFrame, *extra: str) -> dict:
    p = tmp_path / "job.parquet"
    df.write_parquet(p)
    r = run(p, *extra)
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def error(tmp_path: Path, df: pl.DataFrame | bytes, code: int, *extra: str) -> str:
    p = tmp_path / "job.parquet"
    if isinstance(df, bytes):
        p.write_bytes(df)
    else:
        df.write_parquet(p)
    r = run(p, *extra)
    assert r.exit_code == code, r.output
    (line,) = [x for x in r.output.splitlines() if x.strip()]
    assert line.startswith("aegis-slurm: error: ")
    return line


def test_slower_scrape_cadence_on_one_node_is_not_an_absence(tmp_path: Path) -> None:
    # n05's exporter is scraped every 60 s, the others' every 15 s: n05 reports, just less often
    df = healthy()
    slow = (pl.col("node") == "n05") & (pl.col("time").dt.second() >= 4)
    assert verdict(tmp_path, df.filter(~slow))["faulty"] == []


def test_a_node_without_one_exporter_field_is_not_faulty(tmp_path: Path) -> None:
    df = healthy().filter(~((pl.col("node") == "n05") & (pl.col("metric") == CLOCK)))
    assert verdict(tmp_path, df)["faulty"] == []


def test_a_node_that_stops_reporting_everything_is_still_found(tmp_path: Path) -> None:
    gone = (pl.col("node") == "n03") & (pl.col("time") > T0 + timedelta(minutes=6))
    (f,) = verdict(tmp_path, healthy(steps=120).filter(~gone))["faulty"]
    assert f["node"] == "n03"


def test_a_stray_sample_years_away_is_a_one_line_error_not_a_hang(tmp_path: Path) -> None:
    df = healthy()
    far = df.head(1).with_columns(pl.col("time") + timedelta(days=3650))
    line = error(tmp_path, pl.concat([df, far]), 1)
    assert "days" in line and "--start" in line
    # and the window clips it away
    doc = verdict(
        tmp_path, pl.concat([df, far]), "--start", "2026-01-01T00:00:00Z", "--end", "2026-01-02"
    )
    assert doc["faulty"] == [] and doc["windows"] > 0


def test_duplicate_rows_are_dropped_and_counted(tmp_path: Path) -> None:
    df = healthy()
    p = tmp_path / "dup.parquet"
    pl.concat([df, df.with_columns(pl.col("value") + 500)]).write_parquet(p)
    r = CliRunner().invoke(main, ["minder", str(p)])
    assert r.exit_code == 0, r.output
    assert f"{df.height} samples dropped" in r.output and "duplicate" in r.output
    assert "FAULTY" not in r.output


def test_one_node_is_no_data_not_a_clean_bill(tmp_path: Path) -> None:
    line = error(tmp_path, healthy().filter(pl.col("node") == "n00"), 4)
    assert "peers" in line


def test_two_and_three_nodes_stay_quiet(tmp_path: Path) -> None:
    for k in (2, 3):
        df = healthy().filter(pl.col("node").is_in([f"n{i:02d}" for i in range(k)]))
        assert verdict(tmp_path, df)["faulty"] == []


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d.with_columns(
            pl.when(pl.int_range(pl.len()) % 7 == 0)
            .then(float("nan"))
            .otherwise(pl.col("value"))
            .alias("value")
        ),
        lambda d: d.with_columns(
            pl.when(pl.int_range(pl.len()) % 7 == 0)
            .then(float("inf"))
            .otherwise(pl.col("value"))
            .alias("value")
        ),
        lambda d: d.with_columns(pl.lit("x").alias("extra")),
        lambda d: d.with_columns(pl.col("value").cast(pl.Utf8)),
        lambda d: d.with_columns(pl.col("value").round(0).cast(pl.Int64)),
        lambda d: d.with_columns(pl.col("node").cast(pl.Categorical)),
        lambda d: d.with_columns(pl.col("time").dt.replace_time_zone(None)),
        lambda d: d.with_columns(pl.col("time").dt.convert_time_zone("Asia/Tokyo")),
        lambda d: d.with_columns(pl.col("time").cast(pl.Datetime("ns", "UTC"))),
        lambda d: d.sort("time", descending=True),
    ],
    ids=[
        "nan",
        "inf",
        "extra",
        "str-value",
        "int-value",
        "categorical",
        "naive",
        "tokyo",
        "ns",
        "reversed",
    ],
)
def test_odd_but_valid_shapes_give_a_quiet_verdict(tmp_path: Path, mutate) -> None:
    doc = verdict(tmp_path, mutate(healthy()))
    assert doc["faulty"] == [] and doc["windows"] > 20


def test_a_huge_spike_on_one_sample_is_not_a_fault(tmp_path: Path) -> None:
    spike = (pl.col("node") == "n03") & (pl.int_range(pl.len()) % 50 == 0)
    df = healthy().with_columns(
        pl.when(spike).then(1e300).otherwise(pl.col("value")).alias("value")
    )
    assert verdict(tmp_path, df)["faulty"] == []


@pytest.mark.parametrize(
    ("make", "code", "words"),
    [
        (lambda d: d.drop("value"), 1, "lacks column"),
        (lambda d: d.with_columns(pl.col("time").dt.epoch("s")), 1, "expected a UTC datetime"),
        (lambda d: d.with_columns(pl.col("time").cast(pl.Utf8)), 1, "expected a UTC datetime"),
        (lambda d: d.head(0), 4, "no usable"),
        (lambda d: d.with_columns(pl.lit(None, pl.Float64).alias("value")), 4, "no usable"),
        (lambda d: b"", 1, "not a readable Parquet"),
        (lambda d: b"PAR1garbage", 1, "not a readable Parquet"),
    ],
    ids=["no-value", "int-time", "str-time", "empty", "all-null", "zero-bytes", "garbage"],
)
def test_unusable_files_are_one_line_errors(tmp_path: Path, make, code: int, words: str) -> None:
    assert words in error(tmp_path, make(healthy()), code)


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"file,node,onset\nx.parquet,n1,2026\xff\n", "not a UTF-8 CSV"),
        (b"file,node\nx.parquet,n1\n", "lacks column(s) onset"),
    ],
)
def test_fit_labels_that_cannot_be_read_are_one_line_errors(
    tmp_path: Path, content: bytes, words: str
) -> None:
    p = tmp_path / "labels.csv"
    p.write_bytes(content)
    r = CliRunner().invoke(main, ["minder", "fit", str(p), "--out", str(tmp_path / "o.json")])
    assert r.exit_code == 1 and "Traceback" not in r.output
    assert r.output.startswith("aegis-slurm: error: ") and words in r.output


@pytest.mark.parametrize(
    ("make", "code", "words"),
    [
        (lambda d: d.with_columns(pl.concat_list("node")), 1, "column node is List"),
        (lambda d: d.with_columns(pl.concat_list("value")), 1, "column value is List"),
        (lambda d: d.with_columns(pl.struct("node", "metric").alias("metric")), 1, "Struct"),
        # metric names the detector does not know (a recording rule's): not a clean bill
        (lambda d: d.with_columns(pl.lit("job:gpu_power:avg").alias("metric")), 4, "nothing to"),
    ],
    ids=["list-node", "list-value", "struct-metric", "unknown-metrics"],
)
def test_tables_that_cannot_be_judged_are_not_a_clean_bill(
    tmp_path: Path, make, code: int, words: str
) -> None:
    assert words in error(tmp_path, make(healthy()), code)


def test_a_job_shorter_than_the_warm_up_is_not_called_healthy(tmp_path: Path) -> None:
    p = tmp_path / "short.parquet"
    healthy(steps=12).write_parquet(p)  # 3 minutes
    r = CliRunner().invoke(main, ["minder", str(p)])
    assert r.exit_code == 0 and "no window could be judged" in r.output
    assert "no faulty node found" not in r.output
    assert verdict(tmp_path, healthy(steps=12))["windows"] == 0


def test_a_node_without_a_whole_exporter_is_still_evidence(tmp_path: Path) -> None:
    # n05 has node_exporter's load but none of dcgm-exporter's series: flagged (the alert; watch
    # never drains on absence-only evidence), unlike a node lacking one field of an exporter
    load = (
        healthy()
        .filter(pl.col("metric") == POWER)
        .with_columns(pl.lit("node_load1").alias("metric"), pl.lit(12.0).alias("value"))
    )
    df = pl.concat([healthy(), load]).filter(
        ~((pl.col("node") == "n05") & pl.col("metric").str.starts_with("DCGM_"))
    )
    assert [f["node"] for f in verdict(tmp_path, df)["faulty"]] == ["n05"]
