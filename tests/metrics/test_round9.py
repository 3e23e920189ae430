"""Round 9's catalog entries, each judged by the detector as the catalog says: local error
counters on the events scale, a port's state and a mount's error as physical gauges.  The
series are shaped as the exporters serve them (a count since boot, a state id, a 0/1 gauge);
which exporter names and types they are is checked in test_catalog.py."""

from __future__ import annotations

import numpy as np

from aegis_slurm.metrics.align import Aligned
from aegis_slurm.metrics.detect import Params, detect

TIMES = 1e9 + 15.0 * np.arange(200)  # 50 min at a 15 s scrape
NODES = [f"n{i}" for i in range(12)]


def _found(metric: str, X: np.ndarray) -> list[tuple[str, float]]:
    a = Aligned(TIMES, NODES, {metric: X}, 15.0)
    return [(f.node, f.first_detected) for f in detect(a, [metric], Params()).faulty]


def _counter(per_second: float, start: int, culprit: int = 4) -> np.ndarray:
    """Every node's count since boot (a different one each); ``culprit`` counting from
    ``start`` at ``per_second`` (Poisson)."""
    rng = np.random.default_rng(9)
    X = np.tile(rng.integers(0, 50, (len(NODES), 1)).astype(float), (1, TIMES.size))
    X[culprit, start:] += rng.poisson(per_second * 15.0, TIMES.size - start).cumsum()
    return X


def test_an_ib_lane_logging_symbol_errors_is_found_and_a_single_one_is_not() -> None:
    name = "node_infiniband_symbol_error_total"
    ((node, t),) = _found(name, _counter(2.0, 80))
    # errors still arriving a continuity after they began: 4 min + the 2-min rate window
    assert node == "n4" and TIMES[80] <= t <= TIMES[80] + 6 * 60 + 15
    one = np.tile(np.arange(len(NODES), dtype=float)[:, None], (1, TIMES.size))
    one[7, 120:] += 1  # one minor error in 50 minutes: a healthy lane does that
    assert _found(name, one) == []


def test_a_link_retraining_again_and_again_is_found() -> None:
    X = np.zeros((len(NODES), TIMES.size))
    X[2, 100::8] = 1  # a recovery every 2 minutes from minute 25
    X = X.cumsum(axis=1)
    ((node, t),) = _found("node_infiniband_link_error_recovery_total", X)
    assert node == "n2" and t >= TIMES[100]


def test_oom_kills_and_uncorrectable_gpu_memory_errors_are_evidence() -> None:
    for name in (
        "node_vmstat_oom_kill",
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
    ):
        X = np.zeros((len(NODES), TIMES.size))
        X[9, 90:] = 1  # one event at minute 22 and the counter holds it
        X[9, 110:] = 2  # a second 5 minutes later (a rank restarted and died again)
        ((node, t),) = _found(name, X)
        assert node == "n9" and t >= TIMES[90], name


def test_a_port_that_left_active_is_found_and_an_unused_port_is_the_nodes_normal() -> None:
    X = np.full((len(NODES), TIMES.size), 4.0)  # every port Active
    X[6, :] = 1.0  # a port cabled to nothing on this node since before the job
    X[3, 100:] = 1.0  # a port that went Down at minute 25 (its series stay)
    ((node, t),) = _found("node_infiniband_state_id", X)
    assert node == "n3" and t >= TIMES[100]
    short = np.full((len(NODES), TIMES.size), 4.0)
    short[3, 100:104] = 2.0  # Init for a minute while the link retrains: under the continuity
    assert _found("node_infiniband_state_id", short) == []


def test_a_hung_mount_is_found_and_a_mount_that_always_errors_is_not() -> None:
    X = np.zeros((len(NODES), TIMES.size))
    X[1, :] = 1.0  # a FUSE mount root this node's exporter cannot stat, all along
    X[10, 140:] = 1.0  # its NFS client hangs at minute 35
    ((node, t),) = _found("node_filesystem_device_error", X)
    assert node == "n10" and t >= TIMES[140]


def test_a_failed_row_remap_appearing_mid_job_is_found() -> None:
    X = np.zeros((len(NODES), TIMES.size))
    X[5, 60:] = 1.0
    ((node, t),) = _found("DCGM_FI_DEV_ROW_REMAP_FAILURE", X)
    assert node == "n5" and t >= TIMES[60]


def test_one_uncorrectable_error_is_held_as_evidence_where_the_events_scale_drops_it() -> None:
    """A GPU's double-bit ECC error is a fault on its own: held from its increment (latch),
    where the events scale wants errors still arriving a continuity later."""
    X = np.zeros((len(NODES), TIMES.size))
    X[9, 90:] = 1.0
    a = Aligned(TIMES, NODES, {"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": X}, 15.0)
    pri = ["DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"]
    (f,) = detect(a, pri, Params()).faulty
    assert f.node == "n9" and TIMES[90] + 225 <= f.first_detected <= TIMES[90] + 300  # 16 steps
    assert detect(a, pri, Params(latch=False)).faulty == []


def test_latched_counts_increases_only_and_keeps_lost_scrapes_lost() -> None:
    from aegis_slurm.metrics.detect import latched

    X = np.array(
        [
            [3.0, 3.0, np.nan, 4.0, 4.0, 0.0, 0.0],  # a rise across a lost scrape, a reset
            [5.0, 5.0, 5.0, 0.0, 0.0, 0.0, 0.0],  # a driver reload clearing the count
            [np.nan, 2.0, 2.0, 2.0, 2.0, 2.0, 3.0],
        ]
    )
    got = latched(X)
    assert np.array_equal(
        got,
        np.array(
            [
                [0.0, 0.0, np.nan, 1.0, 1.0, 1.0, 1.0],
                [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
                [np.nan, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0],
            ]
        ),
        equal_nan=True,
    )
    assert latched(np.empty((2, 0))).shape == (2, 0)
