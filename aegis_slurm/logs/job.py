"""Find a Slurm job's log files, node list and task layout; diagnose them.

While slurmctld still knows the job (``MinJobAge``), ``scontrol show job -o`` gives the resolved
``StdOut``/``StdErr`` paths, ``NodeList`` and ``NumTasks``.  After that, the store (``aegis-slurm
ingest``) still has the node list and the user and job name, but not the output paths: pass the
files as PATH then.  The baseline is the same user's same job name's last COMPLETED run: its
output is looked for where this job's output is, with the job id replaced.
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from aegis_slurm.errors import InputError, NoDataError, ServiceError
from aegis_slurm.logs.diagnose import LogVerdict, diagnose_logs
from aegis_slurm.logs.sources import Layout

_JOBID = re.compile(r"^\d+(?:_\d+)?$")


@dataclass
class JobInfo:
    job_id: str
    user: str = ""
    name: str = ""
    nodes: tuple[str, ...] = ()
    tasks: int | None = None
    stdout: str = ""
    stderr: str = ""


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
    kv = parse_scontrol(done.stdout.splitlines()[0] if done.stdout else "")
    user = kv.get("UserId", "").split("(")[0]
    tasks = kv.get("NumTasks", "")
    return JobInfo(
        job_id=job_id,
        user=user,
        name=kv.get("JobName", ""),
        nodes=expand_hostlist(kv.get("NodeList", "")),
        tasks=int(tasks) if tasks.isdigit() else None,
        stdout=kv.get("StdOut", ""),
        stderr=kv.get("StdErr", ""),
    )


def from_store(job_id: str, store: str | Path) -> tuple[JobInfo | None, str | None]:
    """The job's last run in the store, and the job id of its baseline (same user, same name,
    last COMPLETED before it), if any."""
    import polars as pl

    from aegis_slurm.accounting import load_job_runs, load_runs

    mine = load_job_runs(store, job_id)
    if mine.height == 0:
        return None, None
    row = mine.row(-1, named=True)
    info = JobInfo(
        job_id=job_id, user=row["user"], name=row["job_name"], nodes=tuple(row["nodes"] or ())
    )
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


def expand_output_pattern(
    pattern: str,
    job_id: str,
    user: str = "",
    name: str = "",
    array_job_id: str = "",
    array_task_id: str = "",
) -> str:
    """A glob for the files of an ``--output``/``--error`` pattern (sbatch's filename patterns).

    The EpilogSlurmctld gets the pattern unexpanded (``SLURM_JOB_STDOUT=/jobs/%j.out`` in the
    recorded 22.05 hook environment), so once slurmctld forgot the job, its files are found by
    expanding the job-level fields (``%j %u %x %A %a %%``, with zero padding such as ``%4j``)
    and turning the per-node and per-task ones (``%N %n %t %s``) into ``*``.
    """

    def sub(m: re.Match[str]) -> str:
        width, key = m.group(1), m.group(2)
        values = {
            "j": job_id,
            "u": user,
            "x": name,
            "A": array_job_id or job_id,
            "a": array_task_id,
            "J": job_id,
        }
        if key == "%":
            return "%"
        if key in values:
            v = values[key]
            return v.zfill(int(width)) if width and v.isdigit() else v
        return "*"  # %N %n %t %s and anything else: one file per node or task

    return _PATTERN.sub(sub, pattern)


def job_files(info: JobInfo) -> list[Path]:
    """The job's output files: StdOut and StdErr, each a file or, when it still holds a per-node
    or per-task pattern (``--output=%N.log``; scontrol expands only the job-level fields), every
    file matching it."""
    out: list[Path] = []
    for p in dict.fromkeys([info.stdout, info.stderr]):
        if not p:
            continue
        if "%" not in p:
            out.append(Path(p))
            continue
        g = Path(expand_output_pattern(p, info.job_id, info.user, info.name))
        out.extend(sorted(g.parent.glob(g.name)))
    return list(dict.fromkeys(out))


def _baseline_paths(info: JobInfo, base_id: str | None) -> list[Path]:
    """The baseline run's output: where this job's is, with the job id replaced (if it exists)."""
    if not base_id:
        return []
    base = JobInfo(
        job_id=base_id,
        user=info.user,
        name=info.name,
        stdout=info.stdout.replace(info.job_id, base_id) if info.job_id in info.stdout else "",
        stderr=info.stderr.replace(info.job_id, base_id) if info.job_id in info.stderr else "",
    )
    return [p for p in job_files(base) if p.is_file()]


def diagnose_job_logs(
    job_id: str,
    *,
    paths: Sequence[str | Path] = (),
    store: str | Path | None = None,
    baseline: Sequence[str | Path] = (),
    tasks_per_node: int | None = None,
    ranks_per_node: int | None = None,
) -> tuple[JobInfo, LogVerdict]:
    """Diagnose job ``job_id`` from its logs (the entry point for ``aegis-slurm diagnose``).

    ``paths`` overrides the output files scontrol reports; ``store`` supplies the node list when
    slurmctld no longer knows the job, and the baseline run; an explicit ``baseline`` wins.
    """
    if not _JOBID.match(job_id):
        raise InputError(f"not a job id: {job_id!r}")
    info = from_scontrol(job_id)
    base_id = None
    if store is not None:
        stored, base_id = from_store(job_id, store)
        if info is None:
            info = stored
        elif stored is not None and not info.nodes:
            info.nodes = stored.nodes
    if info is None:
        raise NoDataError(
            f"job {job_id} is unknown to slurmctld"
            + (" and to the store" if store is not None else "; pass --store DIR")
        )
    files = list(paths) or job_files(info)
    files = [f for f in files if Path(f).exists()]
    if not files:
        raise NoDataError(
            f"job {job_id}: no output files found (StdOut={info.stdout or 'unknown'}); "
            "pass the log files as PATH"
        )
    tpn = tasks_per_node
    if tpn is None and info.tasks and info.nodes:
        tpn = math.ceil(info.tasks / len(info.nodes))
    layout = Layout(nodes=info.nodes, tasks_per_node=tpn, ranks_per_node=ranks_per_node)
    base = list(baseline) or _baseline_paths(info, base_id)
    return info, diagnose_logs(files, baseline=base, layout=layout)
