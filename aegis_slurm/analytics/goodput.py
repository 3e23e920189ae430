"""Goodput lost to infrastructure failures, first and second order (HPCA'25 §IV Fig. 8).

First order: every infrastructure-failed run loses min(runtime, 30 min) × GPUs (hourly
checkpoints lose half an hour on average).  Second order: PREEMPTED runs of other jobs whose
preemption made room for the *restart* of a failed job lose the same (spec §3.1).  The paper finds
16 % of the total loss is second order on RSC-1.

Preemption linkage is the sacct-only heuristic of spec §3.2: a PREEMPTED run P is credited to a
restart F' when they share a node and |End(P) − Start(F')| ≤ ``tolerance`` (GraceTime + KillWait
+ slack; default 30 s + 120 s), where F' is the next record of a failed job's run starting within
``restart_within`` (6 h) of the failure.  With several candidate preemptors the one with the
largest node overlap wins.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import polars as pl

from aegis_slurm.accounting.frames import repeated, rows_by_id
from aegis_slurm.analytics.common import gpu_bucket, lost_gpu_hours, prev_in_group

DEFAULT_TOLERANCE = timedelta(seconds=150)
DEFAULT_RESTART_WITHIN = timedelta(hours=6)


#: A run that failed (spec §3.3): NODE_FAIL, FAILED, BOOT_FAIL, OUT_OF_MEMORY, an attributed
#: infrastructure failure, or REQUEUED with a non-zero exit code (RequeueExit crash loop).
FAILED_RUN = (
    pl.col("state").is_in(["NODE_FAIL", "FAILED", "BOOT_FAIL", "OUT_OF_MEMORY"])
    | ((pl.col("state") == "REQUEUED") & (pl.col("exit_code").fill_null(0) != 0))
    | pl.col("infra_failure").fill_null(False)
)


def restart_runs(
    linked: pl.DataFrame, failed: pl.Expr, restart_within: timedelta = DEFAULT_RESTART_WITHIN
) -> pl.DataFrame:
    """Records that restart a job run after a record matching ``failed``.

    ``linked`` needs ``row_id``, ``run_key`` and ``run_seq`` (see :func:`job_runs.link_job_runs`).
    Returns row_id, failed_row_id, after_infra (the failed record was an infrastructure failure),
    cluster, job_id_raw, gpus, start_time, nodes of each restart.
    """
    # Work on a slim projection (no text, no node lists) of the job runs with a second record
    # (no other record can restart anything: years of history are mostly one-record runs),
    # sorted on one packed integer, and fetch the rest for the few restarts at the end.
    slim = linked.select(
        "row_id",
        "run_key",
        "start_time",
        "end_time",
        "infra_failure",
        failed.alias("_failed"),
        (pl.col("run_key").cast(pl.UInt64) * 2**32 + pl.col("run_seq").cast(pl.UInt64)).alias(
            "_order"
        ),
    ).filter(repeated(linked.get_column("run_key")))
    df = slim.sort("_order").with_columns(
        prev_in_group(pl.col("_failed"), "run_key").fill_null(False).alias("_prev_failed"),
        prev_in_group(pl.col("infra_failure"), "run_key").fill_null(False).alias("after_infra"),
        prev_in_group(pl.col("end_time"), "run_key").alias("_prev_end"),
        prev_in_group(pl.col("row_id"), "run_key").alias("failed_row_id"),
    )
    out = df.filter(
        pl.col("_prev_failed")
        & pl.col("start_time").is_not_null()
        & ((pl.col("start_time") - pl.col("_prev_end")) <= restart_within)
    )
    rest = rows_by_id(linked, out["row_id"], ["cluster", "job_id_raw", "gpus", "nodes"])
    return out.select("row_id", "failed_row_id", "after_infra").with_columns(
        rest.get_column("cluster"),
        rest.get_column("job_id_raw"),
        rest.get_column("gpus"),
        out.get_column("start_time"),
        rest.get_column("nodes"),
    )


def link_preemptions(
    runs: pl.DataFrame, restarts: pl.DataFrame, tolerance: timedelta = DEFAULT_TOLERANCE
) -> pl.DataFrame:
    """PREEMPTED runs credited to a restart: victim_row_id, preemptor_row_id, overlap_nodes,
    gap_s (End(P) − Start(F') in seconds).  Vectorized as-of join per node of one cluster.

    ``restarts``: :func:`restart_runs` (its ``cluster`` names the restart's nodes' cluster)."""
    schema = {
        "victim_row_id": pl.UInt32(),
        "preemptor_row_id": pl.UInt32(),
        "overlap_nodes": pl.UInt32(),
        "gap_s": pl.Float64(),
    }
    victims = (
        runs.lazy()  # lazily, so only the selected columns are filtered
        .filter((pl.col("state") == "PREEMPTED") & pl.col("end_time").is_not_null())
        .select(
            pl.col("row_id").alias("victim_row_id"),
            pl.col("cluster").fill_null("").alias("_cl"),
            pl.col("job_id_raw").alias("_vjob"),
            pl.col("end_time").alias("_t"),
            pl.col("nodes").alias("node"),
        )
        .explode("node")
        .drop_nulls("node")
        .sort("_t")
        .collect()
    )
    pre = (
        restarts.select(
            pl.col("row_id").alias("preemptor_row_id"),
            pl.col("cluster").fill_null("").alias("_cl"),
            pl.col("job_id_raw").alias("_fjob"),
            pl.col("start_time").alias("_t"),
            pl.col("start_time").alias("_fstart"),
            pl.col("nodes").alias("node"),
        )
        .explode("node")
        .drop_nulls("node")
        .sort("_t")
    )
    if victims.is_empty() or pre.is_empty():
        return pl.DataFrame(schema=schema)
    # A node is its cluster's: two clusters may both name theirs gpu001, and one cluster's
    # restart never makes room on the other's machine.
    hits = victims.join_asof(
        pre,
        on="_t",
        by=["_cl", "node"],
        strategy="nearest",
        tolerance=tolerance,
        check_sortedness=False,
    ).filter(pl.col("preemptor_row_id").is_not_null() & (pl.col("_vjob") != pl.col("_fjob")))
    return (
        hits.group_by("victim_row_id", "preemptor_row_id")
        .agg(
            pl.len().cast(pl.UInt32).alias("overlap_nodes"),
            ((pl.col("_t") - pl.col("_fstart")).dt.total_seconds().first())
            .cast(pl.Float64)
            .alias("gap_s"),
        )
        .sort(["victim_row_id", "overlap_nodes", "gap_s"], descending=[False, True, False])
        .unique("victim_row_id", keep="first", maintain_order=True)
        .select(list(schema))
    )


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
            rows_by_id(linked, links["victim_row_id"], ["elapsed_s", "gpus"]),
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
