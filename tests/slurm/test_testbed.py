"""The test cluster itself: shape, hooks, reset, and the scenario jobs as raw sacct shows them.

These pin down what the other tests in this folder rely on, independently of the ingest.
"""

from __future__ import annotations

import re
import stat
import time
from pathlib import Path

from .conftest import SlurmCluster
from .scenarios import (
    ADMIN_COMMENT,
    CRASH_LOOP_REQUEUES,
    PIPE_NAME,
    SCRIPT_NAME,
    USER_COMMENT,
    ScenarioRun,
)


def _sacct(cluster: SlurmCluster, run: ScenarioRun, jobid: int, fields: str) -> list[list[str]]:
    # JobName last: it may contain the delimiter.
    out = cluster.run(
        [
            "sacct",
            "-n",
            "-P",
            "-X",
            "-D",
            "-j",
            str(jobid),
            "-S",
            run.sacct_start,
            "-E",
            "now",
            "-o",
            fields,
        ]
    ).stdout
    n = fields.count(",")
    return [line.split("|", n) for line in out.splitlines() if line]


def test_cluster_shape(slurm_cluster: SlurmCluster) -> None:
    assert slurm_cluster.nodes == [f"node{i}" for i in range(1, 9)]
    out = slurm_cluster.run(["sinfo", "-h", "-N", "-p", "batch", "-o", "%N %T %c %G"]).stdout
    rows = [line.split() for line in out.splitlines()]
    assert len(rows) == 8
    for _node, state, cpus, gres in rows:
        assert state == "idle"
        assert cpus == "8"
        assert gres == "gpu:h100:8"
    # Accounting answers, with our cluster registered.
    clusters = slurm_cluster.run(["sacctmgr", "-n", "-P", "show", "cluster", "format=Cluster"])
    assert "testbed" in clusters.stdout.split()


def test_set_hooks_takes_effect_and_reset_restores(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    marker = tmp_path / "prolog-ran"
    hook = tmp_path / "prolog.sh"
    # The hook runs as root from slurmd; it only appends fixed text plus the numeric job id.
    hook.write_text(f'#!/bin/sh\necho "job=$SLURM_JOB_ID node=$SLURMD_NODENAME" >> {marker}\n')
    hook.chmod(hook.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    try:
        slurm_cluster.set_hooks(prolog=hook)
        jobid = slurm_cluster.submit(["-w", "node3", "--wrap", "true"])
        slurm_cluster.wait_state(jobid, "COMPLETED", timeout=60)
        assert marker.read_text().splitlines() == [f"job={jobid} node=node3"]
    finally:
        slurm_cluster.reset()
    shown = slurm_cluster.run(["scontrol", "show", "config"]).stdout
    assert re.search(r"^Prolog\s+=\s+\S+/hooks/prolog\.sh$", shown, re.M)
    # The recording hook is back: the next job shows up in hooks.log, not in our marker.
    jobid = slurm_cluster.submit(["-w", "node3", "--wrap", "true"])
    slurm_cluster.wait_state(jobid, "COMPLETED", timeout=60)
    log = (slurm_cluster.directory / "log" / "hooks.log").read_text()
    assert f"=== prolog node3 job={jobid} " in log
    assert len(marker.read_text().splitlines()) == 1


def test_failing_prolog_flag_drains_and_reset_recovers(slurm_cluster: SlurmCluster) -> None:
    state_dir = slurm_cluster.directory / "state"
    (state_dir / "fail-prolog-node2").touch()
    try:
        jobid = slurm_cluster.submit(["-w", "node2", "--wrap", "true"])
        # Prolog failure: the run is requeued (held) and the node drains with "Prolog error".
        slurm_cluster.wait_record(jobid, "REQUEUED", timeout=60)
        assert slurm_cluster.job_field(jobid, "Reason") == "launch_failed_requeued_held"
        reason = slurm_cluster.run(["sinfo", "-h", "-n", "node2", "-o", "%E"]).stdout.strip()
        assert reason == "Prolog error"
        assert "drain" in slurm_cluster.node_state("node2")
    finally:
        slurm_cluster.reset()
    assert not list(state_dir.iterdir())
    assert slurm_cluster.node_state("node2") == "idle"
    assert slurm_cluster.run(["squeue", "-h"]).stdout.strip() == ""


def test_scenarios_reach_their_states_in_sacct(
    slurm_cluster: SlurmCluster, scenario_jobs: ScenarioRun
) -> None:
    """Raw sacct, no ingest: every scenario ended where it was meant to."""
    jobs = scenario_jobs.jobs

    def runs(name: str) -> list[tuple[str, str]]:
        rows = _sacct(slurm_cluster, scenario_jobs, jobs[name], "State,ExitCode")
        return [(state, code) for state, code in rows]

    alice = slurm_cluster.uid("alice")
    assert runs("completed") == [("COMPLETED", "0:0")]
    assert runs("failed_exit1") == [("FAILED", "1:0")]
    assert runs("failed_signal") == [("FAILED", "0:9")]
    assert runs("cancelled_running") == [(f"CANCELLED by {alice}", "0:0")]
    assert runs("cancelled_pending") == [("CANCELLED by 0", "0:0")]
    assert runs("timeout") == [("TIMEOUT", "0:0")]
    assert runs("out_of_memory") == [("OUT_OF_MEMORY", "0:125")]
    assert runs("node_fail_norequeue") == [("NODE_FAIL", "0:0")]
    assert [s for s, _ in runs("node_fail_requeue")] == ["NODE_FAIL", "COMPLETED"]
    assert [s for s, _ in runs("preempted_requeue")] == ["PREEMPTED", "COMPLETED"]
    assert [s for s, _ in runs("preempted_cancel")] == ["PREEMPTED"]
    assert runs("preemptor") == [("COMPLETED", "0:0")]
    assert runs("requeued_admin") == [("REQUEUED", "0:0"), ("COMPLETED", "0:0")]
    assert runs("crash_loop") == [("REQUEUED", "42:0")] * CRASH_LOOP_REQUEUES + [("FAILED", "1:0")]
    assert sorted(runs("array")) == [("COMPLETED", "0:0"), ("FAILED", "1:0"), ("FAILED", "2:0")]
    assert runs("het") == [("COMPLETED", "0:0")] * 2
    assert _sacct(
        slurm_cluster,
        scenario_jobs,
        jobs["completed_step_failed"],
        "State,ExitCode,DerivedExitCode",
    ) == [["COMPLETED", "0:0", "3:0"]]
    assert _sacct(slurm_cluster, scenario_jobs, jobs["comments"], "State,Comment,AdminComment") == [
        ["COMPLETED", USER_COMMENT, ADMIN_COMMENT]
    ]
    names = {
        name: _sacct(slurm_cluster, scenario_jobs, jobs[name], "JobName")[0][0]
        for name in ("name_pipe", "name_script")
    }
    assert names == {"name_pipe": PIPE_NAME, "name_script": SCRIPT_NAME}
    multinode = _sacct(
        slurm_cluster, scenario_jobs, jobs["multinode_gpu"], "NNodes,NodeList,AllocTRES"
    )
    assert multinode[0][:2] == ["4", "node[5-8]"]
    assert "gres/gpu=32" in multinode[0][2].split(",")


def test_comment_flags_reach_sacct(slurm_cluster: SlurmCluster) -> None:
    """The recording hooks' flags attach text to the accounting record, as a health check would:
    scontrol from the Prolog while the job runs, sacctmgr from EpilogSlurmctld after it ended."""
    state_dir = slurm_cluster.directory / "state"
    since = slurm_cluster.run(["date", "-u", "+%Y-%m-%dT%H:%M:%S"]).stdout.strip()
    (state_dir / "setAdminComment-prolog").touch()
    (state_dir / "sacctmgrComment-epilog_slurmctld").touch()
    try:
        jobid = slurm_cluster.submit(["-w", "node4", "--wrap", "true"])
        slurm_cluster.wait_state(jobid, "COMPLETED", timeout=60)
        # EpilogSlurmctld runs after the record is final; poll until its sacctmgr write shows.
        for _ in range(60):
            out = slurm_cluster.run(
                [
                    "sacct",
                    "-n",
                    "-P",
                    "-X",
                    "-j",
                    str(jobid),
                    "-S",
                    since,
                    "-o",
                    "AdminComment,Comment",
                ]
            ).stdout.strip()
            if out.endswith("sacctmgr:epilog_slurmctld:ctld"):
                break
            time.sleep(0.5)
        assert out == "scontrol:prolog:node4|sacctmgr:epilog_slurmctld:ctld"
    finally:
        slurm_cluster.reset()
    log = (slurm_cluster.directory / "log" / "hooks.log").read_text()
    assert f"--- prolog node4 job={jobid} scontrol AdminComment rc=0" in log
