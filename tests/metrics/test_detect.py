"""Minder's steps as units, and the detector end to end on the simulator's benign and faulty jobs.

The simulator's jobs prove plumbing and the benign cases; they are not accuracy evidence (see
benchmarks/bench_minder.py for precision/recall on a held-out seed).
"""

from __future__ import annotations

import numpy as np
import pytest

from aegis_slurm.metrics.align import align
from aegis_slurm.metrics.catalog import DEFAULT_METRICS
from aegis_slurm.metrics.detect import (
    Params,
    background_events,
    candidates,
    continuity,
    denoise,
    denoise_size,
    detect,
    event_scale,
    job_reference,
    lambda_2delta,
    normalise,
    peer_deviation,
    scale,
    simultaneous_bound,
    to_rates,
    window_distance,
    zscore_baseline,
)
from aegis_slurm.simulate.metrics import BENIGN, FAULTS, simulate_job

METRICS = [m.name for m in DEFAULT_METRICS]


def test_to_rates_handles_a_counter_reset() -> None:
    X = np.array([[0.0, 15, 30, 45, 5, 20, 35]])  # +1/s, reset to 0 between 45 and 5
    r = to_rates(X, step=15, window=15)
    np.testing.assert_allclose(r[0, 1:], [1, 1, 1, 5 / 15, 1, 1])
    assert np.isnan(r[0, 0])


def test_denoise_removes_a_two_sample_spike_and_keeps_a_level_change() -> None:
    x = np.zeros(40)
    x[10:12] = 5.0  # a scrape caught mid-checkpoint
    x[25:] = 3.0  # a real level change
    y = denoise(x[None, :], size=5)[0]
    assert y[10:12].max() == 0.0
    assert (y[27:] == 3.0).all()
    assert denoise(x[None, :], method="none")[0][10] == 5.0


def test_denoise_keeps_absence() -> None:
    X = np.ones((3, 10))
    X[2, 4:] = np.nan
    assert np.isnan(denoise(X)[2, 4:]).all()


def test_normalise_uses_the_physical_range_as_a_floor() -> None:
    # a steady job: two nodes 4 °C apart; the data's own range would make that full scale
    X = np.array([[70.0, 70.0], [74.0, 74.0]])
    N = normalise(X, lo=20, hi=100)
    assert N.max() - N.min() == pytest.approx(4 / 80)
    assert normalise(X).max() == 1.0


def test_a_silent_node_is_as_far_as_it_gets() -> None:
    N = np.full((4, 6), 0.5)
    N[3, 2:] = np.nan
    dev, judged = peer_deviation(N)
    assert (dev[3, 2:] == 1.0).all() and (dev[:3] == 0).all()
    assert judged.all()
    N[:, 5] = np.nan  # the job is over: nobody reports, nothing is judged
    dev, judged = peer_deviation(N)
    assert not judged[5] and (dev[:, 5] == 0).all()


def test_window_distance_is_the_rms_over_the_trailing_window() -> None:
    dev = np.array([[0.0, 0, 1, 1, 1, 0]])
    d = window_distance(dev, 2)
    assert np.isnan(d[0, 0])
    np.testing.assert_allclose(d[0, 1:], np.sqrt([0, 0.5, 1, 1, 0.5]))


def test_candidates_ignore_job_wide_events() -> None:
    dist = np.zeros((20, 3))
    dist[0, 0] = 0.5  # one node: a candidate
    dist[:, 1] = 0.5  # everybody: a job-wide event
    dist[:2, 2] = 0.5  # two of twenty: still a minority at max_share 0.1
    c = candidates(dist, 0.2, 0.1)
    assert c[0, 0] and c[:, 0].sum() == 1
    assert not c[:, 1].any()
    assert c[:2, 2].all()


def test_continuity_needs_an_unbroken_run() -> None:
    c = np.array(
        [
            [1, 1, 1, 0, 1, 1, 1, 1, 0],  # run of 4 ends at index 7
            [1, 1, 1, 0, 1, 1, 1, 0, 0],  # never 4 in a row
        ],
        bool,
    )
    np.testing.assert_array_equal(continuity(c, 4), [7, -1])


@pytest.mark.parametrize("benign", BENIGN)
def test_benign_events_stay_quiet(benign: str) -> None:
    for seed in range(3):
        df, _ = simulate_job(24, 75, None, seed=seed, benign=(benign,))
        res = detect(align(df), METRICS)
        assert res.faulty == [], (benign, seed, res.faulty)
        assert res.windows > 200


@pytest.mark.parametrize("fault", FAULTS)
def test_each_fault_is_found_on_the_culprit(fault: str) -> None:
    df, truth = simulate_job(16, 75, fault, seed=11)
    res = detect(align(df), METRICS)
    assert [f.node for f in res.faulty] == [truth.node]
    f = res.faulty[0]
    # sparse error counters (AOC link-down events about once a minute) need a few events
    assert truth.onset <= f.first_detected <= truth.onset + 10 * 60
    assert f.score > Params().threshold


def test_hang_after_a_rank_died_blames_the_dead_rank_not_its_peers() -> None:
    # ECC error: the culprit's utilisation falls to 0 while its peers hang in NCCL at ~100 %
    df, truth = simulate_job(32, 60, "ecc", seed=5)
    res = detect(align(df), METRICS)
    assert [f.node for f in res.faulty] == [truth.node]


def test_constant_offset_fools_the_naive_baselines_but_not_minder() -> None:
    df, _ = simulate_job(24, 75, None, seed=2, benign=("offset",))
    al = align(df)
    assert detect(al, METRICS).faulty == []
    # the per-step z-score and λ+2δ see a warmer node and flag it (why the issue asks for more)
    assert zscore_baseline(al, METRICS).faulty
    assert lambda_2delta(al, METRICS).faulty


def test_baseline_removes_a_constant_offset_but_not_a_later_change() -> None:
    from aegis_slurm.metrics.align import Aligned
    from aegis_slurm.metrics.detect import Params, detect

    rng = np.random.default_rng(3)
    times = 1e9 + 15.0 * np.arange(240)  # 60 min
    temp = 70 + rng.normal(0, 0.5, (10, times.size))
    temp[2] += 14  # hotter all job long: cooling position
    temp[7, 120:] += 14  # hotter from minute 30: a fan failing
    a = Aligned(times, [f"n{i}" for i in range(10)], {"DCGM_FI_DEV_GPU_TEMP": temp}, 15.0)
    pri = ["DCGM_FI_DEV_GPU_TEMP"]
    # without a reference (baseline 0) the hotter-all-job node looks faulty too
    assert {f.node for f in detect(a, pri, Params(baseline=0.0)).faulty} == {"n2", "n7"}
    (f,) = detect(a, pri, Params()).faulty  # the reference is on by default
    assert f.node == "n7" and f.first_detected >= times[120]
    # the same reference taken from elsewhere (watch: the job's start), passed in as offsets
    ref = Aligned(times[20:40], a.nodes, {"DCGM_FI_DEV_GPU_TEMP": temp[:, 20:40]}, 15.0)
    offsets = job_reference(ref, pri, Params())
    assert offsets["DCGM_FI_DEV_GPU_TEMP"]["offsets"]["n2"] == pytest.approx(14, abs=1.5)
    assert offsets["DCGM_FI_DEV_GPU_TEMP"]["level"] == pytest.approx(70, abs=1)
    late = Aligned(times[100:], a.nodes, {"DCGM_FI_DEV_GPU_TEMP": temp[:, 100:]}, 15.0)
    p = Params(warmup=0.0)
    assert {f.node for f in detect(late, pri, p).faulty} == {"n7"}  # its own start: n7 at 30'
    (f,) = detect(late, pri, p, offsets).faulty
    assert f.node == "n7"
    # a window without its job's start and without offsets: judged uncorrected, n2 shows
    assert "n2" in {f.node for f in detect(late, pri, Params(warmup=0.0, baseline=0.0)).faulty}


def test_denoise_span_is_in_seconds() -> None:
    assert denoise_size(15.0, 75.0) == 5
    assert denoise_size(10.0, 75.0) == 7
    assert denoise_size(30.0, 75.0) == 1
    assert denoise_size(60.0, 75.0) == 1  # a 5-minute median would erase a checkpoint unevenly


def test_lag_forgives_an_edge_seen_one_scrape_late() -> None:
    N = np.zeros((5, 10))
    N[:, 5:] = 1.0  # a job-wide step
    N[3, 5] = 0.0  # node 3 is scraped just before it
    dev, _ = peer_deviation(N, lag=0)
    assert dev[3, 5] == 1.0
    dev, _ = peer_deviation(N, lag=1)
    assert dev[3, 5] == 0.0
    N[3, 5:8] = 0.0  # three steps behind: that is the node, not the scrape
    dev, _ = peer_deviation(N, lag=1)
    assert dev[3, 6] == 1.0


def test_event_scale_is_absolute_and_logarithmic() -> None:
    w = 120.0
    R = np.zeros((10, 50))
    R[2, 10:] = 1 / w  # one event per rate window, sustained
    R[4, 10:] = 100 / w  # a hundred
    E = event_scale(R, w, 50.0)
    assert (E[[0, 1, 3], :] == 0).all()
    assert E[2, 20] == pytest.approx(0.5) and 0.5 < E[4, 20] < 1.0
    # on a Min-Max scale over 0..50/s both would sit near 0 (invisible)
    assert normalise(R, 0, 50)[4, 20] < 0.02


def test_event_scale_ignores_the_peers_background_rate() -> None:
    rng = np.random.default_rng(0)
    w, step = 120.0, 15.0
    # every node ticks about once in 500 s (as some PCIe links do); a 2-minute window then
    # holds 0-2 events by chance on each of 40 nodes
    counts = rng.poisson(step / 500.0, size=(40, 400)).cumsum(axis=1).astype(float)
    R = to_rates(counts, step, w)
    assert background_events(R, w).min() >= 1
    E = event_scale(R, w, 50.0)
    assert np.nanmax(E[:, 20:]) == 0.0 or (np.nan_to_num(E) > 0).mean() < 0.01
    R[7, 200:] += 0.5  # a node that really replays, 60 per window
    assert (event_scale(R, w, 50.0)[7, 210:] >= 0.5).all()


def test_job_scale_measures_a_throughput_against_the_jobs_level() -> None:
    # NVLink at 40 GB/s per node: one node at half its peers' is far off on the job's scale
    # (0.25) but only 0.07 of the 300 GB/s physical range
    X = np.full((8, 40), 40e9)
    X[5] = 20e9
    on_job = scale(X, "DCGM_FI_PROF_NVLINK_TX_BYTES", Params())
    assert on_job[0, 0] - on_job[5, 0] == pytest.approx(0.25)
    physical = scale(X, "DCGM_FI_PROF_NVLINK_TX_BYTES", Params(scales=False))
    assert physical[0, 0] - physical[5, 0] == pytest.approx(20 / 300)
    # a job idle all window: the scale stops at 5 % of the physical range, noise stays small
    idle = np.abs(np.random.default_rng(1).normal(0, 1e6, (8, 40)))
    assert np.nanmax(scale(idle, "DCGM_FI_PROF_NVLINK_TX_BYTES", Params())) < 0.001


def test_a_hotter_node_is_as_cool_as_its_peers_at_idle() -> None:
    # 12 °C hotter under load (cooling position), as cool as its peers in a checkpoint:
    # read as a constant offset it would be 12 °C too cold then; read as a gain it is not
    from aegis_slurm.metrics.align import Aligned

    rng = np.random.default_rng(4)
    times = 1e9 + 15.0 * np.arange(240)
    load = np.ones(times.size)
    load[150:174] = 0.0  # a long checkpoint: everybody idles 6 minutes
    temp = 34 + 36 * load[None, :] + rng.normal(0, 0.4, (10, times.size))
    temp[3] = 34 + 48 * load + rng.normal(0, 0.4, times.size)
    a = Aligned(times, [f"n{i}" for i in range(10)], {"DCGM_FI_DEV_GPU_TEMP": temp}, 15.0)
    pri = ["DCGM_FI_DEV_GPU_TEMP"]
    assert detect(a, pri, Params()).faulty == []
    (f,) = detect(a, pri, Params(gain=False)).faulty
    assert f.node == "n3" and f.first_detected >= times[150]


def test_a_late_starter_is_judged_once_it_joined_and_a_never_joiner_is_its_own_normal() -> None:
    from aegis_slurm.metrics.align import Aligned

    rng = np.random.default_rng(5)
    times = 1e9 + 15.0 * np.arange(240)
    util = 99 + rng.normal(0, 0.5, (10, times.size))
    util[4, :36] = 0.0  # finished loading 9 minutes in: idle while its peers wait for it
    util[6, :] = 0.0  # one GPU idle by design all job long (the per-node minimum shows it)
    util[8, 160:] = 0.0  # a GPU that dies at minute 40
    a = Aligned(times, [f"n{i}" for i in range(10)], {"DCGM_FI_DEV_GPU_UTIL": util}, 15.0)
    pri = ["DCGM_FI_DEV_GPU_UTIL"]
    (f,) = detect(a, pri, Params()).faulty
    assert f.node == "n8" and f.first_detected >= times[160]
    # without the join rule, the late starter's idle minutes in its reference make it look
    # changed once it works; without any reference, the idle-by-design GPU looks dead
    assert "n4" in {f.node for f in detect(a, pri, Params(join=False)).faulty}
    assert "n6" in {f.node for f in detect(a, pri, Params(baseline=0.0)).faulty}


def test_a_rate_spans_lost_scrapes_like_prometheus_rate() -> None:
    X = 100.0 * np.arange(12, dtype=float)[None, :]  # 100 per 15 s step
    X[0, 5:7] = np.nan  # two lost scrapes
    r = to_rates(X, step=15.0, window=15.0)
    assert np.isnan(r[0, 5:7]).all()  # absent stays absent
    np.testing.assert_allclose(r[0, 7:], 100 / 15)  # the increase across the gap is spread
    np.testing.assert_allclose(r[0, 1:5], 100 / 15)


def test_an_idle_by_design_gpu_stays_quiet_through_a_job_wide_slowdown() -> None:
    # its reference offset is "minus the whole level": a gain of 0, not a constant offset that
    # would make it look +40 % when its peers slow down to 60 %
    from aegis_slurm.metrics.align import Aligned

    rng = np.random.default_rng(6)
    times = 1e9 + 15.0 * np.arange(240)
    level = np.where((times >= times[120]) & (times < times[180]), 0.6, 1.0) * 40e9
    nvl = level[None, :] * rng.normal(1, 0.01, (10, times.size))
    nvl[5] = 0.0  # one GPU of the node has nothing to do (per-node minimum)
    a = Aligned(times, [f"n{i}" for i in range(10)], {"DCGM_FI_PROF_NVLINK_TX_BYTES": nvl}, 15.0)
    pri = ["DCGM_FI_PROF_NVLINK_TX_BYTES"]
    assert detect(a, pri, Params()).faulty == []
    # (an NVLink throughput alone convicts no one: judged here without corroboration)
    p = Params(gain=False, corroborate=False)
    assert [f.node for f in detect(a, pri, p).faulty] == ["n5"]


def test_the_reference_is_taken_with_the_job_at_its_level() -> None:
    # everyone waits (cool) until minute 8, then trains; node 2 runs 11 °C hotter under load.
    # Its offset in the waiting minutes is not its offset under load.
    from aegis_slurm.metrics.align import Aligned

    rng = np.random.default_rng(7)
    times = 1e9 + 15.0 * np.arange(240)
    load = (times >= times[32]).astype(float)
    temp = 36 + 35 * load[None, :] + rng.normal(0, 0.4, (8, times.size))
    temp[2] = 36 - 4 + 50 * load + rng.normal(0, 0.4, times.size)
    a = Aligned(times, [f"n{i}" for i in range(8)], {"DCGM_FI_DEV_GPU_TEMP": temp}, 15.0)
    pri = ["DCGM_FI_DEV_GPU_TEMP"]
    assert detect(a, pri, Params()).faulty == []
    assert [f.node for f in detect(a, pri, Params(steady=False, gain=False)).faulty] == ["n2"]


def test_dozens_of_findings_at_once_are_a_job_wide_state_not_faults() -> None:
    times = 1e9 + 15.0 * np.arange(100)
    first = np.full(512, -1)
    first[:40] = 50  # 40 of 512 found in the same minute: under the 25 % share, still no fault
    first[100:103] = [20, 22, 90]  # three apart or near: plausible
    kept = simultaneous_bound(first, times, 240.0, 4)
    assert sorted(kept) == [100, 101, 102]
    assert len(simultaneous_bound(first, times, 240.0, 0)) == 43  # without the bound


def test_peer_median_is_nanmedian_over_the_nodes() -> None:
    """The vectorised median equals ``np.nanmedian(X, axis=0)``: lost samples, infinities,
    columns nobody reported, one node."""
    import warnings

    from aegis_slurm.metrics.detect import peer_median

    rng = np.random.default_rng(0)
    for t in range(200):
        n, steps = int(rng.integers(1, 40)), int(rng.integers(1, 30))
        X = rng.normal(size=(n, steps))
        X[rng.random((n, steps)) < rng.random()] = np.nan
        if t % 7 == 0:
            X[rng.random((n, steps)) < 0.3] = np.inf
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            want = np.nanmedian(X, axis=0)
        assert np.array_equal(peer_median(X), want, equal_nan=True)


def test_decades_scale_counts_times_the_peers_not_microseconds() -> None:
    from aegis_slurm.metrics.detect import decades

    share = np.array([[5.0, 10.0, 100.0, 1e4, 1e6, 4e6, np.nan]])
    got = decades(share, 10.0, 1e6)
    assert got[0, :6].tolist() == pytest.approx([0.0, 0.0, 0.2, 0.6, 1.0, 1.0])
    assert np.isnan(got[0, 6])


def _pause_job(base: float, culprit: float, nodes: int = 12, onset: int = 100) -> list:
    """Microseconds of pause per second the NICs of ``nodes`` machines send (a rate, as the
    PromQL hands it over), one node from ``onset`` at ``culprit`` its peers' share."""
    from aegis_slurm.metrics.align import Aligned
    from aegis_slurm.metrics.catalog import PAUSE_SENT

    rng = np.random.default_rng(5)
    times = 1e9 + 15.0 * np.arange(200)  # 50 min
    X = base * rng.lognormal(0.0, 0.3, (nodes, times.size))  # bursty, as pause is
    X[3, onset:] *= culprit
    a = Aligned(times, [f"n{i}" for i in range(nodes)], {PAUSE_SENT: X}, 15.0)
    return detect(a, [PAUSE_SENT], Params()).faulty


def test_a_nic_pausing_its_link_ten_times_its_peers_share_is_found() -> None:
    # a busy RoCE fabric where every NIC pauses 1 % of the time, one NIC 10 %; and a quiet one
    # (20 us/s), where one NIC pauses 3 % (a slow receive path) -- the same decade rule
    for base, factor in ((1e4, 10.0), (20.0, 1500.0)):
        (f,) = _pause_job(base, factor)
        assert f.node == "n3" and f.first_detected >= 1e9 + 15.0 * 100


def test_pause_within_a_few_times_the_peers_or_job_wide_stays_quiet() -> None:
    assert _pause_job(1e4, 2.5) == []  # 2.5x on a busy fabric: congestion, not a fault
    assert _pause_job(1.0, 50.0) == []  # 50 us/s against peers near 0: under the floor
    assert _pause_job(10.0, 5.0) == []  # under 100 us/s: nothing whatever the ratio


def test_a_device_lost_inside_the_reference_span_is_not_the_nodes_normal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib

    from aegis_slurm.metrics.align import Aligned
    from aegis_slurm.metrics.catalog import GPU_COUNT

    times = 1e9 + 15.0 * np.arange(160)  # 40 min; warm-up 5 min, reference span 5-10 min
    X = np.full((10, times.size), 8.0)
    X[2, 28:] = 7  # a GPU off the bus at minute 7: 3 of the span's 5 minutes
    X[5, :] = 7  # a GPU out for repair since before the job: the node's own normal
    X[8, 30] = 16  # one scrape that saw every GPU twice: not a normal of 16 GPUs
    a = Aligned(times, [f"n{i}" for i in range(10)], {GPU_COUNT: X}, 15.0)
    (f,) = detect(a, [GPU_COUNT], Params()).faulty
    assert f.node == "n2" and f.first_detected >= times[28]
    # the span's median (before round 7) took the lost GPU for the node's normal
    module = importlib.import_module("aegis_slurm.metrics.detect")
    monkeypatch.setattr(module, "reference_statistic", lambda metric, p: None)
    assert detect(a, [GPU_COUNT], Params()).faulty == []


def test_a_stall_shorter_than_the_continuity_stays_quiet_however_the_window_trails() -> None:
    from aegis_slurm.metrics.align import Aligned

    times = 1e9 + 10.0 * np.arange(240)  # 40 min at a 10 s scrape
    util = np.full((12, times.size), 98.0)

    def found(minutes: float, p: Params) -> list:
        U = util.copy()
        U[4, 120 : 120 + round(minutes * 6)] = 45.0  # one node stalls at minute 20
        a = Aligned(times, [f"n{i}" for i in range(12)], {"DCGM_FI_DEV_GPU_UTIL": U}, 10.0)
        return [f.node for f in detect(a, ["DCGM_FI_DEV_GPU_UTIL"], p).faulty]

    assert found(3.4, Params()) == []  # under the 4-minute continuity
    assert found(5.0, Params()) == ["n4"]
    # the trailing 60 s window carried the 3.4-minute stall past 4 minutes (before round 8)
    assert found(3.4, Params(step_support=False)) == ["n4"]


def test_pcie_replays_within_nvidias_limit_are_no_evidence() -> None:
    from aegis_slurm.metrics.align import Aligned

    times = 1e9 + 15.0 * np.arange(240)  # 60 min
    rng = np.random.default_rng(2)

    def found(per_minute: float) -> list:
        X = np.zeros((16, times.size))
        X[6, 80:] = rng.poisson(per_minute / 4, times.size - 80).cumsum()  # from minute 20
        a = Aligned(
            times, [f"n{i}" for i in range(16)], {"DCGM_FI_DEV_PCIE_REPLAY_COUNTER": X}, 15.0
        )
        return [f.node for f in detect(a, ["DCGM_FI_DEV_PCIE_REPLAY_COUNTER"], Params()).faulty]

    assert found(1.0) == []  # a replay a minute, for 40 minutes: within DCGM's 8 a minute
    assert found(30.0) == ["n6"]  # a link retrying every two seconds
