"""Sanity tests of corpus v4 itself (not of any detector): determinism, schema, counters,
labels and sizes."""

from __future__ import annotations

from datetime import timedelta
from functools import cache

import polars as pl
import pytest

from . import corpus_v4 as c

KNOWN = {
    m
    for m, _ in c.DEFAULT_GPU_METRICS
    + c.PROF_METRICS
    + c.CUSTOM_PROF
    + c.CUSTOM_ERR
    + c.IB_METRICS
    + c.NET_METRICS
    + c.HOST_METRICS
}


@cache
def corpus() -> list[c.Job]:
    return c.jobs(0)


def smallest_per_kind() -> list[c.Job]:
    best: dict[str, c.Job] = {}
    for j in corpus():
        size = len(j.nodes) * (j.end - j.start).total_seconds() / j.node_interval
        if (
            j.kind not in best
            or size
            < len(best[j.kind].nodes)
            * (best[j.kind].end - best[j.kind].start).total_seconds()
            / best[j.kind].node_interval
        ):
            best[j.kind] = j
    return list(best.values())


@cache
def raw_of(name: str) -> pl.DataFrame:
    return next(j for j in corpus() if j.name == name).raw


def test_sizes_and_mix():
    js = corpus()
    assert 90 <= len(js) <= 110
    faulty = sum(j.kind in c.FAULT_KINDS for j in js)
    assert 0.40 <= faulty / len(js) <= 0.50
    assert {j.kind for j in js} == set(c.FAULT_KINDS) | set(c.BENIGN_KINDS)
    sizes = [len(j.nodes) for j in js]
    assert min(sizes) >= 4 and max(sizes) == 1024
    assert sum(s >= 256 for s in sizes) >= 3
    assert sum(8 <= s <= 128 for s in sizes) >= 0.7 * len(js)
    for j in js:
        minutes = (j.end - j.start).total_seconds() / 60
        assert 30 <= minutes <= 121, j.name
        assert j.dcgm_interval in (10, 30) and j.node_interval in (15, 30, 60)
        assert len(set(j.nodes)) == len(j.nodes)
    assert {c.SITES[j.site].gpus for j in js} == {4, 8}
    assert {c.SITES[j.site].fabric for j in js} == {"ib", "roce"}


def test_labels_consistent():
    for j in corpus():
        if j.kind in c.BENIGN_KINDS:
            assert j.culprits == {}, j.name
            continue
        assert len(j.culprits) == (2 if j.kind == "two_faults" else 1), j.name
        for node, onset in j.culprits.items():
            assert node in j.nodes
            assert onset.tzinfo is not None
            assert onset >= j.start + timedelta(minutes=j.params["warm"]), j.name
            assert j.end - onset >= timedelta(minutes=8), j.name


def test_deterministic_by_seed():
    a, b = c.jobs(3), c.jobs(3)
    assert c.table(a).equals(c.table(b))
    assert not c.table(a).equals(c.table(c.jobs(4)))
    small = min(a, key=lambda j: len(j.nodes))
    twin = next(j for j in b if j.name == small.name)
    assert small.raw.equals(twin.raw)


@pytest.mark.parametrize("job", smallest_per_kind(), ids=lambda j: j.kind)
def test_schema_and_counters(job: c.Job):
    raw = raw_of(job.name)
    assert raw.columns == ["time", "node", "metric", "device", "value"]
    assert raw.schema["time"] == pl.Datetime("ms", "UTC")
    assert raw.schema["value"] == pl.Float64
    assert set(raw["metric"].unique()) <= KNOWN
    assert set(raw["node"].unique()) <= set(job.nodes)
    assert raw["time"].min() >= job.start and raw["time"].max() <= job.end
    site = c.SITES[job.site]
    gpus = raw.filter(pl.col("metric") == "DCGM_FI_DEV_POWER_USAGE")["device"].unique()
    assert set(gpus) <= {str(d) for d in range(site.gpus)}
    has_prof = raw.filter(pl.col("metric").str.starts_with("DCGM_FI_PROF_PIPE")).height > 0
    assert has_prof == site.prof
    has_ib = raw.filter(pl.col("metric").str.starts_with("node_infiniband")).height > 0
    assert has_ib == (site.fabric == "ib")
    # one value per series and scrape
    assert raw.select(["time", "node", "metric", "device"]).is_duplicated().sum() == 0
    # counters monotonic per series, except the planned perfquery resets
    reset_nodes = {job.nodes[n] for n in job.params.get("benign", {}).get("nodes", [])}
    drops = (
        raw.filter(pl.col("metric").is_in(list(c.COUNTERS)))
        .sort("time")
        .with_columns(pl.col("value").diff().over(["node", "metric", "device"]).alias("d"))
        .filter(pl.col("d") < 0)
    )
    if job.kind == "ib_counter_reset":
        assert drops.height > 0
        assert set(drops["node"]) <= reset_nodes
        assert drops["metric"].str.starts_with("node_infiniband").all()
    else:
        assert drops.height == 0, drops.head()


def test_local_evidence_of_culprits():
    """Spot checks that a culprit's own series carry the fault (fairness of the labels)."""
    checked = set()
    for job in corpus():
        if job.kind not in ("node_unreachable", "xid_ecc_hang", "gpu_fell_off_bus"):
            continue
        if job.kind in checked or len(job.nodes) > 64:
            continue
        checked.add(job.kind)
        raw = raw_of(job.name)
        ((node, onset),) = job.culprits.items()
        mine = raw.filter(pl.col("node") == node)
        after = mine.filter(pl.col("time") >= onset + timedelta(minutes=1))
        before = mine.filter(pl.col("time") < onset)
        if job.kind == "node_unreachable":
            assert after.height == 0 and before.height > 0
        elif job.kind == "xid_ecc_hang":
            xid = after.filter(pl.col("metric") == "DCGM_FI_DEV_XID_ERRORS")["value"]
            assert set(xid.unique()) >= {0.0} and xid.max() in (48.0, 94.0)
        else:
            n_before = before.filter(pl.col("metric") == "DCGM_FI_DEV_POWER_USAGE")
            n_after = after.filter(pl.col("metric") == "DCGM_FI_DEV_POWER_USAGE")
            per = lambda d: d.group_by("time").len()["len"].max() if d.height else 0  # noqa: E731
            assert per(n_after) < per(n_before)
    assert checked == {"node_unreachable", "xid_ecc_hang", "gpu_fell_off_bus"}


def test_aggregate_sums_counters_and_steps_down_on_vanished_device():
    job = next(
        j for j in corpus() if j.kind == "gpu_fell_off_bus" and j.params["faults"][0]["var"] == 0
    )
    raw = raw_of(job.name)
    agg = c.aggregate(raw, lambda m: "avg")
    assert agg.columns == ["time", "node", "metric", "value"]
    ((node, _),) = job.culprits.items()
    e = agg.filter(
        (pl.col("node") == node) & (pl.col("metric") == "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION")
    )
    assert (e["value"].diff().drop_nulls() < 0).sum() >= 1
    with pytest.raises(ValueError):
        c.aggregate(raw.head(100), lambda m: "median")


def test_table_one_row_per_job():
    t = c.table(corpus())
    assert t.height == len(corpus())
    assert t.filter(pl.col("faulty"))["culprits"].str.len_chars().min() > 0
    assert (t.filter(~pl.col("faulty"))["culprits"] == "").all()
