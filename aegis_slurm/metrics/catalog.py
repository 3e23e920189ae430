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
* ``"events"``: a sparse error counter (replays, link-down events): evidence on an absolute,
  logarithmic scale — any sustained error rate where the peers have none is an outlier, whatever
  the range; its magnitude counts by decades.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MetricSpec:
    name: str
    source: str  # "dcgm" (label Hostname) | "node" (node_exporter, label instance)
    kind: str  # "gauge" | "counter"
    agg: str  # per-node aggregation over GPUs / devices / ports: "min" | "max" | "sum" | "avg"
    lo: float | None = None
    hi: float | None = None
    scale: str = "physical"  # "physical" | "job" | "events" (see the module's docstring)
    #: a metric derived in PromQL from an exporter's series (``None``: the series itself):
    #: ``(exporter metric, PromQL over {sel} = that metric's selector for the job's nodes)``
    derived: tuple[str, str] | None = None


#: Recording-rule style name (level:metric:operations) of the lowest per-port IB receive rate.
PORT_MIN = "instance:node_infiniband_port_data_received_bytes:rate_min_port"

#: The lowest per-GPU rate of dcgm-exporter's default NVLink counter.
NVLINK_MIN = "Hostname:DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL:rate_min_gpu"

#: The default set: the issue's twelve metrics and the per-device minima of the IB receive rate
#: and of the NVLink counter.
DEFAULT_METRICS: tuple[MetricSpec, ...] = (
    MetricSpec("DCGM_FI_DEV_GPU_UTIL", "dcgm", "gauge", "min", 0, 100),
    MetricSpec("DCGM_FI_DEV_POWER_USAGE", "dcgm", "gauge", "min", 0, 700),
    MetricSpec("DCGM_FI_DEV_SM_CLOCK", "dcgm", "gauge", "min", 0, 2100),
    MetricSpec("DCGM_FI_DEV_GPU_TEMP", "dcgm", "gauge", "max", 20, 100),
    MetricSpec("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "dcgm", "gauge", "min", 0, 1, "job"),
    MetricSpec("DCGM_FI_PROF_PCIE_TX_BYTES", "dcgm", "gauge", "min", 0, 32e9, "job"),
    MetricSpec("DCGM_FI_PROF_NVLINK_TX_BYTES", "dcgm", "gauge", "min", 0, 300e9, "job"),
    MetricSpec("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "dcgm", "counter", "sum", 0, 50, "events"),
    # in dcgm-exporter's default counters (DCGM_FI_PROF_NVLINK_TX_BYTES is not): the slowest
    # GPU's NVLink rate; the job scale makes its unit (bytes or KiB per DCGM version) immaterial
    MetricSpec(
        NVLINK_MIN,
        "dcgm",
        "gauge",
        "min",
        0,
        1e12,
        "job",
        ("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "rate({sel}[{range}s])"),
    ),
    MetricSpec(
        "node_infiniband_port_data_received_bytes_total", "node", "counter", "sum", 0, 50e9, "job"
    ),
    MetricSpec("node_infiniband_link_downed_total", "node", "counter", "sum", 0, 0.05, "events"),
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
    ),
    MetricSpec("node_load1", "node", "gauge", "avg", 0, 256),
    MetricSpec("node_memory_MemAvailable_bytes", "node", "gauge", "avg", 0, 2e12),
)

BY_NAME: dict[str, MetricSpec] = {m.name: m for m in DEFAULT_METRICS}

#: DCGM reports "no value" as large sentinels (DCGM_INT64_BLANK = 0x7ffffff0 ... and
#: DCGM_FP64_BLANK = 140737488355328.0); dcgm-exporter passes them through (its README's sample
#: shows ``DCGM_FI_DEV_MEMORY_TEMP ... 9223372036854775794``).  At or above this: a blank.
DCGM_BLANK = 1.4e14


def spec_for(name: str) -> MetricSpec:
    """The catalog entry, or a gauge ranged by its data for a metric the catalog doesn't know."""
    if name in BY_NAME:
        return BY_NAME[name]
    kind = "counter" if name.endswith("_total") else "gauge"
    return MetricSpec(name, "dcgm" if name.startswith("DCGM_") else "node", kind, "avg")
