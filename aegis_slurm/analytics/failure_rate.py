"""Cluster failure rate r_f per node-day of runtime (HPCA'25 §V "Comparison with job runs").

r_f = (#NODE_FAIL + #FAILED attributed to hardware) / Σ (ElapsedRaw/86400 × NNodes), both over
run records of jobs with more than ``min_gpus`` GPUs; every run of a requeued job counts
(analytics-spec §2.1).  RSC-1: 6.50, RSC-2: 2.34 failures per 1000 node-days.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import polars as pl

from aegis_slurm.analytics.common import has_runtime, node_days
from aegis_slurm.analytics.mttf import poisson_rate_interval

DEFAULT_MIN_GPUS = 128


def _population(attributed: pl.DataFrame, min_gpus: int) -> pl.DataFrame:
    # Strictly more than min_gpus (the paper's "more than 128 GPUs"; spec §9 doubt 4).  The
    # columns used are taken before the filter, which would otherwise copy node lists.
    cols = ["state", "gpus", "n_nodes", "elapsed_s", "end_time", "infra_failure", "cause"]
    return (
        attributed.select(*cols, "attribution_source")
        .filter(
            (pl.col("gpus") > min_gpus)
            & pl.col("elapsed_s").is_not_null()
            & pl.col("end_time").is_not_null()
            & has_runtime()
        )
        .with_columns(node_days().alias("_nd"))
    )


def failure_rate(
    attributed: pl.DataFrame,
    min_gpus: int = DEFAULT_MIN_GPUS,
    conf: float = 0.90,
    evidence_given: bool = False,
) -> dict[str, Any]:
    """r_f = failures / node-days over runs with gpus > ``min_gpus`` (spec §2.1), with an exact
    Poisson (chi-square) interval on the rate and a breakdown by cause and attribution source.

    ``lower_bound_only`` (spec §2.1: "without event data, report an r_f lower bound") is true
    only when no evidence source was given (``evidence_given`` false: no events, no signals, no
    aegis tag), so FAILED runs could not be attributed, and there is a failure to count.
    """
    pop = _population(attributed, min_gpus)
    k = int(pop["infra_failure"].sum())
    nd = float(pop["_nd"].sum())
    rf = k / nd if nd > 0 else None
    lo_mttf, hi_mttf = (
        poisson_rate_interval(k, nd, conf=conf, method="chi2") if nd > 0 else (None, None)
    )
    by_cause = (
        pop.filter(pl.col("infra_failure"))
        .group_by(pl.col("cause").fill_null("unattributed"), "attribution_source")
        .agg(pl.len().alias("failures"))
        .with_columns((pl.col("failures") / nd if nd else pl.lit(None)).alias("rf_per_node_day"))
        .sort(["failures", "cause", "attribution_source"], descending=[True, False, False])
    )
    attributed_failed = int((pop["infra_failure"] & (pop["state"] == "FAILED")).sum())
    return {
        "rf_per_node_day": rf,
        "rf_per_1000_node_days": rf * 1000 if rf is not None else None,
        "failures": k,
        "node_fail": int((pop["infra_failure"] & (pop["state"] == "NODE_FAIL")).sum()),
        "failed_hw": attributed_failed,
        "node_days": nd,
        "runs": pop.height,
        "min_gpus": min_gpus,
        # rate interval = reciprocal of the MTTF interval in node-days
        "ci90_low": None if nd <= 0 else (0.0 if hi_mttf == float("inf") else 1.0 / hi_mttf),
        "ci90_high": None if nd <= 0 else 1.0 / lo_mttf,
        "lower_bound_only": (not evidence_given) and k > 0 and attributed_failed == 0,
        "by_cause": by_cause.to_dicts(),
    }


def rolling_failure_rate(
    attributed: pl.DataFrame, min_gpus: int = DEFAULT_MIN_GPUS, window_days: int = 30
) -> pl.DataFrame:
    """Daily series of r_f over a trailing ``window_days`` window (HPCA'25 Fig. 5).

    A run's failure and its node-days are both assigned to the UTC day it ended, so the ratio of
    the two rolling sums is exact for runs shorter than a day and smooths longer ones.
    Columns: date, failures, node_days, failures_<w>d, node_days_<w>d, rf_<w>d.
    """
    pop = _population(attributed, min_gpus)
    if pop.is_empty():
        return pl.DataFrame(
            schema={
                "date": pl.Date(),
                "failures": pl.Int64(),
                "node_days": pl.Float64(),
                f"rf_{window_days}d": pl.Float64(),
            }
        )
    daily = pop.group_by(pl.col("end_time").dt.date().alias("date")).agg(
        pl.col("infra_failure").sum().cast(pl.Int64).alias("failures"),
        pl.col("_nd").sum().alias("node_days"),
    )
    days = pl.DataFrame(
        {
            "date": pl.date_range(
                daily["date"].min(), daily["date"].max(), timedelta(days=1), eager=True
            )
        }
    )
    w = window_days
    return (
        days.join(daily, on="date", how="left")
        .fill_null(0)
        .sort("date")
        .with_columns(
            pl.col("failures").rolling_sum(w, min_samples=1).alias(f"failures_{w}d"),
            pl.col("node_days").rolling_sum(w, min_samples=1).alias(f"node_days_{w}d"),
        )
        .with_columns((pl.col(f"failures_{w}d") / pl.col(f"node_days_{w}d")).alias(f"rf_{w}d"))
    )
