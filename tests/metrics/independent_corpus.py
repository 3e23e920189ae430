"""An independent labelled corpus of per-node metric traces, written without reading the shipped
simulator (``aegis_slurm/simulate/metrics.py``): other job sizes, scrape cadences, value ranges
and fault models, to measure the detectors on data their author did not shape.

Assumptions (this author's, documented so a reader can disagree with them):

* Hardware profiles from public outputs: A100-SXM4 (``nvidia-smi -q`` in NVIDIA/DCGM issue #152:
  max SM clock 1410 MHz, power limit 400 W) and H100-SXM (1980 MHz, 700 W); idle power ~55-90 W
  (dcgm-exporter issue #317 shows an idle A30 at 52.6 W); training temperatures 55-80 °C.
* 8 GPUs per node, one series per GPU, aggregated per node as the table's contract says (the
  catalog's function: lowest clock/power/utilisation/tensor duty/PCIe/NVLink rate, highest
  temperature, summed counters).  node_exporter: 8 InfiniBand ports summed, load, memory.
* Jobs of 8-512 nodes, scraped every 10, 15, 30 or 60 s; each node's exporter at its own offset,
  ±1.5 s jitter, 1-3 % of scrapes lost (sometimes two in a row).
* Synchronous data-parallel training: a global throughput factor ``s(t)`` scales every node's
  tensor duty, PCIe/NVLink/IB rates and (partly) power.  A node that waits in NCCL keeps GPU
  utilisation near 100 % (the collective kernel runs) at lower power.
* Healthy jobs carry the hard benign cases: a staggered warm-up (3-8 min), checkpoint pauses on
  all nodes with ±40 s skew and rank 0 writing 30-90 s longer, a job-wide slowdown, a short
  blip (< 3 min) on one node, a constant per-node hardware offset, sparse benign counter
  increments, a late-starting node, and rank 0's extra CPU and memory.  "One GPU idle by design"
  is generated as its own category (``kind="idle_gpu"``): the per-node minimum cannot tell it from
  a dead GPU, so it is reported apart, not mixed into the headline figure.
* Faults (onset 12-30 min into the job): slow GPU by clock (power brake), by temperature
  (thermal throttle), by power cap; one IB port dropping; PCIe link downgrade with replays; NVLink
  errors; ECC/Xid then the job hanging (peers at ~100 % utilisation and idle power, the culprit's
  process gone); machine unreachable (stops reporting); AOC cable flapping.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np
import polars as pl

GPUS, PORTS = 8, 8
FAULTS = (
    "slow_clock",
    "slow_thermal",
    "slow_power",
    "nic_port_down",
    "pcie_downgrade",
    "nvlink_errors",
    "xid_hang",
    "unreachable",
    "aoc_flapping",
)
BENIGN = (
    "warmup",
    "checkpoint",
    "jobwide_slowdown",
    "blip",
    "offset",
    "sparse_counter",
    "late_starter",
    "rank0",
)
PROFILES = {
    "A100": {"clock": 1410.0, "idle_clock": 210.0, "power": 330.0, "idle_power": 58.0, "cap": 400},
    "H100": {"clock": 1980.0, "idle_clock": 345.0, "power": 560.0, "idle_power": 85.0, "cap": 700},
}


@dataclass(frozen=True)
class Label:
    kind: str  # "healthy" | "idle_gpu" | one of FAULTS
    node: str | None  # the culprit
    onset: float | None  # epoch seconds


def job(seed: int, kind: str) -> tuple[pl.DataFrame, Label]:
    """One job's long table (``time, node, metric, value``) and its label."""
    rng = np.random.default_rng(seed)
    n = int(
        rng.choice(
            [8, 8, 16, 16, 32, 64, 128, 256, 512],
            p=[0.15, 0.1, 0.15, 0.1, 0.15, 0.15, 0.1, 0.05, 0.05],
        )
    )
    step = float(rng.choice([10.0, 15.0, 15.0, 30.0, 60.0]))
    dur = float(rng.uniform(45, 70) * 60)
    hw = PROFILES[str(rng.choice(list(PROFILES)))]
    t0 = datetime(2026, 3, 1, tzinfo=UTC).timestamp() + seed * 7200.0
    tt = np.arange(0.0, dur, 5.0)  # a fine "true" clock; scrapes sample it
    T = tt.size
    names = [f"gpu{seed % 97:02d}-{i:04d}" for i in range(n)]

    # ---- job-wide state: throughput factor s and the phase (train / pause) per node ----------
    s = np.ones(T)
    warm = rng.uniform(180, 480)
    start = rng.uniform(20, warm * 0.6, size=n)  # when each node finishes loading
    train = tt[None, :] >= start[:, None]
    ramp = np.clip((tt - warm * 0.6) / (warm * 0.4), 0, 1)  # compile/first steps: slow
    s = s * (0.3 + 0.7 * ramp)
    pause = np.zeros((n, T), bool)
    period = rng.uniform(15, 30) * 60
    for c in np.arange(warm + period, dur - 120, period):
        length = rng.uniform(60, 240)
        skew = rng.uniform(-40, 40, size=n)
        extra = np.zeros(n)
        extra[0] = rng.uniform(30, 90)  # rank 0 writes the checkpoint's metadata
        pause |= (tt[None, :] >= c + skew[:, None]) & (tt[None, :] < c + length + extra[:, None])
    if rng.random() < 0.5:  # job-wide slowdown (storage, a slow peer job on the fabric)
        a = rng.uniform(warm + 60, dur - 900)
        s = np.where((tt >= a) & (tt < a + rng.uniform(300, 900)), s * rng.uniform(0.5, 0.8), s)
    # everyone waits for the last loader (a late starter): until then those done sit in NCCL
    late = int(rng.integers(n)) if rng.random() < 0.4 else None
    if late is not None:
        start[late] = warm * 0.6 + rng.uniform(60, 240)
        train = tt[None, :] >= start[:, None]
    all_in = tt >= start.max()

    # ---- per GPU, per node baselines ----------------------------------------------------------
    pw = hw["power"] * rng.uniform(0.9, 1.05)
    clk = np.full((n, GPUS), hw["clock"] - rng.uniform(0, 60))
    power = np.full((n, GPUS), pw) * rng.normal(1, 0.02, size=(n, GPUS))
    temp = rng.uniform(58, 72, size=(n, GPUS))
    tensor0 = rng.uniform(0.25, 0.55)
    pcie0 = rng.uniform(0.5e9, 3e9)
    nvl0 = rng.uniform(2e10, 9e10)
    ib0 = rng.uniform(3e9, 2.2e10) / PORTS  # bytes/s per port
    load0 = rng.uniform(8, 30)
    mem_total = float(rng.choice([1.0e12, 2.0e12]))
    mem0 = mem_total * rng.uniform(0.3, 0.6)
    offset_node = int(rng.integers(n)) if rng.random() < 0.6 else None
    if offset_node is not None:  # a hotter, lower-clocked, hungrier node, all job long
        temp[offset_node] += rng.uniform(4, 9)
        clk[offset_node] -= rng.uniform(30, 90)
        power[offset_node] *= rng.uniform(1.04, 1.1)

    # gpu-level multipliers over time: (n, GPUS, T)
    g_clock = np.ones((n, GPUS, T))
    g_power = np.ones((n, GPUS, T))
    g_temp = np.zeros((n, GPUS, T))
    g_pcie = np.ones((n, GPUS, T))
    g_nvl = np.ones((n, GPUS, T))
    port = np.ones((n, PORTS, T))
    replay = np.zeros((n, GPUS, T))  # increments per 5 s tick
    downed = np.zeros((n, PORTS, T))
    dead = np.zeros((n, T), bool)  # the node's training process is gone
    silent = np.zeros((n, T), bool)  # the node does not answer scrapes
    hang = np.zeros(T, bool)  # peers stuck in a collective
    end_at = dur

    label = Label("healthy", None, None)
    culprit = int(rng.integers(1, n))  # not rank 0: keep "rank 0 is special" separate
    g = int(rng.integers(GPUS))
    onset = float(rng.uniform(12, 30) * 60)
    after = tt >= onset
    if kind == "idle_gpu":  # world size 8n-1: one GPU has nothing to do all job long
        label = Label("idle_gpu", names[culprit], None)
    elif kind in FAULTS:
        label = Label(kind, names[culprit], t0 + onset)
    if kind == "slow_clock":
        g_clock[culprit, g, after] = rng.uniform(0.45, 0.7)
        g_power[culprit, g, after] = rng.uniform(0.55, 0.75)
        s = np.where(after, s * rng.uniform(0.5, 0.75), s)
    elif kind == "slow_thermal":
        g_temp[culprit, g, after] = np.minimum((tt[after] - onset) / 120, 1) * rng.uniform(18, 26)
        g_clock[culprit, g, after] = rng.uniform(0.7, 0.85)
        s = np.where(after, s * rng.uniform(0.7, 0.85), s)
    elif kind == "slow_power":
        g_power[culprit, g, after] = rng.uniform(0.5, 0.65)
        g_clock[culprit, g, after] = rng.uniform(0.6, 0.8)
        s = np.where(after, s * rng.uniform(0.65, 0.8), s)
    elif kind == "nic_port_down":
        p = int(rng.integers(PORTS))
        port[culprit, p, after] = 0.0
        downed[culprit, p, int(np.argmax(after))] = 1
        s = np.where(after, s * rng.uniform(0.6, 0.85), s)
    elif kind == "pcie_downgrade":
        g_pcie[culprit, g, after] = rng.choice([0.5, 0.25, 0.125])
        replay[culprit, g, after] = rng.poisson(rng.uniform(0.5, 4), size=int(after.sum()))
        s = np.where(after, s * rng.uniform(0.8, 0.95), s)
    elif kind == "nvlink_errors":
        g_nvl[culprit, g, after] = rng.uniform(0.3, 0.7)
        s = np.where(after, s * rng.uniform(0.75, 0.9), s)
    elif kind == "xid_hang":
        dead[culprit, after] = True
        hang = after.copy()
        end_at = min(dur, onset + rng.uniform(10, 30) * 60)  # NCCL timeout, then the job ends
    elif kind == "unreachable":
        silent[culprit, after] = True
        hang = after.copy()
        end_at = min(dur, onset + rng.uniform(10, 30) * 60)
    elif kind == "aoc_flapping":
        p = int(rng.integers(PORTS))
        tick = onset
        while tick < dur:
            down = rng.uniform(10, 40)
            m = (tt >= tick) & (tt < tick + down)
            port[culprit, p, m] = 0.0
            downed[culprit, p, int(np.argmax(tt >= tick))] += 1
            s = np.where(m, s * 0.6, s)
            tick += rng.uniform(45, 150)

    # benign, also in faulty jobs: a blip and sparse counters on random nodes
    if rng.random() < 0.6:
        b = int(rng.integers(n))
        a = rng.uniform(warm, dur - 200)
        m = (tt >= a) & (tt < a + rng.uniform(30, 170))
        which = rng.integers(3)
        if which == 0:
            g_clock[b, :, m] = 0.8
        elif which == 1:
            port[b, :, m] = 0.3
        else:
            g_power[b, :, m] = 0.7
    for _ in range(int(rng.integers(0, 4))):
        replay[int(rng.integers(n)), int(rng.integers(GPUS)), int(rng.integers(T))] += 1
    if rng.random() < 0.3:
        downed[int(rng.integers(n)), int(rng.integers(PORTS)), int(rng.integers(T))] += 1

    # ---- compose the observable per-GPU values -------------------------------------------------
    busy = train & ~pause & all_in[None, :] & ~hang[None, :]  # computing
    waiting = (train & ~pause & ~busy) | (hang[None, :] & ~dead)  # in NCCL
    busy &= ~dead
    waiting &= ~dead
    s_n = np.broadcast_to(s, (n, T))
    act = np.where(busy, s_n, 0.0)  # share of peak work per node
    noise = rng.normal(1, 0.015, size=(n, GPUS, T))
    util = np.where(busy | waiting, 100.0 - np.abs(rng.normal(0, 1.5, (n, T))), 0.0)[:, None, :]
    util = np.repeat(util, GPUS, axis=1) * np.where(
        busy[:, None, :], 1.0, np.where(waiting[:, None, :], 0.99, 1.0)
    )
    idle_p = hw["idle_power"]
    wait_p = idle_p + 0.15 * (pw - idle_p)
    pw_level = np.where(busy, idle_p + (pw - idle_p) * (0.55 + 0.45 * act), 0.0)
    pw_level = np.where(waiting, wait_p, pw_level)
    pw_level = np.where(busy | waiting, pw_level, idle_p)
    gp = pw_level[:, None, :] * (power[:, :, None] / pw) * g_power * noise
    gp = np.minimum(gp, hw["cap"])
    active = (busy | waiting)[:, None, :]
    gclk = np.where(active, clk[:, :, None] * g_clock, hw["idle_clock"]) * rng.normal(
        1, 0.004, size=(n, GPUS, T)
    )
    heat = np.clip((gp - idle_p) / (pw - idle_p), 0, 1.2)
    gtemp = 34 + (temp[:, :, None] - 34) * heat + g_temp + rng.normal(0, 0.6, (n, GPUS, T))
    gtensor = np.where(busy[:, None, :], tensor0 * act[:, None, :], 0.0) * noise
    gpcie = np.where(busy[:, None, :], pcie0 * act[:, None, :], 2e6) * g_pcie * noise
    gnvl = np.where(busy[:, None, :], nvl0 * act[:, None, :], 0.0) * g_nvl * noise
    if kind == "idle_gpu":
        for arr, v in ((util, 0.0), (gtensor, 0.0), (gnvl, 0.0), (gpcie, 2e6)):
            arr[culprit, g] = v
        gp[culprit, g] = idle_p
        gclk[culprit, g] = hw["idle_clock"]
        gtemp[culprit, g] = 36 + rng.normal(0, 0.5, T)
    ib_rate = np.where(busy[:, None, :], ib0 * act[:, None, :], 2e4) * port
    ib_rate *= rng.normal(1, 0.03, size=ib_rate.shape)
    ib_counter = np.cumsum(np.clip(ib_rate, 0, None) * 5.0, axis=2).sum(axis=1)
    ib_counter += rng.uniform(1e12, 1e14, size=(n, 1))  # counters since boot
    replay_c = np.cumsum(replay, axis=2).sum(axis=1) + rng.integers(0, 3, size=(n, 1))
    downed_c = np.cumsum(downed, axis=2).sum(axis=1) + rng.integers(0, 2, size=(n, 1))
    load = np.where(train, load0, 1.5)[...] + rng.normal(0, 1.0, (n, T))
    load[0] += rng.uniform(4, 10)  # rank 0: logging, evaluation, checkpoint metadata
    mem = np.where(train, mem_total - mem0, mem_total * 0.95) - rng.normal(0, 2e9, (n, T))
    mem[0] -= rng.uniform(5e10, 1.5e11)

    per_node = {
        "DCGM_FI_DEV_GPU_UTIL": util.min(axis=1).round(),
        "DCGM_FI_DEV_POWER_USAGE": gp.min(axis=1),
        "DCGM_FI_DEV_SM_CLOCK": (np.round(gclk / 15) * 15).min(axis=1),
        "DCGM_FI_DEV_GPU_TEMP": gtemp.max(axis=1).round(),
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": gtensor.min(axis=1),
        "DCGM_FI_PROF_PCIE_TX_BYTES": gpcie.min(axis=1),
        "DCGM_FI_PROF_NVLINK_TX_BYTES": gnvl.min(axis=1),
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": replay_c,
        "node_infiniband_port_data_received_bytes_total": ib_counter,
        "node_infiniband_link_downed_total": downed_c,
        "node_load1": np.clip(load, 0, None),
        "node_memory_MemAvailable_bytes": mem,
    }

    # ---- scrape: per-node offset, jitter, losses; the job ends at end_at ----------------------
    frames = []
    offs = rng.uniform(0, step, size=n)
    for m, X in per_node.items():
        k = np.arange(0.0, end_at, step)
        ts = k[None, :] + offs[:, None] + rng.uniform(-1.5, 1.5, size=(n, k.size))
        ts = np.clip(ts, 0, end_at - 1e-3)
        idx = np.clip(np.searchsorted(tt, ts) - 1, 0, T - 1)
        vals = np.take_along_axis(X, idx, axis=1)
        keep = rng.random(size=vals.shape) > rng.uniform(0.01, 0.03)
        keep &= ~np.take_along_axis(silent, idx, axis=1)
        r, c = np.nonzero(keep)
        frames.append(
            pl.DataFrame(
                {
                    "time": ((t0 + ts[r, c]) * 1e6).astype(np.int64),
                    "node": np.asarray(names, dtype=object)[r],
                    "metric": m,
                    "value": vals[r, c].astype(float),
                }
            )
        )
    df = pl.concat(frames).with_columns(pl.col("time").cast(pl.Datetime("us", "UTC")))
    return df, label


def corpus(
    seed: int = 2027, healthy: int = 24, per_fault: int = 3, idle_gpu: int = 4
) -> list[tuple[str, int]]:
    """The job list: ``(kind, seed)``; generate each with :func:`job` (lazily: 512-node jobs)."""
    out = [("healthy", seed + i) for i in range(healthy)]
    out += [(f, seed + 1000 + 10 * j + i) for j, f in enumerate(FAULTS) for i in range(per_fault)]
    out += [("idle_gpu", seed + 5000 + i) for i in range(idle_gpu)]
    return out
