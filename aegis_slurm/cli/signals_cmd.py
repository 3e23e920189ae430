"""``aegis-slurm signals collect``: Epilog spools -> the analytics store.  ``--json`` prints one
JSON object.  (``aegis-slurm diagnose`` lives in :mod:`aegis_slurm.cli.diagnose_cmd`.)"""

from __future__ import annotations

import json
from pathlib import Path

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
    click.echo(
        f"{rep['job_records_read']} EpilogSlurmctld job records read: "
        f"{rep['job_records_changed']} new or changed; {rep['job_records_in_store']} in {store}"
    )
    for e in rep["errors"] + rep["job_record_errors"]:
        click.echo(f"  skipped: {e}", err=True)
