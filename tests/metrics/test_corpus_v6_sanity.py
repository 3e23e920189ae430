"""Sanity of corpus v6 itself (never of a detector): labels, schema, exporter fidelity, fault
evidence on the culprit. Renders only the smallest job of each kind."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import numpy as np
import polars as pl
import pytest

from .corpus_v6 import (
    BENIGN_KINDS,
    COUNTER_METRICS,
    DCGM_FIELDS,
    FAULT_KINDS,
    RATE_VALUED_COUNTERS,
    SITES,
    aggregate,
    is_counter,
    jobs,
    table,
)

JOBS = jobs(0)
_SMALLEST = {}
for _j in JOBS:
    cur = _SMALLEST.get(_j.kind)
    if cur is None or len(_j.nodes) * _j.minutes < len(cur.nodes) * cur.minutes:
        _SMALLEST[_j.kind] = _j
_RAW: dict[str, pl.DataFrame] = {}


def raw(kind: str) -> pl.DataFrame:
    if kind not in _RAW:
        _RAW[kind] = _SMALLEST[kind].raw
    return _RAW[kind]


def series(df, node, metric, device=None) -> pl.DataFrame:
    f = df.filter((pl.col("node") == node) & (pl.col("metric") == metric))
    if device is not None:
        f = f.filter(pl.col("device") == device)
    return f.sort("time")


def test_kinds_partition_and_all_present():
    assert not set(FAULT_KINDS) & set(BENIGN_KINDS)
    used = {j.kind for j in JOBS}
    assert used == set(FAULT_KINDS) | set(BENIGN_KINDS)


def test_population():
    n = len(JOBS)
    healthy = sum(not j.faulty for j in JOBS)
    culprits = sum(len(j.culprits) for j in JOBS)
    sizes = sorted(len(j.nodes) for j in JOBS)
    assert 110 <= n <= 130
    assert 0.4 * n <= healthy <= 0.6 * n
    assert culprits >= 50
    assert sum(len(j.culprits) == 2 for j in JOBS) >= 3
    assert sizes[0] >= 4 and sizes[-1] <= 1024
    assert 24 <= sizes[len(sizes) // 2] <= 48
    assert sum(s >= 256 for s in sizes) >= 5
    assert all(30 <= j.minutes <= 120 for j in JOBS)
    assert all(
        j.dcgm_interval in (10, 15, 30, 60) and j.node_interval in (10, 15, 30, 60) for j in JOBS
    )
    assert len({j.site for j in JOBS}) == len(SITES)
    assert len({j.name for j in JOBS}) == n


def test_labels_onsets_inside_windows():
    for j in JOBS:
        if j.kind in BENIGN_KINDS:
            assert not j.culprits, j.name
            continue
        assert j.culprits, j.name
        warm = timedelta(seconds=j.spec["warm_end"])
        for node, on in j.culprits.items():
            assert node in j.nodes
            assert on.tzinfo is not None
            assert on >= j.start + warm + timedelta(minutes=3) - timedelta(seconds=1), j.name
            assert on <= j.end - timedelta(minutes=10), j.name


def test_deterministic_and_seed_dependent():
    a, b = jobs(0), jobs(0)
    assert [(j.name, j.nodes, j.culprits, j.spec) for j in a] == [
        (j.name, j.nodes, j.culprits, j.spec) for j in b
    ]
    c = jobs(1)
    assert [j.culprits for j in a] != [j.culprits for j in c]
    j = _SMALLEST["steady"]
    assert j.raw.equals(j.raw)


def test_raw_not_cached():
    j = _SMALLEST["steady"]
    assert j.raw is not j.raw


def test_table():
    t = table(JOBS)
    assert t.height == len(JOBS)
    assert {
        "name",
        "kind",
        "site",
        "faulty",
        "nodes",
        "minutes",
        "culprits",
        "onsets",
        "first_onset",
    } <= set(t.columns)
    assert t.filter(pl.col("faulty")).get_column("first_onset").null_count() == 0


@pytest.mark.parametrize("kind", FAULT_KINDS + BENIGN_KINDS)
def test_schema_and_devices(kind):
    df = raw(kind)
    j = _SMALLEST[kind]
    site = SITES[j.site]
    assert df.schema == pl.Schema(
        {
            "time": pl.Datetime("ms", "UTC"),
            "node": pl.String,
            "metric": pl.String,
            "device": pl.String,
            "value": pl.Float64,
        }
    )
    assert set(df.get_column("node").unique()) <= set(j.nodes)
    lo, hi = df.get_column("time").min(), df.get_column("time").max()
    assert lo >= j.start and hi <= j.end
    dev = df.group_by("metric").agg(pl.col("device").unique())
    for m, devs in dev.iter_rows():
        devs = set(devs)
        if m.startswith("DCGM_"):
            assert m in DCGM_FIELDS[site.dcgm]
            assert devs <= {str(g) for g in range(site.gpus)}
        elif m.startswith("node_infiniband_"):
            assert devs == {f"{d}:1" for d in site.ib}
        elif m.startswith(("node_network_", "node_ethtool_")):
            assert devs <= set(site.eth)
        elif m == "node_cpu_seconds_total":
            assert devs == {"user", "system", "iowait", "idle", "irq", "softirq", "nice", "steal"}
        elif m.startswith("node_disk_"):
            assert devs == {"nvme0n1"}
        else:
            assert devs == {""}, m
    if not site.ib:
        assert not df.filter(pl.col("metric").str.starts_with("node_infiniband_")).height
    if "pressure" not in site.collectors:
        assert not df.filter(pl.col("metric").str.starts_with("node_pressure_")).height
    if not site.nvlink:
        assert not df.filter(pl.col("metric") == "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL").height
    if kind != "ha_replica_interleave":
        assert df.select("time", "node", "metric", "device").is_duplicated().sum() == 0


@pytest.mark.parametrize("kind", FAULT_KINDS + BENIGN_KINDS)
def test_counters_monotone_except_deliberate_resets(kind):
    df = raw(kind)
    j = _SMALLEST[kind]
    ctr = df.filter(pl.col("metric").is_in(list(COUNTER_METRICS - RATE_VALUED_COUNTERS)))
    d = (
        ctr.sort("time")
        .with_columns(dv=pl.col("value").diff().over(["node", "metric", "device"]))
        .filter(pl.col("dv") < 0)
    )
    reset = j.spec.get("ib_reset")
    allowed = {j.nodes[reset[0]]} if reset else set()
    bad = d.filter(
        ~(
            pl.col("node").is_in(list(allowed))
            & pl.col("metric").str.starts_with("node_infiniband_")
        )
    )
    assert bad.height == 0, bad.head()
    # a glitch-free counter is never negative
    assert ctr.get_column("value").min() >= 0


def test_rate_valued_counters_dip():
    df = raw("steady")
    r = df.filter(pl.col("metric").is_in(list(RATE_VALUED_COUNTERS)))
    if r.height:
        d = r.sort("time").with_columns(
            dv=pl.col("value").diff().over(["node", "metric", "device"])
        )
        assert d.filter(pl.col("dv") < 0).height > 0


def test_is_counter():
    assert is_counter("node_cpu_seconds_total")
    assert is_counter("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION")
    assert not is_counter("DCGM_FI_DEV_GPU_UTIL")
    assert RATE_VALUED_COUNTERS <= COUNTER_METRICS


def _after(df, j, node, metric, device=None):
    s = series(df, node, metric, device)
    on = j.culprits[node]
    return s.filter(pl.col("time") >= on + timedelta(minutes=2)), s.filter(pl.col("time") < on)


def _peers(df, j, metric, after=None):
    others = [n for n in j.nodes if n not in j.culprits]
    f = df.filter(pl.col("node").is_in(others) & (pl.col("metric") == metric))
    if after is not None:
        f = f.filter(pl.col("time") >= after)
    return f


def test_fault_evidence_on_culprit():
    for kind in FAULT_KINDS:
        j = _SMALLEST[kind]
        df = raw(kind)
        node = next(iter(j.culprits))
        on = j.culprits[node] + timedelta(minutes=2)
        if kind == "xid95_uncontained_ecc":
            a, _ = _after(df, j, node, "DCGM_FI_DEV_XID_ERRORS")
            assert (a.get_column("value") == 95).any()
            assert not (_peers(df, j, "DCGM_FI_DEV_XID_ERRORS").get_column("value") == 95).any()
        elif kind == "xid79_gpu_lost":
            site = SITES[j.site]
            a, b = _after(df, j, node, "DCGM_FI_DEV_GPU_UTIL")
            assert a.get_column("device").n_unique() == site.gpus - 1
            assert b.get_column("device").n_unique() == site.gpus
        elif kind == "ib_port_down":
            a, b = _after(df, j, node, "node_infiniband_state_id")
            assert (a.get_column("value") == 1).any() and (b.get_column("value") == 4).all()
            assert (_peers(df, j, "node_infiniband_state_id").get_column("value") == 4).all()
        elif kind == "hw_thermal_clock_event":
            a, b = _after(df, j, node, "DCGM_FI_DEV_GPU_TEMP")
            assert a.get_column("value").max() > b.get_column("value").max() + 8
        elif kind == "nvlink5_fabric_errors":
            m = "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL"
            a, _ = _after(df, j, node, m, "0")
            assert a.get_column("value").max() - a.get_column("value").min() > 1000
        elif kind == "ib_xmit_wait_congestion":
            m = "node_infiniband_port_transmit_wait_total"
            a = series(df, node, m).filter(pl.col("time") >= on)
            spread = a.group_by("device").agg(
                (pl.col("value").max() - pl.col("value").min()).alias("d")
            )
            assert spread.get_column("d").max() > 3e8
        elif kind == "roce_pfc_pause_storm":
            m = "node_ethtool_transmitted_prio3_pause"
            a = series(df, node, m).filter(pl.col("time") >= on)
            spread = a.group_by("device").agg(
                (pl.col("value").max() - pl.col("value").min()).alias("d")
            )
            assert spread.get_column("d").max() > 1e6
        elif kind == "nfs_client_hang":
            a, b = _after(df, j, node, "node_procs_blocked")
            assert a.get_column("value").min() >= 8 and b.get_column("value").max() < 8
        elif kind == "cpu_freq_capped":
            a, b = _after(df, j, node, "node_cpu_scaling_frequency_hertz")
            assert a.get_column("value").max() < 1.1e9 < b.get_column("value").min()
        elif kind == "swap_thrash":
            a, b = _after(df, j, node, "node_vmstat_pswpin")
            assert a.get_column("value").max() - a.get_column("value").min() > 1e5
        elif kind == "hbm_thermal_throttle":
            a, b = _after(df, j, node, "DCGM_FI_DEV_MEMORY_TEMP")
            assert a.get_column("value").max() > b.get_column("value").max() + 12
        elif kind == "sm_clock_locked":
            a, b = _after(df, j, node, "DCGM_FI_DEV_SM_CLOCK")
            assert a.filter(pl.col("value") > 400).get_column("value").max() <= 1110
            assert b.get_column("value").max() > 1700


def test_healthy_realistic_things():
    # stale application Xids and historical counts appear somewhere in the corpus' small jobs
    xids = pl.concat(
        [raw(k).filter(pl.col("metric") == "DCGM_FI_DEV_XID_ERRORS") for k in BENIGN_KINDS]
    )
    assert set(xids.get_column("value").unique()) - {0.0} <= {13.0, 31.0, 43.0, 45.0}
    # preprocessing role nodes: idle GPUs from the start, busy CPUs
    df = raw("preproc_role_nodes")
    u = (
        df.filter(pl.col("metric") == "DCGM_FI_DEV_GPU_UTIL")
        .group_by("node")
        .agg(pl.col("value").max())
    )
    assert (u.get_column("value") == 0).sum() >= 1
    # glitchy temperatures on the 3.3.5 exporter
    g = raw("temp_reading_glitch").filter(pl.col("metric") == "DCGM_FI_DEV_GPU_TEMP")
    assert g.get_column("value").max() > 300
    # HA replicas: some series have twice the samples
    h = raw("ha_replica_interleave").filter(pl.col("metric") == "node_load1").group_by("node").len()
    assert h.get_column("len").max() > 1.6 * h.get_column("len").min()
    # scrape timeouts: some nodes miss many DCGM scrapes
    s = raw("scrape_timeout_partial").filter(
        pl.col("metric") == "DCGM_FI_DEV_GPU_UTIL", pl.col("device") == "0"
    )
    c = s.group_by("node").len().get_column("len")
    assert c.min() < 0.95 * c.max()


def test_aggregate():
    df = raw("steady")
    agg = aggregate(df, lambda m: "max")
    assert agg.columns == ["time", "node", "metric", "value"]
    one = (
        df.filter(pl.col("metric") == "DCGM_FI_DEV_GPU_TEMP")
        .group_by("time", "node")
        .agg(pl.col("value").max())
    )
    got = agg.filter(pl.col("metric") == "DCGM_FI_DEV_GPU_TEMP").select("time", "node", "value")
    assert one.sort("time", "node").equals(got.sort("time", "node"))
    # counters summed whatever agg_for says
    e = (
        df.filter(pl.col("metric") == "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION")
        .group_by("time", "node")
        .agg(pl.col("value").sum())
    )
    got = aggregate(df, lambda m: "min").filter(
        pl.col("metric") == "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"
    )
    assert np.allclose(
        np.sort(e.get_column("value").to_numpy()), np.sort(got.get_column("value").to_numpy())
    )
    avg = aggregate(df, lambda m: "avg")
    assert avg.height == agg.height
    with pytest.raises(ValueError):
        aggregate(df, lambda m: "median")


def test_kind_counts():
    c = Counter(j.kind for j in JOBS)
    assert all(v >= 5 for v in c.values())
