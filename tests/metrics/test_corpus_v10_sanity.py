"""Sanity tests of corpus v10 itself (never of a detector).

Run with ``pytest --noconftest tests/metrics/test_corpus_v10_sanity.py -q``.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import numpy as np
import polars as pl
import pytest

from . import corpus_v10 as c
from .corpus_v9 import BENIGN_KINDS as V9_BENIGN
from .corpus_v9 import FAULT_KINDS as V9_FAULTS

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


def _sec(j, x: float):
    return j.start + timedelta(seconds=x)


# ---------------------------------------------------------------------------------------------
# API, determinism, schema, lint
# ---------------------------------------------------------------------------------------------


def test_api_constants():
    assert len(c.FAULT_KINDS) == 12 and len(c.BENIGN_KINDS) == 12
    assert not set(c.FAULT_KINDS) & set(c.BENIGN_KINDS)
    assert isinstance(c.COUNTER_METRICS, frozenset) and isinstance(
        c.RATE_VALUED_COUNTERS, frozenset
    )
    assert c.RATE_VALUED_COUNTERS <= c.COUNTER_METRICS
    assert c.is_counter("node_cpu_seconds_total") and not c.is_counter("DCGM_FI_DEV_GPU_TEMP")
    assert c.is_counter("node_vmstat_compact_stall")  # exposed untyped, cumulative
    assert not c.is_counter(c.FS_DEVERR) and not c.is_counter(c.NET_SPEED)
    assert set(c.SITES) == {"h20", "dgx", "ndv", "oci", "l4s", "gh2"}


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


def test_kind_names_are_new():
    old = _OLDER_KINDS | set(V9_FAULTS) | set(V9_BENIGN)
    for k in c.FAULT_KINDS + c.BENIGN_KINDS:
        assert k not in old and not k.startswith("checkpoint"), k
    assert not {"gb3", "efa", "a3g", "h1n", "rtx", "a4h"} & set(c.SITES)


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
    # counters are summed over devices whatever agg_for says
    m = c.CPU_SECONDS
    one = df.filter(pl.col("metric") == m).group_by("time", "node").agg(pl.col("value").sum())
    got = agg.filter(pl.col("metric") == m).join(one, on=["time", "node"])
    assert (got["value"] == got["value_right"]).all()


# ---------------------------------------------------------------------------------------------
# Population and labels
# ---------------------------------------------------------------------------------------------


def test_population(J):
    assert len(J) == 120
    assert sum(j.faulty for j in J) == 64
    assert sum(not j.faulty for j in J) == 56
    kc = Counter(j.kind for j in J)
    assert all(kc[k] in (5, 6) for k in c.FAULT_KINDS)
    assert all(kc[k] in (4, 5) for k in c.BENIGN_KINDS)
    assert all(j.faulty == (j.kind in c.FAULT_KINDS) for j in J)
    assert {len(j.culprits) for j in J if j.faulty} <= {1, 2}
    assert sum(len(j.culprits) == 2 for j in J) >= 3
    assert set(j.site for j in J) == set(c.SITES)
    sizes = [len(j.nodes) for j in J]
    assert min(sizes) >= 4 and sum(s >= 256 for s in sizes) >= 5
    assert np.median(sizes) <= 64
    assert all(30 - 1e-6 <= j.minutes <= 120 for j in J)
    assert all(10 <= j.dcgm_interval <= 60 and 10 <= j.node_interval <= 60 for j in J)
    assert all(len(set(j.nodes)) == len(j.nodes) for j in J)
    assert len({j.name for j in J}) == 120


def test_kinds_on_sites_that_can_show_them(J):
    for j in J:
        s = c.SITES[j.site]
        if j.kind in ("hca_port_bounce_loop", "fabric_mgr_counter_clear"):
            assert s.ib
        if j.kind == "nvlink_links_inactive_partial":
            assert c.NVLINK_BW in s.fields
        if j.kind == "nic_autoneg_speed_fallback":
            assert s.tcp_nics or s.roce
        if j.kind == "bmc_prochot_cpu_clamp":
            assert "cpufreq" in s.collectors
        if j.kind == "lustre_ost_evict_reconnect":
            assert s.pfs
        if j.kind == "hbm_dbe_contained_kill":
            assert c.UNC_REMAP in s.fields


def test_labels_inside_windows(J):
    for j in J:
        for node, on in j.culprits.items():
            assert node in j.nodes
            assert j.start < on < j.end - timedelta(minutes=1.5), j.name
            assert on.tzinfo is not None


def test_row_budget(J):
    assert max(_est(j) for j in J) <= 5.5e6
    mid = sorted(J, key=_est)[60]
    assert abs(_raw(mid).height / _est(mid) - 1) < 0.05


# ---------------------------------------------------------------------------------------------
# Each fault is visible, at the onset, in the series the README names
# ---------------------------------------------------------------------------------------------


def test_onset_on_culprit_grid_and_visible(J):
    """The onset is a sample of the culprit, and that sample shows the fault."""
    for kind in c.FAULT_KINDS:
        j = _smallest(J, kind)
        df = _raw(j)
        for node, on in j.culprits.items():
            rows = df.filter((pl.col("node") == node) & (pl.col("time") == on))
            missing_ok = kind == "host_freeze_scrape_timeout" or (
                kind == "bus_drop_series_vanish" and not j.spec["fault"]["xid"]
            )
            if not missing_ok:
                assert rows.height > 0, (j.name, node)
            assert _VISIBLE[kind](j, df, node, on), (j.name, node, on)


def test_every_culprit_visible_and_peers_clean(J):
    """Every culprit of every fault job shows its fault at its onset; peers show no
    fault signature (renders all 64 fault jobs once, ~15 s)."""
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
    quiet = [j for j in J if j.kind == "bus_drop_series_vanish" and not j.spec["fault"]["xid"]]
    assert quiet  # a GPU that falls off the bus without an Xid: its series just stop


def _gpu_of(j, node):
    i = j.nodes.index(node)
    return str(j.spec["fault"]["gpu"][i])


def _v_xid(*vals):
    def f(j, df, node, on):
        s = _series(df, node, c.XID, _gpu_of(j, node))
        return (
            _at(s, on)["value"][0] in vals
            and (~_before(s, on)["value"].is_in([float(v) for v in vals])).all()
        )

    return f


def _v_bus(j, df, node, on):
    g = _gpu_of(j, node)
    temp = _series(df, node, c.GPU_TEMP, g)
    gone = _after(temp, on - timedelta(milliseconds=1)).height == 0 and _before(temp, on).height
    if j.spec["fault"]["xid"]:
        return gone and _v_xid(79)(j, df, node, on)
    return bool(gone)


def _v_dbe(j, df, node, on):
    ok = _v_xid(94)(j, df, node, on)
    g = _gpu_of(j, node)
    for m in (c.ECC_DBE, c.UNC_REMAP):
        if m in c.SITES[j.site].fields:
            s = _series(df, node, m, g)
            ok = ok and _at(s, on)["value"][0] == _before(s, on)["value"][-1] + 1
    return ok


def _v_bounce(j, df, node, on):
    """Port down at the scrape, or a link_downed / carrier-change increment since the last."""
    st = _per_time(df, node, c.IB_STATE, "min")
    if _at(st, on)["v"][0] == 1:
        return True
    for m in (c.IB_DOWNED, c.NET_CARRIER):
        s = _per_time(df, node, m, "sum")
        if s.height and _at(s, on)["v"][0] > _before(s, on)["v"][-1]:
            return True
    return False


def _v_freeze(j, df, node, on):
    mine = df.filter(pl.col("node") == node)
    others = df.filter(pl.col("node") != node)["time"].max()
    return (
        mine.filter(pl.col("time") >= on).height == 0
        and mine["time"].max() < on
        and others - on > timedelta(minutes=5)
    )


def _v_hws(j, df, node, on):
    s = _series(df, node, c.SM_CLOCK, _gpu_of(j, node))
    ok = _at(s, on)["value"][0] < 0.6 * _before(s, on)["value"][-1]
    r = c.SITES[j.site].reasons
    if r:
        rs = _series(df, node, r, _gpu_of(j, node))
        ok = (
            ok
            and int(_at(rs, on)["value"][0]) & 0x8
            and not int(_before(rs, on)["value"][-1]) & 0x8
        )
    return ok


def _v_inlet(j, df, node, on):
    s = df.filter((pl.col("node") == node) & (pl.col("metric") == c.GPU_TEMP))
    a = s.filter(pl.col("time") == on).sort("device")["value"].to_numpy()
    prev_t = _before(s, on)["time"].max()
    p = s.filter(pl.col("time") == prev_t).sort("device")["value"].to_numpy()
    later = s.filter(pl.col("time") > on + timedelta(minutes=4))["value"].mean()
    early = _before(s, on).tail(5 * c.SITES[j.site].G)["value"].mean()
    return (a - p).max() >= 1 and later > early + 8


def _v_pcie(j, df, node, on):
    s = _series(df, node, c.PCIE_REPLAY, _gpu_of(j, node))
    return _at(s, on)["value"][0] >= _before(s, on)["value"][-1] + 20


def _v_autoneg(j, df, node, on):
    up = _per_time(df, node, c.NET_UP, "min")
    ch = _per_time(df, node, c.NET_CARRIER, "sum")
    sp = df.filter((pl.col("node") == node) & (pl.col("metric") == c.NET_SPEED))
    drop = (
        sp.group_by("device")
        .agg(
            pl.col("value").filter(pl.col("time") < on).min().alias("a"),
            pl.col("value").filter(pl.col("time") > on + timedelta(minutes=1)).max().alias("b"),
        )
        .filter(pl.col("b") < pl.col("a"))
    )
    return (
        _at(up, on)["v"][0] == 0 or _at(ch, on)["v"][0] > _before(ch, on)["v"][-1]
    ) and drop.height == 1


def _v_prochot(j, df, node, on):
    s = _per_time(df, node, c.CPU_FREQ, "max")
    return _at(s, on)["v"][0] < 0.5 * _before(s, on)["v"][-1]


def _v_lustre(j, df, node, on):
    s = _per_time(df, node, c.FS_DEVERR, "max")
    b = _per_time(df, node, c.PROCS_BLOCKED, "max")
    return _at(s, on)["v"][0] == 1 and _at(b, on)["v"][0] >= 8 and _before(s, on)["v"].max() == 0


def _v_thp(j, df, node, on):
    """A runnable-task burst in the gauge, or (a short episode that ended before the scrape)
    extra system CPU time in the counter interval that contains the episode's start."""
    s = _per_time(df, node, c.PROCS_RUNNING, "max")
    if _at(s, on)["v"][0] >= _before(s, on)["v"].tail(5).max() + 8:
        return True
    cpu = df.filter(
        (pl.col("node") == node)
        & (pl.col("metric") == c.CPU_SECONDS)
        & (pl.col("device") == "system")
    ).select("time", pl.col("value").alias("v"))
    r = _rate(cpu.sort("time")).drop_nulls()
    return _at(r, on)["r"][0] > _before(r, on)["r"].tail(5).max() + 3


_VISIBLE = {
    "bus_drop_series_vanish": _v_bus,
    "hbm_dbe_contained_kill": _v_dbe,
    "hca_port_bounce_loop": _v_bounce,
    "host_freeze_scrape_timeout": _v_freeze,
    "hw_slowdown_stuck_asserted": _v_hws,
    "rack_inlet_recirculation": _v_inlet,
    "nvlink_links_inactive_partial": _v_xid(74),
    "nic_autoneg_speed_fallback": _v_autoneg,
    "gpu_pcie_badtlp_storm": _v_pcie,
    "bmc_prochot_cpu_clamp": _v_prochot,
    "lustre_ost_evict_reconnect": _v_lustre,
    "thp_compaction_memory_stall": _v_thp,
}


def test_fault_kinds_have_a_visibility_check():
    assert set(_VISIBLE) == set(c.FAULT_KINDS)


def test_hang_peers_spin_then_exit(J):
    """After a rank dies, its peers sit at ~100 % util at low power until the NCCL timeout."""
    for kind in ("bus_drop_series_vanish", "hbm_dbe_contained_kill", "host_freeze_scrape_timeout"):
        j = _smallest(J, kind)
        df = _raw(j)
        node, on = next(iter(j.culprits.items()))
        peer = next(n for n in j.nodes if n != node)
        t = on + timedelta(minutes=4)
        u = _per_time(df, peer, c.GPU_UTIL, "mean").filter(pl.col("time") > t).head(3)
        pw = _per_time(df, peer, c.POWER, "mean").filter(pl.col("time") > t).head(3)
        s = c.SITES[j.site]
        assert u["v"].min() >= 99
        assert pw["v"].max() < s.idle_w + 0.3 * (s.tdp - s.idle_w)
        texit = on + timedelta(seconds=j.spec["nccl_timeout"] + 60)
        u2 = _per_time(df, peer, c.GPU_UTIL, "mean").filter(pl.col("time") > texit)
        assert u2.height > 0 and u2["v"].max() == 0


def test_slow_culprit_slows_everyone(J):
    for kind in ("hw_slowdown_stuck_asserted", "bmc_prochot_cpu_clamp"):
        j = _smallest(J, kind)
        df = _raw(j)
        _node, on = min(j.culprits.items(), key=lambda kv: kv[1])
        peer = next(n for n in j.nodes if n not in j.culprits)
        s = _per_time(df, peer, c.PROF_TENSOR, "mean")
        for ck in j.spec["ckpt"]:  # all-node checkpoint pauses are not the baseline
            s = s.filter(
                (pl.col("time") < _sec(j, ck[0] - 10)) | (pl.col("time") > _sec(j, ck[1] + 30))
            )
        before = _before(s, on - timedelta(minutes=1)).tail(10)["v"].mean()
        after = _after(s, on + timedelta(minutes=2)).head(10)["v"].mean()
        assert after < 0.9 * before, (j.name, before, after)
        # the peer's own clock did not change
        clk = _after(_per_time(df, peer, c.SM_CLOCK, "min"), on + timedelta(minutes=2)).head(10)
        assert clk["v"].min() > 0.95 * c.SITES[j.site].sm_max


def test_local_signatures_stay_on_the_culprit(J):
    """In fault jobs, peers show none of the culprit's local signature."""
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
    x = df.filter((pl.col("metric") == c.XID) & pl.col("value").is_in([79.0, 94.0, 74.0]))
    if x.height:
        out.append("xid")
    for m in (c.ECC_DBE, c.NVL_RECOVERY):
        v = df.filter((pl.col("metric") == m) & (pl.col("value") > 0))
        if v.height:
            out.append(m)
    if df.filter((pl.col("metric") == c.IB_STATE) & (pl.col("value") != 4)).height:
        out.append("ib_state")
    if df.filter((pl.col("metric") == c.FS_DEVERR) & (pl.col("value") != 0)).height:
        out.append("fs_deverr")
    if df.filter((pl.col("metric") == c.CPU_FREQ) & (pl.col("value") < 0.8 * s.cpu_hz)).height:
        out.append("cpufreq")
    if (
        df.filter(pl.col("metric") == c.NET_SPEED)
        .group_by("node", "device")
        .agg(pl.col("value").n_unique().alias("u"))
        .filter(pl.col("u") > 1)
        .height
    ):
        out.append("speed")
    if s.reasons:
        r = df.filter(pl.col("metric") == s.reasons)["value"].cast(pl.Int64)
        if ((r & 0x8) > 0).any():
            out.append("hw_slowdown")
    if df.filter((pl.col("metric") == c.PROCS_RUNNING) & (pl.col("value") > 40)).height:
        out.append("procs_running")
    return out


def test_healthy_jobs_free_of_fault_signatures(J):
    for j in J:
        if j.faulty:
            continue
        df = j.raw
        assert not _signatures(df, j), (j.name, _signatures(df, j))
        # no target vanishes (beyond lost scrapes and a Prometheus-side gap)
        last = df.group_by("node").agg(pl.col("time").max())["time"]
        assert (last > j.end - timedelta(minutes=2)).all(), j.name
        if j.kind != "fabric_mgr_counter_clear":
            bad = (
                df.filter(pl.col("metric").is_in(list(c.COUNTER_METRICS - c.RATE_VALUED_COUNTERS)))
                .sort("time")
                .group_by("node", "metric", "device")
                .agg((pl.col("value").diff() < 0).sum().alias("neg"))
                .filter(pl.col("neg") > 0)
            )
            assert bad.height == 0, (j.name, bad.head())
        del df


def test_validation_loop_all_nodes(J):
    j = _smallest(J, "periodic_validation_loop")
    df = _raw(j)
    a, z = j.spec["benign"]["evals"][0]
    m = c.PROF_TENSOR
    d = df.filter(pl.col("metric") == m)
    inside = d.filter((pl.col("time") > _sec(j, a + 30)) & (pl.col("time") < _sec(j, z - 5)))
    before = d.filter((pl.col("time") > _sec(j, a - 150)) & (pl.col("time") < _sec(j, a - 20)))
    for ck in j.spec["ckpt"]:
        before = before.filter(
            (pl.col("time") < _sec(j, ck[0] - 10)) | (pl.col("time") > _sec(j, ck[1] + 30))
        )
    bi = inside.group_by("node").agg(pl.col("value").mean().alias("i"))
    bb = before.group_by("node").agg(pl.col("value").mean().alias("b"))
    x = bi.join(bb, on="node")
    assert x.height == len(j.nodes) and (x["i"] < 0.6 * x["b"]).all()


def test_rank0_save(J):
    j = _smallest(J, "rank0_consolidated_save")
    df = _raw(j)
    a, z = j.spec["benign"]["saves"][0]
    w = df.filter((pl.col("time") > _sec(j, a + 20)) & (pl.col("time") < _sec(j, z - 5)))
    mem = w.filter(pl.col("metric") == c.MEM_AVAIL).group_by("node").agg(pl.col("value").mean())
    v = dict(zip(mem["node"], mem["value"], strict=False))
    r0 = v.pop(j.nodes[0])
    assert r0 < 0.8 * min(v.values())
    u = w.filter((pl.col("metric") == c.GPU_UTIL) & (pl.col("node") != j.nodes[0]))["value"]
    if u.len():
        assert u.min() >= 97


def test_prolog_diag_nodes_busy_before_start(J):
    j = _smallest(J, "prolog_dcgm_diag_burst")
    df = _raw(j)
    diag = j.spec["benign"]["diag"]
    i = max(diag, key=diag.get)
    t0, t1 = _sec(j, 20), _sec(j, 5 + diag[i] - 10)
    p = (
        df.filter((pl.col("metric") == c.POWER) & (pl.col("time") > t0) & (pl.col("time") < t1))
        .group_by("node")
        .agg(pl.col("value").mean())
    )
    v = dict(zip(p["node"], p["value"], strict=False))
    s = c.SITES[j.site]
    others = [v[n] for k, n in enumerate(j.nodes) if k not in diag and n in v]
    assert v[j.nodes[i]] > 0.6 * s.tdp and max(others) < 0.2 * s.tdp


def test_generation_mix_constant_offset(J):
    j = _smallest(J, "node_generation_mix")
    df = _raw(j)
    old = {j.nodes[i] for i in j.spec["benign"]["older"]}
    mid = j.start + timedelta(minutes=j.minutes / 2)
    clk = (
        df.filter((pl.col("metric") == c.SM_CLOCK) & (pl.col("time") > mid))
        .group_by("node")
        .agg(pl.col("value").median())
    )
    a = clk.filter(pl.col("node").is_in(list(old)))["value"].max()
    b = clk.filter(~pl.col("node").is_in(list(old)))["value"].min()
    assert a < b


def test_pp_stages_fb(J):
    j = _smallest(J, "pp_stage_uneven_layers")
    df = _raw(j)
    mid = j.start + timedelta(minutes=j.minutes / 2)
    fb = (
        df.filter((pl.col("metric") == c.FB_USED) & (pl.col("time") > mid))
        .group_by("node")
        .agg(pl.col("value").mean())
    )
    assert fb["value"].max() / fb["value"].min() > 1.03


def test_exporter_rollout_gap_and_xid_cleared(J):
    j = _smallest(J, "dcgm_exporter_rollout_restart")
    df = _raw(j)
    for i, (a, z) in j.spec["benign"]["restarts"].items():
        node = j.nodes[i]
        dc = df.filter((pl.col("node") == node) & pl.col("metric").str.starts_with("DCGM"))
        inside = dc.filter((pl.col("time") >= _sec(j, a)) & (pl.col("time") < _sec(j, z)))
        assert inside.height == 0
        nd = df.filter((pl.col("node") == node) & pl.col("metric").str.starts_with("node_"))
        assert nd.filter(pl.col("time") > _sec(j, z)).height > 0
        x = dc.filter((pl.col("metric") == c.XID) & (pl.col("time") > _sec(j, z + 60)))
        assert (x["value"] == 0).all()


def test_fabric_counter_clear_on_all_nodes(J):
    j = _smallest(J, "fabric_mgr_counter_clear")
    df = _raw(j)
    neg = (
        df.filter(pl.col("metric") == c.IB_RX)
        .sort("time")
        .group_by("node", "device")
        .agg((pl.col("value").diff() < 0).sum().alias("neg"))
    )
    n_clear = len(j.spec["benign"]["clears"])
    assert (neg["neg"] >= 1).mean() > 0.95 and neg["neg"].max() <= n_clear


def test_tsdb_gap_all_targets(J):
    j = _smallest(J, "tsdb_compaction_scrape_gap")
    df = _raw(j)
    for a, z in j.spec["benign"]["gaps"]:
        assert df.filter((pl.col("time") >= _sec(j, a)) & (pl.col("time") < _sec(j, z))).height == 0
        assert df.filter(pl.col("time") >= _sec(j, z)).height > 0


def test_blank_values_only_on_blank_nodes(J):
    j = _smallest(J, "nan_blank_field_nodes")
    df = _raw(j)
    bl = df.filter(pl.col("value").is_in([c._INT32_NOT_SUPPORTED, c._FP64_NOT_SUPPORTED]))
    assert bl.height > 0
    assert set(bl["node"].unique()) == {j.nodes[i] for i in j.spec["benign"]["blank_nodes"]}


def test_moe_hot_nodes_rotate(J):
    j = _smallest(J, "moe_router_hot_experts")
    df = _raw(j)
    ph = j.spec["benign"]["phases"]
    a, hot = ph[1]
    z = ph[2][0] if len(ph) > 2 else a + 240
    w = df.filter(
        (pl.col("metric") == c.PROF_TENSOR)
        & (pl.col("time") > _sec(j, a + 30))
        & (pl.col("time") < _sec(j, z - 10))
    )
    for ck in j.spec["ckpt"]:
        w = w.filter(
            (pl.col("time") < _sec(j, ck[0] - 10)) | (pl.col("time") > _sec(j, ck[1] + 30))
        )
    if w.height:
        m = w.group_by("node").agg(pl.col("value").mean())
        hv = m.filter(pl.col("node").is_in([j.nodes[i] for i in hot]))["value"].mean()
        cv = m.filter(~pl.col("node").is_in([j.nodes[i] for i in hot]))["value"].mean()
        assert hv > 1.1 * cv


def test_shared_fs_slowdown_all_nodes(J):
    j = _smallest(J, "shared_fs_metadata_slowdown")
    df = _raw(j)
    a, z, _lv = j.spec["benign"]["slow"]
    cpu = df.filter((pl.col("metric") == c.CPU_SECONDS) & (pl.col("device") == "iowait"))
    r = (
        cpu.sort("time")
        .group_by("node")
        .agg(
            (
                pl.col("value").filter(pl.col("time") < _sec(j, z)).last()
                - pl.col("value").filter(pl.col("time") > _sec(j, a)).first()
            ).alias("d")
        )
    )
    assert (r["d"] > 1.0 * (z - a) * 0.5).all()


# ---------------------------------------------------------------------------------------------
# Exporter behaviour
# ---------------------------------------------------------------------------------------------


def test_site_specifics(J):
    for site in c.SITES:
        j = min((j for j in J if j.site == site), key=_est)
        df = _raw(j)
        ms = set(df["metric"].unique())
        s = c.SITES[site]
        assert {m for m in ms if m.startswith("DCGM")} == set(s.fields), site
        assert any(m.startswith("node_infiniband") for m in ms) == bool(s.ib), site
        assert (c.CPU_FREQ in ms) == ("cpufreq" in s.collectors), site
        assert (c.PSI_MEM_S in ms) == ("pressure" in s.collectors), site
        assert (c.EDAC_CE in ms) == ("edac" in s.collectors), site
        assert (c.HWMON_TEMP in ms) == ("hwmon" in s.collectors), site
        assert any(m.startswith("node_ethtool") for m in ms) == bool(s.ethtool), site
        if site == "ndv":
            assert c.GPU_UTIL in ms and s.reasons is None and c.IB_SYMBOL not in ms
        if site == "oci":
            assert c.PCIE_RX_TP in ms and c.PROF_PCIE_RX not in ms
        if site == "l4s":
            assert c.NVLINK_BW not in ms and c.MEMORY_TEMP not in ms and c.CLOCKS_EVENT in ms
        if site == "gh2":
            assert len(df.filter(pl.col("metric") == c.GPU_TEMP)["device"].unique()) == 1


def test_lost_scrapes_and_phases(J):
    j = min(J, key=_est)
    df = _raw(j)
    s = df.filter(pl.col("metric") == c.GPU_TEMP).filter(pl.col("device") == "0")
    per = s.group_by("node").agg(pl.col("time").min().alias("t0"), pl.len().alias("n"))
    assert per["t0"].n_unique() > 1  # every target has its own phase
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
    assert xs > 0  # stale application Xids on healthy jobs
    assert sum(bool(j.spec["ckpt"]) for j in J) >= 20
