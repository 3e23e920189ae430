"""Sanity tests of the blind corpus v5 itself (never of a detector).

Only the smallest job of each kind is rendered, so the whole file runs in seconds.
"""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import polars as pl
import pytest

from .corpus_v5 import (
    BENIGN_KINDS,
    COUNTER_METRICS,
    FAULT_KINDS,
    RATE_VALUED_COUNTERS,
    Job,
    aggregate,
    jobs,
    table,
)

SCHEMA = {
    "time": pl.Datetime("ms", "UTC"),
    "node": pl.String,
    "metric": pl.String,
    "device": pl.String,
    "value": pl.Float64,
}


@pytest.fixture(scope="module")
def corpus() -> list[Job]:
    return jobs(0)


@pytest.fixture(scope="module")
def smallest(corpus: list[Job]) -> dict[str, tuple[Job, pl.DataFrame]]:
    """The smallest job of every kind, rendered once."""
    out: dict[str, tuple[Job, pl.DataFrame]] = {}
    for kind in (*FAULT_KINDS, *BENIGN_KINDS):
        js = [j for j in corpus if j.kind == kind]
        j = min(js, key=lambda x: (len(x.nodes) * x.minutes, x.name))
        out[kind] = (j, j.raw)
    return out


def test_kinds_partition_and_all_present(corpus: list[Job]) -> None:
    assert not set(FAULT_KINDS) & set(BENIGN_KINDS)
    kinds = {j.kind for j in corpus}
    assert kinds == set(FAULT_KINDS) | set(BENIGN_KINDS)
    for j in corpus:
        assert (j.kind in FAULT_KINDS) == bool(j.culprits), j.name


def test_population_size_split_and_sizes(corpus: list[Job]) -> None:
    assert 100 <= len(corpus) <= 120
    healthy = sum(not j.culprits for j in corpus) / len(corpus)
    assert 0.45 <= healthy <= 0.55
    sizes = [len(j.nodes) for j in corpus]
    assert min(sizes) >= 4 and max(sizes) <= 1024
    assert sum(s >= 256 for s in sizes) >= 3
    assert sum(8 <= s <= 128 for s in sizes) >= len(sizes) * 0.6
    assert sum(len(j.culprits) == 2 for j in corpus) >= 2
    for j in corpus:
        assert 30 <= j.minutes <= 120, j.name
        assert j.dcgm_interval in (10.0, 15.0, 30.0, 60.0)
        assert j.node_interval in (10.0, 15.0, 30.0, 60.0)
        assert j.start.tzinfo is not None and j.start.utcoffset() == timedelta(0)
        assert len(set(j.nodes)) == len(j.nodes)
    assert len({j.name for j in corpus}) == len(corpus)
    assert len({j.site for j in corpus}) >= 4


def test_onsets_inside_windows_and_culprits_are_members(corpus: list[Job]) -> None:
    for j in corpus:
        warm_end = j.start + timedelta(seconds=max(0.0, j.spec["warm_end"]))
        for node, onset in j.culprits.items():
            assert node in j.nodes, j.name
            assert onset.tzinfo is not None
            assert onset >= warm_end + timedelta(minutes=3), j.name
            assert onset <= j.end - timedelta(minutes=10), j.name


def test_deterministic_for_a_seed(corpus: list[Job]) -> None:
    again = jobs(0)
    assert table(again).equals(table(corpus))
    small = min(corpus, key=lambda x: len(x.nodes) * x.minutes)
    twin = next(j for j in again if j.name == small.name)
    assert small.raw.equals(twin.raw)
    other = jobs(1)
    assert table(other)["culprits"].to_list() != table(corpus)["culprits"].to_list()


def test_raw_is_not_cached(corpus: list[Job]) -> None:
    small = min(corpus, key=lambda x: len(x.nodes) * x.minutes)
    assert small.raw is not small.raw


def test_schema_dtypes_and_values(smallest: dict[str, tuple[Job, pl.DataFrame]]) -> None:
    for kind, (j, raw) in smallest.items():
        assert dict(raw.schema) == SCHEMA, kind
        assert raw.height > 0
        assert raw.null_count().sum_horizontal().item() == 0, kind
        assert raw["value"].is_nan().sum() == 0, kind
        assert set(raw["node"].unique()) <= set(j.nodes)
        lo = pl.lit(j.start).cast(pl.Datetime("ms", "UTC"))
        hi = pl.lit(j.end).cast(pl.Datetime("ms", "UTC"))
        assert raw.filter((pl.col("time") < lo) | (pl.col("time") >= hi)).height == 0
        # one sample per series and scrape
        assert raw.select(["time", "node", "metric", "device"]).is_duplicated().sum() == 0, kind


def test_devices_follow_the_exporters(smallest: dict[str, tuple[Job, pl.DataFrame]]) -> None:
    for kind, (_, raw) in smallest.items():
        dev = raw.group_by("metric").agg(pl.col("device").unique())
        for metric, devices in dev.iter_rows():
            if metric.startswith("DCGM_"):
                assert all(d.isdigit() and int(d) < 8 for d in devices), (kind, metric)
            elif metric.startswith("node_infiniband_"):
                assert all(d.startswith("mlx5_") and d.endswith(":1") for d in devices)
            elif metric == "node_cpu_seconds_total":
                assert set(devices) <= {
                    "idle",
                    "iowait",
                    "irq",
                    "nice",
                    "softirq",
                    "steal",
                    "system",
                    "user",
                }
            elif metric.startswith("node_network_"):
                # lo has no speed file: node_exporter exports no speed for it
                assert ("lo" in devices) != (metric == "node_network_speed_bytes"), metric
                assert any(d.startswith("veth") for d in devices), metric
            elif metric.startswith("node_disk_"):
                assert set(devices) <= {"nvme0n1", "nvme1n1"}
            else:
                assert devices == [""], (kind, metric)


def test_counters_monotone_except_deliberate_resets(
    smallest: dict[str, tuple[Job, pl.DataFrame]],
) -> None:
    for kind, (_, raw) in smallest.items():
        c = raw.filter(
            (pl.col("metric").str.ends_with("_total") | pl.col("metric").is_in(COUNTER_METRICS))
            & ~pl.col("metric").is_in(list(RATE_VALUED_COUNTERS))
        )
        d = (
            c.sort("time")
            .group_by(["node", "metric", "device"], maintain_order=True)
            .agg(pl.col("value").diff().min().alias("dmin"))
        )
        bad = d.filter(pl.col("dmin") < 0)
        if kind == "ib_counter_reset":
            assert bad.height > 0
            assert bad["metric"].str.starts_with("node_infiniband_").all()
        else:
            assert bad.height == 0, (kind, bad.head())


def test_fault_evidence_shapes(smallest: dict[str, tuple[Job, pl.DataFrame]]) -> None:
    # vanished series: a culprit's node has no sample after onset
    j, raw = smallest["node_unreachable"]
    ((node, onset),) = j.culprits.items()
    after = raw.filter((pl.col("node") == node) & (pl.col("time") > onset))
    assert after.height == 0
    # Xid gauge sticks on the culprit
    j, raw = smallest["xid_ecc_hang"]
    ((node, onset),) = j.culprits.items()
    xid = raw.filter(
        (pl.col("metric") == "DCGM_FI_DEV_XID_ERRORS")
        & (pl.col("time") > onset + timedelta(minutes=1))
    )
    assert set(xid.filter(pl.col("node") == node)["value"].unique()) & {48.0, 94.0, 95.0}
    # the NIC series of the culprit stop, the peers keep theirs
    j, raw = smallest["nic_dropout"]
    ((node, onset),) = j.culprits.items()
    late = raw.filter(pl.col("time") > onset + timedelta(minutes=2))
    per = late.group_by("node").agg(pl.col("device").n_unique())
    mine = per.filter(pl.col("node") == node)["device"].item()
    assert mine < per.filter(pl.col("node") != node)["device"].min()


def test_healthy_jobs_have_no_culprits(corpus: list[Job]) -> None:
    t = table(corpus)
    assert t.filter(~pl.col("faulty"))["culprits"].list.len().max() == 0
    assert t.filter(pl.col("faulty"))["culprits"].list.len().min() >= 1
    assert set(t.columns) >= {"name", "kind", "faulty", "nodes", "minutes", "culprits", "onsets"}


def test_aggregate(smallest: dict[str, tuple[Job, pl.DataFrame]]) -> None:
    _, raw = smallest["steady"]
    agg = aggregate(raw, lambda m: "avg")
    assert agg.columns == ["time", "node", "metric", "value"]
    # counters are summed whatever agg_for says
    m = "node_cpu_seconds_total"
    one = raw.filter(pl.col("metric") == m).group_by(["time", "node"]).agg(pl.col("value").sum())
    got = agg.filter(pl.col("metric") == m).join(one, on=["time", "node"])
    assert np.allclose(got["value"].to_numpy(), got["value_right"].to_numpy())
    g = "DCGM_FI_DEV_GPU_TEMP"
    mx = aggregate(raw.filter(pl.col("metric") == g), lambda m: "max")
    mn = aggregate(raw.filter(pl.col("metric") == g), lambda m: "min")
    assert (mx["value"].to_numpy() >= mn["value"].to_numpy()).all()
    with pytest.raises(ValueError):
        aggregate(raw, lambda m: "median")
