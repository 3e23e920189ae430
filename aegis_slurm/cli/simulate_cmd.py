"""``aegis-slurm simulate``: write a synthetic sacct history with planted ground truth."""

from __future__ import annotations

from pathlib import Path

import click

from aegis_slurm.cli import echo_json


@click.command()
@click.option(
    "--out",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="sacct --parsable2 export to write; .events.txt, .signals.parquet and "
    ".truth.json are written beside it.",
)
@click.option(
    "--nodes",
    default=512,
    show_default=True,
    type=click.IntRange(min=1, max=100_000),
    help="Nodes (8 GPUs each).",
)
@click.option(
    "--days",
    default=30.0,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True, max=3660),
    help="Length of the simulated history in days.",
)
@click.option(
    "--rf",
    default=0.0065,
    show_default=True,
    type=click.FloatRange(min=0, max=10),
    help="Hardware failures per node-day.",
)
@click.option("--seed", default=0, show_default=True, help="Random seed (same seed, same history).")
@click.option(
    "--jobs-per-node-day",
    default=2.0,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True, max=1000),
    help="Job submissions per node and day.",
)
@click.option(
    "--crash-loops",
    default=3,
    show_default=True,
    type=click.IntRange(min=0),
    help="Jobs planted to crash and requeue in a loop.",
)
@click.option(
    "--lemons",
    default=2,
    show_default=True,
    type=click.IntRange(min=0),
    help="Nodes planted to fail far more often than the others.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def simulate(
    out: Path,
    nodes: int,
    days: float,
    rf: float,
    seed: int,
    jobs_per_node_day: float,
    crash_loops: int,
    lemons: int,
    as_json: bool,
) -> None:
    """Simulate a cluster history (sizes and end states like RSC-1, Poisson hardware failures,
    Slurm requeue semantics, crash loops, lemon nodes).  Deterministic by --seed."""
    from aegis_slurm.simulate.history import SimConfig, write_history
    from aegis_slurm.simulate.history import simulate as run

    out.parent.mkdir(parents=True, exist_ok=True)  # --out newdir/x: create newdir

    res = run(
        SimConfig(
            nodes=nodes,
            days=days,
            rf=rf,
            seed=seed,
            jobs_per_node_day=jobs_per_node_day,
            crash_loops=crash_loops,
            lemons=lemons,
        )
    )
    paths = write_history(res, out)
    summary = {
        "records": res.runs.height,
        "paths": paths,
        "infra_failures": res.truth["infra_failures"],
        "crash_loops": len(res.truth["crash_loops"]),
        "lemon_nodes": res.truth["lemon_nodes"],
    }
    if as_json:
        echo_json(summary)
    else:
        click.echo(f"wrote {summary['records']} records to {out} (truth: {paths['truth']})")
