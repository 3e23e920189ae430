"""``aegis-slurm store``: look after the Parquet store (verify, repair)."""

from __future__ import annotations

from pathlib import Path

import click

from aegis_slurm.cli import echo_json


@click.group("store")
def store() -> None:
    """Verify and repair an aegis-slurm store."""


@store.command("check")
@click.option(
    "--store",
    "store_dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Store directory to verify.",
)
@click.option(
    "--repair",
    is_flag=True,
    help="Fix what can be fixed safely: quarantine bad parts, delete stale temporary files, "
    "rewrite a broken meta.json, compact repeated runs.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the findings as one JSON object.")
def check(store_dir: Path, repair: bool, as_json: bool) -> None:
    """Verify every file of the store; exit 3 when a problem remains (0 when none or repaired)."""
    from aegis_slurm.accounting.store_check import check_store
    from aegis_slurm.errors import CheckFailedError

    report = check_store(store_dir, repair=repair)
    if as_json:
        echo_json(report.as_dict())
    else:
        for finding in report.findings:
            status = "repaired" if finding.repaired else "PROBLEM"
            action = f" -> {finding.action}" if finding.action else ""
            click.echo(f"{status:<9} {finding.path}: {finding.problem}{action}")
        click.echo(f"-- {report.store}: {report.parts} part(s), {len(report.findings)} finding(s)")
    if not report.ok:
        hint = "" if repair else "; run again with --repair"
        unrepaired = sum(not f.repaired for f in report.findings)
        raise CheckFailedError(f"{report.store}: {unrepaired} problem(s) remain{hint}")
