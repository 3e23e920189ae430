"""Epilog records (node spools) -> the analytics store, and the node-signal frame from them.

Layout inside a store directory::

    signals/records.parquet   one row per (cluster, job_id, run, node) Epilog record, JSON kept
    signals/jobs.parquet      one row per (cluster, job_id, run) EpilogSlurmctld job record:
                              where the job's output went (patterns unexpanded), for
                              ``aegis-slurm logs --job`` once slurmctld forgot the job

Merging is idempotent: a record already in the store with the same key and content changes
nothing (the file is not even rewritten); a re-captured record with the same key replaces the
old one.  :func:`load_signals` derives the frame :func:`aegis_slurm.analytics.attribution.
attribute_failures` consumes (``node``, ``time`` UTC, ``signal``, ``critical``) plus ``kind``,
``job_id``, ``run``, ``event_time`` and ``detail``.

``time`` is the record's capture time (the Epilog ran at the job's end), not the kernel's own
timestamp (kept as ``event_time``): the record belongs to this job because its lines were new
since the previous Epilog on that node, whatever clock the log line carries, and the capture
time is what places it inside the attribution window [End - 10 min, End + 5 min].
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl

from aegis_slurm.node import spool

RECORDS = Path("signals") / "records.parquet"
KEY = ("cluster", "job_id", "run", "node")
_SCHEMA = {
    "cluster": pl.String(),
    "job_id": pl.String(),
    "run": pl.Int32(),
    "node": pl.String(),
    "captured_at": pl.Datetime("us", "UTC"),
    "exit_code": pl.String(),
    "n_signals": pl.Int32(),
    "record": pl.String(),  # the whole record as JSON (sorted keys)
}
SIGNAL_SCHEMA = {
    "node": pl.String(),
    "time": pl.Datetime("us", "UTC"),
    "signal": pl.String(),
    "critical": pl.Boolean(),
    "kind": pl.String(),
    "cluster": pl.String(),
    "job_id": pl.String(),
    "run": pl.Int32(),
    "event_time": pl.Datetime("us", "UTC"),
    "detail": pl.String(),
}


JOBS = Path("signals") / "jobs.parquet"
JOB_KEY = ("cluster", "job_id", "run")
#: the EpilogSlurmctld's job record (aegis_slurm.node.epilog_ctld.job_record), one column each
JOB_SCHEMA = {
    "cluster": pl.String(),
    "job_id": pl.String(),
    "run": pl.Int32(),
    "captured_at": pl.Datetime("us", "UTC"),
    "exit_code": pl.String(),
    "user": pl.String(),
    "uid": pl.Int64(),
    "name": pl.String(),
    "array_job_id": pl.String(),
    "array_task_id": pl.String(),
    "nodelist": pl.String(),
    "work_dir": pl.String(),
    "stdout": pl.String(),
    "stderr": pl.String(),
    "tasks": pl.Int64(),  # NumTasks (scontrol at job end), null when unknown
}
_JOB_TEXT = {  # field -> longest accepted (the hook bounds them the same way)
    "cluster": 64,
    "exit_code": 16,
    "user": 64,
    "name": 256,
    "nodelist": 65536,
    "work_dir": 4096,
    "stdout": 4096,
    "stderr": 4096,
}
_NODE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
_KINDS = ("critical", "distributed", "info")
QUARANTINE = Path("signals") / "quarantine.jsonl"


def invalid(rec: Any) -> str | None:
    """Why an Epilog record cannot go into the store, or None when it is valid (10.12).

    The spool is written as root, but its fields come partly from the job's environment and a
    record can be damaged on disk: every field the store and the analytics use is checked.
    """
    if not isinstance(rec, dict):
        return "not a JSON object"
    node, jid = rec.get("node"), rec.get("job_id")
    if not isinstance(node, str) or not _NODE.match(node):
        return f"bad node {node!r:.40}"
    if isinstance(jid, bool) or not isinstance(jid, (str, int)) or not str(jid).isdigit():
        return f"bad job_id {jid!r:.40}"
    if len(str(jid)) > 20:
        return "job_id too long"
    for k in ("cluster", "exit_code", "partition", "captured_at"):
        if k in rec and not isinstance(rec[k], str):
            return f"{k} is not a string"
    problem = _run_and_time_problem(rec)
    if problem:
        return problem
    sigs = rec.get("signals", [])
    if not isinstance(sigs, list):
        return "signals is not a list"
    for s in sigs:
        if not isinstance(s, dict) or not isinstance(s.get("signal"), str):
            return "a signal is not an object with a name"
        if s.get("kind") not in _KINDS:
            return f"signal kind {s.get('kind')!r:.40}"
        for k in ("time", "detail"):
            if s.get(k) is not None and not isinstance(s[k], str):
                return f"signal {k} is not a string"
    return _not_utf8(rec)


def _run_and_time_problem(rec: dict[str, Any]) -> str | None:
    """What is wrong with a spool record's ``run`` and ``captured_at`` (both record kinds)."""
    run = rec.get("run", 0)
    if isinstance(run, bool) or not isinstance(run, int) or not 0 <= run < 2**31:
        return f"bad run {run!r:.40}"
    if not isinstance(rec.get("captured_at"), str):
        return "no captured_at"
    try:
        datetime.fromisoformat(rec["captured_at"])
    except ValueError:
        return f"bad captured_at {rec['captured_at']!r:.40}"
    return None


def _not_utf8(rec: dict[str, Any]) -> str | None:
    """A record the store cannot hold: a lone surrogate (undecodable bytes) in some field."""
    try:
        json.dumps(rec, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return "invalid UTF-8 (lone surrogate) in a field"
    return None


def invalid_job(rec: Any) -> str | None:
    """Why an EpilogSlurmctld job record cannot go into the store, or None when it is valid.

    Its paths, user and job name come from the job: strings, bounded, without control
    characters (they are globbed and printed later, never run)."""
    if not isinstance(rec, dict):
        return "not a JSON object"
    if rec.get("kind") != "job":
        return f"kind {rec.get('kind')!r:.40} is not a job record"
    jid = rec.get("job_id")
    if not isinstance(jid, str) or not jid.isdigit() or len(jid) > 20:
        return f"bad job_id {jid!r:.40}"
    problem = _run_and_time_problem(rec)
    if problem:
        return problem
    for k, n in _JOB_TEXT.items():
        v = rec.get(k, "")
        if not isinstance(v, str):
            return f"{k} is not a string"
        if len(v) > n:
            return f"{k} longer than {n}"
        if not v.isprintable():
            return f"{k} has control characters"
    for k in ("array_job_id", "array_task_id"):
        v = rec.get(k, "")
        if not isinstance(v, str) or (v and not (v.isdigit() and len(v) <= 12)):
            return f"bad {k} {v!r:.40}"
    for k in ("uid", "tasks"):
        v = rec.get(k)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 2**32):
            return f"bad {k} {v!r:.40}"
    return _not_utf8(rec)


def _job_row(rec: dict[str, Any]) -> dict[str, Any]:
    row = {k: rec.get(k, "") for k in JOB_SCHEMA}
    row["run"] = int(rec.get("run", 0))
    row["uid"] = rec.get("uid")
    row["tasks"] = rec.get("tasks")
    return row


def load_jobs(store: Path) -> pl.DataFrame:
    path = Path(store) / JOBS
    return pl.read_parquet(path) if path.exists() else pl.DataFrame(schema=JOB_SCHEMA)


def job_output(
    store: Path | None, job_id: str, spools: list[Path] | tuple[Path, ...] = ()
) -> dict[str, Any] | None:
    """The latest run's EpilogSlurmctld record of ``job_id`` (its output patterns, work dir,
    uid, user, name, array ids, node list) from the store and/or spools, or None."""
    arr, _, task = str(job_id).partition("_")  # "123_4": array job 123's task 4

    def mine(r: dict[str, Any]) -> bool:
        if task:
            return r.get("array_job_id") == arr and r.get("array_task_id") == task
        return str(r.get("job_id")) == str(job_id)

    best: dict[str, Any] | None = None
    if store is not None:
        df = load_jobs(store)
        if task:
            df = df.filter((pl.col("array_job_id") == arr) & (pl.col("array_task_id") == task))
        else:
            df = df.filter(pl.col("job_id") == str(job_id))
        for r in df.iter_rows(named=True):
            r["captured_at"] = r["captured_at"].isoformat() if r["captured_at"] else ""
            best = _newer(best, r)
    for rec in spool.read_records(list(spools), name=spool.JOB_FILE):
        if mine(rec) and invalid_job(rec) is None:
            best = _newer(best, _job_row(rec))
    return best


def _newer(a: dict[str, Any] | None, b: dict[str, Any]) -> dict[str, Any]:
    """The later capture: a requeued job's latest run, and a job id Slurm reused (a rebuilt
    cluster starts counting again) names the newest job, whatever its run number."""
    if a is None:
        return b
    ka = (datetime.fromisoformat(str(a["captured_at"])), int(a["run"]))
    kb = (datetime.fromisoformat(str(b["captured_at"])), int(b["run"]))
    return b if kb >= ka else a


def collect_jobs(spools: list[Path], store: Path) -> dict[str, Any]:
    """Merge the EpilogSlurmctld job records under ``spools`` into ``STORE/signals/jobs.parquet``
    (idempotent: the newest capture of a (cluster, job, run) wins; bad ones are counted)."""
    errors: list[str] = []
    fresh: dict[tuple[Any, ...], dict[str, Any]] = {}
    read = 0
    for rec in spool.read_records(list(spools), errors, name=spool.JOB_FILE):
        read += 1
        why = invalid_job(rec)
        if why is not None:
            errors.append(f"job record {str(rec.get('job_id'))[:40]}: {why}")
            continue
        row = _job_row(rec)
        key = tuple(row[k] for k in JOB_KEY)
        if key not in fresh or row["captured_at"] >= fresh[key]["captured_at"]:
            fresh[key] = row
    old = load_jobs(store)
    old_map = {
        tuple(r[k] for k in JOB_KEY): {**r, "captured_at": r["captured_at"].isoformat()}
        for r in old.iter_rows(named=True)
    }

    def same(a: dict[str, Any], b: dict[str, Any]) -> bool:
        ta = datetime.fromisoformat(str(a["captured_at"]))
        tb = datetime.fromisoformat(str(b["captured_at"]))
        return ta == tb and all(a[k] == b[k] for k in JOB_SCHEMA if k != "captured_at")

    changed = {k: r for k, r in fresh.items() if k not in old_map or not same(old_map[k], r)}
    if changed:
        df = pl.DataFrame(
            list(changed.values()), schema={**JOB_SCHEMA, "captured_at": pl.String()}
        ).with_columns(pl.col("captured_at").str.to_datetime(time_zone="UTC", strict=False))
        keep = old.join(df.select(JOB_KEY), on=list(JOB_KEY), how="anti")
        _write_parquet(Path(store) / JOBS, pl.concat([keep, df]).sort(list(JOB_KEY)))
    return {
        "job_records_read": read,
        "job_records_changed": len(changed),
        "job_records_in_store": len(old) + sum(k not in old_map for k in changed),
        "job_record_errors": errors[:50],
        "n_job_record_errors": len(errors),
    }


def _row(rec: dict[str, Any]) -> dict[str, Any]:
    return {
        "cluster": str(rec.get("cluster", "")),
        "job_id": str(rec["job_id"]),
        "run": int(rec.get("run", 0)),
        "node": str(rec["node"]),
        "captured_at": rec.get("captured_at"),
        "exit_code": str(rec.get("exit_code", "")),
        "n_signals": len(rec.get("signals", [])),
        "record": json.dumps(rec, sort_keys=True, separators=(",", ":")),
    }


def _frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    if not rows:
        return pl.DataFrame(schema=_SCHEMA)
    df = pl.DataFrame(rows, schema={**_SCHEMA, "captured_at": pl.String()})
    return df.with_columns(pl.col("captured_at").str.to_datetime(time_zone="UTC", strict=False))


def load_records(store: Path) -> pl.DataFrame:
    path = Path(store) / RECORDS
    return pl.read_parquet(path) if path.exists() else pl.DataFrame(schema=_SCHEMA)


def collect(spools: list[Path], store: Path) -> dict[str, Any]:
    """Merge every record under ``spools`` into ``store``.  Returns counts (idempotent)."""
    errors: list[str] = []
    fresh: dict[tuple[Any, ...], dict[str, Any]] = {}
    bad: list[dict[str, Any]] = []
    read = 0
    for rec in spool.read_records(list(spools), errors):
        read += 1
        why = invalid(rec)
        if why is None:
            try:
                row = _row(rec)
            except (TypeError, ValueError) as e:
                why = str(e)
        if why is not None:
            errors.append(
                f"record {str(rec.get('node'))[:40]}/{str(rec.get('job_id'))[:40]}: {why}"
            )
            bad.append({"reason": why, "record": rec})
            continue
        key = tuple(row[k] for k in KEY)
        old = fresh.get(key)
        if old is None or str(row["captured_at"]) >= str(old["captured_at"]):
            fresh[key] = row  # the newest capture of a key (rotated copies are older)
    old = load_records(store)
    old_map = {tuple(r[k] for k in KEY): r["record"] for r in old.iter_rows(named=True)}
    added = sum(k not in old_map for k in fresh)
    updated = sum(k in old_map and old_map[k] != r["record"] for k, r in fresh.items())
    report = {
        "records_read": read,
        "added": added,
        "updated": updated,
        "unchanged": len(fresh) - added - updated,
        "errors": errors[:50],
        "n_errors": len(errors),
        "quarantined": len(bad),
        "store": str(store),
    }
    if bad:  # kept for the admin, out of the store (rewritten per collect: no duplicates)
        text = "".join(json.dumps(b, sort_keys=True) + "\n" for b in bad)
        _write_text(Path(store) / QUARANTINE, text)
    if added or updated:
        new = _frame(list(fresh.values()))
        keep = old.join(new.select(KEY), on=list(KEY), how="anti") if not old.is_empty() else old
        merged = pl.concat([keep, new]).sort(list(KEY))
        _write_parquet(Path(store) / RECORDS, merged)
    report["records_in_store"] = len(old) + added
    report.update(collect_jobs(spools, store))
    return report


def _write_parquet(path: Path, df: pl.DataFrame) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    os.close(fd)
    try:
        df.write_parquet(tmp)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def records_to_signals(records: pl.DataFrame) -> pl.DataFrame:
    """The node-signal frame (one row per signal) from stored records."""
    rows = []
    for r in records.iter_rows(named=True):
        rec = json.loads(r["record"])
        for s in rec.get("signals", []):
            if not isinstance(s, dict):
                continue  # stored by an older version without validation
            rows.append(
                {
                    "node": r["node"],
                    "time": r["captured_at"],
                    "signal": s.get("signal"),
                    "critical": bool(s.get("critical")),
                    "kind": s.get("kind"),
                    "cluster": r["cluster"],
                    "job_id": r["job_id"],
                    "run": r["run"],
                    "event_time": s.get("time"),
                    "detail": s.get("detail", ""),
                }
            )
    if not rows:
        return pl.DataFrame(schema=SIGNAL_SCHEMA)
    df = pl.DataFrame(rows, schema={**SIGNAL_SCHEMA, "event_time": pl.String()})
    return df.with_columns(pl.col("event_time").str.to_datetime(time_zone="UTC", strict=False))


def load_signals(store: Path) -> pl.DataFrame | None:
    """The store's collected node signals, or None when nothing was ever collected."""
    if not (Path(store) / RECORDS).exists():
        return None
    return records_to_signals(load_records(store))


def job_records(store: Path | None, spools: list[Path], job_id: str) -> list[dict[str, Any]]:
    """Every record of ``job_id`` (all runs) from the store and/or spools, newest capture wins."""
    found: dict[tuple[Any, ...], dict[str, Any]] = {}
    if store is not None:
        df = load_records(store).filter(pl.col("job_id") == str(job_id))
        for r in df.iter_rows(named=True):
            rec = json.loads(r["record"])
            found[tuple(_row(rec)[k] for k in KEY)] = rec
    for rec in spool.read_records(list(spools)):
        if str(rec.get("job_id")) == str(job_id) and invalid(rec) is None:
            key = tuple(_row(rec)[k] for k in KEY)
            if key not in found or str(rec.get("captured_at")) >= str(
                found[key].get("captured_at")
            ):
                found[key] = rec
    return list(found.values())


def blame_history(store: Path | None, spools: list[Path], exclude_job: str) -> dict[str, int]:
    """node -> number of other job runs in which it had a critical signal (Aegis relapses)."""
    counts: dict[str, set[tuple[str, str]]] = {}
    recs: list[dict[str, Any]] = []
    if store is not None:
        recs += [json.loads(x) for x in load_records(store)["record"].to_list()]
    recs += list(spool.read_records(list(spools)))
    for rec in recs:
        if str(rec.get("job_id")) == str(exclude_job) or invalid(rec) is not None:
            continue
        if any(s.get("kind") == "critical" for s in rec.get("signals", [])):
            counts.setdefault(str(rec["node"]), set()).add(
                (str(rec.get("job_id")), str(rec.get("run", 0)))
            )
    return {n: len(v) for n, v in counts.items()}
