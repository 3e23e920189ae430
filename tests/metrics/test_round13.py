"""Round 13 (designed on corpus v10, seen): a link that went down twice within half an hour,
the node's NICs' summed speed, and the share of time no task could progress for memory."""

from __future__ import annotations

import shutil
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from aegis_slurm.metrics.align import Aligned, align
from aegis_slurm.metrics.catalog import (
    BY_NAME,
    CARRIER_FLAPPING,
    LINK_FLAPPING,
    NIC_SPEED,
    spec_for,
)
from aegis_slurm.metrics.detect import Params, detect, reference_statistic

from .blind_eval import flapping
from .test_real_exposition import raw_frame, served_and_fetched

STEP = 15.0
TIMES = 1e9 + STEP * np.arange(240)  # 60 min
NODES = [f"n{i:02d}" for i in range(16)]
HOSTS = ["hostA", "hostB", "hostC", "hostD"]
SPEED = "node_network_speed_bytes"


def _links(t0: float) -> tuple[list[str], pl.DataFrame]:
    """node_exporter's link series of four hosts, every 15 s for 10 minutes, as OpenMetrics and
    as the raw long frame the corpora hold.

    hostA: no link event; two 100 GbE ports.  hostB: its IB port goes down at minute 2 and
    again at minute 6 (link_downed +1, carrier +2 each); its second Ethernet port reads -1 Mb/s
    (down: node_exporter's -125000 bytes/s).  hostC: one flap at minute 2.5; from minute 5 its
    second port runs at 25 GbE after autonegotiation fell back.  hostD: the fabric manager
    clears its IB counter (5 -> 0) at minute 3; a container's veth reports 10 GbE."""
    fams = {
        "node_infiniband_link_downed_total": "counter",
        "node_network_carrier_changes_total": "counter",
        SPEED: "gauge",
    }
    lines = [f"# TYPE {m} {kind}" for m, kind in fams.items()]
    rows = []
    for k in range(41):
        t = t0 + 15 * k
        b = (k >= 8) + (k >= 24)
        series = {
            "hostA": {"mlx5_0": 0, "eth0": 2, "eth0s": 1.25e10, "eth1s": 1.25e10},
            "hostB": {"mlx5_0": b, "eth0": 2 + 2 * b, "eth0s": 1.25e10, "eth1s": -125000.0},
            "hostC": {
                "mlx5_0": int(k >= 10),
                "eth0": 2 + 2 * (k >= 10),
                "eth0s": 1.25e10,
                "eth1s": 3.125e9 if k >= 20 else 1.25e10,
            },
            "hostD": {
                "mlx5_0": 0 if k >= 12 else 5,
                "eth0": 2,
                "eth0s": 1.25e10,
                "eth1s": 1.25e10,
                "veth9s": 1.25e9,
            },
        }
        for host, vals in series.items():
            inst = f'instance="{host}:9100"'
            for dev, v in vals.items():
                if dev == "mlx5_0":
                    m, lab = "node_infiniband_link_downed_total", f'device="mlx5_0",port="1",{inst}'
                    dev_id = "mlx5_0:1"
                elif dev == "eth0":
                    m, lab, dev_id = (
                        "node_network_carrier_changes_total",
                        f'device="eth0",{inst}',
                        "eth0",
                    )
                else:
                    dev_id = dev[:-1]
                    m, lab = SPEED, f'device="{dev_id}",{inst}'
                lines.append(f"{m}{{{lab}}} {v} {t:.3f}")
                rows.append((datetime.fromtimestamp(t, UTC), host, m, dev_id, float(v)))
    return lines, raw_frame(rows)


def test_flapping_and_nic_speed_through_a_real_prometheus(tmp_path: Path) -> None:
    if shutil.which("prometheus") is None or shutil.which("promtool") is None:
        pytest.skip("Debian's prometheus package is not installed (tools/install-test-deps.sh)")
    t0 = (time.time() // 3600 - 2) * 3600
    lines, raw = _links(t0)
    specs = [spec_for(m) for m in (LINK_FLAPPING, CARRIER_FLAPPING, NIC_SPEED)]
    al = align(served_and_fetched(tmp_path, lines, HOSTS, t0, specs), step=15.0)
    a, b, c, d = (al.nodes.index(n) for n in HOSTS)
    second = al.times >= t0 + 360 + 30  # hostB's second flap, scraped
    for m in (LINK_FLAPPING, CARRIER_FLAPPING):
        X = al.data[m]
        assert np.all(X[[a, c, d]] == 0), m  # none, one flap, a counter cleared
        assert np.all(X[b, second] == 1) and np.all(X[b, al.times < t0 + 360] == 0), m
    speed = al.data[NIC_SPEED]
    assert np.all(speed[a] == 2.5e10) and np.all(speed[d] == 2.5e10)  # no veth in the sum
    assert np.all(speed[b] == 1.25e10)  # a port down is no speed, not a negative one
    late = al.times >= t0 + 300 + 30
    assert np.all(speed[c, late] == 1.5625e10) and np.all(speed[c, al.times < t0 + 300] == 2.5e10)
    # the corpora's scorer models the same PromQL (tests/metrics/blind_eval.py)
    for m, source, above in (
        (LINK_FLAPPING, "node_infiniband_link_downed_total", 1.5),
        (CARRIER_FLAPPING, "node_network_carrier_changes_total", 2.5),
    ):
        off = flapping(raw.filter(pl.col("metric") == source), 1800.0, above)
        for node, i in zip(HOSTS, (a, b, c, d), strict=True):
            mine = off.filter(pl.col("node") == node).sort("time")
            secs = mine["time"].dt.epoch("ms").to_numpy() / 1000
            at = np.searchsorted(secs, al.times)
            ok = (at < secs.size) & (secs[np.minimum(at, secs.size - 1)] == al.times)
            assert ok.sum() > 20
            assert np.array_equal(mine["value"].to_numpy()[at[ok]], al.data[m][i, ok]), (m, node)


def _indicator(rows: dict[int, tuple[int, int]]) -> Aligned:
    X = np.zeros((len(NODES), TIMES.size))
    for node, (first, last) in rows.items():
        X[node, first:last] = 1.0
    return Aligned(TIMES, NODES, {LINK_FLAPPING: X}, STEP)


def test_a_port_flapping_is_found_a_continuity_after_its_second_flap() -> None:
    # n05's port went down at minute 20 and again at 26: flapping from its second flap until
    # half an hour after it
    r = detect(_indicator({5: (104, 224)}), [LINK_FLAPPING], Params())
    assert [(f.node, f.metric) for f in r.faulty] == [("n05", LINK_FLAPPING)]
    assert TIMES[104] < r.faulty[0].first_detected <= TIMES[104] + 5 * 60


def test_a_switch_rebooting_twice_flaps_every_node_and_no_node_is_faulty() -> None:
    assert (
        detect(_indicator(dict.fromkeys(range(16), (104, 224))), [LINK_FLAPPING], Params()).faulty
        == []
    )


def _speed(culprit: bool) -> Aligned:
    X = np.full((len(NODES), TIMES.size), 2.5e10)
    X[6] = 1.25e10  # one port down all job (no speed): the node's own normal
    if culprit:  # n03's second port falls back from 100 to 25 GbE 20 minutes in
        X[3, 80:] = 1.5625e10
    return Aligned(TIMES, NODES, {NIC_SPEED: X}, STEP)


def test_a_nic_that_fell_back_to_a_lower_speed_is_found() -> None:
    r = detect(_speed(culprit=True), [NIC_SPEED], Params())
    assert [(f.node, f.metric) for f in r.faulty] == [("n03", NIC_SPEED)]
    assert TIMES[80] < r.faulty[0].first_detected <= TIMES[80] + 5 * 60


def test_a_port_down_all_job_is_the_nodes_normal() -> None:
    assert detect(_speed(culprit=False), [NIC_SPEED], Params()).faulty == []
    # its best state is its highest, unlike the other summed hardware states
    assert reference_statistic(NIC_SPEED, Params()) == "max"
    assert reference_statistic(LINK_FLAPPING, Params()) == "min"


def test_a_memory_stall_is_read_as_the_io_stall_and_never_drained() -> None:
    mem, io = (BY_NAME[f"node_pressure_{r}_stalled_seconds_total"] for r in ("memory", "io"))
    assert (mem.kind, mem.scale, mem.lo, mem.hi) == (io.kind, io.scale, io.lo, io.hi)
    assert "memory stall" in (mem.job_can_cause or "")


def test_rose_within_counts_only_the_windows_own_rises() -> None:
    """The gate of the flapping indicators (session-13 review): a counter's value at a node's
    first sample is what it counted before the window; a rise shows after a gap at the next
    sample; a clear (a fall) is no rise; a rise stands for ``span`` steps."""
    from aegis_slurm.metrics.detect import rose_within

    nan = np.nan
    C = np.array(
        [
            [5, 5, 5, 6, 6, 6, 6, 6],  # one rise at step 3
            [nan, 9, 9, 9, 9, 9, 9, 9],  # 9 before the window (first sample at step 1): none
            [1, 1, nan, nan, 2, 2, 2, 2],  # a rise across a gap, seen at step 4
            [4, 4, 0, 0, 0, 1, 1, 1],  # cleared to 0 (no rise), then one at step 5
        ]
    )
    got = rose_within(C, 3)
    assert got.tolist() == [
        [False, False, False, True, True, True, False, False],
        [False] * 8,
        [False, False, False, False, True, True, True, False],
        [False, False, False, False, False, True, True, True],
    ]
