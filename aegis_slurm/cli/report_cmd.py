"""``aegis-slurm report``: the monthly reliability report (HTML + JSON + figures)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from aegis_slurm.errors import InputError


@click.command()
@click.option(
    "--store",
    required=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Store directory written by `aegis-slurm ingest`.",
)
@click.option(
    "--month",
    default=None,
    metavar="YYYY-MM",
    help="Month to report on (UTC; runs that ended in it).  Default: the latest.  A month in "
    "which no run ended is exit 4 and writes nothing.",
)
@click.option(
    "--out",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Output folder, e.g. reports/2026-10/.",
)
@click.option(
    "--events",
    "events_paths",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="`sacctmgr show event -P` export(s) with header (repeatable).",
)
@click.option(
    "--signals",
    "signals_paths",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Node-signal table (Parquet/CSV: node, time, signal, critical) or a store's "
    "signals/records.parquet (repeatable).  Collected Epilog records of --store are always used.",
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="Site config (TOML, [analytics] table); default /etc/aegis-slurm/aegis.toml if present.",
)
@click.option("--json", "as_json", is_flag=True, help="Print report.json as one JSON object.")
def report(
    store: Path,
    month: str | None,
    out: Path,
    events_paths: tuple[Path, ...],
    signals_paths: tuple[Path, ...],
    config_path: Path | None,
    as_json: bool,
) -> None:
    """Write OUT/index.html (one page, no network needed), OUT/report.json (every number on
    the page) and OUT/figures/*.png|svg for one month of the store."""
    from aegis_slurm.report.builder import build_report, latest_month
    from aegis_slurm.sections import Month, load_settings

    try:
        m = Month.parse(month) if month else latest_month(store)
    except (ValueError, InputError) as exc:
        raise click.BadParameter(str(exc), param_hint="--month") from exc
    rep = build_report(store, m, out, events_paths, signals_paths, load_settings(config_path))
    if as_json:
        click.echo(json.dumps(rep))
        return
    s = rep["summary"]
    rf = s["rf_per_1000_node_days"]
    click.echo(
        f"{rep['month']}: {s['jobs']:,} jobs, {s['gpu_hours']:,.0f} GPU-hours, "
        + (f"r_f {rf:.2f}/1000 node-days" if rf is not None else "r_f not measurable")
    )
    click.echo(f"report: {(out / 'index.html').resolve()}")
