"""Sanity tests of corpus v7 itself (never of a detector).

Only the smallest job of each kind is rendered, so the module runs in seconds.
"""

from __future__ import annotations

import re
from datetime import UTC, timedelta
from functools import cache
from statistics import median

import numpy as np
import polars as pl
import pytest

from . import corpus_v7 as cv

JOBS = cv.jobs(0)


def _est(j: cv.Job) -> float:
    return cv._estimate_rows(
        cv.SITES[j.site], len(j.nodes), j.minutes, j.dcgm_interval, j.node_interval
    )


def _smallest(kind: str) -> cv.Job:
    return min((j for j in JOBS if j.kind == kind), key=_est)


@cache
def _raw(kind: str) -> tuple[cv.Job, pl.DataFrame]:
    """Rendered smallest job of a kind, cached for the few kinds several tests share."""
    j = _smallest(kind)
    return j, j.raw


ALL_KINDS = (*cv.FAULT_KINDS, *cv.BENIGN_KINDS)


def test_population_shape():
    assert 110 <= len(JOBS) <= 130
    faulty = sum(j.faulty for j in JOBS)
    assert abs(faulty - (len(JOBS) - faulty)) <= 10
    sizes = [len(j.nodes) for j in JOBS]
    assert min(sizes) >= 4 and max(sizes) <= 1024
    assert 24 <= median(sizes) <= 48
    assert 6 <= sum(s >= 256 for s in sizes) <= 8
    assert all(30 <= j.minutes <= 120 for j in JOBS)
    assert {j.dcgm_interval for j in JOBS} <= {10.0, 15.0, 30.0, 60.0}
    assert {j.node_interval for j in JOBS} <= {10.0, 15.0, 30.0, 60.0}
    assert len({j.site for j in JOBS}) == len(cv.SITES) >= 4
    assert {j.kind for j in JOBS} == set(cv.FAULT_KINDS) | set(cv.BENIGN_KINDS)
    assert 10 <= len(cv.FAULT_KINDS) <= 12 and len(cv.BENIGN_KINDS) >= 10
    assert 2 <= sum(len(j.culprits) == 2 for j in JOBS) <= 6


def test_names_and_nodes_unique():
    pat = re.compile(r"^v7-\d{3}-(" + "|".join(cv.SITES) + r")-([a-z0-9_]+)$")
    for j in JOBS:
        m = pat.match(j.name)
        assert m and m.group(1) == j.site and m.group(2) == j.kind
        assert len(set(j.nodes)) == len(j.nodes)
    assert len({j.name for j in JOBS}) == len(JOBS)


def test_jobs_deterministic_and_seeded():
    again = cv.jobs(0)
    assert [(j.name, j.nodes, j.culprits, j.start) for j in again] == [
        (j.name, j.nodes, j.culprits, j.start) for j in JOBS
    ]
    other = cv.jobs(1)
    assert [j.name for j in other] != [j.name for j in JOBS]


def test_labels_inside_windows():
    for j in JOBS:
        if j.kind in cv.BENIGN_KINDS:
            assert j.culprits == {}, j.name
            continue
        assert 1 <= len(j.culprits) <= 2, j.name
        warm = j.start + timedelta(seconds=j.spec["warm_end"])
        tail = timedelta(minutes=13 if j.kind in cv._HANG_KINDS else 10)
        for node, onset in j.culprits.items():
            assert node in j.nodes
            assert onset.tzinfo is not None and onset.utcoffset() == timedelta(0)
            assert onset >= warm + timedelta(minutes=3), j.name
            assert onset <= j.end - tail, j.name


def test_row_budget_estimates():
    for j in JOBS:
        est = cv._estimate_rows(
            cv.SITES[j.site], len(j.nodes), j.minutes, j.dcgm_interval, j.node_interval
        )
        assert est <= 5.5e6, j.name


def test_table_one_row_per_job():
    t = cv.table(JOBS)
    assert t.height == len(JOBS)
    assert t["faulty"].sum() == sum(j.faulty for j in JOBS)
    assert t.filter(pl.col("faulty"))["first_onset"].null_count() == 0
    assert {"name", "kind", "site", "nodes", "minutes", "culprits", "onsets"} <= set(t.columns)


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_rendered_smallest_job(kind):
    """Schema, devices, one sample per scrape, monotone counters, onset samples."""
    j = _smallest(kind)
    raw = j.raw
    site = cv.SITES[j.site]
    assert raw.schema == pl.Schema(cv._SCHEMA)
    assert raw.height > 0
    assert set(raw["node"].unique()) <= set(j.nodes)
    assert raw["time"].min() >= j.start.astimezone(UTC) and raw["time"].max() < j.end
    dev = raw.group_by("metric").agg(pl.col("device").unique())
    for m, ds in dev.iter_rows():
        if m.startswith("DCGM_"):
            assert m in site.dcgm
            assert set(ds) <= {str(g) for g in range(site.n_gpu)}
        elif m.startswith("node_infiniband_"):
            assert set(ds) <= set(site.ib)
        elif m.startswith("node_network_"):
            assert set(ds) <= {site.frontend, *site.data_netdevs}
        elif m == "node_cpu_seconds_total":
            assert set(ds) <= {"user", "system", "iowait", "softirq", "idle"}
        else:
            assert ds == [""], m
    # the costlier per-series checks on a subset of nodes (the culprits always included)
    sub = raw.filter(pl.col("node").is_in([*j.nodes[:6], *j.culprits]))
    assert sub.select(["time", "node", "metric", "device"]).is_duplicated().sum() == 0
    # counters never go down, except the deliberate HCA re-initialisation
    cnt = sub.filter(
        pl.col("metric").is_in(list(cv.COUNTER_METRICS - cv.RATE_VALUED_COUNTERS))
    ).sort("node", "metric", "device", "time")
    d = cnt.with_columns(pl.col("value").diff().over("node", "metric", "device").alias("d"))
    bad = d.filter(pl.col("d") < 0)
    if kind == "hca_fatal_reset":
        c = next(iter(j.culprits))
        port = site.ib[j.spec["fault"]["port"]]
        assert bad.height > 0
        assert set(bad["node"]) == {c} and set(bad["device"]) == {port}
    else:
        assert bad.height == 0, bad.head()
    # onset = the culprit's first sample of the effect; the culprit has samples before it
    for node, onset in j.culprits.items():
        times = raw.filter(pl.col("node") == node)["time"]
        assert (times < onset).any()
        if kind not in ("gpu_bus_drop", "host_unreachable"):  # there: first missing scrape
            assert (times == onset).any(), (node, onset)


def test_render_deterministic():
    j = _smallest("uniform_training")
    assert j.raw.equals(j.raw)


def test_rate_valued_counters_go_down():
    j, raw = _raw("jobwide_throttle")
    m = next(x for x in cv.SITES[j.site].dcgm if x in cv.RATE_VALUED_COUNTERS)
    v = raw.filter(pl.col("metric") == m).sort("node", "device", "time")
    dd = v.with_columns(pl.col("value").diff().over("node", "device").alias("d"))
    assert (dd["d"] < 0).sum() > 0


def test_culprit_series_vanish():
    j, raw = _raw("host_unreachable")
    c, onset = next(iter(j.culprits.items()))
    assert raw.filter((pl.col("node") == c) & (pl.col("time") >= onset)).height == 0
    assert raw.filter((pl.col("node") != c) & (pl.col("time") >= onset)).height > 0
    j, raw = _raw("gpu_bus_drop")
    c, onset = next(iter(j.culprits.items()))
    g = str(j.spec["fault"]["gpu"])
    after = raw.filter((pl.col("node") == c) & (pl.col("time") >= onset))
    assert after.filter(pl.col("device") == g).height == 0
    assert after.filter(pl.col("metric").str.starts_with("DCGM_")).height > 0


def test_hang_then_crash_physics():
    j, raw = _raw("xid94_rank_killed")
    c = next(iter(j.culprits))
    ms = j.start.timestamp() * 1000
    hang_a = ms + (j.spec["hang_at"] + 60) * 1000
    hang_b = ms + min(j.spec["crash_at"], j.spec["dur"]) * 1000
    u = raw.filter(pl.col("metric") == "DCGM_FI_DEV_GPU_UTIL").with_columns(
        pl.col("time").dt.epoch("ms").alias("ms")
    )
    during = u.filter((pl.col("ms") > hang_a) & (pl.col("ms") < hang_b))
    assert during.filter(pl.col("node") != c)["value"].min() == 100
    assert during.filter(pl.col("node") == c)["value"].max() == 0
    x = raw.filter((pl.col("metric") == "DCGM_FI_DEV_XID_ERRORS") & (pl.col("node") == c))
    assert (x["value"] == 94).any()


def test_dcp_module_missing_nodes():
    j, raw = _raw("dcp_module_missing")
    prof = raw.filter(pl.col("metric").str.starts_with("DCGM_FI_PROF_"))
    have = set(prof["node"].unique())
    missing = {j.nodes[i] for i in j.spec["nodcp"]}
    assert missing and not (have & missing)
    assert have


def test_mostly_zero_error_counters():
    _j, raw = _raw("quiet_counters")
    rep = raw.filter(pl.col("metric") == "DCGM_FI_DEV_PCIE_REPLAY_COUNTER")
    per = rep.group_by("node", "device").agg(pl.col("value").max() - pl.col("value").min())
    assert (per["value"] > 5).sum() == 0


def test_aggregate():
    _j, raw = _raw("uniform_training")
    agg = cv.aggregate(raw, lambda m: "max" if "TEMP" in m else "avg")
    assert agg.columns == ["time", "node", "metric", "value"]
    assert agg.select(["time", "node", "metric"]).is_duplicated().sum() == 0
    assert agg.equals(agg.sort("time", "node", "metric"))
    e = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"
    one = raw.filter(pl.col("metric") == e).group_by("time", "node").agg(pl.col("value").sum())
    got = agg.filter(pl.col("metric") == e).join(one, on=["time", "node"])
    assert np.allclose(got["value"].to_numpy(), got["value_right"].to_numpy())
    with pytest.raises(ValueError):
        cv.aggregate(raw, lambda m: "median")


def test_counter_classification():
    assert cv.is_counter("node_vmstat_oom_kill")  # untyped cumulative
    assert cv.is_counter("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL")
    assert "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL" in cv.RATE_VALUED_COUNTERS
    assert not cv.is_counter("DCGM_FI_DEV_GPU_UTIL")
    assert not cv.is_counter("node_infiniband_state_id")
    assert cv.RATE_VALUED_COUNTERS <= cv.COUNTER_METRICS


def test_lost_scrapes_are_rare():
    j, raw = _raw("uniform_training")
    per = raw.filter(pl.col("metric") == "node_load1").group_by("node").len()
    expect = j.minutes * 60 / j.node_interval
    assert per["len"].min() >= 0.97 * expect - 2
