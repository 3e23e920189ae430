"""Steps 3 and 4 as units: the forest over nodes, stages, DTW, hangs."""

from __future__ import annotations

import numpy as np

from aegis_slurm.logs import spatial, temporal


def test_identical_nodes_have_no_outlier() -> None:
    counts = np.tile(np.array([[60, 8, 1, 1]]), (16, 1))
    assert spatial.compare_nodes([f"n{i}" for i in range(16)], counts).outliers == []


def test_one_node_with_an_extra_event_is_the_outlier() -> None:
    counts = np.tile(np.array([[60, 8, 1, 0]]), (16, 1))
    counts[5, 3] = 1
    res = spatial.compare_nodes([f"n{i}" for i in range(16)], counts)
    assert res.outliers == [5]
    assert int(np.argmax(res.importance[5])) == 3  # the event that isolates it


def test_the_minority_is_the_outlier_and_an_even_split_has_none() -> None:
    counts = np.tile(np.array([[60, 0]]), (8, 1))
    counts[:6, 1] = 3  # two nodes lack an event six others logged
    assert sorted(spatial.compare_nodes([f"n{i}" for i in range(8)], counts).outliers) == [6, 7]
    counts[4:, 1] = 0  # half and half: no node is "the" outlier
    assert spatial.compare_nodes([f"n{i}" for i in range(8)], counts).outliers == []


def test_stage_rules() -> None:
    assert temporal.stage_of([], "ImportError: x", False) == "launch"
    assert temporal.stage_of(["> initializing torch distributed ..."], "boom", False) == "init"
    assert temporal.stage_of(["iteration 5/ 10"], "boom", True) == "iteration"
    saving = "[05/01 00:03:20 fvcore.common.checkpoint]: Saving checkpoint to ./o/m.pth"
    assert temporal.stage_of([saving], "OSError: [Errno 28] No space left", True) == "checkpoint"


def test_dtw_finds_the_slow_iteration() -> None:
    rng = np.random.default_rng(0)
    values = 5.0 + rng.normal(0, 0.05, 80)
    values[57] = 40.0  # one iteration took 8x as long
    assert temporal.dtw_outlier_iteration(np.arange(1, 81), values) == 58


def test_dtw_quiet_series_has_no_outlier() -> None:
    values = 5.0 + np.random.default_rng(1).normal(0, 0.05, 80)
    assert temporal.dtw_outlier_iteration(np.arange(1, 81), values) is None


def test_hung_node_stops_first() -> None:
    last = {f"n{i}": 31 for i in range(8)}
    last["n3"] = 30
    assert temporal.hung_nodes(last, {}, None) == ["n3"]
    same = {f"n{i}": 31 for i in range(8)}
    ts = {f"n{i}": 1000.0 for i in range(8)}
    ts["n6"] = 900.0  # same iteration count, but its last progress is 20 intervals older
    assert temporal.hung_nodes(same, ts, 5.0) == ["n6"]
    assert temporal.hung_nodes(same, {n: 1000.0 for n in same}, 5.0) == []
