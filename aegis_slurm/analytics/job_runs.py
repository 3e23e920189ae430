"""Job-run linkage, measured ETTR of real job runs and the job-size distribution.

A *job run* is the sequence of jobs of one training task (HPCA'25 §V); its job IDs may differ.
Linkage heuristic (analytics-spec §1.5, priority order): (1) records sharing JobIDRaw (requeues);
(2) a user resubmission: same (cluster, user, account, JobName, GPUs) submitted within
``gap`` (default 6 h) of the previous record's End, when that record did not end COMPLETED.
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

import polars as pl

from aegis_slurm.analytics.common import gpu_bucket, gpu_hours, seq_within, with_aligned
from aegis_slurm.analytics.ettr import ettr_finite

DEFAULT_LINK_GAP = timedelta(hours=6)


def _key_hash(key: list[str]) -> pl.Expr:
    """One u64 per record for the resubmission key (a test swaps it for a colliding one)."""
    return pl.struct(key).hash()


def _job_key(rec: pl.DataFrame) -> tuple[pl.DataFrame, list[str]]:
    """``rec`` and the columns naming its job: (cluster code, JobIDRaw) packed into one u64
    ``_k`` when exact (no null, code < 2^16, 0 <= JobIDRaw < 2^48), else the two columns."""
    s = rec.select(
        pl.col("_c").max().alias("c"),
        pl.col("job_id_raw").min().alias("lo"),
        pl.col("job_id_raw").max().alias("hi"),
        (pl.col("_c").null_count() + pl.col("job_id_raw").null_count()).alias("nulls"),
    ).row(0, named=True)
    if rec.height and s["nulls"] == 0 and s["c"] < 2**16 and s["lo"] >= 0 and s["hi"] < 2**48:
        k = (pl.col("_c").cast(pl.UInt64) << 48) | pl.col("job_id_raw").cast(pl.UInt64)
        return rec.with_columns(k.alias("_k")).drop("_c"), ["_k"]
    return rec, ["_c", "job_id_raw"]


def link_job_runs(runs: pl.DataFrame, gap: timedelta = DEFAULT_LINK_GAP) -> pl.DataFrame:
    """Add ``run_key`` (int, one per job run), ``run_seq`` (order within it) and
    ``link_method`` ("job_id" for a later run of the same JobIDRaw, "resubmit" for the first record
    of a job linked by the heuristic, null otherwise).  Vectorized: jobs are collapsed to one row,
    linked by a sort plus a cumulative sum, and joined back.

    Only integers are grouped and sorted: the cluster becomes its category code (exact) and the
    resubmission key one hash per record; the few pairs the hash links are then checked on the
    real strings, so a collision never links two keys.  The wide table keeps its order."""
    key = ["cluster", "user", "account", "job_name", "gpus"]
    rec = runs.select(
        pl.col("cluster").cast(pl.Categorical).to_physical().alias("_c"),
        "job_id_raw",
        _key_hash(key).alias("_h"),
        "submit_time",
        "end_time",
        (pl.col("state") == "COMPLETED").alias("_done"),
        "run_index",
    ).with_row_index("_i")
    rec, by = _job_key(rec)
    # Most jobs are one record: only the records of requeued jobs are grouped (a group_by of
    # every record is gigabytes at 20M); the others are their own job row already.
    multi = rec.select(pl.struct(by).is_duplicated() if len(by) > 1 else pl.col(by[0]).is_duplicated())
    multi = multi.to_series()
    job_cols = [*by, "job_id_raw", "_i", "_h", "_first", "_last_end", "_last_done"]
    single = rec.filter(~multi).select(
        *by,
        *(["job_id_raw"] if "job_id_raw" not in by else []),
        "_i",
        "_h",
        pl.col("submit_time").alias("_first"),
        pl.col("end_time").alias("_last_end"),
        pl.col("_done").alias("_last_done"),
    )
    grouped = (
        rec.filter(multi)
        .group_by(by)
        .agg(
            *([pl.col("job_id_raw").first()] if "job_id_raw" not in by else []),
            pl.col("_i").first(),
            pl.col("_h").first(),
            pl.col("submit_time").min().alias("_first"),
            pl.col("end_time").max().alias("_last_end"),
            pl.col("_done").sort_by("submit_time", maintain_order=True).last().alias("_last_done"),
        )
    )
    del multi
    jobs = pl.concat([single.select(job_cols), grouped.select(job_cols)]).sort(
        "_h", "_first", "job_id_raw"
    )  # (nulls_last=True is 15x slower here)
    del single, grouped
    delta = pl.col("_first") - pl.col("_last_end").shift(1)
    candidate = (
        (pl.col("_h") == pl.col("_h").shift(1))
        & pl.col("_last_done").shift(1).not_()
        & (delta <= gap)
        & (delta >= timedelta(0))
    ).fill_null(False)
    jobs = jobs.select(
        *by, "_i", pl.col("_i").shift(1).alias("_prev_i"), candidate.alias("_cand")
    )
    # Exact check of the candidates: the first record of each job against the previous job's.
    pairs = jobs.filter("_cand")
    cur = runs.select(key).gather(pairs["_i"])
    prev = runs.select(key).gather(pairs["_prev_i"])
    same = pl.DataFrame(
        {c: cur[c].eq_missing(prev[c]) for c in key}, schema={c: pl.Boolean for c in key}
    ).select(pl.all_horizontal(key).alias("_same"))["_same"]
    verified = pl.Series("_cand", pl.repeat(False, jobs.height, eager=True)).scatter(
        jobs.select(pl.int_range(pl.len()).filter(pl.col("_cand")))[:, 0],
        same,
    )
    jobs = jobs.select(*by, pl.lit(verified).alias("_resub")).with_columns(
        (~pl.col("_resub")).cum_sum().alias("run_key")
    )
    keyed = (
        rec.select("_i", *by, "submit_time", "run_index")
        .join(jobs, on=by, how="left")
        .sort("run_key", "submit_time", "_i")
        .with_columns(
            seq_within("run_key").alias("run_seq"),
            pl.when(pl.col("run_index") > 0)
            .then(pl.lit("job_id"))
            .when(pl.col("_resub"))
            .then(pl.lit("resubmit"))
            .otherwise(None)
            .alias("link_method"),
        )
        .sort("_i")
    )
    del rec, jobs
    return with_aligned(runs, keyed.select("run_key", "run_seq", "link_method"))


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


def measured_ettr_summary(per_run: pl.DataFrame) -> list[dict[str, Any]]:
    """Mean measured ETTR and mean E[ETTR] per GPU bucket (Fig. 9 analogue)."""
    if per_run.is_empty():
        return []
    return (
        per_run.group_by("gpu_bucket")
        .agg(
            pl.len().alias("job_runs"),
            pl.col("ettr").mean().alias("measured_ettr"),
            pl.col("expected_ettr").mean().alias("expected_ettr"),
            pl.col("mean_queue_min").mean().alias("mean_queue_min"),
        )
        .sort("gpu_bucket")
        .to_dicts()
    )


def size_distribution(runs: pl.DataFrame) -> list[dict[str, Any]]:
    """Jobs (distinct JobIDRaw) and GPU-hours per power-of-two GPU bucket, with shares
    (HPCA'25 §IV Fig. 6: > 90 % of jobs ≤ one server but < 10 % of GPU time)."""
    df = (
        runs.select("gpus", "elapsed_s", "job_id_raw")
        .filter(pl.col("gpus") >= 1)
        .with_columns(gpu_bucket(), gpu_hours().alias("_gh"))
    )
    out = (
        df.group_by("gpu_bucket")
        .agg(
            pl.col("job_id_raw").n_unique().alias("jobs"),
            pl.len().alias("runs"),
            pl.col("_gh").sum().alias("gpu_hours"),
        )
        .with_columns(
            (pl.col("jobs") / pl.col("jobs").sum()).alias("job_share"),
            (pl.col("gpu_hours") / pl.col("gpu_hours").sum()).alias("gpu_hour_share"),
        )
        .sort("gpu_bucket")
    )
    return [
        {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}
        for row in out.to_dicts()
    ]
