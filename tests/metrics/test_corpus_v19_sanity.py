"""Sanity tests of corpus v19 itself (never of a detector).

Run with ``pytest --noconftest tests/metrics/test_corpus_v19_sanity.py -q``.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import numpy as np
import polars as pl
import pytest

from . import corpus_v19 as c
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
from .corpus_v17 import BENIGN_KINDS as V17_BENIGN
from .corpus_v17 import FAULT_KINDS as V17_FAULTS

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


_OLDER_KINDS = _OLDER_KINDS.union(V9_FAULTS, V9_BENIGN, V10_FAULTS, V10_BENIGN, V11_FAULTS)
_OLDER_KINDS = _OLDER_KINDS.union(V11_BENIGN, V12_FAULTS, V12_BENIGN, V13_FAULTS, V13_BENIGN)
_OLDER_KINDS = _OLDER_KINDS.union(V14_FAULTS, V14_BENIGN, V15_FAULTS, V15_BENIGN, V16_FAULTS)
_OLDER_KINDS = _OLDER_KINDS.union(V16_BENIGN, V17_FAULTS, V17_BENIGN)


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


def _v_width(j, df, node, on):
    v = _value_at(df, node, c.LINK_WIDTH, on, "min")
    return v is not None and v < 16


def _v_missing(j, df, node, on):
    """The host answers no scrape from ``on`` on."""
    return df.filter((pl.col("node") == node) & (pl.col("time") >= on)).height == 0


def _v_crc(j, df, node, on):
    d = _delta_at(df, node, c.NVL_CRC, on, "max")
    return d is not None and d >= 1


def _v_downed(j, df, node, on):
    d = _delta_at(df, node, c.IB_DOWNED, on, "max")
    return d is not None and d >= 1


def _v_hbm_hot(j, df, node, on):
    return _reason_bits(df, node, on, 0x40)


def _v_ib_rate(j, df, node, on):
    v = _value_at(df, node, c.IB_RATE, on, "min")
    return v is not None and v < c.SITES[j.site].ib_rate


def _v_prochot(j, df, node, on):
    d = _delta_at(df, node, c.CPU_PKG_THROTTLE, on, "sum")
    return d is not None and d >= 1


def _v_edac_ue(j, df, node, on):
    v = _value_at(df, node, c.EDAC_UE, on)
    return v is not None and v >= 1


def _v_disk_queue(j, df, node, on):
    v = _value_at(df, node, c.DISK_IO_NOW, on)
    return v is not None and v >= 16


def _v_remap_fail(j, df, node, on):
    v = _value_at(df, node, c.REMAP_FAIL, on)
    return v is not None and v >= 1


def _v_p8(j, df, node, on):
    s = c.SITES[j.site]
    f = df.filter(
        (pl.col("node") == node) & (pl.col("time") == on) & (pl.col("metric") == c.SM_CLOCK)
    )
    if f.height == 0:
        return False
    return f["value"].min() < 0.5 * s.sm_max and f["value"].max() > 0.8 * s.sm_max


def _v_brake(j, df, node, on):
    return _reason_bits(df, node, on, 0x80)


def _v_memavail(j, df, node, on):
    v = _value_at(df, node, c.MEM_AVAIL, on)
    return v is not None and v < 0.06 * c.SITES[j.site].mem_gib * 1024.0**3


_VISIBLE = {
    "pcie_width_downtrain_x16_to_x8_gpu_nic_path_slow": _v_width,
    "xid79_gpu_off_bus_rank_dies_peers_hang": _v_xid(79),
    "host_hard_lockup_both_exporters_silent_hang": _v_missing,
    "nvlink_crc_flit_storm_lane_degraded_gpu": _v_crc,
    "aoc_cable_flap_link_down_blips_stall": _v_downed,
    "hbm_hotspot_hw_thermal_0x40_one_gpu": _v_hbm_hot,
    "ib_port_width_4x_to_1x_rate_quarter": _v_ib_rate,
    "cpu_prochot_package_throttle_loader_starve": _v_prochot,
    "host_dram_ue_sigbus_rank_abort_hang": _v_edac_ue,
    "nvme_cache_disk_failing_queue_saturated": _v_disk_queue,
    "row_remap_failure_xid64_gpu_slow_v19": _v_remap_fail,
    "gpu_intermittent_p8_drop_episodes_v19": _v_p8,
    "psu_loss_power_brake_bursts_node_v19": _v_brake,
    "kswapd_memory_thrash_loader_starve_host_v19": _v_memavail,
}
_MISSING = ("host_hard_lockup_both_exporters_silent_hang",)
_NODE_EVIDENCE = (
    "aoc_cable_flap_link_down_blips_stall",
    "ib_port_width_4x_to_1x_rate_quarter",
    "cpu_prochot_package_throttle_loader_starve",
    "host_dram_ue_sigbus_rank_abort_hang",
    "nvme_cache_disk_failing_queue_saturated",
    "kswapd_memory_thrash_loader_starve_host_v19",
)
_HANGS = (
    "xid79_gpu_off_bus_rank_dies_peers_hang",
    "host_hard_lockup_both_exporters_silent_hang",
    "host_dram_ue_sigbus_rank_abort_hang",
)
_SITE_KEYS = {"p4d", "dgb", "d1v", "a8e", "jgh", "hpt"}
_HOST_PREFIX = {
    "p4d": "ip-10-1-",
    "dgb": "dgxb200-",
    "d1v": "dgx1-",
    "a8e": "a100-r",
    "jgh": "gh-c",
    "hpt": "vm-h100p-",
}


# ---------------------------------------------------------------------------------------------
# API, determinism, schema
# ---------------------------------------------------------------------------------------------


def test_api_constants():
    assert len(c.FAULT_KINDS) == 14 and len(c.BENIGN_KINDS) == 8
    assert not set(c.FAULT_KINDS) & set(c.BENIGN_KINDS)
    assert c.RATE_VALUED_COUNTERS <= c.COUNTER_METRICS
    assert c.is_counter("node_cpu_seconds_total") and not c.is_counter("DCGM_FI_DEV_GPU_TEMP")
    assert c.is_counter(c.NVL_CRC) and c.is_counter(c.IB_DOWNED) and c.is_counter(c.EDAC_UE)
    assert c.is_counter(c.CPU_PKG_THROTTLE) and c.is_counter(c.NET_CARRIER)
    assert not c.is_counter(c.DISK_IO_NOW) and not c.is_counter(c.LINK_WIDTH)
    assert not c.is_counter(c.IB_RATE) and not c.is_counter(c.XID)
    assert set(c.SITES) == _SITE_KEYS
    assert c.ROW_CAP == 5.45e6
    assert set(_VISIBLE) == set(c.FAULT_KINDS)
    for name in ("jobs", "table", "aggregate", "_estimate_rows", "Job", "BENIGN_KINDS"):
        assert hasattr(c, name)
    fields = set(c.Job.__dataclass_fields__)
    assert fields == {
        "name",
        "kind",
        "nodes",
        "start",
        "end",
        "culprits",
        "dcgm_interval",
        "node_interval",
        "site",
        "spec",
    }


def test_kind_names_are_new():
    for k in c.FAULT_KINDS + c.BENIGN_KINDS:
        assert k not in _OLDER_KINDS, k
    reused = [k for k in c.FAULT_KINDS if k.endswith("_v19")]
    v17 = set(V17_FAULTS)
    assert len(reused) == 4 and all(k[: -len("_v19")] in v17 for k in reused)
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
        *("obm", "nbi", "sph", "p1e", "a4f", "g36"),
        *("azh", "l40", "a1p", "sxe", "b3u", "a8k"),
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
    assert sum(n == 2 for n in sizes) >= 10 and sum(3 <= n <= 4 for n in sizes) >= 10
    assert sum(n >= 192 for n in sizes) >= 6
    for k in c.FAULT_KINDS + c.BENIGN_KINDS:
        assert sum(j.kind == k for j in J) >= 4, k
    ivs = {(j.dcgm_interval, j.node_interval) for j in J}
    assert ivs >= {(15.0, 15.0), (30.0, 30.0), (60.0, 60.0), (10.0, 15.0)}
    for j in J:
        assert j.faulty == (j.kind in c.FAULT_KINDS)
        assert set(j.culprits) <= set(j.nodes)
        assert len(set(j.nodes)) == len(j.nodes)
        assert j.name.startswith("v19-") and j.site in j.name
        assert all(n.startswith(_HOST_PREFIX[j.site]) for n in j.nodes), j.name


def test_kinds_on_sites_that_can_show_them(J):
    for j in J:
        s = c.SITES[j.site]
        if j.kind == "pcie_width_downtrain_x16_to_x8_gpu_nic_path_slow":
            assert c.LINK_WIDTH in s.fields
        if j.kind == "nvlink_crc_flit_storm_lane_degraded_gpu":
            assert c.NVL_CRC in s.fields and s.nvl_bw > 0
        if j.kind == "aoc_cable_flap_link_down_blips_stall":
            assert c.IB_DOWNED in s.ib_extra
        if j.kind == "hbm_hotspot_hw_thermal_0x40_one_gpu":
            assert c.MEMORY_TEMP in s.fields and s.reasons is not None
        if j.kind == "ib_port_width_4x_to_1x_rate_quarter":
            assert s.ib and not s.roce
        if j.kind == "cpu_prochot_package_throttle_loader_starve":
            assert "thermal" in s.collectors and not s.arm and not s.vm
        if j.kind == "host_dram_ue_sigbus_rank_abort_hang":
            assert "edac" in s.collectors and not s.vm
        if j.kind == "row_remap_failure_xid64_gpu_slow_v19":
            assert c.REMAP_FAIL in s.fields
        if j.kind == "mixed_hbm_sku_nodes_bigger_fb_faster_memclk":
            assert s.key in ("p4d", "jgh")


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
        if j.kind in _MISSING:
            before = df.filter((pl.col("node") == node) & (pl.col("time") < on))
            assert before.height > 0, (j.name, node, "no sample before going silent")
            assert _v_missing(j, df, node, on), (j.name, node, on)
            continue
        rows = df.filter((pl.col("node") == node) & (pl.col("time") == on))
        assert rows.height > 0, (j.name, node, "onset is not a sample of the culprit")
        assert _VISIBLE[j.kind](j, df, node, on), (j.name, node, on)
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


def test_lockup_host_silent_peers_keep_reporting(J):
    for j in [x for x in J if x.kind in _MISSING]:
        if _est(j) > 2.5e6:
            continue
        df = _raw(j)
        (cul,) = list(j.culprits)
        on = j.culprits[cul]
        assert df.filter((pl.col("node") == cul) & (pl.col("time") >= on)).height == 0
        peer = next(n for n in j.nodes if n != cul)
        assert df.filter((pl.col("node") == peer) & (pl.col("time") > on)).height > 0


def test_xid79_gpu_fields_vanish_but_xid_stays(J):
    j = _smallest(J, "xid79_gpu_off_bus_rank_dies_peers_hang")
    df = _raw(j)
    (cul,) = list(j.culprits)
    on = j.culprits[cul]
    g = str(j.spec["fault"]["gpu"][j.nodes.index(cul)])
    after = df.filter((pl.col("node") == cul) & (pl.col("device") == g) & (pl.col("time") > on))
    assert set(after["metric"].unique()) == {c.XID}
    assert after["value"].min() == 79


def _pace(j) -> float:
    p = j.spec["fault"].get("pace", 0.0)
    return min(p.values()) if isinstance(p, dict) else p


def test_slow_culprit_slows_everyone(J):
    """Throughput-like metrics move together: a peer's power drops after the onset."""
    for kind in (
        "pcie_width_downtrain_x16_to_x8_gpu_nic_path_slow",
        "hbm_hotspot_hw_thermal_0x40_one_gpu",
        "ib_port_width_4x_to_1x_rate_quarter",
        "cpu_prochot_package_throttle_loader_starve",
        "nvme_cache_disk_failing_queue_saturated",
        "row_remap_failure_xid64_gpu_slow_v19",
        "kswapd_memory_thrash_loader_starve_host_v19",
    ):
        # a downtrained link that still carries the GPU's peak traffic costs nothing
        js = [x for x in J if x.kind == kind and _pace(x) < 0.95]
        j = min(js, key=_est)
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


def test_lockstep_traffic_equal_on_degraded_port(J):
    """Every rail moves the same bytes per step: the quarter-rate port's traffic is not lower
    than its node's other ports (nor than a peer's)."""
    j = _smallest(J, "ib_port_width_4x_to_1x_rate_quarter")
    df = _raw(j)
    cul, on = min(j.culprits.items(), key=lambda kv: kv[1])
    s = c.SITES[j.site]
    p = s.ib[j.spec["fault"]["port"][j.nodes.index(cul)]]
    late = (pl.col("time") > on + timedelta(minutes=2)) & (
        pl.col("time") < on + timedelta(minutes=12)
    )
    tx = df.filter((pl.col("node") == cul) & (pl.col("metric") == c.IB_TX) & late)
    r = (
        tx.sort("time")
        .group_by("device")
        .agg(((pl.col("value").last() - pl.col("value").first()) / pl.len()).alias("r"))
    )
    mine = float(r.filter(pl.col("device") == p)["r"][0])
    others = r.filter(pl.col("device") != p)["r"]
    assert 0.85 * others.median() < mine < 1.15 * others.median()


def test_culprit_bottleneck_stays_busy(J):
    for kind in ("hbm_hotspot_hw_thermal_0x40_one_gpu", "row_remap_failure_xid64_gpu_slow_v19"):
        j = _smallest(J, kind)
        df = _raw(j)
        cul, on = min(j.culprits.items(), key=lambda kv: kv[1])
        g = str(j.spec["fault"]["gpu"][j.nodes.index(cul)])
        u = _series(df, cul, c.GPU_UTIL, g).filter(
            (pl.col("time") > on) & (pl.col("time") < on + timedelta(minutes=10))
        )
        if u.height:
            assert u["value"].median() >= 95, j.name


def test_hbm_hotspot_memory_runs_hot(J):
    j = _smallest(J, "hbm_hotspot_hw_thermal_0x40_one_gpu")
    df = _raw(j)
    cul, on = min(j.culprits.items(), key=lambda kv: kv[1])
    g = str(j.spec["fault"]["gpu"][j.nodes.index(cul)])
    m = _series(df, cul, c.MEMORY_TEMP, g).filter(pl.col("time") >= on + timedelta(minutes=3))
    o = df.filter(
        (pl.col("node") == cul)
        & (pl.col("metric") == c.MEMORY_TEMP)
        & (pl.col("device") != g)
        & (pl.col("time") >= on + timedelta(minutes=3))
    )
    if m.height and o.height:
        assert m["value"].median() > o["value"].median() + 12


def test_crc_storm_rate(J):
    j = _smallest(J, "nvlink_crc_flit_storm_lane_degraded_gpu")
    df = _raw(j)
    (cul,) = list(j.culprits)
    g = str(j.spec["fault"]["gpu"][j.nodes.index(cul)])
    e = _series(df, cul, c.NVL_CRC, g)
    assert e["value"].max() - e["value"].min() >= 10 * 60 * 0.5


def test_flaps_counted(J):
    for j in [x for x in J if x.kind == "aoc_cable_flap_link_down_blips_stall"]:
        if _est(j) > 2.5e6:
            continue
        df = _raw(j)
        (cul,) = list(j.culprits)
        f = j.spec["fault"]
        i = j.nodes.index(cul)
        dev = c.SITES[j.site].ib[f["port"][i]]
        e = _series(df, cul, c.IB_DOWNED, dev)
        last = (e["time"].max() - j.start).total_seconds()
        seen = sum(1 for a in f["flaps"] if a <= last)
        assert e["value"].max() - e["value"].min() == seen
        assert len(f["flaps"]) >= 1 and all(5 <= s_ <= 20 for s_ in f["stall"])


def test_pcie_link_gen_idle_downshift(J):
    j = next(
        x for x in sorted(J, key=_est) if not x.faulty and c.LINK_GEN in c.SITES[x.site].fields
    )
    df = _raw(j)
    s = c.SITES[j.site]
    g = df.filter(pl.col("metric") == c.LINK_GEN)
    early = g.filter(pl.col("time") < _sec(j, 8))
    mid = g.filter(pl.col("time") > _sec(j, j.spec["init_end"] + 200))
    if early.height:
        assert early["value"].max() == 1
    assert mid["value"].max() == s.pcie_gen
    w = df.filter(pl.col("metric") == c.LINK_WIDTH)
    assert w["value"].min() == 16


def test_episode_kinds_episodes_are_short(J):
    for kind in ("gpu_intermittent_p8_drop_episodes_v19", "psu_loss_power_brake_bursts_node_v19"):
        for j in [x for x in J if x.kind == kind]:
            (cul,) = list(j.culprits)
            eps = j.spec["fault"]["eps"][j.nodes.index(cul)]
            assert len(eps) >= 2
            assert all(15 <= z - a <= 120 for a, z in eps)
            on = (j.culprits[cul] - j.start).total_seconds()
            assert any(a <= on < z + j.dcgm_interval + 1 for a, z in eps), j.name


def test_nvme_disk_saturated(J):
    j = _smallest(J, "nvme_cache_disk_failing_queue_saturated")
    df = _raw(j)
    cul, on = min(j.culprits.items(), key=lambda kv: kv[1])
    io = _series(df, cul, c.DISK_IO).filter(pl.col("time") > on)
    if io.height > 2:
        dt = (io["time"][-1] - io["time"][0]).total_seconds()
        assert (io["value"][-1] - io["value"][0]) / dt > 0.95
    b = _series(df, cul, c.PROCS_BLOCKED).filter(pl.col("time") > on)
    assert b["value"].min() >= 4


def test_prochot_freq_and_temp(J):
    j = _smallest(J, "cpu_prochot_package_throttle_loader_starve")
    df = _raw(j)
    cul, on = min(j.culprits.items(), key=lambda kv: kv[1])
    s = c.SITES[j.site]
    fq = _series(df, cul, c.CPU_FREQ).filter(pl.col("time") > on)
    assert fq["value"].max() < 0.7 * s.cpu_hz


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
        if x["value"].is_in([64.0, 79.0]).any():
            out.append("xid")
        fl = x.group_by("node", "device").agg(
            pl.col("value").first().alias("a"), pl.col("value").max().alias("m")
        )
        if (fl["m"] > fl["a"]).any():
            out.append("new xid")
    for m in (c.NVL_CRC, c.IB_DOWNED, c.CPU_PKG_THROTTLE, c.ECC_DBE, c.NET_CARRIER):
        if _max_delta(df, m) > 0:
            out.append(m)
    for m in (c.REMAP_FAIL, c.EDAC_UE):
        v = df.filter(pl.col("metric") == m)
        if v.height and v["value"].max() > 0:
            out.append(m)
    w = df.filter(pl.col("metric") == c.LINK_WIDTH)
    if w.height and w["value"].min() < 16:
        out.append("width")
    r_ = df.filter(pl.col("metric") == c.IB_RATE)
    if r_.height and r_["value"].min() < s.ib_rate:
        out.append("ib_rate")
    r = df.filter(pl.col("metric").is_in([c.CLOCK_THROTTLE, c.CLOCKS_EVENT]))
    if r.height and (r["value"].cast(pl.Int64) & 0xC0).max() > 0:
        out.append("reasons")
    q = df.filter(pl.col("metric") == c.DISK_IO_NOW)
    if q.height and q["value"].max() >= 16:
        out.append("disk_queue")
    ma = df.filter(pl.col("metric") == c.MEM_AVAIL)
    if ma.height and ma["value"].min() < 0.06 * s.mem_gib * gib:
        out.append("memavail")
    last = df.group_by("node").agg(pl.col("time").max().alias("t"))
    if (last["t"] < j.end - timedelta(seconds=3 * max(j.dcgm_interval, j.node_interval))).any():
        out.append("silent node")
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


def test_rank0_eval_windows(J):
    j = _smallest(J, "rank0_node_eval_sampling_peers_barrier")
    df = _raw(j)
    a, z = j.spec["benign"]["eval"][0]
    w = (pl.col("time") > _sec(j, a + 30)) & (pl.col("time") < _sec(j, z - 5))
    other = j.nodes[1]
    u = df.filter((pl.col("node") == other) & (pl.col("metric") == c.GPU_UTIL) & w)
    if u.height:
        assert u["value"].min() >= 99
        p0 = _peer_power(df, j.nodes[0], _sec(j, a + 30), _sec(j, z - 5))
        p1 = _peer_power(df, other, _sec(j, a + 30), _sec(j, z - 5))
        assert p0.median() > p1.median() * 1.3


def test_async_uploads_staggered(J):
    j = _smallest(J, "async_ckpt_upload_staggered_per_node")
    saves = j.spec["benign"]["saves"]
    assert len({a for a, _z, _n, _r in saves}) > 1
    assert {n for _a, _z, n, _r in saves} == set(range(len(j.nodes)))


def test_rolling_exporter_restart_gaps(J):
    j = _smallest(J, "node_exporter_rolling_restart_short_gaps")
    df = _raw(j)
    for n, a, z in j.spec["benign"]["ne_gaps"][:4]:
        node = j.nodes[n]
        g = df.filter(
            (pl.col("node") == node)
            & (pl.col("metric") == c.LOAD1)
            & (pl.col("time") >= _sec(j, a))
            & (pl.col("time") < _sec(j, z))
        )
        assert g.height == 0
        d = df.filter(
            (pl.col("node") == node)
            & (pl.col("metric") == c.GPU_TEMP)
            & (pl.col("time") >= _sec(j, a))
            & (pl.col("time") < _sec(j, z))
        )
        assert d.height > 0 or z - a < j.dcgm_interval + 1


def test_mixed_sku_nodes(J):
    for j in [x for x in J if x.kind == "mixed_hbm_sku_nodes_bigger_fb_faster_memclk"][:3]:
        df = _raw(j)
        s = c.SITES[j.site]
        who = j.spec["benign"]["who"]
        assert 1 <= len(who) < len(j.nodes)
        mc = df.filter((pl.col("node") == j.nodes[who[0]]) & (pl.col("metric") == c.MEM_CLOCK))
        assert mc["value"].min() > 1.1 * s.mem_clk
        ff = df.filter((pl.col("node") == j.nodes[who[0]]) & (pl.col("metric") == c.FB_FREE))
        assert ff["value"].max() > s.fb_mib


def test_elastic_released_nodes_idle(J):
    j = _smallest(J, "elastic_shrink_released_nodes_idle")
    df = _raw(j)
    b = j.spec["benign"]
    lag = c.SITES[j.site].collect + 10
    for n in b["who"][:2]:
        u = df.filter(
            (pl.col("node") == j.nodes[n])
            & (pl.col("metric") == c.GPU_UTIL)
            & (pl.col("time") > _sec(j, b["at"] + lag))
        )
        assert u.height > 0 and u["value"].max() == 0
    stay = next(i for i in range(len(j.nodes)) if i not in b["who"])
    late = df.filter(
        (pl.col("node") == j.nodes[stay])
        & (pl.col("metric") == c.GPU_UTIL)
        & (pl.col("time") > _sec(j, b["at"] + b["idle"] + b["init"] + 200))
    )
    if late.height:
        assert late["value"].median() >= 95


def test_kineto_dump_on_one_node(J):
    j = _smallest(J, "kineto_trace_one_node_disk_dump")
    b = j.spec["benign"]
    assert 0 <= b["who"] < len(j.nodes) and 0.85 <= b["fac"] <= 0.95
    df = _raw(j)
    a, z = b["at"] + b["len"], b["at"] + b["len"] + b["dump"]

    def written(node):
        w = _series(df, node, c.DISK_W)
        w = w.filter((pl.col("time") >= _sec(j, a - 70)) & (pl.col("time") <= _sec(j, z + 70)))
        return float(w["value"].max() - w["value"].min()) if w.height > 1 else 0.0

    me = written(j.nodes[b["who"]])
    other = written(next(n for i, n in enumerate(j.nodes) if i != b["who"]))
    assert me > other + 1e9


def test_moe_wander_moves_power_per_node(J):
    j = _smallest(J, "moe_token_routing_load_wander_per_node")
    df = _raw(j)
    t0 = _sec(j, j.spec["init_end"] + 300)
    p = df.filter((pl.col("metric") == c.POWER) & (pl.col("time") > t0))
    per = p.group_by("node").agg(pl.col("value").mean().alias("m"))
    assert per["m"].max() > per["m"].min()


def test_site_specifics(J):
    by = sorted(J, key=_est)

    def ms(site):
        j = next(x for x in by if x.site == site)
        return set(_raw(j)["metric"].unique()), _raw(j)

    m, df = ms("p4d")
    assert not any(x.startswith(c.IB) for x in m) and c.NVL_CRC in m and c.LINK_WIDTH in m
    assert "steal" in set(df.filter(pl.col("metric") == c.CPU_SECONDS)["device"].unique())
    m, df = ms("dgb")
    assert c.CLOCKS_EVENT in m and c.FB_RESERVED in m and c.CPU_PKG_THROTTLE in m
    assert df.filter(pl.col("metric") == c.IB_RATE)["device"].n_unique() == 8
    m, df = ms("d1v")
    assert c.RET_PEND in m and c.UNC_REMAP not in m and c.MEMORY_TEMP not in m
    assert df.filter(pl.col("metric") == c.IB_RATE)["value"].max() == 12.5e9
    m, df = ms("a8e")
    assert c.ET_LINK_DOWN in m and c.IB_OOS in m and c.EDAC_UE in m
    assert df.filter(pl.col("metric") == c.ET_DISCARDS)["device"].n_unique() == 8
    m, df = ms("jgh")
    assert c.CLOCKS_EVENT in m and c.EDAC_CE not in m
    assert "arch_sys_counter" in set(df.filter(pl.col("metric") == c.CLOCKSOURCE)["device"])
    assert df.filter(pl.col("metric") == c.GPU_TEMP)["device"].n_unique() == 4
    m, df = ms("hpt")
    assert c.PROF_GR not in m and c.NVLINK_BW not in m and c.TCP_OUTSEGS in m
    assert not any(x.startswith(c.IB) for x in m)


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
