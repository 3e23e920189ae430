"""Round 12 (designed on corpus v9, seen): the GPUs' memory clock, and the share of time no task
on the node could make progress for I/O (PSI full)."""

from __future__ import annotations

import numpy as np

from aegis_slurm.metrics.align import Aligned
from aegis_slurm.metrics.catalog import BY_NAME, job_can_cause
from aegis_slurm.metrics.detect import Params, detect

STEP = 15.0
TIMES = 1e9 + STEP * np.arange(240)  # 60 min
NODES = [f"n{i}" for i in range(10)]
MEM = "DCGM_FI_DEV_MEM_CLOCK"
PSI = "node_pressure_io_stalled_seconds_total"


def _mem_clock(culprit: bool, jobwide: bool) -> Aligned:
    n, T = len(NODES), TIMES.size
    mem = np.full((n, T), 2619.0)
    if culprit:  # n4's slowest GPU left in a lower P-state 20 minutes in
        mem[4, 80:] = 1593.0
    if jobwide:  # every GPU idles at 405 MHz through a 3-minute checkpoint
        mem[:, 120:132] = 405.0
    return Aligned(TIMES, NODES, {MEM: mem}, STEP)


def test_a_gpu_memory_clock_stuck_low_is_found() -> None:
    r = detect(_mem_clock(culprit=True, jobwide=True), [MEM], Params())
    assert [(f.node, f.metric) for f in r.faulty] == [("n4", MEM)]
    assert TIMES[80] < r.faulty[0].first_detected <= TIMES[80] + 5 * 60


def test_every_memory_clock_down_together_is_no_fault() -> None:
    assert detect(_mem_clock(culprit=False, jobwide=True), [MEM], Params()).faulty == []


def _stalls(episodes: list[tuple[int, int]], node: int = 6) -> Aligned:
    """PSI full io, seconds since boot: every node stalls 0.2 % of the time; ``node`` also
    stalls 90 % of the time in each (first step, steps) episode."""
    n, T = len(NODES), TIMES.size
    rate = np.full((n, T), 0.002)
    for first, steps in episodes:
        rate[node, first : first + steps] = 0.9
    return Aligned(TIMES, NODES, {PSI: 100.0 + np.cumsum(rate * STEP, axis=1)}, STEP)


def test_a_disk_that_keeps_stalling_is_found() -> None:
    # from minute 20, 2.5-minute stalls every 4 minutes (an NVMe controller timing out and
    # resetting)
    a = _stalls([(k, 10) for k in range(80, 240, 16)])
    r = detect(a, [PSI], Params())
    assert [(f.node, f.metric) for f in r.faulty] == [("n6", PSI)]
    assert TIMES[80] < r.faulty[0].first_detected <= TIMES[80] + 12 * 60


def test_one_long_stall_is_no_fault() -> None:
    # a single 2-minute stall (a checkpoint's write back, a host's hiccup): under the
    # continuity, and the stall's own rate window does not stretch it past it
    assert detect(_stalls([(100, 8)]), [PSI], Params()).faulty == []


def test_a_stall_is_read_from_its_floor_and_never_drained() -> None:
    spec = BY_NAME[PSI]
    assert (spec.kind, spec.scale, spec.lo, spec.hi) == ("counter", "events", 0.1, 1.0)
    assert "I/O stall" in (job_can_cause(PSI) or "")
    # under the floor (5 % of the time fully stalled, all job long): no evidence
    n, T = len(NODES), TIMES.size
    rate = np.full((n, T), 0.002)
    rate[3, 40:] = 0.05
    a = Aligned(TIMES, NODES, {PSI: np.cumsum(rate * STEP, axis=1)}, STEP)
    assert detect(a, [PSI], Params()).faulty == []
