"""The monthly report on what the real Slurm 22.05 test cluster recorded: small data, many end
states, a real crash loop, real node events (``sacctmgr show event``), live ``ingest --sacct``."""

from __future__ import annotations

import html
import json
import subprocess
from pathlib import Path

import polars as pl
import pytest

from aegis_slurm.accounting import load_runs
from aegis_slurm.report.compute import Month

from .conftest import SlurmCluster
from .scenarios import SCRIPT_NAME, ScenarioRun
from .test_ingest_real import _cli, ingest_cli

pytestmark = pytest.mark.slurm


def test_report_on_the_real_cluster(
    slurm_cluster: SlurmCluster, scenario_jobs: ScenarioRun, tmp_path: Path
) -> None:
    slurm_cluster.wait_accounting_quiet(scenario_jobs.start.strftime("%Y-%m-%dT00:00:00"))
    store = tmp_path / "store"
    ingest_cli(slurm_cluster, scenario_jobs, store)
    events = tmp_path / "events.txt"
    events.write_text(
        slurm_cluster.run(
            [
                "sacctmgr",
                "-P",
                "show",
                "event",
                f"Start={scenario_jobs.sacct_start}",
                "format=Cluster,NodeName,TimeStart,TimeEnd,State,Reason,User,Event",
            ]
        ).stdout
    )
    out = tmp_path / "report"
    proc = subprocess.run(
        [
            _cli(),
            "report",
            "--store",
            str(store),
            "--out",
            str(out),
            "--events",
            str(events),
            "--json",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    printed = json.loads(proc.stdout)
    on_disk = json.loads((out / "report.json").read_text())
    assert printed == on_disk

    month = Month.parse(on_disk["month"])
    runs = load_runs(store, start=month.start, end=month.end)
    ended = runs.filter(pl.col("ended") | (pl.col("state") == "REQUEUED"))
    tax = on_disk["taxonomy"]
    assert tax["total_runs"] == ended.height > 0
    states = {r["state"] for r in tax["by_state"]}
    # The scenarios end jobs in all of these (tests/slurm/scenarios.py).
    assert {
        "COMPLETED",
        "FAILED",
        "TIMEOUT",
        "OUT_OF_MEMORY",
        "NODE_FAIL",
        "PREEMPTED",
        "CANCELLED",
        "REQUEUED",
    } <= states, states
    assert on_disk["summary"]["jobs"] == runs["job_id_raw"].n_unique()

    # No job here has more than 128 GPUs: r_f cannot be measured and the page says so.
    assert on_disk["summary"]["rf_per_1000_node_days"] is None
    assert on_disk["ettr_planning"]["available"] is False
    assert any("No runs with more than 128 GPUs" in n for n in on_disk["notes"])
    figs = on_disk["figures"]
    assert "png" in figs["end_states"] and "png" in figs["sizes"] and "png" in figs["mttf"]
    assert "missing" in figs["ettr_map"]
    for f in figs.values():
        if "png" in f:
            assert (out / f["png"]).stat().st_size > 1000

    # The scenario crash loop (RequeueExit, requeued again and again in minutes) is reported.
    loop_ids = {loop["job_id_raw"] for loop in on_disk["requeue_loops"]["loops"]}
    assert scenario_jobs.jobs["crash_loop"] in loop_ids
    page = (out / "index.html").read_text()
    assert "crash-loop" in page

    # Events were read: the node-failure scenario's DOWN shows up among the outs.
    assert on_disk["drains"]["events_given"] is True
    assert on_disk["drains"]["aegis_drains"] + on_disk["drains"]["other_outs"] >= 1

    # Job names from users are escaped wherever the page shows them.
    assert SCRIPT_NAME not in page
    for name in runs["job_name"].unique().to_list():
        if any(c in name for c in "<>&"):
            assert name not in page, f"unescaped job name on the page: {name!r}"
    assert html.escape("crash-loop") in page
