"""Poisson/Gamma intervals on MTTF (spec §2.3) and the projections (HPCA'25 §IV)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from aegis_slurm.analytics.mttf import poisson_rate_interval, project_mttf


@pytest.mark.parametrize(
    ("method", "expected"),
    [("chi2", (4.66, 14.56)), ("gamma", (5.03, 14.56)), ("jeffreys", (4.84, 13.63))],
)
def test_spec_vector(method, expected):
    lo, hi = poisson_rate_interval(10, 79.0, method=method)
    assert (round(lo, 2), round(hi, 2)) == expected


def test_zero_failures_bound_is_one_sided_at_the_stated_confidence():
    # Issue 13 item 8: 90% one-sided is T/(-ln 0.1) = T/2.303, not T/3.00 (that is 95%).
    lo, hi = poisson_rate_interval(0, 100.0)
    assert math.isinf(hi) and lo == pytest.approx(100 / 2.302585, rel=1e-6)
    # Coverage of the one-sided bound: P(MTTF > lo) = P(no failure in T | MTTF = lo) = 10%.
    assert math.exp(-100.0 / lo) == pytest.approx(0.10, rel=1e-9)
    assert poisson_rate_interval(0, 100.0, conf=0.95)[0] == pytest.approx(100 / 2.9957, rel=1e-4)


@pytest.mark.parametrize("mean_failures", [0.5, 3.0, 12.0, 60.0])
def test_exact_interval_covers_at_least_90_percent(mean_failures):
    # Draw Poisson counts at a known MTTF and count how often the interval covers it.
    rng = np.random.default_rng(5)
    exposure, true_mttf = 100.0, 100.0 / mean_failures
    ks = rng.poisson(mean_failures, 4000)
    uniq = {int(k): poisson_rate_interval(int(k), exposure) for k in np.unique(ks)}
    cover = np.mean([uniq[int(k)][0] <= true_mttf <= uniq[int(k)][1] for k in ks])
    assert 0.88 <= cover <= 1.0


def test_projections():
    p = {row["gpus"]: row["mttf_hours"] for row in project_mttf([16384, 131072], 0.0065)}
    assert round(p[16384], 1) == 1.8 and round(p[131072], 2) == 0.23
