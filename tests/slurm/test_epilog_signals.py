"""The Epilog on the real 8-node Slurm 22.05 test cluster (no mocks).

Installed the way docs/epilog.md tells admins: ``Epilog=`` and ``EpilogSlurmctld=`` both point
at ``epilog/aegis-epilog`` through a two-line site wrapper that sets the config.  The kernel-log
probe of node3 is pointed by config at a recorded real ``dmesg`` with XID 119 (GSP timeout, a
critical XID); the other nodes read an empty log; nvidia-smi is the recorded healthy 8xH100.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from aegis_slurm.accounting import load_runs
from aegis_slurm.accounting.signals import load_signals
from aegis_slurm.analytics.attribution import attribute_failures
from aegis_slurm.node import spool

from .conftest import SlurmCluster

REPO = Path(__file__).resolve().parents[2]
FIX = REPO / "tests" / "fixtures" / "hostsignals"
HOOK = REPO / "epilog" / "aegis-epilog"


def _cli() -> str:
    beside = Path(sys.executable).with_name("aegis-slurm")
    found = str(beside) if beside.exists() else shutil.which("aegis-slurm")
    assert found, "the aegis-slurm console script is not installed"
    return found


class Site:
    def __init__(self, tmp: Path, cluster: SlurmCluster) -> None:
        tmp.chmod(0o755)
        self.tmp = tmp
        self.spool = tmp / "spool"
        self.state = tmp / "state"
        self.config = tmp / "cbd.toml"
        empty = tmp / "kmsg.empty"
        empty.write_text("")
        self.config.write_text(f"""
[runtime]
state_dir = "{self.state}"
textfile_dir = ""
[expect]
gpus = "slurm"
time_sync = "off"
[probes]
nvidia_smi_q = ["cat", "{FIX}/gpud/nvidia-smi-query.535.161.08.out.0.valid"]
kernel_log = ["cat", "{empty}"]
[[nodetype]]
match = ["node3"]
probes = {{ kernel_log = ["cat", "{FIX}/gpud/dmesg-with-xid-119.log"] }}
[epilog]
spool_dir = "{self.spool}"
slurm_conf = "{cluster.conf}"
ctld_wait_s = 20.0
[loop_guard]
max_requeues = 2
window_minutes = 60
""")
        self.hook = tmp / "aegis-epilog-site"
        self.hook.write_text(
            f"#!/bin/sh\nAEGIS_CBD_CONFIG={self.config}\n"
            f'export AEGIS_CBD_CONFIG\nexec /bin/sh {HOOK} "$@"\n'
        )
        self.hook.chmod(self.hook.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)

    def records(self, job: int) -> dict[str, dict]:
        return {r["node"]: r for r in spool.read_records([self.spool]) if r["job_id"] == str(job)}


@pytest.fixture
def site(slurm_cluster: SlurmCluster, tmp_path: Path):
    s = Site(tmp_path, slurm_cluster)
    slurm_cluster.set_hooks(epilog=s.hook, epilog_ctld=s.hook)
    try:
        yield s
    finally:
        slurm_cluster.reset()


def _admin_comment(c: SlurmCluster, job: int) -> str:
    out = c.run(
        ["sacct", "-n", "-P", "-X", "-D", "-j", str(job), "-S", "now-1days", "-o", "AdminComment"]
    ).stdout.splitlines()
    return out[-1] if out else ""


def _wait(pred, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while True:
        got = pred()
        if got:
            return got
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.5)


def test_failed_multinode_job_signals_reach_spool_admincomment_store_and_diagnose(
    slurm_cluster, site
):
    c = slurm_cluster
    nodes = ["node1", "node2", "node3", "node4"]
    job = c.submit(["-N4", "-w", "node[1-4]", "--no-requeue", "--wrap", "sleep 2; exit 1"])
    c.wait_state(job, "FAILED", timeout=90)

    # 1. every node's Epilog spooled one record for this run; node3's has the XID
    recs = _wait(lambda: (r := site.records(job)) and len(r) == 4 and r, 60, "4 spool records")
    assert sorted(recs) == nodes
    for n, r in recs.items():
        assert r["run"] == 0 and r["cluster"] == "testbed" and r["exit_code"] == "1:0"
        assert r["probe_errors"] == [], (n, r["probe_errors"])
        path = site.spool / n / "signals.jsonl"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    xids = [s for s in recs["node3"]["signals"] if s["signal"] == "xid119"]
    assert xids and xids[0]["critical"] and xids[0]["pci"] == "0000:9b:00"
    assert all(not r["signals"] for n, r in recs.items() if n != "node3")

    # 2. EpilogSlurmctld appended the short tag to AdminComment (sacctmgr on the ended job)
    comment = _wait(
        lambda: (a := _admin_comment(c, job)) and "aegis:" in a and a, 60, "AdminComment tag"
    )
    assert comment == "aegis:v1;hw=node3:xid119", comment

    # 3. ingest + signals collect (twice: idempotent) -> the run is a hardware failure
    store = site.tmp / "store"
    day = datetime.now(UTC).date()
    c.wait_accounting_quiet(day.isoformat())
    proc = subprocess.run(
        [
            _cli(),
            "ingest",
            "--sacct",
            "--start",
            day.isoformat(),
            "--end",
            (day + timedelta(days=1)).isoformat(),
            "--store",
            str(store),
            "--json",
        ],
        env=c.env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    for expect_added in (True, False):
        proc = subprocess.run(
            [
                _cli(),
                "signals",
                "collect",
                "--spool",
                str(site.spool),
                "--store",
                str(store),
                "--json",
            ],
            env=c.env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        rep = json.loads(proc.stdout)
        assert (rep["added"] >= 4) if expect_added else (rep["added"], rep["updated"]) == (0, 0)
    runs = attribute_failures(load_runs(store), load_signals(store))
    row = runs.filter(pl.col("job_id_raw") == job).row(-1, named=True)
    assert row["state"] == "FAILED" and row["infra_failure"]
    assert (row["attribution_source"], row["cause"], row["blamed_nodes"]) == (
        "node_signal",
        "xid119",
        ["node3"],
    )
    assert row["admin_comment"] == "aegis:v1;hw=node3:xid119"
    proc = subprocess.run(
        [_cli(), "taxonomy", "--store", str(store), "--json"],
        env=c.env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["attribution_sources"]["node_signal"]["FAILED"] >= 1

    # 4. diagnose names node3
    proc = subprocess.run(
        [_cli(), "diagnose", str(job), "--store", str(store), "--json"],
        env=c.env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    d = json.loads(proc.stdout)
    assert (d["verdict"], d["nodes"], d["job_nodes"]) == ("critical", ["node3"], nodes)
    assert "drain" in d["actions"]["node3"]


def test_crash_loop_is_held_after_k_requeues_and_not_before(slurm_cluster, site):
    c = slurm_cluster
    # RequeueExit=42 in the testbed: Slurm requeues this job forever (22.05 has no
    # MaxBatchRequeue).  The guard allows 2 failed runs per hour and holds on the third.
    job = c.submit(["-N1", "--wrap", "sleep 1; exit 42"])
    for restarts in (1, 2, 3):
        _wait(
            lambda r=restarts: (
                c.job_field(job, "Restarts") == str(r) and c.job_field(job, "JobState") == "PENDING"
            ),
            120,
            f"requeue {restarts}",
        )
        if restarts < 3:
            assert c.job_field(job, "Reason") != "JobHeldAdmin"  # below the threshold: untouched
            time.sleep(2.5)  # Slurm revokes credentials of a too-fast restart (testbed notes)
            c.run(["scontrol", "update", f"jobid={job}", "StartTime=now"], check=False)
    _wait(lambda: c.job_field(job, "Reason") == "JobHeldAdmin", 60, "held by the guard")
    assert c.job_field(job, "Priority") == "0"
    # it stays held: no fourth run
    c.run(["scontrol", "update", f"jobid={job}", "StartTime=now"], check=False)
    time.sleep(5)
    assert c.job_field(job, "Restarts") == "3" and c.job_field(job, "JobState") == "PENDING"
    shown = c.run(["scontrol", "-o", "show", "job", str(job)]).stdout
    assert "aegis:v1;loop=held 3 failed runs within 60 min (limit 2" in shown
    loops = json.loads((site.state / "ctld" / "loops.json").read_text())
    assert str(job) in loops["held"] and "limit 2" in loops["held"][str(job)]["why"]
    c.run(["scancel", str(job)])


def test_auto_drain_isolates_the_culprit_with_our_reason(slurm_cluster, site):
    """Off by default; with ``auto_drain = true`` the slurmctld side drains what Algorithm 1
    isolates (through the Prolog's drain rules), and only that node."""
    c = slurm_cluster
    site.config.write_text(
        site.config.read_text().replace(
            "ctld_wait_s = 20.0", "ctld_wait_s = 20.0\nauto_drain = true"
        )
    )
    job = c.submit(["-N4", "-w", "node[1-4]", "--no-requeue", "--wrap", "sleep 2; exit 1"])
    c.wait_state(job, "FAILED", timeout=90)

    def reason(node: str) -> tuple[str, str]:
        out = c.run(["sinfo", "-h", "-N", "-n", node, "-o", "%T|%E"]).stdout.splitlines()[0]
        state, why = out.split("|", 1)
        return state, why

    _state, why = _wait(lambda: "drain" in (r := reason("node3"))[0] and r, 60, "node3 drained")
    assert why.startswith(f"aegis: diagnose: job {job} critical: xid119"), why
    assert all("drain" not in reason(n)[0] for n in ("node1", "node2", "node4"))


def test_node_fail_tags_the_node_that_went_silent(slurm_cluster, site):
    """NODE_FAIL reaches EpilogSlurmctld as exit 0:0 (Reason=NodeDown): the ctld side asks
    slurmctld once, waits for the records, and blames the node that left none."""
    c = slurm_cluster
    job = c.submit(["-N2", "-w", "node[5-6]", "--no-requeue", "--wrap", "sleep 300"])
    _wait(lambda: c.job_field(job, "JobState") == "RUNNING", 60, "job running")
    time.sleep(2)
    os.kill(c.slurmd_pid("node6"), signal.SIGKILL)
    c.wait_state(job, "NODE_FAIL", timeout=120)
    comment = _wait(
        lambda: (a := _admin_comment(c, job)) and "aegis:" in a and a, 60, "AdminComment tag"
    )
    assert comment == "aegis:v1;hw=node6:node_fail", comment
    recs = site.records(job)
    assert sorted(recs) == ["node5"]  # node6's slurmd was dead: no Epilog there
    # the analytics now blame node6 (22.05 has no FailedNode field to say so)
    runs = pl.DataFrame(
        {
            "state": ["NODE_FAIL"],
            "nodes": [["node5", "node6"]],
            "admin_comment": [comment],
            "end_time": [datetime.now(UTC)],
        }
    )
    row = attribute_failures(runs).row(0, named=True)
    assert (row["attribution_source"], row["blamed_nodes"]) == ("admin_comment", ["node6"])


def test_symlinked_epilog_finds_its_install_10_15(slurm_cluster, site):
    """Installed as a symlink (``/usr/local/sbin/aegis-epilog -> <install>/epilog/...``):
    slurmd runs the link; the wrapper still finds the install's venv and spools."""
    c = slurm_cluster
    sbin = site.tmp / "sbin"
    sbin.mkdir(mode=0o755)
    link = sbin / "aegis-epilog"
    link.symlink_to(HOOK)
    site.hook.write_text(
        f'#!/bin/sh\nAEGIS_CBD_CONFIG={site.config}\nexport AEGIS_CBD_CONFIG\nexec {link} "$@"\n'
    )
    job = c.submit(["-N1", "-w", "node2", "--no-requeue", "--wrap", "exit 3"])
    c.wait_state(job, "FAILED", timeout=90)
    recs = _wait(lambda: site.records(job), 60, "a record from the symlinked Epilog")
    assert recs["node2"]["exit_code"] == "3:0"


def test_prolog_requeues_are_no_failed_runs_for_the_loop_guard_10_13(slurm_cluster, site, tmp_path):
    """The real sequence: our Prolog bounces a job off three broken nodes (each bounce a
    requeue, Restarts 1..3, beyond the guard's limit of 2) and it then runs cleanly on the
    fourth.  None of those runs started the batch script and failed: no hold, the job ran."""
    from .test_prolog_drain import Site as PrologSite

    c = slurm_cluster
    pdir = tmp_path / "prolog"
    pdir.mkdir()
    ps = PrologSite(pdir)
    ps.write(broken=["node1", "node2", "node3"], share=0.5)
    original = c.conf.read_text()
    lines = [
        line + ",nohold_on_prolog_fail" if line.startswith("SchedulerParameters=") else line
        for line in original.splitlines()
    ]
    try:
        c.conf.write_text("\n".join(lines) + "\n")
        c.set_hooks(prolog=ps.hook, epilog=site.hook, epilog_ctld=site.hook)
        job = c.submit(["-N1", "-x", "node[5-8]", "--wrap", "hostname"])
        deadline = time.monotonic() + 420
        while c.job_field(job, "JobState") not in ("COMPLETED", None):
            assert time.monotonic() < deadline, c.run(["scontrol", "show", "job", str(job)])
            assert c.job_field(job, "Reason") != "JobHeldAdmin", "held by the loop guard"
            if c.job_field(job, "JobState") == "PENDING":
                time.sleep(2.5)  # Slurm revokes credentials of a too-fast restart
                c.run(["scontrol", "update", f"jobid={job}", "StartTime=now"], check=False)
            time.sleep(1)
        c.wait_state(job, "COMPLETED", timeout=60)
        rec = c.sacct_records(job)[-1]
        assert rec.state == "COMPLETED"
        shown = _admin_comment(c, job)
        assert "loop=held" not in shown
        loops = site.state / "ctld" / "loops.json"
        hist = json.loads(loops.read_text())["jobs"].get(str(job), []) if loops.exists() else []
        assert not any(h.get("failed") for h in hist), hist
        drained = [n for n in ("node1", "node2", "node3") if "drain" in c.node_state(n)]
        assert drained == ["node1", "node2", "node3"]  # it really bounced off all three
    finally:
        c.conf.write_text(original)
        c.run(["scontrol", "reconfigure"])


def test_node_fail_diagnose_blames_the_tagged_node_10_16(slurm_cluster, site):
    """NODE_FAIL, then node6's slurmd comes back: whatever its Epilog records later (no
    signal), ``diagnose`` follows the job's own ``hw=node6:node_fail`` tag."""
    c = slurm_cluster
    job = c.submit(["-N2", "-w", "node[5-6]", "--no-requeue", "--wrap", "sleep 300"])
    _wait(lambda: c.job_field(job, "JobState") == "RUNNING", 60, "job running")
    time.sleep(2)
    os.kill(c.slurmd_pid("node6"), signal.SIGKILL)
    c.wait_state(job, "NODE_FAIL", timeout=120)
    _wait(lambda: "aegis:" in _admin_comment(c, job), 60, "AdminComment tag")
    c.script("reset")  # restarts node6's slurmd
    time.sleep(5)
    store = site.tmp / "store"
    day = datetime.now(UTC).date()
    c.wait_accounting_quiet(day.isoformat())
    for argv in (
        [
            *("ingest", "--sacct", "--start", day.isoformat()),
            *("--end", (day + timedelta(days=1)).isoformat(), "--store", str(store), "--json"),
        ],
        ["signals", "collect", "--spool", str(site.spool), "--store", str(store), "--json"],
    ):
        proc = subprocess.run(
            [_cli(), *argv], env=c.env, capture_output=True, text=True, check=False
        )
        assert proc.returncode == 0, proc.stderr
    proc = subprocess.run(
        [_cli(), "diagnose", str(job), "--store", str(store), "--json"],
        env=c.env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    d = json.loads(proc.stdout)
    assert d["job_state"] == "NODE_FAIL"
    assert (d["verdict"], d["nodes"]) == ("critical", ["node6"]), d
