"""Optional pyslurm backend for live ingest, used only when a matching pyslurm imports.

pyslurm is built against one Slurm release; a mismatched one either fails to import or reads the
database wrongly, so it is used only when its major.minor equals ``sacct --version``'s.  PyPI only
has pyslurm 25.11 and this project's test cluster runs Slurm 22.05, so this path is NOT
integration-tested here: it is kept thin (pyslurm job records -> the same raw sacct fields the
text parser yields -> the same converter), and any error falls back to the sacct command line.
"""

from __future__ import annotations

import importlib
import re
import subprocess
from datetime import datetime
from typing import Any

import polars as pl

_VERSION = re.compile(r"(\d+)\.(\d+)")


def _major_minor(text: str) -> tuple[int, int] | None:
    match = _VERSION.search(text)
    return (int(match.group(1)), int(match.group(2))) if match else None


def installed_slurm_version(sacct: str = "sacct") -> str | None:
    """``sacct --version`` ("slurm 22.05.8"), or None when sacct is missing."""
    try:
        done = subprocess.run(
            [sacct, "--version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None


def choose_backend(slurm_version: str | None, pyslurm_version: str | None) -> tuple[str, str]:
    """``("pyslurm" | "sacct", why)``: pyslurm only when both versions share major.minor."""
    if pyslurm_version is None:
        return "sacct", "pyslurm is not installed"
    if slurm_version is None:
        return "sacct", "sacct --version gave no Slurm version"
    ours, theirs = _major_minor(slurm_version), _major_minor(pyslurm_version)
    if ours is None or theirs is None or ours != theirs:
        return "sacct", f"pyslurm {pyslurm_version} does not match {slurm_version}"
    return "pyslurm", f"pyslurm {pyslurm_version} matches {slurm_version}"


def pyslurm_version() -> str | None:
    try:
        module = importlib.import_module("pyslurm")
    except Exception:  # an ImportError, or a binary built for another Slurm
        return None
    return str(getattr(module, "__version__", "")) or None


def _epoch(value: Any) -> str:
    if isinstance(value, datetime):
        return str(int(value.timestamp()))
    if isinstance(value, int | float) and value > 0:
        return str(int(value))
    return "Unknown"


def _job_fields(job: Any) -> dict[str, str]:
    """One pyslurm ``db.Job`` -> sacct field strings (attribute names of pyslurm >= 23.02)."""

    def get(*names: str) -> Any:
        for name in names:
            value = getattr(job, name, None)
            if value is not None:
                return value
        return None

    def text(*names: str) -> str:
        value = get(*names)
        return "" if value is None else str(value)

    array_id, task_id = get("array_id"), get("array_task_id")
    het_id, het_offset = get("het_job_id"), get("het_job_offset")
    job_id = text("id")
    display = job_id
    if array_id and task_id is not None:
        display = f"{array_id}_{task_id}"
    elif het_id and het_offset is not None:
        display = f"{het_id}+{het_offset}"
    exit_code = text("exit_code") or "0"
    signal = text("exit_code_signal") or "0"
    return {
        "JobIDRaw": job_id,
        "JobID": display,
        "Cluster": text("cluster"),
        "User": text("user_name"),
        "Account": text("account"),
        "Partition": text("partition"),
        "QOS": text("qos"),
        "State": text("state"),
        "ExitCode": f"{exit_code}:{signal}",
        "Submit": _epoch(get("submit_time")),
        "Eligible": _epoch(get("eligible_time")),
        "Start": _epoch(get("start_time")),
        "End": _epoch(get("end_time")),
        "ElapsedRaw": text("elapsed_time"),
        "NNodes": text("num_nodes"),
        "NodeList": text("nodelist") or "None assigned",
        "AllocTRES": text("tres_alloc_str", "allocated_tres"),
        "Reason": text("state_reason"),
        "AdminComment": text("admin_comment"),
        "Comment": text("comment"),
        "SystemComment": text("system_comment"),
        "WorkDir": text("working_directory"),
        "JobName": text("name"),
    }


def fetch_window(start: datetime, end: datetime) -> pl.DataFrame:
    """Raw sacct-field records of every allocation (all runs) in ``[start, end)`` via pyslurm."""
    pyslurm = importlib.import_module("pyslurm")
    job_filter = pyslurm.db.JobFilter(start_time=start, end_time=end)
    jobs = pyslurm.db.Jobs.load(job_filter)
    rows = [_job_fields(job) for job in jobs.values()]
    frame = pl.DataFrame(rows, schema=dict.fromkeys(_job_fields(object()), pl.String))
    return frame.with_row_index("_line", offset=1)
