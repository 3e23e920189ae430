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
from aegis_slurm.analytics.ettr import ettr_longrun

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
    assert plan["optimal_min"] == pytest.approx(33.1, abs=0.05)
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
    assert ettr_longrun(1000, RF, 5, dt, 1, 10) == pytest.approx(0.8, abs=1e-6)
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
        assert e == pytest.approx(max(0.0, ettr_longrun(1000, rf, 5, dt, 1, 5)))
    assert np.all(np.diff(grid.filter(grid["interval_min"] == 60)["ettr"].to_numpy()) < 0)
