"""Self-checks of the labelled corpus v2 (the data and its labels), not of any detector."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from aegis_slurm.metrics.align import align
from aegis_slurm.metrics.catalog import (
    CLOCK_REASONS_SERIES,
    DEFAULT_METRICS,
    NVLINK_ERROR_COUNTERS,
    PAUSE_DURATION_SERIES,
    spec_for,
)

from . import corpus_v2 as c

#: catalog series added in session 6 that v2's sites do not have: the Ethernet link series
#: (v2 is InfiniBand only) and the NVLink error counters (opt-in in dcgm-exporter's CSV)
NOT_IN_V2 = {
    "node_network_up",
    "node_network_carrier_changes_total",
    "node_network_receive_errs_total",
    *NVLINK_ERROR_COUNTERS,
    # round 7: an Ethernet NIC's pause (mlx5 ethtool statistics); v2's sites are InfiniBand
    PAUSE_DURATION_SERIES,
    "node_ethtool_transmitted_pause_storm_error_events",
    # round 8: the PCIe link, host memory errors, softnet drops, RDMA out-of-sequence packets
    "DCGM_FI_DEV_PCIE_LINK_WIDTH",
    "DCGM_FI_DEV_PCIE_LINK_GEN",
    "node_edac_correctable_errors_total",
    "node_edac_uncorrectable_errors_total",
    "node_softnet_dropped_total",
    "node_netstat_Tcp_RetransSegs",
    "node_infiniband_out_of_sequence_packets_received_total",
    # round 9: local error counters and states no corpus was read for
    "node_network_transmit_errs_total",
    "node_infiniband_symbol_error_total",
    "node_infiniband_link_error_recovery_total",
    "node_infiniband_local_link_integrity_errors_total",
    "node_infiniband_excessive_buffer_overrun_errors_total",
    "node_infiniband_state_id",
    "node_vmstat_oom_kill",
    "node_filesystem_device_error",
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
    "DCGM_FI_DEV_RETIRED_DBE",
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
    "DCGM_FI_DEV_ROW_REMAP_FAILURE",
    # round 10: NVLink 5's counters and the clock source
    "node_time_clocksource_current_info",
    "DCGM_FI_DEV_NVLINK_RX_SYMBOL_ERROR_TOTAL",
    "DCGM_FI_DEV_NVLINK_EFFECTIVE_ERROR_TOTAL",
    "DCGM_FI_DEV_NVLINK_RECOVERY_EVENT_TOTAL",
    "DCGM_FI_DEV_NVLINK_RECOVERY_FAILED_TOTAL",
    "DCGM_FI_DEV_NVLINK_COUNT_RX_SYMBOL_ERRORS",
    "DCGM_FI_DEV_NVLINK_COUNT_EFFECTIVE_ERRORS",
    "DCGM_FI_DEV_NVLINK_COUNT_LINK_RECOVERY_EVENTS",
    "DCGM_FI_DEV_NVLINK_COUNT_LINK_RECOVERY_FAILED_EVENTS",
    # round 11: the clock-event reasons (a name pattern over both of DCGM's names)
    CLOCK_REASONS_SERIES,
    # round 12: the memory clock (in dcgm-exporter's default CSV; v2 did not model it)
    "DCGM_FI_DEV_MEM_CLOCK",
    "node_pressure_io_stalled_seconds_total",
    # round 13: the NICs' speed and PSI full memory (node_exporter's netclass and pressure
    # collectors; v2 modelled neither)
    "node_network_speed_bytes",
    "node_pressure_memory_stalled_seconds_total",
    # round 14: memory taken offline as corrupted (node_exporter's meminfo; v2 did not model it)
    "node_memory_HardwareCorrupted_bytes",
    # round 15: the CPU packages' thermal throttles (node_exporter's cpu collector; v2 did not
    # model it)
    "node_cpu_package_throttles_total",
}
SHIPPED = (
    Path(__file__).parent.parent / "fixtures" / "metrics" / "dcgm-exporter-default-counters.csv"
)


@pytest.fixture(scope="module")
def corpus() -> list[c.Job]:
    return c.jobs(0)


@pytest.fixture(scope="module")
def small(corpus: list[c.Job]) -> dict[str, tuple[c.Job, pl.DataFrame]]:
    """The smallest job of each kind, rendered once."""
    out: dict[str, tuple[c.Job, pl.DataFrame]] = {}
    for job in sorted(corpus, key=lambda j: len(j.nodes)):
        if job.kind not in out:
            out[job.kind] = (job, job.raw)
    return out


def test_plan_counts_sizes_and_labels(corpus: list[c.Job]) -> None:
    assert 60 <= len(corpus) <= 90
    kinds = Counter(j.kind for j in corpus)
    assert set(kinds) == set(c.FAULT_KINDS) | set(c.BENIGN_KINDS)
    healthy = sum(1 for j in corpus if not j.culprits)
    assert 0.4 <= healthy / len(corpus) <= 0.6
    assert len({j.name for j in corpus}) == len(corpus)
    sizes = [len(j.nodes) for j in corpus]
    assert min(sizes) >= 4 and max(sizes) == 1024
    for j in corpus:
        assert len(set(j.nodes)) == len(j.nodes)
        assert j.ports in (4, 8)
        assert j.dcgm_interval in (15.0, 30.0, 60.0) and j.node_interval in (15.0, 30.0, 60.0)
        assert j.start.tzinfo is not None and j.end > j.start
        assert j.notes
        if j.kind in c.BENIGN_KINDS:
            assert j.culprits == {}
        else:
            assert 1 <= len(j.culprits) <= 2
            assert len(j.culprits) == (2 if j.kind == "two_faults" else 1)
        for node, onset in j.culprits.items():
            assert node in j.nodes
            # room for a 4-minute continuity rule, and after warm-up
            assert j.start + timedelta(minutes=6) < onset <= j.end - timedelta(minutes=4)


def test_determinism_by_seed(corpus: list[c.Job]) -> None:
    again = c.jobs(0)
    assert [(j.name, j.culprits, j.nodes) for j in again] == [
        (j.name, j.culprits, j.nodes) for j in corpus
    ]
    job = min(corpus, key=lambda j: len(j.nodes))
    twin = next(j for j in again if j.name == job.name)
    assert job.raw.equals(twin.raw)
    other = c.jobs(1)
    assert [j.culprits for j in other] != [j.culprits for j in corpus]


def test_metric_names_are_the_shipped_ones(small: dict[str, tuple[c.Job, pl.DataFrame]]) -> None:
    shipped = {
        line.split(",")[0].strip()
        for line in SHIPPED.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    dcgm = {m for m, _ in c.DCGM_METRICS}
    assert dcgm - shipped == {"DCGM_FI_PROF_NVLINK_TX_BYTES"}
    assert shipped - dcgm == {"DCGM_FI_DEV_VGPU_LICENSE_STATUS", "DCGM_FI_DRIVER_VERSION"}
    # every catalog metric (or, for one derived in PromQL, its exporter series) is in the
    # corpus, so the evaluator can read them all; but those added in session 6 that v2's sites
    # do not have (InfiniBand only, dcgm-exporter's default CSV)
    needed = {m.derived[0] if m.derived else m.name for m in DEFAULT_METRICS} - NOT_IN_V2
    assert needed <= set(c.METRICS)
    _, raw = small["healthy"]
    assert set(raw["metric"].cast(pl.Utf8).unique()) == set(c.METRICS)
    for m, kind in c.KIND_OF.items():
        if m.endswith("_total"):
            assert kind == "counter", m


def test_raw_shape_devices_and_time_range(small: dict[str, tuple[c.Job, pl.DataFrame]]) -> None:
    for kind, (job, raw) in small.items():
        assert raw.columns == ["time", "node", "metric", "device", "value"]
        assert raw.schema["time"] == pl.Datetime("us", "UTC")
        assert raw["value"].is_finite().all(), kind
        assert raw["time"].min() >= job.start and raw["time"].max() <= job.end, kind
        assert set(raw["node"].cast(pl.Utf8).unique()) <= set(job.nodes)
        devs = raw.group_by("metric").agg(pl.col("device").cast(pl.Utf8).unique().sort())
        by = {r["metric"]: set(r["device"]) for r in devs.iter_rows(named=True)}
        gpus = {str(g) for g in range(c.GPUS)}
        ports = {f"mlx5_{p}:1" for p in range(job.ports)}
        for m, _ in c.DCGM_METRICS:
            assert by[m] == gpus, (kind, m)
        for m, _ in c.IB_METRICS:
            assert by[m] == ports, (kind, m)
        assert by["node_load1"] == {""} and by["node_memory_MemAvailable_bytes"] == {""}
        assert by["node_cpu_seconds_total"] == {"user", "system", "idle"}
        # one scrape: one timestamp shared by every series of that exporter on that node
        one = raw.filter(pl.col("metric").cast(pl.Utf8).is_in([m for m, _ in c.DCGM_METRICS]))
        per = one.group_by("node", "time").agg(pl.len().alias("n"))
        assert per["n"].max() <= len(c.DCGM_METRICS) * c.GPUS
        assert per["n"].median() == len(c.DCGM_METRICS) * c.GPUS


def _decreases(raw: pl.DataFrame, counters: list[str]) -> pl.DataFrame:
    return (
        raw.filter(pl.col("metric").cast(pl.Utf8).is_in(counters))
        .sort("node", "metric", "device", "time")
        .with_columns(
            pl.col("value").diff().over("node", "metric", "device").alias("d"),
        )
        .filter(pl.col("d") < 0)
    )


def test_counters_monotonic_but_for_resets(
    corpus: list[c.Job], small: dict[str, tuple[c.Job, pl.DataFrame]]
) -> None:
    counters = [m for m, k in c.KIND_OF.items() if k == "counter"]
    resets_seen = 0
    for kind, (job, raw) in small.items():
        dec = _decreases(raw, counters)
        if dict(job._spec.options).get("reset"):
            # a reset restarts from near zero, once per series, on at most three nodes per family
            assert dec.group_by("metric").agg(pl.col("node").n_unique())["node"].max() <= 3
            assert dec.group_by("node", "metric", "device").len()["len"].max() == 1
            assert dec["value"].max() < 1e6
            assert set(dec["metric"].cast(pl.Utf8)) <= {
                "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
                "node_infiniband_port_data_received_bytes_total",
            }
            resets_seen += dec.height
        else:
            assert dec.height == 0, (kind, dec.head())
    assert resets_seen > 0  # the counter_reset job really resets something


def test_scrapes_have_offsets_jitter_and_losses(
    small: dict[str, tuple[c.Job, pl.DataFrame]],
) -> None:
    job, raw = small["healthy"]
    s = raw.filter(pl.col("metric") == "DCGM_FI_DEV_SM_CLOCK", pl.col("device") == "0")
    t = s.with_columns(pl.col("time").dt.epoch("us").cast(pl.Float64).truediv(1e6).alias("t"))
    first = t.group_by("node").agg(pl.col("t").min())["t"].to_numpy()
    offsets = np.mod(first - first.min(), job.dcgm_interval)
    assert len(np.unique(np.round(offsets, 1))) > 1  # targets are scraped at different offsets
    gaps = t.sort("node", "t").with_columns(pl.col("t").diff().over("node").alias("g"))["g"]
    gaps = gaps.drop_nulls().to_numpy()
    assert abs(np.median(gaps) - job.dcgm_interval) < 1.0
    assert np.std(gaps[gaps < 1.5 * job.dcgm_interval]) > 0  # jitter
    expected = len(job.nodes) * ((job.end - job.start).total_seconds() / job.dcgm_interval)
    lost = 1 - s.height / expected
    assert 0.0 < lost < 0.15


def test_unreachable_machine_stops_reporting(small: dict[str, tuple[c.Job, pl.DataFrame]]) -> None:
    job, raw = small["machine_unreachable"]
    ((node, onset),) = job.culprits.items()
    after = raw.filter(pl.col("time") > onset + timedelta(seconds=1))
    assert node not in set(after["node"].cast(pl.Utf8))
    assert after["node"].n_unique() == len(job.nodes) - 1
    # its peers hang in NCCL: utilisation 100 % at near-idle power
    late = after.filter(pl.col("time") > onset + timedelta(minutes=2))
    util = late.filter(pl.col("metric") == "DCGM_FI_DEV_GPU_UTIL")["value"]
    power = late.filter(pl.col("metric") == "DCGM_FI_DEV_POWER_USAGE")["value"]
    assert util.median() == 100 and power.median() < 150


def test_nic_dropout_removes_the_port_series(small: dict[str, tuple[c.Job, pl.DataFrame]]) -> None:
    job, raw = small["nic_dropout"]
    ((node, onset),) = job.culprits.items()
    ib = raw.filter(pl.col("metric") == "node_infiniband_port_data_received_bytes_total")
    late = ib.filter(pl.col("time") > onset + timedelta(seconds=job.node_interval * 2))
    ports = late.group_by("node").agg(pl.col("device").n_unique().alias("p"))
    p = dict(zip(ports["node"].cast(pl.Utf8), ports["p"], strict=True))
    assert p[node] == job.ports - 1
    assert all(v == job.ports for k, v in p.items() if k != node)


def test_thermal_culprit_is_hot_and_slow_while_everyone_slows(
    small: dict[str, tuple[c.Job, pl.DataFrame]],
) -> None:
    """Synchronous training: a slow GPU slows every node; only its own clock/temperature show it."""
    job, raw = small["slow_gpu_thermal"]
    ((node, onset),) = job.culprits.items()
    agg = c.aggregate(raw, lambda m: spec_for(m).agg)
    late = agg.filter(pl.col("time") > onset + timedelta(minutes=5))
    early = agg.filter(pl.col("time") < onset)

    def med(df: pl.DataFrame, metric: str, culprit: bool) -> float:
        sel = pl.col("node") == node if culprit else pl.col("node") != node
        return float(df.filter(pl.col("metric") == metric, sel)["value"].median())

    assert med(late, "DCGM_FI_DEV_GPU_TEMP", True) >= 84
    assert med(late, "DCGM_FI_DEV_SM_CLOCK", True) < 0.85 * med(late, "DCGM_FI_DEV_SM_CLOCK", False)
    # peers slow down too: less tensor work and power than before the fault
    t = "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"
    assert med(late, t, False) < 0.9 * med(early, t, False)


def test_ecc_hang_labels_match_the_data(small: dict[str, tuple[c.Job, pl.DataFrame]]) -> None:
    job, raw = small["ecc_xid_hang"]
    ((node, onset),) = job.culprits.items()
    xid = raw.filter(pl.col("metric") == "DCGM_FI_DEV_XID_ERRORS")
    assert xid.filter(pl.col("time") < onset)["value"].max() == 0
    hit = xid.filter(pl.col("time") > onset, pl.col("value") > 0)
    assert set(hit["node"].cast(pl.Utf8)) <= {node}
    assert set(hit["value"].unique()) <= {48.0, 63.0, 94.0, 79.0}


def test_benign_jobs_have_what_they_claim(small: dict[str, tuple[c.Job, pl.DataFrame]]) -> None:
    _, raw = small["heterogeneous_memory"]
    total = raw.filter(pl.col("metric") == "node_memory_MemTotal_bytes")["value"].unique()
    assert set(total) == {1024.0 * 2**30, 2048.0 * 2**30}
    _, raw = small["idle_gpu_by_design"]
    util = raw.filter(pl.col("metric") == "DCGM_FI_DEV_GPU_UTIL")
    idle = util.group_by("node", "device").agg(pl.col("value").max()).filter(pl.col("value") == 0)
    assert idle.height == 1
    _, raw = small["sparse_counters"]
    rep = raw.filter(pl.col("metric") == "DCGM_FI_DEV_PCIE_REPLAY_COUNTER").sort("time")
    d = rep.with_columns(pl.col("value").diff().over("node", "device").alias("d"))["d"]
    d = d.drop_nulls()
    assert 0 < (d > 0).sum() < 0.05 * d.len()  # mostly zero, with sparse increments


def test_aggregate_follows_agg_for(small: dict[str, tuple[c.Job, pl.DataFrame]]) -> None:
    job, raw = small["constant_offset"]
    lo = c.aggregate(raw, lambda m: "min")
    hi = c.aggregate(raw, lambda m: "max")
    assert lo.columns == ["time", "node", "metric", "value"]
    assert lo.schema["node"] == pl.Utf8 and lo.schema["metric"] == pl.Utf8
    keys = raw.select("time", "node", "metric").unique().height
    assert lo.height == keys == hi.height
    joined = lo.join(hi, on=["time", "node", "metric"], suffix="_hi")
    assert (joined["value"] <= joined["value_hi"]).all()
    temp = joined.filter(pl.col("metric") == "DCGM_FI_DEV_GPU_TEMP")
    assert (temp["value_hi"] - temp["value"]).max() > 2  # GPUs of a node differ
    ib = c.aggregate(raw.filter(pl.col("metric") == "node_infiniband_state_id"), lambda m: "sum")
    assert set(ib["value"].unique()) == {4.0 * job.ports}
    with pytest.raises(ValueError, match="median"):
        c.aggregate(raw, lambda m: "median")


def test_aggregated_table_meets_the_detector_contract(
    small: dict[str, tuple[c.Job, pl.DataFrame]],
) -> None:
    """The aggregate is what ``aegis-slurm minder FILE`` reads: nothing in it is malformed."""
    job, raw = small["late_starter"]
    agg = c.aggregate(raw, lambda m: spec_for(m).agg)
    # the catalog's plain series (a derived one is computed by the evaluator, as its PromQL does)
    # but those v2's sites do not have
    names = [m.name for m in DEFAULT_METRICS if m.derived is None and m.name not in NOT_IN_V2]
    a = align(agg.filter(pl.col("metric").is_in(names)), nodes=job.nodes)
    assert sum(a.dropped.values()) == 0
    assert set(a.data) == set(names)
    assert min(abs(a.step - job.dcgm_interval), abs(a.step - job.node_interval)) < 1.0
    # every node reports (late starter included): no all-missing row
    for m in names:
        assert not np.isnan(a.data[m]).all(axis=1).any(), m


def test_cooling_heterogeneity_is_a_group_not_one_node(
    small: dict[str, tuple[c.Job, pl.DataFrame]],
) -> None:
    _, raw = small["heterogeneous_cooling"]
    agg = c.aggregate(raw, lambda m: spec_for(m).agg)
    t = (
        agg.filter(pl.col("metric") == "DCGM_FI_DEV_GPU_TEMP")
        .group_by("node")
        .agg(pl.col("value").median())
    )
    v = np.sort(t["value"].to_numpy())
    gap = np.argmax(np.diff(v))  # the cooler group sits below the largest gap
    assert np.diff(v)[gap] >= 2 and 2 <= gap + 1 <= len(v) - 1


def test_scrapes_faster_than_dcgm_collection_repeat_cached_values(corpus: list[c.Job]) -> None:
    job = min((j for j in corpus if j.dcgm_interval == 15.0), key=lambda j: len(j.nodes))
    raw = job.raw.filter(pl.col("metric") == "DCGM_FI_DEV_POWER_USAGE").sort("time")
    d = raw.with_columns(pl.col("value").diff().over("node", "device").alias("d"))["d"]
    same = float((d.drop_nulls() == 0).mean())
    assert 0.3 < same < 0.7  # about every other 15 s scrape re-reads the 30 s collection


def test_table_lists_every_job(corpus: list[c.Job]) -> None:
    t = c.table(corpus)
    assert t.height == len(corpus)
    assert t["faulty"].sum() == sum(1 for j in corpus if j.culprits)
    assert t.filter(pl.col("faulty"))["culprits"].list.len().min() >= 1
    assert t.filter(~pl.col("faulty"))["culprits"].list.len().max() == 0


def test_dcgm_blank_values_only_where_profiling_is_paused(
    small: dict[str, tuple[c.Job, pl.DataFrame]],
) -> None:
    for kind, (_, raw) in small.items():
        blank = raw.filter(pl.col("value") == c.DCGM_FP64_BLANK)
        if kind != "profiler_paused":
            assert blank.height == 0, kind
            continue
        assert blank["node"].n_unique() == 1
        assert set(blank["metric"].cast(pl.Utf8)) == {
            m for m, _ in c.DCGM_METRICS if m.startswith("DCGM_FI_PROF_")
        }
        span = (blank["time"].max() - blank["time"].min()).total_seconds()
        assert 120 <= span <= 600
