"""Find a Slurm job's log files, node list and task layout; diagnose them.

While slurmctld still knows the job (``MinJobAge``), ``scontrol show job -o`` gives the resolved
``StdOut``/``StdErr`` paths, ``NodeList``, ``NumTasks`` and the owner's uid.  After that, the
EpilogSlurmctld's job record (``aegis_slurm.node.epilog_ctld.job_record``, brought into the
store by ``aegis-slurm signals collect``) still has the output *patterns* as the job gave them,
its work dir, uid, user, name, array ids and node list: the patterns are expanded here
(:func:`output_globs`).  The store's job runs (``aegis-slurm ingest``) add the node list and the
baseline: the same user's same job name's last COMPLETED run, whose output is found from its
own record, or where this job's output is with the job id replaced.

Files found this way are named by the job, and ``logs`` is often run as root: a file is only
read when it is a regular file owned by the job's uid (:func:`readable_by_job`).  Files given as
PATH are the admin's choice and read as given.
"""

from __future__ import annotations

import glob
import math
import os
import re
import shutil
import stat
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from aegis_slurm.errors import InputError, NoDataError, ServiceError
from aegis_slurm.logs.diagnose import LogVerdict, diagnose_logs
from aegis_slurm.logs.sources import Layout

_JOBID = re.compile(r"^\d+(?:_\d+)?$")


MAX_FILES = 100_000  # a pattern's matches read at most (a glob cannot make us read a whole fs)
NO_ARRAY_TASK = "4294967294"  # Slurm's NO_VAL: what %a prints in a job that is not an array task


@dataclass
class JobInfo:
    job_id: str
    user: str = ""
    name: str = ""
    nodes: tuple[str, ...] = ()
    tasks: int | None = None
    stdout: str = ""
    stderr: str = ""
    uid: int | None = None
    work_dir: str = ""
    array_job_id: str = ""
    array_task_id: str = ""
    #: where the output paths came from: "scontrol", "epilog record" or "" (unknown)
    source: str = ""
    #: files found but not read, each "path: why" (not the job's, not a regular file)
    refused: list[str] = field(default_factory=list)
    #: scontrol's JobId (a heterogeneous job's component, an array task's own id)
    raw_id: str = ""
    #: scontrol's NodeList of a COMPLETING job (the nodes still in their Epilog): not the
    #: job's list, but any list taken for it must hold them
    stragglers: tuple[str, ...] = ()


def parse_scontrol(text: str) -> dict[str, str]:
    """``scontrol show job -o`` output → key/value (values may hold spaces only in a few keys)."""
    out: dict[str, str] = {}
    for m in re.finditer(r"(?:^|\s)([A-Za-z:/]+)=(\S*)", text):
        out.setdefault(m.group(1), m.group(2))
    return out


def expand_hostlist(hostlist: str) -> tuple[str, ...]:
    if not hostlist or hostlist in ("(null)", "None"):
        return ()
    import hostlist as python_hostlist

    return tuple(python_hostlist.expand_hostlist(hostlist))


def from_scontrol(job_id: str, timeout: float = 10.0) -> JobInfo | None:
    """The job as slurmctld knows it, or None when it no longer does (or scontrol is absent)."""
    exe = shutil.which("scontrol")
    if exe is None:
        return None
    try:
        done = subprocess.run(
            [exe, "show", "job", "-o", job_id],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise ServiceError(f"scontrol show job {job_id} did not answer in {timeout:.0f} s") from exc
    if done.returncode != 0:
        if "Invalid job id" in done.stderr:
            return None
        raise ServiceError(f"scontrol show job {job_id}: {done.stderr.strip() or 'failed'}")
    return info_from_scontrol(job_id, done.stdout.splitlines()[0] if done.stdout else "")


def info_from_scontrol(job_id: str, line: str) -> JobInfo:
    """Pure: a JobInfo from one ``scontrol -o show job`` line.

    While a job is COMPLETING, ``NodeList`` lists only the nodes still completing, and
    ``NumNodes`` counts them (22.05, on the real testbed): the node list of a COMPLETING job,
    or one that disagrees with ``NumNodes``, is dropped (the store's or sacct's is used), since
    a task number mapped onto it would name the wrong node."""
    kv = parse_scontrol(line)
    user, _, uid = kv.get("UserId", "").partition("(")
    uid = uid.rstrip(")")
    tasks = kv.get("NumTasks", "")
    nodes = expand_hostlist(kv.get("NodeList", ""))
    num = kv.get("NumNodes", "")
    stragglers: tuple[str, ...] = ()
    if kv.get("JobState") == "COMPLETING" or (num.isdigit() and int(num) != len(nodes)):
        nodes, stragglers = (), nodes
    return JobInfo(
        job_id=job_id,
        user=user,
        name=kv.get("JobName", ""),
        nodes=nodes,
        tasks=int(tasks) if tasks.isdigit() else None,
        stdout=kv.get("StdOut", ""),
        stderr=kv.get("StdErr", ""),
        uid=int(uid) if uid.isdigit() else None,
        work_dir=kv.get("WorkDir", ""),
        array_job_id=kv.get("ArrayJobId", ""),
        array_task_id=kv.get("ArrayTaskId", ""),
        source="scontrol",
        raw_id=kv.get("JobId", ""),
        stragglers=stragglers,
    )


def nodes_from_sacct(job_id: str, raw_id: str, timeout: float = 10.0) -> tuple[str, ...]:
    """The allocation of the job record ``raw_id`` (scontrol's JobId) from ``sacct -X -n -P -o
    JobIDRaw,NodeList -j JOB``: its latest run (sacct without ``-D``).

    slurmdbd records the node list when the job starts and, unlike scontrol's, it does not
    shrink while the job completes: the answer while nodes are still in their Epilog, which is
    when a paged admin runs ``logs``.  A heterogeneous job has a line per component and an
    array a line per task: only the line scontrol described counts.  () when sacct is absent,
    fails or has no such line."""
    from aegis_slurm.node import probes

    argv = ["sacct", "-X", "-n", "-P", "-o", "JobIDRaw,NodeList", "-j", job_id]
    try:
        out = probes.run_argv(argv, timeout)
    except (probes.ProbeMissing, probes.ProbeTimeout, probes.ProbeFailed):
        return ()
    mine = [
        nodelist.strip()
        for raw, _, nodelist in (ln.partition("|") for ln in out.splitlines())
        if raw.strip() == raw_id and nodelist.strip()
    ]
    if not mine or mine[-1] == "None assigned":
        return ()
    try:
        return expand_hostlist(mine[-1])
    except (ValueError, RuntimeError):  # python-hostlist's BadHostlist is a RuntimeError
        return ()


def from_record(rec: dict) -> JobInfo:
    """A JobInfo from the EpilogSlurmctld's job record (:func:`~aegis_slurm.accounting.
    signals.job_output`): output patterns unexpanded, and what expands them."""
    try:
        nodes = expand_hostlist(str(rec.get("nodelist") or ""))
    except (ValueError, RuntimeError):  # python-hostlist's BadHostlist is a RuntimeError
        nodes = ()
    uid, tasks = rec.get("uid"), rec.get("tasks")
    return JobInfo(
        job_id=str(rec["job_id"]),
        user=str(rec.get("user") or ""),
        name=str(rec.get("name") or ""),
        nodes=nodes,
        stdout=str(rec.get("stdout") or ""),
        stderr=str(rec.get("stderr") or ""),
        uid=int(uid) if isinstance(uid, int) else None,
        tasks=int(tasks) if isinstance(tasks, int) and tasks > 0 else None,
        work_dir=str(rec.get("work_dir") or ""),
        array_job_id=str(rec.get("array_job_id") or ""),
        array_task_id=str(rec.get("array_task_id") or ""),
        source="epilog record",
    )


def from_store(job_id: str, store: str | Path) -> tuple[JobInfo | None, str | None]:
    """The job as the store knows it, and the job id of its baseline (same user, same name,
    last COMPLETED before it), if any.

    Output paths come from the EpilogSlurmctld's record (``signals collect``); node list, user
    and name from it or from the job's last ingested run."""
    import polars as pl

    from aegis_slurm.accounting import load_job_runs, load_runs
    from aegis_slurm.accounting.signals import job_output

    rec = job_output(Path(store), job_id)
    info = from_record(rec) if rec is not None else None
    mine = load_job_runs(store, job_id) if (Path(store) / "runs").is_dir() else None
    if mine is None or mine.height == 0:
        return info, None
    row = mine.row(-1, named=True)
    if info is None:
        info = JobInfo(job_id=job_id, user=row["user"], name=row["job_name"])
    if not info.nodes:
        info.nodes = tuple(row["nodes"] or ())
    info.user = info.user or row["user"]
    info.name = info.name or row["job_name"]
    prior = load_runs(
        store,
        where=(pl.col("user") == row["user"])
        & (pl.col("job_name") == row["job_name"])
        & (pl.col("state") == "COMPLETED")
        & (pl.col("job_id") != row["job_id"])
        & (pl.col("end_time") <= (row["start_time"] or row["submit_time"])),
    ).sort("end_time")
    base = str(prior["job_id_raw"][-1]) if prior.height else None
    return info, base


_PATTERN = re.compile(r"%(\d*)([a-zA-Z%])")
_PER_NODE = re.compile(r"%\d*[Nn]")
#: sbatch's filename fields (``man sbatch``, "filename pattern"); any other ``%c`` stays as is
_FIELDS = frozenset("AabJjNnstux")


def expand_output_pattern(
    pattern: str,
    job_id: str,
    user: str = "",
    name: str = "",
    array_job_id: str = "",
    array_task_id: str = "",
    *,
    work_dir: str = "",
    node: str | None = None,
    node_index: int | None = None,
) -> str:
    """A glob for the files of an ``--output``/``--error`` pattern (sbatch's filename patterns).

    The EpilogSlurmctld gets the pattern unexpanded (``SLURM_JOB_STDOUT=/jobs/%j.out`` in the
    recorded 22.05 hook environment), so once slurmctld forgot the job, its files are found by
    expanding the job-level fields as Slurm does (``%j %J`` job id, ``%A`` array job id or job
    id, ``%a`` array task id, ``%b`` task id mod 10, ``%u`` user, ``%x`` job name, ``%%``; a
    width such as ``%4j`` zero-pads numbers, at most 10) and the per-node fields from ``node``
    and ``node_index`` when given (``%N``, ``%n``); what is left per node or task (``%t %s``,
    ``%N`` without a node) becomes ``*``.  A pattern holding a backslash is not expanded at all
    (Slurm's rule); a relative one is relative to the job's ``work_dir``.  Every value is
    glob-escaped: a job name ``*`` matches only ``*``.
    """
    if not os.path.isabs(pattern) and work_dir:
        pattern = os.path.join(work_dir, pattern)
    if "\\" in pattern:
        return glob.escape(pattern.replace("\\", ""))

    def sub(m: re.Match[str]) -> str:
        width, key = m.group(1), m.group(2)
        if key == "%":
            return "%"
        if key not in _FIELDS:
            return glob.escape(m.group(0))
        task = array_task_id or NO_ARRAY_TASK
        values = {
            "j": job_id,
            "J": job_id,
            "u": user,
            "x": name,
            "A": array_job_id or job_id,
            "a": task,
            "b": str(int(task) % 10) if task.isdigit() else "",
            "N": node,
            "n": None if node_index is None else str(node_index),
        }
        v = values.get(key)
        if v is None:
            return "*"  # %t %s, and %N %n without a node: one file per node or task
        if width and v.isdigit():
            v = v.zfill(min(int(width), 10))
        return glob.escape(v)

    return _PATTERN.sub(sub, glob.escape(pattern))


def output_globs(pattern: str, info: JobInfo) -> list[str]:
    """The globs of one output pattern of ``info``: one per node of the job when the pattern
    names the node (``%N``/``%n``) and the node list is known, else one."""
    common = {
        "job_id": info.job_id,
        "user": info.user,
        "name": info.name,
        "array_job_id": info.array_job_id,
        "array_task_id": info.array_task_id,
        "work_dir": info.work_dir,
    }
    if info.nodes and _PER_NODE.search(pattern) and "\\" not in pattern:
        return list(
            dict.fromkeys(
                expand_output_pattern(pattern, node=n, node_index=i, **common)
                for i, n in enumerate(info.nodes)
            )
        )
    return [expand_output_pattern(pattern, **common)]


def job_files(info: JobInfo) -> list[Path]:
    """The job's output files: StdOut and StdErr, each a file or, when it still holds a
    pattern (the Epilog's record; scontrol expands only the job-level fields), every file
    matching it (per node: the set of per-node files; at most ``MAX_FILES``)."""
    out: list[Path] = []
    for p in dict.fromkeys([info.stdout, info.stderr]):
        if not p:
            continue
        if "%" not in p and "\\" not in p:
            out.append(Path(info.work_dir or ".", p) if info.work_dir else Path(p))
            continue
        hits = _matches(output_globs(p, info))
        if not hits and info.nodes and _PER_NODE.search(p):
            # slurmstepd writes %N as the host's short *hostname*, which is the NodeName on most
            # clusters but not everywhere (measured on the 22.05 testbed, where eight slurmds
            # share one host: "l4gone-44-vm.out"): then any name matches
            hits = _matches([output_globs(p, JobInfo(**{**vars(info), "nodes": ()}))[0]])
        out.extend(hits)
    return list(dict.fromkeys(out))[:MAX_FILES]


def _matches(globs: list[str]) -> list[Path]:
    out: list[Path] = []
    for g in globs:
        for hit in sorted(glob.iglob(g)):
            if len(out) >= MAX_FILES:
                return out
            out.append(Path(hit))
    return out


def readable_by_job(path: Path, uid: int | None) -> str | None:
    """Why the job's file ``path`` must not be read, or None when it may.

    The path is the job's choice, and ``logs`` often runs as root: only a regular file owned by
    the job's uid is read (a symlink is judged by its target, so a link to ``/etc/shadow`` or to
    another user's file is refused; a FIFO would hang the read).  Without a known uid, a root
    caller reads nothing it found this way."""
    try:
        st = path.stat()
    except OSError as e:
        return e.strerror or "cannot stat"
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    if uid is None:
        return "the job's uid is unknown" if os.geteuid() == 0 else None
    if st.st_uid != uid:
        return f"owned by uid {st.st_uid}, not the job's uid {uid}"
    return None


def _baseline_paths(info: JobInfo, base_id: str | None, store: str | Path | None) -> list[Path]:
    """The baseline run's output: from its own Epilog record when the store has one, else where
    this job's output is with the job id replaced (if it exists and is the job owner's)."""
    if not base_id:
        return []
    base: JobInfo | None = None
    if store is not None:
        from aegis_slurm.accounting.signals import job_output

        rec = job_output(Path(store), base_id)
        base = from_record(rec) if rec is not None else None
    if base is None:
        base = JobInfo(
            job_id=base_id,
            user=info.user,
            name=info.name,
            uid=info.uid,
            work_dir=info.work_dir,
            stdout=info.stdout.replace(info.job_id, base_id) if info.job_id in info.stdout else "",
            stderr=info.stderr.replace(info.job_id, base_id) if info.job_id in info.stderr else "",
        )
    return [p for p in job_files(base) if readable_by_job(p, base.uid) is None]


def diagnose_job_logs(
    job_id: str,
    *,
    paths: Sequence[str | Path] = (),
    store: str | Path | None = None,
    baseline: Sequence[str | Path] = (),
    tasks_per_node: int | None = None,
    ranks_per_node: int | None = None,
    spools: Sequence[str | Path] = (),
) -> tuple[JobInfo, LogVerdict]:
    """Diagnose job ``job_id`` from its logs (the entry point for ``aegis-slurm diagnose``).

    ``paths`` overrides the output files scontrol reports; once slurmctld no longer knows the
    job, ``store`` (and Epilog ``spools`` not collected yet) supply its output patterns and node
    list; ``store`` also the baseline run; an explicit ``baseline`` wins.
    """
    if not _JOBID.match(job_id):
        raise InputError(f"not a job id: {job_id!r}")
    info = from_scontrol(job_id)
    base_id = None
    stored = None
    if store is not None:
        stored, base_id = from_store(job_id, store)
        if info is None:
            info = stored
    if info is not None and info.source == "scontrol" and not info.nodes:
        # COMPLETING: scontrol lists the stragglers only.  The current run's allocation is
        # sacct's (a requeued job keeps its id: the store may hold an earlier run's); a list
        # without the stragglers is another run's or another component's
        for nodes in (
            nodes_from_sacct(job_id, info.raw_id) if info.raw_id else (),
            stored.nodes if stored is not None else (),
        ):
            if nodes and set(info.stragglers) <= set(nodes):
                info.nodes = nodes
                break
    if (info is None or not info.stdout) and spools:
        from aegis_slurm.accounting.signals import job_output

        rec = job_output(None, job_id, [Path(s) for s in spools])
        if rec is not None:
            spooled = from_record(rec)
            if info is not None:  # the store's runs knew the job, the record knows its files
                spooled.nodes = spooled.nodes or info.nodes
            info = spooled
    if info is None:
        raise NoDataError(
            f"job {job_id} is unknown to slurmctld"
            + (
                " and to the store (no ingested run, no collected Epilog job record)"
                if store is not None
                else "; pass --store DIR"
            )
        )
    if paths:
        files = [Path(f) for f in paths if Path(f).exists()]
    else:
        files = []
        for f in job_files(info):
            why = readable_by_job(f, info.uid)
            if why is None:
                files.append(f)
            elif f.exists() or f.is_symlink():
                info.refused.append(f"{f}: {why}")
    if not files:
        where = info.stdout or "unknown"
        if not info.source:
            where += " (slurmctld forgot the job and the store has no Epilog job record of it)"
        refused = f"; not read: {'; '.join(info.refused[:3])}" if info.refused else ""
        raise NoDataError(
            f"job {job_id}: no output files found (StdOut={where}){refused}; "
            "pass the log files as PATH"
        )
    tpn = tasks_per_node
    if tpn is None and info.tasks and info.nodes:
        tpn = math.ceil(info.tasks / len(info.nodes))
    layout = Layout(nodes=info.nodes, tasks_per_node=tpn, ranks_per_node=ranks_per_node)
    base = list(baseline) or _baseline_paths(info, base_id, store)
    return info, diagnose_logs(files, baseline=base, layout=layout)
