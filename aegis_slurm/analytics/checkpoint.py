"""Checkpoint-interval planning: Young, Daly, the argmax of E[ETTR] and inverse solvers.

Notation (analytics-spec §5): δ = w_cp (checkpoint write), M = job MTTF = 1/(N_nodes·r_f),
R = u0 (restart).  All times in minutes; ``rf`` in failures per node-day.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import polars as pl
from scipy.optimize import brentq

from aegis_slurm.analytics.ettr import ettr_longrun, job_failure_rate_per_min


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


def interval_for_target(
    target: float, n_nodes: float, rf: float, u0: float, w_cp: float, q: float = 0.0
) -> tuple[float | None, str | None]:
    """Longest checkpoint interval with :func:`ettr_longrun` ≥ ``target`` (spec §5 inverse solver).

    The form is unimodal in Δt (peak at :func:`optimal_interval`), so the longest feasible interval
    is the root on the decreasing side.  Returns ``(None, reason)`` when the target is out of reach.
    """
    lam = job_failure_rate_per_min(n_nodes, rf)
    if not 0.0 < target < 1.0:
        return None, "target ETTR must be in (0, 1)"
    peak_dt = optimal_interval(n_nodes, rf, u0, w_cp)
    if lam == 0.0:
        # No failures: ETTR = 1/(1 + w/Δt) → Δt = w·target/(1 − target) is the shortest; any
        # longer interval is at least as good, so there is no upper limit.
        return math.inf, None
    best = ettr_longrun(n_nodes, rf, u0, max(peak_dt, 1e-9), w_cp, q)
    if best < target:
        return None, (
            f"unreachable: the best E[ETTR] is {best:.4f} at Δt = {peak_dt:.2f} min "
            f"(MTTF {1 / lam:.1f} min, u0 {u0} min, w {w_cp} min, q {q} min)"
        )

    def f(dt: float) -> float:
        return ettr_longrun(n_nodes, rf, u0, dt, w_cp, q) - target

    hi = 2.0 / lam  # ETTR < 0 here: λ(u0 + Δt/2) > 1
    lo = max(peak_dt, 1e-9)
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
    """Young, Daly (first and higher order), argmax of E[ETTR] and the inverse solve (spec §5)."""
    lam = job_failure_rate_per_min(n_nodes, rf)
    mttf = math.inf if lam == 0 else 1.0 / lam
    opt = optimal_interval(n_nodes, rf, u0, w_cp)
    out: dict[str, Any] = {
        "n_nodes": n_nodes,
        "mttf_min": mttf,
        "young_min": young_interval(w_cp, mttf),
        "daly_min": daly_higher_order(w_cp, mttf),
        "daly_first_order_min": daly_first_order(w_cp, mttf, u0),
        "optimal_min": opt,
        "ettr_at_optimal": ettr_longrun(n_nodes, rf, u0, opt, w_cp, q) if opt > 0 else None,
        "interval_for_target_min": None,
        "target_ettr": target_ettr,
        "target_reason": None,
    }
    if opt == 0.0:
        # Free checkpoints (w = 0): the limit Δt → 0 of the form.
        out["ettr_at_optimal"] = (1.0 - lam * u0) / (1.0 + lam * q)
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
    """E[ETTR] (:func:`ettr_longrun`) over an r_f × Δt grid, the Fig. 10 analogue (spec §5).

    Vectorized: the long-run form is evaluated on a numpy mesh.  Negative values are clipped to 0.
    """
    rf = np.asarray(rf_values, dtype=float)
    dt = np.asarray(intervals_min, dtype=float)
    rr, dd = np.meshgrid(rf, dt, indexing="ij")
    lam = n_nodes * rr / 1440.0
    ettr = (1.0 - lam * (u0 + dd / 2.0)) / ((1.0 + w_cp / dd) * (1.0 + lam * q))
    return pl.DataFrame(
        {"rf": rr.ravel(), "interval_min": dd.ravel(), "ettr": np.clip(ettr, 0.0, None).ravel()}
    )
