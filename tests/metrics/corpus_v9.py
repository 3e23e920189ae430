"""Blind labelled corpus v9 for a Minder-style faulty-machine detector.

Deterministic generator (numpy + polars only) of raw Prometheus samples as NVIDIA dcgm-exporter
and prometheus node_exporter publish them, for 120 synchronous multi-node training jobs on six
sites none of the earlier corpora used: GB300 NVL72 compute trays on XDR InfiniBand, AWS p5
(H100 SXM) with 32 EFA devices, GCP A3 Mega (H100) with eight gVNIC GPU NICs and no RDMA at all,
H100 NVL PCIe servers with NVLink bridges on NDR200, RTX PRO 6000 Blackwell servers on 400 GbE
RoCE, and DGX A100 40GB on HDR with old exporters. The sites differ in GPU model, fabric,
exporter versions, DCGM field lists and node_exporter collectors, so one situation shows up in
different series on different sites.

Written without reading the detector, the simulators or earlier corpora' fault models; every
modelling choice and its public source is listed in tests/fixtures/metrics_v9/README.md (numbers
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
    "xid109_stuck_ctx",
    "xid145_nvlink_rlw_abort",
    "acpi_shutdown_vanish",
    "dimm_ue_sigbus_rank",
    "nvlink_bridge_absent_p2p",
    "pcie_gen2_stuck_link",
    "gvnic_reset_loop",
    "enforced_power_limit_low",
    "blocked_slot_airflow",
    "nvme_ctrl_timeout_stall",
    "mem_clock_pstate_stuck",
    "roce_fec_uncorrectable",
)
BENIGN_KINDS: tuple[str, ...] = (
    "dense_pretrain_baseline",
    "container_pull_late_join",
    "epoch_reshuffle_pause",
    "batch_size_warmup_steps",
    "python_gc_stall_blip",
    "hbm_vendor_mix",
    "rack_local_ib_quiet",
    "vocab_head_last_stage",
    "collect_interval_drift",
    "blank_sentinel_values",
    "demand_response_cap_all",
    "host_backup_agent_tx",
)
_HANG_KINDS = frozenset(
    {"xid109_stuck_ctx", "xid145_nvlink_rlw_abort", "acpi_shutdown_vanish", "dimm_ue_sigbus_rank"}
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
NV5_SYMBOL = D + "NVLINK_COUNT_RX_SYMBOL_ERRORS"
NV5_RECOV = D + "NVLINK_COUNT_LINK_RECOVERY_EVENTS"
NV5_RECOV_FAIL = D + "NVLINK_COUNT_LINK_RECOVERY_FAILED_EVENTS"
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
LOAD1 = N_ + "load1"
MEM_TOTAL, MEM_AVAIL = N_ + "memory_MemTotal_bytes", N_ + "memory_MemAvailable_bytes"
MEM_CACHED, MEM_DIRTY = N_ + "memory_Cached_bytes", N_ + "memory_Dirty_bytes"
MEM_HWCORRUPT = N_ + "memory_HardwareCorrupted_bytes"
PROCS_RUNNING, PROCS_BLOCKED = N_ + "procs_running", N_ + "procs_blocked"
CTX_SWITCHES, BOOT_TIME = N_ + "context_switches_total", N_ + "boot_time_seconds"
NET_RX, NET_TX = N_ + "network_receive_bytes_total", N_ + "network_transmit_bytes_total"
NET_UP, NET_CARRIER = N_ + "network_up", N_ + "network_carrier_changes_total"
DISK_R, DISK_W = N_ + "disk_read_bytes_total", N_ + "disk_written_bytes_total"
DISK_IO, DISK_IO_NOW = N_ + "disk_io_time_seconds_total", N_ + "disk_io_now"
FS_AVAIL, FS_SIZE = N_ + "filesystem_avail_bytes", N_ + "filesystem_size_bytes"
VM_PGMAJ, VM_OOM = N_ + "vmstat_pgmajfault", N_ + "vmstat_oom_kill"
TCP_RETRANS, TCP_OUTSEGS = N_ + "netstat_Tcp_RetransSegs", N_ + "netstat_Tcp_OutSegs"
CLOCKSOURCE = N_ + "time_clocksource_current_info"
PSI_CPU = N_ + "pressure_cpu_waiting_seconds_total"
PSI_IO_W, PSI_IO_S = (
    N_ + "pressure_io_waiting_seconds_total",
    N_ + "pressure_io_stalled_seconds_total",
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
IB_OOS = IB + "out_of_sequence_packets_received_total"
ET = N_ + "ethtool_"
ET_CORR_BITS = ET + "received_corrected_bits_phy"
ET_CRC = ET + "received_crc_errors_phy"
ET_DISCARDS = ET + "received_discards_phy"
ET_TX_PAUSE, ET_RX_PAUSE = ET + "transmitted_prio3_pause", ET + "received_prio3_pause"
ET_LINK_DOWN = ET + "link_down_events_phy"
ENA_BW_IN, ENA_BW_OUT = ET + "bw_in_allowance_exceeded", ET + "bw_out_allowance_exceeded"
ENA_PPS = ET + "pps_allowance_exceeded"

_DCGM_COUNTERS = frozenset(
    {
        ENERGY,
        PCIE_REPLAY,
        PCIE_TX_TP,
        PCIE_RX_TP,
        NVLINK_BW,
        NVL_REPLAY,
        NVL_RECOVERY,
        NV5_SYMBOL,
        NV5_RECOV,
        NV5_RECOV_FAIL,
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
        TCP_RETRANS,
        TCP_OUTSEGS,
        PSI_CPU,
        PSI_IO_W,
        PSI_IO_S,
        EDAC_CE,
        EDAC_UE,
        IB_RX,
        IB_TX,
        IB_DOWNED,
        IB_SYMBOL,
        IB_RCV_ERR,
        IB_XMIT_WAIT,
        IB_OOS,
        ET_CORR_BITS,
        ET_CRC,
        ET_DISCARDS,
        ET_TX_PAUSE,
        ET_RX_PAUSE,
        ET_LINK_DOWN,
        ENA_BW_IN,
        ENA_BW_OUT,
        ENA_PPS,
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
    liquid: bool
    r_th: float  # degC per W, GPU die above inlet
    cpus: int
    mem_gib: float
    collect: float
    fields: tuple[str, ...]
    reasons: str | None
    viol_ns: bool
    nvlink: str  # nv5 / bridge / switch / none
    nvl_bw: float  # NVLINK_BANDWIDTH_TOTAL nominal while training
    pcie_gen: int
    ib: tuple[str, ...]  # node_infiniband devices ("mlx5_0:1"); empty: no collector output
    ib_rate: float
    ib_data: bool  # port_data_* counters exported (False for EFA)
    ib_extra: tuple[str, ...]
    netdevs: tuple[str, ...]  # frontend first
    gpu_nics: tuple[str, ...]  # netdevs that carry the GPU collective traffic (TCP)
    ethtool: tuple[str, ...]
    eth_ports: tuple[str, ...]
    collectors: frozenset
    disk: str
    mounts: tuple[str, ...]
    clocksources: bool
    exporters: str


_SITE_LIST = (
    Site(
        "gb3",
        "GB300 (B300 288GB, NVL72 tray)",
        4,
        1400.0,
        190.0,
        2032.0,
        300.0,
        3996.0,
        279_552.0,
        87.0,
        True,
        0.025,
        144,
        960.0,
        10.0,
        (
            *tuple(f for f in _BASE_FIELDS if f not in (MEM_COPY_UTIL, ENC_UTIL, DEC_UTIL)),
            MEMORY_TEMP,
            GPU_UTIL,
            NVLINK_BW,
            *_REMAP,
            *_DCP,
            CLOCKS_EVENT,
            POWER_VIOL,
            THERMAL_VIOL,
            POWER_LIMIT,
            NV5_SYMBOL,
            NV5_RECOV,
            NV5_RECOV_FAIL,
        ),
        CLOCKS_EVENT,
        True,
        "nv5",
        9.0e5,
        6,
        ("mlx5_0:1", "mlx5_1:1", "mlx5_2:1", "mlx5_3:1"),
        100e9,
        True,
        (IB_DOWNED, IB_SYMBOL, IB_RCV_ERR, IB_XMIT_WAIT),
        ("enP22p3s0f0np0",),
        (),
        (),
        (),
        frozenset({"edac", "infiniband"}),
        "nvme0n1",
        ("/", "/local"),
        True,
        "dcgm-exporter 4.4.2-4.7.1, node_exporter 1.10.2",
    ),
    Site(
        "efa",
        "H100 80GB HBM3 SXM (AWS p5.48xlarge)",
        8,
        700.0,
        70.0,
        1980.0,
        345.0,
        2619.0,
        81_559.0,
        87.0,
        False,
        0.055,
        192,
        2048.0,
        30.0,
        (
            *_BASE_FIELDS,
            MEMORY_TEMP,
            FB_RESERVED,
            GPU_UTIL,
            NVLINK_BW,
            *_REMAP,
            *_DCP,
            CLOCK_THROTTLE,
        ),
        CLOCK_THROTTLE,
        False,
        "switch",
        2.2e5,
        5,
        tuple(
            f"rdmap{b}s0:1"
            for b in (
                79,
                80,
                81,
                82,
                96,
                97,
                98,
                99,
                113,
                114,
                115,
                116,
                130,
                131,
                132,
                133,
                147,
                148,
                149,
                150,
                164,
                165,
                166,
                167,
                181,
                182,
                183,
                184,
                198,
                199,
                200,
                201,
            )
        ),
        12.5e9,
        False,
        (),
        ("ens32",),
        (),
        (ENA_BW_IN, ENA_BW_OUT, ENA_PPS),
        ("ens32",),
        frozenset({"netstat", "pressure", "infiniband"}),
        "nvme1n1",
        ("/", "/opt/dlami/nvme"),
        True,
        "dcgm-exporter 3.3.9-3.6.1, node_exporter 1.8.2 (+ethtool on the ENA)",
    ),
    Site(
        "a3g",
        "H100 80GB HBM3 SXM (GCP a3-megagpu-8g)",
        8,
        700.0,
        70.0,
        1980.0,
        345.0,
        2619.0,
        81_559.0,
        87.0,
        False,
        0.055,
        208,
        1872.0,
        15.0,
        (
            *_BASE_FIELDS,
            MEMORY_TEMP,
            FB_RESERVED,
            GPU_UTIL,
            NVLINK_BW,
            LINK_GEN,
            LINK_WIDTH,
            *_REMAP,
            *_DCP,
            CLOCK_THROTTLE,
        ),
        CLOCK_THROTTLE,
        False,
        "switch",
        2.2e5,
        5,
        (),
        0.0,
        False,
        (),
        ("eth0", *tuple(f"eth{i}" for i in range(1, 9))),
        tuple(f"eth{i}" for i in range(1, 9)),
        (),
        (),
        frozenset({"netstat", "pressure"}),
        "nvme0n1",
        ("/", "/mnt/localssd"),
        True,
        "dcgm-exporter 3.3.5-3.4.0, node_exporter 1.7.0 (no RDMA: GPUDirect-TCPXO)",
    ),
    Site(
        "h1n",
        "H100 NVL 94GB PCIe (NVLink bridge pairs)",
        8,
        400.0,
        60.0,
        1785.0,
        345.0,
        2619.0,
        95_830.0,
        85.0,
        False,
        0.11,
        224,
        2048.0,
        15.0,
        (
            *_BASE_FIELDS,
            MEMORY_TEMP,
            FB_RESERVED,
            GPU_UTIL,
            NVLINK_BW,
            NVL_REPLAY,
            NVL_RECOVERY,
            LINK_GEN,
            LINK_WIDTH,
            POWER_LIMIT,
            *_REMAP,
            *_DCP,
            CLOCK_THROTTLE,
            THERMAL_VIOL,
        ),
        CLOCK_THROTTLE,
        False,
        "bridge",
        1.2e5,
        5,
        ("mlx5_0:1", "mlx5_1:1", "mlx5_2:1", "mlx5_3:1"),
        25e9,
        True,
        (IB_DOWNED, IB_SYMBOL, IB_RCV_ERR, IB_XMIT_WAIT),
        ("eno8303",),
        (),
        (),
        (),
        frozenset({"netstat", "pressure", "edac", "infiniband", "hwmon"}),
        "nvme0n1",
        ("/", "/scratch"),
        True,
        "dcgm-exporter 3.3.7-3.5.0, node_exporter 1.8.1",
    ),
    Site(
        "rtx",
        "RTX PRO 6000 Blackwell Server Edition 96GB",
        8,
        600.0,
        45.0,
        2617.0,
        180.0,
        14_001.0,
        97_887.0,
        88.0,
        False,
        0.075,
        256,
        1536.0,
        15.0,
        (
            *_BASE_FIELDS,
            FB_RESERVED,
            GPU_UTIL,
            LINK_GEN,
            LINK_WIDTH,
            POWER_LIMIT,
            *_REMAP,
            *_DCP,
            CLOCKS_EVENT,
            POWER_VIOL,
            THERMAL_VIOL,
        ),
        CLOCKS_EVENT,
        True,
        "none",
        0.0,
        5,
        ("mlx5_0:1", "mlx5_1:1", "mlx5_2:1", "mlx5_3:1"),
        50e9,
        True,
        (IB_DOWNED, IB_OOS),
        ("enp24s0f0", "enp65s0np0", "enp97s0np0", "enp193s0np0", "enp225s0np0"),
        (),
        (ET_CORR_BITS, ET_CRC, ET_DISCARDS, ET_TX_PAUSE, ET_RX_PAUSE, ET_LINK_DOWN),
        ("enp65s0np0", "enp97s0np0", "enp193s0np0", "enp225s0np0"),
        frozenset({"netstat", "pressure", "edac", "infiniband", "hwmon", "ethtool"}),
        "nvme0n1",
        ("/", "/raid"),
        True,
        "dcgm-exporter 4.5.2-4.8.1, node_exporter 1.11.1 (+ethtool)",
    ),
    Site(
        "a4h",
        "A100-SXM4-40GB (DGX A100)",
        8,
        400.0,
        55.0,
        1410.0,
        210.0,
        1215.0,
        40_536.0,
        85.0,
        False,
        0.095,
        256,
        1024.0,
        30.0,
        (*_BASE_FIELDS, MEMORY_TEMP, NVLINK_BW, PCIE_TX_TP, PCIE_RX_TP, *_REMAP),
        None,
        False,
        "switch",
        1.4e5,
        4,
        (
            "mlx5_0:1",
            "mlx5_1:1",
            "mlx5_2:1",
            "mlx5_3:1",
            "mlx5_6:1",
            "mlx5_7:1",
            "mlx5_8:1",
            "mlx5_9:1",
        ),
        25e9,
        True,
        (IB_DOWNED, IB_SYMBOL, IB_RCV_ERR, IB_XMIT_WAIT),
        ("enp225s0f0",),
        (),
        (),
        (),
        frozenset({"netstat", "pressure", "edac", "infiniband", "hwmon"}),
        "nvme2n1",
        ("/", "/raid"),
        False,
        "dcgm-exporter 2.1.8-2.3.1 (no GPU_UTIL, no DCP), node_exporter 1.0.1",
    ),
)
SITES: dict[str, Site] = {s.key: s for s in _SITE_LIST}
# x16, one direction, B/s by PCIe generation (index)
_GEN_BW = np.array([0.0, 4e9, 8e9, 16e9, 32e9, 64e9, 128e9])


def _n_node_series(s: Site) -> int:
    n = 5 + 1 + 5 + 3 + 1 + 1 + 4 * len(s.netdevs) + 4 + 2 * len(s.mounts) + 2
    n += 1 if s.clocksources else 0
    if "netstat" in s.collectors:
        n += 2
    if "pressure" in s.collectors:
        n += 3
    if "edac" in s.collectors:
        n += 3
    if "hwmon" in s.collectors:
        n += 2
    n += len(s.ib) * (3 + (2 if s.ib_data else 0) + len(s.ib_extra))
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
_SALT_DCGM, _SALT_NODE, _SALT_COLL = 11, 23, 37


def _scrape_grid(rs: int, salt: int, nodes: np.ndarray, dur: float, step: float):
    """Scrape times (K, n) and lost mask for the given node indices."""
    K = int(dur // step) + 1
    k = np.arange(K)[:, None]
    nn = np.asarray(nodes)[None, :]
    phase = step * _u01(rs, salt, 1 << 20, nn)
    t = phase + k * step + 0.25 * _u01(rs, salt, k, nn)
    lost = _u01(rs, salt + 1, k, nn) < _LOSS
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


_KIND_SITES: dict[str, tuple[str, ...]] = {
    "xid109_stuck_ctx": ("gb3", "efa", "a3g", "h1n", "rtx", "a4h"),
    "xid145_nvlink_rlw_abort": ("gb3",),
    "acpi_shutdown_vanish": ("gb3", "efa", "a3g", "h1n", "rtx", "a4h"),
    "dimm_ue_sigbus_rank": ("gb3", "h1n", "rtx", "a4h"),
    "nvlink_bridge_absent_p2p": ("h1n",),
    "pcie_gen2_stuck_link": ("rtx", "h1n", "a3g", "efa"),
    "gvnic_reset_loop": ("a3g",),
    "enforced_power_limit_low": ("gb3", "efa", "a3g", "h1n", "rtx", "a4h"),
    "blocked_slot_airflow": ("rtx", "h1n", "efa", "a3g", "a4h"),
    "nvme_ctrl_timeout_stall": ("gb3", "efa", "a3g", "h1n", "rtx", "a4h"),
    "mem_clock_pstate_stuck": ("gb3", "efa", "a3g", "h1n", "rtx", "a4h"),
    "roce_fec_uncorrectable": ("rtx",),
    "rack_local_ib_quiet": ("gb3", "h1n", "rtx", "a4h"),
    "hbm_vendor_mix": ("gb3", "efa", "a3g", "h1n", "a4h"),
    "blank_sentinel_values": ("gb3", "efa", "a3g", "h1n", "rtx"),
}
_TWO_CULPRITS = (
    "enforced_power_limit_low",
    "nvme_ctrl_timeout_stall",
    "blocked_slot_airflow",
    "mem_clock_pstate_stuck",
)
_BIG = (
    ("dense_pretrain_baseline", "gb3", 1024),
    ("enforced_power_limit_low", "gb3", 540),
    ("epoch_reshuffle_pause", "a3g", 384),
    ("xid109_stuck_ctx", "h1n", 288),
    ("pcie_gen2_stuck_link", "rtx", 256),
    ("host_backup_agent_tx", "efa", 256),
)
_SIZES = (4, 6, 8, 8, 12, 16, 16, 24, 32, 32, 32, 48, 48, 64, 64, 96, 128, 160)
_GB3_SIZES = (4, 9, 18, 18, 36, 36, 54, 72, 72, 144)
_EPOCH = datetime(2026, 9, 14, tzinfo=UTC)
_DT = 5.0
_JOBS_PER_KIND = 5
ROW_CAP = 5.45e6
_DI = (10.0, 15.0, 30.0, 60.0)
_NI = (15.0, 30.0, 60.0)


def _hostnames(site: str, n: int, rng) -> list[str]:
    if site == "gb3":
        r0 = int(rng.integers(1, 40))
        t0 = int(rng.integers(0, 18)) if n < 18 else 0
        return [f"gb3-r{r0 + (t0 + i) // 18:02d}-c{(t0 + i) % 18 + 1:02d}" for i in range(n)]
    if site == "efa":
        b = int(rng.integers(0, 200))
        return [f"ip-10-4-{b + (i * 7 + 3) // 250}-{(i * 7 + 3) % 250 + 4}" for i in range(n)]
    if site == "a3g":
        o = int(rng.integers(0, 200))
        return [f"a3mega-a3meganodeset-{o + i}" for i in range(n)]
    if site == "h1n":
        c = int(rng.integers(1, 30))
        return [f"nvl{c + i // 16:02d}n{i % 16 + 1:02d}" for i in range(n)]
    if site == "rtx":
        o = int(rng.integers(1, 300))
        return [f"rtxp-b{(o + i) // 32:02d}-{(o + i) % 32 + 1:03d}" for i in range(n)]
    o = int(rng.integers(1, 100))
    return [f"dgxa100-{o + i:04d}" for i in range(n)]


def _r5(x: float) -> float:
    return float(np.round(x / _DT) * _DT)


def jobs(seed: int = 0) -> list[Job]:
    rng = np.random.default_rng([seed, 9])
    kinds = [k for k in FAULT_KINDS + BENIGN_KINDS for _ in range(_JOBS_PER_KIND)]
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
        sites = _KIND_SITES.get(kind, tuple(SITES))
        if big[kind]:
            site_key, n = big[kind].pop(0)
        else:
            site_key = sites[int(rng.integers(len(sites)))]
            # spread kinds over their sites
            if seen[kind] <= len(sites) and len(sites) > 1:
                site_key = sites[(seen[kind] - 1 + int(rng.integers(0, 2))) % len(sites)]
            n = int(rng.choice(_GB3_SIZES if site_key == "gb3" else _SIZES))
        two = kind in _TWO_CULPRITS and kind not in two_done and n >= 8 and seen[kind] >= 2
        if two:
            two_done.add(kind)
        out.append(_make_job(j, kind, SITES[site_key], n, rng, two, seed))
    return out


def _make_job(j: int, kind: str, site: Site, n: int, rng, two: bool, seed: int) -> Job:
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
    spec: dict = {"rs": rs, "dur": float(dur), "kind": kind}
    spec["init_end"] = _r5(rng.uniform(150, 420))
    spec["ramp"] = 90.0
    spec["nccl_timeout"] = 1800.0 if rng.random() < 0.2 else 600.0
    warm = spec["init_end"] + spec["ramp"]
    spec["ckpt"] = []
    if not hang and rng.random() < 0.45 and kind != "epoch_reshuffle_pause":
        every = float(rng.uniform(600, 1500))
        t = warm + every
        while t < dur - 300:
            spec["ckpt"].append((_r5(t), _r5(t + rng.uniform(40, 120))))
            t += every
    spec["decoy_cpu"] = []
    if rng.random() < 0.5:
        for _ in range(int(rng.integers(1, 3))):
            spec["decoy_cpu"].append(
                (int(rng.integers(n)), _r5(rng.uniform(60, dur - 200)), _r5(rng.uniform(30, 90)))
            )
    culprits: dict[int, float] = {}
    ev: dict[int, list[tuple[str, float]]] = {}
    if kind in FAULT_KINDS:
        nc = 2 if two else 1
        cands = rng.permutation(n)[:nc]
        if hang:
            latest = dur - spec["nccl_timeout"] - 150
            te = _r5(rng.uniform(warm + 240, max(warm + 300, latest)))
            # make sure the job has room for the timeout: stretch the window
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
    dur = spec["dur"]
    start = _EPOCH + timedelta(minutes=int(j) * 97 + float(rng.uniform(0, 60)))
    start = start.replace(microsecond=0)
    hosts = _hostnames(site.key, n, rng)
    lab: dict[str, datetime] = {}
    for c, evs in ev.items():
        on = _onset(spec, site, n, c, evs, di, ni)
        lab[hosts[c]] = start + timedelta(milliseconds=round(on * 1000))
    spec["di"], spec["ni"] = di, ni
    name = f"v9-{j:03d}-{site.key}-{kind}"
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
    c = np.full(n, site.collect)
    b = spec.get("benign", {})
    for i in b.get("drift_nodes", []):
        c[i] = 60.0
    return c


def _onset(spec: dict, site: Site, n: int, c: int, evs, di: float, ni: float) -> float:
    rs, dur = spec["rs"], spec["dur"]
    best = np.inf
    for how, te in evs:
        if how in ("dcgm", "dcgm_missing"):
            t, lost = _scrape_grid(rs, _SALT_DCGM, np.array([c]), dur, di)
            t, lost = t[:, 0], lost[:, 0]
            coll = _node_collect(spec, site, n)[c]
            ph = _collect_phase(rs, np.array([c]), np.array([coll]))[0]
            m = np.floor((t - ph) / coll)
            ct = ph + m * coll
            stop = spec.get("fault", {}).get("dstop", {}).get(c, np.inf)
            if how == "dcgm":
                ok = (~lost) & (m >= 0) & (ct >= te - 1e-9) & (t < dur) & (t < stop)
            else:
                ok = (t >= te) & (t < dur)
        else:
            t, lost = _scrape_grid(rs, _SALT_NODE, np.array([c]), dur, ni)
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
    if kind in ("xid109_stuck_ctx", "xid145_nvlink_rlw_abort"):
        return [("dcgm", te)]
    if kind == "acpi_shutdown_vanish":
        # GPUs go idle at te; then the exporters stop answering (a missing scrape is evidence)
        return [
            ("dcgm", te),
            ("node", te),
            ("dcgm_missing", te + f["dcgm_stop"]),
            ("node_missing", te + f["node_stop"]),
        ]
    if kind == "dimm_ue_sigbus_rank":
        ce = f["ce_start"].get(c)
        evs = [("node", te)]
        if ce is not None:
            evs.append(("node", ce))
        return evs
    if kind == "nvlink_bridge_absent_p2p":
        return [("dcgm", te)]
    if kind in ("pcie_gen2_stuck_link", "enforced_power_limit_low", "mem_clock_pstate_stuck"):
        return [("dcgm", te)]
    if kind == "blocked_slot_airflow":
        return [("dcgm", te + 5.0)]
    if kind in ("gvnic_reset_loop", "nvme_ctrl_timeout_stall", "roce_fec_uncorrectable"):
        return [("node", te)]
    raise ValueError(kind)


def _fault_params(kind: str, site: Site, spec: dict, rng, n: int, cul: list[int]) -> dict:
    G = site.G
    f: dict = {"gpu": {c: int(rng.integers(G)) for c in cul}}
    if kind == "xid109_stuck_ctx":
        f["exit_lag"] = float(rng.uniform(5, 25))
    elif kind == "xid145_nvlink_rlw_abort":
        f["die_lag"] = _r5(rng.uniform(5, 20))
        f["tray"] = True
    elif kind == "acpi_shutdown_vanish":
        f["dcgm_stop"] = _r5(rng.uniform(15, 45))
        f["node_stop"] = f["dcgm_stop"] + _r5(rng.uniform(5, 20))
        f["dstop"] = {c: spec["culprits"][c] + f["dcgm_stop"] for c in cul}
        f["nstop"] = {c: spec["culprits"][c] + f["node_stop"] for c in cul}
        f["back"] = _r5(rng.uniform(240, 480)) if rng.random() < 0.4 else None
    elif kind == "dimm_ue_sigbus_rank":
        f["ce_start"] = {}
        for c in cul:
            if rng.random() < 0.6:
                f["ce_start"][c] = _r5(spec["culprits"][c] - rng.uniform(120, 600))
        f["kill_lag"] = _r5(rng.uniform(0, 5))
        f["controller"] = int(rng.integers(0, 2))
    elif kind == "nvlink_bridge_absent_p2p":
        # bridge absent from boot: effect shows when training traffic starts (first step)
        ie = spec["init_end"] + _r5v(20 * _u01(spec["rs"], 6, np.arange(n)))
        for c in cul:
            spec["culprits"][c] = float(ie.max())
        f["pair"] = {c: (f["gpu"][c] // 2) * 2 for c in cul}
        f["pace"] = float(rng.uniform(0.8, 0.9))
    elif kind == "pcie_gen2_stuck_link":
        f["gen"] = {c: int(rng.choice([1, 2, 2])) for c in cul}
        f["pace"] = float(rng.uniform(0.55, 0.85))
    elif kind == "gvnic_reset_loop":
        f["nic"] = {c: int(rng.integers(1, 9)) for c in cul}
        f["period"] = float(rng.uniform(60, 240))
        f["down"] = float(rng.uniform(5, 20))
    elif kind == "enforced_power_limit_low":
        f["cap"] = {c: float(rng.uniform(0.42, 0.68)) for c in cul}
    elif kind == "blocked_slot_airflow":
        f["rmult"] = {c: float(rng.uniform(1.6, 2.4)) for c in cul}
    elif kind == "nvme_ctrl_timeout_stall":
        f["episodes"] = {}
        for c in cul:
            t = spec["culprits"][c]
            eps = []
            while t < spec["dur"] - 60:
                d = _r5(rng.uniform(75, 210))
                eps.append((t, t + d))
                t = _r5(t + d + rng.uniform(60, 300))
            f["episodes"][c] = eps
    elif kind == "mem_clock_pstate_stuck":
        f["mclk"] = {c: float(rng.uniform(0.5, 0.68)) for c in cul}
        f["pace"] = float(rng.uniform(0.75, 0.9))
    elif kind == "roce_fec_uncorrectable":
        f["port"] = {c: int(rng.integers(len(site.eth_ports))) for c in cul}
        f["crc"] = float(10 ** rng.uniform(1.5, 3.0))
        f["pace"] = float(rng.uniform(0.7, 0.92))
    return f


def _benign_params(kind: str, site: Site, spec: dict, rng, n: int) -> dict:
    b: dict = {}
    dur = spec["dur"]
    warm = spec["init_end"] + spec["ramp"]
    if kind == "container_pull_late_join":
        k = max(1, round(n * rng.uniform(0.15, 0.4)))
        b["late"] = {int(i): _r5(rng.uniform(60, 360)) for i in rng.permutation(n)[:k]}
    elif kind == "epoch_reshuffle_pause":
        b["pauses"] = []
        t = warm + rng.uniform(600, 1200)
        while t < dur - 300 and len(b["pauses"]) < 3:
            b["pauses"].append((_r5(t), _r5(t + rng.uniform(40, 150))))
            t += rng.uniform(900, 1800)
    elif kind == "batch_size_warmup_steps":
        steps = sorted(rng.uniform(warm + 300, dur - 300, size=int(rng.integers(2, 4))))
        lv = float(rng.uniform(0.45, 0.6))
        b["steps"] = [(_r5(t), lv + (1 - lv) * (i + 1) / len(steps)) for i, t in enumerate(steps)]
        b["pace0"] = lv
    elif kind == "python_gc_stall_blip":
        b["blips"] = [
            (
                int(rng.integers(n)),
                _r5(rng.uniform(warm + 60, dur - 400)),
                _r5(rng.uniform(20, 200)),
            )
            for _ in range(int(rng.integers(1, 4)))
        ]
    elif kind == "hbm_vendor_mix":
        k = max(1, round(n * rng.uniform(0.15, 0.4)))
        b["other"] = [int(i) for i in rng.permutation(n)[:k]]
        b["dmem"] = float(rng.uniform(4, 9))
    elif kind == "rack_local_ib_quiet":
        b["bursts"] = []
        t = warm + rng.uniform(300, 900)
        while t < dur - 120:
            b["bursts"].append((_r5(t), _r5(t + rng.uniform(30, 90))))
            t += rng.uniform(600, 1200)
    elif kind == "vocab_head_last_stage":
        b["heads"] = [int(n - 1)] + ([int(n - 2)] if n >= 16 and rng.random() < 0.5 else [])
    elif kind == "collect_interval_drift":
        k = max(1, round(n * rng.uniform(0.1, 0.3)))
        b["drift_nodes"] = [int(i) for i in rng.permutation(n)[:k]]
    elif kind == "blank_sentinel_values":
        k = max(1, round(n * rng.uniform(0.1, 0.5)))
        b["blank_nodes"] = [int(i) for i in rng.permutation(n)[:k]]
    elif kind == "demand_response_cap_all":
        t0 = _r5(rng.uniform(warm + 300, max(warm + 400, dur - 1900)))
        b["cap"] = (t0, _r5(t0 + rng.uniform(600, 1800)), float(rng.uniform(0.6, 0.8)))
    elif kind == "host_backup_agent_tx":
        k = int(rng.integers(1, min(4, n) + 1))
        b["agents"] = [
            (
                int(i),
                _r5(rng.uniform(warm, dur - 700)),
                _r5(rng.uniform(600, 1800)),
                float(rng.uniform(0.3e9, 1.5e9)),
            )
            for i in rng.permutation(n)[:k]
        ]
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


IDLE, INIT, TRAIN, SPIN, PAUSE, STUCK, WAIT = 0, 1, 2, 3, 4, 5, 6
_GIB = 1024.0**3
# per mode: util %, graphics engine, tensor scale, dram scale, power fraction, fb fraction
_MODE_UTIL = np.array([0, 20, 98, 100, 2, 0, 0], dtype=np.float32)
_MODE_GR = np.array([0, 0.12, 0.93, 0.985, 0.02, 0.0, 0.0], dtype=np.float32)
_MODE_WORK = np.array([0, 0.02, 1.0, 0, 0, 0, 0], dtype=np.float32)
_MODE_PWR = np.array([0, 0.12, 0.0, 0.16, 0.07, 0.04, 0.03], dtype=np.float32)
_MODE_FB = np.array([0.004, 0.55, 0.9, 0.9, 0.9, 0.9, 0.55], dtype=np.float32)


class _Ctx:
    """Latent state of one job on a 5 s base grid."""

    def __init__(self, job: Job):
        self.job = job
        self.site = s = SITES[job.site]
        sp = self.spec = job.spec
        self.rng = np.random.default_rng([sp["rs"], 9])
        self.N = N = len(job.nodes)
        self.G = G = s.G
        self.dur = sp["dur"]
        self.T = T = int(self.dur // _DT) + 3
        self.tb = np.arange(T) * _DT
        rng = self.rng
        # launch / init / exit per node
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
        self.inlet = (24 if not s.liquid else 30) + 1.5 * rng.standard_normal(N)
        self.mem_dt = np.zeros((N, G), dtype=np.float32)
        # dynamic per-GPU overrides (allocated on demand)
        self.dyn: dict[str, np.ndarray] = {}
        self.events: dict[str, list] = {}  # counter increments: metric -> [(t, n, dev, amount)]
        self.xid = []  # (t, n, g, value)
        self.nvl_f = None
        self.pcie_f = None
        self.node_dead_dcgm = np.full(N, np.inf)
        self.node_dead_node = np.full(N, np.inf)
        self.node_back = np.full(N, np.inf)
        self.blocked = np.zeros((T, N), dtype=np.float32)
        self.cpu_extra = np.zeros((T, N, 3), dtype=np.float32)  # user, system, iowait (CPUs)
        self.disk_r = None
        self.disk_io_now = None
        self.net_extra = {}
        self.sentinel_nodes: list[int] = []
        self.cap_frac = None
        self.mclk_f = None
        self.rth_f = None
        self.dram_f = None
        self.stuck_fb = []

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

    def hang(self, t0: float, culprit_nodes: list[int], exit_lag: float = 10.0) -> float:
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


def _r5v(x: np.ndarray) -> np.ndarray:
    return np.round(x / _DT) * _DT


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
    T, N, _G = ctx.T, ctx.N, ctx.G
    # synchronous checkpoints (decoy, all nodes)
    for a, z in sp["ckpt"]:
        ia, iz = ctx.idx(a), ctx.idx(z)
        sel = ctx.mode[ia:iz] == TRAIN
        ctx.mode[ia:iz][sel] = PAUSE
        ctx.cpu_extra[ia:iz, :, 0] += 3.0
        ctx.net_extra.setdefault("front_tx", []).append((a, z, None, 1.5e9))
    for n, a, d in sp["decoy_cpu"]:
        ctx.cpu_extra[ctx.idx(a) : ctx.idx(a + d), n, 0] += 6.0
    if k == "xid109_stuck_ctx":
        ((c, te),) = list(cul.items())[:1]
        g = f["gpu"][c]
        ctx.xid.append((te, c, g, 109))
        texit = ctx.hang(te, [c], f["exit_lag"])
        gm = ctx.gm()
        gm[:] = ctx.mode[:, :, None]
        i0 = ctx.idx(te)
        gm[i0:, c, g] = STUCK
        ctx.blocked[ctx.idx(texit) :, c] += 1
        ctx.stuck_fb.append((c, g))
    elif k == "xid145_nvlink_rlw_abort":
        ((c, te),) = list(cul.items())[:1]
        g = f["gpu"][c]
        ctx.xid.append((te, c, g, 145))
        ctx.xid.append(
            (te + f["die_lag"], c, g, 45)
        )  # channels torn down "caused by previous Xid 145"
        ctx.ev(NV5_RECOV_FAIL, te, c, g, 1)
        ctx.ev(NV5_SYMBOL, te, c, g, float(ctx.rng.uniform(2e4, 4e5)))
        ctx.hang(te, [c])
        die = te + f["die_lag"]
        ctx.mode[ctx.idx(die) :, c] = IDLE
        ctx.cpu_extra[ctx.idx(die) :, c, 0] -= 4
        ctx.nvl_f = ctx.d("nvl")
        ctx.nvl_f[ctx.idx(te) :, c, g] = 0.0
    elif k == "acpi_shutdown_vanish":
        ((c, te),) = list(cul.items())[:1]
        ctx.hang(te, [c])
        ctx.mode[ctx.idx(te) :, c] = IDLE
        ctx.cpu_extra[ctx.idx(te) :, c, 1] += 2.0
        ctx.node_dead_dcgm[c] = te + f["dcgm_stop"]
        ctx.node_dead_node[c] = te + f["node_stop"]
        if f["back"] is not None:
            ctx.node_back[c] = te + f["node_stop"] + f["back"]
    elif k == "dimm_ue_sigbus_rank":
        ((c, te),) = list(cul.items())[:1]
        ce = f["ce_start"].get(c)
        if ce is not None:
            nce = int(ctx.rng.integers(20, 200))
            ts = np.sort(ctx.rng.uniform(ce, te, nce))
            ts[0] = ce
            for t in ts:
                ctx.ev(EDAC_CE, _r5(t), c, f["controller"], 1)
        ctx.ev(EDAC_UE, te, c, f["controller"], 1)
        ctx.ev(MEM_HWCORRUPT, te, c, 0, 4096)
        kill = te + f["kill_lag"]
        ctx.hang(kill, [c])
        ctx.mode[ctx.idx(kill) :, c] = IDLE
        ctx.cpu_extra[ctx.idx(kill) :, c, 0] -= 4
    elif k == "nvlink_bridge_absent_p2p":
        ctx.nvl_f = ctx.d("nvl")
        ctx.pcie_f = ctx.d("pcie")
        for c in cul:
            p = f["pair"][c]
            ctx.nvl_f[:, c, p : p + 2] = 0.0
            ctx.pcie_f[:, c, p : p + 2] = 4.0
        ctx.pace[ctx.tb >= ctx.train0] *= f["pace"]
    elif k == "pcie_gen2_stuck_link":
        ctx.pcie_f = ctx.d("pcie")
        lg = ctx.d("lgen", float(s.pcie_gen))
        t_first = min(cul.values())
        for c, te in cul.items():
            g = f["gpu"][c]
            i0 = ctx.idx(te)
            lg[i0:, c, g] = f["gen"][c]
            ctx.pcie_f[i0:, c, g] = -1.0  # capped by link rate in emission
            ctx.ev(PCIE_REPLAY, te, c, g, float(ctx.rng.integers(3, 40)))
        ctx.pace[ctx.idx(t_first) :] *= f["pace"]
    elif k == "gvnic_reset_loop":
        ((c, te),) = list(cul.items())[:1]
        nic = f["nic"][c]
        down = []
        t = te
        while t < ctx.dur:
            d = _r5(max(5.0, f["down"] * (0.6 + 0.8 * ctx.rng.random())))
            down.append((t, t + d))
            t = _r5(t + d + f["period"] * (0.6 + 0.8 * ctx.rng.random()))
        ctx.net_extra["nic_down"] = (c, nic, down)
        for a, z in down:
            ia, iz = ctx.idx(a), ctx.idx(z + 10)
            ctx.pace[ia:iz] = 0.0
            ctx.ev(NET_CARRIER, a, c, nic, 1)
            ctx.ev(NET_CARRIER, z, c, nic, 1)
            ctx.ev(TCP_RETRANS, a + 5, c, 0, float(ctx.rng.uniform(2e4, 2e5)))
    elif k == "enforced_power_limit_low":
        cap = ctx.cap_frac = np.ones((T, N), dtype=np.float32)
        for c, te in cul.items():
            cap[ctx.idx(te) :, c] = f["cap"][c]
    elif k == "blocked_slot_airflow":
        ctx.rth_f = ctx.d("rth")
        for c, te in cul.items():
            g = f["gpu"][c]
            ctx.rth_f[ctx.idx(te) :, c, g] = f["rmult"][c]
    elif k == "nvme_ctrl_timeout_stall":
        ctx.disk_io_now = np.zeros((T, N), dtype=np.float32)
        for c, eps in f["episodes"].items():
            for a, z in eps:
                ia, iz = ctx.idx(a), ctx.idx(z)
                ctx.disk_io_now[ia:iz, c] = float(ctx.rng.integers(16, 64))
                ctx.blocked[ia:iz, c] += float(ctx.rng.integers(4, 12))
                ctx.cpu_extra[ia:iz, c, 2] += 6.0
                sel = ctx.mode[ia:iz, c] == TRAIN
                ctx.mode[ia:iz, c][sel] = PAUSE
                # the synchronous job waits for the starved rank
                others = ctx.mode[ia:iz] == TRAIN
                ctx.mode[ia:iz][others] = SPIN
        ctx.stall_eps = f["episodes"]
    elif k == "mem_clock_pstate_stuck":
        ctx.mclk_f = ctx.d("mclk")
        ctx.dram_f = ctx.d("dram")
        t_first = min(cul.values())
        for c, te in cul.items():
            g = f["gpu"][c]
            ctx.mclk_f[ctx.idx(te) :, c, g] = f["mclk"][c]
            ctx.dram_f[ctx.idx(te) :, c, g] = 1.0 / f["pace"]
        ctx.pace[ctx.idx(t_first) :] *= f["pace"]
    elif k == "roce_fec_uncorrectable":
        ((c, te),) = list(cul.items())[:1]
        ctx.fec = (c, f["port"][c], te, f["crc"])
        ctx.pace[ctx.idx(te) :] *= f["pace"]
    # ---- healthy kinds
    elif k == "container_pull_late_join":
        late = b["late"]
        shift = max(late.values())
        for n, d in late.items():
            ia = ctx.idx(ctx.launch[n] + d)
            ctx.mode[:ia, n] = IDLE
            ctx.net_extra.setdefault("front_rx", []).append((0.0, ctx.launch[n] + d, n, 1.2e9))
            ctx.cpu_extra[:ia, n, 0] += 3
        # everyone's init shifts; early nodes wait (process up, CPU-side rendezvous)
        new0 = ctx.train0 + shift
        tb = ctx.tb
        for n in range(N):
            d = late.get(n, 0.0)
            a = ctx.launch[n] + d
            ie = ctx.init_end[n] + d
            m = ctx.mode[:, n]
            m[(tb >= a) & (tb < ie)] = INIT
            m[(tb >= ie) & (tb < new0)] = WAIT
            m[tb < a] = IDLE
        ctx.train0 = new0
        ramp = np.clip((tb - new0) / ctx.spec["ramp"], 0, 1).astype(np.float32)
        ctx.pace[:] = 0.3 + 0.7 * ramp
    elif k == "epoch_reshuffle_pause":
        for a, z in b["pauses"]:
            ia, iz = ctx.idx(a), ctx.idx(z)
            sel = ctx.mode[ia:iz] == TRAIN
            ctx.mode[ia:iz][sel] = PAUSE
            ctx.cpu_extra[ia:iz, :, 0] += 12.0
    elif k == "batch_size_warmup_steps":
        lv = np.full(T, b["pace0"], dtype=np.float32)
        for t, v in b["steps"]:
            lv[ctx.idx(t) :] = v
        ctx.pace *= lv
    elif k == "python_gc_stall_blip":
        for n, a, d in b["blips"]:
            ia, iz = ctx.idx(a), ctx.idx(a + d)
            tr = ctx.mode[ia:iz] == TRAIN
            ctx.mode[ia:iz][tr] = SPIN
            ctx.mode[ia:iz, n] = PAUSE
            ctx.cpu_extra[ia:iz, n, 0] += 1.0
    elif k == "hbm_vendor_mix":
        ctx.mem_dt[b["other"], :] += b["dmem"]
        ctx.g_pwr[b["other"], :] *= 1.025
    elif k == "rack_local_ib_quiet":
        ctx.ib_quiet = b["bursts"]
    elif k == "vocab_head_last_stage":
        for n in b["heads"]:
            ctx.g_fb[n, :] *= 1.1
            ctx.g_pwr[n, :] *= 1.05
            ctx.cpu_extra[:, n, 0] += 2
        ctx.heads = b["heads"]
    elif k == "blank_sentinel_values":
        ctx.sentinel_nodes = b["blank_nodes"]
    elif k == "demand_response_cap_all":
        a, z, fr = b["cap"]
        ctx.cap_frac = np.ones((T, N), dtype=np.float32)
        ctx.cap_frac[ctx.idx(a) : ctx.idx(z)] = fr
    elif k == "host_backup_agent_tx":
        for n, a, d, r in b["agents"]:
            ia, iz = ctx.idx(a), ctx.idx(a + d)
            ctx.cpu_extra[ia:iz, n, 0] += 2.5
            ctx.cpu_extra[ia:iz, n, 1] += 1.0
            ctx.net_extra.setdefault("front_tx", []).append((a, a + d, n, r))
            ctx.net_extra.setdefault("disk_r", []).append((a, a + d, n, r))


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
    pace = ctx.pace[:, None, None]
    work = _MODE_WORK[gm] * pace  # (T,N,G|1)
    clk = np.broadcast_to(ctx.g_clk[None], (T, N, G)).astype(np.float32)
    if ctx.mclk_f is not None:
        # the slow GPU is busy the whole step (memory bound), its peers wait for it
        slow = ctx.mclk_f < 0.99
        work = np.broadcast_to(work, (T, N, G)).copy()
        work[slow & (np.broadcast_to(gm, (T, N, G)) == TRAIN)] = 1.0
    pf = np.where(
        np.broadcast_to(gm, (T, N, G)) == TRAIN, 0.2 + 0.75 * work * clk**1.7, _MODE_PWR[gm]
    ).astype(np.float32)
    pf = pf * ctx.g_pwr[None]
    rng_w = s.tdp - s.idle_w
    pw = s.idle_w + pf * rng_w
    cap = np.full((T, N, G), s.tdp, dtype=np.float32)
    if ctx.cap_frac is not None:
        cap = cap * ctx.cap_frac[:, :, None]
        over = pw > cap
        # clock falls until power fits: p ~ clk^1.7
        need = np.where(over, ((cap - s.idle_w) / np.maximum(pw - s.idle_w, 1)) ** (1 / 1.7), 1.0)
        clk = clk * np.minimum(1.0, need).astype(np.float32)
        pw = np.minimum(pw, cap * (0.985 + 0.01 * np.random.default_rng(1).random((1, 1, G))))
        ctx.cap_hit = over
        # the job runs at the slowest GPU
        if ctx.spec["kind"] == "enforced_power_limit_low":
            slow = np.min(np.where(np.broadcast_to(gm, (T, N, G)) == TRAIN, clk, 1.0), axis=(1, 2))
            ctx.pace *= np.clip(slow / 0.995, 0.3, 1.0)
            # culprit GPUs are busy all the time; peers do pace-fraction work
            work = _MODE_WORK[gm] * ctx.pace[:, None, None]
            work = np.broadcast_to(work, (T, N, G)).copy()
            for c in ctx.spec["culprits"]:
                work[:, c, :] = np.where(
                    np.broadcast_to(gm, (T, N, G))[:, c] == TRAIN, 1.0, work[:, c]
                )
        elif ctx.spec["kind"] == "demand_response_cap_all":
            slow = np.min(np.where(np.broadcast_to(gm, (T, N, G)) == TRAIN, clk, 1.0), axis=(1, 2))
            ctx.pace *= np.clip(slow, 0.3, 1.0)
            work = _MODE_WORK[gm] * ctx.pace[:, None, None]
    else:
        ctx.cap_hit = np.zeros((T, N, G), dtype=bool)
    # temperature
    hot_tt = []
    rth = s.r_th * (ctx.rth_f if ctx.rth_f is not None else 1.0)
    target = ctx.inlet[None, :, None] + ctx.g_temp[None] + rth * pw
    if ctx.rth_f is not None:
        # closed-loop clock control on the hot GPU(s)
        hot = np.argwhere((ctx.rth_f > 1.0).any(axis=0))
        a = 1 - np.exp(-_DT / 45.0)
        for n, g in hot:
            tt = np.empty(T, dtype=np.float32)
            tt[0] = target[0, n, g]
            c = 1.0
            for i in range(1, T):
                busy = (gm[i, n, g] if gm.shape[2] == G else gm[i, n, 0]) == TRAIN
                if busy and tt[i - 1] > s.slow_temp:
                    c = max(0.45, c - 0.025)
                elif busy and tt[i - 1] < s.slow_temp - 2:
                    c = min(1.0, c + 0.01)
                clk[i, n, g] = clk[i, n, g] * c
                p = s.idle_w + (0.2 + 0.75 * clk[i, n, g] ** 1.7) * rng_w if busy else pw[i, n, g]
                pw[i, n, g] = p
                tgt = ctx.inlet[n] + ctx.g_temp[n, g] + rth[i, n, g] * p
                tt[i] = tt[i - 1] + a * (tgt - tt[i - 1])
            ctx.hot_clk = (n, g, clk[:, n, g].copy())
            slow = np.clip(clk[:, n, g] / ctx.g_clk[n, g], 0.3, 1.0)
            ctx.pace *= slow
            hot_tt.append((n, g, tt))
    temp = _iir(target.astype(np.float32), 45.0)
    for n, g, tt in hot_tt:
        temp[:, n, g] = tt
    ctx.work = work
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
    t, lost = _scrape_grid(sp["rs"], _SALT_DCGM, nodes, ctx.dur, sp["di"])
    coll = _node_collect(sp, s, N)
    ph = _collect_phase(sp["rs"], nodes, coll)
    m = np.floor((t - ph[None]) / coll[None])
    keep = (~lost) & (m >= 0) & (t < ctx.dur)
    keep &= t < ctx.node_dead_dcgm[None]
    back = ctx.node_back + 60.0  # driver load after boot
    keep |= (t >= back[None]) & (~lost) & (t < ctx.dur) & (m >= 0)
    m = np.maximum(m, 0).astype(np.int64)
    ct = ph[None] + m * coll[None]
    b = np.clip((ct / _DT).astype(np.int64), 0, ctx.T - 1)
    K = t.shape[0]
    M = int(m.max()) + 2
    mask = np.broadcast_to(keep[:, :, None], (K, N, G))
    after_back = (ct >= back[None])[:, :, None]

    def noise(sd: float) -> np.ndarray:
        z = rng.standard_normal((M, N, G)).astype(np.float32) * sd
        return z[m, nodes[None, :]]

    gm = (
        ctx.gmode if ctx.gmode is not None else np.broadcast_to(ctx.mode[:, :, None], (ctx.T, N, G))
    )
    mode = _gather(gm, b)
    mode = np.where(after_back, IDLE, mode)
    work = _gather(np.broadcast_to(ctx.work, (ctx.T, N, G)), b)
    work = np.where(after_back, 0.0, work)
    clk = _gather(ctx.clk, b)
    pw = _gather(ctx.pw, b)
    temp = _gather(ctx.temp, b)
    train = mode == TRAIN
    idle_like = (mode == IDLE) | (mode == WAIT) | (mode == PAUSE) | (mode == STUCK)
    fields = set(s.fields)
    devs = [str(i) for i in range(G)]

    def add(metric, vals):
        if metric in fields:
            v = vals
            if metric in ctx_sentinel and ctx.sentinel_nodes:
                v = np.array(np.broadcast_to(vals, (K, N, G)), dtype=np.float64)
                v[:, ctx.sentinel_nodes, :] = 9223372036854775794.0
            rows.add(metric, devs, t, v, mask)

    ctx_sentinel = {MEMORY_TEMP} if MEMORY_TEMP in fields else {FB_RESERVED, POWER_LIMIT}
    # clocks
    smc = np.where(idle_like & (mode != STUCK), s.sm_idle, s.sm_max * clk)
    smc = np.round(smc / 15.0) * 15.0
    add(SM_CLOCK, smc)
    mclk = np.full((K, N, G), s.mem_clk, dtype=np.float64)
    if ctx.mclk_f is not None:
        mclk = mclk * _gather(ctx.mclk_f, b)
    add(MEM_CLOCK, np.round(mclk))
    tmp = temp + noise(0.35)
    add(GPU_TEMP, np.round(tmp))
    memt = tmp + 4.0 + ctx.mem_dt[None] + 3.0 * (pw / s.tdp)
    add(MEMORY_TEMP, np.round(memt))
    pwn = pw * (1 + noise(0.012))
    pwn = np.minimum(pwn, _gather(ctx.cap, b) * 1.002)
    add(POWER, np.round(pwn, 3))
    # energy (mJ) since driver load: integral of power
    if ENERGY in fields:
        pw_base = ctx.pw.astype(np.float64)
        cum = np.concatenate([np.zeros((1, N, G)), np.cumsum(pw_base * _DT, axis=0)[:-1]], axis=0)
        e0 = 1e3 * (3600 * 24 * (5 + 60 * ctx.rng.random((N, G))) * s.tdp * 0.4)
        frac = (ct - b * _DT)[:, :, None]
        e = e0[None] + 1e3 * (_gather(cum, b) + pw * frac)
        if np.isfinite(ctx.node_back).any():
            nb = np.isfinite(ctx.node_back)
            e[:, nb] = np.where(
                after_back[:, nb],
                1e3 * s.idle_w * (ct[:, nb, None] - back[None, nb, None]),
                e[:, nb],
            )
        add(ENERGY, np.round(e))
    # PCIe replays: history + trickle + events
    if PCIE_REPLAY in fields:
        hist = np.where(ctx.rng.random((N, G)) < 0.15, ctx.rng.integers(1, 500, (N, G)), 0)
        for _ in range(int(ctx.rng.poisson(0.01 * N * G * ctx.dur / 900))):
            ctx.ev(
                PCIE_REPLAY,
                _r5(ctx.rng.uniform(0, ctx.dur)),
                int(ctx.rng.integers(N)),
                int(ctx.rng.integers(G)),
                1,
            )
        add(PCIE_REPLAY, hist[None] + _cum_events(ctx, PCIE_REPLAY, ct, G))
    util = np.where(train, np.minimum(100, 97.5 + 2.0 * np.abs(noise(1.0))), _MODE_UTIL[mode])
    util = np.where(mode == INIT, 5 + 30 * np.abs(noise(0.5)), util)
    util = np.clip(np.round(util), 0, 100)
    add(GPU_UTIL, util)
    add(MEM_COPY_UTIL, np.clip(np.round(np.where(train, 35 * work + 3 * noise(1.0), 0)), 0, 100))
    add(ENC_UTIL, np.zeros((K, N, G)))
    add(DEC_UTIL, np.zeros((K, N, G)))
    # Xid: stale application Xids on 1.5 % of GPUs, plus the fault's
    xv = np.zeros((K, N, G))
    stale = ctx.rng.random((N, G)) < 0.015
    xv[:, stale] = ctx.rng.choice([13, 31, 43], size=int(stale.sum()))[None, :]
    for te, n, g, v in sorted(ctx.xid):
        xv[:, n, g] = np.where(ct[:, n] >= te, v, xv[:, n, g])
    xv = np.where(after_back, 0.0, xv)  # the driver reloaded: no Xid since
    add(XID, xv)
    fbu = np.where(mode == IDLE, s.fb_mib * 0.004, s.fb_mib * _MODE_FB[mode] * ctx.g_fb[None])
    fbu = np.round(fbu)
    resv = 0.006 * s.fb_mib if FB_RESERVED in fields else 0.0
    add(FB_USED, fbu)
    add(FB_FREE, np.round(s.fb_mib - resv - fbu))
    add(FB_RESERVED, np.full((K, N, G), np.round(resv)))
    # NVLink
    if NVLINK_BW in fields:
        nvf = _gather(ctx.nvl_f, b) if ctx.nvl_f is not None else 1.0
        nv = np.where(train, s.nvl_bw * work * nvf * (1 + noise(0.03)), 0.0)
        nv = np.where(mode == SPIN, 0.0, nv)
        add(NVLINK_BW, np.round(np.maximum(nv, 0)))
    if NVL_REPLAY in fields:
        hist = np.where(ctx.rng.random((N, G)) < 0.04, ctx.rng.integers(1, 30, (N, G)), 0)
        add(NVL_REPLAY, hist[None] + _cum_events(ctx, NVL_REPLAY, ct, G))
        add(NVL_RECOVERY, _cum_events(ctx, NVL_RECOVERY, ct, G))
    if NV5_SYMBOL in fields:
        hist = np.where(ctx.rng.random((N, G)) < 0.6, ctx.rng.integers(0, 4e5, (N, G)), 0)
        trickle = ctx.rng.uniform(0.01, 0.5, (N, G)) * (ctx.rng.random((N, G)) < 0.3)
        add(
            NV5_SYMBOL,
            hist[None]
            + np.floor(trickle[None] * ct[:, :, None])
            + _cum_events(ctx, NV5_SYMBOL, ct, G),
        )
        add(
            NV5_RECOV,
            np.where(ctx.rng.random((N, G)) < 0.05, 1.0, 0.0)[None]
            + _cum_events(ctx, NV5_RECOV, ct, G),
        )
        add(NV5_RECOV_FAIL, _cum_events(ctx, NV5_RECOV_FAIL, ct, G))
    # remapped rows (history only)
    if UNC_REMAP in fields:
        add(
            UNC_REMAP,
            np.broadcast_to((ctx.rng.random((N, G)) < 0.004).astype(float)[None], (K, N, G)),
        )
        cr = np.where(ctx.rng.random((N, G)) < 0.05, ctx.rng.integers(1, 9, (N, G)), 0)
        add(COR_REMAP, np.broadcast_to(cr[None].astype(float), (K, N, G)))
        add(REMAP_FAIL, np.zeros((K, N, G)))
    # DCP
    tensor0, dram0 = 0.42, 0.38
    dramf = _gather(ctx.dram_f, b) if ctx.dram_f is not None else 1.0
    add(PROF_GR, np.clip(np.where(train, 0.93 + 0.01 * noise(1.0), _MODE_GR[mode]), 0, 1).round(6))
    add(
        PROF_TENSOR,
        np.clip(np.where(train, tensor0 * work * (1 + noise(0.02)), 0.0), 0, 1).round(6),
    )
    add(
        PROF_DRAM,
        np.clip(
            np.where(
                train, dram0 * work * dramf * (1 + noise(0.02)), np.where(mode == SPIN, 0.002, 0.0)
            ),
            0,
            1,
        ).round(6),
    )
    # PCIe traffic (bytes/s): H2D input + (PCIe GPUs) GPU<->NIC collective traffic
    # GPUDirect RDMA / TCPXO: the inter-node collective traffic crosses the GPU's PCIe link
    base_pcie = {"gb3": 8e9, "efa": 1.0e10, "a3g": 9e9, "h1n": 1.2e10, "rtx": 1.6e10}.get(
        s.key, 6e9
    )
    pf = _gather(ctx.pcie_f, b) if ctx.pcie_f is not None else np.ones((K, N, G), np.float32)
    lgen = _gather(ctx.dyn["lgen"], b) if "lgen" in ctx.dyn else np.full((K, N, G), s.pcie_gen)
    rate = base_pcie * work * np.where(pf > 0, pf, 1.0) * (1 + noise(0.04))
    lim = _GEN_BW[np.clip(lgen.astype(np.int64), 1, 6)] * 0.85
    capped = pf < 0
    rate = np.where(capped & train, np.minimum(lim * (0.97 + 0.03 * noise(1.0)), 1e12), rate)
    rate = np.where(train, rate, np.where(mode == INIT, 2e8, 2e6))
    add(PROF_PCIE_TX, np.round(np.maximum(rate * 0.6, 0)))
    add(PROF_PCIE_RX, np.round(np.maximum(rate, 0)))
    add(PCIE_TX_TP, np.round(np.maximum(rate * 0.6, 0) / 1024))
    add(PCIE_RX_TP, np.round(np.maximum(rate, 0) / 1024))
    add(LINK_GEN, lgen)
    add(LINK_WIDTH, np.full((K, N, G), 16.0))
    # power limit and reasons
    capv = _gather(ctx.cap, b)
    add(POWER_LIMIT, np.round(capv, 1))
    if s.reasons:
        r = np.zeros((K, N, G), dtype=np.int64)
        r |= np.where(idle_like | (mode == IDLE), 0x1, 0)
        hit = _gather(ctx.cap_hit, b) & train
        near = train & (pw >= 0.98 * capv)
        r |= np.where(hit | near, 0x4, 0)
        hot = train & (temp > s.slow_temp - 0.5)
        r |= np.where(hot, 0x20, 0)
        add(s.reasons, r.astype(np.float64))
    if POWER_VIOL in fields or THERMAL_VIOL in fields:
        unit = 1e9 if s.viol_ns else 1e6
        hitb = ctx.cap_hit & (np.broadcast_to(gm, ctx.cap_hit.shape) == TRAIN)
        cv = np.concatenate([np.zeros((1, N, G)), np.cumsum(hitb * _DT, axis=0)[:-1]], axis=0)
        add(POWER_VIOL, np.round(_gather(cv, b) * unit))
        hotb = ctx.temp > s.slow_temp - 0.5
        ch = np.concatenate([np.zeros((1, N, G)), np.cumsum(hotb * _DT, axis=0)[:-1]], axis=0)
        add(THERMAL_VIOL, np.round(_gather(ch, b) * unit))


def _emit_node(ctx: _Ctx, rows: _Rows) -> None:
    s, sp, N, G = ctx.site, ctx.spec, ctx.N, ctx.G
    rng = ctx.rng
    nodes = np.arange(N)
    t, lost = _scrape_grid(sp["rs"], _SALT_NODE, nodes, ctx.dur, sp["ni"])
    keep = (~lost) & (t < ctx.dur) & ((t < ctx.node_dead_node[None]) | (t >= ctx.node_back[None]))
    K = t.shape[0]
    b = np.clip((t / _DT).astype(np.int64), 0, ctx.T - 1)
    frac = t - b * _DT
    after_back = t >= ctx.node_back[None]
    uptime0 = 86400 * (2 + 60 * rng.random(N))
    job_t0 = ctx.job.start.timestamp()
    boot_time = np.where(after_back, job_t0 + ctx.node_back[None], job_t0 - uptime0[None])

    def add(metric, devices, vals, mk=None):
        m = keep if mk is None else mk
        m3 = np.broadcast_to(m[:, :, None], (K, N, len(devices)))
        rows.add(metric, devices, t, vals, m3)

    def integ(rate_b: np.ndarray, start: np.ndarray) -> np.ndarray:
        """rate on base grid (T,N[,D]) -> cumulative at scrape times (K,N[,D]) from start."""
        cum = np.concatenate(
            [np.zeros((1, *rate_b.shape[1:])), np.cumsum(rate_b * _DT, axis=0)[:-1]]
        )
        v = _gather(cum, b) + _gather(rate_b, b) * (frac if rate_b.ndim == 2 else frac[:, :, None])
        v = v + start
        if np.isfinite(ctx.node_back).any():
            nb = np.isfinite(ctx.node_back)
            ib0 = np.array([ctx.idx(x) for x in ctx.node_back[nb]])
            base = cum[ib0, np.where(nb)[0]]
            v[:, nb] = np.where(
                (after_back[:, nb] if v.ndim == 2 else after_back[:, nb, None]),
                v[:, nb] - start[nb] - base,
                v[:, nb],
            )
        return v

    mode = ctx.mode
    train_b = (mode == TRAIN) | (mode == SPIN) | (mode == INIT) | (mode == PAUSE) | (mode == WAIT)
    ranks = G if s.key != "gb3" else 4
    # CPU (CPU-seconds per second), device = mode
    user = 1.0 + ranks * train_b * 1.1 + 0.3 * rng.random(N)[None] + ctx.cpu_extra[:, :, 0]
    user = user + np.where(mode == TRAIN, ranks * 2.0, 0)  # dataloader workers
    user = np.maximum(user, 0.2)
    system = 0.6 + 0.4 * train_b + ctx.cpu_extra[:, :, 1]
    iowait = 0.02 + ctx.cpu_extra[:, :, 2]
    softirq = 0.1 + 0.3 * train_b
    idle = np.maximum(s.cpus - user - system - iowait - softirq, 0)
    cpu_rates = np.stack([idle, iowait, softirq, system, user], axis=2).astype(np.float64)
    st = uptime0[:, None] * np.array([0.95, 0.001, 0.002, 0.01, 0.037])[None] * s.cpus
    add(CPU_SECONDS, ["idle", "iowait", "softirq", "system", "user"], integ(cpu_rates, st).round(2))
    load = _gather(user + system + ctx.blocked, b) + 0.3 * rng.standard_normal((K, N))
    add(LOAD1, [""], np.maximum(load, 0).round(2)[:, :, None])
    memt = s.mem_gib * _GIB
    used = 0.08 + 0.12 * train_b
    cached = np.full((ctx.T, N), 0.3, dtype=np.float32)
    avail = memt * (1 - used) - 0.0
    add(MEM_TOTAL, [""], np.full((K, N, 1), memt))
    av = _gather(avail, b) * (1 + 0.002 * rng.standard_normal((K, N)))
    add(MEM_AVAIL, [""], np.round(av)[:, :, None])
    add(MEM_CACHED, [""], np.round(_gather(cached, b) * memt)[:, :, None])
    dirty = 2e7 + 1e8 * rng.random((K, N))
    add(MEM_DIRTY, [""], np.round(dirty)[:, :, None])
    add(MEM_HWCORRUPT, [""], _cum_events(ctx, MEM_HWCORRUPT, t, 1))
    running = 1 + np.round(_gather(user, b) * 0.1 + rng.poisson(1.0, (K, N)))
    add(PROCS_RUNNING, [""], running[:, :, None])
    add(PROCS_BLOCKED, [""], (_gather(ctx.blocked, b) + (rng.random((K, N)) < 0.05))[:, :, None])
    cs = (2e4 + 3e4 * train_b).astype(np.float64)
    add(CTX_SWITCHES, [""], np.round(integ(cs, uptime0 * 3e4))[:, :, None])
    add(BOOT_TIME, [""], np.round(boot_time)[:, :, None])
    # network
    nd = len(s.netdevs)
    nr = np.zeros((ctx.T, N, nd))
    nt = np.zeros((ctx.T, N, nd))
    nr[:, :, 0] = 2e6 + 5e6 * train_b
    nt[:, :, 0] = 2e6 + 3e6 * train_b
    for key, arr in (("front_tx", nt), ("front_rx", nr)):
        for a, z, n, r in ctx.net_extra.get(key, []):
            sl = slice(ctx.idx(a), ctx.idx(z))
            if n is None:
                arr[sl, :, 0] += r
            else:
                arr[sl, n, 0] += r
    gw = (
        ctx.work.mean(axis=2)
        if ctx.work.ndim == 3 and ctx.work.shape[2] > 1
        else np.broadcast_to(ctx.work, (ctx.T, N, 1))[:, :, 0]
    )
    up = np.ones((K, N, nd))
    if s.gpu_nics:
        # GPUDirect-TCPXO: collective traffic is ordinary TCP on the GPU NICs
        per = 9e9 * gw
        for i in range(1, nd):
            nr[:, :, i] = per * (1 + 0.02 * rng.standard_normal((1, N)))
            nt[:, :, i] = per * (1 + 0.02 * rng.standard_normal((1, N)))
        if "nic_down" in ctx.net_extra:
            c, nic, down = ctx.net_extra["nic_down"]
            for a, z in down:
                sl = slice(ctx.idx(a), ctx.idx(z))
                nr[sl, c, nic] = 0
                nt[sl, c, nic] = 0
                up[:, c, nic] = np.where((t[:, c] >= a) & (t[:, c] < z), 0, up[:, c, nic])
    elif s.eth_ports:
        for i in range(1, nd):
            nr[:, :, i] = 1e5
            nt[:, :, i] = 1e5
    st = uptime0[:, None] * 5e6
    add(NET_RX, list(s.netdevs), np.round(integ(nr, st)))
    add(NET_TX, list(s.netdevs), np.round(integ(nt, st)))
    add(NET_UP, list(s.netdevs), up)
    ch = 2 + (rng.integers(0, 3, (N, nd)) * 2)
    add(NET_CARRIER, list(s.netdevs), ch[None] + _cum_events(ctx, NET_CARRIER, t, nd))
    # disk
    dr = (2e6 + 4e7 * (ctx.mode == TRAIN)).astype(np.float64)
    for a, z, n, r in ctx.net_extra.get("disk_r", []):
        dr[ctx.idx(a) : ctx.idx(z), n] += r
    iot = (0.02 + 0.1 * (ctx.mode == TRAIN)).astype(np.float64)
    if ctx.disk_io_now is not None:
        stall = ctx.disk_io_now > 0
        dr[stall] = 0.0
        iot[stall] = 1.0
    dw = (1e6 + 0 * dr).astype(np.float64)
    for a, z in sp["ckpt"]:
        dw[ctx.idx(a) : ctx.idx(z)] += 8e8
    dev = [s.disk]
    add(DISK_R, dev, np.round(integ(dr, uptime0 * 3e6))[:, :, None])
    add(DISK_W, dev, np.round(integ(dw, uptime0 * 2e6))[:, :, None])
    add(DISK_IO, dev, integ(iot, uptime0 * 0.03).round(3)[:, :, None])
    ion = _gather(ctx.disk_io_now, b) if ctx.disk_io_now is not None else np.zeros((K, N))
    ion = ion + (rng.random((K, N)) < 0.1)
    add(DISK_IO_NOW, dev, ion[:, :, None])
    sizes = np.array([0.9e12, 6.9e12 if s.key != "gb3" else 3.5e12])[: len(s.mounts)]
    fa = (
        sizes[None, None]
        * np.array([0.55, 0.7])[None, None]
        * (1 + 0.01 * rng.standard_normal((1, N, 1)))
    )
    add(FS_AVAIL, list(s.mounts), np.round(np.broadcast_to(fa, (K, N, 2))))
    add(FS_SIZE, list(s.mounts), np.broadcast_to(sizes[None, None], (K, N, 2)))
    add(VM_PGMAJ, [""], np.round(integ(np.full((ctx.T, N), 2.0), uptime0 * 2))[:, :, None])
    oom = np.where(rng.random(N) < 0.04, rng.integers(1, 4, N), 0)
    add(VM_OOM, [""], np.broadcast_to(oom[None, :, None].astype(float), (K, N, 1)))
    if s.clocksources:
        add(CLOCKSOURCE, ["tsc"], np.ones((K, N, 1)))
    if "netstat" in s.collectors:
        outs = (3e3 + 1e4 * train_b).astype(np.float64)
        if s.gpu_nics:
            outs = outs + 8 * 9e9 * gw / 4096
        add(TCP_OUTSEGS, [""], np.round(integ(outs, uptime0 * 3e3))[:, :, None])
        rr = outs * 2e-6
        add(
            TCP_RETRANS,
            [""],
            np.round(integ(rr, uptime0 * 0.01) + _cum_events(ctx, TCP_RETRANS, t, 1)[:, :, 0])[
                :, :, None
            ],
        )
    if "pressure" in s.collectors:
        add(PSI_CPU, [""], integ(np.full((ctx.T, N), 0.01), uptime0 * 0.01).round(4)[:, :, None])
        psw = 0.002 + (ctx.disk_io_now > 0 if ctx.disk_io_now is not None else 0) * 0.95
        add(
            PSI_IO_W,
            [""],
            integ(np.broadcast_to(psw, (ctx.T, N)).astype(float), uptime0 * 0.002).round(4)[
                :, :, None
            ],
        )
        add(
            PSI_IO_S,
            [""],
            integ(np.broadcast_to(psw * 0.9, (ctx.T, N)).astype(float), uptime0 * 0.001).round(4)[
                :, :, None
            ],
        )
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
        cput = (
            45
            + 10 * _gather(train_b.astype(np.float32), b)[:, :, None]
            + rng.standard_normal((K, N, 2))
        )
        add(
            HWMON_TEMP,
            ["coretemp:temp1", "coretemp:temp2"]
            if s.key != "gb3"
            else ["acpitz:temp1", "acpitz:temp2"],
            np.round(cput),
        )
    # InfiniBand / EFA / RoCE HCAs
    if s.ib:
        P_ = len(s.ib)
        devs = list(s.ib)
        add(IB_STATE, devs, np.full((K, N, P_), 4.0))
        if s.ib_data:
            add(IB_PHYS, devs, np.full((K, N, P_), 5.0))
        add(IB_RATE, devs, np.full((K, N, P_), s.ib_rate))
        if s.ib_data:
            util = 0.25 * gw
            if getattr(ctx, "ib_quiet", None) is not None:
                util = np.full_like(gw, 1e-4)
                for a, z in ctx.ib_quiet:
                    util[ctx.idx(a) : ctx.idx(z)] = 0.2
            r = np.repeat((s.ib_rate * util)[:, :, None], P_, axis=2)
            r = r * (1 + 0.03 * rng.standard_normal((1, N, P_)))
            st = uptime0[:, None] * s.ib_rate * 0.05 * rng.random((N, P_))
            add(IB_RX, devs, np.round(integ(r, st)))
            add(IB_TX, devs, np.round(integ(r * 1.0, st)))
        for mname in s.ib_extra:
            if mname == IB_XMIT_WAIT:
                w = np.repeat((2e4 * gw)[:, :, None], P_, axis=2)
                add(mname, devs, np.round(integ(w, uptime0[:, None] * 1e3 * np.ones((N, P_)))))
            elif mname == IB_OOS:
                base = np.repeat((0.05 * gw)[:, :, None], P_, axis=2).astype(np.float64)
                fec = getattr(ctx, "fec", None)
                if fec is not None:
                    c, port, te, crc = fec
                    base[ctx.idx(te) :, c, port] += crc * 0.8
                add(mname, devs, np.floor(integ(base, np.zeros((N, P_)))))
            else:
                p = {IB_DOWNED: 0.08, IB_SYMBOL: 0.1, IB_RCV_ERR: 0.08}[mname]
                if mname != IB_DOWNED:  # rare isolated ticks on healthy links
                    for _ in range(int(rng.poisson(0.05 * N * P_ * ctx.dur / 3600))):
                        ctx.ev(
                            mname,
                            _r5(rng.uniform(0, ctx.dur)),
                            int(rng.integers(N)),
                            int(rng.integers(P_)),
                            1,
                        )
                hist = np.where(rng.random((N, P_)) < p, rng.integers(1, 200, (N, P_)), 0)
                add(mname, devs, hist[None] + _cum_events(ctx, mname, t, P_))
    if s.ethtool:
        ports = list(s.eth_ports)
        E = len(ports)
        for mname in s.ethtool:
            if mname == ET_CORR_BITS:
                r = np.repeat(
                    (1e3 * (0.5 + rng.random((1, N))) * np.ones((ctx.T, 1)))[:, :, None], E, axis=2
                )
                fec = getattr(ctx, "fec", None)
                if fec is not None:
                    c, port, te, crc = fec
                    r[ctx.idx(te) :, c, port] = 10**6.5
                add(mname, ports, np.floor(integ(r, uptime0[:, None] * 1e3 * np.ones((N, E)))))
            elif mname == ET_CRC:
                r = np.zeros((ctx.T, N, E))
                fec = getattr(ctx, "fec", None)
                if fec is not None:
                    c, port, te, crc = fec
                    r[ctx.idx(te) :, c, port] = crc
                    ctx.ev(ET_CRC, te, c, port, max(1.0, crc * 5))
                add(
                    mname,
                    ports,
                    np.floor(integ(r, np.zeros((N, E)))) + _cum_events(ctx, ET_CRC, t, E),
                )
            elif mname in (ET_TX_PAUSE, ET_RX_PAUSE):
                r = np.repeat((200 * gw * (rng.random((1, N)) < 0.4))[:, :, None], E, axis=2)
                add(mname, ports, np.floor(integ(r, uptime0[:, None] * 50 * np.ones((N, E)))))
            elif mname in (ENA_BW_IN, ENA_BW_OUT, ENA_PPS):
                hist = rng.integers(0, 5000, (N, E))
                r = np.zeros((ctx.T, N, E))
                for a, z, n, rr in ctx.net_extra.get("front_tx", []):
                    if mname == ENA_BW_OUT and rr > 1e9:
                        sl = slice(ctx.idx(a), ctx.idx(z))
                        if n is None:
                            r[sl, :, 0] += 50
                        else:
                            r[sl, n, 0] += 50
                add(mname, ports, np.floor(integ(r, hist.astype(float))))
            else:
                hist = np.where(rng.random((N, E)) < 0.1, rng.integers(1, 6, (N, E)), 0)
                add(mname, ports, hist[None] + _cum_events(ctx, mname, t, E))
