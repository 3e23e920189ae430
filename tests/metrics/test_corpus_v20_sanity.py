"""Sanity tests of corpus v20 itself (never of a detector).

Run with ``pytest --noconftest tests/metrics/test_corpus_v20_sanity.py -q``.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import numpy as np
import polars as pl
import pytest

from . import corpus_v20 as c

_CACHE: dict[str, pl.DataFrame] = {}


@pytest.fixture(scope="module")
def J():
    return c.jobs(0)


def _raw(job) -> pl.DataFrame:
    if job.name not in _CACHE:
        df = job.raw
        if df.height < 1_000_000:
            _CACHE[job.name] = df
        return df
    return _CACHE[job.name]


def _est(j) -> float:
    return c._estimate_rows(
        c.SITES[j.site], len(j.nodes), j.minutes, j.dcgm_interval, j.node_interval
    )


def _smallest(J, kind):
    return min((j for j in J if j.kind == kind), key=_est)


def _series(df, node, metric, device=None):
    f = df.filter((pl.col("node") == node) & (pl.col("metric") == metric))
    if device is not None:
        f = f.filter(pl.col("device") == device)
    return f.sort("time")


def _per_time(df, node, metric, how="max"):
    f = df.filter((pl.col("node") == node) & (pl.col("metric") == metric))
    agg = {
        "max": pl.col("value").max(),
        "min": pl.col("value").min(),
        "mean": pl.col("value").mean(),
        "sum": pl.col("value").sum(),
    }[how]
    return f.group_by("time").agg(agg.alias("v")).sort("time")


def _sec(j, x: float):
    return j.start + timedelta(seconds=x)


def _delta_at(df, node, metric, on, how="sum"):
    """Increase of a counter (summed over devices, or the largest per device) between the
    node's sample at ``on`` and its previous sample; None if no sample at ``on``."""
    f = df.filter((pl.col("node") == node) & (pl.col("metric") == metric)).sort("time")
    if f.height == 0:
        return None
    d = f.with_columns(pl.col("value").diff().over("device").alias("d")).filter(
        pl.col("time") == on
    )
    if d.height == 0:
        return None
    d = d["d"].fill_null(0.0)
    return float(d.sum() if how == "sum" else d.max())


def _rate_at(df, node, metric, on):
    f = _per_time(df, node, metric, "sum")
    f = f.with_columns(
        (pl.col("v").diff() / (pl.col("time").diff().dt.total_milliseconds() / 1000)).alias("r")
    ).filter(pl.col("time") == on)
    return None if f.height == 0 else f["r"][0]


def _value_at(df, node, metric, on, how="max"):
    f = df.filter((pl.col("node") == node) & (pl.col("metric") == metric) & (pl.col("time") == on))
    if f.height == 0:
        return None
    return float(f["value"].max() if how == "max" else f["value"].min())


def _prev_time(df, node, metric, on):
    f = df.filter((pl.col("node") == node) & (pl.col("metric") == metric) & (pl.col("time") < on))
    return None if f.height == 0 else f["time"].max()


_OLDER_KINDS = set(
    [
        "alloc_cache_growth",
        "aoc_flapping",
        "apt_daily_spread",
        "async_ckpt_staging",
        "bin_spread_constant",
        "brief_host_hiccup",
        "chassis_fan_failure",
        "clocksource_hpet_fallback",
        "cold_plate_flow_loss",
        "compile_cache_skew",
        "constant_offset",
        "constant_offsets",
        "cooling_zones",
        "counter_reset",
        "cpu_contention",
        "cpu_freq_capped",
        "crac_cycling_rows",
        "cron_maintenance_burst",
        "dataloader_jitter",
        "dataloader_stall",
        "dcp_module_missing",
        "dimm_ce_storm",
        "dp_shape_groups",
        "early_finish",
        "ecc_xid",
        "ecc_xid_hang",
        "elastic",
        "elastic_resize",
        "eval_phase",
        "eval_phases",
        "exporter_restart",
        "gpu_bus_drop",
        "gpu_fell_off_bus",
        "gpu_hang",
        "gpu_lost_exporter_crashloop",
        "gpu_off_bus",
        "gsp_hang",
        "ha_replica_interleave",
        "hbm_thermal_throttle",
        "hca_fatal_reset",
        "healthy",
        "healthy_steady",
        "host_mem_leak",
        "host_mem_pressure",
        "host_unreachable",
        "hot_slot_offset",
        "hw_thermal_clock_event",
        "ib_counter_reset",
        "ib_port_down",
        "ib_port_polling_abort",
        "ib_rate_degraded",
        "ib_symbol_error_creep",
        "ib_xmit_wait_congestion",
        "idle_gpu",
        "idle_gpu_by_design",
        "io_stall",
        "jobwide_slowdown",
        "jobwide_throttle",
        "late_start",
        "late_starter",
        "link_flap",
        "machine_unreachable",
        "mixed_exporters",
        "moe_alltoall",
        "moving_imbalance",
        "nccl_restart",
        "nccl_timeout_jobwide",
        "nccl_timeout_restart",
        "nfs_client_hang",
        "nic_dropout",
        "nic_pcie_stall_backpressure",
        "node_unreachable",
        "nsight_pause",
        "nvlink5_fabric_errors",
        "nvlink_error",
        "nvlink_errors",
        "nvlink_replay_storm",
        "nvlink_symbol_ber_climb",
        "oom_killed_rank",
        "panic_reboot_return",
        "pcie_degraded",
        "pcie_downgrade",
        "pcie_link_degraded",
        "pcie_retimer_replays",
        "pipeline_stages",
        "plain_sync_run",
        "power_brake",
        "preproc_role_nodes",
        "profiler_paused",
        "profiling_pause",
        "prometheus_gap",
        "psu_fail_brake_duty",
        "quiet_counters",
        "rack_power_cap",
        "rank0_extra",
        "rank0_load",
        "rare_error_ticks",
        "roce_pfc_misconfig",
        "roce_pfc_pause_storm",
        "rolling_upgrade",
        "row_remap_pending",
        "scrape_timeout_partial",
        "scratch_fill_write_fail",
        "seq_len_ramp",
        "shard_prefetch_misses",
        "sharded_ckpt_writers",
        "shared_spine_contention",
        "short_blip",
        "short_blips",
        "slow_gpu_clock",
        "slow_gpu_power",
        "slow_gpu_thermal",
        "sm_clock_locked",
        "softnet_irq_collapse",
        "sparse_counters",
        "staggered_warmup",
        "stale_xid",
        "steady",
        "straggler_launch",
        "stray_process",
        "swap_thrash",
        "swapped_in_node",
        "sync_checkpoint",
        "tcp_retrans_storm",
        "temp_reading_glitch",
        "thermal_slow_gpu",
        "thermal_slowdown",
        "transient_dip",
        "two_culprits",
        "two_faults",
        "uce_single_gpu_abort",
        "uniform_training",
        "unreachable",
        "warmup_late_start",
        "xid79_gpu_lost",
        "xid94_rank_killed",
        "xid95_uncontained_ecc",
        "xid_ecc_hang",
    ]
)


# v17's kinds (copied as text: this test imports no other corpus)
_V17_KINDS = {
    "row_remap_failure_xid64_gpu_slow",
    "nvlink_link_down_one_gpu_recovery_bw_loss",
    "hbm_dbe_contained_xid94_job_restart",
    "gpu_intermittent_p8_drop_episodes",
    "ib_port_rcv_errors_climb_then_link_down_hang",
    "air_cooled_fan_fail_hw_slowdown_one_gpu",
    "dimm_channel_disabled_memtotal_from_boot",
    "kswapd_memory_thrash_loader_starve_host",
    "nfs_loader_mount_slow_iowait_host",
    "psu_loss_power_brake_bursts_node",
    "gpu_memclk_stuck_low_pstate_v17",
    "runaway_daemon_cpu_straggler_host_v17",
    "xid119_gsp_rpc_timeout_rank_abort_hang_v17",
    "bmc_node_power_cap_all_gpus_v17",
    "gpu_memclk_stuck_low_pstate",
    "runaway_daemon_cpu_straggler_host",
    "xid119_gsp_rpc_timeout_rank_abort_hang",
    "bmc_node_power_cap_all_gpus",
    "pipeline_parallel_stage_load_groups",
    "batch_shrink_midrun_all_nodes",
    "nsys_profiler_window_all_ranks",
    "spot_preemption_notice_ckpt_exit_all",
    "bios_variant_small_constant_offsets",
    "nccl_upgrade_restart_all_ranks",
    "dcgm_field_group_reconfig_all_nodes",
    "datacenter_cooling_setpoint_raise",
}
_USED_SITES = {
    *("gb3", "efa", "a3g", "h1n", "rtx", "a4h", "h20", "dgx", "ndv", "oci", "l4s", "gh2"),
    *("b2h", "gbr", "h2r", "a8c", "v1c", "ckw", "g3n", "h4p", "a4o", "l2c", "bsx", "lcw"),
    *("h2o", "a8u", "h8r", "l4x", "hsn", "hnv", "p5x", "a3t", "g72", "a4s", "hpl", "r6k"),
    *("b2x", "cwh", "l4e", "h2s", "v1s", "a1v", "cxs", "n5h", "lbh", "a8r", "gbs", "a6u"),
    *("obm", "nbi", "sph", "p1e", "a4f", "g36", "l40", "a1p", "sxe", "b3u", "a8k", "p4d"),
    *("dgb", "d1v", "a8e", "jgh", "hpt"),
}


# ---------------------------------------------------------------------------------------------
# Evidence predicates (what a culprit's onset sample shows)
# ---------------------------------------------------------------------------------------------


def _v_xid(code):
    def v(j, df, node, on):
        x = _value_at(df, node, c.XID, on)
        return x is not None and x == code

    return v


def _reason_bits(df, node, on, bits) -> bool:
    f = df.filter(
        (pl.col("node") == node)
        & (pl.col("time") == on)
        & pl.col("metric").is_in([c.CLOCK_THROTTLE, c.CLOCKS_EVENT])
    )
    return bool(any(int(v) & bits for v in f["value"].to_list()))


def _v_delta(metric, least=1.0):
    def v(j, df, node, on):
        d = _delta_at(df, node, metric, on, "max")
        return d is not None and d >= least

    return v


def _v_pcie(j, df, node, on):
    s = c.SITES[j.site]
    g = _value_at(df, node, c.LINK_GEN, on, "min")
    w = _value_at(df, node, c.LINK_WIDTH, on, "min")
    return g is not None and (g < s.pcie_gen or w < 16)


def _v_hw_thermal(j, df, node, on):
    return _reason_bits(df, node, on, 0x40)


def _v_app_clocks(j, df, node, on):
    return _reason_bits(df, node, on, 0x2)


def _v_io_now(j, df, node, on):
    v = _value_at(df, node, c.DISK_IO_NOW, on)
    return v is not None and v >= 8


def _v_power_spread(j, df, node, on):
    s = c.SITES[j.site]
    f = df.filter((pl.col("node") == node) & (pl.col("time") == on) & (pl.col("metric") == c.POWER))
    if f.height < 2:
        return False
    v = f["value"]
    return float(v.max() - v.median()) > 0.13 * (s.tdp - s.idle_w)


def _v_missing(j, df, node, on):
    """The node reported before ``on`` and never at or after it."""
    f = df.filter(pl.col("node") == node)
    return f.height > 0 and f["time"].max() < on


_VISIBLE = {
    "pcie_link_downtrain_gen_width_one_gpu": _v_pcie,
    "nvlink_crc_flit_storm_replays_gpu_slow": _v_delta(c.NVL_CRC),
    "aoc_cable_flap_carrier_bursts_stalls": _v_delta(c.NET_CARRIER),
    "kernel_panic_node_silent_peers_nccl_hang": _v_missing,
    "xid79_off_bus_gpu_series_vanish_hang": _v_xid(79),
    "hbm_hot_spot_hw_thermal_gpu_slow": _v_hw_thermal,
    "sm_clock_locked_low_by_mgmt_agent_node": _v_app_clocks,
    "cpu_pkg_thermal_throttle_loader_straggler": _v_delta(c.CPU_PKG_THROTTLE),
    "local_nvme_degraded_queue_saturation_host": _v_io_now,
    "nic_pfc_pause_storm_watchdog_port": _v_delta(c.ET_STORM),
    "host_dimm_ue_mce_sigbus_rank_hang": _v_delta(c.EDAC_UE),
    "degraded_gpu_silent_bottleneck_full_power": _v_power_spread,
}
_NODE_EVIDENCE = (
    "aoc_cable_flap_carrier_bursts_stalls",
    "cpu_pkg_thermal_throttle_loader_straggler",
    "local_nvme_degraded_queue_saturation_host",
    "nic_pfc_pause_storm_watchdog_port",
    "host_dimm_ue_mce_sigbus_rank_hang",
)
_MISSING = ("kernel_panic_node_silent_peers_nccl_hang",)
_HANGS = (
    "kernel_panic_node_silent_peers_nccl_hang",
    "xid79_off_bus_gpu_series_vanish_hang",
    "host_dimm_ue_mce_sigbus_rank_hang",
)
_SITE_KEYS = {"dv1", "a1r", "e5h", "l4t", "db2", "sxh"}


# ---------------------------------------------------------------------------------------------
# API, determinism, schema
# ---------------------------------------------------------------------------------------------


def test_api_constants():
    assert len(c.FAULT_KINDS) == 12 and len(c.BENIGN_KINDS) == 9
    assert not set(c.FAULT_KINDS) & set(c.BENIGN_KINDS)
    assert c.RATE_VALUED_COUNTERS <= c.COUNTER_METRICS
    assert c.is_counter("node_cpu_seconds_total") and not c.is_counter("DCGM_FI_DEV_GPU_TEMP")
    assert c.is_counter(c.NVL_CRC) and c.is_counter(c.NET_CARRIER) and c.is_counter(c.EDAC_UE)
    assert c.is_counter(c.ET_STORM) and c.is_counter(c.CPU_PKG_THROTTLE)
    assert not c.is_counter(c.DISK_IO_NOW) and not c.is_counter(c.LINK_GEN)
    assert set(c.SITES) == _SITE_KEYS
    assert c.ROW_CAP == 5.45e6
    assert set(_VISIBLE) == set(c.FAULT_KINDS)
    for name in ("jobs", "table", "aggregate", "_estimate_rows", "Job", "BENIGN_KINDS"):
        assert hasattr(c, name)
    fields = set(c.Job.__dataclass_fields__)
    assert fields == {
        *("name", "kind", "nodes", "start", "end", "culprits"),
        *("dcgm_interval", "node_interval", "site", "spec"),
    }


def test_kind_names_and_sites_are_new():
    old = _OLDER_KINDS | _V17_KINDS
    for k in c.FAULT_KINDS + c.BENIGN_KINDS:
        assert k not in old, k
        assert not k.endswith(("_v17", "_v16", "_v20")), k
    assert len(c.FAULT_KINDS) >= 10 and len(c.BENIGN_KINDS) >= 8
    assert not _USED_SITES & set(c.SITES)


def test_jobs_deterministic_and_cheap(J):
    import time

    a, b = c.table(J), c.table(c.jobs(0))
    assert a.equals(b)
    assert not a.equals(c.table(c.jobs(1)))
    t0 = time.perf_counter()
    c.jobs(0)
    assert time.perf_counter() - t0 < 1.0


def test_raw_deterministic_and_schema(J):
    j = min(J, key=_est)
    a, b = j.raw, j.raw
    assert a.equals(b)
    assert dict(a.schema) == c._SCHEMA
    assert a.height > 0
    k = min((x for x in J if x.faulty), key=_est)
    assert k.raw.equals(k.raw)
    assert k.raw.filter(pl.col("value").is_null() | pl.col("value").is_nan()).height == 0


def test_aggregate(J):
    j = min(J, key=_est)
    df = _raw(j)
    ag = c.aggregate(df, lambda m: "max")
    assert set(ag.columns) == {"time", "node", "metric", "value"}
    one = df.filter(pl.col("metric") == c.ENERGY)
    s = one.group_by("time", "node").agg(pl.col("value").sum()).sort("time", "node")
    a = ag.filter(pl.col("metric") == c.ENERGY).sort("time", "node")
    assert np.allclose(s["value"].to_numpy(), a["value"].to_numpy())
    with pytest.raises(ValueError):
        c.aggregate(df, lambda m: "median")


def test_population(J):
    assert len(J) == 120
    assert len({j.name for j in J}) == 120
    faulty = [j for j in J if j.faulty]
    assert len(faulty) == 60
    assert sum(len(j.culprits) == 2 for j in J) >= 3
    assert Counter(j.site for j in J).keys() == set(c.SITES)
    assert min(Counter(j.site for j in J).values()) >= 12
    sizes = [len(j.nodes) for j in J]
    assert min(sizes) == 2 and max(sizes) >= 512
    assert sum(n == 2 for n in sizes) >= 5 and sum(n in (3, 4) for n in sizes) >= 10
    assert sum(n >= 192 for n in sizes) >= 6
    for k in c.FAULT_KINDS + c.BENIGN_KINDS:
        assert sum(j.kind == k for j in J) >= 5, k
    ivs = {(j.dcgm_interval, j.node_interval) for j in J}
    assert ivs >= {(15.0, 15.0), (30.0, 30.0), (60.0, 60.0), (10.0, 15.0), (20.0, 20.0)}
    assert all(10 <= j.dcgm_interval <= 60 and 10 <= j.node_interval <= 60 for j in J)
    for j in J:
        assert j.faulty == (j.kind in c.FAULT_KINDS)
        assert set(j.culprits) <= set(j.nodes)
        assert len(set(j.nodes)) == len(j.nodes)
        assert j.name.startswith("v20-") and j.site in j.name and j.kind in j.name
        assert all(n.startswith(c._HOST_PREFIX[j.site]) for n in j.nodes), j.name


def test_kinds_on_sites_that_can_show_them(J):
    for j in J:
        s = c.SITES[j.site]
        if j.kind == "pcie_link_downtrain_gen_width_one_gpu":
            assert c.LINK_GEN in s.fields
        if j.kind == "nvlink_crc_flit_storm_replays_gpu_slow":
            assert c.NVL_CRC in s.fields and s.nvl_bw > 0
        if j.kind == "aoc_cable_flap_carrier_bursts_stalls":
            assert len(s.netdevs) > 1
        if j.kind == "hbm_hot_spot_hw_thermal_gpu_slow":
            assert c.MEMORY_TEMP in s.fields
        if j.kind == "cpu_pkg_thermal_throttle_loader_straggler":
            assert "thermal" in s.collectors and not s.vm
        if j.kind == "nic_pfc_pause_storm_watchdog_port":
            assert c.ET_STORM in s.ethtool and s.roce
        if j.kind == "host_dimm_ue_mce_sigbus_rank_hang":
            assert "edac" in s.collectors and not s.vm
        assert s.reasons is not None


def test_labels_inside_windows(J):
    for j in J:
        for on in j.culprits.values():
            assert j.start <= on < j.end, j.name


def test_row_budget(J):
    for j in J:
        assert _est(j) <= c.ROW_CAP, j.name


def test_biggest_job_under_row_cap(J):
    j = max(J, key=_est)
    df = j.raw
    assert df.height <= c.ROW_CAP
    assert df.height > 0.85 * _est(j) * (1 - 2 * c.SITES[j.site].loss) - 1e5
    del df


# ---------------------------------------------------------------------------------------------
# Labels and fault evidence
# ---------------------------------------------------------------------------------------------


def _check_job(j, df):
    for node, on in j.culprits.items():
        assert _VISIBLE[j.kind](j, df, node, on), (j.name, node, on)
        if j.kind in _MISSING:
            # the label is the first scheduled scrape that found the node gone
            last = df.filter(pl.col("node") == node)["time"].max()
            iv = max(j.dcgm_interval, j.node_interval)
            assert on - last < timedelta(seconds=2 * iv + 1), j.name
            continue
        rows = df.filter((pl.col("node") == node) & (pl.col("time") == on))
        assert rows.height > 0, (j.name, node, "onset is not a sample of the culprit")
        m = c.LOAD1 if j.kind in _NODE_EVIDENCE else c.SM_CLOCK
        pt = _prev_time(df, node, m, on)
        if pt is not None:
            assert not _VISIBLE[j.kind](j, df, node, pt), (j.name, node, "before onset")
    peers = [n for n in j.nodes if n not in j.culprits]
    rng = np.random.default_rng(len(j.name))
    for p in rng.permutation(peers)[:6]:
        on = min(j.culprits.values())
        ts = df.filter(pl.col("node") == p)["time"]
        if ts.len() == 0:
            continue
        t = ts.filter(ts >= on).min() if ts.filter(ts >= on).len() else ts.max()
        assert not _VISIBLE[j.kind](j, df, p, t), (j.name, "peer", p)


def test_every_culprit_visible_and_peers_clean(J):
    """Renders every fault job once."""
    for j in J:
        if not j.faulty:
            continue
        df = _CACHE.get(j.name)
        if df is None:
            df = _raw(j)
        _check_job(j, df)
        del df


def _kill_time(j) -> float:
    sp = j.spec
    (cul,) = list(j.culprits)
    te = sp["culprits"][j.nodes.index(cul)]
    return te + sp["fault"].get("kill_lag", 0.0)


def test_hang_peers_spin_then_exit(J):
    for kind in _HANGS:
        j = _smallest(J, kind)
        df = _raw(j)
        (cul,) = list(j.culprits)
        peer = next(n for n in j.nodes if n != cul)
        sp = j.spec
        t_stop = _kill_time(j)
        t0 = _sec(j, t_stop + 60)
        t1 = _sec(j, t_stop + sp["nccl_timeout"] - 60)
        u = _per_time(df, peer, c.GPU_UTIL, "min").filter(
            (pl.col("time") > t0) & (pl.col("time") < t1)
        )
        pw = _per_time(df, peer, c.POWER, "max").filter(
            (pl.col("time") > t0) & (pl.col("time") < t1)
        )
        assert u["v"].min() >= 99, j.name
        assert pw["v"].max() < 0.35 * c.SITES[j.site].tdp, j.name
        late = _per_time(df, peer, c.GPU_UTIL, "max").filter(
            pl.col("time") > _sec(j, t_stop + sp["nccl_timeout"] + 60)
        )
        assert late.height == 0 or late["v"].max() == 0


def test_panicked_node_reports_nothing_after(J):
    for j in [x for x in J if x.kind == "kernel_panic_node_silent_peers_nccl_hang"]:
        if _est(j) > 2e6:
            continue
        df = _raw(j)
        (cul,) = list(j.culprits)
        te = _sec(j, j.spec["culprits"][j.nodes.index(cul)])
        f = df.filter(pl.col("node") == cul)
        assert f["time"].max() < te
        assert set(f["metric"].unique()) >= {c.GPU_TEMP, c.LOAD1}


def test_off_bus_gpu_series_vanish_but_xid(J):
    j = _smallest(J, "xid79_off_bus_gpu_series_vanish_hang")
    df = _raw(j)
    (cul,) = list(j.culprits)
    on = j.culprits[cul]
    g = str(j.spec["fault"]["gpu"][j.nodes.index(cul)])
    after = df.filter(
        (pl.col("node") == cul)
        & (pl.col("device") == g)
        & (pl.col("time") > on)
        & pl.col("metric").str.starts_with("DCGM_")
    )
    assert set(after["metric"].unique()) <= {c.XID}
    assert after.height > 0 and after["value"].min() == 79


def test_slow_culprit_slows_everyone(J):
    """Throughput-like metrics move together: a peer's power drops after the onset."""
    for kind in (
        "pcie_link_downtrain_gen_width_one_gpu",
        "nvlink_crc_flit_storm_replays_gpu_slow",
        "hbm_hot_spot_hw_thermal_gpu_slow",
        "sm_clock_locked_low_by_mgmt_agent_node",
        "cpu_pkg_thermal_throttle_loader_straggler",
        "local_nvme_degraded_queue_saturation_host",
        "nic_pfc_pause_storm_watchdog_port",
        "degraded_gpu_silent_bottleneck_full_power",
    ):
        j = _smallest(J, kind)
        df = _raw(j)
        on = min(j.culprits.values())
        peer = next(n for n in j.nodes if n not in j.culprits)
        pw = _per_time(df, peer, c.POWER, "mean")
        b = pw.filter((pl.col("time") < on) & (pl.col("time") > on - timedelta(minutes=4)))
        a = pw.filter(
            (pl.col("time") >= on + timedelta(minutes=1))
            & (pl.col("time") < on + timedelta(minutes=12))
        )
        assert a["v"].median() < b["v"].median() * 0.985, j.name


def test_culprit_bottleneck_stays_busy(J):
    for kind in (
        "pcie_link_downtrain_gen_width_one_gpu",
        "nvlink_crc_flit_storm_replays_gpu_slow",
        "hbm_hot_spot_hw_thermal_gpu_slow",
        "degraded_gpu_silent_bottleneck_full_power",
    ):
        j = _smallest(J, kind)
        df = _raw(j)
        cul, on = min(j.culprits.items(), key=lambda kv: kv[1])
        g = str(j.spec["fault"]["gpu"][j.nodes.index(cul)])
        u = _series(df, cul, c.GPU_UTIL, g).filter(
            (pl.col("time") > on) & (pl.col("time") < on + timedelta(minutes=10))
        )
        if u.height:
            assert u["value"].median() >= 95, j.name


def test_hbm_hot_gpu_memory_temp_higher(J):
    j = _smallest(J, "hbm_hot_spot_hw_thermal_gpu_slow")
    df = _raw(j)
    cul, on = min(j.culprits.items(), key=lambda kv: kv[1])
    g = str(j.spec["fault"]["gpu"][j.nodes.index(cul)])
    m = df.filter(
        (pl.col("node") == cul) & (pl.col("metric") == c.MEMORY_TEMP) & (pl.col("time") > on)
    )
    hot = m.filter(pl.col("device") == g)["value"]
    rest = m.filter(pl.col("device") != g)["value"]
    assert hot.median() > rest.median() + 4


def test_aoc_flaps_count_carrier_changes(J):
    for j in [x for x in J if x.kind == "aoc_cable_flap_carrier_bursts_stalls"]:
        (cul,) = list(j.culprits)
        i = j.nodes.index(cul)
        flaps = j.spec["fault"]["flaps"]
        assert len(flaps) >= 1 and all(5 <= z - a <= 20 for a, z in flaps)
        assert flaps[0][0] == j.spec["culprits"][i]
    j = _smallest(J, "aoc_cable_flap_carrier_bursts_stalls")
    df = _raw(j)
    (cul,) = list(j.culprits)
    s = c.SITES[j.site]
    p = j.spec["fault"]["port"][j.nodes.index(cul)]
    ch = _series(df, cul, c.NET_CARRIER, s.netdevs[p + 1])
    n_fl = len(j.spec["fault"]["flaps"])
    last = j.spec["fault"]["flaps"][-1][1]
    if ch.filter(pl.col("time") > _sec(j, last)).height:
        assert ch["value"].max() - ch["value"].min() == 2 * n_fl


def test_pause_storm_port_sends_pauses(J):
    j = _smallest(J, "nic_pfc_pause_storm_watchdog_port")
    df = _raw(j)
    (cul,) = list(j.culprits)
    on = j.culprits[cul]
    s = c.SITES[j.site]
    port = s.eth_ports[j.spec["fault"]["port"][j.nodes.index(cul)]]
    tp = _series(df, cul, c.ET_TX_PAUSE, port).filter(pl.col("time") >= on)
    if tp.height > 2:
        dt = (tp["time"][-1] - tp["time"][0]).total_seconds()
        assert (tp["value"][-1] - tp["value"][0]) / dt > 5e3


def test_dimm_ue_marks_hardware_corrupted(J):
    j = _smallest(J, "host_dimm_ue_mce_sigbus_rank_hang")
    df = _raw(j)
    (cul,) = list(j.culprits)
    on = j.culprits[cul]
    assert _value_at(df, cul, c.MEM_HWCORRUPT, on) == 4096.0


# ---------------------------------------------------------------------------------------------
# Healthy jobs
# ---------------------------------------------------------------------------------------------


def _max_delta(df, metric) -> float:
    d = (
        df.filter(pl.col("metric") == metric)
        .sort("time")
        .with_columns(pl.col("value").diff().over("node", "device").alias("d"))
    )
    return float(d["d"].max() or 0.0) if d.height else 0.0


def _signatures(df: pl.DataFrame, j) -> list[str]:
    out = []
    s = c.SITES[j.site]
    x = df.filter(pl.col("metric") == c.XID).sort("time")
    if x.height:
        if x["value"].is_in([79.0]).any():
            out.append("xid")
        fl = x.group_by("node", "device").agg(
            pl.col("value").first().alias("a"), pl.col("value").max().alias("m")
        )
        if (fl["m"] > fl["a"]).any():
            out.append("new xid")
    for m in (c.NVL_CRC, c.NET_CARRIER, c.CPU_PKG_THROTTLE, c.ET_STORM, c.EDAC_UE, c.IB_DOWNED):
        if _max_delta(df, m) > 0:
            out.append(m)
    lg = df.filter(pl.col("metric") == c.LINK_GEN)
    if lg.height and lg["value"].min() < s.pcie_gen:
        out.append("pcie gen")
    lw = df.filter(pl.col("metric") == c.LINK_WIDTH)
    if lw.height and lw["value"].min() < 16:
        out.append("pcie width")
    r = df.filter(pl.col("metric").is_in([c.CLOCK_THROTTLE, c.CLOCKS_EVENT]))
    if r.height and (r["value"].cast(pl.Int64) & 0x42).max() > 0:
        out.append("reasons")
    v = df.filter(pl.col("metric") == c.DISK_IO_NOW)
    if v.height and v["value"].max() >= 8:
        out.append("io_now")
    return out


def test_healthy_jobs_free_of_fault_signatures(J):
    done = 0
    for j in sorted((x for x in J if not x.faulty), key=_est):
        if _est(j) > 2.5e6:
            continue
        df = _raw(j)
        assert not _signatures(df, j), (j.name, _signatures(df, j))
        done += 1
    assert done >= 35


def _power(df, node, a, z):
    p = _per_time(df, node, c.POWER, "mean")
    return p.filter((pl.col("time") >= a) & (pl.col("time") < z))["v"]


def _cpu_user_rate(df, node, a, z):
    f = df.filter(
        (pl.col("node") == node)
        & (pl.col("metric") == c.CPU_SECONDS)
        & (pl.col("device") == "user")
        & (pl.col("time") >= a)
        & (pl.col("time") < z)
    ).sort("time")
    if f.height < 2:
        return None
    return (f["value"][-1] - f["value"][0]) / (f["time"][-1] - f["time"][0]).total_seconds()


def test_rank0_logger_uses_more_cpu(J):
    j = _smallest(J, "rank0_logger_extra_cpu_frontend_tx")
    df = _raw(j)
    a, z = _sec(j, j.spec["init_end"] + 200), j.end
    r0 = _cpu_user_rate(df, j.nodes[0], a, z)
    r1 = _cpu_user_rate(df, j.nodes[1], a, z)
    assert r0 > r1 + 2


def test_staggered_saves_per_node_offsets(J):
    for j in [x for x in J if x.kind == "staggered_sharded_ckpt_writes_by_node"]:
        saves = j.spec["benign"]["saves"]
        if len(j.nodes) >= 4 and saves:
            first = {}
            for a, _z, n, _r in saves:
                first.setdefault(n, a)
            assert len(set(first.values())) > 1, j.name


def test_shard_skew_nodes_more_cpu(J):
    j = _smallest(J, "dataloader_shard_skew_cpu_nodes")
    df = _raw(j)
    b = j.spec["benign"]
    who = b["who"][0]
    other = next((i for i in range(len(j.nodes)) if i not in b["who"]), None)
    if other is not None:
        a, z = _sec(j, j.spec["init_end"] + 200), j.end
        assert _cpu_user_rate(df, j.nodes[who], a, z) > _cpu_user_rate(df, j.nodes[other], a, z)


def test_dcgm_rolling_restart_gaps(J):
    j = _smallest(J, "dcgm_exporter_rolling_restart_gaps")
    df = _raw(j)
    for n, a, d in j.spec["benign"]["who"]:
        g = df.filter(
            (pl.col("node") == j.nodes[n])
            & (pl.col("metric") == c.GPU_TEMP)
            & (pl.col("time") >= _sec(j, a))
            & (pl.col("time") < _sec(j, a + d))
        )
        assert g.height == 0
        ld = df.filter(
            (pl.col("node") == j.nodes[n])
            & (pl.col("metric") == c.LOAD1)
            & (pl.col("time") >= _sec(j, a - 60))
            & (pl.col("time") < _sec(j, a + d + 60))
        )
        assert ld.height > 0


def test_prometheus_reload_gap_and_halved_rate(J):
    j = _smallest(J, "prometheus_reload_interval_and_gap")
    df = _raw(j)
    b = j.spec["benign"]
    (g0, g1) = b["gaps"][0]
    assert df.filter((pl.col("time") >= _sec(j, g0)) & (pl.col("time") < _sec(j, g1))).height == 0
    n0 = j.nodes[0]
    s = _series(df, n0, c.LOAD1)
    before = s.filter(pl.col("time") < _sec(j, b["reload"]))
    if before.height > 4:
        gaps = before["time"].diff().dt.total_seconds().drop_nulls()
        assert gaps.median() > 1.5 * j.node_interval


def test_hetero_fb_nodes_differ(J):
    j = _smallest(J, "hetero_fb_sku_nodes_same_pace")
    df = _raw(j)
    b = j.spec["benign"]
    tot = (
        df.filter(pl.col("metric").is_in([c.FB_USED, c.FB_FREE]))
        .group_by("time", "node", "device")
        .agg(pl.col("value").sum())
        .group_by("node")
        .agg(pl.col("value").median())
    )
    hs = set(j.nodes[i] for i in b["who"])
    w = tot.filter(pl.col("node").is_in(hs))["value"].median()
    o = tot.filter(~pl.col("node").is_in(hs))["value"]
    if o.len():
        assert abs(w / o.median() - b["fb"]) < 0.02


def test_elastic_leaver_idle_others_resume(J):
    j = _smallest(J, "elastic_scale_down_node_leaves")
    df = _raw(j)
    b = j.spec["benign"]
    w = j.nodes[b["who"]]
    lag = c.SITES[j.site].collect + 10
    u = _per_time(df, w, c.GPU_UTIL, "max").filter(pl.col("time") > _sec(j, b["at"] + lag))
    assert u.height == 0 or u["v"].max() == 0
    other = next(n for n in j.nodes if n != w)
    late = _per_time(df, other, c.GPU_UTIL, "min").filter(
        pl.col("time") > _sec(j, b["at"] + b["idle"] + b["init"] + 200)
    )
    if late.height > 3 and not j.spec["ckpt"]:
        assert late["v"].median() >= 95


def test_profiler_everyone_slows(J):
    j = _smallest(J, "torch_profiler_trace_subset_ranks")
    df = _raw(j)
    b = j.spec["benign"]
    if b["len"] < 3 * j.dcgm_interval or j.spec["ckpt"]:
        return
    at = _sec(j, b["at"])
    for n in j.nodes[:4]:
        bf = _power(df, n, at - timedelta(minutes=3), at)
        af = _power(
            df, n, at + timedelta(seconds=j.dcgm_interval + 20), _sec(j, b["at"] + b["len"])
        )
        if bf.len() and af.len():
            assert af.median() < bf.median() * 0.99


def test_cold_cache_peers_wait_at_barrier(J):
    for j in [x for x in J if x.kind == "cold_cache_slow_warmup_one_node"]:
        (extra,) = j.spec["benign"]["late"].values()
        assert 60 <= extra <= 180
    j = _smallest(J, "cold_cache_slow_warmup_one_node")
    df = _raw(j)
    ((w, extra),) = j.spec["benign"]["late"].items()
    peer = next(n for i, n in enumerate(j.nodes) if i != w)
    t0 = j.spec["init_end"] + j.spec["init_spread"] + 5
    u = _per_time(df, peer, c.GPU_UTIL, "min").filter(
        (pl.col("time") > _sec(j, t0 + j.dcgm_interval))
        & (pl.col("time") < _sec(j, t0 + extra - 25))
    )
    if u.height:
        assert u["v"].min() >= 99


def test_site_specifics(J):
    by = sorted(J, key=_est)

    def ms(site):
        j = next(x for x in by if x.site == site)
        df = _raw(j)
        return set(df["metric"].unique()), df

    m, df = ms("dv1")
    assert c.RET_PEND in m and c.NVL_CRC in m and c.MEMORY_TEMP not in m and c.PROF_GR not in m
    assert df.filter(pl.col("metric") == c.IB_RATE)["value"].max() == 12.5e9
    assert df.filter(pl.col("metric") == c.LINK_GEN)["value"].max() == 3
    m, df = ms("a1r")
    assert c.ET_STORM in m and c.IB_OOS in m and c.UNC_REMAP in m
    assert df.filter(pl.col("metric") == c.ET_TX_PAUSE)["device"].n_unique() == 8
    m, df = ms("e5h")
    assert "steal" in set(df.filter(pl.col("metric") == c.CPU_SECONDS)["device"].unique())
    assert df.filter(pl.col("metric") == c.IB_RATE)["device"].n_unique() == 32
    assert c.EDAC_CE not in m and c.HWMON_TEMP not in m and c.POWER_VIOL in m
    m, df = ms("l4t")
    assert not any(x.startswith(c.IB) for x in m) and c.NVLINK_BW not in m and c.ECC_SBE in m
    assert df.filter(pl.col("metric") == c.GPU_TEMP)["device"].n_unique() == 4
    assert c.ET_LINK_DOWN in m
    m, df = ms("db2")
    assert c.CLOCKS_EVENT in m and c.FB_RESERVED in m and c.NVL_CRC not in m
    assert c.IB_XMIT_WAIT in m
    m, df = ms("sxh")
    assert c.ET_STORM in m and c.POWER_VIOL in m and c.NVL_RECOVERY in m


def test_lost_scrapes_and_phases(J):
    j = min(J, key=_est)
    df = _raw(j)
    s = df.filter(pl.col("metric") == c.GPU_TEMP).filter(pl.col("device") == "0")
    per = s.group_by("node").agg(pl.col("time").min().alias("t0"), pl.len().alias("n"))
    assert per["t0"].n_unique() > 1
    expected = j.minutes * 60 / j.dcgm_interval
    assert per["n"].max() <= expected + 1


def test_decoys_present(J):
    xs = 0
    for j in sorted(J, key=_est)[:30]:
        df = _raw(j)
        x = df.filter((pl.col("metric") == c.XID) & (pl.col("value") > 0))
        if not j.faulty:
            xs += x.height
    assert xs > 0
    assert sum(bool(j.spec["ckpt"]) for j in J) >= 20
    assert sum(bool(j.spec["decoy_cpu"]) for j in J) >= 30
