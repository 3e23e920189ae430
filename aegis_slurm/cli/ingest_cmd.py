"""``aegis-slurm ingest``: sacct history (live or exported files) into the Parquet store."""

from __future__ import annotations

import sys
from datetime import date, datetime
from pathlib import Path

import click

from aegis_slurm.cli import echo_json


def _day(ctx: click.Context, param: click.Parameter, value: str | None) -> date | None:
    """A YYYY-MM-DD day, checked where it is parsed."""
    if value is None:
        return None
    try:
        return datetime.strptime(value, "%Y-%m-%d").date()
    except ValueError as exc:
        raise click.BadParameter(f"{value!r} is not a day YYYY-MM-DD") from exc


def _time_zone(ctx: click.Context, param: click.Parameter, value: str) -> str:
    from aegis_slurm.accounting.convert import check_time_zone
    from aegis_slurm.errors import InputError

    try:
        check_time_zone(value)
    except InputError as exc:
        raise click.BadParameter(str(exc)) from exc
    return value


def _delimiter(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is not None and (value == "" or "\n" in value or "\r" in value):
        raise click.BadParameter("the delimiter must be a non-empty string without a line end")
    return value


def _field_list(ctx: click.Context, param: click.Parameter, value: str | None) -> list[str] | None:
    if value is None:
        return None
    names = [name.strip() for name in value.split(",")]
    if any(not name for name in names):
        raise click.BadParameter(f"{value!r} has an empty field name (comma-separated names)")
    return names


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
@click.option("--start", callback=_day, help="First day to fetch, YYYY-MM-DD (UTC, inclusive).")
@click.option(
    "--end", callback=_day, help="Day after the last one to fetch, YYYY-MM-DD (exclusive)."
)
@click.option("--clusters", "-M", default=None, help="sacct -M value (live mode).")
@click.option(
    "--fields",
    default=None,
    callback=_field_list,
    help="Comma-separated field list for exports written with --noheader.",
)
@click.option(
    "--delimiter",
    default=None,
    callback=_delimiter,
    help="Field delimiter (default: from the header, or detected from the data).",
)
@click.option("--cluster", default="", help="Cluster name for exports without a Cluster column.")
@click.option(
    "--tz",
    "source_tz",
    default="UTC",
    show_default=True,
    callback=_time_zone,
    help="Time zone the export's timestamps were printed in (sacct prints local time).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the ingest report as JSON.")
def ingest(
    files: tuple[Path, ...],
    store: Path,
    live: bool,
    start: date | None,
    end: date | None,
    clusters: str | None,
    fields: list[str] | None,
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
    from aegis_slurm.accounting.sacct import ingest_sacct

    # Accounting errors (unreadable export, sacct failure, damaged store) reach the CLI group,
    # which prints them as one line with their exit code.
    if live:
        if files or not (start and end):
            raise click.UsageError("--sacct takes --start and --end and no FILES")
        if end <= start:
            raise click.UsageError("--end must be after --start")
        report = ingest_sacct(
            store, start, end, clusters=clusters, progress=None if as_json else _progress
        )
    else:
        if not files:
            raise click.UsageError("give export FILES, or --sacct with --start/--end")
        report = ingest_files(
            files,
            store,
            fields=fields,
            delimiter=delimiter,
            cluster=cluster,
            source_tz=source_tz,
            progress=None if as_json else _progress,
        )
    if as_json:
        echo_json(report)
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
