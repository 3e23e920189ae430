"""Sanity tests of corpus v17 itself (never of a detector).

Run with ``pytest --noconftest tests/metrics/test_corpus_v17_sanity.py -q``.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import numpy as np
import polars as pl
import pytest

from . import corpus_v17 as c
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
from .corpus_v16 import BENIGN_KINDS as V16_BENIGN
from .corpus_v16 import FAULT_KINDS as V16_FAULTS

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


def _reason_bits(df, node, on, bits) -> bool:
    f = df.filter(
        (pl.col("node") == node)
        & (pl.col("time") == on)
        & pl.col("metric").is_in([c.CLOCK_THROTTLE, c.CLOCKS_EVENT])
    )
    return bool(any(int(v) & bits for v in f["value"].to_list()))


def _v_remap_fail(j, df, node, on):
    v = _value_at(df, node, c.REMAP_FAIL, on)
    return v is not None and v >= 1


def _v_nvl_recovery(j, df, node, on):
    d = _delta_at(df, node, c.NVL_RECOVERY, on, "max")
    return d is not None and d >= 1


def _v_p8(j, df, node, on):
    s = c.SITES[j.site]
    f = df.filter(
        (pl.col("node") == node) & (pl.col("time") == on) & (pl.col("metric") == c.SM_CLOCK)
    )
    if f.height == 0:
        return False
    return f["value"].min() < 0.5 * s.sm_max and f["value"].max() > 0.8 * s.sm_max


def _v_rcv_err(j, df, node, on):
    d = _delta_at(df, node, c.IB_RCV_ERR, on, "max")
    return d is not None and d >= 20


def _v_hws(j, df, node, on):
    return _reason_bits(df, node, on, 0x8)


def _v_brake(j, df, node, on):
    return _reason_bits(df, node, on, 0x80)


def _v_memtotal(j, df, node, on):
    v = _value_at(df, node, c.MEM_TOTAL, on)
    return v is not None and v < 0.97 * c.SITES[j.site].mem_gib * 1024.0**3


def _v_memavail(j, df, node, on):
    v = _value_at(df, node, c.MEM_AVAIL, on)
    return v is not None and v < 0.06 * c.SITES[j.site].mem_gib * 1024.0**3


def _v_blocked(j, df, node, on):
    v = _value_at(df, node, c.PROCS_BLOCKED, on)
    return v is not None and v >= 4


def _v_memclk(j, df, node, on):
    v = _value_at(df, node, c.MEM_CLOCK, on, "min")
    return v is not None and v < 0.9 * c.SITES[j.site].mem_clk


def _v_running(j, df, node, on):
    v = _value_at(df, node, c.PROCS_RUNNING, on)
    return v is not None and v >= 20


def _v_power_limit(j, df, node, on):
    v = _value_at(df, node, c.POWER_LIMIT, on, "min")
    return v is not None and v < 0.75 * c.SITES[j.site].tdp


_VISIBLE = {
    "row_remap_failure_xid64_gpu_slow": _v_remap_fail,
    "nvlink_link_down_one_gpu_recovery_bw_loss": _v_nvl_recovery,
    "hbm_dbe_contained_xid94_job_restart": _v_xid(94),
    "gpu_intermittent_p8_drop_episodes": _v_p8,
    "ib_port_rcv_errors_climb_then_link_down_hang": _v_rcv_err,
    "air_cooled_fan_fail_hw_slowdown_one_gpu": _v_hws,
    "dimm_channel_disabled_memtotal_from_boot": _v_memtotal,
    "kswapd_memory_thrash_loader_starve_host": _v_memavail,
    "nfs_loader_mount_slow_iowait_host": _v_blocked,
    "psu_loss_power_brake_bursts_node": _v_brake,
    "gpu_memclk_stuck_low_pstate_v17": _v_memclk,
    "runaway_daemon_cpu_straggler_host_v17": _v_running,
    "xid119_gsp_rpc_timeout_rank_abort_hang_v17": _v_xid(119),
    "bmc_node_power_cap_all_gpus_v17": _v_power_limit,
}
# present from the node's first sample: there is no "before"
_NO_PREV = ("dimm_channel_disabled_memtotal_from_boot",)
_NODE_EVIDENCE = (
    "ib_port_rcv_errors_climb_then_link_down_hang",
    "dimm_channel_disabled_memtotal_from_boot",
    "kswapd_memory_thrash_loader_starve_host",
    "nfs_loader_mount_slow_iowait_host",
    "runaway_daemon_cpu_straggler_host_v17",
)
_HANGS = (
    "xid119_gsp_rpc_timeout_rank_abort_hang_v17",
    "ib_port_rcv_errors_climb_then_link_down_hang",
)
_SITE_KEYS = {"obm", "nbi", "sph", "p1e", "a4f", "g36"}


# ---------------------------------------------------------------------------------------------
# API, determinism, schema
# ---------------------------------------------------------------------------------------------


def test_api_constants():
    assert len(c.FAULT_KINDS) == 14 and len(c.BENIGN_KINDS) == 8
    assert not set(c.FAULT_KINDS) & set(c.BENIGN_KINDS)
    assert c.RATE_VALUED_COUNTERS <= c.COUNTER_METRICS
    assert c.is_counter("node_cpu_seconds_total") and not c.is_counter("DCGM_FI_DEV_GPU_TEMP")
    assert (
        c.is_counter(c.PCIE_REPLAY) and c.is_counter(c.NVL_RECOVERY) and c.is_counter(c.IB_DOWNED)
    )
    assert c.is_counter(c.IB_RCV_ERR) and c.is_counter(c.VM_PGMAJ) and c.is_counter(c.ECC_DBE)
    assert not c.is_counter(c.MEM_AVAIL) and not c.is_counter(c.PROCS_BLOCKED)
    assert not c.is_counter(c.REMAP_FAIL) and not c.is_counter(c.MEM_TOTAL)
    assert set(c.SITES) == _SITE_KEYS
    assert c.ROW_CAP == 5.45e6
    assert set(_VISIBLE) == set(c.FAULT_KINDS)
    for name in ("jobs", "table", "aggregate", "_estimate_rows", "Job", "BENIGN_KINDS"):
        assert hasattr(c, name)


def test_kind_names_are_new():
    old = _OLDER_KINDS.union(
        V9_FAULTS, V9_BENIGN, V10_FAULTS, V10_BENIGN, V11_FAULTS, V11_BENIGN, V12_FAULTS
    ).union(V12_BENIGN, V13_FAULTS, V13_BENIGN, V14_FAULTS, V14_BENIGN, V15_FAULTS, V15_BENIGN)
    old = old.union(V16_FAULTS, V16_BENIGN)
    for k in c.FAULT_KINDS + c.BENIGN_KINDS:
        assert k not in old, k
    reused = [k for k in c.FAULT_KINDS if k.endswith("_v17")]
    v16 = {k.removesuffix("_v16") for k in V16_FAULTS}
    assert len(reused) == 4 and all(k[: -len("_v17")] in v16 for k in reused)
    assert len(c.FAULT_KINDS) - len(reused) >= 10 and len(c.BENIGN_KINDS) >= 8
    used = {
        *("gb3", "efa", "a3g", "h1n", "rtx", "a4h"),
        *("h20", "dgx", "ndv", "oci", "l4s", "gh2"),
        *("b2h", "gbr", "h2r", "a8c", "v1c", "ckw"),
        *("g3n", "h4p", "a4o", "l2c", "bsx", "lcw"),
        *("h2o", "a8u", "h8r", "l4x", "hsn", "hnv"),
        *("p5x", "a3t", "g72", "a4s", "hpl", "r6k"),
        *("b2x", "cwh", "l4e", "h2s", "v1s", "a1v"),
        *("cxs", "n5h", "lbh", "a8r", "gbs", "a6u"),
    }
    assert not used & set(c.SITES)


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
    assert sum(len(j.culprits) == 2 for j in J) >= 4
    assert Counter(j.site for j in J).keys() == set(c.SITES)
    assert min(Counter(j.site for j in J).values()) >= 12
    sizes = [len(j.nodes) for j in J]
    assert min(sizes) == 2 and max(sizes) >= 512
    assert sum(n >= 192 for n in sizes) >= 6
    for k in c.FAULT_KINDS + c.BENIGN_KINDS:
        assert sum(j.kind == k for j in J) >= 4, k
    ivs = {(j.dcgm_interval, j.node_interval) for j in J}
    assert ivs >= {(15.0, 15.0), (30.0, 30.0), (60.0, 60.0), (10.0, 15.0)}
    for j in J:
        assert j.faulty == (j.kind in c.FAULT_KINDS)
        assert set(j.culprits) <= set(j.nodes)
        assert len(set(j.nodes)) == len(j.nodes)
        assert j.name.startswith("v17-") and j.site in j.name
        assert all(n.startswith(_HOST_PREFIX[j.site]) for n in j.nodes), j.name


_HOST_PREFIX = {
    "obm": "inst-h100-",
    "nbi": "computeinstance-",
    "sph": "dgx-su",
    "p1e": "gpu-v100-",
    "a4f": "render-a40-",
    "g36": "gb200-p",
}


def test_kinds_on_sites_that_can_show_them(J):
    for j in J:
        s = c.SITES[j.site]
        if j.kind == "row_remap_failure_xid64_gpu_slow":
            assert c.REMAP_FAIL in s.fields
        if j.kind == "nvlink_link_down_one_gpu_recovery_bw_loss":
            assert c.NVL_RECOVERY in s.fields and s.nvl_bw > 0
        if j.kind == "hbm_dbe_contained_xid94_job_restart":
            assert c.ECC_DBE in s.fields
        if j.kind == "ib_port_rcv_errors_climb_then_link_down_hang":
            assert c.IB_RCV_ERR in s.ib_extra and not s.roce
        if j.kind in (
            "air_cooled_fan_fail_hw_slowdown_one_gpu",
            "psu_loss_power_brake_bursts_node",
        ):
            assert s.reasons is not None
        if j.kind == "air_cooled_fan_fail_hw_slowdown_one_gpu":
            assert s.key != "g36"  # liquid-cooled
        if j.kind == "dimm_channel_disabled_memtotal_from_boot":
            assert not s.vm and not s.arm
        if j.kind == "bmc_node_power_cap_all_gpus_v17":
            assert c.POWER_LIMIT in s.fields
        if j.kind == "xid119_gsp_rpc_timeout_rank_abort_hang_v17":
            assert s.key != "p1e"  # Volta has no GSP
        if j.kind == "dcgm_field_group_reconfig_all_nodes":
            assert c.PROF_GR in s.fields


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
            assert on == _series(df, node, c.MEM_TOTAL)["time"].min(), j.name


def _kill_time(j) -> float:
    sp = j.spec
    (cul,) = list(j.culprits)
    te = sp["culprits"][j.nodes.index(cul)]
    f = sp["fault"]
    return te + f.get("climb", 0.0) + f["kill_lag"]


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


def test_rcv_errors_climb_then_port_down(J):
    j = _smallest(J, "ib_port_rcv_errors_climb_then_link_down_hang")
    df = _raw(j)
    (cul,) = list(j.culprits)
    f = j.spec["fault"]
    i = j.nodes.index(cul)
    dev = c.SITES[j.site].ib[f["port"][i]]
    down = j.spec["culprits"][i] + f["climb"]
    e = _series(df, cul, c.IB_RCV_ERR, dev)
    mid = e.filter((pl.col("time") > j.culprits[cul]) & (pl.col("time") < _sec(j, down)))
    if mid.height > 2:
        assert mid["value"][-1] > mid["value"][0]
    st = _series(df, cul, c.IB_STATE, dev).filter(pl.col("time") >= _sec(j, down))
    assert st.height > 0 and st["value"].max() == 1.0
    tx = _series(df, cul, c.IB_TX, dev).filter(pl.col("time") >= _sec(j, down))
    assert tx["value"].max() == tx["value"].min()


def test_dbe_restart_every_rank_stops(J):
    j = _smallest(J, "hbm_dbe_contained_xid94_job_restart")
    df = _raw(j)
    (cul,) = list(j.culprits)
    f = j.spec["fault"]
    a = j.spec["culprits"][j.nodes.index(cul)] + f["kill_lag"]
    lag = c.SITES[j.site].collect + 10  # dcgm-exporter serves its last collection
    w = (pl.col("time") > _sec(j, a + lag)) & (pl.col("time") < _sec(j, a + f["idle"] - 5))
    u = df.filter((pl.col("metric") == c.GPU_UTIL) & w)
    if u.height:
        assert u["value"].max() == 0
    late = df.filter(
        (pl.col("metric") == c.GPU_UTIL)
        & (pl.col("time") > _sec(j, a + f["idle"] + f["init"] + 200))
    )
    if late.height:
        assert late["value"].median() >= 95
    d = _series(df, cul, c.ECC_DBE)
    assert d["value"].max() > d["value"].min()


def test_slow_culprit_slows_everyone(J):
    """Throughput-like metrics move together: a peer's power drops after the onset."""
    for kind in (
        "row_remap_failure_xid64_gpu_slow",
        "nvlink_link_down_one_gpu_recovery_bw_loss",
        "air_cooled_fan_fail_hw_slowdown_one_gpu",
        "kswapd_memory_thrash_loader_starve_host",
        "nfs_loader_mount_slow_iowait_host",
        "bmc_node_power_cap_all_gpus_v17",
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
        "row_remap_failure_xid64_gpu_slow",
        "nvlink_link_down_one_gpu_recovery_bw_loss",
        "air_cooled_fan_fail_hw_slowdown_one_gpu",
        "gpu_memclk_stuck_low_pstate_v17",
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


def test_fan_failure_gpu_runs_hot(J):
    j = _smallest(J, "air_cooled_fan_fail_hw_slowdown_one_gpu")
    df = _raw(j)
    cul, on = min(j.culprits.items(), key=lambda kv: kv[1])
    g = str(j.spec["fault"]["gpu"][j.nodes.index(cul)])
    m = _series(df, cul, c.GPU_TEMP, g)
    others = df.filter(
        (pl.col("node") == cul) & (pl.col("metric") == c.GPU_TEMP) & (pl.col("device") != g)
    )
    post = m.filter(pl.col("time") >= on + timedelta(minutes=3))["value"]
    o = others.filter(pl.col("time") >= on + timedelta(minutes=3))["value"]
    if post.len() and o.len():
        assert post.median() > o.median() + 3


def test_episode_kinds_episodes_are_short(J):
    for kind in ("gpu_intermittent_p8_drop_episodes", "psu_loss_power_brake_bursts_node"):
        for j in [x for x in J if x.kind == kind]:
            (cul,) = list(j.culprits)
            eps = j.spec["fault"]["eps"][j.nodes.index(cul)]
            assert len(eps) >= 2
            assert all(15 <= z - a <= 120 for a, z in eps)
            on = (j.culprits[cul] - j.start).total_seconds()
            assert any(a <= on < z + j.dcgm_interval + 1 for a, z in eps), j.name


def test_p8_gpu_idle_clocks_while_siblings_spin(J):
    j = _smallest(J, "gpu_intermittent_p8_drop_episodes")
    df = _raw(j)
    (cul,) = list(j.culprits)
    on = j.culprits[cul]
    g = str(j.spec["fault"]["gpu"][j.nodes.index(cul)])
    u = _series(df, cul, c.GPU_UTIL, g).filter(pl.col("time") == on)
    assert u["value"][0] == 0
    mc = _series(df, cul, c.MEM_CLOCK, g).filter(pl.col("time") == on)
    assert mc["value"][0] < 0.5 * c.SITES[j.site].mem_clk


def test_kswapd_thrash_signals(J):
    j = _smallest(J, "kswapd_memory_thrash_loader_starve_host")
    df = _raw(j)
    (cul,) = list(j.culprits)
    on = j.culprits[cul]
    r = _rate_at(
        df, cul, c.VM_PGMAJ, df.filter(pl.col("time") > on + timedelta(minutes=2))["time"].min()
    )
    late = _series(df, cul, c.VM_PGMAJ).filter(pl.col("time") > on + timedelta(minutes=2))
    t = late["time"].to_list()
    v = late["value"].to_list()
    if len(t) > 2:
        rate = (v[-1] - v[0]) / (t[-1] - t[0]).total_seconds()
        assert rate > 100
    assert r is None or r >= 0
    cached = _series(df, cul, c.MEM_CACHED).filter(pl.col("time") > on)
    tot = c.SITES[j.site].mem_gib * 1024.0**3
    assert cached["value"].max() < 0.1 * tot


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
    gib = 1024.0**3
    x = df.filter(pl.col("metric") == c.XID).sort("time")
    if x.height:
        if x["value"].is_in([64.0, 94.0, 119.0]).any():
            out.append("xid")
        fl = x.group_by("node", "device").agg(
            pl.col("value").first().alias("a"), pl.col("value").max().alias("m")
        )
        if (fl["m"] > fl["a"]).any():
            out.append("new xid")
    for m in (c.REMAP_FAIL, c.ECC_DBE, c.NVL_RECOVERY, c.IB_DOWNED):
        d = (
            df.filter(pl.col("metric") == m)
            .group_by("node", "device")
            .agg((pl.col("value").max() - pl.col("value").min()).alias("d"))
        )
        if d.height and d["d"].max() > 0:
            out.append(m)
    rf = df.filter(pl.col("metric") == c.REMAP_FAIL)
    if rf.height and rf["value"].max() > 0:
        out.append("remap_fail")
    if _max_delta(df, c.IB_RCV_ERR) >= 20:
        out.append("rcv_errors")
    mc = df.filter(pl.col("metric") == c.MEM_CLOCK)
    if mc.height and mc["value"].min() < 0.9 * s.mem_clk:
        out.append("memclk")
    pl_ = df.filter(pl.col("metric") == c.POWER_LIMIT)
    if pl_.height and pl_["value"].min() < 0.75 * s.tdp:
        out.append("power_limit")
    r = df.filter(pl.col("metric").is_in([c.CLOCK_THROTTLE, c.CLOCKS_EVENT]))
    if r.height and (r["value"].cast(pl.Int64) & 0x88).max() > 0:
        out.append("reasons")
    for m, thr in ((c.PROCS_BLOCKED, 4), (c.PROCS_RUNNING, 20)):
        v = df.filter(pl.col("metric") == m)
        if v.height and v["value"].max() >= thr:
            out.append(m)
    mt = df.filter(pl.col("metric") == c.MEM_TOTAL)
    if mt.height and mt["value"].min() < 0.97 * s.mem_gib * gib:
        out.append("memtotal")
    ma = df.filter(pl.col("metric") == c.MEM_AVAIL)
    if ma.height and ma["value"].min() < 0.06 * s.mem_gib * gib:
        out.append("memavail")
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


def _peer_power(df, node, a, z):
    p = _per_time(df, node, c.POWER, "mean")
    return p.filter((pl.col("time") >= a) & (pl.col("time") < z))["v"]


def test_pipeline_stages_constant_power_groups(J):
    j = _smallest(J, "pipeline_parallel_stage_load_groups")
    df = _raw(j)
    b = j.spec["benign"]
    w = [b["stage_work"][b["stage_of"][i]] for i in range(len(j.nodes))]
    hi = j.nodes[int(np.argmax(w))]
    lo = j.nodes[int(np.argmin(w))]
    a = _sec(j, j.spec["init_end"] + 200)
    z = j.end
    if min(w) < 0.95:
        assert _peer_power(df, lo, a, z).median() < _peer_power(df, hi, a, z).median()


def test_batch_shrink_everyone_slows(J):
    j = _smallest(J, "batch_shrink_midrun_all_nodes")
    df = _raw(j)
    at = _sec(j, j.spec["benign"]["at"])
    for n in j.nodes[:4]:
        bf = _peer_power(df, n, at - timedelta(minutes=4), at)
        af = _peer_power(df, n, at + timedelta(minutes=1), at + timedelta(minutes=10))
        if bf.len() and af.len():
            assert af.median() < bf.median() * 0.97


def test_spot_preemption_all_exit(J):
    j = _smallest(J, "spot_preemption_notice_ckpt_exit_all")
    df = _raw(j)
    b = j.spec["benign"]
    late = df.filter(
        (pl.col("metric") == c.GPU_UTIL) & (pl.col("time") > _sec(j, b["at"] + b["ckpt"] + 60))
    )
    assert late.height == 0 or late["value"].max() == 0


def test_nccl_restart_every_node_idle(J):
    j = _smallest(J, "nccl_upgrade_restart_all_ranks")
    df = _raw(j)
    b = j.spec["benign"]
    lag = c.SITES[j.site].collect + 10
    w = (pl.col("time") > _sec(j, b["at"] + lag)) & (pl.col("time") < _sec(j, b["at"] + b["idle"]))
    u = df.filter((pl.col("metric") == c.GPU_UTIL) & w)
    if u.height:
        assert u["value"].max() == 0


def test_bios_variant_offsets_small(J):
    for j in [x for x in J if x.kind == "bios_variant_small_constant_offsets"]:
        b = j.spec["benign"]
        assert 1 <= len(b["who"]) <= 3
        assert b["freq"] < 1.06 and b["pw"] < 1.03 and b["dT"] <= 3


def test_dcgm_reconfig_drops_dcp_on_every_node(J):
    j = _smallest(J, "dcgm_field_group_reconfig_all_nodes")
    df = _raw(j)
    for n, a in j.spec["benign"]["who"]:
        g = df.filter((pl.col("node") == j.nodes[n]) & (pl.col("metric") == c.PROF_GR))
        assert g.height > 0 and g["time"].max() < _sec(j, a)
        assert (
            df.filter(
                (pl.col("node") == j.nodes[n])
                & (pl.col("metric") == c.GPU_TEMP)
                & (pl.col("time") > _sec(j, a + 120))
            ).height
            > 0
        )


def test_cooling_setpoint_raises_every_gpu(J):
    j = _smallest(J, "datacenter_cooling_setpoint_raise")
    df = _raw(j)
    b = j.spec["benign"]
    at = b["at"]
    for n in j.nodes[:4]:
        t = _per_time(df, n, c.GPU_TEMP, "mean")
        bf = t.filter((pl.col("time") < _sec(j, at)) & (pl.col("time") > _sec(j, at - 240)))
        af = t.filter(pl.col("time") > _sec(j, at + b["ramp"] + 120))
        if bf.height and af.height:
            assert af["v"].median() > bf["v"].median() + 1.5


def test_site_specifics(J):
    by = sorted(J, key=_est)

    def ms(site):
        j = next(x for x in by if x.site == site)
        return set(_raw(j)["metric"].unique()), _raw(j)

    m, df = ms("obm")
    assert c.ET_DISCARDS in m and c.IB_OOS in m and c.PROF_GR in m
    assert df.filter(pl.col("metric") == c.IB_RATE)["device"].n_unique() == 16
    assert df.filter(pl.col("metric") == c.ET_DISCARDS)["device"].n_unique() == 16
    m, df = ms("nbi")
    assert c.IB_STATE in m and c.HWMON_TEMP not in m and c.EDAC_CE not in m
    assert "steal" in set(df.filter(pl.col("metric") == c.CPU_SECONDS)["device"].unique())
    m, df = ms("sph")
    assert c.IB_XMIT_WAIT in m and c.NVL_RECOVERY in m and c.EDAC_CE in m
    assert "mlx5_11:1" in set(df.filter(pl.col("metric") == c.IB_RATE)["device"].unique())
    m, df = ms("p1e")
    assert c.NVLINK_BW not in m and c.PROF_GR not in m and c.RET_PEND in m
    assert c.PSI_CPU not in m and c.UNC_REMAP not in m and c.MEMORY_TEMP not in m
    assert df.filter(pl.col("metric") == c.IB_RATE)["value"].max() == 12.5e9
    m, df = ms("a4f")
    assert not any(x.startswith(c.IB) for x in m) and c.ECC_DBE not in m and c.LINK_GEN in m
    assert df.filter(pl.col("metric") == c.GPU_TEMP)["device"].n_unique() == 4
    m, df = ms("g36")
    assert c.CLOCKS_EVENT in m and c.POWER_VIOL in m and c.FB_RESERVED in m
    assert "arch_sys_counter" in set(df.filter(pl.col("metric") == c.CLOCKSOURCE)["device"])


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
