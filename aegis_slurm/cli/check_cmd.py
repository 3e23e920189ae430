"""``aegis-slurm check``: headline reliability numbers against thresholds, for cron/alerting."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import click

from aegis_slurm.cli.store_options import load_period_inputs, store_options
from aegis_slurm.errors import CheckFailedError


@click.command()
@store_options
@click.option(
    "--days",
    type=click.IntRange(min=1),
    default=30,
    show_default=True,
    help="Without --month/--start/--end: check the runs that ended in the last DAYS days.",
)
@click.option(
    "--max-rf",
    type=click.FloatRange(min=0.0),
    default=None,
    help="Fail when r_f is above this many failures per 1000 node-days with 90% confidence "
    "(the interval's lower end is above it).  Default: r_f is not checked.",
)
@click.option(
    "--max-crash-loops",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Fail when more crash loops than this touch the period.",
)
@click.option(
    "--max-lemon-nodes",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Fail when more lemon nodes than this are flagged at the period's end.",
)
@click.option(
    "--textfile",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write the numbers for node_exporter's textfile collector (atomic), e.g. "
    "/var/lib/node_exporter/textfile_collector/aegis_slurm.prom.",
)
def check(**kw: Any) -> None:
    """Exit 0 when the period is within the thresholds, 3 when one is crossed (each printed),
    4 when no run ended in the period."""
    from aegis_slurm.node.export import write_atomic
    from aegis_slurm.sections.alerts import COLUMNS, Thresholds, evaluate, textfile

    as_json = kw.pop("as_json")
    if not (kw["month"] or kw["start"] or kw["end"]):
        now = datetime.now(UTC).replace(microsecond=0)
        kw["start"], kw["end"] = now - timedelta(days=kw["days"]), now
    inp = load_period_inputs(
        kw["store"],
        kw["events_paths"],
        kw["signals_paths"],
        kw["month"],
        kw["start"],
        kw["end"],
        kw["config_path"],
        COLUMNS,
    )
    res = evaluate(inp, Thresholds(kw["max_rf"], kw["max_crash_loops"], kw["max_lemon_nodes"]))
    if kw["textfile"] is not None:
        write_atomic(kw["textfile"].parent, kw["textfile"].name, textfile(res))
    from aegis_slurm.sections import clean

    if as_json:
        click.echo(json.dumps(clean(res)))
    else:
        rf = res["rf_per_1000_node_days"]
        click.echo(
            f"{inp.period.label}: {res['runs']:,} runs, r_f "
            + ("-" if rf is None else f"{rf:.2f}/1000 node-days")
            + f", {res['crash_loops']} crash loops, {res['lemon_nodes']} lemon nodes"
        )
    if res["crossed"]:
        raise CheckFailedError("; ".join(res["crossed"]))
