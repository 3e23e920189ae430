"""End to end on the real cluster: a 4-node ``srun --label`` job where one node's task fails;
``aegis-slurm logs --job`` finds its output file and node list through scontrol and names it,
and again after slurmctld forgot the job, from the EpilogSlurmctld's recorded output pattern."""

from __future__ import annotations

import json
import re
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from aegis_slurm.logs.job import parse_scontrol
from aegis_slurm.node import spool

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
    # the truth from accounting: scontrol's NodeList shrinks while the job is COMPLETING (a
    # fresh-clone CI run once read it with fewer than three nodes right after FAILED)
    nodes = _accounted_nodes(slurm_cluster, job)
    assert len(nodes) == 4, nodes
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


def _accounted_nodes(cluster: SlurmCluster, job: int) -> list[str]:
    acct = cluster.run(["sacct", "-n", "-P", "-X", "-j", str(job), "-o", "NodeList"]).stdout
    return cluster.run(["scontrol", "show", "hostnames", acct.split()[-1]]).stdout.split()


def test_logs_job_names_the_failed_node_while_the_job_is_completing(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    """One node's Epilog is slow, so the job stays COMPLETING and scontrol's NodeList holds that
    node only; ``logs --job`` (no store) still maps task 2 to the job's third node, from
    accounting's node list."""
    c = slurm_cluster
    tmp_path.chmod(0o755)
    release = tmp_path / "release"
    epilog = tmp_path / "slow-epilog"
    # node1 waits (at most 60 s) until the test has looked; every other node ends at once
    epilog.write_text(
        "#!/bin/sh\n"
        '[ "$SLURMD_NODENAME" = node1 ] || exit 0\n'
        f"i=0; while [ ! -e {release} ] && [ $i -lt 120 ]; do sleep 0.5; i=$((i+1)); done\n"
    )
    epilog.chmod(0o755)
    c.reset()
    c.set_hooks(epilog=epilog)
    try:
        jobs = c.directory / "jobs"
        job = c.submit(
            ["-w", "node[1-4]", "-N4", "--ntasks-per-node=1", "-J", "l4-cg",
             "-o", str(jobs / "l4cg-%j.out"), "--export=ALL,L4_FAIL=2"],
            script=SCRIPT,
        )  # fmt: skip
        c.wait_state(job, ["FAILED"])
        deadline = time.monotonic() + 30
        while c.job_field(job, "NodeList") != "node1" and time.monotonic() < deadline:
            time.sleep(0.3)
        show = parse_scontrol(c.run(["scontrol", "-o", "show", "job", str(job)]).stdout)
        # NumNodes shrinks with it (tests/fixtures/sacct/scontrol-22.05.8_show_job_completing.txt)
        assert show["JobState"] == "COMPLETING" and show["NodeList"] == "node1", show
        nodes = _accounted_nodes(c, job)
        assert nodes == ["node1", "node2", "node3", "node4"]

        r = _cli(c, "logs", "--job", str(job), "--json")
        assert r.returncode == 0, r.stderr
        verdict = json.loads(r.stdout)
        assert verdict["nodes"] and verdict["nodes"][0]["node"] == "node3", r.stdout
        assert "ECC" in verdict["lines"][0]["text"]
    finally:
        release.touch()
        c.reset()


HOOK = REPO / "epilog" / "aegis-epilog"


def _set_min_job_age(cluster: SlurmCluster, seconds: int) -> None:
    """Rewrite slurm.conf's MinJobAge and make slurmctld re-read it (only slurmctld uses it)."""
    lines = cluster.conf.read_text().splitlines()
    lines = [f"MinJobAge={seconds}" if ln.startswith("MinJobAge=") else ln for ln in lines]
    tmp = cluster.conf.with_suffix(".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(cluster.conf)
    cluster.run(["scontrol", "reconfigure"])
    shown = cluster.run(["scontrol", "show", "config"]).stdout
    assert re.search(rf"^MinJobAge\s+=\s+{seconds} sec$", shown, re.M), shown


@pytest.fixture
def ctld_site(slurm_cluster: SlurmCluster, tmp_path: Path):
    """EpilogSlurmctld is aegis' hook (installed as docs/epilog.md says, through a two-line
    site wrapper); the node Epilog stays the recording hook."""
    tmp_path.chmod(0o755)
    cfg = tmp_path / "cbd.toml"
    cfg.write_text(
        f'[runtime]\nstate_dir = "{tmp_path}/state"\n'
        f'[epilog]\nspool_dir = "{tmp_path}/spool"\nslurm_conf = "{slurm_cluster.conf}"\n'
        "tag = false\n"
    )
    hook = tmp_path / "aegis-epilog-site"
    hook.write_text(
        f'#!/bin/sh\nAEGIS_CBD_CONFIG={cfg}\nexport AEGIS_CBD_CONFIG\nexec /bin/sh {HOOK} "$@"\n'
    )
    hook.chmod(0o755)
    slurm_cluster.set_hooks(epilog_ctld=hook)
    try:
        yield tmp_path
    finally:
        _set_min_job_age(slurm_cluster, 300)  # the testbed's value (tools/slurm-testbed.sh)
        slurm_cluster.reset()


def test_logs_job_after_slurmctld_forgot_the_job(
    slurm_cluster: SlurmCluster, ctld_site: Path
) -> None:
    """A 4-node ``srun --label`` job with ``--output=...-%j-%N.out`` whose task 2 fails; once
    slurmctld forgot it, ``logs --job --store`` finds its output from the EpilogSlurmctld's
    recorded pattern and names the failed node.  The baseline (an earlier COMPLETED run of the
    same name, written elsewhere) is found from its own record."""
    c = slurm_cluster
    jobs = c.directory / "jobs"
    pattern = str(jobs / "l4gone-%j-%N.out")
    argv = ["-N4", "--ntasks-per-node=1", "-J", "l4-gone"]
    # not this job's path with the id replaced; %A/%a outside an array: the job id, NO_VAL
    ok_pattern = str(jobs / "l4gone-ok-%x-%4j-%A-%a.out")
    good = c.submit([*argv, "-o", ok_pattern, "--export=ALL,L4_FAIL=none"], script=SCRIPT)
    c.wait_state(good, ["COMPLETED"])
    job = c.submit([*argv, "-o", pattern, "--export=ALL,L4_FAIL=2"], script=SCRIPT)
    c.wait_state(job, ["FAILED"])
    shown_stdout = c.job_field(job, "StdOut")  # what 22.05's scontrol makes of %N (docs/logs.md)
    assert shown_stdout == str(jobs / f"l4gone-{job}-%N.out")

    # the EpilogSlurmctld spooled the job's output pattern, unexpanded
    spool_dir = ctld_site / "spool"
    deadline = time.monotonic() + 60
    recs: list[dict] = []
    while time.monotonic() < deadline and not recs:
        recs = [
            r
            for r in spool.read_records([spool_dir], name=spool.JOB_FILE)
            if r["job_id"] == str(job)
        ]
        time.sleep(0.5)
    assert len(recs) == 1, list(spool_dir.rglob("*"))
    rec = recs[0]
    assert rec["stdout"] == pattern and rec["stderr"] == "", rec
    assert (rec["user"], rec["name"], rec["exit_code"]) == ("alice", "l4-gone", "1:0")
    assert rec["uid"] == c.uid("alice") and rec["work_dir"] == str(jobs)
    assert rec["tasks"] == 4  # NumTasks, asked from slurmctld inside the hook (COMPLETING)
    # the job's nodes as accounting has them (scontrol's NodeList shrinks while COMPLETING)
    acct = c.run(["sacct", "-n", "-P", "-X", "-j", str(job), "-o", "NodeList"]).stdout.split()[-1]
    nodes = c.run(["scontrol", "show", "hostnames", acct]).stdout.split()
    assert (
        len(nodes) == 4
        and c.run(["scontrol", "show", "hostnames", rec["nodelist"]]).stdout.split() == nodes
    )
    # slurmstepd named the file after the batch host's short hostname
    (out,) = jobs.glob(f"l4gone-{job}-*.out")
    assert "2: RuntimeError: CUDA error: uncorrectable ECC error" in out.read_text()

    store = ctld_site / "store"
    day = datetime.now(UTC).date()
    c.wait_accounting_quiet(day.isoformat())
    r = _cli(
        c, "ingest", "--sacct", "--start", str(day), "--end", str(day + timedelta(days=1)),
        "--store", str(store),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    r = _cli(c, "signals", "collect", "--spool", str(spool_dir), "--store", str(store), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["job_records_in_store"] == 2  # the good run (multi-node) too

    # make slurmctld forget the job (MinJobAge, purged by slurmctld's periodic job purge)
    _set_min_job_age(c, 2)
    deadline = time.monotonic() + 240
    while c.job_field(job, "JobState") is not None:
        assert time.monotonic() < deadline, "slurmctld still knows the job"
        time.sleep(2)
    gone = c.run(["scontrol", "show", "job", str(job)], check=False)
    assert "Invalid job id" in gone.stderr, (gone.stdout, gone.stderr)

    r = _cli(c, "logs", "--job", str(job), "--json")
    assert r.returncode == 4 and "pass --store" in r.stderr, (r.returncode, r.stderr)
    r = _cli(c, "logs", "--job", str(job), "--store", str(store), "--json")
    assert r.returncode == 0, r.stderr
    verdict = json.loads(r.stdout)
    assert verdict["nodes"][0]["node"] == nodes[2], (verdict, shown_stdout)
    assert (jobs / f"l4gone-ok-l4-gone-{good:04d}-{good}-4294967294.out").exists()
    assert verdict["baseline_events"] > 0  # the good run's file, from its own record
    top = verdict["lines"][0]
    assert "ECC" in top["text"]
    assert top["file"] == str(out)
    assert out.read_text().splitlines()[top["line"] - 1].endswith(top["text"])
    r = _cli(c, "logs", "--job", str(job), "--store", str(store))
    assert r.returncode == 0 and f"culprit node(s): {nodes[2]}" in r.stdout, r.stdout
    r = _cli(c, "diagnose", str(job), "--store", str(store), "--find-logs", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["logs"]["nodes"][0]["node"] == nodes[2] and "logs" in d["named_by"][nodes[2]]
    # and 22.05's sacct has no field that would have kept the paths (docs/logs.md)
    for field in ("StdOut", "StdErr"):
        r = c.run(["sacct", "-n", "-X", "-j", str(job), "-o", field], check=False)
        assert r.returncode != 0 and "Invalid field requested" in r.stderr, (field, r.stderr)
