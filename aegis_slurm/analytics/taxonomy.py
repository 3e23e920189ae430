"""Failure taxonomy: run records and GPU-hours per end state (HPCA'25 §IV Fig. 3)."""

from __future__ import annotations

from typing import Any

import polars as pl

from aegis_slurm.analytics.attribution import attribution_summary
from aegis_slurm.analytics.common import gpu_hours

#: Category of an attributed run (the paper's "HW" slice is ``infra_failure``).
_CATEGORY = (
    pl.when(pl.col("infra_failure"))
    .then(pl.lit("infra_failure"))
    .when(pl.col("state").is_in(["FAILED", "OUT_OF_MEMORY", "DEADLINE"]))
    .then(pl.lit("user_failure"))
    .otherwise(pl.col("state").str.to_lowercase())
)


def _shares(df: pl.DataFrame, key: str) -> list[dict[str, Any]]:
    return (
        df.group_by(key)
        .agg(pl.len().alias("runs"), pl.col("_gh").sum().alias("gpu_hours"))
        .with_columns(
            (pl.col("runs") / pl.col("runs").sum()).alias("run_share"),
            (pl.col("gpu_hours") / pl.col("gpu_hours").sum()).fill_nan(0.0).alias("gpu_hour_share"),
        )
        .sort(["runs", key], descending=[True, False])
        .to_dicts()
    )


def failure_taxonomy(attributed: pl.DataFrame) -> dict[str, Any]:
    """Runs and GPU-hours (ElapsedRaw × GPUs) per end state, per category (infra vs user failure),
    and per attributed cause, each with shares (HPCA'25 §IV Fig. 3 / Fig. 4; spec §2.1).

    Counts are *run records* (``--duplicates``): every run of a requeued job ends in a state.
    ``attributed`` is the output of :func:`attribution.attribute_failures`; open states
    (RUNNING/PENDING) are left out.
    """
    # Same population as r_f and MTTF: runs with an end time (see common.impute_end_time).
    # The columns used, then the filter: filtering the whole table would copy node lists.
    df = (
        attributed.select(
            "state", "ended", "end_time", "elapsed_s", "gpus", "infra_failure", "cause"
        )
        .filter(
            (pl.col("ended") | (pl.col("state") == "REQUEUED")) & pl.col("end_time").is_not_null()
        )
        .with_columns(gpu_hours().alias("_gh"), _CATEGORY.alias("category"))
    )
    infra = df.filter(pl.col("infra_failure"))
    return {
        "total_runs": df.height,
        "total_gpu_hours": float(df["_gh"].sum()),
        "by_state": _shares(df, "state"),
        "by_category": _shares(df, "category"),
        "infra_by_cause": _shares(
            infra.with_columns(pl.col("cause").fill_null("unattributed")), "cause"
        )
        if infra.height
        else [],
        "attribution_sources": attribution_summary(
            attributed.select("infra_failure", "attribution_source", "state")
        ),
    }
