"""Goodput, crash loops and measured ETTR over years of history only look at the records that
can matter (job runs with a second record, jobs with k failed records, one-record runs long
enough to count); each equals the session-5 code that sorted or grouped every record
(``reference_before_slices``), on simulated months with crash loops, requeues, resubmissions
and preemptions."""

from __future__ import annotations

import math
from typing import Any

import polars as pl
import pytest
import reference_before_slices as ref  # this directory is on sys.path (no __init__.py)

from aegis_slurm.analytics.attribution import attribute_failures
from aegis_slurm.analytics.goodput import FAILED_RUN, goodput_lost
from aegis_slurm.analytics.job_runs import link_job_runs, measured_ettr
from aegis_slurm.analytics.loops import requeue_loops
from aegis_slurm.simulate.history import SimConfig, simulate


@pytest.fixture(scope="module", params=[3, 7])
def linked(request: pytest.FixtureRequest) -> pl.DataFrame:
    sim = simulate(SimConfig(nodes=192, days=75, seed=request.param, crash_loops=5, lemons=3))
    return link_job_runs(attribute_failures(sim.runs, sim.signals, sim.events))


def close(a: Any, b: Any) -> bool:
    """Equal, floats to 1e-9 relative (polars sums floats in parallel chunks)."""
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12) or (math.isnan(a) and math.isnan(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def test_goodput_equals_the_every_record_sort(linked: pl.DataFrame) -> None:
    got, want = goodput_lost(linked), ref.goodput_lost(linked)
    assert want["restarts"] > 0 and want["preempted_runs_linked"] > 0
    assert close(got, want)


@pytest.mark.parametrize("rf", [None, 0.004])
def test_crash_loops_equal_the_every_record_sort(linked: pl.DataFrame, rf: float | None) -> None:
    def by_job(loops: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return sorted(loops, key=lambda x: x["job_id_raw"])

    want = ref.requeue_loops(linked, rf=rf)
    assert want  # the simulation plants crash loops
    got = requeue_loops(linked, rf=rf)
    # one cluster here: the same loops, now also naming their cluster
    assert {x.pop("cluster") for x in got} == set(linked["cluster"].unique())
    assert close(by_job(got), by_job(want))


def test_a_crash_loop_is_one_clusters_job(linked: pl.DataFrame) -> None:
    """Clusters number their jobs independently: the same JobIDRaw on two clusters is two
    jobs, and their failed runs never add up to one loop (the session-5 code added them)."""
    k = 3
    loop = max(requeue_loops(linked, k=k), key=lambda x: x["failed_runs"])
    job = linked.filter(
        (pl.col("cluster") == loop["cluster"]) & (pl.col("job_id_raw") == loop["job_id_raw"])
    ).sort("run_index")
    failed = job.select(FAILED_RUN.cum_sum().alias("n"))["n"]
    # the original cluster keeps the job's records up to its (k-1)-th failed run; another
    # cluster's job with the same id holds the rest
    moved = job.filter(failed >= k)["row_id"]
    split = linked.with_columns(
        pl.when(pl.col("row_id").is_in(moved.implode()))
        .then(pl.lit("other"))
        .otherwise(pl.col("cluster"))
        .alias("cluster")
    )
    got = {(x["cluster"], x["job_id_raw"]): x for x in requeue_loops(split, k=k)}
    assert (loop["cluster"], loop["job_id_raw"]) not in got
    other = got.get(("other", loop["job_id_raw"]))
    assert other is None or other["failed_runs"] < loop["failed_runs"]
    old = {x["job_id_raw"]: x for x in ref.requeue_loops(split, k=k)}
    assert old[loop["job_id_raw"]]["failed_runs"] == loop["failed_runs"]


@pytest.mark.parametrize("min_hours", [24.0, 2.0, 0.0])
@pytest.mark.parametrize("rf", [None, 0.004])
def test_measured_ettr_equals_grouping_every_job_run(
    linked: pl.DataFrame, min_hours: float, rf: float | None
) -> None:
    got = measured_ettr(linked, rf, min_training_hours=min_hours).sort("run_key")
    want = ref.measured_ettr(linked, rf, min_training_hours=min_hours).sort("run_key")
    assert want.height > 0
    assert got.columns == want.columns and got.schema == want.schema
    assert close(got.to_dicts(), want.to_dicts())
    if min_hours == 0.0:  # both kinds of job run are in the comparison
        assert (want["jobs"] > 1).any() and (want["jobs"] == 1).any()
