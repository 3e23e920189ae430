"""Hostile review (session 15, third helper) of round 18 amended (635470e: ``MetricSpec.busy_only``
and ``detect.fault_side``, since renamed :func:`detect.judged_side` -- the SM and memory clocks
are evidence only below their peers' and while the node's GPUs work) and of round 19 (7532fe3:
``offset_bound=0.4`` on the link rate without a utilisation gate, ``BOUND_CAVEAT`` reworded).

Each ``test_<n>_`` is finding n and asserts what an SRE of a large GPU cluster needs;
``xfail(strict=True)`` where 7532fe3 fails it.  ``test_e<n>_`` pass: evidence that the scenario
reads as described.  ``test_ok_`` pass: attacks the two commits withstand.  Ranked by severity.

Both fixed the same session, before corpus v17 was read (markers removed, evidence restated):
1 (the link-rate bound holds only among nodes with as many IB ports as their peers,
``MetricSpec.bound_alike`` = the port count: a node with one more -- a storage function at
25 GbE -- keeps its offset; a rack of HDR nodes in an NDR job, as many ports, is still alerted
with the caveat, as round 19 intends); 2 (a step at which any node's utilisation is unknown
is judged two-sided, as before round 18).

* 1 (false alarm on a healthy node, in every job it runs): ``node_infiniband_rate_bytes_per_second``
  is the node's *slowest* port (agg ``min``).  Many clusters expose a storage or management
  function under ``/sys/class/infiniband`` too (an mlx5 Ethernet/RoCE port at 25 GbE =
  3.1e9 B/s next to the NDR HCAs at 5e10 B/s); such a node reads 94 % under its NDR peers
  from boot, the bound takes its offset away, and it is alerted (``BOUND_CAVEAT``) at minute
  8.75 of every multi-node job it is in -- the same for a rack of HDR nodes (1-3 of them) in
  an NDR job, which the commit itself names ("or another fabric in the job").  A caveated
  alert that fires on every job for a node's permanent configuration trains admins to ignore
  the detector.  Suggested fix: take the rate over the ports of the job's fabric only
  (``link_layer="InfiniBand"`` / the HCAs the job's NCCL uses), and bound only a node whose
  reading *changed* in kind: a node whose rate is the same in every job is inventory, not a
  link trained low (compare the node's own rate in earlier jobs, or leave lower-generation
  rates -- exactly 1/2^k of a known generation with no other port at the peers' rate -- to
  the Prolog/NHC).  Ranked first: it fires through ``watch`` by default, on every job.

* 2 (false verdict on a healthy node: "FAULTY" and drainable in ``minder --job``/``--json``):
  the busy gate reads a missing utilisation sample as *busy* (``NaN <= IDLE_UTIL`` is False),
  so where a node's utilisation is unknown its clocks are one-sided *without* the gate --
  exactly the configuration round 18 dropped because it made an elastic pair's released node
  its pair's only candidate.  An elastic pair (n01 released at minute 25: idle, SM clock at
  its 345 MHz floor) whose released node has no ``DCGM_FI_DEV_GPU_UTIL`` series (a node whose
  dcgm-exporter runs another counters CSV, e.g. profiling fields only) or whose utilisation
  is blank in one scrape in four (DCGM returns blank fields; dcgm-exporter omits them) is
  reported on ``DCGM_FI_DEV_SM_CLOCK`` with no caveat -- a drainable verdict; the two-sided
  clocks of 635470e's parent (``one_sided_evidence=False``) are quiet.  ``watch`` (``min_nodes
  = 3``) does not judge pairs by default; at ``min_nodes = 2`` it would drain it.  The
  catalog promise "without a utilisation series the clocks stay two-sided" holds for the job,
  not for a node or a step.  Suggested fix: a step where any node's utilisation is unknown is
  judged two-sided, as a job without utilisation is (or hold a node's last utilisation across
  a short gap, ``held_across_gaps``, and treat a node with none as unknown, not busy).

Evidence (``test_e3_``, pre-existing, not from these commits): a node with no link-rate series
at all (an Omni-Path/Slingshot node or one whose node_exporter lacks the infiniband collector,
in a job with IB peers) is found on the link rate with score 1.0 and *no* caveat -- what watch
drains; the bound does not change it.

Withstood (``test_ok_``): watch, on a real Prometheus with node_exporter's per-port series
(finding 1's node: four NDR ports and a 25 GbE ``mlx5_4``), alerts the bound's finding with its
caveat and never drains it; a port down for the first two minutes and then up is quiet (the
reference is the node's best); a port dropping to half rate at minute 30 is found without a
caveat (a change, drainable); a port at half rate in a trio found with the caveat; a port 30 %
under quiet; a throttled GPU (SM clock 1,980 -> 900 MHz at minute 20) found, also when the
utilisation series is missing only on that node (NaN is not "idle": ``NaN <= 5`` is False);
a throttle whose utilisation reads exactly 5 % (idle by the gate) still found, on utilisation;
a released node's idle clocks no SM-clock evidence in a 16-node job with dense utilisation
(it is found on utilisation, as before 635470e); ``job_reference``'s ``"beyond"`` (watch's stored
reference) names the same nodes as the offline ``detect``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import numpy as np
import pytest
from metrics.conftest import served_prometheus

from aegis_slurm.metrics.align import Aligned
from aegis_slurm.metrics.catalog import LINK_RATE, PORT_COUNT, job_can_cause
from aegis_slurm.metrics.detect import (
    BOUND_CAVEAT,
    NO_REFERENCE_CAVEAT,
    Params,
    Result,
    detect,
    job_reference,
)
from review.passes import scrapes, watch_actions

STEP = 15.0
MIN = 60.0
T = 240
TIMES = 1.0e9 + STEP * np.arange(T)  # 60 minutes
UTIL = "DCGM_FI_DEV_GPU_UTIL"
SM = "DCGM_FI_DEV_SM_CLOCK"
NDR = 50e9  # B/s
RX_BYTES = "node_infiniband_port_data_received_bytes_total"
HDR = 25e9
ETH25 = 25e9 / 8


def _m(a: float) -> int:
    return round(a * 60 / STEP)


def _nodes(n: int) -> list[str]:
    return [f"n{i:02d}" for i in range(n)]


def _found(r: Result) -> list[tuple[str, str, str | None]]:
    return [(f.node, f.metric, f.caveat) for f in r.faulty]


def _ports(
    rates: dict[int, float | np.ndarray], n: int = 16, extra: tuple[int, ...] = ()
) -> Aligned:
    """Every node's slowest IB port (four each) at NDR; those in ``rates`` at theirs; the
    nodes in ``extra`` expose a fifth port (the port count, as ``minder`` derives it)."""
    X = np.full((n, T), NDR)
    for i, r in rates.items():
        X[i] = r
    count = np.full((n, T), 4.0)
    count[list(extra)] = 5.0
    return Aligned(TIMES, _nodes(n), {LINK_RATE: X, PORT_COUNT: count}, STEP)


# ---- finding 1: a node's permanent extra port / other fabric alerted in every job -------------


def test_1_a_node_with_a_25gbe_port_or_an_hdr_rack_is_not_alerted_in_every_job() -> None:
    # (the HDR rack of test_e1 is arguable -- another fabric is the allocation's doing; a
    # storage port on every job's node is not)
    r = detect(_ports({5: ETH25}, extra=(5,)), [LINK_RATE, PORT_COUNT], Params())
    assert r.faulty == []


def test_e1_the_hdr_rack_found_with_the_caveat_the_storage_port_node_not() -> None:
    hdr = {5: HDR, 6: HDR, 7: HDR}
    r = detect(_ports(hdr), [LINK_RATE], Params())
    assert _found(r) == [(_nodes(16)[i], LINK_RATE, BOUND_CAVEAT) for i in hdr]
    assert {f.first_detected for f in r.faulty} == {TIMES[0] + 8.75 * MIN}
    assert detect(_ports(hdr), [LINK_RATE], Params(bounded_offsets=False)).faulty == []
    # the storage-port node: not alike its peers in port count, its offset stands
    ref = job_reference(_ports({5: ETH25}, extra=(5,)), [LINK_RATE, PORT_COUNT], Params())
    assert "beyond" not in ref[LINK_RATE] and "n05" in ref[LINK_RATE]["offsets"]
    # and without port counts no node is known alike: no bound at all
    alone = _ports({5: HDR})
    del alone.data[PORT_COUNT]
    assert detect(alone, [LINK_RATE], Params()).faulty == []


def _elastic_pair(util_gap: str) -> Aligned:
    """Two nodes at work; n01 released at minute 25 (idle, SM clock at its floor).  Its
    utilisation: ``"none"`` (no series), ``"blank"`` (every fourth sample, both nodes),
    ``"dense"`` (every sample)."""
    U = np.full((2, T), 99.0)
    C = 1980.0 + np.random.default_rng(0).normal(0, 8, (2, T))
    U[1, _m(25) :] = 0.0
    C[1, _m(25) :] = 345.0
    if util_gap == "none":
        U[1] = np.nan
    elif util_gap == "blank":
        U[:, np.arange(T) % 4 == 1] = np.nan
    return Aligned(TIMES, _nodes(2), {UTIL: U, SM: C}, STEP)


def test_2_a_released_node_of_an_elastic_pair_is_quiet_without_its_utilisation() -> None:
    for gap in ("none", "blank"):
        assert detect(_elastic_pair(gap), [UTIL, SM], Params()).faulty == [], gap


def test_e2_as_quiet_as_the_two_sided_clocks() -> None:
    for gap in ("none", "blank"):
        p = Params(one_sided_evidence=False)
        assert detect(_elastic_pair(gap), [UTIL, SM], p).faulty == [], gap
    # with every utilisation sample, the gate holds (the amendment's own case)
    assert detect(_elastic_pair("dense"), [UTIL, SM], Params()).faulty == []


# ---- finding 1 through watch: node_exporter's per-port series on a real Prometheus ---------


def _port_exposition(t: float) -> str:
    """Eight nodes, four NDR ports each (mlx5_0-3); l03 also exposes mlx5_4, a 25 GbE
    Ethernet function of a ConnectX (storage), under /sys/class/infiniband: each port's rate
    and its received bytes (whose series ``minder`` counts per node)."""
    ports = [(f"l{i:02d}", f"mlx5_{d}", NDR) for i in range(8) for d in range(4)]
    ports.append(("l03", "mlx5_4", ETH25))
    lines = []
    for metric in (LINK_RATE, RX_BYTES):
        lines.append(f"# TYPE {metric} {'gauge' if metric == LINK_RATE else 'counter'}")
        for host, dev, rate in ports:
            lab = f'device="{dev}",port="1",instance="{host}:9100",job="node"'

            def value(s: float, rate: float = rate, metric: str = metric) -> float:
                # a port's rate, or the bytes it received since boot at 30 % of it
                return rate if metric == LINK_RATE else 1e12 + 0.3 * rate * (s - t + 10 * MIN)

            lines += scrapes(metric, lab, value, t - 10 * MIN, t + 61 * MIN, STEP)
    return "\n".join(lines) + "\n# EOF\n"


@pytest.fixture(scope="module")
def prom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, float]]:
    t = (time.time() // 3600 - 3) * 3600  # the job started 3 h ago
    with served_prometheus(_port_exposition(t), tmp_path_factory.mktemp("s15cprom")) as url:
        yield url, t


def test_1_watch_leaves_the_extra_port_node_alone(prom) -> None:
    url, t = prom
    nodes = [f"l{i:02d}" for i in range(8)]
    assert watch_actions(url, nodes, t, [float(m) for m in range(10, 40, 2)], "9101") == {}


# ---- evidence 3 (pre-existing): a node without the link metric is found drainable ------------


def test_e3_a_node_without_the_link_rate_is_found_with_the_no_reference_caveat() -> None:
    # (an Omni-Path or Slingshot node among IB peers: no port of its own in either series).
    # Since the session-16 review a node judged without a reference of its own on a reading
    # that depends on the model or the fabric is alerted with that caveat, never drained
    for p, why in ((Params(), NO_REFERENCE_CAVEAT), (Params(bounded_offsets=False), None)):
        a = _ports({5: np.full(T, np.nan)})
        a.data[PORT_COUNT][5] = np.nan
        r = detect(a, [LINK_RATE], p)
        assert [(f.node, f.caveat) for f in r.faulty] == [("n05", why)]
    assert not job_can_cause(LINK_RATE)


# ---- withstood ---------------------------------------------------------------------------------


def test_ok_a_port_down_at_boot_then_up_is_quiet() -> None:
    X = np.full(T, NDR)
    X[: _m(2)] = 0.0
    assert detect(_ports({5: X}), [LINK_RATE], Params()).faulty == []


def test_ok_a_port_dropping_mid_job_is_found_drainable() -> None:
    X = np.full(T, NDR)
    X[_m(30) :] = HDR
    assert _found(detect(_ports({5: X}), [LINK_RATE], Params())) == [("n05", LINK_RATE, None)]


def test_ok_within_the_bound_quiet_and_a_trio_found_with_the_caveat() -> None:
    assert detect(_ports({5: 0.7 * NDR}), [LINK_RATE], Params()).faulty == []
    r = detect(_ports({1: HDR}, n=3), [LINK_RATE, PORT_COUNT], Params())
    assert _found(r) == [("n01", LINK_RATE, BOUND_CAVEAT)]


def _throttle(util: np.ndarray | None = None, idle_released: bool = False) -> Aligned:
    U = np.full((16, T), 99.0)
    C = 1980.0 + np.random.default_rng(0).normal(0, 8, (16, T))
    C[5, _m(20) :] = 900.0
    if util is not None:
        U[5] = util
    if idle_released:  # n09 released by an elastic job: idle, clocks at their floor
        U[9, _m(25) :] = 0.0
        C[9, _m(25) :] = 345.0
    return Aligned(TIMES, _nodes(16), {UTIL: U, SM: C}, STEP)


def test_ok_a_throttled_gpu_is_found_with_and_without_its_utilisation() -> None:
    r = detect(_throttle(), [UTIL, SM], Params())
    assert _found(r) == [("n05", SM, None)]
    r = detect(_throttle(util=np.full(T, np.nan)), [UTIL, SM], Params())
    assert _found(r) == [("n05", SM, None)]


def test_ok_a_throttle_reading_exactly_idle_is_found_on_utilisation() -> None:
    U = np.full(T, 99.0)
    U[_m(20) :] = 5.0
    assert [f.node for f in detect(_throttle(util=U), [UTIL, SM], Params()).faulty] == ["n05"]


def test_ok_a_released_nodes_idle_clocks_are_no_evidence() -> None:
    r = detect(_throttle(idle_released=True), [SM], Params())
    assert [f.node for f in r.faulty if f.metric == SM] == ["n05"]
