"""MTTF by job size with exact Poisson / Gamma intervals (HPCA'25 §IV Fig. 7, spec §2.2–§2.3)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, Literal

import polars as pl
from scipy import stats

from aegis_slurm.analytics.common import gpu_bucket, has_runtime, node_days

Method = Literal["chi2", "gamma", "jeffreys"]


def poisson_rate_interval(
    k: int, exposure: float, conf: float = 0.90, method: Method = "chi2"
) -> tuple[float, float]:
    """Two-sided ``conf`` interval on MTTF = exposure/k for k failures over ``exposure``.

    * ``chi2`` (default, exact time-truncated Poisson):
      MTTF ∈ [2T/χ²_{1−α/2}(2k+2), 2T/χ²_{α/2}(2k)] (spec §2.3).  With k = 0 there is no upper
      limit, so the whole 1 − ``conf`` goes to the one lower bound: MTTF > 2T/χ²_{conf}(2) =
      T/(−ln(1 − conf)), i.e. T/2.303 at 90% (the two-sided formula would give T/3.00, a 95%
      one-sided bound mislabelled 90%);
    * ``gamma`` (the paper's "fitted Gamma" read as a posterior λ ~ Gamma(k, rate T)):
      MTTF ∈ [T/G_k⁻¹(1−α/2), T/G_k⁻¹(α/2)]; (0, ∞) when k = 0;
    * ``jeffreys``: λ ~ Gamma(k + ½, rate T).

    Test vector (k=10, T=79 h): chi2 (4.66, 14.56), gamma (5.03, 14.56), jeffreys (4.84, 13.63).
    Returned in the unit of ``exposure``.
    """
    a = (1.0 - conf) / 2.0
    if exposure <= 0:
        return (math.nan, math.nan)
    if method == "chi2":
        if k == 0:
            return (float(exposure / -math.log1p(-conf)), math.inf)
        lo = 2.0 * exposure / stats.chi2.ppf(1.0 - a, 2 * k + 2)
        hi = math.inf if k == 0 else 2.0 * exposure / stats.chi2.ppf(a, 2 * k)
        return (float(lo), float(hi))
    shape = k + (0.5 if method == "jeffreys" else 0.0)
    if method not in ("gamma", "jeffreys"):
        raise ValueError(f"unknown interval method {method!r}")
    if shape <= 0:
        return (0.0, math.inf)
    return (
        float(exposure / stats.gamma.ppf(1.0 - a, shape)),
        float(exposure / stats.gamma.ppf(a, shape)),
    )


def theory_mttf_hours(n_nodes: float, rf: float) -> float:
    """MTTF = (N_nodes·r_f)⁻¹ in hours (HPCA'25 Fig. 7 theory line)."""
    return math.inf if n_nodes * rf <= 0 else 24.0 / (n_nodes * rf)


def project_mttf(gpus: Iterable[int], rf: float, gpus_per_node: int = 8) -> list[dict[str, float]]:
    """Projected MTTF for user-named job sizes: (ceil(gpus/gpn)·r_f)⁻¹ (HPCA'25 §IV: 16,384 GPUs
    → 1.8 h and 131,072 GPUs → 0.23 h at r_f = 6.5/1000 node-days)."""
    return [
        {
            "gpus": g,
            "n_nodes": -(-g // gpus_per_node),
            "mttf_hours": theory_mttf_hours(-(-g // gpus_per_node), rf),
        }
        for g in gpus
    ]


def mttf_by_size(
    attributed: pl.DataFrame,
    rf: float | None,
    conf: float = 0.90,
    method: Method = "chi2",
) -> list[dict[str, Any]]:
    """Per power-of-two GPU bucket b: MTTF_b = T_b/k_b with T_b the summed runtime of the bucket's
    run records and k_b its infrastructure failures (r_f numerator definition), the ``conf``
    interval of :func:`poisson_rate_interval`, and the theory line 1/(n̄_b·r_f) where n̄_b is the
    runtime-weighted mean node count of the bucket (spec §2.2).
    """
    df = (
        attributed.select("gpus", "n_nodes", "elapsed_s", "end_time", "infra_failure")
        .filter(
            pl.col("gpus") >= 1,
            pl.col("elapsed_s").is_not_null(),
            pl.col("end_time").is_not_null(),
            has_runtime(),
        )
        .with_columns(gpu_bucket(), node_days().alias("_nd"))
    )
    agg = (
        df.group_by("gpu_bucket")
        .agg(
            pl.len().alias("runs"),
            pl.col("infra_failure").sum().cast(pl.Int64).alias("failures"),
            (pl.col("elapsed_s").sum() / 3600.0).alias("runtime_hours"),
            pl.col("_nd").sum().alias("node_days"),
        )
        .sort("gpu_bucket")
    )
    out = []
    for b, runs, k, t_h, nd in agg.iter_rows():
        lo, hi = poisson_rate_interval(int(k), float(t_h), conf=conf, method=method)
        n_bar = nd * 24.0 / t_h if t_h > 0 else math.nan
        out.append(
            {
                "gpus": int(b),
                "runs": int(runs),
                "failures": int(k),
                "runtime_hours": float(t_h),
                "node_days": float(nd),
                "mean_nodes": n_bar,
                "mttf_hours": float(t_h) / k if k else None,
                "ci90_low_hours": lo,
                "ci90_high_hours": None if math.isinf(hi) else hi,
                "theory_mttf_hours": theory_mttf_hours(n_bar, rf) if rf else None,
            }
        )
    return out
