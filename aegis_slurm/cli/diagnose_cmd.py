"""``aegis-slurm diagnose JOBID``: who broke a failed job, from every view we have.

Three independent sources, each optional, each saying which nodes it names:

- ``signals``: Aegis NSDI'25 Algorithm 1 over the Epilog records (``--spool``/``--store``);
- ``logs``: the L4 log diagnosis of the job's output files (``--logs PATH`` or ``--find-logs``);
- ``metrics``: Minder over the job's window in Prometheus (``--prometheus URL`` or
  ``AEGIS_PROMETHEUS_URL``).

A source that fails (Prometheus down, no output files) is reported as that source's error, never
as "nothing found", and the other sources still answer.  ``--json`` keeps Algorithm 1's keys at
the top level (a contract since the first release) and adds ``logs``, ``metrics`` and
``named_by`` (node -> the sources that name it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from aegis_slurm.errors import EXIT_NO_DATA, AegisError, NoDataError, ServiceError


def _job_from_store(store: Path | None, job_id: str) -> dict[str, Any] | None:
    if store is None or not (store / "runs").exists():
        return None
    from aegis_slurm.accounting import load_job_runs

    runs = load_job_runs(store, job_id)
    if runs.is_empty():
        return None
    last = runs.row(-1, named=True)
    return {
        "state": last["state"],
        "nodes": list(last["nodes"] or []),
        "run_index": last["run_index"],
        "runs": len(runs),
        "end_time": last["end_time"].isoformat() if last["end_time"] else None,
        "admin_comment": last.get("admin_comment") or "",
    }


def signals_view(
    job_id: str,
    spools: list[Path],
    store: Path | None,
    run: int | None,
    listed_nodes: list[str],
    job_state: str | None,
    repair_after: int,
) -> dict[str, Any]:
    """Algorithm 1 over the job's Epilog records; ``verdict`` is ``no-records`` without any."""
    from aegis_slurm.accounting.signals import blame_history, job_records
    from aegis_slurm.node.diagnose import diagnose as algorithm1
    from aegis_slurm.node.signals import parse_tag

    recs = job_records(store, spools, job_id) if (spools or store) else []
    info = _job_from_store(store, job_id)
    if not recs:
        return {
            "job_id": job_id,
            "verdict": "no-records",
            "nodes": [],
            "evidence": [],
            "action": "none: no Epilog record of this job (Epilog not installed, or not "
            "collected yet)",
            "job_nodes": listed_nodes or list((info or {}).get("nodes") or []),
            "job": info,
        }
    chosen = run if run is not None else max(int(r.get("run", 0)) for r in recs)
    recs = [r for r in recs if int(r.get("run", 0)) == chosen]
    job_nodes = listed_nodes or (info or {}).get("nodes") or sorted({str(r["node"]) for r in recs})
    state = job_state or (info or {}).get("state") or "FAILED"
    d = algorithm1(
        job_nodes,
        recs,
        job_state=state,
        history=blame_history(store, spools, job_id),
        repair_after=repair_after,
        tagged=parse_tag((info or {}).get("admin_comment", "")),
    ).to_dict()
    return {
        "job_id": job_id,
        "run": chosen,
        "job_state": state,
        "job_nodes": job_nodes,
        "records": len(recs),
        **d,
        "job": info,
    }


def logs_view(
    job_id: str,
    paths: list[Path],
    store: Path | None,
    listed_nodes: list[str],
    spools: list[Path] | None = None,
) -> dict[str, Any]:
    """The L4 verdict (``aegis-slurm logs --json``'s keys), or ``{"error": ...}``.

    Given log paths are diagnosed even when neither slurmctld nor the store knows the job (the
    job lookup only adds the task layout and a baseline run)."""
    try:
        from aegis_slurm.logs import Layout, diagnose_job_logs, diagnose_logs

        try:
            _, verdict = diagnose_job_logs(job_id, paths=paths, store=store, spools=spools or [])
        except (NoDataError, ServiceError):
            if not paths:
                raise
            verdict = diagnose_logs(paths, layout=Layout(nodes=tuple(listed_nodes)))
    except ImportError as e:  # the optional "diagnosis" extra is not installed
        return {"error": f"log diagnosis needs pip install 'aegis-slurm[diagnosis]' ({e.name})"}
    except AegisError as e:
        return {"error": str(e)}
    return verdict.to_json()


def metrics_view(url: str, job_id: str, store: Path | None) -> dict[str, Any]:
    """Minder over the job's window (``aegis-slurm minder --json``'s keys), or ``{"error"}``.

    A Prometheus that is down or slow is this view's error: never "no faulty node"."""
    from aegis_slurm.metrics import diagnose_job_metrics
    from aegis_slurm.metrics.slurmjob import from_sacct, from_store

    try:
        window = from_store(store, job_id) if store is not None else None
        window = window or from_sacct(job_id)
        return diagnose_job_metrics(url, window.nodes, window.start, window.end)
    except AegisError as e:
        return {"error": str(e)}


def named_by(signals: dict[str, Any], logs: dict | None, metrics: dict | None) -> dict[str, list]:
    """node -> the sources that name it as a culprit (a log verdict of "all nodes" names none:
    the same failure on every node is the job's, not a node's).

    When the job's nodes are known, a log or metrics unit that is not one of them (a combined
    ``slurm-4242.out`` read as one unit, a rank no layout mapped) names no node: it stays in its
    source's section, never a culprit line.
    """
    known = set(signals.get("job_nodes") or [])
    named: dict[str, list[str]] = {}
    for node in signals.get("nodes", []):
        named.setdefault(node, []).append("signals")
    if logs and "error" not in logs and not logs.get("all_nodes"):
        for n in logs.get("nodes", []):
            named.setdefault(n["node"], []).append("logs")
    if metrics and "error" not in metrics:
        for f in metrics.get("faulty", []):
            # a finding the job can cause (an OOM kill, a checkpoint writer's I/O stall) names
            # the node with that doubt attached
            src = "metrics (the job may cause it)" if f.get("job_can_cause") else "metrics"
            if src not in named.setdefault(f["node"], []):
                named[f["node"]].append(src)
    if known:
        named = {n: src for n, src in named.items() if n in known or src == ["signals"]}
    # most sources first; among equals, the order the sources rank them in (signals' culprits,
    # then the logs' most suspicious, then metrics'), which dict insertion order keeps
    rank = {n: i for i, n in enumerate(named)}
    order = sorted(named, key=lambda n: (-len(named[n]), rank[n]))
    return {n: named[n] for n in order}


@click.command("diagnose")
@click.argument("job_id")
@click.option(
    "--spool",
    "spools",
    multiple=True,
    type=click.Path(exists=True, path_type=Path),
    help="Epilog spool directory to read records from (repeatable).",
)
@click.option(
    "--store",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Analytics store: collected records, and the job's nodes, window and end state.",
)
@click.option(
    "--run",
    "run",
    type=click.IntRange(min=0),
    default=None,
    help="Which run (restart count) of a requeued job; default the latest recorded.",
)
@click.option("--nodes", default="", help="The job's nodes (hostlist) when no store knows them.")
@click.option(
    "--state",
    "job_state",
    default=None,
    help="Job end state (NODE_FAIL counts nodes without a record as critical).",
)
@click.option(
    "--repair-after",
    default=3,
    show_default=True,
    type=click.IntRange(min=1),
    help="Send a node for repair once blamed this many times before.",
)
@click.option(
    "--logs",
    "log_paths",
    multiple=True,
    type=click.Path(exists=True, path_type=Path),
    help="The job's log files or directories: add the L4 log diagnosis (repeatable).",
)
@click.option(
    "--find-logs",
    is_flag=True,
    help="Add the log diagnosis of the job's own output files (found with scontrol, or from "
    "the EpilogSlurmctld's record in --store/--spool once slurmctld has forgotten the job).",
)
@click.option(
    "--prometheus",
    envvar="AEGIS_PROMETHEUS_URL",
    default=None,
    help="Prometheus base URL: add Minder's verdict for the job's window "
    "[env AEGIS_PROMETHEUS_URL].",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def diagnose(
    job_id: str,
    spools: tuple[Path, ...],
    store: Path | None,
    run: int | None,
    nodes: str,
    job_state: str | None,
    repair_after: int,
    log_paths: tuple[Path, ...],
    find_logs: bool,
    prometheus: str | None,
    as_json: bool,
) -> None:
    """Localize the culprit of a failed (multi-node) job and say which evidence named it.

    Epilog signals: Aegis NSDI'25 Algorithm 1 (critical errors -> those nodes; distributed
    errors on <= 2 hosts -> those hosts; else a common source/destination; else no single
    culprit).  With --logs/--find-logs the L4 log diagnosis, with --prometheus Minder over the
    job's window.  Exit 0 with a verdict, 4 (no data) when no source had anything on the job.
    """
    from aegis_slurm.node.config import expand_hostlist

    want_logs = bool(log_paths) or find_logs
    if not spools and store is None and not want_logs and not prometheus:
        raise click.UsageError("give --spool and/or --store (and optionally --logs, --prometheus)")
    try:
        listed = expand_hostlist(nodes) if nodes else []
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--nodes") from None
    out = signals_view(job_id, list(spools), store, run, listed, job_state, repair_after)
    logs = logs_view(job_id, list(log_paths), store, listed, list(spools)) if want_logs else None
    metrics = metrics_view(prometheus, job_id, store) if prometheus else None
    out["logs"] = logs
    out["metrics"] = metrics
    out["named_by"] = named_by(out, logs, metrics)
    has_data = (
        out["verdict"] != "no-records"
        or (logs is not None and "error" not in logs)
        or (metrics is not None and "error" not in metrics)
    )
    if as_json:
        click.echo(json.dumps(out, default=str, allow_nan=False))
    else:
        click.echo(render_text(out))
    if not has_data:
        raise SystemExit(EXIT_NO_DATA)


def render_text(out: dict[str, Any]) -> str:
    """Culprits and who named them first, then each source's own answer."""
    from aegis_slurm.cli.logs_cmd import render_text as render_logs

    lines = []
    if out["named_by"]:
        lines.append(
            "culprit: "
            + "; ".join(f"{n} (named by {', '.join(s)})" for n, s in out["named_by"].items())
        )
    else:
        lines.append("culprit: none named by any source")
    if out["verdict"] == "no-records":
        lines.append(f"signals: {out['action']}")
    else:
        lines.append(
            f"signals: job {out['job_id']} run {out['run']} ({out['job_state']}, "
            f"{len(out['job_nodes'])} nodes, {out['records']} records): {out['verdict']}"
        )
        lines.append(f"  action: {out['action']}")
        lines += [f"  {n}: {a}" for n, a in out["actions"].items()]
        if out["missing"]:
            lines.append(f"  no record from: {', '.join(out['missing'])}")
        lines += [f"  - {e}" for e in out["evidence"][:20]]
    logs = out["logs"]
    if logs is not None:
        if "error" in logs:
            lines.append(f"logs: ERROR {logs['error']}")
        else:
            from aegis_slurm.logs import LogVerdict

            body = render_logs(LogVerdict(**logs))
            lines.append("logs: " + body.replace("\n", "\n  "))
    metrics = out["metrics"]
    if metrics is not None:
        if "error" in metrics:
            lines.append(f"metrics: ERROR {metrics['error']}")
        elif not metrics["faulty"]:
            lines.append(f"metrics: no faulty node in {metrics['windows']} windows")
        else:
            lines.append(
                f"metrics: {len(metrics['faulty'])} faulty in {metrics['windows']} windows"
            )
            lines += [
                f"  {f['node']}  since {f['first_detected']}  {f['metric']}  {f['score']}"
                for f in metrics["faulty"]
            ]
    return "\n".join(lines)
