"""EpilogSlurmctld (once per job, on the slurmctld host): record where a failed or multi-node
job's output went (:func:`job_record`); crash-loop guard; for a failed job, collect the nodes'
records it can read, append the short ``aegis:v1;hw=`` tag to AdminComment with sacctmgr, and
optionally drain the Algorithm-1 culprit through the one guarded drain.
``hold-watch`` (spawned detached): wait until Slurm has requeued the looping job, then hold it.
Stdlib only.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from aegis_slurm.node import config, export, files, slurm, spool
from aegis_slurm.node import diagnose as diag
from aegis_slurm.node import signals as sg
from aegis_slurm.node.epilog_node import clean, job_env, now_iso
from aegis_slurm.node.verdict import FAIL, Verdict

KEEP_S = 86400.0  # loop-guard history kept per job (longer than any sane window)
LOOPS_SHAPE: dict[str, Any] = {"jobs": {str: [dict]}, "held": {str: dict}}
PATH_MAX = 4096  # Linux PATH_MAX: a longer "path" is not one the job could have written
_IDS = re.compile(r"^\d{1,12}$")


def _env_id(env: dict[str, str], name: str) -> str:
    v = env.get(name, "").strip()
    return v if _IDS.match(v) else ""


def job_record(
    env: dict[str, str], job: dict[str, Any], captured_at: str, tasks: int | None = None
) -> dict[str, Any]:
    """Pure: where this job's output went, from the EpilogSlurmctld environment.

    slurmctld hands the hook the ``--output``/``--error`` *patterns* unexpanded
    (``SLURM_JOB_STDOUT=/srv/slurm-testbed/jobs/%j.out`` on 22.05.8; ``SLURM_JOB_STDERR`` only
    when it was set apart) and the fields that expand them: job id, array job/task id, user,
    job name, node list, work dir (a relative pattern is relative to it).  After ``MinJobAge``
    nothing else knows them (sacct 22.05 has no output-path field), so ``aegis-slurm logs
    --job`` reads them from this record.  All of it is job-controlled text: cleaned and bounded
    here, only ever compared and globbed later, never given to a shell.  ``tasks``: the job's
    task count (:func:`job_tasks`), which maps ``srun --label`` numbers onto nodes.
    """
    uid = env.get("SLURM_JOB_UID", "").strip()
    return {
        "kind": "job",
        "node": spool.JOB_DIR,  # the spool key: one directory for the slurmctld's records
        "cluster": job["cluster"],
        "job_id": job["job_id"],
        "run": job["run"],
        "captured_at": captured_at,
        "exit_code": job["exit_code"],
        "partition": job["partition"],
        "nodelist": job["nodelist"],
        "user": clean(env.get("SLURM_JOB_USER", ""), 64),
        "uid": int(uid) if uid.isdigit() and len(uid) <= 10 else None,
        "name": clean(env.get("SLURM_JOB_NAME", ""), 256),
        "array_job_id": _env_id(env, "SLURM_ARRAY_JOB_ID"),
        "array_task_id": _env_id(env, "SLURM_ARRAY_TASK_ID"),
        "work_dir": clean(env.get("SLURM_JOB_WORK_DIR", ""), PATH_MAX),
        "stdout": clean(env.get("SLURM_JOB_STDOUT", ""), PATH_MAX),
        "stderr": clean(env.get("SLURM_JOB_STDERR", ""), PATH_MAX),
        "tasks": tasks,
    }


def job_tasks(cfg: dict[str, Any], jid: str) -> int | None:
    """The job's NumTasks from slurmctld, or None (the hook environment has no task count, and
    without it ``srun --label`` task 5 of a job with 8 tasks per node would be read as the sixth
    node's).  One ``scontrol`` RPC, at most 3 s: a slow answer costs the count, not the hook."""
    ep = cfg["epilog"]
    conf = ep.get("slurm_conf") or os.environ.get("SLURM_CONF", "")
    cl = slurm.Client(min(3.0, float(ep["command_timeout_s"])), conf)
    try:
        out = cl.run(["scontrol", "-o", "show", "job", jid])
    except slurm.ERRORS:
        return None
    m = re.search(r"\bNumTasks=(\d{1,9})\b", out)
    return int(m.group(1)) if m else None


def record_job(
    cfg: dict[str, Any], job: dict[str, Any], use_syslog: bool, tasks: int | None = None
) -> str | None:
    """Durably spool :func:`job_record` (one fsynced rewrite of the job spool, 12-23 ms at
    0.8 MiB); a failure is logged, never fatal: the tag and the loop guard still run."""
    ep = cfg["epilog"]
    try:
        rec = job_record(dict(os.environ), job, now_iso(), tasks)
        return str(
            spool.append(
                ep["spool_dir"],
                rec,
                max_bytes=int(ep["spool_max_bytes"]),
                keep=int(ep["spool_keep"]),
                name=spool.JOB_FILE,
            )
        )
    except Exception as e:  # our own bug here must not cost the tag or the loop guard
        export.log("err", f"job {job['job_id']}: job record not written: {e!r}", use_syslog)
        return None


def client(cfg: dict[str, Any]) -> slurm.Client:
    ep = cfg["epilog"]
    conf = ep.get("slurm_conf") or os.environ.get("SLURM_CONF", "")
    return slurm.Client(float(ep.get("command_timeout_s", 10)), conf)


def slurm_cmd(cfg: dict[str, Any], argv: list[str]) -> str:
    return client(cfg).run(argv)


def wait_records(
    dirs: list[str], cluster: str, job_id: str, run: int, nodes: list[str], wait_s: float
) -> list[dict[str, Any]]:
    """Node records of this run readable from ``dirs``, waiting up to ``wait_s`` for all.

    Reads only the tail of each not-yet-found node's current spool file per poll.
    """
    deadline = time.monotonic() + wait_s
    found: dict[str, dict[str, Any]] = {}
    while True:
        for n in nodes:
            if n in found:
                continue
            for d in dirs:
                for rec in spool.tail_records(Path(d) / n):
                    if (
                        str(rec.get("job_id")) == job_id
                        and str(rec.get("run", 0)) == str(run)
                        and str(rec.get("cluster", "")) == cluster
                        and rec["node"] == n
                    ):
                        found[n] = rec
        if len(found) >= len(set(nodes)) or time.monotonic() >= deadline:
            return list(found.values())
        time.sleep(0.2)


def current_admin_comment(cfg: dict[str, Any], job_id: str) -> str:
    """The job's AdminComment as stored, lines and whitespace intact (10.11).

    sacct prints a multi-line field as several lines; the JobIDRaw column after it marks where
    each row (one per run with -D) ends, and the last row is the latest run.
    """
    out = slurm_cmd(
        cfg,
        [
            "sacct",
            "-n",
            "-P",
            "-X",
            "-D",
            "-j",
            job_id,
            "-S",
            "2000-01-01",
            "-o",
            "AdminComment,JobIDRaw",
        ],
    )
    rows = re.split(rf"\|{re.escape(job_id)}(?:\n|$)", out)
    rows = rows[:-1]
    return rows[-1].removeprefix("\n") if rows else ""


def write_tag(cfg: dict[str, Any], job_id: str, tag: str) -> str:
    """Append ``tag`` to the ended job's AdminComment with sacctmgr (never clobbers)."""
    merged = sg.merge_comment(current_admin_comment(cfg, job_id), tag)
    slurm_cmd(
        cfg,
        [
            "sacctmgr",
            "-i",
            "modify",
            "job",
            "where",
            f"jobid={job_id}",
            "set",
            f"AdminComment={merged}",
        ],
    )
    return merged


# -- crash-loop guard --


def loop_limits(cfg: dict[str, Any], partition: str) -> dict[str, Any]:
    lg = cfg.get("loop_guard", {})
    base = {k: v for k, v in lg.items() if k != "partition"}
    return {**base, **lg.get("partition", {}).get(partition, {})}


def _signal_of(exit_code: str) -> int:
    try:
        return int(exit_code.split(":")[1])
    except (IndexError, ValueError):
        return 0


def run_failed(exit_code: str, derived: str = "0") -> bool:
    """Did this run start its batch script and fail?  A run requeued off a node by a Prolog
    never started it and ends ``0:0``, as does a clean run (measured on 22.05, 10.13)."""
    return exit_code not in ("", "0:0") or derived not in ("", "0", "0:0")


def loop_decision(
    history: list[dict[str, Any]], limits: dict[str, Any], now: float
) -> tuple[bool, int, str]:
    """Pure: (hold?, counted runs, why).  ``history`` = this job's run ends, this one included.

    Counts runs inside ``window_minutes`` that failed (:func:`run_failed`) except those ended
    by an ignored signal (SIGTERM: preemption, scancel); trips when the count exceeds
    ``max_requeues``.
    """
    if not limits.get("enabled", True):
        return False, 0, "disabled"
    window = float(limits.get("window_minutes", 60)) * 60
    ignore = {int(x) for x in limits.get("ignore_exit_signals", [15])}
    counted = [
        h
        for h in history
        if now - float(h["t"]) <= window
        and h.get("failed", run_failed(str(h.get("exit_code", ""))))
        and _signal_of(str(h.get("exit_code", ""))) not in ignore
    ]
    k = int(limits.get("max_requeues", 5))
    why = (
        f"{len(counted)} failed runs within {window / 60:g} min "
        f"(limit {k}, restarts={history[-1].get('run') if history else '?'})"
    )
    return len(counted) > k, len(counted), why


def _history(st: dict[str, Any], jid: str, now: float) -> list[dict[str, Any]]:
    return [
        h
        for h in st.get("jobs", {}).get(jid, [])
        if isinstance(h.get("t"), (int, float)) and now - float(h["t"]) < KEEP_S
    ]


def run_ctld(
    cfg: dict[str, Any],
    spawn: bool = True,
    config_path: str | None = None,
    deadline: float = float("inf"),
) -> dict[str, Any]:
    """EpilogSlurmctld: loop guard, then tag (and optional auto-drain) for a failed job.
    ``deadline``: when the hook's watchdog fires (monotonic clock)."""
    ep = cfg["epilog"]
    job = job_env()
    jid = job["job_id"]
    res: dict[str, Any] = {"job_id": jid, "run": job["run"]}
    if not jid:
        return res
    use_syslog = bool(cfg.get("runtime", {}).get("syslog", True))
    state_dir = config.state_dir(cfg) / "ctld"
    now = time.time()
    failed = run_failed(job["exit_code"], os.environ.get("SLURM_JOB_DERIVED_EC", "0"))
    try:
        nodes = config.expand_hostlist(job["nodelist"])
    except ValueError as e:
        export.log("err", f"job {jid}: bad node list: {e}", use_syslog)
        nodes = []
    multi = len(nodes) >= int(ep.get("min_nodes_auto", 2))
    if failed or multi:  # what `logs --job` needs once slurmctld forgot the job
        # the task layout matters only for a failed multi-node job's logs: one RPC for those
        tasks = job_tasks(cfg, jid) if failed and multi else None
        res["job_record"] = record_job(cfg, job, use_syslog, tasks)
    state = "FAILED" if failed else "COMPLETED"
    if not failed and multi and (ep.get("tag", True) or ep.get("auto_drain")):
        # NODE_FAIL ends with 0:0 in the hook environment (measured on 22.05: JobState
        # COMPLETING, Reason=NodeDown): one scontrol RPC per clean multi-node job end tells
        state = node_fail_state(cfg, jid)
        failed = state == "NODE_FAIL"
    if failed or job["run"] > 0:  # a clean first run cannot be part of a loop: no state write
        limits = loop_limits(cfg, job["partition"])
        with files.locked_json(state_dir / "loops.json", LOOPS_SHAPE) as lk:
            st = lk.data
            jobs = st.setdefault("jobs", {})
            hist = _history(st, jid, now)
            hist.append(
                {"t": now, "run": job["run"], "exit_code": job["exit_code"], "failed": failed}
            )
            jobs[jid] = hist[-200:]
            for other in [j for j in jobs if j != jid and not _history(st, j, now)]:
                del jobs[other]  # bounded: forget jobs that ended no run for a day
            held = st.setdefault("held", {})
            for j in [j for j in held if j not in jobs]:
                del held[j]
            hold, n, why = loop_decision(hist, limits, now)
        res["loop"] = {"counted": n, "hold": hold, "why": why}
        if hold and spawn:
            _spawn_watch(jid, job["run"], why, config_path)
            export.log(
                "alert", f"job {jid} crash loop: {why}; holding it once requeued", use_syslog
            )

    if not failed or not (ep.get("tag", True) or ep.get("auto_drain")):
        return res
    dirs = [str(d) for d in (ep.get("ctld_spool_dirs") or [ep["spool_dir"]])]
    recs = wait_records(dirs, job["cluster"], jid, job["run"], nodes, float(ep["ctld_wait_s"]))
    res["records"] = len(recs)
    if ep.get("tag", True):
        pairs = sg.tag_pairs(recs)
        if state == "NODE_FAIL":  # the node that went down left no record: blame it first
            seen = {r["node"] for r in recs}
            pairs = [(n, "node_fail") for n in nodes if n not in seen] + pairs
        tag = sg.make_tag(pairs, int(ep.get("tag_max_len", 120)))
        if tag:
            try:
                res["admin_comment"] = write_tag(cfg, jid, tag)
            except slurm.ERRORS as e:
                export.log("err", f"job {jid} AdminComment tag failed: {e}", use_syslog)
    if ep.get("auto_drain") and multi:
        # signals from a plain syslog file trust every local user: never a drain (10.2)
        trusted = [
            {**r, "signals": [s for s in r.get("signals", []) if s.get("source") != "syslog"]}
            for r in recs
        ]
        res["diagnosis"] = d = diag.diagnose(nodes, trusted, job_state=state).to_dict()
        res["drained"] = auto_drain(cfg, jid, d, use_syslog, deadline)
    return res


def node_fail_state(cfg: dict[str, Any], jid: str) -> str:
    """ "NODE_FAIL" when slurmctld says the job ended because a node went down, else "COMPLETED"."""
    try:
        out = slurm_cmd(cfg, ["scontrol", "-o", "show", "job", jid])
    except slurm.ERRORS:
        return "COMPLETED"
    if re.search(r"\bReason=NodeDown\b|\bJobState=NODE_FAIL\b", out):
        return "NODE_FAIL"
    return "COMPLETED"


#: commands one guarded drain may run: the guard's look, the drain, the second look, an undo
GUARDED_DRAIN_COMMANDS = 4


def auto_drain(
    cfg: dict[str, Any],
    jid: str,
    d: dict[str, Any],
    use_syslog: bool,
    deadline: float = float("inf"),
) -> list[str]:
    """Drain the diagnosed culprits through the one guarded drain (ownership, storm guard and
    its second look, 10.19).  A drain starts only when it can finish before the hook's
    watchdog (``deadline``, monotonic clock) even if every command takes its whole timeout:
    a drain cut off before its second look could overshoot the storm guard."""
    if d["verdict"] not in ("critical", "distributed-few", "root-cause") or not d["nodes"]:
        return []
    cl = client(cfg)
    worst = GUARDED_DRAIN_COMMANDS * float(cfg["epilog"].get("command_timeout_s", 10))
    drained = []
    for node in d["nodes"]:
        if time.monotonic() + worst > deadline:
            msg = (
                f"aegis-epilog: job {jid}: not draining {node}: too little time left for a "
                "guarded drain (the next job's Prolog checks it)"
            )
            export.log("alert", msg, use_syslog)
            print(msg, file=sys.stderr)
            continue
        why = (d["evidence"][:1] or [""])[0].split(": ", 1)[-1]
        v = Verdict("diagnose", FAIL, f"job {jid} {d['verdict']}: {why}")
        r = slurm.guarded_drain(cl, node, [v], cfg.get("guard", {}), datetime.now())
        if r.drained:
            drained.append(node)
            export.log("crit", f"job {jid}: drained {node}: {r.reason}", use_syslog)
        else:
            msg = f"aegis-epilog: job {jid}: not draining {node}: {r.action} {r.detail}"
            export.log("alert", msg, use_syslog)
            print(msg, file=sys.stderr)
    return drained


def _spawn_watch(jid: str, run: int, why: str, config_path: str | None) -> None:
    """Detached watcher: the hold must wait until Slurm requeued the job (measured on 22.05:
    in EpilogSlurmctld the job is still COMPLETING and ``scontrol hold`` answers "Job has
    already finished")."""
    argv = [
        sys.executable,
        "-I",
        "-m",
        "aegis_slurm.node.epilog",
        "--mode",
        "hold-watch",
        "--job",
        jid,
        "--restarts",
        str(run),
        "--why",
        why,
    ]
    if config_path:
        argv += ["--config", config_path]
    subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
        env={
            k: v for k, v in os.environ.items() if k in ("PATH", "AEGIS_CBD_CONFIG", "SLURM_CONF")
        },
    )


_JOBSTATE = re.compile(r"\bJobState=(\S+)")
_RESTARTS = re.compile(r"\bRestarts=(\d+)")
_LOOP_NOTE = re.compile(r" ?aegis:v1;loop=held[^\n]*")


def hold_watch(cfg: dict[str, Any], jid: str, run: int, why: str) -> str:
    """Poll until the job is PENDING again after run ``run`` (Restarts >= ``run``: Slurm may
    already count the requeue when the watcher starts, 10.13), then hold it and say why."""
    use_syslog = bool(cfg.get("runtime", {}).get("syslog", True))
    deadline = time.monotonic() + float(cfg.get("loop_guard", {}).get("hold_wait_s", 60))
    while time.monotonic() < deadline:
        try:
            out = slurm_cmd(cfg, ["scontrol", "-o", "show", "job", jid])
        except slurm.probes.ProbeFailed:
            return "gone"  # slurmctld forgot the job: nothing to hold
        except (slurm.probes.ProbeTimeout, slurm.probes.ProbeMissing):
            time.sleep(1)
            continue
        st = _JOBSTATE.search(out)
        rs = _RESTARTS.search(out)
        state = st.group(1) if st else ""
        if state in slurm.JOB_ENDED_STATES:
            return f"final:{state}"
        if state == "PENDING" and rs and int(rs.group(1)) >= run:
            slurm_cmd(cfg, ["scontrol", "hold", jid])
            note = f"aegis:v1;loop=held {why}"[:200]
            with contextlib.suppress(*slurm.ERRORS):
                old = _LOOP_NOTE.sub("", current_admin_comment(cfg, jid))
                new = f"{old} {note}" if old.strip() else note
                slurm_cmd(cfg, ["scontrol", "update", f"jobid={jid}", f"AdminComment={new}"])
            state_dir = config.state_dir(cfg)
            with files.locked_json(state_dir / "ctld" / "loops.json", LOOPS_SHAPE) as lk:
                lk.data.setdefault("held", {})[jid] = {"at": now_iso(), "why": why}
            export.log("alert", f"job {jid} held by aegis crash-loop guard: {why}", use_syslog)
            return "held"
        time.sleep(0.5)
    return "timeout"
