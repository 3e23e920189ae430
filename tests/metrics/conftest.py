"""A real Prometheus on loopback, loaded with a job's series through promtool.

The series are written in the exporters' own label layout (dcgm-exporter: one series per GPU with
``gpu``, ``UUID``, ``Hostname``; node_exporter: ``instance`` and, for InfiniBand, ``device`` and
``port`` as in node_exporter's e2e fixture), as OpenMetrics, turned into TSDB blocks by
``promtool tsdb create-blocks-from openmetrics`` and served by Debian's ``prometheus``.  The
fixture stops Prometheus (terminate, then kill) whatever the test did.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from aegis_slurm.metrics.catalog import LINK_RATE, NVLINK_ERROR_COUNTERS, spec_for
from aegis_slurm.simulate.metrics import Truth, simulate_job

#: dcgm-exporter README's DCGM_FI_DEV_MEMORY_TEMP sample (tests/fixtures/metrics/PROVENANCE.md)
DCGM_BLANK_SAMPLE = 9223372036854775794.0


@dataclass
class PromJob:
    url: str
    df: pl.DataFrame
    truth: Truth
    nodes: list[str]
    start: float
    end: float


#: Per-node values of the Ethernet link series loaded into the test Prometheus (two NICs up;
#: totals split evenly over the two NICs by :func:`openmetrics`).
NETWORK = {
    "node_network_up": 2.0,
    "node_network_carrier_changes_total": 4.0,
    "node_network_receive_errs_total": 10.0,
}
#: Series the simulator does not emit, loaded too (per node; GPU ones split over two GPUs).
EXTRA = {
    **NETWORK,
    **dict.fromkeys(NVLINK_ERROR_COUNTERS, 6.0),
    LINK_RATE: 50e9,  # one NDR port (node_exporter serves it per device and port)
    # HBM temperature, per GPU as dcgm-exporter serves it (its README's sample has the family
    # and a blank reading of it: tests/fixtures/metrics/dcgm-exporter-readme-metrics.txt)
    "DCGM_FI_DEV_MEMORY_TEMP": 71.0,
    # rounds 7-8: a NIC's pause sent (mlx5 via the ethtool collector, read by name pattern),
    # PFC stall events, host memory errors, softnet drops, RDMA out-of-sequence packets, and
    # the GPUs' PCIe link
    "node_ethtool_transmitted_prio3_pause_duration": 1e6,
    "node_ethtool_transmitted_pause_storm_error_events": 0.0,
    "node_edac_correctable_errors_total": 3.0,
    "node_edac_uncorrectable_errors_total": 0.0,
    "node_softnet_dropped_total": 41.0,
    "node_netstat_Tcp_RetransSegs": 227.0,
    "node_infiniband_out_of_sequence_packets_received_total": 0.0,
    "DCGM_FI_DEV_PCIE_LINK_WIDTH": 16.0,
    "DCGM_FI_DEV_PCIE_LINK_GEN": 5.0,
    # round 9: local error counters and states (quiet on a healthy node)
    "node_network_transmit_errs_total": 0.0,
    "node_infiniband_symbol_error_total": 12.0,
    "node_infiniband_link_error_recovery_total": 1.0,
    "node_infiniband_local_link_integrity_errors_total": 0.0,
    "node_infiniband_excessive_buffer_overrun_errors_total": 0.0,
    "node_infiniband_state_id": 4.0,
    "node_vmstat_oom_kill": 0.0,
    "node_filesystem_device_error": 0.0,
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": 0.0,
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": 0.0,
    "DCGM_FI_DEV_RETIRED_DBE": 0.0,
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": 4.0,
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": 0.0,
    # round 10: NVLink 5's counters (a healthy link's FEC repairs some symbol errors)
    "DCGM_FI_DEV_NVLINK_RX_SYMBOL_ERROR_TOTAL": 4000.0,
    "DCGM_FI_DEV_NVLINK_EFFECTIVE_ERROR_TOTAL": 0.0,
    "DCGM_FI_DEV_NVLINK_RECOVERY_EVENT_TOTAL": 0.0,
    "DCGM_FI_DEV_NVLINK_RECOVERY_FAILED_TOTAL": 0.0,
    # the same fields by their names before DCGM 4.6 (a site lists one or the other)
    "DCGM_FI_DEV_NVLINK_COUNT_RX_SYMBOL_ERRORS": 4000.0,
    "DCGM_FI_DEV_NVLINK_COUNT_EFFECTIVE_ERRORS": 0.0,
    "DCGM_FI_DEV_NVLINK_COUNT_LINK_RECOVERY_EVENTS": 0.0,
    "DCGM_FI_DEV_NVLINK_COUNT_LINK_RECOVERY_FAILED_EVENTS": 0.0,
    # the time collector's current clock source (an info series; no clocksource label here:
    # not a slow one)
    "node_time_clocksource_current_info": 1.0,
    # round 11: the clock-event reasons, the driver capping power (0x4): no hardware slowdown
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": 4.0,
    # round 12: the GPUs' memory clock (HBM3, an H100's 2619 MHz)
    "DCGM_FI_DEV_MEM_CLOCK": 2619.0,
    # and the time no task could make progress for I/O (PSI full; seconds since boot)
    "node_pressure_io_stalled_seconds_total": 159.2,
    # round 13: the NICs' speed (two 100 GbE ports: 1.25e10 bytes/s each) and the time no
    # task could progress for memory (PSI full; seconds since boot)
    "node_network_speed_bytes": 2.5e10,
    "node_pressure_memory_stalled_seconds_total": 12.0,
    # round 14: memory the kernel took offline as corrupted (none)
    "node_memory_HardwareCorrupted_bytes": 0.0,
    # round 15: the CPU packages' thermal throttles since boot (a history, no rate)
    "node_cpu_package_throttles_total": 36.0,
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _per_gpu(agg: str, v: float) -> tuple[float, float]:
    """Two GPUs whose per-node aggregate (by the catalog's function) is ``v``."""
    if agg == "min":
        return v, v * 1.05 + 1
    if agg == "max":
        return v, v - 1
    if agg == "sum":
        return v / 2, v / 2
    return v, v


def openmetrics(df: pl.DataFrame) -> str:
    out = []
    for (metric,), part in df.sort("metric", "node", "time").group_by(
        ["metric"], maintain_order=True
    ):
        spec = spec_for(str(metric))
        out.append(f"# TYPE {metric} unknown")
        for (node,), s in part.group_by(["node"], maintain_order=True):
            ts = (s["time"].dt.epoch("ms") / 1000).to_list()
            vals = s["value"].to_list()
            if spec.source == "dcgm":
                for gpu in (0, 1):
                    lab = (
                        f'gpu="{gpu}",UUID="GPU-{node}-{gpu}",Hostname="{node}",'
                        f'instance="{node}:9400",job="dcgm"'
                    )
                    out += [
                        f"{metric}{{{lab}}} {_per_gpu(spec.agg, v)[gpu]!r} {t:.3f}"
                        for t, v in zip(ts, vals, strict=True)
                    ]
            elif metric.startswith("node_network"):
                # two fabric NICs carry the series; a container's veth (its counters racing,
                # up) and loopback (down) must be left out by the catalog's device matcher
                for dev, extra in (
                    ("eth0", 0.0),
                    ("ens1f0np0", 0.0),
                    ("veth1a2b", 1.0),
                    ("lo", 0.0),
                ):
                    lab = f'device="{dev}",instance="{node}:9100",job="node"'
                    if metric == "node_network_up":
                        per_dev = [float(dev != "lo")] * len(vals)
                    else:
                        per_dev = [v / 2 + extra * 7 * i for i, v in enumerate(vals)]
                    out += [
                        f"{metric}{{{lab}}} {v!r} {t:.3f}" for t, v in zip(ts, per_dev, strict=True)
                    ]
            elif metric.startswith("node_infiniband"):
                lab = f'device="mlx5_0",port="1",instance="{node}:9100",job="node"'
                out += [f"{metric}{{{lab}}} {v!r} {t:.3f}" for t, v in zip(ts, vals, strict=True)]
            else:
                lab = f'instance="{node}:9100",job="node"'
                out += [f"{metric}{{{lab}}} {v!r} {t:.3f}" for t, v in zip(ts, vals, strict=True)]
    out.append("# EOF")
    return "\n".join(out) + "\n"


def start_prometheus(data: Path, tmp: Path) -> tuple[subprocess.Popen, str]:
    cfg = tmp / "prometheus.yml"
    cfg.write_text("global:\n  scrape_interval: 15s\nscrape_configs: []\n")
    port = free_port()
    log = (tmp / "prometheus.log").open("w")
    proc = subprocess.Popen(
        [
            "prometheus",
            f"--config.file={cfg}",
            f"--storage.tsdb.path={data}",
            "--storage.tsdb.retention.time=10y",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=tmp,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"prometheus exited: {(tmp / 'prometheus.log').read_text()[-500:]}")
        try:
            with urllib.request.urlopen(url + "/-/ready", timeout=2) as r:
                if r.status == 200:
                    return proc, url
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise RuntimeError("prometheus did not become ready within 60 s")


@contextmanager
def served_prometheus(openmetrics_text: str, tmp: Path) -> Iterator[str]:
    """The OpenMetrics text loaded by ``promtool tsdb create-blocks-from openmetrics`` into a
    real Prometheus on loopback (Debian's; skipped where it is not installed): its URL, and
    the server stopped afterwards whatever the test did."""
    if shutil.which("prometheus") is None or shutil.which("promtool") is None:
        pytest.skip("Debian's prometheus package is not installed (tools/install-test-deps.sh)")
    (tmp / "in.om").write_text(openmetrics_text)
    blocks = ["promtool", "tsdb", "create-blocks-from", "openmetrics"]
    subprocess.run(
        [*blocks, str(tmp / "in.om"), str(tmp / "data")],
        check=True,
        capture_output=True,
        timeout=300,
    )
    proc, url = start_prometheus(tmp / "data", tmp)
    try:
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@pytest.fixture(scope="module")
def prom_job(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PromJob]:
    if shutil.which("prometheus") is None or shutil.which("promtool") is None:
        pytest.skip("Debian's prometheus package is not installed (tools/install-test-deps.sh)")
    tmp = tmp_path_factory.mktemp("prom")
    # recent enough that Prometheus' head block and retention accept it
    start = datetime.fromtimestamp((time.time() // 3600 - 3) * 3600, UTC)
    df, truth = simulate_job(8, 45, "slow_gpu", seed=21, start=start)
    # one reading DCGM could not take, served as dcgm-exporter serves it (its README's sample)
    first = df.filter((pl.col("node") == "gpu0003") & (pl.col("metric") == "DCGM_FI_DEV_GPU_TEMP"))
    df = df.with_columns(
        pl.when(
            (pl.col("node") == "gpu0003")
            & (pl.col("metric") == "DCGM_FI_DEV_GPU_TEMP")
            & (pl.col("time") == first["time"].min())
        )
        .then(pl.lit(DCGM_BLANK_SAMPLE))
        .otherwise(pl.col("value"))
        .alias("value")
    )
    # the Ethernet link series (the simulator has IB only): every node's two NICs up, their
    # carrier-change and receive-error totals steady; the NVLink error counters steady
    base = df.filter(pl.col("metric") == "node_load1").select("time", "node")
    df = pl.concat(
        [df, *(base.with_columns(metric=pl.lit(m), value=pl.lit(v)) for m, v in EXTRA.items())],
        how="diagonal_relaxed",
    )
    with served_prometheus(openmetrics(df), tmp) as url:
        t = df["time"].dt.epoch("ms") / 1000
        nodes = sorted(df["node"].unique().to_list())
        yield PromJob(url, df, truth, nodes, float(t.min()), float(t.max()))
