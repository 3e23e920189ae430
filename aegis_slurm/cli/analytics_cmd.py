"""Reliability analytics commands: taxonomy, failure-rate, mttf, ettr, checkpoint-plan, goodput,
requeue-loops, lemon-nodes.  Every command takes ``--json`` and then prints one JSON object."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from datetime import date, datetime
from pathlib import Path
from typing import Any

import click


def _clean(o: Any) -> Any:
    """JSON-safe: datetimes to ISO 8601, inf/NaN to null."""
    if isinstance(o, dict):
        return {str(k): _clean(v) for k, v in o.items()}
    if isinstance(o, list | tuple):
        return [_clean(v) for v in o]
    if isinstance(o, float) and (math.isinf(o) or math.isnan(o)):
        return None
    if isinstance(o, datetime | date):
        return o.isoformat()
    return o


def _emit(result: dict[str, Any], as_json: bool, human: Callable[[dict[str, Any]], str]) -> None:
    result = _clean(result)
    click.echo(json.dumps(result, sort_keys=False) if as_json else human(result))


def _fmt(v: Any, nd: int = 3) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{nd}g}" if abs(v) < 1e-3 and v != 0 else f"{v:,.{nd}f}"
    return str(v)


def _table(rows: list[dict[str, Any]], cols: list[str]) -> str:
    if not rows:
        return "(none)"
    cells = [[_fmt(r.get(c)) for c in cols] for r in rows]
    widths = [max(len(c), *(len(x[i]) for x in cells)) for i, c in enumerate(cols)]
    lines = ["  ".join(c.rjust(w) for c, w in zip(cols, widths, strict=True))]
    lines += ["  ".join(x.rjust(w) for x, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(lines)


def _store_options(f: Callable[..., Any]) -> Callable[..., Any]:
    f = click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")(f)
    f = click.option(
        "--signals",
        "signals_path",
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        help="Node-signal table (Parquet or CSV: node, time, signal, critical) for attribution.",
    )(f)
    f = click.option(
        "--events",
        "events_paths",
        multiple=True,
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        help="`sacctmgr show event -P` export(s) with header, for attribution (repeatable).",
    )(f)
    return click.option(
        "--store",
        required=True,
        type=click.Path(exists=True, file_okay=False, path_type=Path),
        help="Store directory written by `aegis-slurm ingest`.",
    )(f)


def _load(
    store: Path, events_paths: tuple[Path, ...], signals_path: Path | None
) -> tuple[Any, Any]:
    """(attributed runs, events or None)."""
    import polars as pl

    from aegis_slurm.accounting import load_runs
    from aegis_slurm.accounting.events import load_events
    from aegis_slurm.analytics.attribution import attribute_failures

    runs = load_runs(store)
    events = load_events(events_paths) if events_paths else None
    signals = None
    if signals_path is not None:
        if signals_path.suffix == ".parquet":
            signals = pl.read_parquet(signals_path)
        else:
            signals = pl.read_csv(signals_path, try_parse_dates=True)
        signals = signals.with_columns(
            pl.col("time").cast(pl.Datetime("us")).dt.replace_time_zone("UTC")
            if signals.schema["time"] != pl.Datetime("us", "UTC")
            else pl.col("time"),
            pl.col("critical").cast(pl.Boolean),
        )
    # Epilog signals brought in by `aegis-slurm signals collect` are used automatically
    from aegis_slurm.accounting.signals import load_signals

    collected = load_signals(store)
    if collected is not None and not collected.is_empty():
        cols = ["node", "time", "signal", "critical"]
        signals = (
            collected.select(cols)
            if signals is None
            else pl.concat([signals.select(cols), collected.select(cols)])
        )
    return attribute_failures(runs, signals, events), events


@click.command()
@_store_options
def taxonomy(
    store: Path, events_paths: tuple[Path, ...], signals_path: Path | None, as_json: bool
) -> None:
    """Runs and GPU-hours per end state, infra vs user failures, causes (HPCA'25 Fig. 3)."""
    from aegis_slurm.analytics.taxonomy import failure_taxonomy

    runs, _ = _load(store, events_paths, signals_path)
    res = failure_taxonomy(runs)

    def human(r: dict[str, Any]) -> str:
        return (
            f"{r['total_runs']} runs, {r['total_gpu_hours']:,.0f} GPU-hours\n\nBy end state\n"
            + _table(r["by_state"], ["state", "runs", "run_share", "gpu_hours", "gpu_hour_share"])
            + "\n\nBy category\n"
            + _table(
                r["by_category"], ["category", "runs", "run_share", "gpu_hours", "gpu_hour_share"]
            )
            + f"\n\nAttribution sources: {json.dumps(r['attribution_sources'])}"
        )

    _emit(res, as_json, human)


@click.command("failure-rate")
@_store_options
@click.option(
    "--min-gpus", default=128, show_default=True, help="Count runs with MORE than this many GPUs."
)
@click.option("--window-days", default=30, show_default=True, help="Rolling window for the series.")
def failure_rate_cmd(
    store: Path,
    events_paths: tuple[Path, ...],
    signals_path: Path | None,
    as_json: bool,
    min_gpus: int,
    window_days: int,
) -> None:
    """Cluster failure rate r_f per node-day (HPCA'25 §V), rolling series and causes."""
    from aegis_slurm.analytics.failure_rate import failure_rate, rolling_failure_rate

    runs, _ = _load(store, events_paths, signals_path)
    res = failure_rate(runs, min_gpus=min_gpus)
    res["rolling"] = rolling_failure_rate(runs, min_gpus, window_days).to_dicts()

    def human(r: dict[str, Any]) -> str:
        rf = r["rf_per_node_day"]
        s = (
            f"r_f = {_fmt(rf and rf * 1000)} per 1000 node-days "
            f"(90% CI {_fmt(r['ci90_low'] and r['ci90_low'] * 1000)}-"
            f"{_fmt(r['ci90_high'] and r['ci90_high'] * 1000)}): {r['failures']} failures "
            f"({r['node_fail']} NODE_FAIL, {r['failed_hw']} FAILED hw) over "
            f"{r['node_days']:,.1f} node-days of {r['runs']} runs with > {r['min_gpus']} GPUs"
        )
        if r["lower_bound_only"]:
            s += "\nNo FAILED run attributed: this is a NODE_FAIL-only lower bound."
        return (
            s
            + "\n\n"
            + _table(r["by_cause"], ["cause", "attribution_source", "failures", "rf_per_node_day"])
        )

    _emit(res, as_json, human)


@click.command()
@_store_options
@click.option(
    "--min-gpus", default=128, show_default=True, help="Population for r_f (theory line)."
)
@click.option(
    "--method",
    type=click.Choice(["chi2", "gamma", "jeffreys"]),
    default="chi2",
    show_default=True,
    help="90% interval method.",
)
@click.option(
    "--project",
    "project_sizes",
    default="16384,131072",
    show_default=True,
    help="Comma-separated GPU counts to project MTTF for.",
)
@click.option("--gpus-per-node", default=8, show_default=True)
def mttf(
    store: Path,
    events_paths: tuple[Path, ...],
    signals_path: Path | None,
    as_json: bool,
    min_gpus: int,
    method: str,
    project_sizes: str,
    gpus_per_node: int,
) -> None:
    """MTTF by power-of-two GPU bucket with 90% intervals and the 1/(N r_f) line (Fig. 7)."""
    from aegis_slurm.analytics.failure_rate import failure_rate
    from aegis_slurm.analytics.mttf import mttf_by_size, project_mttf

    runs, _ = _load(store, events_paths, signals_path)
    rf = failure_rate(runs, min_gpus=min_gpus)["rf_per_node_day"]
    sizes = [int(x) for x in project_sizes.split(",") if x.strip()]
    res = {
        "rf_per_node_day": rf,
        "method": method,
        "buckets": mttf_by_size(runs, rf, method=method),  # type: ignore[arg-type]
        "projections": project_mttf(sizes, rf, gpus_per_node) if rf else [],
    }

    def human(r: dict[str, Any]) -> str:
        return (
            f"r_f = {_fmt(r['rf_per_node_day'])} per node-day; intervals: {r['method']}\n"
            + _table(
                r["buckets"],
                [
                    "gpus",
                    "runs",
                    "failures",
                    "runtime_hours",
                    "mttf_hours",
                    "ci90_low_hours",
                    "ci90_high_hours",
                    "theory_mttf_hours",
                ],
            )
            + "\n\nProjections\n"
            + _table(r["projections"], ["gpus", "n_nodes", "mttf_hours"])
        )

    _emit(res, as_json, human)


def _job_options(f: Callable[..., Any]) -> Callable[..., Any]:
    opts = [
        click.option(
            "--gpus", type=click.IntRange(min=1), required=True, help="GPUs of the job (>= 1)."
        ),
        click.option(
            "--gpus-per-node",
            type=click.IntRange(min=1),
            default=8,
            show_default=True,
            help="GPUs per node: the job's node count is ceil(gpus / this).",
        ),
        click.option(
            "--rf",
            type=click.FloatRange(min=0.0),
            required=True,
            help="Failures per node-day, e.g. 0.0065 (>= 0; 0 means no failures expected).",
        ),
        click.option(
            "--restart-min",
            "u0",
            type=click.FloatRange(min=0.0),
            required=True,
            help="u0: restart/init minutes (>= 0).",
        ),
        click.option(
            "--ckpt-write-min",
            "w",
            type=click.FloatRange(min=0.0),
            default=0.0,
            show_default=True,
            help="Blocking checkpoint write minutes (0 = non-blocking).",
        ),
        click.option(
            "--queue-min",
            "q",
            type=click.FloatRange(min=0.0),
            default=0.0,
            show_default=True,
            help="Expected queue wait after submit and every interruption, minutes.",
        ),
        click.option("--json", "as_json", is_flag=True, help="Print one JSON object."),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


@click.command()
@_job_options
@click.option(
    "--ckpt-interval-min",
    "dt",
    type=click.FloatRange(min=0.0, min_open=True),
    required=True,
    help="Checkpoint interval, minutes (> 0).",
)
@click.option(
    "--run-days",
    type=click.FloatRange(min=0.0, min_open=True),
    default=30.0,
    show_default=True,
    help="Training time the run needs, days (finite form and Monte Carlo).",
)
@click.option(
    "--monte-carlo",
    "reps",
    type=click.IntRange(min=0),
    default=1000,
    show_default=True,
    help="Monte Carlo replications (0 = skip).",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Monte Carlo RNG seed.")
def ettr(
    gpus: int,
    gpus_per_node: int,
    rf: float,
    u0: float,
    w: float,
    q: float,
    as_json: bool,
    dt: float,
    run_days: float,
    reps: int,
    seed: int,
) -> None:
    """E[ETTR]: published, queue-aware long-run, finite-run, exact renewal and Monte Carlo."""
    from aegis_slurm.analytics import ettr as E

    n = -(-gpus // gpus_per_node)
    run_min = run_days * 1440.0
    res: dict[str, Any] = {
        "gpus": gpus,
        "n_nodes": n,
        "rf": rf,
        "mttf_hours": E.job_mttf_hours(n, rf),
        "ettr_published": E.ettr_published(n, rf, u0, dt, w),
        "ettr": E.ettr_longrun(n, rf, u0, dt, w, q),
        "ettr_finite": E.ettr_finite(n, rf, u0, dt, w, q, run_min),
        "ettr_renewal": E.ettr_renewal(n, rf, u0, dt, w, q),
        "ettr_renewal_finite": E.ettr_renewal(n, rf, u0, dt, w, q, run_min),
        "monte_carlo": None,
    }
    if reps > 0:
        try:
            res["monte_carlo"] = E.simulate_ettr(n, rf, u0, dt, w, q, run_min, reps, seed).as_dict()
        except RuntimeError as exc:
            res["monte_carlo"] = {"mean": None, "stderr": None, "error": str(exc)}

    def human(r: dict[str, Any]) -> str:
        mc = r["monte_carlo"] or {}
        return "\n".join(
            [
                f"{r['gpus']} GPUs ({r['n_nodes']} nodes), MTTF {_fmt(r['mttf_hours'])} h",
                f"E[ETTR] published (no q) {_fmt(r['ettr_published'])}",
                f"E[ETTR] long run        {_fmt(r['ettr'])}",
                f"E[ETTR] finite run      {_fmt(r['ettr_finite'])}",
                f"E[ETTR] exact renewal   {_fmt(r['ettr_renewal_finite'])}",
                f"Monte Carlo             {_fmt(mc.get('mean'))} ± {_fmt(mc.get('stderr'), 4)}",
            ]
        )

    _emit(res, as_json, human)


@click.command("checkpoint-plan")
@_job_options
@click.option(
    "--target-ettr",
    type=click.FloatRange(min=0.0, max=1.0, min_open=True, max_open=True),
    default=None,
    help="Solve for the longest interval reaching this E[ETTR] (0 < x < 1).",
)
def checkpoint_plan_cmd(
    gpus: int,
    gpus_per_node: int,
    rf: float,
    u0: float,
    w: float,
    q: float,
    as_json: bool,
    target_ettr: float | None,
) -> None:
    """Checkpoint interval: Young, Daly, the E[ETTR] optimum and the interval for a target."""
    from aegis_slurm.analytics.checkpoint import checkpoint_plan

    n = -(-gpus // gpus_per_node)
    res = checkpoint_plan(n, rf, u0, w, q, target_ettr)
    res["gpus"] = gpus

    def human(r: dict[str, Any]) -> str:
        s = (
            f"{r['gpus']} GPUs, job MTTF {_fmt(r['mttf_min'])} min\n"
            f"Young {_fmt(r['young_min'])} min, Daly {_fmt(r['daly_min'])} min, "
            f"E[ETTR] optimum {_fmt(r['optimal_min'])} min -> {_fmt(r['ettr_at_optimal'])} "
            "(exact renewal form)"
        )
        for note in r["notes"]:
            s += f"\nNote: {note}"
        if r["target_ettr"] is not None:
            s += f"\nTarget {r['target_ettr']}: " + (
                f"{_fmt(r['interval_for_target_min'])} min"
                if r["interval_for_target_min"] is not None
                else str(r["target_reason"])
            )
        return s

    _emit(res, as_json, human)


def _linked(
    store: Path, events_paths: tuple[Path, ...], signals_path: Path | None
) -> tuple[Any, Any]:
    from aegis_slurm.analytics.job_runs import link_job_runs

    runs, events = _load(store, events_paths, signals_path)
    return link_job_runs(runs), events


@click.command()
@_store_options
def goodput(
    store: Path, events_paths: tuple[Path, ...], signals_path: Path | None, as_json: bool
) -> None:
    """GPU-hours lost to infrastructure failures, first and second order (Fig. 8)."""
    from aegis_slurm.analytics.goodput import goodput_lost

    runs, _ = _linked(store, events_paths, signals_path)
    res = goodput_lost(runs)

    def human(r: dict[str, Any]) -> str:
        return (
            f"First order {r['goodput_lost_first_order']:,.1f} GPU-h, second order "
            f"{r['goodput_lost_second_order']:,.1f} GPU-h (share {_fmt(r['share_second_order'])}); "
            f"{r['preempted_runs_linked']} preemptions linked\n"
            + _table(
                r["by_size"],
                [
                    "gpu_bucket",
                    "failed_runs",
                    "first_order_gpu_hours",
                    "preempted_runs",
                    "second_order_gpu_hours",
                ],
            )
        )

    _emit(res, as_json, human)


@click.command("requeue-loops")
@_store_options
@click.option("--min-failed-runs", "k", default=3, show_default=True)
@click.option("--window-hours", default=24.0, show_default=True)
@click.option("--short-min", default=30.0, show_default=True, help="Median run time below this.")
@click.option(
    "--rf",
    type=float,
    default=None,
    help="Failures per node-day for the bad-luck test of all-infrastructure streaks "
    "(default: r_f measured on the store, runs with > 128 GPUs).",
)
def requeue_loops_cmd(
    store: Path,
    events_paths: tuple[Path, ...],
    signals_path: Path | None,
    as_json: bool,
    k: int,
    window_hours: float,
    short_min: float,
    rf: float | None,
) -> None:
    """Crash loops: jobs requeued again and again, with the preemptions they caused."""
    from datetime import timedelta

    from aegis_slurm.analytics.failure_rate import failure_rate
    from aegis_slurm.analytics.loops import requeue_loops

    runs, _ = _linked(store, events_paths, signals_path)
    if rf is None:
        rf = failure_rate(runs)["rf_per_node_day"]
    res = {
        "rf_per_node_day": rf,
        "loops": requeue_loops(
            runs, k, timedelta(hours=window_hours), timedelta(minutes=short_min), rf=rf
        ),
    }

    def human(r: dict[str, Any]) -> str:
        return _table(
            r["loops"],
            [
                "job_id",
                "gpus",
                "requeues",
                "median_run_min",
                "preemptions_caused",
                "gpu_hours_lost",
            ],
        )

    _emit(res, as_json, human)


@click.command("lemon-nodes")
@_store_options
@click.option("--window-days", default=28, show_default=True)
@click.option(
    "--min-node-fails",
    default=3,
    show_default=True,
    help="Blamed infrastructure failures that flag a node on their own.",
)
def lemon_nodes_cmd(
    store: Path,
    events_paths: tuple[Path, ...],
    signals_path: Path | None,
    as_json: bool,
    window_days: int,
    min_node_fails: int,
) -> None:
    """Nodes that keep failing jobs over the last WINDOW days, ranked (HPCA'25 §V-C)."""
    from aegis_slurm.analytics.lemon import LemonThresholds, lemon_nodes

    runs, events = _load(store, events_paths, signals_path)
    res = lemon_nodes(
        runs,
        events,
        thresholds=LemonThresholds(window_days=window_days, min_node_fails=min_node_fails),
    )

    def human(r: dict[str, Any]) -> str:
        return f"Window {r['window_start']} .. {r['window_end']}\n" + _table(
            r["nodes"],
            [
                "rank",
                "node",
                "node_fails",
                "multi_node_node_fails",
                "single_node_node_fails",
                "out_count",
                "single_node_failure_rate",
            ],
        )

    _emit(res, as_json, human)


@click.command("measured-ettr")
@_store_options
@click.option("--qos", default=None, help="Keep job runs of this QOS only (the paper: highest).")
@click.option("--restart-min", "u0", default=5.0, show_default=True, help="u0 per restart.")
@click.option("--ckpt-interval-min", "dt", default=60.0, show_default=True)
@click.option("--min-hours", default=24.0, show_default=True, help="Minimum training time.")
@click.option("--min-gpus", default=128, show_default=True, help="Population for r_f.")
def measured_ettr_cmd(
    store: Path,
    events_paths: tuple[Path, ...],
    signals_path: Path | None,
    as_json: bool,
    qos: str | None,
    u0: float,
    dt: float,
    min_hours: float,
    min_gpus: int,
) -> None:
    """ETTR measured on real job runs next to E[ETTR] (Fig. 9), and the job-size distribution
    with GPU-time shares (Fig. 6)."""
    from aegis_slurm.analytics.failure_rate import failure_rate
    from aegis_slurm.analytics.job_runs import (
        measured_ettr,
        measured_ettr_summary,
        size_distribution,
    )

    runs, _ = _linked(store, events_paths, signals_path)
    rf = failure_rate(runs, min_gpus=min_gpus)["rf_per_node_day"]
    per = measured_ettr(runs, rf, u0_min=u0, dt_cp_min=dt, min_training_hours=min_hours, qos=qos)
    res = {
        "rf_per_node_day": rf,
        "job_runs": per.height,
        "measured_ettr": measured_ettr_summary(per),
        "size_distribution": size_distribution(runs),
    }

    def human(r: dict[str, Any]) -> str:
        return (
            f"{r['job_runs']} job runs kept; r_f {_fmt(r['rf_per_node_day'])}/node-day\n"
            + _table(
                r["measured_ettr"],
                ["gpu_bucket", "job_runs", "measured_ettr", "expected_ettr", "mean_queue_min"],
            )
            + "\n\nJob sizes\n"
            + _table(
                r["size_distribution"],
                ["gpu_bucket", "jobs", "job_share", "gpu_hours", "gpu_hour_share"],
            )
        )

    _emit(res, as_json, human)
