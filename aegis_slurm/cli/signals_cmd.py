"""``aegis-slurm signals collect`` (Epilog spools -> store) and ``aegis-slurm diagnose JOBID``
(Aegis Algorithm 1 culprit localization).  ``--json`` prints one JSON object."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click


@click.group("signals")
def signals() -> None:
    """Epilog failure signals: bring node spools into the analytics store."""


@signals.command("collect")
@click.option(
    "--spool",
    "spools",
    multiple=True,
    required=True,
    type=click.Path(exists=True, path_type=Path),
    help="Spool directory (root, node dir or file) written by the Epilog; repeatable.",
)
@click.option(
    "--store",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Analytics store (created if missing).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def collect_cmd(spools: tuple[Path, ...], store: Path, as_json: bool) -> None:
    """Merge Epilog records into STORE/signals/ (idempotent: a second run changes nothing).

    taxonomy, failure-rate and the other analytics then use them for attribution automatically.
    """
    from aegis_slurm.accounting.signals import collect
    from aegis_slurm.accounting.store import open_store

    open_store(store)
    rep = collect(list(spools), store)
    if as_json:
        click.echo(json.dumps(rep))
        return
    click.echo(
        f"{rep['records_read']} records read: {rep['added']} added, {rep['updated']} "
        f"updated, {rep['unchanged']} unchanged; {rep['records_in_store']} in {store}"
    )
    for e in rep["errors"]:
        click.echo(f"  skipped: {e}", err=True)


def _job_from_store(store: Path | None, job_id: str) -> dict[str, Any] | None:
    if store is None or not (store / "runs").exists():
        return None
    import polars as pl

    from aegis_slurm.accounting import load_runs

    runs = load_runs(store).filter(
        (pl.col("job_id_raw").cast(pl.String) == job_id) | (pl.col("job_id") == job_id)
    )
    if runs.is_empty():
        return None
    last = runs.sort("run_index").row(-1, named=True)
    return {
        "state": last["state"],
        "nodes": list(last["nodes"] or []),
        "run_index": last["run_index"],
        "runs": len(runs),
        "end_time": last["end_time"].isoformat() if last["end_time"] else None,
        "admin_comment": last.get("admin_comment") or "",
    }


def _tag_nodes(comment: str) -> dict[str, str]:
    """node -> signal of the ``aegis:v1;hw=`` tag in an AdminComment ({} when none)."""
    import re

    m = re.search(r"aegis:v1;hw=([^;\s]+)", comment or "")
    pairs = (p.rpartition(":") for p in (m.group(1).split(",") if m else []))
    return {node: sig for node, _, sig in pairs if node and sig}


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
    help="Analytics store: collected records, and the job's nodes and end state.",
)
@click.option(
    "--run",
    "run",
    type=int,
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
    help="Send a node for repair once blamed this many times before.",
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
    as_json: bool,
) -> None:
    """Localize the culprit of a failed (multi-node) job: Aegis NSDI'25 Algorithm 1.

    Critical errors -> those nodes; distributed errors on <= 2 hosts -> those hosts; else a
    common source/destination (RootDiag); else a distributed problem with no single culprit.
    Exit status 0 with a verdict, 4 (no data) when no record of the job was found.
    """
    from aegis_slurm.accounting.signals import blame_history, job_records
    from aegis_slurm.errors import EXIT_NO_DATA
    from aegis_slurm.node.config import expand_hostlist
    from aegis_slurm.node.diagnose import diagnose as algorithm1

    if not spools and store is None:
        raise click.UsageError("give --spool and/or --store")
    recs = job_records(store, list(spools), job_id)
    info = _job_from_store(store, job_id)
    if not recs:
        out = {
            "job_id": job_id,
            "verdict": "no-records",
            "nodes": [],
            "evidence": [],
            "action": "none: no Epilog record of this job (Epilog not installed, or not "
            "collected yet)",
            "job": info,
        }
        click.echo(json.dumps(out, default=str) if as_json else out["action"])
        raise SystemExit(EXIT_NO_DATA)
    chosen = run if run is not None else max(int(r.get("run", 0)) for r in recs)
    recs = [r for r in recs if int(r.get("run", 0)) == chosen]
    try:
        listed = expand_hostlist(nodes) if nodes else []
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--nodes") from None
    job_nodes = (
        listed if nodes else (info or {}).get("nodes") or sorted({str(r["node"]) for r in recs})
    )
    state = job_state or (info or {}).get("state") or "FAILED"
    history = blame_history(store, list(spools), job_id)
    d = algorithm1(
        job_nodes,
        recs,
        job_state=state,
        history=history,
        repair_after=repair_after,
        tagged=_tag_nodes((info or {}).get("admin_comment", "")),
    ).to_dict()
    out = {
        "job_id": job_id,
        "run": chosen,
        "job_state": state,
        "job_nodes": job_nodes,
        "records": len(recs),
        **d,
        "job": info,
    }
    if as_json:
        click.echo(json.dumps(out, default=str))
        return
    click.echo(
        f"job {job_id} run {chosen} ({state}, {len(job_nodes)} nodes, "
        f"{len(recs)} records): {d['verdict']}"
    )
    click.echo(f"culprit: {', '.join(d['nodes']) or '-'}")
    click.echo(f"action:  {d['action']}")
    for n, a in d["actions"].items():
        click.echo(f"  {n}: {a}")
    if d["missing"]:
        click.echo(f"no record from: {', '.join(d['missing'])}")
    for e in d["evidence"][:20]:
        click.echo(f"  - {e}")
