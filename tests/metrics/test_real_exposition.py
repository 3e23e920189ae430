"""The query path over series recorded from the real exporters' own output.

node_exporter's e2e fixture (InfiniBand ports of an ``mlx4_0`` HCA, load) and dcgm-exporter's README
sample (``curl localhost:9400/metrics``, including DCGM's blank value) are loaded into a real
Prometheus, with the ``instance`` label Prometheus adds at scrape time (dcgm-exporter's sample
predates its ``Hostname`` label, so the mapping is configured to ``instance`` as a site would).
Sample lines are kept verbatim but for the whitespace after commas (OpenMetrics is strict).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from aegis_slurm.metrics import PromConfig
from aegis_slurm.metrics.align import align
from aegis_slurm.metrics.catalog import MetricSpec, spec_for
from aegis_slurm.metrics.prometheus import fetch_job

from .conftest import start_prometheus

FIX = Path(__file__).parents[1] / "fixtures" / "metrics"
HOSTS = {"node": "hostA:9100", "dcgm": "hostA:9400"}


def recorded(t0: float) -> str:
    out = []
    files = (
        ("node", "node-exporter-e2e-output-excerpt.txt"),
        ("dcgm", "dcgm-exporter-readme-metrics.txt"),
    )
    for source, name in files:
        for line in (FIX / name).read_text().splitlines():
            if not line.startswith(("node_", "DCGM_")):
                continue
            series, value = line.rsplit(" ", 1)
            series = series.replace(", ", ",")
            inst = f'instance="{HOSTS[source]}"'
            series = series[:-1] + f",{inst}}}" if series.endswith("}") else f"{series}{{{inst}}}"
            out += [f"{series} {value} {t0 + 15 * k:.3f}" for k in range(4)]
    # OpenMetrics wants each family's samples together
    out.sort(key=lambda s: s.split("{", 1)[0])
    return "\n".join(out) + "\n# EOF\n"


@pytest.fixture(scope="module")
def real_prom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, float]]:
    import shutil

    if shutil.which("prometheus") is None or shutil.which("promtool") is None:
        pytest.skip("Debian's prometheus package is not installed (tools/install-test-deps.sh)")
    tmp = tmp_path_factory.mktemp("realprom")
    t0 = (time.time() // 3600 - 2) * 3600
    (tmp / "in.om").write_text(recorded(t0))
    subprocess.run(
        [
            "promtool",
            "tsdb",
            "create-blocks-from",
            "openmetrics",
            str(tmp / "in.om"),
            str(tmp / "data"),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    proc, url = start_prometheus(tmp / "data", tmp)
    try:
        yield url, t0
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def test_infiniband_ports_are_summed_per_node(real_prom: tuple[str, float]) -> None:
    url, t0 = real_prom
    cfg = PromConfig(url, dcgm_label="instance", dcgm_value="{node}:9400")
    specs = [spec_for("node_infiniband_port_data_received_bytes_total"), spec_for("node_load1")]
    df = fetch_job(cfg, ["hostA"], t0, t0 + 45, specs)
    got = {m: df.filter(df["metric"] == m)["value"].to_list() for m in df["metric"].unique()}
    # port 1 (1.8527668e+07) + port 2 (0), as node_exporter's fixture has them
    assert got["node_infiniband_port_data_received_bytes_total"] == [1.8527668e07] * 4
    assert got["node_load1"] == [0.21] * 4


def test_dcgm_sample_and_its_blank(real_prom: tuple[str, float]) -> None:
    url, t0 = real_prom
    cfg = PromConfig(url, dcgm_label="instance", dcgm_value="{node}:9400")
    specs = [
        spec_for("DCGM_FI_DEV_SM_CLOCK"),
        MetricSpec("DCGM_FI_DEV_MEMORY_TEMP", "dcgm", "gauge", "max"),
    ]
    df = fetch_job(cfg, ["hostA"], t0, t0 + 45, specs)
    al = align(df, step=15.0, nodes=["hostA"])
    assert al.data["DCGM_FI_DEV_SM_CLOCK"].tolist() == [[139.0] * 4]
    # MEMORY_TEMP 9223372036854775794 is DCGM's "no reading": dropped, counted, never a value
    assert al.dropped["DCGM blank value (no reading)"] == 4
    assert "DCGM_FI_DEV_MEMORY_TEMP" not in al.data
