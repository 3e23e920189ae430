"""Sanity tests of corpus v14 itself (never of a detector).

Run with ``pytest --noconftest tests/metrics/test_corpus_v14_sanity.py -q``.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import numpy as np
import polars as pl
import pytest

from . import corpus_v14 as c
from .corpus_v9 import BENIGN_KINDS as V9_BENIGN
from .corpus_v9 import FAULT_KINDS as V9_FAULTS
from .corpus_v10 import BENIGN_KINDS as V10_BENIGN
from .corpus_v10 import FAULT_KINDS as V10_FAULTS
from .corpus_v11 import BENIGN_KINDS as V11_BENIGN
from .corpus_v11 import FAULT_KINDS as V11_FAULTS
from .corpus_v12 import BENIGN_KINDS as V12_BENIGN
from .corpus_v12 import FAULT_KINDS as V12_FAULTS
from .corpus_v13 import BENIGN_KINDS as V13_BENIGN
from .corpus_v13 import FAULT_KINDS as V13_FAULTS

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


_V12_SITES = {"g3n", "h4p", "a4o", "l2c", "bsx", "lcw"}


# ---------------------------------------------------------------------------------------------
# Node-local evidence of each fault at a sample time (applied to culprits and to peers)
# ---------------------------------------------------------------------------------------------


def _v_xid(code):
    def v(j, df, node, on):
        x = _value_at(df, node, c.XID, on)
        return x is not None and x == code

    return v


def _v_link(j, df, node, on):
    s = c.SITES[j.site]
    g = _value_at(df, node, c.LINK_GEN, on, "min")
    w = _value_at(df, node, c.LINK_WIDTH, on, "min")
    return g is not None and (g < s.pcie_gen or w < 16)


def _v_cpu_fan(j, df, node, on):
    h = _per_time(df, node, c.HWMON_TEMP, "max")
    now = h.filter(pl.col("time") == on)
    ref = h.filter(
        (pl.col("time") < on - timedelta(seconds=100))
        & (pl.col("time") > on - timedelta(seconds=900))
    )
    if now.height == 0 or ref.height == 0:
        return False
    return now["v"][0] - ref["v"].median() >= 3


def _v_nvme(j, df, node, on):
    r = _rate_at(df, node, c.DISK_IO, on)
    return r is not None and r >= 0.3


def _v_power_limit(j, df, node, on):
    s = c.SITES[j.site]
    if c.POWER_LIMIT in s.fields:
        v = _value_at(df, node, c.POWER_LIMIT, on, "min")
        return v is not None and v < 0.75 * s.tdp
    f = df.filter((pl.col("node") == node) & (pl.col("time") == on))
    clk = f.filter(pl.col("metric") == c.SM_CLOCK).select("device", "value")
    ut = f.filter(pl.col("metric") == c.GPU_UTIL).select("device", pl.col("value").alias("u"))
    m = clk.join(ut, on="device")
    return bool(((m["value"] < 0.8 * s.sm_max) & (m["u"] >= 90)).any())


def _v_pfc(j, df, node, on):
    d = _delta_at(df, node, c.ET_TX_PAUSE_DUR, on, "max")
    return d is not None and d >= 1e6


def _v_ber(j, df, node, on):
    d = _delta_at(df, node, c.IB_SYMBOL, on, "max")
    return d is not None and d >= 3


def _v_lgc(j, df, node, on):
    s = c.SITES[j.site]
    f = df.filter((pl.col("node") == node) & (pl.col("time") >= on))
    clk = f.filter(pl.col("metric") == c.SM_CLOCK).select("time", "device", "value")
    ut = f.filter(pl.col("metric") == c.GPU_UTIL).select(
        "time", "device", pl.col("value").alias("u")
    )
    m = clk.join(ut, on=["time", "device"]).filter(pl.col("u") >= 90)
    first = _value_at(df, node, c.SM_CLOCK, on)
    return first is not None and m.height > 0 and m["value"].max() < 0.8 * s.sm_max


def _v_orphan(j, df, node, on):
    s = c.SITES[j.site]
    fb = df.filter(pl.col("metric") == c.FB_USED).group_by("node").agg(pl.col("value").median())
    mine = fb.filter(pl.col("node") == node)["value"]
    others = fb.filter(pl.col("node") != node)["value"]
    if mine.len() == 0 or others.len() == 0:
        return False
    return mine[0] - others.median() > 0.015 * s.fb_mib and (
        _value_at(df, node, c.FB_USED, on) is not None
        or _value_at(df, node, c.CPU_SECONDS, on) is not None
    )


def _v_tcpx(j, df, node, on):
    r = _rate_at(df, node, c.TCP_RETRANS, on)
    return r is not None and r >= 500


def _v_memtotal(j, df, node, on):
    v = _value_at(df, node, c.MEM_TOTAL, on)
    return v is not None and v < 0.99 * c.SITES[j.site].mem_gib * 1024.0**3


def _v_replay(j, df, node, on):
    d = _delta_at(df, node, c.PCIE_REPLAY, on, "max")
    return d is not None and d >= 1


def _v_creep(j, df, node, on):
    t = _per_time(df, node, c.GPU_TEMP, "max")
    u = _per_time(df, node, c.GPU_UTIL, "min").rename({"v": "u"})
    t = t.join(u, on="time").filter(pl.col("u") >= 90)  # training samples only
    te = _sec(j, min(j.spec["culprits"].values()))  # the cooling defect's start
    ref = t.filter((pl.col("time") < te) & (pl.col("time") >= te - timedelta(seconds=150)))
    late = t.filter(pl.col("time") >= on)
    if ref.height == 0 or late.height == 0 or _value_at(df, node, c.GPU_TEMP, on) is None:
        return False
    return late["v"].max() - ref["v"].median() >= 8


def _v_dimm_ce(j, df, node, on):
    if "edac" in c.SITES[j.site].collectors:
        d = _delta_at(df, node, c.EDAC_CE, on)
        return d is not None and d >= 1
    last = df.filter(pl.col("node") == node)["time"].max()
    return last is not None and last < on


def _v_carrier(j, df, node, on):
    d = _delta_at(df, node, c.NET_CARRIER, on)
    return d is not None and d >= 2


def _v_sbe(j, df, node, on):
    d = _delta_at(df, node, c.ECC_SBE, on)
    return d is not None and d >= 1


_VISIBLE = {
    "gpu_fell_off_bus_xid79_rank_lost": _v_xid(79),
    "row_remap_event_xid63_no_slowdown": _v_xid(63),
    "gpu_pcie_link_downtrain_gen_width": _v_link,
    "cpu_fan_fail_package_throttle_host": _v_cpu_fan,
    "local_nvme_slow_writes_ckpt_stretch": _v_nvme,
    "gpu_power_limit_stuck_low_one_gpu": _v_power_limit,
    "roce_pfc_pause_storm_tx_host_stall": _v_pfc,
    "ib_hdr_cable_ber_symbol_errors": _v_ber,
    "sm_clock_locked_leftover_lgc": _v_lgc,
    "orphan_process_prev_job_gpu_mem_cpu": _v_orphan,
    "tcpx_data_nic_tcp_retrans_storm": _v_tcpx,
    "dimm_mapped_out_ckpt_oom_kill": _v_memtotal,
    "gpu_pcie_replay_storm_riser_v14": _v_replay,
    "gpu_heatsink_creep_slow_degrade_v14": _v_creep,
    "dimm_ce_burst_then_ue_panic_v14": _v_dimm_ce,
    "fabric_link_retrain_carrier_flaps_v14": _v_carrier,
    "hbm_sbe_rate_climb_no_slowdown_v14": _v_sbe,
}
# evidence judged against the node's own history: the sample before the onset cannot show it
_NO_PREV = (
    "cpu_fan_fail_package_throttle_host",
    "sm_clock_locked_leftover_lgc",
    "orphan_process_prev_job_gpu_mem_cpu",
    "dimm_mapped_out_ckpt_oom_kill",
    "gpu_heatsink_creep_slow_degrade_v14",
    "dimm_ce_burst_then_ue_panic_v14",
)
_MISSING_OK = ("dimm_ce_burst_then_ue_panic_v14",)
_PREV_METRIC = {
    "gpu_fell_off_bus_xid79_rank_lost": c.XID,
    "row_remap_event_xid63_no_slowdown": c.XID,
    "gpu_pcie_link_downtrain_gen_width": c.LINK_GEN,
    "cpu_fan_fail_package_throttle_host": c.HWMON_TEMP,
    "local_nvme_slow_writes_ckpt_stretch": c.DISK_IO,
    "gpu_power_limit_stuck_low_one_gpu": c.SM_CLOCK,
    "roce_pfc_pause_storm_tx_host_stall": c.ET_TX_PAUSE_DUR,
    "ib_hdr_cable_ber_symbol_errors": c.IB_SYMBOL,
    "tcpx_data_nic_tcp_retrans_storm": c.TCP_RETRANS,
    "gpu_pcie_replay_storm_riser_v14": c.PCIE_REPLAY,
    "fabric_link_retrain_carrier_flaps_v14": c.NET_CARRIER,
    "hbm_sbe_rate_climb_no_slowdown_v14": c.ECC_SBE,
}


# ---------------------------------------------------------------------------------------------
# API, determinism, schema
# ---------------------------------------------------------------------------------------------


def test_api_constants():
    assert len(c.FAULT_KINDS) == 17 and len(c.BENIGN_KINDS) == 12
    assert not set(c.FAULT_KINDS) & set(c.BENIGN_KINDS)
    assert c.RATE_VALUED_COUNTERS <= c.COUNTER_METRICS
    assert c.is_counter("node_cpu_seconds_total") and not c.is_counter("DCGM_FI_DEV_GPU_TEMP")
    assert c.is_counter(c.ET_STORM) and c.is_counter(c.IB_SYMBOL) and c.is_counter(c.EDAC_CE)
    assert not c.is_counter(c.MEM_TOTAL) and c.is_counter(c.VM_OOM)
    assert set(c.SITES) == {"p5x", "a3t", "g72", "a4s", "hpl", "r6k"}
    assert c.ROW_CAP == 5.45e6
    assert set(_VISIBLE) == set(c.FAULT_KINDS)


def test_kind_names_are_new():
    old = (
        _OLDER_KINDS
        | set(V9_FAULTS)
        | set(V9_BENIGN)
        | set(V10_FAULTS)
        | set(V10_BENIGN)
        | set(V11_FAULTS)
        | set(V11_BENIGN)
        | set(V12_FAULTS)
        | set(V12_BENIGN)
        | set(V13_FAULTS)
        | set(V13_BENIGN)
    )
    for k in c.FAULT_KINDS + c.BENIGN_KINDS:
        assert k not in old, k
    reused = [k for k in c.FAULT_KINDS if k.endswith("_v14")]
    assert len(reused) == 5 and all(k[: -len("_v14")] in V13_FAULTS for k in reused)
    assert len(c.FAULT_KINDS) - len(reused) == 12
    used = {
        *("gb3", "efa", "a3g", "h1n", "rtx", "a4h"),
        *("h20", "dgx", "ndv", "oci", "l4s", "gh2"),
        *("b2h", "gbr", "h2r", "a8c", "v1c", "ckw"),
        *("g3n", "h4p", "a4o", "l2c", "bsx", "lcw"),
        *("h2o", "a8u", "h8r", "l4x", "hsn", "hnv"),
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
    assert sum(len(j.culprits) == 2 for j in J) >= 4
    assert Counter(j.site for j in J).keys() == set(c.SITES)
    assert all(min(Counter(j.site for j in J).values()) >= 12 for _ in [0])
    sizes = [len(j.nodes) for j in J]
    assert min(sizes) == 2 and max(sizes) >= 1024
    assert sum(n >= 192 for n in sizes) >= 6
    for k in c.FAULT_KINDS + c.BENIGN_KINDS:
        assert sum(j.kind == k for j in J) >= 3, k
    for j in J:
        assert j.faulty == (j.kind in c.FAULT_KINDS)
        assert set(j.culprits) <= set(j.nodes)
        assert len(set(j.nodes)) == len(j.nodes)
        assert j.name.startswith("v14-") and j.site in j.name


def test_kinds_on_sites_that_can_show_them(J):
    for j in J:
        s = c.SITES[j.site]
        if j.kind == "gpu_pcie_link_downtrain_gen_width":
            assert c.LINK_GEN in s.fields
        if j.kind == "roce_pfc_pause_storm_tx_host_stall":
            assert c.ET_TX_PAUSE_DUR in s.ethtool
        if j.kind == "ib_hdr_cable_ber_symbol_errors":
            assert c.IB_SYMBOL in s.ib_extra
        if j.kind == "tcpx_data_nic_tcp_retrans_storm":
            assert s.tcp_data and "netstat" in s.collectors
        if j.kind == "cpu_fan_fail_package_throttle_host":
            assert "hwmon" in s.collectors
        if j.kind == "hbm_sbe_rate_climb_no_slowdown_v14":
            assert c.ECC_SBE in s.fields
        if j.kind == "gpu_pcie_replay_storm_riser_v14":
            assert c.PCIE_REPLAY in s.fields and j.site != "g72"


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
    assert df.height > 0.9 * _est(j) * (1 - 2 * c.SITES[j.site].loss) - 1e5
    del df


# ---------------------------------------------------------------------------------------------
# Labels and fault evidence
# ---------------------------------------------------------------------------------------------


def _check_job(j, df):
    for node, on in j.culprits.items():
        rows = df.filter((pl.col("node") == node) & (pl.col("time") == on))
        if j.kind not in _MISSING_OK or "edac" in c.SITES[j.site].collectors:
            assert rows.height > 0, (j.name, node, "onset is not a sample of the culprit")
        assert _VISIBLE[j.kind](j, df, node, on), (j.name, node, on)
        if j.kind not in _NO_PREV:
            m = _PREV_METRIC[j.kind]
            if (
                j.kind == "gpu_power_limit_stuck_low_one_gpu"
                and c.POWER_LIMIT in c.SITES[j.site].fields
            ):
                m = c.POWER_LIMIT
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


def test_onset_on_culprit_grid_and_visible(J):
    for kind in c.FAULT_KINDS:
        j = _smallest(J, kind)
        _check_job(j, _raw(j))


def test_every_culprit_visible_and_peers_clean(J):
    """Renders every fault job once."""
    for j in J:
        if not j.faulty:
            continue
        df = _CACHE.get(j.name)
        if df is None:
            df = j.raw
        _check_job(j, df)
        del df


def test_hang_peers_spin_then_exit(J):
    for kind in ("gpu_fell_off_bus_xid79_rank_lost", "dimm_mapped_out_ckpt_oom_kill"):
        j = _smallest(J, kind)
        df = _raw(j)
        (cul,) = list(j.culprits)
        peer = next(n for n in j.nodes if n != cul)
        sp = j.spec
        t_stop = sp.get("oom_at", sp["culprits"][j.nodes.index(cul)] + sp["hang_lag"])
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


def test_xid79_gpu_fields_vanish_but_xid_stays(J):
    j = _smallest(J, "gpu_fell_off_bus_xid79_rank_lost")
    df = _raw(j)
    (cul,) = list(j.culprits)
    on = j.culprits[cul]
    g = str(j.spec["fault"]["gpu"][j.nodes.index(cul)])
    after = df.filter((pl.col("node") == cul) & (pl.col("device") == g) & (pl.col("time") >= on))
    assert set(after["metric"].unique()) == {c.XID}


def test_oom_after_checkpoint_peak(J):
    for j in [x for x in J if x.kind == "dimm_mapped_out_ckpt_oom_kill"]:
        df = _raw(j) if _est(j) < 2e6 else j.raw
        (cul,) = list(j.culprits)
        oom = _series(df, cul, c.VM_OOM)["value"].to_numpy()
        assert oom[-1] == oom[0] + 1, j.name
        a, z = j.spec["ckpt"][-1]
        assert a <= j.spec["oom_at"] <= z
        for p in j.nodes[:4]:
            if p != cul:
                po = _series(df, p, c.VM_OOM)["value"].to_numpy()
                assert po[-1] == po[0]
                mt = _series(df, p, c.MEM_TOTAL)["value"]
                assert mt.min() == c.SITES[j.site].mem_gib * 1024.0**3


def test_slow_culprit_slows_everyone(J):
    """Throughput-like metrics move together: a peer's tensor/power drops after the onset."""
    for kind in ("roce_pfc_pause_storm_tx_host_stall", "tcpx_data_nic_tcp_retrans_storm"):
        j = _smallest(J, kind)
        df = _raw(j)
        on = min(j.culprits.values())
        peer = next(n for n in j.nodes if n not in j.culprits)
        pw = _per_time(df, peer, c.POWER, "mean")
        b = pw.filter((pl.col("time") < on) & (pl.col("time") > on - timedelta(minutes=6)))
        a = pw.filter((pl.col("time") >= on) & (pl.col("time") < on + timedelta(minutes=20)))
        assert a["v"].min() < b["v"].median() * 0.97, j.name


def test_no_slowdown_kinds_keep_pace(J):
    for kind in ("row_remap_event_xid63_no_slowdown", "hbm_sbe_rate_climb_no_slowdown_v14"):
        j = _smallest(J, kind)
        df = _raw(j)
        cul = next(iter(j.culprits))
        on = j.culprits[cul]
        u = _per_time(df, cul, c.GPU_UTIL, "min").filter(
            (pl.col("time") > on) & (pl.col("time") < on + timedelta(minutes=5))
        )
        assert u.height == 0 or u["v"].median() >= 95


def test_nvme_stretch_only_in_checkpoints(J):
    j = _smallest(J, "local_nvme_slow_writes_ckpt_stretch")
    df = _raw(j)
    for node in j.culprits:
        wins = j.spec["fault"]["slow_ckpt"][j.nodes.index(node)]
        assert wins and all(z > a for a, z in wins)
        s = _per_time(df, node, c.DISK_IO, "sum")
        s = s.with_columns(
            (pl.col("v").diff() / (pl.col("time").diff().dt.total_milliseconds() / 1000)).alias("r")
        )
        inside = pl.lit(False)
        for a, z in wins:
            inside = inside | (
                (pl.col("time") >= _sec(j, a)) & (pl.col("time") <= _sec(j, z + j.node_interval))
            )
        out = s.filter(~inside & (pl.col("time") > _sec(j, 30))).drop_nulls()
        assert out["r"].max() < 0.6


def test_pfc_storm_prevention_counts(J):
    for j in [x for x in J if x.kind == "roce_pfc_pause_storm_tx_host_stall"]:
        eps = next(iter(j.spec["fault"]["episodes"].values()))
        long_ = sum(z - a > 8 for a, z in eps)
        df = _raw(j) if _est(j) < 2e6 else j.raw
        (cul,) = list(j.culprits)
        st = _per_time(df, cul, c.ET_STORM, "sum")["v"].to_numpy()
        assert st[-1] - st[0] <= long_
        if long_ and eps[-1][1] < j.spec["dur"] - 60:
            assert st[-1] - st[0] >= 1


def test_lgc_and_orphan_from_first_sample(J):
    for kind in ("sm_clock_locked_leftover_lgc", "orphan_process_prev_job_gpu_mem_cpu"):
        for j in [x for x in J if x.kind == kind]:
            for node, on in j.culprits.items():
                first = (
                    pl.concat(
                        [
                            _series(_raw(j) if _est(j) < 2e6 else j.raw, node, c.SM_CLOCK),
                        ]
                    )["time"].min()
                    if kind == "sm_clock_locked_leftover_lgc"
                    else None
                )
                if first is not None:
                    assert on == first, j.name
            if _est(j) > 1e6:
                break


def test_cpu_fan_throttles_after_temperature(J):
    j = _smallest(J, "cpu_fan_fail_package_throttle_host")
    df = _raw(j)
    (cul,) = list(j.culprits)
    ta = j.spec["fault"]["throttle_at"][j.nodes.index(cul)]
    if "thermal" in c.SITES[j.site].collectors:
        th = _per_time(df, cul, c.CPU_PKG_THROTTLE, "sum")
        before = th.filter(pl.col("time") < _sec(j, ta))["v"]
        after = th.filter(pl.col("time") > _sec(j, ta + 120))["v"]
        assert after.max() > before.max()
    assert j.culprits[cul] < _sec(j, ta)


# ---------------------------------------------------------------------------------------------
# Healthy jobs
# ---------------------------------------------------------------------------------------------


def _signatures(df: pl.DataFrame, j) -> list[str]:
    out = []
    s = c.SITES[j.site]
    x = df.filter((pl.col("metric") == c.XID) & pl.col("value").is_in([48.0, 63.0, 79.0, 94.0]))
    if x.height:
        out.append("xid")
    for m in (c.COR_REMAP, c.ECC_SBE, c.ECC_DBE, c.VM_OOM, c.EDAC_UE, c.ET_STORM):
        d = (
            df.filter(pl.col("metric") == m)
            .group_by("node", "device")
            .agg((pl.col("value").max() - pl.col("value").min()).alias("d"))
        )
        if d.height and d["d"].max() > 0:
            out.append(m)
    lg = df.filter(pl.col("metric") == c.LINK_GEN)
    if lg.height and lg["value"].min() < s.pcie_gen:
        out.append("link")
    mt = df.filter(pl.col("metric") == c.MEM_TOTAL)
    if mt.height and mt["value"].n_unique() > 1:
        out.append("memtotal")
    pl_ = df.filter(pl.col("metric") == c.POWER_LIMIT)
    if pl_.height and pl_["value"].min() < 0.9 * s.tdp:
        out.append("power_limit")
    rp = (
        df.filter(pl.col("metric") == c.PCIE_REPLAY)
        .sort("time")
        .with_columns(pl.col("value").diff().over("node", "device").alias("d"))
    )
    if rp.height and rp["d"].max() > 5:
        out.append("replay")
    if s.ethtool:
        du = (
            df.filter(pl.col("metric") == c.ET_TX_PAUSE_DUR)
            .sort("time")
            .with_columns(pl.col("value").diff().over("node", "device").alias("d"))
        )
        if du.height and du["d"].max() > 1e6:
            out.append("pause")
    return out


def test_healthy_jobs_free_of_fault_signatures(J):
    done = 0
    for j in sorted((x for x in J if not x.faulty), key=_est):
        if _est(j) > 2.5e6:
            continue
        assert not _signatures(_raw(j), j), (j.name, _signatures(_raw(j), j))
        done += 1
    assert done >= 40


def test_stale_xid_constant_from_first_sample(J):
    for j in [x for x in J if x.kind == "stale_xid_from_previous_job"][:3]:
        df = _raw(j)
        for n, g, v in j.spec["benign"]["who"]:
            s = _series(df, j.nodes[n], c.XID, str(g))["value"]
            assert s.len() > 0 and (s == v).all()


def test_preflight_diag_on_every_node(J):
    j = _smallest(J, "preflight_nccl_dcgm_diag_all")
    df = _raw(j)
    s = c.SITES[j.site]
    end = j.spec["benign"]["diag_end"]
    for node in j.nodes:
        clk = _per_time(df, node, c.SM_CLOCK, "max").filter(
            (pl.col("time") > _sec(j, 60)) & (pl.col("time") < _sec(j, end - 10))
        )
        assert clk.height == 0 or clk["v"].max() >= 0.9 * s.sm_max


def test_elastic_leavers_stop_reporting_survivors_continue(J):
    j = _smallest(J, "elastic_scale_down_nodes_leave")
    df = _raw(j)
    b = j.spec["benign"]
    last = df.group_by("node").agg(pl.col("time").max().alias("t"))
    for n, node in enumerate(j.nodes):
        t = last.filter(pl.col("node") == node)["t"][0]
        if n in b["leave"]:
            assert t < _sec(j, b["at"])
        else:
            assert t > _sec(j, b["at"] + b["restart"])


def test_rolling_restart_gaps_every_node(J):
    j = _smallest(J, "rolling_node_exporter_restart")
    df = _raw(j)
    for node in j.nodes:
        s = _series(df, node, c.LOAD1)["time"]
        gaps = s.diff().dt.total_seconds().drop_nulls()
        assert (
            gaps.max() > j.node_interval * 1.5
            or j.spec["benign"]["restart"][j.nodes.index(node)][1] < j.node_interval
        )


def test_cooling_excursion_warms_everyone_without_throttle(J):
    j = _smallest(J, "cooling_excursion_all_nodes_warm")
    df = _raw(j)
    s = c.SITES[j.site]
    b = j.spec["benign"]
    mid = _sec(j, b["a"] + b["rise"] + b["hold"] / 2)
    t = df.filter(pl.col("metric") == c.GPU_TEMP)
    assert t["value"].max() < s.slow_temp
    for node in j.nodes[:8]:
        x = _per_time(df, node, c.GPU_TEMP, "mean")
        pre = x.filter(pl.col("time") < _sec(j, b["a"]))["v"].tail(10).median()
        hot = x.filter(
            (pl.col("time") > mid - timedelta(minutes=3))
            & (pl.col("time") < mid + timedelta(minutes=3))
        )["v"].median()
        if pre is not None and hot is not None:
            assert hot > pre + 0.5 * b["dt"] * min(b["gain"]) - 1.5


def test_leakage_nodes_draw_more_power(J):
    j = _smallest(J, "silicon_leakage_power_offset_nodes")
    df = _raw(j)
    who = {j.nodes[i] for i in j.spec["benign"]["who"]}
    e = (
        df.filter(pl.col("metric") == c.POWER)
        .group_by("node")
        .agg(pl.col("value").mean())
        .with_columns(pl.col("node").is_in(list(who)).alias("w"))
    )
    if e["w"].all():
        return
    assert e.filter(pl.col("w"))["value"].mean() > e.filter(~pl.col("w"))["value"].mean()


def test_site_specifics(J):
    a4 = next(j for j in sorted(J, key=_est) if j.site == "a4s")
    df = _raw(a4)
    ms = set(df["metric"].unique())
    assert c.CLOCK_THROTTLE not in ms and c.CLOCKS_EVENT not in ms and c.PROF_GR not in ms
    assert c.PCIE_RX_TP in ms and c.IB_SYMBOL in ms
    p5 = next(j for j in sorted(J, key=_est) if j.site == "p5x")
    ms = set(_raw(p5)["metric"].unique())
    assert not any(m.startswith(c.IB) for m in ms) and c.PROF_GR in ms
    a3 = next(j for j in sorted(J, key=_est) if j.site == "a3t" and not j.faulty)
    d3 = _raw(a3)
    rx = d3.filter((pl.col("metric") == c.NET_RX) & (pl.col("device") == "eth1")).sort("time")
    node = rx["node"][0]
    r = rx.filter(pl.col("node") == node)["value"].to_numpy()
    assert (r[-1] - r[0]) / (a3.minutes * 60) > 1e9  # the collectives are TCP on the data NICs
    g7 = next(j for j in sorted(J, key=_est) if j.site == "g72")
    ms = set(_raw(g7)["metric"].unique())
    assert c.CLOCKS_EVENT in ms and c.POWER_VIOL in ms and c.CPU_PKG_THROTTLE not in ms


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
