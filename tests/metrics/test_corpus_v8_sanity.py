"""Sanity tests of corpus v8 itself (labels, determinism, budget, per-kind signals).

These never run a detector. They render only the smallest job of each kind (by estimated rows).
"""

from __future__ import annotations

import functools
from datetime import timedelta

import numpy as np
import polars as pl
import pytest

from . import corpus_v8 as cv

# kind names of the earlier corpora (v2-v7), which v8 must not reuse
_EARLIER_FAULTS = set(
    [
        "aoc_flapping",
        "ecc_xid_hang",
        "machine_unreachable",
        "nic_dropout",
        "nvlink_error",
        "pcie_downgrade",
        "slow_gpu_clock",
        "slow_gpu_power",
        "slow_gpu_thermal",
        "two_faults",
        "ecc_xid",
        "gpu_fell_off_bus",
        "gpu_hang",
        "host_mem_pressure",
        "nvlink_errors",
        "power_brake",
        "thermal_slowdown",
        "unreachable",
        "host_mem_leak",
        "node_unreachable",
        "pcie_degraded",
        "stray_process",
        "thermal_slow_gpu",
        "xid_ecc_hang",
        "cpu_contention",
        "gpu_off_bus",
        "gsp_hang",
        "ib_rate_degraded",
        "io_stall",
        "link_flap",
        "row_remap_pending",
        "two_culprits",
        "cpu_freq_capped",
        "hbm_thermal_throttle",
        "hw_thermal_clock_event",
        "ib_port_down",
        "ib_xmit_wait_congestion",
        "nfs_client_hang",
        "nvlink5_fabric_errors",
        "roce_pfc_pause_storm",
        "sm_clock_locked",
        "swap_thrash",
        "xid79_gpu_lost",
        "xid95_uncontained_ecc",
        "chassis_fan_failure",
        "dimm_ce_storm",
        "gpu_bus_drop",
        "hca_fatal_reset",
        "host_unreachable",
        "nvlink_replay_storm",
        "oom_killed_rank",
        "pcie_link_degraded",
        "roce_pfc_misconfig",
        "softnet_irq_collapse",
        "tcp_retrans_storm",
        "xid94_rank_killed",
    ]
)
_EARLIER_BENIGN = set(
    [
        "checkpoint_pause",
        "constant_offset",
        "counter_reset",
        "healthy",
        "heterogeneous_cooling",
        "heterogeneous_memory",
        "idle_gpu_by_design",
        "jobwide_slowdown",
        "late_starter",
        "profiler_paused",
        "rank0_extra",
        "short_blip",
        "sparse_counters",
        "staggered_warmup",
        "checkpoint_pauses",
        "constant_offsets",
        "cooling_zones",
        "dataloader_jitter",
        "eval_phases",
        "healthy_steady",
        "heterogeneous_racks",
        "idle_gpu",
        "late_start",
        "nccl_timeout_jobwide",
        "profiling_pause",
        "short_blips",
        "checkpoint_sync",
        "elastic_resize",
        "eval_phase",
        "ib_counter_reset",
        "mixed_exporters",
        "moe_alltoall",
        "nccl_timeout_restart",
        "pipeline_stages",
        "checkpoint",
        "dataloader_stall",
        "elastic",
        "exporter_restart",
        "moving_imbalance",
        "nsight_pause",
        "prometheus_gap",
        "rank0_load",
        "rolling_upgrade",
        "stale_xid",
        "steady",
        "warmup_late_start",
        "checkpoint_burst",
        "dp_shape_groups",
        "early_finish",
        "ha_replica_interleave",
        "nccl_restart",
        "preproc_role_nodes",
        "rack_power_cap",
        "scrape_timeout_partial",
        "temp_reading_glitch",
        "uniform_training",
        "straggler_launch",
        "sync_checkpoint",
        "jobwide_throttle",
        "transient_dip",
        "hot_slot_offset",
        "quiet_counters",
        "cron_maintenance_burst",
        "seq_len_ramp",
        "dcp_module_missing",
        "sharded_ckpt_writers",
    ]
)


@functools.cache
def _jobs() -> tuple[cv.Job, ...]:
    return tuple(cv.jobs())


def _est(j: cv.Job) -> float:
    return cv._estimate_rows(
        cv.SITES[j.site], len(j.nodes), j.minutes, j.dcgm_interval, j.node_interval
    )


@functools.cache
def _smallest() -> dict[str, cv.Job]:
    out: dict[str, cv.Job] = {}
    for j in _jobs():
        if j.kind not in out or _est(j) < _est(out[j.kind]):
            out[j.kind] = j
    return out


@functools.cache
def _raw(name: str) -> pl.DataFrame:
    j = next(x for x in _jobs() if x.name == name)
    return j.raw


def _get(j: cv.Job) -> pl.DataFrame:
    """Cached frame for small jobs; bigger ones are rendered afresh and dropped."""
    return _raw(j.name) if _est(j) < 700_000 else j.raw


def _secs(df: pl.DataFrame, j: cv.Job) -> pl.DataFrame:
    return df.with_columns(((pl.col("time") - j.start).dt.total_milliseconds() / 1000.0).alias("s"))


def _node_metric(j: cv.Job, node: str, metric: str) -> pl.DataFrame:
    df = _raw(j.name).filter((pl.col("node") == node) & (pl.col("metric") == metric))
    return _secs(df, j).sort("s")


def _sum_rate(x: pl.DataFrame, lo: float, hi: float) -> float:
    """Summed per-device counter increase per second over [lo, hi)."""
    tot = 0.0
    for _, g in x.filter((pl.col("s") >= lo) & (pl.col("s") < hi)).group_by("device"):
        if g.height >= 2:
            g = g.sort("s")
            tot += (g["value"][-1] - g["value"][0]) / max(g["s"][-1] - g["s"][0], 1e-9)
    return tot


# ----------------------------------------------------------------------------------------------
# labels and population
# ----------------------------------------------------------------------------------------------


def test_api_and_kind_names():
    assert isinstance(cv.FAULT_KINDS, tuple) and isinstance(cv.BENIGN_KINDS, tuple)
    assert not set(cv.FAULT_KINDS) & set(cv.BENIGN_KINDS)
    assert not set(cv.FAULT_KINDS) & (_EARLIER_FAULTS | _EARLIER_BENIGN)
    assert not set(cv.BENIGN_KINDS) & (_EARLIER_FAULTS | _EARLIER_BENIGN)
    assert cv.RATE_VALUED_COUNTERS <= cv.COUNTER_METRICS
    assert cv.is_counter("node_cpu_seconds_total")
    assert cv.is_counter("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION")
    assert not cv.is_counter("DCGM_FI_DEV_GPU_TEMP")
    assert not cv.is_counter("node_load1")
    for f in ("name", "kind", "nodes", "start", "end", "culprits", "dcgm_interval"):
        assert hasattr(_jobs()[0], f)
    assert hasattr(_jobs()[0], "node_interval") and hasattr(_jobs()[0], "site")


def test_population_shape():
    js = _jobs()
    assert len(js) == 120
    assert len({j.name for j in js}) == 120
    faulty = [j for j in js if j.faulty]
    assert len(faulty) == 60
    assert sum(len(j.culprits) for j in js) == 64
    assert sum(len(j.culprits) == 2 for j in js) == 4
    kinds = pl.Series([j.kind for j in js]).value_counts()
    assert set(kinds["count"].to_list()) == {5}
    assert set(kinds["kind" if "kind" in kinds.columns else kinds.columns[0]]) == set(
        cv.FAULT_KINDS + cv.BENIGN_KINDS
    )
    sizes = np.array([len(j.nodes) for j in js])
    assert sizes.min() >= 4 and sizes.max() == 1024
    assert 24 <= np.median(sizes) <= 40
    assert (sizes >= 256).sum() >= 6
    minutes = np.array([j.minutes for j in js])
    assert minutes.min() >= 30.0 and minutes.max() <= 120.0
    assert len({j.site for j in js}) == 6


def test_labels_consistent():
    for j in _jobs():
        assert j.faulty == bool(j.culprits)
        assert (j.kind in cv.FAULT_KINDS) == j.faulty, j.name
        assert len(set(j.nodes)) == len(j.nodes)
        assert j.start.tzinfo is not None and j.end > j.start
        for node, on in j.culprits.items():
            assert node in j.nodes
            assert on.tzinfo is not None
            assert j.start < on < j.end
            rel = (on - j.start).total_seconds()
            assert rel >= j.spec["warm"] + 170, j.name  # >= ~3 min after warm-up
            if j.kind in cv._SLOW_KINDS:
                assert (j.end - on) >= timedelta(minutes=9), j.name
            else:
                assert j.spec["t_exit"] - rel >= 9 * 60, j.name


def test_table():
    t = cv.table(list(_jobs()))
    assert t.height == 120
    for c in ("name", "kind", "site", "faulty", "n_nodes", "nodes", "start", "end", "culprits"):
        assert c in t.columns
    assert t["faulty"].sum() == 60
    assert t.schema["start"] == pl.Datetime("ms", "UTC")


def test_determinism_and_seed():
    a, b = cv.jobs(0), cv.jobs(0)
    assert [j.name for j in a] == [j.name for j in b]
    assert [j.culprits for j in a] == [j.culprits for j in b]
    assert [j.spec["rs"] for j in a] == [j.spec["rs"] for j in b]
    c = cv.jobs(1)
    assert [j.spec["rs"] for j in a] != [j.spec["rs"] for j in c]
    small = min(a, key=_est)
    assert small.raw.equals(small.raw)


def test_row_budget_estimates():
    for j in _jobs():
        assert _est(j) <= 5_500_000, j.name


# ----------------------------------------------------------------------------------------------
# rendering
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", cv.FAULT_KINDS + cv.BENIGN_KINDS)
def test_each_kind_renders(kind):
    j = _smallest()[kind]
    df = _get(j)
    site = cv.SITES[j.site]
    assert df.schema == pl.Schema(
        {
            "time": pl.Datetime("ms", "UTC"),
            "node": pl.String,
            "metric": pl.String,
            "device": pl.String,
            "value": pl.Float64,
        }
    )
    assert df.height <= _est(j) * 1.01
    assert df["value"].is_finite().all()
    assert df["time"].min() >= j.start and df["time"].max() <= j.end
    assert set(df["node"].unique()) <= set(j.nodes)
    dcgm = {m for m in df["metric"].unique() if m.startswith("DCGM_")}
    assert dcgm == set(site.dcgm), kind
    # counters are cumulative: never decrease, except the modelled reboot of a panicking node
    rebooted = {j.nodes[c["n"]] for c in j.spec["cul"]} if kind == "panic_reboot_return" else set()
    cnt = df.filter(
        pl.col("metric").is_in(list(cv.COUNTER_METRICS - cv.RATE_VALUED_COUNTERS))
        & ~pl.col("node").is_in(list(rebooted))
    )
    d = cnt.sort("node", "metric", "device", "time").with_columns(
        pl.col("value").diff().over("node", "metric", "device").alias("d")
    )
    assert d.filter(pl.col("d") < 0).height == 0, kind
    if kind in cv.BENIGN_KINDS:
        # no node of a healthy job stops reporting (beyond random lost scrapes)
        last = (
            _secs(df.filter(pl.col("metric") == "node_load1"), j)
            .group_by("node")
            .agg(pl.col("s").max())
        )
        assert last.height == len(j.nodes)
        assert last["s"].min() >= j.minutes * 60 - 3 * j.node_interval


def test_aggregate():
    j = _smallest()["plain_sync_run"]
    df = _raw(j.name)
    agg = cv.aggregate(df, lambda m: "max")
    assert agg.columns == ["time", "node", "metric", "value"]
    one = df.filter(pl.col("metric") == "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION")
    t0 = one["time"].min()
    n0 = one.filter(pl.col("time") == t0)["node"][0]
    s = one.filter((pl.col("time") == t0) & (pl.col("node") == n0))["value"].sum()
    a = agg.filter(
        (pl.col("time") == t0)
        & (pl.col("node") == n0)
        & (pl.col("metric") == "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION")
    )["value"][0]
    assert a == pytest.approx(s)
    with pytest.raises(ValueError):
        cv.aggregate(df, lambda m: "median")


def test_scrape_realism():
    j = _smallest()["plain_sync_run"]
    df = _secs(_raw(j.name), j)
    per = df.filter(pl.col("metric") == "node_load1")
    expected = len(j.nodes) * j.minutes * 60 / j.node_interval
    assert 0.985 * expected <= per.height <= expected + len(j.nodes)
    # per-target phases: first scrape offsets differ between nodes
    first = per.group_by("node").agg(pl.col("s").min())["s"].to_numpy()
    assert len(np.unique(np.round(first, 1))) > len(j.nodes) // 2
    # whole-target losses: some (node, time) scrapes are missing across the job set
    fracs = []
    for kind in ("plain_sync_run", "bin_spread_constant", "rare_error_ticks"):
        jj = _smallest()[kind]
        x = _raw(jj.name).filter(pl.col("metric") == "node_load1")
        fracs.append(x.height / (len(jj.nodes) * jj.minutes * 60 / jj.node_interval))
    assert min(fracs) < 1.0


def test_collect_interval_repeats():
    j = min((x for x in _jobs() if x.site == "h8r"), key=_est)
    df = _raw(j.name)
    p = df.filter(
        (pl.col("metric") == "DCGM_FI_DEV_POWER_USAGE")
        & (pl.col("device") == "0")
        & (pl.col("node") == j.nodes[0])
    ).sort("time")
    v = p["value"].to_numpy()
    # collect interval 30 s, scrape 10-15 s: consecutive scrapes often serve the same value
    assert (np.diff(v) == 0).mean() > 0.3


def test_site_series_differ():
    seen: dict[str, set[str]] = {}
    for site in cv.SITES:
        j = min((x for x in _jobs() if x.site == site), key=_est)
        seen[site] = set(_get(j)["metric"].unique().to_list())
    assert "DCGM_FI_DEV_GPU_UTIL" not in seen["v1x"]  # commented out in 2.2.9's CSV
    assert "DCGM_FI_DEV_RETIRED_PENDING" in seen["v1x"]
    assert not any(m.startswith("node_infiniband_") for m in seen["a8r"])
    assert "node_pressure_cpu_waiting_seconds_total" not in seen["a8r"]
    assert "DCGM_FI_DEV_NVLINK_COUNT_RX_SYMBOL_ERRORS" in seen["gb2"]
    assert "DCGM_FI_DEV_CLOCKS_EVENT_REASONS" in seen["b2x"]
    assert "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS" in seen["h2a"]
    assert any(m.startswith("node_ethtool_") for m in seen["h8r"])
    assert not any(m.startswith("DCGM_FI_PROF_") for m in seen["h8r"] | seen["v1x"] | seen["a8r"])


# ----------------------------------------------------------------------------------------------
# culprit signal: present after the onset, absent before
# ----------------------------------------------------------------------------------------------


def _check_fault(j: cv.Job, node: str, on: float) -> None:
    site = cv.SITES[j.site]
    c = next(x for x in j.spec["cul"] if j.nodes[x["n"]] == node)
    before = (0.0, on - 1.0)
    k = j.kind
    if k == "uce_single_gpu_abort":
        x = _node_metric(j, node, cv.XID)
        dev = str(c["g"])
        xa = x.filter((pl.col("device") == dev) & (pl.col("s") >= on))["value"]
        xb = x.filter((pl.col("device") == dev) & (pl.col("s") < on))["value"]
        assert set(xa.unique()) <= {48.0, 63.0, 94.0} and xa.len() > 0
        assert xb.n_unique() <= 1 and (xb.len() == 0 or xb[0] not in (48.0, 63.0, 94.0))
    elif k == "gpu_lost_exporter_crashloop":
        x = _node_metric(j, node, cv.SM_CLOCK)
        gone = x.filter((pl.col("device") == str(c["g"])) & (pl.col("s") >= on))
        assert gone.height == 0
        assert x.filter((pl.col("device") == str(c["g"])) & (pl.col("s") < on)).height > 5
        b = _node_metric(j, node, cv.PROCS_BLOCKED)
        assert (
            b.filter(pl.col("s") >= on + 30)["value"].mean()
            > b.filter(pl.col("s") < on)["value"].mean() + 1.5
        )
    elif k == "ib_port_polling_abort":
        if "infiniband" in site.collectors:
            x = _node_metric(j, node, cv.IB_STATE)
            assert x.filter(pl.col("s") >= on)["value"].min() == 1.0
            assert x.filter(pl.col("s") < on)["value"].min() == 4.0
        else:
            x = _node_metric(j, node, cv.NET_UP)
            assert x.filter(pl.col("s") >= on)["value"].min() == 0.0
            assert x.filter(pl.col("s") < on)["value"].min() == 1.0
    elif k == "panic_reboot_return":
        x = _secs(_raw(j.name).filter(pl.col("node") == node), j)
        pre = j.spec.get("precursor", 0.0)
        gap = x.filter((pl.col("s") >= on + pre + 60) & (pl.col("s") < on + pre + 240))
        assert gap.height == 0
        assert x.filter(pl.col("s") < on).height > 0
    elif k == "scratch_fill_write_fail":
        x = _node_metric(j, node, cv.FS_AVAIL).filter(pl.col("device") == site.scratch)
        a0 = x.filter(pl.col("s") < on)["value"]
        assert (a0.max() - a0.min()) / a0.max() < 0.02
        assert x.filter(pl.col("s") >= on + j.spec["fill"] + 5)["value"].max() < 0.02 * a0.min()
    elif k == "cold_plate_flow_loss":
        x = _node_metric(j, node, cv.GPU_TEMP)
        hot = x.filter((pl.col("s") >= on + 120) & (pl.col("s") < on + 900))["value"].max()
        assert hot >= site.t_slow
        assert (
            x.filter((pl.col("s") > j.spec["warm"]) & (pl.col("s") < on))["value"].max() < hot - 8
        )
    elif k == "nvlink_symbol_ber_climb":
        field = next(m for m in (cv.NVL5_SYMBOL, cv.NVL_CRC_FLIT, cv.NVL_REPLAY) if m in site.dcgm)
        x = _node_metric(j, node, field)
        assert _sum_rate(x, on, j.minutes * 60) > 20.0
        assert _sum_rate(x, *before) < 5.0
    elif k == "pcie_retimer_replays":
        x = _node_metric(j, node, cv.PCIE_REPLAY)
        assert _sum_rate(x, on, j.minutes * 60) > 10.0
        assert _sum_rate(x, *before) < 0.5
    elif k == "nic_pcie_stall_backpressure":
        x = _node_metric(j, node, cv.ET_STALLED_WR)
        assert x.filter(pl.col("s") >= on)["value"].max() >= 30
        assert x.filter(pl.col("s") < on)["value"].max() < 30
    elif k == "clocksource_hpet_fallback":
        x = _node_metric(j, node, cv.CLOCKSOURCE)
        assert x.filter(pl.col("device") == "hpet")["s"].min() >= on - 0.5
        assert x.filter(pl.col("device") == site.clocksource)["s"].max() < on
    elif k == "psu_fail_brake_duty":
        if site.reasons is not None:
            x = _node_metric(j, node, site.reasons)
            braked = (x["value"].cast(pl.Int64) & 0x80) > 0
        else:  # no reasons field exported (v1x): the brake shows in the SM clock only
            x = _node_metric(j, node, cv.SM_CLOCK)
            braked = (x["value"] < 0.6 * site.sm_max) & (x["value"] > site.sm_idle)
        xs = x.with_columns(braked.alias("b"))
        assert xs.filter(pl.col("s") >= on)["b"].any()
        assert not xs.filter(pl.col("s") < on)["b"].any()
    elif k == "ib_symbol_error_creep":
        x = _node_metric(j, node, cv.IB_SYMBOL)
        assert _sum_rate(x, on, j.minutes * 60) > 2.0
        assert _sum_rate(x, *before) < 0.5
    else:  # pragma: no cover
        raise AssertionError(k)


@pytest.mark.parametrize("kind", cv.FAULT_KINDS)
def test_culprit_signal_after_not_before(kind):
    j = _smallest()[kind]
    for node, on_dt in j.culprits.items():
        on = (on_dt - j.start).total_seconds()
        _check_fault(j, node, on)


@pytest.mark.parametrize("kind", cv.FAULT_KINDS)
def test_onset_is_a_real_scrape_time(kind):
    """The label is the culprit's first effect sample: a scrape of one of its targets."""
    j = _smallest()[kind]
    df = _raw(j.name)
    for node, on in j.culprits.items():
        here = df.filter((pl.col("node") == node) & (pl.col("time") == on))
        missing_kind = kind in ("gpu_lost_exporter_crashloop", "panic_reboot_return")
        if not missing_kind:
            assert here.height > 0, (kind, node)
        if kind == "gpu_lost_exporter_crashloop":
            gone = df.filter(
                (pl.col("node") == node)
                & pl.col("metric").str.starts_with("DCGM_")
                & (pl.col("time") >= on)
                & (pl.col("time") < on + timedelta(seconds=50))
            )
            assert gone.height == 0


def test_brief_hiccup_is_short():
    for j in _jobs():
        if j.kind == "brief_host_hiccup":
            assert all(ln < 240 for _, _, ln in j.spec["benign"]["events"])
