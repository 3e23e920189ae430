"""Hostile review of session 10 (``git diff d76d88d..HEAD``: 3c76338 and f45ef38).

Each test is one finding and fails on f45ef38 for the reason in its docstring.  The detector
cases are small synthetic jobs (12 or 8 nodes, 50 minutes at a 15 s scrape) run through the
public ``detect`` entry point; the ``logs --job`` cases run :func:`diagnose_job_logs` against a
fake ``scontrol`` and a fake ``sacct`` (which honours ``-j``, ``-o``, ``-X``, ``-D``, ``-n`` and
``-P`` the way Slurm 22.05's does) on PATH, with no Slurm cluster.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from aegis_slurm.metrics.align import Aligned
from aegis_slurm.metrics.catalog import BY_NAME
from aegis_slurm.metrics.detect import Params, detect
from aegis_slurm.metrics.prometheus import query_expr

STEP = 15.0
TIMES = 1.0e9 + STEP * np.arange(200)  # 50 minutes


def _faulty(metric: str, X: np.ndarray, nodes: list[str]) -> list[str]:
    aligned = Aligned(TIMES, nodes, {metric: X}, STEP)
    return sorted(f.node for f in detect(aligned, [metric], Params()).faulty)


# ---- detector ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("metric", "healthy", "fault"),
    [
        ("node_infiniband_state_id", 4.0, 1.0),  # Active -> Down, the port's series stay
        ("DCGM_FI_DEV_ROW_REMAP_FAILURE", 0.0, 1.0),  # a row remap failed: the GPU is done
        ("node_filesystem_device_error", 0.0, 1.0),  # the NFS mount's statfs hangs
    ],
)
def test_a_one_way_fault_state_entered_early_in_the_reference_span_is_found(
    metric: str, healthy: float, fault: float
) -> None:
    """catalog.py round 9 / detect.py ``reference_statistic``: the new fault *states* take the
    reference span's **median** offset as the node's normal, so a fault that begins in the first
    half of the span ([warm-up, warm-up + baseline) = minutes 5-10 of a launch) is most of the
    span, becomes the node's "normal" and is never reported for the rest of the job.

    Scenario: 12 nodes, 50 minutes.  On n3 an IB port drops from Active to Down (or a GPU's row
    remap fails, or its NFS mount hangs) at minute 6 and stays so to the end; n6 has held the
    faulty value since before the job (an unused port, a mount root cannot stat): its own
    normal.  Today nothing is reported at all -- a port Down for 44 minutes is missed, where the
    same port *vanishing* at minute 6 is found (the port count's reference is the node's best
    held state, ``"max"``, since round 7: v6-064, "a GPU lost 2 minutes after the warm-up").
    These are states of the same kind (only a fault moves them, one way): expected, n3 is found
    and n6 is not."""
    X = np.full((12, TIMES.size), healthy)
    X[6, :] = fault  # the node's own normal since before the job
    X[3, 24:] = fault  # minute 6: inside the first half of the reference span
    assert _faulty(metric, X, [f"n{i}" for i in range(12)]) == ["n3"]


def test_a_job_wide_oom_does_not_name_the_nodes_the_oom_killer_spared() -> None:
    """detect.py ``latched`` + ``peer_deviation`` (round 9's latch scale): the distance to the
    peers' median is symmetric, so once most nodes have latched, the few that did *not* count
    an event are the outliers.  An OOM kill is often the *job's* doing on every node at once
    (a batch too large for the early pipeline stages; torchrun then restarts its workers, or
    NCCL waits out its 10-30 minute timeout): on 6 of 8 nodes the kernel's OOM killer fires at
    minute 25, the job goes on for 25 more minutes, and the 2 nodes whose ranks fit in memory
    -- the healthy ones -- are reported faulty on ``node_vmstat_oom_kill`` (``watch`` with
    ``drain = true`` drains them: they have samples and a reference).

    A latch says "this node counted an event"; a node that counted none is never evidence.
    With the events scale (``latch=False``, round 8's reading of EDAC) nothing is reported.
    Expected: no node that did not count an OOM kill is named (the 6 that did are a job-wide
    event: max_share drops them)."""
    nodes = [f"n{i}" for i in range(8)]
    X = np.full((8, TIMES.size), 3.0)  # kills since boot, before this job
    X[:6, 100:] += 1.0  # minute 25: the job's ranks on 6 nodes are OOM-killed
    found = _faulty("node_vmstat_oom_kill", X, nodes)
    assert set(found) <= set(nodes[:6]), found


def test_a_one_scrape_double_count_of_relabelled_gpu_series_is_not_a_new_memory_error(
    tmp_path: Path,
) -> None:
    """detect.py ``latched`` on a per-node ``sum`` of per-GPU counters: any one-scrape rise is
    latched for good, and Prometheus returns exactly such a rise whenever a GPU's series change
    labels.  dcgm-exporter's Slurm integration (``--hpc-job-mapping-dir``: the Prolog writes
    /run/dcgm-job-map/<gpu>) adds ``hpc_job="<id>"`` to every GPU series when a job starts; the
    catalog's query ``sum by (Hostname) (last_over_time(x[22s]))`` then sees the old series'
    last sample (15 s ago; a range selector skips the staleness marker) *and* the new series'
    first: the node's count doubles for one step and falls back (checked below with the real
    promtool 2.42 on the project's own query_expr).  A rolling dcgm-exporter upgrade that adds
    a label does the same.

    A healthy A100/H100 often carries a few rows remapped long ago (InfoROM, persistent); here
    n4 holds 2 and n9 holds 1, all others 0, and the relabel happens at minute 2 on every node.
    Today n4 and n9 are reported (8.75 min) on DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS, i.e.
    as GPUs that just took an uncorrectable error, and ``watch`` would drain them.  A counter
    never falls back without a reset: an increase that is undone the next scrape is not an
    event.  Expected: no finding."""
    metric = "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"
    promtool = shutil.which("promtool")
    if promtool is not None:  # the doubling is what a real Prometheus answers
        expr = query_expr(BY_NAME[metric], "Hostname", ["gpu-node-04"], 1.5 * STEP)
        old = f'{metric}{{Hostname="gpu-node-04",gpu="0",UUID="GPU-1"}}'
        new = f'{metric}{{Hostname="gpu-node-04",gpu="0",UUID="GPU-1",hpc_job="4242"}}'
        cases = [(60, 2), (75, 4), (90, 2)]
        doc = {
            "rule_files": [],
            "evaluation_interval": "15s",
            "tests": [
                {
                    "interval": "15s",
                    "input_series": [
                        {"series": old, "values": "2 2 2 2 2 stale"},
                        {"series": new, "values": "_ _ _ _ _ 2 2 2 2"},
                    ],
                    "promql_expr_test": [
                        {
                            "expr": expr,
                            "eval_time": f"{t}s",
                            "exp_samples": [{"labels": '{Hostname="gpu-node-04"}', "value": v}],
                        }
                        for t, v in cases
                    ],
                }
            ],
        }
        (tmp_path / "t.yml").write_text(json.dumps(doc))  # JSON is YAML
        r = subprocess.run(
            [promtool, "test", "rules", "t.yml"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.returncode == 0, r.stdout + r.stderr
    nodes = [f"n{i}" for i in range(12)]
    X = np.zeros((12, TIMES.size))
    X[4, :], X[9, :] = 2.0, 1.0  # rows remapped long before this job
    X[[4, 9], 8] *= 2  # minute 2: old and new label sets both inside last_over_time's range
    assert _faulty(metric, X, nodes) == []


# ---- logs --job while the job is COMPLETING ------------------------------------------------------

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "sacct"
COMPLETING = (FIXTURE / "scontrol-22.05.8_show_job_completing.txt").read_text().splitlines()[0]
ALICE = 1001  # UserId=alice(1001) in the recorded line

FAKE_SACCT = r"""
import json, sys
recs = json.load(open(__file__ + ".json"))
argv = sys.argv[1:]
fields, jobs, dup = ["JobID", "JobName", "State"], [], False
i = 0
while i < len(argv):
    a = argv[i]
    if a in ("-o", "--format"):
        fields = argv[i + 1].split(","); i += 2; continue
    if a.startswith("--format="):
        fields = a.split("=", 1)[1].split(","); i += 1; continue
    if a in ("-j", "--jobs"):
        jobs += argv[i + 1].split(","); i += 2; continue
    if a.startswith("--jobs="):
        jobs += a.split("=", 1)[1].split(","); i += 1; continue
    if a in ("-D", "--duplicates"):
        dup = True
    i += 1
def base(j):
    return j.split("+")[0].split("_")[0]
out = []
for r in recs:  # in sacct's order: by job id, a requeued job's runs oldest first
    if jobs and not any(j in (r["JobID"], r["JobIDRaw"], base(r["JobID"])) for j in jobs):
        continue
    out.append(r)
if not dup:  # sacct without -D: only the latest run of each job
    last = {}
    for r in out:
        last[r["JobID"]] = r
    out = [r for r in out if last[r["JobID"]] is r]
for r in out:
    print("|".join(str(r.get(f.split("%")[0], "")) for f in fields))
"""


def _fake_slurm(tmp_path: Path, scontrol_lines: list[str], sacct: list[dict]) -> Path:
    """A bin directory with ``scontrol`` printing ``scontrol_lines`` and a table-driven
    ``sacct``; returns it (put it first on PATH)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    sc = bin_dir / "scontrol"
    sc.write_text("#!/bin/sh\ncat <<'EOF'\n" + "\n".join(scontrol_lines) + "\nEOF\n")
    sa = bin_dir / "sacct"
    sa.write_text(f"#!{sys.executable}\n" + FAKE_SACCT)
    (bin_dir / "sacct.json").write_text(json.dumps(sacct))
    for f in (sc, sa):
        f.chmod(0o755)
    return bin_dir


def _srun_label_log(path: Path, tasks: int, failing: int) -> None:
    """One ``srun --label`` file: every task iterates, then task ``failing`` hits an ECC error."""
    lines = [
        f"{t}: iteration {i}/ 100 | lm loss: 2.{i}{t}" for i in range(1, 30) for t in range(tasks)
    ]
    lines.append(f"{failing}: RuntimeError: CUDA error: uncorrectable ECC error encountered")
    path.write_text("\n".join(lines) + "\n")
    os.chown(path, ALICE, ALICE)


def test_logs_job_of_a_requeued_job_completing_does_not_map_tasks_onto_its_previous_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """logs/job.py ``diagnose_job_logs``: when scontrol's NodeList of a COMPLETING job is dropped,
    the *store's* node list is taken before sacct's, and for a requeued job the store holds the
    previous run (its EpilogSlurmctld record, collected by ``signals collect``; the current
    run's record is not collected until after it completes).

    Scenario (Slurm keeps the job id across a requeue): job 47 ran on node[1-4], a node failed,
    it was requeued (Restarts=1) and ran again on node[5-8], where task 2 (node7) hit an
    uncorrectable ECC error.  node7's Epilog is still running, so scontrol says
    ``JobState=COMPLETING NodeList=node7 NumNodes=1``; sacct (latest run, no -D) says
    node[5-8].  ``aegis-slurm logs --job 47 --store S`` maps task 2 onto the old run's
    node[1-4] and names node3 -- a node the failing run never touched, and not even the node
    scontrol itself still lists.  Without --store it correctly names node7.  Expected: node7
    (the current run's allocation: sacct's, which must also contain scontrol's stragglers)."""
    out = tmp_path / "jobs"
    out.mkdir()
    line = (
        COMPLETING.replace("/srv/slurm-testbed/jobs", str(out))
        .replace("NodeList=node1 ", "NodeList=node7 ")
        .replace("BatchHost=node1", "BatchHost=node5")
        .replace("ReqNodeList=node[1-4]", "ReqNodeList=(null)")
        .replace("Restarts=0", "Restarts=1")
    )
    sacct = [
        {"JobID": "47", "JobIDRaw": "47", "NodeList": "node[1-4]", "State": "NODE_FAIL"},
        {"JobID": "47", "JobIDRaw": "47", "NodeList": "node[5-8]", "State": "FAILED"},
    ]
    bin_dir = _fake_slurm(tmp_path, [line], sacct)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    _srun_label_log(out / "l4cg-47.out", tasks=4, failing=2)

    from aegis_slurm.accounting.signals import collect
    from aegis_slurm.logs.job import diagnose_job_logs
    from aegis_slurm.node import spool

    run0 = {
        "kind": "job",
        "node": "slurmctld",
        "cluster": "testbed",
        "job_id": "47",
        "run": 0,
        "captured_at": "2026-11-27T08:20:00+00:00",
        "exit_code": "0:9",
        "nodelist": "node[1-4]",
        "user": "alice",
        "uid": ALICE,
        "name": "l4-cg",
        "work_dir": str(out),
        "stdout": str(out / "l4cg-%j.out"),
        "stderr": "",
        "tasks": 4,
    }
    spool.append(tmp_path / "spool", run0, name=spool.JOB_FILE)
    store = tmp_path / "store"
    assert collect([tmp_path / "spool"], store)["job_records_in_store"] == 1

    _, alone = diagnose_job_logs("47")
    assert alone.nodes[0]["node"] == "node7"  # without the store: right
    _, verdict = diagnose_job_logs("47", store=store)
    assert verdict.nodes[0]["node"] == "node7", verdict.nodes[:2]


def test_logs_job_of_a_completing_het_job_keeps_to_the_component_scontrol_described(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """logs/job.py ``nodes_from_sacct``: "the job's whole allocation" is the *last line* of
    ``sacct -X -j ID``, but for a heterogeneous job that answer has one line per component
    (``47+0``, ``47+1``; Slurm's heterogeneous_jobs page shows the same), while
    ``from_scontrol`` describes the first line of ``scontrol show job 47``: the leader,
    component 0 (its NumTasks, its StdOut).

    Scenario: het job 47 = component 0 on node1 (2 tasks: the trainer) + component 1 on
    node[2-5] (data servers).  The job failed, node4's Epilog is slow: COMPLETING.  Task 1 of
    component 0 (on node1) logged an uncorrectable ECC error.  ``logs --job 47`` maps it onto
    component 1's node[2-5] and names node3, which ran none of the component's tasks; before
    3c76338 scontrol's list (node1) was used and node1 was named.  Expected: component 0's
    nodes (the sacct line of scontrol's JobId), or, failing that, no node -- the task
    (``task1``) -- rather than another component's node."""
    out = tmp_path / "jobs"
    out.mkdir()
    base = COMPLETING.replace("/srv/slurm-testbed/jobs", str(out))
    leader = base.replace("JobId=47 ", "JobId=47 HetJobId=47 HetJobOffset=0 HetJobIdSet=47-48 ")
    leader = leader.replace("NumTasks=4", "NumTasks=2")
    other = base.replace("JobId=47 ", "JobId=48 HetJobId=47 HetJobOffset=1 HetJobIdSet=47-48 ")
    other = other.replace("NodeList=node1 ", "NodeList=node4 ").replace("BatchHost=node1", "")
    sacct = [
        {"JobID": "47+0", "JobIDRaw": "47", "NodeList": "node1", "State": "FAILED"},
        {"JobID": "47+1", "JobIDRaw": "48", "NodeList": "node[2-5]", "State": "FAILED"},
    ]
    bin_dir = _fake_slurm(tmp_path, [leader, other], sacct)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    _srun_label_log(out / "l4cg-47.out", tasks=2, failing=1)

    from aegis_slurm.logs.job import diagnose_job_logs

    _, verdict = diagnose_job_logs("47")
    assert verdict.nodes and verdict.nodes[0]["node"] in ("node1", "task1"), verdict.nodes[:2]
