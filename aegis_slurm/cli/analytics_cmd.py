"""Reliability analytics commands: taxonomy, failure-rate, mttf, ettr, checkpoint-plan, goodput,
requeue-loops, lemon-nodes.  Every command takes ``--json`` and then prints one JSON object."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import click

from aegis_slurm.cli.store_options import load_period_inputs, store_options


def _emit(result: dict[str, Any], as_json: bool, human: Callable[[dict[str, Any]], str]) -> None:
    from aegis_slurm.sections import clean

    result = clean(result)
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


def _by_option(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--by",
        type=click.Choice(["partition", "account", "user", "qos", "gpu_type"]),
        default=None,
        help="Break the section down by this run attribute: prints "
        '{"by": ..., "groups": [{"group": value, ...section}]}, largest GPU-hours first.',
    )(f)


def _run_section(
    kw: dict[str, Any], section: Callable[..., dict[str, Any]], *args: Any
) -> dict[str, Any]:
    """The section over the period, or per group with --by (same function either way)."""
    from aegis_slurm.sections import compute
    from aegis_slurm.sections.inputs import columns_for

    by = kw.pop("by", None)
    extra = () if by is None else (compute.BY_COLUMNS[by],)
    inp = _src(kw, columns_for(section, extra=extra))
    if by is None:
        return section(inp, *args)
    return compute.by_group(inp, by, lambda sub: section(sub, *args))


def _emit_grouped(
    res: dict[str, Any], as_json: bool, human: Callable[[dict[str, Any]], str]
) -> None:
    if "groups" not in res or as_json:
        _emit(res, as_json, human)
        return
    from aegis_slurm.sections import clean

    for g in clean(res)["groups"]:
        click.echo(f"== {res['by']} {g['group']} ==\n{human(g)}\n")


def _src(kw: dict[str, Any], columns: Any) -> Any:
    """Inputs for the store options in ``kw`` (removes them; leaves the command's own),
    reading the run ``columns`` only."""
    return load_period_inputs(
        kw.pop("store"),
        kw.pop("events_paths"),
        kw.pop("signals_paths"),
        kw.pop("month"),
        kw.pop("start"),
        kw.pop("end"),
        kw.pop("config_path"),
        columns,
    )


@click.command()
@store_options
@_by_option
def taxonomy(**kw: Any) -> None:
    """Runs and GPU-hours per end state, infra vs user failures, causes (HPCA'25 Fig. 3)."""
    from aegis_slurm.sections import compute

    as_json = kw.pop("as_json")
    res = _run_section(kw, compute.taxonomy)

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

    _emit_grouped(res, as_json, human)


@click.command("failure-rate")
@store_options
@_by_option
@click.option(
    "--min-gpus",
    type=click.IntRange(min=0),
    default=None,
    help="Count runs with MORE than this many GPUs [default: 128 or the site config].",
)
@click.option(
    "--window-days",
    type=click.IntRange(min=1),
    default=None,
    help="Rolling window for the series, days [default: 30].",
)
def failure_rate_cmd(**kw: Any) -> None:
    """Cluster failure rate r_f per node-day (HPCA'25 §V), rolling series and causes."""
    from aegis_slurm.sections import compute

    as_json = kw.pop("as_json")
    res = _run_section(kw, compute.failure_rate, kw["min_gpus"], kw["window_days"])

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
            s += (
                "\nNo node events, signals or aegis tags: FAILED runs could not be attributed, "
                "so this counts NODE_FAIL only and is a lower bound."
            )
        return (
            s
            + "\n\n"
            + _table(r["by_cause"], ["cause", "attribution_source", "failures", "rf_per_node_day"])
        )

    _emit_grouped(res, as_json, human)


def _sizes(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    if value is None:
        return None
    try:
        sizes = tuple(int(x) for x in value.split(",") if x.strip())
    except ValueError as exc:
        raise click.BadParameter("comma-separated GPU counts, e.g. 16384,131072") from exc
    if not sizes or min(sizes) < 1:
        raise click.BadParameter("GPU counts must be >= 1")
    return sizes


@click.command()
@store_options
@_by_option
@click.option(
    "--min-gpus",
    type=click.IntRange(min=0),
    default=None,
    help="Population for r_f (theory line) [default: 128 or the site config].",
)
@click.option(
    "--method",
    type=click.Choice(["chi2", "gamma", "jeffreys"]),
    default=None,
    help="90% interval method [default: chi2].",
)
@click.option(
    "--project",
    "project_sizes",
    default=None,
    callback=_sizes,
    help="Comma-separated GPU counts to project MTTF for [default: 16384,131072].",
)
@click.option(
    "--gpus-per-node",
    type=click.IntRange(min=1),
    default=None,
    help="GPUs per node for projections [default: site config, else from the data].",
)
def mttf(**kw: Any) -> None:
    """MTTF by power-of-two GPU bucket with 90% intervals and the 1/(N r_f) line (Fig. 7)."""
    from aegis_slurm.sections import compute

    as_json = kw.pop("as_json")
    res = _run_section(
        kw, compute.mttf, kw["min_gpus"], kw["method"], kw["project_sizes"], kw["gpus_per_node"]
    )

    def human(r: dict[str, Any]) -> str:
        return (
            f"r_f = {_fmt(r['rf_per_node_day'])} per node-day; intervals: {r['method']}; "
            f"{r['gpus_per_node']} GPUs/node ({r['gpus_per_node_source']})\n"
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

    _emit_grouped(res, as_json, human)


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
        # λΔt: the linear forms hold only while it is small (≲ 0.1).
        "lambda_dt": E.job_failure_rate_per_min(n, rf) * dt,
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
                f"E[ETTR] exact renewal   {_fmt(r['ettr_renewal_finite'])}"
                + (
                    f"   <- the one to use: λΔt = {r['lambda_dt']:.2f} is not small"
                    if r["lambda_dt"] > 0.1
                    else ""
                ),
                f"Monte Carlo             {_fmt(mc.get('mean'))} ± {_fmt(mc.get('stderr'), 4)}",
            ]
        )

    _emit_grouped(res, as_json, human)


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

    _emit_grouped(res, as_json, human)


@click.command()
@store_options
@_by_option
def goodput(**kw: Any) -> None:
    """GPU-hours lost to infrastructure failures, first and second order (Fig. 8)."""
    from aegis_slurm.sections import compute

    as_json = kw.pop("as_json")
    res = _run_section(kw, compute.goodput)

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

    _emit_grouped(res, as_json, human)


@click.command("requeue-loops")
@store_options
@click.option(
    "--min-failed-runs",
    "k",
    type=click.IntRange(min=2),
    default=None,
    help="Consecutive failed runs that make a loop [default: 3].",
)
@click.option(
    "--window-hours",
    type=click.FloatRange(min=0.0, min_open=True),
    default=None,
    help="The failed runs must fall within this many hours [default: 24].",
)
@click.option(
    "--short-min",
    type=click.FloatRange(min=0.0, min_open=True),
    default=None,
    help="Median run time below this, minutes [default: 30].",
)
@click.option(
    "--rf",
    type=click.FloatRange(min=0.0),
    default=None,
    help="Failures per node-day for the bad-luck test of all-infrastructure streaks "
    "(default: r_f measured in the period, runs with > 128 GPUs).",
)
def requeue_loops_cmd(**kw: Any) -> None:
    """Crash loops: jobs requeued again and again, with the preemptions they caused.  A loop
    that straddles the period's edge is seen whole (history is read beyond the period)."""
    from aegis_slurm.sections import compute

    as_json = kw.pop("as_json")
    inp = _src(kw, compute.requeue_loops.columns)
    res = compute.requeue_loops(inp, kw["k"], kw["window_hours"], kw["short_min"], kw["rf"])

    def human(r: dict[str, Any]) -> str:
        return _table(
            r["loops"],
            [
                "job_id",
                "gpus",
                "requeues",
                "failed_runs",
                "median_run_min",
                "preemptions_caused",
                "gpu_hours_lost",
            ],
        )

    _emit_grouped(res, as_json, human)


@click.command("lemon-nodes")
@store_options
@click.option(
    "--window-days",
    type=click.IntRange(min=1),
    default=None,
    help="Trailing window ending at the period's last run end, days [default: 28].",
)
@click.option(
    "--min-node-fails",
    type=click.IntRange(min=1),
    default=None,
    help="Blamed infrastructure failures that flag a node on their own [default: 3].",
)
def lemon_nodes_cmd(**kw: Any) -> None:
    """Nodes that keep failing jobs over the last WINDOW days, ranked (HPCA'25 §V-C)."""
    from aegis_slurm.sections import compute

    as_json = kw.pop("as_json")
    res = compute.lemon_nodes(
        _src(kw, compute.lemon_nodes.columns), kw["window_days"], kw["min_node_fails"]
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

    _emit_grouped(res, as_json, human)


@click.command("measured-ettr")
@store_options
@click.option("--qos", default=None, help="Keep job runs of this QOS only (the paper: highest).")
@click.option(
    "--restart-min",
    "u0",
    type=click.FloatRange(min=0.0),
    default=None,
    help="u0 per restart, minutes [default: 5 or the site config].",
)
@click.option(
    "--ckpt-interval-min",
    "dt",
    type=click.FloatRange(min=0.0, min_open=True),
    default=None,
    help="Checkpoint interval, minutes [default: 60 or the site config].",
)
@click.option(
    "--min-hours",
    type=click.FloatRange(min=0.0),
    default=None,
    help="Minimum training time of a job run, hours [default: 24].",
)
@click.option(
    "--min-gpus",
    type=click.IntRange(min=0),
    default=None,
    help="Population for r_f [default: 128 or the site config].",
)
def measured_ettr_cmd(**kw: Any) -> None:
    """ETTR measured on real job runs next to E[ETTR] (Fig. 9), and the job-size distribution
    with GPU-time shares (Fig. 6)."""
    from aegis_slurm.sections import compute

    as_json = kw.pop("as_json")
    res = compute.measured_ettr(
        _src(kw, compute.measured_ettr.columns),
        kw["qos"],
        kw["u0"],
        kw["dt"],
        kw["min_hours"],
        kw["min_gpus"],
    )

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

    _emit_grouped(res, as_json, human)


@click.command()
@store_options
@click.option(
    "--failures-only",
    is_flag=True,
    help="Count only failure events (leave out maintenance, Prolog/Epilog errors).",
)
def availability(**kw: Any) -> None:
    """Node availability, downtime per node and MTTR from the node events (--events)."""
    from aegis_slurm.sections import compute

    as_json = kw.pop("as_json")
    failures_only = kw.pop("failures_only")
    if not kw["events_paths"]:
        raise click.UsageError("availability needs node events: give --events FILE")
    inp = _src(kw, compute.availability.columns)
    if inp.events is None:
        raise click.UsageError("availability needs node events: give --events FILE")
    res = compute.availability(inp, failures_only)

    def human(r: dict[str, Any]) -> str:
        if r.get("availability") is None:
            return "no run in the period: nothing to measure against"
        return (
            f"{r['nodes']} nodes, availability {100 * r['availability']:.2f}% "
            f"({r['downtime_node_hours']:,.1f} of {r['node_hours']:,.0f} node-hours out); "
            f"MTTR {_fmt(r['mttr_hours'])} h over {r['repaired_outages']} repaired outages\n"
            + _table(r["worst_nodes"], ["node", "downtime_h", "outages"])
        )

    _emit(res, as_json, human)
