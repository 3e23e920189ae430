"""Hostile review of round 13 (37271e1 "Minder round 13", and d86e9c4), by a helper in session 13.

Round 13 added ``LINK_FLAPPING`` / ``CARRIER_FLAPPING`` (``increase(...[1800s]) > bool 1.5 / 2.5``
per port, the node's worst port, a drainable hardware state), ``NIC_SPEED`` (the summed speed of
the physical NICs, ``healthy_high``) and PSI full memory as something the job can cause.

Each ``test_<n>_`` is finding n (numbered by severity: 1-5 drain healthy nodes, 6-9 miss a
faulty one, 10 drains in a narrower setting) and asserts the behaviour an SRE paged for a
512-node job needs.  Each failed on d86e9c4; the session-13 fixes made all but two pass:
a flapping indicator counts only events inside the window and has no reference offset
(1, 6), a hardware state on the healthy side of its peers is no fault (2; 9 with it), the
memory and load a job can move are ``job_can_cause`` (3, 4), IPoIB interfaces are left out
of the NICs' summed speed (7), and ``watch`` drains no node found on the same metric in the
same minute as another (5: a shared switch).  Still ``xfail(strict=True)``: finding 8 (a port
that goes down every 40 minutes: two flaps never fall within the 30-minute range; a longer
range costs the query a sample read per step for hours of samples) and finding 10 (IPoIB
carrier changes stay read: on a VM without IB error counters they are a bouncing port's only
record -- its reason says what leaving them out cost).  The
``test_e<n>_`` tests passed from the start: evidence that the code is right there (and that
the scenarios read as described).  The link and speed cases are
node_exporter series as it exposes them (``speed_bytes`` -125000 for an unknown speed, counters
per device and port) loaded into a real Prometheus (``promtool tsdb create-blocks-from
openmetrics``) and read by the real query path (:func:`fetch_job`) and detector
(:func:`analyse`), as ``minder --job`` does; the job-can-cause cases are small synthetic
tables run through :func:`detect`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import numpy as np
import pytest
from metrics.conftest import served_prometheus

from aegis_slurm.metrics import PromConfig, analyse
from aegis_slurm.metrics.align import Aligned
from aegis_slurm.metrics.catalog import (
    CARRIER_FLAPPING,
    LINK_FLAPPING,
    NIC_SPEED,
    is_hardware,
    job_can_cause,
    spec_for,
)
from aegis_slurm.metrics.config import MinderConfig, WatchConfig
from aegis_slurm.metrics.detect import Params, Result, detect
from aegis_slurm.metrics.prometheus import fetch_job
from aegis_slurm.metrics.slurmjob import JobWindow
from aegis_slurm.metrics.watch import run_pass

STEP = 15.0
MIN = 60.0
LINK = "node_infiniband_link_downed_total"
CARRIER = "node_network_carrier_changes_total"
SPEED = "node_network_speed_bytes"
#: what a site running round 13 reads about its links: the two new indicators, the summed NIC
#: speed, and the raw counters they are derived from (still read on the events scale)
LINK_METRICS = [LINK_FLAPPING, CARRIER_FLAPPING, NIC_SPEED, LINK, CARRIER]
G100 = 1.25e10  # a 100 GbE port's speed_bytes
DOWN = -125000.0  # node_exporter's speed_bytes for sysfs speed -1 (unknown: a port down)

# ---- a real Prometheus holding every scenario's node_exporter series -------------------------

#: series: (metric, host, labels, value at time t (None: no sample), first, last)
Spec = tuple[str, str, str, Callable[[float], float | None]]


def _steps(at: list[float]) -> Callable[[float], float]:
    """A counter that rose by one at each time of ``at``."""
    return lambda t: float(sum(t >= a for a in at))


def _scenarios(t: float) -> tuple[list[Spec], dict[str, tuple[list[str], float, float]]]:
    """Every job's series and its (nodes, start, end); ``t`` is every job's start."""
    series: list[Spec] = []
    jobs: dict[str, tuple[list[str], float, float]] = {}

    def ib(host: str, downs: list[float], base: float = 0.0) -> None:
        # one HCA port: link_downed +1 and its IPoIB interface's carrier +2 per flap
        series.append((LINK, host, 'device="mlx5_0",port="1"', lambda s: base + _steps(downs)(s)))
        series.append((CARRIER, host, 'device="ib0"', lambda s: 2.0 + 2 * _steps(downs)(s)))

    # A: a node back from link repair (cable reseated, port toggled twice to check it: two
    # link-downs 14 and 12 minutes before it was resumed); nothing happens in the job
    jobs["A"] = ([f"a{i}" for i in range(8)], t, t + 45 * MIN)
    for h in jobs["A"][0]:
        ib(h, [t - 14 * MIN, t - 12 * MIN] if h == "a3" else [])
    # B: a port that has been bouncing every 5 minutes since an hour before the job, and goes on
    jobs["B"] = ([f"b{i}" for i in range(8)], t, t + 45 * MIN)
    for h in jobs["B"][0]:
        ib(h, [t - 60 * MIN + 5 * MIN * k for k in range(22)] if h == "b5" else [])
    # C: a port that goes down every 40 minutes through a 3-hour job (Azure's NHC2005: two IB
    # link flaps within 6 hours fail the node)
    jobs["C"] = ([f"c{i}" for i in range(8)], t, t + 180 * MIN)
    for h in jobs["C"][0]:
        ib(h, [t + (10 + 40 * k) * MIN for k in range(4)] if h == "c2" else [])
    # D: two 100 GbE ports a node; on d4 the second port is down when the job starts (a
    # technician replacing its cable, or its switch port re-enabled) and up from minute 20
    jobs["D"] = ([f"d{i}" for i in range(8)], t, t + 45 * MIN)
    for h in jobs["D"][0]:
        ib(h, [])
        series.append((SPEED, h, 'device="eth0"', lambda s: G100))
        late = h == "d4"
        series.append(
            (
                SPEED,
                h,
                'device="eth1"',
                lambda s, late=late: DOWN if late and s < t + 20 * MIN else G100,
            )
        )
    # E: a 2-node job; e1's port goes down at minutes 20 and 24
    jobs["E"] = (["e0", "e1"], t, t + 45 * MIN)
    for h in jobs["E"][0]:
        ib(h, [t + 20 * MIN, t + 24 * MIN] if h == "e1" else [])
    # F: healthy nodes doing ordinary things: f1's node_exporter restarts at minute 15 (two
    # minutes without samples; sysfs counters carry on); f3 gets a NIC hot-plugged at minute 20
    # (a bond slave: its carrier counter appears at 1 and reads 3 once NetworkManager brought it
    # up); the fabric manager clears f5's port counters (9 -> 0) at minute 25 and its port goes
    # down once at minute 30; f6's node_exporter ignores its NICs (no carrier series at all)
    jobs["F"] = ([f"f{i}" for i in range(8)], t, t + 45 * MIN)
    for h in jobs["F"][0]:
        if h == "f5":
            series.append(
                (
                    LINK,
                    h,
                    'device="mlx5_0",port="1"',
                    lambda s: 9.0 if s < t + 25 * MIN else float(s >= t + 30 * MIN),
                )
            )
            series.append((CARRIER, h, 'device="ib0"', lambda s: 2.0 + 2 * (s >= t + 30 * MIN)))
        elif h == "f6":
            series.append((LINK, h, 'device="mlx5_0",port="1"', lambda s: 0.0))
        else:
            ib(h, [])
        if h == "f3":
            series.append(
                (
                    CARRIER,
                    h,
                    'device="ens3f1"',
                    lambda s: None if s < t + 20 * MIN else (1.0 if s < t + 20 * MIN + 15 else 3.0),
                )
            )
    # G: NIC names differ across the job's nodes (eth0/eth1 on g0-g3; ens1f0np0/ens1f1np1 and
    # an unused, unplugged ens2f0 on g4-g6); g7 reports no speed at all (an older node_exporter);
    # at minute 20 a switch firmware upgrade renegotiates every node's second port at 25 GbE
    jobs["G"] = ([f"g{i}" for i in range(8)], t, t + 45 * MIN)
    for i, h in enumerate(jobs["G"][0]):
        ib(h, [])
        if h == "g7":
            continue
        names = ("eth0", "eth1") if i < 4 else ("ens1f0np0", "ens1f1np1")
        series.append((SPEED, h, f'device="{names[0]}"', lambda s: G100))
        series.append(
            (SPEED, h, f'device="{names[1]}"', lambda s: G100 if s < t + 20 * MIN else G100 / 4)
        )
        if i >= 4:
            series.append((SPEED, h, 'device="ens2f0"', lambda s: DOWN))
    # I: an NDR InfiniBand node as a DGX has it -- eight IPoIB interfaces (ib0-ib7, which
    # report their port's rate as their speed: 400 Gb/s) and two 100 GbE ports; i3's second
    # Ethernet port renegotiates 25 GbE at minute 20 (the fault NIC_SPEED was added for)
    jobs["I"] = ([f"i{i}" for i in range(8)], t, t + 45 * MIN)
    for h in jobs["I"][0]:
        ib(h, [])
        for k in range(8):
            series.append((SPEED, h, f'device="ib{k}"', lambda s: 5e10))
        series.append((SPEED, h, 'device="eth0"', lambda s: G100))
        slow = h == "i3"
        series.append(
            (
                SPEED,
                h,
                'device="eth1"',
                lambda s, slow=slow: G100 / 4 if slow and s >= t + 20 * MIN else G100,
            )
        )
    # J: j6 shares its HCA with a tenant whose partition is set per job (the SM rewrites
    # j6's P_Key table when that job starts and when it ends, 6 minutes apart): IPoIB's
    # event handler flushes ib0 on a P_Key change (ipoib_ib_dev_down: netif_carrier_off, then
    # on again), carrier +2 each time; the physical port never goes down (link_downed flat)
    jobs["J"] = ([f"j{i}" for i in range(8)], t, t + 45 * MIN)
    for h in jobs["J"][0]:
        series.append((LINK, h, 'device="mlx5_0",port="1"', lambda s: 0.0))
        flush = [t + 20 * MIN, t + 26 * MIN] if h == "j6" else []
        series.append(
            (CARRIER, h, 'device="ib0"', lambda s, flush=flush: 2.0 + 2 * _steps(flush)(s))
        )
    # H: a 16-node job of which three nodes hang off one leaf switch; its firmware upgrade
    # reboots it twice (an intermediate release first), at minutes 20 and 27: their links go
    # down together, twice
    jobs["H"] = ([f"h{i:02d}" for i in range(16)], t, t + 45 * MIN)
    for h in jobs["H"][0]:
        ib(h, [t + 20 * MIN, t + 27 * MIN] if h in ("h02", "h07", "h11") else [])
    return series, jobs


def _openmetrics(series: list[Spec], jobs: dict, t: float) -> str:
    # each job's series from an hour before it to a minute after it (increase() reads 30 min back)
    ends = {h: end for nodes, _, end in jobs.values() for h in nodes}
    fams: dict[str, list[str]] = {}
    for metric, host, labels, value in series:
        inst = f'instance="{host}:9100"'
        lines = fams.setdefault(metric, [])
        s = t - 60 * MIN
        while s <= ends[host] + MIN:
            restarting = host == "f1" and t + 15 * MIN <= s < t + 17 * MIN
            v = value(s)
            if v is not None and not restarting:
                lines.append(f"{metric}{{{labels},{inst}}} {v!r} {s:.3f}")
            s += STEP
    kind = {LINK: "counter", CARRIER: "counter", SPEED: "gauge"}
    out = []
    for metric, lines in fams.items():
        fam = metric.removesuffix("_total") if kind[metric] == "counter" else metric
        out.append(f"# TYPE {fam} {kind[metric]}")
        out += lines
    return "\n".join(out) + "\n# EOF\n"


@pytest.fixture(scope="module")
def prom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict]]:
    t = (time.time() // 3600 - 4) * 3600  # every job starts 4 h ago; C ends 1 h ago
    series, jobs = _scenarios(t)
    with served_prometheus(
        _openmetrics(series, jobs, t), tmp_path_factory.mktemp("s13prom")
    ) as url:
        yield url, jobs


def _minder(prom: tuple[str, dict], job: str, metrics: list[str] = LINK_METRICS) -> Result:
    """``minder --job`` over the job's window: the real query path and detector."""
    return _analysed(prom, job, metrics)[0]


def _analysed(
    prom: tuple[str, dict], job: str, metrics: list[str] = LINK_METRICS
) -> tuple[Result, Aligned]:
    url, jobs = prom
    nodes, start, end = jobs[job]
    df = fetch_job(PromConfig(url), nodes, start, end, [spec_for(m) for m in metrics])
    return analyse(df, nodes=nodes, start=start, end=end, priority=metrics, step=STEP)


def _row(al: Aligned, metric: str, node: str) -> np.ndarray:
    return al.data[metric][al.nodes.index(node)]


def _found(r: Result) -> list[tuple[str, str]]:
    return [(f.node, f.metric) for f in r.faulty]


# ---- the findings --------------------------------------------------------------------------


def test_e0_the_scenarios_read_through_prometheus_as_described(prom) -> None:
    # evidence that each xfail below fails for its stated reason, not for missing data
    _, jobs = prom
    t = jobs["A"][1]
    _, al = _analysed(prom, "A")
    a3 = _row(al, LINK_FLAPPING, "a3")  # the repair's two link-downs, 12-14 min before the job
    assert np.all(a3[al.times < t + 15 * MIN] == 1) and np.all(a3[al.times > t + 19 * MIN] == 0)
    _, al = _analysed(prom, "B")
    assert np.all(_row(al, LINK_FLAPPING, "b5") == 1)  # flapping all job long
    _, al = _analysed(prom, "C")
    c2 = _row(al, LINK, "c2")
    assert c2[-1] - c2[0] == 4 and np.all(_row(al, LINK_FLAPPING, "c2") == 0)  # 4 downs, never 2
    _, al = _analysed(prom, "E")
    assert np.all(_row(al, LINK_FLAPPING, "e1")[al.times > t + 25 * MIN] == 1)
    _, al = _analysed(prom, "I")
    # the IPoIB interfaces are left out since the fix (8 x 5e10 before it): 2 x 1.25e10,
    # less 9.4e9 from minute 20
    i3 = _row(al, NIC_SPEED, "i3")
    assert i3[0] == 2.5e10 and i3[-1] == 2.5e10 - 0.75 * G100


def test_1_link_downs_before_the_job_do_not_drain_the_node_after_it_started(prom) -> None:
    r = _minder(prom, "A")
    assert _found(r) == [], _found(r)


def test_1_watch_does_not_act_on_the_repaired_node(prom) -> None:
    url, jobs = prom
    nodes, t, _ = jobs["A"]
    now = t + 30 * MIN
    cfg = MinderConfig(watch=WatchConfig(drain=False, syslog=False))
    rep = run_pass(cfg, url, [JobWindow("4242", nodes, t, now)], now, {})
    assert rep.jobs_checked == 1 and rep.prometheus_ok, rep.errors
    assert "4242:a3" not in rep.open, rep.open


def test_6_a_port_flapping_since_before_the_job_is_found(prom) -> None:
    r = _minder(prom, "B")
    assert "b5" in {n for n, _ in _found(r)}, _found(r)


@pytest.mark.xfail(
    strict=True,
    reason="finding 8: a port going down every 40 minutes never has two link-downs within "
    "FLAP_WINDOW (1800 s), so a 3-hour job loses a link four times and nothing is found; "
    "Azure's NHC2005, which the commit cites, fails a node on two flaps within 6 hours",
)
def test_8_a_port_down_every_40_minutes_is_found_by_its_second_flap(prom) -> None:
    _, jobs = prom
    t = jobs["C"][1]
    r = _minder(prom, "C")
    hits = [f for f in r.faulty if f.node == "c2"]
    assert hits and hits[0].first_detected <= t + 55 * MIN, _found(r)


def test_2_a_nic_speed_that_rises_is_no_fault(prom) -> None:
    r = _minder(prom, "D")
    assert _found(r) == [], _found(r)


def test_9_a_flapping_port_in_a_two_node_job_is_found(prom) -> None:
    r = _minder(prom, "E")
    assert "e1" in {n for n, _ in _found(r)}, _found(r)


def test_e1_ordinary_events_on_healthy_nodes_are_not_flapping(prom) -> None:
    # evidence (passes): an exporter restart, a hot-plugged NIC's new counter (increase()'s
    # extrapolation on a series two samples old), a counter cleared by the fabric manager
    # followed by one real link-down, and a node that exports no carrier series at all
    r = _minder(prom, "F")
    assert _found(r) == [], _found(r)


def test_e2_speeds_under_other_nic_names_and_a_job_wide_renegotiation_are_no_fault(prom) -> None:
    # evidence (passes): NIC names differ across nodes, an unplugged port reads -125000 (0),
    # one node reports no speed at all, and every node's second port renegotiates 25 GbE at once
    r = _minder(prom, "G")
    assert _found(r) == [], _found(r)


def test_5_nodes_whose_links_dropped_together_are_not_each_drained(prom) -> None:
    # fixed in watch, the one place that drains: ``minder --job`` still reports the three nodes
    # (what the metrics show), and the watch pass alerts on each without draining any
    url, jobs = prom
    nodes, t, _ = jobs["H"]
    now = t + 35 * MIN
    cfg = MinderConfig(watch=WatchConfig(drain=False, syslog=False))
    rep = run_pass(cfg, url, [JobWindow("4243", nodes, t, now)], now, {})
    assert rep.jobs_checked == 1 and rep.prometheus_ok, rep.errors
    actions = {k.split(":")[1]: v["action"] for k, v in rep.open.items()}
    assert set(actions) == {"h02", "h07", "h11"}, actions
    assert all("at once: shared cause?" in a for a in actions.values()), actions


def test_7_a_port_falling_back_to_25gbe_on_an_ib_node_is_found(prom) -> None:
    r = _minder(prom, "I")
    assert ("i3", NIC_SPEED) in _found(r), _found(r)


@pytest.mark.xfail(
    strict=True,
    reason="finding 10, kept: IPoIB carrier changes stay read -- on a VM whose IB functions "
    "publish no link_downed (Azure ND; corpus v10's port-bounce jobs there, seen) they are the "
    "only record of a port bouncing, and leaving them out lost those (0.912 -> 0.882 on v10); a "
    "partition change across the job's nodes at once is not drained by watch (finding 5's rule)",
)
def test_10_ipoib_carrier_changes_without_a_link_down_are_not_drained(prom) -> None:
    r = _minder(prom, "J")
    drained = [(n, m) for n, m in _found(r) if is_hardware(spec_for(m))]
    assert drained == [], drained


# ---- what the job can cause (session 12's review fix, round 13's PSI memory) ---------------

T = 240
TIMES = 1.0e9 + STEP * np.arange(T)  # 60 minutes
NODES = [f"n{i:02d}" for i in range(16)]
PSI_MEM = "node_pressure_memory_stalled_seconds_total"
PSI_IO = "node_pressure_io_stalled_seconds_total"


def _psi(share0: float, first: int, steps: int) -> np.ndarray:
    """PSI full, seconds since boot: every node stalls 0.05 % of the time, n00 ``share0`` of
    the time for ``steps`` steps from ``first``."""
    rate = np.full((len(NODES), T), 0.0005)
    rate[0, first : first + steps] = share0
    return 100.0 + np.cumsum(rate * STEP, axis=1)


def _drainable(r: Result, node: str) -> list[str]:
    """The node's reported findings that ``watch`` would act on with ``drain = true``: any
    that is not on a metric the job can cause (watch.run_pass)."""
    return [f.metric for f in r.faulty if f.node == node and not job_can_cause(f.metric)]


def test_3_rank0_gathering_a_full_state_dict_is_not_drained() -> None:
    rng = np.random.default_rng(9)
    mem = 1.6e12 + rng.normal(0, 2e9, (len(NODES), T))
    mem[0, 100:132] = 0.75e12  # 70B params x 12 B (fp32 weights + Adam) on rank 0, 8 minutes
    data = {"node_memory_MemAvailable_bytes": mem, PSI_MEM: _psi(0.3, 100, 32)}
    r = detect(Aligned(TIMES, NODES, data, STEP), list(data), Params())
    assert _drainable(r, "n00") == [], _found(r)


def test_4_the_checkpoint_writers_load_is_not_drained() -> None:
    rng = np.random.default_rng(10)
    load = 40.0 + rng.normal(0, 1.0, (len(NODES), T))
    load[0, 100:124] += 64  # 8 ranks x 8 data-loader workers blocked on the congested mount
    data = {"node_load1": load, PSI_IO: _psi(0.6, 100, 24)}
    r = detect(Aligned(TIMES, NODES, data, STEP), list(data), Params())
    assert _drainable(r, "n00") == [], _found(r)


def test_e3_a_memory_stall_alone_is_reported_as_the_jobs_and_never_hardware() -> None:
    # evidence (passes): on its own, round 13's PSI memory finding carries the reason and is
    # no hardware evidence (it cannot make another node collateral)
    data = {PSI_MEM: _psi(0.3, 100, 32)}
    r = detect(Aligned(TIMES, NODES, data, STEP), list(data), Params())
    assert _found(r) == [("n00", PSI_MEM)]
    assert not is_hardware(spec_for(PSI_MEM))
