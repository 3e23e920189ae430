"""Sanity tests of corpus v15 itself (never of a detector).

Run with ``pytest --noconftest tests/metrics/test_corpus_v15_sanity.py -q``.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import numpy as np
import polars as pl
import pytest

from . import corpus_v15 as c
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


def _v_crc(j, df, node, on):
    d = _delta_at(df, node, c.NVL_CRC, on, "max")
    return d is not None and d >= 1


def _v_memclk(j, df, node, on):
    v = _value_at(df, node, c.MEM_CLOCK, on, "min")
    return v is not None and v < 0.9 * c.SITES[j.site].mem_clk


def _v_ib_width(j, df, node, on):
    v = _value_at(df, node, c.IB_RATE, on, "min")
    return v is not None and v < 0.9 * c.SITES[j.site].ib_rate


def _v_hws(j, df, node, on):
    return _reason_bits(df, node, on, 0x8)


def _v_brake(j, df, node, on):
    return _reason_bits(df, node, on, 0x80)


def _v_discards(j, df, node, on):
    d = _delta_at(df, node, c.ET_DISCARDS, on, "max")
    return d is not None and d >= 20


def _v_io_now(j, df, node, on):
    v = _value_at(df, node, c.DISK_IO_NOW, on)
    return v is not None and v >= 4


def _v_running(j, df, node, on):
    v = _value_at(df, node, c.PROCS_RUNNING, on)
    return v is not None and v >= 20


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


_VISIBLE = {
    "nvlink_crc_flit_storm_one_gpu": _v_crc,
    "gpu_memclk_stuck_low_pstate": _v_memclk,
    "ib_port_width_degrade_4x_to_1x": _v_ib_width,
    "chassis_fan_fail_bmc_hw_slowdown": _v_hws,
    "psu_redundancy_lost_power_brake_held": _v_brake,
    "xid48_dbe_rank_abort_hang": _v_xid(48),
    "xid74_nvlink_error_rank_abort_hang": _v_xid(74),
    "roce_rx_discards_phy_port_drops": _v_discards,
    "local_nvme_read_latency_loader_starve": _v_io_now,
    "runaway_daemon_cpu_straggler_host": _v_running,
    "gpu_fell_off_bus_xid79_rank_lost_v15": _v_xid(79),
    "row_remap_event_xid63_no_slowdown_v15": _v_xid(63),
    "gpu_power_limit_stuck_low_one_gpu_v15": _v_power_limit,
    "sm_clock_locked_leftover_lgc_v15": _v_lgc,
    "orphan_process_prev_job_gpu_mem_cpu_v15": _v_orphan,
}
# present from the node's first sample: there is no "before"
_NO_PREV = ("sm_clock_locked_leftover_lgc_v15", "orphan_process_prev_job_gpu_mem_cpu_v15")
_NODE_EVIDENCE = (
    "ib_port_width_degrade_4x_to_1x",
    "roce_rx_discards_phy_port_drops",
    "local_nvme_read_latency_loader_starve",
    "runaway_daemon_cpu_straggler_host",
)


# ---------------------------------------------------------------------------------------------
# API, determinism, schema
# ---------------------------------------------------------------------------------------------


def test_api_constants():
    assert len(c.FAULT_KINDS) == 15 and len(c.BENIGN_KINDS) == 10
    assert not set(c.FAULT_KINDS) & set(c.BENIGN_KINDS)
    assert c.RATE_VALUED_COUNTERS <= c.COUNTER_METRICS
    assert c.is_counter("node_cpu_seconds_total") and not c.is_counter("DCGM_FI_DEV_GPU_TEMP")
    assert c.is_counter(c.ET_DISCARDS) and c.is_counter(c.NVL_CRC) and c.is_counter(c.ECC_DBE)
    assert not c.is_counter(c.IB_RATE) and not c.is_counter(c.DISK_IO_NOW)
    assert set(c.SITES) == {"b2x", "cwh", "l4e", "h2s", "v1s", "a1v"}
    assert c.ROW_CAP == 5.45e6
    assert set(_VISIBLE) == set(c.FAULT_KINDS)


def test_kind_names_are_new():
    old = _OLDER_KINDS.union(
        V9_FAULTS, V9_BENIGN, V10_FAULTS, V10_BENIGN, V11_FAULTS, V11_BENIGN, V12_FAULTS
    ).union(V12_BENIGN, V13_FAULTS, V13_BENIGN, V14_FAULTS, V14_BENIGN)
    for k in c.FAULT_KINDS + c.BENIGN_KINDS:
        assert k not in old, k
    reused = [k for k in c.FAULT_KINDS if k.endswith("_v15")]
    assert len(reused) == 5 and all(k[: -len("_v15")] in V14_FAULTS for k in reused)
    assert len(c.FAULT_KINDS) - len(reused) >= 10 and len(c.BENIGN_KINDS) >= 8
    used = {
        *("gb3", "efa", "a3g", "h1n", "rtx", "a4h"),
        *("h20", "dgx", "ndv", "oci", "l4s", "gh2"),
        *("b2h", "gbr", "h2r", "a8c", "v1c", "ckw"),
        *("g3n", "h4p", "a4o", "l2c", "bsx", "lcw"),
        *("h2o", "a8u", "h8r", "l4x", "hsn", "hnv"),
        *("p5x", "a3t", "g72", "a4s", "hpl", "r6k"),
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
    assert {(j.dcgm_interval, j.node_interval) for j in J} >= {(15.0, 15.0), (60.0, 60.0)}
    for j in J:
        assert j.faulty == (j.kind in c.FAULT_KINDS)
        assert set(j.culprits) <= set(j.nodes)
        assert len(set(j.nodes)) == len(j.nodes)
        assert j.name.startswith("v15-") and j.site in j.name


def test_kinds_on_sites_that_can_show_them(J):
    for j in J:
        s = c.SITES[j.site]
        if j.kind == "nvlink_crc_flit_storm_one_gpu":
            assert c.NVL_CRC in s.fields
        if j.kind == "ib_port_width_degrade_4x_to_1x":
            assert s.ib and not s.roce
        if j.kind in ("chassis_fan_fail_bmc_hw_slowdown", "psu_redundancy_lost_power_brake_held"):
            assert s.reasons is not None
        if j.kind == "xid74_nvlink_error_rank_abort_hang":
            assert s.nvl_bw > 0
        if j.kind == "roce_rx_discards_phy_port_drops":
            assert c.ET_DISCARDS in s.ethtool
        if j.kind == "row_remap_event_xid63_no_slowdown_v15":
            assert c.COR_REMAP in s.fields
        if j.kind == "dcgm_exporter_version_skew_subset":
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
    for kind in (
        "gpu_fell_off_bus_xid79_rank_lost_v15",
        "xid48_dbe_rank_abort_hang",
        "xid74_nvlink_error_rank_abort_hang",
    ):
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


def test_xid79_gpu_fields_vanish_but_xid_stays(J):
    j = _smallest(J, "gpu_fell_off_bus_xid79_rank_lost_v15")
    df = _raw(j)
    (cul,) = list(j.culprits)
    on = j.culprits[cul]
    g = str(j.spec["fault"]["gpu"][j.nodes.index(cul)])
    after = df.filter((pl.col("node") == cul) & (pl.col("device") == g) & (pl.col("time") >= on))
    assert set(after["metric"].unique()) == {c.XID}


def test_xid48_counts_a_dbe_where_exported(J):
    for j in [x for x in J if x.kind == "xid48_dbe_rank_abort_hang"]:
        if c.ECC_DBE not in c.SITES[j.site].fields or _est(j) > 2e6:
            continue
        df = _raw(j)
        (cul,) = list(j.culprits)
        d = _per_time(df, cul, c.ECC_DBE, "sum")["v"].to_numpy()
        assert d[-1] - d[0] == 1, j.name


def test_slow_culprit_slows_everyone(J):
    """Throughput-like metrics move together: a peer's power drops after the onset."""
    for kind in (
        "ib_port_width_degrade_4x_to_1x",
        "psu_redundancy_lost_power_brake_held",
        "local_nvme_read_latency_loader_starve",
        "runaway_daemon_cpu_straggler_host",
        "gpu_memclk_stuck_low_pstate",
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
    for kind in ("nvlink_crc_flit_storm_one_gpu", "gpu_memclk_stuck_low_pstate"):
        j = _smallest(J, kind)
        df = _raw(j)
        cul, on = min(j.culprits.items(), key=lambda kv: kv[1])
        g = str(j.spec["fault"]["gpu"][j.nodes.index(cul)])
        u = _series(df, cul, c.GPU_UTIL, g).filter(
            (pl.col("time") > on) & (pl.col("time") < on + timedelta(minutes=10))
        )
        if u.height:
            assert u["value"].median() >= 95


def test_no_slowdown_kind_keeps_pace(J):
    j = _smallest(J, "row_remap_event_xid63_no_slowdown_v15")
    df = _raw(j)
    cul = next(iter(j.culprits))
    on = j.culprits[cul]
    u = _per_time(df, cul, c.GPU_UTIL, "min").filter(
        (pl.col("time") > on) & (pl.col("time") < on + timedelta(minutes=5))
    )
    assert u.height == 0 or u["v"].median() >= 95


def test_chassis_fan_warms_the_culprit(J):
    j = _smallest(J, "chassis_fan_fail_bmc_hw_slowdown")
    df = _raw(j)
    (cul,) = list(j.culprits)
    on = j.culprits[cul]
    t = _per_time(df, cul, c.GPU_TEMP, "mean")
    pre = t.filter((pl.col("time") < on) & (pl.col("time") > on - timedelta(minutes=3)))
    post = t.filter(pl.col("time") > on + timedelta(minutes=8))
    assert post["v"].max() > pre["v"].median() + 3


def test_lgc_and_orphan_from_first_sample(J):
    for kind in ("sm_clock_locked_leftover_lgc_v15", "orphan_process_prev_job_gpu_mem_cpu_v15"):
        for j in sorted((x for x in J if x.kind == kind), key=_est)[:2]:
            df = _raw(j)
            for node, on in j.culprits.items():
                first = df.filter(pl.col("node") == node)["time"].min()
                if kind == "sm_clock_locked_leftover_lgc_v15":
                    first = _series(df, node, c.SM_CLOCK)["time"].min()
                assert on == first, j.name


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
    x = df.filter((pl.col("metric") == c.XID) & pl.col("value").is_in([48.0, 63.0, 74.0, 79.0]))
    if x.height:
        out.append("xid")
    for m in (c.COR_REMAP, c.ECC_DBE, c.RET_DBE, c.NVL_RECOVERY, c.NVL_CRC, c.VM_OOM):
        d = (
            df.filter(pl.col("metric") == m)
            .group_by("node", "device")
            .agg((pl.col("value").max() - pl.col("value").min()).alias("d"))
        )
        if d.height and d["d"].max() > 0:
            out.append(m)
    mc = df.filter(pl.col("metric") == c.MEM_CLOCK)
    if mc.height and mc["value"].min() < 0.9 * s.mem_clk:
        out.append("memclk")
    ir = df.filter(pl.col("metric") == c.IB_RATE)
    if ir.height and ir["value"].min() < 0.9 * s.ib_rate:
        out.append("ib_rate")
    pl_ = df.filter(pl.col("metric") == c.POWER_LIMIT)
    if pl_.height and pl_["value"].min() < 0.9 * s.tdp:
        out.append("power_limit")
    r = df.filter(pl.col("metric").is_in([c.CLOCK_THROTTLE, c.CLOCKS_EVENT]))
    if r.height and (r["value"].cast(pl.Int64) & 0x88).max() > 0:
        out.append("reasons")
    io = df.filter(pl.col("metric") == c.DISK_IO_NOW)
    if io.height and io["value"].max() >= 4:
        out.append("io_now")
    pr = df.filter(pl.col("metric") == c.PROCS_RUNNING)
    if pr.height and pr["value"].max() >= 20:
        out.append("running")
    if s.ethtool and _max_delta(df, c.ET_DISCARDS) >= 20:
        out.append("discards")
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


def test_rank0_eval_rank0_differs_peers_wait(J):
    j = _smallest(J, "rank0_eval_phase_peers_wait")
    df = _raw(j)
    a, z = j.spec["benign"]["evals"][0]
    w = (pl.col("time") > _sec(j, a + 60)) & (pl.col("time") < _sec(j, z - 10))
    p0 = _per_time(df, j.nodes[0], c.POWER, "mean").filter(w)
    p1 = _per_time(df, j.nodes[1], c.POWER, "mean").filter(w)
    u1 = _per_time(df, j.nodes[1], c.GPU_UTIL, "min").filter(w)
    if p0.height and p1.height:
        assert p0["v"].median() > p1["v"].median()
        assert u1["v"].min() >= 99


def test_prometheus_outage_no_rows_on_any_node(J):
    for j in [x for x in J if x.kind == "prometheus_server_outage_all_nodes"][:3]:
        if _est(j) > 2e6:
            continue
        df = _raw(j)
        for a, z in j.spec["benign"]["gaps"]:
            inside = df.filter((pl.col("time") >= _sec(j, a)) & (pl.col("time") < _sec(j, z)))
            assert inside.height == 0, j.name
        assert df["node"].n_unique() == len(j.nodes)


def test_dcgm_restart_gap_only_dcgm(J):
    j = _smallest(J, "single_node_dcgm_exporter_restart")
    df = _raw(j)
    for n, a, d in j.spec["benign"]["who"]:
        w = (pl.col("time") >= _sec(j, a)) & (pl.col("time") < _sec(j, a + d))
        node = df.filter((pl.col("node") == j.nodes[n]) & w)
        assert node.filter(pl.col("metric").str.starts_with("DCGM_")).height == 0
        if d > 2 * j.node_interval:
            assert node.filter(pl.col("metric") == c.LOAD1).height > 0


def test_drained_nodes_stop_after_training(J):
    for j in [x for x in J if x.kind == "planned_drain_after_job_end"][:3]:
        if _est(j) > 2.5e6:
            continue
        df = _raw(j)
        b = j.spec["benign"]
        last = df.group_by("node").agg(pl.col("time").max().alias("t"))
        for n, t in b["drain"].items():
            lt = last.filter(pl.col("node") == j.nodes[n])["t"][0]
            assert _sec(j, b["train_end"]) < lt < _sec(j, t + 0.5)
        u = df.filter(
            (pl.col("metric") == c.GPU_UTIL) & (pl.col("time") > _sec(j, b["train_end"] + 60))
        )
        assert u.height == 0 or u["value"].max() == 0


def test_static_offsets_nodes_run_warmer(J):
    j = _smallest(J, "per_node_static_sensor_offsets")
    df = _raw(j)
    who = [j.nodes[i] for i in j.spec["benign"]["who"]]
    e = (
        df.filter(pl.col("metric") == c.GPU_TEMP)
        .group_by("node")
        .agg(pl.col("value").mean())
        .with_columns(pl.col("node").is_in(who).alias("w"))
    )
    if not e["w"].all():
        assert e.filter(pl.col("w"))["value"].mean() > e.filter(~pl.col("w"))["value"].mean()


def test_version_skew_other_field_name(J):
    j = _smallest(J, "dcgm_exporter_version_skew_subset")
    df = _raw(j)
    s = c.SITES[j.site]
    other = c.CLOCKS_EVENT if s.reasons == c.CLOCK_THROTTLE else c.CLOCK_THROTTLE
    who = {j.nodes[i] for i in j.spec["benign"]["who"]}
    got = set(df.filter(pl.col("metric") == other)["node"].unique())
    assert got == who


def test_nccl_retune_all_ranks_restart(J):
    j = _smallest(J, "nccl_env_retune_restart_midjob")
    df = _raw(j)
    b = j.spec["benign"]
    w = (pl.col("time") > _sec(j, b["at"] + 30)) & (pl.col("time") < _sec(j, b["at"] + 100))
    u = df.filter((pl.col("metric") == c.GPU_UTIL) & w)
    if u.height:
        assert u["value"].max() < 95


def test_long_checkpoints(J):
    for j in [x for x in J if x.kind == "jobwide_long_sync_ckpt_pauses"]:
        assert j.spec["ckpt"] and all(z - a >= 120 for a, z in j.spec["ckpt"])


def test_site_specifics(J):
    by = sorted(J, key=_est)

    def ms(site):
        j = next(x for x in by if x.site == site)
        return set(_raw(j)["metric"].unique()), _raw(j)

    m, df = ms("a1v")
    assert c.CLOCK_THROTTLE not in m and c.CLOCKS_EVENT not in m and c.POWER_LIMIT not in m
    assert not any(x.startswith(c.IB) for x in m) and c.PSI_CPU not in m and c.TCP_RETRANS not in m
    assert c.FB_RESERVED in m and c.PROF_GR in m
    assert "steal" in set(df.filter(pl.col("metric") == c.CPU_SECONDS)["device"].unique())
    m, _ = ms("v1s")
    assert c.RET_SBE in m and c.COR_REMAP not in m and c.PROF_GR not in m and c.PSI_CPU not in m
    m, _ = ms("l4e")
    assert c.LINK_GEN in m and c.ET_DISCARDS in m and c.MEMORY_TEMP not in m
    assert c.NVLINK_BW not in m
    m, df = ms("b2x")
    assert c.CLOCKS_EVENT in m and c.POWER_VIOL in m and c.IB_OOS in m
    assert df.filter(pl.col("metric") == c.IB_RATE)["device"].n_unique() == 8
    m, df = ms("cwh")
    assert c.IB_SYMBOL in m and df.filter(pl.col("metric") == c.NET_UP)["device"].n_unique() == 1
    m, df = ms("h2s")
    assert c.ET_TX_PAUSE_DUR in m and c.POWER_VIOL in m
    assert df.filter(pl.col("metric") == c.ET_DISCARDS)["device"].n_unique() == 8


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
