"""The query path over series recorded from the real exporters' own output.

node_exporter's e2e fixture (InfiniBand ports of an ``mlx4_0`` HCA, load) and dcgm-exporter's README
sample (``curl localhost:9400/metrics``, including DCGM's blank value) are loaded into a real
Prometheus, with the ``instance`` label Prometheus adds at scrape time (dcgm-exporter's sample
predates its ``Hostname`` label, so the mapping is configured to ``instance`` as a site would).
Sample lines are kept verbatim but for the whitespace after commas (OpenMetrics is strict).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from aegis_slurm.metrics import PromConfig
from aegis_slurm.metrics.align import align
from aegis_slurm.metrics.catalog import PORT_MIN, MetricSpec, spec_for
from aegis_slurm.metrics.prometheus import fetch_job

from .conftest import served_prometheus

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
    t0 = (time.time() // 3600 - 2) * 3600
    with served_prometheus(recorded(t0), tmp_path_factory.mktemp("realprom")) as url:
        yield url, t0


def raw_frame(rows: list[tuple]) -> pl.DataFrame:
    """``(time, node, metric, device, value)`` rows as the corpora's raw long frame, for the
    scorer's offline models of a derived metric's PromQL (``blind_eval``)."""
    schema = {
        "time": pl.Datetime("ms", "UTC"),
        "node": pl.String,
        "metric": pl.String,
        "device": pl.String,
        "value": pl.Float64,
    }
    return pl.DataFrame(rows, schema=schema, orient="row")


def served_and_fetched(
    tmp: Path, lines: list[str], nodes: list[str], t0: float, specs: list[MetricSpec]
) -> pl.DataFrame:
    """The OpenMetrics ``lines`` loaded into a real Prometheus (promtool), and the job's
    ``specs`` over ``[t0 + 60, t0 + 600]`` fetched from it by the real query path."""
    with served_prometheus("\n".join(lines) + "\n# EOF\n", tmp) as url:
        return fetch_job(PromConfig(url), nodes, t0 + 60, t0 + 600, specs)


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


def test_the_lowest_port_rate_shows_one_port_down(tmp_path: Path) -> None:
    # node_exporter's recorded IB series (device mlx4_0, ports 1 and 2) on three hosts, advancing
    # at 1 GB/s per port for 10 minutes; on hostC port 2 stops after 5 minutes (link down).  The
    # summed rate drops by half there; the lowest per-port rate drops to 0.
    import shutil

    if shutil.which("prometheus") is None or shutil.which("promtool") is None:
        pytest.skip("Debian's prometheus package is not installed (tools/install-test-deps.sh)")
    name = "node_infiniband_port_data_received_bytes_total"
    rows = [
        line.rsplit(" ", 1)
        for line in (FIX / "node-exporter-e2e-output-excerpt.txt").read_text().splitlines()
        if line.startswith(name + "{")
    ]
    assert len(rows) == 2  # the recorded ports
    t0 = (time.time() // 3600 - 2) * 3600
    out = [f"# TYPE {name} counter"]
    for host in ("hostA", "hostB", "hostC"):
        for series, first in rows:
            port2 = 'port="2"' in series
            for k in range(41):
                up = k if not (host == "hostC" and port2) else min(k, 20)
                v = float(first) + 1e9 * 15 * up
                lab = series[:-1] + f',instance="{host}:9100"}}'
                out.append(f"{lab} {v!r} {t0 + 15 * k:.3f}")
    specs = [spec_for(PORT_MIN), spec_for(name)]
    df = served_and_fetched(tmp_path, out, ["hostA", "hostB", "hostC"], t0, specs)
    al = align(df, step=15.0)
    low = al.data[PORT_MIN]
    a, c = al.nodes.index("hostA"), al.nodes.index("hostC")
    late = al.times >= t0 + 420  # two minutes after hostC's port 2 stopped
    assert np.allclose(low[a, late], 1e9, rtol=0.05)
    assert np.allclose(low[c, late], 0.0, atol=1e6)


def test_the_pause_a_nic_sends_is_summed_over_its_priorities_and_nics(tmp_path: Path) -> None:
    # mlx5's PFC statistics (the driver's own names, PROVENANCE.md) as node_exporter's ethtool
    # collector exposes them (untyped), two NICs on each of three hosts: every NIC pauses its
    # link 100 us/s on priority 3 and 10 us/s globally and *receives* 400,000 us/s of pause (a
    # congested network: not the node's doing); hostC's second NIC starts pausing 60 % of the
    # time after 5 minutes.  The derived series reads the pause sent, whatever the priority.
    import shutil

    from aegis_slurm.metrics.catalog import PAUSE_SENT

    from .test_catalog import node_exporter_ethtool_name

    if shutil.which("prometheus") is None or shutil.which("promtool") is None:
        pytest.skip("Debian's prometheus package is not installed (tools/install-test-deps.sh)")
    stats = (FIX / "mlx5-ethtool-pfc-stat-names.txt").read_text().splitlines()
    rates = {"tx_prio3_pause_duration": 100.0, "tx_global_pause_duration": 10.0}
    rates["rx_prio3_pause_duration"] = 4e5
    assert set(rates) <= set(stats)
    t0 = (time.time() // 3600 - 2) * 3600
    out = []
    for stat, rate in rates.items():
        name = node_exporter_ethtool_name(stat)
        out.append(f"# TYPE {name} unknown")
        for host in ("hostA", "hostB", "hostC"):
            for nic in ("ens20np0", "ens21np0"):
                storm = host == "hostC" and nic == "ens21np0" and stat.startswith("tx_prio3")
                v = 0.0
                for k in range(41):
                    lab = f'{name}{{device="{nic}",instance="{host}:9100"}}'
                    out.append(f"{lab} {v!r} {t0 + 15 * k:.3f}")
                    v += 15 * (6e5 if storm and k >= 20 else rate)
    nodes = ["hostA", "hostB", "hostC"]
    df = served_and_fetched(tmp_path, out, nodes, t0, [spec_for(PAUSE_SENT)])
    al = align(df, step=15.0)
    sent = al.data[PAUSE_SENT]
    a, c = al.nodes.index("hostA"), al.nodes.index("hostC")
    late = al.times >= t0 + 420  # two minutes after hostC's NIC began pausing
    assert np.allclose(sent[a], 2 * (100.0 + 10.0), rtol=0.01)  # 2 NICs x (PFC + global)
    assert np.allclose(sent[c, late], 6e5 + 100.0 + 3 * 10.0, rtol=0.01)


def test_a_slow_clock_source_is_read_from_the_time_collectors_info_series(tmp_path: Path) -> None:
    # node_exporter's time collector as recorded (one info series per node labelled with the
    # current clock source, value 1); hostB's kernel marks the TSC unstable after 5 minutes
    # and switches to the HPET: its tsc series ends and an hpet series begins.  The derived
    # series is 0 on a TSC (or arm64's arch_sys_counter) and 1 on the HPET, through a real
    # Prometheus and the real query path.
    import shutil

    from aegis_slurm.metrics.catalog import CLOCKSOURCE_SERIES, CLOCKSOURCE_SLOW

    if shutil.which("prometheus") is None or shutil.which("promtool") is None:
        pytest.skip("Debian's prometheus package is not installed (tools/install-test-deps.sh)")
    recorded = (FIX / "node-exporter-e2e-output-excerpt.txt").read_text()
    assert f'{CLOCKSOURCE_SERIES}{{clocksource="tsc",device="0"}} 1' in recorded
    t0 = (time.time() // 3600 - 2) * 3600
    out = [f"# TYPE {CLOCKSOURCE_SERIES} gauge"]
    for host, source in (("hostA", "tsc"), ("hostB", "tsc"), ("hostC", "arch_sys_counter")):
        for k in range(41):
            now = source if host != "hostB" or k < 20 else "hpet"
            lab = f'clocksource="{now}",device="0",instance="{host}:9100"'
            out.append(f"{CLOCKSOURCE_SERIES}{{{lab}}} 1 {t0 + 15 * k:.3f}")
    nodes = ["hostA", "hostB", "hostC"]
    df = served_and_fetched(tmp_path, out, nodes, t0, [spec_for(CLOCKSOURCE_SLOW)])
    al = align(df, step=15.0)
    slow = al.data[CLOCKSOURCE_SLOW]
    a, b, c = (al.nodes.index(n) for n in nodes)
    before, after = al.times < t0 + 300, al.times >= t0 + 300 + 30
    assert np.all(slow[a] == 0) and np.all(slow[c] == 0)
    assert np.all(slow[b, before] == 0) and np.all(slow[b, after] == 1)


def test_dcgm_series_under_the_renamed_hostname_label_are_found(tmp_path: Path) -> None:
    # dcgm-exporter after 4.8.2 labels its series `hostname`, no longer `Hostname` (NVIDIA/
    # dcgm-exporter #655, whose commit the recorded README excerpt is from): with the default
    # configuration the GPU series are still found, through a real Prometheus
    import shutil

    if shutil.which("prometheus") is None or shutil.which("promtool") is None:
        pytest.skip("Debian's prometheus package is not installed (tools/install-test-deps.sh)")
    t0 = (time.time() // 3600 - 2) * 3600
    out = ["# TYPE DCGM_FI_DEV_GPU_TEMP gauge", "# TYPE node_load1 gauge"]
    for host in ("hostA", "hostB"):
        for k in range(41):
            for gpu in (0, 1):
                lab = f'gpu="{gpu}",hostname="{host}",instance="{host}:9400"'
                out.append(f"DCGM_FI_DEV_GPU_TEMP{{{lab}}} {60 + gpu} {t0 + 15 * k:.3f}")
            out.append(f'node_load1{{instance="{host}:9100"}} 3 {t0 + 15 * k:.3f}')
    nodes = ["hostA", "hostB"]
    specs = [spec_for("DCGM_FI_DEV_GPU_TEMP"), spec_for("node_load1")]
    assert PromConfig("http://p").dcgm_label == "Hostname"  # the default, before #655
    df = served_and_fetched(tmp_path, out, nodes, t0, specs)
    temp = df.filter(pl.col("metric") == "DCGM_FI_DEV_GPU_TEMP")
    assert set(temp["node"]) == set(nodes) and temp["value"].max() == 61.0  # max over GPUs
    assert df.filter(pl.col("metric") == "node_load1").height == temp.height


def test_a_rolling_dcgm_exporter_upgrade_leaves_no_node_judged_on_absence(tmp_path: Path) -> None:
    # the upgrade rolls through the job's nodes (session-12 review): hostB's dcgm-exporter is
    # upgraded five minutes in and labels its series `hostname` from then on, while hostA's
    # still says `Hostname`; hostB's GPU series must still cover the whole window, each
    # sample once
    import shutil

    if shutil.which("prometheus") is None or shutil.which("promtool") is None:
        pytest.skip("Debian's prometheus package is not installed (tools/install-test-deps.sh)")
    t0 = (time.time() // 3600 - 2) * 3600
    out = ["# TYPE DCGM_FI_DEV_GPU_TEMP gauge"]
    for host in ("hostA", "hostB"):
        for k in range(41):
            label = "hostname" if host == "hostB" and k >= 20 else "Hostname"
            lab = f'gpu="0",{label}="{host}",instance="{host}:9400"'
            out.append(f"DCGM_FI_DEV_GPU_TEMP{{{lab}}} {60 + k} {t0 + 15 * k:.3f}")
    df = served_and_fetched(
        tmp_path, out, ["hostA", "hostB"], t0, [spec_for("DCGM_FI_DEV_GPU_TEMP")]
    )
    a, b = (df.filter(pl.col("node") == h).sort("time") for h in ("hostA", "hostB"))
    assert b.height == a.height > 30
    assert b["time"].to_list() == a["time"].to_list()
    # at the switch step the old name's last sample is still within the lookback: that one
    # step may carry the previous scrape's value, once
    differ = [i for i, (x, y) in enumerate(zip(a["value"], b["value"], strict=True)) if x != y]
    assert len(differ) <= 1 and all(b["value"][i] == a["value"][i - 1] for i in differ)
