"""Fixtures that drive the real Slurm test cluster built by ``tools/slurm-testbed.sh``.

Every test in this folder is marked ``slurm``.  The cluster is shared by everyone on the machine,
so the session holds an exclusive ``flock`` on ``<testbed dir>.lock`` from start to end: two pytest
runs never drive it at once (the second waits).

Without root the tests skip, unless ``AEGIS_REQUIRE_SLURM=1`` (set by CI): then a cluster that
cannot be started is an error, never a skip.
"""

from __future__ import annotations

import fcntl
import os
import pwd
import re
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from aegis_slurm.node.slurm import JOB_ENDED_STATES

from .scenarios import ScenarioRun, run_scenarios

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tools" / "slurm-testbed.sh"
TESTBED_DIR = Path(os.environ.get("SLURM_TESTBED_DIR", "/srv/slurm-testbed"))
LOCK_PATH = Path(f"{TESTBED_DIR}.lock")
REQUIRED = os.environ.get("AEGIS_REQUIRE_SLURM") == "1"

HOOK_KEYS = {
    "prolog": "Prolog",
    "epilog": "Epilog",
    "prolog_ctld": "PrologSlurmctld",
    "epilog_ctld": "EpilogSlurmctld",
}
# The session's hooks when a test sets none: the script's knobs, else its recording hooks.
# "none" leaves a hook out of slurm.conf.
DEFAULT_HOOKS: dict[str, str] = {
    "prolog": os.environ.get("SLURM_TESTBED_PROLOG", f"{TESTBED_DIR}/hooks/prolog.sh"),
    "epilog": os.environ.get("SLURM_TESTBED_EPILOG", f"{TESTBED_DIR}/hooks/epilog.sh"),
    "prolog_ctld": os.environ.get(
        "SLURM_TESTBED_PROLOG_CTLD", f"{TESTBED_DIR}/hooks/prolog_slurmctld.sh"
    ),
    "epilog_ctld": os.environ.get(
        "SLURM_TESTBED_EPILOG_CTLD", f"{TESTBED_DIR}/hooks/epilog_slurmctld.sh"
    ),
}
# Printed by slurmd each time it (re)reads slurm.conf; counts prove a reconfigure reached it.
SLURMD_CONFIG_READ = "CPU frequency setting not configured"


#: Modules whose tests read the session's scenario jobs run first, on a cluster no other test
#: has disturbed yet (killed slurmds, swapped hooks).
_SCENARIO_MODULES = ("test_testbed.py", "test_ingest_real.py", "test_report_real.py")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.slurm)

    def first_scenarios(item: pytest.Item) -> int:
        path = Path(str(item.path))
        return 0 if here not in path.parents or path.name in _SCENARIO_MODULES else 1

    items.sort(key=first_scenarios)  # stable: keeps the order within each group


def _unavailable(message: str) -> None:
    if REQUIRED:
        pytest.fail(f"AEGIS_REQUIRE_SLURM=1 but {message}", pytrace=False)
    pytest.skip(message)


# Final states as sacct prints them (first token of State); anything else may still change.
FINAL_STATES = JOB_ENDED_STATES


class SlurmCommandError(RuntimeError):
    """A Slurm command failed; the message has its argv and stderr."""


@dataclass
class SacctRecord:
    """One allocation record of ``sacct --duplicates --allocations``."""

    job_id: str
    job_id_raw: int
    state: str  # base state: "CANCELLED" for "CANCELLED by 0"
    exit_code: str


@dataclass
class SlurmCluster:
    """A handle on the running test cluster; all commands are argv lists, never shell strings."""

    directory: Path
    env: dict[str, str]
    conf: Path
    nodes: list[str]
    started_by_us: bool

    # -- plain commands -------------------------------------------------------------------------
    def run(
        self,
        argv: Sequence[str],
        *,
        check: bool = True,
        input: str | None = None,
        cwd: Path | None = None,
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            list(argv), env=self.env, capture_output=True, text=True, input=input, cwd=cwd
        )
        if check and proc.returncode != 0:
            raise SlurmCommandError(f"{list(argv)} exited {proc.returncode}: {proc.stderr.strip()}")
        return proc

    def script(self, command: str) -> subprocess.CompletedProcess[str]:
        return self.run(["bash", str(SCRIPT), command])

    def uid(self, user: str) -> int:
        return pwd.getpwnam(user).pw_uid

    def submit(self, argv: Sequence[str], user: str = "alice", script: str | None = None) -> int:
        """``sbatch --parsable`` as ``user``; ``script`` (text) goes in on stdin. Returns its id."""
        cmd = ["runuser", "-u", user, "--", "sbatch", "--parsable", *argv]
        # From a directory every user may write to: slurm-<id>.out lands there.
        proc = self.run(cmd, input=script, cwd=self.directory / "jobs")
        # "123" or "123;cluster"
        return int(proc.stdout.strip().split(";")[0])

    # -- accounting -----------------------------------------------------------------------------
    def sacct_records(self, jobid: int | str, since: str = "now-1days") -> list[SacctRecord]:
        """All allocation records of a job (an array's tasks, a het job's components, each run)."""
        out = self.run(
            [
                "sacct",
                "-n",
                "-P",
                "-X",
                "-D",
                "-j",
                str(jobid),
                "-S",
                since,
                "-E",
                "now",
                "-o",
                "JobID,JobIDRaw,State,ExitCode",
            ]
        ).stdout
        records = []
        for line in out.splitlines():
            if not line:
                continue
            job_id, raw, state, exit_code = line.split("|")
            records.append(SacctRecord(job_id, int(raw), state.split()[0], exit_code))
        return records

    def wait_state(
        self, jobid: int | str, states: Sequence[str] | str, timeout: float = 120
    ) -> list[SacctRecord]:
        """Poll sacct (not squeue, which lags and keeps finished jobs) until the latest record of
        every allocation of ``jobid`` is in ``states``.  Returns those latest records."""
        wanted = {states} if isinstance(states, str) else set(states)
        deadline = time.monotonic() + timeout
        latest: dict[int, SacctRecord] = {}
        while True:
            try:
                records = self.sacct_records(jobid)
            except SlurmCommandError:
                records = []  # slurmdbd busy or restarting: try again until the deadline
            latest = {}
            for rec in records:
                latest[rec.job_id_raw] = rec  # sacct prints each run in order; the last one wins
            if latest and all(r.state in wanted for r in latest.values()):
                return list(latest.values())
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"job {jobid}: wanted {sorted(wanted)}, sacct shows "
                    f"{[(r.job_id, r.state) for r in latest.values()]}"
                )
            time.sleep(0.5)

    def wait_accounting_quiet(self, since: str, quiet_s: float = 3.0, timeout: float = 60) -> None:
        """Wait until a time-window sacct query (the kind an ingest runs) stops changing.

        Measured on 22.05: a job whose Prolog set its AdminComment showed in ``sacct -j N``
        (and with ``-s CD``) about 1 s before it showed in a plain ``-S day -E tomorrow`` query,
        so a just-finished job can be missing from a window fetched right after ``wait_state``.
        """
        argv = [
            "sacct",
            "-n",
            "-P",
            "-X",
            "-D",
            "--allusers",
            "-S",
            since,
            "-E",
            "now+1days",
            "-o",
            "JobIDRaw,State,Submit,End,Comment,AdminComment",
        ]
        deadline = time.monotonic() + timeout
        previous = None
        while True:
            out = self.run(argv).stdout
            if out == previous:
                return
            if time.monotonic() > deadline:
                raise TimeoutError("sacct window output kept changing")
            previous = out
            time.sleep(quiet_s)

    def wait_record(self, jobid: int | str, state: str, timeout: float = 120) -> None:
        """Poll sacct until any record (any run) of the job is in ``state``, e.g. REQUEUED."""
        deadline = time.monotonic() + timeout
        while not any(r.state == state for r in self.sacct_records(jobid)):
            if time.monotonic() > deadline:
                raise TimeoutError(f"job {jobid}: no {state} record in sacct")
            time.sleep(0.5)

    def job_field(self, jobid: int | str, name: str) -> str | None:
        """One ``Key=value`` of ``scontrol show job -o`` (None once slurmctld forgot the job)."""
        proc = self.run(["scontrol", "-o", "show", "job", str(jobid)], check=False)
        match = re.search(rf"(?:^| ){name}=(\S*)", proc.stdout)
        return match.group(1) if match else None

    # -- node control ---------------------------------------------------------------------------
    def slurmd_pid(self, node: str) -> int:
        return int((self.directory / "run" / f"slurmd-{node}.pid").read_text().strip())

    def node_state(self, node: str) -> str:
        return self.run(["sinfo", "-h", "-N", "-n", node, "-o", "%T"]).stdout.split()[0]

    def events(self, since: str) -> str:
        """``sacctmgr show event`` since ``since`` (node DOWN/DRAIN history), for diagnostics."""
        return self.run(
            [
                "sacctmgr",
                "-n",
                "-P",
                "show",
                "event",
                f"Start={since}",
                "format=NodeName,TimeStart,TimeEnd,State,Reason,User",
            ]
        ).stdout

    def reset(self) -> None:
        """Back to a clean idle cluster: default hooks, no flags, no jobs, every node idle.
        Also repairs what a crashed session left (hooks are read from slurm.conf)."""
        if self.hooks() != DEFAULT_HOOKS:
            self.set_hooks()
        self.script("reset")

    # -- hooks ----------------------------------------------------------------------------------
    def hooks(self) -> dict[str, str]:
        """The four hook settings slurm.conf holds now ("none" when a line is absent)."""
        found = dict.fromkeys(HOOK_KEYS, "none")
        by_name = {name: key for key, name in HOOK_KEYS.items()}
        for line in self.conf.read_text().splitlines():
            name, _, value = line.partition("=")
            if name in by_name:
                found[by_name[name]] = value.strip()
        return found

    def set_hooks(
        self,
        prolog: str | Path | None = None,
        epilog: str | Path | None = None,
        prolog_ctld: str | Path | None = None,
        epilog_ctld: str | Path | None = None,
    ) -> None:
        """Point slurm.conf's four hook lines at these absolute paths (None = the session
        default, normally the recording hook; "none" = no hook) and make slurmctld and every
        slurmd use them."""
        given = {
            "prolog": prolog,
            "epilog": epilog,
            "prolog_ctld": prolog_ctld,
            "epilog_ctld": epilog_ctld,
        }
        wanted = {
            key: str(value) if value is not None else DEFAULT_HOOKS[key]
            for key, value in given.items()
        }
        for value in wanted.values():
            if value != "none" and not Path(value).is_absolute():
                raise ValueError(f"hook paths must be absolute: {value}")
        lines = [
            line
            for line in self.conf.read_text().splitlines()
            if line.partition("=")[0] not in HOOK_KEYS.values()
        ]
        # Keep hook lines before the NodeName/PartitionName lines: right after ClusterName.
        at = next(i for i, line in enumerate(lines) if line.startswith("ClusterName=")) + 1
        lines[at:at] = [
            f"{HOOK_KEYS[key]}={value}" for key, value in wanted.items() if value != "none"
        ]
        before = self._config_reads()
        tmp = self.conf.with_suffix(".tmp")
        tmp.write_text("\n".join(lines) + "\n")
        tmp.replace(self.conf)
        self.run(["scontrol", "reconfigure"])
        self._verify_hooks(wanted, before)

    def _config_reads(self) -> dict[str, int]:
        counts = {}
        for node in self.nodes:
            log = self.directory / "log" / f"slurmd-{node}.log"
            text = log.read_text(errors="replace") if log.exists() else ""
            counts[node] = text.count(SLURMD_CONFIG_READ)
        return counts

    def _verify_hooks(self, wanted: dict[str, str], before: dict[str, int]) -> None:
        shown = self.run(["scontrol", "show", "config"]).stdout
        for key, value in wanted.items():
            expect = "(null)" if value == "none" else value
            if not re.search(rf"^{HOOK_KEYS[key]}\s+=\s+{re.escape(expect)}$", shown, re.M):
                raise RuntimeError(f"slurmctld did not take {HOOK_KEYS[key]}={value}")
        # slurmd reconfigures asynchronously after slurmctld; wait until each one re-read the file
        # and restart the ones that did not (running jobs survive a slurmd restart).
        deadline = time.monotonic() + 15
        stale = list(self.nodes)
        while time.monotonic() < deadline:
            after = self._config_reads()
            stale = [n for n in self.nodes if after[n] <= before[n]]
            if not stale:
                return
            time.sleep(0.2)
        for node in stale:
            pid = self.slurmd_pid(node)
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:  # a slurmd a NODE_FAIL test killed: "start" revives it
                continue
            while Path(f"/proc/{pid}").exists():  # slurmd needs 1-2 s to exit
                time.sleep(0.1)
        self.script("start")


def _cluster_running() -> bool:
    proc = subprocess.run(["bash", str(SCRIPT), "status"], capture_output=True, text=True)
    return proc.returncode == 0


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[SlurmCluster]:
    if os.geteuid() != 0:
        _unavailable("the Slurm test cluster needs root (apt, mknod, useradd, runuser, daemons)")
    LOCK_PATH.parent.mkdir(parents=True, exist_ok=True)
    lock = open(LOCK_PATH, "w")  # noqa: SIM115 - held for the whole session
    fcntl.flock(lock, fcntl.LOCK_EX)  # waits while another session drives the cluster
    try:
        started_by_us = not _cluster_running()
        proc = subprocess.run(["bash", str(SCRIPT), "start"], capture_output=True, text=True)
        if proc.returncode != 0:
            if started_by_us:  # leave no half-started daemons behind
                subprocess.run(["bash", str(SCRIPT), "stop"], capture_output=True, text=True)
            _unavailable(f"tools/slurm-testbed.sh start failed:\n{proc.stderr[-3000:]}")
        conf = TESTBED_DIR / "etc" / "slurm.conf"
        env = dict(os.environ, SLURM_CONF=str(conf), TZ="UTC")
        # In-process callers (the ingest runs sacct with os.environ) need it too; restored below.
        saved_conf = os.environ.get("SLURM_CONF")
        os.environ["SLURM_CONF"] = str(conf)
        nodes = subprocess.run(
            ["sinfo", "-h", "-N", "-o", "%N"], env=env, check=True, capture_output=True, text=True
        ).stdout.split()
        cluster = SlurmCluster(
            directory=TESTBED_DIR,
            env=env,
            conf=conf,
            nodes=sorted(set(nodes), key=_node_key),
            started_by_us=started_by_us,
        )
        cluster.reset()  # whatever an earlier session left: flags, jobs, drained nodes
        try:
            yield cluster
        finally:
            if saved_conf is None:
                os.environ.pop("SLURM_CONF", None)
            else:
                os.environ["SLURM_CONF"] = saved_conf
        if started_by_us:
            subprocess.run(["bash", str(SCRIPT), "stop"], capture_output=True, text=True)
        else:
            cluster.reset()
    finally:
        fcntl.flock(lock, fcntl.LOCK_UN)
        lock.close()


def _node_key(name: str) -> tuple[str, int]:
    match = re.match(r"(\D*)(\d*)", name)
    assert match
    return match.group(1), int(match.group(2) or 0)


@pytest.fixture(scope="session")
def scenario_jobs(slurm_cluster: SlurmCluster) -> ScenarioRun:
    """Real jobs in every end state the ingest must read (about 2 minutes, run concurrently)."""
    run = run_scenarios(slurm_cluster)
    print(f"\nscenario jobs: {run.duration_s} s; groups: {run.timings}; jobs: {run.jobs}")
    slurm_cluster.reset()
    return run
