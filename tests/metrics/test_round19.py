"""Round 19 (designed on corpus v16, seen): a port trained under its peers' rate from the node's
first sample is no hardware offset (catalog ``offset_bound`` on the link rate, without the
clocks' utilisation gate)."""

from __future__ import annotations

import numpy as np

from aegis_slurm.metrics.align import Aligned
from aegis_slurm.metrics.catalog import LINK_RATE, PORT_COUNT, spec_for
from aegis_slurm.metrics.detect import BOUND_CAVEAT, Params, detect, job_reference

STEP = 15.0
TIMES = 1e9 + STEP * np.arange(160)  # 40 min
NODES = [f"n{i:02d}" for i in range(12)]
NDR = 50e9  # bytes per second


def _ports(rates: dict[int, float], extra: tuple[int, ...] = ()) -> Aligned:
    """Every node's slowest of four ports at NDR from its first sample; those in ``rates`` at
    theirs; those in ``extra`` with a fifth port (a storage function under
    /sys/class/infiniband)."""
    X = np.full((len(NODES), TIMES.size), NDR)
    for i, r in rates.items():
        X[i] = r
    count = np.full_like(X, 4.0)
    count[list(extra)] = 5.0
    return Aligned(TIMES, NODES, {LINK_RATE: X, PORT_COUNT: count}, STEP)


def test_a_port_at_half_rate_from_boot_is_found_with_the_caveat() -> None:
    r = detect(_ports({4: NDR / 2}), [LINK_RATE], Params())
    assert [(f.node, f.metric, f.caveat) for f in r.faulty] == [("n04", LINK_RATE, BOUND_CAVEAT)]
    # before round 19 the node's best state over its reference span was its normal
    assert detect(_ports({4: NDR / 2}), [LINK_RATE], Params(bounded_offsets=False)).faulty == []
    # watch's stored reference names it too
    ref = job_reference(_ports({4: NDR / 2}), [LINK_RATE], Params())
    assert ref[LINK_RATE]["beyond"] == ["n04"]


def test_within_the_bound_and_a_mixed_fabric_stay_quiet() -> None:
    # 30 % under: inside the bound (no link trains there; a reporting quirk is not a verdict)
    assert detect(_ports({4: 0.7 * NDR}), [LINK_RATE], Params()).faulty == []
    # half the job on HDR: the peers' median is no single fabric, no minority stands out
    assert detect(_ports(dict.fromkeys(range(6), NDR / 2)), [LINK_RATE], Params()).faulty == []
    # a node with one port more than its peers (a 25 GbE storage function): not comparable,
    # its offset stands (third review of session 15)
    assert detect(_ports({4: NDR / 16}, extra=(4,)), [LINK_RATE], Params()).faulty == []


def test_the_link_rates_bound_needs_no_utilisation() -> None:
    spec = spec_for(LINK_RATE)
    assert spec.offset_bound == 0.4 and not spec.busy_only and spec.hardware
    assert spec.bound_alike == PORT_COUNT
