"""Checkpoint planner: Young, Daly, the E[ETTR] optimum and inverse solvers."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import minimize_scalar

from aegis_slurm.analytics.checkpoint import (
    checkpoint_plan,
    daly_first_order,
    daly_higher_order,
    ettr_grid,
    interval_for_target,
    max_rf_for_target,
    optimal_interval,
    young_interval,
)
from aegis_slurm.analytics.common import AnalyticsError
from aegis_slurm.analytics.ettr import ettr_longrun, ettr_renewal, simulate_ettr

RF = 6.5e-3


@pytest.mark.parametrize(("mttf", "published"), [(24 * 60, 117), (6 * 60, 57), (15, 9.1)])
def test_daly_published_optima(mttf, published):
    # Daly 2006 (FGCS 22(3)) figure captions: δ = 5 min, R = 10 min -> 117, 57, 9.1 min.
    tau = daly_higher_order(5.0, mttf)
    assert abs(tau - published) <= (0.05 if published < 10 else 0.5)


def test_young_and_daly_first_order():
    assert young_interval(5, 1440) == pytest.approx(math.sqrt(2 * 5 * 1440))
    assert daly_first_order(5, 1440, 10) == pytest.approx(math.sqrt(2 * 5 * 1450))
    assert daly_higher_order(100, 40) == 40  # δ ≥ 2M: checkpoint every MTTF


def test_spec_12k_example():
    # Spec §5: 12k GPUs, w = 5 min (u0 = 5): exact 33.1, Young 38.4, Daly higher order 35.2 min.
    plan = checkpoint_plan(1500, RF, u0=5, w_cp=5)
    assert plan["optimal_first_order_min"] == pytest.approx(33.1, abs=0.05)
    # The exact renewal form's argmax (what the plan recommends) is its numerical maximum.
    res = minimize_scalar(
        lambda dt: -ettr_renewal(1500, RF, 5, dt, 5), bounds=(1, 200), method="bounded"
    )
    assert plan["optimal_min"] == pytest.approx(res.x, rel=1e-3)
    assert plan["ettr_at_optimal"] == pytest.approx(-res.fun, rel=1e-9)
    assert plan["young_min"] == pytest.approx(38.4, abs=0.05)
    assert plan["daly_min"] == pytest.approx(35.2, abs=0.05)


@pytest.mark.parametrize(
    ("n", "u0", "w", "q"), [(2000, 5, 1, 0), (1500, 10, 5, 30), (64, 20, 3, 60)]
)
def test_optimum_is_the_numerical_argmax(n, u0, w, q):
    lam = n * RF / 1440
    res = minimize_scalar(
        lambda dt: -ettr_longrun(n, RF, u0, dt, w, q),
        bounds=(0.01, 2 * (1 / lam - u0)),  # where the form is positive (it is clipped at 0)
        method="bounded",
        options={"xatol": 1e-6},
    )
    assert optimal_interval(n, RF, u0, w) == pytest.approx(res.x, rel=1e-3)


def test_interval_for_target_hits_the_target_and_reports_unreachable():
    dt, reason = interval_for_target(0.8, 1000, RF, 5, 1, 10)
    assert reason is None
    assert ettr_renewal(1000, RF, 5, dt, 1, 10) == pytest.approx(0.8, abs=1e-6)
    assert dt >= optimal_interval(1000, RF, 5, 1)  # the longest interval that still reaches it
    dt, reason = interval_for_target(0.9, 16384, RF, 5, 1)
    assert dt is None and reason.startswith("unreachable")
    plan = checkpoint_plan(16384, RF, 5, 1, target_ettr=0.9)
    assert plan["interval_for_target_min"] is None and plan["target_reason"]


def test_max_rf_for_target_inverts_the_form():
    rf = max_rf_for_target(0.9, 1000, 5, 30, 1, 5)
    assert ettr_longrun(1000, rf, 5, 30, 1, 5) == pytest.approx(0.9)


def test_grid_matches_pointwise_form():
    grid = ettr_grid(1000, [0.002, 0.0065], [5, 30, 60], u0=5, w_cp=1, q=5)
    assert grid.height == 6
    for rf, dt, e in grid.iter_rows():
        assert e == pytest.approx(ettr_renewal(1000, rf, 5, dt, 1, 5), rel=1e-12)
    assert np.all(np.diff(grid.filter(grid["interval_min"] == 60)["ettr"].to_numpy()) < 0)


def test_map_uses_the_exact_form_where_the_linear_one_reads_zero():
    """Issue 13 item 1: at 16k GPUs and a high r_f, Δt ≥ 125 min read 0.0 on the linear form;
    the exact form (and the Monte Carlo) still give about 0.3."""
    n, rf, dt = 2048, 0.0094, 150.0
    assert ettr_longrun(n, rf, 5, dt) == 0.0
    grid = ettr_grid(n, [rf], [dt], u0=5)
    exact = grid["ettr"][0]
    mc = simulate_ettr(n, rf, 5, dt, 0, 0, 30 * 1440, 400, seed=3)
    assert exact > 0.2
    assert exact == pytest.approx(mc.mean, abs=4 * mc.stderr + 0.01)


def test_plan_explains_free_checkpoints_and_zero_rate():
    plan = checkpoint_plan(100, RF, u0=5, w_cp=0)
    assert plan["optimal_min"] == 0.0 and "write time is 0" in plan["notes"][0]
    assert plan["ettr_at_optimal"] == pytest.approx(math.exp(-100 * RF / 1440 * 5))
    zero = checkpoint_plan(100, 0.0, u0=5, w_cp=1)
    assert zero["ettr_at_optimal"] == 1.0 and "r_f = 0" in zero["notes"][0]


@pytest.mark.parametrize(
    ("n", "rf", "u0", "w", "q"),
    [
        (0, RF, 5, 1, 0),
        (10, -0.001, 5, 1, 0),
        (10, RF, -1, 1, 0),
        (10, RF, 5, -1, 0),
        (10, float("nan"), 5, 1, 0),
        (10, RF, 5, 1, -3),
    ],
)
def test_plan_rejects_inputs_no_formula_means(n, rf, u0, w, q):
    with pytest.raises(AnalyticsError):
        checkpoint_plan(n, rf, u0, w, q)
