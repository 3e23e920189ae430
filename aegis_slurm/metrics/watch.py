"""``aegis-slurm minder watch``: every running multi-node job, every interval.

One pass: running jobs from ``squeue`` → for each job with at least ``min_nodes`` nodes, the last
``lookback`` seconds from Prometheus → Minder → for each *new* incident (job, node): syslog, the
node_exporter textfile metric, and — only when ``drain = true`` — a drain through the Prolog's
drain-storm guard (``scontrol update state=drain`` lets the running job finish: the node is drained
after the job).  An incident is acted on once; the state file remembers it until the job ends.

Never acts on a failure of its own: Prometheus down or slow, squeue failing, or a bug in the
analysis of one job is logged (and ``aegis_minder_prometheus_up 0`` exported); no node is touched.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import hostlist

from aegis_slurm.errors import AegisError, ServiceError
from aegis_slurm.metrics import analyse, iso
from aegis_slurm.metrics.align import align
from aegis_slurm.metrics.catalog import job_can_cause, specs_for
from aegis_slurm.metrics.config import MinderConfig
from aegis_slurm.metrics.detect import Finding, Params, Result, job_reference
from aegis_slurm.metrics.priority import default_priority
from aegis_slurm.metrics.prometheus import fetch_job
from aegis_slurm.metrics.slurmjob import JobWindow
from aegis_slurm.node import export, probes

WHO = "aegis-minder:"
TEXTFILE = "aegis_minder.prom"


@dataclass
class PassReport:
    jobs_checked: int = 0
    prometheus_ok: bool = True
    errors: list[str] = field(default_factory=list)
    new: list[dict[str, Any]] = field(default_factory=list)  # incidents acted on this pass
    open: dict[str, dict[str, Any]] = field(default_factory=dict)  # all incidents of running jobs


def parse_squeue(text: str, now: float) -> list[JobWindow]:
    """``squeue -h -t R -o %i|%N|%S`` -> running jobs (start in local time, as Slurm prints)."""
    out = []
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) != 3 or not parts[1]:
            continue
        try:
            start = datetime.fromisoformat(parts[2]).astimezone(UTC).timestamp()
            nodes = hostlist.expand_hostlist(parts[1])
        except (ValueError, hostlist.BadHostlist):
            continue
        out.append(JobWindow(parts[0], nodes, start, now))
    return out


def running_jobs(timeout: float, now: float) -> list[JobWindow]:
    try:
        text = probes.run_argv(["squeue", "-h", "-t", "R", "-o", "%i|%N|%S"], timeout)
    except (probes.ProbeMissing, probes.ProbeTimeout, probes.ProbeFailed) as e:
        raise ServiceError(f"squeue failed: {e}") from e
    return parse_squeue(text, now)


def load_state(path: str | Path) -> dict[str, Any]:
    """The open incidents.  No file: none.  A file that cannot be read as the state: the
    incidents are unknown, so the next pass re-learns them without acting (``relearn``) — a
    lost state must never turn into a second alert or drain for the same incident."""
    p = Path(path)
    try:
        text = p.read_text()
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):  # unreadable, or not text
        return {"incidents": {}, "relearn": True}
    try:
        doc = json.loads(text)
    except ValueError:
        doc = None
    ok = isinstance(doc, dict) and isinstance(doc.get("incidents"), dict)
    ok = ok and all(
        isinstance(v, dict) and isinstance(v.get("job"), str) for v in doc["incidents"].values()
    )
    return doc if ok else {"incidents": {}, "relearn": True}


def save_state(path: str | Path, state: dict[str, Any]) -> None:
    p = Path(path)
    export.write_atomic(p.parent, p.name, json.dumps(state, indent=1, sort_keys=True) + "\n")
    os.chmod(p, 0o600)


def prom_text(report: PassReport, now: float) -> str:
    esc = export._esc
    lines = [
        "# HELP aegis_minder_faulty Node persistently off its peers in a running job (Minder).",
        "# TYPE aegis_minder_faulty gauge",
    ]
    for inc in report.open.values():
        lines.append(
            f'aegis_minder_faulty{{node="{esc(inc["node"])}",job="{esc(inc["job"])}",'
            f'metric="{esc(inc["metric"])}"}} 1'
        )
    lines += [
        "# HELP aegis_minder_prometheus_up 1 if every query of the last pass was answered.",
        "# TYPE aegis_minder_prometheus_up gauge",
        f"aegis_minder_prometheus_up {int(report.prometheus_ok)}",
        "# TYPE aegis_minder_jobs_checked gauge",
        f"aegis_minder_jobs_checked {report.jobs_checked}",
        "# TYPE aegis_minder_last_pass_timestamp_seconds gauge",
        f"aegis_minder_last_pass_timestamp_seconds {now:.3f}",
    ]
    return "\n".join(lines) + "\n"


#: What :func:`aegis_slurm.node.slurm.guarded_drain` did -> the incident's recorded action.
_DRAIN_ACTIONS = {
    "drained": "drains",
    "kept": "kept",  # already drained (by aegis or an admin): left as it is
    "storm": "storm_guard_trips",
    "undrained": "storm_guard_trips",  # drained, then undone by the guard's second look
    "guard_unavailable": "guard_unavailable",
    "drain_failed": "drain_failures",
}


def _drain(cfg: MinderConfig, node: str, evidence: str, now: datetime) -> str:
    """Drain after the job through the one guarded drain every hook uses (ownership, the
    drain-storm guard and its second look); returns what happened."""
    from aegis_slurm.node import slurm
    from aegis_slurm.node.verdict import FAIL, Verdict

    w = cfg.watch
    res = slurm.guarded_drain(
        slurm.Client(w.slurm_timeout), node, [Verdict("minder", FAIL, evidence)], dict(w.guard), now
    )
    action = _DRAIN_ACTIONS.get(res.action, res.action)
    if action != "drains":
        export.log("warning", f"{WHO} {node}: {res.action} {res.detail}".strip(), w.syslog)
    return action


def job_offsets(
    cfg: MinderConfig,
    url: str,
    job: JobWindow,
    params: Params,
    pri: list[str],
    refs: dict[str, Any],
    now: float,
) -> dict[str, Any]:
    """The job's per-node reference: ``[start + warmup, + baseline]``, queried once per job and
    kept in the state file (``refs``).  Returns ``{"start", "offsets"}``; ``offsets`` is None
    with a ``why`` when Prometheus holds no sample of that span (older than its retention, or a
    gap): the job is then judged without a reference, and its findings alerted, never drained.
    A Prometheus that is down raises :class:`ServiceError` (no verdict at all)."""
    ref_start = job.start + cfg.detector.warmup
    cached = refs.get(job.job_id)
    if isinstance(cached, dict) and cached.get("start") == ref_start:  # same job, not a reused id
        return cached
    specs = specs_for(pri)
    ref_end = ref_start + params.baseline
    try:
        df = fetch_job(cfg.prom(url), job.nodes, ref_start, ref_end, specs)
        aligned = align(df, step=15.0, nodes=job.nodes, start=ref_start, end=ref_end)
        entry: dict[str, Any] = {"start": ref_start, "offsets": job_reference(aligned, pri, params)}
    except ServiceError:
        raise
    except AegisError as e:  # nothing stored for that span
        entry = {"start": ref_start, "offsets": None, "why": str(e)}
    if ref_end <= now:  # a span still in progress (a lookback shorter than it) is not kept
        refs[job.job_id] = entry
    return entry


def run_pass(
    cfg: MinderConfig, url: str, jobs: list[JobWindow], now: float, state: dict[str, Any]
) -> PassReport:
    """One pass over ``jobs``; updates ``state`` (the incidents) in place."""
    rep = PassReport()
    incidents: dict[str, dict[str, Any]] = state.setdefault("incidents", {})
    relearn = bool(state.pop("relearn", False))
    if relearn:
        export.log(
            "warning",
            f"{WHO} state file unreadable: open incidents re-learnt this pass, not acted on",
            cfg.watch.syslog,
        )
    pri = default_priority()
    specs = specs_for(pri)
    prom = cfg.prom(url)
    refs: dict[str, Any] = state.setdefault("references", {})
    running = set()
    judged: list[tuple[JobWindow, Result, str, dict | None, set, set]] = []
    for job in jobs:
        if len(job.nodes) < cfg.watch.min_nodes:
            continue
        running.add(job.job_id)
        start = max(job.start, now - cfg.watch.lookback)
        # warm-up counts from the job's start, not from the window's
        params = replace(cfg.detector, warmup=max(0.0, job.start + cfg.detector.warmup - start))
        offsets, no_ref = None, ""
        try:
            if params.baseline > 0 and start > job.start + cfg.detector.warmup:
                # the reference is the job's first minutes after warm-up, not the window's (a
                # window's own start would absorb an ongoing fault): queried once, cached
                ref = job_offsets(cfg, url, job, params, pri, refs, now)
                offsets = ref["offsets"]
                if offsets is None:
                    no_ref = f"no per-node reference: {ref.get('why', 'not stored')}"
                    params = replace(params, baseline=0.0)
            df = fetch_job(prom, job.nodes, start, now, specs)
            result, _ = analyse(
                df,
                nodes=job.nodes,
                start=start,
                end=now,
                priority=pri,
                params=params,
                step=15.0,
                offsets=offsets,
            )
        except ServiceError as e:
            rep.prometheus_ok = False
            rep.errors.append(f"job {job.job_id}: {e}")
            export.log("warning", f"{WHO} no verdict for job {job.job_id}: {e}", cfg.watch.syslog)
            continue
        except AegisError as e:  # no data for this job yet: nothing to say, nothing to do
            rep.errors.append(f"job {job.job_id}: {e}")
            continue
        except Exception as e:  # our own bug: log it, never act on it
            rep.errors.append(f"job {job.job_id}: internal error {type(e).__name__}: {e}")
            export.log("err", f"{WHO} internal error on job {job.job_id}: {e!r}", cfg.watch.syslog)
            continue
        rep.jobs_checked += 1
        seen = set(df["node"].unique().to_list())
        seen_metric = set(df.select("node", "metric").unique().iter_rows())
        judged.append((job, result, no_ref, offsets, seen, seen_metric))
    # act once every job is judged: nodes of *different* jobs found on the same metric in the
    # same minute share a cause too (a leaf switch serving several jobs; session-13 review)
    together = found_together(
        [(job.job_id, f) for job, result, *_ in judged for f in result.faulty], cfg.detector.window
    )
    for job, result, no_ref, offsets, seen, seen_metric in judged:
        for f in result.faulty:
            key = f"{job.job_id}:{f.node}"
            prev = incidents.get(key)
            # a finding younger than a window waits for the next pass: another node of the
            # same event may cross the continuity seconds later, and together they are no
            # machine's fault (a drain only takes effect after the job: a pass costs nothing)
            if now - f.first_detected < cfg.detector.window:
                continue
            # one action per node per incident; but an alert on what the job can cause (an I/O
            # stall) is no verdict on the machine: evidence the job cannot cause, found later
            # (the stalling disk's mount now failing), is acted on (session-12 review); nor is
            # an alert on a shared cause, once the node is the one still found (session 13)
            if prev is not None and not (
                (prev.get("job_can_cause") and not job_can_cause(f.metric))
                or (prev.get("caveat") and not f.caveat and not job_can_cause(f.metric))
                or (prev.get("shared_with") and key not in together)
            ):
                continue
            inc = {
                "job": job.job_id,
                "node": f.node,
                "metric": f.metric,
                "first_detected": iso(f.first_detected),
                "score": round(f.score, 4),
            }
            if prev is not None:
                inc["after_alert_on"] = prev["metric"]
            evidence = f"{f.metric} off its peers since {inc['first_detected']} (job {job.job_id})"
            if relearn:  # may be an incident already acted on before the state was lost
                inc["action"] = "none (state file was unreadable: re-learnt, not acted on)"
                incidents[key] = inc
                continue
            export.log("alert", f"{WHO} {f.node}: {evidence}", cfg.watch.syslog)
            if f.node not in seen:
                # not one sample in the window: an exporter down or a label mapping that does not
                # fit this node, as likely as a dead machine; alert, never drain on it
                inc["action"] = "alert (no samples in the window: exporter or label mapping?)"
            elif (f.node, f.metric) not in seen_metric:
                # judged on the absence of one exporter's series only: an exporter crash looks
                # the same as a dead GPU; alert, never drain on it
                inc["action"] = "alert (no samples of this metric: exporter down?)"
            elif reason := job_can_cause(f.metric):
                # the job's own memory use kills its ranks as surely as a machine short of
                # memory (session-10 review), its own writes stall its disk: a drain would
                # blame the node for the job
                inc["action"] = f"alert ({reason}: not drained)"
                inc["job_can_cause"] = reason  # as minder --json says it
            elif f.caveat:
                # the machine's own, but no verdict: corrected errors, or clocks held far under
                # the peers' -- a lock, or another GPU model in the job (review of round 17)
                inc["action"] = f"alert ({f.caveat}: not drained)"
                inc["caveat"] = f.caveat
            elif no_ref or (
                offsets is not None
                and f.node not in (offsets.get(f.metric) or {}).get("offsets", {})
            ):
                # judged without the node's own reference: a constant hardware offset looks the
                # same as a fault; alert, never drain on it
                inc["action"] = f"alert ({no_ref or 'no per-node reference for this node'})"
            elif others := together.get(key):
                # several nodes off on the same metric in the same minute: what they share (a
                # leaf switch rebooting, a PDU, a rack's cooling) rather than each machine --
                # machines fail one at a time; draining them would not mend it and would take
                # healthy nodes away (session-13 review)
                inc["action"] = f"alert (with {', '.join(others)} at once: shared cause?)"
                inc["shared_with"] = others
            elif cfg.watch.drain:
                try:
                    # naive local time, like Slurm's reason timestamps the guard compares it to
                    inc["action"] = _drain(cfg, f.node, evidence, datetime.fromtimestamp(now))
                except Exception as e:  # our bug: logged, and the incident is not retried
                    inc["action"] = "error"
                    export.log("err", f"{WHO} drain of {f.node} failed: {e!r}", cfg.watch.syslog)
            else:
                inc["action"] = "alert"
            incidents[key] = inc
            rep.new.append(inc)
    # an incident (and the job's reference) ends with its job
    for key in [k for k, v in incidents.items() if v["job"] not in running]:
        del incidents[key]
    for key in [k for k in refs if k not in running]:
        del refs[key]
    rep.open = dict(incidents)
    return rep


def found_together(faulty: list[tuple[str, Finding]], within: float) -> dict[str, list[str]]:
    """For each ``job:node`` of the pass's findings (``(job id, finding)``), the other nodes
    found on the same metric within ``within`` seconds of it, in any job (none: left out)."""
    out: dict[str, list[str]] = {}
    for job, f in faulty:
        others = {
            g.node
            for _, g in faulty
            if g.node != f.node
            and g.metric == f.metric
            and abs(g.first_detected - f.first_detected) <= within
        }
        if others:
            out[f"{job}:{f.node}"] = sorted(others)
    return out


def run_watch(
    cfg: MinderConfig, url: str, interval: float | None = None, once: bool = False
) -> None:
    """The loop: a pass every ``interval`` seconds (default from the config, 60)."""
    period = interval if interval is not None else cfg.watch.interval
    cfg.prom(url)  # a bad URL or label template: fail now, not every minute
    # an unwritable state file would forget incidents and act on them again: fail before acting
    save_state(cfg.watch.state_file, load_state(cfg.watch.state_file))
    while True:
        t0 = time.monotonic()
        now = time.time()
        state = load_state(cfg.watch.state_file)
        try:
            jobs = running_jobs(cfg.watch.slurm_timeout, now)
        except ServiceError as e:
            export.log("warning", f"{WHO} {e}; skipping this pass", cfg.watch.syslog)
            rep = PassReport(prometheus_ok=True, errors=[str(e)])
            rep.open = state.get("incidents", {})
        else:
            rep = run_pass(cfg, url, jobs, now, state)
            save_state(cfg.watch.state_file, state)
        export.write_atomic(cfg.watch.textfile_dir, TEXTFILE, prom_text(rep, now))
        if once:
            if rep.errors and not rep.jobs_checked:
                raise ServiceError("; ".join(rep.errors)[:400])
            return
        time.sleep(max(0.0, period - (time.monotonic() - t0)))
