"""Real Slurm jobs in every state the accounting ingest must read, produced concurrently.

Each scenario group runs in its own thread on its own nodes (a NODE_FAIL or a preemption must not
hit another scenario's job):

- node1: TIMEOUT (the slowest, 60-90 s: slurmctld checks limits every 30 s) and a job that pends
  behind it and is cancelled before it starts;
- node2: two jobs, one ``--no-requeue``, when node2's slurmd is SIGKILLed (NODE_FAIL ~30 s later);
- node3/node4: PREEMPTED in REQUEUE (``batch``) and CANCEL (``scavenger``) mode by an ``urgent``
  job;
- node5-8: a 4-node 32-GPU job then a het job; CPU-only jobs beside them (``--exclude=node[1-4]``).

Requeued jobs would wait ~120 s before their next run; the drivers set ``StartTime=now`` (after a
pause: a rerun within the same second on the same node fails with "Job credential revoked").
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .conftest import SlurmCluster

PIPE_NAME = "name|with pipe"
SCRIPT_NAME = "<script>alert(1)</script>"
CRASH_LOOP_REQUEUES = 3
OFF_SPECIAL_NODES = "--exclude=node[1-4]"

# First run sleeps (so the driver can requeue/kill it), every later run ends at once.
SLEEP_FIRST_RUN = """#!/bin/bash
if [ "${SLURM_RESTART_COUNT:-0}" -eq 0 ]; then sleep 600; fi
exit 0
"""
# Exit 42 (RequeueExit) on the first runs, then fail for good.
CRASH_LOOP = f"""#!/bin/bash
if [ "${{SLURM_RESTART_COUNT:-0}}" -lt {CRASH_LOOP_REQUEUES} ]; then exit 42; fi
exit 1
"""
# Grows the batch shell far past --mem=64M; task/cgroup (cgroup v1) kills it: OUT_OF_MEMORY.
OOM = """#!/bin/bash
hog=$(head -c 400000000 /dev/zero | tr '\\0' x)
echo "${#hog}"
"""
MULTINODE = """#!/bin/bash
srun --ntasks-per-node=1 true
"""
# The batch script succeeds but its srun step fails: COMPLETED 0:0 with DerivedExitCode 3:0.
# The sleep is needed: Slurm 22.05 raises DerivedExitCode when the step's slurmstepd reports the
# step complete, and if the batch script has ended first the job is recorded with 0:0 (seen on a
# loaded machine: step 533.0 reported 0.17 s after the job completed).  Real jobs that exit right
# after a failing srun lose their DerivedExitCode the same way.
STEP_FAILS = """#!/bin/bash
srun bash -c 'exit 3'
sleep 5
exit 0
"""
USER_COMMENT = "user note: lr=3e-4"
# What a health checker would attach to a running job (payload kept short, may hold ';').
ADMIN_COMMENT = "hc:v1;xid=79"
HETJOB = """#!/bin/bash
#SBATCH -N1 -w node5 --gres=gpu:2 -t 10
#SBATCH hetjob
#SBATCH -N1 -w node6 -t 10
true
"""


@dataclass
class ScenarioRun:
    """What the scenario fixture produced."""

    start: datetime  # UTC, a little before the first submit
    # scenario -> job id (array/het: the id sbatch printed)
    jobs: dict[str, int] = field(default_factory=dict)
    users: dict[str, str] = field(default_factory=dict)  # scenario -> submitting user
    duration_s: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)  # group -> seconds

    @property
    def sacct_start(self) -> str:
        return self.start.strftime("%Y-%m-%dT%H:%M:%S")


class _Driver:
    def __init__(self, cluster: SlurmCluster, run: ScenarioRun) -> None:
        self.c = cluster
        self.run = run
        self._lock = threading.Lock()

    def submit(
        self, name: str, argv: list[str], user: str = "alice", script: str | None = None
    ) -> int:
        jobid = self.c.submit(argv, user=user, script=script)
        with self._lock:
            self.run.jobs[name] = jobid
            self.run.users[name] = user
        return jobid

    def wait_requeued(self, jobid: int, restarts: int, timeout: float = 120) -> None:
        """Wait until slurmctld holds the job PENDING again after its ``restarts``-th requeue."""
        deadline = time.monotonic() + timeout
        while True:
            state = self.c.job_field(jobid, "JobState")
            count = int(self.c.job_field(jobid, "Restarts") or 0)
            if state == "PENDING" and count >= restarts:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"job {jobid} not requeued ({state}, Restarts={count})")
            time.sleep(0.3)

    def start_now(self, jobid: int) -> None:
        time.sleep(2.5)  # pitfall: a rerun within the same second gets "Job credential revoked"
        self.c.run(["scontrol", "update", f"jobid={jobid}", "StartTime=now"])

    # ------------------------------------------------------------------ groups
    def node1_timeout_and_pending(self) -> None:
        t = self.submit(
            "timeout", ["-J", "timeout", "-w", "node1", "-t", "1", "--wrap", "sleep 600"]
        )
        self.c.wait_state(t, "RUNNING")
        # Eligible but blocked on Resources: it reaches slurmdbd (a held job never would).
        p = self.submit(
            "cancelled_pending",
            ["-J", "pending", "-w", "node1", "--exclusive", "-t", "5", "--wrap", "true"],
        )
        self.c.wait_state(p, "PENDING")
        self.c.run(["scancel", str(p)])  # as root: "CANCELLED by 0"
        self.c.wait_state(p, "CANCELLED")
        self.c.wait_state(t, "TIMEOUT", timeout=240)

    def node2_node_fail(self) -> None:
        a = self.submit(
            "node_fail_norequeue",
            ["-J", "nf-norequeue", "-w", "node2", "--no-requeue", "--wrap", "sleep 600"],
            user="bob",
        )
        b = self.submit(
            "node_fail_requeue",
            ["-J", "nf-requeue", "-w", "node2", "--requeue"],
            script=SLEEP_FIRST_RUN,
        )
        self.c.wait_state(a, "RUNNING")
        self.c.wait_state(b, "RUNNING")
        os.kill(self.c.slurmd_pid("node2"), signal.SIGKILL)
        self.c.wait_state(a, "NODE_FAIL", timeout=180)
        self.c.wait_record(b, "NODE_FAIL")
        self.c.script("start")  # restarts node2's slurmd; it returns by itself (ReturnToService=1)
        self.wait_requeued(b, 1)
        self.start_now(b)
        self.c.wait_state(b, "COMPLETED")

    def node34_preemption(self) -> None:
        r = self.submit(
            "preempted_requeue",
            ["-J", "preempt-requeue", "-p", "batch", "-w", "node3", "--gres=gpu:8"],
            script=SLEEP_FIRST_RUN,
        )
        k = self.submit(
            "preempted_cancel",
            [
                "-J",
                "preempt-cancel",
                "-p",
                "scavenger",
                "-w",
                "node4",
                "--gres=gpu:8",
                "--wrap",
                "sleep 600",
            ],
        )
        self.c.wait_state(r, "RUNNING")
        self.c.wait_state(k, "RUNNING")
        u = self.submit(
            "preemptor",
            [
                "-J",
                "urgent",
                "-p",
                "urgent",
                "-N2",
                "-w",
                "node[3-4]",
                "--gpus-per-node=8",
                "-t",
                "10",
                "--wrap",
                "sleep 2",
            ],
            user="bob",
        )
        self.c.wait_state(k, "PREEMPTED")
        self.wait_requeued(r, 1)
        self.c.wait_state(u, "COMPLETED")
        self.start_now(r)
        self.c.wait_state(r, "COMPLETED")

    def node5678_gpu_jobs(self) -> None:
        m = self.submit(
            "multinode_gpu",
            ["-J", "multinode", "-N4", "-w", "node[5-8]", "--gpus-per-node=8", "-t", "10"],
            user="bob",
            script=MULTINODE,
        )
        self.c.wait_state(m, "COMPLETED")
        h = self.submit("het", [], script=HETJOB)  # needs node5's GPUs, so after the 4-node job
        self.c.wait_state(h, "COMPLETED")

    def cpu_jobs(self) -> None:
        common = [OFF_SPECIAL_NODES, "-t", "10"]
        simple = {
            "completed": (["-J", "completed", "--wrap", "sleep 2"], "alice", None),
            "failed_exit1": (["-J", "exit1", "--wrap", "exit 1"], "alice", None),
            "failed_signal": (["-J", "sigkill", "--wrap", "kill -9 $$"], "bob", None),
            "out_of_memory": (["-J", "oom", "--mem=64M"], "bob", OOM),
            "name_pipe": (["-J", PIPE_NAME, "--wrap", "true"], "alice", None),
            "name_script": (["-J", SCRIPT_NAME, "--wrap", "true"], "bob", None),
            "array": (
                ["-J", "array", "--array=0-2", "--wrap", "exit $SLURM_ARRAY_TASK_ID"],
                "bob",
                None,
            ),
            "completed_step_failed": (["-J", "step-fails"], "bob", STEP_FAILS),
        }
        ids = {
            name: self.submit(name, [*argv, *common], user=user, script=script)
            for name, (argv, user, script) in simple.items()
        }
        expected = {
            "completed": "COMPLETED",
            "failed_exit1": "FAILED",
            "failed_signal": "FAILED",
            "out_of_memory": "OUT_OF_MEMORY",
            "name_pipe": "COMPLETED",
            "name_script": "COMPLETED",
            "array": ("COMPLETED", "FAILED"),
            "completed_step_failed": "COMPLETED",
        }
        for name, jobid in ids.items():
            self.c.wait_state(jobid, expected[name])

    def cancelled_running(self) -> None:
        j = self.submit(
            "cancelled_running", ["-J", "cancel-running", OFF_SPECIAL_NODES, "--wrap", "sleep 600"]
        )
        self.c.wait_state(j, "RUNNING")
        # The owner cancels: "CANCELLED by <alice's uid>".
        self.c.run(["runuser", "-u", "alice", "--", "scancel", str(j)])
        self.c.wait_state(j, "CANCELLED")

    def comments(self) -> None:
        j = self.submit(
            "comments",
            [
                "-J",
                "comments",
                OFF_SPECIAL_NODES,
                "-t",
                "10",
                f"--comment={USER_COMMENT}",
                "--wrap",
                "sleep 4",
            ],
        )
        self.c.wait_state(j, "RUNNING")
        # Set while running (as a health check would); slurmdbd gets it when the run ends.
        self.c.run(["scontrol", "update", f"jobid={j}", f"AdminComment={ADMIN_COMMENT}"])
        self.c.wait_state(j, "COMPLETED")

    def requeued_admin(self) -> None:
        j = self.submit(
            "requeued_admin",
            ["-J", "requeue-admin", OFF_SPECIAL_NODES, "-t", "10"],
            user="bob",
            script=SLEEP_FIRST_RUN,
        )
        self.c.wait_state(j, "RUNNING")
        self.c.run(["scontrol", "requeue", str(j)])
        self.wait_requeued(j, 1)
        self.start_now(j)
        self.c.wait_state(j, "COMPLETED")

    def crash_loop(self) -> None:
        j = self.submit(
            "crash_loop", ["-J", "crash-loop", OFF_SPECIAL_NODES, "-t", "10"], script=CRASH_LOOP
        )
        for n in range(1, CRASH_LOOP_REQUEUES + 1):
            self.wait_requeued(j, n)
            self.start_now(j)
        self.c.wait_state(j, "FAILED")

    def groups(self) -> dict[str, Callable[[], None]]:
        return {
            "node1_timeout_and_pending": self.node1_timeout_and_pending,
            "node2_node_fail": self.node2_node_fail,
            "node34_preemption": self.node34_preemption,
            "node5678_gpu_jobs": self.node5678_gpu_jobs,
            "cpu_jobs": self.cpu_jobs,
            "cancelled_running": self.cancelled_running,
            "comments": self.comments,
            "requeued_admin": self.requeued_admin,
            "crash_loop": self.crash_loop,
        }


def run_scenarios(cluster: SlurmCluster) -> ScenarioRun:
    """Run every scenario group at once; return when sacct shows every job's final state."""
    # sacct compares whole seconds; start a little early so no record falls outside the window.
    run = ScenarioRun(start=datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=2))
    driver = _Driver(cluster, run)
    t0 = time.monotonic()

    def timed(name: str, fn: Callable[[], None]) -> None:
        fn()
        run.timings[name] = round(time.monotonic() - t0, 1)

    groups = driver.groups()
    with ThreadPoolExecutor(max_workers=len(groups)) as pool:
        futures = {name: pool.submit(timed, name, fn) for name, fn in groups.items()}
        errors = []
        for name, future in futures.items():
            try:
                future.result()
            except Exception as exc:  # collect all, so one failure does not hide the others
                errors.append(f"{name}: {exc!r}")
    run.duration_s = round(time.monotonic() - t0, 1)
    if errors:
        raise RuntimeError(
            "scenario groups failed:\n"
            + "\n".join(errors)
            + "\nnode events:\n"
            + cluster.events(run.sacct_start)
        )
    return run
