"""Round 17 (designed on corpora v13 and v14, seen): a busy node's clocks held far below its
peers' from its first sample are no hardware offset; a GPU's corrected memory errors climbing
far above its peers' are evidence."""

from __future__ import annotations

import numpy as np

from aegis_slurm.metrics.align import Aligned
from aegis_slurm.metrics.catalog import spec_for
from aegis_slurm.metrics.detect import (
    BOUND_CAVEAT,
    Params,
    bounded_offsets,
    detect,
    job_reference,
)

STEP = 15.0
TIMES = 1e9 + STEP * np.arange(160)  # 40 min
NODES = [f"n{i:02d}" for i in range(8)]
CLOCK = "DCGM_FI_DEV_SM_CLOCK"
UTIL = "DCGM_FI_DEV_GPU_UTIL"
SBE = "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL"


def _job(clock3: float, util3: float | None = None) -> Aligned:
    """Eight nodes training from the first sample at 1,980 MHz and 99 % utilisation (a
    checkpoint at minutes 20-22 idles them all at 345 MHz); n03 reads ``clock3`` throughout
    (a lock holds the clock in the checkpoint too) and ``util3`` (None: as its peers)."""
    clock = np.full((len(NODES), TIMES.size), 1980.0)
    util = np.full_like(clock, 99.0)
    pause = slice(80, 88)
    clock[:, pause] = 345.0
    util[:, pause] = 0.0
    clock[3] = clock3
    if util3 is not None:
        util[3] = util3
    rng = np.random.default_rng(17)
    clock += rng.normal(0, 8, clock.shape)
    return Aligned(TIMES, NODES, {CLOCK: clock, UTIL: util}, STEP)


def test_bounded_offsets_drop_only_a_busy_node_far_below() -> None:
    off = np.array([-600.0, -300.0, -600.0, 40.0, np.nan])
    busy = np.array([True, True, False, True, True])
    out = bounded_offsets(off, 1980.0, 0.25, busy)
    # beyond a quarter of 1,980 below while busy: no offset; within it, idle, above, unknown: kept
    assert np.isnan(out[0]) and out[1] == -300.0 and out[2] == -600.0 and out[3] == 40.0
    assert np.isnan(out[4])
    assert np.array_equal(bounded_offsets(off, 1980.0, 0.25, None), off, equal_nan=True)


def test_clocks_locked_from_the_first_sample_are_found() -> None:
    r = detect(_job(1140.0), [CLOCK, UTIL], Params())
    assert [(f.node, f.metric) for f in r.faulty] == [("n03", CLOCK)]
    # with the caveat that another GPU model reads the same: alerted, never drained
    assert r.faulty[0].caveat == BOUND_CAVEAT
    # without the bound the lock was the node's normal
    assert detect(_job(1140.0), [CLOCK, UTIL], Params(bounded_offsets=False)).faulty == []


def test_a_hardware_offset_and_a_gpu_idle_by_design_stay_quiet() -> None:
    # 12 % below its peers all along: silicon and power management, the node's normal
    assert detect(_job(1740.0), [CLOCK, UTIL], Params()).faulty == []
    # a GPU the job does not use idles at its floor: not busy, its own normal
    assert detect(_job(345.0, util3=0.0), [CLOCK, UTIL], Params()).faulty == []


def test_without_utilisation_every_offset_stands() -> None:
    a = _job(1140.0)
    del a.data[UTIL]
    assert detect(a, [CLOCK], Params()).faulty == []


def test_the_watch_reference_is_bounded_too() -> None:
    a = _job(1140.0)
    ref = job_reference(a, [CLOCK, UTIL], Params())
    assert "n03" not in ref[CLOCK]["offsets"] and "n02" in ref[CLOCK]["offsets"]
    assert ref[CLOCK]["beyond"] == ["n03"] and "beyond" not in ref[UTIL]
    # the stored reference gives the finding the same caveat as the window's own
    r = detect(a, [CLOCK, UTIL], Params(), offsets=ref)
    assert [(f.node, f.caveat) for f in r.faulty] == [("n03", BOUND_CAVEAT)]
    assert "n03" in job_reference(a, [CLOCK, UTIL], Params(bounded_offsets=False))[CLOCK]["offsets"]


def test_the_clock_bound_is_the_catalogs() -> None:
    assert spec_for(CLOCK).offset_bound == 0.25
    # memory clocks differ by model (HBM2 / HBM2e / HBM3: 24-39 %): no bound (review of round 17)
    assert spec_for("DCGM_FI_DEV_MEM_CLOCK").offset_bound is None
    assert spec_for("DCGM_FI_DEV_POWER_USAGE").offset_bound is None


def _sbe(rates: dict[int, float], start: int) -> Aligned:
    """Cumulative corrected-error counts: every node 0; the nodes in ``rates`` count at that
    rate (per second) from step ``start``."""
    rate = np.zeros((len(NODES), TIMES.size))
    for node, r in rates.items():
        rate[node, start:] = r
    X = np.floor(np.cumsum(rate * STEP, axis=1))
    return Aligned(TIMES, NODES, {SBE: X}, STEP)


def test_a_climbing_corrected_error_rate_is_found() -> None:
    r = detect(_sbe({5: 0.2}, 60), [SBE], Params())
    assert [(f.node, f.metric) for f in r.faulty] == [("n05", SBE)]
    assert r.faulty[0].first_detected >= TIMES[60]
    # the ECC corrected each: alerted with the catalog's caveat, never drained
    assert r.faulty[0].caveat == spec_for(SBE).caveat is not None


def test_a_few_corrected_errors_are_handled_not_a_fault() -> None:
    X = np.zeros((len(NODES), TIMES.size))
    X[5, 60:] = 1.0  # one corrected error, then one more ten minutes later
    X[5, 100:] = 2.0
    assert detect(Aligned(TIMES, NODES, {SBE: X}, STEP), [SBE], Params()).faulty == []


RETRANS = "node_netstat_Tcp_RetransSegs"


def _retrans(rate5: float, background: float = 20.0) -> Aligned:
    """TCP segments retransmitted since boot: every node ``background`` a second, n05 ``rate5``
    from minute 15 (a data NIC dropping under TCPX collectives)."""
    rate = np.full((len(NODES), TIMES.size), background)
    rate[5, 60:] = rate5
    return Aligned(TIMES, NODES, {RETRANS: 1e6 + np.cumsum(rate * STEP, axis=1)}, STEP)


def test_a_retransmit_storm_is_found_and_a_busy_hosts_background_is_not() -> None:
    r = detect(_retrans(3000.0), [RETRANS], Params())
    assert [(f.node, f.metric) for f in r.faulty] == [("n05", RETRANS)]
    # how many times its peers' rate, by decades (review of round 17): 5 % more is nothing
    assert detect(_retrans(420.0, 400.0), [RETRANS], Params()).faulty == []
    # its uploads may be the job's own: a finding, never a drain reason
    assert spec_for(RETRANS).job_can_cause
    # 80 a second where the peers send 20: under the floor of a busy host's background
    assert detect(_retrans(80.0), [RETRANS], Params()).faulty == []
