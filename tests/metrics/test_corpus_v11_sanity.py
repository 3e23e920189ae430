"""Sanity tests of corpus v11 itself (never of a detector).

Run with ``pytest --noconftest tests/metrics/test_corpus_v11_sanity.py -q``.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import numpy as np
import polars as pl
import pytest

from . import corpus_v11 as c
from .corpus_v9 import BENIGN_KINDS as V9_BENIGN
from .corpus_v9 import FAULT_KINDS as V9_FAULTS
from .corpus_v10 import BENIGN_KINDS as V10_BENIGN
from .corpus_v10 import FAULT_KINDS as V10_FAULTS

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
    assert len(c.FAULT_KINDS) == 18 and len(c.BENIGN_KINDS) == 12
    assert not set(c.FAULT_KINDS) & set(c.BENIGN_KINDS)
    assert isinstance(c.COUNTER_METRICS, frozenset) and isinstance(
        c.RATE_VALUED_COUNTERS, frozenset
    )
    assert c.RATE_VALUED_COUNTERS <= c.COUNTER_METRICS
    assert c.is_counter("node_cpu_seconds_total") and not c.is_counter("DCGM_FI_DEV_GPU_TEMP")
    assert c.is_counter(c.NVL_CRC) and c.is_counter(c.ET_TX_PAUSE_DUR)
    assert c.is_counter(c.VM_PGFAULT)
    assert not c.is_counter(c.MEM_HWCORRUPT) and not c.is_counter(c.RET_SBE)
    assert not c.is_counter(c.FS_DEVERR) and not c.is_counter(c.NET_SPEED)
    assert set(c.SITES) == {"b2h", "gbr", "h2r", "a8c", "v1c", "ckw"}


def test_kind_names_are_new():
    old = _OLDER_KINDS | set(V9_FAULTS) | set(V9_BENIGN) | set(V10_FAULTS) | set(V10_BENIGN)
    for k in c.FAULT_KINDS + c.BENIGN_KINDS:
        assert k not in old and not k.startswith("checkpoint"), k
    reused = [k for k in c.FAULT_KINDS if k.endswith("_v11")]
    assert len(reused) == 4 and all(k[: -len("_v11")] in V10_FAULTS for k in reused)
    assert len(c.FAULT_KINDS) - len(reused) >= 12
    used = {"gb3", "efa", "a3g", "h1n", "rtx", "a4h", "h20", "dgx", "ndv", "oci", "l4s", "gh2"}
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
    assert sum(j.faulty for j in J) == 62
    assert sum(not j.faulty for j in J) == 58
    kc = Counter(j.kind for j in J)
    assert all(kc[k] in (3, 4) for k in c.FAULT_KINDS)
    assert all(kc[k] in (4, 5) for k in c.BENIGN_KINDS)
    assert all(j.faulty == (j.kind in c.FAULT_KINDS) for j in J)
    assert {len(j.culprits) for j in J if j.faulty} <= {1, 2}
    assert sum(len(j.culprits) == 2 for j in J) >= 3
    assert set(j.site for j in J) == set(c.SITES)
    sizes = [len(j.nodes) for j in J]
    assert min(sizes) == 2 and max(sizes) == 1024 and sum(s >= 256 for s in sizes) >= 5
    assert np.median(sizes) <= 64
    assert all(30 - 1e-6 <= j.minutes <= 120 for j in J)
    assert all(5 <= j.dcgm_interval <= 60 and 15 <= j.node_interval <= 60 for j in J)
    v1 = [j for j in J if j.site == "v1c"]
    assert v1 and all(j.node_interval == 60 and j.dcgm_interval <= 15 for j in v1)
    assert sum(j.dcgm_interval == 5 for j in v1) >= len(v1) // 2
    assert all(len(set(j.nodes)) == len(j.nodes) for j in J)
    assert len({j.name for j in J}) == 120


def test_kinds_on_sites_that_can_show_them(J):
    for j in J:
        s = c.SITES[j.site]
        if j.kind in ("ib_link_width_downtrain_1x", "fabric_sm_resweep_stall_all"):
            assert s.ib_rate > 0 and not s.roce
        if j.kind == "ib_link_width_downtrain_1x":
            assert s.ib
        if j.kind in ("nic_rx_stall_pfc_pause_flood", "bond_member_down_failover"):
            assert s.roce and c.ET_TX_PAUSE in s.ethtool
        if j.kind == "nvlink_crc_flit_replay_ramp":
            assert c.NVL_CRC in s.fields
        if j.kind in ("gpu_power_limit_misset", "site_demand_response_powercap"):
            assert c.POWER_LIMIT in s.fields
        if j.kind == "pcie_gen_fallback_after_aer":
            assert c.LINK_GEN in s.fields or c.PROF_PCIE_RX in s.fields or c.PCIE_RX_TP in s.fields
        if j.kind == "lustre_ost_evict_reconnect_v11":
            assert s.pfs
        if j.kind == "hbm_dbe_contained_kill_v11":
            assert c.UNC_REMAP in s.fields
        if j.kind == "gsp_rpc_timeout_stuck_gpu":
            assert s.key in ("b2h", "gbr", "h2r", "ckw")  # GSP firmware on by default (R535+)
        if j.kind == "dcgm_exporter_mixed_fieldset":
            assert s.reasons


def test_labels_inside_windows(J):
    for j in J:
        for node, on in j.culprits.items():
            assert node in j.nodes
            assert j.start < on < j.end - timedelta(minutes=1.5), j.name
            assert on.tzinfo is not None


def test_row_budget(J):
    ests = sorted(_est(j) for j in J)
    assert ests[-1] <= 6.5e6 and ests[-2] <= 5.5e6  # the 1,024-node job is the one above cap
    assert sum(ests) < 300e6
    mid = sorted(J, key=_est)[60]
    assert abs(_raw(mid).height / _est(mid) - 1) < 0.05


# ---------------------------------------------------------------------------------------------
# Each fault is visible, at the onset, in the series the README names
# ---------------------------------------------------------------------------------------------

_MISSING_OK = (
    "gpu_lost_exporter_blackout",
    "host_freeze_scrape_timeout_v11",
    "kernel_soft_lockup_scrape_miss",
)


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
    fault signature (renders all 62 fault jobs once)."""
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


def _v_blackout(j, df, node, on):
    mine = df.filter(pl.col("node") == node)
    dc = mine.filter(pl.col("metric").str.starts_with("DCGM"))
    nd = mine.filter(pl.col("metric").str.starts_with("node_"))
    others = df.filter((pl.col("node") != node) & pl.col("metric").str.starts_with("DCGM"))
    return (
        dc.filter(pl.col("time") >= on).height == 0
        and dc.filter(pl.col("time") < on).height > 0
        and nd.filter(pl.col("time") > on + timedelta(minutes=3)).height > 0
        and others["time"].max() - on > timedelta(minutes=5)
    )


def _v_gsp(j, df, node, on):
    if not _v_xid(119)(j, df, node, on):
        return False
    g = _gpu_of(j, node)
    texit = on + timedelta(seconds=j.spec["nccl_timeout"] + 60)
    u = _after(_series(df, node, c.GPU_UTIL, g), texit)
    peer = next(n for n in j.nodes if n != node)
    up = _after(_per_time(df, peer, c.GPU_UTIL, "max"), texit)
    return u.height > 0 and u["value"].min() >= 99 and up["v"].max() == 0


def _v_sbe(j, df, node, on):
    if not _v_xid(63)(j, df, node, on):
        return False
    g = _gpu_of(j, node)
    fields = c.SITES[j.site].fields
    m = c.RET_SBE if c.RET_SBE in fields else c.COR_REMAP
    s = _series(df, node, m, g)
    ok = _at(s, on)["value"][0] == _prev(s, on) + 1
    if c.ECC_SBE in fields:
        e = _series(df, node, c.ECC_SBE, g)
        ok = ok and _at(e, on)["value"][0] >= _prev(e, on) + 3
        ok = ok and e["value"][-1] > _at(e, on)["value"][0]
    return ok


def _v_crc(j, df, node, on):
    s = _series(df, node, c.NVL_CRC, _gpu_of(j, node))
    return _at(s, on)["value"][0] >= _prev(s, on) + 50


def _v_heatsink(j, df, node, on):
    g = _gpu_of(j, node)
    s = _series(df, node, c.GPU_TEMP, g)
    st = c.SITES[j.site]
    later = _after(s, on + timedelta(minutes=5))["value"]
    clk = _after(_series(df, node, c.SM_CLOCK, g), on + timedelta(minutes=5))["value"]
    return (
        _at(s, on)["value"][0] >= _prev(s, on) + 1
        and later.max() >= st.slow_temp - 1
        and clk.min() < 0.97 * st.sm_max
    )


def _v_plimit(j, df, node, on):
    s = _series(df, node, c.POWER_LIMIT, _gpu_of(j, node))
    return _at(s, on)["value"][0] < 0.7 * _prev(s, on)


def _v_pcie_gen(j, df, node, on):
    g = _gpu_of(j, node)
    if c.LINK_GEN in c.SITES[j.site].fields:
        s = _series(df, node, c.LINK_GEN, g)
        if _at(s, on)["value"][0] < _prev(s, on):
            return True
    s = _series(df, node, c.PCIE_REPLAY, g)
    return _at(s, on)["value"][0] >= _prev(s, on) + 5


def _v_pfc(j, df, node, on):
    s = _per_time(df, node, c.ET_TX_PAUSE, "sum")
    return _at(s, on)["v"][0] >= _prev(s, on, "v") + 1000


def _v_ibwidth(j, df, node, on):
    st = _per_time(df, node, c.IB_STATE, "min")
    ok = _at(st, on)["v"][0] == 1
    s = _per_time(df, node, c.IB_DOWNED, "sum")
    ok = ok or _at(s, on)["v"][0] > _prev(s, on, "v")
    r = _after(_per_time(df, node, c.IB_RATE, "min"), on + timedelta(minutes=1))
    return ok and r["v"].max() == c.SITES[j.site].ib_rate / 4


def _v_bond(j, df, node, on):
    up = _per_time(df, node, c.NET_UP, "min")
    return _at(up, on)["v"][0] == 0 and _before(up, on)["v"].min() == 1


def _v_hwpoison(j, df, node, on):
    s = _per_time(df, node, c.MEM_HWCORRUPT, "max")
    return _at(s, on)["v"][0] > 0 and _before(s, on)["v"].max() == 0


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


def _v_numa(j, df, node, on):
    u = _per_time(df, node, c.GPU_UTIL, "mean")
    return _at(u, on)["v"][0] < 95


def _v_dbe(j, df, node, on):
    ok = _v_xid(94)(j, df, node, on)
    g = _gpu_of(j, node)
    for m in (c.ECC_DBE, c.UNC_REMAP):
        if m in c.SITES[j.site].fields:
            s = _series(df, node, m, g)
            ok = ok and _at(s, on)["value"][0] == _prev(s, on) + 1
    return ok


def _v_hws(j, df, node, on):
    s = _series(df, node, c.SM_CLOCK, _gpu_of(j, node))
    ok = _at(s, on)["value"][0] < 0.6 * _prev(s, on)
    r = c.SITES[j.site].reasons
    if r:
        rs = _series(df, node, r, _gpu_of(j, node))
        ok = ok and int(_at(rs, on)["value"][0]) & 0x8 and not int(_prev(rs, on)) & 0x8
    return ok


def _v_lustre(j, df, node, on):
    s = _per_time(df, node, c.FS_DEVERR, "max")
    b = _per_time(df, node, c.PROCS_BLOCKED, "max")
    return _at(s, on)["v"][0] == 1 and _at(b, on)["v"][0] >= 8 and _before(s, on)["v"].max() == 0


def _v_freeze(j, df, node, on):
    mine = df.filter(pl.col("node") == node)
    others = df.filter(pl.col("node") != node)["time"].max()
    return (
        mine.filter(pl.col("time") >= on).height == 0
        and mine["time"].max() < on
        and others - on > timedelta(minutes=5)
    )


_VISIBLE = {
    "gpu_lost_exporter_blackout": _v_blackout,
    "gsp_rpc_timeout_stuck_gpu": _v_gsp,
    "sbe_climb_row_remap_pending": _v_sbe,
    "nvlink_crc_flit_replay_ramp": _v_crc,
    "single_gpu_heatsink_swslow": _v_heatsink,
    "gpu_power_limit_misset": _v_plimit,
    "pcie_gen_fallback_after_aer": _v_pcie_gen,
    "nic_rx_stall_pfc_pause_flood": _v_pfc,
    "ib_link_width_downtrain_1x": _v_ibwidth,
    "bond_member_down_failover": _v_bond,
    "hwpoison_page_offline_creep": _v_hwpoison,
    "kernel_soft_lockup_scrape_miss": _v_lockup,
    "local_nvme_media_wear_stall": _v_nvme,
    "numa_balancing_migration_straggler": _v_numa,
    "hbm_dbe_contained_kill_v11": _v_dbe,
    "hw_slowdown_stuck_asserted_v11": _v_hws,
    "lustre_ost_evict_reconnect_v11": _v_lustre,
    "host_freeze_scrape_timeout_v11": _v_freeze,
}


def test_fault_kinds_have_a_visibility_check():
    assert set(_VISIBLE) == set(c.FAULT_KINDS)


def test_hang_peers_spin_then_exit(J):
    """After a rank dies, its peers sit at ~100 % util at low power until the NCCL timeout."""
    for kind in sorted(c._HANG_KINDS):
        j = _smallest(J, kind)
        df = _raw(j)
        node, on = next(iter(j.culprits.items()))
        peer = next(n for n in j.nodes if n != node)
        t = on + timedelta(minutes=4)
        u = _per_time(df, peer, c.GPU_UTIL, "mean").filter(pl.col("time") > t).head(3)
        pw = _per_time(df, peer, c.POWER, "mean").filter(pl.col("time") > t).head(3)
        s = c.SITES[j.site]
        assert u["v"].min() >= 99, j.name
        assert pw["v"].max() < s.idle_w + 0.3 * (s.tdp - s.idle_w), j.name
        texit = on + timedelta(seconds=j.spec["nccl_timeout"] + 60)
        u2 = _per_time(df, peer, c.GPU_UTIL, "mean").filter(pl.col("time") > texit)
        assert u2.height > 0 and u2["v"].max() == 0, j.name


def test_slow_culprit_slows_everyone(J):
    for kind in (
        "hw_slowdown_stuck_asserted_v11",
        "gpu_power_limit_misset",
        "numa_balancing_migration_straggler",
        "ib_link_width_downtrain_1x",
        "nic_rx_stall_pfc_pause_flood",
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
        assert after < 0.97 * before, (j.name, before, after)
        clk = _after(_per_time(df, peer, c.SM_CLOCK, "min"), on + timedelta(minutes=2)).head(10)
        assert clk["v"].min() > 0.95 * c.SITES[j.site].sm_max


def test_local_signatures_stay_on_the_culprit(J):
    for kind in c.FAULT_KINDS:
        j = _smallest(J, kind)
        df = _raw(j).filter(~pl.col("node").is_in(list(j.culprits)))
        assert not _signatures(df, j), (j.name, _signatures(df, j))


# ---------------------------------------------------------------------------------------------
# Healthy jobs
# ---------------------------------------------------------------------------------------------


def _signatures(df: pl.DataFrame, j) -> list[str]:
    s = c.SITES[j.site]
    out = []
    x = df.filter((pl.col("metric") == c.XID) & pl.col("value").is_in([63.0, 94.0, 119.0, 79.0]))
    if x.height:
        out.append("xid")
    for m in (c.ECC_DBE, c.NVL_RECOVERY, c.MEM_HWCORRUPT, c.RET_PEND):
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
    if (
        j.kind != "site_demand_response_powercap"
        and df.filter((pl.col("metric") == c.POWER_LIMIT) & (pl.col("value") < s.tdp)).height
    ):
        out.append("power_limit")
    if s.reasons:
        r = df.filter(pl.col("metric").is_in([c.CLOCK_THROTTLE, c.CLOCKS_EVENT]))["value"]
        if (((r.cast(pl.Int64)) & 0x8) > 0).any():
            out.append("hw_slowdown")
    if df.filter(pl.col("metric") == c.ET_TX_PAUSE_DUR).height:
        d = (
            df.filter(pl.col("metric") == c.ET_TX_PAUSE_DUR)
            .sort("time")
            .group_by("node", "device")
            .agg((pl.col("value").diff() / pl.col("time").diff().dt.total_seconds()).max())
        )
        if (d["value"] > 1e5).any():
            out.append("pause_storm")
    return out


def test_healthy_jobs_free_of_fault_signatures(J):
    for j in J:
        if j.faulty:
            continue
        df = j.raw
        assert not _signatures(df, j), (j.name, _signatures(df, j))
        last = df.group_by("node").agg(pl.col("time").max())["time"]
        assert (last > j.end - timedelta(minutes=2)).all(), j.name
        bad = (
            df.filter(pl.col("metric").is_in(list(c.COUNTER_METRICS - c.RATE_VALUED_COUNTERS)))
            .sort("time")
            .group_by("node", "metric", "device")
            .agg((pl.col("value").diff() < 0).sum().alias("neg"))
            .filter(pl.col("neg") > 0)
        )
        assert bad.height == 0, (j.name, bad.head())
        del df


def _train_mask(j, col="time"):
    e = pl.lit(True)
    for ck in j.spec["ckpt"]:
        e = e & ((pl.col(col) < _sec(j, ck[0] - 10)) | (pl.col(col) > _sec(j, ck[1] + 60)))
    return e


def test_compile_warmup_all_nodes(J):
    j = _smallest(J, "compile_warmup_graph_capture")
    df = _raw(j)
    a, z, _lv = j.spec["benign"]["recomp"]
    d = df.filter(pl.col("metric") == c.POWER)
    early = d.filter(pl.col("time") < _sec(j, 500)).group_by("node").agg(pl.col("value").mean())
    s = c.SITES[j.site]
    assert early["value"].max() < s.idle_w + 0.3 * (s.tdp - s.idle_w)  # compiling, not training
    inside = d.filter((pl.col("time") > _sec(j, a + 60)) & (pl.col("time") < _sec(j, z - 10)))
    after = d.filter((pl.col("time") > _sec(j, z + 120)) & (pl.col("time") < _sec(j, z + 400)))
    after = after.filter(_train_mask(j))
    x = (
        inside.group_by("node")
        .agg(pl.col("value").mean().alias("i"))
        .join(after.group_by("node").agg(pl.col("value").mean().alias("a")), on="node")
    )
    assert x.height == len(j.nodes) and (x["i"] < x["a"]).all()


def test_sharded_save_every_node_writes(J):
    j = _smallest(J, "dcp_sharded_save_every_node")
    df = _raw(j)
    a, ends = j.spec["benign"]["saves"][0]
    w = df.filter(pl.col("metric") == c.DISK_W).sort("time")
    d = w.group_by("node").agg(
        (
            pl.col("value").filter(pl.col("time") <= _sec(j, max(ends) + 60)).last()
            - pl.col("value").filter(pl.col("time") >= _sec(j, a - 60)).first()
        ).alias("d")
    )
    assert (d["d"] > 1e9).all()
    u = df.filter(
        (pl.col("metric") == c.GPU_UTIL)
        & (pl.col("time") > _sec(j, a + 10 + c.SITES[j.site].collect))
        & (pl.col("time") < _sec(j, min(ends) - 5))
    )
    if u.height:
        assert u["value"].max() <= 10


def test_powercap_on_every_gpu(J):
    j = _smallest(J, "site_demand_response_powercap")
    df = _raw(j)
    a, z, cv = j.spec["benign"]["cap"]
    pl_ = df.filter(
        (pl.col("metric") == c.POWER_LIMIT)
        & (pl.col("time") > _sec(j, a + 30))
        & (pl.col("time") < _sec(j, z - 30))
    )
    assert pl_.height and ((pl_["value"] - cv).abs() < 0.2).all()
    assert pl_["node"].n_unique() == len(j.nodes)


def test_fabric_stall_all_nodes(J):
    cands = [j for j in J if j.kind == "fabric_sm_resweep_stall_all"]
    j = min(cands, key=_est)
    df = _raw(j)
    a, z = max(j.spec["benign"]["stalls"], key=lambda s: s[1] - s[0])
    p = df.filter(
        (pl.col("metric") == c.POWER)
        & (pl.col("time") > _sec(j, a + 5))
        & (pl.col("time") < _sec(j, z))
    )
    s = c.SITES[j.site]
    p = p.filter(pl.col("time") > _sec(j, a) + timedelta(seconds=c.SITES[j.site].collect + 1))
    if p.height:
        assert p["value"].max() < s.idle_w + 0.35 * (s.tdp - s.idle_w)


def test_rack_gradient_constant(J):
    j = _smallest(J, "rack_height_temp_gradient")
    df = _raw(j)
    inl = j.spec["benign"]["inlet"]
    t = df.filter(pl.col("metric") == c.GPU_TEMP).group_by("node").agg(pl.col("value").median())
    v = dict(zip(t["node"], t["value"], strict=False))
    hi = [v[n] for i, n in enumerate(j.nodes) if inl[i] >= 2.4]
    lo = [v[n] for i, n in enumerate(j.nodes) if inl[i] == 0]
    if hi and lo:
        assert np.mean(hi) > np.mean(lo) + 1


def test_mixed_fieldset_names(J):
    j = _smallest(J, "dcgm_exporter_mixed_fieldset")
    df = _raw(j)
    s = c.SITES[j.site]
    other = c.CLOCKS_EVENT if s.reasons == c.CLOCK_THROTTLE else c.CLOCK_THROTTLE
    newer = {j.nodes[i] for i in j.spec["benign"]["newer"]}
    assert set(df.filter(pl.col("metric") == other)["node"].unique()) == newer
    assert not newer & set(df.filter(pl.col("metric") == s.reasons)["node"].unique())


def test_rank0_logger_constant_role(J):
    j = _smallest(J, "rank0_metrics_logger_host")
    df = _raw(j)
    tx = df.filter(
        (pl.col("metric") == c.NET_TX) & (pl.col("device") == c.SITES[j.site].netdevs[0])
    )
    r = (
        tx.sort("time")
        .group_by("node")
        .agg(
            (
                (pl.col("value").last() - pl.col("value").first())
                / (pl.col("time").last() - pl.col("time").first()).dt.total_seconds()
            ).alias("r")
        )
    )
    v = dict(zip(r["node"], r["r"], strict=False))
    r0 = v.pop(j.nodes[0])
    assert r0 > max(v.values()) + 3e7


def test_epoch_boundary_all_nodes(J):
    j = _smallest(J, "epoch_boundary_worker_respawn")
    df = _raw(j)
    a, z = j.spec["benign"]["epochs"][0]
    cpu = df.filter((pl.col("metric") == c.CPU_SECONDS) & (pl.col("device") == "user")).sort("time")
    d = cpu.group_by("node").agg(
        (
            pl.col("value").filter(pl.col("time") <= _sec(j, z + 60)).last()
            - pl.col("value").filter(pl.col("time") >= _sec(j, a - 60)).first()
        ).alias("d")
    )
    assert (d["d"] > (z - a) * 5).all()


def test_elastic_late_nodes(J):
    j = _smallest(J, "elastic_rdzv_scale_up")
    df = _raw(j)
    b = j.spec["benign"]
    late = [j.nodes[i] for i in b["late"]]
    u = df.filter(
        (pl.col("metric") == c.GPU_UTIL)
        & pl.col("node").is_in(late)
        & (pl.col("time") < _sec(j, b["join"] - 10))
    )
    assert u.height and u["value"].max() == 0
    after = df.filter(
        (pl.col("metric") == c.GPU_UTIL)
        & pl.col("node").is_in(late)
        & (pl.col("time") > _sec(j, b["join"] + b["restart"] + 200))
    )
    assert after["value"].median() >= 97


def test_scrape_interval_reload(J):
    j = _smallest(J, "prom_scrape_interval_reload")
    df = _raw(j)
    tr = _sec(j, j.spec["benign"]["reload"])
    s = df.filter((pl.col("metric") == c.LOAD1) & (pl.col("node") == j.nodes[0])).sort("time")
    dt = s.with_columns(pl.col("time").diff().dt.total_seconds().alias("d")).drop_nulls()
    before = dt.filter(pl.col("time") < tr)["d"].median()
    after = dt.filter(pl.col("time") > tr + timedelta(minutes=2))["d"].median()
    assert abs(before - 2 * j.node_interval) < 1.5 and abs(after - j.node_interval) < 1.5


def test_node_exporter_gaps_only_node_series(J):
    j = _smallest(J, "node_exporter_crashloop_gap")
    df = _raw(j)
    for i, gl in j.spec["benign"]["ngaps"].items():
        node = j.nodes[int(i)]
        for a, z in gl:
            w = df.filter(
                (pl.col("node") == node)
                & (pl.col("time") >= _sec(j, a))
                & (pl.col("time") < _sec(j, z))
            )
            assert w.filter(pl.col("metric").str.starts_with("node_")).height == 0


# ---------------------------------------------------------------------------------------------
# Exporter behaviour
# ---------------------------------------------------------------------------------------------


def test_site_specifics(J):
    for site in c.SITES:
        cands = [j for j in J if j.site == site and j.kind != "dcgm_exporter_mixed_fieldset"]
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
        assert any(m.startswith("node_ethtool") for m in ms) == bool(s.ethtool), site
        if site == "ckw":
            assert not any(m.startswith("node_infiniband") for m in ms) and c.EDAC_CE not in ms
        if site == "v1c":
            assert c.RET_SBE in ms and c.PROF_TENSOR not in ms and c.UNC_REMAP not in ms
        if site == "a8c":
            assert c.PSI_CPU not in ms and c.PCIE_RX_TP in ms and s.reasons is None
        if site == "gbr":
            assert len(df.filter(pl.col("metric") == c.GPU_TEMP)["device"].unique()) == 4
        if site in ("b2h", "gbr"):
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


def test_v1c_fast_dcgm_slow_node(J):
    j = min((j for j in J if j.site == "v1c" and j.dcgm_interval == 5), key=_est)
    df = _raw(j)
    n = j.nodes[0]
    a = df.filter(
        (pl.col("node") == n) & (pl.col("metric") == c.GPU_TEMP) & (pl.col("device") == "0")
    )
    b = df.filter((pl.col("node") == n) & (pl.col("metric") == c.LOAD1))
    assert a.height > 9 * b.height


def test_decoys_present(J):
    xs = 0
    for j in sorted(J, key=_est)[:20]:
        df = _raw(j)
        x = df.filter((pl.col("metric") == c.XID) & (pl.col("value") > 0))
        if not j.faulty:
            xs += x.height
    assert xs > 0
    assert sum(bool(j.spec["ckpt"]) for j in J) >= 20
