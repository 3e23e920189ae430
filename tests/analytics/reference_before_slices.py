"""The whole-history analytics as they were before the memory work of session 6 (commit
43d156d), kept verbatim as the reference the new code must equal: ``restart_runs``,
``goodput_lost`` and ``requeue_loops`` sorted every record, ``measured_ettr`` grouped every job
run.  Only their imports are adapted, and ``restart_runs`` also returns the restart's cluster,
which the shared ``link_preemptions`` now matches nodes by (two clusters may name a node alike)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import numpy as np
import polars as pl
from scipy import stats

from aegis_slurm.analytics.common import (
    gpu_bucket,
    gpu_hours,
    lost_gpu_hours,
    prev_in_group,
)
from aegis_slurm.analytics.ettr import ettr_finite
from aegis_slurm.analytics.goodput import (
    DEFAULT_RESTART_WITHIN,
    DEFAULT_TOLERANCE,
    FAILED_RUN,
    link_preemptions,
)


def restart_runs(
    linked: pl.DataFrame, failed: pl.Expr, restart_within: timedelta = DEFAULT_RESTART_WITHIN
) -> pl.DataFrame:
    """Records that restart a job run after a record matching ``failed``.

    ``linked`` needs ``row_id``, ``run_key`` and ``run_seq`` (see :func:`job_runs.link_job_runs`).
    Returns row_id, failed_row_id, after_infra (the failed record was an infrastructure failure),
    job_id_raw, gpus, start_time, nodes of each restart.
    """
    cols = [
        "row_id",
        "run_key",
        "run_seq",
        "cluster",
        "job_id_raw",
        "gpus",
        "start_time",
        "end_time",
        "state",
        "exit_code",
        "infra_failure",
    ]
    # Work on a slim projection (no node lists) and fetch nodes for the few restarts at the end.
    df = (
        linked.select(cols)
        .sort("run_key", "run_seq")
        .with_columns(
            prev_in_group(failed, "run_key").fill_null(False).alias("_prev_failed"),
            prev_in_group(pl.col("infra_failure"), "run_key").fill_null(False).alias("after_infra"),
            prev_in_group(pl.col("end_time"), "run_key").alias("_prev_end"),
            prev_in_group(pl.col("row_id"), "run_key").alias("failed_row_id"),
        )
    )
    out = df.filter(
        pl.col("_prev_failed")
        & pl.col("start_time").is_not_null()
        & ((pl.col("start_time") - pl.col("_prev_end")) <= restart_within)
    ).select(
        "row_id", "failed_row_id", "after_infra", "cluster", "job_id_raw", "gpus", "start_time"
    )
    return out.join(linked.select("row_id", "nodes"), on="row_id", how="left")


def goodput_lost(
    linked: pl.DataFrame,
    tolerance: timedelta = DEFAULT_TOLERANCE,
    restart_within: timedelta = DEFAULT_RESTART_WITHIN,
) -> dict[str, Any]:
    """First- and second-order GPU-hours lost to infrastructure failures (spec §3.1–§3.2).

    ``linked`` = attributed runs (``infra_failure``) with job-run keys.  Second-order losses are
    bucketed by the GPU count of the failed job whose restart preempted the victim.
    """
    first = linked.filter(pl.col("infra_failure")).with_columns(
        lost_gpu_hours().alias("lost"), gpu_bucket()
    )
    # Every restart after any failed run competes for a victim (a crash-loop restart next to an
    # infrastructure restart must not be credited to it); only infrastructure restarts count here.
    all_restarts = restart_runs(linked, FAILED_RUN, restart_within)
    links = link_preemptions(linked, all_restarts, tolerance)
    restarts = all_restarts.filter(pl.col("after_infra"))
    second = (
        links.join(
            linked.select(pl.col("row_id").alias("victim_row_id"), "elapsed_s", "gpus"),
            on="victim_row_id",
        )
        .with_columns(lost_gpu_hours().alias("lost"))
        .join(
            restarts.select(
                pl.col("row_id").alias("preemptor_row_id"), pl.col("gpus").alias("failed_gpus")
            ),
            on="preemptor_row_id",
        )
        .with_columns(gpu_bucket("failed_gpus"))
    )
    g1, g2 = float(first["lost"].sum()), float(second["lost"].sum())
    by1 = first.group_by("gpu_bucket").agg(
        pl.col("lost").sum().alias("first_order_gpu_hours"), pl.len().alias("failed_runs")
    )
    by2 = second.group_by("gpu_bucket").agg(
        pl.col("lost").sum().alias("second_order_gpu_hours"), pl.len().alias("preempted_runs")
    )
    counts = ["first_order_gpu_hours", "failed_runs", "second_order_gpu_hours", "preempted_runs"]
    by = (
        # the CPU-only bucket stays null (one row: null keys join), never bucket 0
        by1.join(by2, on="gpu_bucket", how="full", coalesce=True, nulls_equal=True)
        .with_columns(pl.col(counts).fill_null(0))
        .with_columns(
            (pl.col("first_order_gpu_hours") + pl.col("second_order_gpu_hours")).alias(
                "total_gpu_hours"
            )
        )
        .sort("gpu_bucket")
    )
    total = g1 + g2
    return {
        "goodput_lost_first_order": g1,
        "goodput_lost_second_order": g2,
        "goodput_lost_total": total,
        "share_second_order": g2 / total if total > 0 else None,
        "failed_runs": first.height,
        "restarts": restarts.height,
        "preempted_runs_linked": second.height,
        "preempted_runs_total": int((linked["state"] == "PREEMPTED").sum()),
        "by_size": by.to_dicts(),
        "link_method": "sacct heuristic (shared node, |End(P) - Start(F')| <= tolerance)",
        "tolerance_s": tolerance.total_seconds(),
    }


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
    ]
    # A slim projection sorted once; streak ids from one global cumulative sum (no window ops).
    df = (
        linked.select(cols)
        .sort("job_id_raw", "run_index")
        .with_columns(FAILED_RUN.alias("_failed"))
        .with_columns(
            (~pl.col("_failed") | (pl.col("job_id_raw") != pl.col("job_id_raw").shift(1)))
            .fill_null(True)
            .cum_sum()
            .alias("_streak")
        )
    )
    f = df.filter(pl.col("_failed")).with_columns(
        pl.when(pl.col("_streak").shift(k - 1) == pl.col("_streak"))
        .then(pl.col("end_time") - pl.col("start_time").shift(k - 1))
        .alias("_span")
    )
    streaks = (
        f.group_by("_streak")
        .agg(
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
    streaks = streaks.sort("failed_runs", descending=True).unique(
        "job_id_raw", keep="first", maintain_order=True
    )
    # Did the same blamed node come back?  (Only the few flagged streaks need node lists.)
    if "blamed_nodes" in linked.columns and not streaks.is_empty():
        recur = (
            streaks.select("_streak", "row_id")
            .explode("row_id")
            .join(linked.select("row_id", "blamed_nodes"), on="row_id")
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
    loop_ids = streaks["job_id_raw"]
    # All restarts compete for victims (see goodput.goodput_lost); keep the loops' ones.
    all_restarts = restart_runs(linked, FAILED_RUN)
    links = link_preemptions(linked, all_restarts, tolerance)
    restarts = all_restarts.filter(pl.col("job_id_raw").is_in(loop_ids.implode()))
    vict = (
        links.join(
            restarts.select(
                pl.col("row_id").alias("preemptor_row_id"), pl.col("job_id_raw").alias("loop_job")
            ),
            on="preemptor_row_id",
        )
        .join(
            linked.select(pl.col("row_id").alias("victim_row_id"), "elapsed_s", "gpus"),
            on="victim_row_id",
        )
        .group_by("loop_job")
        .agg(
            pl.len().alias("preemptions_caused"),
            pl.col("gpus").sum().alias("preempted_gpus"),
            lost_gpu_hours().sum().alias("victim_gpu_hours_lost"),
        )
    )
    info = (
        linked.filter(pl.col("job_id_raw").is_in(loop_ids.implode()))
        .group_by("job_id_raw")
        .agg(
            pl.col("job_id").first(),
            pl.col("gpus").max(),
            (pl.len() - 1).alias("requeues"),
            pl.col("user").first(),
            pl.col("job_name").first(),
        )
    )
    out = (
        streaks.join(info, on="job_id_raw")
        .join(vict.rename({"loop_job": "job_id_raw"}), on="job_id_raw", how="left")
        .with_columns(
            pl.col("preemptions_caused", "preempted_gpus").fill_null(0),
            pl.col("victim_gpu_hours_lost").fill_null(0.0),
        )
        .with_columns(
            (pl.col("own_gpu_hours") + pl.col("victim_gpu_hours_lost")).alias("gpu_hours_lost")
        )
        .sort("gpu_hours_lost", descending=True)
        .select(
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


def measured_ettr(
    linked: pl.DataFrame,
    rf: float | None,
    *,
    u0_min: float = 5.0,
    dt_cp_min: float = 60.0,
    min_training_hours: float = 24.0,
    qos: str | None = None,
    assume_all_interrupted: bool = True,
) -> pl.DataFrame:
    """ETTR of real job runs next to E[ETTR] (HPCA'25 §V Fig. 9; recipe spec §1.5 [D]).

    Per job run: R = Σ max(0, E_i − u0·[i>first] − I_i·Δt/2), W = Σ (Q_i + E_i),
    Q_i = Start − Eligible,
    I_i = 1 for every job (the paper's conservative assumption) unless ``assume_all_interrupted``
    is false, when only runs that ended NODE_FAIL/FAILED/PREEMPTED/REQUEUED count.  Kept: runs with
    Σ E_i ≥ ``min_training_hours`` (and QOS == ``qos`` when given, the paper's highest priority).
    ``expected_ettr`` is :func:`ettr.ettr_finite` with the run's nodes, the cluster ``rf``, its mean
    queue wait and its R.
    """
    # The columns used, then the filter and the sort (each would copy node lists otherwise).
    cols = ["run_key", "run_seq", "state", "qos", "gpus", "n_nodes", "elapsed_s"]
    df = linked.select(*cols, "start_time", "eligible_time").filter(
        pl.col("start_time").is_not_null(), pl.col("elapsed_s").is_not_null()
    )
    if qos is not None:
        df = df.filter(pl.col("qos") == qos)
    interrupted = (
        pl.lit(True)
        if assume_all_interrupted
        else pl.col("state").is_in(["NODE_FAIL", "FAILED", "PREEMPTED", "REQUEUED"])
    )
    e_min = pl.col("elapsed_s") / 60.0
    q_min = (
        ((pl.col("start_time") - pl.col("eligible_time")).dt.total_seconds() / 60.0)
        .clip(0)
        .fill_null(0)
    )
    per = (
        df.sort("run_key", "run_seq")
        .with_columns(
            (
                e_min
                - pl.when(pl.col("run_seq") > 0).then(u0_min).otherwise(0.0)
                - pl.when(interrupted).then(dt_cp_min / 2.0).otherwise(0.0)
            )
            .clip(0)
            .alias("_r"),
            (q_min + e_min).alias("_w"),
            q_min.alias("_q"),
        )
        .group_by("run_key")
        .agg(
            pl.col("_r").sum().alias("productive_min"),
            pl.col("_w").sum().alias("wallclock_min"),
            pl.col("_q").mean().alias("mean_queue_min"),
            pl.len().alias("jobs"),
            pl.col("gpus").max(),
            pl.col("n_nodes").max(),
            (pl.col("elapsed_s").sum() / 3600.0).alias("training_hours"),
        )
        .filter(pl.col("training_hours") >= min_training_hours)
        .with_columns(
            (pl.col("productive_min") / pl.col("wallclock_min")).alias("ettr"), gpu_bucket()
        )
    )
    if rf is None:
        return per.with_columns(pl.lit(None, pl.Float64).alias("expected_ettr"))
    exp = [
        ettr_finite(n, rf, u0_min, dt_cp_min, 0.0, q, max(r, 1e-9))
        for n, q, r in per.select("n_nodes", "mean_queue_min", "productive_min").iter_rows()
    ]  # one scalar formula per kept job run (≥ 24 h runs are few), not per record
    return per.with_columns(pl.Series("expected_ettr", exp, dtype=pl.Float64))
