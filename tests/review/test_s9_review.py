"""Hostile review of Minder round 8 (``git diff 4a904a2 88399ce -- aegis_slurm/metrics``).

Each test is one finding and fails on 88399ce for the reason in its docstring.  All cases are
small synthetic jobs (8 nodes, 30 minutes at a 15 s scrape) run through the public
``detect`` entry point, or one call of the scale the finding is about.
"""

from __future__ import annotations

import numpy as np

from aegis_slurm.metrics.align import Aligned
from aegis_slurm.metrics.detect import Params, detect, scale

N, T, STEP = 8, 120, 15.0
TIMES = 1.0e9 + np.arange(T) * STEP
NODES = [f"n{i}" for i in range(N)]
CLOCK = "DCGM_FI_DEV_SM_CLOCK"
TEMP = "DCGM_FI_DEV_GPU_TEMP"


def faulty(data: dict[str, np.ndarray], **params) -> list[str]:
    aligned = Aligned(TIMES, NODES, data, STEP)
    return [f.node for f in detect(aligned, list(data), Params(**params)).faulty]


def test_clock_cycling_every_30s_for_18_minutes_is_found():
    """detect.py:849 (``step_support``): a GPU whose SM clock cycles between full speed and half
    of it -- 30 s at 990 MHz, 30 s at 1980 MHz (HW slowdown / power brake toggling) -- from
    minute 12 to the end of a 30-minute job is never reported.

    Its 1-minute window stays at ~0.33 of the scale from its peers (threshold 0.12) for 18
    minutes, but every other pair of steps is near the peers (the 5-sample running median keeps
    a 2-step pattern), so requiring *every* step of the run to be far resets the 4-minute
    continuity every minute.  With ``step_support=False`` the node is found (asserted below, so
    the test shows the rule is the cause)."""
    rng = np.random.default_rng(0)
    clock = 1980 + rng.normal(0, 5, (N, T))
    for j in range(48, T):
        if (j - 48) % 4 < 2:
            clock[3, j] = 990.0
    temp = 60 + rng.normal(0, 0.5, (N, T))
    data = {CLOCK: clock, TEMP: temp}
    assert faulty(data, step_support=False) == ["n3"]  # the fault is plain without the rule
    assert faulty(data) == ["n3"]


def test_lost_scrapes_after_a_short_stall_do_not_extend_it_into_a_finding():
    """detect.py:102-103 / 849: ``step_support`` says "a lost scrape neither extends nor breaks a
    run", but a NaN step counts as a far step (``~(NaN <= t)`` is True) while the trailing
    window still holds the stall's samples.  A node whose SM clock stalls for 3.25 minutes
    (13 scrapes, under the 4-minute continuity: round 8's "healthy" stall) and whose
    dcgm-exporter then misses 3 scrapes (its other fields answer, the machine is up) is called
    faulty; the same stall without the lost scrapes is (rightly) quiet."""
    rng = np.random.default_rng(1)
    clock = 1980 + rng.normal(0, 5, (N, T))
    temp = 60 + rng.normal(0, 0.5, (N, T))
    clock[3, 60:73] = 600.0  # a 13-scrape stall
    quiet = {CLOCK: clock.copy(), TEMP: temp}
    assert faulty(quiet) == []  # round 8's fix holds without the gap
    clock[3, 73:76] = np.nan  # then 3 lost scrapes of that field only
    assert faulty({CLOCK: clock, TEMP: temp}) == []


def test_nvlink_crc_rate_at_dcgms_limit_is_evidence():
    """catalog.py:235 + detect.py:460 (``event_floors``): the catalog, ``Params`` and
    docs/minder.md say NVLink CRC errors count "from 100 a second" (DCGM: ``perSec >=
    DCGM_LIMIT_MAX_NVLINK_CRC_ERROR`` -> FAIL), but ``event_scale`` keeps only rates strictly
    *greater* than the floor: a link at exactly 100 CRC errors/s against error-free peers reads
    0 (no evidence) -- the level DCGM's own health watch fails."""
    metric = "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL"
    R = np.zeros((N, T))
    R[3] = 100.0  # errors per second, the node's rate (what :func:`series` hands ``scale``)
    out = scale(R, metric, Params())
    assert out[3, -1] > 0.5
