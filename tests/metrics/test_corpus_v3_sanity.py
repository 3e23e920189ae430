"""Sanity tests of corpus v3 itself (not of any detector): determinism, schema, counters, labels."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import polars as pl
import pytest

from .corpus_v3 import (
    ALL_METRICS,
    BENIGN_KINDS,
    COUNTERS,
    CUSTOM_GPU_METRICS,
    FAULT_KINDS,
    GPU_METRICS,
    HOST_METRICS,
    IB_METRICS,
    Job,
    aggregate,
    jobs,
    table,
)


@pytest.fixture(scope="module")
def corpus() -> list[Job]:
    return jobs(0)


@pytest.fixture(scope="module")
def sample(corpus: list[Job]) -> dict[str, tuple[Job, pl.DataFrame]]:
    """The smallest job of every kind, with its raw table (generated once)."""
    out: dict[str, tuple[Job, pl.DataFrame]] = {}
    for kind in FAULT_KINDS + BENIGN_KINDS:
        job = min((j for j in corpus if j.kind == kind), key=lambda j: len(j.nodes))
        out[kind] = (job, job.raw)
    return out


def test_corpus_size_and_mix(corpus: list[Job]) -> None:
    assert 80 <= len(corpus) <= 100
    assert len({j.name for j in corpus}) == len(corpus)
    kinds = {j.kind for j in corpus}
    assert kinds == set(FAULT_KINDS) | set(BENIGN_KINDS)
    healthy = sum(j.kind in BENIGN_KINDS for j in corpus)
    assert 0.4 <= healthy / len(corpus) <= 0.6
    sizes = [len(j.nodes) for j in corpus]
    assert min(sizes) >= 4 and max(sizes) == 1024
    assert sum(8 <= s <= 128 for s in sizes) >= 0.7 * len(sizes)
    assert sum(s >= 256 for s in sizes) >= 3
    minutes = [(j.end - j.start).total_seconds() / 60 for j in corpus]
    assert min(minutes) >= 29.9 and max(minutes) <= 120.1
    assert {j.dcgm_interval for j in corpus} == {15, 30, 60}
    assert {j.node_interval for j in corpus} <= {15, 30, 60}
    assert {j.dcgm_collect for j in corpus} == {10, 30}
    gpus = {j.gpu.split("+")[0] for j in corpus}
    assert gpus == {"A100", "H100", "H200", "B200"}


def test_labels_consistent(corpus: list[Job]) -> None:
    for j in corpus:
        assert j.start.tzinfo == UTC and j.end.tzinfo == UTC
        if j.kind in BENIGN_KINDS:
            assert j.culprits == {}, j.name
            continue
        assert len(j.culprits) == (2 if j.kind == "two_faults" else 1), j.name
        for node, onset in j.culprits.items():
            assert node in j.nodes
            assert onset.tzinfo == UTC
            assert onset - j.start >= timedelta(minutes=8), j.name
            assert j.end - onset >= timedelta(minutes=8), j.name
    t = table(corpus)
    assert t.height == len(corpus)
    assert t.filter(pl.col("faulty")).get_column("culprits").str.len_chars().min() > 0
    assert set(t.columns) >= {"kind", "nodes", "dcgm_interval", "node_interval", "culprits"}


def test_deterministic_by_seed(corpus: list[Job]) -> None:
    again = jobs(0)
    assert table(again).equals(table(corpus))
    small = min(corpus, key=lambda j: len(j.nodes))
    twin = next(j for j in again if j.name == small.name)
    assert small.raw.equals(twin.raw)
    other = jobs(1)
    assert not table(other).drop("notes").equals(table(corpus).drop("notes"))


def test_schema(sample: dict[str, tuple[Job, pl.DataFrame]]) -> None:
    gpu_m = set(GPU_METRICS) | set(CUSTOM_GPU_METRICS)
    for job, raw in sample.values():
        assert raw.schema == pl.Schema(
            {
                "time": pl.Datetime("us", "UTC"),
                "node": pl.String,
                "metric": pl.String,
                "device": pl.String,
                "value": pl.Float64,
            }
        )
        assert set(raw.get_column("metric").unique()) <= set(ALL_METRICS)
        assert set(raw.get_column("node").unique()) <= set(job.nodes)
        has_custom = raw.filter(pl.col("metric").is_in(CUSTOM_GPU_METRICS)).height > 0
        assert has_custom == (job.site == "charlie"), job.name
        assert raw.get_column("time").min() >= job.start
        assert raw.get_column("time").max() <= job.end
        assert raw.get_column("value").is_finite().all()
        assert raw.select(["time", "node", "metric", "device"]).is_duplicated().sum() == 0
        ordered = raw.group_by(["metric", "node", "device"], maintain_order=True).agg(
            (pl.col("time").diff().drop_nulls() > timedelta(0)).all().alias("up")
        )
        assert ordered.get_column("up").all()
        devs = raw.group_by("metric").agg(pl.col("device").unique())
        for metric, dev in devs.iter_rows():
            if metric in gpu_m:
                assert set(dev) <= {str(i) for i in range(8)}, metric
            elif metric in IB_METRICS:
                assert all(re.fullmatch(r"mlx5_\d+:1", d) for d in dev), metric
            else:
                assert metric in HOST_METRICS and set(dev) == {""}, metric


def test_counters_monotonic_except_planned_resets(
    sample: dict[str, tuple[Job, pl.DataFrame]], corpus: list[Job]
) -> None:
    extra = [j for j in corpus if j.resets and len(j.nodes) <= 32][:4]
    checked = 0
    for job, raw in [*sample.values(), *((j, j.raw) for j in extra)]:
        drops = (
            raw.filter(pl.col("metric").is_in(COUNTERS))
            .sort(["node", "metric", "device", "time"])
            .with_columns(pl.col("value").diff().over(["node", "metric", "device"]).alias("d"))
            .filter(pl.col("d") < 0)
        )
        planned = {(n, m): t for n, m, t in job.resets}
        for node, metric, t in drops.select(["node", "metric", "time"]).iter_rows():
            assert (node, metric) in planned, (job.name, node, metric, t)
            assert t >= planned[(node, metric)]
            checked += 1
    assert checked > 0  # at least one planned reset really happened in the checked jobs


def test_faults_visible_where_labelled(sample: dict[str, tuple[Job, pl.DataFrame]]) -> None:
    job, raw = sample["unreachable"]
    ((node, onset),) = job.culprits.items()
    mine = raw.filter(pl.col("node") == node)
    assert mine.filter(pl.col("time") < onset).height > 0
    assert mine.filter(pl.col("time") >= onset).height == 0
    job, raw = sample["gpu_fell_off_bus"]
    ((node, onset),) = job.culprits.items()
    util = raw.filter((pl.col("node") == node) & (pl.col("metric") == "DCGM_FI_DEV_GPU_UTIL"))
    before = util.filter(pl.col("time") < onset).group_by("time").len()
    after = util.filter(pl.col("time") > onset + timedelta(minutes=1)).group_by("time").len()
    assert before.get_column("len").max() == 8 and after.get_column("len").max() == 7
    job, raw = sample["ecc_xid"]
    ((node, onset),) = job.culprits.items()
    xid = raw.filter((pl.col("metric") == "DCGM_FI_DEV_XID_ERRORS") & (pl.col("value") > 0))
    assert set(xid.get_column("node")) == {node}
    assert xid.get_column("time").min() >= onset


def _frame(rows: list[tuple[int, str, str, str, float]]) -> pl.DataFrame:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    return pl.DataFrame(
        {
            "time": [t0 + timedelta(seconds=r[0]) for r in rows],
            "node": [r[1] for r in rows],
            "metric": [r[2] for r in rows],
            "device": [r[3] for r in rows],
            "value": [r[4] for r in rows],
        }
    )


def test_aggregate_reduces_devices() -> None:
    e = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"
    u = "DCGM_FI_DEV_GPU_UTIL"
    raw = _frame(
        [
            (0, "a", e, "0", 100.0),
            (0, "a", e, "1", 200.0),
            (30, "a", e, "0", 110.0),  # device 1 vanished: the summed total steps down
            (0, "a", u, "0", 90.0),
            (0, "a", u, "1", 10.0),
        ]
    )
    how = {e: "sum", u: "min"}
    out = aggregate(raw, how.__getitem__).sort(["metric", "time"])
    assert out.columns == ["time", "node", "metric", "value"]
    assert out.get_column("value").to_list() == [10.0, 300.0, 110.0]  # GPU_UTIL sorts first
    avg = aggregate(raw, lambda m: "avg").filter(pl.col("metric") == u)
    assert avg.get_column("value").to_list() == [50.0]
    with pytest.raises(ValueError, match="agg_for"):
        aggregate(raw, lambda m: "median")


def test_largest_job_is_bounded(corpus: list[Job]) -> None:
    big = max(corpus, key=lambda j: len(j.nodes))
    raw = big.raw
    assert raw.get_column("node").n_unique() == 1024
    assert raw.estimated_size() < 3 * 2**30


def _after(raw: pl.DataFrame, metric: str, t: datetime) -> pl.DataFrame:
    return raw.filter((pl.col("metric") == metric) & (pl.col("time") >= t))


def _growth(raw: pl.DataFrame, metric: str, t: datetime) -> pl.DataFrame:
    """Per node: largest increase of any device's counter from time t on."""
    return (
        _after(raw, metric, t)
        .group_by(["node", "device"])
        .agg((pl.col("value").max() - pl.col("value").min()).alias("g"))
        .group_by("node")
        .agg(pl.col("g").max())
    )


def test_each_degradation_shows_locally(sample: dict[str, tuple[Job, pl.DataFrame]]) -> None:
    """The planted signature is on the culprit and on no other node (fair, SRE-visible)."""
    for kind, metric, how in [
        ("thermal_slowdown", "DCGM_FI_DEV_GPU_TEMP", "max"),
        ("power_brake", "DCGM_FI_DEV_SM_CLOCK", "median"),
        ("pcie_downgrade", "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "growth"),
        ("aoc_flapping", "node_infiniband_link_downed_total", "growth"),
        ("nic_dropout", "node_infiniband_state_id", "min"),
        ("host_mem_pressure", "node_memory_MemAvailable_bytes", "min"),
        ("gpu_hang", "DCGM_FI_DEV_POWER_USAGE", "max"),
    ]:
        job, raw = sample[kind]
        ((node, onset),) = job.culprits.items()
        t = onset + timedelta(minutes=6)
        if how == "growth":
            per = _growth(raw, metric, t)
        else:
            agg = {"max": pl.col("value").max(), "min": pl.col("value").min()}.get(
                how, pl.col("value").median()
            )
            per = _after(raw, metric, t).group_by("node").agg(agg.alias("g"))
        mine = per.filter(pl.col("node") == node).get_column("g").item()
        others = per.filter(pl.col("node") != node).get_column("g")
        if how in ("min", "median"):
            assert mine < 0.75 * others.min(), kind
        else:
            assert mine > 1.5 * max(others.max(), 1.0), kind
