"""The online path against a real Prometheus on loopback (see conftest.py), and its failures."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from datetime import datetime

import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner

from aegis_slurm.cli import main
from aegis_slurm.errors import ServiceError
from aegis_slurm.metrics import PromConfig, analyse, diagnose_job_metrics, iso, to_json
from aegis_slurm.metrics.catalog import spec_for
from aegis_slurm.metrics.priority import default_priority
from aegis_slurm.metrics.prometheus import fetch_job

from .conftest import PromJob, free_port


def test_query_range_gives_back_the_recorded_series(prom_job: PromJob) -> None:
    specs = [spec_for("DCGM_FI_DEV_SM_CLOCK"), spec_for("node_load1")]
    df = fetch_job(PromConfig(prom_job.url), prom_job.nodes, prom_job.start, prom_job.end, specs)
    assert sorted(df["node"].unique()) == prom_job.nodes
    assert set(df["metric"].unique()) == {"DCGM_FI_DEV_SM_CLOCK", "node_load1"}
    # min over the node's two GPUs is the recorded node value
    got = df.filter(df["metric"] == "DCGM_FI_DEV_SM_CLOCK")["value"]
    rec = prom_job.df.filter(prom_job.df["metric"] == "DCGM_FI_DEV_SM_CLOCK")["value"]
    assert got.min() == pytest.approx(rec.min(), rel=1e-9)


def test_prometheus_verdict_matches_the_offline_one(prom_job: PromJob) -> None:
    doc = diagnose_job_metrics(prom_job.url, prom_job.nodes, prom_job.start, prom_job.end)
    offline, _ = analyse(prom_job.df)
    assert [f["node"] for f in doc["faulty"]] == [prom_job.truth.node]
    assert [f["node"] for f in to_json(offline)["faulty"]] == [prom_job.truth.node]
    # Prometheus samples "the last value within 22 s" on its own grid, offline takes the nearest
    # sample: the same node, both after the onset (the first metric and minute may differ when a
    # checkpoint pause interrupts the run on one grid and not the other)
    online_t = datetime.fromisoformat(doc["faulty"][0]["first_detected"]).timestamp()
    for t in (online_t, offline.faulty[0].first_detected):
        assert prom_job.truth.onset <= t <= prom_job.truth.onset + 10 * 60
    assert doc["windows"] > 100


def test_cli_contract_over_prometheus(prom_job: PromJob) -> None:
    nodes = ",".join(prom_job.nodes)
    r = CliRunner().invoke(
        main,
        [
            "minder",
            "--prometheus",
            prom_job.url,
            "--job",
            "4242",
            "--nodes",
            nodes,
            "--start",
            iso(prom_job.start),
            "--end",
            iso(prom_job.end),
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert set(doc) == {"faulty", "windows", "departed", "collateral"}
    assert [set(f) for f in doc["faulty"]] == [
        {"node", "first_detected", "metric", "score", "job_can_cause", "caveat"}
    ]
    assert doc["faulty"][0]["node"] == prom_job.truth.node
    assert doc["faulty"][0]["first_detected"].endswith("Z")


def test_a_node_missing_from_prometheus_is_flagged(prom_job: PromJob) -> None:
    doc = diagnose_job_metrics(
        prom_job.url, [*prom_job.nodes, "ghost01"], prom_job.start, prom_job.end
    )
    assert "ghost01" in [f["node"] for f in doc["faulty"]]


def test_a_bad_query_is_refused_at_once(prom_job: PromJob) -> None:
    cfg = PromConfig(prom_job.url, dcgm_label="bad label")
    with pytest.raises(ServiceError, match="refused the query"):
        fetch_job(cfg, ["a"], prom_job.start, prom_job.end, [spec_for("DCGM_FI_DEV_SM_CLOCK")])


def test_down_prometheus_is_an_error_not_a_verdict() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    with pytest.raises(ServiceError, match=r"unavailable after 2 attempt\(s\).*not a pass"):
        fetch_job(PromConfig(url, retries=1, backoff=0.01), ["a"], 0, 600, [spec_for("node_load1")])
    r = CliRunner().invoke(
        main,
        [
            "minder",
            "--prometheus",
            url,
            "--job",
            "1",
            "--nodes",
            "a[1-3]",
            "--start",
            "2026-01-05T08:00:00Z",
            "--end",
            "2026-01-05T08:10:00Z",
            "--json",
        ],
    )
    assert r.exit_code == 1
    assert r.stdout == ""
    assert r.stderr.startswith("aegis-slurm: error: Prometheus at ") and r.stderr.count("\n") == 1


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A loopback socket that accepts connections and never answers: a hung Prometheus."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])
            except OSError:
                continue

    th = threading.Thread(target=accept, daemon=True)
    th.start()
    try:
        yield f"http://127.0.0.1:{srv.getsockname()[1]}"
    finally:
        stop.set()
        th.join(timeout=2)
        for c in held:
            c.close()
        srv.close()


def test_slow_prometheus_times_out_with_a_clear_error(silent_server: str) -> None:
    cfg = PromConfig(silent_server, timeout=0.3, retries=1, backoff=0.01)
    with pytest.raises(ServiceError, match=r"no answer within 0.3s"):
        fetch_job(cfg, ["a"], 0, 600, [spec_for("node_load1")])


def test_priority_metrics_all_queryable(prom_job: PromJob) -> None:
    specs = [spec_for(m) for m in default_priority()]
    df = fetch_job(PromConfig(prom_job.url), prom_job.nodes, prom_job.start, prom_job.end, specs)
    assert set(df["metric"].unique()) == {s.name for s in specs}


def test_the_link_series_count_the_machines_nics_not_its_virtual_interfaces(
    prom_job: PromJob,
) -> None:
    """Each node serves node_network_* for two NICs, a container veth (up; its totals racing)
    and loopback (down): through the real PromQL only the two NICs count."""
    from .conftest import NETWORK

    specs = [spec_for(m) for m in NETWORK]
    df = fetch_job(PromConfig(prom_job.url), prom_job.nodes, prom_job.start, prom_job.end, specs)
    assert df.height > 0 and set(df["node"]) == set(prom_job.nodes)
    for metric, value in NETWORK.items():
        got = df.filter(pl.col("metric") == metric)["value"]
        assert got.min() == got.max() == value, metric


def test_a_dcgm_blank_served_by_prometheus_is_dropped_with_its_reason(prom_job: PromJob) -> None:
    from aegis_slurm.metrics.align import align

    specs = [spec_for("DCGM_FI_DEV_GPU_TEMP")]
    df = fetch_job(PromConfig(prom_job.url), prom_job.nodes, prom_job.start, prom_job.end, specs)
    # the blank reaches us through max by (Hostname): the catalog's aggregation for temperature
    assert df["value"].max() >= 1e18
    al = align(df, step=15.0)
    assert al.dropped["DCGM blank value (no reading)"] >= 1
    assert np.nanmax(al.data["DCGM_FI_DEV_GPU_TEMP"]) < 100


def store_with_job(prom_job: PromJob, tmp_path, job: str = "4243"):
    """An analytics store holding ``job``: the prom_job's nodes and window, as sacct prints it."""
    from datetime import UTC, datetime

    from aegis_slurm.accounting import ingest_files

    def local(t: float) -> str:  # sacct prints local time without a zone
        return datetime.fromtimestamp(t, UTC).astimezone().strftime("%Y-%m-%dT%H:%M:%S")

    nodes = f"gpu[0000-{len(prom_job.nodes) - 1:04d}]"
    export = tmp_path / "sacct.txt"
    export.write_text(
        "JobIDRaw|JobID|Cluster|State|ExitCode|Submit|Start|End|ElapsedRaw|NNodes|NodeList|JobName\n"
        f"{job}|{job}|c|FAILED|1:0|{local(prom_job.start - 60)}|{local(prom_job.start)}|"
        f"{local(prom_job.end)}|{int(prom_job.end - prom_job.start)}|{len(prom_job.nodes)}|"
        f"{nodes}|train\n"
    )
    ingest_files([export], tmp_path / "store")
    return tmp_path / "store"


def test_cli_reads_the_job_window_from_the_analytics_store(prom_job: PromJob, tmp_path) -> None:
    store = store_with_job(prom_job, tmp_path)
    r = CliRunner().invoke(
        main,
        ["minder", "--prometheus", prom_job.url, "--job", "4243", "--store", str(store), "--json"],
    )
    assert r.exit_code == 0, r.output
    assert [f["node"] for f in json.loads(r.stdout)["faulty"]] == [prom_job.truth.node]


def test_diagnose_adds_the_metrics_verdict_and_names_its_source(
    prom_job: PromJob, tmp_path
) -> None:
    # no Epilog record of the job at all: the metrics alone name the culprit
    store = store_with_job(prom_job, tmp_path)
    r = CliRunner().invoke(
        main, ["diagnose", "4243", "--store", str(store), "--prometheus", prom_job.url, "--json"]
    )
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["verdict"] == "no-records"
    assert [f["node"] for f in out["metrics"]["faulty"]] == [prom_job.truth.node]
    assert out["named_by"] == {prom_job.truth.node: ["metrics"]}
