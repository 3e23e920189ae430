"""``aegis-slurm minder``: faulty-machine detection from monitoring metrics (docs/minder.md).

``minder METRICS.parquet`` / ``minder --prometheus URL --job JOBID``: one job, a verdict.
``minder fit LABELS.csv``: re-learn the metric priority from a site's labelled history.
``minder watch --prometheus URL``: every running multi-node job, every interval.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from aegis_slurm.errors import InputError


class _DefaultGroup(click.Group):
    """A group whose first argument, when not a subcommand, goes to the ``detect`` command."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args or (args[0] not in self.commands and args[0] not in ("-h", "--help")):
            args = ["detect", *args]
        return super().parse_args(ctx, args)


@click.group("minder", cls=_DefaultGroup)
def minder() -> None:
    """Find the node whose metrics drift from its peers' (Minder, NSDI'25; Aegis λ+2δ).

    \b
    aegis-slurm minder METRICS.parquet --json
    aegis-slurm minder --prometheus URL --job JOBID [--store DIR] --json
    aegis-slurm minder fit LABELS.csv --out priority.json
    aegis-slurm minder watch --prometheus URL [--interval 60]
    """


_config_opt = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="minder.toml: Prometheus label mapping, detector and watch settings.",
)


@minder.command("detect")
@click.argument("metrics", required=False, type=click.Path(path_type=Path))
@click.option("--prometheus", "url", default=None, help="Prometheus base URL (online mode).")
@click.option("--job", "job_id", default=None, help="Slurm job id (online mode).")
@click.option(
    "--store",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Analytics store that knows the job's nodes and window (else sacct is asked).",
)
@click.option(
    "--nodes",
    default=None,
    help="The job's nodes (hostlist): instead of asking Slurm; offline, the rows to judge.",
)
@click.option(
    "--start",
    default=None,
    help="Window start, ISO-8601 UTC (online with --nodes; offline, clips the file).",
)
@click.option(
    "--end",
    default=None,
    help="Window end, ISO-8601 UTC (online default now; offline, clips the file).",
)
@click.option(
    "--detector",
    type=click.Choice(["minder", "lambda2delta"]),
    default="minder",
    show_default=True,
    help="Minder's similarity + continuity, or Aegis' λ+2δ rule.",
)
@click.option(
    "--priority",
    "priority_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Metric priority learnt by `minder fit` (default: the shipped one).",
)
@_config_opt
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def detect_cmd(
    metrics: Path | None,
    url: str | None,
    job_id: str | None,
    store: Path | None,
    nodes: str | None,
    start: str | None,
    end: str | None,
    detector: str,
    priority_path: Path | None,
    config_path: Path | None,
    as_json: bool,
) -> None:
    """Detect faulty nodes in one job's metrics (Parquet file or Prometheus)."""
    from aegis_slurm.metrics import analyse, to_json
    from aegis_slurm.metrics.catalog import specs_for
    from aegis_slurm.metrics.config import load_config
    from aegis_slurm.metrics.priority import default_priority, load_priority

    cfg = load_config(config_path)
    pri = load_priority(priority_path) if priority_path else default_priority()
    if metrics is not None and (url or job_id):
        raise click.UsageError("give either METRICS.parquet or --prometheus with --job, not both")
    if metrics is not None:
        from aegis_slurm.metrics import slurmjob
        from aegis_slurm.metrics.table import read_table

        names, t0, t1 = None, None, None
        if nodes or start or end:  # restrict the file to a job's nodes and window
            t0 = slurmjob.parse_iso(start, "--start") if start else None
            t1 = slurmjob.parse_iso(end, "--end") if end else None
            if t0 is not None and t1 is not None and t1 <= t0:
                raise InputError("--end must be after --start")
            if nodes:
                names = slurmjob.from_args("-", nodes, start or "1970-01-01", None).nodes
        result, aligned = analyse(
            read_table(metrics),
            nodes=names,
            start=t0,
            end=t1,
            priority=pri,
            params=cfg.detector,
            detector=detector,
        )
    elif url and job_id:
        from aegis_slurm.metrics import slurmjob
        from aegis_slurm.metrics.prometheus import fetch_job

        if nodes:
            win = slurmjob.from_args(job_id, nodes, start, end)
        else:
            win = (slurmjob.from_store(store, job_id) if store else None) or slurmjob.from_sacct(
                job_id, cfg.watch.slurm_timeout
            )
        if not win.nodes:
            raise InputError(f"job {job_id}: no node list known")
        df = fetch_job(cfg.prom(url), win.nodes, win.start, win.end, specs_for(pri))
        result, aligned = analyse(
            df,
            nodes=win.nodes,
            start=win.start,
            end=win.end,
            priority=pri,
            params=cfg.detector,
            detector=detector,
            step=15.0,
        )
    else:
        raise click.UsageError("give METRICS.parquet, or --prometheus URL and --job JOBID")
    doc = to_json(result)
    if as_json:
        click.echo(json.dumps(doc))
        return
    dropped = sum(aligned.dropped.values())
    click.echo(
        f"{len(aligned.nodes)} nodes, {len(aligned.data)} metrics, {doc['windows']} windows"
        + (f"; {dropped} samples dropped ({dict(aligned.dropped)})" if dropped else "")
    )
    if not doc["windows"]:
        click.echo("no window could be judged (the job is shorter than the warm-up and a window)")
    elif not doc["faulty"]:
        click.echo("no faulty node found")
    for f in doc["faulty"]:
        click.echo(
            f"FAULTY {f['node']}  since {f['first_detected']}  {f['metric']}  {f['score']}"
            + (f"  ({f['job_can_cause']}: not a machine verdict)" if f["job_can_cause"] else "")
            + (f"  ({f['caveat']}: not a drain reason)" if f["caveat"] else "")
        )
    for d in doc["departed"]:
        click.echo(f"LEFT   {d['node']}  at {d['at']}  (the job ran on without it; not a fault)")
    for c in doc["collateral"]:
        click.echo(
            f"WITH   {c['node']}  idle from {c['at']}  (its ranks stopped with {c['with']}'s "
            "fault; no evidence of its own)"
        )


@minder.command("fit")
@click.argument("labels", type=click.Path(path_type=Path))
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="Where to write the learnt priority (JSON), for --priority.",
)
def fit_cmd(labels: Path, out: Path) -> None:
    """Re-learn the metric priority from labelled jobs (CSV: file,node,onset)."""
    from aegis_slurm.metrics.priority import fit_from_labels

    try:
        import sklearn  # noqa: F401
    except ImportError as e:
        raise InputError("minder fit needs scikit-learn: pip install 'aegis-slurm[minder]'") from e
    doc = fit_from_labels(labels)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    tmp.replace(out)
    click.echo(f"priority: {', '.join(doc['priority'][:5])}, ... -> {out}")


@minder.command("watch")
@click.option("--prometheus", "url", required=True, help="Prometheus base URL.")
@click.option(
    "--interval",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Seconds between passes (> 0) [60].",
)
@click.option("--once", is_flag=True, help="One pass, then exit (for cron or a test).")
@_config_opt
def watch_cmd(url: str, interval: float | None, once: bool, config_path: Path | None) -> None:
    """Check every running multi-node job each interval; act once per node per incident."""
    from aegis_slurm.metrics.config import load_config
    from aegis_slurm.metrics.watch import run_watch

    cfg = load_config(config_path)
    run_watch(cfg, url, interval=interval, once=once)
