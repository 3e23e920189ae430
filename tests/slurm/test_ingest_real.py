"""The accounting ingest against jobs that real Slurm 22.05 ran and recorded (no mocks).

``aegis-slurm ingest --sacct`` runs sacct itself on the test cluster; the assertions are what
Slurm did to each scenario job (see ``scenarios.py``), read back through ``load_runs``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from aegis_slurm.accounting import load_runs
from aegis_slurm.accounting.schema import RUN_SCHEMA

from .conftest import SlurmCluster
from .scenarios import (
    ADMIN_COMMENT,
    CRASH_LOOP_REQUEUES,
    PIPE_NAME,
    SCRIPT_NAME,
    USER_COMMENT,
    ScenarioRun,
)


def _cli() -> str:
    beside = Path(sys.executable).with_name("aegis-slurm")  # the venv's console script
    found = str(beside) if beside.exists() else shutil.which("aegis-slurm")
    assert found, "the aegis-slurm console script is not installed"
    return found


def ingest_cli(cluster: SlurmCluster, run: ScenarioRun, store: Path) -> dict[str, Any]:
    first = run.start.date()
    last = datetime.now(UTC).date() + timedelta(days=1)  # --end is exclusive
    proc = subprocess.run(
        [
            _cli(),
            "ingest",
            "--sacct",
            "--start",
            first.isoformat(),
            "--end",
            last.isoformat(),
            "--store",
            str(store),
            "--json",
        ],
        env=cluster.env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@dataclass
class Ingested:
    store: Path
    report: dict[str, Any]
    runs: pl.DataFrame
    scenarios: ScenarioRun


@pytest.fixture(scope="module")
def ingested(
    slurm_cluster: SlurmCluster,
    scenario_jobs: ScenarioRun,
    tmp_path_factory: pytest.TempPathFactory,
) -> Ingested:
    store = tmp_path_factory.mktemp("store")
    # Jobs of earlier tests must have reached the window query, or re-ingest would find them.
    slurm_cluster.wait_accounting_quiet(scenario_jobs.start.strftime("%Y-%m-%dT00:00:00"))
    report = ingest_cli(slurm_cluster, scenario_jobs, store)
    # Slurm job ids are not unique over time (MaxJobId wraps; a slurmctld that recovers an older
    # state file hands out ids again), and the testbed's database keeps earlier sessions' jobs:
    # this session's jobs are the ones submitted since its scenarios started (the store's key is
    # cluster, JobID, Submit for the same reason).
    runs = load_runs(store).filter(pl.col("submit_time") >= scenario_jobs.start)
    return Ingested(store, report, runs, scenario_jobs)


def runs_of(ing: Ingested, name: str) -> pl.DataFrame:
    """Rows of one scenario, in run order (array tasks / het components by their index)."""
    jobid = ing.scenarios.jobs[name]
    if name == "array":
        rows = ing.runs.filter(pl.col("array_job_id") == jobid).sort("array_task_id", "run_index")
    elif name == "het":
        rows = ing.runs.filter(pl.col("het_job_id") == jobid).sort("het_job_offset", "run_index")
    else:
        rows = ing.runs.filter(pl.col("job_id_raw") == jobid).sort("run_index")
    assert rows.height, f"no rows for scenario {name} (job {jobid})"
    return rows


def one(ing: Ingested, name: str) -> dict[str, Any]:
    rows = runs_of(ing, name)
    assert rows.height == 1, rows
    return rows.row(0, named=True)


def test_report_and_schema(ingested: Ingested) -> None:
    report = ingested.report
    assert report["rows_rejected"] == 0, report["rejected_by_reason"]
    assert report["rejected_by_reason"] == {}
    assert report["rows_read"] >= report["rows_kept"] > 0
    assert Path(report["store"]).resolve() == ingested.store.resolve()
    assert dict(ingested.runs.schema) == RUN_SCHEMA
    ours = set(ingested.scenarios.jobs.values())
    assert ours <= set(ingested.runs.get_column("job_id_raw").to_list())
    # Row identity is unique.
    keys = ingested.runs.select("cluster", "job_id_raw", "submit_time")
    assert keys.n_unique() == ingested.runs.height


@pytest.mark.parametrize(
    ("name", "state", "exit_code", "exit_signal"),
    [
        ("completed", "COMPLETED", 0, 0),
        ("failed_exit1", "FAILED", 1, 0),
        ("failed_signal", "FAILED", 0, 9),
        ("timeout", "TIMEOUT", 0, 0),
        ("out_of_memory", "OUT_OF_MEMORY", 0, 125),
        ("node_fail_norequeue", "NODE_FAIL", 0, 0),
        ("preempted_cancel", "PREEMPTED", 0, 0),
        ("preemptor", "COMPLETED", 0, 0),
        ("name_pipe", "COMPLETED", 0, 0),
        ("name_script", "COMPLETED", 0, 0),
        ("multinode_gpu", "COMPLETED", 0, 0),
        ("completed_step_failed", "COMPLETED", 0, 0),
        ("comments", "COMPLETED", 0, 0),
    ],
)
def test_single_run_end_states(
    ingested: Ingested, name: str, state: str, exit_code: int, exit_signal: int
) -> None:
    row = one(ingested, name)
    assert (row["state"], row["exit_code"], row["exit_signal"]) == (state, exit_code, exit_signal)
    assert row["state_raw"] == state
    assert row["ended"] is True
    assert row["cancelled_by_uid"] is None
    assert row["cluster"] == "testbed"
    assert row["user"] == ingested.scenarios.users[name]
    assert row["account"] == "research"
    assert row["run_index"] == 0
    assert row["array_job_id"] is None and row["het_job_id"] is None
    assert row["job_id"] == str(ingested.scenarios.jobs[name])
    assert row["source"].startswith("sacct")


def test_times_are_utc_and_consistent(ingested: Ingested) -> None:
    """The machine runs in UTC; every time lies inside the scenario run, in order."""
    run_start = ingested.scenarios.start
    now = datetime.now(UTC)
    for name in ingested.scenarios.jobs:
        for row in runs_of(ingested, name).iter_rows(named=True):
            assert run_start <= row["submit_time"] <= now, (name, row)
            if row["start_time"] is not None:
                assert row["submit_time"] <= row["start_time"] <= row["end_time"] <= now
                wall = (row["end_time"] - row["start_time"]).total_seconds()
                assert row["elapsed_s"] == wall, (name, row)


def test_cancelled(ingested: Ingested, slurm_cluster: SlurmCluster) -> None:
    running = one(ingested, "cancelled_running")
    alice = slurm_cluster.uid("alice")
    assert running["state"] == "CANCELLED"
    assert running["state_raw"] == f"CANCELLED by {alice}"
    assert running["cancelled_by_uid"] == alice  # the owner cancelled it herself
    assert running["start_time"] is not None and running["n_nodes"] == 1
    assert len(running["nodes"]) == 1

    pending = one(ingested, "cancelled_pending")
    assert pending["state"] == "CANCELLED"
    assert pending["cancelled_by_uid"] == 0  # root
    assert pending["start_time"] is None  # never started
    assert pending["node_list"] == ""  # sacct printed "None assigned"
    assert pending["nodes"] == []
    assert pending["elapsed_s"] == 0
    assert pending["gpus"] == 0
    assert pending["ended"] is True


def test_derived_exit_code_and_comments(ingested: Ingested) -> None:
    step = one(ingested, "completed_step_failed")
    assert (step["derived_exit_code"], step["derived_exit_signal"]) == (3, 0)
    clean = one(ingested, "completed")
    assert (clean["derived_exit_code"], clean["derived_exit_signal"]) == (0, 0)
    row = one(ingested, "comments")
    assert row["comment"] == USER_COMMENT
    assert row["admin_comment"] == ADMIN_COMMENT


def test_timeout_limit_and_node(ingested: Ingested) -> None:
    row = one(ingested, "timeout")
    assert row["timelimit_s"] == 60
    assert row["elapsed_s"] >= 60
    assert row["nodes"] == ["node1"] and row["node_list"] == "node1"


def test_gpus_never_double_counted(ingested: Ingested) -> None:
    """AllocTRES carries gres/gpu=N and gres/gpu:h100=N for the same GPUs."""
    multi = one(ingested, "multinode_gpu")
    assert multi["gpus"] == 32
    assert multi["gpu_types"] == "h100"
    assert multi["n_nodes"] == 4
    assert multi["node_list"] == "node[5-8]"
    assert multi["nodes"] == ["node5", "node6", "node7", "node8"]

    preemptor = one(ingested, "preemptor")
    assert (preemptor["gpus"], preemptor["n_nodes"], preemptor["nodes"]) == (
        16,
        2,
        ["node3", "node4"],
    )
    assert preemptor["partition"] == "urgent"

    cancelled = one(ingested, "preempted_cancel")
    assert (cancelled["gpus"], cancelled["nodes"], cancelled["partition"]) == (
        8,
        ["node4"],
        "scavenger",
    )

    cpu_only = one(ingested, "completed")
    assert (cpu_only["gpus"], cpu_only["gpu_types"]) == (0, "")


def _runs(ing: Ingested, name: str) -> list[tuple[str, int, int]]:
    rows = runs_of(ing, name)
    assert rows.get_column("job_id_raw").n_unique() == 1
    assert rows.get_column("run_index").to_list() == list(range(rows.height))
    assert rows.get_column("submit_time").n_unique() == rows.height  # Submit resets per run
    return list(rows.select("state", "exit_code", "exit_signal").iter_rows())


def test_requeued_jobs_have_one_row_per_run(ingested: Ingested) -> None:
    assert _runs(ingested, "requeued_admin") == [("REQUEUED", 0, 0), ("COMPLETED", 0, 0)]
    assert _runs(ingested, "crash_loop") == (
        [("REQUEUED", 42, 0)] * CRASH_LOOP_REQUEUES + [("FAILED", 1, 0)]
    )
    # NODE_FAIL and PREEMPTED (REQUEUE mode) end a run that Slurm then requeues.
    assert _runs(ingested, "node_fail_requeue") == [("NODE_FAIL", 0, 0), ("COMPLETED", 0, 0)]
    assert _runs(ingested, "preempted_requeue") == [("PREEMPTED", 0, 0), ("COMPLETED", 0, 0)]
    for name in ("requeued_admin", "crash_loop"):
        ended = runs_of(ingested, name).get_column("ended").to_list()
        assert ended == [False] * (len(ended) - 1) + [True]
    preempted = runs_of(ingested, "preempted_requeue")
    assert preempted.get_column("gpus").to_list() == [8, 8]
    assert preempted.get_column("nodes").to_list() == [["node3"], ["node3"]]
    node_fail = runs_of(ingested, "node_fail_requeue")
    assert node_fail.get_column("nodes").to_list() == [["node2"], ["node2"]]


def test_array_ids_split(ingested: Ingested) -> None:
    base = ingested.scenarios.jobs["array"]
    rows = runs_of(ingested, "array")
    assert rows.get_column("array_task_id").to_list() == [0, 1, 2]
    assert rows.get_column("job_id").to_list() == [f"{base}_{i}" for i in range(3)]
    # Task i exits i.
    assert list(rows.select("state", "exit_code").iter_rows()) == [
        ("COMPLETED", 0),
        ("FAILED", 1),
        ("FAILED", 2),
    ]
    assert rows.get_column("job_id_raw").n_unique() == 3
    assert base in rows.get_column("job_id_raw").to_list()  # one task keeps the base id
    assert rows.get_column("het_job_id").null_count() == 3


def test_het_job_ids_split(ingested: Ingested) -> None:
    base = ingested.scenarios.jobs["het"]
    rows = runs_of(ingested, "het")
    assert rows.get_column("het_job_offset").to_list() == [0, 1]
    assert rows.get_column("job_id").to_list() == [f"{base}+0", f"{base}+1"]
    assert rows.get_column("job_id_raw").to_list() == [base, base + 1]
    assert rows.get_column("state").to_list() == ["COMPLETED", "COMPLETED"]
    # Component 0 had 2 GPUs on node5, component 1 none on node6.
    assert rows.get_column("gpus").to_list() == [2, 0]
    assert rows.get_column("nodes").to_list() == [["node5"], ["node6"]]
    assert rows.get_column("array_job_id").null_count() == 2


def test_job_names_survive_intact(ingested: Ingested) -> None:
    assert one(ingested, "name_pipe")["job_name"] == PIPE_NAME
    assert one(ingested, "name_script")["job_name"] == SCRIPT_NAME
    assert one(ingested, "timeout")["job_name"] == "timeout"


def test_reingest_adds_no_rows(ingested: Ingested, slurm_cluster: SlurmCluster) -> None:
    before = load_runs(ingested.store)
    report = ingest_cli(slurm_cluster, ingested.scenarios, ingested.store)
    assert report["rows_rejected"] == 0
    after = load_runs(ingested.store)
    assert after.height == before.height
    key = ["cluster", "job_id_raw", "submit_time"]
    assert after.sort(key).select(key).equals(before.sort(key).select(key))
    assert after.select(key).n_unique() == after.height
