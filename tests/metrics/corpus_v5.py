"""Blind labelled corpus v5 for faulty-machine detection on raw Prometheus series.

Written blind: the author did NOT open, grep or read the history of ``aegis_slurm/metrics/``,
``aegis_slurm/simulate*``, ``docs/minder.md``, anything under ``tests/metrics/`` except this file
and ``test_corpus_v5_sanity.py``, the fixtures ``tests/fixtures/metrics_v2``..``metrics_v4`` or
``benchmarks/bench_minder.py``, and never ran the detector or a scorer on this corpus.  What was
read: ``README.md``, the Minder (NSDI'25) summary and Aegis (NSDI'25) paper in the project's
seeds, the real exporter recordings in ``tests/fixtures/metrics/`` and public sources (dcgm-exporter
and node_exporter repositories at tagged versions, their issues, NVIDIA Xid / DCGM / NVML docs).
Every name and number with its source, and every **GUESS**, is in
``tests/fixtures/metrics_v5/README.md``.

Population (any seed): 116 jobs, 60 healthy (52 %) and 56 faulty (3 of them with two culprits),
on five sites that differ on purpose:

* ``nebula``  H800-SXM 8 GPU nodes, 8 NDR InfiniBand rails, dcgm-exporter 3.3.8-3.6.0 with the DCP
  (profiling) csv plus three NVLink error counters the site enabled, node_exporter 1.8.2.
* ``aurora``  A800-SXM4 8 GPU nodes, 4 HDR rails, dcgm-exporter 2.3.1-2.6.0 default csv (no DCP,
  PCIe throughput fields typed ``counter`` that NVML fills with a rate), node_exporter 1.0.1 on a
  3.10 kernel (no PSI, old InfiniBand counter set).
* ``grace``   GH200, one GPU per node, one NDR port, dcgm-exporter 4.4.1-4.6.0 default csv.
* ``lumen``   L40S PCIe 8 GPU nodes, no NVLink, RoCE (the infiniband collector is disabled and RDMA
  traffic does not show in netdev counters), dcgm-exporter 3.3.8 default csv with the profiling
  module unavailable (no DCP fields), memory temperature reported as DCGM's blank sentinel.
* ``vega``    H100-SXM 8 GPU nodes, 8 NDR rails, dcgm-exporter 4.4.1-4.6.0, node_exporter 1.8.2;
  ``rolling_upgrade`` jobs run two dcgm-exporter versions side by side (vega and nebula).

Sizes 4..1,024 nodes (six jobs >= 256 with seed 0), windows 30..120 min, scrape intervals
10/15/30/60 s with a per-node, per-exporter scrape phase.  Faults (``FAULT_KINDS``) and hard
healthy cases (``BENIGN_KINDS``) are described, with their counts, in the README.

Assumptions: every number no source gave is a GUESS (listed in the README): hardware clocks and
powers, the power/temperature model, traffic levels, host CPU/memory, fault magnitudes, NCCL
timeouts (10/30 min), and exporter behaviour on failures (a fallen-off GPU's series stop, a hung
exporter yields no samples, paused profiling removes only the ``DCGM_FI_PROF_*`` series).

Model (all GUESS in shape, anchored on the sources in the README): a synchronous job runs at the
speed of its slowest member; a node that is slow or hung slows or hangs every node, so job-wide
throughput (IB bytes, NVLink, power, tensor activity) moves everywhere; ranks waiting in NCCL spin,
so GPU utilisation stays high on waiting peers while power and tensor activity fall.  A culprit is
labelled only where its own local evidence (Xid gauge, error counters, clocks, temperature,
vanished series, host memory/load/iowait, link state and rate) stands apart from its peers for at
least 8 minutes after onset; onsets are >= 3 min after warm-up and >= 10 min before the window end.

API: ``jobs(seed) -> list[Job]``; ``Job.raw`` renders one job's raw samples on demand (columns
time, node, metric, device, value); ``aggregate(raw, agg_for)`` reduces devices per
(time, node, metric), always summing counters; ``FAULT_KINDS``, ``BENIGN_KINDS``; ``table(jobs)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import polars as pl

__all__ = [
    "BENIGN_KINDS",
    "COUNTER_METRICS",
    "FAULT_KINDS",
    "Job",
    "aggregate",
    "is_counter",
    "jobs",
    "table",
]

FAULT_KINDS: tuple[str, ...] = (
    "xid_ecc_hang",
    "gpu_off_bus",
    "nvlink_error",
    "pcie_degraded",
    "nic_dropout",
    "link_flap",
    "node_unreachable",
    "thermal_slowdown",
    "power_brake",
    "host_mem_leak",
    "cpu_contention",
    "io_stall",
    "ib_rate_degraded",
    "gsp_hang",
    "row_remap_pending",
    "two_culprits",
)

BENIGN_KINDS: tuple[str, ...] = (
    "steady",
    "warmup_late_start",
    "checkpoint",
    "eval_phase",
    "jobwide_slowdown",
    "nccl_timeout_restart",
    "short_blip",
    "constant_offsets",
    "moving_imbalance",
    "rank0_load",
    "nsight_pause",
    "exporter_restart",
    "prometheus_gap",
    "ib_counter_reset",
    "elastic",
    "dataloader_stall",
    "stale_xid",
    "rolling_upgrade",
)

# How many jobs of each kind (seed independent; the seed changes everything else).
_PLAN: tuple[tuple[str, int], ...] = (
    ("xid_ecc_hang", 5),
    ("gpu_off_bus", 4),
    ("nvlink_error", 3),
    ("pcie_degraded", 4),
    ("nic_dropout", 4),
    ("link_flap", 4),
    ("node_unreachable", 4),
    ("thermal_slowdown", 4),
    ("power_brake", 3),
    ("host_mem_leak", 3),
    ("cpu_contention", 4),
    ("io_stall", 3),
    ("ib_rate_degraded", 3),
    ("gsp_hang", 3),
    ("row_remap_pending", 2),
    ("two_culprits", 3),
    ("steady", 6),
    ("warmup_late_start", 4),
    ("checkpoint", 4),
    ("eval_phase", 3),
    ("jobwide_slowdown", 3),
    ("nccl_timeout_restart", 3),
    ("short_blip", 4),
    ("constant_offsets", 4),
    ("moving_imbalance", 3),
    ("rank0_load", 3),
    ("nsight_pause", 3),
    ("exporter_restart", 3),
    ("prometheus_gap", 3),
    ("ib_counter_reset", 3),
    ("elastic", 4),
    ("dataloader_stall", 3),
    ("stale_xid", 2),
    ("rolling_upgrade", 2),
)

# --------------------------------------------------------------------------------------------
# Metric catalogue (names and types from the exporters' own csv / collector sources)
# --------------------------------------------------------------------------------------------

_D = "DCGM_FI_DEV_"
_P = "DCGM_FI_PROF_"

# dcgm-exporter 2.3.1-2.6.0 etc/default-counters.csv (commit b54068a, 2021-09-23).
DCGM_V2: tuple[str, ...] = (
    _D + "SM_CLOCK",
    _D + "MEM_CLOCK",
    _D + "MEMORY_TEMP",
    _D + "GPU_TEMP",
    _D + "POWER_USAGE",
    _D + "TOTAL_ENERGY_CONSUMPTION",
    _D + "PCIE_TX_THROUGHPUT",
    _D + "PCIE_RX_THROUGHPUT",
    _D + "PCIE_REPLAY_COUNTER",
    _D + "GPU_UTIL",
    _D + "MEM_COPY_UTIL",
    _D + "ENC_UTIL",
    _D + "DEC_UTIL",
    _D + "XID_ERRORS",
    _D + "FB_FREE",
    _D + "FB_USED",
    _D + "NVLINK_BANDWIDTH_TOTAL",
    _D + "VGPU_LICENSE_STATUS",
    _D + "UNCORRECTABLE_REMAPPED_ROWS",
    _D + "CORRECTABLE_REMAPPED_ROWS",
    _D + "ROW_REMAP_FAILURE",
)
_DCGM_V3_BASE: tuple[str, ...] = (
    _D + "SM_CLOCK",
    _D + "MEM_CLOCK",
    _D + "MEMORY_TEMP",
    _D + "GPU_TEMP",
    _D + "POWER_USAGE",
    _D + "TOTAL_ENERGY_CONSUMPTION",
    _D + "PCIE_REPLAY_COUNTER",
    _D + "GPU_UTIL",
    _D + "MEM_COPY_UTIL",
    _D + "ENC_UTIL",
    _D + "DEC_UTIL",
    _D + "XID_ERRORS",
    _D + "FB_FREE",
    _D + "FB_USED",
    _D + "NVLINK_BANDWIDTH_TOTAL",
    _D + "VGPU_LICENSE_STATUS",
    _D + "UNCORRECTABLE_REMAPPED_ROWS",
    _D + "CORRECTABLE_REMAPPED_ROWS",
    _D + "ROW_REMAP_FAILURE",
)
DCP_FIELDS: tuple[str, ...] = (
    _P + "GR_ENGINE_ACTIVE",
    _P + "PIPE_TENSOR_ACTIVE",
    _P + "DRAM_ACTIVE",
    _P + "PCIE_TX_BYTES",
    _P + "PCIE_RX_BYTES",
)
# 3.3.8-3.6.0 etc/dcp-metrics-included.csv
DCGM_V3_DCP: tuple[str, ...] = _DCGM_V3_BASE + DCP_FIELDS
# 3.3.8-3.6.0 etc/default-counters.csv with the profiling module not loaded: the two PROF PCIe
# fields are skipped ("metric not enabled", dcgm-exporter issue #310).
DCGM_V3_NOPROF: tuple[str, ...] = _DCGM_V3_BASE
# 4.4.1-4.6.0 etc/default-counters.csv (adds FB_RESERVED and the DCP fields).
DCGM_V4: tuple[str, ...] = (
    *_DCGM_V3_BASE[:14],
    _D + "FB_RESERVED",
    *_DCGM_V3_BASE[14:],
    *DCP_FIELDS,
)
# Counters commented out in the csv that the "nebula" site enabled (names from the csv comments).
NVLINK_ERR: tuple[str, ...] = (
    _D + "NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
    _D + "NVLINK_REPLAY_ERROR_COUNT_TOTAL",
    _D + "NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
)

_DCGM_COUNTERS = frozenset(
    {
        _D + "TOTAL_ENERGY_CONSUMPTION",
        _D + "PCIE_TX_THROUGHPUT",
        _D + "PCIE_RX_THROUGHPUT",
        _D + "PCIE_REPLAY_COUNTER",
        _D + "NVLINK_BANDWIDTH_TOTAL",
        _D + "UNCORRECTABLE_REMAPPED_ROWS",
        _D + "CORRECTABLE_REMAPPED_ROWS",
        *NVLINK_ERR,
    }
)

_NE_CPU = "node_cpu_seconds_total"
_CPU_MODES = ("idle", "iowait", "irq", "nice", "softirq", "steal", "system", "user")
_NE_HOST_GAUGES = (
    "node_load1",
    "node_load5",
    "node_load15",
    "node_memory_MemTotal_bytes",
    "node_memory_MemAvailable_bytes",
    "node_memory_Cached_bytes",
    "node_memory_Dirty_bytes",
    "node_procs_running",
    "node_procs_blocked",
    "node_boot_time_seconds",
)
_NE_PSI = (
    "node_pressure_cpu_waiting_seconds_total",
    "node_pressure_io_waiting_seconds_total",
    "node_pressure_io_stalled_seconds_total",
    "node_pressure_memory_waiting_seconds_total",
)
_NE_DISK = (
    "node_disk_read_bytes_total",
    "node_disk_written_bytes_total",
    "node_disk_io_time_seconds_total",
)
_NE_NET = (
    "node_network_receive_bytes_total",
    "node_network_transmit_bytes_total",
    "node_network_receive_packets_total",
    "node_network_transmit_packets_total",
    "node_network_receive_errs_total",
    "node_network_receive_drop_total",
    "node_network_carrier_changes_total",
    "node_network_up",
    "node_network_speed_bytes",
)
_IB = "node_infiniband_"
IB_V1_0: tuple[str, ...] = (
    _IB + "port_data_received_bytes_total",
    _IB + "port_data_transmitted_bytes_total",
    _IB + "port_packets_received_total",
    _IB + "port_packets_transmitted_total",
    _IB + "port_errors_received_total",
    _IB + "port_discards_received_total",
    _IB + "port_transmit_wait_total",
    _IB + "link_downed_total",
    _IB + "link_error_recovery_total",
    _IB + "state_id",
    _IB + "physical_state_id",
    _IB + "rate_bytes_per_second",
)
# node_exporter >= 1.1 adds (among others) these two.
IB_NEW_EXTRA: tuple[str, ...] = (
    _IB + "symbol_error_total",
    _IB + "local_link_integrity_errors_total",
)

COUNTER_METRICS: frozenset[str] = frozenset(_DCGM_COUNTERS)
# DCGM fields typed `counter` by dcgm-exporter whose value is really an instantaneous rate
# (README: KempnerPulse v0.4.1 release note for field 449; NVML PCIe throughput is KB/s).
RATE_VALUED_COUNTERS: frozenset[str] = frozenset(
    {_D + "NVLINK_BANDWIDTH_TOTAL", _D + "PCIE_TX_THROUGHPUT", _D + "PCIE_RX_THROUGHPUT"}
)


def is_counter(metric: str) -> bool:
    """True for Prometheus counters: ``*_total`` and the DCGM fields the csv types ``counter``."""
    return metric.endswith("_total") or metric in COUNTER_METRICS


# --------------------------------------------------------------------------------------------
# Sites
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Site:
    name: str
    gpu: str
    gpus: int
    dcgm_fields: tuple[str, ...]
    rails: int  # RDMA NICs (IB HCAs or RoCE ports)
    ib_collector: bool
    ib_rate: float  # bytes/s per rail (node_infiniband_rate_bytes_per_second)
    ib_fields: tuple[str, ...]
    psi: bool
    netdevs: tuple[tuple[str, str], ...]  # (name, role)
    roce_devs: tuple[str, ...]
    tdp: float
    idle_w: float
    sm_max: float
    sm_idle: float
    mem_clock: float
    fb_total: float
    fb_reserved: float
    nvlink_mbps: float  # NVLink traffic (MB/s) per GPU at full step rate; 0 = no NVLink
    mem_temp_blank: bool
    n_cpu: int
    mem_total: float
    intervals: tuple[float, ...]


_NDR = 400e9 / 8  # node_exporter reports the sysfs rate "400 Gb/sec (4X NDR)" as bytes/s
_HDR = 200e9 / 8

SITES: dict[str, _Site] = {
    "nebula": _Site(
        "nebula",
        "NVIDIA H800 80GB HBM3",
        8,
        DCGM_V3_DCP + NVLINK_ERR,
        8,
        True,
        _NDR,
        IB_V1_0 + IB_NEW_EXTRA,
        True,
        (
            ("lo", "lo"),
            ("bond0", "bond"),
            ("ens1f0np0", "slave"),
            ("ens1f1np1", "slave"),
            ("docker0", "docker"),
            ("ibp26s0", "ipoib"),
            ("ibp60s0", "ipoib"),
        ),
        (),
        700.0,
        72.0,
        1980.0,
        345.0,
        2619.0,
        81559.0,
        0.0,
        160000.0,
        False,
        192,
        2.0e12,
        (15.0, 30.0),
    ),
    "aurora": _Site(
        "aurora",
        "NVIDIA A800-SXM4-80GB",
        8,
        DCGM_V2,
        4,
        True,
        _HDR,
        IB_V1_0,
        False,
        (
            ("lo", "lo"),
            ("eth0", "eth"),
            ("eth1", "mgmt"),
            ("docker0", "docker"),
            ("ib0", "ipoib"),
            ("ib1", "ipoib"),
        ),
        (),
        400.0,
        60.0,
        1410.0,
        210.0,
        1593.0,
        81920.0,
        0.0,
        120000.0,
        False,
        128,
        1.0e12,
        (30.0, 60.0),
    ),
    "grace": _Site(
        "grace",
        "NVIDIA GH200 480GB",
        1,
        DCGM_V4,
        1,
        True,
        _NDR,
        IB_V1_0 + IB_NEW_EXTRA,
        True,
        (("lo", "lo"), ("enP5p1s0f0np0", "eth"), ("ibP2p3s0", "ipoib"), ("docker0", "docker")),
        (),
        900.0,
        95.0,
        1980.0,
        345.0,
        2619.0,
        97871.0,
        545.0,
        0.0,
        False,
        72,
        4.8e11,
        (10.0, 15.0, 30.0, 60.0),
    ),
    "lumen": _Site(
        "lumen",
        "NVIDIA L40S",
        8,
        DCGM_V3_NOPROF,
        2,
        False,
        200e9 / 8,
        (),
        True,
        (
            ("lo", "lo"),
            ("eno1", "mgmt"),
            ("bond0", "bond"),
            ("ens1f0", "slave"),
            ("ens1f1", "slave"),
            ("ens2f0np0", "roce"),
            ("ens2f1np1", "roce"),
            ("docker0", "docker"),
        ),
        ("ens2f0np0", "ens2f1np1"),
        350.0,
        35.0,
        2520.0,
        210.0,
        9001.0,
        46068.0,
        0.0,
        0.0,
        True,
        64,
        1.0e12,
        (30.0, 60.0),
    ),
    "vega": _Site(
        "vega",
        "NVIDIA H100 80GB HBM3",
        8,
        DCGM_V4,
        8,
        True,
        _NDR,
        IB_V1_0 + IB_NEW_EXTRA,
        True,
        (
            ("lo", "lo"),
            ("bond0", "bond"),
            ("ens10f0np0", "slave"),
            ("ens10f1np1", "slave"),
            ("docker0", "docker"),
            ("ibp24s0", "ipoib"),
        ),
        (),
        700.0,
        75.0,
        1980.0,
        345.0,
        2619.0,
        81559.0,
        543.0,
        300000.0,
        False,
        224,
        2.0e12,
        (10.0, 15.0, 30.0),
    ),
}

_ZERO_FIELDS = frozenset(
    {_D + "ENC_UTIL", _D + "DEC_UTIL", _D + "VGPU_LICENSE_STATUS", _D + "ROW_REMAP_FAILURE"}
)
_DCGM_BLANK = 9223372036854775794.0  # DCGM's blank int64 value, as in dcgm-exporter's README
_NCCL_TIMEOUTS = (600.0, 1800.0)  # torch ProcessGroupNCCL default timeouts (10 and 30 min)


# --------------------------------------------------------------------------------------------
# Job
# --------------------------------------------------------------------------------------------


@dataclass
class Job:
    """One labelled window of one multi-node training job."""

    name: str
    kind: str
    nodes: list[str]
    start: datetime
    end: datetime
    culprits: dict[str, datetime]
    dcgm_interval: float
    node_interval: float
    site: str = ""
    spec: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def faulty(self) -> bool:
        return bool(self.culprits)

    @property
    def minutes(self) -> float:
        return (self.end - self.start).total_seconds() / 60.0

    @property
    def raw(self) -> pl.DataFrame:
        """Raw samples as Prometheus stores them; rendered on every access (not cached)."""
        return _render(self)


# --------------------------------------------------------------------------------------------
# Population
# --------------------------------------------------------------------------------------------

_NEEDS_IB = {"nic_dropout", "ib_rate_degraded", "ib_counter_reset"}
_NEEDS_NVLINK = {"nvlink_error"}
_NEEDS_DCP = {"nsight_pause"}


def _sites_for(kind: str) -> list[str]:
    out = []
    for name, s in SITES.items():
        if kind in _NEEDS_IB and not s.ib_collector:
            continue
        if kind in _NEEDS_NVLINK and s.nvlink_mbps <= 0:
            continue
        if kind in _NEEDS_DCP and _P + "GR_ENGINE_ACTIVE" not in s.dcgm_fields:
            continue
        if kind == "rolling_upgrade" and name not in ("vega", "nebula"):
            continue
        if kind == "nic_dropout" and name == "grace":
            continue  # single-port node: covered by node_unreachable-like behaviour elsewhere
        out.append(name)
    return out


def _hostnames(site: str, n: int, rng: np.random.Generator) -> list[str]:
    pool = {"nebula": 1024, "aurora": 2048, "grace": 2688, "lumen": 256, "vega": 1536}[site]
    first = int(rng.integers(0, max(1, pool - n - n // 8)))
    idx = np.arange(first, first + n + n // 8)
    # a few holes: drained nodes in the middle of the allocation
    idx = np.sort(rng.choice(idx, size=n, replace=False)) if n >= 8 else idx[:n]
    if site == "nebula":
        return [f"h800-r{i // 8:03d}-{i % 8 + 1:02d}" for i in idx]
    if site == "aurora":
        return [f"gpu{i + 1:04d}" for i in idx]
    if site == "grace":
        return [f"nid{i + 1000:06d}" for i in idx]
    if site == "lumen":
        return [f"l40s-{i + 1:03d}" for i in idx]
    return [f"hgx-b{i // 32 + 1}-{i % 32 + 1:03d}" for i in idx]


def _rows_estimate(site: _Site, n: int, minutes: float, di: float, ni: float) -> float:
    dcgm = len(site.dcgm_fields) * site.gpus
    node = 8 + len(_NE_HOST_GAUGES) + 6 + (len(site.netdevs) + 1) * 8 + 2
    node += (len(_NE_PSI) if site.psi else 0) + (site.rails * len(site.ib_fields))
    return n * minutes * 60.0 * (dcgm / di + node / ni)


def _choose_size(kind: str, rng: np.random.Generator) -> int:
    r = rng.random()
    if r < 0.08:
        return 4
    if r < 0.30:
        return int(rng.choice([6, 8, 8, 10, 12]))
    if r < 0.62:
        return int(rng.choice([16, 16, 20, 24, 32]))
    if r < 0.88:
        return int(rng.choice([32, 40, 48, 64]))
    return int(rng.choice([96, 128]))


# Big jobs: (plan index of kind occurrence, site, nodes, minutes)
_BIG = {
    ("steady", 0): ("grace", 1024, 40.0),
    ("link_flap", 1): ("aurora", 512, 36.0),
    ("node_unreachable", 2): ("nebula", 256, 34.0),
    ("checkpoint", 1): ("vega", 384, 32.0),
}


def _coarser(interval: float) -> float:
    return next((x for x in (10.0, 15.0, 30.0, 60.0) if x > interval), 60.0)


def jobs(seed: int = 0) -> list[Job]:
    """The labelled corpus; deterministic for a seed.  Raw samples are rendered by ``Job.raw``."""
    rng = np.random.default_rng([seed, 20260705])
    out: list[Job] = []
    base_day = datetime(2026, 3, 2, tzinfo=UTC)
    i = 0
    for kind, count in _PLAN:
        for k in range(count):
            jrng = np.random.default_rng([seed, 777, i])
            out.append(_make_job(kind, k, i, jrng, base_day))
            i += 1
    order = rng.permutation(len(out))
    return [out[j] for j in order]


def _make_job(kind: str, k: int, i: int, rng: np.random.Generator, base_day: datetime) -> Job:
    big = _BIG.get((kind, k))
    if big:
        site_name, n, minutes = big
    else:
        choices = _sites_for(kind)
        site_name = choices[int(rng.integers(0, len(choices)))]
        n = _choose_size(kind, rng)
        minutes = float(rng.choice([30, 40, 45, 50, 60, 60, 75, 90, 120]))
    site = SITES[site_name]
    if kind == "two_culprits":
        n = max(n, 8)
    if site_name == "grace" and not big:
        n = max(n, 8) * 2  # GH200 jobs need more nodes for the same GPU count
    intervals = list(site.intervals)
    di = float(intervals[int(rng.integers(0, len(intervals)))])
    ni = float(intervals[int(rng.integers(0, len(intervals)))])
    if big:
        di = ni = 60.0
    budget = 5.5e6 if big else 1.6e6
    while _rows_estimate(site, n, minutes, di, ni) > budget:
        if minutes > 45:
            minutes -= 15
        elif di < 60 or ni < 60:
            di, ni = _coarser(di), _coarser(ni)
        elif n > 8:
            n = n * 3 // 4
        else:
            break
    start = base_day + timedelta(days=i * 1.7, hours=float(rng.uniform(0, 23)))
    start = start.replace(microsecond=0)
    dur = minutes * 60.0
    nodes = _hostnames(site_name, n, rng)
    spec = _make_spec(kind, site, n, dur, rng)
    culprits = {
        nodes[f["node"]]: start + timedelta(seconds=float(f["onset"])) for f in spec["faults"]
    }
    return Job(
        name=f"v5-{i:03d}-{site_name}-{kind}",
        kind=kind,
        nodes=nodes,
        start=start,
        end=start + timedelta(seconds=dur),
        culprits=culprits,
        dcgm_interval=di,
        node_interval=ni,
        site=site_name,
        spec=spec | {"seed": int(rng.integers(0, 2**31)), "site": site_name},
    )


def _make_spec(kind: str, site: _Site, n: int, dur: float, rng: np.random.Generator) -> dict:
    """Timeline, background events, benign hard cases and faults for one job (seconds)."""
    sp: dict[str, Any] = {"faults": [], "events": [], "kind": kind}
    in_window_launch = kind in ("warmup_late_start",) or rng.random() < 0.3
    if in_window_launch:
        launch = float(rng.uniform(20, 240))
        load = float(rng.uniform(60, 200))
        warm = float(rng.uniform(120, 420))
    else:
        launch = -float(rng.uniform(1800, 20000))
        load, warm = 150.0, 300.0
    sp.update(launch=launch, load=load, warm=warm)
    sp["warm_end"] = max(0.0, launch + load + warm + 45.0)
    sp["c0"] = float(rng.uniform(0.72, 0.9))
    sp["stagger"] = float(rng.uniform(3, 40))
    sp["nccl_timeout"] = float(rng.choice(_NCCL_TIMEOUTS))
    sp["scrape_loss"] = float(rng.choice([0.0, 0.001, 0.003, 0.01]))
    ev = sp["events"]
    # Background checkpoints in most jobs: every 10..30 min, 40..150 s long.
    if rng.random() < 0.6 or kind == "checkpoint":
        every = (
            float(rng.uniform(600, 1800)) if kind != "checkpoint" else float(rng.uniform(420, 900))
        )
        dur_c = float(rng.uniform(40, 150))
        t = sp["warm_end"] + float(rng.uniform(120, every))
        writers = "all" if rng.random() < 0.5 else "dp0"
        while t < dur - 60:
            ev.append({"type": "ckpt", "t0": t, "t1": t + dur_c, "writers": writers})
            t += every
    lo = sp["warm_end"] + 180.0
    hi = dur - 600.0

    def onset() -> float:
        return float(rng.uniform(lo, max(lo + 1.0, hi - 120.0)))

    def pick_node(exclude: tuple[int, ...] = ()) -> int:
        while True:
            c = int(rng.integers(0, n))
            if c not in exclude:
                return c

    g = site.gpus
    if kind in FAULT_KINDS:
        if kind == "two_culprits":
            pool = ["thermal_slowdown", "pcie_degraded", "host_mem_leak", "cpu_contention"]
            if site.rails:
                pool.append("link_flap")
            a, b = rng.choice(pool, size=2, replace=False)
            c1 = pick_node()
            c2 = pick_node((c1,))
            t1 = onset()
            t2 = float(np.clip(t1 + rng.uniform(-600, 600), lo, hi - 60.0))
            sp["faults"].append(_fault(str(a), c1, t1, site, rng))
            sp["faults"].append(_fault(str(b), c2, t2, site, rng))
        else:
            sp["faults"].append(_fault(kind, pick_node(), onset(), site, rng))
    else:
        mid = float(rng.uniform(lo, max(lo + 1, hi)))
        if kind == "warmup_late_start":
            late = [pick_node() for _ in range(max(1, n // 16))]
            sp["late"] = {int(c): float(rng.uniform(90, 240)) for c in late}
        elif kind == "eval_phase":
            t = sp["warm_end"] + float(rng.uniform(300, 900))
            while t < dur - 300:
                d = float(rng.uniform(180, 480))
                ev.append({"type": "eval", "t0": t, "t1": t + d})
                t += float(rng.uniform(900, 1800))
        elif kind == "jobwide_slowdown":
            d = float(rng.uniform(600, 1500))
            ev.append({"type": "slow", "t0": mid - d / 2, "t1": mid + d / 2, "f": 0.55})
        elif kind == "nccl_timeout_restart":
            t0 = float(rng.uniform(lo, max(lo + 1, dur - 2400)))
            tc = t0 + float(rng.choice([300.0, 600.0]))
            ev.append({"type": "hang", "t0": t0, "t1": tc})
            ev.append({"type": "relaunch", "t0": tc + float(rng.uniform(60, 240))})
        elif kind == "short_blip":
            for _ in range(int(rng.integers(2, 5))):
                ev.append(
                    {
                        "type": "blip",
                        "node": pick_node(),
                        "t0": float(rng.uniform(lo, dur - 300)),
                        "dur": float(rng.uniform(30, 170)),
                        "what": str(rng.choice(["cpu", "ib", "temp", "iowait", "clock"])),
                    }
                )
        elif kind == "constant_offsets":
            ev.append({"type": "offsets", "zone": float(rng.uniform(5, 12))})
            locked = [pick_node() for _ in range(max(1, n // 8))]
            ev.append({"type": "lgc", "nodes": locked, "mhz": site.sm_max * 0.8})
        elif kind == "moving_imbalance":
            ev.append({"type": "imbalance", "period": float(rng.uniform(120, 420))})
        elif kind == "rank0_load":
            ev.append({"type": "rank0"})
        elif kind == "nsight_pause":
            c = pick_node()
            d = float(rng.uniform(300, 1200))
            ev.append({"type": "nsight", "node": c, "t0": mid - d / 2, "t1": mid + d / 2})
        elif kind == "exporter_restart":
            c_stale = pick_node()
            sp["stale_xid"] = {c_stale: (int(rng.integers(0, g)), 31.0)}
            for j in range(int(rng.integers(2, 6))):
                ev.append(
                    {
                        "type": "exp_restart",
                        "node": c_stale if j == 0 else pick_node(),
                        "t0": float(rng.uniform(lo, dur - 300)),
                        "dur": float(rng.uniform(20, 90)),
                        "which": "dcgm" if j == 0 else str(rng.choice(["dcgm", "node"])),
                    }
                )
        elif kind == "prometheus_gap":
            for _ in range(int(rng.integers(1, 3))):
                t0 = float(rng.uniform(120, dur - 400))
                ev.append({"type": "prom_gap", "t0": t0, "t1": t0 + float(rng.uniform(60, 300))})
        elif kind == "ib_counter_reset":
            resets = sorted(float(rng.uniform(120, dur - 120)) for _ in range(2))
            ev.append({"type": "ib_reset", "times": resets, "nodes": "all"})
            ev.append({"type": "ib_reset", "times": [mid], "nodes": [pick_node()]})
        elif kind == "elastic":
            joins = {pick_node(): float(rng.uniform(lo, dur - 900))}
            rel = {pick_node(tuple(joins)): float(rng.uniform(lo, dur - 600))}
            ev.append({"type": "elastic", "join": joins, "release": rel})
        elif kind == "dataloader_stall":
            ev.append({"type": "dl_stall", "every": float(rng.uniform(120, 400)), "dur": 40.0})
        elif kind == "stale_xid":
            sp["stale_xid"] = {
                pick_node(): (int(rng.integers(0, g)), float(rng.choice([13, 31, 43, 45])))
            }
        elif kind == "rolling_upgrade":
            sp["old_dcgm"] = [int(x) for x in rng.choice(n, size=n // 2, replace=False)]
    for f in sp["faults"]:
        if f["kind"] == "host_mem_leak":  # leave headroom: no OOM kill inside the window
            budget = 0.55 * site.mem_total / max((dur - f["onset"]) / 60.0, 1.0) / 1e9
            f["gb_per_min"] = min(f["gb_per_min"], budget)
    # random per-job extras
    if rng.random() < 0.15 and kind not in ("stale_xid", "exporter_restart"):
        sp.setdefault("stale_xid", {})[pick_node()] = (int(rng.integers(0, g)), 13.0)
    return sp


def _fault(kind: str, node: int, onset: float, site: _Site, rng: np.random.Generator) -> dict:
    g = site.gpus
    f: dict[str, Any] = {"kind": kind, "node": node, "onset": onset}
    f["gpu"] = int(rng.integers(0, g))
    f["port"] = int(rng.integers(0, max(1, site.rails)))
    if kind == "xid_ecc_hang":
        f["xid"] = 48.0 if site.name == "aurora" else float(rng.choice([94, 95, 48]))
    elif kind == "gpu_off_bus":
        f["whole_exporter"] = bool(rng.random() < 0.25)
    elif kind == "nvlink_error":
        f["hang"] = bool(rng.random() < 0.5)
    elif kind == "pcie_degraded":
        f["replays_per_s"] = float(rng.uniform(20, 400))
        f["v"] = float(rng.uniform(0.55, 0.8))
    elif kind == "link_flap":
        f["every"] = float(rng.uniform(45, 150))
        f["down"] = float(rng.uniform(3, 12))
    elif kind == "thermal_slowdown":
        f["gpus"] = sorted(int(x) for x in rng.choice(g, size=max(1, g // 2), replace=False))
        f["v"] = float(rng.uniform(0.45, 0.6))
    elif kind == "power_brake":
        f["v"] = float(rng.uniform(0.4, 0.55))
    elif kind == "host_mem_leak":
        f["gb_per_min"] = float(rng.uniform(12, 30))
    elif kind == "cpu_contention":
        f["cores"] = float(rng.uniform(0.5, 0.9)) * site.n_cpu
        f["v"] = float(rng.uniform(0.6, 0.85))
    elif kind == "io_stall":
        f["blocked"] = float(rng.uniform(20, 70))
        f["v"] = float(rng.uniform(0.25, 0.6))
    elif kind == "ib_rate_degraded":
        f["rate_div"] = float(rng.choice([2.0, 4.0]))
        f["v"] = float(rng.uniform(0.5, 0.8))
    elif kind == "gsp_hang":
        f["whole_exporter"] = bool(rng.random() < 0.67)
    return f


def table(job_list: list[Job]) -> pl.DataFrame:
    """One row per job: name, kind, faulty, nodes, minutes, intervals, culprits, onsets."""
    return pl.DataFrame(
        {
            "name": [j.name for j in job_list],
            "kind": [j.kind for j in job_list],
            "site": [j.site for j in job_list],
            "faulty": [bool(j.culprits) for j in job_list],
            "nodes": [len(j.nodes) for j in job_list],
            "minutes": [j.minutes for j in job_list],
            "dcgm_interval": [j.dcgm_interval for j in job_list],
            "node_interval": [j.node_interval for j in job_list],
            "intervals": [f"{j.dcgm_interval:g}s/{j.node_interval:g}s" for j in job_list],
            "culprits": [sorted(j.culprits) for j in job_list],
            "onsets": [[j.culprits[c] for c in sorted(j.culprits)] for j in job_list],
        },
        schema_overrides={"onsets": pl.List(pl.Datetime("us", "UTC"))},
    )


def aggregate(raw: pl.DataFrame, agg_for: Callable[[str], str]) -> pl.DataFrame:
    """Reduce devices per (time, node, metric); counters are always summed as raw totals."""
    metrics = raw.get_column("metric").unique().to_list()
    how: dict[str, str] = {}
    for m in metrics:
        a = "sum" if is_counter(m) else agg_for(m)
        if a not in ("min", "max", "sum", "avg"):
            raise ValueError(f"unknown aggregation {a!r} for {m}")
        how[m] = a
    groups = {a: [m for m, x in how.items() if x == a] for a in ("min", "max", "sum", "avg")}
    exprs = {
        "min": pl.col("value").min(),
        "max": pl.col("value").max(),
        "sum": pl.col("value").sum(),
        "avg": pl.col("value").mean(),
    }
    parts = []
    for a, ms in groups.items():
        if not ms:
            continue
        sub = raw.filter(pl.col("metric").is_in(ms))
        parts.append(sub.group_by(["time", "node", "metric"]).agg(exprs[a].alias("value")))
    schema = {"time": pl.Datetime("ms", "UTC"), "node": pl.String, "metric": pl.String}
    if not parts:
        return pl.DataFrame(schema=schema | {"value": pl.Float64})
    return pl.concat(parts).sort(["node", "metric", "time"])


# --------------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------------

_DT = 5.0  # latent base grid (s)


def _ewma(x: np.ndarray, tau: float) -> np.ndarray:
    """First-order lag along the last axis (exact discrete step, as the kernel's load average)."""
    a = math.exp(-_DT / tau)
    out = np.empty_like(x)
    acc = x[..., 0].copy()
    for i in range(x.shape[-1]):
        acc = acc * a + x[..., i] * (1.0 - a)
        out[..., i] = acc
    return out


def _win(t: np.ndarray, t0: float, t1: float) -> np.ndarray:
    return (t >= t0) & (t < t1)


class _Sim:
    """Latent state of one job on a 5 s grid; exporters sample it at their own scrape times."""

    def __init__(self, job: Job) -> None:
        sp = job.spec
        self.job = job
        self.sp = sp
        self.site = SITES[sp["site"]]
        self.rng = np.random.default_rng(sp["seed"])
        self.N = len(job.nodes)
        self.G = self.site.gpus
        self.R = max(1, self.site.rails)
        self.dur = (job.end - job.start).total_seconds()
        self.B = int(self.dur // _DT) + 2
        self.t = np.arange(self.B) * _DT
        self._timeline()
        self._gpu()
        self._host()
        self._net()

    # ---- job timeline -------------------------------------------------------------------
    def _timeline(self) -> None:
        sp, rng, N, B, t = self.sp, self.rng, self.N, self.B, self.t
        ev = sp["events"]
        launch_n = sp["launch"] + rng.uniform(0, sp["stagger"], N)
        for c, d in sp.get("late", {}).items():
            launch_n[c] += d
        load_n = sp["load"] * rng.uniform(0.9, 1.1, N)
        run = np.zeros((N, B), bool)
        loading = np.zeros((N, B), bool)
        member = np.zeros((N, B), bool)
        s = np.zeros(B)
        hung = np.zeros(B, bool)
        pause = np.zeros(B, bool)
        end_job = self.dur + 1.0
        hang_ev = [e for e in ev if e["type"] == "hang"]
        relaunch = [e for e in ev if e["type"] == "relaunch"]
        # Faults that hang the job until the NCCL timeout tears it down.
        hang_faults = [f for f in sp["faults"] if _hangs(f)]
        if hang_faults:
            t0 = min(f["onset"] for f in hang_faults)
            hang_ev = [{"t0": t0 + 5.0, "t1": t0 + sp["nccl_timeout"]}]
        epochs = [(launch_n, load_n)]
        ends = []
        for h in hang_ev:
            hung |= _win(t, h["t0"], h["t1"])
            ends.append(h["t1"])
        for r in relaunch:
            epochs.append((r["t0"] + rng.uniform(0, sp["stagger"], N), load_n * 0.8))
        ends.append(end_job)
        ends = sorted(ends)[: len(epochs)]
        if len(ends) < len(epochs):
            ends += [end_job] * (len(epochs) - len(ends))
        self.rdv: list[float] = []
        for (ln, ld), e_end in zip(epochs, ends, strict=True):
            rdv = float(np.max(ln + ld))
            self.rdv.append(rdv)
            for n in range(N):
                run[n] |= (t >= ln[n]) & (t < e_end)
                loading[n] |= (t >= ln[n]) & (t < min(ln[n] + ld[n], e_end))
            tr = (t >= rdv) & (t < e_end)
            ramp = np.clip((t - rdv) / max(sp["warm"], 1.0), 0.0, 1.0)
            s = np.where(tr, 0.35 + 0.65 * ramp, s)
            member |= tr[None, :] & run
        # elastic joins / releases
        self.joined_late = {}
        for e in ev:
            if e["type"] != "elastic":
                continue
            for c, tj in e["join"].items():
                run[c] &= t >= tj
                member[c] &= t >= tj + 90.0
                loading[c] = (t >= tj) & (t < tj + 90.0)
                pause |= _win(t, tj + 90.0, tj + 150.0)
                self.joined_late[c] = tj
            for c, tr_ in e["release"].items():
                run[c] &= t < tr_
                member[c] &= t < tr_
                pause |= _win(t, tr_, tr_ + 45.0)
        # job-level factors
        jf = np.ones(B)
        gap = np.full(B, 0.03)
        self.ckpt = np.zeros(B, bool)
        self.ckpt_writers = "all"
        self.eval = np.zeros(B, bool)
        self.dl = np.zeros(B, bool)
        for e in ev:
            if e["type"] == "ckpt":
                w = _win(t, e["t0"], e["t1"])
                self.ckpt |= w
                self.ckpt_writers = e["writers"]
            elif e["type"] == "eval":
                self.eval |= _win(t, e["t0"], e["t1"])
            elif e["type"] == "slow":
                jf = np.where(_win(t, e["t0"], e["t1"]), e["f"], jf)
            elif e["type"] == "dl_stall":
                ph = np.mod(t, e["every"])
                self.dl |= (ph < e["dur"]) & (t > sp["warm_end"])
        gap = np.where(self.ckpt, 0.97, gap)
        gap = np.where(self.dl, 0.7, gap)
        gap = np.where(pause, 0.95, gap)
        jf = np.where(self.eval, 0.55, jf)
        # node speed factors from faults
        v = np.ones((N, B))
        self.gdead = np.zeros((self.N, self.G, B), bool)
        for f in self.sp["faults"]:
            on = t >= f["onset"]
            if "v" in f:
                v[f["node"]] = np.where(on, np.minimum(v[f["node"]], f["v"]), v[f["node"]])
        for f in hang_faults:
            c = f["node"]
            on = t >= f["onset"]
            if f["kind"] in ("xid_ecc_hang", "gpu_off_bus", "gsp_hang"):
                self.gdead[c, f["gpu"]] |= on
            if f["kind"] == "node_unreachable":
                self.gdead[c] |= on[None, :]
        # after the teardown of a fault hang, nothing runs anymore
        if hang_faults:
            tc = min(f["onset"] for f in hang_faults) + sp["nccl_timeout"]
            run &= (t < tc)[None, :]
            member &= (t < tc)[None, :]
        vmin = np.where(member, v, np.inf).min(axis=0)
        vmin = np.where(np.isfinite(vmin), vmin, 1.0)
        s = s * jf * vmin
        s = np.where(hung, 0.0, s)
        self.run, self.loading, self.member, self.hung, self.v = run, loading, member, hung, v
        self.s, self.gap = s, gap
        # per-node relative compute: the slowest node computes all the time, others wait
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = np.where(member, np.clip(s[None, :] / v, 0.0, 1.0), 0.0)
        self.comp_node = rel * (1.0 - gap[None, :])

    # ---- GPUs ---------------------------------------------------------------------------
    def _gpu(self) -> None:
        sp, site, rng, N, G, B, t = self.sp, self.site, self.rng, self.N, self.G, self.B, self.t
        ev = sp["events"]
        stage = rng.uniform(0.9, 1.05, (N, G)) * rng.uniform(0.95, 1.03, (N, 1))
        comp = self.comp_node[:, None, :] * stage[:, :, None] * sp["c0"]
        for e in ev:
            if e["type"] == "imbalance":
                # pipeline/MoE hot spot that moves from node to node
                hot = (np.floor(t / e["period"]).astype(int) * 7919) % N
                mask = hot[None, :] == np.arange(N)[:, None]
                comp = np.where(mask[:, None, :], np.minimum(comp * 1.12, 1.0), comp * 0.93)
            if e["type"] == "rank0":
                comp[0] *= 1.03
        loading = self.loading[:, None, :]
        member = self.member[:, None, :]
        hung = self.hung[None, None, :]
        spiky = rng.uniform(0.0, 0.35, (N, G, B))
        util = np.where(loading, spiky, 0.0)
        util = np.where(member, np.where(hung, 1.0, 1.0 - self.gap[None, None, :]), util)
        util = np.where(self.gdead, 0.0, util)
        comp = np.where(self.gdead | hung, 0.0, comp)
        # power (W) and clocks (MHz)
        span = site.tdp - site.idle_w
        power = site.idle_w + span * (0.28 * util + 0.72 * comp / 0.92)
        power = np.minimum(power, site.tdp * 0.985)
        active = util > 0.02
        clock = np.where(
            active, site.sm_max - 140.0 * comp - np.maximum(0, power - 0.95 * site.tdp), 0.0
        )
        clock = np.where(active, clock, site.sm_idle)
        inlet = rng.normal(24.0, 1.5, (N, 1)) + rng.normal(0, 1.2, (N, G))
        temp_extra = np.zeros((N, G, B))
        for e in ev:
            if e["type"] == "offsets":
                zone = (np.arange(N) * 3 // max(N, 1)).astype(float)  # three cooling zones
                inlet += (zone * e["zone"] / 2.0)[:, None]
            if e["type"] == "lgc":
                for c in e["nodes"]:
                    clock[c] = np.where(active[c], np.minimum(clock[c], e["mhz"]), clock[c])
                    power[c] = site.idle_w + (power[c] - site.idle_w) * 0.82
            if e["type"] == "blip":
                w = _win(t, e["t0"], e["t0"] + e["dur"])
                c = e["node"]
                if e["what"] == "temp":
                    temp_extra[c] += np.where(w, 6.0, 0.0)
                if e["what"] == "clock":
                    clock[c] = np.where(w[None, :] & active[c], clock[c] * 0.7, clock[c])
        xid = np.zeros((N, G, B))
        for c, (gg, x) in sp.get("stale_xid", {}).items():
            xid[c, gg] = x
        replay_rate = np.zeros((N, G, B))
        nvl_err_rate = np.zeros((N, G, B))
        remap_u = np.zeros((N, G, B))
        remap_c = np.zeros((N, G, B))
        present = np.ones((N, G, B), bool)
        self.dcgm_down = np.zeros((N, B), bool)
        self.dcp_off = np.zeros((N, B), bool)
        self.nvl_dead = np.zeros((N, G, B), bool)
        self.extra_blocked = np.zeros((N, B))
        for f in sp["faults"]:
            c, gg, on = f["node"], f["gpu"], t >= f["onset"]
            k = f["kind"]
            if k == "xid_ecc_hang":
                xid[c, gg] = np.where(on, f["xid"], xid[c, gg])
                remap_u[c, gg] = np.where(on, 1.0, 0.0)
            elif k == "gpu_off_bus":
                if f["whole_exporter"]:
                    self.dcgm_down[c] |= on
                else:
                    present[c, gg] &= ~on
                self.extra_blocked[c] += np.where(on, 3.0, 0.0)
            elif k == "nvlink_error":
                xid[c, gg] = np.where(on, 74.0, xid[c, gg])
                self.nvl_dead[c, gg] |= on
                nvl_err_rate[c, gg] += np.where(on, rng.uniform(5, 40), 0.0)
            elif k == "pcie_degraded":
                replay_rate[c, gg] += np.where(on, f["replays_per_s"], 0.0)
            elif k == "thermal_slowdown":
                ramp = np.clip((t - f["onset"]) / 240.0, 0.0, 1.0)
                for q in f["gpus"]:
                    temp_extra[c, q] += ramp * rng.uniform(24, 34)
                    hot = ramp > 0.6
                    clock[c, q] = np.where(hot & active[c, q], clock[c, q] * 0.5, clock[c, q])
                    power[c, q] = np.where(
                        hot, site.idle_w + (power[c, q] - site.idle_w) * 0.55, power[c, q]
                    )
            elif k == "power_brake":
                clock[c] = np.where(on[None, :] & active[c], clock[c] * 0.42, clock[c])
                power[c] = np.where(
                    on[None, :], site.idle_w + (power[c] - site.idle_w) * 0.4, power[c]
                )
            elif k == "gsp_hang":
                xid[c, gg] = np.where(on, 119.0, xid[c, gg])
                if f["whole_exporter"]:
                    self.dcgm_down[c] |= on
                else:
                    present[c, gg] &= ~on
                self.extra_blocked[c] += np.where(on, 2.0, 0.0)
            elif k == "row_remap_pending":
                xid[c, gg] = np.where(on, 63.0, xid[c, gg])
                remap_c[c, gg] = np.where(on, 1.0, 0.0)
                clock[c, gg] = np.where(on & active[c, gg], clock[c, gg] * 0.88, clock[c, gg])
            elif k == "node_unreachable":
                pass
        for e in ev:
            if e["type"] == "nsight":
                self.dcp_off[e["node"]] |= _win(t, e["t0"], e["t1"])
            if e["type"] == "exp_restart" and e["which"] == "dcgm":
                # dcgm-exporter restart clears the sticky XID gauge (dcgm-exporter issue #500)
                c = e["node"]
                xid[c] = np.where(t[None, :] >= e["t0"] + e["dur"], 0.0, xid[c])
        # temperatures with thermal lag
        k_th = {"nebula": 0.058, "aurora": 0.085, "grace": 0.05, "lumen": 0.13, "vega": 0.058}
        target = inlet[:, :, None] + k_th[site.name] * power + temp_extra
        temp = _ewma(target, 45.0)
        temp = np.minimum(temp, 93.0)
        self.g_power = power + rng.normal(0, 0.012 * site.tdp, (N, G, B))
        self.g_power = np.maximum(self.g_power, site.idle_w * 0.8)
        self.g_clock = np.round(np.clip(clock + rng.normal(0, 6, (N, G, B)), 100, site.sm_max) / 15)
        self.g_clock *= 15
        self.g_clock = np.where(active, self.g_clock, site.sm_idle)
        self.g_temp = np.round(temp + rng.normal(0, 0.4, (N, G, B)))
        self.g_memtemp = np.round(temp + 6.0 + 4.0 * comp + rng.normal(0, 0.4, (N, G, B)))
        self.g_util, self.g_comp = util, comp
        self.g_xid, self.g_present = xid, present
        self.g_replay_rate, self.g_nvl_err_rate = replay_rate, nvl_err_rate
        self.g_remap_u, self.g_remap_c = remap_u, remap_c
        fb_job = site.fb_total * rng.uniform(0.86, 0.9) * rng.uniform(0.97, 1.03, (N, G))
        lt = self.loading[:, None, :]
        fill = np.where(self.run[:, None, :], 1.0, 0.0)
        fill = np.where(lt, rng.uniform(0.1, 0.9, (N, G, B)) * 0.5 + 0.25, fill)
        fb = np.where(self.gdead, 0.0, fb_job[:, :, None] * fill)
        self.g_fb_used = np.round(fb)

    # ---- host ---------------------------------------------------------------------------
    def _host(self) -> None:
        sp, site, rng, N, B, t = self.sp, self.site, self.rng, self.N, self.B, self.t
        ev = sp["events"]
        G = self.G
        member = self.member
        run = self.run
        rel_s = np.where(member, np.maximum(self.s[None, :], 0.0), 0.0)
        user = 0.6 + np.where(run, G * 1.0, 0.0) + np.where(member, G * 0.9 * rel_s, 0.0)
        user = user + np.where(self.loading, G * 2.5, 0.0)
        user = user + rng.normal(0, 0.3, (N, B))
        runnable = user * 0.8 + rng.normal(0, 1.0, (N, B))
        blocked = np.maximum(0.0, rng.normal(0.3, 0.4, (N, B))) + self.extra_blocked
        iowait = np.full((N, B), 0.05) + np.where(self.dl[None, :] & member, 2.0, 0.0)
        rss = rng.uniform(28e9, 52e9) * rng.uniform(0.97, 1.03, (N, 1))
        mem_anon = 18e9 + np.where(run, G * rss, 0.0) + rng.normal(0, 1e9, (N, 1))
        mem_anon = mem_anon * (site.mem_total / 2e12) ** 0.5
        cache = site.mem_total * rng.uniform(0.2, 0.24, (N, 1)) * np.ones((1, B))
        dirty = np.abs(rng.normal(2e7, 1e7, (N, B)))
        disk_w = np.abs(rng.normal(2e6, 1e6, (N, B)))
        disk_r = np.where(member, rng.uniform(5e7, 2e8, (N, 1)), 1e5) * np.ones((1, B))
        io_busy = np.full((N, B), 0.02)
        psi_mem = np.zeros((N, B))
        front_tx = np.abs(rng.normal(3e6, 1e6, (N, B)))
        front_rx = np.where(member, rng.uniform(1e8, 4e8, (N, 1)), 2e6) * (1 - 0.5 * self.gap)
        # checkpoints: serialization CPU, page cache, dirty pages, disk and storage writes
        writers = np.ones(N, bool)
        if self.ckpt_writers == "dp0":
            writers = np.arange(N) < max(1, N // 4)
        ck = self.ckpt[None, :] & writers[:, None] & member
        user = user + np.where(ck, G * 1.2, 0.0)
        dirty = dirty + np.where(ck, rng.uniform(2e9, 8e9, (N, 1)), 0.0)
        front_tx = front_tx + np.where(ck, rng.uniform(1.5e9, 4e9, (N, 1)), 0.0)
        disk_w = disk_w + np.where(ck, 1.5e9, 0.0)
        io_busy = np.where(ck, 0.6, io_busy)
        for e in ev:
            if e["type"] == "rank0":
                user[0] += 10.0
                runnable[0] += 12.0
                mem_anon[0] += 60e9 * (site.mem_total / 2e12)
                front_tx[0] += 4e7
            if e["type"] == "blip":
                w = _win(t, e["t0"], e["t0"] + e["dur"])
                c = e["node"]
                if e["what"] == "cpu":
                    user[c] += np.where(w, 0.5 * site.n_cpu, 0.0)
                    runnable[c] += np.where(w, 0.6 * site.n_cpu, 0.0)
                if e["what"] == "iowait":
                    iowait[c] += np.where(w, 8.0, 0.0)
                    blocked[c] += np.where(w, 12.0, 0.0)
        for f in sp["faults"]:
            c, on = f["node"], t >= f["onset"]
            k = f["kind"]
            if k == "host_mem_leak":
                leak = np.maximum(0.0, t - f["onset"]) / 60.0 * f["gb_per_min"] * 1e9
                mem_anon[c] += leak
                cache[c] = np.maximum(cache[c] - 0.5 * leak, site.mem_total * 0.01)
                free_frac = 1.0 - (mem_anon[c] + cache[c]) / site.mem_total
                psi_mem[c] = np.where(free_frac < 0.1, 0.3, 0.0)
            elif k == "cpu_contention":
                user[c] += np.where(on, f["cores"], 0.0)
                runnable[c] += np.where(on, f["cores"] * 1.6, 0.0)
            elif k == "io_stall":
                blocked[c] += np.where(on, f["blocked"], 0.0)
                iowait[c] += np.where(on, min(f["blocked"], site.n_cpu * 0.5), 0.0)
                io_busy[c] = np.where(on, 0.99, io_busy[c])
                disk_r[c] = np.where(on, disk_r[c] * 0.1, disk_r[c])
        user = np.clip(user, 0.1, site.n_cpu * 0.97)
        system = 0.25 + 0.12 * user + rng.normal(0, 0.05, (N, B))
        softirq = 0.1 + 0.02 * G * np.where(member, self.s[None, :], 0.0)
        iowait = np.clip(iowait, 0.0, np.maximum(site.n_cpu - user - system - softirq, 0.0))
        self.cpu = {
            "user": np.maximum(user, 0.01),
            "system": np.maximum(system, 0.01),
            "iowait": iowait,
            "softirq": np.maximum(softirq, 0.0),
            "irq": np.full((N, B), 0.02),
            "nice": np.full((N, B), 0.005),
            "steal": np.zeros((N, B)),
        }
        busy = sum(self.cpu.values())
        self.cpu["idle"] = np.maximum(site.n_cpu - busy, 0.0)
        nr = np.maximum(runnable + blocked, 0.0)
        self.load = {"1": _ewma(nr, 60.0), "5": _ewma(nr, 300.0), "15": _ewma(nr, 900.0)}
        self.runnable = np.maximum(np.round(runnable), 1.0)
        self.blocked = np.maximum(np.round(blocked), 0.0)
        unrec = site.mem_total * 0.03
        avail = site.mem_total - mem_anon - unrec - 0.05 * cache
        self.mem_avail = np.maximum(avail + rng.normal(0, 2e8, (N, B)), 0.02 * site.mem_total)
        self.mem_cached = np.maximum(cache + rng.normal(0, 5e8, (N, B)), 1e9)
        self.mem_dirty = dirty
        cpu_wait = np.clip((nr - site.n_cpu * 0.8) / site.n_cpu, 0.0, 1.0) + 0.002
        io_wait = np.clip(blocked / 30.0, 0.0, 0.95)
        self.psi = {
            "cpu_waiting": cpu_wait,
            "io_waiting": io_wait,
            "io_stalled": io_wait * 0.6,
            "memory_waiting": psi_mem,
        }
        self.ctx_rate = 1.5e5 + 4e4 * G * np.where(member, 1.0, 0.1) + 2e3 * user
        self.disk = {"r": disk_r, "w": disk_w, "busy": io_busy}
        self.front = {"rx": front_rx, "tx": front_tx}

    # ---- network ------------------------------------------------------------------------
    def _net(self) -> None:
        sp, site, rng, N, B, t, R = self.sp, self.site, self.rng, self.N, self.B, self.t, self.R
        ev = sp["events"]
        share = np.where(self.member, self.s[None, :], 0.0) * (1.0 - self.gap[None, :])
        share = np.where(self.eval[None, :], share * 0.35, share)
        util = rng.uniform(0.25, 0.42)
        traffic = site.ib_rate * util * share[:, None, :] * rng.uniform(0.9, 1.1, (N, R, 1))
        traffic = traffic + 2e4
        rate = np.full((N, R, B), site.ib_rate)
        present = np.ones((N, R, B), bool)
        down = np.zeros((N, R, B), bool)
        flap_n = np.zeros((N, R, B))
        err_rate = np.zeros((N, R, B))
        wait_rate = traffic / site.ib_rate * 4e6 * rng.uniform(0.5, 1.5, (N, R, 1))
        resets: list[tuple[int, float]] = []
        for f in sp["faults"]:
            c, p, on = f["node"], f["port"], t >= f["onset"]
            k = f["kind"]
            if k == "nic_dropout":
                present[c, p] &= ~on
            elif k == "link_flap":
                ph = np.mod(t - f["onset"], f["every"])
                d = on & (ph < f["down"])
                down[c, p] |= d
                starts = on & (ph < _DT)
                flap_n[c, p] += starts
                err_rate[c, p] += np.where(on, rng.uniform(2, 30), 0.0)
                traffic[c, p] = np.where(d, 0.0, traffic[c, p])
            elif k == "ib_rate_degraded":
                rate[c, p] = np.where(on, site.ib_rate / f["rate_div"], rate[c, p])
                wait_rate[c, p] = np.where(on, wait_rate[c, p] * 25 + 5e6, wait_rate[c, p])
                traffic[c, p] = np.minimum(traffic[c, p], rate[c, p] * 0.9)
        for e in ev:
            if e["type"] == "blip" and e["what"] == "ib":
                w = _win(t, e["t0"], e["t0"] + e["dur"])
                c = e["node"]
                p = int(rng.integers(0, R))
                err_rate[c, p] += np.where(w, 5.0, 0.0)
            if e["type"] == "ib_reset":
                targets = range(N) if e["nodes"] == "all" else e["nodes"]
                for c in targets:
                    for tt in e["times"]:
                        resets.append((c, tt))
        # a flapping port is down at some scrapes
        self.ib_traffic_tx = traffic
        self.ib_traffic_rx = traffic * rng.uniform(0.97, 1.03, (N, R, 1))
        self.ib_rate, self.ib_present, self.ib_down = rate, present, down
        self.ib_flaps, self.ib_err_rate, self.ib_wait_rate = flap_n, err_rate, wait_rate
        self.ib_resets = resets


def _hangs(f: dict) -> bool:
    k = f["kind"]
    if k in ("xid_ecc_hang", "gpu_off_bus", "nic_dropout", "node_unreachable", "gsp_hang"):
        return True
    return k == "nvlink_error" and bool(f.get("hang"))


# --------------------------------------------------------------------------------------------
# Emission
# --------------------------------------------------------------------------------------------


class _Out:
    """Columnar accumulator; strings are built once at the end from small vocabularies."""

    def __init__(self, nodes: list[str]) -> None:
        self.nodes = nodes
        self.metrics: dict[str, int] = {}
        self.devices: dict[str, int] = {}
        self.parts: list[tuple[np.ndarray, np.ndarray, int, np.ndarray, np.ndarray]] = []

    def code(self, dev: str) -> int:
        return self.devices.setdefault(dev, len(self.devices))

    def add(
        self,
        metric: str,
        dev: list[str] | np.ndarray,
        ts: np.ndarray,
        vals: np.ndarray,
        ok: np.ndarray,
    ) -> None:
        """ts (N,K) ms, vals/ok (N,D,K); dev: D names, or an (N,D) array of device codes."""
        m = self.metrics.setdefault(metric, len(self.metrics))
        n, nd, k = vals.shape
        if isinstance(dev, np.ndarray):
            dev_idx = np.broadcast_to(dev.astype(np.uint32)[:, :, None], (n, nd, k))
        else:
            d_codes = np.array([self.code(d) for d in dev], np.uint32)
            dev_idx = np.broadcast_to(d_codes[None, :, None], (n, nd, k))
        node_idx = np.broadcast_to(np.arange(n, dtype=np.uint32)[:, None, None], (n, nd, k))
        tt = np.broadcast_to(ts[:, None, :], (n, nd, k))
        sel = ok.ravel()
        self.parts.append(
            (
                tt.ravel()[sel],
                node_idx.ravel()[sel],
                m,
                dev_idx.ravel()[sel],
                vals.ravel()[sel].astype(np.float64),
            )
        )

    def frame(self) -> pl.DataFrame:
        if not self.parts:
            return pl.DataFrame(
                schema={
                    "time": pl.Datetime("ms", "UTC"),
                    "node": pl.String,
                    "metric": pl.String,
                    "device": pl.String,
                    "value": pl.Float64,
                }
            )
        time = np.concatenate([p[0] for p in self.parts])
        node = np.concatenate([p[1] for p in self.parts])
        metric = np.concatenate([np.full(len(p[0]), p[2], np.uint32) for p in self.parts])
        dev = np.concatenate([p[3] for p in self.parts])
        val = np.concatenate([p[4] for p in self.parts])
        self.parts.clear()
        node_s = pl.Series(self.nodes, dtype=pl.String)
        met_s = pl.Series(list(self.metrics), dtype=pl.String)
        dev_s = pl.Series(list(self.devices), dtype=pl.String)
        return pl.DataFrame(
            {
                "time": pl.Series("time", time, dtype=pl.Int64).cast(pl.Datetime("ms", "UTC")),
                "node": node_s.gather(pl.Series(node)),
                "metric": met_s.gather(pl.Series(metric)),
                "device": dev_s.gather(pl.Series(dev)),
                "value": pl.Series(val, dtype=pl.Float64),
            }
        )


def _scrapes(sim: _Sim, interval: float, which: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-node scrape times: ms since epoch (N,K), base-grid index (N,K), scrape ok (N,K)."""
    rng = np.random.default_rng([sim.sp["seed"], 11 if which == "dcgm" else 13])
    N, sp = sim.N, sim.sp
    K = int(sim.dur // interval)
    phase = rng.uniform(0, interval, (N, 1))
    jitter = rng.normal(0, 0.004, (N, K))
    rel = phase + np.arange(K)[None, :] * interval + jitter
    rel = np.clip(rel, 0.0, sim.dur - 0.001)
    t0_ms = int(sim.job.start.timestamp() * 1000)
    ts = t0_ms + np.round(rel * 1000).astype(np.int64)
    bi = np.minimum((rel // _DT).astype(np.int64), sim.B - 1)
    ok = rng.random((N, K)) >= sp["scrape_loss"]
    for e in sp["events"]:
        if e["type"] == "prom_gap":
            ok &= ~((rel >= e["t0"]) & (rel < e["t1"]))
        if e["type"] == "exp_restart" and e["which"] == which:
            c = e["node"]
            ok[c] &= ~((rel[c] >= e["t0"]) & (rel[c] < e["t0"] + e["dur"]))
    for f in sp["faults"]:
        if f["kind"] == "node_unreachable":
            c = f["node"]
            ok[c] &= rel[c] < f["onset"]
    if which == "dcgm":
        ok &= ~np.take_along_axis(sim.dcgm_down, bi, axis=1)
    return ts, bi, ok


def _g(a: np.ndarray, bi: np.ndarray) -> np.ndarray:
    """Sample a (N,D,B) latent array at per-node base indices bi (N,K) -> (N,D,K)."""
    return np.take_along_axis(a, bi[:, None, :], axis=2)


def _counter(rate: np.ndarray, start: np.ndarray, integer: bool = False) -> np.ndarray:
    """Integrate a (N,D,B) rate into a monotone total (exact integers if ``integer``)."""
    inc = np.maximum(rate, 0.0) * _DT
    tot = np.cumsum(inc, axis=-1) + start[..., None]
    return np.floor(tot) if integer else tot


def _render(job: Job) -> pl.DataFrame:
    sim = _Sim(job)
    out = _Out(job.nodes)
    _emit_dcgm(sim, out)
    _emit_node(sim, out)
    return out.frame()


def _emit_dcgm(sim: _Sim, out: _Out) -> None:
    site, rng, N, G = sim.site, np.random.default_rng([sim.sp["seed"], 3]), sim.N, sim.G
    ts, bi, ok = _scrapes(sim, sim.job.dcgm_interval, "dcgm")
    K = ts.shape[1]
    devs = [str(g) for g in range(G)]
    present = _g(sim.g_present, bi) & ok[:, None, :]
    fields_n = [site.dcgm_fields] * N
    old = set(sim.sp.get("old_dcgm", []))
    if old:
        old_fields = DCGM_V3_DCP if site.name == "vega" else DCGM_V4
        fields_n = [old_fields if n in old else site.dcgm_fields for n in range(N)]
    all_fields = list(dict.fromkeys(f for fs in fields_n for f in fs))
    util = _g(sim.g_util, bi)
    comp = _g(sim.g_comp, bi)
    member = np.take_along_axis(sim.member, bi, axis=1)[:, None, :]
    s_now = sim.s[bi][:, None, :]
    ibtx = sim.ib_traffic_tx  # (N,R,B)
    rail_of = (np.arange(G) * sim.R) // G
    gpu_net = _g(ibtx[:, rail_of, :], bi)  # traffic of each GPU's rail
    energy0 = rng.uniform(1e11, 3e12, (N, G))
    for fld in all_fields:
        name = fld.removeprefix(_D).removeprefix(_P)
        noise = rng.normal(0, 1, (N, G, K))
        if fld == _D + "SM_CLOCK":
            v = _g(sim.g_clock, bi)
        elif fld == _D + "MEM_CLOCK":
            v = np.full((N, G, K), site.mem_clock)
        elif fld == _D + "GPU_TEMP":
            v = _g(sim.g_temp, bi)
        elif fld == _D + "MEMORY_TEMP":
            v = np.full((N, G, K), _DCGM_BLANK) if site.mem_temp_blank else _g(sim.g_memtemp, bi)
        elif fld == _D + "POWER_USAGE":
            v = np.round(_g(sim.g_power, bi), 3)
        elif fld == _D + "TOTAL_ENERGY_CONSUMPTION":
            v = _g(_counter(sim.g_power * 1000.0, energy0, integer=True), bi)
        elif fld in (_D + "PCIE_TX_THROUGHPUT", _D + "PCIE_RX_THROUGHPUT"):
            v = np.maximum((gpu_net * 1.02 + 3e7 * util) / 1024.0 * (1 + 0.15 * noise), 0.0)
            v = np.round(v)
        elif fld == _D + "PCIE_REPLAY_COUNTER":
            base = np.where(rng.random((N, G)) < 0.05, rng.integers(1, 40, (N, G)), 0)
            v = _g(_counter(sim.g_replay_rate, base.astype(float), integer=True), bi)
        elif fld == _D + "GPU_UTIL":
            v = np.round(np.clip(util * 100 + 1.5 * noise * (util > 0), 0, 100))
        elif fld == _D + "MEM_COPY_UTIL":
            v = np.round(
                np.clip((0.08 * util + 0.42 * comp) * 100 + 2 * noise * (util > 0), 0, 100)
            )
        elif fld in _ZERO_FIELDS:
            v = np.zeros((N, G, K))
        elif fld == _D + "XID_ERRORS":
            v = _g(sim.g_xid, bi)
        elif fld == _D + "FB_USED":
            v = _g(sim.g_fb_used, bi)
        elif fld == _D + "FB_FREE":
            v = site.fb_total - site.fb_reserved - _g(sim.g_fb_used, bi)
        elif fld == _D + "FB_RESERVED":
            v = np.full((N, G, K), site.fb_reserved)
        elif fld == _D + "NVLINK_BANDWIDTH_TOTAL":
            if site.nvlink_mbps <= 0:
                continue  # PCIe cards: field not supported, nothing exported (GUESS)
            nv = site.nvlink_mbps * s_now * member * (1.0 - sim.gap[bi][:, None, :])
            nv = np.where(_g(sim.nvl_dead, bi), 0.0, nv)
            v = np.round(np.maximum(nv * (1 + 0.08 * noise) + 5.0, 0.0))
        elif fld == _D + "UNCORRECTABLE_REMAPPED_ROWS":
            base = np.where(rng.random((N, G)) < 0.02, 1.0, 0.0)
            v = base[:, :, None] + _g(sim.g_remap_u, bi)
        elif fld == _D + "CORRECTABLE_REMAPPED_ROWS":
            base = np.where(rng.random((N, G)) < 0.06, rng.integers(1, 4, (N, G)), 0)
            v = base[:, :, None] + _g(sim.g_remap_c, bi)
        elif fld in NVLINK_ERR:
            base = np.where(rng.random((N, G)) < 0.1, rng.integers(1, 200, (N, G)), 0)
            scale = {"CRC_FLIT": 1.0, "REPLAY": 0.3, "RECOVERY": 0.02}
            sc = next(x for key, x in scale.items() if key in name)
            v = _g(_counter(sim.g_nvl_err_rate * sc, base.astype(float), integer=True), bi)
        elif fld == _P + "GR_ENGINE_ACTIVE":
            v = np.clip(util * 0.985 + 0.004 * noise * (util > 0), 0, 1)
        elif fld == _P + "PIPE_TENSOR_ACTIVE":
            v = np.clip(comp * 0.62 + 0.01 * noise * (comp > 0), 0, 1)
        elif fld == _P + "DRAM_ACTIVE":
            v = np.clip(comp * 0.38 + 0.05 * util + 0.01 * noise * (util > 0), 0, 1)
        elif fld in (_P + "PCIE_TX_BYTES", _P + "PCIE_RX_BYTES"):
            v = np.maximum(gpu_net * 1.03 + 2.5e8 * util + 2e6 * noise, 0.0)
        else:  # pragma: no cover - catalogue and emitter out of sync
            raise AssertionError(fld)
        keep = present.copy()
        if len(set(map(id, fields_n))) > 1:
            has = np.array([fld in fields_n[n] for n in range(N)])
            keep &= has[:, None, None]
        if fld.startswith(_P):
            keep &= ~np.take_along_axis(sim.dcp_off, bi, axis=1)[:, None, :]
        out.add(fld, devs, ts, np.asarray(v, np.float64), keep)


def _emit_node(sim: _Sim, out: _Out) -> None:
    site, N, B = sim.site, sim.N, sim.B
    rng = np.random.default_rng([sim.sp["seed"], 5])
    ts, bi, ok = _scrapes(sim, sim.job.node_interval, "node")
    K = ts.shape[1]
    ok3 = ok[:, None, :]
    uptime = rng.uniform(2 * 86400, 90 * 86400, N)

    def host(metric: str, a: np.ndarray) -> None:
        out.add(metric, [""], ts, np.take_along_axis(a, bi, axis=1)[:, None, :], ok3)

    # cpu (summed over CPUs, one series per mode)
    modes = list(_CPU_MODES)
    shares0 = {
        "idle": 0.9,
        "iowait": 0.002,
        "irq": 0.0005,
        "nice": 0.001,
        "softirq": 0.004,
        "steal": 0.0,
        "system": 0.02,
        "user": 0.07,
    }
    rates = np.stack([sim.cpu[m] for m in modes], axis=1)  # (N,M,B)
    start = np.stack([uptime * site.n_cpu * shares0[m] for m in modes], axis=1)
    out.add(_NE_CPU, modes, ts, np.round(_g(_counter(rates, start), bi), 2), np.repeat(ok3, 8, 1))
    host("node_load1", sim.load["1"])
    host("node_load5", sim.load["5"])
    host("node_load15", sim.load["15"])
    host("node_memory_MemTotal_bytes", np.full((N, B), site.mem_total))
    host("node_memory_MemAvailable_bytes", np.round(sim.mem_avail / 1024) * 1024)
    host("node_memory_Cached_bytes", np.round(sim.mem_cached / 1024) * 1024)
    host("node_memory_Dirty_bytes", np.round(sim.mem_dirty / 1024) * 1024)
    host("node_procs_running", sim.runnable)
    host("node_procs_blocked", sim.blocked)
    boot = sim.job.start.timestamp() - uptime
    host("node_boot_time_seconds", np.repeat(np.round(boot)[:, None], B, axis=1))
    ctx = _counter(sim.ctx_rate[:, None, :], uptime[:, None] * 2e5, integer=True)[:, 0, :]
    host("node_context_switches_total", ctx)
    if site.psi:
        for key, m in zip(
            ("cpu_waiting", "io_waiting", "io_stalled", "memory_waiting"), _NE_PSI, strict=True
        ):
            c = _counter(sim.psi[key][:, None, :], uptime[:, None] * 1e-3)[:, 0, :]
            host(m, np.round(c, 6))
    # disks
    disks = ["nvme0n1", "nvme1n1"]
    dr = np.stack([np.full((N, B), 2e4), sim.disk["r"]], axis=1)
    dw = np.stack([np.full((N, B), 6e4), sim.disk["w"]], axis=1)
    db = np.stack([np.full((N, B), 0.003), sim.disk["busy"]], axis=1)
    for m, rate, sc in zip(_NE_DISK, (dr, dw, db), (5e5, 3e5, 0.01), strict=True):
        st = uptime[:, None] * sc * rng.uniform(0.5, 2, (N, 2))
        out.add(
            m, disks, ts, _g(_counter(rate, st, integer=m != _NE_DISK[2]), bi), np.repeat(ok3, 2, 1)
        )
    _emit_netdev(sim, out, ts, bi, ok, uptime, rng)
    if site.ib_collector:
        _emit_ib(sim, out, ts, bi, ok, rng)
    del K


def _emit_netdev(sim, out, ts, bi, ok, uptime, rng) -> None:
    site, N, B, t = sim.site, sim.N, sim.B, sim.t
    devs = [d for d, _ in site.netdevs]
    roles = [r for _, r in site.netdevs]
    veth = [f"veth{rng.integers(0, 16**7):07x}" for _ in range(N)]
    D = len(devs) + 1
    rx = np.zeros((N, D, B))
    tx = np.zeros((N, D, B))
    up = np.ones((N, D, B))
    present = np.ones((N, D, B), bool)
    carrier0 = rng.integers(2, 8, (N, D)).astype(float)
    flaps = np.zeros((N, D, B))
    speed = np.full((N, D), np.nan)
    front_speed = 25e9 / 8 if site.name != "aurora" else 100e9 / 8
    for i, role in enumerate(roles):
        if role == "lo":
            rx[:, i] = tx[:, i] = 4e5
            up[:, i] = 0.0  # operstate "unknown" -> node_network_up 0
            carrier0[:, i] = 0.0
        elif role == "docker":
            rx[:, i], tx[:, i] = 2e3, 2e3
            speed[:, i] = -125000.0  # speed -1 Mb/s exported as is (GUESS)
        elif role == "ipoib":
            rx[:, i] = tx[:, i] = 3e4
            speed[:, i] = site.ib_rate
        elif role == "bond":
            rx[:, i], tx[:, i] = sim.front["rx"], sim.front["tx"]
            speed[:, i] = 2 * front_speed
        elif role == "slave":
            rx[:, i], tx[:, i] = sim.front["rx"] * 0.5, sim.front["tx"] * 0.5
            speed[:, i] = front_speed
        elif role == "roce":
            # RDMA traffic bypasses the kernel: netdev counters only see TCP (GUESS)
            rx[:, i] = tx[:, i] = 1.5e5
            speed[:, i] = 200e9 / 8
        elif role == "mgmt":
            rx[:, i], tx[:, i] = 5e4, 3e4
            speed[:, i] = 1e9 / 8
        else:  # a lone front-end port carries the storage traffic
            rx[:, i], tx[:, i] = sim.front["rx"], sim.front["tx"]
            speed[:, i] = front_speed
    # veth of the job container: exists while the job runs
    rx[:, -1] = np.where(sim.run, 8e4, 0.0)
    tx[:, -1] = np.where(sim.run, 8e4, 0.0)
    present[:, -1] = sim.run
    speed[:, -1] = 10e9 / 8
    for f in sim.sp["faults"]:
        c, p, on = f["node"], f["port"], t >= f["onset"]
        if f["kind"] == "nic_dropout" and not site.ib_collector:
            i = devs.index(site.roce_devs[p % len(site.roce_devs)])
            present[c, i] &= ~on
        if f["kind"] == "nic_dropout" and site.ib_collector:
            ipoib = [i for i, r in enumerate(roles) if r == "ipoib"]
            if p < len(ipoib):
                present[c, ipoib[p]] &= ~on
        if f["kind"] == "link_flap" and site.roce_devs:
            i = devs.index(site.roce_devs[p % len(site.roce_devs)])
            d = sim.ib_down[c, p]
            up[c, i] = np.where(d, 0.0, 1.0)
            flaps[c, i] += 2 * sim.ib_flaps[c, p]
    ok3 = ok[:, None, :]
    pres = _g(present, bi) & ok3
    # device codes per node: the container's veth has a different name on every node
    dev_codes = np.array([[out.code(d) for d in devs] + [out.code(veth[n])] for n in range(N)])
    st = uptime[:, None] * rng.uniform(0.5, 1.5, (N, D))
    rxs = _g(_counter(rx * rng.uniform(0.9, 1.1, (N, D, 1)), st * 1e5, integer=True), bi)
    txs = _g(_counter(tx * rng.uniform(0.9, 1.1, (N, D, 1)), st * 1e5, integer=True), bi)
    rxp = _g(_counter(rx / 900.0, st * 100, integer=True), bi)
    txp = _g(_counter(tx / 900.0, st * 100, integer=True), bi)
    errs = _g(_counter(np.zeros((N, D, B)), np.where(rng.random((N, D)) < 0.03, 2.0, 0.0)), bi)
    drop_rate = np.where(
        np.array([r in ("bond", "slave", "eth") for r in [*roles, "veth"]]), 0.02, 0.0
    )[None, :, None] * np.ones((N, 1, B))
    drops = _g(_counter(drop_rate, st * 1e-3, integer=True), bi)
    car = _g(carrier0[:, :, None] + np.cumsum(flaps, axis=-1), bi)
    upv = _g(up, bi)
    spv = np.broadcast_to(speed[:, :, None], pres.shape)
    for metric, v in zip(_NE_NET, (rxs, txs, rxp, txp, errs, drops, car, upv, spv), strict=True):
        keep = pres.copy()
        if metric == "node_network_speed_bytes":
            keep &= ~np.isnan(spv)
        out.add(metric, dev_codes, ts, np.asarray(v, float), keep)


def _emit_ib(sim, out, ts, bi, ok, rng) -> None:
    site, N, B, R = sim.site, sim.N, sim.B, sim.R
    ports = [f"mlx5_{r}:1" for r in range(R)]
    ok3 = ok[:, None, :]
    pres = _g(sim.ib_present, bi) & ok3
    st = rng.uniform(1e12, 8e14, (N, R))
    resets = sim.ib_resets

    def ctr(rate: np.ndarray, start: np.ndarray, integer: bool = True) -> np.ndarray:
        tot = _counter(rate, start, integer)
        for c, tt in resets:  # perfquery -R style reset: the total restarts near zero
            i = int(tt // _DT)
            if i < B:
                tot[c, :, i:] -= tot[c, :, i : i + 1] - rate[c, :, i : i + 1] * _DT
        tot = np.maximum(tot, 0.0)
        return _g(np.floor(tot) if integer else tot, bi)

    flaps = sim.ib_flaps
    err = sim.ib_err_rate
    down = sim.ib_down
    vals: dict[str, np.ndarray] = {
        _IB + "port_data_received_bytes_total": ctr(sim.ib_traffic_rx, st),
        _IB + "port_data_transmitted_bytes_total": ctr(sim.ib_traffic_tx, st * 1.01),
        _IB + "port_packets_received_total": ctr(sim.ib_traffic_rx / 4096.0, st / 4096),
        _IB + "port_packets_transmitted_total": ctr(sim.ib_traffic_tx / 4096.0, st / 4096),
        _IB + "port_errors_received_total": ctr(err * 0.5, np.zeros((N, R))),
        _IB + "port_discards_received_total": ctr(np.zeros((N, R, B)), np.zeros((N, R))),
        _IB + "port_transmit_wait_total": ctr(sim.ib_wait_rate, st / 1e3),
        _IB + "link_downed_total": ctr(flaps / _DT, rng.integers(0, 3, (N, R)).astype(float)),
        _IB + "link_error_recovery_total": ctr(
            flaps * 3 / _DT, rng.integers(0, 6, (N, R)).astype(float)
        ),
        _IB + "symbol_error_total": ctr(err, np.where(rng.random((N, R)) < 0.1, 7.0, 0.0)),
        _IB + "local_link_integrity_errors_total": ctr(flaps / _DT, np.zeros((N, R))),
        _IB + "state_id": _g(np.where(down, 1.0, 4.0), bi),
        _IB + "physical_state_id": _g(np.where(down, 2.0, 5.0), bi),
        _IB + "rate_bytes_per_second": _g(sim.ib_rate, bi),
    }
    for m in site.ib_fields:
        out.add(m, ports, ts, vals[m], pres)
