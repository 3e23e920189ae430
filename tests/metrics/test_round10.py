"""Round 10 (designed on corpus v8, seen): the ranks that stop with another node's hardware
fault are collateral, a launch is judged from the job's first run at its level, and NVLink 5's
repaired-symbol trickle is no evidence under its floor."""

from __future__ import annotations

import numpy as np

from aegis_slurm.metrics import to_json
from aegis_slurm.metrics.align import Aligned
from aegis_slurm.metrics.detect import Params, detect, idle_since

STEP = 15.0
TIMES = 1e9 + STEP * np.arange(200)  # 50 min
NODES = [f"n{i}" for i in range(12)]
UTIL, CLOCK, PORT = "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_SM_CLOCK", "node_infiniband_state_id"


def _hang(neighbour_evidence: bool = False) -> Aligned:
    """n3's IB port goes Down at minute 20; its ranks and those of n4 and n5 (its ring
    neighbours, whose connections to it fail) stop 20 s later; everyone else spins in NCCL
    (utilisation 100, clock at max) until the watchdog."""
    n, T = len(NODES), TIMES.size
    util = np.full((n, T), 97.0)
    clock = np.full((n, T), 1980.0)
    port = np.full((n, T), 4.0)
    down = 80
    port[3, down:] = 1.0
    util[:, down + 2 :] = 100.0  # the peers' NCCL kernels spin
    for i in (3, 4, 5):
        util[i, down + 2 :] = 0.0
        clock[i, down + 2 :] = 345.0
    if neighbour_evidence:
        port[5, down + 2 :] = 1.0  # n5's own port went too: a fault of its own
    return Aligned(TIMES, NODES, {UTIL: util, CLOCK: clock, PORT: port}, STEP)


def test_ranks_that_stopped_with_a_dead_port_are_collateral_not_faulty() -> None:
    a = _hang()
    r = detect(a, [PORT, UTIL, CLOCK], Params())
    assert [f.node for f in r.faulty] == ["n3"]
    assert r.faulty[0].metric == PORT
    assert {n: other for n, (_, other) in r.collateral.items()} == {"n4": "n3", "n5": "n3"}
    assert all(t == TIMES[82] for t, _ in r.collateral.values())
    doc = to_json(r)
    assert [c["node"] for c in doc["collateral"]] == ["n4", "n5"]
    assert {c["with"] for c in doc["collateral"]} == {"n3"}
    # without the rule (before round 10), the neighbours were faults
    off = detect(a, [PORT, UTIL, CLOCK], Params(collateral=False))
    assert [f.node for f in off.faulty] == ["n3", "n4", "n5"] and off.collateral == {}


def test_a_node_with_evidence_of_its_own_stays_faulty() -> None:
    r = detect(_hang(neighbour_evidence=True), [PORT, UTIL, CLOCK], Params())
    assert sorted(f.node for f in r.faulty) == ["n3", "n5"]
    assert set(r.collateral) == {"n4"}


def test_without_hardware_evidence_every_stopped_node_is_faulty() -> None:
    a = _hang()
    a.data[PORT][:] = 4.0  # no port state exported: nothing says which node broke
    r = detect(a, [PORT, UTIL, CLOCK], Params())
    assert [f.node for f in r.faulty] == ["n3", "n4", "n5"] and r.collateral == {}


def test_idle_since_is_the_last_idle_run_to_the_end() -> None:
    util = np.array(
        [
            [90, 90, 0, 0, 90, 0, 0, 0, 0],  # idle for good from step 5
            [90, 0, 0, 0, 0, 0, 0, 0, 90],  # back at work at the end
            [0, 0, 0, 0, 0, 0, 0, 0, 0],  # never worked (idle by design)
            [90, 90, 90, 90, np.nan, 0, np.nan, 0, 0],  # lost scrapes carried over
        ],
        dtype=float,
    )
    got = idle_since(util, np.arange(9.0), 3)
    assert got.tolist() == [5.0, np.inf, np.inf, 4.0]


def test_a_launch_is_judged_from_the_jobs_first_run() -> None:
    """Four of sixteen nodes compile for 9 minutes after the others are ready; the ready ones
    wait in a collective (utilisation 100, power near idle) until the last joins at minute
    12; then the job trains.  A node that stalls at minute 30 is still found."""
    n, T = 16, TIMES.size
    nodes = [f"n{i}" for i in range(n)]
    util = np.full((n, T), 97.0)
    power = np.full((n, T), 640.0)
    start = 48  # minute 12: the job first runs at its level
    util[:, 8:start] = 100.0
    power[:, :start] = 130.0
    util[:4, 8:start] = 20.0  # still compiling
    util[:, :8] = 10.0  # the first two minutes: everyone loads
    a = Aligned(TIMES, nodes, {UTIL: util, "DCGM_FI_DEV_POWER_USAGE": power}, STEP)
    pri = [UTIL, "DCGM_FI_DEV_POWER_USAGE"]
    assert detect(a, pri, Params()).faulty == []
    assert {f.node for f in detect(a, pri, Params(launch_wait=False)).faulty} == {
        "n0",
        "n1",
        "n2",
        "n3",
    }
    util[9, 120:150] = 30.0  # minute 30: n9 stalls for 7.5 minutes
    (f,) = detect(a, pri, Params()).faulty
    assert f.node == "n9" and f.first_detected >= TIMES[120]


def test_nvlink5_repaired_symbols_count_from_their_floor() -> None:
    name = "DCGM_FI_DEV_NVLINK_RX_SYMBOL_ERROR_TOTAL"
    rng = np.random.default_rng(4)
    base = rng.uniform(0.3, 1.5, len(NODES))  # each healthy link's own trickle, a second
    X = np.cumsum(np.tile(base[:, None] * STEP, (1, TIMES.size)), axis=1)
    a = Aligned(TIMES, NODES, {name: X.copy()}, STEP)
    assert detect(a, [name], Params()).faulty == []
    X[7, 100:] += np.cumsum(np.full(TIMES.size - 100, 2000.0 * STEP))  # a lane degrading
    (f,) = detect(Aligned(TIMES, NODES, {name: X}, STEP), [name], Params()).faulty
    assert f.node == "n7" and f.first_detected >= TIMES[100]


def test_a_fault_that_slows_the_job_early_is_not_taken_for_its_launch() -> None:
    """The job loads for 3 minutes, trains at full power, and at minute 8 n5's GPU clock
    falls and slows the whole job for the remaining 42 minutes: the slowed level is the
    job's typical one, so "running at its level" starts only then -- the launch is over
    when the job first ran at *or above* it (corpus v8, seen: a NIC stall 16 minutes in)."""
    n, T = 12, TIMES.size
    nodes = [f"n{i}" for i in range(n)]
    power = np.full((n, T), 640.0)
    clock = np.full((n, T), 1980.0)
    power[:, :12] = 120.0  # loading
    power[:, 32:] = 450.0  # from minute 8 the job waits on n5
    clock[5, 32:] = 1100.0
    a = Aligned(TIMES, nodes, {"DCGM_FI_DEV_POWER_USAGE": power, CLOCK: clock}, STEP)
    (f,) = detect(a, [CLOCK, "DCGM_FI_DEV_POWER_USAGE"], Params()).faulty
    assert f.node == "n5" and f.metric == CLOCK and f.first_detected >= TIMES[32]
