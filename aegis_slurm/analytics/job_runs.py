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

from aegis_slurm.accounting.frames import repeated
from aegis_slurm.analytics.common import (
    distinct_jobs,
    gpu_bucket,
    gpu_hours,
    seq_within,
    with_aligned,
)
from aegis_slurm.analytics.ettr import ettr_finite

DEFAULT_LINK_GAP = timedelta(hours=6)
LINK_METHOD = pl.Enum(["job_id", "resubmit"])


def _key_hash(key: list[str], seed: int) -> pl.Expr:
    """One u64 per record for the resubmission key (a test swaps it for a colliding one)."""
    return pl.struct(key).hash(seed=seed)


def _job_key(rec: pl.DataFrame) -> tuple[pl.DataFrame, list[str]]:
    """``rec`` and the columns naming its job: (cluster code, JobIDRaw) packed into one u64
    ``_k`` when exact (code < 2^16, 0 <= JobIDRaw < 2^48), else the columns themselves.

    A record without JobIDRaw (an export without the column, of an array task or a het
    component) is a job of its own (``_solo``, its row): nothing says which records share it,
    and lumping them together would make one job of them all."""
    s = rec.select(
        pl.col("_c").max().alias("c"),
        pl.col("job_id_raw").min().alias("lo"),
        pl.col("job_id_raw").max().alias("hi"),
        pl.col("job_id_raw").null_count().alias("nulls"),
    ).row(0, named=True)
    if rec.height and s["nulls"] == 0 and s["c"] < 2**16 and s["lo"] >= 0 and s["hi"] < 2**48:
        k = pl.col("_c").cast(pl.UInt64) * pl.lit(2**48, pl.UInt64) + pl.col("job_id_raw").cast(
            pl.UInt64
        )
        return rec.with_columns(k.alias("_k")).drop("_c", "job_id_raw"), ["_k"]
    solo = pl.when(pl.col("job_id_raw").is_null()).then(pl.col("_i").cast(pl.Int64))
    return rec.with_columns(solo.fill_null(-1).alias("_solo")), ["_c", "job_id_raw", "_solo"]


#: Jobs are sorted and linked in this many slices of the first key hash's range, in hash order.
#: Jobs of different keys never link, and the slices in order are the one sort's order, so the
#: result (run keys included) is the one-pass result with a slice of its memory.
LINK_SLICES = 8


def link_job_runs(runs: pl.DataFrame, gap: timedelta = DEFAULT_LINK_GAP) -> pl.DataFrame:
    """Add ``run_key`` (int, one per job run), ``run_seq`` (order within it) and
    ``link_method`` ("job_id" for a later run of the same JobIDRaw, "resubmit" for the first record
    of a job linked by the heuristic, null otherwise).  Vectorized: jobs are collapsed to one row,
    linked by a sort plus a cumulative sum, and set back on their records.

    Memory, for years of history (20M records): only integers are grouped and sorted (the
    cluster becomes its category code, the resubmission key two independent hashes per record,
    and the few pairs the hashes link are then checked on the real strings, so a collision never
    links two keys); only the records of requeued jobs are grouped; jobs are sorted in
    :data:`LINK_SLICES` slices; only the records of job runs with more than one record are
    sorted.  The record table is never sorted or joined, and the wide table keeps its order."""
    key = ["cluster", "user", "account", "job_name", "gpus"]
    rec = runs.select(
        pl.col("cluster").fill_null("").cast(pl.Categorical).to_physical().alias("_c"),
        "job_id_raw",
        _key_hash(key, 0).alias("_h"),
        _key_hash(key, 1).alias("_h2"),
        "submit_time",
        "end_time",
        (pl.col("state") == "COMPLETED").alias("_done"),
    ).with_row_index("_i")
    rec, by = _job_key(rec)
    # Most jobs are one record: only the records of requeued jobs are grouped (a group_by of
    # every record is gigabytes at 20M); the others are their own job row already.
    multi = repeated(rec.select(pl.struct(by).hash() if len(by) > 1 else pl.col(by[0])).to_series())
    # Sorted once by job, Submit and record: each job's last record by Submit (ties in record
    # order) is then its group's last row, and the grouping runs over sorted keys (a sort
    # inside each of millions of groups took three times as long).
    first = pl.col("_i").arg_min()
    grouped = (
        rec.filter(multi)
        .sort(*by, "submit_time", "_i")
        .group_by(by, maintain_order=True)
        .agg(
            pl.col("_i").min(),
            pl.col("_h").get(first),
            pl.col("_h2").get(first),
            pl.col("submit_time").min().alias("_first"),
            pl.col("end_time").max().alias("_last_end"),
            pl.col("_done").last().alias("_last_done"),
        )
        .with_columns(pl.lit(True).alias("_multi"))
    )
    width = pl.lit(2**64 // LINK_SLICES, pl.UInt64)
    rec_slice = rec.select((pl.col("_h") // width).cast(pl.UInt8)).to_series()
    job_slice = grouped.select((pl.col("_h") // width).cast(pl.UInt8)).to_series()
    run_key = _scatter(rec.height, pl.Series([], dtype=pl.UInt32), pl.Series([], dtype=pl.UInt32))
    resub = _scatter(rec.height, pl.Series([], dtype=pl.UInt32), pl.Series([], dtype=pl.Boolean))
    multi_jobs, offset = [], 0
    for part in range(LINK_SLICES):
        single = rec.filter(~multi & (rec_slice == part)).select(
            *by,
            "_i",
            "_h",
            "_h2",
            pl.col("submit_time").alias("_first"),
            pl.col("end_time").alias("_last_end"),
            pl.col("_done").alias("_last_done"),
            pl.lit(False).alias("_multi"),
        )
        jobs = _link_sorted_jobs(
            pl.concat([single, grouped.filter(job_slice == part).select(single.columns)]),
            runs.select(key),
            "_k" if by == ["_k"] else "job_id_raw",  # within one key, as JobIDRaw orders
            gap,
        )
        del single
        jobs = jobs.with_columns(pl.col("run_key") + pl.lit(offset, pl.UInt32))
        offset += jobs.height - int(jobs["_resub"].sum())
        one = jobs.filter(~pl.col("_multi"))
        run_key.scatter(one["_i"], one["run_key"])
        resub.scatter(one["_i"], one["_resub"])
        multi_jobs.append(jobs.filter("_multi").select(*by, "_resub", "run_key"))
        del jobs, one
    # A requeued job's records are found by its key among the requeued records only.
    many = rec.filter(multi).select("_i", *by).join(pl.concat(multi_jobs), on=by, how="left")
    run_key.scatter(many["_i"], many["run_key"])
    resub.scatter(many["_i"], many["_resub"])
    del many, multi_jobs, grouped, multi, rec_slice
    # Order within a job run: only runs of more than one record need a sort.
    seq = pl.DataFrame({"_i": rec["_i"], "run_key": run_key, "submit_time": rec["submit_time"]})
    seq = (
        seq.filter(repeated(seq["run_key"]))
        .sort("run_key", "submit_time", "_i")
        .select("_i", seq_within("run_key").alias("run_seq"))
    )
    run_seq = _scatter(rec.height, seq["_i"], seq["run_seq"].cast(pl.UInt32), fill=0)
    del seq, rec
    # Two labels: an enum, not 20M text values (hundreds of MB over years of history).
    link_method = (
        pl.when(runs["run_index"] > 0)
        .then(pl.lit("job_id"))
        .when(resub)
        .then(pl.lit("resubmit"))
        .otherwise(None)
        .cast(LINK_METHOD)
    )
    linked = pl.select(
        run_key.alias("run_key"), run_seq.alias("run_seq"), link_method.alias("link_method")
    )
    return with_aligned(runs, linked)


def _link_sorted_jobs(
    jobs: pl.DataFrame, key_columns: pl.DataFrame, order: str, gap: timedelta
) -> pl.DataFrame:
    """One row per job (``_i`` its first record, ``_h``/``_h2`` its key hashes, ``_first``
    submit, ``_last_end``, ``_last_done``), sorted by key hashes then time, with ``_resub``
    (linked to the job before it) and ``run_key`` (from 1, the running count of job runs)."""
    # Two independent hashes keep each key's jobs contiguous in the sort: keys whose first
    # hashes collide are still apart unless the second collides too (2^-128 per pair).
    # That order as two stable sorts, by time then by the first hash (2.5x faster than one
    # sort on four keys); only when two keys' first hashes collide (2^-64 per pair) do their
    # jobs interleave there, and then the four-key sort is made.
    jobs = jobs.sort("_first", order, maintain_order=True).sort("_h", maintain_order=True)
    same_h = pl.col("_h") == pl.col("_h").shift(1)
    if jobs.select((same_h & (pl.col("_h2") != pl.col("_h2").shift(1))).any()).item():
        jobs = jobs.sort("_h", "_h2", "_first", order)  # (nulls_last=True is 15x slower here)
    delta = pl.col("_first") - pl.col("_last_end").shift(1)
    candidate = (
        (pl.col("_h") == pl.col("_h").shift(1))
        & (pl.col("_h2") == pl.col("_h2").shift(1))
        & pl.col("_last_done").shift(1).not_()
        & (delta <= gap)
        & (delta >= timedelta(0))
    ).fill_null(False)
    keep = [c for c in jobs.columns if c not in ("_h", "_h2", "_first", "_last_end", "_last_done")]
    jobs = jobs.select(*keep, pl.col("_i").shift(1).alias("_prev_i"), candidate.alias("_cand"))
    # Exact check of the candidates: the first record of each job against the previous job's.
    pairs = jobs.filter("_cand")
    cur = key_columns.gather(pairs["_i"])
    prev = key_columns.gather(pairs["_prev_i"])
    same = pl.DataFrame(
        {c: cur[c].eq_missing(prev[c]) for c in key_columns.columns},
        schema=dict.fromkeys(key_columns.columns, pl.Boolean),
    ).select(pl.all_horizontal(key_columns.columns))
    verified = pl.Series("_resub", pl.repeat(False, jobs.height, eager=True)).scatter(
        jobs.select(pl.int_range(pl.len()).filter(pl.col("_cand")))[:, 0], same.to_series()
    )
    return jobs.select(*keep, verified).with_columns((~pl.col("_resub")).cum_sum().alias("run_key"))


def _scatter(n: int, at: pl.Series, values: pl.Series, fill: Any = None) -> pl.Series:
    """A length-``n`` series holding ``values`` at positions ``at`` and ``fill`` elsewhere."""
    out = pl.repeat(fill, n, dtype=values.dtype, eager=True).alias(values.name)
    return out.scatter(at, values) if len(at) else out


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
    record = [
        (
            e_min
            - pl.when(pl.col("run_seq") > 0).then(u0_min).otherwise(0.0)
            - pl.when(interrupted).then(dt_cp_min / 2.0).otherwise(0.0)
        )
        .clip(0)
        .alias("_r"),
        (q_min + e_min).alias("_w"),
        q_min.alias("_q"),
    ]
    per_run = [
        pl.col("_r").sum().alias("productive_min"),
        pl.col("_w").sum().alias("wallclock_min"),
        pl.col("_q").mean().alias("mean_queue_min"),
        pl.len().alias("jobs"),
        pl.col("gpus").max(),
        pl.col("n_nodes").max(),
        (pl.col("elapsed_s").sum() / 3600.0).alias("training_hours"),
    ]
    # Job runs of one record (most of years of history) are their own sums: only runs with a
    # second record are grouped, and one-record runs shorter than the minimum are dropped first.
    again = linked.select(pl.col("run_key").filter(pl.col("run_seq") > 0)).to_series()
    in_again = pl.col("run_key").is_in(again.implode())
    grouped = df.filter(in_again).sort("run_key", "run_seq").with_columns(record)
    grouped = grouped.group_by("run_key").agg(per_run)
    single = (
        df.filter(~in_again, (pl.col("elapsed_s") / 3600.0) >= min_training_hours)
        .with_columns(record)
        .select(
            "run_key",
            pl.col("_r").alias("productive_min"),
            pl.col("_w").alias("wallclock_min"),
            pl.col("_q").alias("mean_queue_min"),
            pl.lit(1, pl.UInt32).alias("jobs"),
            "gpus",
            "n_nodes",
            (pl.col("elapsed_s") / 3600.0).alias("training_hours"),
        )
    )
    per = (
        pl.concat([grouped, single.select(grouped.columns)])
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
    """Jobs (distinct cluster and JobIDRaw, :func:`common.distinct_jobs`) and GPU-hours per
    power-of-two GPU bucket, with shares (HPCA'25 §IV Fig. 6: > 90 % of jobs ≤ one server but
    < 10 % of GPU time)."""
    df = (
        runs.select("gpus", "elapsed_s", "cluster", "job_id_raw")
        .filter(pl.col("gpus") >= 1)
        .with_columns(gpu_bucket(), gpu_hours().alias("_gh"))
    )
    jobs = distinct_jobs(df, ["gpu_bucket"])
    out = (
        df.group_by("gpu_bucket")
        .agg(pl.len().alias("runs"), pl.col("_gh").sum().alias("gpu_hours"))
        .join(jobs, on="gpu_bucket", nulls_equal=True)
        .select("gpu_bucket", "jobs", "runs", "gpu_hours")
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
