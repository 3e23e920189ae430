"""Small shared expressions over the run table (``accounting/schema.py``)."""

from __future__ import annotations

import polars as pl

from aegis_slurm.accounting.frames import chunked_like
from aegis_slurm.errors import InputError


class AnalyticsError(InputError):
    """Inputs a reliability formula or section cannot mean anything for (negative rates, zero
    GPUs, an empty period...): a one-line error, exit code 1."""


#: Half an hour of lost work per interruption: hourly checkpoints (HPCA'25 §IV, spec §3.1).
LOST_WORK_CAP_S = 1800


def gpu_hours() -> pl.Expr:
    """Allocated GPU-hours of a run record: ElapsedRaw/3600 × GPUs."""
    return pl.col("elapsed_s").fill_null(0).cast(pl.Float64) / 3600.0 * pl.col("gpus").fill_null(0)


def node_days() -> pl.Expr:
    """Node-days of runtime of a run record: ElapsedRaw/86400 × NNodes (spec §2.1)."""
    return (
        pl.col("elapsed_s").fill_null(0).cast(pl.Float64) / 86400.0 * pl.col("n_nodes").fill_null(0)
    )


def lost_gpu_hours(cap_s: int = LOST_WORK_CAP_S) -> pl.Expr:
    """min(runtime, 30 min) × GPUs, in GPU-hours (HPCA'25 §IV goodput, spec §3.1)."""
    return (
        pl.min_horizontal(pl.col("elapsed_s").fill_null(0), pl.lit(cap_s)).cast(pl.Float64)
        / 3600.0
        * pl.col("gpus").fill_null(0)
    )


def gpu_bucket(col: str = "gpus") -> pl.Expr:
    """Power-of-two GPU bucket: 2^floor(log2(gpus)) (1, 2, 4, …); null for CPU-only runs."""
    g = pl.col(col).cast(pl.Float64)
    return (
        pl.when(pl.col(col) >= 1)
        .then((2.0 ** g.log(2).floor()).round(0).cast(pl.Int64))
        .otherwise(None)
        .alias("gpu_bucket")
    )


def distinct_jobs(runs: pl.DataFrame, by: list[str] | None = None) -> pl.DataFrame:
    """Jobs among run records (per ``by`` group; one row without): distinct (cluster,
    JobIDRaw), as clusters number their jobs independently, and each record without JobIDRaw a
    job of its own (as job-run linkage reads it); never one job for all of them.

    Counted on one integer per job, the cluster's category code above a 32-bit JobIDRaw (as
    Slurm's are; job-run linkage packs them alike), exactly as on (cluster, JobIDRaw) pairs:
    hashing the pairs over a whole history's 20M records cost 2 GB.  Other ids: the pairs."""
    known = pl.col("job_id_raw").is_not_null()
    ids = runs.select(
        pl.col("job_id_raw").min().alias("lo"), pl.col("job_id_raw").max().alias("hi")
    )
    lo, hi = ids.row(0) if runs.height else (None, None)
    if lo is None or (lo >= 0 and hi < 2**32):
        code = pl.col("cluster").fill_null("").cast(pl.Categorical).to_physical().cast(pl.Int64)
        job = code * 2**32 + pl.col("job_id_raw")
    else:
        job = pl.struct("cluster", "job_id_raw")
    jobs = (job.filter(known).n_unique() + (~known).sum()).cast(pl.Int64).alias("jobs")
    return runs.group_by(by).agg(jobs) if by else runs.select(jobs)


def with_aligned(frame: pl.DataFrame, new: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with the columns of ``new`` (same rows) set beside or over its own, chunked
    as ``frame`` is (see :func:`chunked_like`)."""
    return frame.with_columns([chunked_like(s, frame) for s in new.get_columns()])


def seq_within(group: str) -> pl.Expr:
    """0-based position within runs of equal ``group`` values in a frame *sorted* by ``group``.

    Same result as ``pl.int_range(pl.len()).over(group)`` without a window over millions of
    small groups (one forward fill instead).
    """
    i = pl.int_range(pl.len(), dtype=pl.Int64)
    new = (pl.col(group) != pl.col(group).shift(1)).fill_null(True)
    return i - pl.when(new).then(i).otherwise(None).forward_fill()


def prev_in_group(expr: pl.Expr, group: str) -> pl.Expr:
    """``expr.shift(1)`` within groups of a frame sorted by ``group`` (null at a group start)."""
    same = (pl.col(group) == pl.col(group).shift(1)).fill_null(False)
    return pl.when(same).then(expr.shift(1))


def has_runtime() -> pl.Expr:
    """A run that ran: some runtime, or an infrastructure failure (a node can die at launch).
    A job cancelled before it started adds no run-time and no row to MTTF or r_f."""
    ran = pl.col("elapsed_s").fill_null(0) > 0
    if_infra = pl.col("infra_failure").fill_null(False)
    return ran | if_infra


def impute_end_time() -> pl.Expr:
    """End = Start + Elapsed for an ended run whose End sacct printed as Unknown (seen on
    NODE_FAIL records): without it the run counts in the taxonomy but not in r_f."""
    return (
        pl.when(
            pl.col("end_time").is_null()
            & pl.col("ended").fill_null(False)
            & pl.col("start_time").is_not_null()
            & pl.col("elapsed_s").is_not_null()
        )
        .then(pl.col("start_time") + pl.duration(seconds=pl.col("elapsed_s")))
        .otherwise(pl.col("end_time"))
        .alias("end_time")
    )
