"""An independent labelled corpus (v2) of per-device training-job metrics, for measuring Minder.

Written blind: without reading the detector, its priority table, the simulator or the other
corpora.  It is for *measuring* a detector, never for tuning one until it passes.

API
---
- :func:`jobs` ``(seed) -> list[Job]``: 79 jobs, 42 of them healthy.  ``Job.raw`` renders
  the job's RAW series as Prometheus holds them (generated on each access, deterministic by seed;
  keep the frame if you need it twice): a long polars table ``time`` (UTC datetime, the scrape
  timestamp, shared by every series of one scrape of one exporter), ``node``, ``metric``,
  ``device`` (GPU index ``"0".."7"``, InfiniBand ``"mlx5_3:1"``, ``"user"``/``"system"``/
  ``"idle"`` for ``node_cpu_seconds_total`` summed over CPUs, ``""`` for other host metrics),
  ``value``.  Counters are monotonic totals since boot (with occasional resets).
- :func:`aggregate` ``(raw, agg_for) -> time,node,metric,value``: the per-node table the
  detector reads, each (scrape, node, metric) reduced over its devices by ``agg_for(metric)``
  (``"min"|"max"|"sum"|"avg"``), e.g. ``lambda m: spec_for(m).agg`` from the catalog.  Counters
  are aggregated as totals (a sum of totals stays a counter); a device whose series vanish (a
  dropped NIC port, a GPU off the bus) makes that node's sum step down once, as a PromQL
  ``sum by (instance)`` over raw totals would.
- ``Job``: ``name``, ``raw``, ``culprits`` (node -> onset, UTC; empty when healthy), ``kind``
  (:data:`FAULT_KINDS` or :data:`BENIGN_KINDS`), ``notes``, plus ``nodes``, ``start``, ``end``,
  ``ports``, ``dcgm_interval``, ``node_interval`` for the evaluator.

- :func:`table` ``(jobs) -> DataFrame``: one row per job (kind, size, intervals, culprits, onsets).

Metrics emitted (:data:`DCGM_METRICS`, :data:`NODE_METRICS`): every field of dcgm-exporter's
shipped ``etc/default-counters.csv`` but ``DCGM_FI_DEV_VGPU_LICENSE_STATUS`` (no vGPU on a
bare-metal training node) and the ``DCGM_FI_DRIVER_VERSION`` label, plus
``DCGM_FI_PROF_NVLINK_TX_BYTES`` (not in the default set; the project's catalog reads it), and
node_exporter's infiniband, cpu, load and meminfo collectors' series named below.

How the data is made (assumptions, each a guess where no source gave a number)
---------------------------------------------------------------------------------
Synchronous data-parallel training.  Every node runs 8 GPUs (one rank each) in lock-step: the
job's speed ``s(t)`` is set by its slowest GPU and by job-wide events.  A GPU's *busy* fraction
(compute) is ``c0 * s`` on healthy GPUs -- they wait for the slow one in NCCL, where the spinning
NCCL kernel keeps ``GPU_UTIL`` near 100 % and the graphics engine active but tensor/DRAM duty and
power drop -- and ``c0`` on a slow culprit GPU, which is busy the whole time.  So throughput-like
series (IB bytes, NVLink/PCIe bytes, power, tensor duty) move together on every node and the
culprit differs in its *local* series: clock, temperature, power, tensor duty, PCIe replays, IB
port state and errors.  When a rank dies or a machine vanishes the others hang in NCCL:
``GPU_UTIL`` 100 at near-idle power (NVIDIA/nccl#968: "GPU util is 100% but the power consumption
is pretty low (~70W)"; nebius/soperator#796) until the NCCL watchdog timeout (10 or 30 minutes),
where the window ends.

- Hardware: A100-SXM4-80GB (400 W limit, SM 1410 MHz under load, memory clock 1593 MHz) or
  H100-SXM5-80GB (700 W, SM 1980 MHz boost that sags to ~1755 under power limit, memory 2619 MHz);
  idle SM clock 210 MHz and idle temperatures 25-33 C with a 7 C spread across one node's GPUs
  (a real A800 node's dcgm-exporter scrape, tests/fixtures/metrics_v2/README.md); under load
  52-61 C across one node's GPUs (a real A100 nvidia-smi table, same README): each GPU gets a
  constant offset of +-4 C, each node +-2 C.  Temperature follows power with a 90 s lag.
  Memory (HBM) temperature = GPU temperature + 6-14 C.
- Rank 0 (the first node) always carries a little extra CPU load and memory (0.5-3 load,
  2-10 GiB); in ``rank0_extra`` jobs 6-16 and 40-120 GiB.
- Training values: tensor-pipe duty 0.25-0.5, DRAM duty 0.2-0.35 at full speed (a 512-GPU GB200
  run averaged 0.324 tensor, 0.241 DRAM, 98.55 % util: marin-community/marin#7344); iteration
  phase sampled at each scrape (about 20 % of an iteration is exposed communication), which is
  the main per-sample noise, correlated across a node's GPUs.
- dcgm-exporter refreshes its cached DCGM samples every 30 s (its default collection interval)
  at its own phase per node; a faster scrape re-reads the same cached values.
- Scraping: dcgm-exporter and node_exporter are separate targets with their own interval
  (15, 30 or 60 s per job; large jobs 30/60 s), each node's target at its own offset in the
  interval, +-0.3 s jitter, each scrape lost with probability 0.2-2 % (all series of that target
  at once), plus an occasional 1-3-scrape outage of one target.
- Counters: IB port bytes (sysfs ``port_rcv_data``/``port_xmit_data`` x4, as node_exporter
  reports them), energy since boot (mJ), PCIe replays, NVLink traffic, CPU seconds: random
  since-boot starting totals; in ~15 % of jobs one node's counter family resets once (driver
  reload or GPU reset) -- benign.  PCIe replays and link-error recoveries are mostly zero with
  sparse benign increments (Poisson, ~1 per node-hour) everywhere.
- Onsets: uniform between 6 minutes after the last node finished warm-up and 8 minutes before
  the window's end, so a 4-minute continuity rule has room; faults persist to the window's end.
- Fault mix: loosely after Minder (NSDI'25) -- hardware faults dominate, ECC/Xid the largest
  share, network about a sixth; no software faults (they are not a machine's).
- Magnitudes: thermal slowdown 85-92 C with SM clock down to 55-80 % (SW thermal) or ~50 %
  (HW slowdown halves the clock: nvml.h's description quoted in kubeflow/kubeflow#68); power
  brake/cap to 40-60 % of the limit; a stuck low clock 45-70 %; PCIe downgrade x16->x8 or
  Gen4->Gen3 halves PCIe bandwidth, slows the job 8-25 % and adds 0.2-5 replays/s; a degraded
  NVLink drops that GPU's NVLink traffic by 30-60 % and the job by 10-30 %, Xid 74; AOC flapping:
  a port goes down 1-4 times per 5 minutes for 5-30 s, ``link_downed`` and error counters step,
  the job stalls a little at each flap; NIC dropout: the port's series vanish (the OS lost the
  device) and the job hangs; ECC/Xid: Xid 48/63/94/79 on one GPU, its node's ranks exit (GPUs
  idle, memory freed) or that GPU freezes; Xid 79 (fallen off the bus) makes that GPU's series
  vanish.
- Benign, my own additions: a user profiling one node pauses DCGM profiling for 3-10 minutes
  (its ``DCGM_FI_PROF_*`` series read DCGM's blank value, passed through by dcgm-exporter);
  counter resets on several nodes; a GPU with no rank; a rack that runs cooler; mixed RAM sizes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import numpy as np
import polars as pl

GPUS = 8
FINE = 5.0  # seconds: the latent state's grid; scrapes read the nearest fine point
DCGM_FP64_BLANK = 140737488355328.0  # DCGM's "no value" for a double field
COLLECT = 30.0  # dcgm-exporter's default collection interval (-c 30000 ms)

DCGM_METRICS: tuple[tuple[str, str], ...] = (
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
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge"),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge"),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "gauge"),
    ("DCGM_FI_PROF_PCIE_TX_BYTES", "gauge"),
    ("DCGM_FI_PROF_PCIE_RX_BYTES", "gauge"),
    ("DCGM_FI_PROF_NVLINK_TX_BYTES", "gauge"),
)
IB_METRICS: tuple[tuple[str, str], ...] = (
    ("node_infiniband_port_data_received_bytes_total", "counter"),
    ("node_infiniband_port_data_transmitted_bytes_total", "counter"),
    ("node_infiniband_link_downed_total", "counter"),
    ("node_infiniband_link_error_recovery_total", "counter"),
    ("node_infiniband_port_errors_received_total", "counter"),
    ("node_infiniband_state_id", "gauge"),
    ("node_infiniband_rate_bytes_per_second", "gauge"),
)
HOST_METRICS: tuple[tuple[str, str], ...] = (
    ("node_load1", "gauge"),
    ("node_memory_MemAvailable_bytes", "gauge"),
    ("node_memory_MemTotal_bytes", "gauge"),
    ("node_cpu_seconds_total", "counter"),  # devices: user, system, idle (summed over CPUs)
)
NODE_METRICS = IB_METRICS + HOST_METRICS
KIND_OF: dict[str, str] = dict(DCGM_METRICS + NODE_METRICS)
METRICS: tuple[str, ...] = tuple(KIND_OF)

FAULT_KINDS = (
    "ecc_xid_hang",
    "nvlink_error",
    "pcie_downgrade",
    "nic_dropout",
    "aoc_flapping",
    "machine_unreachable",
    "slow_gpu_thermal",
    "slow_gpu_power",
    "slow_gpu_clock",
    "two_faults",
)
BENIGN_KINDS = (
    "healthy",
    "staggered_warmup",
    "checkpoint_pause",
    "jobwide_slowdown",
    "short_blip",
    "constant_offset",
    "sparse_counters",
    "late_starter",
    "rank0_extra",
    "idle_gpu_by_design",
    "heterogeneous_memory",
    "heterogeneous_cooling",
    "counter_reset",
    "profiler_paused",
)

# Per-node state on the fine grid
IDLE, WARMUP, TRAIN, PAUSE, HANG, EXITED = range(6)

_EPOCH0 = datetime(2025, 3, 3, tzinfo=UTC)


@dataclass(frozen=True)
class _Spec:
    seed: int
    name: str
    kind: str
    n_nodes: int
    ports: int
    dcgm_interval: float
    node_interval: float
    duration: float  # seconds of window
    gpu: str  # "a100" | "h100"
    start: datetime
    faults: tuple[tuple[str, int, float, int], ...] = ()  # (kind, node, onset s, gpu)
    options: tuple[tuple[str, float], ...] = ()


@dataclass
class Job:
    name: str
    culprits: dict[str, datetime]
    kind: str
    notes: str
    nodes: list[str]
    start: datetime
    end: datetime
    ports: int
    dcgm_interval: float
    node_interval: float
    _spec: _Spec = field(repr=False)

    @property
    def raw(self) -> pl.DataFrame:
        """The job's raw per-device series (rendered now, deterministic by the corpus seed)."""
        return _render(self._spec, self.nodes)


# ----------------------------------------------------------------------------------------------
# the corpus plan


def jobs(seed: int = 0) -> list[Job]:
    """The corpus: one :class:`Job` per planned job, deterministic in ``seed``."""
    rng = np.random.default_rng(seed)
    plan: list[tuple[str, int]] = []
    faults = {
        "ecc_xid_hang": 7,
        "nvlink_error": 4,
        "pcie_downgrade": 3,
        "nic_dropout": 3,
        "aoc_flapping": 3,
        "machine_unreachable": 4,
        "slow_gpu_thermal": 5,
        "slow_gpu_power": 3,
        "slow_gpu_clock": 3,
        "two_faults": 2,
    }
    benign = {
        "healthy": 6,
        "staggered_warmup": 3,
        "checkpoint_pause": 4,
        "jobwide_slowdown": 3,
        "short_blip": 4,
        "constant_offset": 3,
        "sparse_counters": 3,
        "late_starter": 3,
        "rank0_extra": 3,
        "idle_gpu_by_design": 2,
        "heterogeneous_memory": 2,
        "heterogeneous_cooling": 2,
        "counter_reset": 2,
        "profiler_paused": 2,
    }
    for kind, n in list(faults.items()) + list(benign.items()):
        plan += [(kind, i) for i in range(n)]
    # sizes: mostly small and mid jobs, a few large ones (2 x 1024, 3 x 512, 4 x 256)
    sizes = [1024, 1024, 512, 512, 512, 256, 256, 256, 256]
    small = [4, 8, 16, 32, 64, 128]
    sizes += [int(rng.choice(small, p=[0.2, 0.25, 0.2, 0.15, 0.12, 0.08])) for _ in plan[9:]]
    order = rng.permutation(len(plan))  # which job gets which size: unrelated to its kind
    out: list[Job] = []
    for j, idx in enumerate(order):
        kind, _ = plan[idx]
        out.append(_make_job(seed, j, kind, sizes[j], np.random.default_rng([seed, j])))
    return out


def _make_job(seed: int, j: int, kind: str, n: int, rng: np.random.Generator) -> Job:
    big = n >= 256
    dcgm_iv = float(rng.choice([30.0, 60.0] if big else [15.0, 30.0, 60.0]))
    node_iv = float(rng.choice([30.0, 60.0] if big else [15.0, 30.0, 60.0]))
    duration = float(rng.integers(20, 31) * 60 if big else rng.integers(30, 61) * 60)
    ports = int(rng.choice([4, 8]))
    gpu = str(rng.choice(["a100", "h100"]))
    start = _EPOCH0 + timedelta(days=int(rng.integers(0, 200)), seconds=int(rng.integers(0, 86400)))
    prefix = str(rng.choice(["gpu", "node", "dgx", "hgx", "a"]))
    rack0 = int(rng.integers(1, 40))
    nodes = [f"{prefix}{rack0 + i // 16:02d}-{i % 16 + 1:02d}" for i in range(n)]
    warm_end = 60.0 * float(rng.uniform(2, 6))  # slowest node ready (warm-up incl. stagger)
    opts: dict[str, float] = {
        "warm": warm_end,
        "loss": float(rng.uniform(0.002, 0.02)),
        "c0": float(rng.uniform(0.72, 0.9)),
        "tensor": float(rng.uniform(0.25, 0.5)),
        "dram": float(rng.uniform(0.2, 0.35)),
        "timeout": float(rng.choice([600.0, 1800.0])),
        "reset": float(rng.random() < 0.15),
        "ckpt_every": float(rng.choice([0.0, 0.0, 1200.0, 1800.0])),
    }
    fl: list[tuple[str, int, float, int]] = []
    notes = ""

    def onset(after: float = 0.0) -> float:
        lo = warm_end + 360.0 + after
        hi = max(lo + 1.0, duration - 480.0)
        return float(rng.uniform(lo, hi))

    culprit = int(rng.integers(0, n))
    g = int(rng.integers(0, GPUS))
    if kind in FAULT_KINDS:
        if kind == "two_faults":
            other = int((culprit + 1 + rng.integers(0, n - 1)) % n)
            k1, k2 = rng.choice(["slow_gpu_thermal", "pcie_downgrade", "nvlink_error"], 2)
            fl = [(str(k1), culprit, onset(), g), (str(k2), other, onset(), int(rng.integers(8)))]
            notes = f"{k1} on {nodes[culprit]}, {k2} on {nodes[other]}"
        else:
            fl = [(kind, culprit, onset(), g)]
            notes = f"{kind} on {nodes[culprit]} GPU {g}"
        if kind == "ecc_xid_hang":
            opts["xid"] = float(rng.choice([48, 63, 94, 79]))
            opts["exit"] = float(rng.random() < 0.6)  # ranks exit (vs the GPU freezes)
            notes += f", Xid {int(opts['xid'])}, {'ranks exit' if opts['exit'] else 'GPU frozen'}"
        if kind in ("slow_gpu_thermal",):
            opts["hw"] = float(rng.random() < 0.35)
        if kind in ("ecc_xid_hang", "nic_dropout", "machine_unreachable"):
            # the job hangs in NCCL until the watchdog fires; the window ends there
            duration = min(duration, fl[0][2] + opts["timeout"])
            notes += f", peers hang in NCCL for {duration - fl[0][2]:.0f} s"
    elif kind == "staggered_warmup":
        opts["stagger"] = 1.0
        notes = "nodes finish warm-up up to 4 minutes apart"
    elif kind == "checkpoint_pause":
        opts["ckpt_every"] = float(rng.choice([600.0, 900.0]))
        opts["ckpt_len"] = float(rng.uniform(60, 300))
        notes = f"checkpoint every {opts['ckpt_every']:.0f} s for {opts['ckpt_len']:.0f} s"
    elif kind == "jobwide_slowdown":
        opts["slow_at"] = onset()
        opts["slow_len"] = float(rng.uniform(300, 900))
        opts["slow_to"] = float(rng.uniform(0.4, 0.8))
        notes = f"every node slows to {opts['slow_to']:.2f} for {opts['slow_len']:.0f} s"
    elif kind == "short_blip":
        opts["blip_node"] = culprit
        opts["blip_at"] = onset()
        opts["blip_len"] = float(rng.uniform(40, 200))
        opts["blip_kind"] = float(rng.integers(0, 3))  # 0 clock dip, 1 scrape outage, 2 IB stall
        notes = f"{nodes[culprit]}: a {opts['blip_len']:.0f} s blip (type {opts['blip_kind']:.0f})"
    elif kind == "constant_offset":
        opts["offset_node"] = culprit
        opts["offset_temp"] = float(rng.uniform(5, 10))
        opts["offset_power"] = float(rng.uniform(-0.08, -0.04))
        notes = f"{nodes[culprit]} runs {opts['offset_temp']:.1f} C hotter all job long"
    elif kind == "sparse_counters":
        opts["sparse"] = float(rng.uniform(5, 20))  # per node-hour
        notes = "benign PCIe replays / IB error recoveries on random nodes"
    elif kind == "late_starter":
        opts["late_node"] = culprit
        opts["late_by"] = float(rng.uniform(90, 240))
        notes = f"{nodes[culprit]} joins {opts['late_by']:.0f} s late; the job waits for it"
    elif kind == "rank0_extra":
        notes = f"{nodes[0]} (rank 0) has extra CPU load and less free memory"
        opts["rank0"] = 1.0
    elif kind == "idle_gpu_by_design":
        opts["idle_node"] = culprit
        opts["idle_gpu"] = float(g)
        notes = f"{nodes[culprit]} GPU {g} has no rank all job long (ranks = 8n-1)"
    elif kind == "heterogeneous_memory":
        opts["mem_het"] = 1.0
        notes = "a third of the nodes have 2 TiB of RAM, the rest 1 TiB"
    elif kind == "heterogeneous_cooling":
        opts["cool_het"] = float(rng.uniform(5, 9))
        notes = f"one rack (16 nodes, or half a small job) runs {opts['cool_het']:.1f} C cooler"
    elif kind == "profiler_paused":
        opts["prof_node"] = culprit
        opts["prof_at"] = onset()
        opts["prof_len"] = float(rng.uniform(180, 600))
        notes = (
            f"{nodes[culprit]}: a user profiles (dcgmi profile --pause) for "
            f"{opts['prof_len']:.0f} s; its DCGM_FI_PROF_* read DCGM's blank value"
        )
    elif kind == "counter_reset":
        opts["reset"] = 1.0
        opts["reset_many"] = 1.0
        notes = "counter resets (driver reload) on several nodes"
    else:
        notes = "steady healthy training"
    if opts["ckpt_every"] and "ckpt_len" not in opts:
        opts["ckpt_len"] = float(rng.uniform(30, 120))
    spec = _Spec(
        seed=seed,
        name=f"v2-{j:03d}-{kind}",
        kind=kind,
        n_nodes=n,
        ports=ports,
        dcgm_interval=dcgm_iv,
        node_interval=node_iv,
        duration=duration,
        gpu=gpu,
        start=start,
        faults=tuple(fl),
        options=tuple(sorted(opts.items())),
    )
    culprits = {nodes[f[1]]: start + timedelta(seconds=f[2]) for f in fl}
    return Job(
        name=spec.name,
        culprits=culprits,
        kind=kind,
        notes=notes,
        nodes=nodes,
        start=start,
        end=start + timedelta(seconds=duration),
        ports=ports,
        dcgm_interval=dcgm_iv,
        node_interval=node_iv,
        _spec=spec,
    )


# ----------------------------------------------------------------------------------------------
# rendering one job


def _lag(x: np.ndarray, tau: float) -> np.ndarray:
    """First-order lag along the last axis (fine grid), starting at the first value."""
    a = FINE / (tau + FINE)
    out = np.empty_like(x)
    out[..., 0] = x[..., 0]
    for k in range(1, x.shape[-1]):
        out[..., k] = out[..., k - 1] + a * (x[..., k] - out[..., k - 1])
    return out


def _render(spec: _Spec, nodes: list[str]) -> pl.DataFrame:
    o = dict(spec.options)
    rng = np.random.default_rng([spec.seed, 7919, spec.n_nodes, int(spec.duration)])
    n, G, P = spec.n_nodes, GPUS, spec.ports
    F = int(spec.duration // FINE) + 2
    tf = np.arange(F) * FINE  # seconds since window start
    h100 = spec.gpu == "h100"
    plimit, pidle = (700.0, 70.0) if h100 else (400.0, 60.0)
    ptrain = plimit * rng.uniform(0.78, 0.93)
    clk_max, memclk = (1980.0, 2619.0) if h100 else (1410.0, 1593.0)
    fb_total = 81559.0 if h100 else 81920.0

    # ---- per-node state on the fine grid -------------------------------------------------
    state = np.full((n, F), TRAIN, dtype=np.int8)
    warm = o["warm"]
    ready = np.full(n, warm) - rng.uniform(0, 40, n)  # nodes finish warm-up within ~40 s
    if o.get("stagger"):
        ready = warm - rng.uniform(0, 240, n)
    ready = np.maximum(ready, 30.0)
    job_start = ready.max()  # synchronous: training starts when the last rank is ready
    if "late_node" in o:
        ln = int(o["late_node"])
        ready[ln] = job_start + o["late_by"]
        job_start = ready[ln]
    launch = rng.uniform(0, 20, n)  # srun starts processes within seconds
    if "late_node" in o:
        launch[int(o["late_node"])] = o["late_by"]
    state[tf[None, :] < ready[:, None]] = WARMUP
    state[tf[None, :] < launch[:, None]] = IDLE
    # ready but waiting for the others at the rendezvous: GPU loaded, idle
    waiting = (tf[None, :] >= ready[:, None]) & (tf[None, :] < job_start)
    state[waiting] = PAUSE

    speed = np.ones(F)
    slow_gpu = np.ones((n, G))[:, :, None] * np.ones(F)  # clock factor per GPU
    if o.get("slow_at") is not None and "slow_to" in o:
        m = (tf >= o["slow_at"]) & (tf < o["slow_at"] + o["slow_len"])
        speed[m] *= o["slow_to"]
    if o.get("ckpt_every"):
        every, length = o["ckpt_every"], o["ckpt_len"]
        for c in np.arange(job_start + every, spec.duration, every):
            skew = rng.uniform(0, 25, n)
            for i in range(n):
                m = (tf >= c + skew[i]) & (tf < c + skew[i] + length)
                state[i, m & (state[i] == TRAIN)] = PAUSE

    # ---- per-GPU hardware character -----------------------------------------------------
    t_amb = 27.0 + rng.normal(0, 2, (n, 1)) + rng.normal(0, 2.3, (n, G))  # idle 25-33 C
    theta = (65.0 - 30.0) / ptrain * rng.uniform(0.85, 1.15, (n, G))  # C per W
    p_char = 1 + rng.normal(0, 0.025, (n, G))
    if "offset_node" in o:
        t_amb[int(o["offset_node"])] += o["offset_temp"]
        p_char[int(o["offset_node"])] *= 1 + o["offset_power"]
    if "cool_het" in o:
        size = min(16, n // 2)  # one rack (16 nodes), or half of a small job
        first = int(rng.integers(0, n // size)) * size
        t_amb[first : first + size] -= o["cool_het"]
    hbm_off = rng.uniform(6, 14, (n, G))

    # ---- faults -------------------------------------------------------------------------
    local_busy = np.zeros((n, G, F), dtype=bool)  # GPU is the bottleneck (busy all the time)
    power_cap = np.full((n, G, F), plimit)
    temp_extra = np.zeros((n, G, F))
    hot_w = np.zeros((n, G, F))  # weight of a failing-cooling GPU's own temperature
    hot_t = np.zeros((n, G, 1))
    pcie_factor = np.ones((n, G, F))
    nvl_factor = np.ones((n, G, F))
    replay_rate = np.zeros((n, G, F))
    xid = np.zeros((n, G, F))
    gpu_gone = np.zeros((n, G, F), dtype=bool)
    port_gone = np.zeros((n, P, F), dtype=bool)
    port_down = np.zeros((n, P, F), dtype=bool)
    flap_events: list[tuple[int, int, float]] = []
    node_gone = np.zeros((n, F), dtype=bool)
    hang_at = np.inf
    for kind, i, t0, g in spec.faults:
        after = tf >= t0
        if kind == "slow_gpu_thermal":
            ramp = np.clip((tf - t0) / rng.uniform(60, 240), 0, 1) * after
            hot = rng.uniform(85, 92)
            hot_w[i, g] = ramp  # cooling failure: it heats to the slowdown point and stays
            hot_t[i, g] = hot
            factor = 0.5 if o.get("hw") else rng.uniform(0.55, 0.8)
            slow_gpu[i, g] = 1 - ramp * (1 - factor)
            local_busy[i, g] |= after
        elif kind == "slow_gpu_power":
            cap = plimit * rng.uniform(0.4, 0.6)
            power_cap[i, g, after] = cap
            slow_gpu[i, g, after] = rng.uniform(0.55, 0.75)
            local_busy[i, g] |= after
        elif kind == "slow_gpu_clock":
            slow_gpu[i, g, after] = rng.uniform(0.45, 0.7)
            local_busy[i, g] |= after
        elif kind == "pcie_downgrade":
            pcie_factor[i, g, after] = 0.5
            replay_rate[i, g, after] = rng.uniform(0.2, 5)
            speed[after] *= rng.uniform(0.75, 0.92)
            local_busy[i, g] |= after  # its transfers take longer; peers wait for it
        elif kind == "nvlink_error":
            nvl_factor[i, g, after] = rng.uniform(0.4, 0.7)
            xid[i, g, after] = 74
            speed[after] *= rng.uniform(0.7, 0.9)
        elif kind == "aoc_flapping":
            p = int(rng.integers(0, P))
            tt = t0
            while tt < spec.duration:
                length = rng.uniform(5, 30)
                m = (tf >= tt) & (tf < tt + length)
                port_down[i, p, m] = True
                speed[m] *= 0.3  # NCCL retries on the flapping port: a brief stall
                flap_events.append((i, p, tt))
                tt += rng.uniform(75, 300)
        elif kind == "nic_dropout":
            p = int(rng.integers(0, P))
            port_gone[i, p, after] = True
            hang_at = min(hang_at, t0 + rng.uniform(5, 30))
        elif kind == "machine_unreachable":
            node_gone[i, after] = True
            hang_at = min(hang_at, t0 + rng.uniform(5, 30))
        elif kind == "ecc_xid_hang":
            xid[i, g, after] = o["xid"]
            if o["xid"] == 79:
                gpu_gone[i, g, after] = True
            if o["exit"]:
                state[i, after] = EXITED
            else:
                local_busy[i, g] |= after  # the frozen GPU: its kernel never finishes
            hang_at = min(hang_at, t0 + rng.uniform(1, 15))
    hung = tf >= hang_at
    state[:, hung] = np.where(state[:, hung] == EXITED, EXITED, HANG)

    # ---- GPU series on the fine grid ----------------------------------------------------
    st = state[:, None, :]
    training = st == TRAIN
    # job speed: the slowest GPU's clock sets the pace; the frozen/exited ranks stop it
    pace = np.min(np.where(training, slow_gpu, 1.0), axis=(0, 1))
    s = speed * pace
    c0 = o["c0"]
    busy = np.where(local_busy, c0, c0 * s[None, None, :])
    busy = np.where(training, busy, 0.0)
    frozen = local_busy & (st == HANG)
    busy = np.where(frozen, 1.0, busy)
    if "idle_node" in o:
        busy[int(o["idle_node"]), int(o["idle_gpu"])] = 0.0
    clock = clk_max * slow_gpu
    if h100:  # the boost sags with power draw under load
        clock = clock - 200.0 * busy * rng.uniform(0.3, 1.0)
    power = pidle + (ptrain - pidle) * (0.15 + 0.85 * busy) * np.minimum(slow_gpu + 0.2, 1.0)
    power = np.where(training | frozen, power, pidle + 15.0)
    power = np.where(st == HANG, pidle + rng.uniform(5, 40), power)
    power = np.where(st == WARMUP, pidle + 30.0, power)
    power = np.where(st == IDLE, pidle, power)
    power = np.where(st == EXITED, pidle, power)
    power = np.minimum(power * p_char[:, :, None], power_cap)
    active = (st != IDLE) & (st != EXITED)
    idle_by_design = np.zeros((n, G), dtype=bool)
    if "idle_node" in o:
        idle_by_design[int(o["idle_node"]), int(o["idle_gpu"])] = True
        active = active & ~idle_by_design[:, :, None]
        power[idle_by_design] = pidle
    clock = np.where(active, clock, 210.0)
    if "blip_node" in o and o["blip_kind"] == 0:
        m = (tf >= o["blip_at"]) & (tf < o["blip_at"] + o["blip_len"])
        bg = rng.integers(0, G)
        clock[int(o["blip_node"]), bg, m] *= 0.6
        temp_extra[int(o["blip_node"]), bg, m] += 8.0
    temp = _lag(t_amb[:, :, None] + theta[:, :, None] * (power - pidle), 90.0) + temp_extra
    temp = temp * (1 - hot_w) + hot_t * hot_w
    memtemp = _lag(temp + hbm_off[:, :, None] * (power / ptrain), 60.0)
    fb_job = fb_total * rng.uniform(0.7, 0.95)
    fb_used = np.where(active & (st != WARMUP), fb_job, 0.0) + np.where(
        st == WARMUP, fb_job * 0.3, 0
    )
    fb_used = fb_used + 4.0 + np.where(active, 500.0, 0.0)
    util = np.where(training | (st == HANG), 100.0, 0.0)
    util = np.where(st == WARMUP, 30.0, util)
    util = np.where(active, util, 0.0)
    gr = np.where(training, busy + 0.95 * (1 - busy), 0.0)
    gr = np.where(st == HANG, 1.0, gr)
    gr = np.where(active, gr, 0.0)
    tensor = np.where(active, o["tensor"] * busy, 0.0)
    dram = np.where(active, o["dram"] * busy + np.where(st == HANG, 0.002, 0.0), 0.0)
    comm = np.where(training & ~idle_by_design[:, :, None], s[None, None, :], 0.0)
    pcie = 6e9 * comm * pcie_factor * rng.uniform(0.8, 1.2, (n, G, 1))
    nvl = 80e9 * comm * nvl_factor * rng.uniform(0.9, 1.1, (n, G, 1))

    # ---- per-scrape sampling ------------------------------------------------------------
    def scrape_times(iv: float, target: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        r = np.random.default_rng([spec.seed, target, n, int(spec.duration)])
        K = int(spec.duration // iv) + 1
        t = r.uniform(0, iv, (n, 1)) + iv * np.arange(K)[None, :] + r.uniform(-0.3, 0.3, (n, K))
        keep = (t >= 0) & (t <= spec.duration) & (r.random((n, K)) >= o["loss"])
        for i in np.flatnonzero(r.random(n) < 0.05):  # a short outage of one target
            k0 = r.integers(0, K)
            keep[i, k0 : k0 + r.integers(1, 4)] = False
        fi = np.clip(np.rint(t / FINE).astype(np.int64), 0, F - 1)
        keep &= ~node_gone[np.arange(n)[:, None], fi]
        if "blip_node" in o and o["blip_kind"] == 1:  # exporter unreachable for a minute or two
            b = int(o["blip_node"])
            keep[b] &= ~((t[b] >= o["blip_at"]) & (t[b] < o["blip_at"] + o["blip_len"]))
        return t, fi, keep

    # phase noise: at each scrape, where in the iteration is the node (comm vs compute)?
    parts: list[tuple[str, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
    t_d, _fi, keep_d = scrape_times(spec.dcgm_interval, 1)
    # dcgm-exporter serves DCGM's cached samples, refreshed every COLLECT s at its own phase:
    # a scrape reads the last collection (NVIDIA's docs: scraping faster than the watch cadence
    # "can return the same cached sample more than once")
    c_off = rng.uniform(0, COLLECT, (n, 1))
    ck = np.maximum(np.floor((t_d - c_off) / COLLECT), 0).astype(np.int64)
    fi_d = np.clip(np.rint((c_off + COLLECT * ck) / FINE).astype(np.int64), 0, F - 1)
    Kc = int(ck.max()) + 1
    ii = np.arange(n)[:, None, None]
    gg = np.arange(G)[None, :, None]
    fidx = fi_d[:, None, :]

    def at(x: np.ndarray) -> np.ndarray:
        return np.broadcast_to(x, (n, G, F))[ii, gg, fidx]

    K = t_d.shape[1]
    in_comm = np.take_along_axis(rng.random((n, Kc)) < 0.2, ck, axis=1)[:, None, :]
    tr = at(np.broadcast_to(training, (n, G, F)))
    jit = rng.normal(0, 1, (n, G, Kc))[ii, gg, ck[:, None, :]]
    dip = np.where(in_comm & tr, 0.35, 1.0)
    v: dict[str, np.ndarray] = {}
    v["DCGM_FI_DEV_SM_CLOCK"] = np.rint(at(clock) - np.where(tr, 15 * np.abs(jit), 0))
    v["DCGM_FI_DEV_MEM_CLOCK"] = np.full((n, G, K), memclk)
    v["DCGM_FI_DEV_GPU_TEMP"] = np.rint(at(temp) + 0.4 * jit)
    v["DCGM_FI_DEV_MEMORY_TEMP"] = np.rint(at(memtemp) + 0.4 * jit)
    pw = at(power)
    pw = np.where(tr, pidle + (pw - pidle) * (dip + 0.65 * (1 - dip) * 0.6), pw)
    v["DCGM_FI_DEV_POWER_USAGE"] = np.round(pw * (1 + 0.02 * jit), 3)
    u = at(util)
    v["DCGM_FI_DEV_GPU_UTIL"] = np.where(tr, np.minimum(100, np.rint(u - 2 * np.abs(jit))), u)
    v["DCGM_FI_DEV_MEM_COPY_UTIL"] = np.rint(np.clip(at(dram) * 100 * dip + 2 * jit, 0, 100))
    v["DCGM_FI_DEV_ENC_UTIL"] = np.zeros((n, G, K))
    v["DCGM_FI_DEV_DEC_UTIL"] = np.zeros((n, G, K))
    v["DCGM_FI_DEV_XID_ERRORS"] = at(xid)
    fbu = np.rint(at(fb_used))
    v["DCGM_FI_DEV_FB_USED"] = fbu
    v["DCGM_FI_DEV_FB_RESERVED"] = np.full((n, G, K), 491.0)
    v["DCGM_FI_DEV_FB_FREE"] = fb_total - 491.0 - fbu
    v["DCGM_FI_DEV_ROW_REMAP_FAILURE"] = np.zeros((n, G, K))
    v["DCGM_FI_PROF_GR_ENGINE_ACTIVE"] = np.round(np.clip(at(gr) + 0.01 * jit, 0, 1), 6)
    v["DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"] = np.round(
        np.clip(at(tensor) * dip * (1 + 0.04 * jit), 0, 1), 6
    )
    v["DCGM_FI_PROF_DRAM_ACTIVE"] = np.round(np.clip(at(dram) * dip * (1 + 0.04 * jit), 0, 1), 6)
    cm = np.where(in_comm, 2.5, 0.6)
    v["DCGM_FI_PROF_PCIE_TX_BYTES"] = np.rint(at(pcie) * cm * (1 + 0.1 * jit).clip(0.5))
    v["DCGM_FI_PROF_PCIE_RX_BYTES"] = np.rint(at(pcie) * cm * (1 + 0.1 * jit).clip(0.5) * 1.05)
    v["DCGM_FI_PROF_NVLINK_TX_BYTES"] = np.rint(at(nvl) * cm * (1 + 0.1 * jit).clip(0.5))
    # counters: integrals on the fine grid, sampled
    r0 = np.random.default_rng([spec.seed, 31, n])
    energy = r0.uniform(1e11, 5e12, (n, G, 1)) + np.cumsum(power, axis=2) * FINE * 1000.0
    v["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"] = np.rint(at(energy))
    sparse = o.get("sparse", 1.0) / 3600.0
    replays = rng.poisson((replay_rate + sparse / G) * FINE)
    v["DCGM_FI_DEV_PCIE_REPLAY_COUNTER"] = at(np.cumsum(replays, axis=2)).astype(float)
    nvl_tot = r0.uniform(1e12, 1e15, (n, G, 1)) + np.cumsum(nvl, axis=2) * FINE / 1024.0
    v["DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"] = np.rint(at(nvl_tot))
    v["DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"] = np.zeros((n, G, K))
    v["DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS"] = np.where(
        r0.random((n, G, 1)) < 0.03, 1.0, 0.0
    ) * np.ones(K)
    if o.get("xid") in (48.0, 63.0, 94.0):  # an uncorrectable ECC error remaps a row
        for kind, i, t0, g in spec.faults:
            if kind == "ecc_xid_hang":
                v["DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"][i, g] = np.where(
                    t_d[i] >= t0, 1.0, 0.0
                )
    if o["reset"]:
        _reset(v, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", rng, t_d, n, o)
    if "prof_node" in o:  # profiling paused: DCGM serves its FP64 blank for the PROF fields
        b = int(o["prof_node"])
        m = (t_d[b] >= o["prof_at"]) & (t_d[b] < o["prof_at"] + o["prof_len"])
        for name in v:
            if name.startswith("DCGM_FI_PROF_"):
                v[name][b][:, m] = DCGM_FP64_BLANK
    keep3 = np.broadcast_to(keep_d[:, None, :], (n, G, K)) & ~at(gpu_gone)
    tcol = np.broadcast_to(t_d[:, None, :], (n, G, K))
    for name, _k in DCGM_METRICS:
        parts.append((name, tcol, v[name], keep3, np.arange(G)))

    # ---- node_exporter ------------------------------------------------------------------
    t_n, fi_n, keep_n = scrape_times(spec.node_interval, 2)
    Kn = t_n.shape[1]
    ip = np.arange(n)[:, None, None]
    pp = np.arange(P)[None, :, None]
    fn = fi_n[:, None, :]
    ib_rate = 25e9 * 8 / P  # bytes/s per port at full speed, ~ 200 GB/s per node
    traffic = np.where(state == TRAIN, s[None, :], 0.0)[:, None, :] * np.ones((1, P, 1))
    if "blip_node" in o and o["blip_kind"] == 2:
        m = (tf >= o["blip_at"]) & (tf < o["blip_at"] + o["blip_len"])
        traffic[int(o["blip_node"]), :, m] *= 0.2
    traffic = np.where(port_down | port_gone, 0.0, traffic)
    traffic = traffic * ib_rate * rng.uniform(0.3, 0.6) * rng.uniform(0.95, 1.05, (n, P, 1))
    base = r0.uniform(1e12, 1e15, (n, P, 1))
    rx = base + np.cumsum(traffic, axis=2) * FINE
    tx = base * 1.01 + np.cumsum(traffic * 1.002, axis=2) * FINE
    w: dict[str, np.ndarray] = {}
    w["node_infiniband_port_data_received_bytes_total"] = np.rint(rx[ip, pp, fn])
    w["node_infiniband_port_data_transmitted_bytes_total"] = np.rint(tx[ip, pp, fn])
    downed = np.zeros((n, P, F))
    errs = rng.poisson(o.get("sparse", 1.0) / 3600.0 / P * FINE, (n, P, F)).astype(float)
    for i, p, tt in flap_events:
        k = int(tt // FINE)
        downed[i, p, k:] += 1
        errs[i, p, k] += rng.integers(3, 60)
    recov = rng.poisson(o.get("sparse", 1.0) / 3600.0 / P * FINE, (n, P, F)).astype(float)
    w["node_infiniband_link_downed_total"] = downed[ip, pp, fn]
    w["node_infiniband_link_error_recovery_total"] = np.cumsum(recov, axis=2)[ip, pp, fn]
    w["node_infiniband_port_errors_received_total"] = np.cumsum(errs, axis=2)[ip, pp, fn]
    w["node_infiniband_state_id"] = np.where(port_down, 1.0, 4.0)[ip, pp, fn]
    w["node_infiniband_rate_bytes_per_second"] = np.full((n, P, Kn), 5e10)
    if o["reset"]:
        _reset(w, "node_infiniband_port_data_received_bytes_total", rng, t_n, n, o)
    keepp = np.broadcast_to(keep_n[:, None, :], (n, P, Kn)) & ~port_gone[ip, pp, fn]
    tcolp = np.broadcast_to(t_n[:, None, :], (n, P, Kn))
    for name, _k in IB_METRICS:
        parts.append((name, tcolp, w[name], keepp, np.arange(P) + 100))

    # host: load, memory, cpu seconds
    ncpu = float(rng.choice([128, 192, 224]))
    load_t = np.select(
        [state == TRAIN, state == WARMUP, state == PAUSE, state == HANG],
        [rng.uniform(12, 30), rng.uniform(30, 60), rng.uniform(8, 20), 9.0],
        0.5,
    ) * rng.uniform(0.9, 1.1, (n, 1))
    mem_total = np.full(n, 1024.0 * 2**30)
    if o.get("mem_het"):
        mem_total[rng.choice(n, size=max(1, n // 3), replace=False)] = 2048.0 * 2**30
    used = (
        np.select(
            [state == TRAIN, state == WARMUP, state == PAUSE, state == HANG],
            [160.0, 120.0, 260.0, 160.0],
            30.0,
        )
        * 2**30
        * rng.uniform(0.9, 1.1, (n, 1))
    )
    # rank 0 (the first node) always does a little more (logging, metrics, rendezvous store);
    # in rank0_extra jobs much more (evaluation, a data server, checkpoint gathering)
    load_t[0] += rng.uniform(6, 16) if o.get("rank0") else rng.uniform(0.5, 3)
    used[0] += (rng.uniform(40, 120) if o.get("rank0") else rng.uniform(2, 10)) * 2**30
    load = _lag(load_t, 60.0)
    hk = np.arange(n)[:, None]
    h: dict[str, np.ndarray] = {}
    h["node_load1"] = np.round(load[hk, fi_n] + 0.5 * rng.normal(0, 1, (n, Kn)), 2).clip(0)
    avail = mem_total[:, None] - _lag(used, 30.0)
    h["node_memory_MemAvailable_bytes"] = np.rint(avail[hk, fi_n] + rng.normal(0, 2**30, (n, Kn)))
    h["node_memory_MemTotal_bytes"] = mem_total[:, None] * np.ones((1, Kn))
    busy_cpu = np.minimum(load_t, ncpu)
    user = r0.uniform(1e7, 1e9, (n, 1)) + np.cumsum(busy_cpu * 0.85, axis=1) * FINE
    system = r0.uniform(1e6, 1e8, (n, 1)) + np.cumsum(busy_cpu * 0.15, axis=1) * FINE
    idle = r0.uniform(1e8, 1e10, (n, 1)) + np.cumsum(ncpu - busy_cpu, axis=1) * FINE
    cpu = np.stack([user, system, idle], axis=1)[
        hk[:, :, None], np.arange(3)[None, :, None], fi_n[:, None, :]
    ]
    for name in ("node_load1", "node_memory_MemAvailable_bytes", "node_memory_MemTotal_bytes"):
        parts.append(
            (name, t_n[:, None, :], h[name][:, None, :], keep_n[:, None, :], np.array([200]))
        )
    keepc = np.broadcast_to(keep_n[:, None, :], (n, 3, Kn))
    parts.append(
        (
            "node_cpu_seconds_total",
            np.broadcast_to(t_n[:, None, :], (n, 3, Kn)),
            np.round(cpu, 2),
            keepc,
            np.arange(3) + 300,
        )
    )
    return _frame(spec, nodes, parts)


def _reset(
    v: dict[str, np.ndarray],
    name: str,
    rng: np.random.Generator,
    t: np.ndarray,
    n: int,
    o: dict[str, float],
) -> None:
    """A counter family restarts from zero on some node(s) at one instant (driver reload)."""
    x = v[name]
    who = rng.choice(n, size=min(n, 3 if o.get("reset_many") else 1), replace=False)
    for i in who:
        k = int(rng.integers(1, x.shape[-1]))
        x[i, ..., k:] = x[i, ..., k:] - x[i, ..., k : k + 1] + rng.uniform(0, 1e3)


_DEVICE_NAMES: dict[int, str] = {g: str(g) for g in range(GPUS)}
_DEVICE_NAMES.update({300: "user", 301: "system", 302: "idle", 200: ""})


def _device_label(code: int) -> str:
    if 100 <= code < 200:
        return f"mlx5_{code - 100}:1"
    return _DEVICE_NAMES[code]


def _frame(
    spec: _Spec,
    nodes: list[str],
    parts: list[tuple[str, np.ndarray, np.ndarray, np.ndarray, np.ndarray]],
) -> pl.DataFrame:
    t0_us = int(spec.start.timestamp() * 1_000_000)
    node_enum = pl.Enum(nodes)
    metric_enum = pl.Enum(list(METRICS))
    dev_codes = sorted({int(c) for *_x, devs in parts for c in devs})
    dev_names = [_device_label(c) for c in dev_codes]
    dev_enum = pl.Enum(sorted(set(dev_names)))
    frames = []
    for name, t, val, keep, devs in parts:
        shape = val.shape
        t = np.broadcast_to(t, shape)
        keep = np.broadcast_to(keep, shape)
        ni = np.broadcast_to(np.arange(shape[0])[:, None, None], shape)[keep]
        di = np.broadcast_to(np.asarray(devs)[None, :, None], shape)[keep]
        frames.append(
            pl.DataFrame(
                {
                    "time": (t0_us + np.rint(t[keep] * 1e6)).astype(np.int64),
                    "node": ni.astype(np.uint32),
                    "metric": np.full(ni.size, METRICS.index(name), dtype=np.uint32),
                    "device": di.astype(np.int64),
                    "value": val[keep].astype(np.float64),
                }
            )
        )
    df = pl.concat(frames)
    dev_map = {c: _device_label(c) for c in dev_codes}
    return df.select(
        pl.col("time").cast(pl.Datetime("us", "UTC")),
        pl.Series("node", nodes, dtype=node_enum).gather(df["node"]),
        pl.Series("metric", list(METRICS), dtype=metric_enum).gather(df["metric"]),
        pl.col("device").replace_strict(dev_map, return_dtype=pl.Utf8).cast(dev_enum),
        pl.col("value"),
    )


def aggregate(raw: pl.DataFrame, agg_for: Callable[[str], str]) -> pl.DataFrame:
    """Reduce each (scrape time, node, metric) over its devices: the detector's long table.

    ``agg_for(metric)`` names the reduction (``min``, ``max``, ``sum`` or ``avg``).  Samples of
    one scrape share its timestamp, so grouping on ``time`` groups one scrape's devices.
    """
    fns = {
        "min": pl.col("value").min(),
        "max": pl.col("value").max(),
        "sum": pl.col("value").sum(),
        "avg": pl.col("value").mean(),
    }
    out = []
    for part in raw.partition_by("metric", maintain_order=False):
        name = str(part["metric"][0])
        how = agg_for(name)
        if how not in fns:
            raise ValueError(f"aggregation {how!r} for {name} is not one of min, max, sum, avg")
        out.append(
            part.group_by("time", "node").agg(fns[how]).with_columns(pl.lit(name).alias("metric"))
        )
    df = pl.concat(out)
    return df.select("time", pl.col("node").cast(pl.Utf8), pl.col("metric"), pl.col("value")).sort(
        "node", "metric", "time"
    )


def table(corpus: list[Job]) -> pl.DataFrame:
    """One row per job (name, kind, size, intervals, culprits and onsets): for an evaluator."""
    return pl.DataFrame(
        {
            "name": [j.name for j in corpus],
            "kind": [j.kind for j in corpus],
            "faulty": [bool(j.culprits) for j in corpus],
            "nodes": [len(j.nodes) for j in corpus],
            "ports": [j.ports for j in corpus],
            "dcgm_interval": [j.dcgm_interval for j in corpus],
            "node_interval": [j.node_interval for j in corpus],
            "minutes": [(j.end - j.start).total_seconds() / 60 for j in corpus],
            "culprits": [sorted(j.culprits) for j in corpus],
            "onsets": [[j.culprits[k] for k in sorted(j.culprits)] for j in corpus],
            "notes": [j.notes for j in corpus],
        }
    )
