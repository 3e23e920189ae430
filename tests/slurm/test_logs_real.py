"""End to end on the real cluster: a 4-node ``srun --label`` job where one node's task fails;
``aegis-slurm logs --job`` finds its output file and node list through scontrol and names it."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from aegis_slurm.logs.job import parse_scontrol

from .conftest import REPO, SlurmCluster

pytestmark = pytest.mark.slurm

# The failure and the peers' timeout are real text (tests/fixtures/logs/snippets.json:
# kohya-ss/sd-scripts#1434 and OFA-Sys/OFA#271); the rest is what a training loop prints.
SCRIPT = r"""#!/bin/bash
srun --label bash -c '
for i in $(seq 1 20); do
  echo "[$(date -u "+%F %T")] iteration $i/ 1000 | lm loss: 2.$RANDOM | grad norm: 0.$RANDOM"
  sleep 0.05
done
if [ "$SLURM_PROCID" = "$L4_FAIL" ]; then
  echo "RuntimeError: CUDA error: uncorrectable ECC error encountered"
  exit 1
fi
if [ "$L4_FAIL" != none ]; then
  sleep 1
  W="WorkNCCL(SeqNum=469508, OpType=ALLREDUCE, Timeout(ms)=1800000)"
  echo "[E ProcessGroupNCCL.cpp:737] [Rank $SLURM_PROCID] Watchdog caught collective operation \\
timeout: $W ran for 1802212 milliseconds before timing out."
  exit 1
fi
echo "training done"
'
rc=$?
sleep 2
exit $rc
"""


def _cli(cluster: SlurmCluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(REPO / ".venv" / "bin" / "aegis-slurm"), *args],
        env=cluster.env,
        capture_output=True,
        text=True,
        check=False,
    )


def test_logs_job_names_the_failed_node(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    jobs = slurm_cluster.directory / "jobs"
    argv = ["-N4", "--ntasks-per-node=1", "-J", "l4-label", "-o", str(jobs / "l4-%j.out")]
    good = slurm_cluster.submit([*argv, "--export=ALL,L4_FAIL=none"], script=SCRIPT)
    slurm_cluster.wait_state(good, ["COMPLETED"])
    job = slurm_cluster.submit([*argv, "--export=ALL,L4_FAIL=2"], script=SCRIPT)
    slurm_cluster.wait_state(job, ["FAILED"])
    show = slurm_cluster.run(["scontrol", "-o", "show", "job", str(job)]).stdout
    kv = parse_scontrol(show)
    assert kv["StdOut"] == str(jobs / f"l4-{job}.out")
    nodes = subprocess.run(
        ["scontrol", "show", "hostnames", kv["NodeList"]],
        env=slurm_cluster.env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    out = Path(kv["StdOut"]).read_text()
    assert "2: RuntimeError: CUDA error: uncorrectable ECC error encountered" in out

    # while slurmctld knows the job: StdOut and NodeList from scontrol
    r = _cli(slurm_cluster, "logs", "--job", str(job), "--json")
    assert r.returncode == 0, r.stderr
    verdict = json.loads(r.stdout)
    assert verdict["nodes"], (r.stdout, show)
    assert verdict["nodes"][0]["node"] == nodes[2]  # task 2 ran on the job's third node
    assert "ECC" in verdict["lines"][0]["text"]
    line = verdict["lines"][0]["line"]
    assert out.splitlines()[line - 1].endswith(verdict["lines"][0]["text"])
    assert verdict["baseline_events"] == 0

    # with the store: the same user's same job name's last COMPLETED run is the baseline
    today = datetime.now(UTC).date()
    store = tmp_path / "store"
    r = _cli(
        slurm_cluster,
        "ingest",
        "--sacct",
        "--start",
        str(today),
        "--end",
        str(today + timedelta(days=1)),
        "--store",
        str(store),
    )
    assert r.returncode == 0, r.stderr
    r = _cli(slurm_cluster, "logs", "--job", str(job), "--store", str(store), "--json")
    assert r.returncode == 0, r.stderr
    with_base = json.loads(r.stdout)
    assert with_base["baseline_events"] > 0
    assert with_base["nodes"][0]["node"] == nodes[2]
    assert "ECC" in with_base["lines"][0]["text"]
