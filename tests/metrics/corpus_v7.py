"""Blind labelled corpus v7 for a Minder-style faulty-machine detector.

Deterministic generator (numpy + polars only) of raw Prometheus samples as dcgm-exporter and
node_exporter publish them, for ~120 synchronous training jobs on five sites that differ in GPU
model, RDMA fabric (InfiniBand, RoCE, plain Ethernet/TCP), exporter versions, field lists and
enabled collectors. Written without reading the detector, the simulators or earlier corpora'
fault models; every modelling choice and its public source is in
tests/fixtures/metrics_v7/README.md (numbers no source gave are listed there as GUESS).

A job's ``raw`` is rendered on every access (nothing cached): one row per (time, node, metric,
device) sample actually scraped. Labels (``jobs``) are cheap and need no rendering.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import numpy as np
import polars as pl

# ----------------------------------------------------------------------------------------------
# Kinds
# ----------------------------------------------------------------------------------------------

FAULT_KINDS: tuple[str, ...] = (
    # the unavoidable hardware faults, modelled afresh
    "xid94_rank_killed",  # contained uncorrectable ECC kills one rank -> NCCL hang -> crash
    "gpu_bus_drop",  # Xid 79: the GPU's series vanish -> hang -> crash
    "hca_fatal_reset",  # mlx5 firmware fatal -> HCA removed/re-added -> hang -> crash
    "chassis_fan_failure",  # fan dies -> GPUs hot -> SW thermal slowdown -> job slows
    "nvlink_replay_storm",  # NVLink CRC/replay/recovery errors, one GPU's NVLink slow
    "pcie_link_degraded",  # GPU link retrains to lower width/gen after replays
    "host_unreachable",  # kernel panic / power loss: every series of the node stops
    # situations earlier corpora did not use
    "dimm_ce_storm",  # host DIMM correctable-error (CMCI) storm, EDAC counter + kernel CPU
    "tcp_retrans_storm",  # Ethernet-only site: bad cable/optic, rx errs + TCP retransmits
    "roce_pfc_misconfig",  # RoCE port lost its PFC/trust config -> drops -> out-of-sequence
    "softnet_irq_collapse",  # NIC IRQs collapse onto one CPU -> softirq saturation, drops
    "oom_killed_rank",  # host memory runs out, OOM killer kills a rank -> hang -> crash
)

BENIGN_KINDS: tuple[str, ...] = (
    "uniform_training",  # steady training with per-node silicon/cooling spread
    "straggler_launch",  # some nodes join late (warm-up with late starters)
    "sync_checkpoint",  # every node pauses at once to write a checkpoint
    "jobwide_throttle",  # the whole job slows (shared storage/fabric), all nodes alike
    "transient_dip",  # one node stalls for < 4 minutes
    "hot_slot_offset",  # 1-3 nodes run hotter all along (rack position)
    "quiet_counters",  # error counters mostly zero, rare isolated single increments
    # situations earlier corpora did not use
    "cron_maintenance_burst",  # a daily cron job fires on every node at the same minute
    "seq_len_ramp",  # sequence-length warm-up: load steps up job-wide
    "dcp_module_missing",  # DCGM profiling module not loaded on part of the nodes
    "sharded_ckpt_writers",  # only the nodes of one data-parallel replica write checkpoints
)

_HANG_KINDS = frozenset(
    {"xid94_rank_killed", "gpu_bus_drop", "hca_fatal_reset", "host_unreachable", "oom_killed_rank"}
)
_SLOW_KINDS = frozenset(FAULT_KINDS) - _HANG_KINDS

# ----------------------------------------------------------------------------------------------
# Metric names (exactly as the exporters ship them)
# ----------------------------------------------------------------------------------------------

D = "DCGM_FI_DEV_"
P = "DCGM_FI_PROF_"
_DCGM_CORE = (
    D + "SM_CLOCK",
    D + "MEM_CLOCK",
    D + "MEMORY_TEMP",
    D + "GPU_TEMP",
    D + "POWER_USAGE",
    D + "TOTAL_ENERGY_CONSUMPTION",
    D + "PCIE_REPLAY_COUNTER",
    D + "GPU_UTIL",
    D + "MEM_COPY_UTIL",
    D + "ENC_UTIL",
    D + "DEC_UTIL",
    D + "XID_ERRORS",
    D + "FB_FREE",
    D + "FB_USED",
    D + "NVLINK_BANDWIDTH_TOTAL",
    D + "UNCORRECTABLE_REMAPPED_ROWS",
    D + "CORRECTABLE_REMAPPED_ROWS",
    D + "ROW_REMAP_FAILURE",
)
_THROUGHPUT = (D + "PCIE_TX_THROUGHPUT", D + "PCIE_RX_THROUGHPUT")  # 2.x: KB, typed counter
_PROF_PCIE = (P + "PCIE_TX_BYTES", P + "PCIE_RX_BYTES")
_PROF = (P + "GR_ENGINE_ACTIVE", P + "PIPE_TENSOR_ACTIVE", P + "DRAM_ACTIVE", *_PROF_PCIE)

# dcgm-exporter CSVs at real tags (VGPU_LICENSE_STATUS is listed but blank on bare metal)
_CSV_2_4_7_DEFAULT = (*_DCGM_CORE[:6], *_THROUGHPUT, *_DCGM_CORE[6:])
_CSV_3_3_9_DEFAULT = (*_DCGM_CORE[:6], *_PROF_PCIE, *_DCGM_CORE[6:])  # PROF_PCIE typed counter
_CSV_3_3_9_DCP = (*_DCGM_CORE, *_PROF)
_CSV_4_2_3_DCP = (*_DCGM_CORE, *_PROF)
_CSV_4_4_2_DEFAULT = (*_DCGM_CORE[:14], D + "FB_RESERVED", *_DCGM_CORE[14:], *_PROF)

_DCGM_COUNTERS = (
    D + "TOTAL_ENERGY_CONSUMPTION",
    D + "PCIE_REPLAY_COUNTER",
    D + "UNCORRECTABLE_REMAPPED_ROWS",
    D + "CORRECTABLE_REMAPPED_ROWS",
    D + "POWER_VIOLATION",
    D + "THERMAL_VIOLATION",
    D + "ECC_SBE_VOL_TOTAL",
    D + "ECC_DBE_VOL_TOTAL",
    D + "NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
    D + "NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
    D + "NVLINK_REPLAY_ERROR_COUNT_TOTAL",
    D + "NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
)
RATE_VALUED_COUNTERS = frozenset({D + "NVLINK_BANDWIDTH_TOTAL", *_THROUGHPUT, *_PROF_PCIE})

IB = "node_infiniband_"
_IB_COUNTERS = (
    IB + "port_data_received_bytes_total",
    IB + "port_data_transmitted_bytes_total",
    IB + "port_errors_received_total",
    IB + "link_downed_total",
    IB + "link_error_recovery_total",
)
_IB_GAUGES = (IB + "state_id", IB + "physical_state_id", IB + "rate_bytes_per_second")
_ROCE_HW = (  # node_exporter >= 1.11 (hw_counters), RoCE devices
    IB + "np_ecn_marked_roce_packets_received_total",
    IB + "np_cnp_packets_sent_total",
    IB + "out_of_sequence_packets_received_total",
    IB + "packet_sequence_errors_total",
    IB + "local_ack_timeout_errors_total",
)
_NET_COUNTERS = (
    "node_network_receive_bytes_total",
    "node_network_transmit_bytes_total",
    "node_network_receive_errs_total",
    "node_network_receive_drop_total",
    "node_network_carrier_changes_total",
)
_NODE_COUNTERS = (
    "node_cpu_seconds_total",
    "node_disk_read_bytes_total",
    "node_disk_written_bytes_total",
    "node_softnet_processed_total",
    "node_softnet_dropped_total",
    "node_softnet_times_squeezed_total",
    "node_edac_correctable_errors_total",
    "node_edac_uncorrectable_errors_total",
    "node_pressure_cpu_waiting_seconds_total",
    "node_pressure_memory_waiting_seconds_total",
    "node_pressure_io_waiting_seconds_total",
)
# cumulative kernel counters node_exporter exposes untyped
_UNTYPED_CUMULATIVE = (
    "node_vmstat_oom_kill",
    "node_vmstat_pgmajfault",
    "node_netstat_Tcp_RetransSegs",
    "node_netstat_Tcp_OutSegs",
    "node_netstat_TcpExt_TCPTimeouts",
)
COUNTER_METRICS = frozenset(
    {
        *_DCGM_COUNTERS,
        *RATE_VALUED_COUNTERS,
        *_IB_COUNTERS,
        *_ROCE_HW,
        *_NET_COUNTERS,
        *_NODE_COUNTERS,
        *_UNTYPED_CUMULATIVE,
    }
)


def is_counter(metric: str) -> bool:
    return metric in COUNTER_METRICS


# ----------------------------------------------------------------------------------------------
# Sites
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Site:
    name: str
    gpu: str
    n_gpu: int
    tdp: float
    idle_w: float
    sm_max: float
    sm_idle: float
    mem_clk: float
    mem_clk_idle: float
    fb_mib: float
    fb_reserved: float
    pcie_gen: int
    nvlink: float  # NVLINK_BANDWIDTH_TOTAL value at full communication; 0 = field blank
    tensor0: float
    slowdown_c: float  # GPU temperature where SW thermal slowdown engages
    amb: float
    dcgm: tuple[str, ...]
    dcgm_version: str
    collect_s: float
    reasons: str  # "" (not exported), CLOCK_THROTTLE_REASONS or CLOCKS_EVENT_REASONS
    violation_unit: float  # violation counter units per second of violation
    node_version: str
    collectors: frozenset[str]
    ib: tuple[str, ...]
    ib_rate: float
    data_netdevs: tuple[str, ...]
    frontend: str
    ncpu: int
    mem_gib: float
    rack: int


_X86 = frozenset(
    {"cpu", "loadavg", "meminfo", "netdev", "diskstats", "vmstat", "netstat", "softnet", "edac"}
)
SITES: dict[str, Site] = {
    "hsx": Site(
        name="hsx",
        gpu="H100 SXM5 80GB (HGX, 8 GPUs, NVSwitch)",
        n_gpu=8,
        tdp=700.0,
        idle_w=72.0,
        sm_max=1980.0,
        sm_idle=345.0,
        mem_clk=2619.0,
        mem_clk_idle=2619.0,
        fb_mib=81559.0,
        fb_reserved=0.0,
        pcie_gen=5,
        nvlink=1.6e5,
        tensor0=0.46,
        slowdown_c=87.0,
        amb=29.0,
        dcgm=(
            *_CSV_3_3_9_DCP,
            D + "CLOCK_THROTTLE_REASONS",
            D + "POWER_VIOLATION",
            D + "THERMAL_VIOLATION",
            D + "NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
            D + "NVLINK_REPLAY_ERROR_COUNT_TOTAL",
            D + "NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
            D + "ECC_SBE_VOL_TOTAL",
            D + "ECC_DBE_VOL_TOTAL",
            D + "PCIE_LINK_GEN",
            D + "PCIE_LINK_WIDTH",
        ),
        dcgm_version="3.3.9-3.6.1 (dcp-metrics-included.csv + site lines)",
        collect_s=10.0,
        reasons=D + "CLOCK_THROTTLE_REASONS",
        violation_unit=1e6,  # us
        node_version="1.8.2",
        collectors=_X86 | {"hwmon", "pressure", "infiniband"},
        ib=tuple(f"mlx5_{i}:1" for i in range(8)),
        ib_rate=50e9,
        data_netdevs=(),
        frontend="bond0",
        ncpu=224,
        mem_gib=2048.0,
        rack=4,
    ),
    "h20": Site(
        name="h20",
        gpu="H20 96GB (HGX, 8 GPUs, NVSwitch)",
        n_gpu=8,
        tdp=400.0,
        idle_w=60.0,
        sm_max=1980.0,
        sm_idle=345.0,
        mem_clk=2619.0,
        mem_clk_idle=2619.0,
        fb_mib=97871.0,
        fb_reserved=566.0,
        pcie_gen=5,
        nvlink=1.6e5,
        tensor0=0.30,
        slowdown_c=87.0,
        amb=27.0,
        dcgm=_CSV_4_4_2_DEFAULT,
        dcgm_version="4.4.2-4.7.1 (default-counters.csv)",
        collect_s=30.0,
        reasons="",
        violation_unit=1e9,
        node_version="1.11.1",
        collectors=_X86 | {"hwmon", "pressure", "infiniband", "roce_hw"},
        ib=tuple(f"mlx5_{i}:1" for i in range(4)),
        ib_rate=50e9,
        data_netdevs=("ens1np0", "ens2np0", "ens3np0", "ens4np0"),
        frontend="bond0",
        ncpu=192,
        mem_gib=2048.0,
        rack=8,
    ),
    "l40s": Site(
        name="l40s",
        gpu="L40S 48GB PCIe (8 per node, no NVLink)",
        n_gpu=8,
        tdp=350.0,
        idle_w=34.0,
        sm_max=2520.0,
        sm_idle=210.0,
        mem_clk=9001.0,
        mem_clk_idle=405.0,
        fb_mib=46068.0,
        fb_reserved=0.0,
        pcie_gen=4,
        nvlink=0.0,
        tensor0=0.38,
        slowdown_c=88.0,
        amb=31.0,
        dcgm=(
            *(
                m
                for m in _CSV_3_3_9_DEFAULT
                if m not in (D + "MEMORY_TEMP", D + "NVLINK_BANDWIDTH_TOTAL")
            ),
            D + "CLOCK_THROTTLE_REASONS",
            D + "PCIE_LINK_GEN",
            D + "PCIE_LINK_WIDTH",
        ),
        dcgm_version="3.3.9-3.6.1 (default-counters.csv + site lines)",
        collect_s=30.0,
        reasons=D + "CLOCK_THROTTLE_REASONS",
        violation_unit=1e6,
        node_version="1.9.1",
        collectors=_X86 | {"hwmon", "pressure"},
        ib=(),
        ib_rate=0.0,
        data_netdevs=("ens3f0np0", "ens3f1np1"),
        frontend="eno1",
        ncpu=128,
        mem_gib=1024.0,
        rack=8,
    ),
    "gh4": Site(
        name="gh4",
        gpu="GH200 96GB superchip x4 per node (aarch64 Grace, liquid-cooled)",
        n_gpu=4,
        tdp=680.0,
        idle_w=90.0,
        sm_max=1980.0,
        sm_idle=345.0,
        mem_clk=2619.0,
        mem_clk_idle=2619.0,
        fb_mib=97871.0,
        fb_reserved=0.0,
        pcie_gen=5,
        nvlink=1.2e5,
        tensor0=0.44,
        slowdown_c=87.0,
        amb=26.0,
        dcgm=(
            *_CSV_4_2_3_DCP,
            D + "CLOCKS_EVENT_REASONS",
            D + "NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
            D + "NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
            D + "ECC_DBE_VOL_TOTAL",
        ),
        dcgm_version="4.2.3-4.1.3 (dcp-metrics-included.csv + site lines)",
        collect_s=15.0,
        reasons=D + "CLOCKS_EVENT_REASONS",
        violation_unit=1e9,
        node_version="1.10.2",
        collectors=frozenset(
            {"cpu", "loadavg", "meminfo", "netdev", "diskstats", "vmstat", "netstat"}
            | {"softnet", "pressure", "infiniband"}
        ),
        ib=tuple(f"mlx5_{i}:1" for i in range(4)),
        ib_rate=25e9,
        data_netdevs=(),
        frontend="eth0",
        ncpu=288,
        mem_gib=480.0,
        rack=16,
    ),
    "a100": Site(
        name="a100",
        gpu="A100 SXM4 80GB (DGX A100, 8 GPUs, NVSwitch)",
        n_gpu=8,
        tdp=400.0,
        idle_w=55.0,
        sm_max=1410.0,
        sm_idle=210.0,
        mem_clk=1593.0,
        mem_clk_idle=1593.0,
        fb_mib=81251.0,
        fb_reserved=0.0,
        pcie_gen=4,
        nvlink=1.2e5,
        tensor0=0.50,
        slowdown_c=85.0,
        amb=28.0,
        dcgm=_CSV_2_4_7_DEFAULT,
        dcgm_version="2.4.7-2.6.11 (default-counters.csv)",
        collect_s=30.0,
        reasons="",
        violation_unit=1e6,
        node_version="1.5.0",
        collectors=_X86 | {"hwmon", "infiniband"},
        ib=tuple(f"mlx5_{i}:1" for i in (0, 1, 2, 3, 6, 7, 8, 9)),
        ib_rate=25e9,
        data_netdevs=(),
        frontend="enp226s0",
        ncpu=256,
        mem_gib=1024.0,
        rack=4,
    ),
}

_KIND_SITES: dict[str, tuple[str, ...]] = {
    "hca_fatal_reset": ("hsx", "h20", "gh4", "a100"),
    "chassis_fan_failure": ("hsx", "h20", "l40s", "a100"),
    "nvlink_replay_storm": ("hsx", "gh4"),
    "pcie_link_degraded": ("hsx", "l40s"),
    "dimm_ce_storm": ("hsx", "h20", "l40s", "a100"),
    "tcp_retrans_storm": ("l40s",),
    "roce_pfc_misconfig": ("h20",),
    "softnet_irq_collapse": ("hsx", "h20", "l40s", "a100"),
    "dcp_module_missing": ("hsx", "h20", "gh4", "l40s"),
    "hot_slot_offset": ("hsx", "h20", "l40s", "a100"),
}
_KIND_COUNTS = {k: 5 for k in FAULT_KINDS} | {k: 5 for k in BENIGN_KINDS}
_KIND_COUNTS |= {"uniform_training": 7, "sync_checkpoint": 6, "straggler_launch": 6}
_TWO_CULPRITS = {"chassis_fan_failure": 1, "dimm_ce_storm": 1, "softnet_irq_collapse": 1}
_TWO_CULPRITS |= {"nvlink_replay_storm": 1}
_BIG_SIZES = (256, 256, 384, 512, 768, 1024, 1024)
_SIZES = (4, 4, 6, 8, 8, 12, 16, 16, 24, 32, 32, 32, 32, 48, 48, 64, 64, 96, 128, 192)
_INTERVALS = (10.0, 15.0, 30.0, 60.0)
ROW_CAP = 5_300_000
_EPOCH = datetime(2026, 4, 6, tzinfo=UTC)


def _node_series(site: Site) -> int:
    c = site.collectors
    n = 5 + 1 + 2 + 2 + 2  # cpu modes, load1, mem x2, disk x2, vmstat x2
    n += 6 * (1 + len(site.data_netdevs))
    n += 3 * ("netstat" in c) + 3 * ("softnet" in c) + 2 * ("edac" in c)
    n += 2 * ("hwmon" in c) + 3 * ("pressure" in c)
    n += len(site.ib) * (len(_IB_COUNTERS) + len(_IB_GAUGES) + len(_ROCE_HW) * ("roce_hw" in c))
    return n


def _dcgm_series(site: Site) -> int:
    return site.n_gpu * len(site.dcgm)


def _estimate_rows(site: Site, n: int, minutes: float, di: float, ni: float) -> float:
    return n * minutes * 60.0 * (_dcgm_series(site) / di + _node_series(site) / ni)


# ----------------------------------------------------------------------------------------------
# Job
# ----------------------------------------------------------------------------------------------


@dataclass
class Job:
    name: str
    kind: str
    nodes: list[str]
    start: datetime
    end: datetime
    culprits: dict[str, datetime]
    dcgm_interval: float
    node_interval: float
    site: str = ""
    spec: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def faulty(self) -> bool:
        return bool(self.culprits)

    @property
    def minutes(self) -> float:
        return (self.end - self.start).total_seconds() / 60.0

    @property
    def raw(self) -> pl.DataFrame:
        return _render(self)


def _hostnames(site: str, n: int, rng) -> list[str]:
    s = SITES[site]
    first = int(rng.integers(0, 40)) * s.rack
    idx = [first + i for i in range(n)]
    if site == "hsx":
        return [f"h100-r{i // s.rack:02d}-n{i % s.rack:02d}" for i in idx]
    if site == "h20":
        return [f"gpu-h20-{i + 1:04d}" for i in idx]
    if site == "l40s":
        return [f"ls{i + 1:03d}.infer.lan" for i in idx]
    if site == "gh4":
        return [f"jpbo-{i // s.rack:03d}-{i % s.rack:02d}" for i in idx]
    return [f"dgx{i + 1:03d}" for i in idx]


# Deterministic scrape grid: each target has its own phase and a small (< 0.25 s) jitter.
_DCGM_SALT, _NODE_SALT = 1, 2


def _phase(rs: int, salt: int, n: int, step: float) -> np.ndarray:
    return np.random.default_rng([rs, 11, salt]).uniform(0.0, step, n)


def _collect_phase(rs: int, n: int, collect: float) -> np.ndarray:
    return np.random.default_rng([rs, 13]).uniform(0.0, collect, n)


def _jitter(k: np.ndarray, n: np.ndarray, salt: int) -> np.ndarray:
    h = (k.astype(np.int64) * 7919 + n.astype(np.int64) * 104729 + salt * 613) * 2654435761
    return ((h % 4294967296) / 4294967296.0) * 0.25


def _grid(rs: int, salt: int, n: int, dur: float, step: float) -> np.ndarray:
    K = int(dur // step) + 2
    k = np.arange(K)[:, None]
    nn = np.arange(n)[None, :]
    return _phase(rs, salt, n, step)[None, :] + k * step + _jitter(k, nn, salt)


def _held(t: np.ndarray, cph: np.ndarray, collect: float) -> np.ndarray:
    """Time of the DCGM collection the exporter serves at scrape time t."""
    return cph + np.floor((t - cph) / collect) * collect


def _first_effect_sample(job_spec: dict, site: Site, n: int, node: int, t0: float, which: str):
    """(seconds, salt, k) of the first scrape of `node` whose evaluated time is >= t0."""
    rs, dur = job_spec["rs"], job_spec["dur"]
    best = None
    for salt in (
        (_DCGM_SALT, _NODE_SALT)
        if which == "both"
        else ((_DCGM_SALT,) if which == "dcgm" else (_NODE_SALT,))
    ):
        step = job_spec["di"] if salt == _DCGM_SALT else job_spec["ni"]
        t = _grid(rs, salt, n, dur, step)[:, node]
        te = _held(t, _collect_phase(rs, n, site.collect_s)[node], site.collect_s)
        te = te if salt == _DCGM_SALT else t
        k = int(np.argmax(te >= t0))
        if best is None or t[k] < best[0]:
            best = (float(t[k]), salt, k)
    return best


_PRIMARY = {
    "xid94_rank_killed": "dcgm",
    "gpu_bus_drop": "dcgm",
    "hca_fatal_reset": "node",
    "chassis_fan_failure": "both",
    "nvlink_replay_storm": "dcgm",
    "pcie_link_degraded": "dcgm",
    "host_unreachable": "both",
    "dimm_ce_storm": "node",
    "tcp_retrans_storm": "node",
    "roce_pfc_misconfig": "node",
    "softnet_irq_collapse": "node",
    "oom_killed_rank": "node",
}


def jobs(seed: int = 0) -> list[Job]:
    rng = np.random.default_rng([seed, 7])
    kinds = [k for k in (*FAULT_KINDS, *BENIGN_KINDS) for _ in range(_KIND_COUNTS[k])]
    order = [kinds[i] for i in rng.permutation(len(kinds))]
    # big jobs go to kinds a big site can host
    big_ok = [
        i
        for i, k in enumerate(order)
        if set(_KIND_SITES.get(k, tuple(SITES))) & {"gh4", "h20", "hsx", "a100"}
        and k not in ("transient_dip",)
    ]
    big_at = dict(
        zip(
            (int(i) for i in rng.choice(big_ok, size=len(_BIG_SIZES), replace=False)),
            _BIG_SIZES,
            strict=True,
        )
    )
    two_left = dict(_TWO_CULPRITS)
    out: list[Job] = []
    t_start = _EPOCH
    for i, kind in enumerate(order):
        allowed = _KIND_SITES.get(kind, tuple(SITES))
        n = big_at.get(i)
        if n is not None:
            cands: list[str] = []
            if n >= 768:
                cands = [x for x in allowed if x == "gh4"]
            if not cands and n >= 512:
                cands = [x for x in allowed if x in ("gh4", "h20")]
            if not cands:
                cands = [x for x in allowed if x != "l40s"]
            site_name = str(rng.choice(cands))
        else:
            site_name = str(rng.choice(allowed))
            n = int(rng.choice(_SIZES))
            if site_name == "l40s":
                n = min(n, 64)
        site = SITES[site_name]
        minutes = float(rng.choice((30, 40, 45, 60, 60, 75, 90, 105, 120)))
        di = float(rng.choice(_INTERVALS, p=(0.25, 0.35, 0.3, 0.1)))
        ni = float(rng.choice(_INTERVALS, p=(0.2, 0.4, 0.3, 0.1)))
        if n > 192:
            di, ni = max(di, 30.0), max(ni, 30.0)
        min_minutes = 40.0 if kind == "oom_killed_rank" else 30.0
        minutes = max(minutes, min_minutes)
        while _estimate_rows(site, n, minutes, di, ni) > ROW_CAP and minutes > min_minutes:
            minutes = max(min_minutes, minutes - 15.0)
        while _estimate_rows(site, n, minutes, di, ni) > ROW_CAP and min(di, ni) < 60:
            if di <= ni:
                di = _INTERVALS[_INTERVALS.index(di) + 1]
            else:
                ni = _INTERVALS[_INTERVALS.index(ni) + 1]
        dur = minutes * 60.0
        rs = int(rng.integers(0, 2**31 - 1))
        warm = float(rng.uniform(150, 420)) if n < 256 else float(rng.uniform(240, 360))
        spec: dict = {"rs": rs, "dur": dur, "di": di, "ni": ni, "site": site_name}
        late: dict[int, float] = {}
        if kind == "straggler_launch":
            for j in rng.choice(n, size=max(1, min(4, n // 8)), replace=False):
                late[int(j)] = float(rng.uniform(120, 420))
            warm = max(warm, max(late.values()) + float(rng.uniform(60, 120)))
        spec["late"] = late
        spec["warm_end"] = warm
        # checkpoints (job-wide, all nodes at once)
        ckpts = []
        if kind == "sync_checkpoint" or (kind not in _HANG_KINDS and rng.random() < 0.35):
            every = float(rng.uniform(480, 900))
            length = float(rng.uniform(60, 180))
            t = warm + every
            while t + length < dur - 60:
                ckpts.append((t, t + length))
                t += every
        spec["ckpts"] = ckpts
        spec["slow"] = []  # job-wide (start, end, factor)
        if kind == "jobwide_throttle":
            a = warm + float(rng.uniform(120, max(180, dur - warm - 1500)))
            b = min(dur - 60, a + float(rng.uniform(480, 1500)))
            spec["slow"].append((a, b, float(rng.uniform(0.55, 0.8))))
        if kind == "seq_len_ramp":
            spec["stages"] = sorted(float(x) for x in rng.uniform(warm + 120, dur - 300, 2))
        if kind == "transient_dip":
            a = warm + float(rng.uniform(60, dur - warm - 400))
            spec["dip"] = (int(rng.integers(n)), a, a + float(rng.uniform(60, 210)))
        if kind == "hot_slot_offset":
            k = int(rng.integers(1, 4))
            spec["hot"] = [int(x) for x in rng.choice(n, size=min(k, n - 1), replace=False)]
        if kind == "cron_maintenance_burst":
            a = warm + float(rng.uniform(60, dur - warm - 300))
            spec["cron"] = (a, a + float(rng.uniform(90, 240)))
        if kind == "dcp_module_missing":
            k = max(1, round(n * rng.uniform(0.2, 0.5)))
            spec["nodcp"] = [int(x) for x in rng.choice(n, size=min(k, n - 1), replace=False)]
        if kind == "sharded_ckpt_writers":
            k = max(1, n // int(rng.choice((4, 8))))
            spec["writers"] = list(range(k))
            every = float(rng.uniform(600, 1200))
            spec["wckpt"] = [
                (t, t + float(rng.uniform(120, 300)))
                for t in np.arange(warm + every, dur - 360, every)
            ]
        if kind == "quiet_counters":
            spec["blips"] = int(rng.integers(2, 6))
        # ---------------------------------------------------------------- faults
        culprits: dict[str, datetime] = {}
        start = t_start + timedelta(minutes=float(rng.uniform(0, 50)))
        start = start.replace(microsecond=0)
        names = _hostnames(site_name, n, rng)
        if kind in FAULT_KINDS:
            hang = kind in _HANG_KINDS
            pre = float(rng.uniform(150, 330)) if kind == "oom_killed_rank" else 0.0
            tail = (13.0 * 60 if hang else 10.0 * 60) + pre + 150.0
            lo, hi = warm + 180.0 + 30.0, dur - tail
            if hi <= lo:
                raise AssertionError(f"window too short for {kind}: {minutes} min")
            n_cul = 1
            t0s = [float(rng.uniform(lo, lo + (hi - lo) * 0.7))]
            if two_left.get(kind, 0) > 0 and n >= 8 and hi - t0s[0] > 240:
                two_left[kind] -= 1
                n_cul = 2
            who = [int(x) for x in rng.choice(n, size=n_cul, replace=False)]
            if n_cul == 2:
                t0s.append(float(rng.uniform(t0s[0] + 120, hi)))
            spec["who"] = who
            spec["t0"] = t0s
            spec["pre"] = pre
            spec["timeout"] = float(rng.choice((600.0, 600.0, 600.0, 1800.0)))
            spec["fault"] = _fault_params(kind, site, rng)
            spec["keep"] = {}
            for c, t0 in zip(who, t0s, strict=True):
                ts, salt, k = _first_effect_sample(spec, site, n, c, t0, _PRIMARY[kind])
                spec["keep"][(salt, c)] = k
                culprits[names[c]] = start + timedelta(milliseconds=round(ts * 1000))
            if hang:
                spec["hang_at"] = t0s[0] + pre + (3.0 if kind != "host_unreachable" else 0.0)
                spec["crash_at"] = spec["hang_at"] + spec["timeout"]
        name = f"v7-{i:03d}-{site_name}-{kind}"
        out.append(
            Job(
                name=name,
                kind=kind,
                nodes=names,
                start=start,
                end=start + timedelta(seconds=dur),
                culprits=culprits,
                dcgm_interval=di,
                node_interval=ni,
                site=site_name,
                spec=spec,
            )
        )
        t_start = start + timedelta(seconds=dur) + timedelta(minutes=float(rng.uniform(5, 90)))
    return out


def _fault_params(kind: str, site: Site, rng) -> dict:
    g = int(rng.integers(site.n_gpu))
    p: dict = {"gpu": g}
    if kind == "xid94_rank_killed":
        p["dbe"] = int(rng.integers(1, 3))
    elif kind == "hca_fatal_reset":
        p["port"] = int(rng.integers(len(site.ib)))
        p["gap"] = float(rng.uniform(30, 120))
        p["init"] = float(rng.uniform(20, 90))
    elif kind == "chassis_fan_failure":
        p["rpm"] = float(rng.uniform(0, 1500))
        p["rise"] = float(rng.uniform(14, 22))
        p["ramp"] = float(rng.uniform(150, 300))
        p["hot"] = [
            int(x) for x in rng.choice(site.n_gpu, size=int(rng.integers(2, 5)), replace=False)
        ]
        p["clk"] = float(rng.uniform(0.62, 0.78))
    elif kind == "nvlink_replay_storm":
        p["crc"] = float(rng.uniform(40, 800))
        p["bw"] = float(rng.uniform(0.35, 0.6))
        p["pace"] = float(rng.uniform(0.62, 0.85))
    elif kind == "pcie_link_degraded":
        p["width"] = int(rng.choice((8, 4))) if rng.random() < 0.6 else 16
        p["gen"] = int(rng.choice((1, 2, 3))) if p["width"] == 16 else site.pcie_gen
        p["replays"] = float(rng.uniform(60, 400))
        lo = 0.55 if site.name == "l40s" else 0.78
        p["pace"] = float(rng.uniform(lo, lo + 0.17))
    elif kind == "dimm_ce_storm":
        p["ce"] = float(rng.uniform(15, 300))
        p["sys"] = float(rng.uniform(2, 6))
        p["pace"] = float(rng.uniform(0.86, 0.95))
    elif kind == "tcp_retrans_storm":
        p["dev"] = int(rng.integers(len(site.data_netdevs)))
        p["errs"] = float(rng.uniform(20, 400))
        p["retx"] = float(rng.uniform(20, 60))
        p["pace"] = float(rng.uniform(0.5, 0.8))
    elif kind == "roce_pfc_misconfig":
        p["port"] = int(rng.integers(len(site.ib)))
        p["oos"] = float(rng.uniform(2e3, 3e4))
        p["bw"] = float(rng.uniform(0.3, 0.6))
        p["pace"] = float(rng.uniform(0.55, 0.82))
    elif kind == "softnet_irq_collapse":
        p["squeeze"] = float(rng.uniform(50, 500))
        p["drop"] = float(rng.uniform(100, 3000))
        lo = 0.6 if site.name == "l40s" else 0.85
        p["pace"] = float(rng.uniform(lo, lo + 0.12))
    elif kind == "oom_killed_rank":
        p["kills"] = int(rng.integers(1, 3))
    return p


def table(job_list: list[Job]) -> pl.DataFrame:
    rows = []
    for j in job_list:
        ons = sorted(j.culprits.values())
        rows.append(
            {
                "name": j.name,
                "kind": j.kind,
                "site": j.site,
                "faulty": j.faulty,
                "n_nodes": len(j.nodes),
                "nodes": list(j.nodes),
                "start": j.start,
                "end": j.end,
                "minutes": j.minutes,
                "dcgm_interval": j.dcgm_interval,
                "node_interval": j.node_interval,
                "culprits": sorted(j.culprits),
                "onsets": [j.culprits[c] for c in sorted(j.culprits)],
                "first_onset": ons[0] if ons else None,
                "onset_min": (ons[0] - j.start).total_seconds() / 60 if ons else None,
            }
        )
    return pl.DataFrame(
        rows,
        schema_overrides={
            "start": pl.Datetime("ms", "UTC"),
            "end": pl.Datetime("ms", "UTC"),
            "first_onset": pl.Datetime("ms", "UTC"),
            "onsets": pl.List(pl.Datetime("ms", "UTC")),
        },
    )


# ----------------------------------------------------------------------------------------------
# aggregate
# ----------------------------------------------------------------------------------------------

_AGGS = ("min", "max", "sum", "avg")


def aggregate(raw: pl.DataFrame, agg_for: Callable[[str], str]) -> pl.DataFrame:
    metrics = raw.get_column("metric").unique().to_list()
    mapping = {}
    for m in metrics:
        a = "sum" if is_counter(m) else agg_for(m)
        if a not in _AGGS:
            raise ValueError(f"aggregation {a!r} for {m} is not one of {_AGGS}")
        mapping[m] = a
    g = raw.group_by(["time", "node", "metric"]).agg(
        pl.col("value").min().alias("min"),
        pl.col("value").max().alias("max"),
        pl.col("value").sum().alias("sum"),
        pl.col("value").mean().alias("avg"),
    )
    choice = pl.col("metric").replace_strict(mapping, return_dtype=pl.String)
    val = (
        pl.when(choice == "min")
        .then(pl.col("min"))
        .when(choice == "max")
        .then(pl.col("max"))
        .when(choice == "sum")
        .then(pl.col("sum"))
        .otherwise(pl.col("avg"))
    )
    return g.select("time", "node", "metric", val.alias("value")).sort("time", "node", "metric")


# ----------------------------------------------------------------------------------------------
# Rendering
# ----------------------------------------------------------------------------------------------

_SCHEMA = {
    "time": pl.Datetime("ms", "UTC"),
    "node": pl.String,
    "metric": pl.String,
    "device": pl.String,
    "value": pl.Float64,
}


class _Rows:
    """Collects flattened samples as integer codes; builds the long table once."""

    def __init__(self, nodes: list[str], t0_ms: int):
        self.nodes = nodes
        self.t0_ms = t0_ms
        self.metrics: list[str] = []
        self.devices: list[str] = []
        self.parts: list[tuple] = []

    def _code(self, lst: list[str], s: str) -> int:
        try:
            return lst.index(s)
        except ValueError:
            lst.append(s)
            return len(lst) - 1

    def add(self, metric: str, devices, t_ms: np.ndarray, vals, mask: np.ndarray):
        """t_ms: (T, N) int; vals, mask: (T, N, len(devices)) (vals may broadcast)."""
        vals = np.broadcast_to(np.asarray(vals, dtype=np.float64), mask.shape)
        m = self._code(self.metrics, metric)
        nidx = np.arange(t_ms.shape[1], dtype=np.int32)
        for j, dev in enumerate(devices):
            mk = mask[:, :, j]
            if not mk.any():
                continue
            tt = t_ms[mk]
            nn = np.broadcast_to(nidx, mk.shape)[mk]
            d = self._code(self.devices, dev)
            self.parts.append((tt, nn, m, d, vals[:, :, j][mk]))

    def frame(self) -> pl.DataFrame:
        if not self.parts:
            return pl.DataFrame(schema=_SCHEMA)
        sizes = [len(p[0]) for p in self.parts]
        t = np.concatenate([p[0] for p in self.parts])
        n = np.concatenate([p[1] for p in self.parts])
        m = np.repeat(np.array([p[2] for p in self.parts], dtype=np.int32), sizes)
        d = np.repeat(np.array([p[3] for p in self.parts], dtype=np.int32), sizes)
        v = np.concatenate([p[4] for p in self.parts])
        self.parts = []
        return pl.DataFrame(
            {
                "time": pl.Series(t + self.t0_ms, dtype=pl.Int64).cast(pl.Datetime("ms", "UTC")),
                "node": pl.Series(self.nodes, dtype=pl.String).gather(n),
                "metric": pl.Series(self.metrics, dtype=pl.String).gather(m),
                "device": pl.Series(self.devices, dtype=pl.String).gather(d),
                "value": v,
            }
        )


def _cum(rate: np.ndarray, t: np.ndarray, base) -> np.ndarray:
    """Cumulative counter along axis 0 from a rate and (T, N) sample times."""
    dt = np.diff(t, axis=0, prepend=t[:1])
    dt = np.clip(dt, 0.0, None)
    if rate.ndim == 3:
        dt = dt[:, :, None]
    return base + np.cumsum(rate * dt, axis=0)


def _poisson_cum(rng, rate: np.ndarray, t: np.ndarray, base) -> np.ndarray:
    dt = np.clip(np.diff(t, axis=0, prepend=t[:1]), 0.0, None)
    if rate.ndim == 3:
        dt = dt[:, :, None]
    lam = np.clip(rate * dt, 0.0, None)
    return base + np.cumsum(rng.poisson(lam), axis=0).astype(np.float64)


def _smooth(x: np.ndarray, a: float, b: float) -> np.ndarray:
    """0 before a, linear ramp to 1 at b."""
    return np.clip((x - a) / np.maximum(np.asarray(b) - a, 1e-9), 0.0, 1.0)


class _Timeline:
    """Job-wide phases as a function of time (seconds since job start)."""

    def __init__(self, job: Job):
        s = job.spec
        self.s = s
        self.kind = job.kind
        self.n = len(job.nodes)
        self.warm = s["warm_end"]
        self.late = np.zeros(self.n)
        for j, v in s["late"].items():
            self.late[j] = v
        self.hang_at = s.get("hang_at", np.inf)
        self.crash_at = s.get("crash_at", np.inf)

    def state(self, t: np.ndarray) -> dict[str, np.ndarray]:
        s = self.s
        started = t >= self.late[None, :]
        init = started & (t < self.warm)
        train = t >= self.warm
        ckpt = np.zeros_like(train)
        for a, b in s["ckpts"]:
            ckpt |= (t >= a) & (t < b)
        hang = (t >= self.hang_at) & (t < self.crash_at)
        dead = t >= self.crash_at
        train &= ~(hang | dead)
        ckpt &= train
        pace = np.ones_like(t)
        for a, b, f in s["slow"]:
            pace = np.where((t >= a) & (t < b), f, pace)
        load = np.ones_like(t)  # work per step (seq_len_ramp)
        if "stages" in s:
            a, b = s["stages"]
            load = np.where(t < a, 0.72, np.where(t < b, 0.86, 1.0))
        if self.kind in _SLOW_KINDS:
            f = s["fault"].get("pace", 1.0)
            if self.kind == "chassis_fan_failure":
                f = 0.35 + 0.65 * s["fault"]["clk"]
                for t0 in s["t0"]:
                    r = _smooth(t, t0 + 0.5 * s["fault"]["ramp"], t0 + s["fault"]["ramp"])
                    pace = pace * (1 - r * (1 - f))
            else:
                hit = np.zeros(t.shape, dtype=bool)
                for t0 in s["t0"]:
                    hit |= t >= t0
                pace = np.where(hit, pace * f, pace)
        ramp = _smooth(t, self.late[None, :], self.warm)
        return {
            "init": init,
            "train": train,
            "ckpt": ckpt,
            "hang": hang,
            "dead": dead,
            "pace": pace,
            "load": load,
            "ramp": ramp,
            "up": started & ~dead,
        }


def _render(job: Job) -> pl.DataFrame:
    site = SITES[job.site]
    s = job.spec
    rng = np.random.default_rng([s["rs"], 7])
    tl = _Timeline(job)
    t0_ms = int(job.start.timestamp() * 1000)
    rows = _Rows(job.nodes, t0_ms)
    static = _static(job, site, rng)
    _render_dcgm(job, site, tl, rng, rows, static)
    _render_node(job, site, tl, rng, rows, static)
    return rows.frame()


def _static(job: Job, site: Site, rng) -> dict:
    """Per-node / per-GPU constants: spread, offsets and decoys (all jobs)."""
    n, G = len(job.nodes), site.n_gpu
    st = {
        "speed": 1 + rng.normal(0, 0.012, (n, G)),
        "toff": rng.normal(0, 2.5, (n, G)) + rng.normal(0, 1.5, (n, 1)),
        "poff": rng.normal(0, 0.02, (n, G)),
        "fbfrac": 0.78 + rng.normal(0, 0.02, (n, 1)) + rng.normal(0, 0.004, (n, G)),
        # decoys
        "xid": np.where(rng.random((n, G)) < 0.03, rng.choice([13.0, 31.0, 43.0], (n, G)), 0.0),
        "crow": np.where(rng.random((n, G)) < 0.05, rng.integers(1, 9, (n, G)), 0).astype(float),
        "urow": np.where(rng.random((n, G)) < 0.005, 1.0, 0.0),
        "replay": np.where(rng.random((n, G)) < 0.15, rng.integers(1, 500, (n, G)), 0).astype(
            float
        ),
        "sbe": np.where(rng.random((n, G)) < 0.04, rng.integers(1, 60, (n, G)), 0).astype(float),
        "sbe_trickle": np.where(rng.random((n, G)) < 0.02, 1 / 600.0, 0.0),
        "nvl_hist": np.where(rng.random((n, G)) < 0.04, rng.integers(1, 40, (n, G)), 0).astype(
            float
        ),
        "energy0": rng.uniform(5e11, 5e13, (n, G)),
        "edac": np.where(rng.random(n) < 0.08, rng.integers(1, 400, n), 0).astype(float),
        "edac_trickle": np.where(rng.random(n) < 0.02, 1 / 3600.0, 0.0),
        "oom": np.where(rng.random(n) < 0.04, rng.integers(1, 4, n), 0).astype(float),
        "carrier": rng.integers(2, 7, n).astype(float),
        "fan": rng.normal(0, 400, n),
        "cputemp": rng.normal(0, 3, n),
        "uptime": rng.uniform(2, 90, n) * 86400,
    }
    if "hot" in job.spec:
        for j in job.spec["hot"]:
            st["toff"][j] += rng.uniform(5, 9)
            st["poff"][j] += 0.02
            st["fan"][j] += 1500
    nib = max(1, len(site.ib))
    st["ib_down"] = np.where(rng.random((n, nib)) < 0.1, rng.integers(1, 5, (n, nib)), 0)
    st["ib_rec"] = np.where(rng.random((n, nib)) < 0.1, rng.integers(1, 21, (n, nib)), 0)
    st["ib_err"] = np.where(rng.random((n, nib)) < 0.1, rng.integers(1, 200, (n, nib)), 0)
    return st


def _lost(rng, shape, keep: dict, salt: int, p: float = 0.003) -> np.ndarray:
    lost = rng.random(shape) < p
    for (sl, c), k in keep.items():
        if sl == salt and k < shape[0]:
            lost[k, c] = False
    return lost


def _after(t: np.ndarray, job: Job, which: int = 0) -> np.ndarray:
    """(T, N) bool: culprit `which` is past its physical onset (False for non-culprits)."""
    out = np.zeros(t.shape, dtype=bool)
    if "who" not in job.spec or which >= len(job.spec["who"]):
        return out
    c = job.spec["who"][which]
    out[:, c] = t[:, c] >= job.spec["t0"][which]
    return out


def _render_dcgm(job: Job, site: Site, tl: _Timeline, rng, rows: _Rows, st: dict):
    s = job.spec
    kind = job.kind
    n, G = len(job.nodes), site.n_gpu
    dur = s["dur"]
    t = _grid(s["rs"], _DCGM_SALT, n, dur, s["di"])
    valid = t < dur
    valid &= ~_lost(rng, t.shape, s.get("keep", {}), _DCGM_SALT)
    te = _held(t, _collect_phase(s["rs"], n, site.collect_s)[None, :], site.collect_s)
    te = np.maximum(te, -site.collect_s)
    T = t.shape[0]
    ph = tl.state(te)
    x = {k: v[:, :, None] for k, v in ph.items()}  # broadcast over GPUs
    present = np.broadcast_to(valid[:, :, None], (T, n, G)).copy()

    def noise(scale, shape=(T, n, G)):
        return rng.normal(0.0, scale, shape)

    tens0 = site.tensor0 * st["speed"][None] * x["load"]
    busy_train = x["train"] & ~x["ckpt"]
    tensor = np.where(busy_train, tens0 * x["pace"], 0.0)
    tensor = np.where(x["init"], 0.03 * x["ramp"], tensor)
    util = np.where(busy_train, 98.7 + noise(0.8), 0.0)
    util = np.where(x["ckpt"], 4.0 + noise(2.0), util)
    util = np.where(x["init"], 35.0 * x["ramp"] + noise(6.0), util)
    util = np.where(x["hang"], 100.0, util)
    dram0 = 0.38 * x["load"]
    dram = np.where(busy_train, dram0 * x["pace"] * st["speed"][None], 0.0)
    span = site.tdp - site.idle_w
    frac = np.where(busy_train, 0.22 + 0.72 * tensor / site.tensor0, 0.0)
    frac = np.where(x["ckpt"], 0.08, frac)
    frac = np.where(x["init"], 0.1 * x["ramp"], frac)
    frac = np.where(x["hang"], 0.18, frac)
    power = site.idle_w + span * frac * (1 + st["poff"][None]) + noise(span * 0.012)
    power = np.clip(power, site.idle_w * 0.9, site.tdp)
    active = x["init"] | x["train"] | x["hang"]
    sm = np.where(active, site.sm_max - 140.0 * (power / site.tdp) ** 3 + noise(6.0), site.sm_idle)
    memclk = np.where(active, site.mem_clk, site.mem_clk_idle) * np.ones((T, n, G))
    fb = site.fb_mib * st["fbfrac"][None]
    fb_used = np.where(x["train"] | x["hang"], fb * (0.94 + 0.06 * x["load"]), 0.0)
    fb_used = np.where(x["init"], fb * x["ramp"] * 0.9, fb_used)
    fb_used = np.where(fb_used > 0, fb_used + noise(30.0), 4.0)
    pcie_scale = 3.0 if site.name == "l40s" else 1.0
    ptx = np.where(busy_train, 1.6e9 * pcie_scale * x["pace"], 0.0)
    ptx = np.where(x["ckpt"], 6.0e9, ptx)
    ptx = np.where(x["init"], 1.5e9 * x["ramp"], ptx)
    prx = np.where(busy_train, 2.2e9 * pcie_scale * x["pace"], 0.0)
    prx = np.where(x["init"], 4.0e9 * x["ramp"], prx)
    ptx = np.clip(ptx * (1 + noise(0.05)), 0, None)
    prx = np.clip(prx * (1 + noise(0.05)), 0, None)
    nvl = np.where(busy_train, site.nvlink * x["pace"] * (1 + noise(0.04)), 0.0)
    temp_extra = np.zeros((T, n, G))
    reasons = np.where(active, 0.0, 1.0) * np.ones((T, n, G))
    if site.tdp >= 680:  # SW power cap flicker under load (decoy)
        reasons = np.where(busy_train & (power > 0.965 * site.tdp), 4.0, reasons)
    thermal_on = np.zeros((T, n, G), dtype=bool)
    replay_rate = np.zeros((T, n, G))
    link_w = np.full((T, n, G), 16.0)
    link_g = np.where(active, float(site.pcie_gen), 1.0) * np.ones((T, n, G))  # idle: gen 1
    xid = np.broadcast_to(st["xid"][None], (T, n, G)).copy()
    dbe_add = np.zeros((T, n, G))
    nvl_err_rate = np.zeros((T, n, G))
    sbe_rate = np.broadcast_to(st["sbe_trickle"][None], (T, n, G)).copy()
    replay_rate += np.where(rng.random((1, n, G)) < 0.01, 1 / 900.0, 0.0)  # rare decoy trickle

    # ---- healthy kinds with a GPU-side signature
    if kind == "transient_dip":
        j, a, b = s["dip"]
        w = (te[:, j] >= a) & (te[:, j] < b)
        util[w, j] = 55.0 + rng.normal(0, 8, (w.sum(), G))
        tensor[w, j] *= 0.35
        power[w, j] = site.idle_w + 0.3 * span
        others = np.ones(n, dtype=bool)
        others[j] = False
        ww = (te >= a) & (te < b) & others[None, :]
        power[ww] = np.minimum(power[ww], site.idle_w + 0.35 * span)
        tensor[ww] *= 0.4
    if kind == "quiet_counters":
        for _ in range(s["blips"]):
            j, g = int(rng.integers(n)), int(rng.integers(G))
            k = int(rng.integers(T))
            replay_rate[k, j, g] += 1.0 / max(1e-3, s["di"])
    if kind == "dcp_module_missing":
        st["nodcp"] = s["nodcp"]

    # ---- faults
    f = s.get("fault", {})
    g0 = f.get("gpu", 0)
    if kind in _HANG_KINDS:
        c = s["who"][0]
        fail = s["hang_at"] - 3.0 if kind != "host_unreachable" else s["hang_at"]
        gone = te[:, c] >= fail + 2.0  # torchrun tears down the node's other workers
        for arr, v in ((util, 0.0), (tensor, 0.0), (dram, 0.0), (nvl, 0.0), (ptx, 0.0)):
            arr[gone, c] = v
        prx[gone, c] = 0.0
        power[gone, c] = site.idle_w + noise(1.0, (gone.sum(), G))
        fb_used[gone, c] = 4.0
        sm[gone, c] = site.sm_idle
        if kind == "xid94_rank_killed":
            hit = te[:, c] >= s["t0"][0]
            xid[hit, c, g0] = 94.0
            dbe_add[hit, c, g0] = f["dbe"]
        if kind == "gpu_bus_drop":
            present[te[:, c] >= s["t0"][0], c, g0] = False
        if kind == "host_unreachable":
            present[te[:, c] >= s["t0"][0], c, :] = False
    if kind == "chassis_fan_failure":
        for w, t0 in enumerate(s["t0"]):
            c = s["who"][w]
            r = _smooth(te[:, c], t0, t0 + f["ramp"])
            temp_extra[:, c, :] += r[:, None] * f["rise"] * rng.uniform(0.75, 1.0, G)[None]
            hot = np.zeros(G, dtype=bool)
            hot[f["hot"]] = True
            thr = _smooth(te[:, c], t0 + 0.5 * f["ramp"], t0 + f["ramp"])
            on = (thr > 0)[:, None] & hot[None, :] & busy_train[:, c, :]
            thermal_on[:, c, :] |= on
            sm[:, c, :] = np.where(
                on, sm[:, c, :] * (1 - thr[:, None] * (1 - f["clk"])), sm[:, c, :]
            )
            # the throttled GPUs are the bottleneck: busy all the time
            tensor[:, c, :] = np.where(on, tens0[:, c, :] * 0.97, tensor[:, c, :])
            reasons[:, c, :] = np.where(on, 32.0, reasons[:, c, :])
    if kind == "nvlink_replay_storm":
        for w, t0 in enumerate(s["t0"]):
            c = s["who"][w]
            gg = g0 if w == 0 else (g0 + 3) % G
            hit = te[:, c] >= t0
            nvl_err_rate[hit, c, gg] = f["crc"] * rng.uniform(0.6, 1.4, hit.sum())
            nvl[hit, c, gg] *= f["bw"]
    if kind == "pcie_link_degraded":
        c = s["who"][0]
        t0 = s["t0"][0]
        burst = (te[:, c] >= t0) & (te[:, c] < t0 + 60)
        replay_rate[burst, c, g0] += f["replays"] / 60.0
        replay_rate[te[:, c] >= t0 + 60, c, g0] += f["replays"] / 3000.0
        hit = te[:, c] >= t0
        link_w[hit, c, g0] = f["width"]
        link_g[hit, c, g0] = f["gen"]
        cap = (f["width"] / 16.0) * (2.0 ** (f["gen"] - site.pcie_gen))
        ptx[hit, c, g0] = np.minimum(ptx[hit, c, g0], 2.5e10 * cap)
        prx[hit, c, g0] = np.minimum(prx[hit, c, g0], 2.5e10 * cap)
        tensor[hit, c, g0] = np.maximum(tensor[hit, c, g0], tens0[hit, c, g0] * 0.95)
    if kind in ("dimm_ce_storm", "softnet_irq_collapse", "tcp_retrans_storm", "roce_pfc_misconfig"):
        for w in range(len(s["t0"])):
            c = s["who"][w]
            hit = (te[:, c] >= s["t0"][w]) & busy_train[:, c, 0]
            util[hit, c] -= rng.uniform(3, 9)  # kernels launched late: gaps on the slow host

    temp = site.amb + st["toff"][None] + 46.0 * (power - site.idle_w) / span + temp_extra
    temp = np.round(temp + noise(0.4))
    # thermal slowdown lowers power on the throttled GPUs
    power = np.where(thermal_on, power * 0.85, power)
    memtemp = np.round(temp + 5.0 + 4.0 * dram / 0.38 + noise(0.4))
    dt = np.clip(np.diff(te, axis=0, prepend=te[:1]), 0.0, None)[:, :, None]
    energy = st["energy0"][None] + np.cumsum(power * dt * 1000.0, axis=0)
    pviol = np.cumsum((reasons == 4.0) * dt * site.violation_unit, axis=0)
    tviol = np.cumsum(thermal_on * dt * site.violation_unit, axis=0)
    replay = _poisson_cum(rng, replay_rate, te, st["replay"][None])
    sbe = _poisson_cum(rng, sbe_rate, te, st["sbe"][None])
    nvl_err = _poisson_cum(rng, nvl_err_rate, te, st["nvl_hist"][None])
    util = np.clip(np.round(util), 0, 100)
    tensor = np.clip(tensor + np.where(tensor > 0, noise(0.006), 0.0), 0, 1)
    dram = np.clip(dram + np.where(dram > 0, noise(0.006), 0.0), 0, 1)
    gr = np.clip(np.where(util > 0, util / 100 * 0.97 + noise(0.004), 0.0), 0, 1)
    sm = np.round(np.clip(sm, site.sm_idle, site.sm_max) / 15.0) * 15.0
    fb_used = np.round(np.clip(fb_used, 0, site.fb_mib - site.fb_reserved))
    fb_free = site.fb_mib - site.fb_reserved - fb_used

    vals = {
        D + "SM_CLOCK": sm,
        D + "MEM_CLOCK": memclk,
        D + "MEMORY_TEMP": memtemp,
        D + "GPU_TEMP": temp,
        D + "POWER_USAGE": np.round(power, 3),
        D + "TOTAL_ENERGY_CONSUMPTION": np.floor(energy),
        D + "PCIE_REPLAY_COUNTER": replay,
        D + "GPU_UTIL": util,
        D + "MEM_COPY_UTIL": np.clip(np.round(dram * 100 * 0.9), 0, 100),
        D + "ENC_UTIL": 0.0,
        D + "DEC_UTIL": 0.0,
        D + "XID_ERRORS": xid,
        D + "FB_FREE": fb_free,
        D + "FB_USED": fb_used,
        D + "FB_RESERVED": site.fb_reserved,
        D + "NVLINK_BANDWIDTH_TOTAL": np.round(nvl),
        D + "UNCORRECTABLE_REMAPPED_ROWS": st["urow"][None],
        D + "CORRECTABLE_REMAPPED_ROWS": st["crow"][None],
        D + "ROW_REMAP_FAILURE": 0.0,
        D + "PCIE_TX_THROUGHPUT": np.round(ptx / 1024.0),
        D + "PCIE_RX_THROUGHPUT": np.round(prx / 1024.0),
        P + "GR_ENGINE_ACTIVE": gr,
        P + "PIPE_TENSOR_ACTIVE": tensor,
        P + "DRAM_ACTIVE": dram,
        P + "PCIE_TX_BYTES": np.round(ptx),
        P + "PCIE_RX_BYTES": np.round(prx),
        D + "CLOCK_THROTTLE_REASONS": np.where(thermal_on, 32.0, reasons),
        D + "CLOCKS_EVENT_REASONS": np.where(thermal_on, 32.0, reasons),
        D + "POWER_VIOLATION": np.floor(pviol),
        D + "THERMAL_VIOLATION": np.floor(tviol),
        D + "NVLINK_CRC_DATA_ERROR_COUNT_TOTAL": nvl_err,
        D + "NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": nvl_err,
        D + "NVLINK_REPLAY_ERROR_COUNT_TOTAL": np.floor(nvl_err * 0.21),
        D + "NVLINK_RECOVERY_ERROR_COUNT_TOTAL": np.floor(nvl_err * 0.004),
        D + "ECC_SBE_VOL_TOTAL": sbe,
        D + "ECC_DBE_VOL_TOTAL": dbe_add,
        D + "PCIE_LINK_GEN": link_g,
        D + "PCIE_LINK_WIDTH": link_w,
    }
    t_ms = np.round(t * 1000).astype(np.int64)
    devs = [str(g) for g in range(G)]
    nodcp = np.zeros(n, dtype=bool)
    nodcp[s.get("nodcp", [])] = True
    for m in site.dcgm:
        mask = present
        if m.startswith(P) and nodcp.any():
            mask = present & ~nodcp[None, :, None]
        rows.add(m, devs, t_ms, vals[m], mask)


def _render_node(job: Job, site: Site, tl: _Timeline, rng, rows: _Rows, st: dict):
    s = job.spec
    kind = job.kind
    c_ = site.collectors
    n = len(job.nodes)
    dur = s["dur"]
    f = s.get("fault", {})
    t = _grid(s["rs"], _NODE_SALT, n, dur, s["ni"])
    T = t.shape[0]
    valid = (t < dur) & ~_lost(rng, t.shape, s.get("keep", {}), _NODE_SALT)
    ph = tl.state(t)
    train = ph["train"] & ~ph["ckpt"]
    act = np.where(train, 1.0, 0.0) + np.where(ph["init"], 0.5 * ph["ramp"], 0.0)
    act = act + np.where(ph["ckpt"] | ph["hang"], 0.15, 0.0)
    pace = ph["pace"] * ph["load"]
    present = valid.copy()
    ncpu = site.ncpu

    def noise(scale, shape=(T, n)):
        return rng.normal(0.0, scale, shape)

    user = ncpu * (0.03 + 0.09 * act) + noise(0.5)
    system = ncpu * (0.008 + 0.01 * act) + noise(0.2)
    iowait = np.where(ph["ckpt"], ncpu * 0.02, ncpu * 0.001) + noise(0.05)
    softirq = ncpu * (0.001 + 0.003 * act) + noise(0.05)
    load1 = 3.0 + 30.0 * act + noise(1.5)
    memtot = site.mem_gib * 2**30
    avail = memtot * (0.80 - 0.22 * act - 0.05 * ph["up"]) * (1 + noise(0.003))
    fe_rx = 2.5e8 * act * pace + 2e6
    fe_tx = 3e7 * act + 1e6 + np.where(ph["ckpt"], 2.5e9, 0.0)
    disk_r = 1.5e8 * act * pace + 1e5
    disk_w = 3e6 + np.where(ph["ckpt"], 1.2e9, 0.0)
    tcp_data = np.zeros((T, n))  # bytes/s of NCCL-over-TCP traffic (l40s)
    if site.name == "l40s":
        tcp_data = 4.5e9 * pace * np.where(train, 1.0, 0.0)
    retx_factor = np.ones((T, n))
    rx_err_rate = np.zeros((T, n, max(1, len(site.data_netdevs))))
    rx_drop_rate = np.zeros((T, n))
    squeeze = np.full((T, n), 0.02)
    sn_drop = np.zeros((T, n))
    edac_rate = np.broadcast_to(st["edac_trickle"][None], (T, n)).copy()
    fan = 7000.0 + 4500.0 * np.clip(act, 0, 1) * pace + st["fan"][None] + noise(60)
    cput = 42.0 + 18.0 * np.clip(act, 0, 1) + st["cputemp"][None] + noise(0.7)
    psi_cpu = 0.02 + 0.03 * act
    psi_mem = np.zeros((T, n))
    psi_io = 0.002 + np.where(ph["ckpt"], 0.3, 0.0)
    majf = 2.0 + noise(0.3)
    oom_add = np.zeros((T, n))
    ib_pres = np.broadcast_to(present[:, :, None], (T, n, len(site.ib))).copy()
    nib = len(site.ib)
    ib_bw = np.where(train, site.ib_rate * 0.32 * ph["pace"], 0.0)[:, :, None] * np.ones(nib)
    ib_bw = ib_bw * (1 + noise(0.04, (T, n, nib)))
    ib_reset_at = np.full((n, nib), -np.inf)
    ib_state = np.full((T, n, nib), 4.0)
    oos_rate = np.full((T, n, nib), 0.02)
    seq_rate = np.full((T, n, nib), 0.01)
    net_up = np.ones((T, n, 1 + len(site.data_netdevs)))
    carrier_add = np.zeros((T, n, 1 + len(site.data_netdevs)))

    # ---- healthy signatures on the host side
    if kind == "cron_maintenance_burst":
        a, b = s["cron"]
        w = (t >= a) & (t < b)
        user = np.where(w, user + rng.uniform(2, 4, (1, n)), user)
        system = np.where(w, system + 1.5, system)
        disk_r = np.where(w, disk_r + rng.uniform(2e8, 5e8, (1, n)), disk_r)
        load1 = np.where(w, load1 + 3.0, load1)
    if kind == "sharded_ckpt_writers":
        wr = np.zeros(n, dtype=bool)
        wr[s["writers"]] = True
        for a, b in s["wckpt"]:
            w = (t >= a) & (t < b) & wr[None, :]
            fe_tx = np.where(w, fe_tx + rng.uniform(2e9, 4.5e9), fe_tx)
            system = np.where(w, system + 3.0, system)
            avail = np.where(w, avail - memtot * 0.12, avail)
    if kind == "transient_dip":
        j, a, b = s["dip"]
        w = (t[:, j] >= a) & (t[:, j] < b)
        user[w, j] += ncpu * 0.1
        load1[w, j] += 20.0
    if kind == "quiet_counters":
        for _ in range(s["blips"]):
            j, k = int(rng.integers(n)), int(rng.integers(T))
            edac_rate[k, j] += 1.0 / max(s["ni"], 1.0)

    # ---- faults
    who = s.get("who", [])
    if kind in _HANG_KINDS:
        c = who[0]
        fail = s["hang_at"] - (3.0 if kind != "host_unreachable" else 0.0)
        gone = t[:, c] >= fail + 2.0
        user[:, c] = np.where(gone, ncpu * 0.02, user[:, c])
        load1[:, c] = np.where(gone, 2.0, load1[:, c])
        ib_bw[gone, c, :] = 0.0
        fe_rx[:, c] = np.where(gone, 1e6, fe_rx[:, c])
    if kind == "host_unreachable":
        c = who[0]
        present[t[:, c] >= s["t0"][0], c] = False
        ib_pres[t[:, c] >= s["t0"][0], c, :] = False
    if kind == "hca_fatal_reset":
        c, p = who[0], f["port"]
        t0 = s["t0"][0]
        back = t0 + f["gap"]
        ib_pres[(t[:, c] >= t0) & (t[:, c] < back), c, p] = False
        ib_reset_at[c, p] = back
        ib_state[(t[:, c] >= back) & (t[:, c] < back + f["init"]), c, p] = 2.0
        if site.data_netdevs:
            d = 1 + p
            net_up[(t[:, c] >= t0) & (t[:, c] < back + 5), c, d] = 0.0
            carrier_add[t[:, c] >= t0, c, d] += 1
            carrier_add[t[:, c] >= back + 5, c, d] += 1
    if kind == "oom_killed_rank":
        c = who[0]
        t0 = s["t0"][0]
        kill = s["hang_at"] - 3.0
        r = _smooth(t[:, c], t0, kill)
        avail[:, c] = np.where(
            t[:, c] < kill, avail[:, c] * (1 - r) + memtot * 0.008 * r, memtot * 0.7
        )
        squeeze_pre = (t[:, c] >= kill - 60) & (t[:, c] < kill)
        majf[:, c] = np.where(squeeze_pre, 3000.0 + noise(200, (T,)), majf[:, c])
        psi_mem[:, c] = np.where(r > 0.6, 0.6 * r, 0.0) * (t[:, c] < kill)
        system[:, c] = np.where(r > 0.7, system[:, c] + 8.0, system[:, c])
        oom_add[t[:, c] >= kill, c] = f["kills"]
    if kind == "chassis_fan_failure":
        for w, t0 in enumerate(s["t0"]):
            c = who[w]
            hit = t[:, c] >= t0
            fan[hit, c] = f["rpm"] + noise(40, (hit.sum(),))
            cput[:, c] += 13.0 * _smooth(t[:, c], t0, t0 + f["ramp"])
    if kind == "dimm_ce_storm":
        for w, t0 in enumerate(s["t0"]):
            c = who[w]
            hit = t[:, c] >= t0
            edac_rate[hit, c] += f["ce"] * rng.uniform(0.5, 1.5, hit.sum())
            system[hit, c] += f["sys"]
            load1[hit, c] += f["sys"]
    if kind == "softnet_irq_collapse":
        for w, t0 in enumerate(s["t0"]):
            c = who[w]
            hit = t[:, c] >= t0
            softirq[hit, c] = 0.97 + noise(0.02, (hit.sum(),))
            squeeze[hit, c] = f["squeeze"] * rng.uniform(0.6, 1.4, hit.sum())
            sn_drop[hit, c] = f["drop"] * rng.uniform(0.5, 1.5, hit.sum())
            rx_drop_rate[hit, c] = f["drop"] * 0.3
            psi_cpu[hit, c] = psi_cpu[hit, c] + 0.4
            retx_factor[hit, c] = 8.0
    if kind == "tcp_retrans_storm":
        c = who[0]
        hit = t[:, c] >= s["t0"][0]
        rx_err_rate[hit, c, f["dev"]] = f["errs"] * rng.uniform(0.5, 1.5, hit.sum())
        retx_factor[hit, c] = f["retx"]
        later = t >= s["t0"][0]
        retx_factor = np.where(later & (retx_factor < 2), 2.0, retx_factor)  # peers resend
    if kind == "roce_pfc_misconfig":
        c, p = who[0], f["port"]
        hit = t[:, c] >= s["t0"][0]
        oos_rate[hit, c, p] = f["oos"] * rng.uniform(0.6, 1.4, hit.sum())
        ib_bw[hit, c, p] *= f["bw"]
        seq_rate = np.where((t >= s["t0"][0])[:, :, None], 0.5, seq_rate)

    # ---- cumulative values
    cpu_modes = {"user": user, "system": system, "iowait": iowait, "softirq": softirq}
    idle = ncpu - sum(np.clip(v, 0, None) for v in cpu_modes.values())
    cpu_modes["idle"] = idle
    t_ms = np.round(t * 1000).astype(np.int64)
    up3 = present[:, :, None]
    one = [""]
    cpu_base = st["uptime"][None, :]
    shares = {"user": 0.05, "system": 0.01, "iowait": 0.001, "softirq": 0.002, "idle": 0.937}
    for mode, r in cpu_modes.items():
        cum = _cum(np.clip(r, 0, None), t, cpu_base * ncpu * shares[mode])
        rows.add("node_cpu_seconds_total", [mode], t_ms, cum[:, :, None], up3)
    rows.add("node_load1", one, t_ms, np.clip(load1, 0, None)[:, :, None], up3)
    rows.add("node_memory_MemAvailable_bytes", one, t_ms, np.round(avail)[:, :, None], up3)
    rows.add("node_memory_MemTotal_bytes", one, t_ms, memtot, up3)
    rows.add(
        "node_disk_read_bytes_total",
        one,
        t_ms,
        _cum(disk_r, t, st["uptime"][None] * 4e7)[:, :, None],
        up3,
    )
    rows.add(
        "node_disk_written_bytes_total",
        one,
        t_ms,
        _cum(disk_w, t, st["uptime"][None] * 6e6)[:, :, None],
        up3,
    )
    rows.add("node_vmstat_oom_kill", one, t_ms, (st["oom"][None] + oom_add)[:, :, None], up3)
    rows.add(
        "node_vmstat_pgmajfault",
        one,
        t_ms,
        np.floor(_cum(np.clip(majf, 0, None), t, st["uptime"][None] * 2))[:, :, None],
        up3,
    )
    # netdevs: frontend + data ports
    devs = [site.frontend, *site.data_netdevs]
    nd = len(devs)
    rx = np.stack([fe_rx] + [tcp_data / max(1, nd - 1)] * (nd - 1), axis=2)
    tx = np.stack([fe_tx] + [tcp_data / max(1, nd - 1)] * (nd - 1), axis=2)
    if kind == "tcp_retrans_storm":
        c = who[0]
        hit = t[:, c] >= s["t0"][0]
        rx[hit, c, 1 + f["dev"]] *= 0.5
    base_b = st["uptime"][None, :, None] * 3e7
    rows.add(
        "node_network_receive_bytes_total",
        devs,
        t_ms,
        np.floor(_cum(rx * (1 + noise(0.02, (T, n, nd))), t, base_b)),
        np.repeat(up3, nd, 2),
    )
    rows.add(
        "node_network_transmit_bytes_total",
        devs,
        t_ms,
        np.floor(_cum(tx * (1 + noise(0.02, (T, n, nd))), t, base_b * 0.4)),
        np.repeat(up3, nd, 2),
    )
    errs = np.zeros((T, n, nd))
    errs[:, :, 1:] = rx_err_rate[:, :, : nd - 1] if nd > 1 else 0.0
    rows.add(
        "node_network_receive_errs_total",
        devs,
        t_ms,
        _poisson_cum(rng, errs, t, 0.0),
        np.repeat(up3, nd, 2),
    )
    drops = np.zeros((T, n, nd))
    drops[:, :, 0] = rx_drop_rate + 0.001
    rows.add(
        "node_network_receive_drop_total",
        devs,
        t_ms,
        _poisson_cum(rng, drops, t, 0.0),
        np.repeat(up3, nd, 2),
    )
    rows.add("node_network_up", devs, t_ms, net_up, np.repeat(up3, nd, 2))
    rows.add(
        "node_network_carrier_changes_total",
        devs,
        t_ms,
        st["carrier"][None, :, None] + carrier_add,
        np.repeat(up3, nd, 2),
    )
    if "netstat" in c_:
        segs = (fe_tx + tcp_data) / 8948.0 + 50.0
        retx = segs * 2e-5 * retx_factor
        rows.add(
            "node_netstat_Tcp_OutSegs",
            one,
            t_ms,
            np.floor(_cum(segs, t, st["uptime"][None] * 5e3))[:, :, None],
            up3,
        )
        rows.add(
            "node_netstat_Tcp_RetransSegs",
            one,
            t_ms,
            _poisson_cum(rng, retx, t, np.floor(st["uptime"][None] * 0.05))[:, :, None],
            up3,
        )
        tmo = 0.002 * np.where(retx_factor > 4, retx_factor * 3, 1.0)
        rows.add(
            "node_netstat_TcpExt_TCPTimeouts",
            one,
            t_ms,
            _poisson_cum(rng, tmo, t, np.floor(st["uptime"][None] * 0.003))[:, :, None],
            up3,
        )
    if "softnet" in c_:
        pk = (fe_rx + tcp_data) / 4000.0 + 200.0
        rows.add(
            "node_softnet_processed_total",
            one,
            t_ms,
            np.floor(_cum(pk, t, st["uptime"][None] * 300))[:, :, None],
            up3,
        )
        rows.add(
            "node_softnet_dropped_total",
            one,
            t_ms,
            _poisson_cum(rng, sn_drop, t, 0.0)[:, :, None],
            up3,
        )
        rows.add(
            "node_softnet_times_squeezed_total",
            one,
            t_ms,
            _poisson_cum(rng, squeeze, t, np.floor(st["uptime"][None] * 0.02))[:, :, None],
            up3,
        )
    if "edac" in c_:
        rows.add(
            "node_edac_correctable_errors_total",
            one,
            t_ms,
            _poisson_cum(rng, edac_rate, t, st["edac"][None])[:, :, None],
            up3,
        )
        rows.add("node_edac_uncorrectable_errors_total", one, t_ms, 0.0, up3)
    if "hwmon" in c_:
        rows.add("node_hwmon_fan_rpm", one, t_ms, np.round(np.clip(fan, 0, None))[:, :, None], up3)
        rows.add("node_hwmon_temp_celsius", one, t_ms, np.round(cput)[:, :, None], up3)
    if "pressure" in c_:
        for nm, r in (("cpu", psi_cpu), ("memory", psi_mem), ("io", psi_io)):
            rows.add(
                f"node_pressure_{nm}_waiting_seconds_total",
                one,
                t_ms,
                _cum(np.clip(r, 0, 1), t, st["uptime"][None] * 0.01)[:, :, None],
                up3,
            )
    if "infiniband" in c_ and nib:
        devs_ib = list(site.ib)
        tb = t[:, :, None]
        after_reset = tb >= ib_reset_at[None]
        dt = np.clip(np.diff(t, axis=0, prepend=t[:1]), 0, None)[:, :, None]

        def ibcum(rate, base):
            inc = rate * dt
            cum = base + np.cumsum(inc, axis=0)
            # counters of a re-initialised HCA restart from zero
            restart = np.cumsum(np.where(after_reset, inc, 0.0), axis=0)
            return np.where(after_reset, restart, cum)

        base_ib = st["uptime"][None, :, None] * site.ib_rate * 0.05
        rows.add(
            IB + "port_data_received_bytes_total",
            devs_ib,
            t_ms,
            np.floor(ibcum(ib_bw, base_ib)),
            ib_pres,
        )
        rows.add(
            IB + "port_data_transmitted_bytes_total",
            devs_ib,
            t_ms,
            np.floor(ibcum(ib_bw * (1 + noise(0.01, (T, n, nib))), base_ib)),
            ib_pres,
        )
        rows.add(
            IB + "port_errors_received_total",
            devs_ib,
            t_ms,
            ibcum(0.0 * ib_bw, st["ib_err"][None].astype(float)),
            ib_pres,
        )
        rows.add(
            IB + "link_downed_total",
            devs_ib,
            t_ms,
            ibcum(0.0 * ib_bw, st["ib_down"][None].astype(float)),
            ib_pres,
        )
        rows.add(
            IB + "link_error_recovery_total",
            devs_ib,
            t_ms,
            ibcum(0.0 * ib_bw, st["ib_rec"][None].astype(float)),
            ib_pres,
        )
        rows.add(IB + "state_id", devs_ib, t_ms, ib_state, ib_pres)
        rows.add(IB + "physical_state_id", devs_ib, t_ms, 5.0, ib_pres)
        rows.add(IB + "rate_bytes_per_second", devs_ib, t_ms, site.ib_rate, ib_pres)
        if "roce_hw" in c_:
            ecn = 40.0 * ib_bw / site.ib_rate * 10
            hw = {
                "np_ecn_marked_roce_packets_received_total": ecn,
                "np_cnp_packets_sent_total": ecn,
                "out_of_sequence_packets_received_total": oos_rate,
                "packet_sequence_errors_total": seq_rate,
                "local_ack_timeout_errors_total": np.full((T, n, nib), 0.001),
            }
            for nm, r in hw.items():
                inc = rng.poisson(np.clip(r * dt, 0, None)).astype(float)
                cum = np.cumsum(inc, axis=0) + np.floor(st["uptime"][None, :, None] * 0.01)
                cum = np.where(after_reset, np.cumsum(np.where(after_reset, inc, 0), 0), cum)
                rows.add(IB + nm, devs_ib, t_ms, cum, ib_pres)
