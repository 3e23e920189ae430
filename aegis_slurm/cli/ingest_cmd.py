"""``aegis-slurm ingest``: sacct history (live or exported files) into the Parquet store."""

from __future__ import annotations

import json
import sys
from datetime import date, datetime
from pathlib import Path

import click


def _day(value: str) -> date:
    try:
        return datetime.strptime(value, "%Y-%m-%d").date()
    except ValueError as exc:
        raise click.BadParameter(f"{value!r} is not YYYY-MM-DD") from exc


@click.command()
@click.argument("files", nargs=-1, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--store",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Store directory (created when missing).",
)
@click.option(
    "--sacct",
    "live",
    is_flag=True,
    help="Run sacct itself (needs --start/--end) instead of reading FILES.",
)
@click.option("--start", help="First day to fetch, YYYY-MM-DD (UTC, inclusive).")
@click.option("--end", help="Day after the last one to fetch, YYYY-MM-DD (exclusive).")
@click.option("--clusters", "-M", default=None, help="sacct -M value (live mode).")
@click.option(
    "--fields", default=None, help="Comma-separated field list for exports written with --noheader."
)
@click.option("--delimiter", default=None, help="Field delimiter (default: detected).")
@click.option("--cluster", default="", help="Cluster name for exports without a Cluster column.")
@click.option(
    "--tz",
    "source_tz",
    default="UTC",
    show_default=True,
    help="Time zone the export's timestamps were printed in (sacct prints local time).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the ingest report as JSON.")
def ingest(
    files: tuple[Path, ...],
    store: Path,
    live: bool,
    start: str | None,
    end: str | None,
    clusters: str | None,
    fields: str | None,
    delimiter: str | None,
    cluster: str,
    source_tz: str,
    as_json: bool,
) -> None:
    """Ingest sacct history into STORE.

    \b
    Live:    aegis-slurm ingest --sacct --start 2026-11-01 --end 2026-12-01 --store DIR
    Offline: aegis-slurm ingest export.txt more.json --store DIR

    Offline files may be `sacct --parsable2` or `--parsable` output with a header (any field
    order, any delimiter) or `sacct --json`.  Malformed records are counted per reason and saved
    under STORE/rejected/; nothing is dropped silently.
    """
    from aegis_slurm.accounting.ingest import ingest_files
    from aegis_slurm.accounting.parse_json import JsonExportError
    from aegis_slurm.accounting.parse_text import ExportFormatError
    from aegis_slurm.accounting.sacct import SacctError, ingest_sacct
    from aegis_slurm.accounting.store import StoreError

    try:
        if live:
            if files or not (start and end):
                raise click.UsageError("--sacct takes --start and --end and no FILES")
            first, last = _day(start), _day(end)
            if last <= first:
                raise click.UsageError("--end must be after --start")
            report = ingest_sacct(
                store, first, last, clusters=clusters, progress=None if as_json else _progress
            )
        else:
            if not files:
                raise click.UsageError("give export FILES, or --sacct with --start/--end")
            report = ingest_files(
                files,
                store,
                fields=fields.split(",") if fields else None,
                delimiter=delimiter,
                cluster=cluster,
                source_tz=source_tz,
                progress=None if as_json else _progress,
            )
    except (ExportFormatError, JsonExportError, SacctError, StoreError) as exc:
        raise click.ClickException(str(exc)) from exc
    if as_json:
        click.echo(json.dumps(report, indent=2))
        return
    click.echo(
        f"read {report['rows_read']}, kept {report['rows_kept']}, "
        f"rejected {report['rows_rejected']}, skipped {report['rows_skipped']} "
        f"-> {report['store']}"
    )
    for reason, count in report["rejected_by_reason"].items():
        click.echo(f"  rejected {count}: {reason}")
    for reason, count in report["recovered_by_reason"].items():
        click.echo(f"  recovered {count}: {reason}")
    if report.get("rejected_file"):
        click.echo(f"  rejected records saved in {report['rejected_file']}")


def _progress(message: str) -> None:
    click.echo(message, file=sys.stderr)
