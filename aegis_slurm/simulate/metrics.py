"""Per-node monitoring traces of synchronous training jobs, with planted faults (for Minder).

What this models (and the detector must cope with), per the Minder and Aegis papers:

* one long table per job, ``time, node, metric, value``, dcgm-exporter / node_exporter names; GPU
  metrics aggregated per node the way :mod:`aegis_slurm.metrics.catalog` says (lowest clock, ...);
  counters cumulative, as exporters ship them;
* every node's two exporters are scraped at their own offset within the interval, with jitter,
  and ~1 % of scrapes are missing;
* benign events that must stay quiet: nodes starting up to 90 s apart (warm-up), checkpoint pauses
  on all nodes at once, a job-wide slowdown, a short blip on one node (< 4 min), one node with a
  constant hardware offset (warmer, more power, a slightly lower clock), pipeline stages whose
  load differs for good plus rank 0's extra CPU and memory, and scrape glitches (0.3 % of
  gauge samples off by a factor 0.3-2);
* synchronous training: a fault that slows one node slows every node, so utilisation-like metrics
  move together and the culprit shows only in metrics local to it; when a rank dies, its peers
  hang in NCCL (utilisation ~100 % at idle power) until the NCCL timeout, then the job ends;
* the faults Minder reports (NSDI'25 §2): ECC and CUDA errors (the rank dies), NVLink errors,
  PCIe downgrade, NIC dropout (the port's series vanish), AOC flapping (link-down counter, rx dips),
  machine unreachable (every series vanishes), slow GPU (clock throttled, culprit busy while its
  peers wait).

This data proves the plumbing and the benign cases; it is not evidence of real-world accuracy.
Deterministic for a given seed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np
import polars as pl

FAULTS = ("ecc", "cuda", "nvlink", "pcie", "nic", "aoc", "unreachable", "slow_gpu")
#: faults after which a rank is gone and its peers hang in NCCL until the timeout
_HANGS = {"ecc", "cuda", "nic", "unreachable"}
#: how much a fault slows the whole (synchronous) job
_SLOW = {"nvlink": 0.8, "pcie": 0.85, "aoc": 0.8, "slow_gpu": 0.65}

DCGM = (
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_SM_CLOCK",
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
    "DCGM_FI_PROF_PCIE_TX_BYTES",
    "DCGM_FI_PROF_NVLINK_TX_BYTES",
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
    # last and without random draws, so the other series' draws stay as they were: the default
    # NVLink bandwidth field as dcgm-exporter serves it (Prometheus tests) -- a rate in MiB/s,
    # which DCGM computes although the CSV types it "counter" -- and the per-node minimum of it
    # under the catalog's derived name (offline tables)
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
    "Hostname:DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL:rate_min_gpu",
    # the last Xid (no random draw either): 74 after an NVLink fault, 48 (double-bit ECC) after
    # an ECC fault, 0 otherwise (NVIDIA's Xid catalogue)
    "DCGM_FI_DEV_XID_ERRORS",
)
#: the lowest per-port IB receive rate (catalog.PORT_MIN, a PromQL ``min by (instance)
#: (rate(...[1m]))`` over 8 ports): last, so the other series' random draws stay as they were
PORT_MIN = "instance:node_infiniband_port_data_received_bytes:rate_min_port"
NODE = (
    "node_infiniband_port_data_received_bytes_total",
    "node_infiniband_link_downed_total",
    "node_load1",
    "node_memory_MemAvailable_bytes",
    PORT_MIN,
    # last, so every other series' random draws stay as they were
    "node_infiniband_port_errors_received_total",
)


#: benign events, each drawn into a job with probability 0.6 (late start and checkpoints always)
BENIGN = ("late_start", "checkpoint", "slowdown", "blip", "offset", "pipeline", "spikes")

_SCHEMA = {"t": pl.Float64, "node": pl.Utf8, "metric": pl.Utf8, "value": pl.Float64}


@dataclass(frozen=True)
class Truth:
    """What was planted: the faulty node (or None), the fault and its onset (epoch seconds)."""

    node: str | None
    fault: str | None
    onset: float | None
    benign: tuple[str, ...]


def simulate_job(
    n_nodes: int = 16,
    minutes: float = 90.0,
    fault: str | None = None,
    seed: int = 0,
    step: float = 15.0,
    start: datetime | None = None,
    benign: tuple[str, ...] | None = None,
    missing: float = 0.01,
) -> tuple[pl.DataFrame, Truth]:
    """One job's long table and its ground truth.  ``benign`` None: a random mix of all five."""
    if fault is not None and fault not in FAULTS:
        raise ValueError(f"unknown fault {fault!r}; one of {', '.join(FAULTS)}")
    rng = np.random.default_rng(seed)
    t0 = (start or datetime(2026, 1, 5, 8, 0, tzinfo=UTC)).timestamp()
    dur = minutes * 60.0
    nodes = [f"gpu{i:04d}" for i in range(n_nodes)]
    if benign is None:
        benign = tuple(b for b in BENIGN if b in ("late_start", "checkpoint") or rng.random() < 0.6)
    culprit = int(rng.integers(n_nodes)) if fault else None
    onset = t0 + float(rng.uniform(0.25, 0.6)) * dur if fault else None
    hang_end = onset + float(rng.uniform(8, 20)) * 60 if fault in _HANGS else None  # NCCL timeout
    end = min(t0 + dur, hang_end) if hang_end is not None else t0 + dur

    def job_windows() -> dict[str, list[tuple[float, float]]]:
        w: dict[str, list[tuple[float, float]]] = {"checkpoint": [], "slowdown": []}
        if "checkpoint" in benign:
            every = float(rng.uniform(15, 30)) * 60
            t = t0 + every
            while t < end:
                w["checkpoint"].append((t, t + float(rng.uniform(60, 180))))
                t += every
        if "slowdown" in benign:
            s = t0 + float(rng.uniform(0.1, 0.8)) * dur
            w["slowdown"].append((s, s + float(rng.uniform(8, 20)) * 60))
        return w

    win = job_windows()
    late = rng.uniform(0, 90 if "late_start" in benign else 10, n_nodes)
    blip_node = int(rng.integers(n_nodes)) if "blip" in benign else -1
    blip_at = t0 + float(rng.uniform(0.2, 0.9)) * dur
    blip_len = float(rng.uniform(45, 120))
    offset_node = int(rng.integers(n_nodes)) if "offset" in benign else -1

    frames = []
    for _exporter, names in (("dcgm", DCGM), ("node", NODE)):
        off = rng.uniform(0, step, n_nodes)
        k = np.arange(int(np.ceil((end - t0) / step)) + 1)
        ts = t0 + off[:, None] + k[None, :] * step + rng.normal(0, 0.3, (n_nodes, k.size))
        keep = (ts <= end) & (rng.random(ts.shape) >= missing)
        st = _state(ts, t0, late, win, onset, hang_end, culprit, fault, rng)
        for name in names:
            v = _metric(name, ts, st, rng, step)
            v = v + (_offset(name) if offset_node >= 0 else 0.0) * (
                np.arange(n_nodes)[:, None] == offset_node
            )
            if blip_node >= 0:
                _blip(name, v, ts, blip_node, blip_at, blip_len)
            if "pipeline" in benign:
                _pipeline(name, v)
            if "spikes" in benign and not name.endswith(
                ("_total", "_COUNTER", "_TOTAL", "_ERRORS")
            ):
                glitch = rng.random(v.shape) < 0.003
                v = np.where(glitch, v * rng.uniform(0.3, 2.0, v.shape), v)
            ok = keep & ~_vanished(name, st)
            ii, jj = np.nonzero(ok)
            frames.append(
                pl.DataFrame(
                    {
                        "t": ts[ii, jj],
                        "node": np.asarray(nodes, dtype=object)[ii],
                        "metric": name,
                        "value": v[ii, jj],
                    },
                    schema={
                        "t": pl.Float64,
                        "node": pl.Utf8,
                        "metric": pl.Utf8,
                        "value": pl.Float64,
                    },
                )
            )
    df = pl.concat(frames).select(
        (pl.col("t") * 1e6).cast(pl.Int64).cast(pl.Datetime("us", "UTC")).alias("time"),
        "node",
        "metric",
        "value",
    )
    truth = Truth(nodes[culprit] if culprit is not None else None, fault, onset, tuple(benign))
    return df.sort("time", "node"), truth


def _state(ts, t0, late, win, onset, hang_end, culprit, fault, rng) -> dict[str, np.ndarray]:
    """Per (node, sample) state: training load in [0, 1], pause, hang, the culprit's fault."""
    n = ts.shape[0]
    ramp = np.clip((ts - t0 - late[:, None]) / 120.0, 0, 1)  # each node warms up over 2 min
    pause = np.zeros(ts.shape, bool)
    for a, b in win["checkpoint"]:
        pause |= (ts >= a) & (ts < b)
    speed = np.ones(ts.shape)
    for a, b in win["slowdown"]:
        speed = np.where((ts >= a) & (ts < b), 0.7, speed)
    is_c = (np.arange(n) == culprit)[:, None] if culprit is not None else np.zeros((n, 1), bool)
    faulted = (ts >= onset) if onset is not None else np.zeros(ts.shape, bool)
    if fault in _SLOW:
        speed = np.where(faulted, speed * _SLOW[fault], speed)
    hang = faulted & (fault in _HANGS)
    return {
        "ramp": ramp,
        "pause": pause,
        "speed": speed,
        "hang": hang,
        "fc": faulted & is_c,  # the culprit, after onset
        "fault": np.array(fault or ""),
    }


def _metric(name: str, ts, st, rng, step) -> np.ndarray:
    """Values of one metric at the sample times (cumulative for counters)."""
    ramp, pause, speed, hang, fc = st["ramp"], st["pause"], st["speed"], st["hang"], st["fc"]
    fault = str(st["fault"])
    if "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL" in name:  # no random draw (see DCGM)
        rate = ramp * ~pause * ~hang * (120e9 / 2**20) * speed  # MiB/s
        return np.where(fc & (fault == "nvlink"), rate * 0.5, rate)
    if name == "DCGM_FI_DEV_XID_ERRORS":  # no random draw (see DCGM)
        code = {"nvlink": 74.0, "ecc": 48.0}.get(fault, 0.0)
        return np.where(fc, code, 0.0)
    noise = rng.normal(0, 1, ts.shape)
    busy = ramp * ~pause * ~hang  # doing compute
    dead = fc & (fault in ("ecc", "cuda"))
    if name == "DCGM_FI_DEV_GPU_UTIL":
        v = np.where(pause, 4 + 2 * noise, 97 * ramp + 1.5 * noise)
        v = np.where(hang, 100 - np.abs(noise) * 0.3, v)
        v = np.where(dead, 0.0, v)
        return np.clip(v, 0, 100)
    if name == "DCGM_FI_DEV_POWER_USAGE":
        v = 70 + busy * 330 * speed + 12 * noise
        v = np.where(hang, 88 + 3 * noise, v)
        v = np.where(dead, 58 + 2 * noise, v)
        return np.where(fc & (fault == "slow_gpu"), v - 110, v)
    if name == "DCGM_FI_DEV_SM_CLOCK":
        v = np.where(busy > 0.5, 1980 + 10 * noise, 1410 + 10 * noise)
        v = np.where(hang, 1980 + 5 * noise, v)
        return np.where(fc & (fault == "slow_gpu"), 1230 + 40 * noise, v)
    if name == "DCGM_FI_DEV_GPU_TEMP":
        v = 38 + 32 * busy * speed + 0.8 * noise
        return np.where(fc & (fault == "slow_gpu"), 87 + noise, v)
    if name == "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE":
        v = busy * 0.55 * speed + 0.02 * noise
        return np.clip(np.where(fc & (fault == "slow_gpu"), busy * 0.56, v), 0, 1)
    if name == "DCGM_FI_PROF_PCIE_TX_BYTES":
        v = busy * 2.0e9 * speed * (1 + 0.08 * noise) + pause * 8e9
        return np.where(fc & (fault == "pcie"), v * 0.45, v)
    if name == "DCGM_FI_PROF_NVLINK_TX_BYTES":
        v = busy * 120e9 * speed * (1 + 0.05 * noise)
        return np.where(fc & (fault == "nvlink"), v * 0.5, v)
    if name == "DCGM_FI_DEV_PCIE_REPLAY_COUNTER":
        rate = np.where(fc & (fault == "pcie"), 20.0, 0.002)
        return _counter(rate, ts, rng)
    if name == "node_infiniband_port_data_received_bytes_total":
        rate = busy * 20e9 * speed + pause * 2e9
        flap = fc & (fault == "aoc") & (((ts - ts[:, :1]) % 75.0) < 20.0)
        return _counter(np.where(flap, rate * 0.3, rate), ts, rng, exact=True)
    if name == "node_infiniband_link_downed_total":
        rate = np.where(fc & (fault == "aoc"), 1 / 60.0, 0.0)
        return _counter(rate, ts, rng)
    if name == PORT_MIN:  # 8 ports; the flapping one is down 20 s of each 75 s: a 1-min rate -27 %
        v = (busy * 20e9 * speed + pause * 2e9) / 8 * (1 + 0.02 * noise)
        return np.where(fc & (fault == "aoc"), v * 0.73, v)
    if name == "node_infiniband_port_errors_received_total":  # ~2 benign per node-hour
        rate = np.where(fc & (fault == "aoc"), 0.5, 2 / 3600.0)
        return _counter(rate, ts, rng)
    if name == "node_load1":
        return np.clip(2 + 22 * busy + 30 * pause + 1.5 * noise, 0, None)
    if name == "node_memory_MemAvailable_bytes":
        return 1.9e12 - 0.9e12 * ramp + 5e9 * noise
    raise ValueError(name)


def _counter(rate, ts, rng, exact: bool = False) -> np.ndarray:
    """A cumulative counter whose per-interval increase follows ``rate`` (Poisson unless exact)."""
    dt = np.diff(ts, axis=1, prepend=ts[:, :1])
    inc = rate * dt if exact else rng.poisson(np.clip(rate * dt, 0, None)).astype(float)
    return 1e6 + np.cumsum(inc, axis=1)


def _offset(name: str) -> float:
    """The constant hardware offset of one healthy node (warmer, hungrier, lower clock)."""
    return {
        "DCGM_FI_DEV_GPU_TEMP": 4.0,
        "DCGM_FI_DEV_POWER_USAGE": 15.0,
        "DCGM_FI_DEV_SM_CLOCK": -30.0,
    }.get(name, 0.0)


def _blip(name: str, v: np.ndarray, ts, node: int, at: float, length: float) -> None:
    """A short dip on one node (a noisy neighbour, a brief throttle): well under 4 minutes."""
    m = (ts[node] >= at) & (ts[node] < at + length)
    factor = {
        "DCGM_FI_DEV_SM_CLOCK": 0.7,
        "DCGM_FI_DEV_POWER_USAGE": 0.6,
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": 0.5,
    }.get(name)
    if factor is not None:
        v[node, m] *= factor


#: per pipeline-parallel stage (4 stages over the nodes in order): the first stage holds the
#: embeddings, the last computes the loss; middle stages send activations both ways
_STAGE = {
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": (0.9, 1.0, 1.0, 1.1),
    "DCGM_FI_DEV_POWER_USAGE": (0.95, 1.0, 1.0, 1.05),
    "DCGM_FI_PROF_NVLINK_TX_BYTES": (1.0, 1.15, 1.15, 1.0),
    "node_infiniband_port_data_received_bytes_total": (0.85, 1.0, 1.0, 0.85),
}


def _pipeline(name: str, v: np.ndarray) -> None:
    """Pipeline stages that differ for good, and rank 0's extra CPU and memory (logging, eval)."""
    n = v.shape[0]
    if name in _STAGE:
        f = np.asarray(_STAGE[name])[np.arange(n) * 4 // n][:, None]
        if name.endswith("_total"):
            v[:] = v[:, :1] + (v - v[:, :1]) * f  # scale the counter's increments
        else:
            v *= f
    elif name == "node_load1":
        v[0] += 8.0
    elif name == "node_memory_MemAvailable_bytes":
        v[0] -= 150e9


def _vanished(name: str, st) -> np.ndarray:
    """Samples that never reach Prometheus: the culprit's series after NIC loss or a dead host."""
    fault, fc = str(st["fault"]), st["fc"]
    if fault == "unreachable":
        return fc
    if fault == "nic" and name.startswith(("node_infiniband", "instance:node_infiniband")):
        return fc
    return np.zeros(fc.shape, bool)


def corpus(
    seed: int, jobs_per_fault: int = 4, healthy: int = 12
) -> list[tuple[pl.DataFrame, Truth]]:
    """A labelled set of jobs: ``jobs_per_fault`` of each fault plus ``healthy`` fault-free jobs.

    Job sizes 8-64 nodes, 60-120 minutes.  Use different seeds for tuning and evaluation.
    """
    rng = np.random.default_rng(seed)
    plan = [f for f in FAULTS for _ in range(jobs_per_fault)] + [None] * healthy
    out = []
    for i, f in enumerate(plan):
        out.append(
            simulate_job(
                n_nodes=int(rng.integers(8, 65)),
                minutes=float(rng.uniform(60, 120)),
                fault=f,
                seed=seed * 100_000 + i,
            )
        )
    return out
