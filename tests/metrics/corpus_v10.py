"""Blind labelled corpus v10 for a Minder-style faulty-machine detector.

Deterministic generator (numpy + polars only) of raw Prometheus samples as NVIDIA dcgm-exporter
and prometheus node_exporter publish them, for 120 synchronous multi-node training jobs on six
sites none of the earlier corpora used: HGX H20 servers on a Spectrum-X RoCE fabric, DGX H100 on
NDR InfiniBand with SHARP, Azure ND H100 v5 VMs (InfiniBand through SR-IOV functions), Oracle OCI
BM.GPU.A100-v2.8 bare metal on 16x100 GbE RoCE, 4-GPU L40S PCIe servers whose collectives run
over plain TCP on 100 GbE, and single-GPU GH200 nodes on NDR InfiniBand. The sites differ in GPU
model, fabric, exporter versions, DCGM field lists and node_exporter collectors, so one situation
shows up in different series on different sites (or in none).

Written without reading the detector, the simulators or earlier corpora's fault models (only
corpus v9's generator, its sanity tests and README were read, as the brief allows); every
modelling choice and its public source is listed in tests/fixtures/metrics_v10/README.md
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
    "bus_drop_series_vanish",
    "hbm_dbe_contained_kill",
    "hca_port_bounce_loop",
    "host_freeze_scrape_timeout",
    "hw_slowdown_stuck_asserted",
    "rack_inlet_recirculation",
    "nvlink_links_inactive_partial",
    "nic_autoneg_speed_fallback",
    "gpu_pcie_badtlp_storm",
    "bmc_prochot_cpu_clamp",
    "lustre_ost_evict_reconnect",
    "thp_compaction_memory_stall",
)
BENIGN_KINDS: tuple[str, ...] = (
    "steady_fsdp_run",
    "periodic_validation_loop",
    "rank0_consolidated_save",
    "prolog_dcgm_diag_burst",
    "node_generation_mix",
    "pp_stage_uneven_layers",
    "dcgm_exporter_rollout_restart",
    "fabric_mgr_counter_clear",
    "tsdb_compaction_scrape_gap",
    "nan_blank_field_nodes",
    "moe_router_hot_experts",
    "shared_fs_metadata_slowdown",
)
_HANG_KINDS = frozenset(
    {"bus_drop_series_vanish", "hbm_dbe_contained_kill", "host_freeze_scrape_timeout"}
)

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
UNC_REMAP, COR_REMAP = D + "UNCORRECTABLE_REMAPPED_ROWS", D + "CORRECTABLE_REMAPPED_ROWS"
REMAP_FAIL = D + "ROW_REMAP_FAILURE"
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
VM_COMPACT = N_ + "vmstat_compact_stall"
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
ET_LINK_DOWN = ET + "link_down_events_phy"

_DCGM_COUNTERS = frozenset(
    {
        ENERGY,
        PCIE_REPLAY,
        PCIE_TX_TP,
        PCIE_RX_TP,
        NVLINK_BW,
        NVL_REPLAY,
        NVL_RECOVERY,
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
        VM_OOM,
        VM_COMPACT,
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
        ET_LINK_DOWN,
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
    ib_rate: float
    ib_util: float  # share of the port rate the collectives use at full pace
    ib_extra: tuple[str, ...]
    roce: bool  # the HCAs are RoCE NICs whose netdevs are listed in eth_ports (same order)
    netdevs: tuple[str, ...]  # frontend first
    speeds: tuple[float, ...]  # node_network_speed_bytes per netdev
    tcp_nics: tuple[str, ...]  # netdevs that carry the collective traffic over TCP
    ethtool: tuple[str, ...]
    eth_ports: tuple[str, ...]
    collectors: frozenset
    disk: str
    mounts: tuple[str, ...]  # "/", local data, [parallel file system]
    pfs: str  # mount point of the parallel file system ("" none)
    exporters: str


def _ports(prefix: str, idx) -> tuple[str, ...]:
    return tuple(f"{prefix}{i}:1" for i in idx)


_H20_ETH = tuple(f"enp{b}s0np0" for b in (26, 60, 77, 94, 154, 188, 205, 222))
_OCI_HCAS = _ports("mlx5_", (0, 1, 2, 3, 4, 5, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17))
_OCI_ETH = tuple(f"enp{b}s0f{p}" for b in (12, 42, 84, 112, 140, 170, 195, 225) for p in (0, 1))

_SITE_LIST = (
    Site(
        key="h20",
        gpu="HGX H20 96GB HBM3 (8 GPUs), Spectrum-X RoCE",
        G=8,
        tdp=400.0,
        idle_w=62.0,
        sm_max=1980.0,
        sm_idle=345.0,
        mem_clk=2619.0,
        fb_mib=97_871.0,
        slow_temp=87.0,
        r_th=0.10,
        cpus=192,
        cpu_hz=2.6e9,
        mem_gib=2048.0,
        collect=15.0,
        fields=(
            *_BASE_FIELDS,
            MEMORY_TEMP,
            FB_RESERVED,
            GPU_UTIL,
            NVLINK_BW,
            NVL_REPLAY,
            NVL_RECOVERY,
            LINK_GEN,
            LINK_WIDTH,
            *_REMAP,
            *_DCP,
            CLOCK_THROTTLE,
        ),
        reasons=CLOCK_THROTTLE,
        viol_ns=False,
        nvl_bw=2.2e5,
        pcie_gen=5,
        pcie_bw=1.1e10,
        ib=_ports("mlx5_", range(8)),
        ib_rate=50e9,
        ib_util=0.45,
        ib_extra=(IB_DOWNED, IB_OOS),
        roce=True,
        netdevs=("bond0", *_H20_ETH),
        speeds=(6.25e9, *([50e9] * 8)),
        tcp_nics=(),
        ethtool=(ET_DISCARDS, ET_TX_PAUSE, ET_RX_PAUSE, ET_LINK_DOWN),
        eth_ports=_H20_ETH,
        collectors=frozenset(
            {"netstat", "pressure", "edac", "infiniband", "hwmon", "ethtool", "cpufreq", "compact"}
        ),
        disk="nvme0n1",
        mounts=("/", "/data", "/mnt/cpfs"),
        pfs="/mnt/cpfs",
        exporters="dcgm-exporter 3.3.6-3.4.2, node_exporter 1.8.2 (+ethtool, vmstat compact_*)",
    ),
    Site(
        key="dgx",
        gpu="DGX H100 (8x H100 SXM 80GB), NDR InfiniBand with SHARP",
        G=8,
        tdp=700.0,
        idle_w=70.0,
        sm_max=1980.0,
        sm_idle=345.0,
        mem_clk=2619.0,
        fb_mib=81_559.0,
        slow_temp=87.0,
        r_th=0.055,
        cpus=224,
        cpu_hz=2.0e9,
        mem_gib=2048.0,
        collect=10.0,
        fields=(
            *_BASE_FIELDS,
            MEMORY_TEMP,
            FB_RESERVED,
            GPU_UTIL,
            NVLINK_BW,
            NVL_REPLAY,
            NVL_RECOVERY,
            ECC_SBE,
            ECC_DBE,
            *_REMAP,
            *_DCP,
            CLOCK_THROTTLE,
            POWER_VIOL,
            THERMAL_VIOL,
            POWER_LIMIT,
        ),
        reasons=CLOCK_THROTTLE,
        viol_ns=False,
        nvl_bw=2.2e5,
        pcie_gen=5,
        pcie_bw=1.0e10,
        ib=_ports("mlx5_", (0, 3, 4, 5, 6, 9, 10, 11)),
        ib_rate=50e9,
        ib_util=0.3,
        ib_extra=(IB_DOWNED, IB_SYMBOL, IB_RCV_ERR, IB_XMIT_WAIT, IB_LINK_RECOV),
        roce=False,
        netdevs=("enp170s0f1np1",),
        speeds=(12.5e9,),
        tcp_nics=(),
        ethtool=(),
        eth_ports=(),
        collectors=frozenset(
            {"netstat", "pressure", "edac", "infiniband", "hwmon", "cpufreq", "compact"}
        ),
        disk="nvme2n1",
        mounts=("/", "/raid", "/lustre"),
        pfs="/lustre",
        exporters="dcgm-exporter 3.3.5-3.4.1, node_exporter 1.7.0 (vmstat compact_*)",
    ),
    Site(
        key="ndv",
        gpu="Azure ND H100 v5 VM (8x H100 SXM 80GB)",
        G=8,
        tdp=700.0,
        idle_w=70.0,
        sm_max=1980.0,
        sm_idle=345.0,
        mem_clk=2619.0,
        fb_mib=81_559.0,
        slow_temp=87.0,
        r_th=0.055,
        cpus=96,
        cpu_hz=0.0,
        mem_gib=1900.0,
        collect=30.0,
        fields=(
            *_BASE_FIELDS,
            MEMORY_TEMP,
            GPU_UTIL,
            NVLINK_BW,
            *_REMAP,
            PROF_GR,
            PROF_TENSOR,
            PROF_DRAM,
        ),
        reasons=None,
        viol_ns=False,
        nvl_bw=2.2e5,
        pcie_gen=5,
        pcie_bw=1.0e10,
        ib=_ports("mlx5_ib", range(8)),
        ib_rate=50e9,
        ib_util=0.3,
        ib_extra=(),
        roce=False,
        netdevs=("eth0", *tuple(f"ib{i}" for i in range(8))),
        speeds=(10e9, *([50e9] * 8)),
        tcp_nics=(),
        ethtool=(),
        eth_ports=(),
        collectors=frozenset({"netstat", "pressure", "infiniband"}),
        disk="nvme0n1",
        mounts=("/", "/mnt/nvme"),
        pfs="",
        exporters="dcgm-exporter 3.1.8-3.1.5, node_exporter 1.6.1 (a VM: no edac, hwmon, cpufreq)",
    ),
    Site(
        key="oci",
        gpu="OCI BM.GPU.A100-v2.8 (8x A100-SXM4-80GB), 16x100 GbE RoCE",
        G=8,
        tdp=400.0,
        idle_w=55.0,
        sm_max=1410.0,
        sm_idle=210.0,
        mem_clk=1593.0,
        fb_mib=81_920.0,
        slow_temp=85.0,
        r_th=0.095,
        cpus=256,
        cpu_hz=2.45e9,
        mem_gib=2048.0,
        collect=30.0,
        fields=(
            *_BASE_FIELDS,
            MEMORY_TEMP,
            GPU_UTIL,
            NVLINK_BW,
            PCIE_TX_TP,
            PCIE_RX_TP,
            ECC_SBE,
            ECC_DBE,
            *_REMAP,
            PROF_GR,
            PROF_TENSOR,
            PROF_DRAM,
        ),
        reasons=None,
        viol_ns=False,
        nvl_bw=1.4e5,
        pcie_gen=4,
        pcie_bw=6e9,
        ib=_OCI_HCAS,
        ib_rate=12.5e9,
        ib_util=0.5,
        ib_extra=(IB_DOWNED,),
        roce=True,
        netdevs=("eno2", *_OCI_ETH),
        speeds=(6.25e9, *([12.5e9] * 16)),
        tcp_nics=(),
        ethtool=(ET_DISCARDS, ET_LINK_DOWN),
        eth_ports=_OCI_ETH,
        collectors=frozenset({"netstat", "edac", "infiniband", "hwmon", "ethtool", "cpufreq"}),
        disk="nvme0n1",
        mounts=("/", "/mnt/localdisk"),
        pfs="",
        exporters="dcgm-exporter 2.4.6-2.4.7, node_exporter 1.5.0 (+ethtool; OL7 UEK5: no PSI)",
    ),
    Site(
        key="l4s",
        gpu="4x L40S 48GB PCIe, 100 GbE (NCCL over TCP sockets)",
        G=4,
        tdp=350.0,
        idle_w=35.0,
        sm_max=2520.0,
        sm_idle=210.0,
        mem_clk=9001.0,
        fb_mib=46_068.0,
        slow_temp=88.0,
        r_th=0.12,
        cpus=128,
        cpu_hz=3.1e9,
        mem_gib=512.0,
        collect=15.0,
        fields=(
            *_BASE_FIELDS,
            FB_RESERVED,
            GPU_UTIL,
            LINK_GEN,
            LINK_WIDTH,
            POWER_LIMIT,
            *_DCP,
            CLOCKS_EVENT,
            POWER_VIOL,
            THERMAL_VIOL,
        ),
        reasons=CLOCKS_EVENT,
        viol_ns=True,
        nvl_bw=0.0,
        pcie_gen=4,
        pcie_bw=1.4e10,
        ib=(),
        ib_rate=0.0,
        ib_util=0.0,
        ib_extra=(),
        roce=False,
        netdevs=("eno1", "ens2f0np0"),
        speeds=(125e6, 12.5e9),
        tcp_nics=("ens2f0np0",),
        ethtool=(),
        eth_ports=(),
        collectors=frozenset({"netstat", "pressure", "edac", "hwmon", "cpufreq"}),
        disk="nvme0n1",
        mounts=("/", "/data"),
        pfs="",
        exporters="dcgm-exporter 4.1.1-4.2.3, node_exporter 1.9.0",
    ),
    Site(
        key="gh2",
        gpu="GH200 96GB (1 GPU a node, Grace 72 cores), NDR InfiniBand",
        G=1,
        tdp=560.0,
        idle_w=90.0,
        sm_max=1980.0,
        sm_idle=345.0,
        mem_clk=2619.0,
        fb_mib=97_871.0,
        slow_temp=87.0,
        r_th=0.06,
        cpus=72,
        cpu_hz=3.1e9,
        mem_gib=112.0,
        collect=10.0,
        fields=(
            *tuple(f for f in _BASE_FIELDS if f not in (ENC_UTIL, DEC_UTIL)),
            MEMORY_TEMP,
            FB_RESERVED,
            GPU_UTIL,
            POWER_LIMIT,
            *_REMAP,
            *_DCP,
            CLOCK_THROTTLE,
        ),
        reasons=CLOCK_THROTTLE,
        viol_ns=False,
        nvl_bw=0.0,
        pcie_gen=5,
        pcie_bw=2e9,
        ib=("mlx5_0:1",),
        ib_rate=50e9,
        ib_util=0.25,
        ib_extra=(IB_DOWNED, IB_SYMBOL, IB_RCV_ERR, IB_XMIT_WAIT, IB_LINK_RECOV),
        roce=False,
        netdevs=("enP5p1s0f0np0",),
        speeds=(3.125e9,),
        tcp_nics=(),
        ethtool=(),
        eth_ports=(),
        collectors=frozenset({"netstat", "pressure", "infiniband", "cpufreq"}),
        disk="nvme0n1",
        mounts=("/", "/tmp", "/scratch"),
        pfs="/scratch",
        exporters="dcgm-exporter 3.3.9-3.6.1 (arm64), node_exporter 1.8.2",
    ),
)
SITES: dict[str, Site] = {s.key: s for s in _SITE_LIST}
# x16, one direction, B/s by PCIe generation (index)
_GEN_BW = np.array([0.0, 4e9, 8e9, 16e9, 32e9, 64e9, 128e9])


def _cpu_devs(s: Site) -> list[str]:
    return ["0", str(s.cpus - 1)]


def _hwmon_devs(s: Site) -> list[str]:
    return (
        ["coretemp:temp1", "coretemp:temp2"]
        if s.key != "oci"
        else ["k10temp:temp1", "k10temp:temp2"]
    )


def _n_node_series(s: Site) -> int:
    n = 5 + 1 + 5 + 2 + 1 + 1  # cpu modes, load1, memory, procs, ctx switches, boot time
    n += 5 * len(s.netdevs) + 4 + 3 * len(s.mounts) + 2 + 1  # net, disk, fs, vmstat, clocksrc
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
    if "compact" in s.collectors:
        n += 1
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


_LOSS = 0.003
_SALT_DCGM, _SALT_NODE, _SALT_COLL = 13, 29, 41


def _scrape_grid(rs: int, salt: int, nodes: np.ndarray, dur: float, step: float, gaps=()):
    """Scrape times (K, n) and lost mask for the given node indices.

    ``gaps``: (a, b) windows in which the Prometheus server itself scraped nothing."""
    K = int(dur // step) + 1
    k = np.arange(K)[:, None]
    nn = np.asarray(nodes)[None, :]
    phase = step * _u01(rs, salt, 1 << 20, nn)
    t = phase + k * step + 0.25 * _u01(rs, salt, k, nn)
    lost = _u01(rs, salt + 1, k, nn) < _LOSS
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


_ALL = ("h20", "dgx", "ndv", "oci", "l4s", "gh2")
_KIND_SITES: dict[str, tuple[str, ...]] = {
    "hbm_dbe_contained_kill": ("dgx", "oci", "h20", "ndv", "gh2"),
    "hca_port_bounce_loop": ("dgx", "h20", "ndv", "oci", "gh2"),
    "rack_inlet_recirculation": ("dgx", "h20", "oci", "l4s", "ndv"),
    "nvlink_links_inactive_partial": ("dgx", "h20", "ndv", "oci"),
    "nic_autoneg_speed_fallback": ("l4s", "oci", "h20"),
    "bmc_prochot_cpu_clamp": ("dgx", "h20", "oci", "l4s", "gh2"),
    "lustre_ost_evict_reconnect": ("dgx", "gh2", "h20"),
    "fabric_mgr_counter_clear": ("dgx", "h20", "oci", "gh2"),
}
_JOBS_PER_KIND = {
    **{k: 5 for k in FAULT_KINDS},
    "hca_port_bounce_loop": 6,
    "hw_slowdown_stuck_asserted": 6,
    "gpu_pcie_badtlp_storm": 6,
    "thp_compaction_memory_stall": 6,
    **{k: 5 for k in BENIGN_KINDS},
    "prolog_dcgm_diag_burst": 4,
    "fabric_mgr_counter_clear": 4,
    "tsdb_compaction_scrape_gap": 4,
    "nan_blank_field_nodes": 4,
}
_TWO_CULPRITS = (
    "rack_inlet_recirculation",
    "hw_slowdown_stuck_asserted",
    "gpu_pcie_badtlp_storm",
    "bmc_prochot_cpu_clamp",
)
_BIG = (
    ("steady_fsdp_run", "gh2", 1024),
    ("hw_slowdown_stuck_asserted", "dgx", 256),
    ("host_freeze_scrape_timeout", "gh2", 512),
    ("periodic_validation_loop", "h20", 288),
    ("hca_port_bounce_loop", "ndv", 320),
    ("moe_router_hot_experts", "l4s", 256),
)
_SIZES = (4, 4, 6, 8, 8, 12, 16, 16, 16, 24, 32, 32, 48, 64, 64, 96, 128)
_GH2_SIZES = (8, 16, 16, 32, 32, 64, 64, 128, 128, 256)
_EPOCH = datetime(2026, 10, 19, tzinfo=UTC)
_DT = 5.0
ROW_CAP = 5.45e6
_DI = (10.0, 15.0, 30.0, 60.0)
_NI = (15.0, 30.0, 60.0)


def _hostnames(site: str, n: int, rng) -> list[str]:
    o = int(rng.integers(1, 400))
    if site == "h20":
        return [f"h20-r{(o + i) // 16:02d}-s{(o + i) % 16 + 1:02d}" for i in range(n)]
    if site == "dgx":
        return [f"dgx{o + i:04d}" for i in range(n)]
    if site == "ndv":
        return [f"ndh100vmss{np.base_repr(o + i, 36).lower():0>6}" for i in range(n)]
    if site == "oci":
        return [f"compute-permanent-node-{o + i}" for i in range(n)]
    if site == "l4s":
        return [f"l40s-{o + i:04d}" for i in range(n)]
    return [f"c{610 + (o + i) // 96}-{(o + i) % 96 + 1:03d}" for i in range(n)]


def _r5(x: float) -> float:
    return float(np.round(x / _DT) * _DT)


def _r5v(x: np.ndarray) -> np.ndarray:
    return np.round(x / _DT) * _DT


def jobs(seed: int = 0) -> list[Job]:
    rng = np.random.default_rng([seed, 10])
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
            # spread each kind over its sites
            off = int(_u01(seed, 77, len(kind), sum(map(ord, kind)))[()] * len(sites))
            site_key = sites[(seen[kind] - 1 + off) % len(sites)]
            n = int(rng.choice(_GH2_SIZES if site_key == "gh2" else _SIZES))
        two = kind in _TWO_CULPRITS and kind not in two_done and n >= 8 and seen[kind] >= 2
        if two:
            two_done.add(kind)
        out.append(_make_job(j, kind, SITES[site_key], n, rng, two, seed, seen[kind]))
    return out


def _make_job(
    j: int, kind: str, site: Site, n: int, rng, two: bool, seed: int, nth: int = 1
) -> Job:
    hang = kind in _HANG_KINDS
    minutes = float(rng.uniform(40, 120)) if not hang else float(rng.uniform(45, 110))
    di = float(rng.choice(_DI[:3] if n < 192 else _DI[2:]))
    ni = float(rng.choice(_NI[:2] if n < 192 else _NI[1:]))
    while _estimate_rows(site, n, minutes, di, ni) > ROW_CAP:
        if di < 30:
            di = 30.0
        elif ni < 30:
            ni = 30.0
        elif di < 60:
            di = 60.0
        elif ni < 60:
            ni = 60.0
        elif minutes > 30.5:
            minutes = max(30.0, minutes * 0.9)
        else:
            break
    dur = round(minutes * 60.0)
    rs = int(rng.integers(1, 2**31 - 1)) ^ (seed * 7919)
    spec: dict = {"rs": rs, "dur": float(dur), "kind": kind, "nth": nth}
    spec["init_end"] = _r5(rng.uniform(150, 420))
    spec["ramp"] = 90.0
    spec["nccl_timeout"] = 1800.0 if rng.random() < 0.25 else 600.0
    warm = spec["init_end"] + spec["ramp"]
    spec["ckpt"] = []
    if not hang and rng.random() < 0.4 and kind != "rank0_consolidated_save":
        every = float(rng.uniform(600, 1500))
        t = warm + every
        while t < dur - 300:
            spec["ckpt"].append((_r5(t), _r5(t + rng.uniform(30, 100))))
            t += every
    spec["decoy_cpu"] = []
    if rng.random() < 0.5:
        for _ in range(int(rng.integers(1, 3))):
            spec["decoy_cpu"].append(
                (int(rng.integers(n)), _r5(rng.uniform(60, dur - 200)), _r5(rng.uniform(30, 90)))
            )
    spec["gaps"] = []
    culprits: dict[int, float] = {}
    ev: dict[int, list[tuple[str, float]]] = {}
    if kind in FAULT_KINDS:
        nc = 2 if two else 1
        if kind == "rack_inlet_recirculation" and nc == 2:
            c0 = int(rng.integers(n - 1))
            cands = np.array([c0, c0 + 1])  # neighbours in one rack
        else:
            cands = rng.permutation(n)[:nc]
        if hang:
            latest = dur - spec["nccl_timeout"] - 150
            te = _r5(rng.uniform(warm + 240, max(warm + 300, latest)))
            if te + spec["nccl_timeout"] + 150 > dur:
                dur = te + spec["nccl_timeout"] + 150 + 60
                spec["dur"] = float(dur)
        else:
            te = _r5(rng.uniform(warm + 240, max(warm + 300, dur - 14 * 60)))
            te = _outside_ckpt(te, spec["ckpt"])
        for i, c in enumerate(cands):
            t_c = te if i == 0 else _outside_ckpt(_r5(te + rng.uniform(120, 420)), spec["ckpt"])
            culprits[int(c)] = t_c
        spec["culprits"] = {int(c): float(t) for c, t in culprits.items()}
        spec["fault"] = _fault_params(kind, site, spec, rng, n, list(culprits))
        for c, t in spec["culprits"].items():
            ev[c] = _evidence(kind, spec, c, t, site)
    else:
        spec["culprits"] = {}
        spec["benign"] = _benign_params(kind, site, spec, rng, n)
        spec["gaps"] = spec["benign"].get("gaps", [])
    dur = spec["dur"]
    start = _EPOCH + timedelta(minutes=int(j) * 97 + float(rng.uniform(0, 60)))
    start = start.replace(microsecond=0)
    hosts = _hostnames(site.key, n, rng)
    lab: dict[str, datetime] = {}
    for c, evs in ev.items():
        on = _onset(spec, site, n, c, evs, di, ni)
        lab[hosts[c]] = start + timedelta(milliseconds=round(on * 1000))
    spec["di"], spec["ni"] = di, ni
    name = f"v10-{j:03d}-{site.key}-{kind}"
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
    best = np.inf
    for how, te in evs:
        if how in ("dcgm", "dcgm_missing"):
            t, lost = _scrape_grid(rs, _SALT_DCGM, np.array([c]), dur, di, gaps)
            t, lost = t[:, 0], lost[:, 0]
            coll = _node_collect(spec, site, n)[c]
            ph = _collect_phase(rs, np.array([c]), np.array([coll]))[0]
            m = np.floor((t - ph) / coll)
            ct = ph + m * coll
            stop = spec.get("fault", {}).get("dstop", {}).get(c, np.inf)
            if how == "dcgm":
                ok = (~lost) & (m >= 0) & (ct >= te - 1e-9) & (t < dur) & (t < stop)
            else:
                ok = (m >= 0) & (ct >= te - 1e-9) & (t < dur)
        else:
            t, lost = _scrape_grid(rs, _SALT_NODE, np.array([c]), dur, ni, gaps)
            t, lost = t[:, 0], lost[:, 0]
            stop = spec.get("fault", {}).get("nstop", {}).get(c, np.inf)
            if how == "node":
                ok = (~lost) & (t >= te) & (t < dur) & (t < stop)
            else:
                ok = (t >= te) & (t < dur)
        if ok.any():
            best = min(best, float(t[ok][0]))
    assert np.isfinite(best), (spec["kind"], evs)
    return best


def _evidence(kind: str, spec: dict, c: int, te: float, site: Site) -> list[tuple[str, float]]:
    f = spec["fault"]
    if kind == "bus_drop_series_vanish":
        # with an Xid 79 the Xid gauge shows it; without one, the GPU's series just stop
        return [("dcgm", te)] if f["xid"] else [("dcgm_missing", te)]
    if kind == "host_freeze_scrape_timeout":
        return [("dcgm_missing", te), ("node_missing", te)]
    if kind in (
        "hbm_dbe_contained_kill",
        "hw_slowdown_stuck_asserted",
        "nvlink_links_inactive_partial",
        "gpu_pcie_badtlp_storm",
    ):
        return [("dcgm", te)]
    if kind == "rack_inlet_recirculation":
        return [("dcgm", te + 5.0)]
    if kind in (
        "hca_port_bounce_loop",
        "nic_autoneg_speed_fallback",
        "bmc_prochot_cpu_clamp",
        "lustre_ost_evict_reconnect",
        "thp_compaction_memory_stall",
    ):
        return [("node", te)]
    raise ValueError(kind)


def _episodes(rng, t0: float, dur: float, d_lo, d_hi, gap_lo, gap_hi, end_pad=60.0):
    eps = []
    t = t0
    while t < dur - end_pad:
        d = _r5(rng.uniform(d_lo, d_hi))
        eps.append((t, min(t + d, dur)))
        t = _r5(t + d + rng.uniform(gap_lo, gap_hi))
    return eps


def _fault_params(kind: str, site: Site, spec: dict, rng, n: int, cul: list[int]) -> dict:
    G = site.G
    dur = spec["dur"]
    f: dict = {"gpu": {c: int(rng.integers(G)) for c in cul}}
    if kind == "bus_drop_series_vanish":
        f["xid"] = spec["nth"] % 3 != 0  # the 3rd such job: fallen off without an Xid
        f["teardown"] = _r5(rng.uniform(5, 30))
    elif kind == "hbm_dbe_contained_kill":
        f["kill_lag"] = _r5(rng.uniform(0, 5))
    elif kind == "hca_port_bounce_loop":
        f["port"] = {c: int(rng.integers(len(site.ib))) for c in cul}
        f["bounces"] = {
            c: [
                (a, _r5(a + rng.uniform(5, 40)))
                for a, _ in _episodes(rng, spec["culprits"][c], dur, 5, 5, 90, 480)
            ]
            for c in cul
        }
    elif kind == "host_freeze_scrape_timeout":
        f["dstop"] = {c: spec["culprits"][c] for c in cul}
        f["nstop"] = {c: spec["culprits"][c] for c in cul}
    elif kind == "hw_slowdown_stuck_asserted":
        f["clk"] = {c: float(rng.uniform(0.3, 0.5)) for c in cul}
    elif kind == "rack_inlet_recirculation":
        f["dinlet"] = {c: float(rng.uniform(14, 24)) for c in cul}
    elif kind == "nvlink_links_inactive_partial":
        f["links_down"] = {c: int(rng.integers(2, 7)) for c in cul}
        f["pace"] = float(rng.uniform(0.78, 0.92))
    elif kind == "nic_autoneg_speed_fallback":
        if site.tcp_nics:
            f["port"] = {c: 0 for c in cul}
            f["speed"] = {c: 3.125e9 for c in cul}  # 100G -> 25G
        else:
            f["port"] = {c: int(rng.integers(len(site.eth_ports))) for c in cul}
            f["speed"] = {c: site.ib_rate / float(rng.choice([2.0, 4.0])) for c in cul}
        f["blip"] = _r5(rng.uniform(5, 15))
    elif kind == "gpu_pcie_badtlp_storm":
        f["replay_rate"] = {c: float(10 ** rng.uniform(0.3, 1.8)) for c in cul}
        f["bw"] = {c: float(rng.uniform(0.55, 0.8)) for c in cul}
        f["pace"] = float(rng.uniform(0.88, 0.97))
    elif kind == "bmc_prochot_cpu_clamp":
        f["freq"] = {c: float(rng.uniform(0.25, 0.4)) for c in cul}
        f["pace"] = float(rng.uniform(0.55, 0.8))
    elif kind == "lustre_ost_evict_reconnect":
        f["episodes"] = {
            c: _episodes(rng, spec["culprits"][c], dur, 100, 300, 180, 600, 120) for c in cul
        }
        f["buffer"] = float(rng.uniform(20, 60))  # prefetched batches before the rank starves
    elif kind == "thp_compaction_memory_stall":
        f["episodes"] = {c: _episodes(rng, spec["culprits"][c], dur, 10, 40, 60, 180) for c in cul}
        f["sys"] = float(rng.uniform(8, 24))
        f["pace"] = float(rng.uniform(0.3, 0.6))
        f["uptime_days"] = {c: float(rng.uniform(120, 300)) for c in cul}
    return f


def _benign_params(kind: str, site: Site, spec: dict, rng, n: int) -> dict:
    b: dict = {}
    dur = spec["dur"]
    warm = spec["init_end"] + spec["ramp"]
    if kind == "periodic_validation_loop":
        b["evals"] = []
        t = warm + rng.uniform(600, 1500)
        every = rng.uniform(900, 1800)
        while t < dur - 200:
            b["evals"].append((_r5(t), _r5(t + rng.uniform(120, 360))))
            t += every
        b["level"] = float(rng.uniform(0.3, 0.45))
    elif kind == "rank0_consolidated_save":
        b["saves"] = []
        t = warm + rng.uniform(600, 1200)
        while t < dur - 400 and len(b["saves"]) < 3:
            b["saves"].append((_r5(t), _r5(t + rng.uniform(60, 240))))
            t += rng.uniform(1200, 2400)
    elif kind == "prolog_dcgm_diag_burst":
        k = max(1, round(n * rng.uniform(0.1, 0.4)))
        b["diag"] = {int(i): _r5(rng.uniform(90, 240)) for i in rng.permutation(n)[:k]}
    elif kind == "node_generation_mix":
        k = max(2, round(n * rng.uniform(0.2, 0.4)))
        b["older"] = [int(i) for i in rng.permutation(n)[:k]]
        b["clk"] = float(rng.uniform(0.93, 0.96))
    elif kind == "pp_stage_uneven_layers":
        S = int(rng.choice([2, 4] if n >= 8 else [2]))
        b["stages"] = S
        b["work"] = [float(x) for x in rng.uniform(0.85, 1.0, S)]
        b["work"][int(rng.integers(S))] = 1.0
        b["fb"] = [float(x) for x in rng.uniform(0.82, 1.08, S)]
    elif kind == "dcgm_exporter_rollout_restart":
        a = _r5(rng.uniform(warm + 120, dur - 900))
        per = float(rng.uniform(5, 20))
        b["restarts"] = {
            int(i): (_r5(a + k * per), _r5(a + k * per + rng.uniform(20, 60)))
            for k, i in enumerate(rng.permutation(n))
        }
    elif kind == "fabric_mgr_counter_clear":
        clears = [_r5(rng.uniform(warm, dur - 600))]
        if rng.random() < 0.5:
            clears.append(_r5(rng.uniform(clears[0] + 300, dur - 120)))
        b["clears"] = [
            {int(i): _r5(c + rng.uniform(0, 90)) for i in range(n)} for c in sorted(clears)
        ]
    elif kind == "tsdb_compaction_scrape_gap":
        gaps = []
        t = rng.uniform(warm, dur - 900)
        for _ in range(int(rng.integers(1, 3))):
            gaps.append((float(t), float(t + rng.uniform(60, 240))))
            t += rng.uniform(1200, 2400)
        b["gaps"] = [(a, z) for a, z in gaps if z < dur - 60]
    elif kind == "nan_blank_field_nodes":
        k = max(1, round(n * rng.uniform(0.1, 0.5)))
        b["blank_nodes"] = [int(i) for i in rng.permutation(n)[:k]]
    elif kind == "moe_router_hot_experts":
        b["phases"] = []
        t = warm
        while t < dur:
            k = max(1, round(n * rng.uniform(0.1, 0.25)))
            b["phases"].append((_r5(t), [int(i) for i in rng.permutation(n)[:k]]))
            t += rng.uniform(300, 900)
        b["hot"] = float(rng.uniform(1.15, 1.25))
    elif kind == "shared_fs_metadata_slowdown":
        a = _r5(rng.uniform(warm + 300, max(warm + 400, dur - 1900)))
        b["slow"] = (a, _r5(a + rng.uniform(600, 1800)), float(rng.uniform(0.5, 0.8)))
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


IDLE, INIT, TRAIN, SPIN, PAUSE, STUCK, WAIT, DIAG = 0, 1, 2, 3, 4, 5, 6, 7
_GIB = 1024.0**3
# per mode: util %, graphics engine, tensor scale, power fraction, fb fraction
_MODE_UTIL = np.array([0, 20, 98, 100, 2, 0, 0, 100], dtype=np.float32)
_MODE_GR = np.array([0, 0.12, 0.93, 0.985, 0.02, 0.0, 0.0, 0.9], dtype=np.float32)
_MODE_WORK = np.array([0, 0.02, 1.0, 0, 0, 0, 0, 0], dtype=np.float32)
_MODE_PWR = np.array([0, 0.12, 0.0, 0.16, 0.07, 0.04, 0.03, 0.85], dtype=np.float32)
_MODE_FB = np.array([0.004, 0.55, 0.9, 0.9, 0.9, 0.9, 0.55, 0.6], dtype=np.float32)
_INT32_NOT_SUPPORTED = 2147483634.0  # DCGM_INT32_BLANK (0x7ffffff0) + 2
_FP64_NOT_SUPPORTED = 140737488355330.0  # DCGM_FP64_BLANK (2**47) + 2


class _Ctx:
    """Latent state of one job on a 5 s base grid."""

    def __init__(self, job: Job):
        self.job = job
        self.site = s = SITES[job.site]
        sp = self.spec = job.spec
        self.rng = np.random.default_rng([sp["rs"], 10])
        self.N = N = len(job.nodes)
        self.G = G = s.G
        self.dur = sp["dur"]
        self.T = T = int(self.dur // _DT) + 3
        self.tb = np.arange(T) * _DT
        rng = self.rng
        launch = _r5v(10 + 35 * _u01(sp["rs"], 5, np.arange(N)))
        init_end = sp["init_end"] + _r5v(20 * _u01(sp["rs"], 6, np.arange(N)))
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


# ---------------------------------------------------------------------------------------------
# Kind models
# ---------------------------------------------------------------------------------------------


def _apply_kind(ctx: _Ctx) -> None:
    k = ctx.spec["kind"]
    sp = ctx.spec
    f = sp.get("fault", {})
    b = sp.get("benign", {})
    s = ctx.site
    cul = sp["culprits"]
    N = ctx.N
    rng = ctx.rng
    # synchronous checkpoints (decoy, all nodes)
    for a, z in sp["ckpt"]:
        ia, iz = ctx.idx(a), ctx.idx(z)
        sel = ctx.mode[ia:iz] == TRAIN
        ctx.mode[ia:iz][sel] = PAUSE
        ctx.cpu_extra[ia:iz, :, 0] += 3.0
        ctx.net_extra.setdefault("ckpt_w", []).append((a, z))
    for n, a, d in sp["decoy_cpu"]:
        ctx.cpu_extra[ctx.idx(a) : ctx.idx(a + d), n, 0] += 6.0
    if k == "bus_drop_series_vanish":
        ((c, te),) = list(cul.items())[:1]
        g = f["gpu"][c]
        if f["xid"]:
            ctx.xid.append((te, c, g, 79))
        ctx.gone[(c, g)] = (te, f["xid"])
        ctx.hang(te)
        # torchrun tears the node's other workers down; nvidia-smi / the exporter's NVML
        # calls on the lost GPU block in the kernel (one task in D state)
        ctx.mode[ctx.idx(te + f["teardown"]) :, c] = IDLE
        ctx.blocked[ctx.idx(te) :, c] += 1
    elif k == "hbm_dbe_contained_kill":
        ((c, te),) = list(cul.items())[:1]
        g = f["gpu"][c]
        ctx.xid.append((te, c, g, 94))
        ctx.ev(ECC_DBE, te, c, g, 1)
        ctx.ev(ECC_SBE, te, c, g, float(rng.integers(0, 4)))
        ctx.ev(UNC_REMAP, te, c, g, 1)
        kill = te + f["kill_lag"]
        ctx.hang(kill)
        ctx.mode[ctx.idx(kill) :, c] = IDLE
        ctx.cpu_extra[ctx.idx(kill) :, c, 0] -= 4
    elif k == "hca_port_bounce_loop":
        for c, bounces in f["bounces"].items():
            p = f["port"][c]
            for a, z in bounces:
                ctx.port_down.append((c, p, a, z))
                ctx.stall(a, z + 10.0)
                ctx.ev(IB_DOWNED, a, c, p, 1)
                ctx.ev(IB_SYMBOL, a, c, p, float(rng.integers(5, 400)))
                ctx.ev(IB_LINK_RECOV, a, c, p, float(rng.integers(0, 3)))
                ctx.ev(ET_LINK_DOWN, a, c, p, 1)
                ctx.ev(NET_CARRIER, a, c, p + 1, 1)
                ctx.ev(NET_CARRIER, z, c, p + 1, 1)
    elif k == "host_freeze_scrape_timeout":
        ((c, te),) = list(cul.items())[:1]
        ctx.hang(te)
        ctx.node_dead_dcgm[c] = te
        ctx.node_dead_node[c] = te
    elif k == "hw_slowdown_stuck_asserted":
        hws = ctx.d("hws")
        t_first = min(cul.values())
        worst = 1.0
        for c, te in cul.items():
            g = f["gpu"][c]
            hws[ctx.idx(te) :, c, g] = f["clk"][c]
            ctx.busy.append((c, g, te))
            worst = min(worst, f["clk"][c])
        # compute-bound steps scale with the slowest GPU's clock (memory time does not)
        ctx.pace[ctx.idx(t_first) :] *= 0.15 + 0.85 * f["clk"][next(iter(cul))]
        if len(cul) > 1:
            t2 = max(cul.values())
            ctx.pace[ctx.idx(t2) :] *= (0.15 + 0.85 * worst) / (
                0.15 + 0.85 * f["clk"][next(iter(cul))]
            )
    elif k == "rack_inlet_recirculation":
        for c, te in cul.items():
            ctx.inlet_d[ctx.idx(te) :, c] = f["dinlet"][c]
    elif k == "nvlink_links_inactive_partial":
        ((c, te),) = list(cul.items())[:1]
        g = f["gpu"][c]
        ctx.xid.append((te, c, g, 74))
        ctx.ev(NVL_RECOVERY, te, c, g, float(f["links_down"][c]))
        ctx.ev(NVL_REPLAY, te, c, g, float(rng.integers(50, 800)))
        # NCCL's intra-node rings wait on that GPU's remaining links; its SMs are not busier
        ctx.pace[ctx.idx(te) :] *= f["pace"]
    elif k == "nic_autoneg_speed_fallback":
        ((c, te),) = list(cul.items())[:1]
        p = f["port"][c]
        new = f["speed"][c]
        z = te + f["blip"]
        ctx.port_down.append((c, p, te, z))
        ctx.speed_drop[(c, p)] = (z, new)
        ctx.stall(te, z + 5.0)
        ctx.ev(NET_CARRIER, te, c, p + 1, 1)
        ctx.ev(NET_CARRIER, z, c, p + 1, 1)
        ctx.ev(ET_LINK_DOWN, te, c, p, 1)
        need = 0.64 * s.speeds[1] if s.tcp_nics else s.ib_util * s.ib_rate
        pace = min(1.0, 0.9 * new / need)
        ctx.pace[ctx.idx(z) :] *= pace
        if s.tcp_nics:
            ctx.tcp_retrans_extra[ctx.idx(z) :, c] = float(rng.uniform(300, 3000))
    elif k == "gpu_pcie_badtlp_storm":
        pf = ctx.d("pcie")
        t_first = min(cul.values())
        for c, te in cul.items():
            g = f["gpu"][c]
            pf[ctx.idx(te) :, c, g] = f["bw"][c]
            ctx.replay_storm.append((c, g, te, f["replay_rate"][c]))
            ctx.ev(PCIE_REPLAY, te, c, g, float(rng.integers(20, 200)))
        ctx.pace[ctx.idx(t_first) :] *= f["pace"]
    elif k == "bmc_prochot_cpu_clamp":
        t_first = min(cul.values())
        for c, te in cul.items():
            i0 = ctx.idx(te)
            ctx.freq_f[i0:, c] = f["freq"][c]
            ctx.cpu_mult[i0:, c] = f["pace"] / f["freq"][c]
            ctx.util_f[i0:, c] = f["pace"] + 0.12 * (1 - f["pace"])
        ctx.pace[ctx.idx(t_first) :] *= f["pace"]
    elif k == "lustre_ost_evict_reconnect":
        for c, eps in f["episodes"].items():
            for a, z in eps:
                ia, iz = ctx.idx(a), ctx.idx(z)
                ctx.fs_stuck[ia:iz, c] = True
                ctx.blocked[ia:iz, c] += float(rng.integers(8, 30))
                ctx.cpu_extra[ia:iz, c, 2] += float(rng.uniform(2, 8))
                ctx.psi_io[ia:iz, c] = 0.9
                ctx.storage_rx[ia:iz, c] = 0.0
                # the rank's dataloader drains its prefetched batches, then the job stops
                if z - a > f["buffer"]:
                    ctx.stall(a + f["buffer"], z + 10.0, who=c)
    elif k == "thp_compaction_memory_stall":
        for c, eps in f["episodes"].items():
            ctx.uptime0[c] = 86400 * f["uptime_days"][c]
            for a, z in eps:
                ia, iz = ctx.idx(a), ctx.idx(z)
                ctx.cpu_extra[ia:iz, c, 1] += f["sys"]
                ctx.psi_mem[ia:iz, c] = float(rng.uniform(0.3, 0.9))
                ctx.compact[ia:iz, c] = float(rng.uniform(50, 400))
                # tasks spinning in direct compaction are runnable (R) in the kernel
                ctx.running_extra[ia:iz, c] = float(rng.integers(12, 60))
                ctx.pace[ia:iz] *= f["pace"]
                # its ranks stall in page faults: its GPUs wait for work, the peers spin
                ctx.util_f[ia:iz, c] = f["pace"] + 0.12 * (1 - f["pace"])
            ctx.mem_used_extra[:, c] = 0.12  # long-lived page cache, fragmented free memory
    # ---- healthy kinds
    elif k == "periodic_validation_loop":
        for a, z in b["evals"]:
            ctx.pace[ctx.idx(a) : ctx.idx(z)] *= b["level"]
    elif k == "rank0_consolidated_save":
        for a, z in b["saves"]:
            ia, iz = ctx.idx(a), ctx.idx(z)
            sel = ctx.mode[ia:iz] == TRAIN
            ctx.mode[ia:iz][sel] = SPIN  # everyone waits in the barrier after gathering
            ctx.mode[ia:iz, 0][ctx.mode[ia:iz, 0] == SPIN] = PAUSE
            ctx.cpu_extra[ia:iz, 0, 0] += 16.0
            ctx.mem_used_extra[ia:iz, 0] += 0.3
            ctx.net_extra.setdefault("save", []).append((a, z, 0, 2.0e9))
    elif k == "prolog_dcgm_diag_burst":
        diag = b["diag"]
        shift = max(diag.values())
        tb = ctx.tb
        for n in range(N):
            d = diag.get(n)
            m = ctx.mode[:, n]
            if d is not None:
                m[(tb >= 5.0) & (tb < 5.0 + d)] = DIAG
        # the prolog must finish on every node before any task starts
        ctx.launch = ctx.launch + shift
        ctx.init_end = ctx.init_end + shift
        ctx.train0 += shift
        for n in range(N):
            m = ctx.mode[:, n]
            keep_diag = m == DIAG
            m[:] = TRAIN
            m[tb < ctx.init_end[n]] = INIT
            m[(tb >= ctx.init_end[n]) & (tb < ctx.train0)] = SPIN
            m[tb < ctx.launch[n]] = IDLE
            m[keep_diag] = DIAG
        ramp = np.clip((tb - ctx.train0) / sp["ramp"], 0, 1).astype(np.float32)
        ctx.pace[:] = 0.3 + 0.7 * ramp
    elif k == "node_generation_mix":
        old = b["older"]
        ctx.g_clk[old, :] *= b["clk"]
        slow = 0.15 + 0.85 * b["clk"]
        ctx.pace *= slow
        for n in old:  # the older nodes are the bottleneck of every step
            ctx.busy.append((n, None, 0.0))
    elif k == "pp_stage_uneven_layers":
        S = b["stages"]
        per = int(np.ceil(N / S))
        for i in range(S):
            sl = slice(i * per, min(N, (i + 1) * per))
            ctx.node_work[:, sl] = b["work"][i]
            ctx.g_fb[sl, :] *= b["fb"][i]
            ctx.cpu_extra[:, sl, 0] += 1.5 if i == 0 else 0.0
    elif k == "dcgm_exporter_rollout_restart":
        for n, (a, z) in b["restarts"].items():
            ctx.dcgm_gaps.setdefault(n, []).append((a, z))
            ctx.xid_clear[n] = z
    elif k == "fabric_mgr_counter_clear":
        ctx.ib_clears = b["clears"]
    elif k == "nan_blank_field_nodes":
        ctx.blank_nodes = b["blank_nodes"]
        if ENC_UTIL in s.fields:
            ctx.blank = {ENC_UTIL: _INT32_NOT_SUPPORTED, DEC_UTIL: _INT32_NOT_SUPPORTED}
        else:
            ctx.blank = {POWER_LIMIT: _FP64_NOT_SUPPORTED}
    elif k == "moe_router_hot_experts":
        ctx.pace *= 1.0 / b["hot"]
        ph = b["phases"]
        for i, (a, hot) in enumerate(ph):
            z = ph[i + 1][0] if i + 1 < len(ph) else ctx.dur + 10
            ctx.node_work[ctx.idx(a) : ctx.idx(z), hot] = b["hot"]
    elif k == "shared_fs_metadata_slowdown":
        a, z, lv = b["slow"]
        ia, iz = ctx.idx(a), ctx.idx(z)
        ctx.pace[ia:iz] *= lv
        ctx.cpu_extra[ia:iz, :, 2] += float(rng.uniform(2, 6))
        ctx.blocked[ia:iz, :] += float(rng.integers(1, 5))
        ctx.psi_io[ia:iz, :] = 0.3
        ctx.storage_rx[ia:iz, :] = lv


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
    pf = np.where(train, 0.2 + 0.75 * work * clk**1.7, _MODE_PWR[gm]).astype(np.float32)
    pf = pf * ctx.g_pwr[None]
    rng_w = s.tdp - s.idle_w
    pw = s.idle_w + pf * rng_w
    pw = np.minimum(pw, s.tdp * 0.995)
    cap = np.full((T, N, G), s.tdp, dtype=np.float32)
    inlet = ctx.inlet[None, :, None] + ctx.inlet_d[:, :, None]
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
            tgt = inlet[i, n, 0] + ctx.g_temp[n, g] + s.r_th * pw[i, n, g]
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
    return rows.frame()


def _gather(arr: np.ndarray, b: np.ndarray) -> np.ndarray:
    """arr (T,N[,G]) at base indices b (K,N) -> (K,N[,G])."""
    n = np.arange(b.shape[1])[None, :]
    return arr[b, n]


def _emit_dcgm(ctx: _Ctx, rows: _Rows) -> None:
    s, sp, N, G = ctx.site, ctx.spec, ctx.N, ctx.G
    rng = ctx.rng
    nodes = np.arange(N)
    t, lost = _scrape_grid(sp["rs"], _SALT_DCGM, nodes, ctx.dur, sp["di"], sp.get("gaps", []))
    coll = _node_collect(sp, s, N)
    ph = _collect_phase(sp["rs"], nodes, coll)
    m = np.floor((t - ph[None]) / coll[None])
    keep = (~lost) & (m >= 0) & (t < ctx.dur)
    keep &= t < ctx.node_dead_dcgm[None]
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
    add(MEM_CLOCK, np.full((K, N, G), s.mem_clk))
    tmp = temp + noise(0.35)
    add(GPU_TEMP, np.round(tmp))
    add(MEMORY_TEMP, np.round(tmp + 4.0 + 3.0 * (pw / s.tdp)))
    pwn = np.minimum(pw * (1 + noise(0.012)), s.tdp * 1.002)
    add(POWER, np.round(pwn, 3))
    if ENERGY in fields:
        pw_base = ctx.pw.astype(np.float64)
        cum = np.concatenate([np.zeros((1, N, G)), np.cumsum(pw_base * _DT, axis=0)[:-1]], axis=0)
        e0 = 1e3 * (3600 * 24 * (5 + 60 * rng.random((N, G))) * s.tdp * 0.4)
        frac = (ct - b * _DT)[:, :, None]
        add(ENERGY, np.round(e0[None] + 1e3 * (_gather(cum, b) + pw * frac)))
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
    for te, n, g, v in sorted(ctx.xid):
        xv[:, n, g] = np.where(ct[:, n] >= te, v, xv[:, n, g])
    add(XID, xv, xmask)
    fbu = np.where(mode == IDLE, s.fb_mib * 0.004, s.fb_mib * _MODE_FB[mode] * ctx.g_fb[None])
    fbu = np.round(fbu)
    resv = 0.006 * s.fb_mib if FB_RESERVED in fields else 0.0
    add(FB_USED, fbu)
    add(FB_FREE, np.round(s.fb_mib - resv - fbu))
    add(FB_RESERVED, np.full((K, N, G), np.round(resv)))
    if NVLINK_BW in fields:
        nv = np.where(train, s.nvl_bw * flow * (1 + noise(0.03)), 0.0)
        add(NVLINK_BW, np.round(np.maximum(nv, 0)))
    if NVL_REPLAY in fields:
        hist = np.where(rng.random((N, G)) < 0.04, rng.integers(1, 30, (N, G)), 0)
        add(NVL_REPLAY, hist[None] + _cum_events(ctx, NVL_REPLAY, ct, G))
        add(NVL_RECOVERY, _cum_events(ctx, NVL_RECOVERY, ct, G))
    if ECC_SBE in fields:
        hist = np.where(rng.random((N, G)) < 0.1, rng.integers(1, 60, (N, G)), 0)
        add(ECC_SBE, hist[None] + _cum_events(ctx, ECC_SBE, ct, G))
        add(ECC_DBE, _cum_events(ctx, ECC_DBE, ct, G))
    if UNC_REMAP in fields:
        unc = (rng.random((N, G)) < 0.004).astype(float)[None] + _cum_events(ctx, UNC_REMAP, ct, G)
        add(UNC_REMAP, unc)
        cr = np.where(rng.random((N, G)) < 0.05, rng.integers(1, 9, (N, G)), 0)
        add(COR_REMAP, np.broadcast_to(cr[None].astype(float), (K, N, G)))
        add(REMAP_FAIL, np.zeros((K, N, G)))
    # DCP
    tensor0, dram0 = 0.42, 0.38
    diag = mode == DIAG
    gr = np.where(train, 0.93 + 0.01 * noise(1.0), _MODE_GR[mode])
    add(PROF_GR, np.clip(gr, 0, 1).round(6))
    ten = np.where(train, tensor0 * work * (1 + noise(0.02)), np.where(diag, 0.55, 0.0))
    add(PROF_TENSOR, np.clip(ten, 0, 1).round(6))
    dram = np.where(train, dram0 * flow * (1 + noise(0.02)), np.where(mode == SPIN, 0.002, 0.0))
    add(PROF_DRAM, np.clip(np.where(diag, 0.7, dram), 0, 1).round(6))
    pf = _gather(ctx.dyn["pcie"], b) if "pcie" in ctx.dyn else 1.0
    rate = s.pcie_bw * flow * pf * (1 + noise(0.04))
    rate = np.where(train, rate, np.where((mode == INIT) | diag, 2e8, 2e6))
    add(PROF_PCIE_TX, np.round(np.maximum(rate * 0.6, 0)))
    add(PROF_PCIE_RX, np.round(np.maximum(rate, 0)))
    add(PCIE_TX_TP, np.round(np.maximum(rate * 0.6, 0) / 1024))
    add(PCIE_RX_TP, np.round(np.maximum(rate, 0) / 1024))
    add(LINK_GEN, np.full((K, N, G), float(s.pcie_gen)))
    add(LINK_WIDTH, np.full((K, N, G), 16.0))
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
        hot = train & (temp > s.slow_temp - 0.5)
        r |= np.where(hot, 0x20, 0)
        add(s.reasons, r.astype(np.float64))
    if POWER_VIOL in fields or THERMAL_VIOL in fields:
        unit = 1e9 if s.viol_ns else 1e6
        add(POWER_VIOL, np.zeros((K, N, G)))
        hotb = ctx.temp > s.slow_temp - 0.5
        ch = np.concatenate([np.zeros((1, N, G)), np.cumsum(hotb * _DT, axis=0)[:-1]], axis=0)
        add(THERMAL_VIOL, np.round(_gather(ch, b) * unit))


def _emit_node(ctx: _Ctx, rows: _Rows) -> None:
    s, sp, N, G = ctx.site, ctx.spec, ctx.N, ctx.G
    rng = ctx.rng
    nodes = np.arange(N)
    t, lost = _scrape_grid(sp["rs"], _SALT_NODE, nodes, ctx.dur, sp["ni"], sp.get("gaps", []))
    keep = (~lost) & (t < ctx.dur) & (t < ctx.node_dead_node[None])
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
    softirq = 0.1 + 0.3 * up_b
    idle = np.maximum(s.cpus - user - system - iowait - softirq, 0)
    cpu_rates = np.stack([idle, iowait, softirq, system, user], axis=2).astype(np.float64)
    st = uptime0[:, None] * np.array([0.95, 0.001, 0.002, 0.01, 0.037])[None] * s.cpus
    add(CPU_SECONDS, ["idle", "iowait", "softirq", "system", "user"], integ(cpu_rates, st).round(2))
    if "cpufreq" in s.collectors:
        fq = s.cpu_hz * _gather(ctx.freq_f, b)[:, :, None] * (0.97 + 0.06 * rng.random((K, N, 2)))
        add(CPU_FREQ, _cpu_devs(s), np.round(fq, -3))
    load = _gather(user + system + ctx.blocked + ctx.running_extra, b)
    load = load + 0.3 * rng.standard_normal((K, N))
    add(LOAD1, [""], np.maximum(load, 0).round(2)[:, :, None])
    memt = s.mem_gib * _GIB
    used = 0.08 + 0.12 * up_b + ctx.mem_used_extra
    add(MEM_TOTAL, [""], np.full((K, N, 1), memt))
    av = _gather(memt * (1 - used), b) * (1 + 0.002 * rng.standard_normal((K, N)))
    add(MEM_AVAIL, [""], np.round(av)[:, :, None])
    cached = 0.3 + ctx.mem_used_extra
    add(MEM_CACHED, [""], np.round(_gather(cached, b) * memt)[:, :, None])
    add(MEM_DIRTY, [""], np.round(2e7 + 1e8 * rng.random((K, N)))[:, :, None])
    add(MEM_HWCORRUPT, [""], np.zeros((K, N, 1)))
    running = 1 + np.round(_gather(user, b) * 0.1 + rng.poisson(1.0, (K, N)))
    running = running + _gather(ctx.running_extra, b)
    add(PROCS_RUNNING, [""], running[:, :, None])
    add(PROCS_BLOCKED, [""], (_gather(ctx.blocked, b) + (rng.random((K, N)) < 0.05))[:, :, None])
    cs = (2e4 + 3e4 * up_b).astype(np.float64)
    add(CTX_SWITCHES, [""], np.round(integ(cs, uptime0 * 3e4))[:, :, None])
    add(BOOT_TIME, [""], np.round(np.broadcast_to(job_t0 - uptime0, (K, N)))[:, :, None])
    # network
    nd = len(s.netdevs)
    nr = np.zeros((T, N, nd))
    nt = np.zeros((T, N, nd))
    nr[:, :, 0] = 2e6 + 3e8 * (mode == TRAIN) * ctx.storage_rx  # dataset reads (storage)
    nt[:, :, 0] = 2e6 + 3e6 * up_b
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
        if p + 1 < nd:  # the port's netdev (RoCE, TCP or IPoIB) loses carrier with it
            up[:, n, p + 1] = np.where((t[:, n] >= a) & (t[:, n] < z), 0, up[:, n, p + 1])
    if s.tcp_nics:
        per = 0.64 * s.speeds[1] * gw
        for i in range(1, nd):
            nr[:, :, i] = per * (1 + 0.02 * rng.standard_normal((1, N)))
            nt[:, :, i] = per * (1 + 0.02 * rng.standard_normal((1, N)))
        for n, p, a, z in ctx.port_down:
            sl = slice(ctx.idx(a), ctx.idx(z))
            nr[sl, n, p + 1] = 0
            nt[sl, n, p + 1] = 0
    else:
        for i in range(1, nd):
            nr[:, :, i] = 1e5
            nt[:, :, i] = 1e5
    st = uptime0[:, None] * 5e6
    add(NET_RX, list(s.netdevs), np.round(integ(nr, st)))
    add(NET_TX, list(s.netdevs), np.round(integ(nt, st)))
    add(NET_UP, list(s.netdevs), up)
    add(NET_SPEED, list(s.netdevs), speed)
    ch = 2 + (rng.integers(0, 3, (N, nd)) * 2)
    add(NET_CARRIER, list(s.netdevs), ch[None] + _cum_events(ctx, NET_CARRIER, t, nd))
    # disk
    dr = (2e6 + 4e7 * (mode == TRAIN)).astype(np.float64)
    iot = (0.02 + 0.1 * (mode == TRAIN)).astype(np.float64)
    dw = np.full((T, N), 1e6)
    for a, z in ctx.net_extra.get("ckpt_w", []):
        dw[ctx.idx(a) : ctx.idx(z)] += 8e8
    for a, z, n, r in ctx.net_extra.get("save", []):
        dw[ctx.idx(a) : ctx.idx(z), n] += 0.5 * r
    dev = [s.disk]
    add(DISK_R, dev, np.round(integ(dr, uptime0 * 3e6))[:, :, None])
    add(DISK_W, dev, np.round(integ(dw, uptime0 * 2e6))[:, :, None])
    add(DISK_IO, dev, integ(iot, uptime0 * 0.03).round(3)[:, :, None])
    add(DISK_IO_NOW, dev, (rng.random((K, N)) < 0.1).astype(float)[:, :, None])
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
    add(VM_PGMAJ, [""], np.round(integ(np.full((T, N), 2.0), uptime0 * 2))[:, :, None])
    oom = np.where(rng.random(N) < 0.04, rng.integers(1, 4, N), 0)
    add(VM_OOM, [""], np.broadcast_to(oom[None, :, None].astype(float), (K, N, 1)))
    if "compact" in s.collectors:
        cr = 0.002 + ctx.compact.astype(np.float64)
        add(VM_COMPACT, [""], np.floor(integ(cr, uptime0 * 0.002))[:, :, None])
    add(CLOCKSOURCE, ["tsc" if s.key != "gh2" else "arch_sys_counter"], np.ones((K, N, 1)))
    if "netstat" in s.collectors:
        outs = (3e3 + 1e4 * up_b).astype(np.float64)
        if s.tcp_nics:
            outs = outs + 0.64 * s.speeds[1] * gw / 8948
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
        add(EDAC_UE, ["0", "1"], np.zeros((K, N, 2)))
    if "hwmon" in s.collectors:
        cin = _gather(ctx.inlet_d, b)[:, :, None]
        cput = (
            45
            + 10 * _gather(up_b.astype(np.float32), b)[:, :, None]
            + 0.8 * cin
            + rng.standard_normal((K, N, 2))
        )
        add(HWMON_TEMP, _hwmon_devs(s), np.round(cput))
    if s.ib:
        _emit_ib(ctx, rows, t, keep, integ, gw)
    if s.ethtool:
        ports = list(s.eth_ports)
        E = len(ports)
        for mname in s.ethtool:
            if mname == ET_DISCARDS:
                hist = rng.integers(0, 2000, (N, E)).astype(float)
                r = np.repeat((0.02 * gw)[:, :, None], E, axis=2)
                add(mname, ports, np.floor(integ(r, hist)))
            elif mname in (ET_TX_PAUSE, ET_RX_PAUSE):
                r = np.repeat((200 * gw * (rng.random((1, N)) < 0.4))[:, :, None], E, axis=2)
                add(mname, ports, np.floor(integ(r, uptime0[:, None] * 50 * np.ones((N, E)))))
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
    for (n, p), (z, new) in ctx.speed_drop.items():
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

    r = np.repeat((s.ib_rate * s.ib_util * gw)[:, :, None], P_, axis=2)
    r = r * (1 + 0.03 * rng.standard_normal((1, N, P_)))
    r[down_b] = 0.0
    st = uptime0[:, None] * s.ib_rate * 0.05 * rng.random((N, P_))
    add(IB_RX, np.round(cleared(lambda tt: integ(r, st, tt))))
    add(IB_TX, np.round(cleared(lambda tt: integ(r * 1.0, st, tt))))
    for mname in s.ib_extra:
        if mname == IB_XMIT_WAIT:
            w = np.repeat((2e4 * gw)[:, :, None], P_, axis=2)
            st0 = uptime0[:, None] * 1e3 * np.ones((N, P_))
            add(mname, np.round(cleared(lambda tt, w=w, st0=st0: integ(w, st0, tt))))
        elif mname == IB_OOS:
            base = np.repeat((0.05 * gw)[:, :, None], P_, axis=2).astype(np.float64)
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
