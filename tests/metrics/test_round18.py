"""Round 18 (designed on corpora v15 and v16, seen): a physical reading whose other side is no
machine's fault is judged on its fault side only (catalog ``fault_side``); a clock, only while
the node's GPUs work (``busy_only``)."""

from __future__ import annotations

import numpy as np

from aegis_slurm.metrics.align import Aligned
from aegis_slurm.metrics.catalog import spec_for
from aegis_slurm.metrics.detect import Params, detect

STEP = 15.0
TIMES = 1e9 + STEP * np.arange(240)  # 60 min
NODES = [f"n{i:02d}" for i in range(16)]
MEM_AVAIL = "node_memory_MemAvailable_bytes"
CLOCK = "DCGM_FI_DEV_SM_CLOCK"
UTIL = "DCGM_FI_DEV_GPU_UTIL"


def _minutes(a: float, b: float) -> slice:
    return slice(int(a * 60 / STEP), int(b * 60 / STEP))


def _memory(change0: float, during: slice) -> Aligned:
    """Every node has 1.76 TB available; n00 (rank 0) ``change0`` bytes more ``during``."""
    X = np.full((len(NODES), TIMES.size), 1.76e12)
    X += np.random.default_rng(18).normal(0, 3e9, X.shape)
    X[0, during] += change0
    return Aligned(TIMES, NODES, {MEM_AVAIL: X}, STEP)


def test_rank_0_freeing_memory_while_its_peers_wait_is_no_fault() -> None:
    # corpus v15, seen: rank 0 evaluates alone for minutes, the others hold their state in NCCL
    freed = _memory(2.6e11, _minutes(20, 27))
    assert detect(freed, [MEM_AVAIL], Params()).faulty == []
    # two-sided, as before round 18, it was found
    two_sided = Params(one_sided_evidence=False)
    assert [f.node for f in detect(freed, [MEM_AVAIL], two_sided).faulty] == ["n00"]


def test_memory_lost_is_still_found() -> None:
    leak = _memory(-2.6e11, _minutes(20, 60))
    r = detect(leak, [MEM_AVAIL], Params())
    assert [(f.node, f.metric) for f in r.faulty] == [("n00", MEM_AVAIL)]


def _clocks(n: int) -> tuple[np.ndarray, np.ndarray]:
    return np.full((n, TIMES.size), 1980.0), np.full((n, TIMES.size), 99.0)


def test_a_clock_is_evidence_under_its_peers_and_only_while_its_gpus_work() -> None:
    nodes = NODES[:3]
    # from minute 20 a hot aisle throttles every node but n00: n00 is the odd one out, on the
    # healthy side
    clock, util = _clocks(3)
    clock[1:, _minutes(20, 60)] = 1500.0
    a = Aligned(TIMES, nodes, {CLOCK: clock, UTIL: util}, STEP)
    assert detect(a, [UTIL, CLOCK], Params()).faulty == []
    two_sided = Params(one_sided_evidence=False)
    assert [f.node for f in detect(a, [UTIL, CLOCK], two_sided).faulty] == ["n00"]
    # a pair whose n01 an elastic job released at minute 20: idle, its clocks at their floor
    # -- no clock fault (before round 18, the pair's two sides cancelled as job-wide)
    clock, util = _clocks(2)
    clock[1, _minutes(20, 60)], util[1, _minutes(20, 60)] = 345.0, 0.0
    pair = Aligned(TIMES, NODES[:2], {CLOCK: clock, UTIL: util}, STEP)
    assert detect(pair, [CLOCK], Params()).faulty == []
    # a node throttled alone while it works is found; without utilisation, two-sided as before
    clock, util = _clocks(16)
    clock[5, _minutes(20, 60)] = 1500.0
    busy = Aligned(TIMES, NODES, {CLOCK: clock, UTIL: util}, STEP)
    assert [f.node for f in detect(busy, [UTIL, CLOCK], Params()).faulty] == ["n05"]
    del a.data[UTIL]
    assert [f.node for f in detect(a, [CLOCK], Params()).faulty] == ["n00"]


def test_the_fault_sides_are_the_catalogs() -> None:
    assert spec_for(MEM_AVAIL).fault_side == "low"
    # the clocks while busy only: low is also a GPU idle, a node an elastic job released
    for name in (CLOCK, "DCGM_FI_DEV_MEM_CLOCK"):
        assert spec_for(name).fault_side == "low" and spec_for(name).busy_only
    assert not spec_for(MEM_AVAIL).busy_only
    assert spec_for("DCGM_FI_DEV_GPU_TEMP").fault_side is None
