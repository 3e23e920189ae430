"""Corpus v3: a blind, labelled corpus of per-device training-job metrics (issue 15).

Written without reading the detector, the simulator or corpora v1/v2. Each job is a window of a
synchronous multi-node training job as Prometheus stores it: one row per scraped sample, per node,
per exporter metric, per device, raw (counters are monotonic totals since boot, not rates).

API: ``jobs(seed) -> list[Job]``; ``Job.raw`` builds the long table on demand (not cached, so a
loop over all jobs keeps one job in memory); ``aggregate(raw, agg_for)`` reduces devices per node;
``table(jobs)`` lists the labels. Rows of ``raw`` come series by series (metric, node, device), each
series in time order, as a ``query_range`` result would; no order across series is promised.

Sources (links and details in tests/fixtures/metrics_v3/README.md)
- Series names and types: NVIDIA dcgm-exporter ``etc/default-counters.csv`` at commit d5e5f510
  (2026-05-12). In that file DCGM_FI_PROF_PCIE_TX_BYTES/RX_BYTES are *gauges* (bytes per second),
  not counters; DCGM_FI_DEV_FB_RESERVED is a default series; DCGM_FI_DEV_VGPU_LICENSE_STATUS and
  DCGM_FI_DRIVER_VERSION (a label) are left out. The NVLink error counters and
  DCGM_FI_PROF_NVLINK_TX/RX_BYTES are commented out / absent in the shipped files, so only the
  "custom CSV" site (``charlie``) has them. DCGM collect interval default 30,000 ms
  (``pkg/cmd/app.go``, ``--collect-interval``); site ``charlie`` runs 10 s.
- node_exporter names from ``collector/fixtures/e2e-output.txt`` at commit a7dcc3a0 (2026-08-08):
  ``node_infiniband_port_data_{received,transmitted}_bytes_total``,
  ``node_infiniband_port_errors_received_total``, ``node_infiniband_port_discards_received_total``,
  ``node_infiniband_port_transmit_wait_total``, ``node_infiniband_link_downed_total``,
  ``node_infiniband_link_error_recovery_total`` (counters), ``node_infiniband_symbol_error_total``
  (counter, in ``collector/infiniband_linux.go``, not in the fixture); ``node_infiniband_state_id``,
  ``node_infiniband_physical_state_id``, ``node_infiniband_rate_bytes_per_second`` (gauges);
  ``node_load1``, ``node_memory_MemAvailable_bytes``, ``node_memory_MemTotal_bytes``,
  ``node_cpu_seconds_total``, ``node_pressure_memory_stalled_seconds_total``,
  ``node_vmstat_oom_kill``, ``node_network_{receive,transmit}_bytes_total``.
- Fault mix: Minder (NSDI'25, seed 004): hardware 55.8 % (ECC dominant), software 28 %,
  network 16.3 %; faults ECC/CUDA, NVLink, PCIe downgrade, NIC dropout, AOC, unreachable, slow GPU;
  continuity threshold ~4 min. Aegis §5.1 (seed 001): one slow NIC/GPU slows the whole job (+26 %
  iteration time in their case study).
- Peers of a dead/frozen rank spin in NCCL: GPU utilisation 100 % at low power (~70 W)
  (github.com/NVIDIA/nccl/issues/968, /1063, cupy/cupy#3557). NCCL watchdog timeout 10 min
  (PyTorch ProcessGroupNCCL default since pytorch/pytorch#110947) before the job is torn down.

Model (assumptions; a number with no source is marked GUESS in the README table)
- Synchronous step: step time F(t) = max(job-wide factor, slowest GPU's factor). A GPU with
  slowness s computes for w0*s/F of the time and spins in NCCL the rest; w0 = 0.75 (GUESS). So a
  slow GPU makes every node's tensor activity/power fall and its own stay high; throughput-like
  series (IB bytes, PCIe, NVLink) move together on all nodes.
- Communication faults (NVLink, PCIe, AOC) slow the job without changing the culprit's compute
  share; the culprit is visible only in its local link series (counters, state, per-GPU rates).
- Hang faults (ECC/Xid, frozen GPU, fallen off the bus, NIC dropout, unreachable): from onset every
  surviving rank spins (util 100 %, low power, no traffic) for the 10-min NCCL timeout, then all
  processes exit (idle, framebuffer freed); the window ends 1-2 min later.
- Each job's culprit onset lies >= 12 min after start (after warm-up) and >= 9 min before end.
- Labels: a culprit is the node whose hardware caused the fault; onsets are exact (not snapped).
  Benign jobs have no culprit even if one node looks different (by design, by position, briefly).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import numpy as np
import polars as pl
from scipy.signal import lfilter

# --------------------------------------------------------------------------- kinds

FAULT_KINDS: tuple[str, ...] = (
    "ecc_xid",  # uncorrectable ECC / contained error, Xid 48/94, rank dies or its GPU stops
    "gpu_fell_off_bus",  # Xid 79: one GPU's series vanish
    "gpu_hang",  # silent frozen GPU (no Xid), busy at mid power while peers spin at idle power
    "nvlink_errors",  # NVLink CRC/replay errors or Xid 74, degraded link, job slower
    "pcie_downgrade",  # link trained down + PCIe replays, job slower
    "thermal_slowdown",  # one GPU (or a node whose fans failed) throttles, job slower
    "power_brake",  # HW power brake on a node: all 8 GPUs at ~half clock
    "nic_dropout",  # an IB port goes down, NCCL stops
    "aoc_flapping",  # an active optical cable flaps: link_downed/error counters climb
    "unreachable",  # the machine stops reporting (kernel panic / network)
    "host_mem_pressure",  # host memory leak: reclaim stalls the node's data loader
    "two_faults",  # two independent degradations on two nodes
)

BENIGN_KINDS: tuple[str, ...] = (
    "healthy_steady",
    "late_start",
    "checkpoint_pauses",
    "jobwide_slowdown",
    "nccl_timeout_jobwide",
    "eval_phases",
    "short_blips",
    "constant_offsets",
    "cooling_zones",
    "idle_gpu",
    "profiling_pause",
    "dataloader_jitter",
    "rank0_extra",
    "heterogeneous_racks",
)

_FAULT_COUNTS = {
    "ecc_xid": 7,
    "gpu_fell_off_bus": 3,
    "gpu_hang": 3,
    "nvlink_errors": 4,
    "pcie_downgrade": 4,
    "thermal_slowdown": 4,
    "power_brake": 3,
    "nic_dropout": 3,
    "aoc_flapping": 4,
    "unreachable": 3,
    "host_mem_pressure": 3,
    "two_faults": 3,
}
_BENIGN_COUNTS = {
    "healthy_steady": 3,
    "late_start": 4,
    "checkpoint_pauses": 4,
    "jobwide_slowdown": 4,
    "nccl_timeout_jobwide": 3,
    "eval_phases": 3,
    "short_blips": 4,
    "constant_offsets": 4,
    "cooling_zones": 3,
    "idle_gpu": 3,
    "profiling_pause": 3,
    "dataloader_jitter": 3,
    "rank0_extra": 3,
    "heterogeneous_racks": 3,
}
# Kinds whose fault stops the collective (peers spin in NCCL until the timeout).
_HANG_FAULTS = {"ecc_xid", "gpu_fell_off_bus", "gpu_hang", "nic_dropout", "unreachable"}
_DEGRADE_FAULTS = (
    "nvlink_errors",
    "pcie_downgrade",
    "thermal_slowdown",
    "power_brake",
    "aoc_flapping",
    "host_mem_pressure",
)

# --------------------------------------------------------------------------- series

GPU_METRICS: tuple[str, ...] = (
    "DCGM_FI_DEV_SM_CLOCK",
    "DCGM_FI_DEV_MEM_CLOCK",
    "DCGM_FI_DEV_MEMORY_TEMP",
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_MEM_COPY_UTIL",
    "DCGM_FI_DEV_ENC_UTIL",
    "DCGM_FI_DEV_DEC_UTIL",
    "DCGM_FI_DEV_XID_ERRORS",
    "DCGM_FI_DEV_FB_FREE",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_FB_RESERVED",
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
    "DCGM_FI_DEV_ROW_REMAP_FAILURE",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
    "DCGM_FI_PROF_DRAM_ACTIVE",
    "DCGM_FI_PROF_PCIE_TX_BYTES",
    "DCGM_FI_PROF_PCIE_RX_BYTES",
)
CUSTOM_GPU_METRICS: tuple[str, ...] = (
    "DCGM_FI_PROF_NVLINK_TX_BYTES",
    "DCGM_FI_PROF_NVLINK_RX_BYTES",
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
)
IB_METRICS: tuple[str, ...] = (
    "node_infiniband_port_data_received_bytes_total",
    "node_infiniband_port_data_transmitted_bytes_total",
    "node_infiniband_port_errors_received_total",
    "node_infiniband_port_discards_received_total",
    "node_infiniband_port_transmit_wait_total",
    "node_infiniband_link_downed_total",
    "node_infiniband_link_error_recovery_total",
    "node_infiniband_symbol_error_total",
    "node_infiniband_state_id",
    "node_infiniband_physical_state_id",
    "node_infiniband_rate_bytes_per_second",
)
HOST_METRICS: tuple[str, ...] = (
    "node_load1",
    "node_memory_MemAvailable_bytes",
    "node_memory_MemTotal_bytes",
    "node_cpu_seconds_total",  # mode="idle", summed over CPUs (see README)
    "node_pressure_memory_stalled_seconds_total",
    "node_vmstat_oom_kill",
    "node_network_receive_bytes_total",  # frontend Ethernet, device label dropped
    "node_network_transmit_bytes_total",
)
PROF_METRICS = frozenset(m for m in GPU_METRICS + CUSTOM_GPU_METRICS if "_PROF_" in m)
COUNTERS = frozenset(
    {
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
        "node_cpu_seconds_total",
        "node_pressure_memory_stalled_seconds_total",
        "node_vmstat_oom_kill",
        "node_network_receive_bytes_total",
        "node_network_transmit_bytes_total",
    }
    | {m for m in IB_METRICS if m.endswith("_total")}
)
ALL_METRICS: tuple[str, ...] = GPU_METRICS + CUSTOM_GPU_METRICS + IB_METRICS + HOST_METRICS

# --------------------------------------------------------------------------- hardware


@dataclass(frozen=True)
class GpuSku:
    """Per-SKU constants. tdp/clocks/memory from NVIDIA datasheets; idle power GUESS."""

    name: str
    tdp: float  # W
    idle_w: float  # W, idle with persistence mode (GUESS)
    max_sm: float  # MHz, max boost
    idle_sm: float  # MHz, idle clock (GUESS)
    mem_clock: float  # MHz
    fb_mib: float  # framebuffer total
    pcie_bps: float  # practical PCIe bytes/s per direction (Gen4 x16 ~25 GB/s, Gen5 ~50)
    nvlink_bps: float  # NVLink bytes/s per GPU per direction (A100 300, H100 450, B200 900 GB/s)
    thermal_r: float  # degC per W at the GPU die above inlet (GUESS)


SKUS = {
    "A100": GpuSku("A100-SXM4-80GB", 400, 60, 1410, 210, 1593, 81920, 25e9, 300e9, 0.085),
    "A100-40": GpuSku("A100-SXM4-40GB", 400, 55, 1410, 210, 1215, 40960, 25e9, 300e9, 0.085),
    "H100": GpuSku("H100-SXM5-80GB", 700, 75, 1980, 345, 2619, 81559, 50e9, 450e9, 0.055),
    "H200": GpuSku("H200-SXM5-141GB", 700, 80, 1980, 345, 3201, 143771, 50e9, 450e9, 0.055),
    "B200": GpuSku("B200-SXM6-180GB", 1000, 140, 1965, 420, 3996, 183359, 50e9, 900e9, 0.035),
}


@dataclass(frozen=True)
class Site:
    """A cluster's exporter setup."""

    name: str
    sku: str
    ib_ports: int
    ib_rate: float  # bytes/s, node_infiniband_rate_bytes_per_second (HDR 2.5e10, NDR 5e10)
    dcgm_interval: int  # Prometheus scrape of dcgm-exporter, s
    node_interval: int  # scrape of node_exporter, s
    dcgm_collect: int  # dcgm-exporter --collect-interval, s
    custom_nvlink: bool  # custom CSV with NVLink bytes and error counters
    cpus: int
    mem_bytes: float


SITES = {
    "alpha": Site("alpha", "A100", 4, 2.5e10, 30, 30, 30, False, 256, 1.0e12),
    "bravo": Site("bravo", "H100", 8, 5e10, 15, 15, 30, False, 224, 2.0e12),
    "charlie": Site("charlie", "H200", 8, 5e10, 15, 30, 10, True, 224, 2.0e12),
    "delta": Site("delta", "B200", 8, 5e10, 60, 30, 30, False, 288, 4.0e12),
    "echo": Site("echo", "H100", 8, 5e10, 60, 60, 30, False, 224, 2.0e12),
}

# --------------------------------------------------------------------------- job spec


@dataclass
class Fault:
    """One planted fault. ``node``/``gpu``/``port`` index into the job; times in s from start."""

    kind: str
    node: int
    onset: float
    gpu: int = 0
    port: int = 0
    variant: str = ""
    mag: float = 1.0  # slowdown factor (>= 1) or kind-specific magnitude


@dataclass
class _Spec:
    """Internal event plan of a job (seconds relative to start)."""

    w0: float = 0.75
    tensor: float = 0.45
    dram: float = 0.3
    pcie_frac: float = 0.12  # PCIe rate as fraction of link capacity while training (GUESS)
    nvl_frac: float = 0.08  # NVLink rate as fraction of peak (GUESS)
    ib_frac: float = 0.3  # IB rate as fraction of line rate (GUESS)
    model_mem: float = 0.8  # fraction of FB used by the job
    late: dict[int, float] = field(default_factory=dict)  # node -> delay
    warm: float = 120.0  # warm-up length after the last rank joined
    pauses: list[tuple[float, float]] = field(default_factory=list)  # checkpoints
    evals: list[tuple[float, float]] = field(default_factory=list)
    slow: list[tuple[float, float, float]] = field(default_factory=list)  # t0, t1, factor
    hang_at: float | None = None
    timeout: float = 600.0
    stalls: list[tuple[int, float, float, float]] = field(default_factory=list)  # node,t0,dur,f
    gpu_blips: list[tuple[int, int, float, float, str]] = field(default_factory=list)
    ib_bursts: list[tuple[int, int, float, float]] = field(default_factory=list)
    idle_gpus: list[tuple[int, int]] = field(default_factory=list)
    prof_pause: list[tuple[int, float, float]] = field(default_factory=list)
    exporter_restart: list[tuple[int, float]] = field(default_factory=list)
    ib_reset: list[tuple[int, float]] = field(default_factory=list)
    temp_off: list[tuple[int, int, float]] = field(default_factory=list)  # node, gpu|-1, degC
    power_off: list[tuple[int, float]] = field(default_factory=list)  # node, factor
    zone_hot: list[int] = field(default_factory=list)
    zone_delta: float = 0.0
    rank0_factor: float = 1.0
    alt_sku_nodes: list[int] = field(default_factory=list)
    alt_sku: str = ""
    loss_p: float = 0.005
    faults: list[Fault] = field(default_factory=list)


@dataclass
class Job:
    """A labelled job window. ``raw`` is generated on each access (deterministic)."""

    name: str
    kind: str
    nodes: list[str]
    start: datetime
    end: datetime
    culprits: dict[str, datetime]
    notes: str
    dcgm_interval: int
    node_interval: int
    dcgm_collect: int
    site: str
    gpu: str
    seed: int
    resets: list[tuple[str, str, datetime]] = field(default_factory=list)  # node, metric, time
    spec: _Spec = field(default_factory=_Spec, repr=False)

    @property
    def raw(self) -> pl.DataFrame:
        return _generate(self)


# --------------------------------------------------------------------------- plan

_EPOCH = datetime(2026, 3, 2, 0, 0, tzinfo=UTC)


def _sizes(rng: np.random.Generator, n: int) -> list[int]:
    pool = [4, 8, 8, 12, 16, 16, 24, 32, 32, 48, 64, 64, 96, 128, 128]
    return [int(rng.choice(pool)) for _ in range(n)]


def jobs(seed: int = 0) -> list[Job]:
    """The corpus: ~90 labelled jobs, deterministic for ``seed``."""
    rng = np.random.default_rng([seed, 3])
    kinds = [k for k, c in _FAULT_COUNTS.items() for _ in range(c)]
    kinds += [k for k, c in _BENIGN_COUNTS.items() for _ in range(c)]
    order = rng.permutation(len(kinds))
    kinds = [kinds[i] for i in order]
    sizes = _sizes(rng, len(kinds))
    # A few large jobs (site echo, 60 s scrapes): two healthy, two faulty.
    big = {
        kinds.index("healthy_steady"): 1024,
        kinds.index("checkpoint_pauses"): 512,
        kinds.index("unreachable"): 1024,
        kinds.index("thermal_slowdown"): 256,
    }
    out = []
    for i, kind in enumerate(kinds):
        n = big.get(i, sizes[i])
        out.append(_plan(i, kind, n, n >= 256, np.random.default_rng([seed, 11, i])))
    return out


def _node_names(site: Site, n: int, rng: np.random.Generator) -> list[str]:
    per_rack = 4 if site.sku in ("H100", "H200", "B200") else 8
    first = int(rng.integers(0, 400))
    prefix = f"{site.name[:2]}{site.sku.lower()}"
    return [f"{prefix}-r{(first + j) // per_rack:03d}-n{(first + j) % per_rack}" for j in range(n)]


def _plan(i: int, kind: str, n: int, big: bool, rng: np.random.Generator) -> Job:
    """Draw one job's window, background events and its kind's events."""
    if big:
        site = SITES["echo"]
    elif kind == "nvlink_errors" and i % 2 == 0:
        site = SITES["charlie"]
    else:
        site = SITES[str(rng.choice(["alpha", "bravo", "bravo", "charlie", "delta"]))]
    if kind == "heterogeneous_racks" and site.name == "delta":  # no second B200 SKU
        site = SITES["bravo"]
    sp = _Spec()
    sp.w0 = float(rng.uniform(0.68, 0.82))
    sp.tensor = float(rng.uniform(0.3, 0.6))
    sp.dram = float(rng.uniform(0.2, 0.45))
    sp.pcie_frac = float(rng.uniform(0.06, 0.18))
    sp.nvl_frac = float(rng.uniform(0.05, 0.15))
    sp.ib_frac = float(rng.uniform(0.15, 0.45))
    sp.model_mem = float(rng.uniform(0.7, 0.93))
    sp.loss_p = float(rng.choice([0.0, 0.002, 0.005, 0.01, 0.02]))
    sp.warm = float(rng.uniform(60, 240))
    minutes = float(rng.uniform(30, 45) if big else rng.uniform(30, 120))
    dur = minutes * 60.0
    start = _EPOCH + timedelta(hours=7 * i, seconds=float(rng.integers(0, 3600)) + 0.25)
    names = _node_names(site, n, rng)
    notes: list[str] = []

    # Background present in most jobs: checkpoints, light dataloader jitter, mild rank-0 load.
    if rng.random() < 0.55 and kind not in ("healthy_steady",):
        _add_pauses(sp, rng, dur)
    for _ in range(int(rng.poisson(n * dur / 3600 * 0.5))):
        sp.stalls.append((int(rng.integers(n)), float(rng.uniform(300, dur)), 8.0, 1.3))
    sp.rank0_factor = 1.3
    if rng.random() < 0.12:
        sp.exporter_restart.append((int(rng.integers(n)), float(rng.uniform(240, dur - 120))))
    if rng.random() < 0.08:
        sp.ib_reset.append((int(rng.integers(n)), float(rng.uniform(240, dur - 120))))
    for _ in range(int(rng.integers(0, 3))):
        sp.temp_off.append((int(rng.integers(n)), int(rng.integers(8)), float(rng.uniform(2, 5))))

    faults: list[Fault] = []
    t_first = 12 * 60.0
    if kind in _HANG_FAULTS:
        # The job dies at onset + NCCL timeout; the window ends 60-120 s after teardown.
        on = float(rng.uniform(19 * 60, max(19 * 60 + 60, dur - 12 * 60)))
        sp.timeout = 600.0
        dur = on + sp.timeout + float(rng.uniform(60, 120))
        sp.hang_at = on + float(rng.uniform(2, 20))
        faults.append(_hang_fault(kind, n, on, rng))
    elif kind in _DEGRADE_FAULTS:
        on = float(rng.uniform(t_first, dur - 9 * 60))
        faults.append(_degrade_fault(kind, n, on, rng, site))
    elif kind == "two_faults":
        a, b = rng.choice(len(_DEGRADE_FAULTS), size=2, replace=False)
        nodes = rng.choice(n, size=2, replace=False)
        on1 = float(rng.uniform(t_first, dur - 15 * 60))
        on2 = float(rng.uniform(on1 + 180, dur - 9 * 60))
        f1 = _degrade_fault(_DEGRADE_FAULTS[a], n, on1, rng, site, node=int(nodes[0]))
        f2 = _degrade_fault(_DEGRADE_FAULTS[b], n, on2, rng, site, node=int(nodes[1]))
        faults += [f1, f2]
    else:
        dur = _plan_benign(kind, sp, rng, n, dur, notes, site)
    sp.faults = faults
    if sp.exporter_restart:
        notes.append(f"dcgm-exporter restart on {names[sp.exporter_restart[0][0]]}")
    if sp.ib_reset:
        notes.append(f"IB port counters cleared on {names[sp.ib_reset[0][0]]}")
    notes.append(f"scrape loss p={sp.loss_p}")
    for f in faults:
        where = names[f.node]
        if f.kind in ("nic_dropout", "aoc_flapping"):
            where += f" mlx5_{f.port % site.ib_ports}:1"
        elif f.kind not in ("unreachable", "power_brake", "host_mem_pressure") and not (
            f.kind == "thermal_slowdown" and f.variant == "fans"
        ):
            where += f" GPU {f.gpu}"
        mag = f", job step x{f.mag:.2f}" if f.mag != 1.0 else ""
        variant = f"/{f.variant}" if f.variant else ""
        notes.append(f"{f.kind}{variant} on {where} at +{f.onset / 60:.1f} min{mag}")
    sku = site.sku
    if kind == "heterogeneous_racks":
        sku = f"{site.sku}+{sp.alt_sku}"
    end = start + timedelta(seconds=dur)
    culprits = {names[f.node]: start + timedelta(seconds=f.onset) for f in faults}
    job = Job(
        name=f"v3-{i:03d}-{kind}",
        kind=kind,
        nodes=names,
        start=start,
        end=end,
        culprits=culprits,
        notes="; ".join(notes),
        dcgm_interval=site.dcgm_interval,
        node_interval=site.node_interval,
        dcgm_collect=site.dcgm_collect,
        site=site.name,
        gpu=sku,
        seed=int(rng.integers(2**31)),
        spec=sp,
    )
    for node, t in sp.exporter_restart:
        job.resets.append(
            (names[node], "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", start + timedelta(seconds=t))
        )
    for node, t in sp.ib_reset:
        for m in IB_METRICS:
            if m.endswith("_total"):
                job.resets.append((names[node], m, start + timedelta(seconds=t)))
    return job


def _add_pauses(sp: _Spec, rng: np.random.Generator, dur: float, long: bool = False) -> None:
    every = float(rng.uniform(10, 25) * 60)
    t = float(rng.uniform(6 * 60, every))
    while t < dur - 60:
        length = float(rng.uniform(150, 330) if long else rng.uniform(45, 200))
        sp.pauses.append((t, length))
        t += every


def _hang_fault(kind: str, n: int, on: float, rng: np.random.Generator) -> Fault:
    node, gpu, port = int(rng.integers(n)), int(rng.integers(8)), int(rng.integers(4))
    if kind == "ecc_xid":
        variant = str(rng.choice(["xid94_exit", "xid48_stuck", "xid94_exit"]))
        return Fault(kind, node, on, gpu=gpu, variant=variant)
    if kind == "nic_dropout":
        return Fault(kind, node, on, port=port, variant=str(rng.choice(["abort", "hang"])))
    return Fault(kind, node, on, gpu=gpu)


def _degrade_fault(
    kind: str, n: int, on: float, rng: np.random.Generator, site: Site, node: int | None = None
) -> Fault:
    node = int(rng.integers(n)) if node is None else node
    gpu, port = int(rng.integers(8)), int(rng.integers(site.ib_ports))
    if kind == "nvlink_errors":
        variant = "crc" if site.custom_nvlink else "xid74"
        return Fault(kind, node, on, gpu=gpu, variant=variant, mag=float(rng.uniform(1.12, 1.35)))
    if kind == "pcie_downgrade":
        return Fault(kind, node, on, gpu=gpu, mag=float(rng.uniform(1.1, 1.3)))
    if kind == "thermal_slowdown":
        variant = str(rng.choice(["one_gpu", "fans"]))
        return Fault(kind, node, on, gpu=gpu, variant=variant, mag=float(rng.uniform(1.2, 1.55)))
    if kind == "power_brake":
        return Fault(kind, node, on, mag=float(rng.uniform(1.7, 2.2)))
    if kind == "aoc_flapping":
        return Fault(kind, node, on, port=port, mag=float(rng.uniform(1.15, 1.5)))
    # host_mem_pressure: mag = data starvation factor once reclaim bites
    return Fault(kind, node, on, mag=float(rng.uniform(1.3, 1.9)))


def _plan_benign(
    kind: str,
    sp: _Spec,
    rng: np.random.Generator,
    n: int,
    dur: float,
    notes: list[str],
    site: Site,
) -> float:
    """Add the events of a healthy job's hard case; returns the (maybe shortened) window."""
    if kind == "late_start":
        k = int(min(n - 1, rng.integers(1, 6)))
        for node in rng.choice(n, size=k, replace=False):
            sp.late[int(node)] = float(rng.uniform(90, 420))
        notes.append(f"{k} late starters, up to {max(sp.late.values()) / 60:.1f} min")
    elif kind == "checkpoint_pauses":
        sp.pauses.clear()
        _add_pauses(sp, rng, dur, long=True)
        notes.append(f"{len(sp.pauses)} synchronized checkpoint pauses of 2.5-5.5 min")
    elif kind == "jobwide_slowdown":
        t0 = float(rng.uniform(10 * 60, dur - 12 * 60))
        t1 = min(dur - 60, t0 + float(rng.uniform(8, 25) * 60))
        f = float(rng.uniform(1.3, 2.0))
        sp.slow.append((t0, t1, f))
        notes.append(
            f"job-wide slowdown x{f:.2f} (shared storage/fabric) {t0 / 60:.0f}-{t1 / 60:.0f}"
        )
    elif kind == "nccl_timeout_jobwide":
        on = float(rng.uniform(19 * 60, max(19 * 60 + 60, dur - 12 * 60)))
        sp.hang_at = on
        dur = on + sp.timeout + float(rng.uniform(60, 120))
        notes.append(f"software deadlock: every rank hangs at +{on / 60:.1f} min, NCCL timeout")
    elif kind == "eval_phases":
        every = float(rng.uniform(15, 25) * 60)
        t = float(rng.uniform(10 * 60, every + 10 * 60))
        while t < dur - 60:
            sp.evals.append((t, float(rng.uniform(180, 480))))
            t += every
        notes.append(f"{len(sp.evals)} eval phases of 3-8 min")
    elif kind == "short_blips":
        for _ in range(int(rng.integers(4, 9))):
            node, t0 = int(rng.integers(n)), float(rng.uniform(8 * 60, dur - 5 * 60))
            typ = str(rng.choice(["stall", "thermal", "util", "ib"]))
            # Thermal blips are shorter: the 60-s die lag stretches what a dashboard shows.
            d = float(rng.uniform(20, 120 if typ == "thermal" else 180))
            if typ == "stall":
                sp.stalls.append((node, t0, d, float(rng.uniform(2, 4))))
            elif typ == "ib":
                sp.ib_bursts.append((node, int(rng.integers(site.ib_ports)), t0, d))
            else:
                sp.gpu_blips.append((node, int(rng.integers(8)), t0, d, typ))
        notes.append("short (<4 min) node-local blips: stalls, thermal, util dips, IB error bursts")
    elif kind == "constant_offsets":
        for node in rng.choice(n, size=min(n, 3), replace=False):
            sp.temp_off.append((int(node), int(rng.integers(-1, 8)), float(rng.uniform(6, 12))))
            sp.power_off.append((int(node), float(rng.uniform(1.04, 1.08))))
        notes.append("constant per-node/per-GPU temperature (+6..12 C) and power (+4..8 %) offsets")
    elif kind == "cooling_zones":
        k = max(1, n // int(rng.choice([2, 3, 4])))
        sp.zone_hot = list(range(k))
        sp.zone_delta = float(rng.uniform(5, 9))
        notes.append(f"first {k} nodes in a warmer cooling zone (+{sp.zone_delta:.1f} C inlet)")
    elif kind == "idle_gpu":
        node = int(rng.integers(n))
        used = int(rng.integers(4, 8))
        sp.idle_gpus = [(node, g) for g in range(used, 8)]
        notes.append(f"node index {node} runs {used} ranks; GPUs {used}-7 idle by design")
    elif kind == "profiling_pause":
        node = int(rng.integers(n))
        t0 = float(rng.uniform(10 * 60, dur - 22 * 60 if dur > 40 * 60 else dur - 12 * 60))
        sp.prof_pause.append((node, t0, float(rng.uniform(6, 20) * 60)))
        notes.append("nsys/ncu holds the profiler on one node: DCGM_FI_PROF_* absent for 6-20 min")
    elif kind == "dataloader_jitter":
        for _ in range(int(rng.poisson(n * dur / 3600 * 6))):
            node, t0 = int(rng.integers(n)), float(rng.uniform(5 * 60, dur))
            sp.stalls.append((node, t0, float(rng.uniform(5, 40)), float(rng.uniform(1.3, 2.5))))
        notes.append("frequent dataloader stalls of 5-40 s on random nodes")
    elif kind == "rank0_extra":
        sp.rank0_factor = float(rng.uniform(2.5, 4.0))
        every = float(rng.uniform(4, 8) * 60)
        t = every
        while t < dur - 60:
            sp.stalls.append((0, t, float(rng.uniform(20, 60)), 3.0))
            t += every
        notes.append("rank 0 logs/evaluates: more CPU, memory, Ethernet; periodic rank-0 stalls")
    elif kind == "heterogeneous_racks":
        sp.alt_sku = {"A100": "A100-40", "H100": "H200", "H200": "H100"}[site.sku]
        sp.alt_sku_nodes = [j for j in range(n) if (j // 4) % 2 == 1]
        for j in sp.alt_sku_nodes:
            sp.power_off.append((j, 1.05))
            sp.temp_off.append((j, -1, 3.0))
        notes.append(f"every other rack is {sp.alt_sku} (different FB, memory clock, thermals)")
    elif kind == "healthy_steady":
        notes.append("steady training, background noise only")
    return dur


# --------------------------------------------------------------------------- generation

_H = 5.0  # job-level grid step, s


def _grid_lookup(arr: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Value of a job-grid array (..., L) at times t (any shape), nearest step at or before."""
    idx = np.clip((t // _H).astype(np.int64), 0, arr.shape[-1] - 1)
    return arr[..., idx] if arr.ndim == 1 else np.take_along_axis(arr, idx, axis=-1)


def _interval_mask(g: np.ndarray, t0: float, t1: float) -> np.ndarray:
    return (g >= t0) & (g < t1)


def _job_state(job: Job, dur: float, n: int) -> dict[str, np.ndarray]:
    """Job-wide and per-node state on the 5-s grid."""
    sp = job.spec
    g = np.arange(0.0, dur + 2 * _H, _H)
    joined = max(sp.late.values(), default=0.0) + 40.0  # launch + NCCL init
    train = g >= joined
    warm = np.clip((g - joined) / sp.warm, 0.0, 1.0)
    phase = np.where(train, sp.w0 * (0.35 + 0.65 * warm), 0.0)
    ckpt = np.zeros_like(g, dtype=bool)
    for t0, d in sp.pauses:
        ckpt |= _interval_mask(g, t0, t0 + d)
    evalm = np.zeros_like(g, dtype=bool)
    for t0, d in sp.evals:
        evalm |= _interval_mask(g, t0, t0 + d)
    phase = np.where(evalm, phase * 0.55, phase)
    phase = np.where(ckpt, 0.0, phase)
    jobslow = np.ones_like(g)
    for t0, t1, f in sp.slow:
        ramp = np.clip((g - t0) / 60.0, 0, 1) * np.clip((t1 - g) / 60.0, 0, 1)
        jobslow = np.maximum(jobslow, 1 + (f - 1) * ramp)
    hang = np.zeros_like(g, dtype=bool)
    ended = np.zeros_like(g, dtype=bool)
    if sp.hang_at is not None:
        hang = g >= sp.hang_at
        ended = g >= sp.hang_at + sp.timeout
    # Per-node compute slowness (compute-type) and data starvation.
    starve = np.ones((n, g.size))
    for node, t0, d, f in sp.stalls:
        m = _interval_mask(g, t0, t0 + d)
        starve[node, m] = np.maximum(starve[node, m], f)
    comm = np.ones_like(g)  # communication-type slowdown (link faults)
    gpu_slow: dict[tuple[int, int], np.ndarray] = {}
    for f in sp.faults:
        after = g >= f.onset
        if f.kind in ("nvlink_errors", "pcie_downgrade"):
            comm = np.where(after, np.maximum(comm, f.mag), comm)
        elif f.kind == "aoc_flapping":
            wob = 1 + (f.mag - 1) * (0.7 + 0.3 * np.sin(g / 47.0) ** 2)
            comm = np.where(after, np.maximum(comm, wob), comm)
        elif f.kind == "thermal_slowdown":
            ramp = np.clip((g - f.onset - 60.0) / 120.0, 0, 1)
            s = 1 + (f.mag - 1) * ramp
            gpus = [f.gpu] if f.variant == "one_gpu" else range(8)
            for gi in gpus:
                gpu_slow[(f.node, gi)] = s
        elif f.kind == "power_brake":
            s = np.where(g >= f.onset, f.mag, 1.0)
            for gi in range(8):
                gpu_slow[(f.node, gi)] = s
        elif f.kind == "host_mem_pressure":
            ramp = np.clip((g - f.onset - 240.0) / 180.0, 0, 1)
            starve[f.node] = np.maximum(starve[f.node], 1 + (f.mag - 1) * ramp)
    slowest = np.ones_like(g)
    for s in gpu_slow.values():
        slowest = np.maximum(slowest, s)
    big_f = np.maximum.reduce([jobslow, comm, slowest, starve.max(axis=0)])
    return {
        "g": g,
        "train": train,
        "phase": phase,
        "ckpt": ckpt,
        "eval": evalm,
        "hang": hang,
        "ended": ended,
        "F": big_f,
        "starve": starve,
        "gpu_slow": gpu_slow,  # type: ignore[dict-item]
        "joined": np.array(joined),
    }


class _Rows:
    """Accumulates long-format rows as index arrays; turned into one DataFrame at the end."""

    def __init__(self) -> None:
        self.parts: list[tuple[np.ndarray, ...]] = []

    def add(
        self,
        metric: int,
        t: np.ndarray,
        node: np.ndarray,
        dev: np.ndarray,
        v: np.ndarray,
        keep: np.ndarray,
    ) -> None:
        k = keep.ravel()
        self.parts.append(
            (
                t.ravel()[k],
                node.ravel()[k].astype(np.int32),
                np.full(int(k.sum()), metric, dtype=np.int16),
                dev.ravel()[k].astype(np.int16),
                v.ravel()[k].astype(np.float64),
            )
        )


def _generate(job: Job) -> pl.DataFrame:
    """Build the raw long table of one job."""
    rng = np.random.default_rng(job.seed)
    sp = job.spec
    site = SITES[job.site]
    n = len(job.nodes)
    dur = (job.end - job.start).total_seconds()
    st = _job_state(job, dur, n)
    rows = _Rows()
    devices = [str(i) for i in range(8)] + [f"mlx5_{p}:1" for p in range(site.ib_ports)] + [""]
    node_gone = np.full(n, np.inf)  # unreachable from this time
    for f in sp.faults:
        if f.kind == "unreachable":
            node_gone[f.node] = f.onset
    _gpu_series(job, site, st, rng, rows, node_gone)
    _ib_series(job, site, st, rng, rows, node_gone)
    _host_series(job, site, st, rng, rows, node_gone)
    t, node, metric, dev, val = (np.concatenate(c) for c in zip(*rows.parts, strict=True))
    start_us = int(job.start.timestamp() * 1_000_000)
    time_us = start_us + (np.round(t * 1000.0).astype(np.int64) * 1000)
    return pl.DataFrame(
        {
            "time": pl.Series(time_us, dtype=pl.Int64).cast(pl.Datetime("us", "UTC")),
            "node": pl.Series(job.nodes, dtype=pl.String).gather(node),
            "metric": pl.Series(ALL_METRICS, dtype=pl.String).gather(metric),
            "device": pl.Series(devices, dtype=pl.String).gather(dev),
            "value": val,
        }
    )


def _scrape_times(n: int, interval: int, dur: float, rng: np.random.Generator) -> np.ndarray:
    """Per-target scrape timestamps (n, K): fixed offset per target plus ms jitter."""
    k = int(dur // interval)
    off = rng.uniform(0, interval, size=(n, 1))
    jit = rng.normal(0, 0.004, size=(n, k))
    return off + np.arange(k)[None, :] * interval + jit


def _lost(n: int, k: int, p: float, rng: np.random.Generator) -> np.ndarray:
    """Scrapes that did not happen: sporadic misses plus occasional 2-4 scrape timeouts."""
    lost = rng.random((n, k)) < p
    for _ in range(int(rng.poisson(n * k * p * 0.05))):
        i, j = int(rng.integers(n)), int(rng.integers(k))
        lost[i, j : j + int(rng.integers(2, 5))] = True
    return lost


def _lag(x: np.ndarray, dt: float, tau: float) -> np.ndarray:
    """First-order thermal lag along the last axis (time constant tau seconds)."""
    a = 1.0 - math.exp(-dt / tau)
    y0 = x[..., :1]
    return lfilter([a], [1.0, a - 1.0], x - y0, axis=-1) + y0


def _gpu_series(job, site, st, rng, rows: _Rows, node_gone) -> None:
    sp = job.spec
    n = len(job.nodes)
    dur = (job.end - job.start).total_seconds()
    t = _scrape_times(n, site.dcgm_interval, dur, rng)  # (n, K)
    kk = t.shape[1]
    phase_c = rng.uniform(0, site.dcgm_collect, size=(n, 1))
    s = phase_c + np.floor((t - phase_c) / site.dcgm_collect) * site.dcgm_collect  # sample time
    s = np.maximum(s, 0.0)
    # Node-level state at sample times.
    phase = _grid_lookup(st["phase"], s)
    big_f = _grid_lookup(st["F"], s)
    hang = _grid_lookup(st["hang"], s)
    ended = _grid_lookup(st["ended"], s)
    starve = _grid_lookup(st["starve"], s)
    train = _grid_lookup(st["train"], s)
    # Processes alive per node: late starters have no process before their start.
    proc = np.ones((n, kk), dtype=bool)
    for node, d in sp.late.items():
        proc[node] = s[node] >= d
    proc &= s >= 15.0
    proc &= ~ended
    w = np.where(train & ~hang, phase / big_f, 0.0)  # nominal compute share
    spin = np.where(train & ~hang, np.maximum(0.0, 1 - phase / big_f) * (phase > 0), 0.0)
    spin = np.where(hang & proc, 1.0, spin)
    # A starved node computes w0/F but idles (does not spin) while waiting for data.
    starved = starve > 1.0001
    spin = np.where(starved & ~hang, spin * (1 / starve), spin)
    # Expand to GPUs.
    w = np.repeat(w[:, None, :], 8, axis=1)
    spin = np.repeat(spin[:, None, :], 8, axis=1)
    procg = np.repeat(proc[:, None, :], 8, axis=1)
    clockf = np.ones((n, 8, kk))
    power_cap = np.full((n, 8, kk), np.inf)
    temp_add = np.zeros((n, 8, kk))
    hot_rise = np.zeros((n, 8, kk))
    hot_target = np.zeros((n, 8, 1))
    xid = np.zeros((n, 8, kk))
    vanish = np.zeros((n, 8, kk), dtype=bool)
    frozen = np.zeros((n, 8, kk), dtype=bool)
    uncorr_step = np.zeros((n, 8, kk))
    pcie_cap = np.full((n, 8, kk), np.inf)
    replay_rate = np.zeros((n, 8, kk))
    nvl_factor = np.ones((n, 8, kk))
    crc_rate = np.zeros((n, 8, kk))
    for (node, gi), sl in st["gpu_slow"].items():
        sg = _grid_lookup(sl, s[node])
        w[node, gi] = np.where(train[node] & ~hang[node], phase[node] * sg / big_f[node], 0.0)
        spin[node, gi] = np.where(w[node, gi] > 0, np.maximum(0.0, 1 - w[node, gi]), spin[node, gi])
        clockf[node, gi] = 1.0 / sg
    for f in sp.faults:
        after = s[f.node] >= f.onset
        c, gi = f.node, f.gpu
        if f.kind == "ecc_xid":
            code = 94.0 if f.variant.startswith("xid94") else 48.0
            xid[c, gi] = np.where(after, code, 0.0)
            uncorr_step[c, gi] = after
            if f.variant == "xid94_exit":  # the rank dies, torchrun stops its local workers
                procg[c] &= ~(s[c] >= f.onset + 20.0)
                spin[c] = np.where(s[c] >= f.onset + 20.0, 0.0, spin[c])
            else:  # the faulty GPU's context is dead; node's other ranks spin like peers
                spin[c, gi] = np.where(after, 0.0, spin[c, gi])
                w[c, gi] = np.where(after, 0.0, w[c, gi])
        elif f.kind == "gpu_fell_off_bus":
            vanish[c, gi] = s[c] >= f.onset
        elif f.kind == "gpu_hang":
            frozen[c, gi] = after
        elif f.kind == "nic_dropout" and f.variant == "abort":  # NCCL IB error, ranks exit
            procg[c] &= ~(s[c] >= f.onset + 30.0)
            spin[c] = np.where(s[c] >= f.onset + 30.0, 0.0, spin[c])
        elif f.kind == "nvlink_errors":
            nvl_factor[c, gi] = np.where(after, float(rng.uniform(0.3, 0.5)), 1.0)
            if f.variant == "crc":
                crc_rate[c, gi] = np.where(after, float(rng.uniform(50, 2000)), 0.0)
            else:
                xid[c, gi] = np.where(after, 74.0, 0.0)
        elif f.kind == "pcie_downgrade":
            pcie_cap[c, gi] = np.where(after, float(rng.uniform(0.35, 0.55)), np.inf)
            replay_rate[c, gi] = np.where(after, float(rng.uniform(1, 25)), 0.0)
        elif f.kind == "thermal_slowdown":
            gpus = [gi] if f.variant == "one_gpu" else list(range(8))
            rise = np.clip((s[c] - f.onset) / 150.0, 0, 1)
            for gj in gpus:  # the die heads for the slowdown temperature (87-93 C, GUESS)
                hot_rise[c, gj] = rise
                hot_target[c, gj] = float(rng.uniform(87, 93))
        elif f.kind == "power_brake":
            power_cap[c] = np.where(after, 0.45 * SKUS[site.sku].tdp, np.inf)[None, :]
    for node, gi in sp.idle_gpus:
        w[node, gi] = 0.0
        spin[node, gi] = 0.0
        procg[node, gi] = False
    for node, gi, t0, d, typ in sp.gpu_blips:
        m = (s[node] >= t0) & (s[node] < t0 + d)
        if typ == "thermal":
            temp_add[node, gi] = np.where(m, 7.0, temp_add[node, gi])
        else:
            w[node, gi] = np.where(m, w[node, gi] * 0.4, w[node, gi])
    # Vanished / frozen GPUs don't compute; frozen ones keep a kernel resident.
    w = np.where(frozen, 0.0, w)
    spin = np.where(frozen, 0.0, spin)
    # Per-GPU hardware (SKU may differ per node).
    skus = [SKUS[sp.alt_sku if j in set(sp.alt_sku_nodes) else site.sku] for j in range(n)]
    col = {
        k: np.array([getattr(x, k) for x in skus])[:, None, None]
        for k in (
            "tdp",
            "idle_w",
            "max_sm",
            "idle_sm",
            "mem_clock",
            "fb_mib",
            "pcie_bps",
            "nvlink_bps",
            "thermal_r",
        )
    }
    poff = np.ones((n, 1, 1))
    for node, fct in sp.power_off:
        poff[node] *= fct
    gpu_pvar = rng.normal(1.0, 0.015, size=(n, 8, 1)) * poff
    noise = rng.normal(0.0, 1.0, size=(n, 8, kk))
    active = (w + spin) > 0.02
    # Clocks: max boost when busy; small dips under heavy tensor load (GUESS); throttle factor.
    sm = np.where(
        active | frozen, col["max_sm"] - 30 * w * sp.tensor * (1 + 0.5 * noise), col["idle_sm"]
    )
    sm = np.where(frozen, col["max_sm"], sm) * clockf
    sm = np.round(sm / 15.0) * 15.0
    # Power: idle + compute share of (0.95 TDP - idle) + spin ~0.08 TDP (NCCL spin, issue 968).
    tens_scale = 0.55 + 0.45 * min(1.0, sp.tensor / 0.45)
    pw = col["idle_w"] + w * (0.95 * col["tdp"] - col["idle_w"]) * tens_scale * clockf**1.5
    pw = pw + spin * 0.06 * col["tdp"]
    pw = np.where(frozen, 0.55 * col["tdp"], pw)
    pw = np.minimum(pw * gpu_pvar * (1 + 0.02 * noise), power_cap)
    pw = np.maximum(pw, col["idle_w"] * 0.9)
    # Temperatures: inlet + R*P with a 60-s lag, per-GPU/zone offsets.
    inlet = rng.normal(27.0, 1.2, size=(n, 1, 1)) + rng.normal(0.0, 1.5, size=(1, 8, 1))
    for j in sp.zone_hot:
        inlet[j] += sp.zone_delta
    for node, gi, dT in sp.temp_off:
        if gi < 0:
            inlet[node] += dT
        else:
            inlet[node, gi] += dT
    dt = float(site.dcgm_interval)
    eq = inlet + col["thermal_r"] * pw
    temp_add = temp_add + hot_rise * np.maximum(hot_target - eq, 0.0)
    gt = _lag(eq + temp_add, dt, 60.0)
    gt = gt + 0.4 * rng.normal(size=gt.shape)
    mt = _lag(inlet + 6.0 + 0.8 * col["thermal_r"] * pw + 0.6 * temp_add, dt, 90.0)
    # Thermal throttle applies its clock factor once the die is hot (already in clockf).
    util = np.clip(100 * np.where(frozen, 1.0, w * 0.99 + spin), 0, 100)
    util = np.clip(np.round(util + np.where(util > 0, 1.2 * noise, 0)), 0, 100)
    gr = np.clip(np.where(frozen, 0.99, w * 0.95 + spin * 0.985) + 0.008 * noise, 0, 1)
    gr = np.where(active | frozen, gr, 0.0)
    tensor = np.clip(w * sp.tensor * (1 + 0.04 * noise), 0, 1)
    dram = np.clip(w * sp.dram * (1 + 0.05 * noise) + spin * 0.004, 0, 1)
    copy = np.clip(np.round(100 * dram * 0.9), 0, 100)
    comm_scale = np.repeat((phase > 0)[:, None, :], 8, axis=1) / big_f[:, None, :]
    comm_scale = np.where(hang[:, None, :], 0.0, comm_scale) * (w > 0)
    pcie = col["pcie_bps"] * sp.pcie_frac * comm_scale * (1 + 0.15 * rng.normal(size=w.shape))
    pcie = np.maximum(pcie, 0) + np.where(procg, 2.5e7, 4e6)
    # A downtrained link caps this GPU's traffic well below the job's normal rate.
    pcie = np.minimum(pcie, col["pcie_bps"] * sp.pcie_frac * pcie_cap)
    pcie = np.minimum(pcie, col["pcie_bps"])
    pcie_rx = pcie * rng.uniform(0.8, 1.2, size=(n, 8, 1))
    nvl = col["nvlink_bps"] * sp.nvl_frac * comm_scale * nvl_factor
    nvl = np.maximum(nvl * (1 + 0.1 * rng.normal(size=w.shape)), 0)
    # FB: the job's model memory while its process lives (rank 0 GPU 0 a bit more).
    reserved = np.round(col["fb_mib"] * 0.0065)
    # The same model needs the same memory on every SKU of a mixed job: size it on the smallest.
    job_mib = float(col["fb_mib"].min()) * sp.model_mem
    used = np.where(procg, job_mib, 0.0) * rng.uniform(0.97, 1.0, (n, 8, 1))
    used[0, 0] *= 1.0 + 0.02 * sp.rank0_factor
    used = np.where(procg & (s[:, None, :] < st["joined"] + 60), used * 0.06, used)
    used = np.minimum(np.round(used + 1.0), col["fb_mib"] - reserved)
    free = col["fb_mib"] - reserved - used
    # Counters: cumulative integrals from a per-GPU boot offset.
    ds = np.diff(s, axis=1, prepend=s[:, :1] - site.dcgm_collect)[:, None, :]
    energy = rng.uniform(2e12, 9e12, (n, 8, 1)) + np.cumsum(pw * ds * 1000.0, axis=-1)
    replay0 = np.where(rng.random((n, 8, 1)) < 0.08, rng.integers(1, 300, (n, 8, 1)), 0)
    replay = replay0 + np.floor(np.cumsum(replay_rate * ds, axis=-1))
    nvl_total0 = rng.uniform(1e13, 1e15, (n, 8, 1))
    nvl_total = np.cumsum(nvl * ds / 1e6, axis=-1)  # GUESS: units MB
    nvl_total = nvl_total0 + nvl_total
    for node, tr in sp.exporter_restart:  # counter restarts with the exporter's host engine
        after = t[node] >= tr + 60
        if after.any():
            j = int(np.argmax(after))
            nvl_total[node, :, j:] -= nvl_total[node, :, j - 1 : j] - 1e3
    corr = np.where(rng.random((n, 8, 1)) < 0.05, rng.integers(1, 3, (n, 8, 1)), 0) + 0 * s[:, None]
    uncorr = (rng.random((n, 8, 1)) < 0.01).astype(float) + uncorr_step
    crc_base = np.where(rng.random((n, 8, 1)) < 0.1, rng.integers(1, 50, (n, 8, 1)), 0)
    crc = crc_base + np.floor(np.cumsum(crc_rate * ds, axis=-1))
    crc_data = np.floor(crc * 0.02)
    nvl_replay = np.floor(crc * 0.3)
    nvl_recov = crc_base * 0 + np.floor(np.cumsum((crc_rate > 0) * ds / 240.0, axis=-1))
    zero = np.zeros((n, 8, kk))
    values = {
        "DCGM_FI_DEV_SM_CLOCK": sm,
        "DCGM_FI_DEV_MEM_CLOCK": zero + col["mem_clock"],
        "DCGM_FI_DEV_MEMORY_TEMP": np.round(mt),
        "DCGM_FI_DEV_GPU_TEMP": np.round(gt),
        "DCGM_FI_DEV_POWER_USAGE": np.round(pw, 3),
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": np.floor(energy),
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": replay + zero,
        "DCGM_FI_DEV_GPU_UTIL": util,
        "DCGM_FI_DEV_MEM_COPY_UTIL": copy,
        "DCGM_FI_DEV_ENC_UTIL": zero,
        "DCGM_FI_DEV_DEC_UTIL": zero,
        "DCGM_FI_DEV_XID_ERRORS": xid,
        "DCGM_FI_DEV_FB_FREE": free,
        "DCGM_FI_DEV_FB_USED": used,
        "DCGM_FI_DEV_FB_RESERVED": zero + reserved,
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": np.floor(nvl_total),
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": uncorr + zero,
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": corr + zero,
        "DCGM_FI_DEV_ROW_REMAP_FAILURE": zero,
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE": np.round(gr, 6),
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": np.round(tensor, 6),
        "DCGM_FI_PROF_DRAM_ACTIVE": np.round(dram, 6),
        "DCGM_FI_PROF_PCIE_TX_BYTES": np.round(pcie),
        "DCGM_FI_PROF_PCIE_RX_BYTES": np.round(pcie_rx),
    }
    if site.custom_nvlink:
        values |= {
            "DCGM_FI_PROF_NVLINK_TX_BYTES": np.round(nvl),
            "DCGM_FI_PROF_NVLINK_RX_BYTES": np.round(nvl * rng.uniform(0.95, 1.05, (n, 8, 1))),
            "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": crc + zero,
            "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL": crc_data + zero,
            "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL": nvl_replay + zero,
            "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL": nvl_recov + zero,
        }
    # A scrape between two DCGM collections returns the previous collection's value.
    new = np.ones((n, kk), dtype=bool)
    new[:, 1:] = s[:, 1:] != s[:, :-1]
    first = np.maximum.accumulate(np.where(new, np.arange(kk)[None, :], 0), axis=1)
    first = np.broadcast_to(first[:, None, :], (n, 8, kk))
    values = {
        k: np.take_along_axis(np.broadcast_to(v, (n, 8, kk)), first, axis=-1)
        for k, v in values.items()
    }
    # Which samples exist.
    lost = _lost(n, kk, sp.loss_p, rng)
    for node, tr in sp.exporter_restart:
        lost[node] |= (t[node] >= tr) & (t[node] < tr + 60)
    keep = np.repeat((~lost & (t < node_gone[:, None]))[:, None, :], 8, axis=1) & ~vanish
    prof_keep = keep.copy()
    for node, t0, d in sp.prof_pause:
        prof_keep[node] &= ~((t[node] >= t0) & (t[node] < t0 + d))[None, :]
    tt = np.repeat(t[:, None, :], 8, axis=1)
    nodes = np.broadcast_to(np.arange(n)[:, None, None], tt.shape)
    devs = np.broadcast_to(np.arange(8)[None, :, None], tt.shape)
    for name, v in values.items():
        k = prof_keep if name in PROF_METRICS else keep
        rows.add(ALL_METRICS.index(name), tt, nodes, devs, np.broadcast_to(v, tt.shape), k)


def _ib_series(job, site, st, rng, rows: _Rows, node_gone) -> None:
    sp = job.spec
    n, p = len(job.nodes), site.ib_ports
    dur = (job.end - job.start).total_seconds()
    t = _scrape_times(n, site.node_interval, dur, rng)
    kk = t.shape[1]
    phase = _grid_lookup(st["phase"], t)
    big_f = _grid_lookup(st["F"], t)
    hang = _grid_lookup(st["hang"], t)
    tr = np.where(hang, 0.0, (phase > 0) / big_f)  # traffic scale
    rate = site.ib_rate * sp.ib_frac * tr[:, None, :] * (1 + 0.08 * rng.normal(size=(n, p, kk)))
    rate = np.maximum(rate, 0) + 2e5  # management traffic (GUESS)
    state = np.full((n, p, kk), 4.0)
    phys = np.full((n, p, kk), 5.0)
    downed_rate = np.zeros((n, p, kk))
    err_rate = np.zeros((n, p, kk))
    recov_rate = np.zeros((n, p, kk))
    wait_rate = 2e5 * tr[:, None, :] * big_f[:, None, :] ** 2 * rng.uniform(0.5, 1.5, (n, p, 1))
    dt = np.diff(t, axis=1, prepend=t[:, :1] - site.node_interval)[:, None, :]
    for f in sp.faults:
        c, q = f.node, f.port % p
        after = t[c] >= f.onset
        if f.kind == "nic_dropout":
            state[c, q] = np.where(after, 1.0, 4.0)
            phys[c, q] = np.where(after, 3.0 if f.variant == "abort" else 2.0, 5.0)
            rate[c, q] = np.where(after, 0.0, rate[c, q])
            first = np.argmax(after) if after.any() else kk
            downed_rate[c, q, first : first + 1] = 1.0 / dt[c, 0, first] if first < kk else 0
        elif f.kind == "aoc_flapping":
            # Flaps every ~20-90 s (exp. gaps), each 3-15 s down (GUESS); counters from each.
            tf, flaps = f.onset, []
            while tf < dur:
                flaps.append((tf, float(rng.uniform(3, 15))))
                tf += float(rng.exponential(45.0)) + 20.0
            for t0, d in flaps:
                down = (t[c] >= t0) & (t[c] < t0 + d)
                phys[c, q] = np.where(down, 2.0, phys[c, q])
                state[c, q] = np.where(down, 1.0, state[c, q])
                rate[c, q] = np.where(down, 0.0, rate[c, q])
                j = int(np.searchsorted(t[c], t0))
                if j < kk:
                    downed_rate[c, q, j] += 1.0 / dt[c, 0, j]
                    err_rate[c, q, j] += float(rng.integers(10, 500)) / dt[c, 0, j]
                    recov_rate[c, q, j] += float(rng.integers(1, 4)) / dt[c, 0, j]
    for node, q, t0, d in sp.ib_bursts:  # a few symbol errors spread over the blip
        m = (t[node] >= t0) & (t[node] < t0 + max(d, site.node_interval))
        err_rate[node, q % p] += np.where(m, float(rng.integers(3, 40)) / max(d, 1.0), 0.0)
    base = rng.uniform(1e13, 5e14, (n, p, 1))
    rx = base + np.cumsum(rate * dt, axis=-1)
    tx = base * rng.uniform(0.9, 1.1, (n, p, 1)) + np.cumsum(rate * dt * 1.01, axis=-1)
    errs = np.where(rng.random((n, p, 1)) < 0.1, rng.integers(1, 100, (n, p, 1)), 0) + np.round(
        np.cumsum(err_rate * dt, axis=-1)
    )
    disc = np.where(rng.random((n, p, 1)) < 0.05, rng.integers(1, 20, (n, p, 1)), 0) + 0 * rx
    wait = rng.uniform(1e9, 1e11, (n, p, 1)) + np.cumsum(wait_rate * dt, axis=-1)
    downed = rng.integers(0, 3, (n, p, 1)) + np.round(np.cumsum(downed_rate * dt, axis=-1))
    recov = rng.integers(0, 3, (n, p, 1)) + np.round(np.cumsum(recov_rate * dt, axis=-1))
    # Symbol errors: a marginal optical link shows many more symbol errors than bad packets (GUESS).
    sym = np.where(rng.random((n, p, 1)) < 0.15, rng.integers(1, 500, (n, p, 1)), 0) + np.round(
        np.cumsum(err_rate * dt * 20.0, axis=-1)
    )
    counters = [rx, tx, errs, disc, wait, downed, recov, sym]
    for node, t_reset in sp.ib_reset:  # port counters cleared by the fabric manager (GUESS)
        after = t[node] >= t_reset
        if after.any():
            j = int(np.argmax(after))
            for c_arr in counters:
                c_arr[node, :, j:] -= c_arr[node, :, j - 1 : j] if j > 0 else 0
                c_arr[node, :, j:] = np.maximum(c_arr[node, :, j:], 0)
    values = dict(zip(IB_METRICS[:8], [np.floor(c) for c in counters], strict=True))
    values |= {
        "node_infiniband_state_id": state,
        "node_infiniband_physical_state_id": phys,
        "node_infiniband_rate_bytes_per_second": np.full((n, p, kk), site.ib_rate),
    }
    lost = _lost(n, kk, sp.loss_p, rng)
    keep = np.repeat((~lost & (t < node_gone[:, None]))[:, None, :], p, axis=1)
    tt = np.repeat(t[:, None, :], p, axis=1)
    nodes = np.broadcast_to(np.arange(n)[:, None, None], tt.shape)
    devs = np.broadcast_to(8 + np.arange(p)[None, :, None], tt.shape)
    for name, v in values.items():
        rows.add(ALL_METRICS.index(name), tt, nodes, devs, np.broadcast_to(v, tt.shape), keep)
    rows.host_t = t  # type: ignore[attr-defined]  # node_exporter scrapes shared with host
    rows.host_lost = lost  # type: ignore[attr-defined]


def _host_series(job, site, st, rng, rows: _Rows, node_gone) -> None:
    sp = job.spec
    n = len(job.nodes)
    t, lost = rows.host_t, rows.host_lost  # type: ignore[attr-defined]
    kk = t.shape[1]
    phase = _grid_lookup(st["phase"], t)
    ckpt = _grid_lookup(st["ckpt"], t)
    ended = _grid_lookup(st["ended"], t)
    starve = _grid_lookup(st["starve"], t)
    dt = np.diff(t, axis=1, prepend=t[:, :1] - site.node_interval)
    busy = np.where(ended, 0.01, 0.08 + 0.12 * (phase > 0) + 0.1 * ckpt)
    load = np.where(ended, 0.5, 6 + 12 * (phase > 0) + 10 * ckpt) * rng.uniform(0.8, 1.2, (n, 1))
    for node, d in sp.late.items():
        loading = (t[node] >= 10) & (t[node] < d + 30)
        load[node] = np.where(loading, load[node] + 25, load[node])
        busy[node] = np.where(loading, busy[node] + 0.15, busy[node])
    load[0] *= sp.rank0_factor
    busy[0] = np.minimum(busy[0] * sp.rank0_factor, 0.95)
    total = site.mem_bytes
    avail_frac = rng.uniform(0.55, 0.75, (n, 1)) + 0.01 * rng.normal(size=(n, kk))
    avail_frac[0] -= 0.04 * sp.rank0_factor
    stall_rate = np.full((n, kk), 1e-4)
    oom_rate = np.zeros((n, kk))
    for f in sp.faults:
        if f.kind != "host_mem_pressure":
            continue
        c = f.node
        # Leak of ~3-8 % of RAM per minute (GUESS) down to a 1.5-3 % floor where reclaim thrashes.
        leak = float(rng.uniform(0.03, 0.08)) / 60.0
        floor = float(rng.uniform(0.015, 0.03))
        frac = np.where(t[c] >= f.onset, avail_frac[c] - leak * (t[c] - f.onset), avail_frac[c])
        avail_frac[c] = np.maximum(frac, floor + 0.003 * rng.normal(size=kk))
        tight = avail_frac[c] < 0.08
        stall_rate[c] = np.where(tight, float(rng.uniform(0.3, 0.9)), stall_rate[c])
        load[c] = np.where(tight, load[c] + float(rng.uniform(30, 80)), load[c])
        busy[c] = np.where(tight, np.minimum(busy[c] + 0.2, 0.95), busy[c])
    # A starving node (dataloader) shows more iowait-ish load; blips are short.
    load = load + 4 * (starve > 1.0001)
    load = np.round(load + 0.6 * rng.normal(size=(n, kk)), 2)
    cpu_idle = rng.uniform(1e8, 1e9, (n, 1)) + np.cumsum(site.cpus * (1 - busy) * dt, axis=-1)
    stall = rng.uniform(0, 500, (n, 1)) + np.cumsum(stall_rate * dt, axis=-1)
    oom = rng.integers(0, 2, (n, 1)) + np.cumsum(oom_rate * dt, axis=-1)
    eth_rate = rng.uniform(5e6, 5e7, (n, 1)) * (1 + 0.2 * rng.normal(size=(n, kk)))
    eth_rate = np.abs(eth_rate)
    tx_rate = eth_rate * 0.5 + np.where(ckpt, rng.uniform(3e8, 1.2e9, (n, 1)), 0.0)
    tx_rate[0] *= sp.rank0_factor
    rx = rng.uniform(1e12, 1e14, (n, 1)) + np.cumsum(eth_rate * dt, axis=-1)
    tx = rng.uniform(1e12, 1e14, (n, 1)) + np.cumsum(tx_rate * dt, axis=-1)
    values = {
        "node_load1": load,
        "node_memory_MemAvailable_bytes": np.floor(avail_frac * total / 4096) * 4096,
        "node_memory_MemTotal_bytes": np.full((n, kk), total),
        "node_cpu_seconds_total": np.round(cpu_idle, 2),
        "node_pressure_memory_stalled_seconds_total": np.round(stall, 6),
        "node_vmstat_oom_kill": oom,
        "node_network_receive_bytes_total": np.floor(rx),
        "node_network_transmit_bytes_total": np.floor(tx),
    }
    keep = ~lost & (t < node_gone[:, None])
    nodes = np.broadcast_to(np.arange(n)[:, None], t.shape)
    devs = np.full(t.shape, 8 + SITES[job.site].ib_ports)
    for name, v in values.items():
        rows.add(ALL_METRICS.index(name), t, nodes, devs, v, keep)


# --------------------------------------------------------------------------- helpers


def aggregate(raw: pl.DataFrame, agg_for: Callable[[str], str]) -> pl.DataFrame:
    """Reduce devices per (time, node, metric) with agg_for(metric) in min/max/sum/avg.

    Counters are summed as raw totals, as ``sum by (instance)`` over the stored totals would, so
    a vanished device makes the sum step down.
    """
    metrics = raw.get_column("metric").unique().to_list()
    how = {m: agg_for(m) for m in metrics}
    bad = {h for h in how.values() if h not in ("min", "max", "sum", "avg")}
    if bad:
        raise ValueError(f"agg_for returned {sorted(bad)}; expected min, max, sum or avg")
    out = (
        raw.with_columns(pl.col("metric").replace_strict(how, return_dtype=pl.String).alias("_h"))
        .group_by(["time", "node", "metric"])
        .agg(
            pl.col("_h").first(),
            pl.col("value").min().alias("_min"),
            pl.col("value").max().alias("_max"),
            pl.col("value").sum().alias("_sum"),
            pl.col("value").mean().alias("_avg"),
        )
    )
    value = (
        pl.when(pl.col("_h") == "min")
        .then(pl.col("_min"))
        .when(pl.col("_h") == "max")
        .then(pl.col("_max"))
        .when(pl.col("_h") == "sum")
        .then(pl.col("_sum"))
        .otherwise(pl.col("_avg"))
    )
    return out.select("time", "node", "metric", value.alias("value")).sort(
        ["node", "metric", "time"]
    )


def table(jobs_: list[Job]) -> pl.DataFrame:
    """One row per job: kind, size, intervals, culprits and onsets (minutes after start)."""
    return pl.DataFrame(
        [
            {
                "name": j.name,
                "kind": j.kind,
                "faulty": j.kind in FAULT_KINDS,
                "site": j.site,
                "gpu": j.gpu,
                "nodes": len(j.nodes),
                "minutes": round((j.end - j.start).total_seconds() / 60, 1),
                "dcgm_interval": j.dcgm_interval,
                "node_interval": j.node_interval,
                "dcgm_collect": j.dcgm_collect,
                "culprits": ",".join(sorted(j.culprits)),
                "onsets_min": ",".join(
                    f"{(j.culprits[c] - j.start).total_seconds() / 60:.1f}"
                    for c in sorted(j.culprits)
                ),
                "start": j.start,
                "end": j.end,
                "notes": j.notes,
            }
            for j in jobs_
        ]
    )
