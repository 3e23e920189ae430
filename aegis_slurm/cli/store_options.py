"""Options and input loading shared by the commands that read a store through the sections
layer (the analytics commands and ``check``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from aegis_slurm.errors import InputError, NoDataError

_DATE = click.DateTime(formats=["%Y-%m-%d", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M"])


def store_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """--store, evidence (--events, --signals), the period (--month or --start/--end), --config
    and --json: every analytics command reads its inputs through the sections layer."""
    opts = [
        click.option(
            "--store",
            required=True,
            type=click.Path(exists=True, file_okay=False, path_type=Path),
            help="Store directory written by `aegis-slurm ingest`.",
        ),
        click.option(
            "--events",
            "events_paths",
            multiple=True,
            type=click.Path(exists=True, dir_okay=False, path_type=Path),
            help="`sacctmgr show event -P` export(s) with header, for attribution (repeatable).",
        ),
        click.option(
            "--signals",
            "signals_paths",
            multiple=True,
            type=click.Path(exists=True, dir_okay=False, path_type=Path),
            help="Node-signal table (Parquet/CSV: node, time, signal, critical) or a store's "
            "signals/records.parquet (repeatable).  Collected Epilog records of --store are "
            "always used.",
        ),
        click.option(
            "--month",
            default=None,
            metavar="YYYY-MM",
            help="Analyse the runs that ended in this UTC month (not with --start/--end).  "
            "A period (or store) in which no run ended is exit 4.",
        ),
        click.option(
            "--start",
            type=_DATE,
            default=None,
            help="Analyse runs that ended at or after this UTC date/time.",
        ),
        click.option(
            "--end",
            type=_DATE,
            default=None,
            help="Analyse runs that ended before this UTC date/time.",
        ),
        click.option(
            "--config",
            "config_path",
            type=click.Path(exists=True, dir_okay=False, path_type=Path),
            default=None,
            help="Site config (TOML, [analytics] table); default /etc/aegis-slurm/aegis.toml "
            "when it exists.",
        ),
        click.option("--json", "as_json", is_flag=True, help="Print one JSON object."),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


def period_of(month: str | None, start: datetime | None, end: datetime | None) -> Any:
    """The sections' Period for --month or --start/--end (naive times are UTC)."""
    from aegis_slurm.sections import Month, Period

    if month and (start or end):
        raise click.UsageError("give --month or --start/--end, not both")
    if month:
        try:
            return Month.parse(month).period
        except (ValueError, InputError) as exc:
            raise click.BadParameter(str(exc), param_hint="--month") from exc
    s = start.replace(tzinfo=UTC) if start and start.tzinfo is None else start
    e = end.replace(tzinfo=UTC) if end and end.tzinfo is None else end
    if s and e and s >= e:
        raise click.BadParameter("--start must be before --end", param_hint="--start")
    return Period(s, e)


def load_period_inputs(
    store: Path,
    events_paths: tuple[Path, ...],
    signals_paths: tuple[Path, ...],
    month: str | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
    config_path: Path | None = None,
    columns: Iterable[str] | None = None,
) -> Any:
    """The sections' inputs for the store options, reading only ``columns`` of the runs
    (``sections.inputs.columns_for`` the sections the command computes).

    A period in which no run ended is :class:`NoDataError` (exit 4, one line): an empty month
    after a failed ingest must not print as a clean month of zero failures."""
    from aegis_slurm.sections import load_inputs, load_settings

    inp = load_inputs(
        store,
        events_paths,
        signals_paths,
        period_of(month, start, end),
        load_settings(config_path),
        columns=columns,
    )
    if inp.runs.height == 0:
        where = (
            "the store"
            if inp.period.start is None and inp.period.end is None
            else (inp.period.label)
        )
        raise NoDataError(f"no run ended in {where}: nothing to analyse ({store})")
    return inp
