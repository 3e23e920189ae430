"""Round 14 (designed on corpus v11, seen): a failure state that recurs in episodes shorter than
the continuity, and memory the kernel took offline as corrupted."""

from __future__ import annotations

import numpy as np

from aegis_slurm.metrics.align import Aligned
from aegis_slurm.metrics.catalog import BY_NAME, is_hardware
from aegis_slurm.metrics.detect import Params, detect, recurrence

STEP = 15.0
TIMES = 1e9 + STEP * np.arange(240)  # 60 min
NODES = [f"n{i:02d}" for i in range(12)]
MOUNT = "node_filesystem_device_error"
PORT = "node_infiniband_state_id"
GEN = "DCGM_FI_DEV_PCIE_LINK_GEN"
HWCORRUPT = "node_memory_HardwareCorrupted_bytes"


def _minutes(a: float, b: float) -> slice:
    return slice(int(a * 60 / STEP), int(b * 60 / STEP))


def _state(metric: str, healthy: float, bad: float, episodes: list[tuple[float, float]]) -> Aligned:
    """Every node at ``healthy``; n07 at ``bad`` in each (from, to) minute episode."""
    X = np.full((len(NODES), TIMES.size), healthy)
    for a, b in episodes:
        X[7, _minutes(a, b)] = bad
    return Aligned(TIMES, NODES, {metric: X}, STEP)


def test_recurrence_counts_episodes_of_at_least_a_window() -> None:
    far = np.zeros((3, 40), bool)
    far[0, 5:9] = far[0, 20:25] = True  # two 4-step episodes, 15 steps apart
    far[1, 5:9] = far[1, 30:32] = True  # the second one too short
    far[2, 0:4] = far[2, 36:40] = True  # two, but 36 steps apart
    got = recurrence(far, least=4, span=20)
    assert got.tolist() == [23, -1, -1]  # confirmed once the second lasted 4 steps
    assert recurrence(far, least=4, span=40).tolist() == [23, -1, 39]


def test_a_mount_that_keeps_failing_for_minutes_is_found() -> None:
    # a client evicted and let back: statfs fails for 3 minutes at minutes 20 and 29
    a = _state(MOUNT, 0.0, 1.0, [(20, 23), (29, 32)])
    r = detect(a, [MOUNT], Params())
    assert [(f.node, f.metric) for f in r.faulty] == [("n07", MOUNT)]
    assert TIMES[0] + 29 * 60 < r.faulty[0].first_detected <= TIMES[0] + 31 * 60
    # without the rule, neither episode lasts the continuity
    assert detect(a, [MOUNT], Params(recurrence=False)).faulty == []


def test_one_episode_or_glitches_or_episodes_far_apart_are_no_fault() -> None:
    for episodes in (
        [(20, 23)],  # once
        [(20, 20.25), (25, 25.25), (30, 30.25)],  # one scrape each time
        [(10, 13), (45, 48)],  # 35 minutes apart: more than the range
    ):
        assert detect(_state(MOUNT, 0.0, 1.0, episodes), [MOUNT], Params()).faulty == [], episodes


def test_a_port_bouncing_out_of_active_is_found() -> None:
    # Active (4) -> Down (1) for 2 minutes, twice within 10 minutes
    a = _state(PORT, 4.0, 1.0, [(20, 22), (27, 29)])
    assert [f.node for f in detect(a, [PORT], Params()).faulty] == ["n07"]


def test_a_power_managed_level_is_not_read_for_recurrence() -> None:
    # an idle GPU lowers its PCIe link generation (nvidia-smi: "may be reduced when the GPU is
    # not in use"): rank 0's GPUs idling through two 3-minute saves are no fault
    assert not BY_NAME[GEN].recurs
    a = _state(GEN, 5.0, 1.0, [(20, 23), (29, 32)])
    assert detect(a, [GEN], Params()).faulty == []


def test_memory_taken_offline_is_hardware_evidence_from_its_second_increase() -> None:
    spec = BY_NAME[HWCORRUPT]
    assert (spec.kind, spec.scale, spec.job_can_cause) == ("gauge", "latch", None)
    assert is_hardware(spec)
    X = np.zeros((len(NODES), TIMES.size))
    X[2, :] = 4096.0  # pages poisoned before the window: the node's past, no event here
    X[4, _minutes(20, 60)] = 4096.0  # one page soft-offlined (10 corrected errors): no fault
    X[7, _minutes(25, 60)] = 4096.0  # a page offlined at minute 25, another at 31
    X[7, _minutes(31, 60)] = 8192.0
    r = detect(Aligned(TIMES, NODES, {HWCORRUPT: X}, STEP), [HWCORRUPT], Params())
    assert [(f.node, f.metric) for f in r.faulty] == [("n07", HWCORRUPT)]
    assert TIMES[0] + 31 * 60 <= r.faulty[0].first_detected <= TIMES[0] + 36 * 60
