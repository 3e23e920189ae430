"""Blind labelled corpus v8 for a Minder-style faulty-machine detector.

Deterministic generator (numpy + polars only) of raw Prometheus samples as NVIDIA dcgm-exporter
and prometheus node_exporter publish them, for 120 synchronous multi-node training jobs on six
sites (GB200 NVL72 trays, DGX B200, HGX H200 on AMD EPYC, H800 over RoCE with the ethtool
collector, DGX-1 V100 with dcgm-exporter 2.x, A800 over RoCE with a lean exporter setup). The
sites differ in GPU model, fabric, exporter versions, DCGM field lists and node_exporter
collectors, so the same situation shows up in different series on different sites.

Written without reading the detector, the simulators or earlier corpora' fault models; every
modelling choice and its public source is listed in tests/fixtures/metrics_v8/README.md (numbers
no source gave are marked GUESS there).

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
    "uce_single_gpu_abort",
    "gpu_lost_exporter_crashloop",
    "ib_port_polling_abort",
    "panic_reboot_return",
    "scratch_fill_write_fail",
    "cold_plate_flow_loss",
    "nvlink_symbol_ber_climb",
    "pcie_retimer_replays",
    "nic_pcie_stall_backpressure",
    "clocksource_hpet_fallback",
    "psu_fail_brake_duty",
    "ib_symbol_error_creep",
)

BENIGN_KINDS: tuple[str, ...] = (
    "plain_sync_run",
    "compile_cache_skew",
    "async_ckpt_staging",
    "shared_spine_contention",
    "brief_host_hiccup",
    "bin_spread_constant",
    "rare_error_ticks",
    "shard_prefetch_misses",
    "apt_daily_spread",
    "crac_cycling_rows",
    "alloc_cache_growth",
    "swapped_in_node",
)

_HANG_KINDS = frozenset(
    {
        "uce_single_gpu_abort",
        "gpu_lost_exporter_crashloop",
        "ib_port_polling_abort",
        "panic_reboot_return",
        "scratch_fill_write_fail",
    }
)
_SLOW_KINDS = frozenset(FAULT_KINDS) - _HANG_KINDS

# ----------------------------------------------------------------------------------------------
# Metric catalog (names exactly as the exporters ship them)
# ----------------------------------------------------------------------------------------------

D = "DCGM_FI_DEV_"
P = "DCGM_FI_PROF_"

SM_CLOCK = D + "SM_CLOCK"
MEM_CLOCK = D + "MEM_CLOCK"
MEMORY_TEMP = D + "MEMORY_TEMP"
GPU_TEMP = D + "GPU_TEMP"
POWER = D + "POWER_USAGE"
ENERGY = D + "TOTAL_ENERGY_CONSUMPTION"
PCIE_TX_TP = D + "PCIE_TX_THROUGHPUT"  # 2.x/3.1-3.2 default CSVs: KB, typed counter (a rate)
PCIE_RX_TP = D + "PCIE_RX_THROUGHPUT"
PCIE_REPLAY = D + "PCIE_REPLAY_COUNTER"
GPU_UTIL = D + "GPU_UTIL"
MEM_COPY_UTIL = D + "MEM_COPY_UTIL"
ENC_UTIL = D + "ENC_UTIL"
DEC_UTIL = D + "DEC_UTIL"
XID = D + "XID_ERRORS"
FB_FREE = D + "FB_FREE"
FB_USED = D + "FB_USED"
FB_RESERVED = D + "FB_RESERVED"
NVLINK_BW = D + "NVLINK_BANDWIDTH_TOTAL"
UNC_REMAP = D + "UNCORRECTABLE_REMAPPED_ROWS"
COR_REMAP = D + "CORRECTABLE_REMAPPED_ROWS"
REMAP_FAIL = D + "ROW_REMAP_FAILURE"
THROTTLE_3X = D + "CLOCK_THROTTLE_REASONS"
EVENTS_4X = D + "CLOCKS_EVENT_REASONS"
POWER_VIOL = D + "POWER_VIOLATION"
THERMAL_VIOL = D + "THERMAL_VIOLATION"
ECC_SBE = D + "ECC_SBE_VOL_TOTAL"
ECC_DBE = D + "ECC_DBE_VOL_TOTAL"
RETIRED_SBE = D + "RETIRED_SBE"
RETIRED_DBE = D + "RETIRED_DBE"
RETIRED_PENDING = D + "RETIRED_PENDING"
NVL_CRC_FLIT = D + "NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL"
NVL_CRC_DATA = D + "NVLINK_CRC_DATA_ERROR_COUNT_TOTAL"
NVL_REPLAY = D + "NVLINK_REPLAY_ERROR_COUNT_TOTAL"
NVL_RECOVERY = D + "NVLINK_RECOVERY_ERROR_COUNT_TOTAL"
NVL5_SYMBOL = D + "NVLINK_COUNT_RX_SYMBOL_ERRORS"
NVL5_EFFECTIVE = D + "NVLINK_COUNT_EFFECTIVE_ERRORS"
NVL5_RECOVERY = D + "NVLINK_COUNT_LINK_RECOVERY_EVENTS"
NVL5_SYMBOL_BER = D + "NVLINK_COUNT_SYMBOL_BER_FLOAT"
NVL5_EFFECTIVE_BER = D + "NVLINK_COUNT_EFFECTIVE_BER_FLOAT"
PROF_GR = P + "GR_ENGINE_ACTIVE"
PROF_TENSOR = P + "PIPE_TENSOR_ACTIVE"
PROF_DRAM = P + "DRAM_ACTIVE"
PROF_PCIE_TX = P + "PCIE_TX_BYTES"
PROF_PCIE_RX = P + "PCIE_RX_BYTES"

_CORE_HEAD = (SM_CLOCK, MEM_CLOCK, MEMORY_TEMP, GPU_TEMP, POWER, ENERGY)
_UTILS = (MEM_COPY_UTIL, ENC_UTIL, DEC_UTIL)
_REMAP = (UNC_REMAP, COR_REMAP, REMAP_FAIL)
_PROF = (PROF_GR, PROF_TENSOR, PROF_DRAM, PROF_PCIE_TX, PROF_PCIE_RX)

# dcgm-exporter CSVs as shipped at the tags named in the README (blank-valued fields omitted:
# VGPU_LICENSE_STATUS on bare metal everywhere, remapped rows on V100).
_CSV_2_2_9_DEFAULT_V100 = (
    *_CORE_HEAD,
    PCIE_TX_TP,
    PCIE_RX_TP,
    PCIE_REPLAY,
    *_UTILS,  # GPU_UTIL is commented out in this CSV
    XID,
    FB_FREE,
    FB_USED,
    NVLINK_BW,
)
_CSV_3_1_8_DEFAULT = (
    *_CORE_HEAD,
    PCIE_TX_TP,
    PCIE_RX_TP,
    PCIE_REPLAY,
    GPU_UTIL,
    *_UTILS,
    XID,
    FB_FREE,
    FB_USED,
    NVLINK_BW,
    *_REMAP,
)
_CSV_3_3_5_DCP = (
    *_CORE_HEAD,
    PCIE_REPLAY,
    GPU_UTIL,
    *_UTILS,
    XID,
    FB_FREE,
    FB_USED,
    NVLINK_BW,
    *_REMAP,
    *_PROF,
)
_CSV_4X = (
    *_CORE_HEAD,
    PCIE_REPLAY,
    GPU_UTIL,
    *_UTILS,
    XID,
    FB_FREE,
    FB_USED,
    FB_RESERVED,
    NVLINK_BW,
    *_REMAP,
    *_PROF,
)
_CSV_A800_LEAN = (  # site-trimmed 3.2.5-3.1.7 default-counters.csv (cardinality cut)
    SM_CLOCK,
    MEM_CLOCK,
    MEMORY_TEMP,
    GPU_TEMP,
    POWER,
    ENERGY,
    PCIE_REPLAY,
    GPU_UTIL,
    XID,
    FB_FREE,
    FB_USED,
    NVLINK_BW,
    UNC_REMAP,
    COR_REMAP,
)

_DCGM_COUNTERS = frozenset(
    {
        ENERGY,
        PCIE_TX_TP,
        PCIE_RX_TP,
        PCIE_REPLAY,
        NVLINK_BW,
        UNC_REMAP,
        COR_REMAP,
        POWER_VIOL,
        THERMAL_VIOL,
        ECC_SBE,
        ECC_DBE,
        RETIRED_SBE,
        RETIRED_DBE,
        RETIRED_PENDING,
        NVL_CRC_FLIT,
        NVL_CRC_DATA,
        NVL_REPLAY,
        NVL_RECOVERY,
        NVL5_SYMBOL,
        NVL5_EFFECTIVE,
        NVL5_RECOVERY,
    }
)
RATE_VALUED_COUNTERS = frozenset({NVLINK_BW, PCIE_TX_TP, PCIE_RX_TP})

N_ = "node_"
CPU_SECONDS = N_ + "cpu_seconds_total"
LOAD1, LOAD5, LOAD15 = N_ + "load1", N_ + "load5", N_ + "load15"
MEM_TOTAL = N_ + "memory_MemTotal_bytes"
MEM_AVAIL = N_ + "memory_MemAvailable_bytes"
MEM_FREE = N_ + "memory_MemFree_bytes"
MEM_CACHED = N_ + "memory_Cached_bytes"
MEM_DIRTY = N_ + "memory_Dirty_bytes"
PROCS_RUNNING = N_ + "procs_running"
PROCS_BLOCKED = N_ + "procs_blocked"
CTX_SWITCHES = N_ + "context_switches_total"
BOOT_TIME = N_ + "boot_time_seconds"
NET_RX = N_ + "network_receive_bytes_total"
NET_TX = N_ + "network_transmit_bytes_total"
NET_UP = N_ + "network_up"
NET_CARRIER = N_ + "network_carrier_changes_total"
DISK_R = N_ + "disk_read_bytes_total"
DISK_W = N_ + "disk_written_bytes_total"
DISK_IO = N_ + "disk_io_time_seconds_total"
FS_AVAIL = N_ + "filesystem_avail_bytes"
FS_SIZE = N_ + "filesystem_size_bytes"
VM_PGMAJ = N_ + "vmstat_pgmajfault"
VM_OOM = N_ + "vmstat_oom_kill"
TCP_RETRANS = N_ + "netstat_Tcp_RetransSegs"
TCP_OUTSEGS = N_ + "netstat_Tcp_OutSegs"
CLOCKSOURCE = N_ + "time_clocksource_current_info"
PSI_CPU = N_ + "pressure_cpu_waiting_seconds_total"
PSI_IO_W = N_ + "pressure_io_waiting_seconds_total"
PSI_IO_S = N_ + "pressure_io_stalled_seconds_total"
PSI_MEM_W = N_ + "pressure_memory_waiting_seconds_total"
PSI_MEM_S = N_ + "pressure_memory_stalled_seconds_total"
SOFTNET_PROC = N_ + "softnet_processed_total"
SOFTNET_DROP = N_ + "softnet_dropped_total"
SOFTNET_SQUEEZE = N_ + "softnet_times_squeezed_total"
EDAC_CE = N_ + "edac_correctable_errors_total"
EDAC_UE = N_ + "edac_uncorrectable_errors_total"
HWMON_TEMP = N_ + "hwmon_temp_celsius"
THERMAL_ZONE = N_ + "thermal_zone_temp"
RAPL = N_ + "rapl_package_joules_total"
PKG_THROTTLES = N_ + "cpu_package_throttles_total"
IB = N_ + "infiniband_"
IB_RX = IB + "port_data_received_bytes_total"
IB_TX = IB + "port_data_transmitted_bytes_total"
IB_WAIT = IB + "port_transmit_wait_total"
IB_SYMBOL = IB + "symbol_error_total"
IB_LER = IB + "link_error_recovery_total"
IB_DOWNED = IB + "link_downed_total"
IB_RCV_ERR = IB + "port_errors_received_total"
IB_STATE = IB + "state_id"
IB_PHYS = IB + "physical_state_id"
IB_RATE = IB + "rate_bytes_per_second"
ET = N_ + "ethtool_"
ET_TX_PAUSE = ET + "transmitted_prio3_pause"
ET_TX_PAUSE_DUR = ET + "transmitted_prio3_pause_duration"
ET_RX_PAUSE = ET + "received_prio3_pause"
ET_RX_DISCARDS = ET + "received_discards_phy"
ET_STALLED_WR = ET + "outbound_pci_stalled_wr"
ET_STALLED_WR_EV = ET + "outbound_pci_stalled_wr_events"
ET_PCI_SI = ET + "received_pci_signal_integrity"
ET_LINK_DOWN = ET + "link_down_events_phy"

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
        PSI_CPU,
        PSI_IO_W,
        PSI_IO_S,
        PSI_MEM_W,
        PSI_MEM_S,
        SOFTNET_PROC,
        SOFTNET_DROP,
        SOFTNET_SQUEEZE,
        EDAC_CE,
        EDAC_UE,
        RAPL,
        PKG_THROTTLES,
        IB_RX,
        IB_TX,
        IB_WAIT,
        IB_SYMBOL,
        IB_LER,
        IB_DOWNED,
        IB_RCV_ERR,
    }
)
# node_exporter exposes these untyped, but they are cumulative kernel / NIC counters.
_UNTYPED_CUMULATIVE = frozenset(
    {
        VM_PGMAJ,
        VM_OOM,
        TCP_RETRANS,
        TCP_OUTSEGS,
        ET_TX_PAUSE,
        ET_TX_PAUSE_DUR,
        ET_RX_PAUSE,
        ET_RX_DISCARDS,
        ET_STALLED_WR_EV,
        ET_PCI_SI,
        ET_LINK_DOWN,
    }
)
COUNTER_METRICS = frozenset(_DCGM_COUNTERS | _NODE_COUNTERS | _UNTYPED_CUMULATIVE)


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
    ncpu: int
    mem_gib: int
    sockets: int
    cpu_vendor: str  # "intel" | "amd" | "arm"
    fb_mib: int
    fb_reserved: int
    fb_idle: int
    tdp: float
    idle_w: float
    sm_max: float
    sm_idle: float
    mem_clock: float
    tensor_nom: float
    dram_nom: float
    nvl_mibs: float  # NVLINK_BANDWIDTH_TOTAL value while training (rate, GUESS units)
    pcie_bps: float  # host<->GPU PCIe traffic while training, B/s
    inlet: float
    temp_gain: float  # degC above inlet at full power
    t_slow: float  # SW thermal slowdown temperature (GUESS)
    liquid: bool
    dcgm: tuple[str, ...]
    dcgm_version: str
    collect: float  # dcgm-exporter collect interval, s
    viol_unit: float  # violation counter units per second (1e6 us, 1e9 ns)
    ib_ports: tuple[str, ...]  # node_infiniband device:port labels
    ib_rate: float
    roce_netdevs: tuple[str, ...]  # netdev of each RDMA port (RoCE) or ()
    frontend: str
    node_version: str
    collectors: frozenset[str]
    disk: str
    scratch: str
    scratch_bytes: float
    root_bytes: float
    clocksource: str
    hwmon: tuple[str, ...]
    d_intervals: tuple[float, ...]
    n_intervals: tuple[float, ...]
    max_nodes: int
    cap_frac: float  # power sits at the cap under full load (fraction of TDP reached)

    @property
    def reasons(self) -> str | None:
        if THROTTLE_3X in self.dcgm:
            return THROTTLE_3X
        if EVENTS_4X in self.dcgm:
            return EVENTS_4X
        return None

    @property
    def n_ports(self) -> int:
        return len(self.ib_ports)


_COMMON = frozenset({"cpu", "loadavg", "meminfo", "stat", "netdev", "netclass", "diskstats"})
_COMMON |= {"filesystem", "vmstat", "time"}

SITES: dict[str, Site] = {
    "gb2": Site(
        name="gb2",
        gpu="NVIDIA GB200 (NVL72 compute tray: 2 Grace + 4 B200)",
        n_gpu=4,
        ncpu=144,
        mem_gib=1741,
        sockets=2,
        cpu_vendor="arm",
        fb_mib=189471,
        fb_reserved=1180,
        fb_idle=0,
        tdp=1200.0,
        idle_w=160.0,
        sm_max=1965.0,
        sm_idle=540.0,
        mem_clock=3996.0,
        tensor_nom=0.52,
        dram_nom=0.46,
        nvl_mibs=310000.0,
        pcie_bps=0.6e9,
        inlet=30.0,
        temp_gain=26.0,
        t_slow=87.0,
        liquid=True,
        dcgm=(
            *_CSV_4X,
            EVENTS_4X,
            POWER_VIOL,
            THERMAL_VIOL,
            NVL5_SYMBOL,
            NVL5_EFFECTIVE,
            NVL5_RECOVERY,
            NVL5_SYMBOL_BER,
            NVL5_EFFECTIVE_BER,
        ),
        dcgm_version="4.4.1-4.5.2 dcp-metrics-included.csv + site lines",
        collect=10.0,
        viol_unit=1e9,
        ib_ports=("mlx5_0:1", "mlx5_1:1", "mlx5_2:1", "mlx5_3:1"),
        ib_rate=50e9,
        roce_netdevs=(),
        frontend="enP6p3s0f0np0",
        node_version="1.9.1",
        collectors=_COMMON | {"netstat", "softnet", "pressure", "infiniband", "thermal_zone"},
        disk="md0",
        scratch="/local",
        scratch_bytes=15.2e12,
        root_bytes=0.9e12,
        clocksource="arch_sys_counter",
        hwmon=(),
        d_intervals=(15.0, 30.0),
        n_intervals=(15.0, 30.0),
        max_nodes=576,
        cap_frac=0.93,
    ),
    "b2x": Site(
        name="b2x",
        gpu="NVIDIA B200 (DGX B200, 8 GPUs)",
        n_gpu=8,
        ncpu=224,
        mem_gib=2048,
        sockets=2,
        cpu_vendor="intel",
        fb_mib=183359,
        fb_reserved=1146,
        fb_idle=0,
        tdp=1000.0,
        idle_w=140.0,
        sm_max=1965.0,
        sm_idle=600.0,
        mem_clock=3996.0,
        tensor_nom=0.49,
        dram_nom=0.43,
        nvl_mibs=280000.0,
        pcie_bps=1.4e9,
        inlet=26.0,
        temp_gain=52.0,
        t_slow=88.0,
        liquid=False,
        dcgm=(
            *_CSV_4X,
            EVENTS_4X,
            POWER_VIOL,
            THERMAL_VIOL,
            NVL5_SYMBOL,
            NVL5_EFFECTIVE,
            NVL5_RECOVERY,
        ),
        dcgm_version="4.5.2-4.8.1 default-counters.csv + site lines",
        collect=30.0,
        viol_unit=1e9,
        ib_ports=(
            "mlx5_0:1",
            "mlx5_3:1",
            "mlx5_4:1",
            "mlx5_5:1",
            "mlx5_6:1",
            "mlx5_9:1",
            "mlx5_10:1",
            "mlx5_11:1",
        ),
        ib_rate=50e9,
        roce_netdevs=(),
        frontend="bond0",
        node_version="1.8.2",
        collectors=_COMMON
        | {"netstat", "softnet", "pressure", "infiniband", "edac", "hwmon", "rapl", "throttle"},
        disk="md0",
        scratch="/raid",
        scratch_bytes=30.7e12,
        root_bytes=1.8e12,
        clocksource="tsc",
        hwmon=("platform_coretemp_0:temp1", "platform_coretemp_1:temp1"),
        d_intervals=(15.0, 30.0),
        n_intervals=(15.0, 30.0, 60.0),
        max_nodes=256,
        cap_frac=0.97,
    ),
    "h2a": Site(
        name="h2a",
        gpu="NVIDIA H200 141GB (HGX, 2x AMD EPYC 9654, direct liquid cooling)",
        n_gpu=8,
        ncpu=384,
        mem_gib=1536,
        sockets=2,
        cpu_vendor="amd",
        fb_mib=143771,
        fb_reserved=0,
        fb_idle=0,
        tdp=700.0,
        idle_w=76.0,
        sm_max=1980.0,
        sm_idle=345.0,
        mem_clock=2619.0,
        tensor_nom=0.44,
        dram_nom=0.41,
        nvl_mibs=190000.0,
        pcie_bps=1.1e9,
        inlet=32.0,
        temp_gain=22.0,
        t_slow=86.0,
        liquid=True,
        dcgm=(
            *_CSV_3_3_5_DCP,
            THROTTLE_3X,
            NVL_REPLAY,
            NVL_RECOVERY,
            POWER_VIOL,
            THERMAL_VIOL,
        ),
        dcgm_version="3.3.5-3.4.0 dcp-metrics-included.csv + site lines",
        collect=15.0,
        viol_unit=1e6,
        ib_ports=tuple(f"mlx5_{i}:1" for i in range(8)),
        ib_rate=50e9,
        roce_netdevs=(),
        frontend="eno1",
        node_version="1.7.0",
        collectors=_COMMON
        | {"netstat", "softnet", "pressure", "infiniband", "edac", "hwmon", "rapl"},
        disk="nvme0n1",
        scratch="/scratch",
        scratch_bytes=7.0e12,
        root_bytes=0.9e12,
        clocksource="tsc",
        hwmon=("pci0000:00_0000:00:18_3:temp1", "pci0000:80_0000:80:18_3:temp1"),
        d_intervals=(15.0, 30.0),
        n_intervals=(15.0, 30.0),
        max_nodes=512,
        cap_frac=0.97,
    ),
    "h8r": Site(
        name="h8r",
        gpu="NVIDIA H800 80GB (HGX, RoCEv2 8x200GbE)",
        n_gpu=8,
        ncpu=192,
        mem_gib=2048,
        sockets=2,
        cpu_vendor="intel",
        fb_mib=81559,
        fb_reserved=0,
        fb_idle=0,
        tdp=700.0,
        idle_w=70.0,
        sm_max=1980.0,
        sm_idle=345.0,
        mem_clock=2619.0,
        tensor_nom=0.0,
        dram_nom=0.0,
        nvl_mibs=120000.0,
        pcie_bps=1.0e9,
        inlet=27.0,
        temp_gain=50.0,
        t_slow=87.0,
        liquid=False,
        dcgm=(*_CSV_3_1_8_DEFAULT, THROTTLE_3X, ECC_SBE, ECC_DBE),
        dcgm_version="3.1.8-3.1.5 default-counters.csv + site lines",
        collect=30.0,
        viol_unit=1e6,
        ib_ports=tuple(f"mlx5_{i}:1" for i in range(8)),
        ib_rate=25e9,
        roce_netdevs=(
            "ens1f0np0",
            "ens1f1np1",
            "ens2f0np0",
            "ens2f1np1",
            "ens3f0np0",
            "ens3f1np1",
            "ens4f0np0",
            "ens4f1np1",
        ),
        frontend="bond0",
        node_version="1.6.1",
        collectors=_COMMON
        | {
            "netstat",
            "softnet",
            "pressure",
            "infiniband",
            "edac",
            "hwmon",
            "rapl",
            "throttle",
            "ethtool",
        },
        disk="nvme0n1",
        scratch="/data",
        scratch_bytes=7.6e12,
        root_bytes=0.45e12,
        clocksource="tsc",
        hwmon=("platform_coretemp_0:temp1", "platform_coretemp_1:temp1"),
        d_intervals=(10.0, 15.0),
        n_intervals=(15.0, 30.0),
        max_nodes=384,
        cap_frac=0.97,
    ),
    "v1x": Site(
        name="v1x",
        gpu="Tesla V100-SXM2-32GB (DGX-1)",
        n_gpu=8,
        ncpu=80,
        mem_gib=512,
        sockets=2,
        cpu_vendor="intel",
        fb_mib=32510,
        fb_reserved=0,
        fb_idle=0,
        tdp=300.0,
        idle_w=43.0,
        sm_max=1530.0,
        sm_idle=135.0,
        mem_clock=877.0,
        tensor_nom=0.0,
        dram_nom=0.0,
        nvl_mibs=60000.0,
        pcie_bps=0.8e9,
        inlet=24.0,
        temp_gain=46.0,
        t_slow=83.0,
        liquid=False,
        dcgm=(
            *_CSV_2_2_9_DEFAULT_V100,
            ECC_SBE,
            ECC_DBE,
            RETIRED_SBE,
            RETIRED_DBE,
            RETIRED_PENDING,
            NVL_CRC_FLIT,
            NVL_CRC_DATA,
            NVL_REPLAY,
            NVL_RECOVERY,
        ),
        dcgm_version="2.2.9-2.4.1 default-counters.csv + site-uncommented ECC/retired/NVLink lines",
        collect=30.0,
        viol_unit=1e6,
        ib_ports=("mlx5_0:1", "mlx5_1:1", "mlx5_2:1", "mlx5_3:1"),
        ib_rate=12.5e9,
        roce_netdevs=(),
        frontend="enp1s0f0",
        node_version="1.3.1",
        collectors=_COMMON
        | {"netstat", "softnet", "infiniband", "edac", "hwmon", "rapl", "throttle"},
        disk="md0",
        scratch="/raid",
        scratch_bytes=7.0e12,
        root_bytes=0.44e12,
        clocksource="tsc",
        hwmon=("platform_coretemp_0:temp1", "platform_coretemp_1:temp1"),
        d_intervals=(15.0, 30.0),
        n_intervals=(15.0, 30.0),
        max_nodes=96,
        cap_frac=0.92,
    ),
    "a8r": Site(
        name="a8r",
        gpu="NVIDIA A800-SXM4-80GB (RoCEv2 4x200GbE, CentOS 7)",
        n_gpu=8,
        ncpu=128,
        mem_gib=1024,
        sockets=2,
        cpu_vendor="intel",
        fb_mib=81920,
        fb_reserved=0,
        fb_idle=0,
        tdp=400.0,
        idle_w=58.0,
        sm_max=1410.0,
        sm_idle=210.0,
        mem_clock=1593.0,
        tensor_nom=0.0,
        dram_nom=0.0,
        nvl_mibs=90000.0,
        pcie_bps=0.9e9,
        inlet=25.0,
        temp_gain=44.0,
        t_slow=85.0,
        liquid=False,
        dcgm=(*_CSV_A800_LEAN, THROTTLE_3X),
        dcgm_version="3.2.5-3.1.7 default-counters.csv trimmed by the site + site line",
        collect=30.0,
        viol_unit=1e6,
        ib_ports=("mlx5_0:1", "mlx5_1:1", "mlx5_2:1", "mlx5_3:1"),
        ib_rate=25e9,
        roce_netdevs=("p1p1", "p1p2", "p2p1", "p2p2"),
        frontend="em1",
        node_version="1.5.0",
        collectors=_COMMON,
        disk="nvme0n1",
        scratch="/data",
        scratch_bytes=6.4e12,
        root_bytes=0.43e12,
        clocksource="tsc",
        hwmon=(),
        d_intervals=(30.0, 60.0),
        n_intervals=(30.0, 60.0),
        max_nodes=1024,
        cap_frac=0.97,
    ),
}

_IB_FAMILY = (IB_RX, IB_TX, IB_WAIT, IB_SYMBOL, IB_LER, IB_DOWNED, IB_RCV_ERR)
_IB_GAUGES = (IB_STATE, IB_PHYS, IB_RATE)
_ETHTOOL = (
    ET_TX_PAUSE,
    ET_TX_PAUSE_DUR,
    ET_RX_PAUSE,
    ET_RX_DISCARDS,
    ET_STALLED_WR,
    ET_STALLED_WR_EV,
    ET_PCI_SI,
    ET_LINK_DOWN,
)
_CPU_MODES = ("idle", "iowait", "softirq", "system", "user")


def _netdevs(site: Site) -> tuple[str, ...]:
    return (site.frontend, *site.roce_netdevs)


def _node_series(site: Site) -> int:
    c = site.collectors
    nd = len(_netdevs(site))
    s = len(_CPU_MODES) + 3 + 5 + 5  # cpu modes, loads, memory, procs/ctx/boot
    s += nd * 4  # rx, tx, up, carrier
    s += 3 + 4  # disk + filesystem (2 mounts x avail/size)
    s += 2  # vmstat
    s += 1  # clocksource
    if "netstat" in c:
        s += 2
    if "pressure" in c:
        s += 5
    if "softnet" in c:
        s += 3
    if "edac" in c:
        s += 2
    if "hwmon" in c:
        s += len(site.hwmon)
    if "thermal_zone" in c:
        s += 2
    if "rapl" in c:
        s += site.sockets
    if "throttle" in c:
        s += site.sockets
    if "infiniband" in c:
        s += site.n_ports * (len(_IB_FAMILY) + len(_IB_GAUGES))
    if "ethtool" in c:
        s += len(site.roce_netdevs) * len(_ETHTOOL)
    return s


def _dcgm_series(site: Site) -> int:
    return len(site.dcgm) * site.n_gpu


ROW_CAP = 5_450_000


def _estimate_rows(site: Site, n: int, minutes: float, di: float, ni: float) -> float:
    per_s = _dcgm_series(site) / di + _node_series(site) / ni
    return n * minutes * 60.0 * per_s


# ----------------------------------------------------------------------------------------------
# Deterministic hashing (scrape phases, jitter, lost scrapes): cheap for any single node
# ----------------------------------------------------------------------------------------------

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_SALTS = [np.uint64(((i + 1) * 0x9E3779B97F4A7C15) % (1 << 64)) for i in range(8)]


def _u01(*keys) -> np.ndarray:
    """Uniform [0, 1) from integer keys (broadcast), splitmix64-style."""
    arrs = np.broadcast_arrays(*[np.atleast_1d(np.asarray(k, dtype=np.uint64)) for k in keys])
    x = np.zeros(arrs[0].shape, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for i, a in enumerate(arrs):
            x = (x ^ (a + _SALTS[i])) * _M1
            x ^= x >> np.uint64(29)
        x = x * _M2
        x ^= x >> np.uint64(32)
        x = x * _M1
        x ^= x >> np.uint64(31)
    return (x >> np.uint64(11)).astype(np.float64) / float(1 << 53)


_S_DCGM, _S_NODE, _S_COLLECT = 11, 23, 37
P_LOST = 0.003


def _scrape_grid(rs: int, salt: int, nodes: np.ndarray, dur: float, step: float):
    """Scheduled scrape times (K, n) of the given node indices, validity and loss masks."""
    nodes = np.asarray(nodes)
    ph = _u01(rs, salt, nodes) * step
    kk = int(np.ceil(dur / step)) + 1
    k = np.arange(kk)[:, None]
    t = ph[None, :] + k * step + 0.25 * _u01(rs, salt + 1, k, nodes[None, :])
    ok = t < dur
    lost = _u01(rs, salt + 2, k, nodes[None, :]) < P_LOST
    return t, ok, lost


def _collect_time(rs: int, nodes: np.ndarray, t: np.ndarray, collect: float) -> np.ndarray:
    cph = _u01(rs, _S_COLLECT, np.asarray(nodes)) * collect
    tc = cph[None, :] + np.floor((t - cph[None, :]) / collect) * collect
    return tc


def _first_sample(job_spec: dict, site: Site, n: int, t0: float, how: str) -> float:
    """Time (s from start) of the culprit's first sample showing the effect.

    how: "dcgm" (first kept scrape whose collection is >= t0), "node" (first kept node scrape
    >= t0), "dcgm_missing"/"node_missing"/"both_missing" (first scheduled scrape >= t0; a lost
    one counts, it is missing either way).
    """
    rs, dur = job_spec["rs"], job_spec["dur"]
    if how == "precursor":
        return _precursor_first_fail(job_spec, n, t0)
    best = np.inf
    if how in ("dcgm", "dcgm_missing", "both_missing"):
        t, ok, lost = _scrape_grid(rs, _S_DCGM, np.array([n]), dur, job_spec["di"])
        if how == "dcgm":
            tc = _collect_time(rs, np.array([n]), t, site.collect)
            m = ok & ~lost & (tc >= t0)
        else:
            m = ok & (t >= t0)
        if m.any():
            best = min(best, float(t[m].min()))
    if how in ("node", "node_missing", "both_missing"):
        t, ok, lost = _scrape_grid(rs, _S_NODE, np.array([n]), dur, job_spec["ni"])
        m = ok & (t >= t0) if how != "node" else ok & ~lost & (t >= t0)
        if m.any():
            best = min(best, float(t[m].min()))
    return best


# ----------------------------------------------------------------------------------------------
# Jobs (labels)
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


_ALL = tuple(SITES)
_X86 = ("b2x", "h2a", "h8r", "v1x", "a8r")
_KIND_SITES: dict[str, tuple[str, ...]] = {
    "uce_single_gpu_abort": _ALL,
    "gpu_lost_exporter_crashloop": _ALL,
    "ib_port_polling_abort": _ALL,
    "panic_reboot_return": _ALL,
    "scratch_fill_write_fail": _ALL,
    "cold_plate_flow_loss": ("gb2", "h2a"),
    "nvlink_symbol_ber_climb": ("gb2", "b2x", "h2a", "v1x"),
    "pcie_retimer_replays": ("b2x", "h2a", "h8r", "v1x", "a8r"),
    "nic_pcie_stall_backpressure": ("h8r",),
    "clocksource_hpet_fallback": _X86,
    "psu_fail_brake_duty": ("b2x", "h8r", "v1x", "a8r"),
    "ib_symbol_error_creep": ("gb2", "b2x", "h2a", "v1x"),
    "crac_cycling_rows": ("b2x", "h8r", "v1x", "a8r"),
}
_TWO_CULPRITS = (
    "cold_plate_flow_loss",
    "pcie_retimer_replays",
    "clocksource_hpet_fallback",
    "psu_fail_brake_duty",
)
# (kind, site, nodes) of the big jobs
_BIG = (
    ("plain_sync_run", "a8r", 1024),
    ("panic_reboot_return", "a8r", 1024),
    ("psu_fail_brake_duty", "a8r", 768),
    ("cold_plate_flow_loss", "gb2", 576),
    ("ib_symbol_error_creep", "h2a", 512),
    ("apt_daily_spread", "h8r", 384),
    ("async_ckpt_staging", "gb2", 288),
    ("uce_single_gpu_abort", "b2x", 256),
)
_SIZES = (4, 6, 8, 8, 12, 16, 16, 24, 32, 32, 32, 48, 48, 64, 64, 96, 128, 192)
_GB2_SIZES = (4, 9, 18, 18, 36, 36, 72, 72, 144)
_EPOCH = datetime(2026, 5, 4, tzinfo=UTC)
_DT = 5.0
_JOBS_PER_KIND = 5


def _hostnames(site: str, n: int, rng) -> list[str]:
    if site == "gb2":
        first = int(rng.integers(0, 30 * 18 - n)) if n < 30 * 18 else 0
        idx = first + np.arange(n)
        return [f"gb-r{1 + i // 18:02d}-t{1 + i % 18:02d}" for i in idx]
    if site == "b2x":
        first = int(rng.integers(0, 256 - n + 1))
        idx = first + np.arange(n)
        return [f"b2-su{1 + i // 32}-dgx{1 + i % 32:02d}" for i in idx]
    if site == "h2a":
        first = 1000 + int(rng.integers(0, 600))
        skip = np.cumsum(rng.random(n) < 0.06)
        return [f"nid{first + i + s:06d}" for i, s in enumerate(skip)]
    if site == "h8r":
        pool = [(a, b) for a in range(16, 32) for b in range(3, 250, 7)]
        first = int(rng.integers(0, len(pool) - n))
        return [f"hgx-10-140-{a}-{b}" for a, b in pool[first : first + n]]
    if site == "v1x":
        first = 1 + int(rng.integers(0, 128 - n))
        return [f"dgx1v-{first + i:03d}" for i in range(n)]
    slots = (5, 13, 21, 29)
    first = int(rng.integers(0, 1200 - n)) if n < 1200 else 0
    return [f"sh-a800-r{1 + (first + i) // 4:03d}-u{slots[(first + i) % 4]:02d}" for i in range(n)]


def _pick_sites(rng) -> dict[str, list[str]]:
    """Site of each of a kind's jobs, spread over its allowed sites."""
    out: dict[str, list[str]] = {}
    for kind in (*FAULT_KINDS, *BENIGN_KINDS):
        allowed = list(_KIND_SITES.get(kind, _ALL))
        order = list(rng.permutation(allowed))
        out[kind] = [order[i % len(order)] for i in range(_JOBS_PER_KIND)]
    return out


def _r5(x: float) -> float:
    return float(_DT * round(x / _DT))


def jobs(seed: int = 0) -> list[Job]:
    rng = np.random.default_rng([seed, 8])
    sites_for = _pick_sites(rng)
    plan: list[tuple[str, str, int | None]] = []
    big = list(_BIG)
    for kind in (*FAULT_KINDS, *BENIGN_KINDS):
        mine = [b for b in big if b[0] == kind]
        for i, site in enumerate(sites_for[kind]):
            if i < len(mine):
                plan.append((kind, mine[i][1], mine[i][2]))
            else:
                plan.append((kind, site, None))
    order = rng.permutation(len(plan))
    out = []
    two_done: set[str] = set()
    for j, p in enumerate(order):
        kind, site_name, size = plan[int(p)]
        site = SITES[site_name]
        if size is None:
            pool = _GB2_SIZES if site_name == "gb2" else _SIZES
            size = int(min(site.max_nodes, pool[int(rng.integers(len(pool)))]))
        two = kind in _TWO_CULPRITS and kind not in two_done and 8 <= size <= 256
        if two:
            two_done.add(kind)
        out.append(_make_job(j, kind, site, size, rng, two))
    return out


def _make_job(j: int, kind: str, site: Site, n: int, rng, two: bool) -> Job:
    rs = int(rng.integers(1, 2**31 - 1))
    hang = kind in _HANG_KINDS
    di = float(site.d_intervals[int(rng.integers(len(site.d_intervals)))])
    ni = float(site.n_intervals[int(rng.integers(len(site.n_intervals)))])
    if n >= 192:
        di, ni = max(di, 30.0), max(ni, 30.0)
    minutes = float(rng.uniform(34, 118))
    while _estimate_rows(site, n, minutes, di, ni) > ROW_CAP and (di < 60 or ni < 60):
        if di <= ni:
            di = 60.0 if di >= 30 else 30.0
        else:
            ni = 60.0 if ni >= 30 else 30.0
    max_min = min(120.0, ROW_CAP / _estimate_rows(site, n, 1.0, di, ni))
    minutes = min(minutes, max_min)
    warm = _r5(float(rng.uniform(150, 420)))
    if kind == "compile_cache_skew":
        warm = _r5(float(rng.uniform(240, 300)))
    spec: dict = {"rs": rs, "di": di, "ni": ni, "warm": warm, "kind": kind, "site": site.name}
    spec["launch"] = _r5(float(rng.uniform(10, 45)))
    spec["timeout"] = 600.0 if (max_min < 50 or rng.random() < 0.7) else 1800.0
    cul: list[dict] = []
    if hang:
        t_on = _r5(warm + float(rng.uniform(200, max(260.0, min(1500.0, 60 * max_min * 0.35)))))
        delay = {"uce_single_gpu_abort": 3.0, "gpu_lost_exporter_crashloop": 2.0}.get(kind, 0.0)
        if kind == "ib_port_polling_abort":
            delay = float(rng.uniform(8, 35))
        if kind == "panic_reboot_return":
            delay = 0.0
        if kind == "scratch_fill_write_fail":
            fill = float(rng.uniform(240, 780))
            spec["fill"] = fill
            delay = fill + float(rng.uniform(5, 80))
        t_crash = t_on + delay
        if kind == "panic_reboot_return":
            spec["precursor"] = float(rng.uniform(40, 100)) if rng.random() < 0.4 else 0.0
            t_crash = t_on + spec["precursor"]
        t_exit = t_crash + spec["timeout"] + float(rng.uniform(5, 40))
        dur = max(
            t_exit + float(rng.uniform(90, 300)), 60 * min(30.0 + float(rng.uniform(0, 6)), max_min)
        )
        if dur > 60 * max_min:
            spec["timeout"] = 600.0
            t_exit = t_crash + 600.0 + float(rng.uniform(5, 30))
            dur = min(t_exit + 90.0, 60 * max_min)
        spec.update(t_crash=t_crash, t_exit=t_exit)
        cul.append({"n": int(rng.integers(n)), "t": t_on})
    else:
        dur = 60.0 * minutes
        if kind in _SLOW_KINDS:
            lo, hi = warm + 200.0, dur - 13 * 60.0
            t_on = _r5(float(rng.uniform(lo, max(lo + 5, hi))))
            picks = rng.permutation(n)
            cul.append({"n": int(picks[0]), "t": t_on})
            if two and n >= 4:
                spec["two"] = True
    spec["dur"] = float(dur)
    spec["cul"] = cul
    _fault_params(kind, site, spec, rng, n)
    if spec.get("two"):
        c0 = cul[0]
        if kind == "cold_plate_flow_loss":
            other = (c0["n"] + 1) % n
        else:
            other = int((c0["n"] + 1 + rng.integers(n - 1)) % n)
        t2 = _r5(min(c0["t"] + float(rng.uniform(120, 420)), dur - 11 * 60.0))
        c2 = dict(c0)
        c2.update(n=other, t=t2)
        cul.append(c2)
        _fault_params(kind, site, spec, rng, n, only=1)
    spec["benign"] = _benign_params(kind, site, spec, rng, n)
    spec["ckpt"] = _ckpt_plan(kind, spec, rng)
    names = _hostnames(site.name, n, rng)
    start = _EPOCH + timedelta(days=float(rng.uniform(0, 70)), seconds=float(rng.uniform(0, 86400)))
    start = start.replace(microsecond=0)
    culprits = {}
    for c in cul:
        ts = min(_first_sample(spec, site, c["n"], t0, how) for how, t0 in _evidence(kind, spec, c))
        c["onset"] = ts
        culprits[names[c["n"]]] = start + timedelta(milliseconds=round(1000 * ts))
    name = f"v8-{j:03d}-{site.name}-{kind}"
    return Job(
        name=name,
        kind=kind,
        nodes=names,
        start=start,
        end=start + timedelta(seconds=spec["dur"]),
        culprits=culprits,
        dcgm_interval=di,
        node_interval=ni,
        site=site.name,
        spec=spec,
    )


def _evidence(kind: str, spec: dict, c: dict) -> list[tuple[str, float]]:
    """(target, time) pairs at which the culprit's own metrics first change."""
    t = c["t"]
    if kind == "uce_single_gpu_abort":
        ev = [("dcgm", t)]
        if c["teardown"]:
            ev.append(("node", c["t_td"] + 1.0))
        return ev
    if kind == "gpu_lost_exporter_crashloop":
        return [("dcgm_missing", t), ("node", t)]
    if kind == "panic_reboot_return":
        if spec.get("precursor", 0) > 0:
            return [("node", t + 1.0), ("precursor", t)]
        return [("both_missing", t)]
    if kind == "scratch_fill_write_fail":
        return [("node", t + 1.0)]
    if kind == "cold_plate_flow_loss":
        return [("dcgm", t + 5.0)]
    if kind == "clocksource_hpet_fallback":
        return [("node", t), ("dcgm", t)]
    if kind in ("nvlink_symbol_ber_climb", "pcie_retimer_replays", "psu_fail_brake_duty"):
        return [("dcgm", t)]
    return [
        ("node", t)
    ]  # ib_port_polling_abort, nic_pcie_stall_backpressure, ib_symbol_error_creep


_S_PRECURSOR = 53


def _precursor_fail_mask(rs: int, nodes, t: np.ndarray, t0: float, t1: float) -> np.ndarray:
    """Node scrapes that time out during a soft-lockup precursor (t0 <= t < t1), ~55 %."""
    k = np.round(t).astype(np.int64)
    return (t >= t0) & (t < t1) & (_u01(rs, _S_PRECURSOR, k, np.asarray(nodes)[None, :]) < 0.55)


def _precursor_first_fail(spec: dict, n: int, t0: float) -> float:
    t, ok, _ = _scrape_grid(spec["rs"], _S_NODE, np.array([n]), spec["dur"], spec["ni"])
    m = ok & _precursor_fail_mask(spec["rs"], [n], t, t0, t0 + spec["precursor"])
    return float(t[m].min()) if m.any() else np.inf


def _fault_params(kind: str, site: Site, spec: dict, rng, n: int, only: int | None = None):
    cul = spec["cul"]
    targets = range(len(cul)) if only is None else [only]
    for i in targets:
        c = cul[i]
        c["g"] = int(rng.integers(site.n_gpu))
        c["p"] = int(rng.integers(max(1, site.n_ports)))
        if kind == "uce_single_gpu_abort":
            c["teardown"] = bool(rng.random() < 0.55)
            c["t_td"] = _r5(c["t"] + float(rng.uniform(7, 22)))
        elif kind == "gpu_lost_exporter_crashloop":
            c["crashloop"] = bool(rng.random() < 0.45)
            c["teardown"] = bool(rng.random() < 0.6)
            c["t_td"] = _r5(c["t"] + float(rng.uniform(7, 22)))
            c["dstate"] = int(rng.integers(2, 7))
        elif kind == "ib_port_polling_abort":
            c["neighbours"] = [int(x) for x in rng.permutation(n)[:4] if x != c["n"]][
                : int(rng.integers(1, 4))
            ]
        elif kind == "panic_reboot_return":
            c["down"] = float(rng.uniform(300, 560))
            c["dcgm_late"] = float(rng.uniform(40, 110))
        elif kind == "scratch_fill_write_fail":
            c["wbps"] = float(rng.uniform(0.4e9, 2.0e9))
            c["free0"] = c["wbps"] * spec["fill"]
        elif kind == "cold_plate_flow_loss":
            c["rmult"] = float(rng.uniform(2.6, 4.2))
            c["tau"] = float(rng.uniform(50, 110))
        elif kind == "nvlink_symbol_ber_climb":
            c["rate0"] = float(10 ** rng.uniform(3.3, 4.3))
            c["growth"] = float(rng.uniform(0.4, 1.2))  # decades per 10 min
            c["speed"] = float(rng.uniform(0.8, 0.93))
        elif kind == "pcie_retimer_replays":
            c["rate"] = float(10 ** rng.uniform(1.3, 2.9))
            c["bwf"] = float(rng.uniform(0.4, 0.7))
            c["speed"] = float(rng.uniform(0.84, 0.95))
        elif kind == "nic_pcie_stall_backpressure":
            c["stall"] = float(rng.uniform(45, 90))
            c["pause_frac"] = float(rng.uniform(0.2, 0.7))
            c["speed"] = float(rng.uniform(0.7, 0.9))
            c["si"] = bool(rng.random() < 0.5)
            c["neighbours"] = [int(x) for x in rng.permutation(n)[:6] if x != c["n"]][:4]
        elif kind == "clocksource_hpet_fallback":
            c["sys"] = float(rng.uniform(6, 20))
            c["speed"] = float(rng.uniform(0.82, 0.94))
            c["gap"] = float(rng.uniform(2, 6))
        elif kind == "psu_fail_brake_duty":
            c["duty"] = float(rng.uniform(0.25, 0.6))
            c["solid"] = float(rng.uniform(20, 40))
            c["bclk"] = float(rng.uniform(0.3, 0.5))
        elif kind == "ib_symbol_error_creep":
            c["sym"] = float(10 ** rng.uniform(0.7, 2.7))
            c["rcv"] = float(rng.uniform(0.5, 20))
            c["speed"] = float(rng.uniform(0.7, 0.92))


def _benign_params(kind: str, site: Site, spec: dict, rng, n: int) -> dict:
    dur, warm = spec["dur"], spec["warm"]
    b: dict = {}
    if kind == "compile_cache_skew":
        cold = rng.random(n) < float(rng.uniform(0.1, 0.35))
        extra = np.where(cold, rng.uniform(120, 420, n), rng.uniform(0, 40, n))
        b["ready"] = [float(x) for x in warm + extra]
    elif kind == "async_ckpt_staging":
        every = float(rng.uniform(600, 1200))
        b["events"] = [
            (float(t), float(rng.uniform(15, 45)), float(rng.uniform(120, 360)))
            for t in np.arange(warm + every * 0.6, dur - 200, every)
        ]
    elif kind == "shared_spine_contention":
        k = 1 if rng.random() < 0.6 else 2
        ev = []
        for i in range(k):
            t0 = float(
                rng.uniform(warm + 120 + i * (dur - warm) / 2, warm + (i + 1) * (dur - warm) / 2)
            )
            ev.append((t0, float(rng.uniform(480, 1800)), float(rng.uniform(0.55, 0.85))))
        b["events"] = ev
    elif kind == "brief_host_hiccup":
        k = int(rng.integers(1, 3))
        b["events"] = [
            (
                int(rng.integers(n)),
                float(rng.uniform(warm + 120, dur - 300)),
                float(rng.uniform(60, 220)),
            )
            for _ in range(k)
        ]
    elif kind == "bin_spread_constant":
        k = int(rng.integers(1, min(n, 4) + 1))
        b["hot"] = [int(x) for x in rng.permutation(n)[:k]]
        b["dt"] = [float(rng.uniform(6, 10)) for _ in range(k)]
        b["clk"] = [float(rng.uniform(0.97, 0.99)) for _ in range(k)]
    elif kind == "rare_error_ticks":
        k = int(rng.integers(3, 9))
        b["ticks"] = [
            (int(rng.integers(n)), float(rng.uniform(60, dur - 30)), int(rng.integers(6)))
            for _ in range(k)
        ]
    elif kind == "shard_prefetch_misses":
        t0 = float(rng.uniform(warm + 300, max(warm + 301, dur - 900)))
        frac = float(rng.uniform(0.15, 0.4))
        who = [int(x) for x in np.flatnonzero(rng.random(n) < frac)] or [int(rng.integers(n))]
        b["events"] = [
            (w, t0 + float(rng.uniform(0, 60)), float(rng.uniform(180, 540))) for w in who
        ]
        b["rx"] = float(rng.uniform(1e9, 4e9))
    elif kind == "apt_daily_spread":
        frac = float(rng.uniform(0.4, 1.0))
        who = [int(x) for x in np.flatnonzero(rng.random(n) < frac)] or [0]
        b["events"] = [
            (w, float(rng.uniform(60, dur - 480)), float(rng.uniform(120, 420))) for w in who
        ]
    elif kind == "crac_cycling_rows":
        rows = int(rng.integers(2, 5))
        b["rows"] = rows
        b["period"] = float(rng.uniform(900, 2100))
        b["amp"] = float(rng.uniform(2, 5))
        b["phase"] = [float(rng.uniform(0, 2 * np.pi)) for _ in range(rows)]
    elif kind == "alloc_cache_growth":
        k = int(rng.integers(max(2, n // 4), max(3, n) + 1))
        b["steps"] = [
            (
                int(rng.integers(n)),
                int(rng.integers(site.n_gpu)),
                float(rng.uniform(warm + 60, dur - 60)),
                float(rng.uniform(0.03, 0.08)),
            )
            for _ in range(k)
        ]
    elif kind == "swapped_in_node":
        b["node"] = int(rng.integers(n))
        b["uptime"] = float(rng.uniform(1800, 6 * 3600))
    return b


def _ckpt_plan(kind: str, spec: dict, rng) -> list[tuple[float, float]]:
    if kind in _HANG_KINDS or kind in ("async_ckpt_staging",) or rng.random() > 0.3:
        return []
    every = float(rng.uniform(480, 1200))
    out = []
    for t in np.arange(spec["warm"] + every, spec["dur"] - 120, every):
        out.append((_r5(float(t)), float(rng.uniform(40, 150))))
    return out


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
    """Accumulates samples as integer-coded parts; builds the long frame once."""

    def __init__(self, nodes: list[str], t0_ms: int):
        self.nodes = nodes
        self.t0_ms = t0_ms
        self.metrics: dict[str, int] = {}
        self.devices: dict[str, int] = {}
        self.parts: list[tuple] = []

    @staticmethod
    def _code(table: dict[str, int], key: str) -> int:
        if key not in table:
            table[key] = len(table)
        return table[key]

    def add(self, metric: str, devices, t_ms: np.ndarray, vals, mask: np.ndarray) -> None:
        """t_ms (K, N) int64; vals broadcastable to mask (K, N, len(devices))."""
        vals = np.broadcast_to(np.asarray(vals, dtype=np.float64), mask.shape)
        m = self._code(self.metrics, metric)
        nn = np.broadcast_to(np.arange(t_ms.shape[1], dtype=np.int16), t_ms.shape)
        for j, dev in enumerate(devices):
            mk = mask[:, :, j]
            if not mk.any():
                continue
            d = self._code(self.devices, dev)
            self.parts.append((t_ms[mk].astype(np.int32), nn[mk], m, d, vals[:, :, j][mk]))

    def frame(self) -> pl.DataFrame:
        if not self.parts:
            return pl.DataFrame(schema=_SCHEMA)
        parts, self.parts = self.parts, []
        sizes = [len(p[0]) for p in parts]
        ts = [p[0] for p in parts]
        ns = [p[1] for p in parts]
        vs = [p[4] for p in parts]
        mcodes = np.array([p[2] for p in parts], dtype=np.int32)
        dcodes = np.array([p[3] for p in parts], dtype=np.int32)
        del parts
        metrics = sorted(self.metrics, key=self.metrics.__getitem__)
        devices = sorted(self.devices, key=self.devices.__getitem__)
        t = np.concatenate(ts).astype(np.int64)
        del ts
        t += self.t0_ms
        time = pl.Series("time", t, dtype=pl.Int64).cast(pl.Datetime("ms", "UTC"))
        del t
        n = np.concatenate(ns)
        del ns
        node = pl.Series("node", self.nodes, dtype=pl.String).gather(n)
        del n
        metric = pl.Series("metric", metrics, dtype=pl.String).gather(np.repeat(mcodes, sizes))
        device = pl.Series("device", devices, dtype=pl.String).gather(np.repeat(dcodes, sizes))
        v = np.concatenate(vs)
        del vs
        return pl.DataFrame([time, node, metric, device, pl.Series("value", v, dtype=pl.Float64)])


IDLE, INIT, TRAIN, PAUSE, SPIN = 0, 1, 2, 3, 4
_GIB = 1024.0**3


def _iir(x: np.ndarray, tau: float, y0=None) -> np.ndarray:
    """First-order lag along axis 0 (time) on the fine grid."""
    a = 1.0 - np.exp(-_DT / tau)
    y = np.empty_like(x, dtype=np.float64)
    y[0] = x[0] if y0 is None else y0
    for i in range(1, len(x)):
        y[i] = y[i - 1] + a * (x[i] - y[i - 1])
    return y


def _cum(rate: np.ndarray) -> np.ndarray:
    """Cumulative integral at fine-grid points of a per-second rate sampled on the grid."""
    c = np.cumsum(rate, axis=0, dtype=np.float64) * _DT
    out = np.empty_like(c)
    out[0] = 0.0
    out[1:] = c[:-1]
    return out


class _Ctx:
    """Per-job physical timeline on a 5 s grid, then sampled at each target's scrape times."""

    def __init__(self, job: Job):
        sp = job.spec
        self.job, self.sp = job, sp
        self.site = site = SITES[job.site]
        self.rng = rng = np.random.default_rng([sp["rs"], 8])
        self.N = n = len(job.nodes)
        self.G = site.n_gpu
        self.P = site.n_ports
        self.dur = sp["dur"]
        self.F = f = int(self.dur // _DT) + 2
        self.tf = np.arange(f) * _DT
        self.t0_epoch = job.start.timestamp()
        self.gm = np.full((f, n), TRAIN, dtype=np.int8)
        self.gm[self.tf < sp["warm"]] = INIT
        self.gm[self.tf < sp["launch"]] = IDLE
        # job-wide pace (1 = nominal step rate): slow jitter, warm-up ramp
        knots = rng.normal(0.0, 0.006, int(self.dur // 60) + 3)
        self.pace = 1.0 + np.interp(self.tf / 60.0, np.arange(len(knots)), knots)
        ramp = (self.tf >= sp["warm"]) & (self.tf < sp["warm"] + 90)
        self.pace[ramp] *= 0.8 + 0.2 * (self.tf[ramp] - sp["warm"]) / 90.0
        self.g_over: dict[str, dict[int, np.ndarray]] = {"gm": {}, "xid": {}, "hgap": {}}
        self.node_work: dict[int, np.ndarray] = {}
        self.clk = np.ones((f, n))
        self.hgap = np.zeros((f, n))  # GPU util points lost to host-side gaps
        self.brake = np.zeros((f, n), dtype=bool)
        self.inlet = site.inlet + rng.normal(0, 1.0, n)[None, :] + np.zeros((f, 1))
        self.h: dict[str, np.ndarray] = {}
        self.steps: list[tuple[str, int, int, float, float]] = []
        self.spec_rates: dict[tuple[str, int, int], np.ndarray] = {}
        self.gauge_over: list[tuple[str, int, int, float, float, float]] = []
        self.dcgm_down: list[tuple[int, float, float]] = []
        self.node_down: list[tuple[int, float, float]] = []
        self.node_fail: list[tuple[int, float, float]] = []
        self.gpu_gone: list[tuple[int, int, float]] = []
        self.reboot: dict[int, tuple[float, float]] = {}
        self.thermal: list[dict] = []
        self.fb_steps: list[tuple[int, int, float, float]] = []
        self.pcie_factor: dict[tuple[int, int], tuple[float, float]] = {}
        self.nvl_factor: dict[tuple[int, int], tuple[float, float]] = {}
        self.clocksource_switch: dict[int, float] = {}
        self.ib_down: dict[tuple[int, int], float] = {}
        self._static()

    # -- static per-node / per-GPU attributes and decoys ---------------------------------------
    def _static(self):
        rng, n, g, site = self.rng, self.N, self.G, self.site
        p = max(1, self.P)
        self.t_off = rng.normal(0, 1.6, (n, 1)) + rng.normal(0, 2.2, (n, g))
        self.pw_off = rng.normal(1.0, 0.018, (n, g))
        self.clk_off = 1.0 - np.abs(rng.normal(0, 0.006, (n, g)))
        self.hbm_off = rng.uniform(3, 9, (n, g))
        self.fb_frac = float(rng.uniform(0.55, 0.92))
        self.fb_off = rng.normal(0, 0.012, (n, g))
        self.uptime = rng.uniform(3, 90, n) * 86400.0
        self.cpu_user = site.n_gpu * float(rng.uniform(0.8, 1.8)) * rng.normal(1, 0.05, n)
        self.cpu_sys = site.n_gpu * float(rng.uniform(0.18, 0.35)) * rng.normal(1, 0.05, n)
        self.mem_used = float(rng.uniform(0.12, 0.4)) * rng.normal(1, 0.03, n)
        self.cache = float(rng.uniform(0.08, 0.3)) * rng.normal(1, 0.08, n)
        self.fr_base = float(rng.uniform(5e6, 60e6))
        self.ib_util = float(rng.uniform(0.12, 0.4))
        self.port_share = rng.normal(1.0, 0.015, (n, p))
        self.disk_r_base = float(rng.uniform(5e6, 120e6))
        self.cpu_temp0 = rng.normal(0, 2.0, (n, max(1, len(site.hwmon), 2)))
        # decoys: stale application Xids, historical counters
        self.xid0 = np.zeros((n, g))
        stale = rng.random((n, g)) < 0.02
        self.xid0[stale] = rng.choice([13, 31, 43, 45], int(stale.sum()))
        self.base: dict[str, np.ndarray] = {}

        def hist(name, shape, prob, lo, hi):
            a = np.zeros(shape)
            m = rng.random(shape) < prob
            a[m] = rng.integers(lo, hi + 1, int(m.sum()))
            self.base[name] = a

        hist(PCIE_REPLAY, (n, g), 0.15, 1, 500)
        hist(COR_REMAP, (n, g), 0.05, 1, 8)
        hist(UNC_REMAP, (n, g), 0.004, 1, 1)
        hist(ECC_SBE, (n, g), 0.04, 1, 60)
        hist(RETIRED_SBE, (n, g), 0.03, 1, 4)
        for f_ in (NVL_CRC_FLIT, NVL_CRC_DATA, NVL_REPLAY, NVL_RECOVERY, NVL5_RECOVERY):
            hist(f_, (n, g), 0.04, 1, 40)
        hist(NVL5_SYMBOL, (n, g), 0.6, 10, 400000)
        hist(NVL5_EFFECTIVE, (n, g), 0.03, 1, 20)
        hist(IB_DOWNED, (n, p), 0.08, 1, 3)
        hist(IB_LER, (n, p), 0.1, 1, 20)
        hist(IB_SYMBOL, (n, p), 0.1, 1, 200)
        hist(IB_RCV_ERR, (n, p), 0.08, 1, 100)
        hist(EDAC_CE, (n, 1), 0.08, 1, 300)
        hist(VM_OOM, (n, 1), 0.04, 1, 3)
        hist(SOFTNET_DROP, (n, 1), 0.3, 1, 5000)
        hist(PKG_THROTTLES, (n, site.sockets), 0.1, 1, 50)
        hist(ET_RX_DISCARDS, (n, p), 0.2, 1, 3000)
        hist(ET_PCI_SI, (n, p), 0.05, 1, 10)
        hist(ET_LINK_DOWN, (n, p), 0.1, 1, 4)
        nd = len(_netdevs(site))
        self.base[NET_CARRIER] = rng.integers(2, 7, (n, nd)).astype(float)
        # trickles: PCIe replays on 1 % of GPUs, EDAC CE on 2 % of nodes, NVLink5 FEC-corrected
        # symbol errors on ~30 % of GPUs (normal links are not error-free)
        self.trickle_replay = (rng.random((n, g)) < 0.01) * (1.0 / 900.0)
        self.trickle_ce = (rng.random(n) < 0.02) * (1.0 / 3600.0)
        self.nvl5_rate = (rng.random((n, g)) < 0.3) * 10 ** rng.uniform(-2, -0.3, (n, g))
        self.ber0 = np.where(rng.random((n, g)) < 0.5, 10 ** rng.uniform(-15.5, -13.5, (n, g)), 0)
        self.dev_rates: dict[str, np.ndarray] = {
            PCIE_REPLAY: self.trickle_replay,
            EDAC_CE: self.trickle_ce[:, None],
            NVL5_SYMBOL: self.nvl5_rate,
        }
        self.base[ENERGY] = (self.uptime * 0.4 * site.tdp * 1000.0)[:, None] * rng.uniform(
            0.8, 1.2, (n, g)
        )
        self.base[THERMAL_VIOL] = np.where(
            rng.random((n, g)) < 0.05, rng.uniform(1, 300, (n, g)) * site.viol_unit, 0.0
        )
        self.base[POWER_VIOL] = (self.uptime * 0.01 * site.viol_unit)[:, None] * rng.uniform(
            0, 1, (n, g)
        )
        self.brake_clk = np.full(n, 0.4)
        self.ber_over: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
        self.fs_fill: list[tuple[int, float, float, float, float]] = []
        self.root_free = rng.uniform(0.3, 0.7, n)
        self.scratch_free = rng.uniform(0.05, 0.5, n)
        self.pause_rate = np.where(rng.random((n, p)) < 0.4, rng.uniform(0.05, 20.0, (n, p)), 0.0)

    # -- helpers -------------------------------------------------------------------------------
    def gi(self, t: float) -> int:
        return int(min(max(np.floor(t / _DT), 0), self.F - 1))

    def after(self, t: float) -> np.ndarray:
        return self.tf >= t

    def window(self, t0: float, t1: float) -> np.ndarray:
        return (self.tf >= t0) & (self.tf < t1)

    def hadd(self, name: str, node, mask_or_arr, amount=1.0):
        if name not in self.h:
            self.h[name] = np.zeros((self.F, self.N))
        self.h[name][:, node] += np.asarray(mask_or_arr, dtype=np.float64) * amount

    def rate(self, metric: str, node: int, dev: int, arr: np.ndarray):
        key = (metric, node, dev)
        if key in self.spec_rates:
            self.spec_rates[key] = self.spec_rates[key] + arr
        else:
            self.spec_rates[key] = np.asarray(arr, dtype=np.float64)

    def step(self, metric: str, node: int, dev: int, t: float, inc: float):
        self.steps.append((metric, node, dev, t, inc))

    def gpu_mode(self, n: int) -> np.ndarray:
        if n not in self.g_over["gm"]:
            self.g_over["gm"][n] = np.repeat(self.gm[:, n : n + 1], self.G, axis=1)
        return self.g_over["gm"][n]

    def set_xid(self, n: int, g: int, t: float, first: int, final: int):
        arr = self.g_over["xid"].setdefault(n, np.repeat(self.xid0[n][None, :], self.F, axis=0))
        arr[self.after(t), g] = first
        arr[self.after(t + _DT), g] = final

    def hang(self, t_crash: float, t_exit: float):
        """Every rank blocks in NCCL from t_crash; the watchdog kills the job at t_exit."""
        i_c, i_e = self.gi(t_crash), self.gi(t_exit)
        seg = self.gm[i_c:i_e]
        seg[(seg == TRAIN) | (seg == PAUSE)] = SPIN
        self.gm[i_e:] = IDLE
        for arr in self.g_over["gm"].values():
            s2 = arr[i_c:i_e]
            s2[(s2 == TRAIN) | (s2 == PAUSE)] = SPIN
            arr[i_e:] = IDLE

    def kill_node(self, n: int, t: float):
        """torchrun's agent tears down the node's workers: all its GPUs idle, memory freed."""
        self.gm[self.after(t), n] = IDLE
        if n in self.g_over["gm"]:
            self.g_over["gm"][n][self.after(t)] = IDLE

    def slow(self, t: float, speed, t_end: float | None = None):
        m = self.after(t) if t_end is None else self.window(t, t_end)
        self.pace[m] = np.minimum(self.pace[m], speed if np.isscalar(speed) else speed[m])

    # -- finalize ------------------------------------------------------------------------------
    def finalize(self):
        site, f, n = self.site, self.F, self.N
        for th in self.thermal:
            self._thermal_loop(th)
        train = self.gm == TRAIN
        self.work = np.where(train, self.pace[:, None], 0.0)
        for node, w in self.node_work.items():
            self.work[:, node] = np.where(train[:, node], w, 0.0)
        self.pw = self._pw(self.gm, self.work, self.clk, self.brake)
        idle_frac = site.idle_w / site.tdp
        heat = idle_frac + (1 - idle_frac) * self.pw
        tau = 70.0 if site.liquid else 45.0
        self.temp = _iir(self.inlet + site.temp_gain * heat, tau)
        # per-GPU timelines of nodes with GPU-level overrides
        self.g_temp: dict[int, np.ndarray] = {}
        self.g_pw: dict[int, np.ndarray] = {}
        self.g_work: dict[int, np.ndarray] = {}
        over_w = self.g_over.get("work", {})
        over_c = self.g_over.get("clk", {})
        special = set(self.g_over["gm"]) | set(over_w) | set(over_c)
        for node in sorted(special):
            gmg = self._g(self.g_over["gm"], node, self.gm)
            wg = over_w[node] if node in over_w else self._g({}, node, self.work)
            wg = np.where(gmg == TRAIN, wg, 0.0)
            cg = self._g(over_c, node, self.clk)
            pwg = self._pw(gmg, wg, cg, self.brake[:, node : node + 1])
            self.g_pw[node] = pwg
            self.g_work[node] = wg
            hg = idle_frac + (1 - idle_frac) * pwg
            self.g_temp[node] = _iir(self.inlet[:, node : node + 1] + site.temp_gain * hg, tau)
        for th in self.thermal:
            i0 = th["i_min"]
            for node, raw in th["temp_raw"].items():
                arr = self.g_temp.get(node)
                if arr is None:
                    arr = np.repeat(self.temp[:, node : node + 1], self.G, axis=1)
                arr = arr.copy()
                arr[i0:] = raw[i0:]
                self.g_temp[node] = arr
        # host timelines
        gm = self.gm
        g = site.n_gpu
        pace = self.pace[:, None]
        user = np.select(
            [gm == TRAIN, gm == INIT, gm == SPIN, gm == PAUSE],
            [
                self.cpu_user * (0.55 + 0.45 * pace),
                self.cpu_user * 1.3,
                g * 1.0,
                self.cpu_user * 0.35,
            ],
            0.25,
        )
        system = np.select(
            [gm == TRAIN, gm == INIT, gm == SPIN, gm == PAUSE],
            [self.cpu_sys * (0.6 + 0.4 * pace), self.cpu_sys * 1.5, 0.1 * g, self.cpu_sys * 0.7],
            0.12,
        )
        active = gm != IDLE
        self.H = H = {}
        H["user"] = user + self._h("cpu_user")
        H["system"] = system + self._h("cpu_sys")
        H["iowait"] = 0.03 + 0.05 * active + self._h("cpu_iow")
        H["softirq"] = 0.05 + 0.25 * (gm == TRAIN) * pace + self._h("cpu_sirq")
        rng = self.rng
        for key, sd in (("user", 0.04), ("system", 0.06), ("iowait", 0.3), ("softirq", 0.1)):
            H[key] = H[key] * np.exp(rng.normal(0.0, sd, (f, n)))
        busy = H["user"] + H["system"] + H["iowait"] + H["softirq"]
        H["idle"] = np.maximum(site.ncpu - busy, 0.0)
        H["running"] = 1.0 + H["user"] + H["system"] + self._h("run")
        H["blocked"] = 0.2 * active + self._h("blk")
        tot = site.mem_gib * _GIB
        H["mem_used"] = tot * np.where(active, self.mem_used, 0.015) + self._h("mem")
        H["cache"] = tot * self.cache + self._h("cache")
        H["dirty"] = 5e7 + self._h("dirty")
        H["fr_rx"] = self.fr_base * (0.2 + 0.8 * (gm == TRAIN) * pace) + self._h("fr_rx")
        H["fr_tx"] = 0.3 * self.fr_base * (0.2 + 0.8 * (gm == TRAIN) * pace) + self._h("fr_tx")
        H["ib"] = site.ib_rate * self.ib_util * np.where(gm == TRAIN, pace, 0.0) + 2e5
        H["disk_r"] = self.disk_r_base * (gm == TRAIN) * pace + 1e5 + self._h("disk_r")
        H["disk_w"] = 2e6 + self._h("disk_w")
        H["disk_busy"] = np.clip(
            0.02 + H["disk_r"] / 3e9 + H["disk_w"] / 2e9 + self._h("disk_busy"), 0, 1
        )
        H["psi_cpu"] = 0.002 * busy / site.ncpu * 50 + self._h("psi_cpu")
        H["psi_io"] = 0.2 * H["iowait"] / max(1.0, g) + self._h("psi_io")
        H["psi_mem"] = self._h("psi_mem")
        H["retrans"] = 0.5 + 2e-7 * H["fr_tx"] + self._h("retrans")
        H["outsegs"] = (H["fr_tx"] + 2e4) / 8000.0
        H["ctx"] = 4e4 + 6e3 * (H["user"] + H["system"]) + self._h("ctx")
        H["softnet"] = (H["fr_rx"] + H["fr_tx"]) / 6000.0 + 500.0
        cpu_heat = (H["user"] + H["system"]) / site.ncpu
        self.cpu_temp = _iir(
            38.0 + 45.0 * cpu_heat + self._h("cpu_temp") + 0.2 * (self.inlet - site.inlet), 40.0
        )
        self.rapl_w = 90.0 + 250.0 * cpu_heat
        # loads: exponentially damped run-queue averages
        for key in list(H):
            H[key] = np.broadcast_to(np.asarray(H[key], dtype=np.float64), (f, n))
        for key, sd in (
            ("fr_rx", 0.15),
            ("fr_tx", 0.15),
            ("disk_r", 0.25),
            ("disk_w", 0.35),
            ("ctx", 0.05),
            ("softnet", 0.1),
            ("retrans", 0.5),
            ("outsegs", 0.1),
            ("psi_cpu", 0.3),
            ("psi_io", 0.3),
            ("ib", 0.02),
        ):
            H[key] = H[key] * np.exp(rng.normal(0.0, sd, (f, n)))
        q = H["running"] + H["blocked"]
        H["load1"] = _iir(q, 60.0)
        H["load5"] = _iir(q, 300.0)
        H["load15"] = _iir(q, 900.0)

    def _g(self, over: dict, node: int, base: np.ndarray) -> np.ndarray:
        if node in over:
            return over[node]
        return np.repeat(base[:, node : node + 1], self.G, axis=1)

    def _h(self, name: str):
        return self.h.get(name, 0.0)

    @staticmethod
    def _pw(gm, work, clk, brake):
        eff = np.where(brake, 0.35, clk)
        pw = np.select(
            [gm == TRAIN, gm == SPIN, gm == PAUSE, gm == INIT],
            [0.2 + 0.75 * work * eff**1.7, 0.16, 0.12, 0.09],
            0.0,
        )
        return pw

    def _thermal_loop(self, th: dict):
        """Closed-loop GPU temperature / SW thermal slowdown of cold-plate culprits."""
        site = self.site
        idle_frac = site.idle_w / site.tdp
        nodes = th["nodes"]
        a = 1.0 - np.exp(-_DT / 70.0)
        gain = site.temp_gain
        temps = {}
        clks = {}
        i_min = min(self.gi(t) for t in th["t"])
        state = {}
        for node in nodes:
            pw0 = 0.95
            t_eq = self.inlet[i_min, node] + gain * (idle_frac + (1 - idle_frac) * pw0)
            state[node] = (np.full(self.G, t_eq) + self.t_off[node], np.ones(self.G))
            temps[node] = np.full((self.F, self.G), np.nan)
            clks[node] = np.ones((self.F, self.G))
        hw = {node: np.zeros((self.F, self.G), dtype=bool) for node in nodes}
        for i in range(i_min, self.F):
            t = self.tf[i]
            cmin = 1.0
            for node in nodes:
                cmin = min(cmin, float(state[node][1].min()))
            for k, node in enumerate(nodes):
                tg, c = state[node]
                tk = th["t"][k]
                ramp = np.clip((t - tk) / 30.0, 0, 1) if t >= tk else 0.0
                m = 1.0 + (th["rmult"][k] - 1.0) * ramp
                mode = self.gm[i, node]
                work = np.minimum(1.0, self.pace[i] * cmin / c) if mode == TRAIN else 0.0
                pw = self._pw(np.full(self.G, mode), work, c, np.zeros(self.G, bool))
                t_ss = self.inlet[i, node] + gain * m * (idle_frac + (1 - idle_frac) * pw)
                tg = tg + a * (t_ss - tg)
                hot = tg > site.t_slow
                c = np.where(
                    hot,
                    np.maximum(c - 0.025, 0.45),
                    np.where(tg < site.t_slow - 1.5, np.minimum(c + 0.01, 1.0), c),
                )
                state[node] = (tg, c)
                temps[node][i] = tg
                clks[node][i] = c
                hw[node][i] = tg > site.t_slow + 2.5
        for node in nodes:
            self.clk[:, node] = clks[node].min(axis=1)
            self.g_over.setdefault("clk", {})[node] = clks[node]
            self.g_over.setdefault("hw_thermal", {})[node] = hw[node]
        cm = np.min([clks[nd].min(axis=1) for nd in nodes], axis=0)
        self.pace = np.minimum(self.pace, np.where(self.tf >= min(th["t"]), cm, 1.0))
        for node in nodes:
            cg = clks[node]
            self.node_work[node] = np.minimum(1.0, self.pace / np.maximum(cg.min(axis=1), 1e-3))
            self.g_over.setdefault("work", {})[node] = np.minimum(1.0, self.pace[:, None] / cg)
        th["temp_raw"] = {nd: temps[nd] - self.t_off[nd][None, :] for nd in nodes}
        th["i_min"] = i_min

    # -- sampling helpers ----------------------------------------------------------------------
    def _grid(self, salt: int, step: float):
        sp = self.sp
        t, ok, lost = _scrape_grid(sp["rs"], salt, np.arange(self.N), self.dur, step)
        return t, ok & ~lost

    @staticmethod
    def _down(keep: np.ndarray, t: np.ndarray, spans):
        for nd, a, b in spans:
            keep[:, nd] &= ~((t[:, nd] >= a) & (t[:, nd] < b))

    def _idx(self, tq: np.ndarray):
        idx = np.clip((tq // _DT).astype(np.int64), 0, self.F - 1)
        frac = np.clip(tq - idx * _DT, 0.0, _DT)
        return idx, frac

    def _sn(self, arr: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """(F, N) -> (K, N) at per-node grid indices."""
        return arr[idx, np.arange(self.N)[None, :]]

    def _sg(self, base: np.ndarray, over: dict, idx: np.ndarray) -> np.ndarray:
        """(F, N) node signal + {node: (F, G)} overrides -> (K, N, G)."""
        out = np.repeat(self._sn(base, idx)[:, :, None], self.G, axis=2)
        for node, arr in over.items():
            out[:, node, :] = arr[idx[:, node], :]
        return out

    def _counter(
        self, metric: str, ndev: int, tq: np.ndarray, node_rate=None, share=None, base=None
    ):
        """Cumulative counter at query times tq (K, N) for ndev devices: base (N, D) + node-level
        rate integral x per-device share + device-specific rates + steps; resets at reboots."""
        vals = self._counter_raw(metric, ndev, tq, node_rate, share, base)
        for nd, (tb, tdrv) in self.reboot.items():
            t_reset = tdrv if metric in _DCGM_COUNTERS else tb
            after = tq[:, nd] >= t_reset
            if not after.any():
                continue
            tq1 = np.full((1, self.N), t_reset)
            at_b = self._counter_raw(metric, ndev, tq1, node_rate, share, base)[0, nd]
            vals[after, nd, :] -= at_b[None, :]
            vals[after, nd, :] = np.maximum(vals[after, nd, :], 0.0)
        return vals

    def _counter_raw(self, metric, ndev, tq, node_rate, share, base=None):
        k, n = tq.shape
        if base is None:
            base = self.base.get(metric)
        if base is not None and base.shape[1] == ndev:
            vals = np.repeat(base[None, :, :], k, axis=0).astype(np.float64)
        else:
            vals = np.zeros((k, n, ndev))
        idx, frac = self._idx(tq)
        if node_rate is not None:
            c = _cum(node_rate)
            nn = np.arange(n)[None, :]
            acc = c[idx, nn] + node_rate[idx, nn] * frac
            vals += acc[:, :, None] * (1.0 if share is None else share[None, :, :])
        dev_rate = self.dev_rates.get(metric)
        if dev_rate is not None:
            vals += tq[:, :, None] * dev_rate[None, :, :]
        for (m, nd, dv), r in self.spec_rates.items():
            if m != metric or dv >= ndev:
                continue
            c = _cum(r)
            vals[:, nd, dv] += c[idx[:, nd]] + r[idx[:, nd]] * frac[:, nd]
        for m, nd, dv, t0, inc in self.steps:
            if m == metric and dv < ndev:
                vals[:, nd, dv] += inc * (tq[:, nd] >= t0)
        return vals

    # -- dcgm-exporter ---------------------------------------------------------------------------
    def render_dcgm(self, rows: _Rows):
        site, sp, rng = self.site, self.sp, self.rng
        n, g = self.N, self.G
        t, keep = self._grid(_S_DCGM, sp["di"])
        self._down(keep, t, self.dcgm_down)
        tc = np.maximum(_collect_time(sp["rs"], np.arange(n), t, site.collect), 0.0)
        idx, _ = self._idx(tc)
        tms = np.round(t * 1000.0).astype(np.int64)
        mask = np.repeat(keep[:, :, None], g, axis=2)
        for nd, gg, t0 in self.gpu_gone:
            mask[:, nd, gg] &= t[:, nd] < t0
        if not mask.any():
            return
        devs = [str(i) for i in range(g)]
        gm = self._sg(self.gm, self.g_over["gm"], idx)
        work = self._sg(self.work, self.g_work, idx)
        work = np.where(gm == TRAIN, work, 0.0)
        clk = self._sg(self.clk, self.g_over.get("clk", {}), idx)
        brake = self._sn(self.brake, idx)[:, :, None]
        hgap = self._sg(self.hgap, self.g_over["hgap"], idx)
        pace = self.pace[idx][:, :, None]
        busy = gm != IDLE
        shape = gm.shape

        # dcgm-exporter serves its last collection: noise is drawn per collection, so scrapes
        # between two collections repeat the same values exactly
        cph = _u01(sp["rs"], _S_COLLECT, np.arange(n)) * site.collect
        jc = np.floor((t - cph[None, :]) / site.collect).astype(np.int64) + 1
        jn = int(jc.max()) + 1
        nn = np.arange(n)[None, :]

        def noise(sd):
            return rng.normal(0.0, sd, (jn, n, g))[jc, nn]

        def unif():
            return rng.random((jn, n, g))[jc, nn]

        self._dcgm_noise = noise

        pw = self._pw(gm, work, clk, brake)
        watts = (
            site.idle_w
            + (site.tdp - site.idle_w) * pw * self.pw_off[None]
            + noise(0.006 * site.tdp)
        )
        watts = np.where(busy, watts, site.idle_w * (1 + noise(0.02)))
        cap = site.tdp * site.cap_frac
        capped = watts > cap
        watts = np.where(capped, cap - np.abs(noise(0.003 * site.tdp)), watts)
        eff = np.where(brake, self.brake_clk[None, :, None], clk)
        sm = site.sm_max * eff * self.clk_off[None] * np.where(capped, 0.985, 1.0)
        sm = np.where(busy, np.round(sm / 15.0) * 15.0, site.sm_idle)
        temp = self._sg(self.temp, self.g_temp, idx) + self.t_off[None] + noise(0.35)
        tens = np.select(
            [gm == TRAIN, gm == SPIN, gm == PAUSE, gm == INIT],
            [site.tensor_nom * work * (1 + noise(0.025)), 0.0004, 0.002, 0.01],
            0.0,
        )
        util = np.select(
            [gm == TRAIN, gm == SPIN, gm == PAUSE, gm == INIT],
            [97.0 + 3.0 * unif() - hgap, 100.0, 2.0 + 8.0 * unif(), 5.0 + 30.0 * unif()],
            0.0,
        )
        fb = site.fb_mib * (self.fb_frac + self.fb_off[None]) * np.ones(shape)
        for nd, gg, t0, frac in self.fb_steps:
            fb[:, nd, gg] += frac * site.fb_mib * (tc[:, nd] >= t0)
        fb = np.where(
            busy, np.minimum(np.round(fb), site.fb_mib - site.fb_reserved - 300), site.fb_idle
        )
        h2d = site.pcie_bps * np.where(gm == TRAIN, pace, np.where(busy, 0.01, 0.0001))
        d2h = 0.35 * h2d + self._sn(self._h_arr("d2h"), idx)[:, :, None]
        pf = np.ones(shape)
        for (nd, gg), (t0, fct) in self.pcie_factor.items():
            pf[:, nd, gg] = np.where(tc[:, nd] >= t0, fct, 1.0)
        h2d = h2d * pf * (1 + noise(0.08))
        d2h = d2h * pf * (1 + noise(0.08))
        nvl = site.nvl_mibs * np.where(gm == TRAIN, pace, 0.0) * (1 + noise(0.03))
        for (nd, gg), (t0, fct) in self.nvl_factor.items():
            nvl[:, nd, gg] *= np.where(tc[:, nd] >= t0, fct, 1.0)
        reasons = np.where(busy, 0, 1) | np.where(capped, 4, 0)
        for nd, hw in self.g_over.get("hw_thermal", {}).items():
            ck = self.g_over["clk"][nd][idx[:, nd]]
            reasons[:, nd, :] |= np.where(ck < 0.999, 0x20, 0) | np.where(hw[idx[:, nd]], 0x48, 0)
        reasons = reasons | np.where(brake & busy, 0x88, 0)
        xid = np.repeat(self.xid0[None], len(t), axis=0)
        for nd, arr in self.g_over["xid"].items():
            xid[:, nd, :] = arr[idx[:, nd], :]
        # energy (mJ since driver load) from the noise-free power timeline
        node_w = site.idle_w + (site.tdp - site.idle_w) * self.pw
        e_share = self.pw_off.copy()
        energy = self._counter(ENERGY, g, tc, node_w * 1000.0, e_share)
        for nd, pwg in self.g_pw.items():
            wg = (site.idle_w + (site.tdp - site.idle_w) * pwg) * 1000.0
            cg = _cum(wg)
            i_n = idx[:, nd]
            fr = np.clip(tc[:, nd] - i_n * _DT, 0, _DT)
            energy[:, nd, :] = (
                self.base[ENERGY][nd][None, :]
                + (cg[i_n] + wg[i_n] * fr[:, None]) * self.pw_off[nd][None, :]
            )
            if nd in self.reboot:
                tdrv = self.reboot[nd][1]
                i_b = self.gi(tdrv)
                energy[tc[:, nd] >= tdrv, nd, :] = (cg[i_n] - cg[i_b])[
                    tc[:, nd] >= tdrv
                ] * self.pw_off[nd][None, :]
        out: dict[str, np.ndarray] = {
            SM_CLOCK: sm,
            MEM_CLOCK: np.full(shape, site.mem_clock),
            GPU_TEMP: np.round(temp),
            MEMORY_TEMP: np.round(temp + self.hbm_off[None] + 2.0 * pw),
            POWER: np.round(watts, 3),
            ENERGY: np.floor(energy),
            GPU_UTIL: np.clip(np.round(util), 0, 100),
            MEM_COPY_UTIL: np.clip(
                np.round(
                    np.select(
                        [gm == TRAIN, gm == SPIN, gm == PAUSE],
                        [18 + 22 * work + noise(1.5), 1.0, 3.0],
                        0.0,
                    )
                ),
                0,
                100,
            ),
            ENC_UTIL: np.zeros(shape),
            DEC_UTIL: np.zeros(shape),
            XID: xid,
            FB_USED: fb,
            FB_FREE: site.fb_mib - site.fb_reserved - fb,
            FB_RESERVED: np.full(shape, float(site.fb_reserved)),
            NVLINK_BW: np.round(np.maximum(nvl, 0)),
            PCIE_TX_TP: np.round(np.maximum(d2h, 0) / 1024.0),
            PCIE_RX_TP: np.round(np.maximum(h2d, 0) / 1024.0),
            PROF_PCIE_TX: np.round(np.maximum(d2h, 0)),
            PROF_PCIE_RX: np.round(np.maximum(h2d, 0)),
            PROF_TENSOR: np.clip(tens, 0, 1),
            PROF_DRAM: np.clip(
                np.select(
                    [gm == TRAIN, gm == SPIN, gm == PAUSE],
                    [site.dram_nom * (0.25 + 0.75 * work) * (1 + noise(0.03)), 0.008, 0.03],
                    0.0,
                ),
                0,
                1,
            ),
            PROF_GR: np.clip(
                np.select(
                    [gm == TRAIN, gm == SPIN, gm == PAUSE, gm == INIT],
                    [
                        0.9 + 0.07 * work - hgap / 100.0 + noise(0.008),
                        0.985 + noise(0.004),
                        0.05,
                        0.12,
                    ],
                    0.0,
                ),
                0,
                1,
            ),
            REMAP_FAIL: np.zeros(shape),
            THROTTLE_3X: reasons.astype(np.float64),
            EVENTS_4X: reasons.astype(np.float64),
        }
        # DCP gauges: the exporter computes them over its collection window; DRAM/tensor of
        # sites without DCP are simply never emitted (field not in the CSV).
        ber = self._ber(tc, idx)
        out[NVL5_SYMBOL_BER] = ber[0]
        out[NVL5_EFFECTIVE_BER] = ber[1]
        capfrac = (
            np.clip((self.pw_off - 0.99) * 30.0, 0, 0.7)
            if site.cap_frac > 0.95
            else np.zeros((n, g))
        )
        full = (self.gm == TRAIN) & (self.pace[:, None] > 0.9)
        for metric in site.dcgm:
            if metric in out:
                vals = out[metric]
            elif metric == POWER_VIOL:
                vals = np.floor(self._counter(POWER_VIOL, g, tc, full * site.viol_unit, capfrac))
            elif metric == THERMAL_VIOL:
                vals = self._counter(THERMAL_VIOL, g, tc)
                for nd, ck in self.g_over.get("clk", {}).items():
                    if nd in self.g_over.get("hw_thermal", {}):
                        r = (ck < 0.999) * site.viol_unit
                        c = _cum(r)
                        vals[:, nd, :] += c[idx[:, nd]]
                vals = np.floor(vals)
            elif metric == PCIE_REPLAY:
                vals = np.floor(self._counter(metric, g, tc))
            elif metric == RETIRED_PENDING:
                vals = np.minimum(self._counter(metric, g, tc), 1.0)
            elif metric in _DCGM_COUNTERS:
                vals = np.floor(self._counter(metric, g, tc))
            else:
                raise KeyError(metric)
            rows.add(metric, devs, tms, vals, mask)

    def _ber(self, tc: np.ndarray, idx: np.ndarray):
        k = tc.shape[0]
        sym = np.repeat(self.ber0[None], k, axis=0) * (1 + self._dcgm_noise(0.1))
        eff = np.where(sym > 0, sym * 1e-6, 0.0)
        for (nd, gg), (r, reff) in self.ber_over.items():
            sym[:, nd, gg] = np.where(r[idx[:, nd]] > 0, r[idx[:, nd]] / 3.6e12, sym[:, nd, gg])
            eff[:, nd, gg] = np.where(
                reff[idx[:, nd]] > 0, reff[idx[:, nd]] / 3.6e12, eff[:, nd, gg]
            )
        return np.abs(sym), np.abs(eff)

    def _h_arr(self, name: str) -> np.ndarray:
        if name not in self.h:
            self.h[name] = np.zeros((self.F, self.N))
        return self.h[name]

    # -- node_exporter ---------------------------------------------------------------------------
    def render_node(self, rows: _Rows):
        site, sp, rng = self.site, self.sp, self.rng
        n = self.N
        c = site.collectors
        t, keep = self._grid(_S_NODE, sp["ni"])
        self._down(keep, t, self.node_down)
        for nd, a, b in self.node_fail:
            keep[:, nd] &= ~_precursor_fail_mask(sp["rs"], [nd], t[:, nd : nd + 1], a, b)[:, 0]
        if not keep.any():
            return
        tms = np.round(t * 1000.0).astype(np.int64)
        idx, _ = self._idx(t)
        H = self.H
        k = t.shape[0]
        up = self.uptime

        def m1(x):
            return x[:, :, None]

        def mask_d(d):
            return np.repeat(keep[:, :, None], d, axis=2)

        def gauge(name, devs, vals):
            rows.add(name, devs, tms, vals, mask_d(len(devs)))

        def noise(shape, sd):
            return rng.normal(0.0, sd, shape)

        one = [""]
        reboot_at = np.full(n, np.inf)
        for nd, (tb, _) in self.reboot.items():
            reboot_at[nd] = tb
        rebooted = t >= reboot_at[None, :]
        # cpu seconds by mode (summed over CPUs)
        mix = {"idle": 0.86, "iowait": 0.002, "softirq": 0.004, "system": 0.03, "user": 0.1}
        cols = []
        for mode in _CPU_MODES:
            b = (up * site.ncpu * mix[mode])[:, None]
            cols.append(self._counter(CPU_SECONDS, 1, t, H[mode], base=b)[:, :, 0])
        rows.add(CPU_SECONDS, list(_CPU_MODES), tms, np.round(np.stack(cols, axis=2), 2), mask_d(5))
        loads = [self._sn(H[x], idx) for x in ("load1", "load5", "load15")]
        for name, ld in zip((LOAD1, LOAD5, LOAD15), loads, strict=True):
            v = np.where(rebooted, 0.3, ld) * (1 + noise(ld.shape, 0.02))
            gauge(name, one, m1(np.round(np.maximum(v, 0), 2)))
        tot = site.mem_gib * _GIB
        used = self._sn(H["mem_used"], idx) * (1 + noise((k, n), 0.003))
        cache = np.where(rebooted, 2e9, self._sn(H["cache"], idx))
        cache = np.clip(cache, 1e9, tot * 0.6)
        gauge(MEM_TOTAL, one, np.full((k, n, 1), tot))
        gauge(MEM_AVAIL, one, m1(np.floor(np.maximum(tot - used - 0.03 * tot - 0.15 * cache, 2e8))))
        gauge(MEM_FREE, one, m1(np.floor(np.maximum(tot - used - cache - 0.04 * tot, 1e8))))
        gauge(MEM_CACHED, one, m1(np.floor(cache)))
        gauge(
            MEM_DIRTY,
            one,
            m1(np.floor(np.maximum(self._sn(H["dirty"], idx) * (1 + noise((k, n), 0.3)), 0))),
        )
        gauge(
            PROCS_RUNNING,
            one,
            m1(np.maximum(np.round(self._sn(H["running"], idx) + noise((k, n), 1.0)), 1)),
        )
        gauge(
            PROCS_BLOCKED,
            one,
            m1(np.maximum(np.round(self._sn(H["blocked"], idx) + noise((k, n), 0.3)), 0)),
        )
        self.base[CTX_SWITCHES] = (up * 6e4)[:, None]
        gauge(CTX_SWITCHES, one, np.floor(self._counter(CTX_SWITCHES, 1, t, H["ctx"])))
        boot = self.t0_epoch - up
        bt = np.where(
            rebooted,
            self.t0_epoch + np.where(np.isfinite(reboot_at), reboot_at, 0)[None, :],
            boot[None, :],
        )
        gauge(BOOT_TIME, one, m1(np.floor(bt)))
        # network devices: frontend carries TCP; RoCE netdev counters exclude RDMA traffic
        nds = list(_netdevs(site))
        nd_n = len(nds)
        rx_share = np.zeros((n, nd_n))
        rx_share[:, 0] = 1.0
        self.base[NET_RX] = (up[:, None] * self.fr_base * 0.5) * rx_share + up[:, None] * 2e4 * (
            1 - rx_share
        )
        self.base[NET_TX] = (up[:, None] * self.fr_base * 0.2) * rx_share + up[:, None] * 2e4 * (
            1 - rx_share
        )
        side = 2e4 * (1 - rx_share)
        rx = self._counter(NET_RX, nd_n, t, H["fr_rx"], rx_share) + t[:, :, None] * side[None]
        tx = self._counter(NET_TX, nd_n, t, H["fr_tx"], rx_share) + t[:, :, None] * side[None]
        rows.add(NET_RX, nds, tms, np.floor(rx), mask_d(nd_n))
        rows.add(NET_TX, nds, tms, np.floor(tx), mask_d(nd_n))
        netup = np.ones((k, n, nd_n))
        for (nd, pp), t0 in self.ib_down.items():
            if site.roce_netdevs:
                netup[:, nd, 1 + pp] = np.where(t[:, nd] >= t0, 0.0, 1.0)
        rows.add(NET_UP, nds, tms, netup, mask_d(nd_n))
        rows.add(NET_CARRIER, nds, tms, self._counter(NET_CARRIER, nd_n, t), mask_d(nd_n))
        # disks and filesystems
        self.base[DISK_R] = (up * 3e7)[:, None]
        self.base[DISK_W] = (up * 1.5e7)[:, None]
        self.base[DISK_IO] = (up * 0.03)[:, None]
        dev = [site.disk]
        gauge(DISK_R, dev, np.floor(self._counter(DISK_R, 1, t, H["disk_r"])))
        gauge(DISK_W, dev, np.floor(self._counter(DISK_W, 1, t, H["disk_w"])))
        gauge(DISK_IO, dev, np.round(self._counter(DISK_IO, 1, t, H["disk_busy"]), 3))
        mounts = ["/", site.scratch]
        size = np.array([site.root_bytes, site.scratch_bytes])
        avail = np.stack(
            [
                np.repeat((site.root_bytes * self.root_free)[None, :], k, axis=0) - 2e3 * t,
                np.repeat((site.scratch_bytes * self.scratch_free)[None, :], k, axis=0) - 5e3 * t,
            ],
            axis=2,
        )
        for nd, t0, bps, t1, free0 in self.fs_fill:
            used_w = bps * np.clip(t[:, nd] - t0, 0, t1 - t0)
            avail[:, nd, 1] = np.maximum(free0 - used_w, 0.0)
        avail = np.floor(avail / 4096.0) * 4096.0
        rows.add(FS_AVAIL, mounts, tms, avail, mask_d(2))
        rows.add(FS_SIZE, mounts, tms, np.broadcast_to(size[None, None, :], (k, n, 2)), mask_d(2))
        self.base[VM_PGMAJ] = (up * 0.8)[:, None]
        gauge(VM_PGMAJ, one, np.floor(self._counter(VM_PGMAJ, 1, t, 0.3 + 0.02 * H["user"])))
        gauge(VM_OOM, one, self._counter(VM_OOM, 1, t))
        # clocksource (info metric: the label value is the clocksource)
        cs_name = site.clocksource
        cs = keep.copy()
        cs_new = np.zeros_like(keep)
        for nd, t0 in self.clocksource_switch.items():
            cs[:, nd] &= t[:, nd] < t0
            cs_new[:, nd] = keep[:, nd] & (t[:, nd] >= t0)
        rows.add(CLOCKSOURCE, [cs_name], tms, np.ones((k, n, 1)), cs[:, :, None])
        if cs_new.any():
            rows.add(CLOCKSOURCE, ["hpet"], tms, np.ones((k, n, 1)), cs_new[:, :, None])
        if "netstat" in c:
            self.base[TCP_RETRANS] = (up * 0.4)[:, None]
            self.base[TCP_OUTSEGS] = (up * 3e3)[:, None]
            gauge(TCP_RETRANS, one, np.floor(self._counter(TCP_RETRANS, 1, t, H["retrans"])))
            gauge(TCP_OUTSEGS, one, np.floor(self._counter(TCP_OUTSEGS, 1, t, H["outsegs"])))
        if "pressure" in c:
            for name, key in (
                (PSI_CPU, "psi_cpu"),
                (PSI_IO_W, "psi_io"),
                (PSI_IO_S, "psi_io"),
                (PSI_MEM_W, "psi_mem"),
                (PSI_MEM_S, "psi_mem"),
            ):
                scale = 0.6 if name in (PSI_IO_S, PSI_MEM_S) else 1.0
                self.base[name] = (up * 0.002 * scale)[:, None]
                r = np.maximum(H[key] * scale, 0.0)
                gauge(name, one, np.round(self._counter(name, 1, t, r), 6))
        if "softnet" in c:
            self.base[SOFTNET_PROC] = (up * 800.0)[:, None]
            self.base[SOFTNET_SQUEEZE] = (up * 0.01)[:, None]
            gauge(SOFTNET_PROC, one, np.floor(self._counter(SOFTNET_PROC, 1, t, H["softnet"])))
            gauge(SOFTNET_DROP, one, np.floor(self._counter(SOFTNET_DROP, 1, t)))
            gauge(
                SOFTNET_SQUEEZE,
                one,
                np.floor(self._counter(SOFTNET_SQUEEZE, 1, t, 0.002 + 0 * H["softnet"])),
            )
        if "edac" in c:
            gauge(EDAC_CE, one, np.floor(self._counter(EDAC_CE, 1, t)))
            gauge(EDAC_UE, one, np.floor(self._counter(EDAC_UE, 1, t)))
        ctemp = self._sn(self.cpu_temp, idx)
        if "hwmon" in c:
            vals = np.stack(
                [ctemp + self.cpu_temp0[None, :, i] for i in range(len(site.hwmon))], axis=2
            )
            step = 1.0 if site.cpu_vendor == "intel" else 0.125
            gauge(
                HWMON_TEMP,
                list(site.hwmon),
                np.round((vals + noise(vals.shape, 0.6)) / step) * step,
            )
        if "thermal_zone" in c:
            vals = np.stack([ctemp + self.cpu_temp0[None, :, i] for i in range(2)], axis=2)
            gauge(THERMAL_ZONE, ["0", "1"], np.round(vals + noise(vals.shape, 0.3), 3))
        socks = [str(i) for i in range(site.sockets)]
        if "rapl" in c:
            self.base[RAPL] = np.repeat((up * 150.0)[:, None], site.sockets, axis=1)
            share = np.full((n, site.sockets), 1.0 / site.sockets)
            gauge(
                RAPL, socks, np.round(self._counter(RAPL, site.sockets, t, self.rapl_w, share), 6)
            )
        if "throttle" in c:
            gauge(PKG_THROTTLES, socks, self._counter(PKG_THROTTLES, site.sockets, t))
        if "infiniband" in c:
            self._render_ib(rows, t, tms, keep, idx)
        if "ethtool" in c:
            self._render_ethtool(rows, t, tms, keep, idx)

    def _render_ib(self, rows, t, tms, keep, idx):
        site, n, p = self.site, self.N, self.P
        ports = list(site.ib_ports)
        k = t.shape[0]
        mask = np.repeat(keep[:, :, None], p, axis=2)
        up = self.uptime
        ib = self.H["ib"]
        share = self.port_share.copy()
        frozen = []
        for (nd, pp), t0 in self.ib_down.items():
            frozen.append((nd, pp, t0))
        for name, scale in ((IB_RX, 1.0), (IB_TX, 1.0)):
            self.base[name] = (
                np.repeat((up * site.ib_rate * self.ib_util * 0.25)[:, None], p, axis=1) * share
            )
            vals = self._counter(name, p, t, ib * scale, share)
            for nd, pp, t0 in frozen:
                tq = np.full((1, n), t0)
                at0 = self._counter(name, p, tq, ib * scale, share)[0, nd, pp]
                vals[:, nd, pp] = np.where(t[:, nd] >= t0, at0, vals[:, nd, pp])
            rows.add(name, ports, tms, np.floor(vals), mask)
        wait_rate = 2e3 * (self.gm == TRAIN) * self.pace[:, None] + self._h("ibwait")
        self.base[IB_WAIT] = np.repeat((up * 1e3)[:, None], p, axis=1)
        rows.add(
            IB_WAIT, ports, tms, np.floor(self._counter(IB_WAIT, p, t, wait_rate, share)), mask
        )
        for name in (IB_SYMBOL, IB_LER, IB_DOWNED, IB_RCV_ERR):
            rows.add(name, ports, tms, np.floor(self._counter(name, p, t)), mask)
        state = np.full((k, n, p), 4.0)
        phys = np.full((k, n, p), 5.0)
        for nd, pp, t0 in frozen:
            down = t[:, nd] >= t0
            state[down, nd, pp] = 1.0
            phys[down, nd, pp] = 3.0 if site.roce_netdevs else 2.0
        rows.add(IB_STATE, ports, tms, state, mask)
        rows.add(IB_PHYS, ports, tms, phys, mask)
        rows.add(IB_RATE, ports, tms, np.full((k, n, p), site.ib_rate), mask)

    def _render_ethtool(self, rows, t, tms, keep, idx):
        site, n, p = self.site, self.N, self.P
        devs = list(site.roce_netdevs)
        k = t.shape[0]
        mask = np.repeat(keep[:, :, None], p, axis=2)
        up = self.uptime
        rng = self.rng
        for name in (ET_TX_PAUSE, ET_TX_PAUSE_DUR, ET_RX_PAUSE):
            self.base[name] = np.repeat((up * 0.5)[:, None], p, axis=1) * (
                40.0 if name == ET_TX_PAUSE_DUR else 1.0
            )
        # ordinary incast pauses on some ports, bursty and only while traffic flows
        busy = (self.gm == TRAIN) * self.pace[:, None]
        burst = np.exp(rng.normal(0.0, 0.8, busy.shape)) * busy
        for name, mul in ((ET_TX_PAUSE, 1.0), (ET_TX_PAUSE_DUR, 40.0), (ET_RX_PAUSE, 0.7)):
            vals = self._counter(name, p, t, burst, self.pause_rate * mul)
            rows.add(name, devs, tms, np.floor(vals), mask)
        rows.add(ET_RX_DISCARDS, devs, tms, np.floor(self._counter(ET_RX_DISCARDS, p, t)), mask)
        stalled = np.clip(np.round(rng.gamma(0.6, 1.2, (k, n, p))), 0, 100)
        for name, nd, pp, t0, mean, sd in self.gauge_over:
            if name == ET_STALLED_WR:
                on = t[:, nd] >= t0
                v = np.clip(np.round(mean + rng.normal(0, sd, k)), 0, 100)
                stalled[:, nd, pp] = np.where(on, v, stalled[:, nd, pp])
        rows.add(ET_STALLED_WR, devs, tms, stalled, mask)
        self.base.setdefault(ET_STALLED_WR_EV, np.floor(rng.gamma(0.3, 20.0, (n, p))))
        rows.add(ET_STALLED_WR_EV, devs, tms, np.floor(self._counter(ET_STALLED_WR_EV, p, t)), mask)
        rows.add(ET_PCI_SI, devs, tms, np.floor(self._counter(ET_PCI_SI, p, t)), mask)
        rows.add(ET_LINK_DOWN, devs, tms, np.floor(self._counter(ET_LINK_DOWN, p, t)), mask)


# ----------------------------------------------------------------------------------------------
# Situations (fault and healthy kinds); each edits the job's timeline before finalize()
# ----------------------------------------------------------------------------------------------


def _lognoise(ctx: _Ctx, sd: float = 0.35) -> np.ndarray:
    return np.exp(ctx.rng.normal(0.0, sd, ctx.F))


def _sync_checkpoints(ctx: _Ctx):
    """Decoy: synchronous checkpoints, every node pauses together and writes."""
    for t0, ln in ctx.sp["ckpt"]:
        w = ctx.window(t0, t0 + ln)
        seg = ctx.gm[w]
        seg[seg == TRAIN] = PAUSE
        ctx.gm[w] = seg
        every = np.arange(ctx.N)
        ctx.hadd("disk_w", every, w[:, None], float(ctx.rng.uniform(4e8, 1.6e9)))
        ctx.hadd("d2h", every, w[:, None], float(ctx.rng.uniform(3e9, 9e9)))
        ctx.hadd("cpu_iow", every, w[:, None], 2.0)
        ctx.hadd("dirty", every, w[:, None], 3e9)


def _k_uce(ctx: _Ctx):
    sp, site = ctx.sp, ctx.site
    c = sp["cul"][0]
    n, g, t = c["n"], c["g"], c["t"]
    final = 63 if site.name in ("v1x", "a8r") else 94
    ctx.set_xid(n, g, t, 48, final)
    if ECC_DBE in site.dcgm:
        ctx.step(ECC_DBE, n, g, t, 1)
    if RETIRED_DBE in site.dcgm:
        ctx.step(RETIRED_DBE, n, g, t + _DT, 1)
        ctx.step(RETIRED_PENDING, n, g, t + _DT, 1)
    if UNC_REMAP in site.dcgm:
        ctx.step(UNC_REMAP, n, g, t + _DT, 1)
    gmg = ctx.gpu_mode(n)
    ctx.hang(sp["t_crash"], sp["t_exit"])
    gmg[ctx.after(t + 3.0), g] = IDLE
    if c["teardown"]:
        ctx.kill_node(n, c["t_td"])


def _k_gpu_lost(ctx: _Ctx):
    sp = ctx.sp
    c = sp["cul"][0]
    n, g, t = c["n"], c["g"], c["t"]
    ctx.gpu_gone.append((n, g, t))
    if c["crashloop"]:
        tt = t
        nxt = t + float(ctx.rng.uniform(60, 150))
        while nxt < ctx.dur:
            ctx.dcgm_down.append((n, tt, nxt))
            tt = nxt + float(ctx.rng.uniform(45, 90))
            nxt = tt + float(ctx.rng.uniform(120, 300))
        ctx.dcgm_down.append((n, tt, np.inf))
    else:
        ctx.dcgm_down.append((n, t, np.inf))
    gmg = ctx.gpu_mode(n)
    ctx.hang(sp["t_crash"], sp["t_exit"])
    gmg[ctx.after(t), g] = IDLE
    if c["teardown"]:
        ctx.kill_node(n, c["t_td"])
    ctx.hadd("blk", n, ctx.after(t), float(c["dstate"]))


def _k_ib_port(ctx: _Ctx):
    sp, site = ctx.sp, ctx.site
    c = sp["cul"][0]
    n, p, t = c["n"], c["p"], c["t"]
    ctx.ib_down[(n, p)] = t
    if site.roce_netdevs:
        ctx.step(NET_CARRIER, n, 1 + p, t, 1)
        if "ethtool" in site.collectors:
            ctx.step(ET_LINK_DOWN, n, p, t, 1)
    else:
        ctx.step(IB_DOWNED, n, p, t, 1)
        ctx.step(IB_LER, n, p, t, 1)
    ctx.hang(sp["t_crash"], sp["t_exit"])
    ctx.kill_node(n, sp["t_crash"] + float(ctx.rng.uniform(2, 10)))
    for nb in c["neighbours"]:
        ctx.kill_node(nb, sp["t_crash"] + float(ctx.rng.uniform(3, 25)))


def _k_panic(ctx: _Ctx):
    sp, site = ctx.sp, ctx.site
    c = sp["cul"][0]
    n, t = c["n"], c["t"]
    pre = sp.get("precursor", 0.0)
    tp = t + pre
    if pre > 0:
        w = ctx.window(t, tp)
        ctx.hadd("cpu_sys", n, w, 0.45 * site.ncpu)
        ctx.hadd("run", n, w, 0.45 * site.ncpu)
        ctx.node_fail.append((n, t, tp))
        ctx.slow(t, 0.3, tp)
    back = tp + c["down"]
    ctx.node_down.append((n, tp, back))
    ctx.dcgm_down.append((n, tp, back + c["dcgm_late"]))
    tb = back - 45.0
    ctx.reboot[n] = (tb, tb + 30.0)
    ctx.hang(tp, sp["t_exit"])
    ctx.kill_node(n, tp)
    arr = ctx.g_over["xid"].setdefault(n, np.repeat(ctx.xid0[n][None, :], ctx.F, axis=0))
    arr[ctx.after(tb)] = 0
    ctx.hadd("cache", n, ctx.after(tb), -0.95 * ctx.cache[n] * site.mem_gib * _GIB)


def _k_scratch(ctx: _Ctx):
    sp = ctx.sp
    c = sp["cul"][0]
    n, t = c["n"], c["t"]
    t_full = t + sp["fill"]
    w = ctx.window(t, t_full)
    ctx.hadd("disk_w", n, w, c["wbps"])
    ctx.hadd("disk_busy", n, w, 0.9)
    ctx.hadd("cpu_iow", n, w, 1.5)
    ctx.hadd("cpu_sys", n, w, 1.2)
    ctx.hadd("psi_io", n, w, 0.6)
    ctx.hadd("dirty", n, w, 4e9)
    ctx.hadd("blk", n, w, 2.0)
    ctx.fs_fill.append((n, t, c["wbps"], t_full, c["free0"]))
    ctx.hang(sp["t_crash"], sp["t_exit"])
    ctx.kill_node(n, sp["t_crash"] + float(ctx.rng.uniform(2, 10)))


def _k_cold_plate(ctx: _Ctx):
    cul = ctx.sp["cul"]
    ctx.thermal.append(
        {
            "nodes": [c["n"] for c in cul],
            "t": [c["t"] for c in cul],
            "rmult": [c["rmult"] for c in cul],
        }
    )
    for c in cul:
        rise = np.clip((ctx.tf - c["t"] - 60.0) / 240.0, 0, 1) * float(ctx.rng.uniform(12, 22))
        ctx.hadd("cpu_temp", c["n"], rise)


def _k_nvlink(ctx: _Ctx):
    site = ctx.site
    for c in ctx.sp["cul"]:
        n, g, t = c["n"], c["g"], c["t"]
        on = ctx.after(t)
        r = np.minimum(c["rate0"] * 10 ** (c["growth"] * np.maximum(ctx.tf - t, 0) / 600.0), 2e6)
        r = r * _lognoise(ctx, 0.25) * on
        rec_t = t + np.cumsum(ctx.rng.uniform(60, 300, 40))
        if NVL5_SYMBOL in site.dcgm:
            ctx.rate(NVL5_SYMBOL, n, g, r)
            ctx.step(NVL5_SYMBOL, n, g, t, 500)
            reff = r * float(ctx.rng.uniform(2e-4, 2e-3))
            ctx.rate(NVL5_EFFECTIVE, n, g, reff)
            ctx.step(NVL5_EFFECTIVE, n, g, t, 2)
            for tr in rec_t:
                ctx.step(NVL5_RECOVERY, n, g, float(tr), 1)
            ctx.ber_over[(n, g)] = (r, reff)
        elif NVL_CRC_FLIT in site.dcgm:
            ctx.rate(NVL_CRC_FLIT, n, g, r / 10.0)
            ctx.rate(NVL_CRC_DATA, n, g, r / 100.0)
            ctx.rate(NVL_REPLAY, n, g, r / 50.0)
            ctx.step(NVL_CRC_FLIT, n, g, t, 50)
            ctx.step(NVL_REPLAY, n, g, t, 5)
            for tr in rec_t:
                ctx.step(NVL_RECOVERY, n, g, float(tr), 1)
        else:
            ctx.rate(NVL_REPLAY, n, g, r / 20.0)
            ctx.step(NVL_REPLAY, n, g, t, 20)
            for tr in rec_t:
                ctx.step(NVL_RECOVERY, n, g, float(tr), 1)
        ctx.nvl_factor[(n, g)] = (t, float(ctx.rng.uniform(0.6, 0.85)))
        ctx.slow(t, c["speed"])


def _k_pcie(ctx: _Ctx):
    for c in ctx.sp["cul"]:
        n, g, t = c["n"], c["g"], c["t"]
        r = c["rate"] * _lognoise(ctx, 0.4) * ctx.after(t)
        ctx.rate(PCIE_REPLAY, n, g, r)
        ctx.step(PCIE_REPLAY, n, g, t, 3 * c["rate"])
        ctx.pcie_factor[(n, g)] = (t, c["bwf"])
        arr = ctx.g_over["hgap"].setdefault(n, np.zeros((ctx.F, ctx.G)))
        arr[ctx.after(t), g] = float(ctx.rng.uniform(4, 12))
        ctx.slow(t, c["speed"])


def _k_nic_stall(ctx: _Ctx):
    for c in ctx.sp["cul"]:
        n, p, t = c["n"], c["p"], c["t"]
        on = ctx.after(t).astype(float)
        ctx.gauge_over.append((ET_STALLED_WR, n, p, t, c["stall"], 8.0))
        ctx.rate(ET_STALLED_WR_EV, n, p, on)
        ctx.rate(ET_TX_PAUSE, n, p, on * c["pause_frac"] * 2e4 * _lognoise(ctx, 0.3))
        ctx.rate(ET_TX_PAUSE_DUR, n, p, on * c["pause_frac"] * 1e6)
        ctx.rate(ET_RX_DISCARDS, n, p, on * float(ctx.rng.uniform(0.5, 20)))
        if c["si"]:
            ctx.step(ET_PCI_SI, n, p, t, 3)
            ctx.rate(ET_PCI_SI, n, p, on / float(ctx.rng.uniform(10, 60)))
        for nb in c["neighbours"]:
            ctx.rate(
                ET_RX_PAUSE, nb, p, on * c["pause_frac"] * 2e4 * float(ctx.rng.uniform(0.2, 0.5))
            )
        ctx.slow(t, c["speed"])


def _k_clocksource(ctx: _Ctx):
    for c in ctx.sp["cul"]:
        n, t = c["n"], c["t"]
        on = ctx.after(t)
        ctx.clocksource_switch[n] = t
        ctx.hadd("cpu_sys", n, on & (ctx.gm[:, n] != IDLE), c["sys"])
        ctx.hadd("ctx", n, on, 2.5e4)
        ctx.hgap[on, n] += c["gap"]
        ctx.slow(t, c["speed"])


def _k_psu(ctx: _Ctx):
    rng = ctx.rng
    for c in ctx.sp["cul"]:
        n, t = c["n"], c["t"]
        b = ctx.window(t, t + c["solid"])
        state = False
        p_on = c["duty"] / 2.0
        p_off = (1 - c["duty"]) / 2.0
        for i in range(ctx.gi(t + c["solid"]), ctx.F):
            u = rng.random()
            state = (u > p_off) if state else (u < p_on)
            b[i] = state
        ctx.brake[:, n] = b
        ctx.brake_clk[n] = c["bclk"]
        ctx.slow(t, c["bclk"], t + c["solid"])
        ctx.slow(t + c["solid"], 1.0 - c["duty"] * (1.0 - c["bclk"]))
        ctx.node_work[n] = np.where(ctx.after(t), 1.0, ctx.pace)


def _k_ib_symbol(ctx: _Ctx):
    for c in ctx.sp["cul"]:
        n, p, t = c["n"], c["p"], c["t"]
        on = ctx.after(t).astype(float)
        ctx.rate(IB_SYMBOL, n, p, c["sym"] * _lognoise(ctx, 0.5) * on)
        ctx.step(IB_SYMBOL, n, p, t, 50)
        ctx.rate(IB_RCV_ERR, n, p, c["rcv"] * on)
        ctx.step(IB_RCV_ERR, n, p, t, 5)
        for tr in t + np.cumsum(ctx.rng.uniform(60, 240, 60)):
            ctx.step(IB_LER, n, p, float(tr), 1)
        ctx.slow(t, c["speed"])


def _b_compile(ctx: _Ctx):
    b = ctx.sp["benign"]
    ready = np.array(b["ready"])
    t_all = float(ready.max())
    launch = ctx.sp["launch"]
    for n in range(ctx.N):
        ctx.gm[:, n] = np.select(
            [ctx.tf < launch, ctx.tf < ready[n], ctx.tf < t_all], [IDLE, INIT, SPIN], TRAIN
        )
        w = ctx.window(launch, ready[n])
        ctx.hadd("cpu_user", n, w, 4.0)
        if ready[n] - ctx.sp["warm"] > 100:
            ctx.hadd("cpu_user", n, w, float(ctx.rng.uniform(8, 24)))
            ctx.hadd("disk_w", n, w, float(ctx.rng.uniform(5e7, 2e8)))
    ramp = (ctx.tf >= t_all) & (ctx.tf < t_all + 90)
    ctx.pace[ctx.tf < t_all] = 1.0
    ctx.pace[ramp] *= 0.8 + 0.2 * (ctx.tf[ramp] - t_all) / 90.0


def _b_async_ckpt(ctx: _Ctx):
    every = np.arange(ctx.N)
    for t0, stage, write in ctx.sp["benign"]["events"]:
        w = ctx.window(t0, t0 + stage)
        seg = ctx.gm[w]
        seg[seg == TRAIN] = PAUSE
        ctx.gm[w] = seg
        ctx.hadd("d2h", every, w[:, None], float(ctx.rng.uniform(8e9, 2e10)))
        wr = ctx.window(t0 + stage, t0 + stage + write)
        ctx.hadd("fr_tx", every, wr[:, None], float(ctx.rng.uniform(1e9, 3e9)))
        ctx.hadd("cpu_user", every, wr[:, None], 3.0)
        ctx.hadd(
            "cache",
            every,
            ctx.window(t0, t0 + stage + write)[:, None],
            0.05 * ctx.site.mem_gib * _GIB,
        )
        ctx.slow(t0 + stage, 0.95, t0 + stage + write)


def _b_spine(ctx: _Ctx):
    every = np.arange(ctx.N)
    for t0, ln, f in ctx.sp["benign"]["events"]:
        ctx.slow(t0, f, t0 + ln)
        ctx.hadd("ibwait", every, ctx.window(t0, t0 + ln)[:, None], (1 - f) * 4e6)


def _b_hiccup(ctx: _Ctx):
    site = ctx.site
    for w_node, t0, ln in ctx.sp["benign"]["events"]:
        win = ctx.window(t0, t0 + ln)
        seg = ctx.gm[win]
        tr = seg == TRAIN
        spin = tr.copy()
        spin[:, w_node] = False
        seg[spin] = SPIN
        seg[tr[:, w_node], w_node] = PAUSE
        ctx.gm[win] = seg
        ctx.hadd("cpu_sys", w_node, win, 0.15 * site.ncpu)
        ctx.hadd("run", w_node, win, 0.15 * site.ncpu)
        ctx.hadd("cpu_iow", w_node, win, 6.0)
        ctx.hadd("blk", w_node, win, 12.0)
        ctx.hadd("psi_mem", w_node, win, 0.8)
        ctx.hadd("psi_io", w_node, win, 0.5)


def _b_bins(ctx: _Ctx):
    b = ctx.sp["benign"]
    for n, dt, ck in zip(b["hot"], b["dt"], b["clk"], strict=True):
        ctx.t_off[n] += dt
        ctx.pw_off[n] *= 1.04
        ctx.clk_off[n] *= ck


def _b_ticks(ctx: _Ctx):
    site, rng = ctx.site, ctx.rng
    nvl = next(
        (m for m in (NVL5_EFFECTIVE, NVL_CRC_FLIT, NVL_REPLAY) if m in site.dcgm), PCIE_REPLAY
    )
    for n, t, kind in ctx.sp["benign"]["ticks"]:
        g = int(rng.integers(ctx.G))
        p = int(rng.integers(max(1, ctx.P)))
        if kind in (0, 1) and "infiniband" not in site.collectors:
            kind = 2
        if kind == 0:
            ctx.step(IB_SYMBOL, n, p, t, 1)
        elif kind == 1:
            ctx.step(IB_LER, n, p, t, 1)
        elif kind == 2:
            ctx.step(PCIE_REPLAY, n, g, t, 1)
        elif kind == 3:
            if "edac" in site.collectors:
                ctx.step(EDAC_CE, n, 0, t, 1)
            elif ECC_SBE in site.dcgm:
                ctx.step(ECC_SBE, n, g, t, 1)
            else:
                ctx.step(COR_REMAP, n, g, t, 1)
        elif kind == 4:
            ctx.step(nvl, n, g, t, 1)
        elif "softnet" in site.collectors:
            ctx.step(SOFTNET_DROP, n, 0, t, int(rng.integers(1, 4)))
        elif "infiniband" in site.collectors:
            ctx.step(IB_RCV_ERR, n, p, t, 1)
        else:
            ctx.step(NET_CARRIER, n, 1 + p, t, 1)


def _b_prefetch(ctx: _Ctx):
    b = ctx.sp["benign"]
    cap = 0.25 * ctx.site.mem_gib * _GIB
    for w, t0, ln in b["events"]:
        win = ctx.window(t0, t0 + ln)
        ctx.hadd("fr_rx", w, win, b["rx"])
        ctx.hadd("disk_w", w, win, 0.6 * b["rx"])
        ctx.hadd("cpu_user", w, win, float(ctx.rng.uniform(4, 10)))
        ctx.hadd("cache", w, np.minimum(np.clip(ctx.tf - t0, 0, ln) * b["rx"] * 0.9, cap))


def _b_apt(ctx: _Ctx):
    rng = ctx.rng
    for w, t0, ln in ctx.sp["benign"]["events"]:
        win = ctx.window(t0, t0 + ln)
        ctx.hadd("cpu_user", w, win, float(rng.uniform(1, 3)))
        ctx.hadd("cpu_sys", w, win, float(rng.uniform(0.5, 1.5)))
        ctx.hadd("disk_w", w, win, float(rng.uniform(5e7, 2e8)))
        ctx.hadd("fr_rx", w, win, float(rng.uniform(2e7, 1e8)))
        ctx.hadd("run", w, win, 2.0)
        ctx.hadd("blk", w, win, 1.0)


def _b_crac(ctx: _Ctx):
    b = ctx.sp["benign"]
    rows = b["rows"]
    for n in range(ctx.N):
        r = n * rows // ctx.N
        ctx.inlet[:, n] += b["amp"] * np.sin(2 * np.pi * ctx.tf / b["period"] + b["phase"][r])


def _b_alloc(ctx: _Ctx):
    for n, g, t, frac in ctx.sp["benign"]["steps"]:
        ctx.fb_steps.append((n, g, t, frac))


def _b_swapped(ctx: _Ctx):
    b = ctx.sp["benign"]
    n = b["node"]
    ctx.uptime[n] = b["uptime"]
    ctx.xid0[n] = 0
    for name, arr in ctx.base.items():
        if isinstance(name, str) and name != NET_CARRIER:
            arr[n] = 0
    ctx.base[NET_CARRIER][n] = 1
    ctx.base[ENERGY][n] = b["uptime"] * 0.3 * ctx.site.tdp * 1000.0
    ctx.trickle_replay[n] = 0
    ctx.nvl5_rate[n] = 0


_KIND_FN: dict[str, Callable[[_Ctx], None]] = {
    "uce_single_gpu_abort": _k_uce,
    "gpu_lost_exporter_crashloop": _k_gpu_lost,
    "ib_port_polling_abort": _k_ib_port,
    "panic_reboot_return": _k_panic,
    "scratch_fill_write_fail": _k_scratch,
    "cold_plate_flow_loss": _k_cold_plate,
    "nvlink_symbol_ber_climb": _k_nvlink,
    "pcie_retimer_replays": _k_pcie,
    "nic_pcie_stall_backpressure": _k_nic_stall,
    "clocksource_hpet_fallback": _k_clocksource,
    "psu_fail_brake_duty": _k_psu,
    "ib_symbol_error_creep": _k_ib_symbol,
    "compile_cache_skew": _b_compile,
    "async_ckpt_staging": _b_async_ckpt,
    "shared_spine_contention": _b_spine,
    "brief_host_hiccup": _b_hiccup,
    "bin_spread_constant": _b_bins,
    "rare_error_ticks": _b_ticks,
    "shard_prefetch_misses": _b_prefetch,
    "apt_daily_spread": _b_apt,
    "crac_cycling_rows": _b_crac,
    "alloc_cache_growth": _b_alloc,
    "swapped_in_node": _b_swapped,
}


def _render(job: Job) -> pl.DataFrame:
    ctx = _Ctx(job)
    _sync_checkpoints(ctx)
    fn = _KIND_FN.get(job.kind)
    if fn is not None:
        fn(ctx)
    ctx.finalize()
    rows = _Rows(job.nodes, round(ctx.t0_epoch * 1000.0))
    ctx.render_dcgm(rows)
    ctx.render_node(rows)
    return rows.frame()
