"""Corpus v4: a blind, labelled corpus of per-device training-job metrics (issue 15).

Written without reading the detector, the simulator or the earlier corpora. Every job is a
window of a synchronous multi-node training job as Prometheus would store it: the raw series of
NVIDIA dcgm-exporter (per GPU, ``device`` = GPU index) and node_exporter (host level ``device``
= "", network interfaces, InfiniBand ``device:port``). Sources and every number's provenance are
in ``tests/fixtures/metrics_v4/README.md``; numbers without a source are marked GUESS there and
in the comments below.

Population (chosen to differ from the usual single-site set-up):

* six sites: H100/IB with profiling fields, A100/IB with DCGM profiling disabled (no
  ``DCGM_FI_PROF_*``) and DCGM's blank sentinel on ``DCGM_FI_DEV_MEMORY_TEMP``, H200 on RoCE
  (no infiniband collector: ``node_network_*`` only) with a custom CSV (NVLink error, ECC,
  violation counters, NVLink TX/RX), B200/IB with the custom CSV, GB200 NVL trays with 4 GPUs
  per node, H100 on RoCE without profiling fields;
* each exporter is its own Prometheus target: its own scrape phase, its own lost scrapes;
  dcgm-exporter returns the value of its last DCGM collection (30 s, 10 s at some sites), so a
  15 s scrape repeats values;
* benign hard cases: warm-up, late starters, synchronised checkpoints, job-wide slowdowns, NCCL
  timeouts followed by a restart of the whole job, eval phases, short blips (< 4 min), constant
  per-node/per-GPU offsets, cooling zones, an idle-by-design GPU, DCGM profiling paused by
  Nsight on one node, rank-0 extra load, pipeline stages that differ by design, MoE all-to-all
  imbalance that moves between nodes, elastic jobs (nodes join late / leave early), mixed
  dcgm-exporter versions and scrape intervals inside one job, IB counters reset by ``perfquery``;
* faults (culprit = the node whose hardware or host caused it; onset = first moment it changes
  that node's own metrics): contained/uncorrectable ECC (Xid 48/94) with peers hanging in NCCL,
  GPU fallen off the bus (Xid 79: its series vanish), NVLink CRC/replay errors, PCIe link
  degradation with replays, NIC dropout, AOC flapping, machine unreachable (all series stop),
  thermal slow GPU, HW power brake, host memory leak, a stray process from outside the job,
  and two faults in one job.

In synchronous training a slow or hung node slows or hangs every node, so job-wide metrics
(GPU_UTIL, power, traffic) move on every node; the culprit is named by its LOCAL evidence
(Xid, error counters, clocks, temperatures, vanished series, host memory/load), which is at
least several peer standard deviations away for >= 8 minutes after onset (fair to an SRE).

Assumptions (GUESS = no source gave the number; details in the README):

* GPU_UTIL counts NCCL kernels spinning on a slow/dead peer as busy, so in a hang every healthy
  GPU shows ~100 % while power, tensor activity and traffic collapse (GUESS on magnitudes).
* Traffic (NVLink, PCIe, IB/RoCE) and host CPU follow the job's step rate; compute-side gauges
  (power, clocks, tensor/DRAM activity, temperature) follow local compute, so a bottleneck GPU
  runs flat out while its peers wait (GUESS: linear models in ``_physics``).
* Magnitudes of faults (error rates, clock/power factors, leak rates, slowdowns) are GUESSes
  chosen so the culprit's own series sit many peer-MADs away for >= 8 min; onsets are >= 3 min
  after warm-up and >= 10 min before the window end.
* ``node_cpu_seconds_total`` is emitted per mode (user/system/iowait) summed over CPUs
  (``device`` = mode); ``idle`` is omitted because summed over modes it is constant.
* Elastic leaves/joins and late starters are healthy: the job continues at full speed.

API: ``jobs(seed)``, ``Job.raw`` (long DataFrame: time, node, metric, device, value),
``aggregate(raw, agg_for)``, ``table(jobs)``, ``FAULT_KINDS``, ``BENIGN_KINDS``.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import numpy as np
import polars as pl

GRID = 5.0  # s; physics is computed on this grid and sampled at scrape/collection times
DCGM_BLANK = 9223372036854775794.0  # DCGM "blank" int64 value (dcgm-exporter README sample)

FAULT_KINDS = (
    "xid_ecc_hang",
    "gpu_fell_off_bus",
    "nvlink_errors",
    "pcie_degraded",
    "nic_dropout",
    "aoc_flapping",
    "node_unreachable",
    "thermal_slow_gpu",
    "power_brake",
    "host_mem_leak",
    "stray_process",
    "two_faults",
)
BENIGN_KINDS = (
    "healthy",
    "late_starter",
    "checkpoint_sync",
    "jobwide_slowdown",
    "nccl_timeout_restart",
    "eval_phase",
    "short_blip",
    "constant_offset",
    "cooling_zones",
    "idle_gpu_by_design",
    "profiler_paused",
    "rank0_extra",
    "pipeline_stages",
    "moe_alltoall",
    "elastic_resize",
    "mixed_exporters",
    "ib_counter_reset",
)
# jobs per kind (fault 47 of 106 = 44 %)
_COUNTS = {
    "xid_ecc_hang": 5,
    "gpu_fell_off_bus": 4,
    "nvlink_errors": 5,
    "pcie_degraded": 4,
    "nic_dropout": 4,
    "aoc_flapping": 4,
    "node_unreachable": 4,
    "thermal_slow_gpu": 4,
    "power_brake": 3,
    "host_mem_leak": 3,
    "stray_process": 3,
    "two_faults": 4,
    "healthy": 5,
    "late_starter": 4,
    "checkpoint_sync": 4,
    "jobwide_slowdown": 4,
    "nccl_timeout_restart": 3,
    "eval_phase": 3,
    "short_blip": 5,
    "constant_offset": 4,
    "cooling_zones": 3,
    "idle_gpu_by_design": 3,
    "profiler_paused": 3,
    "rank0_extra": 3,
    "pipeline_stages": 4,
    "moe_alltoall": 3,
    "elastic_resize": 3,
    "mixed_exporters": 3,
    "ib_counter_reset": 2,
}

# ---------------------------------------------------------------------------------------------
# Hardware and sites


@dataclass(frozen=True)
class Gpu:
    name: str
    tdp: float  # W, vendor datasheets
    idle_w: float  # W, GUESS
    sm_max: float  # MHz boost (A100 1410, H100 1980 datasheets; others GUESS)
    sm_idle: float  # MHz, GUESS
    mem_clock: float  # MHz, GUESS except A100 1593 / H100 2619 (nvidia-smi -q listings)
    fb_mib: float  # usable framebuffer MiB, GUESS from marketed capacity
    nvlink_gbs: float  # GB/s per GPU at training load (fraction of peak), GUESS
    tensor: float  # typical PIPE_TENSOR_ACTIVE in LLM training, GUESS
    hbm_temp_add: float  # memory temp above GPU temp, GUESS


GPUS = {
    "A100": Gpu("A100-SXM4-80GB", 400, 60, 1410, 210, 1593, 81920, 120, 0.38, 6),
    "H100": Gpu("H100-SXM5-80GB", 700, 72, 1980, 345, 2619, 81559, 200, 0.42, 8),
    "H200": Gpu("H200-SXM-141GB", 700, 75, 1980, 345, 3201, 143771, 210, 0.44, 8),
    "B200": Gpu("B200-180GB", 1000, 140, 1965, 420, 3996, 183359, 330, 0.46, 9),
    "GB200": Gpu("GB200-186GB", 1200, 160, 2062, 420, 3996, 189471, 360, 0.47, 9),
}

DEFAULT_GPU_METRICS = (  # dcgm-exporter etc/default-counters.csv (uncommented lines, VGPU skipped)
    ("DCGM_FI_DEV_SM_CLOCK", "gauge"),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge"),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge"),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge"),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge"),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter"),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter"),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge"),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge"),
    ("DCGM_FI_DEV_ENC_UTIL", "gauge"),
    ("DCGM_FI_DEV_DEC_UTIL", "gauge"),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge"),
    ("DCGM_FI_DEV_FB_FREE", "gauge"),
    ("DCGM_FI_DEV_FB_USED", "gauge"),
    ("DCGM_FI_DEV_FB_RESERVED", "gauge"),
    ("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter"),
    ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter"),
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter"),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge"),
)
PROF_METRICS = (  # DCP fields of the default CSV; PCIE_*_BYTES are gauges (bytes/s) there
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge"),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge"),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "gauge"),
    ("DCGM_FI_PROF_PCIE_TX_BYTES", "gauge"),
    ("DCGM_FI_PROF_PCIE_RX_BYTES", "gauge"),
)
CUSTOM_PROF = (("DCGM_FI_PROF_NVLINK_TX_BYTES", "gauge"), ("DCGM_FI_PROF_NVLINK_RX_BYTES", "gauge"))
CUSTOM_ERR = (  # fields commented out in the default CSV, enabled by the custom-CSV sites
    ("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "counter"),
    ("DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", "counter"),
    ("DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", "counter"),
    ("DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", "counter"),
    ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter"),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter"),
    ("DCGM_FI_DEV_POWER_VIOLATION", "counter"),
    ("DCGM_FI_DEV_THERMAL_VIOLATION", "counter"),
)
OLD_EXPORTER_DROPS = {"DCGM_FI_DEV_FB_RESERVED"}  # older dcgm-exporter CSVs lack FB_RESERVED
IB_METRICS = (  # node_exporter collector/infiniband_linux.go
    ("node_infiniband_port_data_received_bytes_total", "counter"),
    ("node_infiniband_port_data_transmitted_bytes_total", "counter"),
    ("node_infiniband_port_errors_received_total", "counter"),
    ("node_infiniband_link_downed_total", "counter"),
    ("node_infiniband_link_error_recovery_total", "counter"),
    ("node_infiniband_port_transmit_wait_total", "counter"),
    ("node_infiniband_state_id", "gauge"),
    ("node_infiniband_physical_state_id", "gauge"),
    ("node_infiniband_rate_bytes_per_second", "gauge"),
)
NET_METRICS = (  # node_exporter netdev + netclass collectors
    ("node_network_receive_bytes_total", "counter"),
    ("node_network_transmit_bytes_total", "counter"),
    ("node_network_receive_errs_total", "counter"),
    ("node_network_carrier_changes_total", "counter"),
    ("node_network_up", "gauge"),
)
HOST_METRICS = (
    ("node_cpu_seconds_total", "counter"),  # device = mode, summed over CPUs (documented)
    ("node_load1", "gauge"),
    ("node_memory_MemAvailable_bytes", "gauge"),
    ("node_memory_MemTotal_bytes", "gauge"),
)
CPU_MODES = ("user", "system", "iowait")  # "idle" left out: summed over modes it is constant
COUNTERS = {
    m
    for m, t in (
        DEFAULT_GPU_METRICS + PROF_METRICS + CUSTOM_PROF + CUSTOM_ERR + IB_METRICS + NET_METRICS
    )
    + HOST_METRICS
    if t == "counter"
}


@dataclass(frozen=True)
class Site:
    name: str
    gpu: str
    gpus: int  # per node
    prof: bool  # DCGM_FI_PROF_* collected
    custom: bool  # custom CSV: NVLink TX/RX + error/ECC/violation counters
    fabric: str  # "ib" (infiniband collector) or "roce" (node_network_* only)
    nics: int  # compute NICs per node
    dcgm_iv: float  # DCGM collection interval (s)
    scrape: tuple[float, ...]  # scrape intervals in use
    mem_temp_blank: bool
    cpus: int
    mem_gib: float
    nic_gbs: float  # per-NIC line rate, GB/s


SITES = {
    "h100-ib": Site("h100-ib", "H100", 8, True, False, "ib", 8, 30, (15, 30), False, 224, 2048, 50),
    "a100-ib-noprof": Site(
        "a100-ib-noprof", "A100", 8, False, False, "ib", 4, 30, (30, 60), True, 256, 1024, 25
    ),
    "h200-roce-custom": Site(
        "h200-roce-custom", "H200", 8, True, True, "roce", 8, 10, (15,), False, 192, 2048, 50
    ),
    "b200-ib-custom": Site(
        "b200-ib-custom", "B200", 8, True, True, "ib", 8, 30, (30,), False, 224, 4096, 50
    ),
    "gb200-nvl": Site(
        "gb200-nvl", "GB200", 4, True, True, "ib", 4, 30, (30, 60), False, 144, 960, 50
    ),
    "h100-roce-noprof": Site(
        "h100-roce-noprof", "H100", 8, False, False, "roce", 8, 30, (60,), False, 192, 2048, 50
    ),
}


# ---------------------------------------------------------------------------------------------
# Job specification


@dataclass
class Job:
    name: str
    kind: str
    nodes: list[str]
    start: datetime
    end: datetime
    culprits: dict[str, datetime]
    notes: str
    dcgm_interval: float
    node_interval: float
    site: str
    seed: int
    params: dict = field(default_factory=dict, repr=False)

    @property
    def raw(self) -> pl.DataFrame:
        """Raw long table (time, node, metric, device, value), rendered on demand (not cached)."""
        return _render(self)


def _stable(*parts: object) -> int:
    return zlib.crc32(":".join(map(str, parts)).encode())


_SIZE_CHOICES = (4, 8, 8, 16, 16, 16, 32, 32, 32, 48, 64, 64, 96, 128, 128)


def jobs(seed: int = 0) -> list[Job]:
    """The corpus: ~106 labelled jobs, deterministic for ``seed`` (data rendered lazily)."""
    rng = np.random.default_rng(seed)
    kinds = [k for k, c in _COUNTS.items() for _ in range(c)]
    rng.shuffle(kinds)
    big = {
        int(i): s
        for i, s in zip(
            rng.choice(len(kinds), 4, replace=False), (256, 512, 1024, 256), strict=True
        )
    }
    out = []
    t0 = datetime(2026, 3, 2, 0, 0, tzinfo=UTC)
    for i, kind in enumerate(kinds):
        out.append(_plan(i, kind, seed, rng, big.get(i), t0 + timedelta(hours=3 * i)))
    return out


def _pick_site(kind: str, rng: np.random.Generator) -> str:
    names = list(SITES)
    if kind == "profiler_paused":
        names = [s for s in names if SITES[s].prof]
    if kind in ("ib_counter_reset", "aoc_flapping", "nic_dropout"):
        weights = [3 if SITES[s].fabric == "ib" else 1 for s in names]
        if kind == "ib_counter_reset":
            names = [s for s in names if SITES[s].fabric == "ib"]
            weights = [1] * len(names)
        return str(rng.choice(names, p=np.array(weights) / sum(weights)))
    if kind == "nvlink_errors":  # mostly sites that export NVLink error counters
        weights = [3 if SITES[s].custom else 1 for s in names]
        return str(rng.choice(names, p=np.array(weights) / sum(weights)))
    return str(rng.choice(names))


def _benign_note(b: dict, nodes: list[str]) -> str:
    """Human-readable description of the benign event (what an SRE would be told)."""
    k, v, t, x = b["kind"], b["var"], b["t"], b["x"]
    who = [nodes[j] for j in b["nodes"]]
    w = who[0]
    text = {
        "healthy": "no event beyond warm-up, checkpoints and noise",
        "late_starter": f"{who} start {3 + 4 * x:.1f} min late (image pull), job waits",
        "checkpoint_sync": f"checkpoints every {8 + 7 * x:.1f} min ({2 + 3 * x:.1f} min)",
        "jobwide_slowdown": f"job-wide slowdown from +{t:.1f} min for {8 + 17 * x:.1f} min",
        "nccl_timeout_restart": f"NCCL hang from +{t:.1f} min ({5 + 7 * x:.1f} min), restart",
        "eval_phase": f"eval phases every {15 + 10 * x:.1f} min",
        "short_blip": [
            "dcgm-exporter restart gap",
            "GPU temperature spike",
            "IB/RoCE link retrain",
        ][v]
        + f" on {w} at +{t:.1f} min for {1 + 2.5 * x:.1f} min",
        "constant_offset": [
            f"{w}: all GPUs {8 + 4 * x:.0f} C warmer all along",
            f"{w} gpu{b['gpu']}: -8 % power, -3 % clock all along",
            f"{w} gpu{b['gpu']}: historic PCIe replays (constant), half the host memory",
        ][v],
        "cooling_zones": "racks of 16 nodes at +0/+4/+9/+2 C inlet",
        "idle_gpu_by_design": f"gpu{b['gpu']} idle by design on " + ("every node" if v == 1 else w),
        "profiler_paused": f"DCGM profiling fields absent on {w} from +{t:.1f} min for "
        f"{5 + 10 * x:.1f} min (Nsight run)",
        "rank0_extra": f"rank-0 node {nodes[0]}: extra CPU, memory, egress, gpu0 memory",
        "pipeline_stages": f"{8 if v == 1 else 4} pipeline stages on contiguous node ranges",
        "moe_alltoall": "MoE all-to-all imbalance, hot nodes move every 1-3 min",
        "elastic_resize": f"{who} " + ("join" if v == 1 else "leave") + f" at +{t:.1f} min",
        "mixed_exporters": "half the nodes run an older dcgm-exporter (no FB_RESERVED), 30/60 s",
        "ib_counter_reset": f"IB counters reset (perfquery) on {who} at +{t:.1f} min",
    }[k]
    return f"{k}: {text}"


def _plan(i: int, kind: str, seed: int, rng, big, start: datetime) -> Job:
    site = SITES[_pick_site(kind, rng)]
    n = int(big or rng.choice(_SIZE_CHOICES))
    if kind in ("pipeline_stages",):
        n = int(rng.choice((16, 32, 64)))
    if kind in ("cooling_zones", "elastic_resize", "mixed_exporters", "two_faults"):
        n = max(n, 16)
    if n >= 256:
        minutes = int(rng.integers(30, 46))
        node_iv = dcgm_scrape = 60.0
    else:
        minutes = int(rng.integers(30, 121))
        node_iv = float(rng.choice(site.scrape))
        if n >= 64:  # large jobs: the coarser of the site's intervals (keeps rows bounded)
            node_iv = float(max(site.scrape))
        dcgm_scrape = node_iv
    minutes = max(minutes, 36)
    prefix = {"gb200-nvl": "nvl", "a100-ib-noprof": "a", "h200-roce-custom": "r"}.get(
        site.name, "g"
    )
    rack0 = int(rng.integers(0, 40))
    nodes = [f"{prefix}{rack0 + j // 16:02d}n{j % 16:02d}" for j in range(n)]
    end = start + timedelta(minutes=minutes)
    p: dict = {"minutes": minutes, "dcgm_scrape": dcgm_scrape, "node_iv": node_iv}
    warm = float(rng.uniform(2, 5))
    p["warm"] = warm
    p["ckpt_every"] = float(rng.uniform(12, 30)) if rng.random() < 0.6 else 0.0
    p["ckpt_len"] = float(rng.uniform(1.0, 2.5))
    p["restart_gap"] = rng.random() < 0.25  # one short dcgm-exporter restart somewhere
    p["loss"] = float(rng.uniform(0.002, 0.01))
    culprits: dict[str, datetime] = {}
    notes = ""
    lo, hi = warm + 3, minutes - 10  # onset range: after warm-up, >= 10 min before the end

    def onset() -> float:
        return float(rng.uniform(lo, max(lo + 0.5, hi)))

    def node_pick(k: int = 1) -> list[int]:
        return [int(x) for x in rng.choice(n, k, replace=False)]

    if kind in FAULT_KINDS:
        subs = [kind]
        if kind == "two_faults":
            pool = [
                "thermal_slow_gpu",
                "nvlink_errors",
                "pcie_degraded",
                "aoc_flapping",
                "host_mem_leak",
                "stray_process",
                "power_brake",
                "node_unreachable",
            ]
            a, b = rng.choice(len(pool) - 1, 2, replace=False)
            subs = [pool[a], pool[b]]
            if rng.random() < 0.5:
                subs[1] = "node_unreachable"  # the second fault ends the job
        who = node_pick(len(subs))
        faults = []
        times = sorted(onset() for _ in subs)
        if len(subs) == 2 and times[1] - times[0] < 6:
            times[1] = min(times[0] + 6, hi)
            times[0] = max(lo, times[1] - 6)
        for sub, w, t in zip(subs, who, times, strict=True):
            f = {
                "kind": sub,
                "node": w,
                "t": t,
                "gpu": int(rng.integers(0, site.gpus)),
                "nic": int(rng.integers(0, site.nics)),
                "var": int(rng.integers(0, 2)),
                "x": float(rng.uniform(0, 1)),
            }
            faults.append(f)
            culprits[nodes[w]] = start + timedelta(minutes=t)
        p["faults"] = faults
        notes = "; ".join(
            f"{f['kind']} on {nodes[f['node']]} gpu{f['gpu']} nic{f['nic']} "
            f"variant {f['var']} at +{f['t']:.1f} min"
            for f in faults
        )
    else:
        b: dict = {"kind": kind, "x": float(rng.uniform(0, 1)), "var": int(rng.integers(0, 3))}
        b["nodes"] = node_pick(min(n, int(rng.integers(1, 4))))
        b["t"] = onset()
        b["gpu"] = int(rng.integers(0, site.gpus))
        b["nic"] = int(rng.integers(0, site.nics))
        p["benign"] = b
        notes = _benign_note(b, nodes)
        if kind == "mixed_exporters":
            p["node_iv"] = 15.0 if site.dcgm_iv == 10 else node_iv
    return Job(
        name=f"v4-{i:03d}-{kind}",
        kind=kind,
        nodes=nodes,
        start=start,
        end=end,
        culprits=culprits,
        notes=notes,
        dcgm_interval=site.dcgm_iv,
        node_interval=p["node_iv"],
        site=site.name,
        seed=_stable(seed, i, kind),
        params=p,
    )


# ---------------------------------------------------------------------------------------------
# Rendering: physics on a 5 s grid, then sampled per exporter target


class _State:
    """Per-job arrays on the grid. Shapes: job (G), node (N,G), gpu (N,D,G), nic (N,P,G)."""

    def __init__(self, job: Job, site: Site, rng: np.random.Generator):
        p = job.params
        self.G = G = int(p["minutes"] * 60 / GRID) + 1
        self.N = N = len(job.nodes)
        self.D = D = site.gpus
        self.P = P = site.nics
        self.t = np.arange(G) * GRID / 60.0  # minutes since window start
        f32 = np.float32
        # job-level timeline
        self.work = np.ones(G, f32)  # compute intensity of the phase (1 train, <1 eval, 0 pause)
        self.ubusy = np.full(G, 0.985, f32)  # GPU_UTIL fraction of the phase
        self.speed = np.ones(G, f32)  # job-wide throughput factor (slowest member sets it)
        self.hang = np.zeros(G, bool)  # NCCL hang: kernels spin, no progress
        self.dead = np.zeros(G, bool)  # processes gone (restart)
        self.ckpt = np.zeros(G, f32)  # checkpoint write in progress
        self.fbj = np.ones(G, f32)  # fraction of the model's memory footprint allocated
        self.warm_at(0.0, p["warm"])
        if p["ckpt_every"]:
            self.checkpoints(p["ckpt_every"], p["ckpt_len"], p["warm"])
        # node / gpu / nic arrays
        self.present = np.ones((N, G), bool)  # node is a member of the job
        self.node_alive = np.ones((N, G), bool)  # node answers scrapes at all
        self.dcgm_alive = np.ones((N, G), bool)
        self.prof_alive = np.ones((N, G), bool)
        self.dev_alive = np.ones((N, D, G), bool)
        self.U = np.zeros((N, D, G), f32)  # filled by finish()
        self.u_mul = np.ones((N, D, G), f32)
        self.c_mul = np.ones((N, D, G), f32)
        self.c_override = np.full((N, D, G), np.nan, f32)  # bottleneck GPU runs flat out
        self.clk = np.ones((N, D, G), f32)
        self.pw_mul = np.ones((N, D, G), f32)
        self.temp_add = np.zeros((N, D, G), f32)
        self.xid = np.zeros((N, D, G), f32)
        self.fb_add = np.zeros((N, D, G), f32)  # MiB
        self.fb_frac = np.full((N, D, 1), rng.uniform(0.70, 0.9), f32) + rng.normal(
            0, 0.004, (N, D, 1)
        ).astype(f32)
        self.replay_rate = np.zeros((N, D, G), f32)
        self.pcie = np.ones((N, D, G), f32)
        self.nvl = np.ones((N, D, G), f32)
        self.nvl_err = np.zeros((N, D, G), f32)  # CRC flit errors / s
        self.nvl_replay = np.zeros((N, D, G), f32)
        self.nvl_recov = np.zeros((N, D, G), f32)  # events per grid step
        self.ecc_dbe = np.zeros((N, D, G), f32)  # increments per step
        self.rows_unc = np.zeros((N, D, G), f32)
        self.pviol = np.zeros((N, D, G), f32)  # fraction of time power-capped (ns/s / 1e9)
        self.tviol = np.zeros((N, D, G), f32)
        self.ib = np.ones((N, P, G), f32)
        self.port_alive = np.ones((N, P, G), bool)
        self.ib_state = np.full((N, P, G), 4, f32)  # 4 ACTIVE
        self.ib_phys = np.full((N, P, G), 5, f32)  # 5 LinkUp
        self.ib_err = np.zeros((N, P, G), f32)  # increments per step
        self.ib_recov = np.zeros((N, P, G), f32)
        self.ib_down = np.zeros((N, P, G), f32)
        self.carrier = np.zeros((N, P, G), f32)
        self.ib_reset = np.full(N, -1)  # grid index of a perfquery counter reset
        self.mem_add = np.zeros((N, G), f32)  # bytes
        self.load_add = np.zeros((N, G), f32)
        self.user_add = np.zeros((N, G), f32)  # cores
        self.sys_add = np.zeros((N, G), f32)
        self.eth_add = np.zeros((N, G), f32)  # bytes/s on the storage/management NIC
        self.inlet = (rng.uniform(22, 27) + rng.normal(0, 0.7, (N, 1))).astype(f32)
        self.mem_total = np.full(N, site.mem_gib * 2**30)

    def g(self, minutes: float) -> int:
        return int(np.clip(round(minutes * 60 / GRID), 0, self.G - 1))

    def span(self, a: float, b: float) -> slice:
        return slice(self.g(a), self.g(b))

    def warm_at(self, a: float, length: float) -> None:
        """Warm-up: load checkpoint/data (util low), compile, first steps (ramp)."""
        s = self.span(a, a + length)
        x = np.linspace(0, 1, s.stop - s.start, dtype=np.float32)
        self.work[s] = np.where(x < 0.5, 0.0, (x - 0.5) * 2) ** 2
        self.ubusy[s] = np.where(x < 0.5, 0.03, 0.3 + 0.68 * x)
        self.fbj[s] = np.minimum(1.0, 0.05 + 1.6 * x)

    def checkpoints(self, every: float, length: float, warm: float) -> None:
        t = warm + every
        while t + length < self.t[-1]:
            s = self.span(t, t + length)
            self.work[s] = 0.0
            self.ubusy[s] = 0.04
            self.ckpt[s] = 1.0
            t += every


def _lag(x: np.ndarray, tau_s: float) -> np.ndarray:
    """First-order thermal lag along the last axis (time constant tau_s)."""
    from scipy.signal import lfilter

    a = GRID / (tau_s + GRID)
    x0 = x[..., :1]
    return lfilter([a], [1, a - 1], x - x0, axis=-1).astype(np.float32) + x0


def _apply_fault(s: _State, f: dict, site: Site, rng: np.random.Generator) -> None:
    k, w, j, q, v, x = f["kind"], f["node"], f["gpu"], f["nic"], f["var"], f["x"]
    g0 = s.g(f["t"])
    G = s.G
    after = slice(g0, G)
    if k == "xid_ecc_hang":
        # Xid 48 (DBE) / 94 (contained ECC): the rank on that GPU dies, peers spin in NCCL
        s.xid[w, j, after] = 48 if v == 0 else 94
        s.u_mul[w, j, g0 + 2 :] = 0.0
        s.fb_add[w, j, g0 + 2 :] = -1e9  # process memory released
        s.ecc_dbe[w, j, g0] = 1
        s.rows_unc[w, j, g0 + 6] = 1  # row remapped at the next opportunity
        s.hang[g0 + 1 :] = True
    elif k == "gpu_fell_off_bus":
        if v == 0:  # Xid 79: the device is gone from NVML; its series vanish
            s.dev_alive[w, j, after] = False
        else:  # NVML hangs: the node's dcgm-exporter stops answering; NVML calls stuck in D state
            s.dcgm_alive[w, after] = False
            s.load_add[w, after] += np.linspace(2, 40, G - g0)
        s.hang[g0 + 1 :] = True
    elif k == "nvlink_errors":
        gpus = [j] if v == 0 else [j, (j + 1) % s.D]
        for jj in gpus:
            s.nvl_err[w, jj, after] = rng.uniform(40, 400)  # GUESS
            s.nvl_replay[w, jj, after] = rng.uniform(5, 40)
            s.nvl_recov[w, jj, after] = (rng.random(G - g0) < GRID / 90).astype(np.float32)
            if v == 1 or not site.custom:
                s.xid[w, jj, after] = 74  # Xid 74: NVLink error
        s.nvl[w, :, after] *= 0.5 + 0.25 * x
        s.speed[after] *= 0.78 + 0.12 * x
    elif k == "pcie_degraded":
        s.replay_rate[w, j, after] = 2 + 28 * x  # replays / s, GUESS
        s.pcie[w, j, after] = 0.25 if v == 0 else 0.5  # x16 -> x4 or Gen5 -> Gen4-ish
        s.ib[w, j * s.P // s.D, after] *= 0.45 + 0.2 * x  # GPUDirect RDMA via that PCIe switch
        s.speed[after] *= 0.72 + 0.15 * x
    elif k == "nic_dropout":
        if site.fabric == "ib":
            s.port_alive[w, q, after] = False  # device vanishes from /sys/class/infiniband
        else:
            s.ib[w, q, after] = 0.0
            s.ib_state[w, q, after] = 0  # node_network_up 0
            s.carrier[w, q, g0] = 1
        if v == 0:  # NCCL keeps going over the remaining rails: this node is the bottleneck
            s.ib[w, :, after] *= s.P / (s.P - 1)
            s.speed[after] *= 0.6 + 0.2 * x
        else:  # NCCL waits for the missing rail until its timeout
            s.hang[g0 + 1 :] = True
    elif k == "aoc_flapping":
        t = g0
        while t < G:
            dur = int(rng.integers(2, 7))  # 10-30 s of link trouble
            e = min(G, t + dur)
            s.ib[w, q, t:e] *= 0.05
            s.ib_err[w, q, t] += rng.integers(50, 600)
            s.ib_recov[w, q, t] += 1
            s.ib_phys[w, q, t] = 6 if rng.random() < 0.5 else 2  # LinkErrorRecovery / Polling
            s.ib_state[w, q, t] = 2  # INIT (on RoCE: node_network_up 0)
            if rng.random() < 0.35:
                s.ib_down[w, q, t] += 1
                s.carrier[w, q, t] += 2
            s.speed[t:e] *= 0.55
            t = e + int(rng.integers(8, 30))  # next flap in 40-150 s, GUESS
        s.ib[w, q, after] *= 0.8  # retransmissions between flaps
    elif k == "node_unreachable":
        if v == 1:  # soft lockup: load climbs for a minute before the node disappears
            a = max(0, g0 - 12)
            s.load_add[w, a:g0] += np.linspace(0, 60, g0 - a)
        s.node_alive[w, after] = False
        s.hang[g0 + 1 :] = True
    elif k == "thermal_slow_gpu":
        ramp = np.clip((np.arange(G - g0) * GRID) / 180.0, 0, 1).astype(np.float32)
        s.temp_add[w, j, after] += (20 + 8 * x) * ramp
        slow = 0.62 + 0.15 * x
        clk = 1 - (1 - slow) * np.clip((ramp - 0.3) / 0.7, 0, 1)
        s.clk[w, j, after] *= clk
        s.tviol[w, j, after] = np.clip((ramp - 0.3) / 0.7, 0, 1) * 0.9
        s.speed[after] *= clk
        s.c_override[w, j, after] = 1.0  # the slow GPU is never waiting
    elif k == "power_brake":
        # HW power brake (external PSU/BMC signal): all GPUs of the node clock down at once
        s.clk[w, :, after] *= 0.3 + 0.15 * x
        s.pw_mul[w, :, after] *= 0.55
        s.pviol[w, :, after] = 1.0
        s.speed[after] *= 0.4 + 0.15 * x
        s.c_override[w, :, after] = 1.0
    elif k == "host_mem_leak":
        rate = (6 + 14 * x) * 2**30 / 60  # bytes / s, GUESS
        base = s.mem_total[w] * 0.72
        leak = np.minimum(rate * np.arange(G - g0) * GRID, base - 0.015 * s.mem_total[w])
        s.mem_add[w, after] -= leak
        starving = leak > base - 0.08 * s.mem_total[w]
        idx = np.arange(g0, G)[starving]
        s.load_add[w, idx] += 25 + 15 * x
        s.sys_add[w, idx] += 12
        s.u_mul[w, :, idx] *= 0.6 + 0.15 * x  # dataloader stalls: this node's GPUs wait for data
        s.speed[idx] *= 0.7
        s.load_add[w, after] += np.linspace(0, 4, G - g0)  # reclaim work grows
    elif k == "stray_process":
        s.load_add[w, after] += 40 + 50 * x
        s.user_add[w, after] += 40 + 40 * x
        s.fb_add[w, j, after] += (8 + 12 * x) * 1024  # its CUDA context + buffers
        s.pw_mul[w, j, after] *= 1.06
        s.u_mul[w, j, after] = 1.0
        s.c_override[w, j, after] = 1.0
        s.speed[after] *= 0.6 + 0.2 * x
    else:  # pragma: no cover - planner only emits known kinds
        raise ValueError(k)


def _apply_benign(s: _State, b: dict, site: Site, job: Job, rng: np.random.Generator) -> None:
    k, nodes, v, x, t0 = b["kind"], b["nodes"], b["var"], b["x"], b["t"]
    G, N = s.G, s.N
    w = nodes[0]
    warm = job.params["warm"]
    if k == "late_starter":
        late = 3 + 4 * x
        s.work[: s.g(late)] = 0
        s.ubusy[: s.g(late)] = 0.0
        s.fbj[: s.g(late)] = 0.06  # CUDA contexts + rendezvous, model not loaded yet
        s.warm_at(late, warm)
        for n in nodes:
            s.present[n, : s.g(late * (0.8 + 0.2 * rng.random()))] = False
            s.eth_add[n, : s.g(late)] += 1.5e9  # container image pull
            s.user_add[n, : s.g(late)] += 6
    elif k == "checkpoint_sync":
        s.checkpoints(8 + 7 * x, 2 + 3 * x, warm)
    elif k == "jobwide_slowdown":
        s.speed[s.span(t0, t0 + 8 + 17 * x)] *= 0.45 + 0.35 * rng.random()
    elif k == "nccl_timeout_restart":
        h = 5 + 7 * x
        s.hang[s.span(t0, t0 + h)] = True
        d = 1 + 2 * rng.random()
        sl = s.span(t0 + h, t0 + h + d)
        s.dead[sl] = True
        s.warm_at(t0 + h + d, 2 + 2 * rng.random())
    elif k == "eval_phase":
        every, length = 15 + 10 * x, 3 + 3 * rng.random()
        t = warm + every
        while t + length < s.t[-1]:
            sl = s.span(t, t + length)
            s.work[sl] = 0.35
            s.ubusy[sl] = 0.6
            t += every
    elif k == "short_blip":
        d = 1 + 2.5 * x
        sl = s.span(t0, t0 + d)
        if v == 0:
            s.dcgm_alive[w, sl] = False  # dcgm-exporter restarted
        elif v == 1:
            s.temp_add[w, :, sl] += 12
            s.clk[w, :, sl] *= 0.93
        else:
            s.ib[w, b["nic"], sl] *= 0.3
            s.ib_recov[w, b["nic"], sl.start] += 1
            s.carrier[w, b["nic"], sl.start] += 2
            s.speed[sl] *= 0.85
    elif k == "constant_offset":
        if v == 0:
            s.temp_add[w] += 8 + 4 * x
        elif v == 1:
            s.pw_mul[w, b["gpu"]] *= 0.92
            s.clk[w, b["gpu"]] *= 0.97
            s.temp_add[w, b["gpu"]] -= 3
        else:
            s.replay_base = (w, b["gpu"], 1000 + 40000 * x)
            s.mem_total[w] /= 2
    elif k == "cooling_zones":
        rack = np.arange(N) // 16
        offs = np.array([0.0, 4.0, 9.0, 2.0] * 64)[rack]
        s.inlet += offs[:, None].astype(np.float32)
        s.clk[offs >= 9] *= 0.985
    elif k == "idle_gpu_by_design":
        targets = [w] if v != 1 else range(N)
        for n in targets:
            s.u_mul[n, b["gpu"]] = 0.0
            s.fb_add[n, b["gpu"]] = -1e9
    elif k == "profiler_paused":
        s.prof_alive[w, s.span(t0, t0 + 5 + 10 * x)] = False
    elif k == "rank0_extra":
        s.load_add[0] += 6
        s.user_add[0] += 8
        s.mem_add[0] -= 60 * 2**30
        s.eth_add[0] += 2e8
        s.fb_add[0, 0] += 4096
        s.pw_mul[0, 0] *= 1.03
    elif k == "pipeline_stages":
        stages = 4 if v != 1 else 8
        st = np.arange(N) * stages // N
        frac = np.linspace(0.93, 0.66, stages)[st]
        s.fb_frac[:] = (frac[:, None, None] + rng.normal(0, 0.004, (N, s.D, 1))).astype(np.float32)
        cm = np.linspace(0.85, 1.0, stages)[st]
        cm[st == stages - 1] = 1.0
        s.c_mul *= cm[:, None, None].astype(np.float32)
        s.pw_mul[st == stages - 1] *= 1.08  # vocab projection + loss on the last stage
        ibm = np.where((st == 0) | (st == stages - 1), 0.7, 1.0)
        s.ib *= ibm[:, None, None].astype(np.float32)
    elif k == "moe_alltoall":
        seg = int(rng.integers(12, 36))  # 1-3 min segments
        for a in range(0, G, seg):
            f = np.exp(rng.normal(0, 0.3, N)).astype(np.float32)
            s.ib[:, :, a : a + seg] *= f[:, None, None]
            s.c_mul[:, :, a : a + seg] *= np.clip(0.9 + 0.1 * f, 0.8, 1.0)[:, None, None]
    elif k == "elastic_resize":
        sl = s.span(t0, t0 + 1 + rng.random())
        s.work[sl] = 0
        s.ubusy[sl] = 0.02
        for n in nodes:
            if v == 1:
                s.present[n, : s.g(t0)] = False  # joins at t0
            else:
                s.present[n, s.g(t0) :] = False  # leaves at t0
    elif k == "mixed_exporters":
        pass  # handled in render (metric sets, intervals)
    elif k == "ib_counter_reset":
        for n in nodes:
            s.ib_reset[n] = s.g(t0)
    elif k == "healthy":
        pass
    else:  # pragma: no cover
        raise ValueError(k)


def _node_split(job: Job, rng: np.random.Generator) -> np.ndarray:
    """Mask of nodes running the older dcgm-exporter (mixed_exporters jobs only)."""
    old = np.zeros(len(job.nodes), bool)
    if job.kind == "mixed_exporters":
        old[rng.choice(len(job.nodes), len(job.nodes) // 2, replace=False)] = True
    return old


def _physics(s: _State, site: Site, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Per-GPU gauges/rates on the grid from the phase, the job speed and local modifiers."""
    gpu = GPUS[site.gpu]
    N, D, G = s.N, s.D, s.G
    f32 = np.float32
    pres = s.present[:, None, :]
    live = (~s.dead)[None, None, :] & pres
    # job-level util with per-node dataloader jitter (single 5 s dips)
    jit = np.where(rng.random((N, 1, G)) < 0.02, rng.uniform(0.6, 0.9, (N, 1, G)), 1.0)
    U = s.ubusy[None, None, :] * jit * s.u_mul * live
    C = (s.work * s.speed)[None, None, :] * s.c_mul * live
    hang = s.hang[None, None, :] & live
    U = np.where(hang, 1.0, U)  # spinning NCCL kernels count as busy
    C = np.where(hang, 0.0, C)
    ov = ~np.isnan(s.c_override) & (s.work[None, None, :] > 0.9) & ~hang & live
    C = np.where(ov, s.c_override * s.work[None, None, :], C)
    C = np.where(s.u_mul == 0, 0.0, C)
    U = np.clip(U + rng.normal(0, 0.006, U.shape) * (U > 0.5), 0, 1).astype(f32)
    C = np.clip(C + rng.normal(0, 0.01, C.shape) * (C > 0.1), 0, 1).astype(f32)
    eff = (1 + rng.normal(0, 0.02, (N, D, 1))).astype(f32)  # silicon lottery
    top = gpu.tdp * 0.86
    power = gpu.idle_w + (top - gpu.idle_w) * (0.22 * U + 0.78 * C) * eff
    power = power * s.pw_mul * np.minimum(1.0, 0.35 + 0.65 * s.clk**1.5)
    power = (power + rng.normal(0, gpu.tdp * 0.012, power.shape)).astype(f32)
    busy = U > 0.05
    clk = np.where(busy, gpu.sm_max * (1 - 0.05 * C) * s.clk, gpu.sm_idle)
    clk = np.round(clk + rng.normal(0, 8, clk.shape) * busy, 0).astype(f32)
    temp_target = s.inlet[:, :, None] + 6 + 48 * power / gpu.tdp + s.temp_add
    temp = _lag(temp_target + (rng.normal(0, 1.2, (N, D, 1))).astype(f32), 60.0)
    temp = np.round(temp + rng.normal(0, 0.4, temp.shape), 0).astype(f32)
    fb_model = gpu.fb_mib * s.fb_frac * s.fbj[None, None, :]
    fb_used = np.where(pres & ~s.dead[None, None, :], fb_model + 520, 0.0) + s.fb_add
    fb_used = np.clip(fb_used + rng.normal(0, 40, (N, D, G)) * (fb_used > 1000), 0, None)
    fb_used = np.round(np.where(fb_used < 1, 0.0, fb_used), 0).astype(f32)
    ckpt = s.ckpt[None, None, :] * pres
    # traffic follows the job's step rate (every rank exchanges the same bytes per step),
    # not the local compute intensity: a bottleneck GPU computes longer, it does not send more
    step = ((s.work * s.speed) * ~s.hang)[None, None, :] * live * (s.u_mul > 0)
    pcie_rx = (1.2e9 * step + 0.4e9 * ckpt) * s.pcie * (1 + rng.normal(0, 0.06, (N, D, G)))
    pcie_tx = (0.35e9 * step + 9e9 * ckpt) * s.pcie * (1 + rng.normal(0, 0.06, (N, D, G)))
    nvl = gpu.nvlink_gbs * 1e9 * step * s.nvl * (1 + rng.normal(0, 0.04, (N, D, G)))
    return {
        "U": U,
        "C": C,
        "power": np.clip(power, gpu.idle_w * 0.8, None),
        "clk": clk,
        "temp": temp,
        "fb_used": fb_used,
        "pcie_rx": np.clip(pcie_rx, 0, None).astype(f32),
        "pcie_tx": np.clip(pcie_tx, 0, None).astype(f32),
        "nvl": np.clip(nvl, 0, None).astype(f32),
    }


def _counter(rate: np.ndarray, base: np.ndarray | float, integer: bool = False) -> np.ndarray:
    """Monotonic total since boot: base + integral of rate over the grid."""
    tot = np.cumsum(rate.astype(np.float64) * GRID, axis=-1) + base
    return np.floor(tot) if integer else tot


def _events(inc: np.ndarray, base: np.ndarray | float) -> np.ndarray:
    return np.cumsum(inc.astype(np.float64), axis=-1) + base


def _render(job: Job) -> pl.DataFrame:
    site = SITES[job.site]
    gpu = GPUS[site.gpu]
    rng = np.random.default_rng(job.seed)
    s = _State(job, site, rng)
    s.replay_base = None
    for f in job.params.get("faults", []):
        _apply_fault(s, f, site, rng)
    if "benign" in job.params:
        _apply_benign(s, job.params["benign"], site, job, rng)
    s.ckpt[s.hang | s.dead] = 0.0  # nobody writes a checkpoint while hung or restarting
    N, D, P, G = s.N, s.D, s.P, s.G
    ph = _physics(s, site, rng)
    old = _node_split(job, rng)
    if job.params.get("restart_gap"):
        w, a = int(rng.integers(0, N)), float(rng.uniform(5, job.params["minutes"] - 5))
        s.dcgm_alive[w, s.span(a, a + rng.uniform(0.5, 1.5))] = False

    # ---- GPU series (N, D, G)
    gauges: dict[str, np.ndarray] = {}
    C, U = ph["C"], ph["U"]
    gauges["DCGM_FI_DEV_SM_CLOCK"] = ph["clk"]
    gauges["DCGM_FI_DEV_MEM_CLOCK"] = np.where(U > 0.02, gpu.mem_clock, gpu.mem_clock)
    gauges["DCGM_FI_DEV_GPU_TEMP"] = ph["temp"]
    if site.mem_temp_blank:
        gauges["DCGM_FI_DEV_MEMORY_TEMP"] = np.full((N, D, 1), DCGM_BLANK)
    else:
        gauges["DCGM_FI_DEV_MEMORY_TEMP"] = np.round(ph["temp"] + gpu.hbm_temp_add + 2 * C, 0)
    gauges["DCGM_FI_DEV_POWER_USAGE"] = np.round(ph["power"], 3)
    boot_days = rng.uniform(2, 90, (N, 1, 1))
    gauges["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"] = _counter(
        ph["power"] * 1000, boot_days * 86400 * gpu.tdp * 0.4 * 1000, True
    )
    replay0 = np.where(rng.random((N, D, 1)) < 0.03, rng.integers(1, 40, (N, D, 1)), 0)
    if s.replay_base is not None:
        rw, rj, rv = s.replay_base
        replay0[rw, rj] = int(rv)
    gauges["DCGM_FI_DEV_PCIE_REPLAY_COUNTER"] = _counter(s.replay_rate, replay0, True)
    gauges["DCGM_FI_DEV_GPU_UTIL"] = np.round(100 * U, 0)
    gauges["DCGM_FI_DEV_MEM_COPY_UTIL"] = np.round(100 * (0.42 * C + 0.02 * U), 0)
    gauges["DCGM_FI_DEV_ENC_UTIL"] = np.zeros((N, D, 1))
    gauges["DCGM_FI_DEV_DEC_UTIL"] = np.zeros((N, D, 1))
    gauges["DCGM_FI_DEV_XID_ERRORS"] = s.xid
    reserved = np.full((N, D, 1), np.round(gpu.fb_mib * 0.0065))
    gauges["DCGM_FI_DEV_FB_USED"] = ph["fb_used"]
    gauges["DCGM_FI_DEV_FB_FREE"] = np.clip(gpu.fb_mib - ph["fb_used"] - reserved, 0, None)
    gauges["DCGM_FI_DEV_FB_RESERVED"] = reserved
    gauges["DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"] = _counter(
        ph["nvl"] / 1024,
        rng.uniform(1e10, 1e12, (N, D, 1)),
        True,  # KiB totals, unit GUESS
    )
    gauges["DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"] = _events(s.rows_unc, 0)
    corr0 = np.where(rng.random((N, D, 1)) < 0.02, rng.integers(1, 4, (N, D, 1)), 0)
    gauges["DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS"] = np.broadcast_to(corr0, (N, D, 1))
    gauges["DCGM_FI_DEV_ROW_REMAP_FAILURE"] = np.zeros((N, D, 1))
    prof: dict[str, np.ndarray] = {}
    if site.prof:
        prof["DCGM_FI_PROF_GR_ENGINE_ACTIVE"] = np.round(np.clip(0.96 * U, 0, 1), 4)
        prof["DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"] = np.round(
            np.clip(gpu.tensor * C * (1 + rng.normal(0, 0.03, (N, D, G))), 0, 1), 4
        )
        prof["DCGM_FI_PROF_DRAM_ACTIVE"] = np.round(np.clip(0.36 * C + 0.03 * U, 0, 1), 4)
        prof["DCGM_FI_PROF_PCIE_TX_BYTES"] = np.round(ph["pcie_tx"], 0)
        prof["DCGM_FI_PROF_PCIE_RX_BYTES"] = np.round(ph["pcie_rx"], 0)
    if site.custom:
        prof["DCGM_FI_PROF_NVLINK_TX_BYTES"] = np.round(ph["nvl"] / 2, 0)
        prof["DCGM_FI_PROF_NVLINK_RX_BYTES"] = np.round(ph["nvl"] / 2 * 1.001, 0)
        base = rng.integers(0, 3, (N, D, 1)).astype(float)
        gauges["DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL"] = _counter(s.nvl_err, base, True)
        gauges["DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL"] = _counter(s.nvl_err * 0.3, 0, True)
        gauges["DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL"] = _counter(s.nvl_replay, 0, True)
        gauges["DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL"] = _events(s.nvl_recov, 0)
        sbe0 = np.where(rng.random((N, D, 1)) < 0.05, rng.integers(1, 20, (N, D, 1)), 0)
        gauges["DCGM_FI_DEV_ECC_SBE_VOL_TOTAL"] = np.broadcast_to(sbe0, (N, D, 1))
        gauges["DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"] = _events(s.ecc_dbe, 0)
        # power capping during heavy steps is normal on these parts (GUESS 0-15 % of time)
        pv = np.clip(s.pviol + 0.15 * rng.random((N, 1, 1)) * (C > 0.8), 0, 1)
        gauges["DCGM_FI_DEV_POWER_VIOLATION"] = _counter(pv * 1e9, 0, True)
        gauges["DCGM_FI_DEV_THERMAL_VIOLATION"] = _counter(s.tviol * 1e9, 0, True)

    # ---- host series
    ncpu = site.cpus
    pres = s.present & ~s.dead[None, :]
    Cn = (s.work * s.speed * ~s.hang)[None, :] * pres  # host work follows the step rate
    ck = s.ckpt[None, :] * pres
    user = ncpu * (0.05 + 0.12 * Cn) + s.user_add + 3 * (pres & (s.fbj < 1)[None, :])
    system = ncpu * 0.02 + 0.02 * ncpu * ck + s.sys_add
    iowait = 0.06 * ncpu * ck + 0.2
    idle = np.clip(ncpu - user - system - iowait, 0, None)
    del idle  # not emitted (see CPU_MODES)
    cpu = np.stack([user, system, iowait], axis=1)  # (N, 3, G)
    host: dict[str, np.ndarray] = {}
    host["node_cpu_seconds_total"] = np.round(_counter(cpu, rng.uniform(1e6, 1e8, (N, 1, 1))), 2)
    load = 4 + 10 * Cn + 8 * ck + s.load_add + rng.normal(0, 0.6, (N, G))
    host["node_load1"] = np.round(_lag(np.clip(load, 0, None)[:, None, :], 40.0), 2)
    mt = s.mem_total[:, None]
    avail = mt * (0.72 - 0.1 * pres * s.fbj[None, :]) + s.mem_add
    avail = avail * (1 + rng.normal(0, 0.004, (N, G))) - 2e9 * ck
    host["node_memory_MemAvailable_bytes"] = np.round(np.clip(avail, 0.01 * mt, None))[:, None]
    host["node_memory_MemTotal_bytes"] = mt[:, None, :]
    # ---- fabric (N, P, G): NCCL traffic on the compute NICs, proportional to step rate
    live = (s.present & ~s.dead[None, :])[:, None, :]
    step = (s.work * s.speed * ~s.hang)[None, None, :] * live
    line = site.nic_gbs * 1e9
    rate = line * 0.45 * step * s.ib * (1 + rng.normal(0, 0.05, (N, P, G)))
    rate = np.clip(rate, 0, line).astype(np.float32)
    fabric: dict[str, np.ndarray] = {}
    if site.fabric == "ib":
        b0 = rng.uniform(1e13, 1e15, (N, P, 1))
        rx = _counter(rate, b0, True)
        tx = _counter(rate * 1.002, b0 * 0.99, True)
        err = _events(s.ib_err, 0)
        recov = _events(s.ib_recov, rng.integers(0, 3, (N, P, 1)))
        down = _events(s.ib_down, rng.integers(0, 2, (N, P, 1)))
        wait = _counter(rate / line * 2e6 * (1 + 3 * (s.ib < 0.5)), 1e9, True)
        for n in np.nonzero(s.ib_reset >= 0)[0]:
            r = s.ib_reset[n]
            for arr in (rx, tx, err, recov, down, wait):
                arr[n, :, r:] -= arr[n, :, r - 1 : r] - 0.0
                arr[n, :, r:] = np.clip(arr[n, :, r:], 0, None)
        fabric["node_infiniband_port_data_received_bytes_total"] = rx
        fabric["node_infiniband_port_data_transmitted_bytes_total"] = tx
        fabric["node_infiniband_port_errors_received_total"] = err
        fabric["node_infiniband_link_downed_total"] = down
        fabric["node_infiniband_link_error_recovery_total"] = recov
        fabric["node_infiniband_port_transmit_wait_total"] = wait
        fabric["node_infiniband_state_id"] = s.ib_state
        fabric["node_infiniband_physical_state_id"] = s.ib_phys
        fabric["node_infiniband_rate_bytes_per_second"] = np.full((N, P, 1), line)
        nic_names = [f"mlx5_{q}:1" for q in range(P)]
    else:
        nic_names = [f"ens{q + 1}f0np0" for q in range(P)]
    # node_network_*: compute NICs on RoCE sites, plus the storage/management NIC everywhere
    eth = (0.05e9 + 3.5e9 * ck + s.eth_add) * (1 + rng.normal(0, 0.05, (N, G)))
    net_rx = [np.clip(eth, 0, None) * 0.3]
    net_tx = [np.clip(eth, 0, None)]
    up = [np.ones((N, G))]
    carrier = [np.zeros((N, G))]
    errs = [np.zeros((N, G))]
    names = ["eno1"]
    if site.fabric == "roce":
        for q in range(P):
            net_rx.append(rate[:, q])
            net_tx.append(rate[:, q] * 1.002)
            up.append((s.ib_state[:, q] != 0) & (s.ib_state[:, q] != 2))
            carrier.append(s.carrier[:, q])
            errs.append(s.ib_err[:, q])
            names.append(nic_names[q])
    else:
        net_rx.append(np.full((N, G), 200.0))  # IPoIB: NCCL uses verbs, not the netdev
        net_tx.append(np.full((N, G), 150.0))
        up.append(np.ones((N, G)))
        carrier.append(np.zeros((N, G)))
        errs.append(np.zeros((N, G)))
        names.append("ib0")
    stack = np.stack
    netd = {
        "node_network_receive_bytes_total": _counter(stack(net_rx, 1), 1e12, True),
        "node_network_transmit_bytes_total": _counter(stack(net_tx, 1), 8e11, True),
        "node_network_receive_errs_total": _events(stack(errs, 1), 0),
        "node_network_carrier_changes_total": _events(stack(carrier, 1), 2),
        "node_network_up": stack(up, 1).astype(np.float32),
    }

    # ---- sampling
    return _emit(job, s, site, gauges, prof, host, fabric, netd, nic_names, names, old, rng)


def _emit(job, s, site, gauges, prof, host, fabric, netd, nic_names, net_names, old, rng):
    """Sample the grid arrays at each target's scrape times and build the long table."""
    N, G = s.N, s.G
    win = job.params["minutes"] * 60.0
    gpu_devs = [str(d) for d in range(s.D)]
    devices = ["", *gpu_devs, *nic_names, *net_names, *CPU_MODES]
    dev_code = {d: i for i, d in enumerate(dict.fromkeys(devices))}
    devices = list(dev_code)
    metrics: list[str] = []
    cols: dict[str, list[np.ndarray]] = {"t": [], "n": [], "m": [], "d": [], "v": []}
    loss = job.params["loss"]

    def targets(iv_of: np.ndarray, tick_of: np.ndarray | None, alive: np.ndarray):
        """Yield (nodes, sample times in s, grid index of the value, valid mask)."""
        for iv in np.unique(iv_of):
            sel = np.nonzero(iv_of == iv)[0]
            K = int(win // iv) + 1
            phase = rng.uniform(0, iv, len(sel))
            ts = phase[:, None] + iv * np.arange(K)[None, :]
            ok = ts <= win
            src = ts
            if tick_of is not None:  # dcgm-exporter serves the last DCGM collection
                div = tick_of[sel][:, None]
                dph = rng.uniform(0, div[:, 0])[:, None]
                src = np.maximum(np.floor((ts - dph) / div) * div + dph, 0)
            gi = np.clip((src // GRID).astype(np.int64), 0, G - 1)
            gt = np.clip((ts // GRID).astype(np.int64), 0, G - 1)
            ok &= alive[sel[:, None], gt] & (rng.random(ts.shape) >= loss)
            yield sel, ts, gi, ok

    def put(name, arr, sel, ts, gi, ok, devs, devmask=None):
        X = arr.shape[1]
        ni = sel[:, None, None]
        xi = np.arange(X)[None, :, None]
        g = gi[:, None, :] if arr.shape[2] > 1 else np.zeros_like(gi)[:, None, :]
        vals = arr[ni, xi, g]
        mask = np.broadcast_to(ok[:, None, :], vals.shape)
        if devmask is not None:
            mask = mask & devmask[ni, xi if devmask.shape[1] > 1 else 0, gi[:, None, :]]
        if not mask.any():
            return
        if name not in metrics:
            metrics.append(name)
        cnt = int(mask.sum())
        cols["v"].append(np.asarray(vals, dtype=np.float64)[mask])
        cols["t"].append(np.broadcast_to(ts[:, None, :], vals.shape)[mask])
        cols["n"].append(np.broadcast_to(sel[:, None, None], vals.shape)[mask].astype(np.int32))
        cols["m"].append(np.full(cnt, metrics.index(name), np.int32))
        codes = np.array([dev_code[d] for d in devs], np.int32)
        cols["d"].append(np.broadcast_to(codes[None, :, None], vals.shape)[mask])

    mixed = job.kind == "mixed_exporters"
    d_iv = np.full(N, job.params["dcgm_scrape"])
    n_iv = np.full(N, job.params["node_iv"])
    tick = np.full(N, site.dcgm_iv)
    if mixed:  # older exporter nodes sit in a second scrape job (30 s) and collect every 30 s
        d_iv[old] = n_iv[old] = 30.0 if job.params["node_iv"] != 30 else 60.0
        tick[old] = 30.0
    dcgm_ok = s.node_alive & s.dcgm_alive
    for sel, ts, gi, ok in targets(d_iv, tick, dcgm_ok):
        for name, arr in gauges.items():
            if name in OLD_EXPORTER_DROPS:
                keep = ~old[sel]
                put(name, arr, sel[keep], ts[keep], gi[keep], ok[keep], gpu_devs, s.dev_alive)
            else:
                put(name, arr, sel, ts, gi, ok, gpu_devs, s.dev_alive)
        pmask = s.dev_alive & s.prof_alive[:, None, :]
        for name, arr in prof.items():
            put(name, arr, sel, ts, gi, ok, gpu_devs, pmask)
    for sel, ts, gi, ok in targets(n_iv, None, s.node_alive):
        put("node_cpu_seconds_total", host["node_cpu_seconds_total"], sel, ts, gi, ok, CPU_MODES)
        for name in ("node_load1", "node_memory_MemAvailable_bytes", "node_memory_MemTotal_bytes"):
            put(name, host[name], sel, ts, gi, ok, [""])
        for name, arr in fabric.items():
            put(name, arr, sel, ts, gi, ok, nic_names, s.port_alive)
        for name, arr in netd.items():
            put(name, arr, sel, ts, gi, ok, net_names)
    t_ms = np.round(np.concatenate(cols["t"]) * 1000).astype(np.int64)
    t_ms += int(job.start.timestamp() * 1000)
    return pl.DataFrame(
        {
            "time": pl.Series(t_ms).cast(pl.Datetime("ms", "UTC")),
            "node": pl.Series(job.nodes, dtype=pl.String).gather(np.concatenate(cols["n"])),
            "metric": pl.Series(metrics, dtype=pl.String).gather(np.concatenate(cols["m"])),
            "device": pl.Series(devices, dtype=pl.String).gather(np.concatenate(cols["d"])),
            "value": np.concatenate(cols["v"]),
        }
    )


# ---------------------------------------------------------------------------------------------
# Evaluator helpers


def aggregate(raw: pl.DataFrame, agg_for: Callable[[str], str]) -> pl.DataFrame:
    """Per (scrape time, node, metric), reduce over devices with ``agg_for(metric)``.

    Counters are always summed as raw totals (what ``sum by (instance)`` over the totals gives:
    a vanished device or port makes the sum step down).
    """
    out = []
    for metric in raw.get_column("metric").unique().to_list():
        how = "sum" if metric in COUNTERS else agg_for(metric)
        if how not in ("min", "max", "sum", "avg"):
            raise ValueError(f"agg_for({metric!r}) = {how!r}: expected min, max, sum or avg")
        expr = {
            "min": pl.col("value").min(),
            "max": pl.col("value").max(),
            "sum": pl.col("value").sum(),
            "avg": pl.col("value").mean(),
        }[how]
        part = raw.filter(pl.col("metric") == metric)
        out.append(part.group_by(["time", "node", "metric"]).agg(expr.alias("value")))
    return pl.concat(out).sort(["metric", "node", "time"])


def table(corpus: list[Job]) -> pl.DataFrame:
    """One row per job: name, kind, site, nodes, intervals, culprits and onsets."""
    rows = []
    for j in corpus:
        rows.append(
            {
                "name": j.name,
                "kind": j.kind,
                "faulty": j.kind in FAULT_KINDS,
                "site": j.site,
                "gpu": SITES[j.site].gpu,
                "nodes": len(j.nodes),
                "minutes": int((j.end - j.start).total_seconds() // 60),
                "dcgm_interval": j.dcgm_interval,
                "node_interval": j.node_interval,
                "culprits": ",".join(sorted(j.culprits)),
                "onsets": ",".join(
                    j.culprits[n].strftime("%Y-%m-%dT%H:%M:%SZ") for n in sorted(j.culprits)
                ),
                "notes": j.notes,
            }
        )
    return pl.DataFrame(rows)
