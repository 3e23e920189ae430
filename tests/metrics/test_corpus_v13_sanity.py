"""Sanity tests of corpus v13 itself (never of a detector).

Run with ``pytest --noconftest tests/metrics/test_corpus_v13_sanity.py -q``.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import numpy as np
import polars as pl
import pytest

from . import corpus_v13 as c
from .corpus_v9 import BENIGN_KINDS as V9_BENIGN
from .corpus_v9 import FAULT_KINDS as V9_FAULTS
from .corpus_v10 import BENIGN_KINDS as V10_BENIGN
from .corpus_v10 import FAULT_KINDS as V10_FAULTS
from .corpus_v11 import BENIGN_KINDS as V11_BENIGN
from .corpus_v11 import FAULT_KINDS as V11_FAULTS
from .corpus_v12 import BENIGN_KINDS as V12_BENIGN
from .corpus_v12 import FAULT_KINDS as V12_FAULTS

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


_V12_SITES = {"g3n", "h4p", "a4o", "l2c", "bsx", "lcw"}


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
    assert c.is_counter(c.ET_OOB) and c.is_counter(c.IB_OOS) and c.is_counter(c.EDAC_CE)
    assert not c.is_counter(c.REMAP_FAIL) and c.is_counter(c.VM_OOM)
    assert set(c.SITES) == {"h2o", "a8u", "h8r", "l4x", "hsn", "hnv"}
    assert c.ROW_CAP == 5.45e6


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
        | {"compile_warmup_graph_capture", "dcp_sharded_save_every_node", "elastic_rdzv_scale_up"}
    )
    for k in c.FAULT_KINDS + c.BENIGN_KINDS:
        assert k not in old and not k.startswith("checkpoint"), k
    reused = [k for k in c.FAULT_KINDS if k.endswith("_v13")]
    assert 4 <= len(reused) <= 6 and all(k[: -len("_v13")] in V12_FAULTS for k in reused)
    assert len(c.FAULT_KINDS) - len(reused) >= 12
    used = {
        *("gb3", "efa", "a3g", "h1n", "rtx", "a4h"),
        *("h20", "dgx", "ndv", "oci", "l4s", "gh2"),
        *("b2h", "gbr", "h2r", "a8c", "v1c", "ckw"),
        *_V12_SITES,
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
    assert min(Counter(j.site for j in J).values()) >= 15
    sizes = [len(j.nodes) for j in J]
    assert min(sizes) == 2 and max(sizes) == 1024 and sum(s >= 256 for s in sizes) >= 5
    assert np.median(sizes) <= 64
    assert all(30 - 1e-6 <= j.minutes <= 125 for j in J)
    assert all(10 <= j.dcgm_interval <= 120 and 15 <= j.node_interval <= 120 for j in J)
    a8 = [j for j in J if j.site == "a8u"]
    assert a8 and all(j.dcgm_interval >= 60 and j.node_interval >= 30 for j in a8)
    assert all(len(set(j.nodes)) == len(j.nodes) for j in J)
    assert len({j.name for j in J}) == 120


def test_kinds_on_sites_that_can_show_them(J):
    for j in J:
        s = c.SITES[j.site]
        k = j.kind
        if k in ("ib_port_flap_recurring_short_v13", "hca_pcie_downtrain_xmit_wait_v13"):
            assert s.ib and not s.roce and c.IB_XMIT_WAIT in s.ib_extra
        if k == "roce_nic_out_of_buffer_rx_drops":
            assert s.roce and c.ET_OOB in s.ethtool
        if k == "hypervisor_steal_time_vm_straggler":
            assert s.vm
        if k == "nvlink_link_inactive_after_recovery":
            assert c.NVL_RECOVERY in s.fields
        if k == "hbm_sbe_rate_climb_no_slowdown":
            assert c.ECC_SBE in s.fields and c.MEMORY_TEMP in s.fields
        if k == "hbm_hot_spot_memclk_derate_v13":
            assert c.MEMORY_TEMP in s.fields
        if k == "bios_powersave_governor_low_cpufreq":
            assert "cpufreq" in s.collectors
        if k == "pfs_client_eviction_reads_hang":
            assert s.pfs
        if k == "gpu_heatsink_creep_slow_degrade":
            assert s.r_th > 0.04  # air cooled
        if k == "exporter_fleet_upgrade_field_rename":
            assert s.reasons == c.CLOCK_THROTTLE


def test_labels_inside_windows(J):
    for j in J:
        for node, on in j.culprits.items():
            assert node in j.nodes
            assert j.start < on < j.end - timedelta(minutes=1.5), j.name
            assert on.tzinfo is not None


def test_row_budget(J):
    ests = sorted(_est(j) for j in J)
    assert ests[-1] <= c.ROW_CAP
    assert sum(ests) < 300e6
    mid = sorted(J, key=_est)[60]
    assert abs(_raw(mid).height / _est(mid) - 1) < 0.05


def test_biggest_job_under_row_cap(J):
    j = max(J, key=lambda x: len(x.nodes))
    assert len(j.nodes) == 1024
    h = j.raw.height
    assert h <= c.ROW_CAP, h


# ---------------------------------------------------------------------------------------------
# Each fault is visible, at the onset, in the series the README names
# ---------------------------------------------------------------------------------------------

_MISSING_OK = ("dimm_ce_burst_then_ue_panic",)


def test_onset_on_culprit_grid_and_visible(J):
    """The onset is a sample of the culprit (or a scheduled scrape that is missing), and
    that sample shows the fault."""
    for kind in c.FAULT_KINDS:
        j = _smallest(J, kind)
        df = _raw(j)
        for node, on in j.culprits.items():
            rows = df.filter((pl.col("node") == node) & (pl.col("time") == on))
            if kind not in _MISSING_OK or "edac" in c.SITES[j.site].collectors:
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
            rows = df.filter((pl.col("node") == node) & (pl.col("time") == on))
            assert rows.height > 0 or j.kind in _MISSING_OK, (j.name, node)
            assert _VISIBLE[j.kind](j, df, node, on), (j.name, node)
            nothing_before = not _local(df, j, node, on, before=True)
            assert nothing_before, (j.name, node, _local(df, j, node, on, before=True))
        peers = df.filter(~pl.col("node").is_in(list(j.culprits)))
        assert not _signatures(peers, j), (j.name, _signatures(peers, j))
        del df, peers


def _local(df, j, node, on, before):
    """Fault signatures of ``node`` before the fault's first effect (none expected)."""
    te = _sec(j, j.spec["culprits"][_idx(j, node)])
    sub = df.filter((pl.col("node") == node) & (pl.col("time") < min(on, te)))
    return _signatures(sub, j)


def _gpu_of(j, node):
    i = j.nodes.index(node)
    return str(j.spec["fault"]["gpu"][i])


def _idx(j, node):
    return j.nodes.index(node)


def _prev(s: pl.DataFrame, on, col="value"):
    b = _before(s, on)
    return b[col][-1] if b.height else None


def _v_ecc_abort(j, df, node, on):
    g = _gpu_of(j, node)
    s = _series(df, node, c.XID, g)
    ok = _at(s, on)["value"][0] in (48.0, 94.0)
    ok = ok and (~_before(s, on)["value"].is_in([48.0, 94.0])).all()
    if c.ECC_DBE in c.SITES[j.site].fields:
        d = _series(df, node, c.ECC_DBE, g)
        ok = ok and _at(d, on)["value"][0] == _prev(d, on) + 1
    return ok


def _v_replay(j, df, node, on):
    s = _series(df, node, c.PCIE_REPLAY, _gpu_of(j, node))
    return _at(s, on)["value"][0] >= _prev(s, on) + 10


def _v_creep(j, df, node, on):
    g = _gpu_of(j, node)
    s = _series(df, node, c.GPU_TEMP, g)
    te = _sec(j, j.spec["culprits"][_idx(j, node)])
    base = _before(s, te).tail(8)["value"].mean()
    late = _after(s, on)["value"].max()
    st = c.SITES[j.site]
    return _at(s, on)["value"][0] >= base + 0.5 and late >= st.slow_temp - 2


def _v_nvlink(j, df, node, on):
    g = _gpu_of(j, node)
    r = _series(df, node, c.NVL_RECOVERY, g)
    x = _series(df, node, c.NVL_CRC, g)
    return _at(r, on)["value"][0] >= _prev(r, on) + 1 and _at(x, on)["value"][0] >= _prev(x, on) + 5


def _cpu_mode_rate(df, node, mode):
    cpu = df.filter(
        (pl.col("node") == node) & (pl.col("metric") == c.CPU_SECONDS) & (pl.col("device") == mode)
    ).select("time", pl.col("value").alias("v"))
    return _rate(cpu.sort("time")).drop_nulls()


def _v_steal(j, df, node, on):
    r = _cpu_mode_rate(df, node, "steal")
    return _at(r, on)["r"][0] > _before(r, on)["r"].tail(5).max() + 0.3


def _v_dimm(j, df, node, on):
    if "edac" in c.SITES[j.site].collectors:
        s = _per_time(df, node, c.EDAC_CE, "sum")
        return _at(s, on)["v"][0] > _prev(s, on, "v")
    mine = df.filter(pl.col("node") == node)
    return mine.filter(pl.col("time") >= on).height == 0 and mine.height > 0


def _v_counter_up(metric, by=1.0):
    def f(j, df, node, on):
        s = _per_time(df, node, metric, "sum")
        return _at(s, on)["v"][0] >= _prev(s, on, "v") + by

    return f


def _delta(df, node, metric):
    s = _per_time(df, node, metric, "max")
    return s.with_columns(pl.col("v").diff().alias("d")).drop_nulls()


def _v_oob(j, df, node, on):
    s = _delta(df, node, c.ET_OOB)
    return _at(s, on)["d"][0] > _before(s, on)["d"].tail(10).max()


def _v_sbe(j, df, node, on):
    s = _series(df, node, c.ECC_SBE, _gpu_of(j, node))
    return _at(s, on)["value"][0] > _prev(s, on) and _before(s, on)["value"].n_unique() == 1


def _v_pfs(j, df, node, on):
    s = df.filter(
        (pl.col("node") == node)
        & (pl.col("metric") == c.FS_DEVERR)
        & (pl.col("device") == c.SITES[j.site].pfs)
    ).sort("time")
    bl = _per_time(df, node, c.PROCS_BLOCKED, "max")
    stuck = _at(s, on)["value"][0] == 1 or _at(bl, on)["v"][0] >= 4
    later = _after(s, on).filter(pl.col("time") < on + timedelta(seconds=3 * j.node_interval))
    dev_err = _at(s, on)["value"][0] == 1 or (later["value"] == 1).any()
    return stuck and _before(s, on)["value"].max() == 0 and dev_err


def _v_softirq(j, df, node, on):
    r = _cpu_mode_rate(df, node, "softirq")
    return _at(r, on)["r"][0] > _before(r, on)["r"].tail(5).max() + 0.02


def _v_bios(j, df, node, on):
    f = _per_time(df, node, c.CPU_FREQ, "max")
    return _at(f, on)["v"][0] < 0.5 * c.SITES[j.site].cpu_hz and _before(f, on).height == 0


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


def _v_xmit_wait(j, df, node, on):
    s = _delta(df, node, c.IB_XMIT_WAIT)
    return _at(s, on)["d"][0] > 3e5 + _before(s, on)["d"].tail(10).max()


def _v_slab(j, df, node, on):
    s = _per_time(df, node, c.MEM_AVAIL, "max")
    tot = c.SITES[j.site].mem_gib * c._GIB
    later = _after(s, on + timedelta(seconds=j.spec["hang_lag"] - 60))["v"]
    return _at(s, on)["v"][0] < _prev(s, on, "v") - 0.02 * tot and later.min() < 0.1 * tot


_VISIBLE = {
    "uncorrectable_ecc_contained_rank_abort": _v_ecc_abort,
    "gpu_pcie_replay_storm_riser": _v_replay,
    "gpu_heatsink_creep_slow_degrade": _v_creep,
    "nvlink_link_inactive_after_recovery": _v_nvlink,
    "hypervisor_steal_time_vm_straggler": _v_steal,
    "dimm_ce_burst_then_ue_panic": _v_dimm,
    "fabric_link_retrain_carrier_flaps": _v_counter_up(c.NET_CARRIER, 2),
    "roce_nic_out_of_buffer_rx_drops": _v_oob,
    "hbm_sbe_rate_climb_no_slowdown": _v_sbe,
    "pfs_client_eviction_reads_hang": _v_pfs,
    "nic_irq_pinned_core_softirq_hot": _v_softirq,
    "bios_powersave_governor_low_cpufreq": _v_bios,
    "psu_loss_power_brake_bursts_v13": _v_brake,
    "ib_port_flap_recurring_short_v13": _v_counter_up(c.IB_DOWNED),
    "hca_pcie_downtrain_xmit_wait_v13": _v_xmit_wait,
    "slab_leak_oom_kill_rank_v13": _v_slab,
    "hbm_hot_spot_memclk_derate_v13": _v_hbm,
}


def test_fault_kinds_have_a_visibility_check():
    assert set(_VISIBLE) == set(c.FAULT_KINDS)


def test_hang_peers_spin_then_exit(J):
    """After a rank dies, its peers sit at ~100 % util at low power until the NCCL timeout."""
    for kind in sorted(c._HANG_KINDS):
        j = _smallest(J, kind)
        df = _raw(j)
        node = next(iter(j.culprits))
        i = _idx(j, node)
        te = j.spec["culprits"][i]
        lag = j.spec.get("hang_lag", 0.0) + j.spec["fault"].get("kill_lag", 0)
        peer = next(n for n in j.nodes if n != node)
        t = _sec(j, te + lag + 240)
        u = _per_time(df, peer, c.GPU_UTIL, "mean").filter(pl.col("time") > t).head(3)
        pw = _per_time(df, peer, c.POWER, "mean").filter(pl.col("time") > t).head(3)
        s = c.SITES[j.site]
        assert u["v"].min() >= 99, j.name
        assert pw["v"].max() < s.idle_w + 0.3 * (s.tdp - s.idle_w), j.name
        texit = _sec(j, te + lag + j.spec["nccl_timeout"] + 60)
        u2 = _per_time(df, peer, c.GPU_UTIL, "mean").filter(pl.col("time") > texit)
        assert u2.height > 0 and u2["v"].max() == 0, j.name


def test_slow_culprit_slows_everyone(J):
    for kind in (
        "gpu_pcie_replay_storm_riser",
        "hypervisor_steal_time_vm_straggler",
        "roce_nic_out_of_buffer_rx_drops",
        "nic_irq_pinned_core_softirq_hot",
        "nvlink_link_inactive_after_recovery",
        "hca_pcie_downtrain_xmit_wait_v13",
        "hbm_hot_spot_memclk_derate_v13",
    ):
        j = _smallest(J, kind)
        df = _raw(j)
        _node, on = min(j.culprits.items(), key=lambda kv: kv[1])
        peer = next(n for n in j.nodes if n not in j.culprits)
        s = _per_time(df, peer, c.POWER, "mean").filter(_train_mask(j))
        before = _before(s, on - timedelta(minutes=1)).tail(8)["v"].mean()
        after = _after(s, on + timedelta(minutes=2)).head(8)["v"].mean()
        assert after < 0.995 * before, (j.name, before, after)
        clk = _after(_per_time(df, peer, c.SM_CLOCK, "min"), on + timedelta(minutes=2))
        clk = clk.filter(_train_mask(j)).head(10)
        assert clk["v"].min() > 0.95 * c.SITES[j.site].sm_max


def test_row_remap_free_sbe_climb_does_not_slow(J):
    j = _smallest(J, "hbm_sbe_rate_climb_no_slowdown")
    df = _raw(j)
    node, on = min(j.culprits.items(), key=lambda kv: kv[1])
    s = _per_time(df, node, c.POWER, "mean").filter(_train_mask(j))
    before = _before(s, on - timedelta(minutes=1)).tail(8)["v"].mean()
    after = _after(s, on + timedelta(minutes=2)).head(8)["v"].mean()
    assert abs(after / before - 1) < 0.03
    sbe = _series(df, node, c.ECC_SBE, _gpu_of(j, node))["value"]
    assert sbe[-1] - sbe[0] >= 5


def test_intermittent_faults_recur(J):
    for kind in (
        "psu_loss_power_brake_bursts_v13",
        "ib_port_flap_recurring_short_v13",
        "fabric_link_retrain_carrier_flaps",
    ):
        for j in (j for j in J if j.kind == kind):
            for eps in j.spec["fault"]["episodes"].values():
                assert len(eps) >= 2, j.name
                assert max(z - a for a, z in eps) <= 180, j.name
    for j in (j for j in J if j.kind == "pfs_client_eviction_reads_hang"):
        for eps in j.spec["fault"]["episodes"].values():
            assert max(z - a for a, z in eps) <= 300, j.name


def test_flaps_between_scrapes_show_only_in_counters(J):
    """Most retrain flaps are shorter than a scrape interval: network_up rarely catches them."""
    j = _smallest(J, "fabric_link_retrain_carrier_flaps")
    df = _raw(j)
    node = next(iter(j.culprits))
    eps = j.spec["fault"]["episodes"][_idx(j, node)]
    s = _per_time(df, node, c.NET_CARRIER, "sum")
    assert s["v"][-1] - s["v"][0] == 2 * sum(1 for a, _z in eps if _sec(j, a) < s["time"][-1])


def test_heatsink_creep_is_slow_and_throttles_late(J):
    j = _smallest(J, "gpu_heatsink_creep_slow_degrade")
    df = _raw(j)
    node, on = min(j.culprits.items(), key=lambda kv: kv[1])
    g = _gpu_of(j, node)
    s = _series(df, node, c.GPU_TEMP, g)
    first5 = _after(s, on).filter(pl.col("time") < on + timedelta(minutes=5))["value"]
    i = _idx(j, node)
    f = j.spec["fault"]
    assert f["ramp"][i] >= 600
    assert first5.max() - first5.min() <= f["dmax"][i] * 300 / f["ramp"][i] + 3
    r = _series(df, node, c.SITES[j.site].reasons, g)
    assert (r.filter(pl.col("time") > on)["value"].cast(pl.Int64) & 0x20 > 0).any()
    assert not (r.filter(pl.col("time") < on)["value"].cast(pl.Int64) & 0x20 > 0).any()


def test_bios_powersave_from_the_first_sample(J):
    j = _smallest(J, "bios_powersave_governor_low_cpufreq")
    df = _raw(j)
    node = next(iter(j.culprits))
    f = df.filter(pl.col("metric") == c.CPU_FREQ).group_by("node").agg(pl.col("value").max())
    v = dict(zip(f["node"], f["value"], strict=True))
    assert v[node] < 0.5 * c.SITES[j.site].cpu_hz
    assert all(x > 0.9 * c.SITES[j.site].cpu_hz for n, x in v.items() if n != node)


def test_panic_node_disappears(J):
    j = _smallest(J, "dimm_ce_burst_then_ue_panic")
    df = _raw(j)
    node = next(iter(j.culprits))
    i = _idx(j, node)
    panic = _sec(j, j.spec["culprits"][i] + j.spec["hang_lag"])
    assert df.filter((pl.col("node") == node) & (pl.col("time") >= panic)).height == 0
    assert df.filter((pl.col("node") != node) & (pl.col("time") >= panic)).height > 0


def test_local_signatures_stay_on_the_culprit(J):
    for kind in c.FAULT_KINDS:
        j = _smallest(J, kind)
        df = _raw(j).filter(~pl.col("node").is_in(list(j.culprits)))
        assert not _signatures(df, j), (j.name, _signatures(df, j))


# ---------------------------------------------------------------------------------------------
# Healthy jobs
# ---------------------------------------------------------------------------------------------


def _max_rate(df, metric, device=None):
    f = df.filter(pl.col("metric") == metric)
    if device is not None:
        f = f.filter(pl.col("device") == device)
    d = (
        f.sort("time")
        .group_by("node", "device")
        .agg((pl.col("value").diff() / pl.col("time").diff().dt.total_seconds()).max())
    )
    v = d["value"].max() if d.height else 0.0
    return v if v is not None else 0.0


def _max_increase(df, metric):
    d = (
        df.filter(pl.col("metric") == metric)
        .group_by("node", "device")
        .agg((pl.col("value").max() - pl.col("value").min()).alias("d"))
    )
    v = d["d"].max() if d.height else 0.0
    return v if v is not None else 0.0


def _signatures(df: pl.DataFrame, j) -> list[str]:
    s = c.SITES[j.site]
    out = []
    x = df.filter(
        (pl.col("metric") == c.XID)
        & pl.col("value").is_in([48.0, 63.0, 64.0, 74.0, 79.0, 94.0, 95.0, 119.0])
    )
    if x.height:
        out.append("xid")
    for m in (c.ECC_DBE, c.NVL_RECOVERY, c.MEM_HWCORRUPT, c.REMAP_FAIL):
        if df.filter((pl.col("metric") == m) & (pl.col("value") > 0)).height:
            out.append(m)
    if df.filter((pl.col("metric") == c.IB_STATE) & (pl.col("value") != 4)).height:
        out.append("ib_state")
    if df.filter((pl.col("metric") == c.NET_UP) & (pl.col("value") == 0)).height:
        out.append("net_up")
    if _max_increase(df, c.NET_CARRIER) > 0:
        out.append("carrier")
    if df.filter((pl.col("metric") == c.FS_DEVERR) & (pl.col("value") != 0)).height:
        out.append("fs_deverr")
    if df.filter((pl.col("metric") == c.DISK_IO_NOW) & (pl.col("value") > 4)).height:
        out.append("disk_queue")
    capped = df.filter((pl.col("metric") == c.POWER_LIMIT) & (pl.col("value") < s.tdp)).height
    if capped and j.kind != "facility_power_cap_all_nodes":
        out.append("power_limit")
    if df.filter((pl.col("metric") == c.MEM_CLOCK) & (pl.col("value") < s.mem_clk)).height:
        out.append("mem_clock")
    r = df.filter(pl.col("metric").is_in([c.CLOCK_THROTTLE, c.CLOCKS_EVENT]))["value"]
    if (((r.cast(pl.Int64)) & 0xC8) > 0).any():
        out.append("hw_slowdown")
    if _max_rate(df, c.IB_XMIT_WAIT) > 1e5:
        out.append("xmit_wait")
    if _max_rate(df, c.ET_OOB) > 100 or _max_rate(df, c.IB_OOS) > 100:
        out.append("rx_drops")
    if _max_rate(df, c.CPU_PKG_THROTTLE) > 0:
        out.append("cpu_throttle")
    if _max_rate(df, c.VM_OOM) > 0:
        out.append("oom")
    if _max_rate(df, c.CPU_SECONDS, "steal") > 1.0:
        out.append("steal")
    if _max_rate(df, c.CPU_SECONDS, "softirq") > 0.6:
        out.append("softirq")
    if _max_rate(df, c.PCIE_REPLAY) > 2.0:
        out.append("pcie_replay_storm")
    if _max_increase(df, c.ECC_SBE) > 0:
        out.append("sbe")
    if _max_increase(df, c.EDAC_CE) > 8:
        out.append("edac_burst")
    fq = df.filter(pl.col("metric") == c.CPU_FREQ)["value"]
    if fq.len() and fq.min() < 0.6 * s.cpu_hz:
        out.append("cpufreq")
    return out


_GONE_OK = ("spot_reclaim_node_swap_restart",)


def test_healthy_jobs_free_of_fault_signatures(J):
    for j in J:
        if j.faulty:
            continue
        df = j.raw
        assert not _signatures(df, j), (j.name, _signatures(df, j))
        last = df.group_by("node").agg(pl.col("time").max())
        gone = last.filter(pl.col("time") < j.end - timedelta(minutes=2))["node"].to_list()
        if j.kind in _GONE_OK:
            assert gone == [j.nodes[j.spec["benign"]["old"]]], j.name
        else:
            assert not gone, (j.name, gone)
        ms = c.COUNTER_METRICS - c.RATE_VALUED_COUNTERS
        bad = (
            df.filter(pl.col("metric").is_in(list(ms)))
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


def test_shard_write_every_node_writes(J):
    j = _smallest(J, "every_rank_shard_write_burst")
    df = _raw(j)
    a, z = j.spec["benign"]["saves"][0]
    dev = c.SITES[j.site].netdevs[0]
    d = _counter_delta(df, c.NET_TX, _sec(j, a - 60), _sec(j, z + 60), dev)
    assert len(d) == len(j.nodes)
    assert min(d.values()) > 0.4 * j.spec["benign"]["rate"] * (z - a) * 0.6


def test_rank0_generation_others_spin(J):
    j = _smallest(J, "rank0_sample_generation_others_wait")
    df = _raw(j)
    a, z = j.spec["benign"]["gens"][0]
    w = df.filter(
        (pl.col("metric") == c.POWER)
        & (pl.col("time") > _sec(j, a + 60))
        & (pl.col("time") < _sec(j, z - 5))
    )
    if w.height:
        p = w.group_by("node").agg(pl.col("value").mean())
        v = dict(zip(p["node"], p["value"], strict=True))
        r0 = v.pop(j.nodes[0])
        if v:
            assert r0 > 1.3 * max(v.values())
        u = df.filter(
            (pl.col("metric") == c.GPU_UTIL)
            & (pl.col("time") > _sec(j, a + 60))
            & (pl.col("time") < _sec(j, z - 5))
        )
        assert u["value"].min() >= 97


def test_batch_rampup_every_node_rises(J):
    j = _smallest(J, "batch_size_rampup_jobwide")
    df = _raw(j)
    sp = j.spec
    t0 = sp["init_end"] + sp["init_spread"] + sp["ramp"] + 120
    t1 = t0 + sp["benign"]["ramp"] + 300
    p = df.filter(pl.col("metric") == c.POWER).filter(_train_mask(j))
    e = p.filter((pl.col("time") > _sec(j, t0)) & (pl.col("time") < _sec(j, t0 + 120)))
    late = p.filter(pl.col("time") > _sec(j, t1))
    a = e.group_by("node").agg(pl.col("value").mean().alias("e"))
    b = late.group_by("node").agg(pl.col("value").mean().alias("l"))
    x = a.join(b, on="node")
    assert x.height == len(j.nodes) and (x["l"] > x["e"]).all()


def test_gc_pauses_are_many_and_short(J):
    j = _smallest(J, "python_gc_pause_random_ranks")
    p = j.spec["benign"]["pauses"]
    assert len(p) >= 10
    assert len({n for n, _ in p}) > 1 or len(j.nodes) == 1


def test_top_slot_nodes_warmer_without_throttling(J):
    j = _smallest(J, "rack_top_slot_warmer_constant")
    df = _raw(j)
    warm = {j.nodes[i] for i in j.spec["benign"]["warm_nodes"]}
    p = df.filter(pl.col("metric") == c.GPU_TEMP).group_by("node").agg(pl.col("value").median())
    v = dict(zip(p["node"], p["value"], strict=True))
    others = [v[n] for n in j.nodes if n not in warm]
    if others:
        assert np.mean([v[n] for n in warm]) > np.mean(others) + 1
    r = df.filter(pl.col("metric").is_in([c.CLOCK_THROTTLE, c.CLOCKS_EVENT]))["value"]
    assert not ((r.cast(pl.Int64) & 0x20) > 0).any()


def test_rare_ticks_are_rare(J):
    for j in (x for x in J if x.kind == "link_error_counter_rare_ticks"):
        df = _raw(j) if _est(j) < 2e6 else None
        if df is None:
            continue
        tot = 0.0
        for m in (c.PCIE_REPLAY, c.IB_SYMBOL, c.EDAC_CE, c.NVL_CRC):
            d = (
                df.filter(pl.col("metric") == m)
                .group_by("node", "device")
                .agg((pl.col("value").max() - pl.col("value").min()).alias("d"))
            )
            if d.height:
                tot += d["d"].sum()
                assert d["d"].max() <= 12, (j.name, m)
        assert tot > 0, j.name


def test_fleet_upgrade_renames_reasons_on_every_node(J):
    j = _smallest(J, "exporter_fleet_upgrade_field_rename")
    df = _raw(j)
    for i, (a, d) in j.spec["benign"]["up"].items():
        node = j.nodes[int(i)]
        old = _series(df, node, c.CLOCK_THROTTLE)
        new = _series(df, node, c.CLOCKS_EVENT)
        assert old.height and new.height
        assert old["time"].max() < _sec(j, a) and new["time"].min() >= _sec(j, a + d)
        gap = df.filter(
            (pl.col("node") == node)
            & pl.col("metric").str.starts_with("DCGM")
            & (pl.col("time") >= _sec(j, a))
            & (pl.col("time") < _sec(j, a + d))
        )
        assert gap.height == 0


def test_driver_mix_power_offset(J):
    j = _smallest(J, "driver_branch_mix_power_reporting")
    df = _raw(j)
    newer = {j.nodes[i] for i in j.spec["benign"]["newer"]}
    p = df.filter(pl.col("metric") == c.POWER).filter(_train_mask(j))
    p = p.group_by("node").agg(pl.col("value").median())
    v = dict(zip(p["node"], p["value"], strict=True))
    others = [v[n] for n in j.nodes if n not in newer]
    if others:
        assert np.mean([v[n] for n in newer]) > 1.015 * np.mean(others)


def test_epoch_stall_idles_every_node(J):
    j = _smallest(J, "epoch_boundary_shuffle_stall_all")
    df = _raw(j)
    a, z = j.spec["benign"]["stalls"][0]
    coll = c.SITES[j.site].collect
    u = df.filter(
        (pl.col("metric") == c.GPU_UTIL)
        & (pl.col("time") > _sec(j, a + coll + 10))
        & (pl.col("time") < _sec(j, z - 5))
    )
    if u.height:
        assert u["value"].max() <= 10


def test_spot_reclaim_swaps_a_node(J):
    j = _smallest(J, "spot_reclaim_node_swap_restart")
    df = _raw(j)
    b = j.spec["benign"]
    old, new = j.nodes[b["old"]], j.nodes[b["new"]]
    assert len(j.nodes) == b["new"] + 1
    o = df.filter(pl.col("node") == old)["time"]
    w = df.filter(pl.col("node") == new)["time"]
    assert o.max() < _sec(j, b["reclaim"]) and w.min() >= _sec(j, b["join"])
    u = df.filter(
        (pl.col("metric") == c.GPU_UTIL)
        & (pl.col("node") == new)
        & (pl.col("time") > _sec(j, b["join"] + b["restart"] + 200))
    )
    assert u.height and u["value"].median() >= 97


def test_facility_cap_on_every_node(J):
    j = _smallest(J, "facility_power_cap_all_nodes")
    df = _raw(j)
    b = j.spec["benign"]
    t = _sec(j, max(b["at"]) + 60)
    z = _sec(j, b["until"] - 30)
    w = df.filter((pl.col("metric") == c.POWER_LIMIT) & (pl.col("time") > t) & (pl.col("time") < z))
    if w.height:
        assert w["node"].n_unique() == len(j.nodes)
        assert w["value"].max() <= b["cap"] + 1


# ---------------------------------------------------------------------------------------------
# Exporter behaviour
# ---------------------------------------------------------------------------------------------


def test_site_specifics(J):
    for site in c.SITES:
        cands = [j for j in J if j.site == site and j.kind != "exporter_fleet_upgrade_field_rename"]
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
        modes = set(df.filter(pl.col("metric") == c.CPU_SECONDS)["device"].unique())
        assert ("steal" in modes) == s.vm, site
        if site == "h8r":
            assert ms & {m for m in ms if m.startswith("node_ethtool")} == {c.ET_OOB}
        if site == "hsn":
            cs = df.filter(pl.col("metric") == c.CLOCKSOURCE)["device"].unique().to_list()
            assert cs == ["arch_sys_counter"]
            assert len(df.filter(pl.col("metric") == c.GPU_TEMP)["device"].unique()) == 4
        if site in ("l4x", "a8u"):
            assert c.NVLINK_BW not in ms
        if site == "hnv":
            assert c.CLOCKS_EVENT in ms and c.CLOCK_THROTTLE not in ms


def test_lost_scrapes_and_phases(J):
    j = min(J, key=_est)
    df = _raw(j)
    s = df.filter(pl.col("metric") == c.GPU_TEMP).filter(pl.col("device") == "0")
    per = s.group_by("node").agg(pl.col("time").min().alias("t0"), pl.len().alias("n"))
    assert per["t0"].n_unique() > 1
    expected = j.minutes * 60 / j.dcgm_interval
    assert per["n"].max() <= expected + 1
    hs = [x for x in J if x.site == "hsn" and not x.faulty]
    k = min(hs, key=_est)
    d = _raw(k).filter(pl.col("metric") == c.LOAD1)
    sched = len(k.nodes) * (k.minutes * 60 / k.node_interval)
    assert d.height < (1 - 0.004) * sched


def test_dcgm_repeats_last_collection(J):
    cand = [j for j in J if c.SITES[j.site].collect > j.dcgm_interval]
    j = min(cand, key=_est)
    df = _raw(j)
    s = _series(df, j.nodes[0], c.POWER, "0")["value"].to_numpy()
    assert (np.diff(s) == 0).mean() > 0.3


def test_decoys_present(J):
    xs = 0
    for j in sorted(J, key=_est)[:25]:
        df = _raw(j)
        x = df.filter((pl.col("metric") == c.XID) & (pl.col("value") > 0))
        if not j.faulty:
            xs += x.height
    assert xs > 0
    assert sum(bool(j.spec["ckpt"]) for j in J) >= 20
