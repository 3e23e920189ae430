"""Blind labelled corpus v6 for a Minder-style faulty-machine detector.

Deterministic generator (numpy + polars only) of raw Prometheus samples as dcgm-exporter and
node_exporter publish them, for ~120 training jobs on five sites that differ in hardware, RDMA
fabric and exporter versions. Written without reading the detector, the simulators or earlier
corpora; every modelling choice and its source is in tests/fixtures/metrics_v6/README.md.

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
    "xid95_uncontained_ecc",  # core (ECC/Xid hang), modelled from the Xid catalog
    "xid79_gpu_lost",  # core (GPU off the bus): the GPU's series vanish
    "ib_port_down",  # core (NIC dropout): port state down, link_downed +1
    "hw_thermal_clock_event",  # core (thermal slowdown): clock-event reasons, clocks, temp
    "nvlink5_fabric_errors",  # new: NVL72 tray with NVLink CRC/recovery storms
    "ib_xmit_wait_congestion",  # new: bad switch port, PortXmitWait climbs on one HCA port
    "roce_pfc_pause_storm",  # new: RoCE NIC sending PFC pause frames (priority 3)
    "nfs_client_hang",  # new: NFS client hang, D-state dataloaders
    "cpu_freq_capped",  # new: BMC/BIOS CPU power capping (PROCHOT), cpufreq at minimum
    "swap_thrash",  # new: host swapping (pswpin/pswpout), not a slow leak
    "hbm_thermal_throttle",  # new: HBM temperature / memory clock throttle
    "sm_clock_locked",  # new: SM clocks locked low mid-job (clocks-setting reason)
)
BENIGN_KINDS: tuple[str, ...] = (
    "steady",
    "checkpoint_burst",
    "nccl_restart",
    "rack_power_cap",  # new: whole racks power capped (SW power cap) for a while
    "preproc_role_nodes",  # new: a few nodes do CPU data preprocessing, GPUs idle by role
    "dp_shape_groups",  # new: two data-parallel groups with different batch shapes
    "ha_replica_interleave",  # new: two HA Prometheus replicas merged for a shard of nodes
    "scrape_timeout_partial",  # new: dcgm-exporter scrapes time out on a third of the nodes
    "early_finish",  # new: training ends inside the window, everyone idle after
    "temp_reading_glitch",  # new: dcgm-exporter 3.3.5 absurd GPU_TEMP readings (issue #312)
)

_HANG_KINDS = {"xid95_uncontained_ecc", "xid79_gpu_lost", "ib_port_down", "nfs_client_hang"}
_SLOW_KINDS = set(FAULT_KINDS) - _HANG_KINDS

# ----------------------------------------------------------------------------------------------
# Metric catalogue (names and types as the exporters publish them)
# ----------------------------------------------------------------------------------------------

D = "DCGM_FI_DEV_"
_DCGM_BASE = (
    D + "SM_CLOCK",
    D + "MEM_CLOCK",
    D + "MEMORY_TEMP",
    D + "GPU_TEMP",
    D + "POWER_USAGE",
    D + "TOTAL_ENERGY_CONSUMPTION",
)
_DCGM_TAIL = (
    D + "PCIE_REPLAY_COUNTER",
    D + "GPU_UTIL",
    D + "MEM_COPY_UTIL",
    D + "ENC_UTIL",
    D + "DEC_UTIL",
    D + "XID_ERRORS",
    D + "FB_FREE",
    D + "FB_USED",
)
_REMAP = (
    D + "NVLINK_BANDWIDTH_TOTAL",
    D + "UNCORRECTABLE_REMAPPED_ROWS",
    D + "CORRECTABLE_REMAPPED_ROWS",
    D + "ROW_REMAP_FAILURE",
)
_PROF = (
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
    "DCGM_FI_PROF_DRAM_ACTIVE",
    "DCGM_FI_PROF_PCIE_TX_BYTES",
    "DCGM_FI_PROF_PCIE_RX_BYTES",
)
_THROUGHPUT = (D + "PCIE_TX_THROUGHPUT", D + "PCIE_RX_THROUGHPUT")

# default-counters.csv at each tag (VGPU_LICENSE_STATUS is listed but blank on bare metal, so
# dcgm-exporter skips it; DRIVER_VERSION is a label).
DCGM_FIELDS = {
    "2.4.7-2.6.11": _DCGM_BASE + _THROUGHPUT + _DCGM_TAIL + _REMAP,
    "3.3.5-3.4.1": _DCGM_BASE + _THROUGHPUT + _DCGM_TAIL + _REMAP,
    "4.2.3-4.1.3": _DCGM_BASE + _DCGM_TAIL + _REMAP + _PROF,
    "4.4.1-4.6.0": _DCGM_BASE + _DCGM_TAIL + (D + "FB_RESERVED",) + _REMAP + _PROF,
    # the GB200 site's own CSV: 4.5.2-4.8.1 defaults minus ENC/DEC/MEM_COPY/FB_RESERVED, plus
    # commented-out fields it enabled (clock-event reasons, violations, NVLink errors, ECC).
    "4.5.2-4.8.1+site": (
        *(
            f
            for f in _DCGM_BASE + _DCGM_TAIL + _REMAP + _PROF
            if f not in (D + "ENC_UTIL", D + "DEC_UTIL", D + "MEM_COPY_UTIL")
        ),
        D + "CLOCKS_EVENT_REASONS",
        D + "POWER_VIOLATION",
        D + "THERMAL_VIOLATION",
        D + "NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
        D + "NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
        D + "ECC_DBE_VOL_TOTAL",
    ),
}

_DCGM_COUNTERS = {
    D + "TOTAL_ENERGY_CONSUMPTION",
    D + "PCIE_REPLAY_COUNTER",
    D + "NVLINK_BANDWIDTH_TOTAL",
    D + "UNCORRECTABLE_REMAPPED_ROWS",
    D + "CORRECTABLE_REMAPPED_ROWS",
    D + "PCIE_TX_THROUGHPUT",
    D + "PCIE_RX_THROUGHPUT",
    D + "POWER_VIOLATION",
    D + "THERMAL_VIOLATION",
    D + "NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
    D + "NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
    D + "ECC_DBE_VOL_TOTAL",
}
# typed "counter" in dcgm-exporter's CSVs, but the value is an instantaneous rate
RATE_VALUED_COUNTERS = frozenset(
    {D + "NVLINK_BANDWIDTH_TOTAL", D + "PCIE_TX_THROUGHPUT", D + "PCIE_RX_THROUGHPUT"}
)

IB = "node_infiniband_"
_IB_COUNTERS = (
    IB + "port_data_received_bytes_total",
    IB + "port_data_transmitted_bytes_total",
    IB + "port_transmit_wait_total",
    IB + "link_downed_total",
    IB + "symbol_error_total",
    IB + "port_errors_received_total",
)
_IB_GAUGES = (IB + "state_id", IB + "physical_state_id", IB + "rate_bytes_per_second")
_NET_COUNTERS = (
    "node_network_receive_bytes_total",
    "node_network_transmit_bytes_total",
    "node_network_carrier_changes_total",
    "node_network_receive_errs_total",
)
_VMSTAT = (
    "node_vmstat_pswpin",
    "node_vmstat_pswpout",
    "node_vmstat_pgmajfault",
    "node_vmstat_oom_kill",
)
_PRESSURE = (
    "node_pressure_cpu_waiting_seconds_total",
    "node_pressure_io_waiting_seconds_total",
    "node_pressure_io_stalled_seconds_total",
    "node_pressure_memory_waiting_seconds_total",
    "node_pressure_memory_stalled_seconds_total",
)
_DISK = (
    "node_disk_read_bytes_total",
    "node_disk_written_bytes_total",
    "node_disk_io_time_seconds_total",
)
_NFS = ("node_nfs_rpcs_total", "node_nfs_rpc_retransmissions_total")
# ethtool collector: mlx5 per-priority stats, rx_/tx_ renamed received_/transmitted_, untyped
_ETHTOOL = (
    "node_ethtool_transmitted_prio3_pause",
    "node_ethtool_received_prio3_pause",
    "node_ethtool_transmitted_prio3_pause_duration",
    "node_ethtool_transmitted_pause_storm_warning_events",
)

COUNTER_METRICS = frozenset(
    _DCGM_COUNTERS
    | set(_IB_COUNTERS)
    | set(_NET_COUNTERS)
    | set(_PRESSURE)
    | set(_DISK)
    | set(_NFS)
    # untyped in node_exporter's exposition but cumulative kernel counters
    | set(_VMSTAT)
    | set(_ETHTOOL)
    | {"node_cpu_seconds_total"}
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
    gpus: int
    ib: tuple[str, ...]  # IB HCAs ("mlx5_N"), port 1 each; empty on the RoCE site
    eth: tuple[str, ...]  # physical netdevs node_exporter reports
    roce: tuple[str, ...]  # RoCE netdevs (subset of eth) with ethtool pause stats
    dcgm: str
    node_exporter: str
    collectors: frozenset
    dcgm_collect: float  # DCGM_EXPORTER_INTERVAL (s)
    tdp: float
    idle_w: float
    sm_max: float
    mem_clock: float
    fb_mib: float
    ib_rate: float  # bytes/s as node_exporter reports rate_bytes_per_second
    ncpu: int
    mem_gib: float
    swap_gib: float
    rack: int  # nodes per rack / power domain
    nvlink: bool
    x86: bool
    prefix: str


_COMMON = frozenset({"cpu", "loadavg", "meminfo", "netdev", "diskstats", "vmstat", "stat"})
SITES: dict[str, Site] = {
    s.name: s
    for s in (
        Site(
            "nvl",
            "GB200 NVL72 (4x B200 per compute tray)",
            4,
            ("mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"),
            ("enP6p3s0f0np0",),
            (),
            "4.5.2-4.8.1+site",
            "1.9.1",
            _COMMON | {"infiniband", "pressure", "cpufreq"},
            10.0,
            1200.0,
            160.0,
            1965.0,
            3996.0,
            189_471.0,
            50e9,
            144,
            960.0,
            0.0,
            18,
            True,
            False,
            "gbr",
        ),
        Site(
            "b200",
            "DGX B200 (8x B200 SXM)",
            8,
            tuple(f"mlx5_{i}" for i in range(8)),
            ("eno1", "enp170s0f0np0"),
            (),
            "4.2.3-4.1.3",
            "1.8.2",
            _COMMON | {"infiniband", "pressure", "cpufreq", "nfs"},
            30.0,
            1000.0,
            140.0,
            1965.0,
            3996.0,
            183_359.0,
            50e9,
            224,
            2048.0,
            0.0,
            4,
            True,
            True,
            "dgxb",
        ),
        Site(
            "h200r",
            "HGX H200 141GB, RoCE (8x 400GbE SuperNIC)",
            8,
            (),
            ("ens10f0np0", *(f"ens{20 + i}np0" for i in range(8))),
            tuple(f"ens{20 + i}np0" for i in range(8)),
            "4.4.1-4.6.0",
            "1.10.2",
            _COMMON | {"ethtool", "pressure", "cpufreq", "nfs"},
            30.0,
            700.0,
            90.0,
            1980.0,
            3201.0,
            143_771.0,
            0.0,
            192,
            2048.0,
            0.0,
            4,
            True,
            True,
            "h2r",
        ),
        Site(
            "a100p",
            "A100-PCIE-40GB (4 per node, no NVLink bridge)",
            4,
            ("mlx5_0",),
            ("eno1np0",),
            (),
            "2.4.7-2.6.11",
            "1.3.1",
            _COMMON | {"infiniband", "nfs"},
            30.0,
            250.0,
            35.0,
            1410.0,
            1215.0,
            40_960.0,
            25e9,
            64,
            512.0,
            16.0,
            8,
            False,
            True,
            "a1p",
        ),
        Site(
            "h200i",
            "HGX H200 141GB, 4x NDR IB (2 GPUs per HCA)",
            8,
            ("mlx5_0", "mlx5_3", "mlx5_4", "mlx5_7"),
            ("eno8303", "ens6f0np0"),
            (),
            "3.3.5-3.4.1",
            "1.7.0",
            _COMMON | {"infiniband", "pressure", "cpufreq", "nfs"},
            30.0,
            700.0,
            90.0,
            1980.0,
            3201.0,
            143_771.0,
            50e9,
            128,
            2048.0,
            8.0,
            4,
            True,
            True,
            "hgx",
        ),
    )
}

_KIND_SITES = {
    "xid95_uncontained_ecc": ("nvl", "b200", "h200i", "h200r"),
    "xid79_gpu_lost": ("nvl", "b200", "h200r", "a100p", "h200i"),
    "ib_port_down": ("nvl", "b200", "a100p", "h200i"),
    "hw_thermal_clock_event": ("nvl", "b200", "h200r", "a100p", "h200i"),
    "nvlink5_fabric_errors": ("nvl",),
    "ib_xmit_wait_congestion": ("nvl", "b200", "a100p", "h200i"),
    "roce_pfc_pause_storm": ("h200r",),
    "nfs_client_hang": ("a100p", "h200i", "h200r", "b200"),
    "cpu_freq_capped": ("b200", "h200r", "h200i"),
    "swap_thrash": ("a100p", "h200i"),
    "hbm_thermal_throttle": ("nvl", "b200", "h200r", "h200i"),
    "sm_clock_locked": ("nvl", "b200", "h200r", "a100p", "h200i"),
    "temp_reading_glitch": ("h200i",),
    "rack_power_cap": ("nvl", "b200", "h200r", "h200i"),
    "scrape_timeout_partial": ("h200r", "b200", "nvl"),
}
_KIND_COUNTS = {
    "xid95_uncontained_ecc": 6, "xid79_gpu_lost": 5, "ib_port_down": 5,
    "hw_thermal_clock_event": 5, "nvlink5_fabric_errors": 5, "ib_xmit_wait_congestion": 5,
    "roce_pfc_pause_storm": 5, "nfs_client_hang": 5, "cpu_freq_capped": 5, "swap_thrash": 5,
    "hbm_thermal_throttle": 5, "sm_clock_locked": 5,
    "steady": 8, "checkpoint_burst": 6, "nccl_restart": 6, "rack_power_cap": 6,
    "preproc_role_nodes": 6, "dp_shape_groups": 6, "ha_replica_interleave": 5,
    "scrape_timeout_partial": 6, "early_finish": 6, "temp_reading_glitch": 5,
}  # fmt: skip
_TWO_CULPRIT = {
    "nfs_client_hang",
    "ib_xmit_wait_congestion",
    "hbm_thermal_throttle",
    "sm_clock_locked",
}

ROW_CAP = 5_300_000


def _node_series(site: Site) -> int:
    """Node-exporter series per node."""
    n = 8 + 3 + 1  # cpu modes, load1/procs_blocked/procs_running, MemAvailable
    n += len(site.eth) * 5
    n += len(site.ib) * (len(_IB_COUNTERS) + len(_IB_GAUGES))
    n += len(_DISK) + len(_VMSTAT)
    n += len(_PRESSURE) if "pressure" in site.collectors else 0
    n += len(_NFS) if "nfs" in site.collectors else 0
    n += 1 if "cpufreq" in site.collectors else 0
    n += 1 if site.swap_gib > 0 else 0
    n += len(site.roce) * len(_ETHTOOL) if "ethtool" in site.collectors else 0
    return n


def _dcgm_series(site: Site) -> int:
    f = DCGM_FIELDS[site.dcgm]
    if not site.nvlink:
        f = tuple(x for x in f if x != D + "NVLINK_BANDWIDTH_TOTAL")
    return len(f) * site.gpus


def _estimate_rows(site: Site, n: int, minutes: float, di: float, ni: float) -> float:
    return n * minutes * 60 * (_dcgm_series(site) / di + _node_series(site) / ni)


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


_EPOCH = datetime(2026, 9, 1, tzinfo=UTC)
_SIZES = (4, 6, 8, 8, 12, 16, 24, 32, 32, 32, 48, 48, 64, 64, 96, 128, 192)


def jobs(seed: int = 0) -> list[Job]:
    rng = np.random.default_rng([seed, 6])
    plan = [k for k in FAULT_KINDS + BENIGN_KINDS for _ in range(_KIND_COUNTS[k])]
    order = rng.permutation(len(plan))
    plan = [plan[i] for i in order]
    # large jobs: which plan slots get >= 256 nodes
    big_slots = {}
    bigs = (("nvl", 1024), ("nvl", 1024), ("b200", 512), ("nvl", 576),
            ("h200r", 256), ("b200", 256), ("h200i", 384), ("nvl", 288))  # fmt: skip
    for want_site, size in bigs:
        for i, k in enumerate(plan):
            if i in big_slots:
                continue
            sites = _KIND_SITES.get(k, tuple(SITES))
            if want_site in sites and k not in ("temp_reading_glitch",):
                big_slots[i] = (want_site, size)
                break
    out: list[Job] = []
    t_cursor = _EPOCH
    counters: dict[str, int] = {}
    for i, kind in enumerate(plan):
        if i in big_slots:
            site_name, n = big_slots[i]
        else:
            sites = _KIND_SITES.get(kind, tuple(SITES))
            site_name = sites[int(rng.integers(len(sites)))]
            n = int(_SIZES[int(rng.integers(len(_SIZES)))])
        site = SITES[site_name]
        if site.name == "nvl":  # whole compute trays of 18-tray racks, at least 4
            n = max(4, n)
        minutes = float(rng.choice([30, 40, 45, 60, 75, 90, 105, 120]))
        if kind in ("nccl_restart", "early_finish", "checkpoint_burst") or kind in _HANG_KINDS:
            minutes = max(minutes, 60.0)
        if n <= 16:
            di = float(rng.choice([10.0, 15.0, 15.0, 30.0]))
            ni = float(rng.choice([10.0, 15.0, 30.0]))
        elif n <= 64:
            di, ni = float(rng.choice([15.0, 30.0])), float(rng.choice([15.0, 30.0]))
        elif n <= 192:
            di, ni = 30.0, float(rng.choice([30.0, 60.0]))
        else:
            di, ni = 60.0, 60.0
        cap = ROW_CAP / (1.6 if kind == "ha_replica_interleave" else 1.0)
        while _estimate_rows(site, n, minutes, di, ni) > cap and minutes > 30:
            minutes -= 5
        while _estimate_rows(site, n, minutes, di, ni) > cap and (di < 60 or ni < 60):
            di, ni = min(60.0, di * 2), min(60.0, ni * 2)
        dur = minutes * 60.0
        start = t_cursor + timedelta(seconds=int(rng.integers(600, 7200)))
        t_cursor = start
        end = start + timedelta(seconds=dur)
        base = int(rng.integers(0, 4000))
        nodes = [_hostname(site, base + j) for j in range(n)]
        warm_end = float(rng.uniform(150, 480))
        spec: dict = {"seed": int(rng.integers(2**31)), "warm_end": warm_end, "base": base}
        culprits: dict[str, datetime] = {}
        if kind in FAULT_KINDS:
            k2 = 2 if (kind in _TWO_CULPRIT and n >= 8 and rng.random() < 0.45) else 1
            idx = rng.choice(n, size=k2, replace=False)
            lo, hi = warm_end + 180.0, dur - 600.0
            if kind in _HANG_KINDS:
                hi = dur - 780.0
            onsets = []
            for j, node_i in enumerate(idx):
                on = (
                    float(rng.uniform(lo, lo + 0.55 * (hi - lo)))
                    if j == 0
                    else float(rng.uniform(onsets[0], hi))
                )
                on = round(on)
                onsets.append(on)
                culprits[nodes[int(node_i)]] = start + timedelta(seconds=on)
            spec["culprit_idx"] = [int(x) for x in idx]
            spec["onsets"] = onsets
        # an admin clears one node's IB port counters (perfquery -R style) in some jobs
        if site.ib and rng.random() < 0.15:
            cands = [x for x in range(n) if x not in spec.get("culprit_idx", [])]
            spec["ib_reset"] = (int(rng.choice(cands)), float(rng.uniform(warm_end, dur - 300)))
        if kind == "ha_replica_interleave":
            spec["ha_shard"] = sorted(
                int(x)
                for x in rng.choice(n, size=max(1, int(n * rng.uniform(0.3, 0.6))), replace=False)
            )
            spec["ha_offset"] = float(rng.uniform(0.2, 0.8))
        counters[site.name] = counters.get(site.name, 0) + 1
        name = f"v6-{i:03d}-{site.name}-{kind}"
        out.append(Job(name, kind, nodes, start, end, culprits, di, ni, site.name, spec))
    return out


def _hostname(site: Site, i: int) -> str:
    if site.name == "nvl":
        return f"gbr{i // 18:03d}-t{i % 18 + 1:02d}"
    return f"{site.prefix}{i:04d}"


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


class _Rows:
    """Collects flattened samples as integer codes; builds the long table once."""

    def __init__(self, nodes: list[str]):
        self.nodes = nodes
        self.metrics: list[str] = []
        self.devices: list[str] = []
        self.parts: list[tuple] = []

    def _code(self, lst: list[str], s: str) -> int:
        try:
            return lst.index(s)
        except ValueError:
            lst.append(s)
            return len(lst) - 1

    def add(self, metric: str, device: str, t_ms: np.ndarray, vals: np.ndarray, mask: np.ndarray):
        """t_ms, vals, mask: (T, N) arrays for one device."""
        if not mask.any():
            return
        tt = t_ms[mask]
        nn = np.broadcast_to(np.arange(t_ms.shape[1], dtype=np.int32), t_ms.shape)[mask]
        m = self._code(self.metrics, metric)
        d = self._code(self.devices, device)
        self.parts.append((tt, nn, m, d, np.asarray(vals, dtype=np.float64)[mask]))

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
        sizes = [len(p[0]) for p in self.parts]
        t = np.concatenate([p[0] for p in self.parts])
        n = np.concatenate([p[1] for p in self.parts])
        m = np.repeat(np.array([p[2] for p in self.parts], dtype=np.int32), sizes)
        d = np.repeat(np.array([p[3] for p in self.parts], dtype=np.int32), sizes)
        v = np.concatenate([p[4] for p in self.parts])
        self.parts = []
        return pl.DataFrame(
            {
                "time": pl.Series(t, dtype=pl.Int64).cast(pl.Datetime("ms", "UTC")),
                "node": pl.Series(self.nodes, dtype=pl.String).gather(n),
                "metric": pl.Series(self.metrics, dtype=pl.String).gather(m),
                "device": pl.Series(self.devices, dtype=pl.String).gather(d),
                "value": v,
            }
        )


def _grid(rng, n: int, dur: float, step: float) -> tuple[np.ndarray, np.ndarray]:
    """Scrape times (T, N) in seconds from the window start; one phase per target, jitter."""
    phase = rng.uniform(0, step, n)
    k = int(dur // step)
    t = phase[None, :] + step * np.arange(k)[:, None]
    t = t + rng.normal(0, min(0.25, 0.01 * step), t.shape)
    t = np.clip(t, 0, dur - 1e-3)
    return np.round(t, 3), phase


def _cum(rate: np.ndarray, t: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Counter from a per-sample rate (T, N[, ...]) and sample times (T, N)."""
    dt = np.diff(t, axis=0, prepend=t[:1] - (t[1:2] - t[:1] if len(t) > 1 else 1.0))
    while dt.ndim < rate.ndim:
        dt = dt[..., None]
    return start + np.cumsum(rate * dt, axis=0)


class _Timeline:
    """Job-level and node-level activity as functions of time (seconds from window start)."""

    def __init__(self, job: Job, site: Site, rng):
        self.job, self.site = job, site
        n = len(job.nodes)
        self.n = n
        self.dur = job.minutes * 60.0
        sp = job.spec
        self.warm_end = sp["warm_end"]
        self.t_start = rng.uniform(5, 60, n)  # processes start per node
        self.kind = job.kind
        self.cidx = sp.get("culprit_idx", [])
        self.onsets = sp.get("onsets", [])
        self.nominal_tensor = rng.uniform(0.32, 0.55)
        self.comm_level = rng.uniform(0.25, 0.6)
        self.node_speed = rng.normal(1.0, 0.012, n)  # silicon / cooling spread (benign)
        # checkpoints: every 15-30 min in ~40% of jobs, always in checkpoint_burst
        self.ckpts: list[tuple[float, float]] = []
        if job.kind == "checkpoint_burst" or rng.random() < 0.4:
            every = (
                rng.uniform(900, 1800) if job.kind != "checkpoint_burst" else rng.uniform(600, 900)
            )
            length = (
                rng.uniform(40, 100) if job.kind != "checkpoint_burst" else rng.uniform(90, 200)
            )
            t = self.warm_end + every
            while t + length < self.dur:
                self.ckpts.append((t, t + length))
                t += every
        self.train_end = self.dur + 1
        self.hang: tuple[float, float] | None = None
        self.restart: tuple[float, float, float] | None = None
        self.slow_from = None
        self.slow = 1.0
        if job.kind in _HANG_KINDS:
            timeout = 600.0 if rng.random() < 0.75 else 1800.0  # PyTorch NCCL default / raised
            h0 = self.onsets[0] + rng.uniform(5, 40)
            self.hang = (h0, min(h0 + timeout, self.dur + 1))
            self.train_end = self.hang[1]
        elif job.kind in _SLOW_KINDS:
            self.slow_from = min(self.onsets) + rng.uniform(0, 30)
            self.slow = {
                "swap_thrash": rng.uniform(0.35, 0.6),
                "cpu_freq_capped": rng.uniform(0.55, 0.8),
                "nvlink5_fabric_errors": rng.uniform(0.5, 0.8),
                "roce_pfc_pause_storm": rng.uniform(0.4, 0.75),
                "ib_xmit_wait_congestion": rng.uniform(0.55, 0.8),
            }.get(job.kind, rng.uniform(0.6, 0.85))
        if job.kind == "nccl_restart":
            c0 = rng.uniform(self.warm_end + 600, self.dur * 0.6)
            c1 = c0 + rng.uniform(150, 420)
            self.restart = (c0, c1, c1 + rng.uniform(150, 300))
        if job.kind == "early_finish":
            self.train_end = rng.uniform(0.55, 0.8) * self.dur
        # rack power cap: whole racks, >= 25% of the nodes
        self.capped = np.zeros(n, bool)
        self.cap_win = (0.0, 0.0)
        if job.kind == "rack_power_cap":
            racks = np.arange(n) // site.rack
            nr = racks.max() + 1
            k = max(1, int(np.ceil(0.25 * nr))) if nr > 1 else 1
            pick = rng.choice(
                nr, size=min(nr, int(rng.integers(k, max(k, nr // 2) + 1))), replace=False
            )
            self.capped = np.isin(racks, pick)
            c0 = rng.uniform(self.warm_end + 120, self.dur * 0.5)
            self.cap_win = (c0, min(self.dur + 1, c0 + rng.uniform(900, 2400)))
        self.role = np.zeros(n, bool)
        if job.kind == "preproc_role_nodes":
            k = 1 if n < 16 else int(rng.integers(1, 4))
            self.role[rng.choice(n, size=k, replace=False)] = True
        self.group = np.zeros(n, bool)
        if job.kind == "dp_shape_groups":
            self.group[: n // 2] = True
            self.group_period = rng.uniform(300, 700)
            self.group_gap = rng.uniform(0.08, 0.2)

    def state(self, ts: np.ndarray) -> dict[str, np.ndarray]:
        alive = (ts >= self.t_start[None, :]) & (ts < self.train_end)
        loading = alive & (ts < self.warm_end)
        hang = np.zeros_like(alive)
        if self.hang:
            hang = alive & (ts >= self.hang[0])
        if self.restart:
            c0, c1, c2 = self.restart
            alive &= ~((ts >= c0) & (ts < c1))
            loading |= alive & (ts >= c1) & (ts < c2)
        ck = np.zeros_like(alive)
        for a, b in self.ckpts:
            ck |= (ts >= a) & (ts < b)
        ck &= alive & ~loading & ~hang
        train = alive & ~loading & ~hang & ~ck
        pace = np.ones_like(ts)
        if self.slow_from is not None:
            pace = np.where(ts >= self.slow_from, self.slow, 1.0)
        capping = np.zeros_like(alive)
        if self.kind == "rack_power_cap":
            capping = (ts >= self.cap_win[0]) & (ts < self.cap_win[1]) & self.capped[None, :]
            pace = np.where((ts >= self.cap_win[0]) & (ts < self.cap_win[1]), pace * 0.82, pace)
        # load ramp during warm-up
        ramp = np.clip(
            (ts - self.t_start[None, :]) / np.maximum(self.warm_end - self.t_start, 1)[None, :],
            0,
            1,
        )
        util = np.where(train, 0.97, 0.0) + np.where(loading, 0.15 + 0.5 * ramp, 0.0)
        util = util + np.where(ck, 0.12, 0.0) + np.where(hang, 1.0, 0.0)
        tensor = np.where(train, self.nominal_tensor * pace * self.node_speed[None, :], 0.0)
        tensor = tensor + np.where(loading, 0.05 * ramp, 0.0)
        comm = np.where(train, self.comm_level * pace, 0.0) + np.where(loading, 0.02, 0.0)
        if self.kind == "dp_shape_groups":
            flip = (np.floor(ts / self.group_period) % 2).astype(bool)
            lighter = np.where(flip, self.group[None, :], ~self.group[None, :])
            tensor = np.where(train & lighter, tensor * (1 - self.group_gap), tensor)
            util = np.where(train & lighter, util - 0.5 * self.group_gap, util)
        cpu = np.where(alive, 0.18, 0.01) + np.where(loading, 0.2 * (1 - ramp), 0.0)
        disk_w = np.where(ck, 2.5e9, 0.0) + np.where(train, 2e6, 0.0)
        disk_r = np.where(loading, 3e9 * (1 - ramp) + 2e8, 0.0) + np.where(train, 4e7, 0.0)
        fe = (
            np.where(loading, 1.5e9 * (1 - ramp), 0.0)
            + np.where(train, 5e7, 2e5)
            + np.where(ck, 4e9, 0.0)
        )
        fb = np.where(alive, 0.62 + 0.28 * np.where(loading, ramp, 1.0), 0.004)
        if self.role.any():
            r = self.role[None, :]
            util = np.where(r, np.where(alive, 0.0, 0.0), util)
            tensor = np.where(r, 0.0, tensor)
            comm = np.where(r, 0.0, comm)
            fb = np.where(r, 0.004, fb)
            cpu = np.where(r & alive, 0.85, cpu)
            fe = np.where(r & alive, 2.2e9, fe)
        return {
            "alive": alive, "loading": loading, "train": train, "hang": hang, "ckpt": ck,
            "util": np.clip(util, 0, 1), "tensor": tensor, "comm": comm, "cpu": cpu,
            "disk_w": disk_w, "disk_r": disk_r, "fe": fe, "fb": fb, "pace": pace,
            "capping": capping, "ramp": ramp,
        }  # fmt: skip

    def after(self, ts: np.ndarray, which: int = -1) -> np.ndarray:
        """(T, N) mask: culprit node after its onset."""
        m = np.zeros(ts.shape, bool)
        for j, (ci, on) in enumerate(zip(self.cidx, self.onsets, strict=True)):
            if which in (-1, j):
                m[:, ci] = ts[:, ci] >= on
        return m


def _render(job: Job) -> pl.DataFrame:
    site = SITES[job.site]
    rng = np.random.default_rng(job.spec["seed"])
    tl = _Timeline(job, site, rng)
    rows = _Rows(job.nodes)
    t0_ms = int(job.start.timestamp() * 1000)
    _render_dcgm(job, site, tl, rng, rows, t0_ms)
    _render_node(job, site, tl, rng, rows, t0_ms)
    df = rows.frame()
    if "ha_shard" in job.spec:
        df = _ha_interleave(df, job)
    return df


def _ha_interleave(df: pl.DataFrame, job: Job) -> pl.DataFrame:
    """Two HA Prometheus replicas merged without dedup for a shard of the nodes: the second
    replica scraped the same targets `offset` of an interval later. Counters read in between
    lie between the first replica's neighbours; gauges read the exporter's cached values."""
    shard = [job.nodes[i] for i in job.spec["ha_shard"]]
    off = job.spec["ha_offset"]
    key = ["node", "metric", "device"]
    sub = df.filter(pl.col("node").is_in(shard)).sort([*key, "time"])
    nxt_t = pl.col("time").shift(-1).over(key)
    nxt_v = pl.col("value").shift(-1).over(key)
    ctr = pl.col("metric").is_in(list(COUNTER_METRICS - RATE_VALUED_COUNTERS))
    dt = (nxt_t - pl.col("time")).dt.total_milliseconds()
    extra = sub.with_columns(nt=nxt_t, nv=nxt_v, dtm=dt).filter(
        pl.col("nt").is_not_null() & (pl.col("dtm") < 90_000)
    )
    extra = extra.select(
        (
            pl.col("time") + pl.duration(milliseconds=(pl.col("dtm") * off).round(0).cast(pl.Int64))
        ).alias("time"),
        "node",
        "metric",
        "device",
        pl.when(ctr & (pl.col("nv") >= pl.col("value")))
        .then(
            pl.when(pl.col("value") == pl.col("value").floor())
            .then((pl.col("value") + (pl.col("nv") - pl.col("value")) * off).floor())
            .otherwise(pl.col("value") + (pl.col("nv") - pl.col("value")) * off)
        )
        .otherwise(pl.col("value"))
        .alias("value"),
    )
    return pl.concat([df, extra])


def _lost(rng, shape, p: float = 0.003) -> np.ndarray:
    """Keep-mask: whole scrapes of a target lost at random."""
    return rng.random(shape) >= p


def _render_dcgm(job: Job, site: Site, tl: _Timeline, rng, rows: _Rows, t0_ms: int):
    n, G = tl.n, site.gpus
    step = job.dcgm_interval
    t, _ = _grid(rng, n, tl.dur, step)
    _dcgm_pass(job, site, tl, rng, rows, t0_ms, t, step, G, n)


def _hold(t: np.ndarray, collect: float, step: float) -> np.ndarray:
    """dcgm-exporter samples DCGM every `collect` s; faster scrapes repeat the last collection."""
    if collect <= step:
        return t
    return np.floor(t / collect) * collect


def _dcgm_pass(job, site, tl, rng, rows, t0_ms, t, step, G, n):
    T = t.shape[0]
    te = _hold(t, site.dcgm_collect, step)
    st = tl.state(te)
    fields = DCGM_FIELDS[site.dcgm]
    cid = tl.cidx
    kind = job.kind
    shape = (T, n, G)
    # noise held across repeated collections (same DCGM collection -> same reading)
    held = site.dcgm_collect > step
    cidx = np.round(te / site.dcgm_collect).astype(np.int64) if held else None
    kc = int(cidx.max()) + 1 if held else 0

    def noise(scale):
        if not held:
            return rng.normal(0, scale, shape)
        z = rng.normal(0, scale, (kc, n, G))
        return z[cidx, np.arange(n)[None, :], :]

    util = np.repeat(st["util"][..., None], G, axis=2)
    tensor = np.repeat(st["tensor"][..., None], G, axis=2)
    comm = np.repeat(st["comm"][..., None], G, axis=2)
    hang = np.repeat(st["hang"][..., None], G, axis=2)
    alive = np.repeat(st["alive"][..., None], G, axis=2)
    fb = np.repeat(st["fb"][..., None], G, axis=2)
    gpu_off = rng.normal(0, 2.5, (1, n, G))  # cooling spread (benign)
    clk_off = rng.normal(0, 12, (1, n, G))
    pw_frac = np.where(alive, 0.2 + 1.3 * tensor + 0.1 * util, 0.0)
    pw_frac = np.where(hang, 0.33, pw_frac)
    sm = np.where(alive & (util > 0.05), site.sm_max - 25 * (pw_frac > 0.78) + clk_off, 0.0)
    sm = np.where(sm == 0, np.where(alive, site.sm_max * 0.9, 345.0), sm)
    memclk = np.full(shape, site.mem_clock)
    reason = np.where(util < 0.05, 0x1, 0).astype(np.int64)
    reason |= np.where(pw_frac > 0.82, 0x4, 0)
    therm_viol = np.zeros(shape)
    xid = np.zeros(shape)
    stale = rng.random((1, n, G)) < 0.03
    xid = np.where(stale, rng.choice([13.0, 31.0, 43.0, 45.0], (1, n, G)), xid) + 0 * xid
    dbe_add = np.zeros(shape)
    unc_add = np.zeros(shape)
    nvl_err_rate = np.zeros(shape)
    vanish = np.zeros(shape, bool)
    memtemp_add = np.zeros(shape)
    temp_add = np.zeros(shape)
    nvl_factor = np.ones(shape)

    # power capping (benign, whole racks)
    cap = np.repeat(st["capping"][..., None], G, axis=2)
    pw_frac = np.where(cap, np.minimum(pw_frac, 0.68), pw_frac)
    sm = np.where(cap & (util > 0.05), sm * 0.83, sm)
    reason = np.where(cap & (util > 0.05), reason | 0x4, reason)

    # ---- faults on the culprit (per GPU) ----
    for j, ci in enumerate(cid):
        on = tl.onsets[j]
        a = t[:, ci] >= on  # (T,)
        jr = np.random.default_rng([job.spec["seed"], 7, j])
        g1 = int(jr.integers(G))
        if kind == "xid95_uncontained_ecc":
            xid[a, ci, g1] = 95.0
            dbe_add[a, ci, g1] = float(jr.integers(1, 4))
            unc_add[a, ci, g1] = 1.0
            util[a, ci, g1] = 0.0
            tensor[a, ci, g1] = 0.0
            pw_frac[a, ci, g1] = 0.05
            sm[a, ci, g1] = site.sm_max * 0.9
        elif kind == "xid79_gpu_lost":
            vanish[a, ci, g1] = True
        elif kind == "hw_thermal_clock_event":
            gs = jr.choice(G, size=int(jr.integers(1, G + 1)), replace=False)
            ramp = np.clip((t[:, ci] - on) / 120.0, 0, 1)[:, None]
            temp_add[:, ci, gs] += ramp * jr.uniform(14, 22)
            sm[:, ci, gs] = np.where(
                a[:, None] & (util[:, ci, gs] > 0.05),
                sm[:, ci, gs] * (1 - 0.38 * ramp),
                sm[:, ci, gs],
            )
            reason[:, ci, gs] |= np.where(a[:, None], 0x40 | 0x20 | 0x8, 0)
            therm_viol[:, ci, gs] = np.where(a[:, None], 0.9, 0.0)
            util[a, ci] = np.maximum(util[a, ci], 0.99)
            tensor[a, ci] = tl.nominal_tensor
        elif kind == "nvlink5_fabric_errors":
            nvl_err_rate[a, ci, :] = jr.uniform(30, 400)
            nvl_factor[a, ci, :] = jr.uniform(0.25, 0.55)
        elif kind == "hbm_thermal_throttle":
            gs = [g1] if jr.random() < 0.6 else list(jr.choice(G, 2, replace=False))
            ramp = np.clip((t[:, ci] - on) / 180.0, 0, 1)[:, None]
            memtemp_add[:, ci, gs] += ramp * jr.uniform(25, 32)
            memclk[:, ci, gs] = np.where(a[:, None], site.mem_clock * 0.62, memclk[:, ci, gs])
            reason[:, ci, gs] |= np.where(a[:, None], 0x40, 0)
            therm_viol[:, ci, gs] = np.where(a[:, None], 0.6, 0.0)
            tensor[a, ci] = tl.nominal_tensor * 0.9
        elif kind == "sm_clock_locked":
            lock = float(jr.choice([900.0, 1005.0, 1110.0]))
            sm[a, ci, :] = np.where(util[a, ci, :] > 0.05, lock, sm[a, ci, :])
            reason[a, ci, :] |= 0x2
            pw_frac[a, ci, :] *= 0.7
            tensor[a, ci] = tl.nominal_tensor
            util[a, ci] = np.maximum(util[a, ci], 0.99)
        elif kind in ("cpu_freq_capped", "swap_thrash", "nfs_client_hang"):
            # host-bound rank: its GPUs wait on the input pipeline
            f = {"cpu_freq_capped": 0.6, "swap_thrash": 0.35, "nfs_client_hang": 0.0}[kind]
            util[a, ci] = np.where(alive[a, ci], util[a, ci] * f, 0)
            tensor[a, ci] = tensor[a, ci] * f
            pw_frac[a, ci] = np.where(
                alive[a, ci], 0.2 + 1.3 * tensor[a, ci] + 0.1 * util[a, ci], 0
            )
    # slow culprit kinds: the culprit's GPUs are the busy ones, peers wait in collectives
    if kind in _SLOW_KINDS and tl.slow_from is not None:
        pass  # peers' tensor already scaled by pace in state()

    # clocks / temperatures / power
    power = site.idle_w + (site.tdp - site.idle_w) * np.clip(pw_frac, 0, 1) + noise(0.01 * site.tdp)
    power = np.where(alive | (util > 0), power, site.idle_w + rng.normal(0, 2, shape))
    gtemp = (
        30 + 45 * (power - site.idle_w) / (site.tdp - site.idle_w) + gpu_off + temp_add + noise(0.6)
    )
    mtemp = gtemp + 6 + 0.5 * gpu_off + memtemp_add + noise(0.4)
    if kind == "hw_thermal_clock_event":
        pass
    sm = np.round(np.clip(sm + noise(6) * (util > 0.05), 210, site.sm_max + 30))
    util_pct = np.round(np.clip(util * 100 + noise(1.2) * (util > 0.05), 0, 100))
    fb_used = np.round(fb * site.fb_mib * 0.97 + np.where(fb > 0.01, noise(40), 0))
    fb_used = np.clip(fb_used, 0, site.fb_mib * 0.99)
    fb_res = np.full(shape, 0.0075 * site.fb_mib)
    fb_free = site.fb_mib - fb_used - (fb_res if D + "FB_RESERVED" in fields else 0)
    energy = _cum(power * 1000.0, te, rng.uniform(1e9, 4e11, (1, n, G)))
    pcie_rate = np.where(alive, 1.5e9 * util + 2e8, 1e5) * np.exp(noise(0.15))
    nvl_rate = np.clip(
        comm
        * nvl_factor
        * (3.6e5 if site.name in ("nvl", "b200") else 1.8e5)
        * np.exp(noise(0.08)),
        0,
        None,
    )
    replay_hist = (
        np.where(rng.random((1, n, G)) < 0.08, rng.integers(1, 400, (1, n, G)), 0) + 0 * power
    )
    if kind == "temp_reading_glitch" or site.dcgm.startswith("3.3.5"):
        p = 0.004 if kind == "temp_reading_glitch" else 0.0004
        who = rng.random((1, n, 1)) < (0.15 if kind == "temp_reading_glitch" else 0.05)
        g = (rng.random(shape) < p) & who
        gtemp = np.where(g, rng.choice([345.0, 82505.0, 200000.0, 644245923.0], shape), gtemp)

    hist_remap = np.where(rng.random((1, n, G)) < 0.1, rng.integers(1, 6, (1, n, G)), 0) + 0 * power
    dram = tensor * 0.9 * (memclk / site.mem_clock) + noise(0.01) * (tensor > 0)
    dram = np.clip(dram, 0, 1)
    g3 = (1, n, G)
    pviol = np.floor(_cum(np.where(reason & 0x4, 0.6e9, 0.0), te, rng.uniform(1e12, 9e13, g3)))
    tviol = np.floor(_cum(therm_viol * 1e9, te, rng.uniform(0, 5e11, g3)))
    crc = np.floor(_cum(nvl_err_rate + 0.002, te, rng.integers(0, 50, g3).astype(float)))
    recov = np.floor(_cum(nvl_err_rate * 0.01, te, rng.integers(0, 3, g3).astype(float)))
    vals: dict[str, np.ndarray] = {
        D + "SM_CLOCK": sm,
        D + "MEM_CLOCK": np.where(alive | (util > 0), memclk, site.mem_clock),
        D + "MEMORY_TEMP": np.round(mtemp),
        D + "GPU_TEMP": np.where(gtemp > 1000, gtemp, np.round(gtemp)),
        D + "POWER_USAGE": np.round(power, 3),
        D + "TOTAL_ENERGY_CONSUMPTION": np.floor(energy),
        D + "PCIE_REPLAY_COUNTER": replay_hist,
        D + "GPU_UTIL": util_pct,
        D + "MEM_COPY_UTIL": np.round(np.clip(util_pct * 0.35 + noise(2) * (util > 0.05), 0, 100)),
        D + "ENC_UTIL": np.zeros(shape),
        D + "DEC_UTIL": np.zeros(shape),
        D + "XID_ERRORS": xid,
        D + "FB_FREE": fb_free,
        D + "FB_USED": fb_used,
        D + "FB_RESERVED": fb_res,
        D + "NVLINK_BANDWIDTH_TOTAL": np.round(nvl_rate),
        D + "UNCORRECTABLE_REMAPPED_ROWS": unc_add,
        D + "CORRECTABLE_REMAPPED_ROWS": hist_remap,
        D + "ROW_REMAP_FAILURE": np.zeros(shape),
        D + "PCIE_TX_THROUGHPUT": np.round(pcie_rate / 1024 * 0.4),
        D + "PCIE_RX_THROUGHPUT": np.round(pcie_rate / 1024),
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE": np.clip(util * 0.985 + noise(0.005) * (util > 0.05), 0, 1),
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": np.clip(tensor + noise(0.01) * (tensor > 0), 0, 1),
        "DCGM_FI_PROF_DRAM_ACTIVE": dram,
        "DCGM_FI_PROF_PCIE_TX_BYTES": np.round(pcie_rate * 0.4),
        "DCGM_FI_PROF_PCIE_RX_BYTES": np.round(pcie_rate),
        D + "CLOCKS_EVENT_REASONS": reason.astype(np.float64),
        D + "POWER_VIOLATION": pviol,
        D + "THERMAL_VIOLATION": tviol,
        D + "NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": crc,
        D + "NVLINK_RECOVERY_ERROR_COUNT_TOTAL": recov,
        D + "ECC_DBE_VOL_TOTAL": dbe_add,
    }  # fmt: skip
    # masks: lost scrapes of the target, vanished GPUs, scrape timeouts, HA shard
    keep = _lost(rng, (T, n))
    if job.kind == "scrape_timeout_partial":
        bad = rng.random(n) < rng.uniform(0.25, 0.45)
        w0 = rng.uniform(tl.warm_end, tl.dur * 0.6)
        w1 = w0 + rng.uniform(600, 1500)
        inwin = (t >= w0) & (t < w1) & bad[None, :]
        keep &= ~(inwin & (rng.random((T, n)) < rng.uniform(0.3, 0.7)))
    t_ms = t0_ms + np.round(t * 1000).astype(np.int64)
    for name in fields:
        if name == D + "NVLINK_BANDWIDTH_TOTAL" and not site.nvlink:
            continue
        v = vals[name]
        for g in range(G):
            m = keep & ~vanish[:, :, g]
            rows.add(name, str(g), t_ms, np.broadcast_to(v[:, :, g], (T, n)), m)


def _render_node(job: Job, site: Site, tl: _Timeline, rng, rows: _Rows, t0_ms: int):
    t, _ = _grid(rng, tl.n, tl.dur, job.node_interval)
    _node_pass(job, site, tl, rng, rows, t0_ms, t)


def _node_pass(job, site, tl, rng, rows, t0_ms, t):
    n = tl.n
    T = t.shape[0]
    st = tl.state(t)
    kind = job.kind
    alive = st["alive"]
    shape = (T, n)

    def noise(s):
        return rng.normal(0, s, shape)

    cpu_user = st["cpu"] + np.abs(noise(0.01))
    iowait = np.full(shape, 0.002)
    system = 0.03 + 0.2 * st["cpu"]
    blocked = rng.poisson(0.3, shape).astype(float)
    mem_avail = (
        site.mem_gib * 2**30 * (0.82 - 0.35 * alive - 0.05 * st["loading"]) * (1 + noise(0.003))
    )
    swap_free = np.full(shape, site.swap_gib * 2**30 * 0.97)
    pswp_rate = np.zeros(shape)
    majflt_rate = 2.0 + np.abs(noise(1.0))
    psi_mem = np.zeros(shape)
    psi_io = 0.002 + 0.01 * (st["ckpt"] | st["loading"])
    nfs_rate = np.where(alive, 300.0, 5.0) + 4000 * st["loading"]
    nfs_retrans = np.zeros(shape)
    freq = (
        np.where(alive, 2.9e9, 2.1e9) * (1 + noise(0.02))
        if site.x86
        else np.full(shape, 3.1e9) * (1 + noise(0.005))
    )
    rail = len(site.ib) or len(site.roce)
    comm_rate = np.repeat((st["comm"] * (site.ib_rate or 50e9))[..., None], max(rail, 1), axis=2)
    comm_rate *= np.exp(rng.normal(0, 0.03, comm_rate.shape))
    xmit_wait_rate = comm_rate / 50e9 * 2e5  # ticks/s, GUESS
    pause_tx = np.full(comm_rate.shape, 0.2)
    pause_rx = np.repeat((st["comm"] * 40.0)[..., None], max(rail, 1), axis=2) * np.exp(
        rng.normal(0, 0.2, comm_rate.shape)
    )
    storm = np.zeros(comm_rate.shape)
    port_state = np.full(comm_rate.shape, 4.0)
    phys_state = np.full(comm_rate.shape, 5.0)
    rate_g = np.full(comm_rate.shape, site.ib_rate)
    link_downed_add = np.zeros(comm_rate.shape)
    sym_rate = np.zeros(comm_rate.shape)
    frozen = np.zeros(comm_rate.shape, bool)

    if tl.role.any():
        cpu_user = np.where(tl.role[None, :] & alive, 0.88, cpu_user)
    for j, ci in enumerate(tl.cidx):
        on = tl.onsets[j]
        a = t[:, ci] >= on
        jr = np.random.default_rng([job.spec["seed"], 7, j])
        port = int(jr.integers(max(rail, 1)))
        if kind == "ib_port_down":
            # a few symbol errors just before, then the port goes down and stays down
            pre = (t[:, ci] >= on - 40) & ~a
            sym_rate[pre, ci, port] = 5.0
            port_state[a, ci, port] = 1.0
            phys_state[a, ci, port] = float(jr.choice([2.0, 3.0]))
            rate_g[a, ci, port] = 2.5e9 / 8 * 1  # GUESS: SDR 1x after link loss
            link_downed_add[a, ci, port] = 1.0
            frozen[a, ci, port] = True
        elif kind == "ib_xmit_wait_congestion":
            xmit_wait_rate[a, ci, port] = jr.uniform(1.2e6, 2.5e6)  # 32-bit: saturates late
            comm_rate[a, ci, port] *= 0.4
        elif kind == "roce_pfc_pause_storm":
            pause_tx[a, ci, port] = jr.uniform(2e4, 9e4)
            storm[a, ci, port] = 1 / 300.0
            comm_rate[a, ci, port] *= 0.3
        elif kind == "nfs_client_hang":
            k = jr.uniform(8, 24)
            blocked[a, ci] += k + rng.poisson(2, a.sum())
            iowait[a, ci] = 0.04
            cpu_user[a, ci] *= 0.3
            psi_io[a, ci] = 0.9
            nfs_rate[a, ci] = 0.0
            nfs_retrans[a, ci] = 1 / 60.0 * k  # GUESS: one retransmit per task per timeo
        elif kind == "cpu_freq_capped":
            freq[a, ci] = jr.uniform(0.8e9, 1.0e9) * (1 + noise(0.005)[a, ci])
            cpu_user[a, ci] = np.minimum(0.9, cpu_user[a, ci] * jr.uniform(2.2, 3.0))
        elif kind == "swap_thrash":
            pre = np.clip((t[:, ci] - (on - 240)) / 240, 0, 1)
            mem_avail[:, ci] = mem_avail[:, ci] * (1 - pre) + pre * site.mem_gib * 2**30 * 0.008
            swap_free[:, ci] = np.where(
                a,
                site.swap_gib * 2**30 * np.clip(0.97 - (t[:, ci] - on) / 1500, 0.05, 1),
                swap_free[:, ci],
            )
            pswp_rate[a, ci] = jr.uniform(3e3, 2e4)
            majflt_rate[a, ci] = jr.uniform(2e3, 1e4)
            psi_mem[a, ci] = jr.uniform(0.3, 0.7)
            system[a, ci] = 0.15
            iowait[a, ci] = 0.06
            blocked[a, ci] += 3
    cpu_user = np.clip(cpu_user, 0, 0.95)
    idle = np.clip(1 - cpu_user - system - iowait - 0.01, 0, 1)
    modes = {
        "user": cpu_user, "system": system, "iowait": iowait, "idle": idle,
        "irq": np.full(shape, 0.002), "softirq": 0.004 + 0.01 * st["comm"],
        "nice": np.zeros(shape), "steal": np.zeros(shape),
    }  # fmt: skip
    keep = _lost(rng, shape)
    t_ms = t0_ms + np.round(t * 1000).astype(np.int64)
    uptime = rng.uniform(3e5, 6e6, n)[None, :]
    for mode, frac in modes.items():
        rows.add(
            "node_cpu_seconds_total",
            mode,
            t_ms,
            _cum(frac * site.ncpu, t, frac[:1] * site.ncpu * uptime),
            keep,
        )
    running = np.round(
        np.where(alive, site.gpus * 1.5 + cpu_user * site.ncpu * 0.4, 1) + np.abs(noise(1))
    )
    rows.add(
        "node_load1", "", t_ms, np.round(np.maximum(0, running + blocked + noise(0.3)), 2), keep
    )
    rows.add("node_procs_blocked", "", t_ms, blocked, keep)
    rows.add("node_procs_running", "", t_ms, running, keep)
    rows.add("node_memory_MemAvailable_bytes", "", t_ms, np.round(mem_avail / 4096) * 4096, keep)
    if site.swap_gib > 0:
        rows.add("node_memory_SwapFree_bytes", "", t_ms, np.round(swap_free / 4096) * 4096, keep)
    vm = {
        "node_vmstat_pswpin": pswp_rate, "node_vmstat_pswpout": pswp_rate * 1.3,
        "node_vmstat_pgmajfault": majflt_rate, "node_vmstat_oom_kill": np.zeros(shape),
    }  # fmt: skip
    for name, r in vm.items():
        rows.add(
            name,
            "",
            t_ms,
            np.floor(
                _cum(r, t, np.floor(rng.uniform(0, 1e5, (1, n))) * (name != "node_vmstat_oom_kill"))
            ),
            keep,
        )
    if "pressure" in site.collectors:
        pr = {
            "node_pressure_cpu_waiting_seconds_total": 0.01 + 0.05 * cpu_user,
            "node_pressure_io_waiting_seconds_total": psi_io,
            "node_pressure_io_stalled_seconds_total": psi_io * 0.8,
            "node_pressure_memory_waiting_seconds_total": psi_mem,
            "node_pressure_memory_stalled_seconds_total": psi_mem * 0.6,
        }
        for name, r in pr.items():
            rows.add(name, "", t_ms, _cum(r, t, rng.uniform(10, 5e4, (1, n))), keep)
    # disks (local NVMe scratch)
    dw = st["disk_w"] * np.exp(noise(0.1))
    dr = st["disk_r"] * np.exp(noise(0.1))
    rows.add(
        "node_disk_read_bytes_total",
        "nvme0n1",
        t_ms,
        np.floor(_cum(dr, t, rng.uniform(1e11, 1e13, (1, n))) / 512) * 512,
        keep,
    )
    rows.add(
        "node_disk_written_bytes_total",
        "nvme0n1",
        t_ms,
        np.floor(_cum(dw, t, rng.uniform(1e11, 1e13, (1, n))) / 512) * 512,
        keep,
    )
    rows.add(
        "node_disk_io_time_seconds_total",
        "nvme0n1",
        t_ms,
        _cum(np.clip((dw + dr) / 3e9, 0.001, 1), t, rng.uniform(1e3, 1e5, (1, n))),
        keep,
    )
    if "nfs" in site.collectors:
        rows.add(
            "node_nfs_rpcs_total",
            "",
            t_ms,
            np.floor(_cum(nfs_rate, t, rng.uniform(1e6, 1e9, (1, n)))),
            keep,
        )
        hist = np.floor(rng.uniform(0, 300, (1, n)))
        rows.add(
            "node_nfs_rpc_retransmissions_total",
            "",
            t_ms,
            np.floor(_cum(nfs_retrans, t, hist)),
            keep,
        )
    if "cpufreq" in site.collectors:
        rows.add("node_cpu_scaling_frequency_hertz", "", t_ms, np.round(freq, -3), keep)
    # ethernet netdevs
    for dev in site.eth:
        is_roce = dev in site.roce
        if is_roce:
            r = comm_rate[:, :, site.roce.index(dev)]
            rx, tx = r * 1.02, r
        else:
            rx, tx = st["fe"] * 0.3 * np.exp(noise(0.1)), st["fe"] * np.exp(noise(0.1))
        rows.add(
            "node_network_receive_bytes_total",
            dev,
            t_ms,
            np.floor(_cum(rx, t, rng.uniform(1e12, 1e15, (1, n)))),
            keep,
        )
        rows.add(
            "node_network_transmit_bytes_total",
            dev,
            t_ms,
            np.floor(_cum(tx, t, rng.uniform(1e12, 1e15, (1, n)))),
            keep,
        )
        rows.add("node_network_up", dev, t_ms, np.ones(shape), keep)
        rows.add(
            "node_network_carrier_changes_total",
            dev,
            t_ms,
            np.broadcast_to(rng.integers(1, 9, (1, n)) * 2.0, shape),
            keep,
        )
        rows.add(
            "node_network_receive_errs_total",
            dev,
            t_ms,
            np.broadcast_to(
                np.where(rng.random((1, n)) < 0.05, rng.integers(1, 50, (1, n)), 0) * 1.0, shape
            ),
            keep,
        )
        if is_roce and "ethtool" in site.collectors:
            p = site.roce.index(dev)
            rows.add(
                "node_ethtool_transmitted_prio3_pause",
                dev,
                t_ms,
                np.floor(_cum(pause_tx[:, :, p], t, rng.uniform(0, 1e6, (1, n)))),
                keep,
            )
            rows.add(
                "node_ethtool_received_prio3_pause",
                dev,
                t_ms,
                np.floor(_cum(pause_rx[:, :, p], t, rng.uniform(1e5, 5e7, (1, n)))),
                keep,
            )
            rows.add(
                "node_ethtool_transmitted_prio3_pause_duration",
                dev,
                t_ms,
                np.floor(_cum(pause_tx[:, :, p] * 0.8, t, rng.uniform(0, 1e6, (1, n)))),
                keep,
            )
            rows.add(
                "node_ethtool_transmitted_pause_storm_warning_events",
                dev,
                t_ms,
                np.floor(_cum(storm[:, :, p], t, np.zeros((1, n)))),
                keep,
            )
    # InfiniBand HCAs, port 1
    reset_node, reset_t = job.spec.get("ib_reset") or (None, 0.0)
    for p, dev in enumerate(site.ib):
        lbl = f"{dev}:1"
        rate = np.where(frozen[:, :, p], 0.0, comm_rate[:, :, p])
        base = rng.uniform(1e13, 5e15, (1, n))
        rx_c = _cum(rate * 1.01, t, base)
        tx_c = _cum(rate, t, base * 0.98)
        # PortXmitWait is 32-bit and saturates; long-running nodes already sit at the top
        sat = rng.random((1, n)) < (0.35 if site.name in ("a100p", "h200i") else 0.0)
        for c in tl.cidx:
            sat[0, c] = False if kind == "ib_xmit_wait_congestion" else sat[0, c]
        xw = np.minimum(
            _cum(xmit_wait_rate[:, :, p], t, rng.uniform(1e6, 3e8, (1, n))), 4294967295.0
        )
        xw = np.where(sat, 4294967295.0, np.floor(xw))
        if reset_node is not None:
            r = t[:, reset_node] >= reset_t
            for arr in (rx_c, tx_c):
                arr[r, reset_node] -= arr[r, reset_node][0] if r.any() else 0
            xw[r, reset_node] = (
                np.floor(xw[r, reset_node] - xw[r, reset_node][0]) if r.any() else xw[r, reset_node]
            )
        rows.add(IB + "port_data_received_bytes_total", lbl, t_ms, np.floor(rx_c), keep)
        rows.add(IB + "port_data_transmitted_bytes_total", lbl, t_ms, np.floor(tx_c), keep)
        rows.add(IB + "port_transmit_wait_total", lbl, t_ms, xw, keep)
        hist_ld = np.where(rng.random((1, n)) < 0.1, rng.integers(1, 4, (1, n)), 0)
        rows.add(IB + "link_downed_total", lbl, t_ms, hist_ld + link_downed_add[:, :, p], keep)
        rows.add(
            IB + "symbol_error_total",
            lbl,
            t_ms,
            np.floor(
                _cum(
                    sym_rate[:, :, p],
                    t,
                    np.where(rng.random((1, n)) < 0.1, rng.integers(1, 200, (1, n)), 0).astype(
                        float
                    ),
                )
            ),
            keep,
        )
        rows.add(
            IB + "port_errors_received_total",
            lbl,
            t_ms,
            np.broadcast_to(np.where(rng.random((1, n)) < 0.05, 1.0, 0.0), shape),
            keep,
        )
        rows.add(IB + "state_id", lbl, t_ms, port_state[:, :, p], keep)
        rows.add(IB + "physical_state_id", lbl, t_ms, phys_state[:, :, p], keep)
        rows.add(IB + "rate_bytes_per_second", lbl, t_ms, rate_g[:, :, p], keep)
