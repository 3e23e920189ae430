"""Round 20 (designed on corpora v16 and v17, seen): the memory clock on its own SKU's scale
(0 to the data's top, not a fixed 4 GHz), and a pair's hardware evidence measured against the
other node (``Params.pair_distance``; catalog ``pinned`` for the memory clock)."""

from __future__ import annotations

import numpy as np
import pytest

from aegis_slurm.metrics.align import Aligned
from aegis_slurm.metrics.catalog import spec_for
from aegis_slurm.metrics.detect import Params, detect, pair_gap, working_alone

STEP = 15.0
TIMES = 1e9 + STEP * np.arange(160)  # 40 min
UTIL = "DCGM_FI_DEV_GPU_UTIL"
MEMCLK = "DCGM_FI_DEV_MEM_CLOCK"
SM = "DCGM_FI_DEV_SM_CLOCK"
AVAIL = "node_memory_MemAvailable_bytes"
XID = "DCGM_FI_DEV_XID_ERRORS"
#: memory clocks under load (MHz), as ``nvidia-smi -q`` prints "Max Clocks: Memory": V100 SXM2
#: HBM2, A100 40GB HBM2, A100 80GB HBM2e, H100 SXM5 HBM3, A40 GDDR6
SKUS = {"v100": 877.0, "a100_40": 1215.0, "a100_80": 1593.0, "h100": 2619.0, "a40": 7251.0}


def _m(minutes: float) -> int:
    return round(minutes * 60 / STEP)


def _memclk(n: int, ceiling: float, stuck: dict[int, float], idle: tuple[int, ...] = ()) -> Aligned:
    """``n`` busy nodes at the SKU's memory clock; each node in ``stuck`` at that share of it
    from minute 15; those in ``idle`` with their GPUs idle (util 0, the memory clock at P8's
    405 MHz) from minute 15."""
    util = np.full((n, TIMES.size), 98.0)
    util[:, : _m(2)] = 5.0
    clock = np.full((n, TIMES.size), ceiling)
    for i, share in stuck.items():
        clock[i, _m(15) :] = share * ceiling
    for i in idle:
        util[i, _m(15) :] = 0.0
        clock[i, _m(15) :] = 405.0
    nodes = [f"n{i:02d}" for i in range(n)]
    return Aligned(TIMES, nodes, {UTIL: util, MEMCLK: clock}, STEP)


def _found(r) -> list[tuple[str, str]]:
    return [(f.node, f.metric) for f in r.faulty]


@pytest.mark.parametrize("sku", sorted(SKUS))
def test_a_memory_clock_stuck_at_70_percent_is_found_on_every_sku(sku: str) -> None:
    r = detect(_memclk(8, SKUS[sku], {3: 0.7}), [UTIL, MEMCLK], Params())
    assert _found(r) == [("n03", MEMCLK)]
    assert TIMES[_m(15)] < r.faulty[0].first_detected <= TIMES[_m(15)] + 5 * 60


def test_the_fixed_4_ghz_top_hid_the_older_skus() -> None:
    """What the range from the data buys: on 0..4 GHz a V100's 263 MHz drop read 0.07, under
    the 0.12 threshold; on 0..877 MHz it reads 0.30."""
    spec = spec_for(MEMCLK)
    assert spec.lo == 0 and spec.hi is None and spec.pinned
    for sku in ("v100", "a100_40"):
        gap = 0.3 * SKUS[sku]
        assert gap / 4000 < Params().threshold < gap / SKUS[sku]


def test_healthy_memory_clocks_stay_quiet() -> None:
    # a node whose GPUs idle (an elastic job's released node, a rank waiting in a CPU barrier)
    # drops its memory clock to P8's by design: the busy gate (the utilisation itself is
    # another metric's evidence)
    assert detect(_memclk(8, SKUS["h100"], {}, idle=(3,)), [MEMCLK], Params()).faulty == []
    # a 5 % dip (another P-state's clock on a few GDDR parts) stays under the threshold
    assert detect(_memclk(8, SKUS["a40"], {3: 0.95}), [UTIL, MEMCLK], Params()).faulty == []
    # a pair whose second node idles: not its pair's candidate either
    assert detect(_memclk(2, SKUS["h100"], {}, idle=(1,)), [MEMCLK], Params()).faulty == []


def test_a_pairs_stuck_memory_clock_is_found_against_the_other_node() -> None:
    """Corpora v16/v17 (seen): a pair's node stuck at 80 % was each node 10 % from the pair's
    mean; against the other node it is 20 %."""
    a = _memclk(2, SKUS["h100"], {1: 0.8})
    assert _found(detect(a, [UTIL, MEMCLK], Params())) == [("n01", MEMCLK)]
    assert detect(a, [UTIL, MEMCLK], Params(pair_distance=False)).faulty == []


def test_pair_gap_measures_each_node_against_the_other() -> None:
    N = np.array([[0.9, 0.8, np.nan, 0.5], [0.8, 0.1, 0.7, np.nan]])
    # the full gap squared (not half of it), at most full scale; NaN where either is unknown
    np.testing.assert_allclose(pair_gap(N), [[0.01, 0.49, np.nan, np.nan]] * 2)
    # with a lag, the other's nearest reading within it: a lost scrape is not "no gap"
    np.testing.assert_allclose(pair_gap(N, lag=1)[:, 2:], [[np.nan, 0.04], [0.01, np.nan]])


def test_readings_a_phase_moves_keep_the_pairs_median() -> None:
    """Not pinned: an SM clock's boost follows its GPU's load, and memory available is what a
    rank's phase frees -- of a pair, the other node may be the one that moved."""
    assert not spec_for(SM).pinned and not spec_for(AVAIL).pinned
    rng = np.random.default_rng(20)
    A = 1.76e12 + rng.normal(0, 3e9, (2, TIMES.size))
    A[0, _m(20) : _m(40)] += 2.6e11  # rank 0 frees 260 GB while its peer waits
    a = Aligned(TIMES, ["n00", "n01"], {AVAIL: A}, STEP)
    assert detect(a, [AVAIL], Params()).faulty == []


def test_a_pairs_hardware_xid_is_found_against_the_other_node() -> None:
    X = np.zeros((2, TIMES.size))
    X[1, _m(15) :] = 79.0  # fell off the bus
    a = Aligned(TIMES, ["n00", "n01"], {XID: X}, STEP)
    assert _found(detect(a, [XID], Params())) == [("n01", XID)]


# ---- a rank working alone (``Params.working_alone``, catalog ``load_driven``) -----------------

POWER = "DCGM_FI_DEV_POWER_USAGE"
TEMP = "DCGM_FI_DEV_GPU_TEMP"


def _phase(n: int, busy: tuple[int, ...], peers_util: float, hot: dict[int, float]) -> Aligned:
    """``n`` nodes training (util 98, 650 W, 64 °C) with a 10-minute phase from minute 15 in
    which the nodes in ``busy`` keep working (util 100, 350 W, 50 °C) and the others sit at
    ``peers_util`` (110 W, 34 °C); each node in ``hot`` that many °C hotter from minute 15."""
    shape = (n, TIMES.size)
    util, power, temp = np.full(shape, 98.0), np.full(shape, 650.0), np.full(shape, 64.0)
    util[:, : _m(2)] = 5.0
    phase = slice(_m(15), _m(25))
    for i in range(n):
        if i in busy:
            util[i, phase], power[i, phase], temp[i, phase] = 100.0, 350.0, 50.0
        else:
            util[i, phase], power[i, phase], temp[i, phase] = peers_util, 110.0, 34.0
    for i, dt in hot.items():
        temp[i, _m(15) :] += dt
    nodes = [f"n{i:02d}" for i in range(n)]
    return Aligned(TIMES, nodes, {UTIL: util, POWER: power, TEMP: temp}, STEP)


def test_rank_0_evaluating_while_its_peers_wait_in_a_cpu_barrier_stays_quiet() -> None:
    """Corpus v16 (seen): rank 0 evaluates for 8-10 minutes while the other ranks wait in a
    gloo barrier (GPUs idle): rank 0 was reported on power (its GPUs 16 °C warmer
    corroborating) and, in a 4-node job, on utilisation."""
    pri = [UTIL, POWER, TEMP]
    for n in (2, 4, 24):
        a = _phase(n, busy=(0,), peers_util=2.0, hot={})
        assert detect(a, pri, Params()).faulty == [], n
        if n > 2:  # a pair's two were both "candidates" without the rule: neither stood out
            assert _found(detect(a, pri, Params(working_alone=False)))[0][0] == "n00", n


def test_a_node_waiting_with_the_others_keeps_its_evidence() -> None:
    # the peers spin in a collective (util 100) while one node works at full power: a
    # straggler's pattern, not a rank alone -- the rule does not apply
    a = _phase(8, busy=(0,), peers_util=100.0, hot={})
    assert not np.asarray(working_alone(a, Params())).any()
    # a fan failing: 20 °C hotter through the job-wide pause too, idle like its peers
    a = _phase(8, busy=(), peers_util=2.0, hot={3: 20.0})
    assert _found(detect(a, [TEMP], Params())) == [("n03", TEMP)]
    # below its idle peers is never excused: the rule only drops a working node's *higher*
    # reading (a node at work whose GPUs run 20 °C cooler than idle ones is no rank alone)
    assert spec_for(TEMP).load_driven and spec_for(POWER).load_driven
    assert not spec_for(MEMCLK).load_driven and not spec_for(SM).load_driven


def test_working_alone_reads_a_pair_against_the_other_node() -> None:
    a = _phase(2, busy=(0,), peers_util=2.0, hot={})
    alone = np.asarray(working_alone(a, Params()))
    assert alone[0, _m(16)] and not alone[1, _m(16)] and not alone[:, _m(5)].any()
    # an unknown utilisation is neither busy nor idle
    a.data[UTIL][1, _m(16)] = np.nan
    assert not np.asarray(working_alone(a, Params()))[:, _m(16)].any()


def test_working_alone_is_a_phase_seen_to_begin_and_at_most_a_quarter_hour() -> None:
    a = _phase(8, busy=(0,), peers_util=2.0, hot={})
    alone = np.asarray(working_alone(a, Params()))
    assert alone[0, _m(15) : _m(25)].all()
    # a window that opens on the phase: it began before, for how long is unknown -- no excuse
    late = Aligned(TIMES[_m(17) :], a.nodes, {m: X[:, _m(17) :] for m, X in a.data.items()}, STEP)
    assert not np.asarray(working_alone(late, Params())).any()
    # a phase longer than the span: excused for its first 15 minutes only
    assert Params().alone_span == 900.0
    short = np.asarray(working_alone(a, Params(alone_span=300.0)))
    assert short[0, _m(15) : _m(20)].all() and not short[0, _m(20) :].any()
