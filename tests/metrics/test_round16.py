"""Round 16 (designed on corpus v13, seen): a node not yet reporting is unknown, not gone; a node
the job replaced has left it; an error counter's background is the peers' at the same step; an
error counter's continuity completes where errors are still arriving."""

from __future__ import annotations

import numpy as np
from scipy.stats import poisson

from aegis_slurm.metrics.align import Aligned
from aegis_slurm.metrics.detect import Params, burst_mask, detect, machine_gone, replaced

STEP = 15.0
TIMES = 1e9 + STEP * np.arange(240)  # 60 min
NODES = [f"n{i:02d}" for i in range(9)]
POWER = "DCGM_FI_DEV_POWER_USAGE"
TEMP = "DCGM_FI_DEV_GPU_TEMP"
OOS = "node_infiniband_out_of_sequence_packets_received_total"
REPLAYS = "DCGM_FI_DEV_PCIE_REPLAY_COUNTER"


def _minutes(a: float, b: float) -> slice:
    return slice(int(a * 60 / STEP), int(b * 60 / STEP))


def _swap(joins: bool = True) -> Aligned:
    """A spot instance reclaimed: n03 stops reporting for good at minute 20; with ``joins`` a
    fresh instance, n08, silent until then, reports from minute 26 and trains with the rest
    (everyone idles meanwhile)."""
    power = np.full((len(NODES), TIMES.size), 650.0)
    temp = np.full((len(NODES), TIMES.size), 62.0)
    power[:, _minutes(20, 28)] = 90.0
    temp[:, _minutes(20, 28)] = 40.0
    for X in (power, temp):
        X[3, _minutes(20, 60)] = np.nan
        X[8, _minutes(0, 26)] = np.nan
        if not joins:
            X[8] = X[0]
    return Aligned(TIMES, NODES, {POWER: power, TEMP: temp}, STEP)


def test_a_node_not_reporting_yet_is_unknown_and_one_never_reporting_is_gone() -> None:
    a = _swap()
    gone = machine_gone(a)
    assert not gone[8, _minutes(0, 26)].any()  # Prometheus had not discovered it yet
    assert gone[3, _minutes(20, 60)].all()  # it stopped answering
    a.data[POWER][5] = np.nan  # n05 never answers at all: unreachable all along
    a.data[TEMP][5] = np.nan
    assert machine_gone(a)[5, _minutes(1, 60)].all()


def test_a_node_the_job_replaced_has_left_it_and_is_not_faulty() -> None:
    a = _swap()
    k = round(240 / STEP)
    assert replaced(a, k) == {3: float(TIMES[_minutes(20, 60).start - 1])}
    elastic = Params(replacements=True)  # an elastic launcher's job (spot instances)
    r = detect(a, [POWER, TEMP], elastic)
    assert r.faulty == [] and set(r.departed) == {"n03"}
    # without the replacement joining, n03's silence is what it was: a machine gone
    lone = detect(_swap(joins=False), [POWER, TEMP], elastic)
    assert [f.node for f in lone.faulty] == ["n03"] and lone.departed == {}
    # by default (a Slurm job, whose node list is fixed) and with departure off: a machine gone
    for p in (Params(), Params(replacements=True, departure=False)):
        assert "n03" in {f.node for f in detect(a, [POWER, TEMP], p).faulty}
    # the newcomer's unscraped minutes are no evidence either way
    assert "n08" not in {f.node for f in detect(a, [POWER, TEMP], Params()).faulty}


def test_an_error_background_is_the_peers_at_the_same_step() -> None:
    # every port logs a few out-of-sequence packets a second while the job trains, which it
    # does only from minute 40 (a long restart before); n08, the replacement, reports from
    # minute 40 and logs the same: no burst
    rate = np.zeros((len(NODES), TIMES.size))
    rate[:, _minutes(40, 60)] = 0.4
    X = np.cumsum(rate * STEP, axis=1)
    X[8, _minutes(0, 40)] = np.nan
    span = 8  # steps in a 2-minute span
    counts = np.full_like(X, np.nan)
    counts[:, span:] = X[:, span:] - X[:, :-span]
    assert not burst_mask(counts, 120.0, 0.01, STEP)[8].any()
    # against the peers' whole-window mean (their quiet 40 minutes included), as before round
    # 16, its steady 48 a span would have been a burst
    others = np.nanmean(counts[:8], axis=1).mean()
    assert np.nanmax(counts[8]) > poisson.isf(0.01 / (9 * 30), others)
    r = detect(Aligned(TIMES, NODES, {OOS: X}, STEP), [OOS], Params())
    assert r.faulty == []


def _replays(minutes: float) -> Aligned:
    """n04's GPU link replays 2 a second from minute 20 for ``minutes`` minutes; no one else."""
    rate = np.zeros((len(NODES), TIMES.size))
    rate[4, _minutes(20, 20 + minutes)] = 2.0
    return Aligned(TIMES, NODES, {REPLAYS: np.cumsum(rate * STEP, axis=1)}, STEP)


def test_errors_still_arriving_a_continuity_after_they_began_are_found_then() -> None:
    a = _replays(30)
    (f,) = detect(a, [REPLAYS], Params()).faulty
    assert f.node == "n04" and TIMES[0] + 23.5 * 60 <= f.first_detected <= TIMES[0] + 25 * 60
    # before round 16: once the trailing rate had outlasted the rate window too, a minute on
    # (the new rule asks a window more than the continuity: a rise says errors arrived since
    # the previous sample, up to a scrape interval earlier)
    (g,) = detect(a, [REPLAYS], Params(fresh_events=False)).faulty
    assert g.first_detected - f.first_detected >= 50
    # a burst that stopped before the continuity is no fault, either way
    for fresh in (True, False):
        assert detect(_replays(3.0), [REPLAYS], Params(fresh_events=fresh)).faulty == []
    # nor one of 3.5 minutes now, which the trailing rate's extra steps used to let through
    assert detect(_replays(3.5), [REPLAYS], Params()).faulty == []
