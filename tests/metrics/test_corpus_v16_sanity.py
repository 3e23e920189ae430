"""Sanity tests of corpus v16 itself (never of a detector).

Run with ``pytest --noconftest tests/metrics/test_corpus_v16_sanity.py -q``.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import numpy as np
import polars as pl
import pytest

from . import corpus_v16 as c
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
from .corpus_v14 import BENIGN_KINDS as V14_BENIGN
from .corpus_v14 import FAULT_KINDS as V14_FAULTS
from .corpus_v15 import BENIGN_KINDS as V15_BENIGN
from .corpus_v15 import FAULT_KINDS as V15_FAULTS

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


# ---------------------------------------------------------------------------------------------
# Evidence predicates (what a culprit's onset sample shows)
# ---------------------------------------------------------------------------------------------


def _v_xid(code):
    def v(j, df, node, on):
        x = _value_at(df, node, c.XID, on)
        return x is not None and x == code

    return v


def _v_xid_new(code):
    """A GPU reports ``code`` at ``on`` and did not at its first sample (not a stale Xid)."""

    def v(j, df, node, on):
        f = df.filter((pl.col("node") == node) & (pl.col("metric") == c.XID)).sort("time")
        now = f.filter((pl.col("time") == on) & (pl.col("value") == code))
        if now.height == 0:
            return False
        first = f.group_by("device").agg(pl.col("value").first().alias("v0"))
        m = now.join(first, on="device")
        return bool((m["v0"] != code).any())

    return v


def _reason_bits(df, node, on, bits) -> bool:
    f = df.filter(
        (pl.col("node") == node)
        & (pl.col("time") == on)
        & pl.col("metric").is_in([c.CLOCK_THROTTLE, c.CLOCKS_EVENT])
    )
    return bool(any(int(v) & bits for v in f["value"].to_list()))


def _v_nvl(j, df, node, on):
    s = c.SITES[j.site]
    v = _value_at(df, node, c.NVLINK_BW, on, "max")
    return v is not None and 0.05 * s.nvl_bw < v < 0.55 * s.nvl_bw


def _v_hbm(j, df, node, on):
    return _reason_bits(df, node, on, 0x40)


def _v_ib_state(j, df, node, on):
    v = _value_at(df, node, c.IB_STATE, on, "min")
    return v is not None and v < 4


def _v_blocked(j, df, node, on):
    v = _value_at(df, node, c.PROCS_BLOCKED, on)
    return v is not None and v >= 10


def _v_freq(j, df, node, on):
    v = _value_at(df, node, c.CPU_FREQ, on, "max")
    return v is not None and v < 0.6 * c.SITES[j.site].cpu_hz


def _v_replay(j, df, node, on):
    d = _delta_at(df, node, c.PCIE_REPLAY, on, "max")
    return d is not None and d >= 20


def _v_power_limit(j, df, node, on):
    v = _value_at(df, node, c.POWER_LIMIT, on, "min")
    return v is not None and v < 0.75 * c.SITES[j.site].tdp


def _v_ib_rate(j, df, node, on):
    v = _value_at(df, node, c.IB_RATE, on, "min")
    return v is not None and v < 0.9 * c.SITES[j.site].ib_rate


def _v_fs_err(j, df, node, on):
    v = _value_at(df, node, c.FS_DEVERR, on)
    return v is not None and v >= 1


def _v_crc(j, df, node, on):
    d = _delta_at(df, node, c.NVL_CRC, on, "max")
    return d is not None and d >= 1


def _v_memclk(j, df, node, on):
    v = _value_at(df, node, c.MEM_CLOCK, on, "min")
    return v is not None and v < 0.9 * c.SITES[j.site].mem_clk


def _v_running(j, df, node, on):
    v = _value_at(df, node, c.PROCS_RUNNING, on)
    return v is not None and v >= 20


_VISIBLE = {
    "nvswitch_fabric_degraded_nvlink_bw_node": _v_nvl,
    "hbm_temp_hw_thermal_slowdown_one_gpu": _v_hbm,
    "ib_port_stuck_armed_not_active": _v_ib_state,
    "xid31_mmu_fault_bad_page_rank_abort_hang": _v_xid_new(31.0),
    "xid119_gsp_rpc_timeout_rank_abort_hang": _v_xid(119),
    "kernel_soft_lockup_blocked_tasks_scrape_timeouts": _v_blocked,
    "bmc_prochot_cpu_freq_clamp_host": _v_freq,
    "pcie_aer_replay_burst_link_gen_drop_one_gpu": _v_replay,
    "bmc_node_power_cap_all_gpus": _v_power_limit,
    "port_cable_swap_half_rate_from_boot": _v_ib_rate,
    "pfs_mount_hang_device_error_loader_starve": _v_fs_err,
    "nvlink_crc_flit_storm_one_gpu_v16": _v_crc,
    "gpu_memclk_stuck_low_pstate_v16": _v_memclk,
    "runaway_daemon_cpu_straggler_host_v16": _v_running,
    "row_remap_event_xid63_no_slowdown_v16": _v_xid(63),
}
# present from the node's first sample: there is no "before"
_NO_PREV = ("port_cable_swap_half_rate_from_boot",)
_NODE_EVIDENCE = (
    "ib_port_stuck_armed_not_active",
    "kernel_soft_lockup_blocked_tasks_scrape_timeouts",
    "bmc_prochot_cpu_freq_clamp_host",
    "port_cable_swap_half_rate_from_boot",
    "pfs_mount_hang_device_error_loader_starve",
    "runaway_daemon_cpu_straggler_host_v16",
)
_HANGS = (
    "xid31_mmu_fault_bad_page_rank_abort_hang",
    "xid119_gsp_rpc_timeout_rank_abort_hang",
    "ib_port_stuck_armed_not_active",
)


# ---------------------------------------------------------------------------------------------
# API, determinism, schema
# ---------------------------------------------------------------------------------------------


def test_api_constants():
    assert len(c.FAULT_KINDS) == 15 and len(c.BENIGN_KINDS) == 10
    assert not set(c.FAULT_KINDS) & set(c.BENIGN_KINDS)
    assert c.RATE_VALUED_COUNTERS <= c.COUNTER_METRICS
    assert c.is_counter("node_cpu_seconds_total") and not c.is_counter("DCGM_FI_DEV_GPU_TEMP")
    assert c.is_counter(c.PCIE_REPLAY) and c.is_counter(c.NVL_CRC) and c.is_counter(c.IB_DOWNED)
    assert not c.is_counter(c.IB_STATE) and not c.is_counter(c.PROCS_BLOCKED)
    assert not c.is_counter(c.FS_DEVERR) and not c.is_counter(c.CPU_FREQ)
    assert set(c.SITES) == {"cxs", "n5h", "lbh", "a8r", "gbs", "a6u"}
    assert c.ROW_CAP == 5.45e6
    assert set(_VISIBLE) == set(c.FAULT_KINDS)


def test_kind_names_are_new():
    old = _OLDER_KINDS.union(
        V9_FAULTS, V9_BENIGN, V10_FAULTS, V10_BENIGN, V11_FAULTS, V11_BENIGN, V12_FAULTS
    ).union(V12_BENIGN, V13_FAULTS, V13_BENIGN, V14_FAULTS, V14_BENIGN, V15_FAULTS, V15_BENIGN)
    for k in c.FAULT_KINDS + c.BENIGN_KINDS:
        assert k not in old, k
    reused = [k for k in c.FAULT_KINDS if k.endswith("_v16")]
    v15 = {k.removesuffix("_v15") for k in V15_FAULTS}
    assert len(reused) == 4 and all(k[: -len("_v16")] in v15 for k in reused)
    assert len(c.FAULT_KINDS) - len(reused) >= 10 and len(c.BENIGN_KINDS) >= 8
    used = {
        *("gb3", "efa", "a3g", "h1n", "rtx", "a4h"),
        *("h20", "dgx", "ndv", "oci", "l4s", "gh2"),
        *("b2h", "gbr", "h2r", "a8c", "v1c", "ckw"),
        *("g3n", "h4p", "a4o", "l2c", "bsx", "lcw"),
        *("h2o", "a8u", "h8r", "l4x", "hsn", "hnv"),
        *("p5x", "a3t", "g72", "a4s", "hpl", "r6k"),
        *("b2x", "cwh", "l4e", "h2s", "v1s", "a1v"),
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
    assert min(Counter(j.site for j in J).values()) >= 12
    sizes = [len(j.nodes) for j in J]
    assert min(sizes) == 2 and max(sizes) >= 512
    assert sum(n >= 192 for n in sizes) >= 6
    for k in c.FAULT_KINDS + c.BENIGN_KINDS:
        assert sum(j.kind == k for j in J) >= 3, k
    ivs = {(j.dcgm_interval, j.node_interval) for j in J}
    assert ivs >= {(15.0, 15.0), (30.0, 30.0), (60.0, 60.0), (10.0, 15.0)}
    for j in J:
        assert j.faulty == (j.kind in c.FAULT_KINDS)
        assert set(j.culprits) <= set(j.nodes)
        assert len(set(j.nodes)) == len(j.nodes)
        assert j.name.startswith("v16-") and j.site in j.name
        assert all(n.startswith(_HOST_PREFIX[j.site]) for n in j.nodes), j.name


_HOST_PREFIX = {
    "cxs": "nid",
    "n5h": "ndh200v5",
    "lbh": "lambda-h100-",
    "a8r": "h800-",
    "gbs": "gb300-r",
    "a6u": "ws-a6000-",
}


def test_kinds_on_sites_that_can_show_them(J):
    for j in J:
        s = c.SITES[j.site]
        if j.kind in (
            "nvswitch_fabric_degraded_nvlink_bw_node",
            "nvlink_crc_flit_storm_one_gpu_v16",
        ):
            assert c.NVL_CRC in s.fields and s.nvl_bw > 0
        if j.kind == "hbm_temp_hw_thermal_slowdown_one_gpu":
            assert s.reasons is not None and c.MEMORY_TEMP in s.fields
        if j.kind == "ib_port_stuck_armed_not_active":
            assert s.ib and not s.roce
        if j.kind == "port_cable_swap_half_rate_from_boot":
            assert s.ib
        if j.kind == "bmc_prochot_cpu_freq_clamp_host":
            assert "cpufreq" in s.collectors
        if j.kind == "bmc_node_power_cap_all_gpus":
            assert c.POWER_LIMIT in s.fields
        if j.kind == "pfs_mount_hang_device_error_loader_starve":
            assert s.pfs
        if j.kind == "row_remap_event_xid63_no_slowdown_v16":
            assert c.COR_REMAP in s.fields


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
        assert rows.height > 0, (j.name, node, "onset is not a sample of the culprit")
        assert _VISIBLE[j.kind](j, df, node, on), (j.name, node, on)
        if j.kind not in _NO_PREV:
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


def test_boot_kind_from_first_sample(J):
    for j in [x for x in J if x.kind in _NO_PREV]:
        if _est(j) > 2e6:
            continue
        df = _raw(j)
        for node, on in j.culprits.items():
            assert on == _series(df, node, c.IB_RATE)["time"].min(), j.name


def test_hang_peers_spin_then_exit(J):
    for kind in _HANGS:
        j = _smallest(J, kind)
        df = _raw(j)
        (cul,) = list(j.culprits)
        peer = next(n for n in j.nodes if n != cul)
        sp = j.spec
        t_stop = sp["culprits"][j.nodes.index(cul)] + sp["fault"]["kill_lag"]
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


def test_armed_port_carries_no_traffic(J):
    j = _smallest(J, "ib_port_stuck_armed_not_active")
    df = _raw(j)
    (cul,) = list(j.culprits)
    on = j.culprits[cul]
    p = j.spec["fault"]["port"][j.nodes.index(cul)]
    dev = c.SITES[j.site].ib[p]
    tx = _series(df, cul, c.IB_TX, dev).filter(pl.col("time") > on)
    assert tx.height > 1 and tx["value"].max() == tx["value"].min()
    ph = _series(df, cul, c.IB_PHYS, dev).filter(pl.col("time") >= on)
    assert set(ph["value"].to_list()) == {5.0}


def test_slow_culprit_slows_everyone(J):
    """Throughput-like metrics move together: a peer's power drops after the onset."""
    for kind in (
        "nvswitch_fabric_degraded_nvlink_bw_node",
        "bmc_node_power_cap_all_gpus",
        "pfs_mount_hang_device_error_loader_starve",
        "bmc_prochot_cpu_freq_clamp_host",
        "kernel_soft_lockup_blocked_tasks_scrape_timeouts",
        "hbm_temp_hw_thermal_slowdown_one_gpu",
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
        "hbm_temp_hw_thermal_slowdown_one_gpu",
        "pcie_aer_replay_burst_link_gen_drop_one_gpu",
        "gpu_memclk_stuck_low_pstate_v16",
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


def test_hbm_memory_temperature_high(J):
    j = _smallest(J, "hbm_temp_hw_thermal_slowdown_one_gpu")
    df = _raw(j)
    cul, on = min(j.culprits.items(), key=lambda kv: kv[1])
    g = str(j.spec["fault"]["gpu"][j.nodes.index(cul)])
    m = _series(df, cul, c.MEMORY_TEMP, g)
    pre = m.filter(pl.col("time") < on)["value"]
    post = m.filter(pl.col("time") >= on + timedelta(minutes=2))["value"]
    assert post.median() > pre.tail(10).median() + 10


def test_soft_lockup_node_exporter_misses_scrapes(J):
    j = _smallest(J, "kernel_soft_lockup_blocked_tasks_scrape_timeouts")
    df = _raw(j)
    (cul,) = list(j.culprits)
    for a, z in j.spec["fault"]["ngaps"][j.nodes.index(cul)]:
        w = (pl.col("time") >= _sec(j, a)) & (pl.col("time") < _sec(j, z))
        assert df.filter((pl.col("node") == cul) & (pl.col("metric") == c.LOAD1) & w).height == 0


def test_xid31_not_stale(J):
    for j in [x for x in J if x.kind == "xid31_mmu_fault_bad_page_rank_abort_hang"]:
        if _est(j) > 2e6:
            continue
        df = _raw(j)
        (cul,) = list(j.culprits)
        g = str(j.spec["fault"]["gpu"][j.nodes.index(cul)])
        x = _series(df, cul, c.XID, g)
        assert x["value"][0] == 0 and x["value"][-1] == 31


def test_no_slowdown_kind_keeps_pace(J):
    j = _smallest(J, "row_remap_event_xid63_no_slowdown_v16")
    df = _raw(j)
    cul = next(iter(j.culprits))
    on = j.culprits[cul]
    u = _per_time(df, cul, c.GPU_UTIL, "min").filter(
        (pl.col("time") > on) & (pl.col("time") < on + timedelta(minutes=5))
    )
    assert u.height == 0 or u["v"].median() >= 95


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
        if x["value"].is_in([63.0, 119.0]).any():
            out.append("xid")
        fl = x.group_by("node", "device").agg(
            pl.col("value").first().alias("a"), pl.col("value").max().alias("m")
        )
        if (fl["m"] > fl["a"]).any():
            out.append("new xid")
    for m in (c.COR_REMAP, c.ECC_DBE, c.NVL_RECOVERY, c.NVL_CRC, c.IB_DOWNED):
        d = (
            df.filter(pl.col("metric") == m)
            .group_by("node", "device")
            .agg((pl.col("value").max() - pl.col("value").min()).alias("d"))
        )
        if d.height and d["d"].max() > 0:
            out.append(m)
    if _max_delta(df, c.PCIE_REPLAY) >= 20:
        out.append("replays")
    mc = df.filter(pl.col("metric") == c.MEM_CLOCK)
    if mc.height and mc["value"].min() < 0.9 * s.mem_clk:
        out.append("memclk")
    ir = df.filter(pl.col("metric") == c.IB_RATE)
    if ir.height and ir["value"].min() < 0.9 * s.ib_rate:
        out.append("ib_rate")
    st = df.filter(pl.col("metric") == c.IB_STATE)
    if st.height and st["value"].min() < 4:
        out.append("ib_state")
    pl_ = df.filter(pl.col("metric") == c.POWER_LIMIT)
    if pl_.height and pl_["value"].min() < 0.75 * s.tdp:
        out.append("power_limit")
    r = df.filter(pl.col("metric").is_in([c.CLOCK_THROTTLE, c.CLOCKS_EVENT]))
    if r.height and (r["value"].cast(pl.Int64) & 0x40).max() > 0:
        out.append("reasons")
    for m, thr in ((c.PROCS_BLOCKED, 10), (c.PROCS_RUNNING, 20), (c.FS_DEVERR, 1)):
        v = df.filter(pl.col("metric") == m)
        if v.height and v["value"].max() >= thr:
            out.append(m)
    fq = df.filter(pl.col("metric") == c.CPU_FREQ)
    if fq.height and fq["value"].min() < 0.6 * s.cpu_hz:
        out.append("cpufreq")
    return out


def test_healthy_jobs_free_of_fault_signatures(J):
    done = 0
    for j in sorted((x for x in J if not x.faulty), key=_est):
        if _est(j) > 2.5e6:
            continue
        df = _raw(j)
        assert not _signatures(df, j), (j.name, _signatures(df, j))
        done += 1
    assert done >= 40


def test_rank0_eval_peers_idle(J):
    j = _smallest(J, "rank0_eval_peers_idle_gloo_barrier")
    df = _raw(j)
    a, z = j.spec["benign"]["evals"][0]
    w = (pl.col("time") > _sec(j, a + 60)) & (pl.col("time") < _sec(j, z - 10))
    p0 = _per_time(df, j.nodes[0], c.POWER, "mean").filter(w)
    p1 = _per_time(df, j.nodes[1], c.POWER, "mean").filter(w)
    u1 = _per_time(df, j.nodes[1], c.GPU_UTIL, "max").filter(w)
    if p0.height and p1.height:
        assert p0["v"].median() > p1["v"].median()
        assert u1["v"].max() <= 5


def test_planned_power_cap_on_every_node(J):
    j = _smallest(J, "planned_power_cap_every_node")
    df = _raw(j)
    b = j.spec["benign"]
    late = df.filter((pl.col("metric") == c.POWER_LIMIT) & (pl.col("time") > _sec(j, b["at"] + 60)))
    per = late.group_by("node").agg(pl.col("value").max())
    assert per.height == len(j.nodes)
    assert (per["value"] < 0.95 * c.SITES[j.site].tdp).all()


def test_exporter_upgrade_gap_on_every_node(J):
    j = _smallest(J, "exporter_upgrade_rolling_all_nodes")
    df = _raw(j)
    s = c.SITES[j.site]
    for n, a, d in j.spec["benign"]["who"]:
        w = (pl.col("time") >= _sec(j, a)) & (pl.col("time") < _sec(j, a + d))
        assert (
            df.filter((pl.col("node") == j.nodes[n]) & w & (pl.col("metric") == c.XID)).height == 0
        )
    if s.reasons == c.CLOCK_THROTTLE:
        got = set(df.filter(pl.col("metric") == c.CLOCKS_EVENT)["node"].unique())
        assert got == set(j.nodes)


def test_rebooted_nodes_boot_time(J):
    j = _smallest(J, "node_rebooted_before_job_start")
    df = _raw(j)
    bt = df.filter(pl.col("metric") == c.BOOT_TIME).group_by("node").agg(pl.col("value").max())
    t0 = j.start.timestamp()
    for n, up in zip(j.spec["benign"]["who"], j.spec["benign"]["up"], strict=True):
        v = bt.filter(pl.col("node") == j.nodes[n])["value"][0]
        assert abs(t0 - v - up) < 2


def test_late_warmup_others_wait(J):
    j = _smallest(J, "dataloader_warmup_longer_some_ranks")
    df = _raw(j)
    late = j.spec["benign"]["late"]
    n = next(iter(late))
    other = next(i for i in range(len(j.nodes)) if i not in late)
    t_last = j.spec["init_end"] + j.spec["init_spread"] + max(late.values())
    w = (pl.col("time") > _sec(j, t_last - 50)) & (pl.col("time") < _sec(j, t_last - 5))
    u = _per_time(df, j.nodes[other], c.GPU_UTIL, "min").filter(w)
    ul = _per_time(df, j.nodes[n], c.GPU_UTIL, "max").filter(w)
    if u.height and ul.height:
        assert u["v"].min() >= 99 and ul["v"].max() < 99


def test_frontend_blip_all_nodes_down(J):
    j = _smallest(J, "frontend_network_maintenance_blip")
    df = _raw(j)
    b = j.spec["benign"]
    w = (pl.col("time") >= _sec(j, b["at"])) & (pl.col("time") < _sec(j, b["at"] + b["len"]))
    down = df.filter((pl.col("metric") == c.NET_UP) & (pl.col("value") == 0) & w)
    assert set(down["node"].unique()) <= set(j.nodes)
    if b["len"] >= 2 * j.node_interval:
        assert down["node"].n_unique() >= 0.8 * len(j.nodes)


def test_prometheus_reload_fewer_samples_before(J):
    j = _smallest(J, "prometheus_reload_shorter_interval")
    df = _raw(j)
    at = j.spec["benign"]["at"]
    ld = df.filter((pl.col("metric") == c.LOAD1) & (pl.col("node") == j.nodes[0]))
    before = ld.filter(pl.col("time") < _sec(j, at)).height / max(at, 1)
    after = ld.filter(pl.col("time") >= _sec(j, at)).height / max(j.minutes * 60 - at, 1)
    assert before < 0.75 * after


def test_mixed_sku_memory_size(J):
    j = _smallest(J, "mixed_sku_subset_nodes_compatible")
    df = _raw(j)
    b = j.spec["benign"]
    tot = (
        df.filter(pl.col("metric").is_in([c.FB_USED, c.FB_FREE]))
        .group_by("node", "time", "device")
        .agg(pl.col("value").sum())
        .group_by("node")
        .agg(pl.col("value").median())
    )
    who = {j.nodes[i] for i in b["who"]}
    a = tot.filter(pl.col("node").is_in(who))["value"].mean()
    o = tot.filter(~pl.col("node").is_in(who))["value"]
    if o.len():
        assert abs(a / o.mean() - b["fb"]) < 0.02


def test_site_specifics(J):
    by = sorted(J, key=_est)

    def ms(site):
        j = next(x for x in by if x.site == site)
        return set(_raw(j)["metric"].unique()), _raw(j)

    m, df = ms("cxs")
    assert not any(x.startswith(c.IB) for x in m) and c.EDAC_CE not in m
    assert {"hsn0", "hsn3"} <= set(df.filter(pl.col("metric") == c.NET_RX)["device"].unique())
    assert df.filter(pl.col("metric") == c.GPU_TEMP)["device"].n_unique() == 4
    m, df = ms("n5h")
    assert c.IB_STATE in m and c.HWMON_TEMP not in m and c.EDAC_CE not in m
    assert "steal" in set(df.filter(pl.col("metric") == c.CPU_SECONDS)["device"].unique())
    assert "mlx5_ib0:1" in set(df.filter(pl.col("metric") == c.IB_RATE)["device"].unique())
    m, df = ms("lbh")
    assert c.IB_XMIT_WAIT in m and c.NVL_CRC in m and c.PROF_GR in m
    assert df.filter(pl.col("metric") == c.IB_RATE)["device"].n_unique() == 8
    m, df = ms("a8r")
    assert c.PROF_GR not in m and c.ET_DISCARDS in m and c.NVL_CRC in m
    assert df.filter(pl.col("metric") == c.ET_DISCARDS)["device"].n_unique() == 8
    assert "bond0" in set(df.filter(pl.col("metric") == c.NET_UP)["device"].unique())
    m, df = ms("gbs")
    assert c.CLOCKS_EVENT in m and c.POWER_VIOL in m and c.IB_OOS in m
    assert "arch_sys_counter" in set(df.filter(pl.col("metric") == c.CLOCKSOURCE)["device"])
    m, df = ms("a6u")
    assert c.MEMORY_TEMP not in m and c.NVLINK_BW not in m and c.LINK_GEN in m
    assert not any(x.startswith(c.IB) for x in m) and c.PROF_GR not in m
    assert df.filter(pl.col("metric") == c.GPU_TEMP)["device"].n_unique() == 2


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


def test_grad_accum_bursts_move_together(J):
    """The burst schedule has both phases during training and the fabric counter exists."""
    j = _smallest(J, "grad_accum_comm_bursts_jobwide")
    b = j.spec["benign"]
    s = c.SITES[j.site]
    warm = j.spec["init_end"] + j.spec["init_spread"] + j.spec["ramp"] + 60
    t = np.arange(warm, j.spec["dur"] - 60, 5.0)
    ph = (t % b["period"]) / b["period"]
    assert (ph < b["duty"]).any() and (ph >= b["duty"]).any()
    df = _raw(j)
    m = c.IB_TX if s.ib else c.NET_TX
    assert df.filter(pl.col("metric") == m).height > 0
