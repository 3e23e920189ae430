"""Hostile review (session 16) of round 20 (9c1ebbd: ``DCGM_FI_DEV_MEM_CLOCK`` Min-Max scaled
over 0 .. the data's top and marked ``pinned``; ``Params.pair_distance``: in a two-node job a
one-sided reading's squared distance to the pair's median is multiplied by 4, capped at 1).

Each ``test_<n>_`` is finding n and asserts what an SRE needs; ``xfail(strict=True)`` where
9c1ebbd fails it.  ``test_e<n>_`` pass: evidence that the scenario reads as described.
``test_ok_`` pass: attacks the commit withstands.  Ranked by severity.

All five fixed the same session, before corpus v18 was read (markers removed, evidence
restated): a pair's node is measured against the other's nearest reading (``pair_gap``,
``pair_other``: a lost scrape is no "median" of the node's own) and only where its own
uncorrected reading lies on the fault's side of the other's (1, 2, 5); a busy-only reading's
healthy side is no evidence whatever the utilisation, its fault side only where the node's
GPUs are known to work -- a node without the series at all leaves the job two-sided (4); a
finding on a reading that depends on the GPU model or fabric (``offset_bound`` or ``pinned``)
for a node judged without a reference of its own carries ``NO_REFERENCE_CAVEAT``: alerted,
never drained (3).

Findings 1 and 2 have one root cause (ranked 1-5 by severity: wrong drainable verdicts
first, then missed faults).  ``pair_distance`` rests on "of a pair, the lower node is the
one that moved -- the other cannot have risen above that value" (catalog ``pinned``).  That
holds for *raw* readings; the detector compares readings *less each node's reference offset*
(:func:`detect.corrected`).  A node whose reading was low during its reference span (a lower
P-state, a NIC link down when the job started) and later comes back up is corrected *above*
the SKU's ceiling -- it rose above "that value" by exactly the offset it shed.  The one-sided
test then zeroes it as the healthy side, the pair's mean sits half its rise above the
unchanged node, and ``pair_distance`` quadruples that node's distance to the full rise.  In a
job of three or more the median ignores the one node that moved up, and nothing is found; in
a pair the node that never moved is reported, with no caveat.

* 1 (healthy node FAULTY and drainable; the real culprit never reported).  A pair of HGX H100
  SXM5 nodes (memory clock 2,619 MHz, ``nvidia-smi -q`` "Max Clocks: Memory"; A100 80 GB
  1,593, V100 877 -- the figures of tests/metrics/test_round20.py).  n00's slowest GPU starts
  the job stuck in a lower P-state at 80 % of its memory clock -- "a GPU left in a lower
  P-state after a transient", the catalog's own round-12 scenario -- and so is its own
  normal through the reference span; at minute 20 it recovers (the GPU idles through the
  first checkpoint and comes back in P0, or a site's clock-reset cron clears a stale
  ``nvidia-smi -lmc``).  n01 holds 2,619 MHz throughout.  ``minder`` reports **n01** on
  ``DCGM_FI_DEV_MEM_CLOCK`` at minute ~24 with no caveat and no ``job_can_cause``; n00,
  the one GPU that ran slow, is never reported.  ``minder watch`` with ``min_nodes = 2``
  (the config accepts any ``min_nodes >= 2``; a site with two-node jobs sets it) gives n01 the bare
  ``"alert"`` -- the action it *drains* with ``drain = true``.  Same at every SKU from a
  15 % drop (85 %: 2,226 / 1,354 / 745 MHz); a trio, and this commit's parent (0..4 GHz, the
  pair's median), stay quiet.  Correct: a node whose reading never left its own reference
  is no evidence; the node that *moved* is n00, and moving up is no fault.  Suggested fix: in
  :func:`detect.pair_distance` (or in the one-sided zeroing) measure a pair's node against
  the other only where the other is at or under its *own* reference (its raw reading minus
  its offset is not above the peers' level by more than the threshold) -- otherwise keep
  the median, or judge each node of a pair against its own reference (its change since the
  span) rather than against the other; and the catalog's ``pinned`` comment should say the
  premise holds of raw readings, not corrected ones.

* 2 (healthy node FAULTY and drainable).  The same on the hardware gauges, which this commit
  put under ``pair_distance`` too: ``instance:node_network_speed_bytes:sum`` (the summed
  speed of the node's physical NICs, ``healthy_high``).  Two nodes with four 200 GbE NICs
  each (25e9 B/s); one of n00's is down when the job starts (a switch port in maintenance:
  node_exporter's ``speed_bytes`` reads -1, counted 0) and comes up at minute 20 -- "a port
  that came up mid-job", the very case :func:`detect.deviation` names as no fault.  n01,
  whose NICs never changed, is reported on the NIC speed, no caveat.  With three, five or
  six NICs per node the same (the parent found it with three: a 33 % step; from four NICs on
  it is this commit's).  A trio is quiet; the parent is quiet from four NICs.  Correct and fix
  as in 1.  (The link rate and the port state fail the same way in a pair, but already
  before this commit -- a port's rate and state move in factors of two, above twice the
  threshold; not listed as this commit's.)

* 3 (healthy node FAULTY, no caveat, in a job of any size; watch alerts it, never drains).
  Sites put A100 40 GB (HBM2, 1,215 MHz) and A100 80 GB (HBM2e, 1,593 MHz) nodes in one
  partition -- the catalog's own round-17 note: models mixed in one partition differ in the
  memory clock by 24-39 %, which is why the memory clock has no ``offset_bound``.  A 40 GB
  node's constant 378 MHz is normally its reference offset; but where its dcgm-exporter first
  answers after the reference span (minute 12: "an exporter restarted by the next
  configuration run", as ``Params.replacements`` puts it) the node has no reference and is
  judged uncorrected -- on 0..4 GHz that was 9.5 %, under the threshold; on the SKU's own
  0..1,593 MHz it is 23.7 %, and ``minder`` (``--json``) reports it FAULTY on
  ``DCGM_FI_DEV_MEM_CLOCK`` with no caveat, in jobs of 3 and 8 nodes alike (``watch``, whose
  stored reference lacks the node, alerts it "no per-node reference for this node" and does
  not drain: ``test_e3_watch_...``).  Correct: a node held under
  its peers from its first sample without a reference is the bound's case -- another GPU
  model reads the same as a stuck P-state -- alerted with :data:`detect.BOUND_CAVEAT`, never
  a verdict.  Suggested fix: on a metric where SKUs differ (the memory clock), a node judged
  without its offset whose reading is constant from its first sample gets the bound's caveat
  (as ``with_caveats`` does for ``beyond``), or its reference is taken from its own first
  samples once it answers (as a late joiner's is); better, group peers by dcgm-exporter's
  ``modelName`` label.

* 4 (a real fault missed; a regression for the half-speed H100).  A pair's memory clock
  stuck low -- the fault round 20 was written for -- where one node's utilisation is blank
  one sample in four.  DCGM does return blanks for the utilisation while its other fields
  report (NVIDIA/DCGM#202: the utilisation fields 203/204 read DCGM_FP64_BLANK after an Xid 31
  while the others report; dcgm-exporter drops a blank, ``align`` too), and the third review
  of session 15 took the same one-in-four blank as its scenario: since then a step where any
  node's utilisation is unknown is judged two-sided.  :func:`detect.deviation` sets
  ``one_sided = spec.pinned`` whatever ``known`` says, so at those steps ``pair_distance``
  quadruples the *healthy* node's two-sided distance too; its window RMS (one step in four at
  the full gap) crosses the threshold in every window, both nodes are candidates, and a pair's
  ``max_share`` (one candidate) drops both.  An H100 at half its memory clock (1,310 MHz, round
  12's "runs its memory at half speed") is found by the parent and missed now; a V100 at 614
  MHz (corpus v17's, which round 20 cites) is found with the pair's median on the new scale
  and missed with ``pair_distance``.  Correct: the stuck node found.  Suggested fix: quadruple
  only where the side was judged -- ``np.where(known, pair_distance(d, N), d)`` in the
  ``sided`` branch (``known`` is already at hand), so a two-sided step keeps the pair's
  median as before round 20.

* 5 (a real fault missed; round 20's own target, not a regression -- the parent missed it
  too).  The same pair, stuck at 80 % (test_round20.py's case), where the healthy node's
  dcgm-exporter loses one scrape in eight (node_exporter answering: a scrape timeout, not a
  machine gone).  At the lost step the pair has one reporting node, a quorum of 0.5 judges
  the step, and the "median" is the culprit's own reading; one step either side ``lag = 1``
  measures the culprit against that median (:func:`detect.peer_deviation`), so three steps in
  eight read 0 and the window RMS stays under the threshold (0.1 < 0.12) at every SKU.
  Correct: found, as it is without the lost scrapes.  Suggested fix: in a pair, a step with
  one node reporting is not judged, and the lag never borrows the median of a step with fewer
  reporting nodes than the step measured; ``pair_distance``'s ``both`` mask is the place that
  already knows it.

Sources for the clocks (``nvidia-smi -q -d CLOCK``): A100 80 GB 1,593 MHz (NVIDIA/DCGM#152),
H200 3,201 MHz (awslabs/amazon-eks-ami#1985), GDDR6X 9,501 / GDDR6 7,601 MHz under CUDA
(noonghunna/club-3090#107); H100 SXM5 2,619 and V100 877 MHz as tests/metrics/test_round20.py.

Withstood (``test_ok_``): a pair's memory clock stuck at 80 % from minute 15 is found on the
stuck node at every SKU, also with the healthy node losing one scrape in twenty; an elastic
pair's released node (utilisation 0, memory clock at P8's 405 MHz) and a pair whose GPUs all
idle all window stay quiet; a pair where one node never exports the memory clock (a DCGM
field set without it) is quiet and does not crash; a memory clock reading 0 everywhere (a GPU
that does not report it) does not crash; both nodes of a pair ticking PCIe replays under
DCGM's 8-a-minute limit, one four times the other's rate, stay quiet (the events scale's
floor, not ``pair_distance``, decides); ``--json`` keeps its keys.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace

import numpy as np
import pytest
from metrics.conftest import served_prometheus

from aegis_slurm.metrics import catalog, to_json
from aegis_slurm.metrics.align import Aligned
from aegis_slurm.metrics.catalog import NIC_SPEED, spec_for
from aegis_slurm.metrics.config import MinderConfig, WatchConfig
from aegis_slurm.metrics.detect import (
    NO_REFERENCE_CAVEAT,
    Params,
    Result,
    detect,
    deviation,
    window_distance,
)
from aegis_slurm.metrics.slurmjob import JobWindow
from aegis_slurm.metrics.watch import run_pass
from review.passes import scrapes, watch_actions

STEP = 15.0
MIN = 60.0
T = 200
TIMES = 1.0e9 + STEP * np.arange(T)  # 50 minutes
UTIL = "DCGM_FI_DEV_GPU_UTIL"
MEMCLK = "DCGM_FI_DEV_MEM_CLOCK"
REPLAY = "DCGM_FI_DEV_PCIE_REPLAY_COUNTER"
LOAD = "node_load1"
#: "Max Clocks: Memory" (MHz): H100 SXM5 HBM3, A100 80 GB SXM4 HBM2e, V100 SXM2 HBM2
SKUS = {"h100": 2619.0, "a100_80": 1593.0, "v100": 877.0}
NIC200 = 200e9 / 8  # one 200 GbE NIC, B/s (node_exporter's speed_bytes)


def _m(a: float) -> int:
    return round(a * 60 / STEP)


def _nodes(n: int) -> list[str]:
    return [f"n{i:02d}" for i in range(n)]


def _found(r: Result) -> list[tuple[str, str, str | None]]:
    return [(f.node, f.metric, f.caveat) for f in r.faulty]


def _memclk_recovers(ceiling: float, n: int = 2, share: float = 0.8) -> Aligned:
    """``n`` busy nodes at the SKU's memory clock; n00's slowest GPU at ``share`` of it from
    the job's start (its reference span included) until minute 20, then at the ceiling."""
    util = np.full((n, T), 98.0)
    util[:, : _m(2)] = 5.0
    clock = np.full((n, T), ceiling)
    clock[0, : _m(20)] = round(share * ceiling)
    return Aligned(TIMES, _nodes(n), {UTIL: util, MEMCLK: clock}, STEP)


def _memclk_stuck(ceiling: float, n: int = 2, share: float = 0.8) -> Aligned:
    """``n`` busy nodes; n01's slowest GPU stuck at ``share`` of the ceiling from minute 15."""
    util = np.full((n, T), 98.0)
    util[:, : _m(2)] = 5.0
    clock = np.full((n, T), ceiling)
    clock[1, _m(15) :] = round(share * ceiling)
    return Aligned(TIMES, _nodes(n), {UTIL: util, MEMCLK: clock}, STEP)


def _parent(monkeypatch: pytest.MonkeyPatch) -> Params:
    """9c1ebbd's parent: the memory clock on 0..4 GHz, not pinned; a pair's median."""
    monkeypatch.setitem(catalog.BY_NAME, MEMCLK, replace(spec_for(MEMCLK), hi=4000.0, pinned=False))
    return Params(pair_distance=False)


# ---- finding 1: a pair's memory clock -- the node that never moved is reported -------------


@pytest.mark.parametrize("sku", sorted(SKUS))
def test_1_a_pairs_node_whose_memory_clock_never_moved_is_not_reported(sku: str) -> None:
    r = detect(_memclk_recovers(SKUS[sku]), [UTIL, MEMCLK], Params())
    assert "n01" not in [f.node for f in r.faulty]


@pytest.mark.parametrize("sku", sorted(SKUS))
def test_e1_the_unchanged_node_never_moved_and_the_pair_stays_quiet(sku: str) -> None:
    """Fixed the same session: a pair's node is measured against the other only where its own
    readings, uncorrected, put it under the other's (``detect.deviation``)."""
    a = _memclk_recovers(SKUS[sku])
    assert np.all(a.data[MEMCLK][1] == SKUS[sku])  # n01's raw reading: the ceiling throughout
    assert detect(a, [UTIL, MEMCLK], Params()).faulty == []
    assert detect(_memclk_recovers(SKUS[sku], share=0.85), [MEMCLK, UTIL]).faulty == []
    assert detect(_memclk_recovers(SKUS[sku], n=3), [UTIL, MEMCLK], Params()).faulty == []
    assert detect(a, [UTIL, MEMCLK], Params(pair_distance=False)).faulty == []


# ---- finding 1 through watch: min_nodes = 2, dcgm-exporter's series, a real Prometheus -----


def _dcgm_exposition(t: float) -> str:
    """Job W: w00, w01 (two H100 GPUs each, as dcgm-exporter labels them); w00's GPU 1 at
    2,095 MHz (80 %) from the job's start to minute 20; utilisation 98 % after minute 2."""
    top = SKUS["h100"]
    lines = []
    for metric in (UTIL, MEMCLK):
        lines.append(f"# TYPE {metric} gauge")
        for host in ("w00", "w01"):
            for g in (0, 1):
                lab = f'gpu="{g}",UUID="GPU-{host}-{g}",Hostname="{host}",job="dcgm"'
                slow = host == "w00" and g == 1

                def value(s: float, slow: bool = slow, metric: str = metric) -> float:
                    if metric == UTIL:
                        return 5.0 if s < t + 2 * MIN else 98.0
                    return round(0.8 * top) if slow and s < t + 20 * MIN else top

                lines += scrapes(metric, lab, value, t - 10 * MIN, t + 41 * MIN, STEP)
        # job A (finding 3): a00, a01 A100 80 GB, a02 an A100 40 GB whose dcgm-exporter
        # answers from minute 12
        for host, clock in (("a00", SKUS["a100_80"]), ("a01", SKUS["a100_80"]), ("a02", A100_40)):
            lab = f'gpu="0",UUID="GPU-{host}-0",Hostname="{host}",job="dcgm"'

            def busy(s: float, clock: float = clock, metric: str = metric) -> float:
                if metric == UTIL:
                    return 5.0 if s < t + 2 * MIN else 98.0
                return clock

            first = t + 12 * MIN if host == "a02" else t - 10 * MIN
            lines += scrapes(metric, lab, busy, first, t + 41 * MIN, STEP)
    lines.append(f"# TYPE {LOAD} gauge")
    for host in ("w00", "w01", "a00", "a01", "a02"):
        lab = f'instance="{host}:9100",job="node"'
        lines += scrapes(LOAD, lab, lambda s: 30.0, t - 10 * MIN, t + 41 * MIN, STEP)
    return "\n".join(lines) + "\n# EOF\n"


@pytest.fixture(scope="module")
def prom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, float]]:
    t = (time.time() // 3600 - 3) * 3600  # the job started 3 h ago
    with served_prometheus(_dcgm_exposition(t), tmp_path_factory.mktemp("s16prom")) as url:
        yield url, t


def _pair_watch(prom: tuple[str, float], jid: str) -> dict[str, list[str]]:
    """The real ``run_pass`` with ``min_nodes = 2`` (drain off: a finding watch would drain
    shows as the bare ``"alert"``) at minutes 22-32 of the job, one state throughout."""
    url, t = prom
    cfg = MinderConfig(watch=WatchConfig(drain=False, syslog=False, min_nodes=2))
    return watch_actions(url, ["w00", "w01"], t, list(range(22, 33)), jid, cfg)


def test_1_watch_does_not_drain_the_pairs_unchanged_node(prom) -> None:
    assert "alert" not in _pair_watch(prom, "8101").get("w01", [])


def test_e1_watch_judges_the_pair_with_its_stored_reference(prom) -> None:
    # the stored reference (the job's minutes 5-10: w00 slow) corrects w00 above the ceiling
    # once it recovers; neither node is alerted
    assert _pair_watch(prom, "8102") == {}


def test_e3_watch_alerts_the_late_a100_40gb_node_without_draining_it(prom) -> None:
    url, t = prom
    cfg = MinderConfig(watch=WatchConfig(drain=False, syslog=False))
    state: dict = {}
    got: dict[str, list[str]] = {}
    for m in range(13, 33):
        now = t + m * MIN
        job = JobWindow("8301", ["a00", "a01", "a02"], t, now)
        rep = run_pass(cfg, url, [job], now, state)
        assert rep.jobs_checked == 1 and rep.prometheus_ok, rep.errors
        for inc in rep.new:
            got.setdefault(inc["node"], []).append(inc["action"])
    assert got == {"a02": ["alert (no per-node reference for this node)"]}


# ---- finding 2: a pair's NIC speed -- a NIC coming up mid-job reports the other node -------


def _nics(per_node: int, n: int = 2) -> Aligned:
    """``n`` nodes with ``per_node`` 200 GbE NICs; one of n00's down (0) until minute 20."""
    X = np.full((n, T), per_node * NIC200)
    X[0, : _m(20)] = (per_node - 1) * NIC200
    return Aligned(TIMES, _nodes(n), {NIC_SPEED: X}, STEP)


@pytest.mark.parametrize("per_node", [4, 5, 6])
def test_2_a_nic_coming_up_mid_job_reports_no_node_of_the_pair(per_node: int) -> None:
    assert detect(_nics(per_node), [NIC_SPEED], Params()).faulty == []


@pytest.mark.parametrize("per_node", [4, 5, 6])
def test_e2_the_node_whose_nics_never_changed_is_no_longer_reported(per_node: int) -> None:
    a = _nics(per_node)
    assert np.all(a.data[NIC_SPEED][1] == per_node * NIC200)  # n01 never changed
    # a pair measured node to node only where the uncorrected speeds put the node under the
    # other's: once n00's NIC is up, the two read the same
    assert detect(a, [NIC_SPEED], Params(pair_distance=False)).faulty == []
    assert detect(_nics(per_node, n=3), [NIC_SPEED], Params()).faulty == []


# ---- finding 3: an A100 40 GB node among 80 GB nodes, its exporter late: a verdict ------------


#: "Max Clocks: Memory": A100 40 GB SXM4 (HBM2) -- an A100 80 GB SXM4 runs 1,593
A100_40 = 1215.0


def _mixed_a100(n: int, late: float) -> Aligned:
    """``n`` busy A100 nodes, the last an A100 40 GB among 80 GB ones, whose dcgm-exporter
    answers from minute ``late`` on (node_exporter all along)."""
    util = np.full((n, T), 98.0)
    util[:, : _m(2)] = 5.0
    clock = np.full((n, T), SKUS["a100_80"])
    clock[-1] = A100_40
    util[-1, : _m(late)] = np.nan
    clock[-1, : _m(late)] = np.nan
    return Aligned(TIMES, _nodes(n), {UTIL: util, MEMCLK: clock, LOAD: np.full((n, T), 30.0)}, STEP)


@pytest.mark.parametrize("n", [3, 8])
def test_3_another_a100_model_without_its_reference_is_no_drainable_verdict(n: int) -> None:
    r = detect(_mixed_a100(n, 12.0), [UTIL, MEMCLK, LOAD], Params())
    assert all(f.caveat is not None for f in r.faulty if f.metric == MEMCLK)


@pytest.mark.parametrize("n", [3, 8])
def test_e3_found_with_the_no_reference_caveat_quiet_on_the_parent_and_with_its_reference(
    n: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = _mixed_a100(n, 12.0)
    r = detect(a, [UTIL, MEMCLK, LOAD], Params())
    assert _found(r) == [(_nodes(n)[-1], MEMCLK, NO_REFERENCE_CAVEAT)]  # alerted, not drained
    assert round(r.faulty[0].score, 3) == round(1 - A100_40 / SKUS["a100_80"], 3)  # 0.237
    assert to_json(r)["faulty"][0]["caveat"] == NO_REFERENCE_CAVEAT
    # its exporter answering through the reference span (minutes 5-10): its offset, quiet
    assert detect(_mixed_a100(n, 0.0), [UTIL, MEMCLK, LOAD], Params()).faulty == []
    # 9c1ebbd's parent read the 378 MHz on 0..4 GHz: 9.5 %, under the threshold
    assert detect(a, [UTIL, MEMCLK, LOAD], _parent(monkeypatch)).faulty == []


# ---- finding 4: a pair's stuck clock missed where a utilisation sample is blank ------------


def _blank_util(a: Aligned, every: int) -> Aligned:
    """``a`` with n00's utilisation blank one sample in ``every`` (its memory clock kept)."""
    a.data[UTIL][0, np.arange(T) % every == 1] = np.nan
    return a


#: (SKU, share of its memory clock the stuck GPU holds): an H100 at half speed (round 12's
#: "runs its memory at half speed"), a V100 at 614 MHz (corpus v17's, which round 20 names)
MISSED = [("h100", 0.5), ("v100", 0.7)]


@pytest.mark.parametrize(("sku", "share"), MISSED)
def test_4_a_pairs_stuck_memory_clock_is_found_with_a_blank_utilisation(
    sku: str, share: float
) -> None:
    a = _blank_util(_memclk_stuck(SKUS[sku], share=share), 4)
    assert _found(detect(a, [UTIL, MEMCLK], Params())) == [("n01", MEMCLK, None)]


@pytest.mark.parametrize(("sku", "share"), MISSED)
def test_e4_a_blank_utilisation_leaves_the_healthy_side_benign(sku: str, share: float) -> None:
    """Fixed the same session: the healthy side is no evidence whatever the utilisation, the
    fault side only where the node's GPUs are known to work (``detect.judged_side``)."""
    a = _blank_util(_memclk_stuck(SKUS[sku], share=share), 4)
    p = Params()
    dev, _, _ = deviation(a, MEMCLK, p)
    dist = window_distance(dev, round(p.window / STEP))
    after = slice(_m(22), None)
    assert not (dist[0, after] > p.threshold).any()  # the healthy node: never a candidate
    assert (dist[1, after] > p.threshold).all()
    plain = _memclk_stuck(SKUS[sku], share=share)
    assert _found(detect(plain, [UTIL, MEMCLK], Params())) == [("n01", MEMCLK, None)]


# ---- finding 5: a pair's stuck clock missed when the healthy node loses scrapes -------------


def _lossy(a: Aligned, every: int) -> Aligned:
    """``a`` with node_exporter answering on both nodes and n00's dcgm-exporter scrape lost
    one time in ``every`` (every DCGM series of n00 missing at that step)."""
    for m in (UTIL, MEMCLK):
        a.data[m][0, np.arange(T) % every == 1] = np.nan
    a.data[LOAD] = np.full((2, T), 30.0)
    return a


@pytest.mark.parametrize("sku", sorted(SKUS))
def test_5_a_pairs_stuck_memory_clock_is_found_through_lost_scrapes(sku: str) -> None:
    a = _lossy(_memclk_stuck(SKUS[sku]), 8)
    assert _found(detect(a, [UTIL, MEMCLK, LOAD], Params())) == [("n01", MEMCLK, None)]


def test_e5_the_culprit_is_measured_against_the_others_nearest_reading() -> None:
    """Fixed the same session: a pair's node is measured against the other's reading (the
    nearest within the lag, ``detect.pair_gap``), never against a median of its own."""
    a = _lossy(_memclk_stuck(SKUS["h100"]), 8)
    dev, _, _ = deviation(a, MEMCLK, Params())
    gap = np.flatnonzero(np.arange(T) % 8 == 1)
    gap = gap[gap > _m(22)][:-1]
    full = dev[1, gap + 3]
    assert np.all(full > 0.0)
    # at the lost step and either side of it, the full gap to the other's nearest reading
    for k in (-1, 0, 1):
        np.testing.assert_allclose(dev[1, gap + k], full)


# ---- withstood ---------------------------------------------------------------------------


@pytest.mark.parametrize("sku", sorted(SKUS))
def test_ok_a_pairs_stuck_memory_clock_is_found_on_the_stuck_node(sku: str) -> None:
    a = _memclk_stuck(SKUS[sku])
    assert _found(detect(a, [UTIL, MEMCLK], Params())) == [("n01", MEMCLK, None)]
    # the healthy node's dcgm-exporter losing a scrape now and then (one in twenty)
    b = _lossy(_memclk_stuck(SKUS[sku]), 20)
    assert _found(detect(b, [UTIL, MEMCLK, LOAD], Params())) == [("n01", MEMCLK, None)]


def test_ok_idle_gpus_in_a_pair_stay_quiet() -> None:
    # an elastic pair's released node: utilisation 0, memory clock at P8's 405 MHz
    util = np.full((2, T), 98.0)
    clock = np.full((2, T), SKUS["h100"])
    util[1, _m(20) :] = 0.0
    clock[1, _m(20) :] = 405.0
    a = Aligned(TIMES, _nodes(2), {UTIL: util, MEMCLK: clock}, STEP)
    assert detect(a, [MEMCLK], Params()).faulty == []
    # the whole pair idle all window: the data's top is P8's clock, nothing blown up
    idle = Aligned(TIMES, _nodes(2), {UTIL: np.zeros((2, T)), MEMCLK: np.full((2, T), 405.0)}, STEP)
    idle.data[MEMCLK][1, _m(20) :] = 210.0
    assert detect(idle, [UTIL, MEMCLK], Params()).faulty == []


def test_ok_missing_and_zero_memory_clocks_do_not_crash() -> None:
    util = np.full((2, T), 98.0)
    # one node's DCGM field set without the memory clock
    clock = np.full((2, T), SKUS["a100_80"])
    clock[1] = np.nan
    a = Aligned(TIMES, _nodes(2), {UTIL: util, MEMCLK: clock}, STEP)
    assert detect(a, [UTIL, MEMCLK], Params()).faulty == []
    # a GPU reporting 0 for the field everywhere
    z = Aligned(TIMES, _nodes(2), {UTIL: util, MEMCLK: np.zeros((2, T))}, STEP)
    assert detect(z, [UTIL, MEMCLK], Params()).faulty == []


def test_ok_benign_replays_on_both_nodes_of_a_pair_stay_quiet() -> None:
    # cumulative PCIe replays: n00 at 6 a minute, n01 at 1.5 a minute -- both under DCGM's
    # 8-a-minute limit (the catalog's floor), one four times the other's rate
    rate = np.array([[6.0 / 60], [1.5 / 60]])
    C = np.floor(rate * (TIMES - TIMES[0])[None, :])
    a = Aligned(TIMES, _nodes(2), {REPLAY: C}, STEP)
    assert detect(a, [REPLAY], Params()).faulty == []


def test_ok_json_keeps_its_keys() -> None:
    r = detect(_memclk_stuck(SKUS["h100"]), [UTIL, MEMCLK], Params())
    (j,) = to_json(r)["faulty"]
    assert set(j) >= {"node", "first_detected", "metric", "score", "job_can_cause", "caveat"}


def test_ok_a_pairs_stale_hardware_xid_overwritten_reports_neither_node() -> None:
    # n00 holds a stale Xid 79 from before the job (its reference); at minute 20 a user's MMU
    # fault (Xid 31, an application code) replaces DCGM's last Xid: n00 moved to the healthy
    # side, and pair_distance does not make n01 its pair's culprit
    X = np.zeros((2, T))
    X[0] = 79.0
    X[0, _m(20) :] = 31.0
    a = Aligned(TIMES, _nodes(2), {"DCGM_FI_DEV_XID_ERRORS": X}, STEP)
    assert detect(a, ["DCGM_FI_DEV_XID_ERRORS"], Params()).faulty == []
