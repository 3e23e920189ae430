"""The CBD Prolog on the real 8-node Slurm test cluster.

Installed the way docs/cbd.md tells admins (``Prolog=.../prolog/aegis-prolog``, config through a
two-line site wrapper); the GPU probe is pointed by config at recorded real ``nvidia-smi -q``
output: healthy 8xH100, or the same dump with one GPU missing (what XID 79 looks like).
HealthCheckProgram runs are driven the way slurmd would run them: the same wrapper, as root,
with ``SLURMD_NODENAME`` set.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import time
from pathlib import Path

import pytest

from .conftest import SlurmCluster

REPO = Path(__file__).resolve().parents[2]
FIX = (
    REPO / "tests" / "fixtures" / "hostsignals" / "gpud" / "nvidia-smi-query.535.161.08.out.0.valid"
)
PROLOG = REPO / "prolog" / "aegis-prolog"


def _broken_dump(path: Path) -> Path:
    parts = FIX.read_text().split("\nGPU 0000")
    del parts[5]  # GPU 4 fell off the bus
    path.write_text(
        "\nGPU 0000".join(parts).replace(
            "Attached GPUs                             : 8",
            "Attached GPUs                             : 7",
        )
    )
    return path


class Site:
    """A site install: config TOML + the wrapper slurm.conf points at."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        tmp.chmod(0o755)
        self.healthy = FIX
        self.broken = _broken_dump(tmp / "nvidia-smi-q.broken")
        self.empty = tmp / "kmsg.empty"
        self.empty.write_text("")
        self.config = tmp / "cbd.toml"
        self.state = tmp / "state"
        self.hook = tmp / "aegis-prolog-site"
        self.hook.write_text(
            f"#!/bin/sh\nAEGIS_CBD_CONFIG={self.config}\nexport AEGIS_CBD_CONFIG\n"
            f'exec /bin/sh {PROLOG} "$@"\n'
        )
        self.hook.chmod(self.hook.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)

    def write(
        self,
        broken: list[str],
        *,
        default_broken: bool = False,
        share: float = 0.3,
        resume_after: int = 3,
        xid: list[str] | None = None,
    ) -> None:
        default = self.broken if default_broken else self.healthy
        lines = [
            "[runtime]",
            f'state_dir = "{self.state}"',
            f'textfile_dir = "{self.tmp}/prom"',
            "scontrol_timeout_s = 10.0",
            f"resume_after_passes = {resume_after}",
            "[guard]",
            f"max_drained_share = {share}",
            "max_drained_nodes = 8",
            "window_minutes = 60",
            "[expect]",
            'gpus = "slurm"',
            'time_sync = "off"',
            "[probes]",
            f'nvidia_smi_q = ["cat", "{default}"]',
            f'kernel_log = ["cat", "{self.empty}"]',
        ]
        for node in broken:
            lines += [
                "[[nodetype]]",
                f'match = ["{node}"]',
                f'probes = {{ nvidia_smi_q = ["cat", "{self.broken}"] }}',
            ]
        for node in xid or []:  # a real XID 79 kmsg record in this node's kernel log
            kmsg = self.tmp / f"kmsg.{node}"
            kmsg.write_text(
                "4,3990,306764307,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=0, name=, "
                "GPU has fallen off the bus.\n"
            )
            lines += [
                "[[nodetype]]",
                f'match = ["{node}"]',
                f'probes = {{ kernel_log = ["cat", "{kmsg}"] }}',
            ]
        self.config.write_text("\n".join(lines) + "\n")

    def healthcheck(self, cluster: SlurmCluster, node: str) -> subprocess.CompletedProcess[str]:
        """What slurmd does for HealthCheckProgram: run the hook as root, node name in env."""
        env = {
            "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
            "SLURMD_NODENAME": node,
            "SLURM_CONF": cluster.env["SLURM_CONF"],
            "AEGIS_MODE": "healthcheck",
        }
        return subprocess.run(
            [str(self.hook)], env=env, capture_output=True, text=True, timeout=60, check=False
        )

    def prolog(
        self, cluster: SlurmCluster, node: str, **env: str
    ) -> subprocess.CompletedProcess[str]:
        """What slurmd does for Prolog= (job id and context set), without a job."""
        full = {
            "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
            "SLURMD_NODENAME": node,
            "SLURM_CONF": cluster.env["SLURM_CONF"],
            "SLURM_JOB_ID": "999999",
            "SLURM_SCRIPT_CONTEXT": "prolog_slurmd",
            **env,
        }
        return subprocess.run(
            [str(self.hook)], env=full, capture_output=True, text=True, timeout=60, check=False
        )

    def last(self, node: str) -> dict:
        return json.loads((self.state / node / "state.json").read_text())


def _node(cluster: SlurmCluster, node: str) -> tuple[str, str]:
    out = cluster.run(["sinfo", "-h", "-N", "-n", node, "-o", "%T|%E"]).stdout.splitlines()[0]
    state, reason = out.split("|", 1)
    return state, reason


def _wait_node(cluster: SlurmCluster, node: str, pred, timeout: float = 30) -> tuple[str, str]:
    deadline = time.monotonic() + timeout
    while True:
        st = _node(cluster, node)
        if pred(*st) or time.monotonic() > deadline:
            return st
        time.sleep(0.3)


@pytest.fixture
def site(slurm_cluster: SlurmCluster, tmp_path: Path):
    # Every node idle first: the tests rely on the scheduler's first pick (node1), and a job
    # another module left running (or still completing) there sent it elsewhere once in a
    # full CI run (node1 stayed "mixed", never drained)
    slurm_cluster.reset()
    s = Site(tmp_path)
    s.write(broken=[])
    slurm_cluster.set_hooks(prolog=s.hook)
    try:
        yield s
    finally:
        slurm_cluster.reset()


def test_prolog_drains_with_our_reason_and_job_runs_elsewhere(slurm_cluster, site):
    c = slurm_cluster
    site.write(broken=["node1"])  # the scheduler's first pick
    jobid = c.submit(["-N1", "--wrap", "hostname"])
    state, reason = _wait_node(c, "node1", lambda s, r: "drain" in s)
    assert "drain" in state
    assert reason.startswith("aegis: gpu_count: 7 GPUs visible, 8 expected"), reason
    # Slurm requeued the job (Prolog exit 1) and held it (no nohold_on_prolog_fail here)
    deadline = time.monotonic() + 30
    while c.job_field(jobid, "Restarts") in (None, "0") and time.monotonic() < deadline:
        time.sleep(0.3)
    assert c.job_field(jobid, "Restarts") == "1"
    # the requeue passes through COMPLETING (node1's Epilog) before PENDING: a fresh-clone CI
    # run once read COMPLETING here
    while c.job_field(jobid, "JobState") == "COMPLETING" and time.monotonic() < deadline + 30:
        time.sleep(0.3)
    assert c.job_field(jobid, "JobState") == "PENDING"
    c.run(["scontrol", "release", str(jobid)], check=False)
    c.run(["scontrol", "update", f"jobid={jobid}", "StartTime=now"], check=False)
    c.wait_state(jobid, "COMPLETED", timeout=90)
    ran_on = c.job_field(jobid, "NodeList")
    assert ran_on and ran_on != "node1"
    # Slurm's own "Prolog error" did not replace our reason
    assert _node(c, "node1")[1].startswith("aegis: gpu_count:")
    last = site.last("node1")["last"]
    assert last["rc"] == 1 and last["mode"] == "prolog"


def test_admin_drain_is_left_alone_and_never_resumed(slurm_cluster, site):
    c = slurm_cluster
    c.run(["scontrol", "update", "nodename=node2", "state=drain", "reason=admin: cable swap"])
    site.write(broken=["node2"])
    r = site.healthcheck(c, "node2")
    assert r.returncode == 0, r.stderr
    assert _node(c, "node2")[1] == "admin: cable swap"
    site.write(broken=[])
    for _ in range(4):
        assert site.healthcheck(c, "node2").returncode == 0
    state, reason = _node(c, "node2")
    assert "drain" in state and reason == "admin: cable swap"


def test_resume_only_after_consecutive_passes(slurm_cluster, site):
    c = slurm_cluster
    site.write(broken=["node4"], resume_after=3)
    assert site.healthcheck(c, "node4").returncode == 0
    state, reason = _wait_node(c, "node4", lambda s, r: "drain" in s)
    assert "drain" in state and reason.startswith("aegis: gpu_count:")
    site.write(broken=[])
    for _ in range(2):  # two passes: hysteresis keeps it drained
        site.healthcheck(c, "node4")
        assert "drain" in _node(c, "node4")[0]
    site.write(broken=["node4"])  # flaps: counter restarts
    site.healthcheck(c, "node4")
    site.write(broken=[])
    for _ in range(2):
        site.healthcheck(c, "node4")
        assert "drain" in _node(c, "node4")[0]
    site.healthcheck(c, "node4")  # third consecutive pass
    state, reason = _wait_node(c, "node4", lambda s, r: "drain" not in s)
    # "*" = slurmd not responding this instant (testbed noise), not our business
    assert state.rstrip("*") in ("idle", "mixed", "allocated"), (state, reason)
    assert site.last("node4")["counters"]["resumes"] == 1


def test_drain_storm_guard_trips_when_most_nodes_fail(slurm_cluster, site):
    c = slurm_cluster
    site.write(broken=[], default_broken=True, share=0.25)  # every node "lost a GPU"
    for node in c.nodes:
        assert site.healthcheck(c, node).returncode == 0
    drained = [n for n in c.nodes if "drain" in _node(c, n)[0]]
    assert len(drained) == 2, [(n, _node(c, n)) for n in c.nodes]
    assert all(_node(c, n)[1].startswith("aegis: gpu_count:") for n in drained)
    tripped = [
        n for n in c.nodes if site.last(n).get("counters", {}).get("storm_guard_trips", 0) >= 1
    ]
    assert len(tripped) == 6
    prom = (site.tmp / "prom" / f"aegis_cbd_{tripped[0]}.prom").read_text()
    assert 'aegis_cbd_drain_storm_guard{check="gpu_count"} 1' in prom
    # the Prolog lets jobs start while the guard holds
    jobid = c.submit(["-N1", "--wrap", "hostname"])
    c.wait_state(jobid, "COMPLETED", timeout=60)
    assert c.job_field(jobid, "NodeList") not in drained
    assert os.path.exists(site.state)


def test_nohold_on_prolog_fail_requeues_without_hold(slurm_cluster, site):
    """The setting docs/cbd.md recommends: the requeued job is not held."""
    c = slurm_cluster
    original = c.conf.read_text()
    lines = [
        line + ",nohold_on_prolog_fail" if line.startswith("SchedulerParameters=") else line
        for line in original.splitlines()
    ]
    assert any("nohold_on_prolog_fail" in line for line in lines)
    try:
        c.conf.write_text("\n".join(lines) + "\n")
        c.run(["scontrol", "reconfigure"])
        site.write(broken=["node1"])
        jobid = c.submit(["-N1", "--wrap", "hostname"])
        deadline = time.monotonic() + 30
        while c.job_field(jobid, "Restarts") in (None, "0") and time.monotonic() < deadline:
            time.sleep(0.3)
        assert c.job_field(jobid, "Restarts") == "1"
        assert c.job_field(jobid, "Reason") != "launch_failed_requeued_held"
        assert c.job_field(jobid, "Priority") != "0"  # held jobs have priority 0
        assert _node(c, "node1")[1].startswith("aegis: gpu_count:")
        # requeued jobs become eligible after ~120 s; no release needed, only the start time
        c.run(["scontrol", "update", f"jobid={jobid}", "StartTime=now"], check=False)
        c.wait_state(jobid, "COMPLETED", timeout=90)
        assert c.job_field(jobid, "NodeList") != "node1"
    finally:
        c.conf.write_text(original)
        c.run(["scontrol", "reconfigure"])


def test_wrapper_exit_codes_prolog_mode(slurm_cluster, site):
    """A real critical fail gives Slurm exit 1 (drain + requeue); a broken interpreter gives 0."""
    c = slurm_cluster
    site.write(broken=["node3", "node5"])
    r = site.prolog(c, "node3")
    assert r.returncode == 1, r.stderr
    state, reason = _wait_node(c, "node3", lambda s, r: "drain" in s)
    assert "drain" in state and reason.startswith("aegis: gpu_count:")
    assert site.last("node3")["last"]["rc"] == 1
    # another broken node, but python cannot import aegis: fail open, nothing drained
    r = site.prolog(c, "node5", AEGIS_PYTHON="/usr/bin/python3")
    assert r.returncode == 0 and "exited 1 (aegis failure" in r.stderr
    assert "drain" not in _node(c, "node5")[0]


def test_xid_marked_seen_only_after_its_drain(slurm_cluster, site):
    c = slurm_cluster
    # 2 of 8 already drained by aegis for xid: a third would be 3/8 > 30% -> guard holds
    for n in ("node1", "node2"):
        c.run(
            [
                "scontrol",
                "update",
                f"nodename={n}",
                "state=drain",
                "reason=aegis: xid: Xid 79 on 0000:1b:00",
            ]
        )
    site.write(broken=[], xid=["node6"])
    assert site.healthcheck(c, "node6").returncode == 0
    st = site.last("node6")
    assert st["counters"]["storm_guard_trips"] == 1 and "drain" not in _node(c, "node6")[0]
    assert not st.get("xid_pos") and st["xid_pending"]  # not acted on: judged again
    c.run(["scontrol", "update", "nodename=node1,node2", "state=resume"])
    assert site.healthcheck(c, "node6").returncode == 0
    state, reason = _wait_node(c, "node6", lambda s, r: "drain" in s)
    assert "drain" in state and reason.startswith("aegis: xid: Xid 79 on 0000:3b:00"), reason
    st = site.last("node6")
    assert st["xid_pos"] and not st.get("xid_pending")
