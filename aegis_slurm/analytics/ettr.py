"""Expected Effective Training Time Ratio (E[ETTR]) and a vectorized Monte Carlo check.

Units: every time is in **minutes**; ``rf`` is failures per node-day of runtime (e.g. 0.0065), so
the job's failure rate is ``λ = n_nodes·rf/1440`` per minute (analytics-spec §1.1).

Forms (analytics-spec §1.2–§1.4):

* :func:`ettr_published` – the published closed form, no queue time [T].
* :func:`ettr_longrun` – long-run form with queue time q after every interruption [D].
* :func:`ettr_finite` – expectation algebra for a run needing ``run_minutes`` of training [D].
* :func:`ettr_renewal` – exact Poisson/renewal variant (long run or finite) [D].
* :func:`simulate_ettr` – event-driven Monte Carlo, vectorized across replications [D].
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

MIN_PER_DAY = 1440.0


def job_failure_rate_per_min(n_nodes: float, rf: float) -> float:
    """λ = N_nodes·r_f per minute (HPCA'25 §V "Analytical approximation", spec §1.1)."""
    return n_nodes * rf / MIN_PER_DAY


def job_mttf_hours(n_nodes: float, rf: float) -> float:
    """Job MTTF = (N_nodes·r_f)⁻¹, in hours (HPCA'25 §IV Fig. 7 theory line, spec §2.2)."""
    return math.inf if n_nodes * rf == 0 else 24.0 / (n_nodes * rf)


def ettr_published(n_nodes: float, rf: float, u0: float, dt_cp: float, w_cp: float = 0.0) -> float:
    """E[ETTR] ≈ (1 − N·r_f·(u0 + Δt_cp/2)) / (1 + w_cp/Δt_cp) (published v2 form, spec §1.2).

    Queue time q does not appear; use :func:`ettr_longrun` when q matters.  Clipped at 0: the
    linear form breaks down once λ(u0 + Δt/2) ≥ 1 (use :func:`ettr_renewal` there).
    """
    lam = job_failure_rate_per_min(n_nodes, rf)
    return max(0.0, 1.0 - lam * (u0 + dt_cp / 2.0)) / (1.0 + w_cp / dt_cp)


def ettr_longrun(
    n_nodes: float, rf: float, u0: float, dt_cp: float, w_cp: float = 0.0, q: float = 0.0
) -> float:
    """ETTR_longrun = (1 − λ(u0 + Δt/2)) / ((1 + w/Δt)(1 + λq)) (spec §1.3, derived).

    Equals :func:`ettr_published` when q = 0.  Clipped at 0 like it.
    """
    lam = job_failure_rate_per_min(n_nodes, rf)
    return max(0.0, 1.0 - lam * (u0 + dt_cp / 2.0)) / ((1.0 + w_cp / dt_cp) * (1.0 + lam * q))


def ettr_finite(
    n_nodes: float,
    rf: float,
    u0: float,
    dt_cp: float,
    w_cp: float,
    q: float,
    run_minutes: float,
) -> float:
    """ETTR_finite(R) = R / E[W] (spec §1.3, derived).

    T_alloc = (R(1 + w/Δt) + u0)/(1 − a), a = λ(u0 + Δt/2); E[W] = T_alloc(1 + λq) + q.
    Returns 0 when a ≥ 1 (the first-order model says the run never finishes).
    """
    lam = job_failure_rate_per_min(n_nodes, rf)
    a = lam * (u0 + dt_cp / 2.0)
    if a >= 1.0:
        return 0.0
    t_alloc = (run_minutes * (1.0 + w_cp / dt_cp) + u0) / (1.0 - a)
    return run_minutes / (t_alloc * (1.0 + lam * q) + q)


def _expected_block(lam: float, length: float, q: float) -> float:
    """Expected time to get ``length`` minutes of failure-free allocated time when every failure
    costs a queue wait q before retrying: (1/λ + q)(e^{λL} − 1) (renewal argument)."""
    if lam == 0.0:
        return length
    if lam * length > 700.0:  # e^700 ~ 1e304: the job effectively never gets through
        return math.inf
    return (1.0 / lam + q) * math.expm1(lam * length)


def _expected_segment(lam: float, tau: float, u0: float, q: float) -> float:
    """E_seg = p/λ + p·(q + (1/λ + q)(e^{λ(u0+τ)} − 1)), p = 1 − e^{−λτ} (spec §1.3).

    The first attempt at a segment starts already running (no u0); after a failure the job waits
    q, restarts (u0) and redoes the whole segment.
    """
    if lam == 0.0:
        return tau
    p = -math.expm1(-lam * tau)
    return p / lam + p * (q + _expected_block(lam, u0 + tau, q))


def ettr_renewal(
    n_nodes: float,
    rf: float,
    u0: float,
    dt_cp: float,
    w_cp: float = 0.0,
    q: float = 0.0,
    run_minutes: float | None = None,
) -> float:
    """Exact Poisson/renewal E[ETTR] (spec §1.3 "exact variant"), matching :func:`simulate_ettr`.

    Long run (``run_minutes=None``): Δt / E_seg with τ = Δt + w.  Finite run: R / E[W] where
    E[W] = q + E[first start] + n·E_seg(τ) + E_seg(r + w) for R = n·Δt + r; the first start is a
    queue wait q then u0 that must itself survive (failures during u0 requeue the job).
    """
    lam = job_failure_rate_per_min(n_nodes, rf)
    tau = dt_cp + w_cp
    if run_minutes is None:
        e = _expected_segment(lam, tau, u0, q)
        return dt_cp / e if math.isfinite(e) else 0.0
    n_full = math.floor(run_minutes / dt_cp + 1e-9)
    rest = run_minutes - n_full * dt_cp
    e_w = q + _expected_block(lam, u0, q) + n_full * _expected_segment(lam, tau, u0, q)
    if rest > 1e-9:
        e_w += _expected_segment(lam, rest + w_cp, u0, q)
    return run_minutes / e_w if math.isfinite(e_w) else 0.0


def ettr_renewal_array(
    n_nodes: float,
    rf: np.ndarray | float,
    u0: float,
    dt_cp: np.ndarray | float,
    w_cp: float = 0.0,
    q: float = 0.0,
) -> np.ndarray:
    """Long-run exact renewal E[ETTR] = Δt / E_seg(Δt + w), vectorized over r_f and Δt (numpy
    broadcasting); the same formula as :func:`ettr_renewal` with ``run_minutes=None``.

    Used wherever λΔt is not small (curves, the r_f × Δt map): the linear form reads 0 once
    λ(u0 + Δt/2) ≥ 1 while the true E[ETTR] is still well above it.
    """
    rf_a, dt_a = np.broadcast_arrays(np.asarray(rf, dtype=float), np.asarray(dt_cp, dtype=float))
    lam = n_nodes * rf_a / MIN_PER_DAY
    tau = dt_a + w_cp
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        safe = np.where(lam > 0, lam, 1.0)
        p = -np.expm1(-safe * tau)
        block = (1.0 / safe + q) * np.expm1(np.minimum(safe * (u0 + tau), 700.0))
        seg = p / safe + p * (q + block)
        seg = np.where(lam > 0, seg, tau)
        out = np.where(np.isfinite(seg) & (seg > 0), dt_a / seg, 0.0)
    return out


@dataclass(frozen=True)
class MonteCarloResult:
    mean: float
    stderr: float
    replications: int
    mean_failures: float
    mean_wallclock_min: float

    def as_dict(self) -> dict[str, float | int]:
        return {
            "mean": self.mean,
            "stderr": self.stderr,
            "replications": self.replications,
            "mean_failures": self.mean_failures,
            "mean_wallclock_min": self.mean_wallclock_min,
        }


def simulate_ettr(
    n_nodes: float,
    rf: float,
    u0: float,
    dt_cp: float,
    w_cp: float,
    q: float,
    run_minutes: float,
    replications: int = 1000,
    seed: int = 0,
    max_failures: int = 200_000,
) -> MonteCarloResult:
    """Monte Carlo of ETTR = R/W per replication (spec §1.4 reconstruction).

    Event model: an exponential queue wait (mean q) after submit and after every failure; u0 at
    every start; training in segments of Δt followed by a blocking write w (the last segment is
    the remainder); failures Poisson at λ only while allocated; a failure falls back to the last
    completed checkpoint.  All replications advance together, one failure "generation" per numpy
    step, so the cost is O(max failures) vector operations rather than a Python loop per event.
    """
    lam = job_failure_rate_per_min(n_nodes, rf)
    # One numpy step per failure generation: refuse runs that would need too many.
    expected = ettr_renewal(n_nodes, rf, u0, dt_cp, w_cp, q, run_minutes)
    if expected <= 0.0 or lam * run_minutes / expected > max_failures / 10:
        raise RuntimeError(
            "Monte Carlo skipped: the job would fail about "
            f"{lam * run_minutes / max(expected, 1e-300):.3g} times per run "
            f"(E[ETTR] ~ {expected:.2g})"
        )
    rng = np.random.default_rng(seed)
    tau = dt_cp + w_cp
    n_full = math.floor(run_minutes / dt_cp + 1e-9)
    rest = run_minutes - n_full * dt_cp
    tail = rest + w_cp if rest > 1e-9 else 0.0

    def queue(n: int) -> np.ndarray:
        return rng.exponential(q, n) if q > 0 else np.zeros(n)

    wall = queue(replications)
    fails = np.zeros(replications, dtype=np.int64)
    remaining = np.full(replications, n_full, dtype=np.int64)  # full segments still to do
    active = np.arange(replications)
    for _ in range(max_failures + 1):
        if active.size == 0:
            break
        rem = remaining[active]
        need = u0 + rem * tau + tail
        x = rng.exponential(1.0 / lam, active.size) if lam > 0 else np.full(active.size, np.inf)
        done = x >= need
        wall[active[done]] += need[done]
        failed = active[~done]
        xf = x[~done]
        # Completed checkpoints before the failure: whole segments after u0, never beyond rem.
        seg_done = np.floor(np.maximum(xf - u0, 0.0) / tau).astype(np.int64)
        remaining[failed] -= np.minimum(seg_done, remaining[failed])
        wall[failed] += xf + queue(failed.size)
        fails[failed] += 1
        active = failed
    else:
        raise RuntimeError("Monte Carlo did not converge: the job almost never finishes")
    ettr = run_minutes / wall
    return MonteCarloResult(
        mean=float(ettr.mean()),
        stderr=float(ettr.std(ddof=1) / math.sqrt(replications)) if replications > 1 else 0.0,
        replications=replications,
        mean_failures=float(fails.mean()),
        mean_wallclock_min=float(wall.mean()),
    )
