"""``aegis-slurm demo``: a simulated month of a GPU cluster, ingested and analysed end to end."""

from __future__ import annotations

import json
from pathlib import Path

import click


@click.command()
@click.option("--out", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Directory for the demo history, its store and summary.json.")
@click.option("--nodes", default=256, show_default=True, help="Simulated nodes (8 GPUs each).")
@click.option("--days", default=30.0, show_default=True)
@click.option("--seed", default=1, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def demo(out: Path, nodes: int, days: float, seed: int, as_json: bool) -> None:
    """Simulate a cluster history with planted failures and crash loops, ingest it through the
    real sacct parser, and print the headline reliability figures.

    The history goes to OUT/history/ (a sacct --parsable2 export plus sacctmgr events), the
    store to OUT/store/, and every figure to OUT/summary.json.
    """
    from aegis_slurm.accounting import ingest_files, load_runs
    from aegis_slurm.accounting.events import load_events
    from aegis_slurm.analytics.attribution import attribute_failures
    from aegis_slurm.analytics.failure_rate import failure_rate
    from aegis_slurm.analytics.job_runs import link_job_runs
    from aegis_slurm.analytics.loops import requeue_loops
    from aegis_slurm.analytics.mttf import mttf_by_size
    from aegis_slurm.analytics.taxonomy import failure_taxonomy
    from aegis_slurm.simulate.history import SimConfig, simulate, write_history

    out.mkdir(parents=True, exist_ok=True)
    (out / "history").mkdir(exist_ok=True)
    result = simulate(SimConfig(nodes=nodes, days=days, seed=seed))
    paths = write_history(result, out / "history" / "sacct.txt")
    ingest = ingest_files([paths["sacct"]], out / "store")
    runs = attribute_failures(load_runs(out / "store"), None, load_events([paths["events"]]))
    rate = failure_rate(runs)
    summary = {
        "ingest": ingest,
        "taxonomy": failure_taxonomy(runs),
        "failure_rate": rate,
        "mttf": mttf_by_size(runs, rf=rate["rf_per_node_day"]),
        "requeue_loops": requeue_loops(link_job_runs(runs), rf=rate["rf_per_node_day"]),
        "planted_truth": result.truth,
    }
    summary_path = out / "summary.json"
    summary_path.write_text(json.dumps(summary, indent=2, default=str) + "\n")
    if as_json:
        click.echo(json.dumps(summary, default=str))
        return
    rf = rate["rf_per_node_day"]
    click.echo(f"simulated {nodes} nodes x {days:g} days: {ingest['rows_kept']} job runs ingested")
    planted = result.truth["expected_rf_gt128"] * 1000
    click.echo(f"r_f (jobs > 128 GPUs) = {rf * 1000:.2f} per 1000 node-days, planted "
               f"{planted:.2f}" if rf else "r_f: no failures in jobs > 128 GPUs")
    click.echo(f"crash loops found: {len(summary['requeue_loops'])} "
               f"(planted {len(result.truth['crash_loops'])})")
    click.echo(f"summary: {summary_path}")
