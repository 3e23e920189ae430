"""Hostile review (session 16, second helper) of round 20's "rank working alone" (165ca7b:
``detect.working_alone``, catalog ``load_driven`` on GPU utilisation, power, GPU and memory
temperature and tensor duty, ``Params.working_alone``): a node whose lowest GPU utilisation is
over 5 % while its peers' median is at or under it is no outlier *above* them on those
readings (in a pair the other node is not one *below* either).

Each ``test_<n>_`` is finding n and asserts what an SRE of a large GPU cluster needs;
``xfail(strict=True)`` where 165ca7b fails it.  ``test_e<n>_`` pass: evidence that the
scenario reads as described (and that 165ca7b's parent behaviour, ``working_alone=False``,
got it right where it says so).  ``test_ok_`` pass: attacks the commit withstands.  Ranked by
severity.

* 1 (a real fault MISSED, through ``watch`` too -- the main risk the brief named): **a GPU
  hung at 100 % utilisation whose peers gave up on it.**  The rule assumes that a busy node
  with idle peers is *doing its role*; it is just as often the one node that cannot stop.
  n03's GPUs hang in a kernel at minute 15 (no Xid: on Linux a compute-only GPU has no kernel
  execution timeout, and an NCCL or data-corruption hang logs nothing); its peers spin in the
  all-reduce at full utilisation (NCCL waits on the GPU, so nothing differs), and at minute
  25 PyTorch's NCCL watchdog times the collective out and takes their processes down
  ("Watchdog caught collective operation timeout ... To avoid data inconsistency, we are
  taking the entire process down", vllm-project/vllm#5484; NCCL itself has no watchdog,
  NVIDIA/nccl#1260).  n03's process cannot be torn down while its CUDA calls hang
  ("ProcessGroupNCCL's watchdog got stuck ... indicates a NCCL/CUDA API hang",
  snowflakedb/ArcticTraining#219), so its GPUs stay at 100 % while the peers' read 0 -- and the
  job keeps running until its time limit: srun does not kill the remaining tasks of a step when
  one exits non-zero unless ``--kill-on-bad-exit``/``KillOnBadExit`` is set (srun(1), from
  memory: not found in the reference corpus; 0 by default), and a torchrun peer whose workers
  failed waits in its c10d rendezvous on the CPU.  The node reads "alone" only when *every* one
  of its GPUs stays busy (the utilisation is the node's lowest GPU): one process driving all of
  a host's GPUs (JAX's one process per host, TensorFlow's MirroredStrategy), or a node-wide hang
  (its NVSwitch fabric, its driver) that leaves every local rank's kernel resident.  With one
  process per GPU and a single GPU hung, its seven local ranks exit like the peers, the node's
  lowest GPU reads idle and it is still found on its hottest GPU (``test_ok_``): the rule's
  own aggregation limits the damage.  Before 165ca7b n03 is found on utilisation at minute 29
  (100 % against a median of 0: the one machine that must be drained, its GPUs need a reset;
  watch acts with the drainable bare "alert"); with it n03 is "working alone" on every
  load-driven reading, nothing else differs (a hung GPU keeps its clocks up), and ``minder
  --job`` and ``watch`` report **nothing** for the remaining 35 minutes -- in an 8-, 3- and
  24-node job alike.  Suggested fix: excuse a node working alone for a bounded phase only
  (the motivating evaluations last 8-10 minutes: past, say, 15 minutes alone -- or once its
  peers have been idle for a continuity and stay so to the window's end, ``idle_since`` -- it
  is evidence again); or require the peers to still hold the job (``DCGM_FI_DEV_FB_USED``,
  in dcgm-exporter's default counters: ranks waiting in a barrier keep their GPU memory, ranks
  whose processes died freed it).

* 2 (a real fault MISSED): **a foreign GPU process seen only in the job's pauses.**  A process
  that is not the job's -- a previous job's rank left in uninterruptible sleep that
  ``proctrack/cgroup`` could not kill, a container's stray server, a miner -- keeps n06's GPUs
  busy.  While the job trains, every GPU reads ~100 % and nothing tells n06 apart; where the
  whole job idles its GPUs together (every rank writing a checkpoint to slow storage, or waiting
  for a data-loader, 10 minutes at minutes 20 and 40), n06 alone reads 100 % and 300 W.  Before
  165ca7b that is found on power (its temperature, local, corroborating) at minute 23.75; with it
  n06 "works alone" in every pause and is never reported.  A job-wide pause has *no* rank 0
  working: the rule cannot tell a foreign load from a role.  Suggested fix: as for 1, a
  load-driven reading above idle peers is a rank's role only where the node *was* among the job's
  workers just before (its tensor duty or NVLink/PCIe bytes in step with the peers' before the
  phase began), or where it is the job's rank 0 (``SLURM_NODELIST``'s first node, which
  ``slurmjob`` already reads); anything else alone is evidence.

* 3 (a real fault MISSED for a whole job): **the node with every GPU allocated is "alone" from
  start to end when its peers run fewer ranks.**  The utilisation read is the node's lowest
  GPU over *all* the GPUs its dcgm-exporter reports (the query selects by host, not by the
  job's GPUs), so a job packed 8+4+4+4 on 8-GPU nodes (``--gpus=20``, ``-n 20
  --gpus-per-task=1``) reads 0 on the three half-used nodes throughout: n00 "works alone" for
  the entire job, and a fan failing on n00 at minute 20 (GPU 18 °C and HBM 10 °C hotter than
  before, still at its load) is excused; before 165ca7b it was found on GPU temperature at minute
  24 (the reference offset absorbs the constant utilisation difference).  Suggested fix: the node's
  reference offset applies to the rule as to the distances -- "alone" must be a *change* from
  the node's reference (its utilisation offset in the reference span already says it is busier
  than its peers by design), or restrict the utilisation to the job's GPUs (dcgm-exporter's
  ``hpc_job``/Slurm GPU mapping) before reading a min.

* 4 (a healthy node still reported -- the change does not fix its motivating case on
  multi-GPU nodes): rank 0 evaluating on **one** GPU of an 8-GPU node while every other rank
  (including its own node's local ranks 1-7) waits in the gloo barrier: the node's lowest GPU
  reads idle, so the node is not "working alone" -- and its hottest GPU (GPU temperature is a
  ``max``) still reports it, on ``DCGM_FI_DEV_GPU_TEMP`` (local evidence, no corroboration
  needed), exactly as before 165ca7b.  The test in test_round20 models rank 0's node with *all*
  its GPUs at work, which is the exception (an evaluation group of 8 on node 0), not the rule
  (``if rank == 0: evaluate()``).  Suggested fix: read "working alone" per aggregate: for a
  ``max`` reading the node's *busiest* GPU (the max utilisation) against its peers' busiest,
  i.e. pair each load-driven metric's aggregation with the utilisation's same aggregation.

Withstood (``test_ok_``): finding 1 with one process per GPU and a single GPU hung (its local
ranks exit with the peers; the node's lowest GPU reads idle) is still found on temperature; a
GPU hung while the peers still spin in NCCL (util 100 everywhere)
is untouched by the rule (nothing to excuse); a fan failing on an *idle* peer while rank 0
works alone stays found on temperature; rank 0 working alone in a 3-node job is quiet (the
median is the idle pair's); blank utilisation (a whole column, a node without the series, a
one-node job) neither crashes nor excuses; a pair's crashed rank and its peer spinning in NCCL
(symmetric in a pair, job-wide before and after) gives the same verdict with and without the
rule.

Fixed the same session, before corpus v18 was read (markers removed, evidence restated): 1
and 3 -- a node is "working alone" for at most ``Params.alone_span`` (15 minutes: a rank's
evaluation, sample or save takes minutes) of a run *seen to begin* in the window; a run the
window opens on began before it, for an unknown time (``watch`` reads ten minutes), and is no
excuse.  The hung GPU is found 15 minutes after its peers left (offline) and alerted by
``watch`` as before 165ca7b; the fully used node of a packed job from minute 17.  Stand
(strict xfail): 2 (a foreign process busy through the job's pauses: excused for each pause
shorter than the span -- the Prolog's ``gpu_processes`` check is the one for a process left
behind) and 4 (rank 0 on one GPU of eight: the node's utilisation is its lowest GPU's, so it
never reads "alone"; the utilisation's ``max`` is not fetched).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import numpy as np
import pytest
from metrics.conftest import served_prometheus

from aegis_slurm.metrics.align import Aligned
from aegis_slurm.metrics.config import MinderConfig, WatchConfig
from aegis_slurm.metrics.detect import Params, detect, working_alone
from review.passes import scrapes, watch_actions

STEP = 15.0
MIN = 60.0
TIMES = 1e9 + STEP * np.arange(240)  # 60 minutes
UTIL = "DCGM_FI_DEV_GPU_UTIL"
POWER = "DCGM_FI_DEV_POWER_USAGE"
TEMP = "DCGM_FI_DEV_GPU_TEMP"
SM = "DCGM_FI_DEV_SM_CLOCK"
TENSOR = "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"
MEMTEMP = "DCGM_FI_DEV_MEMORY_TEMP"
PRI = [UTIL, POWER, SM, TEMP, TENSOR, MEMTEMP]


def _m(minutes: float) -> int:
    return round(minutes * 60 / STEP)


def _training(n: int) -> dict[str, np.ndarray]:
    """``n`` H100 nodes training (util 98, 650 W, 64 °C, SM 1,980 MHz, tensor duty 0.45, HBM
    70 °C) after two idle minutes of launch."""
    s = (n, TIMES.size)
    d = {
        UTIL: np.full(s, 98.0),
        POWER: np.full(s, 650.0),
        TEMP: np.full(s, 64.0),
        SM: np.full(s, 1980.0),
        TENSOR: np.full(s, 0.45),
        MEMTEMP: np.full(s, 70.0),
    }
    _idle(d, range(n), slice(0, _m(2)))
    return d


def _idle(d: dict[str, np.ndarray], rows, sl: slice) -> None:
    """The nodes in ``rows`` with their GPUs idle (P0 with no context: 90 W, 34 °C, the SM
    clock at its 345 MHz idle floor) over ``sl``."""
    for i in rows:
        d[UTIL][i, sl], d[POWER][i, sl], d[TEMP][i, sl] = 0.0, 90.0, 34.0
        d[SM][i, sl], d[TENSOR][i, sl], d[MEMTEMP][i, sl] = 345.0, 0.0, 40.0


def _hung(d: dict[str, np.ndarray], rows, sl: slice) -> None:
    """The nodes in ``rows`` running a kernel that never finishes over ``sl``: utilisation
    100 (a kernel is resident), no tensor work, 200 W, 45 °C, clocks up."""
    for i in rows:
        d[UTIL][i, sl], d[POWER][i, sl], d[TEMP][i, sl] = 100.0, 200.0, 45.0
        d[SM][i, sl], d[TENSOR][i, sl], d[MEMTEMP][i, sl] = 1980.0, 0.0, 50.0


def _aligned(d: dict[str, np.ndarray]) -> Aligned:
    n = next(iter(d.values())).shape[0]
    return Aligned(TIMES, [f"n{i:02d}" for i in range(n)], d, STEP)


def _found(a: Aligned, **kw) -> list[tuple[str, str]]:
    return [(f.node, f.metric) for f in detect(a, PRI, Params(**kw)).faulty]


# ---- finding 1: a hung GPU whose peers timed out and left -------------------------------------


def _hung_after_timeout(n: int = 8, culprit: int = 3) -> Aligned:
    """n03's GPU hangs at minute 15; everybody spins in the all-reduce (util 100) until the
    peers' NCCL watchdog takes their processes down at minute 25; n03's stays at 100 %."""
    d = _training(n)
    _hung(d, range(n), slice(_m(15), _m(25)))
    _idle(d, [i for i in range(n) if i != culprit], slice(_m(25), None))
    _hung(d, [culprit], slice(_m(25), None))
    return _aligned(d)


def test_1_a_gpu_hung_at_full_utilisation_after_its_peers_timed_out_is_found() -> None:
    assert [node for node, _ in _found(_hung_after_timeout())] == ["n03"]


def test_e1_the_hung_node_is_excused_for_a_quarter_hour_at_most() -> None:
    """Fixed the same session: a node is "alone" for at most ``Params.alone_span`` (15 min)
    of a run seen to begin in the window."""
    a = _hung_after_timeout()
    assert _found(a, working_alone=False) == [("n03", UTIL)]
    alone = np.asarray(working_alone(a, Params()))
    # n03 is "alone" from the peers' exit (minute 25) for 15 minutes, then no more
    assert alone[3, _m(26) : _m(39)].all() and not alone[3, _m(41) :].any()
    assert not alone[np.arange(8) != 3].any()
    (f,) = detect(a, PRI, Params()).faulty
    assert (f.node, f.metric) == ("n03", UTIL)
    assert TIMES[_m(40)] <= f.first_detected <= TIMES[_m(40)] + 5 * MIN
    for n in (3, 24):
        b = _hung_after_timeout(n, culprit=1)
        assert [node for node, _ in _found(b)] == ["n01"], n


def _wjob(t: float, nodes: list[str], culprit: str) -> list[str]:
    """OpenMetrics lines of :func:`_hung_after_timeout` for real: two GPUs a node."""
    lines: list[str] = []
    start, end = t, t + 60 * MIN

    def value(metric: str, host: str):
        def f(s: float) -> float:
            minute = (s - start) / MIN
            if minute < 2:
                return {UTIL: 0.0, POWER: 90.0, TEMP: 34.0}[metric]
            if minute < 15:
                return {UTIL: 98.0, POWER: 650.0, TEMP: 64.0}[metric]
            if minute < 25 or host == culprit:
                return {UTIL: 100.0, POWER: 200.0, TEMP: 45.0}[metric]
            return {UTIL: 0.0, POWER: 90.0, TEMP: 34.0}[metric]

        return f

    for metric in (UTIL, POWER, TEMP):
        lines.append(f"# TYPE {metric} gauge")
        for host in nodes:
            for g in range(2):
                lab = f'gpu="{g}",UUID="GPU-{host}-{g}",Hostname="{host}",job="dcgm"'
                lines += scrapes(metric, lab, value(metric, host), start - 10 * MIN, end, STEP)
    return lines


@pytest.fixture(scope="module")
def prom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, list[str], float]]:
    t = (time.time() // 3600 - 3) * 3600  # the job started 3 h ago
    nodes = [f"h{i:02d}" for i in range(8)]
    text = "\n".join(_wjob(t, nodes, "h03")) + "\n# EOF\n"
    with served_prometheus(text, tmp_path_factory.mktemp("s16bprom")) as url:
        yield url, nodes, t


def _watch(prom, detector: Params, jid: str) -> dict[str, list[str]]:
    """``run_pass`` (drain = false, no syslog) every 2 minutes from minute 12 to 50."""
    url, nodes, start = prom
    cfg = MinderConfig(detector=detector, watch=WatchConfig(drain=False, syslog=False))
    return watch_actions(url, nodes, start, list(range(12, 52, 2)), jid, cfg)


def test_1_watch_alerts_the_hung_gpu_its_peers_left(prom) -> None:
    assert list(_watch(prom, Params(), "9601")) == ["h03"]


def test_e1_watch_reads_a_run_its_window_opens_on_as_no_phase(prom) -> None:
    # watch reads ten minutes: once the hung node's run began before the window, it is no
    # phase seen to begin -- alerted with the bare action, as without the rule
    assert _watch(prom, Params(working_alone=False), "9602") == {"h03": ["alert"]}
    assert _watch(prom, Params(), "9603") == {"h03": ["alert"]}


# ---- finding 2: a foreign process busy through the job's pauses ---------------------------------


def _foreign_in_pauses(n: int = 8, culprit: int = 6) -> Aligned:
    """The job idles its GPUs together (a checkpoint written by every rank) at minutes 20-30 and
    40-50; n06's GPUs stay busy with a process that is not the job's (100 %, 300 W, 55 °C)."""
    d = _training(n)
    for sl in (slice(_m(20), _m(30)), slice(_m(40), _m(50))):
        _idle(d, range(n), sl)
        d[UTIL][culprit, sl], d[POWER][culprit, sl], d[TEMP][culprit, sl] = 100.0, 300.0, 55.0
        d[SM][culprit, sl], d[TENSOR][culprit, sl], d[MEMTEMP][culprit, sl] = 1980.0, 0.2, 60.0
    return _aligned(d)


@pytest.mark.xfail(strict=True, reason="165ca7b: a foreign load in a job-wide pause is 'alone'")
def test_2_a_foreign_gpu_process_busy_through_the_jobs_pauses_is_found() -> None:
    assert [node for node, _ in _found(_foreign_in_pauses())] == ["n06"]


def test_e2_it_was_found_on_power_before_165ca7b_and_is_excused_in_every_pause() -> None:
    a = _foreign_in_pauses()
    assert _found(a, working_alone=False) == [("n06", POWER)]
    assert _found(a) == []
    alone = np.asarray(working_alone(a, Params()))
    # no rank of the job works in the pause: "alone" is the foreign load
    assert alone[6, _m(21) : _m(29)].all() and alone[6, _m(41) : _m(49)].all()


# ---- finding 3: a node busier by allocation is "alone" for the whole job -----------------------


def _packed_fan(n: int = 4) -> Aligned:
    """n00 runs 8 ranks, the others 4 of their 8 GPUs (the lowest reads 0 throughout); n00's
    fan fails at minute 20: its GPUs 18 °C and its HBM 10 °C hotter at the same load."""
    d = _training(n)
    d[UTIL][1:, _m(2) :] = 0.0
    d[TEMP][0, _m(20) :] += 18.0
    d[MEMTEMP][0, _m(20) :] += 10.0
    return _aligned(d)


def test_3_a_fan_failing_on_the_node_with_more_ranks_is_found() -> None:
    assert [node for node, _ in _found(_packed_fan())] == ["n00"]


def test_e3_the_fully_used_node_is_excused_for_a_quarter_hour_from_the_launch() -> None:
    a = _packed_fan()
    assert _found(a, working_alone=False) == [("n00", TEMP)]
    alone = np.asarray(working_alone(a, Params()))
    assert alone[0, _m(3) : _m(16)].all() and not alone[0, _m(18) :].any()


# ---- finding 4: rank 0 evaluating on one GPU of eight --------------------------------------------


def _rank0_on_one_gpu(n: int = 8) -> Aligned:
    """Three 10-minute evaluations (from minutes 15, 27, 39) by rank 0 alone, on one GPU of
    n00: every node's lowest GPU and lowest power idle; n00's hottest GPU 50 °C (HBM 55)."""
    d = _training(n)
    for k in range(3):
        sl = slice(_m(15 + 12 * k), _m(25 + 12 * k))
        _idle(d, range(n), sl)
        d[TEMP][0, sl], d[MEMTEMP][0, sl] = 50.0, 55.0
    return _aligned(d)


@pytest.mark.xfail(strict=True, reason="165ca7b: reads 'alone' on the node's lowest GPU only")
def test_4_rank_0_evaluating_on_one_gpu_while_the_others_wait_stays_quiet() -> None:
    assert _found(_rank0_on_one_gpu()) == []


def test_e4_rank_0_on_one_gpu_is_reported_on_temperature_with_or_without_the_rule() -> None:
    a = _rank0_on_one_gpu()
    assert _found(a) == _found(a, working_alone=False) == [("n00", TEMP)]
    assert not np.asarray(working_alone(a, Params())).any()


# ---- withstood -----------------------------------------------------------------------------------


def test_ok_one_hung_gpu_among_exited_local_ranks_is_still_found() -> None:
    # one process per GPU: n03's seven healthy local ranks time out and exit with the peers;
    # its hung GPU alone stays busy -- the node's lowest GPU idles, its hottest is 11 °C up
    d = _training(8)
    _hung(d, range(8), slice(_m(15), _m(25)))
    _idle(d, range(8), slice(_m(25), None))
    d[TEMP][3, _m(25) :], d[MEMTEMP][3, _m(25) :] = 45.0, 50.0
    a = _aligned(d)
    assert not np.asarray(working_alone(a, Params())).any()
    assert _found(a) == _found(a, working_alone=False) == [("n03", TEMP)]


def test_ok_a_hang_while_the_peers_still_spin_in_nccl_is_untouched() -> None:
    d = _training(8)
    _hung(d, range(8), slice(_m(15), None))  # nobody timed out (TORCH_NCCL timeout 30 min)
    d[TEMP][3, _m(15) :] += 15.0  # the hung GPU's die hotter: evidence the rule must leave
    a = _aligned(d)
    assert not np.asarray(working_alone(a, Params())).any()
    assert _found(a) == _found(a, working_alone=False) == [("n03", TEMP)]


def test_ok_a_fan_failing_on_an_idle_peer_while_rank_0_works_alone_stays_found() -> None:
    d = _training(8)
    _idle(d, range(8), slice(_m(15), None))
    # rank 0 evaluates alone for ten minutes, then waits with the others
    d[UTIL][0, _m(15) : _m(25)], d[POWER][0, _m(15) : _m(25)] = 100.0, 350.0
    d[TEMP][0, _m(15) : _m(25)] = 50.0
    d[TEMP][5, _m(15) :] += 20.0  # idle and 20 °C hotter than its idle peers
    assert _found(_aligned(d)) == [("n05", TEMP)]


def test_ok_rank_0_alone_in_a_3_node_job_is_quiet() -> None:
    d = _training(3)
    _idle(d, (1, 2), slice(_m(15), _m(25)))
    sl = slice(_m(15), _m(25))
    d[UTIL][0, sl], d[POWER][0, sl], d[TEMP][0, sl] = 100.0, 350.0, 50.0
    a = _aligned(d)
    assert _found(a) == []
    assert np.asarray(working_alone(a, Params()))[0, _m(16) : _m(24)].all()


def test_ok_blank_utilisation_neither_crashes_nor_excuses() -> None:
    d = _training(4)
    d[UTIL][:, _m(10) : _m(12)] = np.nan  # a whole column blank
    d[UTIL][2, :] = np.nan  # a node without the series
    a = _aligned(d)
    alone = np.asarray(working_alone(a, Params()))
    assert not alone[:, _m(10) : _m(12)].any() and not alone[2].any()
    detect(a, PRI, Params())
    one = _aligned({k: v[:1] for k, v in _training(1).items()})
    assert working_alone(one, Params()) is False
    assert detect(one, PRI, Params()).faulty == []
    no_util = _aligned({k: v for k, v in _training(4).items() if k != UTIL})
    assert working_alone(no_util, Params()) is False


def test_ok_a_pairs_crashed_rank_gets_the_same_verdict_with_and_without_the_rule() -> None:
    # n01's process died at minute 20 (GPUs idle); n00 spins in the all-reduce at 100 %: in a
    # pair both are as far from the mean, a job-wide state with or without the rule
    d = _training(2)
    _idle(d, [1], slice(_m(20), None))
    _hung(d, [0], slice(_m(20), None))
    a = _aligned(d)
    assert _found(a) == _found(a, working_alone=False)
