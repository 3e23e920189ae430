"""`minder watch` drains a persistent outlier on the real cluster, once, after its job.

A real 3-node job runs on the test cluster; a real Prometheus (tests/metrics/conftest.py) holds the
last 20 minutes of that job's metrics, with one node's PCIe link downgraded.  The watch pass lists
the job with the real ``squeue`` and drains through the Prolog's guarded drain with the real
``scontrol``.  Only the job's start is moved 20 minutes back (the series are recorded, the job was
just submitted), so the lookback window covers the recorded fault.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import polars as pl
import pytest

from aegis_slurm.metrics.config import MinderConfig, WatchConfig
from aegis_slurm.metrics.detect import Params
from aegis_slurm.metrics.watch import run_pass, running_jobs

from .conftest import SlurmCluster

pytestmark = pytest.mark.slurm


def _prometheus(tmp: Path, nodes: list[str], now: float):
    import shutil
    import subprocess
    from datetime import UTC, datetime

    from metrics.conftest import openmetrics, start_prometheus

    from aegis_slurm.simulate.metrics import simulate_job

    if shutil.which("prometheus") is None:
        pytest.skip("Debian's prometheus package is not installed (tools/install-test-deps.sh)")
    df, truth = simulate_job(
        len(nodes), 20, "pcie", seed=8, start=datetime.fromtimestamp(now - 20 * 60, UTC)
    )
    names = {f"gpu{i:04d}": n for i, n in enumerate(nodes)}
    df = df.with_columns(pl.col("node").replace_strict(names))
    (tmp / "job.om").write_text(openmetrics(df))
    subprocess.run(
        [
            "promtool",
            "tsdb",
            "create-blocks-from",
            "openmetrics",
            str(tmp / "job.om"),
            str(tmp / "data"),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    proc, url = start_prometheus(tmp / "data", tmp)
    return proc, url, names[truth.node]


def _node(c: SlurmCluster, node: str) -> tuple[str, str]:
    out = c.run(["sinfo", "-h", "-N", "-n", node, "-o", "%T|%E"]).stdout.splitlines()[0]
    state, reason = out.split("|", 1)
    return state, reason


def test_watch_drains_the_outlier_once_after_its_job(slurm_cluster: SlurmCluster, tmp_path):
    c = slurm_cluster
    jobid = c.submit(["-N3", "--wrap", "sleep 600"])
    deadline = time.monotonic() + 60
    while c.job_field(jobid, "JobState") != "RUNNING" and time.monotonic() < deadline:
        time.sleep(0.5)
    assert c.job_field(jobid, "JobState") == "RUNNING"
    now = time.time()
    (job,) = [j for j in running_jobs(10.0, now) if j.job_id == str(jobid)]
    assert len(job.nodes) == 3
    job = replace(job, start=now - 20 * 60)
    proc, url, culprit = _prometheus(tmp_path, job.nodes, now)
    try:
        cfg = MinderConfig(
            detector=replace(Params(), warmup=0.0),
            watch=replace(
                WatchConfig(),
                drain=True,
                syslog=False,
                slurm_timeout=10.0,
                guard={"window_minutes": 60, "max_drained_share": 0.5, "max_drained_nodes": 3},
            ),
        )
        state: dict = {}
        rep = run_pass(cfg, url, [job], now, state)
        assert [(i["node"], i["action"]) for i in rep.new] == [(culprit, "drains")]
        st, reason = _node(c, culprit)
        assert "drain" in st  # "draining": the job keeps running on it
        assert reason.startswith("aegis: minder: DCGM_FI_"), reason
        assert c.job_field(jobid, "JobState") == "RUNNING"
        for other in set(job.nodes) - {culprit}:
            assert "drain" not in _node(c, other)[0]
        # the next pass sees the same incident: no second action
        again = run_pass(cfg, url, [job], now, state)
        assert again.new == [] and f"{jobid}:{culprit}" in again.open
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        c.run(["scancel", str(jobid)], check=False)
        c.run(
            ["scontrol", "update", f"nodename={','.join(job.nodes)}", "state=resume"], check=False
        )


def test_minder_job_window_names_one_allocation(slurm_cluster: SlurmCluster) -> None:
    # `minder --job` on an array's or a het job's own id: sacct answers a line per task or
    # component, each its own allocation.  It used to take the last line -- another task's
    # nodes and times, silently; now it asks for one, and a task or component named is found
    from aegis_slurm.errors import InputError
    from aegis_slurm.metrics.slurmjob import from_sacct

    c = slurm_cluster
    array = c.submit(["--array=1-2", "-N1", "--wrap", "sleep 30"])
    het = c.submit(["-N1", ":", "-N2"], script="#!/bin/bash\nsleep 30\n")
    try:
        for jobid, task in ((array, f"{array}_2"), (het, f"{het}+1")):
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                try:
                    win = from_sacct(task)
                    break
                except Exception:  # not started or not in accounting yet
                    time.sleep(0.5)
            else:
                pytest.fail(f"{task} never started")
            want = 1 if "_" in task else 2
            assert len(win.nodes) == want and all(n in c.nodes for n in win.nodes), win
            # slurmdbd may list the other task or component a moment after this one: until it
            # does, the job's own id is that one allocation (one line), not an ambiguity
            deadline = time.monotonic() + 30
            while True:
                try:
                    from_sacct(str(jobid))
                except InputError as e:
                    error = str(e)
                    break
                if time.monotonic() > deadline:
                    pytest.fail(f"{jobid}: sacct never listed its second allocation")
                time.sleep(0.5)
            assert "name one of them" in error and task in error
    finally:
        c.run(["scancel", str(array), str(het)], check=False)
