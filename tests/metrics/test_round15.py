"""Round 15 (designed on corpus v12, seen): a CPU package throttling for heat, a GPU braking in
recurring episodes, a link event several nodes share (the switch's end of their links), and
hardware evidence read one-sided (a two-node job's culprit)."""

from __future__ import annotations

import numpy as np

from aegis_slurm.metrics.align import Aligned
from aegis_slurm.metrics.catalog import BY_NAME, GPU_COUNT, HW_SLOWDOWN, LINK_FLAPPING, is_hardware
from aegis_slurm.metrics.detect import Params, detect, machine_gone, shared_onsets, upper_median

STEP = 15.0
TIMES = 1e9 + STEP * np.arange(240)  # 60 min
NODES = [f"n{i:02d}" for i in range(12)]
THROTTLES = "node_cpu_package_throttles_total"
CARRIER = "node_network_carrier_changes_total"
IB_BYTES = "node_infiniband_port_data_received_bytes_total"
XID = "DCGM_FI_DEV_XID_ERRORS"
CLOCK = "DCGM_FI_DEV_SM_CLOCK"
REPLAYS = "DCGM_FI_DEV_PCIE_REPLAY_COUNTER"


def _minutes(a: float, b: float) -> slice:
    return slice(int(a * 60 / STEP), int(b * 60 / STEP))


def _aligned(metric: str, X: np.ndarray) -> Aligned:
    return Aligned(TIMES, NODES, {metric: X}, STEP)


def _counter(start: float = 36.0) -> np.ndarray:
    """Every node's counter at ``start`` (a history since boot), flat."""
    return np.full((len(NODES), TIMES.size), start)


def _add_rate(X: np.ndarray, node: int, a: float, b: float, per_s: float) -> None:
    """``node``'s counter grows at ``per_s`` from minute ``a`` to ``b`` (flat after)."""
    grow = np.zeros(TIMES.size)
    grow[_minutes(a, b)] = per_s * STEP
    X[node] += np.cumsum(grow)


def test_shared_onsets_marks_runs_that_start_together_only() -> None:
    far = np.zeros((4, 40), bool)
    far[0, 10:14] = far[1, 11:13] = True  # two nodes at once (a step apart): shared
    far[0, 30:33] = True  # node 0 again, alone: its own
    far[2, 20:24] = True  # alone
    far[3, 25:27] = True  # five steps after node 2's start: not within 2
    got = shared_onsets(far, tol=2)
    assert got[0, 10:14].all() and got[1, 11:13].all()
    assert not got[0, 30:33].any() and not got[2].any() and not got[3].any()
    assert not shared_onsets(far[:1], tol=2).any()  # one node shares with nobody
    # a run still going at the end stays evidence (a port that stays down is unusable), and
    # the one that began with it and passed is the shared event
    far = np.zeros((3, 40), bool)
    far[0, 30:] = far[1, 31:34] = True
    got = shared_onsets(far, tol=2)
    assert not got[0].any() and got[1, 31:34].all()


def test_two_ports_flapping_together_are_the_switch_not_two_faulty_links() -> None:
    # a leaf switch reloaded twice: n03's and n04's IB ports went down together both times
    X = np.zeros((len(NODES), TIMES.size))
    X[[3, 4], _minutes(26, 56)] = 1.0
    assert BY_NAME[LINK_FLAPPING].switch_side
    assert detect(_aligned(LINK_FLAPPING, X), [LINK_FLAPPING], Params()).faulty == []
    # each alone is a finding: the rule, not the scale, keeps them quiet
    found = detect(_aligned(LINK_FLAPPING, X), [LINK_FLAPPING], Params(shared_links=False))
    assert sorted(f.node for f in found.faulty) == ["n03", "n04"]
    # one port flapping alone ten minutes later is still found
    X[9, _minutes(36, 60)] = 1.0
    found = detect(_aligned(LINK_FLAPPING, X), [LINK_FLAPPING], Params())
    assert [f.node for f in found.faulty] == ["n09"]


def test_a_racks_carrier_changes_do_not_corroborate_one_of_its_nodes_dips() -> None:
    # a management switch reloads: three neighbours' frontend NICs (of a 64-node job) lose and
    # regain carrier together at minute 30; the job's IB traffic dips on n04 meanwhile
    nodes = [f"n{i:02d}" for i in range(64)]
    carrier = np.full((len(nodes), TIMES.size), 4.0)
    for node in (3, 4, 5):
        carrier[node, _minutes(30, 60)] += 2.0
    rate = np.full((len(nodes), TIMES.size), 1e10)
    rate[4, _minutes(30, 36)] = 4e9
    ib = np.cumsum(rate * STEP, axis=1)
    a = Aligned(TIMES, nodes, {IB_BYTES: ib, CARRIER: carrier}, STEP)
    assert BY_NAME[IB_BYTES].evidence == "coupled" and BY_NAME[CARRIER].switch_side
    assert detect(a, [IB_BYTES, CARRIER], Params()).faulty == []
    # n04's own carrier change alone would have corroborated the dip
    found = detect(a, [IB_BYTES, CARRIER], Params(shared_links=False)).faulty
    assert [(f.node, f.metric) for f in found] == [("n04", IB_BYTES)]


def test_a_cpu_package_throttling_for_heat_is_found_and_never_drained() -> None:
    spec = BY_NAME[THROTTLES]
    assert (spec.source, spec.kind, spec.scale) == ("node", "counter", "events")
    # the job's own CPU load can throttle a package near its limit (session-14 review):
    # reported with that reason, never hardware evidence that drains
    assert spec.job_can_cause and not is_hardware(spec)
    X = _counter()
    X[2] += 5000.0  # a long history since boot: no rate, no fault
    _add_rate(X, 7, 25, 60, 0.8)  # a failed fan: the package throttles ~50 times a minute
    X[4, _minutes(40, 60)] += 1.0  # one throttle on a hot afternoon
    r = detect(_aligned(THROTTLES, X), [THROTTLES], Params())
    assert [(f.node, f.metric) for f in r.faulty] == [("n07", THROTTLES)]
    assert TIMES[0] + 25 * 60 < r.faulty[0].first_detected <= TIMES[0] + 31 * 60


def test_a_gpu_braking_in_recurring_episodes_is_found_and_one_episode_is_not() -> None:
    assert BY_NAME[HW_SLOWDOWN].recurs

    def share(episodes: list[tuple[float, float]]) -> np.ndarray:
        X = np.zeros((len(NODES), TIMES.size))
        for a, b in episodes:  # the share over a minute's range: the brake's duty
            X[7, _minutes(a, b)] = 0.9
        return X

    # a failing power supply brakes all GPUs of the node for two minutes every six
    bursts = share([(20, 22), (26, 28), (32, 34)])
    r = detect(_aligned(HW_SLOWDOWN, bursts), [HW_SLOWDOWN], Params())
    assert [f.node for f in r.faulty] == ["n07"]
    assert TIMES[0] + 26 * 60 < r.faulty[0].first_detected <= TIMES[0] + 28 * 60
    assert (
        detect(_aligned(HW_SLOWDOWN, bursts), [HW_SLOWDOWN], Params(recurrence=False)).faulty == []
    )
    # one episode, or episodes farther apart than the flapping range, is not the pattern
    for episodes in ([(20, 22)], [(5, 7), (50, 52)]):
        assert detect(_aligned(HW_SLOWDOWN, share(episodes)), [HW_SLOWDOWN], Params()).faulty == []


def test_a_hardware_xid_in_a_two_node_job_is_found_on_its_node() -> None:
    # the pair's median is their mean: the clean node sits as far from it as the culprit
    times = TIMES[:160]
    X = np.zeros((2, times.size))
    X[1, 100:] = 119.0  # Xid 119 (GSP RPC timeout) at minute 25
    a = Aligned(times, ["a", "b"], {XID: X}, STEP)
    assert [f.node for f in detect(a, [XID], Params()).faulty] == ["b"]
    assert detect(a, [XID], Params(one_sided_evidence=False)).faulty == []


def test_a_gpu_lost_in_a_two_node_job_is_found_on_its_node() -> None:
    times = TIMES[:160]
    X = np.full((2, times.size), 8.0)
    X[0, 100:] = 7.0  # a GPU off the bus at minute 25
    a = Aligned(times, ["a", "b"], {GPU_COUNT: X}, STEP)
    assert [f.node for f in detect(a, [GPU_COUNT], Params()).faulty] == ["a"]
    assert upper_median(X)[99:101].tolist() == [8.0, 8.0]
    assert np.isnan(upper_median(np.full((3, 1), np.nan))).all()
    assert upper_median(np.array([[1.0], [2.0], [np.nan], [3.0], [4.0]])).tolist() == [3.0]


def test_an_error_burst_in_a_two_node_job_is_found_on_its_node_only() -> None:
    times = TIMES[:160]
    X = np.zeros((2, times.size))
    X[0, 100:] = np.cumsum(np.full(60, 2.0 * STEP))  # node a's link replays 2/s from minute 25
    a = Aligned(times, ["a", "b"], {REPLAYS: X}, STEP)
    assert [f.node for f in detect(a, [REPLAYS], Params()).faulty] == ["a"]
    assert detect(a, [REPLAYS], Params(one_sided_evidence=False)).faulty == []


def test_a_rack_silent_for_two_minutes_together_is_not_evidence_on_its_nodes() -> None:
    # a management switch reloads: n03-n05 answer no exporter from minute 30 to 32 while the
    # job's clocks carry on; n09 alone stops answering at minute 40 and stays silent
    clock = np.full((len(NODES), TIMES.size), 1980.0)
    clock[[3, 4, 5], _minutes(30, 32)] = np.nan
    clock[9, _minutes(40, 60)] = np.nan
    a = _aligned(CLOCK, clock)
    gone = machine_gone(a)
    assert gone[[3, 4, 5], _minutes(30, 32)].all() and gone[9, _minutes(40, 60)].all()
    r = detect(a, [CLOCK], Params(continuity=60.0))
    assert [f.node for f in r.faulty] == ["n09"]
    off = detect(a, [CLOCK], Params(continuity=60.0, shared_links=False))
    assert sorted(f.node for f in off.faulty) == ["n03", "n04", "n05", "n09"]
