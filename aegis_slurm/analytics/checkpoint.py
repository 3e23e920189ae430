"""Checkpoint-interval planning: Young, Daly, the argmax of E[ETTR] and inverse solvers.

Notation (analytics-spec §5): δ = w_cp (checkpoint write), M = job MTTF = 1/(N_nodes·r_f),
R = u0 (restart).  All times in minutes; ``rf`` in failures per node-day.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import polars as pl
from scipy.optimize import brentq, minimize_scalar

from aegis_slurm.analytics.common import AnalyticsError
from aegis_slurm.analytics.ettr import (
    ettr_renewal,
    ettr_renewal_array,
    job_failure_rate_per_min,
)


def check_job_inputs(n_nodes: float, rf: float, u0: float, w_cp: float, q: float) -> None:
    """Refuse inputs no formula here is defined for, with a message naming the parameter."""
    if not (n_nodes >= 1):
        raise AnalyticsError(f"the job needs at least one node (got {n_nodes})")
    if not (rf >= 0 and math.isfinite(rf)):
        raise AnalyticsError(f"r_f must be a finite failure rate >= 0 per node-day (got {rf})")
    for name, v in (("restart time u0", u0), ("checkpoint write time", w_cp), ("queue wait", q)):
        if not (v >= 0 and math.isfinite(v)):
            raise AnalyticsError(f"{name} must be >= 0 minutes (got {v})")


def young_interval(w_cp: float, mttf_min: float) -> float:
    """Young 1974 (CACM 17(9)) first order: τ = sqrt(2·δ·M) (spec §5)."""
    return math.sqrt(2.0 * w_cp * mttf_min)


def daly_first_order(w_cp: float, mttf_min: float, restart_min: float) -> float:
    """Daly 2006 (FGCS 22(3)) first-order model: τ = sqrt(2·δ·(M + R)) (spec §5)."""
    return math.sqrt(2.0 * w_cp * (mttf_min + restart_min))


def daly_higher_order(w_cp: float, mttf_min: float) -> float:
    """Daly 2006 higher order (spec §5):
    τ = sqrt(2δM)·[1 + (1/3)·sqrt(δ/(2M)) + (1/9)·(δ/(2M))] − δ for δ < 2M, else τ = M.
    """
    if w_cp >= 2.0 * mttf_min:
        return mttf_min
    x = w_cp / (2.0 * mttf_min)
    return math.sqrt(2.0 * w_cp * mttf_min) * (1.0 + math.sqrt(x) / 3.0 + x / 9.0) - w_cp


def optimal_interval(n_nodes: float, rf: float, u0: float, w_cp: float) -> float:
    """argmax_Δt of the E[ETTR] form (spec §5): Δt* = −w + sqrt(w² + 2(1 − λu0)·w/λ).

    The queue factor 1/(1 + λq) of :func:`ettr_longrun` does not depend on Δt, so q does not move
    the optimum.  With w = 0 checkpoints are free and the optimum is 0 (as often as possible).
    """
    lam = job_failure_rate_per_min(n_nodes, rf)
    if lam == 0.0:
        return math.inf
    return -w_cp + math.sqrt(w_cp * w_cp + 2.0 * max(0.0, 1.0 - lam * u0) * w_cp / lam)


def optimal_interval_exact(
    n_nodes: float, rf: float, u0: float, w_cp: float, q: float = 0.0
) -> float:
    """argmax_Δt of the exact renewal E[ETTR] (:func:`ettr.ettr_renewal`), found numerically.

    The closed form of :func:`optimal_interval` maximises the linear E[ETTR], which is only right
    while λΔt is small.  With w = 0 the optimum is Δt → 0 (returns 0.0); with r_f = 0 it is ∞.
    """
    lam = job_failure_rate_per_min(n_nodes, rf)
    if lam == 0.0:
        return math.inf
    if w_cp == 0.0:
        return 0.0
    guess = max(optimal_interval(n_nodes, rf, u0, w_cp), 1e-3)
    hi = max(10.0 * guess, 10.0 / lam)
    res = minimize_scalar(
        lambda x: -ettr_renewal(n_nodes, rf, u0, math.exp(x), w_cp, q),
        bounds=(math.log(1e-3), math.log(hi)),
        method="bounded",
        options={"xatol": 1e-7},
    )
    return float(math.exp(res.x))


def interval_for_target(
    target: float, n_nodes: float, rf: float, u0: float, w_cp: float, q: float = 0.0
) -> tuple[float | None, str | None]:
    """Longest checkpoint interval with the exact E[ETTR] (:func:`ettr.ettr_renewal`) ≥
    ``target`` (spec §5 inverse solver, on the exact form instead of the linear one).

    The form is unimodal in Δt (peak at :func:`optimal_interval_exact`), so the longest feasible
    interval is the root on the decreasing side.  Returns ``(None, reason)`` when the target is
    out of reach.
    """
    lam = job_failure_rate_per_min(n_nodes, rf)
    if not 0.0 < target < 1.0:
        return None, "target ETTR must be in (0, 1)"
    peak_dt = optimal_interval_exact(n_nodes, rf, u0, w_cp, q)
    if lam == 0.0:
        # No failures: ETTR = 1/(1 + w/Δt) → Δt = w·target/(1 − target) is the shortest; any
        # longer interval is at least as good, so there is no upper limit.
        return math.inf, None
    lo = max(peak_dt, 1e-9)
    best = ettr_renewal(n_nodes, rf, u0, lo, w_cp, q)
    if best < target:
        return None, (
            f"unreachable: the best E[ETTR] is {best:.4f} at Δt = {peak_dt:.2f} min "
            f"(MTTF {1 / lam:.1f} min, u0 {u0} min, w {w_cp} min, q {q} min)"
        )

    def f(dt: float) -> float:
        return ettr_renewal(n_nodes, rf, u0, dt, w_cp, q) - target

    hi = max(2.0 * lo, 1.0 / lam)
    while f(hi) > 0.0:  # the exact form only tends to 0: walk out until it drops below target
        hi *= 2.0
    if f(lo) == 0.0:
        return lo, None
    return float(brentq(f, lo, hi, xtol=1e-9)), None


def max_rf_for_target(
    target: float, n_nodes: float, u0: float, dt_cp: float, w_cp: float = 0.0, q: float = 0.0
) -> float:
    """Largest r_f (per node-day) with :func:`ettr_longrun` ≥ target at a fixed Δt (spec §5).

    Solving (1 − λa) = X(1 + λq) with a = u0 + Δt/2, X = target·(1 + w/Δt): λ = (1 − X)/(a + Xq).
    """
    x = target * (1.0 + w_cp / dt_cp)
    if x >= 1.0:
        return 0.0
    lam = (1.0 - x) / (u0 + dt_cp / 2.0 + x * q)
    return lam * 1440.0 / n_nodes


def checkpoint_plan(
    n_nodes: float,
    rf: float,
    u0: float,
    w_cp: float,
    q: float = 0.0,
    target_ettr: float | None = None,
) -> dict[str, Any]:
    """Young, Daly (first and higher order), the argmax of the exact E[ETTR] (``optimal_min``,
    with ``ettr_at_optimal`` from :func:`ettr.ettr_renewal`), the linear form's closed-form
    optimum (``optimal_first_order_min``) and the inverse solve (spec §5).

    ``notes`` explains the degenerate cases instead of printing a bare 0 or ∞: no write time
    (checkpoint as often as possible; E[ETTR] is the Δt → 0 limit) and r_f = 0 (no failures: any
    interval; E[ETTR] is 1 in the limit of long intervals).
    """
    check_job_inputs(n_nodes, rf, u0, w_cp, q)
    lam = job_failure_rate_per_min(n_nodes, rf)
    mttf = math.inf if lam == 0 else 1.0 / lam
    opt = optimal_interval_exact(n_nodes, rf, u0, w_cp, q)
    notes: list[str] = []
    if lam == 0.0:
        at_opt = 1.0
        notes.append(
            "r_f = 0: no failures expected, so there is no optimal interval; checkpoint for "
            "other reasons (E[ETTR] tends to 1 as the interval grows)"
        )
    elif opt == 0.0:
        # Free checkpoints: the Δt → 0 limit of the exact form, e^{-λ u0} / (1 + λ q).
        at_opt = math.exp(-lam * u0) / (1.0 + lam * q)
        notes.append(
            "checkpoint write time is 0 (non-blocking): every interval is free, so the optimum "
            "is 'as often as the framework allows'; give --ckpt-write-min for a real optimum"
        )
    else:
        at_opt = ettr_renewal(n_nodes, rf, u0, opt, w_cp, q)
    out: dict[str, Any] = {
        "n_nodes": n_nodes,
        "mttf_min": mttf,
        "young_min": young_interval(w_cp, mttf),
        "daly_min": daly_higher_order(w_cp, mttf),
        "daly_first_order_min": daly_first_order(w_cp, mttf, u0),
        "optimal_min": opt,
        "optimal_first_order_min": optimal_interval(n_nodes, rf, u0, w_cp),
        "ettr_at_optimal": at_opt,
        "interval_for_target_min": None,
        "target_ettr": target_ettr,
        "target_reason": None,
        "notes": notes,
    }
    if target_ettr is not None:
        dt, reason = interval_for_target(target_ettr, n_nodes, rf, u0, w_cp, q)
        out["interval_for_target_min"] = dt
        out["target_reason"] = reason
    return out


def ettr_grid(
    n_nodes: float,
    rf_values: list[float] | np.ndarray,
    intervals_min: list[float] | np.ndarray,
    u0: float,
    w_cp: float = 0.0,
    q: float = 0.0,
) -> pl.DataFrame:
    """Exact E[ETTR] (:func:`ettr.ettr_renewal_array`) over an r_f × Δt grid, the Fig. 10
    analogue (spec §5).  The exact form, not the linear one: the map's corner of large r_f and
    long intervals is where λΔt is not small, and the linear form clipped it to 0.
    """
    rf = np.asarray(rf_values, dtype=float)
    dt = np.asarray(intervals_min, dtype=float)
    rr, dd = np.meshgrid(rf, dt, indexing="ij")
    ettr = ettr_renewal_array(n_nodes, rr, u0, dd, w_cp, q)
    return pl.DataFrame({"rf": rr.ravel(), "interval_min": dd.ravel(), "ettr": ettr.ravel()})
