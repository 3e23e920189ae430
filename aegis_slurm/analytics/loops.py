"""Requeue-loop (crash-loop) detection (spec §3.3; HPCA'25 §IV: a 1024-GPU job requeued 35×
caused 548 preemptions of > 7k GPUs).

A job (JobIDRaw) is flagged when it has a streak of ≥ ``k`` consecutive *failed* runs, some ``k``
of which fall inside ``window`` (default 3 within 24 h), and the streak's median run time is below
``t_short`` (default 30 min).  Failed run = NODE_FAIL, FAILED, BOOT_FAIL, OUT_OF_MEMORY, an
attributed infrastructure failure, or REQUEUED with a non-zero exit code (RequeueExit).

Extension: with the cluster r_f, an all-infrastructure streak must also fail a Poisson
plausibility test (see :func:`requeue_loops`), or big jobs' honest bad luck reads as a loop.

Deviation from spec §3.3 (documented): a recurring blamed node does *not* flag a loop by itself.
A long job on a lemon node fails repeatedly with long runs; that is the lemon-node detector's
finding, so it is only reported here as ``same_node_recurs``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import numpy as np
import polars as pl
from scipy import stats

from aegis_slurm.accounting.frames import rows_by_id
from aegis_slurm.analytics.common import gpu_hours, lost_gpu_hours
from aegis_slurm.analytics.goodput import (
    DEFAULT_TOLERANCE,
    FAILED_RUN,
    link_preemptions,
    restart_runs,
)

#: What names a job: clusters number their jobs independently.
JOB = ["cluster", "job_id_raw"]


def requeue_loops(
    linked: pl.DataFrame,
    k: int = 3,
    window: timedelta = timedelta(hours=24),
    t_short: timedelta = timedelta(minutes=30),
    tolerance: timedelta = DEFAULT_TOLERANCE,
    rf: float | None = None,
    alpha: float = 1e-6,
) -> list[dict[str, Any]]:
    """Crash loops with requeues, preemptions_caused and gpu_hours_lost (spec §3.3).

    gpu_hours_lost = the loop's own failed-run GPU-hours (a crash-looping run makes no progress)
    + min(runtime, 30 min) × GPUs of every preemption credited to its restarts (spec §3.2).

    With ``rf`` (failures per node-day), a streak made *only* of infrastructure failures must also
    be implausible as bad luck: P(N ≥ n | Poisson(n_nodes·rf·Σ runtime)) < ``alpha`` (reported as
    ``poisson_p``).  A 512-node job at RSC-1's rate has an MTTF of 7 h, so three quick NODE_FAILs
    in a row happen by chance on a big cluster; a real loop's p is many orders smaller.
    """
    cols = [
        "row_id",
        "cluster",
        "job_id_raw",
        "run_index",
        "state",
        "exit_code",
        "infra_failure",
        "elapsed_s",
        "start_time",
        "end_time",
        "gpus",
        "n_nodes",
        "job_id",
        "user",
        "job_name",
    ]
    # A slim projection of the jobs with k failed records (no other job can hold a streak of
    # k), sorted once; streak ids from one global cumulative sum (no window ops).  A record
    # without JobIDRaw has no requeues to count (old exports: array tasks, het components).
    # A job is its cluster and JobIDRaw: clusters number their jobs independently.
    looping = (
        linked.lazy()
        .filter(FAILED_RUN & pl.col("job_id_raw").is_not_null())
        .group_by(JOB)
        .len()
        .filter(pl.col("len") >= k)
        .select(JOB)
    )
    same_job = pl.all_horizontal([pl.col(c).eq_missing(pl.col(c).shift(1)) for c in JOB])
    df = (
        linked.lazy()
        .select(cols)
        .join(looping, on=JOB, how="semi")
        .collect()
        .sort(*JOB, "run_index")
        .with_columns(FAILED_RUN.alias("_failed"))
        .with_columns((~pl.col("_failed") | ~same_job).fill_null(True).cum_sum().alias("_streak"))
    )
    f = df.filter(pl.col("_failed")).with_columns(
        pl.when(pl.col("_streak").shift(k - 1) == pl.col("_streak"))
        .then(pl.col("end_time") - pl.col("start_time").shift(k - 1))
        .alias("_span")
    )
    streaks = (
        f.group_by("_streak")
        .agg(
            pl.col("cluster").first(),
            pl.col("job_id_raw").first(),
            pl.len().alias("failed_runs"),
            (pl.col("_span") <= window).any().alias("_in_window"),
            (pl.col("elapsed_s").median() / 60.0).alias("median_run_min"),
            pl.col("start_time").min().alias("first_start"),
            pl.col("end_time").max().alias("last_end"),
            gpu_hours().sum().alias("own_gpu_hours"),
            pl.col("infra_failure").fill_null(False).all().alias("_all_infra"),
            (pl.col("elapsed_s").sum() / 86400.0 * pl.col("n_nodes").max()).alias("_node_days"),
            pl.col("row_id"),
        )
        .filter(
            (pl.col("failed_runs") >= k)
            & pl.col("_in_window").fill_null(False)
            & (pl.col("median_run_min") < t_short.total_seconds() / 60.0)
        )
    )
    mu = streaks["_node_days"].to_numpy() * (rf or 0.0)
    p = stats.poisson.sf(streaks["failed_runs"].to_numpy() - 1, mu) if rf else np.ones(len(mu))
    streaks = streaks.with_columns(pl.Series("poisson_p", p, dtype=pl.Float64)).with_columns(
        pl.when(pl.col("_all_infra") & pl.lit(rf is not None))
        .then(pl.col("poisson_p"))
        .alias("poisson_p")
    )
    if rf is not None:
        streaks = streaks.filter(~pl.col("_all_infra") | (pl.col("poisson_p") < alpha))
    # A job's longest streak; of equally long ones the first (streak ids follow the job's run
    # order), never whichever the group_by happened to emit first.
    streaks = streaks.sort(["failed_runs", "_streak"], descending=[True, False]).unique(
        JOB, keep="first", maintain_order=True
    )
    # Did the same blamed node come back?  (Only the few flagged streaks need node lists.)
    if "blamed_nodes" in linked.columns and not streaks.is_empty():
        recur = (
            streaks.select("_streak", "row_id")
            .explode("row_id")
            .join(rows_by_id(linked, streaks["row_id"].explode(), ["blamed_nodes"]), on="row_id")
            .explode("blamed_nodes")
            .drop_nulls("blamed_nodes")
            .group_by("_streak")
            .agg(pl.col("blamed_nodes").is_duplicated().any().alias("same_node_recurs"))
        )
        streaks = streaks.join(recur, on="_streak", how="left")
    else:
        streaks = streaks.with_columns(pl.lit(None, pl.Boolean).alias("same_node_recurs"))
    streaks = streaks.with_columns(pl.col("same_node_recurs").fill_null(False))
    if streaks.is_empty():
        return []
    loop_jobs = streaks.select(JOB)
    # All restarts compete for victims (see goodput.goodput_lost); keep the loops' ones.
    all_restarts = restart_runs(linked, FAILED_RUN)
    links = link_preemptions(linked, all_restarts, tolerance)
    restarts = all_restarts.join(loop_jobs, on=JOB, how="semi")
    vict = (
        links.join(
            restarts.select(pl.col("row_id").alias("preemptor_row_id"), *JOB),
            on="preemptor_row_id",
        )
        .join(
            rows_by_id(linked, links["victim_row_id"], ["elapsed_s", "gpus"]),
            on="victim_row_id",
        )
        .group_by(JOB)
        .agg(
            pl.len().alias("preemptions_caused"),
            pl.col("gpus").sum().alias("preempted_gpus"),
            lost_gpu_hours().sum().alias("victim_gpu_hours_lost"),
        )
    )
    # The loops' jobs' records are all in ``df`` (every record of a job with k failed ones):
    # no second pass over the history; "first" is the job's first record in table order.
    first = pl.col("row_id").arg_min()
    info = (
        df.join(loop_jobs, on=JOB, how="semi")
        .group_by(JOB)
        .agg(
            pl.col("job_id").get(first),
            pl.col("gpus").max(),
            (pl.len() - 1).alias("requeues"),
            pl.col("user").get(first),
            pl.col("job_name").get(first),
        )
    )
    out = (
        streaks.join(info, on=JOB)
        .join(vict, on=JOB, how="left")
        .with_columns(
            pl.col("preemptions_caused", "preempted_gpus").fill_null(0),
            pl.col("victim_gpu_hours_lost").fill_null(0.0),
        )
        .with_columns(
            (pl.col("own_gpu_hours") + pl.col("victim_gpu_hours_lost")).alias("gpu_hours_lost")
        )
        .sort(["gpu_hours_lost", *JOB], descending=[True, False, False])
        .select(
            "cluster",
            "job_id",
            "job_id_raw",
            "user",
            "job_name",
            "gpus",
            "requeues",
            "failed_runs",
            "median_run_min",
            "first_start",
            "last_end",
            "preemptions_caused",
            "preempted_gpus",
            "own_gpu_hours",
            "victim_gpu_hours_lost",
            "gpu_hours_lost",
            "same_node_recurs",
            "poisson_p",
        )
    )
    return out.to_dicts()
