"""``sacct --json`` -> the same raw string records the text parser yields.

Mapping JSON to sacct's text fields lets one converter type and validate both formats.  Tested on
the 22.05 ``openapi/dbv0.0.38`` schema; the 23.02+ data_parser shapes (``{"set", "infinite",
"number"}`` numbers, state lists) are unwrapped too.  Steps nested in a job are not rows.
"""

from __future__ import annotations

import json
import math
from typing import Any

import polars as pl

from aegis_slurm.accounting.errors import AccountingInputError


class JsonExportError(AccountingInputError):
    """The document is not a sacct --json export."""


def _num(value: Any) -> int | None:
    """Unwrap 23.02+ ``{"set": true, "infinite": false, "number": 5}`` numbers.

    Anything that is not a finite number (NaN, Infinity, a string) is unknown: None.
    """
    if isinstance(value, dict):
        if value.get("infinite"):
            return None
        if not value.get("set", True):
            return None
        value = value.get("number")
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return int(value)
    return None


def _obj(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one (a malformed shape reads as absent)."""
    return value if isinstance(value, dict) else {}


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list):
        return ",".join(_text(v) for v in value)
    return str(value)


def _time(value: Any) -> str:
    number = _num(value)
    return str(number) if number else "Unknown"


def _exit_code(obj: Any, state: str = "") -> str:
    if not isinstance(obj, dict):
        return ""
    status = obj.get("status")
    if isinstance(status, list):  # 23.11+: ["SIGNALED"], ["EXITED"]
        status = status[0] if status else None
    if state == "FAILED" and status == "SUCCESS" and not _num(obj.get("return_code")):
        # Slurm 22.05's dbv0.0.38 reports return_code 0 for jobs that exited non-zero (jobs 4
        # and 12 of the recorded fixtures read FAILED 1:0 in text but 0 here): unknown, not 0.
        return ""
    code = _num(obj.get("return_code")) or 0
    signal = _obj(obj.get("signal"))
    # dbv0.0.38-v0.0.39: "signal_id"; 23.11+ (v0.0.40 on): "id".
    sig = _num(signal.get("id", signal.get("signal_id"))) or 0
    return f"{code}:{sig}"


def _tres(items: Any) -> str:
    parts = []
    for item in items if isinstance(items, list) else []:
        item = _obj(item)
        kind, name, count = item.get("type"), item.get("name"), _num(item.get("count"))
        if count is None:
            continue
        parts.append(f"{kind}/{name}={count}" if name else f"{kind}={count}")
    return ",".join(parts)


def _job_to_fields(job: dict[str, Any]) -> dict[str, str]:
    time = _obj(job.get("time"))
    array = _obj(job.get("array"))
    het = _obj(job.get("het"))
    state = job.get("state")
    # dbv0.0.37 printed the state as a string; later versions as {"current": ..., "reason": ...}
    state = {"current": state} if isinstance(state, str) else _obj(state)
    current = state.get("current")
    base = current[0] if isinstance(current, list) and current else _text(current)
    killer = job.get("kill_request_user")
    if base == "CANCELLED" and killer:
        base = f"CANCELLED by {killer}"
    job_id = _num(job.get("job_id"))
    array_id, task_id = _num(array.get("job_id")), _num(array.get("task_id"))
    het_id, het_offset = _num(het.get("job_id")), _num(het.get("job_offset"))
    if array_id and task_id is not None:
        display = f"{array_id}_{task_id}"
    elif het_id and het_offset is not None:
        display = f"{het_id}+{het_offset}"
    else:
        display = str(job_id)
    comment = _obj(job.get("comment"))
    limit = _num(time.get("limit"))
    tres = _obj(job.get("tres"))
    association = _obj(job.get("association"))
    nodes = _num(job.get("allocation_nodes"))
    return {
        "JobIDRaw": str(job_id),
        "JobID": display,
        "Cluster": _text(job.get("cluster")),
        "User": _text(job.get("user") or association.get("user")),
        "Account": _text(job.get("account")),
        "Partition": _text(job.get("partition")),
        "QOS": _text(job.get("qos")),
        "State": base,
        "ExitCode": _exit_code(job.get("exit_code"), base.split(" ")[0]),
        "DerivedExitCode": _exit_code(job.get("derived_exit_code")),
        "Submit": _time(time.get("submission")),
        "Eligible": _time(time.get("eligible")),
        "Start": _time(time.get("start")),
        "End": _time(time.get("end")),
        "ElapsedRaw": str(_num(time.get("elapsed")) or 0),
        "TimelimitRaw": "" if limit is None else str(limit),
        # A pending job's 0 is 0 (not absent, which would fall back to another count).
        "NNodes": "" if nodes is None else str(nodes),
        "NodeList": _text(job.get("nodes")),
        "AllocTRES": _tres(tres.get("allocated")),
        "FailedNode": _text(job.get("failed_node")),
        "Reason": _text(state.get("reason")),
        "Flags": _text(job.get("flags")),
        "AdminComment": _text(comment.get("administrator")),
        "Comment": _text(comment.get("job")),
        "SystemComment": _text(comment.get("system")),
        "WorkDir": _text(job.get("working_directory")),
        "JobName": _text(job.get("name")),
    }


def parse_json_export(data: bytes) -> tuple[pl.DataFrame, int]:
    """Raw string records (with ``_line`` = 1-based job index) and the number of jobs read.

    A job entry that is not an object, or whose shape cannot be read, is left out of the
    records (the caller counts it as rejected).
    """
    try:
        document = json.loads(data.decode("utf-8", errors="replace"))
    except json.JSONDecodeError as exc:
        raise JsonExportError(f"not valid JSON: {exc}") from exc
    except RecursionError as exc:
        raise JsonExportError("not a sacct --json export: JSON nested too deeply") from exc
    jobs = document.get("jobs") if isinstance(document, dict) else None
    if not isinstance(jobs, list):
        raise JsonExportError("no 'jobs' list: not a sacct --json export")
    _refuse_live_job_listing(jobs)
    columns = list(_job_to_fields({}))
    rows, lines = [], []
    for index, job in enumerate(jobs, start=1):
        if not isinstance(job, dict):
            continue
        try:
            rows.append(_job_to_fields(job))
        except (AttributeError, TypeError, ValueError, OverflowError):
            continue  # an odd shape deeper down: counted as rejected by the caller
        lines.append(index)
    frame = pl.DataFrame(rows, schema=dict.fromkeys(columns, pl.String))
    return frame.with_columns(pl.Series("_line", lines, dtype=pl.UInt32)).select(
        "_line", *columns
    ), len(jobs)


def _refuse_live_job_listing(jobs: list[Any]) -> None:
    """``squeue --json`` and ``scontrol show job --json`` also hold a 'jobs' list: refuse them.

    Their jobs carry ``job_state`` (and no ``state`` object): read as accounting records every
    one would be an "unknown state".
    """
    entries = [job for job in jobs if isinstance(job, dict)]
    if entries and all("job_state" in job and "state" not in job for job in entries):
        raise JsonExportError(
            "this is squeue --json or scontrol show job --json output (live jobs), not an "
            "accounting export; export with sacct --json"
        )
