"""The detector's evidence mechanisms, each as a unit and each switched off once to show it matters:
the error-counter burst test, the profiler pause, corroboration of coupled throughputs, the
hardware Xid indicator and device counts (docs/minder.md, "Evidence")."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from aegis_slurm.metrics.align import Aligned
from aegis_slurm.metrics.catalog import GPU_COUNT, LINK_RATE, PORT_COUNT
from aegis_slurm.metrics.detect import (
    BOUND_CAVEAT,
    Finding,
    Params,
    burst_mask,
    corroborated,
    detect,
    device_loss,
    exporter_gone,
    hardware_xid,
    measured_support,
    profiler_blank,
    sustained,
)

STEP = 15.0
TIMES = 1e9 + STEP * np.arange(240)  # an hour at 15 s
NODES = [f"n{i:02d}" for i in range(16)]
POWER = "DCGM_FI_DEV_POWER_USAGE"
CLOCK = "DCGM_FI_DEV_SM_CLOCK"
TENSOR = "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"
REPLAY = "DCGM_FI_DEV_PCIE_REPLAY_COUNTER"
XID = "DCGM_FI_DEV_XID_ERRORS"
TEMP = "DCGM_FI_DEV_GPU_TEMP"
MEM = "node_memory_MemAvailable_bytes"
PORT_ERRS = "node_infiniband_port_errors_received_total"


def busy(rng: np.random.Generator, level: float, noise: float) -> np.ndarray:
    return level * rng.normal(1.0, noise, (len(NODES), TIMES.size))


def names(result) -> list[str]:
    return sorted(f.node for f in result.faulty)


# ---- the error-counter burst test -----------------------------------------------------------


def test_burst_bar_rises_with_the_peers_background_and_not_with_the_culprit() -> None:
    counts = np.zeros((16, 240))
    counts[3, 100] = 1.0
    assert burst_mask(counts, 240.0, 0.01, STEP).sum() == 1  # error-free peers: any event
    sparse = np.full((16, 240), 0.07)  # ~1 per node-hour in a 4-minute span
    c = sparse.copy()
    c[3, 100] = 3.0  # three in four minutes on one node: chance over 16 nodes x an hour
    assert not burst_mask(c, 240.0, 0.01, STEP)[3, 100]
    c[3, 100:] = 60.0  # a degraded link: a replay every 4 s
    m = burst_mask(c, 240.0, 0.01, STEP)
    assert m[3, 100:].all() and not m[np.arange(16) != 3].any()


def test_sparse_benign_replays_everywhere_convict_no_one_but_a_burst_does() -> None:
    # a 1,024-node job scraped every 60 s for 40 minutes, one benign replay per node-hour: some
    # node catches two in four minutes by chance, which lasts the continuity at that scrape
    rng = np.random.default_rng(0)
    times = 1e9 + 60.0 * np.arange(40)
    nodes = [f"n{i:04d}" for i in range(1024)]
    X = np.cumsum(rng.poisson(1 / 60, (1024, times.size)), axis=1).astype(float)
    a = Aligned(times, nodes, {REPLAY: X}, 60.0)
    assert detect(a, [REPLAY], Params()).faulty == []
    # quiet even without the burst test and the event continuity, because no reference offset
    # is read into an error rate: a chance replay in a node's reference span made an offset
    # that read as a deviation ever after (1,326 candidate windows here, against 33); with it
    # the burst test was what kept the job quiet
    # (NVIDIA's floor of 8 replays a minute, round 8, would keep it quiet on its own: off here)
    bare = {"burst_alpha": 0, "event_continuity": False, "event_floors": False}
    assert detect(a, [REPLAY], Params(**bare)).faulty == []
    assert detect(a, [REPLAY], Params(event_reference=True, **bare)).faulty
    unfloored = Params(event_reference=True, event_continuity=False, event_floors=False)
    assert detect(a, [REPLAY], unfloored).faulty == []
    assert detect(a, [REPLAY], Params(event_reference=True, **bare)).faulty != []
    X[700, 20:] += np.cumsum(np.full(20, 60.0))  # a degraded link: a replay per second
    found = detect(Aligned(times, nodes, {REPLAY: X}, 60.0), [REPLAY], Params()).faulty
    assert [f.node for f in found] == ["n0700"]


def test_a_burst_that_stops_within_the_continuity_is_a_blip() -> None:
    # error-free peers; n03 logs a replay a second (60 a minute, over NVIDIA's 8) for 3
    # minutes (a flap that ends), n07 for 6 minutes (a link that stays bad): the 2-minute rate
    # window stretches the flap to 5 minutes
    X = np.zeros((len(NODES), TIMES.size))
    X[3, 80:] += np.cumsum(np.r_[np.full(12, 15.0), np.zeros(TIMES.size - 92)])
    X[7, 150:] += np.cumsum(np.r_[np.full(24, 15.0), np.zeros(TIMES.size - 174)])
    a = Aligned(TIMES, NODES, {REPLAY: X}, STEP)
    assert names(detect(a, [REPLAY], Params())) == ["n07"]
    assert names(detect(a, [REPLAY], Params(event_continuity=False))) == ["n03", "n07"]


# ---- the profiler pause -----------------------------------------------------------------------


def test_a_paused_profiler_is_no_data_not_an_absence() -> None:
    rng = np.random.default_rng(2)
    tensor = busy(rng, 0.4, 0.02)
    tensor[4, 100:140] = np.nan  # dcgmi profile --pause for 10 minutes
    clock = busy(rng, 1410, 0.005)
    a = Aligned(TIMES, NODES, {TENSOR: tensor, CLOCK: clock}, STEP)
    blank = profiler_blank(a, TENSOR)
    assert blank is not None and blank[4, 100:140].all() and blank.sum() == 40
    assert profiler_blank(a, CLOCK) is None
    assert detect(a, [TENSOR, CLOCK], Params(corroborate=False)).faulty == []
    # (round 6's machine absence covers it too: the node's DEV fields report, so the blank
    # profiling fields are missing data; both off, the blank reads as an absence)
    off = Params(corroborate=False, profiler_pause=False, machine_absence=False)
    assert names(detect(a, [TENSOR, CLOCK], off)) == ["n04"]
    assert detect(a, [TENSOR, CLOCK], replace(off, machine_absence=True)).faulty == []


def test_a_node_gone_from_every_dcgm_field_is_still_absent() -> None:
    rng = np.random.default_rng(3)
    tensor, clock = busy(rng, 0.4, 0.02), busy(rng, 1410, 0.005)
    tensor[4, 100:], clock[4, 100:] = np.nan, np.nan  # the exporter (or machine) is gone
    a = Aligned(TIMES, NODES, {TENSOR: tensor, CLOCK: clock}, STEP)
    assert not profiler_blank(a, TENSOR).any()
    assert exporter_gone(a, "dcgm")[4, 100:].all()
    assert names(detect(a, [TENSOR, CLOCK], Params())) == ["n04"]


# ---- corroboration --------------------------------------------------------------------------


def test_a_coupled_throughput_alone_convicts_no_one() -> None:
    rng = np.random.default_rng(4)
    power = busy(rng, 600, 0.01)
    power[9, 120:] *= 0.6  # e.g. its ranks wait longer for a late peer: the job's symptom
    clock = busy(rng, 1980, 0.003)
    a = Aligned(TIMES, NODES, {POWER: power, CLOCK: clock}, STEP)
    assert detect(a, [POWER, CLOCK], Params()).faulty == []
    assert names(detect(a, [POWER, CLOCK], Params(corroborate=False))) == ["n09"]
    # with its own clock down too (a power brake), it is the node's fault: found on power
    clock[9, 124:] *= 0.6
    a = Aligned(TIMES, NODES, {POWER: power, CLOCK: clock}, STEP)
    found = detect(a, [POWER, CLOCK], Params())
    assert names(found) == ["n09"]
    assert [f.node for f in found.per_metric[POWER]] == ["n09"]


def test_a_lost_scrape_is_no_local_evidence() -> None:
    rng = np.random.default_rng(4)
    power = busy(rng, 600, 0.01)
    power[9, 120:] *= 0.6  # a coupled dip: the job's symptom, not n09's fault
    clock = busy(rng, 1980, 0.003)
    power[9, 125], clock[9, 125] = np.nan, np.nan  # one lost dcgm scrape on n09 during it
    a = Aligned(TIMES, NODES, {POWER: power, CLOCK: clock}, STEP)
    assert detect(a, [POWER, CLOCK], Params()).faulty == []
    assert names(detect(a, [POWER, CLOCK], Params(measured_evidence=False))) == ["n09"]


def test_measured_support_and_sustained() -> None:
    c = np.ones((1, 8), bool)
    X = np.ones((1, 8))
    X[0, 3] = np.nan
    # windows of 2 steps: those holding step 3 (ending at 3 and 4) are a gap, not a difference
    assert measured_support(c, X, 2).tolist() == [[1, 1, 1, 0, 0, 1, 1, 1]]
    m = np.array([[0, 1, 1, 0, 1, 1, 1, 1]], bool)
    assert sustained(m, 3).tolist() == [[0, 0, 0, 0, 0, 0, 1, 1]]


def test_corroboration_dates_a_finding_when_both_hold() -> None:
    f = Finding("n1", POWER, TIMES[100], 0.5)
    support = np.zeros((2, TIMES.size), bool)
    assert corroborated(f, 1, support, TIMES, 240.0) is None
    support[1, 110] = True  # local evidence 150 s later: dated then
    assert corroborated(f, 1, support, TIMES, 240.0).first_detected == TIMES[110]
    support[1, 90] = True  # local evidence just before: dated at the coupled finding
    assert corroborated(f, 1, support, TIMES, 240.0).first_detected == TIMES[100]
    support[1, :] = False
    support[1, [10, 130]] = True  # long before or long after (> one continuity): unrelated
    assert corroborated(f, 1, support, TIMES, 240.0) is None
    assert corroborated(f, 0, support, TIMES, 240.0) is None  # another node's evidence


# ---- Xid and device counts -----------------------------------------------------------------


def test_hardware_xid_indicator() -> None:
    X = np.array([[0, 13, 43, 74, 79, 94, np.nan]])
    np.testing.assert_array_equal(hardware_xid(X), [[0, 0, 0, 1, 1, 1, np.nan]])


def test_a_new_hardware_xid_is_found_and_a_stale_one_is_not() -> None:
    xid = np.zeros((16, TIMES.size))
    xid[2, :] = 74  # an NVLink Xid from before the job: the node's normal here
    xid[11, 150:] = 94  # a contained ECC error during the job
    xid[5, 150:] = 13  # an application's graphics exception: not the machine's
    a = Aligned(TIMES, NODES, {XID: xid}, STEP)
    assert names(detect(a, [XID], Params())) == ["n11"]
    assert detect(a, [XID], Params(device_evidence=False)).faulty == []


def test_a_lost_device_is_found_and_a_node_that_always_had_fewer_is_not() -> None:
    ports = np.full((16, TIMES.size), 8.0)
    ports[6, :] = 7.0  # a port out for repair since before the job
    ports[13, 150:] = 7.0  # a NIC the OS lost during the job
    gpus = np.full((16, TIMES.size), 8.0)
    gpus[0, 170:] = 7.0  # Xid 79: a GPU off the bus
    a = Aligned(TIMES, NODES, {PORT_COUNT: ports, GPU_COUNT: gpus}, STEP)
    found = detect(a, [GPU_COUNT, PORT_COUNT], Params())
    assert names(found) == ["n00", "n13"]
    assert device_loss(np.array([[8.0, 8], [7, 8], [8, np.nan]]))[1, 0] == 1.0


def test_two_culprits_on_one_metric_are_both_found() -> None:
    rng = np.random.default_rng(5)
    clock = busy(rng, 1410, 0.005)
    clock[3, 100:] *= 0.6  # a stuck clock
    clock[12, 160:] *= 0.7  # a second, later
    a = Aligned(TIMES, NODES, {CLOCK: clock}, STEP)
    assert names(detect(a, [CLOCK], Params())) == ["n03", "n12"]


# ---- Ethernet/RoCE links (node_exporter's netclass/netdev series) ----------------------------


def test_an_ethernet_nic_that_goes_down_is_found_like_a_lost_ib_port() -> None:
    # RoCE site: eight fabric NICs plus the management port up on every node
    up = np.full((16, TIMES.size), 9.0)
    up[4, :] = 8.0  # a NIC down since before the job (its reference)
    up[11, 140:] = 8.0  # operstate down during the job
    a = Aligned(TIMES, NODES, {"node_network_up": up}, STEP)
    assert names(detect(a, ["node_network_up"], Params())) == ["n11"]
    assert detect(a, ["node_network_up"], Params(device_evidence=False)).faulty == []


def test_carrier_flaps_on_one_node_are_found_and_rare_ones_everywhere_are_not() -> None:
    rng = np.random.default_rng(3)
    flaps = np.cumsum(rng.poisson(1 / 240, (16, TIMES.size)), axis=1).astype(float)
    a = Aligned(TIMES, NODES, {"node_network_carrier_changes_total": flaps}, STEP)
    assert detect(a, ["node_network_carrier_changes_total"], Params()).faulty == []
    flaps[9, 100:] += np.cumsum(np.full(TIMES.size - 100, 0.5))  # a flapping cable: 2/min
    a = Aligned(TIMES, NODES, {"node_network_carrier_changes_total": flaps}, STEP)
    found = detect(a, ["node_network_carrier_changes_total"], Params()).faulty
    assert [f.node for f in found] == ["n09"]
    assert found[0].first_detected >= TIMES[100]


def test_nvlink_crc_errors_on_one_node_are_found_and_a_healthy_background_is_not() -> None:
    # a site that enabled dcgm-exporter's NVLink error counters: healthy links log a CRC
    # error now and then; a degraded one logs 150 a second from its onset on (DCGM counts CRC
    # errors only from 100 a second: round 8's floor)
    crc = "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL"
    rng = np.random.default_rng(8)
    X = np.cumsum(rng.poisson(1 / 120, (16, TIMES.size)), axis=1).astype(float)
    assert detect(Aligned(TIMES, NODES, {crc: X}, STEP), [crc], Params()).faulty == []
    X[2, 120:] += np.cumsum(rng.poisson(150 * STEP, TIMES.size - 120))
    found = detect(Aligned(TIMES, NODES, {crc: X}, STEP), [crc], Params()).faulty
    assert [f.node for f in found] == ["n02"] and found[0].first_detected >= TIMES[120]


# ---- a node that left the job ----------------------------------------------------------------

UTIL = "DCGM_FI_DEV_GPU_UTIL"


def elastic(rng: np.random.Generator, leaver: int, at: int, job_goes_on: bool) -> Aligned:
    """16 nodes training; from step ``at`` node ``leaver``'s GPUs idle (cool, clocked down, at
    idle power).  The peers either go on at their level (an elastic job released it) or wait
    in NCCL: utilisation spins at 100 % while power and tensor duty collapse."""
    util = np.clip(busy(rng, 97.0, 0.01), 0, 100)
    power = busy(rng, 650.0, 0.02)
    tensor = busy(rng, 0.6, 0.02)
    clock = busy(rng, 1980.0, 0.003)
    for X, idle in ((util, 0.0), (power, 70.0), (tensor, 0.0), (clock, 345.0)):
        X[leaver, at:] = idle
    if not job_goes_on:
        peers = np.arange(len(NODES)) != leaver
        util[np.ix_(peers, np.arange(at, TIMES.size))] = 100.0
        power[np.ix_(peers, np.arange(at, TIMES.size))] = 120.0
        tensor[np.ix_(peers, np.arange(at, TIMES.size))] = 0.0
    return Aligned(TIMES, NODES, {UTIL: util, POWER: power, TENSOR: tensor, CLOCK: clock}, STEP)


def test_a_node_the_job_goes_on_without_left_it_and_is_no_fault() -> None:
    a = elastic(np.random.default_rng(5), leaver=6, at=120, job_goes_on=True)
    pri = [POWER, CLOCK, UTIL, TENSOR]
    res = detect(a, pri, Params())
    assert res.faulty == []
    assert list(res.departed) == ["n06"] and abs(res.departed["n06"] - TIMES[120]) <= 2 * STEP
    # without the rule its idle clock and utilisation convict it
    assert names(detect(a, pri, Params(departure=False))) == ["n06"]


def test_a_node_that_stops_while_the_job_waits_for_it_is_still_the_culprit() -> None:
    a = elastic(np.random.default_rng(6), leaver=6, at=120, job_goes_on=False)
    res = detect(a, [POWER, CLOCK, UTIL, TENSOR], Params())
    assert names(res) == ["n06"] and res.departed == {}


def test_hardware_evidence_on_a_node_that_left_still_stands() -> None:
    a = elastic(np.random.default_rng(7), leaver=6, at=120, job_goes_on=True)
    xid = np.zeros((len(NODES), TIMES.size))
    xid[6, 118:] = 79  # fallen off the bus, then released by the elastic job
    a = Aligned(TIMES, NODES, {**a.data, XID: xid}, STEP)
    res = detect(a, [POWER, CLOCK, UTIL, TENSOR, XID], Params())
    assert [(f.node, f.metric) for f in res.faulty] == [("n06", XID)]


def test_a_node_that_joins_a_running_job_is_judged_from_its_own_warm_up() -> None:
    # an elastic job takes n03 in at step 120 (30 min): idle until then while the job runs at
    # its level, then a minute of loading and it works like its peers -- a warmer GPU (+6 °C)
    # and its own clock offset, which its idle half hour cannot have shown
    rng = np.random.default_rng(8)
    util = np.clip(busy(rng, 97.0, 0.01), 0, 100)
    power = busy(rng, 650.0, 0.02)
    clock = busy(rng, 1980.0, 0.003)
    temp = busy(rng, 70.0, 0.01)
    util[3, :120], power[3, :120], clock[3, :120], temp[3, :120] = 0.0, 70.0, 345.0, 35.0
    util[3, 120:124] = 40.0  # loading
    clock[3, 124:] -= 60.0
    temp[3, 124:] += 6.0
    a = Aligned(TIMES, NODES, {UTIL: util, POWER: power, CLOCK: clock, TEMP: temp}, STEP)
    pri = [POWER, CLOCK, TEMP, UTIL]
    assert detect(a, pri, Params()).faulty == []
    # its reference would otherwise be its idle half hour: at work it reads as an outlier
    assert names(detect(a, pri, Params(departure=False))) == ["n03"]
    # and a real fault after it joined is still found
    clock[3, 180:] = 900.0  # clocked down by a power brake
    a = Aligned(TIMES, NODES, {UTIL: util, POWER: power, CLOCK: clock, TEMP: temp}, STEP)
    (f,) = detect(a, pri, Params()).faulty
    assert f.node == "n03" and f.metric == CLOCK and f.first_detected >= TIMES[180]


def test_a_late_starter_joins_when_it_matches_its_peers_not_the_step_before() -> None:
    # at a 60 s scrape, n05 starts 3 minutes after its peers, whose memory fills at step 5:
    # one step of lag would let its unfilled memory match the peers' median of step 4 and make
    # its idle level its reference (corpus v5, seen)
    times = 1e9 + 60.0 * np.arange(60)
    nodes = [f"n{i:02d}" for i in range(16)]
    rng = np.random.default_rng(9)
    mem = 946e9 + rng.normal(0, 2e9, (16, 60))
    mem[:, 5:] -= 270e9
    mem[5, 5:8] += 270e9  # loads 3 minutes late
    a = Aligned(times, nodes, {MEM: mem}, 60.0)
    assert detect(a, [MEM], Params()).faulty == []


def test_a_link_that_retrained_at_half_its_rate_is_found() -> None:
    rate = np.full((len(NODES), TIMES.size), 50e9)
    rate[2] = 25e9  # an HDR port in an NDR node since boot
    rate[9, 120:] = 25e9  # retrained at half width mid-job
    ports = np.full_like(rate, 4.0)  # as many IB ports each (the port count minder derives)
    a = Aligned(TIMES, NODES, {LINK_RATE: rate, PORT_COUNT: ports}, STEP)
    found = {f.node: f for f in detect(a, [LINK_RATE], Params()).faulty}
    assert found["n09"].first_detected >= TIMES[120] and found["n09"].caveat is None
    # round 19: half its peers' rate since boot is no offset -- a lower-generation cable, or
    # another fabric in the job: alerted with the bound's caveat, never drained
    assert found["n02"].caveat == BOUND_CAVEAT and set(found) == {"n02", "n09"}
    (f,) = detect(a, [LINK_RATE], Params(bounded_offsets=False)).faulty
    assert f.node == "n09"


def test_a_link_logging_errors_since_before_the_window_is_found() -> None:
    # n04's port logs ~14 receive errors a second from the window's first minutes: an error
    # rate is never a node's normal, so it is not taken into n04's reference
    rng = np.random.default_rng(10)
    errs = np.cumsum(rng.poisson(0.0005, (len(NODES), TIMES.size)), axis=1).astype(float)
    errs[4, 14:] += np.cumsum(np.full(TIMES.size - 14, 14.0 * STEP))
    a = Aligned(TIMES, NODES, {PORT_ERRS: errs}, STEP)
    assert names(detect(a, [PORT_ERRS], Params())) == ["n04"]
    assert detect(a, [PORT_ERRS], Params(event_reference=True)).faulty == []


def test_a_window_opened_mid_job_takes_its_reference_at_once() -> None:
    # the job runs at its level from the window's first sample; n11 clocks down 4 minutes in
    # (a power brake).  After a 5-minute warm-up, the reference span would be all fault
    rng = np.random.default_rng(11)
    util = np.clip(busy(rng, 97.0, 0.01), 0, 100)
    power = busy(rng, 650.0, 0.02)
    clock = busy(rng, 1980.0, 0.003)
    clock[11, 16:] = 1100.0
    power[11, 16:] = 420.0
    a = Aligned(TIMES, NODES, {UTIL: util, POWER: power, CLOCK: clock}, STEP)
    pri = [POWER, CLOCK, UTIL]
    (f,) = detect(a, pri, Params()).faulty
    assert f.node == "n11" and f.first_detected >= TIMES[16]
    late = Params(reference_start=300.0, bounded_offsets=False)
    assert detect(a, pri, late).faulty == []
    # round 17: a busy node's clock more than a quarter under its peers' is no offset even so;
    # found through the bound, with its caveat (alerted, never drained)
    r = detect(a, pri, Params(reference_start=300.0))
    assert [(f.node, f.caveat) for f in r.faulty] == [("n11", BOUND_CAVEAT)]


# ---- round 6: a lost scrape is missing data; a machine gone is evidence -----------------------


def scrape_timeouts(rng: np.random.Generator) -> Aligned:
    """16 nodes training; from step 100 to 160 three nodes' dcgm-exporter scrapes time out
    (dcgm-exporter issue #607): 30-70 % of them lost, in runs of up to 8 scrapes (2 minutes),
    while their node_exporter answers every scrape."""
    power = busy(rng, 650.0, 0.02)
    clock = busy(rng, 1980.0, 0.003)
    load = busy(rng, 40.0, 0.03)
    lost = np.zeros(power.shape, bool)
    for i in (1, 7, 13):
        lost[i, 100:160] = rng.random(60) < 0.5
        lost[i, 120:128] = True  # one long run: 2 minutes without a DCGM sample
    for X in (power, clock):
        X[lost] = np.nan
    return Aligned(TIMES, NODES, {POWER: power, CLOCK: clock, "node_load1": load}, STEP)


def test_lost_scrapes_on_some_nodes_are_missing_data_not_evidence() -> None:
    rng = np.random.default_rng(12)
    a = scrape_timeouts(rng)
    pri = [POWER, CLOCK, "node_load1"]
    assert detect(a, pri, Params()).faulty == []
    # before round 6 every absence was as far from the peers as a node can be (and before round
    # 8 a window counted whatever its own step: the present samples between lost ones now
    # break the run too)
    assert detect(a, pri, Params(machine_absence=False, step_support=False)).faulty != []


def test_a_machine_that_stops_reporting_is_still_found() -> None:
    rng = np.random.default_rng(13)
    a = scrape_timeouts(rng)
    for X in a.data.values():
        X[8, 150:] = np.nan  # n08 answers neither exporter from step 150 on
    (f,) = detect(a, [POWER, CLOCK, "node_load1"], Params()).faulty
    assert f.node == "n08" and f.first_detected >= TIMES[150]


def test_machine_gone_needs_every_exporter_silent() -> None:
    power = np.ones((3, 4))
    load = np.ones((3, 4))
    power[0, 1] = np.nan  # dcgm-exporter silent, node_exporter answers: a lost scrape
    power[1, 2:] = np.nan
    load[1, 2:] = np.nan  # both silent: the machine
    a = Aligned(TIMES[:4], NODES[:3], {POWER: power, "node_load1": load}, STEP)
    from aegis_slurm.metrics.detect import machine_gone, peer_deviation, window_distance

    gone = machine_gone(a)
    assert gone.tolist() == [[0, 0, 0, 0], [0, 0, 1, 1], [0, 0, 0, 0]]
    dev, _ = peer_deviation(power, gone=gone)
    assert np.isnan(dev[0, 1]) and dev[1, 2] == 1.0
    # a window holding one missing sample is judged on the samples it has
    d = window_distance(np.array([[0.04, np.nan, 0.04, np.nan]]), 2)
    np.testing.assert_allclose(d, [[np.nan, 0.2, 0.2, 0.2]])
    assert np.isnan(window_distance(np.array([[0.04, np.nan, np.nan]]), 2)[0, 2])


def test_the_last_device_lost_counts_zero_not_missing() -> None:
    # a single-HCA node loses its only port: count by (instance) returns no series for it,
    # while its node_exporter answers; PromQL's count of nothing is 0 devices, a loss
    ports = np.full((16, TIMES.size), 1.0)
    ports[5, 150:] = np.nan
    load = busy(np.random.default_rng(14), 40.0, 0.03)
    a = Aligned(TIMES, NODES, {PORT_COUNT: ports, "node_load1": load}, STEP)
    assert names(detect(a, [PORT_COUNT, "node_load1"], Params())) == ["n05"]


# ---- round 6: HBM (GPU memory) temperature ----------------------------------------------------


def test_a_gpu_whose_memory_runs_hot_is_found() -> None:
    # DCGM field 252: one GPU's HBM climbs +28 degC to ~100 degC and throttles (reason 0x40);
    # the die temperature and SM clock stay where they were
    memtemp = "DCGM_FI_DEV_MEMORY_TEMP"
    from aegis_slurm.metrics.catalog import spec_for

    spec = spec_for(memtemp)  # the node's hottest HBM, on its physical range
    assert (spec.agg, spec.lo, spec.hi, spec.scale, spec.evidence) == (
        "max",
        20,
        110,
        "physical",
        "local",
    )
    rng = np.random.default_rng(15)
    X = 72.0 + rng.normal(0, 0.6, (len(NODES), TIMES.size)) + rng.normal(0, 2.5, (16, 1))
    X[6, 130:] += np.clip((np.arange(TIMES.size - 130) * STEP) / 180.0, 0, 1) * 28
    a = Aligned(TIMES, NODES, {memtemp: X}, STEP)
    (f,) = detect(a, [memtemp], Params()).faulty
    assert f.node == "n06" and f.first_detected >= TIMES[130]


def test_dcgm_blank_family_is_dropped_for_memory_temperature() -> None:
    import polars as pl

    from aegis_slurm.metrics.align import clean

    blanks = [
        9223372036854775792.0,  # DCGM_INT64_BLANK
        9223372036854775793.0,  # NOT_FOUND
        9223372036854775794.0,  # NOT_SUPPORTED (dcgm-exporter's README sample)
        9223372036854775795.0,  # NOT_PERMISSIONED
        140737488355328.0,  # DCGM_FP64_BLANK
        140737488355331.0,  # FP64 NOT_PERMISSIONED
    ]
    df = pl.DataFrame(
        {
            "time": pl.datetime_range(
                pl.datetime(2026, 1, 1), pl.datetime(2026, 1, 1, 0, 1, 45), "15s", eager=True
            ),
            "node": ["gpu1"] * 8,
            "metric": ["DCGM_FI_DEV_MEMORY_TEMP"] * 8,
            "value": [*blanks, 71.0, 100.0],
        }
    )
    out, dropped = clean(df)
    assert out["value"].to_list() == [71.0, 100.0]
    assert dropped["DCGM blank value (no reading)"] == 6


def test_a_dcgm_exporter_that_stops_for_good_is_still_evidence() -> None:
    # a GSP hang or a GPU off the bus on a one-GPU node: its dcgm-exporter stops answering from
    # step 150 to the end while node_exporter answers; a run of lost scrapes that ends is not
    rng = np.random.default_rng(16)
    a = scrape_timeouts(rng)
    for m in (POWER, CLOCK):
        a.data[m][8, 150:] = np.nan
    (f,) = detect(a, [POWER, CLOCK, "node_load1"], Params()).faulty
    assert f.node == "n08" and f.first_detected >= TIMES[150]
    from aegis_slurm.metrics.detect import ended

    X = np.array([[1.0, np.nan, 1.0, np.nan, np.nan], [np.nan] * 5])
    assert ended(X).tolist() == [[0, 0, 0, 1, 1], [1, 1, 1, 1, 1]]
