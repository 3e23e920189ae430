"""Sanity tests of corpus v9 itself (never of a detector).

Run with ``pytest --noconftest tests/metrics/test_corpus_v9_sanity.py -q``.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import numpy as np
import polars as pl
import pytest

from . import corpus_v9 as c

_CACHE: dict[str, pl.DataFrame] = {}


@pytest.fixture(scope="module")
def J():
    return c.jobs(0)


def _raw(job) -> pl.DataFrame:
    if job.name not in _CACHE:
        df = job.raw
        if df.height < 1_500_000:
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


# ---------------------------------------------------------------------------------------------
# API, determinism, schema
# ---------------------------------------------------------------------------------------------


def test_api_constants():
    assert len(c.FAULT_KINDS) == 12 and len(c.BENIGN_KINDS) == 12
    assert not set(c.FAULT_KINDS) & set(c.BENIGN_KINDS)
    assert isinstance(c.COUNTER_METRICS, frozenset) and isinstance(
        c.RATE_VALUED_COUNTERS, frozenset
    )
    assert c.RATE_VALUED_COUNTERS <= c.COUNTER_METRICS
    assert c.is_counter("node_cpu_seconds_total") and not c.is_counter("DCGM_FI_DEV_GPU_TEMP")
    assert c.is_counter("node_vmstat_oom_kill")  # exposed untyped, cumulative


_OLD_KINDS = set(
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
    for k in c.FAULT_KINDS + c.BENIGN_KINDS:
        assert k not in _OLD_KINDS and not k.startswith("checkpoint"), k


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


# ---------------------------------------------------------------------------------------------
# Population and labels
# ---------------------------------------------------------------------------------------------


def test_population(J):
    assert len(J) == 120
    assert sum(j.faulty for j in J) == 60
    kc = Counter(j.kind for j in J)
    assert all(kc[k] == 5 for k in c.FAULT_KINDS + c.BENIGN_KINDS)
    assert all(j.faulty == (j.kind in c.FAULT_KINDS) for j in J)
    assert {len(j.culprits) for j in J if j.faulty} <= {1, 2}
    assert sum(len(j.culprits) == 2 for j in J) >= 3
    assert set(j.site for j in J) == set(c.SITES)
    sizes = [len(j.nodes) for j in J]
    assert min(sizes) >= 4 and max(sizes) == 1024 and sum(s >= 256 for s in sizes) >= 5
    assert all(30 - 1e-6 <= j.minutes <= 120 for j in J)
    assert all(10 <= j.dcgm_interval <= 60 and 10 <= j.node_interval <= 60 for j in J)
    assert all(len(set(j.nodes)) == len(j.nodes) for j in J)
    assert len({j.name for j in J}) == 120


def test_labels_inside_windows(J):
    for j in J:
        for node, on in j.culprits.items():
            assert node in j.nodes
            assert j.start < on < j.end - timedelta(minutes=1.5), j.name
            assert on.tzinfo is not None


def test_row_budget(J):
    assert max(_est(j) for j in J) <= 5.5e6
    max(J, key=_est)
    # estimate vs a real render of a mid-size job
    mid = sorted(J, key=_est)[60]
    assert abs(_raw(mid).height / _est(mid) - 1) < 0.05


def test_onset_on_culprit_grid_and_visible(J):
    """The onset is a sample of the culprit, and that sample shows the fault."""
    for kind in c.FAULT_KINDS:
        j = _smallest(J, kind)
        df = _raw(j)
        for node, on in j.culprits.items():
            rows = df.filter((pl.col("node") == node) & (pl.col("time") == on))
            if kind != "acpi_shutdown_vanish":  # there a missing scrape can be the evidence
                assert rows.height > 0, (j.name, node)
            assert _VISIBLE[kind](j, df, node, on), (j.name, node, on)


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


def _v_acpi(j, df, node, on):
    fb = _per_time(df, node, c.FB_USED, "sum")
    dc = fb.filter(pl.col("time") == on)
    if df.filter((pl.col("node") == node) & (pl.col("time") == on)).height == 0:
        # a missing scrape: the target really stopped answering at the onset
        i = j.nodes.index(node)
        sp = j.spec
        t0 = j.start
        for salt, step in ((c._SALT_DCGM, j.dcgm_interval), (c._SALT_NODE, j.node_interval)):
            t, _ = c._scrape_grid(sp["rs"], salt, np.array([i]), sp["dur"], step)
            sched = {t0 + timedelta(milliseconds=round(x * 1000)) for x in t[:, 0]}
            if on in sched:
                return True
        return False
    before = _before(fb, on)
    ok_gpu = dc.height == 1 and dc["v"][0] < 0.2 * before["v"][-1]
    last_dcgm = df.filter((pl.col("node") == node) & pl.col("metric").str.starts_with("DCGM"))[
        "time"
    ].max()
    others = df.filter(pl.col("node") != node)["time"].max()
    spec = j.spec["fault"]
    vanished = spec["back"] is not None or (others - last_dcgm) > timedelta(minutes=5)
    return (ok_gpu or dc.height == 0) and vanished


def _v_dimm(j, df, node, on):
    ue = _per_time(df, node, c.EDAC_UE, "sum")
    ce = _per_time(df, node, c.EDAC_CE, "sum")
    prev_ue = _before(ue, on)["v"][-1]
    prev_ce = _before(ce, on)["v"][-1]
    return _at(ue, on)["v"][0] > prev_ue or _at(ce, on)["v"][0] > prev_ce


def _v_nvl_bridge(j, df, node, on):
    i = j.nodes.index(node)
    p = j.spec["fault"]["pair"][i]
    s = _series(df, node, c.NVLINK_BW, str(p))
    later = _after(s, on + timedelta(minutes=3))
    peer = next(n for n in j.nodes if n != node)
    sp = _after(_series(df, peer, c.NVLINK_BW, str(p)), on + timedelta(minutes=3))
    return (later["value"] == 0).all() and sp["value"].median() > 0


def _v_pcie(j, df, node, on):
    g = _gpu_of(j, node)
    m = c.PROF_PCIE_RX if c.PROF_PCIE_RX in c.SITES[j.site].fields else c.PCIE_RX_TP
    s = _series(df, node, m, g)
    prev = _before(s, on)["value"][-1]
    return _at(s, on)["value"][0] < 0.8 * prev


def _v_gvnic(j, df, node, on):
    up = _per_time(df, node, c.NET_UP, "min")
    ch = _per_time(df, node, c.NET_CARRIER, "sum")
    return _at(up, on)["v"][0] == 0 or _at(ch, on)["v"][0] > _before(ch, on)["v"][-1]


def _v_power(j, df, node, on):
    s = _per_time(df, node, c.POWER, "max")
    return _at(s, on)["v"][0] < 0.8 * _before(s, on)["v"][-1]


def _v_thermal(j, df, node, on):
    s = _series(df, node, c.GPU_TEMP, _gpu_of(j, node))
    return _at(s, on)["value"][0] >= _before(s, on)["value"][-1] + 1


def _v_nvme(j, df, node, on):
    s = _per_time(df, node, c.DISK_IO_NOW, "max")
    return _at(s, on)["v"][0] >= 10 and _before(s, on)["v"][-1] <= 1


def _v_mclk(j, df, node, on):
    s = _series(df, node, c.MEM_CLOCK, _gpu_of(j, node))
    return _at(s, on)["value"][0] < 0.75 * _before(s, on)["value"][-1]


def _v_fec(j, df, node, on):
    s = _per_time(df, node, c.ET_CRC, "sum")
    return _at(s, on)["v"][0] > _before(s, on)["v"][-1]


_VISIBLE = {
    "xid109_stuck_ctx": _v_xid(109),
    "xid145_nvlink_rlw_abort": _v_xid(145, 45),
    "acpi_shutdown_vanish": _v_acpi,
    "dimm_ue_sigbus_rank": _v_dimm,
    "nvlink_bridge_absent_p2p": _v_nvl_bridge,
    "pcie_gen2_stuck_link": _v_pcie,
    "gvnic_reset_loop": _v_gvnic,
    "enforced_power_limit_low": _v_power,
    "blocked_slot_airflow": _v_thermal,
    "nvme_ctrl_timeout_stall": _v_nvme,
    "mem_clock_pstate_stuck": _v_mclk,
    "roce_fec_uncorrectable": _v_fec,
}


def test_fault_kinds_have_a_visibility_check():
    assert set(_VISIBLE) == set(c.FAULT_KINDS)


def test_hang_peers_spin_then_exit(J):
    """After a rank dies, its peers sit at ~100 % util at low power until the NCCL timeout."""
    for kind in ("xid109_stuck_ctx", "dimm_ue_sigbus_rank"):
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
    j = _smallest(J, "enforced_power_limit_low")
    df = _raw(j)
    _node, on = min(j.culprits.items(), key=lambda kv: kv[1])
    peer = next(n for n in j.nodes if n not in j.culprits)
    m = c.PROF_TENSOR
    s = _per_time(df, peer, m, "mean")
    before = _before(s, on - timedelta(minutes=1)).tail(10)["v"].mean()
    after = _after(s, on + timedelta(minutes=2)).head(10)["v"].mean()
    assert after < 0.85 * before
    # the peer's own power limit did not change
    pl_ = _per_time(df, peer, c.POWER_LIMIT, "min")
    if pl_.height:
        assert pl_["v"].min() == pl_["v"].max()


# ---------------------------------------------------------------------------------------------
# Healthy kinds really produce their situation
# ---------------------------------------------------------------------------------------------


def _util_by_node(df, t0, t1):
    return (
        df.filter((pl.col("metric") == c.FB_USED) & (pl.col("time") >= t0) & (pl.col("time") < t1))
        .group_by("node")
        .agg(pl.col("value").mean())
    )


def test_healthy_have_no_culprits(J):
    assert all(not j.culprits for j in J if j.kind in c.BENIGN_KINDS)


def test_container_pull_late_join(J):
    j = _smallest(J, "container_pull_late_join")
    df = _raw(j)
    late = j.spec["benign"]["late"]
    i = max(late, key=late.get)
    t = j.start + timedelta(seconds=max(50.0, 0.6 * late[i]))
    fb = _util_by_node(df, t, t + timedelta(seconds=0.3 * late[i]))
    lnode = j.nodes[i]
    early = [n for k, n in enumerate(j.nodes) if k not in late]
    v = dict(zip(fb["node"], fb["value"], strict=False))
    assert v[lnode] < 0.1 * np.mean([v[n] for n in early if n in v])


def test_epoch_reshuffle_pause_all_nodes(J):
    j = _smallest(J, "epoch_reshuffle_pause")
    df = _raw(j)
    a, z = j.spec["benign"]["pauses"][0]
    ta, tz = j.start + timedelta(seconds=a + 15), j.start + timedelta(seconds=z - 5)
    u = df.filter(
        (pl.col("metric") == c.PROF_TENSOR) & (pl.col("time") > ta) & (pl.col("time") < tz)
        if c.PROF_TENSOR in c.SITES[j.site].fields
        else (pl.col("metric") == c.POWER) & (pl.col("time") > ta) & (pl.col("time") < tz)
    )
    if u.height:
        if c.PROF_TENSOR in c.SITES[j.site].fields:
            assert u["value"].max() < 0.05
        else:
            assert u["value"].max() < 0.3 * c.SITES[j.site].tdp


def test_batch_size_warmup_jobwide(J):
    j = _smallest(J, "batch_size_warmup_steps")
    df = _raw(j)
    s = c.SITES[j.site]
    m = c.PROF_TENSOR if c.PROF_TENSOR in s.fields else c.POWER
    steps = j.spec["benign"]["steps"]
    t1 = j.start + timedelta(seconds=steps[0][0] - 120)
    t2 = j.start + timedelta(seconds=steps[-1][0] + 120)
    d = df.filter(pl.col("metric") == m)
    a = d.filter((pl.col("time") < t1) & (pl.col("time") > t1 - timedelta(minutes=3)))
    b = d.filter(pl.col("time") > t2)
    by = (
        a.group_by("node")
        .agg(pl.col("value").mean().alias("a"))
        .join(b.group_by("node").agg(pl.col("value").mean().alias("b")), on="node")
    )
    assert (by["b"] > by["a"] * 1.15).all()


def test_gc_blip_is_short(J):
    j = _smallest(J, "python_gc_stall_blip")
    df = _raw(j)
    for _n, _a, d in j.spec["benign"]["blips"]:
        assert d < 240
    n, a, d = max(j.spec["benign"]["blips"], key=lambda x: x[2])
    t0, t1 = j.start + timedelta(seconds=a + 10), j.start + timedelta(seconds=a + d - 5)
    m = c.GPU_UTIL if c.GPU_UTIL in c.SITES[j.site].fields else c.POWER
    w = df.filter((pl.col("metric") == m) & (pl.col("time") > t0) & (pl.col("time") < t1))
    for ca, cz in j.spec["ckpt"]:  # an all-node checkpoint may overlap the blip
        w = w.filter(
            (pl.col("time") < j.start + timedelta(seconds=ca - 10))
            | (pl.col("time") > j.start + timedelta(seconds=cz + 30))
        )
    if w.height and m == c.GPU_UTIL:
        blip = w.filter(pl.col("node") == j.nodes[n])["value"]
        peers = w.filter(pl.col("node") != j.nodes[n])["value"]
        if blip.len():
            assert blip.max() <= 5 and peers.min() >= 97  # its peers wait in NCCL


def test_hbm_vendor_offset_constant(J):
    j = _smallest(J, "hbm_vendor_mix")
    df = _raw(j)
    other = {j.nodes[i] for i in j.spec["benign"]["other"]}
    mt = (
        df.filter(pl.col("metric") == c.MEMORY_TEMP)
        .group_by("node")
        .agg((pl.col("value") - 0).mean().alias("m"))
    )
    gt = (
        df.filter(pl.col("metric") == c.GPU_TEMP)
        .group_by("node")
        .agg(pl.col("value").mean().alias("g"))
    )
    d = mt.join(gt, on="node").with_columns((pl.col("m") - pl.col("g")).alias("d"))
    a = d.filter(pl.col("node").is_in(list(other)))["d"].mean()
    b = d.filter(~pl.col("node").is_in(list(other)))["d"].mean()
    assert a - b > 3


def test_rack_local_ib_mostly_zero(J):
    j = _smallest(J, "rack_local_ib_quiet")
    df = _raw(j)
    node = j.nodes[0]
    s = _rate(_per_time(df, node, c.IB_RX, "sum")).drop_nulls()
    rate = c.SITES[j.site].ib_rate * len(c.SITES[j.site].ib)
    assert (s["r"] < 1e-3 * rate).mean() > 0.6


def test_vocab_head_fb(J):
    j = _smallest(J, "vocab_head_last_stage")
    df = _raw(j)
    h = j.nodes[j.spec["benign"]["heads"][0]]
    mid = j.start + timedelta(minutes=j.minutes / 2)
    fb = _util_by_node(df, mid, mid + timedelta(minutes=2))
    v = dict(zip(fb["node"], fb["value"], strict=False))
    others = [v[n] for n in v if n != h]
    assert v[h] > 1.05 * np.median(others)


def test_collect_interval_drift_repeats(J):
    j = _smallest(J, "collect_interval_drift")
    df = _raw(j)
    node = j.nodes[j.spec["benign"]["drift_nodes"][0]]
    s = _series(df, node, c.POWER, "0")
    v = s["value"].to_numpy()
    if j.dcgm_interval < 60:
        assert (np.diff(v) == 0).mean() > 0.4


def test_blank_sentinel_values(J):
    j = _smallest(J, "blank_sentinel_values")
    df = _raw(j)
    bl = df.filter(pl.col("value") == 9223372036854775794.0)
    assert bl.height > 0
    assert set(bl["node"].unique()) == {j.nodes[i] for i in j.spec["benign"]["blank_nodes"]}


def test_demand_response_all_nodes(J):
    j = _smallest(J, "demand_response_cap_all")
    df = _raw(j)
    a, z, fr = j.spec["benign"]["cap"]
    t = j.start + timedelta(seconds=(a + z) / 2)
    p = df.filter(
        (pl.col("metric") == c.POWER)
        & (pl.col("time") > t)
        & (pl.col("time") < t + timedelta(minutes=1))
    )
    assert p["value"].max() <= c.SITES[j.site].tdp * fr * 1.01


def test_backup_agent_frontend(J):
    j = _smallest(J, "host_backup_agent_tx")
    df = _raw(j)
    n, a, d, _r = j.spec["benign"]["agents"][0]
    node = j.nodes[n]
    s = _rate(_per_time(df, node, c.NET_TX, "sum")).drop_nulls()
    t = j.start + timedelta(seconds=a + d / 2)
    assert s.filter(pl.col("time") > t)["r"][0] > 0.25e9


# ---------------------------------------------------------------------------------------------
# Exporter behaviour
# ---------------------------------------------------------------------------------------------


def test_site_specifics(J):
    for site in c.SITES:
        j = min((j for j in J if j.site == site), key=_est)
        df = _raw(j)
        ms = set(df["metric"].unique())
        s = c.SITES[site]
        assert {m for m in ms if m.startswith("DCGM")} == set(s.fields) - (
            {c.NV5_RECOV_FAIL} if False else set()
        ), site
        if site == "a4h":
            assert c.GPU_UTIL not in ms and c.PROF_TENSOR not in ms and c.CLOCKSOURCE not in ms
        if site == "a3g":
            assert not any(m.startswith("node_infiniband") for m in ms)
        if site == "efa":
            ib = {m for m in ms if m.startswith("node_infiniband")}
            assert ib == {c.IB_STATE, c.IB_RATE}
        if site == "rtx":
            assert c.ET_CRC in ms and c.NVLINK_BW not in ms and c.MEMORY_TEMP not in ms


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


def test_counters_monotonic_except_reset(J):
    j = _smallest(J, "dense_pretrain_baseline")
    df = _raw(j)
    bad = (
        df.filter(pl.col("metric").is_in(list(c.COUNTER_METRICS - c.RATE_VALUED_COUNTERS)))
        .sort("time")
        .group_by("node", "metric", "device")
        .agg((pl.col("value").diff() < 0).sum().alias("neg"))
        .filter(pl.col("neg") > 0)
    )
    assert bad.height == 0, bad.head()
