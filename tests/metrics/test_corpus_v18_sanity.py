"""Sanity tests of corpus v18 itself (never of a detector).

Run with ``pytest --noconftest tests/metrics/test_corpus_v18_sanity.py -q``.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import numpy as np
import polars as pl
import pytest

from . import corpus_v18 as c
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
_GIB = 1024.0**3


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


def _v_pcie_link(j, df, node, on):
    g = _value_at(df, node, c.LINK_GEN, on, "min")
    w = _value_at(df, node, c.LINK_WIDTH, on, "min")
    return g is not None and (g < c.SITES[j.site].pcie_gen or w < 16)


def _v_silent(j, df, node, on):
    """The node has no sample at or after ``on`` (it stopped answering)."""
    return df.filter((pl.col("node") == node) & (pl.col("time") >= on)).height == 0


def _v_ib_rate(j, df, node, on):
    v = _value_at(df, node, c.IB_RATE, on, "min")
    return v is not None and v < c.SITES[j.site].ib_rate


def _v_remap_fail(j, df, node, on):
    v = _value_at(df, node, c.REMAP_FAIL, on)
    return v is not None and v >= 1


def _v_memavail(j, df, node, on):
    v = _value_at(df, node, c.MEM_AVAIL, on)
    return v is not None and v < 0.06 * c.SITES[j.site].mem_gib * _GIB


_VISIBLE = {
    "pcie_link_downtrain_after_aer_one_gpu_h2d_slow": _v_pcie_link,
    "nvlink_crc_flit_burst_replays_one_gpu_slow": _v_delta(c.NVL_CRC),
    "aoc_cable_flaps_link_downed_repeats_stalls": _v_delta(c.IB_DOWNED),
    "xid79_gpu_off_bus_rows_vanish_peers_hang": _v_xid(79),
    "kernel_panic_node_silent_both_exporters_hang": _v_silent,
    "hbm_overtemp_hw_thermal_slowdown_one_gpu": lambda j, df, n, on: _reason_bits(df, n, on, 0x40),
    "mlx5_pause_storm_watchdog_port_stall": _v_delta(c.ET_STORM),
    "cpu_heatsink_pkg_throttle_loader_slow_host": _v_delta(c.CPU_PKG_THROTTLE),
    "ib_link_width_1x_rate_quarter_rail_slow": _v_ib_rate,
    "host_oom_killer_sigkills_rank_peers_hang": _v_delta(c.VM_OOM),
    "row_remap_failure_xid64_gpu_slow_v18": _v_remap_fail,
    "psu_loss_power_brake_bursts_node_v18": lambda j, df, n, on: _reason_bits(df, n, on, 0x80),
    "kswapd_memory_thrash_loader_starve_host_v18": _v_memavail,
    "air_cooled_fan_fail_hw_slowdown_one_gpu_v18": lambda j, df, n, on: _reason_bits(
        df, n, on, 0x8
    ),
}
_SILENT = ("kernel_panic_node_silent_both_exporters_hang",)
_NODE_EVIDENCE = (
    "aoc_cable_flaps_link_downed_repeats_stalls",
    "mlx5_pause_storm_watchdog_port_stall",
    "cpu_heatsink_pkg_throttle_loader_slow_host",
    "ib_link_width_1x_rate_quarter_rail_slow",
    "host_oom_killer_sigkills_rank_peers_hang",
    "kswapd_memory_thrash_loader_starve_host_v18",
)
_HANGS = (
    "xid79_gpu_off_bus_rows_vanish_peers_hang",
    "kernel_panic_node_silent_both_exporters_hang",
    "host_oom_killer_sigkills_rank_peers_hang",
)
_SITE_KEYS = {"azh", "l40", "a1p", "sxe", "b3u", "a8k"}
_HOST_PREFIX = {
    "azh": "ndh200v5-",
    "l40": "l40s-ft-",
    "a1p": "gpu-a100p-",
    "sxe": "sx-h100-r",
    "b3u": "b300-su",
    "a8k": "a800-",
}


# ---------------------------------------------------------------------------------------------
# API, determinism, schema
# ---------------------------------------------------------------------------------------------


def test_api_constants():
    assert len(c.FAULT_KINDS) == 14 and len(c.BENIGN_KINDS) == 8
    assert not set(c.FAULT_KINDS) & set(c.BENIGN_KINDS)
    assert c.RATE_VALUED_COUNTERS <= c.COUNTER_METRICS
    assert c.is_counter("node_cpu_seconds_total") and not c.is_counter("DCGM_FI_DEV_GPU_TEMP")
    for m in (c.NVL_CRC, c.IB_DOWNED, c.ET_STORM, c.CPU_PKG_THROTTLE, c.VM_OOM, c.PCIE_REPLAY):
        assert c.is_counter(m), m
    for m in (c.LINK_GEN, c.LINK_WIDTH, c.IB_RATE, c.MEM_AVAIL, c.REMAP_FAIL, c.XID):
        assert not c.is_counter(m), m
    assert set(c.SITES) == _SITE_KEYS
    assert c.ROW_CAP == 5.45e6
    assert set(_VISIBLE) == set(c.FAULT_KINDS)
    for name in ("jobs", "table", "aggregate", "_estimate_rows", "Job", "BENIGN_KINDS"):
        assert hasattr(c, name)
    assert [f.name for f in c.Job.__dataclass_fields__.values()] == [
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
    ]


def test_kind_names_are_new():
    old = _OLDER_KINDS.union(
        V9_FAULTS, V9_BENIGN, V10_FAULTS, V10_BENIGN, V11_FAULTS, V11_BENIGN, V12_FAULTS
    ).union(V12_BENIGN, V13_FAULTS, V13_BENIGN, V14_FAULTS, V14_BENIGN, V15_FAULTS, V15_BENIGN)
    old = old.union(V16_FAULTS, V16_BENIGN, V17_FAULTS, V17_BENIGN)
    for k in c.FAULT_KINDS + c.BENIGN_KINDS:
        assert k not in old, k
    reused = [k for k in c.FAULT_KINDS if k.endswith("_v18")]
    v17 = {k.removesuffix("_v17") for k in V17_FAULTS}
    assert len(reused) == 4 and all(k[: -len("_v18")] in v17 for k in reused)
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


def test_streams_differ_from_v17():
    from . import corpus_v17 as v17

    a = c.jobs(0)
    b = v17.jobs(0)
    assert [j.spec["rs"] for j in a] != [j.spec["rs"] for j in b]
    assert all(j.name.startswith("v18-") for j in a)


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
    assert sum(n == 2 for n in sizes) >= 10
    for k in c.FAULT_KINDS + c.BENIGN_KINDS:
        assert sum(j.kind == k for j in J) >= 4, k
    ivs = {(j.dcgm_interval, j.node_interval) for j in J}
    assert ivs >= {(15.0, 15.0), (30.0, 30.0), (60.0, 60.0), (10.0, 15.0)}
    for j in J:
        assert j.faulty == (j.kind in c.FAULT_KINDS)
        assert set(j.culprits) <= set(j.nodes)
        assert len(set(j.nodes)) == len(j.nodes)
        assert j.name.startswith("v18-") and j.site in j.name
        assert all(n.startswith(_HOST_PREFIX[j.site]) for n in j.nodes), j.name


def test_kinds_on_sites_that_can_show_them(J):
    for j in J:
        s = c.SITES[j.site]
        if j.kind == "pcie_link_downtrain_after_aer_one_gpu_h2d_slow":
            assert c.LINK_GEN in s.fields
        if j.kind == "nvlink_crc_flit_burst_replays_one_gpu_slow":
            assert c.NVL_CRC in s.fields and s.nvl_bw > 0
        if j.kind == "aoc_cable_flaps_link_downed_repeats_stalls":
            assert c.IB_DOWNED in s.ib_extra
        if j.kind == "hbm_overtemp_hw_thermal_slowdown_one_gpu":
            assert c.MEMORY_TEMP in s.fields
        if j.kind == "mlx5_pause_storm_watchdog_port_stall":
            assert c.ET_STORM in s.ethtool and s.roce
        if j.kind == "cpu_heatsink_pkg_throttle_loader_slow_host":
            assert "thermal" in s.collectors and not s.vm
        if j.kind == "row_remap_failure_xid64_gpu_slow_v18":
            assert c.REMAP_FAIL in s.fields
        if j.kind == "air_cooled_fan_fail_hw_slowdown_one_gpu_v18":
            assert s.key != "b3u"  # liquid-cooled
        if j.kind == "ufm_periodic_port_counter_clear_fabric":
            assert s.ib and not s.roce


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
        if j.kind in _SILENT:
            assert _v_silent(j, df, node, on), (j.name, node, "still reporting")
            before = df.filter((pl.col("node") == node) & (pl.col("time") < on))
            assert before.height > 0, (j.name, node)
            te = j.spec["culprits"][j.nodes.index(node)]
            last = before["time"].max()
            assert last < _sec(j, te + 1), (j.name, "a sample after the crash")
            gap = (on - _sec(j, te)).total_seconds()
            assert 0 <= gap <= min(j.dcgm_interval, j.node_interval) + 1, (j.name, gap)
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
    return te + sp["fault"]["kill_lag"]


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


def test_xid79_gpu_rows_vanish_but_xid_stays(J):
    j = _smallest(J, "xid79_gpu_off_bus_rows_vanish_peers_hang")
    df = _raw(j)
    (cul,) = list(j.culprits)
    on = j.culprits[cul]
    g = str(j.spec["fault"]["gpu"][j.nodes.index(cul)])
    late = pl.col("time") > on + timedelta(seconds=c.SITES[j.site].collect + 1)
    assert _series(df, cul, c.GPU_TEMP, g).filter(late).height == 0
    assert _series(df, cul, c.XID, g).filter(late)["value"].min() == 79
    other = "1" if g == "0" else "0"
    assert _series(df, cul, c.GPU_TEMP, other).filter(late).height > 0


def test_kernel_panic_peers_keep_reporting(J):
    for j in [x for x in J if x.kind == "kernel_panic_node_silent_both_exporters_hang"]:
        if _est(j) > 2e6:
            continue
        df = _raw(j)
        (cul,) = list(j.culprits)
        on = j.culprits[cul]
        for p in [n for n in j.nodes if n != cul][:3]:
            assert df.filter((pl.col("node") == p) & (pl.col("time") > on)).height > 0


def test_slow_culprit_slows_everyone(J):
    """Throughput-like metrics move together: a peer's power drops after the onset."""
    for kind in (
        "pcie_link_downtrain_after_aer_one_gpu_h2d_slow",
        "nvlink_crc_flit_burst_replays_one_gpu_slow",
        "hbm_overtemp_hw_thermal_slowdown_one_gpu",
        "mlx5_pause_storm_watchdog_port_stall",
        "cpu_heatsink_pkg_throttle_loader_slow_host",
        "ib_link_width_1x_rate_quarter_rail_slow",
        "row_remap_failure_xid64_gpu_slow_v18",
        "kswapd_memory_thrash_loader_starve_host_v18",
        "air_cooled_fan_fail_hw_slowdown_one_gpu_v18",
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


def test_culprit_bottleneck_gpu_stays_busy(J):
    for kind in (
        "pcie_link_downtrain_after_aer_one_gpu_h2d_slow",
        "nvlink_crc_flit_burst_replays_one_gpu_slow",
        "hbm_overtemp_hw_thermal_slowdown_one_gpu",
        "row_remap_failure_xid64_gpu_slow_v18",
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


def test_aoc_flaps_repeat_and_stall(J):
    for j in [x for x in J if x.kind == "aoc_cable_flaps_link_downed_repeats_stalls"]:
        (cul,) = list(j.culprits)
        flaps = j.spec["fault"]["flaps"][j.nodes.index(cul)]
        assert len(flaps) >= 2, j.name
    j = _smallest(J, "aoc_cable_flaps_link_downed_repeats_stalls")
    df = _raw(j)
    (cul,) = list(j.culprits)
    i = j.nodes.index(cul)
    dev = c.SITES[j.site].ib[j.spec["fault"]["port"][i]]
    d = _series(df, cul, c.IB_DOWNED, dev)
    assert d["value"].max() - d["value"].min() >= 2


def test_hbm_overtemp_memory_temp_high(J):
    j = _smallest(J, "hbm_overtemp_hw_thermal_slowdown_one_gpu")
    df = _raw(j)
    cul, on = min(j.culprits.items(), key=lambda kv: kv[1])
    g = str(j.spec["fault"]["gpu"][j.nodes.index(cul)])
    m = _series(df, cul, c.MEMORY_TEMP, g).filter(pl.col("time") >= on)["value"]
    o = df.filter(
        (pl.col("node") == cul)
        & (pl.col("metric") == c.MEMORY_TEMP)
        & (pl.col("device") != g)
        & (pl.col("time") >= on)
    )["value"]
    assert m.median() > o.median() + 8


def test_pause_storm_tx_pause_flood(J):
    j = _smallest(J, "mlx5_pause_storm_watchdog_port_stall")
    df = _raw(j)
    (cul,) = list(j.culprits)
    on = j.culprits[cul]
    p = c.SITES[j.site].eth_ports[j.spec["fault"]["port"][j.nodes.index(cul)]]
    s = _series(df, cul, c.ET_TX_PAUSE, p).filter(pl.col("time") >= on)
    if s.height > 2:
        dt = (s["time"][-1] - s["time"][0]).total_seconds()
        assert (s["value"][-1] - s["value"][0]) / dt > 1e4


def test_cpu_throttle_hot_and_slow(J):
    j = _smallest(J, "cpu_heatsink_pkg_throttle_loader_slow_host")
    df = _raw(j)
    cul, on = min(j.culprits.items(), key=lambda kv: kv[1])
    if c.HWMON_TEMP in set(df["metric"].unique()):
        t = _per_time(df, cul, c.HWMON_TEMP, "max")
        assert (
            t.filter(pl.col("time") > on)["v"].median()
            > t.filter(pl.col("time") < on)["v"].median() + 8
        )


def test_oom_kill_counted_once(J):
    for j in [x for x in J if x.kind == "host_oom_killer_sigkills_rank_peers_hang"]:
        if _est(j) > 2e6:
            continue
        df = _raw(j)
        (cul,) = list(j.culprits)
        s = _series(df, cul, c.VM_OOM)
        assert s["value"].max() - s["value"].min() == 1


def test_episode_kind_episodes_are_short(J):
    for j in [x for x in J if x.kind == "psu_loss_power_brake_bursts_node_v18"]:
        (cul,) = list(j.culprits)
        eps = j.spec["fault"]["eps"][j.nodes.index(cul)]
        assert len(eps) >= 2
        assert all(15 <= z - a <= 120 for a, z in eps)
        on = (j.culprits[cul] - j.start).total_seconds()
        assert any(a <= on < z + j.dcgm_interval + 1 for a, z in eps), j.name


# ---------------------------------------------------------------------------------------------
# Healthy jobs
# ---------------------------------------------------------------------------------------------


def _max_up(df, metric) -> float:
    """Largest positive step of a counter (fabric-manager clears make negative ones)."""
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
        if x["value"].is_in([64.0, 79.0, 94.0, 119.0]).any():
            out.append("xid")
        fl = x.group_by("node", "device").agg(
            pl.col("value").first().alias("a"), pl.col("value").max().alias("m")
        )
        if (fl["m"] > fl["a"]).any():
            out.append("new xid")
    for m in (c.ECC_DBE, c.NVL_CRC, c.NVL_RECOVERY, c.IB_DOWNED, c.ET_STORM, c.VM_OOM):
        if _max_up(df, m) > 0:
            out.append(m)
    if _max_up(df, c.CPU_PKG_THROTTLE) > 0:
        out.append("pkg_throttle")
    rf = df.filter(pl.col("metric") == c.REMAP_FAIL)
    if rf.height and rf["value"].max() > 0:
        out.append("remap_fail")
    lg = df.filter(pl.col("metric") == c.LINK_GEN)
    if lg.height and lg["value"].min() < s.pcie_gen:
        out.append("pcie_gen")
    ir = df.filter(pl.col("metric") == c.IB_RATE)
    if ir.height and ir["value"].min() < s.ib_rate:
        out.append("ib_rate")
    r = df.filter(pl.col("metric").is_in([c.CLOCK_THROTTLE, c.CLOCKS_EVENT]))
    if r.height and (r["value"].cast(pl.Int64) & 0xC8).max() > 0:
        out.append("reasons")
    ma = df.filter(pl.col("metric") == c.MEM_AVAIL)
    if ma.height and ma["value"].min() < 0.06 * s.mem_gib * _GIB:
        out.append("memavail")
    last = df.group_by("node").agg(pl.col("time").max().alias("t"))
    if last.height < len(j.nodes) or (last["t"].max() - last["t"].min()).total_seconds() > 240:
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


def test_rank0_generation_windows(J):
    j = _smallest(J, "rank0_sample_generation_window_peers_wait")
    df = _raw(j)
    a, z = j.spec["benign"]["wins"][0]
    lag = c.SITES[j.site].collect + 5
    w = (pl.col("time") > _sec(j, a + lag)) & (pl.col("time") < _sec(j, z))
    p0 = _per_time(df, j.nodes[0], c.POWER, "mean").filter(w)["v"]
    p1 = _per_time(df, j.nodes[1], c.POWER, "mean").filter(w)["v"]
    u1 = _per_time(df, j.nodes[1], c.GPU_UTIL, "min").filter(w)["v"]
    if p0.len() and p1.len():
        assert p0.median() > p1.median() * 1.3
        assert u1.min() >= 99


def test_ckpt_owners_write_others_do_not(J):
    j = _smallest(J, "ckpt_shard_owner_nodes_write_bursts")
    b = j.spec["benign"]
    assert b["wins"] and 1 <= len(b["who"]) <= len(j.nodes)
    df = _raw(j)
    a, z = b["wins"][0]
    owner = j.nodes[b["who"][0]]
    d = _series(df, owner, c.DISK_W)
    w0 = d.filter(pl.col("time") <= _sec(j, a))["value"]
    w1 = d.filter(pl.col("time") >= _sec(j, z))["value"]
    if w0.len() and w1.len():
        assert w1.min() - w0.max() > 0.4 * b["rate"] * (z - a) * 0.5


def test_dcgm_rollout_gaps_short_and_node_exporter_continues(J):
    j = _smallest(J, "dcgm_exporter_daemonset_rollout_short_gaps")
    df = _raw(j)
    for n, a, d in j.spec["benign"]["who"]:
        assert 15 <= d <= 60
        node = j.nodes[n]
        g = df.filter(
            (pl.col("node") == node)
            & (pl.col("metric") == c.GPU_TEMP)
            & (pl.col("time") >= _sec(j, a))
            & (pl.col("time") < _sec(j, a + d))
        )
        assert g.height == 0
        assert df.filter((pl.col("node") == node) & (pl.col("metric") == c.LOAD1)).height > 0


def test_sporadic_node_exporter_misses(J):
    j = _smallest(J, "node_exporter_scrape_timeouts_sporadic_misses")
    df = _raw(j)
    b = j.spec["benign"]
    cnt = df.filter(pl.col("metric") == c.LOAD1).group_by("node").agg(pl.len().alias("k"))
    k = dict(zip(cnt["node"], cnt["k"], strict=True))
    who = [j.nodes[i] for i in b["who"]]
    rest = [n for n in j.nodes if n not in who]
    assert all(w in k for w in who)
    if rest:
        assert np.mean([k[w] for w in who]) < np.mean([k[r] for r in rest])


def test_mixed_sku_more_free_memory_same_use(J):
    j = _smallest(J, "mixed_gpu_memory_sku_partition_nodes")
    df = _raw(j)
    b = j.spec["benign"]
    big = j.nodes[b["who"][0]]
    small = next((n for i, n in enumerate(j.nodes) if i not in b["who"]), None)
    if small is None:
        return
    late = pl.col("time") > _sec(j, j.spec["init_end"] + 300)
    f_big = _series(df, big, c.FB_FREE).filter(late)["value"].median()
    f_small = _series(df, small, c.FB_FREE).filter(late)["value"].median()
    u_big = _series(df, big, c.FB_USED).filter(late)["value"].median()
    u_small = _series(df, small, c.FB_USED).filter(late)["value"].median()
    assert f_big > f_small * 1.5 and abs(u_big - u_small) < 0.05 * u_small


def test_uneven_loader_workers_constant(J):
    j = _smallest(J, "uneven_dataloader_workers_cpu_busy_nodes")
    b = j.spec["benign"]
    assert 6 <= b["cpus"] <= 20 and 3 <= b["procs"] <= 8


def test_ufm_clear_resets_ib_counters_on_every_node(J):
    j = _smallest(J, "ufm_periodic_port_counter_clear_fabric")
    df = _raw(j)
    tc = j.spec["benign"]["clears"][0]
    for n in j.nodes[:4]:
        s = _per_time(df, n, c.IB_RX, "sum")
        bf = s.filter(pl.col("time") < _sec(j, tc))["v"]
        af = s.filter(pl.col("time") > _sec(j, tc + 12))["v"]
        if bf.len() and af.len():
            assert af[0] < bf[-1]


def test_late_index_builder_others_spin(J):
    j = _smallest(J, "one_rank_builds_dataset_index_others_wait")
    df = _raw(j)
    b = j.spec["benign"]
    who = b["who"]
    peer = j.nodes[(who + 1) % len(j.nodes)]
    end = j.spec["init_end"] + j.spec["init_spread"] + b["extra"]
    a = _sec(j, j.spec["init_end"] + j.spec["init_spread"] + 60)
    u = _per_time(df, peer, c.GPU_UTIL, "min").filter(
        (pl.col("time") > a) & (pl.col("time") < _sec(j, end - 10))
    )
    if u.height:
        assert u["v"].min() >= 99


def test_site_specifics(J):
    by = sorted(J, key=_est)

    def ms(site):
        j = next(x for x in by if x.site == site)
        return set(_raw(j)["metric"].unique()), _raw(j)

    m, df = ms("azh")
    assert c.IB_XMIT_WAIT in m and c.HWMON_TEMP not in m and c.LINK_GEN in m
    assert "steal" in set(df.filter(pl.col("metric") == c.CPU_SECONDS)["device"].unique())
    assert "mlx5_ib7:1" in set(df.filter(pl.col("metric") == c.IB_RATE)["device"].unique())
    m, df = ms("l40")
    assert c.NVLINK_BW not in m and c.ET_STORM in m and c.PROF_GR in m
    assert c.UNC_REMAP not in m and c.MEMORY_TEMP not in m
    m, df = ms("a1p")
    assert c.PROF_GR not in m and c.PSI_CPU not in m and c.REMAP_FAIL in m
    assert df.filter(pl.col("metric") == c.IB_RATE)["value"].max() == 12.5e9
    assert df.filter(pl.col("metric") == c.GPU_TEMP)["device"].n_unique() == 4
    m, df = ms("sxe")
    assert c.ET_STORM in m and c.NVL_CRC in m and c.CPU_PKG_THROTTLE in m
    assert df.filter(pl.col("metric") == c.ET_DISCARDS)["device"].n_unique() == 8
    m, df = ms("b3u")
    assert c.CLOCKS_EVENT in m and c.POWER_VIOL in m and c.FB_RESERVED in m
    assert c.LINK_GEN not in m and c.IB_OOS in m
    assert df.filter(pl.col("metric") == c.IB_RATE)["value"].max() == 100e9
    m, df = ms("a8k")
    assert c.NVL_CRC in m and c.CPU_FREQ not in m and c.EDAC_CE in m


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
