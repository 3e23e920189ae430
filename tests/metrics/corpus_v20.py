"""Blind labelled corpus v20 for a Minder-style faulty-machine detector.

Deterministic generator (numpy + polars only) of raw Prometheus samples as NVIDIA dcgm-exporter
and prometheus node_exporter publish them, for 120 synchronous multi-node training jobs on six
sites none of the earlier corpora used: a DGX-1 (8x V100-SXM2, NVLink 2, 4x EDR InfiniBand)
cluster with 30 s scrapes (``dv1``), an HGX A100-40GB cluster on RoCE v2 with ethtool PFC counters
(``a1r``), an AWS p5.48xlarge (8x H100, 32 EFA devices) cluster (``e5h``), a 4x L40S PCIe
cluster that runs NCCL over TCP on 2x 100 GbE (``l4t``), a DGX B200 cluster on NDR InfiniBand
with 10 s DCGM collection (``db2``) and an HGX H200 cluster on Spectrum-X RoCE with
BlueField-3 SuperNICs (``sxh``).

Written without reading the detector, the simulators or other corpora's fault models (only
corpus v17's generator, its sanity tests and README were read, as the brief allows; v17's
rendering machinery was copied and adapted; every fault and healthy kind is new). Every
modelling choice and its public source is listed in tests/fixtures/metrics_v20/README.md
(numbers no source gave are marked GUESS there).

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
    "pcie_link_downtrain_gen_width_one_gpu",
    "nvlink_crc_flit_storm_replays_gpu_slow",
    "aoc_cable_flap_carrier_bursts_stalls",
    "kernel_panic_node_silent_peers_nccl_hang",
    "xid79_off_bus_gpu_series_vanish_hang",
    "hbm_hot_spot_hw_thermal_gpu_slow",
    "sm_clock_locked_low_by_mgmt_agent_node",
    "cpu_pkg_thermal_throttle_loader_straggler",
    "local_nvme_degraded_queue_saturation_host",
    "nic_pfc_pause_storm_watchdog_port",
    "host_dimm_ue_mce_sigbus_rank_hang",
    "degraded_gpu_silent_bottleneck_full_power",
)
BENIGN_KINDS: tuple[str, ...] = (
    "rank0_logger_extra_cpu_frontend_tx",
    "staggered_sharded_ckpt_writes_by_node",
    "dataloader_shard_skew_cpu_nodes",
    "dcgm_exporter_rolling_restart_gaps",
    "prometheus_reload_interval_and_gap",
    "hetero_fb_sku_nodes_same_pace",
    "elastic_scale_down_node_leaves",
    "torch_profiler_trace_subset_ranks",
    "cold_cache_slow_warmup_one_node",
)
_HANG_KINDS = frozenset(
    {
        "kernel_panic_node_silent_peers_nccl_hang",
        "xid79_off_bus_gpu_series_vanish_hang",
        "host_dimm_ue_mce_sigbus_rank_hang",
    }
)
# wrong from the node's first sample (left behind by maintenance before the job): none in v20
_BOOT_KINDS: frozenset[str] = frozenset()
# evidence only in short episodes (the label is the first scrape that caught one): none in v20
_EPISODE_KINDS: frozenset[str] = frozenset()


def _base(kind: str) -> str:
    return kind


# ----------------------------------------------------------------------------------------------
# Metric names (as the exporters ship them)
# ----------------------------------------------------------------------------------------------


D = "DCGM_FI_DEV_"
P = "DCGM_FI_PROF_"
SM_CLOCK, MEM_CLOCK = D + "SM_CLOCK", D + "MEM_CLOCK"
MEMORY_TEMP, GPU_TEMP = D + "MEMORY_TEMP", D + "GPU_TEMP"
POWER, ENERGY = D + "POWER_USAGE", D + "TOTAL_ENERGY_CONSUMPTION"
POWER_LIMIT = D + "POWER_MGMT_LIMIT"
PCIE_REPLAY = D + "PCIE_REPLAY_COUNTER"
PCIE_TX_TP, PCIE_RX_TP = D + "PCIE_TX_THROUGHPUT", D + "PCIE_RX_THROUGHPUT"
LINK_GEN, LINK_WIDTH = D + "PCIE_LINK_GEN", D + "PCIE_LINK_WIDTH"
GPU_UTIL, MEM_COPY_UTIL = D + "GPU_UTIL", D + "MEM_COPY_UTIL"
ENC_UTIL, DEC_UTIL = D + "ENC_UTIL", D + "DEC_UTIL"
XID = D + "XID_ERRORS"
FB_FREE, FB_USED, FB_RESERVED = D + "FB_FREE", D + "FB_USED", D + "FB_RESERVED"
NVLINK_BW = D + "NVLINK_BANDWIDTH_TOTAL"
NVL_REPLAY, NVL_RECOVERY = (
    D + "NVLINK_REPLAY_ERROR_COUNT_TOTAL",
    D + "NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
)
NVL_CRC = D + "NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL"
UNC_REMAP, COR_REMAP = D + "UNCORRECTABLE_REMAPPED_ROWS", D + "CORRECTABLE_REMAPPED_ROWS"
REMAP_FAIL = D + "ROW_REMAP_FAILURE"
RET_SBE, RET_DBE, RET_PEND = D + "RETIRED_SBE", D + "RETIRED_DBE", D + "RETIRED_PENDING"
CLOCKS_EVENT, CLOCK_THROTTLE = D + "CLOCKS_EVENT_REASONS", D + "CLOCK_THROTTLE_REASONS"
POWER_VIOL, THERMAL_VIOL = D + "POWER_VIOLATION", D + "THERMAL_VIOLATION"
ECC_SBE, ECC_DBE = D + "ECC_SBE_VOL_TOTAL", D + "ECC_DBE_VOL_TOTAL"
PROF_GR, PROF_TENSOR = P + "GR_ENGINE_ACTIVE", P + "PIPE_TENSOR_ACTIVE"
PROF_DRAM = P + "DRAM_ACTIVE"
PROF_PCIE_TX, PROF_PCIE_RX = P + "PCIE_TX_BYTES", P + "PCIE_RX_BYTES"

N_ = "node_"
CPU_SECONDS = N_ + "cpu_seconds_total"
CPU_FREQ = N_ + "cpu_scaling_frequency_hertz"
LOAD1 = N_ + "load1"
MEM_TOTAL, MEM_AVAIL = N_ + "memory_MemTotal_bytes", N_ + "memory_MemAvailable_bytes"
MEM_CACHED, MEM_DIRTY = N_ + "memory_Cached_bytes", N_ + "memory_Dirty_bytes"
MEM_HWCORRUPT = N_ + "memory_HardwareCorrupted_bytes"
PROCS_RUNNING, PROCS_BLOCKED = N_ + "procs_running", N_ + "procs_blocked"
CTX_SWITCHES, BOOT_TIME = N_ + "context_switches_total", N_ + "boot_time_seconds"
NET_RX, NET_TX = N_ + "network_receive_bytes_total", N_ + "network_transmit_bytes_total"
NET_UP, NET_CARRIER = N_ + "network_up", N_ + "network_carrier_changes_total"
NET_SPEED = N_ + "network_speed_bytes"
DISK_R, DISK_W = N_ + "disk_read_bytes_total", N_ + "disk_written_bytes_total"
DISK_IO, DISK_IO_NOW = N_ + "disk_io_time_seconds_total", N_ + "disk_io_now"
FS_AVAIL, FS_SIZE = N_ + "filesystem_avail_bytes", N_ + "filesystem_size_bytes"
FS_DEVERR = N_ + "filesystem_device_error"
VM_PGMAJ, VM_OOM = N_ + "vmstat_pgmajfault", N_ + "vmstat_oom_kill"
VM_PGFAULT = N_ + "vmstat_pgfault"
TCP_RETRANS, TCP_OUTSEGS = N_ + "netstat_Tcp_RetransSegs", N_ + "netstat_Tcp_OutSegs"
CLOCKSOURCE = N_ + "time_clocksource_current_info"
PSI_CPU = N_ + "pressure_cpu_waiting_seconds_total"
PSI_IO_W, PSI_IO_S = (
    N_ + "pressure_io_waiting_seconds_total",
    N_ + "pressure_io_stalled_seconds_total",
)
PSI_MEM_W, PSI_MEM_S = (
    N_ + "pressure_memory_waiting_seconds_total",
    N_ + "pressure_memory_stalled_seconds_total",
)
EDAC_CE = N_ + "edac_correctable_errors_total"
EDAC_UE = N_ + "edac_uncorrectable_errors_total"
HWMON_TEMP = N_ + "hwmon_temp_celsius"
IB = N_ + "infiniband_"
IB_RX, IB_TX = IB + "port_data_received_bytes_total", IB + "port_data_transmitted_bytes_total"
IB_STATE, IB_PHYS = IB + "state_id", IB + "physical_state_id"
IB_RATE = IB + "rate_bytes_per_second"
IB_DOWNED, IB_SYMBOL = IB + "link_downed_total", IB + "symbol_error_total"
IB_RCV_ERR, IB_XMIT_WAIT = IB + "port_errors_received_total", IB + "port_transmit_wait_total"
IB_LINK_RECOV = IB + "link_error_recovery_total"
IB_OOS = IB + "out_of_sequence_packets_received_total"
ET = N_ + "ethtool_"
ET_DISCARDS = ET + "received_discards_phy"
ET_TX_PAUSE, ET_RX_PAUSE = ET + "transmitted_prio3_pause", ET + "received_prio3_pause"
ET_TX_PAUSE_DUR = ET + "transmitted_prio3_pause_duration"
ET_LINK_DOWN = ET + "link_down_events_phy"
ET_OOB = ET + "received_out_of_buffer"  # mlx5 rx_out_of_buffer (a vport/queue counter)
ET_STORM = ET + "transmitted_pause_storm_error_events"  # mlx5 tx_pause_storm_error_events
CPU_PKG_THROTTLE = N_ + "cpu_package_throttles_total"

_DCGM_COUNTERS = frozenset(
    {
        ENERGY,
        PCIE_REPLAY,
        PCIE_TX_TP,
        PCIE_RX_TP,
        NVLINK_BW,
        NVL_REPLAY,
        NVL_RECOVERY,
        NVL_CRC,
        UNC_REMAP,
        COR_REMAP,
        POWER_VIOL,
        THERMAL_VIOL,
        ECC_SBE,
        ECC_DBE,
    }
)
_NODE_COUNTERS = frozenset(
    {
        CPU_SECONDS,
        CTX_SWITCHES,
        NET_RX,
        NET_TX,
        NET_CARRIER,
        DISK_R,
        DISK_W,
        DISK_IO,
        VM_PGMAJ,
        VM_PGFAULT,
        VM_OOM,
        TCP_RETRANS,
        TCP_OUTSEGS,
        PSI_CPU,
        PSI_IO_W,
        PSI_IO_S,
        PSI_MEM_W,
        PSI_MEM_S,
        EDAC_CE,
        EDAC_UE,
        IB_RX,
        IB_TX,
        IB_DOWNED,
        IB_SYMBOL,
        IB_RCV_ERR,
        IB_XMIT_WAIT,
        IB_LINK_RECOV,
        IB_OOS,
        ET_DISCARDS,
        ET_TX_PAUSE,
        ET_RX_PAUSE,
        ET_TX_PAUSE_DUR,
        ET_LINK_DOWN,
        CPU_PKG_THROTTLE,
        ET_OOB,
        ET_STORM,
    }
)
COUNTER_METRICS: frozenset[str] = _DCGM_COUNTERS | _NODE_COUNTERS
# typed counter in the exporters' CSVs, but the value is a rate (goes up and down)
RATE_VALUED_COUNTERS: frozenset[str] = frozenset({NVLINK_BW, PCIE_TX_TP, PCIE_RX_TP})


def is_counter(metric: str) -> bool:
    return metric in COUNTER_METRICS


# ----------------------------------------------------------------------------------------------
# Sites
# ----------------------------------------------------------------------------------------------

_BASE_FIELDS = (
    SM_CLOCK,
    MEM_CLOCK,
    GPU_TEMP,
    POWER,
    ENERGY,
    PCIE_REPLAY,
    MEM_COPY_UTIL,
    ENC_UTIL,
    DEC_UTIL,
    XID,
    FB_FREE,
    FB_USED,
)
_REMAP = (UNC_REMAP, COR_REMAP, REMAP_FAIL)
_DCP = (PROF_GR, PROF_TENSOR, PROF_DRAM, PROF_PCIE_TX, PROF_PCIE_RX)
_IB_ERRS = (IB_DOWNED, IB_SYMBOL, IB_RCV_ERR, IB_XMIT_WAIT, IB_LINK_RECOV)
_ALL_IB_ERRS = (*_IB_ERRS, IB_OOS)


@dataclass(frozen=True)
class Site:
    key: str
    gpu: str
    G: int
    tdp: float
    idle_w: float
    sm_max: float
    sm_idle: float
    mem_clk: float
    fb_mib: float
    slow_temp: float
    r_th: float  # degC per W, GPU die above inlet
    cpus: int
    cpu_hz: float  # nominal scaling frequency while busy
    mem_gib: float
    collect: float
    fields: tuple[str, ...]
    reasons: str | None
    viol_ns: bool
    nvl_bw: float  # NVLINK_BANDWIDTH_TOTAL nominal while training (0: no NVLink)
    pcie_gen: int
    pcie_bw: float  # per-GPU PCIe bytes/s while training
    ib: tuple[str, ...]  # node_infiniband devices ("mlx5_0:1"); empty: no collector output
    ib_rate: float  # per HCA port, bytes/s (also used for pace when the collector is off)
    ib_util: float  # share of the port rate the collectives use at full pace
    ib_extra: tuple[str, ...]
    roce: bool
    netdevs: tuple[str, ...]  # frontend first, then one netdev per fabric port
    speeds: tuple[float, ...]  # node_network_speed_bytes per netdev
    ethtool: tuple[str, ...]
    eth_ports: tuple[str, ...]  # ports ethtool reports on
    collectors: frozenset
    disk: str
    mounts: tuple[str, ...]  # "/", local data, [parallel file system]
    pfs: str  # mount point of the parallel file system ("" none)
    exporters: str
    fixed_di: float = 0.0  # scrape interval imposed by the site (0: chosen per job)
    fixed_ni: float = 0.0
    loss: float = 0.003  # share of scrapes lost
    vm: bool = False  # guests: CPU "steal" mode, no physical-port counters
    arm: bool = False  # Grace: arch_sys_counter, no x86 thermal-throttle files
    tcp_data: bool = False  # collectives over TCP on the data netdevs (GPUDirect-TCPX/O)


def _ports(prefix: str, idx) -> tuple[str, ...]:
    return tuple(f"{prefix}{i}:1" for i in idx)


_ET_PHY = (
    ET_DISCARDS,
    ET_OOB,
    ET_TX_PAUSE,
    ET_RX_PAUSE,
    ET_TX_PAUSE_DUR,
    ET_LINK_DOWN,
)
_FULL = frozenset(
    {"netstat", "pressure", "edac", "infiniband", "hwmon", "ethtool", "cpufreq", "thermal"}
)
_NVL = (NVLINK_BW, NVL_REPLAY, NVL_RECOVERY, NVL_CRC)
_ECC = (ECC_SBE, ECC_DBE)

_RET = (RET_SBE, RET_DBE, RET_PEND)
_PCIE = (LINK_GEN, LINK_WIDTH)
_VIOL = (POWER_VIOL, THERMAL_VIOL)
_ET_ROCE = (ET_DISCARDS, ET_OOB, ET_TX_PAUSE, ET_RX_PAUSE, ET_TX_PAUSE_DUR, ET_LINK_DOWN, ET_STORM)
_A1R_NET = tuple(f"enp{b}s0np0" for b in (12, 18, 75, 81, 140, 146, 203, 209))
_SXH_NET = tuple(f"enp{b}s0f0np0" for b in (24, 41, 90, 107, 156, 173, 222, 239))
_E5H_EFA = tuple(f"rdmap{b}s0:1" for b in range(79, 79 + 32))

_SITE_LIST = (
    Site(
        key="dv1",
        gpu="NVIDIA DGX-1V: 8x V100-SXM2-32GB (300 W), NVLink 2 hybrid cube mesh, 4x EDR IB",
        G=8,
        tdp=300.0,
        idle_w=42.0,
        sm_max=1530.0,
        sm_idle=135.0,
        mem_clk=877.0,
        fb_mib=32_510.0,
        slow_temp=83.0,
        r_th=0.12,
        cpus=80,
        cpu_hz=2.2e9,
        mem_gib=512.0,
        collect=30.0,
        fields=(
            *_BASE_FIELDS,
            GPU_UTIL,
            *_NVL,
            *_ECC,
            *_RET,
            CLOCK_THROTTLE,
            POWER_LIMIT,
            *_PCIE,
        ),
        reasons=CLOCK_THROTTLE,
        viol_ns=False,
        nvl_bw=1.2e5,
        pcie_gen=3,
        pcie_bw=6e9,
        ib=_ports("mlx5_", range(4)),
        ib_rate=12.5e9,
        ib_util=0.45,
        ib_extra=_IB_ERRS,
        roce=False,
        netdevs=("enp1s0f0", "ib0", "ib1", "ib2", "ib3"),
        speeds=(1.25e9, *([12.5e9] * 4)),
        ethtool=(),
        eth_ports=(),
        collectors=frozenset(
            {"netstat", "pressure", "edac", "infiniband", "hwmon", "cpufreq", "thermal"}
        ),
        disk="md0",
        mounts=("/", "/raid", "/nfs"),
        pfs="/nfs",
        exporters="dcgm-exporter 2.1.8 (DCGM 2.0), node_exporter 1.0.1",
        fixed_di=30.0,
        fixed_ni=30.0,
        loss=0.005,
    ),
    Site(
        key="a1r",
        gpu="HGX A100 40GB SXM4 (400 W) servers, 8x ConnectX-6 200GbE RoCE v2, ethtool PFC",
        G=8,
        tdp=400.0,
        idle_w=55.0,
        sm_max=1410.0,
        sm_idle=210.0,
        mem_clk=1215.0,
        fb_mib=40_536.0,
        slow_temp=85.0,
        r_th=0.075,
        cpus=256,
        cpu_hz=2.25e9,
        mem_gib=1024.0,
        collect=15.0,
        fields=(
            *_BASE_FIELDS,
            MEMORY_TEMP,
            GPU_UTIL,
            *_NVL,
            *_ECC,
            *_REMAP,
            *_DCP,
            CLOCK_THROTTLE,
            POWER_LIMIT,
            *_PCIE,
        ),
        reasons=CLOCK_THROTTLE,
        viol_ns=False,
        nvl_bw=1.5e5,
        pcie_gen=4,
        pcie_bw=9e9,
        ib=_ports("mlx5_", range(8)),
        ib_rate=25e9,
        ib_util=0.35,
        ib_extra=(IB_DOWNED, IB_OOS),
        roce=True,
        netdevs=("eno1", *_A1R_NET),
        speeds=(3.125e9, *([25e9] * 8)),
        ethtool=_ET_ROCE,
        eth_ports=_A1R_NET,
        collectors=_FULL,
        disk="nvme0n1",
        mounts=("/", "/scratch", "/weka"),
        pfs="/weka",
        exporters="dcgm-exporter 2.4.6 (DCGM 2.4), node_exporter 1.3.1 (+ethtool)",
        loss=0.003,
    ),
    Site(
        key="e5h",
        gpu="AWS p5.48xlarge: 8x H100 80GB (700 W), 32x EFA (100 Gb/s each), Nitro VM",
        G=8,
        tdp=700.0,
        idle_w=70.0,
        sm_max=1980.0,
        sm_idle=345.0,
        mem_clk=2619.0,
        fb_mib=81_559.0,
        slow_temp=87.0,
        r_th=0.06,
        cpus=192,
        cpu_hz=2.4e9,
        mem_gib=2048.0,
        collect=15.0,
        fields=(
            *_BASE_FIELDS,
            MEMORY_TEMP,
            GPU_UTIL,
            *_NVL,
            *_ECC,
            *_REMAP,
            *_DCP,
            CLOCK_THROTTLE,
            *_VIOL,
            POWER_LIMIT,
        ),
        reasons=CLOCK_THROTTLE,
        viol_ns=False,
        nvl_bw=2.4e5,
        pcie_gen=5,
        pcie_bw=1.0e10,
        ib=_E5H_EFA,
        ib_rate=12.5e9,
        ib_util=0.3,
        ib_extra=(),
        roce=False,
        netdevs=("ens32",),
        speeds=(12.5e9,),
        ethtool=(),
        eth_ports=(),
        collectors=frozenset({"netstat", "pressure", "infiniband", "cpufreq"}),
        disk="nvme1n1",
        mounts=("/", "/opt/dlami/nvme", "/fsx"),
        pfs="/fsx",
        exporters="dcgm-exporter 3.3.5, node_exporter 1.7.0 (VM: no edac/hwmon/thermal)",
        loss=0.004,
        vm=True,
    ),
    Site(
        key="l4t",
        gpu="4x L40S 48GB PCIe (350 W, air), 2x 100GbE, NCCL over TCP sockets",
        G=4,
        tdp=350.0,
        idle_w=35.0,
        sm_max=2520.0,
        sm_idle=210.0,
        mem_clk=9001.0,
        fb_mib=46_068.0,
        slow_temp=88.0,
        r_th=0.14,
        cpus=96,
        cpu_hz=3.0e9,
        mem_gib=768.0,
        collect=20.0,
        fields=(
            *_BASE_FIELDS,
            GPU_UTIL,
            *_ECC,
            *_DCP,
            CLOCK_THROTTLE,
            POWER_LIMIT,
            *_PCIE,
        ),
        reasons=CLOCK_THROTTLE,
        viol_ns=False,
        nvl_bw=0.0,
        pcie_gen=4,
        pcie_bw=8e9,
        ib=(),
        ib_rate=12.5e9,
        ib_util=0.5,
        ib_extra=(),
        roce=False,
        netdevs=("eno1np0", "ens2f0np0", "ens2f1np1"),
        speeds=(3.125e9, 12.5e9, 12.5e9),
        ethtool=(ET_DISCARDS, ET_TX_PAUSE, ET_RX_PAUSE, ET_LINK_DOWN),
        eth_ports=("ens2f0np0", "ens2f1np1"),
        collectors=frozenset({"netstat", "pressure", "hwmon", "cpufreq", "thermal", "ethtool"}),
        disk="nvme0n1",
        mounts=("/", "/scratch", "/nfs"),
        pfs="/nfs",
        exporters="dcgm-exporter 3.3.0, node_exporter 1.6.0 (+ethtool)",
        fixed_di=20.0,
        fixed_ni=20.0,
        loss=0.005,
        tcp_data=True,
    ),
    Site(
        key="db2",
        gpu="NVIDIA DGX B200: 8x B200 180GB (1000 W, air), 8x ConnectX-7 NDR IB, DCGM every 10 s",
        G=8,
        tdp=1000.0,
        idle_w=140.0,
        sm_max=1965.0,
        sm_idle=345.0,
        mem_clk=3996.0,
        fb_mib=183_359.0,
        slow_temp=87.0,
        r_th=0.04,
        cpus=224,
        cpu_hz=2.1e9,
        mem_gib=4096.0,
        collect=10.0,
        fields=(
            *_BASE_FIELDS,
            MEMORY_TEMP,
            FB_RESERVED,
            GPU_UTIL,
            NVLINK_BW,
            *_ECC,
            *_REMAP,
            *_DCP,
            CLOCKS_EVENT,
            *_VIOL,
            POWER_LIMIT,
            *_PCIE,
        ),
        reasons=CLOCKS_EVENT,
        viol_ns=True,
        nvl_bw=7.2e5,
        pcie_gen=5,
        pcie_bw=1.2e10,
        ib=_ports("mlx5_", (0, 3, 4, 5, 6, 9, 10, 11)),
        ib_rate=50e9,
        ib_util=0.3,
        ib_extra=_ALL_IB_ERRS,
        roce=False,
        netdevs=("enp170s0f1np1", *(f"ibp{b}s0" for b in (24, 64, 79, 94, 154, 192, 206, 220))),
        speeds=(12.5e9, *([50e9] * 8)),
        ethtool=(),
        eth_ports=(),
        collectors=frozenset(
            {"netstat", "pressure", "edac", "infiniband", "hwmon", "cpufreq", "thermal"}
        ),
        disk="md0",
        mounts=("/", "/raid", "/lustre"),
        pfs="/lustre",
        exporters="dcgm-exporter 4.1.1 (DCGM 4.1, 10 s collection), node_exporter 1.8.1",
        fixed_di=10.0,
        fixed_ni=15.0,
        loss=0.002,
    ),
    Site(
        key="sxh",
        gpu="HGX H200 141GB (700 W) on Spectrum-X: 8x BlueField-3 SuperNIC 400GbE RoCE v2",
        G=8,
        tdp=700.0,
        idle_w=75.0,
        sm_max=1980.0,
        sm_idle=345.0,
        mem_clk=3201.0,
        fb_mib=143_771.0,
        slow_temp=87.0,
        r_th=0.05,
        cpus=192,
        cpu_hz=2.6e9,
        mem_gib=2048.0,
        collect=15.0,
        fields=(
            *_BASE_FIELDS,
            MEMORY_TEMP,
            GPU_UTIL,
            *_NVL,
            *_ECC,
            *_REMAP,
            *_DCP,
            CLOCK_THROTTLE,
            *_VIOL,
            POWER_LIMIT,
        ),
        reasons=CLOCK_THROTTLE,
        viol_ns=False,
        nvl_bw=2.4e5,
        pcie_gen=5,
        pcie_bw=1.0e10,
        ib=_ports("mlx5_", range(8)),
        ib_rate=50e9,
        ib_util=0.3,
        ib_extra=(IB_DOWNED, IB_OOS),
        roce=True,
        netdevs=("eno8303", *_SXH_NET),
        speeds=(3.125e9, *([50e9] * 8)),
        ethtool=_ET_ROCE,
        eth_ports=_SXH_NET,
        collectors=_FULL,
        disk="nvme0n1",
        mounts=("/", "/localnvme", "/vast"),
        pfs="/vast",
        exporters="dcgm-exporter 3.3.9, node_exporter 1.8.2 (+ethtool)",
        loss=0.003,
    ),
)
SITES: dict[str, Site] = {s.key: s for s in _SITE_LIST}
# x16, one direction, B/s by PCIe generation (index)
_GEN_BW = np.array([0.0, 4e9, 8e9, 16e9, 32e9, 64e9, 128e9])
_CPU_MODES = ["idle", "iowait", "softirq", "system", "user"]


def _cpu_modes(s: Site) -> list[str]:
    return [*_CPU_MODES, "steal"] if s.vm else list(_CPU_MODES)


def _cpu_devs(s: Site) -> list[str]:
    return ["0", str(s.cpus - 1)]


def _hwmon_devs(s: Site) -> list[str]:
    if s.arm:
        return ["acpitz:temp1", "acpitz:temp2"]
    return ["coretemp:temp1", "coretemp:temp2"]


def _n_node_series(s: Site) -> int:
    n = len(_cpu_modes(s)) + 1 + 5 + 2 + 1 + 1  # cpu modes, load1, memory, procs, ctx, boot
    n += 5 * len(s.netdevs) + 4 + 3 * len(s.mounts) + 3 + 1  # net, disk, fs, vmstat, clocksrc
    if "netstat" in s.collectors:
        n += 2
    if "pressure" in s.collectors:
        n += 5
    if "edac" in s.collectors:
        n += 4
    if "hwmon" in s.collectors:
        n += 2
    if "cpufreq" in s.collectors:
        n += 2
    if "thermal" in s.collectors:
        n += 2
    n += len(s.ib) * (5 + len(s.ib_extra))
    n += len(s.ethtool) * len(s.eth_ports)
    return n


def _n_dcgm_series(s: Site) -> int:
    return len(s.fields) * s.G


def _estimate_rows(s: Site, n: int, minutes: float, di: float, ni: float) -> float:
    sec = minutes * 60.0
    return n * sec * (_n_dcgm_series(s) / di + _n_node_series(s) / ni)


# ----------------------------------------------------------------------------------------------
# Deterministic hashing (scrape phases, jitter, lost scrapes)
# ----------------------------------------------------------------------------------------------

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLD = np.uint64(0x9E3779B97F4A7C15)


def _u01(*keys) -> np.ndarray:
    arrs = np.broadcast_arrays(*[np.asarray(k, dtype=np.int64) for k in keys])
    h = np.zeros(arrs[0].shape, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for a in arrs:
            h = h ^ (a.astype(np.uint64) + _GOLD + (h << np.uint64(6)) + (h >> np.uint64(2)))
            h = (h ^ (h >> np.uint64(30))) * _M1
            h = (h ^ (h >> np.uint64(27))) * _M2
            h = h ^ (h >> np.uint64(31))
    return (h >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)


_SALT_DCGM, _SALT_NODE, _SALT_COLL = 13, 29, 41


def _scrape_grid(
    rs: int, salt: int, nodes: np.ndarray, dur: float, step: float, gaps=(), loss: float = 0.003
):
    """Scrape times (K, n) and lost mask for the given node indices.

    ``gaps``: (a, b) windows in which the Prometheus server itself scraped nothing."""
    K = int(dur // step) + 1
    k = np.arange(K)[:, None]
    nn = np.asarray(nodes)[None, :]
    phase = step * _u01(rs, salt, 1 << 20, nn)
    t = phase + k * step + 0.25 * _u01(rs, salt, k, nn)
    lost = _u01(rs, salt + 1, k, nn) < loss
    for a, b in gaps:
        lost |= (t >= a) & (t < b)
    return t, lost


def _collect_phase(rs: int, nodes: np.ndarray, coll: np.ndarray) -> np.ndarray:
    return coll * _u01(rs, _SALT_COLL, 1 << 21, np.asarray(nodes))


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


_ALL = ("dv1", "a1r", "e5h", "l4t", "db2", "sxh")
_KIND_SITES: dict[str, tuple[str, ...]] = {
    # DCGM_FI_DEV_PCIE_LINK_GEN / _WIDTH in the site's field group
    "pcie_link_downtrain_gen_width_one_gpu": ("dv1", "a1r", "l4t", "db2"),
    # per-GPU NVLink CRC/replay counters (NVLink 2-4; the NVLink5 B200 exports other fields)
    "nvlink_crc_flit_storm_replays_gpu_slow": ("dv1", "a1r", "e5h", "sxh"),
    # a netdev per fabric port (carrier changes), not the EFA VM
    "aoc_cable_flap_carrier_bursts_stalls": ("dv1", "a1r", "l4t", "db2", "sxh"),
    # HBM parts with DCGM_FI_DEV_MEMORY_TEMP
    "hbm_hot_spot_hw_thermal_gpu_slow": ("a1r", "e5h", "db2", "sxh"),
    # node_exporter thermal_throttle collector (bare metal x86)
    "cpu_pkg_thermal_throttle_loader_straggler": ("dv1", "a1r", "l4t", "db2", "sxh"),
    # mlx5 tx_pause_storm_error_events through the ethtool collector (RoCE)
    "nic_pfc_pause_storm_watchdog_port": ("a1r", "sxh"),
    # node_exporter edac collector (bare metal)
    "host_dimm_ue_mce_sigbus_rank_hang": ("dv1", "a1r", "db2", "sxh"),
}
_JOBS_PER_KIND = {
    **{k: 5 for k in FAULT_KINDS},
    **{k: 7 if i < 6 else 6 for i, k in enumerate(BENIGN_KINDS)},
}
_TWO_CULPRITS = (
    "degraded_gpu_silent_bottleneck_full_power",
    "sm_clock_locked_low_by_mgmt_agent_node",
    "hbm_hot_spot_hw_thermal_gpu_slow",
    "cpu_pkg_thermal_throttle_loader_straggler",
)
_BIG = (
    ("kernel_panic_node_silent_peers_nccl_hang", "l4t", 512),
    ("staggered_sharded_ckpt_writes_by_node", "sxh", 256),
    ("degraded_gpu_silent_bottleneck_full_power", "db2", 192),
    ("prometheus_reload_interval_and_gap", "dv1", 256),
    ("elastic_scale_down_node_leaves", "a1r", 192),
    ("local_nvme_degraded_queue_saturation_host", "l4t", 384),
    ("hetero_fb_sku_nodes_same_pace", "db2", 256),
    ("nvlink_crc_flit_storm_replays_gpu_slow", "sxh", 192),
)
_SIZES = (2, 2, 3, 4, 4, 6, 8, 8, 12, 16, 16, 24, 32, 32, 48, 64, 96, 128)
_POOLS = {
    "dv1": (2, 2, 3, 4, 4, 8, 8, 16, 32, 64),
    "e5h": (2, 2, 3, 4, 4, 8, 8, 16, 16, 32),
    "l4t": (2, 2, 3, 4, 4, 6, 8, 8, 12, 16, 24, 48),
}
_EPOCH = datetime(2028, 3, 6, tzinfo=UTC)
_DT = 5.0
ROW_CAP = 5.45e6
_DI = (10.0, 15.0, 30.0, 60.0)
_NI = (15.0, 30.0, 60.0)
_HOST_PREFIX = {
    "dv1": "dgx1-",
    "a1r": "a100-r",
    "e5h": "ip-10-",
    "l4t": "l40s-",
    "db2": "dgxb200-",
    "sxh": "h200-sx-",
}


def _hostnames(site: str, n: int, rng) -> list[str]:
    o = int(rng.integers(1, 400))
    if site == "dv1":
        return [f"dgx1-{(o + i) % 900 + 1:03d}" for i in range(n)]
    if site == "a1r":
        return [f"a100-r{(o + i) // 16 + 1:02d}-n{(o + i) % 16 + 1:02d}" for i in range(n)]
    if site == "e5h":
        return [f"ip-10-1-{(o + i) // 250 % 256}-{(o + i) % 250 + 1}" for i in range(n)]
    if site == "l4t":
        return [f"l40s-{(o + i) % 9000 + 1:04d}" for i in range(n)]
    if site == "db2":
        return [f"dgxb200-{(o + i) % 4096 + 1:04d}" for i in range(n)]
    return [f"h200-sx-{(o + i) % 8192:04d}" for i in range(n)]


def _r5(x: float) -> float:
    return float(np.round(x / _DT) * _DT)


def _r5v(x: np.ndarray) -> np.ndarray:
    return np.round(x / _DT) * _DT


def jobs(seed: int = 0) -> list[Job]:
    rng = np.random.default_rng([seed, 20])
    kinds = [k for k in FAULT_KINDS + BENIGN_KINDS for _ in range(_JOBS_PER_KIND[k])]
    order = rng.permutation(len(kinds))
    big = {k: [] for k in FAULT_KINDS + BENIGN_KINDS}
    for k, s, n in _BIG:
        big[k].append((s, n))
    out = []
    seen: dict[str, int] = {}
    two_done: set[str] = set()
    for j, idx in enumerate(order):
        kind = kinds[int(idx)]
        seen[kind] = seen.get(kind, 0) + 1
        sites = _KIND_SITES.get(kind, _ALL)
        if big[kind]:
            site_key, n = big[kind].pop(0)
        else:
            off = int(_u01(seed, 83, len(kind), sum(map(ord, kind)))[()] * len(sites))
            site_key = sites[(seen[kind] - 1 + off) % len(sites)]
            n = int(rng.choice(_POOLS.get(site_key, _SIZES)))
        two = kind in _TWO_CULPRITS and kind not in two_done and n >= 4 and seen[kind] >= 2
        if two:
            two_done.add(kind)
        out.append(_make_job(j, kind, SITES[site_key], n, rng, two, seed, seen[kind]))
    return out


def _fit(site: Site, n: int, minutes: float, di: float, ni: float, shrink: bool = True):
    """Coarsen the scrape intervals (then shorten the window) until the job fits ROW_CAP."""
    while _estimate_rows(site, n, minutes, di, ni) > ROW_CAP:
        if di < 30:
            di = 30.0
        elif ni < 30:
            ni = 30.0
        elif di < 60:
            di = 60.0
        elif ni < 60:
            ni = 60.0
        elif shrink and minutes > 30.5:
            minutes = max(30.0, minutes * 0.9)
        elif di < 120:
            di = 120.0
        elif ni < 120:
            ni = 120.0
        else:
            break
    return minutes, di, ni


def _make_job(
    j: int, kind: str, site: Site, n: int, rng, two: bool, seed: int, nth: int = 1
) -> Job:
    hang = _base(kind) in _HANG_KINDS
    minutes = float(rng.uniform(40, 120)) if not hang else float(rng.uniform(55, 115))
    di = float(rng.choice(_DI[:3] if n < 192 else _DI[2:]))
    ni = float(rng.choice(_NI[:2] if n < 192 else _NI[1:]))
    if site.fixed_di:
        di, ni = site.fixed_di, site.fixed_ni
    minutes, di, ni = _fit(site, n, minutes, di, ni)
    dur = round(minutes * 60.0)
    rs = int(rng.integers(1, 2**31 - 1)) ^ (seed * 7919)
    spec: dict = {"rs": rs, "dur": float(dur), "kind": kind, "nth": nth, "loss": site.loss}
    spec["init_end"] = _r5(rng.uniform(150, 420))
    spec["init_spread"] = 20.0
    spec["ramp"] = 90.0
    spec["nccl_timeout"] = 1800.0 if rng.random() < 0.3 else 600.0
    warm = spec["init_end"] + spec["init_spread"] + spec["ramp"]
    spec["ckpt"] = []
    long_ck = False
    if not hang and rng.random() < 0.4 and kind != "spot_preemption_notice_ckpt_exit_all":
        every = float(rng.uniform(600, 1500) if not long_ck else rng.uniform(900, 1500))
        t = warm + every
        while t < dur - 300 - 300 * long_ck:
            d = rng.uniform(30, 100) if not long_ck else rng.uniform(120, 300)
            spec["ckpt"].append((_r5(t), _r5(t + d)))
            t += every
        if long_ck and not spec["ckpt"]:
            a = _r5(warm + 300)
            spec["ckpt"].append((a, _r5(a + rng.uniform(120, 300))))
    spec["decoy_cpu"] = []
    if rng.random() < 0.5:
        for _ in range(int(rng.integers(1, 3))):
            spec["decoy_cpu"].append(
                (int(rng.integers(n)), _r5(rng.uniform(60, dur - 200)), _r5(rng.uniform(30, 90)))
            )
    spec["gaps"] = []
    culprits: dict[int, float] = {}
    ev: dict[int, list[tuple]] = {}
    if kind in FAULT_KINDS:
        nc = 2 if two else 1
        cands = rng.permutation(n)[:nc]
        if hang:
            spec["hang_lag"] = 0.0
            latest = dur - spec["nccl_timeout"] - 150 - 640
            te = _r5(rng.uniform(warm + 240, max(warm + 300, latest)))
            if te + spec["nccl_timeout"] + 790 > dur:
                dur = te + spec["nccl_timeout"] + 790 + 60
                spec["dur"] = float(dur)
                _m, di, ni = _fit(site, n, dur / 60.0, di, ni, shrink=False)
        elif kind in _BOOT_KINDS:
            te = 0.0  # left behind by maintenance before the job: wrong from the first sample
        else:
            te = _r5(rng.uniform(warm + 240, max(warm + 300, dur - 14 * 60)))
            te = _outside_ckpt(te, spec["ckpt"])
        for i, c in enumerate(cands):
            if i == 0 or te == 0.0:
                t_c = te
            else:
                t_c = _outside_ckpt(_r5(te + rng.uniform(120, 420)), spec["ckpt"])
            culprits[int(c)] = t_c
        spec["culprits"] = {int(c): float(t) for c, t in culprits.items()}
        spec["fault"] = _fault_params(kind, site, spec, rng, n, list(culprits))
        for c, t in spec["culprits"].items():
            ev[c] = _evidence(kind, spec, c, t, site)
    else:
        spec["culprits"] = {}
        spec["benign"] = _benign_params(kind, site, spec, rng, n, di, ni)
        spec["gaps"] = spec["benign"].get("gaps", [])
    dur = spec["dur"]
    start = _EPOCH + timedelta(minutes=int(j) * 101 + float(rng.uniform(0, 60)))
    start = start.replace(microsecond=0)
    hosts = _hostnames(site.key, n, rng)
    lab: dict[str, datetime] = {}
    for c, evs in ev.items():
        on = _onset(spec, site, n, c, evs, di, ni)
        lab[hosts[c]] = start + timedelta(milliseconds=round(on * 1000))
    spec["di"], spec["ni"] = di, ni
    name = f"v20-{j:03d}-{site.key}-{kind}"
    return Job(
        name, kind, hosts, start, start + timedelta(seconds=dur), lab, di, ni, site.key, spec
    )


def _outside_ckpt(te: float, ckpt) -> float:
    """A slow fault's first effect is not hidden inside an all-node checkpoint pause."""
    for a, z in ckpt:
        if a - 30 <= te <= z + 30:
            te = _r5(z + 30)
    return te


def _node_collect(spec: dict, site: Site, n: int) -> np.ndarray:
    return np.full(n, site.collect)


def _onset(spec: dict, site: Site, n: int, c: int, evs, di: float, ni: float) -> float:
    rs, dur = spec["rs"], spec["dur"]
    gaps = spec.get("gaps", [])
    loss = spec["loss"]
    f = spec.get("fault", {})
    best = np.inf
    for ev_ in evs:
        how, te = ev_[0], ev_[1]
        if how.startswith("dcgm"):
            t, lost = _scrape_grid(rs, _SALT_DCGM, np.array([c]), dur, di, gaps, loss)
            t, lost = t[:, 0], lost[:, 0]
            coll = _node_collect(spec, site, n)[c]
            ph = _collect_phase(rs, np.array([c]), np.array([coll]))[0]
            m = np.floor((t - ph) / coll)
            ct = ph + m * coll
            stop = f.get("dstop", {}).get(c, np.inf)
            if how == "dcgm":
                ok = (~lost) & (m >= 0) & (ct >= te - 1e-9) & (t < dur) & (t < stop)
            elif how == "dcgm_win":
                ok = (~lost) & (m >= 0) & (ct >= te - 1e-9) & (ct < ev_[2] - 1e-9) & (t < dur)
            else:
                ok = (m >= 0) & (ct >= te - 1e-9) & (t < dur)
        else:
            t, lost = _scrape_grid(rs, _SALT_NODE, np.array([c]), dur, ni, gaps, loss)
            t, lost = t[:, 0], lost[:, 0]
            stop = f.get("nstop", {}).get(c, np.inf)
            for a, z in f.get("ngaps", {}).get(c, []):  # node_exporter timed out
                lost = lost | ((t >= a) & (t < z))
            if how == "node":
                ok = (~lost) & (t >= te) & (t < dur) & (t < stop)
            elif how == "node_win":
                ok = (~lost) & (t >= te) & (t < ev_[2]) & (t < dur) & (t < stop)
            else:  # node_missing: the first scheduled scrape that finds the node gone
                ok = (t >= te) & (t < dur)
        if ok.any():
            best = min(best, float(t[ok][0]))
    assert np.isfinite(best), (spec["kind"], evs)
    return best


def _evidence(kind: str, spec: dict, c: int, te: float, site: Site) -> list[tuple]:
    k = _base(kind)
    f = spec["fault"]
    if k == "kernel_panic_node_silent_peers_nccl_hang":
        # the first scheduled scrape (of either exporter) that finds the node gone
        return [("node_missing", te), ("dcgm_missing", te)]
    if k == "cpu_pkg_thermal_throttle_loader_straggler":
        # package_throttle_count reaches +1 after 1/rate seconds
        return [("node", te + 1.0 / f["thr"][c] + 1e-6)]
    if k in (
        "pcie_link_downtrain_gen_width_one_gpu",  # PCIE_LINK_GEN / _WIDTH lower
        "nvlink_crc_flit_storm_replays_gpu_slow",  # NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL rises
        "xid79_off_bus_gpu_series_vanish_hang",  # Xid 79 (the GPU's other series vanish)
        "hbm_hot_spot_hw_thermal_gpu_slow",  # clock event reason 0x40 (HW thermal)
        "sm_clock_locked_low_by_mgmt_agent_node",  # clock event reason 0x2 (app clocks)
        "degraded_gpu_silent_bottleneck_full_power",  # one GPU stays at full power
    ):
        return [("dcgm", te)]
    if k in (
        "aoc_cable_flap_carrier_bursts_stalls",  # node_network_carrier_changes_total
        "local_nvme_degraded_queue_saturation_host",  # node_disk_io_now
        "nic_pfc_pause_storm_watchdog_port",  # tx_pause_storm_error_events
        "host_dimm_ue_mce_sigbus_rank_hang",  # node_edac_uncorrectable_errors_total
    ):
        return [("node", te)]
    raise ValueError(kind)


def _clk_at_cap(site: Site, cap: float) -> float:
    """Clock factor at which a fully busy GPU draws ``cap`` watts (the power law below)."""
    x = ((cap - site.idle_w) / (site.tdp - site.idle_w) - 0.2) / 0.75
    return float(np.clip(x, 0.05, 1.0) ** (1 / 1.7))


def _episodes(rng, te: float, dur: float, lo: float, hi: float, gap=(60.0, 300.0)) -> list:
    out, t = [], te
    while t < dur - 120:
        d = _r5(rng.uniform(lo, hi))
        out.append((_r5(t), _r5(t) + d))
        t = _r5(t) + d + float(rng.uniform(*gap))
    return out


def _fault_params(kind: str, site: Site, spec: dict, rng, n: int, cul: list[int]) -> dict:
    G = site.G
    k = _base(kind)
    f: dict = {"gpu": {c: int(rng.integers(G)) for c in cul}}
    if k == "pcie_link_downtrain_gen_width_one_gpu":
        gen, width = [
            (site.pcie_gen, 8),
            (site.pcie_gen, 4),
            (1, 16),
            (max(1, site.pcie_gen - 2), 16),
        ][int(rng.integers(4))]
        f["gen"], f["width"] = float(gen), float(width)
        f["pcie"] = float(min(1.0, _GEN_BW[gen] * width / 16 / _GEN_BW[site.pcie_gen]))
        f["pace"] = float(rng.uniform(0.78, 0.93))
    elif k == "nvlink_crc_flit_storm_replays_gpu_slow":
        f["crc"] = float(10 ** rng.uniform(0.0, 1.7))  # CRC flit errors per second
        f["nvl"] = float(rng.uniform(0.6, 0.9))
        f["pace"] = float(rng.uniform(0.85, 0.96))
    elif k == "aoc_cable_flap_carrier_bursts_stalls":
        ports = len(site.ib) if site.ib else len(site.netdevs) - 1
        c0 = cul[0]
        f["port"] = {c0: int(rng.integers(ports))}
        f["flaps"] = _episodes(rng, spec["culprits"][c0], spec["dur"], 5.0, 20.0, (90.0, 420.0))
        f["pace"] = float(rng.uniform(0.9, 0.98))
    elif k == "kernel_panic_node_silent_peers_nccl_hang":
        pass
    elif k == "xid79_off_bus_gpu_series_vanish_hang":
        f["kill_lag"] = _r5(rng.uniform(0, 15))
    elif k == "hbm_hot_spot_hw_thermal_gpu_slow":
        f["mtd"] = {c: float(rng.uniform(8, 16)) for c in cul}
        f["clkf"] = {c: float(rng.uniform(0.55, 0.8)) for c in cul}
    elif k == "sm_clock_locked_low_by_mgmt_agent_node":
        f["lock"] = {c: float(rng.choice([0.55, 0.6, 0.65, 0.7, 0.75])) for c in cul}
    elif k == "cpu_pkg_thermal_throttle_loader_straggler":
        f["thr"] = {c: float(rng.choice([0.5, 1.0, 2.0, 4.0])) for c in cul}
        f["freq"] = {c: float(rng.uniform(0.55, 0.8)) for c in cul}
        f["util"] = {c: float(rng.uniform(0.6, 0.85)) for c in cul}
    elif k == "local_nvme_degraded_queue_saturation_host":
        f["queue"] = float(rng.integers(16, 65))
        f["blocked"] = float(rng.integers(2, 6))
        f["util"] = float(rng.uniform(0.55, 0.85))
    elif k == "nic_pfc_pause_storm_watchdog_port":
        f["port"] = {c: int(rng.integers(len(site.eth_ports))) for c in cul}
        f["pause"] = float(10 ** rng.uniform(4.0, 5.0))  # pause frames per second
        f["drops"] = float(10 ** rng.uniform(2.0, 3.5))
        f["pace"] = float(rng.uniform(0.55, 0.85))
    elif k == "host_dimm_ue_mce_sigbus_rank_hang":
        f["kill_lag"] = _r5(rng.uniform(0, 5))
    elif k == "degraded_gpu_silent_bottleneck_full_power":
        f["pace"] = {c: float(rng.uniform(0.55, 0.75)) for c in cul}
    return f


def _benign_params(kind: str, site: Site, spec: dict, rng, n: int, di: float, ni: float) -> dict:
    b: dict = {}
    dur = spec["dur"]
    warm = spec["init_end"] + spec["init_spread"] + spec["ramp"]
    if kind == "rank0_logger_extra_cpu_frontend_tx":
        b["cpu"] = float(rng.uniform(3, 8))
        b["tx"] = float(rng.uniform(2e7, 1e8))
    elif kind == "staggered_sharded_ckpt_writes_by_node":
        every = float(rng.uniform(600, 1500))
        spread = float(rng.uniform(60, 240))
        rate = float(rng.uniform(5e8, 2e9))
        saves = []
        t = warm + every
        while t < dur - 400:
            for i in range(n):
                a = _r5(t + spread * _u01(spec["rs"], 71, i)[()])
                saves.append((a, _r5(a + rng.uniform(20, 60)), i, rate))
            t += every
        b["saves"] = saves
    elif kind == "dataloader_shard_skew_cpu_nodes":
        k = max(1, round(n * rng.uniform(0.2, 0.4)))
        b["who"] = [int(i) for i in rng.permutation(n)[:k]]
        b["cpu"] = float(rng.uniform(4, 12))
        b["rx"] = float(rng.uniform(1.3, 1.8))
    elif kind == "dcgm_exporter_rolling_restart_gaps":
        a = _r5(rng.uniform(warm, max(warm + 60, dur - 1200)))
        span = float(rng.uniform(300, 900))
        b["who"] = [
            (i, _r5(a + span * i / max(1, n - 1)), _r5(rng.uniform(20, 60))) for i in range(n)
        ]
    elif kind == "prometheus_reload_interval_and_gap":
        b["reload"] = _r5(rng.uniform(warm, max(warm + 60, dur / 2)))
        g0 = _r5(rng.uniform(b["reload"] + 300, max(b["reload"] + 400, dur - 600)))
        b["gaps"] = [(g0, g0 + _r5(rng.uniform(60, 180)))]
    elif kind == "hetero_fb_sku_nodes_same_pace":
        k = max(1, round(n * rng.uniform(0.1, 0.5)))
        b["who"] = [int(i) for i in rng.permutation(n)[:k]]
        b["fb"] = float(rng.choice([0.85, 1.175]))
        b["pw"] = float(rng.uniform(0.97, 1.03))
    elif kind == "elastic_scale_down_node_leaves":
        b["who"] = int(rng.integers(n))
        b["at"] = _r5(rng.uniform(warm + 300, max(warm + 400, dur - 1200)))
        b["idle"] = _r5(rng.uniform(20, 60))
        b["init"] = _r5(rng.uniform(60, 180))
    elif kind == "torch_profiler_trace_subset_ranks":
        b["at"] = _r5(rng.uniform(warm + 120, max(warm + 180, dur - 900)))
        b["len"] = _r5(rng.uniform(60, 240))
        b["fac"] = float(rng.uniform(0.8, 0.92))
        b["who"] = [0] if n < 4 or rng.random() < 0.5 else [0, int(rng.integers(1, n))]
    elif kind == "cold_cache_slow_warmup_one_node":
        w = int(rng.integers(n))
        b["late"] = {w: _r5(rng.uniform(60, 180))}
    return b


# ----------------------------------------------------------------------------------------------
# table / aggregate
# ----------------------------------------------------------------------------------------------


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


_AGGS = ("min", "max", "sum", "avg")


def aggregate(raw: pl.DataFrame, agg_for: Callable[[str], str]) -> pl.DataFrame:
    """Collapse ``device`` per (time, node, metric): counters summed, others by ``agg_for``."""
    mapping = {}
    for m in raw.get_column("metric").unique().to_list():
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
    how = pl.col("metric").replace_strict(mapping, return_dtype=pl.String)
    val = (
        pl.when(how == "min")
        .then(pl.col("min"))
        .when(how == "max")
        .then(pl.col("max"))
        .when(how == "sum")
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
    """Collects samples as integer-coded column parts; one frame at the end."""

    def __init__(self, nodes: list[str], t0_ms: int):
        self.nodes = nodes
        self.t0_ms = t0_ms
        self.metrics: list[str] = []
        self.devices: dict[str, int] = {}
        self.parts: list[tuple] = []

    def add(self, metric: str, devices, t: np.ndarray, vals, mask: np.ndarray) -> None:
        """t (K, N) seconds; vals broadcastable to mask (K, N, len(devices))."""
        vals = np.broadcast_to(np.asarray(vals, dtype=np.float64), mask.shape)
        if metric not in self.metrics:
            self.metrics.append(metric)
        m = self.metrics.index(metric)
        t_ms = np.round(t * 1000.0).astype(np.int64)
        nn = np.broadcast_to(np.arange(t.shape[1], dtype=np.int16), t.shape)
        for j, dev in enumerate(devices):
            mk = mask[:, :, j]
            if not mk.any():
                continue
            d = self.devices.setdefault(dev, len(self.devices))
            self.parts.append((t_ms[mk].astype(np.int32), nn[mk], m, d, vals[:, :, j][mk]))

    def frame(self) -> pl.DataFrame:
        if not self.parts:
            return pl.DataFrame(schema=_SCHEMA)
        parts, self.parts = self.parts, []
        sizes = [len(p[0]) for p in parts]
        t = np.concatenate([p[0] for p in parts]).astype(np.int64) + self.t0_ms
        n = np.concatenate([p[1] for p in parts])
        v = np.concatenate([p[4] for p in parts])
        mc = np.repeat(np.array([p[2] for p in parts], dtype=np.int32), sizes)
        dc = np.repeat(np.array([p[3] for p in parts], dtype=np.int32), sizes)
        del parts
        devs = sorted(self.devices, key=self.devices.__getitem__)
        return pl.DataFrame(
            [
                pl.Series("time", t, dtype=pl.Int64).cast(pl.Datetime("ms", "UTC")),
                pl.Series("node", self.nodes, dtype=pl.String).gather(n),
                pl.Series("metric", self.metrics, dtype=pl.String).gather(mc),
                pl.Series("device", devs, dtype=pl.String).gather(dc),
                pl.Series("value", v, dtype=pl.Float64),
            ]
        )


IDLE, INIT, TRAIN, SPIN, PAUSE, STUCK, WAIT, DIAG, HUNG, GEN = 0, 1, 2, 3, 4, 5, 6, 7, 8, 9
_GIB = 1024.0**3
# per mode: util %, graphics engine, tensor scale, power fraction, fb fraction
_MODE_UTIL = np.array([0, 20, 98, 100, 2, 0, 0, 100, 100, 100], dtype=np.float32)
_MODE_GR = np.array([0, 0.12, 0.93, 0.985, 0.02, 0.0, 0.0, 0.9, 0.98, 0.9], dtype=np.float32)
_MODE_WORK = np.array([0, 0.02, 1.0, 0, 0, 0, 0, 0, 0, 0], dtype=np.float32)
# GEN: autoregressive sampling on rank 0's GPUs (memory-bound decode): GUESS 45 % of range
_MODE_PWR = np.array([0, 0.12, 0.0, 0.16, 0.07, 0.04, 0.03, 0.85, 0.12, 0.45], dtype=np.float32)
_MODE_FB = np.array([0.004, 0.55, 0.9, 0.9, 0.9, 0.9, 0.55, 0.6, 0.9, 0.93], dtype=np.float32)
_INT32_NOT_SUPPORTED = 2147483634.0  # DCGM_INT32_BLANK (0x7ffffff0) + 2
_FP64_NOT_SUPPORTED = 140737488355330.0  # DCGM_FP64_BLANK (2**47) + 2


class _Ctx:
    """Latent state of one job on a 5 s base grid."""

    def __init__(self, job: Job):
        self.job = job
        self.site = s = SITES[job.site]
        sp = self.spec = job.spec
        self.rng = np.random.default_rng([sp["rs"], 20])
        self.N = N = len(job.nodes)
        self.G = G = s.G
        self.dur = sp["dur"]
        self.T = T = int(self.dur // _DT) + 3
        self.tb = np.arange(T) * _DT
        rng = self.rng
        launch = _r5v(10 + 35 * _u01(sp["rs"], 5, np.arange(N)))
        init_end = sp["init_end"] + _r5v(sp["init_spread"] * _u01(sp["rs"], 6, np.arange(N)))
        for n_, extra in sp.get("benign", {}).get("late", {}).items():
            init_end[n_] += extra  # this rank's data loader warms up longer; the others wait
        self.launch, self.init_end = launch, init_end
        self.train0 = float(init_end.max())
        tb = self.tb[:, None]
        mode = np.full((T, N), TRAIN, dtype=np.uint8)
        mode[tb < init_end[None, :]] = INIT
        mode[(tb >= init_end[None, :]) & (tb < self.train0)] = SPIN
        mode[tb < launch[None, :]] = IDLE
        self.mode = mode
        self.gmode: np.ndarray | None = None
        self.pace = np.ones(T, dtype=np.float32)
        ramp = np.clip((self.tb - self.train0) / sp["ramp"], 0, 1).astype(np.float32)
        self.pace *= 0.3 + 0.7 * ramp
        # static per-GPU spread
        self.g_pwr = (1 + 0.018 * rng.standard_normal((N, G))).astype(np.float32)
        self.g_temp = (
            2.2 * rng.standard_normal((N, G)) + 1.6 * rng.standard_normal((N, 1))
        ).astype(np.float32)
        self.g_clk = (1 - 0.006 * np.abs(rng.standard_normal((N, G)))).astype(np.float32)
        self.g_fb = (1 + 0.012 * rng.standard_normal((N, G))).astype(np.float32)
        self.inlet = 24 + 1.5 * rng.standard_normal(N)
        self.inlet_d = np.zeros((T, N), dtype=np.float32)
        self.uptime0 = 86400 * (2 + 60 * rng.random(N))
        bn = sp.get("benign", {})
        if sp["kind"] == "node_rebooted_before_job_start":
            for n_, up in zip(bn["who"], bn["up"], strict=True):
                self.uptime0[n_] = up  # rebooted shortly before the job: counters start low
        self.node_work = np.ones((T, N), dtype=np.float32)
        self.busy: list[tuple[int, int | None, float]] = []  # bottleneck GPUs (None: all)
        self.util_f = np.ones((T, N), dtype=np.float32)
        self.dyn: dict[str, np.ndarray] = {}
        self.events: dict[str, list] = {}  # counter increments: metric -> [(t, n, dev, amount)]
        self.xid = []  # (t, n, g, value)
        self.gone: dict[tuple[int, int], tuple[float, bool]] = {}
        self.dcgm_gaps: dict[int, list[tuple[float, float]]] = {}
        self.xid_clear = np.full(N, np.inf)
        self.ib_clears: list[dict[int, float]] = []
        self.node_dead_dcgm = np.full(N, np.inf)
        self.node_dead_node = np.full(N, np.inf)
        self.blocked = np.zeros((T, N), dtype=np.float32)
        self.cpu_extra = np.zeros((T, N, 3), dtype=np.float32)  # user, system, iowait (CPUs)
        self.cpu_mult = np.ones((T, N), dtype=np.float32)  # training CPU time multiplier
        self.freq_f = np.ones((T, N), dtype=np.float32)
        self.fs_stuck = np.zeros((T, N), dtype=bool)
        self.psi_mem = np.zeros((T, N), dtype=np.float32)
        self.psi_io = np.zeros((T, N), dtype=np.float32)
        self.compact = np.zeros((T, N), dtype=np.float32)
        self.mem_used_extra = np.zeros((T, N), dtype=np.float32)  # fraction of RAM
        self.storage_rx = np.ones((T, N), dtype=np.float32)
        self.port_down: list[tuple[int, int, float, float]] = []
        self.speed_drop: dict[tuple[int, int], tuple[float, float]] = {}
        self.replay_storm: list[tuple[int, int, float, float]] = []
        self.net_extra: dict[str, list] = {}
        self.blank: dict[str, float] = {}
        self.blank_nodes: list[int] = []
        self.tcp_retrans_extra = np.zeros((T, N), dtype=np.float32)
        self.running_extra = np.zeros((T, N), dtype=np.float32)
        # v11 additions
        self.node_gaps: dict[int, list[tuple[float, float]]] = {}
        self.hwcorrupt: list[tuple[float, int, float]] = []  # (t, node, bytes added)
        self.disk_busy = np.zeros((T, N), dtype=np.float32)  # extra io_time s/s
        self.disk_queue = np.zeros((T, N), dtype=np.float32)  # extra in-flight requests
        self.disk_rx = np.ones((T, N), dtype=np.float32)  # local disk read share
        self.disk_w_extra = np.zeros((T, N), dtype=np.float32)
        self.front_tx = np.zeros((T, N), dtype=np.float32)  # extra frontend TX bytes/s
        self.eth_rate: dict[str, np.ndarray] = {}  # ethtool metric -> extra rate (T,N,E)
        self.slave_down: list[tuple[int, int, float]] = []  # (node, slave idx, from)
        self.bond_rate: dict[tuple[int, int], tuple[float, float]] = {}  # (n, bond) -> (t, rate)
        self.ib_width: dict[tuple[int, int], tuple[float, float]] = {}  # (n, p) -> (t, rate)
        self.pgfault = np.zeros((T, N), dtype=np.float32)
        self.ctx_extra = np.zeros((T, N), dtype=np.float32)
        self.keep_even_before = -1.0  # prom_scrape_interval_reload
        self.newer_nodes: list[int] = []
        self.hung: list[tuple[int, int, float]] = []  # (node, gpu, from)
        self.crc_storm: tuple | None = None
        self.pcie_link: tuple | None = None
        # v12 additions
        self.front_down: list[tuple[int, float, float]] = []  # (node, a, z) frontend down
        self.xw_extra: dict[tuple[int, int], tuple[float, float]] = {}  # port xmit-wait factor
        self.ib_share: dict[tuple[int, int], tuple[float, float]] = {}  # port traffic factor
        self.cpu_temp = np.zeros((T, N), dtype=np.float32)
        self.thr: list[tuple[int, float, float]] = []  # (node, from, throttles/s)
        self.oom: list[tuple[float, int]] = []
        # v13 additions
        self.steal = np.zeros((T, N), dtype=np.float32)  # CPU-seconds/s stolen (guests)
        self.softirq = np.zeros((T, N), dtype=np.float32)  # extra softirq CPU-seconds/s
        self.front_rx = np.zeros((T, N), dtype=np.float32)  # extra frontend RX bytes/s
        self.pw_report = np.ones(N, dtype=np.float32)  # driver's power reading vs the truth
        self.fb_extra = np.zeros(N, dtype=np.float32)  # MiB the driver keeps for itself
        self.rename: dict[int, float] = {}  # node -> time its exporter renamed the reasons
        self.oos_extra: dict[tuple[int, int], tuple[float, float]] = {}  # (n, port) -> (t, /s)
        # v14 additions
        self.mem_total_f = np.ones(N)  # share of the site's RAM the node's kernel sees
        self.fb_orphan = np.zeros(N, dtype=np.float32)  # MiB held by a leftover process
        # v17 additions
        self.cache_drop = np.zeros((T, N), dtype=np.float32)  # page cache reclaimed
        self.pgmaj = np.zeros((T, N), dtype=np.float32)  # extra major faults/s
        self.reconf: dict[int, float] = {}  # node -> time its DCGM field group changed
        # v16 additions
        self.port_state: list[tuple[int, int, float, float, float]] = []  # n, p, from, st, phys
        self.net_f = np.ones(T, dtype=np.float32)  # job-wide fabric traffic modulation
        self.fb_scale = np.ones(N, dtype=np.float32)  # another SKU's memory size
        self.replay_burst: list[tuple[int, int, float, float]] = []  # n, g, t, replays at once

    # helpers ------------------------------------------------------------------------------
    def gm(self) -> np.ndarray:
        if self.gmode is None:
            self.gmode = np.repeat(self.mode[:, :, None], self.G, axis=2)
        return self.gmode

    def d(self, name: str, init: float = 1.0) -> np.ndarray:
        if name not in self.dyn:
            self.dyn[name] = np.full((self.T, self.N, self.G), init, dtype=np.float32)
        return self.dyn[name]

    def idx(self, t: float) -> int:
        return int(min(self.T - 1, max(0, np.floor(t / _DT + 1e-9))))

    def ev(self, metric: str, t: float, n: int, dev: int, amount: float) -> None:
        self.events.setdefault(metric, []).append((float(t), int(n), int(dev), float(amount)))

    def hang(self, t0: float, exit_lag: float = 10.0) -> float:
        """Every other rank blocks in NCCL from t0 until the watchdog; then all exit."""
        sp = self.spec
        i0 = self.idx(t0)
        texit = t0 + sp["nccl_timeout"] + exit_lag
        i1 = self.idx(texit)
        m = self.mode
        live = m[i0:i1] != IDLE
        m[i0:i1][live] = SPIN
        m[i1:] = IDLE
        self.exit_t = texit
        return texit

    def stall(self, a: float, z: float, who: int | None = None) -> None:
        """The job makes no progress in [a, z): peers spin in NCCL, ``who`` waits elsewhere."""
        ia, iz = self.idx(a), self.idx(z)
        sel = self.mode[ia:iz] == TRAIN
        self.mode[ia:iz][sel] = SPIN
        if who is not None:
            w = self.mode[ia:iz, who] == SPIN
            self.mode[ia:iz, who][w] = PAUSE


def _slow_all(ctx: _Ctx, t0: float, fac: float) -> None:
    ctx.pace[ctx.idx(t0) :] *= fac


def _slow_all(ctx: _Ctx, t0: float, fac: float) -> None:
    ctx.pace[ctx.idx(t0) :] *= fac


def _restart(ctx: _Ctx, a: float, idle: float, init: float) -> None:
    """Every rank exits at ``a``, the launcher restarts them: idle, init, ramp from a checkpoint."""
    ia, ib, ic = ctx.idx(a), ctx.idx(a + idle), ctx.idx(a + idle + init)
    ctx.mode[ia:ib] = IDLE
    ctx.mode[ib:ic] = INIT
    n_r = min(18, ctx.T - ic)
    if n_r > 0:
        ctx.pace[ic : ic + n_r] *= np.linspace(0.3, 1.0, n_r, dtype=np.float32)


def _apply_kind(ctx: _Ctx) -> None:
    kind = ctx.spec["kind"]
    k = _base(kind)
    sp = ctx.spec
    f = sp.get("fault", {})
    b = sp.get("benign", {})
    s = ctx.site
    cul = sp["culprits"]
    N = ctx.N
    # synchronous checkpoints (decoy, all nodes)
    for a, z in sp["ckpt"]:
        ia, iz = ctx.idx(a), ctx.idx(z)
        sel = ctx.mode[ia:iz] == TRAIN
        ctx.mode[ia:iz][sel] = PAUSE
        ctx.cpu_extra[ia:iz, :, 0] += 3.0
        ctx.net_extra.setdefault("ckpt_w", []).append((a, z))
    for n, a, d in sp["decoy_cpu"]:
        ctx.cpu_extra[ctx.idx(a) : ctx.idx(a + d), n, 0] += 6.0
    first = sorted(cul.items(), key=lambda kv: kv[1])
    if k == "pcie_link_downtrain_gen_width_one_gpu":
        c, te = first[0]
        g = f["gpu"][c]
        ctx.pcie_link = (c, g, te, f["gen"], f["width"])
        ctx.d("pcie")[ctx.idx(te) :, c, g] = f["pcie"]
        ctx.busy.append((c, g, te))
        _slow_all(ctx, te, f["pace"])
    elif k == "nvlink_crc_flit_storm_replays_gpu_slow":
        c, te = first[0]
        g = f["gpu"][c]
        ctx.crc_storm = (c, g, te, f["crc"])
        ctx.d("nvlf")[ctx.idx(te) :, c, g] = f["nvl"]
        ctx.busy.append((c, g, te))
        _slow_all(ctx, te, f["pace"])
    elif k == "aoc_cable_flap_carrier_bursts_stalls":
        c, te = first[0]
        p = f["port"][c]
        for a, z in f["flaps"]:
            ctx.port_down.append((c, p, a, z))
            ctx.ev(NET_CARRIER, a, c, p + 1, 1)
            ctx.ev(NET_CARRIER, z, c, p + 1, 1)
            if ET_LINK_DOWN in s.ethtool and p < len(s.eth_ports):
                ctx.ev(ET_LINK_DOWN, a, c, p, 1)
            if IB_DOWNED in s.ib_extra:
                ctx.ev(IB_DOWNED, a, c, p, 1)
            ctx.stall(a, z + 10.0)  # NCCL/RDMA retries until the link is back
        _slow_all(ctx, te, f["pace"])
    elif k == "kernel_panic_node_silent_peers_nccl_hang":
        c, te = first[0]
        ctx.node_dead_dcgm[c] = te
        ctx.node_dead_node[c] = te
        ctx.hang(te)
    elif k == "xid79_off_bus_gpu_series_vanish_hang":
        c, te = first[0]
        g = f["gpu"][c]
        ctx.xid.append((te, c, g, 79))
        ctx.gone[(c, g)] = (te, True)
        kill = te + f["kill_lag"]
        ctx.hang(kill)
        ctx.mode[ctx.idx(kill) :, c] = IDLE
    elif k == "hbm_hot_spot_hw_thermal_gpu_slow":
        mtd, clkf = ctx.d("mtd", 0.0), ctx.d("clkf")
        worst = 1.0
        for c, te in first:
            g = f["gpu"][c]
            mtd[ctx.idx(te) :, c, g] = f["mtd"][c]
            clkf[ctx.idx(te) :, c, g] = f["clkf"][c]
            ctx.busy.append((c, g, te))
            p = 0.3 + 0.7 * f["clkf"][c]
            if p < worst:
                ctx.pace[ctx.idx(te) :] *= p / worst
                worst = p
    elif k == "sm_clock_locked_low_by_mgmt_agent_node":
        lock = ctx.d("lock")
        worst = 1.0
        for c, te in first:
            lock[ctx.idx(te) :, c, :] = f["lock"][c]
            ctx.busy.append((c, None, te))
            p = 0.2 + 0.8 * f["lock"][c]
            if p < worst:
                ctx.pace[ctx.idx(te) :] *= p / worst
                worst = p
    elif k == "cpu_pkg_thermal_throttle_loader_straggler":
        worst = 1.0
        for c, te in first:
            i0 = ctx.idx(te)
            ctx.thr.append((c, te, f["thr"][c]))
            ctx.freq_f[i0:, c] *= f["freq"][c]
            ctx.cpu_temp[i0:, c] += 12.0
            ctx.util_f[i0:, c] = f["util"][c]
            ctx.cpu_mult[i0:, c] = 1.0 / f["freq"][c]
            p = f["util"][c]
            if p < worst:
                ctx.pace[i0:] *= p / worst
                worst = p
    elif k == "local_nvme_degraded_queue_saturation_host":
        c, te = first[0]
        i0 = ctx.idx(te)
        ctx.disk_queue[i0:, c] += f["queue"]
        ctx.disk_busy[i0:, c] += 0.95
        ctx.disk_rx[i0:, c] *= 0.4
        ctx.blocked[i0:, c] += f["blocked"]
        ctx.cpu_extra[i0:, c, 2] += 0.5 * f["blocked"]
        ctx.psi_io[i0:, c] += 0.6
        ctx.util_f[i0:, c] = f["util"]
        ctx.pace[i0:] *= f["util"]
    elif k == "nic_pfc_pause_storm_watchdog_port":
        c, te = first[0]
        p = f["port"][c]
        E = len(s.eth_ports)
        i0 = ctx.idx(te)
        ctx.ev(ET_STORM, te, c, p, 1)
        for mname, r in (
            (ET_TX_PAUSE, f["pause"]),
            (ET_TX_PAUSE_DUR, f["pause"] * 3.0),
            (ET_DISCARDS, f["drops"]),
        ):
            x = np.zeros((ctx.T, N, E), dtype=np.float64)
            x[i0:, c, p] = r
            ctx.eth_rate[mname] = x
        ctx.ib_share[(c, p)] = (te, 0.6)
        _slow_all(ctx, te, f["pace"])
    elif k == "host_dimm_ue_mce_sigbus_rank_hang":
        c, te = first[0]
        ctx.ev(EDAC_UE, te, c, 0, 1)
        ctx.hwcorrupt.append((te, c, 4096.0))
        kill = te + f["kill_lag"]
        ctx.hang(kill)
        ctx.mode[ctx.idx(kill) :, c] = IDLE
    elif k == "degraded_gpu_silent_bottleneck_full_power":
        worst = 1.0
        for c, te in first:
            g = f["gpu"][c]
            ctx.busy.append((c, g, te))
            p = f["pace"][c]
            if p < worst:
                ctx.pace[ctx.idx(te) :] *= p / worst
                worst = p
    # ---- healthy kinds
    elif k == "rank0_logger_extra_cpu_frontend_tx":
        up = ctx.mode[:, 0] != IDLE
        ctx.cpu_extra[:, 0, 0] += b["cpu"] * up
        ctx.front_tx[:, 0] += b["tx"] * up
        ctx.running_extra[:, 0] += 2.0 * up
    elif k == "staggered_sharded_ckpt_writes_by_node":
        for a, z, n, r in b["saves"]:
            ctx.net_extra.setdefault("save", []).append((a, z, n, r))
            ctx.cpu_extra[ctx.idx(a) : ctx.idx(z), n, 0] += 2.0
    elif k == "dataloader_shard_skew_cpu_nodes":
        for n in b["who"]:
            tr = (ctx.mode[:, n] == TRAIN).astype(np.float32)
            ctx.cpu_extra[:, n, 0] += b["cpu"] * tr
            ctx.storage_rx[:, n] *= b["rx"]
            ctx.pgfault[:, n] += 3e3 * tr
    elif k == "dcgm_exporter_rolling_restart_gaps":
        for n, a, d in b["who"]:
            ctx.dcgm_gaps.setdefault(n, []).append((a, a + d))
            ctx.xid_clear[n] = a + d
    elif k == "prometheus_reload_interval_and_gap":
        ctx.keep_even_before = b["reload"]
    elif k == "hetero_fb_sku_nodes_same_pace":
        for n in b["who"]:
            ctx.fb_scale[n] = b["fb"]
            ctx.g_pwr[n] *= b["pw"]
    elif k == "elastic_scale_down_node_leaves":
        w = b["who"]
        _restart(ctx, b["at"], b["idle"], b["init"])
        ctx.mode[ctx.idx(b["at"]) :, w] = IDLE
    elif k == "torch_profiler_trace_subset_ranks":
        ia, iz = ctx.idx(b["at"]), ctx.idx(b["at"] + b["len"])
        ctx.pace[ia:iz] *= b["fac"]
        for n in b["who"]:
            ctx.cpu_extra[ia:iz, n, 0] += 3.0
            ctx.disk_w_extra[ia:iz, n] += 1e8
            ctx.disk_busy[ia:iz, n] += 0.1
    elif k == "cold_cache_slow_warmup_one_node":
        for n, extra in b["late"].items():
            i1 = ctx.idx(ctx.init_end[n])
            ctx.front_rx[ctx.idx(ctx.init_end[n] - extra) : i1, n] += 8e8
            ctx.disk_w_extra[ctx.idx(ctx.init_end[n] - extra) : i1, n] += 6e8


# ---------------------------------------------------------------------------------------------
# Physics: clocks, power, temperature (per base step)
# ---------------------------------------------------------------------------------------------


def _iir(x: np.ndarray, tau: float) -> np.ndarray:
    a = 1 - np.exp(-_DT / tau)
    y = np.empty_like(x)
    y[0] = x[0]
    for i in range(1, len(x)):
        y[i] = y[i - 1] + a * (x[i] - y[i - 1])
    return y


def _physics(ctx: _Ctx) -> None:
    s, T, N, G = ctx.site, ctx.T, ctx.N, ctx.G
    for n, g, t0 in ctx.hung:  # a GPU whose context cannot be torn down
        ctx.gm()[ctx.idx(t0) :, n, g] = HUNG
    gm = ctx.gmode if ctx.gmode is not None else ctx.mode[:, :, None]
    gmb = np.broadcast_to(gm, (T, N, G))
    train = gmb == TRAIN
    work = _MODE_WORK[gm] * ctx.pace[:, None, None] * ctx.node_work[:, :, None]
    work = np.array(np.broadcast_to(work, (T, N, G)), dtype=np.float32)
    flow = np.minimum(work, 1.0)  # bytes moved per second follow the job's pace
    # the bottleneck GPU(s) are busy the whole step; their peers wait for them
    i_ep: dict[int, float] = {}
    for n, g, t0 in ctx.busy:
        if t0 < 0:
            i_ep[n] = -t0
            continue
        if n in i_ep:  # an episode [a, z)
            a = i_ep.pop(n)
            sl = slice(ctx.idx(a), ctx.idx(t0))
        else:
            sl = slice(ctx.idx(t0), T)
        gg = slice(None) if g is None else g
        w = work[sl, n, gg]
        work[sl, n, gg] = np.where(train[sl, n, gg], 1.0, w)
    work = np.minimum(work, 1.0)
    clk = np.broadcast_to(ctx.g_clk[None], (T, N, G)).astype(np.float32)
    if "hws" in ctx.dyn:
        clk = clk * ctx.dyn["hws"]
    if "brake" in ctx.dyn:
        clk = clk * ctx.dyn["brake"]
    if "pcap" in ctx.dyn:
        clk = clk * ctx.dyn["pcap"]
    if "lock" in ctx.dyn:  # application clocks locked below boost (nvidia-smi -lgc)
        clk = clk * ctx.dyn["lock"]
    if "clkf" in ctx.dyn:  # hardware thermal slowdown (HBM too hot)
        clk = clk * ctx.dyn["clkf"]
    pf = np.where(train, 0.2 + 0.75 * work * clk**1.7, _MODE_PWR[gm]).astype(np.float32)
    pf = pf * ctx.g_pwr[None]
    rng_w = s.tdp - s.idle_w
    pw = s.idle_w + pf * rng_w
    cap = ctx.dyn["cap"] if "cap" in ctx.dyn else np.full((T, N, G), s.tdp, dtype=np.float32)
    pw = np.minimum(pw, cap * 0.995)
    inlet = ctx.inlet[None, :, None] + ctx.inlet_d[:, :, None]
    if "tdelta" in ctx.dyn:  # a GPU-local cooling defect (heatsink / cold plate / fan zone)
        inlet = inlet + ctx.dyn["tdelta"]
    target = inlet + ctx.g_temp[None] + s.r_th * pw
    temp = _iir(target.astype(np.float32), 45.0)
    # closed-loop software thermal slowdown on GPUs that get hot
    hot = np.argwhere((temp > s.slow_temp - 0.5).any(axis=0))
    a = 1 - np.exp(-_DT / 45.0)
    pslow = np.ones(T, dtype=np.float32)
    for n, g in hot:
        tt = np.empty(T, dtype=np.float32)
        tt[0] = temp[0, n, g]
        c = 1.0
        for i in range(1, T):
            busy = train[i, n, g]
            if busy and tt[i - 1] > s.slow_temp:
                c = max(0.6, c - 0.02)
            elif c < 1.0 and tt[i - 1] < s.slow_temp - 2:
                c = min(1.0, c + 0.01)
            clk[i, n, g] = clk[i, n, g] * c
            if busy:
                pw[i, n, g] = s.idle_w + (0.2 + 0.75 * work[i, n, g] * clk[i, n, g] ** 1.7) * rng_w
            tgt = inlet[i, n, min(g, inlet.shape[2] - 1)] + ctx.g_temp[n, g] + s.r_th * pw[i, n, g]
            tt[i] = tt[i - 1] + a * (tgt - tt[i - 1])
        temp[:, n, g] = tt
        slow = np.clip(clk[:, n, g] / ctx.g_clk[n, g], 0.3, 1.0)
        pslow = np.minimum(pslow, np.where(train[:, n, g], slow, 1.0).astype(np.float32))
    if len(hot):
        ctx.pace *= pslow
        hot_m = np.zeros((N, G), dtype=bool)
        hot_m[hot[:, 0], hot[:, 1]] = True
        work = np.where(hot_m[None] & train & (pslow[:, None, None] < 0.999), 1.0, work)
        work = np.where(~hot_m[None], work * pslow[:, None, None], work)
        flow = flow * pslow[:, None, None]
    ctx.work = work
    ctx.flow = flow
    ctx.clk = clk
    ctx.pw = pw.astype(np.float32)
    ctx.temp = temp.astype(np.float32)
    ctx.cap = cap


# ---------------------------------------------------------------------------------------------
# Emission
# ---------------------------------------------------------------------------------------------


def _cum_events(ctx: _Ctx, metric: str, t: np.ndarray, ndev: int) -> np.ndarray:
    """(K,N,ndev) cumulative increments of ctx.events[metric] up to time t (K,N)."""
    out = np.zeros((*t.shape, ndev), dtype=np.float64)
    for te, n, dev, amt in ctx.events.get(metric, []):
        if dev < ndev:
            out[:, n, dev] += np.where(t[:, n] >= te, amt, 0.0)
    return out


def _render(job: Job) -> pl.DataFrame:
    ctx = _Ctx(job)
    _apply_kind(ctx)
    _physics(ctx)
    rows = _Rows(job.nodes, int(job.start.timestamp() * 1000))
    _emit_dcgm(ctx, rows)
    _emit_node(ctx, rows)
    df = rows.frame()
    if ctx.newer_nodes:
        df = _mixed_fieldset(ctx, df)
    if ctx.rename:
        df = _renamed_reasons(ctx, df)
    if ctx.reconf:
        df = _reconfigured_fields(ctx, df)
    return df


def _reconfigured_fields(ctx: _Ctx, df: pl.DataFrame) -> pl.DataFrame:
    """dcgm-exporter restarted with a field group without the profiling (DCP) fields."""
    t0 = ctx.job.start
    when = pl.DataFrame(
        {
            "node": [ctx.job.nodes[n] for n in ctx.reconf],
            "_t": [t0 + timedelta(seconds=t) for t in ctx.reconf.values()],
        },
        schema={"node": pl.String, "_t": pl.Datetime("ms", "UTC")},
    )
    df = df.join(when, on="node", how="left")
    gone = pl.col("metric").is_in(list(_DCP)) & (pl.col("time") >= pl.col("_t"))
    return df.filter(~gone.fill_null(False)).drop("_t")


def _renamed_reasons(ctx: _Ctx, df: pl.DataFrame) -> pl.DataFrame:
    """After a node's dcgm-exporter upgrade (DCGM 3.3 -> 4) the clock reasons field is
    published under its new name, DCGM_FI_DEV_CLOCKS_EVENT_REASONS."""
    t0 = ctx.job.start
    when = pl.DataFrame(
        {
            "node": [ctx.job.nodes[n] for n in ctx.rename],
            "_t": [t0 + timedelta(seconds=t) for t in ctx.rename.values()],
        },
        schema={"node": pl.String, "_t": pl.Datetime("ms", "UTC")},
    )
    df = df.join(when, on="node", how="left")
    new = (pl.col("metric") == CLOCK_THROTTLE) & (pl.col("time") >= pl.col("_t"))
    return df.with_columns(
        pl.when(new.fill_null(False))
        .then(pl.lit(CLOCKS_EVENT))
        .otherwise(pl.col("metric"))
        .alias("metric")
    ).drop("_t")


def _mixed_fieldset(ctx: _Ctx, df: pl.DataFrame) -> pl.DataFrame:
    """Some nodes run another dcgm-exporter release: the reasons field under its other name;
    an older release (on DCGM 4 sites) also lacks the violation counters."""
    s = ctx.site
    other = CLOCKS_EVENT if s.reasons == CLOCK_THROTTLE else CLOCK_THROTTLE
    sub = pl.col("node").is_in([ctx.job.nodes[i] for i in ctx.newer_nodes])
    df = df.with_columns(
        pl.when(sub & (pl.col("metric") == s.reasons))
        .then(pl.lit(other))
        .otherwise(pl.col("metric"))
        .alias("metric")
    )
    if other == CLOCK_THROTTLE:
        df = df.filter(~(sub & pl.col("metric").is_in([POWER_VIOL, THERMAL_VIOL])))
    return df


def _gather(arr: np.ndarray, b: np.ndarray) -> np.ndarray:
    """arr (T,N[,G]) at base indices b (K,N) -> (K,N[,G])."""
    n = np.arange(b.shape[1])[None, :]
    return arr[b, n]


def _emit_dcgm(ctx: _Ctx, rows: _Rows) -> None:
    s, sp, N, G = ctx.site, ctx.spec, ctx.N, ctx.G
    rng = ctx.rng
    nodes = np.arange(N)
    t, lost = _scrape_grid(
        sp["rs"], _SALT_DCGM, nodes, ctx.dur, sp["di"], sp.get("gaps", []), sp["loss"]
    )
    coll = _node_collect(sp, s, N)
    ph = _collect_phase(sp["rs"], nodes, coll)
    m = np.floor((t - ph[None]) / coll[None])
    keep = (~lost) & (m >= 0) & (t < ctx.dur)
    keep &= t < ctx.node_dead_dcgm[None]
    if ctx.keep_even_before > 0:  # the scrape interval was twice as long before a reload
        kk = np.arange(t.shape[0])[:, None]
        keep &= ~((t < ctx.keep_even_before) & (kk % 2 == 1))
    for n, gaps in ctx.dcgm_gaps.items():
        for a, z in gaps:
            keep[:, n] &= ~((t[:, n] >= a) & (t[:, n] < z))
    m = np.maximum(m, 0).astype(np.int64)
    ct = ph[None] + m * coll[None]
    b = np.clip((ct / _DT).astype(np.int64), 0, ctx.T - 1)
    K = t.shape[0]
    M = int(m.max()) + 2
    mask = np.array(np.broadcast_to(keep[:, :, None], (K, N, G)))
    xmask = mask.copy()
    for (n, g), (tg, with_xid) in ctx.gone.items():
        after = ct[:, n] >= tg
        mask[:, n, g] &= ~after
        if not with_xid:
            xmask[:, n, g] &= ~after

    def noise(sd: float) -> np.ndarray:
        z = rng.standard_normal((M, N, G)).astype(np.float32) * sd
        return z[m, nodes[None, :]]

    gm = (
        ctx.gmode if ctx.gmode is not None else np.broadcast_to(ctx.mode[:, :, None], (ctx.T, N, G))
    )
    mode = _gather(gm, b)
    work = _gather(ctx.work, b)
    flow = _gather(ctx.flow, b)
    clk = _gather(ctx.clk, b)
    pw = _gather(ctx.pw, b)
    temp = _gather(ctx.temp, b)
    train = mode == TRAIN
    idle_like = (mode == IDLE) | (mode == WAIT) | (mode == PAUSE) | (mode == STUCK)
    fields = set(s.fields)
    devs = [str(i) for i in range(G)]

    def add(metric, vals, mk=None):
        if metric in fields:
            v = vals
            if metric in ctx.blank and ctx.blank_nodes:
                v = np.array(np.broadcast_to(vals, (K, N, G)), dtype=np.float64)
                v[:, ctx.blank_nodes, :] = ctx.blank[metric]
            rows.add(metric, devs, t, v, mask if mk is None else mk)

    # clocks
    smc = np.where(idle_like, s.sm_idle, s.sm_max * clk)
    smc = np.where(mode == DIAG, s.sm_max * 0.97, smc)
    smc = np.round(smc / 15.0) * 15.0
    add(SM_CLOCK, smc)
    memf = _gather(ctx.dyn["memf"], b) if "memf" in ctx.dyn else 1.0
    add(MEM_CLOCK, np.round(np.full((K, N, G), s.mem_clk) * memf))
    tmp = temp + noise(0.35)
    add(GPU_TEMP, np.round(tmp))
    mtd = _gather(ctx.dyn["mtd"], b) if "mtd" in ctx.dyn else 0.0
    add(MEMORY_TEMP, np.round(tmp + 4.0 + 3.0 * (pw / s.tdp) + mtd))
    rep_f = ctx.pw_report[None, :, None]
    pwn = np.minimum(pw * rep_f * (1 + noise(0.012)), s.tdp * 1.06)
    add(POWER, np.round(pwn, 3))
    if ENERGY in fields:
        pw_base = ctx.pw.astype(np.float64)
        cum = np.concatenate([np.zeros((1, N, G)), np.cumsum(pw_base * _DT, axis=0)[:-1]], axis=0)
        e0 = 1e3 * (3600 * 24 * (5 + 60 * rng.random((N, G))) * s.tdp * 0.4)
        frac = (ct - b * _DT)[:, :, None]
        add(ENERGY, np.round(e0[None] + 1e3 * rep_f * (_gather(cum, b) + pw * frac)))
    if PCIE_REPLAY in fields:
        hist = np.where(rng.random((N, G)) < 0.15, rng.integers(1, 500, (N, G)), 0)
        for _ in range(int(rng.poisson(0.01 * N * G * ctx.dur / 900))):
            ctx.ev(
                PCIE_REPLAY,
                _r5(rng.uniform(0, ctx.dur)),
                int(rng.integers(N)),
                int(rng.integers(G)),
                1,
            )
        rep = hist[None] + _cum_events(ctx, PCIE_REPLAY, ct, G)
        for n, g, te, r in ctx.replay_storm:
            rep[:, n, g] += np.floor(np.maximum(ct[:, n] - te, 0.0) * r)
        for n, g, te, r in ctx.replay_burst:
            rep[:, n, g] += r * (ct[:, n] >= te)
        add(PCIE_REPLAY, rep)
    util = np.where(train, np.minimum(100, 97.5 + 2.0 * np.abs(noise(1.0))), _MODE_UTIL[mode])
    uf = _gather(ctx.util_f, b)[:, :, None]
    util = np.where(train & (uf < 1), 100 * uf + 3 * noise(1.0), util)
    util = np.where(mode == INIT, 5 + 30 * np.abs(noise(0.5)), util)
    add(GPU_UTIL, np.clip(np.round(util), 0, 100))
    add(MEM_COPY_UTIL, np.clip(np.round(np.where(train, 35 * flow + 3 * noise(1.0), 0)), 0, 100))
    add(ENC_UTIL, np.zeros((K, N, G)))
    add(DEC_UTIL, np.zeros((K, N, G)))
    # Xid: stale application Xids on 1.5 % of GPUs (cleared by an exporter restart)
    xv = np.zeros((K, N, G))
    stale = rng.random((N, G)) < 0.015
    xv[:, stale] = rng.choice([13, 31, 43], size=int(stale.sum()))[None, :]
    xv = np.where((ct >= ctx.xid_clear[None])[:, :, None], 0.0, xv)
    for _te, n, g, _v in ctx.xid:  # the faulting GPU had no stale Xid before
        xv[:, n, g] = 0.0
    for te, n, g, v in sorted(ctx.xid):
        xv[:, n, g] = np.where(ct[:, n] >= te, v, xv[:, n, g])
    add(XID, xv, xmask)
    fbm = s.fb_mib * ctx.fb_scale[None, :, None]
    fbu = np.where(mode == IDLE, fbm * 0.004, fbm * _MODE_FB[mode] * ctx.g_fb[None])
    fbu = np.round(fbu + np.where(mode == IDLE, 0.0, ctx.fb_extra[None, :, None]))
    fbu = fbu + np.round(ctx.fb_orphan)[None, :, None]
    resv = 0.006 * s.fb_mib if FB_RESERVED in fields else 0.0
    add(FB_USED, fbu)
    add(FB_FREE, np.round(fbm - resv - fbu))
    add(FB_RESERVED, np.full((K, N, G), np.round(resv)))
    if NVLINK_BW in fields:
        nv = np.where(train, s.nvl_bw * flow * (1 + noise(0.03)), 0.0)
        if "nvlf" in ctx.dyn:  # NVSwitch trunk links lost: less NVLink bandwidth
            nv = nv * _gather(ctx.dyn["nvlf"], b)
        add(NVLINK_BW, np.round(np.maximum(nv, 0)))
    if NVL_REPLAY in fields:
        hist = np.where(rng.random((N, G)) < 0.04, rng.integers(1, 30, (N, G)), 0)
        rp = hist[None] + _cum_events(ctx, NVL_REPLAY, ct, G)
        if ctx.crc_storm is not None:
            n_, g_, te_, r_ = ctx.crc_storm
            rp[:, n_, g_] += np.floor(np.maximum(ct[:, n_] - te_, 0.0) * r_ * 0.3)
        add(NVL_REPLAY, rp)
        add(NVL_RECOVERY, _cum_events(ctx, NVL_RECOVERY, ct, G))
    if NVL_CRC in fields:
        hist = np.where(rng.random((N, G)) < 0.05, rng.integers(1, 40, (N, G)), 0).astype(float)
        crc = hist[None] + _cum_events(ctx, NVL_CRC, ct, G)
        if ctx.crc_storm is not None:
            n_, g_, te_, r_ = ctx.crc_storm
            crc[:, n_, g_] += np.floor(np.maximum(ct[:, n_] - te_, 0.0) * r_) + (ct[:, n_] >= te_)
        add(NVL_CRC, crc)
    if ECC_SBE in fields:
        hist = np.where(rng.random((N, G)) < 0.1, rng.integers(1, 60, (N, G)), 0)
        add(ECC_SBE, hist[None] + _cum_events(ctx, ECC_SBE, ct, G))
        add(ECC_DBE, _cum_events(ctx, ECC_DBE, ct, G))
    if UNC_REMAP in fields:
        unc = (rng.random((N, G)) < 0.004).astype(float)[None] + _cum_events(ctx, UNC_REMAP, ct, G)
        add(UNC_REMAP, unc)
        cr = np.where(rng.random((N, G)) < 0.05, rng.integers(1, 9, (N, G)), 0)
        add(COR_REMAP, cr[None].astype(float) + _cum_events(ctx, COR_REMAP, ct, G))
        add(REMAP_FAIL, np.minimum(_cum_events(ctx, REMAP_FAIL, ct, G), 1.0))
    if RET_SBE in fields:
        rs_ = np.where(rng.random((N, G)) < 0.05, rng.integers(1, 4, (N, G)), 0)[None]
        ev = _cum_events(ctx, RET_SBE, ct, G)
        add(RET_SBE, rs_ + ev)
        dv = _cum_events(ctx, RET_DBE, ct, G)
        add(RET_DBE, dv)
        add(RET_PEND, ((ev + dv) > 0).astype(float))
    # DCP
    tensor0, dram0 = 0.42, 0.38
    diag = mode == DIAG
    gr = np.where(train, 0.93 + 0.01 * noise(1.0), _MODE_GR[mode])
    add(PROF_GR, np.clip(gr, 0, 1).round(6))
    ten = np.where(train, tensor0 * work * (1 + noise(0.02)), np.where(diag, 0.55, 0.0))
    ten = np.where(mode == GEN, 0.06 * (1 + noise(0.05)), ten)
    add(PROF_TENSOR, np.clip(ten, 0, 1).round(6))
    dram = np.where(train, dram0 * flow * (1 + noise(0.02)), np.where(mode == SPIN, 0.002, 0.0))
    dram = np.where(mode == GEN, 0.55 * (1 + noise(0.03)), dram)
    add(PROF_DRAM, np.clip(np.where(diag, 0.7, dram), 0, 1).round(6))
    pf = _gather(ctx.dyn["pcie"], b) if "pcie" in ctx.dyn else 1.0
    rate = s.pcie_bw * flow * pf * (1 + noise(0.04))
    rate = np.where(train, rate, np.where((mode == INIT) | diag, 2e8, 2e6))
    add(PROF_PCIE_TX, np.round(np.maximum(rate * 0.6, 0)))
    add(PROF_PCIE_RX, np.round(np.maximum(rate, 0)))
    add(PCIE_TX_TP, np.round(np.maximum(rate * 0.6, 0) / 1024))
    add(PCIE_RX_TP, np.round(np.maximum(rate, 0) / 1024))
    lg = np.full((K, N, G), float(s.pcie_gen))
    lw = np.full((K, N, G), 16.0)
    if ctx.pcie_link is not None:
        n_, g_, te_, gen_, w_ = ctx.pcie_link
        lg[:, n_, g_] = np.where(ct[:, n_] >= te_, gen_, lg[:, n_, g_])
        lw[:, n_, g_] = np.where(ct[:, n_] >= te_, w_, lw[:, n_, g_])
    add(LINK_GEN, lg)
    add(LINK_WIDTH, lw)
    capv = _gather(ctx.cap, b)
    add(POWER_LIMIT, np.round(capv, 1))
    hws = _gather(ctx.dyn["hws"], b) if "hws" in ctx.dyn else None
    if s.reasons:
        r = np.zeros((K, N, G), dtype=np.int64)
        r |= np.where(idle_like, 0x1, 0)
        near = train & (pw >= 0.98 * capv)
        r |= np.where(near, 0x4, 0)
        if hws is not None:
            r |= np.where((hws < 1) & ~(mode == IDLE), 0x8, 0)
        if "brake" in ctx.dyn:
            brk = _gather(ctx.dyn["brake"], b) < 1
            r |= np.where(brk & ~(mode == IDLE), 0x88, 0)
        if "lock" in ctx.dyn:
            r |= np.where((_gather(ctx.dyn["lock"], b) < 1) & ~idle_like, 0x2, 0)
        if "mtd" in ctx.dyn:
            r |= np.where((_gather(ctx.dyn["mtd"], b) > 0) & train, 0x40, 0)
        hot = train & (temp > s.slow_temp - 0.5)
        r |= np.where(hot, 0x20, 0)
        add(s.reasons, r.astype(np.float64))
    if POWER_VIOL in fields or THERMAL_VIOL in fields:
        unit = 1e9 if s.viol_ns else 1e6
        # time spent clock-limited by power (a cap, a power brake): DCGM's power violation
        pvb = ctx.pw >= 0.98 * ctx.cap
        if "brake" in ctx.dyn:
            pvb = pvb | (ctx.dyn["brake"] < 1)
        pvb = pvb & (np.broadcast_to(ctx.mode[:, :, None], pvb.shape) != IDLE)
        cp = np.concatenate([np.zeros((1, N, G)), np.cumsum(pvb * _DT, axis=0)[:-1]], axis=0)
        add(POWER_VIOL, np.round(_gather(cp, b) * unit))
        hotb = ctx.temp > s.slow_temp - 0.5
        ch = np.concatenate([np.zeros((1, N, G)), np.cumsum(hotb * _DT, axis=0)[:-1]], axis=0)
        add(THERMAL_VIOL, np.round(_gather(ch, b) * unit))


def _emit_node(ctx: _Ctx, rows: _Rows) -> None:
    s, sp, N, G = ctx.site, ctx.spec, ctx.N, ctx.G
    rng = ctx.rng
    nodes = np.arange(N)
    t, lost = _scrape_grid(
        sp["rs"], _SALT_NODE, nodes, ctx.dur, sp["ni"], sp.get("gaps", []), sp["loss"]
    )
    keep = (~lost) & (t < ctx.dur) & (t < ctx.node_dead_node[None])
    for n, gl in ctx.node_gaps.items():  # node_exporter not answering (restart, lockup)
        for a, z in gl:
            keep[:, n] &= ~((t[:, n] >= a) & (t[:, n] < z))
    if ctx.keep_even_before > 0:
        kk = np.arange(t.shape[0])[:, None]
        keep &= ~((t < ctx.keep_even_before) & (kk % 2 == 1))
    K = t.shape[0]
    T = ctx.T
    b = np.clip((t / _DT).astype(np.int64), 0, T - 1)
    uptime0 = ctx.uptime0
    job_t0 = ctx.job.start.timestamp()

    def add(metric, devices, vals, mk=None):
        m = keep if mk is None else mk
        m3 = np.broadcast_to(m[:, :, None], (K, N, len(devices))) if m.ndim == 2 else m
        rows.add(metric, devices, t, vals, m3)

    def integ(rate_b: np.ndarray, start, tt: np.ndarray | None = None) -> np.ndarray:
        """rate on base grid (T,N[,D]) -> cumulative at times tt (default: scrapes)."""
        tt = t if tt is None else tt
        bb = np.clip((tt / _DT).astype(np.int64), 0, T - 1)
        ff = tt - bb * _DT
        cum = np.concatenate(
            [np.zeros((1, *rate_b.shape[1:])), np.cumsum(rate_b * _DT, axis=0)[:-1]]
        )
        v = _gather(cum, bb) + _gather(rate_b, bb) * (ff if rate_b.ndim == 2 else ff[:, :, None])
        return v + start

    mode = ctx.mode
    up_b = (mode == TRAIN) | (mode == SPIN) | (mode == INIT) | (mode == PAUSE) | (mode == WAIT)
    ranks = G
    # CPU (CPU-seconds per second), device = mode
    train_cpu = ranks * up_b * 1.1 + np.where(mode == TRAIN, ranks * 2.0, 0)  # + dataloaders
    user = 1.0 + train_cpu * ctx.cpu_mult + 0.3 * rng.random(N)[None] + ctx.cpu_extra[:, :, 0]
    user = np.clip(user, 0.2, s.cpus * 0.8)
    system = 0.6 + 0.4 * up_b + ctx.cpu_extra[:, :, 1]
    iowait = 0.02 + ctx.cpu_extra[:, :, 2]
    softirq = 0.1 + 0.3 * up_b + ctx.softirq
    steal = (0.02 * s.cpus * 0.01 + ctx.steal) if s.vm else np.zeros_like(ctx.steal)
    idle = np.maximum(s.cpus - user - system - iowait - softirq - steal, 0)
    parts = [idle, iowait, softirq, system, user]
    shares = [0.95, 0.001, 0.002, 0.01, 0.037]
    if s.vm:
        parts.append(steal)
        shares.append(0.0002)
    cpu_rates = np.stack(parts, axis=2).astype(np.float64)
    st = uptime0[:, None] * np.array(shares)[None] * s.cpus
    add(CPU_SECONDS, _cpu_modes(s), integ(cpu_rates, st).round(2))
    if "cpufreq" in s.collectors:
        fq = s.cpu_hz * _gather(ctx.freq_f, b)[:, :, None] * (0.97 + 0.06 * rng.random((K, N, 2)))
        add(CPU_FREQ, _cpu_devs(s), np.round(fq, -3))
    load = _gather(user + system + ctx.blocked + ctx.running_extra, b)
    load = load + 0.3 * rng.standard_normal((K, N))
    add(LOAD1, [""], np.maximum(load, 0).round(2)[:, :, None])
    memt = s.mem_gib * _GIB
    memn = memt * ctx.mem_total_f  # a mapped-out DIMM shrinks MemTotal
    used = 0.08 + 0.12 * up_b + ctx.mem_used_extra
    add(MEM_TOTAL, [""], np.broadcast_to(np.round(memn)[None, :, None], (K, N, 1)))
    av = _gather(memn[None] - memt * used, b) * (1 + 0.002 * rng.standard_normal((K, N)))
    add(MEM_AVAIL, [""], np.round(np.maximum(av, 0.01 * memt))[:, :, None])
    cached = np.clip(0.3 + 0.05 * ctx.mem_used_extra - ctx.cache_drop, 0.01, None)
    add(MEM_CACHED, [""], np.round(_gather(cached, b) * memt)[:, :, None])
    add(MEM_DIRTY, [""], np.round(2e7 + 1e8 * rng.random((K, N)))[:, :, None])
    hwc = np.zeros((K, N))
    for te_, n_, amt in ctx.hwcorrupt:
        hwc[:, n_] += np.where(t[:, n_] >= te_, amt, 0.0)
    add(MEM_HWCORRUPT, [""], hwc[:, :, None])
    running = 1 + np.round(_gather(user, b) * 0.1 + rng.poisson(1.0, (K, N)))
    running = running + _gather(ctx.running_extra, b)
    add(PROCS_RUNNING, [""], running[:, :, None])
    add(PROCS_BLOCKED, [""], (_gather(ctx.blocked, b) + (rng.random((K, N)) < 0.05))[:, :, None])
    cs = (2e4 + 3e4 * up_b + ctx.ctx_extra).astype(np.float64)
    add(CTX_SWITCHES, [""], np.round(integ(cs, uptime0 * 3e4))[:, :, None])
    add(BOOT_TIME, [""], np.round(np.broadcast_to(job_t0 - uptime0, (K, N)))[:, :, None])
    # network
    nd = len(s.netdevs)
    nr = np.zeros((T, N, nd))
    nt = np.zeros((T, N, nd))
    nr[:, :, 0] = 2e6 + 3e8 * (mode == TRAIN) * ctx.storage_rx + ctx.front_rx  # storage
    nt[:, :, 0] = 2e6 + 3e6 * up_b + ctx.front_tx
    for a, z in ctx.net_extra.get("ckpt_w", []):
        nt[ctx.idx(a) : ctx.idx(z), :, 0] += 1.5e9
    for a, z, n, r in ctx.net_extra.get("save", []):
        nt[ctx.idx(a) : ctx.idx(z), n, 0] += r
    gw = ctx.flow.mean(axis=2)
    up = np.ones((K, N, nd))
    speed = np.broadcast_to(np.array(s.speeds)[None, None], (K, N, nd)).copy()
    for (n, p), (z, new) in ctx.speed_drop.items():
        speed[:, n, p + 1] = np.where(t[:, n] >= z, new, speed[:, n, p + 1])
    for n, p, a, z in ctx.port_down:
        if p + 1 < nd:  # the port's netdev (RoCE or IPoIB) loses carrier with it
            up[:, n, p + 1] = np.where((t[:, n] >= a) & (t[:, n] < z), 0, up[:, n, p + 1])
    for n, a, z in ctx.front_down:  # the frontend link is down
        up[:, n, 0] = np.where((t[:, n] >= a) & (t[:, n] < z), 0, up[:, n, 0])
    for i in range(1, nd):  # RDMA bypasses the netdev byte counters
        nr[:, :, i] = 1e5
        nt[:, :, i] = 1e5
        if s.tcp_data:  # GPUDirect-TCPX/O: the collectives are TCP flows on the data NICs
            r_ = s.ib_rate * s.ib_util * gw * ctx.net_f[:, None]
            r_ = r_ * (1 + 0.03 * rng.standard_normal((1, N)))
            for (n, p), (t0, fac) in ctx.ib_share.items():
                if p == i - 1:
                    r_[ctx.idx(t0) :, n] *= fac
            nr[:, :, i] += r_
            nt[:, :, i] += r_
    st = uptime0[:, None] * 5e6
    add(NET_RX, list(s.netdevs), np.round(integ(nr, st)))
    add(NET_TX, list(s.netdevs), np.round(integ(nt, st)))
    add(NET_UP, list(s.netdevs), up)
    add(NET_SPEED, list(s.netdevs), speed)
    ch = 2 + (rng.integers(0, 3, (N, nd)) * 2)
    add(NET_CARRIER, list(s.netdevs), ch[None] + _cum_events(ctx, NET_CARRIER, t, nd))
    # disk
    dr = ((2e6 + 4e7 * (mode == TRAIN)) * ctx.disk_rx).astype(np.float64)
    iot = np.minimum(1.0, 0.02 + 0.1 * (mode == TRAIN) + ctx.disk_busy).astype(np.float64)
    dw = np.full((T, N), 1e6) + ctx.disk_w_extra
    for a, z in ctx.net_extra.get("ckpt_w", []):
        dw[ctx.idx(a) : ctx.idx(z)] += 8e8
    for a, z, n, r in ctx.net_extra.get("save", []):
        dw[ctx.idx(a) : ctx.idx(z), n] += 0.5 * r
    dev = [s.disk]
    add(DISK_R, dev, np.round(integ(dr, uptime0 * 3e6))[:, :, None])
    add(DISK_W, dev, np.round(integ(dw, uptime0 * 2e6))[:, :, None])
    add(DISK_IO, dev, integ(iot, uptime0 * 0.03).round(3)[:, :, None])
    dq = (rng.random((K, N)) < 0.1).astype(float) + _gather(ctx.disk_queue, b)
    add(DISK_IO_NOW, dev, dq[:, :, None])
    # file systems: "/", local data, parallel FS; a stuck mount only reports device_error 1
    sizes = np.array([0.9e12, 7.0e12, 5.0e15])[: len(s.mounts)]
    fr = np.array([0.55, 0.7, 0.31])[: len(s.mounts)]
    M_ = len(s.mounts)
    fa = sizes[None, None] * fr[None, None] * (1 + 0.01 * rng.standard_normal((1, N, M_)))
    stuck = np.zeros((K, N, M_), dtype=bool)
    if s.pfs:
        stuck[:, :, s.mounts.index(s.pfs)] = _gather(ctx.fs_stuck, b)
    fs_keep = keep[:, :, None] & ~stuck
    add(FS_AVAIL, list(s.mounts), np.round(np.broadcast_to(fa, (K, N, M_))), fs_keep)
    add(FS_SIZE, list(s.mounts), np.broadcast_to(sizes[None, None], (K, N, M_)), fs_keep)
    add(FS_DEVERR, list(s.mounts), stuck.astype(float))
    pgmaj = (2.0 + ctx.pgmaj).astype(np.float64)
    add(VM_PGMAJ, [""], np.round(integ(pgmaj, uptime0 * 2))[:, :, None])
    pgf = (5e3 + 2e4 * up_b + ctx.pgfault).astype(np.float64)
    add(VM_PGFAULT, [""], np.round(integ(pgf, uptime0 * 5e3))[:, :, None])
    oom = np.where(rng.random(N) < 0.04, rng.integers(1, 4, N), 0)
    oomv = np.broadcast_to(oom[None, :].astype(float), (K, N)).copy()
    for te_, n_ in ctx.oom:
        oomv[:, n_] += np.where(t[:, n_] >= te_, 1.0, 0.0)
    add(VM_OOM, [""], oomv[:, :, None])
    add(CLOCKSOURCE, ["arch_sys_counter" if s.arm else "tsc"], np.ones((K, N, 1)))
    if "netstat" in s.collectors:
        outs = (3e3 + 1e4 * up_b).astype(np.float64)
        if s.tcp_data:  # segments of ~8 KiB (jumbo MTU) on the data NICs
            outs = outs + (nd - 1) * s.ib_rate * s.ib_util * gw * ctx.net_f[:, None] / 8192.0
        add(TCP_OUTSEGS, [""], np.round(integ(outs, uptime0 * 3e3))[:, :, None])
        rr = outs * 2e-6 + ctx.tcp_retrans_extra
        add(TCP_RETRANS, [""], np.round(integ(rr, uptime0 * 0.01))[:, :, None])
    if "pressure" in s.collectors:
        add(PSI_CPU, [""], integ(np.full((T, N), 0.01), uptime0 * 0.01).round(4)[:, :, None])
        psw = 0.002 + ctx.psi_io.astype(np.float64)
        add(PSI_IO_W, [""], integ(psw, uptime0 * 0.002).round(4)[:, :, None])
        add(PSI_IO_S, [""], integ(psw * 0.9, uptime0 * 0.001).round(4)[:, :, None])
        pm = 1e-4 + ctx.psi_mem.astype(np.float64)
        add(PSI_MEM_W, [""], integ(pm, uptime0 * 1e-4).round(4)[:, :, None])
        add(PSI_MEM_S, [""], integ(pm * 0.7, uptime0 * 5e-5).round(4)[:, :, None])
    if "edac" in s.collectors:
        ce_hist = np.where(rng.random(N) < 0.08, rng.integers(1, 300, N), 0)
        for _ in range(int(rng.poisson(0.02 * N * ctx.dur / 3600))):
            ctx.ev(
                EDAC_CE, _r5(rng.uniform(0, ctx.dur)), int(rng.integers(N)), int(rng.integers(2)), 1
            )
        ce = np.stack([ce_hist, np.zeros(N)], axis=1)[None] + _cum_events(ctx, EDAC_CE, t, 2)
        add(EDAC_CE, ["0", "1"], ce)
        add(EDAC_UE, ["0", "1"], _cum_events(ctx, EDAC_UE, t, 2))
    if "hwmon" in s.collectors:
        cin = _gather(ctx.inlet_d, b)[:, :, None] + _gather(ctx.cpu_temp, b)[:, :, None] / 0.8
        cput = (
            45
            + 10 * _gather(up_b.astype(np.float32), b)[:, :, None]
            + 0.8 * cin
            + rng.standard_normal((K, N, 2))
        )
        add(HWMON_TEMP, _hwmon_devs(s), np.round(cput))
    if "thermal" in s.collectors:
        hist = rng.integers(0, 40, (N, 2)).astype(float) * (rng.random((N, 1)) < 0.3)
        tr = np.zeros((T, N, 2))
        for n_, te_, r_ in ctx.thr:
            tr[ctx.idx(te_) :, n_, 0] = r_
            tr[ctx.idx(te_) :, n_, 1] = r_ * 0.6
        add(CPU_PKG_THROTTLE, ["0", "1"], np.floor(integ(tr, hist)))
    if s.ib:
        _emit_ib(ctx, rows, t, keep, integ, gw)
    if s.ethtool:
        ports = list(s.eth_ports)
        E = len(ports)
        for mname in s.ethtool:
            extra = ctx.eth_rate.get(mname)
            if mname in (ET_DISCARDS, ET_OOB):
                hist = rng.integers(0, 2000, (N, E)).astype(float)
                if mname == ET_OOB:  # mostly flat: a few drops at job start-up (GUESS)
                    hist = np.where(rng.random((N, E)) < 0.3, hist, 0.0)
                r = np.repeat((0.02 * gw)[:, :, None], E, axis=2) * (mname == ET_DISCARDS)
                if extra is not None:
                    r = r + extra
                add(mname, ports, np.floor(integ(r, hist)))
            elif mname in (ET_TX_PAUSE, ET_RX_PAUSE, ET_TX_PAUSE_DUR):
                if mname != ET_RX_PAUSE:
                    pz = (rng.random((1, N)) < 0.4)[:, :, None]
                    base = np.repeat((200 * gw)[:, :, None], E, axis=2) * pz
                else:
                    base = np.repeat((150 * gw)[:, :, None], E, axis=2)
                if mname == ET_TX_PAUSE_DUR:
                    base = base * 3.0  # ~3 microseconds a pause at 200 GbE: GUESS
                if extra is not None:
                    base = base + extra
                add(mname, ports, np.floor(integ(base, uptime0[:, None] * 50 * np.ones((N, E)))))
            else:
                hist = np.where(rng.random((N, E)) < 0.1, rng.integers(1, 6, (N, E)), 0)
                add(mname, ports, hist[None] + _cum_events(ctx, mname, t, E))


def _emit_ib(ctx: _Ctx, rows: _Rows, t, keep, integ, gw) -> None:
    s, N = ctx.site, ctx.N
    rng = ctx.rng
    K = t.shape[0]
    P_ = len(s.ib)
    devs = list(s.ib)
    uptime0 = ctx.uptime0
    m3 = np.broadcast_to(keep[:, :, None], (K, N, P_))

    def add(metric, vals):
        rows.add(metric, devs, t, vals, m3)

    state = np.full((K, N, P_), 4.0)
    phys = np.full((K, N, P_), 5.0)
    rate_g = np.full((K, N, P_), s.ib_rate)
    down_b = np.zeros((ctx.T, N, P_), dtype=bool)
    for n, p, a, z in ctx.port_down:
        w = (t[:, n] >= a) & (t[:, n] < z)
        state[:, n, p] = np.where(w, 1.0, state[:, n, p])
        phys[:, n, p] = np.where(w, 2.0, phys[:, n, p])
        down_b[ctx.idx(a) : ctx.idx(z), n, p] = True
    for n, p, a, st_, ph_ in ctx.port_state:  # link up, but the SM never made it Active
        w = t[:, n] >= a
        state[:, n, p] = np.where(w, st_, state[:, n, p])
        phys[:, n, p] = np.where(w, ph_, phys[:, n, p])
        down_b[ctx.idx(a) :, n, p] = True
    for (n, p), (z, new) in list(ctx.ib_width.items()) + list(ctx.bond_rate.items()):
        rate_g[:, n, p] = np.where(t[:, n] >= z, new, rate_g[:, n, p])
    add(IB_STATE, state)
    add(IB_PHYS, phys)
    add(IB_RATE, rate_g)
    # cumulative counters; a fabric manager's counter clear restarts them from 0
    clears = ctx.ib_clears

    def cleared(fn) -> np.ndarray:
        v = fn(t)
        for cl in clears:
            tc = np.array([cl.get(n, np.inf) for n in range(N)])
            tcs = np.where(np.isfinite(tc), tc, 0.0)[None, :]
            at = fn(np.broadcast_to(tcs, (1, N)))
            v = np.where((t >= tc[None])[:, :, None], v - at, v)
        return np.maximum(v, 0.0)

    r = np.repeat((s.ib_rate * s.ib_util * gw * ctx.net_f[:, None])[:, :, None], P_, axis=2)
    r = r * (1 + 0.03 * rng.standard_normal((1, N, P_)))
    for (n, p), (t0, fac) in ctx.ib_share.items():
        r[ctx.idx(t0) :, n, p] *= fac
    r[down_b] = 0.0
    st = uptime0[:, None] * s.ib_rate * 0.05 * rng.random((N, P_))
    add(IB_RX, np.round(cleared(lambda tt: integ(r, st, tt))))
    add(IB_TX, np.round(cleared(lambda tt: integ(r * 1.0, st, tt))))
    for mname in s.ib_extra:
        if mname == IB_XMIT_WAIT:
            w = np.repeat((2e4 * gw)[:, :, None], P_, axis=2)
            for (n, p), (t0, fac) in ctx.xw_extra.items():
                w[ctx.idx(t0) :, n, p] = 2e4 * fac * np.maximum(gw[ctx.idx(t0) :, n], 0.3)
            st0 = uptime0[:, None] * 1e3 * np.ones((N, P_))
            add(mname, np.round(cleared(lambda tt, w=w, st0=st0: integ(w, st0, tt))))
        elif mname == IB_OOS:
            base = np.repeat((0.05 * gw)[:, :, None], P_, axis=2).astype(np.float64)
            for (n, p), (t0, r_) in ctx.oos_extra.items():
                base[ctx.idx(t0) :, n, p] += r_
            add(mname, np.floor(cleared(lambda tt, base=base: integ(base, np.zeros((N, P_)), tt))))
        else:
            p = {IB_DOWNED: 0.08, IB_SYMBOL: 0.1, IB_RCV_ERR: 0.08, IB_LINK_RECOV: 0.05}[mname]
            if mname in (IB_SYMBOL, IB_RCV_ERR):  # rare isolated ticks on healthy links
                for _ in range(int(rng.poisson(0.05 * N * P_ * ctx.dur / 3600))):
                    ctx.ev(
                        mname,
                        _r5(rng.uniform(0, ctx.dur)),
                        int(rng.integers(N)),
                        int(rng.integers(P_)),
                        1,
                    )
            hist = np.where(rng.random((N, P_)) < p, rng.integers(1, 200, (N, P_)), 0)
            add(
                mname,
                cleared(
                    lambda tt, hist=hist, mname=mname: hist[None] + _cum_events(ctx, mname, tt, P_)
                ),
            )
