"""The job-run table: one schema, versioned, documented here and nowhere else.

One row per Slurm accounting record of a job allocation (``sacct --allocations --duplicates``).
A requeued job has one row per run; every run but the last normally reads REQUEUED, NODE_FAIL or
PREEMPTED.  Steps (``123.batch``, ``123.0``, ``123.extern``) are never rows.

Row identity (used to de-duplicate re-ingested windows): ``(cluster, job_id_raw, submit_time)``.
Slurm resets Submit on every requeue, so each run has its own key.  When the same key is ingested
twice the ended record wins over a not-yet-ended one, and otherwise the newer ingest wins.
"""

from __future__ import annotations

import polars as pl

from aegis_slurm.node.slurm import JOB_ENDED_STATES

#: 2: text columns hold "" as null on disk (the table itself is unchanged since 1).
SCHEMA_VERSION = 2

UTC_TIME = pl.Datetime("us", "UTC")

#: column -> dtype, in storage order.  Times are UTC; durations are whole seconds.
RUN_SCHEMA: dict[str, pl.DataType] = {
    "cluster": pl.String(),  # "" when the export had no Cluster column
    "job_id_raw": pl.Int64(),  # JobIDRaw: unique per allocation (array task / het component)
    "job_id": pl.String(),  # JobID as displayed: "14_2", "15+1", "7"
    "array_job_id": pl.Int64(),  # 14 for "14_2"; null when not an array task
    "array_task_id": pl.Int64(),  # 2 for "14_2"
    "het_job_id": pl.Int64(),  # 15 for "15+1"; null when not a het component
    "het_job_offset": pl.Int64(),  # 1 for "15+1"
    "run_index": pl.Int32(),  # 0-based order of this run among the records of job_id_raw
    "job_name": pl.String(),
    "user": pl.String(),
    "account": pl.String(),
    "partition": pl.String(),
    "qos": pl.String(),
    "state": pl.String(),  # base state, e.g. "CANCELLED" (see STATES)
    "state_raw": pl.String(),  # as printed, e.g. "CANCELLED by 1001"
    "cancelled_by_uid": pl.Int64(),  # 1001 for "CANCELLED by 1001"
    "ended": pl.Boolean(),  # state is final (not PENDING/RUNNING/REQUEUED/...)
    "exit_code": pl.Int32(),  # ExitCode "a:b" -> a
    "exit_signal": pl.Int32(),  # ExitCode "a:b" -> b
    "derived_exit_code": pl.Int32(),
    "derived_exit_signal": pl.Int32(),
    "submit_time": UTC_TIME,  # None when sacct printed Unknown/None
    "eligible_time": UTC_TIME,
    "start_time": UTC_TIME,
    "end_time": UTC_TIME,
    "elapsed_s": pl.Int64(),  # ElapsedRaw (or Elapsed parsed)
    "timelimit_s": pl.Int64(),  # null for UNLIMITED / Partition_Limit
    "n_nodes": pl.Int32(),  # NNodes as sacct prints it (the requested count if never started)
    "gpus": pl.Int32(),  # from AllocTRES: untyped gres/gpu, else sum of typed; never both
    "gpu_types": pl.String(),  # "h100" or "a100,h100"; "" when untyped only
    "node_list": pl.String(),  # compressed hostlist as printed; "" for "None assigned"
    "nodes": pl.List(pl.String()),  # expanded hostlist
    "failed_node": pl.String(),  # FailedNode (Slurm 23.02+); "" when unknown
    "reason": pl.String(),
    "flags": pl.String(),
    "comment": pl.String(),
    "admin_comment": pl.String(),
    "system_comment": pl.String(),
    "work_dir": pl.String(),
    "source": pl.String(),  # where it came from: a file path, or "sacct:<day>" for live ingest
}

#: States Slurm's accounting can print (base token), with OPEN_STATES; others are rejected as
#: "unknown state".  Ended: one definition, shared with the crash-loop guard.
ENDED_STATES = JOB_ENDED_STATES
#: Not final: the job may come back (REQUEUED) or is still going.  XDMoD treats these alike.
OPEN_STATES = frozenset(
    {
        "PENDING",
        "RUNNING",
        "REQUEUED",
        "RESIZING",
        "SUSPENDED",
        "SPECIAL_EXIT",
        "REQUEUE_HOLD",
        "REQUEUE_FED",
        "COMPLETING",
        "CONFIGURING",
        "SIGNALING",
        "STAGE_OUT",
        "STOPPED",
        "RESV_DEL_HOLD",
        "POWER_UP_NODE",
        "UPDATE_DB",
    }
)
STATES = ENDED_STATES | OPEN_STATES


def empty_runs() -> pl.DataFrame:
    """An empty job-run table with the full schema."""
    return pl.DataFrame(schema=RUN_SCHEMA)
