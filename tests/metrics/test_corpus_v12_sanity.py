"""Sanity tests of corpus v12 itself (never of a detector).

Run with ``pytest --noconftest tests/metrics/test_corpus_v12_sanity.py -q``.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import numpy as np
import polars as pl
import pytest

from . import corpus_v12 as c
from .corpus_v9 import BENIGN_KINDS as V9_BENIGN
from .corpus_v9 import FAULT_KINDS as V9_FAULTS
from .corpus_v10 import BENIGN_KINDS as V10_BENIGN
from .corpus_v10 import FAULT_KINDS as V10_FAULTS
from .corpus_v11 import BENIGN_KINDS as V11_BENIGN
from .corpus_v11 import FAULT_KINDS as V11_FAULTS

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


def _at(s: pl.DataFrame, t):
    return s.filter(pl.col("time") == t)


def _before(s: pl.DataFrame, t):
    return s.filter(pl.col("time") < t)


def _after(s: pl.DataFrame, t):
    return s.filter(pl.col("time") > t)


def _rate(s: pl.DataFrame) -> pl.DataFrame:
    return s.with_columns(
        (pl.col("v").diff() / (pl.col("time").diff().dt.total_milliseconds() / 1000)).alias("r")
    )


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


def _sec(j, x: float):
    return j.start + timedelta(seconds=x)


# ---------------------------------------------------------------------------------------------
# API, determinism, schema
# ---------------------------------------------------------------------------------------------


def test_api_constants():
    assert len(c.FAULT_KINDS) == 17 and len(c.BENIGN_KINDS) == 12
    assert not set(c.FAULT_KINDS) & set(c.BENIGN_KINDS)
    assert isinstance(c.COUNTER_METRICS, frozenset) and isinstance(
        c.RATE_VALUED_COUNTERS, frozenset
    )
    assert c.RATE_VALUED_COUNTERS <= c.COUNTER_METRICS
    assert c.is_counter("node_cpu_seconds_total") and not c.is_counter("DCGM_FI_DEV_GPU_TEMP")
    assert c.is_counter(c.CPU_PKG_THROTTLE) and c.is_counter(c.IB_XMIT_WAIT)
    assert not c.is_counter(c.REMAP_FAIL) and c.is_counter(c.VM_OOM)
    assert set(c.SITES) == {"g3n", "h4p", "a4o", "l2c", "bsx", "lcw"}


def test_kind_names_are_new():
    old = (
        _OLDER_KINDS
        | set(V9_FAULTS)
        | set(V9_BENIGN)
        | set(V10_FAULTS)
        | set(V10_BENIGN)
        | set(V11_FAULTS)
        | set(V11_BENIGN)
    )
    for k in c.FAULT_KINDS + c.BENIGN_KINDS:
        assert k not in old and not k.startswith("checkpoint"), k
    reused = [k for k in c.FAULT_KINDS if k.endswith("_v12")]
    assert 4 <= len(reused) <= 6 and all(k[: -len("_v12")] in V11_FAULTS for k in reused)
    assert len(c.FAULT_KINDS) - len(reused) >= 12
    used = {
        *("gb3", "efa", "a3g", "h1n", "rtx", "a4h"),
        *("h20", "dgx", "ndv", "oci", "l4s", "gh2"),
        *("b2h", "gbr", "h2r", "a8c", "v1c", "ckw"),
    }
    assert not used & set(c.SITES)


def test_jobs_deterministic(J):
    a, b = c.table(J), c.table(c.jobs(0))
    assert a.equals(b)
    assert not a.equals(c.table(c.jobs(1)))


def test_raw_deterministic_and_schema(J):
    j = min(J, key=_est)
    a, b = j.raw, j.raw
    assert a.equals(b)
    assert dict(a.schema) == c._SCHEMA
    assert a.height > 0


def test_aggregate(J):
    j = min(J, key=_est)
    df = _raw(j)
    agg = c.aggregate(df, lambda m: "max")
    assert set(agg.columns) == {"time", "node", "metric", "value"}
    assert agg.height == df.select("time", "node", "metric").unique().height
    with pytest.raises(ValueError):
        c.aggregate(df, lambda m: "median")
    m = c.CPU_SECONDS
    one = df.filter(pl.col("metric") == m).group_by("time", "node").agg(pl.col("value").sum())
    got = agg.filter(pl.col("metric") == m).join(one, on=["time", "node"])
    assert (got["value"] == got["value_right"]).all()


# ---------------------------------------------------------------------------------------------
# Population and labels
# ---------------------------------------------------------------------------------------------


def test_population(J):
    assert len(J) == 120
    assert sum(j.faulty for j in J) == 60
    assert sum(not j.faulty for j in J) == 60
    kc = Counter(j.kind for j in J)
    assert all(kc[k] in (3, 4) for k in c.FAULT_KINDS)
    assert all(kc[k] == 5 for k in c.BENIGN_KINDS)
    assert all(j.faulty == (j.kind in c.FAULT_KINDS) for j in J)
    assert {len(j.culprits) for j in J if j.faulty} <= {1, 2}
    assert sum(len(j.culprits) == 2 for j in J) >= 3
    assert set(j.site for j in J) == set(c.SITES)
    sizes = [len(j.nodes) for j in J]
    assert min(sizes) == 2 and max(sizes) == 1024 and sum(s >= 256 for s in sizes) >= 5
    assert np.median(sizes) <= 64
    assert all(30 - 1e-6 <= j.minutes <= 125 for j in J)
    assert all(10 <= j.dcgm_interval <= 60 and 15 <= j.node_interval <= 60 for j in J)
    h4 = [j for j in J if j.site == "h4p"]
    assert h4 and all(j.dcgm_interval == 30 and j.node_interval == 15 for j in h4)
    assert all(len(set(j.nodes)) == len(j.nodes) for j in J)
    assert len({j.name for j in J}) == 120


def test_kinds_on_sites_that_can_show_them(J):
    for j in J:
        s = c.SITES[j.site]
        if j.kind in ("ib_port_flap_recurring_short", "hca_pcie_downtrain_xmit_wait"):
            assert s.ib and not s.roce
        if j.kind == "hca_pcie_downtrain_xmit_wait":
            assert c.IB_XMIT_WAIT in s.ib_extra
        if j.kind == "ib_port_flap_recurring_short":
            assert c.IB_DOWNED in s.ib_extra and c.IB_LINK_RECOV in s.ib_extra
        if j.kind == "hca_port_dead_nccl_reroute":
            assert len(s.ib) >= 2
        if j.kind in ("ecmp_hash_collision_rx_pause", "nic_rx_stall_pfc_pause_flood_v12"):
            assert s.roce and c.ET_RX_PAUSE in s.ethtool
        if j.kind == "xid74_nvlink_fatal_rank_exit":
            assert c.NVL_CRC in s.fields
        if j.kind == "tray_coolant_flow_drop_all_gpus":
            assert s.r_th < 0.03  # liquid-cooled tray
        if j.kind == "cpu_package_thermal_throttle_fanfail":
            assert "thermal" in s.collectors and "hwmon" in s.collectors
        if j.kind == "gsp_rpc_timeout_stuck_gpu_v12":
            assert s.key != "a4o"  # GSP firmware: Turing+ with R535+ drivers; a4o runs older
        if j.kind == "ufm_port_counter_clear_sweep":
            assert s.ib and not s.roce


def test_labels_inside_windows(J):
    for j in J:
        for node, on in j.culprits.items():
            assert node in j.nodes
            assert j.start < on < j.end - timedelta(minutes=1.5), j.name
            assert on.tzinfo is not None


def test_row_budget(J):
    ests = sorted(_est(j) for j in J)
    assert ests[-1] <= 7e6 and ests[-2] <= 5.5e6  # the 1,024-node job is above cap
    assert sum(ests) < 300e6
    mid = sorted(J, key=_est)[60]
    assert abs(_raw(mid).height / _est(mid) - 1) < 0.05


# ---------------------------------------------------------------------------------------------
# Each fault is visible, at the onset, in the series the README names
# ---------------------------------------------------------------------------------------------

_MISSING_OK = ("kernel_soft_lockup_scrape_miss_v12",)


def test_onset_on_culprit_grid_and_visible(J):
    """The onset is a sample of the culprit (or a scheduled scrape that is missing), and
    that sample shows the fault."""
    for kind in c.FAULT_KINDS:
        j = _smallest(J, kind)
        df = _raw(j)
        for node, on in j.culprits.items():
            rows = df.filter((pl.col("node") == node) & (pl.col("time") == on))
            if kind not in _MISSING_OK:
                assert rows.height > 0, (j.name, node)
            assert _VISIBLE[kind](j, df, node, on), (j.name, node, on)


def test_every_culprit_visible_and_peers_clean(J):
    """Every culprit of every fault job shows its fault at its onset; peers show no
    fault signature (renders all 60 fault jobs once)."""
    for j in J:
        if not j.faulty:
            continue
        df = _CACHE.get(j.name)
        if df is None:
            df = j.raw
        for node, on in j.culprits.items():
            assert _VISIBLE[j.kind](j, df, node, on), (j.name, node)
        peers = df.filter(~pl.col("node").is_in(list(j.culprits)))
        assert not _signatures(peers, j), (j.name, _signatures(peers, j))
        del df, peers


def _gpu_of(j, node):
    i = j.nodes.index(node)
    return str(j.spec["fault"]["gpu"][i])


def _prev(s: pl.DataFrame, on, col="value"):
    b = _before(s, on)
    return b[col][-1] if b.height else None


def _v_xid(*vals):
    def f(j, df, node, on):
        s = _series(df, node, c.XID, _gpu_of(j, node))
        return (
            _at(s, on)["value"][0] in vals
            and (~_before(s, on)["value"].is_in([float(v) for v in vals])).all()
        )

    return f


def _v_xid74(j, df, node, on):
    ok = _v_xid(74)(j, df, node, on)
    g = _gpu_of(j, node)
    s = _series(df, node, c.NVL_CRC, g)
    ok = ok and _at(s, on)["value"][0] >= _prev(s, on) + 20
    if c.NVL_RECOVERY in c.SITES[j.site].fields:
        r = _series(df, node, c.NVL_RECOVERY, g)
        ok = ok and _at(r, on)["value"][0] == _prev(r, on) + 1
    return ok


def _v_xid64(j, df, node, on):
    g = _gpu_of(j, node)
    s = _series(df, node, c.REMAP_FAIL, g)
    u = _series(df, node, c.UNC_REMAP, g)
    return (
        _v_xid(64)(j, df, node, on)
        and _at(s, on)["value"][0] == 1
        and _before(s, on)["value"].max() == 0
        and _at(u, on)["value"][0] == _prev(u, on) + 1
    )


def _v_hbm(j, df, node, on):
    g = _gpu_of(j, node)
    m = _series(df, node, c.MEMORY_TEMP, g)
    k = _series(df, node, c.MEM_CLOCK, g)
    return _at(m, on)["value"][0] >= _prev(m, on) + 10 and _at(k, on)["value"][0] < 0.9 * _prev(
        k, on
    )


def _v_brake(j, df, node, on):
    s = c.SITES[j.site]
    clk = _per_time(df, node, c.SM_CLOCK, "max")
    ok = _at(clk, on)["v"][0] < 0.5 * s.sm_max
    if s.reasons:
        r = _per_time(df, node, s.reasons, "min")
        ok = ok and int(_at(r, on)["v"][0]) & 0x80
    return ok


def _v_tray(j, df, node, on):
    s = _per_time(df, node, c.GPU_TEMP, "mean")
    st = c.SITES[j.site]
    later = _after(_per_time(df, node, c.GPU_TEMP, "min"), on + timedelta(minutes=5))["v"]
    clk = _after(_per_time(df, node, c.SM_CLOCK, "max"), on + timedelta(minutes=5))["v"]
    return (
        _at(s, on)["v"][0] >= _prev(s, on, "v") + 1
        and later.max() >= st.slow_temp - 2
        and clk.min() < 0.97 * st.sm_max
    )


def _v_counter_up(metric, by=1.0):
    def f(j, df, node, on):
        s = _per_time(df, node, metric, "sum")
        return _at(s, on)["v"][0] >= _prev(s, on, "v") + by

    return f


def _v_hca_dead(j, df, node, on):
    st = _per_time(df, node, c.IB_STATE, "min")
    return (
        _at(st, on)["v"][0] == 1
        and _before(st, on)["v"].min() == 4
        and _after(st, on)["v"].max() == 1
    )


def _delta(df, node, metric):
    s = _per_time(df, node, metric, "max")
    return s.with_columns(pl.col("v").diff().alias("d")).drop_nulls()


def _v_xmit_wait(j, df, node, on):
    s = _delta(df, node, c.IB_XMIT_WAIT)
    return _at(s, on)["d"][0] > 1e6 + _before(s, on)["d"].tail(10).max()


def _v_rx_pause(j, df, node, on):
    s = _delta(df, node, c.ET_RX_PAUSE)
    return _at(s, on)["d"][0] > 1e4 + 2 * _before(s, on)["d"].tail(10).max()


def _v_cpu_throttle(j, df, node, on):
    s = _per_time(df, node, c.CPU_PKG_THROTTLE, "sum")
    f = _per_time(df, node, c.CPU_FREQ, "max")
    later = _after(s, on + timedelta(minutes=1))["v"]
    return later.max() > _prev(s, on, "v") and _at(f, on)["v"][0] < 0.75 * _prev(f, on, "v")


def _v_slab(j, df, node, on):
    s = _per_time(df, node, c.MEM_AVAIL, "max")
    tot = c.SITES[j.site].mem_gib * c._GIB
    later = _after(s, on + timedelta(seconds=j.spec["hang_lag"] - 60))["v"]
    return _at(s, on)["v"][0] < _prev(s, on, "v") - 0.02 * tot and later.min() < 0.1 * tot


def _v_front(j, df, node, on):
    return _v_counter_up(c.NET_CARRIER, 2)(j, df, node, on)


def _v_gsp(j, df, node, on):
    if not _v_xid(119)(j, df, node, on):
        return False
    g = _gpu_of(j, node)
    texit = on + timedelta(seconds=j.spec["nccl_timeout"] + 60)
    u = _after(_series(df, node, c.GPU_UTIL, g), texit)
    peer = next(n for n in j.nodes if n != node)
    up = _after(_per_time(df, peer, c.GPU_UTIL, "max"), texit)
    return u.height > 0 and u["value"].min() >= 99 and up["v"].max() == 0


def _v_plimit(j, df, node, on):
    s = _series(df, node, c.POWER_LIMIT, _gpu_of(j, node))
    return _at(s, on)["value"][0] < 0.7 * _prev(s, on)


def _v_pfc(j, df, node, on):
    s = _per_time(df, node, c.ET_TX_PAUSE, "sum")
    return _at(s, on)["v"][0] >= _prev(s, on, "v") + 1000


def _sys_rate(df, node):
    cpu = df.filter(
        (pl.col("node") == node)
        & (pl.col("metric") == c.CPU_SECONDS)
        & (pl.col("device") == "system")
    ).select("time", pl.col("value").alias("v"))
    return _rate(cpu.sort("time")).drop_nulls()


def _v_lockup(j, df, node, on):
    mine = df.filter((pl.col("node") == node) & pl.col("metric").str.starts_with("node_"))
    if mine.filter(pl.col("time") == on).height == 0:
        return mine.filter(pl.col("time") < on).height > 0
    r = _sys_rate(df, node)
    return _at(r, on)["r"][0] > _before(r, on)["r"].tail(5).max() + 0.3


def _v_nvme(j, df, node, on):
    q = _per_time(df, node, c.DISK_IO_NOW, "max")
    if _at(q, on)["v"][0] >= 10:
        return True
    s = df.filter((pl.col("node") == node) & (pl.col("metric") == c.DISK_IO)).select(
        "time", pl.col("value").alias("v")
    )
    r = _rate(s.sort("time")).drop_nulls()
    return _at(r, on)["r"][0] > _before(r, on)["r"].tail(5).max() + 0.2


_VISIBLE = {
    "xid74_nvlink_fatal_rank_exit": _v_xid74,
    "row_remap_failure_xid64_rma": _v_xid64,
    "hbm_hot_spot_memclk_derate": _v_hbm,
    "psu_loss_power_brake_bursts": _v_brake,
    "tray_coolant_flow_drop_all_gpus": _v_tray,
    "ib_port_flap_recurring_short": _v_counter_up(c.IB_DOWNED),
    "hca_port_dead_nccl_reroute": _v_hca_dead,
    "hca_pcie_downtrain_xmit_wait": _v_xmit_wait,
    "ecmp_hash_collision_rx_pause": _v_rx_pause,
    "cpu_package_thermal_throttle_fanfail": _v_cpu_throttle,
    "slab_leak_oom_kill_rank": _v_slab,
    "frontend_nic_flap_storage_stall": _v_front,
    "gsp_rpc_timeout_stuck_gpu_v12": _v_gsp,
    "gpu_power_limit_misset_v12": _v_plimit,
    "nic_rx_stall_pfc_pause_flood_v12": _v_pfc,
    "kernel_soft_lockup_scrape_miss_v12": _v_lockup,
    "local_nvme_media_wear_stall_v12": _v_nvme,
}


def test_fault_kinds_have_a_visibility_check():
    assert set(_VISIBLE) == set(c.FAULT_KINDS)


def test_hang_peers_spin_then_exit(J):
    """After a rank dies, its peers sit at ~100 % util at low power until the NCCL timeout."""
    for kind in sorted(c._HANG_KINDS):
        j = _smallest(J, kind)
        df = _raw(j)
        node, on = next(iter(j.culprits.items()))
        lag = timedelta(seconds=j.spec.get("hang_lag", 0.0) + j.spec["fault"].get("kill_lag", 0))
        peer = next(n for n in j.nodes if n != node)
        t = on + lag + timedelta(minutes=4)
        u = _per_time(df, peer, c.GPU_UTIL, "mean").filter(pl.col("time") > t).head(3)
        pw = _per_time(df, peer, c.POWER, "mean").filter(pl.col("time") > t).head(3)
        s = c.SITES[j.site]
        assert u["v"].min() >= 99, j.name
        assert pw["v"].max() < s.idle_w + 0.3 * (s.tdp - s.idle_w), j.name
        texit = on + lag + timedelta(seconds=j.spec["nccl_timeout"] + 60)
        u2 = _per_time(df, peer, c.GPU_UTIL, "mean").filter(pl.col("time") > texit)
        assert u2.height > 0 and u2["v"].max() == 0, j.name


def test_slow_culprit_slows_everyone(J):
    for kind in (
        "gpu_power_limit_misset_v12",
        "hbm_hot_spot_memclk_derate",
        "hca_pcie_downtrain_xmit_wait",
        "ecmp_hash_collision_rx_pause",
        "cpu_package_thermal_throttle_fanfail",
        "nic_rx_stall_pfc_pause_flood_v12",
        "hca_port_dead_nccl_reroute",
    ):
        j = _smallest(J, kind)
        df = _raw(j)
        _node, on = min(j.culprits.items(), key=lambda kv: kv[1])
        peer = next(n for n in j.nodes if n not in j.culprits)
        s = _per_time(df, peer, c.POWER, "mean")
        for ck in j.spec["ckpt"]:
            s = s.filter(
                (pl.col("time") < _sec(j, ck[0] - 10)) | (pl.col("time") > _sec(j, ck[1] + 60))
            )
        before = _before(s, on - timedelta(minutes=1)).tail(8)["v"].mean()
        after = _after(s, on + timedelta(minutes=2)).head(8)["v"].mean()
        assert after < 0.99 * before, (j.name, before, after)
        clk = _after(_per_time(df, peer, c.SM_CLOCK, "min"), on + timedelta(minutes=2))
        clk = clk.filter(_train_mask(j)).head(10)
        assert clk["v"].min() > 0.95 * c.SITES[j.site].sm_max


def test_intermittent_faults_recur(J):
    for kind, key in (
        ("psu_loss_power_brake_bursts", "episodes"),
        ("ib_port_flap_recurring_short", "episodes"),
        ("frontend_nic_flap_storage_stall", "episodes"),
        ("kernel_soft_lockup_scrape_miss_v12", "episodes"),
    ):
        for j in (j for j in J if j.kind == kind):
            for eps in j.spec["fault"][key].values():
                assert len(eps) >= 2, j.name
                assert max(z - a for a, z in eps) <= 180, j.name


def test_brake_episodes_come_and_go(J):
    j = _smallest(J, "psu_loss_power_brake_bursts")
    df = _raw(j)
    node = next(iter(j.culprits))
    clk = _per_time(df, node, c.SM_CLOCK, "max")
    s = c.SITES[j.site]
    i = j.nodes.index(node)
    eps = j.spec["fault"]["episodes"][i]
    _a, z = eps[0]
    after = clk.filter(
        (pl.col("time") > _sec(j, z + 60)) & (pl.col("time") < _sec(j, eps[1][0] - 30))
    )
    after = after.filter(_train_mask(j))
    assert after.height == 0 or after["v"].min() > 0.9 * s.sm_max


def test_local_signatures_stay_on_the_culprit(J):
    for kind in c.FAULT_KINDS:
        j = _smallest(J, kind)
        df = _raw(j).filter(~pl.col("node").is_in(list(j.culprits)))
        assert not _signatures(df, j), (j.name, _signatures(df, j))


# ---------------------------------------------------------------------------------------------
# Healthy jobs
# ---------------------------------------------------------------------------------------------


def _max_rate(df, metric):
    d = (
        df.filter(pl.col("metric") == metric)
        .sort("time")
        .group_by("node", "device")
        .agg((pl.col("value").diff() / pl.col("time").diff().dt.total_seconds()).max())
    )
    return d["value"].max() if d.height else 0.0


def _signatures(df: pl.DataFrame, j) -> list[str]:
    s = c.SITES[j.site]
    out = []
    x = df.filter(
        (pl.col("metric") == c.XID) & pl.col("value").is_in([63.0, 64.0, 74.0, 94.0, 119.0, 79.0])
    )
    if x.height:
        out.append("xid")
    for m in (c.ECC_DBE, c.NVL_RECOVERY, c.MEM_HWCORRUPT, c.REMAP_FAIL):
        if df.filter((pl.col("metric") == m) & (pl.col("value") > 0)).height:
            out.append(m)
    if df.filter((pl.col("metric") == c.IB_STATE) & (pl.col("value") != 4)).height:
        out.append("ib_state")
    if df.filter((pl.col("metric") == c.IB_RATE) & (pl.col("value") < s.ib_rate)).height:
        out.append("ib_rate")
    if df.filter((pl.col("metric") == c.NET_UP) & (pl.col("value") == 0)).height:
        out.append("net_up")
    if df.filter((pl.col("metric") == c.FS_DEVERR) & (pl.col("value") != 0)).height:
        out.append("fs_deverr")
    if df.filter((pl.col("metric") == c.LINK_GEN) & (pl.col("value") < s.pcie_gen)).height:
        out.append("link_gen")
    if df.filter((pl.col("metric") == c.DISK_IO_NOW) & (pl.col("value") > 4)).height:
        out.append("disk_queue")
    if df.filter((pl.col("metric") == c.POWER_LIMIT) & (pl.col("value") < s.tdp)).height:
        out.append("power_limit")
    if df.filter((pl.col("metric") == c.MEM_CLOCK) & (pl.col("value") < s.mem_clk)).height:
        out.append("mem_clock")
    if s.reasons:
        r = df.filter(pl.col("metric").is_in([c.CLOCK_THROTTLE, c.CLOCKS_EVENT]))["value"]
        if (((r.cast(pl.Int64)) & 0xC8) > 0).any():
            out.append("hw_slowdown")
    if _max_rate(df, c.ET_TX_PAUSE_DUR) > 1e5:
        out.append("pause_storm")
    if j.kind != "nic_rx_stall_pfc_pause_flood_v12" and _max_rate(df, c.ET_RX_PAUSE) > 1000:
        out.append("rx_pause")
    if _max_rate(df, c.IB_XMIT_WAIT) > 1e5:
        out.append("xmit_wait")
    if _max_rate(df, c.CPU_PKG_THROTTLE) > 0:
        out.append("cpu_throttle")
    if _max_rate(df, c.VM_OOM) > 0:
        out.append("oom")
    return out


_CLEARS_OK = ("ufm_port_counter_clear_sweep",)


def test_healthy_jobs_free_of_fault_signatures(J):
    for j in J:
        if j.faulty:
            continue
        df = j.raw
        assert not _signatures(df, j), (j.name, _signatures(df, j))
        last = df.group_by("node").agg(pl.col("time").max())["time"]
        assert (last > j.end - timedelta(minutes=2)).all(), j.name
        ms = c.COUNTER_METRICS - c.RATE_VALUED_COUNTERS
        bad = (
            df.filter(pl.col("metric").is_in(list(ms)))
            .sort("time")
            .group_by("node", "metric", "device")
            .agg((pl.col("value").diff() < 0).sum().alias("neg"))
            .filter(pl.col("neg") > 0)
        )
        if j.kind in _CLEARS_OK:
            bad = bad.filter(~pl.col("metric").str.starts_with("node_infiniband"))
        assert bad.height == 0, (j.name, bad.head())
        del df


def _train_mask(j, col="time"):
    e = pl.lit(True)
    for ck in j.spec["ckpt"]:
        e = e & ((pl.col(col) < _sec(j, ck[0] - 10)) | (pl.col(col) > _sec(j, ck[1] + 60)))
    return e


def _counter_delta(df, metric, a, z, device=None):
    w = df.filter(pl.col("metric") == metric)
    if device is not None:
        w = w.filter(pl.col("device") == device)
    w = w.group_by("time", "node").agg(pl.col("value").sum()).sort("time")
    d = w.group_by("node").agg(
        (
            pl.col("value").filter(pl.col("time") <= z).last()
            - pl.col("value").filter(pl.col("time") >= a).first()
        ).alias("d")
    )
    return dict(zip(d["node"], d["d"], strict=False))


def test_rank0_save_only_rank0_writes(J):
    j = _smallest(J, "rank0_full_state_dict_save")
    df = _raw(j)
    a, z = j.spec["benign"]["saves"][0]
    d = _counter_delta(df, c.DISK_W, _sec(j, a - 60), _sec(j, z + 60))
    r0 = d.pop(j.nodes[0])
    assert r0 > 1e9 + max(d.values())
    p = df.filter(
        (pl.col("metric") == c.GPU_UTIL)
        & (pl.col("time") > _sec(j, a + 10 + c.SITES[j.site].collect))
        & (pl.col("time") < _sec(j, z - 5))
    )
    if p.height:
        assert p["value"].max() <= 10


def test_validation_lowers_every_node(J):
    j = _smallest(J, "validation_pass_forward_only")
    df = _raw(j)
    a, z = j.spec["benign"]["evals"][0]
    d = (
        df.filter(pl.col("metric") == c.PROF_TENSOR)
        if c.PROF_TENSOR in c.SITES[j.site].fields
        else df.filter(pl.col("metric") == c.POWER)
    )
    ins = d.filter((pl.col("time") > _sec(j, a + 30)) & (pl.col("time") < _sec(j, z - 10)))
    out = d.filter((pl.col("time") > _sec(j, a - 300)) & (pl.col("time") < _sec(j, a - 30)))
    out = out.filter(_train_mask(j))
    x = (
        ins.group_by("node")
        .agg(pl.col("value").mean().alias("i"))
        .join(out.group_by("node").agg(pl.col("value").mean().alias("o")), on="node")
    )
    assert x.height == len(j.nodes) and (x["i"] < x["o"]).all()


def test_storage_slow_on_every_node(J):
    j = _smallest(J, "shared_storage_slow_all_readers")
    df = _raw(j)
    a, z = j.spec["benign"]["slow"]
    dev = c.SITES[j.site].netdevs[0]
    ins = _counter_delta(df, c.NET_RX, _sec(j, a + 30), _sec(j, z - 30), dev)
    assert len(ins) == len(j.nodes)
    assert max(ins.values()) / ((z - a - 60) or 1) < 0.5 * 3e8


def test_board_revisions_constant_offset(J):
    j = _smallest(J, "mixed_gpu_board_revisions")
    df = _raw(j)
    rev = {j.nodes[i] for i in j.spec["benign"]["rev"]}
    p = df.filter(pl.col("metric") == c.GPU_TEMP).group_by("node").agg(pl.col("value").median())
    v = dict(zip(p["node"], p["value"], strict=False))
    others = [v[n] for n in j.nodes if n not in rev]
    if others:
        assert np.mean([v[n] for n in rev]) > np.mean(others)


def test_dcgm_restart_gap_only_dcgm(J):
    j = _smallest(J, "dcgm_exporter_pod_restart_gap")
    df = _raw(j)
    for i, gl in j.spec["benign"]["dgaps"].items():
        node = j.nodes[int(i)]
        for a, z in gl:
            w = df.filter(
                (pl.col("node") == node)
                & (pl.col("time") >= _sec(j, a))
                & (pl.col("time") < _sec(j, z))
            )
            assert w.filter(pl.col("metric").str.starts_with("DCGM")).height == 0
            if z - a > 2 * j.node_interval:
                assert w.filter(pl.col("metric").str.starts_with("node_")).height > 0


def test_ufm_clear_resets_counters(J):
    j = _smallest(J, "ufm_port_counter_clear_sweep")
    df = _raw(j)
    i, tc = next(iter(j.spec["benign"]["clear"].items()))
    node = j.nodes[int(i)]
    s = _per_time(df, node, c.IB_RX, "sum")
    assert _after(s, _sec(j, tc + 1))["v"][0] < _before(s, _sec(j, tc))["v"][-1]


def test_prom_gap_all_targets(J):
    j = _smallest(J, "prom_tsdb_stall_scrape_gap_all")
    df = _raw(j)
    for a, z in j.spec["benign"]["gaps"]:
        w = df.filter((pl.col("time") >= _sec(j, a)) & (pl.col("time") < _sec(j, z)))
        assert w.height == 0


def test_mgmt_switch_gap_several_nodes_at_once(J):
    j = _smallest(J, "mgmt_switch_reload_rack_gap")
    df = _raw(j)
    b = j.spec["benign"]
    a, z = b["gap"]
    rack = [j.nodes[i] for i in b["rack"]]
    assert len(rack) >= 2
    w = df.filter((pl.col("time") >= _sec(j, a)) & (pl.col("time") < _sec(j, z)))
    assert w.filter(pl.col("node").is_in(rack)).height == 0
    if len(rack) < len(j.nodes):
        assert w.filter(~pl.col("node").is_in(rack)).height > 0


def test_elastic_left_nodes_idle(J):
    j = _smallest(J, "elastic_scale_down_preempted")
    df = _raw(j)
    b = j.spec["benign"]
    left = [j.nodes[i] for i in b["left"]]
    u = df.filter(
        (pl.col("metric") == c.GPU_UTIL)
        & pl.col("node").is_in(left)
        & (pl.col("time") > _sec(j, b["leave"] + 60))
    )
    assert u.height and u["value"].max() == 0
    stay = [n for n in j.nodes if n not in left]
    if stay:
        v = df.filter(
            (pl.col("metric") == c.GPU_UTIL)
            & pl.col("node").is_in(stay)
            & (pl.col("time") > _sec(j, b["leave"] + b["restart"] + 200))
        )
        assert v["value"].median() >= 97


def test_fstrim_every_node_own_time(J):
    j = _smallest(J, "fstrim_timer_staggered_nodes")
    df = _raw(j)
    trims = j.spec["benign"]["trim"]
    assert len({a for a, _ in trims}) > 1 or len(trims) == 1
    for n, (a, d) in zip(j.nodes, trims, strict=True):
        dd = _counter_delta(df, c.DISK_IO, _sec(j, a - 5), _sec(j, a + d + 5))
        assert dd[n] > 0.25 * (d - 2 * j.node_interval) or d < 3 * j.node_interval


# ---------------------------------------------------------------------------------------------
# Exporter behaviour
# ---------------------------------------------------------------------------------------------


def test_site_specifics(J):
    for site in c.SITES:
        cands = [j for j in J if j.site == site]
        j = min(cands, key=_est)
        df = _raw(j)
        ms = set(df["metric"].unique())
        s = c.SITES[site]
        assert {m for m in ms if m.startswith("DCGM")} == set(s.fields), site
        assert any(m.startswith("node_infiniband") for m in ms) == bool(s.ib), site
        assert (c.CPU_FREQ in ms) == ("cpufreq" in s.collectors), site
        assert (c.PSI_MEM_S in ms) == ("pressure" in s.collectors), site
        assert (c.EDAC_CE in ms) == ("edac" in s.collectors), site
        assert (c.HWMON_TEMP in ms) == ("hwmon" in s.collectors), site
        assert (c.TCP_RETRANS in ms) == ("netstat" in s.collectors), site
        assert (c.CPU_PKG_THROTTLE in ms) == ("thermal" in s.collectors), site
        assert any(m.startswith("node_ethtool") for m in ms) == bool(s.ethtool), site
        if site == "l2c":
            assert c.NVLINK_BW not in ms and c.ET_RX_PAUSE in ms
        if site == "a4o":
            assert c.PSI_CPU not in ms and c.PCIE_RX_TP in ms and s.reasons is None
        if site in ("g3n", "h4p"):
            assert len(df.filter(pl.col("metric") == c.GPU_TEMP)["device"].unique()) == 4
        if site in ("g3n", "bsx"):
            assert c.CLOCKS_EVENT in ms and c.CLOCK_THROTTLE not in ms


def test_lost_scrapes_and_phases(J):
    j = min(J, key=_est)
    df = _raw(j)
    s = df.filter(pl.col("metric") == c.GPU_TEMP).filter(pl.col("device") == "0")
    per = s.group_by("node").agg(pl.col("time").min().alias("t0"), pl.len().alias("n"))
    assert per["t0"].n_unique() > 1
    expected = j.minutes * 60 / j.dcgm_interval
    assert per["n"].max() <= expected + 1


def test_dcgm_repeats_last_collection(J):
    cand = [j for j in J if c.SITES[j.site].collect > j.dcgm_interval]
    j = min(cand, key=_est)
    df = _raw(j)
    s = _series(df, j.nodes[0], c.POWER, "0")["value"].to_numpy()
    assert (np.diff(s) == 0).mean() > 0.3


def test_decoys_present(J):
    xs = 0
    for j in sorted(J, key=_est)[:20]:
        df = _raw(j)
        x = df.filter((pl.col("metric") == c.XID) & (pl.col("value") > 0))
        if not j.faulty:
            xs += x.height
    assert xs > 0
    assert sum(bool(j.spec["ckpt"]) for j in J) >= 20


def test_pyspy_blip_is_local_and_short(J):
    j = _smallest(J, "operator_pyspy_dump_blip")
    df = _raw(j)
    n, a, d = j.spec["benign"]["blips"][0]
    assert d <= 40
    assert not _signatures(df, j)
    node = j.nodes[n]
    u = df.filter(
        (pl.col("metric") == c.CPU_SECONDS)
        & (pl.col("device") == "user")
        & (pl.col("node") == node)
    ).select("time", pl.col("value").alias("v"))
    r = _rate(u.sort("time")).drop_nulls()
    late = r.filter(pl.col("time") > _sec(j, a + d + 4 * j.node_interval)).filter(_train_mask(j))
    if late.height > 3:
        assert late["r"].median() < r["r"].max()


def test_coolant_drop_heats_every_gpu_of_the_tray(J):
    j = _smallest(J, "tray_coolant_flow_drop_all_gpus")
    df = _raw(j)
    node, on = next(iter(j.culprits.items()))
    t = df.filter(
        (pl.col("metric") == c.GPU_TEMP)
        & (pl.col("node") == node)
        & (pl.col("time") > on + timedelta(minutes=5))
    )
    per = t.group_by("device").agg(pl.col("value").max())
    assert per.height == 4 and (per["value"] >= c.SITES[j.site].slow_temp - 2).all()


def test_dead_port_traffic_moves_to_a_neighbour(J):
    j = _smallest(J, "hca_port_dead_nccl_reroute")
    df = _raw(j)
    node, on = next(iter(j.culprits.items()))
    p = j.spec["fault"]["port"][j.nodes.index(node)]
    s = c.SITES[j.site]
    dead, nb = s.ib[p], s.ib[(p + 1) % len(s.ib)]
    d = _counter_delta(df, c.IB_TX, on + timedelta(minutes=2), on + timedelta(minutes=8), dead)
    e = _counter_delta(df, c.IB_TX, on + timedelta(minutes=2), on + timedelta(minutes=8), nb)
    assert d[node] == 0 and e[node] > 0


def test_oom_kill_counted_at_the_kill(J):
    j = _smallest(J, "slab_leak_oom_kill_rank")
    df = _raw(j)
    node, on = next(iter(j.culprits.items()))
    kill = on + timedelta(seconds=j.spec["hang_lag"])
    s = _per_time(df, node, c.VM_OOM, "max")
    assert _before(s, kill)["v"].max() + 1 == _after(s, kill + timedelta(minutes=1))["v"].min()
