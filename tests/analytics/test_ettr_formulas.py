"""E[ETTR] forms against the paper's published numbers and against the Monte Carlo."""

from __future__ import annotations

import pytest

from aegis_slurm.analytics.ettr import (
    ettr_finite,
    ettr_longrun,
    ettr_published,
    ettr_renewal,
    job_mttf_hours,
    simulate_ettr,
)

RF = 6.5e-3  # RSC-1, failures per node-day (HPCA'25 §V)


def test_published_mttf_projections():
    # HPCA'25 §IV: 16,384 GPUs -> 1.8 h, 131,072 GPUs -> 0.23 h at r_f = 6.5/1000 node-days.
    assert round(job_mttf_hours(16384 / 8, RF), 1) == 1.8
    assert round(job_mttf_hours(131072 / 8, RF), 2) == 0.23


def test_published_16k_example():
    # 16,000 GPUs, u0 = 5 min, no queue, non-blocking writes: ≈0.7 at 60-min and 0.93 at 5-min
    # checkpoints (HPCA'25 §V "Analysis of ETTR results").
    n = 16000 / 8
    assert 0.68 <= ettr_published(n, RF, u0=5, dt_cp=60) <= 0.70
    assert round(ettr_published(n, RF, u0=5, dt_cp=5), 2) == 0.93


def test_longrun_reduces_to_published_without_queue_and_drops_with_queue():
    for n, dt, w in [(2000, 60, 0), (1000, 30, 2), (64, 60, 5)]:
        assert ettr_longrun(n, RF, 5, dt, w, q=0) == pytest.approx(ettr_published(n, RF, 5, dt, w))
        assert ettr_longrun(n, RF, 5, dt, w, q=30) < ettr_published(n, RF, 5, dt, w)


# (nodes, Δt, w, q, run days): the regimes of spec §1.4 plus blocking writes.
CASES = [
    (2000, 5, 0, 0, 30),
    (1000, 60, 0, 60, 30),  # 8k GPUs with a 60-min queue after every failure
    (1000, 30, 0, 1, 30),  # the paper's 8k / q = 1 min example
    (125, 60, 0, 120, 1),  # 1k GPUs over one day: the finite-run correction matters
    (1500, 30, 2, 10, 7),
    (16, 60, 1, 30, 3),
]


@pytest.mark.parametrize(("n", "dt", "w", "q", "days"), CASES)
def test_formulas_within_5_percent_of_monte_carlo(n, dt, w, q, days):
    run = days * 1440.0
    mc = simulate_ettr(n, RF, 5, dt, w, q, run, replications=4000, seed=7)
    # Long runs use the long-run form, one-day runs the finite form (spec §1.4).
    approx = ettr_finite(n, RF, 5, dt, w, q, run) if days <= 1 else ettr_longrun(n, RF, 5, dt, w, q)
    assert abs(approx - mc.mean) / mc.mean <= 0.05
    # The exact renewal form predicts R / E[W]; the Monte Carlo's ratio of means must match it
    # to within sampling error (a much tighter check than ±5 %).
    ratio_of_means = run / mc.mean_wallclock_min
    assert ettr_renewal(n, RF, 5, dt, w, q, run) == pytest.approx(ratio_of_means, rel=0.01)


def test_16k_hourly_checkpoints_sits_on_the_5_percent_boundary():
    # Finding (matches spec §1.4): at λΔt ≈ 0.54 the linear catch-up term Δt/2 overcounts, so
    # the closed form (0.684) is 5.0 % below the Monte Carlo (0.720): the paper's ±5 % holds only
    # marginally here.  Pin the size of the gap so a regression in either side shows up, and
    # check that the exact renewal form closes it.
    run = 30 * 1440.0
    mc = simulate_ettr(2000, RF, 5, 60, 0, 0, run, replications=4000, seed=7)
    gap = (mc.mean - ettr_longrun(2000, RF, 5, 60)) / mc.mean
    assert 0.045 <= gap <= 0.055
    assert ettr_renewal(2000, RF, 5, 60, 0, 0, run) == pytest.approx(mc.mean, rel=0.005)


def test_published_form_misses_when_queue_is_long():
    # Spec §1.4: 8k GPUs, q = 60 min: the published (no-q) form overestimates badly.  This is
    # what the ±5 % check would catch if the queue-aware form were wrong.
    mc = simulate_ettr(1000, RF, 5, 60, 0, 60, 30 * 1440, replications=2000, seed=3)
    assert ettr_published(1000, RF, 5, 60) - mc.mean > 0.1


def test_monte_carlo_is_deterministic_and_its_error_shrinks():
    a = simulate_ettr(500, RF, 10, 30, 1, 15, 7 * 1440, replications=500, seed=11)
    b = simulate_ettr(500, RF, 10, 30, 1, 15, 7 * 1440, replications=500, seed=11)
    c = simulate_ettr(500, RF, 10, 30, 1, 15, 7 * 1440, replications=8000, seed=11)
    assert a == b
    assert c.stderr < a.stderr / 3


def test_monte_carlo_without_failures_is_exact():
    # r_f = 0: W = R + writes + u0, with no randomness.
    mc = simulate_ettr(100, 0.0, 5, 60, 2, 0, 600, replications=10, seed=0)
    assert mc.mean == pytest.approx(600 / (600 + 10 * 2 + 5))
    assert mc.stderr == pytest.approx(0.0, abs=1e-12)


def test_renewal_form_survives_an_absurd_failure_rate():
    """λ·L beyond e^709 used to raise OverflowError out of math.expm1; the answer is ETTR 0."""
    from aegis_slurm.analytics.ettr import ettr_renewal

    assert ettr_renewal(n_nodes=16384, rf=1.0, u0=5, dt_cp=60) == 0.0
    assert ettr_renewal(n_nodes=16384, rf=1.0, u0=5, dt_cp=60, run_minutes=1440) == 0.0
