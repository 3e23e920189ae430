"""The metrics the detector reads, named as dcgm-exporter and node_exporter ship them.

Per node, a GPU metric is aggregated over the node's GPUs by the function that lets *one* bad GPU
show: the lowest clock, power, utilisation and tensor duty, the highest temperature, the sum of
error counters.  ``lo``/``hi`` are the metric's physical range, used as the floor of the Min-Max
range (a steady job's tiny data range would otherwise turn a 2 °C hardware offset into a full-scale
outlier); ``None`` takes the range from the data alone.  ``counter`` metrics are turned into
per-second rates by the detector (:func:`aegis_slurm.metrics.detect.to_rates`).

``scale`` says how a node's distance from its peers is measured (docs/minder.md, "Scales"):

* ``"physical"``: Min-Max over the wider of the data's and the physical range (clock, power,
  temperature, utilisation, host load and memory: their healthy level is the hardware's);
* ``"job"``: a throughput whose level depends on the job (model, parallelism, batch) rather than
  on the link: Min-Max over ``[lo, 2 x the job's typical level]``, at most the physical range —
  one GPU's NVLink at half its peers' rate is half a job level off, not 0.05 of 300 GB/s;
* ``"xid"``: the last Xid, read as 1 for a hardware fault's code and 0 otherwise;
* ``"devices"``: a count of a node's devices; one fewer than its peers' is a full-scale outlier;
* ``"decades"``: a share that spans decades between healthy and faulty (the time a NIC holds
  its link paused): logarithmic from ``lo`` (0) to ``hi`` (1), so a node at ten times its
  peers' share is as far from them on a quiet fabric as on a busy one;
* ``"latch"``: a counter whose every increment is a fault (an uncorrectable memory error, an
  OOM kill): 1 from its first increase in the window on, 0 before -- one event is the evidence;
* ``"events"``: a sparse error counter (replays, link-down events): evidence on an absolute,
  logarithmic scale — any sustained error rate where the peers have none is an outlier, whatever
  the range; its magnitude counts by decades.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class MetricSpec:
    name: str
    source: str  # "dcgm" (label Hostname) | "node" (node_exporter, label instance)
    kind: str  # "gauge" | "counter"
    agg: str  # per node over GPUs / devices / ports: "min" | "max" | "sum" | "avg" | "count"
    lo: float | None = None
    hi: float | None = None
    scale: str = "physical"  # "physical" | "job" | "events" | "decades" | ... (module docstring)
    #: a metric derived in PromQL from an exporter's series (``None``: the series itself):
    #: ``(exporter metric, PromQL over {sel} = that metric's selector for the job's nodes)``
    derived: tuple[str, str] | None = None
    #: ``"local"``: a machine's own state (clock, temperature, error counters, Xid, its ports);
    #: ``"coupled"``: a throughput every rank of a synchronous job drives in lock-step (power,
    #: utilisation, tensor duty, PCIe/NVLink/IB bytes) -- a symptom the job shares, which on its
    #: own does not say *which* machine is at fault (docs/minder.md, "Corroboration")
    evidence: str = "local"
    #: device label values left out (a PromQL ``device!~`` regex, fully anchored): the
    #: virtual interfaces a container host creates and removes (veth, bridges), whose count and
    #: carrier changes say nothing about the machine's links
    exclude_devices: str | None = None
    #: a reading away from the peers is itself a fault of the machine's hardware (a port
    #: down, a link retrained narrower, a failed row remap), not a symptom it shares with a
    #: job that stopped; every counter and indicator scale is (:data:`HARDWARE_SCALES`)
    hardware: bool = False
    #: a hardware state gauge's healthy side, for its reference (the node's best state): None
    #: as ``agg`` says -- "min" reads the node's worst device, so high is healthy, else low
    healthy_high: bool | None = None
    #: why the job itself can move this metric on a machine (None: it cannot): a finding on it
    #: is reported with that reason, never a reason to drain, never evidence that corroborates
    #: another finding or makes the node the one "whose hardware speaks" (session-12 review: a
    #: rank-0 checkpoint writer's I/O stall must neither stand in for a straggler's evidence
    #: nor hide a dead rank as its collateral)
    job_can_cause: str | None = None
    #: an indicator over a trailing range (seconds) of its source counter (``derived``) whose
    #: events count only inside the window: at a step, it stands only where the node's source
    #: counter rose since the window opened within that range -- link-downs while the node was being
    #: repaired, before the job, are not the job's node flapping -- and, counting only what
    #: happened, it has no reference offset (a port already bouncing when the window opens is
    #: not the node's normal) (session-13 review)
    counted_in_window: float | None = None
    #: a failure state each episode of which is the fault showing (a mount whose statfs fails,
    #: a port out of Active): two episodes within :data:`FLAP_WINDOW`, each at least a window
    #: long and each shorter than the continuity, are a fault, as two link-downs are -- where a
    #: power-managed level (a PCIe link's generation, which an idle GPU lowers) is not one
    #: (round 14, designed on corpus v11, seen; :func:`~aegis_slurm.metrics.detect.recurrence`)
    recurs: bool = False
    #: on the latch scale, how many times the counter must count in the window (scrapes at
    #: which it rose) before it is the evidence: 1 for an event each of which is a fault
    latch_events: int = 1
    #: a link's state or events, which the switch's end of the link shares: the same
    #: deviation starting on several nodes within a window of each other is the switch (a leaf
    #: reloading, a port-firmware upgrade, a management switch cutting a rack's frontend), not
    #: each machine's link (round 15, designed on corpus v12, seen;
    #: :func:`~aegis_slurm.metrics.detect.shared_onsets`)
    switch_side: bool = False
    #: for a ``recurs`` metric, the reading an episode must reach at each of its steps (None:
    #: far from the peers is enough): the hardware-slowdown share is the share of a range's
    #: samples with the bit set, and NVML reports the bit at a P-state or clock change too --
    #: one such sample is a fifth of a one-minute range, a brake on for half of it is not a
    #: clock change (session-14 review)
    episode_floor: float | None = None
    #: the largest share of the peers' level a node's reference may hold it *below* them -- for
    #: a ``busy_only`` metric, while its GPUs work as hard as theirs (None: any offset is the
    #: node's normal).  Same-SKU GPUs differ in clock under load by 8 % on average and 22 % at
    #: most (Sinha et al., "Not All GPUs Are Created Equal", SC'22); a busy node's slowest GPU
    #: clocked further below its peers' from its first sample is clocks locked or a P-state
    #: stuck -- set before the job, not silicon (round 17, designed on corpus v14, seen:
    #: :func:`~aegis_slurm.metrics.detect.bounded_offsets`) -- or another GPU model in the job,
    #: which is why such a finding is alerted, never drained.  The SM clock, not the memory
    #: clock: models mixed in one partition share the former within 11 % (H100 SXM5 1,980 /
    #: PCIe 1,755 MHz; A100 40 and 80 GB both 1,410) and differ in the latter by 24-39 %
    #: (HBM2 / HBM2e / HBM3: the review of round 17 found an H100 PCIe node among SXM5 nodes
    #: "locked").  A port's rate too (round 19, at its entry)
    offset_bound: float | None = None
    #: why a finding on it, the machine's own, is still no reason to drain (None: it is): the
    #: hardware handled what it counts -- reported with this caveat, alerted, never drained
    caveat: str | None = None
    #: the side of its peers a fault puts a node on, for a physical reading whose other side is
    #: no machine's fault (None: both are): ``"low"`` -- memory available above the peers' is
    #: memory a rank's phase freed, never a machine short of it; a GPU clocked above its peers'
    #: is the one they are not throttling, or the one working while they wait (rank 0
    #: evaluating alone: corpus v16, seen)
    fault_side: str | None = None
    #: the metric whose reading a node must share with its peers (their median over the
    #: reference span) for ``offset_bound`` to hold on it (None: every node): a node's slowest
    #: port is comparable with its peers' only where it has as many ports
    bound_alike: str | None = None
    #: on the fault side, evidence only while the node's GPUs work (utilisation above idle):
    #: an idle GPU drops its clocks by design -- a node an elastic job released, ranks waiting
    #: in a CPU barrier -- a busy one only when throttled, locked or stuck (corpora v5, v12:
    #: the clocks one-sided without it made a released node its pair's only "candidate")
    busy_only: bool = False
    #: on the fault side, a busy GPU holds it at its P-state's one value, the SKU's ceiling (a
    #: data-centre GPU's memory clock): of a pair, the lower node is the one that moved -- the
    #: other cannot have risen above that value -- so it is measured against the other node
    #: (``Params.pair_distance``).  Not the SM clock, whose boost follows each GPU's load and
    #: power, nor memory available, which a rank's phase frees (session-15 review: a pair's
    #: rank 0 freeing 260 GB left its peer the "low" one)
    pinned: bool = False
    #: a reading the GPUs' own work drives up (utilisation, power, temperature, tensor duty):
    #: above its peers' while the node's GPUs work and theirs idle, it is a rank working alone
    #: -- rank 0 evaluating, sampling or saving while the others wait in a CPU barrier -- and
    #: no evidence (``Params.working_alone``; corpus v16, seen: four healthy jobs alarmed)
    load_driven: bool = False


#: the scales whose evidence is the machine's hardware speaking for itself: a hardware Xid, a
#: device lost, an error counter, a fault counted, a NIC pausing its link
HARDWARE_SCALES = frozenset({"xid", "devices", "events", "latch", "decades"})


def is_hardware(spec: MetricSpec) -> bool:
    """Whether a finding on this metric is hardware evidence (:attr:`MetricSpec.hardware`);
    one the job can cause (:attr:`MetricSpec.job_can_cause`) never is."""
    if spec.job_can_cause:
        return False
    return spec.hardware or spec.scale in HARDWARE_SCALES


#: Recording-rule style name (level:metric:operations) of the lowest per-port IB receive rate.
PORT_MIN = "instance:node_infiniband_port_data_received_bytes:rate_min_port"

#: The lowest per-GPU rate of dcgm-exporter's default NVLink counter.
NVLINK_MIN = "Hostname:DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL:rate_min_gpu"

#: DCGM field 449: an instantaneous NVLink throughput (MiB/s) that dcgm-exporter's CSV types as
#: a counter (see the catalog entry of :data:`NVLINK_MIN`); its per-lane variants likewise.
NVLINK_RATE_FIELD = "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"
_DCGM_RATE_VALUED = re.compile(r"DCGM_FI_DEV_NVLINK_BANDWIDTH_(TOTAL|L\d+)")

#: How many GPUs a node's dcgm-exporter reports (a GPU off the bus, Xid 79, loses its series).
GPU_COUNT = "Hostname:DCGM_FI_DEV_GPU_TEMP:count_gpu"

#: The rate an IB/RoCE port trained at (``rate_bytes_per_second``, "Maximum signal transfer rate").
LINK_RATE = "node_infiniband_rate_bytes_per_second"

#: How many IB ports a node's node_exporter reports (a NIC the OS lost loses its series).
PORT_COUNT = "instance:node_infiniband_port_data_received_bytes:count_port"

#: The pause a node's Ethernet NICs send (PFC per priority, or 802.3x global pause): mlx5's
#: ``tx_prio<p>_pause_duration`` / ``tx_global_pause_duration`` (microseconds of pause
#: transmitted; Linux mlx5 counters.rst), as node_exporter's ethtool collector names them
#: (``tx`` becomes ``transmitted``).  A PromQL name pattern: which priorities carry PFC is the
#: site's choice, and only the enabled ones have the counter (en_stats.c).
PAUSE_DURATION_SERIES = "node_ethtool_transmitted_(prio[0-7]|global)_pause_duration"

#: Microseconds per second a node's NICs hold their links paused, summed over NICs and
#: priorities (a recording-rule style name for the ``sum by (instance) (rate(...))``).
PAUSE_SENT = "instance:node_ethtool_transmitted_pause_duration:rate_sum"

#: ``rate()`` of every series a name pattern matches.  ``rate`` drops the metric name, and two
#: series of one NIC that differ only in it (priority 3 and global) would then collide ("vector
#: cannot contain metrics with the same labelset"): the name is kept as a label first, which
#: takes a subquery at the query's step (``label_replace`` reads instant vectors only).
_RATE_PER_NAME = 'rate(label_replace({sel}, "stat", "$1", "__name__", "(.+)")[{range}s:{step}s])'

#: A metric name as Prometheus spells one; any other ``derived`` source is a name pattern.
_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


def is_name_pattern(source: str) -> bool:
    """Whether a derived metric's exporter series are named by a pattern (matched whole, as
    PromQL's ``__name__=~`` does) rather than by one name."""
    return _METRIC_NAME.fullmatch(source) is None


def source_matches(source: str, name: str) -> bool:
    """Whether the exporter series ``name`` is one a derived metric's ``source`` reads."""
    return re.fullmatch(source, name) is not None if is_name_pattern(source) else source == name


#: dcgm-exporter's NVLink error counters (DCGM fields 409, 419, 429, 439), opt-in in its CSV.
NVLINK_ERROR_COUNTERS = (
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
    "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
)

#: Interfaces that are not a machine's own links: loopback, container veths, bridges and
#: overlay tunnels (Docker, libvirt, Calico, Flannel, CNI, VXLAN, kube-ipvs), and the ones
#: that come and go with each VM or pod: libvirt's per-guest taps (vnet0, macvtap0), Cilium's
#: per-pod endpoints (lxc + hash) and its own devices, Podman's, nerdctl's and LXD's bridges.
#: node_exporter reports them all under ``node_network_*`` (its netclass/netdev collectors
#: exclude none).
VIRTUAL_NICS = (
    "lo|veth.*|docker.*|br-.*|virbr.*|cali.*|tunl.*|flannel.*|cni.*|vxlan.*|kube-ipvs.*|tap.*"
    "|vnet.*|macvtap.*|lxc.*|lxdbr.*|cilium_.*|podman.*|nerdctl.*"
)

#: and IPoIB interfaces (ib0, ibp12s0, a P_Key child ib0.8001), for the NICs' summed speed:
#: an IPoIB speed is its IB port's times its width (400 Gb/s for NDR), and eight of them
#: drowned a 100 GbE port's fallback to 25 GbE in the node's sum (session-13 review); the IB
#: ports' own rate is read from their counters.  Their carrier changes stay read: on a VM
#: whose IB functions publish no link_downed (Azure ND, corpus v10) they are the only record
#: of a port bouncing, though the subnet manager's P_Key or LID changes toggle them too
SPEED_EXCLUDED = VIRTUAL_NICS + "|ib.*"

#: NVIDIA Xid codes that report a hardware fault of the GPU or its links (NVIDIA's "XID Errors"
#: catalogue, r555): 48 double-bit ECC, 61/62 internal micro-controller, 63/64 row remapping,
#: 74 NVLink, 79 fallen off the bus, 92 high single-bit ECC rate, 94/95 contained/uncontained
#: ECC, 119/120 GSP RPC timeout/error, 140 unrecovered ECC.  Codes an application causes
#: (13 graphics exception, 31 MMU fault, 43 stopped channel, 45 preemptive cleanup) are not.
HARDWARE_XIDS: frozenset[int] = frozenset({48, 61, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120, 140})

#: NVLink 5 counters (NVIDIA/go-dcgm ``const_fields.go``) and their events-scale floor and
#: full rate (the repaired-symbol floor: see the catalog entry).
#: DCGM 4.6 renamed fields 1212-1214 and 1219 (``*_TOTAL``) and keeps the old names as
#: deprecated aliases: a site's CSV may list either
NVLINK5_COUNTERS: tuple[tuple[str, float, float], ...] = (  # name, lo (the floor), hi
    ("DCGM_FI_DEV_NVLINK_RX_SYMBOL_ERROR_TOTAL", 100.0, 1e5),
    ("DCGM_FI_DEV_NVLINK_EFFECTIVE_ERROR_TOTAL", 0.0, 100.0),
    ("DCGM_FI_DEV_NVLINK_RECOVERY_EVENT_TOTAL", 0.0, 0.05),
    ("DCGM_FI_DEV_NVLINK_RECOVERY_FAILED_TOTAL", 0.0, 0.05),
    ("DCGM_FI_DEV_NVLINK_COUNT_RX_SYMBOL_ERRORS", 100.0, 1e5),
    ("DCGM_FI_DEV_NVLINK_COUNT_EFFECTIVE_ERRORS", 0.0, 100.0),
    ("DCGM_FI_DEV_NVLINK_COUNT_LINK_RECOVERY_EVENTS", 0.0, 0.05),
    ("DCGM_FI_DEV_NVLINK_COUNT_LINK_RECOVERY_FAILED_EVENTS", 0.0, 0.05),
)

#: The kernel's clock source fallbacks: when its watchdog finds the TSC skewing against
#: another clock ("Marking clocksource 'tsc' as unstable because the skew is too large", seen
#: on 8-NUMA-node servers: Linux commit 6446495535, ``kernel/time/clocksource.c``) it switches
#: to the next best, an HPET or the ACPI PM timer, each read of which is a device access
#: rather than an instruction: clock reads, which a training step makes by the thousand, turn
#: slow.  jiffies is the last resort.  The TSC, arm64's ``arch_sys_counter`` and a VM's
#: ``kvm-clock`` are fast
SLOW_CLOCKSOURCES = "hpet|acpi_pm|jiffies|refined-jiffies"
CLOCKSOURCE_SERIES = "node_time_clocksource_current_info"
#: 1 where the node's current clock source is a slow fallback, 0 where it is another (node
#: exporter's time collector, on by default: one series per node, labelled ``clocksource``)
CLOCKSOURCE_SLOW = "instance:node_time_clocksource_current_info:slow"
_CLOCKSOURCE_EXPR = (
    "last_over_time(" + CLOCKSOURCE_SERIES + '{{clocksource=~"' + SLOW_CLOCKSOURCES + '",'
    "{matchers}}}[{lookback}s]) or 0 * last_over_time({sel}[{lookback}s])"
)

#: dcgm-exporter's clock-event reasons, DCGM field 112: ``DCGM_FI_DEV_CLOCK_THROTTLE_REASONS``
#: until DCGM 3.x, ``DCGM_FI_DEV_CLOCKS_EVENT_REASONS`` since (NVML renamed its "throttle
#: reasons" "clocks event reasons"); in neither shipped CSV, a site lists one.  NVML's bitmask
CLOCK_REASONS_SERIES = "DCGM_FI_DEV_(CLOCKS_EVENT|CLOCK_THROTTLE)_REASONS"
#: The bits of the hardware slowdowns (nvml.h ``nvmlClocksEventReason*``): HwSlowdown 0x8 (the
#: clocks cut by half or more: over temperature, the board's power brake asserted by a failing
#: power supply, power over the fast-trigger limit), HwThermalSlowdown 0x40, and
#: HwPowerBrakeSlowdown 0x80 -- the GPU protecting itself, where SwPowerCap 0x4 and
#: SwThermalSlowdown 0x20 are the driver pacing a busy GPU, as every GPU of a job may be
HW_SLOWDOWN_BITS = (0x8, 0x40, 0x80)
#: The share of the last range a node's worst GPU spent in a hardware slowdown (0..1)
HW_SLOWDOWN = "Hostname:DCGM_FI_DEV_CLOCKS_EVENT_REASONS:hw_slowdown_share"
# each GPU's reasons as a number (a DCGM blank, >= 1.4e14, dropped; the field name kept as a
# label, since arithmetic drops it and a site moving between the two names has both), each
# hardware bit read by PromQL arithmetic (floor(x / bit) % 2: PromQL has no bit operators),
# any of them set as 1, averaged over the range: a power brake cycling on and off is its duty
_REASONS = 'label_replace({sel}, "field", "$1", "__name__", "(.+)") < 1.4e14'
_HW_SLOWDOWN_EXPR = (
    "avg_over_time(clamp_max("
    + " + ".join(f"floor(({_REASONS}) / {bit}) % 2" for bit in HW_SLOWDOWN_BITS)
    + ", 1)[{range}s:{step}s])"
)

#: A link that went down twice within half an hour (round 13, designed on corpus v10, seen):
#: Azure's health checks fail a node on "multiple IB link flapping events within 6 hours"
#: (azurehpc-health-checks ``azure_ib_link_flapping.nhc``, FaultCode NHC2005); half an hour
#: keeps it within a job's life.  Per port: 1 when its counter rose by more than ``{min}``
#: over the window, else 0 (``increase`` extrapolates a little past whole events: the
#: thresholds sit halfway between counts); the node's most flapping port is read
FLAP_WINDOW = 1800
_FLAP_EXPR = "increase({{sel}}[{window}s]) > bool {min}"
#: IB's link_downed counts each time a port went down; a carrier change counts each loss
#: and each return, so two flaps are four (three if the port is down again)
LINK_FLAPPING = "instance:node_infiniband_link_downed:flapping"
CARRIER_FLAPPING = "instance:node_network_carrier_changes:flapping"

#: The summed speed of the node's physical NICs (node_exporter's netclass ``speed_bytes``;
#: a NIC whose speed is unknown, a port down, reads -1 Mb/s: counted as 0)
NIC_SPEED = "instance:node_network_speed_bytes:sum"
_NIC_SPEED_EXPR = "clamp_min(last_over_time({sel}[{lookback}s]), 0)"

#: The default set: the issue's twelve metrics, the per-device minima of the IB receive rate
#: and of the NVLink counter, the last Xid and the GPU and IB port counts.
DEFAULT_METRICS: tuple[MetricSpec, ...] = (
    MetricSpec("DCGM_FI_DEV_GPU_UTIL", "dcgm", "gauge", "min", 0, 100, load_driven=True),
    MetricSpec(
        "DCGM_FI_DEV_POWER_USAGE",
        "dcgm",
        "gauge",
        "min",
        0,
        700,
        evidence="coupled",
        load_driven=True,
    ),
    MetricSpec(
        "DCGM_FI_DEV_SM_CLOCK",
        "dcgm",
        "gauge",
        "min",
        0,
        2100,
        offset_bound=0.25,
        fault_side="low",
        busy_only=True,
    ),
    # Round 12: the slowest GPU memory clock (DCGM field 101, in dcgm-exporter's default CSV).
    # Under load a data-centre GPU holds its memory at the P-state's one clock; a GPU left in a
    # lower P-state after a transient (or an HBM throttling itself) runs its memory at half
    # speed while its SM clock looks normal, and the job waits on it.  Range: from 0 to the
    # data's top -- the SKU's own memory clock, 877 MHz (V100 HBM2) to 14 GHz (GDDR7); a fixed
    # 4 GHz top (HBM3e) read a V100 stuck at 614 MHz as 7 % off (round 20, corpus v17, seen).
    # A P-state's memory clock is one quantised value, so the range never shrinks to noise
    MetricSpec(
        "DCGM_FI_DEV_MEM_CLOCK",
        "dcgm",
        "gauge",
        "min",
        0,
        None,
        fault_side="low",
        busy_only=True,
        pinned=True,
    ),
    MetricSpec("DCGM_FI_DEV_GPU_TEMP", "dcgm", "gauge", "max", 20, 100, load_driven=True),
    MetricSpec(
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "dcgm",
        "gauge",
        "min",
        0,
        1,
        "job",
        evidence="coupled",
        load_driven=True,
    ),
    MetricSpec(
        "DCGM_FI_PROF_PCIE_TX_BYTES", "dcgm", "gauge", "min", 0, 32e9, "job", evidence="coupled"
    ),
    MetricSpec(
        "DCGM_FI_PROF_NVLINK_TX_BYTES", "dcgm", "gauge", "min", 0, 300e9, "job", evidence="coupled"
    ),
    # floor: NVIDIA's DCGM health watch warns above 8 replays a minute ("the maximum
    # recommended by RM", DCGM_LIMIT_MAX_PCIREPLAY_RATE); a GPU that replays now and then
    # (every few minutes, for hours) is within it -- here on the node's sum over its GPUs;
    # the floor is where evidence starts (9 a minute: more than 8)
    MetricSpec("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "dcgm", "counter", "sum", 9 / 60, 50, "events"),
    # in dcgm-exporter's default counters (DCGM_FI_PROF_NVLINK_TX_BYTES is not): the slowest
    # GPU's NVLink rate.  The field *is* a rate (MiB/s, TX + RX) although the CSV types it
    # "counter": DCGM differences NVML's cumulative KiB counters itself and divides by the time
    # (DcgmCacheManager ReadAndCacheNvLinkBandwidth; dcgm-exporter PR #658, KempnerPulse #10
    # measuring it on H200), so its value is read, never rate()'d -- rate() takes each dip for
    # a counter reset.  Range: NVLink 5 moves 1.8 TB/s per GPU (~1.7e6 MiB/s)
    MetricSpec(
        NVLINK_MIN,
        "dcgm",
        "gauge",
        "min",
        0,
        2e6,
        "job",
        (NVLINK_RATE_FIELD, "last_over_time({sel}[{lookback}s])"),
        evidence="coupled",
    ),
    MetricSpec(
        "node_infiniband_port_data_received_bytes_total",
        "node",
        "counter",
        "sum",
        0,
        50e9,
        "job",
        evidence="coupled",
    ),
    MetricSpec(
        "node_infiniband_link_downed_total",
        "node",
        "counter",
        "sum",
        0,
        0.05,
        "events",
        switch_side=True,
    ),
    # the rate each IB/RoCE port trained at (sysfs ``rate``; node_exporter's infiniband
    # collector), the node's lowest: a link that retrained at half or a quarter of its width or
    # speed carries on without an error while the whole job waits on it (NHC's check_hw_ib and
    # ibstat read the same field at boot; this watches it while the job runs).  Range: NDR
    # 400 Gb/s = 5e10 B/s; an XDR port widens it from the data
    # A port trained under its peers' rate from the node's first sample (a cable or transceiver
    # of a lower generation swapped in) is no offset either: links train in factors of two
    # (width 4x/2x/1x, speed generations), so more than 40 % under is a link trained low --
    # or another fabric in the job: alerted, never drained (round 19, designed on corpus v16,
    # seen: five ports at half rate from boot were the nodes' "normal").  Only among nodes
    # with as many ports as their peers: a node with one more -- a ConnectX Ethernet function
    # for storage at 25 GbE under /sys/class/infiniband -- reads its slowest port far under
    # theirs from boot (third review of session 15)
    MetricSpec(
        LINK_RATE,
        "node",
        "gauge",
        "min",
        0,
        50e9,
        hardware=True,
        switch_side=True,
        offset_bound=0.4,
        bound_alike=PORT_COUNT,
    ),
    # packets received with errors (sysfs port_rcv_errors: symbol/CRC-level damage on the link),
    # summed over ports; sparse benign increments are what the burst test is for.  The range:
    # a failing cable logs up to ~10/s (HDR at 50 GB/s moves ~12 M packets/s: 1 ppm)
    MetricSpec(
        "node_infiniband_port_errors_received_total", "node", "counter", "sum", 0, 10, "events"
    ),
    # the node's *lowest* per-port receive rate: one port of eight down is an eighth of the
    # summed rate (hidden in a job-wide slowdown) but the whole of this one
    MetricSpec(
        PORT_MIN,
        "node",
        "gauge",
        "min",
        0,
        50e9,
        "job",
        ("node_infiniband_port_data_received_bytes_total", "rate({sel}[{range}s])"),
        evidence="coupled",
    ),
    # tasks running or waiting, D state included: a host that starves its ranks -- but also
    # a rank that runs more data-loader workers than its peers, or one blocked writing the
    # job's checkpoint (session-13 review)
    MetricSpec(
        "node_load1",
        "node",
        "gauge",
        "avg",
        0,
        256,
        job_can_cause="a load may be the job's own processes (a checkpoint writer, loaders)",
    ),
    # the last Xid of the node's GPUs (``max``: a hardware code outranks the application codes
    # 13/31/43/45 in value), read as 1 for a hardware Xid (:data:`HARDWARE_XIDS`), 0 otherwise
    MetricSpec("DCGM_FI_DEV_XID_ERRORS", "dcgm", "gauge", "max", 0, 1, "xid"),
    # devices a node reports: one fewer than its peers (after its own reference) is evidence
    MetricSpec(
        GPU_COUNT, "dcgm", "gauge", "count", 0, None, "devices", ("DCGM_FI_DEV_GPU_TEMP", "{sel}")
    ),
    MetricSpec(
        PORT_COUNT,
        "node",
        "gauge",
        "count",
        0,
        None,
        "devices",
        ("node_infiniband_port_data_received_bytes_total", "{sel}"),
    ),
    # memory the kernel can still give: a leak outside the job or a lost DIMM -- but also rank
    # 0 gathering a full optimizer state in host memory to save it (session-13 review).  Only
    # *less* than the peers' is a machine's fault: rank 0 evaluating alone while its peers wait
    # frees host memory they hold (round 18, designed on corpus v15, seen)
    MetricSpec(
        "node_memory_MemAvailable_bytes",
        "node",
        "gauge",
        "avg",
        0,
        2e12,
        job_can_cause="a memory drop may be the job's own use (a rank gathering state)",
        fault_side="low",
    ),
    # NVLink's own error counters, summed over the node's GPUs: in dcgm-exporter's default
    # counters CSV but commented out, so present where a site enables them.  A degraded link
    # shows here (flow-control and data CRC errors, link-level retries, recoveries) while its
    # throughput only looks like the job's; sparse benign counts are what the burst test is
    # for.  The range sets where the log scale's full scale starts (a decade above 10/s).
    # floor: DCGM's health watch counts NVLink CRC errors only from 100 a second ("RM has
    # informed us that CRC errors only matter at rates of 100+ per second",
    # DCGM_LIMIT_MAX_NVLINK_CRC_ERROR); replay and recovery errors from the first
    *(
        MetricSpec(name, "dcgm", "counter", "sum", 100.0 if "_CRC_" in name else 0, 100, "events")
        for name in NVLINK_ERROR_COUNTERS
    ),
    # the hottest GPU memory (HBM) of the node, DCGM field 252 (in dcgm-exporter's default
    # CSV): HBM throttles its own clock near 95 degC (clock-event reason 0x40, HW thermal)
    # while the GPU die's temperature looks normal, and the job waits on that GPU's memory
    # bandwidth.  A GPU without the sensor reads DCGM's blank (dropped when aligning, like
    # every DCGM blank); a node without it is not judged on it.  Range: HBM3/HBM3e's
    # operating range tops out around 105 degC
    MetricSpec("DCGM_FI_DEV_MEMORY_TEMP", "dcgm", "gauge", "max", 20, 110, load_driven=True),
    # the share of time the node's NICs pause their links (PFC or global pause), in us/s: a NIC
    # that sends pause cannot absorb what the network delivers -- its host side is behind
    # (mlx5 counters.rst: "the adapter is congested"), the node's own state, where the pause
    # it *receives* and IB's PortXmitWait are the network's.  A NIC whose receive path
    # stalls pauses its link without end (a PFC storm) and the whole job waits on it.
    # Scale: decades from 100 us/s (a hundredth of a percent of the link's time: nothing) to
    # one NIC paused the whole second.  ethtool statistics are untyped in
    # node_exporter (its ethtool collector is off by default: ``--collector.ethtool``)
    MetricSpec(
        PAUSE_SENT,
        "node",
        "gauge",
        "sum",
        100,
        1e6,
        "decades",
        derived=(PAUSE_DURATION_SERIES, _RATE_PER_NAME),
    ),
    # mlx5's PFC stall prevention: the NIC paused for longer than its timeout (8 s by
    # default), stopped sending pause and may drop ("Error" in counters.rst); sparse, so on
    # the events scale with link-down's range
    MetricSpec(
        "node_ethtool_transmitted_pause_storm_error_events",
        "node",
        "counter",
        "sum",
        0,
        0.05,
        "events",
    ),
    # the PCIe link each GPU trained at (DCGM fields 238 and 237, "PCIe Current Link Width" /
    # "Generation"; not in dcgm-exporter's default CSV: a site lists them), the node's
    # narrowest and slowest: a GPU whose link retrained at x8 or Gen1 carries on without an
    # error while the whole job waits on its transfers (NHC and gpud read the same at boot).
    # A GPU idling lowers its generation (power saving), as all do in a checkpoint and an idle
    # GPU by design does all along (its own normal); the width holds
    MetricSpec("DCGM_FI_DEV_PCIE_LINK_WIDTH", "dcgm", "gauge", "min", 0, 16, hardware=True),
    MetricSpec("DCGM_FI_DEV_PCIE_LINK_GEN", "dcgm", "gauge", "min", 0, 6, hardware=True),
    # the host's memory (node_exporter's edac collector, on by default, per memory controller
    # summed): corrected errors arriving in a burst are a DIMM failing (the kernel calls 15
    # CMCIs a second a storm and stops listening), uncorrected ones the machine's memory lost
    MetricSpec("node_edac_correctable_errors_total", "node", "counter", "sum", 0, 100, "events"),
    MetricSpec("node_edac_uncorrectable_errors_total", "node", "counter", "sum", 0, 0.05, "latch"),
    # packets the kernel dropped because a CPU's input backlog was full (softnet_stat, per CPU
    # summed): the host cannot take in what its NICs deliver (IRQs collapsed onto one CPU, a
    # softirq storm) -- its own state; NCCL over TCP sockets loses throughput to it
    MetricSpec("node_softnet_dropped_total", "node", "counter", "sum", 0, 1e4, "events"),
    # TCP segments the host retransmitted (netstat collector, in its default field list): where
    # collectives run over TCP (GPUDirect-TCPX/TCPXO, NCCL's socket transport) a NIC or path
    # that drops makes its host retransmit thousands a second while its peers' stay near
    # nothing.  Scale: decades from 100 a second (a busy host's background -- frontend
    # traffic, object-store uploads -- a GUESS) to 1e5: how many *times* its peers' rate a node
    # retransmits, as for pause (the review of round 17: on the events scale a Poisson bar of
    # a rate in the hundreds is a few percent above it, and a node 5 % busier was found).  A
    # rank uploading checkpoints over a lossy frontend path retransmits on its own too:
    # reported, never a reason to drain (round 17, designed on corpus v14, seen)
    MetricSpec(
        "node_netstat_Tcp_RetransSegs",
        "node",
        "counter",
        "sum",
        100,
        1e5,
        "decades",
        job_can_cause="retransmits may be the job's own uploads over a lossy frontend path",
    ),
    # RDMA packets an HCA received out of sequence (mlx5 hw_counters, node_exporter >= 1.11):
    # on a lossless fabric none; a port whose PFC/trust configuration was lost drops at its own
    # last hop and receives the gaps (go-back-N) -- the receiving machine's link, where the
    # NAKs its peers receive (packet_sequence_errors) are the job's shared symptom
    MetricSpec(
        "node_infiniband_out_of_sequence_packets_received_total",
        "node",
        "counter",
        "sum",
        0,
        1e5,
        "events",
    ),
    # Ethernet/RoCE sites (no infiniband collector) see their links only here.  How many of
    # the node's physical interfaces are up (operstate): a NIC that drops is one fewer, as a
    # vanished IB port is (node_exporter: "Value is 1 if operstate is 'up', 0 otherwise")
    MetricSpec(
        "node_network_up",
        "node",
        "gauge",
        "sum",
        0,
        None,
        "devices",
        exclude_devices=VIRTUAL_NICS,
        switch_side=True,
    ),
    # link flaps (sysfs carrier_changes: every carrier loss and return), the Ethernet
    # counterpart of IB's link_downed; the same range
    MetricSpec(
        "node_network_carrier_changes_total",
        "node",
        "counter",
        "sum",
        0,
        0.05,
        "events",
        exclude_devices=VIRTUAL_NICS,
        switch_side=True,
    ),
    # frames received with errors (CRC, length, FIFO: sysfs rx_errors), the counterpart of
    # IB's port_rcv_errors; the same range
    MetricSpec(
        "node_network_receive_errs_total",
        "node",
        "counter",
        "sum",
        0,
        10,
        "events",
        exclude_devices=VIRTUAL_NICS,
    ),
    # Round 9: the local error counters and states the exporters ship that no earlier round
    # read, each named by its source (tests/fixtures/metrics/PROVENANCE.md), not by a corpus.
    # Frames the NIC failed to send (sysfs tx_errors: carrier, FIFO, aborted), the transmit
    # side of receive_errs
    MetricSpec(
        "node_network_transmit_errs_total",
        "node",
        "counter",
        "sum",
        0,
        10,
        "events",
        exclude_devices=VIRTUAL_NICS,
    ),
    # An IB port's own link layer (node_exporter's infiniband collector, from the port's sysfs
    # counters; IBA PortCounters): minor symbol errors on its lanes (the range of
    # port_rcv_errors), the link retraining after an error (link_error_recovery: each time the
    # port recovered, where link_downed counts the times it did not), local physical errors over
    # the port's threshold and receive-buffer overruns (the counts of bursts, not of errors: the
    # range of link_downed).  The errors a port *receives from the remote end* (EBP-marked
    # packets) and its discards are the path's or the fabric's, not this machine's: left out
    MetricSpec("node_infiniband_symbol_error_total", "node", "counter", "sum", 0, 10, "events"),
    MetricSpec(
        "node_infiniband_link_error_recovery_total",
        "node",
        "counter",
        "sum",
        0,
        0.05,
        "events",
        switch_side=True,
    ),
    MetricSpec(
        "node_infiniband_local_link_integrity_errors_total",
        "node",
        "counter",
        "sum",
        0,
        0.05,
        "events",
    ),
    MetricSpec(
        "node_infiniband_excessive_buffer_overrun_errors_total",
        "node",
        "counter",
        "sum",
        0,
        0.05,
        "events",
    ),
    # the lowest logical state of the node's IB ports (1 down, 2 init, 4 active): a port that
    # left Active while its series stay (the count of ports holds) -- a port unused by design
    # holds the node's minimum low all along, its own normal.  A port that leaves Active and
    # comes back, twice within the flapping range, each time for less than the continuity, is
    # a port flapping (recurring, round 14)
    MetricSpec(
        "node_infiniband_state_id",
        "node",
        "gauge",
        "min",
        0,
        5,
        hardware=True,
        recurs=True,
        switch_side=True,
    ),
    # the kernel's OOM killer (/proc/vmstat oom_kill; untyped in node_exporter, a count since
    # boot): a rank killed for the host's memory; one is the evidence (scale "latch") -- but
    # the OOM killer fires as readily for a rank that loads too much as for a machine short of
    # memory
    MetricSpec(
        "node_vmstat_oom_kill",
        "node",
        "counter",
        "sum",
        0,
        0.05,
        "latch",
        job_can_cause="an OOM kill may be the job's own doing",
    ),
    # mounts whose statfs failed or hung (node_exporter marks a mount it cannot stat within its
    # timeout "stuck" and reports device_error 1 until it answers), summed: a node whose NFS or
    # parallel-filesystem client hangs stalls its ranks' reads and checkpoints while its peers'
    # answer.  A mount that errors all along (a FUSE mount root cannot stat) is the node's normal
    # A client the filesystem evicts and lets back, again and again, fails in episodes each
    # shorter than the continuity (round 14, designed on corpus v11, seen): recurring
    MetricSpec(
        "node_filesystem_device_error", "node", "gauge", "sum", 0, 1, hardware=True, recurs=True
    ),
    # The GPU's memory: double-bit (uncorrectable) ECC errors since the driver loaded, rows
    # remapped for uncorrectable errors (Ampere and later) and pages retired for double-bit
    # errors (before Ampere) -- each increment an uncorrectable error the GPU just took -- and
    # whether a row remap failed (the GPU needs replacing).  The remap fields are in
    # dcgm-exporter's default CSV; the DBE and retired-page counters are listed commented out
    # (a site enables them).  Each increment is a fault: scale "latch"
    MetricSpec("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "dcgm", "counter", "sum", 0, 0.05, "latch"),
    MetricSpec(
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "dcgm", "counter", "sum", 0, 0.05, "latch"
    ),
    MetricSpec("DCGM_FI_DEV_RETIRED_DBE", "dcgm", "counter", "sum", 0, 0.05, "latch"),
    # corrected (single-bit) errors since the driver loaded (listed commented out in the
    # default CSV): each is handled, a rate climbing far above its peers' is a memory wearing
    # out -- NVIDIA's Xid 92 "high single-bit ECC error rate" -- as the host's corrected
    # errors arriving in a burst are a DIMM failing (round 17, designed on corpora v13/v14).
    # The ECC corrected each: alerted, never drained (the review of round 17: a steady trickle
    # was drained); a row remap, Xid 63/64/92 or a double-bit error is the verdict.  A site
    # whose GPUs tick steadily sets its floor (``[detector.floors]``)
    MetricSpec(
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
        "dcgm",
        "counter",
        "sum",
        0,
        100,
        "events",
        caveat="the ECC corrected every one: a memory to watch, not a drain",
    ),
    MetricSpec("DCGM_FI_DEV_ROW_REMAP_FAILURE", "dcgm", "gauge", "max", 0, 1, hardware=True),
    # Round 10: NVLink 5's own link counters (Blackwell; DCGM fields 1212-1214 and 1219,
    # "NVLink5+ only. Returns aggregate value across all links"; a site lists them in its
    # counters CSV): the raw symbol errors forward error correction repaired, the errors it
    # could not repair, and the link's recoveries, successful or failed.  Healthy links repair
    # a steady trickle whose rate differs from link to link by decades (corpus v8, seen: four
    # healthy nodes at 0.6-1.5 a second against peers at 0.4 were called faulty without a
    # floor), so repaired symbols count from 100 a second: no NVIDIA limit is published for
    # them; it is DCGM's limit for NVLink CRC errors, taken by analogy (a GUESS)
    *(
        MetricSpec(name, "dcgm", "counter", "sum", lo, hi, "events")
        for name, lo, hi in NVLINK5_COUNTERS
    ),
    # the node's kernel fell back from the TSC to a slow clock source (:data:`SLOW_CLOCKSOURCES`)
    # while its peers keep theirs: its host code runs slow and the whole job waits on it
    MetricSpec(
        CLOCKSOURCE_SLOW,
        "node",
        "gauge",
        "max",
        0,
        1,
        derived=(CLOCKSOURCE_SERIES, _CLOCKSOURCE_EXPR),
        hardware=True,
    ),
    # Round 12: the share of time *no* task on the node could make progress for I/O (PSI
    # "full" io, /proc/pressure/io; node_exporter's pressure collector, on by default, Linux
    # >= 4.20): a local disk whose controller times out and resets, an NFS or parallel-
    # filesystem client that hangs, stall the node's ranks while their peers' I/O flows.
    # A stall is time, not a count, but it is read as the errors are: from a floor (a tenth
    # of the time fully stalled: no published limit, a GUESS) on the events scale, and it
    # must still be arriving a continuity after it began -- a host's brief hiccup stalls for
    # seconds.  But rank 0 saving a mid-size model's full state to NFS stalls its node for
    # minutes (session-12 review): the job can cause it, so it is reported with that reason,
    # never drained on and never evidence for another finding (job_can_cause)
    MetricSpec(
        "node_pressure_io_stalled_seconds_total",
        "node",
        "counter",
        "sum",
        0.1,
        1.0,
        "events",
        # a rank writing more than its disk takes stalls its own node's I/O as a failing disk
        job_can_cause="an I/O stall may be the job's own writes",
    ),
    # Round 11: a GPU in a hardware slowdown (:data:`HW_SLOWDOWN_BITS`) while its peers' are
    # not: a board whose power supply failed brakes its GPUs in bursts, a GPU past its
    # hardware thermal limit halves its clocks.  NVML notes HwSlowdown may show during a
    # P-state or clock change: one scrape is a share of a few percent over the range, a brake
    # cycling on a quarter of the time or more is far from the peers for the continuity
    MetricSpec(
        HW_SLOWDOWN,
        "dcgm",
        "gauge",
        "max",
        0,
        1,
        derived=(CLOCK_REASONS_SERIES, _HW_SLOWDOWN_EXPR),
        hardware=True,
        recurs=True,
        episode_floor=0.5,
    ),
    # Round 13 (designed on corpus v10, seen): a port that keeps going down and retraining
    # (a bad cable or transceiver) stalls the job at every bounce, but bounces minutes apart
    # leave no error *rate* that lasts the continuity; twice within FLAP_WINDOW is a fault
    # of the machine's link, as Azure's checks have it
    MetricSpec(
        LINK_FLAPPING,
        "node",
        "gauge",
        "max",
        0,
        1,
        derived=(
            "node_infiniband_link_downed_total",
            _FLAP_EXPR.format(window=FLAP_WINDOW, min=1.5),
        ),
        hardware=True,
        counted_in_window=FLAP_WINDOW,
        switch_side=True,
    ),
    MetricSpec(
        CARRIER_FLAPPING,
        "node",
        "gauge",
        "max",
        0,
        1,
        derived=(
            "node_network_carrier_changes_total",
            _FLAP_EXPR.format(window=FLAP_WINDOW, min=2.5),
        ),
        exclude_devices=VIRTUAL_NICS,
        counted_in_window=FLAP_WINDOW,
        hardware=True,
        switch_side=True,
    ),
    # a NIC that renegotiated a lower speed after a flap (autonegotiation falling back: 100G
    # to 25G) carries the job's traffic at a quarter of its peers' while it reports up; the
    # sum over the node's physical NICs drops by what it lost, and is read against the
    # node's best state (its highest: healthy_high)
    MetricSpec(
        NIC_SPEED,
        "node",
        "gauge",
        "sum",
        0,
        None,
        derived=("node_network_speed_bytes", _NIC_SPEED_EXPR),
        exclude_devices=SPEED_EXCLUDED,
        hardware=True,
        healthy_high=True,
        switch_side=True,
    ),
    # Round 14 (designed on corpus v11, seen): memory the kernel took offline as corrupted
    # (/proc/meminfo HardwareCorrupted; node_exporter's meminfo collector, on by default).  It
    # grows only when a memory error poisons a page -- an uncorrectable error, or the kernel's
    # corrected-error collector retiring a page that keeps failing (RAS CEC) -- and a host
    # whose pages keep being taken offline is losing its memory (scale "latch", on hosts
    # without the edac collector too).  But mcelog and rasdaemon soft-offline a page after 10
    # corrected errors in 24 h, before it fails, with no application affected: one page is
    # maintenance, a second in the window a DIMM failing (session-13 review)
    MetricSpec(
        "node_memory_HardwareCorrupted_bytes",
        "node",
        "gauge",
        "max",
        0,
        1,
        "latch",
        latch_events=2,
    ),
    # the share of time no task could progress for memory (PSI full memory): a node up for
    # months whose fragmented memory stalls in direct compaction for huge pages, a failing
    # DIMM's retired pages.  Read as the I/O stall is, and as it, the job can cause it
    MetricSpec(
        "node_pressure_memory_stalled_seconds_total",
        "node",
        "counter",
        "sum",
        0.1,
        1.0,
        "events",
        # a rank allocating beyond the node's memory makes the kernel reclaim and compact for it
        job_can_cause="a memory stall may be the job's own use",
    ),
    # Round 15 (designed on corpus v12, seen): how many times a CPU package hit its thermal
    # limit and throttled (x86 therm_throt's sysfs count, node_exporter's cpu collector, on by
    # default; per package, summed).  The kernel keeps it "so the user knows how bad the
    # thermal problem might be", its log being rate-limited.  A host whose fan or cold plate
    # failed throttles many times a minute and starves its ranks' input threads while its GPUs
    # look healthy; a package that ticked once, or a history since boot, is no rate
    MetricSpec(
        "node_cpu_package_throttles_total",
        "node",
        "counter",
        "sum",
        0,
        10,
        "events",
        # the count follows the CPUs' load, which differs by rank (rank 0's data pipeline and
        # evaluation): the kernel only counts the hardware's thermal interrupts, and a busy
        # package near its limit throttles on a healthy host (session-14 review)
        job_can_cause="a CPU package may throttle under the job's own load",
    ),
)

BY_NAME: dict[str, MetricSpec] = {m.name: m for m in DEFAULT_METRICS}

#: DCGM reports "no value" as large sentinels (dcgm_structs.h: DCGM_INT64_BLANK =
#: 0x7ffffffffffffff0 and its NOT_FOUND/NOT_SUPPORTED/NOT_PERMISSIONED successors +1..+3,
#: DCGM_FP64_BLANK = 140737488355328.0 and +1..+3; DCGM_INT32_BLANK 0x7ffffff0 is for int32
#: API fields, not published values); dcgm-exporter passes them through (its README's sample
#: shows ``DCGM_FI_DEV_MEMORY_TEMP ... 9223372036854775794``, INT64 NOT_SUPPORTED).  At or
#: above this (DCGM's own ``*_IS_BLANK`` tests are ``>=``): a blank.
DCGM_BLANK = 1.4e14


#: DCGM fields whose ``_TOTAL`` is a capacity (MiB), not a count since boot: gauges.
_DCGM_CAPACITY = frozenset({"DCGM_FI_DEV_FB_TOTAL", "DCGM_FI_DEV_BAR1_TOTAL"})


def is_counter_name(name: str) -> bool:
    """Whether a metric the catalog doesn't know is a counter, by its name.

    Prometheus' convention is a lower-case ``_total`` suffix (names are case-sensitive, and the
    OpenMetrics spec appends exactly ``_total``).  DCGM field names are upper-case: dcgm-exporter
    types its ``*_TOTAL`` fields as counters (``*_ECC_*_TOTAL``, ``*_ERROR_COUNT_TOTAL`` in its
    default-counters.csv) except the memory capacities (:data:`_DCGM_CAPACITY`) and the NVLink
    bandwidth fields, which DCGM publishes as rates (:data:`NVLINK_RATE_FIELD`).  Any other
    casing (``_Total``) is not a counter.
    """
    if name.endswith("_total"):
        return True
    if _DCGM_RATE_VALUED.fullmatch(name):
        return False
    return name.startswith("DCGM_") and name.endswith("_TOTAL") and name not in _DCGM_CAPACITY


def spec_for(name: str) -> MetricSpec:
    """The catalog entry, or a gauge ranged by its data for a metric the catalog doesn't know."""
    if name in BY_NAME:
        return BY_NAME[name]
    kind = "counter" if is_counter_name(name) else "gauge"
    return MetricSpec(name, "dcgm" if name.startswith("DCGM_") else "node", kind, "avg")


def caveat(name: str) -> str | None:
    """Why a finding on this metric is alerted and never drained (:attr:`MetricSpec.caveat`)."""
    return spec_for(name).caveat


def job_can_cause(name: str) -> str | None:
    """Why the job itself can move the metric ``name`` on a machine, or None if it cannot
    (:attr:`MetricSpec.job_can_cause`)."""
    return spec_for(name).job_can_cause


def specs_for(priority: list[str]) -> list[MetricSpec]:
    """What to fetch for the metrics of ``priority``: their catalog entries, and the source
    counter of each indicator counted in the window (:attr:`MetricSpec.counted_in_window`),
    which the detector reads for it even when a site's own priority leaves it out."""
    specs = [spec_for(m) for m in priority]
    names = {s.name for s in specs}
    for s in list(specs):
        if s.counted_in_window and s.derived and s.derived[0] not in names:
            names.add(s.derived[0])
            specs.append(spec_for(s.derived[0]))
    return specs
